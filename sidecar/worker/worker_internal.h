/* sidecar/worker/worker_internal: state shared by the worker's modules
 * (worker.c: lifecycle, registration and the claim loop; worker_assign.c:
 * one assignment from transcript to results; worker_conditions.c: its
 * condition phase; worker_plan.c: plan matching; worker_runs.c: its runs and
 * their results; worker_hb.c: the heartbeat thread; worker_store.c: the
 * durable state; sidecar/worker/outbox.c owns result submission). The claim
 * loop's state (struct worker) is worker.c's alone; the per-assignment code
 * sees only its actx and, through it, the assign_env it borrows. Each member
 * says which lock guards it, or that it is atomic or immutable. Private to
 * sidecar/worker/. */
#ifndef FPS_WORKER_INTERNAL_H
#define FPS_WORKER_INTERNAL_H
#include "common/metrics.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/cloud/cloud.h"
#include "sidecar/worker/budget.h"
#include "sidecar/worker/recent.h"
#include "sidecar/worker/worker.h"
#include "sidecar/worker/worker_plan.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

struct sbx_image;

enum {
    WC_ASSIGNMENTS_CLAIMED,
    WC_ASSIGNMENTS_COMPLETED,
    WC_ASSIGNMENTS_FAILED,
    WC_ASSIGNMENTS_SKIPPED,
    WC_RUNS_SUCCEEDED,
    WC_RUNS_FAILED,
    WC_RUNS_TIMED_OUT,
    WC_RUNS_CANCELLED,
    WC_RESULTS_COMMITTED,
    WC_RESULTS_REPLAYED,
    WC_RESULTS_REJECTED,
    WC_RESULT_RETRIES,
    WC_HEARTBEATS,
    WC_HEARTBEAT_FAILURES,
    WC_LEASES_LOST,
    WC_PROTOCOL_ERRORS,
    WC_TRANSPORT_ERRORS,
    WC_CLAIM_FAILURES,
    WC_REGISTRATIONS,
    WC_REGISTRATION_FAILURES,
    WC_CONDITIONS_SELECTED,
    WC_CONDITIONS_SKIPPED,
    WC_TRANSCRIPTS_TOO_LARGE,
    WC_CHECKSUM_MISMATCHES,
    WC__COUNT
};

struct worker_shared;
struct worker_hb;

/* What an assignment's code may touch: the worker's collaborators, borrowed
 * for the assignment's life. Filled before the worker's threads start and
 * immutable after (the pointers; each collaborator guards itself). */
typedef struct assign_env {
    cloud *cloud;                  /* thread-safe                                */
    struct store *store;           /* may be NULL (memory only); thread-safe     */
    struct outbox *outbox;         /* thread-safe                                */
    struct sbx_pool *pool;         /* thread-safe                                */
    struct local_registry *local;  /* may be NULL; thread-safe                   */
    struct store_archive *archive; /* may be NULL; thread-safe                   */
    struct recent_ring *recent;    /* thread-safe                                */
    struct run_pool *run_pool;     /* guarded by its own lock (worker_runs.c)    */
    struct ws_group *commits;      /* guarded by its own locks (worker_store.c)  */
    const char *worker_id;         /* the worker's, immutable                    */
    struct worker_shared *sh;      /* counters, gauges, the store's state        */
    struct worker_hb *hb;          /* the heartbeat list                         */
} assign_env;

/* One assignment being processed: the per-assignment context (owned by its
 * pool thread; the other threads named below reach it while it is linked). */
