/* store/store_local: local evaluator registrations (put, heartbeat, delete,
 * list), kept so that a restart knows its local evaluators. */
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

int store_evaluator_put(store *st, const char *name, const char *registration_json,
                        double ttl_seconds, double now, store_err *err)
{
    static const char sql[] =
        "INSERT OR REPLACE INTO evaluators(name, registration_json, ttl_seconds, registered_at,"
        " heartbeat_at, expires_at) VALUES(?1, ?2, ?3, ?4, ?4, ?5)";
    if (!name || !name[0] || !registration_json)
        return st_errf(err, STORE_INVALID, "save evaluator: name and registration are required");
    int code = st_wbegin(st, "save evaluator", err);
    if (code) return code;
    sqlite3_stmt *s = st_w(st, sql);
    if (s) {
        st_bind_text(s, 1, name);
        st_bind_text(s, 2, registration_json);
        st_bind_dbl(s, 3, ttl_seconds > 0 ? ttl_seconds : 0);
        st_bind_dbl(s, 4, now);
        st_bind_dbl(s, 5, ttl_seconds > 0 ? now + ttl_seconds : 0);
    }
    code = st_step_done(st, s, "save evaluator", err);
    return st_wend(st, code, "save evaluator", err);
}

static int evaluator_update(store *st, const char *sql, const char *name, double now,
                            const char *op, store_err *err)
{
    if (!name) return st_errf(err, STORE_INVALID, "%s: no name", op);
    int code = st_wbegin(st, op, err);
    if (code) return code;
    sqlite3_stmt *s = st_w(st, sql);
    if (s) {
        st_bind_text(s, 1, name);
        st_bind_dbl(s, 2, now);
    }
    code = st_step_done(st, s, op, err);
    if (code) {
        st_wabort(st);
        return code;
    }
    int changed = sqlite3_changes(st->w.db);
    code = st_wcommit(st, op, 0, err);
    if (code == STORE_OK && changed == 0) return STORE_NOTFOUND;
    return code;
}

int store_evaluator_heartbeat(store *st, const char *name, double now, store_err *err)
{
    static const char sql[] =
        "UPDATE evaluators SET heartbeat_at = ?2, expires_at = CASE WHEN ttl_seconds > 0"
        " THEN ?2 + ttl_seconds ELSE 0 END WHERE name = ?1";
    return evaluator_update(st, sql, name, now, "evaluator heartbeat", err);
}

int store_evaluator_delete(store *st, const char *name, store_err *err)
{
    static const char sql[] = "DELETE FROM evaluators WHERE name = ?1 AND ?2 IS NOT NULL";
    return evaluator_update(st, sql, name, 0, "delete evaluator", err);
}

int store_evaluator_list(store *st, store_evaluator **out, size_t *n, store_err *err)
{
    static const char sql[] = "SELECT name, registration_json, ttl_seconds, registered_at,"
                              " heartbeat_at, expires_at FROM evaluators ORDER BY name";
    *out = NULL;
    *n = 0;
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    store_evaluator *arr = NULL;
    size_t cap = 0, cnt = 0;
    int rc = s ? SQLITE_OK : sqlite3_errcode(c->db), code = STORE_OK;
    if (s) {
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            if (cnt == cap) {
                cap = cap ? cap * 2 : 8;
                arr = realloc(arr, cap * sizeof *arr);
                if (!arr) abort();
            }
            store_evaluator *e = &arr[cnt++];
            e->name = st_col_dup(s, 0);
            e->registration_json = st_col_dup(s, 1);
            e->ttl_seconds = st_col_dbl(s, 2);
            e->registered_at = st_col_dbl(s, 3);
            e->heartbeat_at = st_col_dbl(s, 4);
            e->expires_at = st_col_dbl(s, 5);
        }
        sqlite3_reset(s);
    }
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "list evaluators");
        store_evaluators_free(arr, cnt);
        arr = NULL;
        cnt = 0;
    }
    st_rput(st, c);
    *out = arr;
    *n = cnt;
    return code;
}

void store_evaluators_free(store_evaluator *e, size_t n)
{
    if (!e) return;
    for (size_t i = 0; i < n; i++) {
        free(e[i].name);
        free(e[i].registration_json);
    }
    free(e);
}
