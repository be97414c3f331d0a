/* sandbox/lang/value: core of the value runtime (value.h): constructors and
 * the interned singletons, type names, truthiness, equality/hash/ordering
 * dispatch with CPython's cross-type rules, membership, iteration,
 * subscript, attribute and call dispatch, repr/str dispatch. The collector
 * and allocator live in alloc.c, exception and step state in exc.c;
 * type-specific work in int.c, float.c, str.c, bytes.c, containers.c,
 * format.c, builtins.c, result.c and session.c. */
#include "sandbox/lang/value_impl.h"

#include <gc/gc.h>
#include <math.h>
#include <stdio.h>

/* None, True and False, in the collected heap (an uncollectable block made
 * by gc_init_once, before any context exists), not in static data: the
 * marker follows every word of a list of 10^7 Nones, and a word pointing
 * outside the heap but inside its address range (the static-pie binary
 * lies among the heap's mappings) costs it a header lookup and a
 * black-list entry each time; inside the heap it is a cached, marked
 * block. */
enum { CONST_NONE, CONST_TRUE, CONST_FALSE, CONST__COUNT };
static val *g_consts;
val v_dummy_key = {.ty = VT_NONE};

/* The shared values (g_consts, the shared strings), once. 0 or -1. */
int vi_shared_init(void)
{
    if (g_consts) return 0;
    val *consts = GC_MALLOC_UNCOLLECTABLE(CONST__COUNT * sizeof(val));
    val *strs = GC_MALLOC_UNCOLLECTABLE(VS_SHARED_COUNT * sizeof(val));
    if (consts == NULL || strs == NULL) goto fail;
    memset(consts, 0, CONST__COUNT * sizeof(val));
    consts[CONST_NONE].ty = VT_NONE;
    consts[CONST_TRUE].ty = VT_BOOL;
    consts[CONST_TRUE].u.b = true;
    consts[CONST_FALSE].ty = VT_BOOL;
    vs_shared_init(strs);
    g_consts = consts;
    return 0;
fail:
    GC_FREE(consts);
    GC_FREE(strs);
    return -1;
}

/* A boxed int, beyond the tagged range, is 24 bytes as CPython's 28-byte
 * int; an event 32 (the session's events are one block of them); a str
 * header 32 (a value read from the session image is only its header); a
 * dict or set 48 (a payload dict read lazily is only this). */
size_t v_val_size(vtype t)
{
    val *z = NULL;
    switch (t) {
    case VT_INT:
        return offsetof(val, u) + sizeof z->u.ib;
    case VT_FLOAT:
        return offsetof(val, u) + sizeof z->u.f;
    case VT_STR:
    case VT_BYTES:
        return offsetof(val, u) + sizeof z->u.s;
    case VT_TUPLE:
    case VT_LIST:
        return offsetof(val, u) + sizeof z->u.seq;
    case VT_RANGE:
        return offsetof(val, u) + sizeof z->u.r;
    case VT_EVENT:
        return offsetof(val, u) + sizeof z->u.ev;
    case VT_DICT:
    case VT_SET:
        return offsetof(val, u) + sizeof z->u.t;
    default:
        return sizeof(val);
    }
}

val *v_new(vctx *c, vtype t)
{
    val *v = v_alloc(c, v_val_size(t));
    if (v) v->ty = (uint8_t)t;
    return v;
}

/* ---- constructors ---------------------------------------------------- */

val *v_none(void)
{
    return &g_consts[CONST_NONE];
}
val *v_true(void)
{
    return &g_consts[CONST_TRUE];
}
val *v_false(void)
{
    return &g_consts[CONST_FALSE];
}
val *v_bool(bool b)
{
    return &g_consts[b ? CONST_TRUE : CONST_FALSE];
}

val *v_int64(vctx *c, int64_t i)
{
    if (v_tag_fits(i)) return v_tag(i);
    val *v = v_new(c, VT_INT);
    if (v) v->u.ib.small = i;
    return v;
}

val *v_int_mpz(vctx *c, const mpz_t z)
{
    if (mpz_fits_slong_p(z)) return v_int64(c, mpz_get_si(z));
    mpz_ptr n = vi_mpz_new(c);
    if (n == NULL) return NULL;
    mpz_set(n, z);
    return vi_from_mpz_take(c, n);
}

val *v_int_parse(vctx *c, const char *s, size_t len, int base)
{
    return vi_parse(c, s, len, base, true);
}

val *v_float(vctx *c, double d)
{
    val *v = v_new(c, VT_FLOAT);
    if (v) v->u.f = d;
    return v;
}

/* The shared string equal to the blen bytes at s (the empty string, a
 * one-character Latin-1 string), or NULL. */
static val *str_shared(vctx *c, const char *s, size_t blen, size_t clen, bool ascii)
{
    /* The empty string and the one-character Latin-1 strings are shared,
     * as CPython's are: splitting a text into short fields, or its lines,
     * makes no value for each of them. */
    if (blen == 0) return vs_empty();
    if (blen == 1 && ascii) return vs_char(c, s, 1);
    if (blen == 2 && clen == 1 && (unsigned char)s[0] < 0xC4) return vs_char(c, s, 2); /* Latin-1 */
    return NULL;
}

val *vs_new_owned(vctx *c, char *s, size_t blen, size_t clen, bool ascii)
{
    val *sh = str_shared(c, s, blen, clen, ascii);
    if (sh) return sh;
    val *v = v_new(c, VT_STR);
    if (v == NULL) return NULL;
    v->u.s.s = s;
    v->u.s.blen = blen;
    v->u.s.clen = clen;
    v->flags = ascii ? VF_ASCII : 0;
    return v;
}

/* Not inlined, as v_alloc: the block is shorter than struct val. */
__attribute__((noinline)) static val *str_block(vctx *c, size_t size)
{
    return v_alloc_bytes(c, size); /* its last byte is the NUL */
}

/* A string made here is one block: its header, then its text and a NUL.
 * The block holds no pointer but the one to its own text, so it is of the
 * collector's pointer-free kind (never scanned); a slice that shares the
 * text points inside it, which keeps it alive (the collector recognises
 * interior pointers). A string of up to 15 bytes (str(i) below 10**15)
 * is one 48-byte block (CPython: 56 for up to 7), where a header and a
 * separate text block took 48 + 16. */
val *vs_alloc(vctx *c, vtype t, size_t blen, char **text)
{
    size_t hdr = v_val_size(VT_STR);
    if (v_check_strlen(c, blen)) return NULL;
    val *v = str_block(c, hdr + blen + 1);
    if (v == NULL) return NULL;
    v->ty = (uint8_t)t;
    v->flags = 0;
    v->u.s.s = (char *)v + hdr;
    v->u.s.blen = v->u.s.clen = blen;
    v->u.s.hash = 0;
    *text = (char *)v + hdr;
    return v;
}

