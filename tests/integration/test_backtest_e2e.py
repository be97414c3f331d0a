"""End to end: the sidecar with the archive on, against the emulator; then
`backtest --db` over the archive with --baseline production. The definitions
the live runs used show 0 changed and every session has its baseline; a
changed definition shows exactly its known difference; beside a state
database that cannot be read, the run fails with why."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from emulator_harness import EmulatorProcess
from fps_sidecar import BIN, Sidecar

N = 8
DEFS = [
    {"eval_key": "n_events", "eval_version": "1", "result_kind": "metric",
     "evaluator_source": "EvalResult(metrics={'n_events': Metric(len(session.events))})"},
    {"eval_key": "has_events", "eval_version": "1", "result_kind": "assertion",
     "evaluator_source": "EvalResult(assertions={'has_events': Assertion(len(session.events) > 0)})"},
]


def wait_for(pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


class BacktestArchive(unittest.TestCase):
    def test_production_baseline_over_the_archive(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        v1 = os.path.join(tmp.name, "v1.json")
        json.dump(DEFS, open(v1, "w"))
        v2defs = json.loads(json.dumps(DEFS))
        v2defs[0]["evaluator_source"] = "EvalResult(metrics={'n_events': Metric(len(session.events) + 2)})"
        v2 = os.path.join(tmp.name, "v2.json")
        json.dump(v2defs, open(v2, "w"))
        emu = EmulatorProcess("--definitions", v1, "--poll-seconds", "1", "--sessions", str(N))
        emu.start()
        self.addCleanup(emu.stop)
        sc = Sidecar(emu.base, token="emulator-token", extra=["--archive-max-mb", "64"])
        done = lambda: emu.state()["assignments"]["completed"] >= N
        ok = wait_for(done, 120)
        db = os.path.join(sc.dir, "sidecar.db")
        self.assertEqual(sc.stop(), 0)  # the archive's queue is written at close
        self.assertTrue(ok, sc.raw_log()[-3000:])

        def backtest(defs):
            p = subprocess.run([BIN, "backtest", "--definitions", defs, "--db", db, "--baseline",
                                "production", "--format", "json", "--jobs", "2"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            return {k["eval_key"]: k for k in json.loads(p.stdout)["eval_keys"]}, json.loads(p.stdout)

        same, doc = backtest(v1)
        self.assertEqual(doc["sessions"], N, doc)
        self.assertEqual(doc["input_errors"], [])
        for key in ("n_events", "has_events"):
            self.assertEqual(same[key]["sessions"], N)
            self.assertEqual(same[key]["no_baseline"], 0, same[key])
            self.assertEqual(same[key]["changed"], 0, same[key])
        changed, _ = backtest(v2)
        self.assertEqual(changed["n_events"]["changed"], N)
        self.assertEqual(changed["n_events"]["max_abs_delta"], 2.0)
        self.assertEqual(changed["n_events"]["mean_abs_delta"], 2.0)
        self.assertEqual(changed["has_events"]["changed"], 0)

        # the same archive beside a state database that is not one: the
        # production baseline cannot be read, and the run fails with why
        # (rather than reporting every session as having no baseline)
        bad = os.path.join(tmp.name, "bad.db")
        shutil.copyfile(db + ".archive", bad + ".archive")
        with open(bad, "wb") as f:
            f.write(b"not a database\n" * 100)
        p = subprocess.run([BIN, "backtest", "--definitions", v1, "--db", bad, "--format", "json"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
        self.assertRegex(p.stderr, r"backtest: the production baseline of session \S+ cannot be"
                         r" read from the state database: store: archive: [^\n]*file is not a"
                         r" database\n")


if __name__ == "__main__":
    unittest.main()
