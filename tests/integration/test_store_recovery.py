"""Crash recovery of the sidecar's SQLite store, with real
processes over loopback: the emulator (`failproofai-sidecar emulator`) and
the daemon (`failproofai-sidecar run --db FILE`), killed with SIGKILL at
random moments and restarted on the same database.

Every scenario ends with the same exactly-once audit against the emulator's
inspection API: every assignment terminal, every run committed exactly once
(`commits == runs.committed`, zero `conflicts`; idempotent replays allowed),
each committed body's sha256 equal to the emulator's result_checksum, and
the sidecar's outbox empty.

Scenarios: the crash loop (300 sessions, >= 10 kills mid-run), a restart
during drain, a restart after the leases expired (dropped locally, then
reclaimed at a higher generation), and a dropped result response followed by
a crash before the retry (the replay after the restart is byte-identical)."""

import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import unittest

from emulator_harness import BIN, TOKEN, WORKER_DEFS as DEFS, EmulatorProcess, wait_for

LEASE_S = 4
EMU_ARGS = ["--lease-seconds", str(LEASE_S), "--heartbeat-seconds", "1", "--poll-seconds", "1",
            "--max-attempts", "1000"]


class Sidecar:
    """`failproofai-sidecar run` on a given database; log to a file."""

    def __init__(self, server, db, log_path, worker_id="store-recovery-w", extra=()):
        self.log_path = log_path
        self.log = open(log_path, "a")
        env = dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN=TOKEN)
        self.proc = subprocess.Popen(
            [BIN, "run", "--server", server, "--listen", "127.0.0.1:0", "--db", db,
             "--worker-id", worker_id, "--concurrency", "4", "--drain-timeout", "20",
             "--request-timeout", "5", "--log-level", "info", *extra],
            stdout=subprocess.DEVNULL, stderr=self.log, env=env)

    def alive(self):
        return self.proc.poll() is None

    def kill9(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()

    def stop(self, timeout=40):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        return self.proc.returncode


def db_query(path, sql, args=()):
    """Reads the sidecar's database while it may be running (WAL readers never
    block its writer)."""
    if not os.path.exists(path):
        return []
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError:
        return []  # schema not created yet
    finally:
        con.close()


class RecoveryBase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fps-store-recovery-")
        self.db = os.path.join(self.dir, "sidecar.db")
        self.log = os.path.join(self.dir, "sidecar.log")
        self.emu = None
        self.sidecar = None
        self.defs = os.path.join(self.dir, "defs.json")
        with open(self.defs, "w") as f:
            json.dump(DEFS, f)

    def tearDown(self):
        if self.sidecar is not None and self.sidecar.alive():
            self.sidecar.kill9()
        if self.emu is not None:
            self.emu.stop()
        if os.environ.get("FPS_KEEP_TMP"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -------------------------------------------------------------
    def start_emu(self, sessions, *faults):
        self.emu = EmulatorProcess("--definitions", self.defs, "--sessions", str(sessions),
                                   *EMU_ARGS, *faults)
        self.emu.start()
        self.sessions = sessions

    def start_sidecar(self):
        self.sidecar = Sidecar(self.emu.base, self.db, self.log)
        return self.sidecar

    def log_tail(self, n=4000):
        with open(self.log, errors="replace") as f:
            return f.read()[-n:]

    def all_terminal(self):
        st = self.emu.state()
        a = st["assignments"]
        return a["completed"] + a["skipped"] + a["dead"] >= self.sessions and st["runs"]["pending"] == 0

    def wait_all_terminal(self, timeout):
        ok = wait_for(self.all_terminal, timeout, 0.2)
        self.assertTrue(ok, f"not finished: {self.emu.state()}\n{self.log_tail()}")

    def audit_exactly_once(self):
        """The exactly-once audit shared by every scenario."""
        st = self.emu.state()
        a = st["assignments"]
        self.assertEqual(a["dead"], 0, st)
        self.assertEqual(a["completed"] + a["skipped"], self.sessions, st)
        self.assertEqual(a["available"] + a["leased"] + a["planned"], 0, st)
        self.assertEqual(st["runs"]["pending"], 0, st)
        self.assertEqual(st["conflicts"], 0, st)
        self.assertEqual(st["commits"], st["runs"]["committed"], st)
        runs = self.emu.runs()
        self.assertEqual(len(runs), st["runs"]["committed"])
        ids = [r["evaluation_run_id"] for r in runs]
        self.assertEqual(len(ids), len(set(ids)), "a run committed twice")
        # every committed run is one of the plan's definitions, once per assignment
        per_assignment = {}
        for r in runs:
            per_assignment.setdefault(r["assignment_id"], []).append(r["eval_key"])
        for aid, keys in per_assignment.items():
            self.assertEqual(sorted(keys), sorted(set(keys)), aid)
        # the sidecar's view: outbox empty, and each accepted body is byte-identical
        # to what the emulator committed
        self.assertEqual(db_query(self.db, "SELECT count(*) FROM outbox")[0][0], 0)
        committed = {r["evaluation_run_id"]: r for r in runs}
        local = db_query(self.db, "SELECT id, submission_id, submit_status FROM runs"
                                  " WHERE submit_status IN ('committed','replayed')")
        self.assertGreater(len(local), 0)
        for run_id, sub, _ in local:
            self.assertIn(run_id, committed)
            self.assertEqual(committed[run_id]["submission_id"], sub, run_id)
        return st, runs


class CrashLoop(RecoveryBase):
    def test_crash_loop_300_sessions_kill9_at_random_moments(self):
        """>= 10 SIGKILLs at random moments while work is in flight, restarting
        on the same database each time; everything ends committed exactly once."""
        self.start_emu(300, "--fault-latency-ms", "15")
        total_runs = 300 * len(DEFS)
        rng = random.Random(int(os.environ.get("FPS_CRASH_SEED", "7")))
        kills_mid_run = 0
        attempts = 0
        while kills_mid_run < 10 and attempts < 40:
            attempts += 1
            sc = self.start_sidecar()
            time.sleep(rng.uniform(0.15, 1.2))
            committed_before = self.emu.state()["runs"]["committed"]
            self.assertTrue(sc.alive(), self.log_tail())
            sc.kill9()
            if committed_before < total_runs:
                kills_mid_run += 1
            if self.all_terminal():
                break
        self.assertGreaterEqual(kills_mid_run, 10, "the run finished before 10 kills")
        # the database survived every kill: still a valid store
        self.assertEqual(db_query(self.db, "PRAGMA integrity_check")[0][0], "ok")
        sc = self.start_sidecar()
        self.wait_all_terminal(240)
        self.assertEqual(sc.stop(), 0, self.log_tail())
        st, runs = self.audit_exactly_once()
        self.assertEqual(st["runs"]["committed"], total_runs, st)
        print(f"\ncrash loop: {kills_mid_run} kills mid-run, commits={st['commits']}, "
              f"idempotent_replays={st['idempotent_replays']}, conflicts={st['conflicts']}, "
              f"lease_expirations={st.get('lease_expirations')}")


class RestartScenarios(RecoveryBase):
    def test_restart_during_drain(self):
        """SIGTERM starts the drain; a SIGKILL lands while it is in progress; the
        restarted sidecar finishes the work without duplicates."""
        self.start_emu(40, "--fault-latency-ms", "40")
        sc = self.start_sidecar()
        self.assertTrue(wait_for(lambda: self.emu.state()["runs"]["committed"] >= 3, 30, 0.02),
                        self.log_tail())
        sc.proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        self.assertTrue(sc.alive(), "the drain ended before the kill: " + self.log_tail())
        sc.kill9()
        self.assertLess(self.emu.state()["runs"]["committed"], 40 * len(DEFS))
        sc = self.start_sidecar()
        self.wait_all_terminal(120)
        self.assertEqual(sc.stop(), 0, self.log_tail())
        self.audit_exactly_once()

    def test_restart_after_leases_expired(self):
        """Killed with leases held; restarted only after they expired: the store
        drops them, the server reclaims them at a higher generation, and they
        complete once."""
        self.start_emu(12, "--fault-latency-ms", "120")
        sc = self.start_sidecar()
        active_sql = ("SELECT id, lease_generation, lease_expires_at FROM assignments"
                      " WHERE status IN ('claimed','planned')")
        self.assertTrue(wait_for(lambda: len(db_query(self.db, active_sql)) >= 2, 30, 0.02),
                        self.log_tail())
        sc.kill9()
        held = db_query(self.db, active_sql)
        self.assertGreaterEqual(len(held), 1)
        latest = max(exp for _, _, exp in held)
        time.sleep(max(0.0, latest - time.time()) + 0.5)  # every stored lease has expired
        sc = self.start_sidecar()
        self.wait_all_terminal(120)
        self.assertEqual(sc.stop(), 0, self.log_tail())
        st, _ = self.audit_exactly_once()
        gens = dict(db_query(self.db, "SELECT id, lease_generation FROM assignments"))
        status = dict(db_query(self.db, "SELECT id, status FROM assignments"))
        for aid, gen, _ in held:
            self.assertGreater(gens[aid], gen, f"{aid} was not reclaimed at a higher generation")
            self.assertIn(status[aid], ("completed", "skipped"), aid)
        self.assertGreaterEqual(st["lease_expirations"], len(held), st)

    def test_dropped_result_response_then_crash_before_retry(self):
        """The emulator commits a result and drops the connection (--fault-drop);
        the sidecar's client logs the transport failure and backs off before
        retrying; it is killed inside that backoff, so the result is committed
        on the server and still pending in the outbox. After the restart the
        stored bytes are resent: an idempotent replay of byte-identical content."""
        self.start_emu(30, "--fault-drop", "0.3", "--fault-latency-ms", "10")
        caught = None
        for _ in range(8):
            sc = Sidecar(self.emu.base, self.db, self.log, extra=("--log-level", "debug"))
            self.sidecar = sc
            deadline = time.time() + 20
            seen = 0
            while time.time() < deadline and caught is None and sc.alive():
                with open(self.log, errors="replace") as f:
                    lines = f.readlines()
                for line in lines[seen:]:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    url = entry.get("url") or ""
                    if entry.get("msg") != "retrying cloud call" or not url.endswith("/result"):
                        continue
                    run_id = url.rsplit("/", 2)[-2]
                    committed = {r["evaluation_run_id"]: r for r in self.emu.runs()}
                    pending = db_query(self.db, "SELECT submission_id, body FROM outbox"
                                                " WHERE run_id=?", (run_id,))
                    if run_id in committed and pending:
                        sc.kill9()  # inside the backoff: committed there, pending here
                        still = db_query(self.db, "SELECT submission_id, body FROM outbox"
                                                  " WHERE run_id=?", (run_id,))
                        if still and committed[run_id]["submission_id"] == still[0][0]:
                            caught = (still[0][0], run_id, bytes(still[0][1]),
                                      committed[run_id]["result_checksum"])
                        break
                seen = len(lines)
                if self.all_terminal():
                    break
                time.sleep(0.01)
            if sc.alive():
                sc.kill9()
            if caught or self.all_terminal():
                break
        self.assertIsNotNone(caught, "never killed the sidecar between a dropped result "
                                     "response and its retry")
        sub, run_id, body, checksum = caught
        self.assertEqual("sha256:" + hashlib.sha256(body).hexdigest(), checksum,
                         "the stored bytes differ from what the server committed")
        replays_before = self.emu.state()["idempotent_replays"]
        sc = self.start_sidecar()
        self.wait_all_terminal(120)
        self.assertEqual(sc.stop(), 0, self.log_tail())
        st, _ = self.audit_exactly_once()
        self.assertGreater(st["idempotent_replays"], replays_before, st)
        outcome = db_query(self.db, "SELECT submission_id, submit_status FROM runs WHERE id=?",
                           (run_id,))
        self.assertEqual(outcome[0], (sub, "replayed"))
        history = [o for (o,) in db_query(self.db, "SELECT outcome FROM submit_attempts"
                                                   " WHERE run_id=? ORDER BY id", (run_id,))]
        self.assertEqual(history, ["replayed"], history)

if __name__ == "__main__":
    unittest.main()
