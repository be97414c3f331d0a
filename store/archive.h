/* store/archive: the transcript archive (SPEC §9): the transcripts the worker
 * evaluated, kept opt-in and bounded in one SQLite file of their own beside
 * the state database (`<db>.archive`, mode 0600), so that the state
 * database's WAL never carries their bytes. It owns that file, its writer
 * thread and queue, eviction, and the reads a backtest needs: the entries,
 * one entry's exact bytes, and the production baseline (the live runs' stored
 * results, read from the state database).
 *
 * ---------------------------------------------------------------------------
 * Entries
 * ---------------------------------------------------------------------------
 * An entry is one transcript as the worker received it (the exact bytes),
 * zstd-compressed, with the SHA-256 of the uncompressed bytes, the time it
 * was archived and what it links to: session_id, session_revision_id and the
 * assignment whose runs evaluated it (their results are the production
 * baseline, store_archive_baseline). Ids grow with insertion order. The same
 * session revision with the same bytes is kept once: archiving it again
 * moves the existing entry to the newest assignment and time.
 *
 * ---------------------------------------------------------------------------
 * Bounds and durability (the promise)
 * ---------------------------------------------------------------------------
 * - Bytes: after each insert, the archive file plus its WAL take at most
 *   max_bytes plus one entry. The oldest entries are evicted first, in the
 *   insert's own transaction, until the new entry fits; an entry whose
 *   compressed size alone exceeds max_bytes is not kept (counted as a
 *   failure, reason "too_large").
 * - Age: entries archived more than max_age_s ago are evicted in the same
 *   transaction (and by each insert's transaction only: an idle archive keeps
 *   its entries until the next insert or store_archive_prune).
 * - Atomic, not synced: each insert (with its evictions) is one SQLite
 *   transaction in WAL mode with synchronous=OFF. A crash of the process
 *   (kill -9) leaves every entry whole or absent, never torn; a power cut may
 *   lose recent entries (an archive found corrupt at open is moved aside to
 *   `<path>.corrupt` and started anew).
 * - Best-effort: store_archive_submit never blocks and never fails its
 *   caller. A full queue, a full disk or any write error drops that entry
 *   and counts it (stats.failures, the metric failproofai_sidecar_archive_
 *   failures_total{reason}); such failures are logged at most once a minute.
 *   Live work never waits for the archive.
 *
 * ---------------------------------------------------------------------------
 * Threads and memory
 * ---------------------------------------------------------------------------
 * Every function is thread-safe. A writer handle (max_bytes > 0) has one
 * background thread (at a lower CPU priority than live work) that
 * compresses and inserts what store_archive_submit queued; the queue holds
 * references to the transcripts (no copy), at most queue_max entries and
 * queue_max_bytes bytes, and releases each as soon as it is written. The
 * bytes are the bound that matters (they are what the queue holds); the
 * entry bound is generous, because the writer yields the CPU to live work
 * and falls behind a burst of small sessions on a loaded machine, where a
 * 16-entry queue dropped some of 80 sessions of 20-150 KiB. Reads
 * use their own connection and never wait for the writer (WAL).
 * Strings passed in are borrowed. Returned arrays and buffers are owned by
 * the caller and released with the matching *_free (buffers with free()).
 * Errors are the store's (store/store.h: a store_status and a store_err
 * naming the operation); a corrupted entry is STORE_CORRUPT. */
#ifndef FPS_STORE_ARCHIVE_H
#define FPS_STORE_ARCHIVE_H
#include "common/rcbuf.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct store_archive store_archive;

/* Writes "<db_path>.archive" into out (cap bytes). 0, or -1 when it does
 * not fit. */
int store_archive_path_for(const char *db_path, char *out, size_t cap);

typedef struct {
    const char *path;          /* the archive file, "<db>.archive" (store_archive_path_for) */
    const char *state_db_path; /* the state database, for store_archive_baseline (may be NULL:
                                  then the baseline is always empty) */
    int64_t max_bytes;         /* > 0: a writer, bounded to this many bytes (see Bounds);
                                  0: read-only (store_archive_submit/put refuse) */
    double max_age_s;          /* entries older than this are evicted; <= 0: no age bound */
    int zstd_level;            /* 0 means 3 */
    int queue_max;             /* transcripts waiting for the writer thread; 0 means 256 */
    int64_t queue_max_bytes;   /* their bytes; 0 means 64 MiB */
    int no_writer_thread;      /* tests: 1 = no thread; store_archive_submit then refuses and
                                  store_archive_put writes synchronously */
} store_archive_options;

/* Opens (creating it with mode 0600 if needed, for a writer) the archive.
 * A read-only handle (max_bytes 0) fails with STORE_NOTFOUND when the file
 * does not exist. *out is owned; store_archive_close. */
int store_archive_open(const store_archive_options *opt, store_archive **out, store_err *err);

/* Puts the writer's memory under a budget (all NULL: none): `hold(ud,
 * bytes)` is asked before an entry is queued, for its bytes (referenced
 * until written) and its compression buffer; non-zero drops the entry
 * (best-effort: counted as a failure, reason "memory"); `release(ud,
 * bytes)` gives them back once it is written. Called under the queue's
 * lock: they must not call into the archive. `ud` is borrowed; clear the
 * hooks before it goes. */
void store_archive_set_memory(store_archive *a, int (*hold)(void *ud, int64_t bytes),
                              void (*release)(void *ud, int64_t bytes), void *ud);

/* Writes what is queued (bounded: the writer finishes its current entry and
 * the queue), stops the thread and closes the file. NULL is accepted. */
void store_archive_close(store_archive *a);

/* ---------------------------------------------------------------- writing */

