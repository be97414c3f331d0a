/* sidecar/evaluation: the jail's outcomes as run statuses (evaluation.h). */
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
