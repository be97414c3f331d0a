"""The scale corpus: the language at production sizes agrees with CPython.

Runs tests/conformance/scale-corpus.jsonl (ranges up to 10^7, strings of
10^7-10^8 characters, comprehensions of 10^6-10^7 items, nested lists,
dict/set building, sorting 10^6 items, big ints, word counts over a 25 MiB
transcript of text events) through the real `failproofai-sidecar eval
--batch` (so through the jail, default limits) and compares every outcome
with scale-expected.jsonl, CPython 3.11's under RLIMIT_AS 512 MiB and a CPU
limit (gen_scale.py). 100 % agreement, limit kinds included: where CPython
runs out of time, "timeout" or "steps" (the interpreter's step budget is a
time budget too); where it runs out of memory, "memory".

An ASan/UBSan build runs every third case (each sandboxed evaluation is
several times slower there); the plain build runs them all.
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
import gen_scale  # noqa: E402
import oracle  # noqa: E402
from test_conformance import sanitized  # noqa: E402

BIN = os.environ.get("FPS_BIN", os.path.join(ROOT, "build", "failproofai-sidecar"))
BATCHED = 7  # lines per sandbox session in the batched run
OUT_OF_TIME = ({"ok": False, "stage": "limit", "error_type": "timeout"},
               {"ok": False, "stage": "limit", "error_type": "steps"})


def read_jsonl(path):
    with open(path, encoding="utf-8") as fh:
        return [json.loads(ln) for ln in fh.read().split("\n") if ln.strip()]


def agrees(expected, actual):
    if expected == OUT_OF_TIME[0]:
        return actual in OUT_OF_TIME
    return oracle.strict_equal(expected, actual)


class ScaleCorpusTest(unittest.TestCase):
    def run_group(self, cases, transcript, timeout, tmp, session_size):
        path = os.path.join(tmp, "batch.jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps({"kind": c["kind"], "source": c["source"]}) + "\n" for c in cases)
        cmd = [BIN, "eval", "--batch", path, "--timeout", str(timeout), "--max-sandboxes", "2",
               "--session-size", str(session_size)]
        if transcript:
            cmd += ["--transcript", transcript]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        lines = proc.stdout.split("\n")[:-1]
        self.assertEqual(len(lines), len(cases), proc.stderr[-2000:])
        return lines

    def retry_slow(self, cases, expected, transcript, timeout, tmp, alone, batched):
        """A wall-clock limit is a measurement: a case CPython finishes in
        time that ran out of time here, in either run, is run again (alone
        and in a session of its own) with four times the time, so a loaded
        machine (or a sanitizer build) does not pass for a difference. A case
        that runs out of time again keeps that outcome and fails below."""
        for k, (exp, a, b) in enumerate(zip(expected, alone, batched)):
            if exp in OUT_OF_TIME or (json.loads(a) not in OUT_OF_TIME
                                      and json.loads(b) not in OUT_OF_TIME):
                continue
            alone[k] = self.run_group([cases[k]], transcript, 4 * timeout, tmp, 1)[0]
            batched[k] = self.run_group([cases[k]] * 2, transcript, 4 * timeout, tmp, 2)[1]

    def test_scale_corpus_agrees_with_cpython(self):
        cases = read_jsonl(os.path.join(CONF, "scale-corpus.jsonl"))
        expected = read_jsonl(os.path.join(CONF, "scale-expected.jsonl"))
        self.assertEqual(len(cases), len(expected))
        self.assertGreaterEqual(len(cases), 150)
        picked = list(range(len(cases)))
        if sanitized(BIN):
            picked = picked[::3]
        with tempfile.TemporaryDirectory() as tmp:
            text = os.path.join(tmp, "text.json")
            gen_scale.text_transcript(text)
            groups = {}
            for i in picked:
                c = cases[i]
                groups.setdefault((c["session"], c["timeout"]), []).append(i)
            bad, differ = [], []
            for (session, timeout), idx in sorted(groups.items()):
                group = [cases[i] for i in idx]
                transcript = text if session == "text" else None
                alone = self.run_group(group, transcript, timeout, tmp, 1)
                batched = self.run_group(group, transcript, timeout, tmp, BATCHED)
                self.retry_slow(group, [expected[i] for i in idx], transcript, timeout, tmp,
                                alone, batched)
                for i, a, b in zip(idx, alone, batched):
                    if a != b and not (json.loads(a) in OUT_OF_TIME and json.loads(b) in OUT_OF_TIME):
                        differ.append(f"  {cases[i]['source'][:160]!r}\n    alone   {a[:300]}\n    batched {b[:300]}")
                got = [json.loads(ln) for ln in batched]
                for i, act in zip(idx, got):
                    if not agrees(expected[i], act):
                        bad.append(f"  {cases[i]['source'][:160]!r}\n    expected {json.dumps(expected[i])[:300]}"
                                   f"\n    actual   {json.dumps(act)[:300]}")
        self.assertEqual(differ, [], f"{len(differ)} of {len(picked)} scale cases differ between one child "
                         f"per evaluation and sessions of {BATCHED}:\n" + "\n".join(differ[:20]))
        if bad:
            self.fail(f"{len(bad)} of {len(picked)} scale cases disagree with CPython:\n" + "\n".join(bad))


if __name__ == "__main__":
    unittest.main()
