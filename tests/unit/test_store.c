/* tests/unit/test_store: the SQLite store (store/store.h): every function,
 * the durability order, recovery primitives, migrations from an older schema,
 * refusal to start on corrupt/locked/read-only/full databases, pruning,
 * pagination and concurrent use from several threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/timeutil.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define TMPDIR_NAME "store"
#define TMPDIR_MODE 0777 /* the child that drops its privileges writes here too */
#include "tmpdir.h"

static void make_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s-%d.db", g_dir, name, ++g_seq);
}

/* The suite runs twice: every update in its own transaction (sync_updates),
 * then with the deferred updates batched (the default). */
static int g_sync_updates = 1;

/* A deferred update's outcome: its own with sync_updates; with the default
 * batching, STORE_OK at the call (the outcome is logged when it is applied),
 * then the queue is applied so that what follows sees it. */
#define assert_update(st, call, sync_rc)                                                           \
    do {                                                                                           \
        int update_rc_ = (call);                                                                   \
        assert_int_equal(update_rc_, g_sync_updates ? (sync_rc) : STORE_OK);                       \
        if (!g_sync_updates) assert_int_equal(store_flush((st), NULL), STORE_OK);                  \
    } while (0)

static store *open_at(const char *path)
{
    store_options o = {0};
    o.path = path;
    o.busy_timeout_ms = 200;
    o.sync_updates = g_sync_updates;
    store *st = NULL;
    store_err e = {0};
    int rc = store_open(&o, &st, &e);
    if (rc != STORE_OK) fprintf(stderr, "open failed: %s\n", e.msg);
    assert_int_equal(rc, STORE_OK);
    assert_non_null(st);
    return st;
}

static store *open_new(const char *name, char *path_out, size_t cap)
{
    char path[512];
    make_path(path, sizeof path, name);
    if (path_out) snprintf(path_out, cap, "%s", path);
    return open_at(path);
}

static json_t *parse(const strbuf *b)
{
    json_error_t je;
    json_t *j = json_loadb(b->data, b->len, 0, &je);
    if (!j) fprintf(stderr, "bad JSON (%s): %.300s\n", je.text, b->data);
    assert_non_null(j);
    return j;
}

/* A claimed + planned assignment with `nruns` runs named <aid>-r<i>. */
static void seed_assignment(store *st, const char *aid, int64_t gen, double expires, int nruns,
                            const char *eval_key)
{
    store_claim c = {.assignment_id = aid,
                     .worker_id = "w1",
                     .lease_generation = gen,
                     .lease_expires_at = expires,
                     .session_id = "s",
                     .event_count = 3,
                     .claim_json = "{\"x\":1}"};
    store_err e = {0};
    assert_int_equal(store_assignments_claimed(st, &c, 1, 1000, &e), STORE_OK);
    store_plan_run runs[64];
    char ids[64][96];
    assert_true(nruns <= 64);
    for (int i = 0; i < nruns; i++) {
        snprintf(ids[i], sizeof ids[i], "%s-r%d", aid, i);
        runs[i] = (store_plan_run){.run_id = ids[i],
                                   .eval_key = eval_key ? eval_key : "k",
                                   .eval_version = "1",
                                   .execution_mode = "python",
                                   .timeout_seconds = 30,
                                   .descriptor_json = "{\"d\":true}"};
    }
    assert_int_equal(store_assignment_planned(st, aid, gen, "[]", "{\"p\":1}", "{\"r\":2}", 0, runs,
                                              (size_t)nruns, 1001, &e),
                     STORE_OK);
}

static store_run_result mk_result(const char *run_id, const char *sub, int64_t gen,
                                  const char *status, const char *body, double finished, int64_t ms)
{
    return (store_run_result){.run_id = run_id,
                              .status = status,
                              .started_at = finished - 1,
                              .finished_at = finished,
                              .duration_ms = ms,
                              .summary = "ok",
                              .results_json = "[{\"result_key\":\"k\"}]",
                              .submission_id = sub,
                              .worker_id = "w1",
                              .lease_generation = gen,
                              .body = body,
                              .body_len = strlen(body)};
}

static int64_t outbox_depth(store *st)
{
    int64_t d = -1;
    assert_int_equal(store_outbox_depth(st, &d, NULL), STORE_OK);
    return d;
}

static void assignment_status(store *st, const char *aid, char *out, size_t cap)
{
    store_assignment_state a;
    assert_int_equal(store_assignment_load(st, aid, &a, NULL), STORE_OK);
    snprintf(out, cap, "%s", a.status);
    store_assignment_state_free(&a);
}

static const char *run_field(store *st, const char *run_id, const char *field, char *out,
                             size_t cap)
{
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(store_run_get_json(st, run_id, &b, NULL), STORE_OK);
    json_t *j = parse(&b);
    json_t *v = json_object_get(j, field);
    if (json_is_string(v))
        snprintf(out, cap, "%s", json_string_value(v));
    else
        snprintf(out, cap, "%s", json_is_null(v) ? "null" : "?");
    json_decref(j);
    strbuf_free(&b);
    return out;
}

/* ------------------------------------------------------------------ tests */

static void test_open_fresh_and_reopen(void **state)
{
    (void)state;
    char path[512];
    store *st = open_new("fresh", path, sizeof path);
    assert_int_equal(store_schema_version(st), store_schema_latest());
    assert_string_equal(store_path(st), path);
    store_close(st);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), store_schema_latest());
    sqlite3_finalize(s);
    sqlite3_close(db);
    st = open_at(path);
    assert_int_equal(store_schema_version(st), store_schema_latest());
    store_close(st);
    store_close(NULL);
    assert_string_equal(store_status_name(STORE_BUSY), "busy");
    store_err e = {0};
    store_options o = {0};
    assert_int_equal(store_open(&o, &st, &e), STORE_INVALID);
    assert_null(st);
}

static void test_worker_registration(void **state)
{
    (void)state;
    char path[512];
    store *st = open_new("worker", path, sizeof path);
    store_worker w;
    assert_int_equal(store_worker_load(st, &w, NULL), STORE_NOTFOUND);
    store_err e = {0};
    assert_int_equal(store_worker_save(st, NULL, NULL, NULL, NULL, NULL, 0, &e), STORE_INVALID);
    assert_int_equal(store_worker_save(st, "pod-1", "http://127.0.0.1:1", "sha256:ab", "[]",
                                       "{\"claim_limit\":4}", 1234.5, &e),
                     STORE_OK);
    assert_int_equal(
        store_worker_save(st, "pod-2", "http://127.0.0.1:1", "sha256:cd", "[]", "{}", 1300, &e),
        STORE_OK);
    store_close(st);
    st = open_at(path);
    assert_int_equal(store_worker_load(st, &w, &e), STORE_OK);
    assert_string_equal(w.worker_id, "pod-2");
    assert_string_equal(w.catalog_revision, "sha256:cd");
    assert_true(w.registered_at == 1300);
    store_worker_free(&w);
    store_worker_free(NULL);
    store_close(st);
}

static void test_full_lifecycle(void **state)
{
    (void)state;
    store *st = open_new("life", NULL, 0);
    store_err e = {0};
    seed_assignment(st, "a1", 3, 9e9, 2, "tool_eff");
    char s[64];
    assignment_status(st, "a1", s, sizeof s);
    assert_string_equal(s, "planned");

    const char *ids[] = {"a1-r0", "a1-r1", "nope"};
    size_t started = 0;
    assert_int_equal(store_runs_started(st, ids, 3, 2000, &started, &e), STORE_OK);
    assert_int_equal(started, 2);
    assert_string_equal(run_field(st, "a1-r0", "status", s, sizeof s), "running");

    const char *body0 = "{\"protocol_version\":\"2\",\"submission_id\":\"s0\",\"x\":\"\xc3\xa9\"}";
    store_run_result r0 = mk_result("a1-r0", "s0", 3, "succeeded", body0, 2001, 12);
    assert_int_equal(store_run_finished(st, &r0, &e), STORE_OK);
    /* a second result for the same run is refused: never two submissions */
    store_run_result r0b = mk_result("a1-r0", "s0b", 3, "failed", "{}", 2002, 1);
    assert_int_equal(store_run_finished(st, &r0b, &e), STORE_CONFLICT);
    assert_non_null(strstr(e.msg, "already has a result"));
    /* unknown run, bad status, duplicate submission id */
    store_run_result bad = mk_result("zz", "s9", 3, "succeeded", "{}", 2002, 1);
    assert_int_equal(store_run_finished(st, &bad, &e), STORE_NOTFOUND);
    bad = mk_result("a1-r1", "s9", 3, "weird", "{}", 2002, 1);
    assert_int_equal(store_run_finished(st, &bad, &e), STORE_INVALID);
    bad = mk_result("a1-r1", "s0", 3, "failed", "{}", 2002, 1);
    assert_int_equal(store_run_finished(st, &bad, &e), STORE_CONFLICT);
    assert_string_equal(run_field(st, "a1-r1", "status", s, sizeof s), "running");
    assert_int_equal(outbox_depth(st), 1);

    store_outbox_entry *ob = NULL;
    size_t n = 0;
    assert_int_equal(store_outbox_pending(st, 0, 0, &ob, &n, &e), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ob[0].body_len, strlen(body0));
    assert_memory_equal(ob[0].body, body0, strlen(body0));
    assert_string_equal(ob[0].submission_id, "s0");
    assert_string_equal(ob[0].run_id, "a1-r0");
    assert_string_equal(ob[0].assignment_id, "a1");
    assert_string_equal(ob[0].worker_id, "w1");
    assert_int_equal(ob[0].lease_generation, 3);
    assert_int_equal(ob[0].attempts, 0);
    store_outbox_free(ob, n);

    store_attempt retry = {.outcome = STORE_SUBMIT_RETRY,
                           .at = 2003,
                           .duration_ms = 5,
                           .http_status = 500,
                           .error_code = "internal_error",
                           .message = "boom",
                           .request_id = "rq1"};
    assert_int_equal(store_outbox_record(st, "s0", &retry, &e), STORE_OK);
    assert_int_equal(store_outbox_pending(st, 0, 10, &ob, &n, &e), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ob[0].attempts, 1);
    assert_non_null(strstr(ob[0].last_error, "internal_error"));
    assert_memory_equal(ob[0].body, body0, strlen(body0)); /* unchanged for the retry */
    store_outbox_free(ob, n);

    store_attempt ok = {.outcome = STORE_SUBMIT_COMMITTED, .at = 2004, .http_status = 200};
    assert_int_equal(store_outbox_record(st, "s0", &ok, &e), STORE_OK);
    assert_update(st, store_outbox_record(st, "s0", &ok, &e), STORE_NOTFOUND);
    assert_int_equal(outbox_depth(st), 0);
    assignment_status(st, "a1", s, sizeof s);
    assert_string_equal(s, "planned"); /* r1 still running */

    store_run_result r1 = mk_result("a1-r1", "s1", 3, "timed_out", "{\"b\":1}", 2005, 30000);
    r1.error_code = "eval_timeout";
    r1.error_message = "evaluation exceeded its configured timeout";
    assert_int_equal(store_run_finished(st, &r1, &e), STORE_OK);
    store_attempt rep = {.outcome = STORE_SUBMIT_REPLAYED, .at = 2006, .http_status = 200};
    assert_int_equal(store_outbox_record(st, "s1", &rep, &e), STORE_OK);
    assignment_status(st, "a1", s, sizeof s);
    assert_string_equal(s, "completed");

    /* run detail: results, error, timings and the two attempts of s0 */
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(store_run_get_json(st, "a1-r0", &b, &e), STORE_OK);
    json_t *j = parse(&b);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "succeeded");
    assert_string_equal(json_string_value(json_object_get(j, "submit_status")), "committed");
    assert_int_equal(json_integer_value(json_object_get(j, "duration_ms")), 12);
    assert_true(json_is_array(json_object_get(j, "results")));
    assert_true(json_is_object(json_object_get(j, "descriptor")));
    json_t *sub = json_object_get(j, "submission");
    assert_string_equal(json_string_value(json_object_get(sub, "submission_id")), "s0");
    json_t *att = json_object_get(sub, "attempts");
    assert_int_equal(json_array_size(att), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(att, 0), "outcome")),
                        "retry");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(att, 0), "http_status")),
                     500);
    assert_string_equal(json_string_value(json_object_get(json_array_get(att, 1), "outcome")),
                        "committed");
    assert_int_equal(json_integer_value(json_object_get(sub, "body_bytes")), strlen(body0));
    json_decref(j);
    strbuf_reset(&b);
    assert_int_equal(store_run_get_json(st, "a1-r1", &b, &e), STORE_OK);
    j = parse(&b);
    assert_string_equal(json_string_value(json_object_get(j, "error_code")), "eval_timeout");
    assert_string_equal(json_string_value(json_object_get(j, "submit_status")), "replayed");
    json_decref(j);
    strbuf_reset(&b);
    assert_int_equal(store_run_get_json(st, "missing", &b, &e), STORE_NOTFOUND);
    assert_int_equal(b.len, 0);

    /* assignment detail */
    assert_int_equal(store_assignment_get_json(st, "a1", &b, &e), STORE_OK);
    j = parse(&b);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "completed");
    assert_int_equal(json_array_size(json_object_get(j, "run_list")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "runs"), "finished")),
                     2);
    assert_true(json_is_object(json_object_get(j, "plan_request")));
    json_decref(j);
    strbuf_reset(&b);
    assert_int_equal(store_assignment_get_json(st, "nope", &b, &e), STORE_NOTFOUND);
    strbuf_free(&b);
    store_close(st);
}

