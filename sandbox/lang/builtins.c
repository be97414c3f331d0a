/* sandbox/lang/builtins: the builtin functions and classes of the language
 * (abs all any bool dict float int len list max min range round set sorted
 * str sum tuple) with CPython 3.11's positional/keyword rules, results and
 * exception types; a stable merge sort shared by sorted(); global lookup. */
#include "sandbox/lang/value_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const g_names[BI__COUNT] = {
    "bool",  "dict",  "float",  "int",       "list",       "range",           "set", "str",
    "tuple", "Score", "Metric", "Assertion", "EvalResult", "ConditionResult", "abs", "all",
    "any",   "len",   "max",    "min",       "round",      "sorted",          "sum",
};

static val g_builtins[BI__COUNT];

const char *vb_name(int id)
{
    return id >= 0 && id < BI__COUNT ? g_names[id] : "?";
}
bool vb_is_class(int id)
{
    return id <= BI_CONDRESULT;
}

val *v_builtin_lookup(const char *name)
{
    for (int i = 0; i < BI__COUNT; i++) {
        if (strcmp(g_names[i], name) == 0) {
            g_builtins[i].ty = VT_BUILTIN;
            g_builtins[i].u.bi.id = i;
            return &g_builtins[i];
        }
    }
    return NULL;
}

/* ---- sorting ------------------------------------------------------------ */

static inline int lt(vctx *c, val *a, val *b)
{
    if (v_is_tagged(a) && v_is_tagged(b)) return v_tagged_compare(CMP_LT, a, b);
    if (v_type(a) == VT_STR && v_type(b) == VT_STR) return vs_cmp(a, b) < 0;
    if (v_type(a) == VT_FLOAT && v_type(b) == VT_FLOAT) return a->u.f < b->u.f;
    return v_compare(c, CMP_LT, a, b);
}

/* Stable merge sort of keys[0..n) carrying vals (NULL: the keys are the
 * items) along; the merge copies only the left half out, so the extra
 * memory is n/2 slots per array (CPython's timsort needs as much). On an
 * error the order is unspecified (callers sort a fresh copy). */
static int msort(vctx *c, val **k, val **v, size_t n, val **tk, val **tv)
{
    if (n < 2) return 0;
    if (n <= 12) {
        for (size_t i = 1; i < n; i++) {
            val *xk = k[i], *xv = v ? v[i] : NULL;
            size_t j = i;
            while (j > 0) {
                int r = lt(c, xk, k[j - 1]);
                if (r < 0) return -1;
                if (!r) break;
                k[j] = k[j - 1];
                if (v) v[j] = v[j - 1];
                j--;
            }
            k[j] = xk;
            if (v) v[j] = xv;
        }
        return 0;
    }
    size_t h = n / 2;
    if (msort(c, k, v, h, tk, tv) || msort(c, k + h, v ? v + h : NULL, n - h, tk, tv)) return -1;
    int r = lt(c, k[h], k[h - 1]);
    if (r <= 0) return r; /* already in order (or an error) */
    memcpy(tk, k, h * sizeof *k);
    if (v) memcpy(tv, v, h * sizeof *v);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        r = lt(c, k[j], tk[i]);
        if (r < 0) return -1;
        if (r) {
            if (v) v[o] = v[j];
            k[o++] = k[j++];
        } else {
            if (v) v[o] = tv[i];
            k[o++] = tk[i++];
        }
    }
    while (i < h) {
        if (v) v[o] = tv[i];
        k[o++] = tk[i++];
    }
    return 0;
}

static void reverse_items(val **items, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        val *t = items[i];
        items[i] = items[n - 1 - i];
        items[n - 1 - i] = t;
    }
}

