/* tests/unit/test_archive: the transcript archive (store/archive.h): exact
 * bytes back, SHA-256 and blob damage caught, bounds by bytes and by age
 * under a stream, one entry per session revision, the queue and its
 * thread, a read-only handle, and the production baseline read from a state
 * database the store wrote. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/rcbuf.h"
#include "common/timeutil.h"
#include "store/archive.h"
#include "store/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define TMPDIR_NAME "archive"
#include "tmpdir.h"

static void make_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s-%d.db.archive", g_dir, name, ++g_seq);
}

static store_archive *open_archive(const char *path, int64_t max_bytes, double max_age_s,
                                   int thread)
{
    store_archive_options o = {
        .path = path, .max_bytes = max_bytes, .max_age_s = max_age_s, .no_writer_thread = !thread};
    store_archive *a = NULL;
    store_err e = {0};
    int rc = store_archive_open(&o, &a, &e);
    if (rc != STORE_OK) fprintf(stderr, "open: %s\n", e.msg);
    assert_int_equal(rc, STORE_OK);
    return a;
}

/* Bytes that compress about 2:1 (a transcript-like mix of text and noise),
 * deterministic per seed. */
static char *make_bytes(size_t len, unsigned seed)
{
    char *b = malloc(len + 1);
    unsigned x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (i % 2) ? (char)('a' + (x >> 16) % 26) : "{\"event\":"[i / 2 % 9];
    }
    b[len] = 0;
    return b;
}

static int64_t file_bytes(const char *path)
{
    char wal[600];
    struct stat st;
    int64_t n = stat(path, &st) == 0 ? st.st_size : 0;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &st) == 0) n += st.st_size;
    return n;
}

static void test_path_for(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(store_archive_path_for("/var/lib/x/state.db", out, sizeof out), 0);
    assert_string_equal(out, "/var/lib/x/state.db.archive");
    assert_int_equal(store_archive_path_for("/a/very/long/path/state.db", out, 8), -1);
    assert_int_equal(store_archive_path_for("", out, sizeof out), -1);
}

/* The bytes read back are the bytes put, the file is 0600, and a reopened
 * archive still has them. */
static void test_round_trip(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "rt");
    store_archive *a = open_archive(path, 64 << 20, 0, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    /* every byte value, NULs included */
    char raw[1000];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (char)(i * 7);
    char *big = make_bytes(3 << 20, 1);
    store_archive_meta m1 = {"sess-1", "rev-1", "asg-1", 0};
    store_archive_meta m2 = {"sess-2", NULL, "asg-2", 0};
    int64_t id1 = 0, id2 = 0, id3 = 0;
    store_err e = {0};
    assert_int_equal(store_archive_put(a, &m1, raw, sizeof raw, &id1, &e), STORE_OK);
    assert_int_equal(store_archive_put(a, &m2, big, 3 << 20, &id2, &e), STORE_OK);
    assert_int_equal(
        store_archive_put(a, &(store_archive_meta){"s3", NULL, "a3", 0}, "", 0, &id3, &e),
        STORE_OK);
    assert_true(id1 < id2 && id2 < id3);
    store_archive_close(a);

    a = open_archive(path, 0, 0, 0); /* read-only */
    store_archive_entry *v = NULL;
    size_t n = 0;
    assert_int_equal(store_archive_list(a, NULL, &v, &n, &e), STORE_OK);
    assert_int_equal(n, 3);
    assert_int_equal(v[0].id, id1);
    assert_string_equal(v[0].session_id, "sess-1");
    assert_string_equal(v[0].session_revision_id, "rev-1");
    assert_string_equal(v[0].assignment_id, "asg-1");
    assert_int_equal(v[0].raw_bytes, sizeof raw);
    assert_null(v[1].session_revision_id);
    assert_true(v[1].stored_bytes < v[1].raw_bytes); /* compressed */
    store_archive_entries_free(v, n);

    char *data = NULL;
    size_t len = 0;
    store_archive_entry meta = {0};
    assert_int_equal(store_archive_read(a, id1, &data, &len, &meta, &e), STORE_OK);
    assert_int_equal(len, sizeof raw);
    assert_memory_equal(data, raw, sizeof raw);
    assert_int_equal(data[len], 0);
    assert_string_equal(meta.session_id, "sess-1");
    store_archive_entry_clear(&meta);
    free(data);
    assert_int_equal(store_archive_read(a, id2, &data, &len, NULL, &e), STORE_OK);
    assert_int_equal(len, 3 << 20);
    assert_memory_equal(data, big, len);
    free(data);
    assert_int_equal(store_archive_read(a, id3, &data, &len, NULL, &e), STORE_OK);
    assert_int_equal(len, 0);
    free(data);
    assert_int_equal(store_archive_read(a, 999, &data, &len, NULL, &e), STORE_NOTFOUND);
    assert_null(data);
    /* a read-only handle refuses writes */
    assert_int_equal(store_archive_put(a, &m1, raw, 1, NULL, &e), STORE_INVALID);
    assert_int_equal(store_archive_submit(a, &m1, NULL), -1);
    store_archive_close(a);
    free(big);

    /* read-only on a missing file */
    store_archive_options o = {.path = "/nonexistent/dir/x.archive"};
    assert_int_equal(store_archive_open(&o, &a, &e), STORE_NOTFOUND);
    assert_null(a);
}

