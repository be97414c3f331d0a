/* store/archive: the transcript archive's file, writer thread and queue,
 * eviction and reads (the contract is in store/archive.h). The file is its
 * own SQLite database, apart from the state database: WAL mode with
 * synchronous=OFF (atomic, never synced), checkpointed (TRUNCATE) by the
 * writer after each insert so the WAL holds at most the last entry. */
#include "store/archive.h"

#include "store/store_int.h"

#include "common/ids.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/thread.h"
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define ARCHIVE_SCHEMA 1
#define FAIL_LOG_INTERVAL_MS 60000
/* Pages an entry takes beyond its overflow chain (its leaf cell, the index
 * cells, a split): what eviction reserves besides the blob itself. */
#define ENTRY_EXTRA_PAGES 8

static const char SCHEMA_SQL[] =
    "CREATE TABLE IF NOT EXISTS entries(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " session_id TEXT NOT NULL, session_revision_id TEXT, assignment_id TEXT NOT NULL,"
    " archived_at REAL NOT NULL, raw_bytes INTEGER NOT NULL, stored_bytes INTEGER NOT NULL,"
    " sha256 TEXT NOT NULL, codec TEXT NOT NULL DEFAULT 'zstd', data BLOB NOT NULL);"
    "CREATE INDEX IF NOT EXISTS entries_archived ON entries(archived_at);"
    "CREATE INDEX IF NOT EXISTS entries_session ON entries(session_id, id);";

/* The writer's statements, prepared once on its connection (at their first
 * use) and reset after each use, not prepared again for every insert. */
enum {
    WS_BEGIN,
    WS_COMMIT,
    WS_LOOKUP,
    WS_MOVE,
    WS_DELETE,
    WS_INSERT,
    WS_AGED,
    WS_EVICT_AGED,
    WS_OLDEST,
    WS_PAGES,
    WS_FREE_PAGES,
    WS_N
};
static const char *const WS_SQL[WS_N] = {
    [WS_BEGIN] = "BEGIN IMMEDIATE",
    [WS_COMMIT] = "COMMIT",
    [WS_LOOKUP] = "SELECT id FROM entries WHERE session_id = ?1 AND"
                  " coalesce(session_revision_id, '') = coalesce(?2, '') AND sha256 = ?3"
                  " ORDER BY id DESC LIMIT 1",
    /* The copy is made before the evictions, which may take the old row. */
    [WS_MOVE] = "INSERT INTO entries(session_id, session_revision_id, assignment_id, archived_at,"
                " raw_bytes, stored_bytes, sha256, codec, data) SELECT session_id,"
                " session_revision_id, ?2, ?3, raw_bytes, stored_bytes, sha256, codec, data"
                " FROM entries WHERE id = ?1",
    [WS_DELETE] = "DELETE FROM entries WHERE id = ?1",
    [WS_INSERT] = "INSERT INTO entries(session_id, session_revision_id, assignment_id,"
                  " archived_at, raw_bytes, stored_bytes, sha256, codec, data)"
                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'zstd', ?8)",
    [WS_AGED] = "SELECT count(*), total(raw_bytes) FROM entries WHERE archived_at < ?1",
    [WS_EVICT_AGED] = "DELETE FROM entries WHERE archived_at < ?1",
    [WS_OLDEST] = "SELECT id, raw_bytes FROM entries ORDER BY id LIMIT 1",
    [WS_PAGES] = "PRAGMA page_count",
    [WS_FREE_PAGES] = "PRAGMA freelist_count",
};

/* What one transaction changes in the entries kept, applied to the figures
 * once it commits (so they follow the file without a scan of it). */
typedef struct {
    int64_t entries, raw;
    size_t evicted;
} tx_delta;

typedef struct qitem {
    struct qitem *next;
    char *session_id, *session_revision_id, *assignment_id; /* owned */
    double archived_at;
    rcbuf *raw;   /* one reference, released once written */
    int64_t held; /* bytes held in the memory budget (mem_hold), 0 if none */
} qitem;

struct store_archive {
    store_archive_options opt;
    char *path, *state_path;
    int64_t max_bytes;
    int level;

    /* The writer connection and its compression context (under wmu). */
    pthread_mutex_t wmu;
    sqlite3 *w;
    ZSTD_CCtx *cctx;
    int64_t page_size;
    sqlite3_stmt *ws[WS_N]; /* owned, prepared on first use (wstmt) */
    int ws_code;            /* the status of the last wstmt that failed  */

    /* The read connection (under rmu) and the state database's (under smu,
     * opened at the first baseline query). */
    pthread_mutex_t rmu;
    sqlite3 *r;
    pthread_mutex_t smu;
    sqlite3 *s;
    int s_missing; /* the state database was not there at the last try */

    /* The queue and its thread. */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;   /* the thread waits for work */
    pthread_cond_t qdone; /* store_archive_flush waits for progress */
    qitem *qhead, *qtail;
    int64_t qlen, qbytes;
    uint64_t q_enqueued, q_finished; /* items queued / written or dropped */
    int qstop;
    int thread_running;
    pthread_t th;
    /* The memory budget's hooks (under qmu; store_archive_set_memory). */
    int (*mem_hold)(void *ud, int64_t bytes);
    void (*mem_release)(void *ud, int64_t bytes);
    void *mem_ud;

    /* Figures (atomics). */
    _Atomic int64_t entries, raw_total;
    _Atomic uint64_t archived, evictions, failures;
    _Atomic int64_t fail_logged_ms;
};

/* ------------------------------------------------------------------ errors */

