"""The binary's command line: version, help, unknown commands and flags, and
`eval`/`check` as a CI step: exit codes (docs/LANGUAGE.md), the optional
transcript, compile-error positions and the shipped example."""
import ast
import json
import os
import re
import subprocess
import tempfile
import unittest

BIN = os.environ["FPS_BIN"]
ROOT = os.environ.get("FPS_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")


def run(*args, env=None, stdin=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, env=env,
                          input=stdin)


def help_flags(cmd):
    return set(re.findall(r"^  (--[a-z-]+)", run(cmd, "--help").stdout, re.M))


class CliTest(unittest.TestCase):
    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^failproofai-sidecar \d+\.\d+\.\d+\n$")

    def test_help_lists_commands(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ("run", "eval", "check", "emulator", "demo"):
            self.assertIn(cmd, r.stdout)

    def test_each_command_help(self):
        for cmd in ("run", "eval", "check", "emulator", "demo"):
            r = run(cmd, "--help")
            self.assertEqual(r.returncode, 0, cmd)
            self.assertIn("usage: failproofai-sidecar " + cmd, r.stdout)

    def test_run_help_names_env(self):
        r = run("run", "--help")
        self.assertIn("FAILPROOFAI_EVALUATOR_URL", r.stdout)
        self.assertIn("--server", r.stdout)

    def test_unknown_command(self):
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", r.stderr)
        self.assertIn("--help", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_unknown_flag(self):
        r = run("run", "--frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown flag '--frobnicate'", r.stderr)

    def test_bad_config_is_one_line(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAILPROOFAI_")}
        env["FAILPROOFAI_EVALUATOR_TOKEN"] = "secret-token-value"
        r = run("run", "--server", "http://evaluator.example.com", env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("https", r.stderr)
        self.assertNotIn("secret-token-value", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)


    def test_memory_budget_below_base_plus_one_sandbox_is_refused(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAILPROOFAI_")}
        env["FAILPROOFAI_EVALUATOR_TOKEN"] = "secret-token-value"
        # nothing listens on port 1: the check comes before any server call
        args = ("run", "--server", "http://127.0.0.1:1", "--db", ":memory:",
                "--listen", "127.0.0.1:0")
        r = run(*args, "--memory-limit-mb", "40", env=env)
        self.assertEqual(r.returncode, 2, r.stderr[-2000:])
        lines = [l for l in r.stderr.splitlines() if l.startswith("failproofai-sidecar: ")]
        self.assertEqual(len(lines), 1, r.stderr[-2000:])
        m = re.search(r"memory budget \(40 MiB\) is below the process tree at start \((\d+) MiB\)"
                      r" plus one sandbox reservation \(--sandbox-reserve-mb 64\): give "
                      r"--memory-limit-mb at least (\d+)", lines[0])
        self.assertIsNotNone(m, lines[0])
        self.assertEqual(int(m.group(2)), int(m.group(1)) + 64)
        # the environment variable and a smaller reservation move the bound
        env["FAILPROOFAI_SIDECAR_MEMORY_LIMIT_MB"] = "40"
        r = run(*args, "--sandbox-reserve-mb", "100", env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("memory budget (40 MiB)", r.stderr)
        self.assertIn("--sandbox-reserve-mb 100", r.stderr)
        # a flag out of range is a usage error naming it
        r = run(*args, "--sandbox-reserve-mb", "0", env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--sandbox-reserve-mb", r.stderr)

    def test_each_command_help_lists_only_its_flags(self):
        self.assertIn("--transcript", help_flags("eval"))
        self.assertIn("--eval-key", help_flags("eval"))
        check = help_flags("check")
        self.assertNotIn("--transcript", check)
        self.assertNotIn("--eval-key", check)
        for flag in ("--expr", "--file", "--batch", "--kind", "--strict"):
            self.assertIn(flag, check)
        for cmd in ("eval", "check"):
            text = run(cmd, "--help").stdout
            self.assertIn("exit codes", text)
            for flag in help_flags(cmd) - {"--help"}:  # every listed flag is accepted
                value = {"--strict": (), "--sandbox-memory-mb": ("64",)}.get(flag, ("1",))
                r = run(cmd, flag, *value, "--help")
                self.assertEqual(r.returncode, 0, (cmd, flag, r.stderr))
        r = run("check", "--transcript", "x.json", "--expr", "1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown flag '--transcript'", r.stderr)


class EvalExitCodeTest(unittest.TestCase):
    """Exit codes exactly as docs/LANGUAGE.md says: single source 0 ok / 1 not ok,
    --batch 0 unless --strict, 2 on usage errors."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.batch = os.path.join(cls.tmp.name, "mixed.jsonl")
        with open(cls.batch, "w", encoding="utf-8") as f:
            f.write(json.dumps({"kind": "raw", "source": "1 + 1"}) + "\n")
            f.write(json.dumps({"kind": "raw", "source": "1 / 0"}) + "\n")
        cls.good = os.path.join(cls.tmp.name, "good.jsonl")
        with open(cls.good, "w", encoding="utf-8") as f:
            f.write(json.dumps({"kind": "raw", "source": "1 + 1"}) + "\n")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def outcome(self, r, code):
        self.assertEqual(r.returncode, code, (r.stdout, r.stderr))
        return json.loads(r.stdout)

    def test_single_expression(self):
        self.assertEqual(self.outcome(run("eval", "--kind", "raw", "--expr", "1 + 1"), 0),
                         {"ok": True, "repr": "2"})
        o = self.outcome(run("eval", "--kind", "raw", "--expr", "1 / 0"), 1)
        self.assertEqual((o["stage"], o["error_type"]), ("runtime", "ZeroDivisionError"))
        o = self.outcome(run("eval", "--kind", "raw", "--expr", "1 +"), 1)
        self.assertEqual(o["stage"], "compile")
        self.assertEqual(self.outcome(run("check", "--expr", "session.count('x')"), 0), {"ok": True})
        self.assertEqual(self.outcome(run("check", "--expr", "lambda: 1"), 1)["stage"], "compile")
        src = os.path.join(self.tmp.name, "bad.py")
        with open(src, "w", encoding="utf-8") as f:
            f.write("EvalResult(score=Score(2.0))\n")
        o = self.outcome(run("eval", "--file", src), 1)
        self.assertEqual((o["stage"], o["error_type"]), ("runtime", "ValueError"))

    def test_batch_and_strict(self):
        for cmd, extra, code in (("eval", (), 0), ("eval", ("--strict",), 1),
                                 ("check", (), 0), ("check", ("--strict",), 0)):
            r = run(cmd, "--batch", self.batch, *extra)
            self.assertEqual(r.returncode, code, (cmd, extra, r.stderr))
            self.assertEqual(len(r.stdout.splitlines()), 2)
        self.assertEqual(run("eval", "--batch", self.good, "--strict").returncode, 0)
        r = run("check", "--batch", "-", "--strict",
                stdin=json.dumps({"kind": "raw", "source": "a b"}) + "\n")
        self.assertEqual(r.returncode, 1)

    def test_usage_errors_exit_2(self):
        for args in (("eval",), ("eval", "--expr", "1", "--batch", "-"), ("eval", "--bogus"),
                     ("eval", "--expr", "1", "--kind", "nope"),
                     ("eval", "--file", os.path.join(self.tmp.name, "missing.py")),
                     ("eval", "--expr", "1", "--transcript", os.path.join(self.tmp.name, "no.json")),
                     ("check", "--batch", os.path.join(self.tmp.name, "missing.jsonl"))):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertEqual(r.stdout, "", args)

    def test_without_transcript_the_session_is_empty(self):
        o = self.outcome(run("eval", "--kind", "raw", "--expr",
                             "(session.event_count, len(session.events), session.count('tool_use'))"),
                         0)
        self.assertEqual(o["repr"], "(0, 0, 0)")

    def test_compile_errors_carry_line_and_column(self):
        """1-based line and column (code points) where the syntax error was
        found, as CPython's SyntaxError.lineno/offset report it for these
        sources; the message is the reference's, unchanged."""
        cases = ["a b", "x = 1", "1 +\n", "(1,\n 2 +)", "1\n2", "\u00e9 \u00e9", "$",
                 "'abc"]
        for src in cases:
            with self.assertRaises(SyntaxError) as cm:
                ast.parse(src, mode="eval")
            o = self.outcome(run("check", "--expr", src), 1)
            self.assertEqual(o["message"], "evaluator_source must be one expression", src)
            self.assertEqual((o["line"], o["column"]), (cm.exception.lineno, cm.exception.offset),
                             repr(src))
        # CRLF counts as one line break
        o = self.outcome(run("check", "--kind", "condition", "--expr", "(1,\r\n 2 +)"), 1)
        self.assertEqual((o["message"], o["line"], o["column"]),
                         ("condition_source must be one expression", 2, 5))
        # an error inside a string literal points at the literal
        o = self.outcome(run("check", "--expr", "1 + f'{1 +}'"), 1)
        self.assertEqual((o["line"], o["column"]), (1, 5))
        # the same fields from eval
        o = self.outcome(run("eval", "--kind", "raw", "--expr", "1\n2"), 1)
        self.assertEqual((o["line"], o["column"]), (2, 1))
        # rejections of a well-formed tree have no position (nor in the reference)
        o = self.outcome(run("check", "--expr", "lambda: 1"), 1)
        self.assertNotIn("line", o)
        self.assertEqual(o["message"], "evaluator_source contains disallowed syntax: Lambda")

    def test_batch_lines_name_their_transcripts(self):
        """A line's "transcript" (a file path) replaces --transcript for that
        line; consecutive lines on one transcript share a sandbox session,
        which never changes an outcome (--session-size 1: each alone); an
        unusable transcript makes its line an "input" outcome and exit 2,
        the other lines still evaluated."""
        paths = []
        for n in (1, 2):
            p = os.path.join(self.tmp.name, f"t{n}.json")
            with open(p, "w", encoding="utf-8") as f:
                json.dump({"schema_version": "2", "assignment_id": "a", "session_id": f"s{n}",
                           "session_revision_id": "r", "agent_id": "g", "environment": "e",
                           "started_at": "2026-01-01T00:00:00.000000Z",
                           "ended_at": "2026-01-01T00:00:01.000000Z", "event_count": 0,
                           "events": []}, f)
            paths.append(p)
        src = "session.session_id"
        lines = [{"kind": "raw", "source": src},
                 {"kind": "raw", "source": src, "transcript": paths[0]},
                 {"kind": "raw", "source": src, "transcript": paths[0]},
                 {"kind": "raw", "source": src, "transcript": paths[1]},
                 {"kind": "raw", "source": src, "transcript": None},
                 {"kind": "raw", "source": src, "transcript": paths[0]}]
        text = "".join(json.dumps(x) + "\n" for x in lines)
        want = ["''", "'s1'", "'s1'", "'s2'", "''", "'s1'"]
        outs = []
        for size in ("1", "2", "64"):
            r = run("eval", "--batch", "-", "--session-size", size, stdin=text)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([json.loads(x)["repr"] for x in r.stdout.splitlines()], want, size)
            outs.append(r.stdout)
        self.assertEqual(len(set(outs)), 1)
        # with --transcript, lines without their own use it
        r = run("eval", "--batch", "-", "--transcript", paths[1], stdin=text)
        self.assertEqual([json.loads(x)["repr"] for x in r.stdout.splitlines()],
                         ["'s2'", "'s1'", "'s1'", "'s2'", "'s2'", "'s1'"])
        bad = [{"kind": "raw", "source": "1", "transcript": os.path.join(self.tmp.name, "no.json")},
               {"kind": "raw", "source": "2", "transcript": 7},
               {"kind": "raw", "source": "3", "transcript": "-"},
               {"kind": "raw", "source": "4", "transcript": paths[0]}]
        r = run("eval", "--batch", "-", stdin="".join(json.dumps(x) + "\n" for x in bad))
        self.assertEqual(r.returncode, 2, r.stderr)
        got = [json.loads(x) for x in r.stdout.splitlines()]
        self.assertEqual([o["stage"] for o in got[:3]], ["input"] * 3)
        self.assertIn("batch line 1: transcript", got[0]["message"])
        self.assertIn("cannot read", got[0]["message"])
        self.assertEqual(got[1]["message"], 'batch line 2: "transcript" must be a file path')
        self.assertIn("standard input", got[2]["message"])
        self.assertEqual(got[3], {"ok": True, "repr": "4"})
        self.assertIn("3 malformed batch lines", r.stderr)

    def test_example_transcript_and_batch(self):
        r = run("eval", "--transcript", os.path.join(EXAMPLES, "transcript.json"), "--batch",
                os.path.join(EXAMPLES, "checks.jsonl"), "--strict")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        self.assertTrue(lines and all(o["ok"] for o in lines), lines)


if __name__ == "__main__":
    unittest.main()