/* Replaces entry id's blob (a separate connection, as a disk fault would). */
static void set_blob(const char *path, int64_t id, const void *b, size_t n)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(db, "UPDATE entries SET data = ?1 WHERE id = ?2", -1, &s, NULL),
        SQLITE_OK);
    sqlite3_bind_blob(s, 1, b, (int)n, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, id);
    assert_int_equal(sqlite3_step(s), SQLITE_DONE);
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* A blob that decompresses to other bytes of the same length fails the
 * SHA-256 check; a damaged blob fails to decompress; both are STORE_CORRUPT
 * with a message naming the entry, and nothing is returned. The other
 * entries still read. */
static void test_corruption_caught(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "corrupt");
    store_archive *a = open_archive(path, 64 << 20, 0, 0);
    char *good = make_bytes(100000, 2);
    int64_t ids[3];
    store_err e = {0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(store_archive_put(a, &(store_archive_meta){"s", NULL, "a", 0}, good,
                                           100000, &ids[i], &e),
                         STORE_OK);
    /* (the same session revision and bytes are kept once: moved, not added) */
    store_archive_stats stt;
    store_archive_stats_get(a, &stt);
    assert_int_equal(stt.entries, 1);
    assert_int_equal(stt.raw_bytes, 100000);
    store_archive_entry *v = NULL;
    size_t n = 0;
    assert_int_equal(store_archive_list(a, NULL, &v, &n, &e), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].id, ids[2]);
    store_archive_entries_free(v, n);
    int64_t a1 = 0, a2 = 0, a3 = 0;
    assert_int_equal(
        store_archive_put(a, &(store_archive_meta){"s1", NULL, "a", 0}, good, 100000, &a1, &e),
        STORE_OK);
    assert_int_equal(
        store_archive_put(a, &(store_archive_meta){"s2", NULL, "a", 0}, good, 100000, &a2, &e),
        STORE_OK);
    assert_int_equal(
        store_archive_put(a, &(store_archive_meta){"s3", NULL, "a", 0}, good, 100000, &a3, &e),
        STORE_OK);

    /* other bytes, same length, a valid frame: only the digest can tell */
    char *other = make_bytes(100000, 3);
    size_t cap = ZSTD_compressBound(100000);
    void *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, other, 100000, 3);
    assert_false(ZSTD_isError(zn));
    set_blob(path, a1, z, zn);
    char *data = (char *)1;
    size_t len = 7;
    assert_int_equal(store_archive_read(a, a1, &data, &len, NULL, &e), STORE_CORRUPT);
    assert_null(data);
    assert_int_equal(len, 0);
    assert_non_null(strstr(e.msg, "SHA-256 mismatch"));
    char want[32];
    snprintf(want, sizeof want, "entry %lld", (long long)a1);
    assert_non_null(strstr(e.msg, want));

    /* one flipped byte in the middle of the compressed blob */
    zn = ZSTD_compress(z, cap, good, 100000, 3);
    ((unsigned char *)z)[zn / 2] ^= 0x5a;
    set_blob(path, a2, z, zn);
    assert_int_equal(store_archive_read(a, a2, &data, &len, NULL, &e), STORE_CORRUPT);
    assert_null(data);
    /* a truncated blob */
    set_blob(path, a3, z, 5);
    assert_int_equal(store_archive_read(a, a3, &data, &len, NULL, &e), STORE_CORRUPT);
    assert_non_null(strstr(e.msg, "damaged"));

    /* the intact entry still reads exactly */
    assert_int_equal(store_archive_read(a, ids[2], &data, &len, NULL, &e), STORE_OK);
    assert_memory_equal(data, good, 100000);
    free(data);
    free(z);
    free(other);
    free(good);
    store_archive_close(a);
}