/* The store's error convention (st_errf), each message marked as the
 * archive's: "store: archive: <what>". fmt is the first argument, a literal. */
#define aerr(err, code, ...) st_errf(err, code, "archive: " __VA_ARGS__)

static int sqlfail(store_err *err, sqlite3 *db, int rc, const char *op)
{
    return aerr(err, st_map_rc(db, rc), "%s: %s", op, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

static const char *failure_reason(int code)
{
    switch (code) {
    case STORE_FULL:
        return "disk_full";
    case STORE_READONLY:
        return "readonly";
    case STORE_BUSY:
        return "busy";
    case STORE_CORRUPT:
        return "corrupt";
    default:
        return "error";
    }
}

/* Counts one entry not archived and logs it, at most once an interval. */
static void note_failure(store_archive *a, const char *reason, const char *msg)
{
    atomic_fetch_add(&a->failures, 1);
    metrics_inc(METRIC_ARCHIVE_FAILURES, "reason", reason);
    int64_t now = time_mono_ms();
    int64_t last = atomic_load(&a->fail_logged_ms);
    if (last != 0 && now - last < FAIL_LOG_INTERVAL_MS) return;
    if (!atomic_compare_exchange_strong(&a->fail_logged_ms, &last, now)) return;
    log_warn("transcript not archived (archiving is best-effort; live work goes on)",
             LOG_S("reason", reason), LOG_S("error", msg ? msg : ""),
             LOG_I("failures_total", (long long)atomic_load(&a->failures)));
}

static void publish_gauges(store_archive *a)
{
    store_archive_stats s;
    store_archive_stats_get(a, &s);
    metrics_gauge_set(METRIC_ARCHIVE_BYTES, (double)s.bytes);
    metrics_gauge_set(METRIC_ARCHIVE_ENTRIES, (double)s.entries);
}

/* ------------------------------------------------------------------ paths */

int store_archive_path_for(const char *db_path, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s.archive", db_path ? db_path : "");
    return (n < 0 || (size_t)n >= cap || !db_path || !*db_path) ? -1 : 0;
}

static int64_t file_size(const char *path, const char *suffix)
{
    char p[4096];
    struct stat st;
    if (snprintf(p, sizeof p, "%s%s", path, suffix) >= (int)sizeof p) return 0;
    return stat(p, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* ------------------------------------------------------------- connections */

static int exec(sqlite3 *db, const char *sql, const char *op, store_err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK) return STORE_OK;
    int code = aerr(err, st_map_rc(db, rc), "%s: %s", op, msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return code;
}

static int64_t pragma_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Opens the writer: creates the file 0600, WAL, synchronous=OFF, schema. */
static int open_writer(store_archive *a, store_err *err)
{
    int fd = open(a->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return aerr(err, errno == ENOSPC ? STORE_FULL : STORE_READONLY, "open %s: %s", a->path,
                    strerror(errno));
    (void)fchmod(fd, 0600);
    close(fd);
    int rc = sqlite3_open_v2(a->path, &a->w, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) return sqlfail(err, a->w, rc, "open");
    sqlite3_busy_timeout(a->w, 5000);
    int code = exec(a->w,
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA wal_autocheckpoint=0;"
                    " PRAGMA journal_size_limit=0; PRAGMA secure_delete=OFF;",
                    "configure", err);
    if (code == STORE_OK) {
        int64_t v = pragma_int(a->w, "PRAGMA user_version");
        if (v > ARCHIVE_SCHEMA)
            return aerr(err, STORE_SCHEMA, "%s has schema %lld, newer than this binary's %d",
                        a->path, (long long)v, ARCHIVE_SCHEMA);
        code = exec(a->w, SCHEMA_SQL, "schema", err);
        if (code == STORE_OK && v < ARCHIVE_SCHEMA)
            code = exec(a->w, "PRAGMA user_version=1", "schema", err);
    }
    if (code == STORE_OK && pragma_int(a->w, "SELECT count(*) FROM entries") < 0)
        code = sqlfail(err, a->w, sqlite3_errcode(a->w), "read entries");
    a->page_size = pragma_int(a->w, "PRAGMA page_size");
    if (a->page_size <= 0) a->page_size = 4096;
    return code;
}

static int open_reader(store_archive *a, store_err *err)
{
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(a->path, &a->r, flags, NULL);
    if (rc != SQLITE_OK) return sqlfail(err, a->r, rc, "open for reading");
    sqlite3_busy_timeout(a->r, 5000);
    if (pragma_int(a->r, "SELECT count(*) FROM entries") < 0)
        return sqlfail(err, a->r, sqlite3_errcode(a->r), "read entries");
    return STORE_OK;
}

static void close_db(sqlite3 **db)
{
    if (*db) sqlite3_close_v2(*db);
    *db = NULL;
}

/* Writer held. The writer's statement `which`, prepared on first use; the
 * caller resets it (wdone) when done with it. NULL on failure, with the
 * error in *err and its status in a->ws_code (callers return that, so the
 * status does not depend on err being given). */
static sqlite3_stmt *wstmt(store_archive *a, int which, store_err *err)
{
    if (a->ws[which] == NULL) {
        int rc = sqlite3_prepare_v3(a->w, WS_SQL[which], -1, SQLITE_PREPARE_PERSISTENT,
                                    &a->ws[which], NULL);
        if (rc != SQLITE_OK) {
            a->ws_code = sqlfail(err, a->w, rc, "prepare");
            sqlite3_finalize(a->ws[which]);
            a->ws[which] = NULL;
            return NULL;
        }
    }
    return a->ws[which];
}

/* Resets s and clears its bindings (the borrowed strings and blob go). */
static void wdone(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* Steps the writer's statement s (from wstmt, bound by the caller; NULL when
 * wstmt failed) to its end: 0 on SQLITE_DONE, else the error in *err naming
 * op. Resets it either way. */
static int wrun(store_archive *a, sqlite3_stmt *s, const char *op, store_err *err)
{
    int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
    if (s) wdone(s);
    if (s && rc == SQLITE_DONE) return STORE_OK;
    return s ? sqlfail(err, a->w, rc, op) : a->ws_code;
}

/* The single-integer result of a writer's pragma statement, or -1. */
static int64_t wpragma(store_archive *a, int which, store_err *err)
{
    sqlite3_stmt *s = wstmt(a, which, err);
    if (s == NULL) return -1;
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    wdone(s);
    return v;
}

/* A writer's archive that does not open as a database is moved aside and
 * started anew: the archive is a cache of what the worker saw, never the
 * only copy of anything the worker needs. */
static int open_or_reset(store_archive *a, store_err *err)
{
    store_err e = {0};
    int code = open_writer(a, &e);
    if (code != STORE_CORRUPT) {
        if (code != STORE_OK && err) *err = e;
        return code;
    }
    close_db(&a->w);
    char aside[4096];
    snprintf(aside, sizeof aside, "%s.corrupt", a->path);
    log_warn("archive is corrupt; moved aside and started anew", LOG_S("path", a->path),
             LOG_S("moved_to", aside), LOG_S("error", e.msg));
    (void)rename(a->path, aside);
    static const char *const SUFFIXES[] = {"-wal", "-shm"};
    for (size_t i = 0; i < 2; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s%s", a->path, SUFFIXES[i]);
        (void)unlink(p);
    }
    return open_writer(a, err);
}

static void refresh_totals(store_archive *a, sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "SELECT count(*), total(raw_bytes) FROM entries", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        atomic_store(&a->entries, sqlite3_column_int64(s, 0));
        atomic_store(&a->raw_total, (int64_t)sqlite3_column_double(s, 1));
    }
    sqlite3_finalize(s);
}

/* --------------------------------------------------------------- eviction */

/* Writer held, transaction open. Deletes the oldest entries while the
 * entries in use plus `reserve` bytes exceed max_bytes, after those older
 * than the age bound; counts them in *d. */
static int evict(store_archive *a, double now, int64_t reserve, tx_delta *d, store_err *err)
{
    int code;
    if (a->opt.max_age_s > 0) {
        sqlite3_stmt *s = wstmt(a, WS_AGED, err);
        if (s == NULL) return a->ws_code;
        sqlite3_bind_double(s, 1, now - a->opt.max_age_s);
        int64_t aged = 0, aged_raw = 0;
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            aged = sqlite3_column_int64(s, 0);
            aged_raw = (int64_t)sqlite3_column_double(s, 1);
        }
        wdone(s);
        if (rc != SQLITE_ROW) return sqlfail(err, a->w, rc, "evict by age");
        if (aged > 0) {
            s = wstmt(a, WS_EVICT_AGED, err);
            if (s) sqlite3_bind_double(s, 1, now - a->opt.max_age_s);
            code = wrun(a, s, "evict by age", err);
            if (code != STORE_OK) return code;
            d->entries -= aged;
            d->raw -= aged_raw;
            d->evicted += (size_t)aged;
        }
    }
    for (;;) {
        int64_t pages = wpragma(a, WS_PAGES, err);
        int64_t free_pages = pages < 0 ? -1 : wpragma(a, WS_FREE_PAGES, err);
        if (pages < 0 || free_pages < 0)
            return sqlfail(err, a->w, sqlite3_errcode(a->w), "measure pages");
        if ((pages - free_pages) * a->page_size + reserve <= a->max_bytes) return STORE_OK;
        sqlite3_stmt *s = wstmt(a, WS_OLDEST, err);
        if (s == NULL) return a->ws_code;
        int rc = sqlite3_step(s);
        int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        int64_t raw = rc == SQLITE_ROW ? sqlite3_column_int64(s, 1) : 0;
        wdone(s);
        if (rc == SQLITE_DONE) return STORE_OK; /* empty: the entry fits alone */
        if (rc != SQLITE_ROW) return sqlfail(err, a->w, rc, "evict oldest");
        s = wstmt(a, WS_DELETE, err);
        if (s) sqlite3_bind_int64(s, 1, id);
        code = wrun(a, s, "evict oldest", err);
        if (code != STORE_OK) return code;
        d->entries--;
        d->raw -= raw;
        d->evicted++;
    }
}

static void checkpoint(store_archive *a)
{
    /* TRUNCATE: the WAL goes back to zero bytes unless a reader holds an old
     * snapshot (then the next insert's checkpoint catches up). */
    (void)sqlite3_wal_checkpoint_v2(a->w, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
}

/* ---------------------------------------------------------------- writing */

static int64_t reserve_for(const store_archive *a, int64_t stored)
{
    int64_t usable = a->page_size - 4; /* an overflow page's payload */
    return ((stored + usable - 1) / usable + ENTRY_EXTRA_PAGES) * a->page_size;
}

/* Writer held. One transaction: evictions, then the entry (or, for bytes
 * already archived under the same session revision, the existing entry
 * moved to the new assignment and time). *d gets what it changed once it
 * commits (left zero otherwise). */
static int insert_tx(store_archive *a, const store_archive_meta *m, double at, const char *sha,
                     size_t raw_len, const void *z, size_t zlen, int64_t *id, tx_delta *d,
                     store_err *err)
{
    tx_delta t = {0};
    int code = wrun(a, wstmt(a, WS_BEGIN, err), "begin", err);
    if (code != STORE_OK) return code;
    sqlite3_stmt *s = wstmt(a, WS_LOOKUP, err);
    if (s == NULL) {
        code = a->ws_code;
        goto fail;
    }
    sqlite3_bind_text(s, 1, m->session_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, m->session_revision_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, sha, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int64_t old = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    wdone(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        code = sqlfail(err, a->w, rc, "look up entry");
        goto fail;
    }
    if (old) {
        s = wstmt(a, WS_MOVE, err);
        if (s) {
            sqlite3_bind_int64(s, 1, old);
            sqlite3_bind_text(s, 2, m->assignment_id, -1, SQLITE_STATIC);
            sqlite3_bind_double(s, 3, at);
        }
        code = wrun(a, s, "move entry", err);
        if (code != STORE_OK) goto fail;
        int64_t nid = sqlite3_last_insert_rowid(a->w);
        s = wstmt(a, WS_DELETE, err);
        if (s) sqlite3_bind_int64(s, 1, old);
        code = wrun(a, s, "move entry", err);
        if (code != STORE_OK) goto fail;
        /* one row in, one out: the totals stay */
        code = evict(a, time_now(), 0, &t, err);
        if (code != STORE_OK) goto fail;
        if (id) *id = nid;
    } else {
        code = evict(a, time_now(), reserve_for(a, (int64_t)zlen), &t, err);
        if (code != STORE_OK) goto fail;
        s = wstmt(a, WS_INSERT, err);
        if (s) {
            sqlite3_bind_text(s, 1, m->session_id, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 2, m->session_revision_id, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 3, m->assignment_id, -1, SQLITE_STATIC);
            sqlite3_bind_double(s, 4, at);
            sqlite3_bind_int64(s, 5, (sqlite3_int64)raw_len);
            sqlite3_bind_int64(s, 6, (sqlite3_int64)zlen);
            sqlite3_bind_text(s, 7, sha, -1, SQLITE_STATIC);
            sqlite3_bind_blob64(s, 8, z, (sqlite3_uint64)zlen, SQLITE_STATIC);
        }
        code = wrun(a, s, "insert entry", err);
        if (code != STORE_OK) goto fail;
        t.entries++;
        t.raw += (int64_t)raw_len;
        if (id) *id = sqlite3_last_insert_rowid(a->w);
    }
    code = wrun(a, wstmt(a, WS_COMMIT, err), "commit", err);
    if (code != STORE_OK) goto fail;
    *d = t;
    return STORE_OK;
fail:
    sqlite3_exec(a->w, "ROLLBACK", NULL, NULL, NULL);
    return code;
}

/* Writer held. The figures after a transaction: its delta when it
 * committed; a count from the file when it did not (whatever it left). */
static void apply_delta(store_archive *a, int code, const tx_delta *d)
{
    if (code != STORE_OK) {
        refresh_totals(a, a->w);
        return;
    }
    atomic_fetch_add(&a->entries, d->entries);
    atomic_fetch_add(&a->raw_total, d->raw);
}

int store_archive_put(store_archive *a, const store_archive_meta *m, const void *data, size_t len,
                      int64_t *id, store_err *err)
{
    void *z = NULL;
    int code;
    if (a == NULL || a->w == NULL) return aerr(err, STORE_INVALID, "put: the archive is read-only");
    if (m == NULL || m->session_id == NULL || m->assignment_id == NULL || (!data && len))
        return aerr(err, STORE_INVALID, "put: session_id and assignment_id are required");
    double at = m->archived_at > 0 ? m->archived_at : time_now();
    char sha[65];
    ids_sha256_hex(data, len, sha);
    size_t cap = ZSTD_compressBound(len);
    z = malloc(cap ? cap : 1);
    if (z == NULL) {
        code = aerr(err, STORE_ERROR, "put: out of memory for %zu bytes", cap);
        note_failure(a, "memory", err ? err->msg : NULL);
        return code;
    }
    tx_delta d = {0};
    pthread_mutex_lock(&a->wmu);
    size_t zlen = ZSTD_compressCCtx(a->cctx, z, cap, data, len, a->level);
    if (ZSTD_isError(zlen)) {
        code = aerr(err, STORE_ERROR, "compress: %s", ZSTD_getErrorName(zlen));
    } else if (reserve_for(a, (int64_t)zlen) > a->max_bytes) {
        code = aerr(err, STORE_INVALID,
                    "entry of %zu compressed bytes does not fit in an archive of %lld bytes", zlen,
                    (long long)a->max_bytes);
    } else {
        code = insert_tx(a, m, at, sha, len, z, zlen, id, &d, err);
        apply_delta(a, code, &d);
        if (code == STORE_OK) checkpoint(a);
    }
    pthread_mutex_unlock(&a->wmu);
    free(z);
    if (d.evicted) {
        atomic_fetch_add(&a->evictions, d.evicted);
        metrics_add(METRIC_ARCHIVE_EVICTIONS, (double)d.evicted);
    }
    if (code == STORE_OK) {
        atomic_fetch_add(&a->archived, 1);
        metrics_inc(METRIC_ARCHIVE_ARCHIVED);
    } else {
        note_failure(a, code == STORE_INVALID ? "too_large" : failure_reason(code),
                     err ? err->msg : NULL);
    }
    publish_gauges(a);
    return code;
}

int store_archive_prune(store_archive *a, double now, size_t *evicted, store_err *err)
{
    tx_delta d = {0};
    if (evicted) *evicted = 0;
    if (a == NULL || a->w == NULL) return STORE_OK;
    pthread_mutex_lock(&a->wmu);
    int code = wrun(a, wstmt(a, WS_BEGIN, err), "begin", err);
    if (code == STORE_OK) {
        code = evict(a, now, 0, &d, err);
        if (code == STORE_OK) code = wrun(a, wstmt(a, WS_COMMIT, err), "commit", err);
        if (code != STORE_OK) {
            sqlite3_exec(a->w, "ROLLBACK", NULL, NULL, NULL);
            d = (tx_delta){0};
        }
        apply_delta(a, code, &d);
        checkpoint(a);
    }
    pthread_mutex_unlock(&a->wmu);
    size_t n = d.evicted;
    if (n) {
        atomic_fetch_add(&a->evictions, n);
        metrics_add(METRIC_ARCHIVE_EVICTIONS, (double)n);
    }
    if (evicted) *evicted = n;
    publish_gauges(a);
    return code;
}

/* ------------------------------------------------------------------ queue */

static void qitem_free(qitem *q)
{
    if (!q) return;
    free(q->session_id);
    free(q->session_revision_id);
    free(q->assignment_id);
    rcbuf_release(q->raw);
    free(q);
}

static void *writer_main(void *arg)
{
    store_archive *a = arg;
    /* Below live work: the archive takes the CPU the worker leaves. */
    thread_nice_self(10);
    pthread_mutex_lock(&a->qmu);
    for (;;) {
        while (!a->qhead && !a->qstop)
            pthread_cond_wait(&a->qcv, &a->qmu);
        qitem *q = a->qhead;
        if (!q) break; /* stopping with nothing left */
        a->qhead = q->next;
        if (!a->qhead) a->qtail = NULL;
        pthread_mutex_unlock(&a->qmu);

        store_archive_meta m = {q->session_id, q->session_revision_id, q->assignment_id,
                                q->archived_at};
        store_err e;
        (void)store_archive_put(a, &m, rcbuf_data(q->raw), rcbuf_len(q->raw), NULL, &e);
        size_t len = rcbuf_len(q->raw);
        int64_t held = q->held;
        qitem_free(q);

        pthread_mutex_lock(&a->qmu);
        if (held && a->mem_release) a->mem_release(a->mem_ud, held);
        a->qlen--;
        a->qbytes -= (int64_t)len;
        a->q_finished++;
        pthread_cond_broadcast(&a->qdone);
    }
    pthread_mutex_unlock(&a->qmu);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int store_archive_submit(store_archive *a, const store_archive_meta *m, rcbuf *raw)
{
    if (a == NULL || raw == NULL || m == NULL || !m->session_id || !m->assignment_id) return -1;
    size_t len = rcbuf_len(raw);
    pthread_mutex_lock(&a->qmu);
    int ok = a->thread_running && !a->qstop && a->qlen < a->opt.queue_max &&
             a->qbytes + (int64_t)len <= a->opt.queue_max_bytes;
    pthread_mutex_unlock(&a->qmu);
    if (!ok) {
        note_failure(a, "queue_full", "the archive's queue is full");
        return -1;
    }
    qitem *q = calloc(1, sizeof *q);
    if (q) {
        q->session_id = strdup(m->session_id);
        q->session_revision_id = dup_or_null(m->session_revision_id);
        q->assignment_id = strdup(m->assignment_id);
        q->archived_at = m->archived_at > 0 ? m->archived_at : time_now();
    }
    if (!q || !q->session_id || !q->assignment_id ||
        (m->session_revision_id && !q->session_revision_id)) {
        qitem_free(q);
        note_failure(a, "memory", "out of memory");
        return -1;
    }
    q->raw = rcbuf_ref(raw);
    pthread_mutex_lock(&a->qmu);
    /* checked again: another thread may have filled it meanwhile */
    if (a->qstop || a->qlen >= a->opt.queue_max ||
        a->qbytes + (int64_t)len > a->opt.queue_max_bytes) {
        pthread_mutex_unlock(&a->qmu);
        qitem_free(q);
        note_failure(a, "queue_full", "the archive's queue is full");
        return -1;
    }
    /* the bytes stay referenced until written, and the writer compresses
     * them into a buffer of their bound: both count against the budget */
    if (a->mem_hold) {
        int64_t need = (int64_t)len + (int64_t)ZSTD_compressBound(len);
        if (a->mem_hold(a->mem_ud, need) != 0) {
            pthread_mutex_unlock(&a->qmu);
            qitem_free(q);
            note_failure(a, "memory_budget",
                         "no room in the memory budget to archive the transcript");
            return -1;
        }
        q->held = need;
    }
    if (a->qtail)
        a->qtail->next = q;
    else
        a->qhead = q;
    a->qtail = q;
    a->qlen++;
    a->qbytes += (int64_t)len;
    a->q_enqueued++;
    pthread_cond_signal(&a->qcv);
    pthread_mutex_unlock(&a->qmu);
    return 0;
}

void store_archive_set_memory(store_archive *a, int (*hold)(void *ud, int64_t bytes),
                              void (*release)(void *ud, int64_t bytes), void *ud)
{
    if (a == NULL) return;
    pthread_mutex_lock(&a->qmu);
    a->mem_hold = hold;
    a->mem_release = release;
    a->mem_ud = ud;
    pthread_mutex_unlock(&a->qmu);
}

int store_archive_flush(store_archive *a, int timeout_ms)
{
    if (a == NULL) return 0;
    int64_t deadline = time_mono_ms() + timeout_ms;
    pthread_mutex_lock(&a->qmu);
    uint64_t target = a->q_enqueued;
    int rc = 0;
    while (a->q_finished < target) {
        int64_t left = deadline - time_mono_ms();
        if (left <= 0) {
            rc = -1;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + (left < 100 ? left : 100) * 1000000;
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&a->qdone, &a->qmu, &ts);
    }
    pthread_mutex_unlock(&a->qmu);
    return rc;
}

/* ----------------------------------------------------------- open / close */

int store_archive_open(const store_archive_options *opt, store_archive **out, store_err *err)
{
    *out = NULL;
    if (opt == NULL || opt->path == NULL || !*opt->path || opt->max_bytes < 0)
        return aerr(err, STORE_INVALID, "open: a path and max_bytes >= 0 are required");
    store_archive *a = calloc(1, sizeof *a);
    if (!a) return aerr(err, STORE_ERROR, "open: out of memory");
    a->opt = *opt;
    a->path = strdup(opt->path);
    a->state_path = dup_or_null(opt->state_db_path);
    a->opt.path = a->path;
    a->opt.state_db_path = a->state_path;
    a->max_bytes = opt->max_bytes;
    a->level = opt->zstd_level ? opt->zstd_level : 3;
    if (a->opt.queue_max <= 0) a->opt.queue_max = 256;
    if (a->opt.queue_max_bytes <= 0) a->opt.queue_max_bytes = 64LL << 20;
    pthread_mutex_init(&a->wmu, NULL);
    pthread_mutex_init(&a->rmu, NULL);
    pthread_mutex_init(&a->smu, NULL);
    pthread_mutex_init(&a->qmu, NULL);
    pthread_cond_init(&a->qcv, NULL);
    pthread_cond_init(&a->qdone, NULL);
    int code;
    if (!a->path || (opt->state_db_path && !a->state_path)) {
        code = aerr(err, STORE_ERROR, "open: out of memory");
        goto fail;
    }
    if (a->max_bytes > 0) {
        a->cctx = ZSTD_createCCtx();
        if (!a->cctx) {
            code = aerr(err, STORE_ERROR, "open: no zstd context");
            goto fail;
        }
        code = open_or_reset(a, err);
        if (code != STORE_OK) goto fail;
        refresh_totals(a, a->w);
    } else if (access(a->path, F_OK) != 0) {
        code = aerr(err, STORE_NOTFOUND, "open: %s does not exist", a->path);
        goto fail;
    }
    code = open_reader(a, err);
    if (code != STORE_OK) goto fail;
    if (a->max_bytes == 0) refresh_totals(a, a->r);
    if (a->max_bytes > 0 && !opt->no_writer_thread) {
        if (pthread_create(&a->th, NULL, writer_main, a) != 0) {
            code = aerr(err, STORE_ERROR, "open: cannot start the writer thread");
            goto fail;
        }
        a->thread_running = 1;
    }
    if (a->max_bytes > 0) publish_gauges(a);
    *out = a;
    return STORE_OK;
fail:
    store_archive_close(a);
    return code;
}

void store_archive_close(store_archive *a)
{
    if (a == NULL) return;
    if (a->thread_running) {
        thread_stop_join(a->th, &a->qmu, &a->qcv, &a->qstop);
        a->thread_running = 0;
    }
    for (qitem *q = a->qhead, *next; q; q = next) {
        next = q->next;
        qitem_free(q);
    }
    if (a->w) checkpoint(a);
    for (int i = 0; i < WS_N; i++)
        sqlite3_finalize(a->ws[i]);
    close_db(&a->w);
    close_db(&a->r);
    close_db(&a->s);
    ZSTD_freeCCtx(a->cctx);
    pthread_mutex_destroy(&a->wmu);
    pthread_mutex_destroy(&a->rmu);
    pthread_mutex_destroy(&a->smu);
    pthread_mutex_destroy(&a->qmu);
    pthread_cond_destroy(&a->qcv);
    pthread_cond_destroy(&a->qdone);
    free(a->path);
    free(a->state_path);
    free(a);
}

void store_archive_stats_get(store_archive *a, store_archive_stats *out)
{
    memset(out, 0, sizeof *out);
    if (a == NULL) return;
    out->entries = atomic_load(&a->entries);
    out->raw_bytes = atomic_load(&a->raw_total);
    out->bytes = file_size(a->path, "") + file_size(a->path, "-wal");
    out->max_bytes = a->max_bytes;
    out->max_age_s = a->opt.max_age_s > 0 ? a->opt.max_age_s : 0;
    out->archived = atomic_load(&a->archived);
    out->evictions = atomic_load(&a->evictions);
    out->failures = atomic_load(&a->failures);
    pthread_mutex_lock(&a->qmu);
    out->queued = a->qlen;
    out->queued_bytes = a->qbytes;
    pthread_mutex_unlock(&a->qmu);
}

/* ---------------------------------------------------------------- reading */

static char *col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? strdup((const char *)t) : NULL;
}

#define ENTRY_COLS                                                                                 \
    "id, session_id, session_revision_id, assignment_id, archived_at, raw_bytes, stored_bytes,"    \
    " sha256"

static void entry_read(sqlite3_stmt *s, store_archive_entry *e)
{
    e->id = sqlite3_column_int64(s, 0);
    e->session_id = col_dup(s, 1);
    e->session_revision_id = col_dup(s, 2);
    e->assignment_id = col_dup(s, 3);
    e->archived_at = sqlite3_column_double(s, 4);
    e->raw_bytes = sqlite3_column_int64(s, 5);
    e->stored_bytes = sqlite3_column_int64(s, 6);
    const unsigned char *h = sqlite3_column_text(s, 7);
    snprintf(e->sha256, sizeof e->sha256, "%s", h ? (const char *)h : "");
}

void store_archive_entry_clear(store_archive_entry *e)
{
    if (!e) return;
    free(e->session_id);
    free(e->session_revision_id);
    free(e->assignment_id);
    e->session_id = e->session_revision_id = e->assignment_id = NULL;
}

void store_archive_entries_free(store_archive_entry *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++)
        store_archive_entry_clear(&e[i]);
    free(e);
}

int store_archive_list(store_archive *a, const store_archive_filter *f, store_archive_entry **out,
                       size_t *n, store_err *err)
{
    *out = NULL;
    *n = 0;
    if (a == NULL) return aerr(err, STORE_INVALID, "list: no archive");
    double since = f && f->since > 0 ? f->since : 0;
    int64_t limit = f && f->limit > 0 ? f->limit : -1;
    store_archive_entry *v = NULL;
    size_t len = 0, cap = 0;
    int code = STORE_OK;
    pthread_mutex_lock(&a->rmu);
    sqlite3_stmt *s = NULL;
    /* The newest `limit` of those since `since`, then oldest first. */
    int rc = sqlite3_prepare_v2(a->r,
                                "SELECT * FROM (SELECT " ENTRY_COLS " FROM entries"
                                " WHERE archived_at >= ?1 ORDER BY id DESC LIMIT ?2)"
                                " ORDER BY id",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_double(s, 1, since);
        sqlite3_bind_int64(s, 2, limit);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            if (len == cap) {
                size_t nc = cap ? cap * 2 : 64;
                store_archive_entry *nv = realloc(v, nc * sizeof *v);
                if (!nv) {
                    rc = SQLITE_NOMEM;
                    break;
                }
                v = nv;
                cap = nc;
            }
            memset(&v[len], 0, sizeof v[len]);
            entry_read(s, &v[len++]);
        }
    }
    if (rc != SQLITE_DONE) code = sqlfail(err, a->r, rc, "list");
    sqlite3_finalize(s);
    pthread_mutex_unlock(&a->rmu);
    if (code != STORE_OK) {
        store_archive_entries_free(v, len);
        return code;
    }
    *out = v;
    *n = len;
    return STORE_OK;
}

int store_archive_read(store_archive *a, int64_t id, char **data, size_t *len,
                       store_archive_entry *meta, store_err *err)
{
    *data = NULL;
    *len = 0;
    if (a == NULL) return aerr(err, STORE_INVALID, "read: no archive");
    store_archive_entry e = {0};
    void *z = NULL;
    size_t zlen = 0;
    char codec[16] = "";
    int code = STORE_OK;
    pthread_mutex_lock(&a->rmu);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(
        a->r, "SELECT " ENTRY_COLS ", codec, data FROM entries WHERE id = ?1", -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, id);
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            entry_read(s, &e);
            const unsigned char *c = sqlite3_column_text(s, 8);
            snprintf(codec, sizeof codec, "%s", c ? (const char *)c : "");
            zlen = (size_t)sqlite3_column_bytes(s, 9);
            const void *b = sqlite3_column_blob(s, 9);
            z = malloc(zlen ? zlen : 1);
            if (z && zlen) memcpy(z, b, zlen);
            if (!z) code = aerr(err, STORE_ERROR, "read entry %lld: out of memory", (long long)id);
        } else if (rc == SQLITE_DONE) {
            code = aerr(err, STORE_NOTFOUND, "entry %lld is not in the archive", (long long)id);
        } else {
            code = sqlfail(err, a->r, rc, "read entry");
        }
    } else {
        code = sqlfail(err, a->r, rc, "read entry");
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&a->rmu);
    if (code != STORE_OK) goto fail;

    /* Decompressed and checked outside the lock. */
    if (strcmp(codec, "zstd") != 0) {
        code = aerr(err, STORE_CORRUPT, "entry %lld: unknown codec '%s'", (long long)id, codec);
        goto fail;
    }
    unsigned long long declared = ZSTD_getFrameContentSize(z, zlen);
    if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN ||
        e.raw_bytes < 0 || declared != (unsigned long long)e.raw_bytes) {
        code = aerr(err, STORE_CORRUPT,
                    "entry %lld: the compressed blob is damaged (its frame does not declare the"
                    " %lld bytes stored)",
                    (long long)id, (long long)e.raw_bytes);
        goto fail;
    }
    char *buf = malloc((size_t)e.raw_bytes + 1);
    if (!buf) {
        code = aerr(err, STORE_ERROR, "entry %lld: out of memory", (long long)id);
        goto fail;
    }
    size_t got = ZSTD_decompress(buf, (size_t)e.raw_bytes, z, zlen);
    if (ZSTD_isError(got) || got != (size_t)e.raw_bytes) {
        free(buf);
        code = aerr(err, STORE_CORRUPT, "entry %lld: the compressed blob is damaged (%s)",
                    (long long)id, ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
        goto fail;
    }
    buf[got] = '\0';
    char sha[65];
    ids_sha256_hex(buf, got, sha);
    if (strcmp(sha, e.sha256) != 0) {
        free(buf);
        code = aerr(err, STORE_CORRUPT,
                    "entry %lld: SHA-256 mismatch (stored %.16s..., read %.16s...)", (long long)id,
                    e.sha256, sha);
        goto fail;
    }
    free(z);
    *data = buf;
    *len = got;
    if (meta)
        *meta = e;
    else
        store_archive_entry_clear(&e);
    return STORE_OK;
fail:
    free(z);
    store_archive_entry_clear(&e);
    return code;
}

/* ----------------------------------------------------- production baseline */

void store_archive_baseline_free(store_archive_baseline_run *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].eval_key);
        free(r[i].eval_version);
        free(r[i].status);
        free(r[i].skip_reason);
        free(r[i].run_id);
        free(r[i].assignment_id);
        free(r[i].summary);
        free(r[i].results_json);
        free(r[i].error_code);
        free(r[i].error_message);
    }
    free(r);
}

