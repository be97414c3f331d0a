/* sidecar/cloud: the libcurl client of the Evaluator v2 protocol (SPEC §2).
 * cloud.c holds the shared HTTP layer (a fixed pool of easy handles with
 * connection reuse, headers, TLS, caps, origin pinning, the retry policy);
 * one cloud_<call>.c per protocol call does the request body and the STRICT
 * validation of its response. Every violation is a CLOUD_PROTOCOL error for
 * that call, never a crash. Thread-safe. */
#ifndef FPS_CLOUD_H
#define FPS_CLOUD_H
#include "common/err.h"
#include "common/rcbuf.h"

#include <jansson.h>
#include <stddef.h>

typedef struct cloud cloud;
struct secret;

#define CLOUD_MAX_RESPONSE ((size_t)2 * 1024 * 1024)
#define CLOUD_MAX_TRANSCRIPT ((size_t)25 * 1024 * 1024)
#define CLOUD_MAX_CAPACITY 32
#define CLOUD_MAX_DEFINITIONS 100

/* A definition's or run's execution mode ("python": managed, through the
 * jail; "local": the local registry). Validated at the boundary. */
typedef enum { CLOUD_MODE_LOCAL = 0, CLOUD_MODE_PYTHON } cloud_mode;
const char *cloud_mode_name(cloud_mode m);
/* The execution mode of a validated definition descriptor. */
cloud_mode cloud_definition_mode(const json_t *def);

typedef struct {
    const char *server_url;     /* borrowed during cloud_new; https unless loopback */
    const struct secret *token; /* borrowed; must outlive the client */
    const char *ca_bundle;      /* NULL = system store */
    double request_timeout_s;   /* per HTTP attempt */
    const char *worker_id;      /* for the worker-id header */
    int max_attempts;           /* retried calls; 0 = 5 */
    double backoff_base_s;      /* first backoff ceiling; 0 = 10 ms */
    double backoff_max_s;       /* cap; 0 = 5 s */
    int threads;                /* threads that may call the server at once: the HTTP handles
                                   made at start, never more (<= 0: CLOUD_DEFAULT_THREADS) */
} cloud_config;
#define CLOUD_DEFAULT_THREADS 4

/* The protocol's endpoints: backoff grows with the consecutive failures of
 * each one; metrics are labelled by cloud_endpoint_name. */
typedef enum {
    CLOUD_EP_REGISTER,
    CLOUD_EP_CLAIM,
    CLOUD_EP_TRANSCRIPT,
    CLOUD_EP_DEFINITIONS,
    CLOUD_EP_PLAN,
    CLOUD_EP_HEARTBEAT,
    CLOUD_EP_RESULT,
    CLOUD_EP__COUNT
} cloud_endpoint;
const char *cloud_endpoint_name(cloud_endpoint ep);

/* What a call came to: cloud_error.err.code (common/err.h: 0 = success). */
typedef enum {
    CLOUD_OK = 0,
    CLOUD_TRANSPORT = -1, /* connect/timeout/reset, or 429/502/503/504 without envelope */
    CLOUD_REMOTE = -2,    /* the server's error envelope (code, retryable)       */
    CLOUD_PROTOCOL = -3,  /* the response broke the contract                     */
    CLOUD_ABORTED = -4,   /* cloud_abort was called                              */
    /* not calls: what cloud_new, cloud_pin_url, cloud_validate_definition
     * and cloud_assignment_from_json refuse (an fps_err on its own) */
    CLOUD_EINVALID = -5,  /* a server URL, a URL the server sent, a definition */
    CLOUD_ERESOURCE = -6, /* out of memory, or no HTTP handles                 */
} cloud_kind;

/* The error codes the worker acts on (the rest are CLOUD_ERRC_OTHER and
 * only reported): matched once, where the code is read or made. */
typedef enum {
    CLOUD_ERRC_OTHER = 0,
    CLOUD_ERRC_LEASE_LOST,             /* remote lease_lost                        */
    CLOUD_ERRC_CATALOG_MISMATCH,       /* remote catalog_mismatch                  */
    CLOUD_ERRC_TRANSCRIPT_TOO_LARGE,   /* the transcript exceeds its cap          */
    CLOUD_ERRC_RESPONSE_TOO_LARGE,     /* any other response exceeds its cap      */
    CLOUD_ERRC_RETRY_BUDGET_EXHAUSTED, /* not sent: no retry budget left           */
} cloud_errc;

/* A call's error: the one convention's fps_err (common/err.h), with what a
 * protocol error adds. err.code is the cloud_kind; err.name the server's
 * own code, or transport_error / protocol_error / response_too_large /
 * redirect_refused / unsupported_protocol_version / retry_budget_exhausted /
 * aborted; err.http_status the answer's status (0 if none); err.msg one
 * line. */
typedef struct {
    fps_err err;
    cloud_errc errc; /* the codes the worker acts on, from err.name */
    int retryable;
    char request_id[33];   /* our X-Request-Id of the logical call */
    size_t response_bytes; /* body size of the last response (also on success) */
} cloud_error;

