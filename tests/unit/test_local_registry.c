/* tests/unit/test_local_registry: the local registry's TTL state
 * (local_ttl.h): renewal, inclusive expiry, the remaining time as the admin
 * API reports it (to the millisecond, null once past), the timer's sleep
 * and how long an expired registration stays listed. */
#include "sidecar/local/local_ttl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define NOW 1767225600.0 /* 2026-01-01T00:00:00Z: epoch-sized, as the registry passes it */

static void renewal_restarts_the_ttl(void **state)
{
    (void)state;
    double at = local_ttl_renew(NOW, 30);
    assert_true(at == NOW + 30);
    /* a heartbeat 20 s later: 30 s from then, not from the registration */
    assert_true(local_ttl_renew(NOW + 20, 30) == NOW + 50);
    assert_true(local_ttl_renew(NOW, 86400) == NOW + 86400);
    /* right after a renewal the whole TTL is left */
    assert_int_equal(local_ttl_remaining_ms(local_ttl_renew(NOW, 30), NOW), 30000);
    assert_int_equal(local_ttl_remaining_ms(local_ttl_renew(NOW, 1), NOW), 1000);
}

static void expiry_is_inclusive(void **state)
{
    (void)state;
    double at = NOW + 30;
    assert_int_equal(local_ttl_expired(at, NOW), 0);
    assert_int_equal(local_ttl_expired(at, NOW + 29.999), 0);
    assert_int_equal(local_ttl_expired(at, NOW + 30), 1); /* at its expires_at: gone */
    assert_int_equal(local_ttl_expired(at, NOW + 30.001), 1);
    assert_int_equal(local_ttl_expired(at, NOW + 86400), 1);
    /* a renewal before the end brings it back into its TTL */
    assert_int_equal(local_ttl_expired(local_ttl_renew(NOW + 29, 30), NOW + 30), 0);
}

static void zero_never_expires(void **state)
{
    (void)state;
    assert_int_equal(local_ttl_expired(0, NOW), 0);
    assert_int_equal(local_ttl_expired(0, 1e18), 0);
    assert_int_equal(local_ttl_expired(-1, NOW), 0);
    assert_int_equal(local_ttl_remaining_ms(0, NOW), -1);
    assert_int_equal(local_ttl_remaining_ms(-5, NOW), -1);
    assert_true(local_ttl_sleep_s(0, NOW, 1.0) == 1.0);
}

static void remaining_rounds_to_the_millisecond(void **state)
{
    (void)state;
    double at = NOW + 30;
    assert_int_equal(local_ttl_remaining_ms(at, NOW + 20.8), 9200);
    /* 9.2006216 s left: 9.201 s, not 9.200621604919434 */
    assert_int_equal(local_ttl_remaining_ms(at, at - 9.2006216), 9201);
    assert_int_equal(local_ttl_remaining_ms(at, at - 9.2004), 9200);
    /* below the nearest millisecond, exactly (dyadic offsets from a small
     * epoch): 0.488 ms -> 0, 0.977 ms -> 1, 1000.488 ms -> 1000, 1000.977
     * ms -> 1001 */
    assert_int_equal(local_ttl_remaining_ms(2.0, 2.0 - 0.00048828125), 0);
    assert_int_equal(local_ttl_remaining_ms(2.0, 2.0 - 0.0009765625), 1);
    assert_int_equal(local_ttl_remaining_ms(4.0, 4.0 - 1.00048828125), 1000);
    assert_int_equal(local_ttl_remaining_ms(4.0, 4.0 - 1.0009765625), 1001);
    /* at its expires_at: 0 left; any later: null (-1), never a negative time */
    assert_int_equal(local_ttl_remaining_ms(at, at), 0);
    assert_int_equal(local_ttl_remaining_ms(2.0, 2.0 + 0.00048828125), -1);
    assert_int_equal(local_ttl_remaining_ms(at, at + 1), -1);
    assert_int_equal(local_ttl_remaining_ms(at, at + 86400), -1);
}

static void timer_sleeps_until_the_next_expiry(void **state)
{
    (void)state;
    /* one second at most, less when an expiry comes sooner */
    assert_true(local_ttl_sleep_s(NOW + 30, NOW, 1.0) == 1.0);
    assert_true(local_ttl_sleep_s(NOW + 0.25, NOW, 1.0) == 0.25);
    assert_true(local_ttl_sleep_s(NOW + 1.0, NOW, 1.0) == 1.0);
    /* the earliest of several, folded in turn */
    double w = 1.0;
    w = local_ttl_sleep_s(NOW + 0.75, NOW, w);
    w = local_ttl_sleep_s(NOW + 0.5, NOW, w);
    w = local_ttl_sleep_s(NOW + 0.875, NOW, w);
    assert_true(w == 0.5);
    /* already past: no wait */
    assert_true(local_ttl_sleep_s(NOW - 2, NOW, 1.0) <= 0);
    assert_true(local_ttl_sleep_s(NOW, NOW, 1.0) == 0);
}

static void expired_stays_listed_an_hour(void **state)
{
    (void)state;
    assert_true(LOCAL_EXPIRED_KEEP_S == 3600.0);
    assert_int_equal(local_ttl_listed(NOW, NOW), 1);
    assert_int_equal(local_ttl_listed(NOW, NOW + 3599), 1);
    assert_int_equal(local_ttl_listed(NOW, NOW + 3600), 1); /* inclusive */
    assert_int_equal(local_ttl_listed(NOW, NOW + 3600.001), 0);
    assert_int_equal(local_ttl_listed(NOW, NOW + 7200), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(renewal_restarts_the_ttl),
        cmocka_unit_test(expiry_is_inclusive),
        cmocka_unit_test(zero_never_expires),
        cmocka_unit_test(remaining_rounds_to_the_millisecond),
        cmocka_unit_test(timer_sleeps_until_the_next_expiry),
        cmocka_unit_test(expired_stays_listed_an_hour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
