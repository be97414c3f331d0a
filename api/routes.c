/* api/routes: the admin API's read routes (health, readiness, metrics,
 * status, assignments, runs, stats), drain, the local evaluator routes, and
 * the persistence of metric counters through the store. Handlers only read
 * snapshots (worker status, store read connections) and never block the
 * worker loop. The list routes go through the response cache (cache.c). */
#include "api/internal.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void store_failure(api_resp *rs, int code, const store_err *e)
{
    if (code == STORE_NOTFOUND)
        api_error(rs, 404, "not_found", "no such resource");
    else if (code == STORE_INVALID)
        api_error(rs, 400, "invalid_request", "%s", e->msg);
    else
        api_error(rs, 503, "store_unavailable", "the store could not answer: %s",
                  store_status_name(code));
}

/* ---------------------------------------------------------------- health */

void route_healthz(api_req *rq, api_resp *rs)
{
    strbuf_puts(&rs->body, "{\"status\":\"ok\"}");
}

/* The worker's readiness; not ready, with that reason, when there is none. */
static int worker_is_ready(const api_server *srv, char *reason, size_t cap)
{
    const api_worker_ops *w = &srv->deps.worker;
    if (w->ctx == NULL) {
        snprintf(reason, cap, "the worker is not running");
        return 0;
    }
    return w->ready(w->ctx, reason, cap);
}

/* A new reference to the worker's status snapshot, or NULL without a worker. */
static json_t *worker_status(const api_server *srv)
{
    const api_worker_ops *w = &srv->deps.worker;
    return w->ctx != NULL ? w->status_json(w->ctx) : NULL;
}

/* Registered local evaluators (and definitions); 0 without a registry. */
static int local_count(const api_server *srv, int *defs)
{
    const api_local_ops *l = &srv->deps.local;
    *defs = 0;
    return l->ctx != NULL ? l->count(l->ctx, defs) : 0;
}

void route_readyz(api_req *rq, api_resp *rs)
{
    char reason[256];
    int ready = worker_is_ready(rq->srv, reason, sizeof reason);
    json_t *v = json_pack("{s:b}", "ready", ready);
    if (!ready) json_object_set_new(v, "reason", json_string(reason));
    api_json(rs, ready ? 200 : 503, v);
}

/* Integer field of a JSON object, or -1. */
static double jnum(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : -1;
}

/* Updates the gauges from the live components. */
static void refresh_gauges(api_server *srv)
{
    json_t *st = worker_status(srv);
    double aa = st ? jnum(st, "active_assignments") : -1;
    double ar = st ? jnum(st, "active_runs") : -1;
    double od = st ? jnum(st, "outbox_depth") : -1;
    metrics_gauge_set(METRIC_ACTIVE_ASSIGNMENTS, aa < 0 ? 0 : aa);
    metrics_gauge_set(METRIC_ACTIVE_RUNS, ar < 0 ? 0 : ar);
    metrics_gauge_set(METRIC_ACTIVE_SANDBOXES,
                      srv->deps.pool ? sbx_pool_active(srv->deps.pool) : 0);
    if (od < 0 && srv->deps.db != NULL) {
        int64_t depth = 0;
        if (store_outbox_depth(srv->deps.db, &depth, NULL) == STORE_OK) od = (double)depth;
    }
    metrics_gauge_set(METRIC_OUTBOX_DEPTH, od < 0 ? 0 : od);
    int defs = 0, evs = local_count(srv, &defs);
    metrics_gauge_set(METRIC_LOCAL_EVALUATORS, evs);
    metrics_gauge_set(METRIC_LOCAL_DEFINITIONS, defs);
    char reason[256];
    metrics_gauge_set(METRIC_READY, worker_is_ready(srv, reason, sizeof reason));
    const char *state = st ? json_string_value(json_object_get(st, "state")) : NULL;
    metrics_gauge_set(METRIC_DRAINING, state != NULL && !strcmp(state, "draining"));
    metrics_gauge_set(METRIC_UPTIME, time_now() - srv->started_at);
    json_decref(st);
}

#define METRIC_ADMIN_CACHE_HITS "failproofai_sidecar_admin_cache_hits_total"
#define METRIC_ADMIN_CACHE_MISSES "failproofai_sidecar_admin_cache_misses_total"

