/* sidecar/worker_memory: the worker's side of the memory budget (budget.h
 * holds the arithmetic): the claim loop's admission (reserve before a
 * claim, give back what the server did not send), a transcript's
 * Content-Length replacing its estimate (or refusing one that can never
 * fit), the jail pool's gate through which every sandbox of the tree is
 * admitted by class (live runs wait while heartbeats keep the lease,
 * lease-bound conditions never wait, the playground waits briefly, and
 * backtests keep out of live work's way and are stopped when it waits),
 * the samples of running sandboxes that stop one outgrowing its
 * reservation at the budget, the archive writer's holdings, and the status
 * snapshot. The account is under sh->mu; the gate is installed only with a
 * budget (worker_gate_pool). */
#include "sidecar/worker/worker_internal.h"

#include "common/procmem.h"
#include "sidecar/worker/recent.h"

#include "common/log.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void worker_memory_init(worker_shared *sh, const worker_config *cfg)
{
    budget_init(&sh->mem, cfg->memory_limit, cfg->memory_base,
                cfg->memory_limit ? worker_recent_bound(cfg) : 0, cfg->sandbox_reserve,
                WORKER_MEMORY_FACTOR);
    sh->mem.sandbox_max = cfg->sandbox_memory;
    pthread_cond_init(&sh->mem_cv, NULL);
}

void worker_memory_destroy(worker_shared *sh)
{
    pthread_cond_destroy(&sh->mem_cv);
}

long worker_memory_admit_locked(worker_shared *sh, long want, uint64_t *each)
{
    long n = budget_claimable(&sh->mem, want);
    sh->claims_held = want > 0 && n == 0;
    *each = budget_claim(&sh->mem, n);
    return n;
}

void worker_memory_unclaimed_locked(worker_shared *sh, long n, uint64_t each)
{
    for (long i = 0; i < n; i++)
        budget_release(&sh->mem, each);
    if (n > 0) pthread_cond_broadcast(&sh->mem_cv);
}

