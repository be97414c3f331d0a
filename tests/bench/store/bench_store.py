#!/usr/bin/env python3
"""Store benchmark: what persistence costs the worker.

1. End to end, in one run: the worker benchmark (emulator with 300 sessions x
   3 managed definitions, concurrency 4) with the store on a file vs on
   ":memory:", interleaved (file, memory, file, memory, ...) so both see the
   same machine load. Throughput is measured from the emulator's commit
   timestamps (first to last commit), CPU from /proc (sidecar + children).
   Prints runs/s of each, the ratio file/memory and the cost
   (target: persistence costs <= 15 % of throughput).
2. The store alone (tests/bench/store/store_bench.c, compiled here against
   build/store and build/common): the worker's per-assignment store traffic
   (claim, plan, start, 3 durable results + commit records) from 4 threads on
   a file vs ":memory:", and the admin listing (GET /v1/runs?limit=100 pages,
   filters, deep cursors) with 100,000 runs in the store while a writer keeps
   the worker's traffic going: p50/p99 latency and queries/s
   (anchor: the admin API target p99 <= 20 ms at >= 2,000 req/s).

usage: python3 tests/bench/store/bench_store.py [--bin build/failproofai-sidecar]
       [--build build] [--sessions 300] [--rounds 2] [--admin-runs 100000] [--skip-e2e]
       [--skip-micro]
Not run by ctest."""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from emulator_harness import TOKEN, EmulatorProcess, definition, stop_process, wait_for  # noqa: E402

DEFS = [
    definition("tool_calls", "Tool calls", "metric",
               "EvalResult(metrics={'tool_calls': Metric(session.count('tool_use'))})"),
    definition("has_errors", "Tool errors", "score",
               "EvalResult(score=Score(1.0 - len([e for e in session.events if e.event_type == 'tool_result' "
               "and e.payload.get('status') == 'error']) / max(1, session.count('tool_result'))))"),
    definition("ended", "Ended", "assertion",
               "EvalResult(assertions={'ended': Assertion(session.count('agent_end') == 1)})"),
]


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15])
    except OSError:
        return 0


