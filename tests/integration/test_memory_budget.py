"""The memory budget end to end (README "Memory budget"): 24 sessions of
about 22 MB each against the emulator with --concurrency 32 and
--memory-limit-mb 400. Every run commits, no lease is lost and nothing is
dead-lettered; the claims were held back by the budget (fewer assignments in
flight than the concurrency allows) while /readyz stayed ready; the tree's
memory, sampled every 50 ms as the budget counts it (tree_memory.py), never
exceeds the budget (asserted in the plain build only: the sanitizer's own
shadow memory and quarantine make the figure meaningless there, where 8
sessions keep the runtime modest); and the outcomes equal those of a run
without a budget."""

import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory_harness  # noqa: E402
from test_conformance import sanitized  # noqa: E402

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")
BUDGET_MB = 400
# The sanitizer build asserts no memory figure, and its emulator parses and
# its children evaluate several times slower: a third of the sessions there.
SESSIONS = 8 if sanitized(BIN) else 24


class MemoryBudgetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="fps-memory-")
        cls.transcript_bytes = memory_harness.make_sessions(cls.dir, SESSIONS, events=65000)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_budget_bounds_the_tree_and_changes_no_outcome(self):
        self.assertGreater(self.transcript_bytes, 20 << 20)
        # the reference's emulator parses its sessions meanwhile
        loading = memory_harness.Loading(self.dir)
        try:
            budgeted = memory_harness.run_once(self.dir, SESSIONS, 32, budget_mb=BUDGET_MB)
        finally:
            ref = loading.ready()
        # the reference: no budget (at the default concurrency, which keeps
        # this machine's memory modest; outcomes do not depend on it)
        free = memory_harness.run_once(self.dir, SESSIONS, 4, budget_mb=None, emu=ref)
        for name, r in (("budgeted", budgeted), ("unbudgeted", free)):
            a = r["state"]["assignments"]
            self.assertEqual(a["completed"], SESSIONS, (name, a, r["log"][-3000:]))
            self.assertEqual(a["dead"], 0, name)
            self.assertEqual(r["state"]["lease_losses"], 0, name)
            self.assertEqual(r["state"]["runs"]["pending"], 0, name)
            self.assertEqual(r["counters"]["leases_lost"], 0, name)
            self.assertNotIn("transcript too large", r["log"], name)
        self.assertGreaterEqual(budgeted["runs"], SESSIONS)
        self.assertEqual(budgeted["runs"], free["runs"])
        self.assertEqual(budgeted["outcomes"], free["outcomes"])
        statuses = {s for s, _ in budgeted["outcomes"].values()}
        self.assertEqual(statuses, {"succeeded"}, statuses)
        # the budget held claims back, and that was backpressure, not failure
        mem = budgeted["memory"]
        self.assertEqual(mem["budget_bytes"], BUDGET_MB << 20)
        self.assertTrue(budgeted["waited"])
        self.assertLess(budgeted["max_active"], 32)
        self.assertEqual(budgeted["not_ready_while_waiting"], 0)
        self.assertGreaterEqual(mem["transcript_p95_bytes"], 20 << 20)
        # every reservation came back
        self.assertEqual(mem["sandboxes_reserved"], 0)
        self.assertIsNone(free["memory"]["budget_bytes"])
        self.assertGreater(budgeted["samples"], 10)
        if sanitized(BIN):
            return
        self.assertLessEqual(budgeted["peak"], BUDGET_MB << 20,
                             "tree peak %.1f MiB over the %d MiB budget"
                             % (budgeted["peak"] / 2**20, BUDGET_MB))

    def test_transcript_that_can_never_fit_ends_as_too_large(self):
        # one ~22 MB session: its cost (3.25 bytes per byte, ~70 MiB) beside
        # the tree at start, the recent ring (32 MiB) and one sandbox
        # reservation (64 MiB) exceeds 150 MiB, which is itself a valid budget
        one = tempfile.mkdtemp(prefix="fps-memory-one-")
        try:
            shutil.copy(os.path.join(self.dir, "s000.json"), one)
            emu = memory_harness.emulator(one)
            emu.start()
            sc = None
            try:
                sc = memory_harness.Sidecar(emu.base, token="emulator-token", concurrency=4,
                                            extra=["--memory-limit-mb", "150"])
                line = sc.wait_log(lambda l: l.get("msg") == "transcript too large; "
                                   "assignment ends", timeout=120)
                self.assertIsNotNone(line, sc.raw_log()[-3000:])
                self.assertIn("can never fit the memory budget (150 MiB", line["error"])
                self.assertTrue(sc.alive())
                self.assertEqual(emu.state()["runs"]["committed"], 0)
            finally:
                if sc is not None:
                    sc.stop()
                emu.stop()
        finally:
            shutil.rmtree(one, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
