/* sidecar/daemon: see daemon.h. The main thread waits in sigwait (no
 * polling); SIGTERM/SIGINT start the drain (so an orchestrator needs no
 * preStop hook), and the drain waiter thread wakes it with SIGUSR1 when
 * in-flight work and the outbox are done or the drain timeout passed. The
 * daemon also owns the admin API's two tokens: read from the configured
 * files or generated at first start beside the database (for a ":memory:"
 * database, which has no directory, into a private temporary directory
 * that lives as long as the process), and the schedule of the metric
 * counters' persistence: restored from the store at start, saved every
 * COUNTERS_PERSIST_MS on its periodic thread (common/periodic.h) and once more
 * after every part that moves them has stopped. */
#include "sidecar/daemon.h"

#include "common/log.h"
#include "common/procmem.h"
#include "common/secret.h"
#include "common/secret_watch.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/backtest_jobs.h"
#include "common/periodic.h"
#include "common/timeutil.h"
#include "store/archive.h"
#include "store/store.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How often the metric counters are saved while running (and once more at
 * exit): a crash loses at most this much of their increments. */
#define COUNTERS_PERSIST_MS 10000

/* How often a finished backtest of the admin API is looked for and saved in
 * the store (it is served from memory until then). */
#define BACKTESTS_SAVE_MS 1000

/* periodic job (ud: the archive, borrowed): the age bound holds while no
 * transcript arrives (an insert evicts too, but only when one comes). */
static void prune_archive(void *ud)
{
    store_err e = {0};
    size_t n = 0;
    if (store_archive_prune(ud, time_now(), &n, &e) != STORE_OK)
        log_warn("could not evict old archived transcripts", LOG_S("error", e.msg));
    else if (n > 0)
        log_debug("old archived transcripts evicted", LOG_I("entries", (long long)n));
}

/* periodic job (ud: the store, borrowed) */
static void persist_counters(void *ud)
{
    store_err e = {0};
    if (store_metrics_persist(ud, &e) != STORE_OK)
        log_warn("could not save metric counters", LOG_S("error", e.msg));
}

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

/* ---- the admin API's view of the worker and the registry ----------------
 * The api layer sits below the daemon and reaches these two through
 * function tables; the adapters below are the only place that joins them. */

static int api_w_ready(void *ctx, strbuf *reason)
{
    return worker_ready(ctx, reason);
}
static json_t *api_w_status(void *ctx)
{
    return worker_status_json(ctx);
}
static void api_w_drain(void *ctx)
{
    worker_pause(ctx);
}
static int api_w_resume(void *ctx)
{
    return worker_resume(ctx);
}
static sbx_image *api_w_image(void *ctx, const char *assignment_id)
{
    return worker_recent_image(ctx, assignment_id);
}
static json_t *api_l_list(void *ctx)
{
    return local_registry_list(ctx);
}
static json_t *api_l_get(void *ctx, const char *name)
{
    return local_registry_get(ctx, name);
}
static local_caller caller_of(const api_caller *who)
{
    local_caller c = {who->admin, who->owner_secret};
    return c;
}
static int api_l_put(void *ctx, const char *name, const json_t *body, const api_caller *who,
                     json_t **out, fps_err *e)
{
    local_caller c = caller_of(who);
    return local_registry_put(ctx, name, body, &c, out, e);
}
static int api_l_heartbeat(void *ctx, const char *name, const api_caller *who, json_t **out,
                           fps_err *e)
{
    local_caller c = caller_of(who);
    return local_registry_heartbeat(ctx, name, &c, out, e);
}
static int api_l_remove(void *ctx, const char *name, const api_caller *who, fps_err *e)
{
    local_caller c = caller_of(who);
    return local_registry_delete(ctx, name, &c, e);
}
static int api_l_count(void *ctx, int *definitions)
{
    return local_registry_count(ctx, definitions);
}

