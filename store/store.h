/* store/: SQLite persistence of the worker registration, assignments (leases),
 * runs, the result outbox, local evaluator registrations and metric counters,
 * plus the read queries of the admin API and retention pruning (SPEC §3).
 *
 * ---------------------------------------------------------------------------
 * Model
 * ---------------------------------------------------------------------------
 * assignment  one claimed session under a lease (assignment_id, worker_id,
 *             lease_generation, lease_expires_at). Status:
 *               "claimed"   claim persisted, no plan yet
 *               "planned"   plan persisted, runs exist
 *               -- terminal --
 *               "completed" every run finished and every result submission
 *                           ended (committed/replayed/rejected); set by the store
 *               "skipped"   the plan answered assignment_status "skipped"
 *               "failed"    ended locally by an error (protocol error,
 *                           transcript_too_large, checksum mismatch, ...)
 *               "lost"      409 lease_lost (or any fencing loss)
 *               "dropped"   found expired at recovery; the server reclaims it
 * run         one planned evaluation (evaluation_run_id from the plan). Status:
 *               "planned", "running", then one of the result statuses
 *               "succeeded", "failed", "timed_out", "cancelled" (a result
 *               exists), or "abandoned" (never finished locally: its
 *               assignment ended; nothing was submitted for it).
 *             submit_status: "none" (no result yet), "pending" (in the outbox),
 *               "committed", "replayed" (idempotent_replay: true), "rejected"
 *               (a non-retryable answer, recorded in submit_error_*).
 * outbox      at most one pending entry per run: the exact serialized result
 *             body + its submission_id, written once, resent unchanged.
 *
 * ---------------------------------------------------------------------------
 * Durability (the promise; every caller relies on exactly this)
 * ---------------------------------------------------------------------------
 * 1. A result: store_run_finished() / store_runs_finished() commit the run's
 *    result and its outbox entry (the body bytes the caller will send) in one
 *    transaction and return only when that transaction is on disk (fdatasync
 *    of the WAL, shared by the threads finishing at the same moment: group
 *    commit); the _async forms return a ticket and store_durable_wait() is
 *    that point. Only then may the caller send the body for the first time.
 *    If it fails, the result is NOT stored: do not submit it (keep it and
 *    retry, or stop; never drop it silently). durability_process_only = 1
 *    skips the fdatasync: the result then survives a crash of this process,
 *    not a power cut.
 * 2. Every retry, including after a restart, sends store_outbox_entry.body
 *    unchanged (same submission_id, same bytes, same lease_generation).
 * 3. An entry leaves the outbox only through store_outbox_record() with
 *    STORE_SUBMIT_COMMITTED, STORE_SUBMIT_REPLAYED or STORE_SUBMIT_REJECTED.
 * 4. Every other write (registration, local evaluators, metrics, pruning)
 *    is committed before the call returns, without fdatasync: it survives a
 *    crash of this process (kill -9), not a power cut.
 * 5. The updates marked "Deferred" below (claims, plans, lease extensions,
 *    run starts, local assignment ends, submit outcomes):
 *    - with sync_updates = 1, as in 4;
 *    - by default, the call returns once the update is queued; it is
 *      committed (as in 4) within defer_ms, before any other write
 *      transaction (a result's transaction includes every update queued
 *      before it), before the worker-facing reads, and at store_close. A
 *      crash before that loses only queued updates, which only repeats
 *      idempotent protocol steps (see "Deferred updates").
 * When writes fail for want of space or permission (STORE_FULL,
 * STORE_READONLY), nothing committed is lost: store_write_blocked() says so
 * until writes work again (the store probes once a second).
 *
 * ---------------------------------------------------------------------------
 * Threads
 * ---------------------------------------------------------------------------
 * Every function is thread-safe. Writes go through one writer connection
 * behind a mutex (SQLite allows one writer at a time anyway; serializing in
 * process avoids SQLITE_BUSY retries and keeps each protocol step one short
 * transaction). Reads (admin queries, lists) use a small pool of read-only
 * connections: in WAL mode readers never block the writer nor wait for it, so
 * the admin API cannot slow the worker down. With ":memory:" there is a single
 * connection shared by readers and the writer (serialized).
 *
 * ---------------------------------------------------------------------------
 * Memory and errors
 * ---------------------------------------------------------------------------
 * Strings passed in are borrowed (copied if kept). Returned structs/arrays are
 * owned by the caller and released with the matching *_free function. JSON
 * outputs are appended to a caller-owned strbuf.
 * Every function returns a store_status; on a negative status the optional
 * `err` (may be NULL) receives the status and a one-line message naming the
 * operation and the SQLite reason. Times are epoch seconds (double, wall
 * clock, as time_now()); JSON outputs render them as RFC 3339 strings (null
 * when unset).
 */
