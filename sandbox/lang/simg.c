/* sandbox/lang/simg: session images (simg.h). simg_build_text flattens a
 * transcript's JSON text into one position-independent buffer with a
 * one-pass parser (no intermediate tree), validating its shape as the
 * reference's SessionTranscript.from_wire does; simg_validate checks an image
 * that crossed a process boundary. Layout: simg_layout.h. */
#include "sandbox/lang/simg.h"
#include "sandbox/lang/utf8.h"

#include "sandbox/lang/simg_layout.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- growable image buffer ---------------------------------------------- */

/* Strings up to this many bytes are stored once per image: object keys and
 * event types; other values (enough for enums, not for unique ids and
 * timestamps). Keys are interned exactly (duplicate-key detection compares
 * them by offset); values through a lossy direct-mapped cache of
 * SIMG_VCACHE entries, so a transcript's many unique short values (event
 * ids, file names) do not grow a table whose first probe then misses the
 * cache: the repeated ones (enums, event types) still hit. */
#define SIMG_INTERN_KEY 32 /* SIMG_INTERN_VALUE: simg_layout.h */
#define SIMG_VCACHE 4096

/* a value cache entry: the string and a copy of its bytes, so a lookup
 * never reads the image (a miss would otherwise compare against a cold
 * earlier value of the same length) */
typedef struct {
    simg_str s;
    char bytes[SIMG_INTERN_VALUE];
} vslot;

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
    /* short strings (keys, event types, enums) are stored once: every
     * payload's keys and every event's type then share a few hot cache
     * lines when read */
    simg_str *itab;
    size_t imask, icount;
    vslot *vcache; /* SIMG_VCACHE entries, or NULL until a value is stored */
} ibuf;

/* Reserves n bytes at the next multiple of `align` (a power of two: 8 for
 * nodes, 1 for string bytes) and returns their offset; 0 with b->oom set
 * when the image cannot grow. */
static size_t ib_reserve_at(ibuf *b, size_t n, size_t align)
{
    size_t at = (b->len + align - 1) & ~(align - 1);
    if (at + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < at + n)
            nc *= 2;
        if (nc > 0xFFFFFFF0u) {
            b->oom = true;
            return 0;
        }
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return 0;
        }
        b->p = np;
        b->cap = nc;
    }
    memset(b->p + b->len, 0, at - b->len); /* alignment padding only: callers fill the rest */
    b->len = at + n;
    return at;
}

static size_t ib_reserve(ibuf *b, size_t n)
{
    return ib_reserve_at(b, n, 8);
}

/* The interning table's and duplicate-key detection's hash: eight bytes a
 * step (keys and interned values are short), never reading past s[n). */
static uint64_t str_hash(const char *s, size_t n)
{
    const uint64_t m = 0xff51afd7ed558ccdull;
    const char *end = s + n;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, t = 0;
    if (n >= 8) {
        for (; end - s > 8; s += 8) {
            uint64_t w;
            memcpy(&w, s, 8);
            h = (h ^ w) * m;
            h ^= h >> 32;
        }
        memcpy(&t, end - 8, 8); /* the last eight, overlapping the words before */
    } else if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, s, 4);
        memcpy(&hi, end - 4, 4);
        t = lo | (uint64_t)hi << 32;
    } else if (n > 0) {
        t = (uint64_t)(unsigned char)s[0] | (uint64_t)(unsigned char)s[n / 2] << 8 |
            (uint64_t)(unsigned char)s[n - 1] << 16;
    }
    h = (h ^ t) * m;
    h ^= h >> 29;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

/* a[0..n) == b[0..n) for the short strings the interning table holds:
 * overlapping word loads instead of a call (both sides have at least n
 * readable bytes). */
