/* emulator/handlers_claim: POST /v1/evaluator/assignments/claim. Checks the
 * worker's catalog revision against its instance's registration
 * (catalog_mismatch), returns expired leases to the queue (or dead-letters
 * them), and leases up to `capacity` assignments (at most claim_limit) with
 * generation + 1 and attempts + 1. O(capacity + expired) per call. */
#include "common/timeutil.h"
#include "emulator/emu_internal.h"

#include <stdio.h>
#include <string.h>

void emu_h_claim(emu_req *r, json_t *body)
{
    emulator *e = r->e;
    fps_err err;
    const char *worker_id, *revision;
    long long capacity;
    if (emu_v_string(body, "worker_id", NULL, &worker_id, &err) ||
        emu_v_bounded(worker_id, "worker_id", 128, &err) ||
        emu_v_no_control(worker_id, "worker_id", &err) ||
        emu_v_string(body, "catalog_revision", NULL, &revision, &err) ||
        emu_v_int(body, "capacity", NULL, &capacity, &err)) {
        emu_reply_error(r, "invalid_request", "%s", err.msg);
        return;
    }
    if (capacity < 1 || capacity > EMU_MAX_CAPACITY) {
        emu_reply_error(r, "invalid_request", "capacity must be between 1 and %d",
                        EMU_MAX_CAPACITY);
        return;
    }
    json_t *list = json_array();
    pthread_mutex_lock(&e->mu);
    emu_instance *inst = r->inst;
    if (!inst->registered) {
        pthread_mutex_unlock(&e->mu);
        json_decref(list);
        emu_reply_error(r, "catalog_mismatch",
                        "this evaluator instance has not registered a catalog; register first");
        return;
    }
    if (strcmp(revision, inst->catalog_revision) != 0) {
        pthread_mutex_unlock(&e->mu);
        json_decref(list);
        emu_reply_error(r, "catalog_mismatch",
                        "catalog_revision %.80s does not match the registered catalog %s; "
                        "register again",
                        revision, inst->catalog_revision);
        return;
    }
    double now = time_now();
    emu_state_sweep(e, now);
    long limit = capacity;
    if (e->claim_limit > 0 && e->claim_limit < limit) limit = e->claim_limit;
    char expires[40];
    for (long i = 0; i < limit; i++) {
        emu_assignment *a = emu_state_pop_available(e);
        if (a == NULL) break;
        a->generation++;
        a->attempts++;
        a->lease_expires = now + (double)e->lease_seconds;
        snprintf(a->worker_id, sizeof a->worker_id, "%s", worker_id);
        a->instance = inst;
        if (!a->planned) emu_definitions_for(e, a, inst);
        emu_state_set_status(e, a, a->planned ? AS_PLANNED : AS_LEASED);
        emu_state_heap_push(e, a);
        time_rfc3339(a->lease_expires, expires, sizeof expires);
        char url_t[128], url_d[128];
        snprintf(url_t, sizeof url_t, "/v1/evaluator/assignments/%s/transcript", a->id);
        snprintf(url_d, sizeof url_d, "/v1/evaluator/assignments/%s/definitions", a->id);
        json_t *s = a->session;
        json_array_append_new(
            list,
            json_pack("{s:s, s:I, s:s, s:O, s:O, s:O, s:O, s:s, s:I, s:s, s:s}", "assignment_id",
                      a->id, "lease_generation", (json_int_t)a->generation, "lease_expires_at",
                      expires, "session_id", json_object_get(s, "session_id"),
                      "session_revision_id", json_object_get(s, "session_revision_id"), "agent_id",
                      json_object_get(s, "agent_id"), "environment",
                      json_object_get(s, "environment"), "trigger_reason", "agent_end",
                      "event_count", (json_int_t)a->event_count, "transcript_url", url_t,
                      "definitions_url", url_d));
    }
    pthread_mutex_unlock(&e->mu);
    emu_reply_json(
        r, 200,
        json_pack("{s:s, s:o}", "protocol_version", EMU_PROTOCOL_VERSION, "assignments", list));
}
