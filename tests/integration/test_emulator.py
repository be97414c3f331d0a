"""The cloud emulator over real HTTP: one test per protocol rule,
against the real binary on an ephemeral loopback port."""

import json
import os
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from emulator_harness import (  # noqa: E402
    EmulatorProcess,
    catalog_revision,
    compact,
    definitions_file,
    source_checksum,
)

LOCAL = [
    {
        "eval_key": "answer_quality",
        "display_name": "Answer quality",
        "eval_version": "3.0.0",
        "result_kind": "score",
        "labels": ["llm", "judge"],
    }
]
MANAGED = [
    {
        "eval_key": "tool_count",
        "eval_version": "1.0.0",
        "display_name": "Tool count",
        "result_kind": "metric",
        "labels": ["tools"],
        "condition_source": "session.count('tool_use') > 0",
        "evaluator_source": "EvalResult(metrics={'tool_count': session.count('tool_use')})",
        "timeout_seconds": 5,
    },
    {
        "eval_key": "ended",
        "eval_version": "2.0.0",
        "display_name": "Ended",
        "result_kind": "assertion",
        "labels": [],
        "condition_source": None,
        "evaluator_source": "EvalResult(assertions={'ended': session.count('agent_end') == 1})",
        "timeout_seconds": None,
    },
]


class EmulatorCase(unittest.TestCase):
    args = ("--sessions", "5")
    managed = MANAGED

    @classmethod
    def setUpClass(cls):
        cls.defs_path = definitions_file(cls.managed)
        cls.emu = EmulatorProcess(*cls.args, "--definitions", cls.defs_path)
        cls.emu.start()

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()
        os.unlink(cls.defs_path)

    def claim_one(self, worker_id="w1", catalog=LOCAL):
        self.assertEqual(self.emu.register(catalog, worker_id=worker_id).status, 200)
        c = self.emu.claim(1, worker_id=worker_id, definitions=catalog)
        self.assertEqual(c.status, 200, c)
        self.assertEqual(len(c.body["assignments"]), 1, "no assignment left to claim")
        return c.body["assignments"][0]

    def fresh_session(self):
        r = self.emu.request("POST", "/emulator/v1/sessions?generate=1", b"", token=None)
        self.assertEqual(r.status, 200)

    def plan_all(self, a, worker_id="w1"):
        """Plans every definition of a; returns {eval_key: run}."""
        d = self.emu.fenced_get(a, "definitions", worker_id=worker_id)
        self.assertEqual(d.status, 200, d)
        sel = [(x["eval_key"], x["eval_version"]) for x in d.body["definitions"]]
        p = self.emu.plan(a, sel, worker_id=worker_id)
        self.assertEqual(p.status, 200, p)
        return {r["eval_key"]: r for r in p.body["runs"]}


class AuthAndVersion(EmulatorCase):
    def test_missing_token_is_401(self):
        r = self.emu.register(LOCAL, token=None)
        self.assertEqual((r.status, r.code), (401, "invalid_credentials"))
        self.assertFalse(r.body["error"]["retryable"])

    def test_wrong_token_is_401(self):
        r = self.emu.claim(1, token="not-the-token")
        self.assertEqual((r.status, r.code), (401, "invalid_credentials"))

    def test_protocol_version_other_than_2_is_426(self):
        body = {"protocol_version": "3", "worker_id": "w", "catalog_revision": "x", "capacity": 1}
        r = self.emu.request("POST", "/v1/evaluator/assignments/claim", body)
        self.assertEqual((r.status, r.code), (426, "unsupported_protocol_version"))
        self.assertIn("'3'", r.message)

    def test_error_envelope_shape(self):
        r = self.emu.claim(1, token="nope")
        self.assertEqual(set(r.body), {"protocol_version", "error"})
        self.assertEqual(r.body["protocol_version"], "2")
        self.assertEqual(set(r.body["error"]), {"code", "message", "retryable", "request_id"})

    def test_request_id_is_echoed(self):
        rid = "0123456789abcdef0123456789abcdef"
        r = self.emu.request("POST", "/v1/evaluator/assignments/claim", {}, headers={"X-Request-Id": rid})
        self.assertEqual(r.headers["x-request-id"], rid)
        self.assertEqual(r.body["error"]["request_id"], rid)
        ok = self.emu.request("GET", "/emulator/v1/state", token=None, headers={"X-Request-Id": rid})
        self.assertEqual(ok.headers["x-request-id"], rid)

    def test_request_id_is_minted_when_missing_or_not_a_trace_id(self):
        for given in (None, "free text", "ABCDEF0123456789ABCDEF0123456789"):
            headers = {"X-Request-Id": given} if given else {}
            r = self.emu.claim(1, token="bad") if not headers else self.emu.request(
                "POST", "/v1/evaluator/assignments/claim", {}, token="bad", headers=headers)
            rid = r.headers["x-request-id"]
            self.assertRegex(rid, r"^[0-9a-f]{32}$")
            self.assertNotEqual(rid, given)
            self.assertEqual(r.body["error"]["request_id"], rid)

    def test_minted_request_ids_are_distinct(self):
        ids = {self.emu.claim(1, token="bad").headers["x-request-id"] for _ in range(200)}
        self.assertEqual(len(ids), 200)

    def test_unknown_route_and_method(self):
        self.assertEqual(self.emu.request("GET", "/v1/evaluator/nope").status, 404)
        r = self.emu.request("GET", "/v1/evaluator/assignments/claim")
        self.assertEqual(r.status, 405)