val *vs_done(vctx *c, val *v, size_t blen, size_t clen, bool ascii)
{
    val *sh = str_shared(c, v->u.s.s, blen, clen, ascii);
    if (sh) return sh;
    ((char *)v->u.s.s)[blen] = 0;
    v->u.s.blen = blen;
    v->u.s.clen = clen;
    v->flags = ascii ? VF_ASCII : 0;
    return v;
}

val *v_str(vctx *c, const char *utf8, size_t blen)
{
    bool ascii;
    size_t n = vs_count_cps(utf8, blen, &ascii);
    val *sh = str_shared(c, utf8, blen, n, ascii);
    if (sh) return sh;
    char *p;
    val *v = vs_alloc(c, VT_STR, blen, &p);
    if (v == NULL) return NULL;
    memcpy(p, utf8, blen);
    v->u.s.clen = n;
    v->flags = ascii ? VF_ASCII : 0;
    return v;
}

val *v_strz(vctx *c, const char *utf8)
{
    return v_str(c, utf8, strlen(utf8));
}

val *v_bytes(vctx *c, const char *data, size_t len)
{
    char *p;
    val *v = vs_alloc(c, VT_BYTES, len, &p);
    if (v == NULL) return NULL;
    memcpy(p, data, len);
    return v;
}

static val *seq_new(vctx *c, vtype t, val *const *items, size_t n, bool take)
{
    val *v = v_new(c, t);
    if (v == NULL) return NULL;
    if (take) {
        v->u.seq.items = (val **)items;
    } else {
        val **arr = v_items_alloc_filled(c, n);
        if (arr == NULL) return NULL;
        if (n) memcpy(arr, items, n * sizeof *arr);
        v->u.seq.items = arr;
    }
    v->u.seq.len = n;
    return v;
}

val *v_tuple(vctx *c, val *const *items, size_t n)
{
    return seq_new(c, VT_TUPLE, items, n, false);
}
val *v_list(vctx *c, val *const *items, size_t n)
{
    return seq_new(c, VT_LIST, items, n, false);
}
val *v_tuple_take(vctx *c, val **items, size_t n)
{
    if (v_check_items(c, n)) return NULL;
    return seq_new(c, VT_TUPLE, items, n, true);
}
val *v_list_take(vctx *c, val **items, size_t n)
{
    if (v_check_items(c, n)) return NULL;
    return seq_new(c, VT_LIST, items, n, true);
}

val *v_range(vctx *c, int64_t start, int64_t stop, int64_t step)
{
    val *v = v_new(c, VT_RANGE);
    if (v == NULL) return NULL;
    v->u.r.start = start;
    v->u.r.stop = stop;
    v->u.r.step = step;
    __int128 len = 0;
    if (step > 0 && start < stop)
        len = ((__int128)stop - start - 1) / step + 1;
    else if (step < 0 && start > stop)
        len = ((__int128)start - stop - 1) / (-(__int128)step) + 1;
    if (len > INT64_MAX) {
        /* exact, but only as a big range */
        val *a = v_int64(c, start), *b = a ? v_int64(c, stop) : NULL,
            *s = b ? v_int64(c, step) : NULL;
        return s ? vbr_new(c, a, b, s) : NULL;
    }
    v->u.r.len = (int64_t)len;
    return v;
}

val *v_slice(vctx *c, val *lo, val *hi, val *step)
{
    val *v = v_new(c, VT_SLICE);
    if (v == NULL) return NULL;
    v->u.sl.lo = lo && v_type(lo) != VT_NONE ? lo : NULL;
    v->u.sl.hi = hi && v_type(hi) != VT_NONE ? hi : NULL;
    v->u.sl.step = step && v_type(step) != VT_NONE ? step : NULL;
    return v;
}

/* ---- names and predicates --------------------------------------------- */

const char *v_type_name(const val *v)
{
    switch (v_type(v)) {
    case VT_NONE:
        return "NoneType";
    case VT_BOOL:
        return "bool";
    case VT_INT:
        return "int";
    case VT_FLOAT:
        return "float";
    case VT_STR:
        return "str";
    case VT_BYTES:
        return "bytes";
    case VT_TUPLE:
        return "tuple";
    case VT_LIST:
        return "list";
    case VT_DICT:
        return "dict";
    case VT_SET:
        return "set";
    case VT_RANGE:
        return "range";
    case VT_SLICE:
        return "slice";
    case VT_SESSION:
        return "SessionTranscript";
    case VT_EVENT:
        return "TranscriptEvent";
    case VT_BUILTIN:
        return vb_is_class(v->u.bi.id) ? "type" : "builtin_function_or_method";
    case VT_SCORE:
        return "Score";
    case VT_METRIC:
        return "Metric";
    case VT_ASSERTION:
        return "Assertion";
    case VT_EVALRESULT:
        return "EvalResult";
    case VT_CONDRESULT:
        return "ConditionResult";
    case VT_DICT_KEYS:
        return "dict_keys";
    case VT_DICT_VALUES:
        return "dict_values";
    case VT_DICT_ITEMS:
        return "dict_items";
    case VT_COMPLEX:
        return "complex";
    case VT_ELLIPSIS:
        return "ellipsis";
    case VT_BIGRANGE:
        return "range";
    case VT__COUNT:
        break;
    }
    return "object";
}

int v_as_i64(const val *v, int64_t *out)
{
    if (v_type(v) == VT_BOOL) {
        *out = v->u.b;
        return 1;
    }
    if (v_type(v) != VT_INT) return 0;
    mpz_ptr z = vi_big(v);
    if (z == NULL) return vi_small(v, out);
    if (!mpz_fits_slong_p(z)) return 0;
    *out = mpz_get_si(z);
    return 1;
}

int64_t v_len(vctx *c, val *v)
{
    switch (v_type(v)) {
    case VT_STR:
        return (int64_t)v->u.s.clen;
    case VT_BYTES:
        return (int64_t)v->u.s.blen;
    case VT_TUPLE:
    case VT_LIST:
        return (int64_t)v->u.seq.len;
    case VT_DICT:
        return (int64_t)vd_len(v);
    case VT_SET:
        return (int64_t)v->u.t.len;
    case VT_RANGE:
        return v->u.r.len;
    case VT_BIGRANGE:
        return vbr_len(c, v);
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS:
        return (int64_t)v->u.rec.f[0]->u.t.len;
    default:
        break;
    }
    v_raise(c, "TypeError", "object of type '%s' has no len()", v_type_name(v));
    return -1;
}

