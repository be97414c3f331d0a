#!/usr/bin/env python3
"""Admin API benchmark driver (see README.md). Usage:
bench.py BIN DB [--conns N] [--duration S] [--sessions N]

1. GET /v1/runs?limit=100 under wrk on a database of 100,000 runs (the worker
   idle against an emulator with no sessions), then a filtered page reached
   through a keyset cursor.
2. The worker's throughput on N emulator sessions x 3 managed definitions,
   alone and again while wrk loads the admin API (same sidecar, same DB):
   with wrk paced to the target rate (--rate, 2,000 req/s: a Lua delay() per
   connection) and with wrk flat out (as many requests as the cores allow,
   which necessarily takes CPU from the worker on a 2-core machine)."""

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
os.environ.setdefault("FPS_SOURCE_DIR", os.path.join(HERE, "..", "..", ".."))

DEFS = [{"eval_key": f"bench_{i}", "eval_version": "1", "display_name": f"Bench {i}",
         "result_kind": "score", "labels": [], "condition_source": None,
         "evaluator_source": f"EvalResult(score=Score(min(1, session.event_count / {10 + i})))",
         "timeout_seconds": 30} for i in range(3)]


def cpu_seconds(pid):
    """utime + stime of process `pid` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api_cpu_seconds(pid):
    """utime + stime of the admin API's threads (libmicrohttpd names them
    MHD-worker) in process `pid`, in seconds."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith("MHD-"):
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def cache_counts(sc):
    """(hits, misses) of the admin API's response cache, from /metrics."""
    text = sc.get("/metrics").raw.decode()
    def val(name):
        m = re.search(r"^%s(?:\{\})? ([\d.e+]+)$" % name, text, re.M)
        return float(m.group(1)) if m else 0.0
    return (val("failproofai_sidecar_admin_cache_hits_total"),
            val("failproofai_sidecar_admin_cache_misses_total"))


PACE_LUA = """
local conns = tonumber(os.getenv("FPS_WRK_CONNS"))
local rate = tonumber(os.getenv("FPS_WRK_RATE"))
-- each connection waits between requests so that all of them together offer
-- about 25 % more than `rate` requests per second (less what latency takes)
function delay() return 1000 * conns / (rate * 1.25) end
"""


def wrk_cmd(url, conns, duration, rate=0):
    """wrk's argv: flat out, or paced to `rate` req/s when rate > 0."""
    cmd = ["wrk", "-t2", f"-c{conns}", f"-d{duration}", "--latency"]
    if rate > 0:
        script = os.path.join(tempfile.gettempdir(), "fps-wrk-pace.lua")
        with open(script, "w") as f:
            f.write(PACE_LUA)
        os.environ["FPS_WRK_CONNS"] = str(conns)
        os.environ["FPS_WRK_RATE"] = str(rate)
        cmd += ["-s", script]
    return cmd + [url]


def wrk(url, conns, duration, pid=None, rate=0):
    """Returns p50 ms, p99 ms, req/s, non-2xx, sidecar CPU ms per request, load."""
    cpu0 = cpu_seconds(pid) if pid else 0.0
    out = subprocess.run(wrk_cmd(url, conns, duration, rate),
                         capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - cpu0 if pid else 0.0
    return parse_wrk(out, cpu)


def parse_wrk(out, cpu):
    nreq = int(re.search(r"(\d+) requests in", out).group(1))

    def ms(label):
        m = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)\b" % re.escape(label), out, re.M)
        v, u = float(m.group(1)), m.group(2)
        return v / 1000 if u == "us" else v * 1000 if u == "s" else v
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return (ms("50%"), ms("99%"), rps, int(bad.group(1)) if bad else 0,
            None if cpu is None else 1000.0 * cpu / max(nreq, 1), os.getloadavg()[0])


