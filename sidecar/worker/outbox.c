/* sidecar/outbox: see outbox.h. The retry thread runs the shared scheduler
 * loop (common/sched.h) over the queue. */
#include "sidecar/worker/outbox.h"
#include "sidecar/worker/outbox_schedule.h"

#include "common/log.h"
#include "common/metrics.h"
#include "common/thread.h"
#include "common/timeutil.h"
#include "common/sched.h"
#include "store/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One pending result. Its fields are under the outbox's lock, except
 * while it is in flight: then the attempting thread alone reads and writes
 * body, len, attempts and last (seq under the lock, as load_body learns it
 * for others too). */
typedef struct entry {
    char *run_id, *assignment_id, *submission_id; /* owned */
    char *body;                                   /* owned; NULL while it lives only in the store */
    size_t len;
    int64_t seq; /* its row in the store's outbox table; 0 = not known yet */
    int attempts;
    int in_flight;
    int64_t next_ms;
    double lease_end; /* wall clock; 0 = unknown */
    cloud_error last; /* the last failed attempt's error */
    void *owner;      /* borrowed, see outbox_hooks */
    struct entry *next;
} entry;

struct outbox {
    cloud *cloud;           /* borrowed, immutable */
    struct store *st;       /* borrowed, immutable; NULL = memory only */
    outbox_hooks hooks;     /* immutable; called with mu held */
    pthread_mutex_t mu;     /* guards head, depth, stopping and the entries */
    pthread_cond_t cv;      /* retry thread: entries due, stop */
    pthread_cond_t idle_cv; /* outbox_wait_empty */
    entry *head;            /* newest first */
    long depth;
    int started, stopping; /* started: the caller's thread (start, stop) */
    pthread_t th;
};

static void entry_free(entry *e)
{
    free(e->run_id);
    free(e->assignment_id);
    free(e->submission_id);
    free(e->body);
    free(e);
}

static entry *entry_new(const char *run_id, const char *assignment_id, const char *submission_id)
{
    entry *e = calloc(1, sizeof *e);
    if (e == NULL) return NULL;
    e->run_id = strdup(run_id);
    e->assignment_id = strdup(assignment_id);
    e->submission_id = strdup(submission_id);
    if (e->run_id == NULL || e->assignment_id == NULL || e->submission_id == NULL) {
        entry_free(e);
        return NULL;
    }
    return e;
}

/* Links e in (o->mu held). */
static void link_locked(outbox *o, entry *e)
{
    e->next = o->head;
    o->head = e;
    o->depth++;
    metrics_gauge_set(METRIC_OUTBOX_DEPTH, (double)o->depth);
}

