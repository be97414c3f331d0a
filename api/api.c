/* api/api: the admin server itself: libmicrohttpd setup (internal thread
 * pool over epoll, connection limit and idle timeout), the browser hardening
 * applied to every request (Host allowlist, Origin/Content-Type checks on
 * state-changing requests, security headers), the request gate (each route's
 * declared api_auth against the presented token), body buffering with caps,
 * routing, JSON errors, and the asynchronous path of POST /v1/evaluate
 * (connection suspended while a job thread waits for the jail). */
#include "api/internal.h"
#include "common/canonjson.h"
#include "common/log.h"
#include "common/loopback.h"
#include "common/metrics.h"
#include "common/timeutil.h"
#include "web/assets.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------ routes */

typedef struct {
    const char *method;  /* GET routes also answer HEAD */
    const char *pattern; /* "{}" matches one non-empty path segment */
    void (*fn)(api_req *, api_resp *);
    size_t body_cap;
    int async;     /* run on a job thread (connection suspended) */
    api_auth auth; /* what the caller must present */
} route;

static const route routes[] = {
    {"GET", "/healthz", route_healthz, 0, 0, API_AUTH_OPEN},
    {"GET", "/readyz", route_readyz, 0, 0, API_AUTH_OPEN},
    {"GET", "/metrics", route_metrics, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/status", route_status, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/assignments", route_assignments, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/assignments/{}", route_assignment, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/runs", route_runs, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/runs/{}", route_run, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/stats", route_stats, 0, 0, API_AUTH_OPEN},
    {"POST", "/v1/evaluate", route_evaluate, API_EVALUATE_BODY_CAP, 1, API_AUTH_ADMIN},
    {"POST", "/v1/drain", route_drain, API_BODY_CAP, 0, API_AUTH_ADMIN},
    {"DELETE", "/v1/drain", route_resume, API_BODY_CAP, 0, API_AUTH_ADMIN},
    {"GET", "/v1/meta", route_meta, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/logs", route_logs, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/outbox", route_outbox, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/evaluators", route_evaluators, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/evaluators/{}", route_evaluator_get, 0, 0, API_AUTH_OPEN},
    {"PUT", "/v1/evaluators/{}", route_evaluator_put, API_BODY_CAP, 0, API_AUTH_REGISTRATION},
    {"DELETE", "/v1/evaluators/{}", route_evaluator_delete, API_BODY_CAP, 0, API_AUTH_REGISTRATION},
    {"POST", "/v1/evaluators/{}/heartbeat", route_evaluator_heartbeat, API_BODY_CAP, 0,
     API_AUTH_REGISTRATION},
    {"POST", "/v1/backtests", route_backtest_start, API_BODY_CAP, 0, API_AUTH_ADMIN},
    {"GET", "/v1/backtests", route_backtests, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/backtests/{}", route_backtest_get, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/backtests/{}/results", route_backtest_results, 0, 0, API_AUTH_OPEN},
    {"DELETE", "/v1/backtests/{}", route_backtest_cancel, API_BODY_CAP, 0, API_AUTH_ADMIN},
};
#define NROUTES (sizeof routes / sizeof routes[0])

/* Matches `path` against `pattern`; copies the {} segment into param. */
static int path_match(const char *pattern, const char *path, char *param, size_t cap)
{
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (p[0] == '{' && p[1] == '}') {
            size_t n = strcspn(s, "/");
            if (n == 0 || n >= cap) return 0;
            memcpy(param, s, n);
            param[n] = '\0';
            s += n;
            p += 2;
            continue;
        }
        if (*p != *s) return 0;
        p++;
        s++;
    }
    return *p == '\0' && *s == '\0';
}

static int is_state_changing(const char *method)
{
    return !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "DELETE") ||
           !strcmp(method, "PATCH");
}

/* ----------------------------------------------------- response helpers */

void api_error(api_resp *rs, int status, const char *code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rs->status = status;
    rs->content_type = "application/json";
    rs->static_data = NULL;
    strbuf_reset(&rs->body);
    strbuf_puts(&rs->body, "{\"error\":{\"code\":");
    strbuf_json_str(&rs->body, code);
    strbuf_puts(&rs->body, ",\"message\":");
    strbuf_json_str(&rs->body, msg);
    strbuf_puts(&rs->body, "}}");
}

void api_json(api_resp *rs, int status, json_t *v)
{
    strbuf_reset(&rs->body);
    int rc = v ? canonjson_append_ordered(&rs->body, v) : -1; /* floats without noise */
    json_decref(v);
    if (rc != 0) {
        api_error(rs, 500, "internal_error", "could not serialize the response");
        return;
    }
    rs->status = status;
    rs->content_type = "application/json";
}

