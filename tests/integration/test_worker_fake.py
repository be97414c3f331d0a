"""Worker loop against a scripted fake Evaluator v2 server over loopback:
the happy path, protocol headers, conditions, plans,
checksum fail-closed, transcript_too_large, lease loss, catalog_mismatch,
and a hostile server (each answer a clear logged error, the daemon keeps
running and then completes normal work)."""

import json
import signal
import time
import unittest

from fps_fakecloud import FakeCloud, managed
from fps_sidecar import Sidecar

SCORE = "EvalResult(score=Score(1.0))"
TOOLS = ("EvalResult(score=Score(min(1.0, len(session.events_of_type('tool_use')) / 4)),"
         " metrics={'tool_calls': Metric(session.count('tool_use'))})")


class Base(unittest.TestCase):
    def setUp(self):
        self.cloud = None
        self.sidecar = None

    def tearDown(self):
        if self.sidecar:
            self.sidecar.stop(signal.SIGKILL)
        if self.cloud:
            self.cloud.stop()

    def start(self, defs, sessions, **kw):
        extra = kw.pop("extra", ())
        self.cloud = FakeCloud(defs, sessions=sessions, **kw).start()
        self.sidecar = Sidecar(self.cloud.url, extra=extra)
        return self.cloud, self.sidecar

    def all_done(self, c):
        return all(a["status"] == "done" for a in c.assignments.values())