static inline bool short_eq(const char *a, const char *b, size_t n)
{
    uint64_t x, y, u, v;
    if (n >= 8) {
        for (; n > 8; a += 8, b += 8, n -= 8) {
            memcpy(&x, a, 8);
            memcpy(&y, b, 8);
            if (x != y) return false;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t p, q, r, t;
        memcpy(&p, a, 4);
        memcpy(&q, b, 4);
        memcpy(&r, a + n - 4, 4);
        memcpy(&t, b + n - 4, 4);
        return p == q && r == t;
    }
    u = n ? (uint64_t)(unsigned char)a[0] | (uint64_t)(unsigned char)a[n / 2] << 8 |
                (uint64_t)(unsigned char)a[n - 1] << 16
          : 0;
    v = n ? (uint64_t)(unsigned char)b[0] | (uint64_t)(unsigned char)b[n / 2] << 8 |
                (uint64_t)(unsigned char)b[n - 1] << 16
          : 0;
    return u == v;
}

/* Stores s[0..n) (clen code points; ascii) in the image, once only when it
 * is at most `limit` bytes (then later copies share the first; for
 * SIMG_INTERN_VALUE, only while it stays in the value cache); fills out. */
static int ib_put_str(ibuf *b, const char *s, size_t n, uint32_t clen, bool ascii, simg_str *out,
                      size_t limit)
{
    simg_str *slot = NULL;
    vslot *vs = NULL;
    if (n <= limit && limit == SIMG_INTERN_VALUE) {
        if (b->vcache == NULL && (b->vcache = calloc(SIMG_VCACHE, sizeof *b->vcache)) == NULL) {
            b->oom = true;
            return -1;
        }
        vs = &b->vcache[str_hash(s, n) & (SIMG_VCACHE - 1)];
        if (vs->s.off && vs->s.blen == n && short_eq(vs->bytes, s, n)) {
            *out = vs->s;
            return 0;
        }
    } else if (n <= limit) {
        if (b->itab == NULL || (b->icount + 1) * 2 > b->imask + 1) {
            size_t size = b->itab ? (b->imask + 1) * 2 : 1024;
            simg_str *nt = calloc(size, sizeof *nt);
            if (!nt) {
                b->oom = true;
                return -1;
            }
            for (size_t i = 0; b->itab && i <= b->imask; i++) {
                simg_str *e = &b->itab[i];
                if (!e->off) continue;
                size_t h = (size_t)str_hash(b->p + e->off, e->blen) & (size - 1);
                while (nt[h].off)
                    h = (h + 1) & (size - 1);
                nt[h] = *e;
            }
            free(b->itab);
            b->itab = nt;
            b->imask = size - 1;
        }
        size_t h = (size_t)str_hash(s, n) & b->imask;
        while (b->itab[h].off) {
            simg_str *e = &b->itab[h];
            if (e->blen == n && short_eq(b->p + e->off, s, n)) {
                *out = *e;
                return 0;
            }
            h = (h + 1) & b->imask;
        }
        slot = &b->itab[h];
    }
    size_t at = ib_reserve_at(b, n + 1, 1); /* bytes: no padding */
    if (b->oom) return -1;
    memcpy(b->p + at, s, n);
    b->p[at + n] = 0;
    out->off = (uint32_t)at;
    out->blen = (uint32_t)n;
    out->clen = clen;
    out->ascii = ascii;
    if (slot) {
        *slot = *out;
        b->icount++;
    } else if (vs) {
        vs->s = *out;
        memcpy(vs->bytes, s, n);
    }
    return 0;
}

/* Stores a string given as bytes, counting its code points (see ib_put_str). */
static simg_str ib_str(ibuf *b, const char *s, size_t n, size_t limit)
{
    simg_str r = {0, 0, 0, 1};
    uint32_t cl = 0;
    bool ascii = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x80) ascii = false;
        if ((ch & 0xC0) != 0x80) cl++;
    }
    if (ib_put_str(b, s, n, cl, ascii, &r, limit)) return (simg_str){0, 0, 0, 1};
    return r;
}

#define NODE(b, off) ((simg_node *)((b)->p + (off)))

/* The transcript's top-level string fields, in simg_hdr.fields order. */
static const char *const g_field_names[SF__COUNT] = {
    "assignment_id", "session_id", "session_revision_id", "agent_id", "environment",
    "started_at",    "ended_at",   "schema_version"};

/* ---- errors (simg.h) ------------------------------------------------------------ */

