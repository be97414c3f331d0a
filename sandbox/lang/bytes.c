/* sandbox/lang/bytes: Python bytes (from str.encode): repr, indexing/slicing,
 * decode (utf-8 strict/replace/ignore, ascii, latin-1), hex, and the str
 * methods bytes shares. Structural methods reuse str.c's implementation
 * through an exact latin-1 mapping (byte b <-> code point b); the case and
 * class methods are ASCII-only as CPython's bytes. */
#include "sandbox/lang/value_impl.h"
#include "sandbox/lang/utf8.h"

#include <stdio.h>
#include <stdlib.h>

int vby_repr_buf(strbuf *b, const val *v)
{
    const unsigned char *p = (const unsigned char *)v->u.s.s;
    size_t n = v->u.s.blen;
    char q = vs_repr_quote((const char *)p, n);
    strbuf_putc(b, 'b');
    strbuf_putc(b, q);
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 128)
            strbuf_printf(b, "\\x%02x", p[i]);
        else
            vs_repr_ascii(b, p[i], q);
    }
    strbuf_putc(b, q);
    return 0;
}

static val *mk_bytes(vctx *c, const char *p, size_t n)
{
    val *v = v_new(c, VT_BYTES);
    if (!v) return NULL;
    v->u.s.s = p;
    v->u.s.blen = v->u.s.clen = n;
    return v;
}

val *vby_getitem(vctx *c, val *s, val *key)
{
    int64_t len = (int64_t)s->u.s.blen;
    if (v_type(key) == VT_SLICE) {
        int64_t start, stop, step, slen;
        if (vseq_slice_indices(c, key, len, &start, &stop, &step, &slen)) return NULL;
        if (step == 1) return mk_bytes(c, s->u.s.s + start, (size_t)slen);
        char *p = v_alloc_bytes(c, (size_t)slen + 1);
        if (!p) return NULL;
        for (int64_t i = 0, k = start; i < slen; i++, k += step)
            p[i] = s->u.s.s[k];
        return mk_bytes(c, p, (size_t)slen);
    }
    int64_t i;
    if (v_int_index(c, key, &i, "byte indices must be integers or slices")) return NULL;
    if (vseq_index_norm(&i, len)) return v_raise(c, "IndexError", "index out of range");
    return v_int64(c, (unsigned char)s->u.s.s[i]);
}

/* latin-1 view of bytes as a str value */
static val *as_latin1(vctx *c, val *b)
{
    size_t extra = 0;
    for (size_t i = 0; i < b->u.s.blen; i++)
        if ((unsigned char)b->u.s.s[i] >= 128) extra++;
    if (!extra) return vs_new_owned(c, (char *)b->u.s.s, b->u.s.blen, b->u.s.blen, true);
    char *p = v_alloc_bytes(c, b->u.s.blen + extra + 1);
    if (!p) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < b->u.s.blen; i++)
        o += (size_t)utf8_encode((uint32_t)((unsigned char)b->u.s.s[i]), p + o);
    return vs_new_owned(c, p, o, b->u.s.blen, false);
}

static val *from_latin1(vctx *c, val *s)
{
    if (s->flags & VF_ASCII) return mk_bytes(c, s->u.s.s, s->u.s.blen);
    char *p = v_alloc_bytes(c, s->u.s.clen + 1);
    if (!p) return NULL;
    size_t i = 0, o = 0;
    while (i < s->u.s.blen) {
        size_t adv;
        p[o++] = (char)vs_decode1(s->u.s.s + i, s->u.s.blen - i, &adv);
        i += adv;
    }
    return mk_bytes(c, p, o);
}

static val *back(vctx *c, val *r)
{
    if (!r) return NULL;
    if (v_type(r) == VT_STR) return from_latin1(c, r);
    if (v_type(r) == VT_LIST || v_type(r) == VT_TUPLE) {
        val **it = v_items_alloc(c, r->u.seq.len);
        if (!it) return NULL;
        for (size_t i = 0; i < r->u.seq.len; i++) {
            it[i] = back(c, r->u.seq.items[i]);
            if (!it[i]) return NULL;
        }
        return v_type(r) == VT_LIST ? v_list_take(c, it, r->u.seq.len)
                                    : v_tuple_take(c, it, r->u.seq.len);
    }
    return r;
}

