/* sidecar/worker/outbox_schedule: when the outbox tries a pending result
 * again (outbox.c applies it after every attempt that did not settle the
 * entry). Pure functions of their arguments, any thread; unit-tested
 * (tests/unit/test_outbox.c). */
#ifndef FPS_OUTBOX_SCHEDULE_H
#define FPS_OUTBOX_SCHEDULE_H
#include <stdint.h>

/* The pause after an attempt that sent nothing (the store could not give
 * the bytes back, or the worker is stopping): the server's backoff says
 * nothing then. */
#define OUTBOX_NOT_SENT_PAUSE_MS 1000

/* The backoff without a retry_delay_ms hook, after `attempts` failed
 * attempts: 1 s for 0 (or fewer), doubling with each attempt up to 32 s
 * from 5 attempts on. */
int64_t outbox_default_backoff_ms(int attempts);

/* The delay before an entry's next attempt: OUTBOX_NOT_SENT_PAUSE_MS when
 * the last attempt sent nothing (sent == 0), else backoff_ms. No delay
 * outlasts the lease the result belongs to: while the lease (lease_end,
 * wall clock seconds; <= 0 = unknown) still has time left at `now`, a delay
 * longer than half of that time is cut to half of it (whole milliseconds,
 * rounded down), so the result is tried again before the lease ends. Once
 * the lease is over, the delay stands. */
int64_t outbox_retry_delay_ms(int sent, int64_t backoff_ms, double lease_end, double now);

#endif
