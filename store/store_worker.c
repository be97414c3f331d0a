/* store/store_worker: the worker's registration (its id, server origin and
 * registration document), one row saved and loaded across restarts. */
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

int store_worker_save(store *st, const char *worker_id, const char *server_origin,
                      const char *catalog_revision, const char *catalog_json,
                      const char *response_json, double registered_at, store_err *err)
{
    static const char sql[] =
        "INSERT OR REPLACE INTO worker(id, worker_id, server_origin, catalog_revision,"
        " catalog_json, response_json, registered_at) VALUES(1, ?1, ?2, ?3, ?4, ?5, ?6)";
    if (!worker_id || !worker_id[0])
        return st_errf(err, STORE_INVALID, "save worker: worker_id is required");
    int code = st_wbegin(st, "save worker", err);
    if (code) return code;
    sqlite3_stmt *s = st_w(st, sql);
    if (s) {
        st_bind_text(s, 1, worker_id);
        st_bind_text(s, 2, server_origin);
        st_bind_text(s, 3, catalog_revision);
        st_bind_text(s, 4, catalog_json);
        st_bind_text(s, 5, response_json);
        st_bind_time(s, 6, registered_at);
    }
    code = st_step_done(st, s, "save worker", err);
    return st_wend(st, code, "save worker", err);
}

int store_worker_load(store *st, store_worker *out, store_err *err)
{
    static const char sql[] = "SELECT worker_id, server_origin, catalog_revision, catalog_json,"
                              " response_json, registered_at FROM worker WHERE id = 1";
    memset(out, 0, sizeof *out);
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    int code = STORE_OK;
    if (rc == SQLITE_ROW) {
        out->worker_id = st_col_dup(s, 0);
        out->server_origin = st_col_dup(s, 1);
        out->catalog_revision = st_col_dup(s, 2);
        out->catalog_json = st_col_dup(s, 3);
        out->response_json = st_col_dup(s, 4);
        out->registered_at = st_col_dbl(s, 5);
    } else if (rc == SQLITE_DONE) {
        code = STORE_NOTFOUND;
    } else {
        code = st_sqlfail(err, c->db, rc, "load worker");
    }
    if (s) sqlite3_reset(s);
    st_rput(st, c);
    return code;
}

void store_worker_free(store_worker *w)
{
    if (!w) return;
    free(w->worker_id);
    free(w->server_origin);
    free(w->catalog_revision);
    free(w->catalog_json);
    free(w->response_json);
    memset(w, 0, sizeof *w);
}
