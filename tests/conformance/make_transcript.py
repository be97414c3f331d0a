"""Writes tests/conformance/transcript.json: the fixed sample transcript the
conformance corpus and the fuzzer evaluate against (50 events of varied
types, nested payloads, ints/floats/bools/nulls, Unicode). Deterministic."""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))

TOOLS = ["search", "read_file", "write_file", "run_tests", "http_get", "grep"]
TEXTS = ["Done", "Looking into it…", "Café au lait ☕", "日本語のテキスト",
         "emoji 😀 and ZWJ 👩‍💻", "e\u0301 combining", "ß and ﬁ ligature",
         "Tab\tand\nnewline", "ÀÉÎÕÜ", "  padded  ", "UPPER lower Title Case",
         "a,b,,c", "x=1;y=2", "१२३ devanagari digits", "²³ superscripts"]


def build(seed=20261129):
    rnd = random.Random(seed)
    events = []
    t = 0

    def ev(kind, payload):
        nonlocal t
        t += rnd.randint(1, 9000)
        sec, ms = divmod(t, 1000)
        events.append({"id": f"evt-{len(events) + 1:03d}",
                       "ts": f"2026-08-28T11:{(sec // 60) % 60:02d}:{sec % 60:02d}.{ms:03d}000Z",
                       "event_type": kind, "payload": payload})

    ev("agent_start", {"agent": "support-agent", "version": "1.4.2",
                       "config": {"model": "m-large", "temperature": 0.7, "max_tokens": 4096,
                                  "tools": TOOLS[:4], "retries": None, "strict": True}})
    ev("human_input", {"text": "Héllo, can you fix the failing tests? 🙏", "lang": "fr",
                       "attachments": []})
    for i in range(23):
        tool = TOOLS[rnd.randrange(len(TOOLS))]
        ok = rnd.random() < 0.75
        ev("tool_use", {"tool_name": tool, "call_id": f"c{i}",
                        "args": {"query": rnd.choice(TEXTS), "limit": rnd.randint(1, 50),
                                 "flags": [rnd.random() < 0.5 for _ in range(rnd.randint(0, 3))]}})
        res = {"tool_name": tool, "call_id": f"c{i}", "status": "ok" if ok else "error",
               "latency_ms": rnd.randint(3, 2500) if i % 5 else round(rnd.uniform(1, 900), 3)}
        if ok:
            res["output"] = {"lines": rnd.randint(0, 400), "text": rnd.choice(TEXTS),
                             "score": round(rnd.random(), 4)}
        else:
            res["error"] = {"code": rnd.choice(["ENOENT", "TIMEOUT", "E_PERM"]),
                            "message": rnd.choice(TEXTS), "retryable": rnd.random() < 0.5}
        ev("tool_result", res)
        if i % 6 == 5:
            ev("model_response", {"text": rnd.choice(TEXTS),
                                  "tokens": {"input": rnd.randint(100, 9000),
                                             "output": rnd.randint(1, 900)},
                                  "cost_usd": round(rnd.uniform(0, 0.05), 6),
                                  "stop_reason": rnd.choice(["end_turn", "tool_use", None])})
    while len(events) < 49:
        ev("model_response", {"text": rnd.choice(TEXTS),
                              "tokens": {"input": rnd.randint(100, 9000), "output": rnd.randint(1, 900)},
                              "cost_usd": round(rnd.uniform(0, 0.05), 6), "stop_reason": "end_turn"})
    ev("agent_end", {"summary": "Done", "status": "ok", "big": 9007199254740993,
                     "neg": -42, "ratio": 0.1, "tiny": 1e-7, "huge": 1.5e300, "zero": 0.0,
                     "nested": {"a": [1, 2.5, "三", {"b": None, "c": [True, False]}], "d": {}},
                     "unicode": "Ω≈ç√∫˜µ≤≥÷ 🚀"})
    data = {"schema_version": "2", "assignment_id": "018f47a8-7c1d-7e21-a22a-79f7a4d23102",
            "session_id": "session-conf-1", "session_revision_id": events[-1]["id"],
            "agent_id": "support-agent", "environment": "production",
            "started_at": events[0]["ts"], "ended_at": events[-1]["ts"],
            "event_count": len(events), "events": events}
    return data


if __name__ == "__main__":
    with open(os.path.join(HERE, "transcript.json"), "w", encoding="utf-8") as f:
        json.dump(build(), f, ensure_ascii=False, indent=1)
        f.write("\n")