cloud *cloud_new(const cloud_config *cfg, fps_err *err);
void cloud_free(cloud *c);
/* Aborts in-flight transfers and backoff waits of every thread, for good. */
void cloud_abort(cloud *c);
/* Closes the pooled handles' idle connections (the worker calls it when it
 * goes idle); later calls open new ones. */
void cloud_release_idle(cloud *c);
/* Monotonic ms of the last HTTP response of any kind (0 = never). */
long long cloud_last_contact_ms(const cloud *c);
const char *cloud_origin(const cloud *c);

/* ---- behaviour under server failure (cloud_policy.h has the arithmetic) ----
 * Every retried call backs off with full jitter from tens of milliseconds,
 * growing with the consecutive failures of its endpoint; retries stay
 * within the retry budget; never past the call's deadline. After persistent
 * failure the circuit breaker opens: no retries except of heartbeats and
 * results, and new claims only as slow probes (cloud_claim_permit). */
/* May a claim be sent now? 1 (closed, or this claim is the probe), else 0
 * with the milliseconds until the next probe in *wait_ms. */
int cloud_claim_permit(cloud *c, long long *wait_ms);
/* The full-jitter delay before calling `ep` again after its consecutive
 * failures (0 if its last call succeeded), in milliseconds. */
long long cloud_backoff_ms(cloud *c, cloud_endpoint ep);
typedef struct {
    long long retries;                    /* retries sent (all endpoints)              */
    long long budget_exhausted;           /* retries refused by the budget             */
    long long breaker_opened;             /* times the breaker opened                  */
    int breaker_open;                     /* 1 while open or half-open                 */
    const char *breaker_state;            /* "closed" | "open" | "half_open" (static)  */
    int consecutive_failures;             /* failed requests in a row, all endpoints   */
    long window_requests, window_retries; /* in the budget's window          */
} cloud_policy_stats;
void cloud_policy_stats_get(cloud *c, cloud_policy_stats *out);

/* ---- register ---- */
typedef struct {
    char instance_id[256];
    char evaluator_kind[16];
    long long heartbeat_interval_s, lease_duration_s, poll_interval_s, claim_limit;
    json_t *disabled; /* owned array of strings */
} cloud_registration;
/* `catalog` is the normalized catalog array (catalog_normalize). Validates
 * the timing (positive, lease > heartbeat interval). */
int cloud_register(cloud *c, const char *catalog_revision, const json_t *catalog,
                   long max_concurrency, const char *sdk_version, cloud_registration *out,
                   cloud_error *e);

/* ---- claim ---- */
typedef struct {
    json_t *obj; /* owned; the fields below borrow from it */
    const char *assignment_id, *lease_expires_at, *session_id, *session_revision_id, *agent_id,
        *environment, *trigger_reason;
    long long lease_generation, event_count;
    char *transcript_url;       /* owned, absolute, pinned to the origin */
    char *definitions_url;      /* owned or NULL when absent */
    double lease_expires_epoch; /* parsed, 0 if unparseable */
} cloud_assignment;
/* Never transport-retried. On success out and n hold the validated
 * assignments (caller frees with cloud_assignments_free). Assignments that
 * individually break the contract are dropped and counted in *rejected
 * (logged); too many or duplicates reject the whole response. */
int cloud_claim(cloud *c, const char *catalog_revision, long capacity, cloud_assignment **out,
                size_t *n, size_t *rejected, cloud_error *e);
void cloud_assignment_clear(cloud_assignment *a);
void cloud_assignments_free(cloud_assignment *a, size_t n);
/* Deep copy (for resuming from the store etc.). */
int cloud_assignment_from_json(cloud *c, const json_t *obj, cloud_assignment *out, fps_err *err);

/* Told a response's size (its Content-Length, within the call's cap)
 * before its bytes are read, so that memory can be accounted for it: 0 to
 * read it, non-zero to refuse it with a one-line reason in msg (the call
 * then fails as too large, with that message). */
typedef int (*cloud_size_hook)(void *ud, size_t bytes, char *msg, size_t mcap);

/* ---- transcript ---- GET (capped at CLOUD_MAX_TRANSCRIPT, read no
 * further), parsed once, from its bytes straight to the session image
 * (simg.h, strict JSON), which is its validation: schema_version "2", string
 * fields, event shapes, event_count == len(events); then its
 * session_revision_id must be the assignment's. On success *raw holds the
 * bytes as received (one reference, for local dispatch and the recent ring)
 * and *simg / *simg_len the image (owned, with the assignment's id). With
 * raw NULL the caller wants the image only: the bytes are never returned,
 * and their pages are handed back as the image is built (SIMG_CONSUME), so
 * the parent does not hold the bytes and the whole image at once. */
int cloud_transcript(cloud *c, const cloud_assignment *a, rcbuf **raw, void **simg,
                     size_t *simg_len, cloud_error *e);
/* cloud_transcript with a size hook (see cloud_size_hook; NULL: none). */
int cloud_transcript_sized(cloud *c, const cloud_assignment *a, cloud_size_hook on_size, void *ud,
                           rcbuf **raw, void **simg, size_t *simg_len, cloud_error *e);

