/* sidecar/evaluation: the jail's outcomes as run statuses, condition
 * outcomes as selections, result validation (evaluation.h). */
#include "sidecar/evaluation/evaluation.h"

#include <stdio.h>
#include <string.h>

const char *evaluation_status_name(eval_run_status s)
{
    static const char *const names[] = {"succeeded", "failed", "timed_out", "cancelled"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "failed";
}

eval_run_status evaluation_map_outcome(const sbx_outcome *out, const char **error_code, char *msg,
                                       size_t msgcap)
{
    const char *d;
    if (msgcap) msg[0] = '\0';
    *error_code = "eval_error";
    switch (sbx_outcome_end(out, &d)) {
    case SBX_END_OK:
        *error_code = NULL;
        return EVAL_RUN_SUCCEEDED;
    case SBX_END_COMPILE:
        snprintf(msg, msgcap, "evaluator source rejected: %s", *d ? d : "invalid source");
        return EVAL_RUN_FAILED;
    case SBX_END_RUNTIME:
        snprintf(msg, msgcap, "evaluation raised %s", *d ? d : "Exception");
        return EVAL_RUN_FAILED;
    case SBX_END_LIMIT:
        if (!strcmp(d, "output")) {
            snprintf(msg, msgcap, "evaluation output exceeded 1 MiB");
            return EVAL_RUN_FAILED;
        }
        *error_code = "eval_timeout";
        snprintf(msg, msgcap, "evaluation exceeded its configured timeout");
        return EVAL_RUN_TIMED_OUT;
    case SBX_END_CANCELLED:
        *error_code = "cancelled";
        snprintf(msg, msgcap, "evaluation was cancelled");
        return EVAL_RUN_CANCELLED;
    case SBX_END_CRASH:
        break;
    }
    *error_code = "sandbox_error";
    if (*d)
        snprintf(msg, msgcap, "evaluation sandbox failed: %s", d);
    else
        snprintf(msg, msgcap, "evaluation sandbox returned an unknown outcome");
    return EVAL_RUN_FAILED;
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

const char *evaluation_condition_reason(const sbx_outcome *out, char *rbuf, size_t rbufcap)
{
    const char *d;
    sbx_end end = sbx_outcome_end(out, &d);
    if (end == SBX_END_LIMIT && (!strcmp(d, "slot") || !strcmp(d, "budget")))
        return "lease_exhausted";
    if (end != SBX_END_OK) return "condition_error";
    if (json_is_true(json_object_get(out->json, "applicable"))) return NULL;
    const char *rc = jstr(out->json, "reason_code");
    snprintf(rbuf, rbufcap, "%s", rc && *rc ? rc : "condition_false");
    return rbuf;
}

int evaluation_results_valid(const json_t *results, const char *eval_key, const char *result_kind)
{
    if (!json_is_array(results) || json_array_size(results) > EVALUATION_MAX_RESULTS) return 0;
    if (eval_key == NULL || result_kind == NULL) return 0;
    for (size_t i = 0; i < json_array_size(results); i++) {
        const json_t *it = json_array_get(results, i);
        const char *k = jstr(it, "result_key"), *rk = jstr(it, "result_kind");
        if (k && rk && !strcmp(k, eval_key) && !strcmp(rk, result_kind)) return 1;
    }
    return 0;
}