bool v_truthy(const val *v)
{
    switch (v_type(v)) {
    case VT_NONE:
        return false;
    case VT_BOOL:
        return v->u.b;
    case VT_INT:
        return vi_sign(v) != 0;
    case VT_FLOAT:
        return v->u.f != 0.0;
    case VT_COMPLEX:
        return v->u.cx.re != 0.0 || v->u.cx.im != 0.0;
    case VT_STR:
    case VT_BYTES:
        return v->u.s.blen != 0;
    case VT_TUPLE:
    case VT_LIST:
        return v->u.seq.len != 0;
    case VT_DICT:
        return vd_len(v) != 0;
    case VT_SET:
        return v->u.t.len != 0;
    case VT_RANGE:
        return v->u.r.len != 0;
    case VT_BIGRANGE:
        return vbr_truthy(v);
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS:
        return v->u.rec.f[0]->u.t.len != 0;
    default:
        return true;
    }
}

bool v_is(val *a, val *b)
{
    if (a == b) return true; /* tagged ints: equal values */
    /* values the arena duplicates but CPython would share */
    if (v_is_tagged(a) || v_is_tagged(b) || v_type(a) != v_type(b)) return false;
    if (v_type(a) == VT_BUILTIN) return a->u.bi.id == b->u.bi.id;
    if (v_type(a) == VT_SESSION) return true;
    if (v_type(a) == VT_EVENT) return a->u.ev.index == b->u.ev.index && a->u.ev.img == b->u.ev.img;
    return false;
}

/* ---- equality, hashing, ordering ------------------------------------ */

static int num_cmp(const val *a, const val *b, int *unordered)
{
    /* returns -1/0/1; *unordered for NaN */
    *unordered = 0;
    if (v_type(a) != VT_FLOAT && v_type(b) != VT_FLOAT) return vi_cmp(a, b);
    if (v_type(a) == VT_FLOAT && v_type(b) == VT_FLOAT) {
        if (isnan(a->u.f) || isnan(b->u.f)) {
            *unordered = 1;
            return 0;
        }
        return a->u.f < b->u.f ? -1 : a->u.f > b->u.f;
    }
    if (v_type(a) == VT_FLOAT) {
        if (isnan(a->u.f)) {
            *unordered = 1;
            return 0;
        }
        return -vi_cmp_double(b, a->u.f);
    }
    if (isnan(b->u.f)) {
        *unordered = 1;
        return 0;
    }
    return vi_cmp_double(a, b->u.f);
}

static int item_eq(vctx *c, val *a, val *b)
{
    if (a == b) return 1;
    return v_eq(c, a, b);
}

static val *view_as_set(vctx *c, val *v)
{
    if (v_type(v) == VT_SET) return v;
    return vset_from_iterable(c, v);
}

int v_eq(vctx *c, val *a, val *b)
{
    if (v_is_tagged(a) && v_is_tagged(b)) return a == b;
    if (v_type(a) == VT_STR && v_type(b) == VT_STR) return vs_eq(a, b);
    if ((v_type(a) == VT_COMPLEX && (v_is_number(b) || v_type(b) == VT_COMPLEX)) ||
        (v_type(b) == VT_COMPLEX && v_is_number(a)))
        return vc_eq(c, a, b);
    if ((v_type(a) == VT_DICT_KEYS || v_type(a) == VT_DICT_ITEMS || v_type(b) == VT_DICT_KEYS ||
         v_type(b) == VT_DICT_ITEMS) &&
        v_type(a) != VT_DICT_VALUES && v_type(b) != VT_DICT_VALUES &&
        (v_type(a) == VT_SET || v_type(b) == VT_SET || v_type(a) == v_type(b))) {
        val *x = view_as_set(c, a), *y = x ? view_as_set(c, b) : NULL;
        if (!y) return -1;
        return vset_eq(c, x, y);
    }
    if (v_is_number(a) && v_is_number(b)) {
        int un;
        int r = num_cmp(a, b, &un);
        return !un && r == 0;
    }
    if ((v_type(a) == VT_BIGRANGE || v_type(a) == VT_RANGE) &&
        (v_type(b) == VT_BIGRANGE || v_type(b) == VT_RANGE))
        return vbr_eq(a, b);
    if (v_type(a) != v_type(b)) return 0;
    switch (v_type(a)) {
    case VT_NONE:
        return 1;
    case VT_STR:
    case VT_BYTES:
        return vs_eq(a, b);
    case VT_TUPLE:
    case VT_LIST:
        return vseq_eq(c, a, b);
    case VT_DICT:
        return vdict_eq(c, a, b);
    case VT_SET:
        return vset_eq(c, a, b);
    case VT_RANGE:
        return vrange_eq(a, b);
    case VT_SLICE: {
        val *x[3] = {a->u.sl.lo, a->u.sl.hi, a->u.sl.step};
        val *y[3] = {b->u.sl.lo, b->u.sl.hi, b->u.sl.step};
        for (int i = 0; i < 3; i++) {
            int r = item_eq(c, x[i] ? x[i] : v_none(), y[i] ? y[i] : v_none());
            if (r <= 0) return r;
        }
        return 1;
    }
    case VT_SESSION:
    case VT_EVENT:
        return vsess_eq(c, a, b);
    case VT_BUILTIN:
        return a->u.bi.id == b->u.bi.id;
    case VT_SCORE:
    case VT_METRIC:
    case VT_ASSERTION:
    case VT_EVALRESULT:
    case VT_CONDRESULT:
        return vr_eq(c, a, b);
    default:
        return a == b;
    }
}

int64_t v_hash_tuple(vctx *c, val *t, int *err)
{
    const uint64_t P1 = 11400714785074694791ULL, P2 = 14029467366897019727ULL,
                   P5 = 2870177450012600261ULL;
    uint64_t acc = P5;
    for (size_t i = 0; i < t->u.seq.len; i++) {
        int64_t h;
        if (v_hash(c, t->u.seq.items[i], &h)) {
            *err = 1;
            return 0;
        }
        acc += (uint64_t)h * P2;
        acc = (acc << 31) | (acc >> 33);
        acc *= P1;
    }
    acc += t->u.seq.len ^ (P5 ^ 3527539UL);
    if (acc == (uint64_t)-1) return 1546275796;
    *err = 0;
    return (int64_t)acc;
}

