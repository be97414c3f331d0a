/* tests/unit/test_local_dispatch: how a local evaluator's answer to a run is
 * judged (local_reply_judge): the size cap, redirects and other HTTP
 * statuses, bad JSON, answers that are not an EvalResult (wrong types,
 * unknown fields, oversized fields), a missing primary result, and the
 * success that carries the items and summary. Each failure has its precise
 * message, never quotes the answer, and leaves no result behind. */
#include "sidecar/local/local.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* Judges `body` answered with `http` for a run of key "q" whose primary
 * result is a score, from evaluator "ev"; *out as local_client_dispatch
 * starts it (the caller frees it). */
static void judge_as(long http, const char *body, size_t len, int truncated, const char *kind,
                     local_dispatch_result *out)
{
    memset(out, 0, sizeof *out);
    out->status = EVAL_RUN_FAILED;
    out->results = json_array();
    local_reply rp = {http, body, len, truncated};
    local_reply_judge(&rp, "ev", "q", kind, out);
}

static void judge(long http, const char *body, local_dispatch_result *out)
{
    judge_as(http, body, body ? strlen(body) : 0, 0, "score", out);
}

/* A failure: failed / eval_error with exactly `msg`, no results, no summary. */
static void assert_failed(long http, const char *body, const char *msg)
{
    local_dispatch_result out;
    judge(http, body, &out);
    if (out.status != EVAL_RUN_FAILED || strcmp(out.error_code, "eval_error") != 0 ||
        strcmp(out.error_message, msg) != 0)
        fail_msg("HTTP %ld body %s: status %s code '%s' message '%s' (want failed eval_error '%s')",
                 http, body ? body : "(none)", evaluation_status_name(out.status), out.error_code,
                 out.error_message, msg);
    assert_int_equal(json_array_size(out.results), 0);
    assert_null(out.summary);
    local_dispatch_result_free(&out);
}

static void success_carries_items_and_summary(void **state)
{
    (void)state;
    local_dispatch_result out;
    judge(200, "{\"score\":0.25,\"summary\":\"fine\",\"metrics\":{\"latency\":3}}", &out);
    assert_int_equal(out.status, EVAL_RUN_SUCCEEDED);
    assert_string_equal(out.error_code, "");
    assert_string_equal(out.error_message, "");
    assert_non_null(out.summary);
    assert_string_equal(out.summary, "fine");
    assert_int_equal(json_array_size(out.results), 2);
    const json_t *score = json_array_get(out.results, 0);
    assert_string_equal(json_string_value(json_object_get(score, "result_key")), "q");
    assert_string_equal(json_string_value(json_object_get(score, "result_kind")), "score");
    assert_true(json_real_value(json_object_get(score, "numeric_value")) == 0.25);
    const json_t *metric = json_array_get(out.results, 1);
    assert_string_equal(json_string_value(json_object_get(metric, "result_key")), "latency");
    assert_string_equal(json_string_value(json_object_get(metric, "result_kind")), "metric");
    local_dispatch_result_free(&out);
    /* any 2xx is an answer */
    judge(201, "{\"assertions\":{\"q\":true}}", &out);
    assert_int_equal(out.status, EVAL_RUN_FAILED); /* the primary is a score, not an assertion */
    local_dispatch_result_free(&out);
    const char *assertion = "{\"assertions\":{\"q\":true}}";
    judge_as(299, assertion, strlen(assertion), 0, "assertion", &out);
    assert_int_equal(out.status, EVAL_RUN_SUCCEEDED);
    assert_null(out.summary);
    assert_int_equal(json_array_size(out.results), 1);
    local_dispatch_result_free(&out);
}

