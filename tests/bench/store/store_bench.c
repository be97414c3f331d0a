/* tests/bench/store/store_bench: micro-benchmark of the store alone (built and
 * run by bench_store.py; not a test).
 *
 *   store_bench worker DB THREADS ASSIGNMENTS   the worker's per-assignment
 *       store traffic (claim, plan, start, 3 x durable result + commit record)
 *       from THREADS threads; prints runs/s as JSON.
 *   store_bench admin DB RUNS SECONDS           fills DB with RUNS finished
 *       runs, then lists GET /v1/runs?limit=100 pages (first page and deep
 *       cursors, with and without filters) from 2 threads while a writer
 *       thread keeps the worker's traffic going; prints p50/p99 latency and
 *       queries/s as JSON. */
#include "store/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char BODY[] =
    "{\"protocol_version\":\"2\",\"result_schema_version\":\"2\",\"submission_id\":\"%s\","
    "\"worker_id\":\"bench\",\"lease_generation\":1,\"status\":\"succeeded\",\"started_at\":"
    "\"2026-08-28T12:00:10.000000Z\",\"finished_at\":\"2026-08-28T12:00:10.812000Z\","
    "\"duration_ms\":812,\"summary\":null,\"results\":[{\"result_key\":\"tool_count\","
    "\"result_kind\":\"score\",\"numeric_value\":0.92,\"bool_value\":null,\"text_value\":null,"
    "\"unit\":\"ratio\",\"display_value\":\"92%%\",\"description\":null,\"reasoning\":null,"
    "\"labels\":[]}],\"error_code\":null,\"error_message\":null}";

typedef struct {
    store *st;
    int id;
    int n;
    volatile int *stop;
    long done;
    int failures;
} targ;

static char BIG_DEFS[6000], BIG_PLAN[3000], DESC[600];

static void init_docs(void)
{
    /* realistic sizes: definitions ~5 KiB, plan response ~2.5 KiB, descriptor ~0.5 KiB */
    memset(BIG_DEFS, 'd', sizeof BIG_DEFS - 1);
    BIG_DEFS[0] = '"';
    BIG_DEFS[sizeof BIG_DEFS - 2] = '"';
    memset(BIG_PLAN, 'p', sizeof BIG_PLAN - 1);
    BIG_PLAN[0] = '"';
    BIG_PLAN[sizeof BIG_PLAN - 2] = '"';
    memset(DESC, 'x', sizeof DESC - 1);
    DESC[0] = '"';
    DESC[sizeof DESC - 2] = '"';
}

static void one_assignment(store *st, int tid, long a, int *failures)
{
    char aid[64];
    snprintf(aid, sizeof aid, "t%d-%ld-%ld", tid, a, (long)(now_s() * 1e6) % 1000000000L);
    double t = (double)time(NULL);
    store_claim c = {.assignment_id = aid,
                     .worker_id = "bench",
                     .lease_generation = 1,
                     .lease_expires_at = t + 120,
                     .session_id = "s",
                     .event_count = 42,
                     .claim_json = "{\"assignment_id\":\"x\",\"lease_generation\":1}"};
    if (store_assignments_claimed(st, &c, 1, t, NULL)) (*failures)++;
    char rid[3][96];
    const char *ids[3];
    store_plan_run pr[3];
    const char *keys[3] = {"tool_count", "ended", "answer_quality"};
    for (int i = 0; i < 3; i++) {
        snprintf(rid[i], sizeof rid[i], "%s-r%d", aid, i);
        ids[i] = rid[i];
        pr[i] = (store_plan_run){rid[i], keys[i], "1.0.0", "python", 30, DESC};
    }
    if (store_assignment_planned(st, aid, 1, BIG_DEFS, BIG_PLAN, BIG_PLAN, 0, pr, 3, t, NULL))
        (*failures)++;
    if (store_runs_started(st, ids, 3, t, NULL, NULL)) (*failures)++;
    if (store_assignment_lease(st, aid, 1, t + 150, NULL)) (*failures)++;
    for (int i = 0; i < 3; i++) {
        char sub[128], body[2048];
        snprintf(sub, sizeof sub, "sub-%s", rid[i]);
        int len = snprintf(body, sizeof body, BODY, sub);
        store_run_result r = {.run_id = rid[i],
                              .status = "succeeded",
                              .started_at = t,
                              .finished_at = t + 0.002,
                              .duration_ms = 2,
                              .results_json = "[{\"result_key\":\"tool_count\"}]",
                              .submission_id = sub,
                              .worker_id = "bench",
                              .lease_generation = 1,
                              .body = body,
                              .body_len = (size_t)len};
        if (store_run_finished(st, &r, NULL)) (*failures)++;
        store_attempt ok = {.outcome = STORE_SUBMIT_COMMITTED, .at = t, .http_status = 200};
        if (store_outbox_record(st, sub, &ok, NULL)) (*failures)++;
    }
}

