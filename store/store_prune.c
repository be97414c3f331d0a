/* store/store_prune: retention (finished history older than retention_hours
 * or beyond retention_runs, deleted in bounded batches) and the maintenance
 * job that runs it (then the incremental vacuum) every
 * maintenance_interval_s, on the periodic thread store_open starts. */
#include "store/store_int.h"

#include "common/log.h"
#include "common/timeutil.h"

#include <math.h>
#include <time.h>

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
    static const char backtests_by_age[] = "DELETE FROM backtests WHERE seq IN (SELECT seq FROM"
                                           " backtests WHERE finished_at < ?1 LIMIT ?2)";
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
        /* finished backtests go with the history of their time */
        code = prune_step(st, backtests_by_age, cutoff, STORE_BACKTESTS_KEPT, &n, err);
        if (code) goto done;
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

void st_maintain(void *ud)
{
    store *st = ud;
    size_t rd = 0, ad = 0;
    store_err e = {0};
    if (store_prune(st, time_now(), &rd, &ad, &e) != STORE_OK)
        log_warn("store pruning failed", LOG_S("error", e.msg));
    else if (rd || ad)
        log_info("store pruned history", LOG_I("runs", rd), LOG_I("assignments", ad));
    st_vacuum_after_prune(st);
}
