/* sandbox/lang/format: format(value, spec) for f-strings (the format-spec
 * mini-language of CPython 3.11 for str, int, bool and float: fill, align,
 * sign, z, #, 0, width, grouping , and _, precision, types b c d e E f F g
 * G n o s x X %) and printf-style `str % args` (%s %r %a %d %i %u %o %x %X
 * %e %E %f %F %g %G %c %%, flags, * widths, tuples and mapping keys). */
#include "sandbox/lang/value_impl.h"
#include "sandbox/lang/utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int32_t fill;
    char align; /* 0, '<', '>', '=', '^' */
    char sign;  /* 0, '+', '-', ' ' */
    bool z, alt;
    int64_t width; /* -1 none */
    char group;    /* 0, ',', '_' */
    int64_t prec;  /* -1 none */
    char type;     /* 0 or code */
} fspec;

static bool is_align(int32_t ch)
{
    return ch == '<' || ch == '>' || ch == '=' || ch == '^';
}

/* A width or precision: decimal digits at cp[*p..], read as CPython's
 * get_integer reads them, into a Py_ssize_t (more is an error). */
static int spec_number(vctx *c, const int32_t *cp, size_t m, size_t *p, int64_t *out)
{
    int64_t w = 0;
    while (*p < m && cp[*p] >= '0' && cp[*p] <= '9') {
        int d = cp[(*p)++] - '0';
        if (w > (INT64_MAX - d) / 10) {
            v_raise(c, "ValueError", "Too many decimal digits in format string");
            return -1;
        }
        w = w * 10 + d;
    }
    *out = w;
    return 0;
}

static int parse_spec(vctx *c, const char *s, size_t n, fspec *f, char default_align,
                      const char *tname)
{
    f->fill = ' ';
    f->align = 0;
    f->sign = 0;
    f->z = f->alt = false;
    f->width = f->prec = -1;
    f->group = 0;
    f->type = 0;
    /* decode to code points (specs are short) */
    int32_t cp[256];
    size_t m = 0, i = 0;
    while (i < n) {
        size_t adv;
        if (m >= 255) {
            v_raise(c, "ValueError", "Too many decimal digits in format string");
            return -1;
        }
        cp[m++] = vs_decode1(s + i, n - i, &adv);
        i += adv;
    }
    size_t p = 0;
    bool fill_spec = false, align_spec = false;
    if (m - p >= 2 && is_align(cp[p + 1])) {
        f->fill = cp[p];
        f->align = (char)cp[p + 1];
        fill_spec = align_spec = true;
        p += 2;
    } else if (m - p >= 1 && is_align(cp[p])) {
        f->align = (char)cp[p];
        align_spec = true;
        p++;
    }
    if (p < m && (cp[p] == '+' || cp[p] == '-' || cp[p] == ' ')) f->sign = (char)cp[p++];
    if (p < m && cp[p] == 'z') {
        f->z = true;
        p++;
    }
    if (p < m && cp[p] == '#') {
        f->alt = true;
        p++;
    }
    if (!fill_spec && p < m && cp[p] == '0') {
        f->fill = '0';
        if (!align_spec && default_align == '>') f->align = '=';
        p++;
    }
    if (p < m && cp[p] >= '0' && cp[p] <= '9') {
        if (spec_number(c, cp, m, &p, &f->width)) return -1;
    }
    if (p < m && cp[p] == ',') {
        f->group = ',';
        p++;
    }
    if (p < m && cp[p] == '_') {
        if (f->group) {
            v_raise(c, "ValueError", "Cannot specify both ',' and '_'.");
            return -1;
        }
        f->group = '_';
        p++;
    }
    if (p < m && cp[p] == ',') {
        v_raise(c, "ValueError", "Cannot specify both ',' and '_'.");
        return -1;
    }
    if (p < m && cp[p] == '.') {
        p++;
        if (!(p < m && cp[p] >= '0' && cp[p] <= '9')) {
            v_raise(c, "ValueError", "Format specifier missing precision");
            return -1;
        }
        if (spec_number(c, cp, m, &p, &f->prec)) return -1;
    }
    if (m - p > 1) {
        strbuf b;
        strbuf_init(&b);
        strbuf_put(&b, s, n);
        v_raise(c, "ValueError", "Invalid format specifier '%s' for object of type '%s'", b.data,
                tname);
        strbuf_free(&b);
        return -1;
    }
    if (m - p == 1) {
        if (cp[p] > 127) {
            v_raise(c, "ValueError", "Unknown format code '\\x%x' for object of type '%s'", cp[p],
                    tname);
            return -1;
        }
        f->type = (char)cp[p];
    }
    if (f->group) {
        switch (f->type) {
        case 'd':
        case 'e':
        case 'f':
        case 'g':
        case 'E':
        case 'G':
        case '%':
        case 'F':
        case 0:
            break;
        case 'b':
        case 'o':
        case 'x':
        case 'X':
            if (f->group == '_') break;
            /* fallthrough */
        default:
            v_raise(c, "ValueError", "Cannot specify '%c' with '%c'.", f->group, f->type);
            return -1;
        }
    }
    return 0;
}

/* Writes n copies of the fill character fb (fl bytes) at o + k; returns
 * the new end. */
