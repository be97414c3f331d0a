/* sandbox/jail/sbx_spawn: children: exec'd one by one or forked by the zygote (jail.h), kept
 * pre-started by the refill thread, killed and reaped (by their user or the
 * reaper thread). Shared
 * structures and threading: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include "common/log.h"
#include "common/procmem.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- spawning ---- */

static void close_child(child_t *c)
{
    if (c->sock >= 0) close(c->sock);
    if (c->out >= 0) close(c->out);
    c->sock = c->out = -1;
}

/* ---- the registry of children not yet waited for (sbx_int.h) ---- */

/* Registers a child just made. 0, or -1 when the list cannot grow: the
 * caller then undoes the child, since an unregistered one could be taken
 * by the sweep for lost children while its owner still holds it. */
static int own_add(sbx_pool *pool, pid_t pid)
{
    int rc = 0;
    pthread_mutex_lock(&pool->own_mu);
    if (pool->nowned == pool->owned_cap) {
        int ncap = pool->owned_cap ? pool->owned_cap * 2 : 32;
        pid_t *n = realloc(pool->owned, (size_t)ncap * sizeof *n);
        if (n == NULL) {
            rc = -1;
            goto done;
        }
        pool->owned = n;
        pool->owned_cap = ncap;
    }
    pool->owned[pool->nowned++] = pid;
done:
    pthread_mutex_unlock(&pool->own_mu);
    return rc;
}

/* Unregisters a child once it has been waited for (no-op if absent). */
static void own_drop(sbx_pool *pool, pid_t pid)
{
    pthread_mutex_lock(&pool->own_mu);
    for (int i = 0; i < pool->nowned; i++) {
        if (pool->owned[i] != pid) continue;
        pool->owned[i] = pool->owned[--pool->nowned];
        break;
    }
    pthread_mutex_unlock(&pool->own_mu);
}

static int own_has(sbx_pool *pool, pid_t pid)
{
    int found = 0;
    pthread_mutex_lock(&pool->own_mu);
    for (int i = 0; i < pool->nowned && !found; i++)
        found = pool->owned[i] == pid;
    pthread_mutex_unlock(&pool->own_mu);
    return found;
}

/* A child made but not registered: killed and waited for at once. */
static void undo_unregistered(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* SIGKILL to a child's process group (sbx_int.h: no child can fork, the
 * group is defence in depth) and to the child itself (it may not have made its group yet). Only
 * while the child is unreaped: its pid, and so its group's id, cannot be reused. */
void sbx_kill_child(pid_t pid)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
}

/* After a child is reaped: members of its group that were orphaned to this
 * process (when this process is a container's pid 1 or a subreaper; there
 * are none unless a child's jail was broken) are reaped too. Returns at
 * once when there are none (ECHILD); they were killed with the group. */
static void reap_orphans(pid_t pgid)
{
    for (;;) {
        pid_t r = waitpid(-pgid, NULL, 0);
        if (r > 0 || (r < 0 && errno == EINTR)) continue;
        break;
    }
}

/* Kills (if asked) and reaps one child; returns its wait status, or -1 if
 * it had to be killed for outliving `grace_ms`: without kill_it, a child
 * still running that long after its request socket is closed (a child
 * blocked reading it sees EOF) is killed. */
