/* sidecar/worker_store: the worker's durable state through store/store.h
 * (SPEC §3): registration, claims, plans, run starts, results with their
 * outbox entries (durable before the first submit), lease extensions,
 * local terminal states; and recovery at start (valid leases resumed,
 * expired ones dropped; sidecar/worker/outbox.c owns the outbox table after the
 * results are stored). Without a store every function is a no-op. */
#include "sidecar/worker/worker_internal.h"

#include "common/canonjson.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/timeutil.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

#define RECOVERY_MARGIN_S 5.0

#define REPORT_EVERY_MS 10000

/* One store operation's failures with one status, for the rate-limited log. */
typedef struct {
    const char *op; /* borrowed string literal; NULL: a free slot */
    int code;       /* store status */
    int64_t logged_ms;
    long long unlogged; /* failures since the last line that were not logged */
} ws_fail_log;
#define WS_FAIL_LOG_SLOTS 8

/* One caller's results waiting for the group commit (on its stack). */
typedef struct ws_commit {
    actx *x;
    const ws_result *r;
    size_t n;
    int rc, done;
    uint64_t ticket; /* for store_durable_wait once committed */
    struct ws_commit *next;
} ws_commit;

/* Callers waiting for a commit, in arrival order, and whether a leader is
 * committing (the others queue for the next one), under mu; the failure
 * log, under log_mu. */
struct ws_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ws_commit *head;
    int busy;
    pthread_mutex_t log_mu;
    ws_fail_log log[WS_FAIL_LOG_SLOTS];
};

/* A failed store operation: counted every time (METRIC_STORE_FAILURES, by
 * operation and status), logged the first time and then at most once per
 * REPORT_EVERY_MS for the same operation and status, with how many failures
 * were not logged since the previous line. A full disk fails every retry of
 * every pending result; it logs a line per interval, not one per retry. */
static void report(const assign_env *env, const char *what, const store_err *e)
{
    const char *status = store_status_name(e->code);
    metrics_inc(METRIC_STORE_FAILURES, "operation", what, "status", status);
    int64_t now = time_mono_ms();
    long long unlogged = -1; /* -1: not logged now */
    ws_group *g = env->commits;
    pthread_mutex_lock(&g->log_mu);
    ws_fail_log *slot = NULL, *oldest = &g->log[0];
    for (size_t i = 0; i < WS_FAIL_LOG_SLOTS && slot == NULL; i++) {
        ws_fail_log *s = &g->log[i];
        if (s->op != NULL && s->code == e->code && strcmp(s->op, what) == 0)
            slot = s;
        else if (s->op == NULL || (oldest->op != NULL && s->logged_ms < oldest->logged_ms))
            oldest = s;
    }
    if (slot == NULL) {
        slot = oldest;
        *slot = (ws_fail_log){what, e->code, now, 0};
        unlogged = 0;
    } else if (now - slot->logged_ms >= REPORT_EVERY_MS) {
        unlogged = slot->unlogged;
        slot->unlogged = 0;
        slot->logged_ms = now;
    } else {
        slot->unlogged++;
    }
    pthread_mutex_unlock(&g->log_mu);
    if (unlogged >= 0)
        log_error("store operation failed", LOG_S("operation", what), LOG_S("error", e->msg),
                  LOG_S("status", status), LOG_I("not_logged_since_last", unlogged));
}

char *ws_stored_worker_id(store *st)
{
    store_worker sw;
    store_err e;
    if (st == NULL || store_worker_load(st, &sw, &e) != STORE_OK) return NULL;
    char *id = sw.worker_id ? strdup(sw.worker_id) : NULL;
    store_worker_free(&sw);
    return id;
}

void ws_registered(const assign_env *env, const char *rev, const json_t *catalog)
{
    if (env->store == NULL) return;
    store_err e;
    char *cat = canonjson_dumps_ordered(catalog);
    if (store_worker_save(env->store, env->worker_id, cloud_origin(env->cloud), rev, cat, NULL,
                          time_now(), &e) < 0)
        report(env, "worker_save", &e);
    free(cat);
}

void ws_claimed(const assign_env *env, actx **xs, size_t n)
{
    if (env->store == NULL || n == 0) return;
    store_claim *c = calloc(n, sizeof *c);
    char **raw = calloc(n, sizeof *raw);
    for (size_t i = 0; i < n; i++) {
        const cloud_assignment *a = &xs[i]->a;
        raw[i] = canonjson_dumps_ordered(a->obj);
        c[i] = (store_claim){a->assignment_id,
                             env->worker_id,
                             a->lease_generation,
                             a->lease_expires_epoch,
                             a->session_id,
                             a->session_revision_id,
                             a->agent_id,
                             a->environment,
                             a->trigger_reason,
                             a->event_count,
                             a->transcript_url,
                             a->definitions_url,
                             raw[i]};
    }
    store_err e;
    if (store_assignments_claimed(env->store, c, n, time_now(), &e) < 0)
        report(env, "assignments_claimed", &e);
    for (size_t i = 0; i < n; i++)
        free(raw[i]);
    free(raw);
    free(c);
}

