/* store/store_metrics: persistent metric counters and the latency histogram
 * buckets they are kept in. */
#include "store/store_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- latency buckets */

#define LAT_RATIO 1.15

int st_latency_bucket(int64_t ms)
{
    if (ms < 0) ms = 0;
    int b = (int)floor(log((double)ms + 1.0) / log(LAT_RATIO));
    return b < 0 ? 0 : b;
}

double st_bucket_value(int bucket)
{
    /* geometric middle of [r^b - 1, r^(b+1) - 1) */
    return pow(LAT_RATIO, (double)bucket + 0.5) - 1.0;
}

int store_metric_add(store *st, const char *name, const char *labels, double delta, store_err *err)
{
    static const char sql[] =
        "INSERT INTO metrics(name, labels, value) VALUES(?1, ?2, ?3)"
        " ON CONFLICT(name, labels) DO UPDATE SET value = value + excluded.value";
    if (!name || !name[0]) return st_errf(err, STORE_INVALID, "add metric: no name");
    if (!isfinite(delta)) return st_errf(err, STORE_INVALID, "add metric: delta not finite");
    int code = st_wbegin(st, "add metric", err);
    if (code) return code;
    sqlite3_stmt *s = st_w(st, sql);
    if (s) {
        st_bind_text(s, 1, name);
        st_bind_text(s, 2, labels ? labels : "");
        st_bind_dbl(s, 3, delta);
    }
    code = st_step_done(st, s, "add metric", err);
    return st_wend(st, code, "add metric", err);
}

int store_metrics_save(store *st, const store_metric *m, size_t n, store_err *err)
{
    static const char sql[] = "INSERT INTO metrics(name, labels, value) VALUES(?1, ?2, ?3)"
                              " ON CONFLICT(name, labels) DO UPDATE SET value = excluded.value";
    for (size_t i = 0; i < n; i++)
        if (!m[i].name || !m[i].name[0] || !isfinite(m[i].value))
            return st_errf(err, STORE_INVALID,
                           "save metrics: entry %zu has no name or a "
                           "non-finite value",
                           i);
    if (n == 0) return STORE_OK;
    int code = st_wbegin(st, "save metrics", err);
    if (code) return code;
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *s = st_w(st, sql);
        if (s) {
            st_bind_text(s, 1, m[i].name);
            st_bind_text(s, 2, m[i].labels ? m[i].labels : "");
            st_bind_dbl(s, 3, m[i].value);
        }
        code = st_step_done(st, s, "save metrics", err);
        if (code) {
            st_wabort(st);
            return code;
        }
    }
    return st_wcommit(st, "save metrics", 0, err);
}

int store_metrics_load(store *st, store_metric **out, size_t *n, store_err *err)
{
    static const char sql[] = "SELECT name, labels, value FROM metrics ORDER BY name, labels";
    *out = NULL;
    *n = 0;
    sconn *c = st_rget(st);
    sqlite3_stmt *s = st_stmt(c, sql);
    store_metric *arr = NULL;
    size_t cap = 0, cnt = 0;
    int rc = s ? SQLITE_OK : sqlite3_errcode(c->db), code = STORE_OK;
    if (s) {
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            if (cnt == cap) {
                cap = cap ? cap * 2 : 16;
                arr = realloc(arr, cap * sizeof *arr);
                if (!arr) abort();
            }
            arr[cnt].name = st_col_dup(s, 0);
            arr[cnt].labels = st_col_dup(s, 1);
            arr[cnt].value = st_col_dbl(s, 2);
            cnt++;
        }
        sqlite3_reset(s);
    }
    if (rc != SQLITE_DONE) {
        code = st_sqlfail(err, c->db, rc, "load metrics");
        store_metrics_free(arr, cnt);
        arr = NULL;
        cnt = 0;
    }
    st_rput(st, c);
    *out = arr;
    *n = cnt;
    return code;
}

void store_metrics_free(store_metric *m, size_t n)
{
    if (!m) return;
    for (size_t i = 0; i < n; i++) {
        free(m[i].name);
        free(m[i].labels);
    }
    free(m);
}
