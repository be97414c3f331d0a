/* sidecar/daemon: the body of `failproofai-sidecar run` (and of the demo's
 * embedded sidecar): token, store, jail pool, local registry, admin API,
 * worker; signal handling (first SIGTERM/SIGINT drains, a second exits at
 * once). */
#ifndef FPS_DAEMON_H
#define FPS_DAEMON_H
#include "sidecar/config.h"

#include <signal.h>

/* Runs the daemon until a signal in `sigs` (already blocked in every thread
 * by the caller, see daemon_block_signals) ends it. Returns the exit status
 * (0 after a clean drain). */
int daemon_run(const run_config *cfg);
/* Blocks SIGTERM, SIGINT and SIGUSR1 in the calling thread (do it before
 * creating threads so they inherit the mask). */
void daemon_block_signals(void);
/* Asks a running daemon_run to drain and exit (as SIGTERM would); callable
 * from any thread. */
void daemon_request_stop(void);

#endif
