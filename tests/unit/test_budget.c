/* tests/unit/test_budget: the memory budget's arithmetic (budget.h): the
 * transcript-size percentile and its 1 MiB floor, how many assignments a
 * claim may ask for beside one sandbox reservation, Content-Length
 * replacing the estimate, transcripts that can never fit, sandbox
 * admission (the first always starts), and no budget admitting
 * everything; sandboxes of any size: what a stopped one is re-admitted
 * against, their sampled growth (near, over), background work keeping room
 * for live work, the per-sandbox cap of a budget below the base plus one
 * sandbox limit, and other holders (the archive's writer). */
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
    assert_true(budget_sandbox_fits_bytes(&b, b.sandbox_reserve));
    budget_sandbox_add(&b, b.sandbox_reserve);
    assert_int_equal(budget_claimable(&b, 32), 0);
    assert_false(budget_sandbox_fits_bytes(&b, b.sandbox_reserve)); /* 366 + 64 > 400 */
    /* one assignment ends: its 46 MiB come back, one more claim fits */
    budget_release(&b, each);
    assert_int_equal(b.assignments, 4);
    assert_int_equal(budget_claimable(&b, 32), 1); /* 400 - 40 - 32 - 184 - 64 = 80 */
    budget_sandbox_add(&b, b.sandbox_reserve);     /* two sandboxes: 128 MiB of room */
    assert_int_equal(budget_claimable(&b, 32), 0);
    budget_sandbox_sub(&b, b.sandbox_reserve);
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

/* A budget with less room than one estimate beside the base, the ring and
 * one sandbox still claims one assignment while none is in flight (its
 * Content-Length then decides), and never a second beside it. */
static void an_idle_tree_always_claims_one(void **state)
{
    (void)state;
    budget b;
    /* 150 MiB: 52 base, 32 ring, 64 for a sandbox: 2 MiB left, below the
     * 3.25 MiB that the 1 MiB floor costs */
    budget_init(&b, 150 * MIB, 52 * MIB, 32 * MIB, 64 * MIB, 3.25);
    assert_int_equal(budget_claimable(&b, 32), 1);
    uint64_t res = budget_claim(&b, 1);
    assert_int_equal(budget_claimable(&b, 32), 0);
    budget_resize(&b, &res, 2 * MIB); /* the size is known now: still no room for two */
    assert_int_equal(budget_claimable(&b, 32), 0);
    budget_release(&b, res);
    assert_int_equal(budget_claimable(&b, 32), 1);
    assert_true(budget_never_fits(&b, 22 * MIB));
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
    assert_true(budget_sandbox_fits_bytes(&b, b.sandbox_reserve));
    budget_sandbox_add(&b, b.sandbox_reserve);
    assert_false(budget_sandbox_fits_bytes(&b, b.sandbox_reserve));
    budget_sandbox_sub(&b, b.sandbox_reserve);
    budget_sandbox_sub(&b, b.sandbox_reserve); /* an extra put changes nothing */
    assert_int_equal(b.sandboxes, 0);
    assert_int_equal(b.sandboxed, 0);
    b.assigned = 0;
    budget_sandbox_add(&b, b.sandbox_reserve);
    assert_false(budget_sandbox_fits_bytes(&b, b.sandbox_reserve)); /* 20 + 64 + 64 > 100 */
}

static void no_budget_admits_everything(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 0, 500 * MIB, 32 * MIB, 64 * MIB, 3.0);
    assert_int_equal(budget_claimable(&b, 32), 32);
    budget_claim(&b, 32);
    for (int i = 0; i < 10; i++) {
        assert_true(budget_sandbox_fits_bytes(&b, b.sandbox_reserve));
        budget_sandbox_add(&b, b.sandbox_reserve);
    }
}

static void sandbox_need_follows_what_was_seen(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 400 * MIB, 40 * MIB, 32 * MIB, 16 * MIB, 2.0);
    b.sandbox_max = 512 * MIB;
    assert_int_equal(budget_sandbox_need(&b, 0), 16 * MIB); /* a first run: the reserve */
    assert_int_equal(budget_sandbox_need(&b, 8 * MIB), 16 * MIB);
    assert_int_equal(budget_sandbox_need(&b, 200 * MIB), 225 * MIB); /* seen plus an eighth */
    assert_int_equal(budget_sandbox_need(&b, 600 * MIB), 512 * MIB); /* never past its limit */
    /* the first sandbox always fits, whatever its need */
    assert_true(budget_sandbox_fits_bytes(&b, 500 * MIB));
    budget_sandbox_add(&b, 16 * MIB);
    assert_true(budget_sandbox_fits_bytes(&b, 300 * MIB));  /* 88 + 300 <= 400 */
    assert_false(budget_sandbox_fits_bytes(&b, 320 * MIB)); /* 88 + 320 > 400 */
    uint64_t slot = 0;
    assert_int_equal(budget_excess(&b, &slot, 16 * MIB, 116 * MIB), 100 * MIB);
    assert_false(budget_sandbox_fits_bytes(&b, 300 * MIB)); /* its growth counts */
    assert_int_equal(budget_excess(&b, &slot, 16 * MIB, 10 * MIB), 0);
    assert_int_equal(b.excess, 0);
    budget_sandbox_sub(&b, 16 * MIB);
    assert_int_equal(b.sandboxes, 0);
    assert_int_equal(b.sandboxed, 0);
}