static size_t put_fill(char *o, size_t k, const char *fb, int fl, int64_t n)
{
    if (n <= 0) return k;
    if (fl == 1) {
        memset(o + k, fb[0], (size_t)n);
        return k + (size_t)n;
    }
    vs_fill_repeat(o + k, fb, (size_t)fl, (size_t)n * (size_t)fl);
    return k + (size_t)n * (size_t)fl;
}

/* A formatted value's text in parts, so that the result is written once,
 * into the string returned (a long one, '%.*x' % (10**6, 255) or
 * f'{1.5:.{10**6}f}', exists once at the peak): the head (sign and prefix;
 * '=' pads after it), `zeros` '0's then `digits`, the two grouped by `sep`
 * every `every` digits (sep 0: not grouped), the rest, `rest_zeros` '0's,
 * the tail. All borrowed but the head. */
typedef struct {
    char head[8];
    size_t nhead;
    size_t zeros;
    const char *digits;
    size_t ndigits;
    char sep;
    int every;
    const char *rest;
    size_t nrest;
    size_t rest_zeros;
    const char *tail;
    size_t ntail;
} fparts;

/* Copies n bytes of s (NULL when n is 0) to o + k; returns the new end. */
static size_t put_run(char *o, size_t k, const char *s, size_t n)
{
    if (n) memcpy(o + k, s, n);
    return k + n;
}

static size_t grouped_len(const fparts *p)
{
    size_t n = p->zeros + p->ndigits;
    return p->sep && n ? n + (n - 1) / (size_t)p->every : n;
}

/* Writes the grouped digits at o; returns their length. */
static size_t put_grouped(char *o, const fparts *p)
{
    size_t n = p->zeros + p->ndigits;
    if (!p->sep) {
        memset(o, '0', p->zeros);
        return put_run(o, p->zeros, p->digits, p->ndigits);
    }
    size_t every = (size_t)p->every, first = n % every ? n % every : every, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i >= first && (i - first) % every == 0) o[k++] = p->sep;
        o[k++] = i < p->zeros ? '0' : p->digits[i - p->zeros];
    }
    return k;
}

/* Writes the parts after the head at o; returns the new end. */
static size_t put_body(char *o, size_t k, const fparts *p)
{
    k = put_run(o, k + put_grouped(o + k, p), p->rest, p->nrest);
    memset(o + k, '0', p->rest_zeros);
    return put_run(o, k + p->rest_zeros, p->tail, p->ntail);
}

/* Pads the parts' text (UTF-8, ncp code points) to the spec's width, in
 * the string returned. For '=' the padding goes after the head. */
static val *finish(vctx *c, const fspec *f, const fparts *p, size_t ncp, char default_align)
{
    char align = f->align ? f->align : default_align;
    int64_t padn = f->width > (int64_t)ncp ? f->width - (int64_t)ncp : 0;
    char fb[4];
    int fl = utf8_encode((uint32_t)(f->fill), fb);
    size_t max = c->lim.max_str_bytes;
    size_t blen = p->nhead + grouped_len(p) + p->nrest + p->rest_zeros + p->ntail;
    if (blen > max || (uint64_t)padn > (max - blen) / (size_t)fl) return v_limit(c, "memory");
    size_t total = blen + (size_t)padn * (size_t)fl;
    char *o;
    val *r = vs_alloc(c, VT_STR, total, &o);
    if (!r) return NULL;
    int64_t left = 0, right = 0;
    switch (align) {
    case '<':
        right = padn;
        break;
    case '^':
        left = padn / 2;
        right = padn - left;
        break;
    default:
        left = padn;
        break;
    }
    size_t k = 0;
    if (align == '=') {
        memcpy(o, p->head, p->nhead);
        k = put_fill(o, p->nhead, fb, fl, left);
    } else {
        k = put_fill(o, k, fb, fl, left);
        memcpy(o + k, p->head, p->nhead);
        k += p->nhead;
    }
    k = put_fill(o, put_body(o, k, p), fb, fl, right);
    /* UTF-8: as many code points as bytes exactly when all are ASCII */
    size_t n = ncp + (size_t)padn;
    return vs_done(c, r, k, n, k == n);
}

/* finish for text in one piece. */
static val *finish_text(vctx *c, const fspec *f, const char *s, size_t blen, size_t ncp,
                        char default_align)
{
    fparts p = {.rest = s, .nrest = blen};
    return finish(c, f, &p, ncp, default_align);
}

/* Sign + prefix + the grouped integer digits + the rest (p: the digits,
 * the rest and the tail; every: the grouping), with zero fill inserted
 * into the grouping as CPython does when fill is '0' and '='. */
static val *assemble(vctx *c, const fspec *f, bool neg, const char *prefix, fparts *p)
{
    size_t nhead = 0;
    char sg = neg ? '-' : (f->sign == '+' ? '+' : f->sign == ' ' ? ' ' : 0);
    if (sg) p->head[nhead++] = sg;
    for (; *prefix && nhead < sizeof p->head; prefix++)
        p->head[nhead++] = *prefix;
    p->nhead = nhead;
    p->sep = f->group;
    char align = f->align ? f->align : '>';
    size_t have = p->zeros + p->ndigits;
    if (align == '=' && f->fill == '0' && f->group && f->width > 0) {
        if ((uint64_t)f->width > c->lim.max_str_bytes) return v_limit(c, "memory");
        /* zero padding becomes part of the grouped digits */
        size_t want = have, every = (size_t)p->every;
        size_t other = nhead + p->nrest + p->rest_zeros + p->ntail;
        /* start just below the answer: digits + separators grow by
         * (every + 1) / every per digit */
        int64_t room = f->width - (int64_t)other;
        if (room > 0 && want > 0) { /* no digits (nan, inf): no zeros either */
            int64_t below = room / (int64_t)(every + 1) * (int64_t)every - 2;
            if (below > (int64_t)want) want = (size_t)below;
        }
        while (want > 0 && (int64_t)(other + want + (want - 1) / every) < f->width)
            want++;
        p->zeros += want - have;
    }
    size_t blen = nhead + grouped_len(p) + p->nrest + p->rest_zeros + p->ntail;
    return finish(c, f, p, blen, '>');
}

