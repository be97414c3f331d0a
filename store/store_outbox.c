/* store/store_outbox: the outbox of results waiting for the server: pending
 * entries, depth, and the outcome of each submission attempt. */
#include "store/store_int.h"

#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const st_col ENTRY_COLS[] = {ST_COL(INT64, store_outbox_entry, seq),
                                    ST_COL(TEXT, store_outbox_entry, submission_id),
                                    ST_COL(TEXT, store_outbox_entry, run_id),
                                    ST_COL(TEXT, store_outbox_entry, assignment_id),
                                    ST_COL(TEXT, store_outbox_entry, worker_id),
                                    ST_COL(INT64, store_outbox_entry, lease_generation),
                                    ST_COL_BLOB(store_outbox_entry, body, body_len),
                                    ST_COL(INT, store_outbox_entry, attempts),
                                    ST_COL(DBL, store_outbox_entry, created_at),
                                    ST_COL(DBL, store_outbox_entry, last_attempt_at),
                                    ST_COL(TEXT, store_outbox_entry, last_error)};
static const st_table ENTRY = ST_TABLE(store_outbox_entry, ENTRY_COLS);

int store_outbox_pending(store *st, int64_t after_seq, int limit, store_outbox_entry **out,
                         size_t *n, store_err *err)
{
    static const char sql[] =
        "SELECT seq, submission_id, run_id, assignment_id, worker_id, lease_generation, body,"
        " attempts, created_at, last_attempt_at, last_error FROM outbox WHERE seq > ?1"
        " ORDER BY seq LIMIT ?2";
    store_flush(st, NULL); /* deferred updates first (see store.h) */
    st_vec v = {.t = &ENTRY};
    int code = st_read_all(st, sql, "list outbox", err, &v,
                           ST_ARGS(ST_INT(after_seq), ST_INT(limit > 0 ? limit : -1)));
    *out = v.items;
    *n = v.n;
    return code;
}

void store_outbox_free(store_outbox_entry *e, size_t n)
{
    st_rows_free(&ENTRY, e, n);
}

int store_outbox_depth(store *st, int64_t *depth, store_err *err)
{
    static const char sql[] = "SELECT count(*) FROM outbox";
    store_flush(st, NULL); /* deferred updates first (see store.h) */
    *depth = 0;
    return st_read_one(st, sql, "outbox depth", err, st_row_int64, depth, NULL, 0);
}

const char *st_outcome_name(store_submit_outcome o)
{
    switch (o) {
    case STORE_SUBMIT_COMMITTED:
        return "committed";
    case STORE_SUBMIT_REPLAYED:
        return "replayed";
    case STORE_SUBMIT_RETRY:
        return "retry";
    case STORE_SUBMIT_REJECTED:
        return "rejected";
    }
    return NULL;
}

/* The outbox entry a submission attempt is recorded against (owned). */
typedef struct {
    char *run_id, *assignment_id;
    int64_t attempts;
} pending_head;

static void head_row(sqlite3_stmt *s, void *ctx)
{
    pending_head *h = ctx;
    h->run_id = st_col_dup(s, 0);
    h->assignment_id = st_col_dup(s, 1);
    h->attempts = sqlite3_column_int64(s, 2);
}

int st_record_tx(store *st, const char *submission_id, const store_attempt *a, store_err *err)
{
    static const char head[] = "SELECT o.run_id, o.assignment_id, r.attempts FROM outbox o"
                               " LEFT JOIN runs r ON r.id = o.run_id WHERE o.submission_id = ?1";
    static const char hist[] =
        "INSERT INTO submit_attempts(run_id, submission_id, attempt, at, outcome, http_status,"
        " duration_ms, error_code, message, request_id)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    static const char retry_outbox[] =
        "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = ?2, last_error = ?3"
        " WHERE submission_id = ?1";
    static const char del_outbox[] = "DELETE FROM outbox WHERE submission_id = ?1";
    static const char upd_run[] =
        "UPDATE runs SET attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at,"
        " ?2), last_attempt_at = ?2, submit_status = COALESCE(?3, submit_status),"
        " submit_error_code = CASE WHEN ?3 = 'rejected' THEN ?4 ELSE submit_error_code END,"
        " submit_error_message = CASE WHEN ?3 = 'rejected' THEN ?5 ELSE submit_error_message END"
        " WHERE id = ?1";
    const char *oname = st_outcome_name(a->outcome);
    pending_head h = {0};
    int code = st_query_one(&st->w, head, "record submission", err, head_row, &h,
                            ST_ARGS(ST_TEXT(submission_id)));
    if (code == STORE_NOTFOUND)
        code = st_errf(err, STORE_NOTFOUND, "record submission: no pending submission %s",
                       submission_id);
    if (code) goto fail;
    double at = a->at > 0 ? a->at : 0;
    code = st_exec(st, hist, "record submission", err,
                   ST_ARGS(ST_TEXT(h.run_id), ST_TEXT(submission_id), ST_INT(h.attempts + 1),
                           ST_TIME(at), ST_TEXT(oname),
                           a->http_status > 0 ? ST_INT(a->http_status) : ST_NULL,
                           ST_INT(a->duration_ms), ST_TEXTN(a->error_code, ST_MAX_ERR_CODE),
                           ST_TEXTN(a->message, ST_MAX_ERR_MSG), ST_TEXTN(a->request_id, 128)));
    if (code) goto fail;
    char last[ST_MAX_ERR_CODE + 512];
    if (a->outcome == STORE_SUBMIT_RETRY) {
        snprintf(last, sizeof last, "%s: %.500s",
                 a->error_code ? a->error_code
                               : (a->http_status ? "http_error" : "transport_error"),
                 a->message ? a->message : "");
        code = st_exec(st, retry_outbox, "record submission", err,
                       ST_ARGS(ST_TEXT(submission_id), ST_TIME(at), ST_TEXT(last)));
    } else {
        code = st_exec(st, del_outbox, "record submission", err, ST_ARGS(ST_TEXT(submission_id)));
    }
    if (code) goto fail;
    code = st_exec(st, upd_run, "record submission", err,
                   ST_ARGS(ST_TEXT(h.run_id), ST_TIME(at),
                           ST_TEXT(a->outcome == STORE_SUBMIT_RETRY ? NULL : oname),
                           ST_TEXTN(a->error_code, ST_MAX_ERR_CODE),
                           ST_TEXTN(a->message, ST_MAX_ERR_MSG)));
    if (code) goto fail;
    if (a->outcome != STORE_SUBMIT_RETRY && h.assignment_id) {
        int rc = st_maybe_complete(st, h.assignment_id, time_now());
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, "record submission");
            goto fail;
        }
    }
fail:
    free(h.run_id);
    free(h.assignment_id);
    return code;
}
