/* common/periodic: see periodic.h. The items are a fixed array; pick takes
 * the first one due (marking it busy), served sets its next due time from
 * when it finished, so a slow run never makes the next one pile up. */
#include "common/periodic.h"

#include "common/thread.h"
#include "common/timeutil.h"
#include "common/sched.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
    periodic_job job;
    int64_t due_ms; /* under mu */
    int busy;       /* under mu: picked and being served */
} periodic_item;

struct periodic {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping; /* under mu */
    pthread_t th;
    size_t n;
    periodic_item items[PERIODIC_MAX_JOBS];
};

static void *pick(void *ud, int64_t now_ms, int64_t *next_ms)
{
    periodic *p = ud;
    for (size_t i = 0; i < p->n; i++) {
        periodic_item *it = &p->items[i];
        if (!it->busy && sched_due(it->due_ms, now_ms, next_ms)) {
            it->busy = 1;
            return it;
        }
    }
    return NULL;
}

static int serve(void *ud, void *item)
{
    (void)ud;
    periodic_item *it = item;
    it->job.run(it->job.ud);
    return 0;
}

static void served(void *ud, void *item, int result)
{
    (void)ud;
    (void)result;
    periodic_item *it = item;
    it->due_ms = time_mono_ms() + it->job.every_ms;
    it->busy = 0;
}

static void *periodic_main(void *arg)
{
    periodic *p = arg;
    sched_loop l = {.mu = &p->mu,
                    .cv = &p->cv,
                    .stopping = &p->stopping,
                    .ud = p,
                    .pick = pick,
                    .serve = serve,
                    .served = served};
    sched_run(&l);
    return NULL;
}

periodic *periodic_start(const char *thread_name, const periodic_job *jobs, size_t n, fps_err *err)
{
    if (n > PERIODIC_MAX_JOBS) {
        fps_err_set(err, PERIODIC_EINVAL, 0, "invalid_argument", "periodic: %zu jobs (at most %d)",
                    n, PERIODIC_MAX_JOBS);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (jobs[i].run == NULL || jobs[i].every_ms <= 0) {
            fps_err_set(err, PERIODIC_EINVAL, 0, "invalid_argument",
                        "periodic: job %zu (%s) has no function or no interval", i,
                        jobs[i].name ? jobs[i].name : "unnamed");
            return NULL;
        }
    periodic *p = calloc(1, sizeof *p);
    if (p == NULL) {
        fps_err_set(err, PERIODIC_ESTART, 0, "out_of_memory", "periodic: out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int64_t now = time_mono_ms();
    p->n = n;
    for (size_t i = 0; i < n; i++)
        p->items[i] = (periodic_item){.job = jobs[i], .due_ms = now + jobs[i].every_ms};
    if (pthread_create(&p->th, NULL, periodic_main, p) != 0) {
        fps_err_set(err, PERIODIC_ESTART, 0, "cannot_start", "periodic: cannot start its thread");
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    if (thread_name != NULL) pthread_setname_np(p->th, thread_name);
    return p;
}

void periodic_stop(periodic *p)
{
    if (p == NULL) return;
    thread_stop_join(p->th, &p->mu, &p->cv, &p->stopping);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
