"""What an operator reads from the admin API and /metrics when things fail:
every metric family present from the first scrape (real HELP text, build
info, process metrics), the eval_key label's cardinality cap, GET /v1/meta as
the one list of statuses and codes, a 400 for unknown query parameters, id
prefixes, sub-millisecond durations, timeouts as applied, lifetime counters,
"last error" covering failed runs, the log tail, and JSON without float noise.
Real processes over real sockets: the emulator and the sidecar."""

import json
import os
import re
import sqlite3
import tempfile
import threading
import time
import unittest
from http.server import ThreadingHTTPServer

from prometheus_client.parser import text_string_to_metric_families

from admin_harness import JsonHandler, Sidecar, SidecarCase, emulator, sample_transcript, write_json
from emulator_harness import catalog_revision

SESSIONS = 2
CAP = 100
# More distinct eval keys than the label cap. An assignment carries at most
# 100 definitions, so the local evaluator changes its four between the two
# sessions: 95 + 1 managed and 2 x 4 local keys. The managed "flaky" fails on
# one session (a Score above 1 raises ValueError); two kinds of timeouts.
DEFS = [{"eval_key": f"k{i:03d}", "eval_version": "1", "display_name": f"K{i}",
         "result_kind": "score", "labels": [], "condition_source": None,
         "evaluator_source": "EvalResult(score=Score(1.0))", "timeout_seconds": 5}
        for i in range(95)]
LOCALS = [[{"eval_key": f"{p}{i}", "eval_version": "1"} for i in range(4)] for p in "ab"]
DEFS.append({"eval_key": "flaky", "eval_version": "1", "display_name": "Flaky",
             "result_kind": "score", "labels": [], "condition_source": None,
             "evaluator_source": "EvalResult(score=Score(2.0 if session.event_count % 2 == 0 "
                                 "else 1.0))", "timeout_seconds": None})
# A float with noise in Python's %.17g rendering, in neither of ours.
NOISE = re.compile(rb"\d\.\d*0000000000\d|\d\.\d*9999999999\d")

FAMILIES = [
    "failproofai_sidecar_assignments_claimed_total", "failproofai_sidecar_runs_total",
    "failproofai_sidecar_conditions_total", "failproofai_sidecar_heartbeat_failures_total",
    "failproofai_sidecar_leases_lost_total", "failproofai_sidecar_protocol_errors_total",
    "failproofai_sidecar_result_submissions_total", "failproofai_sidecar_idempotent_replays_total",
    "failproofai_sidecar_registrations_total", "failproofai_sidecar_transcripts_too_large_total",
    "failproofai_sidecar_local_dispatches_total", "failproofai_sidecar_admin_requests_total",
    "failproofai_sidecar_admin_cache_hits_total", "failproofai_sidecar_admin_cache_misses_total",
    "failproofai_sidecar_active_assignments", "failproofai_sidecar_active_runs",
    "failproofai_sidecar_active_sandboxes", "failproofai_sidecar_outbox_depth",
    "failproofai_sidecar_local_evaluators", "failproofai_sidecar_local_definitions",
    "failproofai_sidecar_ready", "failproofai_sidecar_draining", "failproofai_sidecar_uptime_seconds",
    "failproofai_sidecar_build_info", "failproofai_sidecar_evaluation_duration_seconds",
    "failproofai_sidecar_sandbox_start_seconds",
    "failproofai_sidecar_server_request_duration_seconds",
    "failproofai_sidecar_admin_request_duration_seconds",
    "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
    "process_start_time_seconds",
]


def scrape(sc):
    r = sc.get("/metrics")
    assert r.status == 200, r
    return r.raw.decode(), {f.name: f for f in text_string_to_metric_families(r.raw.decode())}


class Judge(JsonHandler):
    """A local evaluator that scores every run 1.0."""

    def do_POST(self):
        run = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.reply({"score": 1.0, "summary": run["eval_key"]})


