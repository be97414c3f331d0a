/* sidecar/worker_runs: an assignment's runs (SPEC §2 steps 7-8), in
 * parallel on the assignment's thread and the run-pool helpers: each run
 * through the jail (managed: in turn, in the assignment's one jail session)
 * or the local registry, its outcome mapped to a
 * run status, its result serialized once, made durable together with the
 * results of concurrent runs (group commit), then handed to the outbox. */
#include "sidecar/worker/worker_internal.h"

#include "common/canonjson.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/evaluation/evaluation.h"
#include "sidecar/local/local.h"
#include "sidecar/worker/outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ERROR_MESSAGE 4096

static void bound_utf8(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) return;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    s[n] = '\0';
}

/* SPEC §2 step 8's terminal run statuses (sidecar/evaluation/). */
typedef eval_run_status run_status;
#define RUN_SUCCEEDED EVAL_RUN_SUCCEEDED
#define RUN_FAILED EVAL_RUN_FAILED
#define RUN_TIMED_OUT EVAL_RUN_TIMED_OUT
#define RUN_CANCELLED EVAL_RUN_CANCELLED
#define run_status_name evaluation_status_name

typedef struct {
    run_status status;
    json_t *results; /* owned */
    json_t *summary; /* owned (string or null) */
    char error_code[64];
    char error_message[MAX_ERROR_MESSAGE + 1];
} run_outcome;