/* smu held: the state database's read-only connection, opened once it
 * exists. NULL when there is none. */
static sqlite3 *state_db(store_archive *a, store_err *err, int *code)
{
    *code = STORE_OK;
    if (a->s || !a->state_path) return a->s;
    if (access(a->state_path, F_OK) != 0) return NULL;
    int rc =
        sqlite3_open_v2(a->state_path, &a->s, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        *code = sqlfail(err, a->s, rc, "open the state database");
        close_db(&a->s);
        return NULL;
    }
    sqlite3_busy_timeout(a->s, 5000);
    return a->s;
}

/* Terminal runs of the session's assignments, newest first per eval_key;
 * then the eval_keys the session's latest plan skipped. */
static const char BASELINE_RUNS_SQL[] =
    "SELECT r.eval_key, r.eval_version, r.status, NULL, r.id, r.assignment_id, r.summary,"
    " d.results_json, r.error_code, r.error_message, coalesce(r.finished_at, 0)"
    " FROM assignments a JOIN runs r ON r.assignment_id = a.id"
    " LEFT JOIN run_docs d ON d.seq = r.seq"
    " WHERE a.session_id = ?1 AND r.status IN ('succeeded','failed','timed_out','cancelled')"
    " ORDER BY r.eval_key, r.finished_at DESC, r.seq DESC";
