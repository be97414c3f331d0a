/* store/store_deferred: the deferred-update queue, the flusher thread that
 * applies it, and the public protocol operations that use it: each either
 * queues its step (deferred mode) or runs it in its own write transaction
 * (sync mode). */
#include "store/store_int.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------ deferred updates (batched) */

/* Updates that only repeat idempotent protocol steps when lost (a run marked
 * running, a lease extension, a submission outcome: the entry is then resent
 * and answered idempotent_replay) are queued and applied in batches: by the
 * flusher thread every defer_ms, before any other write transaction (so the
 * order of updates is kept), and before the worker-facing reads. One commit
 * for many of them instead of one each. */
typedef enum {
    OP_STARTED = 1,
    OP_LEASE,
    OP_RECORD,
    OP_CLAIM,
    OP_PLAN,
    OP_AFINISH,
    OP_HEARTBEAT
} op_kind;

struct st_op {
    struct st_op *next;
    op_kind kind;
    char *id;   /* submission_id or assignment_id */
    char **ids; /* run ids (OP_STARTED) */
    size_t n;
    double t;  /* now / lease_expires_at / OP_HEARTBEAT: sent at */
    double t2; /* OP_HEARTBEAT: lease_expires_at */
    int64_t gen;
    store_attempt a; /* OP_RECORD; its strings owned below */
    char *a_code, *a_msg, *a_rid;
    store_claim *claims;      /* OP_CLAIM (strings in owned) */
    store_plan_run *runs;     /* OP_PLAN (strings in owned) */
    const char *s1, *s2, *s3; /* OP_PLAN: documents; OP_AFINISH: status, code, message;
                                 OP_HEARTBEAT: outcome, code */
    int flag;                 /* OP_PLAN: skipped */
    char **owned;
    size_t nowned, capowned;
};

/* Duplicates s into memory owned by the op. */
static const char *own(st_op *o, const char *s)
{
    if (!s) return NULL;
    if (o->nowned == o->capowned) {
        o->capowned = o->capowned ? o->capowned * 2 : 16;
        o->owned = realloc(o->owned, o->capowned * sizeof *o->owned);
        if (!o->owned) abort();
    }
    char *p = strdup(s);
    if (!p) abort();
    o->owned[o->nowned++] = p;
    return p;
}

static char *dup0(const char *s)
{
    if (!s) return NULL;
    char *p = strdup(s);
    if (!p) abort();
    return p;
}

static void op_free(st_op *o)
{
    free(o->id);
    if (o->ids)
        for (size_t i = 0; i < o->n; i++)
            free(o->ids[i]);
    free(o->ids);
    free(o->a_code);
    free(o->a_msg);
    free(o->a_rid);
    for (size_t i = 0; i < o->nowned; i++)
        free(o->owned[i]);
    free(o->owned);
    free(o->claims);
    free(o->runs);
    free(o);
}

/* A new op of kind with its id (copied), generation and time. */
static st_op *op_new(op_kind kind, const char *id, int64_t gen, double t)
{
    st_op *o = calloc(1, sizeof *o);
    if (!o) abort();
    o->kind = kind;
    o->id = dup0(id);
    o->gen = gen;
    o->t = t;
    return o;
}

static int deferred(store *st)
{
    return !st->opt.sync_updates;
}

static void enqueue(store *st, st_op *o)
{
    pthread_mutex_lock(&st->qmu);
    if (st->qtail)
        st->qtail->next = o;
    else
        st->qhead = o;
    st->qtail = o;
    st->qlen++;
    if (st->qlen == 1 || st->qlen >= 512) pthread_cond_signal(&st->qcv);
    pthread_mutex_unlock(&st->qmu);
}

