"""Differential fuzzing of the managed-evaluation language against CPython:
5,000 random well-typed expressions (fixed seed) from
tests/conformance/fuzz.py, evaluated by CPython through the oracle and by
`failproofai-sidecar eval --batch`; every outcome must agree. The binary
runs them twice, each evaluation in a sandbox child of its own and batched
in consecutive sessions of 7, and the two runs' outcome lines must be
byte-identical. Cases listed
in tests/conformance/fuzz-known-failures.jsonl are the only disagreements
allowed and must still disagree (the list can only shrink). Long runs:
`tests/conformance/fuzz.py --long --bin build/failproofai-sidecar`.
"""
import os
import sys
import unittest

ROOT = os.environ.get("FPS_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONF = os.path.join(ROOT, "tests", "conformance")
sys.path.insert(0, CONF)
import fuzz  # noqa: E402
from test_conformance import sanitized  # noqa: E402

BIN = os.environ.get("FPS_BIN", os.path.join(ROOT, "build", "failproofai-sidecar"))
SEED = 20261129
COUNT = 5000
BATCHED = 7  # lines per sandbox session in the batched run


class FuzzTest(unittest.TestCase):
    def test_fixed_seed_agrees_with_cpython(self):
        # an ASan/UBSan build is several times slower per sandbox: a quarter there
        count = COUNT // 4 if sanitized(BIN) else COUNT
        lines, expected = fuzz.deterministic_cases(SEED, count)
        self.assertGreaterEqual(len(lines), count * 0.95)
        alone = fuzz.run_binary(BIN, lines, session_size=1)
        actual = fuzz.run_binary(BIN, lines, session_size=BATCHED)
        self.assertEqual(len(actual), len(lines), "one outcome line per input line")
        differ = [i for i, (a, b) in enumerate(zip(alone, actual)) if a != b]
        self.assertEqual(len(alone), len(actual))
        self.assertEqual(differ, [], f"{len(differ)} outcomes differ between one child per evaluation "
                         f"and sessions of {BATCHED}:\n"
                         + "\n".join(f"  {lines[i][:200]}\n    alone   {alone[i][:300]}\n"
                                     f"    batched {actual[i][:300]}" for i in differ[:10]))
        bad = fuzz.compare(lines, expected, actual)
        known_path = os.path.join(CONF, "fuzz-known-failures.jsonl")
        known = set()
        if os.path.exists(known_path):
            with open(known_path, encoding="utf-8") as fh:
                known = {ln for ln in fh.read().split("\n") if ln.strip()} & set(lines)
        failing = {lines[i] for i, _, _, _ in bad}
        new = [b for b in bad if lines[b[0]] not in known]
        fixed = sorted(known - failing)
        msg = []
        if new:
            msg.append(fuzz.report(new, len(lines)))
        if fixed:
            msg.append(f"{len(fixed)} cases of fuzz-known-failures.jsonl now pass; delete them:\n"
                       + "\n".join("  " + f[:300] for f in fixed[:20]))
        if msg:
            self.fail("\n".join(msg))


if __name__ == "__main__":
    unittest.main()
