/* sandbox/lang/containers: list, tuple, dict (insertion-ordered hash table),
 * dict views, set (CPython's setobject table layout and algorithms, so
 * sets of numbers iterate and print in CPython's order) and range:
 * slicing, indexing, concatenation, repetition, comparison, membership and
 * the allowlisted methods (count index get keys values items union
 * intersection difference symmetric_difference issubset issuperset
 * isdisjoint). */
#include "sandbox/lang/value_impl.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- indices and slices --------------------------------------------------- */

int v_int_index(vctx *c, val *v, int64_t *out, const char *what)
{
    if (!v_is_intlike(v)) {
        v_raise(c, "TypeError", "%s, not %s", what, v_type_name(v));
        return -1;
    }
    if (!v_as_i64(v, out)) {
        v_raise(c, "IndexError", "cannot fit 'int' into an index-sized integer");
        return -1;
    }
    return 0;
}

int vseq_index_norm(int64_t *i, int64_t len)
{
    if (*i < 0) *i += len;
    return (*i < 0 || *i >= len) ? -1 : 0;
}

static int slice_part(vctx *c, val *v, int64_t *out)
{
    if (!v_is_intlike(v)) {
        v_raise(c, "TypeError",
                "slice indices must be integers or None or have an __index__ method");
        return -1;
    }
    if (!v_as_i64(v, out)) *out = vi_sign(v) > 0 ? INT64_MAX : INT64_MIN + 1;
    return 0;
}

int vseq_slice_indices(vctx *c, val *sl, int64_t len, int64_t *start, int64_t *stop, int64_t *step,
                       int64_t *slen)
{
    int64_t st = 1;
    if (sl->u.sl.step) {
        if (slice_part(c, sl->u.sl.step, &st)) return -1;
        if (st == 0) {
            v_raise(c, "ValueError", "slice step cannot be zero");
            return -1;
        }
        if (st < -INT64_MAX) st = -INT64_MAX;
    }
    int64_t a = st < 0 ? INT64_MAX : 0, b = st < 0 ? INT64_MIN : INT64_MAX;
    if (sl->u.sl.lo && slice_part(c, sl->u.sl.lo, &a)) return -1;
    if (sl->u.sl.hi && slice_part(c, sl->u.sl.hi, &b)) return -1;
    if (a < 0) {
        a += len;
        if (a < 0) a = st < 0 ? -1 : 0;
    } else if (a >= len)
        a = st < 0 ? len - 1 : len;
    if (b < 0) {
        b += len;
        if (b < 0) b = st < 0 ? -1 : 0;
    } else if (b >= len)
        b = st < 0 ? len - 1 : len;
    int64_t n = 0;
    if (st < 0) {
        if (b < a) n = (a - b - 1) / (-st) + 1;
    } else if (a < b)
        n = (b - a - 1) / st + 1;
    *start = a;
    *stop = b;
    *step = st;
    *slen = n;
    return 0;
}

/* ---- list / tuple ---------------------------------------------------------- */

val *vseq_getitem(vctx *c, val *seq, val *key)
{
    int64_t len = (int64_t)seq->u.seq.len;
    if (v_type(key) == VT_SLICE) {
        int64_t start, stop, step, slen;
        if (vseq_slice_indices(c, key, len, &start, &stop, &step, &slen)) return NULL;
        if (step == 1) {
            if (v_type(seq) == VT_TUPLE && slen == len) return seq;
            return v_type(seq) == VT_LIST ? v_list(c, seq->u.seq.items + start, (size_t)slen)
                                          : v_tuple(c, seq->u.seq.items + start, (size_t)slen);
        }
        val **it = v_items_alloc_filled(c, (size_t)slen);
        if (!it) return NULL;
        for (int64_t i = 0, k = start; i < slen; i++, k += step)
            it[i] = seq->u.seq.items[k];
        return v_type(seq) == VT_LIST ? v_list_take(c, it, (size_t)slen)
                                      : v_tuple_take(c, it, (size_t)slen);
    }
    int64_t i;
    if (v_int_index(c, key, &i,
                    v_type(seq) == VT_LIST ? "list indices must be integers or slices"
                                           : "tuple indices must be integers or slices"))
        return NULL;
    if (vseq_index_norm(&i, len))
        return v_raise(c, "IndexError", "%s index out of range",
                       v_type(seq) == VT_LIST ? "list" : "tuple");
    return seq->u.seq.items[i];
}

val *vseq_concat(vctx *c, val *a, val *b)
{
    if (b->u.seq.len == 0 && v_type(a) == VT_TUPLE) return a;
    if (a->u.seq.len == 0 && v_type(a) == VT_TUPLE) return b;
    size_t n = a->u.seq.len + b->u.seq.len;
    val **it = v_items_alloc_filled(c, n);
    if (!it) return NULL;
    if (a->u.seq.len) memcpy(it, a->u.seq.items, a->u.seq.len * sizeof *it);
    if (b->u.seq.len) memcpy(it + a->u.seq.len, b->u.seq.items, b->u.seq.len * sizeof *it);
    return v_type(a) == VT_LIST ? v_list_take(c, it, n) : v_tuple_take(c, it, n);
}

