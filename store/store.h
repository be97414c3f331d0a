/* store/: SQLite persistence of leases, runs, the result outbox and metrics. */
#ifndef FPS_STORE_H
#define FPS_STORE_H

typedef struct store store;

#endif