static val *fmt_double(vctx *c, double x, fspec *f, bool from_int);

/* Whether x is written with a minus sign: CPython never writes one on a NaN,
 * whatever its sign bit (PyOS_double_to_string gives "nan", or "+nan" under
 * the '+' flag), in repr, str, %-formatting, f-strings and format() alike. */
static bool shows_minus(double x)
{
    return signbit(x) && !isnan(x);
}

static val *fmt_int(vctx *c, val *v, fspec *f)
{
    bool floaty = f->type && strchr("eEfFgG%", f->type);
    if (f->prec >= 0 && !floaty)
        return v_raise(c, "ValueError", "Precision not allowed in integer format specifier");
    switch (f->type) {
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
    case '%': {
        int err;
        double d = vi_to_double(c, v, &err);
        if (err) return NULL;
        return fmt_double(c, d, f, true);
    }
    case 0:
    case 'd':
    case 'n':
    case 'b':
    case 'o':
    case 'x':
    case 'X':
    case 'c':
        break;
    default:
        return v_raise(c, "ValueError", "Unknown format code '%c' for object of type 'int'",
                       f->type);
    }
    if (f->z)
        return v_raise(c, "ValueError",
                       "Negative zero coercion (z) not allowed in integer format specifier");
    if (f->type == 'c') {
        if (f->sign)
            return v_raise(c, "ValueError", "Sign not allowed with integer format specifier 'c'");
        if (f->alt)
            return v_raise(c, "ValueError",
                           "Alternate form (#) not allowed with integer format specifier 'c'");
        int64_t x;
        if (!v_as_i64(v, &x) || x < 0 || x > 0x10FFFF)
            return v_raise(c, "OverflowError", "%%c arg not in range(0x110000)");
        char tmp[4];
        int n = utf8_encode((uint32_t)((int32_t)x), tmp);
        return finish_text(c, f, tmp, (size_t)n, 1, '>');
    }
    int base = 10;
    const char *prefix = "";
    switch (f->type) {
    case 'b':
        base = 2;
        prefix = f->alt ? "0b" : "";
        break;
    case 'o':
        base = 8;
        prefix = f->alt ? "0o" : "";
        break;
    case 'x':
        base = 16;
        prefix = f->alt ? "0x" : "";
        break;
    case 'X':
        base = -16;
        prefix = f->alt ? "0X" : "";
        break;
    default:
        break;
    }
    mpz_t z;
    mpz_init(z);
    vi_get_mpz(v, z);
    bool neg = mpz_sgn(z) < 0;
    mpz_abs(z, z);
    if (base == 10 && mpz_sizeinbase(z, 10) > 4301) {
        mpz_clear(z);
        return v_raise(c, "ValueError",
                       "Exceeds the limit (4300 digits) for integer string conversion");
    }
    char *d = mpz_get_str(NULL, base, z);
    mpz_clear(z);
    if (base == 10 && strlen(d) > 4300) {
        vi_free_str(d);
        return v_raise(c, "ValueError",
                       "Exceeds the limit (4300 digits) for integer string conversion");
    }
    int every = (base == 10) ? 3 : 4;
    fparts p = {.digits = d, .ndigits = strlen(d), .every = every};
    val *r = assemble(c, f, neg, prefix, &p);
    vi_free_str(d);
    return r;
}

/* Appends n '0's. */
static void put_zeros(strbuf *out, size_t n)
{
    strbuf_reserve(out, n);
    memset(out->data + out->len, '0', n);
    out->len += n;
    out->data[out->len] = 0;
}

/* Writes "%.*f" of x (finite, >= 0) to out as printf writes it, when prec
 * is at most 9 and x * 10**prec is below 1.8e19; returns false, writing
 * nothing, otherwise. Exact, as printf: x is m * 2**-s (m < 2**53), so
 * m * 10**prec / 2**s is rounded to an integer, half to even, in 128-bit
 * integers. printf takes about 2000 instructions for the same, most of an
 * f-string's '{x:.1f}'. */
