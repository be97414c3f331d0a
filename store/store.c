/* store/store: the database handle: opening (lock, WAL, migrations, integrity
 * and write probes), connections and their statement caches, the write
 * discipline, group-committed durability, error mapping, retention pruning and
 * the maintenance thread. The operations live beside it, one file per concept
 * (store_worker, store_assign, store_runs, store_outbox, store_recovery,
 * store_local, store_metrics, store_deferred), and store_query.c holds the
 * admin API's JSON queries. */
#include "store/store_int.h"

#include "common/log.h"
#include "common/thread.h"
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ schema */

/* The schema as forward migration steps: step i takes user_version i to i+1.
 * Never edit a shipped step; append a new one. */
static const char *const MIGRATIONS[] = {
    /* v1: the core tables. */
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
    "CREATE TABLE worker(id INTEGER PRIMARY KEY CHECK (id = 1), worker_id TEXT NOT NULL,"
    " server_origin TEXT, catalog_revision TEXT, catalog_json TEXT, response_json TEXT,"
    " registered_at REAL);"
    "CREATE TABLE assignments(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
    " worker_id TEXT NOT NULL, lease_generation INTEGER NOT NULL, lease_expires_at REAL NOT NULL,"
    " status TEXT NOT NULL, session_id TEXT, session_revision_id TEXT, agent_id TEXT,"
    " environment TEXT, trigger_reason TEXT, event_count INTEGER, transcript_url TEXT,"
    " definitions_url TEXT, claim_json TEXT, definitions_json TEXT, plan_request_json TEXT,"
    " plan_response_json TEXT, claimed_at REAL NOT NULL, planned_at REAL, finished_at REAL,"
    " error_code TEXT, error_message TEXT);"
    "CREATE INDEX assignments_status ON assignments(status, seq);"
    "CREATE TABLE runs(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
    " assignment_id TEXT NOT NULL, eval_key TEXT NOT NULL, eval_version TEXT NOT NULL,"
    " execution_mode TEXT NOT NULL, timeout_seconds REAL, descriptor_json TEXT,"
    " status TEXT NOT NULL, created_at REAL NOT NULL, started_at REAL, finished_at REAL,"
    " duration_ms INTEGER, summary TEXT, results_json TEXT, error_code TEXT, error_message TEXT,"
    " submission_id TEXT, lease_generation INTEGER, worker_id TEXT,"
    " submit_status TEXT NOT NULL DEFAULT 'none', submit_error_code TEXT,"
    " submit_error_message TEXT, attempts INTEGER NOT NULL DEFAULT 0, first_attempt_at REAL,"
    " last_attempt_at REAL, body_bytes INTEGER);"
    "CREATE INDEX runs_assignment ON runs(assignment_id, seq);"
    "CREATE INDEX runs_status ON runs(status, seq);"
    "CREATE INDEX runs_eval_key ON runs(eval_key, seq);"
    "CREATE TABLE outbox(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " submission_id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL UNIQUE,"
    " assignment_id TEXT NOT NULL, worker_id TEXT NOT NULL, lease_generation INTEGER NOT NULL,"
    " body BLOB NOT NULL, created_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
    " last_attempt_at REAL, last_error TEXT);"
    "CREATE TABLE evaluators(name TEXT PRIMARY KEY, registration_json TEXT NOT NULL,"
    " ttl_seconds REAL, registered_at REAL, heartbeat_at REAL, expires_at REAL) WITHOUT ROWID;"
    "CREATE TABLE metrics(name TEXT NOT NULL, labels TEXT NOT NULL, value REAL NOT NULL,"
    " PRIMARY KEY(name, labels)) WITHOUT ROWID;",

    /* v2: submission attempt history and the per-minute aggregates behind the
     * charts (so chart queries cost the same at any traffic). Existing
     * finished runs are backfilled into the per-minute counts. */
    "CREATE TABLE submit_attempts(id INTEGER PRIMARY KEY, run_id TEXT NOT NULL,"
    " submission_id TEXT, attempt INTEGER NOT NULL, at REAL, outcome TEXT NOT NULL,"
    " http_status INTEGER, duration_ms INTEGER, error_code TEXT, message TEXT, request_id TEXT);"
    "CREATE INDEX submit_attempts_run ON submit_attempts(run_id, id);"
    "CREATE TRIGGER runs_delete_attempts AFTER DELETE ON runs BEGIN"
    " DELETE FROM submit_attempts WHERE run_id = old.id; END;"
    "CREATE TABLE minute_stats(minute INTEGER NOT NULL, status TEXT NOT NULL,"
    " count INTEGER NOT NULL, PRIMARY KEY(minute, status)) WITHOUT ROWID;"
    "CREATE TABLE minute_latency(minute INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " count INTEGER NOT NULL, PRIMARY KEY(minute, bucket)) WITHOUT ROWID;"
    "INSERT INTO minute_stats(minute, status, count)"
    " SELECT CAST(finished_at / 60 AS INTEGER), status, count(*) FROM runs"
    " WHERE finished_at IS NOT NULL AND status IN ('succeeded','failed','timed_out','cancelled')"
    " GROUP BY 1, 2;",

    /* v3: the admin API's combined status + eval_key filter gets its own index
     * (with only one of them, SQLite scanned every run of that key). */
    "CREATE INDEX runs_status_key ON runs(status, eval_key, seq);",

    /* v4: the large JSON documents (claim, definitions, plan, run descriptor,
     * results) move out of the hot rows into tables keyed by the row's seq:
     * every lease extension, run start or submission outcome then rewrites a
     * small row instead of the row and its overflow pages. */
    "CREATE TABLE assignment_docs(seq INTEGER PRIMARY KEY, claim_json TEXT,"
    " definitions_json TEXT, plan_request_json TEXT, plan_response_json TEXT);"
    "INSERT INTO assignment_docs(seq, claim_json, definitions_json, plan_request_json,"
    " plan_response_json) SELECT seq, claim_json, definitions_json, plan_request_json,"
    " plan_response_json FROM assignments;"
    "ALTER TABLE assignments DROP COLUMN claim_json;"
    "ALTER TABLE assignments DROP COLUMN definitions_json;"
    "ALTER TABLE assignments DROP COLUMN plan_request_json;"
    "ALTER TABLE assignments DROP COLUMN plan_response_json;"
    "CREATE TABLE run_docs(seq INTEGER PRIMARY KEY, descriptor_json TEXT, results_json TEXT);"
    "INSERT INTO run_docs(seq, descriptor_json, results_json)"
    " SELECT seq, descriptor_json, results_json FROM runs;"
    "ALTER TABLE runs DROP COLUMN descriptor_json;"
    "ALTER TABLE runs DROP COLUMN results_json;"
    "CREATE TRIGGER assignments_delete_docs AFTER DELETE ON assignments BEGIN"
    " DELETE FROM assignment_docs WHERE seq = old.seq; END;"
    "CREATE TRIGGER runs_delete_docs AFTER DELETE ON runs BEGIN"
    " DELETE FROM run_docs WHERE seq = old.seq; END;",

    /* v5: a bounded heartbeat history per assignment (keyed by its seq, one
     * small row rewritten per heartbeat, deleted with the assignment): how
     * many, the first and last, and the last few with their outcome. */
    "CREATE TABLE assignment_heartbeats(seq INTEGER PRIMARY KEY, n INTEGER NOT NULL,"
    " first_at REAL NOT NULL, last_at REAL NOT NULL, recent_json TEXT NOT NULL);"
    "CREATE TRIGGER assignments_delete_heartbeats AFTER DELETE ON assignments BEGIN"
    " DELETE FROM assignment_heartbeats WHERE seq = old.seq; END;",
};
#define N_MIGRATIONS ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))