int v_sort(vctx *c, val **items, size_t n, val *key, bool reverse)
{
    if (n < 2) return 0;
    if (v_steps(c, n)) return -1;
    /* reverse=True keeps equal items in their original order: reverse,
     * sort stably, reverse back (as CPython's list.sort) */
    if (reverse) reverse_items(items, n);
    val **keys = items, **vals = NULL, **tv = NULL;
    if (key) {
        keys = v_items_alloc(c, n);
        tv = v_items_alloc(c, n / 2 + 1);
        if (!keys || !tv) return -1;
        for (size_t i = 0; i < n; i++) {
            keys[i] = v_call_builtin_1(c, key, items[i]);
            if (!keys[i]) return -1;
        }
        vals = items;
    }
    val **tk = v_items_alloc(c, n / 2 + 1);
    if (!tk || msort(c, keys, vals, n, tk, tv)) return -1;
    if (reverse) reverse_items(items, n);
    return 0;
}

/* ---- helpers ---------------------------------------------------------- */

static val *no_kw(vctx *c, const char *fname, size_t nkw)
{
    if (nkw) return v_raise(c, "TypeError", "%s() takes no keyword arguments", fname);
    return v_none();
}

static val *b_abs(vctx *c, val *x)
{
    if (v_type(x) == VT_COMPLEX) return vc_abs(c, x);
    if (v_type(x) == VT_FLOAT) return v_float(c, fabs(x->u.f));
    if (v_is_intlike(x)) {
        if (vi_sign(x) >= 0) return v_type(x) == VT_BOOL ? v_int64(c, x->u.b) : x;
        return v_unop(c, UN_NEG, x);
    }
    return v_raise(c, "TypeError", "bad operand type for abs(): '%s'", v_type_name(x));
}

static val *b_allany(vctx *c, val *x, bool all)
{
    viter it;
    if (v_iter_init(c, x, &it)) return NULL;
    val *v;
    while ((v = v_iter_next(c, &it)) != NULL) {
        if (v_step(c)) return NULL;
        if (v_truthy(v) != all) return v_bool(!all);
    }
    if (v_failed(c)) return NULL;
    return v_bool(all);
}

static val *b_dict(vctx *c, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    if (na > 1) return v_raise(c, "TypeError", "dict expected at most 1 argument, got %zu", na);
    size_t hint = nkw;
    if (na == 1 && (v_type(a[0]) == VT_DICT)) {
        if (v_dict_force(c, a[0])) return NULL;
        hint += a[0]->u.t.len;
    }
    val *d = v_dict_new(c, hint);
    if (!d) return NULL;
    if (na == 1) {
        val *src = a[0];
        if (v_type(src) == VT_DICT) {
            for (size_t i = 0; i < src->u.t.len; i++)
                if (v_dict_set(c, d, src->u.t.entries[i].key, src->u.t.entries[i].value))
                    return NULL;
        } else {
            viter it;
            if (v_iter_init(c, src, &it)) return NULL;
            val *e;
            size_t k = 0;
            while ((e = v_iter_next(c, &it)) != NULL) {
                val **items;
                size_t n;
                if (v_type(e) != VT_TUPLE && v_type(e) != VT_LIST && v_type(e) != VT_STR &&
                    v_type(e) != VT_DICT && v_type(e) != VT_SET && v_type(e) != VT_RANGE &&
                    v_type(e) != VT_BYTES && v_type(e) != VT_DICT_KEYS &&
                    v_type(e) != VT_DICT_VALUES && v_type(e) != VT_DICT_ITEMS)
                    return v_raise(
                        c, "TypeError",
                        "cannot convert dictionary update sequence element #%zu to a sequence", k);
                if (v_iter_collect(c, e, &items, &n)) return NULL;
                if (n != 2)
                    return v_raise(
                        c, "ValueError",
                        "dictionary update sequence element #%zu has length %zu; 2 is required", k,
                        n);
                if (v_dict_set(c, d, items[0], items[1])) return NULL;
                k++;
            }
            if (v_failed(c)) return NULL;
        }
    }
    for (size_t i = 0; i < nkw; i++) {
        val *k = v_strz(c, kw[i].name);
        if (!k || v_dict_set(c, d, k, kw[i].value)) return NULL;
    }
    return d;
}

