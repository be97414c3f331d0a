/* store/store_query: the admin API's read queries, rendered straight to JSON
 * text from read connections (runs and assignments with filters and keyset
 * pagination, details, charts, summary). Shapes are documented in store.h. */
#include "store/store_int.h"

#include "common/pyfloat.h"
#include "common/timeutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIMIT 500
#define DEFAULT_LIMIT 50

/* ----------------------------------------------------------- JSON helpers */

/* Each writer appends `"key":value,`; jclose drops the trailing comma. The
 * key is a string literal: the macros pass it quoted with its length, so
 * rendering a row costs no strlen and no printf. */
#define JK(k) "\"" k "\":", sizeof(k) + 2

#define jkey(b, k) strbuf_put(b, JK(k))

static void jclose(strbuf *b, char c)
{
    if (b->len > 0 && b->data[b->len - 1] == ',')
        b->data[b->len - 1] = c;
    else
        strbuf_putc(b, c);
}

#define jstr(b, k, s, i) jstr_(b, JK(k), s, i)
static void jstr_(strbuf *b, const char *kq, size_t kn, sqlite3_stmt *s, int i)
{
    strbuf_put(b, kq, kn);
    const unsigned char *t = sqlite3_column_text(s, i);
    if (t == NULL) /* SQL NULL; any other value only on OOM: then "" */
        strbuf_puts(b, sqlite3_column_type(s, i) == SQLITE_NULL ? "null" : "\"\"");
    else
        strbuf_json_strn(b, (const char *)t, (size_t)sqlite3_column_bytes(s, i));
    strbuf_putc(b, ',');
}

#define jint(b, k, s, i) jint_(b, JK(k), s, i)
static void jint_(strbuf *b, const char *kq, size_t kn, sqlite3_stmt *s, int i)
{
    strbuf_put(b, kq, kn);
    if (sqlite3_column_type(s, i) == SQLITE_NULL)
        strbuf_put(b, "null", 4);
    else
        strbuf_put_i64(b, (long long)sqlite3_column_int64(s, i));
    strbuf_putc(b, ',');
}

#define jnum(b, k, s, i) jnum_(b, JK(k), s, i)
static void jnum_(strbuf *b, const char *kq, size_t kn, sqlite3_stmt *s, int i)
{
    strbuf_put(b, kq, kn);
    double v = sqlite3_column_double(s, i);
    if (sqlite3_column_type(s, i) == SQLITE_NULL || !isfinite(v))
        strbuf_put(b, "null", 4);
    else
        pyfloat_repr(b, v); /* shortest round-trip form: no float noise */
    strbuf_putc(b, ',');
}

/* A run's duration in milliseconds to the microsecond: the stored integer
 * (the wire's duration_ms, whole milliseconds) refined by the run's start and
 * finish times (microseconds) when the two agree to within a millisecond; the
 * stored value alone otherwise (a clock step between the two timestamps). */
#define jdur(b, k, s, started, finished, stored) jdur_(b, JK(k), s, started, finished, stored)
static void jdur_(strbuf *b, const char *kq, size_t kn, sqlite3_stmt *s, int started, int finished,
                  int stored)
{
    double t0 = sqlite3_column_double(s, started), t1 = sqlite3_column_double(s, finished);
    double ms = round((t1 - t0) * 1e6) / 1e3;
    if (!(t0 > 0 && t1 >= t0) || sqlite3_column_type(s, stored) == SQLITE_NULL ||
        !(fabs(ms - sqlite3_column_double(s, stored)) < 1.0)) {
        jint_(b, kq, kn, s, stored);
        return;
    }
    strbuf_put(b, kq, kn);
    pyfloat_repr(b, ms);
    strbuf_putc(b, ',');
}

#define jtime(b, k, s, i) jtime_(b, JK(k), s, i)
static void jtime_(strbuf *b, const char *kq, size_t kn, sqlite3_stmt *s, int i)
{
    strbuf_put(b, kq, kn);
    double v = sqlite3_column_double(s, i); /* 0.0 for SQL NULL */
    if (!(v > 0)) {
        strbuf_put(b, "null,", 5);
        return;
    }
    char ts[80];
    ts[0] = '"';
    size_t n = time_rfc3339_n(v, ts + 1);
    ts[n + 1] = '"';
    ts[n + 2] = ',';
    strbuf_put(b, ts, n + 3);
}

/* Stored JSON text (written by the worker) embedded as is. */
#define jraw(b, k, s, i) jraw_(b, JK(k), s, i)
static void jraw_(strbuf *b, const char *kq, size_t kn, sqlite3_stmt *s, int i)
{
    strbuf_put(b, kq, kn);
    if (sqlite3_column_type(s, i) == SQLITE_NULL || sqlite3_column_bytes(s, i) == 0)
        strbuf_put(b, "null", 4);
    else
        strbuf_put(b, sqlite3_column_text(s, i), (size_t)sqlite3_column_bytes(s, i));
    strbuf_putc(b, ',');
}

/* Ends a JSON query's read transaction and gives its connection back;
 * when it failed (code != STORE_OK), drops what it appended to out since
 * `start`. Returns code. */
static int read_done(store *st, sconn *c, strbuf *out, size_t start, int code)
{
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    if (code != STORE_OK) {
        out->len = start;
        if (out->data) out->data[start] = '\0';
    }
    return code;
}

/* ------------------------------------------------------------ validation */

static const char *const RUN_STATUSES[] = {"planned",   "running",   "succeeded", "failed",
                                           "timed_out", "cancelled", "abandoned", NULL};
static const char *const ASG_STATUSES[] = {"claimed", "planned", "completed", "skipped",
                                           "failed",  "lost",    "dropped",   NULL};

const char *const *store_run_statuses(void)
{
    return RUN_STATUSES;
}

const char *const *store_assignment_statuses(void)
{
    return ASG_STATUSES;
}

static int in_set(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(s, *set) == 0) return 1;
    return 0;
}