int store_schema_latest(void)
{
    return N_MIGRATIONS;
}

/* ------------------------------------------------------------------ errors */

const char *store_status_name(int status)
{
    switch (status) {
    case STORE_OK:
        return "ok";
    case STORE_NOTFOUND:
        return "not_found";
    case STORE_ERROR:
        return "error";
    case STORE_BUSY:
        return "busy";
    case STORE_CORRUPT:
        return "corrupt";
    case STORE_FULL:
        return "full";
    case STORE_READONLY:
        return "readonly";
    case STORE_INVALID:
        return "invalid";
    case STORE_CONFLICT:
        return "conflict";
    case STORE_STALE:
        return "stale";
    case STORE_SCHEMA:
        return "schema";
    default:
        return "unknown";
    }
}

int st_errf(store_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        err->http_status = 0;
        snprintf(err->name, sizeof err->name, "%s", store_status_name(code));
        int n = snprintf(err->msg, sizeof err->msg, "store: ");
        vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return code;
}

int st_map_rc(sqlite3 *db, int rc)
{
    int e = db ? sqlite3_system_errno(db) : 0;
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return STORE_OK;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return STORE_BUSY;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return STORE_CORRUPT;
    case SQLITE_FULL:
        return STORE_FULL;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return STORE_READONLY;
    case SQLITE_CONSTRAINT:
        return STORE_CONFLICT;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
        if (e == ENOSPC || e == EFBIG || e == EDQUOT) return STORE_FULL;
        if (e == EROFS || e == EACCES || e == EPERM) return STORE_READONLY;
        return STORE_ERROR;
    default:
        return STORE_ERROR;
    }
}

int st_sqlfail(store_err *err, sqlite3 *db, int rc, const char *op)
{
    int code = st_map_rc(db, rc);
    if (code == STORE_OK) code = STORE_ERROR;
    const char *why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    int e = db ? sqlite3_system_errno(db) : 0;
    const char *hint = "";
    switch (code) {
    case STORE_BUSY:
        hint = " (the database is locked by another process)";
        break;
    case STORE_CORRUPT:
        hint = " (the file is not a valid sidecar database)";
        break;
    case STORE_FULL:
        hint = " (no space left for the database)";
        break;
    case STORE_READONLY:
        hint = " (the database or its directory is not writable)";
        break;
    default:
        break;
    }
    if (e && (code == STORE_FULL || code == STORE_READONLY || code == STORE_ERROR))
        return st_errf(err, code, "%s: %s [%s]%s", op, why, strerror(e), hint);
    return st_errf(err, code, "%s: %s%s", op, why, hint);
}

/* ---------------------------------------------------------- statement cache */

sqlite3_stmt *st_stmt(sconn *c, const char *sql)
{
    uintptr_t h = ((uintptr_t)sql >> 3) * 2654435761u;
    for (int i = 0; i < SCACHE_SLOTS; i++) {
        int slot = (int)((h + (uintptr_t)i) % SCACHE_SLOTS);
        if (c->keys[slot] == sql) {
            __atomic_store_n(&c->last_sql, sql, __ATOMIC_RELAXED);
            sqlite3_stmt *s = c->stmts[slot];
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            return s;
        }
        if (c->keys[slot] == NULL) {
            sqlite3_stmt *s = NULL;
            if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) !=
                SQLITE_OK)
                return NULL;
            c->keys[slot] = sql;
            c->stmts[slot] = s;
            __atomic_store_n(&c->last_sql, sql, __ATOMIC_RELAXED);
            return s;
        }
    }
    return NULL; /* cache full: a programming error, reported as an SQLite error */
}

