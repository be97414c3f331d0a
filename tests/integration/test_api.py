"""Admin API: every route's happy path and errors, and the
hardening cases (Host, Origin, content type, token, oversized bodies, slow
clients, hostile bodies), against the real `failproofai-sidecar run` over
loopback HTTP. The worker here points at a port nobody listens on, so it stays
up and not ready; the end-to-end cases with the emulator are in
test_api_e2e.py."""

import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

from admin_harness import BIN, Sidecar, SidecarCase, dead_server, recv_all, sample_transcript

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class AdminApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sc = Sidecar(dead_server(), env={"FAILPROOFAI_SIDECAR_ADMIN_IDLE_TIMEOUT": "2"})
        cls.sc.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.sc.stop()
        cls.sc.tmp.cleanup()
        assert rc == 0, f"sidecar exit status {rc}"

    def tearDown(self):
        self.assertTrue(self.sc.alive(), "the sidecar died")

    def assertError(self, r, status, code):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.code, code, r)
        self.assertIsInstance(r.message, str)
        self.assertTrue(r.message)

    # -- health, readiness, status, metrics ---------------------------------
    def test_healthz(self):
        r = self.sc.get("/healthz")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, {"status": "ok"})
        self.assertEqual(r.headers["content-type"], "application/json")

    def test_security_headers_on_every_response(self):
        for method, path in [("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"),
                             ("GET", "/v1/status"), ("GET", "/nope"), ("GET", "/"),
                             ("POST", "/healthz"), ("GET", "/v1/runs?limit=0")]:
            r = self.sc.request(method, path, body={} if method == "POST" else None)
            for k, v in SECURITY_HEADERS.items():
                self.assertEqual(r.headers.get(k), v, (method, path, k))
            csp = r.headers.get("content-security-policy", "")
            self.assertIn("default-src 'self'", csp)
            self.assertIn("frame-ancestors 'none'", csp)

    def test_readyz_not_ready_with_reason(self):
        r = self.sc.get("/readyz")
        self.assertEqual(r.status, 503, r)
        self.assertIs(r.body["ready"], False)
        self.assertTrue(r.body["reason"])

    def test_status(self):
        r = self.sc.get("/v1/status")
        self.assertEqual(r.status, 200, r)
        b = r.body
        for k in ("ready", "ready_reason", "draining", "version", "uptime_seconds", "jail",
                  "local_evaluators", "admin"):
            self.assertIn(k, b)
        self.assertIs(b["ready"], False)
        self.assertIs(b["draining"], False)
        self.assertEqual(b["admin"]["port"], self.sc.port)
        self.assertIs(b["admin"]["token_required"], True)

    def test_metrics_exposition_parses(self):
        from prometheus_client.parser import text_string_to_metric_families
        self.sc.get("/healthz")
        r = self.sc.get("/metrics")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["content-type"].startswith("text/plain; version=0.0.4"))
        fams = {f.name: f for f in text_string_to_metric_families(r.raw.decode())}
        self.assertIn("failproofai_sidecar_ready", fams)
        self.assertEqual(fams["failproofai_sidecar_ready"].type, "gauge")
        self.assertEqual(fams["failproofai_sidecar_ready"].samples[0].value, 0)
        reqs = fams["failproofai_sidecar_admin_requests"]  # parser strips _total
        self.assertEqual(reqs.type, "counter")
        ok = [s for s in reqs.samples if s.labels.get("code") == "2xx" and s.name.endswith("_total")]
        self.assertTrue(ok and ok[0].value >= 1)
        hist = fams["failproofai_sidecar_admin_request_duration_seconds"]
        self.assertEqual(hist.type, "histogram")
        for g in ("failproofai_sidecar_active_assignments", "failproofai_sidecar_active_runs",
                  "failproofai_sidecar_active_sandboxes", "failproofai_sidecar_outbox_depth",
                  "failproofai_sidecar_local_evaluators"):
            self.assertIn(g, fams)
            self.assertEqual(fams[g].type, "gauge")

    # -- routing errors -------------------------------------------------------
    def test_unknown_route_and_method(self):
        self.assertError(self.sc.get("/v1/nothing"), 404, "not_found")
        r = self.sc.request("DELETE", "/v1/runs")
        self.assertError(r, 405, "method_not_allowed")
        self.assertIn("GET", r.headers["allow"])
        r = self.sc.request("PUT", "/v1/evaluators", body={})
        self.assertError(r, 405, "method_not_allowed")

    def test_static_page(self):
        r = self.sc.get("/")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["content-type"].startswith("text/html"))
        self.assertIn(b"<", r.raw)

    def test_runs_and_assignments_errors(self):
        for q in ("limit=0", "limit=501", "limit=abc", "limit=", "limit=-3"):
            self.assertError(self.sc.get("/v1/runs?" + q), 400, "invalid_request")
            self.assertError(self.sc.get("/v1/assignments?" + q), 400, "invalid_request")
        self.assertError(self.sc.get("/v1/runs?status=bogus"), 400, "invalid_request")
        self.assertError(self.sc.get("/v1/runs?cursor=garbage!!"), 400, "invalid_request")
        self.assertError(self.sc.get("/v1/runs/does-not-exist"), 404, "not_found")
        self.assertError(self.sc.get("/v1/assignments/does-not-exist"), 404, "not_found")
        self.assertError(self.sc.get("/v1/stats?minutes=0"), 400, "invalid_request")
        # a query integer's error names the argument and its range
        for path, msg in (("/v1/runs?limit=abc", "limit must be an integer from 1 to 500"),
                          ("/v1/stats?minutes=1441", "minutes must be an integer from 1 to 1440"),
                          ("/v1/logs?limit=9x", "limit must be an integer from 1 to ")):
            r = self.sc.get(path)
            self.assertEqual(r.status, 400, r)
            self.assertTrue(r.message.startswith(msg), r)

    def test_runs_empty_list(self):
        r = self.sc.get("/v1/runs?limit=500")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["runs"], [])
        self.assertIsNone(r.body["next_cursor"])
        r = self.sc.get("/v1/assignments")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["assignments"], [])
        r = self.sc.get("/v1/stats?minutes=5")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.body["minutes"]), 5)

    # -- hardening: Host (DNS rebinding) -------------------------------------
    def test_host_must_be_loopback(self):
        for host in ("evil.example.com", "127.0.0.1.nip.io", "localhost.evil.com", "10.0.0.1:8787",
                     "[::2]:8787", "", "127.0.0.1:80:80"):
            r = self.sc.get("/v1/status", headers={"Host": host})
            self.assertError(r, 421, "host_not_allowed")
        for host in ("127.0.0.1", f"127.0.0.1:{self.sc.port}", "localhost:1", "LOCALHOST",
                     "[::1]:8787", "127.9.9.9"):
            self.assertEqual(self.sc.get("/healthz", headers={"Host": host}).status, 200, host)

    def test_missing_host_refused(self):
        with socket.create_connection(("127.0.0.1", self.sc.port), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            data = recv_all(s)
        self.assertTrue(data.startswith(b"HTTP/1.") and b" 421 " in data.split(b"\r\n")[0], data)

    # -- hardening: CSRF ------------------------------------------------------
    def test_state_changing_needs_json_content_type(self):
        for ct in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                   "application/jsonx", "application/json; charset=latin-1"):
            h = {"Content-Type": ct} if ct else {}
            r = self.sc.request("POST", "/v1/drain", body="{}", headers=h, json_ct=False)
            self.assertError(r, 415, "unsupported_media_type")
            r = self.sc.request("PUT", "/v1/evaluators/x", body="{}", headers=h, json_ct=False)
            self.assertError(r, 415, "unsupported_media_type")
        r = self.sc.request("POST", "/v1/evaluate", body={"source": "1", "mode": "check"},
                            headers={"Content-Type": "application/json; charset=utf-8"})
        self.assertEqual(r.status, 200, r)

    def test_bodiless_token_request_needs_no_content_type(self):
        # curl -X DELETE -H "Authorization: Bearer ..." .../v1/drain: a header a
        # browser cannot forge, and no body, so no Content-Type is needed
        r = self.sc.request("POST", "/v1/drain", json_ct=False)
        self.assertEqual(r.status, 202, r)
        r = self.sc.request("DELETE", "/v1/drain", json_ct=False)
        self.assertEqual((r.status, r.body), (200, {"draining": False}), r)
        # a body it has must still be JSON
        r = self.sc.request("POST", "/v1/drain", body="{}", json_ct=False,
                            headers={"Content-Type": "text/plain"})
        self.assertError(r, 415, "unsupported_media_type")
        # without the header, a bodiless request is a simple request a browser can send
        r = self.sc.request("DELETE", "/v1/drain", json_ct=False, auth=None)
        self.assertError(r, 415, "unsupported_media_type")
        # a bad token is refused by its check, not let through
        r = self.sc.request("DELETE", "/v1/drain", json_ct=False, auth=None,
                            headers={"Authorization": "Bearer wrong"})
        self.assertEqual(r.status, 401, r)
        # and a foreign origin is refused whatever the token
        r = self.sc.request("DELETE", "/v1/drain", json_ct=False,
                            headers={"Origin": "http://evil.example.com"})
        self.assertError(r, 403, "foreign_origin")
        self.assertIs(self.sc.get("/v1/status").body["draining"], False)

    def test_foreign_origin_refused(self):
        for origin in ("http://evil.example.com", "null", f"http://127.0.0.1:{self.sc.port + 1}",
                       "https://localhost.evil.com", "file://"):
            r = self.sc.request("POST", "/v1/drain", body={}, headers={"Origin": origin})
            self.assertError(r, 403, "foreign_origin")
        r = self.sc.request("POST", "/v1/drain", body={}, headers={"Sec-Fetch-Site": "cross-site"})
        self.assertError(r, 403, "foreign_origin")
        # the drain was never applied
        self.assertIs(self.sc.get("/v1/status").body["draining"], False)
        # same origin passes the check (check mode changes nothing)
        r = self.sc.request("POST", "/v1/evaluate", body={"source": "1", "mode": "check"},
                            headers={"Origin": f"http://127.0.0.1:{self.sc.port}"})
        self.assertEqual(r.status, 200, r)

    # -- hardening: bodies -----------------------------------------------------
    def raw_post(self, path, length, body_iter, method=b"POST"):
        """Sends a POST declaring `length` bytes, then as much of the body as
        the server takes (it may answer early and close), then reads."""
        with socket.create_connection(("127.0.0.1", self.sc.port), timeout=30) as s:
            s.sendall(b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"%sContent-Length: %d\r\n\r\n"
                      % (method, path.encode(), self.sc.auth_line(), length))
            try:
                for chunk in body_iter:
                    s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            data = b""
            try:
                while True:
                    c = s.recv(65536)
                    if not c:
                        break
                    data += c
                    if b"\r\n\r\n" in data and data.rstrip().endswith(b"}"):
                        break
            except ConnectionResetError:
                pass
        head, _, body = data.partition(b"\r\n\r\n")
        return head.split(b"\r\n")[0], body

    def test_30mb_body_refused(self):
        n = 30 * 1024 * 1024
        status, body = self.raw_post("/v1/evaluate", n, (b"x" * (1 << 20) for _ in range(30)))
        self.assertIn(b" 413 ", status)
        self.assertEqual(json.loads(body)["error"]["code"], "body_too_large")
        status, body = self.raw_post("/v1/evaluators/big", 2 << 20, (b" " * (1 << 20) for _ in range(2)),
                                     method=b"PUT")
        self.assertIn(b" 413 ", status)
        self.assertEqual(self.sc.get("/healthz").status, 200)

    def test_30mb_chunked_body_refused(self):
        with socket.create_connection(("127.0.0.1", self.sc.port), timeout=30) as s:
            s.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\n" + self.sc.auth_line() +
                      b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"x" * (1024 * 1024)
            try:
                for _ in range(30):
                    s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                s.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            data = s.recv(65536)
        self.assertIn(b" 413 ", data.split(b"\r\n")[0])
        self.assertEqual(self.sc.get("/healthz").status, 200)

    def test_hostile_json_bodies(self):
        deep = "[" * 100000 + "]" * 100000
        for body, status, code in [
            ("{not json", 400, "invalid_json"),
            ("", 400, "invalid_json"),
            ("[1, 2]", 400, "invalid_json"),
            ("\"str\"", 400, "invalid_json"),
            (deep, 413, "body_too_complex"),
            ('{"source": "1", "x": [' + ",".join(["{}"] * 20001) + "]}", 413, "body_too_complex"),
            ('{"a": 1, "a": 2}', 400, "invalid_json"),
            ('{"source": "1", "transcript": {}, "transcript": {}}', 400, "invalid_json"),
            ('{"source": "1", "transcript": null, "transcr\\u0069pt": 1}', 400, "invalid_json"),
            ('{"source": "1", "transcript": "x"}', 422, "invalid_request"),
            (b'{"source": "\xff\xfe"}', 400, "invalid_json"),
            ('{"source": 5}', 422, "invalid_request"),
            ('{"source": "1", "kind": "shell"}', 422, "invalid_request"),
            ('{"source": "1", "kind": 3}', 422, "invalid_request"),
            ('{"source": "1", "mode": "exec"}', 422, "invalid_request"),
            ('{"source": "1", "transcript": [1]}', 422, "invalid_request"),
            ('{"source": "1", "timeout_seconds": 1e309}', 400, "invalid_json"),
            ('{"source": "1", "timeout_seconds": -1}', 422, "invalid_request"),
            ('{"source": "1", "timeout_seconds": "5"}', 422, "invalid_request"),
            ('{"source": "1", "eval_key": "Bad Key"}', 422, "invalid_request"),
        ]:
            r = self.sc.request("POST", "/v1/evaluate", body=body)
            self.assertError(r, status, code)
        for body in ("{bad", deep, "[]", '{"version": ["x"]}', '{"definitions": {"a": 1}}'):
            r = self.sc.request("PUT", "/v1/evaluators/h1", body=body)
            self.assertIn(r.status, (400, 413, 422), r)
            self.assertIn(r.code, ("invalid_json", "invalid_registration", "body_too_complex"), r)
        self.assertEqual(self.sc.get("/healthz").status, 200)

    # -- hardening: slow clients -----------------------------------------------
    def test_slow_clients_are_cut_off_and_others_served(self):
        socks = []
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", self.sc.port), timeout=10)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # never finishes its headers
            socks.append(s)
        t0 = time.time()
        while time.time() - t0 < 1.0:  # others are served meanwhile
            self.assertEqual(self.sc.get("/healthz", timeout=5).status, 200)
            time.sleep(0.1)
        time.sleep(3.5)  # idle timeout is 2 s in this class
        closed = 0
        for s in socks:
            try:
                s.settimeout(5)
                if s.recv(100) == b"":
                    closed += 1
            except (ConnectionResetError, socket.timeout):
                closed += isinstance(s, socket.socket)
            finally:
                s.close()
        self.assertEqual(closed, 40)
        self.assertEqual(self.sc.get("/healthz").status, 200)

    def test_slow_body_cut_off(self):
        s = socket.create_connection(("127.0.0.1", self.sc.port), timeout=10)
        s.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                  b"\r\n" + self.sc.auth_line() + b"Content-Length: 1000\r\n\r\n{\"source\"")
        time.sleep(3.5)
        try:
            data = s.recv(100)
        except ConnectionResetError:
            data = b""
        s.close()
        self.assertEqual(data, b"")

    # -- evaluate ----------------------------------------------------------------
    def test_evaluate_check_mode(self):
        r = self.sc.request("POST", "/v1/evaluate",
                            body={"kind": "evaluator", "source": "lambda: 1", "mode": "check"})
        self.assertEqual(r.status, 200, r)
        self.assertIs(r.body["ok"], False)
        self.assertEqual(r.body["stage"], "compile")
        self.assertTrue(r.body["message"])

    def test_evaluate_assignment_transcript_unknown(self):
        r = self.sc.request("POST", "/v1/evaluate", body={"source": "1", "assignment_id": "a1"})
        self.assertError(r, 404, "not_found")
        r = self.sc.request("POST", "/v1/evaluate", body={"source": "1", "assignment_id": 7})
        self.assertError(r, 422, "invalid_request")


