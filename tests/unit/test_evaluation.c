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
    assert_string_equal(msg, "evaluation sandbox failed: killed by seccomp");
    o.status = SBX_CANCELLED;
    st = evaluation_status_name(evaluation_map_outcome(&o, &code, msg, sizeof msg));
    assert_string_equal(code, "cancelled");
    assert_string_equal(msg, "evaluation was cancelled");
    assert_string_equal(evaluation_status_name(EVAL_RUN_TIMED_OUT), "timed_out");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_outcome_to_run_status)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
