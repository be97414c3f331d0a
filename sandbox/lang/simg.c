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
#include <unistd.h>

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

/* A string stored in the image, as the builder knows it: its offset (the
 * image's reference to it, simg_layout.h), where its bytes start, their
 * length and code point count. */
typedef struct {
    uint32_t off, data, blen, clen;
    bool ascii;
} bstr;

/* a value cache entry: the string and a copy of its bytes, so a lookup
 * never reads the image (a miss would otherwise compare against a cold
 * earlier value of the same length) */
typedef struct {
    bstr s;
    char bytes[SIMG_INTERN_VALUE];
} vslot;

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
    /* short strings (keys, event types, enums) are stored once: every
     * payload's keys and every event's type then share a few hot cache
     * lines when read */
    bstr *itab;
    size_t imask, icount;
    vslot *vcache; /* SIMG_VCACHE entries, or NULL until a value is stored */
} ibuf;

/* Reserves n bytes at the next multiple of `align` (a power of two: 8 for
 * nodes, 1 for strings) and returns their offset; 0 with b->oom set when
 * the image cannot grow (every offset must fit 32 bits). */
static size_t ib_reserve_at(ibuf *b, size_t n, size_t align)
{
    size_t at = (b->len + align - 1) & ~(align - 1);
    if (at + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < at + n)
            nc *= 2;
        if (nc > 0xFFFFFFF0u) nc = 0xFFFFFFF0u;
        if (at + n > nc) {
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
static int ib_put_str(ibuf *b, const char *s, size_t n, uint32_t clen, bool ascii, bstr *out,
                      size_t limit)
{
    bstr *slot = NULL;
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
            bstr *nt = calloc(size, sizeof *nt);
            if (!nt) {
                b->oom = true;
                return -1;
            }
            for (size_t i = 0; b->itab && i <= b->imask; i++) {
                bstr *e = &b->itab[i];
                if (!e->off) continue;
                size_t h = (size_t)str_hash(b->p + e->data, e->blen) & (size - 1);
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
            bstr *e = &b->itab[h];
            if (e->blen == n && short_eq(b->p + e->data, s, n)) {
                *out = *e;
                return 0;
            }
            h = (h + 1) & b->imask;
        }
        slot = &b->itab[h];
    }
    if (n > 0x7FFFFFFFu) {
        b->oom = true;
        return -1;
    }
    size_t hl = ascii ? 4 : 8;
    size_t at = ib_reserve_at(b, hl + n + 1, 1); /* strings: no padding */
    if (b->oom) return -1;
    uint32_t w = (uint32_t)n << 1 | (ascii ? 1u : 0u);
    memcpy(b->p + at, &w, 4);
    if (!ascii) memcpy(b->p + at + 4, &clen, 4);
    memcpy(b->p + at + hl, s, n);
    b->p[at + hl + n] = 0;
    out->off = (uint32_t)at;
    out->data = (uint32_t)(at + hl);
    out->blen = (uint32_t)n;
    out->clen = ascii ? (uint32_t)n : clen;
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
static bstr ib_str(ibuf *b, const char *s, size_t n, size_t limit)
{
    bstr r = {0};
    uint32_t cl = 0;
    bool ascii = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x80) ascii = false;
        if ((ch & 0xC0) != 0x80) cl++;
    }
    if (ib_put_str(b, s, n, cl, ascii, &r, limit)) return (bstr){0};
    return r;
}

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

/* A parsed child of a container being parsed: its node and, in an object,
 * its key (a stored string). */
typedef struct {
    simg_node v;
    uint32_t koff, kdata, klen;
} kid;

/* The first shape error of one "events" array of the root object (its
 * events are checked as they are parsed; the error is reported only if
 * that array is the transcript's events, after the checks before it). */
enum { EV_OK, EV_NOT_OBJECT, EV_PAYLOAD, EV_ID, EV_TS, EV_TYPE };
typedef struct {
    int kind;
    size_t index;
} ev_error;

