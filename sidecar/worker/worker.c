/* sidecar/worker: the worker's lifecycle (new/start/drain/stop), the
 * registration (catalog revision, adoption and validation of the server's
 * timing, re-registration on catalog change or catalog_mismatch) and the
 * claim loop (capacity = min(claim_limit, concurrency) - active, never > 32;
 * an empty claim waits poll_interval, interruptibly), readiness and the
 * status snapshot. See worker.h. */
#include "sidecar/worker/worker_internal.h"

#include "common/canonjson.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/timeutil.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/local/catalog.h"
#include "sidecar/local/local.h"
#include "sidecar/worker/outbox.h"
#include "sidecar/worker/recent.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long the worker stays idle (no work claimed, nothing active or
 * unsent) before it closes its kept-alive connections to the server. */
#define WORKER_IDLE_CLOSE_MS 30000

const char *const worker_counter_names[WC__COUNT] = {
    "assignments_claimed", "assignments_completed", "assignments_failed",
    "assignments_skipped", "runs_succeeded",        "runs_failed",
    "runs_timed_out",      "runs_cancelled",        "results_committed",
    "results_replayed",    "results_rejected",      "result_retries",
    "heartbeats",          "heartbeat_failures",    "leases_lost",
    "protocol_errors",     "transport_errors",      "claim_failures",
    "registrations",       "registration_failures", "conditions_selected",
    "conditions_skipped",  "transcripts_too_large", "checksum_mismatches",
};

void worker_note_error(worker_shared *sh, const char *code, const char *msg)
{
    pthread_mutex_lock(&sh->mu);
    snprintf(sh->last_error_code, sizeof sh->last_error_code, "%s", code ? code : "");
    snprintf(sh->last_error, sizeof sh->last_error, "%s", msg ? msg : "");
    sh->last_error_at = time_now();
    pthread_mutex_unlock(&sh->mu);
}

/* Sleeps up to ms unless stop/drain/catalog change. Locks w->sh.mu. */
static void loop_wait(worker *w, int64_t ms)
{
    int64_t until = time_mono_ms() + ms;
    pthread_mutex_lock(&w->sh.mu);
    while (!w->sh.stopping && !w->draining && !atomic_load(&w->catalog_dirty) &&
           time_cond_wait_until(&w->sh.cv, &w->sh.mu, until) == 0) {
    }
    pthread_mutex_unlock(&w->sh.mu);
}

/* The outbox's hook (outbox.h; the outbox's lock is held, so `owner`, an
 * actx, is still attached if not NULL). */
static void outbox_answered(void *ud, void *owner, outbox_outcome oc, const cloud_error *e)
{
    worker_shared *sh = ((const assign_env *)ud)->sh;
    switch (oc) {
    case OUTBOX_COMMITTED:
        wcount(sh, WC_RESULTS_COMMITTED, 1);
        return;
    case OUTBOX_REPLAYED:
        wcount(sh, WC_RESULTS_REPLAYED, 1);
        return;
    case OUTBOX_RETRY:
        wcount(sh, WC_RESULT_RETRIES, 1);
        if (e->err.code == CLOUD_TRANSPORT) wcount(sh, WC_TRANSPORT_ERRORS, 1);
        return;
    case OUTBOX_REJECTED:
        break;
    }
    wcount(sh, WC_RESULTS_REJECTED, 1);
    if (e->err.code == CLOUD_PROTOCOL) wcount(sh, WC_PROTOCOL_ERRORS, 1);
    worker_note_error(sh, e->err.name, e->err.msg);
    actx *x = owner;
    if (x != NULL && e->errc == CLOUD_ERRC_LEASE_LOST && !atomic_exchange(&x->lost, 1)) {
        wcount(sh, WC_LEASES_LOST, 1);
        for (size_t i = 0; i < x->nruns; i++)
            atomic_store(&x->runs[i].cancel, 1);
    }
}

/* The outbox's retry schedule: the result endpoint's jittered backoff;
 * when the retry budget held the retry back, at least a quarter second. */
static int64_t outbox_retry_delay(void *ud, int attempts, const cloud_error *e)
{
    const assign_env *env = ud;
    (void)attempts;
    int64_t d = cloud_backoff_ms(env->cloud, CLOUD_EP_RESULT);
    if (e->errc == CLOUD_ERRC_RETRY_BUDGET_EXHAUSTED && d < 250) d = 250;
    return d;
}

