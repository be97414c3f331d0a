/* sidecar/worker_assign: one claimed assignment from transcript to results
 * (SPEC §2 steps 3-8): transcript, definitions (definitions_url, else the
 * local catalog as local definitions), the lease-bounded condition phase,
 * the plan (idempotent replay rules, strict matching), source checksum
 * verification (fail closed), runs through the jail or the local registry,
 * result construction and hand-off to the outbox. */
#include "sidecar/worker_internal.h"

#include "common/ids.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/timeutil.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/local.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASE_MARGIN_S 5.0

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
#define MAX_ERROR_MESSAGE 4096

static const char *sget(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static double tget(const json_t *o)
{
    const json_t *v = json_object_get(o, "timeout_seconds");
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* Ends the assignment locally with an error (logged, counted, recorded). */
static void fail_assignment(actx *x, const char *code, const char *msg, const cloud_error *e)
{
    worker *w = x->w;
    wcount(w, WC_ASSIGNMENTS_FAILED, 1);
    if (e && e->kind == CLOUD_PROTOCOL) wcount(w, WC_PROTOCOL_ERRORS, 1);
    if (e && e->kind == CLOUD_TRANSPORT) wcount(w, WC_TRANSPORT_ERRORS, 1);
    ws_finish(w, x, "failed", code, msg);
    log_error("assignment failed", LOG_S("assignment_id", x->a.assignment_id), LOG_S("code", code),
              LOG_S("error", msg), LOG_S("request_id", e ? e->request_id : ""));
    worker_note_error(w, code, msg);
}

static void lease_lost(actx *x, const char *where)
{
    if (atomic_exchange(&x->lost, 1) == 0) {
        wcount(x->w, WC_LEASES_LOST, 1);
        metrics_inc(METRIC_LEASES_LOST);
        log_warn("lease lost", LOG_S("assignment_id", x->a.assignment_id), LOG_S("during", where),
                 LOG_I("lease_generation", x->a.lease_generation));
        ws_finish(x->w, x, "lost", "lease_lost", where);
    }
    for (size_t i = 0; i < x->nruns; i++)
        atomic_store(&x->runs[i].cancel, 1);
    atomic_store(&x->cancel_conditions, 1);
}

/* Call failed: lease_lost ends the assignment quietly, anything else fails it. */
static void call_failed(actx *x, const char *what, const cloud_error *e)
{
    if (e->kind == CLOUD_ABORTED) return;
    if (e->kind == CLOUD_REMOTE && !strcmp(e->code, "lease_lost")) {
        lease_lost(x, what);
        return;
    }
    char msg[700];
    snprintf(msg, sizeof msg, "%s: %s", what, e->message);
    fail_assignment(x, e->code, msg, e);
}

static int is_disabled(worker *w, const char *key)
{
    int hit = 0;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < json_array_size(w->disabled) && !hit; i++)
        hit = !strcmp(json_string_value(json_array_get(w->disabled, i)), key);
    pthread_mutex_unlock(&w->mu);
    return hit;
}

/* The local catalog as `local` definitions (no definitions_url). */
static json_t *local_definitions(worker *w)
{
    json_t *out = json_array();
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < json_array_size(w->catalog); i++) {
        json_t *d = json_deep_copy(json_array_get(w->catalog, i));
        json_object_set_new(d, "execution_mode", json_string("local"));
        json_array_append_new(out, d);
    }
    pthread_mutex_unlock(&w->mu);
    return out;
}

static sbx_image *ensure_image(actx *x, sbx_image **img, const json_t *transcript, int *failed)
{
    char err[256];
    if (*img == NULL && !*failed) {
        *img = sbx_image_new(transcript, x->a.assignment_id, err, sizeof err);
        if (*img == NULL) {
            *failed = 1;
            fail_assignment(x, "transcript_invalid", err, NULL);
        }
    }
    return *img;
}

typedef struct {
    json_t *selected, *skipped;
} selection;

static void skip(selection *s, const json_t *d, const char *reason, worker *w)
{
    json_array_append_new(s->skipped, json_pack("{s:s, s:s, s:s}", "eval_key", sget(d, "eval_key"),
                                                "eval_version", sget(d, "eval_version"),
                                                "reason_code", reason));
    wcount(w, WC_CONDITIONS_SKIPPED, 1);
    metrics_inc(METRIC_CONDITIONS, "outcome", "skipped", "reason", reason);
}

