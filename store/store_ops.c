/* store/store_ops: the worker's and the local registry's operations: worker
 * registration, claims, plans, lease extensions, run starts and results, the
 * outbox and its submission outcomes, recovery listings, local evaluator
 * registrations and metric counters. Each protocol step is one write
 * transaction on the writer connection (see store.h). */
#include "store/store_int.h"

#include "common/log.h"
#include "common/timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ERR_CODE 64
#define MAX_ERR_MSG 4096

/* Steps a write statement expecting SQLITE_DONE; on failure fills err. */
static int step_done(store *st, sqlite3_stmt *s, const char *op, store_err *err)
{
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(st->w.db);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        if (s) sqlite3_reset(s);
        return STORE_OK;
    }
    int code = st_sqlfail(err, st->w.db, rc, op);
    if (s) sqlite3_reset(s);
    return code;
}

static sqlite3_stmt *W(store *st, const char *sql)
{
    return sc_stmt(&st->w, sql);
}

static int is_one_of(const char *s, const char *const *set)
{
    if (!s) return 0;
    for (; *set; set++)
        if (strcmp(s, *set) == 0) return 1;
    return 0;
}

static const char *const RESULT_STATUSES[] = {"succeeded", "failed", "timed_out", "cancelled",
                                              NULL};

/* ------------------------------------------------------- latency buckets */

#define LAT_RATIO 1.15

int st_latency_bucket(int64_t ms)
{
    if (ms < 0) ms = 0;
    int b = (int)floor(log((double)ms + 1.0) / log(LAT_RATIO));
    return b < 0 ? 0 : b;
}

double st_bucket_value(int bucket)
{
    /* geometric middle of [r^b - 1, r^(b+1) - 1) */
    return pow(LAT_RATIO, (double)bucket + 0.5) - 1.0;
}

/* ------------------------------------------------------ worker registration */

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
    sqlite3_stmt *s = W(st, sql);
    if (s) {
        b_text(s, 1, worker_id);
        b_text(s, 2, server_origin);
        b_text(s, 3, catalog_revision);
        b_text(s, 4, catalog_json);
        b_text(s, 5, response_json);
        b_time(s, 6, registered_at);
    }
    code = step_done(st, s, "save worker", err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "save worker", 0, err);
}

