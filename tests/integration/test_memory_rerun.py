"""Sandboxes that outgrow their reservation under a small memory budget
(README "Memory budget"): sessions whose evaluator holds 200 MB for about a
second run on a sidecar whose budget leaves room for one such
sandbox, with --sandbox-reserve-mb 16. Sandboxes running side by side
outgrow their reservations while the tree is at the budget: the pool stops
them and runs their evaluations again when there is room. Every run
commits, the outcomes equal those of the same sessions without a budget,
and the re-runs are counted (status, metrics) and logged once each. Also
the one exception the README states: with a budget below the base plus one
--sandbox-memory-mb, an evaluation that needs more than fits ends as a
memory limit (here a playground evaluation of a 350 MB string, which
succeeds without the budget). And the playground under a budget that holds
one sandbox beside the workload: while a live run holds it, POST
/v1/evaluate answers 503 memory_budget_full after its short wait; once the
run is over it evaluates. And a backtest under that budget: its sandbox,
admitted while nothing live ran, is stopped once a live session arrives and
waits for the room; the live run commits, and the backtest's evaluation runs
again afterwards to the outcome it has alone."""

import json
import os
import signal
import unittest
import urllib.error
import urllib.request

from emulator_harness import EmulatorProcess, definition, definitions_file, wait_for
from fps_sidecar import Sidecar

SESSIONS = 6
# four 50 MB strings held together for about a second (a second list is
# built beside them): sandboxes that run side by side overlap
GROW = ("EvalResult(score=Score(((len([c * 50000000 for c in 'wxyz'] + [i for i in "
        "range(60000000) if i < 0]) + session.event_count) % 7) / 10))")
DEFS = [definition("grow", "Grows", "score", GROW, timeout=60),
        definition("events", "Events", "metric",
                   "EvalResult(metrics={'events': Metric(session.event_count)})")]
# needs 350 MB: more than the budget below holds for one sandbox
NEEDS_MORE = "EvalResult(score=Score(len('y' * 350000000) / 400000000))"
# the budget above the tree at start: room for one sandbox of GROW (~200 MB)
# beside the rest (the ring, the assignments, the other reservations), not
# two; below --sandbox-memory-mb 512
ROOM_MB = 330


