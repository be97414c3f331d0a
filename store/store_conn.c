/* store/store_conn: a connection's statement cache (statements keyed by the
 * address of their static SQL text) and the read pool the admin API's queries
 * borrow connections from. */
#include "store/store_int.h"

#include "common/timeutil.h"

#include <stdint.h>

/* ---------------------------------------------------------- statement cache */

sqlite3_stmt *st_stmt(sconn *c, const char *sql)
{
    uintptr_t h = ((uintptr_t)sql >> 3) * 2654435761u;
    for (int i = 0; i < SCACHE_SLOTS; i++) {
        int slot = (int)((h + (uintptr_t)i) % SCACHE_SLOTS);
        if (c->keys[slot] == sql) {
            __atomic_store_n(&c->last_sql, sql, __ATOMIC_RELAXED);
            sqlite3_stmt *s = c->stmts[slot];
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            return s;
        }
        if (c->keys[slot] == NULL) {
            sqlite3_stmt *s = NULL;
            if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) !=
                SQLITE_OK)
                return NULL;
            c->keys[slot] = sql;
            c->stmts[slot] = s;
            __atomic_store_n(&c->last_sql, sql, __ATOMIC_RELAXED);
            return s;
        }
    }
    return NULL; /* cache full: a programming error, reported as an SQLite error */
}

void st_finalize_all(sconn *c)
{
    for (int i = 0; i < SCACHE_SLOTS; i++) {
        if (c->stmts[i]) sqlite3_finalize(c->stmts[i]);
        c->stmts[i] = NULL;
        c->keys[i] = NULL;
    }
}

int st_step_done(store *st, sqlite3_stmt *s, const char *op, store_err *err)
{
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(st->w.db);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        if (s) sqlite3_reset(s);
        return STORE_OK;
    }
    int code = st_sqlfail(err, st->w.db, rc, op);
    if (s) sqlite3_reset(s);
    return code;
}

sqlite3_stmt *st_w(store *st, const char *sql)
{
    return st_stmt(&st->w, sql);
}

/* ------------------------------------------------------------- read pool */

sconn *st_rget(store *st)
{
    if (st->nreaders == 0) {
        pthread_mutex_lock(&st->wmu);
        return &st->w;
    }
    pthread_mutex_lock(&st->rmu);
    for (;;) {
        for (int i = 0; i < st->nreaders; i++) {
            if (!st->readers[i].in_use) {
                st->readers[i].in_use = 1;
                st->readers[i].since_ms = time_mono_ms();
                pthread_mutex_unlock(&st->rmu);
                return &st->readers[i];
            }
        }
        pthread_cond_wait(&st->rcv, &st->rmu);
    }
}

void st_rput(store *st, sconn *c)
{
    /* No snapshot outlives the request: a statement left stepping would keep
     * its read transaction open, and the checkpoint could never pass it. */
    for (sqlite3_stmt *s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s))
        if (sqlite3_stmt_busy(s)) sqlite3_reset(s);
    if (c == &st->w) {
        pthread_mutex_unlock(&st->wmu);
        return;
    }
    pthread_mutex_lock(&st->rmu);
    c->in_use = 0;
    pthread_cond_signal(&st->rcv);
    pthread_mutex_unlock(&st->rmu);
}

void store_release_memory(store *st)
{
    if (st == NULL) return;
    pthread_mutex_lock(&st->wmu);
    sqlite3_db_release_memory(st->w.db);
    pthread_mutex_unlock(&st->wmu);
    for (int i = 0; i < st->nreaders; i++) {
        pthread_mutex_lock(&st->rmu);
        int mine = !st->readers[i].in_use;
        if (mine) st->readers[i].in_use = 1;
        pthread_mutex_unlock(&st->rmu);
        if (!mine) continue;
        sqlite3_db_release_memory(st->readers[i].db);
        st_rput(st, &st->readers[i]);
    }
}