class HappyPath(Base):
    def test_sessions_times_definitions_committed_once(self):
        defs = [managed("always_one", SCORE), managed("tool_rate", TOOLS),
                managed("flag", "EvalResult(assertions={'flag': True})",
                        result_kind="assertion")]
        cloud, sc = self.start(defs, sessions=12)
        self.assertTrue(cloud.wait(self.all_done, 30), sc.raw_log()[-3000:])
        runs = cloud.committed_runs()
        self.assertEqual(len(runs), 36)
        self.assertEqual(cloud.commits, 36)
        self.assertEqual(cloud.conflicts, 0)
        for r in runs:
            res = r["result"]
            self.assertEqual(res["status"], "succeeded", res)
            key = r["def"]["eval_key"]
            prim = [i for i in res["results"] if i["result_key"] == key]
            self.assertEqual(len(prim), 1, res)
            if key == "always_one":
                self.assertEqual(prim[0]["numeric_value"], 1.0)
            if key == "tool_rate":
                self.assertAlmostEqual(prim[0]["numeric_value"], 0.75)
        for r in runs:
            res = r["result"]
            self.assertEqual(res["protocol_version"], "2")
            self.assertEqual(res["result_schema_version"], "2")
            self.assertRegex(res["started_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
            self.assertIn(res["status"], ("succeeded", "failed", "timed_out"))
        # Protocol headers on every request.
        ids = set()
        for method, path, h in cloud.requests:
            self.assertEqual(h.get("Authorization"), "Bearer test-token-123")
            self.assertEqual(h.get("Accept"), "application/json")
            self.assertTrue(h.get("User-Agent", "").startswith("failproofai-sidecar/"))
            self.assertRegex(h.get("X-Request-Id", ""), r"^[0-9a-f]{32}$")
            ids.add(h["X-Request-Id"])
            if path.endswith("/transcript") or path.endswith("/definitions"):
                self.assertTrue(h.get("X-FailproofAI-Worker-Id"))
                self.assertRegex(h.get("X-FailproofAI-Lease-Generation", ""), r"^[1-9]\d*$")
        self.assertGreater(len(ids), 36)
        # The token never reaches the log.
        self.assertNotIn("test-token-123", sc.raw_log())
        # Register carried the empty catalog's revision.
        self.assertEqual(cloud.registers[0]["catalog_revision"],
                         "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945")
        self.assertEqual(sc.stop(), 0)

    def test_drain_on_sigterm_exits_zero(self):
        cloud, sc = self.start([managed("always_one", SCORE)], sessions=3)
        self.assertTrue(cloud.wait(self.all_done, 30))
        self.assertEqual(sc.stop(signal.SIGTERM), 0)
        self.assertTrue(any(l.get("msg", "").startswith("drained") for l in sc.lines()))


class ResultBytes(Base):
    def test_result_is_canonical_json_with_shortest_floats(self):
        # The body is serialized once, as canonical JSON: sorted keys, no
        # spaces, floats as CPython's repr (0.1 stays 0.1, not
        # 0.10000000000000001), and retries resend the same bytes.
        src = ("EvalResult(score=Score(0.1), metrics={'third': Metric(1 / 3), "
               "'big': Metric(1e22)}, summary='caf\u00e9 \u2713')")
        cloud, sc = self.start([managed("tenth", src)], sessions=1)
        self.assertTrue(cloud.wait(self.all_done, 30), sc.raw_log()[-3000:])
        body = cloud.result_bodies[0]
        obj = json.loads(body)
        self.assertEqual(obj["status"], "succeeded", obj)
        canon = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self.assertEqual(body.decode("utf-8"), canon)
        self.assertIn(b'"numeric_value":0.1,', body)
        self.assertIn(b'"numeric_value":0.3333333333333333,', body)
        self.assertIn(b'"numeric_value":1e+22,', body)
        self.assertIn('"summary":"café ✓"'.encode(), body)


class Conditions(Base):
    def test_disabled_and_condition_outcomes(self):
        defs = [managed("off", SCORE), managed("on", SCORE),
                managed("cond_false", SCORE, condition="False"),
                managed("cond_reason", SCORE,
                        condition="ConditionResult(False, 'no_retrieval_events')"),
                managed("cond_error", SCORE, condition="1/0 > 0"),
                managed("cond_true", SCORE, condition="session.count('tool_use') > 0")]
        cloud, sc = self.start(defs, sessions=2, disabled=["off"])
        self.assertTrue(cloud.wait(lambda c: len(c.plans) >= 2, 30), sc.raw_log()[-3000:])
        for _, plan in cloud.plans:
            skipped = {s["eval_key"]: s["reason_code"] for s in plan["skipped"]}
            selected = {s["eval_key"] for s in plan["selected"]}
            self.assertEqual(skipped["off"], "disabled_by_server")
            self.assertIn("on", selected)
            self.assertEqual(skipped["cond_error"], "condition_error")
            self.assertEqual(skipped["cond_false"], "condition_false")
            self.assertEqual(skipped["cond_reason"], "no_retrieval_events")
            self.assertIn("cond_true", selected)
            self.assertEqual(len(skipped) + len(selected), 6)
        self.assertTrue(cloud.wait(self.all_done, 30))

    def test_lease_exhausted(self):
        # A 5 s lease leaves nothing for conditions after the 5 s margin:
        # a definition with a condition does not fit, one without is selected.
        slow = "session.count('tool_use') > 0"
        defs = [managed("slow", SCORE, condition=slow, timeout=30), managed("plain", SCORE)]
        cloud, sc = self.start(defs, sessions=1, lease=5, heartbeat=2)
        self.assertTrue(cloud.wait(lambda c: len(c.plans) >= 1, 30), sc.raw_log()[-3000:])
        plan = cloud.plans[0][1]
        skipped = {s["eval_key"]: s["reason_code"] for s in plan["skipped"]}
        self.assertEqual(skipped.get("slow"), "lease_exhausted")
        self.assertEqual([s["eval_key"] for s in plan["selected"]], ["plain"])


class FailClosed(Base):
    def test_checksum_mismatch_runs_nothing(self):
        defs = [managed("good", SCORE), managed("tampered", SCORE, bad_checksum=True)]
        cloud, sc = self.start(defs, sessions=2)
        self.assertTrue(sc.wait_log(lambda l: l.get("code") == "source_checksum_mismatch"),
                        sc.raw_log()[-3000:])
        time.sleep(0.5)
        self.assertEqual(cloud.commits, 0)  # nothing of that assignment ran
        self.assertTrue(sc.alive())

    def test_transcript_too_large(self):
        cloud, sc = self.start([managed("good", SCORE)], sessions=2)
        # Hold claims until the script is in place.
        cloud.script("transcript", 413, FakeCloud.err("transcript_too_large", False))
        self.assertTrue(cloud.wait(self.all_done, 30) or True)
        self.assertTrue(sc.wait_log(lambda l: l.get("msg", "").startswith("transcript too large")),
                        sc.raw_log()[-3000:])
        self.assertTrue(sc.alive())

    def test_transcript_that_breaks_the_contract_fails_its_assignment(self):
        # The transcript is parsed once, strictly, from its bytes: a duplicate
        # key, NaN, or another session revision is a protocol error for that
        # assignment, which runs nothing; the worker goes on.
        def tampered(edit):
            def body(cloud, path):
                a = cloud.assignments[path.split("/")[-2]]
                _, t = cloud.dispatch("GET", path, None,
                                      {"X-FailproofAI-Lease-Generation": str(a["generation"])})
                return edit(json.dumps(t)).encode()
            return body

        edits = [
            (lambda t: t.replace('"payload": {', '"payload": {"k": 1, "k": 2, ', 1),
             "duplicate object key"),
            (lambda t: t.replace('"payload": {', '"payload": {"x": NaN, ', 1),
             "NaN and Infinity are not JSON"),
            (lambda t: t.replace('"session_revision_id": "', '"session_revision_id": "other-', 1),
             "session_revision_id does not match the assignment"),
        ]
        cloud = FakeCloud([managed("good", SCORE)], sessions=0).start()
        self.cloud = cloud
        for edit, _ in edits:
            cloud.script("transcript", 200, tampered(edit))
        self.sidecar = sc = Sidecar(cloud.url)
        for _ in edits:
            cloud.add_session()
        for _, why in edits:
            self.assertTrue(sc.wait_log(lambda l: l.get("msg") == "assignment failed" and
                                        l.get("code") == "protocol_error" and
                                        why in l.get("error", "")), (why, sc.raw_log()[-3000:]))
        self.assertEqual(cloud.commits, 0)
        cloud.add_session()  # an intact transcript still gets its run
        self.assertTrue(cloud.wait(lambda c: c.commits >= 1, 30), sc.raw_log()[-3000:])

    def test_catalog_mismatch_reregisters(self):
        cloud = FakeCloud([managed("good", SCORE)], sessions=0).start()
        self.cloud = cloud
        cloud.script("claim", 409, FakeCloud.err("catalog_mismatch", False))
        self.sidecar = sc = Sidecar(cloud.url)
        self.assertTrue(cloud.wait(lambda c: len(c.registers) >= 2, 20), sc.raw_log()[-3000:])
        cloud.add_session()
        self.assertTrue(cloud.wait(self.all_done, 30))


class LeaseLoss(Base):
    def test_first_heartbeat_at_once(self):
        # An assignment heartbeats at once when its runs start (SPEC 4.7),
        # not one interval later: with a 60 s interval, a run that evaluates
        # for seconds is named by a heartbeat before it ends. A first beat
        # left to the interval would come after the run had finished and so
        # never be sent (a beat names unfinished runs only).
        slow = "EvalResult(score=Score(len([i for i in range(3 * 10**8) if i < 0])))"
        cloud = FakeCloud([managed("slow", slow, timeout=50)], sessions=0, heartbeat=60,
                          lease=300).start()
        self.cloud = cloud
        self.sidecar = sc = Sidecar(cloud.url)
        cloud.add_session()
        self.assertTrue(sc.wait_log(lambda l: l.get("msg") == "run started", 60),
                        sc.raw_log()[-3000:])
        self.assertTrue(cloud.wait(lambda c: any(hb["runs"] for hb in c.heartbeats), 60),
                        sc.raw_log()[-3000:])
        with cloud.lock:
            self.assertEqual(cloud.commits, 0, "the heartbeat came after the run ended")
            rid = cloud.heartbeats[0]["runs"][0]["evaluation_run_id"]
            self.assertIn(rid, cloud.runs)

    def test_lease_lost_cancels_runs(self):
        # Once a run is evaluating, the next heartbeat answers lease_lost and
        # the server forgets the lease: the running evaluation is cancelled
        # (its sandbox killed) and nothing is committed. The evaluation runs
        # for seconds (far longer than the 1 s heartbeat interval, more so
        # under a sanitizer), and the loss is scripted only once the
        # sidecar logs that the run started: a loss answered before any run
        # began has no run to cancel.
        slow = "EvalResult(score=Score(len([i for i in range(3 * 10**8) if i < 0])))"
        cloud = FakeCloud([managed("slow", slow, timeout=50), managed("slow2", slow, timeout=50)],
                          sessions=0, heartbeat=1, lease=10).start()
        self.cloud = cloud

        def lost(c, path):
            with c.lock:
                for a in c.assignments.values():
                    a["status"] = "lost"
            return json.dumps(FakeCloud.err("lease_lost", False)).encode()
        self.sidecar = sc = Sidecar(cloud.url)
        cloud.add_session()
        self.assertTrue(sc.wait_log(lambda l: l.get("msg") == "run started", 60),
                        sc.raw_log()[-3000:])
        cloud.script("heartbeat", 409, lost)
        self.assertTrue(sc.wait_log(lambda l: l.get("msg", "").startswith("lease lost")),
                        sc.raw_log()[-3000:])
        self.assertTrue(sc.wait_log(lambda l: l.get("msg") == "run cancelled"
                                    or l.get("msg") == "result rejected", 20),
                        sc.raw_log()[-4000:])
        time.sleep(0.5)
        self.assertEqual(cloud.commits, 0)
        self.assertTrue(sc.alive())


class Hostile(Base):
    CASES = [
        ("malformed JSON", 200, b"{not json"),
        ("wrong types", 200, {"protocol_version": "2", "assignments": "nope"}),
        ("missing fields", 200, {"protocol_version": "2", "assignments": [{"assignment_id": "x"}]}),
        ("protocol 3", 200, {"protocol_version": "3", "assignments": []}),
        ("redirect", 302, {"protocol_version": "2", "assignments": []}),
        ("html 500", 500, b"<html>oops</html>"),
    ]

    def test_hostile_claims_then_normal_work(self):
        cloud = FakeCloud([managed("good", SCORE)], sessions=0, poll=1).start()
        self.cloud = cloud
        for _, status, body in self.CASES:
            headers = {"Location": "http://example.invalid/"} if status == 302 else None
            cloud.script("claim", status, body, headers=headers)
        # A 50 MB body (cap 2 MiB: reading stops).
        cloud.script("claim", 200, b"{" + b" " * (50 * 1024 * 1024) + b"}")
        # Duplicate assignments and more than the capacity.
        dup = {"assignment_id": "d1", "lease_generation": 1,
               "lease_expires_at": "2099-01-01T00:00:00.000000Z", "session_id": "s",
               "session_revision_id": "r", "agent_id": "a", "environment": "e",
               "trigger_reason": "t", "event_count": 0,
               "transcript_url": "/v1/evaluator/assignments/d1/transcript"}
        cloud.script("claim", 200, {"protocol_version": "2", "assignments": [dup, dup]})
        many = [dict(dup, assignment_id=f"m{i}") for i in range(40)]
        cloud.script("claim", 200, {"protocol_version": "2", "assignments": many})
        foreign = dict(dup, assignment_id="f1",
                       transcript_url="http://evil.example/v1/evaluator/assignments/f1/transcript")
        cloud.script("claim", 200, {"protocol_version": "2", "assignments": [foreign]})
        self.sidecar = sc = Sidecar(cloud.url, concurrency=4)
        ok = cloud.wait(lambda c: not c.scripts.get("claim"), 60)
        self.assertTrue(ok, sc.raw_log()[-3000:])
        cloud.add_session()
        self.assertTrue(cloud.wait(self.all_done, 30), sc.raw_log()[-3000:])
        self.assertTrue(sc.alive())
        log = sc.raw_log()
        for needle in ("not valid JSON", "assignments must be an array",
                       "assignment.lease_generation must be an integer",
                       "protocol_version must be", "redirect refused", "without a valid error",
                       "larger than the", "twice", "for capacity", "not on the configured origin"):
            self.assertIn(needle, log)
        # Nothing went to the foreign host.
        self.assertEqual(cloud.commits, 1)

    def test_hostile_plan_and_definitions(self):
        cloud = FakeCloud([managed("good", SCORE)], sessions=0, poll=1).start()
        self.cloud = cloud
        cloud.script("definitions", 200, {"protocol_version": "2", "assignment_id": "zz",
                                          "catalog_revision": "x", "definitions": []})
        aid = lambda path: path.split("/")[4]
        cloud.script("definitions", 200, lambda c, path: json.dumps(
            {"protocol_version": "2", "assignment_id": aid(path), "catalog_revision": "x",
             "definitions": [{"eval_key": "good", "display_name": "g", "eval_version": "1.0",
                              "result_kind": "score", "labels": []}]}).encode())
        cloud.script("plan", 200, lambda c, path: json.dumps(
            {"protocol_version": "2", "assignment_id": aid(path),
             "assignment_status": "planned", "idempotent_replay": "yes", "runs": []}).encode())
        self.sidecar = sc = Sidecar(cloud.url)
        for _ in range(3):
            cloud.add_session()
            time.sleep(0.1)
        self.assertTrue(sc.wait_log(lambda l: "definitions are for another assignment"
                                    in l.get("error", "")), sc.raw_log()[-3000:])
        self.assertTrue(sc.wait_log(lambda l: "execution_mode must be" in l.get("error", "")))
        self.assertTrue(sc.wait_log(lambda l: "idempotent_replay must be a boolean"
                                    in l.get("error", "")))
        self.assertTrue(sc.alive())

    def test_bad_token_stays_up_not_ready(self):
        cloud = FakeCloud([], sessions=1).start()
        self.cloud = cloud
        self.sidecar = sc = Sidecar(cloud.url, token="wrong")
        self.assertTrue(sc.wait_log(lambda l: l.get("code") == "invalid_credentials"))
        time.sleep(1)
        self.assertTrue(sc.alive())
        self.assertEqual(cloud.commits, 0)


if __name__ == "__main__":
    unittest.main()