#ifndef FPS_STORE_H
#define FPS_STORE_H
#include "common/err.h"
#include "common/strbuf.h"
#include <stddef.h>
#include <stdint.h>

typedef struct store store;

typedef enum {
    STORE_OK = 0,
    STORE_NOTFOUND = 1,  /* no such row (not an error of the store itself) */
    STORE_ERROR = -1,    /* any other SQLite or I/O error */
    STORE_BUSY = -2,     /* database locked by someone else past the busy timeout */
    STORE_CORRUPT = -3,  /* not a database, or integrity check failed */
    STORE_FULL = -4,     /* disk or quota full */
    STORE_READONLY = -5, /* file, directory or filesystem not writable */
    STORE_INVALID = -6,  /* bad argument (unknown status filter, bad cursor, limit) */
    STORE_CONFLICT = -7, /* state forbids it (e.g. a result already pending) */
    STORE_STALE = -8,    /* lease_generation older than the stored one (fenced) */
    STORE_SCHEMA = -9,   /* schema newer than this binary, or a failed migration */
} store_status;

/* The store's errors are common/err.h's: code is a store_status, name its
 * store_status_name, msg "store: <operation>: <reason>". */
typedef fps_err store_err;

/* Short name of a status ("ok", "busy", "corrupt", ...). Static storage. */
const char *store_status_name(int status);

/* ---------------------------------------------------------------- open/close */

typedef struct {
    const char *path;       /* file path, or ":memory:" (no durability; tests, benchmarks) */
    int busy_timeout_ms;    /* wait for locks held by other processes; default 5000 (0 = default) */
    int read_connections;   /* read pool size; default 4 (0 = default) */
    double retention_hours; /* finished history older than this is pruned; <= 0: no age limit */
    long retention_runs;    /* keep at most this many finished runs; <= 0: no count limit */
    int maintenance_interval_s;   /* > 0: a store thread runs store_prune (then the incremental
                                     vacuum) this often; 0: the owner calls store_prune itself */
    int skip_integrity_check;     /* 1: skip PRAGMA quick_check at open (default: run it) */
    int durability_process_only;  /* 1: skip the fdatasync of store_run_finished (survives
                                     process crashes, not power loss). Default 0. */
    int sync_updates;             /* 1: apply every update in its own transaction before the call
                                     returns. Default 0: the updates marked "deferred" below are
                                     batched (see store_flush). */
    int defer_ms;                 /* batching delay of deferred updates; default 25 (0 = default) */
    int schema_target;            /* tests only: migrate up to this version (0 = latest); the
                                     operations need the latest schema */
    int64_t wal_high_water_bytes; /* past it, checkpoints TRUNCATE the WAL, waiting for readers
                                     up to ckpt_wait_ms; default 32 MiB (0 = default) */
    int64_t wal_max_bytes;        /* writers wait (up to ckpt_wait_ms) before letting the WAL
                                     grow past it; default 2 x wal_high_water_bytes */
    int ckpt_wait_ms;             /* bounded wait of those two; default 2000 (0 = default) */
    int64_t backtests_max_bytes;  /* compressed rows of the saved backtests; default
                                     STORE_BACKTESTS_MAX_BYTES (0 = default) */
} store_options;

/* Latest schema version this binary writes (PRAGMA user_version). */
int store_schema_latest(void);

/* Opens (creating if needed) the database, takes an exclusive advisory lock on
 * it (a second sidecar on the same file is refused: STORE_BUSY), switches it to
 * WAL, applies the forward migrations in one transaction, runs a quick
 * integrity check and a write probe. Refuses to start (returns an error, *out
 * stays NULL) when the file is locked, corrupt, read-only, on a full disk, or
 * has a schema newer than store_schema_latest(). On success *out is an owned
 * handle for store_close. Not thread-safe with respect to the same handle
 * (call once, before sharing it). */
int store_open(const store_options *opt, store **out, store_err *err);

/* Stops the maintenance thread, checkpoints the WAL, closes every connection
 * and releases the lock. NULL is accepted. No call may be in progress or made
 * afterwards. */
void store_close(store *st);

/* Path the store was opened with (borrowed; valid until store_close). */
const char *store_path(const store *st);
/* Schema version of the open database. */
int store_schema_version(store *st);

