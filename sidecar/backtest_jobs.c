/* sidecar/backtest_jobs: see backtest_jobs.h. */
#include "sidecar/backtest_jobs.h"

#include "common/ids.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "sidecar/backtest/backtest.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* in memory: the running one and the finished ones not saved yet */
#define JOBS_KEPT 16

typedef struct {
    char id[37];
    backtest *bt; /* owned */
    double created_at;
    json_t *request; /* owned: {definitions, baseline, since?, limit?} */
    int saving;      /* backtest_jobs_tick is saving it (outside mu) */
    int save_failed; /* the store refused it once (logged once; kept in memory) */
} job;

struct backtest_jobs {
    pthread_mutex_t mu;
    sbx_pool *pool;
    store *st;
    const char *db_path;
    int jobs;
    double retention_s;
    job v[JOBS_KEPT];
    size_t n;
    /* the rows of the saved backtest whose pages are being read */
    char cached_id[37];
    json_t *cached_rows;
};

backtest_jobs *backtest_jobs_new(sbx_pool *pool, store *st, const char *db_path, int jobs,
                                 double retention_hours)
{
    backtest_jobs *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    j->pool = pool;
    j->st = st;
    j->db_path = db_path;
    j->jobs = jobs > 0 ? jobs : 1;
    j->retention_s = retention_hours > 0 ? retention_hours * 3600 : 0;
    return j;
}

static void job_clear(job *b)
{
    backtest_free(b->bt);
    json_decref(b->request);
    memset(b, 0, sizeof *b);
}

static int active(backtest *bt)
{
    backtest_state s = backtest_get_state(bt);
    return s == BT_QUEUED || s == BT_RUNNING;
}

/* mu held: removes v[i]. */
static void job_remove(backtest_jobs *j, size_t i)
{
    job_clear(&j->v[i]);
    memmove(&j->v[i], &j->v[i + 1], (j->n - i - 1) * sizeof j->v[0]);
    j->n--;
}

/* mu held: drops finished backtests past the retention, and the oldest
 * finished one when all slots are taken (only those the store would not
 * keep: the others are saved). */
static void prune(backtest_jobs *j)
{
    double now = time_now();
    for (size_t i = 0; i < j->n;) {
        int old = j->retention_s > 0 && now - j->v[i].created_at > j->retention_s;
        int full = j->n == JOBS_KEPT && i == 0;
        if ((old || full) && !active(j->v[i].bt) && !j->v[i].saving) {
            job_remove(j, i);
            continue;
        }
        i++;
    }
}

static job *find(backtest_jobs *j, const char *id)
{
    for (size_t i = 0; i < j->n; i++)
        if (!strcmp(j->v[i].id, id)) return &j->v[i];
    return NULL;
}

/* Saves one finished job (not under mu: the handle stays until this
 * returns, since only the tick and free remove a job and they do not run at
 * once). 0 when saved. */
static int save(backtest_jobs *j, job *b)
{
    long done = 0, total = 0;
    backtest_progress(b->bt, &done, &total);
    json_t *rows = backtest_rows(b->bt, 0, NULL, 0, SIZE_MAX, NULL);
    char *rows_s = json_dumps(rows, JSON_COMPACT);
    json_decref(rows);
    json_t *summary = backtest_summary(b->bt);
    char *summary_s = summary ? json_dumps(summary, JSON_COMPACT) : NULL;
    json_decref(summary);
    char *request_s = json_dumps(b->request, JSON_COMPACT);
    char why[BACKTEST_ERROR_MAX];
    int failed = backtest_error(b->bt, why, sizeof why);
    store_backtest r = {.id = b->id,
                        .state = (char *)backtest_state_name(backtest_get_state(b->bt)),
                        .created_at = b->created_at,
                        .finished_at = time_now(),
                        .done = done,
                        .total = total,
                        .request_json = request_s,
                        .summary_json = summary_s,
                        .error = failed ? why : NULL};
    store_err e = {0};
    int code = rows_s && request_s ? store_backtest_put(j->st, &r, rows_s, strlen(rows_s), &e)
                                   : (snprintf(e.msg, sizeof e.msg, "out of memory"), STORE_ERROR);
    if (code != STORE_OK && !b->save_failed)
        log_warn("could not save a finished backtest; it stays in memory until the restart",
                 LOG_S("backtest", b->id), LOG_S("error", e.msg));
    free(rows_s);
    free(summary_s);
    free(request_s);
    return code == STORE_OK ? 0 : -1;
}

