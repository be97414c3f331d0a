/* sidecar/worker_hb: the heartbeat thread. An assignment joins when its runs
 * start (first heartbeat at once), then beats every heartbeat interval,
 * listing its unfinished runs; runs missing from accepted_run_ids are
 * cancelled; lease_lost cancels them all (their sandboxes are killed); any
 * other failure is counted and the heartbeat is sent again after a short
 * jittered backoff, always ahead of the lease's end. Runs the shared
 * scheduler loop (common/sched.h): no polling. */
#include "sidecar/worker/worker_internal.h"

#include "common/log.h"
#include "common/timeutil.h"
#include "common/sched.h"

#include <string.h>

/* A heartbeat is due at least this long before the lease it keeps ends. */
#define HB_LEASE_MARGIN_S 2.0

void worker_hb_add(worker_hb *hb, actx *x)
{
    pthread_mutex_lock(&hb->mu);
    x->next_hb_ms = time_mono_ms();
    x->hb_next = hb->list;
    hb->list = x;
    x->hb_registered = 1;
    pthread_cond_broadcast(&hb->cv);
    pthread_mutex_unlock(&hb->mu);
}

void worker_hb_remove(worker_hb *hb, actx *x)
{
    pthread_mutex_lock(&hb->mu);
    while (x->hb_busy)
        pthread_cond_wait(&hb->cv, &hb->mu);
    for (actx **p = &hb->list; *p; p = &(*p)->hb_next)
        if (*p == x) {
            *p = x->hb_next;
            break;
        }
    x->hb_registered = 0;
    pthread_mutex_unlock(&hb->mu);
}

/* One heartbeat for x. Returns 1 if it failed and should be sent again
 * soon, else 0. */
static int beat(actx *x)
{
    const assign_env *env = x->env;
    worker_shared *sh = env->sh;
    json_t *ids = json_array();
    for (size_t i = 0; i < x->nruns; i++)
        if (!atomic_load(&x->runs[i].done) && !atomic_load(&x->runs[i].cancel))
            json_array_append_new(ids, json_string(x->runs[i].run_id));
    if (json_array_size(ids) == 0 || atomic_load(&x->lost)) {
        json_decref(ids);
        return 0;
    }
    int again = 0;
    json_t *accepted = NULL;
    char lease[64];
    cloud_error e;
    double sent_at = time_now();
    if (cloud_heartbeat(env->cloud, x->a.lease_generation, ids, &accepted, lease, sizeof lease,
                        &e) == 0) {
        wcount(sh, WC_HEARTBEATS, 1);
        double exp;
        if (time_parse_rfc3339(lease, &exp) == 0) {
            x->a.lease_expires_epoch = exp;
            ws_lease(x);
        }
        ws_heartbeat(x, sent_at, "ok", NULL);
        for (size_t i = 0; i < x->nruns; i++) {
            wrun *r = &x->runs[i];
            if (atomic_load(&r->done)) continue;
            int ok = 0;
            for (size_t k = 0; k < json_array_size(accepted) && !ok; k++)
                ok = !strcmp(json_string_value(json_array_get(accepted, k)), r->run_id);
            /* A run not yet started but not accepted is cancelled too. */
            if (!ok && !atomic_exchange(&r->cancel, 1))
                log_warn("run not accepted by heartbeat; cancelled",
                         LOG_S("assignment_id", x->a.assignment_id),
                         LOG_S("evaluation_run_id", r->run_id));
        }
        json_decref(accepted);
    } else if (e.errc == CLOUD_ERRC_LEASE_LOST) {
        if (!atomic_exchange(&x->lost, 1)) {
            wcount(sh, WC_LEASES_LOST, 1);
            metrics_inc(METRIC_LEASES_LOST);
            log_warn("lease lost (heartbeat); cancelling runs",
                     LOG_S("assignment_id", x->a.assignment_id),
                     LOG_I("lease_generation", x->a.lease_generation),
                     LOG_S("request_id", e.request_id));
        }
        ws_heartbeat(x, sent_at, "lease_lost", e.err.name[0] ? e.err.name : NULL);
        for (size_t i = 0; i < x->nruns; i++)
            atomic_store(&x->runs[i].cancel, 1);
        atomic_store(&x->cancel_conditions, 1);
    } else if (e.err.code != CLOUD_ABORTED) {
        again = 1;
        wcount(sh, WC_HEARTBEAT_FAILURES, 1);
        metrics_inc(METRIC_HEARTBEAT_FAILURES);
        if (e.err.code == CLOUD_PROTOCOL) wcount(sh, WC_PROTOCOL_ERRORS, 1);
        ws_heartbeat(x, sent_at, "failed", e.err.name[0] ? e.err.name : NULL);
        log_warn("heartbeat failed; beating again soon", LOG_S("assignment_id", x->a.assignment_id),
                 LOG_S("code", e.err.name), LOG_S("error", e.err.msg),
                 LOG_S("request_id", e.request_id));
    }
    json_decref(ids);
    return again;
}

/* ---- the heartbeat thread (sched_loop callbacks, under hb->mu) ---- */

static void *hb_pick(void *ud, int64_t now, int64_t *next)
{
    for (actx *x = ((worker_hb *)ud)->list; x; x = x->hb_next)
        if (sched_due(x->next_hb_ms, now, next)) {
            x->hb_busy = 1;
            return x;
        }
    return NULL;
}

static int hb_serve(void *ud, void *item)
{
    (void)ud;
    actx *x = item;
    int again = beat(x);
    /* After a failure, the heartbeat endpoint's jittered backoff (short
     * while failures are sparse), never longer than the interval. */
    return again ? (int)cloud_backoff_ms(x->env->cloud, CLOUD_EP_HEARTBEAT) : -1;
}

static void hb_served(void *ud, void *item, int retry_in_ms)
{
    worker_hb *hb = ud;
    actx *x = item;
    int64_t interval = hb->interval_s * 1000;
    int64_t next =
        time_mono_ms() + (retry_in_ms >= 0 && retry_in_ms < interval ? retry_in_ms : interval);
    /* The next beat stays ahead of the lease it keeps (with a margin; once
     * inside the margin, the schedule above stands). */
    double left_s = x->a.lease_expires_epoch - time_now() - HB_LEASE_MARGIN_S;
    if (left_s > 0 && left_s * 1000 < (double)(next - time_mono_ms()))
        next = time_mono_ms() + (int64_t)(left_s * 1000);
    x->next_hb_ms = next;
    x->hb_busy = 0;
    pthread_cond_broadcast(&hb->cv);
}

void *worker_hb_main(void *arg)
{
    worker_hb *hb = arg;
    sched_loop l = {&hb->mu, &hb->cv, &hb->stopping, hb, hb_pick, hb_serve, hb_served};
    sched_run(&l);
    return NULL;
}