void ws_planned(actx *x, const json_t *defs, const json_t *selected, const json_t *skipped,
                const json_t *plan_response, int skipped_status)
{
    const assign_env *env = x->env;
    if (env->store == NULL) return;
    json_t *req = json_pack("{s:s, s:s, s:I, s:O, s:O}", "protocol_version", "2", "worker_id",
                            env->worker_id, "lease_generation", (json_int_t)x->a.lease_generation,
                            "selected", selected, "skipped", skipped);
    char *dj = canonjson_dumps_ordered(defs), *rj = canonjson_dumps_ordered(req),
         *pj = canonjson_dumps_ordered(plan_response);
    size_t n = x->nruns;
    store_plan_run *runs = calloc(n ? n : 1, sizeof *runs);
    char **desc = calloc(n ? n : 1, sizeof *desc);
    for (size_t i = 0; i < n; i++) {
        const cloud_run *r = x->runs[i].run;
        desc[i] = canonjson_dumps_ordered(r->obj);
        runs[i] = (store_plan_run){r->run_id,
                                   r->eval_key,
                                   r->eval_version,
                                   cloud_mode_name(r->mode),
                                   worker_run_timeout(env->local, &x->runs[i]), /* as applied */
                                   desc[i]};
    }
    store_err e;
    if (store_assignment_planned(env->store, x->a.assignment_id, x->a.lease_generation, dj, rj, pj,
                                 skipped_status, runs, n, time_now(), &e) < 0)
        report(env, "assignment_planned", &e);
    for (size_t i = 0; i < n; i++)
        free(desc[i]);
    free(desc);
    free(runs);
    free(dj);
    free(rj);
    free(pj);
    json_decref(req);
}

void ws_runs_started(actx *x)
{
    const assign_env *env = x->env;
    if (env->store == NULL || x->nruns == 0) return;
    const char **ids = calloc(x->nruns, sizeof *ids);
    for (size_t i = 0; i < x->nruns; i++)
        ids[i] = x->runs[i].run_id;
    store_err e;
    if (store_runs_started(env->store, ids, x->nruns, time_now(), NULL, &e) < 0)
        report(env, "runs_started", &e);
    free(ids);
}

/* Fills sr[0..n) from a caller's results (borrowing their text). */
static void fill_results(const assign_env *env, const ws_commit *c, store_run_result *sr)
{
    for (size_t i = 0; i < c->n; i++) {
        const ws_result *r = &c->r[i];
        sr[i] = (store_run_result){
            r->run_id,        r->status,
            r->started,       r->finished,
            r->duration_ms,   json_is_string(r->summary) ? json_string_value(r->summary) : NULL,
            r->results,       r->error_code[0] ? r->error_code : NULL,
            r->error_message, r->submission_id,
            env->worker_id,   c->x->a.lease_generation,
            r->body,          r->len};
    }
}

/* Commits the results of callers [head, stop) in one transaction (not yet
 * waiting for the disk: *ticket). */
static int commit_group(const assign_env *env, ws_commit *head, ws_commit *stop, uint64_t *ticket)
{
    *ticket = 0;
    size_t n = 0;
    for (ws_commit *c = head; c != stop; c = c->next)
        n += c->n;
    if (n == 0) return 0;
    store_run_result *sr = calloc(n, sizeof *sr);
    size_t k = 0;
    for (ws_commit *c = head; c != stop; c = c->next) {
        fill_results(env, c, sr + k);
        k += c->n;
    }
    store_err e;
    int rc = store_runs_finished_async(env->store, sr, n, ticket, &e);
    free(sr);
    if (rc < 0) {
        /* Not stored: must not be submitted (SPEC §3). A conflict (the run
         * already has a result, e.g. one of an older lease still in the
         * outbox) is final; anything else may pass. */
        report(env, "runs_finished", &e);
        worker_note_error(env->sh, "store_error", e.msg);
        return e.code == STORE_CONFLICT ? WS_REFUSED : -1;
    }
    return 0;
}

ws_group *ws_group_new(void)
{
    ws_group *g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    pthread_mutex_init(&g->log_mu, NULL);
    return g;
}

void ws_group_free(ws_group *g)
{
    if (g == NULL) return;
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->log_mu);
    free(g);
}

