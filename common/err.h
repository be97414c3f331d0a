/* common/err: the one error convention of this code base.
 *
 * A fallible function returns a status: 0 for success, a module's own
 * negative (or documented non-zero) code for failure. Callers that want
 * details pass an fps_err (caller-owned, usually on the stack) that the
 * callee fills on failure and leaves alone on success. Callers branch on
 * `code` (and `name` where the error crosses a wire), never on `msg`, which
 * is for people: one line, "<module>: <operation>: <reason>".
 *
 * `http_status` is set where an error maps onto an HTTP answer (the admin
 * API and the local-evaluator registry); `name` is the stable snake_case code
 * that JSON error envelopes carry ("not_found", "conflict", ...). */
#ifndef FPS_ERR_H
#define FPS_ERR_H
#include <stdarg.h>
#include <stddef.h>

typedef struct {
    int code;        /* the module's status value; 0 = no error */
    int http_status; /* the HTTP status this error answers with; 0 = none */
    char name[48];   /* stable machine-readable code; "" = none */
    char msg[512];   /* one human-readable line */
} fps_err;

/* Fills e (if not NULL) and returns `code`, so a callee can write
 * `return fps_err_set(e, ST_X, 404, "not_found", "no run %s", id);`. */
int fps_err_set(fps_err *e, int code, int http_status, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The same with a va_list, for a module's own short setters. */
int fps_err_vset(fps_err *e, int code, int http_status, const char *name, const char *fmt,
                 va_list ap) __attribute__((format(printf, 5, 0)));

#endif