static val *b_float(vctx *c, val *x)
{
    if (!x) return v_float(c, 0.0);
    switch (v_type(x)) {
    case VT_FLOAT:
        return x;
    case VT_INT:
    case VT_BOOL: {
        int err;
        double d = vi_to_double(c, x, &err);
        return err ? NULL : v_float(c, d);
    }
    case VT_STR:
        return vf_parse(c, x->u.s.s, x->u.s.blen);
    case VT_BYTES: {
        val *s = v_str(c, x->u.s.s, x->u.s.blen);
        return s ? vf_parse(c, s->u.s.s, s->u.s.blen) : NULL;
    }
    default:
        break;
    }
    return v_raise(c, "TypeError", "float() argument must be a string or a real number, not '%s'",
                   v_type_name(x));
}

static val *b_int(vctx *c, val *x, val *base)
{
    if (!x) {
        if (base) return v_raise(c, "TypeError", "int() missing string argument");
        return v_int64(c, 0);
    }
    if (base) {
        int64_t b;
        if (!v_is_intlike(base))
            return v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer",
                           v_type_name(base));
        if (!v_as_i64(base, &b) || (b != 0 && (b < 2 || b > 36)))
            return v_raise(c, "ValueError", "int() base must be >= 2 and <= 36, or 0");
        if (v_type(x) != VT_STR && v_type(x) != VT_BYTES)
            return v_raise(c, "TypeError", "int() can't convert non-string with explicit base");
        return vi_parse(c, x->u.s.s, x->u.s.blen, (int)b, false);
    }
    switch (v_type(x)) {
    case VT_INT:
        return x;
    case VT_BOOL:
        return v_int64(c, x->u.b);
    case VT_FLOAT:
        return vi_from_double(c, x->u.f);
    case VT_STR:
    case VT_BYTES:
        return vi_parse(c, x->u.s.s, x->u.s.blen, 10, false);
    default:
        break;
    }
    return v_raise(
        c, "TypeError",
        "int() argument must be a string, a bytes-like object or a real number, not '%s'",
        v_type_name(x));
}

static val *b_minmax(vctx *c, bool is_max, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    const char *fname = is_max ? "max" : "min";
    val *key = NULL, *dflt = NULL;
    for (size_t i = 0; i < nkw; i++) {
        if (!strcmp(kw[i].name, "key"))
            key = kw[i].value;
        else if (!strcmp(kw[i].name, "default"))
            dflt = kw[i].value;
        else
            return v_raise(c, "TypeError", "%s() got an unexpected keyword argument '%s'", fname,
                           kw[i].name);
    }
    if (key && v_type(key) == VT_NONE) key = NULL;
    if (na == 0) return v_raise(c, "TypeError", "%s expected at least 1 argument, got 0", fname);
    if (na > 1 && dflt)
        return v_raise(c, "TypeError",
                       "Cannot specify a default for %s() with multiple positional arguments",
                       fname);
    /* One iterable is consumed lazily, as CPython does: max(range(10**9))
     * holds two items at a time, never a list. */
    viter it;
    size_t i = 0;
    if (na == 1 && v_iter_init(c, a[0], &it)) return NULL;
    val *best = NULL, *bestk = NULL;
    for (;;) {
        val *x = na == 1 ? v_iter_next(c, &it) : i < na ? a[i] : NULL;
        i++;
        if (!x) break;
        if (v_step(c)) return NULL;
        val *k = key ? v_call_builtin_1(c, key, x) : x;
        if (!k) return NULL;
        if (!best) {
            best = x;
            bestk = k;
            continue;
        }
        vcmpop op = is_max ? CMP_GT : CMP_LT;
        int r = v_is_tagged(k) && v_is_tagged(bestk) ? v_tagged_compare(op, k, bestk)
                                                     : v_compare(c, op, k, bestk);
        if (r < 0) return NULL;
        if (r) {
            best = x;
            bestk = k;
        }
    }
    if (v_failed(c)) return NULL;
    if (!best) {
        if (dflt) return dflt;
        return v_raise(c, "ValueError", "%s() arg is an empty sequence", fname);
    }
    return best;
}

/* 0 ok, 1 does not fit int64 (a big range), -1 error */
static int range_arg(vctx *c, val *v, int64_t *out)
{
    if (!v_is_intlike(v)) {
        v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer", v_type_name(v));
        return -1;
    }
    if (!v_as_i64(v, out)) return 1;
    return 0;
}

