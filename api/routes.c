/* api/routes: the admin API's read routes (health, readiness, metrics,
 * status, assignments, runs, stats), drain and the local evaluator routes.
 * Handlers only read snapshots (worker status, store read connections, the
 * metric counters) and never block the worker loop. The list routes go
 * through the response cache (cache.c). */
#include "api/internal.h"
#include "common/canonjson.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/pyfloat.h"
#include "common/timeutil.h"

#include <math.h>
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

/* ------------------------------------------------------ query parameters */

/* The query parameters each read route accepts (NULL-terminated); any other
 * parameter is a 400 that lists these. GET /v1/meta serves them. */
static const char *const NO_PARAMS[] = {NULL};
static const char *const RUNS_PARAMS[] = {"status", "eval_key", "assignment", "assignment_id",
                                          "limit",  "cursor",   NULL};
static const char *const ASSIGNMENTS_PARAMS[] = {"status", "limit", "cursor", NULL};
static const char *const STATS_PARAMS[] = {"minutes", "eval_key", "by", NULL};
static const char *const LOGS_PARAMS[] = {"level", "after", "limit", NULL};
static const char *const OUTBOX_PARAMS[] = {"limit", NULL};
static const char *const CATALOG_PARAMS[] = {"assignments", NULL};

/* Shortest id prefix accepted in place of a full run or assignment id. */
#define ID_PREFIX_MIN 8

typedef struct {
    const char *const *allowed;
    const char *bad; /* borrowed from MHD: the first unknown parameter */
} param_check;

static enum MHD_Result param_visit(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    (void)value;
    param_check *pc = cls;
    for (const char *const *a = pc->allowed; *a != NULL; a++)
        if (strcmp(*a, key) == 0) return MHD_YES;
    pc->bad = key;
    return MHD_NO;
}

static void join_names(strbuf *b, const char *const *names)
{
    if (names[0] == NULL) strbuf_puts(b, "none");
    for (const char *const *a = names; *a != NULL; a++) {
        if (a != names) strbuf_puts(b, ", ");
        strbuf_puts(b, *a);
    }
}

/* 0 when every query parameter is in `allowed`; else -1 with a 400 in rs. */
static int only_params(api_req *rq, api_resp *rs, const char *const *allowed)
{
    param_check pc = {allowed, NULL};
    if (rq->conn != NULL)
        MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, param_visit, &pc);
    if (pc.bad == NULL) return 0;
    strbuf names;
    strbuf_init(&names);
    join_names(&names, allowed);
    api_error(rs, 400, "invalid_request", "unknown query parameter '%.100s' (allowed: %s)", pc.bad,
              names.data);
    strbuf_free(&names);
    return -1;
}

/* Resolves `id` of `table` ("runs" or "assignments"), a full id or a unique
 * prefix of at least ID_PREFIX_MIN characters, into full. Returns 1 when
 * resolved, 0 when nothing matches (full = id), or -1 with rs filled (400
 * naming the matches when the prefix is ambiguous, 503 when the store
 * fails). */
static int resolve_id(api_req *rq, api_resp *rs, const char *table, const char *id, char *full,
                      size_t cap)
{
    snprintf(full, cap, "%s", id);
    if (strlen(id) < ID_PREFIX_MIN) return 0;
    strbuf matches;
    strbuf_init(&matches);
    store_err e = {0};
    int rc = store_resolve_id(rq->srv->deps.db, table, id, full, cap, &matches, &e);
    int out = 1;
    if (rc == STORE_NOTFOUND) {
        snprintf(full, cap, "%s", id);
        out = 0;
    } else if (rc == STORE_CONFLICT) {
        api_error(rs, 400, "ambiguous_id", "id prefix '%.100s' matches several %s: %s", id, table,
                  matches.data);
        out = -1;
    } else if (rc != STORE_OK) {
        store_failure(rs, rc, &e);
        out = -1;
    }
    strbuf_free(&matches);
    return out;
}

/* ---------------------------------------------------------------- health */

void route_healthz(api_req *rq, api_resp *rs)
{
    strbuf_puts(&rs->body, "{\"status\":\"ok\"}");
}

/* The worker's readiness, every reason appended to `reason`; not ready, with
 * that reason, when there is no worker. */
