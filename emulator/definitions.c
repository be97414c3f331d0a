/* emulator/definitions: managed (server-authored, execution_mode "python")
 * definitions loaded from --definitions, with their source_checksum; and the
 * per-lease descriptor list of an assignment: the managed definitions plus
 * the leaseholder's registered catalog as "local" ones. */
#include "emulator/emu_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const result_kinds[] = {"score", "metric", "assertion", NULL};

int emu_validate_catalog_entry(json_t *d, const char *ctx, fps_err *err)
{
    const char *key, *name, *version, *kind;
    char f[160];
    if (emu_v_string(d, "eval_key", ctx, &key, err) != 0) return -1;
    snprintf(f, sizeof f, "%s.eval_key", ctx);
    if (emu_v_key(key, f, err) != 0) return -1;
    if (emu_v_string(d, "display_name", ctx, &name, err) != 0) return -1;
    snprintf(f, sizeof f, "%s.display_name", ctx);
    if (emu_v_bounded(name, f, 128, err) != 0) return -1;
    if (emu_v_string(d, "eval_version", ctx, &version, err) != 0) return -1;
    snprintf(f, sizeof f, "%s.eval_version", ctx);
    if (emu_v_bounded(version, f, 128, err) != 0) return -1;
    if (emu_v_enum(d, "result_kind", ctx, result_kinds, &kind, err) != 0) return -1;
    return emu_v_labels(d, "labels", ctx, err);
}

const char *emulator_sample_definitions(void)
{
    return "["
           "{\"eval_key\":\"tool_efficiency\",\"eval_version\":\"1.0.0\","
           "\"display_name\":\"Tool efficiency\",\"result_kind\":\"score\","
           "\"labels\":[\"deterministic\",\"tools\"],"
           "\"condition_source\":\"session.count('tool_use') > 0\","
           "\"evaluator_source\":\"EvalResult(score=Score(len(set([e.payload.get('tool_name') for "
           "e "
           "in session.events_of_type('tool_use')])) / session.count('tool_use'), "
           "description='Distinct tools divided by tool calls'), "
           "summary=f\\\"{session.count('tool_use')} "
           "tool calls\\\")\",\"timeout_seconds\":10},"
           "{\"eval_key\":\"tool_error_rate\",\"eval_version\":\"1.0.0\","
           "\"display_name\":\"Tool error rate\",\"result_kind\":\"metric\",\"labels\":[\"tools\"],"
           "\"condition_source\":\"ConditionResult(session.count('tool_result') > 0, "
           "'no_tool_results')\","
           "\"evaluator_source\":\"EvalResult(metrics={'tool_error_rate': Metric(len([e for e in "
           "session.events_of_type('tool_result') if e.payload.get('status') == 'error']) / "
           "session.count('tool_result'), unit='ratio')})\",\"timeout_seconds\":10},"
           "{\"eval_key\":\"task_completed\",\"eval_version\":\"1.0.0\","
           "\"display_name\":\"Task completed\",\"result_kind\":\"assertion\",\"labels\":[],"
           "\"condition_source\":null,"
           "\"evaluator_source\":\"EvalResult(assertions={'task_completed': "
           "Assertion(any([e.payload.get("
           "'status') == 'success' for e in session.events_of_type('agent_end')]))})\","
           "\"timeout_seconds\":null},"
           "{\"eval_key\":\"mean_tool_latency_ms\",\"eval_version\":\"1.0.0\","
           "\"display_name\":\"Mean tool latency\",\"result_kind\":\"metric\","
           "\"labels\":[\"latency\"],\"condition_source\":null,"
           "\"evaluator_source\":\"EvalResult(metrics={'mean_tool_latency_ms': "
           "Metric(round(sum([e.payload.get('latency_ms', 0) for e in "
           "session.events_of_type('tool_result')]) / max(1, session.count('tool_result')), 1), "
           "unit='ms')})\",\"timeout_seconds\":10}"
           "]";
}