worker *worker_new(const worker_deps *d, fps_err *err)
{
    if (d->pool == NULL) {
        fps_err_set(err, WORKER_ESTART, 0, "cannot_start", "worker: a sandbox pool is required");
        return NULL;
    }
    worker *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->cfg = d->cfg;
    w->env.worker_id = w->worker_id;
    w->env.sh = &w->sh;
    w->env.hb = &w->hb;
    w->env.store = d->store;
    w->env.archive = d->archive;
    w->env.pool = d->pool;
    w->env.local = d->local;
    const char *id = d->worker_id ? d->worker_id : d->cfg.worker_id;
    /* Without an explicit id, reuse the stored one: the leases in the
     * database are fenced by it. */
    char *stored = id == NULL ? ws_stored_worker_id(d->store) : NULL;
    if (stored != NULL) id = stored;
    if (id == NULL) {
        char host[64] = "sidecar";
        gethostname(host, sizeof host - 1);
        snprintf(w->worker_id, sizeof w->worker_id, "%s-%d", host, (int)getpid());
    } else {
        snprintf(w->worker_id, sizeof w->worker_id, "%s", id);
    }
    free(stored);
    w->concurrency = d->cfg.concurrency > 0 ? d->cfg.concurrency : 4;
    if (w->concurrency > CLOUD_MAX_CAPACITY) w->concurrency = CLOUD_MAX_CAPACITY;
    cloud_config cc = {.server_url = d->cfg.server_url,
                       .token = d->token,
                       .ca_bundle = d->cfg.ca_bundle,
                       .request_timeout_s = d->cfg.request_timeout,
                       .worker_id = w->worker_id,
                       /* the assignment threads, the claim loop, the
                        * heartbeat and the outbox's retry thread */
                       .threads = (int)w->concurrency + 3};
    w->env.cloud = cloud_new(&cc, err);
    if (w->env.cloud == NULL) {
        free(w);
        return NULL;
    }
    outbox_hooks oh = {
        .ud = &w->env, .answered = outbox_answered, .retry_delay_ms = outbox_retry_delay};
    w->env.outbox = outbox_new(w->env.cloud, w->env.store, &oh);
    w->env.commits = ws_group_new();
    w->env.recent = recent_new(worker_recent_bound(&w->cfg));
    if (w->env.outbox == NULL || w->env.commits == NULL || w->env.recent == NULL) {
        fps_err_set(err, WORKER_ESTART, 0, "cannot_start", "worker: out of memory");
        outbox_free(w->env.outbox);
        ws_group_free(w->env.commits);
        recent_free(w->env.recent);
        cloud_free(w->env.cloud);
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->sh.mu, NULL);
    pthread_cond_init(&w->sh.cv, NULL);
    worker_memory_init(&w->sh, &w->cfg);
    pthread_mutex_init(&w->hb.mu, NULL);
    pthread_cond_init(&w->hb.cv, NULL);
    pthread_cond_init(&w->q_cv, NULL);
    pthread_cond_init(&w->idle_cv, NULL);
    w->hb.interval_s = 30;
    w->lease_duration_s = 120;
    w->poll_interval_s = 10;
    w->claim_limit = w->concurrency;
    w->disabled = json_array();
    atomic_store(&w->catalog_dirty, 1);
    snprintf(w->not_ready, sizeof w->not_ready, "not registered yet");
    return w;
}

/* The local catalog (from the local registry, else empty). */
static json_t *local_catalog(worker *w)
{
    json_t *c = NULL;
    if (w->env.local != NULL) c = local_registry_catalog(w->env.local, NULL);
    return c ? c : json_array();
}

/* One registration attempt. Returns 0, or -1 with e filled. */
static int do_register(worker *w, cloud_error *e)
{
    char rev[CATALOG_REVISION_LEN + 1];
    fps_err err;
    atomic_store(&w->catalog_dirty, 0);
    json_t *raw = local_catalog(w);
    json_t *cat = catalog_normalize(raw, &err);
    json_decref(raw);
    if (cat == NULL || catalog_revision(cat, rev, sizeof rev, &err) != 0) {
        memset(e, 0, sizeof *e);
        cloud_set_protocol_error(e, "local catalog: %s", err.msg);
        snprintf(e->err.name, sizeof e->err.name, "%s", err.name);
        json_decref(cat);
        return -1;
    }
    cloud_registration reg;
    if (cloud_register(w->env.cloud, rev, cat, w->concurrency, FPS_VERSION, &reg, e) != 0) {
        json_decref(cat);
        return -1;
    }
    pthread_mutex_lock(&w->sh.mu);
    w->registered = 1;
    snprintf(w->instance_id, sizeof w->instance_id, "%s", reg.instance_id);
    snprintf(w->evaluator_kind, sizeof w->evaluator_kind, "%s", reg.evaluator_kind);
    snprintf(w->catalog_revision, sizeof w->catalog_revision, "%s", rev);
    json_decref(w->catalog);
    w->catalog = cat;
    json_decref(w->disabled);
    w->disabled = reg.disabled;
    reg.disabled = NULL;
    w->lease_duration_s = reg.lease_duration_s;
    w->poll_interval_s = reg.poll_interval_s;
    w->claim_limit = reg.claim_limit;
    w->not_ready[0] = '\0';
    pthread_mutex_lock(&w->hb.mu); /* lock order: sh.mu, then hb.mu */
    w->hb.interval_s = reg.heartbeat_interval_s;
    pthread_cond_broadcast(&w->hb.cv);
    pthread_mutex_unlock(&w->hb.mu);
    pthread_mutex_unlock(&w->sh.mu);
    ws_registered(&w->env, rev, cat);
    wcount(&w->sh, WC_REGISTRATIONS, 1);
    metrics_inc(METRIC_REGISTRATIONS);
    log_info("registered with the server", LOG_S("worker_id", w->worker_id),
             LOG_S("evaluator_instance_id", reg.instance_id), LOG_S("catalog_revision", rev),
             LOG_I("heartbeat_interval_seconds", reg.heartbeat_interval_s),
             LOG_I("lease_duration_seconds", reg.lease_duration_s),
             LOG_I("poll_interval_seconds", reg.poll_interval_s),
             LOG_I("claim_limit", reg.claim_limit));
    return 0;
}

