/* emulator/inspect: the inspection API under /emulator/v1/ (loopback
 * clients only, no auth; server.c enforces the loopback rule):
 *   GET  state                 counts of assignments and runs, protocol counters
 *   GET  runs                  committed runs with their result bodies
 *   GET  assignments/{id}      one assignment: status, lease, attempts, runs
 *   POST sessions              a transcript JSON becomes a new assignment
 *                              (?raw=1 serves it unmodified; ?generate=N adds
 *                              N generated sessions instead)
 *   POST expire/{id}           the assignment's lease ends now
 *   POST canonical             the body's canonical JSON (as catalog_revision
 *                              hashes it) and, for a catalog array, its
 *                              revision: lets tests compare with Python
 *   GET  faults                the fault rates in force
 *   POST faults                changes them at run time ({"fault_5xx",
 *                              "fault_drop", "fault_lease_loss": rates in
 *                              [0, 1], "fault_latency_ms": 0..60000; each
 *                              optional}): outages and recoveries */
#include "common/timeutil.h"
#include "common/canonjson.h"
#include "emulator/emu_internal.h"

#include <stdlib.h>
#include <string.h>

json_t *emu_state_json(emulator *e)
{
    pthread_mutex_lock(&e->mu);
    emu_state_sweep(e, time_now());
    json_t *as = json_object();
    for (int s = 0; s < AS_NSTATUS; s++)
        json_object_set_new(as, emu_status_name((emu_as_status)s),
                            json_integer(e->status_count[s]));
    json_t *resp = json_pack("{s:o, s:{s:I, s:I}, s:I}", "assignments", as, "runs", "committed",
                             (json_int_t)e->ncommitted, "pending", (json_int_t)e->pending_runs,
                             "sessions", (json_int_t)e->nassignments);
    pthread_mutex_unlock(&e->mu);
    emu_stats *st = &e->stats;
    json_object_set_new(resp, "commits", json_integer(atomic_load(&st->commits)));
    json_object_set_new(resp, "idempotent_replays",
                        json_integer(atomic_load(&st->idempotent_replays)));
    json_object_set_new(resp, "plan_replays", json_integer(atomic_load(&st->plan_replays)));
    json_object_set_new(resp, "conflicts", json_integer(atomic_load(&st->conflicts)));
    json_object_set_new(resp, "lease_losses", json_integer(atomic_load(&st->lease_losses)));
    json_object_set_new(resp, "lease_expirations",
                        json_integer(atomic_load(&st->lease_expirations)));
    json_object_set_new(resp, "requests", json_integer(atomic_load(&st->requests)));
    static const char *const route_names[R__COUNT] = {
        "other", "register", "claim", "transcript", "definitions", "plan", "heartbeat", "result"};
    json_t *by = json_object();
    for (int i = 0; i < R__COUNT; i++)
        json_object_set_new(by, route_names[i], json_integer(atomic_load(&st->by_route[i])));
    json_object_set_new(resp, "requests_by_call", by);
    json_object_set_new(resp, "faults",
                        json_pack("{s:I, s:I, s:I}", "internal_error",
                                  (json_int_t)atomic_load(&st->faults_5xx), "dropped",
                                  (json_int_t)atomic_load(&st->faults_drop), "lease_loss",
                                  (json_int_t)atomic_load(&st->faults_lease_loss)));
    return resp;
}

char *emulator_state_json(emulator *e)
{
    json_t *st = emu_state_json(e);
    char *text = canonjson_dumps_ordered(st);
    json_decref(st);
    return text;
}

static void state(emu_req *r)
{
    emu_reply_json(r, 200, emu_state_json(r->e));
}

