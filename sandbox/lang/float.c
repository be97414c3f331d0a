/* sandbox/lang/float: IEEE doubles as CPython's float (repr is common/pyfloat):
 * hashing, arithmetic with float_divmod's signs and ZeroDivisionError/OverflowError, float(str)
 * parsing, and round() (banker's; round(x, n) correctly rounded on the exact
 * binary value as CPython's dtoa-based rounding). */
#include "sandbox/lang/value_impl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

int64_t vf_hash(double v)
{
    const uint64_t MOD = (uint64_t)VHASH_MODULUS;
    const int BITS = 61;
    if (!isfinite(v)) {
        if (isinf(v)) return v > 0 ? 314159 : -314159;
        return 0;
    }
    int e;
    double m = frexp(v, &e);
    int sign = 1;
    if (m < 0) {
        sign = -1;
        m = -m;
    }
    uint64_t x = 0;
    while (m) {
        x = ((x << 28) & MOD) | x >> (BITS - 28);
        m *= 268435456.0;
        e -= 28;
        uint64_t y = (uint64_t)m;
        m -= (double)y;
        x += y;
        if (x >= MOD) x -= MOD;
    }
    e = e >= 0 ? e % BITS : BITS - 1 - ((-1 - e) % BITS);
    x = ((x << e) & MOD) | x >> (BITS - e);
    int64_t h = (int64_t)x * sign;
    return h == -1 ? -2 : h;
}

val *vf_binop(vctx *c, vbinop op, double a, double b)
{
    switch (op) {
    case BIN_ADD:
        return v_float(c, a + b);
    case BIN_SUB:
        return v_float(c, a - b);
    case BIN_MUL:
        return v_float(c, a * b);
    case BIN_DIV:
        if (b == 0.0) return v_raise(c, "ZeroDivisionError", "float division by zero");
        return v_float(c, a / b);
    case BIN_FLOORDIV:
    case BIN_MOD: {
        if (b == 0.0)
            return v_raise(c, "ZeroDivisionError",
                           op == BIN_MOD ? "float modulo" : "float floor division by zero");
        double mod = fmod(a, b);
        double div = (a - mod) / b;
        if (mod) {
            if ((b < 0) != (mod < 0)) {
                mod += b;
                div -= 1.0;
            }
        } else {
            mod = copysign(0.0, b);
        }
        double fd;
        if (div) {
            fd = floor(div);
            if (div - fd > 0.5) fd += 1.0;
        } else {
            fd = copysign(0.0, a / b);
        }
        return v_float(c, op == BIN_MOD ? mod : fd);
    }
    case BIN_POW: {
        if (b == 0) return v_float(c, 1.0);
        if (isnan(a)) return v_float(c, a == 1.0 ? 1.0 : a);
        if (a == 0.0 && b < 0)
            return v_raise(c, "ZeroDivisionError", "0.0 cannot be raised to a negative power");
        if (a < 0 && b != floor(b) && isfinite(b))
            return v_raise(c, "ValueError", "complex results are not supported");
        errno = 0;
        double r = pow(a, b);
        if (isinf(r) && isfinite(a) && isfinite(b))
            return v_raise(c, "OverflowError", "(34, 'Numerical result out of range')");
        return v_float(c, r);
    }
    }
    return NULL;
}

static val *parse_error(vctx *c, const char *s, size_t len)
{
    strbuf rb;
    strbuf_init(&rb);
    vs_repr_text(&rb, s, len);
    v_raise(c, "ValueError", "could not convert string to float: %.200s", rb.data ? rb.data : "");
    strbuf_free(&rb);
    return NULL;
}

static val *fparse_core(vctx *c, const char *s0, size_t len0);

val *vf_parse(vctx *c, const char *s0, size_t len0)
{
    bool ascii = true;
    for (size_t i = 0; i < len0 && ascii; i++)
        if ((unsigned char)s0[i] >= 0x80) ascii = false;
    if (ascii) return fparse_core(c, s0, len0);
    size_t n;
    char *t = vs_to_ascii_number(s0, len0, &n);
    if (!t) return v_limit(c, "memory");
    val *r = fparse_core(c, t, n);
    free(t);
    return r;
}

/* Copies the run of digits at s[*i, len) to buf at *n, dropping its
 * underscores, each of which must stand between two digits: returns how many
 * digits, -1 on a misplaced underscore. */
static int digit_run(const char *s, size_t len, size_t *i, char *buf, size_t *n)
{
    int digits = 0;
    bool prev_digit = false;
    size_t k = *i, m = *n;
    while (k < len && (isdigit((unsigned char)s[k]) || s[k] == '_')) {
        if (s[k] == '_') {
            if (!prev_digit || k + 1 >= len || !isdigit((unsigned char)s[k + 1])) return -1;
            k++;
            prev_digit = false;
            continue;
        }
        buf[m++] = s[k++];
        digits++;
        prev_digit = true;
    }
    *i = k;
    *n = m;
    return digits;
}