static bool fixed_short(char *out, double x, int prec)
{
    static const uint64_t pow10[10] = {1,      10,      100,      1000,      10000,
                                       100000, 1000000, 10000000, 100000000, 1000000000};
    if (prec < 0 || prec > 9 || signbit(x) || !(x < 1.8e19 / (double)pow10[prec])) return false;
    uint64_t r = 0;
    int ex;
    double f = frexp(x, &ex); /* x = f * 2**ex, 0.5 <= f < 1 (or x == 0) */
    uint64_t m = (uint64_t)ldexp(f, 53);
    int sh = 53 - ex;
    if (sh < 0) return false; /* x >= 2**53 */
    /* past 120 bits x * 10**9 is below 2**-38, which rounds to 0 */
    if (x != 0 && sh <= 120) {
        unsigned __int128 n = (unsigned __int128)m * pow10[prec];
        r = (uint64_t)(n >> sh);
        if (sh > 0) {
            unsigned __int128 rem = n & (((unsigned __int128)1 << sh) - 1);
            unsigned __int128 half = (unsigned __int128)1 << (sh - 1);
            if (rem > half || (rem == half && (r & 1))) r++;
        }
    }
    /* the digits from the last: the fraction's prec, the point, the rest */
    char tmp[32];
    char *p = tmp + sizeof tmp;
    *--p = 0;
    for (int i = 0; i < prec; i++, r /= 10)
        *--p = (char)('0' + r % 10);
    if (prec > 0) *--p = '.';
    do {
        *--p = (char)('0' + r % 10);
        r /= 10;
    } while (r);
    memcpy(out, p, (size_t)(tmp + sizeof tmp - p));
    return true;
}

/* CPython's format_float_short (pystrtod.c) for a finite x >= 0: digits
 * and decimal point position as _Py_dg_dtoa gives them (mode 0 for 'r',
 * 2 for 'e'/'g', 3 for 'f'; obtained here from correctly rounded printf),
 * then the same padding, exponent and '#' rules. With gap non-NULL the
 * last run of zeros (a large precision's) is not written: *gap of them
 * belong at offset *gap_at of out (*gap 0: none). */
static int float_short(strbuf *out, double x, char type, int prec, bool alt, bool add_dot0,
                       size_t *gap_at, size_t *gap)
{
    char lower = (char)(type | 32);
    char *digits;
    int nd, decpt;
    char small[40];
    char *heap = NULL;
    if (lower == 'r') {
        digits = small;
        decpt = pyfloat_shortest(x, small, &nd);
        if (x == 0) {
            small[0] = '0';
            nd = 1;
            decpt = 1;
        }
    } else {
        /* a double's exact decimal expansion has at most 767 significant
         * and 1074 fractional digits: past those, asking printf for more
         * only appends zeros, which the padding below writes instead */
        int p = prec;
        if (lower == 'e') p = prec + 1;
        if (lower == 'g' && p == 0) p = 1;
        if (p > 800) p = 800;
        int fp = prec > 1100 ? 1100 : prec;
        size_t need = (size_t)(lower == 'f' ? fp : p) + 400;
        heap = malloc(need);
        if (!heap) return -1;
        if (lower == 'f') {
            if (!fixed_short(heap, x, fp)) snprintf(heap, need, "%.*f", fp, x);
            /* digits without the point, leading zeros removed */
            char *dot = strchr(heap, '.');
            int intlen = dot ? (int)(dot - heap) : (int)strlen(heap);
            int k = 0;
            for (char *q = heap; *q; q++)
                if (*q != '.') heap[k++] = *q;
            heap[k] = 0;
            int lead = 0;
            while (lead < k - 1 && heap[lead] == '0')
                lead++;
            digits = heap + lead;
            nd = k - lead;
            decpt = intlen - lead;
        } else {
            snprintf(heap, need, "%.*e", p - 1, x);
            char *e = strchr(heap, 'e');
            int ex = atoi(e + 1);
            int k = 0;
            for (char *q = heap; q < e; q++)
                if (*q != '.') heap[k++] = *q;
            heap[k] = 0;
            digits = heap;
            nd = k;
            decpt = ex + 1;
        }
        while (nd > 1 && digits[nd - 1] == '0')
            nd--;
        if (nd == 1 && digits[0] == '0') decpt = 1;
    }
    bool use_exp = false;
    int vend = nd, exp = 0;
    switch (lower) {
    case 'e':
        use_exp = true;
        vend = prec + 1;
        break;
    case 'f':
        vend = decpt + prec;
        break;
    case 'g': {
        int p = prec == 0 ? 1 : prec;
        if (decpt <= -4 || decpt > (add_dot0 ? p - 1 : p)) use_exp = true;
        if (alt) vend = p;
        break;
    }
    default:
        if (decpt <= -4 || decpt > 16) use_exp = true;
        break;
    }
    if (use_exp) {
        exp = decpt - 1;
        decpt = 1;
    }
    int vstart = decpt <= 0 ? decpt - 1 : 0;
    if (!use_exp && add_dot0)
        vend = vend > decpt ? vend : decpt + 1;
    else
        vend = vend > decpt ? vend : decpt;
    size_t mark = out->len;
    if (decpt <= 0) {
        for (int i = 0; i < decpt - vstart; i++)
            strbuf_putc(out, '0');
        strbuf_putc(out, '.');
        for (int i = 0; i < -decpt; i++)
            strbuf_putc(out, '0');
    } else {
        for (int i = 0; i < -vstart; i++)
            strbuf_putc(out, '0');
    }
    if (0 < decpt && decpt <= nd) {
        strbuf_put(out, digits, (size_t)decpt);
        strbuf_putc(out, '.');
        strbuf_put(out, digits + decpt, (size_t)(nd - decpt));
    } else {
        strbuf_put(out, digits, (size_t)nd);
    }
    int run;
    if (nd < decpt) {
        for (int i = 0; i < decpt - nd; i++)
            strbuf_putc(out, '0');
        strbuf_putc(out, '.');
        run = vend - decpt;
    } else {
        run = vend - nd;
    }
    if (gap) *gap = 0;
    if (run > 0 && gap) {
        *gap_at = out->len;
        *gap = (size_t)run;
    } else {
        if (run > 0) put_zeros(out, (size_t)run);
        if (out->len > mark && out->data[out->len - 1] == '.' && !alt) out->data[--out->len] = 0;
    }
    if (use_exp)
        strbuf_printf(out, "%c%c%02d", type == 'E' || type == 'G' ? 'E' : 'e', exp < 0 ? '-' : '+',
                      exp < 0 ? -exp : exp);
    free(heap);
    return 0;
}