/* Deferred updates. Every update except a run's result only ever repeats an
 * idempotent protocol step when it is lost, so by default they are queued and
 * committed in batches (one transaction for many; persistence must not cost
 * the worker its throughput): store_assignments_claimed,
 * store_assignment_planned, store_runs_started (without n_started),
 * store_assignment_lease, store_assignment_heartbeat, store_assignment_finish and
 * store_outbox_record.
 * They are applied in call order, at the latest defer_ms later, before any
 * other write (so store_run_finished always finds its run: the queued plan
 * goes into the same transaction), before store_outbox_pending /
 * store_outbox_depth / store_recoverable_assignments / store_assignment_load,
 * and at store_close; if that transaction fails they are queued again. A
 * crash in between loses only them: an unknown claim expires and the server
 * reclaims it; a lost plan is replayed by the server (same runs); a run is
 * still "planned" (it runs again); a stored lease is shorter (the assignment
 * may be dropped and reclaimed); an outbox entry is still pending (resent
 * unchanged: idempotent_replay). Results (store_run_finished) are never
 * deferred. When deferred, those calls return STORE_OK after validating their
 * arguments; their STORE_NOTFOUND / STORE_STALE / STORE_CONFLICT outcomes are
 * logged, not returned. The admin JSON queries do not wait for the queue
 * (they may lag by defer_ms). With sync_updates = 1 every call is its own
 * transaction and returns its outcome. */

/* ------------------------------------------------------------ size and health */

/* The store's size and health. The WAL is checkpointed by a store thread:
 * PASSIVE in the background, TRUNCATE above wal_high_water_bytes; a TRUNCATE
 * that cannot complete within ckpt_wait_ms counts as blocked and is logged
 * with what blocked it. */
typedef struct {
    int64_t db_bytes;             /* main database file */
    int64_t wal_bytes;            /* -wal file */
    double checkpoint_ms;         /* duration of the last checkpoint */
    uint64_t checkpoints;         /* completed since open */
    uint64_t checkpoints_blocked; /* high-water checkpoints that could not complete */
    uint64_t rows_pruned;         /* rows deleted by retention since open */
    int64_t outbox_depth;         /* results not yet answered by the server */
    double oldest_unsent_age_s;   /* age of the oldest of them; 0 when none */
    int write_blocked;            /* 0, STORE_FULL or STORE_READONLY (see store_write_blocked) */
    int vacuum_pending;           /* 1: the one-time full VACUUM waits for free space */
} store_stats;

/* Fills *out (`now`: epoch seconds, for the age). */
int store_stats_get(store *st, double now, store_stats *out, store_err *err);

/* 0 while writes work; STORE_FULL or STORE_READONLY since a write failed for
 * want of space or permission, until the store's probe (once a second: a
 * small durable write, and for a full disk 4 MiB free) succeeds. Cheap: an
 * atomic read. */
int store_write_blocked(store *st);

/* Applies the queued deferred updates now. */
int store_flush(store *st, store_err *err);

/* Gives back the page caches of the writer and of the idle read connections
 * (sqlite3_db_release_memory): for an idle process, so its resident memory
 * stays small. Connections in use are skipped. Cheap when nothing is cached. */
void store_release_memory(store *st);

/* -------------------------------------------------------- worker registration */

typedef struct {
    char *worker_id;        /* owned */
    char *server_origin;    /* owned, may be NULL */
    char *catalog_revision; /* owned, may be NULL */
    char *catalog_json;     /* owned, may be NULL: the definitions array sent */
    char *response_json;    /* owned, may be NULL: the register response */
    double registered_at;   /* 0 if never registered */
} store_worker;

/* Saves the current registration (a single row, replaced). The worker calls it
 * after each successful register. */
int store_worker_save(store *st, const char *worker_id, const char *server_origin,
                      const char *catalog_revision, const char *catalog_json,
                      const char *response_json, double registered_at, store_err *err);
/* Loads the last saved registration into *out (owned; store_worker_free).
 * STORE_NOTFOUND if none. A worker started without --worker-id should reuse
 * the stored worker_id: leases held in the database are fenced by it. */
int store_worker_load(store *st, store_worker *out, store_err *err);
void store_worker_free(store_worker *w);

/* ------------------------------------------------------------------ assignments */

typedef struct {
    const char *assignment_id; /* required */
    const char *worker_id;     /* required: the worker id that claimed it */
    int64_t lease_generation;  /* > 0 */
    double lease_expires_at;   /* epoch */
    const char *session_id;    /* the claim fields, any may be NULL */
    const char *session_revision_id;
    const char *agent_id;
    const char *environment;
    const char *trigger_reason;
    int64_t event_count;
    const char *transcript_url;
    const char *definitions_url;
    const char *claim_json; /* the assignment object as received (may be NULL) */
} store_claim;

/* Deferred (unless sync_updates). Persists claimed assignments, all in ONE transaction (call once
 * per claim response). An assignment already in the store (reclaimed after expiry) is updated to
 * the new generation and expiry and back to "claimed"; its runs are kept (see
 * store_assignment_planned). A claim whose generation is lower than the stored one fails the whole
 * call with STORE_STALE. */