int store_worker_load(store *st, store_worker *out, store_err *err)
{
    static const char sql[] = "SELECT worker_id, server_origin, catalog_revision, catalog_json,"
                              " response_json, registered_at FROM worker WHERE id = 1";
    memset(out, 0, sizeof *out);
    sconn *c = st_rget(st);
    sqlite3_stmt *s = sc_stmt(c, sql);
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    int code = STORE_OK;
    if (rc == SQLITE_ROW) {
        out->worker_id = c_dup(s, 0);
        out->server_origin = c_dup(s, 1);
        out->catalog_revision = c_dup(s, 2);
        out->catalog_json = c_dup(s, 3);
        out->response_json = c_dup(s, 4);
        out->registered_at = c_dbl(s, 5);
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

/* ------------------------------------------------------------ assignments */

/* Reads the stored generation and status of an assignment (writer held).
 * Returns STORE_OK, STORE_NOTFOUND or an error. status gets <= 15 chars. */
static int assignment_head(store *st, const char *id, int64_t *gen, char *status, size_t cap,
                           const char *op, store_err *err)
{
    static const char sql[] = "SELECT lease_generation, status FROM assignments WHERE id = ?1";
    sqlite3_stmt *s = W(st, sql);
    int rc = s ? (b_text(s, 1, id), sqlite3_step(s)) : sqlite3_errcode(st->w.db);
    int code = STORE_OK;
    if (rc == SQLITE_ROW) {
        *gen = sqlite3_column_int64(s, 0);
        const char *t = (const char *)sqlite3_column_text(s, 1);
        snprintf(status, cap, "%s", t ? t : "");
    } else if (rc == SQLITE_DONE) {
        code = st_errf(err, STORE_NOTFOUND, "%s: unknown assignment %s", op, id);
    } else {
        code = st_sqlfail(err, st->w.db, rc, op);
    }
    if (s) sqlite3_reset(s);
    return code;
}

static int is_terminal(const char *status)
{
    static const char *const T[] = {"completed", "skipped", "failed", "lost", "dropped", NULL};
    return is_one_of(status, T);
}

static const char SQL_CLAIM_DOC[] =
    "INSERT INTO assignment_docs(seq, claim_json)"
    " SELECT seq, ?2 FROM assignments WHERE id = ?1"
    " ON CONFLICT(seq) DO UPDATE SET claim_json = excluded.claim_json";

static int claimed_tx(store *st, const store_claim *claims, size_t n, double now, store_err *err)
{
    static const char sql[] =
        "INSERT INTO assignments(id, worker_id, lease_generation, lease_expires_at, status,"
        " session_id, session_revision_id, agent_id, environment, trigger_reason, event_count,"
        " transcript_url, definitions_url, claimed_at)"
        " VALUES(?1, ?2, ?3, ?4, 'claimed', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?14)"
        " ON CONFLICT(id) DO UPDATE SET"
        " status = CASE WHEN lease_generation = excluded.lease_generation"
        "   AND status IN " ST_ACTIVE_SQL " THEN status ELSE 'claimed' END,"
        " finished_at = CASE WHEN lease_generation = excluded.lease_generation"
        "   AND status IN " ST_ACTIVE_SQL " THEN finished_at ELSE NULL END,"
        " error_code = CASE WHEN lease_generation = excluded.lease_generation"
        "   AND status IN " ST_ACTIVE_SQL " THEN error_code ELSE NULL END,"
        " error_message = CASE WHEN lease_generation = excluded.lease_generation"
        "   AND status IN " ST_ACTIVE_SQL " THEN error_message ELSE NULL END,"
        " worker_id = excluded.worker_id, lease_generation = excluded.lease_generation,"
        " lease_expires_at = excluded.lease_expires_at, session_id = excluded.session_id,"
        " session_revision_id = excluded.session_revision_id, agent_id = excluded.agent_id,"
        " environment = excluded.environment, trigger_reason = excluded.trigger_reason,"
        " event_count = excluded.event_count, transcript_url = excluded.transcript_url,"
        " definitions_url = excluded.definitions_url,"
        " claimed_at = excluded.claimed_at";
    int code = STORE_OK;
    for (size_t i = 0; i < n; i++) {
        const store_claim *c = &claims[i];
        int64_t gen = 0;
        char status[16];
        code =
            assignment_head(st, c->assignment_id, &gen, status, sizeof status, "save claim", err);
        if (code == STORE_OK && gen > c->lease_generation) {
            code = st_errf(err, STORE_STALE,
                           "save claim: assignment %s is stored at lease generation %lld, newer "
                           "than the claimed %lld",
                           c->assignment_id, (long long)gen, (long long)c->lease_generation);
            goto fail;
        }
        if (code < 0) goto fail;
        sqlite3_stmt *s = W(st, sql);
        if (s) {
            b_text(s, 1, c->assignment_id);
            b_text(s, 2, c->worker_id);
            b_int(s, 3, c->lease_generation);
            b_dbl(s, 4, c->lease_expires_at);
            b_text(s, 5, c->session_id);
            b_text(s, 6, c->session_revision_id);
            b_text(s, 7, c->agent_id);
            b_text(s, 8, c->environment);
            b_text(s, 9, c->trigger_reason);
            b_int(s, 10, c->event_count);
            b_text(s, 11, c->transcript_url);
            b_text(s, 12, c->definitions_url);
            b_dbl(s, 14, now);
        }
        code = step_done(st, s, "save claim", err);
        if (code) goto fail;
        s = W(st, SQL_CLAIM_DOC);
        if (s) {
            b_text(s, 1, c->assignment_id);
            b_text(s, 2, c->claim_json);
        }
        code = step_done(st, s, "save claim", err);
        if (code) goto fail;
    }
    return STORE_OK;
fail:
    return code;
}

/* Marks the assignment completed when it is planned, has runs, and every run
 * has a result whose submission ended. Writer held. */
int st_maybe_complete(store *st, const char *assignment_id, double now)
{
    static const char sql[] =
        "UPDATE assignments SET status = 'completed', finished_at = ?2"
        " WHERE id = ?1 AND status = 'planned'"
        " AND EXISTS (SELECT 1 FROM runs WHERE assignment_id = ?1)"
        " AND NOT EXISTS (SELECT 1 FROM runs WHERE assignment_id = ?1"
        "   AND (status IN ('planned','running','abandoned') OR submit_status = 'pending'))";
    sqlite3_stmt *s = W(st, sql);
    if (!s) return sqlite3_errcode(st->w.db);
    b_text(s, 1, assignment_id);
    b_dbl(s, 2, now);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int planned_tx(store *st, const char *assignment_id, int64_t lease_generation,
                      const char *definitions_json, const char *plan_request_json,
                      const char *plan_response_json, int skipped, const store_plan_run *runs,
                      size_t n, double now, store_err *err)
{
    static const char upd[] =
        "UPDATE assignments SET status = ?2, planned_at = COALESCE(planned_at, ?3),"
        " finished_at = ?4 WHERE id = ?1";
    static const char doc[] =
        "INSERT INTO assignment_docs(seq, definitions_json, plan_request_json,"
        " plan_response_json) SELECT seq, ?2, ?3, ?4 FROM assignments WHERE id = ?1"
        " ON CONFLICT(seq) DO UPDATE SET"
        " definitions_json = COALESCE(excluded.definitions_json, definitions_json),"
        " plan_request_json = COALESCE(excluded.plan_request_json, plan_request_json),"
        " plan_response_json = COALESCE(excluded.plan_response_json, plan_response_json)";
    static const char run_doc[] =
        "INSERT INTO run_docs(seq, descriptor_json) SELECT seq, ?2 FROM runs WHERE id = ?1"
        " ON CONFLICT(seq) DO UPDATE SET"
        " descriptor_json = COALESCE(excluded.descriptor_json, descriptor_json)";
    static const char ins[] =
        "INSERT INTO runs(id, assignment_id, eval_key, eval_version, execution_mode,"
        " timeout_seconds, status, created_at)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, 'planned', ?8)"
        " ON CONFLICT(id) DO UPDATE SET"
        " timeout_seconds = excluded.timeout_seconds,"
        " status = CASE WHEN status = 'abandoned' AND submit_status = 'none' THEN 'planned'"
        "   WHEN submit_status = 'rejected' AND lease_generation < ?9 THEN 'planned'"
        "   ELSE status END,"
        " submit_status = CASE WHEN submit_status = 'rejected' AND lease_generation < ?9"
        "   THEN 'none' ELSE submit_status END";
    int code = STORE_OK;
    int64_t gen = 0;
    char status[16];
    code = assignment_head(st, assignment_id, &gen, status, sizeof status, "save plan", err);
    if (code) goto fail;
    if (gen != lease_generation) {
        code = st_errf(err, STORE_STALE,
                       "save plan: assignment %s is at lease generation %lld, not %lld",
                       assignment_id, (long long)gen, (long long)lease_generation);
        goto fail;
    }
    if (is_terminal(status)) {
        code = st_errf(err, STORE_CONFLICT, "save plan: assignment %s is already %s", assignment_id,
                       status);
        goto fail;
    }
    sqlite3_stmt *s = W(st, upd);
    if (s) {
        b_text(s, 1, assignment_id);
        b_text(s, 2, skipped ? "skipped" : "planned");
        b_dbl(s, 3, now);
        b_time(s, 4, skipped ? now : 0);
    }
    code = step_done(st, s, "save plan", err);
    if (code) goto fail;
    if (definitions_json || plan_request_json || plan_response_json) {
        s = W(st, doc);
        if (s) {
            b_text(s, 1, assignment_id);
            b_text(s, 2, definitions_json);
            b_text(s, 3, plan_request_json);
            b_text(s, 4, plan_response_json);
        }
        code = step_done(st, s, "save plan", err);
        if (code) goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const store_plan_run *r = &runs[i];
        s = W(st, ins);
        if (s) {
            b_text(s, 1, r->run_id);
            b_text(s, 2, assignment_id);
            b_text(s, 3, r->eval_key);
            b_text(s, 4, r->eval_version);
            b_text(s, 5, r->execution_mode);
            b_dbl(s, 6, r->timeout_seconds);
            b_dbl(s, 8, now);
            b_int(s, 9, lease_generation);
        }
        code = step_done(st, s, "save plan", err);
        if (code) goto fail;
        if (r->descriptor_json) {
            s = W(st, run_doc);
            if (s) {
                b_text(s, 1, r->run_id);
                b_text(s, 2, r->descriptor_json);
            }
            code = step_done(st, s, "save plan", err);
            if (code) goto fail;
        }
    }
    if (!skipped) {
        int rc = st_maybe_complete(st, assignment_id, now);
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, "save plan");
            goto fail;
        }
    }
    return STORE_OK;
fail:
    return code;
}

static int lease_tx(store *st, const char *assignment_id, int64_t lease_generation,
                    double lease_expires_at, store_err *err)
{
    static const char sql[] = "UPDATE assignments SET lease_expires_at = ?2 WHERE id = ?1";
    int code = STORE_OK;
    int64_t gen = 0;
    char status[16];
    code = assignment_head(st, assignment_id, &gen, status, sizeof status, "extend lease", err);
    if (code) goto fail;
    if (is_terminal(status)) {
        return STORE_OK;
    }
    if (gen != lease_generation) {
        code = st_errf(err, STORE_STALE,
                       "extend lease: assignment %s is at lease generation %lld, not %lld",
                       assignment_id, (long long)gen, (long long)lease_generation);
        goto fail;
    }
    sqlite3_stmt *s = W(st, sql);
    if (s) {
        b_text(s, 1, assignment_id);
        b_dbl(s, 2, lease_expires_at);
    }
    code = step_done(st, s, "extend lease", err);
    if (code) goto fail;
    return STORE_OK;
fail:
    return code;
}

static const char SQL_ABANDON_RUNS[] =
    "UPDATE runs SET status = 'abandoned' WHERE assignment_id = ?1"
    " AND status IN ('planned','running') AND submit_status = 'none'";

static int afinish_tx(store *st, const char *assignment_id, int64_t lease_generation,
                      const char *status, const char *error_code, const char *error_message,
                      double now, store_err *err)
{
    static const char sql[] =
        "UPDATE assignments SET status = ?2, finished_at = ?3, error_code = ?4,"
        " error_message = ?5 WHERE id = ?1";
    int code = STORE_OK;
    int64_t gen = 0;
    char cur[16];
    code = assignment_head(st, assignment_id, &gen, cur, sizeof cur, "finish assignment", err);
    if (code) goto fail;
    if (is_terminal(cur)) {
        return STORE_OK;
    }
    if (lease_generation != 0 && gen != lease_generation) {
        code =
            st_errf(err, STORE_STALE, "finish assignment: %s is at lease generation %lld, not %lld",
                    assignment_id, (long long)gen, (long long)lease_generation);
        goto fail;
    }
    sqlite3_stmt *s = W(st, SQL_ABANDON_RUNS);
    if (s) b_text(s, 1, assignment_id);
    code = step_done(st, s, "finish assignment", err);
    if (code) goto fail;
    s = W(st, sql);
    if (s) {
        b_text(s, 1, assignment_id);
        b_text(s, 2, status);
        b_dbl(s, 3, now);
        b_textn(s, 4, error_code, MAX_ERR_CODE);
        b_textn(s, 5, error_message, MAX_ERR_MSG);
    }
    code = step_done(st, s, "finish assignment", err);
    if (code) goto fail;
    return STORE_OK;
fail:
    return code;
}

/* ------------------------------------------------------------------- runs */

static int started_tx(store *st, const char *const *run_ids, size_t n, double now, size_t *changed,
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
        sqlite3_stmt *s = W(st, sql);
        if (s) {
            b_text(s, 1, run_ids[i]);
            b_dbl(s, 2, now);
        }
        int code = step_done(st, s, "start runs", err);
        if (code) return code;
        int c = sqlite3_changes(st->w.db);
        *changed += (size_t)c;
        if (c > 0) {
            s = W(st, clear_results);
            if (s) b_text(s, 1, run_ids[i]);
            code = step_done(st, s, "start runs", err);
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
    if (!is_one_of(r->status, RESULT_STATUSES))
        return st_errf(err, STORE_INVALID,
                       "save result: status must be succeeded, failed, timed_out or cancelled");
    sqlite3_stmt *s = W(st, head);
    int rc = s ? (b_text(s, 1, r->run_id), sqlite3_step(s)) : sqlite3_errcode(st->w.db);
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
    s = W(st, upd);
    if (s) {
        b_text(s, 1, r->run_id);
        b_text(s, 2, r->status);
        b_time(s, 3, r->started_at);
        b_time(s, 4, r->finished_at);
        b_int(s, 5, r->duration_ms);
        b_text(s, 6, r->summary);
        b_textn(s, 8, r->error_code, MAX_ERR_CODE);
        b_textn(s, 9, r->error_message, MAX_ERR_MSG);
        b_text(s, 10, r->submission_id);
        b_text(s, 11, r->worker_id);
        b_int(s, 12, r->lease_generation);
        b_int(s, 13, (int64_t)r->body_len);
    }
    code = step_done(st, s, "save result", err);
    if (code) return code;
    if (r->results_json) {
        s = W(st, res_doc);
        if (s) {
            b_text(s, 1, r->run_id);
            b_text(s, 2, r->results_json);
        }
        code = step_done(st, s, "save result", err);
        if (code) return code;
    }
    s = W(st, ins);
    if (s) {
        b_text(s, 1, r->submission_id);
        b_text(s, 2, r->run_id);
        b_text(s, 3, r->worker_id);
        b_int(s, 4, r->lease_generation);
        sqlite3_bind_blob64(s, 5, r->body, r->body_len, SQLITE_STATIC);
        b_dbl(s, 6, r->finished_at > 0 ? r->finished_at : 0);
    }
    code = step_done(st, s, "save result", err);
    if (code == STORE_CONFLICT)
        return st_errf(err, STORE_CONFLICT, "save result: submission_id %s is already used",
                       r->submission_id);
    if (code) return code;
    int64_t minute = (int64_t)floor((r->finished_at > 0 ? r->finished_at : 0) / 60.0);
    s = W(st, stat);
    if (s) {
        b_int(s, 1, minute);
        b_text(s, 2, r->status);
    }
    code = step_done(st, s, "save result", err);
    if (code) return code;
    s = W(st, lat);
    if (s) {
        b_int(s, 1, minute);
        b_int(s, 2, st_latency_bucket(r->duration_ms));
    }
    return step_done(st, s, "save result", err);
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

/* ----------------------------------------------------------------- outbox */

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
    sqlite3_stmt *s = sc_stmt(c, sql);
    int rc = SQLITE_ERROR, code = STORE_OK;
    size_t cap = 0, cnt = 0;
    store_outbox_entry *arr = NULL;
    if (!s) {
        code = st_sqlfail(err, c->db, sqlite3_errcode(c->db), "list outbox");
        goto done;
    }
    b_int(s, 1, after_seq);
    b_int(s, 2, limit > 0 ? limit : -1);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            arr = realloc(arr, cap * sizeof *arr);
            if (!arr) abort();
        }
        store_outbox_entry *e = &arr[cnt++];
        memset(e, 0, sizeof *e);
        e->seq = sqlite3_column_int64(s, 0);
        e->submission_id = c_dup(s, 1);
        e->run_id = c_dup(s, 2);
        e->assignment_id = c_dup(s, 3);
        e->worker_id = c_dup(s, 4);
        e->lease_generation = sqlite3_column_int64(s, 5);
        const void *b = sqlite3_column_blob(s, 6);
        e->body_len = (size_t)sqlite3_column_bytes(s, 6);
        e->body = malloc(e->body_len + 1);
        if (!e->body) abort();
        if (e->body_len) memcpy(e->body, b, e->body_len);
        e->body[e->body_len] = '\0';
        e->attempts = sqlite3_column_int(s, 7);
        e->created_at = c_dbl(s, 8);
        e->last_attempt_at = c_dbl(s, 9);
        e->last_error = c_dup(s, 10);
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
    sqlite3_stmt *s = sc_stmt(c, sql);
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

static const char *outcome_name(store_submit_outcome o)
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

static int record_tx(store *st, const char *submission_id, const store_attempt *a, store_err *err)
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
    const char *oname = outcome_name(a->outcome);
    int code = STORE_OK;
    sqlite3_stmt *s = W(st, head);
    int rc = s ? (b_text(s, 1, submission_id), sqlite3_step(s)) : sqlite3_errcode(st->w.db);
    char *run_id = NULL, *assignment_id = NULL;
    int64_t attempts = 0;
    if (rc == SQLITE_ROW) {
        run_id = c_dup(s, 0);
        assignment_id = c_dup(s, 1);
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
    s = W(st, hist);
    if (s) {
        b_text(s, 1, run_id);
        b_text(s, 2, submission_id);
        b_int(s, 3, attempts + 1);
        b_time(s, 4, at);
        b_text(s, 5, oname);
        if (a->http_status > 0) b_int(s, 6, a->http_status);
        b_int(s, 7, a->duration_ms);
        b_textn(s, 8, a->error_code, MAX_ERR_CODE);
        b_textn(s, 9, a->message, MAX_ERR_MSG);
        b_textn(s, 10, a->request_id, 128);
    }
    code = step_done(st, s, "record submission", err);
    if (code) goto fail;
    char last[MAX_ERR_CODE + 512];
    if (a->outcome == STORE_SUBMIT_RETRY) {
        snprintf(last, sizeof last, "%s: %.500s",
                 a->error_code ? a->error_code
                               : (a->http_status ? "http_error" : "transport_error"),
                 a->message ? a->message : "");
        s = W(st, retry_outbox);
        if (s) {
            b_text(s, 1, submission_id);
            b_time(s, 2, at);
            b_text(s, 3, last);
        }
    } else {
        s = W(st, del_outbox);
        if (s) b_text(s, 1, submission_id);
    }
    code = step_done(st, s, "record submission", err);
    if (code) goto fail;
    s = W(st, upd_run);
    if (s) {
        b_text(s, 1, run_id);
        b_time(s, 2, at);
        b_text(s, 3, a->outcome == STORE_SUBMIT_RETRY ? NULL : oname);
        b_textn(s, 4, a->error_code, MAX_ERR_CODE);
        b_textn(s, 5, a->message, MAX_ERR_MSG);
    }
    code = step_done(st, s, "record submission", err);
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

/* --------------------------------------------------------------- recovery */

static const char SQL_ASSIGNMENT_COLS[] =
    "SELECT a.id, a.worker_id, a.lease_generation, a.lease_expires_at, a.status, a.session_id,"
    " a.session_revision_id, a.agent_id, a.environment, a.trigger_reason, a.event_count,"
    " a.transcript_url, a.definitions_url, d.claim_json, d.definitions_json,"
    " d.plan_request_json, d.plan_response_json, a.claimed_at"
    " FROM assignments a LEFT JOIN assignment_docs d ON d.seq = a.seq";

static void read_assignment(sqlite3_stmt *s, store_assignment_state *a)
{
    memset(a, 0, sizeof *a);
    a->assignment_id = c_dup(s, 0);
    a->worker_id = c_dup(s, 1);
    a->lease_generation = sqlite3_column_int64(s, 2);
    a->lease_expires_at = c_dbl(s, 3);
    a->status = c_dup(s, 4);
    a->session_id = c_dup(s, 5);
    a->session_revision_id = c_dup(s, 6);
    a->agent_id = c_dup(s, 7);
    a->environment = c_dup(s, 8);
    a->trigger_reason = c_dup(s, 9);
    a->event_count = sqlite3_column_int64(s, 10);
    a->transcript_url = c_dup(s, 11);
    a->definitions_url = c_dup(s, 12);
    a->claim_json = c_dup(s, 13);
    a->definitions_json = c_dup(s, 14);
    a->plan_request_json = c_dup(s, 15);
    a->plan_response_json = c_dup(s, 16);
    a->claimed_at = c_dbl(s, 17);
}

static int load_runs(sconn *c, store_assignment_state *a, store_err *err)
{
    static const char sql[] =
        "SELECT r.id, r.eval_key, r.eval_version, r.execution_mode, d.descriptor_json,"
        " r.timeout_seconds, r.status, r.submit_status FROM runs r"
        " LEFT JOIN run_docs d ON d.seq = r.seq WHERE r.assignment_id = ?1 ORDER BY r.seq";
    sqlite3_stmt *s = sc_stmt(c, sql);
    if (!s) return st_sqlfail(err, c->db, sqlite3_errcode(c->db), "load runs");
    b_text(s, 1, a->assignment_id);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (a->n_runs == cap) {
            cap = cap ? cap * 2 : 8;
            a->runs = realloc(a->runs, cap * sizeof *a->runs);
            if (!a->runs) abort();
        }
        store_run_state *r = &a->runs[a->n_runs++];
        r->run_id = c_dup(s, 0);
        r->eval_key = c_dup(s, 1);
        r->eval_version = c_dup(s, 2);
        r->execution_mode = c_dup(s, 3);
        r->descriptor_json = c_dup(s, 4);
        r->timeout_seconds = c_dbl(s, 5);
        r->status = c_dup(s, 6);
        r->submit_status = c_dup(s, 7);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) return st_sqlfail(err, c->db, rc, "load runs");
    return STORE_OK;
}

void store_assignment_state_free(store_assignment_state *a)
{
    if (!a) return;
    free(a->assignment_id);
    free(a->worker_id);
    free(a->status);
    free(a->session_id);
    free(a->session_revision_id);
    free(a->agent_id);
    free(a->environment);
    free(a->trigger_reason);
    free(a->transcript_url);
    free(a->definitions_url);
    free(a->claim_json);
    free(a->definitions_json);
    free(a->plan_request_json);
    free(a->plan_response_json);
    for (size_t i = 0; i < a->n_runs; i++) {
        store_run_state *r = &a->runs[i];
        free(r->run_id);
        free(r->eval_key);
        free(r->eval_version);
        free(r->execution_mode);
        free(r->descriptor_json);
        free(r->status);
        free(r->submit_status);
    }
    free(a->runs);
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
    sqlite3_stmt *s = sc_stmt(c, SQL_RECOVERABLE);
    store_assignment_state *arr = NULL;
    size_t cap = 0, cnt = 0;
    int rc = SQLITE_ERROR, code = STORE_OK;
    if (!s) {
        code = st_sqlfail(err, c->db, sqlite3_errcode(c->db), "list recoverable assignments");
        goto done;
    }
    b_dbl(s, 1, now + margin_s);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            arr = realloc(arr, cap * sizeof *arr);
            if (!arr) abort();
        }
        read_assignment(s, &arr[cnt++]);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "list recoverable assignments");
        goto done;
    }
    for (size_t i = 0; i < cnt && code == STORE_OK; i++)
        code = load_runs(c, &arr[i], err);
