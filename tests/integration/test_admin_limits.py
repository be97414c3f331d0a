"""The admin API's bounds against a local process that means harm, on a real
`failproofai-sidecar run` over loopback:

- sandbox budgets: /v1/evaluate holds at most its own slots, a waiting
  worker evaluation takes the next free slot first, and a condition that only
  waited for a slot (within its lease) is not the definition's condition_error;

- memory per request: bodies built to amplify (a 25 MB JSON of empty
  objects, outside and inside a transcript) keep the daemon's peak RSS under
  its idle RSS plus four times the bytes in flight;
- slow clients: hundreds of connections that never finish their headers are
  closed after 5 s and do not starve /healthz."""

import json
import os
import selectors
import socket
import tempfile
import threading
import time
import unittest

from admin_harness import Sidecar, dead_server, emulator, recv_all, sample_transcript

MB = 1024 * 1024


def proc_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def amplification_body(size, inside_transcript):
    """~size bytes of {"kind":"raw","source":"1",...:[{},{},...]}."""
    n = (size - 200) // 3
    items = ",".join(["{}"] * n)
    if inside_transcript:
        return ('{"kind":"raw","source":"1","transcript":{"schema_version":"2","events":[%s]}}'
                % items).encode()
    return ('{"kind":"raw","source":"1","x":[%s]}' % items).encode()


def post_raw(port, auth_line, body, results, i):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
            s.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Content-Type: application/json\r\n" + auth_line +
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
            try:
                s.sendall(body)
            except (BrokenPipeError, ConnectionResetError):
                pass
            data = recv_all(s)
        results[i] = data.split(b"\r\n", 1)[0]
    except OSError as e:
        results[i] = repr(e).encode()


