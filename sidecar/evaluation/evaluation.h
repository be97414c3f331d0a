/* sidecar/evaluation: what the worker and the backtest engine share so that
 * both evaluate alike. Owns the mapping from the jail's outcomes (sbx_end,
 * sandbox/jail/sbx.h) to the protocol's run statuses and error codes (SPEC
 * section 2 step 8). The jail never speaks in run statuses; this is the one
 * place that turns its terms into them. Also the rules both apply to a
 * condition's outcome and to an evaluator's result. Pure functions, any
 * thread. */
#ifndef FPS_EVALUATION_H
#define FPS_EVALUATION_H
#include "sandbox/jail/sbx.h"

#include <jansson.h>
#include <stddef.h>

/* SPEC section 2 step 8's terminal run statuses. */
typedef enum {
    EVAL_RUN_SUCCEEDED,
    EVAL_RUN_FAILED,
    EVAL_RUN_TIMED_OUT,
    EVAL_RUN_CANCELLED,
} eval_run_status;

/* "succeeded" | "failed" | "timed_out" | "cancelled" (static). */
const char *evaluation_status_name(eval_run_status s);

/* Maps how a managed evaluation ended to its run status; *error_code gets
 * NULL (succeeded) or "eval_error" | "eval_timeout" | "cancelled" |
 * "sandbox_error" (static strings), msg the error message ("" when
 * succeeded):
 *   compile  -> failed/eval_error/"evaluator source rejected: <reason>"
 *   runtime  -> failed/eval_error/"evaluation raised <Type>"
 *   limit "output" -> failed/eval_error/"evaluation output exceeded 1 MiB"
 *   any other limit -> timed_out/eval_timeout/
 *                      "evaluation exceeded its configured timeout"
 *   crash    -> failed/sandbox_error/"evaluation sandbox failed: <what>"
 *               ("evaluation sandbox returned an unknown outcome")
 *   cancelled -> cancelled/cancelled/"evaluation was cancelled"
 * For a succeeded evaluator outcome the caller reads out->json's "results"
 * and "summary" itself. */
eval_run_status evaluation_map_outcome(const sbx_outcome *out, const char **error_code, char *msg,
                                       size_t msgcap);

/* A managed condition's outcome (SPEC section 2 step 4): NULL when the
 * definition is selected, else its skip reason: "lease_exhausted" (no slot
 * within the lease, or cut by it), "condition_error" (its own timeout, an
 * error, a rejected source, a crash), "condition_false", or the reason code
 * of ConditionResult(False, code), copied into rbuf (rbufcap bytes). A
 * cancelled outcome is the caller's to handle first. */
const char *evaluation_condition_reason(const sbx_outcome *out, char *rbuf, size_t rbufcap);

/* Result validation: 1 if `results` (an array of result items) is at most
 * 25 items and holds the definition's primary result (result_key ==
 * eval_key, result_kind == result_kind), else 0. */
#define EVALUATION_MAX_RESULTS 25
int evaluation_results_valid(const json_t *results, const char *eval_key, const char *result_kind);
/* The message of a run whose results fail evaluation_results_valid. */
#define EVALUATION_NO_PRIMARY "evaluation result does not contain its declared primary result"

#endif
