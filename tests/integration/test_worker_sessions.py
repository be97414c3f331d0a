"""Isolation between sessions at the worker: two assignments in flight at
once never share a sandbox child. The sidecar runs against the real emulator
at concurrency 3 with slow managed definitions over sessions that each carry
a marker of their own in their events; the test watches the sidecar's
process tree through /proc while the assignments run and reads what each
sandbox process holds (its anonymous and memfd mappings, through
/proc/PID/mem): no process (named by pid and start time, so a reused pid is
another process) ever holds the markers of two sessions over its whole
life, and at some moment processes holding two different sessions ran at
once, so the property was put to the test. It does not depend on how the
jail gets a session's data to its children (a mapped memfd, or a copy in
anonymous memory)."""

import os
import re
import signal
import threading
import time
import unittest

from emulator_harness import EmulatorProcess, definitions_file, wait_for
from fps_sidecar import Sidecar

# Slow enough (a few tenths of a second, little memory) that the sampler
# below sees the children of several assignments alive at once: a child is
# used for one evaluation, so a fast one would come and go between samples.
SLOW = "EvalResult(score=Score(float(len([0 for i in range({n}) if i < 0]) % 2)))"
DEFS = [
    {"eval_key": f"slow_{k}", "eval_version": "1.0", "display_name": f"Slow {k}",
     "result_kind": "score", "labels": [], "condition_source": "len(session.events) >= 0",
     "evaluator_source": SLOW.format(n=4000000 + k), "timeout_seconds": 30}
    for k in range(3)
]
SESSIONS = 6


def stat_fields(pid):
    """(ppid, start time in clock ticks) of /proc/PID/stat, or None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[19])


def descendants(root):
    """{pid: start time} of every process below `root`."""
    parent, start = {}, {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            f = stat_fields(int(name))
            if f:
                parent[int(name)], start[int(name)] = f
    out = {}
    for pid in parent:
        p, hops = parent[pid], 0
        while p and p != root and p in parent and hops < 64:
            p, hops = parent[p], hops + 1
        if p == root:
            out[pid] = start[pid]
    return out


MARKER = re.compile(rb"isolation-marker-(\d{4})-end")
CHUNK = 1 << 20
MAX_REGION = 256 << 20  # larger regions are reservations, not a session's data
# Anonymous bytes read per process and sample, after its memfd mappings: a
# session's data here is a few hundred bytes (in the image, or a copy of it
# near the start of an anonymous mapping), while a sanitizer build's
# allocator maps hundreds of MiB that reading whole would slow each sample
# so much that no two short-lived children are ever seen at once.
ANON_BUDGET = 16 << 20


def held_sessions(pid):
    """The session markers PID's memory holds (a set of ints), or None if it
    is gone. Reads its private anonymous mappings and its memfd mappings
    (PermissionError is raised: the test cannot see the children)."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            regions = fh.read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except (FileNotFoundError, ProcessLookupError):
        return None
    found = set()
    picked = []
    for ln in regions:
        parts = ln.split(None, 5)
        name = parts[5] if len(parts) == 6 else ""
        if parts[1][0] != "r" or (name and not name.startswith(("/memfd:", "[heap]", "[stack]"))):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if hi - lo <= MAX_REGION:
            picked.append((not name.startswith("/memfd:"), lo, hi))
    anon_left = ANON_BUDGET
    with mem:
        for anon, lo, hi in sorted(picked):  # memfd mappings first
            if anon:
                if anon_left <= 0:
                    break
                hi = min(hi, lo + anon_left)
                anon_left -= hi - lo
            tail = b""
            for off in range(lo, hi, CHUNK):
                try:
                    mem.seek(off)
                    data = mem.read(min(CHUNK, hi - off))
                except OSError:  # unmapped meanwhile, or a guard page
                    break
                found.update(int(m) for m in MARKER.findall(tail + data))
                tail = data[-64:]
    return found


def session(i):
    marker = f"isolation-marker-{i:04d}-end"
    return {"session_id": f"s-{i}", "agent_id": "a",
            "events": [{"id": "e1", "ts": "2026-08-28T12:00:00.000000Z", "event_type": "user_message",
                        "payload": {"text": marker}},
                       {"id": "e2", "ts": "2026-08-28T12:00:01.000000Z", "event_type": "agent_end",
                        "payload": {"note": marker}}]}


class SessionIsolation(unittest.TestCase):
    def setUp(self):
        self.defs = definitions_file(DEFS)
        self.emu = EmulatorProcess("--definitions", self.defs, "--poll-seconds", "1")
        self.emu.start()
        self.sc = Sidecar(self.emu.base, token="emulator-token", concurrency=3,
                          extra=("--max-sandboxes", "4"))

    def tearDown(self):
        self.sc.stop(signal.SIGKILL)
        self.emu.stop()
        os.unlink(self.defs)

    def test_two_assignments_never_share_a_child(self):
        root = self.sc.proc.pid
        self.assertTrue(wait_for(lambda: self.emu.state()["requests"] > 2, 30),
                        self.sc.raw_log()[-2000:])
        held = {}          # (pid, start) -> markers of the sessions it was seen holding
        overlap = [0]      # samples where processes of two sessions ran at once
        errors = []
        stop = threading.Event()

        def watch():
            try:
                while not stop.is_set():
                    now = set()
                    for pid, start in descendants(root).items():
                        marks = held_sessions(pid)
                        if marks:
                            held.setdefault((pid, start), set()).update(marks)
                            now |= marks
                    if len(now) >= 2:
                        overlap[0] += 1
                    time.sleep(0.005)
            except PermissionError as exc:  # the test must see the children
                errors.append(str(exc))

        th = threading.Thread(target=watch, daemon=True)
        th.start()
        try:
            for i in range(SESSIONS):
                self.assertEqual(self.emu.add_session(session(i)).status, 201)

            def done():
                st = self.emu.state()
                return st["assignments"]["completed"] == SESSIONS and st["commits"] == SESSIONS * len(DEFS)
            self.assertTrue(wait_for(done, 300, interval=0.2), self.sc.raw_log()[-3000:])
        finally:
            stop.set()
            th.join(10)
        self.assertEqual(errors, [])
        shared = {k: sorted(v) for k, v in held.items() if len(v) > 1}
        self.assertEqual(shared, {}, "sandbox processes that held the data of two sessions")
        self.assertGreater(len(held), 0, "no sandbox process was seen holding a session")
        self.assertGreater(overlap[0], 0, "two sessions were never held at the same moment "
                                          f"({len(held)} processes seen)")

if __name__ == "__main__":
    unittest.main()