/* Validates one managed definition and appends its descriptor and source. */
static int add_managed(emulator *e, json_t *d, size_t i, fps_err *err)
{
    char ctx[48];
    snprintf(ctx, sizeof ctx, "definitions[%zu]", i);
    if (!json_is_object(d)) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be an object", ctx);
        return -1;
    }
    json_t *copy = json_deep_copy(d);
    /* Defaults the reference authoring API would fill in. */
    if (json_is_string(json_object_get(copy, "eval_key")) &&
        !json_object_get(copy, "display_name")) {
        char name[160];
        snprintf(name, sizeof name, "%s", json_string_value(json_object_get(copy, "eval_key")));
        for (char *p = name; *p; p++)
            if (*p == '_') *p = ' ';
        name[0] = (char)toupper((unsigned char)name[0]);
        json_object_set_new(copy, "display_name", json_string(name));
    }
    if (!json_object_get(copy, "result_kind"))
        json_object_set_new(copy, "result_kind", json_string("score"));
    if (!json_object_get(copy, "labels")) json_object_set_new(copy, "labels", json_array());
    const char *cond, *src;
    char f[160];
    int has_timeout = 0;
    double timeout = 0;
    int rc = -1;
    if (emu_validate_catalog_entry(copy, ctx, err) != 0) goto done;
    if (emu_v_opt_string(copy, "condition_source", ctx, &cond, err) != 0) goto done;
    if (emu_v_string(copy, "evaluator_source", ctx, &src, err) != 0) goto done;
    snprintf(f, sizeof f, "%s.evaluator_source", ctx);
    if (emu_v_bounded(src, f, (size_t)128 * 1024, err) != 0) goto done;
    if (emu_v_opt_number(copy, "timeout_seconds", ctx, &has_timeout, &timeout, err) != 0) goto done;
    if (has_timeout && timeout <= 0) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "%s.timeout_seconds must be finite and greater than zero", ctx);
        goto done;
    }
    const char *key = json_string_value(json_object_get(copy, "eval_key"));
    for (size_t j = 0; j < json_array_size(e->managed); j++) {
        if (!strcmp(key, json_string_value(
                             json_object_get(json_array_get(e->managed, j), "eval_key")))) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "duplicate eval key: %s", key);
            goto done;
        }
    }
    char checksum[72];
    emulator_source_checksum(cond, src, checksum);
    json_t *desc = json_pack(
        "{s:O, s:O, s:O, s:O, s:O, s:s, s:O, s:s, s:o}", "eval_key",
        json_object_get(copy, "eval_key"), "display_name", json_object_get(copy, "display_name"),
        "eval_version", json_object_get(copy, "eval_version"), "result_kind",
        json_object_get(copy, "result_kind"), "labels", json_object_get(copy, "labels"),
        "execution_mode", "python", "condition_source",
        cond ? json_object_get(copy, "condition_source") : json_null(), "source_checksum", checksum,
        "timeout_seconds", has_timeout ? json_real(timeout) : json_null());
    json_array_append_new(e->managed, desc);
    json_array_append_new(e->managed_sources, json_string(src));
    rc = 0;
done:
    json_decref(copy);
    return rc;
}

int emu_definitions_load(emulator *e, const char *file, const char *text, fps_err *err)
{
    json_error_t jerr;
    json_t *arr = NULL;
    fps_err inner;
    if (file)
        arr = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
    else if (text)
        arr = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    else
        return 0;
    if (arr == NULL) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "--definitions %s: %s (line %d)",
                    file ? file : "(text)", jerr.text, jerr.line);
        return -1;
    }
    int rc = -1;
    if (!json_is_array(arr)) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "--definitions: expected a JSON array of definitions");
        goto done;
    }
    if (json_array_size(arr) > EMU_MAX_DEFINITIONS) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "--definitions: %zu definitions; maximum is %d", json_array_size(arr),
                    EMU_MAX_DEFINITIONS);
        goto done;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (add_managed(e, json_array_get(arr, i), i, &inner) != 0) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "--definitions: %s", inner.msg);
            goto done;
        }
    }
    rc = 0;
done:
    json_decref(arr);
    return rc;
}

void emu_definitions_for(emulator *e, emu_assignment *a, emu_instance *inst)
{
    json_t *defs = json_array(), *sources = json_array();
    for (size_t i = 0; i < json_array_size(e->managed); i++) {
        json_array_append(defs, json_array_get(e->managed, i));
        json_array_append(sources, json_array_get(e->managed_sources, i));
    }
    for (size_t i = 0; i < json_array_size(inst->catalog); i++) {
        json_t *c = json_array_get(inst->catalog, i);
        const char *key = json_string_value(json_object_get(c, "eval_key"));
        int shadowed = 0; /* a managed definition owns its key */
        for (size_t j = 0; j < json_array_size(e->managed) && !shadowed; j++)
            shadowed = !strcmp(
                key, json_string_value(json_object_get(json_array_get(e->managed, j), "eval_key")));
        if (shadowed) continue;
        json_array_append_new(defs,
                              json_pack("{s:O, s:O, s:O, s:O, s:O, s:s, s:n, s:n, s:n}", "eval_key",
                                        json_object_get(c, "eval_key"), "display_name",
                                        json_object_get(c, "display_name"), "eval_version",
                                        json_object_get(c, "eval_version"), "result_kind",
                                        json_object_get(c, "result_kind"), "labels",
                                        json_object_get(c, "labels"), "execution_mode", "local",
                                        "condition_source", "source_checksum", "timeout_seconds"));
        json_array_append_new(sources, json_null());
    }
    json_decref(a->definitions);
    json_decref(a->sources);
    a->definitions = defs;
    a->sources = sources;
    snprintf(a->catalog_revision, sizeof a->catalog_revision, "%s", inst->catalog_revision);
}
