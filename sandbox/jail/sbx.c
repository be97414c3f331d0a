/* sandbox/jail/sbx: the parent side of the jail (sbx.h): the pool of sandbox
 * slots, the zygote that forks children (jail.h), pre-started single-use
 * children, session images as sealed memfds, one deadline per evaluation
 * (slot wait + run), the request hand-off, the bounded outcome read-back,
 * kills and reaping.
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
#include "sandbox/jail/sbx.h"

#include "common/log.h"
#include "common/strbuf.h"
#include "sandbox/jail/jail.h"
#include "sandbox/lang/simg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How often a waiting/running evaluation looks at its cancel flag. */
#define CANCEL_TICK_MS 20
/* Longest a pre-start waits for running evaluations (refill_main). */
#define REFILL_DEFER_MS 5
/* How long the reaper lets finished children gather (reaper_main). */
#define REAP_BATCH_MS 10
/* The outcome buffer's first size (read_outcome). */
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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct timespec abs_after_ms(double ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(ms * 1e6);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

double sbx_clamp_timeout(double t)
{
    if (!(t > 0)) return 30.0;
    return t > 60.0 ? 60.0 : t;
}

/* ---- images ---- */

sbx_image *sbx_image_new(const json_t *transcript, const char *assignment_id, fps_err *e)
{
    void *buf = NULL;
    size_t len = 0;
    if (simg_build(transcript, assignment_id, &buf, &len, e) != 0) return NULL;
    return sbx_image_adopt(buf, len, e);
}

sbx_image *sbx_image_adopt(void *simg, size_t len, fps_err *e)
{
    sbx_image *img = NULL;
    int fd = -1;
    if (simg == NULL || len == 0) {
        fps_err_set(e, SIMG_EINVALID, 0, "invalid_transcript", "session image is empty");
        goto fail;
    }
    fd = memfd_create("fps-session-image", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        fps_err_set(e, SBX_JAIL_FAILURE, 0, "sandbox_error", "memfd_create: %s", strerror(errno));
        goto fail;
    }
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, (char *)simg + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fps_err_set(e, SBX_JAIL_FAILURE, 0, "sandbox_error", "writing the session image: %s",
                        strerror(errno));
            goto fail;
        }
        off += (size_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        fps_err_set(e, SBX_JAIL_FAILURE, 0, "sandbox_error", "sealing the session image: %s",
                    strerror(errno));
        goto fail;
    }
    img = calloc(1, sizeof *img);
    if (img == NULL) {
        fps_err_set(e, SIMG_ETOO_LARGE, 0, "too_large", "out of memory");
        goto fail;
    }
    img->fd = fd;
    img->len = len;
    free(simg);
    return img;
fail:
    if (fd >= 0) close(fd);
    free(simg);
    return NULL;
}

void sbx_image_release(sbx_image *img)
{
    if (img == NULL) return;
    close(img->fd);
    free(img);
}

/* ---- spawning ---- */

static void close_child(child_t *c)
{
    if (c->sock >= 0) close(c->sock);
    if (c->out >= 0) close(c->out);
    c->sock = c->out = -1;
}

/* Kills (if asked) and reaps one child; returns its wait status, or -1 if
 * it had to be killed for outliving `grace_ms`: without kill_it, a child
 * still running that long after its request socket is closed (a child
 * blocked reading it sees EOF) is killed. */
static int reap_child(sbx_pool *pool, child_t *c, int kill_it, int grace_ms)
{
    int lingered = 0;
    int st = 0;
    if (kill_it) kill(c->pid, SIGKILL);
    close_child(c);
    double until = now_ms() + grace_ms;
    for (;;) {
        pid_t r = waitpid(c->pid, &st, kill_it ? 0 : WNOHANG);
        if (r == c->pid || (r < 0 && errno != EINTR)) break;
        if (r == 0) {
            if (now_ms() >= until) {
                kill(c->pid, SIGKILL);
                kill_it = lingered = 1;
                continue;
            }
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_fetch_add(&pool->reaped, 1);
    return lingered ? -1 : st;
}

/* Closes our ends and queues the child for the reaper thread (killing it
 * first if asked). Falls back to reaping here if the queue cannot grow. */
static void reap_later(sbx_pool *pool, child_t *c, int kill_it)
{
    if (kill_it) kill(c->pid, SIGKILL);
    close_child(c);
    pthread_mutex_lock(&pool->mu);
    if (pool->reaper_started && pool->reap_len == pool->reap_cap) {
        int ncap = pool->reap_cap ? pool->reap_cap * 2 : 16;
        pid_t *nq = realloc(pool->reapq, (size_t)ncap * sizeof *nq);
        if (nq != NULL) {
            pool->reapq = nq;
            pool->reap_cap = ncap;
        }
    }
    if (pool->reaper_started && pool->reap_len < pool->reap_cap) {
        pool->reapq[pool->reap_len++] = c->pid;
        /* Only the first of a batch wakes the reaper (see reaper_main). */
        if (pool->reap_len == 1) pthread_cond_signal(&pool->reap_cv);
        pthread_mutex_unlock(&pool->mu);
        return;
    }
    pthread_mutex_unlock(&pool->mu);
    reap_child(pool, c, 0, 1000);
}

/* Reaps the queued children in batches: woken by the first one queued, it
 * lets REAP_BATCH_MS more gather (killed, they are gone by then), then waits
 * for those. Under load that is one wake-up per batch instead of one or two
 * per evaluation; a zombie lingers about REAP_BATCH_MS. */
static void *reaper_main(void *arg)
{
    sbx_pool *pool = arg;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (pool->reap_len == 0 && !pool->reap_stop)
            pthread_cond_wait(&pool->reap_cv, &pool->mu);
        if (pool->reap_len == 0) break;
        struct timespec until = abs_after_ms(REAP_BATCH_MS);
        while (!pool->reap_stop &&
               pthread_cond_timedwait(&pool->reap_cv, &pool->mu, &until) != ETIMEDOUT) {
        }
        /* This batch: the first n (only this thread removes; others
         * append, possibly moving the queue). */
        int n = pool->reap_len;
        for (int i = 0; i < n; i++) {
            pid_t pid = pool->reapq[i];
            pthread_mutex_unlock(&pool->mu);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
            }
            atomic_fetch_add(&pool->reaped, 1);
            pthread_mutex_lock(&pool->mu);
        }
        memmove(pool->reapq, pool->reapq + n, (size_t)(pool->reap_len - n) * sizeof(pid_t));
        pool->reap_len -= n;
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

/* exec's one image of the sandbox binary with `argv`: empty environment,
 * fd 0 = in0, fd 1 = in1, fd 2 = /dev/null (stderr in sanitizer builds),
 * nothing else; its own process group; default signal dispositions. */
static int spawn_image(sbx_pool *pool, char **argv, int in0, int in1, pid_t *pid, fps_err *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = -1;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "spawning the sandbox: out of memory");
        return -1;
    }
    if (posix_spawnattr_init(&attr) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "spawning the sandbox: out of memory");
        return -1;
    }
    posix_spawn_file_actions_adddup2(&fa, in0, 0);
    posix_spawn_file_actions_adddup2(&fa, in1, 1);