typedef struct {
    const char *s, *end;
    ibuf *b;
    char *tmp; /* scratch for unescaped strings */
    size_t tmpcap;
    const char *err;
    bool strict; /* SIMG_STRICT: duplicate keys and NaN/Infinity are errors */
    /* the children of the containers being parsed, innermost last: a
     * container's nodes are copied from here into one block when it closes */
    kid *stk;
    size_t stkn, stkcap;
    /* the records of the root's "events" array being parsed (written to
     * the image, contiguous, when it closes), and its first shape error */
    simg_event *ev;
    size_t nev, evcap;
    ev_error everr;
    /* the first errors of the "events" arrays parsed (an EVENTS node whose
     * offset is 0 names one by its count field) */
    ev_error *everrs;
    size_t neverrs;
    /* SIMG_CONSUME: the text's pages before `released` are handed back
     * (0: the text is not the parser's to hand back) */
    uintptr_t released, page;
} jp;

/* Text handed back at a time under SIMG_CONSUME: a call per MiB parsed. */
#define RELEASE_STEP ((uintptr_t)1 << 20)

/* Under SIMG_CONSUME, hands the text's whole pages behind the parse point
 * back to the kernel once a step of them has been parsed: every string and
 * number before it has been copied into the image, and nothing reads the
 * text behind the parse point again (errors name byte offsets only). */
static void release_parsed(jp *p)
{
    uintptr_t upto = (uintptr_t)p->s & ~(p->page - 1);
    if (p->released == 0 || upto < p->released + RELEASE_STEP) return;
    /* page arithmetic on the caller's buffer, hence integers */
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    (void)madvise((void *)p->released, upto - p->released, MADV_DONTNEED);
    p->released = upto;
}

/* How a value is parsed: as any JSON value, as the root object, as the
 * root's "events" array, or as one of its elements. */
enum { R_ANY, R_ROOT, R_EVENTS, R_EVENT };

/* Appends a child to the scratch stack. */
static int push_kid(jp *p, simg_node v, const bstr *key)
{
    if (p->stkn == p->stkcap) {
        size_t nc = p->stkcap ? p->stkcap * 2 : 256;
        kid *ns = realloc(p->stk, nc * sizeof *ns);
        if (!ns) {
            p->b->oom = true;
            return -1;
        }
        p->stk = ns;
        p->stkcap = nc;
    }
    kid *k = &p->stk[p->stkn++];
    k->v = v;
    k->koff = key ? key->off : 0;
    k->kdata = key ? key->data : 0;
    k->klen = key ? key->blen : 0;
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
static int parse_string(jp *p, bstr *out, size_t limit)
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

static int parse_value(jp *p, int depth, int role, const bstr *key);
static int put_number(jp *p, unsigned tag, const void *bytes, simg_node *n);

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
        return put_number(p, SN_FLOAT, &d, n);
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
        v = neg ? -v : v;
        if (v >= SIMG_INT_MIN && v <= SIMG_INT_MAX) {
            *n = (simg_node)v << 4 | SN_INT;
            return 0;
        }
        return put_number(p, SN_INT64, &v, n);
    }
    /* beyond int64: its decimal text, as a string */
    bstr s = ib_str(p->b, st, len, 0);
    if (p->b->oom) return -1;
    *n = simg_mk(SN_BIGINT, 0, s.off);
    return 0;
}
/* Duplicate keys in one object: Python's dict keeps the first position and
 * the last value. Compacts kids[0..*cnt) in place. */
static bool same_key(const ibuf *b, const kid *x, const kid *y)
{
    if (x->klen != y->klen) return false;
    /* keys this short are interned: equal ones share their bytes */
    if (x->klen <= SIMG_INTERN_KEY) return x->koff == y->koff;
    return !memcmp(b->p + x->kdata, b->p + y->kdata, x->klen);
}