const char *api_query(const api_req *rq, const char *name)
{
    return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
}

json_t *api_body_object_carve(const api_req *rq, api_resp *rs, const char *carve, const char **at,
                              size_t *len)
{
    fps_err err;
    char *rest = NULL; /* owned: the body with the carved value read as null */
    const char *text = rq->body;
    size_t n = rq->body_len;
    json_t *v = NULL;
    if (at) *at = NULL;
    if (len) *len = 0;
    if (rq->body == NULL || rq->body_len == 0) {
        api_error(rs, 400, "invalid_json", "the request body must be a JSON object");
        return NULL;
    }
    const char *cat = NULL;
    size_t clen = 0;
    int scanned = api_json_scan(rq->body, rq->body_len, carve, &cat, &clen, &err);
    if (scanned == API_JSON_ETOO_COMPLEX) {
        api_error(rs, err.http_status, err.name,
                  "%s (at most %d levels and %d values outside a transcript)", err.msg,
                  API_JSON_MAX_DEPTH, API_JSON_MAX_VALUES);
        return NULL;
    }
    if (scanned != 0) {
        api_error(rs, err.http_status, err.name, "%s", err.msg);
        return NULL;
    }
    if (cat != NULL) {
        size_t head = (size_t)(cat - rq->body), tail = rq->body_len - head - clen;
        rest = malloc(head + 4 + tail);
        if (rest == NULL) {
            api_error(rs, 503, "server_busy", "out of memory");
            return NULL;
        }
        static const char null_text[4] = {'n', 'u', 'l', 'l'}; /* no NUL: a span */
        memcpy(rest, rq->body, head);
        memcpy(rest + head, null_text, sizeof null_text);
        memcpy(rest + head + 4, cat + clen, tail);
        text = rest;
        n = head + 4 + tail;
        if (at) *at = cat;
        if (len) *len = clen;
    }
    json_error_t jerr;
    v = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL) {
        api_error(rs, 400, "invalid_json",
                  "request body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                  jerr.column);
    } else if (!json_is_object(v)) {
        json_decref(v);
        v = NULL;
        api_error(rs, 400, "invalid_json", "the request body must be a JSON object");
    }
    free(rest);
    if (v == NULL && at) *at = NULL;
    return v;
}

json_t *api_body_object(const api_req *rq, api_resp *rs)
{
    return api_body_object_carve(rq, rs, NULL, NULL, NULL);
}

/* -------------------------------------------------- per-connection state */

static api_conn *conn_of(struct MHD_Connection *conn); /* slow clients, below */

typedef struct {
    api_server *srv;
    int64_t start_ms;
    const route *rt;
    const char *route_label;
    char param[512];
    strbuf body;
    long counted; /* bytes charged to srv->body_bytes */
    int too_big, over_budget;
    int queued; /* a response was queued */
    /* async job */
    atomic_int job_state; /* 0 none, 1 running, 2 done */
    api_resp job_resp;
    api_req job_req;
    char *method_copy, *path_copy;
    api_caller caller; /* from the gate; owner_secret borrowed from MHD */
} conn_ctx;

static void resp_init(api_resp *rs)
{
    memset(rs, 0, sizeof *rs);
    strbuf_init(&rs->body);
    rs->status = 200;
    rs->content_type = "application/json";
}

static void add_security_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; script-src 'self'; style-src 'self'; "
                            "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(r, "Cross-Origin-Resource-Policy", "same-origin");
    MHD_add_response_header(r, "Permissions-Policy", "camera=(), microphone=(), geolocation=()");
}

