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
    return st_exec_tx(st, sql, "save worker", err,
                      ST_ARGS(ST_TEXT(worker_id), ST_TEXT(server_origin), ST_TEXT(catalog_revision),
                              ST_TEXT(catalog_json), ST_TEXT(response_json),
                              ST_TIME(registered_at)));
}

static void worker_row(sqlite3_stmt *s, void *ctx)
{
    store_worker *out = ctx;
    out->worker_id = st_col_dup(s, 0);
    out->server_origin = st_col_dup(s, 1);
    out->catalog_revision = st_col_dup(s, 2);
    out->catalog_json = st_col_dup(s, 3);
    out->response_json = st_col_dup(s, 4);
    out->registered_at = st_col_dbl(s, 5);
}

int store_worker_load(store *st, store_worker *out, store_err *err)
{
    static const char sql[] = "SELECT worker_id, server_origin, catalog_revision, catalog_json,"
                              " response_json, registered_at FROM worker WHERE id = 1";
    memset(out, 0, sizeof *out);
    return st_read_one(st, sql, "load worker", err, worker_row, out, NULL, 0);
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