/* The heartbeat history keeps every heartbeat's count, the first and last,
 * and only the last STORE_HEARTBEATS_KEPT with their outcome. */
static void test_heartbeat_history(void **state)
{
    (void)state;
    store *st = open_new("heartbeats", NULL, 0);
    store_err e = {0};
    seed_assignment(st, "a1", 3, 9e9, 1, "k");
    assert_int_equal(store_flush(st, NULL), STORE_OK); /* the admin reads do not wait */
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(store_assignment_get_json(st, "a1", &b, &e), STORE_OK);
    json_t *j = parse(&b);
    json_t *hb = json_object_get(j, "heartbeats");
    assert_int_equal(json_integer_value(json_object_get(hb, "count")), 0);
    assert_true(json_is_null(json_object_get(hb, "first_at")));
    assert_int_equal(json_array_size(json_object_get(hb, "recent")), 0);
    json_decref(j);
    int total = STORE_HEARTBEATS_KEPT + 5;
    for (int i = 0; i < total; i++) {
        int fail = i == total - 2, lost = i == total - 1;
        assert_update(st,
                      store_assignment_heartbeat(st, "a1", 3, 3000 + i,
                                                 lost   ? "lease_lost"
                                                 : fail ? "failed"
                                                        : "ok",
                                                 fail ? "internal_error" : NULL,
                                                 lost || fail ? 0 : 4000 + i, &e),
                      STORE_OK);
    }
    assert_update(st, store_assignment_heartbeat(st, "nope", 1, 3000, "ok", NULL, 0, &e),
                  STORE_NOTFOUND);
    strbuf_reset(&b);
    assert_int_equal(store_assignment_get_json(st, "a1", &b, &e), STORE_OK);
    j = parse(&b);
    hb = json_object_get(j, "heartbeats");
    assert_int_equal(json_integer_value(json_object_get(hb, "count")), total);
    assert_int_equal(json_integer_value(json_object_get(hb, "kept")), STORE_HEARTBEATS_KEPT);
    char want[64];
    assert_string_equal(json_string_value(json_object_get(hb, "first_at")),
                        time_rfc3339(3000, want, sizeof want));
    assert_string_equal(json_string_value(json_object_get(hb, "last_at")),
                        time_rfc3339(3000 + total - 1, want, sizeof want));
    json_t *recent = json_object_get(hb, "recent");
    assert_int_equal(json_array_size(recent), STORE_HEARTBEATS_KEPT);
    json_t *first = json_array_get(recent, 0);
    assert_string_equal(json_string_value(json_object_get(first, "at")),
                        time_rfc3339(3000 + total - STORE_HEARTBEATS_KEPT, want, sizeof want));
    assert_string_equal(json_string_value(json_object_get(first, "outcome")), "ok");
    assert_string_equal(json_string_value(json_object_get(first, "lease_expires_at")),
                        time_rfc3339(4000 + total - STORE_HEARTBEATS_KEPT, want, sizeof want));
    assert_int_equal(json_integer_value(json_object_get(first, "lease_generation")), 3);
    json_t *failed = json_array_get(recent, STORE_HEARTBEATS_KEPT - 2);
    assert_string_equal(json_string_value(json_object_get(failed, "outcome")), "failed");
    assert_string_equal(json_string_value(json_object_get(failed, "error_code")), "internal_error");
    assert_true(json_is_null(json_object_get(failed, "lease_expires_at")));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(recent, STORE_HEARTBEATS_KEPT - 1), "outcome")),
                        "lease_lost");
    json_decref(j);
    strbuf_free(&b);
    store_close(st);
}