class EvaluateRunTest(SidecarCase):
    """POST /v1/evaluate through the jail: results and errors."""

    def evaluate(self, **body):
        body.setdefault("transcript", sample_transcript())
        r = self.sc.request("POST", "/v1/evaluate", body=body, timeout=90)
        self.assertEqual(r.status, 200, r)
        return r.body

    def test_raw_condition_evaluator(self):
        self.assertEqual(self.evaluate(kind="raw", source="session.event_count * 7")["repr"], "42")
        out = self.evaluate(kind="condition", source="session.count('tool_result') > 0")
        self.assertEqual((out["ok"], out["applicable"]), (True, True))
        out = self.evaluate(kind="evaluator", eval_key="quality",
                            source="EvalResult(score=Score(0.25), summary='s')")
        self.assertIs(out["ok"], True, out)
        self.assertEqual(out["results"][0]["result_key"], "quality")
        self.assertEqual(out["results"][0]["numeric_value"], 0.25)
        self.assertEqual(out["summary"], "s")

    def test_errors(self):
        out = self.evaluate(kind="raw", source="1 +")
        self.assertEqual((out["ok"], out["stage"]), (False, "compile"))
        out = self.evaluate(kind="raw", source="1 // 0")
        self.assertEqual((out["ok"], out["stage"], out["error_type"]),
                         (False, "runtime", "ZeroDivisionError"))
        out = self.evaluate(kind="raw", source="sum(range(10**12))", timeout_seconds=1)
        self.assertEqual((out["ok"], out["stage"]), (False, "limit"))

    def test_bad_transcript(self):
        r = self.sc.request("POST", "/v1/evaluate",
                            body={"source": "1", "transcript": {"schema_version": "9"}})
        self.assertEqual(r.status, 422, r)
        self.assertEqual(r.code, "invalid_transcript")