static void outcome_fail(run_outcome *o, run_status status, const char *code, const char *fmt,
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

double worker_run_timeout(local_registry *local, const wrun *r)
{
    double t = r->run->timeout_s;
    if (t <= 0) t = cloud_jtimeout(r->def);
    if (r->run->mode == CLOUD_MODE_PYTHON) return sbx_clamp_timeout(t);
    local_definition d;
    if (t <= 0 && local != NULL &&
        local_registry_definition(local, cloud_jstr(r->def, "eval_key"),
                                  cloud_jstr(r->def, "eval_version"), &d) == 0) {
        t = d.timeout_s; /* as registered */
        local_definition_free(&d);
    }
    return t > 0 ? t : LOCAL_DEFAULT_TIMEOUT_S;
}

static void run_managed(actx *x, wrun *r, sbx_image *img, run_outcome *o)
{
    const char *src = r->run->evaluator_source;
    double t = worker_run_timeout(x->env->local, r);
    sbx_request rq = {.kind = LANG_EVALUATOR,
                      .source = src,
                      .source_len = strlen(src),
                      .eval_key = cloud_jstr(r->def, "eval_key"),
                      .timeout_s = t, /* the jail clamps it (sbx_clamp_timeout) */
                      .image = img,
                      .cancel = &r->cancel};
    sbx_outcome out;
    memset(&out, 0, sizeof out);
    /* the pool's gate admits the sandbox against the memory budget
     * (waiting is covered by the heartbeats; its own timeout starts once it
     * is admitted) and runs it again if the budget had it stopped; in turn,
     * in the assignment's jail session */
    worker_managed_eval(x, &rq, &out);
    const json_t *j = out.json;
    if (out.status == SBX_OK && json_is_true(json_object_get(j, "ok"))) {
        json_t *res = json_object_get(j, "results");
        if (!evaluation_results_valid(res, cloud_jstr(r->def, "eval_key"),
                                      cloud_jstr(r->def, "result_kind"))) {
            outcome_fail(o, RUN_FAILED, "eval_error", "%s", EVALUATION_NO_PRIMARY);
        } else {
            o->status = RUN_SUCCEEDED;
            json_decref(o->results);
            o->results = json_incref(res);
            json_t *sm = json_object_get(j, "summary");
            json_decref(o->summary);
            o->summary = json_is_string(sm) ? json_incref(sm) : json_null();
        }
    } else {
        const char *code;
        char msg[512];
        run_status rs = evaluation_map_outcome(&out, &code, msg, sizeof msg);
        if (rs == RUN_CANCELLED)
            o->status = rs;
        else
            outcome_fail(o, rs, code ? code : "eval_error", "%s", msg);
    }
    sbx_outcome_free(&out);
}

static void run_local(actx *x, wrun *r, const rcbuf *transcript, run_outcome *o)
{
    local_registry *local = x->env->local;
    if (local == NULL) {
        outcome_fail(o, RUN_FAILED, "evaluator_unavailable", "%s", "no local evaluator registry");
        return;
    }
    double t = worker_run_timeout(local, r);
    local_dispatch_request rq = {.evaluation_run_id = r->run_id,
                                 .eval_key = cloud_jstr(r->def, "eval_key"),
                                 .eval_version = cloud_jstr(r->def, "eval_version"),
                                 .result_kind = cloud_jstr(r->def, "result_kind"),
                                 .timeout_s = t,
                                 .transcript = rcbuf_data(transcript),
                                 .transcript_len = rcbuf_len(transcript),
                                 .cancel = &r->cancel};
    local_dispatch_result res;
    memset(&res, 0, sizeof res);
    local_dispatch(local, &rq, &res);
    o->status = res.status;
    if (o->status == RUN_SUCCEEDED) {
        if (!evaluation_results_valid(res.results, rq.eval_key, rq.result_kind)) {
            outcome_fail(o, RUN_FAILED, "eval_error", "%s", EVALUATION_NO_PRIMARY);
        } else {
            json_decref(o->results);
            o->results = json_incref(res.results);
            json_decref(o->summary);
            o->summary = res.summary ? json_string(res.summary) : json_null();
        }
    } else if (o->status != RUN_CANCELLED) {
        outcome_fail(o, o->status, res.error_code[0] ? res.error_code : "eval_error", "%s",
                     res.error_message[0] ? res.error_message : "local evaluation failed");
    }
    local_dispatch_result_free(&res);
}

/* Serializes the result once, as canonical JSON (common/canonjson: sorted
 * keys, floats as CPython's repr, so an evaluator's 0.1 stays 0.1): *results
 * receives the results array's text (what the store keeps), and the body
 * every (re)submission sends holds those same bytes. NULL on failure. */
static char *result_body(actx *x, const run_outcome *o, const char *submission_id, double started,
                         double finished, long long duration_ms, size_t *len, char **results)
{
    char ts[40];
    strbuf rs, b;
    strbuf_init(&rs);
    strbuf_init(&b);
    *results = NULL;
    if (canonjson_append(&rs, o->results) != 0) goto fail;
    strbuf_printf(&b, "{\"duration_ms\":%lld,\"error_code\":", duration_ms);
    if (o->error_code[0])
        strbuf_json_str(&b, o->error_code);
    else
        strbuf_puts(&b, "null");
    strbuf_puts(&b, ",\"error_message\":");
    if (o->error_message[0])
        strbuf_json_str(&b, o->error_message);
    else
        strbuf_puts(&b, "null");
    strbuf_puts(&b, ",\"finished_at\":");
    strbuf_json_str(&b, time_rfc3339(finished, ts, sizeof ts));
    strbuf_printf(&b,
                  ",\"lease_generation\":%lld,\"protocol_version\":\"2\","
                  "\"result_schema_version\":\"2\",\"results\":",
                  x->a.lease_generation);
    strbuf_put(&b, rs.data, rs.len);
    strbuf_puts(&b, ",\"started_at\":");
    strbuf_json_str(&b, time_rfc3339(started, ts, sizeof ts));
    strbuf_puts(&b, ",\"status\":");
    strbuf_json_str(&b, run_status_name(o->status));
    strbuf_puts(&b, ",\"submission_id\":");
    strbuf_json_str(&b, submission_id);
    strbuf_puts(&b, ",\"summary\":");
    if (canonjson_append(&b, o->summary ? o->summary : json_null()) != 0) goto fail;
    strbuf_puts(&b, ",\"worker_id\":");
    strbuf_json_str(&b, x->env->worker_id);
    strbuf_putc(&b, '}');
    *results = strbuf_detach(&rs, NULL);
    return strbuf_detach(&b, len);
fail:
    strbuf_free(&rs);
    strbuf_free(&b);
    return NULL;
}

/* Makes a batch of finished results durable (one transaction, one fsync),
 * then submits them. */
static void flush_results(actx *x, ws_result *pend, size_t *np)
{
    worker_shared *sh = x->env->sh;
    /* Never drop a result the store could take: while it fails, retry
     * (claiming pauses, not ready) until it takes it or the worker stops.
     * A result it refuses for good (the run already has one: a result of
     * an older lease of this assignment is still in the outbox) is not
     * submitted; the server's lease decides what happens to the run. */
    int stored = 0, answered = 0; /* answered: the store works */
    int64_t t0 = worker_mono_us();
    for (int64_t delay = 100;; delay = delay < 5000 ? delay * 2 : 5000) {
        int rc = ws_runs_finished(x, pend, *np);
        answered = rc == 0 || rc == WS_REFUSED;
        if (rc == 0) {
            stored = 1;
            break;
        }
        if (rc == WS_REFUSED && *np > 1) {
            /* One of them is refused (all or nothing): each on its own, so
             * the others are still stored and submitted. */
            for (size_t i = 0; i < *np; i++) {
                size_t one = 1;
                flush_results(x, &pend[i], &one);
            }
            *np = 0;
            return;
        }
        if (rc == WS_REFUSED) {
            log_error("result refused by the store; not submitted",
                      LOG_S("assignment_id", x->a.assignment_id),
                      LOG_S("evaluation_run_id", pend[0].run_id));
            break;
        }
        pthread_mutex_lock(&sh->mu);
        sh->store_failing = 1;
        int stop = sh->stopping;
        pthread_mutex_unlock(&sh->mu);
        if (stop) break;
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&sh->mu);
    if (sh->store_failing && answered) {
        sh->store_failing = 0;
        pthread_cond_broadcast(&sh->cv);
    }
    pthread_mutex_unlock(&sh->mu);
    int64_t t1 = worker_mono_us();
    atomic_fetch_add(&x->tm_store_us, t1 - t0);
    /* Durable (or refused): done before the first submission, so that a
     * heartbeat answered after the commit does not take the run for one the
     * server gave up on. */
    for (size_t i = 0; i < *np; i++)
        for (size_t k = 0; k < x->nruns; k++)
            if (x->runs[k].run_id == pend[i].run_id) atomic_store(&x->runs[k].done, 1);
    for (size_t i = 0; i < *np; i++) {
        if (stored)
            outbox_put(x->env->outbox, x, pend[i].run_id, x->a.assignment_id, pend[i].submission_id,
                       x->a.lease_expires_epoch, pend[i].body, pend[i].len);
        else
            free(pend[i].body);
        free(pend[i].results);
        json_decref(pend[i].summary);
        free(pend[i].error_message);
    }
    atomic_fetch_add(&x->tm_submit_us, worker_mono_us() - t1);
    *np = 0;
}

/* One run's evaluation and its result body, serialized once: 1 and *p
 * filled (to be made durable and submitted by run_some), or 0 when the run
 * ended without a result to submit (lost, cancelled, resumed). Any thread. */
static int do_run(actx *x, size_t i, ws_result *p_out)
{
    worker_shared *sh = x->env->sh;
    wrun *r = &x->runs[i];
    if (atomic_load(&x->lost)) {
        atomic_store(&r->done, 1);
        return 0;
    }
    if (atomic_load(&r->cancel)) {
        atomic_store(&r->done, 1);
        wcount(sh, WC_RUNS_CANCELLED, 1);
        return 0;
    }
    int already = 0;
    for (size_t k = 0; k < json_array_size(x->skip_runs) && !already; k++)
        already = !strcmp(json_string_value(json_array_get(x->skip_runs, k)), r->run_id);
    if (already) {
        /* Resumed after a restart: this run's result is stored (and in
         * the outbox if not yet acknowledged). */
        atomic_store(&r->done, 1);
        return 0;
    }
    pthread_mutex_lock(&sh->mu);
    sh->active_runs++;
    worker_gauges_locked(sh);
    pthread_mutex_unlock(&sh->mu);
    log_debug("run started", LOG_S("assignment_id", x->a.assignment_id),
              LOG_S("evaluation_run_id", r->run_id), LOG_S("eval_key", r->run->eval_key));
    run_outcome o = {0};
    o.results = json_array();
    o.summary = json_null();
    double started = time_now();
    int64_t t0 = time_mono_ms(), e0 = worker_mono_us();
    const char *mode = cloud_mode_name(r->run->mode);
    if (r->run->mode == CLOUD_MODE_PYTHON)
        run_managed(x, r, x->img, &o);
    else
        run_local(x, r, x->transcript, &o);
    int64_t eval_us = worker_mono_us() - e0;
    atomic_fetch_add(&x->tm_eval_us, eval_us);
    double finished = time_now();
    long long dur = time_mono_ms() - t0;
    const char *key_label = metrics_eval_key(r->run->eval_key);
    metrics_observe(METRIC_EVAL_SECONDS, (double)eval_us / 1e6, "mode", mode, "eval_key",
                    key_label);
    metrics_inc(METRIC_RUNS, "mode", mode, "status",
                run_status_name(atomic_load(&r->cancel) ? RUN_CANCELLED : o.status), "eval_key",
                key_label);
    /* A run stays "not done" (heartbeats keep its lease) until its result is
     * durable: while the store takes no writes (disk full) it is retried. */
    pthread_mutex_lock(&sh->mu);
    sh->active_runs--;
    worker_gauges_locked(sh);
    pthread_mutex_unlock(&sh->mu);
    if (o.status == RUN_CANCELLED || atomic_load(&r->cancel)) {
        /* Not accepted by the server any more, lost, or stopping:
         * nothing is submitted. */
        wcount(sh, WC_RUNS_CANCELLED, 1);
        log_info("run cancelled", LOG_S("assignment_id", x->a.assignment_id),
                 LOG_S("evaluation_run_id", r->run_id));
        json_decref(o.results);
        json_decref(o.summary);
        atomic_store(&r->done, 1);
        return 0;
    }
    wcount(sh,
           o.status == RUN_SUCCEEDED   ? WC_RUNS_SUCCEEDED
           : o.status == RUN_TIMED_OUT ? WC_RUNS_TIMED_OUT
                                       : WC_RUNS_FAILED,
           1);
    ws_result p;
    memset(&p, 0, sizeof p);
    ids_uuid(p.submission_id);
    /* Serialized once: these bytes are stored and every (re)submission
     * sends them unchanged. */
    p.body = result_body(x, &o, p.submission_id, started, finished, dur, &p.len, &p.results);
    json_decref(o.results);
    log_debug("run finished", LOG_S("assignment_id", x->a.assignment_id),
              LOG_S("evaluation_run_id", r->run_id), LOG_S("status", run_status_name(o.status)),
              LOG_S("error_code", o.error_code), LOG_I("duration_ms", dur));
    if (p.body == NULL) {
        json_decref(o.summary);
        atomic_store(&r->done, 1);
        return 0;
    }
    p.run_id = r->run_id;
    p.status = run_status_name(o.status);
    p.started = started;
    p.finished = finished;
    p.duration_ms = dur;
    p.summary = o.summary;
    snprintf(p.error_code, sizeof p.error_code, "%s", o.error_code);
    p.error_message = o.error_message[0] ? strdup(o.error_message) : NULL;
    *p_out = p;
    return 1;
}

/* ---- the run pool ---- */

/* Helper threads that run the runs of assignments in parallel with the
 * assignments' own threads. Its lock guards the help queue and, for each
 * assignment in it, runs_left / helpers / help_queued. */
struct run_pool {
    pthread_mutex_t mu;
    pthread_cond_t help_cv; /* helpers: help queue, stop */
    pthread_cond_t done_cv; /* assignment threads: their runs finished */
    actx *head, *tail;      /* help queue */
    pthread_t *th;
    long nth, started;
    int stopping;
};

/* An assignment's results are made durable together, one transaction and
 * one disk flush, when its runs end close together: a finished run's
 * result waits (in x->pend) while runs of its assignment remain, and the
 * run that ends last commits them all. The wait is bounded: a result that
 * has waited RESULT_LINGER_MS is committed when its thread is about to
 * start another evaluation, or when it gives up waiting for runs still
 * being evaluated elsewhere. */
#define RESULT_LINGER_MS 20

/* Commits x's waiting results (p->mu held; released during the commit). */
static void commit_waiting(run_pool *p, actx *x)
{
    if (x->npend == 0) return;
    ws_result *batch = x->pend;
    size_t n = x->npend;
    /* later results wait in a fresh array (none: they are committed alone) */
    x->pend = calloc(x->nruns, sizeof *x->pend);
    x->npend = 0;
    x->flush_gen++;
    pthread_mutex_unlock(&p->mu);
    flush_results(x, batch, &n);
    free(batch);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->done_cv);
}