static void runs(emu_req *r)
{
    emulator *e = r->e;
    strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, "{\"runs\":[");
    pthread_mutex_lock(&e->mu);
    char at[40];
    for (size_t i = 0; i < e->ncommitted; i++) {
        emu_run *run = e->committed[i];
        if (i) strbuf_putc(&b, ',');
        strbuf_puts(&b, "{\"evaluation_run_id\":");
        strbuf_json_str(&b, run->id);
        strbuf_puts(&b, ",\"assignment_id\":");
        strbuf_json_str(&b, run->a->id);
        strbuf_puts(&b, ",\"session_id\":");
        strbuf_json_str(&b, json_string_value(json_object_get(run->a->session, "session_id")));
        strbuf_puts(&b, ",\"eval_key\":");
        strbuf_json_str(&b, run->eval_key);
        strbuf_puts(&b, ",\"eval_version\":");
        strbuf_json_str(&b, run->eval_version);
        strbuf_puts(&b, ",\"execution_mode\":");
        strbuf_json_str(&b, json_string_value(json_object_get(run->wire, "execution_mode")));
        strbuf_puts(&b, ",\"submission_id\":");
        strbuf_json_str(&b, run->submission_id);
        strbuf_puts(&b, ",\"status\":");
        strbuf_json_str(&b, run->result_status);
        strbuf_puts(&b, ",\"result_checksum\":");
        strbuf_json_str(&b, run->checksum);
        strbuf_puts(&b, ",\"committed_at\":");
        strbuf_json_str(&b, time_rfc3339(run->committed_at, at, sizeof at));
        strbuf_puts(&b, ",\"result\":");
        strbuf_put(&b, run->body, run->body_len); /* validated JSON, byte for byte */
        strbuf_putc(&b, '}');
    }
    pthread_mutex_unlock(&e->mu);
    strbuf_puts(&b, "]}");
    r->status = 200;
    r->resp = strbuf_detach(&b, &r->resp_len);
    r->resp_static = 0;
}

static void assignment(emu_req *r, const char *id)
{
    emulator *e = r->e;
    pthread_mutex_lock(&e->mu);
    emu_assignment *a = emu_map_get(&e->assignments_by_id, id);
    if (a == NULL) {
        pthread_mutex_unlock(&e->mu);
        emu_reply_error(r, "assignment_not_found", "no assignment %.64s", id);
        return;
    }
    char exp[40];
    json_t *rs = json_array();
    for (size_t i = 0; i < a->nruns; i++) {
        emu_run *run = a->runs[i];
        json_array_append_new(rs, json_pack("{s:s, s:s, s:s, s:b, s:s?}", "evaluation_run_id",
                                            run->id, "eval_key", run->eval_key, "eval_version",
                                            run->eval_version, "committed", run->committed,
                                            "submission_id", run->submission_id));
    }
    json_t *resp = json_pack(
        "{s:s, s:s, s:I, s:I, s:s?, s:s, s:O, s:O?, s:o, s:I}", "assignment_id", a->id, "status",
        emu_status_name(a->status), "lease_generation", (json_int_t)a->generation, "attempts",
        (json_int_t)a->attempts, "lease_expires_at",
        a->generation ? time_rfc3339(a->lease_expires, exp, sizeof exp) : NULL, "worker_id",
        a->worker_id, "session_id", json_object_get(a->session, "session_id"), "definitions",
        a->definitions, "runs", rs, "transcript_bytes", (json_int_t)a->transcript_len);
    pthread_mutex_unlock(&e->mu);
    emu_reply_json(r, 200, resp);
}

static void expire(emu_req *r, const char *id)
{
    emulator *e = r->e;
    pthread_mutex_lock(&e->mu);
    emu_assignment *a = emu_map_get(&e->assignments_by_id, id);
    if (a == NULL) {
        pthread_mutex_unlock(&e->mu);
        emu_reply_error(r, "assignment_not_found", "no assignment %.64s", id);
        return;
    }
    if (a->status != AS_LEASED && a->status != AS_PLANNED) {
        const char *st = emu_status_name(a->status);
        pthread_mutex_unlock(&e->mu);
        emu_reply_error_status(r, 409, "not_leased", "assignment %s is %s, not leased", id, st);
        return;
    }
    emu_state_expire(e, a, time_now());
    json_t *resp = json_pack("{s:s, s:s, s:I, s:I}", "assignment_id", a->id, "status",
                             emu_status_name(a->status), "lease_generation",
                             (json_int_t)a->generation, "attempts", (json_int_t)a->attempts);
    pthread_mutex_unlock(&e->mu);
    emu_reply_json(r, 200, resp);
}

static void sessions(emu_req *r)
{
    emulator *e = r->e;
    const char *gen = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "generate");
    const char *raw = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "raw");
    if (gen != NULL) {
        char *end;
        long n = strtol(gen, &end, 10);
        if (*gen == '\0' || *end || n < 1 || n > 100000) {
            emu_reply_error_status(r, 422, "invalid_request",
                                   "generate must be an integer in 1..100000");
            return;
        }
        emu_sessions_generate(e, n);
        emu_reply_json(r, 200, json_pack("{s:I}", "generated", (json_int_t)n));
        return;
    }
    json_error_t jerr;
    json_t *t = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (t == NULL) {
        emu_reply_error(r, "invalid_request", "request body is not valid JSON: %s", jerr.text);
        return;
    }
    fps_err err;
    emu_assignment *a = emu_sessions_add_json(e, t, raw && strcmp(raw, "0") != 0, &err);
    json_decref(t);
    if (a == NULL) {
        emu_reply_error(r, "invalid_request", "%s", err.msg);
        return;
    }
    emu_reply_json(r, 201,
                   json_pack("{s:s, s:O, s:I, s:I}", "assignment_id", a->id, "session_id",
                             json_object_get(a->session, "session_id"), "event_count",
                             (json_int_t)a->event_count, "transcript_bytes",
                             (json_int_t)a->transcript_len));
}