def report(name, r):
    p50, p99, rps, bad, cpu_ms, load = r
    print(f"{name:26s} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms (target <= 20 ms: ratio {p99 / 20:.2f})"
          f"  {rps:6.0f} req/s (target >= 2000: ratio {rps / 2000:.2f})"
          + (f"  sidecar CPU {cpu_ms:.3f} ms/req" if cpu_ms is not None else "")
          + f"  non-2xx {bad}  load {load:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("db")
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--api-only", action="store_true", help="skip the worker throughput part")
    ap.add_argument("--repeat", type=int, default=3, help="alone/loaded worker pairs")
    ap.add_argument("--rate", type=int, default=2200, help="paced wrk's target req/s (a little above the 2,000 req/s target: the Lua-paced client, sharing the cores with the worker, falls behind its schedule)")
    ap.add_argument("--skip-flat", action="store_true", help="no pairs with wrk flat out")
    a = ap.parse_args()
    os.environ["FPS_BIN"] = a.bin
    from admin_harness import Sidecar, emulator

    tmp = tempfile.mkdtemp(prefix="fps-api-bench-")
    defs = os.path.join(tmp, "defs.json")
    with open(defs, "w") as f:
        json.dump(DEFS, f)
    emu = emulator("--sessions", "0", "--definitions", defs, "--poll-seconds", "1")
    emu.start()
    sc = Sidecar(emu.base, db=a.db)
    sc.start()
    try:
        base = f"http://127.0.0.1:{sc.port}/v1/runs?limit=100"
        n = len(sc.get("/v1/runs?limit=100").body["runs"])
        print(f"GET /v1/runs?limit=100 -> {n} runs; {a.conns} connections, {a.duration}")
        wrk(base, a.conns, "2s")  # warm-up
        pid = sc.proc.pid
        report("first page", wrk(base, a.conns, a.duration, pid))
        report(f"first page, paced {a.rate}/s", wrk(base, a.conns, a.duration, pid, a.rate))
        cur = sc.get("/v1/runs?limit=100&status=succeeded").body["next_cursor"]
        report("filtered page via cursor", wrk(f"{base}&status=succeeded&cursor={cur}", a.conns,
                                               a.duration, pid))
        if a.api_only:
            return

        def worker_rate(rate):
            """Runs/s of one batch of sessions; rate None = no API load, 0 =
            wrk flat out, > 0 = wrk paced to that many req/s."""
            start = emu.request("GET", "/emulator/v1/state").body["runs"]["committed"]
            want = start + a.sessions * len(DEFS)
            emu.request("POST", f"/emulator/v1/sessions?generate={a.sessions}", b"{}")
            t0 = time.time()
            proc = None
            api0, hm0 = api_cpu_seconds(sc.proc.pid), cache_counts(sc)
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if rate is not None:
                proc = subprocess.Popen(wrk_cmd(base, a.conns, "120s", rate),
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            while emu.request("GET", "/emulator/v1/state").body["runs"]["committed"] < want:
                if time.time() - t0 > 300:
                    raise RuntimeError("worker did not finish")
                time.sleep(0.05)
            dt = time.time() - t0
            if proc:  # SIGINT: wrk stops and prints its summary
                proc.send_signal(signal.SIGINT)
                out = proc.communicate()[0]
                api_cpu = api_cpu_seconds(sc.proc.pid) - api0
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                wrk_cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
                hits, misses = (b - a for a, b in zip(hm0, cache_counts(sc)))
                try:
                    r = parse_wrk(out, None)
                    report("  API while the worker runs", r)
                    n = max(r[2] * dt, 1)
                    print(f"    API threads CPU {1000 * api_cpu / n:.3f} ms/req, wrk CPU "
                          f"{1000 * wrk_cpu / n:.3f} ms/req ({wrk_cpu / dt:.2f} cores), cache "
                          f"hits {hits:.0f} misses {misses:.0f} "
                          f"({100 * hits / max(hits + misses, 1):.0f} %)", flush=True)
                except (AttributeError, ValueError):
                    print("  (no wrk summary)")
            return (want - start) / dt

        # Alternate alone / loaded so that a change in the machine's load
        # (other jobs on the same cores) affects both sides of each pair.
        modes = [(a.rate, f"wrk paced to {a.rate} req/s"), (0, "wrk flat out")]
        for rate, what in modes[:1] if a.skip_flat else modes:
            pairs = []
            for _ in range(a.repeat):
                alone = worker_rate(None)
                loaded = worker_rate(rate)
                pairs.append((alone, loaded))
                print(f"  worker pair: {alone:.0f} runs/s alone, {loaded:.0f} runs/s with {what} "
                      f"(ratio {loaded / alone:.2f}, load {os.getloadavg()[0]:.2f})", flush=True)
            ratios = sorted(lo / al for al, lo in pairs)
            alone = sorted(p[0] for p in pairs)[len(pairs) // 2]
            loaded = sorted(p[1] for p in pairs)[len(pairs) // 2]
            print(f"worker throughput ({a.sessions} sessions x {len(DEFS)} managed definitions, "
                  f"median of {len(pairs)}): {alone:.0f} runs/s alone, {loaded:.0f} runs/s with "
                  f"{what} (median pair ratio {ratios[len(ratios) // 2]:.2f})", flush=True)
    finally:
        sc.stop()
        emu.stop()


if __name__ == "__main__":
    main()
