/* store/store_stats: the store's size and health as figures for the admin
 * API and the metrics: file sizes, checkpoint counters, rows pruned, the
 * outbox backlog and whether writes are blocked. */
#include "store/store_int.h"

#include <string.h>
#include <sys/stat.h>

typedef struct {
    store_stats *out;
    double now;
} outbox_figures;

static void outbox_row(sqlite3_stmt *s, void *ctx)
{
    outbox_figures *f = ctx;
    f->out->outbox_depth = sqlite3_column_int64(s, 0);
    double oldest = st_col_dbl(s, 1);
    f->out->oldest_unsent_age_s = oldest > 0 && f->now > oldest ? f->now - oldest : 0;
}

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
    outbox_figures f = {out, now};
    return st_read_one(st, sql, "read outbox figures", err, outbox_row, &f, NULL, 0);
}

int store_write_blocked(store *st)
{
    return __atomic_load_n(&st->write_blocked, __ATOMIC_RELAXED);
}