static void test_fencing_and_reclaim(void **state)
{
    (void)state;
    store *st = open_new("fence", NULL, 0);
    store_err e = {0};
    seed_assignment(st, "a2", 5, 5000, 2, NULL);
    /* stale generations */
    assert_update(st, store_assignment_planned(st, "a2", 4, NULL, NULL, NULL, 0, NULL, 0, 1, &e),
                  STORE_STALE);
    assert_update(st, store_assignment_planned(st, "zz", 1, NULL, NULL, NULL, 0, NULL, 0, 1, &e),
                  STORE_NOTFOUND);
    assert_update(st, store_assignment_lease(st, "a2", 4, 6000, &e), STORE_STALE);
    assert_update(st, store_assignment_lease(st, "zz", 4, 6000, &e), STORE_NOTFOUND);
    assert_int_equal(store_assignment_lease(st, "a2", 5, 6000, &e), STORE_OK);
    store_claim old = {
        .assignment_id = "a2", .worker_id = "w1", .lease_generation = 4, .lease_expires_at = 1};
    assert_update(st, store_assignments_claimed(st, &old, 1, 1, &e), STORE_STALE);
    store_claim invalid = {.assignment_id = "a3", .worker_id = "w1", .lease_generation = 0};
    assert_int_equal(store_assignments_claimed(st, &invalid, 1, 1, &e), STORE_INVALID);

    /* r0 finished (pending), r1 running, then the sidecar was down past the lease */
    const char *ids[] = {"a2-r0", "a2-r1"};
    assert_int_equal(store_runs_started(st, ids, 2, 5100, NULL, &e), STORE_OK);
    store_run_result r0 = mk_result("a2-r0", "sub-a2-0", 5, "succeeded", "{\"g\":5}", 5200, 3);
    assert_int_equal(store_run_finished(st, &r0, &e), STORE_OK);

    store_assignment_state *ra = NULL;
    size_t n = 0;
    assert_int_equal(store_recoverable_assignments(st, 5500, 0, &ra, &n, &e), STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(ra[0].assignment_id, "a2");
    assert_int_equal(ra[0].lease_generation, 5);
    assert_true(ra[0].lease_expires_at == 6000);
    assert_int_equal(ra[0].n_runs, 2);
    assert_string_equal(ra[0].runs[0].submit_status, "pending");
    assert_string_equal(ra[0].runs[1].status, "running");
    assert_string_equal(ra[0].claim_json, "{\"x\":1}");
    assert_string_equal(ra[0].plan_response_json, "{\"r\":2}");
    store_assignments_free(ra, n);
    /* with a margin the lease is too short to resume */
    assert_int_equal(store_recoverable_assignments(st, 5500, 600, &ra, &n, &e), STORE_OK);
    assert_int_equal(n, 0);

    size_t dropped = 0;
    assert_int_equal(store_drop_expired(st, 5000, 0, &dropped, &e), STORE_OK);
    assert_int_equal(dropped, 0);
    assert_int_equal(store_drop_expired(st, 6001, 0, &dropped, &e), STORE_OK);
    assert_int_equal(dropped, 1);
    char s[64];
    assignment_status(st, "a2", s, sizeof s);
    assert_string_equal(s, "dropped");
    assert_string_equal(run_field(st, "a2-r1", "status", s, sizeof s), "abandoned");
    assert_int_equal(outbox_depth(st), 1); /* the result is kept */
    assert_int_equal(store_assignment_lease(st, "a2", 5, 7000, &e), STORE_OK); /* ignored */

    /* the server reclaims it to us at generation 6 and the plan is replayed */
    store_claim again = {
        .assignment_id = "a2", .worker_id = "w1", .lease_generation = 6, .lease_expires_at = 9000};
    assert_int_equal(store_assignments_claimed(st, &again, 1, 6100, &e), STORE_OK);
    assignment_status(st, "a2", s, sizeof s);
    assert_string_equal(s, "claimed");
    store_plan_run pr[2] = {{"a2-r0", "k", "1", "python", 30, NULL},
                            {"a2-r1", "k", "1", "python", 30, NULL}};
    assert_update(st, store_assignment_planned(st, "a2", 6, NULL, NULL, NULL, 0, pr, 2, 6200, &e),
                  STORE_OK);
    assert_string_equal(run_field(st, "a2-r1", "status", s, sizeof s), "planned");
    assert_string_equal(run_field(st, "a2-r0", "submit_status", s, sizeof s), "pending");
    /* the old-generation result is fenced by the server: rejected, recorded */
    store_attempt lost = {.outcome = STORE_SUBMIT_REJECTED,
                          .at = 6300,
                          .http_status = 409,
                          .error_code = "lease_lost",
                          .message = "no longer owned"};
    assert_update(st, store_outbox_record(st, "sub-a2-0", &lost, &e), STORE_OK);
    assert_string_equal(run_field(st, "a2-r0", "submit_status", s, sizeof s), "rejected");
    assert_int_equal(outbox_depth(st), 0);
    /* a re-plan under generation 6 makes it runnable again (its result was of gen 5) */
    assert_update(st, store_assignment_planned(st, "a2", 6, NULL, NULL, NULL, 0, pr, 2, 6400, &e),
                  STORE_OK);
    assert_string_equal(run_field(st, "a2-r0", "status", s, sizeof s), "planned");
    assert_string_equal(run_field(st, "a2-r0", "submit_status", s, sizeof s), "none");
    size_t started = 0;
    const char *ids2[] = {"a2-r0", "a2-r1"};
    assert_int_equal(store_runs_started(st, ids2, 2, 6500, &started, &e), STORE_OK);
    assert_int_equal(started, 2);

    /* lease lost: unfinished runs are abandoned; pending results stay */
    store_run_result r1 = mk_result("a2-r1", "sub-a2-1", 6, "failed", "{\"g\":6}", 6600, 3);
    assert_int_equal(store_run_finished(st, &r1, &e), STORE_OK);
    assert_int_equal(store_assignment_finish(st, "a2", 6, "bogus", NULL, NULL, 6700, &e),
                     STORE_INVALID);
    assert_update(st, store_assignment_finish(st, "a2", 5, "lost", NULL, NULL, 6700, &e),
                  STORE_STALE);
    assert_update(st, store_assignment_finish(st, "zz", 0, "lost", NULL, NULL, 6700, &e),
                  STORE_NOTFOUND);
    assert_update(st,
                  store_assignment_finish(st, "a2", 6, "lost", "lease_lost", "fenced", 6700, &e),
                  STORE_OK);
    assignment_status(st, "a2", s, sizeof s);
    assert_string_equal(s, "lost");
    assert_string_equal(run_field(st, "a2-r0", "status", s, sizeof s), "abandoned");
    assert_int_equal(outbox_depth(st), 1);
    assert_update(st, store_assignment_finish(st, "a2", 6, "failed", NULL, NULL, 6800, &e),
                  STORE_OK); /* already terminal: no-op */
    assignment_status(st, "a2", s, sizeof s);
    assert_string_equal(s, "lost");
    /* plans on terminal assignments are refused */
    assert_update(st, store_assignment_planned(st, "a2", 6, NULL, NULL, NULL, 0, pr, 2, 6900, &e),
                  STORE_CONFLICT);

    /* skipped plan */
    store_claim c3 = {
        .assignment_id = "a3", .worker_id = "w1", .lease_generation = 1, .lease_expires_at = 9000};
    assert_int_equal(store_assignments_claimed(st, &c3, 1, 7000, &e), STORE_OK);
    assert_int_equal(store_assignment_planned(st, "a3", 1, "[]", "{}", "{}", 1, NULL, 0, 7001, &e),
                     STORE_OK);
    assignment_status(st, "a3", s, sizeof s);
    assert_string_equal(s, "skipped");
    store_close(st);
}

static void test_evaluators_and_metrics_survive_restart(void **state)
{
    (void)state;
    char path[512];
    store *st = open_new("evm", path, sizeof path);
    store_err e = {0};
    assert_int_equal(store_evaluator_put(st, "judge", "{\"version\":\"1\"}", 30, 100, &e),
                     STORE_OK);
    assert_int_equal(store_evaluator_put(st, "plain", "{\"version\":\"2\"}", 0, 100, &e), STORE_OK);
    assert_int_equal(store_evaluator_put(st, "", "{}", 0, 100, &e), STORE_INVALID);
    assert_int_equal(store_evaluator_heartbeat(st, "judge", 120, &e), STORE_OK);
    assert_int_equal(store_evaluator_heartbeat(st, "ghost", 120, &e), STORE_NOTFOUND);
    assert_int_equal(store_metric_add(st, "runs_total", "status=\"succeeded\"", 2, &e), STORE_OK);
    assert_int_equal(store_metric_add(st, "runs_total", "status=\"succeeded\"", 3, &e), STORE_OK);
    store_metric m[2] = {{"claims_total", "", 7}, {"runs_total", "status=\"failed\"", 1}};
    assert_int_equal(store_metrics_save(st, m, 2, &e), STORE_OK);
    store_metric badm = {"x", "", NAN};
    assert_int_equal(store_metrics_save(st, &badm, 1, &e), STORE_INVALID);
    store_close(st);

    st = open_at(path);
    store_evaluator *ev = NULL;
    size_t n = 0;
    assert_int_equal(store_evaluator_list(st, &ev, &n, &e), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ev[0].name, "judge");
    assert_true(ev[0].expires_at == 150); /* the TTL keeps running from the last heartbeat */
    assert_true(ev[0].registered_at == 100);
    assert_true(ev[0].heartbeat_at == 120);
    assert_string_equal(ev[1].registration_json, "{\"version\":\"2\"}");
    assert_true(ev[1].expires_at == 0);
    store_evaluators_free(ev, n);
    assert_int_equal(store_evaluator_delete(st, "judge", &e), STORE_OK);
    assert_int_equal(store_evaluator_delete(st, "judge", &e), STORE_NOTFOUND);
    store_metric *ml = NULL;
    assert_int_equal(store_metrics_load(st, &ml, &n, &e), STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(ml[0].name, "claims_total");
    assert_true(ml[0].value == 7);
    assert_string_equal(ml[2].labels, "status=\"succeeded\"");
    assert_true(ml[2].value == 5);
    store_metrics_free(ml, n);
    store_close(st);
}

/* The process's counters go to the table and come back into the registry
 * after a restart (the daemon's schedule calls these two). */
static void test_registry_counters_persist_and_restore(void **state)
{
    (void)state;
    char path[512];
    store *st = open_new("reg", path, sizeof path);
    store_err e = {0};
    size_t seeded = 99;
    metrics_reset();
    assert_int_equal(store_metrics_restore(st, &seeded, &e), STORE_OK);
    assert_int_equal(seeded, 0);
    metrics_add(METRIC_SUBMISSIONS, 41, "outcome", "committed");
    metrics_inc(METRIC_LEASES_LOST);
    metrics_inc(METRIC_PROTOCOL_ERRORS, "call", "claim", "code", "we\"ird");
    metrics_gauge_set(METRIC_OUTBOX_DEPTH, 9); /* a gauge: never persisted */
    assert_int_equal(store_metrics_persist(st, &e), STORE_OK);
    metrics_add(METRIC_SUBMISSIONS, 1, "outcome", "committed");
    assert_int_equal(store_metrics_persist(st, &e), STORE_OK); /* absolute, not added */
    /* a saved row that is no longer a counter stays unseeded */
    assert_int_equal(store_metric_add(st, METRIC_OUTBOX_DEPTH, "", 5, &e), STORE_OK);
    store_close(st);

    metrics_reset();
    assert_true(metrics_value(METRIC_SUBMISSIONS, METRICS_LABELS_("outcome", "committed")) == 0.0);
    st = open_at(path);
    assert_int_equal(store_metrics_restore(st, &seeded, &e), STORE_OK);
    assert_int_equal(seeded, 3); /* the three counter series; not the gauge's row */
    store_metric *ml = NULL;
    size_t n = 0;
    assert_int_equal(store_metrics_load(st, &ml, &n, &e), STORE_OK);
    assert_int_equal(n, 4);
    store_metrics_free(ml, n);
    assert_true(metrics_value(METRIC_SUBMISSIONS, METRICS_LABELS_("outcome", "committed")) == 42.0);
    assert_true(metrics_value(METRIC_LEASES_LOST, NULL) == 1.0);
    assert_true(metrics_value(METRIC_PROTOCOL_ERRORS,
                              METRICS_LABELS_("code", "we\"ird", "call", "claim")) == 1.0);
    assert_true(metrics_value(METRIC_OUTBOX_DEPTH, NULL) == 0.0);
    store_close(st);
    metrics_reset();
}

static void test_pagination_and_filters(void **state)
{
    (void)state;
    store *st = open_new("page", NULL, 0);
    store_err e = {0};
    /* 30 assignments x 41 runs = 1230 runs; every third run succeeds */
    char aid[32];
    for (int a = 0; a < 30; a++) {
        snprintf(aid, sizeof aid, "as%02d", a);
        seed_assignment(st, aid, 1, 9e9, 41, a % 2 ? "odd_key" : "even_key");
        for (int r = 0; r < 41; r += 3) {
            char rid[64], sub[128];
            snprintf(rid, sizeof rid, "%s-r%d", aid, r);
            snprintf(sub, sizeof sub, "sub-%s", rid);
            store_run_result res = mk_result(rid, sub, 1, "succeeded", "{}", 3000, 5);
            assert_int_equal(store_run_finished(st, &res, &e), STORE_OK);
        }
    }
    strbuf b;
    strbuf_init(&b);
    /* page through everything with limit 100: no duplicates, newest first */
    int total = 0, pages = 0;
    char cursor[64] = "";
    char seen_last[64] = "";
    for (;;) {
        store_run_filter f = {.limit = 100, .cursor = cursor};
        strbuf_reset(&b);
        assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_OK);
        json_t *j = parse(&b);
        json_t *runs = json_object_get(j, "runs");
        total += (int)json_array_size(runs);
        pages++;
        if (pages == 1)
            assert_string_equal(json_string_value(json_object_get(json_array_get(runs, 0), "id")),
                                "as29-r40");
        if (json_array_size(runs))
            snprintf(seen_last, sizeof seen_last, "%s",
                     json_string_value(
                         json_object_get(json_array_get(runs, json_array_size(runs) - 1), "id")));
        json_t *nc = json_object_get(j, "next_cursor");
        if (json_is_null(nc)) {
            json_decref(j);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", json_string_value(nc));
        json_decref(j);
    }
    assert_int_equal(total, 30 * 41);
    assert_int_equal(pages, 13);
    assert_string_equal(seen_last, "as00-r0");

    /* filters */
    store_run_filter f = {.status = "succeeded", .limit = 500};
    strbuf_reset(&b);
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_OK);
    json_t *j = parse(&b);
    assert_int_equal(json_array_size(json_object_get(j, "runs")), 30 * 14);
    json_decref(j);
    f = (store_run_filter){.eval_key = "odd_key", .status = "planned", .limit = 500};
    strbuf_reset(&b);
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_OK);
    j = parse(&b);
    assert_int_equal(json_array_size(json_object_get(j, "runs")), 15 * 27);
    json_decref(j);
    f = (store_run_filter){.assignment_id = "as07", .limit = 10};
    strbuf_reset(&b);
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_OK);
    j = parse(&b);
    json_t *runs = json_object_get(j, "runs");
    assert_int_equal(json_array_size(runs), 10);
    for (size_t i = 0; i < 10; i++)
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(runs, i), "assignment_id")), "as07");
    assert_true(json_is_string(json_object_get(j, "next_cursor")));
    json_decref(j);
    /* invalid input is an error value naming the field, and writes nothing */
    strbuf_reset(&b);
    f = (store_run_filter){.status = "bogus"};
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_INVALID);
    assert_non_null(strstr(e.msg, "status"));
    f = (store_run_filter){.limit = 501};
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_INVALID);
    assert_non_null(strstr(e.msg, "limit"));
    f = (store_run_filter){.cursor = "12x"};
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_INVALID);
    assert_non_null(strstr(e.msg, "cursor"));
    f = (store_run_filter){.cursor = "99999999999999999999"};
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_INVALID);
    assert_int_equal(b.len, 0);

    /* assignments list */
    store_assignment_filter af = {.status = "active", .limit = 7};
    assert_int_equal(store_assignments_list_json(st, &af, &b, &e), STORE_OK);
    j = parse(&b);
    assert_int_equal(json_array_size(json_object_get(j, "assignments")), 7);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(j, "assignments"), 0), "id")),
                        "as29");
    char cur[32];
    snprintf(cur, sizeof cur, "%s", json_string_value(json_object_get(j, "next_cursor")));
    json_decref(j);
    strbuf_reset(&b);
    af.cursor = cur;
    af.limit = 500;
    assert_int_equal(store_assignments_list_json(st, &af, &b, &e), STORE_OK);
    j = parse(&b);
    assert_int_equal(json_array_size(json_object_get(j, "assignments")), 23);
    json_t *a0 = json_array_get(json_object_get(j, "assignments"), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(a0, "runs"), "total")), 41);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(a0, "runs"), "pending_submissions")),
        14);
    assert_true(json_is_null(json_object_get(j, "next_cursor")));
    json_decref(j);
    strbuf_reset(&b);
    af = (store_assignment_filter){.status = "completed"};
    assert_int_equal(store_assignments_list_json(st, &af, &b, &e), STORE_OK);
    j = parse(&b);
    assert_int_equal(json_array_size(json_object_get(j, "assignments")), 0);
    json_decref(j);
    strbuf_reset(&b);
    af = (store_assignment_filter){.status = "nope"};
    assert_int_equal(store_assignments_list_json(st, &af, &b, &e), STORE_INVALID);

    /* summary */
    strbuf_reset(&b);
    assert_int_equal(store_summary_json(st, &b, &e), STORE_OK);
    j = parse(&b);
    assert_int_equal(json_integer_value(json_object_get(j, "outbox_depth")), 30 * 14);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "runs"), "succeeded")),
                     30 * 14);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "assignments"), "planned")), 30);
    assert_true(json_integer_value(json_object_get(j, "db_bytes")) > 0);
    json_decref(j);
    strbuf_free(&b);
    store_close(st);
}

