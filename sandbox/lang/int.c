/* sandbox/lang/int: arbitrary-precision ints (GMP) with an int64 fast path:
 * arithmetic with CPython's floor-division/modulo signs, correctly rounded
 * true division and int->float conversion, pow, hashing (mod 2^61-1),
 * exact int/float comparison, int(str, base) parsing with CPython's rules,
 * int(float), the 4300-digit str conversion limit, and the size cap. */
#include "sandbox/lang/value_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_STR_DIGITS 4300

val *vi_from_mpz_take(vctx *c, mpz_ptr z)
{
    if (mpz_fits_slong_p(z)) return v_int64(c, mpz_get_si(z));
    size_t bits = mpz_sizeinbase(z, 2);
    if (bits > c->lim.max_int_bits) return v_limit(c, "memory");
    val *v = v_new(c, VT_INT);
    if (v) v->u.ib.big = z;
    return v;
}

void vi_get_mpz(const val *v, mpz_t out)
{
    int64_t x;
    if (v_type(v) == VT_BOOL)
        mpz_set_si(out, v->u.b);
    else if (vi_small(v, &x))
        mpz_set_si(out, x);
    else
        mpz_set(out, vi_big(v));
}

int vi_sign(const val *v)
{
    int64_t x;
    if (v_type(v) == VT_BOOL) return v->u.b;
    if (vi_small(v, &x)) return (x > 0) - (x < 0);
    return mpz_sgn(vi_big(v));
}

static bool small_of(const val *v, int64_t *x)
{
    if (v_type(v) == VT_BOOL) {
        *x = v->u.b;
        return true;
    }
    return vi_small(v, x);
}

int vi_cmp(const val *a, const val *b)
{
    int64_t x, y;
    if (small_of(a, &x) && small_of(b, &y)) return (x > y) - (x < y);
    mpz_t p, q;
    mpz_inits(p, q, NULL);
    vi_get_mpz(a, p);
    vi_get_mpz(b, q);
    int r = mpz_cmp(p, q);
    mpz_clears(p, q, NULL);
    return (r > 0) - (r < 0);
}

int64_t vi_hash(const val *v)
{
    const uint64_t P = (uint64_t)VHASH_MODULUS;
    int64_t x;
    int64_t h;
    if (small_of(v, &x)) {
        uint64_t m = x < 0 ? -(uint64_t)x : (uint64_t)x;
        h = (int64_t)(m % P);
        if (x < 0) h = -h;
    } else {
        h = (int64_t)mpz_tdiv_ui(vi_big(v), P);
        if (mpz_sgn(vi_big(v)) < 0) h = -h;
    }
    return h == -1 ? -2 : h;
}

/* n/d (d != 0) correctly rounded to a double (round-half-even), like
 * CPython's long true division. *err set + OverflowError raised on overflow. */
double vi_ratio_to_double(vctx *c, const mpz_t num, const mpz_t den, int *err)
{
    *err = 0;
    int sign = mpz_sgn(num) * mpz_sgn(den);
    if (sign == 0) return mpz_sgn(den) < 0 ? -0.0 : 0.0;
    mpz_t n, d, q, r;
    mpz_inits(n, d, q, r, NULL);
    mpz_abs(n, num);
    mpz_abs(d, den);
    long nb = (long)mpz_sizeinbase(n, 2), db = (long)mpz_sizeinbase(d, 2);
    /* scale so the quotient has 55..56 bits */
    long shift = 55 - (nb - db);
    if (shift > 0)
        mpz_mul_2exp(n, n, (mp_bitcnt_t)shift);
    else if (shift < 0)
        mpz_mul_2exp(d, d, (mp_bitcnt_t)(-shift));
    mpz_tdiv_qr(q, r, n, d);
    bool sticky = mpz_sgn(r) != 0;
    long qb = (long)mpz_sizeinbase(q, 2);
    /* value = q * 2^-shift; leading bit exponent */
    long e = qb - 1 - shift;
    double result;
    if (e > 1023) goto overflow;
    int keep = 53;
    if (e < -1022) keep = 53 - (int)(-1022 - e);
    if (keep < 0) keep = 0;
    long drop = qb - keep;
    /* drop >= 2 always (qb >= 55) */
    mpz_t m, low;
    mpz_inits(m, low, NULL);
    mpz_tdiv_q_2exp(m, q, (mp_bitcnt_t)drop);
    mpz_tdiv_r_2exp(low, q, (mp_bitcnt_t)drop);
    /* compare low with half = 2^(drop-1) */
    int half_cmp;
    if (mpz_sgn(low) == 0)
        half_cmp = -1;
    else {
        long lb = (long)mpz_sizeinbase(low, 2);
        if (lb < drop)
            half_cmp = -1;
        else {
            mpz_clrbit(low, (mp_bitcnt_t)(drop - 1));
            half_cmp = (mpz_sgn(low) != 0 || sticky) ? 1 : 0;
        }
    }
    if (half_cmp > 0 || (half_cmp == 0 && mpz_odd_p(m))) mpz_add_ui(m, m, 1);
    double mant = mpz_get_d(m); /* exact: at most 54 bits */
    result = ldexp(mant, (int)(drop - shift));
    mpz_clears(m, low, NULL);
    if (isinf(result)) goto overflow;
    mpz_clears(n, d, q, r, NULL);
    return sign < 0 ? -result : result;
overflow:
    mpz_clears(n, d, q, r, NULL);
    *err = 1;
    v_raise(c, "OverflowError", "integer division result too large for a float");
    return 0;
}

