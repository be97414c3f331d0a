/* Unit tests of the jail's gate (sbx_pool_set_gate, sandbox/jail/sbx.h): the
 * hook the memory budget admits every sandbox through, with real children
 * of the sidecar binary ($FPS_BIN) and a recording gate in place of the
 * budget. Each evaluation is admitted once and let go once, with its class;
 * a refusal ends it as SBX_TIMEOUT "memory_budget" without a child; a child
 * the gate stops (by its sample, or by the ticket's stop flag) is run again
 * and the caller sees the outcome of the run that completed, for single
 * evaluations and for a session's; children are sampled only while the
 * gate says the tree is near its budget; and the gate's child cap bounds
 * the interpreter as a lower memory limit would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox/jail/sbx.h"
#include "sandbox/lang/lang.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((uint64_t)1 << 20)

/* A gate that records what the pool asks of it. */
typedef struct {
    atomic_int enters, leaves, nears, samples;
    int refuse;          /* enter answers 1                          */
    int near;            /* near answers this                        */
    int stop_samples;    /* sample answers 1 this many times         */
    int stop_flag_times; /* enter sets ticket->stop this many times  */
    uint64_t stop_above; /* sample stops only above this many bytes  */
    sbx_gate_class last_class;
    int max_reruns;      /* the highest ticket->reruns seen at enter */
    uint64_t last_need;  /* ticket->need at the last enter           */
    uint64_t max_sample; /* the largest sample seen                  */
    pthread_mutex_t mu;
} rec;