static int dedup_keys(jp *p, kid *kids, size_t *cnt)
{
    ibuf *b = p->b;
    size_t pairs = *cnt, size = 8;
    if (pairs <= 16) { /* the common object: compare each key with the kept ones */
        size_t w = 0;
        for (size_t i = 0; i < pairs; i++) {
            size_t j = 0;
            while (j < w && !same_key(b, &kids[j], &kids[i]))
                j++;
            if (j < w) {
                if (p->strict) {
                    p->err = "duplicate object key";
                    return -1;
                }
                kids[j].v = kids[i].v;
                continue;
            }
            kids[w++] = kids[i];
        }
        *cnt = w;
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
        kid *k = &kids[i];
        size_t h = (size_t)str_hash(b->p + k->kdata, k->klen) & (size - 1);
        int32_t found = -1;
        while (tab[h] >= 0) {
            if (same_key(b, &kids[tab[h]], k)) {
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
            kids[found].v = k->v;
            continue;
        }
        kids[w] = *k;
        tab[h] = (int32_t)w;
        w++;
    }
    free(tab);
    *cnt = w;
    return 0;
}

static bool key_is(const ibuf *b, const kid *k, const char *name, uint32_t len)
{
    return k->klen == len && !memcmp(b->p + k->kdata, name, len);
}

/* One element of the root's "events" array, parsed as `kids` (its keys
 * unique): checked as SessionTranscript.from_wire checks an event, and its
 * record appended, or its error noted if it is the array's first. */
static int event_record(jp *p, const kid *kids, size_t n)
{
    const simg_node *f[4] = {NULL, NULL, NULL, NULL}; /* id, ts, event_type, payload */
    for (size_t i = 0; i < n; i++) {
        const kid *k = &kids[i];
        if (key_is(p->b, k, "id", 2))
            f[0] = &k->v;
        else if (key_is(p->b, k, "ts", 2))
            f[1] = &k->v;
        else if (key_is(p->b, k, "event_type", 10))
            f[2] = &k->v;
        else if (key_is(p->b, k, "payload", 7))
            f[3] = &k->v;
    }
    int kind = EV_OK;
    if (!f[3] || simg_tag(*f[3]) != SN_OBJ)
        kind = EV_PAYLOAD;
    else if (!f[0] || simg_tag(*f[0]) != SN_STR)
        kind = EV_ID;
    else if (!f[1] || simg_tag(*f[1]) != SN_STR)
        kind = EV_TS;
    else if (!f[2] || simg_tag(*f[2]) != SN_STR)
        kind = EV_TYPE;
    if (kind != EV_OK) {
        p->everr.kind = kind;
        p->everr.index = p->nev;
        return 0;
    }
    if (p->nev == p->evcap) {
        size_t nc = p->evcap ? p->evcap * 2 : 1024;
        simg_event *ne = realloc(p->ev, nc * sizeof *ne);
        if (!ne) {
            p->b->oom = true;
            return -1;
        }
        p->ev = ne;
        p->evcap = nc;
    }
    simg_event *e = &p->ev[p->nev++];
    e->id = simg_off(*f[0]);
    e->ts = simg_off(*f[1]);
    e->type = simg_off(*f[2]);
    e->pad = 0;
    e->payload = *f[3];
    return 0;
}

/* The root's "events" array has closed: its records go to the image in
 * one block (or its first error is kept); *n gets its EVENTS node. */
static int events_close(jp *p, simg_node *n)
{
    if (p->everr.kind != EV_OK) {
        ev_error *ne =
            p->neverrs < SIMG_MAX_COUNT ? realloc(p->everrs, (p->neverrs + 1) * sizeof *ne) : NULL;
        if (!ne) {
            p->b->oom = true;
            return -1;
        }
        p->everrs = ne;
        p->everrs[p->neverrs] = p->everr;
        *n = simg_mk(SN_EVENTS, (uint32_t)p->neverrs++, 0);
        return 0;
    }
    if (p->nev > SIMG_MAX_COUNT) {
        p->b->oom = true;
        return -1;
    }
    size_t at = ib_reserve(p->b, p->nev * sizeof(simg_event));
    if (p->b->oom) return -1;
    if (p->nev) memcpy(p->b->p + at, p->ev, p->nev * sizeof(simg_event));
    *n = simg_mk(SN_EVENTS, (uint32_t)p->nev, (uint32_t)at);
    return 0;
}

/* A closed container's children (kids[0..cnt), keys unique) as one block
 * in the image; *n gets its node. */
static int container_close(jp *p, bool obj, const kid *kids, size_t cnt, simg_node *n)
{
    if (cnt > SIMG_MAX_COUNT) {
        p->b->oom = true;
        return -1;
    }
    size_t blk = ib_reserve(p->b, obj ? simg_obj_bytes(cnt) : cnt * sizeof(simg_node));
    if (p->b->oom) return -1;
    simg_node *vals = (simg_node *)(void *)(p->b->p + blk);
    for (size_t i = 0; i < cnt; i++)
        vals[i] = kids[i].v;
    if (obj) {
        uint32_t *keys = (uint32_t *)(void *)(vals + cnt);
        for (size_t i = 0; i < cnt; i++)
            keys[i] = kids[i].koff;
    }
    *n = simg_mk(obj ? SN_OBJ : SN_ARR, (uint32_t)cnt, (uint32_t)blk);
    return 0;
}

/* An out-of-line 8-byte number (INT64, FLOAT); *n gets its node. */
static int put_number(jp *p, unsigned tag, const void *bytes, simg_node *n)
{
    size_t at = ib_reserve_at(p->b, 8, 1);
    if (p->b->oom) return -1;
    memcpy(p->b->p + at, bytes, 8);
    *n = simg_mk(tag, 0, (uint32_t)at);
    return 0;
}

/* Parses one value and pushes it (with `key`, in an object) on the scratch
 * stack; as an element of the root's "events" array (R_EVENT), its record
 * instead. */
static int parse_value(jp *p, int depth, int role, const bstr *key)
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
    simg_node n = SN_NULL;
    char c = *p->s;
    if (role == R_EVENT && c != '{') { /* parsed, then dropped: the transcript is invalid */
        size_t at = p->stkn;
        if (parse_value(p, depth, R_ANY, NULL)) return -1;
        p->stkn = at;
        if (p->everr.kind == EV_OK) {
            p->everr.kind = EV_NOT_OBJECT;
            p->everr.index = p->nev;
        }
        return 0;
    }
    switch (c) {
    case '"': {
        p->s++;
        bstr s;
        if (parse_string(p, &s, SIMG_INTERN_VALUE)) return -1;
        n = simg_mk(SN_STR, 0, s.off);
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
         * absolute). The root's "events" array keeps no nodes: each
         * element leaves its record (event_record) instead. */
        bool events = !obj && role == R_EVENTS;
        int child = events ? R_EVENT : R_ANY;
        if (events) {
            p->nev = 0;
            p->everr.kind = EV_OK;
        }
        size_t base = p->stkn;
        skip_ws(p);
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
            p->s++;
        } else {
            for (;;) {
                bstr ks, *kp = NULL;
                if (obj) {
                    skip_ws(p);
                    if (p->s >= p->end || *p->s != '"') {
                        p->err = "expected an object key";
                        return -1;
                    }
                    p->s++;
                    if (parse_string(p, &ks, SIMG_INTERN_KEY)) return -1;
                    kp = &ks;
                    child =
                        role == R_ROOT && ks.blen == 6 && !memcmp(p->b->p + ks.data, "events", 6)
                            ? R_EVENTS
                            : R_ANY;
                    skip_ws(p);
                    if (p->s >= p->end || *p->s != ':') {
                        p->err = "expected ':'";
                        return -1;
                    }
                    p->s++;
                }
                if (parse_value(p, depth + 1, child, kp)) return -1;
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
        kid *kids = p->stk + base;
        size_t cnt = p->stkn - base;
        p->stkn = base; /* popped: nothing is pushed again before the copy */
        if (obj && cnt > 1 && dedup_keys(p, kids, &cnt)) return -1;
        if (role == R_EVENT) {
            release_parsed(p);
            /* an event after the array's first error needs no record */
            return p->everr.kind == EV_OK ? event_record(p, kids, cnt) : 0;
        }
        if (events ? events_close(p, &n) : container_close(p, obj, kids, cnt, &n)) return -1;
        release_parsed(p);
        break;
    }
    case 't':
        if (p->end - p->s >= 4 && !memcmp(p->s, "true", 4)) {
            p->s += 4;
            n = SN_TRUE;
            break;
        }
        p->err = "invalid literal";
        return -1;
    case 'f':
        if (p->end - p->s >= 5 && !memcmp(p->s, "false", 5)) {
            p->s += 5;
            n = SN_FALSE;
            break;
        }
        p->err = "invalid literal";
        return -1;
    case 'n':
        if (p->end - p->s >= 4 && !memcmp(p->s, "null", 4)) {
            p->s += 4;
            n = SN_NULL;
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
        if (put_number(p, SN_FLOAT, &d, &n)) return -1;
        break;
    }
    default:
        if (c == '-' && !p->strict && p->end - p->s >= 9 && !memcmp(p->s, "-Infinity", 9)) {
            p->s += 9;
            double d = -INFINITY;
            if (put_number(p, SN_FLOAT, &d, &n)) return -1;
            break;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            if (parse_number(p, &n)) return -1;
            break;
        }
        p->err = "unexpected character";
        return -1;
    }
    return push_kid(p, n, key);
}

