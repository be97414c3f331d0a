/* sidecar/local: local evaluators (SPEC §4).
 *
 * The registry: customer evaluator processes register over the admin API
 * (PUT /v1/evaluators/{name}), heartbeat within their TTL (Consul-style) and
 * leave the catalog when they expire or are DELETEd. Registrations are
 * persisted in the store and restored at start with their TTL still running.
 * Every catalog change (register, replace, delete, expiry) bumps the
 * catalog generation and, debounced, calls the change callback (the worker's
 * "catalog changed" entry point, which recomputes the revision with
 * sidecar/local/catalog.h and re-registers).
 *
 * Dispatch: a planned `local` run is POSTed to its evaluator's endpoint as
 * {evaluation_run_id, eval_key, eval_version, timeout_seconds, transcript};
 * the EvalResult answer is validated and turned into wire result items
 * exactly as the reference EvalResult.result_items. Failures become
 * failed/timed_out results with bounded messages that never echo the
 * evaluator's response body.
 *
 * Conditions of local definitions: local_condition runs a definition's
 * registered condition in the jail (sbx_eval); the worker calls it in its
 * lease-bounded condition phase (it decides lease_exhausted itself).
 *
 * Thread-safe: the admin API's threads, the worker's threads and the
 * registry's own timer thread call into one registry. */
#ifndef FPS_LOCAL_H
#define FPS_LOCAL_H
#include "common/cli.h"
#include "common/err.h"
#include "common/secret.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/evaluation/evaluation.h"
#include "store/store.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct local_registry local_registry;

/* Header signing every dispatch with the registration's own secret:
 * "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>"
 * (Stripe-style); evaluators recompute it and accept +-300 s. */
#define LOCAL_SIGNATURE_HEADER "X-FailproofAI-Signature"
/* Response body cap for a dispatch. */
#define LOCAL_MAX_RESPONSE_BYTES ((size_t)1024 * 1024)
/* Default run timeout for local runs (SPEC §2 step 8). */
#define LOCAL_DEFAULT_TIMEOUT_S 300.0
#define LOCAL_DEFAULT_TTL_S 30.0

/* Bound on one condition's compile check in the jail, waiting for a slot
 * included. */
#define LOCAL_CHECK_TIMEOUT_S 10.0

typedef struct {
    sbx_pool *pool;                /* borrowed; required: conditions are
                                      compile-checked in the jail (sbx_check) */
    store *db;                     /* borrowed; NULL = in-memory only      */
    const cli_list *allowed_hosts; /* borrowed; --allow-evaluator-host     */
    int max_dispatch;              /* concurrent dispatches (<=0: 16)      */
    double debounce_s;             /* change-callback debounce (<=0: 0.25) */
} local_config;

/* Creates the registry, restores persisted registrations from the store
 * (those whose TTL already ran out are dropped) and starts the TTL/debounce
 * thread. NULL with a message in err on failure. */
enum { LOCAL_ESTART = -1 }; /* fps_err name "cannot_start" */
local_registry *local_registry_new(const local_config *cfg, fps_err *err);
/* Stops the thread and frees. In-flight dispatches must have returned. */
void local_registry_free(local_registry *r);

/* The catalog-changed callback (worker). Called from the registry's thread,
 * debounced, never with a registry lock held; fn may call back into the
 * registry. Set once, before any change is expected. */
typedef void (*local_change_fn)(void *ud);
void local_registry_set_change_callback(local_registry *r, local_change_fn fn, void *ud);

/* The admin API's address (after it bound its port): endpoints that point
 * back at it are refused at registration and at dispatch. */
void local_registry_set_admin_address(local_registry *r, const char *host, int port);

/* ---- admin API operations ---------------------------------------------- */
/* Who is asking. A registration has an owner: its first PUT answers with a
 * "registration_secret"; replacing, renewing and removing the name need that
 * secret, or an admin caller. Expiry releases the name and its eval keys. */
typedef struct {
    int admin;                /* the operator (admin token)        */
    const char *owner_secret; /* borrowed; the presented secret or NULL */
} local_caller;

/* A rejection is an fps_err (common/err.h) with http_status (400/404/409/
 * 413/422, or 503 when the jail could not check a condition; also its code),
 * name ("invalid_request", "not_found", "conflict", "sandbox_unavailable",
 * ...) and a message naming the field and the rule, e.g.
 * "definitions[3].eval_key must match ^[a-z][a-z0-9_]*$". */