static enum MHD_Result send_resp(struct MHD_Connection *conn, conn_ctx *ctx, api_resp *rs)
{
    struct MHD_Response *r = NULL;
    enum MHD_Result ok = MHD_NO;
    size_t len = 0;
    if (rs->cached != NULL) { /* headers and body ready: nothing to build */
        r = api_cached_response(rs->cached);
        ok = MHD_queue_response(conn, (unsigned)rs->status, r);
        goto done;
    }
    if (rs->static_data != NULL) {
        r = MHD_create_response_from_buffer(rs->static_len, (void *)rs->static_data,
                                            MHD_RESPMEM_PERSISTENT);
    } else {
        len = rs->body.len;
        char *data = len ? strbuf_detach(&rs->body, NULL) : NULL;
        r = MHD_create_response_from_buffer(len, data,
                                            data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (r == NULL) free(data);
    }
    if (r == NULL) goto done;
    add_security_headers(r);
    MHD_add_response_header(r, "Content-Type",
                            rs->content_type ? rs->content_type : "application/json");
    if (rs->allow[0]) MHD_add_response_header(r, "Allow", rs->allow);
    if (rs->www_authenticate) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (rs->retry_after > 0) {
        char secs[16];
        snprintf(secs, sizeof secs, "%d", rs->retry_after);
        MHD_add_response_header(r, "Retry-After", secs);
    }
    if (ctx != NULL && (ctx->too_big || ctx->over_budget))
        MHD_add_response_header(r, "Connection", "close");
    ok = MHD_queue_response(conn, (unsigned)rs->status, r);
    if (ok == MHD_YES && rs->cache_key != NULL && rs->status == 200 && rs->static_data == NULL)
        api_cache_put(rs->cache, rs->cache_key, rs->cache_klen, rs->cache_version, r, len);
    else
        MHD_destroy_response(r);
done:
    strbuf_free(&rs->body);
    api_cache_release(rs->cached);
    rs->cached = NULL;
    free(rs->cache_key);
    rs->cache_key = NULL;
    if (ctx != NULL && r != NULL) {
        ctx->queued = 1;
        static const char *const classes[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
        int c = rs->status / 100;
        metrics_inc(METRIC_ADMIN_REQUESTS, "code", c >= 1 && c <= 5 ? classes[c - 1] : "5xx");
        metrics_observe(METRIC_ADMIN_REQUEST_SECONDS,
                        (double)(time_mono_ms() - ctx->start_ms) / 1000.0, "route",
                        ctx->route_label ? ctx->route_label : "unmatched");
    }
    return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, conn_ctx *ctx, int status,
                                  const char *code, const char *msg)
{
    api_resp rs;
    resp_init(&rs);
    api_error(&rs, status, code, "%s", msg);
    if (status == 401) rs.www_authenticate = 1;
    return send_resp(conn, ctx, &rs);
}

/* ------------------------------------------------------------ hardening */

/* common/loopback's rule, plus the absolute name "localhost.", which a Host
 * header or --listen may carry (both bind or answer on 127.0.0.1 here; no
 * resolver is asked). */
static int name_is_loopback(const char *h)
{
    return loopback_host(h) || !strcasecmp(h, "localhost.");
}

/* Splits a Host/authority value into its host name (brackets removed).
 * Returns 0, or -1 if malformed. */
static int authority_host(const char *v, char *out, size_t cap)
{
    size_t n;
    const char *rest;
    if (v == NULL || *v == '\0') return -1;
    if (*v == '[') {
        const char *e = strchr(v, ']');
        if (e == NULL) return -1;
        n = (size_t)(e - v - 1);
        v++;
        rest = e + 1;
    } else {
        n = strcspn(v, ":");
        rest = v + n;
    }
    if (n == 0 || n >= cap) return -1;
    if (*rest == ':') {
        rest++;
        if (*rest == '\0' || strspn(rest, "0123456789") != strlen(rest) || strlen(rest) > 5)
            return -1;
    } else if (*rest != '\0') {
        return -1;
    }
    memcpy(out, v, n);
    out[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] <= 0x20 || out[i] == '/' || out[i] == '@') return -1;
    return 0;
}

static int host_allowed(api_server *srv, const char *hostval)
{
    char h[256];
    if (authority_host(hostval, h, sizeof h) != 0) return 0;
    if (name_is_loopback(h)) return 1;
    if (srv->listen_host[0] && !strcasecmp(h, srv->listen_host) && strcmp(h, "0.0.0.0") &&
        strcmp(h, "::"))
        return 1;
    const cli_list *l = srv->deps.cfg.admin_hosts;
    for (size_t i = 0; l != NULL && i < l->len; i++)
        if (!strcasecmp(h, l->items[i])) return 1;
    return 0;
}

/* Same-origin: Origin must be http(s)://<the request's Host>. */
static int origin_ok(const char *origin, const char *hostval)
{
    if (origin == NULL) return 1;
    const char *auth;
    if (!strncasecmp(origin, "http://", 7))
        auth = origin + 7;
    else if (!strncasecmp(origin, "https://", 8))
        auth = origin + 8;
    else
        return 0; /* "null", file://, chrome-extension://, ... */
    if (hostval == NULL) return 0;
    size_t n = strlen(auth);
    if (n > 0 && auth[n - 1] == '/') n--;
    return n == strlen(hostval) && strncasecmp(auth, hostval, n) == 0;
}

static int content_type_json(const char *ct)
{
    if (ct == NULL) return 0;
    while (*ct == ' ')
        ct++;
    if (strncasecmp(ct, "application/json", 16) != 0) return 0;
    const char *p = ct + 16;
    while (*p == ' ')
        p++;
    if (*p == '\0') return 1;
    if (*p != ';') return 0;
    p++;
    while (*p == ' ')
        p++;
    if (*p == '\0') return 1;
    if (strncasecmp(p, "charset=", 8) == 0) {
        p += 8;
        if (*p == '"') p++;
        return strncasecmp(p, "utf-8", 5) == 0 || strncasecmp(p, "utf8", 4) == 0;
    }
    return 0;
}

/* The bearer token of the request, or NULL. */
static const char *bearer(struct MHD_Connection *conn)
{
    const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (a == NULL || strncasecmp(a, "Bearer ", 7) != 0) return NULL;
    a += 7;
    while (*a == ' ')
        a++;
    return a;
}

/* The request gate's one decision: may this caller use route rt? Fills
 * *who (admin, the registration secret it presented) for the handler.
 * Returns 0, or queues a 401 and returns 1. A non-loopback listener needs
 * the admin token for every /v1/ route, even the read-only ones. */
static int authorize(api_server *srv, struct MHD_Connection *conn, conn_ctx *ctx, const char *url,
                     api_caller *who, enum MHD_Result *ret)
{
    const char *b = bearer(conn);
    size_t bl = b ? strlen(b) : 0;
    int open = srv->deps.cfg.open_admin;
    /* a token the daemon did not configure is not required */
    int admin =
        open || srv->admin_token == NULL || (b != NULL && secret_equals(srv->admin_token, b, bl));
    int registrant =
        admin || srv->reg_token == NULL || (b != NULL && secret_equals(srv->reg_token, b, bl));
    api_auth need = ctx->rt->auth;
    if (srv->remote && strncmp(url, "/v1/", 4) == 0) need = API_AUTH_ADMIN;
    who->admin = admin;
    who->owner_secret =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, API_REGISTRATION_SECRET_HEADER);
    if (need == API_AUTH_OPEN || admin || (need == API_AUTH_REGISTRATION && registrant)) return 0;
    *ret = send_error(conn, ctx, 401, "unauthorized",
                      need == API_AUTH_ADMIN
                          ? "this request needs the admin token (Authorization: Bearer <token>)"
                          : "this request needs the registration token or the admin token "
                            "(Authorization: Bearer <token>)");
    return 1;
}