double vi_to_double(vctx *c, const val *v, int *err)
{
    int64_t x;
    *err = 0;
    if (small_of(v, &x) && x >= -(1LL << 53) && x <= (1LL << 53)) return (double)x;
    mpz_t n, one;
    mpz_inits(n, one, NULL);
    vi_get_mpz(v, n);
    mpz_set_ui(one, 1);
    double d = vi_ratio_to_double(c, n, one, err);
    mpz_clears(n, one, NULL);
    if (*err) {
        c->exc = VEXC_NONE;
        v_raise(c, "OverflowError", "int too large to convert to float");
    }
    return d;
}

int vi_cmp_double(const val *a, double d)
{
    if (isinf(d)) return d > 0 ? -1 : 1;
    int64_t x;
    if (small_of(a, &x) && x >= -(1LL << 53) && x <= (1LL << 53)) {
        double xd = (double)x;
        return (xd > d) - (xd < d);
    }
    mpz_t p, t;
    mpz_inits(p, t, NULL);
    vi_get_mpz(a, p);
    double tr = trunc(d);
    mpz_set_d(t, tr);
    int r = mpz_cmp(p, t);
    mpz_clears(p, t, NULL);
    if (r != 0) return (r > 0) - (r < 0);
    double frac = d - tr;
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

int vi_repr_buf(vctx *c, strbuf *b, const val *v)
{
    int64_t x;
    if (small_of(v, &x)) {
        char d[24];
        strbuf_put(b, d, vs_i64_digits(d, x));
        return 0;
    }
    size_t est = mpz_sizeinbase(vi_big(v), 10);
    if (est > MAX_STR_DIGITS + 1) {
        v_raise(c, "ValueError",
                "Exceeds the limit (4300 digits) for integer string conversion; use "
                "sys.set_int_max_str_digits() to increase the limit");
        return -1;
    }
    char *s = mpz_get_str(NULL, 10, vi_big(v));
    size_t n = strlen(s);
    size_t digits = n - (s[0] == '-');
    if (digits > MAX_STR_DIGITS) {
        vi_free_str(s);
        v_raise(c, "ValueError",
                "Exceeds the limit (4300 digits) for integer string conversion; use "
                "sys.set_int_max_str_digits() to increase the limit");
        return -1;
    }
    strbuf_put(b, s, n);
    vi_free_str(s);
    return 0;
}

static val *big_binop(vctx *c, vbinop op, const val *a, const val *b)
{
    mpz_ptr r = vi_mpz_new(c);
    if (!r) return NULL;
    mpz_t x, y;
    mpz_inits(x, y, NULL);
    vi_get_mpz(a, x);
    vi_get_mpz(b, y);
    val *res = NULL;
    switch (op) {
    case BIN_ADD:
        mpz_add(r, x, y);
        break;
    case BIN_SUB:
        mpz_sub(r, x, y);
        break;
    case BIN_MUL:
        if (mpz_sizeinbase(x, 2) + mpz_sizeinbase(y, 2) > c->lim.max_int_bits + 1) {
            v_limit(c, "memory");
            goto done;
        }
        mpz_mul(r, x, y);
        break;
    case BIN_FLOORDIV:
    case BIN_MOD:
        if (mpz_sgn(y) == 0) {
            v_raise(c, "ZeroDivisionError", "integer division or modulo by zero");
            goto done;
        }
        if (op == BIN_FLOORDIV)
            mpz_fdiv_q(r, x, y);
        else
            mpz_fdiv_r(r, x, y);
        break;
    case BIN_POW: {
        if (mpz_sgn(y) < 0) {
            int err;
            double bx = vi_to_double(c, a, &err);
            if (err) goto done;
            double by = mpz_get_d(y);
            if (bx == 0.0) {
                v_raise(c, "ZeroDivisionError", "0.0 cannot be raised to a negative power");
                goto done;
            }
            res = v_float(c, pow(bx, by));
            goto done;
        }
        if (!mpz_fits_ulong_p(y)) {
            if (mpz_cmpabs_ui(x, 1) <= 0) {
                /* 0, 1, -1 */
                if (mpz_sgn(x) >= 0)
                    mpz_set(r, x);
                else
                    mpz_set_si(r, mpz_odd_p(y) ? -1 : 1);
                break;
            }
            v_limit(c, "memory");
            goto done;
        }
        unsigned long e = mpz_get_ui(y);
        size_t bits = mpz_sizeinbase(x, 2);
        if (mpz_cmpabs_ui(x, 1) > 0 &&
            (double)bits * (double)e > (double)c->lim.max_int_bits + 64) {
            v_limit(c, "memory");
            goto done;
        }
        mpz_pow_ui(r, x, e);
        break;
    }
    case BIN_DIV: {
        if (mpz_sgn(y) == 0) {
            v_raise(c, "ZeroDivisionError", "division by zero");
            goto done;
        }
        int err;
        double d = vi_ratio_to_double(c, x, y, &err);
        if (!err) res = v_float(c, d);
        goto done;
    }
    }
    res = vi_from_mpz_take(c, r);
done:
    mpz_clears(x, y, NULL);
    return res;
}

val *vi_binop(vctx *c, vbinop op, val *a, val *b)
{
    int64_t x, y, r;
    if (small_of(a, &x) && small_of(b, &y)) {
        switch (op) {
        case BIN_ADD:
            if (!__builtin_add_overflow(x, y, &r)) return v_int64(c, r);
            break;
        case BIN_SUB:
            if (!__builtin_sub_overflow(x, y, &r)) return v_int64(c, r);
            break;
        case BIN_MUL:
            if (!__builtin_mul_overflow(x, y, &r)) return v_int64(c, r);
            break;
        case BIN_FLOORDIV:
            if (y == 0)
                return v_raise(c, "ZeroDivisionError", "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) break;
            r = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) r--;
            return v_int64(c, r);
        case BIN_MOD:
            if (y == 0)
                return v_raise(c, "ZeroDivisionError", "integer division or modulo by zero");
            if (y == -1) return v_int64(c, 0);
            r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return v_int64(c, r);
        case BIN_DIV:
            if (y == 0) return v_raise(c, "ZeroDivisionError", "division by zero");
            if (x >= -(1LL << 53) && x <= (1LL << 53) && y >= -(1LL << 53) && y <= (1LL << 53))
                return v_float(c, (double)x / (double)y);
            break;
        case BIN_POW:
            if (y >= 0 && y < 64) {
                int64_t acc = 1, base = x;
                int64_t e = y;
                bool ovf = false;
                while (e) {
                    if (e & 1) ovf |= __builtin_mul_overflow(acc, base, &acc);
                    e >>= 1;
                    if (e) ovf |= __builtin_mul_overflow(base, base, &base);
                    if (ovf) break;
                }
                if (!ovf) return v_int64(c, acc);
            }
            break;
        }
    }
    return big_binop(c, op, a, b);
}

val *vi_from_double(vctx *c, double d)
{
    if (isnan(d)) return v_raise(c, "ValueError", "cannot convert float NaN to integer");
    if (isinf(d)) return v_raise(c, "OverflowError", "cannot convert float infinity to integer");
    double t = trunc(d);
    if (t >= -9.2e18 && t <= 9.2e18) return v_int64(c, (int64_t)t);
    mpz_ptr z = vi_mpz_new(c);
    if (!z) return NULL;
    mpz_set_d(z, t);
    return vi_from_mpz_take(c, z);
}

static int digit_val(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'Z') return ch - 'A' + 10;
    return 99;
}