/* PUT /v1/evaluators/{name}: register or replace. `body` is the parsed
 * request body (borrowed). Returns 201 (created; the view then carries
 * "registration_secret") or 200 (replaced by its owner or an admin; 403
 * for anyone else) and sets *out (owned) to the evaluator's view (as
 * local_registry_get), or returns the error status with err filled and
 * *out NULL. Each definition's condition is compile-checked in a jailed
 * child (sbx_check on cfg.pool), never in this process. */
int local_registry_put(local_registry *r, const char *name, const json_t *body,
                       const local_caller *who, json_t **out, fps_err *err);
/* POST /v1/evaluators/{name}/heartbeat: 200 and *out = view, 403 (not the
 * owner) or 404. */
int local_registry_heartbeat(local_registry *r, const char *name, const local_caller *who,
                             json_t **out, fps_err *err);
/* DELETE /v1/evaluators/{name}: 200, 403 (not the owner) or 404. */
int local_registry_delete(local_registry *r, const char *name, const local_caller *who,
                          fps_err *err);
/* GET /v1/evaluators/{name}: owned view {name, version, endpoint,
 * ttl_seconds, registered_at, last_heartbeat_at, expires_at,
 * ttl_remaining_seconds, state: "passing", definitions: [...]}, or NULL. */
json_t *local_registry_get(local_registry *r, const char *name);
/* GET /v1/evaluators: owned {"evaluators": [view, ...]} sorted by name. */
json_t *local_registry_list(local_registry *r);
/* Registered evaluators / definitions (for gauges and /v1/status). */
int local_registry_count(local_registry *r, int *definitions);

/* ---- the worker's side --------------------------------------------------- */
/* The current catalog: an owned JSON array of catalog definitions
 * {eval_key, display_name, eval_version, result_kind, labels (sorted)},
 * sorted by eval_key, ready for register and catalog_revision. *generation
 * (if not NULL) is a counter bumped by every catalog change. */
json_t *local_registry_catalog(local_registry *r, uint64_t *generation);

/* A local definition as registered (everything owned; free with
 * local_definition_free). */
typedef struct {
    char *evaluator; /* evaluator name                            */
    char *eval_key, *eval_version, *display_name, *result_kind;
    char *condition;  /* NULL when the definition has none          */
    double timeout_s; /* > 0 when registered with one, else 0       */
} local_definition;
/* Looks up a currently registered (unexpired) definition. Returns 0 and
 * fills *out, or -1 if no evaluator offers eval_key at eval_version. */
int local_registry_definition(local_registry *r, const char *eval_key, const char *eval_version,
                              local_definition *out);
void local_definition_free(local_definition *d);

/* The outcome of a local definition's condition. */
typedef struct {
    int applicable;        /* 1: selected; 0: skipped with reason_code   */
    char reason_code[136]; /* "condition_false" | ConditionResult code |
                              "condition_error"                        */
    char detail[256];      /* for logs when condition_error (no transcript text) */
} local_condition_outcome;

/* Evaluates the registered condition of (eval_key, eval_version) against the
 * session image in a jailed child: waiting for a sandbox slot within
 * budget_s (what is left of the lease), then running for at most timeout_s
 * (clamped by the jail to <= 60 s). A definition without a condition is
 * applicable. Rejected source, an exception, a non-bool value, a jail
 * failure or its own timeout give applicable 0 / "condition_error"; running
 * out of the budget (no slot in time, or cut while running) gives
 * "lease_exhausted": the sidecar's overload is not the definition's fault.
 * Returns 0 when *out is filled, -1 if no registered evaluator offers that
 * key/version (out: condition_error). */
int local_condition(local_registry *r, sbx_pool *pool, const char *eval_key,
                    const char *eval_version, sbx_image *img, double timeout_s, double budget_s,
                    atomic_int *cancel, local_condition_outcome *out);

typedef struct {
    const char *evaluation_run_id;
    const char *eval_key;
    const char *eval_version;
    const char *result_kind; /* primary result kind; NULL: as registered */
    double timeout_s;        /* the run's or descriptor's timeout; <= 0: the
                                registered one, else LOCAL_DEFAULT_TIMEOUT_S */
    /* The transcript: the JSON object's bytes as received from the server
     * (borrowed; sent as they are, never re-serialized). */
    const char *transcript;
    size_t transcript_len;
    atomic_int *cancel; /* borrowed; may be NULL; non-zero aborts   */
} local_dispatch_request;