/* Decides the request's fate from its headers (first call). Returns 0 to
 * proceed, or queues an error and returns 1. */
static int precheck(api_server *srv, struct MHD_Connection *conn, conn_ctx *ctx, const char *method,
                    const char *url, enum MHD_Result *ret)
{
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (host == NULL || !host_allowed(srv, host)) {
        *ret = send_error(conn, ctx, 421, "host_not_allowed",
                          "the Host header must name this sidecar (a loopback name or one "
                          "configured with --admin-host)");
        return 1;
    }
    int is_head = !strcmp(method, "HEAD");
    const char *m = is_head ? "GET" : method;
    char allow[64] = "";
    for (size_t i = 0; i < NROUTES; i++) {
        if (!path_match(routes[i].pattern, url, ctx->param, sizeof ctx->param)) continue;
        if (!strcmp(routes[i].method, m)) {
            ctx->rt = &routes[i];
            ctx->route_label = routes[i].pattern;
            break;
        }
        if (allow[0]) strncat(allow, ", ", sizeof allow - strlen(allow) - 1);
        strncat(allow, routes[i].method, sizeof allow - strlen(allow) - 1);
        if (!strcmp(routes[i].method, "GET"))
            strncat(allow, ", HEAD", sizeof allow - strlen(allow) - 1);
    }
    if (ctx->rt == NULL) {
        if (allow[0]) {
            api_resp rs;
            resp_init(&rs);
            api_error(&rs, 405, "method_not_allowed", "%s is not allowed on %s (allowed: %s)",
                      method, url, allow);
            snprintf(rs.allow, sizeof rs.allow, "%s", allow);
            *ret = send_resp(conn, ctx, &rs);
            return 1;
        }
        if (strncmp(url, "/v1/", 4) != 0 && strcmp(url, "/v1") != 0) {
            const web_asset *a = web_asset_find(url);
            if (a != NULL) {
                if (strcmp(m, "GET") != 0) {
                    api_resp rs;
                    resp_init(&rs);
                    api_error(&rs, 405, "method_not_allowed", "%s is not allowed on %s", method,
                              url);
                    snprintf(rs.allow, sizeof rs.allow, "GET, HEAD");
                    *ret = send_resp(conn, ctx, &rs);
                    return 1;
                }
                ctx->route_label = "static";
                api_resp rs;
                resp_init(&rs);
                rs.static_data = a->data;
                rs.static_len = a->len;
                rs.content_type = a->content_type;
                *ret = send_resp(conn, ctx, &rs);
                return 1;
            }
        }
        *ret = send_error(conn, ctx, 404, "not_found", "no such route");
        return 1;
    }
    if (is_state_changing(method)) {
        const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
        const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
        if (!origin_ok(origin, host) ||
            (site != NULL && strcasecmp(site, "same-origin") && strcasecmp(site, "none"))) {
            *ret = send_error(conn, ctx, 403, "foreign_origin",
                              "state-changing requests are refused from another origin");
            return 1;
        }
        /* The JSON rule keeps a browser's simple cross-site requests (forms,
         * text/plain) out. A request carrying an Authorization header cannot
         * be one (a cross-origin custom header needs a preflight, which is
         * refused), so such a request may have no body at all; a body it has
         * must still be JSON. Its token is checked next, in authorize. */
        const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
        const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
        const char *clen = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
        int bodiless = te == NULL && (clen == NULL || strcmp(clen, "0") == 0);
        if (!(authz != NULL && bodiless) && !content_type_json(ct)) {
            *ret = send_error(conn, ctx, 415, "unsupported_media_type",
                              "state-changing requests need Content-Type: application/json");
            return 1;
        }
    }
    if (authorize(srv, conn, ctx, url, &ctx->caller, ret)) return 1;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl != NULL) {
        char *end;
        unsigned long long n = strtoull(cl, &end, 10);
        size_t cap = ctx->rt->body_cap;
        if (*end != '\0' || (n > 0 && cap == 0) || n > cap) {
            ctx->too_big = 1;
            *ret = send_error(conn, ctx, 413, "body_too_large",
                              cap == 0 ? "this route takes no request body"
                                       : "the request body exceeds this route's limit");
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- handler */

static void *job_main(void *arg)
{
    conn_ctx *ctx = arg;
    ctx->job_req.srv = ctx->srv;
    ctx->rt->fn(&ctx->job_req, &ctx->job_resp);
    struct MHD_Connection *conn = ctx->job_req.conn;
    api_server *srv = ctx->srv; /* ctx may be freed once resumed */
    atomic_store(&ctx->job_state, 2);
    MHD_resume_connection(conn);
    atomic_fetch_sub(&srv->eval_jobs, 1);
    return NULL;
}

/* With srv->nice > 0 the admin API yields the CPU to the worker: each of
 * MHD's threads lowers its own scheduling priority the first time it serves a
 * request (raising nice needs no privilege; threads it starts inherit it). */
static void lower_thread_priority(api_server *srv)
{
    static _Thread_local int done;
    if (done) return;
    done = 1;
    if (srv->nice > 0) setpriority(PRIO_PROCESS, (id_t)gettid(), srv->nice);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    api_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    enum MHD_Result ret = MHD_YES;
    if (ctx == NULL) {
        api_conn *tc = conn_of(conn);
        if (tc != NULL) atomic_store(&tc->in_request, 1); /* its headers are complete */
        lower_thread_priority(srv);
        ctx = calloc(1, sizeof *ctx);
        if (ctx == NULL) return MHD_NO;
        ctx->srv = srv;
        ctx->start_ms = time_mono_ms();
        strbuf_init(&ctx->body);
        *con_cls = ctx;
        if (atomic_load(&srv->stopping))
            return send_error(conn, ctx, 503, "stopping", "shutting down");
        precheck(srv, conn, ctx, method, url, &ret);
        return ret;
    }
    if (ctx->queued) { /* early answer given: discard any body */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (ctx->too_big || ctx->over_budget) return MHD_YES;
        if (ctx->body.len + n > ctx->rt->body_cap) {
            ctx->too_big = 1;
        } else if (atomic_fetch_add(&srv->body_bytes, (long)n) + (long)n > API_BODY_BUDGET) {
            atomic_fetch_sub(&srv->body_bytes, (long)n);
            ctx->over_budget = 1;
        } else {
            ctx->counted += (long)n;
            strbuf_put(&ctx->body, upload_data, n);
        }
        if (ctx->too_big || ctx->over_budget) {
            atomic_fetch_sub(&srv->body_bytes, ctx->counted);
            ctx->counted = 0;
            strbuf_free(&ctx->body);
        }
        return MHD_YES;
    }
    /* The whole request is here. */
    if (ctx->too_big)
        return send_error(conn, ctx, 413, "body_too_large",
                          "the request body exceeds this route's limit");
    if (ctx->over_budget)
        return send_error(conn, ctx, 503, "server_busy",
                          "too many large requests in flight; retry later");
    if (ctx->rt->async) {
        int st = atomic_load(&ctx->job_state);
        if (st == 2) return send_resp(conn, ctx, &ctx->job_resp);
        if (st == 1) return MHD_YES; /* spurious call while suspended */
        if (atomic_fetch_add(&srv->eval_jobs, 1) >= srv->eval_max) {
            atomic_fetch_sub(&srv->eval_jobs, 1);
            api_resp rs;
            resp_init(&rs);
            api_error(&rs, 429, "too_many_requests",
                      "the playground is full: %d evaluations are running or queued "
                      "(--playground-sandboxes plus --playground-queue); retry later",
                      srv->eval_max);
            rs.retry_after = API_EVALUATE_RETRY_AFTER_S;
            return send_resp(conn, ctx, &rs);
        }
        ctx->method_copy = strdup(method);
        ctx->path_copy = strdup(url);
        resp_init(&ctx->job_resp);
        ctx->job_req = (api_req){srv,
                                 conn,
                                 ctx->method_copy,
                                 ctx->path_copy,
                                 ctx->param[0] ? ctx->param : NULL,
                                 ctx->body.data,
                                 ctx->body.len,
                                 ctx->caller};
        atomic_store(&ctx->job_state, 1);
        MHD_suspend_connection(conn);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, job_main, ctx) != 0) {
            api_error(&ctx->job_resp, 503, "server_busy", "could not start the evaluation");
            atomic_store(&ctx->job_state, 2);
            atomic_fetch_sub(&srv->eval_jobs, 1);
            MHD_resume_connection(conn);
        }
        pthread_attr_destroy(&attr);
        return MHD_YES;
    }
    api_req rq = {
        srv,           conn,       method, url, ctx->param[0] ? ctx->param : NULL, ctx->body.data,
        ctx->body.len, ctx->caller};
    api_resp rs;
    resp_init(&rs);
    ctx->rt->fn(&rq, &rs);
    return send_resp(conn, ctx, &rs);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    api_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    api_conn *tc = conn_of(conn);
    if (tc != NULL) { /* the next request's headers get their own deadline */
        atomic_store(&tc->since_ms, time_mono_ms());
        atomic_store(&tc->in_request, 0);
    }
    if (ctx == NULL) return;
    if (ctx->counted) atomic_fetch_sub(&srv->body_bytes, ctx->counted);
    strbuf_free(&ctx->body);
    strbuf_free(&ctx->job_resp.body);
    free(ctx->method_copy);
    free(ctx->path_copy);
    free(ctx);
    *con_cls = NULL;
}

