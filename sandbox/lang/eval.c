/* sandbox/lang/eval: tree-walking evaluator of the managed-evaluation language
 * (eval.h). A resolution pass first binds every Name to a comprehension slot
 * or a global (builtins are looked up once and cached in the node); the walk
 * then evaluates with no per-node heap allocation (values come from the
 * value runtime's arena, see value.h). Scoping follows CPython 3.11's eval
 * with `session` as a local of the top-level frame: a comprehension is its
 * own function scope whose first iterable is evaluated in the enclosing
 * scope, so `session` is visible only outside comprehensions and in a
 * comprehension's first iterable. */
#include "sandbox/lang/eval.h"

#include "sandbox/lang/value.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUTCOME_BYTES ((size_t)1024 * 1024)

/* Name node flags (ast_node.flags for AST_Name). */
enum {
    NF_FREE = 1,    /* slot belongs to an enclosing comprehension */
    NF_SESSION = 2, /* the `session` local of the top-level frame */
    NF_BUILTIN = 4, /* node->cache is the builtin */
};
/* Folding flag (ast_node.flags of a BinOp, UnaryOp, Tuple or Subscript,
 * which use no other flag; other kinds use the bit for other things): set
 * by resolve on a node of folded constants (foldable), cleared at
 * evaluation once the node turns out not to fold. */
enum { NF_FOLD = 8 };
static inline int fold_marked(const ast_node *x)
{
    return (x->flags & NF_FOLD) && (x->kind == AST_BinOp || x->kind == AST_UnaryOp ||
                                    x->kind == AST_Tuple || x->kind == AST_Subscript);
}

/* ---- resolution ------------------------------------------------------- */

typedef struct scope scope;
struct scope {
    scope *parent;
    const char **names; /* bound names of this comprehension */
    int32_t *slots;
    uint32_t n, cap;
};

typedef struct {
    int32_t nslots;
    int oom;
} resolver;

static int scope_add(resolver *R, scope *s, const char *name)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) return 0;
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 4;
        const char **nn = realloc(s->names, nc * sizeof *nn);
        if (!nn) return R->oom = 1, -1;
        s->names = nn;
        int32_t *ns = realloc(s->slots, nc * sizeof *ns);
        if (!ns) return R->oom = 1, -1;
        s->slots = ns;
        s->cap = nc;
    }
    s->names[s->n] = name;
    s->slots[s->n++] = R->nslots++;
    return 0;
}

static void collect_targets(resolver *R, scope *s, ast_node *t)
{
    switch (t->kind) {
    case AST_Name:
        scope_add(R, s, t->str);
        break;
    case AST_Tuple:
    case AST_List:
        for (uint32_t i = 0; i < t->n; i++)
            collect_targets(R, s, t->items[i]);
        break;
    case AST_Starred:
        collect_targets(R, s, t->a);
        break;
    default:
        break;
    }
}

static void resolve(resolver *R, ast_node *x, scope *s);

static void resolve_name(ast_node *x, scope *s)
{
    x->flags = 0;
    x->slot = -1;
    for (scope *p = s; p; p = p->parent) {
        for (uint32_t i = 0; i < p->n; i++) {
            if (!strcmp(p->names[i], x->str)) {
                x->slot = p->slots[i];
                if (p != s) x->flags |= NF_FREE;
                return;
            }
        }
    }
    if (!s && !strcmp(x->str, "session")) {
        x->flags |= NF_SESSION;
        return;
    }
    val *b = v_builtin_lookup(x->str);
    if (b) {
        x->cache = b;
        x->flags |= NF_BUILTIN;
    }
}

static void resolve_comp(resolver *R, ast_node *x, scope *outer)
{
    scope s = {.parent = outer};
    for (uint32_t i = 0; i < x->n; i++)
        collect_targets(R, &s, x->items[i]->a);
    /* The comprehension's own slot range, reset on entry. */
    x->slot = s.n ? s.slots[0] : 0;
    x->flags = 0;
    /* the slot count rides in the pointer field; read back as an integer */
    x->cache = (void *)(uintptr_t)s.n; // NOLINT(performance-no-int-to-ptr)
    for (uint32_t i = 0; i < x->n; i++) {
        ast_node *g = x->items[i];
        resolve(R, g->b, i == 0 ? outer : &s);
        resolve(R, g->a, &s);
        for (uint32_t j = 0; j < g->n; j++)
            resolve(R, g->items[j], &s);
    }
    if (x->a) resolve(R, x->a, &s);
    if (x->b) resolve(R, x->b, &s);
    free(s.names);
    free(s.slots);
}

static int foldable(const ast_node *x);