static int parse_limit(int limit, int *out, store_err *err)
{
    if (limit == 0) limit = DEFAULT_LIMIT;
    if (limit < 1 || limit > MAX_LIMIT)
        return st_errf(err, STORE_INVALID, "limit must be between 1 and %d", MAX_LIMIT);
    *out = limit;
    return STORE_OK;
}

/* Cursor: the decimal seq of the last row of the previous page. */
static int parse_cursor(const char *c, int64_t *out, store_err *err)
{
    *out = INT64_MAX;
    if (!c || !c[0]) return STORE_OK;
    size_t n = strlen(c);
    if (n > 18) goto bad;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i] < '0' || c[i] > '9') goto bad;
        v = v * 10 + (c[i] - '0');
    }
    if (v <= 0) goto bad;
    *out = v;
    return STORE_OK;
bad:
    return st_errf(err, STORE_INVALID, "cursor is not a valid pagination cursor");
}

/* ------------------------------------------------------------------ runs */

#define RUN_ITEM_COLS                                                                              \
    "seq, id, assignment_id, eval_key, eval_version, execution_mode, status, submit_status,"       \
    " created_at, started_at, finished_at, duration_ms, error_code, summary"

#define RUN_ITEM_COLS_R                                                                            \
    "r.seq, r.id, r.assignment_id, r.eval_key, r.eval_version, r.execution_mode, r.status,"        \
    " r.submit_status, r.created_at, r.started_at, r.finished_at, r.duration_ms,"                  \
    " r.error_code, r.summary"

static void run_item_fields(strbuf *b, sqlite3_stmt *s)
{
    jstr(b, "id", s, 1);
    jstr(b, "assignment_id", s, 2);
    jstr(b, "eval_key", s, 3);
    jstr(b, "eval_version", s, 4);
    jstr(b, "execution_mode", s, 5);
    jstr(b, "status", s, 6);
    jstr(b, "submit_status", s, 7);
    jtime(b, "created_at", s, 8);
    jtime(b, "started_at", s, 9);
    jtime(b, "finished_at", s, 10);
    jdur(b, "duration_ms", s, 9, 10, 11);
    jstr(b, "error_code", s, 12);
    jstr(b, "summary", s, 13);
}

static char RUN_LIST_SQL[8][512];
static char ASG_LIST_SQL[3][1024];
static char ASG_ONE_SQL[1536];
static pthread_once_t q_once = PTHREAD_ONCE_INIT;

#define ASG_COLS                                                                                   \
    "a.seq, a.id, a.worker_id, a.lease_generation, a.lease_expires_at, a.status,"                  \
    " a.session_id, a.session_revision_id, a.agent_id, a.environment, a.trigger_reason,"           \
    " a.event_count, a.claimed_at, a.planned_at, a.finished_at, a.error_code,"                     \
    " a.error_message,"                                                                            \
    " (SELECT count(*) FROM runs r WHERE r.assignment_id = a.id),"                                 \
    " (SELECT count(*) FROM runs r WHERE r.assignment_id = a.id"                                   \
    "   AND r.status NOT IN ('planned','running')),"                                               \
    " (SELECT count(*) FROM runs r WHERE r.assignment_id = a.id"                                   \
    "   AND r.submit_status = 'pending'),"                                                         \
    " (SELECT json_group_object(status, n) FROM (SELECT status, count(*) AS n FROM runs r"         \
    "   WHERE r.assignment_id = a.id GROUP BY status)),"                                           \
    " (SELECT coalesce(json_array_length(d.plan_request_json, '$.skipped'), 0)"                    \
    "   FROM assignment_docs d WHERE d.seq = a.seq)"

static void build_queries(void)
{
    for (int m = 0; m < 8; m++) {
        /* An assignment has a handful of runs: with that filter its index
         * is always the one to use (without ANALYZE statistics SQLite picks
         * the status or eval_key index and may walk most of the table). */
        snprintf(RUN_LIST_SQL[m], sizeof RUN_LIST_SQL[m],
                 "SELECT " RUN_ITEM_COLS " FROM runs%s WHERE seq < ?1%s%s%s"
                 " ORDER BY seq DESC LIMIT ?5",
                 (m & 4) ? " INDEXED BY runs_assignment" : "", (m & 1) ? " AND status = ?2" : "",
                 (m & 2) ? " AND eval_key = ?3" : "", (m & 4) ? " AND assignment_id = ?4" : "");
    }
    const char *filt[3] = {"", " AND a.status IN " ST_ACTIVE_SQL, " AND a.status = ?2"};
    for (int m = 0; m < 3; m++)
        snprintf(ASG_LIST_SQL[m], sizeof ASG_LIST_SQL[m],
                 "SELECT " ASG_COLS " FROM assignments a WHERE a.seq < ?1%s"
                 " ORDER BY a.seq DESC LIMIT ?3",
                 filt[m]);
    snprintf(ASG_ONE_SQL, sizeof ASG_ONE_SQL,
             "SELECT " ASG_COLS ", d.definitions_json, d.plan_request_json,"
             " d.plan_response_json FROM assignments a LEFT JOIN assignment_docs d"
             " ON d.seq = a.seq WHERE a.id = ?1");
}

/* Appends one keyset page {"<key>":[ITEM...],"next_cursor":"<id>"|null} from
 * `s`, whose first column is the row's cursor id and which was bound to fetch
 * limit + 1 rows (the extra one only says a next page exists). On an SQLite
 * error nothing is appended and the error is returned. */
static int emit_page(sqlite3_stmt *s, sqlite3 *db, int limit, const char *key,
                     void (*fields)(strbuf *, sqlite3_stmt *), const char *what, strbuf *out,
                     store_err *err)
{
    size_t start = out->len;
    strbuf_reserve(out, (size_t)limit * 400 + 64); /* one allocation for a typical page */
    strbuf_putc(out, '{');
    strbuf_json_str(out, key);
    strbuf_puts(out, ":[");
    int rows = 0, rc, more = 0;
    int64_t last = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (rows == limit) {
            more = 1;
            break;
        }
        strbuf_putc(out, '{');
        fields(out, s);
        jclose(out, '}');
        strbuf_putc(out, ',');
        last = sqlite3_column_int64(s, 0);
        rows++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        out->len = start;
        if (out->data) out->data[start] = '\0';
        return st_sqlfail(err, db, rc, what);
    }
    jclose(out, ']');
    if (more) {
        strbuf_puts(out, ",\"next_cursor\":\"");
        strbuf_put_i64(out, (long long)last);
        strbuf_puts(out, "\"}");
    } else
        strbuf_puts(out, ",\"next_cursor\":null}");
    return STORE_OK;
}

