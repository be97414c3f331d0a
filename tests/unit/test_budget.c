/* tests/unit/test_budget: the memory budget's arithmetic (budget.h): the
 * transcript-size percentile and its 1 MiB floor, how many assignments a
 * claim may ask for beside one sandbox reservation, Content-Length
 * replacing the estimate, transcripts that can never fit, sandbox
 * admission (the first always starts), and no budget admitting
 * everything. */
#include "sidecar/worker/budget.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define MIB ((uint64_t)1 << 20)

static void p95_is_nearest_rank(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 400 * MIB, 0, 0, 64 * MIB, 1.0);
    assert_int_equal(budget_p95(&b), 0);
    for (uint64_t i = 1; i <= 100; i++) {
        uint64_t res = 0;
        budget_resize(&b, &res, i * MIB);
    }
    assert_int_equal(budget_p95(&b), 95 * MIB);
    /* the window is the last BUDGET_HISTORY sizes */
    for (int i = 0; i < BUDGET_HISTORY; i++) {
        uint64_t res = 0;
        budget_resize(&b, &res, 2 * MIB);
    }
    assert_int_equal(budget_p95(&b), 2 * MIB);
}

static void estimate_has_a_floor_and_the_factor(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 400 * MIB, 0, 0, 64 * MIB, 3.0);
    assert_int_equal(budget_estimate(&b), 3 * MIB); /* nothing seen: 1 MiB */
    uint64_t res = 0;
    budget_resize(&b, &res, 1000);
    assert_int_equal(budget_estimate(&b), 3 * MIB); /* small ones: still 1 MiB */
    budget_resize(&b, &res, 10 * MIB);
    assert_int_equal(budget_estimate(&b), 30 * MIB);
}

static void claims_leave_room_for_one_sandbox(void **state)
{
    (void)state;
    budget b;
    /* 400 MiB: 40 base, 32 ring, 64 for a sandbox: 264 left */
    budget_init(&b, 400 * MIB, 40 * MIB, 32 * MIB, 64 * MIB, 2.0);
    uint64_t res = 0;
    budget_resize(&b, &res, 23 * MIB); /* the estimate becomes 46 MiB */
    b.assigned = 0;
    assert_int_equal(budget_claimable(&b, 32), 5); /* 264 / 46 */
    assert_int_equal(budget_claimable(&b, 3), 3);
    assert_int_equal(budget_claimable(&b, 0), 0);
    uint64_t each = budget_claim(&b, 5);
    assert_int_equal(each, 46 * MIB);
    assert_int_equal(b.assigned, 230 * MIB);
    assert_int_equal(budget_claimable(&b, 32), 0);
    assert_int_equal(budget_in_use(&b), (40 + 32 + 230) * MIB);
    /* a sandbox is room the claims left */
    assert_true(budget_sandbox_fits(&b));
    budget_sandbox_take(&b);
    assert_int_equal(budget_claimable(&b, 32), 0);
    assert_false(budget_sandbox_fits(&b)); /* 366 + 64 > 400 */
    /* one assignment ends: its 46 MiB come back, one more claim fits */
    budget_release(&b, each);
    assert_int_equal(b.assignments, 4);
    assert_int_equal(budget_claimable(&b, 32), 1); /* 400 - 40 - 32 - 184 - 64 = 80 */
    budget_sandbox_take(&b);                       /* two sandboxes: 128 MiB of room */
    assert_int_equal(budget_claimable(&b, 32), 0);
    budget_sandbox_put(&b);
    assert_int_equal(budget_claimable(&b, 32), 1);
}

static void first_claim_is_one_until_a_size_is_known(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 400 * MIB, 10 * MIB, 0, 64 * MIB, 3.0);
    assert_int_equal(budget_claimable(&b, 32), 1);
    uint64_t res = budget_claim(&b, 1);
    assert_int_equal(budget_claimable(&b, 32), 0); /* its size is not known yet */
    budget_resize(&b, &res, 20 * MIB);             /* 60 MiB each from now on */
    assert_int_equal(budget_claimable(&b, 32), 4); /* (400 - 10 - 64 - 60) / 60 */
    budget_release(&b, res);
    assert_int_equal(budget_claimable(&b, 32), 5);
}

static void content_length_replaces_the_estimate(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 100 * MIB, 0, 0, 10 * MIB, 2.0);
    uint64_t res = budget_claim(&b, 1);
    assert_int_equal(res, 2 * MIB);
    budget_resize(&b, &res, 30 * MIB);
    assert_int_equal(res, 60 * MIB);
    assert_int_equal(b.assigned, 60 * MIB);
    budget_resize(&b, &res, 5 * MIB); /* smaller gives back */
    assert_int_equal(b.assigned, 10 * MIB);
    budget_set(&b, &res, 7 * MIB); /* what it holds once its peak is over */
    assert_int_equal(res, 7 * MIB);
    assert_int_equal(b.assigned, 7 * MIB);
    assert_int_equal(budget_p95(&b), 30 * MIB); /* the history stands */
    budget_release(&b, res);
    assert_int_equal(b.assigned, 0);
    assert_int_equal(b.assignments, 0);
}

static void transcripts_that_never_fit(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 100 * MIB, 20 * MIB, 10 * MIB, 10 * MIB, 2.0);
    assert_false(budget_never_fits(&b, 30 * MIB)); /* 20+10+10+60 = 100 */
    assert_true(budget_never_fits(&b, 30 * MIB + 1024));
    budget_init(&b, 0, 20 * MIB, 10 * MIB, 10 * MIB, 2.0);
    assert_false(budget_never_fits(&b, (uint64_t)1 << 40));
}

static void first_sandbox_always_starts(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 100 * MIB, 20 * MIB, 0, 64 * MIB, 1.0);
    b.assigned = 70 * MIB; /* an estimate came out too small */
    assert_true(budget_sandbox_fits(&b));
    budget_sandbox_take(&b);
    assert_false(budget_sandbox_fits(&b));
    budget_sandbox_put(&b);
    budget_sandbox_put(&b); /* an extra put changes nothing */
    assert_int_equal(b.sandboxes, 0);
    assert_int_equal(b.sandboxed, 0);
    b.assigned = 0;
    budget_sandbox_take(&b);
    assert_false(budget_sandbox_fits(&b)); /* 20 + 64 + 64 > 100 */
}

static void no_budget_admits_everything(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 0, 500 * MIB, 32 * MIB, 64 * MIB, 3.0);
    assert_int_equal(budget_claimable(&b, 32), 32);
    budget_claim(&b, 32);
    for (int i = 0; i < 10; i++) {
        assert_true(budget_sandbox_fits(&b));
        budget_sandbox_take(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(p95_is_nearest_rank),
        cmocka_unit_test(estimate_has_a_floor_and_the_factor),
        cmocka_unit_test(claims_leave_room_for_one_sandbox),
        cmocka_unit_test(first_claim_is_one_until_a_size_is_known),
        cmocka_unit_test(content_length_replaces_the_estimate),
        cmocka_unit_test(transcripts_that_never_fit),
        cmocka_unit_test(first_sandbox_always_starts),
        cmocka_unit_test(no_budget_admits_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
