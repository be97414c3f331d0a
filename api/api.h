/* api/: the localhost admin REST server (libmicrohttpd, SPEC §5).
 *
 * Routes: GET /healthz /readyz /metrics /v1/status /v1/assignments[/{id}]
 * /v1/runs[/{id}] /v1/catalog /v1/evaluators[/{name}], PUT/DELETE /v1/evaluators/{name},
 * POST /v1/evaluators/{name}/heartbeat /v1/evaluate /v1/drain, and GET / plus
 * the embedded web assets. Hardened against browsers (Host allowlist against
 * DNS rebinding, JSON-only state changes with no foreign Origin, strict
 * security headers), against the other processes sharing loopback (each
 * route declares whether it is open, needs the registration token or the
 * admin token), and against bad input (body caps, a JSON depth and element
 * budget checked before any tree is built, a deadline for request headers,
 * JSON errors {"error": {"code", "message"}}).
 *
 * Threading: libmicrohttpd's internal thread pool over epoll; handlers only
 * read the store / worker snapshot and never block the worker loop.
 *
 * Layering: the api sits below the daemon (sidecar/). It never includes a
 * sidecar header: it gets its own configuration (api_config) and reaches the
 * worker and the local-evaluator registry through the function tables below,
 * which the composition root (sidecar/daemon.c) fills. */
#ifndef FPS_API_H
#define FPS_API_H
#include "common/cli.h"
#include "common/err.h"
#include "common/rcbuf.h"
#include "common/secret.h"
#include "common/strbuf.h"
#include "sandbox/jail/sbx.h"
#include "store/archive.h"
#include "store/store.h"

#include <jansson.h>
#include <stddef.h>

typedef struct api_server api_server;

/* Splits a --listen address "HOST:PORT" (HOST may be a bracketed IPv6
 * literal) into `host` (brackets removed, truncated to cap - 1) and, when
 * `port` is not NULL, the port's number (0 for "HOST:0": the kernel's).
 * The one parse of --listen: api_start and the daemon both use it. 0, or
 * -1 with err filled (API_ESTART) when it is not HOST:PORT. */
int api_listen_split(const char *listen, char *host, size_t cap, int *port, fps_err *err);

/* What the admin server needs of the daemon's configuration. */
typedef struct {
    const char *listen;          /* HOST:PORT; NULL = 127.0.0.1:8787 */
    const cli_list *admin_hosts; /* borrowed; extra accepted Host names; may be NULL */
    /* The operator's token (drain, /v1/evaluate, any registration) and the
     * evaluators' token (registering a name). Borrowed; NULL = not required
     * (only with open_admin, or in tests of other things). */
    const secret *admin_token;
    const secret *registration_token;
    int open_admin;         /* --insecure-open-admin: every caller counts as the operator */
    int allow_remote_admin; /* a non-loopback listen address is allowed (with a token) */
    /* POST /v1/evaluate requests admitted at once, running or waiting for a
     * playground slot (the pool's playground_max plus the queue's depth);
     * more are refused with 429 and Retry-After. <= 0: API_MAX_EVALUATE_JOBS. */
    int evaluate_max;
    /* Called once with the port bound (the kernel's, for port 0) before
     * api_start logs "admin API listening", so what must know the admin
     * API's own address (the local registry refuses it as an endpoint)
     * knows it before anyone told of the port can send a request. May be
     * NULL. */
    void (*on_bound)(int port, void *ud);
    void *on_bound_ud;
} api_config;

/* Who is asking, as the request gate established it: the registry uses it
 * to decide whether a name's registration may be replaced, renewed or
 * removed. */
typedef struct {
    int admin;                /* presented the admin token (or open_admin) */
    const char *owner_secret; /* borrowed: X-FailproofAI-Registration-Secret, or NULL */
} api_caller;

/* The header that carries a registration's own secret. */
#define API_REGISTRATION_SECRET_HEADER "X-FailproofAI-Registration-Secret"

/* The worker, as the admin routes see it. ctx == NULL means no worker: the
 * routes that need one answer 503 (readyz answers not ready). */
