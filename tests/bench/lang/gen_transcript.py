#!/usr/bin/python3
"""Writes a realistic 20,000-event (~7 MB) transcript for the language
benchmark: agent_start, human_input, tool_use / tool_result pairs (ok and
error statuses, latency_ms), model_response (token counts, text, cost),
agent_end; nested payloads, ints and floats, Unicode. Deterministic.

  gen_transcript.py [--events 20000] [--seed 7] [--out PATH]
"""
import argparse
import json
import os
import random
import tempfile

DEFAULT_OUT = os.path.join(tempfile.gettempdir(), "fps-bench-lang", "transcript-20k.json")
TOOLS = ["search", "read_file", "write_file", "run_tests", "http_get", "grep", "list_dir", "sql_query"]
WORDS = ("the agent checked failing test output and found an error in the parser module while the "
         "customer waited patiently résumé naïve café 日本語 данные données 😀 ✓ retry timeout "
         "permission denied connection reset success completed summary token budget").split()
ERRORS = [("ENOENT", "No such file or directory"), ("TIMEOUT", "Operation timed out after 30s"),
          ("E_PERM", "Permission denied"), ("HTTP_502", "Bad gateway — upstream unavailable")]


def sentence(rnd, lo, hi):
    return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(lo, hi))).capitalize() + "."


def build(n_events, seed):
    rnd = random.Random(seed)
    events = []
    t = 0

    def add(kind, payload):
        nonlocal t
        t += rnd.randint(5, 4000)
        sec, ms = divmod(t, 1000)
        hh, rem = divmod(sec, 3600)
        mm, ss = divmod(rem, 60)
        events.append({"id": f"evt-{len(events):06d}", "ts": f"2026-08-{28 + hh // 24:02d}T{hh % 24:02d}:{mm:02d}:{ss:02d}.{ms:03d}000Z",
                       "event_type": kind, "payload": payload})

    add("agent_start", {"agent": "support-agent", "version": "2.3.1",
                        "config": {"model": "m-large", "temperature": 0.2, "max_tokens": 8192, "tools": TOOLS}})
    call = 0
    while len(events) < n_events - 1:
        r = rnd.random()
        if r < 0.06:
            add("human_input", {"text": sentence(rnd, 8, 40), "lang": rnd.choice(["en", "fr", "ja"]),
                                "attachments": [{"name": f"file{rnd.randint(1, 99)}.txt", "bytes": rnd.randint(10, 99999)}
                                                for _ in range(rnd.randint(0, 2))]})
        elif r < 0.72:
            call += 1
            tool = rnd.choice(TOOLS)
            add("tool_use", {"tool_name": tool, "call_id": f"call-{call}",
                             "args": {"query": sentence(rnd, 2, 8), "limit": rnd.randint(1, 100),
                                      "path": f"/srv/app/{rnd.choice(WORDS)}/{rnd.randint(1, 500)}.py"}})
            ok = rnd.random() < 0.85
            payload = {"tool_name": tool, "call_id": f"call-{call}", "status": "ok" if ok else "error",
                       "latency_ms": round(rnd.lognormvariate(4.5, 1.0), 3) if rnd.random() < 0.5 else rnd.randint(1, 5000)}
            if ok:
                payload["output"] = {"lines": rnd.randint(0, 800), "text": sentence(rnd, 5, 30),
                                     "matches": [rnd.randint(1, 1000) for _ in range(rnd.randint(0, 5))]}
            else:
                code, msg = rnd.choice(ERRORS)
                payload["error"] = {"code": code, "message": msg, "retryable": rnd.random() < 0.5}
            add("tool_result", payload)
        else:
            add("model_response", {"text": sentence(rnd, 20, 80),
                                   "tokens": {"input": rnd.randint(200, 30000), "output": rnd.randint(5, 2000)},
                                   "cost_usd": round(rnd.uniform(0.0001, 0.2), 6),
                                   "stop_reason": rnd.choice(["end_turn", "tool_use", "max_tokens"])})
    add("agent_end", {"summary": sentence(rnd, 5, 15), "status": "ok", "turns": call})
    events = events[:n_events]
    return {"schema_version": "2", "assignment_id": "018f47a8-7c1d-7e21-a22a-79f7a4d2bench",
            "session_id": "session-bench", "session_revision_id": events[-1]["id"], "agent_id": "support-agent",
            "environment": "production", "started_at": events[0]["ts"], "ended_at": events[-1]["ts"],
            "event_count": len(events), "events": events}


def write(path, n_events=20000, seed=7):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(build(n_events, seed), fh, ensure_ascii=False)
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="write the 20k-event benchmark transcript")
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=DEFAULT_OUT)
    a = ap.parse_args()
    p = write(a.out, a.events, a.seed)
    print(f"{p}: {os.path.getsize(p)} bytes, {a.events} events")
