/* emulator/handlers_heartbeat: POST /v1/evaluator/runs/heartbeat. The runs
 * named identify their assignments; each must still be leased by this
 * worker at this generation (else 409 lease_lost). A planned assignment's
 * lease is extended by lease_seconds; the answer lists the named runs the
 * server still wants (known and not yet terminal). */
#include "common/timeutil.h"
#include "emulator/emu_internal.h"

#include <stdio.h>
#include <string.h>

void emu_h_heartbeat(emu_req *r, json_t *body)
{
    emulator *e = r->e;
    fps_err err;
    const char *worker_id;
    long long gen;
    json_t *runs;
    if (emu_v_string(body, "worker_id", NULL, &worker_id, &err) ||
        emu_v_pos_int(body, "lease_generation", NULL, &gen, &err) ||
        emu_v_array(body, "runs", NULL, &runs, &err)) {
        emu_reply_error(r, "invalid_request", "%s", err.msg);
        return;
    }
    size_t n = json_array_size(runs);
    if (n == 0) {
        emu_reply_error(r, "invalid_request", "runs must not be empty");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_array_get(runs, i);
        char ctx[32];
        snprintf(ctx, sizeof ctx, "runs[%zu]", i);
        const char *s;
        int has;
        double progress;
        if (!json_is_object(item)) {
            emu_reply_error(r, "invalid_request", "%s must be an object", ctx);
            return;
        }
        if (emu_v_string(item, "evaluation_run_id", ctx, &s, &err) ||
            emu_v_string(item, "state", ctx, &s, &err) ||
            emu_v_opt_number(item, "progress", ctx, &has, &progress, &err)) {
            emu_reply_error(r, "invalid_request", "%s", err.msg);
            return;
        }
        if (has && (progress < 0 || progress > 1)) {
            emu_reply_error(r, "invalid_request", "%s.progress must be finite and between 0 and 1",
                            ctx);
            return;
        }
    }
    pthread_mutex_lock(&e->mu);
    emu_run *first = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *id =
            json_string_value(json_object_get(json_array_get(runs, i), "evaluation_run_id"));
        emu_run *run = emu_map_get(&e->runs_by_id, id);
        if (run == NULL) continue;
        if (first == NULL) first = run;
        /* Fence each distinct assignment once. */
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            emu_run *o = emu_map_get(
                &e->runs_by_id,
                json_string_value(json_object_get(json_array_get(runs, j), "evaluation_run_id")));
            seen = o != NULL && o->a == run->a;
        }
        if (!seen && emu_fence(r, run->a, worker_id, (long)gen, 1) != 0) goto unlock;
    }
    if (first == NULL) {
        emu_reply_error(r, "run_not_found", "none of the runs in this heartbeat exists");
        goto unlock;
    }
    double now = time_now();
    json_t *accepted = json_array();
    for (size_t i = 0; i < n; i++) {
        emu_run *run = emu_map_get(
            &e->runs_by_id,
            json_string_value(json_object_get(json_array_get(runs, i), "evaluation_run_id")));
        if (run == NULL || run->committed) continue;
        emu_assignment *a = run->a;
        if (a->status == AS_PLANNED && a->lease_expires < now + (double)e->lease_seconds) {
            a->lease_expires = now + (double)e->lease_seconds;
            emu_state_heap_push(e, a);
        }
        json_array_append_new(accepted, json_string(run->id));
    }
    char expires[40];
    time_rfc3339(first->a->lease_expires, expires, sizeof expires);
    emu_reply_json(r, 200,
                   json_pack("{s:s, s:s, s:o}", "protocol_version", EMU_PROTOCOL_VERSION,
                             "lease_expires_at", expires, "accepted_run_ids", accepted));
unlock:
    pthread_mutex_unlock(&e->mu);
}