/* Every combination of the run filters, paged with a small limit, returns
 * exactly the rows of the unfiltered listing that match, in the same order
 * (the assignment filter forces its own index: this checks that the query
 * variants agree with each other). */
static void test_run_filter_combinations(void **state)
{
    (void)state;
    store *st = open_new("filters", NULL, 0);
    store_err e = {0};
    static const char *const keys[3] = {"k0", "k1", "k2"};
    for (int a = 0; a < 12; a++) {
        char aid[32];
        snprintf(aid, sizeof aid, "as%02d", a);
        seed_assignment(st, aid, 1, 9e9, 13, keys[a % 3]);
        for (int r = 0; r < 13; r += 3) {
            char rid[64], sub[128];
            snprintf(rid, sizeof rid, "%s-r%d", aid, r);
            snprintf(sub, sizeof sub, "sub-%s", rid);
            store_run_result res =
                mk_result(rid, sub, 1, r % 2 ? "failed" : "succeeded", "{}", 3000 + a, 5);
            assert_int_equal(store_run_finished(st, &res, &e), STORE_OK);
        }
    }
    strbuf b;
    strbuf_init(&b);
    store_run_filter all = {.limit = 500};
    assert_int_equal(store_runs_list_json(st, &all, &b, &e), STORE_OK);
    json_t *full = parse(&b);
    json_t *rows = json_object_get(full, "runs");
    assert_int_equal(json_array_size(rows), 12 * 13);
    static const char *const statuses[] = {"succeeded", "failed", "planned"};
    static const char *const asgs[] = {"as01", "as10", "as03"};
    for (int m = 1; m < 8; m++) {
        for (int v = 0; v < 3; v++) {
            const char *status = (m & 1) ? statuses[v] : NULL;
            const char *key = (m & 2) ? keys[(v + 1) % 3] : NULL;
            const char *asg = (m & 4) ? asgs[v] : NULL;
            /* expected: the matching rows of the full listing */
            const char *want[12 * 13];
            size_t nwant = 0;
            for (size_t i = 0; i < json_array_size(rows); i++) {
                json_t *r = json_array_get(rows, i);
#define FIELD(k) json_string_value(json_object_get(r, k))
                if ((!status || !strcmp(FIELD("status"), status)) &&
                    (!key || !strcmp(FIELD("eval_key"), key)) &&
                    (!asg || !strcmp(FIELD("assignment_id"), asg)))
                    want[nwant++] = FIELD("id");
#undef FIELD
            }
            size_t got = 0;
            char cursor[64] = "";
            for (int page = 0; page < 200; page++) {
                store_run_filter f = {status, key, asg, 2, cursor};
                strbuf_reset(&b);
                assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_OK);
                json_t *j = parse(&b);
                json_t *rs = json_object_get(j, "runs");
                for (size_t i = 0; i < json_array_size(rs); i++) {
                    assert_true(got < nwant);
                    assert_string_equal(
                        json_string_value(json_object_get(json_array_get(rs, i), "id")), want[got]);
                    got++;
                }
                json_t *nc = json_object_get(j, "next_cursor");
                int done = json_is_null(nc);
                if (!done) snprintf(cursor, sizeof cursor, "%s", json_string_value(nc));
                json_decref(j);
                if (done) break;
            }
            assert_int_equal(got, nwant);
        }
    }
    /* the combinations above are not all empty */
    store_run_filter f = {.status = "succeeded", .eval_key = "k1", .assignment_id = "as10"};
    strbuf_reset(&b);
    assert_int_equal(store_runs_list_json(st, &f, &b, &e), STORE_OK);
    json_t *j = parse(&b);
    assert_int_equal(json_array_size(json_object_get(j, "runs")), 3);
    json_decref(j);
    json_decref(full);
    strbuf_free(&b);
    store_close(st);
}

static void test_charts(void **state)
{
    (void)state;
    store *st = open_new("charts", NULL, 0);
    store_err e = {0};
    double now = 1800000000.0; /* minute-aligned */
    seed_assignment(st, "c1", 1, 9e9, 60, NULL);
    /* committed 7 at a time: a transaction adds up its own minute counts,
     * over statuses, latency buckets and both minutes (results 49..55) */
    char rid[7][32], sub[7][32];
    store_run_result rs[7];
    for (int i = 0, k = 0; i < 60; i++) {
        snprintf(rid[k], sizeof rid[k], "c1-r%d", i);
        snprintf(sub[k], sizeof sub[k], "cs%d", i);
        /* 50 in the previous minute with latencies 1..50 ms (10 of them failed), 10 in the
         * current minute at 1000 ms */
        double fin = i < 50 ? now - 30 : now + 10;
        const char *status = i < 50 ? (i % 5 == 0 ? "failed" : "succeeded") : "timed_out";
        rs[k] = mk_result(rid[k], sub[k], 1, status, "{}", fin, i < 50 ? i + 1 : 1000);
        if (++k == 7 || i == 59) {
            assert_int_equal(store_runs_finished(st, rs, (size_t)k, &e), STORE_OK);
            k = 0;
        }
    }
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(store_charts_json(st, now + 20, 0, &b, &e), STORE_OK);
    json_t *j = parse(&b);
    json_t *mins = json_object_get(j, "minutes");
    assert_int_equal(json_array_size(mins), 60);
    json_t *prev = json_array_get(mins, 58), *cur = json_array_get(mins, 59);
    assert_int_equal(json_integer_value(json_object_get(prev, "succeeded")), 40);
    assert_int_equal(json_integer_value(json_object_get(prev, "failed")), 10);
    assert_int_equal(json_integer_value(json_object_get(prev, "count")), 50);
    double p50 = json_number_value(json_object_get(prev, "p50_ms"));
    double p99 = json_number_value(json_object_get(prev, "p99_ms"));
    assert_true(p50 > 25 * 0.9 && p50 < 25 * 1.1);
    assert_true(p99 > 50 * 0.9 && p99 < 50 * 1.1);
    assert_int_equal(json_integer_value(json_object_get(cur, "timed_out")), 10);
    double cp = json_number_value(json_object_get(cur, "p90_ms"));
    assert_true(cp > 900 && cp < 1100);
    assert_true(json_is_null(json_object_get(json_array_get(mins, 0), "p50_ms")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(mins, 0), "count")), 0);
    json_decref(j);
    strbuf_reset(&b);
    assert_int_equal(store_charts_json(st, now, 5000, &b, &e), STORE_INVALID);
    strbuf_free(&b);
    store_close(st);
}

static void finish_and_commit(store *st, const char *aid, int nruns, double at)
{
    for (int i = 0; i < nruns; i++) {
        char rid[64], sub[128];
        snprintf(rid, sizeof rid, "%s-r%d", aid, i);
        snprintf(sub, sizeof sub, "sub-%s", rid);
        store_run_result r = mk_result(rid, sub, 1, "succeeded", "{}", at, 1);
        assert_int_equal(store_run_finished(st, &r, NULL), STORE_OK);
        store_attempt ok = {.outcome = STORE_SUBMIT_COMMITTED, .at = at};
        assert_int_equal(store_outbox_record(st, sub, &ok, NULL), STORE_OK);
    }
}

static int64_t count_rows(const char *path, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

/* With maintenance_interval_s the store prunes by itself, on its periodic
 * thread: runs beyond retention_runs go without anyone calling store_prune. */
static void test_maintenance_thread_prunes(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "maint");
    store_options o = {
        .path = path, .retention_runs = 10, .maintenance_interval_s = 1, .sync_updates = 1};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&o, &st, &e), STORE_OK);
    char aid[32];
    for (int a = 0; a < 6; a++) { /* 30 finished runs, 10 kept */
        snprintf(aid, sizeof aid, "m%d", a);
        seed_assignment(st, aid, 1, 9e9, 5, NULL);
        finish_and_commit(st, aid, 5, time_now() - 60);
    }
    /* wait for the condition (the first run is a second after open), with a
     * deadline far beyond it */
    store_stats ss = {0};
    int64_t deadline = time_mono_ms() + 60000;
    while (time_mono_ms() < deadline) {
        assert_int_equal(store_stats_get(st, time_now(), &ss, &e), STORE_OK);
        if (ss.rows_pruned >= 20) break;
        struct timespec ts = {0, 20L * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(ss.rows_pruned >= 20);
    store_close(st);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM runs"), 10);
}

static void test_prune(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "prune");
    store_options o = {.path = path, .retention_hours = 1, .retention_runs = 25, .sync_updates = 1};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&o, &st, &e), STORE_OK);
    double now = 1800000000.0;
    /* old: 3 completed assignments finished 2 h ago, 5 runs each */
    char aid[32];
    for (int a = 0; a < 3; a++) {
        snprintf(aid, sizeof aid, "old%d", a);
        seed_assignment(st, aid, 1, 9e9, 5, NULL);
        finish_and_commit(st, aid, 5, now - 7200);
    }
    /* an old one with a result still pending in the outbox: kept */
    seed_assignment(st, "oldpending", 1, 9e9, 1, NULL);
    store_run_result r = mk_result("oldpending-r0", "p0", 1, "succeeded", "{}", now - 7200, 1);
    assert_int_equal(store_run_finished(st, &r, &e), STORE_OK);
    assert_int_equal(
        store_assignment_finish(st, "oldpending", 1, "lost", NULL, NULL, now - 7200, &e), STORE_OK);
    /* recent: 8 completed assignments x 5 runs = 40 runs (above the 25 cap) */
    for (int a = 0; a < 8; a++) {
        snprintf(aid, sizeof aid, "new%d", a);
        seed_assignment(st, aid, 1, 9e9, 5, NULL);
        finish_and_commit(st, aid, 5, now - 60);
    }
    /* an active one: never pruned */
    seed_assignment(st, "active", 1, 9e9, 3, NULL);
    /* the finish times of assignments come from completion (time_now()); age them */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 2000);
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE assignments SET finished_at = %f WHERE id LIKE 'old%%';"
             "UPDATE assignments SET finished_at = %f WHERE id LIKE 'new%%'",
             now - 7200, now - 60);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    size_t rd = 0, ad = 0;
    assert_int_equal(store_prune(st, now, &rd, &ad, &e), STORE_OK);
    /* age: 15 old runs + 3 old assignments; count: 40 new + 1 pending + 3 active = 44 > 25,
     * but the pending and active ones are not prunable: delete 19 of the new, oldest first */
    assert_int_equal(rd, 15 + 19);
    store_stats ss;
    assert_int_equal(store_stats_get(st, now, &ss, &e), STORE_OK);
    assert_true(ss.rows_pruned >= rd + ad);
    assert_int_equal(ss.outbox_depth, 1);
    /* a month later everything finished has aged out but the unsent result and the
     * runs of the held lease */
    assert_int_equal(store_prune(st, now + 86400 * 30, &rd, &ad, &e), STORE_OK);
    assert_int_equal(rd, 25 - 4);
    store_close(st);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM runs"), 4);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM runs WHERE id='oldpending-r0'"), 1);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM runs WHERE assignment_id='active'"), 3);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM runs WHERE assignment_id='new7'"), 0);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM assignments WHERE id LIKE 'old_'"), 0);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM submit_attempts WHERE run_id LIKE "
                                      "'old_-%'"),
                     0);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM outbox"), 1);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM assignments WHERE id='active'"), 1);
}

