/* emulator/handlers_result: POST /v1/evaluator/runs/{id}/result. Validates
 * the result body as the reference's ResultRequest does, then:
 * unknown run → 404 run_not_found; run already committed → the same
 * submission_id with byte-identical content is an idempotent replay (200),
 * anything else 409 submission_conflict; otherwise fenced by worker_id and
 * lease_generation (409 lease_lost) and committed. The assignment completes
 * when all its runs are terminal. */
#include "common/ids.h"
#include "common/timeutil.h"
#include "emulator/emu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const statuses[] = {"succeeded", "failed", "timed_out", "cancelled", NULL};
static const char *const kinds[] = {"score", "metric", "assertion", NULL};

static int opt_bounded(json_t *o, const char *key, const char *ctx, size_t max, fps_err *err)
{
    const char *s;
    if (emu_v_opt_string(o, key, ctx, &s, err) != 0) return -1;
    if (s == NULL) return 0;
    char f[96];
    if (ctx)
        snprintf(f, sizeof f, "%s.%s", ctx, key);
    else
        snprintf(f, sizeof f, "%s", key);
    return emu_v_bounded(s, f, max, err);
}

static int validate_item(json_t *it, const char *ctx, fps_err *err)
{
    const char *s;
    char f[96];
    int has;
    double num;
    if (!json_is_object(it)) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be an object", ctx);
        return -1;
    }
    if (emu_v_string(it, "result_key", ctx, &s, err) != 0) return -1;
    snprintf(f, sizeof f, "%s.result_key", ctx);
    if (emu_v_key(s, f, err) != 0) return -1;
    if (emu_v_enum(it, "result_kind", ctx, kinds, &s, err) != 0) return -1;
    json_t *nv = json_object_get(it, "numeric_value");
    if (nv && json_is_boolean(nv)) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s.numeric_value must be a number or null",
                    ctx);
        return -1;
    }
    if (emu_v_opt_number(it, "numeric_value", ctx, &has, &num, err) != 0) return -1;
    json_t *bv = json_object_get(it, "bool_value");
    if (bv && !json_is_null(bv) && !json_is_boolean(bv)) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s.bool_value must be a boolean or null",
                    ctx);
        return -1;
    }
    if (emu_v_opt_string(it, "text_value", ctx, &s, err) != 0) return -1;
    if (emu_v_string(it, "unit", ctx, &s, err) != 0) return -1;
    snprintf(f, sizeof f, "%s.unit", ctx);
    if (*s && emu_v_bounded(s, f, 64, err) != 0) return -1;
    if (opt_bounded(it, "display_value", ctx, 256, err) ||
        opt_bounded(it, "description", ctx, 1000, err) ||
        opt_bounded(it, "reasoning", ctx, 16384, err))
        return -1;
    return emu_v_labels(it, "labels", ctx, err);
}

static int validate(json_t *body, fps_err *err)
{
    const char *s;
    long long v;
    json_t *results;
    if (emu_v_string(body, "result_schema_version", NULL, &s, err) != 0) return -1;
    if (strcmp(s, "2") != 0) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "unsupported result schema version '%.32s'",
                    s);
        return -1;
    }
    if (emu_v_string(body, "submission_id", NULL, &s, err) ||
        emu_v_bounded(s, "submission_id", 128, err) || emu_v_no_control(s, "submission_id", err) ||
        emu_v_string(body, "worker_id", NULL, &s, err) ||
        emu_v_pos_int(body, "lease_generation", NULL, &v, err) ||
        emu_v_enum(body, "status", NULL, statuses, &s, err) ||
        emu_v_timestamp(body, "started_at", NULL, err) ||
        emu_v_timestamp(body, "finished_at", NULL, err) ||
        emu_v_nonneg_int(body, "duration_ms", NULL, &v, err) ||
        opt_bounded(body, "summary", NULL, 4096, err) ||
        emu_v_array(body, "results", NULL, &results, err) ||
        opt_bounded(body, "error_code", NULL, 64, err) ||
        opt_bounded(body, "error_message", NULL, 4096, err))
        return -1;
    size_t nr = json_array_size(results);
    if (nr > EMU_MAX_RESULTS) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "results has %zu items; maximum is %d", nr,
                    EMU_MAX_RESULTS);
        return -1;
    }
    for (size_t i = 0; i < nr; i++) {
        char ctx[32];
        snprintf(ctx, sizeof ctx, "results[%zu]", i);
        if (validate_item(json_array_get(results, i), ctx, err) != 0) return -1;
        const char *k =
            json_string_value(json_object_get(json_array_get(results, i), "result_key"));
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(k, json_string_value(
                               json_object_get(json_array_get(results, j), "result_key")))) {
                fps_err_set(err, EMU_EINVALID, 0, "invalid",
                            "results[%zu].result_key '%s' is not unique", i, k);
                return -1;
            }
        }
    }
    if (!strcmp(json_string_value(json_object_get(body, "status")), "succeeded") && nr == 0) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "results must not be empty when status is succeeded");
        return -1;
    }
    return 0;
}

