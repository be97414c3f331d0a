#!/usr/bin/env python3
"""Store soak benchmark: the emulator and the sidecar under a steady stream of
sessions (default 20 sessions/s x 3 managed definitions for 20 minutes), with
--retention-runs small enough that retention engages. Prints one row per
sample period (default a minute): WAL bytes (the largest seen in the period,
sampled every second) and DB bytes, sidecar RSS (at the sample and the
largest seen in the period) and open fds (the fewest and the most seen in the
period: the fewest is the baseline a leak would raise, the most adds the
in-flight runs' sandbox channels and connections), CPU per run (the sidecar
and its sandbox children), runs/s (the emulator's commit count), p50 and p99
of GET /v1/runs?limit=100 (a probe thread, --probe-rate requests/s), p99 of
GET /healthz probed alongside (the anchor: the same process and machine, no
store work) and the machine's 1-minute load average (other processes share
the CPU: a high load explains a p99 swing). Then the targets (WAL <= 64 MiB at every sample, DB
flat within 5 % once retention engages, RSS flat within 2 MiB after minute 2,
fds constant, runs/s and p99 at the end within 10 % of minute 2) and
soak.svg, a plot of the same series.

runs/s, CPU per run and the probe percentiles are measured over windows of
whole claim cycles, not over the fixed sample period. The sidecar works in
bursts: a claim that finds nothing waits the server's poll_interval_seconds
(10 s from the emulator, as the protocol says) and the next claims drain the
~10 s of sessions added meanwhile in a second or two. A fixed 60 s period
holds 5 or 6 of these ~11 s cycles depending on phase, so it read 54 or 65
runs/s at a steady 60/s input. Each window here ends at the end of the last
burst before the sample time (the first second in which the commit count
stopped moving after it had moved); when the sidecar never idles (no such
second since the previous window) the window ends at the sample time.

usage: FPS_BIN=build/failproofai-sidecar python3 tests/bench/store/soak.py
       [--minutes 20] [--rate 20] [--retention-runs 12000] [--sample-seconds 60]
       [--concurrency 8] [--probe-rate 20] [--svg soak.svg]
Not run by ctest."""

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "worker"))
from emulator_harness import EmulatorProcess, wait_for  # noqa: E402
from bench_worker import DEFS, tree_ticks, rss_kib, CLK  # noqa: E402
from test_store_load import Feeder  # noqa: E402


def free_port():
    # A benchmark's own choice (its sidecar logs at warn, so the bound port
    # of --listen :0 is not in its log); tests bind :0 and read the log.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")
MIB = 1 << 20


def size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Prober(threading.Thread):
    """GET `path` on the admin API `rate` times a second; latencies in ms."""

    def __init__(self, port, rate, path):
        super().__init__(daemon=True)
        self.port, self.stop, self.lat, self.mu, self.errors = port, threading.Event(), [], threading.Lock(), 0
        self.period, self.path = 1 / rate, path

    def take(self, until):
        """The latencies of the probes that ended at or before monotonic time `until`."""
        with self.mu:
            out = [ms for t, ms in self.lat if t <= until]
            self.lat = [(t, ms) for t, ms in self.lat if t > until]
        return out

    def run(self):
        conn = None
        while not self.stop.wait(self.period):
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                t0 = time.monotonic()
                conn.request("GET", self.path)
                r = conn.getresponse()
                r.read()
                t1 = time.monotonic()
                if r.status == 200:
                    with self.mu:
                        self.lat.append((t1, 1000 * (t1 - t0)))
                else:
                    self.errors += 1
            except (OSError, http.client.HTTPException):
                self.errors += 1
                conn = None