int store_assignments_claimed(store *st, const store_claim *claims, size_t n, double now,
                              store_err *err);

typedef struct {
    const char *run_id;          /* evaluation_run_id, required */
    const char *eval_key;        /* required */
    const char *eval_version;    /* required */
    const char *execution_mode;  /* "python" | "local", required */
    double timeout_seconds;      /* effective timeout (0 if unknown) */
    const char *descriptor_json; /* the plan's run descriptor (may be NULL) */
} store_plan_run;

/* Deferred (unless sync_updates). Persists the plan of an assignment in ONE transaction: the
 * definitions response, the plan request and response (raw JSON, any may be NULL), and its runs.
 * skipped != 0 (assignment_status "skipped") makes the assignment terminal "skipped". Runs not yet
 * stored are inserted as "planned"; runs already stored (idempotent re-plan, or a reclaim under a
 * newer generation) keep their state, except that "abandoned" runs and runs whose submission was
 * "rejected" go back to "planned" (they must run again under this lease). Fenced: STORE_STALE if
 * the stored generation differs from lease_generation; STORE_NOTFOUND if the assignment was never
 * claimed. */
int store_assignment_planned(store *st, const char *assignment_id, int64_t lease_generation,
                             const char *definitions_json, const char *plan_request_json,
                             const char *plan_response_json, int skipped,
                             const store_plan_run *runs, size_t n, double now, store_err *err);

/* Deferred (unless sync_updates). Records a lease extension (heartbeat
 * response). Ignored (STORE_OK) if the
 * assignment is terminal; STORE_STALE if the generation differs;
 * STORE_NOTFOUND if unknown. */
int store_assignment_lease(store *st, const char *assignment_id, int64_t lease_generation,
                           double lease_expires_at, store_err *err);

/* The last heartbeats kept per assignment (older ones only count). */
#define STORE_HEARTBEATS_KEPT 20

/* Deferred (unless sync_updates). Records one heartbeat of the assignment in
 * its bounded history: sent at `at`, its outcome ("ok", "lease_lost" or
 * "failed"), error_code (may be NULL) and, when the server extended the
 * lease, lease_expires_at (0: none). The admin detail serves the count, the
 * first and last time and the last STORE_HEARTBEATS_KEPT. STORE_NOTFOUND if
 * the assignment is unknown. */
int store_assignment_heartbeat(store *st, const char *assignment_id, int64_t lease_generation,
                               double at, const char *outcome, const char *error_code,
                               double lease_expires_at, store_err *err);

/* Deferred (unless sync_updates). Ends an assignment locally with a terminal status: "failed",
 * "lost", "dropped", "skipped" or "completed" (STORE_INVALID otherwise), with an optional error
 * code/message (bounded to 64/4096 bytes). Its runs that have no result ("planned"/"running")
 * become "abandoned". Pending outbox entries are KEPT: they still go out (the server decides).
 * STORE_NOTFOUND if unknown; a no-op if already terminal. Fencing: lease_generation 0 = any,
 * otherwise STORE_STALE if it differs. */
int store_assignment_finish(store *st, const char *assignment_id, int64_t lease_generation,
                            const char *status, const char *error_code, const char *error_message,
                            double now, store_err *err);

/* --------------------------------------------------------------------- runs */

/* Deferred (unless n_started != NULL or sync_updates).
 * Marks runs "running" with started_at = now, in ONE transaction (batch the
 * runs started together). Only runs that may (re)start change: "planned",
 * "running" (resumed after a crash) and "abandoned"; runs with a result are
 * left alone. *n_started (may be NULL) receives how many changed. Unknown ids
 * are ignored. */
int store_runs_started(store *st, const char *const *run_ids, size_t n, double now,
                       size_t *n_started, store_err *err);

typedef struct {
    const char *run_id; /* required; must exist (planned) */
    const char *status; /* "succeeded" | "failed" | "timed_out" | "cancelled" */
    double started_at;
    double finished_at;
    int64_t duration_ms;
    const char *summary;       /* may be NULL */
    const char *results_json;  /* the results array as sent (may be NULL) */
    const char *error_code;    /* may be NULL */
    const char *error_message; /* may be NULL */
    /* The submission, exactly as it will be sent, every time: */
    const char *submission_id; /* required, unique */
    const char *worker_id;     /* required */
    int64_t lease_generation;  /* required, the generation inside body */
    const char *body;          /* required: the serialized request body */
    size_t body_len;
} store_run_result;

