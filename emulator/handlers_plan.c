/* emulator/handlers_plan: POST .../assignments/{id}/plan. Fenced; the first
 * plan must cover every definition of the assignment exactly once
 * (incomplete_plan), creates one run per selected definition and makes the
 * assignment "planned" (or "skipped" when nothing was selected). Any later
 * plan, from this lease or a later one, replays the first: idempotent_replay
 * true, with the runs that are not yet terminal (so a reclaiming worker never
 * re-runs a committed result). */
#include "emulator/emu_internal.h"

#include <stdio.h>
#include <string.h>

static int def_index(json_t *defs, const char *key, const char *version)
{
    for (size_t i = 0; i < json_array_size(defs); i++) {
        json_t *d = json_array_get(defs, i);
        if (!strcmp(key, json_string_value(json_object_get(d, "eval_key"))) &&
            !strcmp(version, json_string_value(json_object_get(d, "eval_version"))))
            return (int)i;
    }
    return -1;
}

static json_t *plan_response(emu_assignment *a, int replay)
{
    json_t *runs = json_array();
    for (size_t i = 0; i < a->nruns; i++)
        if (!replay || !a->runs[i]->committed) json_array_append(runs, a->runs[i]->wire);
    return json_pack("{s:s, s:s, s:s, s:b, s:o}", "protocol_version", EMU_PROTOCOL_VERSION,
                     "assignment_id", a->id, "assignment_status", emu_status_name(a->status),
                     "idempotent_replay", replay, "runs", runs);
}

void emu_h_plan(emu_req *r, json_t *body, const char *assignment_id)
{
    emulator *e = r->e;
    fps_err err;
    const char *worker_id;
    long long gen;
    json_t *selected, *skipped;
    if (emu_v_string(body, "worker_id", NULL, &worker_id, &err) ||
        emu_v_pos_int(body, "lease_generation", NULL, &gen, &err) ||
        emu_v_array(body, "selected", NULL, &selected, &err) ||
        emu_v_array(body, "skipped", NULL, &skipped, &err)) {
        emu_reply_error(r, "invalid_request", "%s", err.msg);
        return;
    }
    size_t ns = json_array_size(selected), nk = json_array_size(skipped);
    for (size_t i = 0; i < ns + nk; i++) {
        int sel = i < ns;
        json_t *item = sel ? json_array_get(selected, i) : json_array_get(skipped, i - ns);
        char ctx[32];
        snprintf(ctx, sizeof ctx, "%s[%zu]", sel ? "selected" : "skipped", sel ? i : i - ns);
        const char *s;
        if (!json_is_object(item)) {
            emu_reply_error(r, "invalid_request", "%s must be an object", ctx);
            return;
        }
        if (emu_v_string(item, "eval_key", ctx, &s, &err) ||
            emu_v_string(item, "eval_version", ctx, &s, &err) ||
            (!sel && emu_v_string(item, "reason_code", ctx, &s, &err))) {
            emu_reply_error(r, "invalid_request", "%s", err.msg);
            return;
        }
        if (!sel) {
            char f[64];
            snprintf(f, sizeof f, "%s.reason_code", ctx);
            if (emu_v_bounded(s, f, 64, &err) != 0) {
                emu_reply_error(r, "invalid_request", "%s", err.msg);
                return;
            }
        }
    }
    pthread_mutex_lock(&e->mu);
    emu_assignment *a = emu_map_get(&e->assignments_by_id, assignment_id);
    if (a == NULL) {
        pthread_mutex_unlock(&e->mu);
        emu_reply_error(r, "assignment_not_found", "no assignment %.64s", assignment_id);
        return;
    }
    if (emu_fence(r, a, worker_id, (long)gen, a->planned) != 0) goto unlock;
    if (a->planned) {
        atomic_fetch_add(&e->stats.plan_replays, 1);
        emu_reply_json(r, 200, plan_response(a, 1));
        goto unlock;
    }
    size_t nd = json_array_size(a->definitions);
    int covered[EMU_MAX_DEFINITIONS * 2 + 1] = {0};
    for (size_t i = 0; i < ns + nk; i++) {
        json_t *item = i < ns ? json_array_get(selected, i) : json_array_get(skipped, i - ns);
        const char *key = json_string_value(json_object_get(item, "eval_key"));
        const char *ver = json_string_value(json_object_get(item, "eval_version"));
        int idx = def_index(a->definitions, key, ver);
        if (idx < 0) {
            emu_reply_error(r, "incomplete_plan",
                            "the plan names %.128s version %.128s, which is not a definition of "
                            "this assignment",
                            key, ver);
            goto unlock;
        }
        if (covered[idx]) {
            emu_reply_error(r, "incomplete_plan",
                            "the plan covers %.128s version %.128s more than once", key, ver);
            goto unlock;
        }
        covered[idx] = 1;
    }
    for (size_t i = 0; i < nd; i++) {
        if (!covered[i]) {
            json_t *d = json_array_get(a->definitions, i);
            emu_reply_error(r, "incomplete_plan",
                            "the plan does not cover %s version %s: every definition must be "
                            "selected or skipped exactly once",
                            json_string_value(json_object_get(d, "eval_key")),
                            json_string_value(json_object_get(d, "eval_version")));
            goto unlock;
        }
    }
    for (size_t i = 0; i < ns; i++) {
        json_t *item = json_array_get(selected, i);
        int idx = def_index(a->definitions, json_string_value(json_object_get(item, "eval_key")),
                            json_string_value(json_object_get(item, "eval_version")));
        json_t *d = json_array_get(a->definitions, (size_t)idx);
        json_t *src = json_array_get(a->sources, (size_t)idx);
        json_t *wire = json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:O}", "evaluation_run_id", "",
                                 "eval_key", json_object_get(d, "eval_key"), "eval_version",
                                 json_object_get(d, "eval_version"), "execution_mode",
                                 json_object_get(d, "execution_mode"), "evaluator_source", src,
                                 "source_checksum", json_object_get(d, "source_checksum"),
                                 "timeout_seconds", json_object_get(d, "timeout_seconds"));
        emu_state_add_run(e, a, wire);
    }
    a->planned = 1;
    emu_state_set_status(e, a, ns > 0 ? AS_PLANNED : AS_SKIPPED);
    emu_reply_json(r, 200, plan_response(a, 0));
unlock:
    pthread_mutex_unlock(&e->mu);
}