/* ------------------------------------------------------- slow clients */

/* libmicrohttpd 0.9.75 has no deadline for request headers: its idle
 * timeout restarts with every byte, so a client sending one header byte at
 * a time holds a connection slot for ever. The sweeper closes a connection
 * whose headers are not complete API_HEADER_DEADLINE_MS after it was
 * accepted (or after its previous request finished); when three quarters of
 * the slots are taken it allows only API_HEADER_PRESSURE_MS, so slots stay
 * free for probes, whose headers arrive at once. Closing is a shutdown() of
 * MHD's socket, under conns_mu: MHD reports the connection closed (and only
 * then closes the descriptor) through on_connection, which takes the same
 * lock, so the descriptor is always still MHD's. */
#define API_HEADER_DEADLINE_MS 5000
#define API_HEADER_PRESSURE_MS 1000
#define API_SWEEP_INTERVAL_MS 250
#define METRIC_ADMIN_SLOW_CLOSED "failproofai_sidecar_admin_slow_connections_closed_total"

static api_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i != NULL ? i->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    api_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        api_conn *c = calloc(1, sizeof *c);
        if (c == NULL || i == NULL) {
            free(c);
            return;
        }
        c->fd = i->connect_fd;
        atomic_store(&c->since_ms, time_mono_ms());
        pthread_mutex_lock(&srv->conns_mu);
        c->next = srv->conns;
        if (srv->conns) srv->conns->prev = c;
        srv->conns = c;
        srv->nconns++;
        pthread_mutex_unlock(&srv->conns_mu);
        *socket_context = c;
        return;
    }
    api_conn *c = *socket_context;
    if (c == NULL) return;
    pthread_mutex_lock(&srv->conns_mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    srv->nconns--;
    pthread_mutex_unlock(&srv->conns_mu);
    free(c);
    *socket_context = NULL;
}

