/* api/api: the admin server's life cycle: libmicrohttpd setup (internal
 * thread pool over epoll, connection limit and idle timeout, the listen
 * address and its loopback rule), the slow-client sweeper beside it and the
 * orderly stop. A request's own way through lives in request.c. The metric
 * counters the API shows are persisted by the store, on the daemon's
 * schedule; the API only reads them. */
#include "api/internal.h"
#include "common/log.h"
#include "common/loopback.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    log_debug("admin http", LOG_S("detail", msg));
}

/* ------------------------------------------------------------ lifecycle */

/* An integer setting from the environment: dflt when unset; a value that is
 * not a decimal in lo..hi is ignored with a warning that names the variable
 * and its range. */
static long env_setting(const char *name, long lo, long hi, long dflt)
{
    const char *e = getenv(name);
    if (e == NULL) return dflt;
    char *end;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (*e != '\0' && *end == '\0' && errno == 0 && v >= lo && v <= hi) return v;
    log_warn("admin API: ignoring a setting that is not an integer in its range",
             LOG_S("variable", name), LOG_S("value", e), LOG_I("min", lo), LOG_I("max", hi));
    return dflt;
}

/* One event loop per core (2..8): handlers are short and CPU-bound (store
 * reads, JSON); the slow one (/v1/evaluate) runs on its own job thread. */
static unsigned pool_threads(void)
{
    long v = env_setting("FAILPROOFAI_SIDECAR_ADMIN_THREADS", 1, 64, 0);
    if (v > 0) return (unsigned)v;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return (unsigned)(n < 2 ? 2 : n > 8 ? 8 : n);
}

/* Nice steps the admin API's threads go below the process (FAILPROOFAI_SIDECAR_ADMIN_NICE,
 * 0..19; default 0). Measured with tests/bench/api: nice 10 barely changed the
 * worker's throughput under a wrk flood (the flood's cost is mostly wrk and
 * the kernel) but made the API's p99 ten times worse while the worker ran, so
 * it is off unless an operator wants the API to yield harder. */
static int admin_nice(void)
{
    return (int)env_setting("FAILPROOFAI_SIDECAR_ADMIN_NICE", 0, 19, 0);
}

/* The list routes' response cache (FAILPROOFAI_SIDECAR_ADMIN_CACHE=0 turns it
 * off, e.g. to compare with tests/bench/api; default on). */
static int cache_enabled(void)
{
    const char *e = getenv("FAILPROOFAI_SIDECAR_ADMIN_CACHE");
    return e == NULL || strcmp(e, "0") != 0;
}

/* Seconds an idle connection is kept (FAILPROOFAI_SIDECAR_ADMIN_IDLE_TIMEOUT,
 * 1..3600; default 15). */
static unsigned conn_timeout_s(void)
{
    return (unsigned)env_setting("FAILPROOFAI_SIDECAR_ADMIN_IDLE_TIMEOUT", 1, 3600, 15);
}

int api_listen_split(const char *listen, char *host, size_t cap, int *port, fps_err *err)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    char *end = NULL;
    long n = colon ? strtol(colon + 1, &end, 10) : -1;
    if (colon == NULL || colon == listen || colon[1] == '\0' || *end != '\0' || n < 0 ||
        n > 65535 || cap == 0) {
        fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: --listen '%s' is not HOST:PORT",
                    listen ? listen : "");
        return -1;
    }
    size_t hl = (size_t)(colon - listen);
    const char *h = loopback_unbracket(listen, &hl);
    if (hl >= cap) hl = cap - 1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (port != NULL) *port = (int)n;
    return 0;
}

