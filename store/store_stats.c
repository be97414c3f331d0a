/* store/store_stats: the store's size and health as figures for the admin
 * API and the metrics: file sizes, checkpoint counters, rows pruned, the
 * outbox backlog and whether writes are blocked. */
#include "store/store_int.h"

#include <string.h>
#include <sys/stat.h>

int store_stats_get(store *st, double now, store_stats *out, store_err *err)
{
    static const char sql[] = "SELECT count(*), min(created_at) FROM outbox";
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (st->lock_fd >= 0 && fstat(st->lock_fd, &sb) == 0) out->db_bytes = (int64_t)sb.st_size;
    out->wal_bytes = st_wal_bytes(st);
    out->checkpoint_ms = (double)__atomic_load_n(&st->ckpt_last_us, __ATOMIC_RELAXED) / 1000.0;
    out->checkpoints = __atomic_load_n(&st->ckpt_count, __ATOMIC_RELAXED);
    out->checkpoints_blocked = __atomic_load_n(&st->ckpt_blocked, __ATOMIC_RELAXED);
    out->rows_pruned = __atomic_load_n(&st->rows_pruned, __ATOMIC_RELAXED);
    out->write_blocked = __atomic_load_n(&st->write_blocked, __ATOMIC_RELAXED);
    out->vacuum_pending = __atomic_load_n(&st->vacuum_pending, __ATOMIC_RELAXED);
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    int rc = s ? sqlite3_step(s) : sqlite3_errcode(c->db);
    int code = STORE_OK;
    if (rc == SQLITE_ROW) {
        out->outbox_depth = sqlite3_column_int64(s, 0);
        double oldest = st_col_dbl(s, 1);
        out->oldest_unsent_age_s = oldest > 0 && now > oldest ? now - oldest : 0;
    } else {
        code = st_sqlfail(err, c->db, rc, "read outbox figures");
    }
    if (s) sqlite3_reset(s);
    st_rput(st, c);
    return code;
}

int store_write_blocked(store *st)
{
    return __atomic_load_n(&st->write_blocked, __ATOMIC_RELAXED);
}
