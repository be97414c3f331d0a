"""The reference Python SDK worker (FailproofAI/failproofai,
sdk/python/failproofai_sdk/evaluator) completes sessions against the emulator,
unchanged: managed definitions (--sample-definitions) plus two local
evaluations, with and without injected faults.

The SDK is not vendored here (its code is not ours to ship), so this check is
not part of the README's test command: run it by hand where the SDK exists,
    cd tests/interop && FPS_BIN=... FPS_REFSDK=/path/to/sdk/python \
        /usr/bin/python3 -m unittest -v refsdk_check
It fails (not skips) when the SDK cannot be imported. What FPS_REFSDK must
hold: tests/interop/README.md."""

import asyncio
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from emulator_harness import EmulatorProcess  # noqa: E402
import refsdk  # noqa: E402

UNAVAILABLE = None
try:
    refsdk.activate()
    from failproofai_sdk.evaluator.authoring import EvalResult, Evaluator, Metric, Score
    from failproofai_sdk.evaluator.runtime import WorkerConfig, WorkerRuntime
except (RuntimeError, ImportError) as error:  # pragma: no cover - depends on the machine
    UNAVAILABLE = f"the reference SDK is not importable: {error}"


def make_evaluator():
    ev = Evaluator(name="emulator-check", version="1.0.0")

    @ev.eval("answer_length", version="1.0.0", result_kind="metric", labels=["local"],
             when=lambda s: s.count("agent_end") > 0)
    def answer_length(session):
        end = session.events_of_type("agent_end")[-1]
        return EvalResult(metrics={"answer_length": Metric(float(len(end.payload.get("summary", ""))))})

    @ev.eval("turns_score", version="2.0.0")
    async def turns_score(session):
        await asyncio.sleep(1.2)  # outlives a heartbeat interval
        return EvalResult(score=Score(1.0 / max(1, session.count("tool_use"))))

    return ev


class ReferenceWorker(unittest.TestCase):
    def setUp(self):
        if UNAVAILABLE:
            self.fail(UNAVAILABLE)

    def run_worker(self, sessions, *flags):
        async def main():
            with EmulatorProcess("--sessions", str(sessions), "--sample-definitions", "--heartbeat-seconds", "1",
                                 "--poll-seconds", "1", *flags) as emu:
                # Concurrency 2: at most 2 runs and 2 conditions at once, within
                # the reference's 4 sandbox slots. A run waiting for a slot spends
                # its own 10 s timeout waiting, so on a loaded machine a higher
                # concurrency times runs out without anything being wrong.
                cfg = WorkerConfig(server_url=emu.base, credential="emulator-token", worker_id="reference",
                                   max_concurrency=2, request_timeout_seconds=10, drain_timeout_seconds=30)
                runtime = WorkerRuntime(make_evaluator(), cfg)
                task = asyncio.create_task(runtime.run_forever())
                deadline = time.monotonic() + 600  # every managed evaluation is a Python start
                while time.monotonic() < deadline and not task.done():
                    st = emu.state()
                    if st["assignments"]["completed"] == sessions and st["runs"]["pending"] == 0:
                        break
                    await asyncio.sleep(0.2)
                runtime.stop()
                await asyncio.wait_for(task, 60)
                return emu.state(), emu.runs(), runtime.metrics()

        return asyncio.run(main())

    def check(self, sessions, state, runs):
        self.assertEqual(state["assignments"]["completed"], sessions, state)
        keys = {}
        for r in runs:
            keys[r["eval_key"]] = keys.get(r["eval_key"], 0) + 1
            self.assertEqual(r["status"], "succeeded", r["result"])
        self.assertEqual(keys, {k: sessions for k in ("tool_efficiency", "tool_error_rate", "task_completed",
                                                       "mean_tool_latency_ms", "answer_length", "turns_score")})
        self.assertEqual(state["commits"], 6 * sessions)
        self.assertEqual(state["conflicts"], 0)

    def test_reference_worker_completes_sessions(self):
        state, runs, metrics = self.run_worker(10, "--lease-seconds", "30")
        self.check(10, state, runs)
        # The emulator's runs are the ground truth; the worker's own count of
        # successes can be short of them (a heartbeat answered while a result
        # is being committed cancels that run's task before it counts it), but
        # it never counts a failure for a run the emulator shows succeeded.
        self.assertGreater(metrics.get("runs_succeeded", 0), 0, metrics)
        self.assertEqual({k: v for k, v in metrics.items() if k in ("runs_failed", "runs_timed_out")}, {},
                         metrics)

    def test_reference_worker_under_faults(self):
        # The reference runs an assignment's conditions only within the
        # claim's lease less a 5 s margin (past it, condition_error or
        # lease_exhausted skips), and each managed condition is a Python
        # start of its own: on a loaded machine a short lease skips runs
        # without any fault being at play.
        state, runs, _ = self.run_worker(20, "--lease-seconds", "30", "--fault-5xx", "0.2",
                                         "--fault-drop", "0.05", "--seed", "9")
        self.check(20, state, runs)


if __name__ == "__main__":
    unittest.main()
