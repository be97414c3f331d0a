"""`failproofai-sidecar demo` shows trouble: its managed results_per_call
definition fails on some sessions, --faults passes fault rates to its
emulator (the sidecar retries through them), and examples/flaky_evaluator.py,
run beside it, fails some local runs. Real processes over loopback."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from admin_harness import SOURCE

BIN = os.environ["FPS_BIN"]


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def wait_for(pred, what, timeout=90):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = pred()
            if v:
                return v
        except OSError as e:
            last = e
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} ({last})")


class DemoTest(unittest.TestCase):
    def test_bad_faults_are_usage_errors(self):
        for spec in ("5xx=2", "drop", "latency-ms=-1", "gremlins=0.1"):
            r = subprocess.run([BIN, "demo", "--faults", spec], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 2, (spec, r.stderr))
            self.assertIn("--faults", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_demo_shows_failures(self):
        tmp = tempfile.TemporaryDirectory()
        demo = subprocess.Popen([BIN, "demo", "--sessions", "8", "--rate", "2", "--listen",
                                 "127.0.0.1:0", "--db", os.path.join(tmp.name, "demo.db"),
                                 "--faults", "5xx=0.2,latency-ms=5"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        flaky = None
        try:
            # the banner comes once the admin API listens, with the port the
            # kernel chose for :0
            banner = "".join(demo.stdout.readline() for _ in range(6))
            self.assertIn("5xx 0.2", banner)
            m = re.search(r"admin UI:  http://127\.0\.0\.1:([0-9]+)/", banner)
            self.assertIsNotNone(m, banner)
            self.assertNotEqual(m.group(1), "0", banner)
            base = f"http://127.0.0.1:{m.group(1)}"
            failed = wait_for(lambda: get(f"{base}/v1/runs?eval_key=results_per_call&status=failed")["runs"],
                              "a failed results_per_call run")
            self.assertEqual(failed[0]["error_code"], "eval_error")
            detail = get(f"{base}/v1/runs/{failed[0]['id']}")
            self.assertEqual(detail["error_message"], "evaluation raised KeyError")
            wait_for(lambda: get(f"{base}/v1/runs?eval_key=results_per_call&status=succeeded")["runs"],
                     "results_per_call succeeding on other sessions")
            # the emulator's 500s reached the sidecar, which retried through them
            wait_for(lambda: b"failproofai_sidecar_server_retries_total{" in
                     urllib.request.urlopen(f"{base}/metrics", timeout=10).read(), "a retry")
            flaky = subprocess.Popen([sys.executable, os.path.join(SOURCE, "examples", "flaky_evaluator.py"),
                                      base], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

            def both():
                runs = get(f"{base}/v1/runs?eval_key=judge_quality&limit=500")["runs"]
                st = {r["status"] for r in runs}
                return runs if {"succeeded", "failed"} <= st else None
            runs = wait_for(both, "succeeded and failed judge_quality runs", timeout=120)
            self.assertTrue(all(r["execution_mode"] == "local" for r in runs))
            names = {e["name"]: e for e in get(f"{base}/v1/evaluators")["evaluators"]}
            self.assertIn(names["flaky-judge"]["state"], ("alive", "failing"))
        finally:
            if flaky:
                flaky.kill()
                flaky.wait()
            demo.send_signal(signal.SIGINT)
            try:
                demo.wait(timeout=60)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait()
            demo.stdout.close()
            tmp.cleanup()
        self.assertEqual(demo.returncode, 0)


if __name__ == "__main__":
    unittest.main()
