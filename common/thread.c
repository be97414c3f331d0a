/* common/thread: see thread.h. */
#include "common/thread.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void thread_stop_join(pthread_t th, pthread_mutex_t *mu, pthread_cond_t *cv, int *stop)
{
    pthread_mutex_lock(mu);
    *stop = 1;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
    pthread_join(th, NULL);
}

void thread_nice_self(int by)
{
    if (by <= 0) return;
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, tid); /* -1 is a valid nice value */
    if (now == -1 && errno != 0) return;
    int want = now + by > 19 ? 19 : now + by;
    (void)setpriority(PRIO_PROCESS, tid, want);
}
