/* Unit tests for the admin server (api/) in-process over real loopback
 * sockets with libcurl: hardening (Host, Origin, Content-Type, token, body
 * caps), JSON errors, security headers, and the local evaluator routes with
 * their validation; plus the EvalResult -> result items conversion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/api.h"
#include "common/loopback.h"
#include "api/internal.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "sandbox/jail/sbx.h"
#include "sandbox/lang/lang.h"
#include "sidecar/daemon.h"
#include "sidecar/local/local.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sbx_pool *pool; /* the registry compile-checks conditions in it */
static local_registry *reg;
static api_server *srv;
static int port;
static int changes;

static void on_change(void *ud)
{
    (void)ud;
    __atomic_add_fetch(&changes, 1, __ATOMIC_SEQ_CST);
}

typedef struct {
    long status;
    strbuf body;
    strbuf headers;
} reply;

static size_t wr(char *d, size_t s, size_t n, void *ud)
{
    strbuf_put(ud, d, s * n);
    return s * n;
}

/* Performs a request; extra headers NULL-terminated. */
static void req(reply *r, const char *method, const char *path, const char *body,
                const char *const *hdrs)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    strbuf_init(&r->body);
    strbuf_init(&r->headers);
    CURL *h = curl_easy_init();
    struct curl_slist *sl = NULL;
    for (size_t i = 0; hdrs && hdrs[i]; i++)
        sl = curl_slist_append(sl, hdrs[i]);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, sl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, wr);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, wr);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r->headers);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(sl);
    curl_easy_cleanup(h);
}

static void reply_free(reply *r)
{
    strbuf_free(&r->body);
    strbuf_free(&r->headers);
}

static const char *error_code(reply *r, char *buf, size_t cap)
{
    json_t *v = json_loads(r->body.data ? r->body.data : "", 0, NULL);
    const char *c = json_string_value(json_object_get(json_object_get(v, "error"), "code"));
    snprintf(buf, cap, "%s", c ? c : "(none)");
    json_decref(v);
    return buf;
}

#define JSON_HDR "Content-Type: application/json"

