"""The admin API's response cache (api/cache.c) for GET /v1/runs and
GET /v1/assignments, against the real `failproofai-sidecar run` over loopback
HTTP: a page is served byte-identical on repeat (and /metrics counts the hits);
a commit by another process on the same database file, or by the worker in the
sidecar, is visible to the very next request; different queries never share an
entry; malformed queries still get their 4xx."""

import json
import os
import sqlite3
import tempfile
import threading
import time
import unittest

from prometheus_client.parser import text_string_to_metric_families

from admin_harness import Sidecar, dead_server, emulator

HITS = "failproofai_sidecar_admin_cache_hits_total"
MISSES = "failproofai_sidecar_admin_cache_misses_total"


def counter(sc, name):
    r = sc.get("/metrics")
    assert r.status == 200, r
    for fam in text_string_to_metric_families(r.raw.decode()):
        for s in fam.samples:
            if s.name == name:
                return s.value
    raise AssertionError(f"{name} missing from /metrics")


class OutsideWriter:
    """Another process's connection to the sidecar's database file."""

    def __init__(self, path):
        self.db = sqlite3.connect(path, timeout=10, isolation_level=None)
        self.n = 0

    def close(self):
        self.db.close()

    def add_run(self, eval_key="k", status="succeeded", assignment="asg-1", summary=None):
        self.n += 1
        rid = f"outside-run-{self.n}-{time.monotonic_ns()}"
        self.db.execute(
            "INSERT INTO runs(id, assignment_id, eval_key, eval_version, execution_mode, status,"
            " created_at, summary) VALUES (?, ?, ?, '1', 'python', ?, ?, ?)",
            (rid, assignment, eval_key, status, time.time(), summary))
        return rid

    def add_assignment(self, status="completed"):
        self.n += 1
        aid = f"outside-asg-{self.n}-{time.monotonic_ns()}"
        self.db.execute(
            "INSERT INTO assignments(id, worker_id, lease_generation, lease_expires_at, status,"
            " claimed_at) VALUES (?, 'w-outside', 1, ?, ?, ?)",
            (aid, time.time() + 60, status, time.time()))
        return aid


