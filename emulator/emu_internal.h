/* emulator/emu_internal: types shared by the emulator's files (not a public
 * API; other subsystems use emulator.h).
 *
 * Ownership: the emulator owns every instance, assignment and run for its
 * whole life (nothing is freed before emulator_stop), so pointers between
 * them are borrowed and stable. All mutable state is guarded by emulator.mu
 * (one mutex); counters read without it are atomics. */
#ifndef FPS_EMU_INTERNAL_H
#define FPS_EMU_INTERNAL_H
#include "common/secret.h"
#include "common/strbuf.h"
#include "emulator/emulator.h"

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define EMU_PROTOCOL_VERSION "2"
#define EMU_MAX_CAPACITY 32
#define EMU_MAX_DEFINITIONS 100
#define EMU_MAX_RESULTS 25

/* ---- string -> pointer hash map (open addressing; keys borrowed) ---- */
typedef struct {
    const char **keys;
    void **vals;
    size_t cap, len;
} emu_map;
void emu_map_init(emu_map *m);
void emu_map_free(emu_map *m);
void *emu_map_get(const emu_map *m, const char *key);
void emu_map_put(emu_map *m, const char *key, void *val);

/* ---- evaluator instances (one per --token) ---- */
typedef enum { INST_CUSTOMER, INST_MANAGED, INST_DISABLED } emu_inst_kind;

typedef struct {
    secret *token; /* owned */
    emu_inst_kind kind;
    char instance_id[37];
    int registered;
    json_t *catalog; /* owned: catalog entries as registered */
    char catalog_revision[80];
} emu_instance;

/* ---- assignments and runs ---- */
typedef enum {
    AS_AVAILABLE = 0,
    AS_LEASED,
    AS_PLANNED,
    AS_COMPLETED,
    AS_SKIPPED,
    AS_DEAD,
    AS_NSTATUS
} emu_as_status;

typedef struct emu_assignment emu_assignment;

typedef struct {
    char id[37];
    emu_assignment *a;                   /* borrowed */
    json_t *wire;                        /* owned: the plan response's run object */
    const char *eval_key, *eval_version; /* borrowed from wire */
    int committed;
    char *submission_id; /* owned once committed */
    char *body;          /* owned: the committed request body, byte for byte */
    size_t body_len;
    char checksum[72];
    long result_count;
    char result_status[16];
    double committed_at;
} emu_run;

struct emu_assignment {
    char id[37];
    json_t *session;  /* owned: transcript metadata (session_id, ...), for claims */
    char *transcript; /* owned: the serialized transcript served as is */
    size_t transcript_len;
    long event_count;
    emu_as_status status;
    long generation, attempts;
    double lease_expires;
    char worker_id[132];
    emu_instance *instance; /* borrowed: current/last leaseholder's instance */
    json_t *definitions;    /* owned: descriptors for the current lease */
    json_t *sources;        /* owned: evaluator_source per descriptor (or null) */
    char catalog_revision[80];
    int planned;    /* a first plan was accepted */
    emu_run **runs; /* owned array of borrowed runs (emulator owns runs) */
    size_t nruns, nterminal;
    emu_assignment *next; /* available queue link */
    int queued;
};

typedef struct {
    double expires;
    emu_assignment *a;
    long generation;
} emu_heap_item;

/* Protocol routes (requests are counted per route). */
enum {
    R_NONE,
    R_REGISTER,
    R_CLAIM,
    R_TRANSCRIPT,
    R_DEFINITIONS,
    R_PLAN,
    R_HEARTBEAT,
    R_RESULT,
    R__COUNT
};

typedef struct {
    atomic_long by_route[R__COUNT];
    atomic_long requests, commits, idempotent_replays, plan_replays, conflicts, lease_losses,
        lease_expirations, faults_5xx, faults_drop, faults_lease_loss;
} emu_stats;

struct emulator {
    /* configuration (copied) */
    long lease_seconds, heartbeat_seconds, poll_seconds, max_attempts, claim_limit;
    /* Fault rates: set at start, changed at run time by POST
     * /emulator/v1/faults, read by every request. */
    _Atomic double fault_5xx, fault_drop, fault_lease_loss;
    atomic_long fault_latency_ms;
    long max_transcript_bytes;
    json_t *disabled; /* owned: array of eval keys */
    uint64_t seed;
    atomic_ulong rng_counter;

    pthread_mutex_t mu;
    emu_instance *instances;
    size_t ninstances;
    json_t *managed;         /* owned: managed descriptors */
    json_t *managed_sources; /* owned: their evaluator_source strings */

    emu_map assignments_by_id, runs_by_id;
    emu_assignment **assignments;
    size_t nassignments, capassignments;
    emu_run **runs;
    size_t nruns, capruns;
    emu_run **committed; /* commit order */
    size_t ncommitted;
    emu_assignment *avail_head, *avail_tail;
    long status_count[AS_NSTATUS];
    long pending_runs;
    emu_heap_item *heap;
    size_t heap_len, heap_cap;
    atomic_long gen_index; /* generated sessions so far */
    long session_seq;

    emu_stats stats;
    struct MHD_Daemon *mhd;
    int port;
};

