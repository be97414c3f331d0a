/* tests/unit/test_backtest: the engine's "failed" state (backtest.h), in
 * process, for the reasons that a real sidecar cannot be made to show on
 * demand: a jail that cannot run a definition's compile check, and a state
 * database the production baseline cannot be read from; beside them an
 * archive that does not exist (at once, total 0) and, for contrast, a run
 * that finishes with no error. Each failed one has no summary and one
 * precise reason from backtest_error and backtest_wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/log.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/backtest/backtest.h"
#include "store/archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TMPDIR_NAME "backtest"
#include "tmpdir.h"

static const char DEFS[] = "[{\"eval_key\":\"k\",\"eval_version\":\"1\",\"result_kind\":\"score\","
                           "\"evaluator_source\":\"EvalResult(score=Score(1.0))\"}]";

/* test_mode NULL: children that evaluate; else jail_child.c's --test-<mode> */
static sbx_pool *make_pool(const char *test_mode)
{
    sbx_config c = {.max_sandboxes = 1,
                    .memory_mb = 512,
                    .self_exe = getenv("FPS_BIN"),
                    .prestart = -1,
                    .test_mode = test_mode};
    fps_err e = {0};
    sbx_pool *p = sbx_pool_new(&c, &e);
    if (p == NULL) fprintf(stderr, "sbx_pool_new: %s\n", e.msg);
    assert_non_null(p);
    return p;
}

static const char *transcript_path(void)
{
    static char path[600];
    const char *src = getenv("FPS_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/examples/transcript.json", src ? src : ".");
    return path;
}

/* Runs cfg to its end: the final state, its reason into why (cap bytes). */
static backtest_state run(const backtest_config *cfg, char *why, size_t cap)
{
    fps_err e = {0};
    backtest *bt = backtest_start(cfg, &e);
    if (bt == NULL) fprintf(stderr, "backtest_start: %s\n", e.msg);
    assert_non_null(bt);
    fps_err we = {0};
    backtest_state s = backtest_wait(bt, &we);
    int failed = backtest_error(bt, why, cap);
    assert_int_equal(failed, s == BT_FAILED);
    json_t *summary = backtest_summary(bt);
    if (s == BT_FAILED) {
        assert_null(summary);
        assert_int_equal(we.code, BT_EFAILED);
        assert_string_equal(we.name, "backtest_failed");
        assert_string_equal(we.msg, why);
    } else {
        assert_string_equal(why, "");
    }
    json_decref(summary);
    backtest_free(bt);
    return s;
}

static void test_done_has_no_error(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(NULL);
    const char *paths[] = {transcript_path()};
    backtest_config c = {.pool = p, .definitions = DEFS, .paths = paths, .npaths = 1};
    char why[800] = "x";
    assert_int_equal(run(&c, why, sizeof why), BT_DONE);
    sbx_pool_free(p);
}

/* Every child dies by seccomp: nothing can be checked, nor evaluated. */
static void test_jail_that_cannot_check_fails_it(void **state)
{
    (void)state;
    sbx_pool *p = make_pool("open");
    const char *paths[] = {transcript_path()};
    backtest_config c = {.pool = p, .definitions = DEFS, .paths = paths, .npaths = 1};
    char why[800];
    assert_int_equal(run(&c, why, sizeof why), BT_FAILED);
    static const char prefix[] =
        "definitions[0] (k): the jail could not run the compile check of its evaluator_source: ";
    assert_memory_equal(why, prefix, sizeof prefix - 1);
    assert_non_null(strstr(why, "seccomp"));
    sbx_pool_free(p);
}

/* No archive beside the state database: failed at once, with nothing to do. */
static void test_missing_archive_fails_at_once(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(NULL);
    char db[300], want[1000];
    snprintf(db, sizeof db, "%s/none-%d.db", g_dir, ++g_seq);
    backtest_config c = {.pool = p, .definitions = DEFS, .db_path = db, .baseline = "production"};
    fps_err e = {0};
    backtest *bt = backtest_start(&c, &e);
    assert_non_null(bt);
    long done = -1, total = -1;
    backtest_wait(bt, NULL);
    backtest_progress(bt, &done, &total);
    assert_true(done == 0 && total == 0);
    char why[800];
    assert_int_equal(backtest_error(bt, why, sizeof why), 1);
    snprintf(want, sizeof want,
             "the transcript archive %s.archive cannot be read: store: archive: open: %s.archive"
             " does not exist",
             db, db);
    assert_string_equal(why, want);
    backtest_free(bt);
    sbx_pool_free(p);
}

/* An archive with one session beside a state database that is not one:
 * every row would read "no baseline"; the run fails instead. */
static void test_unreadable_baseline_fails_it(void **state)
{
    (void)state;
    char db[300], archive[320];
    snprintf(db, sizeof db, "%s/bad-%d.db", g_dir, ++g_seq);
    snprintf(archive, sizeof archive, "%s.archive", db);
    FILE *f = fopen(db, "w");
    assert_non_null(f);
    for (int i = 0; i < 100; i++)
        fputs("this is not an SQLite database\n", f);
    fclose(f);
    f = fopen(transcript_path(), "rb");
    assert_non_null(f);
    char text[65536];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    store_archive_options ao = {.path = archive, .max_bytes = 1 << 20, .no_writer_thread = 1};
    store_archive *a = NULL;
    store_err se = {0};
    assert_int_equal(store_archive_open(&ao, &a, &se), STORE_OK);
    store_archive_meta m = {.session_id = "session-42", .assignment_id = "asg-1"};
    assert_int_equal(store_archive_put(a, &m, text, len, NULL, &se), STORE_OK);
    store_archive_close(a);

    sbx_pool *p = make_pool(NULL);
    backtest_config c = {.pool = p, .definitions = DEFS, .db_path = db, .baseline = "production"};
    char why[800];
    assert_int_equal(run(&c, why, sizeof why), BT_FAILED);
    static const char prefix[] = "the production baseline of session session-42 cannot be read"
                                 " from the state database: store: archive: ";
    assert_memory_equal(why, prefix, sizeof prefix - 1);
    assert_non_null(strstr(why, "file is not a database"));
    sbx_pool_free(p);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_done_has_no_error),
        cmocka_unit_test(test_jail_that_cannot_check_fails_it),
        cmocka_unit_test(test_missing_archive_fails_at_once),
        cmocka_unit_test(test_unreadable_baseline_fails_it),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