static int worker_is_ready(const api_server *srv, strbuf *reason)
{
    const api_worker_ops *w = &srv->deps.worker;
    if (w->ctx == NULL) {
        strbuf_puts(reason, "the worker is not running");
        return 0;
    }
    return w->ready(w->ctx, reason);
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
    strbuf reason;
    strbuf_init(&reason);
    int ready = worker_is_ready(rq->srv, &reason);
    json_t *v = json_pack("{s:b}", "ready", ready);
    if (!ready) {
        json_object_set_new(v, "reason", json_stringn(reason.data, reason.len));
        /* every current reason, as the worker's status lists them */
        json_t *st = worker_status(rq->srv);
        json_t *list = st ? json_object_get(st, "not_ready_reasons") : NULL;
        json_object_set_new(v, "reasons",
                            json_is_array(list) ? json_incref(list)
                                                : json_pack("[s#]", reason.data, reason.len));
        json_decref(st);
    }
    strbuf_free(&reason);
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
    const json_t *mem = st ? json_object_get(st, "memory") : NULL;
    double mb = mem ? jnum(mem, "budget_bytes") : -1, mt = mem ? jnum(mem, "tree_bytes") : -1;
    double ma = mem ? jnum(mem, "accounted_bytes") : -1;
    double mw = mem ? jnum(mem, "sandboxes_waiting") : -1;
    metrics_gauge_set(METRIC_MEMORY_BUDGET, mb < 0 ? 0 : mb);
    metrics_gauge_set(METRIC_MEMORY_TREE, mt < 0 ? 0 : mt);
    metrics_gauge_set(METRIC_MEMORY_ACCOUNTED, ma < 0 ? 0 : ma);
    metrics_gauge_set(METRIC_MEMORY_WAITING,
                      (mw < 0 ? 0 : mw) + json_is_true(json_object_get(mem, "claims_waiting")));
    int defs = 0, evs = local_count(srv, &defs);
    metrics_gauge_set(METRIC_LOCAL_EVALUATORS, evs);
    metrics_gauge_set(METRIC_LOCAL_DEFINITIONS, defs);
    strbuf reason;
    strbuf_init(&reason);
    metrics_gauge_set(METRIC_READY, worker_is_ready(srv, &reason));
    strbuf_free(&reason);
    const char *state = st ? json_string_value(json_object_get(st, "state")) : NULL;
    metrics_gauge_set(METRIC_DRAINING, state != NULL && !strcmp(state, "draining"));
    metrics_gauge_set(METRIC_UPTIME, time_now() - srv->started_at);
    json_decref(st);
}

void api_cache_metrics(api_server *srv)
{
    unsigned long long hits, misses;
    api_cache_counts(srv->cache, &hits, &misses);
    /* always touched, so both series exist from the first scrape */
    metrics_add(METRIC_ADMIN_CACHE_HITS, (double)hits);
    metrics_add(METRIC_ADMIN_CACHE_MISSES, (double)misses);
}

/* The store's size and health (store_stats), appended to the exposition. */
static void render_store_metrics(api_server *srv, strbuf *b)
{
    store_stats s;
    if (srv->deps.db == NULL || store_stats_get(srv->deps.db, time_now(), &s, NULL) != STORE_OK)
        return;
    const struct {
        const char *name, *type, *help;
        double v;
    } m[] = {
        {"failproofai_sidecar_store_db_bytes", "gauge", "Size of the database file.",
         (double)s.db_bytes},
        {"failproofai_sidecar_store_wal_bytes", "gauge", "Size of the write-ahead log file.",
         (double)s.wal_bytes},
        {"failproofai_sidecar_store_checkpoint_duration_seconds", "gauge",
         "Duration of the last WAL checkpoint.", s.checkpoint_ms / 1000.0},
        {"failproofai_sidecar_store_checkpoints_total", "counter", "WAL checkpoints completed.",
         (double)s.checkpoints},
        {"failproofai_sidecar_store_checkpoints_blocked_total", "counter",
         "High-water WAL checkpoints that could not complete.", (double)s.checkpoints_blocked},
        {"failproofai_sidecar_store_rows_pruned_total", "counter", "Rows deleted by retention.",
         (double)s.rows_pruned},
        {"failproofai_sidecar_store_outbox_oldest_age_seconds", "gauge",
         "Age of the oldest result not yet answered by the server.", s.oldest_unsent_age_s},
        {"failproofai_sidecar_store_writes_blocked", "gauge",
         "1 while the store takes no writes (disk full or read-only).", s.write_blocked != 0},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s ", m[i].name, m[i].help, m[i].name,
                      m[i].type, m[i].name);
        pyfloat_repr(b, m[i].v); /* no float noise */
        strbuf_putc(b, '\n');
    }
}