static const char BASELINE_SKIPPED_SQL[] =
    "SELECT json_extract(j.value, '$.eval_key'), json_extract(j.value, '$.eval_version'),"
    " 'skipped', json_extract(j.value, '$.reason_code'), NULL, a.id, NULL, NULL, NULL, NULL,"
    " coalesce(a.planned_at, 0)"
    " FROM (SELECT seq, id, planned_at FROM assignments WHERE session_id = ?1"
    "       AND planned_at IS NOT NULL ORDER BY seq DESC LIMIT 1) a"
    " JOIN assignment_docs d ON d.seq = a.seq,"
    " json_each(CASE WHEN json_valid(d.plan_request_json) THEN d.plan_request_json"
    "           ELSE '{}' END, '$.skipped') j"
    " ORDER BY 1";

static int baseline_rows(sqlite3 *db, const char *sql, const char *session_id,
                         store_archive_baseline_run **v, size_t *len, size_t *cap, store_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(s, 1, session_id, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            const unsigned char *key = sqlite3_column_text(s, 0);
            if (!key) continue;
            int seen = 0; /* one row per eval_key: the first (newest) wins */
            for (size_t i = 0; i < *len && !seen; i++)
                seen = strcmp((*v)[i].eval_key, (const char *)key) == 0;
            if (seen) continue;
            if (*len == *cap) {
                size_t nc = *cap ? *cap * 2 : 16;
                store_archive_baseline_run *nv = realloc(*v, nc * sizeof **v);
                if (!nv) {
                    rc = SQLITE_NOMEM;
                    break;
                }
                *v = nv;
                *cap = nc;
            }
            store_archive_baseline_run *b = &(*v)[(*len)++];
            memset(b, 0, sizeof *b);
            b->eval_key = col_dup(s, 0);
            b->eval_version = col_dup(s, 1);
            b->status = col_dup(s, 2);
            b->skip_reason = col_dup(s, 3);
            b->run_id = col_dup(s, 4);
            b->assignment_id = col_dup(s, 5);
            b->summary = col_dup(s, 6);
            b->results_json = col_dup(s, 7);
            b->error_code = col_dup(s, 8);
            b->error_message = col_dup(s, 9);
            b->finished_at = sqlite3_column_double(s, 10);
        }
    }
    int code = rc == SQLITE_DONE ? STORE_OK : sqlfail(err, db, rc, "baseline");
    sqlite3_finalize(s);
    return code;
}

static int cmp_key(const void *x, const void *y)
{
    return strcmp(((const store_archive_baseline_run *)x)->eval_key,
                  ((const store_archive_baseline_run *)y)->eval_key);
}

int store_archive_baseline(store_archive *a, const char *session_id,
                           store_archive_baseline_run **out, size_t *n, store_err *err)
{
    *out = NULL;
    *n = 0;
    if (a == NULL || session_id == NULL) return aerr(err, STORE_INVALID, "baseline: no session");
    store_archive_baseline_run *v = NULL;
    size_t len = 0, cap = 0;
    pthread_mutex_lock(&a->smu);
    int code;
    sqlite3 *db = state_db(a, err, &code);
    if (db) {
        code = baseline_rows(db, BASELINE_RUNS_SQL, session_id, &v, &len, &cap, err);
        if (code == STORE_OK)
            code = baseline_rows(db, BASELINE_SKIPPED_SQL, session_id, &v, &len, &cap, err);
    }
    pthread_mutex_unlock(&a->smu);
    if (code != STORE_OK) {
        store_archive_baseline_free(v, len);
        return code;
    }
    if (len > 1) qsort(v, len, sizeof *v, cmp_key);
    *out = v;
    *n = len;
    return STORE_OK;
}