int v_hash(vctx *c, val *v, int64_t *out)
{
    switch (v_type(v)) {
    case VT_NONE:
        *out = 0x5f5e1d0;
        return 0; /* CPython: address-derived */
    case VT_BOOL:
        *out = v->u.b;
        return 0;
    case VT_INT:
        *out = vi_hash(v);
        return 0;
    case VT_FLOAT:
        *out = vf_hash(v->u.f);
        return 0;
    case VT_COMPLEX:
        *out = vc_hash(v);
        return 0;
    case VT_ELLIPSIS:
        *out = 0x5f5e1e0;
        return 0;
    case VT_STR:
    case VT_BYTES:
        *out = vs_hash(v);
        return 0;
    case VT_TUPLE: {
        int err = 0;
        *out = v_hash_tuple(c, v, &err);
        return err ? -1 : 0;
    }
    case VT_RANGE: {
        /* hash((len, start, step)) with CPython's normalization */
        val *t[3];
        val tv = {.ty = VT_TUPLE};
        t[0] = v_int64(c, v->u.r.len);
        t[1] = v->u.r.len ? v_int64(c, v->u.r.start) : v_none();
        t[2] = v->u.r.len > 1 ? v_int64(c, v->u.r.step) : v_none();
        if (!t[0] || !t[1] || !t[2]) return -1;
        tv.u.seq.items = t;
        tv.u.seq.len = 3;
        int err = 0;
        *out = v_hash_tuple(c, &tv, &err);
        return err ? -1 : 0;
    }
    case VT_BUILTIN:
        *out = 0x1000 + v->u.bi.id;
        return 0;
    case VT_BIGRANGE:
        return vbr_hash(c, v, out);
    case VT_SESSION:
    case VT_EVENT:
        v_raise(c, "TypeError", "unhashable type: 'dict'");
        return -1;
    case VT_SCORE:
    case VT_METRIC:
    case VT_ASSERTION:
    case VT_EVALRESULT:
    case VT_CONDRESULT:
        return vr_hash(c, v, out);
    default:
        break;
    }
    v_raise(c, "TypeError", "unhashable type: '%s'", v_type_name(v));
    return -1;
}

static const char *cmp_sym(vcmpop op)
{
    static const char *s[] = {"==", "!=", "<", "<=", ">", ">="};
    return s[op];
}

int v_compare(vctx *c, vcmpop op, val *a, val *b)
{
    if (v_is_tagged(a) && v_is_tagged(b)) return v_tagged_compare(op, a, b);
    if (op == CMP_EQ || op == CMP_NE) {
        int r = v_eq(c, a, b);
        if (r < 0) return -1;
        return op == CMP_EQ ? r : !r;
    }
    if (v_is_number(a) && v_is_number(b)) {
        int un;
        int r = num_cmp(a, b, &un);
        if (un) return 0;
        return v_cmp_result(op, r);
    }
    if (v_type(a) == v_type(b)) {
        switch (v_type(a)) {
        case VT_STR:
        case VT_BYTES:
            return v_cmp_result(op, vs_cmp(a, b));
        case VT_TUPLE:
        case VT_LIST:
            return vseq_cmp(c, op, a, b);
        case VT_SET:
            return vset_cmp(c, op, a, b);
        default:
            break;
        }
    }
    v_raise(c, "TypeError", "'%s' not supported between instances of '%s' and '%s'", cmp_sym(op),
            v_type_name(a), v_type_name(b));
    return -1;
}

int v_contains(vctx *c, val *cont, val *item)
{
    switch (v_type(cont)) {
    case VT_STR:
        return vs_contains(c, cont, item);
    case VT_BYTES: {
        if (v_type(item) == VT_BYTES) {
            if (item->u.s.blen == 0) return 1;
            return memmem(cont->u.s.s, cont->u.s.blen, item->u.s.s, item->u.s.blen) != NULL;
        }
        int64_t x;
        if (v_is_intlike(item)) {
            if (!v_as_i64(item, &x) || x < 0 || x > 255) {
                v_raise(c, "ValueError", "byte must be in range(0, 256)");
                return -1;
            }
            return memchr(cont->u.s.s, (int)x, cont->u.s.blen) != NULL;
        }
        v_raise(c, "TypeError", "a bytes-like object is required, not '%s'", v_type_name(item));
        return -1;
    }
    case VT_TUPLE:
    case VT_LIST:
        for (size_t i = 0; i < cont->u.seq.len; i++) {
            int r = item_eq(c, cont->u.seq.items[i], item);
            if (r) return r;
        }
        return 0;
    case VT_DICT: {
        val *r = v_dict_get(c, cont, item);
        if (r == NULL) return v_failed(c) ? -1 : 0;
        return 1;
    }
    case VT_SET:
        return v_set_contains(c, cont, item);
    case VT_RANGE:
        return vrange_contains(c, cont, item);
    case VT_BIGRANGE:
        return vbr_contains(c, cont, item);
    case VT_DICT_KEYS:
        return v_contains(c, cont->u.rec.f[0], item);
    case VT_DICT_ITEMS: {
        if (v_type(item) != VT_TUPLE || item->u.seq.len != 2) return 0;
        val *v = v_dict_get(c, cont->u.rec.f[0], item->u.seq.items[0]);
        if (!v) return v_failed(c) ? -1 : 0;
        return item_eq(c, v, item->u.seq.items[1]);
    }
    case VT_DICT_VALUES: {
        val *d = cont->u.rec.f[0];
        for (size_t i = 0; i < d->u.t.len; i++) {
            int r = item_eq(c, d->u.t.entries[i].value, item);
            if (r) return r;
        }
        return 0;
    }
    default:
        break;
    }
    v_raise(c, "TypeError", "argument of type '%s' is not iterable", v_type_name(cont));
    return -1;
}

/* ---- binary and unary operators ---------------------------------------- */

static val *binop_type_error(vctx *c, vbinop op, val *a, val *b)
{
    if (op == BIN_FLOORDIV || op == BIN_MOD) {
        if (v_type(a) == VT_COMPLEX || v_type(b) == VT_COMPLEX) {
            static const char *s2[] = {"+", "-", "*", "/", "//", "%", "**"};
            return v_raise(c, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'",
                           s2[op], v_type_name(a), v_type_name(b));
        }
    }
    static const char *sym[] = {"+", "-", "*", "/", "//", "%", "** or pow()"};
    if (op == BIN_ADD && v_type(a) == VT_STR)
        return v_raise(c, "TypeError", "can only concatenate str (not \"%s\") to str",
                       v_type_name(b));
    if (op == BIN_ADD && (v_type(a) == VT_LIST || v_type(a) == VT_TUPLE))
        return v_raise(c, "TypeError", "can only concatenate %s (not \"%s\") to %s", v_type_name(a),
                       v_type_name(b), v_type_name(a));
    if (op == BIN_MUL && (v_type(a) == VT_STR || v_type(a) == VT_LIST || v_type(a) == VT_TUPLE ||
                          v_type(a) == VT_BYTES || v_type(b) == VT_STR || v_type(b) == VT_LIST ||
                          v_type(b) == VT_TUPLE || v_type(b) == VT_BYTES))
        return v_raise(c, "TypeError", "can't multiply sequence by non-int of type '%s'",
                       v_type_name((v_type(a) == VT_STR || v_type(a) == VT_LIST ||
                                    v_type(a) == VT_TUPLE || v_type(a) == VT_BYTES)
                                       ? b
                                       : a));
    return v_raise(c, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'", sym[op],
                   v_type_name(a), v_type_name(b));
}