/* The condition phase. Returns 0, or -1 if the assignment must end. */
static int conditions(actx *x, const json_t *defs, const json_t *transcript, sbx_image **img,
                      int *img_failed, selection *s)
{
    worker *w = x->w;
    /* The claim-time lease, minus the margin, bounds the whole phase. */
    double lease_end = x->a.lease_expires_epoch;
    double by_duration = x->claimed_at + (double)w->lease_duration_s;
    if (lease_end <= 0 || by_duration < lease_end) lease_end = by_duration;
    double deadline = lease_end - LEASE_MARGIN_S;
    for (size_t i = 0; i < json_array_size(defs); i++) {
        const json_t *d = json_array_get(defs, i);
        const char *key = sget(d, "eval_key"), *ver = sget(d, "eval_version");
        const char *mode = sget(d, "execution_mode");
        if (atomic_load(&x->cancel_conditions)) return -1;
        if (is_disabled(w, key)) {
            skip(s, d, "disabled_by_server", w);
            continue;
        }
        int local = !strcmp(mode, "local");
        const char *cond = local ? NULL : sget(d, "condition_source");
        int has_local_cond = 0;
        if (local && w->local != NULL) {
            local_definition ld;
            if (local_registry_definition(w->local, key, ver, &ld) == 0) {
                has_local_cond = ld.condition != NULL;
                local_definition_free(&ld);
            }
        }
        if ((cond == NULL || *cond == '\0') && !has_local_cond) {
            json_array_append_new(s->selected,
                                  json_pack("{s:s, s:s}", "eval_key", key, "eval_version", ver));
            wcount(w, WC_CONDITIONS_SELECTED, 1);
            metrics_inc(METRIC_CONDITIONS, "outcome", "selected", "reason", "none");
            continue;
        }
        double remaining = deadline - time_now();
        if (remaining <= 0) {
            skip(s, d, "lease_exhausted", w);
            continue;
        }
        double t = tget(d);
        if (t <= 0) t = 30;
        if (t > 60) t = 60;
        int limited = 0;
        if (remaining < t) {
            t = remaining;
            limited = 1;
        }
        if (ensure_image(x, img, transcript, img_failed) == NULL) return -1;
        const char *reason = NULL; /* NULL = selected */
        char rbuf[136];
        if (has_local_cond) {
            local_condition_outcome lo;
            memset(&lo, 0, sizeof lo);
            int64_t t0 = time_mono_ms();
            local_condition(w->local, w->pool, key, ver, *img, t, &x->cancel_conditions, &lo);
            if (!lo.applicable) {
                snprintf(rbuf, sizeof rbuf, "%s",
                         lo.reason_code[0] ? lo.reason_code : "condition_error");
                reason = rbuf;
                if (limited && !strcmp(rbuf, "condition_error") &&
                    (time_mono_ms() - t0) / 1000.0 >= t - 0.05)
                    reason = "lease_exhausted";
            }
        } else {
            sbx_request rq = {.kind = LANG_CONDITION,
                              .source = cond,
                              .source_len = strlen(cond),
                              .eval_key = key,
                              .timeout_s = t,
                              .image = *img,
                              .cancel = &x->cancel_conditions};
            sbx_outcome out;
            memset(&out, 0, sizeof out);
            sbx_eval(w->pool, &rq, &out);
            if (out.status == SBX_CANCELLED) {
                sbx_outcome_free(&out);
                return -1;
            }
            const char *stage = sget(out.json, "stage"), *etype = sget(out.json, "error_type");
            if (out.status == SBX_TIMEOUT ||
                (out.status == SBX_OK && stage && !strcmp(stage, "limit") && etype &&
                 !strcmp(etype, "timeout"))) {
                reason = limited ? "lease_exhausted" : "condition_error";
            } else if (out.status != SBX_OK || !json_is_true(json_object_get(out.json, "ok"))) {
                reason = "condition_error";
                log_warn(
                    "condition failed", LOG_S("assignment_id", x->a.assignment_id),
                    LOG_S("eval_key", key),
                    LOG_S("stage", sget(out.json, "stage") ? sget(out.json, "stage") : out.detail),
                    LOG_S("error_type",
                          sget(out.json, "error_type") ? sget(out.json, "error_type") : ""));
            } else if (!json_is_true(json_object_get(out.json, "applicable"))) {
                const char *rc = sget(out.json, "reason_code");
                snprintf(rbuf, sizeof rbuf, "%s", rc && *rc ? rc : "condition_false");
                reason = rbuf;
            }
            sbx_outcome_free(&out);
        }
        if (reason)
            skip(s, d, reason, w);
        else {
            json_array_append_new(s->selected,
                                  json_pack("{s:s, s:s}", "eval_key", key, "eval_version", ver));
            wcount(w, WC_CONDITIONS_SELECTED, 1);
            metrics_inc(METRIC_CONDITIONS, "outcome", "selected", "reason", "none");
        }
    }
    return 0;
}