class FreshSidecarTest(SidecarCase):
    """A sidecar that has done nothing yet (its server is down)."""

    def test_every_family_present_at_start(self):
        text, fams = scrape(self.sc)
        for name in FAMILIES:
            # the parser names counters without their _total suffix
            fam = fams.get(name) or fams.get(name.removesuffix("_total"))
            self.assertIsNotNone(fam, f"{name} missing from a fresh /metrics")
            self.assertTrue(fam.samples, name)
            self.assertNotIn("failproofai-sidecar metric.", fam.documentation, name)
            self.assertGreater(len(fam.documentation), 15, name)
        self.assertIn("\nfailproofai_sidecar_leases_lost_total 0\n", text)
        self.assertIn("\nfailproofai_sidecar_protocol_errors_total 0\n", text)
        build = fams["failproofai_sidecar_build_info"].samples
        self.assertEqual(len(build), 1)
        self.assertEqual(build[0].value, 1)
        self.assertRegex(build[0].labels["version"], r"^\d+\.\d+\.\d+$")
        value = {s.name: s.value for f in fams.values() for s in f.samples if not s.labels}
        self.assertGreater(value["process_resident_memory_bytes"], 1 << 20)
        self.assertGreater(value["process_open_fds"], 2)
        self.assertGreaterEqual(value["process_cpu_seconds_total"], 0)
        self.assertLess(abs(value["process_start_time_seconds"] - time.time()), 3600)

    def test_unknown_query_parameters_are_400(self):
        for path, allowed in (("/v1/runs?since=1", "status, eval_key, assignment"),
                              ("/v1/assignments?agent=x", "status, limit, cursor"),
                              ("/v1/stats?minutes=15&eval=x", "minutes, eval_key, by"),
                              ("/v1/status?verbose=1", "none"),
                              ("/v1/meta?x=1", "none"),
                              ("/v1/logs?since=1", "level, after, limit")):
            r = self.sc.get(path)
            self.assertEqual((r.status, r.code), (400, "invalid_request"), (path, r))
            param = path.split("?")[1].split("&")[-1].split("=")[0]
            self.assertIn(f"'{param}'", r.message)
            self.assertIn(allowed, r.message, path)
        r = self.sc.get("/v1/runs?status=pending")
        self.assertEqual(r.status, 400, r)
        self.assertIn("planned", r.message)
        self.assertEqual(self.sc.get("/v1/runs?status=abandoned&limit=5").status, 200)

    def test_ambiguous_id_prefix_lists_the_matches(self):
        ids = ["deadbeef-0000-4000-8000-000000000001", "deadbeef-1111-4000-8000-000000000002"]
        with sqlite3.connect(self.sc.db, timeout=30) as db:  # rows written beside the sidecar
            for i, rid in enumerate(ids):
                db.execute("INSERT INTO runs(id, assignment_id, eval_key, eval_version,"
                           " execution_mode, status, created_at) VALUES (?, 'deadbeef-asg', 'k',"
                           " '1', 'python', 'planned', ?)", (rid, time.time() + i))
        r = self.sc.get("/v1/runs/deadbeef")
        self.assertEqual((r.status, r.code), (400, "ambiguous_id"), r)
        self.assertTrue(all(i in r.message for i in ids), r.message)
        r = self.sc.get("/v1/runs/deadbeef-1")
        self.assertEqual((r.status, r.body["id"]), (200, ids[1]), r)
        self.assertEqual(self.sc.get("/v1/runs/deadbee").status, 404)  # shorter than 8
        self.assertEqual(self.sc.get("/v1/runs/deadbeef-2").status, 404)

    def test_outbox_lists_what_waits(self):
        r = self.sc.get("/v1/outbox")
        self.assertEqual((r.status, r.body), (200, {"pending": [], "depth": 0}), r)
        now = time.time()
        with sqlite3.connect(self.sc.db, timeout=30) as db:  # rows written beside the sidecar
            for i in range(3):
                rid = f"0b0b0b0b-0000-4000-8000-00000000000{i}"
                db.execute("INSERT INTO runs(id, assignment_id, eval_key, eval_version, execution_mode,"
                           " status, created_at, submit_status, attempts, last_attempt_at,"
                           " submit_error_code, submit_error_message) VALUES (?, 'asg-o', 'k', '1',"
                           " 'python', 'succeeded', ?, 'pending', ?, ?, 'internal_error',"
                           " 'server answered 500')", (rid, now - 60 + i, i + 1, now - 5))
                db.execute("INSERT INTO outbox(submission_id, run_id, assignment_id, worker_id,"
                           " lease_generation, body, created_at, attempts, last_attempt_at)"
                           " VALUES (?, ?, 'asg-o', 'w', 1, x'7b7d', ?, ?, ?)",
                           (f"sub-{i}", rid, now - 60 + i, i + 1, now - 5))
        r = self.sc.get("/v1/outbox?limit=2")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["depth"], 3)
        first = r.body["pending"][0]
        self.assertEqual([p["submission_id"] for p in r.body["pending"]], ["sub-0", "sub-1"])
        self.assertGreaterEqual(first["age_seconds"], 59)
        self.assertEqual((first["attempts"], first["last_error_code"]), (1, "internal_error"))
        self.assertTrue(first["queued_at"].endswith("Z"))
        self.assertEqual(self.sc.get("/v1/outbox?limit=0").status, 400)
        self.assertEqual(self.sc.get("/v1/outbox?cursor=1").status, 400)

    def test_meta_is_the_source_of_enumerations(self):
        r = self.sc.get("/v1/meta")
        self.assertEqual(r.status, 200, r)
        m = r.body
        self.assertEqual(m["run_statuses"], ["planned", "running", "succeeded", "failed",
                                             "timed_out", "cancelled", "abandoned"])
        self.assertEqual(m["assignment_statuses"][0], "active")
        self.assertIn("lost", m["assignment_statuses"])
        self.assertEqual(m["execution_modes"], ["python", "local"])
        self.assertIn("evaluator_unavailable", m["run_error_codes"])
        self.assertEqual(m["chart_minutes"], [15, 60, 360, 1440])
        self.assertEqual(m["id_prefix_min"], 8)
        self.assertEqual(m["eval_key_label_cap"], CAP)
        self.assertIn("assignment", m["query_parameters"]["/v1/runs"])
        for status in m["run_statuses"]:  # every status it lists is a valid filter
            self.assertEqual(self.sc.get(f"/v1/runs?status={status}").status, 200, status)
        for status in m["assignment_statuses"]:
            self.assertEqual(self.sc.get(f"/v1/assignments?status={status}").status, 200, status)

    def test_log_tail_keeps_warnings_and_errors_redacted(self):
        self.sc.wait_for(lambda: self.sc.get("/v1/logs").body["entries"], timeout=30,
                         what="a warning or error in the log tail")
        r = self.sc.get("/v1/logs?level=warn&limit=200")
        self.assertEqual(r.status, 200, r)
        entries = r.body["entries"]
        self.assertTrue(all(e["entry"]["level"] in ("warn", "error") for e in entries), entries)
        self.assertTrue(any("registration failed" in e["entry"]["msg"] for e in entries), entries)
        seqs = [e["seq"] for e in entries]
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(r.body["last_seq"], seqs[-1])
        self.assertNotIn(b"emulator-token", r.raw)  # the server token never appears
        r = self.sc.get(f"/v1/logs?after={seqs[-1]}")
        self.assertEqual(r.body["entries"], [])
        r = self.sc.get("/v1/logs?level=error")
        self.assertTrue(all(e["entry"]["level"] == "error" for e in r.body["entries"]))
        for bad in ("level=info", "after=-1", "limit=0", "limit=201"):
            self.assertEqual(self.sc.get(f"/v1/logs?{bad}").status, 400, bad)