static void oversized_answers(void **state)
{
    (void)state;
    const char *msg = "local evaluator 'ev' answered more than 1048576 bytes";
    local_dispatch_result out;
    /* the transfer was cut: whatever came is not read */
    judge_as(200, "{\"score\":0.5}", 13, 1, "score", &out);
    assert_int_equal(out.status, EVAL_RUN_FAILED);
    assert_string_equal(out.error_code, "eval_error");
    assert_string_equal(out.error_message, msg);
    assert_int_equal(json_array_size(out.results), 0);
    local_dispatch_result_free(&out);
    /* the cap comes before the status */
    judge_as(500, "", 0, 1, "score", &out);
    assert_string_equal(out.error_message, msg);
    local_dispatch_result_free(&out);
    /* bytes handed over whole but over the cap, a valid answer padded */
    size_t n = LOCAL_MAX_RESPONSE_BYTES + 1;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, ' ', n);
    memcpy(big, "{\"score\":0.5}", 13);
    big[n] = '\0';
    judge_as(200, big, n, 0, "score", &out);
    assert_int_equal(out.status, EVAL_RUN_FAILED);
    assert_string_equal(out.error_message, msg);
    local_dispatch_result_free(&out);
    /* exactly at the cap it is read */
    judge_as(200, big, n - 1, 0, "score", &out);
    assert_int_equal(out.status, EVAL_RUN_SUCCEEDED);
    local_dispatch_result_free(&out);
    free(big);
}

static void http_statuses(void **state)
{
    (void)state;
    const char *ok = "{\"score\":0.5}";
    assert_failed(301, ok,
                  "local evaluator 'ev' answered a redirect (HTTP 301); redirects are not "
                  "followed");
    assert_failed(399, ok,
                  "local evaluator 'ev' answered a redirect (HTTP 399); redirects are not "
                  "followed");
    assert_failed(300, ok,
                  "local evaluator 'ev' answered a redirect (HTTP 300); redirects are not "
                  "followed");
    assert_failed(400, ok, "local evaluator 'ev' answered HTTP 400");
    assert_failed(500, ok, "local evaluator 'ev' answered HTTP 500");
    assert_failed(199, ok, "local evaluator 'ev' answered HTTP 199");
    assert_failed(100, ok, "local evaluator 'ev' answered HTTP 100");
    assert_failed(0, ok, "local evaluator 'ev' answered HTTP 0");
    assert_failed(-1, ok, "local evaluator 'ev' answered HTTP -1");
}

static void bad_json(void **state)
{
    (void)state;
    assert_failed(200, NULL, "local evaluator 'ev' answered invalid JSON (at byte 0)");
    assert_failed(200, "", "local evaluator 'ev' answered invalid JSON (at byte 0)");
    assert_failed(204, "", "local evaluator 'ev' answered invalid JSON (at byte 0)");
    assert_failed(200, "{\"score\":0.5", "local evaluator 'ev' answered invalid JSON (at byte 12)");
    assert_failed(200, "{\"score\":0.5}}",
                  "local evaluator 'ev' answered invalid JSON (at byte 14)"); /* trailing */
    assert_failed(200, "score=0.5", "local evaluator 'ev' answered invalid JSON (at byte 5)");
    /* a bare string is JSON, but not an answer's: only an object or array is read */
    assert_failed(200, "\"ok\"", "local evaluator 'ev' answered invalid JSON (at byte 4)");
}

#define INVALID "local evaluator 'ev' returned an invalid EvalResult: "

static void not_an_eval_result(void **state)
{
    (void)state;
    /* the wrong types */
    assert_failed(200, "[]", INVALID "the answer must be a JSON object");
    assert_failed(200, "{\"score\":\"high\"}", INVALID "score must be a number or an object");
    assert_failed(200, "{\"score\":true}", INVALID "score must be a number or an object");
    assert_failed(200, "{\"score\":1.5}", INVALID "score value must be between 0 and 1");
    assert_failed(200, "{\"score\":{\"passed\":true}}", INVALID "score value is required");
    assert_failed(200, "{\"metrics\":[1]}", INVALID "metrics must be an object");
    assert_failed(200, "{\"metrics\":{\"q\":\"3\"}}", INVALID "metric value must be a number");
    assert_failed(200, "{\"assertions\":{\"q\":\"yes\"}}",
                  INVALID "assertion passed must be a boolean");
    assert_failed(200, "{\"score\":0.5,\"summary\":7}", INVALID "summary must be a string");
    assert_failed(200, "{\"score\":0.5,\"labels\":\"a\"}",
                  INVALID "labels must be an array of strings");
    assert_failed(200, "{}", INVALID "an EvalResult must contain a score, metric, or assertion");
    /* unknown fields */
    assert_failed(200, "{\"score\":{\"value\":0.5,\"colour\":\"red\"}}",
                  INVALID "score has an unexpected field");
    assert_failed(200, "{\"metrics\":{\"q\":{\"value\":1,\"max\":2}}}",
                  INVALID "metric has an unexpected field");
    /* keys */
    assert_failed(200, "{\"metrics\":{\"Bad-Key\":1}}",
                  INVALID "metric key must match ^[a-z][a-z0-9_]*$");
}