done:
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    if (code) {
        store_assignments_free(arr, cnt);
        return code;
    }
    *out = arr;
    *n = cnt;
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
    sqlite3_stmt *s = sc_stmt(c, SQL_ONE_ASSIGNMENT);
    int code = STORE_OK;
    int rc = s ? (b_text(s, 1, assignment_id), sqlite3_step(s)) : sqlite3_errcode(c->db);
    if (rc == SQLITE_ROW)
        read_assignment(s, out);
    else if (rc == SQLITE_DONE)
        code = STORE_NOTFOUND;
    else
        code = st_sqlfail(err, c->db, rc, "load assignment");
    if (s) sqlite3_reset(s);
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
    sqlite3_stmt *s = W(st, runs_sql);
    if (s) b_dbl(s, 1, now + margin_s);
    code = step_done(st, s, "drop expired assignments", err);
    if (code) goto fail;
    s = W(st, asg_sql);
    if (s) {
        b_dbl(s, 1, now + margin_s);
        b_dbl(s, 2, now);
    }
    code = step_done(st, s, "drop expired assignments", err);
    if (code) goto fail;
    size_t dropped = (size_t)sqlite3_changes(st->w.db);
    code = st_wcommit(st, "drop expired assignments", 0, err);
    if (code == STORE_OK && n_dropped) *n_dropped = dropped;
    return code;