val *vseq_repeat(vctx *c, val *a, int64_t k)
{
    if (k <= 0 || a->u.seq.len == 0)
        return v_type(a) == VT_LIST ? v_list(c, NULL, 0) : v_tuple(c, NULL, 0);
    if (k == 1 && v_type(a) == VT_TUPLE) return a;
    if ((uint64_t)k > c->lim.max_items / a->u.seq.len) return v_limit(c, "memory");
    size_t n = a->u.seq.len * (size_t)k;
    if (v_steps(c, n / 16)) return NULL;
    val **it = v_items_alloc_filled(c, n);
    if (!it) return NULL;
    for (int64_t i = 0; i < k; i++)
        memcpy(it + (size_t)i * a->u.seq.len, a->u.seq.items, a->u.seq.len * sizeof *it);
    return v_type(a) == VT_LIST ? v_list_take(c, it, n) : v_tuple_take(c, it, n);
}

static int ieq(vctx *c, val *a, val *b)
{
    if (a == b) return 1;
    return v_eq(c, a, b);
}

int vseq_eq(vctx *c, val *a, val *b)
{
    if (a->u.seq.len != b->u.seq.len) return 0;
    for (size_t i = 0; i < a->u.seq.len; i++) {
        int r = ieq(c, a->u.seq.items[i], b->u.seq.items[i]);
        if (r <= 0) return r;
    }
    return 1;
}

int vseq_cmp(vctx *c, vcmpop op, val *a, val *b)
{
    size_t n = a->u.seq.len < b->u.seq.len ? a->u.seq.len : b->u.seq.len;
    for (size_t i = 0; i < n; i++) {
        int r = ieq(c, a->u.seq.items[i], b->u.seq.items[i]);
        if (r < 0) return -1;
        if (!r) return v_compare(c, op, a->u.seq.items[i], b->u.seq.items[i]);
    }
    size_t x = a->u.seq.len, y = b->u.seq.len;
    return v_cmp_result(op, (x > y) - (x < y));
}

/* ---- dict ------------------------------------------------------------------ */

/* Dict probing is CPython's (dictobject.c): i = 5*i + perturb + 1 with the
 * hash's high bits shifted in, so keys that agree in their low bits still
 * part after a few probes (linear probing let them pile up in one run). */
#define DICT_PERTURB_SHIFT 5

static size_t dict_free_slot(const vtable *t, int64_t h)
{
    size_t perturb = (size_t)h, i = (size_t)h & t->mask;
    while (t->index[i] >= 0) {
        perturb >>= DICT_PERTURB_SHIFT;
        i = (i * 5 + perturb + 1) & t->mask;
    }
    return i;
}

static void dict_reindex(val *d, size_t size)
{
    vtable *t = &d->u.t;
    t->mask = size - 1;
    for (size_t i = 0; i < size; i++)
        t->index[i] = -1;
    for (size_t k = 0; k < t->len; k++)
        t->index[dict_free_slot(t, t->entries[k].hash)] = (int32_t)k;
}

val *v_dict_new(vctx *c, size_t hint)
{
    val *d = v_new(c, VT_DICT);
    if (!d) return NULL;
    if (v_check_items(c, hint)) return NULL;
    size_t cap = hint < 4 ? 4 : hint;
    size_t size = 8;
    while (size < cap * 2)
        size <<= 1;
    d->u.t.entries = v_alloc(c, cap * sizeof(ventry));
    d->u.t.index = v_alloc_bytes(c, size * sizeof(int32_t)); /* filled below */
    if (!d->u.t.entries || !d->u.t.index) return NULL;
    d->u.t.fill = cap;
    d->u.t.len = 0;
    d->u.t.mask = size - 1;
    memset(d->u.t.index, 0xff, size * sizeof(int32_t));
    return d;
}

static inline bool key_eq_fast(vctx *c, val *a, val *b, int *err)
{
    if (a == b) return true;
    if (v_type(a) == VT_STR && v_type(b) == VT_STR) return vs_eq(a, b);
    int r = v_eq(c, a, b);
    if (r < 0) *err = 1;
    return r > 0;
}

static int64_t dict_find(vctx *c, val *d, val *key, int64_t h, int *err)
{
    vtable *t = &d->u.t;
    size_t perturb = (size_t)h, i = (size_t)h & t->mask;
    for (;;) {
        int32_t k = t->index[i];
        if (k < 0) return -1;
        ventry *e = &t->entries[k];
        if (e->hash == h && key_eq_fast(c, e->key, key, err)) return k;
        if (*err) return -1;
        perturb >>= DICT_PERTURB_SHIFT;
        i = (i * 5 + perturb + 1) & t->mask;
    }
}