static val *b_range(vctx *c, val **a, size_t na, size_t nkw)
{
    if (nkw) return v_raise(c, "TypeError", "range() takes no keyword arguments");
    if (na == 0) return v_raise(c, "TypeError", "range expected at least 1 argument, got 0");
    if (na > 3) return v_raise(c, "TypeError", "range expected at most 3 arguments, got %zu", na);
    int64_t start = 0, stop, step = 1;
    int big = 0, r;
    if (na == 1) {
        if ((r = range_arg(c, a[0], &stop)) < 0) return NULL;
        big |= r;
    } else {
        if ((r = range_arg(c, a[0], &start)) < 0) return NULL;
        big |= r;
        if ((r = range_arg(c, a[1], &stop)) < 0) return NULL;
        big |= r;
        if (na == 3) {
            if ((r = range_arg(c, a[2], &step)) < 0) return NULL;
            big |= r;
            if (!r && step == 0) return v_raise(c, "ValueError", "range() arg 3 must not be zero");
        }
    }
    if (big) {
        val *s0 = na == 1 ? v_int64(c, 0) : a[0], *s1 = na == 1 ? a[0] : a[1],
            *s2 = na == 3 ? a[2] : v_int64(c, 1);
        if (!s0 || !s2) return NULL;
        return vbr_new(c, s0, s1, s2);
    }
    return v_range(c, start, stop, step);
}

static val *b_round(vctx *c, val *x, val *nd)
{
    if (nd && v_type(nd) == VT_NONE) nd = NULL;
    if (v_type(x) == VT_FLOAT) return vf_round(c, x->u.f, nd);
    if (v_is_intlike(x)) {
        if (!nd) return v_type(x) == VT_BOOL ? v_int64(c, x->u.b) : x;
        if (!v_is_intlike(nd))
            return v_raise(c, "TypeError", "'%s' object cannot be interpreted as an integer",
                           v_type_name(nd));
        int64_t n;
        if (!v_as_i64(nd, &n)) n = vi_sign(nd) > 0 ? 1 : INT64_MIN;
        val *xi = v_type(x) == VT_BOOL ? v_int64(c, x->u.b) : x;
        if (n >= 0) return xi;
        /* CPython computes 10**-n first, whatever x is, by repeated
         * squaring: past the int cap (about 6.7e7 digits by default) it
         * runs out of time (after minutes of squaring) long before the
         * number reaches the address-space cap. */
        if ((double)n * -3.3219280948873623 > (double)c->lim.max_int_bits)
            return v_limit(c, "timeout");
        /* round half to even at 10^-n */
        mpz_t z, p, q, r;
        mpz_inits(z, p, q, r, NULL);
        vi_get_mpz(xi, z);
        mpz_ui_pow_ui(p, 10, (unsigned long)(-n));
        mpz_fdiv_qr(q, r, z, p);
        mpz_mul_2exp(r, r, 1);
        int cmp = mpz_cmp(r, p);
        if (cmp > 0 || (cmp == 0 && mpz_odd_p(q))) mpz_add_ui(q, q, 1);
        mpz_mul(q, q, p);
        val *res = v_int_mpz(c, q);
        mpz_clears(z, p, q, r, NULL);
        return res;
    }
    return v_raise(c, "TypeError", "type %s doesn't define __round__ method", v_type_name(x));
}

