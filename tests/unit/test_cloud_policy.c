/* tests/unit/test_cloud_policy: the arithmetic of the cloud client under
 * server failure: full-jitter backoff per consecutive failure, the retry
 * budget over its sliding window, and the circuit breaker's states. */
#include "sidecar/cloud/cloud_policy.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static void test_backoff_full_jitter(void **state)
{
    (void)state;
    /* No failure, no delay. */
    assert_int_equal(policy_backoff_ms(25, 5000, 0, 0.9), 0);
    /* The ceiling doubles per consecutive failure: 25, 50, 100, ... */
    assert_int_equal(policy_backoff_ms(25, 5000, 1, 0.999999), 25);
    assert_int_equal(policy_backoff_ms(25, 5000, 2, 0.999999), 50);
    assert_int_equal(policy_backoff_ms(25, 5000, 3, 0.999999), 100);
    /* ... up to the cap, also for absurd streaks (no overflow). */
    assert_int_equal(policy_backoff_ms(25, 5000, 9, 0.999999), 5000);
    assert_int_equal(policy_backoff_ms(25, 5000, 1000000, 0.999999), 5000);
    /* Full jitter: the whole range from 0 up, uniformly. */
    assert_int_equal(policy_backoff_ms(25, 5000, 3, 0.0), 0);
    assert_int_equal(policy_backoff_ms(25, 5000, 3, 0.5), 50);
    assert_int_equal(policy_backoff_ms(25, 5000, 9, 0.25), 1250);
    /* Out-of-range draws are clamped. */
    assert_int_equal(policy_backoff_ms(25, 5000, 2, -1), 0);
    assert_int_equal(policy_backoff_ms(25, 5000, 2, 7), 50);
}

/* Takes retries from the budget at time t until it refuses; how many. */
static int take_all(policy_budget *b, int64_t t)
{
    int n = 0;
    while (policy_budget_take(b, t))
        n++;
    return n;
}

static void test_budget_fraction_and_floor(void **state)
{
    (void)state;
    policy_budget b;
    /* 20 % of the requests in a 10 s window, plus 1 retry per second. */
    policy_budget_init(&b, 0.2, 1.0, 10);
    int64_t t = 1000000;
    /* With no traffic, the floor alone: 10 retries in the window. */
    assert_int_equal(take_all(&b, t), 10);
    long req, ret;
    policy_budget_counts(&b, t, &req, &ret);
    assert_int_equal(req, 0);
    assert_int_equal(ret, 10);
    /* 100 requests make room for 20 more. */
    for (int i = 0; i < 100; i++)
        policy_budget_sent(&b, t);
    assert_int_equal(take_all(&b, t), 20);
    /* 9.999 s later everything still counts; at 10 s it has left the
     * window and the budget is whole again. */
    assert_int_equal(policy_budget_take(&b, t + 9999), 0);
    policy_budget_counts(&b, t + 10000, &req, &ret);
    assert_int_equal(req, 0);
    assert_int_equal(ret, 0);
    assert_int_equal(take_all(&b, t + 10000), 10);
}

static void test_budget_window_slides(void **state)
{
    (void)state;
    policy_budget b;
    policy_budget_init(&b, 0.5, 0.0, 3);
    /* 10 requests per second; 50 % may be retried. */
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 10; i++)
            policy_budget_sent(&b, 5000 + s * 1000);
    long req, ret;
    policy_budget_counts(&b, 7000, &req, &ret);
    assert_int_equal(req, 30);
    assert_int_equal(take_all(&b, 7000), 15);
    /* One second later the first second's requests left the window: 20
     * requests (10 new ones not yet sent) allow 10 retries, 15 are used. */
    assert_int_equal(policy_budget_take(&b, 8000), 0);
    for (int i = 0; i < 20; i++)
        policy_budget_sent(&b, 8000);
    policy_budget_counts(&b, 8000, &req, &ret);
    assert_int_equal(req, 40);
    assert_int_equal(ret, 15);
    assert_int_equal(take_all(&b, 8000), 5);
}

static void test_breaker(void **state)
{
    (void)state;
    policy_breaker k;
    policy_breaker_init(&k, 5, 1000, 2000);
    int64_t wait = -1, t = 50000;
    assert_true(policy_breaker_allow(&k, t, &wait));
    assert_int_equal(wait, 0);
    /* Five quick failures are not persistent yet (under a second). */
    for (int i = 0; i < 5; i++)
        policy_breaker_failure(&k, t + (int64_t)i * 10);
    assert_int_equal(k.state, BREAKER_CLOSED);
    /* Any answer resets the streak. */
    policy_breaker_success(&k);
    assert_int_equal(k.failures, 0);
    /* Failures spanning a second, at least five: open. */
    for (int i = 0; i < 4; i++)
        policy_breaker_failure(&k, t + (int64_t)i * 300);
    assert_int_equal(k.state, BREAKER_CLOSED);
    policy_breaker_failure(&k, t + 1200);
    assert_int_equal(k.state, BREAKER_OPEN);
    assert_int_equal(k.opened, 1);
    /* Open: no new work until the probe interval has passed ... */
    assert_false(policy_breaker_allow(&k, t + 1200, &wait));
    assert_int_equal(wait, 2000);
    assert_false(policy_breaker_allow(&k, t + 3000, &wait));
    assert_int_equal(wait, 200);
    /* ... then one probe (half-open), and nothing else meanwhile. */
    assert_true(policy_breaker_allow(&k, t + 3200, &wait));
    assert_int_equal(k.state, BREAKER_HALF_OPEN);
    assert_false(policy_breaker_allow(&k, t + 3300, &wait));
    /* The probe fails: open again, next probe a full interval later. */
    policy_breaker_failure(&k, t + 3400);
    assert_int_equal(k.state, BREAKER_OPEN);
    assert_false(policy_breaker_allow(&k, t + 5100, &wait));
    assert_true(policy_breaker_allow(&k, t + 5200, &wait));
    /* The probe succeeds: closed. */
    policy_breaker_success(&k);
    assert_int_equal(k.state, BREAKER_CLOSED);
    assert_true(policy_breaker_allow(&k, t + 5201, &wait));
    assert_int_equal(k.opened, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_full_jitter),
        cmocka_unit_test(test_budget_fraction_and_floor),
        cmocka_unit_test(test_budget_window_slides),
        cmocka_unit_test(test_breaker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
