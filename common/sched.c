/* common/sched: see sched.h. */
#include "common/sched.h"

#include "common/timeutil.h"

void sched_run(const sched_loop *l)
{
    pthread_mutex_lock(l->mu);
    while (!*l->stopping) {
        int64_t next = INT64_MAX;
        void *item = l->pick(l->ud, time_mono_ms(), &next);
        if (item == NULL) {
            time_cond_wait_until(l->cv, l->mu, next);
            continue;
        }
        pthread_mutex_unlock(l->mu);
        int result = l->serve(l->ud, item);
        pthread_mutex_lock(l->mu);
        l->served(l->ud, item, result);
    }
    pthread_mutex_unlock(l->mu);
}

int sched_due(int64_t due_ms, int64_t now_ms, int64_t *next_ms)
{
    if (due_ms <= now_ms) return 1;
    if (due_ms < *next_ms) *next_ms = due_ms;
    return 0;
}