static void set_not_ready(worker *w, const char *fmt, const cloud_error *e)
    __attribute__((format(printf, 2, 0)));
static void set_not_ready(worker *w, const char *fmt, const cloud_error *e)
{
    pthread_mutex_lock(&w->sh.mu);
    snprintf(w->not_ready, sizeof w->not_ready, fmt, e->err.name, e->err.msg);
    pthread_mutex_unlock(&w->sh.mu);
}

/* Once the server has no work for us and nothing is active or unsent: gives
 * the store's page caches and freed heap pages back at once (an idle
 * worker's RSS; the next burst refills the caches from the OS's file cache),
 * and the cloud client's kept-alive connections once that has lasted
 * WORKER_IDLE_CLOSE_MS. Each once per idle period, so an idle worker costs
 * nothing. A steady stream has short lulls between claims; closing the
 * connections in each of them would only make the next claims connect anew
 * (the open sockets and the API latency would swing with the lulls). Any
 * thread; locks w->sh.mu. */
static void idle_trim(worker *w)
{
    long depth = outbox_depth(w->env.outbox);
    int64_t now = time_mono_ms();
    pthread_mutex_lock(&w->sh.mu);
    int idle = w->claim_empty && w->sh.nactive == 0 && depth == 0;
    if (!idle)
        w->idle_since_ms = 0;
    else if (w->idle_since_ms == 0)
        w->idle_since_ms = now;
    int trim = idle && !w->trimmed;
    int close = idle && !w->closed && now - w->idle_since_ms >= WORKER_IDLE_CLOSE_MS;
    if (trim) w->trimmed = 1;
    if (close) w->closed = 1;
    pthread_mutex_unlock(&w->sh.mu);
    if (close) cloud_release_idle(w->env.cloud);
    if (trim) ws_release_memory(&w->env);
    if (trim || close) malloc_trim(0);
}