int store_runs_list_json(store *st, const store_run_filter *f, strbuf *out, store_err *err)
{
    pthread_once(&q_once, build_queries);
    int limit = 0;
    int64_t cursor = 0;
    int code = parse_limit(f ? f->limit : 0, &limit, err);
    if (code) return code;
    code = parse_cursor(f ? f->cursor : NULL, &cursor, err);
    if (code) return code;
    const char *status = f && f->status && f->status[0] ? f->status : NULL;
    const char *key = f && f->eval_key && f->eval_key[0] ? f->eval_key : NULL;
    const char *asg = f && f->assignment_id && f->assignment_id[0] ? f->assignment_id : NULL;
    if (status && !in_set(status, RUN_STATUSES))
        return st_errf(err, STORE_INVALID,
                       "status must be one of planned, running, succeeded, failed, timed_out, "
                       "cancelled, abandoned");
    int m = (status ? 1 : 0) | (key ? 2 : 0) | (asg ? 4 : 0);
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, RUN_LIST_SQL[m]);
    if (!s) {
        code = st_sqlfail(err, c->db, sqlite3_errcode(c->db), "list runs");
        st_rput(st, c);
        return code;
    }
    st_bind_int(s, 1, cursor);
    if (status) st_bind_text(s, 2, status);
    if (key) st_bind_text(s, 3, key);
    if (asg) st_bind_text(s, 4, asg);
    st_bind_int(s, 5, limit + 1);
    code = emit_page(s, c->db, limit, "runs", run_item_fields, "list runs", out, err);
    sqlite3_reset(s);
    st_rput(st, c);
    return code;
}

/* One submission attempt's fields from columns c..c+6 of `a`: attempt, at,
 * outcome, http_status, duration_ms, error_code, message. */
static void attempt_fields(strbuf *b, sqlite3_stmt *a, int c)
{
    jint(b, "attempt", a, c);
    jtime(b, "at", a, c + 1);
    jstr(b, "outcome", a, c + 2);
    jint(b, "http_status", a, c + 3);
    jint(b, "duration_ms", a, c + 4);
    jstr(b, "error_code", a, c + 5);
    jstr(b, "message", a, c + 6);
}

int store_run_get_json(store *st, const char *run_id, strbuf *out, store_err *err)
{
    static const char sql[] =
        "SELECT " RUN_ITEM_COLS_R ", r.lease_generation, r.worker_id, r.timeout_seconds,"
        " d.descriptor_json, d.results_json, r.error_message, r.submission_id, r.attempts,"
        " r.first_attempt_at, r.last_attempt_at, r.submit_error_code, r.submit_error_message,"
        " r.body_bytes FROM runs r LEFT JOIN run_docs d ON d.seq = r.seq WHERE r.id = ?1";
    static const char att[] =
        "SELECT attempt, at, outcome, http_status, duration_ms, error_code, message, request_id"
        " FROM submit_attempts WHERE run_id = ?1 ORDER BY id";
    if (!run_id) return st_errf(err, STORE_INVALID, "run id is required");
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    int code = STORE_OK;
    size_t start = out->len;
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = s ? (st_bind_text(s, 1, run_id), sqlite3_step(s)) : sqlite3_errcode(c->db);
    if (rc == SQLITE_DONE) {
        code = STORE_NOTFOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        code = st_sqlfail(err, c->db, rc, "get run");
        goto done;
    }
    strbuf_putc(out, '{');
    run_item_fields(out, s);
    jint(out, "lease_generation", s, 14);
    jstr(out, "worker_id", s, 15);
    jnum(out, "timeout_seconds", s, 16);
    jraw(out, "descriptor", s, 17);
    jraw(out, "results", s, 18);
    jstr(out, "error_message", s, 19);
    jkey(out, "submission");
    if (sqlite3_column_type(s, 20) == SQLITE_NULL) {
        strbuf_puts(out, "null}");
        goto done;
    }
    strbuf_putc(out, '{');
    jstr(out, "submission_id", s, 20);
    jstr(out, "status", s, 7);
    jint(out, "attempts_count", s, 21);
    jtime(out, "first_attempt_at", s, 22);
    jtime(out, "last_attempt_at", s, 23);
    jstr(out, "error_code", s, 24);
    jstr(out, "error_message", s, 25);
    jint(out, "body_bytes", s, 26);
    strbuf_puts(out, "\"attempts\":[");
    sqlite3_stmt *a = st_stmt(c, att);
    rc = a ? (st_bind_text(a, 1, run_id), sqlite3_step(a)) : sqlite3_errcode(c->db);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(a)) {
        strbuf_putc(out, '{');
        attempt_fields(out, a, 0);
        jstr(out, "request_id", a, 7);
        jclose(out, '}');
        strbuf_putc(out, ',');
    }
    if (a) sqlite3_reset(a);
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "get run attempts");
        goto done;
    }
    jclose(out, ']');
    strbuf_puts(out, "}}");
done:
    if (s) sqlite3_reset(s);
    return read_done(st, c, out, start, code);
}

/* ------------------------------------------------------------ assignments */