void st_finalize_all(sconn *c)
{
    for (int i = 0; i < SCACHE_SLOTS; i++) {
        if (c->stmts[i]) sqlite3_finalize(c->stmts[i]);
        c->stmts[i] = NULL;
        c->keys[i] = NULL;
    }
}

int st_step_done(store *st, sqlite3_stmt *s, const char *op, store_err *err)
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

sqlite3_stmt *st_w(store *st, const char *sql)
{
    return st_stmt(&st->w, sql);
}

int st_is_one_of(const char *s, const char *const *set)
{
    if (!s) return 0;
    for (; *set; set++)
        if (strcmp(s, *set) == 0) return 1;
    return 0;
}

/* ------------------------------------------------------------ bind helpers */

void st_bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

void st_bind_textn(sqlite3_stmt *s, int i, const char *v, size_t max)
{
    if (!v) {
        sqlite3_bind_null(s, i);
        return;
    }
    size_t n = strlen(v);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80)
            n--; /* UTF-8 boundary */
    }
    sqlite3_bind_text(s, i, v, (int)n, SQLITE_STATIC);
}

void st_bind_int(sqlite3_stmt *s, int i, int64_t v)
{
    sqlite3_bind_int64(s, i, v);
}

void st_bind_dbl(sqlite3_stmt *s, int i, double v)
{
    sqlite3_bind_double(s, i, v);
}

