/* tests/bench/api/query_bench: CPU cost of rendering GET /v1/runs pages in
 * the store layer alone (no HTTP): opens a seeded database read-only in
 * practice (only list queries), renders the first page and a filtered page
 * reached through a keyset cursor N times each, and prints CPU microseconds
 * per page and the page size. Run under callgrind for instruction counts.
 * Usage: query_bench DB [N] */
#include "common/strbuf.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int pages(store *st, const store_run_filter *f, int n, size_t *bytes, store_err *e)
{
    strbuf b;
    strbuf_init(&b);
    for (int i = 0; i < n; i++) {
        strbuf_reset(&b);
        if (store_runs_list_json(st, f, &b, e) != STORE_OK) {
            strbuf_free(&b);
            return -1;
        }
    }
    *bytes = b.len;
    strbuf_free(&b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: query_bench DB [N]\n");
        return 2;
    }
    int n = argc == 3 ? atoi(argv[2]) : 2000;
    store *st = NULL;
    store_err e = {0};
    store_options o = {.path = argv[1], .durability_process_only = 1};
    if (store_open(&o, &st, &e) != STORE_OK) {
        fprintf(stderr, "query_bench: %s\n", e.msg);
        return 1;
    }
    /* the cursor of the second filtered page */
    strbuf b;
    strbuf_init(&b);
    store_run_filter f1 = {.status = "succeeded", .limit = 100};
    if (store_runs_list_json(st, &f1, &b, &e) != STORE_OK) goto fail;
    char cursor[32] = "";
    const char *c = strstr(b.data, "\"next_cursor\":\"");
    if (c) snprintf(cursor, sizeof cursor, "%.*s", (int)strcspn(c + 15, "\""), c + 15);
    strbuf_free(&b);
    store_run_filter first = {.limit = 100};
    store_run_filter filtered = {.status = "succeeded", .limit = 100, .cursor = cursor};
    const store_run_filter *fs[2] = {&first, &filtered};
    const char *names[2] = {"first page", "filtered page via cursor"};
    for (int k = 0; k < 2; k++) {
        size_t bytes = 0;
        pages(st, fs[k], n / 10 + 1, &bytes, &e); /* warm-up */
        double t0 = cpu_now();
        if (pages(st, fs[k], n, &bytes, &e) != 0) goto fail;
        double us = (cpu_now() - t0) * 1e6 / n;
        printf("%-26s %8.1f us CPU per page (%zu bytes, %d pages)\n", names[k], us, bytes, n);
    }
    store_close(st);
    return 0;
fail:
    fprintf(stderr, "query_bench: %s\n", e.msg);
    store_close(st);
    return 1;
}