int v_dict_set(vctx *c, val *d, val *key, val *value)
{
    int64_t h;
    if (v_hash(c, key, &h)) return -1;
    int err = 0;
    int64_t k = dict_find(c, d, key, h, &err);
    if (err) return -1;
    if (k >= 0) {
        d->u.t.entries[k].value = value;
        return 0;
    }
    vtable *t = &d->u.t;
    if (t->len == t->fill) {
        size_t nc = t->fill * 2;
        if (v_check_items(c, nc / 2)) return -1;
        ventry *ne = v_alloc(c, nc * sizeof(ventry));
        if (!ne) return -1;
        memcpy(ne, t->entries, t->len * sizeof(ventry));
        v_free(t->entries); /* only this dict, under construction, referenced it */
        t->entries = ne;
        t->fill = nc;
    }
    t->entries[t->len].key = key;
    t->entries[t->len].value = value;
    t->entries[t->len].hash = h;
    t->len++;
    if (t->len * 2 > t->mask + 1) {
        size_t size = (t->mask + 1) * 4;
        int32_t *ni = v_alloc_bytes(c, size * sizeof(int32_t));
        if (!ni) return -1;
        v_free(t->index);
        t->index = ni;
        dict_reindex(d, size);
    } else {
        t->index[dict_free_slot(t, h)] = (int32_t)(t->len - 1);
    }
    return 0;
}

int v_dict_force(vctx *c, val *d)
{
    if (v_type(d) != VT_DICT || !vd_lazy(d)) return 0;
    return vsess_lazy_force(c, d);
}

val *v_dict_get(vctx *c, val *d, val *key)
{
    if (vd_lazy(d)) {
        bool found;
        return vsess_lazy_get(c, d, key, &found);
    }
    if (d->u.t.len == 0) {
        int64_t h;
        if (v_hash(c, key, &h)) return NULL;
        return NULL;
    }
    int64_t h;
    if (v_hash(c, key, &h)) return NULL;
    int err = 0;
    int64_t k = dict_find(c, d, key, h, &err);
    if (k < 0) return NULL;
    return d->u.t.entries[k].value;
}

int vdict_eq(vctx *c, val *a, val *b)
{
    if (v_dict_force(c, a) || v_dict_force(c, b)) return -1;
    if (a->u.t.len != b->u.t.len) return 0;
    for (size_t i = 0; i < a->u.t.len; i++) {
        ventry *e = &a->u.t.entries[i];
        int err = 0;
        int64_t k = b->u.t.len ? dict_find(c, b, e->key, e->hash, &err) : -1;
        if (err) return -1;
        if (k < 0) return 0;
        int r = ieq(c, e->value, b->u.t.entries[k].value);
        if (r <= 0) return r;
    }
    return 1;
}

/* ---- set (CPython's layout) ------------------------------------------------ */

#define LINEAR_PROBES 9
#define PERTURB_SHIFT 5
#define SET_MINSIZE 8

static int set_alloc_table(vctx *c, val *s, size_t size)
{
    if (v_check_items(c, size / 2)) return -1;
    vsentry *t = v_alloc(c, size * sizeof(vsentry));
    if (!t) return -1;
    s->u.t.sentries = t;
    s->u.t.mask = size - 1;
    return 0;
}

val *v_set_new(vctx *c, size_t hint)
{
    (void)hint;
    val *s = v_new(c, VT_SET);
    if (!s) return NULL;
    if (set_alloc_table(c, s, SET_MINSIZE)) return NULL;
    return s;
}

