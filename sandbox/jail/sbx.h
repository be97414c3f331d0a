/* sandbox/jail/sbx: the jail's public API. Every evaluation of server-authored or
 * operator-supplied source runs through sbx_eval in its own child process
 * (forked from a pristine single-threaded zygote that is itself a fresh
 * exec, or exec'd directly; see jail.h; empty environment, no inherited fds
 * but its own, no_new_privs, seccomp allowlist, rlimits, optional user+net
 * namespaces), bounded by one deadline that covers waiting
 * for a slot and running. Thread-safe: many worker threads call sbx_eval on
 * one pool. */
#ifndef FPS_SBX_H
#define FPS_SBX_H
#include "common/err.h"
#include "sandbox/lang/lang.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sbx_pool sbx_pool;
typedef struct sbx_image sbx_image;

typedef struct {
    int max_sandboxes;    /* concurrent children (default 4)          */
    int playground_max;   /* of those, at most this many for requests
                             marked `playground` (<= 0: 1); a waiting
                             worker request always goes first         */
    long memory_mb;       /* RLIMIT_AS per child (default 512)        */
    const char *self_exe; /* binary to exec; NULL = /proc/self/exe.
                             The jail prefers the child image
                             `failproofai-sandbox` in the same directory
                             (same argv contract, far fewer libraries)
                             and falls back to self_exe SBX_CHILD_ARG. */
    /* how children are made (defaults suit the daemon) */
    int prestart;          /* idle pre-started (already jailed, single-use)
                              children kept ready; 0 = max_sandboxes,
                              -1 = none (spawn on demand)               */
    int no_namespaces;     /* 1 = never try user/net namespaces        */
    int no_helper;         /* 1 = exec self_exe itself, not the small
                              failproofai-sandbox image found beside it */
    int no_zygote;         /* 1 = exec every child instead of forking it
                              from the zygote (jail.h): slower; for one-shot
                              CLI evaluations and comparisons            */
    const char *test_mode; /* TESTS ONLY: "sleep", "open", ... makes every
                              child run jail_child.c's --test-<mode>
                              behaviour instead of the interpreter      */
} sbx_config;

/* Jail layers this machine provides (detected once, at pool creation). */
typedef struct {
    int seccomp, no_new_privs, rlimits; /* required: pool creation fails without */
    int user_ns, net_ns;                /* optional */
    int unprivileged;                   /* children never run as root (given up: uid/gid 65534) */
    int cap_bounding_empty;             /* children's capability bounding set is empty (needs root
                                           or a user namespace: best effort otherwise) */
    int zygote;                         /* 1 = children are forked from the zygote (else exec'd) */
} sbx_layers;

/* NULL on failure, with e (common/err.h) filled: code SBX_JAIL_FAILURE, name
 * "sandbox_unavailable" (the jail cannot be set up on this machine, or the
 * child image is missing). */
sbx_pool *sbx_pool_new(const sbx_config *cfg, fps_err *e);
void sbx_pool_free(sbx_pool *pool);
sbx_layers sbx_pool_layers(const sbx_pool *pool);
/* The layers and how children are made, for /v1/status: {"seccomp",
 * "no_new_privs", "rlimits", "user_ns", "net_ns", "unprivileged",
 * "cap_bounding_empty", "zygote" (booleans),
 * "children_started", "children_forked"}. New reference. */
json_t *sbx_pool_jail_json(sbx_pool *pool);
/* Children currently running (for /v1/status and metrics). */
int sbx_pool_active(const sbx_pool *pool);

/* A transcript prepared once per assignment and shared read-only by every
 * evaluation on it (a sealed memfd holding its session image, simg.h),
 * owned by its creator, who frees it with sbx_image_release after the
 * evaluations that borrow it have returned. sbx_image_new builds the
 * image from the transcript's JSON text (simg_build_text with `flags`, the
 * one builder) and adopts it; sbx_image_adopt takes an image built from the transcript's bytes
 * (simg_build_text: the ingest path), owning and freeing `simg` also on
 * failure. NULL on failure with e filled: the image's own errors (simg.h:
 * SIMG_EINVALID, SIMG_ETOO_LARGE), or SBX_JAIL_FAILURE ("sandbox_error") when
 * the memfd cannot be made. */
sbx_image *sbx_image_new(const char *json, size_t len, const char *assignment_id, unsigned flags,
                         fps_err *e);
