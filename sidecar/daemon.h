/* sidecar/daemon: the body of `failproofai-sidecar run` (and of the demo's
 * embedded sidecar): token, store, jail pool, local registry, admin API,
 * worker; signal handling (first SIGTERM/SIGINT drains, a second exits at
 * once). */
#ifndef FPS_DAEMON_H
#define FPS_DAEMON_H
#include "api/api.h"
#include "sidecar/config.h"
#include "sidecar/local/local.h"
#include "sidecar/worker/worker.h"

#include <signal.h>

/* Runs the daemon until a signal in `sigs` (already blocked in every thread
 * by the caller, see daemon_block_signals) ends it. Returns the exit status
 * (0 after a clean drain). */
int daemon_run(const run_config *cfg);
/* Blocks SIGTERM, SIGINT and SIGUSR1 in the calling thread (do it before
 * creating threads so they inherit the mask). */
void daemon_block_signals(void);
/* The admin API's function tables over the worker and the local registry
 * (borrowed; NULL gives a table whose routes answer 503). */
api_worker_ops daemon_api_worker_ops(worker *w);
api_local_ops daemon_api_local_ops(local_registry *r);

#endif
