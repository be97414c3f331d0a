/* sidecar/local_internal: the registry's private state, shared by local.c
 * (registry) and local_dispatch.c (HTTP dispatch, EvalResult conversion).
 * Not a public interface. */
#ifndef FPS_LOCAL_INTERNAL_H
#define FPS_LOCAL_INTERNAL_H
#include "sidecar/http/curl_pool.h"
#include "sidecar/local/local.h"
#include "sidecar/local/local_ttl.h"

#include <pthread.h>

/* Limits from the contract (tests/fixtures/evaluator-v2.json "limits"). */
#define LOCAL_MAX_DEFINITIONS 100
#define LOCAL_MAX_KEY_BYTES 128
#define LOCAL_MAX_VERSION_BYTES 128
#define LOCAL_MAX_DISPLAY_NAME_BYTES 128
#define LOCAL_MAX_LABEL_BYTES 64
#define LOCAL_MAX_LABELS 20
#define LOCAL_MAX_RESULTS 25
#define LOCAL_MAX_SUMMARY_BYTES 4096
#define LOCAL_MAX_REASONING_BYTES 16384
#define LOCAL_MAX_UNIT_BYTES 64
#define LOCAL_MAX_DISPLAY_VALUE_BYTES 256
#define LOCAL_MAX_DESCRIPTION_BYTES 1000

typedef struct {
    char *eval_key, *eval_version, *display_name, *result_kind;
    json_t *labels;   /* sorted array of strings */
    char *condition;  /* NULL: none */
    double timeout_s; /* 0: none */
} ldef;

typedef struct {
    char *name, *version, *endpoint;
    double ttl;
    double registered_at, heartbeat_at, expires_at; /* epoch; expires_at 0 = never */
    ldef *defs;
    size_t ndefs;
    json_t *registration; /* the validated body, persisted as is */
    secret *owner;        /* owned: the registration's secret; NULL = none yet
                             (restored from a store written before owners) */
    /* Dispatch outcomes: failing since the first of the dispatches that
     * failed in a row (0 = the last one succeeded), and why the last did. */
    double failing_since;
    char last_error[256];
} lev;

/* An evaluator that missed its TTL, listed (state "expired") for an hour. */
typedef struct {
    char name[129], version[129];
    double expired_at;
} lexpired;
#define LOCAL_EXPIRED_MAX 64

struct local_registry {
    local_config cfg;
    pthread_mutex_t mu;
    pthread_mutex_t put_mu; /* serializes PUT and DELETE (taken before mu) */
    pthread_cond_t cv;      /* timer thread wake-ups */
    pthread_t thread;
    int stop;
    lev **evs;
    size_t n;
    uint64_t generation;
    int change_pending;
    int64_t change_due; /* monotonic ms */
    local_change_fn fn;
    void *ud;
    char admin_host[256];                /* the admin API's listen host ("" = unknown) */
    int admin_port;                      /* its port (0 = unknown) */
    local_client *client;                /* owned: cfg.max_dispatch slots */
    lexpired expired[LOCAL_EXPIRED_MAX]; /* oldest first */
    size_t nexpired;
};

/* local.c: records a dispatch outcome against the evaluator `name` (its
 * alive/failing state); error_code "" when it succeeded. */
void local_note_dispatch(local_registry *r, const char *name, const char *error_code,
                         const char *message);

int local_key_valid(const char *s);
int local_has_control(const char *s, int text);
/* 0 if endpoint is acceptable: http to a loopback address (or https/http
 * to a host the operator allowed), not the admin API itself. Else -1 with
 * err filled (422). Takes the registry lock briefly (not to be held). */
int local_endpoint_check(local_registry *r, const char *endpoint, fps_err *err);
/* Finds an unexpired definition (version NULL = any); lock held. */
lev *local_find_def_locked(local_registry *r, const char *key, const char *version, ldef **def);

#endif
