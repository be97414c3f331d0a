/* store/store_schema: the schema as forward migration steps, and the
 * migration that brings a database opened by store_open to the latest (or the
 * configured target) version, refusing a newer or foreign file. */
#include "store/store_int.h"

#include "common/log.h"

#include <stdio.h>

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

    /* v6: the admin API's finished backtests (store_backtests.c): one small
     * row each for the list, its rows compressed in a table of their own
     * (deleted with it). */
    "CREATE TABLE backtests(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
    " state TEXT NOT NULL, created_at REAL NOT NULL, finished_at REAL NOT NULL,"
    " done INTEGER NOT NULL, total INTEGER NOT NULL, request_json TEXT NOT NULL,"
    " summary_json TEXT, rows_bytes INTEGER NOT NULL);"
    "CREATE TABLE backtest_rows(seq INTEGER PRIMARY KEY, raw_bytes INTEGER NOT NULL,"
    " data BLOB NOT NULL);"
    "CREATE TRIGGER backtests_delete_rows AFTER DELETE ON backtests BEGIN"
    " DELETE FROM backtest_rows WHERE seq = old.seq; END;",

    /* v7: why a failed backtest failed (NULL for the others). */
    "ALTER TABLE backtests ADD COLUMN error TEXT;",
};
#define N_MIGRATIONS ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))

int store_schema_latest(void)
{
    return N_MIGRATIONS;
}

int st_migrate(store *st, store_err *err)
{
    int target = st->opt.schema_target > 0 && st->opt.schema_target < N_MIGRATIONS
                     ? st->opt.schema_target
                     : N_MIGRATIONS;
    int code = st_wbegin(st, "migrate", err);
    if (code) return code;
    int64_t v = 0;
    int rc = st_pragma_int(st->w.db, "PRAGMA user_version", &v);
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
        rc = st_pragma_int(st->w.db, "SELECT count(*) FROM sqlite_schema", &n);
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
