#!/usr/bin/python3
"""Transcript ingest through the CLI vs CPython's json.loads, in one run.

Ours: `failproofai-sidecar eval --transcript T --kind raw --expr 1` on the
20,000-event (~7 MB) transcript of tests/bench/lang/gen_transcript.py minus
the same command on the 52-event conformance transcript: what is left is
reading the bytes, building the session image from them (one pass, no JSON
tree) and handing it to the jailed child. CPython: json.loads of the same
text, and json.loads plus the session model of tests/conformance/oracle.py
(what a Python evaluator needs before its first expression). Best of R runs
each; prints both ratios (target: ours <= 0.5 x json.loads).

  bench_ingest.py [--bin build/failproofai-sidecar] [--runs 7] [--transcript PATH]

Not a test: figures only.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench", "lang"))
import gen_transcript  # noqa: E402
import oracle  # noqa: E402

SMALL = os.path.join(ROOT, "tests", "conformance", "transcript.json")


def cli_seconds(binary, transcript):
    t0 = time.perf_counter()
    proc = subprocess.run([binary, "eval", "--transcript", transcript, "--kind", "raw", "--expr", "1"],
                          capture_output=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"eval on {transcript} exited {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace')[-300:]}")
    return dt


def best(fn, runs):
    return min(fn() for _ in range(runs))


def main():
    ap = argparse.ArgumentParser(description="transcript ingest: ours (CLI) vs CPython json.loads")
    ap.add_argument("--bin", default=os.environ.get("FPS_BIN", os.path.join(ROOT, "build", "failproofai-sidecar")))
    ap.add_argument("--transcript", default=gen_transcript.DEFAULT_OUT)
    ap.add_argument("--runs", type=int, default=7, help="best of this many runs")
    a = ap.parse_args()
    if not os.path.exists(a.transcript):
        gen_transcript.write(a.transcript)
    with open(a.transcript, encoding="utf-8") as fh:
        text = fh.read()
    print(f"transcript: {a.transcript} ({len(text.encode()) / 1e6:.2f} MB), binary: {a.bin}, best of {a.runs}")

    loads = best(lambda: _timed(lambda: json.loads(text)), a.runs)
    model = best(lambda: _timed(lambda: oracle.session_from_wire(json.loads(text))), a.runs)
    # interleaved, so both CLI figures see the same load
    big = small = math.inf
    for _ in range(a.runs):
        big = min(big, cli_seconds(a.bin, a.transcript))
        small = min(small, cli_seconds(a.bin, SMALL))
    ours = max(big - small, 1e-9)

    print(f"CPython json.loads                 {loads * 1e3:8.2f} ms")
    print(f"CPython json.loads + session model {model * 1e3:8.2f} ms")
    print(f"ours: eval on it {big * 1e3:.2f} ms - on the 52-event one {small * 1e3:.2f} ms = {ours * 1e3:8.2f} ms")
    print(f"ratio ours / json.loads            {ours / loads:8.3f}   (target <= 0.5)")
    print(f"ratio ours / json.loads + model    {ours / model:8.3f}")
    return 0


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
