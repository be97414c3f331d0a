"""Local evaluators end to end: real processes over loopback:
the emulator, `failproofai-sidecar run`, and evaluator HTTP servers (the
README's example evaluator, and hostile ones). Register -> sessions claimed
-> local runs dispatched -> results committed on the emulator with the right
values; mixed local + managed; TTL expiry and DELETE re-register; restart
keeps registrations; hostile evaluators each give a clear failed run; an
evaluator registered after an assignment's pickup gets its transcript fetched
again (against a scripted fake server)."""

import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from admin_harness import SOURCE, Sidecar, dead_port, dead_server, emulator, sample_transcript
from emulator_harness import catalog_revision
from fps_fakecloud import TOKEN as FAKE_TOKEN, FakeCloud

MARKER = "BODY-MARKER-7f3a"  # must never appear in an error message


class Hostile(BaseHTTPRequestHandler):
    """Behaves according to the eval_key of the run it receives."""
    seen = []
    signed = []  # (X-FailproofAI-Signature, raw body) per request

    def do_POST(self):
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        run = json.loads(raw)
        Hostile.seen.append(run)
        Hostile.signed.append((self.headers.get("X-FailproofAI-Signature"), raw))
        key = run["eval_key"]
        body, status, headers = None, 200, {}
        if key == "good":
            events = run["transcript"]["events"]
            body = {"score": {"value": 0.75, "passed": True},
                    "metrics": {"events": len(events)}, "reasoning": "fine", "summary": "ok",
                    "labels": ["b", "a"]}
        elif key == "slow":
            time.sleep(3)
            body = {"score": 0.5}
        elif key == "huge":
            body = {"score": 0.5, "reasoning": MARKER + "x" * (5 * 1024 * 1024)}
        elif key == "badjson":
            body = "{" + MARKER
        elif key == "e500":
            status, body = 500, {"error": MARKER}
        elif key == "invalid":
            body = {"score": 1.5, "reasoning": MARKER}
        elif key == "noprimary":
            body = {"metrics": {"other": 1}}
        elif key == "redirect":
            status, headers, body = 302, {"Location": "http://example.com/" + MARKER}, ""
        data = body if isinstance(body, str) else json.dumps(body)
        data = data.encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *a):
        pass


def signature_ok(header, raw, secret, now=None):
    """Checks X-FailproofAI-Signature as an evaluator must: t within 300 s
    and v1 = hex HMAC-SHA256(secret, t + "." + body)."""
    fields = dict(p.split("=", 1) for p in (header or "").split(",") if "=" in p)
    if "t" not in fields or "v1" not in fields:
        return False
    mac = hmac.new(secret.encode(), fields["t"].encode() + b"." + raw, hashlib.sha256).hexdigest()
    return abs((now or time.time()) - int(fields["t"])) <= 300 and hmac.compare_digest(mac, fields["v1"])


def serve(handler):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


MANAGED = [{
    "eval_key": "managed_count", "eval_version": "1", "display_name": "Managed count",
    "result_kind": "metric", "labels": [], "condition_source": None,
    "evaluator_source": "EvalResult(metrics={'managed_count': Metric(session.event_count)})",
    "timeout_seconds": 10,
}]


def catalog(defs):
    out = []
    for d in defs:
        key = d["eval_key"]
        out.append({"eval_key": key, "eval_version": d["eval_version"],
                    "display_name": d.get("display_name") or key.replace("_", " ").capitalize(),
                    "result_kind": d.get("result_kind", "score"),
                    "labels": sorted(d.get("labels", []))})
    return out