class FailingWorkTest(unittest.TestCase):
    """The emulator serves more eval keys than the label cap and a definition
    that fails on some sessions; the sidecar commits them all."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        path = write_json(cls.tmp.name, "defs.json", DEFS)
        cls.emu = emulator("--sessions", "0", "--definitions", path,
                           "--poll-seconds", "1", "--heartbeat-seconds", "2")
        cls.emu.start()
        cls.sc = Sidecar(cls.emu.base, db=os.path.join(cls.tmp.name, "sidecar.db"))
        cls.sc.start()
        cls.judge = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
        cls.judge.daemon_threads = True
        threading.Thread(target=cls.judge.serve_forever, daemon=True).start()
        for n, local in enumerate(LOCALS):
            cls.register(local)
            # 5 and 6 events: the flaky definition fails on one of them
            r = cls.emu.request("POST", "/emulator/v1/sessions", sample_transcript(n_events=5 + n))
            assert r.status in (200, 201), r
            want = (n + 1) * (len(DEFS) + len(local))
            cls.sc.wait_for(
                lambda: cls.emu.request("GET", "/emulator/v1/state").body["runs"]["committed"]
                >= want, timeout=240, what="every run committed")
        cls.sc.wait_for(lambda: cls.sc.get("/v1/assignments?status=active").body["assignments"] == []
                        and cls.sc.get("/v1/runs?status=running").body["runs"] == [],
                        timeout=60, what="work finished")
        cls.emu_runs = cls.emu.request("GET", "/emulator/v1/runs").body["runs"]
        cls.runs = []
        cursor = None
        while True:
            page = cls.sc.get("/v1/runs?limit=500" + (f"&cursor={cursor}" if cursor else "")).body
            cls.runs += page["runs"]
            cursor = page["next_cursor"]
            if not cursor:
                break

    @classmethod
    def register(cls, local):
        r = cls.sc.request("PUT", "/v1/evaluators/judge", body={
            "version": "1", "endpoint": f"http://127.0.0.1:{cls.judge.server_port}/run",
            "ttl_seconds": 600, "definitions": local})
        assert r.status in (200, 201), r
        want = catalog_revision([{"eval_key": d["eval_key"], "eval_version": "1",
                                  "display_name": d["eval_key"].capitalize(),
                                  "result_kind": "score", "labels": []} for d in local])
        cls.sc.wait_for(lambda: cls.sc.get("/v1/status").body.get("catalog_revision") == want
                        and cls.sc.get("/readyz").status == 200, what="local catalog registered")

    @classmethod
    def tearDownClass(cls):
        cls.sc.stop()
        cls.emu.stop()
        cls.judge.shutdown()
        cls.judge.server_close()
        cls.tmp.cleanup()

    def test_eval_key_label_is_capped(self):
        _, fams = scrape(self.sc)
        samples = fams["failproofai_sidecar_runs"].samples
        keys = {s.labels["eval_key"] for s in samples}
        self.assertIn("other", keys)
        self.assertEqual(len(keys - {"other"}), CAP)
        self.assertEqual(sum(s.value for s in samples), len(self.emu_runs))
        hist = {s.labels.get("eval_key") for s in
                fams["failproofai_sidecar_evaluation_duration_seconds"].samples
                if s.labels.get("mode") in ("python", "local") and "eval_key" in s.labels}
        self.assertLessEqual(len(hist), CAP + 1)
        self.assertIn("other", hist)

    def test_failures_are_visible(self):
        failed = [r for r in self.runs if r["status"] == "failed"]
        self.assertTrue(failed, "the flaky definition failed on some session")
        self.assertEqual({r["eval_key"] for r in failed}, {"flaky"})
        st = self.sc.get("/v1/status").body
        self.assertEqual(st["last_error"]["source"], "run")
        self.assertEqual(st["last_error"]["code"], "eval_error")
        self.assertEqual(st["last_error"]["eval_key"], "flaky")
        self.assertIn(st["last_error"]["run_id"], {r["id"] for r in failed})
        self.assertEqual(st["last_failed_run"]["run_id"], st["last_error"]["run_id"])
        for k in ("leases_lost", "protocol_errors", "result_retries", "heartbeat_failures"):
            self.assertEqual(st["counters"][k], 0, k)
        self.assertEqual(st["counters"]["assignments_claimed"], SESSIONS)
        self.assertEqual(st["counters"]["local_dispatches"], SESSIONS * 4)
        asg = self.sc.get("/v1/assignments?limit=50").body["assignments"]
        by = [a["runs"]["by_status"] for a in asg]
        self.assertEqual(sum(b.get("succeeded", 0) + b.get("failed", 0) for b in by),
                         len(self.runs))
        self.assertTrue(any(b.get("failed") for b in by), by)
        one = self.sc.get(f"/v1/assignments/{asg[0]['id']}").body
        self.assertEqual(len(one["submissions"]), len(DEFS) + 4)
        self.assertEqual({s["outcome"] for s in one["submissions"]}, {"committed"})

    def test_heartbeat_history_in_assignment_detail(self):
        # every heartbeat the emulator answered is in the history of its
        # assignment, with its outcome and the lease it granted
        sent = self.emu.request("GET", "/emulator/v1/state").body["requests_by_call"]["heartbeat"]
        self.assertGreaterEqual(sent, SESSIONS)
        asg = self.sc.get("/v1/assignments?limit=50").body["assignments"]
        details = [self.sc.get(f"/v1/assignments/{a['id']}").body for a in asg]
        self.assertEqual(sum(d["heartbeats"]["count"] for d in details), sent)
        for d in details:
            hb = d["heartbeats"]
            self.assertEqual(hb["kept"], 20)
            self.assertEqual(len(hb["recent"]), min(hb["count"], hb["kept"]))
            if hb["count"] == 0:  # its runs were done before the first beat
                self.assertEqual((hb["first_at"], hb["last_at"]), (None, None))
                continue
            self.assertEqual(hb["recent"][-1]["at"], hb["last_at"])
            self.assertLessEqual(hb["first_at"], hb["last_at"])
            if hb["count"] <= hb["kept"]:
                self.assertEqual(hb["recent"][0]["at"], hb["first_at"])
            for b in hb["recent"]:
                self.assertEqual((b["outcome"], b["error_code"], b["lease_generation"]),
                                 ("ok", None, d["lease_generation"]))
                self.assertTrue(b["lease_expires_at"].endswith("Z"), b)
                self.assertGreaterEqual(b["at"], d["claimed_at"])

    def test_durations_sub_millisecond_and_wire_integer(self):
        durations = [r["duration_ms"] for r in self.runs]
        self.assertTrue(all(isinstance(d, (int, float)) and d >= 0 for d in durations))
        self.assertTrue(any(d != int(d) for d in durations), durations[:10])
        for er in self.emu_runs:  # what went over the wire stays whole milliseconds
            self.assertIsInstance(er["result"]["duration_ms"], int)
        by_id = {r["id"]: r for r in self.runs}
        for er in self.emu_runs[:20]:
            self.assertLess(abs(by_id[er["evaluation_run_id"]]["duration_ms"]
                                - er["result"]["duration_ms"]), 1.0)

    def test_stats_by_mode_and_eval_key(self):
        r = self.sc.get("/v1/stats?minutes=15&by=mode")
        self.assertEqual(r.status, 200, r)
        minutes = r.body["minutes"]
        self.assertEqual(len(minutes), 15)
        counted = {m: sum(x["modes"][m]["count"] for x in minutes) for m in ("python", "local")}
        self.assertEqual(counted["python"], sum(x["execution_mode"] == "python" for x in self.runs))
        self.assertEqual(counted["local"], sum(x["execution_mode"] == "local" for x in self.runs))
        self.assertEqual(sum(x["count"] for x in minutes), len(self.runs))
        busy = [x for x in minutes if x["modes"]["local"]["count"]]
        self.assertTrue(busy and all(x["modes"]["local"]["p50_ms"] is not None for x in busy))
        r = self.sc.get("/v1/stats?minutes=15&eval_key=flaky")
        self.assertEqual(r.body["eval_key"], "flaky")
        self.assertEqual(sum(x["failed"] for x in r.body["minutes"]), 1)
        self.assertEqual(sum(x["count"] for x in r.body["minutes"]), SESSIONS)
        self.assertEqual(self.sc.get("/v1/stats?by=status").status, 400)

    def test_timeouts_as_applied(self):
        flaky = next(r for r in self.runs if r["eval_key"] == "flaky")
        other = next(r for r in self.runs if r["eval_key"] == "k000")
        self.assertEqual(self.sc.get(f"/v1/runs/{flaky['id']}").body["timeout_seconds"], 30)
        self.assertEqual(self.sc.get(f"/v1/runs/{other['id']}").body["timeout_seconds"], 5)

    def test_id_prefixes(self):
        run = self.runs[0]
        for n in (8, 20, len(run["id"])):
            prefix = run["id"][:n]
            if sum(r["id"].startswith(prefix) for r in self.runs) == 1:
                r = self.sc.get(f"/v1/runs/{prefix}")
                self.assertEqual((r.status, r.body["id"]), (200, run["id"]), prefix)
        self.assertEqual(self.sc.get(f"/v1/runs/{run['id'][:7]}").status, 404)
        aid = run["assignment_id"]
        mine = [x for x in self.runs if x["assignment_id"] == aid]
        r = self.sc.get(f"/v1/runs?assignment={aid[:8]}&limit=500")
        if sum(a.startswith(aid[:8]) for a in {x["assignment_id"] for x in self.runs}) == 1:
            self.assertEqual(len(r.body["runs"]), len(mine), r)
        else:
            self.assertEqual(r.code, "ambiguous_id")
        r = self.sc.get(f"/v1/runs?assignment={aid[:-4]}&limit=500")
        self.assertEqual(len(r.body["runs"]), len(mine))
        r = self.sc.get(f"/v1/assignments/{aid[:-4]}")
        self.assertEqual(r.body["id"], aid)

    def test_no_float_noise(self):
        run = self.runs[0]
        for path in ("/v1/status", "/v1/runs?limit=500", f"/v1/runs/{run['id']}",
                     f"/v1/assignments/{run['assignment_id']}", "/v1/meta", "/v1/stats?minutes=15",
                     "/v1/stats?minutes=15&by=mode",
                     "/v1/logs"):
            r = self.sc.get(path)
            self.assertEqual(r.status, 200, (path, r))
            self.assertIsNone(NOISE.search(r.raw), (path, NOISE.search(r.raw)))


if __name__ == "__main__":
    unittest.main()
