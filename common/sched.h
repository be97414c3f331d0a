/* common/sched: the one scheduler loop of the timed threads (the worker's
 * heartbeat and outbox threads, and every thread of fixed-period jobs,
 * common/periodic.h); it lies in common/ so that every layer can run one.
 * Under its owner's lock it picks an item that is due, serves it without the
 * lock, and otherwise sleeps on the owner's condition variable until the
 * earliest due time or a signal: no polling. The owner keeps its items and
 * their due times; the loop only drives them. */
#ifndef FPS_SCHED_H
#define FPS_SCHED_H
#include <pthread.h>
#include <stdint.h>

typedef struct {
    pthread_mutex_t *mu; /* borrowed: the owner's lock */
    pthread_cond_t *cv;  /* borrowed: signalled when items or stop change */
    const int *stopping; /* borrowed, read under *mu: non-zero ends the loop */
    void *ud;            /* passed to the callbacks */
    /* Under *mu: an item due at `now_ms` (the callee marks it busy so it is
     * not picked twice), or NULL with *next_ms set to the earliest due time
     * of the others (INT64_MAX if none). */
    void *(*pick)(void *ud, int64_t now_ms, int64_t *next_ms);
    /* Without *mu: serves the item; the result goes to served. */
    int (*serve)(void *ud, void *item);
    /* Under *mu, after serve: reschedules, unmarks or frees the item (it
     * may drop the lock to free, and must hold it again on return). */
    void (*served)(void *ud, void *item, int result);
} sched_loop;

/* Runs the loop on the calling thread until *stopping is set. */
void sched_run(const sched_loop *l);

/* For pick: 1 if an item due at due_ms is due at now_ms, else 0 with
 * *next_ms lowered to due_ms if that is earlier. */
int sched_due(int64_t due_ms, int64_t now_ms, int64_t *next_ms);

#endif
