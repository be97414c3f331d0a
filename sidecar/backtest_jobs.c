/* sidecar/backtest_jobs: see backtest_jobs.h. */
#include "sidecar/backtest_jobs.h"

#include "common/ids.h"
#include "common/timeutil.h"
#include "sidecar/backtest/backtest.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define JOBS_KEPT 16

typedef struct {
    char id[37];
    backtest *bt; /* owned */
    double created_at;
    json_t *definitions, *baseline; /* owned */
} job;

struct backtest_jobs {
    pthread_mutex_t mu;
    sbx_pool *pool;
    const char *db_path;
    int jobs;
    double retention_s;
    job v[JOBS_KEPT];
    size_t n;
};

backtest_jobs *backtest_jobs_new(sbx_pool *pool, const char *db_path, int jobs,
                                 double retention_hours)
{
    backtest_jobs *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    j->pool = pool;
    j->db_path = db_path;
    j->jobs = jobs > 0 ? jobs : 1;
    j->retention_s = retention_hours > 0 ? retention_hours * 3600 : 0;
    return j;
}

static void job_clear(job *b)
{
    backtest_free(b->bt);
    json_decref(b->definitions);
    json_decref(b->baseline);
    memset(b, 0, sizeof *b);
}

void backtest_jobs_free(backtest_jobs *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n; i++)
        job_clear(&j->v[i]);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static int active(backtest *bt)
{
    backtest_state s = backtest_get_state(bt);
    return s == BT_QUEUED || s == BT_RUNNING;
}

/* mu held: drops finished backtests past the retention, and the oldest
 * finished one when all slots are taken. */
static void prune(backtest_jobs *j)
{
    double now = time_now();
    for (size_t i = 0; i < j->n;) {
        int old = j->retention_s > 0 && now - j->v[i].created_at > j->retention_s;
        int full = j->n == JOBS_KEPT && i == 0;
        if ((old || full) && !active(j->v[i].bt)) {
            job_clear(&j->v[i]);
            memmove(&j->v[i], &j->v[i + 1], (j->n - i - 1) * sizeof j->v[0]);
            j->n--;
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

static json_t *doc(const job *b, int full)
{
    long done = 0, total = 0;
    backtest_progress(b->bt, &done, &total);
    char at[64];
    json_t *d = json_pack("{s:s,s:s,s:{s:I,s:I},s:s}", "id", b->id, "state",
                          backtest_state_name(backtest_get_state(b->bt)), "progress", "done",
                          (json_int_t)done, "total", (json_int_t)total, "created_at",
                          time_rfc3339(b->created_at, at, sizeof at));
    if (full) {
        json_t *s = backtest_summary(b->bt);
        json_object_set_new(d, "summary", s ? s : json_null());
        json_object_set(d, "definitions", b->definitions);
        json_object_set(d, "baseline", b->baseline);
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
        fps_err_set(e, -1, 429, "backtest_busy", "too many backtests kept");
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
        fps_err_set(e, -1, be.code == BT_EIO ? 503 : 400,
                    be.code == BT_EIO ? "archive_unavailable" : "invalid_request", "%s", be.msg);
        return e->http_status;
    }
    job *b = &j->v[j->n++];
    ids_uuid(b->id);
    b->bt = bt;
    b->created_at = time_now();
    b->definitions = json_incref(json_object_get(req, "definitions"));
    b->baseline = json_incref(base);
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
    return d;
}

static json_t *op_rows(void *ctx, const char *id, int changed_only, const char *eval_key,
                       size_t offset, size_t limit, size_t *total)
{
    backtest_jobs *j = ctx;
    pthread_mutex_lock(&j->mu);
    job *b = find(j, id);
    json_t *r = b ? backtest_rows(b->bt, changed_only, eval_key, offset, limit, total) : NULL;
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
    if (!b) fps_err_set(e, -1, 404, "not_found", "no backtest '%.100s'", id);
    return b ? 200 : 404;
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