sbx_image *sbx_image_adopt(void *simg, size_t len, fps_err *e);
/* Another reference to `img` (returned), for an owner that may outlive its
 * creator's (the recent-transcript ring): each reference is released with
 * sbx_image_release; the memfd closes with the last. Thread-safe. */
sbx_image *sbx_image_ref(sbx_image *img);
/* The image's bytes (its memfd's size). */
size_t sbx_image_len(const sbx_image *img);
void sbx_image_release(sbx_image *img);

typedef enum {
    SBX_OK = 0,       /* outcome.json holds the interpreter's outcome line (any "ok")  */
    SBX_TIMEOUT,      /* deadline (incl. waiting for a slot), CPU or memory limit hit   */
    SBX_OUTPUT,       /* the child wrote more than 1 MiB: killed                        */
    SBX_CANCELLED,    /* *cancel became non-zero: killed                                */
    SBX_JAIL_FAILURE, /* the child could not be jailed or died abnormally: fail closed  */
} sbx_status;

typedef struct {
    lang_kind kind;
    const char *source;
    size_t source_len;
    const char *eval_key; /* primary result key (evaluator kind)      */
    double timeout_s;     /* clamped to (0, 60]; <= 0 means 30        */
    sbx_image *image;     /* borrowed; may be NULL (no session)       */
    atomic_int *cancel;   /* borrowed; may be NULL; non-zero kills    */
    int playground;       /* 1: an operator's /v1/evaluate request: its
                             own slot budget, after any waiting worker */
    double budget_s;      /* > 0: waiting for a slot is bounded by this
                             (a lease), not by timeout_s, and the run by
                             timeout_s and what is left of it; out->limit
                             then says which bound ended it: "slot" (no
                             slot within the budget), "budget" (cut by
                             it while running) or "timeout" (its own)  */
    int background;       /* 1: background work (a backtest): under a
                             gate (sbx_pool_set_gate) it yields to live
                             work and may be stopped and re-run        */
} sbx_request;

typedef struct {
    sbx_status status;
    json_t *json;           /* owned: the outcome object when SBX_OK    */
    char detail[256];       /* human-readable reason for non-OK statuses */
    double wait_ms, run_ms; /* time waiting for a slot, time running    */
    /* for SBX_TIMEOUT / SBX_OUTPUT, the bound that was hit: "timeout" |
     * "memory" | "output" (else ""). */
    char limit[16];
    char *line; /* owned: SBX_OK only, the child's outcome text
                   exactly as the interpreter wrote it (no
                   newline); json is its parse               */
    /* What the evaluating process used, when known (a session's
     * evaluations, from its evaluator's report; else 0): */
    int pid;                               /* the process that evaluated                  */
    int has_stats;                         /* steps and alloc_bytes are set (lang_stats)  */
    unsigned long long steps, alloc_bytes; /* interpreter steps; bytes
                                              allocated from its heap        */
    long peak_rss_kb;                      /* its peak resident set                       */
    long cpu_us;                           /* its CPU time, user + system                 */
    long minflt;                           /* its minor page faults                       */
    int reruns; /* times it was stopped by the gate and run again (sbx_pool_set_gate) */
} sbx_outcome;

/* Runs one evaluation in a fresh jailed child. Always fills `out` (the
 * caller calls sbx_outcome_free). */
void sbx_eval(sbx_pool *pool, const sbx_request *req, sbx_outcome *out);
void sbx_outcome_free(sbx_outcome *out);

/* ---- compile checks, budgets, outcome mapping ---- */

/* Like sbx_eval, but the child only runs lang_check (parse + source
 * checks; req->image is not sent): the outcome is {"ok": true} or the
 * compile outcome {"ok": false, "stage": "compile", "message": ...}. */
void sbx_check(sbx_pool *pool, const sbx_request *req, sbx_outcome *out);

/* The budget rule of docs/LANGUAGE.md: <= 0 (or NaN) -> 30 s, capped at 60 s. */
double sbx_clamp_timeout(double timeout_s);

/* How an evaluation ended, in the jail's own terms (mapping them to run
 * statuses is sidecar/evaluation/'s business, never the jail's):
 *   SBX_END_OK        the interpreter's outcome has "ok": true
 *   SBX_END_COMPILE   the source was rejected; *detail: the reason
 *   SBX_END_RUNTIME   the evaluation raised; *detail: the exception's type
 *   SBX_END_LIMIT     a bound ended it; *detail: which one ("timeout",
 *                     "memory", "steps", "output", "slot", "budget"),
 *                     the interpreter's own limit outcome or the jail's
 *   SBX_END_CANCELLED *cancel was set
 *   SBX_END_CRASH     the child failed or died (*detail: what happened),
 *                     or answered an object of unknown stage (*detail "")
 * *detail (may be NULL) is borrowed from `out`; never NULL itself. */