class LocalBase(unittest.TestCase):
    managed = False
    sidecar_args = ()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        args = ["--sessions", "0", "--poll-seconds", "1", "--heartbeat-seconds", "2",
                "--lease-seconds", "30"]
        if self.managed:
            path = os.path.join(self.tmp.name, "defs.json")
            with open(path, "w") as f:
                json.dump(MANAGED, f)
            args += ["--definitions", path]
        self.emu = emulator(*args)
        self.emu.start()
        self.sc = Sidecar(self.emu.base, *self.sidecar_args,
                          db=os.path.join(self.tmp.name, "sidecar.db"))
        self.sc.start()
        Hostile.seen = []
        Hostile.signed = []
        self.servers = []
        self.secrets = {}

    def tearDown(self):
        alive = self.sc.alive()
        self.sc.stop()
        self.sc.tmp.cleanup()
        self.emu.stop()
        for s in self.servers:
            s.shutdown()
            s.server_close()
        self.tmp.cleanup()
        self.assertTrue(alive, "the sidecar died")

    def register(self, name, defs, port, ttl=30, expect=201):
        body = {"version": "1.0", "endpoint": f"http://127.0.0.1:{port}/run", "ttl_seconds": ttl,
                "definitions": defs}
        r = self.sc.request("PUT", f"/v1/evaluators/{name}", body=body, auth="registration")
        self.assertEqual(r.status, expect, r)
        if r.status == 201:
            self.secrets[name] = r.body["registration_secret"]
        return r

    def wait_revision(self, defs):
        want = catalog_revision(catalog(defs))
        self.sc.wait_for(lambda: self.sc.get("/v1/status").body.get("catalog_revision") == want
                         and self.sc.get("/readyz").status == 200,
                         what=f"re-registration with revision {want}")

    def add_session(self, transcript=None):
        r = self.emu.request("POST", "/emulator/v1/sessions", transcript or sample_transcript())
        self.assertIn(r.status, (200, 201), r)

    def committed(self, n, timeout=60):
        def enough():
            runs = self.emu.request("GET", "/emulator/v1/runs").body["runs"]
            return runs if len(runs) >= n else None
        return self.sc.wait_for(enough, timeout=timeout, what=f"{n} committed runs")


