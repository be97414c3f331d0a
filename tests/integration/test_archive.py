"""The transcript archive (`run --archive-max-mb N`, store/archive.h) with real
processes over loopback: the emulator and `failproofai-sidecar run`.

- A stream of sessions into a 1 MiB archive: at every sample the archive file
  plus its WAL stay within the bound plus one entry, the oldest entries are
  evicted, /v1/status and /metrics count them, and every entry kept reads
  back whole: it decompresses (libzstd, through ctypes) to as many bytes as
  the emulator served for its assignment, their SHA-256 is the stored one,
  and they are the transcript of the entry's session.
- kill -9 at random moments while transcripts are being archived, then a
  restart on the same files, several times: the archive passes SQLite's
  integrity check and no entry is torn (each reads back as above).
- A full disk under the archive alone (`<db>.archive` is a symlink into a
  1 MiB tmpfs mounted in the sidecar's private mount namespace): every
  session's runs still commit, the sidecar stays ready, and the failures are
  counted (reason disk_full) and logged once per interval."""

import ctypes
import ctypes.util
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import unittest

from emulator_harness import BIN, TOKEN, WORKER_DEFS, EmulatorProcess, admin_port_in_log, wait_for

_ZSTD = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
_ZSTD.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
_ZSTD.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_ZSTD.ZSTD_decompress.restype = ctypes.c_size_t
_ZSTD.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
_ZSTD.ZSTD_isError.argtypes = [ctypes.c_size_t]


def zstd_decompress(blob):
    n = _ZSTD.ZSTD_getFrameContentSize(blob, len(blob))
    if n >= (1 << 63):  # ZSTD_CONTENTSIZE_UNKNOWN / _ERROR
        raise ValueError("not a zstd frame with a declared size")
    out = ctypes.create_string_buffer(max(n, 1))
    got = _ZSTD.ZSTD_decompress(out, n, blob, len(blob))
    if _ZSTD.ZSTD_isError(got) or got != n:
        raise ValueError("damaged zstd frame")
    return out.raw[:n]




WORDS = ("tool call search result retrieval answer user agent error retry latency token "
         "context window summary plan step observation").split()


def bulky_session(rng, i, kib):
    """A transcript of about `kib` KiB of text events, deterministic per rng."""
    events, size, n = [], 0, 0
    while size < kib * 1024:
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 160)))
        events.append({"id": f"e{i}-{n}", "ts": "2026-08-28T12:00:00.000000Z",
                       "event_type": "assistant_message", "payload": {"text": text}})
        size += len(text) + 90
        n += 1
    events.append({"id": f"e{i}-end", "ts": "2026-08-28T12:00:01.000000Z",
                   "event_type": "agent_end", "payload": {"summary": "done"}})
    return {"events": events}


