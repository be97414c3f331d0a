/* Unit tests for common/metrics: counters with labels, gauges, histograms,
 * the text exposition, seeding/flushing of counters and their keys' split
 * into the store's (name, labels) pair, bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/log.h"
#include "common/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render(void)
{
    strbuf b;
    strbuf_init(&b);
    metrics_render(&b);
    return strbuf_detach(&b, NULL);
}

static int setup(void **state)
{
    (void)state;
    metrics_reset();
    return 0;
}

static void test_counter_labels_order_independent(void **state)
{
    (void)state;
    metrics_inc(METRIC_RUNS, "status", "succeeded", "mode", "python");
    metrics_inc(METRIC_RUNS, "mode", "python", "status", "succeeded");
    metrics_add(METRIC_RUNS, 3, "mode", "local", "status", "failed");
    assert_true(metrics_value(METRIC_RUNS,
                              METRICS_LABELS_("mode", "python", "status", "succeeded")) == 2.0);
    char *t = render();
    assert_non_null(strstr(t, "# TYPE failproofai_sidecar_runs_total counter\n"));
    assert_non_null(
        strstr(t, "failproofai_sidecar_runs_total{mode=\"python\",status=\"succeeded\"} 2\n"));
    assert_non_null(
        strstr(t, "failproofai_sidecar_runs_total{mode=\"local\",status=\"failed\"} 3\n"));
    free(t);
}

static void test_counter_never_decreases(void **state)
{
    (void)state;
    metrics_inc(METRIC_LEASES_LOST);
    metrics_add(METRIC_LEASES_LOST, -5);
    metrics_add(METRIC_LEASES_LOST, 1.0 / 0.0);
    assert_true(metrics_value(METRIC_LEASES_LOST, METRICS_LABELS_()) == 1.0);
}

static void test_gauge(void **state)
{
    (void)state;
    metrics_gauge_set(METRIC_OUTBOX_DEPTH, 7);
    metrics_gauge_add(METRIC_OUTBOX_DEPTH, -2);
    assert_true(metrics_value(METRIC_OUTBOX_DEPTH, METRICS_LABELS_()) == 5.0);
    char *t = render();
    assert_non_null(strstr(t, "# TYPE failproofai_sidecar_outbox_depth gauge\n"
                              "failproofai_sidecar_outbox_depth 5\n"));
    free(t);
}

static void test_histogram_cumulative(void **state)
{
    (void)state;
    metrics_observe(METRIC_EVAL_SECONDS, 0.003, "mode", "python");
    metrics_observe(METRIC_EVAL_SECONDS, 0.2, "mode", "python");
    metrics_observe(METRIC_EVAL_SECONDS, 1000, "mode", "python");
    char *t = render();
    const char *h = "failproofai_sidecar_evaluation_duration_seconds";
    char want[256];
    snprintf(want, sizeof want, "%s_bucket{mode=\"python\",le=\"0.0025\"} 0\n", h);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "%s_bucket{mode=\"python\",le=\"0.005\"} 1\n", h);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "%s_bucket{mode=\"python\",le=\"0.25\"} 2\n", h);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "%s_bucket{mode=\"python\",le=\"300\"} 2\n", h);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "%s_bucket{mode=\"python\",le=\"+Inf\"} 3\n", h);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "%s_count{mode=\"python\"} 3\n", h);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "%s_sum{mode=\"python\"} 1000.203", h);
    assert_non_null(strstr(t, want));
    free(t);
}

struct collect_ctx {
    char (*keys)[256];
    double *vals;
    int *n;
};
static int collect(const char *k, double v, void *ud)
{
    struct collect_ctx *c = ud;
    snprintf(c->keys[*c->n], 256, "%s", k);
    c->vals[*c->n] = v;
    (*c->n)++;
    return 0;
}

static void test_label_escaping_and_seed_roundtrip(void **state)
{
    (void)state;
    metrics_inc(METRIC_PROTOCOL_ERRORS, "call", "claim", "code", "we\"ird\\va\nl");
    char *t = render();
    assert_non_null(strstr(t, "code=\"we\\\"ird\\\\va\\nl\""));
    free(t);
    /* flush: collect keys, reset, seed back, values equal */
    char keys[8][256];
    double vals[8];
    int n = 0;
    metrics_add(METRIC_SUBMISSIONS, 41, "outcome", "committed");
    struct collect_ctx c = {keys, vals, &n};
    assert_int_equal(metrics_counters_foreach(collect, &c), 0);
    assert_int_equal(n, 2);
    metrics_reset();
    assert_true(metrics_value(METRIC_SUBMISSIONS, METRICS_LABELS_("outcome", "committed")) == 0.0);
    for (int i = 0; i < n; i++)
        assert_int_equal(metrics_counter_seed(keys[i], vals[i]), 0);
    assert_true(metrics_value(METRIC_SUBMISSIONS, METRICS_LABELS_("outcome", "committed")) == 41.0);
    assert_true(metrics_value(METRIC_PROTOCOL_ERRORS,
                              METRICS_LABELS_("code", "we\"ird\\va\nl", "call", "claim")) == 1.0);
    /* seeding continues counting */
    metrics_inc(METRIC_SUBMISSIONS, "outcome", "committed");
    assert_true(metrics_value(METRIC_SUBMISSIONS, METRICS_LABELS_("outcome", "committed")) == 42.0);
}

