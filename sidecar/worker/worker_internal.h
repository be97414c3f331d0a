/* sidecar/worker_internal: state shared by the worker's modules (worker.c:
 * lifecycle, registration and the claim loop; worker_assign.c: one
 * assignment from transcript to results; worker_conditions.c: its condition
 * phase; worker_plan.c: plan matching; worker_runs.c: its runs and their
 * results; worker_hb.c: the heartbeat thread; sidecar/worker/outbox.c owns
 * result submission). Private to sidecar/. */
#ifndef FPS_WORKER_INTERNAL_H
#define FPS_WORKER_INTERNAL_H
#include "common/metrics.h"
#include "sidecar/cloud/cloud.h"
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

/* One assignment being processed (owned by its pool thread). */
typedef struct actx {
    struct worker *w;
    cloud_assignment a;
    double claimed_at; /* wall clock */
    wrun *runs;
    size_t nruns;
    atomic_int lost;   /* lease_lost seen */
    json_t *skip_runs; /* resumed: run ids that already have a result */
    int resumed;
    atomic_int cancel_conditions; /* stop: kills condition sandboxes */
    /* heartbeat bookkeeping (under w->mu) */
    int hb_registered, hb_busy;
    int64_t next_hb_ms;
    struct actx *hb_next;
    struct actx *q_next;   /* claim queue */
    struct actx *act_next; /* active list (status, stop) */
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
    struct actx *help_next;  /* help queue link */
    const rcbuf *transcript; /* borrowed while its runs execute: the bytes as received */
    struct sbx_image *img;   /* borrowed while its runs execute */
    /* step timings (microseconds; logged at debug level per assignment) */
    atomic_llong tm_eval_us, tm_store_us, tm_submit_us;
} actx;

/* One store operation's failures with one status, for the rate-limited log
 * (worker_store.c). */
typedef struct {
    const char *op; /* borrowed string literal; NULL: a free slot */
    int code;       /* store status */
    int64_t logged_ms;
    long long unlogged; /* failures since the last line that were not logged */
} ws_fail_log;
#define WS_FAIL_LOG_SLOTS 8

struct worker {
    worker_config cfg;
    cloud *cloud;
    struct store *store;
    struct outbox *outbox; /* owned: result submission */
    struct sbx_pool *pool;
    struct local_registry *local;
    char worker_id[129];
    long concurrency;

    pthread_mutex_t mu;
    pthread_cond_t cv;      /* claim loop: capacity, stop, drain, catalog */
    pthread_cond_t q_cv;    /* pool threads: queue */
    pthread_cond_t hb_cv;   /* heartbeat thread */
    pthread_cond_t idle_cv; /* drain waiters */

    /* registration (under mu) */
    int registered;
    char instance_id[256];
    char evaluator_kind[16];
    char catalog_revision[80];
    json_t *catalog;  /* normalized, as sent */
    json_t *disabled; /* array of eval keys */
    long long hb_interval_s, lease_duration_s, poll_interval_s, claim_limit;
    atomic_int catalog_dirty;
    char not_ready[1024]; /* reason while not ready ("" otherwise) */

    /* lifecycle */
    int started, draining, stopping;
    int resumable; /* the drain came from worker_pause (the admin API) */
    pthread_t main_th, hb_th;
    pthread_t *pool_th;
    long npool;
    struct run_pool *run_pool; /* owned: helpers that run runs in parallel */
    /* group commit of results (worker_store.c) */
    struct ws_group *commits; /* owned: the group commit of results */

    /* work (under mu) */
    actx *q_head, *q_tail; /* claimed, not yet picked up */
    actx *active;          /* being processed */
    int nactive;           /* queued + processing */
    actx *hb_list;
    int active_runs;

    struct recent_ring *recent; /* owned: transcripts for the admin playground */
    struct store_archive *archive; /* borrowed, may be NULL: the transcript archive */
    /* idle trim (under mu): the last claim was empty; caches given back and
     * server connections closed since; when the current idle stretch began
     * (monotonic ms, 0 = not idle) */
    int claim_empty, trimmed, closed;
    int64_t idle_since_ms;
    /* store failing: no new claims until results can be made durable */
    int store_failing;
    pthread_mutex_t store_log_mu; /* guards store_log */
    ws_fail_log store_log[WS_FAIL_LOG_SLOTS];

    /* status */
    atomic_llong counters[WC__COUNT];
    char last_error_code[64];
    char last_error[512];
    double last_error_at;
    double started_at;
    int64_t started_mono;
};

extern const char *const worker_counter_names[WC__COUNT];

static inline void wcount(struct worker *w, int c, long long n)
{
    atomic_fetch_add(&w->counters[c], n);
}
/* Publishes the gauges (active assignments and runs). Call with w->mu
 * held, after changing them. */
static inline void worker_gauges_locked(struct worker *w)
{
    metrics_gauge_set(METRIC_ACTIVE_ASSIGNMENTS, w->nactive);
    metrics_gauge_set(METRIC_ACTIVE_RUNS, w->active_runs);
}
/* Appends a claimed or resumed assignment to the queue the assignment
 * threads take from, counting it active (w->mu held). */
static inline void worker_enqueue_locked(struct worker *w, actx *x)
{
    if (w->q_tail)
        w->q_tail->q_next = x;
    else
        w->q_head = x;
    w->q_tail = x;
    w->nactive++;
}
/* Records the last error (status page) and logs it. */
void worker_note_error(struct worker *w, const char *code, const char *msg);

/* worker_store.c: the durable state (store/store.h); every function is a
 * no-op without a store. Failures are logged; ws_run_finished's decides
 * whether the result may be submitted (0) or not (-1). */
void ws_registered(struct worker *w, const char *rev, const json_t *catalog);
void ws_claimed(struct worker *w, actx **xs, size_t n);
void ws_planned(struct worker *w, actx *x, const json_t *defs, const json_t *selected,
                const json_t *skipped, const json_t *plan_response, int skipped_status);
void ws_runs_started(struct worker *w, actx *x);
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
/* The group commit's queue and lock (one per worker). */
typedef struct ws_group ws_group;
ws_group *ws_group_new(void);
void ws_group_free(ws_group *g);
int ws_runs_finished(struct worker *w, actx *x, const ws_result *r, size_t n);
void ws_finish(struct worker *w, actx *x, const char *status, const char *code, const char *msg);
void ws_lease(struct worker *w, actx *x);
/* Records one heartbeat (sent at `at`; outcome "ok", "lease_lost" or "failed"
 * with its code) in the assignment's bounded history. */
void ws_heartbeat(struct worker *w, actx *x, double at, const char *outcome, const char *code);
/* Idle: gives back the store's page caches. */
void ws_release_memory(struct worker *w);
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

/* worker_assign.c: processes one claimed assignment to the end. */
void worker_process(struct worker *w, actx *x);
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
double worker_run_timeout(struct worker *w, const wrun *r);
/* worker_hb.c */
void *worker_hb_main(void *arg);
void worker_hb_add(struct worker *w, actx *x);
void worker_hb_remove(struct worker *w, actx *x);

#endif
