"""Worker loop end to end against the real emulator binary over loopback:
N sessions x M managed definitions all committed with the
right values, faults (5xx, dropped responses,
latency) with every session completed and zero conflicts, transcript_too_large,
and three sidecars sharing one emulator with every run committed exactly
once."""

import os
import signal
import time
import unittest

from emulator_harness import WORKER_DEFS as DEFS, EmulatorProcess, definitions_file, wait_for
from fps_sidecar import Sidecar


class EmulatorBase(unittest.TestCase):
    def setUp(self):
        self.emu = None
        self.sidecars = []
        self.files = []

    def tearDown(self):
        for sc in self.sidecars:
            sc.stop(signal.SIGKILL)
        if self.emu:
            self.emu.stop()
        for f in self.files:
            os.unlink(f)

    def start_emu(self, defs, *args):
        path = definitions_file(defs)
        self.files.append(path)
        self.emu = EmulatorProcess("--definitions", path, "--poll-seconds", "1", *args)
        self.emu.start()
        return self.emu

    def start_sidecar(self, **kw):
        sc = Sidecar(self.emu.base, token="emulator-token", **kw)
        self.sidecars.append(sc)
        return sc

    def finished(self, n):
        def pred():
            st = self.emu.state()["assignments"]
            return st["completed"] + st["skipped"] + st["dead"] >= n
        return pred


class EndToEnd(EmulatorBase):
    def test_sessions_times_definitions(self):
        emu = self.start_emu(DEFS, "--sessions", "20")
        sc = self.start_sidecar()
        self.assertTrue(wait_for(self.finished(20), 60), sc.raw_log()[-3000:])
        st = emu.state()
        self.assertEqual(st["assignments"]["completed"], 20, st)
        self.assertEqual(st["runs"]["committed"], 60)
        self.assertEqual(st["commits"], 60)
        self.assertEqual(st["conflicts"], 0)
        runs = emu.runs()
        self.assertEqual(len({r["evaluation_run_id"] for r in runs}), 60)
        for r in runs:
            res = r["result"]
            self.assertEqual(res["status"], "succeeded", res)
            prim = [i for i in res["results"] if i["result_key"] == r["eval_key"]][0]
            if r["eval_key"] == "always_one":
                self.assertEqual(prim["numeric_value"], 1.0)
            if r["eval_key"] == "has_end":
                self.assertIs(prim["bool_value"], True)
            if r["eval_key"] == "event_count":
                self.assertGreater(prim["numeric_value"], 3)
        self.assertEqual(sc.stop(signal.SIGTERM), 0)

    def test_faults_every_session_completes(self):
        # A dropped claim response holds leases the worker never saw: a short
        # lease gives them back quickly.
        emu = self.start_emu(DEFS[:2], "--sessions", "30", "--fault-5xx", "0.2",
                             "--fault-drop", "0.05", "--fault-latency-ms", "20",
                             "--lease-seconds", "8", "--heartbeat-seconds", "2",
                             "--max-attempts", "100")
        sc = self.start_sidecar()
        self.assertTrue(wait_for(self.finished(30), 120), sc.raw_log()[-3000:])
        st = emu.state()
        self.assertEqual(st["assignments"]["completed"], 30, st)
        self.assertEqual(st["runs"]["committed"], 60)
        self.assertEqual(st["conflicts"], 0)
        self.assertTrue(sc.alive())

    def test_transcript_too_large(self):
        emu = self.start_emu(DEFS[:1], "--sessions", "2", "--max-transcript-bytes", "200")
        sc = self.start_sidecar()
        self.assertTrue(sc.wait_log(lambda l: l.get("msg", "").startswith("transcript too large"),
                                    30), sc.raw_log()[-3000:])
        time.sleep(0.3)
        self.assertEqual(emu.state()["runs"]["committed"], 0)
        self.assertTrue(sc.alive())

    def test_disabled_definitions(self):
        emu = self.start_emu(DEFS, "--sessions", "3", "--disable", "event_count")
        sc = self.start_sidecar()
        self.assertTrue(wait_for(self.finished(3), 60), sc.raw_log()[-3000:])
        runs = emu.runs()
        self.assertEqual(len(runs), 6)
        self.assertNotIn("event_count", {r["eval_key"] for r in runs})


    def test_managed_runs_of_an_assignment_take_turns(self):
        # Three slow managed runs of one session: they share the assignment's
        # one jail session (one child), so they run one after another: their
        # [started_at, finished_at] intervals, as submitted, are disjoint.
        # Then a second session: the worker goes on with a fresh session.
        slow = "EvalResult(score=Score(len([i for i in range(400000) if i % 7 == 0]) * 0 + 1.0))"
        defs = [dict(d, eval_key=f"slow_{k}", evaluator_source=slow, result_kind="score",
                     condition_source=None, timeout_seconds=30)
                for k, d in enumerate(DEFS)]
        emu = self.start_emu(defs, "--sessions", "2")
        sc = self.start_sidecar(concurrency=1)
        self.assertTrue(wait_for(self.finished(2), 90), sc.raw_log()[-3000:])
        runs = emu.runs()
        self.assertEqual(len(runs), 6)
        by_assignment = {}
        for r in runs:
            self.assertEqual(r["result"]["status"], "succeeded", r["result"])
            by_assignment.setdefault(r["assignment_id"], []).append(r["result"])
        self.assertEqual(len(by_assignment), 2)
        for results in by_assignment.values():
            spans = sorted((x["started_at"], x["finished_at"]) for x in results)
            for (_, end), (start, _) in zip(spans, spans[1:]):
                self.assertLessEqual(end, start, results)
        self.assertEqual(emu.state()["conflicts"], 0)
        self.assertEqual(sc.stop(signal.SIGTERM), 0)


class ThreeSidecars(EmulatorBase):
    def test_three_sidecars_300_sessions_exactly_once(self):
        emu = self.start_emu(DEFS[:1], "--sessions", "300", "--threads", "4")
        for i in range(3):
            self.start_sidecar(worker_id=f"pod-{i}", concurrency=4)
        self.assertTrue(wait_for(self.finished(300), 240),
                        self.sidecars[0].raw_log()[-3000:])
        st = emu.state()
        self.assertEqual(st["assignments"]["completed"], 300, st)
        self.assertEqual(st["runs"]["committed"], 300)
        self.assertEqual(st["commits"], 300)
        self.assertEqual(st["conflicts"], 0)
        runs = emu.runs()
        self.assertEqual(len({r["evaluation_run_id"] for r in runs}), 300)
        self.assertEqual(len({r["assignment_id"] for r in runs}), 300)
        for sc in self.sidecars:
            self.assertEqual(sc.stop(signal.SIGTERM), 0)


if __name__ == "__main__":
    unittest.main()