def epoch(ts):
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def e2e_once(bin_path, mode, sessions, workdir):

    defs = os.path.join(workdir, "defs.json")
    with open(defs, "w") as f:
        json.dump(DEFS, f)
    db = ":memory:" if mode == "memory" else os.path.join(workdir, f"bench-{time.time_ns()}.db")
    emu = EmulatorProcess("--definitions", defs, "--sessions", str(sessions),
                          "--poll-seconds", "1")
    emu.start()
    env = dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN=TOKEN)
    log = open(os.path.join(workdir, f"sidecar-{mode}.log"), "w")
    proc = subprocess.Popen([bin_path, "run", "--server", emu.base, "--listen", "127.0.0.1:0",
                             "--db", db, "--worker-id", "bench", "--concurrency", "4",
                             "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        def done():
            a = emu.state()["assignments"]
            return a["completed"] + a["skipped"] + a["dead"] >= sessions
        ok = wait_for(done, 600, 0.2)
        ticks = cpu_ticks(proc.pid)
        runs = emu.runs()
        st = emu.state()
    finally:
        stop_process(proc)
        log.close()
        emu.stop()
        if mode == "file":
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(db + suffix):
                    os.unlink(db + suffix)
    if not ok or len(runs) < 2:
        return None
    times = sorted(epoch(r["committed_at"]) for r in runs)
    span = times[-1] - times[0]
    return {"mode": mode, "runs": len(runs), "span_s": span,
            "runs_per_s": (len(runs) - 1) / span if span > 0 else float("inf"),
            "cpu_ms_per_run": ticks * 1000.0 / os.sysconf("SC_CLK_TCK") / len(runs),
            "conflicts": st["conflicts"]}


def build_micro(build_dir, out):
    src = os.path.join(HERE, "store_bench.c")
    libs = [os.path.join(build_dir, "store", "libfps_store.a"),
            os.path.join(build_dir, "common", "libfps_common.a")]
    cmd = ["cc", "-O2", "-std=gnu17", "-I", ROOT, src, *libs, "-lsqlite3", "-lcrypto", "-lm",
           "-lpthread", "-o", out]
    subprocess.run(cmd, check=True)


def micro(exe, args):
    out = subprocess.run([exe, *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("FPS_BIN", os.path.join(ROOT, "build",
                                                                         "failproofai-sidecar")))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--admin-runs", type=int, default=100000)
    ap.add_argument("--skip-e2e", action="store_true")
    ap.add_argument("--skip-micro", action="store_true")
    a = ap.parse_args()
    os.environ["FPS_BIN"] = a.bin
    work = tempfile.mkdtemp(prefix="fps-bench-store-")
    try:
        if not a.skip_e2e:
            print(f"== worker end to end: {a.sessions} sessions x {len(DEFS)} managed "
                  f"definitions, concurrency 4, {a.rounds} interleaved rounds")
            res = {"file": [], "memory": []}
            for i in range(a.rounds):
                for mode in ("file", "memory"):
                    r = e2e_once(a.bin, mode, a.sessions, work)
                    if r is None:
                        print(f"  {mode}: did not finish")
                        continue
                    res[mode].append(r)
                    print(f"  round {i + 1} {mode:6s}: {r['runs']} runs in {r['span_s']:.2f} s ="
                          f" {r['runs_per_s']:.0f} runs/s, {r['cpu_ms_per_run']:.2f} CPU ms/run,"
                          f" conflicts {r['conflicts']}")
            if res["file"] and res["memory"]:
                best = {m: max(x["runs_per_s"] for x in res[m]) for m in res}
                cpu = {m: min(x["cpu_ms_per_run"] for x in res[m]) for m in res}
                ratio = best["file"] / best["memory"]
                print(f"  best: file {best['file']:.0f} runs/s vs :memory: {best['memory']:.0f}"
                      f" runs/s -> ratio {ratio:.3f}, persistence costs {100 * (1 - ratio):.1f} %"
                      f" of throughput (target <= 15 %)")
                print(f"  CPU per run: file {cpu['file']:.2f} ms vs :memory: {cpu['memory']:.2f}"
                      f" ms (x{cpu['file'] / cpu['memory']:.2f})")
        if not a.skip_micro:
            exe = os.path.join(work, "store_bench")
            build_micro(a.build, exe)
            print("== store alone: the worker's store traffic, 4 threads, 1,200 assignments")
            f = micro(exe, ["worker", os.path.join(work, "w.db"), "4", "1200"])
            m = micro(exe, ["worker", ":memory:", "4", "1200"])
            print(f"  file (durable results, group commit): {f['runs_per_s']:.0f} runs/s;"
                  f" :memory: {m['runs_per_s']:.0f} runs/s; ratio {f['runs_per_s'] / m['runs_per_s']:.3f}"
                  f" (the worker target is 500 runs/s end to end: file store headroom"
                  f" x{f['runs_per_s'] / 500:.1f})")
            print(f"== admin listing with {a.admin_runs} runs in the store, 2 reader threads +"
                  f" 1 writer (filling first; takes a while)")
            env = dict(os.environ, FPS_BENCH_NOSYNC="1")
            out = subprocess.run([exe, "admin", os.path.join(work, "a.db"), str(a.admin_runs), "5"],
                                 capture_output=True, text=True, check=True, env=env).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f"  {r['queries']} list queries in 5 s: {r['queries_per_s']:.0f}/s,"
                  f" p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms (anchor p99 <= 20 ms,"
                  f" ratio {r['p99_ms'] / 20:.2f}); writer meanwhile {r['writer_runs_per_s']:.0f}"
                  f" runs/s; failures {r['failures']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
