#!/usr/bin/env python3
"""A local evaluator for failproofai-sidecar: standard library only. Registers with the sidecar
(the registration token read from a mounted file), heartbeats within its TTL with its registration's
own secret, checks each run's signature, and answers with an EvalResult. serve() is the protocol
side, reused by examples/flaky_evaluator.py; tool_health is this evaluator's own judgement.
Usage: example_evaluator.py [SIDECAR_URL] [PORT]"""
import hashlib, hmac, json, os, sys, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SIDECAR = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8787"
TOKEN_FILE = os.environ.get("FAILPROOFAI_REGISTRATION_TOKEN_FILE", "/var/run/secrets/failproofai/registration-token")
TOKEN = open(TOKEN_FILE).read().strip() if os.path.exists(TOKEN_FILE) else None  # None: --insecure-open-admin
secret = None  # this registration's own secret, answered by the first PUT

def call(method, path, body=None):
    headers = {"Content-Type": "application/json", **({"Authorization": "Bearer " + TOKEN} if TOKEN else {}),
               **({"X-FailproofAI-Registration-Secret": secret} if secret else {})}
    req = urllib.request.Request(SIDECAR + path, method=method, data=json.dumps(body or {}).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())

def signed(header, body):  # X-FailproofAI-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>
    try:
        f = dict(part.split("=", 1) for part in header.split(","))
        mac = hmac.new(secret.encode(), f["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
        return abs(time.time() - int(f["t"])) <= 300 and hmac.compare_digest(mac, f["v1"])
    except (AttributeError, KeyError, ValueError):
        return False

def serve(name, definitions, answer, what):
    """Registers `definitions` as evaluator `name`, keeps the registration alive and answers each
    signed run with answer(run): a result (sent as JSON) or an (HTTP error status, reason) pair."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if not signed(self.headers.get("X-FailproofAI-Signature", ""), body):
                return self.send_error(401)
            result = answer(json.loads(body))
            if isinstance(result, tuple):
                return self.send_error(*result)
            out = json.dumps(result).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
        def log_message(self, *args): pass

    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), Handler)
    registration = {"version": "1.0.0", "endpoint": f"http://127.0.0.1:{server.server_port}/", "ttl_seconds": 10,
                    "definitions": definitions}

    def keep_alive():
        global secret
        while True:
            try:  # register (again) whenever the heartbeat is refused: the TTL ran out
                call("POST", f"/v1/evaluators/{name}/heartbeat")
            except Exception:
                try: secret = call("PUT", f"/v1/evaluators/{name}", registration).get("registration_secret", secret)
                except Exception as e: print("registration failed:", e, file=sys.stderr)
            time.sleep(3)

    threading.Thread(target=keep_alive, daemon=True).start()
    print(f"{what} on port {server.server_port}", flush=True)
    server.serve_forever()

def tool_health(run):
    events = run["transcript"]["events"]
    errors = sum(e["event_type"] == "tool_result" and e["payload"].get("status") == "error" for e in events)
    return {"score": 1.0 if errors == 0 else 1 / (1 + errors), "metrics": {"tool_errors": errors},
            "reasoning": f"{errors} tool errors in {len(events)} events"}

if __name__ == "__main__":
    serve(os.environ.get("EVALUATOR_NAME", "example"),
          [{"eval_key": "tool_health", "eval_version": "1", "labels": ["example"],
            "condition": "session.count('tool_result') > 0"}], tool_health, "example evaluator")