/* ---- definitions ---- (validated array of definitions, new reference) */
int cloud_definitions(cloud *c, const cloud_assignment *a, json_t **out, cloud_error *e);
/* Validates one definition descriptor (also used for the local catalog). */
int cloud_validate_definition(const json_t *d, fps_err *err);

/* ---- plan ---- */
/* One validated run descriptor of a plan (strings borrowed from obj). */
typedef struct {
    const char *run_id, *eval_key, *eval_version;
    const char *evaluator_source, *source_checksum; /* NULL when absent */
    cloud_mode mode;
    double timeout_s; /* 0 when absent */
    json_t *obj;      /* borrowed: the descriptor as received */
} cloud_run;
typedef enum { CLOUD_PLAN_PLANNED, CLOUD_PLAN_SKIPPED, CLOUD_PLAN_OTHER } cloud_plan_status;
typedef struct {
    json_t *obj; /* owned response */
    const char *assignment_status;
    cloud_plan_status status; /* assignment_status as an enum */
    int idempotent_replay;
    cloud_run *runs; /* owned array of nruns, borrowing from obj */
    size_t nruns;
} cloud_plan;
int cloud_plan_submit(cloud *c, const cloud_assignment *a, const json_t *selected,
                      const json_t *skipped, cloud_plan *out, cloud_error *e);
void cloud_plan_free(cloud_plan *p);

/* ---- heartbeat ---- */
/* `run_ids`: array of strings (running runs). *accepted: new array. Never
 * transport-retried: the caller beats again soon after a failure. */
int cloud_heartbeat(cloud *c, long long lease_generation, const json_t *run_ids, json_t **accepted,
                    char *lease_expires_at, size_t lcap, cloud_error *e);

/* ---- result ---- */
typedef struct {
    char status[32];
    int idempotent_replay;
    long long result_count;
} cloud_result_ack;
/* Sends `body` (the stored serialized result) unchanged. `again`: an
 * earlier call for this result failed, so even the first attempt is a
 * retry (within the budget: if it has none left, nothing is sent and e is
 * a retryable "retry_budget_exhausted"). */
int cloud_result(cloud *c, const char *run_id, const char *body, size_t len, int again,
                 cloud_result_ack *ack, cloud_error *e);

/* ---- reading validated descriptors ---- */
/* The string at `k`, or NULL if absent or not a string (borrowed). */
static inline const char *cloud_jstr(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}
/* timeout_seconds, or 0 when absent (validated > 0 when present). */
static inline double cloud_jtimeout(const json_t *o)
{
    const json_t *v = json_object_get(o, "timeout_seconds");
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* ---- shared layer (cloud.c), used by the cloud_<call>.c modules ---- */
typedef struct {
    const char *method; /* "GET" | "POST" */
    const char *url;    /* absolute (already pinned) */
    const char *body;   /* NULL for GET */
    size_t body_len;
    size_t cap;                 /* response cap; 0 = CLOUD_MAX_RESPONSE */
    int retry;                  /* 1 = apply the retry policy */
    long long lease_generation; /* > 0 adds the worker-id and lease headers */
    int allow_no_version;       /* transcript: no protocol_version field */
    cloud_endpoint ep;          /* backoff state and metrics label */
    char **raw_out;             /* if set: a 2xx body is not parsed; on success it lands
                                   here (owned, NUL-ended) and *out stays NULL */
    size_t *raw_len;            /* its length (with raw_out) */
    double lease_expires_epoch; /* > 0: no retry starts after this (wall clock) */
    int again;                  /* the first attempt is already a retry */
    cloud_size_hook on_size;    /* may be NULL: told a 2xx body's Content-Length */
    void *size_ud;
} cloud_req;
/* Performs the call; on CLOUD_OK *out is the parsed JSON object (or, with
 * raw_out, the body's bytes are in *raw_out). */
int cloud_call(cloud *c, const cloud_req *req, json_t **out, cloud_error *e);
/* cloud_call for a POST of `body` (borrowed), sent as compact JSON: fills
 * req's method, body and body_len. */
int cloud_post_json(cloud *c, cloud_req *req, const json_t *body, json_t **out, cloud_error *e);
/* Builds base + path (path formatted with one %s for an escaped id). */
char *cloud_url(cloud *c, const char *path_fmt, const char *id);
/* A server-supplied URL (relative "/..." or absolute) pinned to the origin;
 * NULL with a message if it points elsewhere or is malformed. */
char *cloud_pin_url(cloud *c, const char *supplied, fps_err *err);
const char *cloud_worker_id(const cloud *c);
void cloud_set_protocol_error(cloud_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Strict field helpers: return the value or set a protocol error. */
const char *cloud_req_str(const json_t *o, const char *key, const char *ctx, cloud_error *e);
int cloud_req_int(const json_t *o, const char *key, const char *ctx, long long min, long long *out,
                  cloud_error *e);
int cloud_opt_str(const json_t *o, const char *key, const char *ctx, const char **out,
                  cloud_error *e);
int cloud_opt_timeout(const json_t *o, const char *ctx, double *out, cloud_error *e);
int cloud_str_list(const json_t *o, const char *key, const char *ctx, cloud_error *e);

#endif