/* Stores a run's result and its outbox entry in ONE transaction and makes it
 * durable (see "Durability") before returning. Only after STORE_OK may
 * the body be submitted. STORE_NOTFOUND: unknown run. STORE_CONFLICT: the run
 * already has a pending or accepted submission (a result exists; do not
 * submit a second one). Any other negative status: the result is not known to
 * be durable, so do not submit it now; keep it and retry, or stop claiming and
 * report the store failure (readiness). Only when the failure is the final disk
 * flush (the message says "fdatasync") was the row committed: it then stays in
 * the outbox and goes out with the next store_outbox_pending drain. */
int store_run_finished(store *st, const store_run_result *r, store_err *err);

/* Same, for several results in ONE transaction and one fsync. All or nothing:
 * on error none is stored (the message names the failing run). */
int store_runs_finished(store *st, const store_run_result *r, size_t n, store_err *err);

/* The same commit without waiting for the disk, for a worker that wants the
 * run's thread back at once: *ticket (set on STORE_OK) must be passed to
 * store_durable_wait, and the body may be submitted for the first time ONLY
 * after store_durable_wait(ticket) returned STORE_OK. The commit itself
 * already survives a crash of the process. */
int store_run_finished_async(store *st, const store_run_result *r, uint64_t *ticket,
                             store_err *err);
/* Same for several results in ONE transaction (all or nothing, as
 * store_runs_finished), without waiting for the disk. */
int store_runs_finished_async(store *st, const store_run_result *r, size_t n, uint64_t *ticket,
                              store_err *err);
/* Blocks until every commit up to `ticket` is on disk. Callers share flushes
 * (group commit): one fdatasync covers every commit made before it started,
 * so N results waiting together cost one disk flush. STORE_OK immediately
 * for ":memory:" and with durability_process_only. */
int store_durable_wait(store *st, uint64_t ticket, store_err *err);

/* ------------------------------------------------------------------- outbox */

typedef struct {
    int64_t seq;         /* insertion order */
    char *submission_id; /* owned */
    char *run_id;        /* owned */
    char *assignment_id; /* owned */
    char *worker_id;     /* owned */
    int64_t lease_generation;
    char *body; /* owned, NUL-terminated for convenience; exact bytes */
    size_t body_len;
    int attempts; /* attempts recorded so far */
    double created_at;
    double last_attempt_at; /* 0 if never attempted */
    char *last_error;       /* owned, may be NULL: "<code>: <message>" of the last retry */
} store_outbox_entry;

/* Lists pending outbox entries oldest first (seq > after_seq, at most `limit`
 * entries, limit <= 0 means all). *out is an owned array of *n entries
 * (NULL when *n == 0), released with store_outbox_free. */
int store_outbox_pending(store *st, int64_t after_seq, int limit, store_outbox_entry **out,
                         size_t *n, store_err *err);
void store_outbox_free(store_outbox_entry *e, size_t n);
/* Number of pending entries. */
int store_outbox_depth(store *st, int64_t *depth, store_err *err);

typedef enum {
    STORE_SUBMIT_COMMITTED = 1, /* status committed, idempotent_replay false: leaves the outbox */
    STORE_SUBMIT_REPLAYED,      /* idempotent_replay true: leaves the outbox */
    STORE_SUBMIT_RETRY,         /* retryable error or transport failure: stays, attempts + 1 */
    STORE_SUBMIT_REJECTED,      /* non-retryable answer (lease_lost, run_not_found,
                                   submission_conflict, ...): leaves the outbox; the
                                   answer is recorded with the run */
} store_submit_outcome;

typedef struct {
    store_submit_outcome outcome;
    double at; /* when the attempt started */
    int64_t duration_ms;
    int http_status;        /* 0 for transport failures */
    const char *error_code; /* may be NULL */
    const char *message;    /* may be NULL (bounded to 4096 bytes) */
    const char *request_id; /* X-Request-Id used, may be NULL */
} store_attempt;

/* Deferred (unless sync_updates). Records one submission attempt of the
 * outbox entry `submission_id` in ONE transaction (kept in the run's attempt history) and applies
 * its outcome (see store_submit_outcome). When the last pending submission of a "planned"
 * assignment whose runs all have results ends, the assignment becomes
 * "completed". STORE_NOTFOUND if no pending entry has this submission_id
 * (already done: the caller may ignore it). */
int store_outbox_record(store *st, const char *submission_id, const store_attempt *a,
                        store_err *err);

/* ----------------------------------------------------------------- recovery */

typedef struct {
    char *run_id, *eval_key, *eval_version, *execution_mode; /* owned */
    char *descriptor_json;                                   /* owned, may be NULL */
    double timeout_seconds;
    char *status;        /* owned: run status */
    char *submit_status; /* owned: "none" | "pending" | "committed" | ... */
} store_run_state;

