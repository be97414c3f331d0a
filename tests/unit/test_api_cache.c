/* Unit tests for the admin API's response cache (api/cache.c: versions,
 * keys, LRU and byte bounds, references outliving eviction) and for the
 * store's change version it relies on (store_change_version: moves on every
 * commit of this handle or of another connection on the file, never on
 * reads; on a file and with ":memory:"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/internal.h"
#include "store/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct MHD_Response *resp_of(size_t n, char fill)
{
    char *b = malloc(n ? n : 1);
    assert_non_null(b);
    memset(b, fill, n);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, b, MHD_RESPMEM_MUST_FREE);
    assert_non_null(r);
    return r;
}

static int has(api_cache *c, const char *key, uint64_t v)
{
    api_cached *e = api_cache_get(c, key, strlen(key), v);
    api_cache_release(e);
    return e != NULL;
}

static void test_versions_and_keys(void **state)
{
    (void)state;
    api_cache *c = api_cache_new();
    assert_non_null(c);
    assert_false(has(c, "runs|100", 7));
    struct MHD_Response *r = resp_of(10, 'a');
    api_cache_put(c, "runs|100", 8, 7, r, 10);
    api_cached *e = api_cache_get(c, "runs|100", 8, 7);
    assert_non_null(e);
    assert_ptr_equal(api_cached_response(e), r);
    api_cache_release(e);
    /* another key, a prefix of the key, another version: misses */
    assert_false(has(c, "runs|10", 7));
    assert_false(has(c, "runs|1000", 7));
    assert_false(has(c, "assignments|100", 7));
    assert_false(has(c, "runs|100", 6)); /* an older version never matches... */
    assert_true(has(c, "runs|100", 7));  /* ...nor evicts the entry */
    assert_false(has(c, "runs|100", 8)); /* a newer one drops the stale page */
    assert_false(has(c, "runs|100", 7));
    /* a slower render of an older version does not replace a newer page */
    api_cache_put(c, "k", 1, 20, resp_of(1, 'n'), 1);
    api_cache_put(c, "k", 1, 19, resp_of(1, 'o'), 1);
    assert_true(has(c, "k", 20));
    api_cache_put(c, "k", 1, 21, resp_of(1, 'p'), 1);
    assert_true(has(c, "k", 21));
    unsigned long long hits, misses, h2, m2;
    api_cache_counts(c, &hits, &misses);
    assert_int_equal(hits, 4);
    assert_int_equal(misses, 7);
    api_cache_counts(c, &h2, &m2); /* deltas: nothing since */
    assert_int_equal(h2, 0);
    assert_int_equal(m2, 0);
    api_cache_free(c);
}

static void test_lru_and_bounds(void **state)
{
    (void)state;
    api_cache *c = api_cache_new();
    char key[32];
    for (int i = 0; i < 16; i++) {
        snprintf(key, sizeof key, "q%d", i);
        api_cache_put(c, key, strlen(key), 1, resp_of(100, 'x'), 100);
    }
    assert_true(has(c, "q0", 1)); /* q0 is now the most recently used */
    api_cache_put(c, "q16", 3, 1, resp_of(100, 'x'), 100);
    assert_true(has(c, "q0", 1));
    assert_false(has(c, "q1", 1)); /* the least recently used went */
    assert_true(has(c, "q16", 1));
    assert_true(has(c, "q2", 1));
    /* bytes: a page over a quarter of the budget is never kept */
    api_cache_put(c, "huge", 4, 1, resp_of((size_t)3 * 1024 * 1024, 'h'), (size_t)3 * 1024 * 1024);
    assert_false(has(c, "huge", 1));
    /* big pages evict others until the total fits (8 MiB) */
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "big%d", i);
        api_cache_put(c, key, strlen(key), 1, resp_of((size_t)1900 * 1024, 'b'),
                      (size_t)1900 * 1024);
    }
    assert_false(has(c, "big0", 1));
    for (int i = 1; i < 5; i++) {
        snprintf(key, sizeof key, "big%d", i);
        assert_true(has(c, key, 1));
    }
    api_cache_free(c);
}

static void test_reference_outlives_eviction(void **state)
{
    (void)state;
    api_cache *c = api_cache_new();
    api_cache_put(c, "p", 1, 1, resp_of(64, 'z'), 64);
    api_cached *held = api_cache_get(c, "p", 1, 1);
    assert_non_null(held);
    api_cache_put(c, "p", 1, 2, resp_of(64, 'y'), 64); /* replaces it */
    api_cache_free(c);                                 /* and everything else */
    /* still usable: the body is intact (ASan would catch a use after free) */
    struct MHD_Response *r = api_cached_response(held);
    assert_non_null(r);
    api_cache_release(held);
}

/* ------------------------------------------------------- change version */

static char dir[64];

static uint64_t version(store *st)
{
    uint64_t v = 0;
    store_err e = {0};
    assert_int_equal(store_change_version(st, &v, &e), STORE_OK);
    return v;
}

static void save_metric(store *st, double value)
{
    store_metric m = {"t_total", "", value};
    store_err e = {0};
    assert_int_equal(store_metrics_save(st, &m, 1, &e), STORE_OK);
}

static void outside_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
}

static void test_change_version_file(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/fps-test-api-cache-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/s.db", dir);
    store_options opt = {.path = path, .sync_updates = 1};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&opt, &st, &e), STORE_OK);
    uint64_t v0 = version(st);
    assert_int_equal(version(st), v0); /* stable while nothing is written */
    strbuf b;
    strbuf_init(&b);
    store_run_filter f = {0};
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_OK);
    assert_int_equal(version(st), v0); /* reads do not move it */
    save_metric(st, 1);                /* a commit through this handle */
    uint64_t v1 = version(st);
    assert_true(v1 > v0);
    assert_int_equal(version(st), v1);
    /* another connection (as another process would) */
    outside_exec(path, "INSERT INTO metrics(name, labels, value) VALUES ('x_total', '', 1)");
    uint64_t v2 = version(st);
    assert_true(v2 > v1);
    assert_int_equal(version(st), v2);
    /* an outside transaction that rolls back changes nothing visible */
    outside_exec(path, "BEGIN IMMEDIATE; DELETE FROM metrics; ROLLBACK");
    uint64_t v3 = version(st);
    assert_true(v3 >= v2);
    outside_exec(path, "UPDATE metrics SET value = 2");
    assert_true(version(st) > v3);
    strbuf_free(&b);
    store_close(st);
    unlink(path);
    char side[300];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    rmdir(dir);
}

static void test_change_version_memory(void **state)
{
    (void)state;
    store_options opt = {.path = ":memory:", .sync_updates = 1};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&opt, &st, &e), STORE_OK);
    uint64_t v0 = version(st);
    assert_int_equal(version(st), v0);
    save_metric(st, 3);
    assert_true(version(st) > v0);
    store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_keys),
        cmocka_unit_test(test_lru_and_bounds),
        cmocka_unit_test(test_reference_outlives_eviction),
        cmocka_unit_test(test_change_version_file),
        cmocka_unit_test(test_change_version_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
