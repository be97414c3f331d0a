#!/usr/bin/env python3
"""Memory benchmark: the process tree's peak memory, counted as the memory
budget counts it (RssAnon + RssFile of every process plus the session
images' memfds once each: tests/integration/tree_memory.py), for 40
sessions of about 22 MB (65,000 realistic events each) against the
emulator, at --concurrency 4 and 32, without a budget and with
--memory-limit-mb 400, and once more each with the recent ring off
(--recent-max-mb 0: its kept image is a fixed cost, not an assignment's).
Prints, per configuration, the tree and parent
peaks, the assignments in flight at most, the bytes per in-flight
assignment ((parent peak - idle parent) / in flight, and as a ratio of the
transcript's bytes: the anchor is 1.2x, the target), and runs/s
beside the unbudgeted concurrency-4 run's.

usage: FPS_BIN=build/failproofai-sidecar python3 tests/bench/worker/bench_memory.py
       [--sessions 40] [--events 65000] [--budget-mb 400] [--concurrency 4,32]
Not run by ctest."""

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import memory_harness  # noqa: E402

MIB = 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--events", type=int, default=65000)
    ap.add_argument("--budget-mb", type=int, default=400)
    ap.add_argument("--concurrency", default="4,32")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="fps-bench-memory-")
    try:
        size = memory_harness.make_sessions(d, args.sessions, events=args.events)
        print(f"{args.sessions} sessions, transcript file {size / MIB:.1f} MiB "
              f"({args.events} events)")
        rows, anchor = [], None
        # (concurrency, budget, ring): the recent ring keeps the last images up
        # to its bound, a fixed cost the per-assignment figure spreads over
        # the assignments in flight; each concurrency runs once more with it off
        plan = [(int(c), b, True) for c in args.concurrency.split(",")
                for b in (None, args.budget_mb)]
        plan += [(int(c), None, False) for c in args.concurrency.split(",")]
        # the next run's emulator parses its sessions while this one runs
        loading = memory_harness.Loading(d)
        for i, (conc, budget, ring) in enumerate(plan):
            emu = loading.ready()
            loading = memory_harness.Loading(d) if i + 1 < len(plan) else None
            r = memory_harness.run_once(d, args.sessions, conc, budget_mb=budget, emu=emu,
                                        extra=() if ring else ("--recent-max-mb", "0"))
            m = r["memory"] or {}
            sent = m.get("transcript_p95_bytes") or size
            idle_parent = (m.get("tree_bytes") or 0)
            inflight = max(1, r["max_active"])
            per = max(0, r["parent_peak"] - (r["base"] or 0)) / inflight
            rps = r["runs"] / r["seconds"] if r["seconds"] else 0
            if anchor is None:
                anchor = rps
            rows.append((conc, budget, ring, r, per, per / sent, rps, idle_parent))
        print(f"{'conc':>4} {'budget':>8} {'ring':>4} {'tree peak':>10} {'parent':>8} {'in flight':>9} "
              f"{'per assignment':>15} {'x bytes':>8} {'runs/s':>7} {'vs c4':>6} waited")
        for conc, budget, ring, r, per, ratio, rps, _ in rows:
            print(f"{conc:>4} {('%d MiB' % budget) if budget else 'none':>8} "
                  f"{'on' if ring else 'off':>4} "
                  f"{r['peak'] / MIB:>6.0f} MiB {r['parent_peak'] / MIB:>4.0f} MiB "
                  f"{r['max_active']:>9} {per / MIB:>11.1f} MiB {ratio:>7.2f}x {rps:>7.1f} "
                  f"{rps / anchor if anchor else 0:>5.2f}x {'yes' if r['waited'] else 'no'}")
            if budget and r["peak"] > budget * MIB:
                print(f"     over the budget by {(r['peak'] - budget * MIB) / MIB:.1f} MiB")
        print("anchor: per assignment <= 1.2x the transcript's bytes (target); the session "
              "image alone is ~0.9x")
        print("per assignment = (parent peak - tree at start) / assignments in flight at most; "
              "'x bytes' divides it by the served transcript's size")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
