#!/usr/bin/env python3
"""Worker throughput under server faults: the same workload (sessions x 3
managed definitions, concurrency 4) against a fresh emulator per scenario,
all in one run: no faults, 20 % 5xx, and the full mix (20 % 5xx, 5 % dropped
connections after the commit, 20 ms latency, 2 % lease loss). For each it
prints runs/s, p50/p99 assignment latency (claim -> results submitted, from
the sidecar's log) and requests per run (counted at the emulator), and the
ratios to the fault-free row of the same run (targets: runs/s >= 0.5 of it
under 20 % 5xx; requests per run <= 1.35 x). With FPS_REFSDK pointing at the
reference Python SDK (as tests/interop/ uses it), the reference worker runs
the same scenarios and its columns are printed beside ours.

usage: FPS_BIN=build/failproofai-sidecar python3 tests/bench/worker/bench_faults.py
       [--sessions 150] [--concurrency 4] [--timeout 120]
Not run by ctest."""

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "interop"))
from emulator_harness import EmulatorProcess, wait_for  # noqa: E402
from bench_worker import DEFS, latencies, pct, stop  # noqa: E402
import refsdk  # noqa: E402

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")
COMMON = ["--lease-seconds", "15", "--heartbeat-seconds", "5", "--max-attempts", "50"]
SCENARIOS = [
    ("no faults", []),
    ("20% 5xx", ["--fault-5xx", "0.2"]),
    ("full mix", ["--fault-5xx", "0.2", "--fault-drop", "0.05", "--fault-latency-ms", "20",
                  "--fault-lease-loss", "0.02"]),
]


def finished(emu, sessions):
    st = emu.state()
    a = st["assignments"]
    return a["completed"] + a["skipped"] + a["dead"] >= sessions and st["runs"]["pending"] == 0


def run_sidecar(sessions, concurrency, flags, timeout, d):
    defs = os.path.join(d, "defs.json")
    emu = EmulatorProcess("--definitions", defs, "--threads", "2", "--sessions", str(sessions),
                          "--seed", "7", *COMMON, *flags)
    emu.start()
    log_path = os.path.join(d, "sidecar-%d.log" % time.monotonic_ns())
    env = dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN="emulator-token")
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        sc = subprocess.Popen([BIN, "run", "--server", emu.base, "--listen", "127.0.0.1:0",
                               "--db", os.path.join(d, "bench-%d.db" % time.monotonic_ns()),
                               "--concurrency", str(concurrency), "--log-level", "info"],
                              stderr=log, stdout=subprocess.DEVNULL, env=env)
        try:
            ok = wait_for(lambda: finished(emu, sessions), timeout, 0.02)
            wall = time.monotonic() - t0
            st = emu.state()
        finally:
            stop(sc)
            emu.stop()
    lat, _ = latencies(log_path)
    return row(ok, wall, st, lat)


def row(ok, wall, st, lat):
    runs = st["runs"]["committed"]
    return {"ok": ok, "runs": runs, "rps": runs / wall if wall > 0 else 0,
            "p50": pct(lat, 50) if lat else float("nan"), "p99": pct(lat, 99) if lat else float("nan"),
            "req_per_run": st["requests"] / max(1, runs), "conflicts": st["conflicts"]}


def run_reference(sessions, concurrency, flags, timeout, d):
    """The reference SDK worker on the same scenario (FPS_REFSDK)."""
    refsdk.activate()
    from failproofai_sdk.evaluator.authoring import Evaluator
    from failproofai_sdk.evaluator.runtime import WorkerConfig, WorkerRuntime

    async def main():
        defs = os.path.join(d, "defs.json")
        with EmulatorProcess("--definitions", defs, "--threads", "2", "--sessions", str(sessions),
                             "--seed", "7", *COMMON, *flags) as emu:
            cfg = WorkerConfig(server_url=emu.base, credential="emulator-token", worker_id="reference",
                               max_concurrency=concurrency, request_timeout_seconds=10,
                               drain_timeout_seconds=10)
            runtime = WorkerRuntime(Evaluator(name="bench", version="1.0.0"), cfg)
            t0 = time.monotonic()
            task = asyncio.create_task(runtime.run_forever())
            ok = False
            while time.monotonic() - t0 < timeout and not task.done():
                if finished(emu, sessions):
                    ok = True
                    break
                await asyncio.sleep(0.05)
            wall = time.monotonic() - t0
            st = emu.state()
            runtime.stop()
            await asyncio.wait_for(task, 30)
            return row(ok, wall, st, [])

    return asyncio.run(main())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=150)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="fps-bench-faults-")
    with open(os.path.join(d, "defs.json"), "w") as f:
        json.dump(DEFS, f)
    ref = bool(refsdk.root())
    rows = []
    for name, flags in SCENARIOS:
        ours = run_sidecar(a.sessions, a.concurrency, flags, a.timeout, d)
        theirs = run_reference(a.sessions, a.concurrency, flags, a.timeout, d) if ref else None
        rows.append((name, ours, theirs))
    base = rows[0][1]
    print(f"worker under faults: {a.sessions} sessions x {len(DEFS)} managed definitions, "
          f"concurrency {a.concurrency}, emulator {' '.join(COMMON)}")
    print(f"  {'scenario':10s} {'runs/s':>8s} {'x free':>7s} {'p50 ms':>8s} {'p99 ms':>8s}"
          f" {'req/run':>8s} {'x free':>7s} {'conflicts':>9s}" + ("   reference: runs/s  req/run" if ref else ""))
    for name, o, r in rows:
        line = (f"  {name:10s} {o['rps']:8.1f} {o['rps'] / max(base['rps'], 1e-9):7.2f} {o['p50']:8.1f}"
                f" {o['p99']:8.1f} {o['req_per_run']:8.2f} {o['req_per_run'] / max(base['req_per_run'], 1e-9):7.2f}"
                f" {o['conflicts']:9d}" + ("" if o["ok"] else "  INCOMPLETE"))
        if r is not None:
            line += (f"   {r['rps']:8.1f} ({o['rps'] / max(r['rps'], 1e-9):.1f}x)  {r['req_per_run']:6.2f}"
                     + ("" if r["ok"] else " INCOMPLETE"))
        print(line)
    print("  targets: 20% 5xx runs/s >= 0.50 x free; req/run <= 1.35 x free")
    load = os.getloadavg()
    print("  load average          %.2f %.2f %.2f   (2 cores shared: absolute figures are distorted"
          " by the load; the ratios less)" % load)
    print("  measured", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


if __name__ == "__main__":
    main()
