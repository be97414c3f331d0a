/* tests/bench/jail/bench_jail: latency of one managed evaluation through the
 * jail (sbx_eval: slot, pre-started child, request, interpreter, read-back,
 * reap), sequentially, p50/p99; or, with --batch B, of the evaluations of
 * sessions of B (sbx_session_open/eval/close: one evaluator per session, as
 * one assignment's managed definitions run); and posix_spawn+wait of
 * /bin/true as the floor. Built and run by tests/bench/jail/run.sh, which also runs the
 * reference-style anchor (anchor.py) and prints the ratios.
 *
 * usage: bench_jail SIDECAR TRANSCRIPT.json N EXPR [--no-ns] [--no-prestart]
 *        [--no-zygote]    (exec every child instead of forking the zygote)
 *        [--pace-ms MS]   (sleep between evaluations)
 *        [--test-mode M]  (children in the jail's test mode M, e.g. "echo": the
 *                          whole jail and hand-off, no interpreter)
 *        [--streams K]    (capacity: K threads share the pool, each running
 *                          N/K evaluations back to back, as the worker's
 *                          threads do; the floor likewise spawns from K threads)
 *        [--batch B]      (sessions of B evaluations each, a fresh session
 *                          per B; N is rounded down to a multiple of B per stream)
 * prints one JSON line: {"p50_ms", "p99_ms", "mean_ms", "floor_p50_ms", ...,
 * "evals_per_s", "floor_per_s", "batch", "sessions_per_s"} (the rates: N
 * over the wall time of all streams; sessions_per_s: N / B over it). */
#include "sandbox/jail/sbx.h"

#include <pthread.h>
#include <spawn.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time (ms) of this process and its reaped children so far. */
static double cpu_ms(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) * 1e3 +
           (a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec) /
               1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

/* One stream: evaluations [from, to) of the shared run, back to back. */
typedef struct {
    sbx_pool *pool;   /* borrowed */
    sbx_image *img;   /* borrowed */
    const char *expr; /* borrowed */
    int from, to, pace_ms, batch;
    double *lat; /* borrowed: the run's latency array */
    int bad;
    char *last; /* owned: the last outcome line */
} stream_t;

static void *eval_stream(void *arg)
{
    stream_t *st = arg;
    sbx_session *sess = NULL;
    for (int i = st->from; i < st->to; i++) {
        int k = i - st->from; /* the evaluation's place in its session */
        if (st->batch > 1 && k % st->batch == 0) {
            sbx_session_close(sess);
            sess = sbx_session_open(st->pool, st->img);
        }
        sbx_request req;
        memset(&req, 0, sizeof req);
        req.kind = LANG_EVALUATOR;
        req.source = st->expr;
        req.source_len = strlen(st->expr);
        req.eval_key = "q";
        req.timeout_s = 30;
        req.image = st->img;
        sbx_outcome out;
        if (st->pace_ms > 0) {
            struct timespec pace = {st->pace_ms / 1000, (long)(st->pace_ms % 1000) * 1000000L};
            nanosleep(&pace, NULL);
        }
        double s = now_ms();
        if (sess != NULL)
            sbx_session_eval(sess, &req, &out);
        else
            sbx_eval(st->pool, &req, &out);
        st->lat[i] = now_ms() - s;
        if (out.status != SBX_OK) st->bad++;
        free(st->last);
        st->last = sbx_outcome_line(&out);
        sbx_outcome_free(&out);
    }
    sbx_session_close(sess);
    return NULL;
}

/* One floor stream: posix_spawn + wait of /bin/true, [from, to). */
static void *spawn_stream(void *arg)
{
    stream_t *st = arg;
    char *targv[] = {"/bin/true", NULL}, *envp[] = {NULL};
    for (int i = st->from; i < st->to; i++) {
        pid_t pid;
        double s = now_ms();
        if (posix_spawn(&pid, "/bin/true", NULL, NULL, targv, envp) == 0) waitpid(pid, NULL, 0);
        st->lat[i] = now_ms() - s;
    }
    return NULL;
}

/* Runs `fn` over N items split across `k` streams; returns the wall time in
 * ms. Stream 0 runs on the calling thread. */
