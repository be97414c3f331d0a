/* store/store_runs: runs marked started and run results; a result is committed
 * with its outbox row in one durable transaction, never deferred. */
#include "store/store_int.h"

#include <math.h>
#include <stdio.h>
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
        int code = st_exec(st, sql, "start runs", err, ST_ARGS(ST_TEXT(run_ids[i]), ST_DBL(now)));
        if (code) return code;
        int c = sqlite3_changes(st->w.db);
        *changed += (size_t)c;
        if (c > 0) {
            code = st_exec(st, clear_results, "start runs", err, ST_ARGS(ST_TEXT(run_ids[i])));
            if (code) return code;
        }
    }
    return STORE_OK;
}

/* Reads a run's submit_status into the char[16] ctx points to ("" if NULL). */
static void submit_status_row(sqlite3_stmt *s, void *ctx)
{
    const char *t = (const char *)sqlite3_column_text(s, 0);
    snprintf(ctx, 16, "%s", t ? t : "");
}

/* A transaction's per-minute counts (minute_stats by status, minute_latency
 * by bucket), added up over its results and written once per key. */
typedef struct {
    int64_t minute;
    const char *status; /* borrowed; NULL: a latency bucket */
    int64_t bucket;
    int64_t count;
} minute_count;

static void count_minute(minute_count *mc, size_t *n, int64_t minute, const char *status,
                         int64_t bucket)
{
    for (size_t i = 0; i < *n; i++)
        if (mc[i].minute == minute && mc[i].bucket == bucket &&
            (status && mc[i].status ? strcmp(mc[i].status, status) == 0 : status == mc[i].status)) {
            mc[i].count++;
            return;
        }
    mc[(*n)++] = (minute_count){minute, status, bucket, 1};
}

static int write_minutes(store *st, const minute_count *mc, size_t n, store_err *err)
{
    static const char stat[] = "INSERT INTO minute_stats(minute, status, count) VALUES(?1, ?2, ?3)"
                               " ON CONFLICT(minute, status) DO UPDATE SET"
                               " count = count + excluded.count";
    static const char lat[] = "INSERT INTO minute_latency(minute, bucket, count) VALUES(?1, ?2, ?3)"
                              " ON CONFLICT(minute, bucket) DO UPDATE SET"
                              " count = count + excluded.count";
    for (size_t i = 0; i < n; i++) {
        int code =
            mc[i].status
                ? st_exec(st, stat, "save result", err,
                          ST_ARGS(ST_INT(mc[i].minute), ST_TEXT(mc[i].status), ST_INT(mc[i].count)))
                : st_exec(st, lat, "save result", err,
                          ST_ARGS(ST_INT(mc[i].minute), ST_INT(mc[i].bucket), ST_INT(mc[i].count)));
        if (code) return code;
    }
    return STORE_OK;
}

/* Saves one result (the run must have none yet: submit_status 'none') and
 * adds its minute counts to mc[0..*nmc). */
