/* api/: the localhost admin REST server (libmicrohttpd, SPEC §5).
 *
 * Routes: GET /healthz /readyz /metrics /v1/status /v1/assignments[/{id}]
 * /v1/runs[/{id}] /v1/evaluators[/{name}], PUT/DELETE /v1/evaluators/{name},
 * POST /v1/evaluators/{name}/heartbeat /v1/evaluate /v1/drain, and GET / plus
 * the embedded web assets. Hardened against browsers (Host allowlist against
 * DNS rebinding, JSON-only state changes with no foreign Origin, optional
 * admin token, strict security headers) and bad input (body caps, timeouts,
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
#include "sandbox/jail/sbx.h"
#include "store/store.h"

#include <jansson.h>
#include <stddef.h>

typedef struct api_server api_server;

/* What the admin server needs of the daemon's configuration. */
typedef struct {
    const char *listen;           /* HOST:PORT; NULL = 127.0.0.1:8787 */
    const cli_list *admin_hosts;  /* borrowed; extra accepted Host names; may be NULL */
    const char *admin_token_file; /* NULL = no admin token */
    int allow_remote_admin;       /* a non-loopback listen address is allowed (with a token) */
} api_config;

/* The worker, as the admin routes see it. ctx == NULL means no worker: the
 * routes that need one answer 503 (readyz answers not ready). */
typedef struct {
    void *ctx; /* borrowed; passed back to every call */
    /* 1 if ready; else 0 with one line per reason in `reason`. */
    int (*ready)(void *ctx, char *reason, size_t cap);
    /* A new reference: the GET /v1/status snapshot. */
    json_t *(*status_json)(void *ctx);
    /* Begins draining (idempotent). */
    void (*drain)(void *ctx);
    /* A new reference to a recently processed assignment's transcript, or NULL. */
    json_t *(*recent_transcript)(void *ctx, const char *assignment_id);
} api_worker_ops;

/* The local-evaluator registry, as the admin routes see it. ctx == NULL
 * means local evaluators are not enabled (their routes answer 503).
 * Failures fill an fps_err with http_status, name and msg. */
typedef struct {
    void *ctx;                                   /* borrowed */
    json_t *(*list)(void *ctx);                  /* new reference */
    json_t *(*get)(void *ctx, const char *name); /* new reference or NULL */
    /* Register or replace: 201/200 with *out (new reference), or the error
     * status with *out NULL. */
    int (*put)(void *ctx, const char *name, const json_t *body, json_t **out, fps_err *e);
    int (*heartbeat)(void *ctx, const char *name, json_t **out, fps_err *e);
    int (*remove)(void *ctx, const char *name, fps_err *e); /* 200 or the error status */
    int (*count)(void *ctx, int *definitions);              /* evaluators */
} api_local_ops;

typedef struct {
    api_config cfg;
    store *db;             /* borrowed; may be NULL (routes answer 503) */
    sbx_pool *pool;        /* borrowed; may be NULL (/v1/evaluate answers 503) */
    api_worker_ops worker; /* see above */
    api_local_ops local;   /* see above */
} api_deps;

/* Binds cfg.listen (port 0 picks an ephemeral port), reads the admin token
 * file if configured, and starts serving. Returns NULL with a one-line
 * message in err on failure (address in use, unreadable token file, ...).
 * The deps (and what they point to) must outlive the server. */
api_server *api_start(const api_deps *deps, char *err, size_t errcap);
/* The bound port (useful with port 0). */
int api_port(const api_server *srv);
/* Stops accepting, waits for in-flight requests, frees. NULL is a no-op. */
void api_stop(api_server *srv);

#endif
