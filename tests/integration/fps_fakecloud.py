"""A small scriptable Evaluator v2 server for the worker's tests.

It keeps just enough server state (sessions under leases with generations,
plans with idempotent replay, heartbeats, idempotent results with conflicts)
to drive the sidecar's worker loop, and lets a test script hostile answers
per route (malformed JSON, wrong types, redirects, huge bodies, ...).
Standard library only. Loopback, ephemeral port.
"""

import hashlib
import http.server
import json
import re
import socketserver
import threading
import time
import uuid

TOKEN = "test-token-123"


def checksum(condition_source, evaluator_source):
    data = (condition_source or "") + "\0" + evaluator_source
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def managed(eval_key, source, condition=None, result_kind="score", version="1.0",
            timeout=None, bad_checksum=False):
    d = {
        "eval_key": eval_key, "display_name": eval_key.replace("_", " ").title(),
        "eval_version": version, "result_kind": result_kind, "labels": ["test"],
        "execution_mode": "python", "condition_source": condition,
        "source_checksum": checksum(condition, source), "timeout_seconds": timeout,
        "_source": source,
    }
    if bad_checksum:
        d["_run_checksum"] = "sha256:" + "0" * 64
    return d


def transcript_events(i, tools=3):
    ev = []
    for k in range(tools):
        ev.append({"id": f"e{i}-{k}", "ts": "2026-08-28T11:59:00.000000Z",
                   "event_type": "tool_use", "payload": {"tool_name": f"t{k % 2}"}})
    ev.append({"id": f"e{i}-end", "ts": "2026-08-28T12:00:00.000000Z",
               "event_type": "agent_end", "payload": {"summary": "Done"}})
    return ev


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06dZ" % int((t % 1) * 1e6)