void api_cache_metrics(api_server *srv)
{
    unsigned long long hits, misses;
    api_cache_counts(srv->cache, &hits, &misses);
    /* always touched, so both series exist from the first scrape */
    metrics_add(METRIC_ADMIN_CACHE_HITS, (double)hits);
    metrics_add(METRIC_ADMIN_CACHE_MISSES, (double)misses);
}

void route_metrics(api_req *rq, api_resp *rs)
{
    api_cache_metrics(rq->srv);
    refresh_gauges(rq->srv);
    metrics_render(&rs->body);
    rs->content_type = METRICS_CONTENT_TYPE;
}

/* ---------------------------------------------------------------- status */

void route_status(api_req *rq, api_resp *rs)
{
    api_server *srv = rq->srv;
    json_t *st = worker_status(srv);
    if (st == NULL) st = json_object();
    char reason[256];
    int ready = worker_is_ready(srv, reason, sizeof reason);
    json_object_set_new(st, "ready", json_boolean(ready));
    json_object_set_new(st, "ready_reason", ready ? json_null() : json_string(reason));
    const char *state = json_string_value(json_object_get(st, "state"));
    json_object_set_new(st, "draining", json_boolean(state && !strcmp(state, "draining")));
    if (json_object_get(st, "version") == NULL)
        json_object_set_new(st, "version", json_string(FPS_VERSION));
    if (json_object_get(st, "uptime_seconds") == NULL)
        json_object_set_new(st, "uptime_seconds", json_real(time_now() - srv->started_at));
    if (json_object_get(st, "jail") == NULL && srv->deps.pool != NULL) {
        json_object_set_new(st, "jail", sbx_pool_jail_json(srv->deps.pool));
    }
    if (json_object_get(st, "active_sandboxes") == NULL)
        json_object_set_new(st, "active_sandboxes",
                            json_integer(srv->deps.pool ? sbx_pool_active(srv->deps.pool) : 0));
    if (srv->deps.local.ctx != NULL) {
        int defs = 0, n = local_count(srv, &defs);
        json_object_set_new(st, "local_evaluators",
                            json_pack("{s:i,s:i}", "evaluators", n, "definitions", defs));
    }
    json_object_set_new(st, "admin",
                        json_pack("{s:i,s:b,s:b,s:b}", "port", srv->port, "token_required",
                                  srv->admin_token != NULL && !srv->deps.cfg.open_admin,
                                  "open_admin", srv->deps.cfg.open_admin, "remote", srv->remote));
    api_json(rs, 200, st);
}

/* --------------------------------------------------- assignments and runs */