class DrainTest(unittest.TestCase):
    def test_drain(self):
        with Sidecar(dead_server()) as sc:
            r = sc.request("POST", "/v1/drain")  # empty body is fine
            self.assertEqual(r.status, 202, r)
            self.assertEqual(r.body, {"draining": True, "resumable": True})
            r = sc.request("POST", "/v1/drain", body={})  # idempotent
            self.assertEqual(r.status, 202, r)
            r = sc.get("/readyz")
            self.assertEqual(r.status, 503)
            self.assertIs(r.body["ready"], False)
            self.assertIs(sc.get("/v1/status").body["draining"], True)
            # resume: DELETE /v1/drain undoes it
            r = sc.request("DELETE", "/v1/drain")
            self.assertEqual((r.status, r.body), (200, {"draining": False}), r)
            self.assertIs(sc.get("/v1/status").body["draining"], False)
            r = sc.request("DELETE", "/v1/drain")  # idempotent
            self.assertEqual(r.status, 200, r)


class TokenTest(unittest.TestCase):
    def test_admin_token(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
            f.write("s3cret-admin-token\n")
            f.flush()
            with Sidecar(dead_server(), "--admin-token-file", f.name, tokens=False) as sc:
                reg = {"version": "1", "endpoint": "http://127.0.0.1:9/",
                       "definitions": [{"eval_key": "k", "eval_version": "1"}]}
                r = sc.request("PUT", "/v1/evaluators/t", body=reg)
                self.assertEqual((r.status, r.code), (401, "unauthorized"), r)
                self.assertEqual(r.headers.get("www-authenticate"), "Bearer")
                for bad in ("Bearer wrong", "Bearer s3cret-admin-toke", "Bearer s3cret-admin-token2",
                            "Basic s3cret-admin-token", "s3cret-admin-token"):
                    r = sc.request("PUT", "/v1/evaluators/t", body=reg,
                                   headers={"Authorization": bad})
                    self.assertEqual(r.status, 401, bad)
                r = sc.request("PUT", "/v1/evaluators/t", body=reg,
                               headers={"Authorization": "Bearer s3cret-admin-token"})
                self.assertEqual(r.status, 201, r)
                # reads stay open on loopback
                self.assertEqual(sc.get("/v1/evaluators").status, 200)
                self.assertIs(sc.get("/v1/status").body["admin"]["token_required"], True)
                self.assertNotIn("s3cret-admin-token", sc.log_text())


class SchedulingKnobsTest(unittest.TestCase):
    """FAILPROOFAI_SIDECAR_ADMIN_THREADS sizes MHD's thread pool and
    FAILPROOFAI_SIDECAR_ADMIN_NICE lowers the priority of those threads only
    (observed in /proc), relative to the priority the sidecar was started
    with (the suite may itself run under nice), and the API keeps
    answering."""

    BASE = os.getpriority(os.PRIO_PROCESS, 0)

    def threads(self, pid):
        out = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    nice = int(f.read().rsplit(")", 1)[1].split()[16])
            except FileNotFoundError:
                continue
            out.append((comm, nice))
        return out

    def threads_once_named(self, pid, pool_size):
        """The threads once at least pool_size of them are named MHD-worker:
        MHD names a pool thread from inside it, so on a loaded machine a
        thread that has not run yet still shows the process's name."""
        deadline = time.monotonic() + 60
        while True:
            ts = self.threads(pid)
            if len([c for c, _ in ts if c == "MHD-worker"]) >= pool_size:
                return ts
            if time.monotonic() > deadline:
                self.fail(f"fewer than {pool_size} MHD-worker threads after 60 s: {ts}")
            time.sleep(0.02)

    def test_pool_size_and_nice(self):
        env = {"FAILPROOFAI_SIDECAR_ADMIN_THREADS": "3", "FAILPROOFAI_SIDECAR_ADMIN_NICE": "7"}
        with Sidecar(dead_server(), env=env) as sc:
            for _ in range(12):
                self.assertEqual(sc.get("/healthz").status, 200)
            self.assertEqual(sc.get("/v1/runs?limit=3").status, 200)
            ts = self.threads_once_named(sc.proc.pid, 3)
            pool = [n for c, n in ts if c == "MHD-worker"]
            self.assertEqual(len(pool), 3, ts)
            lowered = min(19, self.BASE + 7)
            self.assertIn(lowered, pool, ts)
            self.assertTrue(all(n in (self.BASE, lowered) for n in pool), ts)
            self.assertTrue(all(n == self.BASE for c, n in ts if c != "MHD-worker"), ts)

    def test_defaults_leave_priority_alone(self):
        with Sidecar(dead_server(), env={"FAILPROOFAI_SIDECAR_ADMIN_NICE": "bogus"}) as sc:
            for _ in range(6):
                self.assertEqual(sc.get("/healthz").status, 200)
            ts = self.threads_once_named(sc.proc.pid, 2)
            self.assertTrue(all(n == self.BASE for _, n in ts), ts)
            # the value is refused with its variable and range, not silently
            log = sc.log_text()
            self.assertIn("FAILPROOFAI_SIDECAR_ADMIN_NICE", log)
            self.assertIn('"max":19', log)


class ListenTest(unittest.TestCase):
    def run_bad(self, *args):
        env = dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN="t")
        p = subprocess.run([BIN, "run", "--server", dead_server(), *args], env=env,
                           capture_output=True, text=True, timeout=30)
        return p

    def test_non_loopback_listen_needs_flag_and_token(self):
        p = self.run_bad("--listen", "0.0.0.0:0")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--allow-remote-admin", p.stderr)
        p = self.run_bad("--listen", "0.0.0.0:0", "--allow-remote-admin")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--admin-token-file", p.stderr)

    def test_address_in_use(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        try:
            with tempfile.TemporaryDirectory() as d:
                p = self.run_bad("--listen", f"127.0.0.1:{port}", "--db", os.path.join(d, "x.db"))
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("admin API", p.stderr)
        finally:
            s.close()


if __name__ == "__main__":
    unittest.main()