static void asg_fields(strbuf *b, sqlite3_stmt *s)
{
    jstr(b, "id", s, 1);
    jstr(b, "worker_id", s, 2);
    jint(b, "lease_generation", s, 3);
    jtime(b, "lease_expires_at", s, 4);
    jstr(b, "status", s, 5);
    jstr(b, "session_id", s, 6);
    jstr(b, "session_revision_id", s, 7);
    jstr(b, "agent_id", s, 8);
    jstr(b, "environment", s, 9);
    jstr(b, "trigger_reason", s, 10);
    jint(b, "event_count", s, 11);
    jtime(b, "claimed_at", s, 12);
    jtime(b, "planned_at", s, 13);
    jtime(b, "finished_at", s, 14);
    jstr(b, "error_code", s, 15);
    jstr(b, "error_message", s, 16);
    strbuf_puts(b, "\"runs\":{\"total\":");
    strbuf_put_i64(b, (long long)sqlite3_column_int64(s, 17));
    strbuf_puts(b, ",\"finished\":");
    strbuf_put_i64(b, (long long)sqlite3_column_int64(s, 18));
    strbuf_puts(b, ",\"pending_submissions\":");
    strbuf_put_i64(b, (long long)sqlite3_column_int64(s, 19));
    strbuf_puts(b, ",\"by_status\":");
    const unsigned char *by = sqlite3_column_text(s, 20); /* JSON text from SQLite */
    strbuf_puts(b, by != NULL ? (const char *)by : "{}");
    strbuf_puts(b, ",\"skipped\":"); /* definitions whose condition did not apply */
    strbuf_put_i64(b, (long long)sqlite3_column_int64(s, 21));
    strbuf_puts(b, "},");
}

int store_assignments_list_json(store *st, const store_assignment_filter *f, strbuf *out,
                                store_err *err)
{
    pthread_once(&q_once, build_queries);
    int limit = 0;
    int64_t cursor = 0;
    int code = parse_limit(f ? f->limit : 0, &limit, err);
    if (code) return code;
    code = parse_cursor(f ? f->cursor : NULL, &cursor, err);
    if (code) return code;
    const char *status = f && f->status && f->status[0] ? f->status : NULL;
    int m = 0;
    if (status && strcmp(status, "active") == 0)
        m = 1;
    else if (status && in_set(status, ASG_STATUSES))
        m = 2;
    else if (status)
        return st_errf(err, STORE_INVALID,
                       "status must be one of active, claimed, planned, completed, skipped, "
                       "failed, lost, dropped");
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, ASG_LIST_SQL[m]);
    if (!s) {
        code = st_sqlfail(err, c->db, sqlite3_errcode(c->db), "list assignments");
        st_rput(st, c);
        return code;
    }
    st_bind_int(s, 1, cursor);
    if (m == 2) st_bind_text(s, 2, status);
    st_bind_int(s, 3, limit + 1);
    code = emit_page(s, c->db, limit, "assignments", asg_fields, "list assignments", out, err);
    sqlite3_reset(s);
    st_rput(st, c);
    return code;
}

/* Appends "submissions":[...]: every result submission attempt of the
 * assignment's runs, in the order they were made (the detail's timeline). */
static int assignment_submissions(sconn *c, const char *assignment_id, strbuf *out, store_err *err)
{
    static const char sql[] =
        "SELECT t.run_id, t.attempt, t.at, t.outcome, t.http_status, t.duration_ms, t.error_code,"
        " t.message FROM submit_attempts t JOIN runs r ON r.id = t.run_id"
        " WHERE r.assignment_id = ?1 ORDER BY t.id";
    sqlite3_stmt *a = st_stmt(c, sql);
    int rc = a ? (st_bind_text(a, 1, assignment_id), sqlite3_step(a)) : sqlite3_errcode(c->db);
    strbuf_puts(out, "\"submissions\":[");
    for (; rc == SQLITE_ROW; rc = sqlite3_step(a)) {
        strbuf_putc(out, '{');
        jstr(out, "run_id", a, 0);
        attempt_fields(out, a, 1);
        jclose(out, '}');
        strbuf_putc(out, ',');
    }
    if (a) sqlite3_reset(a);
    if (rc != SQLITE_DONE) return st_sqlfail(err, c->db, rc, "get assignment submissions");
    jclose(out, ']');
    return STORE_OK;
}

/* Appends "heartbeats":{...}: the assignment's bounded heartbeat history
 * (count, first and last, the last few with their outcome; zero and empty
 * before the first). */
static int assignment_heartbeats(sconn *c, const char *assignment_id, strbuf *out, store_err *err)
{
    static const char sql[] = "SELECT h.n, h.first_at, h.last_at, h.recent_json"
                              " FROM assignment_heartbeats h JOIN assignments a ON a.seq = h.seq"
                              " WHERE a.id = ?1";
    sqlite3_stmt *h = st_stmt(c, sql);
    int rc = h ? (st_bind_text(h, 1, assignment_id), sqlite3_step(h)) : sqlite3_errcode(c->db);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        if (h) sqlite3_reset(h);
        return st_sqlfail(err, c->db, rc, "get assignment heartbeats");
    }
    strbuf_puts(out, "\"heartbeats\":{\"count\":");
    strbuf_put_i64(out, rc == SQLITE_ROW ? (long long)sqlite3_column_int64(h, 0) : 0);
    strbuf_puts(out, ",\"kept\":");
    strbuf_put_i64(out, STORE_HEARTBEATS_KEPT);
    strbuf_putc(out, ',');
    if (rc == SQLITE_ROW) {
        jtime(out, "first_at", h, 1);
        jtime(out, "last_at", h, 2);
        jraw(out, "recent", h, 3);
        jclose(out, '}');
    } else {
        strbuf_puts(out, "\"first_at\":null,\"last_at\":null,\"recent\":[]}");
    }
    if (h) sqlite3_reset(h);
    return STORE_OK;
}