void st_bind_time(sqlite3_stmt *s, int i, double v)
{
    if (v > 0)
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

char *st_col_dup(sqlite3_stmt *s, int i)
{
    if (sqlite3_column_type(s, i) == SQLITE_NULL) return NULL;
    const unsigned char *t = sqlite3_column_text(s, i);
    int n = sqlite3_column_bytes(s, i);
    char *p = malloc((size_t)n + 1);
    if (!p) abort();
    memcpy(p, t ? (const char *)t : "", (size_t)n);
    p[n] = '\0';
    return p;
}

double st_col_dbl(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? 0 : sqlite3_column_double(s, i);
}

/* ------------------------------------------------------- write discipline */

static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";

static int exec_cached(sconn *c, const char *sql)
{
    sqlite3_stmt *s = st_stmt(c, sql);
    if (!s) return sqlite3_errcode(c->db) ? sqlite3_errcode(c->db) : SQLITE_ERROR;
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* The open write transaction, for naming a checkpoint's blocker. */
static void w_mark(store *st, const char *op)
{
    __atomic_store_n(&st->w_op, op, __ATOMIC_RELAXED);
    __atomic_store_n(&st->w_since_ms, op ? time_mono_ms() : 0, __ATOMIC_RELAXED);
}

int st_wbegin(store *st, const char *op, store_err *err)
{
    st_wal_bound_wait(st);
    pthread_mutex_lock(&st->wmu);
    int rc = exec_cached(&st->w, SQL_BEGIN);
    if (rc != SQLITE_OK) {
        int code = st_sqlfail(err, st->w.db, rc, op);
        st_note_write_status(st, code);
        pthread_mutex_unlock(&st->wmu);
        return code;
    }
    w_mark(st, op);
    /* Queued updates first: they happened before this one. */
    st_drain_deferred(st);
    return STORE_OK;
}

void st_wabort(store *st)
{
    /* The last error on the writer is the one that made the caller give up. */
    int rc = sqlite3_errcode(st->w.db);
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
        st_note_write_status(st, st_map_rc(st->w.db, rc));
    if (!sqlite3_get_autocommit(st->w.db)) exec_cached(&st->w, SQL_ROLLBACK);
    w_mark(st, NULL);
    st_deferred_done(st, 0);
    pthread_mutex_unlock(&st->wmu);
}

/* Group commit: every durable commit takes a ticket; one fdatasync of the WAL
 * covers every commit that finished before it started, so threads finishing
 * runs at the same moment share one disk flush. */
static int durable_wait(store *st, uint64_t ticket, store_err *err)
{
    if (st->wal_fd < 0 || st->opt.durability_process_only) return STORE_OK;
    int code = STORE_OK;
    pthread_mutex_lock(&st->sync_mu);
    if (st->synced_seq < ticket) {
        uint64_t target = __atomic_load_n(&st->commit_seq, __ATOMIC_ACQUIRE);
        if (fdatasync(st->wal_fd) != 0) {
            int e = errno;
            code = st_errf(err, e == ENOSPC || e == EDQUOT ? STORE_FULL : STORE_ERROR,
                           "fdatasync of the write-ahead log failed: %s", strerror(e));
            st_note_write_status(st, code);
        } else {
            st->synced_seq = target;
        }
    }
    pthread_mutex_unlock(&st->sync_mu);
    return code;
}

int store_durable_wait(store *st, uint64_t ticket, store_err *err)
{
    return durable_wait(st, ticket, err);
}

int st_wcommit(store *st, const char *op, int durable, store_err *err)
{
    uint64_t ticket = 0;
    int code = st_wcommit_ticket(st, op, &ticket, err);
    if (code == STORE_OK && durable) return durable_wait(st, ticket, err);
    return code;
}

int st_wend(store *st, int code, const char *op, store_err *err)
{
    if (code == STORE_OK) return st_wcommit(st, op, 0, err);
    st_wabort(st);
    return code;
}

int st_wcommit_ticket(store *st, const char *op, uint64_t *ticket, store_err *err)
{
    int rc = exec_cached(&st->w, SQL_COMMIT);
    if (rc != SQLITE_OK) {
        int code = st_sqlfail(err, st->w.db, rc, op);
        st_note_write_status(st, code);
        if (!sqlite3_get_autocommit(st->w.db)) exec_cached(&st->w, SQL_ROLLBACK);
        w_mark(st, NULL);
        st_deferred_done(st, 0);
        pthread_mutex_unlock(&st->wmu);
        return code;
    }
    w_mark(st, NULL);
    st_deferred_done(st, 1);
    *ticket = __atomic_add_fetch(&st->commit_seq, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&st->wmu);
    return STORE_OK;
}

/* ------------------------------------------------------- change version */

static const char SQL_DATA_VERSION[] = "PRAGMA data_version";

/* Both parts are read under probe_mu, so the (commit_seq, probe_moves) pairs
 * are ordered by the mutex and each part only grows along that order: the sum
 * moves iff either part moved. An in-process commit moves both (the writer is
 * "another connection" for the probe); that costs nothing but a larger step.
 *
 * Outside writers are seen only through SQLite's own API (PRAGMA
 * data_version on the probe connection). Reading the -shm file's WAL-index
 * header directly would save the probe's two fcntl calls, but it needs this
 * process to open and close that file itself, and closing any descriptor of
 * a file drops every POSIX lock the process holds on it: SQLite's own
 * shared-memory locks included. Another process could then reset the -shm
 * file under our connections (a mapped page past its new end is SIGBUS) and
 * SQLite's locking would no longer hold. */
int store_change_version(store *st, uint64_t *out, store_err *err)
{
    int code = STORE_OK;
    pthread_mutex_lock(&st->probe_mu);
    uint64_t local = __atomic_load_n(&st->commit_seq, __ATOMIC_ACQUIRE);
    if (st->probe.db != NULL) {
        sqlite3_stmt *s = st_stmt(&st->probe, SQL_DATA_VERSION);
        int rc = s ? sqlite3_step(s) : sqlite3_errcode(st->probe.db);
        if (rc == SQLITE_ROW) {
            int64_t dv = sqlite3_column_int64(s, 0);
            if (dv != st->probe_dv) {
                st->probe_dv = dv;
                st->probe_moves++;
            }
        } else {
            code = st_sqlfail(err, st->probe.db, rc, "read data version");
        }
        if (s) sqlite3_reset(s);
    }
    *out = local + st->probe_moves;
    pthread_mutex_unlock(&st->probe_mu);
    return code;
}

/* ------------------------------------------------------------- read pool */

sconn *st_rget(store *st)
{
    if (st->nreaders == 0) {
        pthread_mutex_lock(&st->wmu);
        return &st->w;
    }
    pthread_mutex_lock(&st->rmu);
    for (;;) {
        for (int i = 0; i < st->nreaders; i++) {
            if (!st->readers[i].in_use) {
                st->readers[i].in_use = 1;
                st->readers[i].since_ms = time_mono_ms();
                pthread_mutex_unlock(&st->rmu);
                return &st->readers[i];
            }
        }
        pthread_cond_wait(&st->rcv, &st->rmu);
    }
}

void st_rput(store *st, sconn *c)
{
    /* No snapshot outlives the request: a statement left stepping would keep
     * its read transaction open, and the checkpoint could never pass it. */
    for (sqlite3_stmt *s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s))
        if (sqlite3_stmt_busy(s)) sqlite3_reset(s);
    if (c == &st->w) {
        pthread_mutex_unlock(&st->wmu);
        return;
    }
    pthread_mutex_lock(&st->rmu);
    c->in_use = 0;
    pthread_cond_signal(&st->rcv);
    pthread_mutex_unlock(&st->rmu);
}

void store_release_memory(store *st)
{
    if (st == NULL) return;
    pthread_mutex_lock(&st->wmu);
    sqlite3_db_release_memory(st->w.db);
    pthread_mutex_unlock(&st->wmu);
    for (int i = 0; i < st->nreaders; i++) {
        pthread_mutex_lock(&st->rmu);
        int mine = !st->readers[i].in_use;
        if (mine) st->readers[i].in_use = 1;
        pthread_mutex_unlock(&st->rmu);
        if (!mine) continue;
        sqlite3_db_release_memory(st->readers[i].db);
        st_rput(st, &st->readers[i]);
    }
}

/* ------------------------------------------------------------------- open */

static int pragma_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        snprintf(out, cap, "%s", t ? t : "");
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        if (cap) out[0] = '\0';
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    return rc;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *out)
{
    char buf[64];
    int rc = pragma_text(db, sql, buf, sizeof buf);
    if (rc == SQLITE_OK) *out = strtoll(buf, NULL, 10);
    return rc;
}

static int open_conn(store *st, sconn *c, int readonly, store_err *err)
{
    int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(st->path, &c->db, flags, NULL);
    if (rc != SQLITE_OK) {
        int code = st_sqlfail(err, c->db, rc, "open");
        sqlite3_close(c->db);
        c->db = NULL;
        return code;
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, st->opt.busy_timeout_ms);
    if (!readonly && sqlite3_db_readonly(c->db, "main") == 1)
        return st_errf(err, STORE_READONLY,
                       "open %s: the database file is read-only; refusing "
                       "to run without durable storage",
                       st->path);
    return STORE_OK;
}

