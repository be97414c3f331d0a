"""The reference Python SDK worker (FailproofAI/failproofai,
sdk/python/failproofai_sdk/evaluator) completes sessions against the emulator,
unchanged: managed definitions (--sample-definitions) plus two local
evaluations, with and without injected faults.

The SDK is not vendored here (its code is not ours to ship), so this check is
not part of the README's test command: run it by hand where the SDK exists,
    cd tests/interop && FPS_BIN=... FPS_REFSDK=/path/to/sdk/python \
        python3 -m unittest -v refsdk_check
It fails (not skips) when the SDK cannot be imported. How to rebuild the SDK
from its public source: tests/interop/README.md."""

import asyncio
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from emulator_harness import EmulatorProcess  # noqa: E402

if os.environ.get("FPS_REFSDK"):
    sys.path.insert(0, os.environ["FPS_REFSDK"])
try:
    from failproofai_sdk.evaluator.authoring import EvalResult, Evaluator, Metric, Score
    from failproofai_sdk.evaluator.runtime import WorkerConfig, WorkerRuntime
except ImportError:  # pragma: no cover - depends on the machine
    Evaluator = None


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
        self.assertIsNotNone(Evaluator, "the reference SDK is not importable: set FPS_REFSDK")

    def run_worker(self, sessions, *flags):
        async def main():
            with EmulatorProcess("--sessions", str(sessions), "--sample-definitions", "--heartbeat-seconds", "1",
                                 "--poll-seconds", "1", *flags) as emu:
                cfg = WorkerConfig(server_url=emu.base, credential="emulator-token", worker_id="reference",
                                   max_concurrency=4, request_timeout_seconds=10, drain_timeout_seconds=10)
                runtime = WorkerRuntime(make_evaluator(), cfg)
                task = asyncio.create_task(runtime.run_forever())
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not task.done():
                    st = emu.state()
                    if st["assignments"]["completed"] == sessions and st["runs"]["pending"] == 0:
                        break
                    await asyncio.sleep(0.2)
                runtime.stop()
                await asyncio.wait_for(task, 30)
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
        self.assertEqual(metrics.get("runs_succeeded"), 60)

    def test_reference_worker_under_faults(self):
        state, runs, _ = self.run_worker(20, "--lease-seconds", "4", "--fault-5xx", "0.2",
                                         "--fault-drop", "0.05", "--seed", "9")
        self.check(20, state, runs)


if __name__ == "__main__":
    unittest.main()