class ArchiveBase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fps-archive-")
        self.db = os.path.join(self.dir, "sidecar.db")
        self.archive = self.db + ".archive"
        self.log = os.path.join(self.dir, "sidecar.log")
        self.defs = os.path.join(self.dir, "defs.json")
        with open(self.defs, "w") as f:
            json.dump(WORKER_DEFS, f)
        self.emu = None
        self.proc = None

    def tearDown(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.emu is not None:
            self.emu.stop()
        if os.environ.get("FPS_KEEP_TMP"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def start_emu(self, sessions=0):
        self.emu = EmulatorProcess("--definitions", self.defs, "--sessions", str(sessions),
                                   "--lease-seconds", "6", "--heartbeat-seconds", "1",
                                   "--poll-seconds", "1", "--max-attempts", "1000")
        self.emu.start()

    def start_sidecar(self, archive_mb, prefix=(), extra=()):
        env = dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN=TOKEN)
        offset = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [*prefix, BIN, "run", "--server", self.emu.base, "--listen",
                 "127.0.0.1:0", "--db", self.db, "--worker-id", "archive-w",
                 "--concurrency", "4", "--request-timeout", "5", "--drain-timeout", "20",
                 "--insecure-open-admin", "--archive-max-mb", str(archive_mb), *extra],
                stdout=subprocess.DEVNULL, stderr=log, env=env)
        self.port = wait_for(lambda: admin_port_in_log(self.log, offset), 30, 0.05)
        self.assertIsNotNone(self.port, self.log_tail())
        self.assertTrue(wait_for(lambda: self.status() is not None, 30, 0.1), self.log_tail())

    def stop_sidecar(self):
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(60), 0, self.log_tail())

    def admin(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def status(self):
        try:
            st, body = self.admin("/v1/status")
        except OSError:
            return None
        return json.loads(body) if st == 200 else None

    def log_tail(self, n=4000):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def archive_log_lines(self):
        """The log's lines about archiving (its failures name their reason)."""
        try:
            with open(self.log, "rb") as f:
                return b"".join(l for l in f if b"archiv" in l)[-4000:]
        except OSError:
            return b""

    def committed(self):
        return self.emu.state()["runs"]["committed"]

    def entries(self, path=None):
        """Every entry of the archive file, read with a connection of the
        test's own."""
        con = sqlite3.connect(f"file:{path or self.archive}?mode=ro", uri=True, timeout=10)
        try:
            self.assertEqual(con.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            return con.execute("SELECT id, session_id, session_revision_id, assignment_id,"
                               " raw_bytes, stored_bytes, sha256, codec, data FROM entries"
                               " ORDER BY id").fetchall()
        finally:
            con.close()

    def assert_entries_whole(self, rows):
        """Each entry decompresses to the bytes the emulator served for its
        assignment: their length, the stored SHA-256, the session's own."""
        for (eid, sid, rev, aid, raw_bytes, stored, sha, codec, data) in rows:
            self.assertEqual(codec, "zstd")
            self.assertEqual(len(data), stored)
            raw = zstd_decompress(data)
            self.assertEqual(len(raw), raw_bytes, eid)
            self.assertEqual(hashlib.sha256(raw).hexdigest(), sha, f"entry {eid} is torn")
            served = self.emu.assignment(aid)
            self.assertEqual(served["transcript_bytes"], raw_bytes, (eid, aid))
            t = json.loads(raw)
            self.assertEqual(t["session_revision_id"], rev)
            self.assertEqual(served.get("session_id", sid), sid)


class StreamBounds(ArchiveBase):
    def test_stream_into_a_small_archive_stays_bounded(self):
        """80 sessions of 20-150 KiB into a 1 MiB archive."""
        self.start_emu()
        self.start_sidecar(1)
        rng = random.Random(7)
        bound, largest, samples = 1 << 20, 0, 0
        for i in range(80):
            t = bulky_session(rng, i, rng.randint(20, 150))
            largest = max(largest, len(json.dumps(t)) + 4096)
            self.assertEqual(self.emu.add_session(t).status, 201)
            if i % 4 == 3:
                size = sum(os.path.getsize(self.archive + s) for s in ("", "-wal")
                           if os.path.exists(self.archive + s))
                samples += 1
                self.assertLessEqual(size, bound + largest, f"sample {samples}")
            time.sleep(0.05)
        self.assertTrue(wait_for(lambda: (s := self.status()) and s["archive"]["archived"] >= 80,
                                 120, 0.2), f"{self.status()}\n{self.log_tail()}")
        st = self.status()["archive"]
        print(f"\narchive after the stream: {st}")
        self.assertGreater(st["evictions"], 5)
        self.assertEqual(st["failures"], 0)
        self.assertLessEqual(st["bytes"], bound + largest)
        self.assertEqual(st["max_bytes"], bound)
        _, metrics = self.admin("/metrics")
        m = re.search(rb"^failproofai_sidecar_archive_evictions_total (\d+)", metrics, re.M)
        self.assertIsNotNone(m)
        self.assertEqual(int(m.group(1)), st["evictions"])
        rows = self.entries()
        self.assertEqual(len(rows), st["entries"])
        # the newest survive: the ids kept are contiguous up to the last
        ids = [r[0] for r in rows]
        self.assertEqual(ids, list(range(ids[0], ids[0] + len(ids))))
        self.assert_entries_whole(rows)
        st_file = os.stat(self.archive)
        self.assertEqual(st_file.st_mode & 0o777, 0o600)
        self.stop_sidecar()


class CrashWhileArchiving(ArchiveBase):
    def test_kill9_during_archiving_leaves_no_torn_entry(self):
        rng = random.Random(11)
        self.start_emu()
        for i in range(120):
            self.assertEqual(self.emu.add_session(bulky_session(rng, i, rng.randint(100, 600))).status,
                             201)
        kills = 0
        while kills < 6:
            self.start_sidecar(64)
            before = self.status()["archive"]["archived"]
            # kill while it writes: right after an entry went in, with more queued
            got = wait_for(lambda: (s := self.status()) and s["archive"]["archived"] > before, 60,
                           0.01)
            if not got or self.emu.state()["assignments"]["available"] == 0:
                break
            time.sleep(rng.random() * 0.05)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            kills += 1
            # each restart finds a whole archive
            self.assert_entries_whole(self.entries())
        self.assertGreaterEqual(kills, 3, self.log_tail())
        if self.proc.poll() is not None:
            self.start_sidecar(64)
        self.assertTrue(wait_for(lambda: self.emu.state()["runs"]["pending"] == 0 and
                                 self.emu.state()["assignments"]["available"] == 0, 180, 0.2),
                        self.log_tail())
        self.stop_sidecar()
        rows = self.entries()
        print(f"\n{kills} kills; {len(rows)} entries, all whole")
        self.assertGreater(len(rows), 0)
        self.assert_entries_whole(rows)


class FullDisk(ArchiveBase):
    # Sessions go in waves of a few MiB, within the archive's queue, each
    # drained before the next: on a loaded machine the writer (which yields
    # the CPU to live work) falls behind a burst, and a transcript the full
    # queue refuses is counted as queue_full, not as the full disk under test.
    WAVE = 8

    def test_full_disk_under_the_archive_keeps_live_work_going(self):
        mnt = os.path.join(self.dir, "mnt")
        os.mkdir(mnt)
        os.symlink(os.path.join(mnt, "archive"), self.archive)
        rng = random.Random(13)
        self.start_emu()
        n = 40
        sessions = [bulky_session(rng, i, rng.randint(150, 300)) for i in range(n)]
        self.start_sidecar(64, ["unshare", "-m", "--propagation", "private", "sh", "-c",
                                f"mount -t tmpfs -o size=1m tmpfs {mnt} && exec \"$@\"", "sh"])
        not_ready = []
        seen_ready = []

        def progress(runs):
            # Not ready before the first registration is start-up, not the
            # archive: only a fall from ready counts.
            s = self.status()
            if s is not None and s["ready"]:
                seen_ready.append(True)
            elif s is not None and seen_ready:
                not_ready.append(s.get("ready_reason"))
            return self.committed() >= runs

        for start in range(0, n, self.WAVE):
            end = min(n, start + self.WAVE)
            for sess in sessions[start:end]:
                self.assertEqual(self.emu.add_session(sess).status, 201)
            self.assertTrue(wait_for(lambda: progress(end * len(WORKER_DEFS)), 180, 0.2),
                            f"{self.emu.state()}\n{self.log_tail()}")
            # Every transcript is archived or failed once the queue is empty.
            self.assertTrue(wait_for(lambda: (s := self.status()) and s["archive"]["queued"] == 0
                                     and s["archive"]["archived"] + s["archive"]["failures"] >= end,
                                     120, 0.2), f"{self.status()}\n{self.log_tail()}")
        runs = n * len(WORKER_DEFS)
        st = self.status()
        print(f"\narchive on a full disk: {st['archive']}")
        self.assertEqual(self.committed(), runs)
        self.assertTrue(st["ready"], st.get("ready_reason"))
        self.assertEqual(not_ready, [], "the archive's full disk made the sidecar not ready")
        self.assertEqual(st["store"]["writes_blocked"], None)
        self.assertGreater(st["archive"]["failures"], 0)
        self.assertEqual(st["archive"]["archived"] + st["archive"]["failures"], n)
        _, metrics = self.admin("/metrics")
        m = re.search(rb'^failproofai_sidecar_archive_failures_total\{reason="disk_full"\} (\d+)',
                      metrics, re.M)
        self.assertIsNotNone(m, b"\n".join(l for l in metrics.splitlines()
                                            if l.startswith(b"failproofai_sidecar_archive"))
                             + b"\n" + self.archive_log_lines())
        self.assertEqual(int(m.group(1)), st["archive"]["failures"])
        # logged once per interval, not once per failure
        with open(self.log) as f:
            logged = sum('"transcript not archived' in line for line in f)
        self.assertEqual(logged, 1)
        self.stop_sidecar()


class AgeBoundOnATimer(ArchiveBase):
    """The age bound holds while no transcript arrives: once every session is
    archived and none comes any more, the entries older than
    --archive-max-age-hours are evicted by the daemon's timer
    (--archive-prune-seconds), not only by the next insert."""

    def test_old_entries_go_without_an_insert(self):
        sessions = 5
        self.start_emu(sessions)
        # 0.0005 h = 1.8 s; the timer every 0.2 s
        self.start_sidecar(8, extra=("--archive-max-age-hours", "0.0005",
                                     "--archive-prune-seconds", "0.2"))
        self.assertTrue(wait_for(lambda: self.committed() >= sessions * len(WORKER_DEFS)
                                 and self.status()["archive"]["archived"] == sessions, 60, 0.1),
                        (self.status(), self.log_tail()))
        # nothing arrives any more: only the timer can evict the last one
        a = wait_for(lambda: (lambda a: a if a["entries"] == 0 else None)(self.status()["archive"]),
                     30, 0.1)
        self.assertTrue(a, (self.status(), self.log_tail()))
        self.assertEqual((a["archived"], a["evictions"], a["failures"]), (sessions, sessions, 0))
        self.assertEqual(self.entries(), [])
        st, body = self.admin("/metrics")
        self.assertRegex(body.decode(), rf"(?m)^failproofai_sidecar_archive_evictions_total {sessions}(\.0)?$")
        self.stop_sidecar()


if __name__ == "__main__":
    unittest.main()
