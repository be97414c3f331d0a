"""Hash flooding: a session whose text holds words crafted to collide in the
interpreter's dict must not be able to stall an evaluation.

The words are chosen against the unseeded hash the interpreter once used
(FNV-1a with a final xor-shift) and its linear probing: every word's index
lands in the first 1/16 of the 2^18-slot table that 131,072 keys need, so
inserting them walked one ever-longer run of occupied slots (about 5 s,
against 0.05 s for the same number of ordinary words). With SipHash-1-3
under a per-process random key and CPython's perturbed probing they are
ordinary words, so `{w: 1 for w in text.split()}` finishes well inside a
short timeout. Runs through the real `eval` CLI and the jail.
"""
import json
import os
import subprocess
import tempfile
import unittest

ROOT = os.environ.get("FPS_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("FPS_BIN", os.path.join(ROOT, "build", "failproofai-sidecar"))

N_WORDS = 131072
TABLE_MASK = (1 << 18) - 1
WINDOW = 1 << 14
M64 = (1 << 64) - 1


def old_hash(word):
    """The former str hash: 64-bit FNV-1a, then h ^= h >> 29."""
    h = 1469598103934665603
    for ch in word:
        h = ((h ^ ch) * 1099511628211) & M64
    return h ^ (h >> 29)


def colliding_words():
    words, i = [], 0
    while len(words) < N_WORDS:
        w = b"w%x" % i
        i += 1
        if old_hash(w) & TABLE_MASK < WINDOW:
            words.append(w.decode())
    return words


def transcript(text):
    return {
        "schema_version": "2", "assignment_id": "flood", "session_id": "flood",
        "session_revision_id": "r", "agent_id": "a", "environment": "e",
        "started_at": "2026-01-01T00:00:00.000000Z", "ended_at": "2026-01-01T00:00:01.000000Z",
        "event_count": 1,
        "events": [{"id": "1", "ts": "2026-01-01T00:00:00.000000Z", "event_type": "message",
                    "payload": {"text": text}}],
    }


class HashFloodTest(unittest.TestCase):
    def eval_raw(self, path, source, timeout):
        proc = subprocess.run([BIN, "eval", "--transcript", path, "--kind", "raw", "--timeout", str(timeout),
                               "--expr", source], capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def test_colliding_words_finish_inside_a_short_timeout(self):
        words = colliding_words()
        self.assertEqual(len(set(words)), N_WORDS)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "flood.json")
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(transcript(" ".join(words)), fh)
            text = "session.events[0].payload['text'].split()"
            for source in (f"len({{w: 1 for w in {text}}})", f"len({{w for w in {text}}})",
                           f"len(dict([(w, 1) for w in {text}]))"):
                with self.subTest(source=source):
                    self.assertEqual(self.eval_raw(path, source, 3), {"ok": True, "repr": str(N_WORDS)})
            # Dict order stays insertion order.
            self.assertEqual(self.eval_raw(path, f"list({{w: 1 for w in {text}}})[:3] + [{text}[-1]]", 3),
                             {"ok": True, "repr": repr(words[:3] + [words[-1]])})


if __name__ == "__main__":
    unittest.main()