#ifndef FPS_SANITIZE
    posix_spawn_file_actions_adddup2(&fa, pool->devnull, 2);
#endif
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETPGROUP);
#ifdef FPS_SANITIZE
    /* The sanitizer runtime's options are the only environment a child
     * gets: no leak scan (it would need ptrace), NULL from a failed malloc
     * so the interpreter reports a memory limit. */
    char *envp[] = {"ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1", NULL};
#else
    char *envp[] = {NULL};
#endif
    int e = posix_spawn(pid, pool->exe, &fa, &attr, argv, envp);
    if (e != 0)
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable", "spawning the sandbox: %s",
                    strerror(e));
    else
        rc = 0;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc;
}

/* The channels of one child: a request socket and an outcome pipe. On
 * success c->sock / c->out are the parent's ends and ends[0] / ends[1] the
 * child's (the caller closes those once the child has them). */
static int make_channels(child_t *c, int ends[2], fps_err *err)
{
    int sv[2], pp[2];
    c->pid = -1;
    c->sock = c->out = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) goto fail;
    if (pipe2(pp, O_CLOEXEC) != 0) {
        close(sv[0]);
        close(sv[1]);
        goto fail;
    }
    c->sock = sv[0];
    c->out = pp[0];
    ends[0] = sv[1];
    ends[1] = pp[1];
    return 0;
fail:
    fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable", "sandbox pipes: %s",
                strerror(errno));
    return -1;
}

/* exec's one child directly (no zygote). */
static int exec_child(sbx_pool *pool, char **argv, child_t *c, fps_err *err)
{
    int ends[2];
    if (make_channels(c, ends, err) != 0) return -1;
    pid_t pid;
    int rc = spawn_image(pool, argv, ends[0], ends[1], &pid, err);
    close(ends[0]);
    close(ends[1]);
    if (rc != 0) {
        close_child(c);
        return -1;
    }
    atomic_fetch_add(&pool->spawned, 1);
    c->pid = pid;
    return 0;
}

/* ---- the zygote ---- */

/* Waits up to `ms` for one control message from the zygote. 0 or -1. */
static int zygote_recv(int fd, jail_zygote_msg *m, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    double deadline = now_ms() + ms;
    for (;;) {
        int left = (int)ceil(deadline - now_ms());
        if (left <= 0) return -1;
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t n = recv(fd, m, sizeof *m, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        return n == (ssize_t)sizeof *m && m->magic == JAIL_ZYG_MAGIC ? 0 : -1;
    }
}

/* Stops the zygote (zyg_mu held). Its children are ours, not its: they
 * are unaffected. */
static void zygote_stop(sbx_pool *pool)
{
    if (pool->zyg_fd < 0) return;
    close(pool->zyg_fd);
    pool->zyg_fd = -1;
    kill(pool->zyg_pid, SIGKILL);
    while (waitpid(pool->zyg_pid, NULL, 0) < 0 && errno == EINTR) {
    }
    pool->zyg_pid = -1;
}

/* Starts the zygote and waits for its HELLO (zyg_mu held). 0 or -1. */
static int zygote_start(sbx_pool *pool, fps_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable", "sandbox zygote socket: %s",
                    strerror(errno));
        return -1;
    }
    pid_t pid;
    int rc = spawn_image(pool, pool->zargv, sv[1], pool->devnull, &pid, err);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        return -1;
    }
    pool->zyg_fd = sv[0];
    pool->zyg_pid = pid;
    jail_zygote_msg m;
    if (zygote_recv(sv[0], &m, 10000) != 0 || m.op != JAIL_ZYG_HELLO || m.value != 0) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox zygote did not start%s%s", m.value < 0 ? ": " : "",
                    m.value < 0 ? strerror(-m.value) : "");
        zygote_stop(pool);
        return -1;
    }
    atomic_fetch_add(&pool->zygotes, 1);
    return 0;
}

/* Has the zygote fork one child. 0 = done; -1 = no zygote available (the
 * caller exec's the child instead; err says why). */
