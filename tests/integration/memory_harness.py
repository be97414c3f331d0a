"""One end-to-end run of the sidecar against the emulator for the memory
budget's test (test_memory_budget.py) and benchmark
(tests/bench/worker/bench_memory.py): big realistic sessions, the tree's
memory sampled as the budget counts it (tree_memory.py), /v1/status
polled, and the committed outcomes read back from the emulator."""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("FPS_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
from emulator_harness import EmulatorProcess, wait_for  # noqa: E402
from fps_sidecar import Sidecar  # noqa: E402
from tree_memory import TreeSampler  # noqa: E402

GEN = os.path.join(ROOT, "tests", "bench", "lang", "gen_transcript.py")


def make_sessions(directory, n, events=65000, seed=7):
    """n sessions of one generated transcript (tests/bench/lang/gen_transcript.py),
    each under its own session id; returns the transcript's size in bytes."""
    first = os.path.join(directory, "s000.json")
    subprocess.run([sys.executable, GEN, "--events", str(events), "--seed", str(seed),
                    "--out", first], check=True, capture_output=True, timeout=600)
    with open(first, "rb") as f:
        data = f.read()
    doc_head = data[:4096]
    sid = json.loads(data)["session_id"].encode()
    assert doc_head.count(b'"session_id": "' + sid + b'"') == 1
    for i in range(1, n):
        copy = data.replace(b'"session_id": "' + sid + b'"',
                            b'"session_id": "' + sid + b"-%03d" % i + b'"', 1)
        with open(os.path.join(directory, "s%03d.json" % i), "wb") as f:
            f.write(copy)
    return len(data)


def status(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/status", timeout=10) as r:
        return json.loads(r.read())


def readyz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def emulator(sessions_dir):
    """An emulator serving the sessions in sessions_dir (not started)."""
    return EmulatorProcess("--transcripts", sessions_dir, "--sample-definitions",
                           "--claim-limit", "32", "--lease-seconds", "120")


class Loading(threading.Thread):
    """Starts an emulator in the background (it parses every session first,
    the slow part); join() then use .emu, or .error."""

    def __init__(self, sessions_dir):
        super().__init__(daemon=True)
        self.emu, self.error = emulator(sessions_dir), None
        self.start()

    def run(self):
        try:
            self.emu.start()
        except Exception as e:  # reported by the caller
            self.error = e

    def ready(self):
        self.join()
        if self.error is not None:
            raise self.error
        return self.emu


def run_once(sessions_dir, nsessions, concurrency, budget_mb=None, timeout=600, extra=(),
             emu=None):
    """Runs every session to its committed results. Returns a dict: seconds,
    runs, peak and parent_peak (bytes), base (the tree once idle and
    registered), max_active (assignments in flight at once, from /v1/status),
    waited (a status showed claims or sandboxes waiting for memory),
    not_ready_while_waiting, memory (the last status's memory object),
    outcomes {(session_id, eval_key): (status, results)}, state (emulator)."""
    args = ["--insecure-open-admin", "--log-level", "info"]
    if budget_mb is not None:
        args += ["--memory-limit-mb", str(budget_mb)]
    else:
        args += ["--memory-limit-mb", "0"]
    args += list(extra)
    if emu is None:
        emu = emulator(sessions_dir)
        emu.start()
    try:
        sc = Sidecar(emu.base, token="emulator-token", concurrency=concurrency, extra=args)
        try:
            line = sc.wait_log(lambda l: l.get("msg") == "admin API listening", timeout=60)
            if line is None:
                raise AssertionError("sidecar did not start:\n" + sc.raw_log()[-3000:])
            port = line["port"]
            sampler = TreeSampler(sc.proc.pid)
            sampler.start()
            t0 = time.monotonic()
            out = {"max_active": 0, "waited": False, "not_ready_while_waiting": 0}
            while time.monotonic() - t0 < timeout:
                st = emu.state()
                a = st["assignments"]
                if a["available"] == 0 and a["leased"] == 0 and a["planned"] == 0 \
                        and st["runs"]["pending"] == 0 and st["runs"]["committed"] > 0:
                    break
                s = status(port)
                out["max_active"] = max(out["max_active"], s["active_assignments"])
                m = s.get("memory") or {}
                if m.get("claims_waiting") or m.get("sandboxes_waiting"):
                    out["waited"] = True
                    if readyz(port) != 200:
                        out["not_ready_while_waiting"] += 1
                time.sleep(0.1)
            out["seconds"] = time.monotonic() - t0
            out["peak"] = sampler.stop()
            out["parent_peak"] = sampler.parent_peak
            out["samples"] = sampler.samples
            s = status(port)
            out["memory"] = s.get("memory")
            out["counters"] = s.get("counters")
            out["base"] = (s.get("memory") or {}).get("base_bytes")
            st = emu.state()
            out["state"] = st
            runs = emu.runs()
            out["runs"] = len(runs)
            out["outcomes"] = {(r["session_id"], r["eval_key"]):
                               (r["status"], json.dumps(r["result"].get("results"), sort_keys=True))
                               for r in runs}
            out["log"] = sc.raw_log()
            return out
        finally:
            sc.stop()
    finally:
        emu.stop()
