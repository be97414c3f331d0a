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
# below sees the process evaluating it alive: a single-use child comes and
# goes with its evaluation, so a fast one would come and go between samples
# (a sanitizer build's sample takes far longer).
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


def descendants(root, depth=None, parents=None):
    """{pid: start time} of every process below `root` (with `depth`, a
    dict, filled with each one's depth below it: 1 for a child; with
    `parents`, each one's parent pid)."""
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
            if depth is not None:
                depth[pid] = hops + 1
            if parents is not None:
                parents[pid] = parent[pid]
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


def writes(pid):
    """The write calls PID has made (syscw of /proc/PID/io), or 0 if gone.
    A session's evaluator makes two per evaluation (the outcome, then its
    report); a single-use child one, its outcome."""
    try:
        with open(f"/proc/{pid}/io") as fh:
            for ln in fh:
                if ln.startswith("syscw:"):
                    return int(ln.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


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


class Watched(unittest.TestCase):
    """The emulator and a sidecar over DEFINITIONS, and a watch of its tree."""

    DEFINITIONS = DEFS

    def setUp(self):
        self.defs = definitions_file(self.DEFINITIONS)
        self.emu = EmulatorProcess("--definitions", self.defs, "--poll-seconds", "1")
        self.emu.start()
        self.sc = Sidecar(self.emu.base, token="emulator-token", concurrency=3,
                          extra=("--max-sandboxes", "4"))

    def tearDown(self):
        self.sc.stop(signal.SIGKILL)
        self.emu.stop()
        os.unlink(self.defs)

    def watch_sessions(self, sessions, defs):
        """Adds the sessions and watches the sidecar's tree until they are
        done: ({(pid, start): markers held}, samples with two sessions held
        at once, the deepest a sandbox process sat below the sidecar, the
        most write calls a process holding a session was seen to have
        made)."""
        root = self.sc.proc.pid
        self.assertTrue(wait_for(lambda: self.emu.state()["requests"] > 2, 30),
                        self.sc.raw_log()[-2000:])
        held = {}          # (pid, start) -> markers of the sessions it was seen holding
        overlap = [0]      # samples where processes of two sessions ran at once
        deepest = [0]
        most_writes = [0]
        errors = []
        stop = threading.Event()

        def watch():
            try:
                while not stop.is_set():
                    now, depth, parents = set(), {}, {}
                    listed = descendants(root, depth, parents)
                    # A process whose parent was seen holding a session is
                    # that session's: its depth counts from this listing,
                    # taken in one pass, rather than from its own memory
                    # read, which in a sanitizer build comes too late to
                    # find a short evaluation's process alive.
                    for pid in listed:
                        if (parents[pid], listed.get(parents[pid])) in held:
                            deepest[0] = max(deepest[0], depth[pid])
                    for pid, start in listed.items():
                        marks = held_sessions(pid)
                        if marks:
                            held.setdefault((pid, start), set()).update(marks)
                            now |= marks
                            most_writes[0] = max(most_writes[0], writes(pid))
                            deepest[0] = max(deepest[0], depth[pid])
                    if len(now) >= 2:
                        overlap[0] += 1
                    time.sleep(0.005)
            except PermissionError as exc:  # the test must see the children
                errors.append(str(exc))

        th = threading.Thread(target=watch, daemon=True)
        th.start()
        try:
            for i in range(sessions):
                self.assertEqual(self.emu.add_session(session(i)).status, 201)

            def done():
                st = self.emu.state()
                return st["assignments"]["completed"] == sessions and st["commits"] == sessions * len(defs)
            self.assertTrue(wait_for(done, 300, interval=0.2), self.sc.raw_log()[-3000:])
        finally:
            stop.set()
            th.join(10)
        self.assertEqual(errors, [])
        self.assertGreater(len(held), 0, "no sandbox process was seen holding a session")
        return held, overlap[0], deepest[0], most_writes[0]


class SessionIsolation(Watched):
    def test_two_assignments_never_share_a_child(self):
        held, overlap, deepest, most_writes = self.watch_sessions(SESSIONS, DEFS)
        shared = {k: sorted(v) for k, v in held.items() if len(v) > 1}
        self.assertEqual(shared, {}, "sandbox processes that held the data of two sessions")
        self.assertGreater(overlap, 0, "two sessions were never held at the same moment "
                                       f"({len(held)} processes seen)")
        # several managed evaluations: one sandbox process (the session's
        # evaluator, which has no child) served them, its conditions first
        self.assertEqual(deepest, 1, "a sandbox process below another")
        self.assertGreaterEqual(most_writes, 4, "no sandbox process was seen having served two "
                                                "evaluations of its session")


class SingleEvaluation(Watched):
    """An assignment with one managed evaluation runs it alone, in a
    single-use child (SessionIsolation sees an evaluator serve several)."""

    DEFINITIONS = [dict(DEFS[0], condition_source=None, evaluator_source=SLOW.format(n=3000000))]

    def test_one_managed_evaluation_runs_alone(self):
        held, _, deepest, most_writes = self.watch_sessions(4, self.DEFINITIONS)
        self.assertEqual(deepest, 1, "a sandbox process below another")
        self.assertLessEqual(most_writes, 1, "a sandbox process served more than one evaluation "
                                             "of an assignment with one")
        self.assertEqual({k: v for k, v in held.items() if len(v) > 1}, {})

if __name__ == "__main__":
    unittest.main()