typedef struct {
    const char *session_id;          /* required */
    const char *session_revision_id; /* may be NULL */
    const char *assignment_id;       /* required: the live runs behind the baseline */
    double archived_at;              /* epoch seconds; 0 means now */
} store_archive_meta;

/* Queues `raw` (the transcript bytes as received) for the writer thread and
 * returns at once; takes its own reference to raw (the caller keeps its
 * own). 0 when queued; -1 when not (off, stopping, queue full: counted as a
 * failure with reason "queue_full"). Never blocks, never fails its caller. */
int store_archive_submit(store_archive *a, const store_archive_meta *m, rcbuf *raw);

/* Compresses and inserts one entry now, in the calling thread (the writer
 * thread's step; tests). *id (may be NULL) gets the entry's id. STORE_FULL
 * on a full disk, STORE_INVALID for a missing field or a read-only handle;
 * failures are counted as store_archive_submit's are. */
int store_archive_put(store_archive *a, const store_archive_meta *m, const void *data, size_t len,
                      int64_t *id, store_err *err);

/* Waits until everything queued before the call is written or dropped, at
 * most timeout_ms. 0, or -1 on timeout. */
int store_archive_flush(store_archive *a, int timeout_ms);

/* Evicts what the age bound and max_bytes no longer admit, now. *evicted may
 * be NULL. */
int store_archive_prune(store_archive *a, double now, size_t *evicted, store_err *err);

typedef struct {
    int64_t entries;      /* entries kept */
    int64_t bytes;        /* archive file + WAL on disk */
    int64_t raw_bytes;    /* uncompressed bytes of the entries kept */
    int64_t max_bytes;    /* the bound (0: read-only) */
    double max_age_s;     /* the age bound (0: none) */
    uint64_t archived;    /* entries written since open */
    uint64_t evictions;   /* entries evicted since open (bytes or age) */
    uint64_t failures;    /* entries not archived since open (queue full, disk full, errors) */
    int64_t queued;       /* entries waiting for the writer thread */
    int64_t queued_bytes; /* their uncompressed bytes (held by reference) */
} store_archive_stats;

/* Fills *out (cheap: counters and two stat() calls). */
void store_archive_stats_get(store_archive *a, store_archive_stats *out);

/* ---------------------------------------------------------------- reading */

typedef struct {
    int64_t id;
    char *session_id;          /* owned */
    char *session_revision_id; /* owned, may be NULL */
    char *assignment_id;       /* owned */
    double archived_at;
    int64_t raw_bytes;    /* length of the transcript */
    int64_t stored_bytes; /* compressed */
    char sha256[65];      /* lowercase hex of the transcript's bytes */
} store_archive_entry;

typedef struct {
    double since; /* > 0: only entries archived at or after this epoch time */
    int limit;    /* > 0: only the newest `limit` of those */
} store_archive_filter;

/* The entries matching f (NULL: all), oldest first (by id). *out is owned
 * (NULL when *n == 0); store_archive_entries_free. */
int store_archive_list(store_archive *a, const store_archive_filter *f, store_archive_entry **out,
                       size_t *n, store_err *err);
void store_archive_entries_free(store_archive_entry *e, size_t n);

/* One entry's transcript, exactly the bytes received: *data is malloc'ed,
 * *len bytes plus a NUL at data[len] (so rcbuf_take accepts it), owned by
 * the caller. The SHA-256 is checked: a mismatch, a blob that does not
 * decompress or decompresses to another length is STORE_CORRUPT ("archive
 * entry <id>: ..."), and nothing is returned. STORE_NOTFOUND when the entry
 * is gone (evicted). `meta` (may be NULL) receives the entry's metadata
 * (its strings owned: store_archive_entry_clear). */
int store_archive_read(store_archive *a, int64_t id, char **data, size_t *len,
                       store_archive_entry *meta, store_err *err);
/* Frees the owned strings of one entry (not the struct itself). */
void store_archive_entry_clear(store_archive_entry *e);

/* ----------------------------------------------------- production baseline */

/* The production outcome of one eval_key for a session, as the live worker
 * stored it in the state database. */
typedef struct {
    char *eval_key;      /* owned */
    char *eval_version;  /* owned */
    char *status;        /* owned: a terminal run status ("succeeded", "failed", "timed_out",
                            "cancelled"), or "skipped" (the condition selected nothing) */
    char *skip_reason;   /* owned, "skipped" only: the plan's reason_code */
    char *run_id;        /* owned, NULL when skipped */
    char *assignment_id; /* owned */
    char *summary;       /* owned, may be NULL */
    char *results_json;  /* owned, may be NULL: the results array as submitted */
    char *error_code;    /* owned, may be NULL */
    char *error_message; /* owned, may be NULL */
    double finished_at;  /* the run's (0 when skipped: the plan's time) */
} store_archive_baseline_run;

/* For session_id: the latest terminal run of each eval_key among the live
 * runs stored in the state database (every assignment of the session, the
 * newest run by finished time), plus, for an eval_key with no such run, a
 * "skipped" row when the session's latest plan skipped it. Rows by eval_key.
 * An eval_key absent from the result has no baseline (its history was
 * pruned, or it never ran): the backtest reports it as null. Reads the state
 * database through a read-only connection of its own (it never takes the
 * daemon's lock, so the CLI can read while the daemon runs). *n == 0 when
 * state_db_path is NULL or the file does not exist. *out owned;
 * store_archive_baseline_free. */
int store_archive_baseline(store_archive *a, const char *session_id,
                           store_archive_baseline_run **out, size_t *n, store_err *err);
void store_archive_baseline_free(store_archive_baseline_run *r, size_t n);

#endif