static void resolve(resolver *R, ast_node *x, scope *s)
{
    if (!x) return;
    if ((x->kind == AST_BinOp || x->kind == AST_UnaryOp || x->kind == AST_Subscript ||
         (x->kind == AST_Tuple && x->ctx != CTX_STORE)) &&
        foldable(x))
        x->flags |= NF_FOLD;
    switch (x->kind) {
    case AST_Name:
        resolve_name(x, s);
        return;
    case AST_ListComp:
    case AST_SetComp:
    case AST_DictComp:
        resolve_comp(R, x, s);
        return;
    default:
        break;
    }
    resolve(R, x->a, s);
    resolve(R, x->b, s);
    resolve(R, x->c, s);
    for (uint32_t i = 0; i < x->n && x->items; i++)
        resolve(R, x->items[i], s);
    for (uint32_t i = 0; i < x->n2 && x->items2; i++)
        resolve(R, x->items2[i], s);
}

/* ---- evaluation ------------------------------------------------------- */

typedef struct {
    vctx *c;
    val **slots;
    /* The source's constants, one object per constant key (const_share):
     * malloc'd, each value rooted when its node cached it. */
    val **consts;
    size_t nconsts, consts_cap;
} E;

static val *ev(E *e, ast_node *x);

/* Whether a and b have the same constant key (CPython's
 * _PyCode_ConstantKey): the same type all the way down and equal values,
 * 0.0 and -0.0 apart, a NaN equal to nothing. */
static int same_const(E *e, val *a, val *b)
{
    vtype t = v_type(a);
    if (t != v_type(b)) return 0;
    switch (t) {
    case VT_FLOAT:
        return a->u.f == b->u.f && signbit(a->u.f) == signbit(b->u.f);
    case VT_COMPLEX:
        return a->u.cx.re == b->u.cx.re && a->u.cx.im == b->u.cx.im &&
               signbit(a->u.cx.re) == signbit(b->u.cx.re) &&
               signbit(a->u.cx.im) == signbit(b->u.cx.im);
    case VT_TUPLE:
        if (a->u.seq.len != b->u.seq.len) return 0;
        for (size_t i = 0; i < a->u.seq.len; i++)
            if (!same_const(e, a->u.seq.items[i], b->u.seq.items[i])) return 0;
        return 1;
    case VT_INT:
    case VT_STR:
    case VT_BYTES:
        return v_eq(e->c, a, b) == 1;
    default:
        return a == b; /* None, bools, Ellipsis: one object each */
    }
}

/* The one object of v's constant key in this source: CPython merges equal
 * constants of one compilation (after folding), so '-3' is '-3' and
 * (1, 2) is (1, 2) are True. v itself if it is the first; NULL (a memory
 * limit) when the list cannot grow. Called once per constant node. */
static val *const_share(E *e, val *v)
{
    if (v_is_tagged(v)) return v; /* equal tagged ints are one value already */
    for (size_t i = 0; i < e->nconsts; i++)
        if (same_const(e, e->consts[i], v)) return e->consts[i];
    if (e->nconsts == e->consts_cap) {
        size_t cap = e->consts_cap ? e->consts_cap * 2 : 16;
        val **grown = realloc(e->consts, cap * sizeof *grown);
        if (grown == NULL) return v_limit(e->c, "memory");
        e->consts = grown;
        e->consts_cap = cap;
    }
    if (v_root(e->c, v)) return NULL;
    e->consts[e->nconsts++] = v;
    return v;
}

static val *const_value(E *e, ast_node *x)
{
    if (x->cache) return x->cache;
    val *v = NULL;
    switch (x->op) {
    case CONST_NONE:
        v = v_none();
        break;
    case CONST_TRUE:
        v = v_true();
        break;
    case CONST_FALSE:
        v = v_false();
        break;
    case CONST_INT:
        v = v_int_parse(e->c, x->str, x->len, x->flags ? x->flags : 10);
        break;
    case CONST_FLOAT:
        v = v_float(e->c, x->f);
        break;
    case CONST_STR:
        v = v_str(e->c, x->str, x->len);
        break;
    case CONST_BYTES:
        v = v_bytes(e->c, x->str, x->len);
        break;
    case CONST_ELLIPSIS:
        v = v_ellipsis();
        break;
    case CONST_IMAG:
        v = v_complex(e->c, 0.0, x->f);
        break;
    default:
        break;
    }
    if (!v && !v_failed(e->c)) v = v_raise(e->c, "SystemError", "bad constant");
    if (v) v = const_share(e, v);
    x->cache = v;
    return v;
}

static val *name_value(E *e, ast_node *x)
{
    if (x->slot >= 0) {
        val *v = e->slots[x->slot];
        if (v) return v;
        if (x->flags & NF_FREE)
            return v_raise(e->c, "NameError",
                           "cannot access free variable '%s' where it is not associated with a "
                           "value in enclosing scope",
                           x->str);
        return v_raise(e->c, "UnboundLocalError",
                       "cannot access local variable '%s' where it is not associated with a value",
                       x->str);
    }
    if (x->flags & NF_BUILTIN) return x->cache;
    if (x->flags & NF_SESSION) {
        val *s = v_session(e->c);
        if (s) return s;
    }
    return v_raise(e->c, "NameError", "name '%s' is not defined", x->str);
}

