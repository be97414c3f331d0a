/* store/store_vacuum: gives disk space back once retention has deleted
 * history. Databases are created with auto_vacuum=INCREMENTAL; after each
 * prune, free pages beyond a quarter of the file are released in bounded
 * steps (PRAGMA incremental_vacuum), so a database at steady state keeps its
 * size. A database created without it (auto_vacuum off) is converted in place
 * by one full VACUUM, which rewrites the whole file and holds the write lock
 * meanwhile: it needs about twice the database size free, so it runs only
 * when that much is free; otherwise it is deferred, logged with the figures,
 * and tried again after each prune.
 *
 * The write-ahead log keeps its bound through the conversion. At open,
 * before any other connection exists, the rewrite goes through a rollback
 * journal instead of the WAL (leaving WAL mode needs the only connection).
 * A conversion deferred at open runs later in the WAL, as one transaction of
 * one frame per page in use, so only if those frames fit under the WAL's
 * bound; otherwise it waits for the next start (or for pruning to make it
 * fit). */
#include "store/store_int.h"

#include "common/log.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>

/* Pages released per transaction: each step writes about as many WAL frames,
 * so the checkpoint keeps up between steps. */
#define VACUUM_STEP_PAGES 1024
#define DEFER_LOG_EVERY_MS (3600LL * 1000)
#define WAL_FRAME_HEADER 24
#define WAL_HEADER 32

enum { DEFER_SPACE = 1, DEFER_WAL = 2 };

/* An integer PRAGMA read on a pooled read connection (the writer's while the
 * pool is not open yet); -1 on error. */
