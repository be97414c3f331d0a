/* tests/unit/test_worker_plan: the worker's plan matching (the runs must be
 * exactly the selected definitions unless the plan is an idempotent replay;
 * known definitions; unchanged execution mode) and the managed source
 * checksum check (fail closed). */
#include "common/ids.h"
#include "sidecar/worker/worker_plan.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static json_t *defs(void)
{
    return json_pack("[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s}]", "eval_key", "a", "eval_version",
                     "1", "execution_mode", "python", "condition_source", "True", "eval_key", "b",
                     "eval_version", "2", "execution_mode", "local");
}

static json_t *run(const char *id, const char *key, const char *ver, const char *mode)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "evaluation_run_id", id, "eval_key", key,
                     "eval_version", ver, "execution_mode", mode);
}

static json_t *sel(const char *key, const char *ver)
{
    return json_pack("{s:s, s:s}", "eval_key", key, "eval_version", ver);
}

/* A run descriptor as the cloud client hands it over (borrowing from o). */
static cloud_run typed(json_t *o)
{
    const char *mode = cloud_jstr(o, "execution_mode");
    return (cloud_run){.run_id = cloud_jstr(o, "evaluation_run_id"),
                       .eval_key = cloud_jstr(o, "eval_key"),
                       .eval_version = cloud_jstr(o, "eval_version"),
                       .evaluator_source = cloud_jstr(o, "evaluator_source"),
                       .source_checksum = cloud_jstr(o, "source_checksum"),
                       .mode = !strcmp(mode, "python") ? CLOUD_MODE_PYTHON : CLOUD_MODE_LOCAL,
                       .obj = o};
}

/* Runs the matcher on a plan of `runs` (stolen) with status `status`. */
static int match(json_t *runs, const char *status, int replay, const json_t *selected,
                 size_t *nruns, fps_err *err)
{
    json_t *d = defs();
    cloud_run typed_runs[8];
    for (size_t i = 0; i < json_array_size(runs); i++)
        typed_runs[i] = typed(json_array_get(runs, i));
    cloud_plan p = {.obj = runs,
                    .assignment_status = status,
                    .status = !strcmp(status, "planned")   ? CLOUD_PLAN_PLANNED
                              : !strcmp(status, "skipped") ? CLOUD_PLAN_SKIPPED
                                                           : CLOUD_PLAN_OTHER,
                    .idempotent_replay = replay,
                    .runs = typed_runs,
                    .nruns = json_array_size(runs)};
    wrun *out = NULL;
    int rc = worker_plan_match(&p, d, selected, &out, nruns, err);
    if (rc == 0) {
        assert_non_null(out);
        for (size_t i = 0; i < *nruns; i++) {
            assert_ptr_equal(out[i].run, &typed_runs[i]);
            assert_string_equal(out[i].run_id,
                                cloud_jstr(json_array_get(runs, i), "evaluation_run_id"));
            assert_string_equal(cloud_jstr(out[i].def, "eval_key"), out[i].run->eval_key);
        }
    } else {
        assert_null(out);
        assert_int_equal(*nruns, 0);
    }
    free(out);
    json_decref(runs);
    json_decref(d);
    return rc;
}

/* Asserts that the plan of `runs` (stolen) is refused, and, unless why is
 * NULL, with a message containing why. */
static void assert_refused(json_t *runs, const char *status, int replay, const json_t *selected,
                           const char *why)
{
    fps_err err;
    size_t n;
    assert_int_equal(match(runs, status, replay, selected, &n, &err), -1);
    if (why) assert_non_null(strstr(err.msg, why));
}

static void test_exact_match(void **state)
{
    (void)state;
    fps_err err;
    size_t n = 9;
    json_t *s = json_pack("[o, o]", sel("a", "1"), sel("b", "2"));
    assert_int_equal(
        match(json_pack("[o, o]", run("r2", "b", "2", "local"), run("r1", "a", "1", "python")),
              "planned", 0, s, &n, &err),
        0);
    assert_int_equal(n, 2);
    json_decref(s);
    /* Nothing selected: a "skipped" plan with no runs. */
    s = json_array();
    assert_int_equal(match(json_array(), "skipped", 0, s, &n, &err), 0);
    assert_int_equal(n, 0);
    json_decref(s);
}