static void test_migration_from_v1(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "migr");
    store_options o = {.path = path, .schema_target = 1};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&o, &st, &e), STORE_OK);
    assert_int_equal(store_schema_version(st), 1);
    store_close(st);
    assert_int_equal(count_rows(path, "PRAGMA user_version"), 1);
    assert_int_equal(
        count_rows(path, "SELECT count(*) FROM sqlite_schema WHERE name='submit_attempts'"), 0);
    /* a v1 database with history, as the first release wrote it */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(
            db,
            "INSERT INTO assignments(id, worker_id, lease_generation, lease_expires_at,"
            " status, claimed_at, finished_at, claim_json, plan_response_json)"
            " VALUES('v1a','w',2,100,'completed',10,20,'{\"c\":1}','{\"p\":2}');"
            "INSERT INTO runs(id, assignment_id, eval_key, eval_version, execution_mode,"
            " status, created_at, finished_at, duration_ms, submit_status, descriptor_json,"
            " results_json) VALUES"
            " ('v1r1','v1a','k','1','python','succeeded',10,6000.5,7,'committed',"
            " '{\"d\":3}','[4]'),"
            " ('v1r2','v1a','k','1','python','failed',10,6010,9,'committed',NULL,NULL);"
            "INSERT INTO outbox(submission_id, run_id, assignment_id, worker_id,"
            " lease_generation, body, created_at) VALUES('v1s','v1r3','v1a','w',2,"
            " CAST('{\"exact\":1}' AS BLOB),11);",
            NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    st = open_at(path);
    assert_int_equal(store_schema_version(st), store_schema_latest());
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(store_charts_json(st, 6030, 2, &b, &e), STORE_OK);
    json_t *j = parse(&b);
    json_t *m = json_array_get(json_object_get(j, "minutes"), 1);
    assert_int_equal(json_integer_value(json_object_get(m, "succeeded")), 1);
    assert_int_equal(json_integer_value(json_object_get(m, "failed")), 1);
    json_decref(j);
    strbuf_free(&b);
    /* the documents moved to their own tables (v4) and are intact */
    store_assignment_state as;
    assert_int_equal(store_assignment_load(st, "v1a", &as, &e), STORE_OK);
    assert_string_equal(as.claim_json, "{\"c\":1}");
    assert_string_equal(as.plan_response_json, "{\"p\":2}");
    assert_null(as.definitions_json);
    assert_int_equal(as.n_runs, 2);
    assert_string_equal(as.runs[0].descriptor_json, "{\"d\":3}");
    store_assignment_state_free(&as);
    strbuf_init(&b);
    assert_int_equal(store_run_get_json(st, "v1r1", &b, &e), STORE_OK);
    j = parse(&b);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "results"), 0)), 4);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "descriptor"), "d")), 3);
    json_decref(j);
    strbuf_free(&b);
    store_outbox_entry *ob = NULL;
    size_t n = 0;
    assert_int_equal(store_outbox_pending(st, 0, 0, &ob, &n, &e), STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(ob[0].body, "{\"exact\":1}");
    store_outbox_free(ob, n);
    store_close(st);
    assert_int_equal(count_rows(path, "PRAGMA user_version"), store_schema_latest());

    /* a database from a newer binary is refused, untouched */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    o = (store_options){.path = path};
    assert_int_equal(store_open(&o, &st, &e), STORE_SCHEMA);
    assert_null(st);
    assert_non_null(strstr(e.msg, "newer"));
    assert_int_equal(count_rows(path, "PRAGMA user_version"), 99);

    /* somebody else's SQLite file is refused */
    char other[512];
    make_path(other, sizeof other, "foreign");
    assert_int_equal(sqlite3_open(other, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    o.path = other;
    assert_int_equal(store_open(&o, &st, &e), STORE_CORRUPT);
}

static void test_corrupt_files(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "garbage");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 8192; i++)
        fputc("garbage!"[i % 8], f);
    fclose(f);
    store_options o = {.path = path};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&o, &st, &e), STORE_CORRUPT);
    assert_null(st);
    assert_non_null(strstr(e.msg, "store: "));

    /* a real store whose index pages are damaged: caught by the integrity check */
    make_path(path, sizeof path, "damaged");
    st = open_at(path);
    seed_assignment(st, "d1", 1, 9e9, 60, NULL);
    store_close(st);
    int64_t pages = count_rows(path, "PRAGMA page_count");
    assert_true(pages > 4);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    char junk[4000];
    memset(junk, 0x5a, sizeof junk);
    for (int64_t p = 1; p < pages; p++) /* every page but the header page */
        assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)(p * 4096) + 50), sizeof junk);
    close(fd);
    o.path = path;
    int rc = store_open(&o, &st, &e);
    assert_int_equal(rc, STORE_CORRUPT);
    assert_null(st);
}

static void test_locked_database(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "locked");
    /* another connection holds an exclusive lock on a (rollback journal) database */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE x(y); BEGIN EXCLUSIVE; INSERT INTO x VALUES(1)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    store_options o = {.path = path, .busy_timeout_ms = 100};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&o, &st, &e), STORE_BUSY);
    assert_null(st);
    assert_non_null(strstr(e.msg, "locked"));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);

    /* a second sidecar on the same file is refused while the first runs */
    make_path(path, sizeof path, "twice");
    store *first = open_at(path);
    o.path = path;
    assert_int_equal(store_open(&o, &st, &e), STORE_BUSY);
    assert_non_null(strstr(e.msg, "another sidecar"));
    store_close(first);
    st = open_at(path);
    store_close(st);

    /* a writer holding the WAL write lock past the busy timeout: a clear BUSY error
     * from an operation, and the store keeps working afterwards */
    make_path(path, sizeof path, "walbusy");
    st = open_at(path);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(store_metric_add(st, "m", "", 1, &e), STORE_BUSY);
    assert_non_null(strstr(e.msg, "add metric"));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(store_metric_add(st, "m", "", 1, &e), STORE_OK);
    store_close(st);
}

/* Runs fn in a child (optionally as an unprivileged user) and returns its exit status. */
static int in_child(void (*fn)(const char *), const char *arg, int drop_root)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (drop_root && geteuid() == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(99);
        }
        fn(arg);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void child_open_expect_readonly(const char *path)
{
    store_options o = {.path = path};
    store *st = NULL;
    store_err e = {0};
    int rc = store_open(&o, &st, &e);
    if (rc != STORE_READONLY || st != NULL || !strstr(e.msg, path)) {
        fprintf(stderr, "expected readonly, got %d: %s\n", rc, e.msg);
        _exit(1);
    }
    _exit(0);
}

static void test_read_only(void **state)
{
    (void)state;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/ro-%d", g_dir, ++g_seq);
    assert_int_equal(mkdir(dir, 0777), 0);
    chmod(dir, 0777);
    snprintf(path, sizeof path, "%s/ro.db", dir);
    store *st = open_at(path);
    store_close(st);
    chmod(path, 0444);
    /* root ignores file modes: the check runs as an unprivileged user then */
    assert_int_equal(in_child(child_open_expect_readonly, path, 1), 0);
    /* a read-only directory (the WAL cannot be created) */
    char dir2[512], path2[600];
    snprintf(dir2, sizeof dir2, "%s/rodir-%d", g_dir, ++g_seq);
    assert_int_equal(mkdir(dir2, 0777), 0);
    snprintf(path2, sizeof path2, "%s/x.db", dir2);
    chmod(dir2, 0555);
    assert_int_equal(in_child(child_open_expect_readonly, path2, 1), 0);
    chmod(dir2, 0755);
}

/* A full disk, simulated the way SQLite's own tests do: a VFS shim over "unix"
 * whose writes fail with SQLITE_FULL (what the unix VFS reports on ENOSPC)
 * while g_disk_full is 1, SQLITE_READONLY (a file system remounted read-only,
 * which root cannot test for real) while it is 2. It also keeps the largest
 * size any WAL file reached (g_wal_peak). Installed as the default VFS in a
 * child only. */
static int g_disk_full;
static int64_t g_wal_peak; /* the furthest byte written to a WAL file (atomic) */
static sqlite3_vfs *g_real_vfs;
static sqlite3_vfs g_full_vfs;

typedef struct {
    sqlite3_file base;
    sqlite3_file *real;
    int is_wal;
} shim_file;

#define REAL(f) (((shim_file *)(f))->real)
static int sh_close(sqlite3_file *f)
{
    int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
    return rc;
}
static int sh_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int sh_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
    if (g_disk_full) return g_disk_full == 2 ? SQLITE_READONLY : SQLITE_FULL;
    int64_t end = o + n, peak = __atomic_load_n(&g_wal_peak, __ATOMIC_RELAXED);
    while (((shim_file *)f)->is_wal && end > peak &&
           !__atomic_compare_exchange_n(&g_wal_peak, &peak, end, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int sh_truncate(sqlite3_file *f, sqlite3_int64 sz)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), sz);
}
static int sh_sync(sqlite3_file *f, int fl)
{
    return REAL(f)->pMethods->xSync(REAL(f), fl);
}
static int sh_size(sqlite3_file *f, sqlite3_int64 *sz)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), sz);
}
static int sh_lock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int sh_unlock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int sh_reserved(sqlite3_file *f, int *o)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), o);
}
static int sh_fcntl(sqlite3_file *f, int op, void *a)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, a);
}
static int sh_sector(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int sh_devchar(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int sh_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, pp);
}
static int sh_shmlock(sqlite3_file *f, int o, int n, int fl)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), o, n, fl);
}
static void sh_shmbarrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int sh_shmunmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int sh_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp)
{
    return REAL(f)->pMethods->xFetch(REAL(f), o, n, pp);
}
static int sh_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), o, p);
}
static const sqlite3_io_methods g_shim_io = {
    3,          sh_close,      sh_read,     sh_write, sh_truncate, sh_sync,    sh_size,
    sh_lock,    sh_unlock,     sh_reserved, sh_fcntl, sh_sector,   sh_devchar, sh_shmmap,
    sh_shmlock, sh_shmbarrier, sh_shmunmap, sh_fetch, sh_unfetch};

