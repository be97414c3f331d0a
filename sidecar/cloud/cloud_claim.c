/* sidecar/cloud_claim: POST /v1/evaluator/assignments/claim (never retried
 * at the transport level: a lost response may already hold leases) and the
 * validation of each assignment. */
#include "sidecar/cloud/cloud.h"

#include "common/log.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cloud_assignment_clear(cloud_assignment *a)
{
    if (a == NULL) return;
    json_decref(a->obj);
    free(a->transcript_url);
    free(a->definitions_url);
    memset(a, 0, sizeof *a);
}

void cloud_assignments_free(cloud_assignment *a, size_t n)
{
    if (a == NULL) return;
    for (size_t i = 0; i < n; i++)
        cloud_assignment_clear(&a[i]);
    free(a);
}

static int parse_assignment(cloud *c, json_t *o, cloud_assignment *a, cloud_error *e)
{
    fps_err err;
    memset(a, 0, sizeof *a);
    if (!json_is_object(o)) {
        cloud_set_protocol_error(e, "assignment must be an object");
        return -1;
    }
    a->obj = json_incref(o);
    const char *ctx = "assignment";
    if (!(a->assignment_id = cloud_req_str(o, "assignment_id", ctx, e))) goto fail;
    if (cloud_req_int(o, "lease_generation", ctx, 1, &a->lease_generation, e)) goto fail;
    if (!(a->lease_expires_at = cloud_req_str(o, "lease_expires_at", ctx, e))) goto fail;
    if (!(a->session_id = cloud_req_str(o, "session_id", ctx, e))) goto fail;
    if (!(a->session_revision_id = cloud_req_str(o, "session_revision_id", ctx, e))) goto fail;
    if (!(a->agent_id = cloud_req_str(o, "agent_id", ctx, e))) goto fail;
    if (!(a->environment = cloud_req_str(o, "environment", ctx, e))) goto fail;
    if (!(a->trigger_reason = cloud_req_str(o, "trigger_reason", ctx, e))) goto fail;
    if (cloud_req_int(o, "event_count", ctx, 0, &a->event_count, e)) goto fail;
    const char *turl = cloud_req_str(o, "transcript_url", ctx, e);
    if (turl == NULL) goto fail;
    if (*a->assignment_id == '\0') {
        cloud_set_protocol_error(e, "assignment.assignment_id is empty");
        goto fail;
    }
    a->transcript_url = cloud_pin_url(c, turl, &err);
    if (a->transcript_url == NULL) {
        cloud_set_protocol_error(e, "assignment.transcript_url rejected: %s", err.msg);
        goto fail;
    }
    const char *durl;
    if (cloud_opt_str(o, "definitions_url", ctx, &durl, e)) goto fail;
    if (durl != NULL && *durl != '\0') {
        a->definitions_url = cloud_pin_url(c, durl, &err);
        if (a->definitions_url == NULL) {
            cloud_set_protocol_error(e, "assignment.definitions_url rejected: %s", err.msg);
            goto fail;
        }
    }
    if (time_parse_rfc3339(a->lease_expires_at, &a->lease_expires_epoch) != 0) {
        cloud_set_protocol_error(e, "assignment.lease_expires_at is not an RFC 3339 timestamp");
        goto fail;
    }
    return 0;
fail:
    cloud_assignment_clear(a);
    return -1;
}

int cloud_assignment_from_json(cloud *c, const json_t *obj, cloud_assignment *out, fps_err *err)
{
    cloud_error e;
    memset(&e, 0, sizeof e);
    json_t *copy = json_deep_copy(obj);
    int rc = parse_assignment(c, copy, out, &e);
    json_decref(copy);
    if (rc != 0) fps_err_set(err, CLOUD_EINVALID, 0, "invalid_assignment", "%s", e.err.msg);
    return rc;
}

int cloud_claim(cloud *c, const char *catalog_revision, long capacity, cloud_assignment **out,
                size_t *n, size_t *rejected, cloud_error *e)
{
    *out = NULL;
    *n = 0;
    *rejected = 0;
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:i}", "protocol_version", "2", "worker_id", cloud_worker_id(c),
                  "catalog_revision", catalog_revision, "capacity", (json_int_t)capacity);
    char *url = cloud_url(c, "/v1/evaluator/assignments/claim", NULL);
    json_t *resp = NULL;
    cloud_assignment *list = NULL;
    size_t got = 0;
    int rc = -1;
    cloud_req req = {.url = url, .ep = CLOUD_EP_CLAIM};
    if (cloud_post_json(c, &req, body, &resp, e) != 0) goto done;
    json_t *arr = json_object_get(resp, "assignments");
    if (!json_is_array(arr)) {
        cloud_set_protocol_error(e, "assignments must be an array");
        goto done;
    }
    size_t m = json_array_size(arr);
    if ((long)m > capacity) {
        cloud_set_protocol_error(e, "server returned %zu assignments for capacity %ld", m,
                                 capacity);
        goto done;
    }
    for (size_t i = 0; i < m; i++) {
        json_t *ai = json_object_get(json_array_get(arr, i), "assignment_id");
        for (size_t k = 0; json_is_string(ai) && k < i; k++) {
            json_t *ak = json_object_get(json_array_get(arr, k), "assignment_id");
            if (json_is_string(ak) && strcmp(json_string_value(ai), json_string_value(ak)) == 0) {
                cloud_set_protocol_error(e, "server returned assignment %s twice",
                                         json_string_value(ai));
                goto done;
            }
        }
    }
    list = calloc(m ? m : 1, sizeof *list);
    for (size_t i = 0; i < m; i++) {
        cloud_error ae;
        memset(&ae, 0, sizeof ae);
        if (parse_assignment(c, json_array_get(arr, i), &list[got], &ae) != 0) {
            (*rejected)++;
            json_t *ai = json_object_get(json_array_get(arr, i), "assignment_id");
            log_error("claimed assignment rejected (protocol error)",
                      LOG_S("assignment_id", json_is_string(ai) ? json_string_value(ai) : ""),
                      LOG_S("error", ae.err.msg), LOG_S("request_id", e->request_id));
            continue;
        }
        got++;
    }
    *out = list;
    *n = got;
    list = NULL;
    rc = 0;
done:
    cloud_assignments_free(list, got);
    json_decref(resp);
    json_decref(body);
    free(url);
    return rc;
}