static void test_mismatches(void **state)
{
    (void)state;
    json_t *s = json_pack("[o]", sel("a", "1"));
    assert_refused(json_pack("[o]", run("r1", "a", "1", "python")), "skipped", 0, s,
                   "plan status 'skipped' where 'planned' was expected");
    assert_refused(json_array(), "planned", 0, s, "0 runs for 1 selected");
    assert_refused(json_pack("[o]", run("r1", "b", "2", "local")), "planned", 0, s,
                   "b@2 was not selected");
    assert_refused(json_pack("[o]", run("r1", "z", "1", "python")), "planned", 0, s,
                   "r1 names an unknown definition");
    assert_refused(json_pack("[o]", run("r1", "a", "1", "local")), "planned", 0, s,
                   "changed the execution_mode of a");
    json_decref(s);
    /* The same definition twice. */
    s = json_pack("[o, o]", sel("a", "1"), sel("b", "2"));
    assert_refused(
        json_pack("[o, o]", run("r1", "a", "1", "python"), run("r2", "a", "1", "python")),
        "planned", 0, s, "(or repeats)");
    json_decref(s);
}

static void test_replay_is_not_strict(void **state)
{
    (void)state;
    fps_err err;
    size_t n;
    /* A replayed plan answers an earlier request: any status, any subset of
     * known definitions; still no unknown definition or changed mode. */
    json_t *s = json_pack("[o]", sel("a", "1"));
    assert_int_equal(
        match(json_pack("[o]", run("r9", "b", "2", "local")), "planned", 1, s, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_refused(json_pack("[o]", run("r9", "c", "2", "local")), "planned", 1, s, NULL);
    assert_refused(json_pack("[o]", run("r9", "b", "2", "python")), "planned", 1, s, NULL);
    json_decref(s);
}

static void test_source_checksum(void **state)
{
    (void)state;
    char hex[65], sum[80];
    fps_err err;
    const char src[] = "True\0EvalResult(score=Score(1.0))";
    ids_sha256_hex(src, sizeof src - 1, hex);
    snprintf(sum, sizeof sum, "sha256:%s", hex);
    json_t *d = defs();
    json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:s}", "evaluation_run_id", "r1", "eval_key", "a",
                          "execution_mode", "python", "evaluator_source",
                          "EvalResult(score=Score(1.0))", "source_checksum", sum);
    cloud_run tr = typed(r);
    wrun runs[2] = {{.run_id = "r1", .run = &tr, .def = json_array_get(d, 0)}};
    assert_int_equal(worker_plan_verify_sources(runs, 1, &err), 0);
    /* Local runs carry no source: not checked. */
    json_t *lr = run("r2", "b", "2", "local");
    cloud_run tlr = typed(lr);
    runs[1] = (wrun){.run_id = "r2", .run = &tlr, .def = json_array_get(d, 1)};
    assert_int_equal(worker_plan_verify_sources(runs, 2, &err), 0);
    /* The definition's checksum must agree too. */
    json_object_set_new(json_array_get(d, 0), "source_checksum", json_string("sha256:00"));
    assert_int_equal(worker_plan_verify_sources(runs, 1, &err), -1);
    assert_non_null(strstr(err.msg, "source_checksum mismatch for run r1 (a)"));
    json_object_del(json_array_get(d, 0), "source_checksum");
    json_object_set_new(r, "evaluator_source", json_string("EvalResult(score=Score(0.0))"));
    tr = typed(r); /* the client's view of the changed descriptor */
    assert_int_equal(worker_plan_verify_sources(runs, 1, &err), -1);
    json_object_del(r, "source_checksum");
    tr = typed(r);
    assert_int_equal(worker_plan_verify_sources(runs, 1, &err), -1);
    assert_non_null(strstr(err.msg, "lacks evaluator_source or source_checksum"));
    json_decref(r);
    json_decref(lr);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_match),
        cmocka_unit_test(test_mismatches),
        cmocka_unit_test(test_replay_is_not_strict),
        cmocka_unit_test(test_source_checksum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