fail:
    st_wabort(st);
    return code;
}

/* ------------------------------------------------------- local evaluators */

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
    sqlite3_stmt *s = W(st, sql);
    if (s) {
        b_text(s, 1, name);
        b_text(s, 2, registration_json);
        b_dbl(s, 3, ttl_seconds > 0 ? ttl_seconds : 0);
        b_dbl(s, 4, now);
        b_dbl(s, 5, ttl_seconds > 0 ? now + ttl_seconds : 0);
    }
    code = step_done(st, s, "save evaluator", err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "save evaluator", 0, err);
}

static int evaluator_update(store *st, const char *sql, const char *name, double now,
                            const char *op, store_err *err)
{
    if (!name) return st_errf(err, STORE_INVALID, "%s: no name", op);
    int code = st_wbegin(st, op, err);
    if (code) return code;
    sqlite3_stmt *s = W(st, sql);
    if (s) {
        b_text(s, 1, name);
        b_dbl(s, 2, now);
    }
    code = step_done(st, s, op, err);
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
    sqlite3_stmt *s = sc_stmt(c, sql);
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
            e->name = c_dup(s, 0);
            e->registration_json = c_dup(s, 1);
            e->ttl_seconds = c_dbl(s, 2);
            e->registered_at = c_dbl(s, 3);
            e->heartbeat_at = c_dbl(s, 4);
            e->expires_at = c_dbl(s, 5);
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

/* ---------------------------------------------------------------- metrics */

int store_metric_add(store *st, const char *name, const char *labels, double delta, store_err *err)
{
    static const char sql[] =
        "INSERT INTO metrics(name, labels, value) VALUES(?1, ?2, ?3)"
        " ON CONFLICT(name, labels) DO UPDATE SET value = value + excluded.value";
    if (!name || !name[0]) return st_errf(err, STORE_INVALID, "add metric: no name");
    if (!isfinite(delta)) return st_errf(err, STORE_INVALID, "add metric: delta not finite");
    int code = st_wbegin(st, "add metric", err);
    if (code) return code;
    sqlite3_stmt *s = W(st, sql);
    if (s) {
        b_text(s, 1, name);
        b_text(s, 2, labels ? labels : "");
        b_dbl(s, 3, delta);
    }
    code = step_done(st, s, "add metric", err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "add metric", 0, err);
}

int store_metrics_save(store *st, const store_metric *m, size_t n, store_err *err)
{
    static const char sql[] = "INSERT INTO metrics(name, labels, value) VALUES(?1, ?2, ?3)"
                              " ON CONFLICT(name, labels) DO UPDATE SET value = excluded.value";
    for (size_t i = 0; i < n; i++)
        if (!m[i].name || !m[i].name[0] || !isfinite(m[i].value))
            return st_errf(err, STORE_INVALID,
                           "save metrics: entry %zu has no name or a "
                           "non-finite value",
                           i);
    if (n == 0) return STORE_OK;
    int code = st_wbegin(st, "save metrics", err);
    if (code) return code;
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *s = W(st, sql);
        if (s) {
            b_text(s, 1, m[i].name);
            b_text(s, 2, m[i].labels ? m[i].labels : "");
            b_dbl(s, 3, m[i].value);
        }
        code = step_done(st, s, "save metrics", err);
        if (code) {
            st_wabort(st);
            return code;
        }
    }
    return st_wcommit(st, "save metrics", 0, err);
}

