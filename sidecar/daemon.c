/* sidecar/daemon: see daemon.h. The main thread waits in sigwait (no
 * polling); the drain waiter thread wakes it with SIGUSR1 when in-flight
 * work and the outbox are done or the drain timeout passed. */
#include "sidecar/daemon.h"

#include "api/api.h"
#include "common/log.h"
#include "common/secret.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/local.h"
#include "sidecar/worker.h"
#include "store/store.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_t g_main;
static volatile sig_atomic_t g_have_main;

void daemon_block_signals(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void daemon_request_stop(void)
{
    /* The main thread waits for SIGTERM in sigwait (it is blocked), so
     * this wakes it to drain; it terminates nothing. */
    if (g_have_main) pthread_kill(g_main, SIGTERM); // NOLINT(bugprone-bad-signal-to-kill-thread)
}

typedef struct {
    worker *w;
    double timeout;
    int drained;
} drain_arg;

static void *drain_waiter(void *arg)
{
    drain_arg *d = arg;
    d->drained = worker_wait_drained(d->w, d->timeout);
    pthread_kill(g_main, SIGUSR1);
    return NULL;
}

int daemon_run(const run_config *cfg)
{
    char err[512];
    int status = 1;
    secret *token = NULL, *evsecret = NULL;
    sbx_pool *pool = NULL;
    local_registry *local = NULL;
    api_server *api = NULL;
    worker *w = NULL;
    store *db = NULL;
    log_level lvl;
    if (log_parse_level(cfg->log_level, &lvl) == 0) log_set_level(lvl);
    /* Few malloc arenas: the threads are mostly idle and each arena keeps
     * its own free pages (idle RSS). */
    mallopt(M_ARENA_MAX, 1);
    g_main = pthread_self();
    g_have_main = 1;
    daemon_block_signals();

    if (cfg->token_file != NULL) {
        token = secret_from_file(cfg->token_file, err, sizeof err);
        if (token == NULL) {
            log_error("cannot read the token file", LOG_S("path", cfg->token_file),
                      LOG_S("error", err));
            goto done;
        }
    } else {
        token = secret_from_str(cfg->token ? cfg->token : "");
        if (token == NULL) {
            log_error("no token (FAILPROOFAI_EVALUATOR_TOKEN is empty)");
            goto done;
        }
    }
    store_options so;
    memset(&so, 0, sizeof so);
    so.path = cfg->db_path;
    so.retention_hours = cfg->retention_hours;
    so.retention_runs = cfg->retention_runs;
    so.maintenance_interval_s = 300;
    store_err se;
    if (store_open(&so, &db, &se) != STORE_OK) {
        /* Refuse to run without durability. */
        log_error("cannot open the store", LOG_S("path", cfg->db_path), LOG_S("error", se.msg));
        goto done;
    }
    sbx_config sc;
    memset(&sc, 0, sizeof sc);
    sc.max_sandboxes = (int)cfg->max_sandboxes;
    sc.memory_mb = cfg->sandbox_memory_mb;
    pool = sbx_pool_new(&sc, err, sizeof err);
    if (pool == NULL) {
        log_error("cannot create the sandbox pool", LOG_S("error", err));
        goto done;
    }
    local_config lc;
    memset(&lc, 0, sizeof lc);
    lc.db = db;
    lc.allowed_hosts = &cfg->evaluator_hosts;
    if (cfg->evaluator_secret_file != NULL) {
        evsecret = secret_from_file(cfg->evaluator_secret_file, err, sizeof err);
        if (evsecret == NULL) {
            log_error("cannot read the evaluator secret file",
                      LOG_S("path", cfg->evaluator_secret_file), LOG_S("error", err));
            goto done;
        }
        lc.shared_secret = evsecret;
    }
    local = local_registry_new(&lc, err, sizeof err);
    if (local == NULL) {
        if (strstr(err, "not built yet") == NULL) {
            log_error("cannot create the local evaluator registry", LOG_S("error", err));
            goto done;
        }
        log_warn("local evaluators unavailable", LOG_S("reason", err));
    }
    worker_deps wd = {.cfg = cfg, .token = token, .store = db, .pool = pool, .local = local};
    w = worker_new(&wd, err, sizeof err);
    if (w == NULL) {
        log_error("cannot create the worker", LOG_S("error", err));
        goto done;
    }
    api_deps ad = {.cfg = cfg, .db = db, .w = w, .pool = pool, .local = local};
    api = api_start(&ad, err, sizeof err);
    if (api == NULL) {
        if (strstr(err, "not built yet") == NULL) {
            log_error("cannot start the admin API", LOG_S("listen", cfg->listen),
                      LOG_S("error", err));
            goto done;
        }
        log_warn("admin API unavailable", LOG_S("reason", err));
    } else {
        log_info("admin API listening", LOG_S("listen", cfg->listen), LOG_I("port", api_port(api)));
    }
    if (worker_start(w, err, sizeof err) != 0) {
        log_error("cannot start the worker", LOG_S("error", err));
        goto done;
    }

    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGUSR1);
    int sig = 0;
    do
        sigwait(&s, &sig);
    while (sig == SIGUSR1);
    log_info("signal received: draining", LOG_S("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"),
             LOG_D("drain_timeout_seconds", cfg->drain_timeout));
    worker_drain(w);
    drain_arg da = {w, cfg->drain_timeout, 0};
    pthread_t dt;
    pthread_create(&dt, NULL, drain_waiter, &da);
    sigwait(&s, &sig);
    if (sig == SIGUSR1) {
        pthread_join(dt, NULL);
        if (da.drained)
            log_info("drained: in-flight work finished and outbox flushed");
        else
            log_warn("drain timeout: stopping with work in flight (the store covers it)");
        status = 0;
    } else {
        log_warn("second signal: exiting at once");
        worker_stop(w);
        pthread_join(dt, NULL);
        status = 0;
    }
done:
    api_stop(api);
    worker_free(w);
    local_registry_free(local);
    sbx_pool_free(pool);
    store_close(db);
    secret_free(token);
    secret_free(evsecret);
    g_have_main = 0;
    log_info("daemon exited", LOG_I("status", status));
    return status;
}
