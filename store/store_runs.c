/* store/store_runs: runs marked started and run results; a result is committed
 * with its outbox row in one durable transaction, never deferred. */
#include "store/store_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const RESULT_STATUSES[] = {"succeeded", "failed", "timed_out", "cancelled",
                                              NULL};

int st_started_tx(store *st, const char *const *run_ids, size_t n, double now, size_t *changed,
                  store_err *err)
{
    static const char sql[] =
        "UPDATE runs SET status = 'running', started_at = ?2, finished_at = NULL,"
        " duration_ms = NULL, summary = NULL, error_code = NULL,"
        " error_message = NULL WHERE id = ?1 AND status IN ('planned','running','abandoned')"
        " AND submit_status = 'none'";
    static const char clear_results[] =
        "UPDATE run_docs SET results_json = NULL WHERE results_json IS NOT NULL"
        " AND seq = (SELECT seq FROM runs WHERE id = ?1)";
    *changed = 0;
    for (size_t i = 0; i < n; i++) {
        if (!run_ids[i]) continue;
        sqlite3_stmt *s = st_w(st, sql);
        if (s) {
            st_bind_text(s, 1, run_ids[i]);
            st_bind_dbl(s, 2, now);
        }
        int code = st_step_done(st, s, "start runs", err);
        if (code) return code;
        int c = sqlite3_changes(st->w.db);
        *changed += (size_t)c;
        if (c > 0) {
            s = st_w(st, clear_results);
            if (s) st_bind_text(s, 1, run_ids[i]);
            code = st_step_done(st, s, "start runs", err);
            if (code) return code;
        }
    }
    return STORE_OK;
}