int store_metrics_load(store *st, store_metric **out, size_t *n, store_err *err)
{
    static const char sql[] = "SELECT name, labels, value FROM metrics ORDER BY name, labels";
    *out = NULL;
    *n = 0;
    sconn *c = st_rget(st);
    sqlite3_stmt *s = sc_stmt(c, sql);
    store_metric *arr = NULL;
    size_t cap = 0, cnt = 0;
    int rc = s ? SQLITE_OK : sqlite3_errcode(c->db), code = STORE_OK;
    if (s) {
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            if (cnt == cap) {
                cap = cap ? cap * 2 : 16;
                arr = realloc(arr, cap * sizeof *arr);
                if (!arr) abort();
            }
            arr[cnt].name = c_dup(s, 0);
            arr[cnt].labels = c_dup(s, 1);
            arr[cnt].value = c_dbl(s, 2);
            cnt++;
        }
        sqlite3_reset(s);
    }
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "load metrics");
        store_metrics_free(arr, cnt);
        arr = NULL;
        cnt = 0;
    }
    st_rput(st, c);
    *out = arr;
    *n = cnt;
    return code;
}

void store_metrics_free(store_metric *m, size_t n)
{
    if (!m) return;
    for (size_t i = 0; i < n; i++) {
        free(m[i].name);
        free(m[i].labels);
    }
    free(m);
}

