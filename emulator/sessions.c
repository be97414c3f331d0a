/* emulator/sessions: where assignments come from. A transcript (from
 * --transcripts DIR, POST /emulator/v1/sessions or emulator_add_session) is
 * checked, its missing metadata filled in, the new assignment's id set, and
 * it is serialized once; generated sessions (--sessions N) are realistic,
 * varied agent runs: agent_start, human_input, model_response, tool_use,
 * tool_result (ok/error, latencies), agent_end, with nested payloads, numbers
 * and non-ASCII text, deterministic for a given --seed. */
#include "common/ids.h"
#include "common/canonjson.h"
#include "common/timeutil.h"
#include "emulator/emu_internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *meta_string(json_t *t, const char *key, const char *fallback)
{
    json_t *v = json_object_get(t, key);
    return json_is_string(v) ? json_incref(v) : json_string(fallback);
}

static int check_events(json_t *events, fps_err *err)
{
    for (size_t i = 0; i < json_array_size(events); i++) {
        json_t *ev = json_array_get(events, i);
        char ctx[32];
        const char *s;
        snprintf(ctx, sizeof ctx, "events[%zu]", i);
        if (!json_is_object(ev)) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be an object", ctx);
            return -1;
        }
        if (emu_v_string(ev, "id", ctx, &s, err) || emu_v_string(ev, "ts", ctx, &s, err) ||
            emu_v_string(ev, "event_type", ctx, &s, err))
            return -1;
        if (!json_is_object(json_object_get(ev, "payload"))) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s.payload must be an object", ctx);
            return -1;
        }
    }
    return 0;
}

emu_assignment *emu_sessions_add_json(emulator *e, json_t *t, int raw, fps_err *err)
{
    char id[37], fallback_sid[64], now[40];
    ids_uuid(id);
    long seq = __atomic_add_fetch(&e->session_seq, 1, __ATOMIC_RELAXED);
    snprintf(fallback_sid, sizeof fallback_sid, "session-%ld", seq);
    time_rfc3339_now(now, sizeof now);
    if (!json_is_object(t)) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "transcript must be a JSON object");
        return NULL;
    }
    json_t *events = json_object_get(t, "events");
    json_t *out = NULL;
    long count;
    if (raw) {
        out = json_incref(t);
        json_t *ec = json_object_get(t, "event_count");
        count = json_is_integer(ec) ? (long)json_integer_value(ec) : (long)json_array_size(events);
    } else {
        json_t *sv = json_object_get(t, "schema_version");
        if (sv && !(json_is_string(sv) && !strcmp(json_string_value(sv), "2"))) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "schema_version must be \"2\"");
            return NULL;
        }
        if (!json_is_array(events)) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "events must be an array");
            return NULL;
        }
        if (check_events(events, err) != 0) return NULL;
        count = (long)json_array_size(events);
        json_t *ec = json_object_get(t, "event_count");
        if (ec && !(json_is_integer(ec) && json_integer_value(ec) == count)) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid",
                        "event_count must equal the number of events (%ld)", count);
            return NULL;
        }
        const char *keys[] = {"session_id",  "session_revision_id", "agent_id",
                              "environment", "started_at",          "ended_at"};
        for (size_t i = 0; i < 6; i++) {
            json_t *v = json_object_get(t, keys[i]);
            if (v && !json_is_string(v)) {
                fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be a string", keys[i]);
                return NULL;
            }
        }
        json_t *first = json_array_get(events, 0),
               *last = json_array_get(events, (size_t)count - 1);
        json_t *sid = meta_string(t, "session_id", fallback_sid);
        char rev[200];
        if (last)
            snprintf(rev, sizeof rev, "%s", json_string_value(json_object_get(last, "id")));
        else
            snprintf(rev, sizeof rev, "%s-rev", json_string_value(sid));
        out = json_pack(
            "{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:O}", "schema_version", "2",
            "assignment_id", id, "session_id", sid, "session_revision_id",
            meta_string(t, "session_revision_id", rev), "agent_id",
            meta_string(t, "agent_id", "agent"), "environment",
            meta_string(t, "environment", "production"), "started_at",
            meta_string(t, "started_at",
                        first ? json_string_value(json_object_get(first, "ts")) : now),
            "ended_at",
            meta_string(t, "ended_at", last ? json_string_value(json_object_get(last, "ts")) : now),
            "event_count", (json_int_t)count, "events", events);
        const char *k;
        json_t *v;
        json_object_foreach(t, k, v) if (!json_object_get(out, k)) json_object_set(out, k, v);
    }
    size_t len = 0;
    char *text = canonjson_dumps_ordered(out);
    if (text == NULL) {
        json_decref(out);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "transcript cannot be serialized");
        return NULL;
    }
    len = strlen(text);
    json_t *meta = json_pack("{s:s, s:o, s:o, s:o, s:o}", "assignment_id", id, "session_id",
                             meta_string(out, "session_id", fallback_sid), "session_revision_id",
                             meta_string(out, "session_revision_id", fallback_sid), "agent_id",
                             meta_string(out, "agent_id", "agent"), "environment",
                             meta_string(out, "environment", "production"));
    json_decref(out);
    return emu_state_add_assignment(e, meta, text, len, count);
}