static int64_t read_pragma(store *st, const char *sql)
{
    int64_t v = -1;
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    if (s && sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
    if (s) sqlite3_reset(s);
    st_rput(st, c);
    return v;
}

/* Sets the writer's journal mode; SQLITE_OK only if it is `mode` after. */
static int set_journal_mode(store *st, const char *mode)
{
    char sql[64], got[16] = "";
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", mode);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->w.db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        snprintf(got, sizeof got, "%s", (const char *)sqlite3_column_text(s, 0));
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    return rc != SQLITE_OK ? rc : strcmp(got, mode) == 0 ? SQLITE_OK : SQLITE_BUSY;
}

/* Remembers a deferral; logs it when its cause changes, else once an hour. */
static void defer(store *st, int why, int64_t db, int64_t need, int64_t have)
{
    int64_t now = time_mono_ms();
    if (!st->vacuum_pending || st->vacuum_why != why ||
        now - st->vacuum_logged_ms >= DEFER_LOG_EVERY_MS) {
        st->vacuum_logged_ms = now;
        if (why == DEFER_SPACE)
            log_warn("store: full VACUUM (to turn on incremental vacuum) deferred: not enough "
                     "free space; retried after each prune",
                     LOG_S("db", st->path), LOG_I("db_bytes", db), LOG_I("needs_free_bytes", need),
                     LOG_I("free_bytes", have));
        else
            log_warn("store: full VACUUM (to turn on incremental vacuum) deferred: rewriting the "
                     "database through the write-ahead log would pass its bound; it runs at the "
                     "next start (through a rollback journal) or once it fits",
                     LOG_S("db", st->path), LOG_I("db_bytes", db), LOG_I("wal_frames_bytes", need),
                     LOG_I("wal_bytes", have), LOG_I("wal_max_bytes", st->opt.wal_max_bytes));
    }
    st->vacuum_why = why;
    __atomic_store_n(&st->vacuum_pending, 1, __ATOMIC_RELAXED);
}

/* The VACUUM itself, under the write lock. At open (the writer is the only
 * connection) through a rollback journal, synchronous=FULL meanwhile; the
 * database is back in WAL mode after it, or *back_in_wal is 0. */
static int run_vacuum(store *st, int at_open, int *back_in_wal)
{
    *back_in_wal = 1;
    if (!at_open)
        return sqlite3_exec(st->w.db, "PRAGMA auto_vacuum=INCREMENTAL; VACUUM", NULL, NULL, NULL);
    int rc = set_journal_mode(st, "delete");
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(st->w.db,
                          "PRAGMA synchronous=FULL; PRAGMA auto_vacuum=INCREMENTAL; VACUUM", NULL,
                          NULL, NULL);
    sqlite3_exec(st->w.db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    if (set_journal_mode(st, "wal") != SQLITE_OK) *back_in_wal = 0;
    return rc;
}

static int full_vacuum(store *st, int at_open, store_err *err)
{
    static const char sql_pages[] = "PRAGMA page_count";
    int64_t pages = read_pragma(st, sql_pages);
    int64_t free_pages = read_pragma(st, "PRAGMA freelist_count");
    int64_t db = pages * st->page_size;
    int64_t need = 2 * db + st->opt.wal_max_bytes;
    int64_t avail = st_free_bytes(st);
    if (pages < 0 || free_pages < 0 || avail < need) {
        defer(st, DEFER_SPACE, db, need, avail);
        return STORE_OK;
    }
    /* one WAL frame per page in use, all in one transaction */
    int64_t frames = (pages - free_pages) * (st->page_size + WAL_FRAME_HEADER) + WAL_HEADER;
    int64_t wal = st_wal_bytes(st);
    if (!at_open && frames + wal > st->opt.wal_max_bytes) {
        defer(st, DEFER_WAL, db, frames, wal);
        return STORE_OK;
    }
    store_flush(st, NULL);
    int64_t t0 = time_mono_ms();
    pthread_mutex_lock(&st->wmu);
    int in_wal = 1;
    int rc = run_vacuum(st, at_open, &in_wal);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", rc == SQLITE_OK ? "" : sqlite3_errmsg(st->w.db));
    pthread_mutex_unlock(&st->wmu);
    if (!in_wal)
        return st_errf(err, STORE_ERROR,
                       "%s: the database did not return to WAL mode after its full VACUUM",
                       st->path);
    if (rc != SQLITE_OK) {
        __atomic_store_n(&st->vacuum_pending, 1, __ATOMIC_RELAXED);
        st->vacuum_why = 0;
        log_warn("store: full VACUUM failed; retried after the next prune", LOG_S("db", st->path),
                 LOG_S("error", msg));
        return STORE_OK;
    }
    /* Logged before the state says so: whoever sees the conversion done
     * (store_stats) finds its line. */
    log_info("store: database converted to incremental vacuum", LOG_S("db", st->path),
             LOG_I("bytes_before", db),
             LOG_I("bytes_after", read_pragma(st, sql_pages) * st->page_size),
             LOG_S("through", at_open ? "rollback journal" : "write-ahead log"),
             LOG_I("ms", time_mono_ms() - t0));
    __atomic_store_n(&st->vacuum_pending, 0, __ATOMIC_RELAXED);
    return STORE_OK;
}

int st_vacuum_at_open(store *st, store_err *err)
{
    if (read_pragma(st, "PRAGMA auto_vacuum") != 0) return STORE_OK;
    return full_vacuum(st, 1, err);
}

void st_vacuum_after_prune(store *st)
{
    if (st->memory) return;
    if (st->vacuum_pending) {
        store_err e = {0};
        if (full_vacuum(st, 0, &e) != STORE_OK)
            log_error("store: full VACUUM", LOG_S("error", e.msg));
        return;
    }
    int64_t pages = read_pragma(st, "PRAGMA page_count");
    int64_t freel = read_pragma(st, "PRAGMA freelist_count");
    if (pages <= 0 || freel < 256 || freel * 4 <= pages) return;
    static const char sql[] = "PRAGMA incremental_vacuum(1024)"; /* VACUUM_STEP_PAGES */
    store_err e = {0};
    for (int64_t excess = freel - pages / 4; excess > 0; excess -= VACUUM_STEP_PAGES) {
        if (st_wbegin(st, "incremental vacuum", &e) != STORE_OK) break;
        int rc = sqlite3_exec(st->w.db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            st_sqlfail(&e, st->w.db, rc, "incremental vacuum");
            st_wabort(st);
            break;
        }
        if (st_wcommit(st, "incremental vacuum", 0, &e) != STORE_OK) break;
    }
    if (e.msg[0]) log_warn("store: incremental vacuum failed", LOG_S("error", e.msg));
}
