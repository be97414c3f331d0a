/* sandbox/lang/bigrange: range objects whose bounds or length exceed int64
 * (range(10 ** 20), range(0, 2 ** 64, 2 ** 60)): CPython keeps them exact.
 * Length, indexing, slicing, membership, iteration, equality, hashing,
 * count/index and repr with arbitrary-precision arithmetic. */
#include "sandbox/lang/value_impl.h"

#include <stdio.h>
#include <stdlib.h>

static void range_len(mpz_t len, const mpz_t start, const mpz_t stop, const mpz_t step)
{
    /* step > 0: start < stop ? (stop - start - 1) // step + 1 : 0 (mirror for step < 0) */
    mpz_t d;
    mpz_init(d);
    if (mpz_sgn(step) > 0 ? mpz_cmp(start, stop) < 0 : mpz_cmp(start, stop) > 0) {
        mpz_sub(d, stop, start);
        mpz_abs(d, d);
        mpz_sub_ui(d, d, 1);
        mpz_t as;
        mpz_init(as);
        mpz_abs(as, step);
        mpz_fdiv_q(len, d, as);
        mpz_add_ui(len, len, 1);
        mpz_clear(as);
    } else {
        mpz_set_ui(len, 0);
    }
    mpz_clear(d);
}

val *vbr_new(vctx *c, val *start, val *stop, val *step)
{
    mpz_ptr a = vi_mpz_new(c), b = vi_mpz_new(c), s = vi_mpz_new(c), n = vi_mpz_new(c);
    if (!a || !b || !s || !n) return NULL;
    vi_get_mpz(start, a);
    vi_get_mpz(stop, b);
    vi_get_mpz(step, s);
    range_len(n, a, b, s);
    val *v = v_new(c, VT_BIGRANGE);
    if (!v) return NULL;
    v->u.rb.start = a;
    v->u.rb.stop = b;
    v->u.rb.step = s;
    v->u.rb.len = n;
    return v;
}

int64_t vbr_len(vctx *c, val *v)
{
    if (!mpz_fits_slong_p(v->u.rb.len)) {
        v_raise(c, "OverflowError", "Python int too large to convert to C ssize_t");
        return -1;
    }
    return mpz_get_si(v->u.rb.len);
}

bool vbr_truthy(const val *v)
{
    return mpz_sgn(v->u.rb.len) != 0;
}

int vbr_repr_buf(vctx *c, strbuf *b, val *v)
{
    val *p[3];
    p[0] = v_int_mpz(c, v->u.rb.start);
    p[1] = v_int_mpz(c, v->u.rb.stop);
    p[2] = v_int_mpz(c, v->u.rb.step);
    if (!p[0] || !p[1] || !p[2]) return -1;
    strbuf_puts(b, "range(");
    if (vi_repr_buf(c, b, p[0])) return -1;
    strbuf_put(b, ", ", 2);
    if (vi_repr_buf(c, b, p[1])) return -1;
    if (mpz_cmp_ui(v->u.rb.step, 1) != 0) {
        strbuf_put(b, ", ", 2);
        if (vi_repr_buf(c, b, p[2])) return -1;
    }
    strbuf_putc(b, ')');
    return 0;
}

/* item i (0 <= i < len) */
static val *item(vctx *c, val *v, const mpz_t i)
{
    mpz_ptr r = vi_mpz_new(c);
    if (!r) return NULL;
    mpz_mul(r, i, v->u.rb.step);
    mpz_add(r, r, v->u.rb.start);
    return vi_from_mpz_take(c, r);
}

/* slice bound: None -> default, else clamp as PySlice_AdjustIndices with big ints */
static void adjust(mpz_t out, val *x, const mpz_t len, bool neg_step, bool is_start)
{
    if (!x) {
        if (is_start) {
            if (neg_step)
                mpz_sub_ui(out, len, 1);
            else
                mpz_set_ui(out, 0);
        } else {
            if (neg_step)
                mpz_set_si(out, -1);
            else
                mpz_set(out, len);
        }
        return;
    }
    vi_get_mpz(x, out);
    if (mpz_sgn(out) < 0) {
        mpz_add(out, out, len);
        if (mpz_sgn(out) < 0) mpz_set_si(out, neg_step ? -1 : 0);
    } else if (mpz_cmp(out, len) >= 0) {
        if (neg_step)
            mpz_sub_ui(out, len, 1);
        else
            mpz_set(out, len);
    }
}