static void oversized_fields(void **state)
{
    (void)state;
    char *body = malloc(4200);
    assert_non_null(body);
    int n = snprintf(body, 4200, "{\"score\":0.5,\"summary\":\"%0*d\"}", 4097, 0);
    assert_true(n > 4097 && n < 4200);
    assert_failed(200, body, INVALID "summary is 4097 bytes; maximum is 4096");
    snprintf(body, 4200, "{\"score\":0.5,\"summary\":\"%0*d\"}", 4096, 0);
    local_dispatch_result out;
    judge(200, body, &out);
    assert_int_equal(out.status, EVAL_RUN_SUCCEEDED); /* at the bound */
    assert_int_equal(strlen(out.summary), 4096);
    local_dispatch_result_free(&out);
    free(body);
    /* 26 results, one over the cap */
    char many[1024];
    size_t at = (size_t)snprintf(many, sizeof many, "{\"score\":0.5,\"metrics\":{");
    for (int i = 0; i < 25; i++)
        at += (size_t)snprintf(many + at, sizeof many - at, "%s\"m%02d\":1", i ? "," : "", i);
    snprintf(many + at, sizeof many - at, "}}");
    assert_failed(200, many, INVALID "an EvalResult may contain at most 25 results");
}

static void missing_primary(void **state)
{
    (void)state;
    assert_failed(200, "{\"metrics\":{\"other\":1}}",
                  "result is missing the primary result (key 'q', kind 'score')");
    /* the key is there, with another kind */
    assert_failed(200, "{\"metrics\":{\"q\":1}}",
                  "result is missing the primary result (key 'q', kind 'score')");
    /* no declared kind: nothing is primary */
    local_dispatch_result out;
    judge_as(200, "{\"score\":0.5}", 13, 0, NULL, &out);
    assert_int_equal(out.status, EVAL_RUN_FAILED);
    assert_string_equal(out.error_message,
                        "result is missing the primary result (key 'q', kind '')");
    assert_int_equal(json_array_size(out.results), 0);
    local_dispatch_result_free(&out);
}

static void never_quotes_the_answer(void **state)
{
    (void)state;
    const char *bodies[] = {"{\"score\":\"sk-SECRET-123\"}", "{\"sk-SECRET-123\":1}",
                            "sk-SECRET-123", "{\"metrics\":{\"sk-SECRET-123\":1}}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        local_dispatch_result out;
        judge(200, bodies[i], &out);
        assert_int_equal(out.status, EVAL_RUN_FAILED);
        assert_true(out.error_message[0] != '\0');
        if (strstr(out.error_message, "SECRET") != NULL)
            fail_msg("the message quotes the answer: %s", out.error_message);
        local_dispatch_result_free(&out);
    }
}

/* local_result_items keeps its documented return value. */
static void result_items_contract(void **state)
{
    (void)state;
    const char *bad[] = {"[]", "{\"summary\":7,\"score\":0.5}", "{\"score\":2}", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *a = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        assert_non_null(a);
        json_t *items = (json_t *)1;
        char *summary = (char *)1;
        fps_err err = {0};
        int rc = local_result_items(a, "q", &items, &summary, &err);
        if (rc != LOCAL_EBAD_RESULT) fail_msg("%s: rc %d, want LOCAL_EBAD_RESULT", bad[i], rc);
        assert_string_equal(err.name, "eval_error");
        assert_null(items);
        assert_null(summary);
        json_decref(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(success_carries_items_and_summary),
        cmocka_unit_test(oversized_answers),
        cmocka_unit_test(http_statuses),
        cmocka_unit_test(bad_json),
        cmocka_unit_test(not_an_eval_result),
        cmocka_unit_test(oversized_fields),
        cmocka_unit_test(missing_primary),
        cmocka_unit_test(never_quotes_the_answer),
        cmocka_unit_test(result_items_contract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