/* ------------------------------------------------ deferred updates (batched) */

/* Updates that only repeat idempotent protocol steps when lost (a run marked
 * running, a lease extension, a submission outcome: the entry is then resent
 * and answered idempotent_replay) are queued and applied in batches: by the
 * flusher thread every defer_ms, before any other write transaction (so the
 * order of updates is kept), and before the worker-facing reads. One commit
 * for many of them instead of one each. */
typedef enum { OP_STARTED = 1, OP_LEASE, OP_RECORD, OP_CLAIM, OP_PLAN, OP_AFINISH } op_kind;

struct st_op {
    struct st_op *next;
    op_kind kind;
    char *id;   /* submission_id or assignment_id */
    char **ids; /* run ids (OP_STARTED) */
    size_t n;
    double t; /* now / lease_expires_at */
    int64_t gen;
    store_attempt a; /* OP_RECORD; its strings owned below */
    char *a_code, *a_msg, *a_rid;
    store_claim *claims;      /* OP_CLAIM (strings in owned) */
    store_plan_run *runs;     /* OP_PLAN (strings in owned) */
    const char *s1, *s2, *s3; /* OP_PLAN: documents; OP_AFINISH: status, code, message */
    int flag;                 /* OP_PLAN: skipped */
    char **owned;
    size_t nowned, capowned;
};

/* Duplicates s into memory owned by the op. */
static const char *own(st_op *o, const char *s)
{
    if (!s) return NULL;
    if (o->nowned == o->capowned) {
        o->capowned = o->capowned ? o->capowned * 2 : 16;
        o->owned = realloc(o->owned, o->capowned * sizeof *o->owned);
        if (!o->owned) abort();
    }
    char *p = strdup(s);
    if (!p) abort();
    o->owned[o->nowned++] = p;
    return p;
}