/* Unlinks e (o->mu held). */
static void unlink_locked(outbox *o, entry *e)
{
    for (entry **p = &o->head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    o->depth--;
    metrics_gauge_set(METRIC_OUTBOX_DEPTH, (double)o->depth);
    if (o->depth == 0) pthread_cond_broadcast(&o->idle_cv);
}

outbox *outbox_new(cloud *c, struct store *st, const outbox_hooks *h)
{
    outbox *o = calloc(1, sizeof *o);
    if (o == NULL) return NULL;
    o->cloud = c;
    o->st = st;
    if (h != NULL) o->hooks = *h;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    pthread_cond_init(&o->idle_cv, NULL);
    return o;
}

/* Reads e's bytes back from the store (e is in flight, so it is ours).
 * Entries whose row was not known yet learn it: one full listing, then one
 * row each. Returns 0, 1 if the store holds no such pending entry any more
 * (it was settled), -1 on a store error. */
static int load_body(outbox *o, entry *e)
{
    store_outbox_entry *rows = NULL;
    size_t n = 0;
    store_err se;
    int64_t seq = e->seq;
    if (store_outbox_pending(o->st, seq > 0 ? seq - 1 : 0, seq > 0 ? 1 : 0, &rows, &n, &se) < 0) {
        log_error("outbox: cannot read a pending result", LOG_S("error", se.msg),
                  LOG_S("submission_id", e->submission_id));
        return -1;
    }
    int rc = 1;
    pthread_mutex_lock(&o->mu);
    for (size_t i = 0; i < n; i++) {
        store_outbox_entry *r = &rows[i];
        if (!strcmp(r->submission_id, e->submission_id)) {
            e->seq = r->seq;
            e->body = r->body; /* taken */
            e->len = r->body_len;
            r->body = NULL;
            rc = 0;
            continue;
        }
        for (entry *k = o->head; k && seq == 0; k = k->next)
            if (k->seq == 0 && !strcmp(k->submission_id, r->submission_id)) k->seq = r->seq;
    }
    pthread_mutex_unlock(&o->mu);
    store_outbox_free(rows, n);
    return rc;
}

/* Records an attempt's answer in the store's outbox table. */
static void record(outbox *o, const entry *e, store_submit_outcome oc, double at, long long dur,
                   const cloud_error *ce)
{
    if (o->st == NULL) return;
    store_attempt a = {oc,
                       at,
                       dur,
                       ce ? (int)ce->err.http_status : 200,
                       ce && ce->err.name[0] ? ce->err.name : NULL,
                       ce && ce->err.msg[0] ? ce->err.msg : NULL,
                       ce && ce->request_id[0] ? ce->request_id : NULL};
    store_err se;
    if (store_outbox_record(o->st, e->submission_id, &a, &se) < 0)
        log_error("store operation failed", LOG_S("operation", "outbox_record"),
                  LOG_S("error", se.msg), LOG_S("status", store_status_name(se.code)));
}

static void answered(outbox *o, const entry *e, outbox_outcome oc, const cloud_error *ce)
{
    if (o->hooks.answered == NULL) return;
    pthread_mutex_lock(&o->mu);
    o->hooks.answered(o->hooks.ud, e->owner, oc, ce);
    pthread_mutex_unlock(&o->mu);
}

/* What an attempt came to: retry with the server's backoff, settled (the
 * entry leaves), or not sent at all (the store could not give the bytes
 * back, or shutting down): retry after a pause. */
enum { ATTEMPT_RETRY = 0, ATTEMPT_SETTLED = 1, ATTEMPT_NOT_SENT = 2 };

/* One attempt on an in-flight entry (o->mu not held). */

static int attempt(outbox *o, entry *e)
{
    if (e->body == NULL && o->st != NULL) {
        int rc = load_body(o, e);
        if (rc > 0) return ATTEMPT_SETTLED; /* settled elsewhere */
        if (rc < 0) return ATTEMPT_NOT_SENT;
    }
    cloud_result_ack ack;
    cloud_error ce;
    /* After a failed call, even the first attempt of the next is a retry
     * (the budget may refuse it: then nothing is sent). */
    int again = e->attempts > 0;
    double at = time_now();
    int64_t t0 = time_mono_ms();
    int rc = cloud_result(o->cloud, e->run_id, e->body, e->len, again, &ack, &ce);
    if (rc != 0 && ce.errc == CLOUD_ERRC_RETRY_BUDGET_EXHAUSTED) {
        e->last = ce;
        return ATTEMPT_RETRY; /* not sent: nothing to record */
    }
    e->attempts++;
    long long dur = time_mono_ms() - t0;
    if (rc == 0) {
        record(o, e, ack.idempotent_replay ? STORE_SUBMIT_REPLAYED : STORE_SUBMIT_COMMITTED, at,
               dur, NULL);
        metrics_inc(METRIC_SUBMISSIONS, "outcome",
                    ack.idempotent_replay ? "idempotent_replay" : "committed");
        if (ack.idempotent_replay) metrics_inc(METRIC_REPLAYS, "call", "result");
        answered(o, e, ack.idempotent_replay ? OUTBOX_REPLAYED : OUTBOX_COMMITTED, NULL);
        log_debug("result committed", LOG_S("evaluation_run_id", e->run_id),
                  LOG_S("submission_id", e->submission_id), LOG_S("status", ack.status),
                  LOG_B("idempotent_replay", ack.idempotent_replay));
        return ATTEMPT_SETTLED;
    }
    if (ce.err.code == CLOUD_ABORTED) return ATTEMPT_NOT_SENT;
    record(o, e, ce.retryable ? STORE_SUBMIT_RETRY : STORE_SUBMIT_REJECTED, at, dur, &ce);
    if (ce.retryable) {
        e->last = ce;
        metrics_inc(METRIC_SUBMISSIONS, "outcome", "retried");
        answered(o, e, OUTBOX_RETRY, &ce);
        log_warn("result submission failed; will retry", LOG_S("evaluation_run_id", e->run_id),
                 LOG_S("code", ce.err.name), LOG_S("error", ce.err.msg),
                 LOG_S("request_id", ce.request_id), LOG_I("attempts", e->attempts));
        return ATTEMPT_RETRY;
    }
    metrics_inc(METRIC_SUBMISSIONS, "outcome", "rejected");
    answered(o, e, OUTBOX_REJECTED, &ce);
    log_error("result rejected", LOG_S("evaluation_run_id", e->run_id),
              LOG_S("assignment_id", e->assignment_id), LOG_S("code", ce.err.name),
              LOG_S("error", ce.err.msg), LOG_I("http_status", ce.err.http_status),
              LOG_S("request_id", ce.request_id));
    return ATTEMPT_SETTLED;
}

static int64_t retry_delay(outbox *o, int attempts, const cloud_error *e)
{
    if (o->hooks.retry_delay_ms != NULL) return o->hooks.retry_delay_ms(o->hooks.ud, attempts, e);
    return outbox_default_backoff_ms(attempts);
}

/* After an attempt (o->mu held): settled entries leave, the others are
 * rescheduled (and, with a store, give their bytes back to it). Returns the
 * entry to free once unlocked, or NULL. */
static entry *after_attempt_locked(outbox *o, entry *e, int outcome)
{
    e->in_flight = 0;
    if (outcome == ATTEMPT_SETTLED) {
        unlink_locked(o, e);
        return e;
    }
    /* Nothing sent: a pause; else the backoff; neither outlasts the lease
     * (outbox_schedule.h). */
    int sent = outcome != ATTEMPT_NOT_SENT;
    int64_t delay = outbox_retry_delay_ms(sent, sent ? retry_delay(o, e->attempts, &e->last) : 0,
                                          e->lease_end, time_now());
    e->next_ms = time_mono_ms() + delay;
    if (o->st != NULL) {
        free(e->body);
        e->body = NULL;
    }
    pthread_cond_broadcast(&o->cv);
    return NULL;
}

void outbox_put(outbox *o, void *owner, const char *run_id, const char *assignment_id,
                const char *submission_id, double lease_expires_epoch, char *body, size_t len)
{
    entry *e = entry_new(run_id, assignment_id, submission_id);
    if (e == NULL) {
        /* Durable already: the next start resends it. */
        log_error("outbox: out of memory; the result waits for a restart",
                  LOG_S("evaluation_run_id", run_id));
        free(body);
        return;
    }
    e->body = body;
    e->len = len;
    e->owner = owner;
    e->lease_end = lease_expires_epoch;
    e->in_flight = 1;
    pthread_mutex_lock(&o->mu);
    link_locked(o, e);
    pthread_mutex_unlock(&o->mu);
    int outcome = attempt(o, e);
    pthread_mutex_lock(&o->mu);
    entry *gone = after_attempt_locked(o, e, outcome);
    pthread_mutex_unlock(&o->mu);
    if (gone) entry_free(gone);
}

void outbox_detach(outbox *o, const void *owner)
{
    pthread_mutex_lock(&o->mu);
    for (entry *e = o->head; e; e = e->next)
        if (e->owner == owner) e->owner = NULL;
    pthread_mutex_unlock(&o->mu);
}

long outbox_depth(outbox *o)
{
    pthread_mutex_lock(&o->mu);
    long d = o->depth;
    pthread_mutex_unlock(&o->mu);
    return d;
}

int outbox_wait_empty(outbox *o, int64_t deadline_ms)
{
    pthread_mutex_lock(&o->mu);
    while (o->depth > 0 && time_mono_ms() < deadline_ms)
        time_cond_wait_until(&o->idle_cv, &o->mu, deadline_ms);
    int empty = o->depth == 0;
    pthread_mutex_unlock(&o->mu);
    return empty;
}

/* ---- the retry thread (sched_loop callbacks) ---- */

static void *sl_pick(void *ud, int64_t now, int64_t *next)
{
    for (entry *e = ((outbox *)ud)->head; e; e = e->next)
        if (!e->in_flight && sched_due(e->next_ms, now, next)) {
            e->in_flight = 1;
            return e;
        }
    return NULL;
}

static int sl_serve(void *ud, void *item)
{
    return attempt(ud, item);
}

static void sl_served(void *ud, void *item, int outcome)
{
    outbox *o = ud;
    entry *gone = after_attempt_locked(o, item, outcome);
    if (gone == NULL) return;
    pthread_mutex_unlock(&o->mu);
    entry_free(gone);
    pthread_mutex_lock(&o->mu);
}

static void *retry_main(void *arg)
{
    outbox *o = arg;
    sched_loop l = {&o->mu, &o->cv, &o->stopping, o, sl_pick, sl_serve, sl_served};
    sched_run(&l);
    return NULL;
}

long outbox_start(outbox *o, fps_err *err)
{
    long loaded = 0;
    if (o->st != NULL) {
        store_outbox_entry *rows = NULL;
        size_t n = 0;
        store_err se;
        if (store_outbox_pending(o->st, 0, 0, &rows, &n, &se) < 0) {
            fps_err_set(err, OUTBOX_ESTART, 0, "cannot_start",
                        "outbox: cannot list pending results: %s", se.msg);
            return -1;
        }
        pthread_mutex_lock(&o->mu);
        for (size_t i = 0; i < n; i++) {
            entry *e = entry_new(rows[i].run_id, rows[i].assignment_id, rows[i].submission_id);
            if (e == NULL) continue; /* stays in the store for the next start */
            e->seq = rows[i].seq;
            e->attempts = rows[i].attempts;
            e->next_ms = 0;
            link_locked(o, e);
            loaded++;
        }
        pthread_mutex_unlock(&o->mu);
        store_outbox_free(rows, n);
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, (size_t)256 * 1024);
    int rc = pthread_create(&o->th, &at, retry_main, o);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        fps_err_set(err, OUTBOX_ESTART, 0, "cannot_start", "outbox: cannot start its thread");
        return -1;
    }
    o->started = 1;
    return loaded;
}

void outbox_stop(outbox *o)
{
    if (o == NULL || !o->started) return;
    thread_stop_join(o->th, &o->mu, &o->cv, &o->stopping);
    o->started = 0;
}

void outbox_free(outbox *o)
{
    if (o == NULL) return;
    outbox_stop(o);
    for (entry *e = o->head, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    pthread_cond_destroy(&o->idle_cv);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    free(o);
}
