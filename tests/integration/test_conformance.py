"""Conformance of the managed-evaluation language with CPython.

Runs every line of tests/conformance/corpus.jsonl through
`failproofai-sidecar eval --transcript tests/conformance/transcript.json
--batch FILE` twice: once with each evaluation in a sandbox child of its own
(--session-size 1) and once batched, consecutive groups of 7 lines sharing
one sandbox session (--session-size 7). The two runs' outcome lines must be
byte-identical (a session gives each evaluation the state and budgets it has
alone), and the batched run's outcomes are compared with
tests/conformance/expected.jsonl (CPython's, written by gen_corpus.py) as
parsed JSON with exact types (1 != 1.0 != true; floats compared exactly; the
raw `repr` strings compared as text).

Cases listed in tests/conformance/known-failures.jsonl (corpus input lines,
verbatim) are the only disagreements allowed, and they must still disagree:
the test checks that list EXACTLY, so it can only shrink.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("FPS_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONF = os.path.join(ROOT, "tests", "conformance")
sys.path.insert(0, CONF)
import oracle  # noqa: E402

BIN = os.environ.get("FPS_BIN", os.path.join(ROOT, "build", "failproofai-sidecar"))
TRANSCRIPT = os.path.join(CONF, "transcript.json")
CHUNK = 3000


def sanitized(binary):
    """True for an ASan/UBSan build: every sandboxed evaluation is several
    times slower there, so that pass runs every 4th corpus line (the plain
    build runs them all)."""
    try:
        with open(binary, "rb") as fh:
            return b"__asan_init" in fh.read()
    except OSError:
        return False


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [ln for ln in fh.read().split("\n") if ln.strip()]


BATCHED = 7  # lines per sandbox session in the batched run


def run_batch(lines, session_size=BATCHED):
    out = []
    for start in range(0, len(lines), CHUNK):
        part = lines[start:start + CHUNK]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as fh:
            fh.write("\n".join(part) + "\n")
            path = fh.name
        try:
            proc = subprocess.run([BIN, "eval", "--transcript", TRANSCRIPT, "--batch", path,
                                   "--session-size", str(session_size)],
                                  capture_output=True, timeout=1200)
        finally:
            os.unlink(path)
        if proc.returncode != 0:
            raise AssertionError(f"eval --batch exited {proc.returncode} on lines {start}..: "
                                 f"{proc.stderr.decode(errors='replace')[-2000:]}")
        got = proc.stdout.split(b"\n")[:-1]
        if len(got) != len(part):
            raise AssertionError(f"eval --batch wrote {len(got)} lines for {len(part)} inputs (from line {start})")
        out.extend(got)
    return out


def first_differences(alone, batched, inputs, limit=10):
    """The lines where two runs' outcome bytes differ, for a failure message."""
    text = []
    for i, (a, b) in enumerate(zip(alone, batched)):
        if a != b:
            text.append(f"  line {i + 1}: {inputs[i][:200]}\n    alone   {a[:300]!r}\n    batched {b[:300]!r}")
            if len(text) == limit:
                break
    return "\n".join(text)


def without_position(outcome):
    """A compile outcome's "line"/"column" (where a syntax error was found)
    are diagnostics the reference's message does not carry; test_cli checks
    them. The rest is compared."""
    if isinstance(outcome, dict) and outcome.get("stage") == "compile":
        outcome.pop("line", None)
        outcome.pop("column", None)
    return outcome


def disagreements(lines, expected, actual):
    bad = []
    for inp, exp, act in zip(lines, expected, actual):
        try:
            same = oracle.strict_equal(json.loads(exp), without_position(json.loads(act)))
        except ValueError:
            same = False
        if not same:
            bad.append((inp, exp, act))
    return bad


def describe(bad, limit=20):
    text = []
    for inp, exp, act in bad[:limit]:
        case = json.loads(inp)
        text.append(f"  {case['kind']} {case['source'][:300]!r}"
                    + (f" eval_key={case['eval_key']!r}" if "eval_key" in case else ""))
        text.append(f"    expected {exp[:500]}")
        text.append(f"    actual   {act[:500]}")
    return "\n".join(text)


class ConformanceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        lines = read_lines(os.path.join(CONF, "corpus.jsonl"))
        expected = read_lines(os.path.join(CONF, "expected.jsonl"))
        if sanitized(BIN):
            lines, expected = lines[::4], expected[::4]
        cls.lines, cls.expected = lines, expected
        cls.alone = run_batch(lines, 1)
        cls.batched = run_batch(lines, BATCHED)

    def test_batched_outcomes_equal_alone(self):
        self.assertEqual(len(self.alone), len(self.batched))
        same = sum(a == b for a, b in zip(self.alone, self.batched))
        self.assertEqual(same, len(self.lines),
                         f"{len(self.lines) - same} of {len(self.lines)} outcomes differ between "
                         f"one child per evaluation and sessions of {BATCHED}:\n"
                         + first_differences(self.alone, self.batched, self.lines))

    def test_corpus_matches_cpython(self):
        lines, expected = self.lines, self.expected
        self.assertGreaterEqual(len(read_lines(os.path.join(CONF, "corpus.jsonl"))), 2000)
        self.assertEqual(len(lines), len(expected))
        actual = [ln.decode("utf-8", errors="replace") for ln in self.batched]
        bad = disagreements(lines, expected, actual)
        known = set(read_lines(os.path.join(CONF, "known-failures.jsonl"))) & set(lines)
        failing = {inp for inp, _, _ in bad}
        new = [b for b in bad if b[0] not in known]
        fixed = sorted(known - failing)
        msg = []
        if new:
            msg.append(f"{len(new)} of {len(lines)} corpus cases disagree with CPython "
                       f"({len(bad)} in all, {len(known)} known):\n" + describe(new))
        if fixed:
            msg.append(f"{len(fixed)} cases of known-failures.jsonl now pass; delete them from the file:\n"
                       + "\n".join("  " + f[:300] for f in fixed[:20]))
        if msg:
            self.fail("\n".join(msg))


if __name__ == "__main__":
    unittest.main()