class AmplificationTest(unittest.TestCase):
    def test_eight_concurrent_amplification_bodies_stay_bounded(self):
        env = {"ASAN_OPTIONS": "quarantine_size_mb=0:" + os.environ.get("ASAN_OPTIONS", "")}
        # a playground queue deep enough that all eight reach the body parser
        with Sidecar(dead_server(), "--playground-queue", "7", env=env) as sc:
            pid = sc.proc.pid
            time.sleep(1.0)  # past start-up allocations
            idle = proc_kib(pid, "VmRSS")
            bodies = [amplification_body(25 * MB, inside_transcript=i % 2 == 1) for i in range(8)]
            in_flight_kib = sum(len(b) for b in bodies) // 1024
            results = [None] * len(bodies)
            threads = [threading.Thread(target=post_raw, args=(sc.port, sc.auth_line(), b, results, i))
                       for i, b in enumerate(bodies)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(180)
            peak = proc_kib(pid, "VmHWM")
            print(f"\nidle RSS {idle / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, "
                  f"in flight {in_flight_kib / 1024:.1f} MiB; answers {sorted(set(results))}")
            for r in results:
                # refused before any tree: too complex, not a transcript, or busy
                self.assertRegex(r or b"", rb"^HTTP/1\.1 (413|422|503) ", results)
            self.assertLess(peak, idle + 4 * in_flight_kib)
            self.assertEqual(sc.get("/healthz").status, 200)
            self.assertTrue(sc.alive())


class Slowloris:
    """`n` connections that each send a request line and then one header
    byte per second, never finishing their headers; a connection the server
    closes is opened again at once."""

    def __init__(self, port, n):
        self.port, self.n = port, n
        self.sel = selectors.DefaultSelector()
        self.closed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open_one(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ)

    def run(self):
        for _ in range(self.n):
            self.open_one()
        last = time.time()
        while not self.stop.is_set():
            for key, _ in self.sel.select(timeout=0.2):
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(key.fileobj)
                    key.fileobj.close()
                    self.closed += 1
                    if not self.stop.is_set():
                        self.open_one()
            if time.time() - last >= 1:
                last = time.time()
                for key in list(self.sel.get_map().values()):
                    try:
                        key.fileobj.send(b"a")
                    except OSError:
                        pass
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


class SlowClientsTest(unittest.TestCase):
    def test_slowloris_is_swept_and_healthz_keeps_answering(self):
        with Sidecar(dead_server()) as sc:
            attack = Slowloris(sc.port, 600)
            attack.thread.start()
            probes, worst, end = 0, 0.0, time.time() + 20
            try:
                while time.time() < end:
                    t0 = time.time()
                    r = sc.get("/healthz", timeout=2)  # raises past the client's timeout
                    self.assertEqual(r.status, 200)
                    worst = max(worst, time.time() - t0)
                    probes += 1
                    time.sleep(0.2)
            finally:
                attack.stop.set()
                attack.thread.join(30)
            print(f"\n{probes} /healthz probes under 600 slow connections, slowest "
                  f"{worst * 1000:.0f} ms; the server closed {attack.closed} slow connections")
            # every slow connection was closed at least once by the sweeper
            self.assertGreaterEqual(attack.closed, 600)
            self.assertTrue(sc.alive())


# A CPU bomb for the playground: each find() scans ~1 MB (one step), so the
# step budget lets it run until its wall-clock timeout.
BOMB = "[x for x in range(100000) if ('a' * 10**6 + 'b').find('a' * 10**5 + 'b') < 0]"
GUARDED = [{
    "eval_key": "guarded", "eval_version": "1", "display_name": "Guarded", "result_kind": "metric",
    "labels": [], "condition_source": "session.event_count > 0",
    "evaluator_source": "EvalResult(metrics={'guarded': Metric(session.event_count)})",
    "timeout_seconds": 2,
}]


class PlaygroundBudgetTest(unittest.TestCase):
    """Playground bombs beside a real assignment whose condition may run for
    2 s: the bombs hold one slot at most, and the condition is selected
    whether a slot was free (two sandboxes) or it had to wait past its own
    2 s for the one the bombs share (one sandbox: the waiting condition takes
    the slot before the queued bombs)."""

    def run_beside_bombs(self, max_sandboxes):
        with tempfile.TemporaryDirectory() as tmp:
            defs = os.path.join(tmp, "defs.json")
            with open(defs, "w") as f:
                json.dump(GUARDED, f)
            emu = emulator("--sessions", "0", "--poll-seconds", "1", "--lease-seconds", "60",
                           "--definitions", defs)
            emu.start()
            self.addCleanup(emu.stop)
            with Sidecar(emu.base, "--max-sandboxes", str(max_sandboxes),
                         "--playground-sandboxes", "1") as sc:
                sc.wait_for(lambda: sc.get("/readyz").status == 200, what="registration")
                answers = [None] * 3

                def bomb(i):
                    answers[i] = sc.request("POST", "/v1/evaluate", timeout=60, body={
                        "kind": "raw", "source": BOMB, "timeout_seconds": 8})
                threads = [threading.Thread(target=bomb, args=(i,)) for i in range(3)]
                for t in threads:
                    t.start()
                time.sleep(1.0)  # one bomb holds a slot, two wait for the playground's
                r = emu.request("POST", "/emulator/v1/sessions", sample_transcript())
                self.assertIn(r.status, (200, 201), r)
                runs = sc.wait_for(lambda: emu.request("GET", "/emulator/v1/runs").body["runs"],
                                   timeout=60, what="the assignment's run")
                for t in threads:
                    t.join(60)
                metrics = sc.get("/metrics").raw.decode()
        self.assertEqual([r["status"] for r in runs], ["succeeded"], runs)
        self.assertEqual(runs[0]["eval_key"], "guarded")
        errors = [ln for ln in metrics.splitlines()
                  if ln.startswith("failproofai_sidecar_conditions_total")
                  and 'reason="condition_error"' in ln and not ln.endswith(" 0")]
        self.assertEqual(errors, [])
        for a in answers:
            self.assertEqual(a.status, 200, a)
            self.assertEqual((a.body["stage"], a.body["error_type"]), ("limit", "timeout"), a)
        # one bomb ran to its timeout; the others waited for the playground's slot
        long_runs = [a.body["run_ms"] for a in answers if a.body["run_ms"] > 1000]
        self.assertEqual(len(long_runs), 1, [a.body for a in answers])

    def test_bombs_hold_one_of_two_slots(self):
        self.run_beside_bombs(2)

    def test_a_waiting_condition_goes_before_queued_bombs(self):
        self.run_beside_bombs(1)

def active_sandboxes(sc):
    for ln in sc.get("/metrics").raw.decode().splitlines():
        if ln.startswith("failproofai_sidecar_active_sandboxes "):
            return float(ln.split()[1])
    raise AssertionError("no failproofai_sidecar_active_sandboxes in /metrics")


class PlaygroundQueueTest(unittest.TestCase):
    """One playground slot and a queue of DEPTH: while a bomb holds the slot,
    DEPTH + 1 more requests arrive at once; DEPTH of them wait and complete,
    exactly one is refused at once with 429 and Retry-After."""

    DEPTH = 2

    def test_overflow_gets_429_and_the_queue_completes(self):
        with Sidecar(dead_server(), "--max-sandboxes", "2",
                     "--playground-sandboxes", "1",
                     "--playground-queue", str(self.DEPTH)) as sc:
            bomb = {}

            def run_bomb():
                bomb["r"] = sc.request("POST", "/v1/evaluate", timeout=60, body={
                    "kind": "raw", "source": BOMB, "timeout_seconds": 6})
            holder = threading.Thread(target=run_bomb)
            holder.start()
            sc.wait_for(lambda: active_sandboxes(sc) >= 1, what="the bomb's sandbox")
            answers = [None] * (self.DEPTH + 1)

            def quick(i):
                answers[i] = sc.request("POST", "/v1/evaluate", timeout=60, body={
                    "kind": "raw", "source": f"{i} + 40", "timeout_seconds": 30})
            threads = [threading.Thread(target=quick, args=(i,)) for i in range(len(answers))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            holder.join(60)
        self.assertEqual((bomb["r"].status, bomb["r"].body.get("error_type")), (200, "timeout"),
                         bomb["r"])
        refused = [a for a in answers if a.status == 429]
        done = [a for a in answers if a.status == 200]
        self.assertEqual((len(refused), len(done)), (1, self.DEPTH), answers)
        self.assertEqual(refused[0].code, "too_many_requests")
        self.assertIn("playground is full", refused[0].message)
        self.assertEqual(refused[0].headers.get("retry-after"), "5")
        # the queued requests waited for the bomb's slot, then ran to their value
        for a in done:
            self.assertTrue(a.body["ok"], a.body)
            self.assertGreater(a.body["wait_ms"], 0, a.body)


if __name__ == "__main__":
    unittest.main()
