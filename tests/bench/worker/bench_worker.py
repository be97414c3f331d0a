#!/usr/bin/env python3
"""Worker benchmark: end to end through the emulator, 300 sessions
x 3 managed definitions, concurrency 4. Prints runs/s, CPU ms per run
(sidecar + its sandbox children, the zygote included), p50/p99 assignment
latency (claim -> runs finished and submitted, from the sidecar's log), idle
RSS and idle CPU,
side by side with the anchors (reference Python worker ~15 runs/s; targets
>= 500 runs/s, CPU <= 0.8 ms per run, idle RSS <= 16 MiB, idle CPU ~ 0), and
the ceiling the jail sets on this machine (tests/bench/jail/run.sh capacity:
its batched assignments per second, an assignment's managed evaluations
sharing one session, x 3 runs per assignment, with no sidecar work at all;
target >= 0.8 of it).

With FPS_REFSDK pointing at the reference Python SDK's sdk/python
(tests/interop/README.md), the reference worker (its WorkerRuntime, managed
definitions through its source.py sandbox) then runs in the same invocation
against a fresh emulator with the same flags, definitions and concurrency, on
the same generated sessions (or the first --ref-sessions), and its runs/s and
CPU per run are printed beside ours, with the ratio (target >= 200x).

usage: FPS_BIN=build/failproofai-sidecar [FPS_REFSDK=/path/to/sdk/python]
       /usr/bin/python3 tests/bench/worker/bench_worker.py
       [--sessions 300] [--concurrency 4] [--db file|memory] [--no-idle] [--no-ceiling]
       [--ref-sessions N]
Not run by ctest."""

import argparse
import asyncio
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "interop"))
from emulator_harness import EmulatorProcess, definition, wait_for  # noqa: E402
import refsdk  # noqa: E402

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")
CLK = os.sysconf("SC_CLK_TCK")
DEFS = [
    definition("tool_calls", "Tool calls", "metric",
               "EvalResult(metrics={'tool_calls': Metric(session.count('tool_use'))})"),
    definition("tool_success", "Tool success", "score",
               "EvalResult(score=Score(1.0 - len([e for e in session.events_of_type('tool_result') "
               "if e.payload.get('status') == 'error']) / max(1, session.count('tool_result'))))",
               condition_source="session.count('tool_result') > 0"),
    definition("ended", "Ended", "assertion",
               "EvalResult(assertions={'ended': Assertion(session.count('agent_end') == 1)})"),
]