typedef struct actx {
    const assign_env *env; /* borrowed from the worker */
    /* Written by its pool thread before the runs start, then read by every
     * thread that touches the assignment; lease_expires_epoch is written by
     * the heartbeat thread alone while its runs execute. */
    cloud_assignment a;
    double claimed_at; /* wall clock */
    /* As registered when the assignment was picked up (owned references,
     * under sh->mu at that moment, then immutable): the local catalog as
     * sent, the server's disabled eval keys, the lease duration. */
    json_t *catalog, *disabled;
    long long lease_duration_s;
    wrun *runs; /* filled by its pool thread before the runs start */
    size_t nruns;
    atomic_int lost;   /* lease_lost seen */
    json_t *skip_runs; /* resumed: run ids that already have a result (immutable) */
    int resumed;
    atomic_int cancel_conditions; /* stop: kills condition sandboxes */
    /* heartbeat bookkeeping (under hb->mu) */
    int hb_registered, hb_busy;
    int64_t next_hb_ms;
    struct actx *hb_next;
    struct actx *q_next;   /* under sh->mu: the claim queue */
    struct actx *act_next; /* under sh->mu: the active list (status, stop) */
    /* Runs in parallel (worker_runs.c): the assignment's thread and up to
     * runs - 1 run-pool helpers take runs by next_run; the assignment's
     * thread waits (on the run pool's lock) until runs_left == 0 and no
     * helper holds it. */
    atomic_size_t next_run;
    size_t runs_left; /* under the run pool's lock: runs not yet finished */
    int helpers;      /* under the run pool's lock: helpers working on it */
    int help_queued;  /* under the run pool's lock: help requests queued */
    /* Results made durable together (worker_runs.c), under the run pool's
     * lock: runs being evaluated, results waiting for the commit (owned,
     * room for nruns; NULL: each result is committed alone), and a count of
     * commits that took the waiting results. */
    size_t inflight;
    struct ws_result *pend;
    size_t npend;
    int64_t pend_since; /* time_mono_ms when the first waiting result came */
    unsigned flush_gen;
    struct actx *help_next;  /* under the run pool's lock: help queue link */
    const rcbuf *transcript; /* borrowed while its runs execute: the bytes as received */
    struct sbx_image *img;   /* borrowed while its runs execute */
    /* The jail session serving the assignment's managed evaluations (its
     * conditions, then its runs: one child, the image mapped once), owned
     * by worker_process from the image being ready to the assignment's end
     * (NULL outside that, or when none could be opened: each evaluation then
     * alone). ss_mu serializes its use by the threads running its runs. */
    struct sbx_session *ss;
    pthread_mutex_t ss_mu;
    /* step timings (microseconds; logged at debug level per assignment) */
    atomic_llong tm_eval_us, tm_store_us, tm_submit_us;
    /* under sh->mu: its reservation in the memory budget (worker_memory.c) */
    uint64_t mem_reserved;
    int mem_held, mem_sized;
} actx;

/* What the claim loop shares with the assignments: the worker's lock and
 * what the assignments change under it (embedded in struct worker;
 * assignments borrow it through their env). */
typedef struct worker_shared {
    /* The worker's lock: guards the members below that are not atomic, and
     * struct worker's members marked "under sh.mu". */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* claim loop: capacity, store recovered, stop, drain, catalog */
    int nactive;       /* under mu: assignments queued + processing */
    int active_runs;   /* under mu: runs being evaluated */
    int store_failing; /* under mu: results cannot be made durable; no new claims */
    int stopping;      /* under mu: the worker is stopping */
    atomic_llong counters[WC__COUNT]; /* atomic */
    /* under mu: the memory budget's account (worker_memory.c); mem_cv
     * wakes sandbox starts waiting for room; claims_held: the last claim
     * asked for nothing because no assignment fits */
    budget mem;
    pthread_cond_t mem_cv;
    int claims_held;
    long long mem_reruns;  /* sandboxes stopped and run again (gate_sample) */
    long long mem_refused; /* playground sandboxes refused for want of room  */
    /* under mu: the last error (status page) */
    char last_error_code[64];
    char last_error[512];
    double last_error_at;
} worker_shared;

/* The heartbeat thread's list (worker_hb.c; embedded in struct worker). */
typedef struct worker_hb {
    pthread_mutex_t mu;   /* guards every member, and the hb_* members of the listed actx */
    pthread_cond_t cv;    /* heartbeat thread: list, interval, stop; hb_remove: not busy */
    actx *list;           /* assignments whose runs are executing */
    long long interval_s; /* the registered heartbeat interval */
    int stopping;
} worker_hb;

/* The claim loop's state. Assignments never see it: they get env. */
struct worker {
    worker_config cfg;   /* immutable after worker_new */
    char worker_id[129]; /* immutable after worker_new */
    long concurrency;    /* immutable after worker_new */
    /* The collaborators, immutable after worker_start: cloud, outbox,
     * recent, run_pool and commits are owned here; store, pool, local and
     * archive borrowed from worker_deps. */
    assign_env env;
    worker_shared sh;
    worker_hb hb;

    pthread_cond_t q_cv;    /* under sh.mu: pool threads wait for the queue */
    pthread_cond_t idle_cv; /* under sh.mu: drain waiters */

    /* registration (under sh.mu) */
    int registered;
    char instance_id[256];
    char evaluator_kind[16];
    char catalog_revision[80];
    json_t *catalog;  /* normalized, as sent */
    json_t *disabled; /* array of eval keys */
    long long lease_duration_s, poll_interval_s, claim_limit;
    atomic_int catalog_dirty; /* atomic */
    char not_ready[1024];     /* reason while not ready ("" otherwise) */

    /* lifecycle (under sh.mu; with sh.stopping) */
    int started, draining;
    int resumable; /* the drain came from worker_pause (the admin API) */
    /* threads: set by worker_start, joined by worker_stop (the caller's thread) */
    pthread_t main_th, hb_th;
    pthread_t *pool_th;
    long npool;