/* The value of `key` in the OBJ node o, or NULL. */
static const simg_node *obj_get(const ibuf *b, simg_node o, const char *key)
{
    size_t kl = strlen(key);
    uint32_t cnt = simg_count(o);
    const simg_node *vals = (const simg_node *)(void *)(b->p + simg_off(o));
    const uint32_t *keys = (const uint32_t *)(const void *)(vals + cnt);
    for (uint32_t i = 0; i < cnt; i++) {
        simg_sv k;
        if (simg_str_at(b->p, b->len, keys[i], &k) && k.blen == kl && !memcmp(k.s, key, kl))
            return &vals[i];
    }
    return NULL;
}

/* The string s (a node's or a record's offset) in the image being built. */
static simg_sv str_of(const ibuf *b, uint32_t off)
{
    simg_sv s = {"", 0, 0, true};
    (void)simg_str_at(b->p, b->len, off, &s);
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

static void jp_free(jp *p)
{
    free(p->tmp);
    free(p->stk);
    free(p->ev);
    free(p->everrs);
}

int simg_build_text(const char *json, size_t len, const char *assignment_id, unsigned flags,
                    void **out, size_t *out_len, fps_err *err)
{
    int rc = 0;
    ibuf b = {0};
    /* the image is about the text's size on a realistic transcript, up to a
     * few times it on one of tiny values; start near the first */
    b.cap = len + len / 4 + 4096;
    b.p = malloc(b.cap);
    if (!b.p) return fail(err, SIMG_ETOO_LARGE, "out of memory");
    hugepage_hint(b.p, b.cap);
    ib_reserve(&b, sizeof(simg_hdr));
    jp p = {0};
    p.s = json;
    p.end = json + len;
    p.b = &b;
    p.strict = (flags & SIMG_STRICT) != 0;
    /* the text's first whole page: the bytes before it may share a page
     * with memory that is not the text's */
    if (flags & SIMG_CONSUME) {
        long ps = sysconf(_SC_PAGESIZE);
        p.page = ps > 0 ? (uintptr_t)ps : 4096;
        p.released = ((uintptr_t)json + p.page - 1) & ~(p.page - 1);
    }
    if (parse_value(&p, 0, R_ROOT, NULL)) {
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
    const simg_node t = p.stk[0].v; /* the root's node: all the stack holds */
    if (simg_tag(t) != SN_OBJ) {
        rc = fail(err, SIMG_EINVALID, "transcript must be an object");
        goto fail;
    }
    const simg_node *sv = obj_get(&b, t, "schema_version");
    if (!sv || simg_tag(*sv) != SN_STR) {
        rc = fail(err, SIMG_EINVALID, "schema_version must be a string");
        goto fail;
    }
    simg_sv svs = str_of(&b, simg_off(*sv));
    if (svs.blen != 1 || svs.s[0] != '2') {
        rc = fail(err, SIMG_EINVALID, "unsupported transcript schema version '%.64s'", svs.s);
        goto fail;
    }
    const simg_node *evs = obj_get(&b, t, "events");
    if (!evs || simg_tag(*evs) != SN_EVENTS) {
        rc = fail(err, SIMG_EINVALID, "events must be an array");
        goto fail;
    }
    if (simg_off(*evs) == 0) { /* the array's first event that is not one */
        const ev_error *ee = &p.everrs[simg_count(*evs)];
        if (ee->kind == EV_NOT_OBJECT)
            rc = fail(err, SIMG_EINVALID, "events[%zu] must be an object", ee->index);
        else if (ee->kind == EV_PAYLOAD)
            rc = fail(err, SIMG_EINVALID, "payload must be an object");
        else
            rc = fail(err, SIMG_EINVALID, "%s must be a string",
                      ee->kind == EV_ID   ? "id"
                      : ee->kind == EV_TS ? "ts"
                                          : "event_type");
        goto fail;
    }
    size_t ne = simg_count(*evs);
    const simg_node *ec = obj_get(&b, t, "event_count");
    unsigned ect = ec ? simg_tag(*ec) : SN_NULL;
    if (ect != SN_INT && ect != SN_INT64 && ect != SN_BIGINT) {
        rc = fail(err, SIMG_EINVALID, "event_count must be an integer");
        goto fail;
    }
    int64_t count = 0;
    if (ect == SN_INT)
        count = simg_int(*ec);
    else if (ect == SN_INT64)
        memcpy(&count, b.p + simg_off(*ec), 8);
    if (ect == SN_BIGINT || count < 0) {
        simg_sv text = ect == SN_BIGINT ? str_of(&b, simg_off(*ec)) : (simg_sv){"", 0, 0, true};
        if (ect == SN_BIGINT && text.s[0] != '-')
            rc = fail(err, SIMG_EINVALID,
                      "event_count is %.40s, but transcript contains %zu events", text.s, ne);
        else
            rc = fail(err, SIMG_EINVALID, "event_count must not be negative");
        goto fail;
    }
    if ((uint64_t)count != ne) {
        rc = fail(err, SIMG_EINVALID, "event_count is %lld, but transcript contains %zu events",
                  (long long)count, ne);
        goto fail;
    }
    simg_hdr h = {0};
    for (int k = 0; k < SF__COUNT; k++) {
        const simg_node *f = obj_get(&b, t, g_field_names[k]);
        if (!f || simg_tag(*f) != SN_STR) {
            rc = fail(err, SIMG_EINVALID, "%s must be a string", g_field_names[k]);
            goto fail;
        }
        h.fields[k] = simg_off(*f);
        if (k == SF_ASSIGNMENT_ID && assignment_id) { /* checked above, then overridden */
            h.fields[k] = ib_str(&b, assignment_id, strlen(assignment_id), 0).off;
            if (b.oom) goto oom;
        }
    }
    memcpy(h.magic, SIMG_MAGIC, 8);
    h.version = SIMG_VERSION;
    h.total_len = (uint32_t)b.len;
    h.nevents = (uint32_t)ne;
    h.events_off = simg_off(*evs);
    h.event_count = (int64_t)ne;
    memcpy(b.p, &h, sizeof h);
    jp_free(&p);
    free(b.itab);
    free(b.vcache);
    *out = b.p;
    *out_len = b.len;
    return 0;
oom:
    rc = fail(err, SIMG_ETOO_LARGE, "transcript too large for a session image");
fail:
    jp_free(&p);
    free(b.itab);
    free(b.vcache);
    free(b.p);
    return rc;
}

const char *simg_session_id(const void *img)
{
    const simg_hdr *h = img;
    simg_sv s = {"", 0, 0, true};
    (void)simg_str_at(img, h->total_len, h->fields[SF_SESSION_ID], &s);
    return s.s;
}

const char *simg_session_revision_id(const void *img)
{
    const simg_hdr *h = img;
    simg_sv s = {"", 0, 0, true};
    (void)simg_str_at(img, h->total_len, h->fields[SF_SESSION_REVISION_ID], &s);
    return s.s;
}

/* ---- validation --------------------------------------------------------------- */

static bool str_ok(const char *img, size_t len, uint32_t off)
{
    simg_sv s;
    return simg_str_at(img, len, off, &s);
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
        if (!str_ok(base, len, h->fields[k])) goto bad;
    if ((h->events_off & 7) || h->events_off < sizeof(simg_hdr) ||
        (size_t)h->events_off + (size_t)h->nevents * sizeof(simg_event) > len)
        goto bad;
    if (h->event_count != (int64_t)h->nevents) goto bad;
    for (uint32_t i = 0; i < h->nevents; i++) {
        const simg_event *e =
            (const simg_event *)(base + h->events_off + (size_t)i * sizeof(simg_event));
        /* the strings and payload nodes are checked when read (session.c,
         * simg_str_at): only the offsets and the top-level object here, so
         * a child does not touch the whole image (the strings lie beside
         * each event's payload, all over it) */
        if (e->id >= len || e->ts >= len || e->type >= len) goto bad;
        size_t poff = (size_t)((const char *)&e->payload - base);
        uint32_t at = simg_off(e->payload);
        if (simg_tag(e->payload) != SN_OBJ || (at & 7) || at < sizeof(simg_hdr) ||
            at + simg_obj_bytes(simg_count(e->payload)) > poff)
            goto bad;
    }
    return 0;
bad:
    return fail(err, SIMG_ECORRUPT, "session image is corrupt");
}