class InstancesAndFlags(unittest.TestCase):
    def test_managed_token_and_disabled_definitions(self):
        with EmulatorProcess("--token", "fleet:managed", "--token", "cust", "--disable", "tool_count",
                             "--disable", "ended", "--claim-limit", "3") as emu:
            r = emu.register([], token="fleet", max_concurrency=8)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["evaluator_kind"], "managed")
            self.assertEqual(r.body["disabled_definitions"], ["tool_count", "ended"])
            self.assertEqual(r.body["claim_limit"], 3)
            other = emu.register([], token="cust")
            self.assertEqual(other.body["evaluator_kind"], "customer")
            self.assertNotEqual(other.body["evaluator_instance_id"], r.body["evaluator_instance_id"])

    def test_instances_are_fenced_from_each_other(self):
        with EmulatorProcess("--token", "a", "--token", "b", "--sessions", "1") as emu:
            emu.register([], token="a")
            emu.register([], token="b")
            got = emu.claim(1, token="a").body["assignments"][0]
            r = emu.fenced_get(got, "transcript", token="b")
            self.assertEqual(r.code, "lease_lost")
            self.assertEqual(emu.fenced_get(got, "transcript", token="a").status, 200)

    def test_ipv6_loopback_listen(self):
        import subprocess
        from emulator_harness import BIN
        p = subprocess.Popen([BIN, "emulator", "--listen", "[::1]:0", "--log-level", "warn"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            if not line:
                self.skipTest("no IPv6 loopback here: " + p.stderr.read().strip())
            self.assertRegex(json.loads(line)["listening"], r"^\[::1\]:\d+$")
        finally:
            p.terminate()
            p.communicate(timeout=10)


class DisabledInstance(unittest.TestCase):
    def test_disabled_token_is_403_instance_disabled(self):
        with EmulatorProcess("--token", "live", "--token", "off:disabled") as emu:
            r = emu.register([], token="off")
            self.assertEqual((r.status, r.code), (403, "instance_disabled"))
            self.assertEqual(emu.register([], token="live").status, 200)


class Validation(EmulatorCase):
    def post(self, path, body):
        return self.emu.request("POST", path, body)

    def assert_422(self, r, message, code="invalid_request"):
        self.assertEqual((r.status, r.code), (422, code), r)
        self.assertEqual(r.message, message)

    def test_body_not_json(self):
        r = self.post("/v1/evaluator/assignments/claim", b"{not json")
        self.assertEqual((r.status, r.code), (422, "invalid_request"))
        self.assertTrue(r.message.startswith("request body is not valid JSON"))

    def test_body_not_object(self):
        self.assert_422(self.post("/v1/evaluator/assignments/claim", b"[1]"),
                        "request body must be a JSON object")

    def test_protocol_version_missing(self):
        self.assert_422(self.post("/v1/evaluator/assignments/claim", {"worker_id": "w"}),
                        "protocol_version must be a string")

    def test_claim_field_types(self):
        base = {"protocol_version": "2", "worker_id": "w", "catalog_revision": "r", "capacity": 1}
        cases = [
            ({"worker_id": 5}, "worker_id must be a string"),
            ({"worker_id": ""}, "worker_id must not be empty"),
            ({"worker_id": "a\nb"}, "worker_id must not contain control characters"),
            ({"worker_id": "x" * 129}, "worker_id is 129 bytes; maximum is 128"),
            ({"capacity": "2"}, "capacity must be an integer"),
            ({"capacity": True}, "capacity must be an integer"),
            ({"capacity": 0}, "capacity must be between 1 and 32"),
            ({"capacity": 33}, "capacity must be between 1 and 32"),
            ({"catalog_revision": None}, "catalog_revision must be a string"),
        ]
        for patch, message in cases:
            with self.subTest(patch=patch):
                self.assert_422(self.post("/v1/evaluator/assignments/claim", {**base, **patch}), message)

    def test_register_catalog_rules(self):
        good = dict(LOCAL[0])
        cases = [
            ({"eval_key": "Bad-Key"}, "definitions[0].eval_key must match ^[a-z][a-z0-9_]*$"),
            ({"eval_key": "k" * 129}, "definitions[0].eval_key is 129 bytes; maximum is 128"),
            ({"result_kind": "grade"},
             "definitions[0].result_kind must be one of 'score', 'metric', 'assertion'"),
            ({"labels": ["a", "a"]}, "definitions[0].labels must be unique"),
            ({"labels": ["x"] * 21}, "definitions[0].labels has 21 entries; at most 20 labels are allowed"),
            ({"display_name": ""}, "definitions[0].display_name must not be empty"),
        ]
        for patch, message in cases:
            with self.subTest(patch=patch):
                d = {**good, **patch}
                r = self.emu.register([d], revision="sha256:0")
                self.assert_422(r, message, code="invalid_catalog")
        dup = self.emu.register([good, good], revision="sha256:0")
        self.assert_422(dup, "duplicate eval key: answer_quality", code="invalid_catalog")
        many = [{**good, "eval_key": f"k{i}"} for i in range(101)]
        self.assert_422(self.emu.register(many), "definitions has 101 entries; maximum is 100",
                        code="invalid_catalog")

    def test_register_max_concurrency(self):
        r = self.emu.register(LOCAL, max_concurrency=0)
        self.assert_422(r, "max_concurrency must be between 1 and 32")

    def test_result_validation(self):
        a = self.claim_one()
        runs = self.plan_all(a)
        run = runs["answer_quality"]["evaluation_run_id"]
        gen = a["lease_generation"]
        base = self.emu.result_body(gen, eval_key="answer_quality")
        item = base["results"][0]
        cases = [
            ({"result_schema_version": "3"}, "unsupported result schema version '3'"),
            ({"status": "done"},
             "status must be one of 'succeeded', 'failed', 'timed_out', 'cancelled'"),
            ({"lease_generation": 0}, "lease_generation must be greater than zero"),
            ({"duration_ms": -1}, "duration_ms must not be negative"),
            ({"started_at": "yesterday"}, "started_at must be an RFC 3339 timestamp"),
            ({"summary": "s" * 4097}, "summary is 4097 bytes; maximum is 4096"),
            ({"results": []}, "results must not be empty when status is succeeded"),
            ({"results": [{**item, "numeric_value": "1"}]}, "results[0].numeric_value must be a number or null"),
            ({"results": [{**item, "numeric_value": True}]}, "results[0].numeric_value must be a number or null"),
            ({"results": [{**item, "bool_value": 1}]}, "results[0].bool_value must be a boolean or null"),
            ({"results": [{**item, "result_key": "Nope"}]}, "results[0].result_key must match ^[a-z][a-z0-9_]*$"),
            ({"results": [dict(item, result_key=f"k{i}") for i in range(26)]}, "results has 26 items; maximum is 25"),
            ({"results": [item, item]}, "results[1].result_key 'answer_quality' is not unique"),
            ({"error_message": "e" * 4097}, "error_message is 4097 bytes; maximum is 4096"),
        ]
        for patch, message in cases:
            with self.subTest(patch=list(patch)):
                self.assert_422(self.emu.result(run, {**base, **patch}), message)
        # None of the rejected bodies was committed.
        self.assertEqual(self.emu.result(run, base).body["idempotent_replay"], False)

    def test_heartbeat_validation(self):
        body = {"protocol_version": "2", "worker_id": "w", "lease_generation": 1, "runs": []}
        self.assert_422(self.post("/v1/evaluator/runs/heartbeat", body), "runs must not be empty")
        body["runs"] = [{"evaluation_run_id": "x", "state": "running", "progress": 2}]
        self.assert_422(self.post("/v1/evaluator/runs/heartbeat", body),
                        "runs[0].progress must be finite and between 0 and 1")

    def test_plan_validation(self):
        body = {"protocol_version": "2", "worker_id": "w", "lease_generation": 1,
                "selected": [{"eval_key": "x"}], "skipped": []}
        self.assert_422(self.post("/v1/evaluator/assignments/nope/plan", body),
                        "selected[0].eval_version must be a string")


class Register(EmulatorCase):
    def test_register_answers_timing_and_limits(self):
        r = self.emu.register(LOCAL, max_concurrency=3)
        self.assertEqual(r.status, 200, r)
        b = r.body
        self.assertEqual(b["evaluator_kind"], "customer")
        self.assertEqual((b["heartbeat_interval_seconds"], b["lease_duration_seconds"],
                          b["poll_interval_seconds"], b["claim_limit"]), (30, 120, 10, 3))
        self.assertEqual(b["disabled_definitions"], [])

    def test_catalog_revision_mismatch_is_invalid_catalog(self):
        r = self.emu.register(LOCAL, revision="sha256:" + "0" * 64)
        self.assertEqual((r.status, r.code), (422, "invalid_catalog"))
        self.assertIn(catalog_revision(LOCAL), r.message)

    def test_revision_over_unsorted_labels_as_sent_is_accepted(self):
        # The contract's sample hashes labels in the order sent.
        d = dict(LOCAL[0], labels=["llm", "judge"])
        payload = [{k: d[k] for k in ("display_name", "eval_key", "eval_version", "labels", "result_kind")}]
        import hashlib
        rev = "sha256:" + hashlib.sha256(compact(payload)).hexdigest()
        self.assertEqual(self.emu.register([d], revision=rev).status, 200)
        self.assertEqual(self.emu.register([d]).status, 200)  # labels sorted (SPEC)


class Claim(EmulatorCase):
    args = ("--sessions", "6", "--max-attempts", "2")

    def test_1_claim_before_register_is_catalog_mismatch(self):
        with EmulatorProcess("--sessions", "1") as emu:
            r = emu.claim(1)
            self.assertEqual((r.status, r.code), (409, "catalog_mismatch"))

    def test_2_claim_with_other_revision_is_catalog_mismatch(self):
        self.emu.register(LOCAL)
        r = self.emu.claim(1, definitions=[])
        self.assertEqual((r.status, r.code), (409, "catalog_mismatch"))

    def test_3_capacity_bounds_assignments_and_generation_starts_at_1(self):
        self.emu.register(LOCAL)
        r = self.emu.claim(2, definitions=LOCAL)
        self.assertEqual(r.status, 200)
        got = r.body["assignments"]
        self.assertEqual(len(got), 2)
        self.assertEqual(len({a["assignment_id"] for a in got}), 2)
        for a in got:
            self.assertEqual(a["lease_generation"], 1)
            self.assertEqual(a["trigger_reason"], "agent_end")
            self.assertTrue(a["transcript_url"].endswith("/transcript"))
        self.assertEqual(self.emu.state()["assignments"]["leased"], 2)

    def test_4_expired_lease_is_reclaimed_with_next_generation_then_dead_lettered(self):
        a = self.claim_one()
        aid = a["assignment_id"]
        self.assertEqual(self.emu.expire(aid).body["status"], "available")
        # The reclaimed assignment comes back first, generation + 1, attempts + 1.
        b = self.emu.claim(1, definitions=LOCAL).body["assignments"][0]
        self.assertEqual((b["assignment_id"], b["lease_generation"]), (aid, 2))
        self.assertEqual(self.emu.assignment(aid)["attempts"], 2)
        # The old generation is fenced out.
        old = self.emu.fenced_get(a, "transcript")
        self.assertEqual((old.status, old.code), (409, "lease_lost"))
        # max_attempts = 2: the second expiry dead-letters it.
        self.assertEqual(self.emu.expire(aid).body["status"], "dead")
        self.assertEqual(self.emu.state()["assignments"]["dead"], 1)
        ids = [x["assignment_id"] for x in self.emu.claim(5, definitions=LOCAL).body["assignments"]]
        self.assertNotIn(aid, ids)

    def test_5_claim_limit_flag_caps_a_claim(self):
        with EmulatorProcess("--sessions", "5", "--claim-limit", "2") as emu:
            self.assertEqual(emu.register([], max_concurrency=8).body["claim_limit"], 2)
            self.assertEqual(len(emu.claim(8).body["assignments"]), 2)

    def test_6_empty_queue_returns_no_assignments(self):
        with EmulatorProcess() as emu:
            emu.register([])
            r = emu.claim(4)
            self.assertEqual((r.status, r.body["assignments"]), (200, []))


class LeaseExpiry(unittest.TestCase):
    def test_lease_expires_by_time_and_is_reclaimed(self):
        with EmulatorProcess("--sessions", "1", "--lease-seconds", "2", "--heartbeat-seconds", "1") as emu:
            emu.register([])
            a = emu.claim(1).body["assignments"][0]
            self.assertEqual(emu.claim(1).body["assignments"], [])
            time.sleep(2.3)
            self.assertEqual(emu.state()["assignments"]["available"], 1)
            r = emu.fenced_get(a, "transcript")
            self.assertEqual((r.status, r.code), (409, "lease_lost"))
            b = emu.claim(1, worker_id="w2").body["assignments"][0]
            self.assertEqual((b["assignment_id"], b["lease_generation"]), (a["assignment_id"], 2))


class TranscriptAndDefinitions(EmulatorCase):
    def test_transcript_fencing_headers(self):
        a = self.claim_one()
        path = a["transcript_url"]
        r = self.emu.request("GET", path)
        self.assertEqual((r.status, r.code), (422, "invalid_request"))
        self.assertEqual(r.message, "the X-FailproofAI-Worker-Id header is required")
        r = self.emu.request("GET", path, headers={"X-FailproofAI-Worker-Id": "w1"})
        self.assertEqual(r.message, "the X-FailproofAI-Lease-Generation header is required")
        r = self.emu.request("GET", path, headers={"X-FailproofAI-Worker-Id": "w1",
                                                    "X-FailproofAI-Lease-Generation": "one"})
        self.assertEqual(r.message, "X-FailproofAI-Lease-Generation must be a positive integer")
        self.assertEqual(self.emu.fenced_get(a, "transcript", generation=2).code, "lease_lost")
        self.assertEqual(self.emu.fenced_get(a, "transcript", worker_id="w9").code, "lease_lost")
        self.assertEqual(self.emu.fenced_get(a, "definitions", generation=2).code, "lease_lost")
        ok = self.emu.fenced_get(a, "transcript")
        self.assertEqual(ok.status, 200)
        t = ok.body
        self.assertEqual(t["schema_version"], "2")
        self.assertEqual(t["assignment_id"], a["assignment_id"])
        self.assertEqual(t["session_revision_id"], a["session_revision_id"])
        self.assertEqual(t["event_count"], len(t["events"]))
        self.assertEqual(a["event_count"], len(t["events"]))

    def test_unknown_assignment_is_404(self):
        self.emu.register(LOCAL)
        r = self.emu.request("GET", "/v1/evaluator/assignments/nope/transcript",
                             headers={"X-FailproofAI-Worker-Id": "w1", "X-FailproofAI-Lease-Generation": "1"})
        self.assertEqual((r.status, r.code), (404, "assignment_not_found"))

    def test_definitions_are_managed_python_plus_the_registered_catalog(self):
        a = self.claim_one()
        d = self.emu.fenced_get(a, "definitions")
        self.assertEqual(d.status, 200)
        self.assertEqual(d.body["assignment_id"], a["assignment_id"])
        self.assertEqual(d.body["catalog_revision"], catalog_revision(LOCAL))
        defs = {x["eval_key"]: x for x in d.body["definitions"]}
        self.assertEqual(set(defs), {"tool_count", "ended", "answer_quality"})
        for m in MANAGED:
            x = defs[m["eval_key"]]
            self.assertEqual(x["execution_mode"], "python")
            self.assertEqual(x["source_checksum"], source_checksum(m["condition_source"], m["evaluator_source"]))
            self.assertEqual(x["condition_source"], m["condition_source"])
            self.assertNotIn("evaluator_source", x)
        self.assertEqual(defs["tool_count"]["timeout_seconds"], 5.0)
        self.assertIsNone(defs["ended"]["timeout_seconds"])
        local = defs["answer_quality"]
        self.assertEqual(local["execution_mode"], "local")
        self.assertEqual((local["condition_source"], local["source_checksum"]), (None, None))
        self.assertEqual(local["labels"], ["llm", "judge"])

    def test_transcript_too_large_is_413(self):
        with EmulatorProcess("--max-transcript-bytes", "2000") as emu:
            small = emu.add_session({"events": []})
            big = emu.add_session({"events": [{"id": f"e{i}", "ts": "2026-08-28T12:00:00Z",
                                               "event_type": "tool_use", "payload": {"x": "y" * 50}}
                                              for i in range(40)]})
            self.assertEqual((small.status, big.status), (201, 201))
            emu.register([])
            got = {x["assignment_id"]: x for x in emu.claim(2).body["assignments"]}
            r = emu.fenced_get(got[big.body["assignment_id"]], "transcript")
            self.assertEqual((r.status, r.code), (413, "transcript_too_large"))
            self.assertEqual(emu.fenced_get(got[small.body["assignment_id"]], "transcript").status, 200)


class Plan(EmulatorCase):
    def test_incomplete_plan_rules(self):
        a = self.claim_one()
        full = [("tool_count", "1.0.0"), ("ended", "2.0.0"), ("answer_quality", "3.0.0")]
        r = self.emu.plan(a, full[:2])
        self.assertEqual((r.status, r.code), (422, "incomplete_plan"))
        self.assertIn("answer_quality version 3.0.0", r.message)
        r = self.emu.plan(a, full, [("ended", "2.0.0", "condition_false")])
        self.assertEqual(r.code, "incomplete_plan")
        self.assertIn("more than once", r.message)
        r = self.emu.plan(a, full + [("ghost", "1")])
        self.assertEqual(r.code, "incomplete_plan")
        self.assertIn("not a definition", r.message)
        r = self.emu.plan(a, full[:2], [("answer_quality", "9.9.9", "condition_false")])
        self.assertEqual(r.code, "incomplete_plan")
        # Nothing above was recorded: a complete plan now succeeds.
        ok = self.emu.plan(a, full[:2], [("answer_quality", "3.0.0", "condition_false")])
        self.assertEqual(ok.status, 200, ok)
        self.assertEqual((ok.body["assignment_status"], ok.body["idempotent_replay"]), ("planned", False))
        runs = {x["eval_key"]: x for x in ok.body["runs"]}
        self.assertEqual(set(runs), {"tool_count", "ended"})
        self.assertEqual(runs["tool_count"]["evaluator_source"], MANAGED[0]["evaluator_source"])
        self.assertEqual(runs["tool_count"]["source_checksum"],
                         source_checksum(MANAGED[0]["condition_source"], MANAGED[0]["evaluator_source"]))
        self.assertEqual(runs["tool_count"]["execution_mode"], "python")

    def test_plan_is_fenced(self):
        a = self.claim_one()
        r = self.emu.plan(a, [], generation=a["lease_generation"] + 1)
        self.assertEqual((r.status, r.code), (409, "lease_lost"))
        r = self.emu.plan(a, [], worker_id="intruder")
        self.assertEqual(r.code, "lease_lost")
        r = self.emu.plan({"assignment_id": "missing", "lease_generation": 1}, [])
        self.assertEqual((r.status, r.code), (404, "assignment_not_found"))

    def test_replay_returns_the_first_plan(self):
        a = self.claim_one()
        first = self.plan_all(a)
        again = self.emu.plan(a, [], [("tool_count", "1.0.0", "x"), ("ended", "2.0.0", "x"),
                                      ("answer_quality", "3.0.0", "x")])
        self.assertEqual(again.status, 200)
        self.assertTrue(again.body["idempotent_replay"])
        self.assertEqual(again.body["assignment_status"], "planned")
        self.assertEqual({r["evaluation_run_id"] for r in again.body["runs"]},
                         {r["evaluation_run_id"] for r in first.values()})
        self.assertGreaterEqual(self.emu.state()["plan_replays"], 1)

    def test_replay_after_reclaim_omits_committed_runs(self):
        a = self.claim_one()
        runs = self.plan_all(a)
        done = runs["ended"]["evaluation_run_id"]
        body = self.emu.result_body(a["lease_generation"], eval_key="ended", kind="assertion", value=None)
        self.assertEqual(self.emu.result(done, body).status, 200)
        self.emu.expire(a["assignment_id"])
        b = self.emu.claim(1, definitions=LOCAL).body["assignments"][0]
        self.assertEqual(b["assignment_id"], a["assignment_id"])
        r = self.emu.plan(b, [("tool_count", "1.0.0"), ("ended", "2.0.0"), ("answer_quality", "3.0.0")])
        self.assertTrue(r.body["idempotent_replay"])
        self.assertEqual({x["eval_key"] for x in r.body["runs"]}, {"tool_count", "answer_quality"})

    def test_nothing_selected_skips_the_assignment(self):
        a = self.claim_one()
        r = self.emu.plan(a, [], [("tool_count", "1.0.0", "condition_false"), ("ended", "2.0.0", "disabled_by_server"),
                                  ("answer_quality", "3.0.0", "condition_error")])
        self.assertEqual(r.status, 200)
        self.assertEqual((r.body["assignment_status"], r.body["runs"]), ("skipped", []))
        self.assertEqual(self.emu.assignment(a["assignment_id"])["status"], "skipped")


class HeartbeatAndResult(EmulatorCase):
    args = ("--sessions", "8", "--lease-seconds", "60", "--heartbeat-seconds", "5")

    def test_heartbeat_renews_lease_and_lists_accepted_runs(self):
        a = self.claim_one()
        runs = self.plan_all(a)
        ids = [r["evaluation_run_id"] for r in runs.values()]
        before = self.emu.assignment(a["assignment_id"])["lease_expires_at"]
        time.sleep(0.05)
        hb = self.emu.heartbeat(ids + ["unknown-run"], a["lease_generation"])
        self.assertEqual(hb.status, 200, hb)
        self.assertEqual(sorted(hb.body["accepted_run_ids"]), sorted(ids))
        self.assertGreater(hb.body["lease_expires_at"], before)
        self.assertEqual(self.emu.assignment(a["assignment_id"])["lease_expires_at"], hb.body["lease_expires_at"])
        # A committed run is no longer accepted.
        key = "ended"
        self.emu.result(runs[key]["evaluation_run_id"],
                        self.emu.result_body(a["lease_generation"], eval_key=key, kind="assertion", value=None))
        hb = self.emu.heartbeat(ids, a["lease_generation"])
        self.assertNotIn(runs[key]["evaluation_run_id"], hb.body["accepted_run_ids"])
        self.assertEqual(len(hb.body["accepted_run_ids"]), 2)

    def test_heartbeat_fenced_and_unknown(self):
        a = self.claim_one()
        runs = self.plan_all(a)
        rid = runs["tool_count"]["evaluation_run_id"]
        r = self.emu.heartbeat([rid], a["lease_generation"] + 1)
        self.assertEqual((r.status, r.code), (409, "lease_lost"))
        r = self.emu.heartbeat(["nope"], 1)
        self.assertEqual((r.status, r.code), (404, "run_not_found"))

    def test_result_commit_replay_conflict_and_completion(self):
        a = self.claim_one()
        runs = self.plan_all(a)
        gen = a["lease_generation"]
        self.assertEqual(self.emu.result("no-such-run", self.emu.result_body(gen)).code, "run_not_found")
        rid = runs["answer_quality"]["evaluation_run_id"]
        body = self.emu.result_body(gen, eval_key="answer_quality")
        # Fenced: wrong generation or worker.
        self.assertEqual(self.emu.result(rid, {**body, "lease_generation": gen + 1}).code, "lease_lost")
        self.assertEqual(self.emu.result(rid, {**body, "worker_id": "w9"}).code, "lease_lost")
        first = self.emu.result(rid, body)
        self.assertEqual(first.status, 200, first)
        self.assertEqual((first.body["status"], first.body["idempotent_replay"], first.body["result_count"]),
                         ("committed", False, 1))
        self.assertEqual(first.body["submission_id"], body["submission_id"])
        self.assertRegex(first.body["result_checksum"], r"^sha256:[0-9a-f]{64}$")
        replay = self.emu.result(rid, body)
        self.assertEqual((replay.status, replay.body["idempotent_replay"]), (200, True))
        self.assertEqual(replay.body["result_checksum"], first.body["result_checksum"])
        # Same id, different bytes (even only key order / spacing) → conflict.
        spaced = json.dumps(body).encode()
        r = self.emu.result(rid, spaced)
        self.assertEqual((r.status, r.code), (409, "submission_conflict"))
        r = self.emu.result(rid, {**body, "duration_ms": 1})
        self.assertEqual(r.code, "submission_conflict")
        r = self.emu.result(rid, self.emu.result_body(gen, eval_key="answer_quality"))
        self.assertEqual(r.code, "submission_conflict")
        st = self.emu.state()
        self.assertGreaterEqual(st["conflicts"], 3)
        self.assertEqual(self.emu.assignment(a["assignment_id"])["status"], "planned")
        for key, kind in (("tool_count", "metric"), ("ended", "assertion")):
            r = self.emu.result(runs[key]["evaluation_run_id"],
                                self.emu.result_body(gen, eval_key=key, kind=kind, status="failed"))
            self.assertEqual(r.status, 200, r)
        self.assertEqual(self.emu.assignment(a["assignment_id"])["status"], "completed")
        committed = {r["evaluation_run_id"]: r for r in self.emu.runs()}
        self.assertEqual(committed[rid]["result"], body)
        self.assertEqual(committed[rid]["status"], "succeeded")
        # A replay after completion still succeeds (the response may have been lost).
        self.assertTrue(self.emu.result(rid, body).body["idempotent_replay"])


class Concurrency(unittest.TestCase):
    def test_concurrent_claimers_never_share_a_lease(self):
        n_sessions, n_workers = 300, 8
        with EmulatorProcess("--sessions", str(n_sessions), "--threads", "4") as emu:
            claimed, errors = [], []
            lock = threading.Lock()

            def worker(i):
                wid = f"worker-{i}"
                emu.register([], worker_id=wid)
                while True:
                    r = emu.claim(3, worker_id=wid)
                    if r.status != 200:
                        errors.append(r)
                        return
                    got = r.body["assignments"]
                    if not got:
                        return
                    with lock:
                        claimed.extend((a["assignment_id"], a["lease_generation"], wid) for a in got)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors, [])
            ids = [c[0] for c in claimed]
            self.assertEqual(len(ids), n_sessions)
            self.assertEqual(len(set(ids)), n_sessions)
            self.assertEqual(emu.state()["assignments"]["leased"], n_sessions)
            # Each lease answers only to its holder.
            for aid, gen, wid in claimed[:20]:
                a = {"transcript_url": f"/v1/evaluator/assignments/{aid}/transcript", "lease_generation": gen}
                self.assertEqual(emu.fenced_get(a, "transcript", worker_id=wid).status, 200)
                other = "worker-x" if wid != "worker-x" else "worker-y"
                self.assertEqual(emu.fenced_get(a, "transcript", worker_id=other).code, "lease_lost")


class Inspection(unittest.TestCase):
    def test_state_runs_sessions_expire(self):
        with EmulatorProcess() as emu:
            st = emu.state()
            self.assertEqual(set(st["assignments"]), {"available", "leased", "planned", "completed", "skipped", "dead"})
            self.assertEqual(set(st["runs"]), {"committed", "pending"})
            for k in ("commits", "idempotent_replays", "conflicts", "lease_losses", "requests"):
                self.assertEqual(st[k], 0)
            r = emu.add_session({"session_id": "s-1", "agent_id": "a", "events": [
                {"id": "e1", "ts": "2026-08-28T11:59:00.000000Z", "event_type": "tool_use", "payload": {"t": "ü"}}]})
            self.assertEqual(r.status, 201)
            self.assertEqual(emu.state()["assignments"]["available"], 1)
            bad = emu.add_session({"events": [{"id": "e1"}]})
            self.assertEqual(bad.status, 422)
            self.assertEqual(bad.message, "events[0].ts must be a string")
            self.assertEqual(emu.add_session({"events": [], "event_count": 3}).status, 422)
            self.assertEqual(emu.expire(r.body["assignment_id"]).status, 409)
            self.assertEqual(emu.expire("nope").status, 404)
            gen = emu.request("POST", "/emulator/v1/sessions?generate=7", b"", token=None)
            self.assertEqual(gen.body, {"generated": 7})
            self.assertEqual(emu.state()["assignments"]["available"], 8)
            emu.register([])
            emu.claim(1)
            self.assertEqual(emu.state()["requests"], 2)
            self.assertEqual(emu.runs(), [])

    def test_generated_sessions_are_realistic_and_varied(self):
        with EmulatorProcess("--sessions", "40") as emu:
            emu.register([], max_concurrency=32)
            got = emu.claim(32).body["assignments"] + emu.claim(8).body["assignments"]
            types, statuses, agents, nonascii, counts = set(), set(), set(), False, set()
            for a in got:
                t = emu.fenced_get(a, "transcript").body
                counts.add(t["event_count"])
                agents.add(t["agent_id"])
                self.assertEqual(t["events"][0]["event_type"], "agent_start")
                self.assertEqual(t["events"][-1]["event_type"], "agent_end")
                self.assertEqual(t["session_revision_id"], t["events"][-1]["id"])
                for ev in t["events"]:
                    types.add(ev["event_type"])
                    if ev["event_type"] == "tool_result":
                        statuses.add(ev["payload"]["status"])
                        self.assertIsInstance(ev["payload"]["latency_ms"], int)
                    if ev["event_type"] == "human_input" and any(ord(ch) > 127 for ch in ev["payload"]["text"]):
                        nonascii = True
            self.assertEqual(types, {"agent_start", "human_input", "tool_use", "tool_result",
                                     "model_response", "agent_end"})
            self.assertEqual(statuses, {"ok", "error"})
            self.assertGreater(len(agents), 2)
            self.assertGreater(len(counts), 3)
            self.assertTrue(nonascii)

    def test_transcripts_dir_and_bad_flags(self):
        with tempfile.TemporaryDirectory() as d:
            for i in range(3):
                with open(os.path.join(d, f"t{i}.json"), "w") as f:
                    json.dump({"session_id": f"file-{i}", "events": []}, f)
            with open(os.path.join(d, "ignored.txt"), "w") as f:
                f.write("x")
            with EmulatorProcess("--transcripts", d) as emu:
                self.assertEqual(emu.state()["assignments"]["available"], 3)
                emu.register([])
                sids = sorted(a["session_id"] for a in emu.claim(5).body["assignments"])
                self.assertEqual(sids, ["file-0", "file-1", "file-2"])
            with open(os.path.join(d, "t9.json"), "w") as f:
                f.write("{broken")
            with self.assertRaises(RuntimeError) as cm:
                EmulatorProcess("--transcripts", d).start()
            self.assertIn("t9.json", str(cm.exception))
        for args, needle in ((("--lease-seconds", "10", "--heartbeat-seconds", "10"), "--lease-seconds"),
                             (("--fault-5xx", "2"), "--fault-5xx"),
                             (("--definitions", "/nonexistent.json"), "--definitions")):
            with self.assertRaises(RuntimeError) as cm:
                EmulatorProcess(*args).start()
            self.assertIn(needle, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
