"""Admin API against a working sidecar: the emulator serves
sessions with managed definitions, the sidecar evaluates and commits them,
and the admin API's runs/assignments/status/metrics must agree with what the
emulator recorded; /metrics is parsed with python3-prometheus-client's
parser. Counters survive a restart, and a SIGKILL once they were saved."""

import os
import sqlite3
import tempfile
import unittest

from prometheus_client.parser import text_string_to_metric_families

from admin_harness import Sidecar, emulator, write_json

SESSIONS = 12
DEFS = [
    {"eval_key": "half", "eval_version": "1", "display_name": "Half", "result_kind": "score",
     "labels": ["demo"], "condition_source": None,
     "evaluator_source": "EvalResult(score=Score(0.5), summary='half')", "timeout_seconds": 10},
    {"eval_key": "events", "eval_version": "2", "display_name": "Events", "result_kind": "metric",
     "labels": [], "condition_source": "session.event_count > 0",
     "evaluator_source": "EvalResult(metrics={'events': Metric(session.event_count)})",
     "timeout_seconds": 10},
]


def metrics(sc):
    r = sc.get("/metrics")
    assert r.status == 200, r
    out = {}
    for fam in text_string_to_metric_families(r.raw.decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def total(m, name, **labels):
    return sum(v for lab, v in m.get(name, []) if all(lab.get(k) == x for k, x in labels.items()))


class AdminApiEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        path = write_json(cls.tmp.name, "defs.json", DEFS)
        cls.emu = emulator("--sessions", str(SESSIONS), "--definitions", path,
                           "--poll-seconds", "1", "--heartbeat-seconds", "2")
        cls.emu.start()
        cls.sc = Sidecar(cls.emu.base, db=os.path.join(cls.tmp.name, "sidecar.db"))
        cls.sc.start()
        want = SESSIONS * len(DEFS)
        cls.sc.wait_for(lambda: cls.emu.request("GET", "/emulator/v1/state").body["runs"]["committed"]
                        >= want, timeout=120, what="every run committed")
        cls.sc.wait_for(lambda: cls.sc.get("/v1/assignments?status=active").body["assignments"] == []
                        and cls.sc.get("/metrics").raw.count(b"outbox_depth 0") == 1,
                        timeout=60, what="outbox drained")
        cls.emu_runs = cls.emu.request("GET", "/emulator/v1/runs").body["runs"]
        cls.emu_state = cls.emu.request("GET", "/emulator/v1/state").body

    @classmethod
    def tearDownClass(cls):
        cls.sc.stop()
        cls.emu.stop()
        cls.tmp.cleanup()

    def test_ready_and_status(self):
        r = self.sc.get("/readyz")
        self.assertEqual(r.status, 200, r)
        self.assertIs(r.body["ready"], True)
        st = self.sc.get("/v1/status").body
        self.assertIs(st["ready"], True)
        self.assertTrue(st["catalog_revision"].startswith("sha256:"))
        self.assertIn("jail", st)

    def test_runs_pagination_matches_emulator(self):
        seen, cursor, pages = [], None, 0
        while True:
            q = "/v1/runs?limit=7" + (f"&cursor={cursor}" if cursor else "")
            r = self.sc.get(q)
            self.assertEqual(r.status, 200, r)
            self.assertLessEqual(len(r.body["runs"]), 7)
            seen += [x["id"] for x in r.body["runs"]]
            cursor = r.body["next_cursor"]
            pages += 1
            if not cursor:
                break
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(set(seen), {x["evaluation_run_id"] for x in self.emu_runs})
        self.assertIn(pages, (-(-len(seen) // 7), -(-len(seen) // 7) + 1))
        r = self.sc.get("/v1/runs?eval_key=half&limit=500")
        self.assertEqual({x["eval_key"] for x in r.body["runs"]}, {"half"})
        self.assertEqual(len(r.body["runs"]), SESSIONS)
        r = self.sc.get("/v1/runs?status=failed")
        self.assertEqual(r.body["runs"], [])
        aid = self.emu_runs[0]["assignment_id"]
        r = self.sc.get(f"/v1/runs?assignment={aid}")
        self.assertEqual(len(r.body["runs"]), len(DEFS))

    def test_run_detail_matches_committed_result(self):
        for er in self.emu_runs[:4]:
            r = self.sc.get(f"/v1/runs/{er['evaluation_run_id']}")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["status"], er["result"]["status"])
            self.assertEqual(r.body["results"], er["result"]["results"])
            sub = r.body["submission"]
            self.assertEqual(sub["submission_id"], er["submission_id"])
            self.assertGreaterEqual(len(sub["attempts"]), 1)

    def test_assignments(self):
        r = self.sc.get("/v1/assignments?limit=500")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.body["assignments"]), SESSIONS)
        a = r.body["assignments"][0]
        d = self.sc.get(f"/v1/assignments/{a['id']}")
        self.assertEqual(d.status, 200, d)
        self.assertEqual(len(d.body["run_list"]), len(DEFS))

    def test_metrics_match_emulator(self):
        m = metrics(self.sc)
        committed = self.emu_state["runs"]["committed"]
        self.assertEqual(total(m, "failproofai_sidecar_runs_total"), committed)
        self.assertEqual(total(m, "failproofai_sidecar_runs_total", status="succeeded"),
                         sum(r["result"]["status"] == "succeeded" for r in self.emu_runs))
        self.assertEqual(total(m, "failproofai_sidecar_runs_total", mode="python"), committed)
        self.assertEqual(total(m, "failproofai_sidecar_assignments_claimed_total"), SESSIONS)
        self.assertEqual(total(m, "failproofai_sidecar_result_submissions_total",
                               outcome="committed"), self.emu_state["commits"])
        self.assertEqual(total(m, "failproofai_sidecar_conditions_total", outcome="selected"),
                         committed)
        self.assertEqual(total(m, "failproofai_sidecar_active_assignments"), 0)
        self.assertEqual(total(m, "failproofai_sidecar_outbox_depth"), 0)
        self.assertEqual(total(m, "failproofai_sidecar_ready"), 1)
        self.assertEqual(total(m, "failproofai_sidecar_evaluation_duration_seconds_count",
                               mode="python"), committed)
        self.assertGreater(total(m, "failproofai_sidecar_server_request_duration_seconds_count",
                                 call="claim"), 0)

    def test_evaluate_with_a_recent_assignment(self):
        aid = self.emu_runs[0]["assignment_id"]
        r = self.sc.request("POST", "/v1/evaluate", timeout=90,
                            body={"kind": "raw", "source": "session.assignment_id",
                                  "assignment_id": aid})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["repr"], repr(aid))

    def test_y_counters_saved_while_running(self):
        """The periodic save, not only the one at exit: once the saved rows
        match /metrics, a SIGKILL loses none of these counters."""
        families = ("failproofai_sidecar_runs_total",
                    "failproofai_sidecar_result_submissions_total",
                    "failproofai_sidecar_assignments_claimed_total")
        before = metrics(self.sc)
        for name in families:
            self.assertGreater(total(before, name), 0, name)

        def saved(name):
            con = sqlite3.connect(f"file:{self.sc.db}?mode=ro", uri=True, timeout=10)
            try:
                row = con.execute("SELECT sum(value) FROM metrics WHERE name = ?", (name,)).fetchone()
            finally:
                con.close()
            return row[0] or 0

        self.sc.wait_for(lambda: all(saved(n) == total(before, n) for n in families),
                         timeout=60, what="the counters saved while running")
        self.sc.proc.kill()
        self.sc.proc.wait(10)
        self.sc.stop()
        self.sc.start()
        after = metrics(self.sc)
        for name in families:
            self.assertEqual(total(after, name), total(before, name), name)

    def test_z_counters_survive_restart(self):
        before = metrics(self.sc)
        self.assertEqual(self.sc.stop(), 0)
        self.sc.start()
        after = metrics(self.sc)
        for name in ("failproofai_sidecar_runs_total",
                     "failproofai_sidecar_result_submissions_total",
                     "failproofai_sidecar_assignments_claimed_total"):
            self.assertEqual(total(after, name), total(before, name), name)


if __name__ == "__main__":
    unittest.main()
