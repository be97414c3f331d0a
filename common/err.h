/* common/err: the one error convention of this code base.
 *
 * A fallible function returns a status: 0 for success, a module's own
 * non-zero code for failure (negative, declared in the module's header next
 * to what returns it, e.g. SIMG_EINVALID; a function returning a pointer
 * returns NULL and puts the code in the struct). Callers that want details
 * pass an fps_err (caller-owned, usually on the stack; NULL when they do not
 * care) that the callee fills on failure and leaves alone on success. The
 * callee fills it once, where the failure is found: a caller passes it on
 * unchanged, or reads it to add its own context, never rewrites it in place.
 *
 * Callers branch on `code`, or on `name` where the error crosses a wire,
 * never on `msg`: the message is for people (logs, an answer's "message"):
 * one line saying what failed and why, never a secret, never transcript text.
 * Tests may check it; code never parses it.
 *
 * `http_status` is set where an error maps onto an HTTP answer (the admin
 * API and the local-evaluator registry) or came with one (a server's answer
 * in cloud_error); `name` is the stable snake_case code
 * that JSON error envelopes and logs carry ("not_found", "invalid_transcript",
 * ...). A module with many failure sites keeps one small static setter (a
 * format, its code and name) on fps_err_vset instead of repeating the four
 * fields at every site.
 *
 * Every fallible function of every module reports this way: the command
 * line (cli.h), secrets (secret.h), the language's lexer, parser and source
 * checks (lang/), the session image (simg.h), the jail's pool and images
 * (sbx.h), the store (store_err is this type: code a store_status, name its
 * store_status_name), the admin API (api.h, its body scanner and function
 * tables), the daemon's configuration, catalog, plan matching, worker,
 * outbox and local-evaluator registry (sidecar/), and the emulator. Where a
 * failure needs more than these four fields the type embeds an fps_err:
 * cloud_error (cloud.h: err.code the kind of failure, err.name the server's
 * own wire code, plus the request id and retryability a protocol error
 * needs). sbx_outcome is an evaluation's result, not an error of the call. */
#ifndef FPS_ERR_H
#define FPS_ERR_H
#include <stdarg.h>
#include <stddef.h>

typedef struct {
    int code;        /* the module's status value; 0 = no error */
    int http_status; /* the HTTP status this error answers with; 0 = none */
    char name[64];   /* stable machine-readable code; "" = none */
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
