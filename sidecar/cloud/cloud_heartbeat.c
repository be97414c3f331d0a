/* sidecar/cloud_heartbeat: POST /v1/evaluator/runs/heartbeat for one
 * assignment's running runs; validates lease_expires_at and
 * accepted_run_ids. */
#include "sidecar/cloud/cloud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cloud_heartbeat(cloud *c, long long lease_generation, const json_t *run_ids, json_t **accepted,
                    char *lease_expires_at, size_t lcap, cloud_error *e)
{
    *accepted = NULL;
    json_t *runs = json_array();
    for (size_t i = 0; i < json_array_size(run_ids); i++)
        json_array_append_new(runs, json_pack("{s:O, s:s}", "evaluation_run_id",
                                              json_array_get(run_ids, i), "state", "running"));
    json_t *body =
        json_pack("{s:s, s:s, s:I, s:o}", "protocol_version", "2", "worker_id", cloud_worker_id(c),
                  "lease_generation", (json_int_t)lease_generation, "runs", runs);
    char *url = cloud_url(c, "/v1/evaluator/runs/heartbeat", NULL);
    json_t *r = NULL;
    int rc = -1;
    /* One attempt: the next tick is the retry. */
    cloud_req req = {.url = url, .ep = CLOUD_EP_HEARTBEAT};
    if (cloud_post_json(c, &req, body, &r, e) != 0) goto done;
    const char *le = cloud_req_str(r, "lease_expires_at", "heartbeat", e);
    if (le == NULL || cloud_str_list(r, "accepted_run_ids", "heartbeat", e) != 0) goto done;
    snprintf(lease_expires_at, lcap, "%s", le);
    *accepted = json_incref(json_object_get(r, "accepted_run_ids"));
    rc = 0;
done:
    json_decref(r);
    json_decref(body);
    free(url);
    return rc;
}