static void *sweep_main(void *arg)
{
    api_server *srv = arg;
    while (!atomic_load(&srv->stopping)) {
        struct timespec ts = {0, (long)API_SWEEP_INTERVAL_MS * 1000 * 1000};
        nanosleep(&ts, NULL);
        int64_t now = time_mono_ms();
        int swept = 0;
        pthread_mutex_lock(&srv->conns_mu);
        int64_t limit = (unsigned)srv->nconns * 4 > srv->conn_limit * 3 ? API_HEADER_PRESSURE_MS
                                                                        : API_HEADER_DEADLINE_MS;
        for (api_conn *c = srv->conns; c != NULL; c = c->next) {
            if (c->swept || atomic_load(&c->in_request) || now - atomic_load(&c->since_ms) < limit)
                continue;
            shutdown(c->fd, SHUT_RDWR);
            c->swept = 1;
            swept++;
        }
        pthread_mutex_unlock(&srv->conns_mu);
        if (swept > 0) {
            metrics_add(METRIC_ADMIN_SLOW_CLOSED, (double)swept);
            log_debug("closed connections without complete request headers",
                      LOG_I("connections", swept), LOG_I("deadline_ms", (long long)limit));
        }
    }
    return NULL;
}

/* Connection slots: many more than any honest load needs (slow clients are
 * swept, so slots are cheap), within the descriptors the process may open. */