static int setup(void **state)
{
    (void)state;
    static FILE *devnull;
    devnull = fopen("/dev/null", "w");
    log_set_stream(devnull);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fps_err err;
    sbx_config sc = {.max_sandboxes = 2, .memory_mb = 512, .self_exe = getenv("FPS_BIN")};
    fps_err pe = {0};
    pool = sbx_pool_new(&sc, &pe);
    if (pool == NULL) fprintf(stderr, "sbx_pool_new: %s\n", pe.msg);
    assert_non_null(pool);
    local_config lc = {.pool = pool, .debounce_s = 0.05};
    reg = local_registry_new(&lc, &err);
    assert_non_null(reg);
    local_registry_set_change_callback(reg, on_change, NULL);
    api_deps d = {.cfg = {.listen = "127.0.0.1:0"}, .local = daemon_api_local_ops(reg)};
    srv = api_start(&d, &err);
    assert_non_null(srv);
    port = api_port(srv);
    assert_true(port > 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    api_stop(srv);
    local_registry_free(reg);
    sbx_pool_free(pool);
    return 0;
}

static void test_healthz_headers(void **state)
{
    (void)state;
    reply r;
    req(&r, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body.data, "{\"status\":\"ok\"}");
    assert_non_null(strcasestr(r.headers.data, "Content-Security-Policy: default-src 'self'"));
    assert_non_null(strcasestr(r.headers.data, "frame-ancestors 'none'"));
    assert_non_null(strcasestr(r.headers.data, "X-Content-Type-Options: nosniff"));
    assert_non_null(strcasestr(r.headers.data, "X-Frame-Options: DENY"));
    assert_non_null(strcasestr(r.headers.data, "Referrer-Policy: no-referrer"));
    assert_non_null(strcasestr(r.headers.data, "Cache-Control: no-store"));
    reply_free(&r);
    /* errors carry them too */
    req(&r, "GET", "/nope", NULL, NULL);
    assert_int_equal(r.status, 404);
    assert_non_null(strcasestr(r.headers.data, "X-Frame-Options: DENY"));
    char c[64];
    assert_string_equal(error_code(&r, c, sizeof c), "not_found");
    reply_free(&r);
}

static void test_host_rebinding(void **state)
{
    (void)state;
    reply r;
    char c[64];
    const char *evil[] = {"Host: evil.example.com", NULL};
    req(&r, "GET", "/healthz", NULL, evil);
    assert_int_equal(r.status, 421);
    assert_string_equal(error_code(&r, c, sizeof c), "host_not_allowed");
    reply_free(&r);
    const char *tricky[] = {"Host: 127.0.0.1.evil.com", NULL};
    req(&r, "GET", "/v1/evaluators", NULL, tricky);
    assert_int_equal(r.status, 421);
    reply_free(&r);
    const char *ok1[] = {"Host: localhost:8787", NULL};
    req(&r, "GET", "/healthz", NULL, ok1);
    assert_int_equal(r.status, 200);
    reply_free(&r);
    const char *ok2[] = {"Host: [::1]:8787", NULL};
    req(&r, "GET", "/healthz", NULL, ok2);
    assert_int_equal(r.status, 200);
    reply_free(&r);
}

static void test_method_not_allowed(void **state)
{
    (void)state;
    reply r;
    char c[64];
    req(&r, "POST", "/healthz", "{}", (const char *[]){JSON_HDR, NULL});
    assert_int_equal(r.status, 405);
    assert_string_equal(error_code(&r, c, sizeof c), "method_not_allowed");
    assert_non_null(strcasestr(r.headers.data, "Allow: GET, HEAD"));
    reply_free(&r);
}

static const char *REG = "{\"version\":\"1.0\",\"endpoint\":\"http://127.0.0.1:9/eval\","
                         "\"ttl_seconds\":30,\"definitions\":[{\"eval_key\":\"helpful\","
                         "\"eval_version\":\"1\",\"labels\":[\"b\",\"a\"]}]}";

static void test_csrf_and_content_type(void **state)
{
    (void)state;
    reply r;
    char c[64];
    req(&r, "PUT", "/v1/evaluators/e1", REG, (const char *[]){"Content-Type: text/plain", NULL});
    assert_int_equal(r.status, 415);
    assert_string_equal(error_code(&r, c, sizeof c), "unsupported_media_type");
    reply_free(&r);
    req(&r, "PUT", "/v1/evaluators/e1", REG,
        (const char *[]){JSON_HDR, "Origin: http://evil.example.com", NULL});
    assert_int_equal(r.status, 403);
    assert_string_equal(error_code(&r, c, sizeof c), "foreign_origin");
    reply_free(&r);
    req(&r, "PUT", "/v1/evaluators/e1", REG, (const char *[]){JSON_HDR, "Origin: null", NULL});
    assert_int_equal(r.status, 403);
    reply_free(&r);
    req(&r, "PUT", "/v1/evaluators/e1", REG,
        (const char *[]){JSON_HDR, "Sec-Fetch-Site: cross-site", NULL});
    assert_int_equal(r.status, 403);
    reply_free(&r);
    assert_null(local_registry_get(reg, "e1"));
    /* same origin is fine */
    char origin[64];
    snprintf(origin, sizeof origin, "Origin: http://127.0.0.1:%d", port);
    req(&r, "PUT", "/v1/evaluators/e1", REG, (const char *[]){JSON_HDR, origin, NULL});
    assert_int_equal(r.status, 201);
    reply_free(&r);
    req(&r, "DELETE", "/v1/evaluators/e1", NULL, (const char *[]){JSON_HDR, NULL});
    assert_int_equal(r.status, 200);
    reply_free(&r);
}

static void test_bodies(void **state)
{
    (void)state;
    reply r;
    char c[64];
    req(&r, "PUT", "/v1/evaluators/e1", "{not json", (const char *[]){JSON_HDR, NULL});
    assert_int_equal(r.status, 400);
    assert_string_equal(error_code(&r, c, sizeof c), "invalid_json");
    reply_free(&r);
    req(&r, "PUT", "/v1/evaluators/e1", "[1,2]", (const char *[]){JSON_HDR, NULL});
    assert_int_equal(r.status, 400);
    reply_free(&r);
    /* deep nesting */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    req(&r, "PUT", "/v1/evaluators/e1", deep, (const char *[]){JSON_HDR, NULL});
    assert_int_equal(r.status, 413); /* refused before any tree is built */
    assert_non_null(strstr(r.body.data, "body_too_complex"));
    reply_free(&r);
    free(deep);
    /* 2 MiB body on a 1 MiB route */
    size_t big = (size_t)2 * 1024 * 1024;
    char *b = malloc(big + 1);
    memset(b, ' ', big);
    b[big] = '\0';
    req(&r, "PUT", "/v1/evaluators/e1", b, (const char *[]){JSON_HDR, NULL});
    assert_int_equal(r.status, 413);
    assert_string_equal(error_code(&r, c, sizeof c), "body_too_large");
    reply_free(&r);
    /* same without Content-Length (chunked) */
    req(&r, "PUT", "/v1/evaluators/e1", b,
        (const char *[]){JSON_HDR, "Transfer-Encoding: chunked", NULL});
    assert_int_equal(r.status, 413);
    reply_free(&r);
    free(b);
    /* still serving */
    req(&r, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r.status, 200);
    reply_free(&r);
}

static int put_status(const char *name, const char *body, char *code, size_t cap, char *msg,
                      size_t mcap)
{
    reply r;
    char path[256];
    snprintf(path, sizeof path, "/v1/evaluators/%s", name);
    req(&r, "PUT", path, body, (const char *[]){JSON_HDR, NULL});
    int st = (int)r.status;
    error_code(&r, code, cap);
    json_t *v = json_loads(r.body.data ? r.body.data : "", 0, NULL);
    const char *m = json_string_value(json_object_get(json_object_get(v, "error"), "message"));
    snprintf(msg, mcap, "%s", m ? m : "");
    json_decref(v);
    reply_free(&r);
    return st;
}

/* A condition is compile-checked by a jailed child, never in the registry's
 * process: each check hands one evaluation to the pool, and a rejection
 * carries the compiler's own message (compared with lang_check's here). */
static void test_condition_checked_in_jail(void **state)
{
    (void)state;
    static const char fmt[] = "{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\","
                              "\"definitions\":[{\"eval_key\":\"jailed\",\"eval_version\":"
                              "\"1\",\"condition\":\"%s\"}]}";
    static const struct {
        const char *condition;
        int status;
        const char *needle;
    } cases[] = {
        {"(", 422, "definitions[0].condition is rejected: "},
        {"__import__('os')", 422, "definitions[0].condition is rejected: "},
        {"lambda: 1", 422, "definitions[0].condition is rejected: condition_source"},
        {"session.event_count > 0", 201, ""},
    };
    char body[512], c[64], m[600];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned long before = sbx_pool_stats(pool).started;
        snprintf(body, sizeof body, fmt, cases[i].condition);
        int st = put_status("jailed", body, c, sizeof c, m, sizeof m);
        if (st != cases[i].status || strstr(m, cases[i].needle) == NULL)
            fail_msg("case %zu: status %d message '%s'", i, st, m);
        if (st == 422) { /* word for word what the compiler says in-process */
            fps_err ce = {0};
            assert_int_not_equal(
                lang_check(LANG_CONDITION, cases[i].condition, strlen(cases[i].condition), &ce), 0);
            char want[600];
            snprintf(want, sizeof want, "definitions[0].condition is rejected: %s", ce.msg);
            assert_string_equal(m, want);
            assert_string_equal(c, "invalid_registration");
        }
        assert_int_equal(sbx_pool_stats(pool).started, before + 1);
    }
    local_caller admin = {.admin = 1};
    fps_err le;
    assert_int_equal(local_registry_delete(reg, "jailed", &admin, &le), 200);
}

