#!/usr/bin/env python3
"""A local evaluator for failproofai-sidecar: standard library only.
Registers with the sidecar, heartbeats within its TTL, and answers each run
with an EvalResult. Usage: example_evaluator.py [SIDECAR_URL] [PORT]"""
import json, os, sys, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SIDECAR = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8787"
NAME, SECRET = os.environ.get("EVALUATOR_NAME", "example"), os.environ.get("EVALUATOR_SECRET")

def call(method, path, body=None):
    req = urllib.request.Request(SIDECAR + path, method=method, data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=5).status

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if SECRET and self.headers.get("X-FailproofAI-Evaluator-Token") != SECRET:
            return self.send_error(403)
        run = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        events = run["transcript"]["events"]
        errors = sum(e["event_type"] == "tool_result" and e["payload"].get("status") == "error" for e in events)
        result = {"score": 1.0 if errors == 0 else 1 / (1 + errors), "metrics": {"tool_errors": errors},
                  "reasoning": f"{errors} tool errors in {len(events)} events"}
        out = json.dumps(result).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *args): pass

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), Handler)
registration = {"version": "1.0.0", "endpoint": f"http://127.0.0.1:{server.server_port}/", "ttl_seconds": 10,
                "definitions": [{"eval_key": "tool_health", "eval_version": "1", "labels": ["example"],
                                 "condition": "session.count('tool_result') > 0"}]}

def keep_alive():
    while True:
        try:  # register (again) whenever the heartbeat is refused: the TTL ran out
            call("POST", f"/v1/evaluators/{NAME}/heartbeat")
        except Exception:
            try: call("PUT", f"/v1/evaluators/{NAME}", registration)
            except Exception as e: print("registration failed:", e, file=sys.stderr)
        time.sleep(3)

threading.Thread(target=keep_alive, daemon=True).start()
print(f"example evaluator on port {server.server_port}", flush=True)
server.serve_forever()
