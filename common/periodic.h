/* common/periodic: jobs that run every so often (the daemon's metric
 * counters and finished backtests, the store's maintenance, the secret
 * files' reload), each owner's on a thread of its own driven by the one
 * scheduler loop (common/sched.h). A job runs without any lock of this
 * module, one at a time; a job that takes long delays the others of its
 * thread, so jobs are short. */
#ifndef FPS_PERIODIC_H
#define FPS_PERIODIC_H
#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

#define PERIODIC_MAX_JOBS 8

/* fps_err codes of periodic_start */
#define PERIODIC_EINVAL (-1) /* too many jobs, or one without a function or interval */
#define PERIODIC_ESTART (-2) /* out of memory, or the thread did not start */

typedef struct {
    const char *name;      /* borrowed, static: for logs */
    int64_t every_ms;      /* > 0: first run every_ms after the start, then every every_ms */
    void (*run)(void *ud); /* reports its own failures (logs); never blocks for long */
    void *ud;              /* borrowed: must outlive periodic_stop */
} periodic_job;

typedef struct periodic periodic;

/* Copies the n jobs (at most PERIODIC_MAX_JOBS) and starts their thread,
 * named thread_name (borrowed; at most 15 bytes show; NULL: unnamed). NULL
 * with *err filled if a job is malformed or the thread cannot start. */
periodic *periodic_start(const char *thread_name, const periodic_job *jobs, size_t n, fps_err *err);
/* Stops the thread (a job running finishes first) and frees; NULL is a no-op.
 * A job never runs after this returns. */
void periodic_stop(periodic *p);

#endif
