#!/usr/bin/env python3
"""A local evaluator that fails some of its runs, to see failures on the admin page
(run it beside `failproofai-sidecar demo`). Standard library only; the protocol side
(registration, heartbeats within its TTL with its registration's own secret, the run
signature check) is tests/example_evaluator.py's serve(). About one run in four (by
run id) gets an HTTP 500, one in eight a Score above 1 (rejected by the sidecar's
validation as an eval_error), the rest a score.
Usage: flaky_evaluator.py [SIDECAR_URL] [PORT]"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import example_evaluator  # noqa: E402


def judge(run):
    roll = hashlib.sha256(run["evaluation_run_id"].encode()).digest()[0]
    if roll < 64:  # one in four: the evaluator itself breaks
        return 500, "judge backend unavailable"
    events = run["transcript"]["events"]
    score = 1.5 if roll < 96 else min(1.0, len(events) / 20)  # one in eight: out of range
    return {"score": score, "reasoning": f"{len(events)} events"}


if __name__ == "__main__":
    example_evaluator.serve(os.environ.get("EVALUATOR_NAME", "flaky-judge"),
                            [{"eval_key": "judge_quality", "eval_version": "1", "labels": ["demo"]}],
                            judge, "flaky evaluator")