/* Whether CPython, under the reference's 512 MiB, runs out of memory
 * formatting a finite double with this precision: _Py_dg_dtoa allocates
 * the power of two above the digits it is asked for, the result is built
 * in a buffer and then copied into the str. */
static bool float_format_fails(char type, int64_t prec, bool alt, double x)
{
    const int64_t budget = (int64_t)480 << 20;
    char lower = (char)(type | 32);
    int64_t digits, out;
    int intdigits = fabs(x) >= 1 ? (int)log10(fabs(x)) + 1 : 1;
    switch (lower) {
    case 'e':
        digits = prec + 1;
        out = prec + 8;
        break;
    case 'f':
    case '%':
        digits = prec + intdigits + 1;
        out = prec + intdigits + 3;
        break;
    case 'g':
        digits = prec ? prec : 1;
        out = alt ? prec + 8 : 32;
        break;
    default:
        return false;
    }
    int64_t alloc = 4;
    while (24 + alloc <= digits)
        alloc <<= 1;
    return alloc + out > budget || 2 * out > budget;
}

static val *fmt_double(vctx *c, double x, fspec *f, bool from_int)
{
    char type = f->type;
    bool add_dot0 = false;
    if (f->prec > INT32_MAX) return v_raise(c, "ValueError", "precision too big");
    int prec = (int)f->prec;
    bool pct = false;
    switch (type) {
    case 0:
        add_dot0 = true;
        type = prec >= 0 ? 'g' : 'r';
        break;
    case 'n':
        type = 'g';
        break;
    case '%':
        type = 'f';
        x *= 100;
        pct = true;
        break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
        break;
    default:
        return v_raise(c, "ValueError", "Unknown format code '%c' for object of type '%s'", type,
                       from_int ? "int" : "float");
    }
    if (prec < 0 && type != 'r') prec = 6;
    /* CPython asks dtoa for precision + 1 digits of an 'e' format: at
     * INT_MAX that wraps to INT_MIN, which dtoa reads as one digit, so the
     * result is the precision-0 one ('1e+00') */
    if ((type | 32) == 'e' && prec == INT32_MAX) prec = 0;
    if (isfinite(x) && float_format_fails(pct ? '%' : type, prec, f->alt, x))
        return v_limit(c, "memory");
    bool neg = shows_minus(x);
    double ax = fabs(x);
    strbuf body;
    strbuf_init(&body);
    size_t gap_at = 0, gap = 0; /* the zeros of a large precision, not in body */
    if (isnan(x) || isinf(x)) {
        bool up = type == 'E' || type == 'F' || type == 'G';
        strbuf_puts(&body, isnan(x) ? (up ? "NAN" : "nan") : (up ? "INF" : "inf"));
    } else {
        if (float_short(&body, ax, type, prec, f->alt, add_dot0, &gap_at, &gap)) {
            strbuf_free(&body);
            return v_limit(c, "memory");
        }
    }
    if (pct) strbuf_putc(&body, '%');
    /* z: negative zero after rounding becomes positive */
    if (neg && f->z) {
        bool allzero = true;
        for (size_t i = 0; i < body.len; i++) {
            char ch = body.data[i];
            if (ch >= '1' && ch <= '9') allzero = false;
            if (ch == 'e' || ch == 'E') break;
        }
        if (allzero && isfinite(x)) neg = false;
    }
    /* split integer digits from the rest for grouping */
    size_t nint = 0;
    while (nint < body.len && body.data[nint] >= '0' && body.data[nint] <= '9')
        nint++;
    size_t at = gap ? gap_at : body.len;
    fparts p = {.digits = body.data,
                .ndigits = nint,
                .every = 3,
                .rest = body.data + nint,
                .nrest = at - nint,
                .rest_zeros = gap,
                .tail = body.data + at,
                .ntail = body.len - at};
    val *r = assemble(c, f, neg, "", &p);
    strbuf_free(&body);
    return r;
}

static val *fmt_str(vctx *c, val *s, fspec *f)
{
    if (f->type && f->type != 's')
        return v_raise(c, "ValueError", "Unknown format code '%c' for object of type 'str'",
                       f->type);
    if (f->sign) return v_raise(c, "ValueError", "Sign not allowed in string format specifier");
    if (f->z)
        return v_raise(c, "ValueError",
                       "Negative zero coercion (z) not allowed in format specifier");
    if (f->alt)
        return v_raise(c, "ValueError",
                       "Alternate form (#) not allowed in string format specifier");
    if (f->align == '=')
        return v_raise(c, "ValueError", "'=' alignment not allowed in string format specifier");
    if (f->group) return v_raise(c, "ValueError", "Cannot specify '%c' with 's'.", f->group);
    size_t blen = s->u.s.blen, ncp = s->u.s.clen;
    if (f->prec >= 0 && (size_t)f->prec < ncp) {
        ncp = (size_t)f->prec;
        blen = vs_offset(s, ncp);
    }
    if (f->width <= (int64_t)ncp && blen == s->u.s.blen) return s;
    return finish_text(c, f, s->u.s.s, blen, ncp, '<');
}