static void test_registration_validation(void **state)
{
    (void)state;
    char c[64], m[600];
    struct {
        const char *body;
        int status;
        const char *needle;
    } cases[] = {
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"Bad\",\"eval_version\":\"1\"}]}",
         422, "definitions[0].eval_key must match ^[a-z][a-z0-9_]*$"},
        {"{\"version\":\"1\",\"endpoint\":\"http://10.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"a\",\"eval_version\":\"1\"}]}",
         422, "endpoint must be a loopback address"},
        {"{\"version\":\"1\",\"endpoint\":\"https://127.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"a\",\"eval_version\":\"1\"}]}",
         422, "endpoint must be an http:// URL"},
        {"{\"version\":\"1\",\"endpoint\":\"http://user:pw@127.0.0.1:9/\",\"definitions\":[{"
         "\"eval_key\":\"a\",\"eval_version\":\"1\"}]}",
         422, "credentials"},
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"a\",\"eval_version\":\"1\",\"condition\":\"lambda: 1\"}]}",
         422, "definitions[0].condition is rejected: condition_source"},
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"a\",\"eval_version\":\"1\",\"labels\":[\"x\",\"x\"]}]}",
         422, "definitions[0].labels must be unique"},
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"a\",\"eval_version\":\"1\",\"display_name\":\"a\\u0001b\"}]}",
         422, "definitions[0].display_name must not contain control characters"},
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"a\",\"eval_version\":\"1\"},{\"eval_key\":\"a\",\"eval_version\":\"2\"}]}",
         422, "definitions[1].eval_key: duplicate eval key"},
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[{\"eval_key\":"
         "\"a\",\"eval_version\":\"1\",\"result_kind\":\"text\"}]}",
         422, "definitions[0].result_kind must be one of"},
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"ttl_seconds\":0,"
         "\"definitions\":[{\"eval_key\":\"a\",\"eval_version\":\"1\"}]}",
         422, "ttl_seconds must be a number from 1 to 86400"},
        {"{\"version\":1,\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[]}", 422,
         "version must be a string"},
        {"{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[],\"x\":1}", 422,
         "unknown field 'x'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = put_status("v1", cases[i].body, c, sizeof c, m, sizeof m);
        if (st != cases[i].status || strstr(m, cases[i].needle) == NULL)
            fail_msg("case %zu: status %d message '%s'", i, st, m);
    }
    /* 101 definitions */
    strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, "{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[");
    for (int i = 0; i < 101; i++)
        strbuf_printf(&b, "%s{\"eval_key\":\"k%d\",\"eval_version\":\"1\"}", i ? "," : "", i);
    strbuf_puts(&b, "]}");
    assert_int_equal(put_status("v1", b.data, c, sizeof c, m, sizeof m), 422);
    assert_non_null(strstr(m, "at most 100"));
    strbuf_free(&b);
    /* unique across evaluators; <= 100 in all */
    assert_int_equal(put_status("one", REG, c, sizeof c, m, sizeof m), 201);
    assert_int_equal(put_status("two", REG, c, sizeof c, m, sizeof m), 409);
    assert_string_equal(c, "duplicate_eval_key");
    assert_non_null(strstr(m, "evaluator 'one'"));
    strbuf_init(&b);
    strbuf_puts(&b, "{\"version\":\"1\",\"endpoint\":\"http://127.0.0.1:9/\",\"definitions\":[");
    for (int i = 0; i < 100; i++)
        strbuf_printf(&b, "%s{\"eval_key\":\"k%d\",\"eval_version\":\"1\"}", i ? "," : "", i);
    strbuf_puts(&b, "]}");
    assert_int_equal(put_status("two", b.data, c, sizeof c, m, sizeof m), 422);
    assert_string_equal(c, "too_many_definitions");
    strbuf_free(&b);
    /* replace keeps 200 */
    assert_int_equal(put_status("one", REG, c, sizeof c, m, sizeof m), 200);
    fps_err le;
    local_caller admin = {1, NULL};
    assert_int_equal(local_registry_delete(reg, "one", &admin, &le), 200);
    assert_int_equal(put_status("-bad", REG, c, sizeof c, m, sizeof m), 422);
}