static int sh_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)v;
    shim_file *sf = (shim_file *)f;
    sf->real = (sqlite3_file *)(sf + 1);
    sf->is_wal = (flags & SQLITE_OPEN_WAL) != 0;
    int rc = g_real_vfs->xOpen(g_real_vfs, name, sf->real, flags, out);
    sf->base.pMethods = rc == SQLITE_OK ? &g_shim_io : NULL;
    return rc;
}

static void install_full_vfs(void)
{
    g_real_vfs = sqlite3_vfs_find("unix");
    g_full_vfs = *g_real_vfs;
    g_full_vfs.zName = "fullfs";
    g_full_vfs.szOsFile = (int)sizeof(shim_file) + g_real_vfs->szOsFile;
    g_full_vfs.xOpen = sh_open;
    sqlite3_vfs_register(&g_full_vfs, 1);
}

static void child_fill_disk(const char *path)
{
    install_full_vfs();
    store_options o = {.path = path};
    store *st = NULL;
    store_err e = {0};
    /* a full disk at start: refuse to start */
    g_disk_full = 1;
    int rc = store_open(&o, &st, &e);
    if (rc != STORE_FULL || st) {
        fprintf(stderr, "expected full at open, got %d: %s\n", rc, e.msg);
        _exit(9);
    }
    g_disk_full = 0;
    if (store_open(&o, &st, &e) != STORE_OK) _exit(10);
    seed_assignment(st, "full", 1, 9e9, 1, NULL);
    /* the disk fills up: a result cannot be stored: a clear FULL error, nothing half-stored */
    size_t big = 1 << 20;
    char *body = malloc(big + 1);
    memset(body, 'x', big);
    body[big] = '\0';
    store_run_result r = mk_result("full-r0", "fs0", 1, "succeeded", body, 2000, 1);
    g_disk_full = 1;
    rc = store_run_finished(st, &r, &e);
    if (rc != STORE_FULL) {
        fprintf(stderr, "expected full, got %d: %s\n", rc, e.msg);
        _exit(12);
    }
    if (!strstr(e.msg, "save result") || !strstr(e.msg, "no space")) _exit(13);
    g_disk_full = 0;
    int64_t d = -1;
    if (store_outbox_depth(st, &d, NULL) != STORE_OK || d != 0) _exit(14);
    /* space is back: the same result is stored */
    if (store_run_finished(st, &r, &e) != STORE_OK) {
        fprintf(stderr, "after full: %s\n", e.msg);
        _exit(15);
    }
    free(body);
    store_close(st);
    _exit(0);
}

static void test_full_disk(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "full");
    assert_int_equal(in_child(child_fill_disk, path, 0), 0);
}

static void child_crash_after_result(const char *path)
{
    store *st = open_at(path);
    seed_assignment(st, "k1", 1, 9e9, 1, NULL);
    const char *body = "{\"crash\":\"exact bytes \\u00e9\"}";
    store_run_result r = mk_result("k1-r0", "ks0", 1, "succeeded", body, 2000, 1);
    if (store_run_finished(st, &r, NULL) != STORE_OK) _exit(1);
    /* the process dies right after the durable point, before any submit */
    raise(SIGKILL);
}

static void test_crash_keeps_result(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "crash");
    assert_int_equal(in_child(child_crash_after_result, path, 0), 128 + SIGKILL);
    store *st = open_at(path);
    store_outbox_entry *ob = NULL;
    size_t n = 0;
    assert_int_equal(store_outbox_pending(st, 0, 0, &ob, &n, NULL), STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(ob[0].body, "{\"crash\":\"exact bytes \\u00e9\"}");
    assert_string_equal(ob[0].submission_id, "ks0");
    store_outbox_free(ob, n);
    store_close(st);
}

typedef struct {
    store *st;
    int id;
    int failures;
} worker_arg;

static void *writer_thread(void *p)
{
    worker_arg *w = p;
    for (int a = 0; a < 25; a++) {
        char aid[32];
        snprintf(aid, sizeof aid, "t%d-a%d", w->id % 100, a % 1000);
        store_claim c = {.assignment_id = aid,
                         .worker_id = "w1",
                         .lease_generation = 1,
                         .lease_expires_at = 9e9};
        if (store_assignments_claimed(w->st, &c, 1, 1, NULL) != STORE_OK) w->failures++;
        char rid[3][40];
        store_plan_run pr[3];
        const char *ids[3];
        for (int i = 0; i < 3; i++) {
            snprintf(rid[i], sizeof rid[i], "%s-r%d", aid, i);
            pr[i] = (store_plan_run){rid[i], "k", "1", "python", 30, NULL};
            ids[i] = rid[i];
        }
        if (store_assignment_planned(w->st, aid, 1, NULL, NULL, NULL, 0, pr, 3, 2, NULL))
            w->failures++;
        if (store_runs_started(w->st, ids, 3, 3, NULL, NULL)) w->failures++;
        for (int i = 0; i < 3; i++) {
            char sub[128];
            snprintf(sub, sizeof sub, "s-%s", rid[i]);
            store_run_result r = mk_result(rid[i], sub, 1, "succeeded", "{}", 4, 1);
            if (store_run_finished(w->st, &r, NULL)) w->failures++;
            store_attempt ok = {.outcome = STORE_SUBMIT_COMMITTED, .at = 5};
            if (store_outbox_record(w->st, sub, &ok, NULL)) w->failures++;
        }
    }
    return NULL;
}

static void *reader_thread(void *p)
{
    worker_arg *w = p;
    strbuf b;
    strbuf_init(&b);
    for (int i = 0; i < 150; i++) {
        store_run_filter f = {.limit = 100, .status = i % 2 ? "succeeded" : NULL};
        strbuf_reset(&b);
        if (store_runs_list_json(w->st, &f, &b, NULL) != STORE_OK) w->failures++;
        json_t *j = json_loadb(b.data, b.len, 0, NULL);
        if (!j) w->failures++;
        json_decref(j);
        int64_t d;
        if (store_outbox_depth(w->st, &d, NULL)) w->failures++;
    }
    strbuf_free(&b);
    return NULL;
}

static void run_concurrency(const char *path)
{
    store_options o = {.path = path,
                       .read_connections = 2,
                       .maintenance_interval_s = 1,
                       .retention_runs = 1000000};
    store *st = NULL;
    assert_int_equal(store_open(&o, &st, NULL), STORE_OK);
    pthread_t th[6];
    worker_arg args[6];
    for (int i = 0; i < 6; i++) {
        args[i] = (worker_arg){st, i, 0};
        pthread_create(&th[i], NULL, i < 4 ? writer_thread : reader_thread, &args[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(store_flush(st, NULL), STORE_OK); /* deferred records (default mode) */
    assert_int_equal(store_summary_json(st, &b, NULL), STORE_OK);
    json_t *j = parse(&b);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "assignments"), "completed")), 100);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "runs"), "succeeded")),
                     300);
    assert_int_equal(json_integer_value(json_object_get(j, "outbox_depth")), 0);
    json_decref(j);
    strbuf_free(&b);
    store_close(st);
}

static void test_concurrency_file(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "conc");
    run_concurrency(path);
}

static void test_concurrency_memory(void **state)
{
    (void)state;
    run_concurrency(":memory:");
}

static void test_batch_finish_all_or_nothing(void **state)
{
    (void)state;
    store *st = open_new("batch", NULL, 0);
    store_err e = {0};
    seed_assignment(st, "b1", 1, 9e9, 3, NULL);
    store_run_result rs[3] = {mk_result("b1-r0", "bs0", 1, "succeeded", "{}", 10, 1),
                              mk_result("b1-r1", "bs1", 1, "succeeded", "{}", 10, 1),
                              mk_result("b1-r1", "bs2", 1, "succeeded", "{}", 10, 1)};
    assert_int_equal(store_runs_finished(st, rs, 3, &e), STORE_CONFLICT);
    assert_int_equal(outbox_depth(st), 0);
    rs[2].run_id = "b1-r2";
    assert_int_equal(store_runs_finished(st, rs, 3, &e), STORE_OK);
    assert_int_equal(outbox_depth(st), 3);
    store_outbox_entry *ob = NULL;
    size_t n = 0;
    assert_int_equal(store_outbox_pending(st, 0, 2, &ob, &n, &e), STORE_OK);
    assert_int_equal(n, 2);
    int64_t after = ob[1].seq;
    store_outbox_free(ob, n);
    assert_int_equal(store_outbox_pending(st, after, 2, &ob, &n, &e), STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(ob[0].submission_id, "bs2");
    store_outbox_free(ob, n);
    /* the asynchronous form: committed at once, durable after the wait */
    seed_assignment(st, "b2", 1, 9e9, 1, NULL);
    store_run_result ra = mk_result("b2-r0", "bs3", 1, "succeeded", "{\"async\":1}", 10, 1);
    uint64_t ticket = 0;
    assert_int_equal(store_run_finished_async(st, &ra, &ticket, &e), STORE_OK);
    assert_true(ticket > 0);
    assert_int_equal(outbox_depth(st), 4);
    assert_int_equal(store_durable_wait(st, ticket, &e), STORE_OK);
    assert_int_equal(store_durable_wait(st, ticket, &e), STORE_OK);
    assert_int_equal(store_run_finished_async(st, &ra, &ticket, &e), STORE_CONFLICT);
    store_attempt rej = {.outcome = STORE_SUBMIT_REJECTED,
                         .at = 11,
                         .http_status = 404,
                         .error_code = "run_not_found",
                         .message = "gone"};
    assert_update(st, store_outbox_record(st, "bs0", &rej, &e), STORE_OK);
    char s[64];
    assert_string_equal(run_field(st, "b1-r0", "submit_status", s, sizeof s), "rejected");
    store_attempt bad = {.outcome = 0};
    assert_int_equal(store_outbox_record(st, "bs1", &bad, &e), STORE_INVALID);
    store_close(st);
}

static store *open_deferred(const char *path, int defer_ms)
{
    store_options o = {.path = path, .defer_ms = defer_ms};
    store *st = NULL;
    store_err e = {0};
    assert_int_equal(store_open(&o, &st, &e), STORE_OK);
    return st;
}

static void test_deferred_updates(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "deferred");
    store *st = open_deferred(path, 10000); /* the flusher waits long: we drive it */
    store_err e = {0};
    seed_assignment(st, "q1", 2, 9e9, 2, NULL);
    /* claims and plans are deferred too: admin reads see them after a flush */
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(store_run_get_json(st, "q1-r0", &b, &e), STORE_NOTFOUND);
    strbuf_free(&b);
    assert_int_equal(store_flush(st, &e), STORE_OK);
    const char *ids[] = {"q1-r0", "q1-r1"};
    assert_int_equal(store_runs_started(st, ids, 2, 50, NULL, &e), STORE_OK);
    char s[64];
    /* admin JSON reads do not wait for the queue */
    assert_string_equal(run_field(st, "q1-r0", "status", s, sizeof s), "planned");
    /* worker-facing reads do */
    store_assignment_state a;
    assert_int_equal(store_assignment_load(st, "q1", &a, &e), STORE_OK);
    assert_string_equal(a.runs[0].status, "running");
    assert_string_equal(a.runs[1].status, "running");
    store_assignment_state_free(&a);
    /* a write applies the queue first, in order */
    assert_int_equal(store_assignment_lease(st, "q1", 2, 9.5e9, &e), STORE_OK);
    assert_int_equal(store_assignment_lease(st, "q1", 1, 1, &e), STORE_OK); /* stale: logged */
    store_run_result r = mk_result("q1-r0", "qs0", 2, "succeeded", "{}", 60, 1);
    assert_int_equal(store_run_finished(st, &r, &e), STORE_OK);
    assert_int_equal(store_assignment_load(st, "q1", &a, &e), STORE_OK);
    assert_true(a.lease_expires_at == 9.5e9);
    store_assignment_state_free(&a);
    store_attempt ok = {.outcome = STORE_SUBMIT_COMMITTED, .at = 61, .http_status = 200};
    assert_int_equal(store_outbox_record(st, "qs0", &ok, &e), STORE_OK);
    assert_int_equal(store_outbox_record(st, "nope", &ok, &e), STORE_OK); /* logged */
    store_attempt bad = {.outcome = 42};
    assert_int_equal(store_outbox_record(st, "qs0", &bad, &e), STORE_INVALID);
    assert_string_equal(run_field(st, "q1-r0", "submit_status", s, sizeof s), "pending");
    assert_int_equal(outbox_depth(st), 0); /* flushed first */
    assert_string_equal(run_field(st, "q1-r0", "submit_status", s, sizeof s), "committed");
    /* n_started asks for a count: applied at once */
    size_t n = 9;
    assert_int_equal(store_runs_started(st, ids, 2, 70, &n, &e), STORE_OK);
    assert_int_equal(n, 1);
    store_close(st);

    /* the flusher thread applies the queue by itself within defer_ms */
    st = open_deferred(path, 20);
    r = mk_result("q1-r1", "qs1", 2, "failed", "{}", 80, 1);
    assert_int_equal(store_run_finished(st, &r, &e), STORE_OK);
    assert_int_equal(store_outbox_record(st, "qs1", &ok, &e), STORE_OK);
    for (int i = 0; i < 200; i++) {
        if (!strcmp(run_field(st, "q1-r1", "submit_status", s, sizeof s), "committed")) break;
        usleep(10000);
    }
    assert_string_equal(s, "committed");
    assert_int_equal(store_assignment_load(st, "q1", &a, &e), STORE_OK);
    assert_string_equal(a.status, "completed");
    store_assignment_state_free(&a);
    /* and store_close applies what is left */
    seed_assignment(st, "q2", 1, 9e9, 1, NULL);
    const char *id2[] = {"q2-r0"};
    assert_int_equal(store_runs_started(st, id2, 1, 90, NULL, &e), STORE_OK);
    store_close(st);
    assert_int_equal(count_rows(path, "SELECT count(*) FROM runs WHERE id='q2-r0' AND "
                                      "status='running'"),
                     1);
}