typedef struct {
    char *assignment_id, *worker_id; /* owned */
    int64_t lease_generation;
    double lease_expires_at;
    char *status;                                  /* owned: "claimed" | "planned" */
    char *session_id, *session_revision_id;        /* owned, may be NULL */
    char *agent_id, *environment, *trigger_reason; /* owned, may be NULL */
    int64_t event_count;
    char *transcript_url, *definitions_url;       /* owned, may be NULL */
    char *claim_json, *definitions_json;          /* owned, may be NULL */
    char *plan_request_json, *plan_response_json; /* owned, may be NULL */
    double claimed_at;
    store_run_state *runs; /* owned array, all runs of the plan */
    size_t n_runs;
} store_assignment_state;

/* Non-terminal assignments whose lease is still valid (lease_expires_at >
 * now + margin_s), oldest claim first, each with all its runs. The worker
 * resumes them: re-fetch the transcript, heartbeat, re-plan (idempotent), run
 * again the runs with status planned/running/abandoned, leave the others.
 * *out owned, release with store_assignments_free. */
int store_recoverable_assignments(store *st, double now, double margin_s,
                                  store_assignment_state **out, size_t *n, store_err *err);
/* One assignment by id (any status), with its runs. STORE_NOTFOUND if unknown. */
int store_assignment_load(store *st, const char *assignment_id, store_assignment_state *out,
                          store_err *err);
void store_assignment_state_free(store_assignment_state *a);
void store_assignments_free(store_assignment_state *a, size_t n);

/* Marks every non-terminal assignment with lease_expires_at <= now + margin_s
 * "dropped" (the server reclaims it); their runs without a result become
 * "abandoned". Outbox entries are kept. *n_dropped may be NULL. */
int store_drop_expired(store *st, double now, double margin_s, size_t *n_dropped, store_err *err);

/* ------------------------------------------------------- local evaluators */

typedef struct {
    char *name;              /* owned */
    char *registration_json; /* owned: the validated registration body */
    double ttl_seconds;      /* <= 0: no TTL */
    double registered_at;
    double heartbeat_at;
    double expires_at; /* 0: never */
} store_evaluator;

/* Inserts or replaces a registration (expires_at = now + ttl when ttl > 0). */
int store_evaluator_put(store *st, const char *name, const char *registration_json,
                        double ttl_seconds, double now, store_err *err);
/* Renews the TTL: heartbeat_at = now, expires_at = now + ttl. STORE_NOTFOUND
 * if unknown. */
int store_evaluator_heartbeat(store *st, const char *name, double now, store_err *err);
/* STORE_NOTFOUND if unknown. */
int store_evaluator_delete(store *st, const char *name, store_err *err);
/* All registrations, by name, expired ones included (the registry decides
 * with expires_at, so a TTL keeps running across restarts). Owned array;
 * release with store_evaluators_free. */
int store_evaluator_list(store *st, store_evaluator **out, size_t *n, store_err *err);
void store_evaluators_free(store_evaluator *e, size_t n);

/* ------------------------------------------------------------ metrics */

typedef struct {
    char *name;   /* owned: e.g. "failproofai_sidecar_runs_total" */
    char *labels; /* owned: canonical label text, e.g. `status="succeeded"`, "" if none */
    double value;
} store_metric;

/* Adds delta to a counter (created at 0), in its own transaction. */
int store_metric_add(store *st, const char *name, const char *labels, double delta, store_err *err);
/* Sets absolute values of several counters in ONE transaction (what
 * store_metrics_persist writes). names/labels borrowed from the array. */
int store_metrics_save(store *st, const store_metric *m, size_t n, store_err *err);
/* All counters; owned array, release with store_metrics_free. */
int store_metrics_load(store *st, store_metric **out, size_t *n, store_err *err);
void store_metrics_free(store_metric *m, size_t n);
/* The process's counters (common/metrics) against the table: restore seeds
 * the registry with every saved counter it takes (*seeded, if given: how
 * many); persist saves every counter series the registry holds, in one
 * transaction (the daemon calls it periodically and once at exit, after
 * the last counter moved). */
int store_metrics_restore(store *st, size_t *seeded, store_err *err);
int store_metrics_persist(store *st, store_err *err);

/* ----------------------------------------------- admin queries (JSON out) */

/* A number that moves whenever a write transaction has been committed to the
 * database since it was last read: by this process (the in-process commit
 * counter, bumped before the writing call returns) or by another process or
 * connection on the same file (SQLite's PRAGMA data_version on a dedicated
 * read-only probe connection). Monotonic; equal
 * values read at two moments prove that no commit finished between them, so a
 * page rendered by a query started after reading version v is current for as
 * long as the version still reads v (the admin API's response cache). Costs a
 * mutex and one short read transaction on the probe. */
int store_change_version(store *st, uint64_t *out, store_err *err);