/* A stream of sessions into a 2 MiB archive: after every insert the file
 * plus its WAL stay within the bound plus one entry, the entries kept are
 * the newest ones (oldest evicted first), and each still reads back. */
static void test_bound_by_bytes(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "bytes");
    const int64_t max = 2 << 20;
    store_archive *a = open_archive(path, max, 0, 0);
    store_err e = {0};
    int64_t largest = 0, last_id = 0;
    const int N = 120;
    for (int i = 0; i < N; i++) {
        size_t len = 20000 + (size_t)(i % 7) * 37000 + (i % 29 == 0 ? 900000 : 0);
        char *b = make_bytes(len, (unsigned)i + 10);
        char sid[32];
        snprintf(sid, sizeof sid, "s%03d", i);
        int64_t id = 0;
        assert_int_equal(
            store_archive_put(a, &(store_archive_meta){sid, NULL, "a", 0}, b, len, &id, &e),
            STORE_OK);
        free(b);
        store_archive_entry *v = NULL;
        size_t n = 0;
        assert_int_equal(store_archive_list(a, &(store_archive_filter){.limit = 1}, &v, &n, &e),
                         STORE_OK);
        assert_int_equal(n, 1);
        if (v[0].stored_bytes > largest) largest = v[0].stored_bytes;
        store_archive_entries_free(v, n);
        int64_t on_disk = file_bytes(path);
        if (on_disk > max + largest) {
            fprintf(stderr, "after insert %d: %lld bytes > %lld + %lld\n", i, (long long)on_disk,
                    (long long)max, (long long)largest);
            fail();
        }
        last_id = id;
    }
    store_archive_stats st;
    store_archive_stats_get(a, &st);
    assert_true(st.evictions > 50);
    assert_int_equal(st.archived, (uint64_t)N);
    assert_int_equal(st.failures, 0);
    assert_true(st.bytes <= max + largest);
    /* the kept entries are the newest, contiguous up to the last one */
    store_archive_entry *v = NULL;
    size_t n = 0;
    assert_int_equal(store_archive_list(a, NULL, &v, &n, &e), STORE_OK);
    assert_int_equal((int64_t)n, st.entries);
    assert_true(n > 5 && n < (size_t)N);
    int64_t raw_kept = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(v[i].id, last_id - (int64_t)(n - 1 - i));
        raw_kept += v[i].raw_bytes;
    }
    /* the figures follow the evictions without a scan: they match a listing */
    assert_int_equal(st.raw_bytes, raw_kept);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(store_archive_read(a, v[0].id, &data, &len, NULL, &e), STORE_OK);
    assert_int_equal((int64_t)len, v[0].raw_bytes);
    free(data);
    store_archive_entries_free(v, n);

    /* an entry larger than the whole archive is refused and counted */
    char *huge = malloc(3 << 20);
    for (size_t i = 0; i < (3u << 20); i++)
        huge[i] = (char)(rand() & 0xff);
    assert_int_equal(
        store_archive_put(a, &(store_archive_meta){"huge", NULL, "a", 0}, huge, 3 << 20, NULL, &e),
        STORE_INVALID);
    free(huge);
    store_archive_stats_get(a, &st);
    assert_int_equal(st.failures, 1);
    store_archive_close(a);
}

/* Entries older than the age bound go in the next insert's transaction (or
 * an explicit prune); since/limit filter the listing. */