static val *b_sum(vctx *c, val *it, val *start)
{
    if (start && (v_type(start) == VT_STR))
        return v_raise(c, "TypeError", "sum() can't sum strings [use ''.join(seq) instead]");
    if (start && v_type(start) == VT_BYTES)
        return v_raise(c, "TypeError", "sum() can't sum bytes [use b''.join(seq) instead]");
    viter iter;
    if (v_iter_init(c, it, &iter)) return NULL;
    val *result = start ? start : v_int64(c, 0);
    /* int fast path */
    val *item = NULL;
    int64_t acc;
    if (v_type(result) == VT_INT && vi_small(result, &acc)) {
        for (;;) {
            item = v_iter_next(c, &iter);
            if (!item) {
                if (v_failed(c)) return NULL;
                return v_int64(c, acc);
            }
            if (v_step(c)) return NULL;
            int64_t x = 0, r;
            bool fits = v_type(item) == VT_INT ? vi_small(item, &x) : v_type(item) == VT_BOOL;
            if (v_type(item) == VT_BOOL) x = item->u.b;
            if (fits && !__builtin_add_overflow(acc, x, &r)) {
                acc = r;
                continue;
            }
            result = v_int64(c, acc);
            if (!result) return NULL;
            if (v_type(item) == VT_FLOAT) {
                /* switch to the float path with this item pending */
                break;
            }
            result = v_binop(c, BIN_ADD, result, item);
            if (!result) return NULL;
            item = NULL;
            goto generic;
        }
    }
    if (v_type(result) == VT_FLOAT || (item && v_type(item) == VT_FLOAT && v_is_intlike(result))) {
        double f;
        if (v_type(result) == VT_FLOAT)
            f = result->u.f;
        else {
            int err;
            f = vi_to_double(c, result, &err);
            if (err) return NULL;
        }
        for (;;) {
            if (!item) item = v_iter_next(c, &iter);
            if (!item) {
                if (v_failed(c)) return NULL;
                return v_float(c, f);
            }
            if (v_step(c)) return NULL;
            if (v_type(item) == VT_FLOAT) {
                f += item->u.f;
                item = NULL;
                continue;
            }
            int64_t x;
            if (v_is_intlike(item) && v_as_i64(item, &x)) {
                f += (double)x;
                item = NULL;
                continue;
            }
            result = v_float(c, f);
            if (!result) return NULL;
            result = v_binop(c, BIN_ADD, result, item);
            if (!result) return NULL;
            item = NULL;
            break;
        }
    }
generic:
    for (;;) {
        if (!item) item = v_iter_next(c, &iter);
        if (!item) break;
        if (v_step(c)) return NULL;
        result = v_binop(c, BIN_ADD, result, item);
        if (!result) return NULL;
        item = NULL;
    }
    if (v_failed(c)) return NULL;
    return result;
}

static val *b_str(vctx *c, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    static const char *const names[] = {"object", "encoding", "errors"};
    val *p[3];
    if (na == 1 && nkw == 0) return v_tostr(c, a[0]);
    if (v_parse_args(c, "str", a, na, kw, nkw, names, 3, 0, 0, p)) return NULL;
    if (!p[0]) return vs_empty();
    if (p[1] || p[2]) {
        if (v_type(p[0]) != VT_BYTES)
            return v_raise(c, "TypeError", "decoding to str: need a bytes-like object, %s found",
                           v_type_name(p[0]));
        val *args[2];
        size_t n = 0;
        vkwarg k2[2];
        size_t nk = 0;
        if (p[1]) k2[nk++] = (vkwarg){"encoding", p[1]};
        if (p[2]) k2[nk++] = (vkwarg){"errors", p[2]};
        (void)args;
        (void)n;
        return v_call_method(c, p[0], "decode", NULL, 0, k2, nk);
    }
    return v_tostr(c, p[0]);
}

static val *collect_seq(vctx *c, val *x, bool tuple)
{
    if (!x) return tuple ? v_tuple(c, NULL, 0) : v_list(c, NULL, 0);
    if (tuple && v_type(x) == VT_TUPLE) return x;
    val **items;
    size_t n;
    if (v_iter_collect(c, x, &items, &n)) return NULL;
    return tuple ? v_tuple_take(c, items, n) : v_list_take(c, items, n);
}