static unsigned connection_limit(void)
{
    struct rlimit rl;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    rlim_t lim = n > 512 + 256 ? n - 256 : 512;
    return (unsigned)(lim > 4096 ? 4096 : lim);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    log_debug("admin http", LOG_S("detail", msg));
}

/* ------------------------------------------------------- counter flushing */

static void *flush_main(void *arg)
{
    api_server *srv = arg;
    pthread_mutex_lock(&srv->flush_mu);
    while (!atomic_load(&srv->stopping)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        pthread_cond_timedwait(&srv->flush_cv, &srv->flush_mu, &ts);
        if (atomic_load(&srv->stopping)) break;
        pthread_mutex_unlock(&srv->flush_mu);
        api_metrics_flush(srv);
        pthread_mutex_lock(&srv->flush_mu);
    }
    pthread_mutex_unlock(&srv->flush_mu);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

/* One event loop per core (2..8): handlers are short and CPU-bound (store
 * reads, JSON); the slow one (/v1/evaluate) runs on its own job thread. */
static unsigned pool_threads(void)
{
    const char *e = getenv("FAILPROOFAI_SIDECAR_ADMIN_THREADS");
    if (e != NULL) {
        long v = strtol(e, NULL, 10);
        if (v >= 1 && v <= 64) return (unsigned)v;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return (unsigned)(n < 2 ? 2 : n > 8 ? 8 : n);
}

/* Nice value of the admin API's threads (FAILPROOFAI_SIDECAR_ADMIN_NICE,
 * 0..19; default 0). Measured with tests/bench/api: nice 10 barely changed the
 * worker's throughput under a wrk flood (the flood's cost is mostly wrk and
 * the kernel) but made the API's p99 ten times worse while the worker ran, so
 * it is off unless an operator wants the API to yield harder. */
static int admin_nice(void)
{
    const char *e = getenv("FAILPROOFAI_SIDECAR_ADMIN_NICE");
    if (e != NULL) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*e != '\0' && *end == '\0' && v >= 0 && v <= 19) return (int)v;
    }
    return 0;
}

/* The list routes' response cache (FAILPROOFAI_SIDECAR_ADMIN_CACHE=0 turns it
 * off, e.g. to compare with tests/bench/api; default on). */
static int cache_enabled(void)
{
    const char *e = getenv("FAILPROOFAI_SIDECAR_ADMIN_CACHE");
    return e == NULL || strcmp(e, "0") != 0;
}

static unsigned conn_timeout_s(void)
{
    const char *e = getenv("FAILPROOFAI_SIDECAR_ADMIN_IDLE_TIMEOUT");
    if (e != NULL) {
        long v = strtol(e, NULL, 10);
        if (v >= 1 && v <= 3600) return (unsigned)v;
    }
    return 15;
}