static void child_crash_before_deferred_record(const char *path)
{
    store *st = open_deferred(path, 10000);
    seed_assignment(st, "z1", 1, 9e9, 1, NULL);
    store_run_result r = mk_result("z1-r0", "zs0", 1, "succeeded", "{\"z\":1}", 2000, 1);
    if (store_run_finished(st, &r, NULL) != STORE_OK) _exit(1);
    store_attempt ok = {.outcome = STORE_SUBMIT_COMMITTED, .at = 2001, .http_status = 200};
    if (store_outbox_record(st, "zs0", &ok, NULL) != STORE_OK) _exit(2);
    raise(SIGKILL); /* the committed outcome was only queued */
}

static void test_crash_loses_only_idempotent_updates(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "crashq");
    assert_int_equal(in_child(child_crash_before_deferred_record, path, 0), 128 + SIGKILL);
    store *st = open_at(path);
    /* the result is still pending: it will be resent, byte-identical, and answered
     * idempotent_replay; nothing was lost and nothing can be duplicated */
    store_outbox_entry *ob = NULL;
    size_t n = 0;
    assert_int_equal(store_outbox_pending(st, 0, 0, &ob, &n, NULL), STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(ob[0].body, "{\"z\":1}");
    store_outbox_free(ob, n);
    store_close(st);
}

static int64_t file_bytes(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

/* Polls pred(st) every 10 ms until it holds; the bound only keeps a broken
 * build from hanging the suite. */
static int eventually(int (*pred)(store *), store *st)
{
    for (int i = 0; i < 6000; i++) {
        if (pred(st)) return 1;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return pred(st);
}

/* Commits n results of `size` bytes each, one assignment per result. */
static void write_results(store *st, const char *prefix, int n, size_t size)
{
    char *body = malloc(size + 1);
    assert_non_null(body);
    memset(body, 'w', size);
    body[size] = '\0';
    for (int i = 0; i < n; i++) {
        char aid[64], rid[80], sub[80];
        snprintf(aid, sizeof aid, "%s%d", prefix, i);
        snprintf(rid, sizeof rid, "%s-r0", aid);
        snprintf(sub, sizeof sub, "%s-s", aid);
        seed_assignment(st, aid, 1, 9e9, 1, NULL);
        store_run_result r = mk_result(rid, sub, 1, "succeeded", body, 2000, 1);
        store_err e = {0};
        assert_int_equal(store_run_finished(st, &r, &e), STORE_OK);
    }
    free(body);
}

/* Opens path with the given WAL high-water mark (the bound is twice it),
 * checkpoint wait and maintenance interval (0: the defaults), in the mode
 * under test; NULL (with the reason on stderr) on failure. */
static store *open_wal(const char *path, int64_t high_water, int ckpt_wait_ms, int maintenance_s)
{
    store_options o = {.path = path,
                       .sync_updates = g_sync_updates,
                       .wal_high_water_bytes = high_water,
                       .ckpt_wait_ms = ckpt_wait_ms,
                       .maintenance_interval_s = maintenance_s};
    store *st = NULL;
    store_err e = {0};
    if (store_open(&o, &st, &e) != STORE_OK) fprintf(stderr, "open %s: %s\n", path, e.msg);
    return st;
}

static store *open_bounded(const char *path, int64_t high_water)
{
    /* a wait long enough that the checkpoint always wins it here */
    store *st = open_wal(path, high_water, 60000, 0);
    assert_non_null(st);
    return st;
}

/* Under a stream of commits the checkpoint copies the WAL into the database
 * and keeps the WAL file under twice its high-water mark. */
static void test_checkpoint_bounds_wal(void **state)
{
    (void)state;
    char path[512], wal[600];
    make_path(path, sizeof path, "ckpt");
    snprintf(wal, sizeof wal, "%s-wal", path);
    const int64_t hw = 1 << 20;
    store *st = open_bounded(path, hw);
    int64_t db0 = file_bytes(path), wal_max = 0;
    for (int round = 0; round < 40; round++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "c%d-", round);
        write_results(st, prefix, 4, (size_t)64 * 1024);
        int64_t w = file_bytes(wal);
        if (w > wal_max) wal_max = w;
    }
    store_stats ss;
    assert_int_equal(store_stats_get(st, 3000, &ss, NULL), STORE_OK);
    assert_true(ss.checkpoints > 0);
    assert_int_equal(ss.checkpoints_blocked, 0);
    assert_int_equal(ss.outbox_depth, 160);
    assert_true(ss.oldest_unsent_age_s > 0);
    assert_true(ss.db_bytes > db0 + 8 * hw); /* ~10 MiB of results reached the database */
    assert_true(wal_max <= 2 * hw);
    store_close(st);
}

static int wal_small(store *st)
{
    store_stats ss;
    return store_stats_get(st, 0, &ss, NULL) == STORE_OK && ss.wal_bytes < (1 << 20);
}

static int ckpt_blocked(store *st)
{
    store_stats ss;
    return store_stats_get(st, 0, &ss, NULL) == STORE_OK && ss.checkpoints_blocked > 0;
}

/* A read snapshot held open (here by another connection, as another process
 * would) blocks the high-water checkpoint: it is counted; once the reader
 * lets go the WAL is truncated. */
static void test_checkpoint_blocked_by_reader(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "ckblk");
    store_options o = {.path = path,
                       .sync_updates = g_sync_updates,
                       .wal_high_water_bytes = 1 << 20,
                       .ckpt_wait_ms = 50};
    store *st = NULL;
    assert_int_equal(store_open(&o, &st, NULL), STORE_OK);
    write_results(st, "pre", 1, 1000);
    sqlite3 *reader = NULL;
    assert_int_equal(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM runs", NULL, NULL, NULL),
                     SQLITE_OK);
    write_results(st, "blk", 24, (size_t)64 * 1024); /* 1.5 MiB past the snapshot */
    assert_true(eventually(ckpt_blocked, st));
    assert_int_equal(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(reader);
    write_results(st, "post", 1, 1000);
    assert_true(eventually(wal_small, st));
    store_close(st);
}

static int writes_work(store *st)
{
    return store_write_blocked(st) == 0;
}

/* Writes failing for want of space (SQLITE_FULL) or permission
 * (SQLITE_READONLY) mark the store blocked, committed rows stay, and the
 * store's own probe clears the mark once writes work again. */
static void child_writes_blocked(const char *path)
{
    install_full_vfs();
    store_options o = {.path = path, .sync_updates = g_sync_updates};
    store *st = NULL;
    store_err e = {0};
    if (store_open(&o, &st, &e) != STORE_OK) _exit(2);
    seed_assignment(st, "kept", 1, 9e9, 1, NULL);
    store_run_result kept = mk_result("kept-r0", "kept-s", 1, "succeeded", "{}", 2000, 1);
    if (store_run_finished(st, &kept, &e) != STORE_OK) _exit(3);
    const int modes[2][2] = {{1, STORE_FULL}, {2, STORE_READONLY}};
    for (int m = 0; m < 2; m++) {
        char aid[32], rid[40], sub[40];
        snprintf(aid, sizeof aid, "blk%d", m);
        snprintf(rid, sizeof rid, "%s-r0", aid);
        snprintf(sub, sizeof sub, "%s-s", aid);
        seed_assignment(st, aid, 1, 9e9, 1, NULL);
        if (store_flush(st, &e) != STORE_OK) _exit(4);
        g_disk_full = modes[m][0];
        store_run_result r = mk_result(rid, sub, 1, "succeeded", "{\"x\":1}", 2000, 1);
        int rc = store_run_finished(st, &r, &e);
        if (rc != modes[m][1]) {
            fprintf(stderr, "mode %d: expected %d, got %d: %s\n", m, modes[m][1], rc, e.msg);
            _exit(10 + m);
        }
        if (store_write_blocked(st) != modes[m][1]) _exit(20 + m);
        store_stats ss;
        if (store_stats_get(st, 3000, &ss, &e) != STORE_OK || ss.write_blocked != modes[m][1] ||
            ss.outbox_depth != 1 + m)
            _exit(30 + m);
        g_disk_full = 0;
        if (!eventually(writes_work, st)) _exit(40 + m);
        if (store_run_finished(st, &r, &e) != STORE_OK) _exit(50 + m);
    }
    int64_t d = -1;
    if (store_outbox_depth(st, &d, NULL) != STORE_OK || d != 3) _exit(60);
    store_close(st);
    _exit(0);
}

static void test_writes_blocked_and_recovered(void **state)
{
    (void)state;
    char path[512];
    make_path(path, sizeof path, "blocked");
    assert_int_equal(in_child(child_writes_blocked, path, 0), 0);
}

/* A database created without incremental vacuum is converted in place at
 * open (there is room for the full VACUUM here); its rows are kept. */
static void test_vacuum_migration(void **state)
{
    (void)state;
    char path[512];
    store *st = open_new("vac", path, sizeof path);
    write_results(st, "v", 3, 1000);
    store_close(st);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA auto_vacuum=NONE; VACUUM", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(count_rows(path, "PRAGMA auto_vacuum"), 0);
    st = open_at(path);
    store_stats ss;
    assert_int_equal(store_stats_get(st, 3000, &ss, NULL), STORE_OK);
    assert_int_equal(ss.vacuum_pending, 0);
    assert_int_equal(ss.outbox_depth, 3);
    store_close(st);
    assert_int_equal(count_rows(path, "PRAGMA auto_vacuum"), 2);
}

/* An integer PRAGMA of the database at path, read on a connection of its
 * own; -1 on error (for children, which report by exit code). */
static int64_t pragma_at(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t v = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static int vacuum_done(store *st)
{
    store_stats ss;
    return store_stats_get(st, 0, &ss, NULL) == STORE_OK && !ss.vacuum_pending;
}

/* The store's log line whose message contains `msg`, parsed; NULL if none. */
static json_t *log_line(FILE *logf, const char *msg)
{
    fflush(logf);
    rewind(logf);
    char line[4096];
    json_t *found = NULL;
    while (!found && fgets(line, sizeof line, logf)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *m = json_string_value(json_object_get(j, "msg"));
        if (m && strstr(m, msg))
            found = j;
        else
            json_decref(j);
    }
    fseek(logf, 0, SEEK_END);
    return found;
}

/* Takes all but `leave` bytes of the file system's free space into a filler
 * file. Returns 0 on success. */
static int fill_leaving(const char *dir, const char *filler, int64_t leave)
{
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0) return -1;
    int64_t take = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize - leave;
    int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || take <= 0) return -1;
    int rc = posix_fallocate(fd, 0, take);
    close(fd);
    return rc;
}

