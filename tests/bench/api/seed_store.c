/* tests/bench/api/seed_store: fills a sidecar database with N finished runs
 * (N/10 assignments x 10 runs, mixed statuses and eval keys, each with a
 * result body in the outbox history) through the store API, so the admin API
 * benchmark queries a realistic table. Usage: seed_store DB N */
#include "common/timeutil.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: seed_store DB N\n");
        return 2;
    }
    long n = atol(argv[2]);
    store *st = NULL;
    store_err e = {0};
    store_options o = {.path = argv[1], .durability_process_only = 1};
    if (store_open(&o, &st, &e) != STORE_OK) {
        fprintf(stderr, "seed_store: %s\n", e.msg);
        return 1;
    }
    static const char *statuses[] = {"succeeded", "succeeded", "succeeded", "failed", "timed_out"};
    static const char *keys[] = {"helpfulness", "tool_errors", "latency", "safety", "cost",
                                 "grounding",   "tone",        "length",  "format", "refusals"};
    double now = time_now() - 3000;
    for (long a = 0; a < n / 10; a++) {
        char aid[64], wid[] = "bench-worker";
        snprintf(aid, sizeof aid, "asg-%08ld", a);
        store_claim c = {.assignment_id = aid,
                         .worker_id = wid,
                         .lease_generation = 1,
                         .lease_expires_at = now + 120,
                         .session_id = aid,
                         .event_count = 40};
        if (store_assignments_claimed(st, &c, 1, now, &e) != STORE_OK) goto fail;
        store_plan_run pr[10];
        char rid[10][64];
        for (int i = 0; i < 10; i++) {
            snprintf(rid[i], sizeof rid[i], "run-%08ld-%d", a, i);
            pr[i] = (store_plan_run){rid[i], keys[i], "1", i < 7 ? "python" : "local", 30, NULL};
        }
        if (store_assignment_planned(st, aid, 1, NULL, NULL, NULL, 0, pr, 10, now, &e) != STORE_OK)
            goto fail;
        const char *ids[10];
        for (int i = 0; i < 10; i++)
            ids[i] = rid[i];
        if (store_runs_started(st, ids, 10, now, NULL, &e) != STORE_OK) goto fail;
        store_run_result rr[10];
        char sub[10][64], body[10][512];
        for (int i = 0; i < 10; i++) {
            const char *status = statuses[(a + i) % 5];
            snprintf(sub[i], sizeof sub[i], "sub-%08ld-%d", a, i);
            snprintf(body[i], sizeof body[i],
                     "{\"protocol_version\":\"2\",\"status\":\"%s\",\"results\":[{\"result_key\":"
                     "\"%s\",\"result_kind\":\"score\",\"numeric_value\":0.5}]}",
                     status, keys[i]);
            rr[i] =
                (store_run_result){.run_id = rid[i],
                                   .status = status,
                                   .started_at = now,
                                   .finished_at = now + 0.02,
                                   .duration_ms = 20 + i,
                                   .summary = "ok",
                                   .results_json = "[]",
                                   .error_code = strcmp(status, "succeeded") ? "eval_error" : NULL,
                                   .submission_id = sub[i],
                                   .worker_id = wid,
                                   .lease_generation = 1,
                                   .body = body[i],
                                   .body_len = strlen(body[i])};
        }
        if (store_runs_finished(st, rr, 10, &e) != STORE_OK) goto fail;
        for (int i = 0; i < 10; i++) {
            store_attempt at = {STORE_SUBMIT_COMMITTED, now, 3, 200, NULL, NULL, NULL};
            if (store_outbox_record(st, sub[i], &at, &e) != STORE_OK) goto fail;
        }
        now += 0.03;
    }
    store_close(st);
    return 0;
fail:
    fprintf(stderr, "seed_store: %s\n", e.msg);
    store_close(st);
    return 1;
}