static int zygote_fork(sbx_pool *pool, child_t *c, fps_err *err)
{
    int ends[2];
    if (make_channels(c, ends, err) != 0) return -1;
    int rc = -1;
    pthread_mutex_lock(&pool->zyg_mu);
    if (pool->zyg_fd < 0) {
        if (now_ms() < pool->zyg_retry_at) {
            fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                        "the sandbox zygote is restarting");
            goto done;
        }
        if (zygote_start(pool, err) != 0) {
            pool->zyg_retry_at = now_ms() + 5000;
            log_warn("sandbox zygote unavailable; exec'ing each child", LOG_S("error", err->msg));
            goto done;
        }
        log_info("sandbox zygote started", LOG_I("pid", pool->zyg_pid));
    }
    jail_zygote_msg m;
    memset(&m, 0, sizeof m);
    m.magic = JAIL_ZYG_MAGIC;
    m.op = JAIL_ZYG_FORK;
    struct iovec iov = {&m, sizeof m};
    ssize_t n = jail_send_fds(pool->zyg_fd, &iov, 1, ends, 2, 0);
    if (n != (ssize_t)sizeof m || zygote_recv(pool->zyg_fd, &m, 5000) != 0 ||
        m.op != JAIL_ZYG_FORKED) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox zygote stopped answering");
        log_warn("sandbox zygote lost; restarting it", LOG_I("pid", pool->zyg_pid));
        zygote_stop(pool);
        goto done;
    }
    if (m.pid <= 0) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox zygote could not fork: %s",
                    strerror(m.value < 0 ? -m.value : EIO));
        goto done;
    }
    c->pid = m.pid;
    atomic_fetch_add(&pool->spawned, 1);
    atomic_fetch_add(&pool->forked, 1);
    rc = 0;
done:
    pthread_mutex_unlock(&pool->zyg_mu);
    close(ends[0]);
    close(ends[1]);
    if (rc != 0) close_child(c);
    return rc;
}

/* One new single-use child: forked by the zygote, or exec'd. */
static int new_child(sbx_pool *pool, child_t *c, fps_err *err)
{
    if (!pool->cfg.no_zygote && zygote_fork(pool, c, err) == 0) return 0;
    return exec_child(pool, pool->argv, c, err);
}

static void *refill_main(void *arg)
{
    sbx_pool *pool = arg;
    double defer_until = 0;
    pthread_mutex_lock(&pool->mu);
    while (!pool->stopping) {
        if (pool->nidle >= pool->idle_target) {
            pthread_cond_wait(&pool->refill_cv, &pool->mu);
            continue;
        }
        /* While evaluations run and enough children are waiting to take
         * over from them, starting another (a fork and its layers: about
         * the CPU of a small evaluation) would only compete with them for the
         * cores: defer it until they are done, or for REFILL_DEFER_MS at
         * most. Under sustained load (fewer idle children than running
         * evaluations) refill at once. */
        if (pool->busy > 0 && pool->nidle >= pool->busy) {
            double now = now_ms();
            if (defer_until == 0) defer_until = now + REFILL_DEFER_MS;
            if (now < defer_until) {
                struct timespec ts = abs_after_ms(defer_until - now);
                pthread_cond_timedwait(&pool->refill_cv, &pool->mu, &ts);
                continue;
            }
        }
        defer_until = 0;
        pthread_mutex_unlock(&pool->mu);
        child_t c;
        fps_err err;
        int rc = new_child(pool, &c, &err);
        pthread_mutex_lock(&pool->mu);
        if (rc != 0) {
            log_warn("sandbox pre-start failed", LOG_S("error", err.msg));
            struct timespec ts = abs_after_ms(1000);
            pthread_cond_timedwait(&pool->refill_cv, &pool->mu, &ts);
            continue;
        }
        if (pool->stopping) {
            pthread_mutex_unlock(&pool->mu);
            reap_child(pool, &c, 1, 0);
            pthread_mutex_lock(&pool->mu);
            break;
        }
        pool->idle[pool->nidle++] = c;
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

/* ---- reading a child's output ---- */

typedef enum { RD_EOF, RD_LINE, RD_DEADLINE, RD_CANCEL, RD_OVERFLOW, RD_ERROR } read_end;

/* Reads the child's outcome until EOF, the deadline, cancellation or more
 * than JAIL_MAX_OUTCOME bytes in all, appending at *buf + *len; with `line`, also stops (RD_LINE)
 * as soon as what was read ends in a newline (the child writes its outcome line in one write, then
 * exits: no need to wait for that). *buf (owned, *cap bytes, at least OUTCOME_BUF_MIN) grows as
 * it fills, to JAIL_MAX_OUTCOME + 1 bytes at most: an outcome is usually a few hundred bytes,
 * and a 1 MiB block per evaluation made malloc grow and trim the heap every time. */
static read_end read_outcome(int fd, char **buf, size_t *cap, size_t *len, double deadline,
                             atomic_int *cancel, int line)
{
    for (;;) {
        if (cancel != NULL && atomic_load(cancel)) return RD_CANCEL;
        double left = deadline - now_ms();
        if (left <= 0) return RD_DEADLINE;
        int wait = left > CANCEL_TICK_MS && cancel != NULL ? CANCEL_TICK_MS : (int)ceil(left);
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, wait);
        if (r < 0 && errno != EINTR) return RD_ERROR;
        if (r <= 0) continue;
        if (*len == *cap) {
            size_t ncap = *cap * 2 < JAIL_MAX_OUTCOME + 1 ? *cap * 2 : JAIL_MAX_OUTCOME + 1;
            char *nb = realloc(*buf, ncap);
            if (nb == NULL) return RD_ERROR;
            *buf = nb;
            *cap = ncap;
        }
        ssize_t n = read(fd, *buf + *len, *cap - *len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return RD_ERROR;
        }
        if (n == 0) return RD_EOF;
        *len += (size_t)n;
        if (*len > JAIL_MAX_OUTCOME) return RD_OVERFLOW;
        if (line && (*buf)[*len - 1] == '\n') return RD_LINE;
    }
}

/* Sends the request (header + image fd, source, key) to a child, in one
 * sendmsg when it fits the socket buffer, bounded by the deadline. Returns
 * 0, -1 on a dead child (EPIPE etc.), -2 deadline, -3 cancelled. */
static int send_request(child_t *c, const jail_request *hdr, int img_fd, const char *src,
                        const char *key, double deadline, atomic_int *cancel)
{
    struct iovec iov[3] = {{(void *)hdr, sizeof *hdr},
                           {(void *)src, (size_t)hdr->source_len},
                           {(void *)key, hdr->key_len}};
    /* The first call always carries at least the header (the socket buffer
     * is empty); whatever did not fit follows as the child reads. */
    ssize_t n = jail_send_fds(c->sock, iov, 3, &img_fd, img_fd >= 0 ? 1 : 0, MSG_DONTWAIT);
    if (n < (ssize_t)sizeof *hdr) return -1;
    size_t sent = (size_t)n - sizeof *hdr;
    for (int i = 1; i < 3; i++) {
        size_t off = sent < iov[i].iov_len ? sent : iov[i].iov_len;
        sent -= off;
        while (off < iov[i].iov_len) {
            n = send(c->sock, (const char *)iov[i].iov_base + off, iov[i].iov_len - off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                off += (size_t)n;
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
            if (cancel != NULL && atomic_load(cancel)) return -3;
            double left = deadline - now_ms();
            if (left <= 0) return -2;
            struct pollfd p = {c->sock, POLLOUT, 0};
            (void)poll(&p, 1, left > CANCEL_TICK_MS ? CANCEL_TICK_MS : (int)ceil(left));
        }
    }
    return 0;
}

/* ---- pool ---- */

/* Runs the --probe child once: which layers this machine provides. */
static int probe_layers(sbx_pool *pool, fps_err *err)
{
    char *argv[8];
    int a = 0;
    argv[a++] = pool->exe;
    argv[a++] = SBX_CHILD_ARG;
    argv[a++] = "--memory-mb";
    argv[a++] = pool->mem_arg;
    if (!pool->cfg.no_namespaces) {
        argv[a++] = "--userns";
        argv[a++] = "--netns";
    }
    argv[a++] = "--probe";
    argv[a] = NULL;
    child_t c;
    if (exec_child(pool, argv, &c, err) != 0) return -1;
    close(c.sock);
    c.sock = -1;
    size_t cap = OUTCOME_BUF_MIN, len = 0;
    char *buf = malloc(cap);
    read_end end =
        buf ? read_outcome(c.out, &buf, &cap, &len, now_ms() + 10000, NULL, 0) : RD_ERROR;
    int st = reap_child(pool, &c, end != RD_EOF, 10000);
    int rc = -1;
    if (end != RD_EOF || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (buf != NULL) buf[len < 200 ? len : 200] = '\0';
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox cannot be installed on this machine%s%s", buf && len ? ": " : "",
                    buf && len ? buf : "");
        goto done;
    }
    json_error_t jerr;
    json_t *o = json_loadb(buf, len, 0, &jerr);
    if (o == NULL || !json_is_object(o)) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox probe answered garbage");
        json_decref(o);
        goto done;
    }
    pool->layers.seccomp = json_is_true(json_object_get(o, "seccomp")) ||
                           json_integer_value(json_object_get(o, "seccomp")) == 1;
    pool->layers.no_new_privs = json_integer_value(json_object_get(o, "no_new_privs")) == 1;
    pool->layers.rlimits = json_integer_value(json_object_get(o, "rlimits")) == 1;
    pool->layers.user_ns = json_integer_value(json_object_get(o, "user_ns")) == 1;
    pool->layers.net_ns = json_integer_value(json_object_get(o, "net_ns")) == 1;
    pool->layers.unprivileged = json_integer_value(json_object_get(o, "unprivileged")) == 1;
    pool->layers.cap_bounding_empty =
        json_integer_value(json_object_get(o, "cap_bounding_empty")) == 1;
    json_decref(o);
    if (!pool->layers.seccomp || !pool->layers.no_new_privs || !pool->layers.rlimits) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "a required sandbox layer is unavailable (seccomp %d, "
                    "no_new_privs %d, rlimits %d)",
                    pool->layers.seccomp, pool->layers.no_new_privs, pool->layers.rlimits);
        goto done;
    }
    rc = 0;