static void *main_loop(void *arg)
{
    worker *w = arg;
    double reg_delay = 1;
    for (;;) {
        pthread_mutex_lock(&w->sh.mu);
        /* Drained from the admin API: no claims until resumed or stopped. */
        while (w->draining && !w->sh.stopping && w->resumable)
            pthread_cond_wait(&w->sh.cv, &w->sh.mu);
        int stop = w->sh.stopping || w->draining;
        int need_reg = !w->registered || atomic_load(&w->catalog_dirty);
        pthread_mutex_unlock(&w->sh.mu);
        if (stop) break;
        cloud_error e;
        if (need_reg) {
            if (do_register(w, &e) == 0) {
                reg_delay = 1;
                continue;
            }
            if (e.err.code == CLOUD_ABORTED) break;
            wcount(&w->sh, WC_REGISTRATION_FAILURES, 1);
            pthread_mutex_lock(&w->sh.mu);
            w->registered = 0;
            pthread_mutex_unlock(&w->sh.mu);
            set_not_ready(w, "registration failed: %s: %s", &e);
            /* Non-retryable (bad token, disabled instance, invalid
             * catalog): stay up, not ready, retry slowly. */
            double delay = e.retryable ? reg_delay : (reg_delay < 30 ? 30 : reg_delay);
            log_error("registration failed", LOG_S("code", e.err.name), LOG_S("error", e.err.msg),
                      LOG_B("retryable", e.retryable), LOG_I("http_status", e.err.http_status),
                      LOG_S("request_id", e.request_id), LOG_D("retry_in_s", delay));
            worker_note_error(&w->sh, e.err.name, e.err.msg);
            reg_delay = reg_delay * 2 > 60 ? 60 : reg_delay * 2;
            atomic_store(&w->catalog_dirty, 0);
            loop_wait(w, (int64_t)(delay * 1000));
            atomic_store(&w->catalog_dirty, 1);
            continue;
        }
        if (w->env.store != NULL && store_write_blocked(w->env.store)) {
            /* No new work while the store takes no writes (disk full,
             * read-only): held leases keep their heartbeats and committed
             * results keep being sent; the store probes once a second. */
            loop_wait(w, 1000);
            continue;
        }
        /* Capacity. */
        uint64_t each = 0;
        pthread_mutex_lock(&w->sh.mu);
        long limit = w->claim_limit < w->concurrency ? (long)w->claim_limit : w->concurrency;
        if (limit > CLOUD_MAX_CAPACITY) limit = CLOUD_MAX_CAPACITY;
        long capacity = limit - w->sh.nactive;
        /* Admission is decided here, before claiming: a claim asks only for
         * the assignments the memory budget has room for (reserved now,
         * what the server does not send is given back). */
        long fit = 0;
        while (!w->sh.stopping && !w->draining && !atomic_load(&w->catalog_dirty)) {
            if (capacity > 0 && !w->sh.store_failing) {
                fit = worker_memory_admit_locked(&w->sh, capacity, &each);
                if (fit > 0) break;
            } else {
                w->sh.claims_held = 0;
            }
            pthread_cond_wait(&w->sh.cv, &w->sh.mu);
            capacity = limit - w->sh.nactive;
        }
        capacity = fit;
        char rev[80];
        snprintf(rev, sizeof rev, "%s", w->catalog_revision);
        int64_t poll_ms = w->poll_interval_s * 1000;
        pthread_mutex_unlock(&w->sh.mu);
        if (capacity <= 0) continue;
        /* While the server fails persistently, claims are slow probes. */
        long long probe_in = 0;
        if (!cloud_claim_permit(w->env.cloud, &probe_in)) {
            pthread_mutex_lock(&w->sh.mu);
            worker_memory_unclaimed_locked(&w->sh, capacity, each);
            pthread_mutex_unlock(&w->sh.mu);
            loop_wait(w, probe_in);
            continue;
        }
        cloud_assignment *as = NULL;
        size_t n = 0, rejected = 0;
        double claimed_at = time_now();
        int claimed = cloud_claim(w->env.cloud, rev, capacity, &as, &n, &rejected, &e);
        pthread_mutex_lock(&w->sh.mu);
        worker_memory_unclaimed_locked(&w->sh, claimed == 0 ? capacity - (long)n : capacity, each);
        pthread_mutex_unlock(&w->sh.mu);
        if (claimed != 0) {
            if (e.err.code == CLOUD_ABORTED) break;
            wcount(&w->sh, WC_CLAIM_FAILURES, 1);
            worker_note_error(&w->sh, e.err.name, e.err.msg);
            if (e.errc == CLOUD_ERRC_CATALOG_MISMATCH) {
                log_warn("claim: catalog_mismatch; re-registering",
                         LOG_S("request_id", e.request_id));
                atomic_store(&w->catalog_dirty, 1);
                continue;
            }
            if (e.err.code == CLOUD_PROTOCOL) {
                wcount(&w->sh, WC_PROTOCOL_ERRORS, 1);
                log_error("claim: protocol error", LOG_S("code", e.err.name),
                          LOG_S("error", e.err.msg), LOG_S("request_id", e.request_id));
                loop_wait(w, poll_ms);
                continue;
            }
            /* Soon, as a new logical call (never a transport retry): a short
             * jittered delay that grows with consecutive claim failures. */
            double delay = (double)cloud_backoff_ms(w->env.cloud, CLOUD_EP_CLAIM) / 1000;
            if (!e.retryable) {
                /* invalid_credentials, instance_disabled, ...: not ready,
                 * retry slowly (re-registering first). */
                set_not_ready(w, "claim failed: %s: %s", &e);
                pthread_mutex_lock(&w->sh.mu);
                w->registered = 0;
                pthread_mutex_unlock(&w->sh.mu);
                delay = 30;
            } else if (e.err.code == CLOUD_TRANSPORT) {
                wcount(&w->sh, WC_TRANSPORT_ERRORS, 1);
            }
            log_at_(e.retryable ? LOG_WARN : LOG_ERROR, "claim failed", LOG_S("code", e.err.name),
                    LOG_S("error", e.err.msg), LOG_B("retryable", e.retryable),
                    LOG_I("http_status", e.err.http_status), LOG_S("request_id", e.request_id),
                    LOG_D("retry_in_s", delay));
            loop_wait(w, (int64_t)(delay * 1000));
            continue;
        }
        if (rejected) wcount(&w->sh, WC_PROTOCOL_ERRORS, (long long)rejected);
        if (n == 0) {
            free(as);
            pthread_mutex_lock(&w->sh.mu);
            w->claim_empty = 1;
            pthread_mutex_unlock(&w->sh.mu);
            idle_trim(w);
            if (rejected == 0) loop_wait(w, poll_ms);
            continue;
        }
        pthread_mutex_lock(&w->sh.mu);
        w->claim_empty = 0;
        w->trimmed = 0;
        w->closed = 0;
        w->idle_since_ms = 0;
        pthread_mutex_unlock(&w->sh.mu);
        wcount(&w->sh, WC_ASSIGNMENTS_CLAIMED, (long long)n);
        actx **xs = calloc(n, sizeof *xs);
        for (size_t i = 0; i < n; i++) {
            xs[i] = calloc(1, sizeof *xs[i]);
            xs[i]->env = &w->env;
            xs[i]->a = as[i];
            xs[i]->claimed_at = claimed_at;
            xs[i]->mem_reserved = each;
            xs[i]->mem_held = 1;
        }
        /* Durable before any further protocol step on them. */
        ws_claimed(&w->env, xs, n);
        pthread_mutex_lock(&w->sh.mu);
        for (size_t i = 0; i < n; i++) {
            actx *x = xs[i];
            worker_enqueue_locked(w, x);
            log_info("assignment claimed", LOG_S("assignment_id", x->a.assignment_id),
                     LOG_I("lease_generation", x->a.lease_generation),
                     LOG_S("session_id", x->a.session_id));
        }
        worker_gauges_locked(&w->sh);
        pthread_cond_broadcast(&w->q_cv);
        pthread_mutex_unlock(&w->sh.mu);
        metrics_add(METRIC_ASSIGNMENTS_CLAIMED, (double)n);
        free(xs);
        free(as);
    }
    return NULL;
}

