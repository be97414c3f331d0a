"""The admin API's backtest routes (api/backtests.c) against a real sidecar
with the transcript archive on, fed by the emulator: the request's
validation (every bad field gets a 400 naming it, and nothing starts), the
gate's rules on these routes (admin token, Host allowlist, same origin,
JSON only; the GETs open on loopback), a backtest's lifecycle over the
API (202, 429 backtest_busy while one runs, cancel, done with its summary,
its rows paginated and filtered), and GET /v1/catalog, the managed
definitions a backtest starts from. Without the archive every backtest
route answers 503 backtests_unavailable."""

import os
import sqlite3
import tempfile
import unittest

from admin_harness import Sidecar, dead_server, emulator, write_json

SESSIONS = 8
TOOLS = 'session.count("tool_use")'
DEFS = [
    {"eval_key": "tools", "eval_version": "1", "display_name": "Tools", "result_kind": "score",
     "labels": ["t"], "condition_source": None,
     "evaluator_source": f"EvalResult(score=Score(min(1.0, {TOOLS} / 10)))", "timeout_seconds": 10},
    {"eval_key": "steady", "eval_version": "1", "display_name": "Steady", "result_kind": "score",
     "labels": [], "condition_source": None,
     "evaluator_source": "EvalResult(score=Score(0.5), summary='steady')", "timeout_seconds": 10},
    # its condition selects no session: no run ever receives its source
    {"eval_key": "unseen", "eval_version": "3", "display_name": "Unseen", "result_kind": "assertion",
     "labels": [], "condition_source": 'session.count("no_such_event") > 0',
     "evaluator_source": "EvalResult(assertions={'unseen': Assertion(True)})", "timeout_seconds": 5},
]


def v2(key, source, **kw):
    d = dict(next(d for d in DEFS if d["eval_key"] == key))
    d.update(eval_version="2", evaluator_source=source, **kw)
    return d


# Each session's evaluation runs into its 1 s timeout: a backtest of these
# takes at least SESSIONS seconds on one sandbox slot, so it is still running
# when the test asks again.
SLOW = v2("tools", "EvalResult(score=Score(min(1.0, sum(range(10**12)))))", timeout_seconds=1)
CHANGED = v2("tools", f"EvalResult(score=Score(min(1.0, {TOOLS} / 5)))")


class BacktestApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        path = write_json(cls.tmp.name, "defs.json", DEFS)
        cls.emu = emulator("--sessions", str(SESSIONS), "--definitions", path, "--poll-seconds", "1")
        cls.emu.start()
        cls.sc = Sidecar(cls.emu.base, "--archive-max-mb", "16",
                         db=os.path.join(cls.tmp.name, "sidecar.db"))
        cls.sc.start()
        cls.sc.wait_for(lambda: (cls.sc.get("/v1/status").body.get("archive") or {}).get("entries")
                        == SESSIONS and cls.sc.get("/v1/status").body["archive"]["queued"] == 0
                        and all(a["status"] == "completed" for a in
                                cls.sc.get("/v1/assignments?limit=100").body["assignments"])
                        and len(cls.sc.get("/v1/assignments?limit=100").body["assignments"])
                        == SESSIONS, timeout=120, what="every session evaluated and archived")

    @classmethod
    def tearDownClass(cls):
        rc = cls.sc.stop()
        cls.emu.stop()
        cls.sc.tmp.cleanup()
        cls.tmp.cleanup()
        assert rc == 0, f"sidecar exit status {rc}"

    def tearDown(self):
        self.assertTrue(self.sc.alive(), "the sidecar died")

    def assertError(self, r, status, code, message=None):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.code, code, r)
        if message is not None:
            self.assertEqual(r.message, message, r)

    def ids(self):
        r = self.sc.get("/v1/backtests")
        self.assertEqual(r.status, 200, r)
        return [b["id"] for b in r.body["backtests"]]

    def wait_state(self, bid, states, timeout=120):
        return self.sc.wait_for(lambda: (lambda b: b if b["state"] in states else None)(
            self.sc.get(f"/v1/backtests/{bid}").body), timeout=timeout, what=f"{bid} {states}")

    # -- validation -----------------------------------------------------------
    def test_bad_bodies(self):
        before = self.ids()
        for body in ("{", "[]", '"x"', "null", '{"definitions": [], }', "{\"a\":1,\"a\":2}"):
            r = self.sc.request("POST", "/v1/backtests", body=body)
            self.assertEqual(r.status, 400, (body, r))
            self.assertIn(r.code, ("invalid_json", "invalid_request"), (body, r))
            self.assertTrue(r.message, r)
        self.assertEqual(self.ids(), before, "a bad body started a backtest")

    def test_bad_fields_are_named(self):
        d = DEFS[0]
        cases = [
            ({"definitions": [d], "baseline_defs": []},
             "unknown field 'baseline_defs' (allowed: definitions, baseline, since, limit)"),
            ({}, "definitions must be a non-empty array of managed definitions"),
            ({"definitions": []}, "definitions must be a non-empty array of managed definitions"),
            ({"definitions": d}, "definitions must be a non-empty array of managed definitions"),
            ({"definitions": [1]}, "definitions[0]: must be an object"),
            ({"definitions": [dict(d, evaluator_src="1")]},
             "definitions[0] (tools): unknown field 'evaluator_src' (allowed: eval_key, eval_version,"
             " display_name, result_kind, labels, condition_source, evaluator_source,"
             " timeout_seconds)"),
            ({"definitions": [{"eval_key": "k"}]},
             "definitions[0] (k): evaluator_source must be a string"),
            ({"definitions": [dict(d, eval_key="")]},
             "definitions[0]: eval_key must be a string of 1 to 128 bytes"),
            ({"definitions": [dict(d, eval_key="k" * 129)]},
             "definitions[0]: eval_key must be a string of 1 to 128 bytes"),
            ({"definitions": [dict(d, result_kind="grade")]},
             "definitions[0] (tools): result_kind must be \"score\", \"metric\" or \"assertion\""),
            ({"definitions": [dict(d, timeout_seconds=0)]},
             "definitions[0] (tools): timeout_seconds must be a positive number or null"),
            ({"definitions": [dict(d, timeout_seconds="10")]},
             "definitions[0] (tools): timeout_seconds must be a positive number or null"),
            ({"definitions": [dict(d, labels=[1])]},
             "definitions[0] (tools): labels must be an array of strings"),
            ({"definitions": [dict(d, condition_source=1)]},
             "definitions[0] (tools): condition_source must be a string or null"),
            ({"definitions": [dict(d, eval_version=2)]},
             "definitions[0] (tools): eval_version must be a string"),
            ({"definitions": [DEFS[1], d, dict(d)]},
             "definitions[2] (tools): its eval_key is given twice (one definition per eval_key)"),
            ({"definitions": [d], "baseline": "staging"},
             "baseline must be \"production\", an array of definitions or null"),
            ({"definitions": [d], "baseline": [dict(d, result_kind="grade")]},
             "baseline[0] (tools): result_kind must be \"score\", \"metric\" or \"assertion\""),
            ({"definitions": [d], "since": "yesterday"},
             "since must be an RFC 3339 time such as 2026-08-28T12:00:00Z"),
            ({"definitions": [d], "since": 1700000000},
             "since must be an RFC 3339 time such as 2026-08-28T12:00:00Z"),
        ]
        for bad in (0, -1, 1.5, "10", True, 1000001):
            cases.append(({"definitions": [d], "limit": bad}, "limit must be an integer from 1 to 1000000"))
        before = self.ids()
        for body, message in cases:
            with self.subTest(body=str(body)[:120]):
                self.assertError(self.sc.request("POST", "/v1/backtests", body=body), 400,
                                 "invalid_request", message)
        self.assertEqual(self.ids(), before, "a refused request started a backtest")

    def test_bad_queries(self):
        r = self.sc.get("/v1/backtests/nope")
        self.assertError(r, 404, "not_found")
        self.assertIn("nope", r.message)
        self.assertError(self.sc.get("/v1/backtests/nope/results"), 404, "not_found")
        self.assertError(self.sc.request("DELETE", "/v1/backtests/nope", body={}), 404, "not_found")
        for limit in (0, 501):
            self.assertError(self.sc.get(f"/v1/backtests/nope/results?limit={limit}"), 400,
                             "invalid_request", "limit must be an integer from 1 to 500")
        self.assertError(self.sc.get("/v1/backtests/nope/results?changed=maybe"), 400,
                         "invalid_request", "changed must be true or false")
        self.assertError(self.sc.get("/v1/backtests/nope/results?cursor=x1"), 400,
                         "invalid_request", "cursor is not one this server returned")

    # -- the gate -------------------------------------------------------------
    def test_gate(self):
        body = {"definitions": [CHANGED]}
        before = self.ids()
        self.assertEqual(self.sc.request("POST", "/v1/backtests", body=body, auth=None).status, 401)
        r = self.sc.request("POST", "/v1/backtests", body=body, auth=None,
                            headers={"Authorization": "Bearer wrong"})
        self.assertEqual(r.status, 401, r)
        self.assertEqual(self.sc.request("POST", "/v1/backtests", body=body,
                                         auth="registration").status, 401)
        self.assertError(self.sc.request("POST", "/v1/backtests", body=body,
                                         headers={"Origin": "http://evil.example.com"}),
                         403, "foreign_origin")
        self.assertError(self.sc.request("POST", "/v1/backtests", body=body,
                                         headers={"Sec-Fetch-Site": "cross-site"}),
                         403, "foreign_origin")
        self.assertError(self.sc.request("POST", "/v1/backtests", body=body, json_ct=False,
                                         headers={"Content-Type": "text/plain"}),
                         415, "unsupported_media_type")
        self.assertError(self.sc.request("POST", "/v1/backtests", body=body,
                                         headers={"Host": "evil.example.com"}),
                         421, "host_not_allowed")
        self.assertEqual(self.ids(), before, "a refused request started a backtest")
        # the reads are open on loopback, but not to a foreign Host
        self.assertEqual(self.sc.get("/v1/backtests").status, 200)
        self.assertError(self.sc.get("/v1/backtests", headers={"Host": "evil.example.com"}), 421,
                         "host_not_allowed")
        self.assertEqual(self.sc.request("DELETE", "/v1/backtests/nope", body={},
                                         auth=None).status, 401)

    # -- the catalog ----------------------------------------------------------
    def test_catalog(self):
        r = self.sc.get("/v1/catalog", auth=None)  # open on loopback
        self.assertEqual(r.status, 200, r)
        cat = r.body
        self.assertEqual(cat["assignments_scanned"], SESSIONS)
        by = {d["eval_key"]: d for d in cat["definitions"]}
        self.assertEqual([d["eval_key"] for d in cat["definitions"]], sorted(d["eval_key"] for d in DEFS))
        asg = {a["id"]: a for a in self.sc.get("/v1/assignments?limit=100").body["assignments"]}
        newest = max(asg.values(), key=lambda a: a["claimed_at"])
        for d in DEFS[:2]:
            got = by[d["eval_key"]]
            # exactly the definition the emulator serves, its source from a stored run's plan
            self.assertEqual(got["definition"], d)
            self.assertEqual(got["eval_version"], d["eval_version"])
            self.assertTrue(got["source_checksum"].startswith("sha256:"), got)
            self.assertEqual(got["assignment_id"], newest["id"])
            run = self.sc.get(f"/v1/runs/{got['source_run_id']}").body
            self.assertEqual((run["eval_key"], run["eval_version"], run["execution_mode"]),
                             (d["eval_key"], d["eval_version"], "python"))
            self.assertEqual(run["descriptor"]["evaluator_source"], d["evaluator_source"])
        # no run ever received the source of a definition its condition never selected
        self.assertIsNone(by["unseen"]["definition"])
        self.assertIsNone(by["unseen"]["source_run_id"])
        self.assertEqual(by["unseen"]["eval_version"], "3")
        # a narrower scan, and bad queries named
        self.assertEqual(self.sc.get("/v1/catalog?assignments=1").body["assignments_scanned"], 1)
        self.assertError(self.sc.get("/v1/catalog?assignments=0"), 400, "invalid_request",
                         "assignments must be an integer from 1 to 500")
        self.assertError(self.sc.get("/v1/catalog?limit=5"), 400, "invalid_request",
                         "unknown query parameter 'limit' (allowed: assignments)")
        self.assertEqual(self.sc.get("/v1/meta").body["query_parameters"]["/v1/catalog"],
                         ["assignments"])

    def test_catalog_definitions_start_a_backtest(self):
        self.sc.wait_for(lambda: all(self.sc.get(f"/v1/backtests/{i}").body["state"]
                                     not in ("queued", "running") for i in self.ids()),
                         timeout=120, what="no backtest running")
        defs = [d["definition"] for d in self.sc.get("/v1/catalog").body["definitions"]
                if d["definition"]]
        r = self.sc.request("POST", "/v1/backtests", body={"definitions": defs})
        self.assertEqual(r.status, 202, r)
        doc = self.wait_state(r.body["id"], ("done",))
        # the catalog's own versions against production: nothing changed
        self.assertEqual({k["eval_key"]: k["changed"] for k in doc["summary"]["eval_keys"]},
                         {"steady": 0, "tools": 0})

    # -- lifecycle ------------------------------------------------------------
    def test_lifecycle(self):
        r = self.sc.request("POST", "/v1/backtests", body={"definitions": [SLOW]})
        self.assertEqual(r.status, 202, r)
        slow = r.body["id"]
        self.assertIn(r.body["state"], ("queued", "running"))
        self.assertEqual(r.body["progress"]["total"], SESSIONS)
        self.assertIsNone(r.body["summary"])
        self.assertEqual(r.body["baseline"], "production")
        # one at a time
        r = self.sc.request("POST", "/v1/backtests", body={"definitions": [CHANGED]})
        self.assertError(r, 429, "backtest_busy")
        self.assertIn(slow, r.message)
        self.assertEqual(r.headers.get("retry-after"), "5")
        # the GETs need no token
        self.assertEqual(self.sc.get(f"/v1/backtests/{slow}", auth=None).status, 200)
        # cancel: refused without the token, then done with it
        self.assertEqual(self.sc.request("DELETE", f"/v1/backtests/{slow}", body={},
                                         auth=None).status, 401)
        r = self.sc.request("DELETE", f"/v1/backtests/{slow}", body={})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["id"], slow)
        doc = self.wait_state(slow, ("cancelled",))
        self.assertIsNone(doc["summary"])
        self.assertLess(doc["progress"]["done"], SESSIONS)

        # now another starts, and finishes
        r = self.sc.request("POST", "/v1/backtests",
                            body={"definitions": [CHANGED, DEFS[1]], "limit": SESSIONS})
        self.assertEqual(r.status, 202, r)
        bid = r.body["id"]
        doc = self.wait_state(bid, ("done",))
        self.assertEqual(doc["progress"], {"done": SESSIONS, "total": SESSIONS})
        s = doc["summary"]
        self.assertEqual(s["sessions"], SESSIONS)
        self.assertEqual(s["input_errors"], [])
        by = {k["eval_key"]: k for k in s["eval_keys"]}
        self.assertEqual(sorted(by), ["steady", "tools"])
        self.assertEqual(by["steady"]["changed"], 0)
        self.assertEqual(by["steady"]["no_baseline"], 0)
        self.assertGreater(by["tools"]["changed"], 0)
        self.assertEqual([d["eval_key"] for d in doc["definitions"]], ["tools", "steady"])
        # cancelling a finished backtest changes nothing
        r = self.sc.request("DELETE", f"/v1/backtests/{bid}", body={})
        self.assertEqual((r.status, r.body["state"]), (200, "done"), r)
        # newest first
        self.assertEqual(self.ids()[:2], [bid, slow])

        # rows: paginated by the cursor, every (session, eval_key) once
        rows, cursor, pages = [], None, 0
        while True:
            q = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
            p = self.sc.get(f"/v1/backtests/{bid}/results{q}").body
            self.assertEqual(p["total"], SESSIONS * 2)
            self.assertLessEqual(len(p["rows"]), 3)
            rows += p["rows"]
            pages += 1
            cursor = p["next_cursor"]
            if cursor is None:
                break
        self.assertEqual(pages, (SESSIONS * 2 + 2) // 3)
        self.assertEqual(len({(x["session_id"], x["eval_key"]) for x in rows}), SESSIONS * 2)
        asg = {a["id"]: a["session_id"]
               for a in self.sc.get("/v1/assignments?limit=100").body["assignments"]}
        for x in rows:
            self.assertEqual(asg[x["assignment_id"]], x["session_id"], x)
            b, c = (x[side]["results"][0]["numeric_value"] for side in ("baseline", "candidate"))
            self.assertEqual(x["changed"], b != c, x)
            self.assertAlmostEqual(x["deltas"][x["eval_key"]], c - b, places=9)
        # the filters
        ch = self.sc.get(f"/v1/backtests/{bid}/results?changed=true&limit=500").body
        self.assertEqual(ch["total"], by["tools"]["changed"])
        self.assertEqual(sorted(x["session_id"] for x in ch["rows"]),
                         sorted(x["session_id"] for x in rows if x["changed"]))
        st = self.sc.get(f"/v1/backtests/{bid}/results?eval_key=steady&limit=500").body
        self.assertEqual(st["total"], SESSIONS)
        self.assertTrue(all(x["eval_key"] == "steady" and not x["changed"] for x in st["rows"]))
        none = self.sc.get(f"/v1/backtests/{bid}/results?eval_key=steady&changed=true").body
        self.assertEqual((none["total"], none["rows"], none["next_cursor"]), (0, [], None))

    def test_baselines(self):
        self.sc.wait_for(lambda: all(self.sc.get(f"/v1/backtests/{i}").body["state"]
                                     not in ("queued", "running") for i in self.ids()),
                         timeout=120, what="no backtest running")
        # against definitions: the unchanged one compares equal, the changed one differs
        r = self.sc.request("POST", "/v1/backtests",
                            body={"definitions": [CHANGED, DEFS[1]], "baseline": DEFS})
        self.assertEqual(r.status, 202, r)
        doc = self.wait_state(r.body["id"], ("done",))
        by = {k["eval_key"]: k for k in doc["summary"]["eval_keys"]}
        self.assertEqual(by["steady"]["changed"], 0)
        self.assertGreater(by["tools"]["changed"], 0)
        # none: every row has a null baseline
        r = self.sc.request("POST", "/v1/backtests", body={"definitions": [DEFS[1]], "baseline": None})
        self.assertEqual(r.status, 202, r)
        doc = self.wait_state(r.body["id"], ("done",))
        k = doc["summary"]["eval_keys"][0]
        self.assertEqual((k["no_baseline"], k["changed"]), (SESSIONS, 0))
        # a source that does not compile is reported, and the backtest still finishes
        r = self.sc.request("POST", "/v1/backtests",
                            body={"definitions": [v2("tools", "EvalResult(score=Score(")], "limit": 2})
        self.assertEqual(r.status, 202, r)
        doc = self.wait_state(r.body["id"], ("done",))
        self.assertEqual(doc["progress"]["total"], 2)
        k = doc["summary"]["eval_keys"][0]
        self.assertEqual(k["errors"]["candidate"], 2)
        self.assertEqual(k["top_errors"]["candidate"], [{"error_type": "compile_error", "count": 2}])


class BacktestPersistenceTest(unittest.TestCase):
    """Finished backtests are saved in the state database within a second
    (a kill -9 after that loses nothing) and served from it after a
    restart: the same document, rows and list; a backtest still running at
    a shutdown is saved as cancelled."""

    def saved_ids(self, db):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            return {r[0]: r[1] for r in con.execute("SELECT id, state FROM backtests")}
        finally:
            con.close()

    def all_rows(self, sc, bid):
        rows, cursor = [], None
        while True:
            p = sc.get(f"/v1/backtests/{bid}/results?limit=5" + (f"&cursor={cursor}" if cursor else "")).body
            rows += p["rows"]
            cursor = p["next_cursor"]
            if cursor is None:
                return rows

    def test_survives_restart(self):
        with tempfile.TemporaryDirectory() as tmp:
            defs = write_json(tmp, "defs.json", DEFS)
            db = os.path.join(tmp, "sidecar.db")
            with emulator("--sessions", str(SESSIONS), "--definitions", defs, "--poll-seconds", "1") as emu:
                sc = Sidecar(emu.base, "--archive-max-mb", "16", db=db)
                sc.start()
                try:
                    sc.wait_for(lambda: (sc.get("/v1/status").body.get("archive") or {}).get("entries")
                                == SESSIONS and sc.get("/v1/status").body["archive"]["queued"] == 0,
                                timeout=120, what="every session archived")
                    r = sc.request("POST", "/v1/backtests", body={"definitions": [CHANGED, DEFS[1]]})
                    self.assertEqual(r.status, 202, r)
                    bid = r.body["id"]
                    doc = sc.wait_for(lambda: (lambda b: b if b["state"] == "done" else None)(
                        sc.get(f"/v1/backtests/{bid}").body), timeout=120, what="done")
                    rows = self.all_rows(sc, bid)
                    self.assertEqual(len(rows), SESSIONS * 2)
                    listed = sc.get("/v1/backtests").body["backtests"]
                    sc.wait_for(lambda: self.saved_ids(db).get(bid) == "done", timeout=30,
                                what="the backtest saved in the store")
                    sc.proc.kill()  # no shutdown path: what was saved is all there is
                    sc.stop()

                    sc.start()
                    self.assertEqual(sc.get(f"/v1/backtests/{bid}").body, doc)
                    self.assertEqual(self.all_rows(sc, bid), rows)
                    ch = sc.get(f"/v1/backtests/{bid}/results?changed=true&eval_key=tools&limit=500").body
                    self.assertEqual(ch["rows"], [x for x in rows if x["changed"] and x["eval_key"] == "tools"])
                    self.assertEqual(sc.get("/v1/backtests").body["backtests"], listed)
                    r = sc.request("DELETE", f"/v1/backtests/{bid}", body={})
                    self.assertEqual((r.status, r.body["state"]), (200, "done"), r)

                    # one running at a shutdown is saved as cancelled
                    r = sc.request("POST", "/v1/backtests", body={"definitions": [SLOW]})
                    self.assertEqual(r.status, 202, r)
                    slow = r.body["id"]
                    self.assertEqual(sc.stop(), 0)
                    self.assertEqual(self.saved_ids(db).get(slow), "cancelled")
                    sc.start()
                    got = sc.get(f"/v1/backtests/{slow}").body
                    self.assertEqual((got["state"], got["summary"]), ("cancelled", None))
                    self.assertEqual([b["id"] for b in sc.get("/v1/backtests").body["backtests"]][:2],
                                     [slow, bid])
                    # and another can start
                    r = sc.request("POST", "/v1/backtests", body={"definitions": [DEFS[1]], "limit": 1})
                    self.assertEqual(r.status, 202, r)
                finally:
                    sc.stop()
                    sc.tmp.cleanup()


class BacktestFailedTest(unittest.TestCase):
    """A backtest whose run cannot go on ends "failed" with the reason in its
    document and no summary, is saved as such and served the same after a
    restart, and the next one runs: the archive removed under a running
    sidecar, then a file that is not a database in its place."""

    ARCHIVE_FILES = ("", "-wal", "-shm")

    def move_archive(self, archive, suffix):
        # the daemon's archive writer keeps the files it has open; a new
        # reader finds what is at the path
        for ext in self.ARCHIVE_FILES:
            if os.path.exists(archive + ext):
                os.rename(archive + ext, archive + ext + suffix)

    def restore_archive(self, archive, suffix):
        for ext in self.ARCHIVE_FILES:
            if os.path.exists(archive + ext + suffix):
                os.replace(archive + ext + suffix, archive + ext)

    def saved(self, db, bid):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            return con.execute("SELECT state, error, summary_json FROM backtests WHERE id = ?",
                               (bid,)).fetchone()
        finally:
            con.close()

    def failed(self, sc):
        r = sc.request("POST", "/v1/backtests", body={"definitions": [CHANGED]})
        self.assertEqual(r.status, 202, r)
        bid = r.body["id"]
        doc = sc.wait_for(lambda: (lambda b: b if b["state"] not in ("queued", "running") else None)(
            sc.get(f"/v1/backtests/{bid}").body), timeout=60, what="the backtest ended")
        self.assertEqual(doc["state"], "failed", doc)
        self.assertIsNone(doc["summary"])
        self.assertEqual(doc["progress"], {"done": 0, "total": 0})
        return doc

    def test_unreadable_archive_fails_the_backtest(self):
        with tempfile.TemporaryDirectory() as tmp:
            defs = write_json(tmp, "defs.json", DEFS)
            db = os.path.join(tmp, "sidecar.db")
            archive = db + ".archive"
            with emulator("--sessions", "3", "--definitions", defs, "--poll-seconds", "1") as emu:
                sc = Sidecar(emu.base, "--archive-max-mb", "16", db=db)
                sc.start()
                try:
                    sc.wait_for(lambda: (sc.get("/v1/status").body.get("archive") or {}).get("entries")
                                == 3 and sc.get("/v1/status").body["archive"]["queued"] == 0,
                                timeout=120, what="every session archived")
                    # removed
                    self.move_archive(archive, ".away")
                    gone = self.failed(sc)
                    self.assertEqual(gone["error"], f"the transcript archive {archive} cannot be read:"
                                     f" store: archive: open: {archive} does not exist")
                    # not a database
                    with open(archive, "wb") as f:
                        f.write(b"this is not an SQLite database\n" * 200)
                    bad = self.failed(sc)
                    self.assertEqual(bad["error"], f"the transcript archive {archive} cannot be read:"
                                     " store: archive: read entries: file is not a database")
                    os.unlink(archive)
                    self.restore_archive(archive, ".away")
                    # both saved as failed, with their reason
                    for doc in (gone, bad):
                        sc.wait_for(lambda: self.saved(db, doc["id"]) is not None, timeout=30,
                                    what="the failed backtest saved")
                        self.assertEqual(self.saved(db, doc["id"]), ("failed", doc["error"], None))
                    listed = {b["id"]: b for b in sc.get("/v1/backtests").body["backtests"]}
                    self.assertEqual((listed[bad["id"]]["state"], listed[bad["id"]]["error"]),
                                     ("failed", bad["error"]))
                    # the next one runs
                    r = sc.request("POST", "/v1/backtests", body={"definitions": [CHANGED]})
                    self.assertEqual(r.status, 202, r)
                    ok = sc.wait_for(lambda: (lambda b: b if b["state"] == "done" else None)(
                        sc.get(f"/v1/backtests/{r.body['id']}").body), timeout=120, what="done")
                    self.assertEqual((ok["summary"]["sessions"], ok["error"]), (3, None))
                    # the same after a restart
                    self.assertEqual(sc.stop(), 0)
                    sc.start()
                    for doc in (gone, bad):
                        self.assertEqual(sc.get(f"/v1/backtests/{doc['id']}").body, doc)
                finally:
                    sc.stop()
                    sc.tmp.cleanup()


class BacktestApiWithoutArchiveTest(unittest.TestCase):
    def test_every_route_says_why(self):
        with Sidecar(dead_server()) as sc:
            for method, path in (("POST", "/v1/backtests"), ("GET", "/v1/backtests"),
                                 ("GET", "/v1/backtests/x"), ("GET", "/v1/backtests/x/results"),
                                 ("DELETE", "/v1/backtests/x")):
                r = sc.request(method, path, body={"definitions": DEFS} if method == "POST" else
                               ({} if method == "DELETE" else None))
                self.assertEqual(r.status, 503, (method, path, r))
                self.assertEqual(r.code, "backtests_unavailable")
                self.assertEqual(r.message,
                                 "backtests need the transcript archive (run --archive-max-mb N)")
            self.assertIsNone(sc.get("/v1/status").body["archive"])


if __name__ == "__main__":
    unittest.main()