/* Parses ?limit= (1..500); returns 0 (default when absent) or -1 with rs filled. */
static int parse_limit(api_req *rq, api_resp *rs, int *out)
{
    const char *s = api_query(rq, "limit");
    *out = 0;
    if (s == NULL) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > 500) {
        api_error(rs, 400, "invalid_request", "limit must be an integer from 1 to 500");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int need_store(api_req *rq, api_resp *rs)
{
    if (rq->srv->deps.db != NULL) return 0;
    api_error(rs, 503, "store_unavailable", "the store is not open");
    return -1;
}

static const char *empty_null(const char *s)
{
    return (s != NULL && *s != '\0') ? s : NULL;
}

/* Longest normalized query cached (longer ones are rendered every time). */
#define CACHE_KEY_MAX 1024

/* Appends one query value to a cache key, length-prefixed so that no two
 * queries share a key ("-" for an absent value). */
static void key_part(strbuf *k, const char *v)
{
    if (v == NULL) {
        strbuf_puts(k, "|-");
        return;
    }
    strbuf_putc(k, '|');
    strbuf_put_i64(k, (long long)strlen(v));
    strbuf_putc(k, ':');
    strbuf_puts(k, v);
}

/* Looks the normalized query (route, limit, then the n filter values in a
 * fixed order) up in the response cache. Returns 1 when rs now holds the
 * cached page. Otherwise returns 0 and, unless the store's change version
 * could not be read, sets rs up to store the page about to be rendered. The
 * version is read here, before the render's query starts (see cache.c). */
static int cache_lookup(api_req *rq, api_resp *rs, const char *route, int limit,
                        const char *const *vals, int n)
{
    uint64_t version;
    store_err e = {0};
    if (rq->srv->cache == NULL) return 0;
    if (store_change_version(rq->srv->deps.db, &version, &e) != STORE_OK) return 0;
    strbuf k;
    strbuf_init(&k);
    strbuf_puts(&k, route);
    strbuf_putc(&k, '|');
    strbuf_put_i64(&k, limit);
    for (int i = 0; i < n; i++)
        key_part(&k, vals[i]);
    if (k.len > CACHE_KEY_MAX) {
        strbuf_free(&k);
        return 0;
    }
    api_cached *hit = api_cache_get(rq->srv->cache, k.data, k.len, version);
    if (hit != NULL) {
        strbuf_free(&k);
        rs->status = 200;
        rs->cached = hit;
        return 1;
    }
    rs->cache = rq->srv->cache;
    rs->cache_version = version;
    rs->cache_key = strbuf_detach(&k, &rs->cache_klen);
    return 0;
}

void route_assignments(api_req *rq, api_resp *rs)
{
    int limit;
    if (need_store(rq, rs) || parse_limit(rq, rs, &limit)) return;
    store_assignment_filter f = {empty_null(api_query(rq, "status")), limit,
                                 empty_null(api_query(rq, "cursor"))};
    const char *vals[] = {f.status, f.cursor};
    if (cache_lookup(rq, rs, "assignments", limit, vals, 2)) return;
    store_err e = {0};
    int rc = store_assignments_list_json(rq->srv->deps.db, &f, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

void route_assignment(api_req *rq, api_resp *rs)
{
    if (need_store(rq, rs)) return;
    store_err e = {0};
    int rc = store_assignment_get_json(rq->srv->deps.db, rq->param, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

void route_runs(api_req *rq, api_resp *rs)
{
    int limit;
    if (need_store(rq, rs) || parse_limit(rq, rs, &limit)) return;
    const char *assignment = empty_null(api_query(rq, "assignment"));
    if (assignment == NULL) assignment = empty_null(api_query(rq, "assignment_id"));
    store_run_filter f = {empty_null(api_query(rq, "status")),
                          empty_null(api_query(rq, "eval_key")), assignment, limit,
                          empty_null(api_query(rq, "cursor"))};
    const char *vals[] = {f.status, f.eval_key, f.assignment_id, f.cursor};
    if (cache_lookup(rq, rs, "runs", limit, vals, 4)) return;
    store_err e = {0};
    int rc = store_runs_list_json(rq->srv->deps.db, &f, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

void route_run(api_req *rq, api_resp *rs)
{
    if (need_store(rq, rs)) return;
    store_err e = {0};
    int rc = store_run_get_json(rq->srv->deps.db, rq->param, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

void route_stats(api_req *rq, api_resp *rs)
{
    if (need_store(rq, rs)) return;
    int minutes = 60;
    const char *s = api_query(rq, "minutes");
    if (s != NULL) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*s == '\0' || *end != '\0' || v < 1 || v > 1440) {
            api_error(rs, 400, "invalid_request", "minutes must be an integer from 1 to 1440");
            return;
        }
        minutes = (int)v;
    }
    store_err e = {0};
    int rc = store_charts_json(rq->srv->deps.db, time_now(), minutes, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

/* ----------------------------------------------------------------- drain */

void route_drain(api_req *rq, api_resp *rs)
{
    if (rq->body_len > 0) { /* optional body; must be JSON when present */
        json_t *b = api_body_object(rq, rs);
        if (b == NULL) return;
        json_decref(b);
    }
    const api_worker_ops *w = &rq->srv->deps.worker;
    if (w->ctx == NULL) {
        api_error(rs, 503, "worker_unavailable", "the worker is not running");
        return;
    }
    w->drain(w->ctx);
    log_info("drain requested over the admin API");
    api_json(rs, 202, json_pack("{s:b}", "draining", 1));
}

/* ------------------------------------------------------- local evaluators */

static int need_local(api_req *rq, api_resp *rs)
{
    if (rq->srv->deps.local.ctx != NULL) return 0;
    api_error(rs, 503, "local_evaluators_unavailable", "local evaluators are not enabled");
    return -1;
}

static void local_failure(api_resp *rs, const fps_err *e)
{
    api_error(rs, e->http_status ? e->http_status : 500, e->name[0] ? e->name : "error", "%s",
              e->msg);
}

void route_evaluators(api_req *rq, api_resp *rs)
{
    if (need_local(rq, rs)) return;
    api_json(rs, 200, rq->srv->deps.local.list(rq->srv->deps.local.ctx));
}

void route_evaluator_get(api_req *rq, api_resp *rs)
{
    if (need_local(rq, rs)) return;
    json_t *v = rq->srv->deps.local.get(rq->srv->deps.local.ctx, rq->param);
    if (v == NULL)
        api_error(rs, 404, "not_found", "no evaluator is registered under this name");
    else
        api_json(rs, 200, v);
}

void route_evaluator_put(api_req *rq, api_resp *rs)
{
    if (need_local(rq, rs)) return;
    json_t *body = api_body_object(rq, rs);
    if (body == NULL) return;
    json_t *out = NULL;
    fps_err e = {0};
    int st =
        rq->srv->deps.local.put(rq->srv->deps.local.ctx, rq->param, body, &rq->caller, &out, &e);
    json_decref(body);
    if (out == NULL)
        local_failure(rs, &e);
    else
        api_json(rs, st, out);
}

void route_evaluator_delete(api_req *rq, api_resp *rs)
{
    if (need_local(rq, rs)) return;
    fps_err e = {0};
    int st = rq->srv->deps.local.remove(rq->srv->deps.local.ctx, rq->param, &rq->caller, &e);
    if (st != 200)
        local_failure(rs, &e);
    else
        api_json(rs, 200, json_pack("{s:s,s:b}", "name", rq->param, "deleted", 1));
}

void route_evaluator_heartbeat(api_req *rq, api_resp *rs)
{
    if (need_local(rq, rs)) return;
    if (rq->body_len > 0) {
        json_t *b = api_body_object(rq, rs);
        if (b == NULL) return;
        json_decref(b);
    }
    json_t *out = NULL;
    fps_err e = {0};
    int st =
        rq->srv->deps.local.heartbeat(rq->srv->deps.local.ctx, rq->param, &rq->caller, &out, &e);
    if (out == NULL)
        local_failure(rs, &e);
    else
        api_json(rs, st, out);
}

/* ------------------------------------------------ counter persistence */

void api_metrics_seed(api_server *srv)
{
    if (srv->deps.db == NULL) return;
    store_metric *m = NULL;
    size_t n = 0;
    store_err e = {0};
    if (store_metrics_load(srv->deps.db, &m, &n, &e) != STORE_OK) {
        log_warn("could not load metric counters", LOG_S("error", e.msg));
        return;
    }
    size_t seeded = 0;
    for (size_t i = 0; i < n; i++) {
        char key[1024];
        if (m[i].labels != NULL && m[i].labels[0] != '\0')
            snprintf(key, sizeof key, "%s{%s}", m[i].name, m[i].labels);
        else
            snprintf(key, sizeof key, "%s", m[i].name);
        if (metrics_counter_seed(key, m[i].value) == 0) seeded++;
    }
    store_metrics_free(m, n);
    log_debug("metric counters restored", LOG_I("series", (long long)seeded));
}

typedef struct {
    store_metric *m;
    size_t n, cap;
} flush_acc;

static int flush_collect(const char *key, double value, void *ud)
{
    flush_acc *a = ud;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        store_metric *m = realloc(a->m, cap * sizeof *m);
        if (m == NULL) return -1;
        a->m = m;
        a->cap = cap;
    }
    const char *brace = strchr(key, '{');
    store_metric *x = &a->m[a->n];
    if (brace == NULL) {
        x->name = strdup(key);
        x->labels = strdup("");
    } else {
        x->name = strndup(key, (size_t)(brace - key));
        size_t ln = strlen(brace + 1);
        x->labels = strndup(brace + 1, ln > 0 ? ln - 1 : 0);
    }
    x->value = value;
    if (x->name == NULL || x->labels == NULL) {
        free(x->name);
        free(x->labels);
        return -1;
    }
    a->n++;
    return 0;
}

void api_metrics_flush(api_server *srv)
{
    if (srv->deps.db == NULL) return;
    flush_acc a = {0};
    metrics_counters_foreach(flush_collect, &a);
    store_err e = {0};
    if (a.n > 0 && store_metrics_save(srv->deps.db, a.m, a.n, &e) != STORE_OK)
        log_warn("could not save metric counters", LOG_S("error", e.msg));
    for (size_t i = 0; i < a.n; i++) {
        free(a.m[i].name);
        free(a.m[i].labels);
    }
    free(a.m);
}
