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
 *   sbx_session.c  sessions and batches: the evaluations of one transcript
 *
 * Threading: any number of threads call sbx_eval; pool state is guarded by
 * pool->mu, the zygote's control socket by pool->zyg_mu. A refill thread
 * keeps `prestart` children forked, jailed and blocked on their request
 * socket, so an evaluation usually skips even the fork and the jail set-up.
 * A child is used for exactly one evaluation and is always reaped by the
 * thread that used it, the reaper thread, or sbx_pool_free for idle ones.
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
/* Longest a pre-start waits for running evaluations (sbx_refill_main). */
#define REFILL_DEFER_MS 5
/* How long the reaper lets finished children gather (sbx_reaper_main). */
#define REAP_BATCH_MS 10
/* The outcome buffer's first size (sbx_read_outcome). */
#define OUTCOME_BUF_MIN 4096

struct sbx_image {
    int fd; /* sealed memfd holding the simg bytes */
    size_t len;
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

    /* Background reaping of children whose exit status is not needed. */
    pthread_cond_t reap_cv; /* a pid was queued / stop */
    pid_t *reapq;
    int reap_len, reap_cap, reap_stop;
    pthread_t reaper;
    int reaper_started;

    atomic_int active;
    atomic_ulong spawned, forked, started, reaped, zygotes;
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

typedef enum { RD_EOF, RD_LINE, RD_DEADLINE, RD_CANCEL, RD_OVERFLOW, RD_ERROR } read_end;

/* ---- sbx_spawn.c ---- */

/* Reaps the queued children in batches: woken by the first one queued, it
 * lets REAP_BATCH_MS more gather (killed, they are gone by then), then waits
 * for those. Under load that is one wake-up per batch instead of one or two
 * per evaluation; a zombie lingers about REAP_BATCH_MS. */
void *sbx_reaper_main(void *arg);

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
 * than JAIL_MAX_OUTCOME bytes in all, appending at *buf + *len; with `line`, also stops (RD_LINE)
 * as soon as what was read ends in a newline (the child writes its outcome line in one write, then
 * exits: no need to wait for that). *buf (owned, *cap bytes, at least OUTCOME_BUF_MIN) grows as
 * it fills, to JAIL_MAX_OUTCOME + 1 bytes at most: an outcome is usually a few hundred bytes,
 * and a 1 MiB block per evaluation made malloc grow and trim the heap every time. */
read_end sbx_read_outcome(int fd, char **buf, size_t *cap, size_t *len, double deadline,
                          atomic_int *cancel, int line);

/* Sends the request (header + image fd, source, key) to a child, in one
 * sendmsg when it fits the socket buffer, bounded by the deadline. Returns
 * 0, -1 on a dead child (EPIPE etc.), -2 deadline, -3 cancelled. */
int sbx_send_request(child_t *c, const jail_request *hdr, int img_fd, const char *src,
                     const char *key, double deadline, atomic_int *cancel);

#endif