int sbx_reap_child(sbx_pool *pool, child_t *c, int kill_it, int grace_ms)
{
    int lingered = 0;
    int st = 0;
    if (kill_it) sbx_kill_child(c->pid);
    close_child(c);
    double until = now_ms() + grace_ms;
    for (;;) {
        pid_t r = waitpid(c->pid, &st, kill_it ? 0 : WNOHANG);
        if (r == c->pid || (r < 0 && errno != EINTR)) break;
        if (r == 0) {
            if (now_ms() >= until) {
                sbx_kill_child(c->pid);
                kill_it = lingered = 1;
                continue;
            }
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    own_drop(pool, c->pid);
    reap_orphans(c->pid);
    atomic_fetch_add(&pool->reaped, 1);
    return lingered ? -1 : st;
}

/* Closes our ends and queues the child for the reaper thread (killing it
 * first if asked). Falls back to reaping here if the queue cannot grow. */
void sbx_reap_later(sbx_pool *pool, child_t *c, int kill_it)
{
    if (kill_it) sbx_kill_child(c->pid);
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
        /* Only the first of a batch wakes the reaper (see sbx_reaper_main). */
        if (pool->reap_len == 1) pthread_cond_signal(&pool->reap_cv);
        pthread_mutex_unlock(&pool->mu);
        return;
    }
    pthread_mutex_unlock(&pool->mu);
    sbx_reap_child(pool, c, 0, REAP_GRACE_MS);
}

/* Pre-started children that ended while idle (killed from outside: the
 * OOM killer, an operator) are reaped and dropped from the list (pool->mu
 * held), so none lingers as a zombie until it is taken, and the refill
 * thread is woken to replace them. Only the list owns an idle child, so
 * nothing else waits for it, and it has no children of its own. */
static void drop_dead_idle(sbx_pool *pool)
{
    for (int i = 0; i < pool->nidle;) {
        child_t *c = &pool->idle[i];
        int st = 0;
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR)) {
            i++;
            continue;
        }
        log_warn("sandbox pre-started child ended while idle; replacing it", LOG_I("pid", c->pid),
                 LOG_I("wait_status", r == c->pid ? st : -1));
        own_drop(pool, c->pid);
        close_child(c);
        atomic_fetch_add(&pool->reaped, 1);
        memmove(c, c + 1, (size_t)(pool->nidle - i - 1) * sizeof *c);
        pool->nidle--;
        pthread_cond_signal(&pool->refill_cv);
    }
}

/* A zygote that ended (its control socket says so only at the next fork)
 * is reaped now and restarted at the next fork, so it lingers as a zombie
 * no longer than IDLE_CHECK_MS. Skipped while a fork holds zyg_mu. */
static void drop_dead_zygote(sbx_pool *pool)
{
    if (pthread_mutex_trylock(&pool->zyg_mu) != 0) return;
    int st = 0;
    if (pool->zyg_fd >= 0 && waitpid(pool->zyg_pid, &st, WNOHANG) == pool->zyg_pid) {
        log_warn("sandbox zygote ended; restarting it at the next fork",
                 LOG_I("pid", pool->zyg_pid), LOG_I("wait_status", st));
        own_drop(pool, pool->zyg_pid);
        close(pool->zyg_fd);
        pool->zyg_fd = -1;
        pool->zyg_pid = -1;
    }
    pthread_mutex_unlock(&pool->zyg_mu);
}

/* 1 if pid's command is the sandbox image's (the first 15 bytes of its
 * file name, as the kernel keeps it), so a child some other part of the
 * program started is never taken for one of ours. */
static int runs_our_image(const sbx_pool *pool, pid_t pid)
{
    char comm[32], want[16];
    const char *base = strrchr(pool->exe, '/');
    snprintf(want, sizeof want, "%.15s", base ? base + 1 : pool->exe);
    return procmem_stat(pid, comm, sizeof comm, NULL) == 0 && strcmp(comm, want) == 0;
}

/* A child that exited and that no one will reap: not one the pool made
 * and still owns (the registry: an owner waits for its child in its own
 * time, and reuse of a pid reaped behind its back would aim that owner's
 * kill at another process), yet of the sandbox image, and still there at
 * two sweeps in a row, IDLE_CHECK_MS apart with nothing queued. That is a
 * child the pool never knew of (a zygote's fork whose reply came too late:
 * CLONE_PARENT makes it ours). It is reaped and logged with its pid and
 * wait status, so that it cannot pile up and the log says it happened.
 * waitid's WNOWAIT only looks: the first exited child, left as it is. */
static void reap_lost_child(sbx_pool *pool)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    atomic_fetch_add(&pool->sweeps, 1);
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid <= 0) {
        pool->lost_suspect = 0;
        return;
    }
    pid_t pid = si.si_pid;
    if (own_has(pool, pid)) {
        pool->lost_suspect = 0;
        return;
    }
    if (pid != pool->lost_suspect || !runs_our_image(pool, pid)) {
        pool->lost_suspect = pid;
        return;
    }
    pool->lost_suspect = 0;
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) != pid) return;
    atomic_fetch_add(&pool->reaped, 1);
    log_warn("sandbox child left unreaped; reaped it", LOG_I("pid", pid), LOG_I("wait_status", st));
}

/* Reaps the queued children in batches: woken by the first one queued, it
 * lets REAP_BATCH_MS more gather (killed, they are gone by then), then waits
 * for those. Under load that is one wake-up per batch instead of one or two
 * per evaluation; a zombie lingers about REAP_BATCH_MS. */
