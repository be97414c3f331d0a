/* store/store_write: the write discipline (one write transaction at a time on
 * the writer connection, deferred updates drained first) and group-committed
 * durability (one fdatasync of the WAL covers every commit before it). */
#include "store/store_int.h"

#include "common/timeutil.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------- write discipline */

static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";

static int exec_cached(sconn *c, const char *sql)
{
    sqlite3_stmt *s = st_stmt(c, sql);
    if (!s) return sqlite3_errcode(c->db) ? sqlite3_errcode(c->db) : SQLITE_ERROR;
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* The open write transaction, for naming a checkpoint's blocker. */
static void w_mark(store *st, const char *op)
{
    __atomic_store_n(&st->w_op, op, __ATOMIC_RELAXED);
    __atomic_store_n(&st->w_since_ms, op ? time_mono_ms() : 0, __ATOMIC_RELAXED);
}

int st_wbegin(store *st, const char *op, store_err *err)
{
    st_wal_bound_wait(st);
    pthread_mutex_lock(&st->wmu);
    int rc = exec_cached(&st->w, SQL_BEGIN);
    if (rc != SQLITE_OK) {
        int code = st_sqlfail(err, st->w.db, rc, op);
        st_note_write_status(st, code);
        pthread_mutex_unlock(&st->wmu);
        return code;
    }
    w_mark(st, op);
    /* Queued updates first: they happened before this one. */
    st_drain_deferred(st);
    return STORE_OK;
}

void st_wabort(store *st)
{
    /* The last error on the writer is the one that made the caller give up. */
    int rc = sqlite3_errcode(st->w.db);
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
        st_note_write_status(st, st_map_rc(st->w.db, rc));
    if (!sqlite3_get_autocommit(st->w.db)) exec_cached(&st->w, SQL_ROLLBACK);
    w_mark(st, NULL);
    st_deferred_done(st, 0);
    pthread_mutex_unlock(&st->wmu);
}

/* Group commit: every durable commit takes a ticket; one fdatasync of the WAL
 * covers every commit that finished before it started, so threads finishing
 * runs at the same moment share one disk flush. */
static int durable_wait(store *st, uint64_t ticket, store_err *err)
{
    if (st->wal_fd < 0 || st->opt.durability_process_only) return STORE_OK;
    int code = STORE_OK;
    pthread_mutex_lock(&st->sync_mu);
    if (st->synced_seq < ticket) {
        uint64_t target = __atomic_load_n(&st->commit_seq, __ATOMIC_ACQUIRE);
        if (fdatasync(st->wal_fd) != 0) {
            int e = errno;
            code = st_errf(err, e == ENOSPC || e == EDQUOT ? STORE_FULL : STORE_ERROR,
                           "fdatasync of the write-ahead log failed: %s", strerror(e));
            st_note_write_status(st, code);
        } else {
            st->synced_seq = target;
        }
    }
    pthread_mutex_unlock(&st->sync_mu);
    return code;
}

int store_durable_wait(store *st, uint64_t ticket, store_err *err)
{
    return durable_wait(st, ticket, err);
}

int st_wcommit(store *st, const char *op, int durable, store_err *err)
{
    uint64_t ticket = 0;
    int code = st_wcommit_ticket(st, op, &ticket, err);
    if (code == STORE_OK && durable) return durable_wait(st, ticket, err);
    return code;
}

int st_wend(store *st, int code, const char *op, store_err *err)
{
    if (code == STORE_OK) return st_wcommit(st, op, 0, err);
    st_wabort(st);
    return code;
}

int st_wcommit_ticket(store *st, const char *op, uint64_t *ticket, store_err *err)
{
    int rc = exec_cached(&st->w, SQL_COMMIT);
    if (rc != SQLITE_OK) {
        int code = st_sqlfail(err, st->w.db, rc, op);
        st_note_write_status(st, code);
        if (!sqlite3_get_autocommit(st->w.db)) exec_cached(&st->w, SQL_ROLLBACK);
        w_mark(st, NULL);
        st_deferred_done(st, 0);
        pthread_mutex_unlock(&st->wmu);
        return code;
    }
    w_mark(st, NULL);
    st_deferred_done(st, 1);
    *ticket = __atomic_add_fetch(&st->commit_seq, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&st->wmu);
    return STORE_OK;
}