static const json_t *find_def(const json_t *defs, const char *key, const char *ver)
{
    for (size_t i = 0; i < json_array_size(defs); i++) {
        const json_t *d = json_array_get(defs, i);
        if (!strcmp(sget(d, "eval_key"), key) && !strcmp(sget(d, "eval_version"), ver)) return d;
    }
    return NULL;
}

/* Matches the plan against the selection; fills x->runs. */
static int match_plan(actx *x, const cloud_plan *p, const json_t *defs, const selection *s,
                      char *err, size_t errcap)
{
    size_t nsel = json_array_size(s->selected), n = json_array_size(p->runs);
    if (!p->idempotent_replay) {
        const char *expect = nsel ? "planned" : "skipped";
        if (strcmp(p->assignment_status, expect) != 0) {
            snprintf(err, errcap, "plan status '%.32s' where '%s' was expected",
                     p->assignment_status, expect);
            return -1;
        }
        if (n != nsel) {
            snprintf(err, errcap, "plan has %zu runs for %zu selected definitions", n, nsel);
            return -1;
        }
    }
    x->runs = calloc(n ? n : 1, sizeof *x->runs);
    for (size_t i = 0; i < n; i++) {
        json_t *run = json_array_get(p->runs, i);
        const char *key = sget(run, "eval_key"), *ver = sget(run, "eval_version");
        const json_t *d = find_def(defs, key, ver);
        if (d == NULL) {
            snprintf(err, errcap, "plan run %s names an unknown definition",
                     sget(run, "evaluation_run_id"));
            return -1;
        }
        if (!p->idempotent_replay) {
            int found = 0;
            for (size_t k = 0; k < nsel && !found; k++) {
                const json_t *sel = json_array_get(s->selected, k);
                found =
                    !strcmp(sget(sel, "eval_key"), key) && !strcmp(sget(sel, "eval_version"), ver);
            }
            for (size_t k = 0; k < i && found; k++)
                if (!strcmp(sget(x->runs[k].run, "eval_key"), key) &&
                    !strcmp(sget(x->runs[k].run, "eval_version"), ver))
                    found = 0;
            if (!found) {
                snprintf(err, errcap, "plan run for %s@%s was not selected (or repeats)", key, ver);
                return -1;
            }
        }
        if (strcmp(sget(run, "execution_mode"), sget(d, "execution_mode")) != 0) {
            snprintf(err, errcap, "plan changed the execution_mode of %s", key);
            return -1;
        }
        x->runs[i].run = run;
        x->runs[i].def = (json_t *)d;
        x->runs[i].run_id = (char *)sget(run, "evaluation_run_id");
        x->nruns = i + 1;
    }
    return 0;
}

