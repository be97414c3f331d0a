/* tests/unit/test_catalog: catalog revision byte-compatibility with the
 * reference (Python json.dumps(ensure_ascii=False, sort_keys=True,
 * separators=(",", ":"))), checked against /usr/bin/python3 output. */
#include "sidecar/local/catalog.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

static const char *CATALOG =
    "[{\"eval_key\":\"zeta\",\"display_name\":\"Z \\u00e9t\\u00e0 \\u2603 \\\"q\\\" \\\\ \\t\","
    "\"eval_version\":\"1.0\",\"result_kind\":\"metric\",\"labels\":[\"b\",\"a\",\"\\u00fc\"]},"
    "{\"eval_key\":\"alpha\",\"display_name\":\"Tool efficiency\",\"eval_version\":\"1.2.0\","
    "\"result_kind\":\"score\",\"labels\":[\"tools\",\"deterministic\"],\"extra\":1},"
    "{\"eval_key\":\"mid\",\"display_name\":\"\\u65e5\\u672c\\u8a9e \\u007f \\u0001\","
    "\"eval_version\":\"2\",\"result_kind\":\"assertion\"}]";

/* The reference computation, run by /usr/bin/python3 on the same input. */
static void python_revision(const char *json_text, char *out, size_t cap)
{
    char path[] = "/tmp/fps-catalog-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(json_text, f);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json,hashlib,sys\n"
             "c=json.load(open(sys.argv[1],encoding=\"utf-8\"))\n"
             "c=[{\"display_name\":d[\"display_name\"],\"eval_key\":d[\"eval_key\"],"
             "\"eval_version\":d[\"eval_version\"],\"labels\":sorted(d.get(\"labels\",[])),"
             "\"result_kind\":d[\"result_kind\"]} for d in c]\n"
             "c.sort(key=lambda d:(d[\"eval_key\"],d[\"eval_version\"]))\n"
             "s=json.dumps(c,ensure_ascii=False,sort_keys=True,separators=(\",\",\":\"))\n"
             "print(\"sha256:\"+hashlib.sha256(s.encode(\"utf-8\")).hexdigest())' %s",
             path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, (int)cap, p));
    out[strcspn(out, "\n")] = '\0';
    pclose(p);
    unlink(path);
}

static void test_matches_python(void **state)
{
    (void)state;
    json_error_t je;
    json_t *defs = json_loads(CATALOG, 0, &je);
    assert_non_null(defs);
    char rev[CATALOG_REVISION_LEN + 1], py[128];
    fps_err err;
    assert_int_equal(catalog_revision(defs, rev, sizeof rev, &err), 0);
    python_revision(CATALOG, py, sizeof py);
    assert_string_equal(rev, py);
    json_decref(defs);
}

static void test_empty_and_sample(void **state)
{
    (void)state;
    char rev[CATALOG_REVISION_LEN + 1], py[128];
    fps_err err;
    assert_int_equal(catalog_revision(NULL, rev, sizeof rev, &err), 0);
    python_revision("[]", py, sizeof py);
    assert_string_equal(rev, py);
    const char *sample = "[{\"eval_key\":\"tool_efficiency\",\"display_name\":\"Tool efficiency\","
                         "\"eval_version\":\"1.2.0\",\"result_kind\":\"score\","
                         "\"labels\":[\"tools\",\"deterministic\"]}]";
    json_t *defs = json_loads(sample, 0, NULL);
    assert_int_equal(catalog_revision(defs, rev, sizeof rev, &err), 0);
    python_revision(sample, py, sizeof py);
    assert_string_equal(rev, py);
    json_decref(defs);
}

static void test_bad_entries(void **state)
{
    (void)state;
    char rev[CATALOG_REVISION_LEN + 1];
    fps_err err;
    json_t *defs = json_loads("[{\"eval_key\":1}]", 0, NULL);
    assert_int_equal(catalog_revision(defs, rev, sizeof rev, &err), -1);
    assert_non_null(strstr(err.msg, "eval_key"));
    json_decref(defs);
    defs = json_loads("{}", 0, NULL);
    assert_int_equal(catalog_revision(defs, rev, sizeof rev, &err), -1);
    json_decref(defs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_python),
        cmocka_unit_test(test_empty_and_sample),
        cmocka_unit_test(test_bad_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