static char *dup0(const char *s)
{
    if (!s) return NULL;
    char *p = strdup(s);
    if (!p) abort();
    return p;
}

static void op_free(st_op *o)
{
    free(o->id);
    if (o->ids)
        for (size_t i = 0; i < o->n; i++)
            free(o->ids[i]);
    free(o->ids);
    free(o->a_code);
    free(o->a_msg);
    free(o->a_rid);
    for (size_t i = 0; i < o->nowned; i++)
        free(o->owned[i]);
    free(o->owned);
    free(o->claims);
    free(o->runs);
    free(o);
}

static int deferred(store *st)
{
    return !st->opt.sync_updates;
}

static void enqueue(store *st, st_op *o)
{
    pthread_mutex_lock(&st->qmu);
    if (st->qtail)
        st->qtail->next = o;
    else
        st->qhead = o;
    st->qtail = o;
    st->qlen++;
    if (st->qlen == 1 || st->qlen >= 512) pthread_cond_signal(&st->qcv);
    pthread_mutex_unlock(&st->qmu);
}

static int apply_op(store *st, st_op *o, store_err *err)
{
    size_t changed = 0;
    switch (o->kind) {
    case OP_STARTED:
        return started_tx(st, (const char *const *)o->ids, o->n, o->t, &changed, err);
    case OP_LEASE:
        return lease_tx(st, o->id, o->gen, o->t, err);
    case OP_RECORD:
        return record_tx(st, o->id, &o->a, err);
    case OP_CLAIM:
        return claimed_tx(st, o->claims, o->n, o->t, err);
    case OP_PLAN:
        return planned_tx(st, o->id, o->gen, o->s1, o->s2, o->s3, o->flag, o->runs, o->n, o->t,
                          err);
    case OP_AFINISH:
        return afinish_tx(st, o->id, o->gen, o->s1, o->s2, o->s3, o->t, err);
    }
    return STORE_OK;
}

static const char SQL_SP[] = "SAVEPOINT deferred";
static const char SQL_SP_RELEASE[] = "RELEASE deferred";
static const char SQL_SP_ROLLBACK[] = "ROLLBACK TO deferred";

static void sp_exec(store *st, const char *sql)
{
    sqlite3_stmt *s = W(st, sql);
    if (s) {
        sqlite3_step(s);
        sqlite3_reset(s);
    }
}

void st_drain_deferred(store *st)
{
    pthread_mutex_lock(&st->qmu);
    st_op *o = st->qhead;
    st->qhead = st->qtail = NULL;
    st->qlen = 0;
    pthread_mutex_unlock(&st->qmu);
    st_op **tail = &st->inflight;
    while (*tail)
        tail = &(*tail)->next;
    while (o) {
        st_op *next = o->next;
        o->next = NULL;
        store_err e = {0};
        sp_exec(st, SQL_SP);
        int code = apply_op(st, o, &e);
        if (code < 0) {
            sp_exec(st, SQL_SP_ROLLBACK);
            sp_exec(st, SQL_SP_RELEASE);
            /* Refused (stale, unknown, ...): losing it is safe (see above). */
            log_warn("store: deferred update not applied", LOG_S("error", e.msg));
            op_free(o);
        } else {
            sp_exec(st, SQL_SP_RELEASE);
            *tail = o; /* kept until the transaction commits */
            tail = &o->next;
        }
        o = next;
    }
}

void st_deferred_done(store *st, int committed)
{
    st_op *o = st->inflight;
    st->inflight = NULL;
    if (!o) return;
    if (committed) {
        while (o) {
            st_op *next = o->next;
            op_free(o);
            o = next;
        }
        return;
    }
    /* Rolled back: they go first again, in their order. */
    st_op *last = o;
    size_t n = 1;
    while (last->next)
        last = last->next, n++;
    pthread_mutex_lock(&st->qmu);
    last->next = st->qhead;
    st->qhead = o;
    if (!st->qtail) st->qtail = last;
    st->qlen += n;
    pthread_mutex_unlock(&st->qmu);
}

int store_flush(store *st, store_err *err)
{
    pthread_mutex_lock(&st->qmu);
    int empty = st->qhead == NULL;
    pthread_mutex_unlock(&st->qmu);
    if (empty) return STORE_OK;
    int code = st_wbegin(st, "apply deferred updates", err); /* drains */
    if (code) return code;
    return st_wcommit(st, "apply deferred updates", 0, err);
}

int store_assignment_lease(store *st, const char *assignment_id, int64_t lease_generation,
                           double lease_expires_at, store_err *err)
{
    if (!assignment_id) return st_errf(err, STORE_INVALID, "extend lease: no assignment_id");
    if (deferred(st)) {
        st_op *o = calloc(1, sizeof *o);
        if (!o) abort();
        o->kind = OP_LEASE;
        o->id = dup0(assignment_id);
        o->gen = lease_generation;
        o->t = lease_expires_at;
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, "extend lease", err);
    if (code) return code;
    code = lease_tx(st, assignment_id, lease_generation, lease_expires_at, err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "extend lease", 0, err);
}

int store_runs_started(store *st, const char *const *run_ids, size_t n, double now,
                       size_t *n_started, store_err *err)
{
    if (n_started) *n_started = 0;
    if (n == 0) return STORE_OK;
    if (deferred(st) && !n_started) {
        st_op *o = calloc(1, sizeof *o);
        if (!o) abort();
        o->kind = OP_STARTED;
        o->ids = calloc(n, sizeof *o->ids);
        if (!o->ids) abort();
        for (size_t i = 0; i < n; i++)
            if (run_ids[i]) o->ids[o->n++] = dup0(run_ids[i]);
        o->t = now;
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, "start runs", err);
    if (code) return code;
    size_t changed = 0;
    code = started_tx(st, run_ids, n, now, &changed, err);
    if (code) {
        st_wabort(st);
        return code;
    }
    code = st_wcommit(st, "start runs", 0, err);
    if (code == STORE_OK && n_started) *n_started = changed;
    return code;
}

