"""Harness for the admin API and local evaluator suites (test_api*.py,
test_local*.py): starts `failproofai-sidecar run` on an ephemeral loopback
admin port against a server URL (usually the emulator), collects its JSON log
lines, and talks to the admin API over real HTTP with full control of the
headers (Host, Origin, Content-Type, Authorization)."""

import http.client
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")
SOURCE = os.environ.get("FPS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TOKEN = "emulator-token"


class Reply:
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
        return f"Reply({self.status}, {self.raw[:400]!r})"



class Sidecar:
    """`failproofai-sidecar run` with its admin API on 127.0.0.1:<ephemeral>."""

    def __init__(self, server_url, *args, db=None, env=None, token=TOKEN, tokens=True, wrap=(), cwd=None):
        """With `tokens` (the default) the admin and registration tokens are
        written to files and passed with --admin-token-file and
        --registration-token-file; request() then sends the admin token on
        state-changing requests unless told otherwise (auth=). `wrap` is a
        command that execs the sidecar (its argv follows), e.g. one that
        enters a namespace first."""
        self.server_url = server_url
        self.wrap = list(wrap)
        self.cwd = cwd
        self.args = list(args)
        self.tmp = tempfile.TemporaryDirectory(prefix="fps-api-")
        self.db = db or os.path.join(self.tmp.name, "sidecar.db")
        self.admin_token = self.registration_token = self.registration_token_file = None
        if tokens and "--insecure-open-admin" not in self.args:
            self.admin_token = "admin-" + os.urandom(16).hex()
            self.registration_token = "reg-" + os.urandom(16).hex()
            for name, value in (("admin", self.admin_token), ("registration",
                                                              self.registration_token)):
                path = os.path.join(self.tmp.name, name + ".token")
                with open(path, "w") as f:
                    f.write(value + "\n")
                self.args += [f"--{name}-token-file", path]
            self.registration_token_file = path
        self.env = dict(os.environ)
        self.env["FAILPROOFAI_EVALUATOR_TOKEN"] = token
        self.env.update(env or {})
        self.proc = None
        self.port = None
        self.lines = []
        self._lock = threading.Lock()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        self.tmp.cleanup()

    def _reader(self, stream):
        for line in stream:
            with self._lock:
                self.lines.append(line)

    def start(self, timeout=20):
        self.lines = []
        self.proc = subprocess.Popen(
            [*self.wrap, BIN, "run", "--server", self.server_url, "--listen", "127.0.0.1:0", "--db", self.db,
             *self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=self.env, cwd=self.cwd)
        self._thread = threading.Thread(target=self._reader, args=(self.proc.stderr,), daemon=True)
        self._thread.start()
        deadline = time.time() + timeout
        while time.time() < deadline:
            for rec in self.logs():
                if rec.get("msg") == "admin API listening" and "port" in rec:
                    self.port = int(rec["port"])
                    return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        out = "".join(self.lines)
        self.stop()
        raise RuntimeError(f"sidecar did not start: {out[-2000:]}")

    def logs(self):
        with self._lock:
            lines = list(self.lines)
        recs = []
        for line in lines:
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
        return recs

    def log_text(self):
        with self._lock:
            return "".join(self.lines)

    def stop(self, sig_timeout=15):
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(sig_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait(5)
        self._thread.join(5)
        self.proc.stderr.close()
        self.proc = None
        return rc

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # -- HTTP ---------------------------------------------------------------
    def request(self, method, path, body=None, headers=None, json_ct=True, timeout=30,
                auth="admin"):
        """auth: "admin" (default: the admin token on state-changing
        requests), "registration", or None (no Authorization header)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {}
        token = {"admin": self.admin_token, "registration": self.registration_token}.get(auth)
        if token and method in ("POST", "PUT", "DELETE", "PATCH"):
            h["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode("utf-8")
        if json_ct and method in ("POST", "PUT", "DELETE", "PATCH"):
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    def auth_line(self, auth="admin"):
        """The raw Authorization header line (bytes, CRLF-terminated) for
        tests that write HTTP by hand; b"" without tokens."""
        token = {"admin": self.admin_token, "registration": self.registration_token}.get(auth)
        return b"Authorization: Bearer %s\r\n" % token.encode() if token else b""

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def wait_for(self, predicate, timeout=30, interval=0.1, what="condition"):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what} (last: {last!r})\n"
                             f"sidecar log tail:\n{self.log_text()[-3000:]}")


# Sockets that hold the dead ports (bound, never listening) until the test
# process exits.
_DEAD = []


def dead_port():
    """A loopback port that refuses every connection for the whole test
    process: a bound socket that never listens holds it, so no other suite's
    emulator or evaluator running in parallel can be given it (a sidecar
    whose "down" server turned out to be another suite's emulator, with the
    same token, would register there and fight that suite's sidecar over the
    instance's catalog)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _DEAD.append(s)
    return s.getsockname()[1]


def dead_server():
    """A server URL on a dead_port()."""
    return f"http://127.0.0.1:{dead_port()}"


def recv_all(sock):
    """Everything the peer sends until it closes (bytes)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def write_json(directory, name, obj):
    """Writes obj as JSON to directory/name; returns the path."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


class JsonHandler(BaseHTTPRequestHandler):
    """Base of the tests' local evaluator endpoints: reply() sends JSON;
    request logging is off."""

    def reply(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


class SidecarCase(unittest.TestCase):
    """One sidecar for the whole class, its server down (dead_server());
    SIDECAR_ENV adds environment variables."""
    SIDECAR_ENV = None

    @classmethod
    def setUpClass(cls):
        cls.sc = Sidecar(dead_server(), env=cls.SIDECAR_ENV)
        cls.sc.start()

    @classmethod
    def tearDownClass(cls):
        cls.sc.stop()
        cls.sc.tmp.cleanup()


def emulator(*args):
    """An EmulatorProcess from the emulator's harness."""
    from emulator_harness import EmulatorProcess
    return EmulatorProcess(*args)


def sample_transcript(n_events=6, errors=1):
    events = []
    for i in range(n_events):
        kind = ["agent_start", "human_input", "tool_use", "tool_result", "model_response",
                "agent_end"][i % 6]
        payload = {"text": f"event {i}"}
        if kind == "tool_result":
            payload = {"status": "error" if errors > 0 else "ok", "latency_ms": 10 + i}
            errors -= 1
        events.append({"id": f"e{i}", "ts": "2026-08-28T12:00:00.000000Z", "event_type": kind,
                       "payload": payload})
    return {"schema_version": "2", "assignment_id": "a1", "session_id": "s1",
            "session_revision_id": "r1", "agent_id": "agent", "environment": "test",
            "started_at": "2026-08-28T12:00:00.000000Z", "ended_at": "2026-08-28T12:01:00.000000Z",
            "event_count": len(events), "events": events}
