/* sidecar/worker_outbox: result submission. A result is serialized once,
 * put in the outbox before its first submission, and every retry resends
 * the stored bytes unchanged. An entry leaves only on committed /
 * idempotent_replay or a non-retryable answer. The first attempt runs on
 * the assignment's thread; the outbox thread retries what failed
 * retryably, with backoff, sleeping on a condition variable. (In memory
 * until the store lands: worker_outbox_* are the points to wire to
 * store_run_finished / store_outbox_record.) */
#include "sidecar/worker_internal.h"

#include "common/log.h"
#include "common/timeutil.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One attempt on an entry (not under w->mu). Returns 1 if the entry is
 * finished (leaves the outbox). */
static int attempt(worker *w, obx *o)
{
    cloud_result_ack ack;
    cloud_error e;
    o->attempts++;
    double at = time_now();
    int64_t t0 = time_mono_ms();
    int rc = cloud_result(w->cloud, o->run_id, o->body, o->len, &ack, &e);
    long long dur = time_mono_ms() - t0;
    if (rc == 0) {
        ws_attempt(w, o->submission_id,
                   ack.idempotent_replay ? STORE_SUBMIT_REPLAYED : STORE_SUBMIT_COMMITTED, at, dur,
                   NULL);
        if (ack.idempotent_replay) {
            wcount(w, WC_RESULTS_REPLAYED, 1);
            metrics_inc(METRIC_SUBMISSIONS, "outcome", "idempotent_replay");
            metrics_inc(METRIC_REPLAYS, "call", "result");
        } else {
            wcount(w, WC_RESULTS_COMMITTED, 1);
            metrics_inc(METRIC_SUBMISSIONS, "outcome", "committed");
        }
        log_debug("result committed", LOG_S("evaluation_run_id", o->run_id),
                  LOG_S("submission_id", o->submission_id), LOG_S("status", ack.status),
                  LOG_B("idempotent_replay", ack.idempotent_replay));
        return 1;
    }
    if (e.kind == CLOUD_ABORTED) return 0;
    ws_attempt(w, o->submission_id, e.retryable ? STORE_SUBMIT_RETRY : STORE_SUBMIT_REJECTED, at,
               dur, &e);
    if (e.retryable) {
        wcount(w, WC_RESULT_RETRIES, 1);
        metrics_inc(METRIC_SUBMISSIONS, "outcome", "retried");
        if (e.kind == CLOUD_TRANSPORT) wcount(w, WC_TRANSPORT_ERRORS, 1);
        log_warn("result submission failed; will retry", LOG_S("evaluation_run_id", o->run_id),
                 LOG_S("code", e.code), LOG_S("error", e.message),
                 LOG_S("request_id", e.request_id), LOG_I("attempts", o->attempts));
        return 0;
    }
    wcount(w, WC_RESULTS_REJECTED, 1);
    metrics_inc(METRIC_SUBMISSIONS, "outcome", "rejected");
    if (e.kind == CLOUD_PROTOCOL) wcount(w, WC_PROTOCOL_ERRORS, 1);
    log_error("result rejected", LOG_S("evaluation_run_id", o->run_id),
              LOG_S("assignment_id", o->assignment_id), LOG_S("code", e.code),
              LOG_S("error", e.message), LOG_I("http_status", e.http_status),
              LOG_S("request_id", e.request_id));
    worker_note_error(w, e.code, e.message);
    if (e.kind == CLOUD_REMOTE && !strcmp(e.code, "lease_lost")) {
        pthread_mutex_lock(&w->mu);
        actx *x = o->owner;
        if (x != NULL && !atomic_exchange(&x->lost, 1)) {
            wcount(w, WC_LEASES_LOST, 1);
            for (size_t i = 0; i < x->nruns; i++)
                atomic_store(&x->runs[i].cancel, 1);
        }
        pthread_mutex_unlock(&w->mu);
    }
    return 1;
}

static void obx_free(obx *o)
{
    free(o->run_id);
    free(o->assignment_id);
    free(o->submission_id);
    free(o->body);
    free(o);
}

static void unlink_entry(worker *w, obx *o)
{
    for (obx **p = &w->outbox; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            break;
        }
    w->outbox_depth--;
    worker_gauges_locked(w);
    pthread_cond_broadcast(&w->idle_cv);
}

void worker_submit(worker *w, actx *x, const char *run_id, const char *submission_id, char *body,
                   size_t len)
{
    obx *o = calloc(1, sizeof *o);
    o->run_id = strdup(run_id);
    o->assignment_id = strdup(x->a.assignment_id);
    o->submission_id = strdup(submission_id);
    o->body = body; /* owned from here */
    o->len = len;
    o->owner = x;
    o->in_flight = 1;
    /* Stored before the first submission. */
    pthread_mutex_lock(&w->mu);
    o->next = w->outbox;
    w->outbox = o;
    w->outbox_depth++;
    worker_gauges_locked(w);
    pthread_mutex_unlock(&w->mu);
    int finished = attempt(w, o);
    pthread_mutex_lock(&w->mu);
    o->in_flight = 0;
    if (finished) {
        unlink_entry(w, o);
    } else {
        o->next_ms = time_mono_ms() + 1000;
        pthread_cond_broadcast(&w->ob_cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (finished) obx_free(o);
}

void worker_outbox_detach(worker *w, actx *x)
{
    pthread_mutex_lock(&w->mu);
    for (obx *o = w->outbox; o; o = o->next)
        if (o->owner == x) o->owner = NULL;
    pthread_mutex_unlock(&w->mu);
}

void *worker_outbox_main(void *arg)
{
    worker *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        int64_t now = time_mono_ms(), next = INT64_MAX;
        obx *due = NULL;
        for (obx *o = w->outbox; o; o = o->next) {
            if (o->in_flight) continue;
            if (o->next_ms <= now) {
                due = o;
                break;
            }
            if (o->next_ms < next) next = o->next_ms;
        }
        if (due == NULL) {
            if (next == INT64_MAX) {
                pthread_cond_wait(&w->ob_cv, &w->mu);
            } else {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                int64_t ms = next - now;
                ts.tv_sec += ms / 1000;
                ts.tv_nsec += (ms % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&w->ob_cv, &w->mu, &ts);
            }
            continue;
        }
        due->in_flight = 1;
        pthread_mutex_unlock(&w->mu);
        int finished = attempt(w, due);
        pthread_mutex_lock(&w->mu);
        due->in_flight = 0;
        if (finished) {
            unlink_entry(w, due);
            pthread_mutex_unlock(&w->mu);
            obx_free(due);
            pthread_mutex_lock(&w->mu);
        } else {
            int shift = due->attempts < 6 ? due->attempts : 6;
            due->next_ms = time_mono_ms() + (500LL << shift);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}
