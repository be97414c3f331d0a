"""Writes a realistic transcript of N events (default 20,000, about 7 MB) as
the protocol's transcript_response JSON. usage: gen_transcript.py OUT [N]"""
import json
import random
import sys


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    rnd = random.Random(7)
    tools = ["search", "read_file", "write_file", "run_tests", "http_get", "sql_query"]
    words = ("the agent looked at the ticket and decided to search the knowledge base for "
             "similar incidents before answering the customer about their refund request "
             "überprüfung naïve café 東京 données").split()
    events = []
    for i in range(n):
        kind = ["human_input", "tool_use", "tool_result", "model_response"][i % 4]
        if i == 0:
            kind = "agent_start"
        elif i == n - 1:
            kind = "agent_end"
        text = " ".join(rnd.choice(words) for _ in range(rnd.randint(20, 50)))
        payload = {"text": text}
        if kind == "tool_use":
            payload = {"tool_name": rnd.choice(tools), "arguments": {"query": text[:80], "limit": rnd.randint(1, 50)}}
        elif kind == "tool_result":
            payload = {"status": rnd.choice(["ok", "ok", "ok", "error"]), "latency_ms": rnd.randint(5, 3000),
                       "output": text, "tokens": {"input": rnd.randint(10, 900), "output": rnd.randint(10, 900)}}
        elif kind == "model_response":
            payload = {"model": "m-1", "content": text, "usage": {"prompt_tokens": rnd.randint(100, 4000),
                       "completion_tokens": rnd.randint(10, 800)}, "score": rnd.random()}
        events.append({"id": f"evt-{i:06d}", "ts": f"2026-08-28T12:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000000:06d}Z",
                       "event_type": kind, "payload": payload})
    transcript = {
        "schema_version": "2", "assignment_id": "018f47a8-7c1d-7e21-a22a-79f7a4d23102",
        "session_id": "session-big", "session_revision_id": "rev-big", "agent_id": "support-agent",
        "environment": "production", "started_at": "2026-08-28T11:58:00.000000Z",
        "ended_at": "2026-08-28T14:00:00.000000Z", "event_count": n, "events": events,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(transcript, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