static int exec_sql(store *st, const char *sql, const char *op, store_err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->w.db, sql, NULL, NULL, &msg);
    sqlite3_free(msg);
    if (rc != SQLITE_OK) return st_sqlfail(err, st->w.db, rc, op);
    return STORE_OK;
}

static int migrate(store *st, store_err *err)
{
    int target = st->opt.schema_target > 0 && st->opt.schema_target < N_MIGRATIONS
                     ? st->opt.schema_target
                     : N_MIGRATIONS;
    int code = st_wbegin(st, "migrate", err);
    if (code) return code;
    int64_t v = 0;
    int rc = pragma_int(st->w.db, "PRAGMA user_version", &v);
    if (rc != SQLITE_OK) {
        code = st_sqlfail(err, st->w.db, rc, "read schema version");
        goto fail;
    }
    if (v > N_MIGRATIONS) {
        code = st_errf(err, STORE_SCHEMA,
                       "%s has schema version %lld, newer than this binary supports (%d); "
                       "refusing to touch it",
                       st->path, (long long)v, N_MIGRATIONS);
        goto fail;
    }
    if (v < 0) {
        code = st_errf(err, STORE_CORRUPT, "%s has an invalid schema version %lld", st->path,
                       (long long)v);
        goto fail;
    }
    if (v == 0) {
        /* A non-empty database without our schema version is someone else's file. */
        int64_t n = 0;
        rc = pragma_int(st->w.db, "SELECT count(*) FROM sqlite_schema", &n);
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, "read schema");
            goto fail;
        }
        if (n > 0) {
            code = st_errf(err, STORE_CORRUPT,
                           "%s is an SQLite database but not a sidecar "
                           "store (tables without a schema version)",
                           st->path);
            goto fail;
        }
    }
    for (int64_t i = v; i < target; i++) {
        char op[64];
        snprintf(op, sizeof op, "migrate to schema v%lld", (long long)i + 1);
        char *msg = NULL;
        rc = sqlite3_exec(st->w.db, MIGRATIONS[i], NULL, NULL, &msg);
        sqlite3_free(msg);
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, op);
            if (code == STORE_ERROR || code == STORE_CONFLICT) code = STORE_SCHEMA;
            if (err) {
                err->code = code;
                snprintf(err->name, sizeof err->name, "%s", store_status_name(code));
            }
            goto fail;
        }
        char pv[64];
        snprintf(pv, sizeof pv, "PRAGMA user_version = %lld", (long long)i + 1);
        rc = sqlite3_exec(st->w.db, pv, NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, op);
            goto fail;
        }
    }
    code = st_wcommit(st, "migrate", 1, err);
    if (code) return code;
    if (target > v)
        log_info("store schema migrated", LOG_S("db", st->path), LOG_I("from", v),
                 LOG_I("to", target));
    st->schema_version = target > v ? target : (int)v;
    return STORE_OK;
fail:
    st_wabort(st);
    return code;
}

int st_write_probe(store *st, store_err *err)
{
    static const char sql[] = "INSERT INTO meta(key, value) VALUES('opened_at', ?1)"
                              " ON CONFLICT(key) DO UPDATE SET value = excluded.value";
    static const char sql_created[] =
        "INSERT OR IGNORE INTO meta(key, value) VALUES('created_at', ?1)";
    int code = st_wbegin(st, "write probe", err);
    if (code) return code;
    char ts[40];
    time_rfc3339_now(ts, sizeof ts);
    const char *sqls[2] = {sql, sql_created};
    for (int i = 0; i < 2; i++) {
        sqlite3_stmt *s = st_stmt(&st->w, sqls[i]);
        int rc = s ? (st_bind_text(s, 1, ts), sqlite3_step(s)) : sqlite3_errcode(st->w.db);
        if (rc != SQLITE_DONE) {
            code = st_sqlfail(err, st->w.db, rc, "write probe");
            st_wabort(st);
            return code;
        }
    }
    return st_wcommit(st, "write probe", 1, err);
}

static void *maint_main(void *arg);

/* Applies the deferred updates defer_ms after the first one was queued (or at
 * once when many are queued). */
static void *flusher_main(void *arg)
{
    store *st = arg;
    pthread_mutex_lock(&st->qmu);
    int failed = 0;
    while (!st->flusher_stop) {
        if (st->qhead == NULL) {
            pthread_cond_wait(&st->qcv, &st->qmu);
            continue;
        }
        /* After a failure (a full disk), retry once a second, not every
         * defer_ms. */
        long delay_ms = failed ? 1000 : st->opt.defer_ms;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + delay_ms * 1000000L;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        while (!st->flusher_stop && st->qhead != NULL && (failed || st->qlen < 512)) {
            if (pthread_cond_timedwait(&st->qcv, &st->qmu, &ts) == ETIMEDOUT) break;
        }
        if (st->flusher_stop) break;
        pthread_mutex_unlock(&st->qmu);
        store_err e = {0};
        int was = failed;
        failed = store_flush(st, &e) != STORE_OK;
        if (failed && !was)
            log_warn("store: applying deferred updates failed; retried every second",
                     LOG_S("error", e.msg));
        pthread_mutex_lock(&st->qmu);
    }
    pthread_mutex_unlock(&st->qmu);
    return NULL;
}

/* SQLite's memory statistics (sqlite3_memory_used, the soft heap limit)
 * lock a global mutex around every allocation and free, on every statement
 * step. Nothing here reads them. Must run before SQLite initialises (it
 * refuses afterwards, harmlessly). */
static void sqlite_global_config(void)
{
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int store_open(const store_options *opt, store **out, store_err *err)
{
    static pthread_once_t config_once = PTHREAD_ONCE_INIT;
    pthread_once(&config_once, sqlite_global_config);
    *out = NULL;
    if (!opt || !opt->path || !opt->path[0])
        return st_errf(err, STORE_INVALID, "open: no database path");
    store *st = calloc(1, sizeof *st);
    if (!st) abort();
    st->opt = *opt;
    st->path = strdup(opt->path);
    if (!st->path) abort();
    st->memory = strcmp(opt->path, ":memory:") == 0;
    if (st->opt.busy_timeout_ms <= 0) st->opt.busy_timeout_ms = 5000;
    if (st->opt.read_connections <= 0) st->opt.read_connections = 4;
    if (st->opt.read_connections > 64) st->opt.read_connections = 64;
    st->lock_fd = -1;
    st->wal_fd = -1;
    pthread_mutex_init(&st->wmu, NULL);
    pthread_mutex_init(&st->rmu, NULL);
    pthread_cond_init(&st->rcv, NULL);
    pthread_mutex_init(&st->sync_mu, NULL);
    pthread_mutex_init(&st->maint_mu, NULL);
    pthread_cond_init(&st->maint_cv, NULL);
    pthread_mutex_init(&st->ckpt_mu, NULL);
    pthread_cond_init(&st->ckpt_cv, NULL);
    pthread_mutex_init(&st->qmu, NULL);
    pthread_cond_init(&st->qcv, NULL);
    pthread_mutex_init(&st->probe_mu, NULL);
    st->probe_dv = -1;
    if (st->opt.defer_ms <= 0) st->opt.defer_ms = 25;
    if (st->opt.wal_high_water_bytes <= 0) st->opt.wal_high_water_bytes = 32LL << 20;
    if (st->opt.wal_max_bytes <= st->opt.wal_high_water_bytes)
        st->opt.wal_max_bytes = 2 * st->opt.wal_high_water_bytes;
    if (st->opt.ckpt_wait_ms <= 0) st->opt.ckpt_wait_ms = 2000;
    int code = STORE_OK;
    char buf[64];
    int rc;

    if (!st->memory) {
        /* One sidecar per database: an advisory lock held for the handle's
         * lifetime (flock is independent of SQLite's POSIX locks; the
         * descriptor is only closed after every connection). */
        st->lock_fd = open(st->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (st->lock_fd < 0) {
            int e = errno;
            code = st_errf(
                err, e == EACCES || e == EROFS || e == EPERM ? STORE_READONLY : STORE_ERROR,
                "open %s: %s; refusing to run without durable storage", st->path, strerror(e));
            goto fail;
        }
        if (flock(st->lock_fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            code =
                st_errf(err, e == EWOULDBLOCK ? STORE_BUSY : STORE_ERROR, "open %s: %s", st->path,
                        e == EWOULDBLOCK ? "the database is in use by another sidecar process"
                                         : strerror(e));
            goto fail;
        }
    }
    code = open_conn(st, &st->w, 0, err);
    if (code) goto fail;

    if (!st->memory) {
        /* WAL: readers (the admin API) never block the writer (the worker).
         *
         * synchronous=NORMAL: in WAL mode every commit is in the WAL file (the
         * OS page cache) when COMMIT returns, so it survives a crash of this
         * process (kill -9, OOM, abort); only a power cut or kernel crash can
         * lose the last commits. That is the right trade for the state that
         * only repeats idempotent protocol steps when lost (claims, plans,
         * lease extensions, submit outcomes). It is NOT enough for a result:
         * a result must be on disk before its first submission, or a power
         * cut after the server committed it could make us evaluate the run
         * again and send different bytes under a new submission id. So
         * store_run_finished additionally fdatasyncs the WAL (group commit, so
         * concurrent runs share one flush) before it returns, which makes
         * that commit and every earlier one durable. FULL on every commit
         * would cost a flush per protocol step for no added guarantee. */
        /* Free pages go back to the file system in steps (store_vacuum.c).
         * Takes effect only on a database without tables yet; an older one
         * is converted by a full VACUUM once there is room for it. */
        rc = sqlite3_exec(st->w.db, "PRAGMA auto_vacuum=INCREMENTAL", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, "enable incremental vacuum");
            goto fail;
        }
        rc = pragma_text(st->w.db, "PRAGMA journal_mode=WAL", buf, sizeof buf);
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, "enable WAL");
            goto fail;
        }
        if (strcmp(buf, "wal") != 0) {
            code = st_errf(err, STORE_ERROR, "enable WAL on %s: journal mode stayed '%s'", st->path,
                           buf);
            goto fail;
        }
        /* After a checkpoint resets the log, SQLite trims the file to the
         * high-water mark. */
        char cfg[256];
        snprintf(cfg, sizeof cfg,
                 "PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;"
                 " PRAGMA cache_size=-8192; PRAGMA journal_size_limit=%lld;"
                 " PRAGMA foreign_keys=OFF",
                 (long long)st->opt.wal_high_water_bytes);
        code = exec_sql(st, cfg, "configure", err);
        if (code) goto fail;
        int64_t psz = 4096;
        pragma_int(st->w.db, "PRAGMA page_size", &psz);
        st->page_size = psz > 0 ? psz : 4096;
    } else {
        code = exec_sql(st, "PRAGMA temp_store=MEMORY", "configure", err);
        if (code) goto fail;
    }
    code = migrate(st, err);
    if (code) goto fail;
    if (!opt->skip_integrity_check && !st->memory) {
        rc = pragma_text(st->w.db, "PRAGMA quick_check", buf, sizeof buf);
        if (rc != SQLITE_OK) {
            code = st_sqlfail(err, st->w.db, rc, "integrity check");
            goto fail;
        }
        if (strcmp(buf, "ok") != 0) {
            code = st_errf(err, STORE_CORRUPT, "integrity check of %s failed: %s", st->path, buf);
            goto fail;
        }
    }
    if (!st->memory) {
        /* the writer is the only connection yet (store_vacuum.c) */
        code = st_vacuum_at_open(st, err);
        if (code) goto fail;
    }
    code = st_write_probe(st, err);
    if (code) goto fail;

    if (!st->memory) {
        char walpath[4096];
        snprintf(walpath, sizeof walpath, "%s-wal", st->path);
        st->wal_fd = open(walpath, O_RDWR | O_CLOEXEC);
        if (st->wal_fd < 0) {
            code = st_errf(err, STORE_ERROR, "open %s: %s", walpath, strerror(errno));
            goto fail;
        }
        st->nreaders = st->opt.read_connections;
        st->readers = calloc((size_t)st->nreaders, sizeof *st->readers);
        if (!st->readers) abort();
        for (int i = 0; i < st->nreaders; i++) {
            code = open_conn(st, &st->readers[i], 1, err);
            if (code) goto fail;
            sqlite3_exec(st->readers[i].db, "PRAGMA cache_size=-4096", NULL, NULL, NULL);
        }
        code = open_conn(st, &st->ck, 0, err);
        if (code) goto fail;
        code = open_conn(st, &st->probe, 1, err);
        if (code) goto fail;
        sqlite3_exec(st->probe.db, "PRAGMA cache_size=16", NULL, NULL, NULL);
        code = st_ckpt_start(st, err);
        if (code) goto fail;
    }
    if (!st->opt.sync_updates) {
        if (pthread_create(&st->flusher, NULL, flusher_main, st) != 0) {
            code = st_errf(err, STORE_ERROR, "start flusher thread: %s", strerror(errno));
            goto fail;
        }
        st->flusher_running = 1;
    }
    if (st->opt.maintenance_interval_s > 0) {
        if (pthread_create(&st->maint, NULL, maint_main, st) != 0) {
            code = st_errf(err, STORE_ERROR, "start maintenance thread: %s", strerror(errno));
            goto fail;
        }
        st->maint_running = 1;
    }
    *out = st;
    return STORE_OK;
fail:
    store_close(st);
    return code;
}