static void test_bound_by_age_and_filter(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "age");
    store_archive *a = open_archive(path, 64 << 20, 3600, 0);
    store_err e = {0};
    double now = time_now();
    for (int i = 0; i < 10; i++) {
        char sid[16];
        snprintf(sid, sizeof sid, "old%d", i);
        /* 2 h to 1.1 h old: all beyond the bound of 1 h */
        assert_int_equal(
            store_archive_put(a, &(store_archive_meta){sid, NULL, "a", now - 7200 + i * 300}, "x",
                              1, NULL, &e),
            STORE_OK);
    }
    /* each insert evicted the older ones already: only the last survives */
    store_archive_stats st;
    store_archive_stats_get(a, &st);
    assert_int_equal(st.entries, 1);
    for (int i = 0; i < 5; i++) {
        char sid[16];
        snprintf(sid, sizeof sid, "new%d", i);
        assert_int_equal(store_archive_put(a, &(store_archive_meta){sid, NULL, "a", now - 50 + i},
                                           "y", 1, NULL, &e),
                         STORE_OK);
    }
    store_archive_stats_get(a, &st);
    assert_int_equal(st.entries, 5);
    assert_int_equal(st.evictions, 10);

    store_archive_entry *v = NULL;
    size_t n = 0;
    assert_int_equal(
        store_archive_list(a, &(store_archive_filter){.since = now - 48.5}, &v, &n, &e), STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(v[0].session_id, "new2");
    assert_string_equal(v[2].session_id, "new4");
    store_archive_entries_free(v, n);
    assert_int_equal(store_archive_list(a, &(store_archive_filter){.limit = 2}, &v, &n, &e),
                     STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].session_id, "new3"); /* the newest two, oldest first */
    assert_string_equal(v[1].session_id, "new4");
    store_archive_entries_free(v, n);

    size_t ev = 0;
    assert_int_equal(store_archive_prune(a, now + 3600 - 48.5, &ev, &e), STORE_OK);
    assert_int_equal(ev, 2);
    store_archive_stats_get(a, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.raw_bytes, 3);
    store_archive_close(a);
}

/* The writer thread: submitted transcripts are written (the caller's
 * reference stays its own), a full queue drops and counts, close writes
 * what is queued. */
static void test_queue_and_thread(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "queue");
    store_archive_options o = {.path = path, .max_bytes = 64 << 20, .queue_max = 4};
    store_archive *a = NULL;
    store_err e = {0};
    assert_int_equal(store_archive_open(&o, &a, &e), STORE_OK);
    rcbuf *b = rcbuf_take(make_bytes(50000, 5), 50000);
    int queued = 0, dropped = 0;
    for (int i = 0; i < 200; i++) {
        char sid[16];
        snprintf(sid, sizeof sid, "q%d", i);
        if (store_archive_submit(a, &(store_archive_meta){sid, "r", "a", 0}, b) == 0)
            queued++;
        else
            dropped++;
    }
    assert_int_equal(store_archive_flush(a, 60000), 0);
    store_archive_stats st;
    store_archive_stats_get(a, &st);
    assert_int_equal((int)st.archived, queued);
    assert_int_equal((int)st.failures, dropped);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.queued_bytes, 0);
    assert_true(queued >= 4);
    /* the caller's reference is intact */
    assert_int_equal(rcbuf_len(b), 50000);
    for (int i = 0; i < 3; i++)
        assert_int_equal(store_archive_submit(a, &(store_archive_meta){"last", NULL, "a", 0}, b),
                         0);
    store_archive_close(a); /* writes the queued ones */
    rcbuf_release(b);
    a = open_archive(path, 0, 0, 0);
    store_archive_stats_get(a, &st);
    assert_int_equal((int)st.entries, queued + 1); /* the three "last" are one revision */
    store_archive_close(a);
}

/* The production baseline: per eval_key, the newest terminal run across the
 * session's assignments, a "skipped" row for a key the latest plan skipped,
 * nothing for a key never run, nothing for another session. */
