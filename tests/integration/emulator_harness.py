"""Test harness for the cloud emulator: starts `failproofai-sidecar emulator`
on an ephemeral loopback port, talks to it over real HTTP, and stops it.

Used by test_emulator*.py; other suites (the worker's) may import it too:

    with EmulatorProcess("--sessions", "10") as emu:
        emu.register()                  # -> (status, body)
        emu.state()["assignments"]["completed"]
"""

import hashlib
import http.client
import json
import os
import subprocess
import tempfile
import time
import uuid

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")
CONTRACT_PATH = os.environ.get("FPS_CONTRACT") or os.path.join(
    os.environ.get("FPS_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")),
    "tests", "fixtures", "evaluator-v2.json",
)
TOKEN = "emulator-token"


def load_contract():
    with open(CONTRACT_PATH, encoding="utf-8") as f:
        return json.load(f)


def catalog_revision(definitions):
    """SPEC §2 step 1, exactly as the reference's authoring.py computes it."""
    payload = [
        {
            "eval_key": d["eval_key"],
            "display_name": d["display_name"],
            "eval_version": d["eval_version"],
            "result_kind": d["result_kind"],
            "labels": sorted(d.get("labels", [])),
        }
        for d in sorted(definitions, key=lambda d: d["eval_key"])
    ]
    raw = json.dumps(payload, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()


def source_checksum(condition_source, evaluator_source):
    data = ((condition_source or "") + "\0" + evaluator_source).encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class Response:
    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers
        self.raw = raw
        try:
            self.body = json.loads(raw) if raw else None
        except ValueError:
            self.body = None

    @property
    def code(self):
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return self.body["error"].get("code")
        return None

    @property
    def message(self):
        return self.body["error"]["message"] if self.code else None

    def __repr__(self):
        return f"Response({self.status}, {self.raw[:300]!r})"


class EmulatorProcess:
    def __init__(self, *args, token_args=True):
        self.args = list(args)
        if token_args and not any(a == "--token" for a in self.args):
            self.args += ["--token", TOKEN]
        self.proc = None
        self.port = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self.proc = subprocess.Popen(
            [BIN, "emulator", "--listen", "127.0.0.1:0", "--log-level", "warn", *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read()
            self.proc.wait(5)
            self.proc.stdout.close()
            self.proc.stderr.close()
            self.proc = None
            raise RuntimeError(f"emulator did not start: {err.strip()}")
        self.port = int(json.loads(line)["listening"].rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=5)
        self.proc = None
        # Under the sanitizer build, a leak or undefined behaviour in the
        # emulator fails the test that ran it.
        if "Sanitizer" in err or "runtime error:" in err:
            raise AssertionError("emulator sanitizer report:\n" + err[-4000:])

    # -- raw HTTP ---------------------------------------------------------
    def request(self, method, path, body=None, *, token=TOKEN, headers=None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Accept": "application/json"}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else compact(body)
            if isinstance(data, str):
                data = data.encode("utf-8")
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    # -- protocol calls ---------------------------------------------------
    def register(self, definitions=(), worker_id="w1", max_concurrency=4, token=TOKEN, revision=None):
        body = {
            "protocol_version": "2",
            "worker_id": worker_id,
            "sdk_version": "test",
            "catalog_revision": revision or catalog_revision(definitions),
            "max_concurrency": max_concurrency,
            "definitions": list(definitions),
        }
        return self.request("POST", "/v1/evaluator/workers/register", body, token=token)

    def claim(self, capacity=1, worker_id="w1", revision=None, token=TOKEN, definitions=()):
        body = {
            "protocol_version": "2",
            "worker_id": worker_id,
            "catalog_revision": revision or catalog_revision(definitions),
            "capacity": capacity,
        }
        return self.request("POST", "/v1/evaluator/assignments/claim", body, token=token)

    def fenced_get(self, assignment, what, worker_id="w1", generation=None, token=TOKEN):
        gen = assignment["lease_generation"] if generation is None else generation
        headers = {"X-FailproofAI-Worker-Id": worker_id, "X-FailproofAI-Lease-Generation": str(gen)}
        return self.request("GET", assignment[f"{what}_url"], headers=headers, token=token)

    def plan(self, assignment, selected, skipped=(), worker_id="w1", generation=None, token=TOKEN):
        body = {
            "protocol_version": "2",
            "worker_id": worker_id,
            "lease_generation": assignment["lease_generation"] if generation is None else generation,
            "selected": [{"eval_key": k, "eval_version": v} for k, v in selected],
            "skipped": [{"eval_key": k, "eval_version": v, "reason_code": c} for k, v, c in skipped],
        }
        path = f"/v1/evaluator/assignments/{assignment['assignment_id']}/plan"
        return self.request("POST", path, body, token=token)

    def heartbeat(self, run_ids, generation, worker_id="w1", token=TOKEN):
        body = {
            "protocol_version": "2",
            "worker_id": worker_id,
            "lease_generation": generation,
            "runs": [{"evaluation_run_id": r, "state": "running", "progress": 0.5} for r in run_ids],
        }
        return self.request("POST", "/v1/evaluator/runs/heartbeat", body, token=token)

    @staticmethod
    def result_body(generation, worker_id="w1", submission_id=None, eval_key="q", kind="score",
                    value=0.5, status="succeeded"):
        return {
            "protocol_version": "2",
            "result_schema_version": "2",
            "submission_id": submission_id or str(uuid.uuid4()),
            "worker_id": worker_id,
            "lease_generation": generation,
            "status": status,
            "started_at": "2026-08-28T12:00:10.000000Z",
            "finished_at": "2026-08-28T12:00:10.812000Z",
            "duration_ms": 812,
            "summary": None,
            "results": [
                {
                    "result_key": eval_key,
                    "result_kind": kind,
                    "numeric_value": value,
                    "bool_value": None,
                    "text_value": None,
                    "unit": "ratio",
                    "display_value": None,
                    "description": None,
                    "reasoning": None,
                    "labels": [],
                }
            ]
            if status == "succeeded"
            else [],
            "error_code": None if status == "succeeded" else "eval_error",
            "error_message": None if status == "succeeded" else "evaluation raised ValueError",
        }

    def result(self, run_id, body, token=TOKEN):
        return self.request("POST", f"/v1/evaluator/runs/{run_id}/result", body, token=token)

    # -- inspection ---------------------------------------------------------
    def state(self):
        return self.request("GET", "/emulator/v1/state", token=None).body

    def runs(self):
        return self.request("GET", "/emulator/v1/runs", token=None).body["runs"]

    def assignment(self, assignment_id):
        return self.request("GET", f"/emulator/v1/assignments/{assignment_id}", token=None).body

    def add_session(self, transcript, raw=False):
        path = "/emulator/v1/sessions" + ("?raw=1" if raw else "")
        return self.request("POST", path, transcript, token=None)

    def expire(self, assignment_id):
        return self.request("POST", f"/emulator/v1/expire/{assignment_id}", b"", token=None)

    def set_faults(self, **rates):
        """Changes fault rates at run time (fault_5xx=1.0, ...)."""
        return self.request("POST", "/emulator/v1/faults", rates, token=None)


def definition(eval_key, display_name, result_kind, evaluator_source, condition_source=None, version="1",
               timeout=10):
    """One managed definition in the emulator's --definitions file format."""
    return {"eval_key": eval_key, "eval_version": version, "display_name": display_name,
            "result_kind": result_kind, "labels": [], "condition_source": condition_source,
            "evaluator_source": evaluator_source, "timeout_seconds": timeout}


# Three managed definitions (python, no condition: always selected) the worker
# tests run: a score, a metric and an assertion.
WORKER_DEFS = [
    {"eval_key": "always_one", "eval_version": "1.0", "display_name": "Always one",
     "result_kind": "score", "labels": ["t"], "condition_source": None,
     "evaluator_source": "EvalResult(score=Score(1.0))", "timeout_seconds": 10},
    {"eval_key": "event_count", "eval_version": "1.0", "display_name": "Events",
     "result_kind": "metric", "labels": [], "condition_source": None,
     "evaluator_source": "EvalResult(metrics={'event_count': Metric(session.event_count)})",
     "timeout_seconds": None},
    {"eval_key": "has_end", "eval_version": "2.0", "display_name": "Ended",
     "result_kind": "assertion", "labels": ["outcome"],
     "condition_source": None,
     "evaluator_source": "EvalResult(assertions={'has_end': Assertion(session.count('agent_end') == 1)})",
     "timeout_seconds": 5},
]


def definitions_file(defs):
    """Writes defs to a temporary .json file for --definitions and returns its
    path (the caller removes it)."""
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(defs, f)
    f.close()
    return f.name


def stop_process(proc, timeout=30):
    """SIGTERM (the sidecar drains), then SIGKILL after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def admin_port_in_log(path, offset=0):
    """The port of the first "admin API listening" record in the JSON-lines
    log at `path` past byte `offset` (a sidecar started with --listen
    127.0.0.1:0 binds the port the kernel picks, so no other process can
    take it between choosing and binding), or None before that line."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("msg") == "admin API listening" and "port" in rec:
                    return int(rec["port"])
    except OSError:
        pass
    return None


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()
