/* emulator/handlers_register: POST /v1/evaluator/workers/register. Validates
 * the worker and its catalog of local definitions, checks catalog_revision
 * against the definitions sent (SPEC §2 step 1), stores the catalog on the
 * token's evaluator instance and answers the timing and limits in force. */
#include "emulator/emu_internal.h"

#include <stdio.h>
#include <string.h>

void emu_h_register(emu_req *r, json_t *body)
{
    emulator *e = r->e;
    fps_err err;
    const char *worker_id, *sdk_version, *revision;
    long long max_conc;
    json_t *defs;
    if (emu_v_string(body, "worker_id", NULL, &worker_id, &err) ||
        emu_v_bounded(worker_id, "worker_id", 128, &err) ||
        emu_v_no_control(worker_id, "worker_id", &err) ||
        emu_v_string(body, "sdk_version", NULL, &sdk_version, &err) ||
        emu_v_string(body, "catalog_revision", NULL, &revision, &err) ||
        emu_v_int(body, "max_concurrency", NULL, &max_conc, &err) ||
        emu_v_array(body, "definitions", NULL, &defs, &err)) {
        emu_reply_error(r, "invalid_request", "%s", err.msg);
        return;
    }
    if (max_conc < 1 || max_conc > EMU_MAX_CAPACITY) {
        emu_reply_error(r, "invalid_request", "max_concurrency must be between 1 and %d",
                        EMU_MAX_CAPACITY);
        return;
    }
    size_t n = json_array_size(defs);
    if (n > EMU_MAX_DEFINITIONS) {
        emu_reply_error(r, "invalid_catalog", "definitions has %zu entries; maximum is %d", n,
                        EMU_MAX_DEFINITIONS);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char ctx[32];
        snprintf(ctx, sizeof ctx, "definitions[%zu]", i);
        json_t *d = json_array_get(defs, i);
        if (!json_is_object(d)) {
            emu_reply_error(r, "invalid_catalog", "%s must be an object", ctx);
            return;
        }
        if (emu_validate_catalog_entry(d, ctx, &err) != 0) {
            emu_reply_error(r, "invalid_catalog", "%s", err.msg);
            return;
        }
        const char *key = json_string_value(json_object_get(d, "eval_key"));
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(key,
                        json_string_value(json_object_get(json_array_get(defs, j), "eval_key")))) {
                emu_reply_error(r, "invalid_catalog", "duplicate eval key: %s", key);
                return;
            }
        }
    }
    /* The reference hashes labels as the definitions carry them (already
     * sorted by its authoring API); SPEC states them sorted. Accept either. */
    char as_sent[72], sorted[72];
    if (emulator_catalog_revision(defs, 0, as_sent) != 0 ||
        emulator_catalog_revision(defs, 1, sorted) != 0) {
        emu_reply_error(r, "invalid_catalog", "definitions cannot be canonicalized");
        return;
    }
    if (strcmp(revision, as_sent) != 0 && strcmp(revision, sorted) != 0) {
        emu_reply_error(r, "invalid_catalog",
                        "catalog_revision %.80s does not match the definitions sent (expected %s)",
                        revision, sorted);
        return;
    }
    json_t *catalog = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(defs, i);
        json_array_append_new(catalog, json_pack("{s:O, s:O, s:O, s:O, s:O}", "eval_key",
                                                 json_object_get(d, "eval_key"), "display_name",
                                                 json_object_get(d, "display_name"), "eval_version",
                                                 json_object_get(d, "eval_version"), "result_kind",
                                                 json_object_get(d, "result_kind"), "labels",
                                                 json_object_get(d, "labels")));
    }
    long claim_limit = e->claim_limit > 0 ? e->claim_limit : (long)max_conc;
    pthread_mutex_lock(&e->mu);
    emu_instance *inst = r->inst;
    json_decref(inst->catalog);
    inst->catalog = catalog;
    snprintf(inst->catalog_revision, sizeof inst->catalog_revision, "%s", revision);
    inst->registered = 1;
    json_t *resp = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:O}", "protocol_version",
                             EMU_PROTOCOL_VERSION, "evaluator_instance_id", inst->instance_id,
                             "evaluator_kind", inst->kind == INST_MANAGED ? "managed" : "customer",
                             "heartbeat_interval_seconds", (json_int_t)e->heartbeat_seconds,
                             "lease_duration_seconds", (json_int_t)e->lease_seconds,
                             "poll_interval_seconds", (json_int_t)e->poll_seconds, "claim_limit",
                             (json_int_t)claim_limit, "disabled_definitions", e->disabled);
    pthread_mutex_unlock(&e->mu);
    emu_reply_json(r, 200, resp);
}