api_server *api_start(const api_deps *deps, fps_err *err)
{
    api_server *srv = calloc(1, sizeof *srv);
    struct addrinfo *ai = NULL;
    if (srv == NULL) {
        fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: out of memory");
        return NULL;
    }
    srv->deps = *deps;
    srv->started_at = time_now();
    if (cache_enabled()) {
        srv->cache = api_cache_new();
        if (srv->cache == NULL) {
            free(srv);
            fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: out of memory");
            return NULL;
        }
    }
    srv->nice = admin_nice();
    srv->eval_max = deps->cfg.evaluate_max > 0 ? deps->cfg.evaluate_max : API_MAX_EVALUATE_JOBS;
    pthread_mutex_init(&srv->build_mu, NULL);
    pthread_mutex_init(&srv->conns_mu, NULL);
    srv->conn_limit = api_connection_limit();
    const api_config *cfg = &deps->cfg;
    srv->admin_token = cfg->admin_token;
    srv->reg_token = cfg->registration_token;
    /* listen address */
    const char *listen = cfg->listen ? cfg->listen : "127.0.0.1:8787";
    if (api_listen_split(listen, srv->listen_host, sizeof srv->listen_host, NULL, err) != 0)
        goto fail;
    const char *colon = strrchr(listen, ':');
    srv->remote = !api_name_is_loopback(srv->listen_host);
    if (srv->remote && (!cfg->allow_remote_admin || srv->admin_token == NULL || cfg->open_admin)) {
        fps_err_set(err, API_ESTART, 0, "cannot_start",
                    "admin API: --listen %s is not loopback; it needs --allow-remote-admin and "
                    "an admin token",
                    listen);
        goto fail;
    }
    /* A loopback --listen is an address, never a lookup: the name localhost
     * is pinned to 127.0.0.1, or /etc/hosts or DNS could put the admin API,
     * still treated as loopback, on any address. */
    struct in6_addr numeric;
    const char *bind_host = srv->listen_host;
    if (!srv->remote && inet_pton(AF_INET, bind_host, &numeric) != 1 &&
        inet_pton(AF_INET6, bind_host, &numeric) != 1)
        bind_host = "127.0.0.1";
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags =
                                 AI_PASSIVE | AI_NUMERICSERV | (srv->remote ? 0 : AI_NUMERICHOST)};
    int gai = getaddrinfo(bind_host, colon + 1, &hints, &ai);
    if (gai != 0 || ai == NULL) {
        fps_err_set(err, API_ESTART, 0, "cannot_start", "admin API: cannot resolve --listen %s: %s",
                    listen, gai_strerror(gai));
        goto fail;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_TURBO | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    srv->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, api_on_request, srv, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, pool_threads(), MHD_OPTION_CONNECTION_LIMIT, srv->conn_limit,
        MHD_OPTION_NOTIFY_CONNECTION, api_on_connection, srv, MHD_OPTION_CONNECTION_TIMEOUT,
        conn_timeout_s(), MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32 * 1024,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)256, MHD_OPTION_NOTIFY_COMPLETED,
        api_on_completed, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
    if (srv->mhd == NULL) {
        fps_err_set(err, API_ESTART, 0, "cannot_start",
                    "admin API: cannot listen on %s (address in use or not local?)", listen);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : 0;
    if (cfg->on_bound) cfg->on_bound(srv->port, cfg->on_bound_ud);
    freeaddrinfo(ai);
    ai = NULL;
    if (pthread_create(&srv->sweep_thread, NULL, api_sweep_main, srv) == 0) srv->sweep_started = 1;
    log_info("admin API listening", LOG_S("listen", listen), LOG_I("port", srv->port),
             LOG_B("admin_token", srv->admin_token != NULL),
             LOG_B("registration_token", srv->reg_token != NULL),
             LOG_B("open_admin", cfg->open_admin));
    return srv;
fail:
    if (ai) freeaddrinfo(ai);
    api_cache_free(srv->cache);
    pthread_mutex_destroy(&srv->build_mu);
    pthread_mutex_destroy(&srv->conns_mu);
    free(srv);
    return NULL;
}

int api_port(const api_server *srv)
{
    return srv ? srv->port : 0;
}

void api_stop(api_server *srv)
{
    if (srv == NULL) return;
    atomic_store(&srv->stopping, 1);
    atomic_store(&srv->eval_cancel, 1);
    if (srv->sweep_started) pthread_join(srv->sweep_thread, NULL);
    /* Suspended connections must be resumed before MHD stops: wait for the
     * evaluation jobs (bounded by their deadline; the pool's cancel flag is
     * the caller's business when it stops the pool). */
    for (int i = 0; i < 7000 && atomic_load(&srv->eval_jobs) > 0; i++) {
        struct timespec ts = {0, (long)10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(srv->mhd);
    api_cache_metrics(srv);
    api_cache_free(srv->cache);
    pthread_mutex_destroy(&srv->build_mu);
    pthread_mutex_destroy(&srv->conns_mu);
    free(srv);
}