static vbinop binop_of(int op)
{
    switch (op) {
    case OPK_Add:
        return BIN_ADD;
    case OPK_Sub:
        return BIN_SUB;
    case OPK_Mult:
        return BIN_MUL;
    case OPK_Div:
        return BIN_DIV;
    case OPK_FloorDiv:
        return BIN_FLOORDIV;
    case OPK_Mod:
        return BIN_MOD;
    default:
        return BIN_POW;
    }
}

/* Two tagged ints: the common arithmetic without a call, when the result
 * stays tagged; NULL to take the general path (overflow, a zero divisor,
 * another operator). */
static val *tagged_binop(int op, val *l, val *r)
{
    int64_t x = v_untag(l), y = v_untag(r), z;
    switch (op) {
    case OPK_Add:
        z = x + y; /* both within 62 bits: no int64 overflow */
        break;
    case OPK_Sub:
        z = x - y;
        break;
    case OPK_Mult:
        if (__builtin_mul_overflow(x, y, &z)) return NULL;
        break;
    case OPK_Mod:
        if (y <= 0) return NULL;
        z = x % y;
        if (z < 0) z += y;
        break;
    case OPK_FloorDiv:
        if (y <= 0) return NULL;
        z = x / y - (x % y < 0);
        break;
    default:
        return NULL;
    }
    return v_tag_fits(z) ? v_tag(z) : NULL;
}

/* OPK_Eq..OPK_GtE run in vcmpop's order. */
_Static_assert(CMP_EQ == 0 && OPK_NotEq - OPK_Eq == CMP_NE && OPK_Lt - OPK_Eq == CMP_LT &&
                   OPK_LtE - OPK_Eq == CMP_LE && OPK_Gt - OPK_Eq == CMP_GT &&
                   OPK_GtE - OPK_Eq == CMP_GE,
               "the comparison operators and vcmpop differ in order");

/* Comparison of one pair; 1/0/-1. Two tagged ints are compared here, without
 * the call. */
static int compare(E *e, int op, val *l, val *r)
{
    if (op >= OPK_Eq && op <= OPK_GtE) {
        vcmpop cop = (vcmpop)(op - OPK_Eq);
        if (v_is_tagged(l) && v_is_tagged(r)) return v_tagged_compare(cop, l, r);
        return v_compare(e->c, cop, l, r);
    }
    switch (op) {
    case OPK_Is:
        return v_is(l, r);
    case OPK_IsNot:
        return !v_is(l, r);
    case OPK_In:
        return v_contains(e->c, r, l);
    case OPK_NotIn: {
        int k = v_contains(e->c, r, l);
        return k < 0 ? -1 : !k;
    }
    default:
        return -1;
    }
}

/* Assigns `v` to a comprehension target. */
static int assign(E *e, ast_node *t, val *v)
{
    if (t->kind == AST_Name) {
        e->slots[t->slot] = v;
        return 0;
    }
    if (t->kind == AST_Tuple || t->kind == AST_List) {
        val **items;
        size_t n;
        if (v_type(v) == VT_TUPLE || v_type(v) == VT_LIST) {
            items = v->u.seq.items;
            n = v->u.seq.len;
        } else {
            viter it;
            if (v_iter_init(e->c, v, &it) < 0) {
                if (v_exc_kind(e->c) == VEXC_PY && !strcmp(v_exc_type(e->c), "TypeError")) {
                    const char *tn = v_type_name(v);
                    v_exc_clear(e->c);
                    v_raise(e->c, "TypeError", "cannot unpack non-iterable %s object", tn);
                }
                return -1;
            }
            if (v_iter_collect(e->c, v, &items, &n) < 0) return -1;
        }
        if (n != t->n) {
            if (n > t->n)
                v_raise(e->c, "ValueError", "too many values to unpack (expected %u)", t->n);
            else
                v_raise(e->c, "ValueError", "not enough values to unpack (expected %u, got %zu)",
                        t->n, n);
            return -1;
        }
        for (uint32_t i = 0; i < t->n; i++)
            if (assign(e, t->items[i], items[i])) return -1;
        return 0;
    }
    if (t->kind == AST_Attribute) {
        val *obj = ev(e, t->a);
        if (!obj) return -1;
        v_raise(e->c, "AttributeError", "'%s' object attribute '%s' is read-only", v_type_name(obj),
                t->str);
        return -1;
    }
    if (t->kind == AST_Subscript) {
        val *obj = ev(e, t->a);
        if (!obj) return -1;
        v_raise(e->c, "TypeError", "'%s' object does not support item assignment",
                v_type_name(obj));
        return -1;
    }
    v_raise(e->c, "SystemError", "bad assignment target");
    return -1;
}