int store_assignment_get_json(store *st, const char *assignment_id, strbuf *out, store_err *err)
{
    static const char runs_sql[] =
        "SELECT " RUN_ITEM_COLS " FROM runs WHERE assignment_id = ?1 ORDER BY seq";
    pthread_once(&q_once, build_queries);
    if (!assignment_id) return st_errf(err, STORE_INVALID, "assignment id is required");
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    int code = STORE_OK;
    size_t start = out->len;
    sqlite3_stmt *s = st_stmt(c, ASG_ONE_SQL), *r = NULL;
    int rc = s ? (st_bind_text(s, 1, assignment_id), sqlite3_step(s)) : sqlite3_errcode(c->db);
    if (rc == SQLITE_DONE) {
        code = STORE_NOTFOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        code = st_sqlfail(err, c->db, rc, "get assignment");
        goto done;
    }
    strbuf_putc(out, '{');
    asg_fields(out, s);
    jraw(out, "definitions", s, 22);
    jraw(out, "plan_request", s, 23);
    jraw(out, "plan_response", s, 24);
    strbuf_puts(out, "\"run_list\":[");
    r = st_stmt(c, runs_sql);
    rc = r ? (st_bind_text(r, 1, assignment_id), sqlite3_step(r)) : sqlite3_errcode(c->db);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(r)) {
        strbuf_putc(out, '{');
        run_item_fields(out, r);
        jclose(out, '}');
        strbuf_putc(out, ',');
    }
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "get assignment runs");
        goto done;
    }
    jclose(out, ']');
    strbuf_putc(out, ',');
    code = assignment_submissions(c, assignment_id, out, err);
    if (code != STORE_OK) goto done;
    strbuf_putc(out, ',');
    code = assignment_heartbeats(c, assignment_id, out, err);
    if (code != STORE_OK) goto done;
    strbuf_putc(out, '}');
done:
    if (s) sqlite3_reset(s);
    if (r) sqlite3_reset(r);
    return read_done(st, c, out, start, code);
}

/* ------------------------------------------------------------ id prefixes */

int store_resolve_id(store *st, const char *table, const char *prefix, char *full, size_t cap,
                     strbuf *matches, store_err *err)
{
    static const char runs_sql[] = "SELECT id FROM runs WHERE id GLOB ?1 ORDER BY id LIMIT 6";
    static const char asg_sql[] = "SELECT id FROM assignments WHERE id GLOB ?1 ORDER BY id LIMIT 6";
    const char *sql = !strcmp(table, "runs") ? runs_sql : asg_sql;
    size_t n = prefix ? strlen(prefix) : 0;
    if (n == 0 || n > 200) return st_errf(err, STORE_INVALID, "id prefix must be 1 to 200 bytes");
    for (size_t i = 0; i < n; i++) /* GLOB's own characters never reach the pattern */
        if (strchr("*?[]", prefix[i]) != NULL) return STORE_NOTFOUND;
    char pat[208];
    snprintf(pat, sizeof pat, "%s*", prefix);
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = s ? (st_bind_text(s, 1, pat), sqlite3_step(s)) : sqlite3_errcode(c->db);
    int found = 0;
    strbuf_putc(matches, '[');
    for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
        const char *id = (const char *)sqlite3_column_text(s, 0);
        if (found++) strbuf_putc(matches, ',');
        strbuf_json_str(matches, id ? id : "");
        if (found == 1) snprintf(full, cap, "%s", id ? id : "");
    }
    strbuf_putc(matches, ']');
    if (s) sqlite3_reset(s);
    int code = rc == SQLITE_DONE ? STORE_OK : st_sqlfail(err, c->db, rc, "resolve id");
    st_rput(st, c);
    if (code != STORE_OK) return code;
    if (found == 0) return STORE_NOTFOUND;
    if (found > 1)
        return st_errf(err, STORE_CONFLICT, "id prefix '%s' matches several ids", prefix);
    return STORE_OK;
}

/* ---------------------------------------------------------------- outbox */

int store_outbox_json(store *st, double now, int limit, strbuf *out, store_err *err)
{
    static const char sql[] =
        "SELECT o.run_id, o.submission_id, o.assignment_id, r.eval_key, o.created_at, o.attempts,"
        " r.last_attempt_at,"
        /* a pending entry's last error is its latest attempt's (a retry's
         * error is kept with the attempt, not on the run) */
        " coalesce((SELECT coalesce(a.error_code, CASE WHEN a.http_status > 0 THEN 'http_error'"
        "   ELSE 'transport_error' END) FROM submit_attempts a WHERE a.run_id = o.run_id"
        "   ORDER BY a.id DESC LIMIT 1), r.submit_error_code),"
        " coalesce((SELECT a.message FROM submit_attempts a WHERE a.run_id = o.run_id"
        "   ORDER BY a.id DESC LIMIT 1), r.submit_error_message),"
        " (SELECT count(*) FROM outbox) FROM outbox o LEFT JOIN runs r ON r.id = o.run_id"
        " ORDER BY o.seq LIMIT ?1";
    if (limit < 1 || limit > MAX_LIMIT)
        return st_errf(err, STORE_INVALID, "limit must be between 1 and %d", MAX_LIMIT);
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    size_t start = out->len;
    sqlite3_stmt *s = st_stmt(c, sql);
    if (s) st_bind_int(s, 1, limit);
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    long long depth = rc == SQLITE_ROW ? (long long)sqlite3_column_int64(s, 9) : 0;
    strbuf_puts(out, "{\"pending\":[");
    for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
        strbuf_putc(out, '{');
        jstr(out, "run_id", s, 0);
        jstr(out, "submission_id", s, 1);
        jstr(out, "assignment_id", s, 2);
        jstr(out, "eval_key", s, 3);
        jtime(out, "queued_at", s, 4);
        strbuf_puts(out, "\"age_seconds\":");
        pyfloat_repr(out, round((now - sqlite3_column_double(s, 4)) * 1000) / 1000);
        strbuf_putc(out, ',');
        jint(out, "attempts", s, 5);
        jtime(out, "last_attempt_at", s, 6);
        jstr(out, "last_error_code", s, 7);
        jstr(out, "last_error_message", s, 8);
        jclose(out, '}');
        strbuf_putc(out, ',');
    }
    jclose(out, ']');
    strbuf_printf(out, ",\"depth\":%lld}", depth);
    int code = STORE_OK;
    if (s) sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "outbox");
        out->len = start;
        if (out->data) out->data[start] = '\0';
    }
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    return code;
}

