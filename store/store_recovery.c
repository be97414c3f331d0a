/* store/store_recovery: what a restarted worker reads back: recoverable
 * assignments with their documents and runs, and expired ones dropped. */
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_ASSIGNMENT_COLS[] =
    "SELECT a.id, a.worker_id, a.lease_generation, a.lease_expires_at, a.status, a.session_id,"
    " a.session_revision_id, a.agent_id, a.environment, a.trigger_reason, a.event_count,"
    " a.transcript_url, a.definitions_url, d.claim_json, d.definitions_json,"
    " d.plan_request_json, d.plan_response_json, a.claimed_at"
    " FROM assignments a LEFT JOIN assignment_docs d ON d.seq = a.seq";

static const st_col ASSIGNMENT_COLS[] = {ST_COL(TEXT, store_assignment_state, assignment_id),
                                         ST_COL(TEXT, store_assignment_state, worker_id),
                                         ST_COL(INT64, store_assignment_state, lease_generation),
                                         ST_COL(DBL, store_assignment_state, lease_expires_at),
                                         ST_COL(TEXT, store_assignment_state, status),
                                         ST_COL(TEXT, store_assignment_state, session_id),
                                         ST_COL(TEXT, store_assignment_state, session_revision_id),
                                         ST_COL(TEXT, store_assignment_state, agent_id),
                                         ST_COL(TEXT, store_assignment_state, environment),
                                         ST_COL(TEXT, store_assignment_state, trigger_reason),
                                         ST_COL(INT64, store_assignment_state, event_count),
                                         ST_COL(TEXT, store_assignment_state, transcript_url),
                                         ST_COL(TEXT, store_assignment_state, definitions_url),
                                         ST_COL(TEXT, store_assignment_state, claim_json),
                                         ST_COL(TEXT, store_assignment_state, definitions_json),
                                         ST_COL(TEXT, store_assignment_state, plan_request_json),
                                         ST_COL(TEXT, store_assignment_state, plan_response_json),
                                         ST_COL(DBL, store_assignment_state, claimed_at)};
static const st_table ASSIGNMENT = ST_TABLE(store_assignment_state, ASSIGNMENT_COLS);

static const st_col RUN_COLS[] = {
    ST_COL(TEXT, store_run_state, run_id),          ST_COL(TEXT, store_run_state, eval_key),
    ST_COL(TEXT, store_run_state, eval_version),    ST_COL(TEXT, store_run_state, execution_mode),
    ST_COL(TEXT, store_run_state, descriptor_json), ST_COL(DBL, store_run_state, timeout_seconds),
    ST_COL(TEXT, store_run_state, status),          ST_COL(TEXT, store_run_state, submit_status)};
static const st_table RUN = ST_TABLE(store_run_state, RUN_COLS);

static int load_runs(sconn *c, store_assignment_state *a, store_err *err)
{
    static const char sql[] =
        "SELECT r.id, r.eval_key, r.eval_version, r.execution_mode, d.descriptor_json,"
        " r.timeout_seconds, r.status, r.submit_status FROM runs r"
        " LEFT JOIN run_docs d ON d.seq = r.seq WHERE r.assignment_id = ?1 ORDER BY r.seq";
    st_vec v = {.t = &RUN};
    int code =
        st_query(c, sql, "load runs", err, st_row_push, &v, ST_ARGS(ST_TEXT(a->assignment_id)));
    a->runs = v.items;
    a->n_runs = v.n;
    return code;
}

void store_assignment_state_free(store_assignment_state *a)
{
    if (!a) return;
    st_cols_free(&ASSIGNMENT, a);
    st_rows_free(&RUN, a->runs, a->n_runs);
    memset(a, 0, sizeof *a);
}

void store_assignments_free(store_assignment_state *a, size_t n)
{
    if (!a) return;
    for (size_t i = 0; i < n; i++)
        store_assignment_state_free(&a[i]);
    free(a);
}