/* The same figures for /v1/status. */
static json_t *store_status_json(api_server *srv)
{
    store_stats s;
    if (srv->deps.db == NULL || store_stats_get(srv->deps.db, time_now(), &s, NULL) != STORE_OK)
        return json_null();
    const char *blocked = s.write_blocked == STORE_FULL       ? "disk_full"
                          : s.write_blocked == STORE_READONLY ? "read_only"
                                                              : NULL;
    return json_pack("{s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:f,s:s?,s:b}", "db_bytes",
                     (json_int_t)s.db_bytes, "wal_bytes", (json_int_t)s.wal_bytes, "checkpoint_ms",
                     s.checkpoint_ms, "checkpoints", (json_int_t)s.checkpoints,
                     "checkpoints_blocked", (json_int_t)s.checkpoints_blocked, "rows_pruned",
                     (json_int_t)s.rows_pruned, "outbox_depth", (json_int_t)s.outbox_depth,
                     "oldest_unsent_age_seconds", s.oldest_unsent_age_s, "writes_blocked", blocked,
                     "vacuum_pending", s.vacuum_pending);
}

/* The transcript archive's figures for /v1/status; null when it is off. */
static json_t *archive_status_json(api_server *srv)
{
    if (srv->deps.archive == NULL) return json_null();
    store_archive_stats a;
    store_archive_stats_get(srv->deps.archive, &a);
    return json_pack("{s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:I,s:I}", "entries", (json_int_t)a.entries,
                     "bytes", (json_int_t)a.bytes, "raw_bytes", (json_int_t)a.raw_bytes,
                     "max_bytes", (json_int_t)a.max_bytes, "max_age_seconds", a.max_age_s,
                     "archived", (json_int_t)a.archived, "evictions", (json_int_t)a.evictions,
                     "failures", (json_int_t)a.failures, "queued", (json_int_t)a.queued);
}

void route_metrics(api_req *rq, api_resp *rs)
{
    api_cache_metrics(rq->srv);
    refresh_gauges(rq->srv);
    metrics_render(&rs->body);
    render_store_metrics(rq->srv, &rs->body);
    rs->content_type = METRICS_CONTENT_TYPE;
}

/* ---------------------------------------------------------------- status */

/* Sets st's "last_failed_run" from the store and makes "last_error" the
 * newer of the worker's own last error (server calls, store) and that run's
 * failure (an evaluation error, a local dispatch error), with its source. */
static void last_error(api_server *srv, json_t *st)
{
    json_t *worker_err = json_object_get(st, "last_error"), *run = NULL;
    if (json_is_object(worker_err))
        json_object_set_new(worker_err, "source", json_string("worker"));
    if (srv->deps.db != NULL) {
        strbuf b;
        strbuf_init(&b);
        store_err e = {0};
        if (store_last_failed_run_json(srv->deps.db, &b, &e) == STORE_OK)
            run = json_loadb(b.data, b.len, 0, NULL);
        strbuf_free(&b);
    }
    if (!json_is_object(run)) {
        json_decref(run);
        json_object_set_new(st, "last_failed_run", json_null());
        return;
    }
    json_object_set(st, "last_failed_run", run);
    const char *wat = json_string_value(json_object_get(worker_err, "at"));
    const char *rat = json_string_value(json_object_get(run, "at"));
    if (rat != NULL && (wat == NULL || strcmp(rat, wat) > 0)) { /* RFC 3339 UTC sorts */
        json_t *le = json_pack(
            "{s:O,s:O,s:O,s:s,s:O,s:O}", "code", json_object_get(run, "code"), "message",
            json_object_get(run, "message"), "at", json_object_get(run, "at"), "source", "run",
            "run_id", json_object_get(run, "run_id"), "eval_key", json_object_get(run, "eval_key"));
        json_object_set_new(st, "last_error", le);
    }
    json_decref(run);
}

