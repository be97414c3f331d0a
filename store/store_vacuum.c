/* store/store_vacuum: gives disk space back once retention has deleted
 * history. Databases are created with auto_vacuum=INCREMENTAL; after each
 * prune, free pages beyond a quarter of the file are released in bounded
 * steps (PRAGMA incremental_vacuum), so a database at steady state keeps its
 * size. A database created without it (auto_vacuum off) is converted in place
 * by one full VACUUM, which rewrites the whole file through the WAL and holds
 * the write lock meanwhile: it needs about twice the database size free, so it
 * runs only when that much is free; otherwise it is deferred, logged with the
 * figures, and tried again after the next prune. */
#include "store/store_int.h"

#include "common/log.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>

/* Pages released per transaction: each step writes about as many WAL frames,
 * so the checkpoint keeps up between steps. */
#define VACUUM_STEP_PAGES 1024
#define DEFER_LOG_EVERY_MS (3600LL * 1000)

/* An integer PRAGMA read on a pooled read connection; -1 on error. */
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

static void full_vacuum(store *st)
{
    static const char sql_pages[] = "PRAGMA page_count";
    int64_t db = read_pragma(st, sql_pages) * st->page_size;
    int64_t need = 2 * db + st->opt.wal_max_bytes;
    int64_t avail = st_free_bytes(st);
    if (db < 0 || avail < need) {
        int64_t now = time_mono_ms();
        if (!st->vacuum_pending || now - st->vacuum_logged_ms >= DEFER_LOG_EVERY_MS) {
            st->vacuum_logged_ms = now;
            log_warn("store: full VACUUM (to turn on incremental vacuum) deferred: not enough "
                     "free space; retried after each prune",
                     LOG_S("db", st->path), LOG_I("db_bytes", db), LOG_I("needs_free_bytes", need),
                     LOG_I("free_bytes", avail));
        }
        st->vacuum_pending = 1;
        return;
    }
    store_flush(st, NULL);
    int64_t t0 = time_mono_ms();
    pthread_mutex_lock(&st->wmu);
    int rc = sqlite3_exec(st->w.db, "PRAGMA auto_vacuum=INCREMENTAL; VACUUM", NULL, NULL, NULL);
    const char *why = rc == SQLITE_OK ? NULL : sqlite3_errmsg(st->w.db);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", why ? why : "");
    pthread_mutex_unlock(&st->wmu);
    if (rc != SQLITE_OK) {
        st->vacuum_pending = 1;
        log_warn("store: full VACUUM failed; retried after the next prune", LOG_S("db", st->path),
                 LOG_S("error", msg));
        return;
    }
    st->vacuum_pending = 0;
    log_info("store: database converted to incremental vacuum", LOG_S("db", st->path),
             LOG_I("bytes_before", db),
             LOG_I("bytes_after", read_pragma(st, sql_pages) * st->page_size),
             LOG_I("ms", time_mono_ms() - t0));
}

void st_vacuum_at_open(store *st)
{
    if (read_pragma(st, "PRAGMA auto_vacuum") == 0) full_vacuum(st);
}

void st_vacuum_after_prune(store *st)
{
    if (st->memory) return;
    if (st->vacuum_pending) {
        full_vacuum(st);
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