/* With p->mu held, after a run of x ended (have: its result was added to
 * x->pend): the last run commits every waiting result; a result whose
 * assignment still has unstarted runs waits for them (this thread takes the
 * next one); otherwise it waits for the runs being evaluated elsewhere, up to
 * RESULT_LINGER_MS. */
static void settle_results(run_pool *p, actx *x, int have)
{
    int unstarted = atomic_load(&x->next_run) < x->nruns;
    if (x->inflight == 0 && !unstarted) {
        commit_waiting(p, x);
        return;
    }
    if (!have || unstarted) return;
    unsigned gen = x->flush_gen;
    int64_t deadline = x->pend_since + RESULT_LINGER_MS;
    while (x->inflight > 0 && x->flush_gen == gen)
        if (time_cond_wait_until(&p->done_cv, &p->mu, deadline) != 0) break;
    if (x->flush_gen == gen) commit_waiting(p, x);
}

/* Takes runs of x (by x->next_run) until none is left. */
static void run_some(run_pool *p, actx *x)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        size_t i = atomic_fetch_add(&x->next_run, 1);
        if (i >= x->nruns) break;
        x->inflight++;
        if (x->npend > 0 && time_mono_ms() - x->pend_since >= RESULT_LINGER_MS)
            commit_waiting(p, x);
        pthread_mutex_unlock(&p->mu);
        ws_result r;
        int have = do_run(x, i, &r);
        pthread_mutex_lock(&p->mu);
        if (have && x->pend == NULL) { /* no room to wait: committed alone */
            pthread_mutex_unlock(&p->mu);
            size_t one = 1;
            flush_results(x, &r, &one);
            have = 0;
            pthread_mutex_lock(&p->mu);
        }
        x->inflight--;
        if (have) {
            if (x->npend == 0) x->pend_since = time_mono_ms();
            x->pend[x->npend++] = r;
        }
        settle_results(p, x, have);
        if (--x->runs_left == 0) pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Removes x from the help queue (p->mu held). */
