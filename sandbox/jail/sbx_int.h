/* sandbox/jail/sbx_int: what the parent side of the jail's files share (not
 * part of sbx.h): the pool and image structures, the child handle, the clock
 * helpers, and the functions one file of the jail calls in another.
 *
 *   sbx_image.c    session images as sealed memfds
 *   sbx_spawn.c    exec'd and zygote-forked children, the refill and reaper threads
 *   sbx_io.c       the request hand-off and the bounded outcome read-back
 *   sbx_pool.c     the pool: probe, create, free, stats
 *   sbx_eval.c     one evaluation: slot, child, deadline, outcome
 *   sbx_outcome.c  how an outcome ended (sbx_end) and its one-line form
 *   sbx_session.c  sessions and batches: an evaluator per session (jail.h),
 *                  its evaluations one after another
 *
 * Threading: any number of threads call sbx_eval; pool state is guarded by
 * pool->mu, the zygote's control socket by pool->zyg_mu. A refill thread
 * keeps `prestart` children forked, jailed and blocked on their request
 * socket, so an evaluation usually skips even the fork and the jail set-up.
 * A child serves one evaluation (sbx_eval) or one session (its evaluator,
 * sbx_session.c) and is always reaped by the thread that used it, the
 * reaper thread, or sbx_pool_free for idle ones. No child can fork (its
 * filter has no clone, its RLIMIT_NPROC is 0); still, every child leads its
 * own process group: a kill goes to the group and the pid, and reaping a
 * child also reaps any of its group orphaned to this process (as pid 1 of a
 * container, or a subreaper), so that a jail broken that far leaves nothing.
 * If the zygote is unavailable (disabled, or it died and cannot be
 * restarted) children are exec'd one by one, which is slower but the same
 * jail. */
#ifndef FPS_SBX_INT_H
#define FPS_SBX_INT_H
#include "sandbox/jail/sbx.h"

#include "sandbox/jail/jail.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <time.h>

/* How often a waiting/running evaluation looks at its cancel flag. */
#define CANCEL_TICK_MS 20
/* How often the reaper thread, while nothing is queued, looks for idle
 * children and a zygote that ended (sbx_reaper_main). */
#define IDLE_CHECK_MS 1000
/* Longest a pre-start waits for running evaluations (sbx_refill_main). */
#define REFILL_DEFER_MS 5
/* How long the reaper lets finished children gather (sbx_reaper_main). */
#define REAP_BATCH_MS 10
/* How long a queued child that was not killed may take to exit before it is. */
#define REAP_GRACE_MS 1000
/* The outcome buffer's first size (sbx_read_outcome). */
#define OUTCOME_BUF_MIN 4096

struct sbx_image {
    int fd; /* sealed memfd holding the simg bytes */
    size_t len;
    atomic_int refs; /* sbx_image_ref / sbx_image_release */
};

typedef struct {
    pid_t pid;
    int sock; /* parent end of the request socket */
    int out;  /* read end of the outcome pipe     */
} child_t;

struct sbx_pool {
    sbx_config cfg;
    char exe[PATH_MAX];
    char mem_arg[24];
    char *argv[10];  /* an exec'd child's argv                      */
    char *zargv[11]; /* the zygote's: argv + --zygote               */
    sbx_layers layers;
    int devnull;

    /* The zygote (jail.h). zyg_fd < 0: none running; a restart is tried
     * at the next fork once the clock passes zyg_retry_at. */
    pthread_mutex_t zyg_mu;
    int zyg_fd;
    pid_t zyg_pid;
    double zyg_retry_at;

    pthread_mutex_t mu;
    pthread_cond_t slot_cv;   /* a slot was released           (CLOCK_MONOTONIC) */
    pthread_cond_t refill_cv; /* an idle child was taken / stop (CLOCK_MONOTONIC) */
    int busy;                 /* slots in use                                    */
    int playground_busy;      /* of those, held by playground requests          */
    int worker_waiting;       /* worker requests waiting for a slot (go first)   */
    child_t *idle;            /* pre-started children, waiting                   */
    int nidle, idle_target;
    pid_t *running; /* max_sandboxes entries, 0 = free                 */
    int stopping;
    pthread_t refill;
    int refill_started;

