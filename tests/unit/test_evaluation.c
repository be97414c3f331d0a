/* tests/unit/test_evaluation: the mapping from the jail's outcomes (sbx_end)
 * to run statuses, error codes and messages (sidecar/evaluation/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "sidecar/evaluation/evaluation.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_outcome_to_run_status(void **state)
{
    (void)state;
    const char *st, *code;
    char msg[256];
    sbx_outcome o;
    memset(&o, 0, sizeof o);
    o.status = SBX_OK;
    o.json =
        json_loads("{\"ok\": false, \"stage\": \"compile\", \"message\": \"evaluator_source must "
                   "be one expression\"}",
                   0, NULL);
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "failed");
    assert_string_equal(code, "eval_error");
    assert_string_equal(msg, "evaluator source rejected: evaluator_source must be one expression");
    json_decref(o.json);
    o.json = json_loads(
        "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"ZeroDivisionError\"}", 0, NULL);
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "failed");
    assert_string_equal(msg, "evaluation raised ZeroDivisionError");
    json_decref(o.json);
    o.json =
        json_loads("{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"steps\"}", 0, NULL);
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "timed_out");
    assert_string_equal(code, "eval_timeout");
    assert_string_equal(msg, "evaluation exceeded its configured timeout");
    json_decref(o.json);
    o.json = json_loads("{\"ok\": true, \"results\": [], \"summary\": null}", 0, NULL);
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "succeeded");
    assert_null(code);
    json_decref(o.json);
    o.json = NULL;
    o.status = SBX_TIMEOUT;
    snprintf(o.limit, sizeof o.limit, "memory");
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "timed_out");
    assert_string_equal(code, "eval_timeout");
    char *line = sbx_outcome_line(&o);
    assert_string_equal(line, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"memory\"}");
    free(line);
    o.status = SBX_OUTPUT;
    snprintf(o.limit, sizeof o.limit, "output");
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "failed");
    assert_non_null(strstr(msg, "1 MiB"));
    o.status = SBX_JAIL_FAILURE;
    snprintf(o.detail, sizeof o.detail, "killed by seccomp");
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "failed");
    assert_string_equal(code, "sandbox_error");
    o.status = SBX_CANCELLED;
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "cancelled");
    o.status = SBX_OK;
    o.json =
        json_loads("{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"output\"}", 0, NULL);
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "failed");
    assert_string_equal(code, "eval_error");
    assert_string_equal(msg, "evaluation output exceeded 1 MiB");
    json_decref(o.json);
    o.json = json_loads("{\"ok\": false, \"stage\": \"elsewhere\"}", 0, NULL);
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "failed");
    assert_string_equal(code, "sandbox_error");
    assert_string_equal(msg, "evaluation sandbox returned an unknown outcome");
    json_decref(o.json);
    o.json = NULL;
    o.status = SBX_JAIL_FAILURE;
    snprintf(o.detail, sizeof o.detail, "killed by seccomp");
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "failed");
    assert_string_equal(code, "sandbox_error");
    assert_string_equal(msg, "evaluation sandbox failed: killed by seccomp");
    o.status = SBX_CANCELLED;
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(st, "cancelled");
    assert_string_equal(code, "cancelled");
    assert_string_equal(msg, "evaluation was cancelled");
    assert_string_equal(evaluation_status_name(EVAL_RUN_TIMED_OUT), "timed_out");
}

static const char *cond_reason(sbx_status st, const char *limit, const char *json, char *rbuf,
                               size_t cap)
{
    sbx_outcome o;
    memset(&o, 0, sizeof o);
    o.status = st;
    snprintf(o.limit, sizeof o.limit, "%s", limit);
    o.json = json ? json_loads(json, 0, NULL) : NULL;
    const char *r = evaluation_condition_reason(&o, rbuf, cap);
    json_decref(o.json);
    return r;
}

static void test_condition_rules(void **state)
{
    (void)state;
    char rb[136];
    assert_null(cond_reason(SBX_OK, "", "{\"ok\": true, \"applicable\": true}", rb, sizeof rb));
    assert_string_equal(
        cond_reason(SBX_OK, "", "{\"ok\": true, \"applicable\": false}", rb, sizeof rb),
        "condition_false");
    assert_string_equal(cond_reason(SBX_OK, "",
                                    "{\"ok\": true, \"applicable\": false, \"reason_code\": "
                                    "\"too_short\"}",
                                    rb, sizeof rb),
                        "too_short");
    assert_string_equal(cond_reason(SBX_TIMEOUT, "slot", NULL, rb, sizeof rb), "lease_exhausted");
    assert_string_equal(cond_reason(SBX_TIMEOUT, "budget", NULL, rb, sizeof rb), "lease_exhausted");
    assert_string_equal(cond_reason(SBX_TIMEOUT, "timeout", NULL, rb, sizeof rb),
                        "condition_error");
    assert_string_equal(cond_reason(SBX_OK, "",
                                    "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": "
                                    "\"KeyError\"}",
                                    rb, sizeof rb),
                        "condition_error");
    assert_string_equal(cond_reason(SBX_JAIL_FAILURE, "", NULL, rb, sizeof rb), "condition_error");
}

static void test_result_validation(void **state)
{
    (void)state;
    json_t *r = json_loads("[{\"result_key\": \"q\", \"result_kind\": \"score\"}]", 0, NULL);
    assert_int_equal(evaluation_results_valid(r, "q", "score"), 1);
    assert_int_equal(evaluation_results_valid(r, "q", "metric"), 0);
    assert_int_equal(evaluation_results_valid(r, "other", "score"), 0);
    assert_int_equal(evaluation_results_valid(r, NULL, "score"), 0);
    for (int i = 0; i < EVALUATION_MAX_RESULTS; i++)
        json_array_append_new(r,
                              json_pack("{s:s, s:s}", "result_key", "m", "result_kind", "metric"));
    assert_int_equal(evaluation_results_valid(r, "q", "score"), 0); /* 26 items */
    json_t *not_array = json_object();
    assert_int_equal(evaluation_results_valid(not_array, "q", "score"), 0);
    json_decref(not_array);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_outcome_to_run_status),
                                       cmocka_unit_test(test_condition_rules),
                                       cmocka_unit_test(test_result_validation)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
