/* api/slow: slow clients: every open connection is tracked, and a sweeper
 * thread closes those whose request headers are not complete in time; and the
 * connection limit those slots come from. */
#include "api/internal.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/timeutil.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

/* ------------------------------------------------------- slow clients */

/* libmicrohttpd 0.9.75 has no deadline for request headers: its idle
 * timeout restarts with every byte, so a client sending one header byte at
 * a time holds a connection slot for ever. The sweeper closes a connection
 * whose headers are not complete API_HEADER_DEADLINE_MS after it was
 * accepted (or after its previous request finished); when three quarters of
 * the slots are taken it allows only API_HEADER_PRESSURE_MS, so slots stay
 * free for probes, whose headers arrive at once. Closing is a shutdown() of
 * MHD's socket, under conns_mu: MHD reports the connection closed (and only
 * then closes the descriptor) through on_connection, which takes the same
 * lock, so the descriptor is always still MHD's. */
#define API_HEADER_DEADLINE_MS 5000
#define API_HEADER_PRESSURE_MS 1000
#define API_SWEEP_INTERVAL_MS 250
#define METRIC_ADMIN_SLOW_CLOSED "failproofai_sidecar_admin_slow_connections_closed_total"

api_conn *api_conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i != NULL ? i->socket_context : NULL;
}

void api_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    api_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        api_conn *c = calloc(1, sizeof *c);
        if (c == NULL || i == NULL) {
            free(c);
            return;
        }
        c->fd = i->connect_fd;
        atomic_store(&c->since_ms, time_mono_ms());
        pthread_mutex_lock(&srv->conns_mu);
        c->next = srv->conns;
        if (srv->conns) srv->conns->prev = c;
        srv->conns = c;
        srv->nconns++;
        pthread_mutex_unlock(&srv->conns_mu);
        *socket_context = c;
        return;
    }
    api_conn *c = *socket_context;
    if (c == NULL) return;
    pthread_mutex_lock(&srv->conns_mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    srv->nconns--;
    pthread_mutex_unlock(&srv->conns_mu);
    free(c);
    *socket_context = NULL;
}

void *api_sweep_main(void *arg)
{
    api_server *srv = arg;
    while (!atomic_load(&srv->stopping)) {
        struct timespec ts = {0, (long)API_SWEEP_INTERVAL_MS * 1000 * 1000};
        nanosleep(&ts, NULL);
        int64_t now = time_mono_ms();
        int swept = 0;
        pthread_mutex_lock(&srv->conns_mu);
        int64_t limit = (unsigned)srv->nconns * 4 > srv->conn_limit * 3 ? API_HEADER_PRESSURE_MS
                                                                        : API_HEADER_DEADLINE_MS;
        for (api_conn *c = srv->conns; c != NULL; c = c->next) {
            if (c->swept || atomic_load(&c->in_request) || now - atomic_load(&c->since_ms) < limit)
                continue;
            shutdown(c->fd, SHUT_RDWR);
            c->swept = 1;
            swept++;
        }
        pthread_mutex_unlock(&srv->conns_mu);
        if (swept > 0) {
            metrics_add(METRIC_ADMIN_SLOW_CLOSED, (double)swept);
            log_debug("closed connections without complete request headers",
                      LOG_I("connections", swept), LOG_I("deadline_ms", (long long)limit));
        }
    }
    return NULL;
}

/* Connection slots: many more than any honest load needs (slow clients are
 * swept, so slots are cheap), within the descriptors the process may open. */
unsigned api_connection_limit(void)
{
    struct rlimit rl;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    rlim_t lim = n > 512 + 256 ? n - 256 : 512;
    return (unsigned)(lim > 4096 ? 4096 : lim);
}
