/* sidecar/worker_memory: the worker's side of the memory budget (budget.h
 * holds the arithmetic): the claim loop's admission (reserve before a
 * claim, give back what the server did not send), a transcript's
 * Content-Length replacing its estimate (or refusing one that can never
 * fit), sandbox starts admitted against --sandbox-reserve-mb (waiting for
 * room only while heartbeats keep the lease), and the status snapshot.
 * Everything here runs under sh->mu; without a budget it only counts. */
#include "sidecar/worker/worker_internal.h"

#include "common/procmem.h"
#include "sidecar/worker/recent.h"

#include <stdio.h>
#include <unistd.h>

void worker_memory_init(worker_shared *sh, const worker_config *cfg)
{
    budget_init(&sh->mem, cfg->memory_limit, cfg->memory_base,
                cfg->memory_limit ? RECENT_MAX_BYTES : 0, cfg->sandbox_reserve,
                WORKER_MEMORY_FACTOR);
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

int worker_memory_sandbox_enter(const assign_env *env, const atomic_int *cancel, int wait)
{
    worker_shared *sh = env->sh;
    pthread_mutex_lock(&sh->mu);
    if (wait && !budget_sandbox_fits(&sh->mem)) {
        sh->mem.waiting++;
        while (!budget_sandbox_fits(&sh->mem) && !sh->stopping &&
               !(cancel && atomic_load(cancel))) {
            /* a cancel is an atomic set elsewhere: looked at every 100 ms */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&sh->mem_cv, &sh->mu, &ts);
        }
        sh->mem.waiting--;
    }
    /* stopped or cancelled: the evaluation is cut off by its own cancel */
    budget_sandbox_take(&sh->mem);
    pthread_mutex_unlock(&sh->mu);
    return 0;
}

void worker_memory_sandbox_leave(const assign_env *env)
{
    worker_shared *sh = env->sh;
    pthread_mutex_lock(&sh->mu);
    budget_sandbox_put(&sh->mem);
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
        "{s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:f}", "budget_bytes",
        b->limit ? json_integer((json_int_t)b->limit) : json_null(), "tree_bytes",
        tree >= 0 ? json_integer((json_int_t)tree) : json_null(), "accounted_bytes",
        (json_int_t)budget_in_use(b), "base_bytes", (json_int_t)b->base, "ring_bytes",
        (json_int_t)b->ring, "assignments_reserved_bytes", (json_int_t)b->assigned,
        "assignments_reserved", (json_int_t)b->assignments, "sandboxes_reserved_bytes",
        (json_int_t)b->sandboxed, "sandboxes_reserved", (json_int_t)b->sandboxes,
        "sandboxes_waiting", (json_int_t)b->waiting, "claims_waiting", sh->claims_held,
        "transcript_p95_bytes", (json_int_t)budget_p95(b), "bytes_per_transcript_byte", b->factor);
}