api_worker_ops daemon_api_worker_ops(worker *w)
{
    api_worker_ops o = {.ctx = w,
                        .ready = api_w_ready,
                        .status_json = api_w_status,
                        .drain = api_w_drain,
                        .resume = api_w_resume,
                        .recent_image = api_w_image};
    return o;
}

api_local_ops daemon_api_local_ops(local_registry *r)
{
    api_local_ops o = {.ctx = r,
                       .list = api_l_list,
                       .get = api_l_get,
                       .put = api_l_put,
                       .heartbeat = api_l_heartbeat,
                       .remove = api_l_remove,
                       .count = api_l_count};
    return o;
}

/* Where generated tokens live: "<db>" as the prefix of "<db>.<suffix>"
 * beside a database file. A ":memory:" database has no directory (the
 * prefix would be the literal ":memory:" in the working directory), so its
 * tokens go into a fresh mode-0700 directory under $TMPDIR (or /tmp),
 * written into `tmpdir` so that shutdown removes it: they are as ephemeral
 * as the database. 0, or -1 with the reason logged. */
static int token_prefix(const char *db_path, char *prefix, size_t cap, char *tmpdir, size_t tmpcap)
{
    tmpdir[0] = '\0';
    if (strcmp(db_path, ":memory:") != 0) {
        snprintf(prefix, cap, "%s", db_path);
        return 0;
    }
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] != '/') base = "/tmp";
    snprintf(tmpdir, tmpcap, "%s/failproofai-sidecar.XXXXXX", base);
    if (mkdtemp(tmpdir) == NULL) {
        log_error("cannot create a directory for the generated admin API tokens",
                  LOG_S("path", tmpdir), LOG_S("error", strerror(errno)));
        tmpdir[0] = '\0';
        return -1;
    }
    snprintf(prefix, cap, "%s/memory", tmpdir);
    return 0;
}

/* The generated tokens' files: "<prefix>.<suffix>". */
static const char ADMIN_SUFFIX[] = "admin-token", REGISTRATION_SUFFIX[] = "registration-token";

/* Removes what token_prefix created for a ":memory:" database. */
static void token_dir_remove(const char *tmpdir, const char *prefix)
{
    static const char *const suffixes[] = {ADMIN_SUFFIX, REGISTRATION_SUFFIX};
    char path[4200];
    if (tmpdir[0] == '\0') return;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(path, sizeof path, "%s.%s", prefix, suffixes[i]);
        unlink(path);
    }
    rmdir(tmpdir);
}

/* One admin API token: read from `file` when configured, else from (or
 * generated into) "<prefix>.<suffix>", mode 0600. Logs the path, never the
 * value. NULL (logged) on failure. */
static secret *load_token(const char *what, const char *file, const char *prefix,
                          const char *suffix)
{
    char path[4200];
    fps_err err;
    int created = 0;
    secret *t;
    if (file != NULL) {
        t = secret_from_file(file, &err);
        snprintf(path, sizeof path, "%s", file);
    } else {
        snprintf(path, sizeof path, "%s.%s", prefix, suffix);
        t = secret_load_or_create(path, &created, &err);
    }
    if (t == NULL) {
        log_error("cannot read the admin API token", LOG_S("which", what), LOG_S("error", err.msg));
        return NULL;
    }
    log_info(created ? "admin API token generated" : "admin API token loaded", LOG_S("which", what),
             LOG_S("path", path));
    return t;
}

/* The archive's writer asks the memory budget (ud: the worker, borrowed). */
static int archive_hold(void *ud, int64_t bytes)
{
    return worker_memory_hold(ud, (unsigned long long)bytes) ? 0 : -1;
}

static void archive_unhold(void *ud, int64_t bytes)
{
    worker_memory_unhold(ud, (unsigned long long)bytes);
}

/* The admin API's address as the local registry learns it (api on_bound). */
typedef struct {
    local_registry *local; /* borrowed */
    char host[256];        /* --listen's host */
} admin_addr;

