"""Helpers for the worker's integration tests: start/stop the sidecar binary
as a subprocess against a given server URL, read its JSON log lines, and
probe whether the interpreter has landed (value assertions need it)."""

import json
import os
import signal
import subprocess
import tempfile
import time

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")

class Sidecar:
    def __init__(self, server_url, token="test-token-123", concurrency=4, extra=(),
                 worker_id=None, env=None):
        self.dir = tempfile.mkdtemp(prefix="fps-worker-")
        self.log_path = os.path.join(self.dir, "sidecar.log")
        args = [BIN, "run", "--server", server_url, "--listen", "127.0.0.1:0",
                "--db", os.path.join(self.dir, "sidecar.db"), "--concurrency", str(concurrency),
                "--drain-timeout", "20", "--request-timeout", "5", "--log-level", "debug"]
        if worker_id:
            args += ["--worker-id", worker_id]
        args += list(extra)
        e = dict(os.environ)
        e["FAILPROOFAI_EVALUATOR_TOKEN"] = token
        e.update(env or {})
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log, env=e)

    def lines(self):
        out = []
        with open(self.log_path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    out.append({"msg": line.strip()})
        return out

    def raw_log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_log(self, pred, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            for line in self.lines():
                if pred(line):
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return None

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode
