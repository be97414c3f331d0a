/* store/store: the database handle: opening (lock, WAL, migrations, integrity
 * and write probes, the read pool, the flusher and maintenance threads) and
 * closing. The rest lives beside it, one file per concept: store_err
 * (statuses), store_conn (statement cache, read pool), store_stmt (running a
 * statement, bind helpers), store_write (write discipline, group commit),
 * store_version (change version), store_schema (migrations), store_prune
 * (retention, the maintenance thread), store_checkpoint, store_vacuum, and the
 * operations (store_worker, store_assign, store_runs, store_outbox,
 * store_recovery, store_local, store_metrics, store_deferred); store_query.c
 * holds the admin API's JSON queries. */
#include "store/store_int.h"

#include "common/log.h"
#include "common/thread.h"
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------- open */

int st_pragma_text(sqlite3 *db, const char *sql, char *out, size_t cap)
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

int st_pragma_int(sqlite3 *db, const char *sql, int64_t *out)
{
    char buf[64];
    int rc = st_pragma_text(db, sql, buf, sizeof buf);
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
        rc = st_pragma_text(st->w.db, "PRAGMA journal_mode=WAL", buf, sizeof buf);
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
        st_pragma_int(st->w.db, "PRAGMA page_size", &psz);
        st->page_size = psz > 0 ? psz : 4096;
    } else {
        code = exec_sql(st, "PRAGMA temp_store=MEMORY", "configure", err);
        if (code) goto fail;
    }
    code = st_migrate(st, err);
    if (code) goto fail;
    if (!opt->skip_integrity_check && !st->memory) {
        rc = st_pragma_text(st->w.db, "PRAGMA quick_check", buf, sizeof buf);
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
        if (pthread_create(&st->flusher, NULL, st_flusher_main, st) != 0) {
            code = st_errf(err, STORE_ERROR, "start flusher thread: %s", strerror(errno));
            goto fail;
        }
        st->flusher_running = 1;
    }
    if (st->opt.maintenance_interval_s > 0) {
        periodic_job job = {"store maintenance", (int64_t)st->opt.maintenance_interval_s * 1000,
                            st_maintain, st};
        fps_err pe;
        st->maint = periodic_start("fps-store-maint", &job, 1, &pe);
        if (st->maint == NULL) {
            code = st_errf(err, STORE_ERROR, "start maintenance thread: %s", pe.msg);
            goto fail;
        }
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
    periodic_stop(st->maint);
    st->maint = NULL;
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
