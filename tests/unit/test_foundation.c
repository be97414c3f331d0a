/* Unit tests for the foundation: config precedence, flag errors, logger
 * secret redaction, secrets, RFC 3339 time (the arithmetic formatter against
 * gmtime), strbuf (integers, JSON string escaping). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/strbuf.h"
#include "common/timeutil.h"
#include "sidecar/config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int parse(run_config *cfg, int argc, char **argv, fps_err *err)
{
    config_defaults(cfg);
    FILE *devnull = fopen("/dev/null", "w");
    int rc = cli_parse(config_run_command(), argc, argv, cfg, devnull, err);
    fclose(devnull);
    return rc;
}

static void test_defaults_env_flags_precedence(void **state)
{
    (void)state;
    run_config cfg;
    fps_err err;
    unsetenv("FAILPROOFAI_EVALUATOR_CONCURRENCY");
    unsetenv("FAILPROOFAI_EVALUATOR_URL");
    assert_int_equal(parse(&cfg, 0, NULL, &err), CLI_OK);
    assert_int_equal(cfg.concurrency, 4);
    assert_string_equal(cfg.listen, "127.0.0.1:8787");
    config_free(&cfg);

    setenv("FAILPROOFAI_EVALUATOR_CONCURRENCY", "7", 1);
    setenv("FAILPROOFAI_EVALUATOR_URL", "http://127.0.0.1:9", 1);
    assert_int_equal(parse(&cfg, 0, NULL, &err), CLI_OK);
    assert_int_equal(cfg.concurrency, 7);
    assert_string_equal(cfg.server_url, "http://127.0.0.1:9");
    config_free(&cfg);

    char *argv[] = {"--concurrency", "9", "--server=https://example.test"};
    assert_int_equal(parse(&cfg, 3, argv, &err), CLI_OK);
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
    fps_err err;
    char *unknown[] = {"--frobnicate"};
    assert_int_equal(parse(&cfg, 1, unknown, &err), CLI_ERROR);
    assert_non_null(strstr(err.msg, "unknown flag '--frobnicate'"));
    config_free(&cfg);

    char *range[] = {"--concurrency", "33"};
    assert_int_equal(parse(&cfg, 2, range, &err), CLI_ERROR);
    assert_non_null(strstr(err.msg, "out of range"));
    config_free(&cfg);

    char *notint[] = {"--concurrency", "four"};
    assert_int_equal(parse(&cfg, 2, notint, &err), CLI_ERROR);
    assert_non_null(strstr(err.msg, "expected an integer"));
    config_free(&cfg);

    char *missing[] = {"--server"};
    assert_int_equal(parse(&cfg, 1, missing, &err), CLI_ERROR);
    assert_non_null(strstr(err.msg, "needs a value"));
    config_free(&cfg);

    setenv("FAILPROOFAI_EVALUATOR_CONCURRENCY", "lots", 1);
    assert_int_equal(parse(&cfg, 0, NULL, &err), CLI_ERROR);
    assert_non_null(strstr(err.msg, "FAILPROOFAI_EVALUATOR_CONCURRENCY"));
    config_free(&cfg);
    unsetenv("FAILPROOFAI_EVALUATOR_CONCURRENCY");
}

static void test_validate(void **state)
{
    (void)state;
    run_config cfg;
    fps_err err;
    config_defaults(&cfg);
    cfg.token = "t";
    cfg.server_url = "http://evaluator.example.com";
    assert_int_equal(config_validate(&cfg, &err), -1);
    assert_non_null(strstr(err.msg, "https"));
    cfg.server_url = "http://127.0.0.1:8790";
    assert_int_equal(config_validate(&cfg, &err), 0);
    cfg.listen = "0.0.0.0:8787";
    assert_int_equal(config_validate(&cfg, &err), -1);
    assert_non_null(strstr(err.msg, "--allow-remote-admin"));
    cfg.listen = "127.0.0.1:8787";
    cfg.token = NULL;
    assert_int_equal(config_validate(&cfg, &err), -1);
    assert_non_null(strstr(err.msg, "token"));
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
    fps_err err;
    assert_null(secret_from_file("/nonexistent/token", &err));
    assert_non_null(strstr(err.msg, "/nonexistent/token"));
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

/* The reference: gmtime_r + snprintf, as time_rfc3339 was first written. */
static void ref_rfc3339(double epoch, char *out, size_t cap)
{
    double whole = floor(epoch);
    long usec = lround((epoch - whole) * 1e6);
    time_t secs = (time_t)whole;
    if (usec >= 1000000) {
        secs += 1;
        usec -= 1000000;
    }
    struct tm tm;
    assert_non_null(gmtime_r(&secs, &tm));
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, usec);
}