static int apply_op(store *st, st_op *o, store_err *err)
{
    size_t changed = 0;
    switch (o->kind) {
    case OP_STARTED:
        return st_started_tx(st, (const char *const *)o->ids, o->n, o->t, &changed, err);
    case OP_LEASE:
        return st_lease_tx(st, o->id, o->gen, o->t, err);
    case OP_RECORD:
        return st_record_tx(st, o->id, &o->a, err);
    case OP_CLAIM:
        return st_claimed_tx(st, o->claims, o->n, o->t, err);
    case OP_PLAN:
        return st_planned_tx(st, o->id, o->gen, o->s1, o->s2, o->s3, o->flag, o->runs, o->n, o->t,
                             err);
    case OP_AFINISH:
        return st_afinish_tx(st, o->id, o->gen, o->s1, o->s2, o->s3, o->t, err);
    case OP_HEARTBEAT:
        return st_heartbeat_tx(st, o->id, o->gen, o->t, o->s1, o->s2, o->t2, err);
    }
    return STORE_OK;
}

/* Takes o: queues it (deferred mode) or applies it now in its own write
 * transaction named op. */
static int submit(store *st, st_op *o, const char *op, store_err *err)
{
    if (deferred(st)) {
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, op, err);
    if (code == STORE_OK) code = st_wend(st, apply_op(st, o, err), op, err);
    op_free(o);
    return code;
}

static const char SQL_SP[] = "SAVEPOINT deferred";
static const char SQL_SP_RELEASE[] = "RELEASE deferred";
static const char SQL_SP_ROLLBACK[] = "ROLLBACK TO deferred";

static void sp_exec(store *st, const char *sql)
{
    sqlite3_stmt *s = st_w(st, sql);
    if (s) {
        sqlite3_step(s);
        sqlite3_reset(s);
    }
}

/* Applies o and the ops after it, each in its own savepoint: a refused one is
 * rolled back alone and dropped, the others are appended at *tail. */
static void apply_each(store *st, st_op *o, st_op ***tail)
{
    while (o) {
        st_op *next = o->next;
        o->next = NULL;
        store_err e = {0};
        sp_exec(st, SQL_SP);
        int code = apply_op(st, o, &e);
        if (code < 0) {
            sp_exec(st, SQL_SP_ROLLBACK);
            sp_exec(st, SQL_SP_RELEASE);
            /* Refused (stale, unknown, ...): losing it is safe (see above). */
            log_warn("store: deferred update not applied", LOG_S("error", e.msg));
            op_free(o);
        } else {
            sp_exec(st, SQL_SP_RELEASE);
            **tail = o; /* kept until the transaction commits */
            *tail = &o->next;
        }
        o = next;
    }
}

/* The queue is applied under one savepoint; only when an update is refused
 * is it rolled back and applied again one savepoint per update, so that the
 * refused one alone is dropped. A savepoint per update costs two statements
 * and a copy of each page the update touches into the sub-journal. */
void st_drain_deferred(store *st)
{
    pthread_mutex_lock(&st->qmu);
    st_op *o = st->qhead;
    st->qhead = st->qtail = NULL;
    st->qlen = 0;
    pthread_mutex_unlock(&st->qmu);
    if (!o) return;
    st_op **tail = &st->inflight;
    while (*tail)
        tail = &(*tail)->next;
    if (o->next == NULL) {
        apply_each(st, o, &tail);
        return;
    }
    sp_exec(st, SQL_SP);
    int code = STORE_OK;
    for (st_op *p = o; p && code >= 0; p = p->next) {
        store_err e = {0};
        code = apply_op(st, p, &e);
    }
    if (code < 0) {
        sp_exec(st, SQL_SP_ROLLBACK);
        sp_exec(st, SQL_SP_RELEASE);
        apply_each(st, o, &tail);
        return;
    }
    sp_exec(st, SQL_SP_RELEASE);
    *tail = o; /* kept until the transaction commits */
}

void st_deferred_done(store *st, int committed)
{
    st_op *o = st->inflight;
    st->inflight = NULL;
    if (!o) return;
    if (committed) {
        while (o) {
            st_op *next = o->next;
            op_free(o);
            o = next;
        }
        return;
    }
    /* Rolled back: they go first again, in their order. */
    st_op *last = o;
    size_t n = 1;
    while (last->next)
        last = last->next, n++;
    pthread_mutex_lock(&st->qmu);
    last->next = st->qhead;
    st->qhead = o;
    if (!st->qtail) st->qtail = last;
    st->qlen += n;
    pthread_mutex_unlock(&st->qmu);
}