static val *conv_arg(vctx *c, val *a, bool allow_tuple)
{
    if (v_type(a) == VT_BYTES) return as_latin1(c, a);
    if (allow_tuple && v_type(a) == VT_TUPLE) {
        val **it = v_items_alloc(c, a->u.seq.len);
        if (!it) return NULL;
        for (size_t i = 0; i < a->u.seq.len; i++) {
            it[i] = conv_arg(c, a->u.seq.items[i], false);
            if (!it[i]) return NULL;
        }
        return v_tuple_take(c, it, a->u.seq.len);
    }
    if (v_type(a) == VT_STR)
        return v_raise(c, "TypeError", "a bytes-like object is required, not '%s'", v_type_name(a));
    return a;
}

static bool ascii_space(int ch)
{
    return ch == ' ' || (ch >= 9 && ch <= 13);
}

static val *decode(vctx *c, val *b, val *enc, val *errors)
{
    char lower[32] = "utf-8";
    if (enc) {
        if (v_type(enc) != VT_STR)
            return v_raise(c, "TypeError", "decode() argument 'encoding' must be str, not %s",
                           v_type_name(enc));
        size_t k = 0;
        for (size_t i = 0; i < enc->u.s.blen && k < sizeof lower - 1; i++) {
            char ch = enc->u.s.s[i];
            lower[k++] = (ch >= 'A' && ch <= 'Z') ? ch + 32 : (ch == '_' ? '-' : ch);
        }
        lower[k] = 0;
    }
    if (errors && v_type(errors) != VT_STR)
        return v_raise(c, "TypeError", "decode() argument 'errors' must be str, not %s",
                       v_type_name(errors));
    const char *ev = errors ? errors->u.s.s : "strict";
    size_t evl = errors ? errors->u.s.blen : 6;
    bool ignore = evl == 6 && !memcmp(ev, "ignore", 6);
    bool replace = evl == 7 && !memcmp(ev, "replace", 7);
    int kind;
    if (!strcmp(lower, "utf-8") || !strcmp(lower, "utf8") || !strcmp(lower, "u8"))
        kind = 0;
    else if (!strcmp(lower, "ascii") || !strcmp(lower, "us-ascii"))
        kind = 1;
    else if (!strcmp(lower, "latin-1") || !strcmp(lower, "latin1") ||
             !strcmp(lower, "iso-8859-1") || !strcmp(lower, "l1"))
        kind = 2;
    else
        return v_raise(c, "LookupError", "unknown encoding: %s", lower);
    const unsigned char *p = (const unsigned char *)b->u.s.s;
    size_t n = b->u.s.blen;
    /* ASCII decodes to itself in all three: the bytes are shared, not
     * copied (both are immutable) */
    bool ascii;
    vs_count_cps(b->u.s.s, n, &ascii);
    if (ascii) return vs_new_owned(c, (char *)b->u.s.s, n, n, true);
    char *out = v_alloc_bytes(c, n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        unsigned char ch = p[i];
        if (ch < 0x80) {
            out[o++] = (char)ch;
            i++;
            continue;
        }
        if (kind == 2) {
            o += (size_t)utf8_encode((uint32_t)(ch), out + o);
            i++;
            continue;
        }
        size_t need = 0;
        int32_t cp = 0, minv = 0;
        if (kind == 0) {
            if (ch >= 0xC2 && ch <= 0xDF)
                need = 1, cp = ch & 0x1F, minv = 0x80;
            else if (ch >= 0xE0 && ch <= 0xEF)
                need = 2, cp = ch & 0x0F, minv = 0x800;
            else if (ch >= 0xF0 && ch <= 0xF4)
                need = 3, cp = ch & 0x07, minv = 0x10000;
        }
        size_t k = 0;
        bool good = need > 0;
        for (k = 1; good && k <= need; k++) {
            if (i + k >= n || (p[i + k] & 0xC0) != 0x80) {
                good = false;
                break;
            }
            int32_t ncp = (cp << 6) | (p[i + k] & 0x3F);
            /* reject overlong / surrogate / too-large prefixes as early as CPython */
            if (k == 1) {
                if ((ch == 0xE0 && p[i + 1] < 0xA0) || (ch == 0xED && p[i + 1] > 0x9F) ||
                    (ch == 0xF0 && p[i + 1] < 0x90) || (ch == 0xF4 && p[i + 1] > 0x8F)) {
                    good = false;
                    break;
                }
            }
            cp = ncp;
        }
        if (good && cp >= minv) {
            memcpy(out + o, p + i, need + 1);
            o += need + 1;
            i += need + 1;
            continue;
        }
        if (!ignore && !replace) {
            const char *en = kind == 0 ? "utf-8" : "ascii";
            return v_raise(c, "UnicodeDecodeError",
                           "'%s' codec can't decode byte 0x%02x in position %zu", en, ch, i);
        }
        if (replace) { /* U+FFFD in UTF-8 */
            out[o++] = (char)0xEF;
            out[o++] = (char)0xBF;
            out[o++] = (char)0xBD;
        }
        /* skip the maximal invalid subpart (at least one byte) */
        i += k > 1 ? k : 1;
    }
    return v_str(c, out, o);
}