void backtest_jobs_tick(void *ud)
{
    backtest_jobs *j = ud;
    if (j->st == NULL) return;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        job *b = NULL;
        for (size_t i = 0; i < j->n && !b; i++)
            if (!active(j->v[i].bt) && !j->v[i].saving && !j->v[i].save_failed) b = &j->v[i];
        if (b) b->saving = 1;
        pthread_mutex_unlock(&j->mu);
        if (b == NULL) return;
        int ok = save(j, b) == 0;
        pthread_mutex_lock(&j->mu);
        b->saving = 0;
        if (ok)
            job_remove(j, (size_t)(b - j->v));
        else
            b->save_failed = 1;
        pthread_mutex_unlock(&j->mu);
    }
}

void backtest_jobs_free(backtest_jobs *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) {
        backtest_cancel(j->v[i].bt);
        backtest_wait(j->v[i].bt, NULL);
    }
    backtest_jobs_tick(j);
    for (size_t i = 0; i < j->n; i++)
        job_clear(&j->v[i]);
    json_decref(j->cached_rows);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* error: why a failed one failed, else NULL */
static json_t *doc_new(const char *id, const char *state, long done, long total, double created,
                       const char *error)
{
    char at[64];
    return json_pack("{s:s,s:s,s:{s:I,s:I},s:s,s:s?}", "id", id, "state", state, "progress", "done",
                     (json_int_t)done, "total", (json_int_t)total, "created_at",
                     time_rfc3339(created, at, sizeof at), "error", error);
}

static json_t *doc(const job *b, int full)
{
    long done = 0, total = 0;
    backtest_progress(b->bt, &done, &total);
    char why[BACKTEST_ERROR_MAX];
    int failed = backtest_error(b->bt, why, sizeof why);
    json_t *d = doc_new(b->id, backtest_state_name(backtest_get_state(b->bt)), done, total,
                        b->created_at, failed ? why : NULL);
    if (full) {
        json_t *s = backtest_summary(b->bt);
        json_object_set_new(d, "summary", s ? s : json_null());
        json_object_set(d, "definitions", json_object_get(b->request, "definitions"));
        json_object_set(d, "baseline", json_object_get(b->request, "baseline"));
    }
    return d;
}

/* A saved backtest's document (full: with its summary and request). */
static json_t *saved_doc(const store_backtest *r, int full)
{
    json_t *d = doc_new(r->id, r->state, (long)r->done, (long)r->total, r->created_at, r->error);
    if (full) {
        json_t *s = r->summary_json ? json_loads(r->summary_json, 0, NULL) : NULL;
        json_object_set_new(d, "summary", s ? s : json_null());
        json_t *q = r->request_json ? json_loads(r->request_json, 0, NULL) : NULL;
        json_t *defs = json_object_get(q, "definitions"), *base = json_object_get(q, "baseline");
        json_object_set(d, "definitions", defs ? defs : json_null());
        json_object_set(d, "baseline", base ? base : json_null());
        json_decref(q);
    }
    return d;
}

static int op_start(void *ctx, const json_t *req, char **id, fps_err *e)
{
    backtest_jobs *j = ctx;
    *id = NULL;
    pthread_mutex_lock(&j->mu);
    prune(j);
    for (size_t i = 0; i < j->n; i++)
        if (active(j->v[i].bt)) {
            pthread_mutex_unlock(&j->mu);
            fps_err_set(e, -1, 429, "backtest_busy", "backtest %s is still %s; one runs at a time",
                        j->v[i].id, backtest_state_name(backtest_get_state(j->v[i].bt)));
            return 429;
        }
    if (j->n == JOBS_KEPT) {
        pthread_mutex_unlock(&j->mu);
        fps_err_set(e, -1, 429, "backtest_busy", "too many finished backtests wait to be saved");
        return 429;
    }
    char *defs = json_dumps(json_object_get(req, "definitions"), JSON_COMPACT);
    json_t *base = json_object_get(req, "baseline");
    char *base_s = json_is_array(base) ? json_dumps(base, JSON_COMPACT) : NULL;
    backtest_config c = {.pool = j->pool,
                         .jobs = j->jobs,
                         .background = 1,
                         .definitions = defs,
                         .baseline = json_is_string(base) ? "production" : base_s,
                         .db_path = j->db_path,
                         .since = json_string_value(json_object_get(req, "since")),
                         .limit = (long)json_integer_value(json_object_get(req, "limit")),
                         .keep_rows = 1};
    fps_err be = {0};
    backtest *bt = backtest_start(&c, &be);
    free(defs);
    free(base_s);
    if (bt == NULL) {
        pthread_mutex_unlock(&j->mu);
        /* an unreadable archive is not a refusal (that backtest ends failed);
         * what is left: bad definitions, or no thread to run on */
        fps_err_set(e, -1, be.code == BT_EIO ? 503 : 400,
                    be.code == BT_EIO ? "cannot_start" : "invalid_request", "%s", be.msg);
        return e->http_status;
    }
    job *b = &j->v[j->n++];
    memset(b, 0, sizeof *b);
    ids_uuid(b->id);
    b->bt = bt;
    b->created_at = time_now();
    b->request = json_deep_copy(req);
    *id = strdup(b->id);
    pthread_mutex_unlock(&j->mu);
    return 202;
}