static val *seq_times(vctx *c, val *seq, val *n)
{
    int64_t k;
    if (!v_as_i64(n, &k)) {
        v_raise(c, "OverflowError", "cannot fit 'int' into an index-sized integer");
        return NULL;
    }
    if (v_type(seq) == VT_STR) return vs_repeat(c, seq, k);
    if (v_type(seq) == VT_BYTES) {
        if (k <= 0 || seq->u.s.blen == 0) return v_bytes(c, "", 0);
        if ((uint64_t)k > c->lim.max_str_bytes / seq->u.s.blen) return v_limit(c, "memory");
        size_t n = seq->u.s.blen * (size_t)k;
        char *p;
        val *v = vs_alloc(c, VT_BYTES, n, &p);
        if (!v) return NULL;
        vs_fill_repeat(p, seq->u.s.s, seq->u.s.blen, n);
        return v;
    }
    return vseq_repeat(c, seq, k);
}

val *v_binop(vctx *c, vbinop op, val *a, val *b)
{
    bool ai = v_is_intlike(a), bi = v_is_intlike(b);
    if (ai && bi) return vi_binop(c, op, a, b);
    if ((v_type(a) == VT_COMPLEX && (v_is_number(b) || v_type(b) == VT_COMPLEX)) ||
        (v_type(b) == VT_COMPLEX && v_is_number(a))) {
        if (op == BIN_FLOORDIV || op == BIN_MOD) return binop_type_error(c, op, a, b);
        return vc_binop(c, op, a, b);
    }
    if ((ai || v_type(a) == VT_FLOAT) && (bi || v_type(b) == VT_FLOAT)) {
        double x, y;
        int err = 0;
        if (v_type(a) == VT_FLOAT)
            x = a->u.f;
        else {
            x = vi_to_double(c, a, &err);
            if (err) return NULL;
        }
        if (v_type(b) == VT_FLOAT)
            y = b->u.f;
        else {
            y = vi_to_double(c, b, &err);
            if (err) return NULL;
        }
        return vf_binop(c, op, x, y);
    }
    switch (op) {
    case BIN_ADD:
        if (v_type(a) == v_type(b)) {
            if (v_type(a) == VT_STR) return vs_concat(c, a, b);
            if (v_type(a) == VT_LIST || v_type(a) == VT_TUPLE) return vseq_concat(c, a, b);
            if (v_type(a) == VT_BYTES) {
                char *p;
                val *v = vs_alloc(c, VT_BYTES, (size_t)a->u.s.blen + b->u.s.blen, &p);
                if (!v) return NULL;
                memcpy(p, a->u.s.s, a->u.s.blen);
                memcpy(p + a->u.s.blen, b->u.s.s, b->u.s.blen);
                return v;
            }
        }
        break;
    case BIN_MUL:
        if (bi && (v_type(a) == VT_STR || v_type(a) == VT_LIST || v_type(a) == VT_TUPLE ||
                   v_type(a) == VT_BYTES))
            return seq_times(c, a, b);
        if (ai && (v_type(b) == VT_STR || v_type(b) == VT_LIST || v_type(b) == VT_TUPLE ||
                   v_type(b) == VT_BYTES))
            return seq_times(c, b, a);
        break;
    case BIN_MOD:
        if (v_type(a) == VT_STR) return vfmt_percent(c, a, b);
        if (v_type(a) == VT_BYTES) return vby_percent(c, a, b);
        break;
    case BIN_SUB:
        if (v_type(a) == VT_SET && v_type(b) == VT_SET) {
            val *args[1] = {b};
            bool f;
            return vcont_method(c, a, "difference", args, 1, NULL, 0, &f);
        }
        break;
    default:
        break;
    }
    return binop_type_error(c, op, a, b);
}

val *v_unop(vctx *c, vunop op, val *a)
{
    if (op == UN_NOT) return v_bool(!v_truthy(a));
    if (v_type(a) == VT_COMPLEX) return op == UN_NEG ? v_complex(c, -a->u.cx.re, -a->u.cx.im) : a;
    if (v_type(a) == VT_FLOAT) return v_float(c, op == UN_NEG ? -a->u.f : a->u.f);
    if (v_is_intlike(a)) {
        if (op == UN_POS) return v_type(a) == VT_BOOL ? v_int64(c, a->u.b) : a;
        if (v_is_tagged(a)) return op == UN_NEG ? v_int64(c, -v_untag(a)) : a;
        return vi_binop(c, BIN_SUB, v_tag(0), a);
    }
    return v_raise(c, "TypeError", "bad operand type for unary %s: '%s'", op == UN_NEG ? "-" : "+",
                   v_type_name(a));
}

/* ---- iteration ---------------------------------------------------------- */

int v_iter_init(vctx *c, val *v, viter *it)
{
    memset(it, 0, sizeof *it);
    if (v_dict_force(c, v)) return -1;
    it->src = v;
    switch (v_type(v)) {
    case VT_STR:
    case VT_BYTES:
    case VT_TUPLE:
    case VT_LIST:
    case VT_DICT:
    case VT_SET:
        return 0;
    case VT_RANGE:
        it->cur = v->u.r.start;
        return 0;
    case VT_BIGRANGE:
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS:
        return 0;
    default:
        break;
    }
    v_raise(c, "TypeError", "'%s' object is not iterable", v_type_name(v));
    return -1;
}

val *v_iter_next(vctx *c, viter *it)
{
    val *v = it->src;
    switch (v_type(v)) {
    case VT_TUPLE:
    case VT_LIST:
        if (it->i >= v->u.seq.len) return NULL;
        return v->u.seq.items[it->i++];
    case VT_DICT:
        if (it->i >= v->u.t.len) return NULL;
        return v->u.t.entries[it->i++].key;
    case VT_SET:
        while (it->i <= v->u.t.mask && v->u.t.sentries) {
            vsentry *e = &v->u.t.sentries[it->i++];
            if (e->key && e->key != &v_dummy_key) return e->key;
        }
        return NULL;
    case VT_RANGE:
        if ((int64_t)it->n >= v->u.r.len) return NULL;
        it->n++;
        {
            int64_t x = it->cur;
            it->cur += v->u.r.step;
            return v_int64(c, x);
        }
    case VT_BIGRANGE:
        return vbr_next(c, it);
    case VT_STR: {
        if (it->i >= v->u.s.blen) return NULL;
        size_t adv = 1;
        if (!(v->flags & VF_ASCII)) {
            vs_decode1(v->u.s.s + it->i, v->u.s.blen - it->i, &adv);
        }
        val *r = vs_char(c, v->u.s.s + it->i, adv);
        it->i += adv;
        return r;
    }
    case VT_BYTES:
        if (it->i >= v->u.s.blen) return NULL;
        return v_int64(c, (unsigned char)v->u.s.s[it->i++]);
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS: {
        val *d = v->u.rec.f[0];
        if (it->i >= d->u.t.len) return NULL;
        ventry *e = &d->u.t.entries[it->i++];
        if (v_type(v) == VT_DICT_KEYS) return e->key;
        if (v_type(v) == VT_DICT_VALUES) return e->value;
        val *kv[2] = {e->key, e->value};
        return v_tuple(c, kv, 2);
    }
    default:
        return NULL;
    }
}