/* SPEC §2 step 6, for every managed run before any runs. */
static int verify_sources(actx *x, char *err, size_t errcap)
{
    for (size_t i = 0; i < x->nruns; i++) {
        const json_t *run = x->runs[i].run, *d = x->runs[i].def;
        if (strcmp(sget(run, "execution_mode"), "python") != 0) continue;
        const char *src = sget(run, "evaluator_source"), *sum = sget(run, "source_checksum");
        if (src == NULL || *src == '\0' || sum == NULL || *sum == '\0') {
            snprintf(err, errcap, "managed run %s lacks evaluator_source or source_checksum",
                     x->runs[i].run_id);
            return -1;
        }
        const char *cond = sget(d, "condition_source");
        strbuf b;
        strbuf_init(&b);
        strbuf_puts(&b, cond ? cond : "");
        strbuf_putc(&b, '\0');
        strbuf_puts(&b, src);
        char hex[65], expect[80];
        ids_sha256_hex(b.data, b.len, hex);
        strbuf_free(&b);
        snprintf(expect, sizeof expect, "sha256:%s", hex);
        const char *dsum = sget(d, "source_checksum");
        if (strcmp(expect, sum) != 0 || (dsum && *dsum && strcmp(dsum, sum) != 0)) {
            snprintf(err, errcap, "source_checksum mismatch for run %s (%s)", x->runs[i].run_id,
                     sget(run, "eval_key"));
            return -1;
        }
    }
    return 0;
}

/* Truncates to at most max bytes on a UTF-8 boundary. */
static void bound_utf8(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) return;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    s[n] = '\0';
}

typedef struct {
    const char *status;
    json_t *results; /* owned */
    json_t *summary; /* owned (string or null) */
    char error_code[64];
    char error_message[MAX_ERROR_MESSAGE + 1];
} run_outcome;

static void outcome_fail(run_outcome *o, const char *status, const char *code, const char *fmt,
                         const char *arg)
{
    o->status = status;
    json_decref(o->results);
    o->results = json_array();
    json_decref(o->summary);
    o->summary = json_null();
    snprintf(o->error_code, sizeof o->error_code, "%s", code);
    snprintf(o->error_message, sizeof o->error_message, fmt, arg);
    bound_utf8(o->error_message, MAX_ERROR_MESSAGE);
}

static int primary_present(const json_t *results, const char *key, const char *kind)
{
    for (size_t i = 0; i < json_array_size(results); i++) {
        const json_t *it = json_array_get(results, i);
        const char *k = sget(it, "result_key"), *rk = sget(it, "result_kind");
        if (k && rk && !strcmp(k, key) && !strcmp(rk, kind)) return 1;
    }
    return 0;
}

static void run_managed(actx *x, wrun *r, sbx_image *img, run_outcome *o)
{
    const char *src = sget(r->run, "evaluator_source");
    double t = tget(r->run);
    if (t <= 0) t = tget(r->def);
    if (t <= 0) t = 30;
    if (t > 60) t = 60;
    sbx_request rq = {.kind = LANG_EVALUATOR,
                      .source = src,
                      .source_len = strlen(src),
                      .eval_key = sget(r->def, "eval_key"),
                      .timeout_s = t,
                      .image = img,
                      .cancel = &r->cancel};
    sbx_outcome out;
    memset(&out, 0, sizeof out);
    sbx_eval(x->w->pool, &rq, &out);
    switch (out.status) {
    case SBX_OK: {
        const json_t *j = out.json;
        if (json_is_true(json_object_get(j, "ok"))) {
            json_t *res = json_object_get(j, "results");
            if (!json_is_array(res) || json_array_size(res) > 25 ||
                !primary_present(res, sget(r->def, "eval_key"), sget(r->def, "result_kind"))) {
                outcome_fail(o, "failed", "eval_error", "%s",
                             "evaluation result does not contain its declared primary result");
                break;
            }
            o->status = "succeeded";
            json_decref(o->results);
            o->results = json_incref(res);
            json_t *sm = json_object_get(j, "summary");
            json_decref(o->summary);
            o->summary = json_is_string(sm) ? json_incref(sm) : json_null();
            break;
        }
        const char *stage = sget(j, "stage");
        if (stage && !strcmp(stage, "compile")) {
            const char *m = sget(j, "message");
            outcome_fail(o, "failed", "eval_error", "evaluator source rejected: %s",
                         m && *m ? m : "rejected by the sandbox validator");
        } else if (stage && !strcmp(stage, "limit")) {
            outcome_fail(o, "timed_out", "eval_timeout", "%s",
                         "evaluation exceeded its configured timeout");
        } else {
            const char *et = sget(j, "error_type");
            outcome_fail(o, "failed", "eval_error", "evaluation raised %s", et ? et : "Exception");
        }
        break;
    }
    case SBX_TIMEOUT:
        outcome_fail(o, "timed_out", "eval_timeout", "%s",
                     "evaluation exceeded its configured timeout");
        break;
    case SBX_OUTPUT:
        outcome_fail(o, "failed", "eval_error", "%s", "evaluation output exceeded its limit");
        break;
    case SBX_CANCELLED:
        o->status = "cancelled";
        break;
    case SBX_JAIL_FAILURE:
    default:
        outcome_fail(o, "failed", "sandbox_error", "sandbox failure: %s", out.detail);
        break;
    }
    sbx_outcome_free(&out);
}

