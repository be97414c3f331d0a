/* sidecar/cloud_definitions: GET the assignment's definitions and validate
 * each descriptor (execution_mode required, never defaulted; at most 100). */
#include "sidecar/cloud/cloud.h"

#include <stdio.h>
#include <string.h>

static int is_kind(const char *k)
{
    return !strcmp(k, "score") || !strcmp(k, "metric") || !strcmp(k, "assertion");
}

int cloud_validate_definition(const json_t *d, fps_err *err)
{
    cloud_error e;
    memset(&e, 0, sizeof e);
    const char *ctx = "definition", *s;
    double t;
    if (!json_is_object(d)) {
        fps_err_set(err, CLOUD_EINVALID, 0, "invalid_definition", "definition must be an object");
        return -1;
    }
    if (!cloud_req_str(d, "eval_key", ctx, &e) || !cloud_req_str(d, "display_name", ctx, &e) ||
        !cloud_req_str(d, "eval_version", ctx, &e) ||
        !(s = cloud_req_str(d, "result_kind", ctx, &e)))
        goto fail;
    if (!is_kind(s)) {
        cloud_set_protocol_error(&e, "definition.result_kind must be score|metric|assertion");
        goto fail;
    }
    if (cloud_str_list(d, "labels", ctx, &e)) goto fail;
    if (!(s = cloud_req_str(d, "execution_mode", ctx, &e))) goto fail;
    if (strcmp(s, "local") != 0 && strcmp(s, "python") != 0) {
        cloud_set_protocol_error(&e, "definition.execution_mode must be 'local' or 'python'");
        goto fail;
    }
    if (cloud_opt_str(d, "condition_source", ctx, &s, &e) ||
        cloud_opt_str(d, "source_checksum", ctx, &s, &e) || cloud_opt_timeout(d, ctx, &t, &e))
        goto fail;
    return 0;
fail:
    fps_err_set(err, CLOUD_EINVALID, 0, "invalid_definition", "%s", e.err.msg);
    return -1;
}

int cloud_definitions(cloud *c, const cloud_assignment *a, json_t **out, cloud_error *e)
{
    json_t *r = NULL;
    fps_err err;
    *out = NULL;
    if (a->definitions_url == NULL) {
        cloud_set_protocol_error(e, "assignment has no definitions_url");
        return -1;
    }
    cloud_req req = {.method = "GET",
                     .url = a->definitions_url,
                     .retry = 1,
                     .lease_generation = a->lease_generation,
                     .ep = CLOUD_EP_DEFINITIONS,
                     .lease_expires_epoch = a->lease_expires_epoch};
    if (cloud_call(c, &req, &r, e) != 0) return -1;
    const char *aid = cloud_req_str(r, "assignment_id", NULL, e);
    if (aid == NULL || cloud_req_str(r, "catalog_revision", NULL, e) == NULL) goto fail;
    if (strcmp(aid, a->assignment_id) != 0) {
        cloud_set_protocol_error(e, "definitions are for another assignment");
        goto fail;
    }
    json_t *defs = json_object_get(r, "definitions");
    if (!json_is_array(defs)) {
        cloud_set_protocol_error(e, "definitions must be an array");
        goto fail;
    }
    if (json_array_size(defs) > CLOUD_MAX_DEFINITIONS) {
        cloud_set_protocol_error(e, "%zu definitions (at most %d)", json_array_size(defs),
                                 CLOUD_MAX_DEFINITIONS);
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(defs); i++) {
        json_t *d = json_array_get(defs, i);
        if (cloud_validate_definition(d, &err) != 0) {
            cloud_set_protocol_error(e, "definitions[%zu]: %s", i, err.msg);
            goto fail;
        }
        for (size_t k = 0; k < i; k++) {
            json_t *o = json_array_get(defs, k);
            if (json_equal(json_object_get(d, "eval_key"), json_object_get(o, "eval_key")) &&
                json_equal(json_object_get(d, "eval_version"),
                           json_object_get(o, "eval_version"))) {
                cloud_set_protocol_error(e, "definitions[%zu] duplicates definitions[%zu]", i, k);
                goto fail;
            }
        }
    }
    *out = json_incref(defs);
    json_decref(r);
    return 0;
fail:
    json_decref(r);
    return -1;
}