static val *hexm(vctx *c, val *b, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    static const char *const names[] = {"sep", "bytes_per_sep"};
    val *p[2];
    if (v_parse_args(c, "hex", a, na, kw, nkw, names, 2, 0, 0, p)) return NULL;
    const char *sep = NULL;
    int64_t per = 1;
    if (p[1]) { /* a C int, as CPython */
        if (!v_is_intlike(p[1]))
            return v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer",
                           v_type_name(p[1]));
        if (!v_as_i64(p[1], &per) || per < INT32_MIN || per > INT32_MAX)
            return v_raise(c, "OverflowError", "Python int too large to convert to C int");
    }
    if (p[0]) {
        if (v_type(p[0]) != VT_STR && v_type(p[0]) != VT_BYTES)
            return v_raise(c, "TypeError", "sep must be str or bytes.");
        if (p[0]->u.s.blen != 1) return v_raise(c, "ValueError", "sep must be length 1.");
        sep = p[0]->u.s.s;
        if ((unsigned char)sep[0] >= 128) return v_raise(c, "ValueError", "sep must be ASCII.");
    }
    size_t n = b->u.s.blen;
    strbuf sb;
    strbuf_init(&sb);
    int64_t ap = per < 0 ? -per : per;
    for (size_t i = 0; i < n; i++) {
        if (sep && i > 0 && ap > 0) {
            bool put;
            if (per > 0)
                put = ((n - i) % (size_t)ap) == 0;
            else
                put = (i % (size_t)ap) == 0;
            if (put) strbuf_putc(&sb, sep[0]);
        }
        strbuf_printf(&sb, "%02x", (unsigned char)b->u.s.s[i]);
    }
    val *r = v_str(c, sb.data ? sb.data : "", sb.len);
    strbuf_free(&sb);
    return r;
}