static val *fparse_core(vctx *c, const char *s0, size_t len0)
{
    size_t lo, hi;
    vs_trim_space(s0, len0, &lo, &hi);
    const char *s = s0 + lo;
    size_t len = hi - lo;
    if (len == 0 || len > 100000) return parse_error(c, s0, len0);
    char *buf = malloc(len + 1);
    if (!buf) return v_limit(c, "memory");
    size_t i = 0, n = 0;
    bool neg = false;
    if (s[i] == '+' || s[i] == '-') {
        neg = s[i] == '-';
        buf[n++] = s[i++];
    }
    const char *rest = s + i;
    size_t rl = len - i;
    double result;
    if ((rl == 3 && !strncasecmp(rest, "inf", 3)) ||
        (rl == 8 && !strncasecmp(rest, "infinity", 8))) {
        result = neg ? -INFINITY : INFINITY;
        goto ok;
    }
    if (rl == 3 && !strncasecmp(rest, "nan", 3)) {
        result = neg ? -NAN : NAN;
        goto ok;
    }
    /* digits [. digits] [e [sign] digits], underscores only between digits */
    int int_digits = digit_run(s, len, &i, buf, &n), frac_digits = 0;
    if (int_digits < 0) goto bad;
    if (i < len && s[i] == '.') {
        buf[n++] = s[i++];
        frac_digits = digit_run(s, len, &i, buf, &n);
        if (frac_digits < 0) goto bad;
    }
    if (int_digits + frac_digits == 0) goto bad;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        buf[n++] = s[i++];
        if (i < len && (s[i] == '+' || s[i] == '-')) buf[n++] = s[i++];
        if (digit_run(s, len, &i, buf, &n) <= 0) goto bad;
    }
    if (i != len) goto bad;
    buf[n] = 0;
    result = strtod(buf, NULL);
ok:
    free(buf);
    return v_float(c, result);
bad:
    free(buf);
    return parse_error(c, s0, len0);
}

val *vf_round(vctx *c, double x, val *nd)
{
    if (nd == NULL || v_type(nd) == VT_NONE) {
        double r = round(x);
        if (fabs(x - r) == 0.5) r = 2.0 * round(x / 2.0);
        return vi_from_double(c, r);
    }
    int64_t n;
    if (!v_is_intlike(nd))
        return v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer",
                       v_type_name(nd));
    if (!v_as_i64(nd, &n)) n = vi_sign(nd) > 0 ? INT64_MAX : INT64_MIN;
    if (!isfinite(x) || x == 0.0) return v_float(c, x);
    if (n > 323) return v_float(c, x);
    if (n < -308) return v_float(c, 0.0 * x);
    if (n >= 0) {
        char buf[800];
        snprintf(buf, sizeof buf, "%.*f", (int)n, x);
        double r = strtod(buf, NULL);
        if (isinf(r)) return v_raise(c, "OverflowError", "rounded value too large to represent");
        return v_float(c, r);
    }
    /* negative: exact rational arithmetic, round half to even */
    mpq_t q;
    mpz_t num, den, quo, rem, ten;
    mpq_init(q);
    mpz_inits(num, den, quo, rem, ten, NULL);
    mpq_set_d(q, x);
    mpz_set(num, mpq_numref(q));
    mpz_ui_pow_ui(ten, 10, (unsigned long)(-n));
    mpz_mul(den, mpq_denref(q), ten);
    mpz_fdiv_qr(quo, rem, num, den);
    mpz_mul_2exp(rem, rem, 1);
    int cmp = mpz_cmp(rem, den);
    if (cmp > 0 || (cmp == 0 && mpz_odd_p(quo))) mpz_add_ui(quo, quo, 1);
    val *res;
    if (mpz_sgn(quo) == 0)
        res = v_float(c, copysign(0.0, x));
    else {
        mpz_mul(quo, quo, ten);
        mpz_set_ui(ten, 1);
        int err;
        double r = vi_ratio_to_double(c, quo, ten, &err);
        if (err) {
            c->exc = VEXC_NONE;
            res = v_raise(c, "OverflowError", "rounded value too large to represent");
        } else {
            res = v_float(c, r);
        }
    }
    mpq_clear(q);
    mpz_clears(num, den, quo, rem, ten, NULL);
    return res;
}

/* float.hex() as CPython's float_hex */
val *vf_method(vctx *c, val *v, const char *name, val **a, size_t na, const vkwarg *kw, size_t nkw,
               bool *found)
{
    if (strcmp(name, "hex")) {
        *found = false;
        return NULL;
    }
    *found = true;
    if (v_parse_args(c, "float.hex", a, na, kw, nkw, NULL, 0, 0, 0, NULL)) return NULL;
    double x = v->u.f;
    strbuf b;
    strbuf_init(&b);
    if (isnan(x) || isinf(x))
        pyfloat_repr(&b, x);
    else if (x == 0.0)
        strbuf_puts(&b, signbit(x) ? "-0x0.0p+0" : "0x0.0p+0");
    else {
        int e;
        double m = frexp(fabs(x), &e);
        int shift = 1 - ((-1021 - e) > 0 ? (-1021 - e) : 0);
        m = ldexp(m, shift);
        e -= shift;
        static const char hx[] = "0123456789abcdef";
        char s[32];
        int si = 0;
        s[si++] = hx[(int)m];
        m -= (int)m;
        s[si++] = '.';
        for (int i = 0; i < 13; i++) {
            m *= 16.0;
            s[si++] = hx[(int)m];
            m -= (int)m;
        }
        s[si] = 0;
        strbuf_printf(&b, "%s0x%sp%c%d", x < 0 ? "-" : "", s, e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    val *r = v_str(c, b.data, b.len);
    strbuf_free(&b);
    return r;
}