done:
    free(buf);
    return rc;
}

sbx_pool *sbx_pool_new(const sbx_config *cfg, fps_err *e)
{
    fps_err err = {0};
    sbx_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL) {
        fps_err_set(e, SBX_JAIL_FAILURE, 0, "sandbox_unavailable", "out of memory");
        return NULL;
    }
    pool->cfg = *cfg;
    if (pool->cfg.max_sandboxes <= 0) pool->cfg.max_sandboxes = 4;
    if (pool->cfg.max_sandboxes > 256) pool->cfg.max_sandboxes = 256;
    if (pool->cfg.playground_max <= 0) pool->cfg.playground_max = 1;
    if (pool->cfg.playground_max > pool->cfg.max_sandboxes)
        pool->cfg.playground_max = pool->cfg.max_sandboxes;
    if (pool->cfg.memory_mb <= 0) pool->cfg.memory_mb = 512;
    if (pool->cfg.memory_mb < 32) pool->cfg.memory_mb = 32;
    pool->idle_target = pool->cfg.prestart == 0  ? pool->cfg.max_sandboxes
                        : pool->cfg.prestart < 0 ? 0
                                                 : pool->cfg.prestart;
    if (pool->idle_target > 64) pool->idle_target = 64;
    pool->devnull = -1;
    pool->zyg_fd = -1;
    pool->zyg_pid = -1;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_mutex_init(&pool->zyg_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&pool->slot_cv, &ca);
    pthread_cond_init(&pool->refill_cv, &ca);
    pthread_cond_init(&pool->reap_cv, &ca);
    pthread_condattr_destroy(&ca);

    const char *exe = cfg->self_exe ? cfg->self_exe : "/proc/self/exe";
    /* Resolve once: /proc/self/exe of a test binary is not the sidecar. */
    if (realpath(exe, pool->exe) == NULL) {
        fps_err_set(&err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable", "sandbox binary %s: %s", exe,
                    strerror(errno));
        goto fail;
    }
    if (!cfg->no_helper) {
        /* Prefer the small child image installed beside the binary. */
        char helper[PATH_MAX + 32];
        const char *slash = strrchr(pool->exe, '/');
        int dir = slash ? (int)(slash - pool->exe) : 0;
        snprintf(helper, sizeof helper, "%.*s/failproofai-sandbox", dir, pool->exe);
        if (dir > 0 && strlen(helper) < sizeof pool->exe && access(helper, X_OK) == 0)
            snprintf(pool->exe, sizeof pool->exe, "%s", helper);
    }
    pool->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (pool->devnull < 0) {
        fps_err_set(&err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable", "/dev/null: %s",
                    strerror(errno));
        goto fail;
    }
    snprintf(pool->mem_arg, sizeof pool->mem_arg, "%ld", pool->cfg.memory_mb);
    pool->running = calloc((size_t)pool->cfg.max_sandboxes, sizeof *pool->running);
    pool->idle = calloc((size_t)pool->idle_target + 1, sizeof *pool->idle);
    if (pool->running == NULL || pool->idle == NULL) {
        fps_err_set(&err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable", "out of memory");
        goto fail;
    }
    if (probe_layers(pool, &err) != 0) goto fail;

    int a = 0;
    pool->argv[a++] = pool->exe;
    pool->argv[a++] = SBX_CHILD_ARG;
    pool->argv[a++] = "--memory-mb";
    pool->argv[a++] = pool->mem_arg;
    if (pool->layers.user_ns) pool->argv[a++] = "--userns";
    if (pool->layers.net_ns) pool->argv[a++] = "--netns";
    static char test_arg[64];
    if (cfg->test_mode != NULL) {
        snprintf(test_arg, sizeof test_arg, "--test-%s", cfg->test_mode);
        pool->argv[a++] = strdup(test_arg);
    }
    pool->argv[a] = NULL;
    for (int i = 0; i <= a; i++)
        pool->zargv[i] = pool->argv[i];
    pool->zargv[a] = "--zygote";
    pool->zargv[a + 1] = NULL;
    if (!pool->cfg.no_zygote) {
        fps_err zerr;
        pthread_mutex_lock(&pool->zyg_mu);
        if (zygote_start(pool, &zerr) != 0) {
            pool->zyg_retry_at = now_ms() + 5000;
            log_warn("sandbox zygote unavailable; exec'ing each child", LOG_S("error", zerr.msg));
        }
        pthread_mutex_unlock(&pool->zyg_mu);
    }
    pool->layers.zygote = pool->zyg_fd >= 0;

    if (pthread_create(&pool->reaper, NULL, reaper_main, pool) != 0) {
        fps_err_set(&err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "starting the sandbox reaper thread failed");
        goto fail;
    }
    pool->reaper_started = 1;
    if (pool->idle_target > 0) {
        if (pthread_create(&pool->refill, NULL, refill_main, pool) != 0) {
            fps_err_set(&err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                        "starting the sandbox refill thread failed");
            goto fail;
        }
        pool->refill_started = 1;
    }
    log_info("sandbox pool ready", LOG_S("child_image", pool->exe),
             LOG_I("max_sandboxes", pool->cfg.max_sandboxes),
             LOG_I("memory_mb", pool->cfg.memory_mb), LOG_I("prestart", pool->idle_target),
             LOG_I("seccomp", pool->layers.seccomp),
             LOG_I("no_new_privs", pool->layers.no_new_privs),
             LOG_I("rlimits", pool->layers.rlimits), LOG_I("user_ns", pool->layers.user_ns),
             LOG_I("net_ns", pool->layers.net_ns), LOG_I("unprivileged", pool->layers.unprivileged),
             LOG_I("cap_bounding_empty", pool->layers.cap_bounding_empty),
             LOG_I("zygote", pool->layers.zygote));
    return pool;
fail:
    *e = err;
    sbx_pool_free(pool);
    return NULL;
}