val *vb_call(vctx *c, int id, val **a, size_t na, const vkwarg *kw, size_t nkw)
{
    const char *fname = vb_name(id);
    val *p[3];
    switch ((vbuiltin_id)id) {
    case BI_ABS:
    case BI_LEN:
        if (!no_kw(c, fname, nkw)) return NULL;
        if (na != 1)
            return v_raise(c, "TypeError", "%s() takes exactly one argument (%zu given)", fname,
                           na);
        if (id == BI_ABS) return b_abs(c, a[0]);
        {
            int64_t n = v_len(c, a[0]);
            return n < 0 ? NULL : v_int64(c, n);
        }
    case BI_ALL:
    case BI_ANY:
        if (!no_kw(c, fname, nkw)) return NULL;
        if (na != 1)
            return v_raise(c, "TypeError", "%s() takes exactly one argument (%zu given)", fname,
                           na);
        return b_allany(c, a[0], id == BI_ALL);
    case BI_BOOL:
        if (!no_kw(c, fname, nkw)) return NULL;
        if (na > 1) return v_raise(c, "TypeError", "bool expected at most 1 argument, got %zu", na);
        return na ? v_bool(v_truthy(a[0])) : v_false();
    case BI_DICT:
        return b_dict(c, a, na, kw, nkw);
    case BI_FLOAT:
        if (!no_kw(c, fname, nkw)) return NULL;
        if (na > 1)
            return v_raise(c, "TypeError", "float expected at most 1 argument, got %zu", na);
        return b_float(c, na ? a[0] : NULL);
    case BI_INT: {
        static const char *const names[] = {"x", "base"};
        if (v_parse_args(c, "int", a, na, kw, nkw, names, 2, 1, 0, p)) return NULL;
        return b_int(c, p[0], p[1]);
    }
    case BI_LIST:
    case BI_TUPLE:
        if (!no_kw(c, fname, nkw)) return NULL;
        if (na > 1)
            return v_raise(c, "TypeError", "%s expected at most 1 argument, got %zu", fname, na);
        return collect_seq(c, na ? a[0] : NULL, id == BI_TUPLE);
    case BI_SET:
        if (!no_kw(c, fname, nkw)) return NULL;
        if (na > 1) return v_raise(c, "TypeError", "set expected at most 1 argument, got %zu", na);
        return na ? vset_from_iterable(c, a[0]) : v_set_new(c, 0);
    case BI_RANGE:
        return b_range(c, a, na, nkw);
    case BI_STR:
        return b_str(c, a, na, kw, nkw);
    case BI_MAX:
    case BI_MIN:
        return b_minmax(c, id == BI_MAX, a, na, kw, nkw);
    case BI_ROUND: {
        static const char *const names[] = {"number", "ndigits"};
        if (v_parse_args(c, "round", a, na, kw, nkw, names, 2, 0, 1, p)) return NULL;
        return b_round(c, p[0], p[1]);
    }
    case BI_SORTED: {
        if (na != 1) {
            if (na == 0) return v_raise(c, "TypeError", "sorted expected 1 argument, got 0");
            return v_raise(c, "TypeError", "sorted expected 1 argument, got %zu", na);
        }
        val *key = NULL;
        bool rev = false;
        for (size_t i = 0; i < nkw; i++) {
            if (!strcmp(kw[i].name, "key"))
                key = v_type(kw[i].value) == VT_NONE ? NULL : kw[i].value;
            else if (!strcmp(kw[i].name, "reverse")) {
                val *r = kw[i].value;
                if (v_type(r) == VT_FLOAT)
                    return v_raise(c, "TypeError",
                                   "'float' object cannot be interpreted as an integer");
                if (!v_is_intlike(r))
                    return v_raise(c, "TypeError",
                                   "'%s' object cannot be interpreted as an integer",
                                   v_type_name(r));
                rev = v_truthy(r);
            } else
                return v_raise(c, "TypeError", "sort() got an unexpected keyword argument '%s'",
                               kw[i].name);
        }
        val **items;
        size_t n;
        if (v_iter_collect(c, a[0], &items, &n)) return NULL;
        if (key && n == 0 && v_type(key) != VT_BUILTIN) {
            /* CPython calls key only per item; nothing to do */
        }
        if (v_sort(c, items, n, key, rev)) return NULL;
        return v_list_take(c, items, n);
    }
    case BI_SUM: {
        static const char *const names[] = {"iterable", "start"};
        if (v_parse_args(c, "sum", a, na, kw, nkw, names, 2, 1, 1, p)) return NULL;
        return b_sum(c, p[0], p[1]);
    }
    default:
        break;
    }
    return v_raise(c, "TypeError", "'%s' object is not callable", fname);
}