class FakeCloud:
    def __init__(self, definitions, sessions=0, lease=120, heartbeat=30, poll=1,
                 claim_limit=32, disabled=(), tools=3):
        self.lock = threading.Condition()
        self.definitions = definitions
        self.lease, self.heartbeat, self.poll = lease, heartbeat, poll
        self.claim_limit = claim_limit
        self.disabled = list(disabled)
        self.assignments = {}  # id -> dict
        self.order = []
        self.runs = {}  # run id -> dict
        self.submissions = {}  # submission id -> (run id, body bytes)
        self.commits = 0
        self.conflicts = 0
        self.replays = 0
        self.registers = []
        self.requests = []  # (method, path, headers dict)
        self.scripts = {}  # route -> list of responses (status, headers, body bytes)
        self.result_bodies = []  # every result submission's bytes, as received
        self.plans = []
        self.heartbeats = []
        self.tools = tools
        for _ in range(sessions):
            self.add_session()
        self.httpd = None

    # ---- state -----------------------------------------------------------
    def add_session(self, events=None):
        with self.lock:
            n = len(self.order)
            aid = str(uuid.uuid4())
            self.assignments[aid] = {
                "id": aid, "session_id": f"session-{n}", "revision": f"rev-{n}",
                "events": events if events is not None else transcript_events(n, self.tools),
                "status": "queued", "generation": 0, "expires": 0, "worker": None,
                "plan": None, "runs": [],
            }
            self.order.append(aid)
            return aid

    def script(self, route, status, body, headers=None, times=1):
        if not isinstance(body, (bytes, bytearray)) and not callable(body):
            body = json.dumps(body).encode()
        with self.lock:
            self.scripts.setdefault(route, []).extend([(status, headers or {}, body)] * times)

    def committed_runs(self):
        with self.lock:
            return [r for r in self.runs.values() if r.get("result") is not None]

    def wait(self, pred, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            with self.lock:
                if pred(self):
                    return True
            time.sleep(0.05)
        return False

    # ---- HTTP ----------------------------------------------------------
    def start(self):
        cloud = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _send(self, status, obj=None, raw=None, headers=None):
                data = raw if raw is not None else json.dumps(obj, separators=(",", ":")).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def handle_any(self, method):
                body = self._body()
                path = self.path
                route = cloud.route_name(path)
                with cloud.lock:
                    cloud.requests.append((method, path, dict(self.headers.items())))
                    if route == "result":
                        cloud.result_bodies.append(body)
                with cloud.lock:
                    script = cloud.scripts.get(route)
                    scripted = script.pop(0) if script else None
                if scripted is not None:
                    status, headers, raw = scripted
                    if callable(raw):
                        raw = raw(cloud, path)
                    return self._send(status, raw=raw, headers=headers)
                if self.headers.get("Authorization") != "Bearer " + TOKEN:
                    return self._send(401, cloud.err("invalid_credentials", False))
                try:
                    req = json.loads(body) if body else None
                except ValueError:
                    return self._send(422, cloud.err("invalid_request", False))
                status, obj = cloud.dispatch(method, path, req, self.headers)
                self._send(status, obj)

            def do_GET(self):
                self.handle_any("GET")

            def do_POST(self):
                self.handle_any("POST")

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass  # a client killed mid-request (the tests do that) is not news

        self.httpd = S(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()

    @staticmethod
    def err(code, retryable, message="scripted"):
        return {"protocol_version": "2", "error": {"code": code, "message": message,
                                                    "retryable": retryable, "request_id": "r"}}

    @staticmethod
    def route_name(path):
        for name, rx in (("register", r"^/v1/evaluator/workers/register$"),
                         ("claim", r"^/v1/evaluator/assignments/claim$"),
                         ("transcript", r"^/v1/evaluator/assignments/[^/]+/transcript$"),
                         ("definitions", r"^/v1/evaluator/assignments/[^/]+/definitions$"),
                         ("plan", r"^/v1/evaluator/assignments/[^/]+/plan$"),
                         ("heartbeat", r"^/v1/evaluator/runs/heartbeat$"),
                         ("result", r"^/v1/evaluator/runs/[^/]+/result$")):
            if re.match(rx, path):
                return name
        return "other"

    def assignment_wire(self, a):
        return {"assignment_id": a["id"], "lease_generation": a["generation"],
                "lease_expires_at": iso(a["expires"]), "session_id": a["session_id"],
                "session_revision_id": a["revision"], "agent_id": "agent",
                "environment": "test", "trigger_reason": "agent_end",
                "event_count": len(a["events"]),
                "transcript_url": f"/v1/evaluator/assignments/{a['id']}/transcript",
                "definitions_url": f"/v1/evaluator/assignments/{a['id']}/definitions"}

    @staticmethod
    def transcript_wire(a):
        """The transcript answer for assignment `a` (a scripted answer can
        serve it too)."""
        return {"schema_version": "2", "assignment_id": a["id"], "session_id": a["session_id"],
                "session_revision_id": a["revision"], "agent_id": "agent", "environment": "test",
                "started_at": "2026-08-28T11:58:00.000000Z",
                "ended_at": "2026-08-28T12:00:00.000000Z",
                "event_count": len(a["events"]), "events": a["events"]}

    def public_def(self, d):
        return {k: v for k, v in d.items() if not k.startswith("_")}

    def dispatch(self, method, path, req, headers):
        now = time.time()
        route = self.route_name(path)
        with self.lock:
            if route == "register":
                self.registers.append(req)
                return 200, {"protocol_version": "2", "evaluator_instance_id": "inst-1",
                             "evaluator_kind": "customer",
                             "heartbeat_interval_seconds": self.heartbeat,
                             "lease_duration_seconds": self.lease,
                             "poll_interval_seconds": self.poll,
                             "claim_limit": self.claim_limit,
                             "disabled_definitions": self.disabled}
            if route == "claim":
                out = []
                for aid in self.order:
                    if len(out) >= req["capacity"]:
                        break
                    a = self.assignments[aid]
                    if a["status"] == "queued" or (a["status"] == "leased" and a["expires"] < now):
                        a["status"] = "leased"
                        a["generation"] += 1
                        a["expires"] = now + self.lease
                        a["worker"] = req["worker_id"]
                        out.append(self.assignment_wire(a))
                return 200, {"protocol_version": "2", "assignments": out}
            m = re.match(r"^/v1/evaluator/assignments/([^/]+)/(\w+)$", path)
            if m:
                a = self.assignments.get(m.group(1))
                if a is None:
                    return 404, self.err("assignment_not_found", False)
                gen = int(headers.get("X-FailproofAI-Lease-Generation") or
                          (req or {}).get("lease_generation") or 0)
                if gen != a["generation"] or a["status"] == "lost":
                    return 409, self.err("lease_lost", False)
                kind = m.group(2)
                if kind == "transcript":
                    return 200, self.transcript_wire(a)
                if kind == "definitions":
                    return 200, {"protocol_version": "2", "assignment_id": a["id"],
                                 "catalog_revision": "sha256:x",
                                 "definitions": [self.public_def(d) for d in self.definitions]}
                if kind == "plan":
                    self.plans.append((a["id"], req))
                    replay = a["plan"] is not None
                    if not replay:
                        a["plan"] = req
                        for s in req["selected"]:
                            d = next(d for d in self.definitions
                                     if d["eval_key"] == s["eval_key"])
                            rid = str(uuid.uuid4())
                            self.runs[rid] = {"id": rid, "assignment": a["id"], "def": d,
                                              "result": None, "submission": None}
                            a["runs"].append(rid)
                    runs = []
                    for rid in a["runs"]:
                        d = self.runs[rid]["def"]
                        runs.append({"evaluation_run_id": rid, "eval_key": d["eval_key"],
                                     "eval_version": d["eval_version"],
                                     "execution_mode": d["execution_mode"],
                                     "evaluator_source": d["_source"],
                                     "source_checksum": d.get("_run_checksum",
                                                              d["source_checksum"]),
                                     "timeout_seconds": d["timeout_seconds"]})
                    if not runs:
                        a["status"] = "done"
                    return 200, {"protocol_version": "2", "assignment_id": a["id"],
                                 "assignment_status": "planned" if runs else "skipped",
                                 "idempotent_replay": replay, "runs": runs}
            if route == "heartbeat":
                self.heartbeats.append(req)
                ids = [r["evaluation_run_id"] for r in req["runs"]]
                accepted = []
                for rid in ids:
                    run = self.runs.get(rid)
                    if run is None:
                        continue
                    a = self.assignments[run["assignment"]]
                    if a["generation"] != req["lease_generation"] or a["status"] == "lost":
                        return 409, self.err("lease_lost", False)
                    a["expires"] = now + self.lease
                    accepted.append(rid)
                return 200, {"protocol_version": "2",
                             "lease_expires_at": iso(now + self.lease),
                             "accepted_run_ids": accepted}
            m = re.match(r"^/v1/evaluator/runs/([^/]+)/result$", path)
            if m:
                run = self.runs.get(m.group(1))
                if run is None:
                    return 404, self.err("run_not_found", False)
                a = self.assignments[run["assignment"]]
                raw = json.dumps(req, sort_keys=True)
                sid = req["submission_id"]
                if sid in self.submissions:
                    if self.submissions[sid][1] != raw:
                        self.conflicts += 1
                        return 409, self.err("submission_conflict", False)
                    self.replays += 1
                    return 200, self.ack(run, sid, True)
                if req["lease_generation"] != a["generation"] or a["status"] == "lost":
                    return 409, self.err("lease_lost", False)
                if run["result"] is not None:
                    self.conflicts += 1
                    return 409, self.err("submission_conflict", False)
                self.submissions[sid] = (run["id"], raw)
                run["result"] = req
                self.commits += 1
                if all(self.runs[r]["result"] is not None for r in a["runs"]):
                    a["status"] = "done"
                return 200, self.ack(run, sid, False)
        return 404, self.err("invalid_request", False)

    @staticmethod
    def ack(run, sid, replay):
        return {"protocol_version": "2", "evaluation_run_id": run["id"], "submission_id": sid,
                "status": "committed", "idempotent_replay": replay,
                "result_count": len(run["result"]["results"]), "result_checksum": "sha256:0"}