void sbx_pool_free(sbx_pool *pool)
{
    if (pool == NULL) return;
    pthread_mutex_lock(&pool->mu);
    pool->stopping = 1;
    pthread_cond_broadcast(&pool->refill_cv);
    pthread_mutex_unlock(&pool->mu);
    if (pool->refill_started) pthread_join(pool->refill, NULL);
    pthread_mutex_lock(&pool->zyg_mu);
    zygote_stop(pool);
    pthread_mutex_unlock(&pool->zyg_mu);
    /* Idle children exit on EOF; kill them anyway so none outlives us. */
    for (int i = 0; i < pool->nidle; i++)
        reap_child(pool, &pool->idle[i], 1, 0);
    /* The reaper drains its queue before it stops. */
    pthread_mutex_lock(&pool->mu);
    pool->reap_stop = 1;
    pthread_cond_broadcast(&pool->reap_cv);
    pthread_mutex_unlock(&pool->mu);
    if (pool->reaper_started) pthread_join(pool->reaper, NULL);
    free(pool->reapq);
    if (pool->cfg.test_mode != NULL) {
        for (int i = 0; pool->argv[i]; i++)
            if (!strncmp(pool->argv[i], "--test-", 7)) free(pool->argv[i]);
    }
    if (pool->devnull >= 0) close(pool->devnull);
    free(pool->idle);
    free(pool->running);
    pthread_cond_destroy(&pool->slot_cv);
    pthread_cond_destroy(&pool->refill_cv);
    pthread_cond_destroy(&pool->reap_cv);
    pthread_mutex_destroy(&pool->mu);
    pthread_mutex_destroy(&pool->zyg_mu);
    free(pool);
}

sbx_layers sbx_pool_layers(const sbx_pool *pool)
{
    return pool->layers;
}

json_t *sbx_pool_jail_json(sbx_pool *pool)
{
    sbx_layers l = pool->layers;
    return json_pack("{s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:I, s:I}", "seccomp", l.seccomp,
                     "no_new_privs", l.no_new_privs, "rlimits", l.rlimits, "user_ns", l.user_ns,
                     "net_ns", l.net_ns, "unprivileged", l.unprivileged, "cap_bounding_empty",
                     l.cap_bounding_empty, "zygote", sbx_pool_zygote_pid(pool) > 0,
                     "children_started", (json_int_t)atomic_load(&pool->spawned), "children_forked",
                     (json_int_t)atomic_load(&pool->forked));
}

