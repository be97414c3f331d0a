/* store/store_outbox: the outbox of results waiting for the server: pending
 * entries, depth, and the outcome of each submission attempt. */
#include "store/store_int.h"

#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_outbox_pending(store *st, int64_t after_seq, int limit, store_outbox_entry **out,
                         size_t *n, store_err *err)
{
    static const char sql[] =
        "SELECT seq, submission_id, run_id, assignment_id, worker_id, lease_generation, body,"
        " attempts, created_at, last_attempt_at, last_error FROM outbox WHERE seq > ?1"
        " ORDER BY seq LIMIT ?2";
    store_flush(st, NULL); /* deferred updates first (see store.h) */
    *out = NULL;
    *n = 0;
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = SQLITE_ERROR, code = STORE_OK;
    size_t cap = 0, cnt = 0;
    store_outbox_entry *arr = NULL;
    if (!s) {
        code = st_sqlfail(err, c->db, sqlite3_errcode(c->db), "list outbox");
        goto done;
    }
    st_bind_int(s, 1, after_seq);
    st_bind_int(s, 2, limit > 0 ? limit : -1);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            arr = realloc(arr, cap * sizeof *arr);
            if (!arr) abort();
        }
        store_outbox_entry *e = &arr[cnt++];
        memset(e, 0, sizeof *e);
        e->seq = sqlite3_column_int64(s, 0);
        e->submission_id = st_col_dup(s, 1);
        e->run_id = st_col_dup(s, 2);
        e->assignment_id = st_col_dup(s, 3);
        e->worker_id = st_col_dup(s, 4);
        e->lease_generation = sqlite3_column_int64(s, 5);
        const void *b = sqlite3_column_blob(s, 6);
        e->body_len = (size_t)sqlite3_column_bytes(s, 6);
        e->body = malloc(e->body_len + 1);
        if (!e->body) abort();
        if (e->body_len) memcpy(e->body, b, e->body_len);
        e->body[e->body_len] = '\0';
        e->attempts = sqlite3_column_int(s, 7);
        e->created_at = st_col_dbl(s, 8);
        e->last_attempt_at = st_col_dbl(s, 9);
        e->last_error = st_col_dup(s, 10);
    }
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "list outbox");
        store_outbox_free(arr, cnt);
        arr = NULL;
        cnt = 0;
    }
    sqlite3_reset(s);
done:
    st_rput(st, c);
    *out = arr;
    *n = cnt;
    return code;
}

void store_outbox_free(store_outbox_entry *e, size_t n)
{
    if (!e) return;
    for (size_t i = 0; i < n; i++) {
        free(e[i].submission_id);
        free(e[i].run_id);
        free(e[i].assignment_id);
        free(e[i].worker_id);
        free(e[i].body);
        free(e[i].last_error);
    }
    free(e);
}

int store_outbox_depth(store *st, int64_t *depth, store_err *err)
{
    static const char sql[] = "SELECT count(*) FROM outbox";
    store_flush(st, NULL); /* deferred updates first (see store.h) */
    *depth = 0;
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    int code = STORE_OK;
    if (rc == SQLITE_ROW)
        *depth = sqlite3_column_int64(s, 0);
    else
        code = st_sqlfail(err, c->db, rc, "outbox depth");
    if (s) sqlite3_reset(s);
    st_rput(st, c);
    return code;
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
    int code = STORE_OK;
    sqlite3_stmt *s = st_w(st, head);
    int rc = s ? (st_bind_text(s, 1, submission_id), sqlite3_step(s)) : sqlite3_errcode(st->w.db);
    char *run_id = NULL, *assignment_id = NULL;
    int64_t attempts = 0;
    if (rc == SQLITE_ROW) {
        run_id = st_col_dup(s, 0);
        assignment_id = st_col_dup(s, 1);
        attempts = sqlite3_column_int64(s, 2);
    } else if (rc == SQLITE_DONE) {
        code = st_errf(err, STORE_NOTFOUND, "record submission: no pending submission %s",
                       submission_id);
    } else {
        code = st_sqlfail(err, st->w.db, rc, "record submission");
    }
    if (s) sqlite3_reset(s);
    if (code) goto fail;
    double at = a->at > 0 ? a->at : 0;
    s = st_w(st, hist);
    if (s) {
        st_bind_text(s, 1, run_id);
        st_bind_text(s, 2, submission_id);
        st_bind_int(s, 3, attempts + 1);
        st_bind_time(s, 4, at);
        st_bind_text(s, 5, oname);
        if (a->http_status > 0) st_bind_int(s, 6, a->http_status);
        st_bind_int(s, 7, a->duration_ms);
        st_bind_textn(s, 8, a->error_code, ST_MAX_ERR_CODE);
        st_bind_textn(s, 9, a->message, ST_MAX_ERR_MSG);
        st_bind_textn(s, 10, a->request_id, 128);
    }
    code = st_step_done(st, s, "record submission", err);
    if (code) goto fail;
    char last[ST_MAX_ERR_CODE + 512];
    if (a->outcome == STORE_SUBMIT_RETRY) {
        snprintf(last, sizeof last, "%s: %.500s",
                 a->error_code ? a->error_code
                               : (a->http_status ? "http_error" : "transport_error"),
                 a->message ? a->message : "");
        s = st_w(st, retry_outbox);
        if (s) {
            st_bind_text(s, 1, submission_id);
            st_bind_time(s, 2, at);
            st_bind_text(s, 3, last);
        }
    } else {
        s = st_w(st, del_outbox);
        if (s) st_bind_text(s, 1, submission_id);
    }
    code = st_step_done(st, s, "record submission", err);
    if (code) goto fail;
    s = st_w(st, upd_run);
    if (s) {
        st_bind_text(s, 1, run_id);
        st_bind_time(s, 2, at);
        st_bind_text(s, 3, a->outcome == STORE_SUBMIT_RETRY ? NULL : oname);
        st_bind_textn(s, 4, a->error_code, ST_MAX_ERR_CODE);
        st_bind_textn(s, 5, a->message, ST_MAX_ERR_MSG);
    }
    code = st_step_done(st, s, "record submission", err);
    if (code) goto fail;
    if (a->outcome != STORE_SUBMIT_RETRY && assignment_id) {
        rc = st_maybe_complete(st, assignment_id, time_now());
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, "record submission");
            goto fail;
        }
    }
fail:
    free(run_id);
    free(assignment_id);
    return code;
}