    /* Every child made (the zygote too) and not yet waited for: the
     * reaper's sweep for lost children (sbx_spawn.c) never takes one of
     * these, which have an owner that waits for it in its own time (a
     * session's evaluator, between evaluations, until the next). own_mu is a
     * leaf lock: nothing else is taken while it is held. */
    pthread_mutex_t own_mu;
    pid_t *owned;
    int nowned, owned_cap;

    /* Background reaping of children whose exit status is not needed. */
    pid_t lost_suspect;     /* the reaper's last sweep saw this child exited */
    pthread_cond_t reap_cv; /* a pid was queued / stop */
    pid_t *reapq;
    int reap_len, reap_cap, reap_stop;
    pthread_t reaper;
    int reaper_started;

    atomic_int active;
    atomic_ulong spawned, forked, started, reaped, zygotes, holders, reruns, sweeps;

    sbx_gate gate; /* under mu: the memory budget's (sbx_pool_set_gate); enter NULL: none */
};

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline struct timespec abs_after_ms(double ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(ms * 1e6);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

/* RD_STOP: the gate had the child stopped (sbx_watch_stop) */
typedef enum { RD_EOF, RD_LINE, RD_DEADLINE, RD_CANCEL, RD_OVERFLOW, RD_ERROR, RD_STOP } read_end;

/* ---- sbx_eval.c: the steps of one evaluation (sbx_session.c runs them too) ---- */

/* One evaluation's clock, slot and request header. */
typedef struct {
    double t0, t_run;       /* called, started running (slot held)          */
    double deadline;        /* the run's end                                 */
    double wait_deadline;   /* the slot wait's end                           */
    double budget_ms;       /* the clamped timeout                           */
    const char *cut;        /* which bound a deadline kill means             */
    int playground, handed; /* handed: a child was given the request         */
    int running;            /* a slot is held (sbx_run_end releases it)      */
    const char *src, *key;  /* borrowed from the request, never NULL         */
    jail_request hdr;       /* its header; for a session, flags and image_len
                               from the session's image                      */
    sbx_pool *pool;         /* the pool it runs in                           */
    sbx_gate gate;          /* the pool's gate when it began (copied)        */
    sbx_ticket *ticket;     /* the gate's admission (NULL: no gate)          */
    pid_t watch_pid;        /* the child whose memory the gate watches       */
} sbx_run;

/* Checks the request (sizes), is admitted by the pool's gate (if any, with
 * `ticket`, kept by the caller across re-runs), waits for a slot and fills
 * r. 0: the slot is held and the request is ready to send; 1: *out is final
 * (nothing held). *out is cleared first. */
int sbx_run_begin(sbx_pool *pool, const sbx_request *req, int check_only, sbx_run *r,
                  sbx_outcome *out, sbx_ticket *ticket);
/* 1 if the gate wants the run's child stopped now (its ticket's stop flag,
 * or, while the gate says the tree is near its budget, a sample of the
 * child's memory that gate->sample refuses); then ticket->need holds the
 * bytes last seen. r may be NULL, or have no ticket: 0. */
int sbx_watch_stop(sbx_run *r);
/* 1 if the read loops must wake every CANCEL_TICK_MS for r (a gate). */
static inline int sbx_watched(const sbx_run *r)
{
    return r != NULL && r->ticket != NULL;
}
/* Releases the slot sbx_run_begin took (after 0); sets out->run_ms if unset. */
void sbx_run_end(sbx_pool *pool, sbx_run *r, sbx_outcome *out);
/* Takes a pre-started child, or spawns one now. */
int sbx_take_child(sbx_pool *pool, child_t *c, fps_err *err);
/* Takes a pre-started child if one is idle: 0, else -1. */
int sbx_take_idle(sbx_pool *pool, child_t *c);
/* Lists (on) or unlists a pid in pool->running. */
void sbx_track_running(sbx_pool *pool, pid_t pid, int on);
void sbx_set_status(sbx_outcome *out, sbx_status st, const char *limit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 1 if buf[0..len) (or out->json, when already parsed from it) is a
 * well-formed outcome: then out->line is set and the status SBX_OK (or an
 * out-of-memory failure); 0 if not (out->json is cleared). */
int sbx_outcome_parse(sbx_outcome *out, const char *buf, size_t len);
/* The outcome of a read that ended otherwise than by EOF or a report. */
void sbx_outcome_from_read(sbx_outcome *out, read_end end, const sbx_run *r);
/* No usable outcome: what the wait status `st` (-1: it had to be killed
 * for not exiting) and the output buf[0..len) (len < the buffer's size;
 * altered) say. */
void sbx_outcome_from_exit(sbx_outcome *out, int st, char *buf, size_t len);

/* ---- sbx_spawn.c ---- */

/* Reaps the queued children in batches: woken by the first one queued, it
 * lets REAP_BATCH_MS more gather (killed, they are gone by then), then waits
 * for those. Under load that is one wake-up per batch instead of one or two
 * per evaluation; a zombie lingers about REAP_BATCH_MS. */
void *sbx_reaper_main(void *arg);

/* SIGKILL to a child's process group and to the child (still unreaped). */
void sbx_kill_child(pid_t pid);

/* exec's one child directly (no zygote). */
int sbx_exec_child(sbx_pool *pool, char **argv, child_t *c, fps_err *err);

/* Closes our ends and queues the child for the reaper thread (killing it
 * first if asked). Falls back to reaping here if the queue cannot grow. */
void sbx_reap_later(sbx_pool *pool, child_t *c, int kill_it);

/* Kills (if asked) and reaps one child; returns its wait status, or -1 if
 * it had to be killed for outliving `grace_ms`: without kill_it, a child
 * still running that long after its request socket is closed (a child
 * blocked reading it sees EOF) is killed. */
int sbx_reap_child(sbx_pool *pool, child_t *c, int kill_it, int grace_ms);

/* One new single-use child: forked by the zygote, or exec'd. */
int sbx_new_child(sbx_pool *pool, child_t *c, fps_err *err);

/* Starts the zygote and waits for its HELLO (zyg_mu held). 0 or -1. */
int sbx_zygote_start(sbx_pool *pool, fps_err *err);

/* Stops the zygote (zyg_mu held). Its children are ours, not its: they
 * are unaffected. */
void sbx_zygote_stop(sbx_pool *pool);

/* Keeps pool->idle_target children pre-started (the refill thread). */
void *sbx_refill_main(void *arg);

/* ---- sbx_io.c ---- */

/* Reads the child's outcome until EOF, the deadline, cancellation or more
 * than JAIL_MAX_OUTCOME bytes in all (or the gate stopping it, RD_STOP: `watch`, may be NULL),
 * appending at *buf + *len; with `line`, also stops (RD_LINE)
 * as soon as what was read ends in a newline (the child writes its outcome line in one write, then
 * exits: no need to wait for that). *buf (owned, *cap bytes, at least OUTCOME_BUF_MIN) grows as
 * it fills, to JAIL_MAX_OUTCOME + 1 bytes at most: an outcome is usually a few hundred bytes,
 * and a 1 MiB block per evaluation made malloc grow and trim the heap every time. */
read_end sbx_read_outcome(int fd, char **buf, size_t *cap, size_t *len, double deadline,
                          atomic_int *cancel, int line, sbx_run *watch);

/* Sends the request (header + image fd, source, key) to a child, in one
 * sendmsg when it fits the socket buffer, bounded by the deadline. Returns
 * 0, -1 on a dead child (EPIPE etc.), -2 deadline, -3 cancelled. */
int sbx_send_request(child_t *c, const jail_request *hdr, int img_fd, const char *src,
                     const char *key, double deadline, atomic_int *cancel);

#endif
