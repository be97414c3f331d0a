"""The memory of a process tree as the sidecar's memory budget counts it
(common/procmem.c): each process's RssAnon + RssFile from /proc/PID/status,
plus the memfd files the tree holds open, each counted once by inode. A
TreeSampler thread samples a tree every `interval` seconds and keeps the
peaks. Used by test_memory_budget.py and tests/bench/worker/bench_memory.py."""

import os
import threading


def _children_map():
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _rss(pid):
    total = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:")):
                    total += int(line.split()[1]) * 1024
    except OSError:
        return None
    return total


def sample(root):
    """(tree bytes, root's own rss + memfds, processes), or None if root is gone."""
    kids = _children_map()
    tree, i = [root], 0
    while i < len(tree):
        tree.extend(kids.get(tree[i], ()))
        i += 1
    seen, memfd, rss, root_rss, procs = set(), 0, 0, None, 0
    for pid in tree:
        r = _rss(pid)
        if r is None:
            if pid == root:
                return None
            continue
        procs += 1
        rss += r
        if pid == root:
            root_rss = r
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            p = f"/proc/{pid}/fd/{fd}"
            try:
                if not os.readlink(p).startswith("/memfd:"):
                    continue
                st = os.stat(p)
            except OSError:
                continue
            if st.st_ino in seen:
                continue
            seen.add(st.st_ino)
            memfd += st.st_blocks * 512
    return rss + memfd, root_rss + memfd, procs


class TreeSampler(threading.Thread):
    """Samples the tree under `pid` until stop(); peak / parent_peak in bytes."""

    def __init__(self, pid, interval=0.05):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = self.parent_peak = self.samples = 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            s = sample(self.pid)
            if s is not None:
                self.samples += 1
                self.peak = max(self.peak, s[0])
                self.parent_peak = max(self.parent_peak, s[1])
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join(10)
        return self.peak
