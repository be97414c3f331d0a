#!/usr/bin/python3
"""Benchmark of the language at scale (not a test; prints figures and ratios).

Covers the scale corpus (tests/conformance/scale-corpus.jsonl: the cases
CPython completes) and the 25 MiB word-count evaluators. For each case, side
by side in one run:
  time   CPU seconds (user + system: robust on a shared machine, where wall
         time is mostly waiting for a core). Ours: one `failproofai-sidecar
         eval --expr` through the CLI and the jail (the CLI, the zygote and
         the sandbox child), less the same run of the trivial expression
         `1`; CPython: the same source evaluated in a fresh python3 (the
         session built first, as the reference's runner does). The text
         cases are end to end on both sides: ours the whole CLI run with the
         25 MiB transcript's ingest, CPython its json.loads and session model
         plus the evaluation.
  peak   ours: the sandbox child's peak RSS (the CLI reaps it, so it is the
         largest maxrss among the CLI's children); CPython: the process's
         peak RSS less its idle baseline (after the session is built).
Geometric means of ours/CPython at the end.

  bench_scale.py [--bin build/failproofai-sidecar] [--runs 1] [--filter TEXT]
  bench_scale.py --steps   the evaluator's steps per second (in-process,
                           lang_eval under a step cap; the figure behind
                           VLIMIT_STEPS in sandbox/lang/value.h)
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CONF = os.path.join(ROOT, "tests", "conformance")
sys.path.insert(0, CONF)
import gen_scale  # noqa: E402

PY_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import oracle
case = json.loads(sys.stdin.read())
t0 = time.process_time()
session = None
if case["transcript"]:
    with open(case["transcript"], encoding="utf-8") as fh:
        session = oracle.session_from_wire(json.load(fh))
t_ingest = time.process_time() - t0
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
t0 = time.process_time()
out = oracle.outcome(case["kind"], case["source"], "q", session)
t_eval = time.process_time() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"ingest": t_ingest, "eval": t_eval, "peak_kb": max(peak - base, 0), "ok": out.get("ok")}))
"""

OURS_CHILD = r"""
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, r.ru_maxrss, p.returncode)
"""

STEPS_C = r"""
#include "sandbox/lang/lang.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv)
{
    unsigned long long cap = strtoull(argv[1], 0, 10);
    for (int i = 2; i < argc; i++) {
        lang_limits lim = {cap, 0};
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        char *out = lang_eval(LANG_RAW, argv[i], strlen(argv[i]), "q", NULL, 0, &lim);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double t = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
        printf("%-52s %-10s %8.3f s %8.1f M steps/s\n", argv[i], strstr(out, "steps") ? "steps" : "DONE?",
               t, cap / t / 1e6);
        free(out);
    }
    return 0;
}
"""
# Loops that end by the step cap, never by memory (dict comprehensions with
# few keys keep the live data constant).
STEP_LOOPS = ["sum(range(10**12))", "max(range(10**12))", "len({i % 1000: i for i in range(10**12)})",
              "len({0: x * 2 + 1 for x in range(10**12) if x % 3})",
              "len({0: str(i) for i in range(10**12)})",
              "len({0: 'ab cd'.upper() for i in range(10**12)})"]


def steps(a):
    build = os.path.dirname(os.path.abspath(a.bin))
    tmp = tempfile.mkdtemp(prefix="fps-steps-")
    src, exe = os.path.join(tmp, "steps.c"), os.path.join(tmp, "steps")
    with open(src, "w") as fh:
        fh.write(STEPS_C)
    subprocess.run(["cc", "-O2", "-std=gnu17", "-I", ROOT, src,
                    os.path.join(build, "sandbox", "lang", "libfps_lang.a"),
                    os.path.join(build, "common", "libfps_common.a"),
                    "-lgc", "-lgmp", "-lutf8proc", "-lm", "-lpthread", "-o", exe], check=True)
    print("steps per second (in-process, release build; each loop stopped by a 200M-step cap):")
    subprocess.run([exe, "200000000"] + STEP_LOOPS, check=True)


