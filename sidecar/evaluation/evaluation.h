/* sidecar/evaluation: what the worker and the backtest engine share so that
 * both evaluate alike. Owns the mapping from the jail's outcomes (sbx_end,
 * sandbox/jail/sbx.h) to the protocol's run statuses and error codes (SPEC
 * section 2 step 8). The jail never speaks in run statuses; this is the one
 * place that turns its terms into them. Pure functions, any thread. */
#ifndef FPS_EVALUATION_H
#define FPS_EVALUATION_H
#include "sandbox/jail/sbx.h"

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

#endif
