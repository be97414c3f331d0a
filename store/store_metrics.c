/* store/store_metrics: persistent metric counters (the metrics table, and
 * the process's counter registry, common/metrics, saved into it and restored
 * from it) and the latency histogram buckets. */
#include "common/metrics.h"
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
    return st_exec_tx(st, sql, "add metric", err,
                      ST_ARGS(ST_TEXT(name), ST_TEXT(labels ? labels : ""), ST_DBL(delta)));
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
    for (size_t i = 0; i < n && code == STORE_OK; i++)
        code = st_exec(st, sql, "save metrics", err,
                       ST_ARGS(ST_TEXT(m[i].name), ST_TEXT(m[i].labels ? m[i].labels : ""),
                               ST_DBL(m[i].value)));
    return st_wend(st, code, "save metrics", err);
}

static const st_col METRIC_COLS[] = {ST_COL(TEXT, store_metric, name),
                                     ST_COL(TEXT, store_metric, labels),
                                     ST_COL(DBL, store_metric, value)};
static const st_table METRIC = ST_TABLE(store_metric, METRIC_COLS);

int store_metrics_load(store *st, store_metric **out, size_t *n, store_err *err)
{
    static const char sql[] = "SELECT name, labels, value FROM metrics ORDER BY name, labels";
    st_vec v = {.t = &METRIC};
    int code = st_read_all(st, sql, "load metrics", err, &v, NULL, 0);
    *out = v.items;
    *n = v.n;
    return code;
}

void store_metrics_free(store_metric *m, size_t n)
{
    st_rows_free(&METRIC, m, n);
}

/* ------------------------------------------- the process's counter registry */

int store_metrics_restore(store *st, size_t *seeded, store_err *err)
{
    store_metric *m = NULL;
    size_t n = 0, ok = 0;
    if (seeded) *seeded = 0;
    int code = store_metrics_load(st, &m, &n, err);
    if (code != STORE_OK) return code;
    for (size_t i = 0; i < n; i++) {
        char key[1024];
        /* a row the registry does not take (a family that is no longer a
         * counter, a key too long) is left in the table, unseeded */
        if (metrics_key_join(key, sizeof key, m[i].name, m[i].labels) == 0 &&
            metrics_counter_seed(key, m[i].value) == 0)
            ok++;
    }
    store_metrics_free(m, n);
    if (seeded) *seeded = ok;
    return STORE_OK;
}

typedef struct {
    store_metric *m; /* owned, with its strings */
    size_t n, cap;
} persist_acc;

/* metrics_counters_foreach's callback: copies one series (the registry's
 * lock is held, so no SQL here). */
static int persist_collect(const char *key, double value, void *ud)
{
    persist_acc *a = ud;
    size_t nl, ll;
    const char *labels;
    if (metrics_key_split(key, &nl, &labels, &ll) != 0) return 0; /* never canonical: skip */
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        store_metric *m = realloc(a->m, cap * sizeof *m);
        if (m == NULL) return -1;
        a->m = m;
        a->cap = cap;
    }
    store_metric *x = &a->m[a->n];
    x->name = strndup(key, nl);
    x->labels = strndup(labels, ll);
    x->value = value;
    if (x->name == NULL || x->labels == NULL) {
        free(x->name);
        free(x->labels);
        return -1;
    }
    a->n++;
    return 0;
}

int store_metrics_persist(store *st, store_err *err)
{
    persist_acc a = {0};
    int code = STORE_OK;
    if (metrics_counters_foreach(persist_collect, &a) != 0)
        code = st_errf(err, STORE_ERROR, "save metrics: out of memory");
    else
        code = store_metrics_save(st, a.m, a.n, err);
    store_metrics_free(a.m, a.n);
    return code;
}
