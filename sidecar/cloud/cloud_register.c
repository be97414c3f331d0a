/* sidecar/cloud_register: POST /v1/evaluator/workers/register and the strict
 * validation of its response (timing adopted only if positive and the lease
 * is longer than the heartbeat interval). */
#include "sidecar/cloud/cloud.h"

#include "common/strbuf.h"

#include <stdio.h>
#include <string.h>

int cloud_register(cloud *c, const char *catalog_revision, const json_t *catalog,
                   long max_concurrency, const char *sdk_version, cloud_registration *out,
                   cloud_error *e)
{
    memset(out, 0, sizeof *out);
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:i, s:O}", "protocol_version", "2", "worker_id",
                             cloud_worker_id(c), "sdk_version", sdk_version, "catalog_revision",
                             catalog_revision, "max_concurrency", (json_int_t)max_concurrency,
                             "definitions", catalog);
    char *url = cloud_url(c, "/v1/evaluator/workers/register", NULL);
    json_t *resp = NULL;
    cloud_req req = {.url = url, .retry = 1, .ep = CLOUD_EP_REGISTER};
    int rc = -1;
    if (cloud_post_json(c, &req, body, &resp, e) != 0) goto done;
    const char *id = cloud_req_str(resp, "evaluator_instance_id", NULL, e);
    const char *kind = id ? cloud_req_str(resp, "evaluator_kind", NULL, e) : NULL;
    if (kind == NULL) goto done;
    if (strcmp(kind, "managed") != 0 && strcmp(kind, "customer") != 0) {
        cloud_set_protocol_error(e, "evaluator_kind must be 'managed' or 'customer'");
        goto done;
    }
    if (cloud_req_int(resp, "heartbeat_interval_seconds", NULL, 1, &out->heartbeat_interval_s, e) ||
        cloud_req_int(resp, "lease_duration_seconds", NULL, 1, &out->lease_duration_s, e) ||
        cloud_req_int(resp, "poll_interval_seconds", NULL, 1, &out->poll_interval_s, e) ||
        cloud_req_int(resp, "claim_limit", NULL, 1, &out->claim_limit, e))
        goto done;
    if (out->lease_duration_s <= out->heartbeat_interval_s) {
        cloud_set_protocol_error(e,
                                 "lease_duration_seconds (%lld) must exceed "
                                 "heartbeat_interval_seconds (%lld)",
                                 out->lease_duration_s, out->heartbeat_interval_s);
        goto done;
    }
    if (json_object_get(resp, "disabled_definitions") == NULL) {
        out->disabled = json_array();
    } else {
        if (cloud_str_list(resp, "disabled_definitions", NULL, e) != 0) goto done;
        out->disabled = json_incref(json_object_get(resp, "disabled_definitions"));
    }
    snprintf(out->instance_id, sizeof out->instance_id, "%s", id);
    snprintf(out->evaluator_kind, sizeof out->evaluator_kind, "%s", kind);
    rc = 0;
done:
    json_decref(resp);
    json_decref(body);
    free(url);
    return rc;
}