static void *pool_main(void *arg)
{
    worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->sh.mu);
        while (w->q_head == NULL && !w->sh.stopping)
            pthread_cond_wait(&w->q_cv, &w->sh.mu);
        if (w->q_head == NULL) {
            pthread_mutex_unlock(&w->sh.mu);
            break;
        }
        actx *x = w->q_head;
        w->q_head = x->q_next;
        if (w->q_head == NULL) w->q_tail = NULL;
        if (w->sh.stopping) {
            /* Dropped unstarted: the server reclaims it when the lease ends. */
            w->sh.nactive--;
            if (x->mem_held) budget_release(&w->sh.mem, x->mem_reserved);
            pthread_mutex_unlock(&w->sh.mu);
            cloud_assignment_clear(&x->a);
            free(x);
            continue;
        }
        x->act_next = w->active;
        w->active = x;
        /* what it sees of the registration, as it is now */
        x->catalog = json_incref(w->catalog);
        x->disabled = json_incref(w->disabled);
        x->lease_duration_s = w->lease_duration_s;
        worker_memory_hold_locked(&w->sh, x); /* resumed ones hold none yet */
        pthread_mutex_unlock(&w->sh.mu);

        worker_process(x);
        worker_memory_release(x);

        pthread_mutex_lock(&w->sh.mu);
        for (actx **p = &w->active; *p; p = &(*p)->act_next)
            if (*p == x) {
                *p = x->act_next;
                break;
            }
        w->sh.nactive--;
        worker_gauges_locked(&w->sh);
        pthread_cond_broadcast(&w->sh.cv);
        pthread_cond_broadcast(&w->idle_cv);
        pthread_mutex_unlock(&w->sh.mu);
        outbox_detach(w->env.outbox, x);
        cloud_assignment_clear(&x->a);
        json_decref(x->skip_runs);
        json_decref(x->catalog);
        json_decref(x->disabled);
        free(x->runs);
        free(x);
        idle_trim(w);
    }
    return NULL;
}

static void catalog_changed_cb(void *ud)
{
    worker_catalog_changed(ud);
}