static void help_unlink(run_pool *p, actx *x)
{
    actx *prev = NULL;
    for (actx *q = p->head; q; prev = q, q = q->help_next) {
        if (q != x) continue;
        if (prev)
            prev->help_next = q->help_next;
        else
            p->head = q->help_next;
        if (p->tail == q) p->tail = prev;
        break;
    }
    x->help_next = NULL;
    x->help_queued = 0;
}

static void *helper_main(void *arg)
{
    run_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        actx *x = p->head;
        if (x == NULL) {
            pthread_cond_wait(&p->help_cv, &p->mu);
            continue;
        }
        if (x->help_queued <= 1)
            help_unlink(p, x);
        else
            x->help_queued--;
        x->helpers++;
        pthread_mutex_unlock(&p->mu);
        run_some(p, x);
        pthread_mutex_lock(&p->mu);
        if (--x->helpers == 0) pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

run_pool *worker_run_pool_new(long nthreads)
{
    run_pool *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->nth = nthreads;
    p->th = calloc((size_t)(nthreads > 0 ? nthreads : 1), sizeof *p->th);
    if (p->th == NULL) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->help_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    return p;
}

int worker_run_pool_start(run_pool *p)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, (size_t)256 * 1024);
    int rc = 0;
    for (; rc == 0 && p->started < p->nth; p->started++)
        if ((rc = pthread_create(&p->th[p->started], &at, helper_main, p)) != 0) break;
    pthread_attr_destroy(&at);
    return rc == 0 ? 0 : -1;
}