static int finish_one(store *st, const store_run_result *r, store_err *err)
{
    static const char head[] = "SELECT submit_status FROM runs WHERE id = ?1";
    static const char upd[] =
        "UPDATE runs SET status = ?2, started_at = ?3, finished_at = ?4, duration_ms = ?5,"
        " summary = ?6, error_code = ?8, error_message = ?9,"
        " submission_id = ?10, worker_id = ?11, lease_generation = ?12,"
        " submit_status = 'pending', submit_error_code = NULL, submit_error_message = NULL,"
        " attempts = 0, first_attempt_at = NULL, last_attempt_at = NULL, body_bytes = ?13"
        " WHERE id = ?1";
    static const char ins[] =
        "INSERT INTO outbox(submission_id, run_id, assignment_id, worker_id, lease_generation,"
        " body, created_at) SELECT ?1, ?2, assignment_id, ?3, ?4, ?5, ?6 FROM runs WHERE id = ?2";
    static const char res_doc[] =
        "INSERT INTO run_docs(seq, results_json) SELECT seq, ?2 FROM runs WHERE id = ?1"
        " ON CONFLICT(seq) DO UPDATE SET results_json = excluded.results_json";
    static const char stat[] = "INSERT INTO minute_stats(minute, status, count) VALUES(?1, ?2, 1)"
                               " ON CONFLICT(minute, status) DO UPDATE SET count = count + 1";
    static const char lat[] = "INSERT INTO minute_latency(minute, bucket, count) VALUES(?1, ?2, 1)"
                              " ON CONFLICT(minute, bucket) DO UPDATE SET count = count + 1";
    if (!r->run_id || !r->submission_id || !r->submission_id[0] || !r->worker_id || !r->body ||
        r->body_len == 0 || r->lease_generation <= 0)
        return st_errf(err, STORE_INVALID,
                       "save result: run_id, submission_id, worker_id, lease_generation and a "
                       "non-empty body are required");
    if (!st_is_one_of(r->status, RESULT_STATUSES))
        return st_errf(err, STORE_INVALID,
                       "save result: status must be succeeded, failed, timed_out or cancelled");
    sqlite3_stmt *s = st_w(st, head);
    int rc = s ? (st_bind_text(s, 1, r->run_id), sqlite3_step(s)) : sqlite3_errcode(st->w.db);
    int code = STORE_OK;
    if (rc == SQLITE_ROW) {
        const char *ss = (const char *)sqlite3_column_text(s, 0);
        if (!ss || strcmp(ss, "none") != 0)
            code = st_errf(err, STORE_CONFLICT,
                           "save result: run %s already has a result (submission %s)", r->run_id,
                           ss ? ss : "?");
    } else if (rc == SQLITE_DONE) {
        code = st_errf(err, STORE_NOTFOUND, "save result: unknown run %s", r->run_id);
    } else {
        code = st_sqlfail(err, st->w.db, rc, "save result");
    }
    if (s) sqlite3_reset(s);
    if (code) return code;
    s = st_w(st, upd);
    if (s) {
        st_bind_text(s, 1, r->run_id);
        st_bind_text(s, 2, r->status);
        st_bind_time(s, 3, r->started_at);
        st_bind_time(s, 4, r->finished_at);
        st_bind_int(s, 5, r->duration_ms);
        st_bind_text(s, 6, r->summary);
        st_bind_textn(s, 8, r->error_code, ST_MAX_ERR_CODE);
        st_bind_textn(s, 9, r->error_message, ST_MAX_ERR_MSG);
        st_bind_text(s, 10, r->submission_id);
        st_bind_text(s, 11, r->worker_id);
        st_bind_int(s, 12, r->lease_generation);
        st_bind_int(s, 13, (int64_t)r->body_len);
    }
    code = st_step_done(st, s, "save result", err);
    if (code) return code;
    if (r->results_json) {
        s = st_w(st, res_doc);
        if (s) {
            st_bind_text(s, 1, r->run_id);
            st_bind_text(s, 2, r->results_json);
        }
        code = st_step_done(st, s, "save result", err);
        if (code) return code;
    }
    s = st_w(st, ins);
    if (s) {
        st_bind_text(s, 1, r->submission_id);
        st_bind_text(s, 2, r->run_id);
        st_bind_text(s, 3, r->worker_id);
        st_bind_int(s, 4, r->lease_generation);
        sqlite3_bind_blob64(s, 5, r->body, r->body_len, SQLITE_STATIC);
        st_bind_dbl(s, 6, r->finished_at > 0 ? r->finished_at : 0);
    }
    code = st_step_done(st, s, "save result", err);
    if (code == STORE_CONFLICT)
        return st_errf(err, STORE_CONFLICT, "save result: submission_id %s is already used",
                       r->submission_id);
    if (code) return code;
    int64_t minute = (int64_t)floor((r->finished_at > 0 ? r->finished_at : 0) / 60.0);
    s = st_w(st, stat);
    if (s) {
        st_bind_int(s, 1, minute);
        st_bind_text(s, 2, r->status);
    }
    code = st_step_done(st, s, "save result", err);
    if (code) return code;
    s = st_w(st, lat);
    if (s) {
        st_bind_int(s, 1, minute);
        st_bind_int(s, 2, st_latency_bucket(r->duration_ms));
    }
    return st_step_done(st, s, "save result", err);
}

static int finish_many(store *st, const store_run_result *r, size_t n, uint64_t *ticket,
                       store_err *err)
{
    *ticket = 0;
    if (n == 0) return STORE_OK;
    int code = st_wbegin(st, "save result", err);
    if (code) return code;
    for (size_t i = 0; i < n; i++) {
        code = finish_one(st, &r[i], err);
        if (code) {
            st_wabort(st);
            return code;
        }
    }
    return st_wcommit_ticket(st, "save result", ticket, err);
}

int store_runs_finished(store *st, const store_run_result *r, size_t n, store_err *err)
{
    uint64_t ticket = 0;
    int code = finish_many(st, r, n, &ticket, err);
    if (code == STORE_OK && ticket) code = store_durable_wait(st, ticket, err);
    return code;
}

int store_run_finished(store *st, const store_run_result *r, store_err *err)
{
    return store_runs_finished(st, r, 1, err);
}

int store_run_finished_async(store *st, const store_run_result *r, uint64_t *ticket, store_err *err)
{
    return finish_many(st, r, 1, ticket, err);
}

int store_runs_finished_async(store *st, const store_run_result *r, size_t n, uint64_t *ticket,
                              store_err *err)
{
    return finish_many(st, r, n, ticket, err);
}