static void run_local(actx *x, wrun *r, const json_t *transcript, run_outcome *o)
{
    worker *w = x->w;
    if (w->local == NULL) {
        outcome_fail(o, "failed", "evaluator_unavailable", "%s", "no local evaluator registry");
        return;
    }
    double t = tget(r->run);
    if (t <= 0) t = tget(r->def);
    local_dispatch_request rq = {.evaluation_run_id = r->run_id,
                                 .eval_key = sget(r->def, "eval_key"),
                                 .eval_version = sget(r->def, "eval_version"),
                                 .result_kind = sget(r->def, "result_kind"),
                                 .timeout_s = t,
                                 .transcript = transcript,
                                 .cancel = &r->cancel};
    local_dispatch_result res;
    memset(&res, 0, sizeof res);
    local_dispatch(w->local, &rq, &res);
    o->status = res.status ? res.status : "failed";
    if (!strcmp(o->status, "succeeded")) {
        if (!primary_present(res.results, rq.eval_key, rq.result_kind)) {
            outcome_fail(o, "failed", "eval_error", "%s",
                         "evaluation result does not contain its declared primary result");
        } else {
            json_decref(o->results);
            o->results = json_incref(res.results);
            json_decref(o->summary);
            o->summary = res.summary ? json_string(res.summary) : json_null();
        }
    } else if (strcmp(o->status, "cancelled") != 0) {
        outcome_fail(o, o->status, res.error_code[0] ? res.error_code : "eval_error", "%s",
                     res.error_message[0] ? res.error_message : "local evaluation failed");
    }
    local_dispatch_result_free(&res);
}