/* complex.__format__ (format_complex_internal) */
static val *fmt_complex(vctx *c, val *v, fspec *f)
{
    char type = f->type;
    if (f->fill == '0' && f->align == '=')
        return v_raise(c, "ValueError", "Zero padding is not allowed in complex format specifier");
    if (f->align == '=')
        return v_raise(c, "ValueError",
                       "'=' alignment flag is not allowed in complex format specifier");
    bool parens = false, skip_re = false;
    if (f->prec > INT32_MAX) return v_raise(c, "ValueError", "precision too big");
    int prec = (int)f->prec;
    double re = v->u.cx.re, im = v->u.cx.im;
    switch (type) {
    case 0:
        type = prec >= 0 ? 'g' : 'r';
        if (re == 0.0 && !signbit(re))
            skip_re = true;
        else
            parens = true;
        break;
    case 'n':
        type = 'g';
        break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
        break;
    default:
        return v_raise(c, "ValueError", "Unknown format code '%c' for object of type 'complex'",
                       type);
    }
    if (prec < 0) prec = type == 'r' ? 0 : 6;
    if ((type | 32) == 'e' && prec == INT32_MAX) prec = 0; /* as fmt_double */
    if ((isfinite(re) && float_format_fails(type, prec, f->alt, re)) ||
        (isfinite(im) && float_format_fails(type, prec, f->alt, im)))
        return v_limit(c, "memory");
    strbuf b;
    strbuf_init(&b);
    if (parens) strbuf_putc(&b, '(');
    for (int part = 0; part < 2; part++) {
        double x = part == 0 ? re : im;
        if (part == 0 && skip_re) continue;
        bool neg = shows_minus(x);
        if (neg)
            strbuf_putc(&b, '-');
        else if (part == 1)
            strbuf_putc(&b, '+');
        else if (f->sign == '+' || f->sign == ' ')
            strbuf_putc(&b, f->sign);
        double ax = fabs(x);
        if (isnan(x) || isinf(x)) {
            bool up = type == 'E' || type == 'F' || type == 'G';
            strbuf_puts(&b, isnan(x) ? (up ? "NAN" : "nan") : (up ? "INF" : "inf"));
        } else if (float_short(&b, ax, type, prec, f->alt, false, NULL, NULL)) {
            strbuf_free(&b);
            return v_limit(c, "memory");
        }
    }
    if (skip_re && (f->sign == '+' || f->sign == ' ') && !shows_minus(im)) {
        /* the imaginary part alone takes the requested sign instead of '+' */
        if (b.data[0] == '+') b.data[0] = f->sign;
    } else if (skip_re && b.data[0] == '+') {
        memmove(b.data, b.data + 1, b.len);
        b.len--;
    }
    strbuf_putc(&b, 'j');
    if (parens) strbuf_putc(&b, ')');
    val *r = finish_text(c, f, b.data, b.len, b.len, '>');
    strbuf_free(&b);
    return r;
}

val *vfmt_format(vctx *c, val *v, const char *spec, size_t n)
{
    if (n == 0) return v_tostr(c, v);
    fspec f;
    switch (v_type(v)) {
    case VT_STR:
        if (parse_spec(c, spec, n, &f, '<', "str")) return NULL;
        return fmt_str(c, v, &f);
    case VT_INT:
    case VT_BOOL:
        if (parse_spec(c, spec, n, &f, '>', v_type(v) == VT_BOOL ? "bool" : "int")) return NULL;
        return fmt_int(c, v, &f);
    case VT_FLOAT:
        if (parse_spec(c, spec, n, &f, '>', "float")) return NULL;
        return fmt_double(c, v->u.f, &f, false);
    case VT_COMPLEX:
        if (parse_spec(c, spec, n, &f, '>', "complex")) return NULL;
        return fmt_complex(c, v, &f);
    default:
        break;
    }
    return v_raise(c, "TypeError", "unsupported format string passed to %s.__format__",
                   v_type_name(v));
}

/* ---- printf-style ---------------------------------------------------- */

typedef struct {
    val **args;
    size_t n, next;
    val *mapping;
    bool single;
} pargs;

static val *next_arg(vctx *c, pargs *a)
{
    if (a->next >= a->n) return v_raise(c, "TypeError", "not enough arguments for format string");
    return a->args[a->next++];
}

/* A `*` width (a Py_ssize_t) or precision (a C int), as CPython's % takes
 * them. 0 or -1. */
static int star_arg(vctx *c, val *w, int64_t *out, bool c_int)
{
    if (!v_is_intlike(w)) {
        v_raise(c, "TypeError", "* wants int");
        return -1;
    }
    if (!v_as_i64(w, out)) {
        v_raise(c, "OverflowError", "Python int too large to convert to C %s",
                c_int ? "int" : "ssize_t");
        return -1;
    }
    if (c_int && (*out < INT32_MIN || *out > INT32_MAX)) {
        v_raise(c, "OverflowError", "Python int too large to convert to C int");
        return -1;
    }
    return 0;
}