typedef struct {
    const char *status;        /* NULL or a run status ("planned", "running", "succeeded",
                                  "failed", "timed_out", "cancelled", "abandoned") */
    const char *eval_key;      /* NULL or exact eval_key */
    const char *assignment_id; /* NULL or exact assignment id */
    int limit;                 /* 1..500; 0 means 50 */
    const char *cursor;        /* NULL/"" for the first page, else a next_cursor */
} store_run_filter;

/* Appends to `out`:
 *   {"runs":[ITEM...],"next_cursor":"<opaque>"|null}
 * newest first (keyset pagination: stable under concurrent inserts). ITEM:
 *   {"id","assignment_id","eval_key","eval_version","execution_mode","status",
 *    "submit_status","created_at","started_at","finished_at","duration_ms",
 *    "error_code","summary"}
 * STORE_INVALID (with a message naming the field) for an unknown status, a
 * limit outside 0..500 or a malformed cursor. Uses a read connection. */
int store_runs_list_json(store *st, const store_run_filter *f, strbuf *out, store_err *err);

/* Appends one run:
 *   ITEM fields + {"lease_generation","worker_id","timeout_seconds",
 *    "descriptor":<json|null>,"results":<json array|null>,"error_message",
 *    "submission":{"submission_id","status","attempts_count","first_attempt_at",
 *      "last_attempt_at","error_code","error_message","body_bytes",
 *      "attempts":[{"attempt","at","outcome","http_status","duration_ms",
 *                   "error_code","message","request_id"}]} | null}
 * outcome is "committed" | "replayed" | "retry" | "rejected".
 * STORE_NOTFOUND if unknown. */
int store_run_get_json(store *st, const char *run_id, strbuf *out, store_err *err);

typedef struct {
    const char *status; /* NULL, "active" (claimed or planned), or one assignment status */
    int limit;          /* 1..500; 0 means 50 */
    const char *cursor; /* NULL/"" for the first page */
} store_assignment_filter;

/* Appends {"assignments":[A...],"next_cursor":...|null}, newest claim first. A:
 *   {"id","worker_id","lease_generation","lease_expires_at","status","session_id",
 *    "session_revision_id","agent_id","environment","trigger_reason","event_count",
 *    "claimed_at","planned_at","finished_at","error_code","error_message",
 *    "runs":{"total","finished","pending_submissions","by_status":{status:n},
 *            "skipped": definitions whose condition did not apply}}
 * STORE_INVALID for an unknown status/limit/cursor. */
int store_assignments_list_json(store *st, const store_assignment_filter *f, strbuf *out,
                                store_err *err);
/* Appends A + {"definitions":<json|null>,"plan_request":<json|null>,
 * "plan_response":<json|null>,"run_list":[ITEM...]}. STORE_NOTFOUND if unknown. */
int store_assignment_get_json(store *st, const char *assignment_id, strbuf *out, store_err *err);

/* The managed catalog as this worker last saw it, from the stored history:
 * the managed (execution_mode "python") definitions the newest
 * `assignments` (1..500) assignments carried, each eval_key once (the newest
 * assignment's definition of it), sorted by eval_key. Appends
 *   {"assignments_scanned":N,"definitions":[{"eval_key","eval_version",
 *    "definition":{"eval_key","eval_version","display_name","result_kind",
 *      "labels","condition_source","evaluator_source","timeout_seconds"}|null,
 *    "source_checksum","assignment_id","seen_at","source_run_id",
 *    "source_run_at"}...]}
 * where the evaluator source is the one the newest stored managed run of
 * that key and version received in its plan ("definition" null when no
 * such run is stored: its condition selected nothing in the history kept,
 * or the history was pruned); "definition" is what POST /v1/backtests
 * takes. STORE_INVALID for `assignments` out of range. */
int store_catalog_json(store *st, int assignments, strbuf *out, store_err *err);

/* Charts over the last `minutes` minutes ending at `now` (minutes 1..1440,
 * 0 means 60). Appends
 *   {"minutes":[{"t":"<RFC 3339 minute start>","succeeded":n,"failed":n,
 *     "timed_out":n,"cancelled":n,"p50_ms":x|null,"p90_ms":x|null,
 *     "p99_ms":x|null,"count":n}...]}
 * one entry per minute, oldest first, zero-filled. Counts are of runs
 * finished in that minute by status; latency percentiles are of their
 * duration_ms, estimated from a log-bucket histogram maintained on write
 * (relative error under 10 %), so the query cost does not grow with traffic. */
int store_charts_json(store *st, double now, int minutes, strbuf *out, store_err *err);

/* Like store_charts_json, from the runs themselves (the runs of the window
 * and a few minutes before it are read, newest first): only the runs of
 * eval_key (NULL: all), with each minute's latency percentiles per mode,
 * exact to the microsecond: "modes":{"python":{"p50_ms","p90_ms","p99_ms",
 * "count"},"local":{...}}. Cancelled runs count but have no latency. */
