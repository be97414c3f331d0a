/* api/internal: shared between the admin server's files (api.c: start and
 * stop; request.c: one request's way through; route_table.c: the routes;
 * gate.c: the header checks; respond.c: handlers' request and response
 * helpers; slow.c: the slow-client sweeper; body.c: the JSON budget scan;
 * routes.c: read routes and evaluator routes; evaluate.c: POST /v1/evaluate;
 * cache.c: the list routes' response cache). Not a public interface. */
#ifndef FPS_API_INTERNAL_H
#define FPS_API_INTERNAL_H
#include "api/api.h"
#include "common/secret.h"
#include "common/strbuf.h"

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Body caps: /v1/evaluate carries a transcript (<= 25 MiB) plus source. */
#define API_BODY_CAP ((size_t)1024 * 1024)
#define API_EVALUATE_BODY_CAP ((size_t)25 * 1024 * 1024 + (size_t)512 * 1024)
#define API_TRANSCRIPT_CAP (25 * 1024 * 1024)
/* All request bodies buffered at once, across connections. */
#define API_BODY_BUDGET (96L * 1024 * 1024)
#define API_MAX_EVALUATE_JOBS 8
/* Retry-After of a 429 from a full playground queue, in seconds. */
#define API_EVALUATE_RETRY_AFTER_S 5

/* cache.c: finished responses of the list routes (see the file's comment). */
typedef struct api_cache api_cache;
typedef struct api_cached api_cached;
api_cache *api_cache_new(void);
void api_cache_free(api_cache *c);
/* The cached response for key (klen bytes) rendered at store change version
 * `version`, with a reference for the caller (api_cache_release), or NULL. */
api_cached *api_cache_get(api_cache *c, const char *key, size_t klen, uint64_t version);
/* The entry's response (borrowed: valid while the caller's reference is). */
struct MHD_Response *api_cached_response(const api_cached *e);
void api_cache_release(api_cached *e);
/* Stores a response (takes over one MHD reference on resp) rendered for key
 * by a query started after reading `version`; keeps a newer page of the same
 * key if one is there. */
void api_cache_put(api_cache *c, const char *key, size_t klen, uint64_t version,
                   struct MHD_Response *resp, size_t bytes);
/* Hits and misses since the previous call (for the /metrics counters). */
void api_cache_counts(api_cache *c, unsigned long long *new_hits, unsigned long long *new_misses);

/* slow.c: a connection as the slow-client sweeper sees it (one per TCP
 * connection, linked in api_server.conns while MHD holds the socket). */
typedef struct api_conn api_conn;
struct api_conn {
    api_conn *prev, *next;
    int fd;                /* MHD's socket; valid while linked */
    atomic_llong since_ms; /* accepted, or its previous request finished */
    atomic_int in_request; /* headers complete: a request is being served */
    int swept;             /* shut down by the sweeper */
};

struct api_server {
    api_cache *cache; /* owned */
    struct MHD_Daemon *mhd;
    api_deps deps;
    const secret *admin_token; /* borrowed from deps.cfg; NULL = not required */
    const secret *reg_token;   /* borrowed from deps.cfg; NULL = not required */
    int remote;                /* listening on a non-loopback address */
    char listen_host[256];     /* host part of --listen, accepted as Host */
    int port;
    int nice; /* scheduling priority of the MHD threads (0 = unchanged) */
    double started_at;
    atomic_long body_bytes; /* bytes buffered in request bodies */
    atomic_int eval_jobs;   /* /v1/evaluate jobs running or waiting for a slot */
    int eval_max;           /* at most this many eval_jobs (cfg.evaluate_max) */
    atomic_int eval_cancel; /* set at stop: kills running evaluations */
    atomic_int stopping;
    /* slow clients: every open connection, and the thread that closes
     * those that have not completed their request headers in time */
    pthread_mutex_t conns_mu;
    api_conn *conns;
    int nconns;
    unsigned conn_limit;
    pthread_t sweep_thread;
    int sweep_started;
    /* One session image built from a posted transcript at a time: while it
     * is built an image can take several times its bytes (a node for every
     * JSON value: ~10x for a body of empty objects), and the jobs would
     * otherwise multiply that by the playground's size. */
    pthread_mutex_t build_mu;
};

