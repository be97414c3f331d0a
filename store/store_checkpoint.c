/* store/store_checkpoint: keeps the write-ahead log bounded. One thread, on
 * its own connection, copies WAL frames back into the database: PASSIVE
 * (blocks nobody) every second and whenever the writer's WAL hook counts
 * CKPT_PAGES new frames; TRUNCATE, waiting at most ckpt_wait_ms for readers
 * and the writer, once the WAL file passes its high-water mark. Writers wait
 * (bounded) while the WAL is past the hard bound, so it stays under it. A
 * checkpoint that cannot complete is counted and logged with what is in its
 * way. The same thread retries a write probe while a full disk or a read-only
 * file blocks writes, and only it ends that state. */
#include "store/store_int.h"

#include "common/log.h"
#include "common/thread.h"
#include "common/timeutil.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#define CKPT_PAGES 2000            /* WAL frames that wake the thread (~8 MiB) */
#define WARN_EVERY_MS 10000        /* at most one warning per cause this often */
#define WRITE_PROBE_EVERY_MS 1000  /* while writes are blocked */
#define WRITE_HEADROOM (4LL << 20) /* free bytes that end a full disk */

int64_t st_wal_bytes(store *st)
{
    struct stat sb;
    return st->wal_fd >= 0 && fstat(st->wal_fd, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

int st_wal_hook(void *ctx, sqlite3 *db, const char *name, int pages)
{
    (void)db;
    (void)name;
    store *st = ctx;
    if (pages >= CKPT_PAGES) {
        pthread_mutex_lock(&st->ckpt_mu);
        if (!st->ckpt_wanted) {
            st->ckpt_wanted = 1;
            pthread_cond_broadcast(&st->ckpt_cv);
        }
        pthread_mutex_unlock(&st->ckpt_mu);
    }
    return SQLITE_OK;
}

/* Hard bound minus one hook's worth of frames: a writer that finds the WAL
 * past it waits for the checkpoint before adding more. */
static int64_t writer_stop_bytes(const store *st)
{
    int64_t margin = (int64_t)CKPT_PAGES * (st->page_size + 24);
    int64_t stop = st->opt.wal_max_bytes - margin;
    return stop > st->opt.wal_high_water_bytes ? stop : st->opt.wal_high_water_bytes;
}

void st_wal_bound_wait(store *st)
{
    /* not the checkpoint thread itself (its write probe) */
    if (!st->ckpt_running || pthread_equal(pthread_self(), st->ckpt)) return;
    if (st_wal_bytes(st) < writer_stop_bytes(st)) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(st->opt.ckpt_wait_ms % 1000) * 1000000L;
    ts.tv_sec += st->opt.ckpt_wait_ms / 1000 + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&st->ckpt_mu);
    st->ckpt_wanted = 1;
    pthread_cond_broadcast(&st->ckpt_cv);
    while (!st->ckpt_stop && st_wal_bytes(st) >= writer_stop_bytes(st)) {
        if (pthread_cond_timedwait(&st->ckpt_cv, &st->ckpt_mu, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&st->ckpt_mu);
}

/* What keeps a checkpoint from completing: the read connection of this
 * process that has been in use longest, the open write transaction, or else
 * another process. */
static void name_blocker(store *st, char *out, size_t cap)
{
    int64_t now = time_mono_ms();
    int who = -1;
    int64_t since = 0;
    const char *sql = NULL;
    pthread_mutex_lock(&st->rmu);
    for (int i = 0; i < st->nreaders; i++) {
        if (st->readers[i].in_use && (who < 0 || st->readers[i].since_ms < since)) {
            who = i;
            since = st->readers[i].since_ms;
            sql = __atomic_load_n(&st->readers[i].last_sql, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&st->rmu);
    int64_t w_since = __atomic_load_n(&st->w_since_ms, __ATOMIC_RELAXED);
    const char *w_op = __atomic_load_n(&st->w_op, __ATOMIC_RELAXED);
    if (who >= 0)
        snprintf(out, cap, "read connection %d, in use for %lld ms (statement: %.120s)", who,
                 (long long)(now - since), sql ? sql : "none");
    else if (w_since > 0)
        snprintf(out, cap, "the write transaction '%s', open for %lld ms", w_op ? w_op : "?",
                 (long long)(now - w_since));
    else
        snprintf(out, cap, "another process (a read snapshot or the write lock on the file)");
}

static void checkpoint_once(store *st)
{
    int64_t wal = st_wal_bytes(st);
    int hard = wal >= st->opt.wal_high_water_bytes;
    int mode = hard ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE;
    if (hard) sqlite3_busy_timeout(st->ck.db, st->opt.ckpt_wait_ms);
    int64_t t0 = time_mono_ms();
    int log_frames = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(st->ck.db, NULL, mode, &log_frames, &done);
    int64_t dt = time_mono_ms() - t0;
    if (hard) sqlite3_busy_timeout(st->ck.db, 0);
    __atomic_store_n(&st->ckpt_last_us, dt * 1000, __ATOMIC_RELAXED);
    if (rc == SQLITE_OK && log_frames < 0) {
        /* The connection does not see the database in WAL mode: nothing was
         * copied. Never expected (store_open reads through it first). */
        log_warn("store checkpoint copied nothing: its connection is not in WAL mode",
                 LOG_S("db", st->path));
        return;
    }
    int blocked = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
    if (rc != SQLITE_OK && !blocked) {
        int64_t now = time_mono_ms();
        if (now - st->ckpt_err_logged_ms >= WARN_EVERY_MS) {
            st->ckpt_err_logged_ms = now;
            log_warn("store checkpoint failed", LOG_S("error", sqlite3_errmsg(st->ck.db)),
                     LOG_I("wal_bytes", wal));
        }
        return;
    }
    if (!blocked) __atomic_add_fetch(&st->ckpt_count, 1, __ATOMIC_RELAXED);
    if (blocked && hard) {
        uint64_t n = __atomic_add_fetch(&st->ckpt_blocked, 1, __ATOMIC_RELAXED);
        int64_t now = time_mono_ms();
        if (now - st->blocked_logged_ms >= WARN_EVERY_MS) {
            st->blocked_logged_ms = now;
            char who[256];
            name_blocker(st, who, sizeof who);
            log_warn("store checkpoint blocked: the write-ahead log stays above its high-water "
                     "mark",
                     LOG_S("blocker", who), LOG_I("wal_bytes", wal),
                     LOG_I("high_water_bytes", st->opt.wal_high_water_bytes),
                     LOG_I("checkpoints_blocked", n), LOG_I("waited_ms", dt));
        }
    }
}

int64_t st_free_bytes(const store *st)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", st->path);
    struct statvfs sv;
    if (statvfs(dirname(dir), &sv) != 0) return -1;
    return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

/* While writes fail for want of space or permission, probes them (at most
 * once a second). Small writes can succeed in the WAL's already allocated
 * space while larger ones still fail, so a full disk counts as back only with
 * WRITE_HEADROOM free as well. */
static void retry_blocked_writes(store *st)
{
    int blocked = __atomic_load_n(&st->write_blocked, __ATOMIC_RELAXED);
    if (!blocked) return;
    int64_t avail = st_free_bytes(st);
    if (blocked == STORE_FULL && avail >= 0 && avail < WRITE_HEADROOM) return;
    store_err e = {0};
    if (st_write_probe(st, &e) != STORE_OK) return;
    __atomic_store_n(&st->write_blocked, 0, __ATOMIC_RELAXED);
    log_info("store takes writes again", LOG_S("db", st->path), LOG_I("free_bytes", avail));
}

static void *ckpt_main(void *arg)
{
    store *st = arg;
    int64_t last_probe = 0;
    pthread_mutex_lock(&st->ckpt_mu);
    while (!st->ckpt_stop) {
        if (!st->ckpt_wanted) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&st->ckpt_cv, &st->ckpt_mu, &ts);
        }
        if (st->ckpt_stop) break;
        st->ckpt_wanted = 0;
        pthread_mutex_unlock(&st->ckpt_mu);
        checkpoint_once(st);
        int64_t now = time_mono_ms();
        if (now - last_probe >= WRITE_PROBE_EVERY_MS) {
            last_probe = now;
            retry_blocked_writes(st);
        }
        pthread_mutex_lock(&st->ckpt_mu);
        pthread_cond_broadcast(&st->ckpt_cv); /* writers waiting on the bound */
    }
    pthread_mutex_unlock(&st->ckpt_mu);
    return NULL;
}

int st_ckpt_start(store *st, store_err *err)
{
    /* A connection learns that the database is in WAL mode from its header,
     * at its first read; until then sqlite3_wal_checkpoint_v2 on it returns
     * SQLITE_OK with -1 frames and copies nothing. */
    int rc = sqlite3_exec(st->ck.db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return st_sqlfail(err, st->ck.db, rc, "open the checkpoint connection");
    sqlite3_wal_hook(st->w.db, st_wal_hook, st);
    if (pthread_create(&st->ckpt, NULL, ckpt_main, st) != 0)
        return st_errf(err, STORE_ERROR, "start checkpoint thread: %s", strerror(errno));
    st->ckpt_running = 1;
    return STORE_OK;
}

void st_ckpt_stop(store *st)
{
    if (!st->ckpt_running) return;
    thread_stop_join(st->ckpt, &st->ckpt_mu, &st->ckpt_cv, &st->ckpt_stop);
    st->ckpt_running = 0;
}

void st_note_write_status(store *st, int code)
{
    if (code != STORE_FULL && code != STORE_READONLY) return;
    int was = __atomic_exchange_n(&st->write_blocked, code, __ATOMIC_RELAXED);
    if (was != code)
        log_warn("store writes blocked; new work pauses until they succeed again",
                 LOG_S("db", st->path), LOG_S("reason", store_status_name(code)));
}