int store_charts_runs_json(store *st, double now, int minutes, const char *eval_key, strbuf *out,
                           store_err *err);

/* The status values runs and assignments can have (NULL-terminated, static):
 * what the list filters accept (assignments also take "active"). */
const char *const *store_run_statuses(void);
const char *const *store_assignment_statuses(void);

/* Resolves an id prefix of `table` ("runs" or "assignments"): STORE_OK with
 * the one matching id in full (cap bytes), STORE_NOTFOUND when none matches,
 * STORE_CONFLICT when several do. `matches` gets a JSON array of (up to 6)
 * matching ids in every case. */
int store_resolve_id(store *st, const char *table, const char *prefix, char *full, size_t cap,
                     strbuf *matches, store_err *err);

/* Appends {"pending":[{"run_id","submission_id","assignment_id","eval_key",
 * "queued_at","age_seconds","attempts","last_attempt_at","last_error_code",
 * "last_error_message"}...],"depth":N}: the oldest `limit` (1..500) results
 * waiting in the outbox, oldest first, and how many wait in all. */
int store_outbox_json(store *st, double now, int limit, strbuf *out, store_err *err);

/* Appends the most recently finished failed or timed-out run as
 * {"run_id","assignment_id","eval_key","execution_mode","status","code",
 * "message","at"}, or null when there is none. */
int store_last_failed_run_json(store *st, strbuf *out, store_err *err);

/* Appends {"assignments":{status:n...},"runs":{status:n...},"outbox_depth":n,
 * "db_bytes":n,"schema_version":n}: totals for status pages and gauges. */
int store_summary_json(store *st, strbuf *out, store_err *err);

/* ---------------------------------------------------------------- backtests */

/* The admin API's finished backtests (store_backtests.c), kept across
 * restarts: at most STORE_BACKTESTS_KEPT of them, and their rows at most
 * opt.backtests_max_bytes compressed in all (the newest one is always
 * kept, whatever its size); saving one deletes the oldest beyond either
 * bound in the same transaction, and store_prune deletes those finished
 * before now - retention_hours with the history. */
#define STORE_BACKTESTS_KEPT 100
#define STORE_BACKTESTS_MAX_BYTES ((int64_t)64 << 20)

typedef struct {
    char *id;           /* owned */
    char *state;        /* owned: "done" | "failed" | "cancelled" */
    double created_at;  /* seconds since the epoch */
    double finished_at; /* seconds since the epoch */
    int64_t done, total;
    char *request_json; /* owned: {"definitions", "baseline", "since"?, "limit"?};
                           NULL in store_backtest_list's items */
    char *summary_json; /* owned, NULL: no summary (not done); NULL in list items */
    int64_t rows_bytes; /* compressed size of its rows */
    char *error;        /* owned, NULL unless "failed": why it could not go on */
} store_backtest;

/* Saves a finished backtest (b's id, state, times, progress, request,
 * summary and error; rows_bytes is ignored) with its rows, a JSON array of `len`
 * bytes (copied, compressed), then deletes the oldest beyond the bounds.
 * STORE_INVALID without an id, a state or a request; STORE_CONFLICT if the
 * id is already saved. */
int store_backtest_put(store *st, const store_backtest *b, const char *rows_json, size_t len,
                       store_err *err);
/* The saved backtests, newest first (request_json and summary_json NULL);
 * free with store_backtests_free. */
int store_backtest_list(store *st, store_backtest **out, size_t *n, store_err *err);
/* One saved backtest into *out (zeroed by the caller; free with
 * store_backtest_clear); STORE_NOTFOUND if none has that id. */
int store_backtest_get(store *st, const char *id, store_backtest *out, store_err *err);
/* Its rows, the JSON array as saved (*rows owned, NUL-terminated, *len its
 * length); STORE_NOTFOUND if none has that id, STORE_CORRUPT if the stored
 * bytes do not decompress to their recorded size. */
int store_backtest_rows(store *st, const char *id, char **rows, size_t *len, store_err *err);
void store_backtest_clear(store_backtest *b);
void store_backtests_free(store_backtest *b, size_t n);

/* ---------------------------------------------------------------- retention */

/* Deletes finished history: terminal assignments finished before
 * now - retention_hours with their runs, then the oldest finished runs beyond
 * retention_runs (with their attempts), in bounded batches (short write
 * transactions so the worker is never blocked long). Never deletes a run with
 * a pending outbox entry, nor a non-terminal assignment. Counts may be NULL.
 * Uses the options given to store_open. */
int store_prune(store *st, double now, size_t *runs_deleted, size_t *assignments_deleted,
                store_err *err);

#endif