static void near_and_over(void **state)
{
    (void)state;
    budget b;
    /* 400 MiB: 40 base, 32 ring, sandboxes of 16 that may reach 128 */
    budget_init(&b, 400 * MIB, 40 * MIB, 32 * MIB, 16 * MIB, 2.0);
    b.sandbox_max = 128 * MIB;
    assert_false(budget_near(&b)); /* nothing runs */
    budget_sandbox_add(&b, 16 * MIB);
    budget_sandbox_add(&b, 16 * MIB);
    assert_false(budget_near(&b)); /* 104 + 2 x 112 <= 400: both may grow to their limit */
    budget_sandbox_add(&b, 16 * MIB);
    assert_true(budget_near(&b)); /* 120 + 3 x 112 > 400 */
    uint64_t s1 = 0, s2 = 0;
    budget_excess(&b, &s1, 16 * MIB, 128 * MIB);
    assert_false(budget_over(&b)); /* 120 + 112 */
    budget_excess(&b, &s2, 16 * MIB, 200 * MIB);
    assert_true(budget_over(&b)); /* 120 + 112 + 184 */
    budget_excess(&b, &s2, 16 * MIB, 0);
    assert_false(budget_over(&b));
    /* a waiting start makes every sample matter */
    budget c;
    budget_init(&c, 400 * MIB, 40 * MIB, 0, 16 * MIB, 2.0);
    budget_sandbox_add(&c, 16 * MIB);
    assert_false(budget_near(&c));
    c.waiting = 1;
    assert_true(budget_near(&c));
    /* no budget: never */
    budget d;
    budget_init(&d, 0, 40 * MIB, 0, 16 * MIB, 2.0);
    budget_sandbox_add(&d, 16 * MIB);
    d.waiting = 1;
    assert_false(budget_near(&d));
    assert_false(budget_over(&d));
}

static void background_keeps_room_for_live_work(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 200 * MIB, 40 * MIB, 32 * MIB, 64 * MIB, 2.0);
    /* 72 + 64 + one live 64 = 200: fits exactly */
    assert_true(budget_background_fits(&b, 64 * MIB));
    assert_false(budget_background_fits(&b, 65 * MIB));
    b.waiting = 1; /* a live start waits: background keeps out */
    assert_false(budget_background_fits(&b, 1));
    b.waiting = 0;
    uint64_t res = budget_claim(&b, 1); /* a claimed assignment (1 MiB x 2) */
    assert_false(budget_background_fits(&b, 64 * MIB));
    budget_release(&b, res);
    budget c;
    budget_init(&c, 0, 40 * MIB, 32 * MIB, 64 * MIB, 2.0);
    c.waiting = 3;
    assert_true(budget_background_fits(&c, 1 << 30)); /* no budget */
}

static void sandbox_cap_below_one_full_sandbox(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 300 * MIB, 40 * MIB, 32 * MIB, 64 * MIB, 2.0);
    b.sandbox_max = 512 * MIB;
    assert_int_equal(budget_sandbox_cap(&b), 260 * MIB); /* 300 - 40 < 512 */
    b.sandbox_max = 256 * MIB;
    assert_int_equal(budget_sandbox_cap(&b), 0); /* one full sandbox fits: no cap */
    budget c;
    budget_init(&c, 0, 40 * MIB, 32 * MIB, 64 * MIB, 2.0);
    c.sandbox_max = 512 * MIB;
    assert_int_equal(budget_sandbox_cap(&c), 0); /* no budget */
}

static void other_holders_never_wait(void **state)
{
    (void)state;
    budget b;
    budget_init(&b, 200 * MIB, 40 * MIB, 32 * MIB, 64 * MIB, 2.0);
    assert_true(budget_other_take(&b, 64 * MIB)); /* 72 + 64 + 64 = 200 */
    assert_int_equal(budget_in_use(&b), 136 * MIB);
    assert_false(budget_other_take(&b, 1)); /* no room beside one sandbox */
    assert_int_equal(budget_claimable(&b, 4), 0);
    budget_other_put(&b, 64 * MIB);
    assert_int_equal(b.other, 0);
    assert_true(budget_claimable(&b, 4) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(p95_is_nearest_rank),
        cmocka_unit_test(estimate_has_a_floor_and_the_factor),
        cmocka_unit_test(claims_leave_room_for_one_sandbox),
        cmocka_unit_test(first_claim_is_one_until_a_size_is_known),
        cmocka_unit_test(an_idle_tree_always_claims_one),
        cmocka_unit_test(content_length_replaces_the_estimate),
        cmocka_unit_test(transcripts_that_never_fit),
        cmocka_unit_test(first_sandbox_always_starts),
        cmocka_unit_test(no_budget_admits_everything),
        cmocka_unit_test(sandbox_need_follows_what_was_seen),
        cmocka_unit_test(near_and_over),
        cmocka_unit_test(background_keeps_room_for_live_work),
        cmocka_unit_test(sandbox_cap_below_one_full_sandbox),
        cmocka_unit_test(other_holders_never_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