static char SQL_RECOVERABLE[1024];
static char SQL_ONE_ASSIGNMENT[1024];
static pthread_once_t sql_once = PTHREAD_ONCE_INIT;

static void build_sql(void)
{
    snprintf(SQL_RECOVERABLE, sizeof SQL_RECOVERABLE,
             "%s WHERE a.status IN " ST_ACTIVE_SQL " AND a.lease_expires_at > ?1 ORDER BY a.seq",
             SQL_ASSIGNMENT_COLS);
    snprintf(SQL_ONE_ASSIGNMENT, sizeof SQL_ONE_ASSIGNMENT, "%s WHERE a.id = ?1",
             SQL_ASSIGNMENT_COLS);
}

int store_recoverable_assignments(store *st, double now, double margin_s,
                                  store_assignment_state **out, size_t *n, store_err *err)
{
    store_flush(st, NULL); /* deferred updates first (see store.h) */
    pthread_once(&sql_once, build_sql);
    *out = NULL;
    *n = 0;
    sconn *c = st_rget(st);
    /* One read transaction: the assignments and their runs from one snapshot. */
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    st_vec v = {.t = &ASSIGNMENT};
    int code = st_query(c, SQL_RECOVERABLE, "list recoverable assignments", err, st_row_push, &v,
                        ST_ARGS(ST_DBL(now + margin_s)));
    store_assignment_state *arr = v.items;
    for (size_t i = 0; i < v.n && code == STORE_OK; i++)
        code = load_runs(c, &arr[i], err);
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    if (code) {
        store_assignments_free(arr, v.n);
        return code;
    }
    *out = arr;
    *n = v.n;
    return STORE_OK;
}

int store_assignment_load(store *st, const char *assignment_id, store_assignment_state *out,
                          store_err *err)
{
    store_flush(st, NULL); /* deferred updates first (see store.h) */
    pthread_once(&sql_once, build_sql);
    memset(out, 0, sizeof *out);
    if (!assignment_id) return st_errf(err, STORE_INVALID, "load assignment: no id");
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    int code = st_query_one(c, SQL_ONE_ASSIGNMENT, "load assignment", err, st_row_into,
                            &(st_into){&ASSIGNMENT, out}, ST_ARGS(ST_TEXT(assignment_id)));
    if (code == STORE_OK) code = load_runs(c, out, err);
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    if (code < 0) store_assignment_state_free(out);
    return code;
}

int store_drop_expired(store *st, double now, double margin_s, size_t *n_dropped, store_err *err)
{
    static const char runs_sql[] =
        "UPDATE runs SET status = 'abandoned' WHERE status IN ('planned','running')"
        " AND submit_status = 'none' AND assignment_id IN (SELECT id FROM assignments"
        " WHERE status IN " ST_ACTIVE_SQL " AND lease_expires_at <= ?1)";
    static const char asg_sql[] =
        "UPDATE assignments SET status = 'dropped', finished_at = ?2, error_code = 'lease_expired',"
        " error_message = 'the lease expired before the work could resume'"
        " WHERE status IN " ST_ACTIVE_SQL " AND lease_expires_at <= ?1";
    if (n_dropped) *n_dropped = 0;
    int code = st_wbegin(st, "drop expired assignments", err);
    if (code) return code;
    code = st_exec(st, runs_sql, "drop expired assignments", err, ST_ARGS(ST_DBL(now + margin_s)));
    if (code) goto fail;
    code = st_exec(st, asg_sql, "drop expired assignments", err,
                   ST_ARGS(ST_DBL(now + margin_s), ST_DBL(now)));
    if (code) goto fail;
    size_t dropped = (size_t)sqlite3_changes(st->w.db);
    code = st_wcommit(st, "drop expired assignments", 0, err);
    if (code == STORE_OK && n_dropped) *n_dropped = dropped;
    return code;
fail:
    st_wabort(st);
    return code;
}
