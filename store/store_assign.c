/* store/store_assign: the assignment protocol steps as write-transaction
 * bodies (claim, plan, lease extension, finish) and the completion check that
 * closes an assignment once its runs are done. Each runs inside a transaction
 * the caller opened on the writer (store_deferred.c decides when). */
#include "store/store_int.h"

#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    int64_t *gen;
    char *status;
    size_t cap;
} head;

static void head_row(sqlite3_stmt *s, void *ctx)
{
    head *h = ctx;
    *h->gen = sqlite3_column_int64(s, 0);
    const char *t = (const char *)sqlite3_column_text(s, 1);
    snprintf(h->status, h->cap, "%s", t ? t : "");
}

/* Reads the stored generation and status of an assignment (writer held).
 * Returns STORE_OK, STORE_NOTFOUND or an error. status gets <= 15 chars. */
static int assignment_head(store *st, const char *id, int64_t *gen, char *status, size_t cap,
                           const char *op, store_err *err)
{
    static const char sql[] = "SELECT lease_generation, status FROM assignments WHERE id = ?1";
    head h = {gen, status, cap};
    int code = st_query_one(&st->w, sql, op, err, head_row, &h, ST_ARGS(ST_TEXT(id)));
    if (code == STORE_NOTFOUND)
        code = st_errf(err, STORE_NOTFOUND, "%s: unknown assignment %s", op, id);
    return code;
}

/* STORE_STALE (err filled) when the stored generation is not the caller's. */
static int check_gen(const char *id, int64_t stored, int64_t gen, const char *op, store_err *err)
{
    if (stored == gen) return STORE_OK;
    return st_errf(err, STORE_STALE, "%s: assignment %s is at lease generation %lld, not %lld", op,
                   id, (long long)stored, (long long)gen);
}

static int is_terminal(const char *status)
{
    static const char *const T[] = {"completed", "skipped", "failed", "lost", "dropped", NULL};
    return st_is_one_of(status, T);
}

static const char SQL_CLAIM_DOC[] =
    "INSERT INTO assignment_docs(seq, claim_json)"
    " SELECT seq, ?2 FROM assignments WHERE id = ?1"
    " ON CONFLICT(seq) DO UPDATE SET claim_json = excluded.claim_json";