static void *worker_main(void *p)
{
    targ *a = p;
    for (long i = 0; (a->n < 0 || i < a->n) && !*a->stop; i++) {
        one_assignment(a->st, a->id, i, &a->failures);
        a->done++;
    }
    return NULL;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

typedef struct {
    store *st;
    double seconds;
    double *lat;
    long n, cap;
    int failures;
    int id;
} rarg;

static void *reader_main(void *p)
{
    rarg *r = p;
    strbuf b;
    strbuf_init(&b);
    double end = now_s() + r->seconds;
    char cursor[32] = "";
    long i = 0;
    while (now_s() < end && r->n < r->cap) {
        store_run_filter f = {.limit = 100};
        switch (i++ % 4) {
        case 0:
            break; /* first page */
        case 1:
            f.cursor = cursor;
            break; /* a deep page */
        case 2:
            f.status = "succeeded";
            break;
        case 3:
            f.eval_key = "ended";
            f.cursor = cursor;
            break;
        }
        strbuf_reset(&b);
        double t0 = now_s();
        if (store_runs_list_json(r->st, &f, &b, NULL) != STORE_OK) r->failures++;
        r->lat[r->n++] = (now_s() - t0) * 1000.0;
        /* next deep cursor: somewhere in the middle of the table */
        snprintf(cursor, sizeof cursor, "%ld", 1000 + (long)((i * 7919) % 90000));
    }
    strbuf_free(&b);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr,
                "usage: store_bench worker DB THREADS ASSIGNMENTS | admin DB RUNS SECONDS\n");
        return 2;
    }
    init_docs();
    store_options o = {.path = argv[2],
                       .skip_integrity_check = 1,
                       .durability_process_only = getenv("FPS_BENCH_NOSYNC") != NULL};
    store *st = NULL;
    store_err e = {0};
    if (store_open(&o, &st, &e) != STORE_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    volatile int stop = 0;
    if (strcmp(argv[1], "worker") == 0) {
        int threads = atoi(argv[3]), n = atoi(argv[4]);
        pthread_t th[64];
        targ args[64];
        double t0 = now_s();
        for (int i = 0; i < threads && i < 64; i++) {
            args[i] = (targ){st, i, n / threads, &stop, 0, 0};
            pthread_create(&th[i], NULL, worker_main, &args[i]);
        }
        long done = 0;
        int fails = 0;
        for (int i = 0; i < threads && i < 64; i++) {
            pthread_join(th[i], NULL);
            done += args[i].done;
            fails += args[i].failures;
        }
        double el = now_s() - t0;
        printf(
            "{\"db\":\"%s\",\"runs\":%ld,\"seconds\":%.3f,\"runs_per_s\":%.1f,\"failures\":%d}\n",
            argv[2], done * 3, el, (double)done * 3 / el, fails);
    } else {
        long runs = atol(argv[3]);
        double secs = atof(argv[4]);
        /* fill */
        targ fill = {st, 99, (int)(runs / 3), &stop, 0, 0};
        int64_t have = 0;
        strbuf b;
        strbuf_init(&b);
        store_summary_json(st, &b, NULL);
        const char *p = strstr(b.data ? b.data : "", "\"succeeded\":");
        if (p) have = atoll(p + 12);
        strbuf_free(&b);
        if (have < runs) {
            fill.n = (int)((runs - have) / 3);
            worker_main(&fill);
        }
        /* measure: 2 readers + 1 writer */
        targ w = {st, 7, -1, &stop, 0, 0};
        pthread_t wt, rt[2];
        rarg ra[2];
        pthread_create(&wt, NULL, worker_main, &w);
        for (int i = 0; i < 2; i++) {
            ra[i] = (rarg){st, secs, calloc(2000000, sizeof(double)), 0, 2000000, 0, i};
            pthread_create(&rt[i], NULL, reader_main, &ra[i]);
        }
        double t0 = now_s();
        for (int i = 0; i < 2; i++)
            pthread_join(rt[i], NULL);
        double el = now_s() - t0;
        stop = 1;
        pthread_join(wt, NULL);
        long n = ra[0].n + ra[1].n;
        double *all = malloc((size_t)n * sizeof *all);
        memcpy(all, ra[0].lat, (size_t)ra[0].n * sizeof *all);
        memcpy(all + ra[0].n, ra[1].lat, (size_t)ra[1].n * sizeof *all);
        qsort(all, (size_t)n, sizeof *all, cmp_d);
        printf("{\"db\":\"%s\",\"queries\":%ld,\"queries_per_s\":%.0f,\"p50_ms\":%.3f,"
               "\"p99_ms\":%.3f,\"max_ms\":%.3f,\"writer_runs_per_s\":%.1f,\"failures\":%d}\n",
               argv[2], n, (double)n / el, all[n / 2], all[(long)(n * 0.99)], all[n - 1],
               (double)w.done * 3 / el, ra[0].failures + ra[1].failures + w.failures);
        free(all);
        free(ra[0].lat);
        free(ra[1].lat);
    }
    store_close(st);
    return 0;
}