/* The (name, label text) pair the store keeps, to and from the key. */
static void test_key_split_join(void **state)
{
    (void)state;
    size_t nl = 99, ll = 99;
    const char *labels = NULL;
    char out[64];
    assert_int_equal(
        metrics_key_split("runs_total{mode=\"python\",status=\"ok\"}", &nl, &labels, &ll), 0);
    assert_int_equal(nl, strlen("runs_total"));
    assert_int_equal(ll, strlen("mode=\"python\",status=\"ok\""));
    assert_memory_equal(labels, "mode=\"python\",status=\"ok\"", ll);
    assert_int_equal(metrics_key_split("claims_total", &nl, &labels, &ll), 0);
    assert_int_equal(nl, strlen("claims_total"));
    assert_int_equal(ll, 0);
    assert_string_equal(labels, "");
    /* not canonical */
    assert_int_equal(metrics_key_split("", &nl, &labels, &ll), -1);
    assert_int_equal(metrics_key_split("{a=\"b\"}", &nl, &labels, &ll), -1);
    assert_int_equal(metrics_key_split("x{a=\"b\"", &nl, &labels, &ll), -1);
    assert_int_equal(metrics_key_split("x{", &nl, &labels, &ll), -1);

    assert_int_equal(metrics_key_join(out, sizeof out, "runs_total", "status=\"ok\""), 0);
    assert_string_equal(out, "runs_total{status=\"ok\"}");
    assert_int_equal(metrics_key_join(out, sizeof out, "claims_total", ""), 0);
    assert_string_equal(out, "claims_total");
    assert_int_equal(metrics_key_join(out, sizeof out, "claims_total", NULL), 0);
    assert_string_equal(out, "claims_total");
    /* too long for out: nothing half-written */
    assert_int_equal(metrics_key_join(out, 12, "claims_total", NULL), -1);
    assert_string_equal(out, "");

    /* every key the registry reports splits and joins back to itself */
    metrics_inc(METRIC_PROTOCOL_ERRORS, "call", "claim", "code", "we{ir}d");
    metrics_inc(METRIC_LEASES_LOST);
    char keys[8][256];
    double vals[8];
    int n = 0;
    struct collect_ctx c = {keys, vals, &n};
    assert_int_equal(metrics_counters_foreach(collect, &c), 0);
    assert_int_equal(n, 2);
    for (int i = 0; i < n; i++) {
        char name[256], lab[256], back[256];
        assert_int_equal(metrics_key_split(keys[i], &nl, &labels, &ll), 0);
        snprintf(name, sizeof name, "%.*s", (int)nl, keys[i]);
        snprintf(lab, sizeof lab, "%.*s", (int)ll, labels);
        assert_int_equal(metrics_key_join(back, sizeof back, name, lab), 0);
        assert_string_equal(back, keys[i]);
    }
}