typedef struct {
    eval_run_status status;         /* spelled by evaluation_status_name */
    json_t *results;                /* owned: array of wire result items (empty unless succeeded) */
    char *summary;                  /* owned, may be NULL                          */
    char error_code[64];            /* "" | evaluator_unavailable | eval_error | eval_timeout */
    char error_message[512];        /* bounded; never quotes the response body   */
    double started_at, finished_at; /* wall clock, epoch seconds          */
    long http_status;               /* evaluator's HTTP status (0 if none)         */
} local_dispatch_result;

/* Dispatches one run (blocking; bounded by the timeout; at most
 * max_dispatch at once, waiting for a slot counts against the timeout).
 * Always fills *out; release with local_dispatch_result_free. */
void local_dispatch(local_registry *r, const local_dispatch_request *req,
                    local_dispatch_result *out);
void local_dispatch_result_free(local_dispatch_result *out);

/* ---- the dispatch client ------------------------------------------------- */
/* What sends a run to an evaluator endpoint: the registry's dispatch uses
 * one, and so does anything that dispatches to an endpoint it was given
 * (the backtest engine's --local), so the body and its signature are built
 * in one place. At most max_dispatch requests at once (<= 0: 16), each on
 * a pooled handle. Thread-safe. NULL when libcurl cannot make the handles. */
typedef struct local_client local_client;
local_client *local_client_new(int max_dispatch);
/* No dispatch may be running. NULL is a no-op. */
void local_client_free(local_client *c);

/* Where one run goes (everything borrowed). */
typedef struct {
    const char *endpoint;    /* http(s) URL; a localhost name is pinned to 127.0.0.1 */
    const char *name;        /* the evaluator's name in messages (NULL: the endpoint) */
    const char *result_kind; /* primary result kind the answer must carry */
    const secret *key;       /* signs the body (LOCAL_SIGNATURE_HEADER); NULL: unsigned */
    double timeout_s;        /* > 0, else LOCAL_DEFAULT_TIMEOUT_S; waiting for a
                                slot counts against it */
} local_target;

/* Sends req to t (blocking; bounded by the timeout): the body
 * {evaluation_run_id, eval_key, eval_version, timeout_seconds, transcript}
 * with the transcript's bytes as given, the answer validated into wire
 * result items with their primary result. Always fills *out (no metrics,
 * no logs: the caller's); release with local_dispatch_result_free. */
void local_client_dispatch(local_client *c, const local_target *t,
                           const local_dispatch_request *req, local_dispatch_result *out);

/* Turns an evaluator's EvalResult answer (parsed JSON, borrowed) into wire
 * result items for eval_key (owned array in *items, summary copied into
 * *summary or NULL). Returns 0, or LOCAL_EBAD_RESULT with the rule violated
 * in err (name "eval_error"; no values quoted). Exposed for tests. */
enum { LOCAL_EBAD_RESULT = -2 };
int local_result_items(const json_t *answer, const char *eval_key, json_t **items, char **summary,
                       fps_err *err);

/* An evaluator's answer to one dispatched run, as received (borrowed). */
typedef struct {
    long http_status;
    const char *body; /* NULL = empty */
    size_t len;
    int truncated; /* more than LOCAL_MAX_RESPONSE_BYTES came; the transfer was cut */
} local_reply;

/* Judges an answer to a run of eval_key whose primary result has kind
 * result_kind (NULL: none can be primary), from the evaluator `name` (as
 * messages call it). *out must hold an owned results array (as
 * local_client_dispatch starts it); its status, error_code and
 * error_message are set, and on success its results and summary replaced.
 * The first rule broken makes it failed / eval_error with this message
 * (the body is never quoted):
 *   truncated, or len over LOCAL_MAX_RESPONSE_BYTES:
 *       "local evaluator '<name>' answered more than 1048576 bytes"
 *   HTTP 3xx: "local evaluator '<name>' answered a redirect (HTTP <n>);
 *       redirects are not followed"
 *   any other status outside 2xx: "local evaluator '<name>' answered HTTP <n>"
 *   not JSON: "local evaluator '<name>' answered invalid JSON (at byte <n>)"
 *   not an EvalResult: "local evaluator '<name>' returned an invalid
 *       EvalResult: <the rule, as local_result_items says it>"
 *   no primary result: "result is missing the primary result (key '<k>',
 *       kind '<kind>')"
 * Otherwise succeeded, with error_code and error_message "". */
void local_reply_judge(const local_reply *rp, const char *name, const char *eval_key,
                       const char *result_kind, local_dispatch_result *out);

#endif
