/* store/store_backtests: the admin API's finished backtests (their state,
 * progress, request and summary in one row of `backtests`, their rows
 * zstd-compressed in `backtest_rows`), bounded by count and by compressed
 * bytes when one is saved (see store.h). */
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define ROWS_LEVEL 3

static const st_col BT_COLS[] = {
    ST_COL(TEXT, store_backtest, id),           ST_COL(TEXT, store_backtest, state),
    ST_COL(DBL, store_backtest, created_at),    ST_COL(DBL, store_backtest, finished_at),
    ST_COL(INT64, store_backtest, done),        ST_COL(INT64, store_backtest, total),
    ST_COL(TEXT, store_backtest, request_json), ST_COL(TEXT, store_backtest, summary_json),
    ST_COL(INT64, store_backtest, rows_bytes),  ST_COL(TEXT, store_backtest, error)};
static const st_table BT = ST_TABLE(store_backtest, BT_COLS);

int store_backtest_put(store *st, const store_backtest *b, const char *rows_json, size_t len,
                       store_err *err)
{
    static const char ins[] =
        "INSERT INTO backtests(id, state, created_at, finished_at, done, total, request_json,"
        " summary_json, rows_bytes, error) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    static const char ins_rows[] =
        "INSERT INTO backtest_rows(seq, raw_bytes, data) VALUES(last_insert_rowid(), ?1, ?2)";
    /* beyond the count, then beyond the bytes counted from the newest down
     * (the newest is always kept) */
    static const char by_count[] =
        "DELETE FROM backtests WHERE seq IN (SELECT seq FROM backtests ORDER BY seq DESC"
        " LIMIT -1 OFFSET ?1)";
    static const char by_bytes[] =
        "DELETE FROM backtests WHERE seq IN (SELECT seq FROM (SELECT seq, sum(rows_bytes)"
        " OVER (ORDER BY seq DESC) AS acc FROM backtests) WHERE acc > ?1"
        " AND seq < (SELECT max(seq) FROM backtests))";
    if (!b || !b->id || !b->state || !b->request_json || (len && !rows_json))
        return st_errf(err, STORE_INVALID, "save backtest: id, state and request are required");
    size_t cap = ZSTD_compressBound(len);
    void *z = malloc(cap ? cap : 1);
    if (!z) return st_errf(err, STORE_ERROR, "save backtest: out of memory");
    size_t zlen = ZSTD_compress(z, cap, rows_json ? rows_json : "", len, ROWS_LEVEL);
    if (ZSTD_isError(zlen)) {
        free(z);
        return st_errf(err, STORE_ERROR, "save backtest: compress: %s", ZSTD_getErrorName(zlen));
    }
    int code = st_wbegin(st, "save backtest", err);
    if (code) goto done;
    code = st_exec(st, ins, "save backtest", err,
                   ST_ARGS(ST_TEXT(b->id), ST_TEXT(b->state), ST_DBL(b->created_at),
                           ST_DBL(b->finished_at), ST_INT(b->done), ST_INT(b->total),
                           ST_TEXT(b->request_json),
                           b->summary_json ? ST_TEXT(b->summary_json) : ST_NULL,
                           ST_INT((int64_t)zlen), b->error ? ST_TEXT(b->error) : ST_NULL));
    if (!code)
        code = st_exec(st, ins_rows, "save backtest rows", err,
                       ST_ARGS(ST_INT((int64_t)len), ST_BLOB(z, zlen)));
    if (!code)
        code = st_exec(st, by_count, "bound backtests", err, ST_ARGS(ST_INT(STORE_BACKTESTS_KEPT)));
    if (!code)
        code =
            st_exec(st, by_bytes, "bound backtests", err,
                    ST_ARGS(ST_INT(st->opt.backtests_max_bytes > 0 ? st->opt.backtests_max_bytes
                                                                   : STORE_BACKTESTS_MAX_BYTES)));
    if (code) {
        st_wabort(st);
        goto done;
    }
    code = st_wcommit(st, "save backtest", 0, err);
done:
    free(z);
    return code;
}

int store_backtest_list(store *st, store_backtest **out, size_t *n, store_err *err)
{
    static const char sql[] = "SELECT id, state, created_at, finished_at, done, total, NULL,"
                              " NULL, rows_bytes, error FROM backtests ORDER BY seq DESC";
    st_vec v = {.t = &BT};
    int code = st_read_all(st, sql, "list backtests", err, &v, NULL, 0);
    *out = v.items;
    *n = v.n;
    return code;
}

int store_backtest_get(store *st, const char *id, store_backtest *out, store_err *err)
{
    static const char sql[] = "SELECT id, state, created_at, finished_at, done, total,"
                              " request_json, summary_json, rows_bytes, error FROM backtests"
                              " WHERE id = ?1";
    if (!id) return st_errf(err, STORE_INVALID, "get backtest: no id");
    st_into into = {&BT, out};
    return st_read_one(st, sql, "get backtest", err, st_row_into, &into, ST_ARGS(ST_TEXT(id)));
}

typedef struct {
    int64_t raw;
    char *data;
    size_t len;
} bt_rows;
static const st_col ROWS_COLS[] = {ST_COL(INT64, bt_rows, raw), ST_COL_BLOB(bt_rows, data, len)};
static const st_table ROWS = ST_TABLE(bt_rows, ROWS_COLS);

int store_backtest_rows(store *st, const char *id, char **rows, size_t *len, store_err *err)
{
    static const char sql[] = "SELECT r.raw_bytes, r.data FROM backtest_rows r"
                              " JOIN backtests b ON b.seq = r.seq WHERE b.id = ?1";
    *rows = NULL;
    *len = 0;
    if (!id) return st_errf(err, STORE_INVALID, "backtest rows: no id");
    bt_rows r = {0};
    st_into into = {&ROWS, &r};
    int code = st_read_one(st, sql, "backtest rows", err, st_row_into, &into, ST_ARGS(ST_TEXT(id)));
    if (code) return code;
    char *text = r.raw >= 0 ? malloc((size_t)r.raw + 1) : NULL;
    if (!text) {
        code = st_errf(err, r.raw < 0 ? STORE_CORRUPT : STORE_ERROR, "backtest %s rows: %s", id,
                       r.raw < 0 ? "bad size" : "out of memory");
        goto done;
    }
    size_t got = ZSTD_decompress(text, (size_t)r.raw, r.data ? r.data : "", r.len);
    if (ZSTD_isError(got) || got != (size_t)r.raw) {
        free(text);
        code = st_errf(err, STORE_CORRUPT, "backtest %s rows do not decompress to %lld bytes", id,
                       (long long)r.raw);
        goto done;
    }
    text[got] = '\0';
    *rows = text;
    *len = got;
done:
    st_cols_free(&ROWS, &r);
    return code;
}

void store_backtest_clear(store_backtest *b)
{
    if (b) st_cols_free(&BT, b);
}

void store_backtests_free(store_backtest *b, size_t n)
{
    st_rows_free(&BT, b, n);
}
