"""The daemon's open file descriptors do not grow with load: the sidecar
creates its HTTP handles (and their libcurl socket pairs) at start, one per
thread that may call the server, each keeping at most one connection, so the
descriptors counted in /proc/PID/fd once it has started and made its first
requests are the same number after a burst of sessions run at full
concurrency against the real emulator, but for the session images the
recent-transcript ring keeps for the playground (sealed memfds, at most
RECENT_N of them whatever the load)."""

import collections
import os
import signal
import unittest

from emulator_harness import WORKER_DEFS as DEFS, EmulatorProcess, definitions_file, wait_for
from fps_sidecar import Sidecar

CONCURRENCY = 3
# HTTP handles the worker makes at start: one per assignment thread, the
# claim loop, the heartbeat thread and the outbox's retry thread.
HANDLES = CONCURRENCY + 3
SESSIONS = 40
# the recent ring's images (sidecar/worker/recent.c): its last assignments'
RECENT_N = 16


def fd_targets(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed while listing
    return out


def fd_kinds(pid):
    """Counts of the process's descriptors by kind (socket, pipe, file...),
    for a readable failure message."""
    return collections.Counter(t.split(":")[0] if ":" in t else "file" for t in fd_targets(pid))


class ConstantDescriptors(unittest.TestCase):
    def setUp(self):
        self.defs = definitions_file(DEFS)
        self.emu = EmulatorProcess("--definitions", self.defs, "--poll-seconds", "1")
        self.emu.start()
        self.sc = Sidecar(self.emu.base, token="emulator-token", concurrency=CONCURRENCY)

    def tearDown(self):
        self.sc.stop(signal.SIGKILL)
        self.emu.stop()
        os.unlink(self.defs)

    def test_burst_opens_no_descriptor(self):
        pid = self.sc.proc.pid
        # Started: registered and claiming; each handle has made a request
        # (the idle claims go round the pool), so each has its connection.
        self.assertTrue(wait_for(lambda: self.emu.state()["requests"] > HANDLES, 30),
                        self.sc.raw_log()[-2000:])
        # and the jail's pre-started children are in place: two counts half a
        # second apart agree
        counts = []

        def steady():
            counts.append(sum(fd_kinds(pid).values()))
            return len(counts) > 1 and counts[-1] == counts[-2]
        wait_for(steady, 15, interval=0.5)
        before = fd_kinds(pid)
        for i in range(SESSIONS):
            self.emu.add_session({"session_id": f"s-{i}", "agent_id": "a", "events": []})

        def done():
            st = self.emu.state()
            return st["assignments"]["completed"] == SESSIONS and st["commits"] == SESSIONS * len(DEFS)
        self.assertTrue(wait_for(done, 90), self.sc.raw_log()[-2000:])
        # The jail's pool may still be replacing a finished child: wait for it
        # to settle on the start-up count; it never does if the burst kept
        # descriptors open.
        def others(kinds):
            return sum(n for k, n in kinds.items() if k != "/memfd")
        settled = wait_for(lambda: others(fd_kinds(pid)) == others(before), 15)
        after = fd_kinds(pid)
        self.assertTrue(settled, f"descriptors after start-up {sum(before.values())} "
                                 f"{dict(before)}, after {SESSIONS} sessions at concurrency "
                                 f"{CONCURRENCY} {sum(after.values())} {dict(after)}")
        self.assertEqual(before.get("/memfd", 0), 0, dict(before))
        self.assertLessEqual(after.get("/memfd", 0), RECENT_N, dict(after))
        self.assertTrue(self.sc.alive())


if __name__ == "__main__":
    unittest.main()