void store_close(store *st)
{
    if (!st) return;
    if (st->maint_running)
        thread_stop_join(st->maint, &st->maint_mu, &st->maint_cv, &st->maint_stop);
    if (st->flusher_running) thread_stop_join(st->flusher, &st->qmu, &st->qcv, &st->flusher_stop);
    if (st->w.db && st->schema_version > 0) {
        store_err e = {0};
        if (store_flush(st, &e) != STORE_OK)
            log_warn("store: deferred updates lost at close (they are idempotent)",
                     LOG_S("error", e.msg));
    }
    st_ckpt_stop(st);
    if (st->ck.db) sqlite3_close(st->ck.db);
    st_finalize_all(&st->probe);
    if (st->probe.db) sqlite3_close(st->probe.db);
    for (int i = 0; i < st->nreaders; i++) {
        st_finalize_all(&st->readers[i]);
        sqlite3_close(st->readers[i].db);
    }
    if (st->readers && st->nreaders == 0) {
        /* partially opened pool */
    }
    free(st->readers);
    if (st->w.db) {
        st_finalize_all(&st->w);
        if (!st->memory && sqlite3_get_autocommit(st->w.db))
            sqlite3_wal_checkpoint_v2(st->w.db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        sqlite3_close(st->w.db);
    }
    if (st->wal_fd >= 0) close(st->wal_fd);
    if (st->lock_fd >= 0) close(st->lock_fd);
    pthread_mutex_destroy(&st->wmu);
    pthread_mutex_destroy(&st->rmu);
    pthread_cond_destroy(&st->rcv);
    pthread_mutex_destroy(&st->sync_mu);
    pthread_mutex_destroy(&st->maint_mu);
    pthread_cond_destroy(&st->maint_cv);
    pthread_mutex_destroy(&st->ckpt_mu);
    pthread_cond_destroy(&st->ckpt_cv);
    pthread_mutex_destroy(&st->qmu);
    pthread_cond_destroy(&st->qcv);
    pthread_mutex_destroy(&st->probe_mu);
    free(st->path);
    free(st);
}

const char *store_path(const store *st)
{
    return st->path;
}

int store_schema_version(store *st)
{
    return st->schema_version;
}

/* -------------------------------------------------------------- retention */

#define PRUNE_BATCH 2000

/* Runs one bounded delete statement in its own write transaction. */
static int prune_step(store *st, const char *sql, double a, int64_t b, size_t *deleted,
                      store_err *err)
{
    int code = st_wbegin(st, "prune", err);
    if (code) return code;
    sqlite3_stmt *s = st_stmt(&st->w, sql);
    int rc = s ? (st_bind_dbl(s, 1, a), st_bind_int(s, 2, b), sqlite3_step(s))
               : sqlite3_errcode(st->w.db);
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, st->w.db, rc, "prune");
        st_wabort(st);
        return code;
    }
    *deleted = (size_t)sqlite3_changes(st->w.db);
    code = st_wcommit(st, "prune", 0, err);
    if (code == STORE_OK) __atomic_add_fetch(&st->rows_pruned, *deleted, __ATOMIC_RELAXED);
    return code;
}