/* ---------------------------------------------------------------- catalog */

/* The managed definitions the newest ?1 assignments carried (each eval_key
 * once: the newest assignment's definition), with the newest stored managed
 * run of that key and version, whose descriptor (the plan's run as
 * received) holds the evaluator source. */
static const char CATALOG_SQL[] =
    "WITH recent AS (SELECT a.seq, a.id, a.claimed_at, d.definitions_json AS defs"
    "   FROM assignments a JOIN assignment_docs d ON d.seq = a.seq"
    "   WHERE json_valid(d.definitions_json) ORDER BY a.seq DESC LIMIT ?1),"
    " seen AS (SELECT r.seq, r.id AS assignment_id, r.claimed_at, j.value AS def,"
    "   json_extract(j.value, '$.eval_key') AS k, json_extract(j.value, '$.eval_version') AS v"
    "   FROM recent r, json_each(r.defs) j"
    "   WHERE json_extract(j.value, '$.execution_mode') = 'python'"
    "   AND json_type(j.value, '$.eval_key') = 'text'"
    "   AND json_type(j.value, '$.eval_version') = 'text'),"
    " newest AS (SELECT s.*, (SELECT x.seq FROM runs x WHERE x.eval_key = s.k"
    "   AND x.eval_version = s.v AND x.execution_mode = 'python' ORDER BY x.seq DESC LIMIT 1)"
    "   AS run_seq FROM (SELECT seen.*, row_number() OVER (PARTITION BY k ORDER BY seq DESC)"
    "   AS nth FROM seen) s WHERE s.nth = 1)"
    " SELECT n.k, n.v, json_extract(n.def, '$.display_name'),"
    " json_extract(n.def, '$.result_kind'),"
    " CASE json_type(n.def, '$.labels') WHEN 'array' THEN json_extract(n.def, '$.labels')"
    "   ELSE '[]' END,"
    " json_extract(n.def, '$.condition_source'),"
    " coalesce(json_extract(n.def, '$.timeout_seconds'),"
    "   json_extract(d.descriptor_json, '$.timeout_seconds')),"
    " n.assignment_id, n.claimed_at, x.id, x.created_at,"
    " json_extract(d.descriptor_json, '$.evaluator_source'),"
    " coalesce(json_extract(d.descriptor_json, '$.source_checksum'),"
    "   json_extract(n.def, '$.source_checksum'))"
    " FROM newest n LEFT JOIN runs x ON x.seq = n.run_seq LEFT JOIN run_docs d ON d.seq = x.seq"
    " ORDER BY n.k";

int store_catalog_json(store *st, int assignments, strbuf *out, store_err *err)
{
    static const char count_sql[] =
        "SELECT count(*) FROM (SELECT 1 FROM assignments a JOIN assignment_docs d"
        " ON d.seq = a.seq WHERE json_valid(d.definitions_json) ORDER BY a.seq DESC LIMIT ?1)";
    if (assignments < 1 || assignments > MAX_LIMIT)
        return st_errf(err, STORE_INVALID, "assignments must be between 1 and %d", MAX_LIMIT);
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    size_t start = out->len;
    int code = STORE_OK;
    sqlite3_stmt *n = st_stmt(c, count_sql), *s = NULL;
    if (n) st_bind_int(n, 1, assignments);
    int rc = n ? sqlite3_step(n) : sqlite3_errcode(c->db);
    if (rc != SQLITE_ROW) {
        code = st_sqlfail(err, c->db, rc, "catalog");
        goto done;
    }
    strbuf_printf(out, "{\"assignments_scanned\":%lld,\"definitions\":[",
                  (long long)sqlite3_column_int64(n, 0));
    s = st_stmt(c, CATALOG_SQL);
    if (s) st_bind_int(s, 1, assignments);
    rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
        strbuf_putc(out, '{');
        jstr(out, "eval_key", s, 0);
        jstr(out, "eval_version", s, 1);
        /* what POST /v1/backtests takes, when the source is known */
        if (sqlite3_column_type(s, 11) == SQLITE_TEXT) {
            strbuf_puts(out, "\"definition\":{");
            jstr(out, "eval_key", s, 0);
            jstr(out, "eval_version", s, 1);
            jstr(out, "display_name", s, 2);
            jstr(out, "result_kind", s, 3);
            jraw(out, "labels", s, 4);
            jstr(out, "condition_source", s, 5);
            jstr(out, "evaluator_source", s, 11);
            if (sqlite3_column_type(s, 6) == SQLITE_INTEGER) /* as the server sent it */
                jint(out, "timeout_seconds", s, 6);
            else
                jnum(out, "timeout_seconds", s, 6);
            jclose(out, '}');
            strbuf_putc(out, ',');
        } else {
            strbuf_puts(out, "\"definition\":null,");
        }
        jstr(out, "source_checksum", s, 12);
        jstr(out, "assignment_id", s, 7);
        jtime(out, "seen_at", s, 8);
        jstr(out, "source_run_id", s, 9);
        jtime(out, "source_run_at", s, 10);
        jclose(out, '}');
        strbuf_putc(out, ',');
    }
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "catalog");
        goto done;
    }
    jclose(out, ']');
    strbuf_putc(out, '}');
done:
    if (n) sqlite3_reset(n);
    if (s) sqlite3_reset(s);
    return read_done(st, c, out, start, code);
}

/* ------------------------------------------------------------- last error */

/* The newest run with one status (an index lookup on runs_status). */
#define LAST_OF(status)                                                                            \
    "SELECT id, assignment_id, eval_key, execution_mode, status, error_code, error_message,"       \
    " finished_at FROM runs WHERE status = '" status "' ORDER BY seq DESC LIMIT 1"