typedef struct {
    void *ctx; /* borrowed; passed back to every call */
    /* 1 if ready; else 0 with every reason appended to `reason` (borrowed),
     * "; " between them. */
    int (*ready)(void *ctx, strbuf *reason);
    /* A new reference: the GET /v1/status snapshot. */
    json_t *(*status_json)(void *ctx);
    /* Begins draining (idempotent): no new claims until resume. */
    void (*drain)(void *ctx);
    /* Ends that drain; 0, or -1 when the process is shutting down. */
    int (*resume)(void *ctx);
    /* A new reference to a recently processed assignment's session image
     * (the one its evaluations read), or NULL. */
    sbx_image *(*recent_image)(void *ctx, const char *assignment_id);
} api_worker_ops;

/* The local-evaluator registry, as the admin routes see it. ctx == NULL
 * means local evaluators are not enabled (their routes answer 503).
 * Failures fill an fps_err with http_status, name and msg. */
typedef struct {
    void *ctx;                                   /* borrowed */
    json_t *(*list)(void *ctx);                  /* new reference */
    json_t *(*get)(void *ctx, const char *name); /* new reference or NULL */
    /* Register or replace: 201/200 with *out (new reference), or the error
     * status with *out NULL. A first registration's answer carries its
     * "registration_secret"; replacing, renewing and removing a name need
     * that secret or an admin caller. */
    int (*put)(void *ctx, const char *name, const json_t *body, const api_caller *who, json_t **out,
               fps_err *e);
    int (*heartbeat)(void *ctx, const char *name, const api_caller *who, json_t **out, fps_err *e);
    /* 200 or the error status */
    int (*remove)(void *ctx, const char *name, const api_caller *who, fps_err *e);
    int (*count)(void *ctx, int *definitions); /* evaluators */
} api_local_ops;

/* The backtest engine, as the admin routes see it (POST, GET and DELETE
 * /v1/backtests). ctx == NULL means backtests are not available (the routes
 * answer 503). Failures fill an fps_err with http_status, name and msg. */
typedef struct {
    void *ctx; /* borrowed */
    /* Starts a backtest over the archive. `request` is the body as the
     * route validated it: {"definitions": non-empty array, "baseline":
     * "production" | array | null, "since"?: RFC 3339 string, "limit"?:
     * integer >= 1}. 202 with *id (malloc'ed, the caller frees it); 429
     * "backtest_busy" while another is queued or running; 400 for
     * definitions the engine refuses. An archive that cannot be read is
     * not a refusal: that backtest starts and ends "failed" with the
     * reason. */
    int (*start)(void *ctx, const json_t *request, char **id, fps_err *e);
    /* {"id","state":"queued"|"running"|"done"|"failed"|"cancelled",
     *  "progress":{"done","total"},"summary":<the CLI's JSON>|null,
     *  "created_at","error":<why a failed one could not go on>|null,
     *  "definitions","baseline"}:
     * a new reference, or NULL when unknown (pruned). */
    json_t *(*get)(void *ctx, const char *id);
    /* The rows (the CLI's --out rows) with changed == true when
     * changed_only, of eval_key when not NULL, from offset, at most limit:
     * a new array, *total how many match; NULL when the id is unknown. */
    json_t *(*rows)(void *ctx, const char *id, int changed_only, const char *eval_key,
                    size_t offset, size_t limit, size_t *total);
    /* Cancels: 200 (also when it had already ended), 404 when unknown. */
    int (*cancel)(void *ctx, const char *id, fps_err *e);
    /* The backtests kept, newest first: a new array of get's objects
     * without "summary" and "definitions". */
    json_t *(*list)(void *ctx);
} api_backtest_ops;

typedef struct {
    api_config cfg;
    store *db;                     /* borrowed; may be NULL (routes answer 503) */
    sbx_pool *pool;                /* borrowed; may be NULL (/v1/evaluate answers 503) */
    api_worker_ops worker;         /* see above */
    api_local_ops local;           /* see above */
    api_backtest_ops backtest;     /* see above */
    struct store_archive *archive; /* borrowed; may be NULL (off): /v1/status shows it */
} api_deps;

/* Binds cfg.listen (port 0 picks an ephemeral port) and starts serving. Returns NULL with err
 * filled on failure (API_ESTART, name "cannot_start": address in use, unreadable token file, ...).
 * The deps (and what they point to) must outlive the server. */
enum { API_ESTART = -1 };
api_server *api_start(const api_deps *deps, fps_err *err);
/* The bound port (useful with port 0). */
int api_port(const api_server *srv);
/* Stops accepting, waits for in-flight requests, frees. NULL is a no-op. */
void api_stop(api_server *srv);

#endif
