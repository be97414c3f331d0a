/* sidecar/cloud_result: POST a run's stored result body unchanged and
 * validate the acknowledgement (idempotent_replay must be a boolean). */
#include "sidecar/cloud/cloud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cloud_result(cloud *c, const char *run_id, const char *body, size_t len, int again,
                 cloud_result_ack *ack, cloud_error *e)
{
    memset(ack, 0, sizeof *ack);
    char *url = cloud_url(c, "/v1/evaluator/runs/%s/result", run_id);
    json_t *r = NULL;
    int rc = -1;
    cloud_req req = {.method = "POST",
                     .url = url,
                     .body = body,
                     .body_len = len,
                     .retry = 1,
                     .ep = CLOUD_EP_RESULT,
                     .again = again};
    if (cloud_call(c, &req, &r, e) != 0) goto done;
    const char *rid = cloud_req_str(r, "evaluation_run_id", "result", e);
    const char *st = rid ? cloud_req_str(r, "status", "result", e) : NULL;
    if (st == NULL || !cloud_req_str(r, "submission_id", "result", e) ||
        !cloud_req_str(r, "result_checksum", "result", e))
        goto done;
    if (strcmp(rid, run_id) != 0) {
        cloud_set_protocol_error(e, "result acknowledged for another run");
        goto done;
    }
    json_t *rp = json_object_get(r, "idempotent_replay");
    if (!json_is_boolean(rp)) {
        cloud_set_protocol_error(e, "result.idempotent_replay must be a boolean");
        goto done;
    }
    if (cloud_req_int(r, "result_count", "result", 0, &ack->result_count, e)) goto done;
    snprintf(ack->status, sizeof ack->status, "%s", st);
    ack->idempotent_replay = json_is_true(rp);
    rc = 0;
done:
    json_decref(r);
    free(url);
    return rc;
}