int store_last_failed_run_json(store *st, strbuf *out, store_err *err)
{
    static const char sql[] =
        "SELECT * FROM (SELECT * FROM (" LAST_OF("failed") ") UNION ALL SELECT * FROM (" LAST_OF(
            "timed_out") ")) ORDER BY finished_at DESC LIMIT 1";
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    int code = STORE_OK;
    if (rc == SQLITE_ROW) {
        strbuf_putc(out, '{');
        jstr(out, "run_id", s, 0);
        jstr(out, "assignment_id", s, 1);
        jstr(out, "eval_key", s, 2);
        jstr(out, "execution_mode", s, 3);
        jstr(out, "status", s, 4);
        jstr(out, "code", s, 5);
        jstr(out, "message", s, 6);
        jtime(out, "at", s, 7);
        jclose(out, '}');
    } else if (rc == SQLITE_DONE) {
        strbuf_puts(out, "null");
    } else {
        code = st_sqlfail(err, c->db, rc, "last failed run");
    }
    if (s) sqlite3_reset(s);
    st_rput(st, c);
    return code;
}

/* ----------------------------------------------------------------- charts */

#define N_BUCKETS 160

typedef struct {
    int64_t counts[4];
    int64_t lat[N_BUCKETS];
    int64_t lat_total;
} minute_acc;

static double percentile(const minute_acc *m, double q)
{
    if (m->lat_total == 0) return NAN;
    int64_t rank = (int64_t)ceil(q * (double)m->lat_total);
    if (rank < 1) rank = 1;
    int64_t seen = 0;
    for (int b = 0; b < N_BUCKETS; b++) {
        seen += m->lat[b];
        if (seen >= rank) return st_bucket_value(b);
    }
    return st_bucket_value(N_BUCKETS - 1);
}

static void put_pct(strbuf *b, const char *k, double v)
{
    if (isnan(v))
        strbuf_printf(b, "\"%s\":null,", k);
    else
        strbuf_printf(b, "\"%s\":%.1f,", k, v);
}

int store_charts_json(store *st, double now, int minutes, strbuf *out, store_err *err)
{
    static const char stats[] =
        "SELECT minute, status, count FROM minute_stats WHERE minute BETWEEN ?1 AND ?2";
    static const char lat[] =
        "SELECT minute, bucket, count FROM minute_latency WHERE minute BETWEEN ?1 AND ?2";
    static const char *const names[4] = {"succeeded", "failed", "timed_out", "cancelled"};
    if (minutes == 0) minutes = 60;
    if (minutes < 1 || minutes > 1440)
        return st_errf(err, STORE_INVALID, "minutes must be between 1 and 1440");
    int64_t last = (int64_t)floor(now / 60.0), first = last - minutes + 1;
    minute_acc *acc = calloc((size_t)minutes, sizeof *acc);
    if (!acc) abort();
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    int code = STORE_OK, rc;
    sqlite3_stmt *s = st_stmt(c, stats);
    rc = s ? (st_bind_int(s, 1, first), st_bind_int(s, 2, last), sqlite3_step(s))
           : sqlite3_errcode(c->db);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
        int64_t mi = sqlite3_column_int64(s, 0) - first;
        const char *stt = (const char *)sqlite3_column_text(s, 1);
        for (int k = 0; k < 4 && stt; k++)
            if (strcmp(stt, names[k]) == 0) acc[mi].counts[k] += sqlite3_column_int64(s, 2);
    }
    if (s) sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "charts");
        goto done;
    }
    s = st_stmt(c, lat);
    rc = s ? (st_bind_int(s, 1, first), st_bind_int(s, 2, last), sqlite3_step(s))
           : sqlite3_errcode(c->db);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
        int64_t mi = sqlite3_column_int64(s, 0) - first;
        int64_t b = sqlite3_column_int64(s, 1);
        int64_t n = sqlite3_column_int64(s, 2);
        if (b < 0) b = 0;
        if (b >= N_BUCKETS) b = N_BUCKETS - 1;
        acc[mi].lat[b] += n;
        acc[mi].lat_total += n;
    }
    if (s) sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "charts");
        goto done;
    }
    strbuf_puts(out, "{\"minutes\":[");
    for (int i = 0; i < minutes; i++) {
        char ts[40];
        time_rfc3339((double)(first + i) * 60.0, ts, sizeof ts);
        strbuf_printf(out, "{\"t\":\"%s\",", ts);
        int64_t total = 0;
        for (int k = 0; k < 4; k++) {
            strbuf_printf(out, "\"%s\":%lld,", names[k], (long long)acc[i].counts[k]);
            total += acc[i].counts[k];
        }
        put_pct(out, "p50_ms", percentile(&acc[i], 0.50));
        put_pct(out, "p90_ms", percentile(&acc[i], 0.90));
        put_pct(out, "p99_ms", percentile(&acc[i], 0.99));
        strbuf_printf(out, "\"count\":%lld}%s", (long long)total, i + 1 < minutes ? "," : "");
    }
    strbuf_puts(out, "]}");
done:
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    free(acc);
    return code;
}

/* ------------------------------------------------- charts from the runs */

/* Latencies (ms) of one minute and mode: a growable array. */
typedef struct {
    double *v;
    size_t n, cap;
} lat_list;

static void lat_push(lat_list *l, double ms)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        double *nv = realloc(l->v, cap * sizeof *nv);
        if (nv == NULL) return; /* a percentile of fewer samples */
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = ms;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted list (NAN when empty). */
static double rank_pct(const lat_list *l, double q)
{
    if (l->n == 0) return NAN;
    size_t r = (size_t)ceil(q * (double)l->n);
    return l->v[(r < 1 ? 1 : r) - 1];
}

static void put_ms(strbuf *b, const char *k, double v)
{
    strbuf_printf(b, "\"%s\":", k);
    if (isnan(v))
        strbuf_puts(b, "null");
    else
        pyfloat_repr(b, round(v * 1000) / 1000);
    strbuf_putc(b, ',');
}