int sbx_pool_active(const sbx_pool *pool)
{
    return atomic_load(&((sbx_pool *)pool)->active);
}

sbx_stats sbx_pool_stats(sbx_pool *pool)
{
    sbx_stats s;
    s.spawned = atomic_load(&pool->spawned);
    s.forked = atomic_load(&pool->forked);
    s.zygotes = atomic_load(&pool->zygotes);
    s.started = atomic_load(&pool->started);
    s.reaped = atomic_load(&pool->reaped);
    pthread_mutex_lock(&pool->mu);
    s.idle = (unsigned long)pool->nidle;
    pthread_mutex_unlock(&pool->mu);
    return s;
}

int sbx_pool_zygote_pid(sbx_pool *pool)
{
    pthread_mutex_lock(&pool->zyg_mu);
    int pid = pool->zyg_fd >= 0 ? (int)pool->zyg_pid : -1;
    pthread_mutex_unlock(&pool->zyg_mu);
    return pid;
}

int sbx_pool_running_pids(sbx_pool *pool, int *pids, int cap)
{
    int n = 0;
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < pool->cfg.max_sandboxes && n < cap; i++)
        if (pool->running[i] > 0) pids[n++] = pool->running[i];
    pthread_mutex_unlock(&pool->mu);
    return n;
}

/* ---- one evaluation ---- */