void worker_memory_release(actx *x)
{
    worker_shared *sh = x->env->sh;
    pthread_mutex_lock(&sh->mu);
    if (x->mem_held) budget_release(&sh->mem, x->mem_reserved);
    x->mem_held = 0;
    x->mem_reserved = 0;
    pthread_cond_broadcast(&sh->mem_cv);
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

void worker_memory_hold_locked(worker_shared *sh, actx *x)
{
    if (x->mem_held) return;
    x->mem_reserved = budget_claim(&sh->mem, 1);
    x->mem_held = 1;
}

void worker_memory_settle(actx *x, uint64_t bytes)
{
    worker_shared *sh = x->env->sh;
    pthread_mutex_lock(&sh->mu);
    if (x->mem_held && bytes < x->mem_reserved) {
        budget_set(&sh->mem, &x->mem_reserved, bytes);
        pthread_cond_broadcast(&sh->mem_cv);
        pthread_cond_broadcast(&sh->cv);
    }
    pthread_mutex_unlock(&sh->mu);
}

int worker_memory_sized(void *ud, size_t bytes, char *msg, size_t mcap)
{
    actx *x = ud;
    worker_shared *sh = x->env->sh;
    int refuse = 0;
    pthread_mutex_lock(&sh->mu);
    if (budget_never_fits(&sh->mem, bytes)) {
        refuse = 1;
        snprintf(msg, mcap,
                 "transcript of %zu bytes can never fit the memory budget (%llu MiB: %llu MiB "
                 "of it at %.2f bytes per transcript byte, beside the process and one sandbox)",
                 bytes, (unsigned long long)(sh->mem.limit >> 20),
                 (unsigned long long)(budget_cost(&sh->mem, bytes) >> 20), sh->mem.factor);
    } else if (x->mem_held && !x->mem_sized) {
        budget_resize(&sh->mem, &x->mem_reserved, bytes);
    }
    x->mem_sized = 1;
    pthread_cond_broadcast(&sh->mem_cv);
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    return refuse;
}

/* ---- the pool's gate (sbx.h): every sandbox of the tree is admitted here ---- */

/* How long an operator's playground request waits for room before it is
 * answered 503 memory_budget_full. */
#define PLAYGROUND_WAIT_MS 2000

static int cancelled(const atomic_int *cancel)
{
    return cancel != NULL && atomic_load(cancel) != 0;
}

/* Waits on mem_cv for at most 100 ms (a cancel is an atomic set elsewhere:
 * looked at that often). */
static void mem_wait(worker_shared *sh)
{
    (void)time_cond_wait_until(&sh->mem_cv, &sh->mu, time_mono_ms() + 100);
}

/* 1 while background work must keep out: a live start or the claim loop
 * waits for memory. */
static int live_waiting(const worker_shared *sh)
{
    return sh->mem.waiting > 0 || sh->claims_held;
}

static int gate_enter(void *ud, sbx_ticket *t, atomic_int *cancel)
{
    worker_shared *sh = ud;
    budget *b = &sh->mem;
    int rc = 0;
    pthread_mutex_lock(&sh->mu);
    uint64_t need = budget_sandbox_need(b, t->need);
    switch (t->cls) {
    case SBX_GATE_NOWAIT: /* within a lease no heartbeat extends: counted only */
        break;
    case SBX_GATE_WAIT:
        if (budget_sandbox_fits_bytes(b, need)) break;
        b->waiting++;
        while (!budget_sandbox_fits_bytes(b, need) && !sh->stopping && !cancelled(cancel))
            mem_wait(sh);
        b->waiting--;
        /* stopping: admitted, and cut off by its own cancel */
        if (cancelled(cancel)) rc = -3;
        break;
    case SBX_GATE_PLAYGROUND: {
        int64_t until = time_mono_ms() + PLAYGROUND_WAIT_MS;
        while ((!budget_sandbox_fits_bytes(b, need) || b->waiting > 0) && !sh->stopping) {
            if (cancelled(cancel)) {
                rc = -3;
                break;
            }
            if (time_mono_ms() >= until) {
                rc = 1;
                break;
            }
            mem_wait(sh);
        }
        break;
    }
    case SBX_GATE_BACKGROUND:
        /* behind live work: only when no live start or claim waits, with
         * room for one live reservation left beside it (or when no sandbox
         * runs at all: it is then stopped as soon as live work waits) */
        while ((live_waiting(sh) || !(budget_background_fits(b, need) || b->sandboxes == 0)) &&
               !sh->stopping) {
            if (cancelled(cancel)) {
                rc = -3;
                break;
            }
            mem_wait(sh);
        }
        break;
    }
    if (rc == 0) {
        t->reserved = need;
        t->excess = 0;
        budget_sandbox_add(b, need);
    } else if (rc == 1) {
        sh->mem_refused++;
        metrics_inc(METRIC_MEMORY_REFUSED);
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

static void gate_leave(void *ud, sbx_ticket *t)
{
    worker_shared *sh = ud;
    pthread_mutex_lock(&sh->mu);
    budget_excess(&sh->mem, &t->excess, t->reserved, 0);
    budget_sandbox_sub(&sh->mem, t->reserved);
    t->reserved = 0;
    pthread_cond_broadcast(&sh->mem_cv);
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

static int gate_near(void *ud)
{
    worker_shared *sh = ud;
    pthread_mutex_lock(&sh->mu);
    int near = budget_near(&sh->mem) || (sh->claims_held && sh->mem.sandboxes > 0);
    pthread_mutex_unlock(&sh->mu);
    return near;
}

static const char *class_name(sbx_gate_class c)
{
    switch (c) {
    case SBX_GATE_WAIT:
        return "live";
    case SBX_GATE_NOWAIT:
        return "condition";
    case SBX_GATE_PLAYGROUND:
        return "playground";
    case SBX_GATE_BACKGROUND:
        return "background";
    }
    return "live";
}

static int gate_sample(void *ud, sbx_ticket *t, uint64_t bytes)
{
    worker_shared *sh = ud;
    budget *b = &sh->mem;
    pthread_mutex_lock(&sh->mu);
    budget_excess(b, &t->excess, t->reserved, bytes);
    const char *why = NULL;
    if (t->cls == SBX_GATE_BACKGROUND && live_waiting(sh))
        why = "live work waits for memory";
    else if (t->excess > 0 && b->sandboxes > 1 && budget_over(b))
        why = "it outgrew its reservation while the tree is at its budget";
    if (why != NULL) {
        sh->mem_reruns++;
        metrics_inc(METRIC_MEMORY_RERUNS, "class", class_name(t->cls));
    }
    long long budget_mb = (long long)(b->limit >> 20);
    pthread_mutex_unlock(&sh->mu);
    /* once per evaluation (a re-run stopped again is only counted) */
    if (why != NULL && t->reruns == 0)
        log_info("sandbox stopped to keep the memory budget; its evaluation runs again when "
                 "there is room (same outcome)",
                 LOG_S("class", class_name(t->cls)), LOG_S("reason", why),
                 LOG_I("used_mb", (long long)(bytes >> 20)),
                 LOG_I("reserved_mb", (long long)(t->reserved >> 20)),
                 LOG_I("budget_mb", budget_mb));
    return why != NULL;
}

void worker_memory_gate(worker_shared *sh, sbx_gate *g)
{
    memset(g, 0, sizeof *g);
    g->ud = sh;
    g->enter = gate_enter;
    g->leave = gate_leave;
    g->near = gate_near;
    g->sample = gate_sample;
    pthread_mutex_lock(&sh->mu);
    g->child_cap = budget_sandbox_cap(&sh->mem);
    pthread_mutex_unlock(&sh->mu);
}

int worker_memory_other_take(worker_shared *sh, uint64_t bytes)
{
    pthread_mutex_lock(&sh->mu);
    int ok = budget_other_take(&sh->mem, bytes);
    pthread_mutex_unlock(&sh->mu);
    return ok;
}

void worker_memory_other_put(worker_shared *sh, uint64_t bytes)
{
    pthread_mutex_lock(&sh->mu);
    budget_other_put(&sh->mem, bytes);
    pthread_cond_broadcast(&sh->mem_cv);
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

long long worker_memory_sample(void)
{
    procmem_sample ps;
    return procmem_tree(getpid(), &ps) == 0 ? (long long)(ps.rss + ps.memfd) : -1;
}

json_t *worker_memory_json_locked(worker_shared *sh, long long tree)
{
    const budget *b = &sh->mem;
    return json_pack(
        "{s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:f, s:I, s:I, s:I, s:I}",
        "budget_bytes", b->limit ? json_integer((json_int_t)b->limit) : json_null(), "tree_bytes",
        tree >= 0 ? json_integer((json_int_t)tree) : json_null(), "accounted_bytes",
        (json_int_t)budget_in_use(b), "base_bytes", (json_int_t)b->base, "ring_bytes",
        (json_int_t)b->ring, "assignments_reserved_bytes", (json_int_t)b->assigned,
        "assignments_reserved", (json_int_t)b->assignments, "sandboxes_reserved_bytes",
        (json_int_t)b->sandboxed, "sandboxes_reserved", (json_int_t)b->sandboxes,
        "sandboxes_waiting", (json_int_t)b->waiting, "claims_waiting", sh->claims_held,
        "transcript_p95_bytes", (json_int_t)budget_p95(b), "bytes_per_transcript_byte", b->factor,
        "sandboxes_excess_bytes", (json_int_t)b->excess, "other_bytes", (json_int_t)b->other,
        "sandbox_reruns", (json_int_t)sh->mem_reruns, "sandboxes_refused",
        (json_int_t)sh->mem_refused);
}
