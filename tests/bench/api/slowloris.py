#!/usr/bin/env python3
"""/healthz latency under slow clients (see README.md). Usage:
slowloris.py BIN [--conns N] [--seconds S]

Starts `failproofai-sidecar run` (worker idle against a dead server), probes
/healthz five times a second for S seconds alone, then again while N
connections each send one header byte a second and never finish their
headers (reopened as the sidecar closes them), and prints both latency
distributions and their ratio."""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
os.environ.setdefault("FPS_SOURCE_DIR", os.path.join(HERE, "..", "..", ".."))


def probe(sc, seconds):
    lat, failed, end = [], 0, time.time() + seconds
    while time.time() < end:
        t0 = time.time()
        try:
            ok = sc.get("/healthz", timeout=2).status == 200
        except OSError:
            ok = False
        if ok:
            lat.append((time.time() - t0) * 1000)
        else:
            failed += 1
        time.sleep(0.2)
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
    return {"n": len(lat), "failed": failed, "p50": pick(0.5), "p99": pick(0.99), "max": pick(1.0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--conns", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=20)
    a = ap.parse_args()
    os.environ["FPS_BIN"] = a.bin
    from admin_harness import Sidecar, dead_port
    from test_admin_limits import Slowloris
    with Sidecar(f"http://127.0.0.1:{dead_port()}") as sc:
        alone = probe(sc, a.seconds)
        attack = Slowloris(sc.port, a.conns)
        attack.thread.start()
        try:
            loaded = probe(sc, a.seconds)
        finally:
            attack.stop.set()
            attack.thread.join(30)
    print(f"/healthz every 200 ms, {a.seconds:.0f} s each (2 s client timeout)")
    print(f"{'':28} {'probes':>7} {'failed':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, r in ((f"alone", alone), (f"{a.conns} slow connections", loaded)):
        print(f"{name:28} {r['n']:>7} {r['failed']:>7} {r['p50']:>8.2f} {r['p99']:>8.2f} "
              f"{r['max']:>8.2f}")
    print(f"ratio loaded/alone: p50 {loaded['p50'] / alone['p50']:.2f}, "
          f"p99 {loaded['p99'] / alone['p99']:.2f}; slow connections closed by the sidecar: "
          f"{attack.closed}")


if __name__ == "__main__":
    main()
