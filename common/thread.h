/* common/thread: how a thread that waits on a condition variable is ended:
 * its stop flag is set under the lock it waits with (so the stop cannot fall
 * between its check and its wait), every waiter is woken, and it is joined;
 * and how a background thread yields the CPU to the live work. */
#ifndef FPS_THREAD_H
#define FPS_THREAD_H
#include <pthread.h>

/* Sets *stop to 1 under mu, broadcasts cv and joins th (all borrowed). */
void thread_stop_join(pthread_t th, pthread_mutex_t *mu, pthread_cond_t *cv, int *stop);

/* Lowers the calling thread's scheduling priority by `by` nice steps from
 * what it has now (capped at 19), as nice(1) does: relative, so a sidecar
 * started under `nice -n 10` keeps its background threads below its own
 * priority instead of raising them to an absolute value. Best-effort: a
 * failure leaves the priority as it was. Threads it starts inherit it. */
void thread_nice_self(int by);

#endif
