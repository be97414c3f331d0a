/* Unit tests for the foundation: config precedence, flag errors, logger
 * secret redaction, secrets, RFC 3339 time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/timeutil.h"
#include "sidecar/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(run_config *cfg, int argc, char **argv, char *err, size_t cap)
{
    config_defaults(cfg);
    FILE *devnull = fopen("/dev/null", "w");
    int rc = cli_parse(config_run_command(), argc, argv, cfg, devnull, err, cap);
    fclose(devnull);
    return rc;
}

static void test_defaults_env_flags_precedence(void **state)
{
    (void)state;
    run_config cfg;
    char err[256];
    unsetenv("FAILPROOFAI_EVALUATOR_CONCURRENCY");
    unsetenv("FAILPROOFAI_EVALUATOR_URL");
    assert_int_equal(parse(&cfg, 0, NULL, err, sizeof err), CLI_OK);
    assert_int_equal(cfg.concurrency, 4);
    assert_string_equal(cfg.listen, "127.0.0.1:8787");
    config_free(&cfg);

    setenv("FAILPROOFAI_EVALUATOR_CONCURRENCY", "7", 1);
    setenv("FAILPROOFAI_EVALUATOR_URL", "http://127.0.0.1:9", 1);
    assert_int_equal(parse(&cfg, 0, NULL, err, sizeof err), CLI_OK);
    assert_int_equal(cfg.concurrency, 7);
    assert_string_equal(cfg.server_url, "http://127.0.0.1:9");
    config_free(&cfg);

    char *argv[] = {"--concurrency", "9", "--server=https://example.test"};
    assert_int_equal(parse(&cfg, 3, argv, err, sizeof err), CLI_OK);
    assert_int_equal(cfg.concurrency, 9);
    assert_string_equal(cfg.server_url, "https://example.test");
    config_free(&cfg);
    unsetenv("FAILPROOFAI_EVALUATOR_CONCURRENCY");
    unsetenv("FAILPROOFAI_EVALUATOR_URL");
}

static void test_flag_errors(void **state)
{
    (void)state;
    run_config cfg;
    char err[256];
    char *unknown[] = {"--frobnicate"};
    assert_int_equal(parse(&cfg, 1, unknown, err, sizeof err), CLI_ERROR);
    assert_non_null(strstr(err, "unknown flag '--frobnicate'"));
    config_free(&cfg);

    char *range[] = {"--concurrency", "33"};
    assert_int_equal(parse(&cfg, 2, range, err, sizeof err), CLI_ERROR);
    assert_non_null(strstr(err, "out of range"));
    config_free(&cfg);

    char *notint[] = {"--concurrency", "four"};
    assert_int_equal(parse(&cfg, 2, notint, err, sizeof err), CLI_ERROR);
    assert_non_null(strstr(err, "expected an integer"));
    config_free(&cfg);

    char *missing[] = {"--server"};
    assert_int_equal(parse(&cfg, 1, missing, err, sizeof err), CLI_ERROR);
    assert_non_null(strstr(err, "needs a value"));
    config_free(&cfg);

    setenv("FAILPROOFAI_EVALUATOR_CONCURRENCY", "lots", 1);
    assert_int_equal(parse(&cfg, 0, NULL, err, sizeof err), CLI_ERROR);
    assert_non_null(strstr(err, "FAILPROOFAI_EVALUATOR_CONCURRENCY"));
    config_free(&cfg);
    unsetenv("FAILPROOFAI_EVALUATOR_CONCURRENCY");
}

static void test_validate(void **state)
{
    (void)state;
    run_config cfg;
    char err[256];
    config_defaults(&cfg);
    cfg.token = "t";
    cfg.server_url = "http://evaluator.example.com";
    assert_int_equal(config_validate(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "https"));
    cfg.server_url = "http://127.0.0.1:8790";
    assert_int_equal(config_validate(&cfg, err, sizeof err), 0);
    cfg.listen = "0.0.0.0:8787";
    assert_int_equal(config_validate(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "--allow-remote-admin"));
    cfg.listen = "127.0.0.1:8787";
    cfg.token = NULL;
    assert_int_equal(config_validate(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "token"));
    config_free(&cfg);
}

static char *capture_log(void (*fn)(void))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    log_set_stream(f);
    fn();
    log_set_stream(NULL);
    fclose(f);
    return buf;
}

static void log_secrets(void)
{
    log_info("request", LOG_S("authorization", "Bearer sk-live-123"), LOG_S("api_token", "abc"),
             LOG_S("header", "Bearer sk-live-456"), LOG_S("path", "/v1/x"), LOG_I("n", 3));
}

static void test_log_redaction(void **state)
{
    (void)state;
    char *out = capture_log(log_secrets);
    assert_null(strstr(out, "sk-live"));
    assert_null(strstr(out, "abc"));
    assert_non_null(strstr(out, "\"authorization\":\"[redacted]\""));
    assert_non_null(strstr(out, "\"path\":\"/v1/x\""));
    assert_non_null(strstr(out, "\"n\":3"));
    assert_non_null(strstr(out, "\"level\":\"info\""));
    free(out);
}

static void log_escapes(void)
{
    log_warn("quote\" and\nnewline", LOG_S("k", "\x01"));
}

static void test_log_is_json_line(void **state)
{
    (void)state;
    char *out = capture_log(log_escapes);
    assert_non_null(strstr(out, "quote\\\" and\\nnewline"));
    assert_non_null(strstr(out, "\\u0001"));
    assert_int_equal(out[strlen(out) - 1], '\n');
    assert_null(strchr(out, '\n') == out + strlen(out) - 1 ? NULL : "two lines");
    free(out);
}

static void log_below_level(void)
{
    log_set_level(LOG_WARN);
    log_info("hidden");
    log_set_level(LOG_INFO);
}

static void test_log_level(void **state)
{
    (void)state;
    log_level l;
    assert_int_equal(log_parse_level("WARNING", &l), 0);
    assert_int_equal(l, LOG_WARN);
    assert_int_equal(log_parse_level("loud", &l), -1);
    char *out = capture_log(log_below_level);
    assert_true(out == NULL || strstr(out, "hidden") == NULL);
    free(out);
}

static void test_secret(void **state)
{
    (void)state;
    secret *s = secret_from_str("tok-1\n");
    assert_non_null(s);
    assert_string_equal(secret_expose(s), "tok-1");
    assert_true(secret_equals(s, "tok-1", 5));
    assert_false(secret_equals(s, "tok-2", 5));
    assert_false(secret_equals(s, "tok-", 4));
    secret_free(s);
    assert_null(secret_from_str("  \n"));
    char err[128];
    assert_null(secret_from_file("/nonexistent/token", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/token"));
}

static void test_time_and_ids(void **state)
{
    (void)state;
    char ts[40];
    time_rfc3339(1756382410.812, ts, sizeof ts);
    assert_string_equal(ts, "2025-08-28T12:00:10.812000Z");
    double e;
    assert_int_equal(time_parse_rfc3339("2026-08-28T12:02:00.000000Z", &e), 0);
    time_rfc3339(e, ts, sizeof ts);
    assert_string_equal(ts, "2026-08-28T12:02:00.000000Z");
    assert_int_equal(time_parse_rfc3339("2026-08-28T12:02:00+01:00", &e), 0);
    time_rfc3339(e, ts, sizeof ts);
    assert_string_equal(ts, "2026-08-28T11:02:00.000000Z");
    assert_int_equal(time_parse_rfc3339("2026-13-28T12:02:00Z", &e), -1);
    assert_int_equal(time_parse_rfc3339("yesterday", &e), -1);
    char rid[33], hex[65];
    ids_request_id(rid);
    assert_int_equal(strlen(rid), 32);
    assert_int_equal(strspn(rid, "0123456789abcdef"), 32);
    ids_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_env_flags_precedence),
        cmocka_unit_test(test_flag_errors),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_log_redaction),
        cmocka_unit_test(test_log_is_json_line),
        cmocka_unit_test(test_log_level),
        cmocka_unit_test(test_secret),
        cmocka_unit_test(test_time_and_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