int store_prune(store *st, double now, size_t *runs_deleted, size_t *assignments_deleted,
                store_err *err)
{
    static const char runs_by_age[] =
        "DELETE FROM runs WHERE seq IN (SELECT r.seq FROM runs r JOIN assignments a"
        " ON a.id = r.assignment_id WHERE a.status IN " ST_TERMINAL_SQL
        " AND a.finished_at < ?1 AND r.submit_status != 'pending' LIMIT ?2)";
    static const char assignments_by_age[] =
        "DELETE FROM assignments WHERE seq IN (SELECT a.seq FROM assignments a"
        " WHERE a.status IN " ST_TERMINAL_SQL " AND a.finished_at < ?1"
        " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.assignment_id = a.id) LIMIT ?2)";
    static const char count_runs[] = "SELECT count(*) FROM runs";
    static const char count_assignments[] =
        "SELECT count(*) FROM assignments WHERE status IN " ST_TERMINAL_SQL;
    /* ?1 unused (kept for the shared binder), ?2 = how many */
    static const char runs_by_count[] =
        "DELETE FROM runs WHERE seq IN (SELECT r.seq FROM runs r JOIN assignments a"
        " ON a.id = r.assignment_id WHERE ?1 IS NOT NULL AND a.status IN " ST_TERMINAL_SQL
        " AND r.submit_status != 'pending' ORDER BY r.seq LIMIT ?2)";
    static const char assignments_by_count[] =
        "DELETE FROM assignments WHERE seq IN (SELECT a.seq FROM assignments a"
        " WHERE ?1 IS NOT NULL AND a.status IN " ST_TERMINAL_SQL
        " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.assignment_id = a.id)"
        " ORDER BY a.seq LIMIT ?2)";
    static const char stats_old[] = "DELETE FROM minute_stats WHERE minute < ?1 AND ?2 IS NOT NULL";
    static const char latency_old[] =
        "DELETE FROM minute_latency WHERE minute < ?1 AND ?2 IS NOT NULL";

    size_t rd = 0, ad = 0, n = 0;
    int code = STORE_OK;
    if (st->opt.retention_hours > 0) {
        double cutoff = now - st->opt.retention_hours * 3600.0;
        do {
            code = prune_step(st, runs_by_age, cutoff, PRUNE_BATCH, &n, err);
            if (code) goto done;
            rd += n;
        } while (n == PRUNE_BATCH);
        do {
            code = prune_step(st, assignments_by_age, cutoff, PRUNE_BATCH, &n, err);
            if (code) goto done;
            ad += n;
        } while (n == PRUNE_BATCH);
    }
    if (st->opt.retention_runs > 0) {
        const char *counts[2] = {count_runs, count_assignments};
        const char *deletes[2] = {runs_by_count, assignments_by_count};
        for (int k = 0; k < 2; k++) {
            for (;;) {
                int64_t total = 0;
                sconn *c = st_rget(st);
                sqlite3_stmt *s = st_stmt(c, counts[k]);
                int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
                if (rc == SQLITE_ROW)
                    total = sqlite3_column_int64(s, 0);
                else
                    code = st_sqlfail(err, c->db, rc, "prune count");
                if (s) sqlite3_reset(s);
                st_rput(st, c);
                if (code) goto done;
                int64_t excess = total - st->opt.retention_runs;
                if (excess <= 0) break;
                if (excess > PRUNE_BATCH) excess = PRUNE_BATCH;
                code = prune_step(st, deletes[k], 1, excess, &n, err);
                if (code) goto done;
                if (k == 0)
                    rd += n;
                else
                    ad += n;
                if (n == 0) break; /* the rest is not prunable (pending or active) */
            }
        }
    }
    {
        double oldest_minute = floor(now / 60.0) - 1440 * 2;
        code = prune_step(st, stats_old, oldest_minute, 1, &n, err);
        if (!code) code = prune_step(st, latency_old, oldest_minute, 1, &n, err);
    }
done:
    if (runs_deleted) *runs_deleted = rd;
    if (assignments_deleted) *assignments_deleted = ad;
    return code;
}

static void *maint_main(void *arg)
{
    store *st = arg;
    pthread_mutex_lock(&st->maint_mu);
    while (!st->maint_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += st->opt.maintenance_interval_s;
        pthread_cond_timedwait(&st->maint_cv, &st->maint_mu, &ts);
        if (st->maint_stop) break;
        pthread_mutex_unlock(&st->maint_mu);
        size_t rd = 0, ad = 0;
        store_err e = {0};
        if (store_prune(st, time_now(), &rd, &ad, &e) != STORE_OK)
            log_warn("store pruning failed", LOG_S("error", e.msg));
        else if (rd || ad)
            log_info("store pruned history", LOG_I("runs", rd), LOG_I("assignments", ad));
        st_vacuum_after_prune(st);
        pthread_mutex_lock(&st->maint_mu);
    }
    pthread_mutex_unlock(&st->maint_mu);
    return NULL;
}
