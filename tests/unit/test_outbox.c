/* tests/unit/test_outbox: the outbox's retry schedule (outbox_schedule.h):
 * the default backoff, the pause after an attempt that sent nothing, and the
 * cut that keeps every retry inside the lease the result belongs to. */
#include "sidecar/worker/outbox_schedule.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define NOW 1767225600.0 /* 2026-01-01T00:00:00Z: epoch-sized, as the outbox passes it */

static void default_backoff_doubles_to_32s(void **state)
{
    (void)state;
    assert_int_equal(outbox_default_backoff_ms(0), 1000);
    assert_int_equal(outbox_default_backoff_ms(1), 2000);
    assert_int_equal(outbox_default_backoff_ms(2), 4000);
    assert_int_equal(outbox_default_backoff_ms(3), 8000);
    assert_int_equal(outbox_default_backoff_ms(4), 16000);
    assert_int_equal(outbox_default_backoff_ms(5), 32000);
    assert_int_equal(outbox_default_backoff_ms(6), 32000);
    assert_int_equal(outbox_default_backoff_ms(1000000), 32000);
    /* never a negative shift */
    assert_int_equal(outbox_default_backoff_ms(-1), 1000);
    assert_int_equal(outbox_default_backoff_ms(-1000000), 1000);
}

static void backoff_stands_without_a_lease(void **state)
{
    (void)state;
    assert_int_equal(outbox_retry_delay_ms(1, 8000, 0, NOW), 8000);
    assert_int_equal(outbox_retry_delay_ms(1, 250, 0, NOW), 250);
    assert_int_equal(outbox_retry_delay_ms(1, 0, 0, NOW), 0);
    assert_int_equal(outbox_retry_delay_ms(1, 8000, -5, NOW), 8000); /* unknown too */
    assert_int_equal(outbox_retry_delay_ms(1, outbox_default_backoff_ms(9), 0, NOW), 32000);
}

static void nothing_sent_pauses_a_second(void **state)
{
    (void)state;
    /* the backoff is not what the server said: ignored */
    assert_int_equal(outbox_retry_delay_ms(0, 60000, 0, NOW), OUTBOX_NOT_SENT_PAUSE_MS);
    assert_int_equal(outbox_retry_delay_ms(0, 0, 0, NOW), OUTBOX_NOT_SENT_PAUSE_MS);
    assert_int_equal(OUTBOX_NOT_SENT_PAUSE_MS, 1000);
    /* a long lease does not lengthen it */
    assert_int_equal(outbox_retry_delay_ms(0, 60000, NOW + 3600, NOW), 1000);
}

static void no_delay_outlasts_half_the_lease_left(void **state)
{
    (void)state;
    /* 10 s left: at most 5 s */
    assert_int_equal(outbox_retry_delay_ms(1, 32000, NOW + 10, NOW), 5000);
    assert_int_equal(outbox_retry_delay_ms(1, 8000, NOW + 10, NOW), 5000);
    assert_int_equal(outbox_retry_delay_ms(1, 5000, NOW + 10, NOW), 5000); /* exactly half */
    assert_int_equal(outbox_retry_delay_ms(1, 4999, NOW + 10, NOW), 4999); /* shorter: stands */
    /* a long lease leaves the backoff alone */
    assert_int_equal(outbox_retry_delay_ms(1, 32000, NOW + 120, NOW), 32000);
    /* the pause after nothing was sent is cut too: 1.5 s left */
    assert_int_equal(outbox_retry_delay_ms(0, 0, NOW + 1.5, NOW), 750);
    /* whole milliseconds, rounded down: 3.001 s left -> 1500 */
    assert_int_equal(outbox_retry_delay_ms(1, 32000, NOW + 3.001, NOW), 1500);
    /* almost nothing left: try again at once */
    assert_int_equal(outbox_retry_delay_ms(1, 32000, NOW + 0.001, NOW), 0);
}

static void an_ended_lease_cuts_nothing(void **state)
{
    (void)state;
    /* the lease is over (or ends now): the server's lease decides; the
     * schedule stands rather than spinning */
    assert_int_equal(outbox_retry_delay_ms(1, 8000, NOW, NOW), 8000);
    assert_int_equal(outbox_retry_delay_ms(1, 8000, NOW - 30, NOW), 8000);
    assert_int_equal(outbox_retry_delay_ms(0, 8000, NOW - 30, NOW), 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_backoff_doubles_to_32s),
        cmocka_unit_test(backoff_stands_without_a_lease),
        cmocka_unit_test(nothing_sent_pauses_a_second),
        cmocka_unit_test(no_delay_outlasts_half_the_lease_left),
        cmocka_unit_test(an_ended_lease_cuts_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
