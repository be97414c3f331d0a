/* sandbox/jail/sbx_pool: the pool: the layer probe, creation and teardown of the slots, the
 * zygote and the threads, and the counters the admin API reads. Shared
 * structures and threading: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>

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
    if (sbx_exec_child(pool, argv, &c, err) != 0) return -1;
    close(c.sock);
    c.sock = -1;
    size_t cap = OUTCOME_BUF_MIN, len = 0;
    char *buf = malloc(cap);
    read_end end =
        buf ? sbx_read_outcome(c.out, &buf, &cap, &len, now_ms() + 10000, NULL, 0, NULL) : RD_ERROR;
    int st = sbx_reap_child(pool, &c, end != RD_EOF, 10000);
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
    pthread_mutex_init(&pool->own_mu, NULL);
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
        size_t hl = strlen(helper);
        if (dir > 0 && hl < sizeof pool->exe && access(helper, X_OK) == 0)
            memcpy(pool->exe, helper, hl + 1); /* fits: checked just before */
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
        if (sbx_zygote_start(pool, &zerr) != 0) {
            pool->zyg_retry_at = now_ms() + 5000;
            log_warn("sandbox zygote unavailable; exec'ing each child", LOG_S("error", zerr.msg));
        }
        pthread_mutex_unlock(&pool->zyg_mu);
    }
    pool->layers.zygote = pool->zyg_fd >= 0;

    if (pthread_create(&pool->reaper, NULL, sbx_reaper_main, pool) != 0) {
        fps_err_set(&err, SBX_JAIL_FAILURE, 0, "sandbox_unavailable",
                    "starting the sandbox reaper thread failed");
        goto fail;
    }
    pool->reaper_started = 1;
    if (pool->idle_target > 0) {
        if (pthread_create(&pool->refill, NULL, sbx_refill_main, pool) != 0) {
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
    sbx_zygote_stop(pool);
    pthread_mutex_unlock(&pool->zyg_mu);
    /* Idle children exit on EOF; kill them anyway so none outlives us. */
    for (int i = 0; i < pool->nidle; i++)
        sbx_reap_child(pool, &pool->idle[i], 1, 0);
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
    pthread_mutex_destroy(&pool->own_mu);
    free(pool->owned);
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
    s.holders = atomic_load(&pool->holders);
    s.reruns = atomic_load(&pool->reruns);
    s.sweeps = atomic_load(&pool->sweeps);
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

int sbx_pool_idle_pids(sbx_pool *pool, int *pids, int cap)
{
    int n = 0;
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < pool->nidle && n < cap; i++)
        pids[n++] = pool->idle[i].pid;
    pthread_mutex_unlock(&pool->mu);
    return n;
}