/* ---- generated sessions ---- */

typedef struct {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static long rint_(rng *r, long lo, long hi) /* inclusive */
{
    return lo + (long)(rnext(r) % (uint64_t)(hi - lo + 1));
}

static double rreal(rng *r)
{
    return (double)(rnext(r) >> 11) / 9007199254740992.0;
}

#define PICK(r, arr) ((arr)[rint_(r, 0, (long)(sizeof(arr) / sizeof((arr)[0])) - 1)])

static const char *agents[] = {"support-agent", "research-agent", "coding-agent", "travel-agent",
                               "billing-agent"};
static const char *envs[] = {"production", "production", "production", "staging"};
static const char *models[] = {"claude-sonnet-4", "gpt-4.1", "claude-haiku-4", "gemini-2.5-pro"};
static const char *tools[] = {"search",   "read_file", "write_file", "run_tests",
                              "http_get", "sql_query", "calculator", "send_email"};
static const char *prompts[] = {
    "Can you find the refund policy for order #4521?",
    "Résumé the meeting notes from Tuesday, s'il vous plaît.",
    "请帮我总结这份季度报告的要点。",
    "Переведи этот абзац на английский, пожалуйста.",
    "¿Cuál es el estado de mi pedido 88-1207?",
    "Book a table for 2 tonight 🍣, somewhere near Shibuya.",
    "मेरे खाते का बैलेंस क्या है?",
    "Fix the failing test in billing/invoice_test.py and explain the root cause.",
    "Compare the latency of the EU and US endpoints over the last 24h.",
    "Draft a polite reply to the customer who wrote \"ça ne marche pas\".",
};
static const char *errors[] = {"TimeoutError", "PermissionDenied", "RateLimited", "NotFound",
                               "ValidationError"};
static const char *answers[] = {
    "Here is what I found: the policy allows refunds within 30 days.",
    "Done. The root cause was an off-by-one in the date range — fixed and tested.",
    "Le résumé est prêt : trois décisions, deux actions ouvertes.",
    "已完成：收入增长 12%，成本下降 3%。",
    "I could not complete the request; the upstream service kept timing out.",
};

static json_t *generate_one(emulator *e, long index)
{
    rng r = {e->seed * 0x2545F4914F6CDD1DULL + (uint64_t)index * 0x9E3779B97F4A7C15ULL + 1};
    double t = 1787911200.0 + (double)index * 37.0; /* 2026-08-28T10:00:00Z + index */
    char sid[64], ts[40], evid[96];
    snprintf(sid, sizeof sid, "session-%06ld-%04llx", index,
             (unsigned long long)(rnext(&r) & 0xffff));
    const char *agent = PICK(&r, agents), *model = PICK(&r, models);
    json_t *events = json_array();
    long n = 0;
#define EVENT(type, payload)                                                                       \
    do {                                                                                           \
        t += 0.05 + rreal(&r) * 3.0;                                                               \
        time_rfc3339(t, ts, sizeof ts);                                                            \
        snprintf(evid, sizeof evid, "evt-%s-%03ld", sid + 8, n++);                                 \
        json_array_append_new(events, json_pack("{s:s, s:s, s:s, s:o}", "id", evid, "ts", ts,      \
                                                "event_type", type, "payload", payload));          \
    } while (0)
    char started[40];
    time_rfc3339(t, started, sizeof started);
    EVENT("agent_start",
          json_pack("{s:s, s:s, s:{s:f, s:i, s:[s,s]}}", "agent_name", agent, "model", model,
                    "config", "temperature", (double)rint_(&r, 0, 10) / 10.0, "max_tokens",
                    (int)(1024 * rint_(&r, 1, 8)), "tools", PICK(&r, tools), PICK(&r, tools)));
    EVENT("human_input", json_pack("{s:s, s:s}", "text", PICK(&r, prompts), "channel",
                                   rint_(&r, 0, 1) ? "chat" : "email"));
    long turns = rint_(&r, 1, 6);
    int failed_all = 1;
    long input_tokens = 0, output_tokens = 0;
    for (long k = 0; k < turns; k++) {
        long in_t = rint_(&r, 200, 6000), out_t = rint_(&r, 20, 800);
        input_tokens += in_t;
        output_tokens += out_t;
        EVENT("model_response",
              json_pack("{s:s, s:s, s:{s:I, s:I}, s:I, s:s, s:f}", "model", model, "text",
                        "Let me look that up.", "tokens", "input", (json_int_t)in_t, "output",
                        (json_int_t)out_t, "latency_ms", (json_int_t)rint_(&r, 150, 4000),
                        "finish_reason", "tool_use", "cost_usd",
                        (double)(in_t * 3 + out_t * 15) / 1e6));
        const char *tool = PICK(&r, tools);
        char call_id[32];
        snprintf(call_id, sizeof call_id, "call_%ld_%ld", index, k);
        EVENT("tool_use", json_pack("{s:s, s:s, s:{s:s, s:i, s:{s:s, s:b}}}", "tool_name", tool,
                                    "tool_call_id", call_id, "input", "query", PICK(&r, prompts),
                                    "limit", (int)rint_(&r, 1, 50), "filters", "lang",
                                    rint_(&r, 0, 1) ? "en" : "fr", "exact", (int)rint_(&r, 0, 1)));
        long latency = rint_(&r, 5, 2500);
        if (rint_(&r, 0, 99) < 82) {
            failed_all = 0;
            long count = rint_(&r, 0, 5);
            json_t *items = json_array();
            for (long j = 0; j < count; j++)
                json_array_append_new(items,
                                      json_pack("{s:I, s:f, s:s}", "rank", (json_int_t)j + 1,
                                                "score", rreal(&r), "title", PICK(&r, answers)));
            EVENT("tool_result",
                  json_pack("{s:s, s:s, s:s, s:I, s:{s:o, s:I}}", "tool_name", tool, "tool_call_id",
                            call_id, "status", "ok", "latency_ms", (json_int_t)latency, "output",
                            "items", items, "count", (json_int_t)count));
        } else {
            const char *etype = PICK(&r, errors);
            EVENT("tool_result",
                  json_pack("{s:s, s:s, s:s, s:I, s:{s:s, s:s, s:b}}", "tool_name", tool,
                            "tool_call_id", call_id, "status", "error", "latency_ms",
                            (json_int_t)latency, "error", "type", etype, "message",
                            "upstream returned an error", "retryable", (int)rint_(&r, 0, 1)));
        }
    }
    const char *answer = failed_all ? answers[4] : PICK(&r, answers);
    EVENT("model_response",
          json_pack("{s:s, s:s, s:{s:I, s:I}, s:I, s:s, s:f}", "model", model, "text", answer,
                    "tokens", "input", (json_int_t)rint_(&r, 500, 9000), "output",
                    (json_int_t)rint_(&r, 50, 900), "latency_ms", (json_int_t)rint_(&r, 200, 5000),
                    "finish_reason", "end_turn", "cost_usd", rreal(&r) / 50.0));
    EVENT("agent_end",
          json_pack("{s:s, s:s, s:I, s:I}", "status", failed_all ? "failure" : "success", "summary",
                    answer, "total_tokens", (json_int_t)(input_tokens + output_tokens), "turns",
                    (json_int_t)turns));
#undef EVENT
    json_t *last = json_array_get(events, json_array_size(events) - 1);
    return json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:o}", "schema_version", "2",
                     "session_id", sid, "session_revision_id", json_object_get(last, "id"),
                     "agent_id", agent, "environment", PICK(&r, envs), "started_at", started,
                     "ended_at", ts, "events", events);
}

