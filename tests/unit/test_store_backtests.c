/* tests/unit/test_store_backtests: the saved backtests (store.h,
 * store_backtests.c): a round trip of the row, its summary, request and
 * rows (the exact bytes back); newest first; a duplicate id refused; the
 * count bound and the compressed-bytes bound (the newest always kept);
 * damaged rows reported as corrupt; pruning with the history's retention;
 * and everything survives closing and reopening the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TMPDIR_NAME "store-bt"
#include "tmpdir.h"

static store *open_at(const char *path, double retention_hours, int64_t max_bytes)
{
    store_options o = {.path = path,
                       .retention_hours = retention_hours,
                       .backtests_max_bytes = max_bytes,
                       .sync_updates = 1};
    store *st = NULL;
    store_err e = {0};
    int rc = store_open(&o, &st, &e);
    if (rc != STORE_OK) fprintf(stderr, "open: %s\n", e.msg);
    assert_int_equal(rc, STORE_OK);
    return st;
}

static void new_path(char *out, size_t cap)
{
    snprintf(out, cap, "%s/s-%d.db", g_dir, ++g_seq);
}

static int put(store *st, const char *id, double finished, const char *rows)
{
    store_backtest b = {.id = (char *)id,
                        .state = "done",
                        .created_at = finished - 5,
                        .finished_at = finished,
                        .done = 3,
                        .total = 3,
                        .request_json = "{\"definitions\":[],\"baseline\":\"production\"}",
                        .summary_json = "{\"sessions\":3}"};
    store_err e = {0};
    return store_backtest_put(st, &b, rows, strlen(rows), &e);
}

static size_t count(store *st)
{
    store_backtest *v = NULL;
    size_t n = 0;
    store_err e;
    assert_int_equal(store_backtest_list(st, &v, &n, &e), STORE_OK);
    store_backtests_free(v, n);
    return n;
}

static void test_round_trip_and_reopen(void **state)
{
    (void)state;
    char path[300];
    new_path(path, sizeof path);
    store *st = open_at(path, 0, 0);
    const char *rows = "[{\"session_id\":\"s1\",\"eval_key\":\"k\",\"changed\":true}]";
    assert_int_equal(put(st, "bt-1", 1000, rows), STORE_OK);
    assert_int_equal(put(st, "bt-2", 2000, "[]"), STORE_OK);
    assert_int_equal(put(st, "bt-1", 3000, "[]"), STORE_CONFLICT);
    /* a failed one keeps its reason, and has no summary */
    store_backtest f = {.id = "bt-f",
                        .state = "failed",
                        .created_at = 1500,
                        .finished_at = 1500,
                        .request_json = "{\"definitions\":[]}",
                        .error = "the transcript archive x cannot be read: gone"};
    store_err fe = {0};
    assert_int_equal(store_backtest_put(st, &f, "[]", 2, &fe), STORE_OK);
    store_close(st);

    st = open_at(path, 0, 0);
    store_backtest *v = NULL;
    size_t n = 0;
    store_err e;
    assert_int_equal(store_backtest_list(st, &v, &n, &e), STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(v[0].id, "bt-f"); /* newest first */
    assert_string_equal(v[0].error, "the transcript archive x cannot be read: gone");
    assert_string_equal(v[1].id, "bt-2");
    assert_null(v[1].error);
    assert_string_equal(v[2].id, "bt-1");
    assert_null(v[2].summary_json); /* the list is light */
    assert_null(v[2].request_json);
    assert_true(v[2].rows_bytes > 0);
    store_backtests_free(v, n);
    store_backtest fb = {0};
    assert_int_equal(store_backtest_get(st, "bt-f", &fb, &e), STORE_OK);
    assert_string_equal(fb.state, "failed");
    assert_string_equal(fb.error, "the transcript archive x cannot be read: gone");
    assert_null(fb.summary_json);
    store_backtest_clear(&fb);

    store_backtest b = {0};
    assert_int_equal(store_backtest_get(st, "bt-1", &b, &e), STORE_OK);
    assert_string_equal(b.state, "done");
    assert_true(b.created_at == 995 && b.finished_at == 1000);
    assert_true(b.done == 3 && b.total == 3);
    assert_string_equal(b.summary_json, "{\"sessions\":3}");
    assert_string_equal(b.request_json, "{\"definitions\":[],\"baseline\":\"production\"}");
    store_backtest_clear(&b);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(store_backtest_rows(st, "bt-1", &text, &len, &e), STORE_OK);
    assert_int_equal(len, strlen(rows));
    assert_string_equal(text, rows);
    free(text);
    store_backtest none = {0};
    assert_int_equal(store_backtest_get(st, "bt-3", &none, &e), STORE_NOTFOUND);
    assert_int_equal(store_backtest_rows(st, "bt-3", &text, &len, &e), STORE_NOTFOUND);
    assert_null(text);
    store_backtest bad = {.id = "x"};
    assert_int_equal(store_backtest_put(st, &bad, "[]", 2, &e), STORE_INVALID);
    store_close(st);
}

