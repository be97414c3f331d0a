/* sandbox/sbx: the jail's public API. Every evaluation of server-authored or
 * operator-supplied source runs through sbx_eval in its own child process
 * (fresh exec of this binary as SBX_CHILD_ARG, empty environment, no
 * inherited fds but its own, no_new_privs, seccomp allowlist, rlimits,
 * optional user+net namespaces), bounded by one deadline that covers waiting
 * for a slot and running. Thread-safe: many worker threads call sbx_eval on
 * one pool. */
#ifndef FPS_SBX_H
#define FPS_SBX_H
#include "sandbox/lang.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>

typedef struct sbx_pool sbx_pool;
typedef struct sbx_image sbx_image;

typedef struct {
    int max_sandboxes;      /* concurrent children (default 4)          */
    long memory_mb;         /* RLIMIT_AS per child (default 512)        */
    const char *self_exe;   /* binary to exec; NULL = /proc/self/exe    */
} sbx_config;

/* Jail layers this machine provides (detected once, at pool creation). */
typedef struct {
    int seccomp, no_new_privs, rlimits; /* required: pool creation fails without */
    int user_ns, net_ns;                /* optional */
} sbx_layers;

sbx_pool *sbx_pool_new(const sbx_config *cfg, char *err, size_t errcap);
void sbx_pool_free(sbx_pool *pool);
sbx_layers sbx_pool_layers(const sbx_pool *pool);
/* Children currently running (for /v1/status and metrics). */
int sbx_pool_active(const sbx_pool *pool);

/* A transcript prepared once per assignment and shared read-only by every
 * evaluation on it (a sealed memfd). Reference-counted: sbx_image_release
 * drops the caller's reference. */
sbx_image *sbx_image_new(const json_t *transcript, const char *assignment_id, char *err,
                         size_t errcap);
sbx_image *sbx_image_ref(sbx_image *img);
void sbx_image_release(sbx_image *img);

typedef enum {
    SBX_OK = 0,        /* outcome.json holds the interpreter's outcome line (any "ok")  */
    SBX_TIMEOUT,       /* deadline (incl. waiting for a slot), CPU or memory limit hit   */
    SBX_OUTPUT,        /* the child wrote more than 1 MiB: killed                        */
    SBX_CANCELLED,     /* *cancel became non-zero: killed                                */
    SBX_JAIL_FAILURE,  /* the child could not be jailed or died abnormally: fail closed  */
} sbx_status;

typedef struct {
    lang_kind kind;
    const char *source;
    size_t source_len;
    const char *eval_key;   /* primary result key (evaluator kind)      */
    double timeout_s;       /* clamped to (0, 60]; <= 0 means 30        */
    sbx_image *image;       /* borrowed; may be NULL (no session)       */
    atomic_int *cancel;     /* borrowed; may be NULL; non-zero kills    */
} sbx_request;

typedef struct {
    sbx_status status;
    json_t *json;           /* owned: the outcome object when SBX_OK    */
    char detail[256];       /* human-readable reason for non-OK statuses */
    double wait_ms, run_ms; /* time waiting for a slot, time running    */
} sbx_outcome;

/* Runs one evaluation in a fresh jailed child. Always fills `out` (the
 * caller calls sbx_outcome_free). */
void sbx_eval(sbx_pool *pool, const sbx_request *req, sbx_outcome *out);
void sbx_outcome_free(sbx_outcome *out);

#endif