static void set_status(sbx_outcome *out, sbx_status st, const char *limit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_status(sbx_outcome *out, sbx_status st, const char *limit, const char *fmt, ...)
{
    out->status = st;
    snprintf(out->limit, sizeof out->limit, "%s", limit ? limit : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
}

/* Waits for a slot until the deadline. 0 = got one, -2 deadline, -3 cancel.
 * A playground request also needs its own budget (playground_max) and no
 * worker request waiting: the operator's experiments never delay work. */
static int acquire_slot(sbx_pool *pool, double deadline, atomic_int *cancel, int playground)
{
    int rc = 0;
    pthread_mutex_lock(&pool->mu);
    if (!playground) pool->worker_waiting++;
    while (pool->busy >= pool->cfg.max_sandboxes ||
           (playground &&
            (pool->playground_busy >= pool->cfg.playground_max || pool->worker_waiting > 0))) {
        if (cancel != NULL && atomic_load(cancel)) {
            rc = -3;
            break;
        }
        double left = deadline - now_ms();
        if (left <= 0) {
            rc = -2;
            break;
        }
        struct timespec ts =
            abs_after_ms(cancel != NULL && left > CANCEL_TICK_MS ? CANCEL_TICK_MS : left);
        pthread_cond_timedwait(&pool->slot_cv, &pool->mu, &ts);
    }
    if (!playground) pool->worker_waiting--;
    if (rc == 0) {
        pool->busy++;
        pool->playground_busy += playground;
    }
    /* a worker that gave up may unblock a playground request */
    if (rc != 0 && !playground) pthread_cond_broadcast(&pool->slot_cv);
    pthread_mutex_unlock(&pool->mu);
    return rc;
}

static void release_slot(sbx_pool *pool, int playground)
{
    pthread_mutex_lock(&pool->mu);
    pool->busy--;
    pool->playground_busy -= playground;
    /* both kinds may wait, with different conditions: wake them all */
    pthread_cond_broadcast(&pool->slot_cv);
    if (pool->busy == 0) pthread_cond_signal(&pool->refill_cv);
    pthread_mutex_unlock(&pool->mu);
}

/* Takes a pre-started child, or spawns one now. */
static int take_child(sbx_pool *pool, child_t *c, fps_err *err)
{
    pthread_mutex_lock(&pool->mu);
    if (pool->nidle > 0) {
        *c = pool->idle[0];
        memmove(pool->idle, pool->idle + 1, (size_t)(pool->nidle - 1) * sizeof *pool->idle);
        pool->nidle--;
        pthread_cond_signal(&pool->refill_cv);
        pthread_mutex_unlock(&pool->mu);
        return 0;
    }
    pthread_mutex_unlock(&pool->mu);
    return new_child(pool, c, err);
}

static void track_running(sbx_pool *pool, pid_t pid, int on)
{
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < pool->cfg.max_sandboxes; i++) {
        if (on && pool->running[i] == 0) {
            pool->running[i] = pid;
            break;
        }
        if (!on && pool->running[i] == pid) {
            pool->running[i] = 0;
            break;
        }
    }
    pthread_mutex_unlock(&pool->mu);
}

static const char *lang_field(lang_kind k)
{
    return k == LANG_CONDITION ? "condition_source" : "evaluator_source";
}

static void eval_impl(sbx_pool *pool, const sbx_request *req, int check_only, sbx_outcome *out)
{
    memset(out, 0, sizeof *out);
    double t0 = now_ms();
    double budget_ms = sbx_clamp_timeout(req->timeout_s) * 1e3;
    double deadline = t0 + budget_ms;
    /* with a lease budget, the wait is bounded by the lease, not the timeout */
    double wait_deadline = req->budget_s > 0 ? t0 + req->budget_s * 1e3 : deadline;
    const char *cut = "timeout"; /* which bound a deadline kill means */
    int playground = req->playground != 0;
    char *buf = NULL;
    const char *src = req->source ? req->source : "";
    size_t src_len = req->source ? req->source_len : 0;
    const char *key = req->eval_key ? req->eval_key : "";
    size_t key_len = strlen(key);

    if (src_len > JAIL_MAX_SOURCE) {
        /* Far past the language's own limits: no need for a child. */
        char line[160];
        snprintf(line, sizeof line,
                 "{\"ok\": false, \"stage\": \"compile\", \"message\": \"%s exceeds %d bytes\"}",
                 lang_field(req->kind), req->kind == LANG_CONDITION ? 16384 : 131072);
        out->line = strdup(line);
        out->json = out->line ? json_loads(out->line, 0, NULL) : NULL;
        if (out->json == NULL)
            set_status(out, SBX_JAIL_FAILURE, NULL, "out of memory");
        else
            out->status = SBX_OK;
        return;
    }
    if (key_len > JAIL_MAX_KEY) {
        set_status(out, SBX_JAIL_FAILURE, NULL, "eval_key longer than %u bytes", JAIL_MAX_KEY);
        return;
    }

    int r = acquire_slot(pool, wait_deadline, req->cancel, playground);
    out->wait_ms = now_ms() - t0;
    if (r == -3) {
        set_status(out, SBX_CANCELLED, NULL, "cancelled while waiting for a sandbox slot");
        return;
    }
    if (r == -2) {
        set_status(out, SBX_TIMEOUT, req->budget_s > 0 ? "slot" : "timeout",
                   "deadline passed while waiting for a sandbox slot");
        return;
    }
    atomic_fetch_add(&pool->active, 1);
    child_t c = {-1, -1, -1};
    int have_child = 0, handed = 0;
    fps_err err;
    double t_run = now_ms();
    if (req->budget_s > 0) { /* the run gets its own timeout, within the budget */
        deadline = t_run + budget_ms;
        if (wait_deadline < deadline) {
            deadline = wait_deadline;
            cut = "budget";
        }
    }
    if (t_run >= deadline) {
        /* Never start a child after its deadline. */
        set_status(out, SBX_TIMEOUT, req->budget_s > 0 ? "slot" : "timeout",
                   "deadline passed while waiting for a sandbox slot");
        goto done;
    }

    jail_request hdr;
    memset(&hdr, 0, sizeof hdr);
    hdr.magic = JAIL_REQ_MAGIC;
    hdr.kind = (uint32_t)req->kind;
    hdr.flags = check_only ? JAIL_REQ_CHECK : req->image ? JAIL_REQ_IMAGE : 0;
    hdr.key_len = (uint32_t)key_len;
    double left_s = (deadline - t_run) / 1e3;
    hdr.cpu_seconds = (uint32_t)ceil(left_s);
    if (hdr.cpu_seconds < 1) hdr.cpu_seconds = 1;
    if (hdr.cpu_seconds > 60) hdr.cpu_seconds = 60;
    hdr.source_len = src_len;
    hdr.image_len = (hdr.flags & JAIL_REQ_IMAGE) ? req->image->len : 0;
    /* The interpreter's live-heap budget: the address-space limit less the
     * mapped session image and a reserve for the child's code, stacks and
     * scratch buffers (the kernel's RLIMIT_AS stays the backstop). */
    size_t as_bytes = (size_t)pool->cfg.memory_mb << 20, reserve = as_bytes / 16;
    if (reserve < ((size_t)24 << 20)) reserve = (size_t)24 << 20;
    hdr.max_alloc_bytes = as_bytes > hdr.image_len + 2 * reserve
                              ? as_bytes - (size_t)hdr.image_len - reserve
                              : as_bytes / 4;

    /* A pre-started child may have died while idle (killed from outside):
     * then try once more with a fresh one. */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (take_child(pool, &c, &err) != 0) {
            set_status(out, SBX_JAIL_FAILURE, NULL, "%s", err.msg);
            goto done;
        }
        have_child = 1;
        handed = 1;
        track_running(pool, c.pid, 1);
        atomic_fetch_add(&pool->started, 1);
        int img_fd = (hdr.flags & JAIL_REQ_IMAGE) && req->image != NULL ? req->image->fd : -1;
        int s = send_request(&c, &hdr, img_fd, src, key, deadline, req->cancel);
        if (s == 0) break;
        track_running(pool, c.pid, 0);
        reap_later(pool, &c, 1);
        have_child = 0;
        if (s == -2) {
            set_status(out, SBX_TIMEOUT, "timeout", "deadline passed while sending the request");
            goto done;
        }
        if (s == -3) {
            set_status(out, SBX_CANCELLED, NULL, "cancelled");
            goto done;
        }
        if (attempt == 1) {
            set_status(out, SBX_JAIL_FAILURE, NULL, "the sandbox child died before its request");
            goto done;
        }
    }

    size_t cap = OUTCOME_BUF_MIN, len = 0;
    buf = malloc(cap);
    if (buf == NULL) {
        set_status(out, SBX_JAIL_FAILURE, NULL, "out of memory");
        goto done;
    }
    read_end end = read_outcome(c.out, &buf, &cap, &len, deadline, req->cancel, 1);
    if (end == RD_LINE) {
        /* A complete line: done if it is a well-formed outcome (the child
         * is exiting; it is killed and reaped in the background). If not,
         * read on to EOF so its exit status can say what went wrong. */
        json_error_t jerr;
        out->json = json_loadb(buf, len, 0, &jerr);
        if (out->json != NULL && json_is_object(out->json) &&
            json_is_boolean(json_object_get(out->json, "ok"))) {
            end = RD_EOF;
        } else {
            json_decref(out->json);
            out->json = NULL;
            end = read_outcome(c.out, &buf, &cap, &len, deadline, req->cancel, 0);
        }
    }
    track_running(pool, c.pid, 0);
    out->run_ms = now_ms() - t_run;
    if (end != RD_EOF) {
        /* Killed: its exit status adds nothing; reap in the background. */
        reap_later(pool, &c, 1);
        have_child = 0;
        switch (end) {
        case RD_DEADLINE:
            set_status(out, SBX_TIMEOUT, cut, "killed at the deadline (%.0f ms budget)",
                       deadline - t_run);
            break;
        case RD_CANCEL:
            set_status(out, SBX_CANCELLED, NULL, "cancelled while running");
            break;
        case RD_OVERFLOW:
            set_status(out, SBX_OUTPUT, "output", "the outcome exceeded %u bytes",
                       JAIL_MAX_OUTCOME);
            break;
        default:
            set_status(out, SBX_JAIL_FAILURE, NULL, "reading the outcome failed");
            break;
        }
        goto done;
    }
    /* EOF with a well-formed outcome: the evaluation is complete (the child
     * closes its end before exiting), so it is reaped in the background. */
    json_error_t jerr;
    if (out->json == NULL && len > 0) out->json = json_loadb(buf, len, 0, &jerr);
    if (out->json != NULL && json_is_object(out->json) &&
        json_is_boolean(json_object_get(out->json, "ok"))) {
        reap_later(pool, &c, 1);
        have_child = 0;
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            len--;
        out->line = strndup(buf, len);
        if (out->line == NULL) {
            json_decref(out->json);
            out->json = NULL;
            set_status(out, SBX_JAIL_FAILURE, NULL, "out of memory");
            goto done;
        }
        out->status = SBX_OK;
        goto done;
    }
    json_decref(out->json);
    out->json = NULL;
    /* No usable outcome: the exit status says why. */
    int st = reap_child(pool, &c, 0, 2000);
    have_child = 0;
    if (st == -1) {
        set_status(out, SBX_JAIL_FAILURE, NULL,
                   "the sandbox child wrote no usable outcome and did not exit");
        goto done;
    }
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        if (sig == SIGXCPU || sig == SIGKILL)
            set_status(out, SBX_TIMEOUT, "timeout", "killed by the CPU limit (signal %d)", sig);
        else if (sig == SIGSYS)
            set_status(out, SBX_JAIL_FAILURE, NULL, "killed by seccomp: blocked system call");
        else
            set_status(out, SBX_JAIL_FAILURE, NULL, "the sandbox child died (signal %d)", sig);
        goto done;
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == JAIL_EXIT_SIGSYS) {
        set_status(out, SBX_JAIL_FAILURE, NULL, "killed by seccomp: blocked system call");
    } else if (code != 0) {
        buf[len < 160 ? len : 160] = '\0';
        for (char *p = buf; *p; p++)
            if ((unsigned char)*p < 0x20) *p = ' ';
        set_status(out, SBX_JAIL_FAILURE, NULL, "the sandbox child failed (exit %d)%s%s", code,
                   len ? ": " : "", len ? buf : "");
    } else {
        set_status(out, SBX_JAIL_FAILURE, NULL,
                   len ? "the sandbox child wrote a malformed outcome"
                       : "the sandbox child ended without an outcome");
    }