class CacheOutsideWriterTest(unittest.TestCase):
    """The worker points at a dead port: the only writes are ours (through a
    separate SQLite connection in this process) and the sidecar's periodic
    counter flush."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fps-cache-")
        cls.sc = Sidecar(dead_server(),
                         db=os.path.join(cls.tmp.name, "sidecar.db"))
        cls.sc.start()
        cls.w = OutsideWriter(cls.sc.db)

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
        rc = cls.sc.stop()
        cls.tmp.cleanup()
        assert rc == 0, f"sidecar exit status {rc}"

    def tearDown(self):
        self.assertTrue(self.sc.alive(), "the sidecar died")

    def ok(self, path):
        r = self.sc.get(path)
        self.assertEqual(r.status, 200, (path, r))
        return r

    def test_repeat_is_byte_identical_and_a_hit(self):
        for _ in range(3):
            self.w.add_run(eval_key="repeat")
        first = self.ok("/v1/runs?limit=100")
        # An equivalent query under another key is rendered afresh: the cached
        # bytes must equal a fresh render.
        fresh = self.ok("/v1/runs?limit=100&cursor=999999999999999999")
        self.assertEqual(first.raw, fresh.raw)
        for attempt in range(5):  # a counter flush (a commit) may land in between
            h0 = counter(self.sc, HITS)
            a = self.ok("/v1/runs?limit=100")
            b = self.ok("/v1/runs?limit=0100")  # the same normalized query
            h1 = counter(self.sc, HITS)
            self.assertEqual(a.raw, first.raw)
            self.assertEqual(b.raw, first.raw)
            self.assertEqual(a.headers.get("cache-control"), "no-store")
            self.assertEqual(b.headers.get("x-content-type-options"), "nosniff")
            self.assertEqual(b.headers.get("content-type"), "application/json")
            self.assertEqual(a.headers, b.headers)
            if h1 - h0 == 2:
                break
        else:
            self.fail("repeated pages were never served from the cache")
        h = self.sc.request("HEAD", "/v1/runs?limit=100")
        self.assertEqual(h.status, 200)
        self.assertEqual(h.raw, b"")
        self.assertEqual(int(h.headers["content-length"]), len(first.raw))
        self.assertGreater(counter(self.sc, MISSES), 0)

    def test_outside_commit_is_seen_by_the_next_request(self):
        for path in ("/v1/runs?limit=5", "/v1/runs?limit=5&eval_key=fresh"):
            for i in range(25):
                self.ok(path)  # warm: the entry is cached right before the write
                self.ok(path)
                rid = self.w.add_run(eval_key="fresh", summary=f"s{i}")
                r = self.ok(path)
                self.assertEqual(r.body["runs"][0]["id"], rid, f"stale page after write {i}")
                self.assertEqual(r.body["runs"][0]["summary"], f"s{i}")
        # an update of a row already on the page
        rid = self.w.add_run(eval_key="upd")
        self.assertEqual(self.ok("/v1/runs?limit=1").body["runs"][0]["status"], "succeeded")
        self.w.db.execute("UPDATE runs SET status = 'failed' WHERE id = ?", (rid,))
        self.assertEqual(self.ok("/v1/runs?limit=1").body["runs"][0]["status"], "failed")
        # assignments too
        for i in range(10):
            self.ok("/v1/assignments?limit=3")
            aid = self.w.add_assignment()
            self.assertEqual(self.ok("/v1/assignments?limit=3").body["assignments"][0]["id"], aid)
        # a transaction still open is not visible; its commit is, at once
        self.ok("/v1/runs?limit=1")
        self.w.db.execute("BEGIN IMMEDIATE")
        rid = self.w.add_run(eval_key="tx")
        self.assertNotEqual(self.ok("/v1/runs?limit=1").body["runs"][0]["id"], rid)
        self.w.db.execute("COMMIT")
        self.assertEqual(self.ok("/v1/runs?limit=1").body["runs"][0]["id"], rid)

    def test_different_queries_do_not_collide(self):
        # values chosen to collide under a naive key made by joining the fields
        keys = ["a", "a|b", "|-", "b", "1:a", "a|-"]
        asg = ["asg-x", "asg-y|1:a"]
        made = {}
        for k in keys:
            for a in asg:
                made[(k, a)] = self.w.add_run(eval_key=k, assignment=a,
                                              status="failed" if k == "b" else "succeeded")
        from urllib.parse import quote
        queries = {}
        for k in keys:
            queries[f"/v1/runs?limit=500&eval_key={quote(k, safe='')}"] = {
                made[(k, a)] for a in asg}
            for a in asg:
                queries[f"/v1/runs?limit=500&eval_key={quote(k, safe='')}"
                        f"&assignment={quote(a, safe='')}"] = {made[(k, a)]}
        for a in asg:
            queries[f"/v1/runs?limit=500&assignment_id={quote(a, safe='')}"] = {
                made[(k, a)] for k in keys}
        queries["/v1/runs?limit=500&status=failed&assignment=asg-x"] = {made[("b", "asg-x")]}
        for rnd in range(2):  # second round: every page comes from the cache
            for q, want in queries.items():
                got = {x["id"] for x in self.ok(q).body["runs"]}
                self.assertEqual(got, want, (rnd, q))
        # limits and cursors: each page is its own entry
        p1 = self.ok("/v1/runs?limit=2").body
        p2 = self.ok(f"/v1/runs?limit=2&cursor={p1['next_cursor']}").body
        p3 = self.ok("/v1/runs?limit=4").body
        for _ in range(2):
            self.assertEqual(self.ok("/v1/runs?limit=2").body, p1)
            self.assertEqual(self.ok(f"/v1/runs?limit=2&cursor={p1['next_cursor']}").body, p2)
            self.assertEqual(self.ok("/v1/runs?limit=4").body, p3)
        self.assertEqual([x["id"] for x in p1["runs"] + p2["runs"]], [x["id"] for x in p3["runs"]])
        # the two routes never share an entry
        for _ in range(2):
            self.assertIn("assignments", self.ok("/v1/assignments?limit=2").body)
            self.assertIn("runs", self.ok("/v1/runs?limit=2").body)

    def test_malformed_queries_still_refused(self):
        self.w.add_run()
        bad = ["/v1/runs?limit=100&status=bogus", "/v1/runs?limit=501", "/v1/runs?limit=0",
               "/v1/runs?limit=x", "/v1/runs?limit=100&cursor=zz", "/v1/runs?cursor=-1",
               "/v1/assignments?status=nope", "/v1/assignments?limit=100&cursor=1x",
               "/v1/assignments?limit=9999"]
        for _ in range(2):
            self.ok("/v1/runs?limit=100")
            self.ok("/v1/assignments?limit=100")
            for q in bad:
                r = self.sc.get(q)
                self.assertEqual(r.status, 400, (q, r))
                self.assertEqual(r.code, "invalid_request", (q, r))
        r = self.sc.request("GET", "/v1/runs?limit=100", body=b"x" * 10)
        self.assertEqual(r.status, 413, r)


class CacheWithWorkerTest(unittest.TestCase):
    """The worker commits runs while clients keep the cache hot: every run the
    emulator has received (so committed in the sidecar's store before it was
    submitted) must be on the very next page."""

    DEFS = [{"eval_key": f"c{i}", "eval_version": "1", "display_name": f"C{i}",
             "result_kind": "score", "labels": [], "condition_source": None,
             "evaluator_source": "EvalResult(score=Score(0.25), summary='quarter')",
             "timeout_seconds": 10} for i in range(2)]
    SESSIONS = 8

    def test_worker_commits_are_seen_at_once(self):
        with tempfile.TemporaryDirectory(prefix="fps-cache-") as tmp:
            path = os.path.join(tmp, "defs.json")
            with open(path, "w") as f:
                json.dump(self.DEFS, f)
            emu = emulator("--sessions", "0", "--definitions", path, "--poll-seconds", "1")
            emu.start()
            sc = Sidecar(emu.base, db=os.path.join(tmp, "sidecar.db"))
            stop = threading.Event()
            errors = []

            def hammer():
                while not stop.is_set():
                    for q in ("/v1/runs?limit=500", "/v1/assignments?limit=500"):
                        r = sc.get(q)
                        if r.status != 200:
                            errors.append(r)

            try:
                sc.start()
                sc.wait_for(lambda: sc.get("/readyz").status == 200, what="ready")
                first = sc.get("/v1/runs?limit=500")
                self.assertEqual(first.body["runs"], [])
                self.assertEqual(sc.get("/v1/runs?limit=500").raw, first.raw)
                hammers = [threading.Thread(target=hammer) for _ in range(2)]
                for t in hammers:
                    t.start()
                h0 = counter(sc, HITS)
                r = emu.request("POST", f"/emulator/v1/sessions?generate={self.SESSIONS}", b"{}")
                self.assertLess(r.status, 300, r)
                want = self.SESSIONS * len(self.DEFS)
                checks, deadline = 0, time.time() + 120
                while True:
                    done = [x for x in emu.runs() if x.get("result")]
                    committed = {x["evaluation_run_id"]: x["result"]["status"] for x in done}
                    page = {x["id"]: x["status"] for x in sc.get("/v1/runs?limit=500").body["runs"]}
                    for rid, status in committed.items():
                        self.assertIn(rid, page, "a run the emulator has is missing")
                        self.assertEqual(page[rid], status)
                    asgs = {x["id"] for x in
                            sc.get("/v1/assignments?limit=500").body["assignments"]}
                    self.assertTrue({x["assignment_id"] for x in done} <= asgs)
                    checks += 1
                    if len(committed) >= want:
                        break
                    self.assertLess(time.time(), deadline, "the worker did not finish")
                    time.sleep(0.01)
                stop.set()
                for t in hammers:
                    t.join(30)
                self.assertEqual(errors, [])
                self.assertGreater(checks, 1)
                self.assertGreater(counter(sc, HITS), h0, "the cache was never used")
            finally:
                stop.set()
                sc.stop()
                sc.tmp.cleanup()
                emu.stop()


if __name__ == "__main__":
    unittest.main()