/* int(str, base) / int literal. Whitespace (Unicode) around is allowed for
 * int() but not for literals (the lexer never passes any). */
static val *parse_core(vctx *c, const char *s, size_t len, int base, bool literal);

val *vi_parse(vctx *c, const char *s, size_t len, int base, bool literal)
{
    bool ascii = true;
    for (size_t i = 0; i < len && ascii; i++)
        if ((unsigned char)s[i] >= 0x80) ascii = false;
    if (ascii || literal) return parse_core(c, s, len, base, literal);
    size_t n;
    char *t = vs_to_ascii_number(s, len, &n);
    if (!t) return v_limit(c, "memory");
    val *r = parse_core(c, t, n, base, literal);
    free(t);
    return r;
}

static val *parse_core(vctx *c, const char *s, size_t len, int base, bool literal)
{
    const char *orig = s;
    size_t olen = len;
    size_t lo, hi;
    vs_trim_space(orig, olen, &lo, &hi);
    s = orig + lo;
    len = hi - lo;
    bool neg = false;
    size_t i = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) {
        neg = s[i] == '-';
        i++;
    }
    int b = base;
    bool prefixed = false;
    if (i + 1 < len && s[i] == '0') {
        char p = (char)tolower((unsigned char)s[i + 1]);
        int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
        if (pb && (b == 0 || b == pb)) {
            b = pb;
            i += 2;
            prefixed = true;
        }
    }
    if (b == 0) b = 10;
    char *digits = malloc(len + 1);
    if (!digits) return v_limit(c, "memory");
    size_t nd = 0;
    bool ok = true;
    bool allow_us = prefixed, prev_us = false;
    for (; i < len; i++) {
        char ch = s[i];
        if (ch == '_') {
            if (!allow_us) {
                ok = false;
                break;
            }
            allow_us = false;
            prev_us = true;
            continue;
        }
        if (digit_val((unsigned char)ch) >= b) {
            ok = false;
            break;
        }
        digits[nd++] = ch;
        allow_us = true;
        prev_us = false;
    }
    if (prev_us) ok = false;
    if (nd == 0) ok = false;
    /* base 0: no leading zeros in a nonzero decimal */
    if (ok && base == 0 && !prefixed && nd > 1 && digits[0] == '0') {
        for (size_t k = 0; k < nd; k++)
            if (digits[k] != '0') {
                ok = false;
                break;
            }
    }
    digits[nd] = 0;
    if (!ok) {
        free(digits);
        if (literal) return v_raise(c, "SyntaxError", "invalid literal");
        strbuf rb;
        strbuf_init(&rb);
        vs_repr_text(&rb, orig, olen);
        v_raise(c, "ValueError", "invalid literal for int() with base %d: %.200s", base,
                rb.data ? rb.data : "");
        strbuf_free(&rb);
        return NULL;
    }
    if ((b & (b - 1)) != 0 && nd > MAX_STR_DIGITS) {
        free(digits);
        return v_raise(
            c, "ValueError",
            "Exceeds the limit (4300 digits) for integer string conversion: value has %zu digits; "
            "use sys.set_int_max_str_digits() to increase the limit",
            nd);
    }
    if (nd <= 15 || (b <= 10 && nd <= 18)) {
        int64_t x = 0;
        for (size_t k = 0; k < nd; k++)
            x = x * b + digit_val((unsigned char)digits[k]);
        free(digits);
        return v_int64(c, neg ? -x : x);
    }
    mpz_ptr z = vi_mpz_new(c);
    if (!z) {
        free(digits);
        return NULL;
    }
    mpz_set_str(z, digits, b);
    free(digits);
    if (neg) mpz_neg(z, z);
    return vi_from_mpz_take(c, z);
}