static double run_streams(stream_t *st, int k, int n, void *(*fn)(void *))
{
    pthread_t th[64];
    double t0 = now_ms();
    for (int i = 0; i < k; i++) {
        st[i].from = (int)((long)n * i / k);
        st[i].to = (int)((long)n * (i + 1) / k);
        /* whole sessions only */
        if (st[i].batch > 1) st[i].to -= (st[i].to - st[i].from) % st[i].batch;
        if (i > 0 && pthread_create(&th[i], NULL, fn, &st[i]) != 0) fn(&st[i]);
    }
    fn(&st[0]);
    for (int i = 1; i < k; i++)
        pthread_join(th[i], NULL);
    return now_ms() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: bench_jail SIDECAR TRANSCRIPT N EXPR [--no-ns] [--no-prestart] "
                        "[--no-zygote] [--pace-ms MS] [--test-mode M] [--streams K]\n");
        return 2;
    }
    int n = atoi(argv[3]), pace_ms = 0, streams = 1, batch = 1;
    const char *expr = argv[4];
    sbx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_sandboxes = 4;
    cfg.memory_mb = 512;
    cfg.self_exe = argv[1];
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--no-ns")) cfg.no_namespaces = 1;
        if (!strcmp(argv[i], "--no-prestart")) cfg.prestart = -1;
        if (!strcmp(argv[i], "--no-zygote")) cfg.no_zygote = 1;
        if (!strcmp(argv[i], "--pace-ms") && i + 1 < argc) pace_ms = atoi(argv[++i]);
        if (!strcmp(argv[i], "--streams") && i + 1 < argc) streams = atoi(argv[++i]);
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        if (!strcmp(argv[i], "--test-mode") && i + 1 < argc) cfg.test_mode = argv[++i];
    }
    if (n < 1 || streams < 1 || streams > 64 || streams > n || batch < 1 || n / streams < batch) {
        fprintf(stderr, "bench_jail: N >= 1, 1 <= --streams <= min(N, 64), 1 <= --batch <= "
                        "N / streams\n");
        return 2;
    }
    fps_err err;
    double t0 = now_ms();
    FILE *f = fopen(argv[2], "rb");
    char *text = NULL;
    long tlen = -1;
    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (tlen = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)tlen + 1)) != NULL &&
        fread(text, 1, (size_t)tlen, f) != (size_t)tlen)
        tlen = -1;
    if (f != NULL) fclose(f);
    if (text == NULL || tlen < 0) {
        fprintf(stderr, "transcript: cannot read %s\n", argv[2]);
        free(text);
        return 1;
    }
    double t_load = now_ms() - t0;
    t0 = now_ms();
    sbx_image *img = sbx_image_new(text, (size_t)tlen, NULL, 0, &err);
    double t_image = now_ms() - t0;
    free(text);
    if (img == NULL) {
        fprintf(stderr, "image: %s\n", err.msg);
        return 1;
    }
    sbx_pool *pool = sbx_pool_new(&cfg, &err);
    if (pool == NULL) {
        fprintf(stderr, "pool: %s\n", err.msg);
        return 1;
    }
    struct timespec settle = {0, 200000000};
    nanosleep(&settle, NULL); /* let the pre-started children come up */
    double *lat = calloc((size_t)n, sizeof *lat);
    stream_t st[64];
    memset(st, 0, sizeof st);
    for (int i = 0; i < streams; i++)
        st[i] = (stream_t){pool, img, expr, 0, 0, pace_ms, batch, lat, 0, NULL};
    double c0 = cpu_ms();
    double wall = run_streams(st, streams, n, eval_stream);
    /* The evaluations run: whole sessions of each stream. */
    int ran = 0;
    for (int i = 0; i < streams; i++)
        ran += st[i].to - st[i].from;
    if (ran < n) {
        /* the latencies of the ones not run sort last: drop them */
        int w = 0;
        for (int i = 0; i < streams; i++)
            for (int j = st[i].from; j < st[i].to; j++)
                lat[w++] = lat[j];
        n = ran;
    }
    int bad = 0;
    char *last = st[0].last;
    for (int i = 0; i < streams; i++) {
        bad += st[i].bad;
        if (i > 0) free(st[i].last);
    }
    sbx_pool_free(pool);
    double cpu_eval = (cpu_ms() - c0) / n;
    sbx_image_release(img);
    qsort(lat, (size_t)n, sizeof *lat, cmp_d);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += lat[i];

    /* The floor: posix_spawn of /bin/true and wait for it. */
    double *fl = calloc((size_t)n, sizeof *fl);
    for (int i = 0; i < streams; i++) {
        st[i].lat = fl;
        st[i].batch = 1;
    }
    c0 = cpu_ms();
    double floor_wall = run_streams(st, streams, n, spawn_stream);
    double cpu_floor = (cpu_ms() - c0) / n;
    qsort(fl, (size_t)n, sizeof *fl, cmp_d);
    printf("{\"n\": %d, \"failures\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"mean_ms\": %.3f, "
           "\"floor_p50_ms\": %.3f, \"floor_p99_ms\": %.3f, \"cpu_ms\": %.3f, \"floor_cpu_ms\": "
           "%.3f, \"load_ms\": %.1f, \"image_ms\": %.1f, \"streams\": %d, "
           "\"evals_per_s\": %.1f, \"floor_per_s\": %.1f, \"batch\": %d, \"sessions_per_s\": %.1f, "
           "\"last\": %s}\n",
           n, bad, pct(lat, n, 0.5), pct(lat, n, 0.99), sum / n, pct(fl, n, 0.5), pct(fl, n, 0.99),
           cpu_eval, cpu_floor, t_load, t_image, streams, n * 1e3 / wall, n * 1e3 / floor_wall,
           batch, n * 1e3 / wall / batch, last ? last : "null");
    free(last);
    free(lat);
    free(fl);
    return 0;
}