static void canonical(emu_req *r)
{
    json_error_t jerr;
    json_t *v = json_loadb(r->body ? r->body : "", r->body_len, JSON_DECODE_ANY, &jerr);
    if (v == NULL) {
        emu_reply_error(r, "invalid_request", "request body is not valid JSON: %s", jerr.text);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    if (emulator_canonical_json(v, &text, &len) != 0) {
        json_decref(v);
        emu_reply_error(r, "invalid_request", "value cannot be canonicalized");
        return;
    }
    json_t *resp = json_pack("{s:s%}", "canonical", text, len);
    free(text);
    char rev[72];
    if (json_is_array(v) && emulator_catalog_revision(v, 1, rev) == 0)
        json_object_set_new(resp, "catalog_revision", json_string(rev));
    json_decref(v);
    emu_reply_json(r, 200, resp);
}

static json_t *faults_json(emulator *e)
{
    return json_pack("{s:f, s:f, s:f, s:I}", "fault_5xx", atomic_load(&e->fault_5xx), "fault_drop",
                     atomic_load(&e->fault_drop), "fault_lease_loss",
                     atomic_load(&e->fault_lease_loss), "fault_latency_ms",
                     (json_int_t)atomic_load(&e->fault_latency_ms));
}

/* Validates every field before changing any: a bad request changes nothing. */
static void faults(emu_req *r)
{
    emulator *e = r->e;
    json_error_t jerr;
    json_t *v = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(v)) {
        emu_reply_error(r, "invalid_request", "request body must be a JSON object%s%s",
                        v ? "" : ": ", v ? "" : jerr.text);
        json_decref(v);
        return;
    }
    static const char *const rates[] = {"fault_5xx", "fault_drop", "fault_lease_loss"};
    _Atomic double *slots[] = {&e->fault_5xx, &e->fault_drop, &e->fault_lease_loss};
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val)
    {
        int known = !strcmp(key, "fault_latency_ms");
        for (size_t i = 0; i < 3 && !known; i++)
            known = !strcmp(key, rates[i]);
        if (!known) {
            emu_reply_error(r, "invalid_request", "unknown field '%.64s'", key);
            goto done;
        }
        double x = json_is_number(val) ? json_number_value(val) : -1;
        int ok = !strcmp(key, "fault_latency_ms") ? json_is_integer(val) && x >= 0 && x <= 60000
                                                  : x >= 0 && x <= 1;
        if (!ok) {
            emu_reply_error(r, "invalid_request", "%s must be %s", key,
                            !strcmp(key, "fault_latency_ms") ? "an integer in 0..60000"
                                                             : "a number in [0, 1]");
            goto done;
        }
    }
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_object_get(v, rates[i]);
        if (x) atomic_store(slots[i], json_number_value(x));
    }
    json_t *lat = json_object_get(v, "fault_latency_ms");
    if (lat) atomic_store(&e->fault_latency_ms, (long)json_integer_value(lat));
    emu_reply_json(r, 200, faults_json(e));
done:
    json_decref(v);
}

void emu_inspect(emu_req *r, const char *path)
{
    int get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");
    if (!strcmp(path, "state") && get)
        state(r);
    else if (!strcmp(path, "runs") && get)
        runs(r);
    else if (!strncmp(path, "assignments/", 12) && get)
        assignment(r, path + 12);
    else if (!strcmp(path, "sessions") && post)
        sessions(r);
    else if (!strncmp(path, "expire/", 7) && post)
        expire(r, path + 7);
    else if (!strcmp(path, "canonical") && post)
        canonical(r);
    else if (!strcmp(path, "faults") && get)
        emu_reply_json(r, 200, faults_json(r->e));
    else if (!strcmp(path, "faults") && post)
        faults(r);
    else
        emu_reply_error(r, "not_found", "no such inspection endpoint: %s %.200s", r->method, path);
}