/* A response being built by a handler. */
typedef struct {
    int status;
    strbuf body;
    const char *content_type; /* static; default application/json */
    char allow[64];           /* Allow header for 405 ("" = none) */
    int www_authenticate;     /* add WWW-Authenticate: Bearer */
    int retry_after;          /* > 0: add Retry-After: this many seconds */
    /* a static body instead of `body` (web assets) */
    const unsigned char *static_data;
    size_t static_len;
    /* response cache: answer with `cached` (an owned reference), or store the
     * 200 response rendered into `body` under cache_key (owned) */
    api_cached *cached;
    api_cache *cache; /* borrowed; set with cache_key */
    char *cache_key;
    size_t cache_klen;
    uint64_t cache_version;
} api_resp;

typedef struct {
    api_server *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    const char *param; /* {id} / {name} path parameter, or NULL */
    const char *body;  /* NUL-terminated, may be NULL */
    size_t body_len;
    api_caller caller; /* who the gate let through */
} api_req;

/* What a route needs of its caller (the gate in request.c checks it before any
 * body is read). Every route in the table declares one. */
typedef enum {
    API_AUTH_OPEN,         /* anyone on loopback (read-only routes, the page) */
    API_AUTH_REGISTRATION, /* the registration token or the admin token */
    API_AUTH_ADMIN,        /* the admin token */
} api_auth;