api_server *api_start(const api_deps *deps, fps_err *err)
{
    api_server *srv = calloc(1, sizeof *srv);
    struct addrinfo *ai = NULL;
    if (srv == NULL) {
        fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: out of memory");
        return NULL;
    }
    srv->deps = *deps;
    srv->started_at = time_now();
    if (cache_enabled()) {
        srv->cache = api_cache_new();
        if (srv->cache == NULL) {
            free(srv);
            fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: out of memory");
            return NULL;
        }
    }
    srv->nice = admin_nice();
    srv->eval_max = deps->cfg.evaluate_max > 0 ? deps->cfg.evaluate_max : API_MAX_EVALUATE_JOBS;
    pthread_mutex_init(&srv->flush_mu, NULL);
    pthread_cond_init(&srv->flush_cv, NULL);
    pthread_mutex_init(&srv->build_mu, NULL);
    pthread_mutex_init(&srv->conns_mu, NULL);
    srv->conn_limit = connection_limit();
    const api_config *cfg = &deps->cfg;
    srv->admin_token = cfg->admin_token;
    srv->reg_token = cfg->registration_token;
    /* listen address */
    const char *listen = cfg->listen ? cfg->listen : "127.0.0.1:8787";
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon == listen || colon[1] == '\0') {
        fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: --listen '%s' is not HOST:PORT",
                    listen);
        goto fail;
    }
    size_t hl = (size_t)(colon - listen);
    if (hl >= sizeof srv->listen_host) hl = sizeof srv->listen_host - 1;
    memcpy(srv->listen_host, listen, hl);
    srv->listen_host[hl] = '\0';
    if (srv->listen_host[0] == '[') {
        memmove(srv->listen_host, srv->listen_host + 1, strlen(srv->listen_host));
        srv->listen_host[strcspn(srv->listen_host, "]")] = '\0';
    }
    srv->remote = !name_is_loopback(srv->listen_host);
    if (srv->remote && (!cfg->allow_remote_admin || srv->admin_token == NULL || cfg->open_admin)) {
        fps_err_set(err, API_ESTART, 0, "cannot_start",
                    "admin API: --listen %s is not loopback; it needs --allow-remote-admin and "
                    "an admin token",
                    listen);
        goto fail;
    }
    /* A loopback --listen is an address, never a lookup: the name localhost
     * is pinned to 127.0.0.1, or /etc/hosts or DNS could put the admin API,
     * still treated as loopback, on any address. */
    struct in6_addr numeric;
    const char *bind_host = srv->listen_host;
    if (!srv->remote && inet_pton(AF_INET, bind_host, &numeric) != 1 &&
        inet_pton(AF_INET6, bind_host, &numeric) != 1)
        bind_host = "127.0.0.1";
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags =
                                 AI_PASSIVE | AI_NUMERICSERV | (srv->remote ? 0 : AI_NUMERICHOST)};
    int gai = getaddrinfo(bind_host, colon + 1, &hints, &ai);
    if (gai != 0 || ai == NULL) {
        fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: cannot resolve --listen %s: %s",
                    listen, gai_strerror(gai));
        goto fail;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_TURBO | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    srv->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, pool_threads(), MHD_OPTION_CONNECTION_LIMIT, srv->conn_limit,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_CONNECTION_TIMEOUT,
        conn_timeout_s(), MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32 * 1024,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)256, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
    if (srv->mhd == NULL) {
        fps_err_set(err, API_ESTART, 0, "cannot_start",
                    "admin API: cannot listen on %s (address in use or not local?)", listen);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : 0;
    freeaddrinfo(ai);
    ai = NULL;
    api_metrics_seed(srv);
    if (deps->db != NULL && pthread_create(&srv->flush_thread, NULL, flush_main, srv) == 0)
        srv->flush_started = 1;
    if (pthread_create(&srv->sweep_thread, NULL, sweep_main, srv) == 0) srv->sweep_started = 1;
    log_info("admin API listening", LOG_S("listen", listen), LOG_I("port", srv->port),
             LOG_B("admin_token", srv->admin_token != NULL),
             LOG_B("registration_token", srv->reg_token != NULL),
             LOG_B("open_admin", cfg->open_admin));
    return srv;
fail:
    if (ai) freeaddrinfo(ai);
    api_cache_free(srv->cache);
    pthread_mutex_destroy(&srv->flush_mu);
    pthread_cond_destroy(&srv->flush_cv);
    pthread_mutex_destroy(&srv->build_mu);
    pthread_mutex_destroy(&srv->conns_mu);
    free(srv);
    return NULL;
}

int api_port(const api_server *srv)
{
    return srv ? srv->port : 0;
}

void api_stop(api_server *srv)
{
    if (srv == NULL) return;
    atomic_store(&srv->stopping, 1);
    atomic_store(&srv->eval_cancel, 1);
    pthread_mutex_lock(&srv->flush_mu);
    pthread_cond_broadcast(&srv->flush_cv);
    pthread_mutex_unlock(&srv->flush_mu);
    if (srv->flush_started) pthread_join(srv->flush_thread, NULL);
    if (srv->sweep_started) pthread_join(srv->sweep_thread, NULL);
    /* Suspended connections must be resumed before MHD stops: wait for the
     * evaluation jobs (bounded by their deadline; the pool's cancel flag is
     * the caller's business when it stops the pool). */
    for (int i = 0; i < 7000 && atomic_load(&srv->eval_jobs) > 0; i++) {
        struct timespec ts = {0, (long)10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(srv->mhd);
    api_cache_metrics(srv);
    api_cache_free(srv->cache);
    api_metrics_flush(srv);
    pthread_mutex_destroy(&srv->flush_mu);
    pthread_cond_destroy(&srv->flush_cv);
    pthread_mutex_destroy(&srv->build_mu);
    pthread_mutex_destroy(&srv->conns_mu);
    free(srv);
}
