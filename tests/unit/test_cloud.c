/* tests/unit/test_cloud: the cloud client's pure parts: origin pinning of
 * server-supplied URLs, https-unless-loopback, strict definition
 * validation, and the retry classification of HTTP answers over a real
 * loopback socket (a one-shot server thread). */
#include "common/secret.h"
#include "sidecar/cloud/cloud.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

static cloud *mk(const char *url)
{
    fps_err err;
    cloud_config cfg = {.server_url = url,
                        .request_timeout_s = 5,
                        .worker_id = "w1",
                        .max_attempts = 3,
                        .backoff_base_s = 0.01,
                        .backoff_max_s = 0.02};
    return cloud_new(&cfg, &err);
}

static void test_https_required_off_loopback(void **state)
{
    (void)state;
    assert_null(mk("http://example.com"));
    assert_null(mk("http://user:pw@127.0.0.1:1"));
    assert_null(mk("ftp://127.0.0.1"));
    cloud *c = mk("https://example.com/api/");
    assert_non_null(c);
    char *u = cloud_url(c, "/v1/evaluator/runs/%s/result", "a/b");
    assert_string_equal(u, "https://example.com/api/v1/evaluator/runs/a%2Fb/result");
    free(u);
    cloud_free(c);
    c = mk("http://127.0.0.1:8080");
    assert_non_null(c);
    cloud_free(c);
}

static void test_pinning(void **state)
{
    (void)state;
    fps_err err;
    cloud *c = mk("http://127.0.0.1:8080");
    char *u = cloud_pin_url(c, "/v1/x/transcript", &err);
    assert_string_equal(u, "http://127.0.0.1:8080/v1/x/transcript");
    free(u);
    u = cloud_pin_url(c, "http://127.0.0.1:8080/v1/y", &err);
    assert_string_equal(u, "http://127.0.0.1:8080/v1/y");
    free(u);
    const char *bad[] = {"http://evil.example/v1/x",
                         "//evil.example/v1/x",
                         "http://127.0.0.1:8080@evil.example/x",
                         "http://127.0.0.1:80800/x",
                         "https://127.0.0.1:8080/x",
                         "/v1/x\r\nHost: evil",
                         "",
                         "v1/relative",
                         "http://127.0.0.1:8080\\@evil/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        u = cloud_pin_url(c, bad[i], &err);
        if (u != NULL) fail_msg("accepted %s", bad[i]);
    }
    cloud_free(c);
}

static void test_definition_validation(void **state)
{
    (void)state;
    fps_err err;
    const char *ok = "{\"eval_key\":\"k\",\"display_name\":\"K\",\"eval_version\":\"1\","
                     "\"result_kind\":\"score\",\"labels\":[],\"execution_mode\":\"python\","
                     "\"condition_source\":null,\"source_checksum\":\"sha256:x\","
                     "\"timeout_seconds\":30.0}";
    json_t *d = json_loads(ok, 0, NULL);
    assert_int_equal(cloud_validate_definition(d, &err), 0);
    json_object_del(d, "execution_mode");
    assert_int_equal(cloud_validate_definition(d, &err), -1);
    assert_non_null(strstr(err.msg, "execution_mode"));
    json_object_set_new(d, "execution_mode", json_string("remote"));
    assert_int_equal(cloud_validate_definition(d, &err), -1);
    json_object_set_new(d, "execution_mode", json_string("local"));
    json_object_set_new(d, "timeout_seconds", json_real(0));
    assert_int_equal(cloud_validate_definition(d, &err), -1);
    json_object_set_new(d, "timeout_seconds", json_true());
    assert_int_equal(cloud_validate_definition(d, &err), -1);
    json_object_set_new(d, "timeout_seconds", json_null());
    json_object_set_new(d, "labels", json_pack("[i]", 1));
    assert_int_equal(cloud_validate_definition(d, &err), -1);
    json_object_set_new(d, "labels", json_array());
    json_object_set_new(d, "result_kind", json_string("grade"));
    assert_int_equal(cloud_validate_definition(d, &err), -1);
    json_decref(d);
}

/* A server that answers `count` connections with canned responses. */
typedef struct {
    int fd;
    const char *const *answers;
    int count;
    _Atomic int served; /* counted before the answer is sent, so a client
                           holding answer n sees served >= n */
} srv;

static void *serve(void *arg)
{
    srv *s = arg;
    for (int i = 0; i < s->count; i++) {
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) break;
        char buf[8192];
        ssize_t n = recv(c, buf, sizeof buf, 0);
        (void)n;
        const char *a = s->answers[i];
        s->served++;
        ssize_t w = send(c, a, strlen(a), MSG_NOSIGNAL);
        (void)w;
        close(c);
    }
    return NULL;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 8), 0);
    socklen_t l = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_retry_policy(void **state)
{
    (void)state;
    static const char *const answers[] = {
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 500 Internal\r\nConnection: close\r\nContent-Length: 89\r\n\r\n"
        "{\"protocol_version\":\"2\",\"error\":{\"code\":\"internal_error\",\"message\":\"x\","
        "\"retryable\":true}}",
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 49\r\n\r\n"
        "{\"protocol_version\":\"2\",\"assignments\":[],\"x\":123}",
        /* then a non-retryable envelope: no further attempt */
        "HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 95\r\n\r\n"
        "{\"protocol_version\":\"2\",\"error\":{\"code\":\"invalid_credentials\",\"message\":\"x\","
        "\"retryable\":false}}",
    };
    int port;
    srv s = {.fd = listen_any(&port), .answers = answers, .count = 4};
    pthread_t t;
    pthread_create(&t, NULL, serve, &s);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    secret *tok = secret_from_str("tkn");
    fps_err err;
    cloud_config cfg = {.server_url = url,
                        .token = tok,
                        .request_timeout_s = 5,
                        .worker_id = "w",
                        .max_attempts = 5,
                        .backoff_base_s = 0.01,
                        .backoff_max_s = 0.02};
    cloud *c = cloud_new(&cfg, &err);
    assert_non_null(c);
    char *u = cloud_url(c, "/v1/x", NULL);
    cloud_req req = {.method = "POST",
                     .url = u,
                     .body = "{}",
                     .body_len = 2,
                     .cap = CLOUD_MAX_RESPONSE,
                     .retry = 1,
                     .ep = CLOUD_EP_PLAN};
    json_t *out = NULL;
    cloud_error e;
    assert_int_equal(cloud_call(c, &req, &out, &e), 0); /* 503, 500 retryable, then 200 */
    assert_int_equal(s.served, 3);
    assert_non_null(out);
    json_decref(out);
    assert_int_equal(cloud_call(c, &req, &out, &e), -1);
    assert_int_equal(e.err.code, CLOUD_REMOTE);
    assert_string_equal(e.err.name, "invalid_credentials");
    assert_int_equal(e.retryable, 0);
    assert_int_equal(strlen(e.request_id), 32);
    pthread_join(t, NULL);
    assert_int_equal(s.served, 4);
    close(s.fd);
    free(u);
    cloud_free(c);
    secret_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_https_required_off_loopback),
        cmocka_unit_test(test_pinning),
        cmocka_unit_test(test_definition_validation),
        cmocka_unit_test(test_retry_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