int worker_start(worker *w, fps_err *err)
{
    w->started_at = time_now();
    w->started_mono = time_mono_ms();
    ws_recover(w);
    long pending = outbox_start(w->env.outbox, err);
    if (pending < 0) return -1;
    if (pending > 0) log_info("outbox: pending results resent", LOG_I("entries", pending));
    w->npool = w->concurrency;
    w->pool_th = calloc((size_t)w->npool, sizeof *w->pool_th);
    /* Run-pool helpers: as many as sandboxes may run at once (the
     * assignment threads run their own runs too). */
    long helpers = w->cfg.max_sandboxes > 0 ? w->cfg.max_sandboxes : 4;
    w->env.run_pool =
        worker_run_pool_new(helpers > CLOUD_MAX_CAPACITY ? CLOUD_MAX_CAPACITY : helpers);
    if (w->env.run_pool == NULL || worker_run_pool_start(w->env.run_pool) != 0) {
        fps_err_set(err, WORKER_ESTART, 0, "cannot_start", "worker: cannot start the run pool");
        return -1;
    }
    if (w->env.local != NULL)
        local_registry_set_change_callback(w->env.local, catalog_changed_cb, w);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, (size_t)256 * 1024);
    int rc = pthread_create(&w->main_th, &at, main_loop, w);
    rc = rc || pthread_create(&w->hb_th, &at, worker_hb_main, &w->hb);
    for (long i = 0; rc == 0 && i < w->npool; i++)
        rc = pthread_create(&w->pool_th[i], &at, pool_main, w);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        fps_err_set(err, WORKER_ESTART, 0, "cannot_start", "worker: cannot start threads");
        return -1;
    }
    w->started = 1;
    log_info("worker started", LOG_S("worker_id", w->worker_id),
             LOG_S("server", cloud_origin(w->env.cloud)), LOG_I("concurrency", w->concurrency));
    return 0;
}

/* Stops claiming. A pause (resumable) leaves a drain already under way as
 * it is; a drain makes any drain final. */
static void start_draining(worker *w, int resumable)
{
    pthread_mutex_lock(&w->sh.mu);
    if (!w->draining)
        log_info(resumable ? "draining on request: no new claims" : "draining: no new claims",
                 LOG_I("active_assignments", w->sh.nactive));
    if (!w->draining || !resumable) w->resumable = resumable;
    w->draining = 1;
    pthread_cond_broadcast(&w->sh.cv);
    pthread_mutex_unlock(&w->sh.mu);
    metrics_gauge_set(METRIC_DRAINING, 1);
}

void worker_drain(worker *w)
{
    start_draining(w, 0);
}

void worker_pause(worker *w)
{
    start_draining(w, 1);
}

int worker_resume(worker *w)
{
    pthread_mutex_lock(&w->sh.mu);
    int ok = !w->sh.stopping && (!w->draining || w->resumable);
    if (ok && w->draining) {
        w->draining = 0;
        w->resumable = 0;
        log_info("drain ended on request: claiming again");
    }
    pthread_cond_broadcast(&w->sh.cv);
    pthread_mutex_unlock(&w->sh.mu);
    if (ok) metrics_gauge_set(METRIC_DRAINING, 0);
    return ok ? 0 : -1;
}

int worker_wait_drained(worker *w, double timeout_s)
{
    int64_t until = time_mono_ms() + (int64_t)(timeout_s * 1000);
    pthread_mutex_lock(&w->sh.mu);
    while (w->sh.nactive > 0 && time_cond_wait_until(&w->idle_cv, &w->sh.mu, until) == 0) {
    }
    int idle = w->sh.nactive == 0;
    pthread_mutex_unlock(&w->sh.mu);
    /* The last results are in the outbox once no assignment is active. */
    return idle && outbox_wait_empty(w->env.outbox, until);
}

void worker_stop(worker *w)
{
    if (w == NULL || !w->started) return;
    pthread_mutex_lock(&w->sh.mu);
    w->sh.stopping = 1;
    w->draining = 1;
    for (actx *x = w->active; x; x = x->act_next) {
        atomic_store(&x->cancel_conditions, 1);
        for (size_t i = 0; i < x->nruns; i++)
            atomic_store(&x->runs[i].cancel, 1);
    }
    pthread_cond_broadcast(&w->sh.cv);
    pthread_cond_broadcast(&w->q_cv);
    pthread_mutex_unlock(&w->sh.mu);
    pthread_mutex_lock(&w->hb.mu);
    w->hb.stopping = 1;
    pthread_cond_broadcast(&w->hb.cv);
    pthread_mutex_unlock(&w->hb.mu);
    cloud_abort(w->env.cloud);
    pthread_join(w->main_th, NULL);
    for (long i = 0; i < w->npool; i++)
        pthread_join(w->pool_th[i], NULL);
    worker_run_pool_stop(w->env.run_pool);
    pthread_join(w->hb_th, NULL);
    outbox_stop(w->env.outbox);
    w->started = 0;
    log_info("worker stopped", LOG_I("outbox_depth", outbox_depth(w->env.outbox)));
}