int store_flush(store *st, store_err *err)
{
    pthread_mutex_lock(&st->qmu);
    int empty = st->qhead == NULL;
    pthread_mutex_unlock(&st->qmu);
    if (empty) return STORE_OK;
    int code = st_wbegin(st, "apply deferred updates", err); /* drains */
    if (code) return code;
    return st_wcommit(st, "apply deferred updates", 0, err);
}

int store_assignment_lease(store *st, const char *assignment_id, int64_t lease_generation,
                           double lease_expires_at, store_err *err)
{
    if (!assignment_id) return st_errf(err, STORE_INVALID, "extend lease: no assignment_id");
    st_op *o = op_new(OP_LEASE, assignment_id, lease_generation, lease_expires_at);
    return submit(st, o, "extend lease", err);
}

int store_assignment_heartbeat(store *st, const char *assignment_id, int64_t lease_generation,
                               double at, const char *outcome, const char *error_code,
                               double lease_expires_at, store_err *err)
{
    if (!assignment_id || !outcome)
        return st_errf(err, STORE_INVALID, "record heartbeat: no assignment_id or outcome");
    st_op *o = op_new(OP_HEARTBEAT, assignment_id, lease_generation, at);
    o->t2 = lease_expires_at;
    o->s1 = own(o, outcome);
    o->s2 = own(o, error_code);
    return submit(st, o, "record heartbeat", err);
}

int store_runs_started(store *st, const char *const *run_ids, size_t n, double now,
                       size_t *n_started, store_err *err)
{
    if (n_started) *n_started = 0;
    if (n == 0) return STORE_OK;
    if (deferred(st) && !n_started) {
        st_op *o = op_new(OP_STARTED, NULL, 0, now);
        o->ids = calloc(n, sizeof *o->ids);
        if (!o->ids) abort();
        for (size_t i = 0; i < n; i++)
            if (run_ids[i]) o->ids[o->n++] = dup0(run_ids[i]);
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, "start runs", err);
    if (code) return code;
    size_t changed = 0;
    code = st_started_tx(st, run_ids, n, now, &changed, err);
    if (code) {
        st_wabort(st);
        return code;
    }
    code = st_wcommit(st, "start runs", 0, err);
    if (code == STORE_OK && n_started) *n_started = changed;
    return code;
}

int store_outbox_record(store *st, const char *submission_id, const store_attempt *a,
                        store_err *err)
{
    if (!submission_id || !a || !st_outcome_name(a->outcome))
        return st_errf(err, STORE_INVALID,
                       "record submission: a submission_id and a valid outcome are required");
    st_op *o = op_new(OP_RECORD, submission_id, 0, 0);
    o->a = *a;
    o->a.error_code = o->a_code = dup0(a->error_code);
    o->a.message = o->a_msg = dup0(a->message);
    o->a.request_id = o->a_rid = dup0(a->request_id);
    return submit(st, o, "record submission", err);
}

/* ----------------------------------- claims, plans, local ends (deferred too) */

/* Losing one of these only repeats an idempotent step: an unknown claim
 * expires on the server and is reclaimed; an unknown plan is replayed by the
 * server (same runs); a local end is rediscovered (lease_lost). The result of
 * a run (store_run_finished) is never deferred, and every deferred update is
 * applied before it in the same transaction, so its run row exists. */

int store_assignments_claimed(store *st, const store_claim *claims, size_t n, double now,
                              store_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!claims[i].assignment_id || !claims[i].assignment_id[0] || !claims[i].worker_id ||
            claims[i].lease_generation <= 0)
            return st_errf(err, STORE_INVALID,
                           "save claim: assignment %zu needs assignment_id, worker_id and a "
                           "positive lease_generation",
                           i);
    }
    if (n == 0) return STORE_OK;
    st_op *o = op_new(OP_CLAIM, NULL, 0, now);
    o->claims = calloc(n, sizeof *o->claims);
    if (!o->claims) abort();
    for (size_t i = 0; i < n; i++) {
        const store_claim *c = &claims[i];
        o->claims[i] = (store_claim){
            own(o, c->assignment_id), own(o, c->worker_id),      c->lease_generation,
            c->lease_expires_at,      own(o, c->session_id),     own(o, c->session_revision_id),
            own(o, c->agent_id),      own(o, c->environment),    own(o, c->trigger_reason),
            c->event_count,           own(o, c->transcript_url), own(o, c->definitions_url),
            own(o, c->claim_json)};
    }
    o->n = n;
    return submit(st, o, "save claim", err);
}