/* Fills e for a failure of kind `code` and returns code. */
__attribute__((format(printf, 3, 4))) static int fail(fps_err *e, int code, const char *fmt, ...)
{
    const char *name = code == SIMG_ETOO_LARGE ? "too_large"
                       : code == SIMG_ECORRUPT ? "invalid_image"
                                               : "invalid_transcript";
    va_list ap;
    va_start(ap, fmt);
    fps_err_vset(e, code, 0, name, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- from JSON text (one pass, no tree) ----------------------------------- */

typedef struct {
    const char *s, *end;
    ibuf *b;
    char *tmp; /* scratch for unescaped strings */
    size_t tmpcap;
    const char *err;
    bool strict; /* SIMG_STRICT: duplicate keys and NaN/Infinity are errors */
    /* the children of the containers being parsed, innermost last: a
     * container's nodes are copied from here into one block when it closes */
    simg_node *stk;
    size_t stkn, stkcap;
} jp;

/* Appends a child node to the scratch stack. */
static int push_node(jp *p, const simg_node *n)
{
    if (p->stkn == p->stkcap) {
        size_t nc = p->stkcap ? p->stkcap * 2 : 256;
        simg_node *ns = realloc(p->stk, nc * sizeof *ns);
        if (!ns) {
            p->b->oom = true;
            return -1;
        }
        p->stk = ns;
        p->stkcap = nc;
    }
    p->stk[p->stkn++] = *n;
    return 0;
}

static void skip_ws(jp *p)
{
    while (p->s < p->end && (unsigned char)*p->s <= ' ' &&
           (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t'))
        p->s++;
}

static int hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if ((c | 32) >= 'a' && (c | 32) <= 'f')
            v |= (uint32_t)((c | 32) - 'a' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* validates UTF-8 of [s, e); returns code point count or -1 */
static long utf8_check(const unsigned char *s, const unsigned char *e, bool *ascii)
{
    long n = 0;
    *ascii = true;
    while (s < e) {
        if (e - s >= 8) { /* a run of ASCII, eight bytes a step */
            uint64_t w;
            memcpy(&w, s, 8);
            uint64_t high = w & 0x8080808080808080ull;
            if (!high) {
                s += 8;
                n += 8;
                continue;
            }
            int at = __builtin_ctzll(high) / 8; /* the ASCII bytes before the first other one */
            s += at;
            n += at;
        }
        unsigned char c = *s;
        if (c < 0x80) {
            s++;
            n++;
            continue;
        }
        *ascii = false;
        int need;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF)
            need = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            need = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            need = 3, cp = c & 0x07;
        else
            return -1;
        if (e - s <= need) return -1;
        for (int i = 1; i <= need; i++) {
            if ((s[i] & 0xC0) != 0x80) return -1;
            cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return -1;
        s += need + 1;
        n++;
    }
    return n;
}

/* The bytes at q[0..8) that end a string's plain run (a control character,
 * '"' or '\\') as their high bits, exact up to the first one (the SWAR
 * tests can only add bits above a byte that matches); *w gets the bytes. */
static inline uint64_t specials8(const char *q, uint64_t *w)
{
    const uint64_t ones = 0x0101010101010101ull;
    memcpy(w, q, 8);
    uint64_t quote = *w ^ (ones * '"'), bslash = *w ^ (ones * '\\');
    return (((*w - ones * 0x20) & ~*w) | ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash)) &
           0x8080808080808080ull;
}

/* parses a JSON string at p->s (after the quote) into the image */
/* limit: strings up to this many bytes are interned (SIMG_INTERN_KEY or
 * SIMG_INTERN_VALUE) */
static int parse_string(jp *p, simg_str *out, size_t limit)
{
    const char *st = p->s;
    const char *q = st;
    /* fast scan to the first '"', '\\' or control character, eight bytes at
     * a time while eight remain; `words` gathers the bytes passed (their
     * high bits: is it all ASCII) */
    uint64_t words = 0;
    while (p->end - q >= 8) {
        uint64_t w, sp = specials8(q, &w);
        if (sp == 0) {
            words |= w;
            q += 8;
            continue;
        }
        int at = __builtin_ctzll(sp) / 8; /* bytes before the first special one */
        if (at) words |= w & (~0ull >> (64 - 8 * at));
        q += at;
        break;
    }
    unsigned char high = (words & 0x8080808080808080ull) ? 0x80 : 0;
    while (q < p->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        high |= (unsigned char)*q++;
    if (q < p->end && *q == '"') {
        bool ascii = true;
        long n = (long)(q - st);
        if (high & 0x80)
            n = utf8_check((const unsigned char *)st, (const unsigned char *)q, &ascii);
        if (n < 0) {
            p->err = "invalid UTF-8 in a string";
            return -1;
        }
        if (ib_put_str(p->b, st, (size_t)(q - st), (uint32_t)n, ascii, out, limit)) return -1;
        p->s = q + 1;
        return 0;
    }
    /* slow path with escapes: unescape into tmp (output never longer than input) */
    size_t need = (size_t)(p->end - st) + 4;
    const char *r = st;
    size_t o = 0;
    for (;;) {
        if (r >= p->end) {
            p->err = "unterminated string";
            return -1;
        }
        if (o + 8 > p->tmpcap) {
            size_t nc = p->tmpcap ? p->tmpcap * 2 : 256;
            while (nc < o + 8)
                nc *= 2;
            if (nc > need) nc = need > o + 8 ? need : o + 8;
            char *nt = realloc(p->tmp, nc);
            if (!nt) {
                p->b->oom = true;
                return -1;
            }
            p->tmp = nt;
            p->tmpcap = nc;
        }
        char c = *r;
        if (c == '"') {
            r++;
            break;
        }
        if ((unsigned char)c < 0x20) {
            p->err = "control character in a string";
            return -1;
        }
        if (c != '\\') {
            p->tmp[o++] = c;
            r++;
            continue;
        }
        r++;
        if (r >= p->end) {
            p->err = "unterminated string";
            return -1;
        }
        char e = *r++;
        switch (e) {
        case '"':
            p->tmp[o++] = '"';
            break;
        case '\\':
            p->tmp[o++] = '\\';
            break;
        case '/':
            p->tmp[o++] = '/';
            break;
        case 'b':
            p->tmp[o++] = '\b';
            break;
        case 'f':
            p->tmp[o++] = '\f';
            break;
        case 'n':
            p->tmp[o++] = '\n';
            break;
        case 'r':
            p->tmp[o++] = '\r';
            break;
        case 't':
            p->tmp[o++] = '\t';
            break;
        case 'u': {
            uint32_t cp;
            if (p->end - r < 4 || hex4(r, &cp)) {
                p->err = "invalid \\u escape";
                return -1;
            }
            r += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p->end - r >= 6 && r[0] == '\\' && r[1] == 'u') {
                uint32_t lo;
                if (!hex4(r + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    r += 6;
                }
            }
            /* a lone surrogate is kept as its 3-byte form, as Python keeps it in a str */
            o += (size_t)utf8_encode(cp, p->tmp + o);
            break;
        }
        default:
            p->err = "invalid escape";
            return -1;
        }
    }
    bool ascii = true;
    uint32_t n = 0;
    for (size_t i = 0; i < o; i++) {
        unsigned char ch = (unsigned char)p->tmp[i];
        if (ch >= 0x80) ascii = false;
        if ((ch & 0xC0) != 0x80) n++;
    }
    if (ib_put_str(p->b, p->tmp, o, n, ascii, out, limit)) return -1;
    /* p->tmp stays owned by p (freed by simg_build_text); the analyzer loses
     * track of it when it is passed on as a const pointer */
    p->s = r; // NOLINT(clang-analyzer-unix.Malloc)
    return 0;
}

static int parse_value(jp *p, int depth);

static int parse_number(jp *p, simg_node *n)
{
    const char *st = p->s, *q = p->s;
    if (q < p->end && *q == '-') q++;
    if (q >= p->end || !(*q >= '0' && *q <= '9')) {
        p->err = "invalid number";
        return -1;
    }
    if (*q == '0')
        q++;
    else
        while (q < p->end && *q >= '0' && *q <= '9')
            q++;
    bool real = false;
    if (q < p->end && *q == '.') {
        real = true;
        q++;
        if (q >= p->end || !(*q >= '0' && *q <= '9')) {
            p->err = "invalid number";
            return -1;
        }
        while (q < p->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < p->end && (*q == 'e' || *q == 'E')) {
        real = true;
        q++;
        if (q < p->end && (*q == '+' || *q == '-')) q++;
        if (q >= p->end || !(*q >= '0' && *q <= '9')) {
            p->err = "invalid number";
            return -1;
        }
        while (q < p->end && *q >= '0' && *q <= '9')
            q++;
    }
    size_t len = (size_t)(q - st);
    p->s = q;
    if (real) {
        char buf[64];
        char *heap = NULL;
        char *tb = buf;
        if (len >= sizeof buf) {
            heap = malloc(len + 1);
            if (!heap) return -1;
            tb = heap;
        }
        memcpy(tb, st, len);
        tb[len] = 0;
        double d = strtod(tb, NULL);
        free(heap);
        n->tag = SN_FLOAT;
        memcpy(&n->b, &d, 8);
        return 0;
    }
    /* integer: int64 fast path, else decimal text */
    const char *d = st;
    bool neg = *d == '-';
    if (neg) d++;
    size_t nd = (size_t)(q - d);
    if (nd <= 18) {
        int64_t v = 0;
        for (const char *k = d; k < q; k++)
            v = v * 10 + (*k - '0');
        n->tag = SN_INT;
        n->b = (uint64_t)(neg ? -v : v);
        return 0;
    }
    simg_str s;
    size_t at = ib_reserve_at(p->b, len + 1, 1);
    if (p->b->oom) return -1;
    memcpy(p->b->p + at, st, len);
    s.off = (uint32_t)at;
    n->tag = SN_BIGINT;
    n->a = (uint32_t)len;
    n->b = s.off;
    return 0;
}

/* children are collected in a scratch stack then copied as one block */
typedef struct {
    simg_node *v;
    size_t n, cap;
} nstack;

/* Duplicate keys in one object: Python's dict keeps the first position and
 * the last value. kids holds key/value node pairs; compacts in place. */
static bool same_key(const ibuf *b, const simg_node *x, const simg_node *y)
{
    if (x->a != y->a) return false;
    /* keys this short are interned: equal ones share their bytes */
    if (x->a <= SIMG_INTERN_KEY) return (uint32_t)x->b == (uint32_t)y->b;
    return !memcmp(b->p + (uint32_t)x->b, b->p + (uint32_t)y->b, x->a);
}

static int dedup_keys(jp *p, simg_node *kids, size_t *cnt)
{
    ibuf *b = p->b;
    size_t pairs = *cnt / 2, size = 8;
    if (pairs <= 16) { /* the common object: compare each key with the kept ones */
        size_t w = 0;
        for (size_t i = 0; i < pairs; i++) {
            size_t j = 0;
            while (j < w && !same_key(b, &kids[2 * j], &kids[2 * i]))
                j++;
            if (j < w) {
                if (p->strict) {
                    p->err = "duplicate object key";
                    return -1;
                }
                kids[2 * j + 1] = kids[2 * i + 1];
                continue;
            }
            kids[2 * w] = kids[2 * i];
            kids[2 * w + 1] = kids[2 * i + 1];
            w++;
        }
        *cnt = 2 * w;
        return 0;
    }
    while (size < pairs * 2)
        size <<= 1;
    int32_t *tab = malloc(size * sizeof *tab);
    if (!tab) {
        b->oom = true;
        return -1;
    }
    memset(tab, 0xff, size * sizeof *tab);
    size_t w = 0;
    for (size_t i = 0; i < pairs; i++) {
        simg_node *k = &kids[2 * i];
        const char *ks = b->p + (uint32_t)k->b;
        size_t h = (size_t)str_hash(ks, k->a) & (size - 1);
        int32_t found = -1;
        while (tab[h] >= 0) {
            simg_node *o = &kids[2 * (size_t)tab[h]];
            if (o->a == k->a && !memcmp(b->p + (uint32_t)o->b, ks, k->a)) {
                found = tab[h];
                break;
            }
            h = (h + 1) & (size - 1);
        }
        if (found >= 0 && p->strict) {
            free(tab);
            p->err = "duplicate object key";
            return -1;
        }
        if (found >= 0) {
            kids[2 * found + 1] = kids[2 * i + 1];
            continue;
        }
        kids[2 * w] = kids[2 * i];
        kids[2 * w + 1] = kids[2 * i + 1];
        tab[h] = (int32_t)w;
        w++;
    }
    free(tab);
    *cnt = 2 * w;
    return 0;
}

/* Parses one value and pushes its node on the scratch stack (built in
 * registers and stored once: returning it through memory and copying it
 * again made the copy wait for the store). */
static int parse_value(jp *p, int depth)
{
    if (depth > SIMG_MAX_DEPTH) {
        p->err = "nesting too deep";
        return -1;
    }
    skip_ws(p);
    if (p->s >= p->end) {
        p->err = "unexpected end of input";
        return -1;
    }
    simg_node n = {0};
    char c = *p->s;
    switch (c) {
    case '"': {
        p->s++;
        simg_str s;
        if (parse_string(p, &s, SIMG_INTERN_VALUE)) return -1;
        n.tag = SN_STR;
        n.flags = (uint8_t)s.ascii;
        n.a = s.blen;
        n.b = (uint64_t)s.off | ((uint64_t)s.clen << 32);
        break;
    }
    case '{':
    case '[': {
        bool obj = c == '{';
        p->s++;
        /* Each child is parsed into its own node (its subtree lands in the
         * image as it is parsed) and pushed on the scratch stack; when the
         * container closes its nodes are copied into one block: copying a
         * node is enough, its subtree stays where it is (offsets are
         * absolute). */
        size_t base = p->stkn;
        skip_ws(p);
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
            p->s++;
        } else {
            for (;;) {
                if (obj) {
                    skip_ws(p);
                    if (p->s >= p->end || *p->s != '"') {
                        p->err = "expected an object key";
                        return -1;
                    }
                    p->s++;
                    simg_str s;
                    if (parse_string(p, &s, SIMG_INTERN_KEY)) return -1;
                    simg_node k = {SN_STR, (uint8_t)s.ascii, 0, s.blen,
                                   (uint64_t)s.off | ((uint64_t)s.clen << 32)};
                    if (push_node(p, &k)) return -1;
                    skip_ws(p);
                    if (p->s >= p->end || *p->s != ':') {
                        p->err = "expected ':'";
                        return -1;
                    }
                    p->s++;
                }
                if (parse_value(p, depth + 1)) return -1;
                skip_ws(p);
                if (p->s < p->end && *p->s == ',') {
                    p->s++;
                    continue;
                }
                if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
                    p->s++;
                    break;
                }
                p->err = obj ? "expected ',' or '}'" : "expected ',' or ']'";
                return -1;
            }
        }
        simg_node *kids = p->stk + base;
        size_t cnt = p->stkn - base;
        p->stkn = base; /* popped: nothing is pushed again before the copy */
        if (obj && cnt > 2 && dedup_keys(p, kids, &cnt)) return -1;
        size_t blk = ib_reserve(p->b, cnt * sizeof(simg_node));
        if (p->b->oom) return -1;
        if (cnt) memcpy(p->b->p + blk, kids, cnt * sizeof(simg_node));
        n.tag = obj ? SN_OBJ : SN_ARR;
        n.a = (uint32_t)(obj ? cnt / 2 : cnt);
        n.b = blk;
        break;
    }
    case 't':
        if (p->end - p->s >= 4 && !memcmp(p->s, "true", 4)) {
            p->s += 4;
            n.tag = SN_TRUE;
            break;
        }
        p->err = "invalid literal";
        return -1;
    case 'f':
        if (p->end - p->s >= 5 && !memcmp(p->s, "false", 5)) {
            p->s += 5;
            n.tag = SN_FALSE;
            break;
        }
        p->err = "invalid literal";
        return -1;
    case 'n':
        if (p->end - p->s >= 4 && !memcmp(p->s, "null", 4)) {
            p->s += 4;
            n.tag = SN_NULL;
            break;
        }
        p->err = "invalid literal";
        return -1;
    case 'N':
    case 'I': {
        /* Python's json accepts NaN, Infinity, -Infinity (strict JSON does not) */
        double d;
        if (p->strict) {
            p->err = "NaN and Infinity are not JSON";
            return -1;
        }
        if (p->end - p->s >= 3 && !memcmp(p->s, "NaN", 3)) {
            p->s += 3;
            d = NAN;
        } else if (p->end - p->s >= 8 && !memcmp(p->s, "Infinity", 8)) {
            p->s += 8;
            d = INFINITY;
        } else {
            p->err = "invalid literal";
            return -1;
        }
        n.tag = SN_FLOAT;
        memcpy(&n.b, &d, 8);
        break;
    }
    default:
        if (c == '-' && !p->strict && p->end - p->s >= 9 && !memcmp(p->s, "-Infinity", 9)) {
            p->s += 9;
            double d = -INFINITY;
            n.tag = SN_FLOAT;
            memcpy(&n.b, &d, 8);
            break;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            if (parse_number(p, &n)) return -1;
            break;
        }
        p->err = "unexpected character";
        return -1;
    }
    return push_node(p, &n);
}

static const simg_node *obj_get(const ibuf *b, const simg_node *o, const char *key)
{
    size_t kl = strlen(key);
    const simg_node *kids = (const simg_node *)(b->p + o->b);
    for (uint32_t i = 0; i < o->a; i++) {
        const simg_node *k = &kids[2 * (size_t)i];
        if (k->a == kl && !memcmp(b->p + (uint32_t)k->b, key, kl)) return &kids[2 * i + 1];
    }
    return NULL;
}

/* An event's id, ts, event_type and payload values (NULL when absent), in
 * one pass over its keys (they are unique by now). */
static void event_fields(const ibuf *b, const simg_node *ev, const simg_node *f[4])
{
    static const char *const names[4] = {"id", "ts", "event_type", "payload"};
    static const uint32_t lens[4] = {2, 2, 10, 7};
    f[0] = f[1] = f[2] = f[3] = NULL;
    const simg_node *kids = (const simg_node *)(b->p + ev->b);
    for (uint32_t i = 0; i < ev->a; i++) {
        const simg_node *k = &kids[2 * (size_t)i];
        for (int j = 0; j < 4; j++)
            if (k->a == lens[j] && !memcmp(b->p + (uint32_t)k->b, names[j], lens[j])) {
                f[j] = &kids[2 * (size_t)i + 1];
                break;
            }
    }
}

static simg_str node_str(const simg_node *n)
{
    simg_str s = {(uint32_t)n->b, n->a, (uint32_t)(n->b >> 32), n->flags};
    return s;
}

/* A large image buffer is written front to back once: transparent huge
 * pages (where the system allows them on request) take one page fault per
 * 2 MiB instead of one per 4 KiB, which is most of a cold ingest's system
 * time. Only whole 2 MiB ranges inside the block are advised; a hint, so
 * its failure is ignored. */
static void hugepage_hint(void *p, size_t len)
{
    const uintptr_t huge = (uintptr_t)2 << 20, at = (uintptr_t)p;
    uintptr_t lo = (at + huge - 1) & ~(huge - 1), hi = (at + len) & ~(huge - 1);
    if (hi > lo) (void)madvise((char *)p + (lo - at), (size_t)(hi - lo), MADV_HUGEPAGE);
}

int simg_build_text(const char *json, size_t len, const char *assignment_id, unsigned flags,
                    void **out, size_t *out_len, fps_err *err)
{
    int rc = 0;
    ibuf b = {0};
    /* worst case the image is a few times the text; start near it */
    b.cap = 2 * len + 4096;
    b.p = malloc(b.cap);
    if (!b.p) return fail(err, SIMG_ETOO_LARGE, "out of memory");
    hugepage_hint(b.p, b.cap);
    ib_reserve(&b, sizeof(simg_hdr));
    jp p = {json, json + len, &b, NULL, 0, NULL, (flags & SIMG_STRICT) != 0, NULL, 0, 0};
    if (parse_value(&p, 0)) {
        if (b.oom)
            rc = fail(err, SIMG_ETOO_LARGE, "transcript too large for a session image");
        else
            rc = fail(err, SIMG_EINVALID, "invalid JSON: %s at byte %zu", p.err ? p.err : "error",
                      (size_t)(p.s - json));
        goto fail;
    }
    skip_ws(&p);
    if (p.s != p.end) {
        rc = fail(err, SIMG_EINVALID, "invalid JSON: extra data at byte %zu", (size_t)(p.s - json));
        goto fail;
    }
    size_t root = ib_reserve(&b, sizeof(simg_node));
    if (b.oom) goto oom;
    *NODE(&b, root) = p.stk[0]; /* the root's node: all the stack holds */
    const simg_node *t = NODE(&b, root);
    if (t->tag != SN_OBJ) {
        rc = fail(err, SIMG_EINVALID, "transcript must be an object");
        goto fail;
    }
    const simg_node *sv = obj_get(&b, t, "schema_version");
    if (!sv || sv->tag != SN_STR) {
        rc = fail(err, SIMG_EINVALID, "schema_version must be a string");
        goto fail;
    }
    if (sv->a != 1 || b.p[(uint32_t)sv->b] != '2') {
        rc = fail(err, SIMG_EINVALID, "unsupported transcript schema version '%.64s'",
                  b.p + (uint32_t)sv->b);
        goto fail;
    }
    const simg_node *evs = obj_get(&b, t, "events");
    if (!evs || evs->tag != SN_ARR) {
        rc = fail(err, SIMG_EINVALID, "events must be an array");
        goto fail;
    }
    size_t ne = evs->a;
    size_t evs_at = (size_t)((const char *)evs - b.p);
    /* the event records: filled as the events are checked (reserving may
     * move the buffer: the nodes are found again from their offsets) */
    size_t evoff = ib_reserve(&b, ne * sizeof(simg_event));
    if (b.oom) goto oom;
    evs = (const simg_node *)(b.p + evs_at);
    t = NODE(&b, root);
    const simg_node *ev = (const simg_node *)(b.p + evs->b);
    for (size_t i = 0; i < ne; i++) {
        if (ev[i].tag != SN_OBJ) {
            rc = fail(err, SIMG_EINVALID, "events[%zu] must be an object", i);
            goto fail;
        }
        /* each event's key/value block was written long before and lies
         * away from the event nodes: ask for one a few events ahead */
        if (i + 8 < ne && ev[i + 8].tag == SN_OBJ) __builtin_prefetch(b.p + ev[i + 8].b);
        const simg_node *f[4];
        event_fields(&b, &ev[i], f);
        if (!f[3] || f[3]->tag != SN_OBJ) {
            rc = fail(err, SIMG_EINVALID, "payload must be an object");
            goto fail;
        }
        static const char *const ef[] = {"id", "ts", "event_type"};
        for (int k = 0; k < 3; k++) {
            if (!f[k] || f[k]->tag != SN_STR) {
                rc = fail(err, SIMG_EINVALID, "%s must be a string", ef[k]);
                goto fail;
            }
        }
        simg_event e = {node_str(f[0]), node_str(f[1]), node_str(f[2]), *f[3]};
        memcpy(b.p + evoff + i * sizeof(simg_event), &e, sizeof e);
    }
    const simg_node *ec = obj_get(&b, t, "event_count");
    if (!ec || (ec->tag != SN_INT && ec->tag != SN_BIGINT)) {
        rc = fail(err, SIMG_EINVALID, "event_count must be an integer");
        goto fail;
    }
    if (ec->tag == SN_BIGINT || (int64_t)ec->b < 0) {
        if (ec->tag == SN_BIGINT && b.p[(uint32_t)ec->b] != '-')
            rc =
                fail(err, SIMG_EINVALID, "event_count is %.40s, but transcript contains %zu events",
                     b.p + (uint32_t)ec->b, ne);
        else
            rc = fail(err, SIMG_EINVALID, "event_count must not be negative");
        goto fail;
    }
    if ((uint64_t)ec->b != ne) {
        rc = fail(err, SIMG_EINVALID, "event_count is %lld, but transcript contains %zu events",
                  (long long)ec->b, ne);
        goto fail;
    }
    simg_str fields[SF__COUNT];
    for (int k = 0; k < SF__COUNT; k++) {
        const simg_node *f = obj_get(&b, NODE(&b, root), g_field_names[k]);
        if (!f || f->tag != SN_STR) {
            rc = fail(err, SIMG_EINVALID, "%s must be a string", g_field_names[k]);
            goto fail;
        }
        fields[k] = node_str(f);
        if (k == SF_ASSIGNMENT_ID && assignment_id) { /* checked above, then overridden */
            fields[k] = ib_str(&b, assignment_id, strlen(assignment_id), 0);
            if (b.oom) goto oom;
        }
    }
    simg_hdr h = {0};
    memcpy(h.magic, SIMG_MAGIC, 8);
    h.version = SIMG_VERSION;
    h.total_len = (uint32_t)b.len;
    h.nevents = (uint32_t)ne;
    h.events_off = (uint32_t)evoff;
    h.event_count = (int64_t)ne;
    memcpy(h.fields, fields, sizeof fields);
    memcpy(b.p, &h, sizeof h);
    free(p.tmp);
    free(p.stk);
    free(b.itab);
    free(b.vcache);
    *out = b.p;
    *out_len = b.len;
    return 0;
oom:
    rc = fail(err, SIMG_ETOO_LARGE, "transcript too large for a session image");
fail:
    free(p.tmp);
    free(p.stk);
    free(b.itab);
    free(b.vcache);
    free(b.p);
    return rc;
}

const char *simg_session_id(const void *img)
{
    const simg_hdr *h = img;
    return (const char *)img + h->fields[SF_SESSION_ID].off;
}

const char *simg_session_revision_id(const void *img)
{
    const simg_hdr *h = img;
    return (const char *)img + h->fields[SF_SESSION_REVISION_ID].off;
}

/* ---- validation --------------------------------------------------------------- */

static bool str_ok(const simg_str *s, size_t len)
{
    return (size_t)s->off + s->blen < len && s->clen <= s->blen;
}

int simg_validate(const void *buf, size_t len, fps_err *err)
{
    const char *base = buf;
    if (!buf || len < sizeof(simg_hdr) || ((uintptr_t)buf & 7))
        return fail(err, SIMG_ECORRUPT, "session image too short or misaligned");
    const simg_hdr *h = buf;
    if (memcmp(h->magic, SIMG_MAGIC, 8) || h->version != SIMG_VERSION || h->total_len != len)
        return fail(err, SIMG_ECORRUPT, "session image header is invalid");
    for (int k = 0; k < SF__COUNT; k++)
        if (!str_ok(&h->fields[k], len)) goto bad;
    if ((h->events_off & 7) ||
        (size_t)h->events_off + (size_t)h->nevents * sizeof(simg_event) > len)
        goto bad;
    if (h->event_count != (int64_t)h->nevents) goto bad;
    for (uint32_t i = 0; i < h->nevents; i++) {
        const simg_event *e =
            (const simg_event *)(base + h->events_off + (size_t)i * sizeof(simg_event));
        if (!str_ok(&e->id, len) || !str_ok(&e->ts, len) || !str_ok(&e->type, len)) goto bad;
        /* payload nodes are bounds-checked when read (session.c): only the
         * top-level object here, so a child does not walk the whole image */
        size_t poff = (size_t)((const char *)&e->payload - base);
        if (e->payload.tag != SN_OBJ || (e->payload.b & 7) ||
            e->payload.b + 2 * (uint64_t)e->payload.a * sizeof(simg_node) > poff)
            goto bad;
    }
    return 0;
bad:
    return fail(err, SIMG_ECORRUPT, "session image is corrupt");
}
