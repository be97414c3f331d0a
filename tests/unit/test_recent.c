/* tests/unit/test_recent: the recent-transcript ring (recent.h) keeps its
 * own references to the assignments' session images: one stays readable
 * after its creator lets go, a get is another reference to the same image,
 * the seventeenth put evicts the oldest, a put under an id already kept
 * keeps both, the bytes held are the images' sizes, and freeing the ring
 * releases what it holds (ASan: no leak, no double close). Its bound in
 * bytes is the caller's: over it the oldest others go, an image larger
 * than it is not kept, and a bound of 0 keeps nothing. */
#include "sandbox/jail/sbx.h"
#include "sidecar/worker/recent.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static sbx_image *image(int i)
{
    char t[512];
    snprintf(t, sizeof t,
             "{\"schema_version\": \"2\", \"assignment_id\": \"a%d\", \"session_id\": \"s\", "
             "\"session_revision_id\": \"r\", \"agent_id\": \"g\", \"environment\": \"e\", "
             "\"started_at\": \"t0\", \"ended_at\": \"t1\", \"event_count\": 0, \"events\": []}",
             i);
    fps_err e;
    sbx_image *img = sbx_image_new(t, strlen(t), NULL, 0, &e);
    assert_non_null(img);
    return img;
}

static void keeps_its_own_references(void **state)
{
    (void)state;
    recent_ring *r = recent_new(RECENT_MAX_BYTES);
    assert_non_null(r);
    sbx_image *first = image(0);
    size_t len = sbx_image_len(first);
    recent_put(r, "a0", first);
    sbx_image_release(first); /* the creator's: the ring's stays */
    sbx_image *got = recent_get(r, "a0");
    assert_ptr_equal(got, first);
    assert_int_equal(sbx_image_len(got), len);
    sbx_image_release(got);
    assert_null(recent_get(r, "nope"));
    assert_null(recent_get(r, NULL));
    assert_int_equal(recent_bytes(r), len);
    for (int i = 1; i <= 16; i++) {
        sbx_image *img = image(i);
        char id[16];
        snprintf(id, sizeof id, "a%d", i);
        recent_put(r, id, img);
        sbx_image_release(img);
    }
    assert_null(recent_get(r, "a0")); /* evicted by the seventeenth */
    sbx_image *last = recent_get(r, "a16");
    assert_non_null(last);
    assert_int_equal(recent_bytes(r), 16 * sbx_image_len(last));
    recent_put(r, "a16", last); /* a second slot for the same id */
    sbx_image_release(last);
    assert_null(recent_get(r, "a1"));
    recent_put(r, "none", NULL); /* nothing to keep: no-op */
    sbx_image *two = recent_get(r, "a2"), *again = recent_get(r, "a2");
    assert_non_null(two);
    assert_ptr_equal(again, two);
    sbx_image_release(two);
    sbx_image_release(again);
    recent_free(r);
    recent_free(NULL);
}

static void keeps_within_its_bound(void **state)
{
    (void)state;
    sbx_image *a = image(1), *b = image(2), *c = image(3);
    size_t len = sbx_image_len(a);
    /* room for two images, not three */
    recent_ring *r = recent_new(2 * len + len / 2);
    assert_non_null(r);
    recent_put(r, "a1", a);
    recent_put(r, "a2", b);
    assert_int_equal(recent_bytes(r), 2 * len);
    recent_put(r, "a3", c);
    assert_int_equal(recent_bytes(r), 2 * len);
    assert_null(recent_get(r, "a1")); /* the oldest other went */
    sbx_image *got = recent_get(r, "a3");
    assert_ptr_equal(got, c);
    sbx_image_release(got);
    recent_free(r);

    /* an image larger than the bound is not kept */
    r = recent_new(len - 1);
    assert_non_null(r);
    recent_put(r, "a1", a);
    assert_null(recent_get(r, "a1"));
    assert_int_equal(recent_bytes(r), 0);
    recent_free(r);

    /* 0: the ring keeps nothing */
    r = recent_new(0);
    assert_non_null(r);
    recent_put(r, "a1", a);
    assert_null(recent_get(r, "a1"));
    assert_int_equal(recent_bytes(r), 0);
    recent_free(r);
    sbx_image_release(a);
    sbx_image_release(b);
    sbx_image_release(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keeps_its_own_references),
        cmocka_unit_test(keeps_within_its_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