static FILE *g_logf; /* the child's captured log */

static int logged(const char *msg)
{
    json_t *l = log_line(g_logf, msg);
    json_decref(l);
    return l != NULL;
}

static int wal_deferral_logged(store *st)
{
    (void)st;
    return logged("would pass its bound");
}

/* An old database at path: the store's schema with 24 results of 64 KiB,
 * then auto_vacuum turned off as before incremental vacuum. Its size, or -1. */
static int64_t make_old_db(const char *path)
{
    store_options o = {.path = path, .sync_updates = g_sync_updates};
    store *st = NULL;
    if (store_open(&o, &st, NULL) != STORE_OK) return -1;
    write_results(st, "old", 24, (size_t)64 * 1024);
    store_close(st);
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "PRAGMA auto_vacuum=NONE; VACUUM", NULL, NULL, NULL);
    sqlite3_close(db);
    if (rc != SQLITE_OK || pragma_at(path, "PRAGMA auto_vacuum") != 0) return -1;
    return file_bytes(path);
}

/* A maintenance pass every second; NULL on failure. */
static store *open_vacuum(const char *path, int64_t high_water)
{
    return open_wal(path, high_water, 0, 1);
}

/* Databases created without incremental vacuum, on a small tmpfs in a
 * private mount namespace whose free space a filler file takes, through the
 * VFS shim that keeps the WAL's largest size:
 * 1. Too little free space at open: the conversion is deferred and logged
 *    with the figures (never attempted), and the store works meanwhile. Once
 *    the filler is gone the next maintenance pass converts it through the
 *    WAL (the rewrite fits under the WAL's bound), keeping every row.
 * 2. The same with a WAL bound smaller than the rewrite: once space returns
 *    the pass defers again, for the WAL's bound; the next start converts it
 *    through a rollback journal. The WAL never passes its bound. */
static void child_vacuum_deferred(const char *dir)
{
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, "size=16m") != 0) {
        fprintf(stderr, "private tmpfs at %s: %s\n", dir, strerror(errno));
        _exit(2);
    }
    install_full_vfs();
    char path[600], path2[600], filler[600];
    snprintf(path, sizeof path, "%s/old.db", dir);
    snprintf(path2, sizeof path2, "%s/old2.db", dir);
    snprintf(filler, sizeof filler, "%s/filler", dir);
    int64_t db_bytes = make_old_db(path);
    if (db_bytes < (1 << 20) || make_old_db(path2) != db_bytes) _exit(3);
    g_logf = tmpfile();
    if (!g_logf) _exit(4);
    log_set_stream(g_logf);

    /* 1: room for the store's own writes, not for a second copy */
    const int64_t hw1 = 2 << 20;
    if (fill_leaving(dir, filler, db_bytes / 2 + (512 << 10)) != 0) _exit(5);
    __atomic_store_n(&g_wal_peak, 0, __ATOMIC_RELAXED);
    store *st = open_vacuum(path, hw1);
    store_stats ss;
    if (!st || store_stats_get(st, 3000, &ss, NULL) != STORE_OK || !ss.vacuum_pending) _exit(6);
    json_t *l = log_line(g_logf, "full VACUUM");
    const char *m = json_string_value(json_object_get(l, "msg"));
    json_int_t need = json_integer_value(json_object_get(l, "needs_free_bytes"));
    json_int_t avail = json_integer_value(json_object_get(l, "free_bytes"));
    if (!m || !strstr(m, "deferred") || !strstr(m, "not enough free space") ||
        strcmp(json_string_value(json_object_get(l, "db")), path) != 0 ||
        json_integer_value(json_object_get(l, "db_bytes")) < db_bytes / 2 || need <= avail ||
        avail <= 0) {
        fprintf(stderr, "deferral not logged as expected: %s\n", m ? m : "no line");
        _exit(7);
    }
    json_decref(l);
    if (pragma_at(path, "PRAGMA auto_vacuum") != 0) _exit(8);
    write_results(st, "new", 4, 1000); /* the store works meanwhile */
    if (store_stats_get(st, 3000, &ss, NULL) != STORE_OK || !ss.vacuum_pending ||
        ss.outbox_depth != 28 || ss.write_blocked)
        _exit(9);
    if (logged("full VACUUM failed")) _exit(10); /* deferred, never attempted */
    if (unlink(filler) != 0 || !eventually(vacuum_done, st)) _exit(11);
    l = log_line(g_logf, "converted to incremental vacuum");
    if (!l || strcmp(json_string_value(json_object_get(l, "through")), "write-ahead log") != 0)
        _exit(12);
    json_decref(l);
    if (store_stats_get(st, 3000, &ss, NULL) != STORE_OK || ss.outbox_depth != 28) _exit(13);
    store_close(st);
    if (pragma_at(path, "PRAGMA auto_vacuum") != 2 ||
        pragma_at(path, "SELECT count(*) FROM runs") != 28)
        _exit(14);
    if (__atomic_load_n(&g_wal_peak, __ATOMIC_RELAXED) > 2 * hw1) _exit(15);

    /* 2: a WAL bound (256 KiB) smaller than the rewrite (the database's size) */
    const int64_t hw2 = 128 << 10;
    if (fill_leaving(dir, filler, db_bytes / 2 + (512 << 10)) != 0) _exit(20);
    fclose(g_logf); /* a log of its own */
    g_logf = tmpfile();
    if (!g_logf) _exit(21);
    log_set_stream(g_logf);
    __atomic_store_n(&g_wal_peak, 0, __ATOMIC_RELAXED);
    st = open_vacuum(path2, hw2);
    if (!st || !logged("not enough free space")) _exit(22);
    if (unlink(filler) != 0 || !eventually(wal_deferral_logged, st)) _exit(23);
    if (store_stats_get(st, 3000, &ss, NULL) != STORE_OK || !ss.vacuum_pending) _exit(24);
    if (pragma_at(path2, "PRAGMA auto_vacuum") != 0) _exit(25);
    store_close(st);
    st = open_vacuum(path2, hw2); /* the next start */
    if (!st || store_stats_get(st, 3000, &ss, NULL) != STORE_OK || ss.vacuum_pending) _exit(26);
    l = log_line(g_logf, "converted to incremental vacuum");
    if (!l || strcmp(json_string_value(json_object_get(l, "through")), "rollback journal") != 0)
        _exit(27);
    json_decref(l);
    write_results(st, "after", 2, 1000);
    store_close(st);
    if (pragma_at(path2, "PRAGMA auto_vacuum") != 2 ||
        pragma_at(path2, "SELECT count(*) FROM runs") != 26)
        _exit(28);
    int64_t peak = __atomic_load_n(&g_wal_peak, __ATOMIC_RELAXED);
    if (peak > 2 * hw2) {
        fprintf(stderr, "the WAL reached %lld bytes (bound %lld)\n", (long long)peak,
                (long long)2 * hw2);
        _exit(29);
    }
    log_set_stream(NULL);
    fclose(g_logf);
    _exit(0);
}

static void test_vacuum_deferred(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/vacfs-%d", g_dir, ++g_seq);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(in_child(child_vacuum_deferred, dir, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_fresh_and_reopen),
        cmocka_unit_test(test_worker_registration),
        cmocka_unit_test(test_full_lifecycle),
        cmocka_unit_test(test_heartbeat_history),
        cmocka_unit_test(test_fencing_and_reclaim),
        cmocka_unit_test(test_evaluators_and_metrics_survive_restart),
        cmocka_unit_test(test_registry_counters_persist_and_restore),
        cmocka_unit_test(test_pagination_and_filters),
        cmocka_unit_test(test_run_filter_combinations),
        cmocka_unit_test(test_charts),
        cmocka_unit_test(test_prune),
        cmocka_unit_test(test_maintenance_thread_prunes),
        cmocka_unit_test(test_migration_from_v1),
        cmocka_unit_test(test_corrupt_files),
        cmocka_unit_test(test_locked_database),
        cmocka_unit_test(test_read_only),
        cmocka_unit_test(test_full_disk),
        cmocka_unit_test(test_crash_keeps_result),
        cmocka_unit_test(test_concurrency_file),
        cmocka_unit_test(test_concurrency_memory),
        cmocka_unit_test(test_batch_finish_all_or_nothing),
        cmocka_unit_test(test_deferred_updates),
        cmocka_unit_test(test_crash_loses_only_idempotent_updates),
        cmocka_unit_test(test_checkpoint_bounds_wal),
        cmocka_unit_test(test_checkpoint_blocked_by_reader),
        cmocka_unit_test(test_writes_blocked_and_recovered),
        cmocka_unit_test(test_vacuum_migration),
        cmocka_unit_test(test_vacuum_deferred),
    };
    g_sync_updates = 1;
    int failed = cmocka_run_group_tests_name("store, sync updates", tests, setup_dir, teardown_dir);
    g_sync_updates = 0;
    failed +=
        cmocka_run_group_tests_name("store, deferred updates", tests, setup_dir, teardown_dir);
    return failed;
}