int v_iter_collect(vctx *c, val *v, val ***items, size_t *n)
{
    if (v_type(v) == VT_LIST || v_type(v) == VT_TUPLE) {
        val **arr = v_items_alloc_filled(c, v->u.seq.len);
        if (!arr) return -1;
        if (v->u.seq.len) memcpy(arr, v->u.seq.items, v->u.seq.len * sizeof *arr);
        *items = arr;
        *n = v->u.seq.len;
        return 0;
    }
    viter it;
    if (v_iter_init(c, v, &it)) return -1;
    size_t cap;
    switch (v_type(v)) {
    case VT_STR:
        cap = v->u.s.clen;
        break;
    case VT_BYTES:
        cap = v->u.s.blen;
        break;
    case VT_DICT:
        cap = vd_len(v);
        break;
    case VT_SET:
        cap = v->u.t.len;
        break;
    case VT_RANGE:
        cap = (size_t)v->u.r.len;
        break;
    case VT_BIGRANGE: {
        int64_t n = vbr_len(c, v);
        if (n < 0) return -1;
        cap = (size_t)n;
        break;
    }
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS:
        cap = v->u.rec.f[0]->u.t.len;
        break;
    default:
        cap = 8;
    }
    if (v_check_items(c, cap)) return -1;
    if (v_steps(c, cap / 8)) return -1;
    val **arr = v_items_alloc(c, cap);
    if (!arr) return -1;
    size_t k = 0;
    val *x;
    while ((x = v_iter_next(c, &it)) != NULL)
        arr[k++] = x;
    if (v_failed(c)) return -1;
    *items = arr;
    *n = k;
    return 0;
}

/* ---- subscript, attributes, calls ------------------------------------ */

val *v_getitem(vctx *c, val *obj, val *key)
{
    switch (v_type(obj)) {
    case VT_STR:
        return vs_getitem(c, obj, key);
    case VT_BYTES:
        return vby_getitem(c, obj, key);
    case VT_TUPLE:
    case VT_LIST:
        return vseq_getitem(c, obj, key);
    case VT_RANGE:
        return vrange_getitem(c, obj, key);
    case VT_BIGRANGE:
        return vbr_getitem(c, obj, key);
    case VT_DICT: {
        val *r = v_dict_get(c, obj, key);
        if (r) return r;
        if (v_failed(c)) return NULL;
        strbuf b;
        strbuf_init(&b);
        if (v_repr_buf(c, &b, key) == 0) v_raise(c, "KeyError", "%s", b.data ? b.data : "");
        strbuf_free(&b);
        return NULL;
    }
    default:
        break;
    }
    return v_raise(c, "TypeError", "'%s' object is not subscriptable", v_type_name(obj));
}

val *v_getattr(vctx *c, val *obj, const char *name)
{
    bool found = false;
    val *r = NULL;
    if (v_type(obj) == VT_SESSION || v_type(obj) == VT_EVENT)
        r = vsess_getattr(c, obj, name, &found);
    else if (v_type(obj) >= VT_SCORE && v_type(obj) <= VT_CONDRESULT)
        r = vr_getattr(c, obj, name, &found);
    if (found) return r;
    if (v_type(obj) == VT_BUILTIN && vb_is_class(obj->u.bi.id))
        return v_raise(c, "AttributeError", "type object '%s' has no attribute '%s'",
                       vb_name(obj->u.bi.id), name);
    return v_raise(c, "AttributeError", "'%s' object has no attribute '%s'", v_type_name(obj),
                   name);
}

static vtype class_vtype(int id)
{
    switch (id) {
    case BI_STR:
        return VT_STR;
    case BI_DICT:
        return VT_DICT;
    case BI_SET:
        return VT_SET;
    case BI_LIST:
        return VT_LIST;
    case BI_TUPLE:
        return VT_TUPLE;
    case BI_FLOAT:
        return VT_FLOAT;
    case BI_RANGE:
        return VT_RANGE;
    default:
        return VT_NONE;
    }
}

static bool in_list(const char *name, const char *list)
{
    /* list: space-separated names, with a leading and trailing space */
    size_t n = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if (p[-1] == ' ' && p[n] == ' ') return true;
    return false;
}

int v_check_method(vctx *c, val *obj, const char *name)
{
    static const char *str_m = " count lower upper strip lstrip rstrip split rsplit splitlines "
                               "startswith endswith replace find rfind "
                               "index join title capitalize casefold swapcase isdigit isalpha "
                               "isalnum isspace isnumeric isdecimal "
                               "islower isupper istitle zfill ljust rjust center partition "
                               "rpartition removeprefix removesuffix encode ";
    static const char *bytes_m =
        " count lower upper strip lstrip rstrip split rsplit splitlines startswith endswith "
        "replace find rfind "
        "index join title capitalize swapcase isdigit isalpha isalnum isspace islower isupper "
        "istitle zfill ljust "
        "rjust center partition rpartition removeprefix removesuffix decode hex ";
    static const char *set_m =
        " union intersection difference symmetric_difference issubset issuperset isdisjoint ";
    const char *list = NULL;
    switch (v_type(obj)) {
    case VT_STR:
        list = str_m;
        break;
    case VT_BYTES:
        list = bytes_m;
        break;
    case VT_LIST:
    case VT_TUPLE:
    case VT_RANGE:
    case VT_BIGRANGE:
        list = " count index ";
        break;
    case VT_DICT:
        list = " get keys values items ";
        break;
    case VT_SET:
        list = set_m;
        break;
    case VT_DICT_KEYS:
    case VT_DICT_ITEMS:
        list = " isdisjoint ";
        break;
    case VT_FLOAT:
        list = " hex ";
        break;
    case VT_SESSION:
        list = " events_of_type count events event_count assignment_id session_id "
               "session_revision_id agent_id "
               "environment started_at ended_at schema_version ";
        break;
    case VT_EVENT:
        list = " id ts event_type payload ";
        break;
    case VT_SCORE:
        list = " value passed unit display_value description ";
        break;
    case VT_METRIC:
        list = " value unit display_value description ";
        break;
    case VT_ASSERTION:
        list = " passed description ";
        break;
    case VT_EVALRESULT:
        list = " score metrics assertions reasoning summary labels ";
        break;
    case VT_CONDRESULT:
        list = " applicable reason_code ";
        break;
    default:
        break;
    }
    if (v_type(obj) == VT_BUILTIN) {
        /* unbound methods of builtin classes: str.lower('X'), dict.get(d, k) */
        val probe = {.ty = (uint8_t)class_vtype(obj->u.bi.id)};
        if (probe.ty != VT_NONE && v_check_method(c, &probe, name) == 0) return 0;
        v_exc_clear(c);
    }
    if (list && in_list(name, list)) return 0;
    if (v_type(obj) == VT_BUILTIN && vb_is_class(obj->u.bi.id))
        v_raise(c, "AttributeError", "type object '%s' has no attribute '%s'",
                vb_name(obj->u.bi.id), name);
    else
        v_raise(c, "AttributeError", "'%s' object has no attribute '%s'", v_type_name(obj), name);
    return -1;
}