static void insert_clean(vsentry *table, size_t mask, val *key, int64_t hash)
{
    size_t perturb = (size_t)hash;
    size_t i = (size_t)hash & mask;
    for (;;) {
        vsentry *e = &table[i];
        if (e->key == NULL) goto found;
        if (i + LINEAR_PROBES <= mask) {
            for (int j = 0; j < LINEAR_PROBES; j++) {
                e++;
                if (e->key == NULL) goto found;
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
        continue;
    found:
        e->key = key;
        e->hash = hash;
        return;
    }
}

static int set_resize(vctx *c, val *s, size_t minused)
{
    size_t newsize = SET_MINSIZE;
    while (newsize <= minused)
        newsize <<= 1;
    vsentry *old = s->u.t.sentries;
    size_t oldmask = s->u.t.mask;
    if (set_alloc_table(c, s, newsize)) return -1;
    s->u.t.fill = s->u.t.len;
    for (size_t i = 0; i <= oldmask; i++) {
        vsentry *e = &old[i];
        if (e->key != NULL && e->key != &v_dummy_key)
            insert_clean(s->u.t.sentries, s->u.t.mask, e->key, e->hash);
    }
    v_free(old); /* only this set, under construction, referenced it */
    return 0;
}

static int set_add_entry(vctx *c, val *s, val *key, int64_t hash)
{
    if (v_steps(c, 1)) return -1;
    size_t mask = s->u.t.mask;
    size_t i = (size_t)hash & mask;
    size_t perturb = (size_t)hash;
    vsentry *e, *freeslot = NULL;
    for (;;) {
        e = &s->u.t.sentries[i];
        size_t probes = (i + LINEAR_PROBES <= mask) ? LINEAR_PROBES : 0;
        do {
            if (e->hash == 0 && e->key == NULL) goto found_unused_or_dummy;
            if (e->hash == hash && e->key != &v_dummy_key) {
                int err = 0;
                if (key_eq_fast(c, e->key, key, &err)) return 0;
                if (err) return -1;
            } else if (e->key == &v_dummy_key) { /* CPython 3.11 keeps the last one seen */
                freeslot = e;
            }
            e++;
        } while (probes--);
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
found_unused_or_dummy:
    if (freeslot) {
        /* CPython reuses a deleted slot seen on the probe path */
        s->u.t.len++;
        freeslot->key = key;
        freeslot->hash = hash;
        return 0;
    }
    s->u.t.fill++;
    s->u.t.len++;
    e->key = key;
    e->hash = hash;
    if (s->u.t.fill * 5 < mask * 3) return 0;
    return set_resize(c, s, s->u.t.len > 50000 ? s->u.t.len * 2 : s->u.t.len * 4);
}

static vsentry *set_lookkey(vctx *c, val *s, val *key, int64_t hash, int *err)
{
    size_t mask = s->u.t.mask;
    size_t i = (size_t)hash & mask;
    size_t perturb = (size_t)hash;
    for (;;) {
        vsentry *e = &s->u.t.sentries[i];
        size_t probes = (i + LINEAR_PROBES <= mask) ? LINEAR_PROBES : 0;
        do {
            if (e->hash == 0 && e->key == NULL) return NULL;
            if (e->hash == hash && e->key != &v_dummy_key) {
                if (key_eq_fast(c, e->key, key, err)) return e;
                if (*err) return NULL;
            }
            e++;
        } while (probes--);
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

static int set_contains_entry(vctx *c, val *s, val *key, int64_t hash)
{
    int err = 0;
    vsentry *e = set_lookkey(c, s, key, hash, &err);
    if (err) return -1;
    return e != NULL;
}

/* 1 found+removed, 0 not found, -1 error */
static int set_discard_entry(vctx *c, val *s, val *key, int64_t hash)
{
    int err = 0;
    vsentry *e = set_lookkey(c, s, key, hash, &err);
    if (err) return -1;
    if (!e) return 0;
    e->key = &v_dummy_key;
    e->hash = -1;
    s->u.t.len--;
    return 1;
}

int v_set_add(vctx *c, val *s, val *item)
{
    int64_t h;
    if (v_hash(c, item, &h)) return -1;
    return set_add_entry(c, s, item, h);
}

int v_set_contains(vctx *c, val *s, val *item)
{
    int64_t h;
    if (v_hash(c, item, &h)) return -1;
    return set_contains_entry(c, s, item, h);
}

int vset_discard(vctx *c, val *s, val *key)
{
    int64_t h;
    if (v_hash(c, key, &h)) return -1;
    return set_discard_entry(c, s, key, h);
}

static int set_merge(vctx *c, val *so, val *other)
{
    if (so == other || other->u.t.len == 0) return 0;
    if ((so->u.t.fill + other->u.t.len) * 5 >= so->u.t.mask * 3) {
        if (set_resize(c, so, (so->u.t.len + other->u.t.len) * 2)) return -1;
    }
    if (so->u.t.fill == 0 && so->u.t.mask == other->u.t.mask && other->u.t.fill == other->u.t.len) {
        for (size_t i = 0; i <= other->u.t.mask; i++) {
            if (other->u.t.sentries[i].key) so->u.t.sentries[i] = other->u.t.sentries[i];
        }
        so->u.t.fill = other->u.t.fill;
        so->u.t.len = other->u.t.len;
        return 0;
    }
    if (so->u.t.fill == 0) {
        so->u.t.fill = so->u.t.len = other->u.t.len;
        vsentry *e;
        for (size_t i = 0; (e = vset_next(other, &i)) != NULL;)
            insert_clean(so->u.t.sentries, so->u.t.mask, e->key, e->hash);
        return 0;
    }
    vsentry *e;
    for (size_t i = 0; (e = vset_next(other, &i)) != NULL;)
        if (set_add_entry(c, so, e->key, e->hash)) return -1;
    return 0;
}

static int set_update(vctx *c, val *so, val *other)
{
    if (v_dict_force(c, other)) return -1;
    if (v_type(other) == VT_SET) return set_merge(c, so, other);
    if (v_type(other) == VT_DICT) {
        size_t n = other->u.t.len;
        if ((so->u.t.fill + n) * 5 >= so->u.t.mask * 3 && set_resize(c, so, (so->u.t.len + n) * 2))
            return -1;
        for (size_t i = 0; i < n; i++)
            if (set_add_entry(c, so, other->u.t.entries[i].key, other->u.t.entries[i].hash))
                return -1;
        return 0;
    }
    viter it;
    if (v_iter_init(c, other, &it)) return -1;
    val *x;
    while ((x = v_iter_next(c, &it)) != NULL)
        if (v_set_add(c, so, x)) return -1;
    return v_failed(c) ? -1 : 0;
}

val *vset_copy(vctx *c, val *s)
{
    val *r = v_set_new(c, 0);
    if (!r || set_merge(c, r, s)) return NULL;
    return r;
}

val *vset_from_iterable(vctx *c, val *it)
{
    val *r = v_set_new(c, 0);
    if (!r || set_update(c, r, it)) return NULL;
    return r;
}

static int set_issubset(vctx *c, val *a, val *b)
{
    if (a->u.t.len > b->u.t.len) return 0;
    vsentry *e;
    for (size_t i = 0; (e = vset_next(a, &i)) != NULL;) {
        int r = set_contains_entry(c, b, e->key, e->hash);
        if (r <= 0) return r;
    }
    return 1;
}

int vset_eq(vctx *c, val *a, val *b)
{
    if (a->u.t.len != b->u.t.len) return 0;
    return set_issubset(c, a, b);
}

int vset_cmp(vctx *c, vcmpop op, val *a, val *b)
{
    switch (op) {
    case CMP_LE:
        return set_issubset(c, a, b);
    case CMP_GE:
        return set_issubset(c, b, a);
    case CMP_LT:
        return a->u.t.len < b->u.t.len ? set_issubset(c, a, b) : 0;
    case CMP_GT:
        return b->u.t.len < a->u.t.len ? set_issubset(c, b, a) : 0;
    case CMP_EQ:
        return vset_eq(c, a, b);
    case CMP_NE: {
        int r = vset_eq(c, a, b);
        return r < 0 ? r : !r;
    }
    }
    return 0;
}

static val *set_intersection(vctx *c, val *so, val *other)
{
    if (so == other) return vset_copy(c, so);
    val *res = v_set_new(c, 0);
    if (!res) return NULL;
    if (v_type(other) == VT_SET) {
        if (other->u.t.len > so->u.t.len) {
            val *t = so;
            so = other;
            other = t;
        }
        vsentry *e;
        for (size_t i = 0; (e = vset_next(other, &i)) != NULL;) {
            int r = set_contains_entry(c, so, e->key, e->hash);
            if (r < 0) return NULL;
            if (r && set_add_entry(c, res, e->key, e->hash)) return NULL;
        }
        return res;
    }
    viter it;
    if (v_iter_init(c, other, &it)) return NULL;
    val *x;
    while ((x = v_iter_next(c, &it)) != NULL) {
        int64_t h;
        if (v_hash(c, x, &h)) return NULL;
        int r = set_contains_entry(c, so, x, h);
        if (r < 0) return NULL;
        if (r && set_add_entry(c, res, x, h)) return NULL;
    }
    return v_failed(c) ? NULL : res;
}

/* After difference_update's discards: a table more than a quarter dummies
 * is rebuilt without them, as CPython's set_difference_update_internal does
 * (which decides the result's iteration order). */
static int set_shed_dummies(vctx *c, val *so)
{
    if (so->u.t.fill - so->u.t.len <= so->u.t.mask / 4) return 0;
    return set_resize(c, so, so->u.t.len > 50000 ? so->u.t.len * 2 : so->u.t.len * 4);
}

static int set_difference_update(vctx *c, val *so, val *other)
{
    if (v_type(other) == VT_SET) {
        vsentry *e;
        for (size_t i = 0; (e = vset_next(other, &i)) != NULL;) {
            if (set_discard_entry(c, so, e->key, e->hash) < 0) return -1;
        }
        return set_shed_dummies(c, so);
    }
    viter it;
    if (v_iter_init(c, other, &it)) return -1;
    val *x;
    while ((x = v_iter_next(c, &it)) != NULL)
        if (vset_discard(c, so, x) < 0) return -1;
    return v_failed(c) ? -1 : set_shed_dummies(c, so);
}

static int in_other(vctx *c, val *other, val *key, int64_t h)
{
    if (v_type(other) == VT_SET) return set_contains_entry(c, other, key, h);
    int err = 0;
    if (other->u.t.len == 0) return 0;
    int64_t k = dict_find(c, other, key, h, &err);
    return err ? -1 : k >= 0;
}

static val *set_difference(vctx *c, val *so, val *other)
{
    if (v_dict_force(c, other)) return NULL;
    if (v_type(other) != VT_SET && v_type(other) != VT_DICT) {
        val *r = vset_copy(c, so);
        if (!r || set_difference_update(c, r, other)) return NULL;
        return r;
    }
    if ((so->u.t.len >> 2) > other->u.t.len) {
        val *r = vset_copy(c, so);
        if (!r) return NULL;
        if (v_type(other) == VT_DICT) {
            for (size_t i = 0; i < other->u.t.len; i++)
                if (set_discard_entry(c, r, other->u.t.entries[i].key, other->u.t.entries[i].hash) <
                    0)
                    return NULL;
            return set_shed_dummies(c, r) ? NULL : r;
        }
        if (set_difference_update(c, r, other)) return NULL;
        return r;
    }
    val *res = v_set_new(c, 0);
    if (!res) return NULL;
    vsentry *e;
    for (size_t i = 0; (e = vset_next(so, &i)) != NULL;) {
        int r = in_other(c, other, e->key, e->hash);
        if (r < 0) return NULL;
        if (!r && set_add_entry(c, res, e->key, e->hash)) return NULL;
    }
    return res;
}

static val *set_symmetric_difference(vctx *c, val *so, val *other)
{
    val *res = vset_from_iterable(c, other);
    if (!res) return NULL;
    /* symmetric_difference_update(res, so) */
    vsentry *e;
    for (size_t i = 0; (e = vset_next(so, &i)) != NULL;) {
        int r = set_discard_entry(c, res, e->key, e->hash);
        if (r < 0) return NULL;
        if (r == 0 && set_add_entry(c, res, e->key, e->hash)) return NULL;
    }
    return res;
}

static val *set_method(vctx *c, val *s, const char *name, val **a, size_t na, const vkwarg *kw,
                       size_t nkw, bool *found)
{
    *found = true;
    bool multi =
        !strcmp(name, "union") || !strcmp(name, "intersection") || !strcmp(name, "difference");
    bool single = !strcmp(name, "symmetric_difference") || !strcmp(name, "issubset") ||
                  !strcmp(name, "issuperset") || !strcmp(name, "isdisjoint");
    if (!multi && !single) {
        *found = false;
        return NULL;
    }
    if (nkw) return v_raise(c, "TypeError", "set.%s() takes no keyword arguments", name);
    if (single && na != 1)
        return v_raise(c, "TypeError", "set.%s() takes exactly one argument (%zu given)", name, na);
    for (size_t i = 0; i < na; i++) {
        viter it;
        if (v_iter_init(c, a[i], &it)) return NULL;
    }
    if (!strcmp(name, "union")) {
        val *r = vset_copy(c, s);
        for (size_t i = 0; r && i < na; i++) {
            if (a[i] == s) continue;
            if (set_update(c, r, a[i])) return NULL;
        }
        return r;
    }
    if (!strcmp(name, "intersection")) {
        if (na == 0) return vset_copy(c, s);
        val *r = s;
        for (size_t i = 0; r && i < na; i++)
            r = set_intersection(c, r, a[i]);
        return r;
    }
    if (!strcmp(name, "difference")) {
        if (na == 0) return vset_copy(c, s);
        val *r = set_difference(c, s, a[0]);
        for (size_t i = 1; r && i < na; i++)
            if (set_difference_update(c, r, a[i])) return NULL;
        return r;
    }
    if (!strcmp(name, "symmetric_difference")) {
        if (a[0] == s) return v_set_new(c, 0);
        return set_symmetric_difference(c, s, a[0]);
    }
    val *o = a[0];
    if (!strcmp(name, "issubset")) {
        if (v_type(o) != VT_SET) {
            o = vset_from_iterable(c, o);
            if (!o) return NULL;
        }
        int r = set_issubset(c, s, o);
        return r < 0 ? NULL : v_bool(r);
    }
    if (!strcmp(name, "issuperset")) {
        if (v_type(o) == VT_SET) {
            int r = set_issubset(c, o, s);
            return r < 0 ? NULL : v_bool(r);
        }
        viter it;
        if (v_iter_init(c, o, &it)) return NULL;
        val *x;
        while ((x = v_iter_next(c, &it)) != NULL) {
            int r = v_set_contains(c, s, x);
            if (r < 0) return NULL;
            if (!r) return v_false();
        }
        return v_failed(c) ? NULL : v_true();
    }
    /* isdisjoint */
    if (v_type(o) == VT_SET) {
        val *small = s, *big = o;
        if (small->u.t.len > big->u.t.len) {
            small = o;
            big = s;
        }
        vsentry *e;
        for (size_t i = 0; (e = vset_next(small, &i)) != NULL;) {
            int r = set_contains_entry(c, big, e->key, e->hash);
            if (r < 0) return NULL;
            if (r) return v_false();
        }
        return v_true();
    }
    viter it;
    if (v_iter_init(c, o, &it)) return NULL;
    val *x;
    while ((x = v_iter_next(c, &it)) != NULL) {
        int r = v_set_contains(c, s, x);
        if (r < 0) return NULL;
        if (r) return v_false();
    }
    return v_failed(c) ? NULL : v_true();
}

/* ---- range --------------------------------------------------------------- */

val *vrange_getitem(vctx *c, val *r, val *key)
{
    if (v_type(key) == VT_SLICE) {
        int64_t start, stop, step, slen;
        if (vseq_slice_indices(c, key, r->u.r.len, &start, &stop, &step, &slen)) return NULL;
        __int128 a = (__int128)r->u.r.start + (__int128)start * r->u.r.step;
        __int128 b = (__int128)r->u.r.start + (__int128)stop * r->u.r.step;
        __int128 s = (__int128)r->u.r.step * step;
        if (a > INT64_MAX || a < INT64_MIN || b > INT64_MAX || b < INT64_MIN || s > INT64_MAX ||
            s < INT64_MIN)
            return v_raise(c, "OverflowError", "range too large");
        return v_range(c, (int64_t)a, (int64_t)b, (int64_t)s);
    }
    int64_t i;
    if (v_int_index(c, key, &i, "range indices must be integers or slices")) return NULL;
    if (vseq_index_norm(&i, r->u.r.len))
        return v_raise(c, "IndexError", "range object index out of range");
    return v_int64(c, r->u.r.start + i * r->u.r.step);
}

static int range_index_of(val *r, int64_t x, int64_t *idx)
{
    int64_t st = r->u.r.start, sp = r->u.r.step;
    if (r->u.r.len == 0) return 0;
    __int128 last = (__int128)st + (__int128)(r->u.r.len - 1) * sp;
    if (sp > 0 ? (x < st || x > last) : (x > st || x < last)) return 0;
    __int128 d = (__int128)x - st;
    if (d % sp != 0) return 0;
    *idx = (int64_t)(d / sp);
    return 1;
}

int vrange_contains(vctx *c, val *r, val *item)
{
    if (v_is_intlike(item)) {
        int64_t x, idx;
        if (!v_as_i64(item, &x)) return 0;
        return range_index_of(r, x, &idx);
    }
    for (int64_t i = 0; i < r->u.r.len; i++) {
        if (v_step(c)) return -1;
        val *v = v_int64(c, r->u.r.start + i * r->u.r.step);
        if (!v) return -1;
        int e = v_eq(c, v, item);
        if (e) return e;
    }
    return 0;
}

int vrange_eq(val *a, val *b)
{
    if (a->u.r.len != b->u.r.len) return 0;
    if (a->u.r.len == 0) return 1;
    if (a->u.r.start != b->u.r.start) return 0;
    if (a->u.r.len == 1) return 1;
    return a->u.r.step == b->u.r.step;
}

/* ---- dict views ---------------------------------------------------------- */

static val *make_view(vctx *c, val *d, vtype t)
{
    if (v_dict_force(c, d)) return NULL;
    val *v = v_new(c, t);
    if (v) v->u.rec.f[0] = d;
    return v;
}

/* ---- methods ------------------------------------------------------------- */

static val *seq_count_index(vctx *c, val *o, const char *name, val **a, size_t na, const vkwarg *kw,
                            size_t nkw, bool index)
{
    const char *tn = v_type_name(o);
    char fname[32];
    snprintf(fname, sizeof fname, "%s", name);
    if (nkw) return v_raise(c, "TypeError", "%s.%s() takes no keyword arguments", tn, name);
    if (!index && na != 1)
        return v_raise(c, "TypeError", "%s.count() takes exactly one argument (%zu given)", tn, na);
    if (index && (na < 1 || na > 3)) {
        if (na == 0) return v_raise(c, "TypeError", "index expected at least 1 argument, got 0");
        return v_raise(c, "TypeError", "index expected at most 3 arguments, got %zu", na);
    }
    if (v_type(o) == VT_RANGE) {
        if (index && na != 1)
            return v_raise(c, "TypeError", "range.index() takes exactly one argument (%zu given)",
                           na);
        int64_t x, idx;
        if (v_is_intlike(a[0])) {
            int found = v_as_i64(a[0], &x) && range_index_of(o, x, &idx);
            if (index) {
                if (!found) {
                    strbuf b;
                    strbuf_init(&b);
                    v_repr_buf(c, &b, a[0]);
                    v_raise(c, "ValueError", "%s is not in range", b.data ? b.data : "");
                    strbuf_free(&b);
                    return NULL;
                }
                return v_int64(c, idx);
            }
            return v_int64(c, found);
        }
        int64_t n = 0;
        for (int64_t i = 0; i < o->u.r.len; i++) {
            if (v_step(c)) return NULL;
            int e = v_eq(c, v_int64(c, o->u.r.start + i * o->u.r.step), a[0]);
            if (e < 0) return NULL;
            if (e && index) return v_int64(c, i);
            n += e;
        }
        if (index) return v_raise(c, "ValueError", "sequence.index(x): x not in sequence");
        return v_int64(c, n);
    }
    int64_t len = (int64_t)o->u.seq.len, st = 0, en = len;
    if (index) {
        /* start/stop as _PyEval_SliceIndexNotNone reads them: no None */
        for (size_t k = 1; k < na; k++) {
            if (!v_is_intlike(a[k]))
                return v_raise(c, "TypeError",
                               "slice indices must be integers or have an __index__ method");
            if (slice_part(c, a[k], k == 1 ? &st : &en)) return NULL;
        }
        if (st < 0) {
            st += len;
            if (st < 0) st = 0;
        }
        if (en < 0) {
            en += len;
            if (en < 0) en = 0;
        }
        if (en > len) en = len;
    }
    int64_t n = 0;
    if (v_steps(c, (uint64_t)len / 8)) return NULL;
    for (int64_t i = st; i < en; i++) {
        int e = ieq(c, o->u.seq.items[i], a[0]);
        if (e < 0) return NULL;
        if (e && index) return v_int64(c, i);
        n += e;
    }
    if (index) return v_raise(c, "ValueError", "%s.index(x): x not in %s", tn, tn);
    return v_int64(c, n);
}

val *vcont_method(vctx *c, val *o, const char *name, val **a, size_t na, const vkwarg *kw,
                  size_t nkw, bool *found)
{
    *found = true;
    switch (v_type(o)) {
    case VT_LIST:
    case VT_TUPLE:
    case VT_RANGE:
        if (!strcmp(name, "count")) return seq_count_index(c, o, name, a, na, kw, nkw, false);
        if (!strcmp(name, "index")) return seq_count_index(c, o, name, a, na, kw, nkw, true);
        break;
    case VT_DICT:
        if (!strcmp(name, "get")) {
            if (nkw) return v_raise(c, "TypeError", "dict.get() takes no keyword arguments");
            if (na < 1 || na > 2)
                return v_raise(c, "TypeError", "get expected %s %d argument%s, got %zu",
                               na < 1 ? "at least" : "at most", na < 1 ? 1 : 2, na < 1 ? "" : "s",
                               na);
            val *r = v_dict_get(c, o, a[0]);
            if (r) return r;
            if (v_failed(c)) return NULL;
            return na == 2 ? a[1] : v_none();
        }
        if (!strcmp(name, "keys") || !strcmp(name, "values") || !strcmp(name, "items")) {
            if (na || nkw)
                return v_raise(c, "TypeError", "dict.%s() takes no arguments (%zu given)", name,
                               na + nkw);
            return make_view(c, o,
                             name[0] == 'k'   ? VT_DICT_KEYS
                             : name[0] == 'v' ? VT_DICT_VALUES
                                              : VT_DICT_ITEMS);
        }
        break;
    case VT_SET:
        return set_method(c, o, name, a, na, kw, nkw, found);
    case VT_DICT_KEYS:
    case VT_DICT_ITEMS:
        if (!strcmp(name, "isdisjoint")) {
            if (nkw)
                return v_raise(c, "TypeError", "%s.isdisjoint() takes no keyword arguments",
                               v_type_name(o));
            if (na != 1)
                return v_raise(c, "TypeError",
                               "%s.isdisjoint() takes exactly one argument (%zu given)",
                               v_type_name(o), na);
            viter it;
            if (v_iter_init(c, a[0], &it)) return NULL;
            val *x;
            while ((x = v_iter_next(c, &it)) != NULL) {
                int r = v_contains(c, o, x);
                if (r < 0) return NULL;
                if (r) return v_false();
            }
            return v_failed(c) ? NULL : v_true();
        }
        break;
    default:
        break;
    }
    *found = false;
    return NULL;
}

val *v_set_from_constants(vctx *c, val **items, size_t n)
{
    val *s = v_set_new(c, n);
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++)
        if (v_set_add(c, s, items[i])) return NULL;
    if (n <= 2) return s;
    /* the compiler's frozenset constant is rebuilt once from its own
     * iteration order (merge_consts_recursive), then SET_UPDATE copies it */
    val *f2 = v_set_new(c, n);
    if (!f2) return NULL;
    vsentry *e;
    for (size_t i = 0; (e = vset_next(s, &i)) != NULL;)
        if (set_add_entry(c, f2, e->key, e->hash)) return NULL;
    return vset_copy(c, f2);
}
