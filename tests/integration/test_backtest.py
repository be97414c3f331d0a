"""`failproofai-sidecar backtest` against known differences: a v1 and a v2
of four definitions that differ on a known set of sessions (a threshold
change, a new KeyError, a fixed error, a changed condition). The test
computes what each session's outcome must be itself, from the sessions it
generated, and checks the summary's counts, the rows, --fail-on-regression,
and that three shards' rows merge to the unsharded summary."""

import hashlib
import hmac
import http.server
import json
import os
import threading
import subprocess
import tempfile
import unittest

BIN = os.environ.get("FPS_BIN", "failproofai-sidecar")

V1 = [
    # passes when there are at least 3 tool calls
    {"eval_key": "enough_tools", "eval_version": "1", "result_kind": "score",
     "evaluator_source": "EvalResult(score=Score(session.count('tool_use') / 10, "
                         "passed=session.count('tool_use') >= 3))"},
    # v1 is fine; v2 reads a payload key that only some sessions have
    {"eval_key": "has_flag", "eval_version": "1", "result_kind": "assertion",
     "evaluator_source": "EvalResult(assertions={'has_flag': Assertion(session.count('user_message') > 0)})"},
    # v1 raises KeyError on sessions without 'region'; v2 fixes it
    {"eval_key": "region_ok", "eval_version": "1", "result_kind": "assertion",
     "evaluator_source": "EvalResult(assertions={'region_ok': Assertion("
                         "session.events_of_type('user_message')[0].payload['region'] == 'eu')})"},
    # v2 selects only sessions with a tool call
    {"eval_key": "msg_count", "eval_version": "1", "result_kind": "metric",
     "evaluator_source": "EvalResult(metrics={'msg_count': Metric(session.count('user_message'))})"},
]
V2 = json.loads(json.dumps(V1))
V2[0]["evaluator_source"] = V2[0]["evaluator_source"].replace(">= 3", ">= 5")
V2[1]["evaluator_source"] = ("EvalResult(assertions={'has_flag': Assertion("
                             "session.events_of_type('user_message')[0].payload['flag'])})")
V2[2]["evaluator_source"] = ("EvalResult(assertions={'region_ok': Assertion("
                             "session.events_of_type('user_message')[0].payload.get('region') == 'eu')})")
V2[3]["condition_source"] = "session.count('tool_use') > 0"


def transcript(i, tools, flag, region):
    payload = {"text": "hello"}
    if flag is not None:
        payload["flag"] = flag
    if region is not None:
        payload["region"] = region
    events = [{"id": "u%d" % i, "ts": "2026-01-01T00:00:00.000000Z", "event_type": "user_message",
               "payload": payload}]
    for t in range(tools):
        events.append({"id": "t%d_%d" % (i, t), "ts": "2026-01-01T00:00:01.000000Z",
                       "event_type": "tool_use", "payload": {"tool_name": "x"}})
    return {"schema_version": "2", "assignment_id": "a%d" % i, "session_id": "s%03d" % i,
            "session_revision_id": "r%d" % i, "agent_id": "agent", "environment": "test",
            "started_at": "2026-01-01T00:00:00.000000Z", "ended_at": "2026-01-01T00:01:00.000000Z",
            "event_count": len(events), "events": events}


SESSIONS = []
for i in range(24):
    SESSIONS.append(dict(tools=i % 7, flag=(None if i % 3 == 0 else i % 2 == 0),
                         region=(None if i % 4 == 0 else ("eu" if i % 5 else "us"))))


def expected():
    """Per key: what the summary must count, computed from the sessions."""
    e = {k: dict(sessions=0, evaluated=0, skipped=0, changed=0, pass_to_fail=0, fail_to_pass=0,
                 new_errors=0, fixed_errors=0, eb=0, ec=0)
         for k in ("enough_tools", "has_flag", "region_ok", "msg_count")}
    for s in SESSIONS:
        for k in e:
            e[k]["sessions"] += 1
        t = s["tools"]
        # enough_tools: threshold 3 -> 5; score value unchanged
        c = e["enough_tools"]
        c["evaluated"] += 1
        if (t >= 3) != (t >= 5):
            c["changed"] += 1
            c["pass_to_fail"] += 1
        # has_flag: v1 always True; v2 KeyError without flag, else the flag
        c = e["has_flag"]
        c["evaluated"] += 1
        if s["flag"] is None:
            c["changed"] += 1
            c["new_errors"] += 1
            c["ec"] += 1
        elif s["flag"] is False:
            c["changed"] += 1
            c["pass_to_fail"] += 1
        # region_ok: v1 KeyError without region, v2 fixes it (False)
        c = e["region_ok"]
        c["evaluated"] += 1
        if s["region"] is None:
            c["changed"] += 1
            c["fixed_errors"] += 1
            c["eb"] += 1
        # msg_count: v2 skips sessions without tools
        c = e["msg_count"]
        if t == 0:
            c["skipped"] += 1
            c["changed"] += 1
        else:
            c["evaluated"] += 1
    return e


class BacktestCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.v1, cls.v2 = os.path.join(d, "v1.json"), os.path.join(d, "v2.json")
        json.dump(V1, open(cls.v1, "w"))
        json.dump(V2, open(cls.v2, "w"))
        cls.sess_dir = os.path.join(d, "sessions")
        os.mkdir(cls.sess_dir)
        # half as files in a directory, half as JSON lines, plus one bad line
        with open(os.path.join(d, "more.jsonl"), "w") as f:
            for i, s in enumerate(SESSIONS):
                t = transcript(i, s["tools"], s["flag"], s["region"])
                if i % 2:
                    json.dump(t, open(os.path.join(cls.sess_dir, "s%03d.json" % i), "w"), indent=1)
                else:
                    f.write(json.dumps(t) + "\n")
            f.write("{not json\n")
        cls.jsonl = os.path.join(d, "more.jsonl")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_bt(self, *args, check=True):
        p = subprocess.run([BIN, "backtest", *args], capture_output=True, text=True, timeout=600)
        if check:
            self.assertIn(p.returncode, (0, 1), p.stderr)
        return p

    def summary(self, *args):
        p = self.run_bt("--definitions", self.v2, "--baseline", self.v1, "--sessions",
                        self.sess_dir, "--sessions", self.jsonl, "--format", "json", "--jobs", "2",
                        *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_pinning_changes_no_outcome(self):
        # --jobs 2 on 2 or more CPUs keeps each job and its sandboxes on a
        # CPU of its own by default; --no-pin leaves them to the scheduler.
        # The rows (in whatever order the jobs finish) and the summary are
        # the same either way.
        rows = {}
        sums = {}
        for name, extra in (("pinned", ()), ("unpinned", ("--no-pin",))):
            out = os.path.join(self.tmp.name, "rows-%s.jsonl" % name)
            sums[name] = self.summary("--out", out, *extra)
            rows[name] = sorted(open(out).read().splitlines())
        self.assertEqual(sums["pinned"], sums["unpinned"])
        self.assertEqual(rows["pinned"], rows["unpinned"])
        self.assertEqual(len(rows["pinned"]), len(SESSIONS) * 4 + 1)

    def test_counts_equal_the_independent_ones(self):
        out = os.path.join(self.tmp.name, "rows.jsonl")
        s = self.summary("--out", out)
        self.assertEqual(s["sessions"], len(SESSIONS))
        self.assertEqual(len(s["input_errors"]), 1)
        self.assertIn("more.jsonl:%d" % (len(SESSIONS) // 2 + 1), s["input_errors"][0]["source"])
        exp = expected()
        got = {k["eval_key"]: k for k in s["eval_keys"]}
        self.assertEqual(sorted(got), sorted(exp))
        for key, e in exp.items():
            g = got[key]
            for f in ("sessions", "evaluated", "skipped", "changed", "pass_to_fail",
                      "fail_to_pass", "new_errors", "fixed_errors"):
                self.assertEqual(g[f], e[f], "%s.%s" % (key, f))
            self.assertEqual(g["errors"], {"baseline": e["eb"], "candidate": e["ec"]}, key)
            self.assertEqual(g["no_baseline"], 0)
            self.assertLessEqual(len(g["top_changed"]), 10)
        self.assertEqual(got["has_flag"]["top_errors"]["candidate"],
                         [{"error_type": "KeyError", "count": exp["has_flag"]["ec"]}])
        # the threshold change moves no score: deltas are 0
        self.assertEqual(got["enough_tools"]["max_abs_delta"], 0.0)
        lines = [json.loads(l) for l in open(out)]
        # the input errors are lines of their own, for --merge
        self.assertEqual([l for l in lines if "input_error" in l],
                         [{"input_error": e} for e in s["input_errors"]])
        rows = [l for l in lines if "input_error" not in l]
        self.assertEqual(len(rows), len(SESSIONS) * 4)
        for r in rows:
            self.assertEqual(set(r), {"session_id", "eval_key", "baseline", "candidate", "changed",
                                      "deltas"})
        n_changed = sum(r["changed"] for r in rows)
        self.assertEqual(n_changed, sum(e["changed"] for e in exp.values()))

    def test_fail_on_regression_exits_1(self):
        p = self.run_bt("--definitions", self.v2, "--baseline", self.v1, "--sessions",
                        self.sess_dir, "--fail-on-regression")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("enough_tools", p.stdout)  # the table
        # the same definitions on both sides: nothing changed, exit 0
        p = self.run_bt("--definitions", self.v1, "--baseline", self.v1, "--sessions",
                        self.sess_dir, "--fail-on-regression", "--format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        for k in json.loads(p.stdout)["eval_keys"]:
            self.assertEqual(k["changed"], 0, k["eval_key"])

    def test_three_shards_merge_to_the_unsharded_summary(self):
        whole = self.summary()
        files = []
        for k in range(3):
            f = os.path.join(self.tmp.name, "shard%d.jsonl" % k)
            self.summary("--shard", "%d/3" % k, "--out", f)
            files.append(f)
        args = []
        for f in files:
            args += ["--merge", f]
        p = self.run_bt(*args, "--format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        merged = json.loads(p.stdout)
        self.assertEqual(merged["eval_keys"], whole["eval_keys"])
        self.assertEqual(merged["sessions"], whole["sessions"])
        # the malformed transcript: every shard reads it (it has no session id
        # to shard by) and reports it; the merge reports it once, as the
        # unsharded run does
        self.assertEqual(len(whole["input_errors"]), 1)
        per_shard = [sum("input_error" in json.loads(l) for l in open(f)) for f in files]
        self.assertEqual(per_shard, [1, 1, 1])
        self.assertEqual(merged["input_errors"], whole["input_errors"])

    def test_merge_keeps_every_shards_input_errors(self):
        """Input errors only some shards saw, and one all saw (a definition
        that does not compile), merge into the unsharded list, each once."""
        broken = json.loads(json.dumps(V2)) + [
            {"eval_key": "broken", "eval_version": "1", "result_kind": "score",
             "evaluator_source": "EvalResult(score=Score("}]
        defs = os.path.join(self.tmp.name, "v2_broken.json")
        with open(defs, "w") as f:
            json.dump(broken, f)
        bad = os.path.join(self.tmp.name, "bad")
        os.makedirs(bad, exist_ok=True)
        for i in range(4):
            with open(os.path.join(bad, "bad%d.json" % i), "w") as f:
                f.write('{"schema_version": "2", "events": [' if i % 2 else "not json %d" % i)

        def run(*extra):
            p = self.run_bt("--definitions", defs, "--baseline", self.v1, "--sessions",
                            self.sess_dir, "--sessions", bad, "--format", "json", *extra)
            self.assertEqual(p.returncode, 0, p.stderr)
            return json.loads(p.stdout)

        whole = run()
        self.assertEqual(len(whole["input_errors"]), 5, whole["input_errors"])
        files = []
        for k in range(3):
            f = os.path.join(self.tmp.name, "bshard%d.jsonl" % k)
            run("--shard", "%d/3" % k, "--out", f)
            files.append(f)
        args = []
        for f in files:
            args += ["--merge", f]
        p = self.run_bt(*args, "--format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        merged = json.loads(p.stdout)
        key = lambda e: (e["source"], e["message"])
        self.assertEqual(sorted(merged["input_errors"], key=key),
                         sorted(whole["input_errors"], key=key))
        self.assertEqual(merged["eval_keys"], whole["eval_keys"])
        # a shard's rows file alone keeps its input errors too
        one = json.loads(self.run_bt("--merge", files[0], "--format", "json").stdout)
        self.assertEqual(sorted(one["input_errors"], key=key), sorted(whole["input_errors"], key=key))

    def test_local_endpoint_gets_the_signed_dispatch(self):
        """--local sends enough_tools to a local judge (score = tool calls /
        20, passing from 3): the signature checks with the secret file's key,
        and the judge's answers are the candidate's outcomes."""
        secret = "s3cret-for-the-judge"
        sfile = os.path.join(self.tmp.name, "secret")
        with open(sfile, "w") as f:
            f.write(secret + "\n")
        seen = {"ok": 0, "bad": 0}

        class Judge(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                f = dict(kv.split("=", 1) for kv in self.headers.get("X-FailproofAI-Signature", "").split(","))
                mac = hmac.new(secret.encode(), f.get("t", "").encode() + b"." + body,
                               hashlib.sha256).hexdigest()
                good = hmac.compare_digest(mac, f.get("v1", ""))
                seen["ok" if good else "bad"] += 1
                run = json.loads(body)
                tools = sum(e["event_type"] == "tool_use" for e in run["transcript"]["events"])
                out = json.dumps({"score": {"value": tools / 20, "passed": tools >= 3}}).encode()
                self.send_response(200 if good else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Judge)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.shutdown)
        url = "http://127.0.0.1:%d/run" % srv.server_address[1]
        s = self.summary("--local", "enough_tools=" + url, "--local-secret-file", sfile,
                         "--local-concurrency", "2")
        self.assertEqual(seen, {"ok": len(SESSIONS), "bad": 0})
        k = {e["eval_key"]: e for e in s["eval_keys"]}["enough_tools"]
        self.assertEqual(k["errors"]["candidate"], 0, k)
        self.assertEqual(k["pass_to_fail"] + k["fail_to_pass"], 0, k)
        # v1's score is tools / 10: every session with a tool call changed by tools / 20
        self.assertEqual(k["changed"], sum(1 for x in SESSIONS if x["tools"] > 0))
        self.assertAlmostEqual(k["max_abs_delta"], max(x["tools"] for x in SESSIONS) / 20)

    def test_a_definition_that_does_not_compile_is_reported_once(self):
        bad = json.loads(json.dumps(V1))
        bad[3]["evaluator_source"] = "EvalResult(metrics={'msg_count': Metric(\n  1 +)})"
        path = os.path.join(self.tmp.name, "bad.json")
        json.dump(bad, open(path, "w"))
        p = self.run_bt("--definitions", path, "--baseline", self.v1, "--sessions", self.sess_dir,
                        "--format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout)
        errs = [e for e in s["input_errors"] if "definitions[3]" in e["source"]]
        self.assertEqual(len(errs), 1, s["input_errors"])
        self.assertRegex(errs[0]["message"], r"^line 2, column \d+: ")
        k = {e["eval_key"]: e for e in s["eval_keys"]}
        n = len(SESSIONS) // 2
        self.assertEqual(k["msg_count"]["new_errors"], n)
        self.assertEqual(k["msg_count"]["top_errors"]["candidate"],
                         [{"error_type": "compile_error", "count": n}])
        self.assertEqual(k["enough_tools"]["changed"], 0)

    def test_the_indexed_job_manifest_runs_as_written(self):
        """deploy/backtest-job.yaml: its shard count matches completions and
        parallelism, and its pod's command, run here for every index over
        these sessions, merges to the unsharded summary."""
        import yaml
        src = os.environ.get("FPS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
        docs = [d for d in yaml.safe_load_all(open(os.path.join(src, "deploy", "backtest-job.yaml"))) if d]
        cm = next(d for d in docs if d["kind"] == "ConfigMap")
        job = next(d for d in docs if d["kind"] == "Job")
        spec = job["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        n = spec["completions"]
        self.assertEqual(spec["parallelism"], n)
        c = spec["template"]["spec"]["containers"][0]
        script = c["args"][0]
        self.assertIn('--shard "$JOB_COMPLETION_INDEX/%d"' % n, script)
        root = os.path.join(self.tmp.name, "job")
        for sub in ("definitions", "out"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        for name, text in cm["data"].items():
            open(os.path.join(root, "definitions", name), "w").write(text)
        script = script.replace("/backtest/sessions", self.sess_dir).replace("/backtest", root)
        script = script.replace("exec failproofai-sidecar", "exec " + BIN)
        for k in range(n):
            p = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True,
                               env=dict(os.environ, JOB_COMPLETION_INDEX=str(k)), timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
        merge = []
        for k in range(n):
            merge += ["--merge", os.path.join(root, "out", "rows-%d.jsonl" % k)]
        merged = json.loads(self.run_bt(*merge, "--format", "json").stdout)
        whole = json.loads(self.run_bt(
            "--definitions", os.path.join(root, "definitions", "candidate.json"), "--baseline",
            os.path.join(root, "definitions", "baseline.json"), "--sessions", self.sess_dir,
            "--format", "json").stdout)
        self.assertEqual(merged["eval_keys"], whole["eval_keys"])
        self.assertEqual(merged["sessions"], whole["sessions"])

    def test_usage_errors_exit_2(self):
        for args in (["--sessions", self.sess_dir],
                     ["--definitions", self.v2, "--sessions", self.sess_dir, "--shard", "3/3"],
                     ["--definitions", self.v2, "--sessions", self.sess_dir, "--format", "xml"],
                     ["--definitions", "/nonexistent", "--sessions", self.sess_dir],
                     ["--definitions", self.jsonl, "--sessions", self.sess_dir]):
            p = self.run_bt(*args, check=False)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn("backtest", p.stderr)


    def test_unreadable_archive_fails_with_its_reason(self):
        # no archive beside --db, then a file that is not a database there
        db = os.path.join(self.tmp.name, "none.db")
        archive = db + ".archive"
        p = self.run_bt("--definitions", self.v2, "--db", db, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertIn(f"backtest: the transcript archive {archive} cannot be read: store: archive:"
                      f" open: {archive} does not exist\n", p.stderr)
        with open(archive, "wb") as f:
            f.write(b"not a database\n" * 100)
        p = self.run_bt("--definitions", self.v2, "--db", db, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"backtest: the transcript archive {archive} cannot be read: store: archive:"
                      " read entries: file is not a database\n", p.stderr)

if __name__ == "__main__":
    unittest.main()