typedef enum {
    SBX_END_OK,
    SBX_END_COMPILE,
    SBX_END_RUNTIME,
    SBX_END_LIMIT,
    SBX_END_CANCELLED,
    SBX_END_CRASH,
} sbx_end;
sbx_end sbx_outcome_end(const sbx_outcome *out, const char **detail);

/* The outcome as one line of docs/LANGUAGE.md's `eval` format (no newline):
 * the interpreter's object for SBX_OK, {"ok": false, "stage": "limit",
 * "error_type": "timeout"|"memory"|"output"} for the jail's bounds,
 * {"ok": false, "stage": "jail", "message": ...} for a jail failure and
 * {"ok": false, "stage": "cancelled"} when cancelled. malloc'd. */
char *sbx_outcome_line(const sbx_outcome *out);

/* ---- batches: the managed evaluations of one session ---- */

/* A session serves the evaluations of one transcript (one assignment, one
 * backtested session, the lines of `eval --batch` on one transcript) one
 * after another, in one jailed child of its own, its evaluator (jail.h,
 * jail_evaluator.c), which maps and validates the session's image once and
 * evaluates request after request, keeping what it faulted in (the image
 * pages it read, the collector's heap). Each evaluation gets exactly the
 * outcome, budgets (steps, memory, its own wall clock, enforced by the
 * parent) and fresh state it would get from sbx_eval alone: no value,
 * interned string, cache or string-hash key of one is visible to the next.
 * A limit or a crash in one evaluation is that evaluation's outcome; the
 * ones after it are served by a fresh child, handed the image again. Two
 * sessions never share a child, and a child never holds the image of
 * another session.
 *
 * Each evaluation waits for a slot (max_sandboxes) as sbx_eval does; an
 * evaluator between evaluations holds no slot. A deadline, cancellation,
 * output overflow or anything the evaluator did not report cleanly kills
 * it; one that retires (a limit, a heap grown large: jail.h,
 * JAIL_EVALUATOR_*) exits; either way the next evaluation gets a fresh one.
 * out->pid is the evaluator's pid, the same for consecutive evaluations it
 * served; out->peak_rss_kb the peak of this evaluation (its high-water
 * mark is reset before each: it counts the pages the evaluator kept
 * resident from the ones before), out->cpu_us and out->minflt what it used
 * since the evaluation before.
 *
 * `image` is borrowed (may be NULL: no session data) and must outlive the
 * session; a request's own `image` field is ignored (the session's is
 * used). Not thread-safe: one thread drives a session. sbx_session_open
 * returns NULL only when out of memory; it hands the image to a pre-started
 * child when one is idle, else a child is taken at the first evaluation; a
 * failure to get one is that evaluation's SBX_JAIL_FAILURE outcome. */
typedef struct sbx_session sbx_session;
sbx_session *sbx_session_open(sbx_pool *pool, sbx_image *image);
/* One evaluation of the session (sbx_eval's contract: always fills `out`). */
void sbx_session_eval(sbx_session *s, const sbx_request *req, sbx_outcome *out);
/* Ends the session (its child, if any, is killed and reaped). NULL: no-op. */
void sbx_session_close(sbx_session *s);
/* Keeps the session's evaluator on CPU `cpu` only (< 0: wherever the
 * scheduler puts it, the default): the one it has now at once, each fresh
 * one as it is taken, before its first request. The caller's own threads are its business. Set by
 * this process on the child (sched_setaffinity); the jail's filters allow no new call. Best effort:
 * a child it cannot pin runs unpinned. */
void sbx_session_set_cpu(sbx_session *s, int cpu);
/* The session's evaluator's pid right now, or -1 when it has none (tests). */
int sbx_session_pid(const sbx_session *s);
/* The n requests on one image, in order, as one session: outs[i] is what
 * sbx_eval(reqs[i]) gives alone. The caller frees each outs[i]. */
void sbx_eval_batch(sbx_pool *pool, sbx_image *image, const sbx_request *reqs, size_t n,
                    sbx_outcome *outs);