static void test_count_bound(void **state)
{
    (void)state;
    char path[300];
    new_path(path, sizeof path);
    store *st = open_at(path, 0, 0);
    char id[32];
    for (int i = 0; i < STORE_BACKTESTS_KEPT + 5; i++) {
        snprintf(id, sizeof id, "bt-%03d", i);
        assert_int_equal(put(st, id, 1000 + i, "[]"), STORE_OK);
    }
    assert_int_equal(count(st), STORE_BACKTESTS_KEPT);
    store_backtest b = {0};
    store_err e;
    assert_int_equal(store_backtest_get(st, "bt-004", &b, &e), STORE_NOTFOUND);
    assert_int_equal(store_backtest_get(st, "bt-005", &b, &e), STORE_OK);
    store_backtest_clear(&b);
    /* the rows went with their backtests */
    store_close(st);
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM backtest_rows", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), STORE_BACKTESTS_KEPT);
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* Rows that do not compress: n bytes of hex digits from a seeded generator
 * inside a JSON string (about half compress away; the rest stays). */
static char *noise(size_t n, unsigned seed)
{
    char *s = malloc(n + 5);
    s[0] = '[';
    s[1] = '"';
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        s[2 + i] = "0123456789abcdef"[(seed >> 16) & 15];
    }
    memcpy(s + 2 + n, "\"]", 3);
    return s;
}

static void test_bytes_bound_keeps_the_newest(void **state)
{
    (void)state;
    char path[300];
    new_path(path, sizeof path);
    /* each one compresses to about 100 KB: three fit in 350 KB, not four */
    store *st = open_at(path, 0, 350L * 1000);
    for (int i = 0; i < 6; i++) {
        char id[16];
        snprintf(id, sizeof id, "bt-%d", i);
        char *rows = noise((size_t)200 * 1000, (unsigned)i + 1);
        assert_int_equal(put(st, id, 1000 + i, rows), STORE_OK);
        free(rows);
    }
    store_backtest *v = NULL;
    size_t n = 0;
    store_err e;
    assert_int_equal(store_backtest_list(st, &v, &n, &e), STORE_OK);
    assert_int_equal(n, 3);
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i].rows_bytes;
    assert_true(sum <= 350L * 1000);
    assert_string_equal(v[0].id, "bt-5");
    assert_string_equal(v[2].id, "bt-3");
    store_backtests_free(v, n);
    /* one bigger than the whole bound is still kept, alone */
    char *big = noise((size_t)1000 * 1000, 99);
    assert_int_equal(put(st, "big", 2000, big), STORE_OK);
    assert_int_equal(count(st), 1);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(store_backtest_rows(st, "big", &text, &len, &e), STORE_OK);
    assert_int_equal(len, strlen(big));
    assert_memory_equal(text, big, len);
    free(text);
    free(big);
    store_close(st);
}

static void test_damaged_rows_are_corrupt(void **state)
{
    (void)state;
    char path[300];
    new_path(path, sizeof path);
    store *st = open_at(path, 0, 0);
    assert_int_equal(put(st, "bt", 1000, "[{\"a\":1},{\"a\":2},{\"a\":3}]"), STORE_OK);
    store_close(st);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "UPDATE backtest_rows SET data = x'28b52ffd0000'", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    st = open_at(path, 0, 0);
    char *text = NULL;
    size_t len = 0;
    store_err e = {0};
    assert_int_equal(store_backtest_rows(st, "bt", &text, &len, &e), STORE_CORRUPT);
    assert_null(text);
    assert_non_null(strstr(e.msg, "do not decompress"));
    store_close(st);
}

static void test_pruned_with_the_history(void **state)
{
    (void)state;
    char path[300];
    new_path(path, sizeof path);
    store *st = open_at(path, 1, 0); /* one hour */
    double now = 1e9;
    assert_int_equal(put(st, "old", now - 7200, "[]"), STORE_OK);
    assert_int_equal(put(st, "new", now - 600, "[]"), STORE_OK);
    store_err e;
    assert_int_equal(store_prune(st, now, NULL, NULL, &e), STORE_OK);
    store_backtest b = {0};
    assert_int_equal(store_backtest_get(st, "old", &b, &e), STORE_NOTFOUND);
    assert_int_equal(store_backtest_get(st, "new", &b, &e), STORE_OK);
    store_backtest_clear(&b);
    store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_reopen),
        cmocka_unit_test(test_count_bound),
        cmocka_unit_test(test_bytes_bound_keeps_the_newest),
        cmocka_unit_test(test_damaged_rows_are_corrupt),
        cmocka_unit_test(test_pruned_with_the_history),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