static void check_rfc3339(double epoch)
{
    char want[128], got[64], small[11];
    ref_rfc3339(epoch, want, sizeof want);
    size_t n = time_rfc3339_n(epoch, got);
    if (strcmp(got, want) != 0) fail_msg("epoch %.6f: got %s, want %s", epoch, got, want);
    assert_int_equal(n, strlen(want));
    time_rfc3339(epoch, small, sizeof small); /* truncates like snprintf */
    assert_int_equal(strncmp(small, want, 10), 0);
    assert_int_equal(strlen(small), 10);
}

static void test_rfc3339_matches_gmtime(void **state)
{
    (void)state;
    static const double fixed[] = {
        0,
        -0.5,
        -1,
        -86400,
        -86401.25,
        0.0000004,
        0.0000005,
        0.9999994,
        0.9999996,
        59.9999996,
        86399.9999996,
        951782400, /* 2000-02-29 */
        951868799,
        4107542400, /* 2100-03-01 */
        4107456000,
        -2203891200,  /* 1900-03-01 */
        -62167219200, /* 0000-01-01 */
        253402300798.25,
        253402300799.9999996,
        1756382410.812,
        1e9,
        1.5e9,
        -12219292800, /* 1582-10-15 */
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        check_rfc3339(fixed[i]);
    /* every day boundary of four centuries around the epoch, and random times */
    for (int64_t d = -73000; d < 73000; d += 7)
        check_rfc3339((double)d * 86400 + (double)(d % 86400 + 86400) * 0.37);
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double epoch = -62167219200.0 + (double)(x % 31553789599ULL) * 10 +
                       (double)(x >> 44) / (double)(1 << 20);
        check_rfc3339(epoch);
    }
}

static void test_strbuf_ints_and_json(void **state)
{
    (void)state;
    strbuf b;
    strbuf_init(&b);
    static const long long ints[] = {0, 1, -1, 9, 10, -10, 1234567890123LL, LLONG_MAX, LLONG_MIN};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "%lld", ints[i]);
        strbuf_reset(&b);
        strbuf_put_i64(&b, ints[i]);
        assert_string_equal(b.data, want);
    }
    /* every byte, alone and in runs: '"', '\\' and < 0x20 escaped as
     * json.dumps(ensure_ascii=False) does, everything else (UTF-8) as is */
    static const char *named[32] = {
        ['\b'] = "\\b", ['\t'] = "\\t", ['\n'] = "\\n", ['\f'] = "\\f", ['\r'] = "\\r"};
    strbuf want;
    strbuf_init(&want);
    char raw[256 * 3];
    size_t rn = 0;
    strbuf_putc(&want, '"');
    for (int c = 0; c < 256; c++) {
        for (int rep = 0; rep < 1 + c % 3; rep++) {
            raw[rn++] = (char)c;
            if (c == '"')
                strbuf_puts(&want, "\\\"");
            else if (c == '\\')
                strbuf_puts(&want, "\\\\");
            else if (c < 0x20 && named[c])
                strbuf_puts(&want, named[c]);
            else if (c < 0x20)
                strbuf_printf(&want, "\\u%04x", c);
            else
                strbuf_putc(&want, (char)c);
        }
    }
    strbuf_putc(&want, '"');
    strbuf_reset(&b);
    strbuf_json_strn(&b, raw, rn);
    assert_int_equal(b.len, want.len);
    assert_memory_equal(b.data, want.data, want.len);
    assert_int_equal(b.data[b.len], '\0');
    /* appended after existing text, across buffer growth */
    strbuf big;
    strbuf_init(&big);
    strbuf_puts(&big, "x");
    for (int i = 0; i < 50; i++)
        strbuf_json_strn(&big, raw, rn);
    assert_int_equal(big.len, 1 + 50 * want.len);
    assert_memory_equal(big.data + 1 + 49 * want.len, want.data, want.len);
    strbuf_reset(&b);
    strbuf_json_str(&b, "");
    assert_string_equal(b.data, "\"\"");
    strbuf_reset(&b);
    strbuf_json_str(&b, "caf\xc3\xa9 \xe2\x9c\x93 \"q\"");
    assert_string_equal(b.data, "\"caf\xc3\xa9 \xe2\x9c\x93 \\\"q\\\"\"");
    strbuf_free(&big);
    strbuf_free(&want);
    strbuf_free(&b);
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
        cmocka_unit_test(test_rfc3339_matches_gmtime),
        cmocka_unit_test(test_strbuf_ints_and_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