val *vbr_getitem(vctx *c, val *v, val *key)
{
    if (v_type(key) == VT_SLICE) {
        val *parts[3] = {key->u.sl.lo, key->u.sl.hi, key->u.sl.step};
        for (int k = 0; k < 3; k++)
            if (parts[k] && !v_is_intlike(parts[k]))
                return v_raise(
                    c, "TypeError",
                    "slice indices must be integers or None or have an __index__ method");
        mpz_t st, a, b;
        mpz_inits(st, a, b, NULL);
        if (parts[2])
            vi_get_mpz(parts[2], st);
        else
            mpz_set_ui(st, 1);
        if (mpz_sgn(st) == 0) {
            mpz_clears(st, a, b, NULL);
            return v_raise(c, "ValueError", "slice step cannot be zero");
        }
        bool neg = mpz_sgn(st) < 0;
        adjust(a, parts[0], v->u.rb.len, neg, true);
        adjust(b, parts[1], v->u.rb.len, neg, false);
        mpz_ptr ns = vi_mpz_new(c), na = vi_mpz_new(c), nb = vi_mpz_new(c), nl = vi_mpz_new(c);
        val *r = NULL;
        if (ns && na && nb && nl) {
            mpz_mul(ns, st, v->u.rb.step);
            mpz_mul(na, a, v->u.rb.step);
            mpz_add(na, na, v->u.rb.start);
            mpz_mul(nb, b, v->u.rb.step);
            mpz_add(nb, nb, v->u.rb.start);
            range_len(nl, na, nb, ns);
            r = v_new(c, VT_BIGRANGE);
            if (r) {
                r->u.rb.start = na;
                r->u.rb.stop = nb;
                r->u.rb.step = ns;
                r->u.rb.len = nl;
            }
        }
        mpz_clears(st, a, b, NULL);
        return r;
    }
    if (!v_is_intlike(key))
        return v_raise(c, "TypeError", "range indices must be integers or slices, not %s",
                       v_type_name(key));
    mpz_t i;
    mpz_init(i);
    vi_get_mpz(key, i);
    if (mpz_sgn(i) < 0) mpz_add(i, i, v->u.rb.len);
    val *r;
    if (mpz_sgn(i) < 0 || mpz_cmp(i, v->u.rb.len) >= 0)
        r = v_raise(c, "IndexError", "range object index out of range");
    else
        r = item(c, v, i);
    mpz_clear(i);
    return r;
}

/* index of x in the range, or -1 (result in idx) */
static int index_of(val *v, val *x, mpz_t idx)
{
    if (!v_is_intlike(x) || mpz_sgn(v->u.rb.len) == 0) return 0;
    mpz_t d, r;
    mpz_inits(d, r, NULL);
    vi_get_mpz(x, d);
    mpz_sub(d, d, v->u.rb.start);
    mpz_fdiv_qr(idx, r, d, v->u.rb.step);
    int found = mpz_sgn(r) == 0 && mpz_sgn(idx) >= 0 && mpz_cmp(idx, v->u.rb.len) < 0;
    mpz_clears(d, r, NULL);
    return found;
}

int vbr_contains(vctx *c, val *v, val *x)
{
    (void)c;
    mpz_t idx;
    mpz_init(idx);
    int r = index_of(v, x, idx);
    mpz_clear(idx);
    return r;
}

/* normalized (len, start, step) for eq/hash; small ranges too */
static void norm(const val *v, mpz_t len, mpz_t start, mpz_t step)
{
    if (v_type(v) == VT_RANGE) {
        mpz_set_si(len, v->u.r.len);
        mpz_set_si(start, v->u.r.start);
        mpz_set_si(step, v->u.r.step);
    } else {
        mpz_set(len, v->u.rb.len);
        mpz_set(start, v->u.rb.start);
        mpz_set(step, v->u.rb.step);
    }
}

int vbr_eq(val *a, val *b)
{
    mpz_t l1, s1, t1, l2, s2, t2;
    mpz_inits(l1, s1, t1, l2, s2, t2, NULL);
    norm(a, l1, s1, t1);
    norm(b, l2, s2, t2);
    /* equal: same length, and either empty or same start and (one element
     * or same step) */
    int r = mpz_cmp(l1, l2) == 0 &&
            (mpz_sgn(l1) == 0 ||
             (mpz_cmp(s1, s2) == 0 && (mpz_cmp_ui(l1, 1) == 0 || mpz_cmp(t1, t2) == 0)));
    mpz_clears(l1, s1, t1, l2, s2, t2, NULL);
    return r;
}

int vbr_hash(vctx *c, val *v, int64_t *out)
{
    val *t[3];
    t[0] = v_int_mpz(c, v->u.rb.len);
    t[1] = mpz_sgn(v->u.rb.len) ? v_int_mpz(c, v->u.rb.start) : v_none();
    t[2] = mpz_cmp_ui(v->u.rb.len, 1) > 0 ? v_int_mpz(c, v->u.rb.step) : v_none();
    if (!t[0] || !t[1] || !t[2]) return -1;
    val tv = {.ty = VT_TUPLE};
    tv.u.seq.items = t;
    tv.u.seq.len = 3;
    int err = 0;
    *out = v_hash_tuple(c, &tv, &err);
    return err ? -1 : 0;
}

val *vbr_next(vctx *c, viter *it)
{
    val *v = it->src;
    if (!it->big) {
        it->big = vi_mpz_new(c);
        if (!it->big) return NULL;
        mpz_set_ui(it->big, 0);
    }
    if (mpz_cmp(it->big, v->u.rb.len) >= 0) return NULL;
    if (v_step(c)) return NULL;
    val *r = item(c, v, it->big);
    mpz_add_ui(it->big, it->big, 1);
    return r;
}

val *vbr_method(vctx *c, val *v, const char *name, val **a, size_t na, const vkwarg *kw, size_t nkw,
                bool *found)
{
    bool idx = !strcmp(name, "index");
    if (!idx && strcmp(name, "count")) {
        *found = false;
        return NULL;
    }
    *found = true;
    if (nkw) return v_raise(c, "TypeError", "range.%s() takes no keyword arguments", name);
    if (na != 1)
        return v_raise(c, "TypeError", "range.%s() takes exactly one argument (%zu given)", name,
                       na);
    mpz_t i;
    mpz_init(i);
    int f = index_of(v, a[0], i);
    val *r;
    if (idx)
        r = f ? v_int_mpz(c, i) : v_raise(c, "ValueError", "value is not in range");
    else
        r = v_int64(c, f);
    mpz_clear(i);
    return r;
}