static int rec_enter(void *ud, sbx_ticket *t, atomic_int *cancel)
{
    (void)cancel;
    rec *r = ud;
    pthread_mutex_lock(&r->mu);
    atomic_fetch_add(&r->enters, 1);
    r->last_class = t->cls;
    r->last_need = t->need;
    if (t->reruns > r->max_reruns) r->max_reruns = t->reruns;
    int rc = r->refuse ? 1 : 0;
    if (rc == 0 && r->stop_flag_times > 0) {
        r->stop_flag_times--;
        atomic_store(&t->stop, 1);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void rec_leave(void *ud, sbx_ticket *t)
{
    (void)t;
    atomic_fetch_add(&((rec *)ud)->leaves, 1);
}

static int rec_near(void *ud)
{
    rec *r = ud;
    atomic_fetch_add(&r->nears, 1);
    return r->near;
}

static int rec_sample(void *ud, sbx_ticket *t, uint64_t bytes)
{
    (void)t;
    rec *r = ud;
    pthread_mutex_lock(&r->mu);
    atomic_fetch_add(&r->samples, 1);
    if (bytes > r->max_sample) r->max_sample = bytes;
    int stop = 0;
    if (r->stop_samples > 0 && bytes > r->stop_above) {
        r->stop_samples--;
        stop = 1;
    }
    pthread_mutex_unlock(&r->mu);
    return stop;
}

static sbx_pool *make_pool(rec *r, uint64_t child_cap)
{
    sbx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_sandboxes = 2;
    cfg.memory_mb = 512;
    cfg.self_exe = getenv("FPS_BIN");
    fps_err err = {0};
    sbx_pool *p = sbx_pool_new(&cfg, &err);
    if (p == NULL) fprintf(stderr, "sbx_pool_new: %s\n", err.msg);
    assert_non_null(p);
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    sbx_gate g = {.ud = r,
                  .enter = rec_enter,
                  .leave = rec_leave,
                  .near = rec_near,
                  .sample = rec_sample,
                  .child_cap = child_cap};
    sbx_pool_set_gate(p, &g);
    return p;
}

static void done(sbx_pool *p, rec *r)
{
    sbx_pool_set_gate(p, NULL);
    sbx_pool_free(p);
    pthread_mutex_destroy(&r->mu);
}

static sbx_request request(const char *src)
{
    sbx_request q;
    memset(&q, 0, sizeof q);
    q.kind = LANG_EVALUATOR;
    q.source = src;
    q.source_len = strlen(src);
    q.eval_key = "q";
    q.timeout_s = 30;
    return q;
}

/* holds 100 MB for a moment, then answers 0.5 */
static const char *GROW = "EvalResult(score=Score(len(['x' * 100000000] + [i for i in "
                          "range(20000000) if i < 0]) / 2))";

static double score(const sbx_outcome *o)
{
    assert_int_equal(o->status, SBX_OK);
    const json_t *res = json_array_get(json_object_get(o->json, "results"), 0);
    assert_non_null(res);
    return json_number_value(json_object_get(res, "numeric_value"));
}

static void admitted_once_with_its_class(void **state)
{
    (void)state;
    rec r;
    sbx_pool *p = make_pool(&r, 0);
    sbx_request q = request("EvalResult(score=Score(1.0))");
    sbx_outcome o;
    sbx_eval(p, &q, &o);
    assert_true(score(&o) == 1.0);
    assert_int_equal(o.reruns, 0);
    sbx_outcome_free(&o);
    assert_int_equal(atomic_load(&r.enters), 1);
    assert_int_equal(atomic_load(&r.leaves), 1);
    assert_int_equal(r.last_class, SBX_GATE_WAIT);
    struct {
        int playground, background;
        double budget_s;
        sbx_gate_class want;
    } cases[] = {{1, 0, 0, SBX_GATE_PLAYGROUND},
                 {0, 1, 0, SBX_GATE_BACKGROUND},
                 {1, 1, 0, SBX_GATE_BACKGROUND}, /* a backtest with playground slot priority */
                 {0, 0, 10, SBX_GATE_NOWAIT}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        q.playground = cases[i].playground;
        q.background = cases[i].background;
        q.budget_s = cases[i].budget_s;
        sbx_check(p, &q, &o); /* compile checks are admitted too */
        assert_int_equal(o.status, SBX_OK);
        sbx_outcome_free(&o);
        assert_int_equal(r.last_class, cases[i].want);
    }
    assert_int_equal(atomic_load(&r.enters), 5);
    assert_int_equal(atomic_load(&r.leaves), 5);
    /* never near: nothing sampled */
    assert_int_equal(atomic_load(&r.samples), 0);
    done(p, &r);
}

static void refused_without_a_child(void **state)
{
    (void)state;
    rec r;
    sbx_pool *p = make_pool(&r, 0);
    r.refuse = 1;
    unsigned long started = sbx_pool_stats(p).started;
    sbx_request q = request("EvalResult(score=Score(1.0))");
    q.playground = 1;
    sbx_outcome o;
    sbx_eval(p, &q, &o);
    assert_int_equal(o.status, SBX_TIMEOUT);
    assert_string_equal(o.limit, "memory_budget");
    sbx_outcome_free(&o);
    assert_int_equal(atomic_load(&r.enters), 1);
    assert_int_equal(atomic_load(&r.leaves), 0); /* nothing was admitted */
    assert_int_equal(sbx_pool_stats(p).started, started);
    done(p, &r);
}

static void stopped_by_its_sample_and_run_again(void **state)
{
    (void)state;
    rec r;
    sbx_pool *p = make_pool(&r, 0);
    r.near = 1;
    r.stop_samples = 1;
    r.stop_above = 50 * MIB; /* once it holds its 100 MB */
    sbx_request q = request(GROW);
    sbx_outcome o;
    sbx_eval(p, &q, &o);
    assert_true(score(&o) == 0.5); /* the outcome it has alone */
    assert_int_equal(o.reruns, 1);
    sbx_outcome_free(&o);
    assert_int_equal(atomic_load(&r.enters), 2);
    assert_int_equal(atomic_load(&r.leaves), 2);
    assert_int_equal(r.max_reruns, 1);
    /* the re-run is admitted against what the first was seen to use */
    assert_true(r.last_need > 50 * MIB);
    assert_true(r.max_sample > 50 * MIB);
    assert_int_equal(sbx_pool_stats(p).reruns, 1);
    done(p, &r);
}

static void stopped_by_its_flag_in_a_session(void **state)
{
    (void)state;
    rec r;
    sbx_pool *p = make_pool(&r, 0);
    r.stop_flag_times = 2; /* the first two runs are stopped as they start */
    static const char T[] =
        "{\"schema_version\": \"2\", \"assignment_id\": \"a-1\", \"session_id\": \"s-1\", "
        "\"session_revision_id\": \"r-1\", \"agent_id\": \"agent\", \"environment\": \"test\", "
        "\"started_at\": \"2026-08-28T12:00:00.000000Z\", "
        "\"ended_at\": \"2026-08-28T12:00:01.000000Z\", \"event_count\": 0, \"events\": []}";
    fps_err err;
    sbx_image *img = sbx_image_new(T, strlen(T), "a-1", 0, &err);
    if (img == NULL) fprintf(stderr, "sbx_image_new: %s\n", err.msg);
    assert_non_null(img);
    sbx_session *s = sbx_session_open(p, img);
    assert_non_null(s);
    sbx_request q = request("EvalResult(score=Score(0.25))");
    sbx_outcome o;
    sbx_session_eval(s, &q, &o);
    assert_true(score(&o) == 0.25);
    assert_int_equal(o.reruns, 2);
    sbx_outcome_free(&o);
    /* the session goes on with a fresh evaluator */
    sbx_session_eval(s, &q, &o);
    assert_true(score(&o) == 0.25);
    assert_int_equal(o.reruns, 0);
    sbx_outcome_free(&o);
    sbx_session_close(s);
    sbx_image_release(img);
    assert_int_equal(atomic_load(&r.enters), 4);
    assert_int_equal(atomic_load(&r.leaves), 4);
    /* never near: the stop flag needs no sample */
    assert_int_equal(atomic_load(&r.samples), 0);
    done(p, &r);
}

static void child_cap_is_a_memory_limit(void **state)
{
    (void)state;
    rec r;
    /* 64 MiB for the whole sandbox: 100 MB cannot fit */
    sbx_pool *p = make_pool(&r, 64 * MIB);
    sbx_request q = request(GROW);
    sbx_outcome o;
    sbx_eval(p, &q, &o);
    const char *detail = NULL;
    assert_int_equal(sbx_outcome_end(&o, &detail), SBX_END_LIMIT);
    assert_string_equal(detail, "memory");
    sbx_outcome_free(&o);
    done(p, &r);
    /* without the cap it fits */
    p = make_pool(&r, 0);
    sbx_eval(p, &q, &o);
    assert_true(score(&o) == 0.5);
    sbx_outcome_free(&o);
    done(p, &r);
}

int main(void)
{
    if (getenv("FPS_BIN") == NULL) {
        fprintf(stderr, "FPS_BIN must name the failproofai-sidecar binary\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(admitted_once_with_its_class),
        cmocka_unit_test(refused_without_a_child),
        cmocka_unit_test(stopped_by_its_sample_and_run_again),
        cmocka_unit_test(stopped_by_its_flag_in_a_session),
        cmocka_unit_test(child_cap_is_a_memory_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