static json_t *op_get(void *ctx, const char *id)
{
    backtest_jobs *j = ctx;
    pthread_mutex_lock(&j->mu);
    job *b = find(j, id);
    json_t *d = b ? doc(b, 1) : NULL;
    pthread_mutex_unlock(&j->mu);
    if (d || j->st == NULL) return d;
    store_backtest r = {0};
    store_err e;
    if (store_backtest_get(j->st, id, &r, &e) == STORE_OK) d = saved_doc(&r, 1);
    store_backtest_clear(&r);
    return d;
}

/* The rows of all matching the filter, from offset, at most limit. */
static json_t *rows_page(const json_t *all, int changed_only, const char *eval_key, size_t offset,
                         size_t limit, size_t *total)
{
    json_t *out = json_array();
    size_t n = 0, i;
    const json_t *r;
    json_array_foreach(all, i, r)
    {
        if (changed_only && !json_is_true(json_object_get(r, "changed"))) continue;
        if (eval_key && strcmp(json_string_value(json_object_get(r, "eval_key")) ?: "", eval_key))
            continue;
        if (n >= offset && n - offset < limit) json_array_append(out, (json_t *)r);
        n++;
    }
    if (total) *total = n;
    return out;
}

static json_t *op_rows(void *ctx, const char *id, int changed_only, const char *eval_key,
                       size_t offset, size_t limit, size_t *total)
{
    backtest_jobs *j = ctx;
    pthread_mutex_lock(&j->mu);
    job *b = find(j, id);
    json_t *r = b ? backtest_rows(b->bt, changed_only, eval_key, offset, limit, total) : NULL;
    if (!b && j->st && strcmp(j->cached_id, id) != 0) {
        /* a saved one: its rows read once for all its pages */
        char *text = NULL;
        size_t len = 0;
        store_err e;
        int code = store_backtest_rows(j->st, id, &text, &len, &e);
        if (code == STORE_OK) {
            json_t *all = json_loadb(text, len, 0, NULL);
            json_decref(j->cached_rows);
            j->cached_rows = json_is_array(all) ? all : (json_decref(all), json_array());
            snprintf(j->cached_id, sizeof j->cached_id, "%s", id);
        } else if (code != STORE_NOTFOUND) {
            log_warn("could not read a saved backtest's rows", LOG_S("backtest", id),
                     LOG_S("error", e.msg));
        }
        free(text);
    }
    if (!b && j->cached_rows && !strcmp(j->cached_id, id))
        r = rows_page(j->cached_rows, changed_only, eval_key, offset, limit, total);
    pthread_mutex_unlock(&j->mu);
    return r;
}

static int op_cancel(void *ctx, const char *id, fps_err *e)
{
    backtest_jobs *j = ctx;
    pthread_mutex_lock(&j->mu);
    job *b = find(j, id);
    if (b) backtest_cancel(b->bt);
    pthread_mutex_unlock(&j->mu);
    if (b) return 200;
    /* a saved one has finished: nothing to cancel */
    store_backtest r = {0};
    store_err se;
    int found = j->st && store_backtest_get(j->st, id, &r, &se) == STORE_OK;
    store_backtest_clear(&r);
    if (found) return 200;
    fps_err_set(e, -1, 404, "not_found", "no backtest '%.100s'", id);
    return 404;
}

static json_t *op_list(void *ctx)
{
    backtest_jobs *j = ctx;
    json_t *a = json_array();
    pthread_mutex_lock(&j->mu);
    prune(j);
    for (size_t i = j->n; i-- > 0;)
        json_array_append_new(a, doc(&j->v[i], 0));
    pthread_mutex_unlock(&j->mu);
    if (j->st == NULL) return a;
    store_backtest *r = NULL;
    size_t n = 0;
    store_err e;
    if (store_backtest_list(j->st, &r, &n, &e) != STORE_OK) {
        log_warn("could not list the saved backtests", LOG_S("error", e.msg));
        return a;
    }
    for (size_t i = 0; i < n; i++) {
        /* one being saved may show twice for a moment: memory's wins */
        int dup = 0;
        for (size_t k = 0; k < json_array_size(a) && !dup; k++)
            dup = !strcmp(json_string_value(json_object_get(json_array_get(a, k), "id")), r[i].id);
        if (!dup) json_array_append_new(a, saved_doc(&r[i], 0));
    }
    store_backtests_free(r, n);
    return a;
}

api_backtest_ops backtest_jobs_ops(backtest_jobs *j)
{
    api_backtest_ops o = {.ctx = j,
                          .start = op_start,
                          .get = op_get,
                          .rows = op_rows,
                          .cancel = op_cancel,
                          .list = op_list};
    return o;
}