val *v_call_method(vctx *c, val *obj, const char *name, val **args, size_t nargs, const vkwarg *kw,
                   size_t nkw)
{
    bool found = false;
    val *r = NULL;
    switch (v_type(obj)) {
    case VT_STR:
        r = vs_method(c, obj, name, args, nargs, kw, nkw, &found);
        break;
    case VT_BYTES:
        r = vby_method(c, obj, name, args, nargs, kw, nkw, &found);
        break;
    case VT_FLOAT:
        r = vf_method(c, obj, name, args, nargs, kw, nkw, &found);
        break;
    case VT_TUPLE:
    case VT_LIST:
    case VT_DICT:
    case VT_SET:
    case VT_RANGE:
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS:
        r = vcont_method(c, obj, name, args, nargs, kw, nkw, &found);
        break;
    case VT_SESSION:
        r = vsess_method(c, obj, name, args, nargs, kw, nkw, &found);
        break;
    case VT_BIGRANGE:
        r = vbr_method(c, obj, name, args, nargs, kw, nkw, &found);
        break;
    case VT_BUILTIN:
        if (vb_is_class(obj->u.bi.id)) {
            vtype t = class_vtype(obj->u.bi.id);
            val probe = {.ty = (uint8_t)t};
            if (t != VT_NONE && v_check_method(c, &probe, name) == 0) {
                const char *cn = vb_name(obj->u.bi.id);
                if (nargs == 0)
                    return v_raise(c, "TypeError", "unbound method %s.%s() needs an argument", cn,
                                   name);
                if (v_type(args[0]) != t && !(t == VT_RANGE && v_type(args[0]) == VT_BIGRANGE))
                    return v_raise(
                        c, "TypeError",
                        "descriptor '%s' for '%s' objects doesn't apply to a '%s' object", name, cn,
                        v_type_name(args[0]));
                return v_call_method(c, args[0], name, args + 1, nargs - 1, kw, nkw);
            }
            v_exc_clear(c);
            return v_raise(c, "AttributeError", "type object '%s' has no attribute '%s'",
                           vb_name(obj->u.bi.id), name);
        }
        break;
    default:
        break;
    }
    if (found) return r;
    if (v_type(obj) == VT_SESSION || v_type(obj) == VT_EVENT ||
        (v_type(obj) >= VT_SCORE && v_type(obj) <= VT_CONDRESULT)) {
        /* data attributes exist but are not callable */
        bool f2 = false;
        val *a = v_type(obj) >= VT_SCORE ? vr_getattr(c, obj, name, &f2)
                                         : vsess_getattr(c, obj, name, &f2);
        if (f2 && a) return v_raise(c, "TypeError", "'%s' object is not callable", v_type_name(a));
        if (v_failed(c)) return NULL;
    }
    return v_raise(c, "AttributeError", "'%s' object has no attribute '%s'", v_type_name(obj),
                   name);
}

val *v_call(vctx *c, val *callee, val **args, size_t nargs, const vkwarg *kw, size_t nkw)
{
    if (v_type(callee) != VT_BUILTIN)
        return v_raise(c, "TypeError", "'%s' object is not callable", v_type_name(callee));
    int id = callee->u.bi.id;
    if (id >= BI_SCORE && id <= BI_CONDRESULT) return vr_construct(c, id, args, nargs, kw, nkw);
    return vb_call(c, id, args, nargs, kw, nkw);
}

val *v_call_builtin_1(vctx *c, val *fn, val *arg)
{
    val *a[1] = {arg};
    return v_call(c, fn, a, 1, NULL, 0);
}

val *v_session(vctx *c)
{
    if (c->img == NULL) return NULL;
    if (c->session == NULL) {
        val *s = v_new(c, VT_SESSION);
        if (!s) return NULL;
        s->u.sess.img = c->img;
        s->u.sess.len = c->img_len;
        c->session = s;
    }
    return c->session;
}

/* ---- argument parsing ------------------------------------------------ */

int v_parse_args(vctx *c, const char *fname, val **args, size_t nargs, const vkwarg *kw, size_t nkw,
                 const char *const *names, size_t nnames, size_t npos_only, size_t nrequired,
                 val **out)
{
    for (size_t i = 0; i < nnames; i++)
        out[i] = NULL;
    if (nargs > nnames) {
        if (nnames == 0)
            v_raise(c, "TypeError", "%s() takes no arguments (%zu given)", fname, nargs);
        else if (nrequired == nnames)
            v_raise(c, "TypeError", "%s() takes exactly %zu argument%s (%zu given)", fname, nnames,
                    nnames == 1 ? "" : "s", nargs);
        else
            v_raise(c, "TypeError", "%s() takes at most %zu arguments (%zu given)", fname, nnames,
                    nargs);
        return -1;
    }
    for (size_t i = 0; i < nargs; i++)
        out[i] = args[i];
    for (size_t k = 0; k < nkw; k++) {
        size_t j;
        for (j = 0; j < nnames; j++)
            if (strcmp(names[j], kw[k].name) == 0) break;
        if (j == nnames || j < npos_only) {
            if (npos_only == nnames)
                v_raise(c, "TypeError", "%s() takes no keyword arguments", fname);
            else
                v_raise(c, "TypeError", "%s() got an unexpected keyword argument '%s'", fname,
                        kw[k].name);
            return -1;
        }
        if (out[j]) {
            v_raise(c, "TypeError", "argument for %s() given by name ('%s') and position (%zu)",
                    fname, kw[k].name, j + 1);
            return -1;
        }
        out[j] = kw[k].value;
    }
    for (size_t i = 0; i < nrequired; i++) {
        if (!out[i]) {
            if (i < npos_only)
                v_raise(c, "TypeError", "%s() takes %s %zu argument%s (%zu given)", fname,
                        nrequired == nnames ? "exactly" : "at least", nrequired,
                        nrequired == 1 ? "" : "s", nargs);
            else
                v_raise(c, "TypeError", "%s() missing required argument '%s' (pos %zu)", fname,
                        names[i], i + 1);
            return -1;
        }
    }
    return 0;
}

/* ---- text ------------------------------------------------------------- */

static int seq_repr(vctx *c, strbuf *b, val *v)
{
    bool tuple = v_type(v) == VT_TUPLE;
    strbuf_putc(b, tuple ? '(' : '[');
    for (size_t i = 0; i < v->u.seq.len; i++) {
        if (i) strbuf_put(b, ", ", 2);
        if (v_repr_buf(c, b, v->u.seq.items[i])) return -1;
    }
    if (tuple && v->u.seq.len == 1) strbuf_putc(b, ',');
    strbuf_putc(b, tuple ? ')' : ']');
    return 0;
}

