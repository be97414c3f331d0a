"""Fault injection does what it says: retryable 500s, commit-then-drop,
added latency, forced lease loss; the inspection API is never faulted."""

import http.client
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from emulator_harness import EmulatorProcess  # noqa: E402


class Faults(unittest.TestCase):
    def test_fault_5xx_always(self):
        with EmulatorProcess("--sessions", "2", "--fault-5xx", "1") as emu:
            for _ in range(5):
                r = emu.register([])
                self.assertEqual((r.status, r.code), (500, "internal_error"))
                self.assertTrue(r.body["error"]["retryable"])
            st = emu.state()
            self.assertEqual(st["faults"]["internal_error"], 5)
            self.assertEqual(st["assignments"]["available"], 2)

    def test_fault_5xx_rate_is_roughly_honoured_and_harmless(self):
        with EmulatorProcess("--sessions", "400", "--fault-5xx", "0.3", "--seed", "5") as emu:
            register_failures = 0
            while emu.register([], max_concurrency=1).status != 200:
                register_failures += 1
            failures, claimed = 0, set()
            for _ in range(400):
                r = emu.claim(1)
                if r.status == 500:
                    failures += 1
                    self.assertEqual(r.code, "internal_error")
                    continue
                claimed.update(a["assignment_id"] for a in r.body["assignments"])
            st = emu.state()
            self.assertEqual(st["faults"]["internal_error"], failures + register_failures)
            self.assertTrue(60 <= failures <= 180, failures)  # 30 % of 400, loosely
            # A faulted claim never leased anything.
            self.assertEqual(st["assignments"]["leased"], len(claimed))
            self.assertEqual(len(claimed), 400 - failures)

    def test_fault_drop_commits_then_drops(self):
        with EmulatorProcess("--sessions", "3", "--fault-drop", "1") as emu:
            with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError)):
                emu.register([])
            # The registration was committed although no answer came back:
            with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError)):
                emu.claim(2)
            st = emu.state()
            self.assertEqual(st["assignments"]["leased"], 2)
            self.assertEqual(st["faults"]["dropped"], 2)

    def test_fault_drop_then_identical_retry_is_an_idempotent_replay(self):
        cat = [{"eval_key": "q", "display_name": "Q", "eval_version": "1", "result_kind": "score", "labels": []}]
        dropped = (http.client.RemoteDisconnected, ConnectionResetError)
        with EmulatorProcess("--fault-drop", "0.5", "--seed", "3", "--max-attempts", "50") as emu:
            aid = emu.add_session({"events": []}).body["assignment_id"]

            def retry(fn):
                for _ in range(60):
                    try:
                        return fn()
                    except dropped:
                        continue
                self.fail("never answered")

            retry(lambda: emu.register(cat))
            a = None
            while a is None:
                try:
                    a = emu.claim(1, definitions=cat).body["assignments"][0]
                except dropped:
                    emu.expire(aid)  # the dropped claim holds the lease: end it
            runs = retry(lambda: emu.plan(a, [("q", "1")])).body["runs"]
            body = emu.result_body(a["lease_generation"], eval_key="q")
            attempts, answer = 0, None
            while answer is None:
                attempts += 1
                try:
                    answer = emu.result(runs[0]["evaluation_run_id"], body).body
                except dropped:
                    pass
            st = emu.state()
            self.assertEqual((st["commits"], st["conflicts"]), (1, 0))
            self.assertEqual(st["idempotent_replays"], attempts - 1)
            self.assertEqual(answer["idempotent_replay"], attempts > 1)
            self.assertGreater(st["faults"]["dropped"], 0)

    def test_fault_latency(self):
        with EmulatorProcess("--fault-latency-ms", "300") as emu:
            t0 = time.monotonic()
            self.assertEqual(emu.register([]).status, 200)
            self.assertGreaterEqual(time.monotonic() - t0, 0.3)
            t0 = time.monotonic()
            emu.state()  # inspection is not delayed
            self.assertLess(time.monotonic() - t0, 0.3)

    def test_fault_lease_loss(self):
        with EmulatorProcess("--sessions", "1", "--fault-lease-loss", "1") as emu:
            emu.register([])
            a = emu.claim(1).body["assignments"][0]
            r = emu.fenced_get(a, "transcript")
            self.assertEqual((r.status, r.code), (409, "lease_lost"))
            st = emu.state()
            self.assertEqual((st["faults"]["lease_loss"], st["lease_losses"]), (1, 1))
            self.assertEqual(st["assignments"]["available"], 1)
            b = emu.claim(1).body["assignments"][0]
            self.assertEqual(b["lease_generation"], 2)

    def test_faults_change_at_run_time(self):
        with EmulatorProcess("--sessions", "2") as emu:
            self.assertEqual(emu.register([]).status, 200)
            r = emu.set_faults(fault_5xx=1)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, {"fault_5xx": 1.0, "fault_drop": 0.0,
                                      "fault_lease_loss": 0.0, "fault_latency_ms": 0})
            self.assertEqual(emu.claim(1).code, "internal_error")
            self.assertEqual(emu.state()["assignments"]["available"], 2)
            # A bad request changes nothing, and says which field is wrong.
            for bad, msg in ((b'{"fault_5xx": 0, "fault_drop": 2}', "fault_drop must be a number in [0, 1]"),
                             (b'{"fault_latency_ms": 1.5}', "fault_latency_ms must be an integer"),
                             (b'{"fault_typo": 0}', "unknown field 'fault_typo'"),
                             (b"[]", "must be a JSON object")):
                r = emu.request("POST", "/emulator/v1/faults", bad, token=None)
                self.assertEqual((r.status, r.code), (422, "invalid_request"), bad)
                self.assertIn(msg, r.message)
            self.assertEqual(emu.request("GET", "/emulator/v1/faults", token=None).body["fault_5xx"], 1.0)
            # Recovery.
            self.assertEqual(emu.set_faults(fault_5xx=0).status, 200)
            self.assertEqual(len(emu.claim(1).body["assignments"]), 1)
            st = emu.state()
            self.assertEqual(st["faults"]["internal_error"], 1)
            self.assertEqual(st["requests_by_call"]["claim"], 2)
            self.assertEqual(st["requests_by_call"]["register"], 1)


if __name__ == "__main__":
    unittest.main()