void *sbx_reaper_main(void *arg)
{
    sbx_pool *pool = arg;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (pool->reap_len == 0 && !pool->reap_stop) {
            /* Nothing queued for a while: children that ended unobserved. */
            struct timespec idle_until = abs_after_ms(IDLE_CHECK_MS);
            if (pthread_cond_timedwait(&pool->reap_cv, &pool->mu, &idle_until) == ETIMEDOUT) {
                drop_dead_idle(pool);
                pthread_mutex_unlock(&pool->mu);
                drop_dead_zygote(pool);
                pthread_mutex_lock(&pool->mu);
                if (pool->reap_len == 0) reap_lost_child(pool);
            }
        }
        if (pool->reap_len == 0) break;
        struct timespec until = abs_after_ms(REAP_BATCH_MS);
        while (!pool->reap_stop &&
               pthread_cond_timedwait(&pool->reap_cv, &pool->mu, &until) != ETIMEDOUT) {
        }
        /* This batch: the first n (only this thread removes; others
         * append, possibly moving the queue). */
        int n = pool->reap_len;
        for (int i = 0; i < n; i++) {
            /* A child queued unkilled (its socket closed, so it exits on
             * EOF) that lingers is killed after a grace, as sbx_reap_child
             * does: the reaper never blocks on one, which would leave
             * every child queued after it a zombie. */
            child_t c = {.pid = pool->reapq[i], .sock = -1, .out = -1};
            pthread_mutex_unlock(&pool->mu);
            (void)sbx_reap_child(pool, &c, 0, REAP_GRACE_MS);
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
int sbx_exec_child(sbx_pool *pool, char **argv, child_t *c, fps_err *err)
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
    if (own_add(pool, pid) != 0) {
        undo_unregistered(pid);
        close_child(c);
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "spawning the sandbox: out of memory");
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
void sbx_zygote_stop(sbx_pool *pool)
{
    if (pool->zyg_fd < 0) return;
    close(pool->zyg_fd);
    pool->zyg_fd = -1;
    kill(pool->zyg_pid, SIGKILL);
    while (waitpid(pool->zyg_pid, NULL, 0) < 0 && errno == EINTR) {
    }
    own_drop(pool, pool->zyg_pid);
    pool->zyg_pid = -1;
}

/* Starts the zygote and waits for its HELLO (zyg_mu held). 0 or -1. */
int sbx_zygote_start(sbx_pool *pool, fps_err *err)
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
    if (rc == 0 && own_add(pool, pid) != 0) {
        undo_unregistered(pid);
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox zygote: out of memory");
        rc = -1;
    }
    if (rc != 0) {
        close(sv[0]);
        return -1;
    }
    pool->zyg_fd = sv[0];
    pool->zyg_pid = pid;
    jail_zygote_msg m;
    memset(&m, 0, sizeof m); /* read below even when nothing came */
    if (zygote_recv(sv[0], &m, 10000) != 0 || m.op != JAIL_ZYG_HELLO || m.value != 0) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox zygote did not start%s%s", m.value < 0 ? ": " : "",
                    m.value < 0 ? strerror(-m.value) : "");
        sbx_zygote_stop(pool);
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
        if (sbx_zygote_start(pool, err) != 0) {
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
        sbx_zygote_stop(pool);
        goto done;
    }
    if (m.pid <= 0) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox zygote could not fork: %s",
                    strerror(m.value < 0 ? -m.value : EIO));
        goto done;
    }
    if (own_add(pool, m.pid) != 0) {
        undo_unregistered(m.pid);
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "the sandbox zygote's child: out of memory");
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
int sbx_new_child(sbx_pool *pool, child_t *c, fps_err *err)
{
    if (!pool->cfg.no_zygote && zygote_fork(pool, c, err) == 0) return 0;
    return sbx_exec_child(pool, pool->argv, c, err);
}

void *sbx_refill_main(void *arg)
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
        int rc = sbx_new_child(pool, &c, &err);
        pthread_mutex_lock(&pool->mu);
        if (rc != 0) {
            log_warn("sandbox pre-start failed", LOG_S("error", err.msg));
            struct timespec ts = abs_after_ms(1000);
            pthread_cond_timedwait(&pool->refill_cv, &pool->mu, &ts);
            continue;
        }
        if (pool->stopping) {
            pthread_mutex_unlock(&pool->mu);
            sbx_reap_child(pool, &c, 1, 0);
            pthread_mutex_lock(&pool->mu);
            break;
        }
        pool->idle[pool->nidle++] = c;
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}
