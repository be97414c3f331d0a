#!/usr/bin/env python3
"""Benchmark: requests per second the emulator serves on loopback for the
worker's mix (claim, transcript, definitions, plan, result), driven by wrk
with mix.lua. Not a test: prints figures next to the anchor (the
emulator's target of 5,000 req/s on a 2-core machine) as a ratio.

    FPS_BIN=build/failproofai-sidecar python3 tests/bench/emulator/run.py [--duration 10]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
from emulator_harness import EmulatorProcess, catalog_revision  # noqa: E402

TARGET = 5000.0
CATALOG = [{"eval_key": "q", "display_name": "Q", "eval_version": "1", "result_kind": "score", "labels": []}]


def cpu_seconds(pid):
    """utime + stime of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2, help="wrk threads")
    ap.add_argument("--server-threads", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=40000)
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt-get install wrk)")
    with EmulatorProcess("--sessions", str(args.sessions), "--threads", str(args.server_threads)) as emu:
        r = emu.register(CATALOG, worker_id="bench", max_concurrency=32)
        assert r.status == 200, r
        env = dict(os.environ, EMU_WORKER="bench", EMU_TOKEN="emulator-token",
                   EMU_REVISION=catalog_revision(CATALOG))
        cpu0, req0 = cpu_seconds(emu.proc.pid), emu.state()["requests"]
        proc = subprocess.run(["wrk", "-t", str(args.threads), "-c", str(args.connections),
                               "-d", f"{args.duration}s", "--latency", "-s", os.path.join(HERE, "mix.lua"),
                               emu.base], capture_output=True, text=True, env=env, check=True)
        out = proc.stdout
        if proc.stderr:  # EMU_DEBUG=1 makes mix.lua report non-200 answers here
            print(proc.stderr[:2000], file=sys.stderr)
        st = emu.state()
        cpu = cpu_seconds(emu.proc.pid) - cpu0
        served = st["requests"] - req0
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)
    print(out)
    print(json.dumps({"committed_runs": st["runs"]["committed"], "completed": st["assignments"]["completed"],
                      "requests_seen_by_emulator": st["requests"], "conflicts": st["conflicts"]}))
    print(f"emulator mix (claim/transcript/definitions/plan/result), {args.connections} connections, "
          f"{args.server_threads} server threads: {rps:,.0f} req/s (p50 {p50}, p99 {p99}); "
          f"non-2xx: {non2xx.group(1) if non2xx else 0}")
    print(f"emulator CPU: {cpu:.2f} s for {served} requests = {1e6 * cpu / max(1, served):.0f} us/request "
          f"(= {served / cpu if cpu else 0:,.0f} req/s per fully used core)")
    print(f"anchor: target {TARGET:,.0f} req/s  ->  ratio ours/target = {rps / TARGET:.2f}")


if __name__ == "__main__":
    main()