def status(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/status", timeout=10) as r:
        return json.loads(r.read())


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def playground(port, source, status_code=False):
    body = json.dumps({"kind": "evaluator", "source": source, "eval_key": "q"}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/evaluate", data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            out = json.loads(r.read())
            return (r.status, out) if status_code else out
    except urllib.error.HTTPError as e:
        if not status_code:
            raise
        return e.code, json.loads(e.read())


# a live run that holds its sandbox for several seconds
SLOW = [definition("slow", "Slow", "score",
                   "EvalResult(score=Score(len([i for i in range(400000000) if i < 0])))",
                   timeout=60)]


# a backtest candidate that holds its sandbox until its 15 s timeout: long
# enough that a live session added while it runs is claimed before it ends
SPIN = definition("events", "Events", "metric",
                  "EvalResult(metrics={'events': Metric(sum(range(10**15)))})", version="2",
                  timeout=15)


def api(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def live_session(i):
    return {"events": [{"id": f"live{i}-{n}", "ts": "2026-08-28T12:00:00.000000Z",
                        "event_type": kind, "payload": {"n": n}}
                       for n, kind in enumerate(["agent_start", "tool_use", "agent_end"])]}


class MemoryRerunTest(unittest.TestCase):
    def base_bytes(self, common):
        """The tree at start, from a sidecar with no server to work for."""
        probe = Sidecar("http://127.0.0.1:9", token="x", concurrency=1,
                        extra=common + ["--memory-limit-mb", "0"])
        try:
            line = probe.wait_log(lambda l: l.get("msg") == "admin API listening", timeout=60)
            self.assertIsNotNone(line, probe.raw_log()[-3000:])
            return status(line["port"])["memory"]["base_bytes"]
        finally:
            probe.stop(signal.SIGKILL)

    def run_sidecar(self, extra):
        path = definitions_file(DEFS)
        emu = EmulatorProcess("--definitions", path, "--sessions", str(SESSIONS),
                              "--poll-seconds", "1", "--lease-seconds", "60")
        emu.start()
        sc = None
        try:
            sc = Sidecar(emu.base, token="emulator-token", concurrency=4,
                         extra=["--insecure-open-admin", "--max-sandboxes", "4",
                                "--sandbox-memory-mb", "512", "--sandbox-reserve-mb", "16"] +
                         extra)
            line = sc.wait_log(lambda l: l.get("msg") == "admin API listening", timeout=60)
            self.assertIsNotNone(line, sc.raw_log()[-3000:])
            port = line["port"]

            def finished():
                a = emu.state()["assignments"]
                return a["completed"] + a["skipped"] + a["dead"] >= SESSIONS
            self.assertTrue(wait_for(finished, 600, 0.2), sc.raw_log()[-3000:])
            st = emu.state()
            self.assertEqual(st["assignments"]["completed"], SESSIONS, st)
            self.assertEqual(st["runs"]["committed"], SESSIONS * len(DEFS), st)
            self.assertEqual(st["lease_losses"], 0)
            outcomes = {(r["session_id"], r["eval_key"]):
                        (r["result"]["status"],
                         json.dumps(r["result"].get("results"), sort_keys=True),
                         r["result"].get("error_code"), r["result"].get("error_message"))
                        for r in emu.runs()}
            more = playground(port, NEEDS_MORE)
            return {"outcomes": outcomes, "status": status(port), "metrics": metrics(port),
                    "more": more, "log": sc.lines()}
        finally:
            if sc is not None:
                self.assertEqual(sc.stop(signal.SIGTERM), 0)
            emu.stop()
            os.unlink(path)

    def test_outgrown_sandboxes_rerun_and_change_no_outcome(self):
        free = self.run_sidecar(["--memory-limit-mb", "0"])
        base = free["status"]["memory"]["base_bytes"]
        self.assertGreater(base, 0)
        budget_mb = (base >> 20) + ROOM_MB
        tight = self.run_sidecar(["--memory-limit-mb", str(budget_mb)])

        self.assertEqual(len(free["outcomes"]), SESSIONS * len(DEFS))
        self.assertEqual({o[0] for o in free["outcomes"].values()}, {"succeeded"})
        self.assertEqual(tight["outcomes"], free["outcomes"])

        mem = tight["status"]["memory"]
        self.assertEqual(mem["budget_bytes"], budget_mb << 20)
        self.assertGreaterEqual(mem["sandbox_reruns"], 1, mem)
        self.assertEqual(mem["sandboxes_reserved"], 0, mem)
        self.assertEqual(mem["sandboxes_excess_bytes"], 0, mem)
        self.assertIn('failproofai_sidecar_memory_reruns_total{class="live"}', tight["metrics"])
        stopped = [l for l in tight["log"]
                   if l.get("msg", "").startswith("sandbox stopped to keep the memory budget")]
        self.assertGreaterEqual(len(stopped), 1)
        # once per evaluation: never more lines than re-runs
        self.assertLessEqual(len(stopped), mem["sandbox_reruns"])
        self.assertEqual(free["status"]["memory"].get("sandbox_reruns"), 0)

        # the one exception: more than one sandbox can hold in this budget
        self.assertTrue(free["more"]["ok"], free["more"])
        self.assertFalse(tight["more"]["ok"], tight["more"])
        self.assertEqual((tight["more"]["stage"], tight["more"]["error_type"]),
                         ("limit", "memory"), tight["more"])

    def test_playground_answers_503_when_no_room(self):
        path = definitions_file(SLOW)
        emu = EmulatorProcess("--definitions", path, "--sessions", "1", "--poll-seconds", "1",
                              "--lease-seconds", "60")
        emu.start()
        scs = []
        try:
            common = ["--insecure-open-admin", "--sandbox-reserve-mb", "64"]

            def start(extra):
                sc = Sidecar(emu.base, token="emulator-token", concurrency=1,
                             extra=common + extra)
                scs.append(sc)
                line = sc.wait_log(lambda l: l.get("msg") == "admin API listening", timeout=60)
                self.assertIsNotNone(line, sc.raw_log()[-3000:])
                return sc, line["port"]
            base = self.base_bytes(common)
            # room for the ring (32), one assignment and one sandbox, not two
            budget_mb = (base >> 20) + 32 + 64 + 40
            sc, port = start(["--memory-limit-mb", str(budget_mb)])
            held = wait_for(lambda: status(port)["memory"]["sandboxes_reserved"] >= 1, 60, 0.05)
            self.assertTrue(held, sc.raw_log()[-3000:])
            code, body = playground(port, "EvalResult(score=Score(1.0))", status_code=True)
            self.assertEqual(code, 503, body)
            self.assertEqual(body["error"]["code"], "memory_budget_full", body)
            mem = status(port)["memory"]
            self.assertGreaterEqual(mem["sandboxes_refused"], 1, mem)
            self.assertIn("failproofai_sidecar_memory_refused_total 1", metrics(port))
            # the run ends: the playground evaluates again
            self.assertTrue(wait_for(lambda: emu.state()["runs"]["committed"] == 1, 300, 0.2),
                            sc.raw_log()[-3000:])
            self.assertTrue(wait_for(
                lambda: status(port)["memory"]["sandboxes_reserved"] == 0, 60, 0.05))
            code, body = playground(port, "EvalResult(score=Score(1.0))", status_code=True)
            self.assertEqual(code, 200, body)
            self.assertTrue(body["ok"], body)
        finally:
            for sc in scs:
                sc.stop(signal.SIGKILL)
            emu.stop()
            os.unlink(path)

    def test_backtest_gives_way_to_live_work(self):
        live = [definition("events", "Events", "metric",
                           "EvalResult(metrics={'events': Metric(session.event_count)})")]
        path = definitions_file(live)
        emu = EmulatorProcess("--definitions", path, "--sessions", "1", "--poll-seconds", "1",
                              "--lease-seconds", "60")
        emu.start()
        sc = None
        try:
            common = ["--insecure-open-admin", "--sandbox-reserve-mb", "64"]
            # room for the ring (32), the assignments and one sandbox, not two: a backtest
            # starts only while no sandbox runs, and a live run cannot start beside it
            budget_mb = (self.base_bytes(common) >> 20) + 32 + 64 + 40
            sc = Sidecar(emu.base, token="emulator-token", concurrency=1,
                         extra=common + ["--memory-limit-mb", str(budget_mb),
                                         "--archive-max-mb", "16"])
            line = sc.wait_log(lambda l: l.get("msg") == "admin API listening", timeout=60)
            self.assertIsNotNone(line, sc.raw_log()[-3000:])
            port = line["port"]
            archived = wait_for(lambda: emu.state()["runs"]["committed"] == 1 and
                                (status(port).get("archive") or {}).get("entries") == 1, 120, 0.1)
            self.assertTrue(archived, sc.raw_log()[-3000:])
            self.assertTrue(wait_for(lambda: status(port)["memory"]["sandboxes_reserved"] == 0,
                                     60, 0.05))

            code, bt = api(port, "POST", "/v1/backtests", {"definitions": [SPIN], "limit": 1})
            self.assertEqual(code, 202, bt)
            running = wait_for(lambda: status(port)["memory"]["sandboxes_reserved"] == 1, 60, 0.02)
            self.assertTrue(running, sc.raw_log()[-3000:])
            self.assertEqual(emu.add_session(live_session(1)).status, 201)

            # the live run gets the room: the backtest's sandbox was stopped for it
            self.assertTrue(wait_for(lambda: emu.state()["runs"]["committed"] == 2, 300, 0.1),
                            sc.raw_log()[-3000:])
            mem = status(port)["memory"]
            self.assertGreaterEqual(mem["sandbox_reruns"], 1, mem)
            self.assertIn('failproofai_sidecar_memory_reruns_total{class="background"}',
                          metrics(port))
            stopped = [l for l in sc.lines()
                       if l.get("msg", "").startswith("sandbox stopped to keep the memory budget")]
            self.assertTrue(stopped, sc.raw_log()[-3000:])
            self.assertEqual((stopped[0].get("class"), stopped[0].get("reason")),
                             ("background", "live work waits for memory"), stopped[0])
            st = emu.state()
            self.assertEqual(st["lease_losses"], 0, st)
            self.assertEqual({r["result"]["status"] for r in emu.runs()}, {"succeeded"})

            # and the backtest's evaluation ran again, to the outcome it has alone
            def finished():
                return (lambda b: b if b["state"] not in ("queued", "running") else None)(
                    api(port, "GET", f"/v1/backtests/{bt['id']}")[1])
            doc = wait_for(finished, 300, 0.2)
            self.assertTrue(doc, sc.raw_log()[-3000:])
            doc = api(port, "GET", f"/v1/backtests/{bt['id']}")[1]
            self.assertEqual(doc["state"], "done", doc)
            (key,) = doc["summary"]["eval_keys"]
            self.assertEqual((key["eval_key"], key["evaluated"], key["errors"]["candidate"]),
                             ("events", 1, 1), key)
            rows = api(port, "GET", f"/v1/backtests/{bt['id']}/results")[1]["rows"]
            self.assertEqual([r["candidate"]["status"] for r in rows], ["timed_out"], rows)
        finally:
            if sc is not None:
                sc.stop(signal.SIGKILL)
            emu.stop()
            os.unlink(path)

    def test_recent_ring_off(self):
        """--recent-max-mb 0: no recent session image is kept or counted in
        the budget, and the playground answers that the assignment is not
        kept; by default the ring's bound (32 MiB) is counted."""
        path = definitions_file(DEFS[1:])
        emu = EmulatorProcess("--definitions", path, "--sessions", "1", "--poll-seconds", "1")
        emu.start()
        scs = []
        try:
            def start(extra):
                sc = Sidecar(emu.base, token="emulator-token", concurrency=1,
                             extra=["--insecure-open-admin", "--memory-limit-mb", "4096"] + extra)
                scs.append(sc)
                line = sc.wait_log(lambda l: l.get("msg") == "admin API listening", timeout=60)
                self.assertIsNotNone(line, sc.raw_log()[-3000:])
                return sc, line["port"]
            sc, port = start(["--recent-max-mb", "0"])
            self.assertEqual(status(port)["memory"]["ring_bytes"], 0)
            self.assertTrue(wait_for(lambda: emu.state()["runs"]["committed"] == 1, 120, 0.1),
                            sc.raw_log()[-3000:])
            aid = emu.runs()[0]["assignment_id"]
            code, body = api(port, "POST", "/v1/evaluate",
                             {"kind": "raw", "source": "session.event_count", "assignment_id": aid})
            self.assertEqual((code, body["error"]["code"]), (404, "not_found"), body)
            sc.stop(signal.SIGKILL)
            _, port = start([])
            self.assertEqual(status(port)["memory"]["ring_bytes"], 32 << 20)
        finally:
            for sc in scs:
                sc.stop(signal.SIGKILL)
            emu.stop()
            os.unlink(path)

if __name__ == "__main__":
    unittest.main()