typedef struct {
    ast_node *comp;
    vbuild list; /* ListComp */
    val *coll;   /* SetComp / DictComp */
} comp_state;

static int comp_emit(E *e, comp_state *cs)
{
    ast_node *x = cs->comp;
    if (x->kind == AST_DictComp) {
        val *k = ev(e, x->a);
        if (!k) return -1;
        val *v = ev(e, x->b);
        if (!v) return -1;
        return v_dict_set(e->c, cs->coll, k, v);
    }
    val *v = ev(e, x->a);
    if (!v) return -1;
    if (x->kind == AST_SetComp) return v_set_add(e->c, cs->coll, v);
    return v_build_push(e->c, &cs->list, v);
}

static int comp_loop(E *e, comp_state *cs, uint32_t gi, val *first_iter)
{
    ast_node *g = cs->comp->items[gi];
    val *src = first_iter;
    if (!src) {
        src = ev(e, g->b);
        if (!src) return -1;
    }
    viter it;
    if (v_iter_init(e->c, src, &it) < 0) return -1;
    for (;;) {
        val *item = v_iter_next(e->c, &it);
        if (!item) return v_failed(e->c) ? -1 : 0;
        if (v_step(e->c)) return -1;
        if (assign(e, g->a, item)) return -1;
        int ok = 1;
        for (uint32_t j = 0; j < g->n; j++) {
            val *c = ev(e, g->items[j]);
            if (!c) return -1;
            if (!v_truthy(c)) {
                ok = 0;
                break;
            }
        }
        if (!ok) continue;
        if (gi + 1 < cs->comp->n) {
            if (comp_loop(e, cs, gi + 1, NULL)) return -1;
        } else if (comp_emit(e, cs)) {
            return -1;
        }
    }
}

/* Iterables whose item count is their len() and known before iterating. */
static bool sized(val *v)
{
    switch (v_type(v)) {
    case VT_LIST:
    case VT_TUPLE:
    case VT_RANGE:
    case VT_DICT:
    case VT_SET:
    case VT_DICT_KEYS:
    case VT_DICT_VALUES:
    case VT_DICT_ITEMS:
        return true;
    default:
        return false;
    }
}

static val *eval_comp(E *e, ast_node *x)
{
    /* The first iterable is evaluated in the enclosing scope, before entry. */
    val *first = ev(e, x->items[0]->b);
    if (!first) return NULL;
    size_t nloc = (size_t)(uintptr_t)x->cache;
    for (size_t i = 0; i < nloc; i++)
        e->slots[x->slot + (int32_t)i] = NULL;
    comp_state cs = {.comp = x};
    if (x->kind == AST_ListComp && x->n == 1 && x->items[0]->n == 0 && sized(first)) {
        int64_t n = v_len(e->c, first);
        if (n < 0 || v_build_presize(e->c, &cs.list, (size_t)n)) return NULL;
    }
    if (x->kind == AST_SetComp)
        cs.coll = v_set_new(e->c, 0);
    else if (x->kind == AST_DictComp)
        cs.coll = v_dict_new(e->c, 0);
    if (x->kind != AST_ListComp && !cs.coll) return NULL;
    int rc = comp_loop(e, &cs, 0, first);
    val *res = cs.coll;
    if (!rc && x->kind == AST_ListComp) res = v_build_list(e->c, &cs.list);
    v_build_free(&cs.list);
    return rc ? NULL : res;
}

static val *eval_dict(E *e, ast_node *x)
{
    val *d = v_dict_new(e->c, x->n);
    if (!d) return NULL;
    for (uint32_t i = 0; i < x->n; i++) {
        if (!x->items[i]) { /* {**m} */
            val *m = ev(e, x->items2[i]);
            if (!m) return NULL;
            if (v_type(m) != VT_DICT)
                return v_raise(e->c, "TypeError", "'%s' object is not a mapping", v_type_name(m));
            if (v_dict_force(e->c, m)) return NULL;
            for (size_t j = 0; j < m->u.t.len; j++) {
                ventry *en = &m->u.t.entries[j];
                if (!en->key) continue;
                if (v_dict_set(e->c, d, en->key, en->value)) return NULL;
            }
            continue;
        }
        val *k = ev(e, x->items[i]);
        if (!k) return NULL;
        val *v = ev(e, x->items2[i]);
        if (!v) return NULL;
        if (v_dict_set(e->c, d, k, v)) return NULL;
    }
    return d;
}

#define SMALL_ARGS 8