val *vby_method(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw, size_t nkw,
                bool *found)
{
    *found = true;
    if (!strcmp(name, "decode")) {
        static const char *const names[] = {"encoding", "errors"};
        val *p[2];
        if (v_parse_args(c, name, a, na, kw, nkw, names, 2, 0, 0, p)) return NULL;
        return decode(c, s, p[0], p[1]);
    }
    if (!strcmp(name, "hex")) return hexm(c, s, a, na, kw, nkw);
    /* ASCII-only case and class methods */
    static const char *const ascii_m[] = {"lower",      "upper",   "swapcase", "title",
                                          "capitalize", "isdigit", "isalpha",  "isalnum",
                                          "isspace",    "islower", "isupper",  "istitle"};
    for (size_t k = 0; k < sizeof ascii_m / sizeof *ascii_m; k++) {
        if (strcmp(name, ascii_m[k])) continue;
        /* map non-ASCII bytes to a placeholder the str methods treat as uncased */
        char *tmp = v_alloc_bytes(c, s->u.s.blen + 1);
        if (!tmp) return NULL;
        for (size_t i = 0; i < s->u.s.blen; i++) {
            unsigned char ch = (unsigned char)s->u.s.s[i];
            tmp[i] = ch >= 128 ? '\x01' : (char)ch;
        }
        if (!strcmp(name, "isspace")) {
            if (s->u.s.blen == 0) return v_false();
            for (size_t i = 0; i < s->u.s.blen; i++)
                if (!ascii_space((unsigned char)s->u.s.s[i])) return v_false();
            return v_true();
        }
        val *ts = vs_new_owned(c, tmp, s->u.s.blen, s->u.s.blen, true);
        if (!ts) return NULL;
        val *r = vs_method(c, ts, name, a, na, kw, nkw, found);
        if (!r || v_type(r) != VT_STR) return r;
        /* restore the original non-ASCII bytes */
        char *o = (char *)r->u.s.s;
        if (o != tmp) {
            char *cp = v_alloc_bytes(c, r->u.s.blen + 1);
            if (!cp) return NULL;
            memcpy(cp, o, r->u.s.blen);
            o = cp;
        }
        for (size_t i = 0; i < r->u.s.blen; i++)
            if ((unsigned char)s->u.s.s[i] >= 128) o[i] = s->u.s.s[i];
        return mk_bytes(c, o, r->u.s.blen);
    }
    if (!strcmp(name, "splitlines")) {
        static const char *const names[] = {"keepends"};
        val *p[1];
        if (v_parse_args(c, name, a, na, kw, nkw, names, 1, 0, 0, p)) return NULL;
        bool keep = false;
        if (p[0] && vs_keepends(c, p[0], &keep)) return NULL;
        const char *d = s->u.s.s;
        size_t len = s->u.s.blen, lines = 0;
        for (size_t i = 0; i < len; i++) /* \r\n counts once, at its \n */
            lines += d[i] == '\n' || (d[i] == '\r' && (i + 1 == len || d[i + 1] != '\n'));
        size_t last = len && (d[len - 1] == '\n' || d[len - 1] == '\r') ? 0 : len > 0;
        val **items = v_items_alloc(c, lines + last);
        if (!items) return NULL;
        size_t n = 0, i = 0, start = 0;
        while (i < len) {
            if (d[i] != '\n' && d[i] != '\r') {
                i++;
                continue;
            }
            size_t eol = i;
            if (d[i] == '\r' && i + 1 < len && d[i + 1] == '\n')
                i += 2;
            else
                i++;
            items[n] = mk_bytes(c, d + start, (keep ? i : eol) - start);
            if (!items[n++]) return NULL;
            start = i;
        }
        if (start < len) {
            items[n] = mk_bytes(c, d + start, len - start);
            if (!items[n++]) return NULL;
        }
        return v_list_take(c, items, n);
    }
    static const char *const struct_m[] = {
        "count",   "find",      "rfind",      "index",        "startswith",   "endswith",
        "replace", "split",     "rsplit",     "strip",        "lstrip",       "rstrip",
        "join",    "partition", "rpartition", "removeprefix", "removesuffix", "zfill",
        "ljust",   "rjust",     "center",     "splitlines"};
    if (na > 0 && (!strcmp(name, "zfill") || !strcmp(name, "ljust") || !strcmp(name, "rjust") ||
                   !strcmp(name, "center"))) {
        /* a width within a Py_ssize_t but past what a bytes object's header
         * leaves: CPython's PyBytes_FromStringAndSize refuses it so */
        int64_t w;
        if (v_is_intlike(a[0]) && v_as_i64(a[0], &w) && w > INT64_MAX - 33 &&
            (uint64_t)w > s->u.s.blen)
            return v_raise(c, "OverflowError", "byte string is too large");
    }
    for (size_t k = 0; k < sizeof struct_m / sizeof *struct_m; k++) {
        if (strcmp(name, struct_m[k])) continue;
        bool ws = (!strcmp(name, "split") || !strcmp(name, "rsplit") || !strcmp(name, "strip") ||
                   !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) &&
                  (na == 0 || v_type(a[0]) == VT_NONE) && nkw == 0;
        if (ws && name[strlen(name) - 1] == 'p') {
            /* strip with ASCII whitespace */
            size_t lo = 0, hi = s->u.s.blen;
            if (name[0] != 'r')
                while (lo < hi && ascii_space((unsigned char)s->u.s.s[lo]))
                    lo++;
            if (name[0] != 'l')
                while (hi > lo && ascii_space((unsigned char)s->u.s.s[hi - 1]))
                    hi--;
            return mk_bytes(c, s->u.s.s + lo, hi - lo);
        }
        val *ls = as_latin1(c, s);
        if (!ls) return NULL;
        val **ca = v_items_alloc(c, na);
        if (!ca) return NULL;
        bool is_join = !strcmp(name, "join");
        bool int_sub = !strcmp(name, "count") || !strcmp(name, "find") || !strcmp(name, "rfind") ||
                       !strcmp(name, "index");
        for (size_t i = 0; i < na; i++) {
            if (i == 0 && int_sub && v_is_intlike(a[0])) {
                int64_t x;
                if (!v_as_i64(a[0], &x) || x < 0 || x > 255)
                    return v_raise(c, "ValueError", "byte must be in range(0, 256)");
                char tmp[4]; /* x < 256: two bytes, but utf8_encode may write four */
                size_t k = (size_t)utf8_encode((uint32_t)((int32_t)x), tmp);
                ca[i] = v_str(c, tmp, k);
                if (!ca[i]) return NULL;
                continue;
            }
            if (is_join) {
                val **items;
                size_t n;
                if (v_iter_collect(c, a[i], &items, &n)) return NULL;
                for (size_t j = 0; j < n; j++) {
                    if (v_type(items[j]) != VT_BYTES)
                        return v_raise(c, "TypeError",
                                       "sequence item %zu: expected a bytes-like object, %s found",
                                       j, v_type_name(items[j]));
                    items[j] = as_latin1(c, items[j]);
                    if (!items[j]) return NULL;
                }
                ca[i] = v_list_take(c, items, n);
            } else {
                ca[i] = conv_arg(c, a[i], i == 0);
            }
            if (!ca[i]) return NULL;
        }
        vkwarg *ck = NULL;
        if (nkw) {
            ck = v_alloc(c, nkw * sizeof *ck);
            if (!ck) return NULL;
            for (size_t i = 0; i < nkw; i++) {
                ck[i].name = kw[i].name;
                ck[i].value = conv_arg(c, kw[i].value, false);
                if (!ck[i].value) return NULL;
            }
        }
        if (ws) {
            /* whitespace split on ASCII whitespace: replace the other str-space bytes */
            val *r = vs_method(c, ls, name, ca, na, ck, nkw, found);
            return back(c, r);
        }
        return back(c, vs_method(c, ls, name, ca, na, ck, nkw, found));
    }
    *found = false;
    return NULL;
}

