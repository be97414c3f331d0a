/* Unit tests for common/periodic: timed jobs run again and
 * again on the scheduler loop, stop does not wait for the next due time, and
 * malformed jobs are refused with a precise error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/timeutil.h"
#include "common/periodic.h"

#include <pthread.h>
#include <string.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int runs;
} counter;

static void count_run(void *ud)
{
    counter *c = ud;
    pthread_mutex_lock(&c->mu);
    c->runs++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Waits until c->runs >= want, or a generous deadline (a failure, not a
 * sleep: the condition is signalled by every run). */
static int wait_runs(counter *c, int want)
{
    int64_t deadline = time_mono_ms() + 30000;
    pthread_mutex_lock(&c->mu);
    while (c->runs < want && time_mono_ms() < deadline)
        time_cond_wait_until(&c->cv, &c->mu, deadline);
    int runs = c->runs;
    pthread_mutex_unlock(&c->mu);
    return runs;
}

static void test_jobs_repeat_until_stopped(void **state)
{
    (void)state;
    counter fast = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    counter slow = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    periodic_job jobs[] = {{"fast", 2, count_run, &fast}, {"slow", 5, count_run, &slow}};
    fps_err err = {0};
    periodic *p = periodic_start(NULL, jobs, 2, &err);
    assert_non_null(p);
    /* both jobs come round again and again: one is never starved by the other */
    assert_true(wait_runs(&fast, 5) >= 5);
    assert_true(wait_runs(&slow, 3) >= 3);
    periodic_stop(p);
}

/* Stop wakes a thread that waits for a job due in an hour: it returns at
 * once (were it to wait for the due time, ctest's timeout fails this). */
static void test_stop_does_not_wait_for_due_time(void **state)
{
    (void)state;
    counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    periodic_job hourly = {"hourly", (int64_t)3600 * 1000, count_run, &c};
    fps_err err = {0};
    periodic *p = periodic_start(NULL, &hourly, 1, &err);
    assert_non_null(p);
    periodic_stop(p);
    assert_int_equal(c.runs, 0); /* its first run was an hour away */
}

static void test_malformed_jobs_refused(void **state)
{
    (void)state;
    counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    fps_err err = {0};
    periodic_job no_interval = {"idle", 0, count_run, &c};
    assert_null(periodic_start(NULL, &no_interval, 1, &err));
    assert_int_equal(err.code, PERIODIC_EINVAL);
    assert_non_null(strstr(err.msg, "idle"));
    periodic_job no_fn = {"empty", 10, NULL, &c};
    assert_null(periodic_start(NULL, &no_fn, 1, &err));
    assert_int_equal(err.code, PERIODIC_EINVAL);
    periodic_job many[PERIODIC_MAX_JOBS + 1];
    for (size_t i = 0; i < PERIODIC_MAX_JOBS + 1; i++)
        many[i] = (periodic_job){"one", 10, count_run, &c};
    assert_null(periodic_start(NULL, many, PERIODIC_MAX_JOBS + 1, &err));
    assert_int_equal(err.code, PERIODIC_EINVAL);
    assert_int_equal(c.runs, 0);
    /* none at all is fine: a thread that only waits for stop */
    periodic *p = periodic_start(NULL, NULL, 0, &err);
    assert_non_null(p);
    periodic_stop(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_repeat_until_stopped),
        cmocka_unit_test(test_stop_does_not_wait_for_due_time),
        cmocka_unit_test(test_malformed_jobs_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