static val *eval_call(E *e, ast_node *x)
{
    ast_node *f = x->a;
    val *recv = NULL, *callee = NULL;
    if (f->kind == AST_Attribute) {
        recv = ev(e, f->a);
        if (!recv) return NULL;
        /* The attribute is looked up before the arguments are evaluated.
         * The node remembers the last receiver type that has the method
         * (a builtin's answer depends on which builtin: never kept). */
        uintptr_t seen = (uintptr_t)f->cache, t = (uintptr_t)v_type(recv) + 1;
        if (seen != t) {
            if (v_check_method(e->c, recv, f->str) < 0) return NULL;
            if (v_type(recv) != VT_BUILTIN)
                f->cache = (void *)t; // NOLINT(performance-no-int-to-ptr)
        }
    } else {
        callee = ev(e, f);
        if (!callee) return NULL;
    }
    val *argbuf[SMALL_ARGS];
    val **args = argbuf;
    if (x->n > SMALL_ARGS) {
        args = v_alloc(e->c, x->n * sizeof *args);
        if (!args) return NULL;
    }
    for (uint32_t i = 0; i < x->n; i++) {
        args[i] = ev(e, x->items[i]);
        if (!args[i]) return NULL;
    }
    vkwarg kwbuf[SMALL_ARGS];
    vkwarg *kw = kwbuf;
    size_t nkw = 0, kwcap = SMALL_ARGS;
    for (uint32_t i = 0; i < x->n2; i++) {
        ast_node *k = x->items2[i];
        val *v = ev(e, k->a);
        if (!v) return NULL;
        size_t add = 1;
        if (!k->str) {
            if (v_type(v) != VT_DICT) {
                const char *fn = f->kind == AST_Attribute ? f->str
                                 : f->kind == AST_Name    ? f->str
                                                          : "function";
                return v_raise(e->c, "TypeError",
                               "%s() argument after ** must be a mapping, not %s", fn,
                               v_type_name(v));
            }
            if (v_dict_force(e->c, v)) return NULL;
            add = v->u.t.len;
        }
        if (nkw + add > kwcap) {
            size_t nc = (nkw + add) * 2;
            vkwarg *nk = v_alloc(e->c, nc * sizeof *nk);
            if (!nk) return NULL;
            memcpy(nk, kw, nkw * sizeof *nk);
            kw = nk;
            kwcap = nc;
        }
        if (k->str) {
            for (size_t j = 0; j < nkw; j++)
                if (!strcmp(kw[j].name, k->str))
                    return v_raise(
                        e->c, "TypeError", "%s() got multiple values for keyword argument '%s'",
                        f->kind == AST_Name || f->kind == AST_Attribute ? f->str : "function",
                        k->str);
            kw[nkw].name = k->str;
            kw[nkw].value = v;
            nkw++;
            continue;
        }
        for (size_t j = 0; j < v->u.t.len; j++) {
            ventry *en = &v->u.t.entries[j];
            if (!en->key) continue;
            if (v_type(en->key) != VT_STR)
                return v_raise(e->c, "TypeError", "keywords must be strings");
            char *name = v_strdup(e->c, en->key->u.s.s, en->key->u.s.blen);
            if (!name) return NULL;
            for (size_t m = 0; m < nkw; m++)
                if (!strcmp(kw[m].name, name))
                    return v_raise(
                        e->c, "TypeError", "%s() got multiple values for keyword argument '%s'",
                        f->kind == AST_Name || f->kind == AST_Attribute ? f->str : "function",
                        name);
            kw[nkw].name = name;
            kw[nkw].value = en->value;
            nkw++;
        }
    }
    if (recv) return v_call_method(e->c, recv, f->str, args, x->n, kw, nkw);
    return v_call(e->c, callee, args, x->n, kw, nkw);
}

static val *eval_joined(E *e, ast_node *x)
{
    if (x->n == 1 && x->items[0]->kind == AST_Constant) return const_value(e, x->items[0]);
    /* the parts, in memory the collector scans, joined once at the end */
    val **parts = v_alloc(e->c, x->n * sizeof *parts);
    if (!parts) return NULL;
    for (uint32_t i = 0; i < x->n; i++) {
        ast_node *p = x->items[i];
        if (p->kind == AST_Constant) {
            if (!(parts[i] = const_value(e, p))) return NULL;
            continue;
        }
        /* CPython's order: the value, then the format spec's fields, then
         * the conversion and the formatting (FORMAT_VALUE). */
        val *v = ev(e, p->a);
        if (!v) return NULL;
        val *spec = NULL;
        if (p->b) {
            spec = eval_joined(e, p->b);
            if (!spec) return NULL;
        }
        if (p->op == 's')
            v = v_tostr(e->c, v);
        else if (p->op == 'r')
            v = v_repr(e->c, v);
        else if (p->op == 'a')
            v = v_ascii(e->c, v);
        if (!v) return NULL;
        val *s = (!spec && v_type(v) == VT_STR) ? v : v_format(e->c, v, spec);
        if (!s) return NULL;
        parts[i] = s;
        if (v_step(e->c)) return NULL;
    }
    return v_str_concat_n(e->c, parts, x->n);
}

/* CPython's AST optimizer (ast_opt.c) folds constant operations before
 * compile.c decides whether a set display is all constants: a Constant, a
 * unary or binary operation on folded constants, a tuple of them, or a
 * subscript of them. (Str/bytes % is never folded.) */
