#!/usr/bin/python3
"""Transcript ingest through the CLI vs CPython's json.loads, in one run.

Ours: `failproofai-sidecar eval --transcript T --kind raw --expr 1` on the
20,000-event (~7 MB) transcript of tests/bench/lang/gen_transcript.py minus
the same command on the 52-event conformance transcript: what is left is
reading the bytes, building the session image from them (one pass, no JSON
tree) and handing it to the jailed child. CPython: json.loads of the same
text, and json.loads plus the session model of tests/conformance/oracle.py
(what a Python evaluator needs before its first expression). Best of R runs
each.

Headline figures are CPU time: on a shared machine wall time is mostly
waiting for a core. Ours is the user+sys rusage of the CLI and every child
it reaped (os.wait4), CPython's is time.process_time around the call. Wall
ratios are printed too (target: ours <= 0.5 x json.loads by CPU).

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
    """(cpu, wall) of one eval: user+sys of the CLI and the children it reaped."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([binary, "eval", "--transcript", transcript, "--kind", "raw", "--expr", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"eval on {transcript} exited {proc.returncode}: "
                           f"{err.decode(errors='replace')[-300:]}")
    return ru.ru_utime + ru.ru_stime, wall


def best(fn, runs):
    """(cpu, wall), each the least over runs."""
    cpu = wall = math.inf
    for _ in range(runs):
        c, w = fn()
        cpu, wall = min(cpu, c), min(wall, w)
    return cpu, wall


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
    big = small = (math.inf, math.inf)
    for _ in range(a.runs):
        big = tuple(map(min, big, cli_seconds(a.bin, a.transcript)))
        small = tuple(map(min, small, cli_seconds(a.bin, SMALL)))
    ours = tuple(max(b - s, 1e-9) for b, s in zip(big, small))

    print(f"{'':40s} {'CPU':>9s} {'wall':>9s}")
    print(f"{'CPython json.loads':40s} {loads[0] * 1e3:6.2f} ms {loads[1] * 1e3:6.2f} ms")
    print(f"{'CPython json.loads + session model':40s} {model[0] * 1e3:6.2f} ms {model[1] * 1e3:6.2f} ms")
    print(f"{'ours: eval on it':40s} {big[0] * 1e3:6.2f} ms {big[1] * 1e3:6.2f} ms")
    print(f"{'ours: eval on the 52-event one':40s} {small[0] * 1e3:6.2f} ms {small[1] * 1e3:6.2f} ms")
    print(f"{'ours: difference (ingest)':40s} {ours[0] * 1e3:6.2f} ms {ours[1] * 1e3:6.2f} ms")
    print(f"{'ratio ours / json.loads':40s} {ours[0] / loads[0]:9.3f} {ours[1] / loads[1]:9.3f}   (target <= 0.5, by CPU)")
    print(f"{'ratio ours / json.loads + model':40s} {ours[0] / model[0]:9.3f} {ours[1] / model[1]:9.3f}")
    return 0


def _timed(fn):
    """(cpu, wall) of one call in this process."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