def svg(rows, path):
    """Small multiples, one panel per series, minutes on x."""
    series = [("WAL max (MiB)", "wal_mib", 64), ("DB (MiB)", "db_mib", None), ("RSS (MiB)", "rss_mib", None),
              ("open fds (fewest per period)", "fds", None), ("CPU ms/run", "cpu_ms", None), ("runs/s", "rps", None),
              ("p99 GET /v1/runs (ms)", "p99", None)]
    w, ph, pad = 720, 120, 40
    h = pad + len(series) * (ph + pad)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{pad}" y="20" font-size="13">store soak: {len(rows)} samples</text>']
    xs = [r["t_min"] for r in rows]
    x0, x1 = 0, max(xs) if xs else 1
    for i, (title, key, limit) in enumerate(series):
        top = pad + i * (ph + pad)
        vals = [r[key] for r in rows]
        vmax = max(vals + ([limit] if limit else [])) if vals else 1
        vmax = vmax * 1.1 or 1
        out.append(f'<text x="{pad}" y="{top - 6}">{title}</text>')
        out.append(f'<rect x="{pad}" y="{top}" width="{w - 2 * pad}" height="{ph}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{pad - 4}" y="{top + 10}" text-anchor="end">{vmax:.3g}</text>')
        out.append(f'<text x="{pad - 4}" y="{top + ph}" text-anchor="end">0</text>')

        def px(x, v):
            return pad + (w - 2 * pad) * (x - x0) / ((x1 - x0) or 1), top + ph - ph * v / vmax
        if limit:
            _, ly = px(0, limit)
            out.append(f'<line x1="{pad}" x2="{w - pad}" y1="{ly:.1f}" y2="{ly:.1f}" stroke="red" stroke-dasharray="4"/>')
        pts = " ".join("%.1f,%.1f" % px(x, v) for x, v in zip(xs, vals))
        out.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
        for x, v in zip(xs, vals):
            cx, cy = px(x, v)
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="#1f77b4"/>')
    out.append(f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">minutes</text></svg>')
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--rate", type=float, default=20, help="new sessions per second")
    ap.add_argument("--retention-runs", type=int, default=12000)
    ap.add_argument("--sample-seconds", type=float, default=60)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--probe-rate", type=float, default=20, help="API probes per second")
    ap.add_argument("--svg", default="soak.svg")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (log, database)")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="fps-soak-")
    defs = os.path.join(d, "defs.json")
    with open(defs, "w") as f:
        json.dump(DEFS, f)
    emu = EmulatorProcess("--definitions", defs, "--threads", "2", "--sessions", "0")
    emu.start()
    db = os.path.join(d, "soak.db")
    port = free_port()
    env = dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN="emulator-token")
    log = open(os.path.join(d, "sidecar.log"), "w")
    sc = subprocess.Popen([BIN, "run", "--server", emu.base, "--listen", f"127.0.0.1:{port}", "--db", db,
                           "--concurrency", str(a.concurrency), "--retention-runs", str(a.retention_runs),
                           "--log-level", "warn"], stderr=log, stdout=subprocess.DEVNULL, env=env)
    feeder, prober = Feeder(emu, a.rate), Prober(port, a.probe_rate, "/v1/runs?limit=100")
    anchor = Prober(port, a.probe_rate, "/healthz")
    rows = []
    try:
        wait_for(lambda: size(db) > 0, 30, 0.1)
        feeder.start()
        prober.start()
        anchor.start()
        print(f"store soak: {a.rate:g} sessions/s x {len(DEFS)} managed definitions, {a.minutes:g} min, "
              f"retention {a.retention_runs} runs, concurrency {a.concurrency}, sample every {a.sample_seconds:g} s")
        print(f"{'min':>5} {'WAL max MiB':>11} {'DB MiB':>8} {'RSS MiB':>8} {'RSS max':>7} {'fds':>7} "
              f"{'CPU ms/run':>10} {'runs/s':>7} {'window s':>8} {'p50 ms':>7} {'p99 ms':>7} {'hz p99':>6} {'probes':>6} "
              f"{'load1':>5} {'backlog':>7}")
        t_start = time.monotonic()
        # one point a second: (time, runs committed, CPU ticks); a window ends at a point
        points = [(t_start, emu.state()["runs"]["committed"], tree_ticks(sc.pid))]
        win = 0  # index in points where the current window began
        end = t_start + 60 * a.minutes
        next_sample = t_start + a.sample_seconds
        wal_max, rss_max, fds_lo, fds_hi = 0, 0, 1 << 30, 0
        while time.monotonic() < end and sc.poll() is None:
            time.sleep(1)
            wal_max = max(wal_max, size(db + "-wal"))
            rss_max = max(rss_max, rss_kib(sc.pid))
            nfd = len(os.listdir(f"/proc/{sc.pid}/fd"))
            fds_lo, fds_hi = min(fds_lo, nfd), max(fds_hi, nfd)
            st = emu.state()
            points.append((time.monotonic(), st["runs"]["committed"], tree_ticks(sc.pid)))
            if time.monotonic() < next_sample:
                continue
            next_sample += a.sample_seconds
            # the last burst's end: a point whose commit count equals the one
            # before it, which had moved (whole claim cycles since `win`)
            last = len(points) - 1
            cut = next((i for i in range(last, win + 1, -1)
                        if points[i][1] == points[i - 1][1] != points[i - 2][1]), last)
            (t0, r0, c0), (t1, r1, c1) = points[win], points[cut]
            runs = r1 - r0
            lat, hz = prober.take(t1), anchor.take(t1)
            row = {"t_min": (time.monotonic() - t_start) / 60, "wal_mib": wal_max / MIB,
                   "db_mib": size(db) / MIB, "rss_mib": rss_kib(sc.pid) / 1024, "rss_max_mib": rss_max / 1024,
                   "fds": fds_lo, "fds_max": fds_hi, "p50": pct(lat, 50), "probes": len(lat),
                   "load1": os.getloadavg()[0], "cpu_ms": 1000 * (c1 - c0) / CLK / max(1, runs),
                   "rps": runs / max(1e-9, t1 - t0), "window_s": t1 - t0, "p99": pct(lat, 99), "hz_p99": pct(hz, 99),
                   "backlog": feeder.added - sum(st["assignments"].get(k, 0) for k in ("completed", "skipped", "dead"))}
            rows.append(row)
            print(f"{row['t_min']:5.1f} {row['wal_mib']:11.1f} {row['db_mib']:8.1f} {row['rss_mib']:8.1f} "
                  f"{row['rss_max_mib']:7.1f} {row['fds']:3d}..{row['fds_max']:<3d} {row['cpu_ms']:10.2f} "
                  f"{row['rps']:7.1f} {row['window_s']:8.1f} {row['p50']:7.1f} {row['p99']:7.1f} {row['hz_p99']:6.1f} "
                  f"{row['probes']:6d} {row['load1']:5.2f} {row['backlog']:7d}", flush=True)
            points, win = points[cut:], 0
            wal_max, rss_max, fds_lo, fds_hi = 0, 0, 1 << 30, 0
    finally:
        feeder.stop.set()
        prober.stop.set()
        anchor.stop.set()
        sc.send_signal(signal.SIGTERM)
        try:
            sc.wait(60)
        except subprocess.TimeoutExpired:
            sc.kill()
        log.close()
        emu.stop()
    if sc.returncode not in (0, None) and not rows:
        print("the sidecar exited early; log:", os.path.join(d, "sidecar.log"))
        return 1
    svg(rows, a.svg)
    if len(rows) >= 3:
        k2 = min(1, len(rows) - 1)  # the second sample: "minute 2" with one-minute samples
        last = rows[-1]
        # retention keeps retention_runs runs and as many finished assignments (their
        # documents are most of the bytes): steady once that many sessions were added
        # and the next prune (the store's maintenance runs every minute) ran
        steady = [r for r in rows if (r["t_min"] - 1.5) * 60 * a.rate > a.retention_runs]
        db_span = (max(r["db_mib"] for r in steady) / min(r["db_mib"] for r in steady) - 1) * 100 if steady else float("nan")
        rss_after = [r["rss_mib"] for r in rows[k2:]]
        print("targets:")
        print(f"  WAL max over all samples   {max(r['wal_mib'] for r in rows):.1f} MiB (<= 64)")
        print(f"  DB spread once retention engages ({len(steady)} samples)  {db_span:.1f} % (<= 5)")
        print(f"  RSS spread after sample 2  {max(rss_after) - min(rss_after):.1f} MiB (<= 2)")
        print(f"  fds, fewest per period     {min(r['fds'] for r in rows)}..{max(r['fds'] for r in rows)} (constant)")
        print(f"  fds, most per period       {min(r['fds_max'] for r in rows)}..{max(r['fds_max'] for r in rows)} "
              f"(baseline + in-flight runs)")
        print(f"  runs/s last / sample 2     {last['rps'] / max(1e-9, rows[k2]['rps']):.2f} (0.9..1.1)")
        print(f"  p99 last / sample 2        {last['p99'] / max(1e-9, rows[k2]['p99']):.2f} (<= 1.1; "
              f"load {last['load1']:.2f} vs {rows[k2]['load1']:.2f})")
        print(f"  anchor: /healthz p99, last and sample 2  {last['hz_p99']:.1f} and {rows[k2]['hz_p99']:.1f} ms "
              f"(a swing both share is the machine's)")
        print(f"  probe errors               {prober.errors + anchor.errors}")
    print("plot:", a.svg)
    if a.keep:
        print("kept:", d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