static int foldable(const ast_node *x)
{
    switch (x->kind) {
    case AST_Constant:
        return 1;
    case AST_UnaryOp:
        return foldable(x->a);
    case AST_BinOp:
        if (x->op == OPK_Mod && x->a->kind == AST_Constant &&
            (x->a->op == CONST_STR || x->a->op == CONST_BYTES))
            return 0;
        return foldable(x->a) && foldable(x->b);
    case AST_Tuple:
        for (uint32_t i = 0; i < x->n; i++)
            if (!foldable(x->items[i])) return 0;
        return 1;
    case AST_Subscript:
        return x->b->kind != AST_Slice && foldable(x->a) && foldable(x->b);
    default:
        return 0;
    }
}

/* The folder's size limits on a folded result (safe_multiply / safe_power /
 * safe_lshift: ints of at most 128 bits, strings of 4096, tuples of 256). */
static int fold_size_ok(const ast_node *x, const val *v)
{
    if (x->kind != AST_BinOp || (x->op != OPK_Mult && x->op != OPK_Pow)) return 1;
    if (v_type(v) == VT_INT) {
        mpz_ptr z = vi_big(v);
        return z == NULL || mpz_sizeinbase(z, 2) <= 128;
    }
    if (v_type(v) == VT_STR || v_type(v) == VT_BYTES) return v->u.s.clen <= 4096;
    if (v_type(v) == VT_TUPLE) return v->u.seq.len <= 256;
    return 1;
}

/* The folder's limits, checked on the operands before it computes
 * (ast_opt.c's safe_multiply, safe_power, safe_lshift, safe_mod, with
 * MAX_INT_SIZE 128 bits, MAX_COLLECTION_SIZE 256, MAX_STR_SIZE 4096,
 * MAX_TOTAL_ITEMS 1024): 1 when the operation would be folded. */
#define FOLD_INT_BITS 128
#define FOLD_COLLECTION 256
#define FOLD_STR 4096
#define FOLD_TOTAL_ITEMS 1024

static size_t int_bits(const val *v)
{
    if (v_type(v) == VT_BOOL) return v->u.b ? 1 : 0;
    mpz_ptr z = vi_big(v);
    if (z) return mpz_sgn(z) ? mpz_sizeinbase(z, 2) : 0;
    int64_t i = 0;
    (void)vi_small(v, &i);
    uint64_t u = i < 0 ? -(uint64_t)i : (uint64_t)i;
    return u ? (size_t)(64 - __builtin_clzll(u)) : 0;
}

/* The int as a C long, or -1 when it is negative or does not fit (CPython's
 * PyLong_AsLong fails, and the folder gives up, on those). */
static int64_t fold_count(const val *v)
{
    if (v_type(v) == VT_BOOL) return v->u.b;
    int64_t n;
    return v_as_i64(v, &n) && n >= 0 ? n : -1;
}

static int64_t tuple_complexity(const val *t, int64_t limit)
{
    limit -= (int64_t)t->u.seq.len;
    for (size_t i = 0; limit >= 0 && i < t->u.seq.len; i++)
        if (v_type(t->u.seq.items[i]) == VT_TUPLE)
            limit = tuple_complexity(t->u.seq.items[i], limit);
    return limit;
}

static int fold_ok(int op, const val *l, const val *r)
{
    int li = v_is_intlike(l), ri = v_is_intlike(r);
    switch (op) {
    case OPK_Mult: {
        if (li && ri)
            return !int_bits(l) || !int_bits(r) || int_bits(l) + int_bits(r) <= FOLD_INT_BITS;
        if (!li && ri) { /* safe_multiply(w, v) */
            const val *t = l;
            l = r;
            r = t;
            li = 1;
        }
        if (!li) return 1;
        vtype t = v_type(r);
        if (t == VT_TUPLE) {
            size_t size = r->u.seq.len;
            if (!size) return 1;
            int64_t n = fold_count(l);
            if (n < 0 || (size_t)n > FOLD_COLLECTION / size) return 0;
            return !n || tuple_complexity(r, FOLD_TOTAL_ITEMS / n) >= 0;
        }
        if (t == VT_STR || t == VT_BYTES) {
            size_t size = t == VT_STR ? r->u.s.clen : r->u.s.blen;
            if (!size) return 1;
            int64_t n = fold_count(l);
            return n >= 0 && (size_t)n <= FOLD_STR / size;
        }
        return 1;
    }
    case OPK_Pow: {
        if (!li || !ri || !int_bits(l)) return 1;
        int64_t w;
        if (v_type(r) == VT_BOOL)
            w = r->u.b;
        else if (!v_as_i64(r, &w))
            return mpz_sgn(vi_big(r)) < 0; /* beyond int64: folded only when negative */
        if (w <= 0) return 1;
        return int_bits(l) <= FOLD_INT_BITS / (size_t)w;
    }
    case OPK_LShift: {
        if (!li || !ri || !int_bits(l) || !int_bits(r)) return 1;
        int64_t w = fold_count(r);
        if (w < 0) return 0;
        return w <= FOLD_INT_BITS && int_bits(l) <= FOLD_INT_BITS - (size_t)w;
    }
    case OPK_Mod:
        return v_type(l) != VT_STR && v_type(l) != VT_BYTES;
    default:
        return 1;
    }
}

