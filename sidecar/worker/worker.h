/* sidecar/worker: the Evaluator v2 worker loop (SPEC §2): register, claim,
 * per-assignment processing (transcript, definitions, conditions, plan, runs,
 * heartbeats, results), re-registration, drain. Owned by the worker work;
 * the daemon (sidecar/daemon.c) creates it and the admin API (api/) reads its
 * status. Thread-safe: every function may be called from any thread. */
#ifndef FPS_WORKER_H
#define FPS_WORKER_H
#include "common/rcbuf.h"
#include "common/strbuf.h"

#include <jansson.h>
#include <stddef.h>

typedef struct worker worker;
struct store;          /* store/store.h   */
struct sbx_pool;       /* sandbox/jail/sbx.h   */
struct sbx_image;      /* sandbox/jail/sbx.h   */
struct local_registry; /* sidecar/local/local.h */
struct secret;         /* common/secret.h */
struct store_archive;  /* store/archive.h */

/* What the worker takes of the daemon's configuration (copied at
 * worker_new; its strings are borrowed and outlive the worker). */
typedef struct {
    const char *server_url; /* the Evaluator v2 server's base URL          */
    const char *ca_bundle;  /* NULL = the system's CA store                 */
    const char *worker_id;  /* NULL = <hostname>-<pid>                      */
    long concurrency;       /* assignments in flight, 1..32 (0 = 4)         */
    long max_sandboxes;     /* the sandbox pool's size (0 = 4)              */
    double request_timeout; /* seconds per server request                   */
    double drain_timeout;   /* seconds a drain waits for in-flight work     */
    /* the memory budget of the process tree (README "Memory budget") */
    unsigned long long memory_limit;    /* bytes; 0 = no budget                  */
    unsigned long long memory_base;     /* the tree measured at start            */
    unsigned long long sandbox_reserve; /* bytes a sandbox is admitted against   */
    unsigned long long sandbox_memory;  /* bytes a sandbox may reach (its limit) */
    /* bytes of recent session images kept for the playground: 0 = the
     * default (RECENT_MAX_BYTES), < 0 = none */
    long long recent_max;
} worker_config;

typedef struct {
    worker_config cfg;             /* copied                                   */
    const struct secret *token;    /* borrowed bearer token; never logged      */
    struct store *store;           /* borrowed; may be NULL (memory only)      */
    struct sbx_pool *pool;         /* borrowed; required                       */
    struct local_registry *local;  /* borrowed; may be NULL (no local evals)   */
    struct store_archive *archive; /* borrowed; may be NULL (archive off); each
                                      received transcript is queued to it      */
    const char *worker_id;         /* borrowed; NULL = cfg.worker_id or
                                      <hostname>-<pid>                         */
} worker_deps;

/* Creates a stopped worker. NULL with a message in err on bad configuration. */
enum { WORKER_ESTART = -1 }; /* fps_err name "cannot_start" (or cloud_new's) */
worker *worker_new(const worker_deps *deps, fps_err *err);
/* Starts the worker's threads (registration, claiming, heartbeats, the
 * assignment pool, the outbox). Returns 0 or -1 with a message. */
int worker_start(worker *w, fps_err *err);
/* Begins draining: no new claims; heartbeats, in-flight runs and result
 * submissions go on. Idempotent, async-signal-unsafe (call from a thread). */
void worker_drain(worker *w);
/* The admin API's drain: no new claims until worker_resume (a later
 * worker_drain, the shutdown's, makes it final). */
void worker_pause(worker *w);
/* Ends a worker_pause drain: claims again. Returns 0, or -1 when the drain
 * is the shutdown's (or the worker is stopping). */
int worker_resume(worker *w);
/* Waits until every in-flight assignment is finished and the outbox is empty,
 * or `timeout_s` passes. Returns 1 if fully drained, 0 on timeout. */
int worker_wait_drained(worker *w, double timeout_s);
/* Stops at once: cancels runs (killing their sandboxes), aborts in-flight
 * requests, joins every thread. Whatever was cut off is covered by the
 * store. Safe after worker_drain or without it. */
void worker_stop(worker *w);
/* Stops (if needed) and frees. NULL is a no-op. */
void worker_free(worker *w);

/* A snapshot for GET /v1/status (new reference; caller decrefs):
 * {worker_id, server, version, uptime_seconds, state ("starting" |
 * "registered" | "unregistered" | "draining" | "stopped"), registered,
 * evaluator_instance_id, catalog_revision, timing {heartbeat_interval_seconds,
 * lease_duration_seconds, poll_interval_seconds, claim_limit, concurrency,
 * request_timeout_seconds, drain_timeout_seconds}, disabled_definitions [],
 * active_assignments, active_runs, active_sandboxes, outbox_depth,
 * last_server_contact_at (RFC 3339 or null), last_error {code, message, at}
 * or null, counters {...}, jail {seccomp, no_new_privs, rlimits, user_ns,
 * net_ns}}. */
json_t *worker_status_json(worker *w);

/* 1 if ready (registered, server contacted within the lease duration, not
 * draining, the store takes writes); else 0 with every current reason
 * appended to `reason` (borrowed), "; " between them, none cut short. */
int worker_ready(worker *w, strbuf *reason);

/* The local catalog changed (a local evaluator registered, changed, expired
 * or was deleted): the worker re-registers before its next claim. Cheap and
 * non-blocking; callable from any thread, including a callback. */
void worker_catalog_changed(worker *w);

/* The session image of a recently processed assignment (the last 16
 * fetched, at most 32 MiB of image in all), for the admin playground: a
 * new reference (sbx_image_release), or NULL if unknown or already
 * evicted. */
struct sbx_image *worker_recent_image(worker *w, const char *assignment_id);

/* With a memory budget, puts every sandbox of the worker's pool (its own,
 * the admin playground's, backtests') under it: sets the pool's gate
 * (README "Memory budget"); without one, does nothing. Call before anything
 * evaluates, and worker_ungate_pool once nothing but the worker does
 * (before worker_free). */
void worker_gate_pool(worker *w);
void worker_ungate_pool(worker *w);
/* Memory other parts of the tree hold for a while (the archive's writer):
 * 1 and counted if `bytes` fit the budget now (never waits), else 0; give
 * it back with worker_memory_unhold. Thread-safe. */
int worker_memory_hold(worker *w, unsigned long long bytes);
void worker_memory_unhold(worker *w, unsigned long long bytes);

#endif
