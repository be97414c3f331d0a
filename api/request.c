/* api/request: one request's way through the server: its per-connection
 * state, the gate (route lookup, hardening, the route's declared api_auth
 * against the presented token, body caps), body buffering within the global
 * budget, the handler call (or the asynchronous path of POST /v1/evaluate:
 * connection suspended while a job thread waits for the jail), and the
 * response with its security headers and metrics. */
#include "api/internal.h"
#include "common/metrics.h"
#include "common/thread.h"
#include "common/timeutil.h"
#include "web/assets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* -------------------------------------------------- per-connection state */

typedef struct {
    api_server *srv;
    int64_t start_ms;
    const api_route *rt;
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

/* The request gate's one decision: may this caller use route rt? Fills
 * *who (admin, the registration secret it presented) for the handler.
 * Returns 0, or queues a 401 and returns 1. A non-loopback listener needs
 * the admin token for every /v1/ route, even the read-only ones. */
static int authorize(api_server *srv, struct MHD_Connection *conn, conn_ctx *ctx, const char *url,
                     api_caller *who, enum MHD_Result *ret)
{
    const char *b = api_bearer(conn);
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
    if (host == NULL || !api_host_allowed(srv, host)) {
        *ret = send_error(conn, ctx, 421, "host_not_allowed",
                          "the Host header must name this sidecar (a loopback name or one "
                          "configured with --admin-host)");
        return 1;
    }
    int is_head = !strcmp(method, "HEAD");
    const char *m = is_head ? "GET" : method;
    char allow[64] = "";
    for (size_t i = 0; i < api_nroutes; i++) {
        if (!api_path_match(api_routes[i].pattern, url, ctx->param, sizeof ctx->param)) continue;
        if (!strcmp(api_routes[i].method, m)) {
            ctx->rt = &api_routes[i];
            ctx->route_label = api_routes[i].pattern;
            break;
        }
        if (allow[0]) strncat(allow, ", ", sizeof allow - strlen(allow) - 1);
        strncat(allow, api_routes[i].method, sizeof allow - strlen(allow) - 1);
        if (!strcmp(api_routes[i].method, "GET"))
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
    if (api_is_state_changing(method)) {
        const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
        const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
        if (!api_origin_ok(origin, host) ||
            (site != NULL && strcasecmp(site, "same-origin") && strcasecmp(site, "none"))) {
            *ret = send_error(conn, ctx, 403, "foreign_origin",
                              "state-changing requests are refused from another origin");
            return 1;
        }
        if (!api_json_rule_ok(conn)) {
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
    thread_nice_self(srv->nice);
}

enum MHD_Result api_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls)
{
    api_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    enum MHD_Result ret = MHD_YES;
    if (ctx == NULL) {
        api_conn *tc = api_conn_of(conn);
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

void api_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    api_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    api_conn *tc = api_conn_of(conn);
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