/* ---- the memory budget's gate (optional; the daemon sets one) ----
 *
 * With a gate, every evaluation (sbx_eval, sbx_check, sbx_session_eval) is
 * admitted by gate->enter before it waits for a slot and let go by
 * gate->leave after its run; its deadline starts once it is admitted
 * (out->wait_ms counts both waits). While its child runs, the pool asks
 * gate->near every tick (CANCEL_TICK_MS); only while that says the tree is
 * at or near its budget does it read the child's anonymous resident set
 * (/proc/<pid>/statm, resident less shared) and hand it to gate->sample. A child that
 * gate->sample (or a set ticket.stop) says to stop is killed, let go, and
 * its evaluation is run again from the start, admitted anew with
 * ticket.need set to what it was seen to use: the caller sees only the
 * outcome of the run that completed (out->reruns counts the others). The
 * class says how an evaluation may be admitted: */
typedef enum {
    SBX_GATE_WAIT = 0,   /* live work whose lease is kept meanwhile: waits for room */
    SBX_GATE_NOWAIT,     /* live work bound by a lease (budget_s > 0): counted, never waits,
                            never stopped */
    SBX_GATE_PLAYGROUND, /* an operator's request (req->playground, not background): waits
                            briefly, else refused */
    SBX_GATE_BACKGROUND, /* req->background (whatever its playground slot priority): waits
                            while live work waits, and is stopped when live work waits */
} sbx_gate_class;

typedef struct {
    sbx_gate_class cls; /* set by the pool                                    */
    int reruns;         /* set by the pool: how often it was stopped so far   */
    uint64_t need;      /* set by the pool: bytes it was seen to use when last
                           stopped (0 on the first run)                       */
    uint64_t reserved;  /* the gate's: what it holds for this evaluation      */
    uint64_t excess;    /* the gate's: last sample above `reserved`           */
    atomic_int stop;    /* the gate sets it to have the child stopped now     */
    void *link[2];      /* the gate's list links                              */
} sbx_ticket;

typedef struct {
    void *ud;
    /* 0: admitted; 1: refused for want of room (the evaluation ends SBX_TIMEOUT with limit
     * "memory_budget", nothing run); -3: *cancel was set while waiting (may be NULL). */
    int (*enter)(void *ud, sbx_ticket *t, atomic_int *cancel);
    void (*leave)(void *ud, sbx_ticket *t);
    /* 1 while running children's memory should be sampled */
    int (*near)(void *ud);
    /* the child uses `bytes`: 1 = stop it (it is run again later) */
    int (*sample)(void *ud, sbx_ticket *t, uint64_t bytes);
    /* > 0: the interpreter's heap is bounded as if the children's memory
     * limit were this many bytes (when below their own): what the budget
     * can hold of one sandbox at most */
    uint64_t child_cap;
} sbx_gate;

/* Sets the pool's gate (copied; ud borrowed and outliving the pool's
 * evaluations), or clears it (NULL). An evaluation keeps the gate it began
 * with: one cleared while it runs still lets it go. Thread-safe. */
void sbx_pool_set_gate(sbx_pool *pool, const sbx_gate *gate);

/* Counters since pool creation (tests, metrics). */
typedef struct {
    unsigned long spawned; /* children created (pre-started or on demand)  */
    unsigned long forked;  /* of those, forked by the zygote               */
    unsigned long zygotes; /* zygotes started (1 unless one was lost)      */
    unsigned long started; /* evaluations handed to a child                */
    unsigned long reaped;  /* children waited for                          */
    unsigned long idle;    /* pre-started children waiting right now       */
    unsigned long holders; /* of the children, those that served a session */
    unsigned long reruns;  /* evaluations stopped by the gate and run again */
    unsigned long sweeps;  /* the reaper's idle looks for lost children     */
} sbx_stats;
sbx_stats sbx_pool_stats(sbx_pool *pool);

/* The zygote's pid, or -1 when none is running (tests, status). */
int sbx_pool_zygote_pid(sbx_pool *pool);

/* Pids of the children running an evaluation right now (tests observe the
 * jail from outside through /proc/<pid>). Returns how many were written. */
int sbx_pool_running_pids(sbx_pool *pool, int *pids, int cap);

/* Pids of the pre-started children waiting right now (tests). Returns how
 * many were written. */
int sbx_pool_idle_pids(sbx_pool *pool, int *pids, int cap);

#endif