/* Whether a child of a folding node has folded (is a constant now). */
static int folded(const ast_node *x)
{
    return x->kind == AST_Constant || (fold_marked(x) && x->cache != NULL);
}

/* A node of folded constants, as CPython's AST optimizer treats it: computed
 * once, when its operands folded and the folder's limits allow, then kept
 * (shared with every equal constant of the source) as a constant is; a node
 * that does not fold is evaluated as usual from then on. An operation that
 * raises is never folded: it raises each time. */
static val *ev_fold(E *e, ast_node *x)
{
    if (x->cache) return x->cache;
    x->flags &= (uint8_t)~NF_FOLD; /* evaluated as usual, this once */
    val *v = ev(e, x);
    if (!v) return NULL;
    int ok = 1;
    switch (x->kind) {
    case AST_BinOp:
        ok = folded(x->a) && folded(x->b) && fold_ok(x->op, x->a->cache, x->b->cache);
        break;
    case AST_UnaryOp:
        ok = folded(x->a);
        break;
    case AST_Subscript:
        ok = folded(x->a) && folded(x->b);
        break;
    case AST_Tuple:
        for (uint32_t i = 0; i < x->n && ok; i++)
            ok = folded(x->items[i]);
        break;
    default:
        ok = 0;
    }
    if (!ok) return v; /* not folded: stays unmarked */
    v = const_share(e, v);
    x->cache = v;
    if (v) x->flags |= NF_FOLD;
    return v;
}

static val *ev(E *e, ast_node *x)
{
    if (v_step(e->c)) return NULL;
    switch (x->kind) {
    case AST_Constant:
        return const_value(e, x);
    case AST_Name:
        return name_value(e, x);
    case AST_Attribute: {
        val *o = ev(e, x->a);
        if (!o) return NULL;
        return v_getattr(e->c, o, x->str);
    }
    case AST_Call:
        return eval_call(e, x);
    case AST_BinOp: {
        if (x->flags & NF_FOLD) return ev_fold(e, x);
        val *l = ev(e, x->a);
        if (!l) return NULL;
        val *r = ev(e, x->b);
        if (!r) return NULL;
        if (v_is_tagged(l) && v_is_tagged(r)) {
            val *t = tagged_binop(x->op, l, r);
            if (t) return t;
        }
        return v_binop(e->c, binop_of(x->op), l, r);
    }
    case AST_UnaryOp: {
        if (x->flags & NF_FOLD) return ev_fold(e, x);
        val *o = ev(e, x->a);
        if (!o) return NULL;
        if (x->op == OPK_Not) return v_bool(!v_truthy(o));
        return v_unop(e->c, x->op == OPK_USub ? UN_NEG : UN_POS, o);
    }
    case AST_BoolOp: {
        val *v = NULL;
        for (uint32_t i = 0; i < x->n; i++) {
            v = ev(e, x->items[i]);
            if (!v) return NULL;
            int t = v_truthy(v);
            if (x->op == OPK_And ? !t : t) break;
        }
        return v;
    }
    case AST_Compare: {
        val *l = ev(e, x->a);
        if (!l) return NULL;
        for (uint32_t i = 0; i < x->n; i++) {
            val *r = ev(e, x->items[i]);
            if (!r) return NULL;
            int k = compare(e, x->ops[i], l, r);
            if (k < 0) return NULL;
            if (!k) return v_false();
            l = r;
        }
        return v_true();
    }
    case AST_IfExp: {
        val *t = ev(e, x->a);
        if (!t) return NULL;
        return ev(e, v_truthy(t) ? x->b : x->c);
    }
    case AST_Subscript: {
        if (x->flags & NF_FOLD) return ev_fold(e, x);
        val *o = ev(e, x->a);
        if (!o) return NULL;
        val *k = ev(e, x->b);
        if (!k) return NULL;
        return v_getitem(e->c, o, k);
    }
    case AST_Slice: {
        val *lo = NULL, *hi = NULL, *st = NULL;
        if (x->a && !(lo = ev(e, x->a))) return NULL;
        if (x->b && !(hi = ev(e, x->b))) return NULL;
        if (x->c && !(st = ev(e, x->c))) return NULL;
        return v_slice(e->c, lo, hi, st);
    }
    case AST_List:
    case AST_Tuple: {
        if (x->flags & NF_FOLD) return ev_fold(e, x);
        val **items = x->n ? v_alloc(e->c, x->n * sizeof *items) : NULL;
        if (x->n && !items) return NULL;
        for (uint32_t i = 0; i < x->n; i++) {
            items[i] = ev(e, x->items[i]);
            if (!items[i]) return NULL;
        }
        return x->kind == AST_List ? v_list_take(e->c, items, x->n)
                                   : v_tuple_take(e->c, items, x->n);
    }
    case AST_Set: {
        if (x->n > 2) {
            int allconst = 1;
            for (uint32_t i = 0; i < x->n && allconst; i++)
                allconst = foldable(x->items[i]);
            if (allconst) {
                val **items = v_alloc(e->c, x->n * sizeof *items);
                if (!items) return NULL;
                for (uint32_t i = 0; i < x->n; i++) {
                    items[i] = ev(e, x->items[i]);
                    if (!items[i]) return NULL;
                    if (!fold_size_ok(x->items[i], items[i])) allconst = 0;
                }
                if (allconst) return v_set_from_constants(e->c, items, x->n);
                val *s = v_set_new(e->c, x->n);
                if (!s) return NULL;
                for (uint32_t i = 0; i < x->n; i++)
                    if (v_set_add(e->c, s, items[i])) return NULL;
                return s;
            }
        }
        val *s = v_set_new(e->c, x->n);
        if (!s) return NULL;
        for (uint32_t i = 0; i < x->n; i++) {
            val *v = ev(e, x->items[i]);
            if (!v || v_set_add(e->c, s, v)) return NULL;
        }
        return s;
    }
    case AST_Dict:
        return eval_dict(e, x);
    case AST_ListComp:
    case AST_SetComp:
    case AST_DictComp:
        return eval_comp(e, x);
    case AST_JoinedStr:
        return eval_joined(e, x);
    case AST_Expression:
        return ev(e, x->a);
    default:
        return v_raise(e->c, "SystemError", "unexpected node %s", ast_kind_name((ast_kind)x->kind));
    }
}

