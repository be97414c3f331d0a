/* sandbox/lang/exc: an evaluation's exception and step state (value.h):
 * raising, limits (which are final), and the step budget's slow path. */
#include "sandbox/lang/value_impl.h"

#include <stdarg.h>
#include <stdio.h>

val *v_raise(vctx *c, const char *type, const char *fmt, ...)
{
    if (c->exc != VEXC_NONE) return NULL; /* keep the first */
    c->exc = VEXC_PY;
    snprintf(c->exc_type, sizeof c->exc_type, "%s", type);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->exc_msg, sizeof c->exc_msg, fmt, ap);
    va_end(ap);
    return NULL;
}

val *v_limit(vctx *c, const char *kind)
{
    /* a limit always wins over a Python exception being raised */
    c->exc = VEXC_LIMIT;
    snprintf(c->exc_type, sizeof c->exc_type, "%s", kind);
    c->exc_msg[0] = 0;
    return NULL;
}

vexc_kind v_exc_kind(const vctx *c)
{
    return c->exc;
}
const char *v_exc_type(const vctx *c)
{
    return c->exc ? c->exc_type : "";
}
bool v_failed(const vctx *c)
{
    return c->exc != VEXC_NONE;
}
void v_exc_clear(vctx *c)
{
    if (c->exc == VEXC_LIMIT) return; /* limits are final */
    c->exc = VEXC_NONE;
    c->exc_type[0] = c->exc_msg[0] = 0;
}

int v__steps_slow(vctx *c)
{
    v_limit(c, "steps");
    return -1;
}

int v_steps(vctx *c, uint64_t n)
{
    c->hot.steps += n;
    if (c->hot.steps > c->hot.max_steps) return v__steps_slow(c);
    return 0;
}