int store_assignment_planned(store *st, const char *assignment_id, int64_t lease_generation,
                             const char *definitions_json, const char *plan_request_json,
                             const char *plan_response_json, int skipped,
                             const store_plan_run *runs, size_t n, double now, store_err *err)
{
    if (!assignment_id) return st_errf(err, STORE_INVALID, "save plan: no assignment_id");
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].run_id || !runs[i].eval_key || !runs[i].eval_version ||
            !runs[i].execution_mode)
            return st_errf(err, STORE_INVALID,
                           "save plan: run %zu needs run_id, eval_key, eval_version and "
                           "execution_mode",
                           i);
    }
    st_op *o = op_new(OP_PLAN, assignment_id, lease_generation, now);
    o->s1 = own(o, definitions_json);
    o->s2 = own(o, plan_request_json);
    o->s3 = own(o, plan_response_json);
    o->flag = skipped;
    o->runs = calloc(n ? n : 1, sizeof *o->runs);
    if (!o->runs) abort();
    for (size_t i = 0; i < n; i++)
        o->runs[i] =
            (store_plan_run){own(o, runs[i].run_id),       own(o, runs[i].eval_key),
                             own(o, runs[i].eval_version), own(o, runs[i].execution_mode),
                             runs[i].timeout_seconds,      own(o, runs[i].descriptor_json)};
    o->n = n;
    return submit(st, o, "save plan", err);
}

int store_assignment_finish(store *st, const char *assignment_id, int64_t lease_generation,
                            const char *status, const char *error_code, const char *error_message,
                            double now, store_err *err)
{
    static const char *const OK[] = {"failed", "lost", "dropped", "skipped", "completed", NULL};
    if (!assignment_id) return st_errf(err, STORE_INVALID, "finish assignment: no assignment_id");
    if (!st_is_one_of(status, OK))
        return st_errf(err, STORE_INVALID,
                       "finish assignment: status must be failed, lost, dropped, skipped or "
                       "completed, not '%s'",
                       status ? status : "(null)");
    st_op *o = op_new(OP_AFINISH, assignment_id, lease_generation, now);
    o->s1 = own(o, status);
    o->s2 = own(o, error_code);
    o->s3 = own(o, error_message);
    return submit(st, o, "finish assignment", err);
}

/* Applies the deferred updates defer_ms after the first one was queued (or at
 * once when many are queued). */
void *st_flusher_main(void *arg)
{
    store *st = arg;
    pthread_mutex_lock(&st->qmu);
    int failed = 0;
    while (!st->flusher_stop) {
        if (st->qhead == NULL) {
            pthread_cond_wait(&st->qcv, &st->qmu);
            continue;
        }
        /* After a failure (a full disk), retry once a second, not every
         * defer_ms. */
        long delay_ms = failed ? 1000 : st->opt.defer_ms;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + delay_ms * 1000000L;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        while (!st->flusher_stop && st->qhead != NULL && (failed || st->qlen < 512)) {
            if (pthread_cond_timedwait(&st->qcv, &st->qmu, &ts) == ETIMEDOUT) break;
        }
        if (st->flusher_stop) break;
        pthread_mutex_unlock(&st->qmu);
        store_err e = {0};
        int was = failed;
        failed = store_flush(st, &e) != STORE_OK;
        if (failed && !was)
            log_warn("store: applying deferred updates failed; retried every second",
                     LOG_S("error", e.msg));
        pthread_mutex_lock(&st->qmu);
    }
    pthread_mutex_unlock(&st->qmu);
    return NULL;
}