/* ---- one request being answered ---- */
typedef struct {
    emulator *e;
    struct MHD_Connection *conn;
    const char *method, *url;
    const char *body;
    size_t body_len;
    char request_id[33];
    emu_instance *inst; /* authenticated instance (protocol routes) */
    int status;
    char *resp; /* owned unless resp_static */
    size_t resp_len;
    int resp_static; /* resp points into emulator-owned, immutable memory */
    const char *content_type;
} emu_req;

/* server.c: responses */
void emu_reply_json(emu_req *r, int status, json_t *body /* stolen */);
void emu_reply_error(emu_req *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void emu_reply_error_status(emu_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A uniform [0,1) draw (fault injection). Thread-safe. */
double emu_roll(emulator *e);

/* state.c (callers hold e->mu unless noted) */
int emu_state_init(emulator *e);
void emu_state_free(emulator *e);
/* Takes ownership of session (metadata) and transcript. Locks internally. */
emu_assignment *emu_state_add_assignment(emulator *e, json_t *session, char *transcript,
                                         size_t transcript_len, long event_count);
void emu_state_set_status(emulator *e, emu_assignment *a, emu_as_status s);
/* Moves every lease that expired by `now` back to available (or dead). */
void emu_state_sweep(emulator *e, double now);
/* Ends the current lease now (forced expiry, lease-loss fault). */
void emu_state_expire(emulator *e, emu_assignment *a, double now);
void emu_state_heap_push(emulator *e, emu_assignment *a);
emu_assignment *emu_state_pop_available(emulator *e);
emu_run *emu_state_add_run(emulator *e, emu_assignment *a, json_t *wire);
const char *emu_status_name(emu_as_status s);
/* Fencing: 0 if (worker_id, generation) hold a live lease on a (terminal
 * assignments need only match when allow_terminal); else replies 409
 * lease_lost and returns -1. Applies the lease-loss fault. */
int emu_fence(emu_req *r, emu_assignment *a, const char *worker_id, long generation,
              int allow_terminal);

/* sessions.c */
/* Normalizes a transcript into a new assignment. raw: serve as given. */
emu_assignment *emu_sessions_add_json(emulator *e, json_t *transcript, int raw, fps_err *err);
void emu_sessions_generate(emulator *e, long n);
int emu_sessions_load_dir(emulator *e, const char *dir, fps_err *err);

/* definitions.c */
int emu_definitions_load(emulator *e, const char *file, const char *text, fps_err *err);
/* Checks one {eval_key, display_name, eval_version, result_kind, labels}
 * entry as the reference authoring API does. */
int emu_validate_catalog_entry(json_t *d, const char *ctx, fps_err *err);
/* Builds a's descriptors for a lease by its instance (caller holds mu). */
void emu_definitions_for(emulator *e, emu_assignment *a, emu_instance *inst);

/* validate.c: each returns 0, or -1 with a precise message in err */
int emu_v_string(json_t *o, const char *key, const char *ctx, const char **out, fps_err *err);
int emu_v_opt_string(json_t *o, const char *key, const char *ctx, const char **out, fps_err *err);
int emu_v_int(json_t *o, const char *key, const char *ctx, long long *out, fps_err *err);
int emu_v_pos_int(json_t *o, const char *key, const char *ctx, long long *out, fps_err *err);
int emu_v_nonneg_int(json_t *o, const char *key, const char *ctx, long long *out, fps_err *err);
int emu_v_array(json_t *o, const char *key, const char *ctx, json_t **out, fps_err *err);
int emu_v_bounded(const char *s, const char *name, size_t max, fps_err *err);
int emu_v_no_control(const char *s, const char *name, fps_err *err);
int emu_v_key(const char *s, const char *name, fps_err *err);
int emu_v_enum(json_t *o, const char *key, const char *ctx, const char *const *allowed,
               const char **out, fps_err *err);
int emu_v_opt_number(json_t *o, const char *key, const char *ctx, int *present, double *out,
                     fps_err *err);
int emu_v_labels(json_t *o, const char *key, const char *ctx, fps_err *err);
int emu_v_timestamp(json_t *o, const char *key, const char *ctx, fps_err *err);

/* handlers_*.c: protocol calls. body is the parsed request (POST) or NULL. */
void emu_h_register(emu_req *r, json_t *body);
void emu_h_claim(emu_req *r, json_t *body);
void emu_h_transcript(emu_req *r, const char *assignment_id);
void emu_h_definitions(emu_req *r, const char *assignment_id);
void emu_h_plan(emu_req *r, json_t *body, const char *assignment_id);
void emu_h_heartbeat(emu_req *r, json_t *body);
void emu_h_result(emu_req *r, json_t *body, const char *run_id);
/* Reads and validates the fencing headers of a GET. */
int emu_fence_headers(emu_req *r, const char **worker_id, long *generation);

/* inspect.c: /emulator/v1/... */
json_t *emu_state_json(emulator *e);
void emu_inspect(emu_req *r, const char *path);

/* server.c */
int emu_server_start(emulator *e, const char *listen, long threads, fps_err *err);
void emu_server_stop(emulator *e);

#endif