static void test_registry_lifecycle(void **state)
{
    (void)state;
    char c[64], m[600];
    int before = __atomic_load_n(&changes, __ATOMIC_SEQ_CST);
    const char *body = "{\"version\":\"1\",\"endpoint\":\"http://localhost:9/\",\"ttl_seconds\":1,"
                       "\"definitions\":[{\"eval_key\":\"short_lived\",\"eval_version\":\"2\","
                       "\"condition\":\"session.event_count > 0\"}]}";
    assert_int_equal(put_status("ttl", body, c, sizeof c, m, sizeof m), 201);
    uint64_t gen1, gen2;
    json_t *cat = local_registry_catalog(reg, &gen1);
    assert_int_equal(json_array_size(cat), 1);
    char *t = json_dumps(cat, JSON_COMPACT);
    assert_string_equal(t, "[{\"eval_key\":\"short_lived\",\"display_name\":\"Short lived\","
                           "\"eval_version\":\"2\",\"result_kind\":\"score\",\"labels\":[]}]");
    free(t);
    json_decref(cat);
    local_definition d;
    assert_int_equal(local_registry_definition(reg, "short_lived", "2", &d), 0);
    assert_string_equal(d.condition, "session.event_count > 0");
    local_definition_free(&d);
    assert_int_equal(local_registry_definition(reg, "short_lived", "3", &d), -1);
    /* heartbeat keeps it alive past its TTL */
    for (int i = 0; i < 3; i++) {
        usleep(500 * 1000);
        reply r;
        req(&r, "POST", "/v1/evaluators/ttl/heartbeat", NULL, (const char *[]){JSON_HDR, NULL});
        assert_int_equal(r.status, 200);
        reply_free(&r);
    }
    /* then it expires and leaves the catalog; the change callback fires */
    usleep(1600 * 1000);
    cat = local_registry_catalog(reg, &gen2);
    assert_int_equal(json_array_size(cat), 0);
    json_decref(cat);
    assert_true(gen2 > gen1);
    assert_true(__atomic_load_n(&changes, __ATOMIC_SEQ_CST) >= before + 2);
    reply r;
    req(&r, "POST", "/v1/evaluators/ttl/heartbeat", NULL, (const char *[]){JSON_HDR, NULL});
    assert_int_equal(r.status, 404);
    reply_free(&r);
}

