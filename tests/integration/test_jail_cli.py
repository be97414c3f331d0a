"""`eval` and `check` through the sandbox jail (sidecar/cmd_eval.c,
sandbox/jail/sbx_*.c): usage errors, batch order, the reference SDK's
sandbox-escape attempts and the resource bombs the jail must bound, each
contained within its budget with the evaluating process unaffected."""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

BIN = os.environ["FPS_BIN"]
CONTRACT = os.environ.get("FPS_CONTRACT")


def run(*args, stdin=None, timeout=120):
    return subprocess.run([BIN, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def sample_transcript():
    if CONTRACT and os.path.exists(CONTRACT):
        with open(CONTRACT, encoding="utf-8") as f:
            return json.load(f)["samples"]["transcript_response"]
    return {
        "protocol_version": "2", "schema_version": "2", "assignment_id": "a", "session_id": "s",
        "session_revision_id": "r", "agent_id": "agent", "environment": "test",
        "started_at": "2026-08-28T12:00:00.000000Z", "ended_at": "2026-08-28T12:00:01.000000Z",
        "event_count": 1,
        "events": [{"id": "e1", "ts": "2026-08-28T12:00:00.000000Z", "event_type": "tool_use",
                    "payload": {"k": "v", "tool_name": "search"}}],
    }


class JailCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.transcript = os.path.join(cls.tmp.name, "t.json")
        with open(cls.transcript, "w", encoding="utf-8") as f:
            json.dump(sample_transcript(), f)
        r = run("eval", "--transcript", cls.transcript, "--kind", "raw", "--expr", "1 + 1")
        line = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
        cls.interpreter = line.get("ok") is True

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def need_interpreter(self):
        self.assertTrue(self.interpreter, "the sandbox language must evaluate 1+1")

    def batch(self, items, *extra, timeout=300):
        text = "".join(json.dumps(i) + "\n" for i in items)
        r = run("eval", "--transcript", self.transcript, "--batch", "-", *extra, stdin=text,
                timeout=timeout)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), len(items), r.stdout)
        return [json.loads(x) for x in lines], lines

    # ---- usage ----

    def test_usage_errors_exit_2(self):
        cases = [
            ("eval", "--transcript", self.transcript),  # no source
            ("eval", "--transcript", self.transcript, "--expr", "1", "--file", "x"),
            ("eval", "--transcript", self.transcript, "--expr", "1", "--kind", "lambda"),
            ("eval", "--transcript", self.transcript, "--expr", "1", "--timeout", "61"),
            ("eval", "--transcript", self.transcript, "--bogus"),
            ("check",),
        ]
        for args in cases:
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertEqual(r.stdout, "", args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, (args, r.stderr))

    def test_unreadable_or_invalid_transcript(self):
        r = run("eval", "--transcript", os.path.join(self.tmp.name, "missing.json"), "--expr", "1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.json", r.stderr)
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        r = run("eval", "--transcript", bad, "--expr", "1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("bad.json", r.stderr)
        r = run("eval", "--transcript", self.transcript, "--file",
                os.path.join(self.tmp.name, "nope.py"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("nope.py", r.stderr)

    def test_batch_keeps_input_order_and_flags_bad_lines(self):
        items = [{"kind": "raw", "source": f"{i} * 3"} for i in range(12)]
        text = "".join(json.dumps(i) + "\n" for i in items)
        text += "\n"  # blank lines are skipped
        text += "not json\n" + json.dumps({"kind": "weird", "source": "1"}) + "\n"
        text += json.dumps({"source": 5}) + "\n"
        r = run("eval", "--transcript", self.transcript, "--batch", "-", stdin=text)
        self.assertEqual(r.returncode, 2, r.stderr)  # malformed input lines
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        self.assertEqual(len(lines), 15)
        for o in lines[12:]:
            self.assertEqual(o["stage"], "input")
            self.assertFalse(o["ok"])
        if self.interpreter:
            self.assertEqual([o["repr"] for o in lines[:12]], [str(i * 3) for i in range(12)])
        else:
            for o in lines[:12]:
                self.assertIn(o["stage"], ("compile", "runtime"))

    def test_batch_from_file_and_check(self):
        path = os.path.join(self.tmp.name, "batch.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"kind": "condition", "source": "session.event_count > 0"}) + "\n")
            f.write(json.dumps({"kind": "evaluator", "source": "EvalResult(score=Score(1.0))",
                                "eval_key": "k"}) + "\n")
        r = run("eval", "--transcript", self.transcript, "--batch", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 2)
        r = run("check", "--batch", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 2)
        r = run("check", "--expr", "import os")
        self.assertEqual(r.returncode, 1)
        o = json.loads(r.stdout)
        self.assertEqual(o["ok"], False)
        self.assertEqual(o["stage"], "compile")
        if self.interpreter:
            self.assertEqual(o["message"], "evaluator_source must be one expression")
            r = run("check", "--kind", "condition", "--expr", "session.event_count > 0")
            self.assertEqual(json.loads(r.stdout), {"ok": True})

    # ---- escapes (reference SDK sandbox tests, plus ours) ----

    ESCAPES = [
        # test_restricted_expressions_reject_escape_primitives
        "__import__('os').system('id')",
        "session.__class__",
        "(lambda: 1)()",
        "[x for x in ().__class__.__base__.__subclasses__()]",
        # format / format_map traversal
        '"{0.__class__.__init__.__globals__[__builtins__][__import__]}".format(session)',
        '"{0.__class__}".format(session)',
        'str.format("{0.__class__}", session)',
        '"{a.__class__}".format_map({"a": session})',
        'EvalResult(score=Score(0.5), reasoning="{0.__class__}".format(session))',
        # generator / frame / code introspection, mro, live functions
        "EvalResult(score=Score(0.5), reasoning=str((x for x in [1]).gi_frame.f_globals))",
        "EvalResult(score=Score(0.5), reasoning=str((x for x in [1]).gi_code))",
        'EvalResult(score=Score(0.5), reasoning=str((x for x in [1]).gi_frame.f_globals.update({"P": 1})))',
        "EvalResult(score=Score(0.5), reasoning=str(str.mro()[-1]))",
        "EvalResult(score=Score(0.5), reasoning=str(int.mro()))",
        "EvalResult(score=Score(0.5), reasoning=str(EvalResult.result_items))",
        "EvalResult(score=Score(1.0), reasoning=str((x for x in [1])))",
        # bare bound methods (pointer-revealing reprs)
        "EvalResult(score=Score(1.0), reasoning=str(session.events[0].payload.get))",
        "EvalResult(score=Score(1.0), summary=str(''.join))",
        "EvalResult(score=Score(1.0, display_value=str('x'.encode)))",
        "EvalResult(score=Score(1.0), labels=(str('a,b'.split),))",
        'EvalResult(score=Score(1.0), reasoning=str(dict().get).replace("<", ""))',
        'EvalResult(score=Score(1.0), reasoning=f"{session.events[0].payload.get}")',
        'EvalResult(score=Score(1.0), reasoning="%s" % session.events[0].payload.get)',
        # statements, oversized, pow bombs
        "import os",
        "x" * (128 * 1024 + 1),
        "EvalResult(score=Score(10 ** 65))",
        # our own: private names, walrus, star-args, builtins not bound
        "_x",
        "(y := 1)",
        "max(*[1, 2])",
        "open('/etc/passwd')",
        "getattr(session, 'events')",
        "vars()",
        "globals()",
        "EvalResult(score=Score(1.0), reasoning=str(enumerate([1])))",
        "EvalResult(score=Score(1.0), reasoning=str(len))",
        "EvalResult(score=Score(1.0), reasoning=repr(session))",
        "EvalResult(score=Score(1.0), reasoning=str(type(session)))",
    ]

    def test_escape_attempts_are_rejected_or_contained(self):
        self.need_interpreter()
        items = [{"kind": "evaluator", "source": s, "eval_key": "q"} for s in self.ESCAPES]
        outcomes, lines = self.batch(items, "--timeout", "10")
        secret_env = {k: v for k, v in os.environ.items() if len(v) >= 6}
        for src, o, line in zip(self.ESCAPES, outcomes, lines):
            with self.subTest(src=src[:80]):
                # Nothing reveals an address or the environment.
                self.assertIsNone(re.search(r"0x[0-9a-fA-F]{6,}", line), line)
                for k, v in secret_env.items():
                    self.assertNotIn(v, line, k)
                if not o["ok"]:
                    self.assertIn(o["stage"], ("compile", "runtime"), line)
        by_src = dict(zip(self.ESCAPES, outcomes))
        for src in self.ESCAPES[:26] + self.ESCAPES[26:29]:
            self.assertEqual(by_src[src]["stage"], "compile", src[:80])
        self.assertEqual(by_src["EvalResult(score=Score(1.0), reasoning=str(enumerate([1])))"],
                         {"ok": False, "stage": "runtime", "error_type": "NameError"})
        self.assertEqual(by_src["open('/etc/passwd')"]["error_type"], "NameError")

    # ---- bombs ----

    BOMBS = [
        "EvalResult(score=Score(1.0), reasoning=str(sum(range(10**12))))",
        "sum(range(10**12)) > 0",
        "len([(a, b, c) for a in range(10**4) for b in range(10**4) for c in range(10**4)])",
        "len([0] * 10**9)",
        "len('x' * 10**10)",
        "len(str(((10**64)**64)**64))",
        "EvalResult(score=Score(1.0), metrics={'m' + str(i): float(i) for i in range(100000)})",
        "EvalResult(score=Score(1.0), reasoning='y' * 10**7)",
        "len(list(range(10**8)))",
        "(" * 100000 + ")" * 100000,
        "-" * 200000 + "1",
        "[" * 5000 + "]" * 5000,
        "{'a': [" * 1000 + "1" + "]}" * 1000,
    ]

    def test_bombs_end_within_budget_and_leave_the_evaluator_unaffected(self):
        self.need_interpreter()
        budget = 5.0
        items = [{"kind": "raw" if not b.startswith("EvalResult") else "evaluator",
                  "source": b, "eval_key": "q"} for b in self.BOMBS]
        items.append({"kind": "raw", "source": "session.event_count + 1"})
        start = time.monotonic()
        outcomes, lines = self.batch(items, "--timeout", str(budget))
        elapsed = time.monotonic() - start
        # 4 slots, 13 bombs: at most ceil(13/4) budgets back to back.
        self.assertLess(elapsed, 4 * budget + 15)
        for src, o, line in zip(self.BOMBS, outcomes, lines):
            with self.subTest(src=src[:60]):
                self.assertFalse(o["ok"], line)
                self.assertIn(o["stage"], ("limit", "runtime", "compile"), line)
                if o["stage"] == "limit":
                    self.assertIn(o["error_type"], ("timeout", "memory", "steps", "output"))
        self.assertEqual(outcomes[-1]["ok"], True, lines[-1])

    def test_single_cpu_bomb_is_bounded_by_its_timeout(self):
        self.need_interpreter()
        start = time.monotonic()
        r = run("eval", "--transcript", self.transcript, "--kind", "raw", "--timeout", "1",
                "--expr", "sum(range(10**12))")
        self.assertEqual(r.returncode, 1, r.stderr)
        o = json.loads(r.stdout)
        self.assertEqual(o["stage"], "limit")
        self.assertLess(time.monotonic() - start, 6)


if __name__ == "__main__":
    unittest.main()
