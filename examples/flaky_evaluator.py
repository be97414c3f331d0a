#!/usr/bin/env python3
"""A local evaluator that fails some of its runs, to see failures on the admin page
(run it beside `failproofai-sidecar demo`). Standard library only; registers
with the sidecar, heartbeats within its TTL with its registration's own
secret, checks each run's signature and answers: about one run in four (by
run id) gets an HTTP 500, one in eight a Score above 1 (rejected by the
sidecar's validation as an eval_error), the rest a score.
Usage: flaky_evaluator.py [SIDECAR_URL] [PORT]"""
import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SIDECAR = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8787"
NAME = os.environ.get("EVALUATOR_NAME", "flaky-judge")
TOKEN_FILE = os.environ.get("FAILPROOFAI_REGISTRATION_TOKEN_FILE", "")
TOKEN = open(TOKEN_FILE).read().strip() if TOKEN_FILE and os.path.exists(TOKEN_FILE) else None
secret = None  # this registration's own secret, answered by the first PUT


def call(method, path, body=None):
    headers = {"Content-Type": "application/json",
               **({"Authorization": "Bearer " + TOKEN} if TOKEN else {}),
               **({"X-FailproofAI-Registration-Secret": secret} if secret else {})}
    req = urllib.request.Request(SIDECAR + path, method=method, data=json.dumps(body or {}).encode(),
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def signed(header, body):  # X-FailproofAI-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>
    try:
        f = dict(part.split("=", 1) for part in header.split(","))
        mac = hmac.new(secret.encode(), f["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
        return abs(time.time() - int(f["t"])) <= 300 and hmac.compare_digest(mac, f["v1"])
    except (AttributeError, KeyError, ValueError):
        return False


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if not signed(self.headers.get("X-FailproofAI-Signature", ""), body):
            return self.send_error(401)
        run = json.loads(body)
        roll = hashlib.sha256(run["evaluation_run_id"].encode()).digest()[0]
        if roll < 64:  # one in four: the evaluator itself breaks
            return self.send_error(500, "judge backend unavailable")
        events = run["transcript"]["events"]
        score = 1.5 if roll < 96 else min(1.0, len(events) / 20)  # one in eight: out of range
        out = json.dumps({"score": score, "reasoning": f"{len(events)} events"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), Handler)
registration = {"version": "1.0.0", "endpoint": f"http://127.0.0.1:{server.server_port}/",
                "ttl_seconds": 10,
                "definitions": [{"eval_key": "judge_quality", "eval_version": "1", "labels": ["demo"]}]}


def keep_alive():
    global secret
    while True:
        try:  # register (again) whenever the heartbeat is refused: the TTL ran out
            call("POST", f"/v1/evaluators/{NAME}/heartbeat")
        except Exception:
            try:
                secret = call("PUT", f"/v1/evaluators/{NAME}", registration).get("registration_secret",
                                                                                 secret)
            except Exception as e:
                print("registration failed:", e, file=sys.stderr)
        time.sleep(3)


threading.Thread(target=keep_alive, daemon=True).start()
print(f"flaky evaluator on port {server.server_port}", flush=True)
server.serve_forever()
