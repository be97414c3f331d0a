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

static const st_col WORKER_COLS[] = {
    ST_COL(TEXT, store_worker, worker_id),        ST_COL(TEXT, store_worker, server_origin),
    ST_COL(TEXT, store_worker, catalog_revision), ST_COL(TEXT, store_worker, catalog_json),
    ST_COL(TEXT, store_worker, response_json),    ST_COL(DBL, store_worker, registered_at)};
static const st_table WORKER = ST_TABLE(store_worker, WORKER_COLS);

int store_worker_load(store *st, store_worker *out, store_err *err)
{
    static const char sql[] = "SELECT worker_id, server_origin, catalog_revision, catalog_json,"
                              " response_json, registered_at FROM worker WHERE id = 1";
    memset(out, 0, sizeof *out);
    return st_read_one(st, sql, "load worker", err, st_row_into, &(st_into){&WORKER, out}, NULL, 0);
}

void store_worker_free(store_worker *w)
{
    if (!w) return;
    st_cols_free(&WORKER, w);
    memset(w, 0, sizeof *w);
}