/* Serializes the result body once. */
static char *result_body(actx *x, const run_outcome *o, const char *submission_id, double started,
                         double finished, long long duration_ms, size_t *len)
{
    char s1[40], s2[40];
    json_t *b = json_object();
    json_object_set_new(b, "protocol_version", json_string("2"));
    json_object_set_new(b, "result_schema_version", json_string("2"));
    json_object_set_new(b, "submission_id", json_string(submission_id));
    json_object_set_new(b, "worker_id", json_string(x->w->worker_id));
    json_object_set_new(b, "lease_generation", json_integer(x->a.lease_generation));
    json_object_set_new(b, "status", json_string(o->status));
    json_object_set_new(b, "started_at", json_string(time_rfc3339(started, s1, sizeof s1)));
    json_object_set_new(b, "finished_at", json_string(time_rfc3339(finished, s2, sizeof s2)));
    json_object_set_new(b, "duration_ms", json_integer(duration_ms));
    json_object_set(b, "summary", o->summary ? o->summary : json_null());
    json_object_set(b, "results", o->results);
    json_object_set_new(b, "error_code",
                        o->error_code[0] ? json_string(o->error_code) : json_null());
    json_object_set_new(b, "error_message",
                        o->error_message[0] ? json_string(o->error_message) : json_null());
    char *text = json_dumps(b, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(b);
    *len = text ? strlen(text) : 0;
    return text;
}

/* Makes a batch of finished results durable (one transaction, one fsync),
 * then submits them. */
static void flush_results(actx *x, ws_result *pend, size_t *np)
{
    worker *w = x->w;
    /* Never drop a result: retry the store (claiming pauses, not ready)
     * until it takes it or the worker stops. */
    int stored = 0;
    int64_t t0 = mono_us();
    for (int64_t delay = 100;; delay = delay < 5000 ? delay * 2 : 5000) {
        if (ws_runs_finished(w, x, pend, *np) == 0) {
            stored = 1;
            break;
        }
        pthread_mutex_lock(&w->mu);
        w->store_failing = 1;
        int stop = w->stopping;
        pthread_mutex_unlock(&w->mu);
        if (stop) break;
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&w->mu);
    if (w->store_failing && stored) {
        w->store_failing = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    int64_t t1 = mono_us();
    atomic_fetch_add(&x->tm_store_us, t1 - t0);
    for (size_t i = 0; i < *np; i++) {
        if (stored)
            worker_submit(w, x, pend[i].run_id, pend[i].submission_id, pend[i].body, pend[i].len);
        else
            free(pend[i].body);
        json_decref(pend[i].results);
        json_decref(pend[i].summary);
        free(pend[i].error_message);
    }
    atomic_fetch_add(&x->tm_submit_us, mono_us() - t1);
    *np = 0;
}

/* One run to its end: evaluation, result body, durable store (shared with
 * concurrent runs: group commit), first submission. Any thread. */
static void do_run(actx *x, size_t i)
{
    worker *w = x->w;
    wrun *r = &x->runs[i];
    if (atomic_load(&x->lost)) {
        atomic_store(&r->done, 1);
        return;
    }
    if (atomic_load(&r->cancel)) {
        atomic_store(&r->done, 1);
        wcount(w, WC_RUNS_CANCELLED, 1);
        return;
    }
    int already = 0;
    for (size_t k = 0; k < json_array_size(x->skip_runs) && !already; k++)
        already = !strcmp(json_string_value(json_array_get(x->skip_runs, k)), r->run_id);
    if (already) {
        /* Resumed after a restart: this run's result is stored (and in
         * the outbox if not yet acknowledged). */
        atomic_store(&r->done, 1);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->active_runs++;
    worker_gauges_locked(w);
    pthread_mutex_unlock(&w->mu);
    run_outcome o = {0};
    o.results = json_array();
    o.summary = json_null();
    double started = time_now();
    int64_t t0 = time_mono_ms(), e0 = mono_us();
    const char *mode = sget(r->run, "execution_mode");
    if (!strcmp(mode, "python"))
        run_managed(x, r, x->img, &o);
    else
        run_local(x, r, x->transcript, &o);
    atomic_fetch_add(&x->tm_eval_us, mono_us() - e0);
    double finished = time_now();
    long long dur = time_mono_ms() - t0;
    metrics_observe(METRIC_EVAL_SECONDS, dur / 1000.0, "mode", mode);
    metrics_inc(METRIC_RUNS, "mode", mode, "status",
                atomic_load(&r->cancel) ? "cancelled" : o.status);
    atomic_store(&r->done, 1);
    pthread_mutex_lock(&w->mu);
    w->active_runs--;
    worker_gauges_locked(w);
    pthread_mutex_unlock(&w->mu);
    if (!strcmp(o.status, "cancelled") || atomic_load(&r->cancel)) {
        /* Not accepted by the server any more, lost, or stopping:
         * nothing is submitted. */
        wcount(w, WC_RUNS_CANCELLED, 1);
        log_info("run cancelled", LOG_S("assignment_id", x->a.assignment_id),
                 LOG_S("evaluation_run_id", r->run_id));
        json_decref(o.results);
        json_decref(o.summary);
        return;
    }
    wcount(w,
           !strcmp(o.status, "succeeded")   ? WC_RUNS_SUCCEEDED
           : !strcmp(o.status, "timed_out") ? WC_RUNS_TIMED_OUT
                                            : WC_RUNS_FAILED,
           1);
    ws_result p;
    memset(&p, 0, sizeof p);
    ids_uuid(p.submission_id);
    /* Serialized once: these bytes are stored and every (re)submission
     * sends them unchanged. */
    p.body = result_body(x, &o, p.submission_id, started, finished, dur, &p.len);
    log_debug("run finished", LOG_S("assignment_id", x->a.assignment_id),
              LOG_S("evaluation_run_id", r->run_id), LOG_S("status", o.status),
              LOG_S("error_code", o.error_code), LOG_I("duration_ms", dur));
    if (p.body == NULL) {
        json_decref(o.results);
        json_decref(o.summary);
        return;
    }
    p.run_id = r->run_id;
    p.status = o.status;
    p.started = started;
    p.finished = finished;
    p.duration_ms = dur;
    p.results = o.results;
    p.summary = o.summary;
    snprintf(p.error_code, sizeof p.error_code, "%s", o.error_code);
    p.error_message = o.error_message[0] ? strdup(o.error_message) : NULL;
    size_t np = 1;
    flush_results(x, &p, &np);
}

/* Takes runs of x (by x->next_run) until none is left. */
static void run_some(actx *x)
{
    worker *w = x->w;
    for (;;) {
        size_t i = atomic_fetch_add(&x->next_run, 1);
        if (i >= x->nruns) return;
        do_run(x, i);
        pthread_mutex_lock(&w->mu);
        if (--x->runs_left == 0) pthread_cond_broadcast(&w->run_cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* Removes x from the help queue (w->mu held). */
static void help_unlink(worker *w, actx *x)
{
    actx *prev = NULL;
    for (actx *p = w->help_head; p; prev = p, p = p->help_next) {
        if (p != x) continue;
        if (prev)
            prev->help_next = p->help_next;
        else
            w->help_head = p->help_next;
        if (w->help_tail == p) w->help_tail = prev;
        break;
    }
    x->help_next = NULL;
    x->help_queued = 0;
}

void *worker_run_main(void *arg)
{
    worker *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        actx *x = w->help_head;
        if (x == NULL) {
            pthread_cond_wait(&w->help_cv, &w->mu);
            continue;
        }
        if (x->help_queued <= 1)
            help_unlink(w, x);
        else
            x->help_queued--;
        x->helpers++;
        pthread_mutex_unlock(&w->mu);
        run_some(x);
        pthread_mutex_lock(&w->mu);
        if (--x->helpers == 0) pthread_cond_broadcast(&w->run_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Runs the assignment's runs in parallel: this thread plus up to
 * (runs - 1) run-pool helpers (the sandbox pool bounds how many
 * evaluations really run at once); returns when every run has ended. */
static void execute_runs(actx *x, const json_t *transcript, sbx_image *img)
{
    worker *w = x->w;
    x->transcript = transcript;
    x->img = img;
    atomic_store(&x->next_run, 0);
    pthread_mutex_lock(&w->mu);
    x->runs_left = x->nruns;
    long want = x->nruns > 1 ? (long)x->nruns - 1 : 0;
    if (want > w->nrun_th) want = w->nrun_th;
    if (want > 0 && !w->stopping) {
        x->help_queued = (int)want;
        x->help_next = NULL;
        if (w->help_tail)
            w->help_tail->help_next = x;
        else
            w->help_head = x;
        w->help_tail = x;
        if (want == 1)
            pthread_cond_signal(&w->help_cv);
        else
            pthread_cond_broadcast(&w->help_cv);
    }
    pthread_mutex_unlock(&w->mu);
    run_some(x);
    pthread_mutex_lock(&w->mu);
    if (x->help_queued > 0) help_unlink(w, x);
    while (x->runs_left > 0 || x->helpers > 0)
        pthread_cond_wait(&w->run_cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    x->transcript = NULL;
    x->img = NULL;
}

void worker_process(worker *w, actx *x)
{
    cloud_error e;
    json_t *transcript = NULL, *defs = NULL;
    sbx_image *img = NULL;
    int img_failed = 0;
    selection s = {json_array(), json_array()};
    cloud_plan plan;
    memset(&plan, 0, sizeof plan);
    char err[512];

    int64_t tm[8] = {mono_us()};
    size_t tbytes = 0;
    char *raw = NULL;
    if (cloud_transcript(w->cloud, &x->a, &transcript, &tbytes, &raw, &e) != 0) {
        if (!strcmp(e.code, "transcript_too_large")) {
            wcount(w, WC_TRANSCRIPTS_TOO_LARGE, 1);
            metrics_inc(METRIC_TRANSCRIPTS_TOO_LARGE);
            wcount(w, WC_ASSIGNMENTS_FAILED, 1);
            log_warn("transcript too large; assignment ends",
                     LOG_S("assignment_id", x->a.assignment_id), LOG_S("error", e.message),
                     LOG_S("request_id", e.request_id));
            worker_note_error(w, e.code, e.message);
            ws_finish(w, x, "failed", "transcript_too_large", e.message);
        } else {
            call_failed(x, "transcript", &e);
        }
        goto done;
    }
    worker_remember_transcript(w, x->a.assignment_id, raw, tbytes);
    tm[1] = mono_us();
    if (x->a.definitions_url != NULL) {
        if (cloud_definitions(w->cloud, &x->a, &defs, &e) != 0) {
            call_failed(x, "definitions", &e);
            goto done;
        }
    } else {
        defs = local_definitions(w);
    }
    tm[2] = mono_us();
    if (conditions(x, defs, transcript, &img, &img_failed, &s) != 0) goto done;
    tm[3] = mono_us();
    if (cloud_plan_submit(w->cloud, &x->a, s.selected, s.skipped, &plan, &e) != 0) {
        call_failed(x, "plan", &e);
        goto done;
    }
    tm[4] = mono_us();
    if (plan.idempotent_replay) metrics_inc(METRIC_REPLAYS, "call", "plan");
    if (match_plan(x, &plan, defs, &s, err, sizeof err) != 0) {
        memset(&e, 0, sizeof e);
        cloud_set_protocol_error(&e, "%s", err);
        metrics_inc(METRIC_PROTOCOL_ERRORS, "call", "plan", "code", "plan_mismatch");
        fail_assignment(x, "protocol_error", err, &e);
        goto done;
    }
    ws_planned(w, x, defs, s.selected, s.skipped, plan.obj,
               !strcmp(plan.assignment_status, "skipped"));
    if (x->nruns == 0) {
        if (strcmp(plan.assignment_status, "skipped") != 0)
            ws_finish(w, x, "completed", NULL, NULL);
        wcount(w, WC_ASSIGNMENTS_SKIPPED, 1);
        log_info("assignment skipped", LOG_S("assignment_id", x->a.assignment_id),
                 LOG_I("skipped", (long long)json_array_size(s.skipped)));
        goto done;
    }
    if (verify_sources(x, err, sizeof err) != 0) {
        wcount(w, WC_CHECKSUM_MISMATCHES, 1);
        fail_assignment(x, "source_checksum_mismatch", err, NULL);
        goto done;
    }
    int need_img = 0;
    for (size_t i = 0; i < x->nruns; i++)
        need_img |= !strcmp(sget(x->runs[i].run, "execution_mode"), "python");
    if (need_img && ensure_image(x, &img, transcript, &img_failed) == NULL) goto done;
    ws_runs_started(w, x);
    worker_hb_add(w, x);
    tm[5] = mono_us();
    execute_runs(x, transcript, img);
    worker_hb_remove(w, x);
    tm[6] = mono_us();
    if (log_get_level() <= LOG_DEBUG)
        log_debug("assignment timing", LOG_S("assignment_id", x->a.assignment_id),
                  LOG_D("transcript_ms", (tm[1] - tm[0]) / 1000.0),
                  LOG_D("definitions_ms", (tm[2] - tm[1]) / 1000.0),
                  LOG_D("conditions_ms", (tm[3] - tm[2]) / 1000.0),
                  LOG_D("plan_ms", (tm[4] - tm[3]) / 1000.0),
                  LOG_D("prepare_ms", (tm[5] - tm[4]) / 1000.0),
                  LOG_D("runs_ms", (tm[6] - tm[5]) / 1000.0),
                  LOG_D("eval_sum_ms", atomic_load(&x->tm_eval_us) / 1000.0),
                  LOG_D("durable_sum_ms", atomic_load(&x->tm_store_us) / 1000.0),
                  LOG_D("submit_sum_ms", atomic_load(&x->tm_submit_us) / 1000.0),
                  LOG_D("since_claim_ms", (time_now() - x->claimed_at) * 1000.0));
    if (!atomic_load(&x->lost)) {
        wcount(w, WC_ASSIGNMENTS_COMPLETED, 1);
        log_info("assignment runs finished", LOG_S("assignment_id", x->a.assignment_id),
                 LOG_I("runs", (long long)x->nruns));
    }
done:
    if (img) sbx_image_release(img);
    cloud_plan_free(&plan);
    json_decref(transcript);
    json_decref(defs);
    json_decref(s.selected);
    json_decref(s.skipped);
}
