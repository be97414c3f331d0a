/* common/err: see err.h. */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>

int fps_err_vset(fps_err *e, int code, int http_status, const char *name, const char *fmt,
                 va_list ap)
{
    if (e == NULL) return code;
    e->code = code;
    e->http_status = http_status;
    snprintf(e->name, sizeof e->name, "%s", name ? name : "");
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return code;
}

int fps_err_set(fps_err *e, int code, int http_status, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fps_err_vset(e, code, http_status, name, fmt, ap);
    va_end(ap);
    return code;
}
