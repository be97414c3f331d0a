/* sandbox/lang/complex: Python complex numbers (from imaginary literals) and
 * the Ellipsis singleton: arithmetic with CPython's algorithms (_Py_c_quot,
 * integer powers by repeated squaring), equality, hashing, abs, repr. */
#include "sandbox/lang/value_impl.h"

#include <math.h>
#include <stdio.h>

static val g_ellipsis = {.ty = VT_ELLIPSIS};

val *v_ellipsis(void)
{
    return &g_ellipsis;
}

val *v_complex(vctx *c, double re, double im)
{
    val *v = v_new(c, VT_COMPLEX);
    if (v) {
        v->u.cx.re = re;
        v->u.cx.im = im;
    }
    return v;
}

typedef struct {
    double re, im;
} cpx;

static cpx prod(cpx a, cpx b)
{
    return (cpx){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

static int quot(cpx a, cpx b, cpx *r)
{
    double abr = fabs(b.re), abi = fabs(b.im);
    if (abr >= abi) {
        if (abr == 0.0) return -1;
        double ratio = b.im / b.re, denom = b.re + b.im * ratio;
        r->re = (a.re + a.im * ratio) / denom;
        r->im = (a.im - a.re * ratio) / denom;
    } else if (abi >= abr) {
        double ratio = b.re / b.im, denom = b.re * ratio + b.im;
        r->re = (a.re * ratio + a.im) / denom;
        r->im = (a.im * ratio - a.re) / denom;
    } else {
        r->re = r->im = NAN;
    }
    return 0;
}

int vc_as(vctx *c, val *v, cpx *out)
{
    if (v_type(v) == VT_COMPLEX) {
        out->re = v->u.cx.re;
        out->im = v->u.cx.im;
        return 0;
    }
    if (v_type(v) == VT_FLOAT) {
        out->re = v->u.f;
        out->im = 0.0;
        return 0;
    }
    int err;
    out->re = vi_to_double(c, v, &err);
    out->im = 0.0;
    return err ? -1 : 0;
}

val *vc_binop(vctx *c, vbinop op, val *a, val *b)
{
    cpx x, y, r;
    if (vc_as(c, a, &x) || vc_as(c, b, &y)) return NULL;
    switch (op) {
    case BIN_ADD:
        r = (cpx){x.re + y.re, x.im + y.im};
        break;
    case BIN_SUB:
        r = (cpx){x.re - y.re, x.im - y.im};
        break;
    case BIN_MUL:
        r = prod(x, y);
        break;
    case BIN_DIV:
        if (quot(x, y, &r)) return v_raise(c, "ZeroDivisionError", "complex division by zero");
        break;
    case BIN_POW: {
        if (y.im == 0.0 && y.re == floor(y.re) && fabs(y.re) <= 100.0) {
            long n = (long)y.re;
            cpx base = x, acc = {1.0, 0.0};
            long m = n < 0 ? -n : n;
            for (long mask = 1; mask > 0 && m >= mask; mask <<= 1) {
                if (m & mask) acc = prod(acc, base);
                base = prod(base, base);
            }
            if (n < 0) {
                if (quot((cpx){1.0, 0.0}, acc, &acc))
                    return v_raise(c, "ZeroDivisionError", "0.0 to a negative or complex power");
            }
            r = acc;
        } else {
            return v_raise(c, "TypeError", "unsupported complex power");
        }
        if (isinf(r.re) || isinf(r.im))
            return v_raise(c, "OverflowError", "complex exponentiation");
        break;
    }
    default: {
        static const char *sym[] = {"+", "-", "*", "/", "//", "%", "**"};
        return v_raise(c, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'", sym[op],
                       v_type_name(a), v_type_name(b));
    }
    }
    return v_complex(c, r.re, r.im);
}

static void part(strbuf *b, double d, bool sign)
{
    if (sign && !signbit(d) && !isnan(d)) strbuf_putc(b, '+');
    if (sign && isnan(d)) strbuf_putc(b, '+');
    size_t at = b->len;
    pyfloat_repr(b, d);
    /* repr without the ".0" CPython's float repr adds */
    if (b->len - at >= 2 && b->data[b->len - 2] == '.' && b->data[b->len - 1] == '0') b->len -= 2;
    b->data[b->len] = 0;
}

int vc_repr_buf(strbuf *b, const val *v)
{
    double re = v->u.cx.re, im = v->u.cx.im;
    if (re == 0.0 && !signbit(re)) {
        part(b, im, false);
        strbuf_putc(b, 'j');
        return 0;
    }
    strbuf_putc(b, '(');
    part(b, re, false);
    part(b, im, true);
    strbuf_put(b, "j)", 2);
    return 0;
}

int64_t vc_hash(const val *v)
{
    uint64_t hr = (uint64_t)vf_hash(v->u.cx.re), hi = (uint64_t)vf_hash(v->u.cx.im);
    uint64_t h = hr + 1000003ull * hi;
    int64_t r = (int64_t)h;
    return r == -1 ? -2 : r;
}

int vc_eq(vctx *c, val *a, val *b)
{
    cpx x, y;
    if (v_type(a) == VT_COMPLEX && v_type(b) == VT_COMPLEX)
        return a->u.cx.re == b->u.cx.re && a->u.cx.im == b->u.cx.im;
    val *cv = v_type(a) == VT_COMPLEX ? a : b, *o = v_type(a) == VT_COMPLEX ? b : a;
    if (cv->u.cx.im != 0.0) return 0;
    if (v_type(o) == VT_FLOAT) return cv->u.cx.re == o->u.f;
    /* exact int comparison as CPython (complex_richcompare with an int) */
    if (isnan(cv->u.cx.re) || isinf(cv->u.cx.re)) return 0;
    (void)c;
    (void)x;
    (void)y;
    return vi_cmp_double(o, cv->u.cx.re) == 0;
}

val *vc_abs(vctx *c, val *v)
{
    double re = v->u.cx.re, im = v->u.cx.im;
    double r = hypot(re, im);
    if (isinf(r) && isfinite(re) && isfinite(im))
        return v_raise(c, "OverflowError", "absolute value too large");
    return v_float(c, r);
}
