/* sandbox/lang/str: Python str over UTF-8 with code-point semantics: indexing,
 * slicing, concatenation, repetition, repr (CPython's quote choice and
 * escapes, isprintable), hashing, and every allowlisted str method with
 * CPython 3.11's argument rules. Case mapping: utf8proc for simple
 * mappings plus CPython's special casing (unicode_tables.c), final sigma. */
#include "sandbox/lang/unicode_tables.h"
#include "sandbox/lang/utf8.h"
#include "sandbox/lang/siphash.h"
#include "sandbox/lang/value_impl.h"

#include <gc/gc.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

/* ---- code points -------------------------------------------------------- */

int32_t vs_decode1(const char *s, size_t len, size_t *adv)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c0 = p[0];
    if (c0 < 0x80 || len < 2) {
        *adv = 1;
        return c0;
    }
    if (c0 < 0xE0) {
        *adv = 2;
        return ((c0 & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if (c0 < 0xF0 || len < 4) {
        if (len < 3) {
            *adv = len;
            return 0xFFFD;
        }
        *adv = 3;
        return ((c0 & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    *adv = 4;
    return ((c0 & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

/* UTF-8 by words: a code point starts at every byte that is not a
 * continuation byte (10xxxxxx). continuation_count marks bit 7 of each
 * continuation byte of an 8-byte word and sums the marks with a multiply
 * (no popcount instruction needed). */
static inline uint64_t load8(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline unsigned continuation_count(uint64_t w)
{
    uint64_t m = (w & ~(w << 1)) & 0x8080808080808080ull;
    return (unsigned)(((m >> 7) * 0x0101010101010101ull) >> 56);
}

/* Code points in s[0..n). */
static size_t cp_count(const char *s, size_t n)
{
    size_t cont = 0, i = 0;
    for (; i + 8 <= n; i += 8)
        cont += continuation_count(load8(s + i));
    for (; i < n; i++)
        cont += ((unsigned char)s[i] & 0xC0) == 0x80;
    return n - cont;
}

size_t vs_count_cps(const char *s, size_t blen, bool *ascii)
{
    size_t i = 0;
    while (i + 8 <= blen && !(load8(s + i) & 0x8080808080808080ull))
        i += 8;
    while (i < blen && !((unsigned char)s[i] & 0x80))
        i++;
    *ascii = i == blen;
    return i + cp_count(s + i, blen - i);
}

/* Byte offset of code point cp of s[0..n) (n if cp is past the end). */
static size_t cp_offset(const char *p, size_t n, size_t cp)
{
    size_t i = 0;
    /* whole words while they hold no more than the code points left */
    while (i + 8 <= n) {
        size_t k = 8 - continuation_count(load8(p + i));
        if (k > cp) break;
        cp -= k;
        i += 8;
    }
    /* at a code point's start (cp was not 0 at a word boundary inside a
     * character only if that word ended the count, handled below) */
    while (i < n && ((unsigned char)p[i] & 0xC0) == 0x80)
        i++;
    while (cp && i < n) {
        i++;
        while (i < n && ((unsigned char)p[i] & 0xC0) == 0x80)
            i++;
        cp--;
    }
    return i;
}

/* Byte offset of the code point `back` code points before byte offset off
 * (0 if that is before the start). */
static size_t cp_offset_back(const char *p, size_t off, size_t back)
{
    while (off >= 8) {
        size_t k = 8 - continuation_count(load8(p + off - 8));
        if (k >= back) break;
        back -= k;
        off -= 8;
    }
    /* off may sit inside a character: count starts one byte at a time */
    while (back && off > 0) {
        off--;
        if (((unsigned char)p[off] & 0xC0) != 0x80) back--;
    }
    return back ? 0 : off;
}

/* Code-point offsets found in long non-ASCII strings, so that walking one
 * by index (s[i] for i in range(len(s)), s[i] against s[-i-1], slices,
 * find with a start) scans from a nearby known position rather than from an
 * end: CPython's fixed-width strings index in O(1). A few cursors, each
 * moved by the lookups it serves. The value is held hidden (the cache does
 * not keep it alive) and trusted only until the next collection: values
 * are reclaimed only by a collection, so before one the address still names
 * the same immutable string. */
#define POS_CACHE_MIN 4096 /* bytes: shorter strings scan from the start */
#define POS_CURSORS 4
#define POS_NEAR 4096 /* code points: a lookup this close moves the cursor */

static _Thread_local struct {
    uintptr_t hidden; /* ~(uintptr_t)value; 0: unused */
    uintptr_t gc_no;
    size_t cp, off;
} g_pos[POS_CURSORS];
static _Thread_local unsigned g_pos_next;

size_t vs_offset(const val *s, size_t cp)
{
    if (s->flags & VF_ASCII) return cp;
    size_t n = s->u.s.blen, clen = s->u.s.clen;
    const char *p = s->u.s.s;
    if (n < POS_CACHE_MIN) return cp_offset(p, n, cp);
    if (cp >= clen) return n;
    uintptr_t key = ~(uintptr_t)s, gc_no = (uintptr_t)GC_get_gc_no();
    /* the nearest known position: the start, the end or a cursor */
    size_t from_cp = 0, from_off = 0, dist = cp;
    if (clen - cp < dist) from_cp = clen, from_off = n, dist = clen - cp;
    int cur = -1;
    for (int k = 0; k < POS_CURSORS; k++) {
        if (g_pos[k].hidden != key || g_pos[k].gc_no != gc_no) continue;
        size_t d = cp > g_pos[k].cp ? cp - g_pos[k].cp : g_pos[k].cp - cp;
        if (d < dist) from_cp = g_pos[k].cp, from_off = g_pos[k].off, dist = d, cur = k;
    }
    size_t off = cp >= from_cp ? from_off + cp_offset(p + from_off, n - from_off, cp - from_cp)
                               : cp_offset_back(p, from_off, from_cp - cp);
    if (cur < 0 || dist > POS_NEAR) {
        cur = (int)(g_pos_next++ % POS_CURSORS);
        g_pos[cur].hidden = key;
        g_pos[cur].gc_no = gc_no;
    }
    g_pos[cur].cp = cp;
    g_pos[cur].off = off;
    return off;
}

static size_t cps_before(const val *s, size_t off)
{
    if (s->flags & VF_ASCII) return off;
    return cp_count(s->u.s.s, off);
}

/* The empty string and the one-character Latin-1 strings are shared, as
 * CPython's are: g_shared[0] is '', g_shared[1 + c] the character c
 * (vs_shared_init). */
static val *g_shared;
#define g_empty (g_shared[0])

val *vs_substr(vctx *c, val *s, size_t lo, size_t hi)
{
    if (lo >= hi) return &g_empty;
    if (lo == 0 && hi >= s->u.s.clen) return s;
    size_t a = vs_offset(s, lo);
    size_t b = (s->flags & VF_ASCII) ? hi : a + cp_offset(s->u.s.s + a, s->u.s.blen - a, hi - lo);
    return vs_new_owned(c, (char *)s->u.s.s + a, b - a, hi - lo, (s->flags & VF_ASCII) != 0);
}

static val *str_bytes(vctx *c, const char *p, size_t blen)
{
    bool ascii;
    size_t n = vs_count_cps(p, blen, &ascii);
    return vs_new_owned(c, (char *)p, blen, n, ascii);
}

/* fills an arena array of the string's code points */
static int32_t *to_cps(vctx *c, val *s)
{
    int32_t *a = v_alloc_bytes(c, (s->u.s.clen + 1) * sizeof(int32_t));
    if (!a) return NULL;
    size_t i = 0, k = 0;
    while (i < s->u.s.blen) {
        size_t adv;
        a[k++] = vs_decode1(s->u.s.s + i, s->u.s.blen - i, &adv);
        i += adv;
    }
    return a;
}

/* ---- Unicode properties ------------------------------------------------ */

static bool in_ranges(const uint32_t (*t)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < t[mid][0])
            hi = mid;
        else if (cp > t[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static const struct vu_special *find_special(const struct vu_special *t, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < t[mid].cp)
            hi = mid;
        else if (cp > t[mid].cp)
            lo = mid + 1;
        else
            return &t[mid];
    }
    return NULL;
}

int vs_decimal_value(int32_t cp)
{
    if (cp < 128) return (cp >= '0' && cp <= '9') ? cp - '0' : -1;
    size_t lo = 0, hi = vu_decimal_len;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uint32_t)cp < vu_decimal[mid][0])
            hi = mid;
        else if ((uint32_t)cp > vu_decimal[mid][1])
            lo = mid + 1;
        else
            return (int)(((uint32_t)cp - vu_decimal[mid][0]) % 10);
    }
    return -1;
}

int32_t vs_decode_before(const char *s, size_t lo, size_t end, size_t *start)
{
    size_t k = end - 1, adv;
    while (k > lo && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    *start = k;
    return vs_decode1(s + k, end - k, &adv);
}

/* int()/float() input: Unicode decimal digits become ASCII digits and
 * Unicode white space a space, as CPython's
 * _PyUnicode_TransformDecimalAndSpaceToASCII. Returns malloc'd text. */
char *vs_to_ascii_number(const char *s, size_t len, size_t *outlen)
{
    char *o = malloc(len + 1);
    if (!o) return NULL;
    size_t i = 0, k = 0;
    while (i < len) {
        size_t adv;
        int32_t cp = vs_decode1(s + i, len - i, &adv);
        if (cp < 128)
            o[k++] = (char)cp;
        else if (vs_isspace_cp(cp))
            o[k++] = ' ';
        else {
            int d = vs_decimal_value(cp);
            o[k++] = d >= 0 ? (char)('0' + d) : '?';
        }
        i += adv;
    }
    o[k] = 0;
    *outlen = k;
    return o;
}

bool vs_isspace_cp(int32_t cp)
{
    if (cp < 128) return cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 28 && cp <= 31);
    return in_ranges(vu_space, vu_space_len, (uint32_t)cp);
}
static bool u_isprintable(int32_t cp)
{
    if (cp < 128) return cp >= 32 && cp < 127;
    return in_ranges(vu_printable, vu_printable_len, (uint32_t)cp);
}
static bool u_isalpha(int32_t cp)
{
    if (cp < 128) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    return in_ranges(vu_alpha, vu_alpha_len, (uint32_t)cp);
}
static bool u_isdecimal(int32_t cp)
{
    if (cp < 128) return cp >= '0' && cp <= '9';
    return in_ranges(vu_decimal, vu_decimal_len, (uint32_t)cp);
}
static bool u_isdigit(int32_t cp)
{
    return u_isdecimal(cp) || in_ranges(vu_digit_extra, vu_digit_extra_len, (uint32_t)cp);
}
static bool u_isnumeric(int32_t cp)
{
    return u_isdigit(cp) || in_ranges(vu_numeric_extra, vu_numeric_extra_len, (uint32_t)cp);
}
static bool u_islower(int32_t cp)
{
    if (cp < 128) return cp >= 'a' && cp <= 'z';
    return utf8proc_category(cp) == UTF8PROC_CATEGORY_LL ||
           in_ranges(vu_lower_extra, vu_lower_extra_len, (uint32_t)cp);
}
static bool u_isupper(int32_t cp)
{
    if (cp < 128) return cp >= 'A' && cp <= 'Z';
    return utf8proc_category(cp) == UTF8PROC_CATEGORY_LU ||
           in_ranges(vu_upper_extra, vu_upper_extra_len, (uint32_t)cp);
}
static bool u_istitle(int32_t cp)
{
    return cp >= 128 && utf8proc_category(cp) == UTF8PROC_CATEGORY_LT;
}
static bool u_iscased(int32_t cp)
{
    return u_islower(cp) || u_isupper(cp) || u_istitle(cp);
}
static bool u_case_ignorable(int32_t cp)
{
    switch (cp) {
    case 0x27:
    case 0x2E:
    case 0x3A:
    case 0x5E:
    case 0x60:
    case 0xA8:
    case 0xAD:
    case 0xAF:
    case 0xB4:
    case 0xB7:
    case 0xB8:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xFE13:
    case 0xFE52:
    case 0xFE55:
    case 0xFF07:
    case 0xFF0E:
    case 0xFF1A:
    case 0x387:
    case 0x5F4:
        return true;
    default:
        break;
    }
    if (cp < 128) return false;
    utf8proc_category_t k = utf8proc_category(cp);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

static int map_full(int which, int32_t cp, int32_t out[3])
{
    /* which: 0 upper, 1 lower, 2 title, 3 fold */
    if (cp < 128) {
        if (which == 0 || which == 2)
            out[0] = (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
        else
            out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    const struct vu_special *sp = NULL;
    switch (which) {
    case 0:
        sp = find_special(vu_upper_special, vu_upper_special_len, (uint32_t)cp);
        break;
    case 1:
        sp = find_special(vu_lower_special, vu_lower_special_len, (uint32_t)cp);
        break;
    case 2:
        sp = find_special(vu_title_special, vu_title_special_len, (uint32_t)cp);
        break;
    case 3:
        sp = find_special(vu_fold_special, vu_fold_special_len, (uint32_t)cp);
        if (!sp) return map_full(1, cp, out);
        break;
    }
    if (sp) {
        for (int i = 0; i < sp->n; i++)
            out[i] = (int32_t)sp->to[i];
        return sp->n;
    }
    switch (which) {
    case 0:
        out[0] = utf8proc_toupper(cp);
        break;
    case 1:
        out[0] = utf8proc_tolower(cp);
        break;
    default:
        out[0] = utf8proc_totitle(cp);
        break;
    }
    return 1;
}

/* lowercase of cps[i] with the final-sigma rule */
static int lower_at(const int32_t *cps, size_t n, size_t i, int32_t out[3])
{
    if (cps[i] != 0x3A3) return map_full(1, cps[i], out);
    /* final sigma: preceded by a cased letter and not followed by one */
    bool before = false;
    for (size_t j = i; j > 0; j--) {
        int32_t p = cps[j - 1];
        if (u_case_ignorable(p)) continue;
        before = u_iscased(p);
        break;
    }
    bool after = false;
    for (size_t j = i + 1; j < n; j++) {
        int32_t p = cps[j];
        if (u_case_ignorable(p)) continue;
        after = u_iscased(p);
        break;
    }
    out[0] = (before && !after) ? 0x3C2 : 0x3C3;
    return 1;
}

/* ---- building results -------------------------------------------------- */

typedef struct {
    vctx *c;
    char *p;
    size_t len, cap, ncp;
    bool ascii;
    bool fail;
} sbuild;

static void sb_init(sbuild *b, vctx *c, size_t hint)
{
    b->c = c;
    b->cap = hint < 16 ? 16 : hint;
    b->p = v_alloc_bytes(c, b->cap);
    b->len = b->ncp = 0;
    b->ascii = true;
    b->fail = b->p == NULL;
}

static void sb_put(sbuild *b, const char *s, size_t n, size_t ncp, bool ascii)
{
    if (b->fail) return;
    if (b->len + n > b->cap) {
        if (v_check_strlen(b->c, b->len + n)) {
            b->fail = true;
            return;
        }
        size_t nc = b->cap * 2;
        while (nc < b->len + n)
            nc *= 2;
        char *np = v_alloc_bytes(b->c, nc);
        if (!np) {
            b->fail = true;
            return;
        }
        memcpy(np, b->p, b->len);
        v_free(b->p); /* nothing else has seen it */
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->ncp += ncp;
    if (!ascii) b->ascii = false;
}

static void sb_cp(sbuild *b, int32_t cp)
{
    char tmp[4];
    int n = utf8_encode((uint32_t)(cp), tmp);
    sb_put(b, tmp, (size_t)n, 1, cp < 128);
}

static void sb_str(sbuild *b, const val *s)
{
    sb_put(b, s->u.s.s, s->u.s.blen, s->u.s.clen, (s->flags & VF_ASCII) != 0);
}

/* A short result is copied into a string of one block (vs_alloc) and the
 * buffer, which nothing else has seen, freed at once; a long one keeps the
 * buffer. */
#define SB_COPY_MAX 256

static val *sb_done(sbuild *b)
{
    if (b->fail) return NULL;
    if (b->len > SB_COPY_MAX) return vs_new_owned(b->c, b->p, b->len, b->ncp, b->ascii);
    char *o;
    val *r = vs_alloc(b->c, VT_STR, b->len, &o);
    if (r == NULL) return NULL;
    memcpy(o, b->p, b->len);
    v_free(b->p);
    return vs_done(b->c, r, b->len, b->ncp, b->ascii);
}

/* ---- protocol pieces ------------------------------------------------------ */

int vs_repr_buf(strbuf *b, const val *s)
{
    return vs_repr_text(b, s->u.s.s, s->u.s.blen);
}

int vs_repr_text(strbuf *b, const char *p, size_t n)
{
    char q = vs_repr_quote(p, n);
    strbuf_putc(b, q);
    size_t i = 0;
    while (i < n) {
        unsigned char ch = (unsigned char)p[i];
        if (ch < 128) {
            vs_repr_ascii(b, ch, q);
            i++;
            continue;
        }
        size_t adv;
        int32_t cp = vs_decode1(p + i, n - i, &adv);
        if (u_isprintable(cp))
            strbuf_put(b, p + i, adv);
        else if (cp < 0x100)
            strbuf_printf(b, "\\x%02x", cp);
        else if (cp < 0x10000)
            strbuf_printf(b, "\\u%04x", cp);
        else
            strbuf_printf(b, "\\U%08x", cp);
        i += adv;
    }
    strbuf_putc(b, q);
    return 0;
}

int64_t vs_hash(val *s)
{
    /* CPython: SipHash-1-3 under the process's random key; 0 for the empty
     * string and never -1. 0 also means "not computed yet" here. */
    if (s->u.s.hash || s->u.s.blen == 0) return s->u.s.hash;
    int64_t r = (int64_t)siphash_keyed13(s->u.s.s, s->u.s.blen);
    if (r == -1) r = -2;
    s->u.s.hash = r;
    return r;
}

int vs_cmp(const val *a, const val *b)
{
    size_t n = a->u.s.blen < b->u.s.blen ? a->u.s.blen : b->u.s.blen;
    int r = memcmp(a->u.s.s, b->u.s.s, n);
    if (r) return r < 0 ? -1 : 1;
    return (a->u.s.blen > b->u.s.blen) - (a->u.s.blen < b->u.s.blen);
}

size_t vs_i64_digits(char out[24], int64_t x)
{
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233"
        "34353637383940414243444546474849505152535455565758596061626364656667"
        "6869707172737475767778798081828384858687888990919293949596979899";
    char tmp[24];
    char *e = tmp + sizeof tmp, *p = e;
    uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
    while (u >= 100) {
        p -= 2;
        memcpy(p, pairs + (u % 100) * 2, 2);
        u /= 100;
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, pairs + u * 2, 2);
    } else
        *--p = (char)('0' + u);
    if (x < 0) *--p = '-';
    size_t n = (size_t)(e - p);
    memcpy(out, p, n);
    return n;
}

val *vs_from_i64(vctx *c, int64_t x)
{
    if (x >= 0 && x < 10) return vs_char(c, &"0123456789"[x], 1);
    char d[24];
    size_t n = vs_i64_digits(d, x);
    char *o;
    val *r = vs_alloc(c, VT_STR, n, &o);
    if (!r) return NULL;
    memcpy(o, d, n);
    return vs_done(c, r, n, n, true);
}

val *vs_concat(vctx *c, val *a, val *b)
{
    if (a->u.s.blen == 0) return b;
    if (b->u.s.blen == 0) return a;
    size_t n = (size_t)a->u.s.blen + b->u.s.blen;
    if (v_check_strlen(c, n)) return NULL;
    char *p;
    val *r = vs_alloc(c, VT_STR, n, &p);
    if (!r) return NULL;
    memcpy(p, a->u.s.s, a->u.s.blen);
    memcpy(p + a->u.s.blen, b->u.s.s, b->u.s.blen);
    return vs_done(c, r, n, (size_t)a->u.s.clen + b->u.s.clen,
                   (a->flags & b->flags & VF_ASCII) != 0);
}

val *v_str_concat_n(vctx *c, val *const *parts, size_t n)
{
    size_t total = 0, ncp = 0, nonempty = 0, max = c->lim.max_str_bytes;
    bool ascii = true;
    val *last = NULL;
    for (size_t i = 0; i < n; i++) {
        const val *x = parts[i];
        if (x->u.s.blen > max - total) return v_limit(c, "memory");
        total += x->u.s.blen;
        ncp += x->u.s.clen;
        ascii = ascii && (x->flags & VF_ASCII);
        if (x->u.s.blen) {
            nonempty++;
            last = parts[i];
        }
    }
    if (nonempty == 0) return &g_empty;
    if (nonempty == 1) return last;
    char *o;
    val *r = vs_alloc(c, VT_STR, total, &o);
    if (!r) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(o + k, parts[i]->u.s.s, parts[i]->u.s.blen);
        k += parts[i]->u.s.blen;
    }
    return vs_done(c, r, total, ncp, ascii);
}

void vs_fill_repeat(char *p, const char *unit, size_t ulen, size_t n)
{
    /* one copy of the unit, then the filled prefix doubles (as CPython):
     * 'x' * 10**8 is 27 memcpy calls, not 10^8 */
    size_t done = ulen < n ? ulen : n;
    memcpy(p, unit, done);
    while (done < n) {
        size_t step = done < n - done ? done : n - done;
        memcpy(p + done, p, step);
        done += step;
    }
}

val *vs_repeat(vctx *c, val *a, int64_t k)
{
    if (k <= 0 || a->u.s.blen == 0) return &g_empty;
    if (k == 1) return a;
    if ((uint64_t)k > c->lim.max_str_bytes / a->u.s.blen) return v_limit(c, "memory");
    size_t n = a->u.s.blen * (size_t)k;
    char *p;
    val *r = vs_alloc(c, VT_STR, n, &p);
    if (!r) return NULL;
    if (v_steps(c, n / 64)) return NULL;
    vs_fill_repeat(p, a->u.s.s, a->u.s.blen, n);
    return vs_done(c, r, n, a->u.s.clen * (size_t)k, (a->flags & VF_ASCII) != 0);
}

/* One-character Latin-1 strings are shared, as CPython's are: iterating,
 * indexing or splitting a long text into such characters allocates
 * nothing. */
static const char g_ascii_bytes[128] = {
    0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12,  13,  14,  15,  16,  17,  18,
    19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,  32,  33,  34,  35,  36,  37,
    38,  39,  40,  41,  42,  43,  44,  45,  46,  47,  48,  49,  50,  51,  52,  53,  54,  55,  56,
    57,  58,  59,  60,  61,  62,  63,  64,  65,  66,  67,  68,  69,  70,  71,  72,  73,  74,  75,
    76,  77,  78,  79,  80,  81,  82,  83,  84,  85,  86,  87,  88,  89,  90,  91,  92,  93,  94,
    95,  96,  97,  98,  99,  100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113,
    114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127};
/* U+0080..U+00FF in UTF-8, two bytes each */
static const char g_latin1_bytes[] =
    "\xC2\x80\xC2\x81\xC2\x82\xC2\x83\xC2\x84\xC2\x85\xC2\x86\xC2\x87\xC2\x88\xC2\x89\xC2\x8A\xC2"
    "\x8B\xC2\x8C\xC2\x8D\xC2\x8E\xC2\x8F"
    "\xC2\x90\xC2\x91\xC2\x92\xC2\x93\xC2\x94\xC2\x95\xC2\x96\xC2\x97\xC2\x98\xC2\x99\xC2\x9A\xC2"
    "\x9B\xC2\x9C\xC2\x9D\xC2\x9E\xC2\x9F"
    "\xC2\xA0\xC2\xA1\xC2\xA2\xC2\xA3\xC2\xA4\xC2\xA5\xC2\xA6\xC2\xA7\xC2\xA8\xC2\xA9\xC2\xAA\xC2"
    "\xAB\xC2\xAC\xC2\xAD\xC2\xAE\xC2\xAF"
    "\xC2\xB0\xC2\xB1\xC2\xB2\xC2\xB3\xC2\xB4\xC2\xB5\xC2\xB6\xC2\xB7\xC2\xB8\xC2\xB9\xC2\xBA\xC2"
    "\xBB\xC2\xBC\xC2\xBD\xC2\xBE\xC2\xBF"
    "\xC3\x80\xC3\x81\xC3\x82\xC3\x83\xC3\x84\xC3\x85\xC3\x86\xC3\x87\xC3\x88\xC3\x89\xC3\x8A\xC3"
    "\x8B\xC3\x8C\xC3\x8D\xC3\x8E\xC3\x8F"
    "\xC3\x90\xC3\x91\xC3\x92\xC3\x93\xC3\x94\xC3\x95\xC3\x96\xC3\x97\xC3\x98\xC3\x99\xC3\x9A\xC3"
    "\x9B\xC3\x9C\xC3\x9D\xC3\x9E\xC3\x9F"
    "\xC3\xA0\xC3\xA1\xC3\xA2\xC3\xA3\xC3\xA4\xC3\xA5\xC3\xA6\xC3\xA7\xC3\xA8\xC3\xA9\xC3\xAA\xC3"
    "\xAB\xC3\xAC\xC3\xAD\xC3\xAE\xC3\xAF"
    "\xC3\xB0\xC3\xB1\xC3\xB2\xC3\xB3\xC3\xB4\xC3\xB5\xC3\xB6\xC3\xB7\xC3\xB8\xC3\xB9\xC3\xBA\xC3"
    "\xBB\xC3\xBC\xC3\xBD\xC3\xBE\xC3\xBF";

void vs_recycle(void)
{
    memset(g_pos, 0, sizeof g_pos);
    g_pos_next = 0;
    if (g_shared == NULL) return;
    for (size_t k = 0; k < VS_SHARED_COUNT; k++)
        g_shared[k].u.s.hash = 0;
}

void vs_shared_init(val *block)
{
    memset(block, 0, VS_SHARED_COUNT * sizeof(val));
    for (size_t k = 0; k < VS_SHARED_COUNT; k++) {
        val *v = &block[k];
        v->ty = VT_STR;
        if (k == 0) {
            v->u.s.s = "";
        } else if (k <= 128) {
            v->u.s.s = &g_ascii_bytes[k - 1];
            v->u.s.blen = v->u.s.clen = 1;
        } else {
            v->u.s.s = g_latin1_bytes + 2 * (k - 129);
            v->u.s.blen = 2;
            v->u.s.clen = 1;
        }
        v->flags = v->u.s.blen == 2 ? 0 : VF_ASCII;
    }
    g_shared = block;
}

val *vs_char(vctx *c, const char *p, size_t adv)
{
    unsigned char b = (unsigned char)p[0];
    if (adv == 1 && b < 128) return &g_shared[1 + b];
    if (adv == 2 && b >= 0xC2 && b < 0xC4) { /* U+0080..U+00FF (Latin-1): shared too */
        unsigned k = ((b & 0x1Fu) << 6 | ((unsigned char)p[1] & 0x3Fu)) - 0x80;
        return &g_shared[129 + k];
    }
    return vs_new_owned(c, (char *)p, adv, 1, adv == 1);
}

val *vs_empty(void)
{
    return &g_empty;
}

val *vs_substr_bytes(vctx *c, const val *s, const char *p, size_t blen)
{
    if (p == s->u.s.s && blen == s->u.s.blen) return (val *)s; /* all of it: s itself, as CPython */
    if (blen == 0) return &g_empty;
    if (blen == 1 || (blen == 2 && (unsigned char)p[0] >= 0xC2 && (unsigned char)p[0] < 0xC4))
        return vs_char(c, p, blen);
    if (s->flags & VF_ASCII) return vs_new_owned(c, (char *)p, blen, blen, true);
    return str_bytes(c, p, blen);
}

val *vs_char_at(vctx *c, val *s, size_t idx)
{
    size_t off = vs_offset(s, idx);
    size_t adv = 1;
    if (!(s->flags & VF_ASCII)) vs_decode1(s->u.s.s + off, s->u.s.blen - off, &adv);
    return vs_char(c, s->u.s.s + off, adv);
}

val *vs_getitem(vctx *c, val *s, val *key)
{
    int64_t len = (int64_t)s->u.s.clen;
    if (v_type(key) == VT_SLICE) {
        int64_t start, stop, step, slen;
        if (vseq_slice_indices(c, key, len, &start, &stop, &step, &slen)) return NULL;
        if (step == 1) return vs_substr(c, s, (size_t)start, (size_t)(start + slen));
        if (slen <= 0) return &g_empty;
        sbuild b;
        sb_init(&b, c, (size_t)slen);
        if (s->flags & VF_ASCII) {
            for (int64_t i = 0, k = start; i < slen; i++, k += step)
                sb_put(&b, s->u.s.s + k, 1, 1, true);
        } else {
            int32_t *cps = to_cps(c, s);
            if (!cps) return NULL;
            for (int64_t i = 0, k = start; i < slen; i++, k += step)
                sb_cp(&b, cps[k]);
        }
        return sb_done(&b);
    }
    int64_t i;
    if (v_int_index(c, key, &i, "string indices must be integers")) return NULL;
    if (vseq_index_norm(&i, len)) return v_raise(c, "IndexError", "string index out of range");
    return vs_char_at(c, s, (size_t)i);
}

/* memchr, after a short inline look: pieces of split text are often a few
 * bytes long, where memchr's set-up costs more than the search. */
static inline const char *find_byte(const char *h, size_t hl, char ch)
{
    size_t k = hl < 16 ? hl : 16;
    for (size_t i = 0; i < k; i++)
        if (h[i] == ch) return h + i;
    return hl > 16 ? memchr(h + 16, ch, hl - 16) : NULL;
}

/* Occurrences of the byte ch in h[0..hl). */
static size_t count_byte(const char *h, size_t hl, char ch)
{
    size_t n = 0;
    for (size_t i = 0; i < hl; i++)
        n += h[i] == ch;
    return n;
}

/* Positions of h[0..hl) where the nl-byte w starts (nl 2..4). */
static inline __attribute__((always_inline)) size_t count_cp(const unsigned char *u, size_t hl,
                                                             const unsigned char *w, size_t nl)
{
    size_t n = 0;
    for (size_t i = 0; i + nl <= hl; i++) {
        bool m = u[i] == w[0] && u[i + 1] == w[1];
        for (size_t j = 2; j < nl; j++)
            m = m && u[i + j] == w[j];
        n += m;
    }
    return n;
}

static const char *find_bytes(const char *h, size_t hl, const char *n, size_t nl)
{
    if (nl == 0) return h;
    if (nl == 1) return find_byte(h, hl, n[0]);
    if (nl > hl) return NULL;
    /* the first positions inline (a split's next separator is often
     * near), then memmem from where they stopped */
    size_t last = hl - nl, k = last < 16 ? last + 1 : 16;
    for (size_t i = 0; i < k; i++)
        if (h[i] == n[0] && memcmp(h + i + 1, n + 1, nl - 1) == 0) return h + i;
    if (k > last) return NULL;
    h += k;
    hl -= k;
    return memmem(h, hl, n, nl);
}

static const char *rfind_bytes(const char *h, size_t hl, const char *n, size_t nl)
{
    if (nl == 0) return h + hl;
    if (nl > hl) return NULL;
    /* candidates by their first byte, from the right */
    size_t lim = hl - nl + 1;
    const char *f;
    while (lim > 0 && (f = memrchr(h, n[0], lim)) != NULL) {
        if (memcmp(f + 1, n + 1, nl - 1) == 0) return f;
        lim = (size_t)(f - h);
    }
    return NULL;
}

int vs_contains(vctx *c, val *hay, val *needle)
{
    if (v_type(needle) != VT_STR) {
        v_raise(c, "TypeError", "'in <string>' requires string as left operand, not %s",
                v_type_name(needle));
        return -1;
    }
    return find_bytes(hay->u.s.s, hay->u.s.blen, needle->u.s.s, needle->u.s.blen) != NULL;
}

/* ---- methods ---------------------------------------------------------- */

static bool need_str(vctx *c, val *v, const char *what)
{
    if (v_type(v) == VT_STR) return true;
    if (what)
        v_raise(c, "TypeError", "%s", what);
    else
        v_raise(c, "TypeError", "must be str, not %s", v_type_name(v));
    return false;
}

/* slice-style start/end (None allowed) normalized to [0, len] like
 * CPython's ADJUST_INDICES (start may exceed len). */
/* A start/end argument as CPython's _PyEval_SliceIndex reads it: any int,
 * clamped to the int64 range ('abc'.find('', 2**63) is -1, not an error). */
static int slice_bound(vctx *c, val *v, int64_t *out)
{
    if (!v_is_intlike(v)) {
        v_raise(c, "TypeError",
                "slice indices must be integers or None or have an __index__ method");
        return -1;
    }
    if (!v_as_i64(v, out)) *out = vi_sign(v) > 0 ? INT64_MAX : INT64_MIN;
    return 0;
}

static int adjust_indices(vctx *c, val *vs, val *ve, int64_t len, int64_t *start, int64_t *end)
{
    *start = 0;
    *end = len;
    if (vs && v_type(vs) != VT_NONE && slice_bound(c, vs, start)) return -1;
    if (ve && v_type(ve) != VT_NONE && slice_bound(c, ve, end)) return -1;
    if (*end > len)
        *end = len;
    else if (*end < 0) {
        *end += len;
        if (*end < 0) *end = 0;
    }
    if (*start < 0) {
        *start += len;
        if (*start < 0) *start = 0;
    }
    return 0;
}

static val *m_count_find(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                         size_t nkw, int mode /*0 count 1 find 2 rfind 3 index */)
{
    static const char *const names[] = {"sub", "start", "end"};
    val *p[3];
    if (v_parse_args(c, name, a, na, kw, nkw, names, 3, 3, 1, p)) return NULL;
    if (!need_str(c, p[0], NULL)) return NULL;
    int64_t len = (int64_t)s->u.s.clen, st, en;
    if (adjust_indices(c, p[1], p[2], len, &st, &en)) return NULL;
    val *sub = p[0];
    if (en - st < (int64_t)sub->u.s.clen) {
        if (mode == 0) return v_int64(c, 0);
        if (mode == 3) return v_raise(c, "ValueError", "substring not found");
        return v_int64(c, -1);
    }
    size_t bo = vs_offset(s, (size_t)st), be = vs_offset(s, (size_t)en);
    const char *h = s->u.s.s + bo;
    size_t hl = be - bo;
    if (mode == 0) {
        if (sub->u.s.blen == 0) return v_int64(c, en - st + 1);
        int64_t n = 0;
        if (sub->u.s.blen == 1) { /* one byte (an ASCII character): a plain scan */
            if (v_steps(c, hl / 64)) return NULL;
            return v_int64(c, (int64_t)count_byte(h, hl, sub->u.s.s[0]));
        }
        if (sub->u.s.clen == 1) {
            /* one code point of 2-4 bytes: its occurrences cannot overlap
             * (UTF-8 synchronizes on lead bytes), so every position that
             * matches counts; a branch-free scan, as for one byte */
            const unsigned char *u = (const unsigned char *)h,
                                *w = (const unsigned char *)sub->u.s.s;
            if (v_steps(c, hl / 64)) return NULL;
            switch (sub->u.s.blen) { /* constant lengths, so each scan vectorizes */
            case 2:
                n = count_cp(u, hl, w, 2);
                break;
            case 3:
                n = count_cp(u, hl, w, 3);
                break;
            default:
                n = count_cp(u, hl, w, 4);
                break;
            }
            return v_int64(c, n);
        }
        const char *q = h;
        size_t left = hl;
        const char *f;
        while ((f = find_bytes(q, left, sub->u.s.s, sub->u.s.blen)) != NULL) {
            n++;
            left -= (size_t)(f - q) + sub->u.s.blen;
            q = f + sub->u.s.blen;
        }
        if (v_steps(c, hl / 64)) return NULL;
        return v_int64(c, n);
    }
    const char *f = mode == 2 ? rfind_bytes(h, hl, sub->u.s.s, sub->u.s.blen)
                              : find_bytes(h, hl, sub->u.s.s, sub->u.s.blen);
    if (!f) {
        if (mode == 3) return v_raise(c, "ValueError", "substring not found");
        return v_int64(c, -1);
    }
    return v_int64(c, (int64_t)cps_before(s, (size_t)(f - s->u.s.s)));
}

static val *m_startsends(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                         size_t nkw, bool ends)
{
    static const char *const names[] = {"prefix", "start", "end"};
    val *p[3];
    if (v_parse_args(c, name, a, na, kw, nkw, names, 3, 3, 1, p)) return NULL;
    int64_t len = (int64_t)s->u.s.clen, st, en;
    if (adjust_indices(c, p[1], p[2], len, &st, &en)) return NULL;
    val *one = p[0];
    val **list = &one;
    size_t n = 1;
    if (v_type(one) == VT_TUPLE) {
        list = one->u.seq.items;
        n = one->u.seq.len;
    } else if (v_type(one) != VT_STR) {
        return v_raise(c, "TypeError", "%s first arg must be str or a tuple of str, not %s", name,
                       v_type_name(one));
    }
    for (size_t i = 0; i < n; i++) {
        val *x = list[i];
        if (v_type(x) != VT_STR)
            return v_raise(c, "TypeError", "tuple for %s must only contain str, not %s", name,
                           v_type_name(x));
        int64_t xl = (int64_t)x->u.s.clen;
        if (st > len) continue;
        if (en - st < xl) continue;
        size_t pos = ends ? (size_t)(en - xl) : (size_t)st;
        size_t bo = vs_offset(s, pos);
        if (bo + x->u.s.blen <= s->u.s.blen && memcmp(s->u.s.s + bo, x->u.s.s, x->u.s.blen) == 0)
            return v_true();
    }
    return v_false();
}

/* Whether strip() removes cp: one of cs[0, ncs), or white space when cs is
 * NULL. */
static bool strip_hit(int32_t cp, const int32_t *cs, size_t ncs)
{
    if (!cs) return vs_isspace_cp(cp);
    for (size_t k = 0; k < ncs; k++)
        if (cs[k] == cp) return true;
    return false;
}

/* The span [*lo, *hi) of p[0, n) without the code points strip_hit removes
 * at the ends `which` names (1 the left, 2 the right, 3 both). */
static void strip_span(const char *p, size_t n, int which, const int32_t *cs, size_t ncs,
                       size_t *lo, size_t *hi)
{
    size_t l = 0, h = n;
    while (l < h && (which & 1)) {
        size_t adv;
        if (!strip_hit(vs_decode1(p + l, h - l, &adv), cs, ncs)) break;
        l += adv;
    }
    while (h > l && (which & 2)) {
        size_t k0;
        if (!strip_hit(vs_decode_before(p, l, h, &k0), cs, ncs)) break;
        h = k0;
    }
    *lo = l;
    *hi = h;
}

void vs_trim_space(const char *s, size_t len, size_t *lo, size_t *hi)
{
    strip_span(s, len, 3, NULL, 0, lo, hi);
}

/* strip: which 1 left, 2 right, 3 both */
static val *m_strip(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                    size_t nkw, int which)
{
    static const char *const names[] = {"chars"};
    val *p[1];
    if (v_parse_args(c, name, a, na, kw, nkw, names, 1, 1, 0, p)) return NULL;
    val *chars = p[0] && v_type(p[0]) != VT_NONE ? p[0] : NULL;
    if (chars && v_type(chars) != VT_STR)
        return v_raise(c, "TypeError", "%s arg must be None or str", name);
    int32_t *cs = NULL;
    size_t ncs = 0;
    if (chars) {
        cs = to_cps(c, chars);
        if (!cs) return NULL;
        ncs = chars->u.s.clen;
    }
    const char *p0 = s->u.s.s;
    size_t lo, hi;
    strip_span(p0, s->u.s.blen, which, cs, ncs, &lo, &hi);
    if (lo == 0 && hi == s->u.s.blen) return s;
    return str_bytes(c, p0 + lo, hi - lo);
}

static int get_maxsplit(vctx *c, val *v, int64_t *out)
{
    *out = -1;
    if (!v) return 0;
    if (!v_is_intlike(v)) {
        v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer", v_type_name(v));
        return -1;
    }
    if (!v_as_i64(v, out)) {
        v_raise(c, "OverflowError", "Python int too large to convert to C ssize_t");
        return -1;
    }
    return 0;
}

/* Pushes a new item (NULL: its construction failed); on failure the
 * builder is released, so callers just return. */
static int lb_push(vctx *c, vbuild *l, val *v)
{
    if (!v || v_build_push(c, l, v)) {
        v_build_free(l);
        return -1;
    }
    return 0;
}

static void lb_reverse(vbuild *l)
{
    for (size_t i = 0; i < l->n / 2; i++) {
        val *t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
}

/* Whether the character at b[i] is whitespace; *adv = its length. */
static inline bool space_at(const char *b, size_t n, size_t i, size_t *adv)
{
    unsigned char ch = (unsigned char)b[i];
    if (ch < 0x80) {
        *adv = 1;
        return ch == ' ' || (ch >= 9 && ch <= 13) || (ch >= 28 && ch <= 31);
    }
    return vs_isspace_cp(vs_decode1(b + i, n - i, adv));
}

/* The length of the line boundary at b[i] (0: none): \n \r \r\n \v \f
 * \x1c-\x1e, U+0085 (C2 85), U+2028/2029 (E2 80 A8/A9). */
static inline size_t line_break_at(const char *b, size_t n, size_t i)
{
    const unsigned char *u = (const unsigned char *)b;
    unsigned char ch = u[i];
    if (ch < 0x20) {
        if (!((1u << ch) & ((1u << '\n') | (1u << '\r') | (1u << 0x0B) | (1u << 0x0C) |
                            (1u << 0x1C) | (1u << 0x1D) | (1u << 0x1E))))
            return 0;
        return ch == '\r' && i + 1 < n && u[i + 1] == '\n' ? 2 : 1;
    }
    if (ch == 0xC2) return i + 1 < n && u[i + 1] == 0x85 ? 2 : 0;
    if (ch == 0xE2)
        return i + 2 < n && u[i + 1] == 0x80 && (u[i + 2] == 0xA8 || u[i + 2] == 0xA9) ? 3 : 0;
    return 0;
}

static val *m_split(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                    size_t nkw, bool right)
{
    static const char *const names[] = {"sep", "maxsplit"};
    val *p[2];
    if (v_parse_args(c, name, a, na, kw, nkw, names, 2, 0, 0, p)) return NULL;
    val *sep = p[0] && v_type(p[0]) != VT_NONE ? p[0] : NULL;
    int64_t maxs;
    if (get_maxsplit(c, p[1], &maxs)) return NULL;
    if (maxs < 0) maxs = INT64_MAX;
    if (sep && v_type(sep) != VT_STR)
        return v_raise(c, "TypeError", "must be str or None, not %s", v_type_name(sep));
    if (sep && sep->u.s.blen == 0) return v_raise(c, "ValueError", "empty separator");
    vbuild l = {0};
    const char *b = s->u.s.s;
    size_t n = s->u.s.blen;
    if (v_steps(c, n / 32)) return NULL;
    if (sep) {
        const char *sp = sep->u.s.s;
        size_t sl = sep->u.s.blen;
        if (maxs == INT64_MAX) {
            /* no limit: count the pieces first, so the list is allocated
             * once at its size */
            size_t k = 0;
            if (sl == 1)
                k = count_byte(b, n, sp[0]);
            else
                for (const char *q = b, *f; (f = find_bytes(q, n - (size_t)(q - b), sp, sl));
                     q = f + sl)
                    k++;
            if (v_build_presize(c, &l, k + 1)) return NULL;
        }
        if (!right) {
            size_t pos = 0;
            while (maxs > 0) {
                const char *f = find_bytes(b + pos, n - pos, sp, sl);
                if (!f) break;
                if (lb_push(c, &l, vs_substr_bytes(c, s, b + pos, (size_t)(f - b) - pos)))
                    return NULL;
                pos = (size_t)(f - b) + sl;
                maxs--;
            }
            if (lb_push(c, &l, vs_substr_bytes(c, s, b + pos, n - pos))) return NULL;
        } else {
            size_t end = n;
            while (maxs > 0) {
                const char *f = rfind_bytes(b, end, sp, sl);
                if (!f) break;
                size_t fo = (size_t)(f - b);
                if (lb_push(c, &l, vs_substr_bytes(c, s, b + fo + sl, end - fo - sl))) return NULL;
                end = fo;
                maxs--;
            }
            if (lb_push(c, &l, vs_substr_bytes(c, s, b, end))) return NULL;
            lb_reverse(&l);
        }
        return v_build_list(c, &l);
    }
    /* whitespace split */
    if (!right) {
        size_t i = 0;
        while (i < n) {
            size_t adv;
            while (i < n && space_at(b, n, i, &adv))
                i += adv;
            if (i >= n) break;
            if (maxs == 0) {
                /* the rest keeps its trailing whitespace */
                if (lb_push(c, &l, vs_substr_bytes(c, s, b + i, n - i))) return NULL;
                break;
            }
            size_t j = i;
            while (j < n && !space_at(b, n, j, &adv))
                j += adv;
            if (lb_push(c, &l, vs_substr_bytes(c, s, b + i, j - i))) return NULL;
            maxs--;
            i = j;
        }
    } else {
        size_t e = n;
        while (e > 0) {
            /* skip trailing spaces */
            while (e > 0) {
                size_t k0;
                if (!vs_isspace_cp(vs_decode_before(b, 0, e, &k0))) break;
                e = k0;
            }
            if (e == 0) break;
            if (maxs == 0) {
                /* the rest keeps its leading whitespace */
                if (lb_push(c, &l, vs_substr_bytes(c, s, b, e))) return NULL;
                break;
            }
            size_t st = e;
            while (st > 0) {
                size_t k0;
                if (vs_isspace_cp(vs_decode_before(b, 0, st, &k0))) break;
                st = k0;
            }
            if (lb_push(c, &l, vs_substr_bytes(c, s, b + st, e - st))) return NULL;
            maxs--;
            e = st;
        }
        lb_reverse(&l);
    }
    return v_build_list(c, &l);
}

int vs_keepends(vctx *c, val *v, bool *keep)
{
    int64_t k;
    if (!v_is_intlike(v)) {
        v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer", v_type_name(v));
        return -1;
    }
    if (!v_as_i64(v, &k) || k < INT32_MIN || k > INT32_MAX) { /* a C int, as CPython */
        v_raise(c, "OverflowError", "Python int too large to convert to C int");
        return -1;
    }
    *keep = k != 0;
    return 0;
}

static val *m_splitlines(vctx *c, val *s, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    static const char *const names[] = {"keepends"};
    val *p[1];
    if (v_parse_args(c, "splitlines", a, na, kw, nkw, names, 1, 0, 0, p)) return NULL;
    bool keep = false;
    if (p[0] && vs_keepends(c, p[0], &keep)) return NULL;
    vbuild l = {0};
    const char *b = s->u.s.s;
    size_t n = s->u.s.blen, i = 0, start = 0;
    if (v_steps(c, n / 32)) return NULL;
    /* count the lines first: the list is allocated once at its size */
    size_t lines = 0, last = 0;
    for (size_t j = 0; j < n;) {
        size_t k = line_break_at(b, n, j);
        lines += k != 0;
        j += k ? k : 1;
        if (k) last = j;
    }
    if (v_build_presize(c, &l, lines + (last < n))) return NULL;
    while (i < n) {
        size_t k = line_break_at(b, n, i);
        if (k == 0) {
            i++;
            continue;
        }
        size_t eol = i;
        i += k;
        if (lb_push(c, &l, vs_substr_bytes(c, s, b + start, (keep ? i : eol) - start))) return NULL;
        start = i;
    }
    if (start < n && lb_push(c, &l, vs_substr_bytes(c, s, b + start, n - start))) return NULL;
    return v_build_list(c, &l);
}

static val *m_replace(vctx *c, val *s, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    static const char *const names[] = {"old", "new", "count"};
    val *p[3];
    if (v_parse_args(c, "replace", a, na, kw, nkw, names, 3, 3, 2, p)) return NULL;
    if (!need_str(c, p[0], NULL)) {
        c->exc_msg[0] = 0;
        snprintf(c->exc_msg, sizeof c->exc_msg, "replace() argument 1 must be str, not %s",
                 v_type_name(p[0]));
        return NULL;
    }
    if (v_type(p[1]) != VT_STR)
        return v_raise(c, "TypeError", "replace() argument 2 must be str, not %s",
                       v_type_name(p[1]));
    int64_t cnt = -1;
    if (p[2] && get_maxsplit(c, p[2], &cnt)) return NULL;
    if (cnt < 0) cnt = INT64_MAX;
    val *old = p[0], *nw = p[1];
    if (cnt == 0) return s;
    const char *h = s->u.s.s;
    size_t n = s->u.s.blen;
    if (v_steps(c, n / 32)) return NULL;
    if (old->u.s.blen == 0) {
        sbuild b;
        sb_init(&b, c, s->u.s.blen + 16);
        size_t i = 0;
        while (cnt > 0) {
            sb_str(&b, nw);
            cnt--;
            if (i >= n) break;
            size_t adv = 1;
            vs_decode1(h + i, n - i, &adv);
            sb_put(&b, h + i, adv, 1, adv == 1);
            i += adv;
        }
        if (i < n)
            sb_put(&b, h + i, n - i, cps_before(s, n) - cps_before(s, i),
                   (s->flags & VF_ASCII) != 0);
        return sb_done(&b);
    }
    /* count the matches first (as CPython), then one exact allocation */
    const char *op = old->u.s.s, *np = nw->u.s.s;
    size_t ol = old->u.s.blen, nl = nw->u.s.blen, k = 0;
    if (ol == 1) {
        k = count_byte(h, n, op[0]);
    } else {
        for (const char *q = h, *f; (f = find_bytes(q, n - (size_t)(q - h), op, ol)) != NULL;
             q = f + ol)
            k++;
    }
    if (k > (uint64_t)cnt) k = (size_t)cnt;
    if (k == 0) return s;
    size_t max = c->lim.max_str_bytes;
    if (nl > ol && k > (max - n) / (nl - ol)) return v_limit(c, "memory");
    size_t total = n - k * ol + k * nl;
    char *o;
    val *r = vs_alloc(c, VT_STR, total, &o);
    if (!r) return NULL;
    size_t pos = 0, w = 0;
    for (size_t i = 0; i < k; i++) {
        const char *f = find_bytes(h + pos, n - pos, op, ol);
        size_t sl = (size_t)(f - h) - pos;
        memcpy(o + w, h + pos, sl);
        w += sl;
        if (nl == 1)
            o[w++] = np[0];
        else {
            memcpy(o + w, np, nl);
            w += nl;
        }
        pos += sl + ol;
    }
    memcpy(o + w, h + pos, n - pos);
    /* whole characters are replaced: the count moves by the difference */
    size_t ncp = s->u.s.clen - k * old->u.s.clen + k * nw->u.s.clen;
    bool ascii = (s->flags & VF_ASCII) && (nw->flags & VF_ASCII);
    return vs_done(c, r, total, ncp, ascii || ncp == total);
}

static val *m_join(vctx *c, val *s, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    static const char *const names[] = {"iterable"};
    val *p[1];
    if (v_parse_args(c, "join", a, na, kw, nkw, names, 1, 1, 1, p)) return NULL;
    val **items;
    size_t n;
    if (v_type(p[0]) != VT_LIST && v_type(p[0]) != VT_TUPLE) {
        viter it;
        if (v_iter_init(c, p[0], &it)) {
            c->exc_msg[0] = 0;
            snprintf(c->exc_msg, sizeof c->exc_msg, "can only join an iterable");
            return NULL;
        }
    }
    if (v_type(p[0]) == VT_LIST || v_type(p[0]) == VT_TUPLE) { /* read in place, no copy */
        items = p[0]->u.seq.items;
        n = p[0]->u.seq.len;
    } else if (v_iter_collect(c, p[0], &items, &n)) {
        return NULL;
    }
    size_t total = 0, ncp = 0;
    bool ascii = (s->flags & VF_ASCII) != 0;
    for (size_t i = 0; i < n; i++) {
        const val *x = items[i];
        if (v_type(x) != VT_STR)
            return v_raise(c, "TypeError", "sequence item %zu: expected str instance, %s found", i,
                           v_type_name(items[i]));
        total += x->u.s.blen;
        ncp += x->u.s.clen;
        ascii = ascii && (x->flags & VF_ASCII);
    }
    if (n == 1) return items[0];
    if (n == 0) return &g_empty;
    /* the separators: n - 1 of them, the size checked before it is formed */
    size_t max = c->lim.max_str_bytes;
    if (total > max || (s->u.s.blen && n - 1 > (max - total) / s->u.s.blen))
        return v_limit(c, "memory");
    total += (n - 1) * s->u.s.blen;
    ncp += (n - 1) * s->u.s.clen;
    if (v_steps(c, n / 8 + total / 128)) return NULL;
    char *o;
    val *r = vs_alloc(c, VT_STR, total, &o);
    if (!r) return NULL;
    const char *sp = s->u.s.s;
    size_t sl = s->u.s.blen, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && sl) {
            if (sl == 1)
                o[k++] = sp[0];
            else {
                memcpy(o + k, sp, sl);
                k += sl;
            }
        }
        const val *x = items[i];
        vsess_reading(c, x->u.s.s, x->u.s.blen);
        if (x->u.s.blen == 1)
            o[k++] = x->u.s.s[0];
        else {
            memcpy(o + k, x->u.s.s, x->u.s.blen);
            k += x->u.s.blen;
        }
    }
    return vs_done(c, r, k, ncp, ascii);
}

/* Whether UTF-8 text holds U+03A3 (CE A3), whose lower case depends on
 * its neighbours. */
static bool has_capital_sigma(const char *s, size_t n)
{
    for (const char *p = memchr(s, 0xCE, n); p; p = memchr(p + 1, 0xCE, n - (size_t)(p + 1 - s)))
        if ((size_t)(p + 1 - s) < n && (unsigned char)p[1] == 0xA3) return true;
    return false;
}

/* case transforms: 0 upper 1 lower 2 casefold 3 swapcase 4 title 5 capitalize */
static val *m_case(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                   size_t nkw, int mode)
{
    if (v_parse_args(c, name, a, na, kw, nkw, NULL, 0, 0, 0, NULL)) return NULL;
    size_t n = s->u.s.blen;
    if (v_steps(c, n / 32)) return NULL;
    if (s->flags & VF_ASCII) {
        char *p;
        val *r = vs_alloc(c, VT_STR, n, &p);
        if (!r) return NULL;
        const unsigned char *q = (const unsigned char *)s->u.s.s;
        if (mode == 0 || mode == 1 || mode == 2) {
            /* branch-free, so the compiler vectorizes it */
            unsigned char lo = mode == 0 ? 'a' : 'A', flip = 32;
            for (size_t i = 0; i < n; i++)
                p[i] = (char)(q[i] ^ (((unsigned char)(q[i] - lo) < 26) * flip));
            return vs_done(c, r, n, n, true);
        }
        bool prev_cased = false;
        for (size_t i = 0; i < n; i++) {
            char ch = s->u.s.s[i];
            bool up = ch >= 'A' && ch <= 'Z', lo = ch >= 'a' && ch <= 'z';
            char o = ch;
            switch (mode) {
            case 0:
                o = lo ? ch - 32 : ch;
                break;
            case 1:
            case 2:
                o = up ? ch + 32 : ch;
                break;
            case 3:
                o = lo ? ch - 32 : up ? ch + 32 : ch;
                break;
            case 4:
                o = prev_cased ? (up ? ch + 32 : ch) : (lo ? ch - 32 : ch);
                prev_cased = up || lo;
                break;
            case 5:
                o = i == 0 ? (lo ? ch - 32 : ch) : (up ? ch + 32 : ch);
                break;
            }
            p[i] = o;
        }
        return vs_done(c, r, n, n, true);
    }
    if (mode <= 2 && !(mode == 1 && has_capital_sigma(s->u.s.s, n))) {
        /* streaming: runs of ASCII converted in one pass, other code points
         * through the tables. Most code points keep their UTF-8 length, so
         * the output starts at the input's size and grows when a mapping
         * lengthens it (at most 3 code points of 4 bytes per input one). */
        if (v_check_strlen(c, 3 * n)) return NULL;
        size_t cap = n + 16, k = 0, i = 0, ncp = 0;
        char *o = v_alloc_bytes(c, cap);
        if (!o) return NULL;
        bool ascii = true;
        const unsigned char *p = (const unsigned char *)s->u.s.s;
        unsigned char lo = mode == 0 ? 'a' : 'A';
        while (i < n) {
            if (k + (n - i) + 12 > cap) {
                cap = 2 * (k + (n - i) + 12);
                if ((o = v_realloc(c, o, cap)) == NULL) return NULL;
            }
            size_t j = i;
            while (j < n && p[j] < 0x80)
                j++;
            for (size_t q = i; q < j; q++) /* branch-free, as the ASCII path */
                o[k++] = (char)(p[q] ^ (((unsigned char)(p[q] - lo) < 26) * 32));
            ncp += j - i;
            if ((i = j) == n) break;
            size_t adv;
            int32_t cp = vs_decode1(s->u.s.s + i, n - i, &adv);
            i += adv;
            int32_t out[3];
            int cnt = map_full(mode == 0 ? 0 : mode == 1 ? 1 : 3, cp, out);
            for (int q = 0; q < cnt; q++) {
                if (out[q] >= 0x80) ascii = false;
                k += (size_t)utf8_encode((uint32_t)(out[q]), o + k);
            }
            ncp += (size_t)cnt;
        }
        return vs_new_owned(c, o, k, ncp, ascii);
    }
    int32_t *cps = to_cps(c, s);
    if (!cps) return NULL;
    size_t m = s->u.s.clen;
    sbuild b;
    sb_init(&b, c, n + 8);
    bool prev_cased = false;
    for (size_t i = 0; i < m; i++) {
        int32_t out[3];
        int k;
        int32_t cp = cps[i];
        switch (mode) {
        case 0:
            k = map_full(0, cp, out);
            break;
        case 1:
            k = lower_at(cps, m, i, out);
            break;
        case 2:
            k = map_full(3, cp, out);
            break;
        case 3:
            if (u_isupper(cp))
                k = lower_at(cps, m, i, out);
            else if (u_islower(cp))
                k = map_full(0, cp, out);
            else {
                out[0] = cp;
                k = 1;
            }
            break;
        case 4:
            k = prev_cased ? lower_at(cps, m, i, out) : map_full(2, cp, out);
            prev_cased = u_iscased(cp);
            break;
        default:
            k = i == 0 ? map_full(2, cp, out) : lower_at(cps, m, i, out);
            break;
        }
        for (int j = 0; j < k; j++)
            sb_cp(&b, out[j]);
    }
    return sb_done(&b);
}

/* predicates: 0 digit 1 alpha 2 alnum 3 space 4 numeric 5 decimal 6 lower 7 upper 8 title */
static val *m_is(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                 size_t nkw, int mode)
{
    if (v_parse_args(c, name, a, na, kw, nkw, NULL, 0, 0, 0, NULL)) return NULL;
    const char *p = s->u.s.s;
    size_t n = s->u.s.blen, i = 0;
    if (mode <= 5 && n == 0) return v_false();
    bool cased = false, prev_cased = false;
    while (i < n) {
        size_t adv;
        int32_t cp = vs_decode1(p + i, n - i, &adv);
        i += adv;
        switch (mode) {
        case 0:
            if (!u_isdigit(cp)) return v_false();
            break;
        case 1:
            if (!u_isalpha(cp)) return v_false();
            break;
        case 2:
            if (!(u_isalpha(cp) || u_isnumeric(cp))) return v_false();
            break;
        case 3:
            if (!vs_isspace_cp(cp)) return v_false();
            break;
        case 4:
            if (!u_isnumeric(cp)) return v_false();
            break;
        case 5:
            if (!u_isdecimal(cp)) return v_false();
            break;
        case 6:
            if (u_isupper(cp) || u_istitle(cp)) return v_false();
            if (u_islower(cp)) cased = true;
            break;
        case 7:
            if (u_islower(cp) || u_istitle(cp)) return v_false();
            if (u_isupper(cp)) cased = true;
            break;
        case 8:
            if (u_isupper(cp) || u_istitle(cp)) {
                if (prev_cased) return v_false();
                prev_cased = cased = true;
            } else if (u_islower(cp)) {
                if (!prev_cased) return v_false();
                prev_cased = cased = true;
            } else
                prev_cased = false;
            break;
        }
    }
    if (mode >= 6) return v_bool(cased);
    return v_true();
}

static int get_width_fill(vctx *c, const char *name, val **a, size_t na, const vkwarg *kw,
                          size_t nkw, int64_t *w, int32_t *fill, const char **fillp,
                          size_t *filllen, bool allow_fill)
{
    static const char *const names[] = {"width", "fillchar"};
    val *p[2];
    if (v_parse_args(c, name, a, na, kw, nkw, names, allow_fill ? 2 : 1, allow_fill ? 2 : 1, 1, p))
        return -1;
    if (!v_is_intlike(p[0])) {
        v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer",
                v_type_name(p[0]));
        return -1;
    }
    if (!v_as_i64(p[0], w)) { /* a Py_ssize_t: past it either way is an error */
        v_raise(c, "OverflowError", "Python int too large to convert to C ssize_t");
        return -1;
    }
    *fill = ' ';
    *fillp = " ";
    *filllen = 1;
    if (allow_fill && p[1]) {
        if (v_type(p[1]) != VT_STR) {
            v_raise(c, "TypeError", "%s() argument 2 must be str, not %s", name, v_type_name(p[1]));
            return -1;
        }
        if (p[1]->u.s.clen != 1) {
            v_raise(c, "TypeError", "The fill character must be exactly one character long");
            return -1;
        }
        size_t adv;
        *fill = vs_decode1(p[1]->u.s.s, p[1]->u.s.blen, &adv);
        *fillp = p[1]->u.s.s;
        *filllen = p[1]->u.s.blen;
    }
    return 0;
}

static val *pad(vctx *c, val *s, int64_t left, int64_t right, const char *fp, size_t fl)
{
    if (left <= 0 && right <= 0) return s;
    if (left < 0) left = 0;
    if (right < 0) right = 0;
    uint64_t padn = (uint64_t)left + (uint64_t)right;
    if (padn > (c->lim.max_str_bytes - s->u.s.blen) / fl) return v_limit(c, "memory");
    size_t total = s->u.s.blen + (size_t)padn * fl;
    char *o;
    val *r = vs_alloc(c, VT_STR, total, &o);
    if (!r) return NULL;
    size_t lb = (size_t)left * fl;
    if (fl == 1) {
        memset(o, fp[0], lb);
        memset(o + lb + s->u.s.blen, fp[0], total - lb - s->u.s.blen);
    } else {
        vs_fill_repeat(o, fp, fl, lb);
        vs_fill_repeat(o + lb + s->u.s.blen, fp, fl, total - lb - s->u.s.blen);
    }
    memcpy(o + lb, s->u.s.s, s->u.s.blen);
    return vs_done(c, r, total, s->u.s.clen + (size_t)padn, (s->flags & VF_ASCII) && fl == 1);
}

static val *m_partition(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                        size_t nkw, bool right)
{
    static const char *const names[] = {"sep"};
    val *p[1];
    if (v_parse_args(c, name, a, na, kw, nkw, names, 1, 1, 1, p)) return NULL;
    if (v_type(p[0]) != VT_STR)
        return v_raise(c, "TypeError", "must be str, not %s", v_type_name(p[0]));
    val *sep = p[0];
    if (sep->u.s.blen == 0) return v_raise(c, "ValueError", "empty separator");
    const char *f = right ? rfind_bytes(s->u.s.s, s->u.s.blen, sep->u.s.s, sep->u.s.blen)
                          : find_bytes(s->u.s.s, s->u.s.blen, sep->u.s.s, sep->u.s.blen);
    val *empty = &g_empty;
    val *t[3];
    if (!f) {
        if (right) {
            t[0] = empty;
            t[1] = empty;
            t[2] = s;
        } else {
            t[0] = s;
            t[1] = empty;
            t[2] = empty;
        }
    } else {
        size_t fo = (size_t)(f - s->u.s.s);
        t[0] = str_bytes(c, s->u.s.s, fo);
        t[1] = sep;
        t[2] = str_bytes(c, f + sep->u.s.blen, s->u.s.blen - fo - sep->u.s.blen);
    }
    if (!t[0] || !t[2]) return NULL;
    return v_tuple(c, t, 3);
}

static void put_unit(strbuf *b, uint32_t u, int width, bool be)
{
    for (int k = 0; k < width; k++) {
        int sh = be ? 8 * (width - 1 - k) : 8 * k;
        strbuf_putc(b, (char)((u >> sh) & 0xFF));
    }
}

/* Whether UTF-8 text holds an encoded surrogate (ED A0..BF ..), which
 * strict UTF-8 refuses. */
static bool has_surrogate(const char *p, size_t n)
{
    const char *q = p, *f;
    while ((f = memchr(q, 0xED, n - (size_t)(q - p))) != NULL) {
        if ((size_t)(f - p) + 1 < n && (unsigned char)f[1] >= 0xA0) return true;
        q = f + 1;
    }
    return false;
}

val *vs_encode(vctx *c, val *s, val *enc, val *errors)
{
    char e[32] = "utf-8";
    if (enc) {
        if (v_type(enc) != VT_STR)
            return v_raise(c, "TypeError", "encode() argument 'encoding' must be str, not %s",
                           v_type_name(enc));
        size_t k = 0;
        for (size_t i = 0; i < enc->u.s.blen && k < sizeof e - 1; i++) {
            char ch = enc->u.s.s[i];
            e[k++] = (ch >= 'A' && ch <= 'Z') ? ch + 32 : (ch == '_' || ch == ' ') ? '-' : ch;
        }
        e[k] = 0;
    }
    if (errors && v_type(errors) != VT_STR)
        return v_raise(c, "TypeError", "encode() argument 'errors' must be str, not %s",
                       v_type_name(errors));
    const char *ev = errors ? errors->u.s.s : "strict";
    enum {
        E_STRICT,
        E_IGNORE,
        E_REPLACE,
        E_XML,
        E_BACKSLASH,
        E_SURROGATEPASS,
        E_OTHER
    } eh = E_STRICT;
    if (errors) {
        size_t l = errors->u.s.blen;
        if (l == 6 && !memcmp(ev, "strict", 6))
            eh = E_STRICT;
        else if (l == 6 && !memcmp(ev, "ignore", 6))
            eh = E_IGNORE;
        else if (l == 7 && !memcmp(ev, "replace", 7))
            eh = E_REPLACE;
        else if (l == 17 && !memcmp(ev, "xmlcharrefreplace", 17))
            eh = E_XML;
        else if (l == 16 && !memcmp(ev, "backslashreplace", 16))
            eh = E_BACKSLASH;
        else if (l == 13 && !memcmp(ev, "surrogatepass", 13))
            eh = E_SURROGATEPASS;
        else
            eh = E_OTHER;
    }
    int kind, width = 1;
    bool be = false, bom = false;
    const char *en;
    if (!strcmp(e, "utf-8") || !strcmp(e, "utf8") || !strcmp(e, "u8") || !strcmp(e, "utf"))
        kind = 0, en = "utf-8";
    else if (!strcmp(e, "ascii") || !strcmp(e, "us-ascii") || !strcmp(e, "646"))
        kind = 1, en = "ascii";
    else if (!strcmp(e, "latin-1") || !strcmp(e, "latin1") || !strcmp(e, "iso-8859-1") ||
             !strcmp(e, "l1") || !strcmp(e, "iso8859-1") || !strcmp(e, "8859") ||
             !strcmp(e, "cp819") || !strcmp(e, "latin"))
        kind = 2, en = "latin-1";
    else if (!strcmp(e, "utf-16") || !strcmp(e, "utf16"))
        kind = 3, width = 2, bom = true, en = "utf-16";
    else if (!strcmp(e, "utf-16-le") || !strcmp(e, "utf-16le"))
        kind = 3, width = 2, en = "utf-16-le";
    else if (!strcmp(e, "utf-16-be") || !strcmp(e, "utf-16be"))
        kind = 3, width = 2, be = true, en = "utf-16-be";
    else if (!strcmp(e, "utf-32") || !strcmp(e, "utf32"))
        kind = 4, width = 4, bom = true, en = "utf-32";
    else if (!strcmp(e, "utf-32-le") || !strcmp(e, "utf-32le"))
        kind = 4, width = 4, en = "utf-32-le";
    else if (!strcmp(e, "utf-32-be") || !strcmp(e, "utf-32be"))
        kind = 4, width = 4, be = true, en = "utf-32-be";
    else
        return v_raise(c, "LookupError", "unknown encoding: %.100s", enc ? enc->u.s.s : e);
    /* The text is UTF-8 already: UTF-8 (without surrogates) and ASCII or
     * Latin-1 of ASCII text are its own bytes, shared, not copied (both are
     * immutable). */
    if ((kind == 0 && !has_surrogate(s->u.s.s, s->u.s.blen)) ||
        ((kind == 1 || kind == 2) && (s->flags & VF_ASCII))) {
        val *v = v_new(c, VT_BYTES);
        if (v == NULL) return NULL;
        v->u.s.s = s->u.s.s;
        v->u.s.blen = v->u.s.clen = s->u.s.blen;
        return v;
    }
    strbuf b;
    strbuf_init(&b);
    if (bom) put_unit(&b, 0xFEFF, width, false);
    size_t i = 0;
    while (i < s->u.s.blen) {
        size_t adv;
        int32_t cp = vs_decode1(s->u.s.s + i, s->u.s.blen - i, &adv);
        bool sur = cp >= 0xD800 && cp <= 0xDFFF;
        bool bad = (sur && !(eh == E_SURROGATEPASS && kind != 1 && kind != 2)) ||
                   (kind == 1 && cp >= 128) || (kind == 2 && cp >= 256);
        if (bad) {
            switch (eh) {
            case E_IGNORE:
                break;
            case E_REPLACE:
                if (kind >= 3)
                    put_unit(&b, '?', width, be);
                else
                    strbuf_putc(&b, '?');
                break;
            case E_XML:
                if (!sur) {
                    char tmp[24];
                    int n = snprintf(tmp, sizeof tmp, "&#%d;", cp);
                    for (int k = 0; k < n; k++) {
                        if (kind >= 3)
                            put_unit(&b, (unsigned char)tmp[k], width, be);
                        else
                            strbuf_putc(&b, tmp[k]);
                    }
                    break;
                }
                /* fallthrough */
            case E_BACKSLASH: {
                char tmp[16];
                int n = cp < 0x100     ? snprintf(tmp, sizeof tmp, "\\x%02x", cp)
                        : cp < 0x10000 ? snprintf(tmp, sizeof tmp, "\\u%04x", cp)
                                       : snprintf(tmp, sizeof tmp, "\\U%08x", cp);
                for (int k = 0; k < n; k++) {
                    if (kind >= 3)
                        put_unit(&b, (unsigned char)tmp[k], width, be);
                    else
                        strbuf_putc(&b, tmp[k]);
                }
                break;
            }
            case E_OTHER:
                strbuf_free(&b);
                return v_raise(c, "LookupError", "unknown error handler name '%.50s'", ev);
            default:
                strbuf_free(&b);
                return v_raise(c, "UnicodeEncodeError", "'%s' codec can't encode character", en);
            }
        } else if (kind == 0 || kind == 1) {
            strbuf_put(&b, s->u.s.s + i, adv);
        } else if (kind == 2) {
            strbuf_putc(&b, (char)cp);
        } else if (kind == 3) {
            if (cp >= 0x10000) {
                uint32_t x = (uint32_t)cp - 0x10000;
                put_unit(&b, 0xD800 + (x >> 10), 2, be);
                put_unit(&b, 0xDC00 + (x & 0x3FF), 2, be);
            } else
                put_unit(&b, (uint32_t)cp, 2, be);
        } else {
            put_unit(&b, (uint32_t)cp, 4, be);
        }
        i += adv;
        if (b.len > c->lim.max_str_bytes) {
            strbuf_free(&b);
            return v_limit(c, "memory");
        }
    }
    val *v = v_bytes(c, b.data ? b.data : "", b.len);
    strbuf_free(&b);
    return v;
}

/* ljust (which 0), rjust (1) and center (2): s padded with the fill
 * character to the width, s itself when it is as wide already (also any
 * negative width). center's odd column goes left when both the margin and
 * the width are odd, as CPython's unicode_center has it. */
static val *m_justify(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                      size_t nkw, int which)
{
    int64_t w;
    int32_t f;
    const char *fp;
    size_t fl;
    if (get_width_fill(c, name, a, na, kw, nkw, &w, &f, &fp, &fl, true)) return NULL;
    if (w <= (int64_t)s->u.s.clen) return s;
    int64_t marg = w - (int64_t)s->u.s.clen;
    int64_t left = which == 0 ? 0 : which == 1 ? marg : marg / 2 + (marg & w & 1);
    return pad(c, s, left, marg - left, fp, fl);
}

val *vs_method(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw, size_t nkw,
               bool *found)
{
    *found = true;
    switch (name[0]) {
    case 'c':
        if (!strcmp(name, "count")) return m_count_find(c, s, name, a, na, kw, nkw, 0);
        if (!strcmp(name, "capitalize")) return m_case(c, s, name, a, na, kw, nkw, 5);
        if (!strcmp(name, "casefold")) return m_case(c, s, name, a, na, kw, nkw, 2);
        if (!strcmp(name, "center")) return m_justify(c, s, name, a, na, kw, nkw, 2);
        break;
    case 'e':
        if (!strcmp(name, "endswith")) return m_startsends(c, s, name, a, na, kw, nkw, true);
        if (!strcmp(name, "encode")) {
            static const char *const names[] = {"encoding", "errors"};
            val *p[2];
            if (v_parse_args(c, name, a, na, kw, nkw, names, 2, 0, 0, p)) return NULL;
            return vs_encode(c, s, p[0], p[1]);
        }
        break;
    case 'f':
        if (!strcmp(name, "find")) return m_count_find(c, s, name, a, na, kw, nkw, 1);
        break;
    case 'i':
        if (!strcmp(name, "index")) return m_count_find(c, s, name, a, na, kw, nkw, 3);
        if (!strcmp(name, "isdigit")) return m_is(c, s, name, a, na, kw, nkw, 0);
        if (!strcmp(name, "isalpha")) return m_is(c, s, name, a, na, kw, nkw, 1);
        if (!strcmp(name, "isalnum")) return m_is(c, s, name, a, na, kw, nkw, 2);
        if (!strcmp(name, "isspace")) return m_is(c, s, name, a, na, kw, nkw, 3);
        if (!strcmp(name, "isnumeric")) return m_is(c, s, name, a, na, kw, nkw, 4);
        if (!strcmp(name, "isdecimal")) return m_is(c, s, name, a, na, kw, nkw, 5);
        if (!strcmp(name, "islower")) return m_is(c, s, name, a, na, kw, nkw, 6);
        if (!strcmp(name, "isupper")) return m_is(c, s, name, a, na, kw, nkw, 7);
        if (!strcmp(name, "istitle")) return m_is(c, s, name, a, na, kw, nkw, 8);
        break;
    case 'j':
        if (!strcmp(name, "join")) return m_join(c, s, a, na, kw, nkw);
        break;
    case 'l':
        if (!strcmp(name, "lower")) return m_case(c, s, name, a, na, kw, nkw, 1);
        if (!strcmp(name, "lstrip")) return m_strip(c, s, name, a, na, kw, nkw, 1);
        if (!strcmp(name, "ljust")) return m_justify(c, s, name, a, na, kw, nkw, 0);
        break;
    case 'p':
        if (!strcmp(name, "partition")) return m_partition(c, s, name, a, na, kw, nkw, false);
        break;
    case 'r':
        if (!strcmp(name, "rstrip")) return m_strip(c, s, name, a, na, kw, nkw, 2);
        if (!strcmp(name, "rsplit")) return m_split(c, s, name, a, na, kw, nkw, true);
        if (!strcmp(name, "replace")) return m_replace(c, s, a, na, kw, nkw);
        if (!strcmp(name, "rfind")) return m_count_find(c, s, name, a, na, kw, nkw, 2);
        if (!strcmp(name, "rpartition")) return m_partition(c, s, name, a, na, kw, nkw, true);
        if (!strcmp(name, "rjust")) return m_justify(c, s, name, a, na, kw, nkw, 1);
        if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
            static const char *const names[] = {"prefix"};
            val *p[1];
            if (v_parse_args(c, name, a, na, kw, nkw, names, 1, 1, 1, p)) return NULL;
            if (v_type(p[0]) != VT_STR)
                return v_raise(c, "TypeError", "%s() argument must be str, not %s", name,
                               v_type_name(p[0]));
            val *x = p[0];
            if (x->u.s.blen > s->u.s.blen || x->u.s.blen == 0) return s;
            if (name[6] == 'p') {
                if (memcmp(s->u.s.s, x->u.s.s, x->u.s.blen)) return s;
                return vs_substr(c, s, x->u.s.clen, s->u.s.clen);
            }
            if (memcmp(s->u.s.s + s->u.s.blen - x->u.s.blen, x->u.s.s, x->u.s.blen)) return s;
            return vs_substr(c, s, 0, s->u.s.clen - x->u.s.clen);
        }
        break;
    case 's':
        if (!strcmp(name, "split")) return m_split(c, s, name, a, na, kw, nkw, false);
        if (!strcmp(name, "strip")) return m_strip(c, s, name, a, na, kw, nkw, 3);
        if (!strcmp(name, "startswith")) return m_startsends(c, s, name, a, na, kw, nkw, false);
        if (!strcmp(name, "splitlines")) return m_splitlines(c, s, a, na, kw, nkw);
        if (!strcmp(name, "swapcase")) return m_case(c, s, name, a, na, kw, nkw, 3);
        break;
    case 't':
        if (!strcmp(name, "title")) return m_case(c, s, name, a, na, kw, nkw, 4);
        break;
    case 'u':
        if (!strcmp(name, "upper")) return m_case(c, s, name, a, na, kw, nkw, 0);
        break;
    case 'z':
        if (!strcmp(name, "zfill")) {
            int64_t w;
            int32_t f;
            const char *fp;
            size_t fl;
            if (get_width_fill(c, name, a, na, kw, nkw, &w, &f, &fp, &fl, false)) return NULL;
            if (w <= (int64_t)s->u.s.clen) return s;
            int64_t fillc = w - (int64_t)s->u.s.clen;
            val *r = pad(c, s, fillc, 0, "0", 1);
            if (!r) return NULL;
            if (s->u.s.blen && (s->u.s.s[0] == '+' || s->u.s.s[0] == '-')) {
                char *p = (char *)r->u.s.s;
                p[0] = s->u.s.s[0];
                p[fillc] = '0';
            }
            return r;
        }
        break;
    }
    *found = false;
    return NULL;
}