static int finish_one(store *st, const store_run_result *r, minute_count *mc, size_t *nmc,
                      store_err *err)
{
    static const char head[] = "SELECT submit_status FROM runs WHERE id = ?1";
    static const char upd[] =
        "UPDATE runs SET status = ?2, started_at = ?3, finished_at = ?4, duration_ms = ?5,"
        " summary = ?6, error_code = ?7, error_message = ?8,"
        " submission_id = ?9, worker_id = ?10, lease_generation = ?11,"
        " submit_status = 'pending', submit_error_code = NULL, submit_error_message = NULL,"
        " attempts = 0, first_attempt_at = NULL, last_attempt_at = NULL, body_bytes = ?12"
        " WHERE id = ?1 AND submit_status = 'none'";
    static const char ins[] =
        "INSERT INTO outbox(submission_id, run_id, assignment_id, worker_id, lease_generation,"
        " body, created_at) SELECT ?1, ?2, assignment_id, ?3, ?4, ?5, ?6 FROM runs WHERE id = ?2";
    static const char res_doc[] =
        "INSERT INTO run_docs(seq, results_json) SELECT seq, ?2 FROM runs WHERE id = ?1"
        " ON CONFLICT(seq) DO UPDATE SET results_json = excluded.results_json";
    if (!r->run_id || !r->submission_id || !r->submission_id[0] || !r->worker_id || !r->body ||
        r->body_len == 0 || r->lease_generation <= 0)
        return st_errf(err, STORE_INVALID,
                       "save result: run_id, submission_id, worker_id, lease_generation and a "
                       "non-empty body are required");
    if (!st_is_one_of(r->status, RESULT_STATUSES))
        return st_errf(err, STORE_INVALID,
                       "save result: status must be succeeded, failed, timed_out or cancelled");
    int code = st_exec(st, upd, "save result", err,
                       ST_ARGS(ST_TEXT(r->run_id), ST_TEXT(r->status), ST_TIME(r->started_at),
                               ST_TIME(r->finished_at), ST_INT(r->duration_ms), ST_TEXT(r->summary),
                               ST_TEXTN(r->error_code, ST_MAX_ERR_CODE),
                               ST_TEXTN(r->error_message, ST_MAX_ERR_MSG),
                               ST_TEXT(r->submission_id), ST_TEXT(r->worker_id),
                               ST_INT(r->lease_generation), ST_INT((int64_t)r->body_len)));
    if (code) return code;
    if (sqlite3_changes(st->w.db) == 0) {
        /* No run without a result by that id: say which. */
        char submit_status[16] = "";
        code = st_query_one(&st->w, head, "save result", err, submit_status_row, submit_status,
                            ST_ARGS(ST_TEXT(r->run_id)));
        if (code == STORE_NOTFOUND)
            return st_errf(err, STORE_NOTFOUND, "save result: unknown run %s", r->run_id);
        if (code) return code;
        return st_errf(err, STORE_CONFLICT,
                       "save result: run %s already has a result (submission %s)", r->run_id,
                       submit_status[0] ? submit_status : "?");
    }
    if (r->results_json) {
        code = st_exec(st, res_doc, "save result", err,
                       ST_ARGS(ST_TEXT(r->run_id), ST_TEXT(r->results_json)));
        if (code) return code;
    }
    double finished_at = r->finished_at > 0 ? r->finished_at : 0;
    code = st_exec(st, ins, "save result", err,
                   ST_ARGS(ST_TEXT(r->submission_id), ST_TEXT(r->run_id), ST_TEXT(r->worker_id),
                           ST_INT(r->lease_generation), ST_BLOB(r->body, r->body_len),
                           ST_DBL(finished_at)));
    if (code == STORE_CONFLICT)
        return st_errf(err, STORE_CONFLICT, "save result: submission_id %s is already used",
                       r->submission_id);
    if (code) return code;
    int64_t minute = (int64_t)floor(finished_at / 60.0);
    count_minute(mc, nmc, minute, r->status, -1);
    count_minute(mc, nmc, minute, NULL, st_latency_bucket(r->duration_ms));
    return STORE_OK;
}

static int finish_many(store *st, const store_run_result *r, size_t n, uint64_t *ticket,
                       store_err *err)
{
    *ticket = 0;
    if (n == 0) return STORE_OK;
    minute_count *mc = malloc(2 * n * sizeof *mc); /* at most two keys per result */
    if (!mc) return st_errf(err, STORE_ERROR, "save result: out of memory");
    size_t nmc = 0;
    int code = st_wbegin(st, "save result", err);
    if (code) goto out;
    for (size_t i = 0; i < n && code == STORE_OK; i++)
        code = finish_one(st, &r[i], mc, &nmc, err);
    if (code == STORE_OK) code = write_minutes(st, mc, nmc, err);
    if (code) {
        st_wabort(st);
        goto out;
    }
    code = st_wcommit_ticket(st, "save result", ticket, err);
out:
    free(mc);
    return code;
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
