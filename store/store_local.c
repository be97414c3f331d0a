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
    return st_exec_tx(st, sql, "save evaluator", err,
                      ST_ARGS(ST_TEXT(name), ST_TEXT(registration_json),
                              ST_DBL(ttl_seconds > 0 ? ttl_seconds : 0), ST_DBL(now),
                              ST_DBL(ttl_seconds > 0 ? now + ttl_seconds : 0)));
}

static int evaluator_update(store *st, const char *sql, const char *name, double now,
                            const char *op, store_err *err)
{
    if (!name) return st_errf(err, STORE_INVALID, "%s: no name", op);
    int code = st_wbegin(st, op, err);
    if (code) return code;
    code = st_exec(st, sql, op, err, ST_ARGS(ST_TEXT(name), ST_DBL(now)));
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

static const st_col EVALUATOR_COLS[] = {
    ST_COL(TEXT, store_evaluator, name),        ST_COL(TEXT, store_evaluator, registration_json),
    ST_COL(DBL, store_evaluator, ttl_seconds),  ST_COL(DBL, store_evaluator, registered_at),
    ST_COL(DBL, store_evaluator, heartbeat_at), ST_COL(DBL, store_evaluator, expires_at)};
static const st_table EVALUATOR = ST_TABLE(store_evaluator, EVALUATOR_COLS);

int store_evaluator_list(store *st, store_evaluator **out, size_t *n, store_err *err)
{
    static const char sql[] = "SELECT name, registration_json, ttl_seconds, registered_at,"
                              " heartbeat_at, expires_at FROM evaluators ORDER BY name";
    st_vec v = {.t = &EVALUATOR};
    int code = st_read_all(st, sql, "list evaluators", err, &v, NULL, 0);
    *out = v.items;
    *n = v.n;
    return code;
}

void store_evaluators_free(store_evaluator *e, size_t n)
{
    st_rows_free(&EVALUATOR, e, n);
}