static void check_items(const char *answer, const char *want_items, const char *want_err)
{
    json_t *a = json_loads(answer, 0, NULL);
    assert_non_null(a);
    json_t *items = NULL;
    char *summary = NULL;
    fps_err err = {0};
    int rc = local_result_items(a, "q", &items, &summary, &err);
    json_decref(a);
    if (want_err) {
        if (rc == 0 || strstr(err.msg, want_err) == NULL)
            fail_msg("answer %s: rc %d msg '%s' (want '%s')", answer, rc, err.msg, want_err);
        return;
    }
    if (rc != 0) fail_msg("answer %s: %s", answer, err.msg);
    char *t = json_dumps(items, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (strcmp(t, want_items) != 0) fail_msg("answer %s:\n got %s\nwant %s", answer, t, want_items);
    free(t);
    json_decref(items);
    free(summary);
}

static void test_result_items(void **state)
{
    (void)state;
    check_items("{\"score\":0.5,\"reasoning\":\"why\",\"labels\":[\"z\",\"a\"]}",
                "[{\"result_key\":\"q\",\"result_kind\":\"score\",\"numeric_value\":0.5,"
                "\"bool_value\":null,\"text_value\":null,\"unit\":\"ratio\",\"display_value\":null,"
                "\"description\":null,\"reasoning\":\"why\",\"labels\":[\"a\",\"z\"]}]",
                NULL);
    check_items(
        "{\"metrics\":{\"zz\":2,\"q\":{\"value\":1,\"unit\":\"ms\"}},\"assertions\":{\"ok\":"
        "true},\"reasoning\":\"r\"}",
        "[{\"result_key\":\"q\",\"result_kind\":\"metric\",\"numeric_value\":1.0,"
        "\"bool_value\":null,\"text_value\":null,\"unit\":\"ms\",\"display_value\":null,"
        "\"description\":null,\"reasoning\":\"r\",\"labels\":[]},{\"result_key\":\"zz\","
        "\"result_kind\":\"metric\",\"numeric_value\":2.0,\"bool_value\":null,"
        "\"text_value\":null,\"unit\":\"\",\"display_value\":null,\"description\":null,"
        "\"reasoning\":null,\"labels\":[]},{\"result_key\":\"ok\",\"result_kind\":"
        "\"assertion\",\"numeric_value\":null,\"bool_value\":true,\"text_value\":null,"
        "\"unit\":\"\",\"display_value\":null,\"description\":null,\"reasoning\":null,"
        "\"labels\":[]}]",
        NULL);
    check_items("{\"score\":{\"value\":1,\"passed\":true}}",
                "[{\"result_key\":\"q\",\"result_kind\":\"score\",\"numeric_value\":1.0,"
                "\"bool_value\":true,\"text_value\":null,\"unit\":\"ratio\",\"display_value\":null,"
                "\"description\":null,\"reasoning\":null,\"labels\":[]}]",
                NULL);
    check_items("{\"score\":1.5}", NULL, "score value must be between 0 and 1");
    check_items("{\"score\":true}", NULL, "score must be a number or an object");
    check_items("{\"score\":{\"value\":0.1,\"passed\":1}}", NULL, "score passed must be a boolean");
    check_items("{}", NULL, "must contain a score, metric, or assertion");
    check_items("{\"metrics\":{\"Bad\":1}}", NULL, "metric key must match");
    check_items("{\"assertions\":{\"a\":1}}", NULL, "assertion passed must be a boolean");
    check_items("{\"score\":0.1,\"metrics\":{\"q\":1}}", NULL, "result keys must be unique");
    check_items("{\"score\":0.1,\"summary\":\"\"}", NULL, "summary must not be empty");
    check_items("{\"score\":0.1,\"labels\":[\"a\",\"a\"]}", NULL, "labels must be unique");
    check_items("{\"score\":{\"value\":0.1,\"extra\":1}}", NULL, "unexpected field");
    check_items("[1]", NULL, "must be a JSON object");
    strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, "{\"metrics\":{");
    for (int i = 0; i < 26; i++)
        strbuf_printf(&b, "%s\"m%d\":1", i ? "," : "", i);
    strbuf_puts(&b, "}}");
    check_items(b.data, NULL, "at most 25 results");
    strbuf_free(&b);
}