void route_status(api_req *rq, api_resp *rs)
{
    if (only_params(rq, rs, NO_PARAMS)) return;
    api_server *srv = rq->srv;
    json_t *st = worker_status(srv);
    if (st == NULL) st = json_object();
    strbuf reason;
    strbuf_init(&reason);
    int ready = worker_is_ready(srv, &reason);
    json_object_set_new(st, "ready", json_boolean(ready));
    json_object_set_new(st, "ready_reason",
                        ready ? json_null() : json_stringn(reason.data, reason.len));
    strbuf_free(&reason);
    json_object_set_new(st, "store", store_status_json(srv));
    json_object_set_new(st, "archive", archive_status_json(srv));
    const char *state = json_string_value(json_object_get(st, "state"));
    json_object_set_new(st, "draining", json_boolean(state && !strcmp(state, "draining")));
    if (json_object_get(st, "version") == NULL)
        json_object_set_new(st, "version", json_string(FPS_VERSION));
    if (json_object_get(st, "uptime_seconds") == NULL)
        json_object_set_new(st, "uptime_seconds", canonjson_seconds(time_now() - srv->started_at));
    json_object_set_new(
        st, "counters",
        json_pack(
            "{s:I,s:I,s:I,s:I,s:I,s:I}", "assignments_claimed",
            (json_int_t)metrics_family_total(METRIC_ASSIGNMENTS_CLAIMED), "leases_lost",
            (json_int_t)metrics_family_total(METRIC_LEASES_LOST), "protocol_errors",
            (json_int_t)metrics_family_total(METRIC_PROTOCOL_ERRORS), "result_retries",
            (json_int_t)metrics_value(METRIC_SUBMISSIONS, METRICS_LABELS_("outcome", "retried")),
            "heartbeat_failures", (json_int_t)metrics_family_total(METRIC_HEARTBEAT_FAILURES),
            "local_dispatches", (json_int_t)metrics_family_total(METRIC_LOCAL_DISPATCHES)));
    last_error(srv, st);
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

/* Parses ?limit= (1..500; 0, the store's default, when absent). Returns 0 or
 * -1 with rs filled. */
static int parse_limit(api_req *rq, api_resp *rs, int *out)
{
    long v;
    if (api_query_long(rq, rs, "limit", 1, 500, 0, &v)) return -1;
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
    if (only_params(rq, rs, ASSIGNMENTS_PARAMS) || need_store(rq, rs) ||
        parse_limit(rq, rs, &limit))
        return;
    store_assignment_filter f = {empty_null(api_query(rq, "status")), limit,
                                 empty_null(api_query(rq, "cursor"))};
    const char *vals[] = {f.status, f.cursor};
    if (cache_lookup(rq, rs, "assignments", limit, vals, 2)) return;
    store_err e = {0};
    int rc = store_assignments_list_json(rq->srv->deps.db, &f, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

/* GET /v1/{runs,assignments}/{id}: the id in full or a unique prefix. */
static void get_one(api_req *rq, api_resp *rs, const char *table,
                    int (*get)(store *, const char *, strbuf *, store_err *))
{
    if (only_params(rq, rs, NO_PARAMS) || need_store(rq, rs)) return;
    store_err e = {0};
    int rc = get(rq->srv->deps.db, rq->param, &rs->body, &e);
    if (rc == STORE_NOTFOUND) {
        char full[256];
        int r = resolve_id(rq, rs, table, rq->param, full, sizeof full);
        if (r < 0) return;
        if (r > 0) rc = get(rq->srv->deps.db, full, &rs->body, &e);
    }
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

void route_assignment(api_req *rq, api_resp *rs)
{
    get_one(rq, rs, "assignments", store_assignment_get_json);
}

void route_runs(api_req *rq, api_resp *rs)
{
    int limit;
    if (only_params(rq, rs, RUNS_PARAMS) || need_store(rq, rs) || parse_limit(rq, rs, &limit))
        return;
    const char *assignment = empty_null(api_query(rq, "assignment"));
    if (assignment == NULL) assignment = empty_null(api_query(rq, "assignment_id"));
    char full[256];
    if (assignment != NULL) {
        if (resolve_id(rq, rs, "assignments", assignment, full, sizeof full) < 0) return;
        assignment = full;
    }
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
    get_one(rq, rs, "runs", store_run_get_json);
}

void route_stats(api_req *rq, api_resp *rs)
{
    if (only_params(rq, rs, STATS_PARAMS) || need_store(rq, rs)) return;
    long minutes;
    if (api_query_long(rq, rs, "minutes", 1, 1440, 60, &minutes)) return;
    /* by=mode or an eval_key: from the runs (latency per mode, one key) */
    const char *key = empty_null(api_query(rq, "eval_key")), *by = api_query(rq, "by");
    if (by != NULL && strcmp(by, "mode") != 0) {
        api_error(rs, 400, "invalid_request", "by must be mode");
        return;
    }
    store_err e = {0};
    int rc =
        key != NULL || by != NULL
            ? store_charts_runs_json(rq->srv->deps.db, time_now(), (int)minutes, key, &rs->body, &e)
            : store_charts_json(rq->srv->deps.db, time_now(), (int)minutes, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

/* ----------------------------------------------------------------- drain */

/* An optional request body must be a JSON object when present. Returns 0, or
 * -1 with rs filled (400). */
static int optional_body_ok(api_req *rq, api_resp *rs)
{
    if (rq->body_len == 0) return 0;
    json_t *b = api_body_object(rq, rs);
    if (b == NULL) return -1;
    json_decref(b);
    return 0;
}

/* The worker of a route that acts on it, or NULL with rs filled (503). */
static const api_worker_ops *need_worker(api_req *rq, api_resp *rs)
{
    const api_worker_ops *w = &rq->srv->deps.worker;
    if (w->ctx != NULL) return w;
    api_error(rs, 503, "worker_unavailable", "the worker is not running");
    return NULL;
}

void route_drain(api_req *rq, api_resp *rs)
{
    if (optional_body_ok(rq, rs)) return;
    const api_worker_ops *w = need_worker(rq, rs);
    if (w == NULL) return;
    w->drain(w->ctx);
    log_info("drain requested over the admin API");
    api_json(rs, 202, json_pack("{s:b,s:b}", "draining", 1, "resumable", 1));
}

void route_resume(api_req *rq, api_resp *rs)
{
    if (optional_body_ok(rq, rs)) return;
    const api_worker_ops *w = need_worker(rq, rs);
    if (w == NULL) return;
    if (w->resume(w->ctx) != 0) {
        api_error(rs, 409, "shutting_down",
                  "the sidecar is draining to shut down; that drain cannot be undone");
        return;
    }
    log_info("drain ended over the admin API");
    api_json(rs, 200, json_pack("{s:b}", "draining", 0));
}

/* ------------------------------------------------------------------ meta */

static json_t *string_array(const char *const *names)
{
    json_t *a = json_array();
    for (; *names != NULL; names++)
        json_array_append_new(a, json_string(*names));
    return a;
}

/* What the page's filters and labels are built from: one source of truth. */
void route_meta(api_req *rq, api_resp *rs)
{
    static const char *const modes[] = {"python", "local", NULL};
    /* error_code values a run can end with (SPEC section 2, local evaluators) */
    static const char *const run_errors[] = {
        "eval_error", "eval_timeout", "sandbox_error", "evaluator_unavailable", "cancelled", NULL};
    static const char *const submit_statuses[] = {"none", "pending", "committed", "rejected", NULL};
    static const char *const chart_minutes[] = {"15", "60", "360", "1440", NULL};
    static const char *const log_levels[] = {"warn", "error", NULL};
    if (only_params(rq, rs, NO_PARAMS)) return;
    json_t *asg = string_array(store_assignment_statuses());
    json_array_insert_new(asg, 0, json_string("active"));
    json_t *params =
        json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "/v1/runs", string_array(RUNS_PARAMS),
                  "/v1/assignments", string_array(ASSIGNMENTS_PARAMS), "/v1/stats",
                  string_array(STATS_PARAMS), "/v1/logs", string_array(LOGS_PARAMS), "/v1/outbox",
                  string_array(OUTBOX_PARAMS), "/v1/catalog", string_array(CATALOG_PARAMS));
    json_t *cm = json_array();
    for (const char *const *m = chart_minutes; *m != NULL; m++)
        json_array_append_new(cm, json_integer(atoi(*m)));
    api_json(rs, 200,
             json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:i,s:i,s:i}", "version", FPS_VERSION,
                       "run_statuses", string_array(store_run_statuses()), "assignment_statuses",
                       asg, "execution_modes", string_array(modes), "run_error_codes",
                       string_array(run_errors), "submit_statuses", string_array(submit_statuses),
                       "query_parameters", params, "chart_minutes", cm, "log_levels",
                       string_array(log_levels), "id_prefix_min", ID_PREFIX_MIN, "page_limit_max",
                       500, "eval_key_label_cap", METRICS_EVAL_KEY_CAP));
}

/* --------------------------------------------------------------- catalog */

/* GET /v1/catalog?assignments=N: the managed definitions the newest N
 * (default 100) stored assignments carried, each with the evaluator source
 * its newest stored run received (store_catalog_json). */
void route_catalog(api_req *rq, api_resp *rs)
{
    long n;
    if (only_params(rq, rs, CATALOG_PARAMS) || need_store(rq, rs) ||
        api_query_long(rq, rs, "assignments", 1, 500, 100, &n))
        return;
    store_err e = {0};
    int rc = store_catalog_json(rq->srv->deps.db, (int)n, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

/* ---------------------------------------------------------------- outbox */

/* GET /v1/outbox?limit=N: the results waiting to be submitted, oldest first. */
void route_outbox(api_req *rq, api_resp *rs)
{
    int limit;
    if (only_params(rq, rs, OUTBOX_PARAMS) || need_store(rq, rs) || parse_limit(rq, rs, &limit))
        return;
    store_err e = {0};
    int rc = store_outbox_json(rq->srv->deps.db, time_now(), limit ? limit : 50, &rs->body, &e);
    if (rc != STORE_OK) store_failure(rs, rc, &e);
}

/* ------------------------------------------------------------------ logs */

/* GET /v1/logs?level=warn|error&after=SEQ&limit=N: the in-memory tail of
 * warnings and errors (common/log.h), as the log wrote them (redacted). */
void route_logs(api_req *rq, api_resp *rs)
{
    if (only_params(rq, rs, LOGS_PARAMS)) return;
    const char *lv = api_query(rq, "level"), *after = api_query(rq, "after");
    log_level min = LOG_WARN;
    if (lv != NULL && !strcmp(lv, "error"))
        min = LOG_ERROR;
    else if (lv != NULL && strcmp(lv, "warn") != 0) {
        api_error(rs, 400, "invalid_request", "level must be warn or error");
        return;
    }
    char *end;
    unsigned long long a = 0;
    if (after != NULL) {
        a = strtoull(after, &end, 10);
        if (*after == '\0' || *after == '-' || *end != '\0') {
            api_error(rs, 400, "invalid_request", "after must be a sequence number (0 or more)");
            return;
        }
    }
    long limit;
    if (api_query_long(rq, rs, "limit", 1, LOG_RING_CAP, 100, &limit)) return;
    log_recent_json(&rs->body, min, a, (size_t)limit);
}

/* ------------------------------------------------------- local evaluators */

static int need_local(api_req *rq, api_resp *rs)
{
    if (rq->srv->deps.local.ctx != NULL) return 0;
    api_error(rs, 503, "local_evaluators_unavailable", "local evaluators are not enabled");
    return -1;
}

void route_evaluators(api_req *rq, api_resp *rs)
{
    if (only_params(rq, rs, NO_PARAMS) || need_local(rq, rs)) return;
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
        api_error_from(rs, &e, "error");
    else
        api_json(rs, st, out);
}

void route_evaluator_delete(api_req *rq, api_resp *rs)
{
    if (need_local(rq, rs)) return;
    fps_err e = {0};
    int st = rq->srv->deps.local.remove(rq->srv->deps.local.ctx, rq->param, &rq->caller, &e);
    if (st != 200)
        api_error_from(rs, &e, "error");
    else
        api_json(rs, 200, json_pack("{s:s,s:b}", "name", rq->param, "deleted", 1));
}

void route_evaluator_heartbeat(api_req *rq, api_resp *rs)
{
    if (need_local(rq, rs) || optional_body_ok(rq, rs)) return;
    json_t *out = NULL;
    fps_err e = {0};
    int st =
        rq->srv->deps.local.heartbeat(rq->srv->deps.local.ctx, rq->param, &rq->caller, &out, &e);
    if (out == NULL)
        api_error_from(rs, &e, "error");
    else
        api_json(rs, st, out);
}
