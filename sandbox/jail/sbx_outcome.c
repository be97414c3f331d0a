/* sandbox/jail/sbx_outcome: outcomes: how an evaluation ended (sbx_end) and the one-line JSON form.
 * Shared structures and threading: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include "common/log.h"

#include <string.h>
#include <stdio.h>

/* ---- how it ended ---- */

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v != NULL ? v : dflt;
}

sbx_end sbx_outcome_end(const sbx_outcome *out, const char **detail)
{
    const char *d = "";
    sbx_end end = SBX_END_CRASH;
    switch (out->status) {
    case SBX_OK: {
        const json_t *o = out->json;
        const char *stage = str_or(o, "stage", "");
        if (json_is_true(json_object_get(o, "ok"))) {
            end = SBX_END_OK;
        } else if (!strcmp(stage, "compile")) {
            end = SBX_END_COMPILE;
            d = str_or(o, "message", "");
        } else if (!strcmp(stage, "runtime")) {
            end = SBX_END_RUNTIME;
            d = str_or(o, "error_type", "");
        } else if (!strcmp(stage, "limit")) {
            end = SBX_END_LIMIT;
            d = str_or(o, "error_type", "timeout");
        }
        break;
    }
    case SBX_TIMEOUT:
    case SBX_OUTPUT:
        end = SBX_END_LIMIT;
        d = out->limit[0] ? out->limit : out->status == SBX_OUTPUT ? "output" : "timeout";
        break;
    case SBX_CANCELLED:
        end = SBX_END_CANCELLED;
        break;
    case SBX_JAIL_FAILURE:
        end = SBX_END_CRASH;
        d = out->detail[0] ? out->detail : "the sandbox child failed";
        break;
    }
    if (detail != NULL) *detail = d;
    return end;
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
