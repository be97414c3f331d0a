/* tests/bench/store/archive_bench: the transcript archive's writer alone (not
 * a test). Puts PUTS transcripts of MIN_KB..MAX_KB (JSON-like bytes, about
 * 2x compressible) into a fresh archive bounded to MAX_MB, synchronously in
 * this thread (store_archive_put, the writer thread's step), and prints the
 * thread CPU per insert in WINDOWS equal slices of the stream, with the
 * entries kept at the end of each, then the last slice over the first.
 * Anchor: ~1.0 (an insert's cost does not grow with what the archive holds,
 * beyond its b-trees' depth and the evictions once it is full; a count of
 * every row after each insert once made it grow linearly). The worker's
 * budget is bench_worker.py's: the archive on within 0.95x of off, ~3 runs
 * per transcript there.
 *
 *   cc -O2 -std=gnu17 -I. tests/bench/store/archive_bench.c build/store/libfps_store.a \
 *      build/common/libfps_common.a -lsqlite3 -lzstd -lnettle -luuid -lpthread -lm \
 *      -o /tmp/archive_bench
 *   /tmp/archive_bench /tmp/ab.archive [MAX_MB 64] [PUTS 20000] [MIN_KB 3] [MAX_KB 9] [WINDOWS 5]
 *
 * The file given is removed first (with its -wal and -shm). */
#include "store/archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double thread_cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void fill(char *b, size_t len, unsigned seed)
{
    unsigned x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (i % 2) ? (char)('a' + (x >> 16) % 26) : "{\"event\":"[i / 2 % 9];
    }
}

static long arg(int argc, char **argv, int i, long dflt)
{
    return argc > i ? atol(argv[i]) : dflt;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: archive_bench PATH [MAX_MB] [PUTS] [MIN_KB] [MAX_KB] [WINDOWS]\n");
        return 2;
    }
    const char *path = argv[1];
    long max_mb = arg(argc, argv, 2, 64), puts = arg(argc, argv, 3, 20000);
    long min_kb = arg(argc, argv, 4, 3), max_kb = arg(argc, argv, 5, 9);
    long windows = arg(argc, argv, 6, 5);
    if (max_mb <= 0 || puts <= 0 || min_kb <= 0 || max_kb < min_kb || windows <= 0 ||
        windows > puts) {
        fprintf(stderr, "archive_bench: bad arguments\n");
        return 2;
    }
    char p[4096];
    static const char *const SUFFIXES[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", path, SUFFIXES[i]);
        (void)unlink(p);
    }
    store_archive_options o = {.path = path, .max_bytes = max_mb << 20, .no_writer_thread = 1};
    store_archive *a = NULL;
    store_err e = {0};
    if (store_archive_open(&o, &a, &e) != STORE_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    size_t cap = (size_t)max_kb << 10;
    char *b = malloc(cap);
    if (b == NULL) {
        store_archive_close(a);
        return 1;
    }
    printf("archive writer: %ld inserts of %ld-%ld KiB into %ld MiB (thread CPU per insert)\n",
           puts, min_kb, max_kb, max_mb);
    long per = puts / windows, done = 0;
    double first = 0, last = 0;
    int rc = 0;
    for (long w = 0; w < windows && rc == 0; w++) {
        double cpu = 0;
        for (long i = 0; i < per; i++, done++) {
            size_t len =
                ((size_t)min_kb << 10) + (size_t)((done * 7919) % ((max_kb - min_kb) * 1024 + 1));
            fill(b, len, (unsigned)done + 1);
            char sid[32];
            snprintf(sid, sizeof sid, "s%ld", done);
            double t0 = thread_cpu_us();
            if (store_archive_put(a, &(store_archive_meta){sid, NULL, "a", 0}, b, len, NULL, &e) !=
                STORE_OK) {
                fprintf(stderr, "%s\n", e.msg);
                rc = 1;
                break;
            }
            cpu += thread_cpu_us() - t0;
        }
        store_archive_stats st;
        store_archive_stats_get(a, &st);
        double us = cpu / (double)per;
        if (w == 0) first = us;
        last = us;
        printf("  inserts %6ld-%-6ld %9.1f us   entries kept %lld, evicted so far %llu, %.1f MiB\n",
               done - per + 1, done, us, (long long)st.entries, (unsigned long long)st.evictions,
               (double)st.bytes / (1 << 20));
    }
    if (rc == 0)
        printf("  last / first slice  %9.2f   anchor: ~1.0 (no growth with the entries kept)\n",
               first > 0 ? last / first : 0);
    free(b);
    store_archive_close(a);
    return rc;
}