int v_repr_buf(vctx *c, strbuf *b, val *v)
{
    if (b->len > c->lim.max_str_bytes) {
        v_limit(c, "memory");
        return -1;
    }
    switch (v_type(v)) {
    case VT_NONE:
        strbuf_put(b, "None", 4);
        return 0;
    case VT_BOOL:
        strbuf_puts(b, v->u.b ? "True" : "False");
        return 0;
    case VT_INT:
        return vi_repr_buf(c, b, v);
    case VT_FLOAT:
        return pyfloat_repr(b, v->u.f);
    case VT_STR:
        return vs_repr_buf(b, v);
    case VT_BYTES:
        return vby_repr_buf(b, v);
    case VT_COMPLEX:
        return vc_repr_buf(b, v);
    case VT_ELLIPSIS:
        strbuf_puts(b, "Ellipsis");
        return 0;
    default:
        break;
    }
    if (++c->depth > 800) {
        c->depth--;
        v_raise(c, "RecursionError",
                "maximum recursion depth exceeded while getting the repr of an object");
        return -1;
    }
    int rc = 0;
    switch (v_type(v)) {
    case VT_TUPLE:
    case VT_LIST:
        rc = seq_repr(c, b, v);
        break;
    case VT_DICT:
        if (v_dict_force(c, v)) {
            rc = -1;
            break;
        }
        strbuf_putc(b, '{');
        for (size_t i = 0; i < v->u.t.len && rc == 0; i++) {
            if (i) strbuf_put(b, ", ", 2);
            rc = v_repr_buf(c, b, v->u.t.entries[i].key);
            if (rc == 0) {
                strbuf_put(b, ": ", 2);
                rc = v_repr_buf(c, b, v->u.t.entries[i].value);
            }
        }
        strbuf_putc(b, '}');
        break;
    case VT_SET:
        if (v->u.t.len == 0) {
            strbuf_puts(b, "set()");
            break;
        }
        strbuf_putc(b, '{');
        {
            bool first = true;
            vsentry *e;
            for (size_t i = 0; rc == 0 && (e = vset_next(v, &i)) != NULL;) {
                if (!first) strbuf_put(b, ", ", 2);
                first = false;
                rc = v_repr_buf(c, b, e->key);
            }
        }
        strbuf_putc(b, '}');
        break;
    case VT_BIGRANGE:
        rc = vbr_repr_buf(c, b, v);
        break;
    case VT_RANGE:
        if (v->u.r.step == 1)
            strbuf_printf(b, "range(%ld, %ld)", (long)v->u.r.start, (long)v->u.r.stop);
        else
            strbuf_printf(b, "range(%ld, %ld, %ld)", (long)v->u.r.start, (long)v->u.r.stop,
                          (long)v->u.r.step);
        break;
    case VT_SLICE: {
        val *p[3] = {v->u.sl.lo, v->u.sl.hi, v->u.sl.step};
        strbuf_puts(b, "slice(");
        for (int i = 0; i < 3 && rc == 0; i++) {
            if (i) strbuf_put(b, ", ", 2);
            rc = v_repr_buf(c, b, p[i] ? p[i] : v_none());
        }
        strbuf_putc(b, ')');
        break;
    }
    case VT_SESSION:
    case VT_EVENT:
        rc = vsess_repr_buf(c, b, v);
        break;
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS: {
        strbuf_puts(b, v_type_name(v));
        strbuf_put(b, "([", 2);
        val *d = v->u.rec.f[0];
        for (size_t i = 0; i < d->u.t.len && rc == 0; i++) {
            if (i) strbuf_put(b, ", ", 2);
            ventry *e = &d->u.t.entries[i];
            if (v_type(v) == VT_DICT_KEYS)
                rc = v_repr_buf(c, b, e->key);
            else if (v_type(v) == VT_DICT_VALUES)
                rc = v_repr_buf(c, b, e->value);
            else {
                strbuf_putc(b, '(');
                rc = v_repr_buf(c, b, e->key);
                strbuf_put(b, ", ", 2);
                if (rc == 0) rc = v_repr_buf(c, b, e->value);
                strbuf_putc(b, ')');
            }
        }
        strbuf_put(b, "])", 2);
        break;
    }
    case VT_BUILTIN:
        if (v->u.bi.id >= BI_SCORE && v->u.bi.id <= BI_CONDRESULT)
            strbuf_printf(b, "<class 'failproofai_sdk.evaluator.authoring.%s'>",
                          vb_name(v->u.bi.id));
        else if (vb_is_class(v->u.bi.id))
            strbuf_printf(b, "<class '%s'>", vb_name(v->u.bi.id));
        else
            strbuf_printf(b, "<built-in function %s>", vb_name(v->u.bi.id));
        break;
    default:
        rc = vr_repr_buf(c, b, v);
        break;
    }
    c->depth--;
    return rc;
}

static val *buf_to_str(vctx *c, strbuf *b, int rc)
{
    val *r = NULL;
    if (rc == 0) r = v_str(c, b->data ? b->data : "", b->len);
    strbuf_free(b);
    return r;
}

val *v_repr(vctx *c, val *v)
{
    int64_t x;
    if (v_type(v) == VT_INT && v_as_i64(v, &x)) return vs_from_i64(c, x);
    strbuf b;
    strbuf_init(&b);
    return buf_to_str(c, &b, v_repr_buf(c, &b, v));
}

val *v_tostr(vctx *c, val *v)
{
    if (v_type(v) == VT_STR) return v;
    return v_repr(c, v);
}

val *v_ascii(vctx *c, val *v)
{
    val *r = v_repr(c, v);
    if (!r || (r->flags & VF_ASCII)) return r;
    /* escape every non-ASCII code point as \xhh, \uhhhh or \Uhhhhhhhh */
    strbuf b;
    strbuf_init(&b);
    size_t i = 0;
    while (i < r->u.s.blen) {
        size_t adv;
        int32_t cp = vs_decode1(r->u.s.s + i, r->u.s.blen - i, &adv);
        if (cp < 128)
            strbuf_putc(&b, (char)cp);
        else if (cp < 256)
            strbuf_printf(&b, "\\x%02x", cp);
        else if (cp < 0x10000)
            strbuf_printf(&b, "\\u%04x", cp);
        else
            strbuf_printf(&b, "\\U%08x", cp);
        i += adv;
    }
    return buf_to_str(c, &b, 0);
}

val *v_format(vctx *c, val *v, val *spec)
{
    if (spec == NULL) return vfmt_format(c, v, "", 0);
    if (v_type(spec) != VT_STR)
        return v_raise(c, "TypeError", "format() argument 2 must be str, not %s",
                       v_type_name(spec));
    return vfmt_format(c, v, spec->u.s.s, spec->u.s.blen);
}