/* Fills an error response {"error":{"code","message"}}. */
void api_error(api_resp *rs, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fills an error response from a part's fps_err (borrowed): its HTTP status
 * (500 if it has none), its name (dflt_code if it has none), its message. */
void api_error_from(api_resp *rs, const fps_err *e, const char *dflt_code);
/* Fills a JSON response from a json_t (stolen reference). */
void api_json(api_resp *rs, int status, json_t *v);
/* A query argument, or NULL. */
const char *api_query(const api_req *rq, const char *name);
/* The query argument `name` as a decimal integer in lo..hi into *out (dflt
 * when absent). Returns 0, or -1 with rs filled (400 "<name> must be an
 * integer from lo to hi"). */
int api_query_long(const api_req *rq, api_resp *rs, const char *name, long lo, long hi, long dflt,
                   long *out);
/* Parses the request body as a JSON object within the depth and value
 * budget below; on failure fills rs (400, or 413 over the budget) and
 * returns NULL. */
json_t *api_body_object(const api_req *rq, api_resp *rs);
/* The same, except that the top-level member `carve` (when present) is left
 * out of the tree (it reads as null) and its value's bytes are returned in
 * *at / *len (borrowed from the body; *at NULL when absent): a large
 * transcript never becomes a tree. */
json_t *api_body_object_carve(const api_req *rq, api_resp *rs, const char *carve, const char **at,
                              size_t *len);

/* body.c: one pass over JSON text, building nothing: at most
 * API_JSON_MAX_DEPTH levels of nesting and API_JSON_MAX_VALUES values
 * (counted outside the carved member), and the byte span of the top-level
 * member named `carve` (NULL: none). Returns 0, API_JSON_EINVALID (not
 * JSON: 400 invalid_json) or API_JSON_ETOO_COMPLEX (over the depth or value
 * budget: 413 body_too_complex) with err filled. Only the structure is
 * checked; the real parser validates the rest. */
#define API_JSON_MAX_DEPTH 64
#define API_JSON_MAX_VALUES 20000
enum { API_JSON_EINVALID = -1, API_JSON_ETOO_COMPLEX = -2 };
int api_json_scan(const char *buf, size_t len, const char *carve, const char **carve_at,
                  size_t *carve_len, fps_err *err);

/* routes.c */
void route_healthz(api_req *rq, api_resp *rs);
void route_readyz(api_req *rq, api_resp *rs);
void route_metrics(api_req *rq, api_resp *rs);
void route_status(api_req *rq, api_resp *rs);
void route_assignments(api_req *rq, api_resp *rs);
void route_assignment(api_req *rq, api_resp *rs);
void route_runs(api_req *rq, api_resp *rs);
void route_run(api_req *rq, api_resp *rs);
void route_stats(api_req *rq, api_resp *rs);
void route_drain(api_req *rq, api_resp *rs);
void route_resume(api_req *rq, api_resp *rs);
void route_meta(api_req *rq, api_resp *rs);
void route_logs(api_req *rq, api_resp *rs);
void route_outbox(api_req *rq, api_resp *rs);
void route_catalog(api_req *rq, api_resp *rs);
void route_evaluators(api_req *rq, api_resp *rs);
void route_evaluator_get(api_req *rq, api_resp *rs);
void route_evaluator_put(api_req *rq, api_resp *rs);
void route_evaluator_delete(api_req *rq, api_resp *rs);
void route_evaluator_heartbeat(api_req *rq, api_resp *rs);
/* Adds the response cache's hits and misses since the last call to the
 * counters failproofai_sidecar_admin_cache_{hits,misses}_total. */
void api_cache_metrics(api_server *srv);

/* backtests.c: the /v1/backtests routes over deps.backtest. */
void route_backtest_start(api_req *rq, api_resp *rs);
void route_backtests(api_req *rq, api_resp *rs);
void route_backtest_get(api_req *rq, api_resp *rs);
void route_backtest_results(api_req *rq, api_resp *rs);
void route_backtest_cancel(api_req *rq, api_resp *rs);

/* route_table.c: every route, and the matcher of a path against a pattern
 * ("{}" matches one non-empty segment, copied into param). */
typedef struct {
    const char *method;  /* GET routes also answer HEAD */
    const char *pattern; /* "{}" matches one non-empty path segment */
    void (*fn)(api_req *, api_resp *);
    size_t body_cap;
    int async;     /* run on a job thread (connection suspended) */
    api_auth auth; /* what the caller must present */
} api_route;
extern const api_route api_routes[];
extern const size_t api_nroutes;
int api_path_match(const char *pattern, const char *path, char *param, size_t cap);

/* gate.c: the header checks (1 = passes). */
int api_is_state_changing(const char *method);
/* common/loopback's rule, plus the absolute name "localhost.". */
int api_name_is_loopback(const char *h);
/* The Host header names this sidecar (loopback, --listen's host, --admin-host). */
int api_host_allowed(api_server *srv, const char *hostval);
/* Origin is absent or http(s)://<the request's Host>. */
int api_origin_ok(const char *origin, const char *hostval);
/* A state-changing request's body is JSON (Content-Type application/json,
 * charset, if any, UTF-8), or it has no body and carries Authorization. */
int api_json_rule_ok(struct MHD_Connection *conn);
/* The request's bearer token (borrowed from MHD), or NULL. */
const char *api_bearer(struct MHD_Connection *conn);

/* request.c: MHD's request and completion callbacks (cls: the api_server). */
enum MHD_Result api_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls);
void api_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe);

/* slow.c: the connection's tracking record (NULL if untracked), MHD's
 * connection callback that keeps the list, the sweeper thread (arg: the
 * api_server; runs until srv->stopping) and the connection slots to ask for. */
api_conn *api_conn_of(struct MHD_Connection *conn);
void api_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
void *api_sweep_main(void *arg);
unsigned api_connection_limit(void);

/* evaluate.c: runs POST /v1/evaluate synchronously (called on a job thread). */
void route_evaluate(api_req *rq, api_resp *rs);

#endif