    /* work (under sh.mu) */
    actx *q_head, *q_tail; /* claimed, not yet picked up */
    actx *active;          /* being processed */

    /* idle trim (under sh.mu): the last claim was empty; caches given back and
     * server connections closed since; when the current idle stretch began
     * (monotonic ms, 0 = not idle) */
    int claim_empty, trimmed, closed;
    int64_t idle_since_ms;

    /* status (immutable after worker_start) */
    double started_at;
    int64_t started_mono;
};

extern const char *const worker_counter_names[WC__COUNT];

static inline void wcount(worker_shared *sh, int c, long long n)
{
    atomic_fetch_add(&sh->counters[c], n);
}
/* Publishes the gauges (active assignments and runs). Call with sh->mu
 * held, after changing them. */
static inline void worker_gauges_locked(worker_shared *sh)
{
    metrics_gauge_set(METRIC_ACTIVE_ASSIGNMENTS, sh->nactive);
    metrics_gauge_set(METRIC_ACTIVE_RUNS, sh->active_runs);
}
/* Appends a claimed or resumed assignment to the queue the assignment
 * threads take from, counting it active (w->sh.mu held). */
static inline void worker_enqueue_locked(struct worker *w, actx *x)
{
    if (w->q_tail)
        w->q_tail->q_next = x;
    else
        w->q_head = x;
    w->q_tail = x;
    w->sh.nactive++;
}
/* Records the last error (status page) and logs it. Locks sh->mu. */
void worker_note_error(worker_shared *sh, const char *code, const char *msg);

/* worker_store.c: the durable state (store/store.h); every function is a
 * no-op without a store. Failures are logged; ws_run_finished's decides
 * whether the result may be submitted (0) or not (-1). */
void ws_registered(const assign_env *env, const char *rev, const json_t *catalog);
void ws_claimed(const assign_env *env, actx **xs, size_t n);
void ws_planned(actx *x, const json_t *defs, const json_t *selected, const json_t *skipped,
                const json_t *plan_response, int skipped_status);
void ws_runs_started(actx *x);
typedef struct ws_result {
    const char *run_id, *status;
    double started, finished;
    long long duration_ms;
    json_t *summary; /* owned by the caller */
    char *results;   /* owned by the caller: the results array, canonical JSON text */
    char error_code[64];
    char *error_message; /* owned, may be NULL */
    char submission_id[37];
    char *body; /* owned until handed to worker_submit */
    size_t len;
} ws_result;
/* Stores finished results with their outbox entries in one durable
 * transaction. 0: they may be submitted; -1: not stored (the store is
 * failing: try again), do not submit; WS_REFUSED: the store refuses them
 * for good (a conflict: the run already has a result), do not submit.
 * Concurrent callers share transactions and disk flushes (group commit: a
 * caller that finds a commit in progress queues its results for the next
 * one, which commits everything queued at once). */
#define WS_REFUSED (-2)
/* The group commit's queue and lock, and the rate-limited log of store
 * failures with its own lock (one per worker). */
typedef struct ws_group ws_group;
ws_group *ws_group_new(void);
void ws_group_free(ws_group *g);
int ws_runs_finished(actx *x, const ws_result *r, size_t n);
void ws_finish(actx *x, const char *status, const char *code, const char *msg);
void ws_lease(actx *x);
/* Records one heartbeat (sent at `at`; outcome "ok", "lease_lost" or "failed"
 * with its code) in the assignment's bounded history. */
void ws_heartbeat(actx *x, double at, const char *outcome, const char *code);
/* Idle: gives back the store's page caches. */
void ws_release_memory(const assign_env *env);
/* At start: drop expired assignments and queue the assignments whose lease
 * is still valid (the outbox loads its own pending entries). */
void ws_recover(struct worker *w);
/* The worker id stored by a previous run (NULL if none); malloc'd. */
char *ws_stored_worker_id(struct store *st);

/* Microseconds on the monotonic clock (step timings). */
static inline int64_t worker_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* worker_memory.c: the memory budget (budget.h) as the worker uses it.
 * The tree's bytes per transcript byte while an assignment is in flight:
 * the received bytes (1x, kept for the recent ring, the archive and local
 * runs), its session image (~0.9x; ~1.8x when this was measured) and the
 * parser's work while the image is built: one 21.4 MB transcript alone
 * peaked at 66 MB (3.1x) above the
 * idle tree (tests/bench/worker/bench_memory.py); with a margin. */
