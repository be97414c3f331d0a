"""Every sample message of tests/fixtures/evaluator-v2.json (FPS_CONTRACT)
is accepted or produced as written by the emulator, in one protocol walk:
register, claim, transcript, definitions, plan, heartbeat, result, error."""

import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from emulator_harness import EmulatorProcess, load_contract, source_checksum  # noqa: E402

CONTRACT = load_contract()
S = CONTRACT["samples"]


def shape(value):
    """The JSON type structure of a value (numbers unified: 30 and 30.0)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "string"


class ContractSamples(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sample_def = S["definitions_response"]["definitions"][0]
        run = S["plan_response"]["runs"][0]
        managed = [
            {
                "eval_key": sample_def["eval_key"],
                "eval_version": sample_def["eval_version"],
                "display_name": sample_def["display_name"],
                "result_kind": sample_def["result_kind"],
                "labels": sample_def["labels"],
                "condition_source": sample_def["condition_source"],
                "evaluator_source": run["evaluator_source"],
                "timeout_seconds": sample_def["timeout_seconds"],
            },
            {
                "eval_key": "answer_groundedness",
                "eval_version": "2.1.0",
                "display_name": "Answer groundedness",
                "result_kind": "score",
                "labels": [],
                "condition_source": "session.count('retrieval') > 0",
                "evaluator_source": "EvalResult(score=Score(0.5))",
                "timeout_seconds": None,
            },
        ]
        cls.defs = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(managed, cls.defs)
        cls.defs.close()
        cls.emu = EmulatorProcess("--definitions", cls.defs.name)
        cls.emu.start()

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()
        os.unlink(cls.defs.name)

    def test_contract_walk(self):
        emu = self.emu
        # The sample transcript becomes the session (its assignment_id is the emulator's).
        t = copy.deepcopy(S["transcript_response"])
        del t["assignment_id"]
        added = emu.add_session(t)
        self.assertEqual(added.status, 201, added)
        aid = added.body["assignment_id"]

        # register_request as written (its catalog_revision is checked).
        r = emu.request("POST", CONTRACT["http"]["register"], S["register_request"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(shape(r.body), shape(S["register_response"]))
        self.assertEqual(r.body["evaluator_kind"], S["register_response"]["evaluator_kind"])
        t = CONTRACT["timing"]
        self.assertEqual((r.body["heartbeat_interval_seconds"], r.body["lease_duration_seconds"],
                          r.body["poll_interval_seconds"], r.body["claim_limit"]),
                         (t["heartbeat_interval_seconds"], t["lease_duration_seconds"],
                          t["poll_interval_seconds"], S["register_response"]["claim_limit"]))

        # claim_request as written, three times (two forced expiries) so the
        # lease reaches generation 3 like the samples.
        for gen in (1, 2, 3):
            c = emu.request("POST", CONTRACT["http"]["claim"], S["claim_request"])
            self.assertEqual(c.status, 200, c)
            self.assertEqual(shape(c.body), shape(S["claim_response"]))
            a = c.body["assignments"][0]
            self.assertEqual((a["assignment_id"], a["lease_generation"]), (aid, gen))
            if gen < 3:
                self.assertEqual(emu.expire(aid).status, 200)
        want = S["claim_response"]["assignments"][0]
        for k in ("session_id", "session_revision_id", "agent_id", "environment", "trigger_reason"):
            self.assertEqual(a[k], want[k], k)
        self.assertEqual(a["event_count"], S["transcript_response"]["event_count"])
        self.assertEqual(a["transcript_url"], CONTRACT["http"]["transcript"].format(assignment_id=aid))
        self.assertEqual(a["definitions_url"], CONTRACT["http"]["definitions"].format(assignment_id=aid))

        worker = S["claim_request"]["worker_id"]
        tr = emu.fenced_get(a, "transcript", worker_id=worker)
        self.assertEqual(tr.status, 200, tr)
        self.assertEqual(tr.body, dict(S["transcript_response"], assignment_id=aid))

        d = emu.fenced_get(a, "definitions", worker_id=worker)
        self.assertEqual(d.status, 200, d)
        self.assertEqual(shape(d.body), shape(S["definitions_response"]))
        self.assertEqual(d.body["catalog_revision"], S["definitions_response"]["catalog_revision"])
        # The sample's managed descriptor, byte for byte (a managed definition
        # takes precedence over the catalog's definition of the same key).
        self.assertEqual(d.body["definitions"][0], S["definitions_response"]["definitions"][0])
        self.assertEqual(S["definitions_response"]["definitions"][0]["source_checksum"],
                         source_checksum(None, S["plan_response"]["runs"][0]["evaluator_source"]))
        self.assertEqual({x["eval_key"] for x in d.body["definitions"]},
                         {"tool_efficiency", "answer_groundedness"})

        # plan_request as written.
        p = emu.request("POST", CONTRACT["http"]["plan"].format(assignment_id=aid), S["plan_request"])
        self.assertEqual(p.status, 200, p)
        want = copy.deepcopy(S["plan_response"])
        run_id = p.body["runs"][0]["evaluation_run_id"]
        want["assignment_id"] = aid
        want["runs"][0]["evaluation_run_id"] = run_id
        self.assertEqual(p.body, want)

        # heartbeat_request as written but for the run the emulator created.
        hb = copy.deepcopy(S["heartbeat_request"])
        hb["runs"][0]["evaluation_run_id"] = run_id
        h = emu.request("POST", CONTRACT["http"]["heartbeat"], hb)
        self.assertEqual(h.status, 200, h)
        self.assertEqual(shape(h.body), shape(S["heartbeat_response"]))
        self.assertEqual(h.body["accepted_run_ids"], [run_id])

        # result_request as written.
        path = CONTRACT["http"]["result"].format(evaluation_run_id=run_id)
        res = emu.request("POST", path, S["result_request"])
        self.assertEqual(res.status, 200, res)
        want = dict(S["result_response"], evaluation_run_id=run_id, result_checksum=res.body["result_checksum"])
        self.assertEqual(res.body, want)
        again = emu.request("POST", path, S["result_request"])
        self.assertEqual(again.body, dict(want, idempotent_replay=True))
        self.assertEqual(emu.assignment(aid)["status"], "completed")
        committed = emu.runs()
        self.assertEqual(committed[0]["result"], S["result_request"])

        # error_response: a fenced call from an old generation.
        stale = dict(S["plan_request"], lease_generation=2)
        e = emu.request("POST", CONTRACT["http"]["plan"].format(assignment_id=aid), stale)
        self.assertEqual(e.status, CONTRACT["errors"]["lease_lost"]["http_status"])
        self.assertEqual(shape(e.body), shape(S["error_response"]))
        self.assertEqual({k: v for k, v in e.body["error"].items() if k != "request_id"},
                         {k: v for k, v in S["error_response"]["error"].items() if k != "request_id"})

    def test_error_codes_match_the_contract_table(self):
        """Every error the emulator produces carries the contract's status and
        retryable flag. (plan_conflict and retry_budget_exhausted are never
        produced: a later plan is always an idempotent replay, and a lease on a
        dead-lettered assignment is simply lost.)"""
        emu = self.emu
        seen = {}

        def note(r):
            self.assertIsNotNone(r.code, r)
            seen[r.code] = (r.status, r.body["error"]["retryable"])

        note(emu.register([], token="wrong"))
        note(emu.request("POST", CONTRACT["http"]["claim"], {"protocol_version": "9"}))
        note(emu.request("POST", CONTRACT["http"]["claim"], {"protocol_version": "2"}))
        note(emu.register([], revision="sha256:00"))
        emu.register([])
        note(emu.claim(1, definitions=[{"eval_key": "x", "display_name": "x", "eval_version": "1",
                                        "result_kind": "score", "labels": []}]))
        note(emu.request("GET", "/v1/evaluator/assignments/none/transcript",
                         headers={"X-FailproofAI-Worker-Id": "w", "X-FailproofAI-Lease-Generation": "1"}))
        note(emu.result("none", emu.result_body(1)))
        emu.add_session({"events": []})
        a = emu.claim(1).body["assignments"][0]
        note(emu.fenced_get(a, "transcript", generation=7))
        note(emu.plan(a, []))
        with EmulatorProcess("--max-transcript-bytes", "10", "--sessions", "1", "--fault-5xx", "0") as small:
            small.register([])
            b = small.claim(1).body["assignments"][0]
            note(small.fenced_get(b, "transcript"))
        with EmulatorProcess("--token", "t:disabled", "--fault-5xx", "1") as off:
            note(off.register([], token="t"))
        with EmulatorProcess("--fault-5xx", "1") as faulty:
            note(faulty.register([]))
        p = emu.plan(a, [], [(d["eval_key"], d["eval_version"], "condition_false")
                             for d in emu.fenced_get(a, "definitions").body["definitions"]])
        self.assertEqual(p.status, 200)
        for code, (status, retryable) in seen.items():
            with self.subTest(code=code):
                spec = CONTRACT["errors"][code]
                self.assertEqual((status, retryable), (spec["http_status"], spec["retryable"]))
        self.assertGreaterEqual(len(seen), 12, seen)


if __name__ == "__main__":
    unittest.main()