static void admin_bound(int port, void *ud)
{
    admin_addr *aa = ud;
    if (port > 0) local_registry_set_admin_address(aa->local, aa->host, port);
}

/* The transcript archive (--archive-max-mb > 0), "<db>.archive" beside the
 * state database. Best-effort like everything it does: a failure to open it
 * is logged and the daemon runs without it. NULL when off. */
static store_archive *open_archive(const run_config *cfg)
{
    char path[4200];
    if (cfg->archive_max_mb <= 0) return NULL;
    if (strcmp(cfg->db_path, ":memory:") == 0) {
        log_warn("--archive-max-mb needs a database file (the archive lives beside it): off");
        return NULL;
    }
    if (store_archive_path_for(cfg->db_path, path, sizeof path) != 0) return NULL;
    store_archive_options ao = {.path = path,
                                .state_db_path = cfg->db_path,
                                .max_bytes = (int64_t)cfg->archive_max_mb << 20,
                                .max_age_s = cfg->archive_max_age_hours * 3600};
    store_archive *a = NULL;
    store_err e;
    if (store_archive_open(&ao, &a, &e) != STORE_OK) {
        log_error("cannot open the transcript archive; running without it", LOG_S("path", path),
                  LOG_S("error", e.msg));
        return NULL;
    }
    log_info("transcript archive on", LOG_S("path", path),
             LOG_I("max_mb", (long long)cfg->archive_max_mb),
             LOG_D("max_age_hours", cfg->archive_max_age_hours));
    return a;
}