int store_charts_runs_json(store *st, double now, int minutes, const char *eval_key, strbuf *out,
                           store_err *err)
{
    static const char all_sql[] = "SELECT created_at, started_at, finished_at, status,"
                                  " execution_mode, duration_ms FROM runs ORDER BY seq DESC";
    static const char key_sql[] =
        "SELECT created_at, started_at, finished_at, status, execution_mode, duration_ms"
        " FROM runs INDEXED BY runs_eval_key WHERE eval_key = ?1 ORDER BY seq DESC";
    static const char *const names[4] = {"succeeded", "failed", "timed_out", "cancelled"};
    static const char *const modes[2] = {"python", "local"};
    if (minutes == 0) minutes = 60;
    if (minutes < 1 || minutes > 1440)
        return st_errf(err, STORE_INVALID, "minutes must be between 1 and 1440");
    int64_t last = (int64_t)floor(now / 60.0), first = last - minutes + 1;
    int64_t(*counts)[4] = calloc((size_t)minutes, sizeof *counts);
    lat_list(*lat)[2] = calloc((size_t)minutes, sizeof *lat);
    if (!counts || !lat) abort();
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    int code = STORE_OK, rc;
    const char *sql = eval_key ? key_sql : all_sql;
    sqlite3_stmt *s = st_stmt(c, sql);
    if (s && eval_key) st_bind_text(s, 1, eval_key);
    rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    /* Newest first; a run is finished within its timeout (at most 300 s for
     * local runs) of its creation, so older ones cannot end in the window. */
    for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
        if (sqlite3_column_double(s, 0) < (double)first * 60.0 - 900.0) break;
        double t1 = sqlite3_column_double(s, 2);
        int64_t mi = (int64_t)floor(t1 / 60.0) - first;
        if (!(t1 > 0) || mi < 0 || mi >= minutes) continue;
        const char *stt = (const char *)sqlite3_column_text(s, 3);
        for (int k = 0; k < 4 && stt; k++)
            if (strcmp(stt, names[k]) == 0) counts[mi][k]++;
        const char *mode = (const char *)sqlite3_column_text(s, 4);
        int m = mode && strcmp(mode, "local") == 0;
        double t0 = sqlite3_column_double(s, 1), ms = round((t1 - t0) * 1e6) / 1e3;
        if (!(t0 > 0 && ms >= 0)) ms = sqlite3_column_double(s, 5);
        if (stt && strcmp(stt, "cancelled") != 0) lat_push(&lat[mi][m], ms);
    }
    if (s) sqlite3_reset(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        code = st_sqlfail(err, c->db, rc, "charts");
        goto done;
    }
    strbuf_puts(out, "{\"eval_key\":");
    if (eval_key)
        strbuf_json_str(out, eval_key);
    else
        strbuf_puts(out, "null");
    strbuf_puts(out, ",\"minutes\":[");
    for (int i = 0; i < minutes; i++) {
        char ts[40];
        time_rfc3339((double)(first + i) * 60.0, ts, sizeof ts);
        strbuf_printf(out, "{\"t\":\"%s\",", ts);
        int64_t total = 0;
        for (int k = 0; k < 4; k++) {
            strbuf_printf(out, "\"%s\":%lld,", names[k], (long long)counts[i][k]);
            total += counts[i][k];
        }
        strbuf_puts(out, "\"modes\":{");
        for (int m = 0; m < 2; m++) {
            lat_list *l = &lat[i][m];
            if (l->n > 1) qsort(l->v, l->n, sizeof l->v[0], cmp_dbl);
            strbuf_printf(out, "%s\"%s\":{", m ? "," : "", modes[m]);
            put_ms(out, "p50_ms", rank_pct(l, 0.50));
            put_ms(out, "p90_ms", rank_pct(l, 0.90));
            put_ms(out, "p99_ms", rank_pct(l, 0.99));
            strbuf_printf(out, "\"count\":%zu}", l->n);
        }
        strbuf_printf(out, "},\"count\":%lld}%s", (long long)total, i + 1 < minutes ? "," : "");
    }
    strbuf_puts(out, "]}");
done:
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    for (int i = 0; i < minutes; i++)
        for (int m = 0; m < 2; m++)
            free(lat[i][m].v);
    free(lat);
    free(counts);
    return code;
}

/* ---------------------------------------------------------------- summary */

static int group_counts(sconn *c, const char *sql, const char *name, strbuf *out, store_err *err)
{
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    strbuf_printf(out, "\"%s\":{", name);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
        strbuf_json_str(out, (const char *)sqlite3_column_text(s, 0));
        strbuf_printf(out, ":%lld,", (long long)sqlite3_column_int64(s, 1));
    }
    if (s) sqlite3_reset(s);
    if (rc != SQLITE_DONE) return st_sqlfail(err, c->db, rc, "summary");
    jclose(out, '}');
    strbuf_putc(out, ',');
    return STORE_OK;
}

int store_summary_json(store *st, strbuf *out, store_err *err)
{
    static const char asg[] = "SELECT status, count(*) FROM assignments GROUP BY status";
    static const char runs[] = "SELECT status, count(*) FROM runs GROUP BY status";
    static const char depth[] = "SELECT count(*) FROM outbox";
    static const char pages[] = "SELECT (SELECT page_count FROM pragma_page_count()) *"
                                " (SELECT page_size FROM pragma_page_size())";
    size_t start = out->len;
    sconn *c = st_rget(st);
    sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL);
    strbuf_putc(out, '{');
    int code = group_counts(c, asg, "assignments", out, err);
    if (!code) code = group_counts(c, runs, "runs", out, err);
    const char *one[2] = {depth, pages};
    const char *keys[2] = {"outbox_depth", "db_bytes"};
    for (int i = 0; i < 2 && !code; i++) {
        sqlite3_stmt *s = st_stmt(c, one[i]);
        int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
        if (rc == SQLITE_ROW)
            strbuf_printf(out, "\"%s\":%lld,", keys[i], (long long)sqlite3_column_int64(s, 0));
        else
            code = st_sqlfail(err, c->db, rc, "summary");
        if (s) sqlite3_reset(s);
    }
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    st_rput(st, c);
    if (code) {
        out->len = start;
        if (out->data) out->data[start] = '\0';
        return code;
    }
    strbuf_printf(out, "\"schema_version\":%d}", st->schema_version);
    return STORE_OK;
}