void worker_free(worker *w)
{
    if (w == NULL) return;
    worker_stop(w);
    outbox_free(w->env.outbox);
    while (w->q_head) {
        actx *x = w->q_head;
        w->q_head = x->q_next;
        cloud_assignment_clear(&x->a);
        free(x);
    }
    recent_free(w->env.recent);
    json_decref(w->catalog);
    json_decref(w->disabled);
    cloud_free(w->env.cloud);
    free(w->pool_th);
    worker_run_pool_free(w->env.run_pool);
    ws_group_free(w->env.commits);
    pthread_mutex_destroy(&w->sh.mu);
    pthread_cond_destroy(&w->sh.cv);
    worker_memory_destroy(&w->sh);
    pthread_mutex_destroy(&w->hb.mu);
    pthread_cond_destroy(&w->hb.cv);
    pthread_cond_destroy(&w->q_cv);
    pthread_cond_destroy(&w->idle_cv);
    free(w);
}

void worker_catalog_changed(worker *w)
{
    if (w == NULL) return;
    atomic_store(&w->catalog_dirty, 1);
    pthread_mutex_lock(&w->sh.mu);
    pthread_cond_broadcast(&w->sh.cv);
    pthread_mutex_unlock(&w->sh.mu);
}

#define MAX_REASONS 8
#define REASON_LEN (sizeof((worker *)0)->not_ready + 16)

/* Every reason that holds now, one line each (w->sh.mu held). */
static int not_ready_locked(worker *w, long long last_contact, const cloud_policy_stats *ps,
                            char r[][REASON_LEN], int max)
{
    int n = 0;
    if ((w->sh.stopping || w->draining) && n < max) snprintf(r[n++], REASON_LEN, "draining");
    if (!w->registered && n < max)
        snprintf(r[n++], REASON_LEN, "%s", w->not_ready[0] ? w->not_ready : "not registered");
    else if (w->not_ready[0] && n < max)
        snprintf(r[n++], REASON_LEN, "%s", w->not_ready);
    int blocked = w->env.store != NULL ? store_write_blocked(w->env.store) : 0;
    if (blocked == STORE_FULL && n < max)
        snprintf(r[n++], REASON_LEN, "disk_full: the store's disk is full; claiming paused");
    else if (blocked == STORE_READONLY && n < max)
        snprintf(r[n++], REASON_LEN, "read_only: the store is not writable; claiming paused");
    if (w->sh.store_failing && n < max)
        snprintf(r[n++], REASON_LEN, "store failing: results cannot be made durable");
    if (ps->breaker_open && n < max)
        snprintf(r[n++], REASON_LEN,
                 "server failing: circuit breaker open after %d consecutive failed requests "
                 "(claims paused; heartbeats and results go on)",
                 ps->consecutive_failures);
    if (w->registered && n < max &&
        (last_contact == 0 || time_mono_ms() - last_contact > w->lease_duration_s * 1000))
        snprintf(r[n++], REASON_LEN, "no server contact within the lease duration (%llds)",
                 w->lease_duration_s);
    return n;
}

/* The reasons (r) and their count. Locks w->sh.mu. */
static int not_ready(worker *w, char r[][REASON_LEN])
{
    long long last = cloud_last_contact_ms(w->env.cloud);
    cloud_policy_stats ps;
    cloud_policy_stats_get(w->env.cloud, &ps);
    pthread_mutex_lock(&w->sh.mu);
    int n = not_ready_locked(w, last, &ps, r, MAX_REASONS);
    pthread_mutex_unlock(&w->sh.mu);
    return n;
}

int worker_ready(worker *w, strbuf *reason)
{
    char r[MAX_REASONS][REASON_LEN];
    int n = not_ready(w, r);
    for (int i = 0; i < n; i++) {
        if (i) strbuf_puts(reason, "; ");
        strbuf_puts(reason, r[i]);
    }
    return n == 0;
}

sbx_image *worker_recent_image(worker *w, const char *assignment_id)
{
    return w != NULL ? recent_get(w->env.recent, assignment_id) : NULL;
}