static json_t *result_response(emu_run *run, int replay)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:s}", "protocol_version",
                     EMU_PROTOCOL_VERSION, "evaluation_run_id", run->id, "submission_id",
                     run->submission_id, "status", "committed", "idempotent_replay", replay,
                     "result_count", (json_int_t)run->result_count, "result_checksum",
                     run->checksum);
}

void emu_h_result(emu_req *r, json_t *body, const char *run_id)
{
    emulator *e = r->e;
    fps_err err;
    if (validate(body, &err) != 0) {
        emu_reply_error(r, "invalid_request", "%s", err.msg);
        return;
    }
    const char *submission_id = json_string_value(json_object_get(body, "submission_id"));
    const char *worker_id = json_string_value(json_object_get(body, "worker_id"));
    long gen = (long)json_integer_value(json_object_get(body, "lease_generation"));
    pthread_mutex_lock(&e->mu);
    emu_run *run = emu_map_get(&e->runs_by_id, run_id);
    if (run == NULL) {
        emu_reply_error(r, "run_not_found", "no evaluation run %.64s", run_id);
        goto unlock;
    }
    if (run->committed) {
        if (!strcmp(run->submission_id, submission_id) && run->body_len == r->body_len &&
            memcmp(run->body, r->body, r->body_len) == 0) {
            atomic_fetch_add(&e->stats.idempotent_replays, 1);
            emu_reply_json(r, 200, result_response(run, 1));
        } else {
            atomic_fetch_add(&e->stats.conflicts, 1);
            if (!strcmp(run->submission_id, submission_id))
                emu_reply_error(r, "submission_conflict",
                                "submission %.128s was already committed with different content",
                                submission_id);
            else
                emu_reply_error(r, "submission_conflict",
                                "run %s already has a committed result (submission %s)", run->id,
                                run->submission_id);
        }
        goto unlock;
    }
    if (emu_fence(r, run->a, worker_id, gen, 0) != 0) goto unlock;
    run->committed = 1;
    run->submission_id = strdup(submission_id);
    run->body = malloc(r->body_len ? r->body_len : 1);
    if (run->submission_id == NULL || run->body == NULL) abort();
    memcpy(run->body, r->body, r->body_len);
    run->body_len = r->body_len;
    char hex[65];
    ids_sha256_hex(r->body, r->body_len, hex);
    snprintf(run->checksum, sizeof run->checksum, "sha256:%s", hex);
    run->result_count = (long)json_array_size(json_object_get(body, "results"));
    snprintf(run->result_status, sizeof run->result_status, "%s",
             json_string_value(json_object_get(body, "status")));
    run->committed_at = time_now();
    e->committed[e->ncommitted++] = run;
    e->pending_runs--;
    atomic_fetch_add(&e->stats.commits, 1);
    emu_assignment *a = run->a;
    if (++a->nterminal == a->nruns) emu_state_set_status(e, a, AS_COMPLETED);
    emu_reply_json(r, 200, result_response(run, 0));
unlock:
    pthread_mutex_unlock(&e->mu);
}