void worker_run_pool_stop(run_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->help_cv);
    pthread_mutex_unlock(&p->mu);
    for (long i = 0; i < p->started; i++)
        pthread_join(p->th[i], NULL);
    p->started = 0;
}

void worker_run_pool_free(run_pool *p)
{
    if (p == NULL) return;
    worker_run_pool_stop(p);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->help_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
}

/* Runs the assignment's runs in parallel: this thread plus a run-pool
 * helper per local run (the managed runs share the assignment's jail
 * session, one at a time; all local: runs - 1 helpers); returns when every
 * run has ended. */
void worker_execute_runs(actx *x, const rcbuf *transcript, sbx_image *img)
{
    run_pool *p = x->env->run_pool;
    x->transcript = transcript;
    x->img = img;
    atomic_store(&x->next_run, 0);
    x->pend = x->nruns > 1 ? calloc(x->nruns, sizeof *x->pend) : NULL;
    x->npend = 0;
    x->inflight = 0;
    /* Managed runs take turns in the assignment's jail session: helpers
     * pay only for its local runs (each one dispatched on its own). */
    size_t nlocal = 0;
    for (size_t i = 0; i < x->nruns; i++)
        nlocal += x->runs[i].run->mode != CLOUD_MODE_PYTHON;
    size_t others = x->nruns > nlocal ? nlocal
                    : nlocal > 0      ? nlocal - 1
                                      : 0; /* besides this thread */
    pthread_mutex_lock(&p->mu);
    x->runs_left = x->nruns;
    long want = (long)others;
    if (want > p->nth) want = p->nth;
    if (want > 0 && !p->stopping) {
        x->help_queued = (int)want;
        x->help_next = NULL;
        if (p->tail)
            p->tail->help_next = x;
        else
            p->head = x;
        p->tail = x;
        if (want == 1)
            pthread_cond_signal(&p->help_cv);
        else
            pthread_cond_broadcast(&p->help_cv);
    }
    pthread_mutex_unlock(&p->mu);
    run_some(p, x);
    pthread_mutex_lock(&p->mu);
    if (x->help_queued > 0) help_unlink(p, x);
    while (x->runs_left > 0 || x->helpers > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    free(x->pend);
    x->pend = NULL;
    x->transcript = NULL;
    x->img = NULL;
}
