/* common/thread: how a thread that waits on a condition variable is ended:
 * its stop flag is set under the lock it waits with (so the stop cannot fall
 * between its check and its wait), every waiter is woken, and it is joined. */
#ifndef FPS_THREAD_H
#define FPS_THREAD_H
#include <pthread.h>

/* Sets *stop to 1 under mu, broadcasts cv and joins th (all borrowed). */
void thread_stop_join(pthread_t th, pthread_mutex_t *mu, pthread_cond_t *cv, int *stop);

#endif
