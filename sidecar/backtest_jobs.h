/* sidecar/backtest_jobs: the admin API's backtests (api_backtest_ops): at
 * most one queued or running at a time over the archive beside the state
 * database, on the sandbox pool's background budget; the finished ones are
 * kept in memory (the last 16, none older than the history's retention) for
 * their summary and rows. Thread-safe. */
#ifndef FPS_BACKTEST_JOBS_H
#define FPS_BACKTEST_JOBS_H
#include "api/api.h"

typedef struct backtest_jobs backtest_jobs;

/* pool and db_path borrowed (outlive the registry); jobs: sessions at once
 * (--backtest-sandboxes); retention_hours <= 0: no age bound. */
backtest_jobs *backtest_jobs_new(sbx_pool *pool, const char *db_path, int jobs,
                                 double retention_hours);
/* Cancels and frees every backtest. NULL is a no-op. */
void backtest_jobs_free(backtest_jobs *j);
/* The ops table over j. */
api_backtest_ops backtest_jobs_ops(backtest_jobs *j);

#endif