#define WORKER_MEMORY_FACTOR 3.25
/* The recent ring's bound in bytes, as worker_config.recent_max says. */
static inline size_t worker_recent_bound(const worker_config *cfg)
{
    return cfg->recent_max < 0    ? 0
           : cfg->recent_max == 0 ? RECENT_MAX_BYTES
                                  : (size_t)cfg->recent_max;
}
void worker_memory_init(worker_shared *sh, const worker_config *cfg);
void worker_memory_destroy(worker_shared *sh);
/* Claim admission (sh->mu held): how many of `want` to ask for, each
 * reserved at *each; the claim gives back what the server did not send
 * with worker_memory_unclaimed_locked. */
long worker_memory_admit_locked(worker_shared *sh, long want, uint64_t *each);
void worker_memory_unclaimed_locked(worker_shared *sh, long n, uint64_t each);
/* An assignment that holds no reservation (resumed from the store) takes
 * one at the estimate (sh->mu held); worker_memory_release gives it back
 * when the assignment ends (locks sh->mu). */
void worker_memory_hold_locked(worker_shared *sh, actx *x);
/* The assignment now holds `bytes` (its image alone, once the bytes as
 * received are dropped): its reservation shrinks to that, never grows.
 * Locks sh->mu. */
void worker_memory_settle(actx *x, uint64_t bytes);
void worker_memory_release(actx *x);
/* cloud_size_hook for the transcript (ud: the actx): its Content-Length
 * replaces the estimate, or it is refused when it can never fit. */
int worker_memory_sized(void *ud, size_t bytes, char *msg, size_t mcap);
/* The pool's gate (sandbox/jail/sbx.h, sbx_pool_set_gate) over this
 * account: every sandbox of the tree (the worker's runs and conditions,
 * the playground's, backtests') is admitted by class (README "Memory
 * budget"); g->ud is sh, which outlives the pool's evaluations. */
void worker_memory_gate(worker_shared *sh, sbx_gate *g);
/* Other holders of memory (the archive's writer): counted if they fit
 * (1), else 0; never waits. */
int worker_memory_other_take(worker_shared *sh, uint64_t bytes);
void worker_memory_other_put(worker_shared *sh, uint64_t bytes);
/* The tree's memory as the budget counts it (common/procmem.h), bytes, or
 * -1; reads /proc, so never under sh->mu. */
long long worker_memory_sample(void);
/* The status snapshot's "memory" object (sh->mu held), with `tree` from
 * worker_memory_sample. */
json_t *worker_memory_json_locked(worker_shared *sh, long long tree);

/* worker_assign.c: processes one claimed assignment to the end. */
void worker_process(actx *x);
/* worker_assign.c: one managed evaluation of the assignment, in its jail
 * session (under ss_mu), or alone when it has none; sbx_eval's contract
 * (always fills *out). Any of the assignment's threads. */
void worker_managed_eval(actx *x, const sbx_request *req, sbx_outcome *out);
/* worker_assign.c: ends the assignment locally with an error (logged,
 * counted, recorded); e may be NULL. */
void worker_fail_assignment(actx *x, const char *code, const char *msg, const cloud_error *e);

/* worker_conditions.c: the condition phase (SPEC §2 step 4). */
typedef struct {
    json_t *selected, *skipped; /* owned arrays, filled in definition order */
} wselection;
/* Evaluates every definition's condition within the claim-time lease.
 * Returns 0, or -1 if the assignment must end (cancelled or failed). */
int worker_conditions(actx *x, const json_t *defs, struct sbx_image *img, wselection *s);

/* worker_runs.c: runs x->runs in parallel (the assignment's thread plus
 * run-pool helpers) to their results; returns when every run has ended. */
void worker_execute_runs(actx *x, const rcbuf *transcript, struct sbx_image *img);
/* worker_runs.c: the run pool, `nthreads` helper threads. */
typedef struct run_pool run_pool;
run_pool *worker_run_pool_new(long nthreads);
int worker_run_pool_start(run_pool *p);
/* Joins the helpers (each finishes the runs it holds first). */
void worker_run_pool_stop(run_pool *p);
void worker_run_pool_free(run_pool *p);
/* worker_runs.c: the timeout a run gets, in seconds: its descriptor's, else
 * its definition's; managed runs clamped as the jail clamps them (default 30,
 * at most 60); local runs then the registered one, else
 * LOCAL_DEFAULT_TIMEOUT_S. Stored as applied. */
double worker_run_timeout(struct local_registry *local, const wrun *r);
/* worker_hb.c: the heartbeat thread (arg: its worker_hb); an assignment
 * joins its list when its runs start and leaves it when they have ended
 * (hb_remove waits for a heartbeat in progress). */
void *worker_hb_main(void *arg);
void worker_hb_add(worker_hb *hb, actx *x);
void worker_hb_remove(worker_hb *hb, actx *x);

#endif
