"""The worker under server faults, against the real emulator over loopback:
a mix of 5xx answers, responses dropped after the commit, latency and lease
loss still ends with every session completed, no conflicting and no
duplicate commit; a full outage (100 % 5xx for 10 s, changed at run time)
keeps the request rate at the emulator within the retry budget (claims
become slow probes), turns the sidecar not ready with the circuit breaker as
the reason, and after the recovery it is ready again and everything
completes."""

import json
import os
import signal
import time
import unittest
import urllib.error
import urllib.request

from emulator_harness import EmulatorProcess, definition, definitions_file, wait_for
from fps_sidecar import Sidecar

DEFS = [
    definition("always_one", "Always one", "score", "EvalResult(score=Score(1.0))", version="1.0"),
    definition("event_count", "Events", "metric",
               "EvalResult(metrics={'event_count': Metric(session.event_count)})",
               condition_source="session.count('agent_end') >= 0", version="1.0"),
    definition("has_end", "Ended", "assertion",
               "EvalResult(assertions={'has_end': Assertion(session.count('agent_end') == 1)})",
               version="2.0"),
]

# Requests that are not heartbeats or result submissions of held work.
NEW_WORK = ("register", "claim", "transcript", "definitions", "plan")


class WorkerFaults(unittest.TestCase):
    def setUp(self):
        self.defs = definitions_file(DEFS)
        self.addCleanup(os.unlink, self.defs)

    def start(self, sessions, *flags):
        """The emulator and a sidecar, stopped after the test (the sidecar killed first)."""
        self.emu = EmulatorProcess("--definitions", self.defs, "--sessions", str(sessions),
                                   "--token", "test-token-123", "--poll-seconds", "1", *flags)
        self.addCleanup(self.emu.stop)
        self.emu.start()
        self.sc = Sidecar(self.emu.base, concurrency=4, extra=("--log-level", "info"))
        self.addCleanup(self.sc.stop, signal.SIGKILL)

    def done(self, sessions):
        def check():
            st = self.emu.state()
            return st["assignments"]["completed"] == sessions and st["runs"]["pending"] == 0
        return check

    def assert_exactly_once(self, sessions):
        st = self.emu.state()
        self.assertEqual(st["assignments"]["completed"], sessions, st)
        self.assertEqual(st["conflicts"], 0, st)
        runs = self.emu.runs()
        keys = [(r["session_id"], r["eval_key"]) for r in runs]
        # Every (session, definition) committed once: no duplicate commit.
        self.assertEqual(len(keys), len(set(keys)))
        self.assertEqual(len(keys), sessions * len(DEFS))
        self.assertEqual(st["commits"], sessions * len(DEFS), st)
        for r in runs:
            self.assertEqual(r["result"]["status"], "succeeded", r["result"])
        return st

    def admin(self, path):
        line = self.sc.wait_log(lambda l: l.get("msg") == "admin API listening", 20)
        self.assertIsNotNone(line, self.sc.raw_log()[-2000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{line['port']}{path}", timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_fault_mix_150_sessions_complete_exactly_once(self):
        self.start(150, "--fault-5xx", "0.2", "--fault-drop", "0.05", "--fault-latency-ms", "20",
                   "--fault-lease-loss", "0.02", "--lease-seconds", "8", "--heartbeat-seconds", "2",
                   "--max-attempts", "50")
        self.assertTrue(wait_for(self.done(150), 240, 0.2), (self.emu.state(), self.sc.raw_log()[-3000:]))
        st = self.assert_exactly_once(150)
        # The faults did happen.
        self.assertGreater(st["faults"]["internal_error"], 0)
        self.assertGreater(st["faults"]["dropped"], 0)
        self.assertGreater(st["faults"]["lease_loss"], 0)
        self.assertTrue(self.sc.alive())

    def test_outage_claims_become_probes_not_ready_then_recovers(self):
        self.start(20, "--lease-seconds", "6", "--heartbeat-seconds", "1")
        self.assertTrue(wait_for(self.done(20), 60, 0.1), self.sc.raw_log()[-3000:])
        self.assertTrue(wait_for(lambda: self.admin("/readyz")[0] == 200, 10, 0.1))
        # The outage: every protocol call answers 500; new sessions wait.
        self.assertEqual(self.emu.set_faults(fault_5xx=1).status, 200)
        self.emu.request("POST", "/emulator/v1/sessions?generate=20", b"", token=None)
        before = self.emu.state()["requests_by_call"]
        t0 = time.monotonic()
        not_ready = None
        mid = None
        while time.monotonic() - t0 < 10:
            code, body = self.admin("/readyz")
            if code == 503 and "circuit breaker open" in body.get("reason", ""):
                not_ready = not_ready or body["reason"]
            if mid is None and time.monotonic() - t0 >= 4:
                mid = self.emu.state()["requests_by_call"]
            time.sleep(0.2)
        during = self.emu.state()["requests_by_call"]
        elapsed = time.monotonic() - t0
        self.assertEqual(self.emu.set_faults(fault_5xx=0).status, 200)
        self.assertIsNotNone(not_ready, "never not ready with the breaker open during the outage")
        total = sum(during[k] - before[k] for k in during)
        new_work = sum(during[k] - before[k] for k in NEW_WORK)
        steady = sum(during[k] - mid[k] for k in NEW_WORK)
        # Within the retry budget: the floor (10 retries per second) over the
        # outage, besides heartbeats and results (none are held here).
        self.assertLessEqual(total, 10 * elapsed, (before, during))
        # Once the breaker is open, claims are probes: at most one per second
        # (one per two seconds, plus scheduling slack).
        self.assertLessEqual(steady, (elapsed - 4) * 1.0, (mid, during))
        self.assertGreater(new_work, 0)
        status = self.admin("/v1/status")[1]
        self.assertIn(status["server_policy"]["breaker_state"], ("open", "half_open", "closed"))
        self.assertGreaterEqual(status["server_policy"]["breaker_opened"], 1)
        # Recovery: ready again, and the waiting sessions complete.
        self.assertTrue(wait_for(lambda: self.admin("/readyz")[0] == 200, 20, 0.1),
                        self.admin("/readyz"))
        self.assertTrue(wait_for(self.done(40), 60, 0.1), (self.emu.state(), self.sc.raw_log()[-3000:]))
        self.assert_exactly_once(40)
        self.assertTrue(self.sc.alive())


if __name__ == "__main__":
    unittest.main()