json_t *worker_status_json(worker *w)
{
    char ts[40], reasons[MAX_REASONS][REASON_LEN];
    int nreasons = not_ready(w, reasons);
    cloud_policy_stats ps;
    cloud_policy_stats_get(w->env.cloud, &ps);
    long long last = cloud_last_contact_ms(w->env.cloud);
    long depth = outbox_depth(w->env.outbox);
    long long tree = worker_memory_sample();
    json_t *o = json_object();
    pthread_mutex_lock(&w->sh.mu);
    const char *state = w->sh.stopping  ? "stopped"
                        : w->draining   ? "draining"
                        : w->registered ? "registered"
                        : w->started    ? "unregistered"
                                        : "starting";
    json_object_set_new(o, "worker_id", json_string(w->worker_id));
    json_object_set_new(o, "server", json_string(cloud_origin(w->env.cloud)));
    json_object_set_new(o, "version", json_string(FPS_VERSION));
    json_object_set_new(
        o, "uptime_seconds",
        canonjson_seconds(w->started ? (time_mono_ms() - w->started_mono) / 1000.0 : 0));
    json_object_set_new(o, "state", json_string(state));
    json_object_set_new(o, "ready", json_boolean(nreasons == 0));
    json_t *rs = json_array();
    for (int i = 0; i < nreasons; i++)
        json_array_append_new(rs, json_string(reasons[i]));
    json_object_set_new(o, "not_ready_reason", nreasons ? json_string(reasons[0]) : json_null());
    json_object_set_new(o, "not_ready_reasons", rs);
    json_object_set_new(
        o, "server_policy",
        json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "breaker_state", ps.breaker_state,
                  "breaker_opened", (json_int_t)ps.breaker_opened, "consecutive_failures",
                  (json_int_t)ps.consecutive_failures, "retries", (json_int_t)ps.retries,
                  "retry_budget_exhausted", (json_int_t)ps.budget_exhausted, "window_requests",
                  (json_int_t)ps.window_requests, "window_retries", (json_int_t)ps.window_retries));
    json_object_set_new(o, "registered", json_boolean(w->registered));
    json_object_set_new(o, "evaluator_instance_id",
                        w->registered ? json_string(w->instance_id) : json_null());
    json_object_set_new(o, "evaluator_kind",
                        w->registered ? json_string(w->evaluator_kind) : json_null());
    json_object_set_new(o, "catalog_revision",
                        w->catalog_revision[0] ? json_string(w->catalog_revision) : json_null());
    json_object_set_new(o, "catalog_definitions",
                        json_integer(w->catalog ? (json_int_t)json_array_size(w->catalog) : 0));
    pthread_mutex_lock(&w->hb.mu); /* lock order: sh.mu, then hb.mu */
    long long hb_interval_s = w->hb.interval_s;
    pthread_mutex_unlock(&w->hb.mu);
    json_object_set_new(
        o, "timing",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "heartbeat_interval_seconds",
                  (json_int_t)hb_interval_s, "lease_duration_seconds",
                  (json_int_t)w->lease_duration_s, "poll_interval_seconds",
                  (json_int_t)w->poll_interval_s, "claim_limit", (json_int_t)w->claim_limit,
                  "concurrency", (json_int_t)w->concurrency, "request_timeout_seconds",
                  w->cfg.request_timeout, "drain_timeout_seconds", w->cfg.drain_timeout));
    json_object_set(o, "disabled_definitions", w->disabled);
    json_object_set_new(o, "active_assignments", json_integer(w->sh.nactive));
    json_object_set_new(o, "active_runs", json_integer(w->sh.active_runs));
    json_object_set_new(o, "active_sandboxes", json_integer(sbx_pool_active(w->env.pool)));
    json_object_set_new(o, "outbox_depth", json_integer(depth));
    json_object_set_new(o, "memory", worker_memory_json_locked(&w->sh, tree));
    if (last) {
        double at = time_now() - (time_mono_ms() - last) / 1000.0;
        json_object_set_new(o, "last_server_contact_at",
                            json_string(time_rfc3339(at, ts, sizeof ts)));
    } else {
        json_object_set_new(o, "last_server_contact_at", json_null());
    }
    if (w->sh.last_error_at > 0)
        json_object_set_new(o, "last_error",
                            json_pack("{s:s, s:s, s:s}", "code", w->sh.last_error_code, "message",
                                      w->sh.last_error, "at",
                                      time_rfc3339(w->sh.last_error_at, ts, sizeof ts)));
    else
        json_object_set_new(o, "last_error", json_null());
    pthread_mutex_unlock(&w->sh.mu);
    json_t *c = json_object();
    for (int i = 0; i < WC__COUNT; i++)
        json_object_set_new(c, worker_counter_names[i],
                            json_integer(atomic_load(&w->sh.counters[i])));
    json_object_set_new(o, "counters", c);
    json_object_set_new(o, "jail", sbx_pool_jail_json(w->env.pool));
    return o;
}

void worker_gate_pool(worker *w)
{
    if (w->cfg.memory_limit == 0) return;
    sbx_gate g;
    worker_memory_gate(&w->sh, &g);
    sbx_pool_set_gate(w->env.pool, &g);
}

void worker_ungate_pool(worker *w)
{
    if (w != NULL && w->cfg.memory_limit != 0) sbx_pool_set_gate(w->env.pool, NULL);
}

int worker_memory_hold(worker *w, unsigned long long bytes)
{
    return worker_memory_other_take(&w->sh, bytes);
}

void worker_memory_unhold(worker *w, unsigned long long bytes)
{
    worker_memory_other_put(&w->sh, bytes);
}
