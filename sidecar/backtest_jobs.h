/* sidecar/backtest_jobs: the admin API's backtests (api_backtest_ops): at
 * most one queued or running at a time over the archive beside the state
 * database, on the sandbox pool's background budget. A finished one is
 * saved in the store (store_backtest_put, with its rows; the store keeps
 * the last STORE_BACKTESTS_KEPT within STORE_BACKTESTS_MAX_BYTES, pruned
 * with the history) by backtest_jobs_tick, and then served from there, so
 * it survives a restart; until saved (or when the store refuses it) it is
 * served from memory. Thread-safe. */
#ifndef FPS_BACKTEST_JOBS_H
#define FPS_BACKTEST_JOBS_H
#include "api/api.h"
#include "store/store.h"

typedef struct backtest_jobs backtest_jobs;

/* pool, st and db_path borrowed (outlive the registry); jobs: sessions at
 * once (--backtest-sandboxes); retention_hours <= 0: no age bound for the
 * ones kept in memory (the store prunes its own with the history). */
backtest_jobs *backtest_jobs_new(sbx_pool *pool, store *st, const char *db_path, int jobs,
                                 double retention_hours);
/* Saves the backtests that finished since the last call; a periodic job
 * (ud: the registry). */
void backtest_jobs_tick(void *j);
/* Cancels the running one, saves every finished one (the cancelled too),
 * frees. NULL is a no-op. */
void backtest_jobs_free(backtest_jobs *j);
/* The ops table over j. */
api_backtest_ops backtest_jobs_ops(backtest_jobs *j);

#endif