def ours(a, case, transcript):
    cmd = [a.bin, "eval", "--kind", case["kind"], "--timeout", str(case["timeout"]), "--expr", case["source"]]
    if transcript:
        cmd += ["--transcript", transcript]
    out = subprocess.run([sys.executable, "-c", OURS_CHILD] + cmd, capture_output=True, text=True, check=True)
    dt, rss, _ = out.stdout.split()
    return float(dt), int(rss)


def cpython(case, transcript):
    job = {"kind": case["kind"], "source": case["source"], "transcript": transcript}
    out = subprocess.run([sys.executable, "-c", PY_CHILD, CONF], input=json.dumps(job), capture_output=True,
                         text=True, timeout=600)
    return json.loads(out.stdout)


def gmean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description="the language at scale: ours vs CPython")
    ap.add_argument("--bin", default=os.environ.get("FPS_BIN", os.path.join(ROOT, "build", "failproofai-sidecar")))
    ap.add_argument("--runs", type=int, default=1, help="best of this many runs per side")
    ap.add_argument("--filter", default="", help="only cases whose source contains this")
    ap.add_argument("--steps", action="store_true", help="print the evaluator's steps per second and stop")
    a = ap.parse_args()
    if a.steps:
        steps(a)
        return
    with open(os.path.join(CONF, "scale-corpus.jsonl"), encoding="utf-8") as fh:
        cases = [json.loads(x) for x in fh if x.strip()]
    with open(os.path.join(CONF, "scale-expected.jsonl"), encoding="utf-8") as fh:
        expected = [json.loads(x) for x in fh if x.strip()]
    picked = [c for c, e in zip(cases, expected) if e.get("ok") and a.filter in c["source"]]
    tmp = tempfile.mkdtemp(prefix="fps-bench-scale-")
    text = os.path.join(tmp, "text.json")
    gen_scale.text_transcript(text)
    print(f"{len(picked)} completed cases; binary {a.bin}; text transcript {os.path.getsize(text) / 2**20:.1f} MiB")
    print(f"{'case':60} {'ours cpu':>8} {'CPy cpu':>8} {'t ratio':>8} {'ours MiB':>9} {'CPy MiB':>8} {'m ratio':>8}")
    base = min(ours(a, {"kind": "raw", "source": "1", "timeout": 30}, None)[0] for _ in range(5))
    print(f"CPU of the CLI + jail start, subtracted from the non-text cases: {base * 1e3:.1f} ms")
    t_ratios, m_ratios, text_ratios = [], [], []
    for c in picked:
        tr = text if c["session"] == "text" else None
        t_o = m_o = math.inf
        t_p = m_p = math.inf
        for _ in range(a.runs):
            dt, rss = ours(a, c, tr)
            t_o, m_o = min(t_o, dt if tr else max(dt - base, 1e-4)), min(m_o, rss)
            py = cpython(c, tr)
            t_p = min(t_p, py["eval"] + (py["ingest"] if tr else 0))
            m_p = min(m_p, py["peak_kb"])
        tr_ratio = t_o / t_p if t_p > 0 else float("nan")
        mr = m_o / m_p if m_p > 1024 else float("nan")  # CPython peaks under 1 MiB: no meaningful ratio
        t_ratios.append(tr_ratio)
        if not math.isnan(mr):
            m_ratios.append(mr)
        if tr:
            text_ratios.append(tr_ratio)
        print(f"{c['source'][:60]:60} {t_o:8.3f} {t_p:8.3f} {tr_ratio:8.2f} {m_o / 1024:9.1f} {m_p / 1024:8.1f} "
              f"{mr:8.2f}")
    print(f"\ngeometric mean time ours/CPython: {gmean(t_ratios):.3f} over {len(t_ratios)} cases "
          f"(target <= 1.0, stretch 0.5)")
    print(f"geometric mean peak memory ours/CPython: {gmean(m_ratios):.3f} over {len(m_ratios)} cases with a "
          f"CPython peak above 1 MiB (target <= 1.0)")
    if text_ratios:
        print(f"25 MiB text evaluators, end to end with ingest, ours/CPython: geometric mean {gmean(text_ratios):.3f}, "
              f"worst {max(text_ratios):.3f} (target <= 1.0)")


if __name__ == "__main__":
    main()