/* The one-pass scan run before any JSON tree: depth and value budgets, and
 * the carved transcript's exact byte span. */
static void test_json_scan(void **state)
{
    (void)state;
    fps_err err;
    const char *at = NULL;
    size_t len = 0;
    const char *b = "{\"source\": \"1\", \"transcript\" : {\"events\": [{}, \"x}\"]} , \"k\": 2}";
    assert_int_equal(api_json_scan(b, strlen(b), "transcript", &at, &len, &err), 0);
    assert_non_null(at);
    assert_int_equal(len, strlen("{\"events\": [{}, \"x}\"]}"));
    assert_memory_equal(at, "{\"events\": [{}, \"x}\"]}", len);
    /* only a top-level member is carved; an escaped name is not the name */
    b = "{\"a\": {\"transcript\": 1}, \"transcr\\u0069pt\": 2}";
    assert_int_equal(api_json_scan(b, strlen(b), "transcript", &at, &len, &err), 0);
    assert_null(at);
    b = "{\"transcript\": {}, \"transcript\": {}}";
    assert_int_equal(api_json_scan(b, strlen(b), "transcript", &at, &len, &err), -1);
    /* budgets: 64 levels, 20,000 values outside the carved member */
    strbuf d;
    strbuf_init(&d);
    for (int i = 0; i < 64; i++)
        strbuf_putc(&d, '[');
    for (int i = 0; i < 64; i++)
        strbuf_putc(&d, ']');
    assert_int_equal(api_json_scan(d.data, d.len, NULL, NULL, NULL, &err), 0);
    strbuf_reset(&d);
    for (int i = 0; i < 65; i++)
        strbuf_putc(&d, '[');
    assert_int_equal(api_json_scan(d.data, d.len, NULL, NULL, NULL, &err), -2);
    assert_non_null(strstr(err.msg, "too deeply"));
    strbuf_reset(&d);
    strbuf_puts(&d, "{\"transcript\": [");
    for (int i = 0; i < 30000; i++)
        strbuf_puts(&d, i ? ",{}" : "{}");
    strbuf_puts(&d, "], \"x\": [");
    for (int i = 0; i < 19990; i++)
        strbuf_puts(&d, i ? ",1" : "1");
    strbuf_puts(&d, "]}");
    assert_int_equal(api_json_scan(d.data, d.len, "transcript", &at, &len, &err), 0);
    assert_int_equal(api_json_scan(d.data, d.len, NULL, NULL, NULL, &err), -2);
    assert_non_null(strstr(err.msg, "too many"));
    strbuf_free(&d);
    /* not JSON: -1 */
    static const char *const bad[] = {"",    "{",          "{\"a\" 1}",    "[1 2]",
                                      "\"x", "{\"a\":1}x", "{\"a\x01\":1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (api_json_scan(bad[i], strlen(bad[i]), NULL, NULL, NULL, &err) != -1)
            fail_msg("'%s' passed the scan", bad[i]);
}

/* --listen's one parse: host (brackets off) and port, or a precise error. */
static void test_listen_split(void **state)
{
    (void)state;
    fps_err err;
    char host[64];
    int port = -1;
    assert_int_equal(api_listen_split("127.0.0.1:8787", host, sizeof host, &port, &err), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 8787);
    assert_int_equal(api_listen_split("[::1]:0", host, sizeof host, &port, &err), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 0);
    assert_int_equal(api_listen_split("[::]:9", host, sizeof host, NULL, &err), 0);
    assert_string_equal(host, "::");
    assert_int_equal(api_listen_split("localhost:65535", host, 4, &port, &err), 0);
    assert_string_equal(host, "loc"); /* truncated to the buffer */
    static const char *const bad[] = {"",
                                      "8787",
                                      ":8787",
                                      "127.0.0.1:",
                                      "127.0.0.1:http",
                                      "127.0.0.1:65536",
                                      "127.0.0.1:-1",
                                      "127.0.0.1:80x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (api_listen_split(bad[i], host, sizeof host, &port, &err) != -1)
            fail_msg("--listen '%s' was accepted", bad[i]);
        assert_non_null(strstr(err.msg, "is not HOST:PORT"));
    }
    assert_int_equal(api_listen_split(NULL, host, sizeof host, &port, &err), -1);
    /* the bracket rule it shares with the loopback check and the registry */
    static const char v6[] = "[::1]", half[] = "[::1";
    size_t n = strlen(v6);
    assert_ptr_equal(loopback_unbracket(v6, &n), v6 + 1);
    assert_int_equal(n, 3);
    n = strlen(half);
    assert_ptr_equal(loopback_unbracket(half, &n), half);
    assert_int_equal(n, 4);
    assert_true(loopback_host(v6));
    assert_false(loopback_host(half));
}

/* An allowed non-loopback host that is the admin API's own (an IPv6 literal,
 * which --listen and an endpoint URL both write in brackets) on its port is
 * refused; another port on that host is not. */
static void test_own_admin_address_v6(void **state)
{
    (void)state;
    fps_err err;
    const char *hosts[] = {"[2001:db8::1]"};
    cli_list allowed = {hosts, 1};
    local_config lc = {.pool = pool, .allowed_hosts = &allowed, .debounce_s = 0.05};
    local_registry *r = local_registry_new(&lc, &err);
    assert_non_null(r);
    char host[64];
    int p = 0;
    assert_int_equal(api_listen_split("[2001:db8::1]:8787", host, sizeof host, &p, &err), 0);
    local_registry_set_admin_address(r, host, p);
    local_caller admin = {1, NULL};
    static const char *const ends[] = {"http://[2001:db8::1]:8787/", "http://[2001:DB8::1]:8787/",
                                       "http://[2001:db8::1]:8788/"};
    for (size_t i = 0; i < 3; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"version\":\"1\",\"endpoint\":\"%s\",\"definitions\":[{\"eval_key\":"
                 "\"v6_%zu\",\"eval_version\":\"1\"}]}",
                 ends[i], i);
        json_t *b = json_loads(body, 0, NULL), *out = NULL;
        assert_non_null(b);
        int st = local_registry_put(r, "v6", b, &admin, &out, &err);
        if (i < 2) {
            if (st != 422 || strstr(err.msg, "own admin API") == NULL)
                fail_msg("%s: status %d '%s'", ends[i], st, err.msg);
        } else if (st != 201) {
            fail_msg("%s: status %d '%s'", ends[i], st, err.msg);
        }
        json_decref(out);
        json_decref(b);
    }
    local_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthz_headers),
        cmocka_unit_test(test_host_rebinding),
        cmocka_unit_test(test_method_not_allowed),
        cmocka_unit_test(test_csrf_and_content_type),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_condition_checked_in_jail),
        cmocka_unit_test(test_registration_validation),
        cmocka_unit_test(test_registry_lifecycle),
        cmocka_unit_test(test_result_items),
        cmocka_unit_test(test_json_scan),
        cmocka_unit_test(test_listen_split),
        cmocka_unit_test(test_own_admin_address_v6),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
