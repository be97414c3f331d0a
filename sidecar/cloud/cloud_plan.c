/* sidecar/cloud_plan: POST the assignment's plan and validate the response's
 * shape (the matching against the selection is the worker's, which knows
 * what it asked for). */
#include "sidecar/cloud/cloud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cloud_plan_free(cloud_plan *p)
{
    if (p == NULL) return;
    free(p->runs);
    json_decref(p->obj);
    memset(p, 0, sizeof *p);
}

int cloud_plan_submit(cloud *c, const cloud_assignment *a, const json_t *selected,
                      const json_t *skipped, cloud_plan *out, cloud_error *e)
{
    memset(out, 0, sizeof *out);
    json_t *body =
        json_pack("{s:s, s:s, s:I, s:O, s:O}", "protocol_version", "2", "worker_id",
                  cloud_worker_id(c), "lease_generation", (json_int_t)a->lease_generation,
                  "selected", selected, "skipped", skipped);
    char *url = cloud_url(c, "/v1/evaluator/assignments/%s/plan", a->assignment_id);
    json_t *r = NULL;
    int rc = -1;
    cloud_req req = {
        .url = url, .retry = 1, .ep = CLOUD_EP_PLAN, .lease_expires_epoch = a->lease_expires_epoch};
    if (cloud_post_json(c, &req, body, &r, e) != 0) goto done;
    const char *aid = cloud_req_str(r, "assignment_id", "plan", e);
    if (aid == NULL) goto done;
    if (strcmp(aid, a->assignment_id) != 0) {
        cloud_set_protocol_error(e, "plan is for another assignment");
        goto done;
    }
    if (!(out->assignment_status = cloud_req_str(r, "assignment_status", "plan", e))) goto done;
    out->status = !strcmp(out->assignment_status, "planned")   ? CLOUD_PLAN_PLANNED
                  : !strcmp(out->assignment_status, "skipped") ? CLOUD_PLAN_SKIPPED
                                                               : CLOUD_PLAN_OTHER;
    json_t *rp = json_object_get(r, "idempotent_replay");
    if (rp != NULL && !json_is_boolean(rp)) {
        cloud_set_protocol_error(e, "plan.idempotent_replay must be a boolean");
        goto done;
    }
    out->idempotent_replay = json_is_true(rp);
    json_t *runs = json_object_get(r, "runs");
    if (!json_is_array(runs)) {
        cloud_set_protocol_error(e, "plan.runs must be an array");
        goto done;
    }
    if (json_array_size(runs) > CLOUD_MAX_DEFINITIONS) {
        cloud_set_protocol_error(e, "plan has %zu runs (at most %d)", json_array_size(runs),
                                 CLOUD_MAX_DEFINITIONS);
        goto done;
    }
    out->nruns = json_array_size(runs);
    out->runs = calloc(out->nruns ? out->nruns : 1, sizeof *out->runs);
    if (out->runs == NULL) {
        cloud_set_protocol_error(e, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < out->nruns; i++) {
        json_t *run = json_array_get(runs, i);
        cloud_run *cr = &out->runs[i];
        const char *s, *mode;
        if (!json_is_object(run)) {
            cloud_set_protocol_error(e, "plan.runs[%zu] must be an object", i);
            goto done;
        }
        if (!(s = cloud_req_str(run, "evaluation_run_id", "plan.run", e)) ||
            !(cr->eval_key = cloud_req_str(run, "eval_key", "plan.run", e)) ||
            !(cr->eval_version = cloud_req_str(run, "eval_version", "plan.run", e)) ||
            !(mode = cloud_req_str(run, "execution_mode", "plan.run", e)))
            goto done;
        cr->run_id = s;
        cr->obj = run;
        if (*s == '\0') {
            cloud_set_protocol_error(e, "plan.runs[%zu].evaluation_run_id is empty", i);
            goto done;
        }
        if (strcmp(mode, "local") != 0 && strcmp(mode, "python") != 0) {
            cloud_set_protocol_error(e, "plan.runs[%zu].execution_mode must be local|python", i);
            goto done;
        }
        cr->mode = !strcmp(mode, "python") ? CLOUD_MODE_PYTHON : CLOUD_MODE_LOCAL;
        if (cloud_opt_str(run, "evaluator_source", "plan.run", &cr->evaluator_source, e) ||
            cloud_opt_str(run, "source_checksum", "plan.run", &cr->source_checksum, e) ||
            cloud_opt_timeout(run, "plan.run", &cr->timeout_s, e))
            goto done;
        for (size_t k = 0; k < i; k++)
            if (json_equal(json_object_get(run, "evaluation_run_id"),
                           json_object_get(json_array_get(runs, k), "evaluation_run_id"))) {
                cloud_set_protocol_error(e, "plan has a duplicate evaluation_run_id");
                goto done;
            }
    }
    out->obj = r;
    r = NULL;
    rc = 0;
done:
    if (rc != 0) {
        free(out->runs);
        memset(out, 0, sizeof *out);
    }
    json_decref(r);
    json_decref(body);
    free(url);
    return rc;
}
