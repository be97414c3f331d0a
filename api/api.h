/* api/: the localhost admin REST server (libmicrohttpd, SPEC §5, issues 8/9).
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
 * read the store / worker snapshot and never block the worker loop. */
#ifndef FPS_API_H
#define FPS_API_H
#include "sandbox/jail/sbx.h"
#include "sidecar/config.h"
#include "sidecar/local.h"
#include "store/store.h"

#include <stddef.h>

typedef struct api_server api_server;
/* The worker (sidecar/worker.h, WORKER engineer). */
typedef struct worker worker;

typedef struct {
    const run_config *cfg; /* borrowed: listen, admin hosts/token, ...  */
    store *db;             /* borrowed; may be NULL (routes answer 503) */
    worker *w;             /* borrowed; may be NULL (status/readyz/drain answer 503) */
    sbx_pool *pool;        /* borrowed; may be NULL (/v1/evaluate answers 503) */
    local_registry *local; /* borrowed; may be NULL (evaluator routes answer 503) */
} api_deps;

/* Binds cfg->listen (port 0 picks an ephemeral port), reads the admin token
 * file if configured, and starts serving. Returns NULL with a one-line
 * message in err on failure (address in use, unreadable token file, ...).
 * The deps must outlive the server. */
api_server *api_start(const api_deps *deps, char *err, size_t errcap);
/* The bound port (useful with port 0). */
int api_port(const api_server *srv);
/* Stops accepting, waits for in-flight requests, frees. NULL is a no-op. */
void api_stop(api_server *srv);

#endif