int st_claimed_tx(store *st, const store_claim *claims, size_t n, double now, store_err *err)
{
    static const char sql[] =
        "INSERT INTO assignments(id, worker_id, lease_generation, lease_expires_at, status,"
        " session_id, session_revision_id, agent_id, environment, trigger_reason, event_count,"
        " transcript_url, definitions_url, claimed_at)"
        " VALUES(?1, ?2, ?3, ?4, 'claimed', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
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
        code = st_exec(
            st, sql, "save claim", err,
            ST_ARGS(ST_TEXT(c->assignment_id), ST_TEXT(c->worker_id), ST_INT(c->lease_generation),
                    ST_DBL(c->lease_expires_at), ST_TEXT(c->session_id),
                    ST_TEXT(c->session_revision_id), ST_TEXT(c->agent_id), ST_TEXT(c->environment),
                    ST_TEXT(c->trigger_reason), ST_INT(c->event_count), ST_TEXT(c->transcript_url),
                    ST_TEXT(c->definitions_url), ST_DBL(now)));
        if (code) goto fail;
        code = st_exec(st, SQL_CLAIM_DOC, "save claim", err,
                       ST_ARGS(ST_TEXT(c->assignment_id), ST_TEXT(c->claim_json)));
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
    sqlite3_stmt *s = st_w(st, sql);
    if (!s) return sqlite3_errcode(st->w.db);
    st_bind_text(s, 1, assignment_id);
    st_bind_dbl(s, 2, now);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int st_planned_tx(store *st, const char *assignment_id, int64_t lease_generation,
                  const char *definitions_json, const char *plan_request_json,
                  const char *plan_response_json, int skipped, const store_plan_run *runs, size_t n,
                  double now, store_err *err)
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
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, 'planned', ?7)"
        " ON CONFLICT(id) DO UPDATE SET"
        " timeout_seconds = excluded.timeout_seconds,"
        " status = CASE WHEN status = 'abandoned' AND submit_status = 'none' THEN 'planned'"
        "   WHEN submit_status = 'rejected' AND lease_generation < ?8 THEN 'planned'"
        "   ELSE status END,"
        " submit_status = CASE WHEN submit_status = 'rejected' AND lease_generation < ?8"
        "   THEN 'none' ELSE submit_status END";
    int64_t gen = 0;
    char status[16];
    int code = assignment_head(st, assignment_id, &gen, status, sizeof status, "save plan", err);
    if (code == STORE_OK) code = check_gen(assignment_id, gen, lease_generation, "save plan", err);
    if (code) goto fail;
    if (is_terminal(status)) {
        code = st_errf(err, STORE_CONFLICT, "save plan: assignment %s is already %s", assignment_id,
                       status);
        goto fail;
    }
    code = st_exec(st, upd, "save plan", err,
                   ST_ARGS(ST_TEXT(assignment_id), ST_TEXT(skipped ? "skipped" : "planned"),
                           ST_DBL(now), ST_TIME(skipped ? now : 0)));
    if (code) goto fail;
    if (definitions_json || plan_request_json || plan_response_json) {
        code = st_exec(st, doc, "save plan", err,
                       ST_ARGS(ST_TEXT(assignment_id), ST_TEXT(definitions_json),
                               ST_TEXT(plan_request_json), ST_TEXT(plan_response_json)));
        if (code) goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const store_plan_run *r = &runs[i];
        code = st_exec(st, ins, "save plan", err,
                       ST_ARGS(ST_TEXT(r->run_id), ST_TEXT(assignment_id), ST_TEXT(r->eval_key),
                               ST_TEXT(r->eval_version), ST_TEXT(r->execution_mode),
                               ST_DBL(r->timeout_seconds), ST_DBL(now), ST_INT(lease_generation)));
        if (code) goto fail;
        if (r->descriptor_json) {
            code = st_exec(st, run_doc, "save plan", err,
                           ST_ARGS(ST_TEXT(r->run_id), ST_TEXT(r->descriptor_json)));
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

int st_lease_tx(store *st, const char *assignment_id, int64_t lease_generation,
                double lease_expires_at, store_err *err)
{
    static const char sql[] = "UPDATE assignments SET lease_expires_at = ?2 WHERE id = ?1";
    int64_t gen = 0;
    char status[16];
    int code = assignment_head(st, assignment_id, &gen, status, sizeof status, "extend lease", err);
    if (code) goto fail;
    if (is_terminal(status)) return STORE_OK;
    code = check_gen(assignment_id, gen, lease_generation, "extend lease", err);
    if (code) goto fail;
    code = st_exec(st, sql, "extend lease", err,
                   ST_ARGS(ST_TEXT(assignment_id), ST_DBL(lease_expires_at)));
    if (code) goto fail;
    return STORE_OK;
fail:
    return code;
}

int st_heartbeat_tx(store *st, const char *assignment_id, int64_t lease_generation, double at,
                    const char *outcome, const char *error_code, double lease_expires_at,
                    store_err *err)
{
    /* one row per assignment: the entry is appended to recent_json and the
     * oldest dropped beyond STORE_HEARTBEATS_KEPT */
    static const char sql[] =
        "INSERT INTO assignment_heartbeats(seq, n, first_at, last_at, recent_json)"
        " SELECT seq, 1, ?2, ?2, json_array(json_object('at', ?3, 'outcome', ?4,"
        " 'error_code', ?5, 'lease_generation', ?6, 'lease_expires_at', ?7))"
        " FROM assignments WHERE id = ?1"
        " ON CONFLICT(seq) DO UPDATE SET n = n + 1, last_at = ?2, recent_json ="
        " (SELECT CASE WHEN json_array_length(j) > ?8 THEN json_remove(j, '$[0]') ELSE j END"
        " FROM (SELECT json_insert(assignment_heartbeats.recent_json, '$[#]',"
        " json_object('at', ?3, 'outcome', ?4, 'error_code', ?5, 'lease_generation', ?6,"
        " 'lease_expires_at', ?7)) AS j))";
    char at_s[64], exp_s[64];
    time_rfc3339(at, at_s, sizeof at_s);
    if (lease_expires_at > 0) time_rfc3339(lease_expires_at, exp_s, sizeof exp_s);
    int code = st_exec(st, sql, "record heartbeat", err,
                       ST_ARGS(ST_TEXT(assignment_id), ST_DBL(at), ST_TEXT(at_s), ST_TEXT(outcome),
                               ST_TEXT(error_code), ST_INT(lease_generation),
                               ST_TEXT(lease_expires_at > 0 ? exp_s : NULL),
                               ST_INT(STORE_HEARTBEATS_KEPT)));
    if (code) return code;
    if (sqlite3_changes(st->w.db) == 0)
        return st_errf(err, STORE_NOTFOUND, "record heartbeat: unknown assignment %s",
                       assignment_id);
    return STORE_OK;
}

static const char SQL_ABANDON_RUNS[] =
    "UPDATE runs SET status = 'abandoned' WHERE assignment_id = ?1"
    " AND status IN ('planned','running') AND submit_status = 'none'";

int st_afinish_tx(store *st, const char *assignment_id, int64_t lease_generation,
                  const char *status, const char *error_code, const char *error_message, double now,
                  store_err *err)
{
    static const char sql[] =
        "UPDATE assignments SET status = ?2, finished_at = ?3, error_code = ?4,"
        " error_message = ?5 WHERE id = ?1";
    int64_t gen = 0;
    char cur[16];
    int code = assignment_head(st, assignment_id, &gen, cur, sizeof cur, "finish assignment", err);
    if (code) goto fail;
    if (is_terminal(cur)) return STORE_OK;
    if (lease_generation != 0)
        code = check_gen(assignment_id, gen, lease_generation, "finish assignment", err);
    if (code) goto fail;
    code = st_exec(st, SQL_ABANDON_RUNS, "finish assignment", err, ST_ARGS(ST_TEXT(assignment_id)));
    if (code) goto fail;
    code = st_exec(st, sql, "finish assignment", err,
                   ST_ARGS(ST_TEXT(assignment_id), ST_TEXT(status), ST_DBL(now),
                           ST_TEXTN(error_code, ST_MAX_ERR_CODE),
                           ST_TEXTN(error_message, ST_MAX_ERR_MSG)));
    if (code) goto fail;
    return STORE_OK;
fail:
    return code;
}