/* bytes % args: the str implementation over the latin-1 view (bytes
 * arguments are inserted as their raw bytes). */
val *vby_percent(vctx *c, val *fmt, val *args)
{
    val *f = as_latin1(c, fmt);
    if (!f) return NULL;
    bool has_str = v_type(args) == VT_STR;
    for (size_t i = 0; v_type(args) == VT_TUPLE && i < args->u.seq.len; i++)
        if (v_type(args->u.seq.items[i]) == VT_STR) has_str = true;
    if (has_str)
        return v_raise(
            c, "TypeError",
            "%%b requires a bytes-like object, or an object that implements __bytes__, not 'str'");
    val *a = args;
    if (v_type(args) == VT_BYTES)
        a = as_latin1(c, args);
    else if (v_type(args) == VT_TUPLE) {
        val **it = v_items_alloc(c, args->u.seq.len);
        if (!it) return NULL;
        for (size_t i = 0; i < args->u.seq.len; i++) {
            val *x = args->u.seq.items[i];
            it[i] = v_type(x) == VT_BYTES ? as_latin1(c, x) : x;
            if (!it[i]) return NULL;
        }
        a = v_tuple_take(c, it, args->u.seq.len);
    }
    if (!a) return NULL;
    if (v_type(args) == VT_BYTES) {
        /* a bytes argument is a mapping for % (it has __getitem__) */
        val *r = vfmt_percent(c, f, a);
        if (!r && v_failed(c)) return NULL;
        return back(c, r);
    }
    return back(c, vfmt_percent(c, f, a));
}