static void put_error(strbuf *out, vctx *c)
{
    strbuf_reset(out);
    if (v_exc_kind(c) == VEXC_LIMIT) {
        strbuf_puts(out, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": ");
    } else {
        strbuf_puts(out, "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": ");
    }
    const char *t = v_exc_type(c);
    strbuf_json_str(out, t && *t ? t : "RuntimeError");
    strbuf_putc(out, '}');
}

void eval_run(lang_kind kind, ast_node *root, const char *eval_key, const void *img, size_t img_len,
              const lang_limits *limits, strbuf *out)
{
    resolver R = {0};
    resolve(&R, root, NULL);
    vlimits vl = {0};
    if (limits) {
        vl.max_steps = limits->max_steps;
        vl.max_alloc_bytes = limits->max_alloc_bytes;
    }
    vctx *c = vctx_new(&vl, img, img_len);
    if (!c || R.oom) {
        strbuf_puts(out, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"memory\"}");
        if (c) vctx_free(c);
        return;
    }
    if (limits && (limits->flags & LANG_IMAGE_MAPPED)) v_session_image_mapped(c);
    uint64_t alloc0 = v_total_alloc_bytes();
    E e = {.c = c};
    e.slots = R.nslots ? v_alloc(c, (size_t)R.nslots * sizeof(val *)) : NULL;
    val *v = (R.nslots && !e.slots) ? NULL : ev(&e, root);
    free(e.consts);
    size_t start = out->len;
    if (v) {
        strbuf_puts(out, "{\"ok\": true, ");
        int rc = 0;
        if (kind == LANG_RAW) {
            strbuf r;
            strbuf_init(&r);
            rc = v_repr_buf(c, &r, v);
            if (!rc) {
                strbuf_puts(out, "\"repr\": ");
                strbuf_json_strn(out, r.data ? r.data : "", r.len);
            }
            strbuf_free(&r);
        } else {
            /* The value runtime applies the type check and the reference's
             * object-repr guard before building the outcome fields. */
            rc = kind == LANG_CONDITION ? v_condition_outcome(c, v, out)
                                        : v_evaluator_outcome(c, v, eval_key, out);
        }
        strbuf_putc(out, '}');
        if (rc) v = NULL;
    }
    if (!v) {
        strbuf tmp;
        strbuf_init(&tmp);
        put_error(&tmp, c);
        out->len = start;
        if (out->data) out->data[start] = 0;
        strbuf_put(out, tmp.data, tmp.len);
        strbuf_free(&tmp);
    } else if (out->len - start > MAX_OUTCOME_BYTES) {
        out->len = start;
        out->data[start] = 0;
        strbuf_puts(out, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"output\"}");
    }
    if (limits && limits->stats) {
        limits->stats->steps = ((struct vctx_hot *)c)->steps;
        limits->stats->alloc_bytes = v_total_alloc_bytes() - alloc0;
    }
    vctx_free(c);
}