def stat_fields(pid):
    """/proc/PID/stat after the command name: index 1 is the ppid, 11..14 are
    utime stime cutime cstime (fields 4 and 14-17, 1-based)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_split(pid):
    """(own utime+stime, reaped children's cutime+cstime) in clock ticks."""
    fields = stat_fields(pid)
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def cpu_ticks(pid):
    return sum(cpu_split(pid))


def live_children_ticks(pid):
    """CPU of pid's children that are still alive (the sandbox zygote, which
    forks every child, and pre-started children): not yet in pid's cutime."""
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fields = stat_fields(d)
        except OSError:
            continue
        if int(fields[1]) == pid:  # ppid
            total += sum(int(x) for x in fields[11:15])
    return total


def tree_ticks(pid):
    """All CPU of pid so far: its own, its reaped and its live children's."""
    return cpu_ticks(pid) + live_children_ticks(pid)


def rss_kib(pid, key="VmRSS:"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def smaps_top(pid, n=25):
    """Prints the idle process's mappings with the most resident memory."""
    maps, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":"):
                cur = [0, 0, parts[5] if len(parts) > 5 else "[anon]"]
                maps.append(cur)
            elif parts[0] == "Rss:":
                cur[0] = int(parts[1])
            elif parts[0] == "Anonymous:":
                cur[1] = int(parts[1])
    agg = {}
    for rss, anon, name in maps:
        a = agg.setdefault(name, [0, 0])
        a[0] += rss
        a[1] += anon
    for name, (rss, anon) in sorted(agg.items(), key=lambda kv: -kv[1][0])[:n]:
        print(f"    {rss:6d} KiB rss  {anon:6d} KiB anon  {name}")


def ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def stop(proc):
    """SIGTERM (the sidecar drains), SIGKILL after 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def latencies(log_path):
    """From the sidecar's log: the assignment latencies in ms (claim ->
    runs finished and submitted, or skipped) and the per-step timings
    ({step: [ms, ...]}, logged at debug level)."""
    claimed, finished, steps = {}, {}, {}
    with open(log_path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("msg") == "assignment claimed":
                claimed[e["assignment_id"]] = ts(e["ts"])
            elif e.get("msg") in ("assignment runs finished", "assignment skipped"):
                finished[e["assignment_id"]] = ts(e["ts"])
            elif e.get("msg") == "assignment timing":
                for k, v in e.items():
                    if k.endswith("_ms"):
                        steps.setdefault(k[:-3], []).append(v)
    return [1000 * (finished[k] - claimed[k]) for k in finished if k in claimed], steps


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


def print_ceiling(rps, evals, runs):
    """The most runs/s the jail alone allows on this machine, measured by
    tests/bench/jail/run.sh capacity with a trivial evaluator and nothing
    else running (no HTTP, no SQLite, no sidecar): its batched assignments
    per second (`batched_assignments_per_s`: sessions of 3 evaluations, one
    evaluator each, as an assignment's managed definitions share one) x `runs`
    runs per assignment. A run.sh without that line falls back to its
    unbatched capacity (every evaluation its own process: evaluations/s x
    runs / evals), said so on the line."""
    build = os.path.dirname(os.path.abspath(BIN)) if os.sep in BIN else None
    if build is None or not os.path.isdir(os.path.join(build, "sandbox")):
        print("  ceiling               not measured (FPS_BIN is not in a build directory)")
        return
    run_sh = os.path.join(HERE, "..", "jail", "run.sh")
    out = subprocess.run(["bash", run_sh, build, "capacity"], capture_output=True, text=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("capacity-json: ")]
    if out.returncode != 0 or not line:
        print("  ceiling               not measured:", (out.stderr or out.stdout).strip()[-300:])
        return
    cap = json.loads(line[0].split(": ", 1)[1])
    batched = [ln.split()[1] for ln in out.stdout.splitlines()
               if ln.startswith("batched_assignments_per_s ") and len(ln.split()) == 2]
    if batched:
        bps = float(batched[0])
        ceil = bps * runs
        print(f"  ceiling               {ceil:9.1f} runs/s = bench_jail batched_assignments_per_s"
              f" {bps:.1f} x {runs} runs per assignment (sessions of 3, trivial evaluator, no sidecar)")
    else:
        ceil = cap["evals_per_s"] * runs / evals
        print(f"  ceiling               {ceil:9.1f} runs/s = FALLBACK (run.sh printed no"
              f" batched_assignments_per_s): unbatched jail capacity {cap['evals_per_s']:.1f}"
              f" evaluations/s x {runs}/{evals} runs per evaluation")
    print(f"                        unbatched: {cap['evals_per_s'] * runs / evals:.1f} runs/s"
          f" ({cap['evals_per_s']:.1f} jailed evaluations/s, a child each);"
          f" {cap['echo_per_s'] * runs / evals:.1f} runs/s with no interpreter at all;"
          f" posix_spawn of /bin/true {cap['spawn_per_s']:.1f}/s")
    print(f"                        measured {rps:.1f} runs/s -> {rps / ceil:.2f} of the ceiling"
          f"   (target >= 0.8 of the ceiling)")


def run_reference(sessions, concurrency, defs, timeout=1800):
    """The reference SDK worker (FPS_REFSDK) against a fresh emulator with
    the flags ours had: registers, claims, evaluates the managed definitions
    through its own sandbox (a fresh Python per condition and per evaluator)
    and submits, until every session is completed, skipped or dead. Returns
    {ok, runs, wall, cpu_ms_per_run, load, statuses (run status -> count)}; CPU is this process's (where the
    reference runs, with its threads) and its reaped children's (the
    sandboxes), the emulator's excluded (it is reaped after)."""
    refsdk.activate()
    from failproofai_sdk.evaluator.authoring import Evaluator
    from failproofai_sdk.evaluator.runtime import WorkerConfig, WorkerRuntime

    async def main():
        with EmulatorProcess("--definitions", defs, "--threads", "2", "--sessions", str(sessions)) as emu:
            cfg = WorkerConfig(server_url=emu.base, credential="emulator-token", worker_id="reference",
                               max_concurrency=concurrency, request_timeout_seconds=30,
                               drain_timeout_seconds=30)
            runtime = WorkerRuntime(Evaluator(name="bench", version="1.0.0"), cfg)
            c0, t0 = os.times(), time.monotonic()
            task = asyncio.create_task(runtime.run_forever())
            ok = False
            while time.monotonic() - t0 < timeout and not task.done():
                st = emu.state()["assignments"]
                if st["completed"] + st["skipped"] + st["dead"] >= sessions:
                    ok = True
                    break
                await asyncio.sleep(0.02)
            wall, c1 = time.monotonic() - t0, os.times()
            runs = emu.state()["runs"]["committed"]
            load = os.getloadavg()
            statuses = {}
            for r in emu.runs():
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            runtime.stop()
            await asyncio.wait_for(task, 60)
        cpu = sum(c1[i] - c0[i] for i in range(4))  # user, system, children's user, children's system
        return {"ok": ok, "runs": runs, "wall": wall, "cpu_ms_per_run": 1000 * cpu / max(1, runs),
                "load": load, "statuses": statuses}

    return asyncio.run(main())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--db", choices=["file", "memory"], default="file")
    ap.add_argument("--log-level", default="info",
                    help="debug adds per-step latency figures (costs some sidecar CPU)")
    ap.add_argument("--smaps", action="store_true", help="print the idle sidecar's largest mappings")
    ap.add_argument("--keep-log", action="store_true", help="print the sidecar log's path")
    ap.add_argument("--no-ceiling", action="store_true",
                    help="skip the jail-capacity ceiling (tests/bench/jail/run.sh capacity)")
    ap.add_argument("--no-idle", action="store_true",
                    help="skip the 13 s idle RSS/CPU sample (for repeated A/B rounds)")
    ap.add_argument("--archive-mb", type=int, default=0,
                    help="run the sidecar with --archive-max-mb N (the transcript archive on;"
                         " needs --db file); compare with 0, alternating rounds")
    ap.add_argument("--ref-sessions", type=int, default=0,
                    help="with FPS_REFSDK: run the reference worker on only the first N of the"
                         " same sessions (default all; each of its evaluations is a Python start,"
                         " ~3 min for 300 sessions)")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="fps-bench-")
    defs = os.path.join(d, "defs.json")
    with open(defs, "w") as f:
        json.dump(DEFS, f)
    emu = EmulatorProcess("--definitions", defs, "--threads", "2", "--sessions", str(a.sessions))
    emu.start()
    log_path = os.path.join(d, "sidecar.log")
    db = os.path.join(d, "bench.db") if a.db == "file" else ":memory:"
    env = dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN="emulator-token")
    log = open(log_path, "w")
    t0 = time.monotonic()
    # FPS_SIDECAR_WRAP: a command prefix for the sidecar only (e.g. "perf record -g -o f --");
    # its CPU figures then include the wrapper.
    wrap = os.environ.get("FPS_SIDECAR_WRAP", "").split()
    sc = subprocess.Popen(wrap + [BIN, "run", "--server", emu.base, "--listen", "127.0.0.1:0",
                           "--db", db, "--concurrency", str(a.concurrency),
                           "--log-level", a.log_level, "--archive-max-mb", str(a.archive_mb)],
                          stderr=log, stdout=subprocess.DEVNULL, env=env)
    try:
        c0 = 0  # the whole life of the sidecar, start-up and registration included

        def done():
            st = emu.state()["assignments"]
            return st["completed"] + st["skipped"] + st["dead"] >= a.sessions
        ok = wait_for(done, 600, 0.02)
        t1, (own1, kids1) = time.monotonic(), cpu_split(sc.pid)
        kids1 += live_children_ticks(sc.pid)
        c1 = own1 + kids1
        emu_cpu = cpu_ticks(emu.proc.pid)
        st = emu.state()
        runs = st["runs"]["committed"]
        time.sleep(0 if a.no_idle else 3)
        rss = rss_kib(sc.pid)
        if a.smaps:
            smaps_top(sc.pid)
        rss_anon, rss_file = rss_kib(sc.pid, "RssAnon:"), rss_kib(sc.pid, "RssFile:")
        i0, it0 = tree_ticks(sc.pid), time.monotonic()
        time.sleep(0.5 if a.no_idle else 10)
        i1, it1 = tree_ticks(sc.pid), time.monotonic()
    finally:
        stop(sc)
        log.close()
        emu.stop()
        if a.keep_log:
            print("sidecar log:", log_path)
    ours_load = os.getloadavg()
    ref_sessions = min(a.ref_sessions, a.sessions) if a.ref_sessions > 0 else a.sessions
    ref = run_reference(ref_sessions, a.concurrency, defs) if refsdk.root() else None
    lat, steps = latencies(log_path)
    wall = t1 - t0
    rps = runs / wall if wall > 0 else 0
    cpu_ms = 1000 * (c1 - c0) / CLK / max(1, runs)
    idle_cpu = 100 * (i1 - i0) / CLK / (it1 - it0)
    print(f"worker benchmark: {a.sessions} sessions x {len(DEFS)} managed definitions, "
          f"concurrency {a.concurrency}, store {a.db}, {'ok' if ok else 'INCOMPLETE'}")
    print(f"  runs committed        {runs}  in {wall:.2f} s"
          + (f"  (archive on: --archive-max-mb {a.archive_mb})" if a.archive_mb else ""))
    print(f"  runs/s                {rps:9.1f}   anchor: reference ~15 -> x{rps / 15:.1f};"
          f" target 500 -> {rps / 500:.2f} of target")
    per = 1000 / CLK / max(1, runs)
    print(f"  CPU ms per run        {cpu_ms:9.2f}   target <= 0.8 -> {cpu_ms / 0.8:.2f} of target"
          f"   (sidecar {own1 * per:.2f} + sandbox children"
          f" {kids1 * per:.2f} with the zygote; emulator {emu_cpu * per:.2f} not included)")
    print(f"  assignment latency    p50 {pct(lat, 50):.1f} ms   p99 {pct(lat, 99):.1f} ms"
          f"   (claim -> results submitted, n={len(lat)})")
    if not a.no_idle:
        print(f"  idle RSS              {rss / 1024:9.1f} MiB  target 16 MiB ->"
              f" {rss / 1024 / 16:.2f} of target   (anon {rss_anon / 1024:.1f} MiB,"
              f" shared libraries/files {rss_file / 1024:.1f} MiB)")
    for k, v in steps.items():
        print(f"    step {k:18s} p50 {pct(v, 50):7.1f} ms  p99 {pct(v, 99):7.1f} ms")
    if a.no_idle:
        print("  idle RSS/CPU          not sampled (--no-idle)")
    else:
        print(f"  idle CPU              {idle_cpu:9.3f} %   (10 s sample; target ~0)")
    if ref is not None:
        ref_rps = ref["runs"] / ref["wall"] if ref["wall"] > 0 else 0
        print(f"  reference worker      {ref_rps:9.2f} runs/s   ({ref['runs']} runs in {ref['wall']:.1f} s,"
              f" {'the same' if ref_sessions == a.sessions else f'the first {ref_sessions} of the same'}"
              f" sessions, concurrency {a.concurrency}"
              f"{'' if ref['ok'] else ', INCOMPLETE'}); CPU ms per run {ref['cpu_ms_per_run']:.1f};"
              f" run statuses {ref['statuses']}")
        print(f"                        ours / reference: {rps / max(ref_rps, 1e-9):.0f}x runs/s (target >= 200x),"
              f" {ref['cpu_ms_per_run'] / max(cpu_ms, 1e-9):.0f}x less CPU per run; load average"
              f" {ours_load[0]:.2f} after ours, {ref['load'][0]:.2f} after the reference's")
    else:
        print("  reference worker      not measured (FPS_REFSDK not set; tests/interop/README.md)")
    if not a.no_ceiling:
        print_ceiling(rps, sum(1 for d in DEFS if d["condition_source"]) + len(DEFS), len(DEFS))
    # The jail's ceiling leaves out the sidecar's own CPU and the emulator's,
    # which share the same cores: what the cores allow at the CPU per run
    # measured here says how fully the run kept them busy.
    nproc = os.cpu_count() or 1
    emu_ms = emu_cpu * per
    bound = 1000 * nproc / max(cpu_ms + emu_ms, 1e-9)
    print(f"  cores' bound          {bound:9.1f} runs/s = {nproc} cores / ({cpu_ms:.2f} ours +"
          f" {emu_ms:.2f} emulator) ms of CPU per run; measured {rps:.1f} runs/s -> {rps / bound:.2f}"
          f" of it (the cores busy with this run's work)")
    print("  load average          %.2f %.2f %.2f   (2 cores shared: figures above are"
          " distorted by the load; CPU ms per run least)" % os.getloadavg())


if __name__ == "__main__":
    main()