done:
    if (have_child) {
        track_running(pool, c.pid, 0);
        reap_later(pool, &c, 1);
    }
    if (handed && out->run_ms == 0) out->run_ms = now_ms() - t_run;
    free(buf);
    atomic_fetch_sub(&pool->active, 1);
    release_slot(pool, playground);
}

void sbx_eval(sbx_pool *pool, const sbx_request *req, sbx_outcome *out)
{
    eval_impl(pool, req, 0, out);
}

void sbx_check(sbx_pool *pool, const sbx_request *req, sbx_outcome *out)
{
    eval_impl(pool, req, 1, out);
}

void sbx_outcome_free(sbx_outcome *out)
{
    if (out == NULL) return;
    json_decref(out->json);
    out->json = NULL;
    free(out->line);
    out->line = NULL;
}

/* ---- mapping ---- */

void sbx_outcome_to_run(const sbx_outcome *out, const char **status, const char **error_code,
                        char *msg, size_t msgcap)
{
    static const char timeout_msg[] = "evaluation exceeded its configured timeout";
    *status = "failed";
    *error_code = "eval_error";
    if (msgcap) msg[0] = '\0';
    switch (out->status) {
    case SBX_OK: {
        json_t *o = out->json;
        if (json_is_true(json_object_get(o, "ok"))) {
            *status = "succeeded";
            *error_code = NULL;
            return;
        }
        const char *stage = json_string_value(json_object_get(o, "stage"));
        if (stage != NULL && !strcmp(stage, "compile")) {
            const char *m = json_string_value(json_object_get(o, "message"));
            snprintf(msg, msgcap, "evaluator source rejected: %s", m && *m ? m : "invalid source");
        } else if (stage != NULL && !strcmp(stage, "runtime")) {
            const char *t = json_string_value(json_object_get(o, "error_type"));
            snprintf(msg, msgcap, "evaluation raised %s", t ? t : "Exception");
        } else if (stage != NULL && !strcmp(stage, "limit")) {
            *status = "timed_out";
            *error_code = "eval_timeout";
            snprintf(msg, msgcap, "%s", timeout_msg);
        } else {
            snprintf(msg, msgcap, "evaluation sandbox returned an unknown outcome");
            *error_code = "sandbox_error";
        }
        return;
    }
    case SBX_TIMEOUT:
        *status = "timed_out";
        *error_code = "eval_timeout";
        snprintf(msg, msgcap, "%s", timeout_msg);
        return;
    case SBX_OUTPUT:
        snprintf(msg, msgcap, "evaluation output exceeded 1 MiB");
        return;
    case SBX_CANCELLED:
        *status = "cancelled";
        *error_code = "cancelled";
        snprintf(msg, msgcap, "evaluation was cancelled");
        return;
    case SBX_JAIL_FAILURE:
        *error_code = "sandbox_error";
        snprintf(msg, msgcap, "evaluation sandbox failed: %s", out->detail);
        return;
    }
}

char *sbx_outcome_line(const sbx_outcome *out)
{
    strbuf b;
    strbuf_init(&b);
    switch (out->status) {
    case SBX_OK:
        if (out->line != NULL) return strdup(out->line);
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"jail\", \"message\": \"no outcome\"}");
        break;
    case SBX_TIMEOUT:
    case SBX_OUTPUT:
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": ");
        strbuf_json_str(&b, out->limit[0] ? out->limit : "timeout");
        strbuf_putc(&b, '}');
        break;
    case SBX_CANCELLED:
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"cancelled\"}");
        break;
    case SBX_JAIL_FAILURE:
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"jail\", \"message\": ");
        strbuf_json_str(&b, out->detail);
        strbuf_putc(&b, '}');
        break;
    }
    return strbuf_detach(&b, NULL);
}
