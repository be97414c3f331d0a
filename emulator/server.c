/* emulator/server: the HTTP side of the emulator (libmicrohttpd): listening,
 * request bodies, routing, bearer authentication, request ids, the error
 * envelope, protocol_version checks and fault injection. Protocol calls are
 * answered by handlers_*.c, the inspection API by inspect.c.
 *
 * Threading: an epoll thread pool (cfg.threads) for throughput; with
 * --fault-latency-ms a thread per connection instead, so a delayed answer
 * never holds up other connections. */
#include "common/ids.h"
#include "common/canonjson.h"
#include "common/log.h"
#include "emulator/emu_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL_BODY_CAP (8u * 1024 * 1024)
#define INSPECT_BODY_CAP (64u * 1024 * 1024)

static const struct {
    const char *code;
    int status;
    int retryable;
} error_table[] = {
    {"invalid_credentials", 401, 0},
    {"instance_disabled", 403, 0},
    {"insufficient_permissions", 403, 0},
    {"assignment_not_found", 404, 0},
    {"run_not_found", 404, 0},
    {"catalog_mismatch", 409, 0},
    {"lease_lost", 409, 0},
    {"plan_conflict", 409, 0},
    {"submission_conflict", 409, 0},
    {"retry_budget_exhausted", 409, 0},
    {"transcript_too_large", 413, 0},
    {"invalid_request", 422, 0},
    {"invalid_catalog", 422, 0},
    {"incomplete_plan", 422, 0},
    {"unsupported_protocol_version", 426, 0},
    {"internal_error", 500, 1},
    {"not_found", 404, 0},
    {"method_not_allowed", 405, 0},
};

double emu_roll(emulator *e)
{
    uint64_t z = e->seed + 0x9e3779b97f4a7c15ULL * (atomic_fetch_add(&e->rng_counter, 1) + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

void emu_reply_json(emu_req *r, int status, json_t *body)
{
    if (!r->resp_static) free(r->resp);
    r->resp = canonjson_dumps_ordered(body);
    r->resp_len = r->resp ? strlen(r->resp) : 0;
    r->resp_static = 0;
    r->status = status;
    json_decref(body);
}

static void reply_error_v(emu_req *r, int status, const char *code, const char *fmt, va_list ap)
{
    int retryable = 0;
    for (size_t i = 0; i < sizeof error_table / sizeof error_table[0]; i++) {
        if (!strcmp(error_table[i].code, code)) {
            if (status == 0) status = error_table[i].status;
            retryable = error_table[i].retryable;
        }
    }
    if (status == 0) status = 500;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_t *err = json_pack("{s:s, s:s, s:b, s:s}", "code", code, "message", msg, "retryable",
                            retryable, "request_id", r->request_id);
    emu_reply_json(r, status,
                   json_pack("{s:s, s:o}", "protocol_version", EMU_PROTOCOL_VERSION, "error", err));
}

void emu_reply_error(emu_req *r, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(r, 0, code, fmt, ap);
    va_end(ap);
}

void emu_reply_error_status(emu_req *r, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(r, status, code, fmt, ap);
    va_end(ap);
}

/* A fresh request id: 32 lowercase hex from a per-thread generator seeded
 * once from the OS (ids are correlation handles, not secrets; this keeps a
 * syscall off every request). */
static void mint_request_id(char out[33])
{
    static _Thread_local uint64_t s0, s1;
    static _Thread_local int seeded;
    if (!seeded) {
        char seed[33];
        ids_request_id(seed);
        s0 = strtoull((char[17]){seed[0], seed[1], seed[2], seed[3], seed[4], seed[5], seed[6],
                                 seed[7], seed[8], seed[9], seed[10], seed[11], seed[12], seed[13],
                                 seed[14], seed[15], 0},
                      NULL, 16) |
             1;
        s1 = strtoull(seed + 16, NULL, 16) | 2;
        seeded = 1;
    }
    static const char digits[] = "0123456789abcdef";
    for (int half = 0; half < 2; half++) {
        uint64_t x = s0, y = s1; /* xorshift128+ */
        s0 = y;
        x ^= x << 23;
        s1 = x ^ y ^ (x >> 17) ^ (y >> 26);
        uint64_t v = s1 + y;
        for (int i = 0; i < 16; i++)
            out[half * 16 + i] = digits[(v >> (60 - 4 * i)) & 15];
    }
    out[32] = '\0';
}

/* ---- per-connection request state ---- */

typedef struct {
    strbuf body;
    int too_large;
} conn_ctx;

static int is_hex32(const char *s)
{
    if (s == NULL || strlen(s) != 32) return 0;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int client_is_loopback(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci == NULL || ci->client_addr == NULL) return 0;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return 1;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return in6->sin6_addr.s6_addr[12] == 127;
    }
    return 0;
}

/* Splits "/v1/evaluator/<prefix>/{id}/<suffix>": copies the id segment to
 * id (cap bytes) when url matches. */
static int match_id(const char *url, const char *prefix, const char *suffix, char *id, size_t cap)
{
    size_t pl = strlen(prefix), sl = strlen(suffix), ul = strlen(url);
    if (ul <= pl + sl || strncmp(url, prefix, pl) || strcmp(url + ul - sl, suffix)) return 0;
    size_t idl = ul - pl - sl;
    if (idl == 0 || idl >= cap || memchr(url + pl, '/', idl)) return 0;
    memcpy(id, url + pl, idl);
    id[idl] = '\0';
    return 1;
}

static int authenticate(emu_req *r)
{
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0') {
        emu_reply_error(r, "invalid_credentials", "missing or malformed bearer token");
        return -1;
    }
    const char *tok = h + 7;
    size_t len = strlen(tok);
    emu_instance *found = NULL;
    for (size_t i = 0; i < r->e->ninstances; i++) /* compare all: no early exit */
        if (secret_equals(r->e->instances[i].token, tok, len)) found = &r->e->instances[i];
    if (found == NULL) {
        emu_reply_error(r, "invalid_credentials", "the bearer token is not valid");
        return -1;
    }
    if (found->kind == INST_DISABLED) {
        emu_reply_error(r, "instance_disabled", "this evaluator instance is disabled");
        return -1;
    }
    r->inst = found;
    return 0;
}