int daemon_run(const run_config *cfg)
{
    char token_path[4096] = "", token_tmpdir[4096] = "";
    fps_err err;
    int status = 1;
    secret *token = NULL, *admin_token = NULL, *reg_token = NULL;
    sbx_pool *pool = NULL;
    local_registry *local = NULL;
    api_server *api = NULL;
    worker *w = NULL;
    store *db = NULL;
    store_archive *archive = NULL;
    secret_watch *watch = NULL;
    backtest_jobs *backtests = NULL;
    periodic *timers = NULL;
    log_level lvl;
    if (log_parse_level(cfg->log_level, &lvl) == 0) log_set_level(lvl);
    /* Few malloc arenas: the threads are mostly idle and each arena keeps
     * its own free pages (idle RSS). */
    mallopt(M_ARENA_MAX, 1);
    /* Large blocks (transcripts, session images) are mapped on their own and
     * unmapped when freed, whatever sizes came before: glibc's sliding
     * threshold would otherwise move them into the heap after the first
     * one is freed, where freed memory stays resident (the memory budget
     * counts resident memory). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    g_main = pthread_self();
    g_have_main = 1;
    daemon_block_signals();

    if (cfg->token_file != NULL) {
        token = secret_from_file(cfg->token_file, &err);
        if (token == NULL) {
            log_error("cannot read the token file", LOG_S("path", cfg->token_file),
                      LOG_S("error", err.msg));
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
    so.maintenance_interval_s = 60;
    store_err se;
    if (store_open(&so, &db, &se) != STORE_OK) {
        /* Refuse to run without durability. */
        log_error("cannot open the store", LOG_S("path", cfg->db_path), LOG_S("error", se.msg));
        goto done;
    }
    /* Counters continue from where the previous run saved them, before
     * anything moves one. */
    size_t restored = 0;
    if (store_metrics_restore(db, &restored, &se) != STORE_OK)
        log_warn("could not load metric counters", LOG_S("error", se.msg));
    else
        log_debug("metric counters restored", LOG_I("series", (long long)restored));
    archive = open_archive(cfg);
    sbx_config sc;
    memset(&sc, 0, sizeof sc);
    sc.max_sandboxes = (int)cfg->max_sandboxes;
    sc.playground_max = (int)cfg->playground_sandboxes;
    sc.memory_mb = cfg->sandbox_memory_mb;
    fps_err pe;
    pool = sbx_pool_new(&sc, &pe);
    if (pool == NULL) {
        log_error("cannot create the sandbox pool", LOG_S("error", pe.msg));
        goto done;
    }
    /* The memory budget covers the tree as it is now (the daemon, the
     * zygote, its pre-started children) plus what work adds. */
    unsigned long long mem_limit = 0, mem_base = 0;
    {
        char source[600];
        if (config_memory_budget(cfg, &mem_limit, source, sizeof source, &err) != 0) {
            log_error("cannot read the memory limit", LOG_S("error", err.msg));
            goto done;
        }
        procmem_sample ps;
        if (procmem_tree(getpid(), &ps) == 0) mem_base = ps.rss + ps.memfd;
        if (config_check_budget(cfg, mem_limit, mem_base, &err) != 0) {
            log_error("memory budget too small", LOG_S("error", err.msg));
            fprintf(stderr, "failproofai-sidecar: %s\n", err.msg);
            status = 2;
            goto done;
        }
        if (mem_limit)
            log_info("memory budget", LOG_I("budget_mb", (long long)(mem_limit >> 20)),
                     LOG_S("from", source), LOG_I("base_mb", (long long)(mem_base >> 20)),
                     LOG_I("sandbox_reserve_mb", cfg->sandbox_reserve_mb));
        else
            log_info("no memory budget (no --memory-limit-mb and no cgroup limit)");
    }
    local_config lc;
    memset(&lc, 0, sizeof lc);
    lc.pool = pool;
    lc.db = db;
    lc.allowed_hosts = &cfg->evaluator_hosts;
    local = local_registry_new(&lc, &err);
    if (local == NULL) {
        log_error("cannot create the local evaluator registry", LOG_S("error", err.msg));
        goto done;
    }
    /* --recent-max-mb 0 is no ring (worker_config: < 0) */
    long long recent_max = cfg->recent_max_mb > 0 ? (long long)cfg->recent_max_mb << 20 : -1;
    worker_deps wd = {.cfg = {.server_url = cfg->server_url,
                              .ca_bundle = cfg->ca_bundle,
                              .worker_id = cfg->worker_id,
                              .concurrency = cfg->concurrency,
                              .max_sandboxes = cfg->max_sandboxes,
                              .request_timeout = cfg->request_timeout,
                              .drain_timeout = cfg->drain_timeout,
                              .memory_limit = mem_limit,
                              .memory_base = mem_base,
                              .sandbox_reserve = (unsigned long long)cfg->sandbox_reserve_mb << 20,
                              .sandbox_memory = (unsigned long long)cfg->sandbox_memory_mb << 20,
                              .recent_max = recent_max},
                      .token = token,
                      .store = db,
                      .pool = pool,
                      .local = local,
                      .archive = archive};
    w = worker_new(&wd, &err);
    if (w == NULL) {
        log_error("cannot create the worker", LOG_S("error", err.msg));
        goto done;
    }
    /* every sandbox of the tree, and the archive's writer, within the budget */
    worker_gate_pool(w);
    if (archive != NULL && mem_limit != 0)
        store_archive_set_memory(archive, archive_hold, archive_unhold, w);
    if (cfg->insecure_open_admin) {
        log_warn("--insecure-open-admin: the admin API asks no token; any local process may "
                 "drain, run /v1/evaluate and register or replace evaluators");
    } else {
        if (token_prefix(cfg->db_path, token_path, sizeof token_path, token_tmpdir,
                         sizeof token_tmpdir) != 0)
            goto done;
        admin_token = load_token("admin", cfg->admin_token_file, token_path, ADMIN_SUFFIX);
        reg_token = load_token("registration", cfg->registration_token_file, token_path,
                               REGISTRATION_SUFFIX);
        if (admin_token == NULL || reg_token == NULL) goto done;
    }
    /* Tokens given as files follow their rotation (a token from the
     * environment cannot rotate; generated ones are ours and do not). */
    watch = secret_watch_new();
    if (watch == NULL) goto done;
    if ((cfg->token_file && secret_watch_add(watch, token, cfg->token_file, "server", &err)) ||
        (admin_token && cfg->admin_token_file &&
         secret_watch_add(watch, admin_token, cfg->admin_token_file, "admin", &err)) ||
        (reg_token && cfg->registration_token_file &&
         secret_watch_add(watch, reg_token, cfg->registration_token_file, "registration", &err))) {
        log_error("cannot watch the token files", LOG_S("error", err.msg));
        goto done;
    }
    /* Backtests run over the archive, so only with it. */
    if (archive != NULL)
        backtests = backtest_jobs_new(pool, db, cfg->db_path, (int)cfg->backtest_sandboxes,
                                      cfg->retention_hours);
    {
        periodic_job jobs[3] = {{"metric counters", COUNTERS_PERSIST_MS, persist_counters, db}};
        size_t njobs = 1;
        if (archive && cfg->archive_max_age_hours > 0)
            jobs[njobs++] =
                (periodic_job){"archive age", (int64_t)(cfg->archive_prune_seconds * 1000),
                               prune_archive, archive};
        if (backtests)
            jobs[njobs++] = (periodic_job){"finished backtests", BACKTESTS_SAVE_MS,
                                           backtest_jobs_tick, backtests};
        timers = periodic_start("fps-periodic", jobs, njobs, &err);
        if (timers == NULL) {
            log_error("cannot start the daemon's periodic jobs", LOG_S("error", err.msg));
            goto done;
        }
    }
    /* The local registry refuses the admin API's own address as an endpoint:
     * it knows a configured port before the API accepts anything, and the
     * kernel's (--listen HOST:0) before the API says where it listens. */
    admin_addr aa = {.local = local};
    int configured_port = 0;
    if (api_listen_split(cfg->listen, aa.host, sizeof aa.host, &configured_port, &err) != 0) {
        log_error("cannot start the admin API", LOG_S("error", err.msg));
        goto done;
    }
    admin_bound(configured_port, &aa);
    api_deps ad = {.cfg = {.listen = cfg->listen,
                           .admin_hosts = &cfg->admin_hosts,
                           .admin_token = admin_token,
                           .registration_token = reg_token,
                           .open_admin = cfg->insecure_open_admin,
                           .allow_remote_admin = cfg->allow_remote_admin,
                           .evaluate_max = (int)(cfg->playground_sandboxes + cfg->playground_queue),
                           .on_bound = admin_bound,
                           .on_bound_ud = &aa},
                   .db = db,
                   .pool = pool,
                   .worker = daemon_api_worker_ops(w),
                   .local = daemon_api_local_ops(local),
                   .backtest = backtests ? backtest_jobs_ops(backtests) : (api_backtest_ops){0},
                   .archive = archive};
    api = api_start(&ad, &err);
    if (api == NULL) {
        log_error("cannot start the admin API", LOG_S("listen", cfg->listen),
                  LOG_S("error", err.msg));
        goto done;
    }
    if (cfg->on_listening) cfg->on_listening(api_port(api), cfg->on_listening_ud);
    if (worker_start(w, &err) != 0) {
        log_error("cannot start the worker", LOG_S("error", err.msg));
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
    periodic_stop(timers);
    api_stop(api);
    backtest_jobs_free(backtests);
    /* nothing but the worker evaluates any more, nothing else holds memory */
    if (archive != NULL) store_archive_set_memory(archive, NULL, NULL, NULL);
    worker_ungate_pool(w);
    worker_free(w);
    store_archive_close(archive); /* after the worker: nothing submits any more */
    local_registry_free(local);
    sbx_pool_free(pool);
    if (db != NULL) persist_counters(db); /* every producer has stopped */
    store_close(db);
    secret_watch_free(watch); /* before the secrets it rotates */
    secret_free(token);
    secret_free(admin_token);
    secret_free(reg_token);
    token_dir_remove(token_tmpdir, token_path);
    g_have_main = 0;
    log_info("daemon exited", LOG_I("status", status));
    return status;
}