/* Appends a part of a % result (NULL: its making failed). 0 or -1. */
static int put_part(vctx *c, vbuild *out, val *part)
{
    return part && !v_build_push(c, out, part) ? 0 : -1;
}

val *vfmt_percent(vctx *c, val *fmt, val *args)
{
    pargs a = {0};
    if (v_type(args) == VT_TUPLE) {
        a.args = args->u.seq.items;
        a.n = args->u.seq.len;
    } else {
        a.args = v_alloc(c, sizeof(val *));
        if (!a.args) return NULL;
        a.args[0] = args;
        a.n = 1;
        a.single = true;
    }
    /* CPython: any object with __getitem__ other than tuple/str counts as a
     * mapping, which also disables "not all arguments converted" */
    if (v_type(args) == VT_DICT || v_type(args) == VT_LIST || v_type(args) == VT_BYTES ||
        v_type(args) == VT_RANGE)
        a.mapping = args;
    const char *s = fmt->u.s.s;
    size_t n = fmt->u.s.blen, i = 0;
    /* the result's parts (literal runs share the format's text), joined
     * once at the end; a lone part is the result itself ('%s' % text) */
    vbuild out = {0};
    size_t outlen = 0;
    bool used_mapping = false;
    while (i < n) {
        const char *pct = memchr(s + i, '%', n - i);
        if (!pct) {
            if (put_part(c, &out, vs_substr_bytes(c, fmt, s + i, n - i))) goto fail;
            break;
        }
        if (pct > s + i &&
            put_part(c, &out, vs_substr_bytes(c, fmt, s + i, (size_t)(pct - (s + i)))))
            goto fail;
        i = (size_t)(pct - s) + 1;
        size_t start_idx = i - 1;
        if (i >= n) {
            v_raise(c, "ValueError", "incomplete format");
            goto fail;
        }
        val *arg = NULL;
        if (s[i] == '(') {
            if (!a.mapping) {
                v_raise(c, "TypeError", "format requires a mapping");
                goto fail;
            }
            size_t depth = 1, k = i + 1;
            while (k < n && depth) {
                if (s[k] == '(')
                    depth++;
                else if (s[k] == ')')
                    depth--;
                k++;
            }
            if (depth) {
                v_raise(c, "ValueError", "incomplete format key");
                goto fail;
            }
            val *key = v_str(c, s + i + 1, k - i - 2);
            if (!key) goto fail;
            arg = v_getitem(c, a.mapping, key);
            if (!arg) goto fail;
            used_mapping = true;
            i = k;
        }
        fspec f = {.fill = ' ', .width = -1, .prec = -1};
        bool left = false, zero = false;
        for (; i < n; i++) {
            char ch = s[i];
            if (ch == '-')
                left = true;
            else if (ch == '+')
                f.sign = '+';
            else if (ch == ' ') {
                if (f.sign != '+') f.sign = ' ';
            } else if (ch == '#')
                f.alt = true;
            else if (ch == '0')
                zero = true;
            else
                break;
        }
        if (i < n && s[i] == '*') {
            val *w = next_arg(c, &a);
            if (!w) goto fail;
            int64_t wv;
            if (star_arg(c, w, &wv, false)) goto fail;
            if (wv == INT64_MIN) wv = 0; /* CPython's negation overflows: no padding */
            if (wv < 0) {
                left = true;
                wv = -wv;
            }
            f.width = wv;
            i++;
        } else {
            int64_t w = -1;
            while (i < n && s[i] >= '0' && s[i] <= '9') { /* a Py_ssize_t */
                int d = s[i++] - '0';
                if (w > (INT64_MAX - d) / 10) {
                    v_raise(c, "ValueError", "width too big");
                    goto fail;
                }
                w = (w < 0 ? 0 : w) * 10 + d;
            }
            f.width = w;
        }
        if (i < n && s[i] == '.') {
            i++;
            if (i < n && s[i] == '*') {
                val *w = next_arg(c, &a);
                if (!w) goto fail;
                int64_t wv;
                if (star_arg(c, w, &wv, true)) goto fail;
                f.prec = wv < 0 ? 0 : wv;
                i++;
            } else {
                int64_t p = 0;
                while (i < n && s[i] >= '0' && s[i] <= '9') { /* a C int */
                    int d = s[i++] - '0';
                    if (p > (INT32_MAX - d) / 10) {
                        v_raise(c, "ValueError", "precision too big");
                        goto fail;
                    }
                    p = p * 10 + d;
                }
                f.prec = p;
            }
        }
        while (i < n && (s[i] == 'h' || s[i] == 'l' || s[i] == 'L'))
            i++;
        if (i >= n) {
            v_raise(c, "ValueError", "incomplete format");
            goto fail;
        }
        char t = s[i++];
        if (t == '%') {
            /* '%%' is a literal; '%5%' and the like consume an argument */
            if (!arg && s[i - 2] != '%' && !next_arg(c, &a)) goto fail;
            if (put_part(c, &out, vs_substr_bytes(c, fmt, pct, 1))) goto fail;
            continue;
        }
        if (!arg) {
            arg = next_arg(c, &a);
            if (!arg) goto fail;
        }
        f.align = left ? '<' : '>';
        val *piece = NULL;
        switch (t) {
        case 's':
        case 'r':
        case 'a': {
            val *sv = t == 's' ? v_tostr(c, arg) : t == 'r' ? v_repr(c, arg) : v_ascii(c, arg);
            if (!sv) goto fail;
            fspec g = f;
            g.sign = 0;
            g.alt = false;
            piece = fmt_str(c, sv, &g);
            break;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'o':
        case 'x':
        case 'X': {
            val *iv = arg;
            if (v_type(arg) == VT_FLOAT) {
                if (t != 'd' && t != 'i' && t != 'u') {
                    v_raise(c, "TypeError", "%%%c format: an integer is required, not float", t);
                    goto fail;
                }
                iv = vi_from_double(c, arg->u.f);
                if (!iv) goto fail;
            } else if (!v_is_intlike(arg)) {
                if (t == 'd' || t == 'i' || t == 'u')
                    v_raise(c, "TypeError", "%%%c format: a real number is required, not %s", t,
                            v_type_name(arg));
                else
                    v_raise(c, "TypeError", "%%%c format: an integer is required, not %s", t,
                            v_type_name(arg));
                goto fail;
            }
            fspec g = f;
            g.type = (t == 'i' || t == 'u') ? 'd' : t;
            if (zero && !left) {
                g.fill = '0';
                g.align = '=';
            }
            /* precision = minimum digits */
            int64_t prec = g.prec;
            g.prec = -1;
            if (prec > INT32_MAX - 3) { /* CPython's _PyUnicode_FormatLong */
                v_raise(c, "OverflowError", "precision too large");
                goto fail;
            }
            if (prec > (int64_t)(240 << 20)) { /* CPython's digits and copy pass 512 MiB */
                v_limit(c, "memory");
                goto fail;
            }
            piece = fmt_int(c, iv, &g);
            if (piece && prec > 0) {
                /* re-run with zero-padded digits: rare; emulate via width on digits */
                mpz_t z;
                mpz_init(z);
                vi_get_mpz(iv, z);
                bool neg = mpz_sgn(z) < 0;
                mpz_abs(z, z);
                int base = g.type == 'o' ? 8 : (g.type == 'x' || g.type == 'X') ? 16 : 10;
                char *d = mpz_get_str(NULL, g.type == 'X' ? -16 : base, z);
                mpz_clear(z);
                size_t dl = strlen(d);
                const char *pre = !f.alt          ? ""
                                  : g.type == 'o' ? "0o"
                                  : g.type == 'x' ? "0x"
                                  : g.type == 'X' ? "0X"
                                                  : "";
                g.group = 0;
                fparts p = {.zeros = (int64_t)dl < prec ? (size_t)prec - dl : 0,
                            .digits = d,
                            .ndigits = dl,
                            .every = 3};
                piece = assemble(c, &g, neg, pre, &p);
                vi_free_str(d);
            }
            break;
        }
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G': {
            double d;
            if (v_type(arg) == VT_FLOAT)
                d = arg->u.f;
            else if (v_is_intlike(arg)) {
                int err;
                d = vi_to_double(c, arg, &err);
                if (err) goto fail;
            } else {
                v_raise(c, "TypeError", "must be real number, not %s", v_type_name(arg));
                goto fail;
            }
            fspec g = f;
            g.type = t;
            if (g.prec < 0) g.prec = 6;
            if (zero && !left) { /* nan and inf are zero-filled too: '0000000nan' */
                g.fill = '0';
                g.align = '=';
            }
            piece = fmt_double(c, d, &g, false);
            break;
        }
        case 'c': {
            val *cv = NULL;
            if (v_type(arg) == VT_STR) {
                if (arg->u.s.clen != 1) {
                    v_raise(c, "TypeError", "%%c requires int or char");
                    goto fail;
                }
                cv = arg;
            } else if (v_is_intlike(arg)) {
                int64_t x;
                if (!v_as_i64(arg, &x) || x < 0 || x > 0x10FFFF) {
                    v_raise(c, "OverflowError", "%%c arg not in range(0x110000)");
                    goto fail;
                }
                char tmp[4];
                int k = utf8_encode((uint32_t)((int32_t)x), tmp);
                cv = v_str(c, tmp, (size_t)k);
            } else {
                v_raise(c, "TypeError", "%%c requires int or char");
                goto fail;
            }
            if (!cv) goto fail;
            fspec g = f;
            g.sign = 0;
            g.alt = false;
            g.prec = -1;
            piece = fmt_str(c, cv, &g);
            break;
        }
        default:
            v_raise(c, "ValueError", "unsupported format character '%c' (0x%x) at index %zu", t,
                    (unsigned char)t, i - 1);
            (void)start_idx;
            goto fail;
        }
        if (!piece || put_part(c, &out, piece)) goto fail;
        outlen += piece->u.s.blen;
        if (outlen > c->lim.max_str_bytes) {
            v_limit(c, "memory");
            goto fail;
        }
    }
    if (!used_mapping && !a.mapping && a.next < a.n) {
        v_raise(c, "TypeError", "not all arguments converted during string formatting");
        goto fail;
    }
    if (a.mapping && !used_mapping && a.next == 0 && v_type(args) == VT_DICT) {
        /* '%s' % {} style: a dict as the single argument is fine when no key used */
    }
    {
        val *r = v_str_concat_n(c, out.v, out.n);
        v_build_free(&out);
        return r;
    }
fail:
    v_build_free(&out);
    return NULL;
}