int ws_runs_finished(actx *x, const ws_result *r, size_t n)
{
    const assign_env *env = x->env;
    if (env->store == NULL || n == 0) return 0;
    ws_group *g = env->commits;
    ws_commit me = {x, r, n, -1, 0, 0, NULL};
    pthread_mutex_lock(&g->mu);
    /* Queue behind the others (commit order = arrival order). */
    ws_commit **tail = &g->head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = &me;
    while (!me.done) {
        if (g->busy) {
            pthread_cond_wait(&g->cv, &g->mu);
            continue;
        }
        /* Leader: commit everything queued now, in one transaction; the
         * next leader may commit while this one waits for the disk. */
        g->busy = 1;
        ws_commit *batch = g->head;
        g->head = NULL;
        pthread_mutex_unlock(&g->mu);
        uint64_t ticket = 0;
        int rc = commit_group(env, batch, NULL, &ticket);
        if (rc != 0 && batch->next != NULL) {
            /* All or nothing failed: one caller's result may be the cause;
             * commit each caller's results on their own. */
            for (ws_commit *c = batch; c; c = c->next)
                c->rc = commit_group(env, c, c->next, &c->ticket);
        } else {
            for (ws_commit *c = batch; c; c = c->next) {
                c->rc = rc;
                c->ticket = ticket;
            }
        }
        pthread_mutex_lock(&g->mu);
        for (ws_commit *c = batch, *nx; c; c = nx) {
            nx = c->next;
            c->done = 1; /* c may go away once done is seen */
        }
        g->busy = 0;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    if (me.rc == 0 && me.ticket != 0) {
        /* Durable before the first submission: one disk flush covers every
         * commit made before it started (store group commit). */
        store_err e;
        if (store_durable_wait(env->store, me.ticket, &e) != STORE_OK) {
            report(env, "runs_finished", &e);
            worker_note_error(env->sh, "store_error", e.msg);
            me.rc = -1;
        }
    }
    return me.rc;
}

void ws_release_memory(const assign_env *env)
{
    if (env->store != NULL) store_release_memory(env->store);
}

void ws_finish(actx *x, const char *status, const char *code, const char *msg)
{
    const assign_env *env = x->env;
    if (env->store == NULL) return;
    store_err e;
    if (store_assignment_finish(env->store, x->a.assignment_id, x->a.lease_generation, status, code,
                                msg, time_now(), &e) < 0)
        report(env, "assignment_finish", &e);
}

void ws_lease(actx *x)
{
    const assign_env *env = x->env;
    if (env->store == NULL) return;
    store_err e;
    if (store_assignment_lease(env->store, x->a.assignment_id, x->a.lease_generation,
                               x->a.lease_expires_epoch, &e) < 0)
        report(env, "assignment_lease", &e);
}

void ws_heartbeat(actx *x, double at, const char *outcome, const char *code)
{
    const assign_env *env = x->env;
    if (env->store == NULL) return;
    store_err e;
    double lease = strcmp(outcome, "ok") == 0 ? x->a.lease_expires_epoch : 0;
    if (store_assignment_heartbeat(env->store, x->a.assignment_id, x->a.lease_generation, at,
                                   outcome, code, lease, &e) < 0)
        report(env, "assignment_heartbeat", &e);
}

void ws_recover(worker *w)
{
    const assign_env *env = &w->env;
    if (env->store == NULL) return;
    store_err e;
    double now = time_now();
    size_t dropped = 0;
    if (store_drop_expired(env->store, now, RECOVERY_MARGIN_S, &dropped, &e) < 0)
        report(env, "drop_expired", &e);
    /* Assignments still under a valid lease: resume. */
    store_assignment_state *as = NULL;
    size_t nas = 0, resumed = 0;
    if (store_recoverable_assignments(env->store, now, RECOVERY_MARGIN_S, &as, &nas, &e) < 0)
        report(env, "recoverable_assignments", &e);
    for (size_t i = 0; i < nas; i++) {
        store_assignment_state *s = &as[i];
        json_t *obj = s->claim_json ? json_loads(s->claim_json, 0, NULL) : NULL;
        fps_err err;
        actx *x = calloc(1, sizeof *x);
        x->env = env;
        if (obj == NULL || cloud_assignment_from_json(env->cloud, obj, &x->a, &err) != 0) {
            log_warn("cannot resume assignment", LOG_S("assignment_id", s->assignment_id),
                     LOG_S("error", obj ? err.msg : "no claim stored"));
            json_decref(obj);
            free(x);
            continue;
        }
        json_decref(obj);
        x->a.lease_generation = s->lease_generation;
        x->a.lease_expires_epoch = s->lease_expires_at;
        x->claimed_at = now;
        x->resumed = 1;
        x->skip_runs = json_array();
        for (size_t k = 0; k < s->n_runs; k++) {
            const char *st = s->runs[k].status;
            if (strcmp(st, "planned") != 0 && strcmp(st, "running") != 0 &&
                strcmp(st, "abandoned") != 0)
                json_array_append_new(x->skip_runs, json_string(s->runs[k].run_id));
        }
        pthread_mutex_lock(&w->sh.mu);
        worker_enqueue_locked(w, x);
        pthread_mutex_unlock(&w->sh.mu);
        resumed++;
    }
    store_assignments_free(as, nas);
    log_info("recovery", LOG_I("dropped_expired", (long long)dropped),
             LOG_I("resumed_assignments", (long long)resumed));
}