class LocalEndToEndTest(LocalBase):
    managed = True

    def test_register_dispatch_commit_mixed(self):
        srv = serve(Hostile)
        self.servers.append(srv)
        defs = [{"eval_key": "good", "eval_version": "3", "labels": ["x"]}]
        self.register("ev", defs, srv.server_port)
        self.wait_revision(defs)
        self.add_session(sample_transcript(n_events=6))
        runs = self.committed(2)
        by_key = {r["eval_key"]: r for r in runs}
        self.assertEqual(set(by_key), {"good", "managed_count"})
        good = by_key["good"]
        self.assertEqual(good["execution_mode"], "local")
        self.assertEqual(good["status"], "succeeded")
        res = good["result"]["results"]
        self.assertEqual(res[0]["result_key"], "good")
        self.assertEqual(res[0]["result_kind"], "score")
        self.assertEqual(res[0]["numeric_value"], 0.75)
        self.assertIs(res[0]["bool_value"], True)
        self.assertEqual(res[0]["reasoning"], "fine")
        self.assertEqual(res[0]["labels"], ["a", "b"])
        self.assertEqual(res[1]["result_key"], "events")
        self.assertEqual(res[1]["numeric_value"], 6.0)
        self.assertEqual(good["result"]["summary"], "ok")
        self.assertEqual(by_key["managed_count"]["execution_mode"], "python")
        self.assertEqual(by_key["managed_count"]["status"], "succeeded")
        # the evaluator got the run as specified
        self.assertEqual(len(Hostile.seen), 1)
        run = Hostile.seen[0]
        self.assertEqual(set(run), {"evaluation_run_id", "eval_key", "eval_version",
                                    "timeout_seconds", "transcript"})
        self.assertEqual((run["eval_key"], run["eval_version"]), ("good", "3"))
        self.assertEqual(run["timeout_seconds"], 300)
        self.assertEqual(run["transcript"]["event_count"], 6)
        self.assertEqual(run["evaluation_run_id"], good["evaluation_run_id"])
        header, raw = Hostile.signed[0]
        self.assertTrue(signature_ok(header, raw, self.secrets["ev"]), header)
        # the admin API shows the run
        r = self.sc.get(f"/v1/runs/{good['evaluation_run_id']}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["status"], "succeeded")

    def test_ttl_expiry_delete_and_reregistration(self):
        srv = serve(Hostile)
        self.servers.append(srv)
        self.register("a", [{"eval_key": "good", "eval_version": "1"}], srv.server_port, ttl=2)
        self.register("b", [{"eval_key": "other", "eval_version": "1"}], srv.server_port, ttl=60)
        self.wait_revision([{"eval_key": "good", "eval_version": "1"},
                            {"eval_key": "other", "eval_version": "1"}])
        # a misses its TTL: it leaves the catalog and the worker re-registers
        self.wait_revision([{"eval_key": "other", "eval_version": "1"}])
        self.assertEqual(self.sc.get("/v1/evaluators/a").status, 404)
        r = self.sc.request("POST", "/v1/evaluators/a/heartbeat", auth="registration",
                            headers={"X-FailproofAI-Registration-Secret": self.secrets["a"]})
        self.assertEqual(r.status, 404)
        # DELETE b by its owner: empty catalog
        self.assertEqual(self.sc.request("DELETE", "/v1/evaluators/b", auth="registration",
                                         headers={"X-FailproofAI-Registration-Secret":
                                                  self.secrets["b"]}).status, 200)
        self.wait_revision([])
        # the expired one stays listed, marked, for an hour; the deleted one goes
        listed = self.sc.get("/v1/evaluators").body["evaluators"]
        self.assertEqual([(e["name"], e["state"], e["alive"]) for e in listed],
                         [("a", "expired", False)])
        self.assertTrue(listed[0]["expired_at"].endswith("Z"))
        self.assertEqual(self.sc.request("DELETE", "/v1/evaluators/b").status, 404)

    def test_restart_keeps_registrations(self):
        srv = serve(Hostile)
        self.servers.append(srv)
        defs = [{"eval_key": "good", "eval_version": "1", "condition": None}]
        self.register("keep", defs, srv.server_port, ttl=120)
        self.wait_revision(defs)
        before = self.sc.get("/v1/evaluators/keep").body
        self.assertEqual(self.sc.stop(), 0)
        self.sc.start()
        after = self.sc.get("/v1/evaluators/keep")
        self.assertEqual(after.status, 200, after)
        self.assertEqual(after.body["expires_at"], before["expires_at"])  # the TTL kept running
        # and so did its owner: the secret from before the restart still renews it
        owner = {"X-FailproofAI-Registration-Secret": self.secrets["keep"]}
        r = self.sc.request("POST", "/v1/evaluators/keep/heartbeat", auth="registration")
        self.assertEqual((r.status, r.code), (403, "not_owner"), r)
        r = self.sc.request("POST", "/v1/evaluators/keep/heartbeat", auth="registration",
                            headers=owner)
        self.assertEqual(r.status, 200, r)
        self.wait_revision(defs)
        self.add_session()
        runs = self.committed(1)
        self.assertEqual(runs[0]["status"], "succeeded")


class HostileEvaluatorsTest(LocalBase):
    sidecar_args = ()

    def test_each_failure_is_a_clear_failed_run(self):
        srv = serve(Hostile)
        self.servers.append(srv)
        keys = ["slow", "huge", "badjson", "e500", "invalid", "noprimary", "redirect"]
        # only "slow" runs into its timeout; the others get room on a loaded machine
        defs = [{"eval_key": k, "eval_version": "1", "timeout_seconds": 1 if k == "slow" else 30}
                for k in keys]
        self.register("hostile", defs, srv.server_port)
        dead = dead_port()
        self.register("gone", [{"eval_key": "refused", "eval_version": "1"}], dead)
        self.wait_revision(defs + [{"eval_key": "refused", "eval_version": "1"}])
        self.add_session()
        runs = {r["eval_key"]: r for r in self.committed(len(keys) + 1, timeout=90)}
        expect = {"slow": ("timed_out", "eval_timeout"), "huge": ("failed", "eval_error"),
                  "badjson": ("failed", "eval_error"), "e500": ("failed", "eval_error"),
                  "invalid": ("failed", "eval_error"), "noprimary": ("failed", "eval_error"),
                  "redirect": ("failed", "eval_error"),
                  "refused": ("failed", "evaluator_unavailable")}
        # evaluators whose dispatches fail read "failing", with the last error
        evs = {e["name"]: e for e in self.sc.get("/v1/evaluators").body["evaluators"]}
        for name in ("hostile", "gone"):
            self.assertEqual(evs[name]["state"], "failing", evs[name])
            self.assertTrue(evs[name]["failing_since"].endswith("Z"))
        self.assertTrue(evs["gone"]["last_error"].startswith("evaluator_unavailable: "))
        for key, (status, code) in expect.items():
            res = runs[key]["result"]
            self.assertEqual((res["status"], res["error_code"]), (status, code), (key, res))
            self.assertEqual(res["results"], [])
            msg = res["error_message"]
            self.assertTrue(msg and len(msg.encode()) <= 4096, (key, msg))
            self.assertNotIn(MARKER, msg, key)
            self.assertNotIn("example.com", msg, key)
        self.assertIn("primary", runs["noprimary"]["result"]["error_message"])
        self.assertIn("redirect", runs["redirect"]["result"]["error_message"])
        self.assertNotIn(MARKER, self.sc.log_text())
        # the sidecar is fine
        self.assertEqual(self.sc.get("/healthz").status, 200)


class SignedDispatchTest(LocalBase):
    def test_each_dispatch_is_signed_with_the_registrations_secret(self):
        srv = serve(Hostile)
        self.servers.append(srv)
        defs = [{"eval_key": "good", "eval_version": "1"}]
        self.register("sec", defs, srv.server_port)
        secret = self.secrets["sec"]
        self.assertRegex(secret, r"^[0-9a-f]{64}$")
        self.wait_revision(defs)
        self.add_session()
        self.committed(1)
        header, raw = Hostile.signed[0]
        self.assertRegex(header, r"^t=\d+,v1=[0-9a-f]{64}$")
        self.assertTrue(signature_ok(header, raw, secret))
        # the signature binds the body, the time and this registration's secret
        self.assertFalse(signature_ok(header, raw + b" ", secret))
        self.assertFalse(signature_ok(header, raw, "0" * 64))
        self.assertFalse(signature_ok(header, raw, secret, now=time.time() + 301))
        self.assertNotIn(secret, self.sc.log_text())
        # the secret is answered once: never in the views
        self.assertNotIn(secret, self.sc.get("/v1/evaluators").raw.decode())


class ExampleEvaluatorTest(LocalBase):
    def test_readme_example_evaluator(self):
        env = dict(os.environ, FAILPROOFAI_REGISTRATION_TOKEN_FILE=self.sc.registration_token_file)
        ex = subprocess.Popen([sys.executable, os.path.join(SOURCE, "tests", "example_evaluator.py"),
                               f"http://127.0.0.1:{self.sc.port}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.sc.wait_for(lambda: self.sc.get("/v1/evaluators/example").status == 200,
                             what="the example evaluator registering")
            ev = self.sc.get("/v1/evaluators/example").body
            self.wait_revision(ev["definitions"])
            self.add_session(sample_transcript(n_events=12, errors=2))
            run = self.committed(1)[0]
            self.assertEqual(run["eval_key"], "tool_health")
            res = run["result"]
            self.assertEqual(res["status"], "succeeded", res)
            self.assertAlmostEqual(res["results"][0]["numeric_value"], 1 / 3)
            self.assertEqual(res["results"][1]["result_key"], "tool_errors")
            self.assertEqual(res["results"][1]["numeric_value"], 2.0)
        finally:
            ex.terminate()
            ex.wait(10)
            ex.stdout.close()
            ex.stderr.close()


class RegisteredAfterPickupTest(unittest.TestCase):
    """A local evaluator that registers after an assignment was picked up:
    the catalog seen at pickup had no local evaluator, so the transcript's
    bytes were not kept (the image was built from them as they came); the
    plan then has a local run, which needs the bytes, so the sidecar fetches
    the transcript again and the evaluator gets it whole. A scripted fake
    server holds the first transcript answer until the registration is in,
    so the order is fixed, not raced."""

    def test_transcript_fetched_again_for_the_local_run(self):
        local_def = {"eval_key": "good", "display_name": "Good", "eval_version": "3",
                     "result_kind": "score", "labels": [], "execution_mode": "local",
                     "condition_source": None, "source_checksum": None,
                     "timeout_seconds": None, "_source": None}
        cloud = FakeCloud([local_def], poll=1).start()
        self.addCleanup(cloud.stop)
        asked, release = threading.Event(), threading.Event()

        def held_transcript(c, path):
            asked.set()
            release.wait(60)
            return json.dumps(c.transcript_wire(c.assignments[path.split("/")[-2]])).encode()

        cloud.script("transcript", 200, held_transcript)
        srv = serve(Hostile)
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        Hostile.seen = []
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        sc = Sidecar(cloud.url, token=FAKE_TOKEN, db=os.path.join(tmp.name, "sidecar.db"))
        self.addCleanup(sc.tmp.cleanup)
        sc.start()
        self.addCleanup(sc.stop)
        aid = cloud.add_session()
        self.assertTrue(asked.wait(30), "the sidecar never asked for the transcript")
        body = {"version": "1.0", "endpoint": f"http://127.0.0.1:{srv.server_port}/run",
                "ttl_seconds": 60, "definitions": [{"eval_key": "good", "eval_version": "3"}]}
        r = sc.request("PUT", "/v1/evaluators/late", body=body, auth="registration")
        self.assertEqual(r.status, 201, r)
        release.set()
        self.assertTrue(cloud.wait(lambda c: c.committed_runs(), 30), "".join(sc.lines)[-3000:])
        run = cloud.committed_runs()[0]
        self.assertEqual(run["assignment"], aid)
        self.assertEqual(run["result"]["status"], "succeeded", run["result"])
        events = len(cloud.assignments[aid]["events"])
        by_key = {i["result_key"]: i for i in run["result"]["results"]}
        self.assertEqual(by_key["good"]["numeric_value"], 0.75)
        self.assertEqual(by_key["events"]["numeric_value"], float(events))
        # the evaluator got the whole transcript, from the second fetch
        self.assertEqual(len(Hostile.seen), 1)
        self.assertEqual(Hostile.seen[0]["transcript"]["event_count"], events)
        self.assertEqual(len(Hostile.seen[0]["transcript"]["events"]), events)
        fetches = [p for m, p, _ in cloud.requests if m == "GET" and p.endswith(aid + "/transcript")]
        self.assertEqual(len(fetches), 2, fetches)


class RegistryRestartTest(unittest.TestCase):
    """Registrations survive a restart with their TTL still running (no
    server needed)."""

    def test_restart_keeps_and_expires(self):
        with Sidecar(dead_server()) as sc:
            body = {"version": "2", "endpoint": "http://localhost:9/x",
                    "definitions": [{"eval_key": "kept", "eval_version": "1", "labels": ["l"]}]}
            self.assertEqual(sc.request("PUT", "/v1/evaluators/long", body=dict(body, ttl_seconds=600)).status, 201)
            short = {"version": "1", "endpoint": "http://localhost:9/y", "ttl_seconds": 2,
                     "definitions": [{"eval_key": "brief", "eval_version": "1"}]}
            self.assertEqual(sc.request("PUT", "/v1/evaluators/short", body=short).status, 201)
            before = sc.get("/v1/evaluators/long").body
            short_expires_at = sc.get("/v1/evaluators/short").body["expires_at"]
            self.assertEqual(sc.stop(), 0)
            time.sleep(2.5)  # "short" runs out of TTL while the sidecar is down
            sc.start()
            after = sc.get("/v1/evaluators/long")
            self.assertEqual(after.status, 200, after)
            for k in ("version", "endpoint", "ttl_seconds", "registered_at", "expires_at",
                      "definitions"):
                self.assertEqual(after.body[k], before[k], k)
            self.assertLess(after.body["ttl_remaining_seconds"], before["ttl_remaining_seconds"])
            # durations are reported to the millisecond, not to the nanosecond
            for ttl in (after.body["ttl_remaining_seconds"], before["ttl_remaining_seconds"]):
                self.assertEqual(ttl, round(ttl, 3), ttl)
                self.assertLessEqual(len(repr(ttl).partition(".")[2]), 3, ttl)
            up = sc.get("/v1/status").body["uptime_seconds"]
            self.assertLessEqual(len(repr(float(up)).partition(".")[2]), 3, up)
            self.assertEqual(sc.get("/v1/evaluators/short").status, 404)
            # the one that ran out while the sidecar was down stays listed,
            # marked expired as of its own expiry time, without definitions
            listed = {e["name"]: e for e in sc.get("/v1/evaluators").body["evaluators"]}
            self.assertEqual(sorted(listed), ["long", "short"])
            self.assertEqual(listed["long"]["state"], "alive")
            gone = listed["short"]
            self.assertEqual((gone["state"], gone["version"], gone["definitions"]),
                             ("expired", "1", []))
            self.assertEqual(gone["expired_at"], short_expires_at)


class RegistrationValidationTest(unittest.TestCase):
    """Registration rules through the real daemon (no server needed)."""

    def test_validation_cases(self):
        with Sidecar(dead_server()) as sc:
            ep = "http://127.0.0.1:9/"
            def put(name, body):
                return sc.request("PUT", f"/v1/evaluators/{name}", body=body)
            def reg(defs, **kw):
                return dict({"version": "1", "endpoint": ep, "definitions": defs}, **kw)
            cases = [
                (reg([{"eval_key": "9bad", "eval_version": "1"}]), 422,
                 "definitions[0].eval_key must match ^[a-z][a-z0-9_]*$"),
                (reg([{"eval_key": "k" * 129, "eval_version": "1"}]), 422,
                 "definitions[0].eval_key is 129 bytes; maximum is 128"),
                (reg([{"eval_key": "a", "eval_version": "v" * 129}]), 422,
                 "definitions[0].eval_version is 129 bytes; maximum is 128"),
                (reg([{"eval_key": "a", "eval_version": "1", "labels": ["l"] * 2}]), 422,
                 "definitions[0].labels must be unique"),
                (reg([{"eval_key": "a", "eval_version": "1",
                       "labels": [f"l{i}" for i in range(21)]}]), 422,
                 "definitions[0].labels: at most 20 labels"),
                (reg([{"eval_key": "a", "eval_version": "1", "labels": ["x" * 65]}]), 422,
                 "definitions[0].labels[0] is 65 bytes; maximum is 64"),
                (reg([{"eval_key": "a", "eval_version": "1\n"}]), 422,
                 "definitions[0].eval_version must not contain control characters"),
                (reg([{"eval_key": f"k{i}", "eval_version": "1"} for i in range(101)]), 422,
                 "at most 100"),
                (reg([{"eval_key": "a", "eval_version": "1"}], endpoint="http://192.0.2.1/"), 422,
                 "endpoint must be a loopback address"),
                (reg([{"eval_key": "a", "eval_version": "1"}], endpoint="ftp://127.0.0.1/"), 422,
                 "endpoint must be an http:// URL"),
                (reg([{"eval_key": "a", "eval_version": "1", "condition": "__import__('os')"}]),
                 422, "definitions[0].condition is rejected"),
                (reg([{"eval_key": "a", "eval_version": "1", "condition": "("}]), 422,
                 "definitions[0].condition is rejected"),
                (reg([{"eval_key": "a", "eval_version": "1", "timeout_seconds": 0}]), 422,
                 "definitions[0].timeout_seconds must be a finite number greater than zero"),
                (reg([]), 422, "definitions must not be empty"),
                ({"version": "1", "endpoint": ep}, 422, "definitions must be an array"),
            ]
            for body, status, needle in cases:
                r = put("val", body)
                self.assertEqual(r.status, status, (needle, r))
                self.assertIn(needle, r.message, r)
            ok = reg([{"eval_key": "shared", "eval_version": "1"}])
            self.assertEqual(put("first", ok).status, 201)
            r = put("second", ok)
            self.assertEqual((r.status, r.code), (409, "duplicate_eval_key"), r)
            self.assertIn("'first'", r.message)
            r = put("second", reg([{"eval_key": f"k{i}", "eval_version": "1"} for i in range(100)]))
            self.assertEqual((r.status, r.code), (422, "too_many_definitions"), r)
            self.assertEqual(put("first", ok).status, 200)  # replace
            self.assertEqual(len(sc.get("/v1/evaluators").body["evaluators"]), 1)


if __name__ == "__main__":
    unittest.main()