void emu_sessions_generate(emulator *e, long n)
{
    for (long i = 0; i < n; i++) {
        long index = atomic_fetch_add(&e->gen_index, 1);
        json_t *t = generate_one(e, index);
        fps_err err;
        emu_sessions_add_json(e, t, 0, &err);
        json_decref(t);
    }
}

static int json_file(const struct dirent *d)
{
    size_t l = strlen(d->d_name);
    return l > 5 && !strcmp(d->d_name + l - 5, ".json");
}

int emu_sessions_load_dir(emulator *e, const char *dir, fps_err *err)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, json_file, alphasort);
    if (n < 0) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "--transcripts %s: cannot read the directory",
                    dir);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        fps_err inner;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        json_error_t jerr;
        json_t *t = rc == 0 ? json_load_file(path, JSON_REJECT_DUPLICATES, &jerr) : NULL;
        if (rc == 0 && t == NULL) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "--transcripts: %s: %s (line %d)", path,
                        jerr.text, jerr.line);
            rc = -1;
        } else if (rc == 0 && emu_sessions_add_json(e, t, 0, &inner) == NULL) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "--transcripts: %s: %s", path, inner.msg);
            rc = -1;
        }
        json_decref(t);
        free(names[i]);
    }
    free(names);
    return rc;
}
