/* sandbox/jail/sbx_outcome: outcomes: mapping to run statuses and the one-line JSON form. Shared
 * structures and threading: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include "common/log.h"

#include <string.h>
#include <stdio.h>

/* ---- mapping ---- */

void sbx_outcome_to_run(const sbx_outcome *out, const char **status, const char **error_code,
                        char *msg, size_t msgcap)
{
    static const char timeout_msg[] = "evaluation exceeded its configured timeout";
    *status = "failed";
    *error_code = "eval_error";
    if (msgcap) msg[0] = '\0';
    switch (out->status) {
    case SBX_OK: {
        json_t *o = out->json;
        if (json_is_true(json_object_get(o, "ok"))) {
            *status = "succeeded";
            *error_code = NULL;
            return;
        }
        const char *stage = json_string_value(json_object_get(o, "stage"));
        if (stage != NULL && !strcmp(stage, "compile")) {
            const char *m = json_string_value(json_object_get(o, "message"));
            snprintf(msg, msgcap, "evaluator source rejected: %s", m && *m ? m : "invalid source");
        } else if (stage != NULL && !strcmp(stage, "runtime")) {
            const char *t = json_string_value(json_object_get(o, "error_type"));
            snprintf(msg, msgcap, "evaluation raised %s", t ? t : "Exception");
        } else if (stage != NULL && !strcmp(stage, "limit")) {
            *status = "timed_out";
            *error_code = "eval_timeout";
            snprintf(msg, msgcap, "%s", timeout_msg);
        } else {
            snprintf(msg, msgcap, "evaluation sandbox returned an unknown outcome");
            *error_code = "sandbox_error";
        }
        return;
    }
    case SBX_TIMEOUT:
        *status = "timed_out";
        *error_code = "eval_timeout";
        snprintf(msg, msgcap, "%s", timeout_msg);
        return;
    case SBX_OUTPUT:
        snprintf(msg, msgcap, "evaluation output exceeded 1 MiB");
        return;
    case SBX_CANCELLED:
        *status = "cancelled";
        *error_code = "cancelled";
        snprintf(msg, msgcap, "evaluation was cancelled");
        return;
    case SBX_JAIL_FAILURE:
        *error_code = "sandbox_error";
        snprintf(msg, msgcap, "evaluation sandbox failed: %s", out->detail);
        return;
    }
}

char *sbx_outcome_line(const sbx_outcome *out)
{
    strbuf b;
    strbuf_init(&b);
    switch (out->status) {
    case SBX_OK:
        if (out->line != NULL) return strdup(out->line);
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"jail\", \"message\": \"no outcome\"}");
        break;
    case SBX_TIMEOUT:
    case SBX_OUTPUT:
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": ");
        strbuf_json_str(&b, out->limit[0] ? out->limit : "timeout");
        strbuf_putc(&b, '}');
        break;
    case SBX_CANCELLED:
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"cancelled\"}");
        break;
    case SBX_JAIL_FAILURE:
        strbuf_puts(&b, "{\"ok\": false, \"stage\": \"jail\", \"message\": ");
        strbuf_json_str(&b, out->detail);
        strbuf_putc(&b, '}');
        break;
    }
    return strbuf_detach(&b, NULL);
}
