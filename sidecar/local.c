/* sidecar/local: placeholder until the registry lands (see local.h). */
#include "sidecar/local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

local_registry *local_registry_new(const local_config *cfg, char *err, size_t errcap)
{
    snprintf(err, errcap, "local evaluators not built yet");
    return NULL;
}
void local_registry_free(local_registry *r) {}
void local_registry_set_change_callback(local_registry *r, local_change_fn fn, void *ud) {}
json_t *local_registry_catalog(local_registry *r, uint64_t *generation)
{
    if (generation) *generation = 0;
    return json_array();
}
int local_registry_definition(local_registry *r, const char *eval_key, const char *eval_version,
                              local_definition *out)
{
    memset(out, 0, sizeof *out);
    return -1;
}
void local_definition_free(local_definition *d) {}
void local_dispatch(local_registry *r, const local_dispatch_request *req,
                    local_dispatch_result *out)
{
    memset(out, 0, sizeof *out);
    out->status = "failed";
    snprintf(out->error_code, sizeof out->error_code, "evaluator_unavailable");
    snprintf(out->error_message, sizeof out->error_message, "local evaluators not available");
    out->results = json_array();
}
void local_dispatch_result_free(local_dispatch_result *out)
{
    json_decref(out->results);
    free(out->summary);
    out->results = NULL;
    out->summary = NULL;
}
int local_condition(local_registry *r, sbx_pool *pool, const char *eval_key,
                    const char *eval_version, sbx_image *img, double timeout_s,
                    atomic_int *cancel, local_condition_outcome *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->reason_code, sizeof out->reason_code, "condition_error");
    return -1;
}