static void test_baseline(void **state)
{
    (void)state;
    char db[512], path[600];
    snprintf(db, sizeof db, "%s/state-%d.db", g_dir, ++g_seq);
    store_archive_path_for(db, path, sizeof path);
    store_options so = {.path = db, .sync_updates = 1};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&so, &st, &e), STORE_OK);
    const char *plan_req = "{\"selected\":[{\"eval_key\":\"score\",\"eval_version\":\"2\"}],"
                           "\"skipped\":[{\"eval_key\":\"grounded\",\"eval_version\":\"1\","
                           "\"reason_code\":\"no_retrieval_events\"}]}";
    for (int k = 0; k < 2; k++) {
        char aid[16], r0[16], r1[16];
        snprintf(aid, sizeof aid, "asg%d", k);
        snprintf(r0, sizeof r0, "asg%d-r0", k);
        snprintf(r1, sizeof r1, "asg%d-r1", k);
        store_claim c = {.assignment_id = aid,
                         .worker_id = "w",
                         .lease_generation = 1,
                         .lease_expires_at = 9e9,
                         .session_id = "sess"};
        assert_int_equal(store_assignments_claimed(st, &c, 1, 1000 + k, &e), STORE_OK);
        store_plan_run runs[2] = {
            {.run_id = r0, .eval_key = "score", .eval_version = "2", .execution_mode = "python"},
            {.run_id = r1, .eval_key = "tone", .eval_version = "1", .execution_mode = "python"}};
        assert_int_equal(store_assignment_planned(st, aid, 1, "[]", plan_req, "{}", 0, runs,
                                                  k == 0 ? 2 : 1, 1000 + k, &e),
                         STORE_OK);
        char sub0[16], sub1[16];
        snprintf(sub0, sizeof sub0, "sub%d-0", k);
        snprintf(sub1, sizeof sub1, "sub%d-1", k);
        store_run_result res = {.run_id = r0,
                                .status = k == 0 ? "failed" : "succeeded",
                                .started_at = 2000 + k * 10,
                                .finished_at = 2001 + k * 10,
                                .summary = k == 0 ? NULL : "fine",
                                .results_json = k == 0 ? "[]" : "[{\"key\":\"score\",\"v\":0.5}]",
                                .error_code = k == 0 ? "eval_error" : NULL,
                                .submission_id = sub0,
                                .worker_id = "w",
                                .lease_generation = 1,
                                .body = "{}",
                                .body_len = 2};
        assert_int_equal(store_run_finished(st, &res, &e), STORE_OK);
        if (k == 0) {
            res.run_id = r1;
            res.status = "timed_out";
            res.error_code = "eval_timeout";
            res.submission_id = sub1;
            assert_int_equal(store_run_finished(st, &res, &e), STORE_OK);
        }
    }
    store_archive_options ao = {.path = path, .state_db_path = db, .max_bytes = 1 << 20};
    store_archive *a = NULL;
    assert_int_equal(store_archive_open(&ao, &a, &e), STORE_OK);
    store_archive_baseline_run *b = NULL;
    size_t n = 0;
    /* read while the store (the daemon) holds its lock */
    assert_int_equal(store_archive_baseline(a, "sess", &b, &n, &e), STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(b[0].eval_key, "grounded");
    assert_string_equal(b[0].status, "skipped");
    assert_string_equal(b[0].skip_reason, "no_retrieval_events");
    assert_null(b[0].run_id);
    assert_string_equal(b[0].assignment_id, "asg1");
    assert_string_equal(b[1].eval_key, "score");
    assert_string_equal(b[1].status, "succeeded"); /* asg1's, newer than asg0's failure */
    assert_string_equal(b[1].run_id, "asg1-r0");
    assert_string_equal(b[1].summary, "fine");
    assert_string_equal(b[1].results_json, "[{\"key\":\"score\",\"v\":0.5}]");
    assert_string_equal(b[1].eval_version, "2");
    assert_string_equal(b[2].eval_key, "tone");
    assert_string_equal(b[2].status, "timed_out");
    assert_string_equal(b[2].error_code, "eval_timeout");
    store_archive_baseline_free(b, n);
    assert_int_equal(store_archive_baseline(a, "nobody", &b, &n, &e), STORE_OK);
    assert_int_equal(n, 0);
    assert_null(b);
    store_archive_close(a);
    store_close(st);

    /* no state database: an empty baseline, not an error */
    ao.state_db_path = "/nonexistent/state.db";
    assert_int_equal(store_archive_open(&ao, &a, &e), STORE_OK);
    assert_int_equal(store_archive_baseline(a, "sess", &b, &n, &e), STORE_OK);
    assert_int_equal(n, 0);
    store_archive_close(a);
}

/* An archive file that is not a database is moved aside and started anew
 * (the archive is best-effort; it never stops the daemon). */
static void test_corrupt_file_reset(void **state)
{
    (void)state;
    char path[512], aside[600];
    make_path(path, sizeof path, "garbage");
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 4096; i++)
        fputc('z', f);
    fclose(f);
    store_archive *a = open_archive(path, 1 << 20, 0, 0);
    store_err e = {0};
    assert_int_equal(
        store_archive_put(a, &(store_archive_meta){"s", NULL, "a", 0}, "abc", 3, NULL, &e),
        STORE_OK);
    store_archive_close(a);
    snprintf(aside, sizeof aside, "%s.corrupt", path);
    assert_int_equal(access(aside, F_OK), 0);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_for),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_corruption_caught),
        cmocka_unit_test(test_bound_by_bytes),
        cmocka_unit_test(test_bound_by_age_and_filter),
        cmocka_unit_test(test_queue_and_thread),
        cmocka_unit_test(test_baseline),
        cmocka_unit_test(test_corrupt_file_reset),
    };
    return cmocka_run_group_tests_name("archive", tests, setup_dir, teardown_dir);
}