/* Parses a protocol POST body; replies 422/426 itself on failure. */
static json_t *parse_body(emu_req *r)
{
    json_error_t jerr;
    json_t *body = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL) {
        emu_reply_error(r, "invalid_request", "request body is not valid JSON: %s", jerr.text);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        emu_reply_error(r, "invalid_request", "request body must be a JSON object");
        return NULL;
    }
    const char *pv;
    fps_err err;
    if (emu_v_string(body, "protocol_version", NULL, &pv, &err) != 0) {
        json_decref(body);
        emu_reply_error(r, "invalid_request", "%s", err.msg);
        return NULL;
    }
    if (strcmp(pv, EMU_PROTOCOL_VERSION) != 0) {
        emu_reply_error(r, "unsupported_protocol_version",
                        "unsupported evaluator protocol version '%.64s'; supported major version "
                        "is 2",
                        pv);
        json_decref(body);
        return NULL;
    }
    return body;
}

/* Answers one request; returns 1 if the connection must be dropped instead. */
static int dispatch(emu_req *r, conn_ctx *ctx)
{
    emulator *e = r->e;
    const char *url = r->url;
    if (!strncmp(url, "/emulator/v1/", 13)) {
        if (!client_is_loopback(r->conn)) {
            emu_reply_error_status(r, 403, "forbidden",
                                   "the inspection API answers loopback clients only");
            return 0;
        }
        if (ctx->too_large) {
            emu_reply_error_status(r, 413, "invalid_request", "request body exceeds %u bytes",
                                   INSPECT_BODY_CAP);
            return 0;
        }
        emu_inspect(r, url + 13);
        return 0;
    }
    atomic_fetch_add(&e->stats.requests, 1);
    char id[160];
    int route = R_NONE, post = 1;
    if (!strcmp(url, "/v1/evaluator/workers/register"))
        route = R_REGISTER;
    else if (!strcmp(url, "/v1/evaluator/assignments/claim"))
        route = R_CLAIM;
    else if (!strcmp(url, "/v1/evaluator/runs/heartbeat"))
        route = R_HEARTBEAT;
    else if (match_id(url, "/v1/evaluator/assignments/", "/transcript", id, sizeof id))
        route = R_TRANSCRIPT, post = 0;
    else if (match_id(url, "/v1/evaluator/assignments/", "/definitions", id, sizeof id))
        route = R_DEFINITIONS, post = 0;
    else if (match_id(url, "/v1/evaluator/assignments/", "/plan", id, sizeof id))
        route = R_PLAN;
    else if (match_id(url, "/v1/evaluator/runs/", "/result", id, sizeof id))
        route = R_RESULT;
    if (route == R_NONE) {
        emu_reply_error(r, "not_found", "no such endpoint: %.200s", url);
        return 0;
    }
    if (strcmp(r->method, post ? "POST" : "GET") != 0) {
        emu_reply_error(r, "method_not_allowed", "%s %.200s is not allowed; use %s", r->method, url,
                        post ? "POST" : "GET");
        return 0;
    }
    atomic_fetch_add(&e->stats.by_route[route], 1);
    if (authenticate(r) != 0) return 0;
    long latency = atomic_load(&e->fault_latency_ms);
    if (latency > 0) {
        struct timespec ts = {latency / 1000, (latency % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    double p5xx = atomic_load(&e->fault_5xx), pdrop = atomic_load(&e->fault_drop);
    if (p5xx > 0 && emu_roll(e) < p5xx) {
        atomic_fetch_add(&e->stats.faults_5xx, 1);
        emu_reply_error(r, "internal_error", "injected fault: internal error, retry");
        return 0;
    }
    json_t *body = NULL;
    if (post) {
        if (ctx->too_large) {
            emu_reply_error_status(r, 413, "invalid_request", "request body exceeds %u bytes",
                                   PROTOCOL_BODY_CAP);
            return 0;
        }
        body = parse_body(r);
        if (body == NULL) return 0;
    }
    switch (route) {
    case R_REGISTER:
        emu_h_register(r, body);
        break;
    case R_CLAIM:
        emu_h_claim(r, body);
        break;
    case R_TRANSCRIPT:
        emu_h_transcript(r, id);
        break;
    case R_DEFINITIONS:
        emu_h_definitions(r, id);
        break;
    case R_PLAN:
        emu_h_plan(r, body, id);
        break;
    case R_HEARTBEAT:
        emu_h_heartbeat(r, body);
        break;
    case R_RESULT:
        emu_h_result(r, body, id);
        break;
    }
    json_decref(body);
    if (pdrop > 0 && emu_roll(e) < pdrop) {
        atomic_fetch_add(&e->stats.faults_drop, 1);
        return 1;
    }
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    emulator *e = cls;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL) {
        ctx = calloc(1, sizeof *ctx);
        if (ctx == NULL) return MHD_NO;
        strbuf_init(&ctx->body);
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t cap = strncmp(url, "/emulator/", 10) ? PROTOCOL_BODY_CAP : INSPECT_BODY_CAP;
        if (ctx->too_large || ctx->body.len + *upload_size > cap)
            ctx->too_large = 1;
        else
            strbuf_put(&ctx->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    emu_req r = {0};
    r.e = e;
    r.conn = c;
    r.method = method;
    r.url = url;
    r.body = ctx->body.data;
    r.body_len = ctx->body.len;
    r.content_type = "application/json";
    const char *rid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (is_hex32(rid))
        memcpy(r.request_id, rid, 33);
    else
        mint_request_id(r.request_id);

    int drop = dispatch(&r, ctx);
    if (log_get_level() <= LOG_DEBUG)
        log_debug("emulator request", LOG_S("method", method), LOG_S("path", url),
                  LOG_I("status", r.status), LOG_S("request_id", r.request_id),
                  LOG_B("dropped", drop));
    if (drop) {
        if (!r.resp_static) free(r.resp);
        return MHD_NO; /* committed, then the connection drops: the fault */
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r.resp_len, r.resp ? r.resp : (char *)"",
        r.resp_static || r.resp == NULL ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        if (!r.resp_static) free(r.resp);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", r.content_type);
    MHD_add_response_header(resp, "X-Request-Id", r.request_id);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL) return;
    strbuf_free(&ctx->body);
    free(ctx);
    *con_cls = NULL;
}

static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len,
                        fps_err *err)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon == listen || (size_t)(colon - listen) >= sizeof host) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "--listen: expected HOST:PORT, got '%s'",
                    listen);
        return -1;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*(colon + 1) == '\0' || *end || port < 0 || port > 65535) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "--listen: invalid port in '%s'", listen);
        return -1;
    }
    memset(ss, 0, sizeof *ss);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        host[strlen(host) - 1] = '\0';
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "--listen: invalid IPv6 address in '%s'",
                        listen);
            return -1;
        }
        *len = sizeof *in6;
        return 0;
    }
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &in->sin_addr) != 1) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "--listen: '%s' is not an IPv4 address, [IPv6] or localhost", host);
        return -1;
    }
    *len = sizeof *in;
    return 0;
}

int emu_server_start(emulator *e, const char *listen, long threads, fps_err *err)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (parse_listen(listen, &ss, &sl, err) != 0) return -1;
    unsigned flags = MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (atomic_load(&e->fault_latency_ms) > 0) {
        flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
        e->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, e, MHD_OPTION_SOCK_ADDR,
                                  (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                                  e, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    } else {
        flags |= MHD_USE_EPOLL_INTERNAL_THREAD;
        e->mhd =
            MHD_start_daemon(flags, 0, NULL, NULL, on_request, e, MHD_OPTION_SOCK_ADDR,
                             (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed, e,
                             MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(threads > 0 ? threads : 2),
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    }
    if (e->mhd == NULL) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "cannot listen on %s (address in use or not available)", listen);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_BIND_PORT);
    e->port = di ? di->port : 0;
    (void)sl;
    return 0;
}

void emu_server_stop(emulator *e)
{
    if (e->mhd) MHD_stop_daemon(e->mhd);
    e->mhd = NULL;
}