static void test_bad_input_ignored(void **state)
{
    (void)state;
    FILE *devnull = fopen("/dev/null", "w");
    log_set_stream(devnull);
    metrics_inc("bad name!");
    metrics_inc(METRIC_RUNS, "bad-label", "x");
    metrics_inc(METRIC_RUNS, "le", "x");
    metrics_inc(METRIC_RUNS, "a", "1", "a", "2");
    metrics_gauge_set(METRIC_RUNS, 3); /* wrong type */
    metrics_observe(METRIC_OUTBOX_DEPTH, 1.0);
    assert_int_equal(metrics_counter_seed("not a key{", 1), -1);
    assert_int_equal(metrics_counter_seed("x{a=\"1\"", 1), -1);
    assert_int_equal(metrics_counter_seed(METRIC_OUTBOX_DEPTH, 1), -1);
    assert_int_equal(metrics_counter_seed("x{a=\"1\"}", -1), -1);
    log_set_stream(NULL);
    fclose(devnull);
    char *t = render();
    assert_null(strstr(t, "bad"));
    /* no series was created: the declared families show their zero sample */
    assert_null(strstr(t, "failproofai_sidecar_runs_total{"));
    assert_non_null(strstr(t, "\nfailproofai_sidecar_runs_total 0\n"));
    assert_null(strstr(t, "outbox_depth_bucket"));
    free(t);
}

static void test_series_cap(void **state)
{
    (void)state;
    FILE *devnull = fopen("/dev/null", "w");
    log_set_stream(devnull);
    char v[32];
    for (int i = 0; i < METRICS_MAX_SERIES + 100; i++) {
        snprintf(v, sizeof v, "%d", i);
        metrics_inc(METRIC_CONDITIONS, "reason", v);
    }
    log_set_stream(NULL);
    fclose(devnull);
    assert_true(metrics_value(METRIC_CONDITIONS, METRICS_LABELS_("reason", "5")) == 1.0);
    assert_true(metrics_value(METRIC_CONDITIONS, METRICS_LABELS_("reason", "5000")) == 0.0);
}

static void test_eval_key_cap(void **state)
{
    (void)state;
    char k[16];
    assert_true(metrics_counter_seed(METRIC_RUNS "{eval_key=\"restored\",mode=\"python\"}", 3) ==
                0);
    for (int i = 0; i < METRICS_EVAL_KEY_CAP - 1; i++) {
        snprintf(k, sizeof k, "k%d", i);
        assert_string_equal(metrics_eval_key(k), k);
    }
    /* the restored key took the 100th place */
    assert_string_equal(metrics_eval_key("late"), "other");
    assert_string_equal(metrics_eval_key("restored"), "restored");
    assert_string_equal(metrics_eval_key("k0"), "k0");
    assert_string_equal(metrics_eval_key(NULL), "other");
}

static void test_present_from_start(void **state)
{
    (void)state;
    char *t = render();
    assert_non_null(strstr(t, "\nfailproofai_sidecar_leases_lost_total 0\n"));
    assert_non_null(strstr(t, "\nfailproofai_sidecar_evaluation_duration_seconds_count 0\n"));
    assert_non_null(strstr(t, "failproofai_sidecar_build_info{version=\"" FPS_VERSION "\"} 1\n"));
    assert_non_null(strstr(t, "\nprocess_open_fds "));
    assert_null(strstr(t, "failproofai-sidecar metric."));
    free(t);
    metrics_inc(METRIC_LEASES_LOST);
    t = render();
    assert_non_null(strstr(t, "\nfailproofai_sidecar_leases_lost_total 1\n"));
    free(t);
    /* process counters are sampled, never persisted */
    assert_int_equal(metrics_counter_seed("process_cpu_seconds_total", 5), -1);
}

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10000; i++) {
        metrics_inc(METRIC_ASSIGNMENTS_CLAIMED);
        metrics_observe(METRIC_SERVER_REQUEST_SECONDS, 0.01, "call", "claim");
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_true(metrics_value(METRIC_ASSIGNMENTS_CLAIMED, METRICS_LABELS_()) == 40000.0);
    char *txt = render();
    assert_non_null(strstr(
        txt, "failproofai_sidecar_server_request_duration_seconds_count{call=\"claim\"} 40000\n"));
    free(txt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_counter_labels_order_independent, setup),
        cmocka_unit_test_setup(test_counter_never_decreases, setup),
        cmocka_unit_test_setup(test_gauge, setup),
        cmocka_unit_test_setup(test_histogram_cumulative, setup),
        cmocka_unit_test_setup(test_label_escaping_and_seed_roundtrip, setup),
        cmocka_unit_test_setup(test_key_split_join, setup),
        cmocka_unit_test_setup(test_bad_input_ignored, setup),
        cmocka_unit_test_setup(test_series_cap, setup),
        cmocka_unit_test_setup(test_threads, setup),
        cmocka_unit_test_setup(test_eval_key_cap, setup),
        cmocka_unit_test_setup(test_present_from_start, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
