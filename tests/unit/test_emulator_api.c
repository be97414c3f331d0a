/* tests/unit/test_emulator_api: the in-process emulator API (emulator.h):
 * start on an ephemeral port, add sessions, observe them over a real socket,
 * stop; and the digests against the contract's sample values. */
#include "emulator/emulator.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
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

/* GET path on 127.0.0.1:port; returns the body (malloc'd) or NULL. */
static char *http_get(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + len, cap - len - 1)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    char *out = body ? strdup(body + 4) : NULL;
    free(buf);
    return out;
}

static void test_start_add_observe_stop(void **state)
{
    (void)state;
    emulator_config cfg;
    emulator_config_defaults(&cfg);
    cfg.listen = "127.0.0.1:0";
    cfg.sessions = 3;
    cfg.definitions_json = emulator_sample_definitions();
    emulator *e = NULL;
    fps_err err;
    assert_int_equal(emulator_start(&cfg, &e, &err), 0);
    assert_true(emulator_port(e) > 0);
    char id[37] = {0};
    assert_int_equal(emulator_add_session(e, "{\"session_id\":\"s\",\"events\":[]}", id, &err), 0);
    assert_int_equal(strlen(id), 36);
    assert_int_equal(emulator_add_session(e, "{\"events\":7}", NULL, &err), -1);
    assert_string_equal(err.msg, "events must be an array");
    assert_int_equal(emulator_add_session(e, "not json", NULL, &err), -1);
    assert_int_equal(emulator_generate_sessions(e, 2), 0);

    char *body = http_get(emulator_port(e), "/emulator/v1/state");
    assert_non_null(body);
    json_t *st = json_loads(body, 0, NULL);
    assert_non_null(st);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(st, "assignments"), "available")), 6);
    json_decref(st);
    free(body);

    char *text = emulator_state_json(e);
    assert_non_null(strstr(text, "\"sessions\":6"));
    free(text);
    char path[80];
    snprintf(path, sizeof path, "/emulator/v1/assignments/%s", id);
    body = http_get(emulator_port(e), path);
    assert_non_null(body);
    assert_non_null(strstr(body, "\"status\":\"available\""));
    free(body);
    emulator_stop(e);
}

static void test_bad_config_is_an_error(void **state)
{
    (void)state;
    emulator_config cfg;
    emulator_config_defaults(&cfg);
    cfg.listen = "nowhere";
    emulator *e = NULL;
    fps_err err;
    assert_int_equal(emulator_start(&cfg, &e, &err), -1);
    assert_null(e);
    assert_non_null(strstr(err.msg, "--listen"));
    cfg.listen = "127.0.0.1:0";
    cfg.definitions_json = "[{\"eval_key\":\"Bad\"}]";
    assert_int_equal(emulator_start(&cfg, &e, &err), -1);
    assert_non_null(strstr(err.msg, "eval_key"));
}

static void test_digests_match_the_contract_samples(void **state)
{
    (void)state;
    char out[72];
    /* contract: definitions_response.definitions[0].source_checksum */
    emulator_source_checksum(NULL, "EvalResult(score=Score(1.0))", out);
    assert_string_equal(out,
                        "sha256:da6cf174ea9199dd8412af4abebd40bd27dea482f738cb8c28523076472501ea");
    json_t *cat =
        json_loads("[{\"eval_key\":\"tool_efficiency\",\"display_name\":\"Tool efficiency\","
                   "\"eval_version\":\"1.2.0\",\"result_kind\":\"score\","
                   "\"labels\":[\"tools\",\"deterministic\"]}]",
                   0, NULL);
    /* contract: register_request.catalog_revision (labels as sent) */
    assert_int_equal(emulator_catalog_revision(cat, 0, out), 0);
    assert_string_equal(out,
                        "sha256:b4e2c077aa9f91b5de1f3184ebf96811bce07eec00c7f417896ab269c67c88fb");
    /* SPEC §2 step 1 (labels sorted), as Python computes it */
    assert_int_equal(emulator_catalog_revision(cat, 1, out), 0);
    assert_string_equal(out,
                        "sha256:fd9748661fea850231fce61a9066ea9b26e9c5ac715697d81a26b23fbdb3422b");
    json_decref(cat);
    json_t *v = json_loads("{\"b\":[1.0,1e16,1e-05,0.1,-0.0,\"\\u00e9\\n\"],\"a\":null}", 0, NULL);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(emulator_canonical_json(v, &text, &len), 0);
    assert_string_equal(text, "{\"a\":null,\"b\":[1.0,1e+16,1e-05,0.1,-0.0,\"\xc3\xa9\\n\"]}");
    free(text);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_add_observe_stop),
        cmocka_unit_test(test_bad_config_is_an_error),
        cmocka_unit_test(test_digests_match_the_contract_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