int store_outbox_record(store *st, const char *submission_id, const store_attempt *a,
                        store_err *err)
{
    if (!submission_id || !a || !outcome_name(a->outcome))
        return st_errf(err, STORE_INVALID,
                       "record submission: a submission_id and a valid outcome are required");
    if (deferred(st)) {
        st_op *o = calloc(1, sizeof *o);
        if (!o) abort();
        o->kind = OP_RECORD;
        o->id = dup0(submission_id);
        o->a = *a;
        o->a.error_code = o->a_code = dup0(a->error_code);
        o->a.message = o->a_msg = dup0(a->message);
        o->a.request_id = o->a_rid = dup0(a->request_id);
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, "record submission", err);
    if (code) return code;
    code = record_tx(st, submission_id, a, err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "record submission", 0, err);
}

/* ----------------------------------- claims, plans, local ends (deferred too) */

/* Losing one of these only repeats an idempotent step: an unknown claim
 * expires on the server and is reclaimed; an unknown plan is replayed by the
 * server (same runs); a local end is rediscovered (lease_lost). The result of
 * a run (store_run_finished) is never deferred, and every deferred update is
 * applied before it in the same transaction, so its run row exists. */

int store_assignments_claimed(store *st, const store_claim *claims, size_t n, double now,
                              store_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!claims[i].assignment_id || !claims[i].assignment_id[0] || !claims[i].worker_id ||
            claims[i].lease_generation <= 0)
            return st_errf(err, STORE_INVALID,
                           "save claim: assignment %zu needs assignment_id, worker_id and a "
                           "positive lease_generation",
                           i);
    }
    if (n == 0) return STORE_OK;
    if (deferred(st)) {
        st_op *o = calloc(1, sizeof *o);
        if (!o) abort();
        o->kind = OP_CLAIM;
        o->claims = calloc(n, sizeof *o->claims);
        if (!o->claims) abort();
        for (size_t i = 0; i < n; i++) {
            const store_claim *c = &claims[i];
            o->claims[i] = (store_claim){
                own(o, c->assignment_id), own(o, c->worker_id),      c->lease_generation,
                c->lease_expires_at,      own(o, c->session_id),     own(o, c->session_revision_id),
                own(o, c->agent_id),      own(o, c->environment),    own(o, c->trigger_reason),
                c->event_count,           own(o, c->transcript_url), own(o, c->definitions_url),
                own(o, c->claim_json)};
        }
        o->n = n;
        o->t = now;
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, "save claim", err);
    if (code) return code;
    code = claimed_tx(st, claims, n, now, err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "save claim", 0, err);
}

int store_assignment_planned(store *st, const char *assignment_id, int64_t lease_generation,
                             const char *definitions_json, const char *plan_request_json,
                             const char *plan_response_json, int skipped,
                             const store_plan_run *runs, size_t n, double now, store_err *err)
{
    if (!assignment_id) return st_errf(err, STORE_INVALID, "save plan: no assignment_id");
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].run_id || !runs[i].eval_key || !runs[i].eval_version ||
            !runs[i].execution_mode)
            return st_errf(err, STORE_INVALID,
                           "save plan: run %zu needs run_id, eval_key, eval_version and "
                           "execution_mode",
                           i);
    }
    if (deferred(st)) {
        st_op *o = calloc(1, sizeof *o);
        if (!o) abort();
        o->kind = OP_PLAN;
        o->id = dup0(assignment_id);
        o->gen = lease_generation;
        o->s1 = own(o, definitions_json);
        o->s2 = own(o, plan_request_json);
        o->s3 = own(o, plan_response_json);
        o->flag = skipped;
        o->runs = calloc(n ? n : 1, sizeof *o->runs);
        if (!o->runs) abort();
        for (size_t i = 0; i < n; i++)
            o->runs[i] =
                (store_plan_run){own(o, runs[i].run_id),       own(o, runs[i].eval_key),
                                 own(o, runs[i].eval_version), own(o, runs[i].execution_mode),
                                 runs[i].timeout_seconds,      own(o, runs[i].descriptor_json)};
        o->n = n;
        o->t = now;
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, "save plan", err);
    if (code) return code;
    code = planned_tx(st, assignment_id, lease_generation, definitions_json, plan_request_json,
                      plan_response_json, skipped, runs, n, now, err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "save plan", 0, err);
}

int store_assignment_finish(store *st, const char *assignment_id, int64_t lease_generation,
                            const char *status, const char *error_code, const char *error_message,
                            double now, store_err *err)
{
    static const char *const OK[] = {"failed", "lost", "dropped", "skipped", "completed", NULL};
    if (!assignment_id) return st_errf(err, STORE_INVALID, "finish assignment: no assignment_id");
    if (!is_one_of(status, OK))
        return st_errf(err, STORE_INVALID,
                       "finish assignment: status must be failed, lost, dropped, skipped or "
                       "completed, not '%s'",
                       status ? status : "(null)");
    if (deferred(st)) {
        st_op *o = calloc(1, sizeof *o);
        if (!o) abort();
        o->kind = OP_AFINISH;
        o->id = dup0(assignment_id);
        o->gen = lease_generation;
        o->s1 = own(o, status);
        o->s2 = own(o, error_code);
        o->s3 = own(o, error_message);
        o->t = now;
        enqueue(st, o);
        return STORE_OK;
    }
    int code = st_wbegin(st, "finish assignment", err);
    if (code) return code;
    code = afinish_tx(st, assignment_id, lease_generation, status, error_code, error_message, now,
                      err);
    if (code) {
        st_wabort(st);
        return code;
    }
    return st_wcommit(st, "finish assignment", 0, err);
}
