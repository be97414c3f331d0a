/* sandbox/lang/value: the value runtime of the managed-evaluation language
 * (docs/LANGUAGE.md): representation, arena, exception state, limits,
 * and every operation the evaluator (eval.c) performs on values, with
 * CPython 3.11's semantics (values, str/repr text, exception type names).
 *
 * Memory: values live in a garbage-collected heap (libgc, see alloc.c) and
 * are reclaimed once the evaluation can no longer reach them; the budget
 * counts live bytes. Values are immutable after construction (the subset has
 * no mutating methods), so sharing is always safe. None/True/False are
 * singletons; ints up to 62 bits are tagged words, no allocation at all.
 *
 * Errors: every fallible function returns NULL (or -1) and leaves the
 * exception in the context: either a Python exception (type name such as
 * "TypeError" + message) or a limit ("memory" | "steps" | "output" ...).
 * Nothing here crashes or exits on bad input.
 *
 * Implementation, one file per concept: alloc.c (the collector, the
 * budget, vctx), exc.c (exceptions, steps), value.c (core: constructors,
 * truthiness, equality/hash/order, repr dispatch, iteration, subscript,
 * attributes, dispatch of calls), int.c, float.c, str.c, bytes.c,
 * containers.c (list/tuple/dict/set/range), format.c (format spec + %),
 * builtins.c, result.c (Score ... ConditionResult + result items),
 * session.c (session/events over the image of simg.c). */
#ifndef FPS_VALUE_H
#define FPS_VALUE_H
#include "common/strbuf.h"

#include <gmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- types ------------------------------------------------------------ */

typedef enum {
    VT_NONE = 0,
    VT_BOOL,
    VT_INT,
    VT_FLOAT,
    VT_STR,
    VT_BYTES,
    VT_TUPLE,
    VT_LIST,
    VT_DICT,
    VT_SET,
    VT_RANGE,
    VT_SLICE,   /* only produced by Subscript(Slice) */
    VT_SESSION, /* SessionTranscript (reads the image) */
    VT_EVENT,   /* TranscriptEvent */
    VT_BUILTIN, /* a builtin function or class (len, str, Score, ...) */
    VT_SCORE,
    VT_METRIC,
    VT_ASSERTION,
    VT_EVALRESULT,
    VT_CONDRESULT,
    VT_DICT_KEYS, /* views from dict.keys()/values()/items(): u.rec.f[0] = the dict */
    VT_DICT_VALUES,
    VT_DICT_ITEMS,
    VT_COMPLEX,  /* u.cx */
    VT_ELLIPSIS, /* the Ellipsis singleton (`...`) */
    VT_BIGRANGE, /* a range whose bounds or length do not fit int64 (u.rb); type name "range" */
    VT__COUNT
} vtype;

typedef struct val val;
typedef struct vctx vctx;

/* A dict/set entry (dict: key+value; set: value NULL). Insertion ordered. */
typedef struct {
    val *key;
    val *value;
    int64_t hash;
} ventry;

/* A set slot: CPython's setentry (16 bytes, not a dict entry's 24). */
typedef struct {
    val *key;
    int64_t hash;
} vsentry;

typedef struct {
    union {
        ventry *entries;   /* dict: len entries in insertion order */
        vsentry *sentries; /* set: mask+1 slots laid out as CPython's setobject
                              (key NULL = empty, key == dummy = deleted) */
    };
    size_t len;     /* live entries */
    int32_t *index; /* dict: open-addressing table of entry indexes, -1 empty */
    size_t mask;    /* table size - 1 */
    size_t fill;    /* set: live + dummy slots; dict: entries capacity */
} vtable;

struct val {
    uint8_t ty;    /* vtype; read it through v_type() (a tagged int has none) */
    uint8_t flags; /* VF_* */
    union {
        bool b; /* VT_BOOL */
        struct {
            int64_t small;
            mpz_ptr big;
        } ib;     /* a boxed VT_INT: big==NULL => small (outside the tagged
                     range, inside int64); read through vi_small/vi_big */
        double f; /* VT_FLOAT */
        struct {
            double re, im;
        } cx;              /* VT_COMPLEX */
        struct {           /* VT_STR (UTF-8), VT_BYTES */
            const char *s; /* not necessarily NUL-terminated */
            uint32_t blen; /* bytes (at most VLIMIT_STR_BYTES) */
            uint32_t clen; /* code points (== blen for bytes / ASCII) */
            int64_t hash;  /* cached; 0 = not computed yet */
        } s;
        struct {
            val **items;
            size_t len;
        } seq;    /* VT_TUPLE, VT_LIST */
        vtable t; /* VT_DICT, VT_SET */
        struct {
            int64_t start, stop, step, len;
        } r; /* VT_RANGE */
        struct {
            mpz_ptr start, stop, step, len;
        } rb; /* VT_BIGRANGE */
        struct {
            val *lo, *hi, *step;
        } sl; /* VT_SLICE (NULL = None) */
        struct {
            const void *img;
            size_t len;
            val *events;
        } sess; /* VT_SESSION */
        struct {
            const void *img;
            uint32_t index; /* its payload, once read: vctx's payloads[index] */
        } ev;               /* VT_EVENT: holds no value, so never scanned */
        struct {
            int id;
        } bi; /* VT_BUILTIN: vbuiltin_id */
        struct {
            val *f[6];
        } rec; /* result types: fields in declaration order */
    } u;
};

enum {
    VF_ASCII = 1, /* VT_STR: every code point < 128 (byte index == char index) */
    VF_LAZY = 2,  /* VT_DICT: a payload object still in the session image; its
                     vtable is not built (len reads 0): call v_dict_force before
                     reading u.t directly */
};

/* ---- context, arena, exceptions, limits ------------------------------ */

/* Defaults. The heap budget bounds everything else: the size caps sit above
 * what the budget lets one value reach, so a value too big for it ends as
 * "memory" exactly where CPython under the same address space raises
 * MemoryError, while the caps keep size arithmetic far from overflow. */
/* Steps: about 30 s of the evaluator's fastest loops (sum/max over a range
 * run 44 M steps/s, a dict comprehension 110 M, a bare list comprehension
 * 122 M; Release build, tests/bench/lang/bench_scale.py --steps), so what
 * CPython finishes inside the reference's 30 s is not cut short here; the
 * wall-clock timeout and RLIMIT_CPU end longer work. */
#define VLIMIT_STEPS 4000000000ull
#define VLIMIT_ALLOC_BYTES ((size_t)448 << 20)
#define VLIMIT_STR_BYTES ((size_t)1 << 31)
_Static_assert(VLIMIT_STR_BYTES <= UINT32_MAX, "a str's byte and code point counts are 32-bit");
#define VLIMIT_ITEMS ((size_t)1 << 28)
#define VLIMIT_INT_BITS_MIN ((size_t)1000000)

typedef struct {
    uint64_t max_steps;     /* default VLIMIT_STEPS */
    size_t max_alloc_bytes; /* live heap budget, default VLIMIT_ALLOC_BYTES */
    size_t max_str_bytes;   /* one str/bytes, default and at most VLIMIT_STR_BYTES */
    size_t max_items;       /* one collection, default VLIMIT_ITEMS */
    size_t max_int_bits;    /* one int, default max_alloc_bytes / 2 bits */
} vlimits;

/* Outcome kinds of a failure. */
typedef enum { VEXC_NONE = 0, VEXC_PY, VEXC_LIMIT } vexc_kind;

/* Creates a context. `limits` may be NULL (defaults); zero fields are
 * defaults. `img`/`img_len`: the validated session image (may be NULL). */
vctx *vctx_new(const vlimits *limits, const void *img, size_t img_len);
void vctx_free(vctx *c);

/* Allocation from the collected heap (see alloc.c). Returns NULL and sets
 * the "memory" limit when the live heap would pass the budget. Memory is
 * zeroed. */
void *v_alloc(vctx *c, size_t size);
/* Copies bytes into the heap (NUL-terminated). */
char *v_strdup(vctx *c, const char *s, size_t len);
/* A list under construction (comprehensions, split): push items, then
 * v_build_list makes the list (exact size) and releases the builder;
 * v_build_free releases it on an error path. Zero-initialise it. */
typedef struct {
    val **v;
    size_t n, cap;
    bool in_heap; /* presized: v is the list's own array in the collected heap */
    bool mapped;  /* v is its own mapping (a big list, see alloc.c) */
    bool rooted;  /* v is registered as a root: it holds a value pointer */
} vbuild;
/* When the final length is known (a comprehension without conditions over
 * one sized iterable): the array is allocated once at that size and becomes
 * the list's own, so the list never exists twice. 0 or -1. */
int v_build_presize(vctx *c, vbuild *b, size_t n);
int v_build_push(vctx *c, vbuild *b, val *x); /* 0, or -1 with "memory" */
val *v_build_list(vctx *c, vbuild *b);
void v_build_free(vbuild *b);
/* Keeps `v` alive for the context's lifetime although the only reference
 * to it is in memory the collector does not scan (the AST). 0 or -1. */
int v_root(vctx *c, val *v);
/* Bytes in use in the collected heap (live, plus garbage not yet swept). */
size_t v_live_bytes(void);
/* Bytes allocated from the collected heap since the process started. */
uint64_t v_total_alloc_bytes(void);

/* Steps: the evaluator calls v_step once per node evaluated (and runtime
 * loops charge themselves). Returns 0, or -1 with the "steps" limit set. */
int v_steps(vctx *c, uint64_t n);
static inline int v_step(vctx *c);

/* Raising. Always return NULL so `return v_raise(...)` works. */
val *v_raise(vctx *c, const char *type, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
val *v_limit(vctx *c, const char *kind); /* "memory" | "steps" | "output" | "timeout" */
vexc_kind v_exc_kind(const vctx *c);
const char *v_exc_type(const vctx *c); /* Python type name or limit kind; "" if none */
void v_exc_clear(vctx *c);
bool v_failed(const vctx *c);

/* ---- constructors ----------------------------------------------------- */

val *v_none(void);
val *v_true(void);
val *v_false(void);
val *v_bool(bool b);
val *v_int64(vctx *c, int64_t i);       /* tagged (no allocation) in VTAG_MIN..VTAG_MAX */
val *v_int_mpz(vctx *c, const mpz_t z); /* copies; normalizes to small */
val *v_int_parse(vctx *c, const char *s, size_t len,
                 int base); /* literal text (underscores ok); NULL on error */
val *v_float(vctx *c, double d);
val *v_complex(vctx *c, double re, double im); /* imaginary literal 2j: v_complex(c, 0.0, 2.0) */
val *v_ellipsis(void);
/* A set display whose items are all constants after CPython's constant
 * folding (n > 2): CPython builds it from a frozenset constant, which gives a
 * different iteration order than adding the items one by one. */
val *v_set_from_constants(vctx *c, val **items, size_t n);
val *v_str(vctx *c, const char *utf8, size_t blen); /* copies; must be valid UTF-8 */
/* The concatenation of n str values (borrowed; in memory the collector
 * scans), allocated once; a single non-empty part is returned itself, as
 * CPython's f'{s}' is s. */
val *v_str_concat_n(vctx *c, val *const *parts, size_t n);
val *v_strz(vctx *c, const char *utf8);
val *v_bytes(vctx *c, const char *data, size_t len);
/* items: an array of n values; copied. */
val *v_tuple(vctx *c, val *const *items, size_t n);
val *v_list(vctx *c, val *const *items, size_t n);
/* Takes ownership of an arena array (no copy). */
val *v_tuple_take(vctx *c, val **items, size_t n);
val *v_list_take(vctx *c, val **items, size_t n);
val *v_range(vctx *c, int64_t start, int64_t stop, int64_t step);
val *v_slice(vctx *c, val *lo, val *hi, val *step); /* NULL parts = None */

/* Dict/set builders: create empty, then insert (later key wins, keeps the
 * first insertion position, as CPython). Raise TypeError on unhashable keys. */
val *v_dict_new(vctx *c, size_t hint);
int v_dict_set(vctx *c, val *dict, val *key, val *value);
val *v_dict_get(vctx *c, val *dict,
                val *key); /* NULL if absent (no exception) or on error (check v_failed) */
/* Builds the hash table of a lazy dict (VF_LAZY) in place; no-op otherwise.
 * Call before reading dict->u.t.entries/len yourself. 0 or -1. */
int v_dict_force(vctx *c, val *dict);
val *v_set_new(vctx *c, size_t hint);
int v_set_add(vctx *c, val *set, val *item);
int v_set_contains(vctx *c, val *set, val *item); /* 1/0/-1 */

/* ---- predicates and accessors ----------------------------------------- */

/* Tagged ints: a `val *` whose low bit is set is no pointer but an int in
 * VTAG_MIN..VTAG_MAX, stored as value * 2 + 1, so the ints loops produce
 * cost no allocation. Such a value has no struct behind it: every read of a
 * value goes through v_type() first (or the vi_* accessors). Every int in
 * that range is tagged (never boxed), so one int has one representation.
 * The collector ignores tagged words (they are odd, never a block address). */
#define VTAG_MIN (-((int64_t)1 << 62))
#define VTAG_MAX (((int64_t)1 << 62) - 1)
static inline bool v_is_tagged(const val *v)
{
    return ((uintptr_t)v & 1) != 0;
}
static inline bool v_tag_fits(int64_t i)
{
    return i >= VTAG_MIN && i <= VTAG_MAX;
}
static inline val *v_tag(int64_t i) /* i must fit */
{
    return (val *)(uintptr_t)(((uint64_t)i << 1) | 1);
}
static inline int64_t v_untag(const val *v)
{
    return (int64_t)(intptr_t)v >> 1;
}
static inline vtype v_type(const val *v)
{
    return v_is_tagged(v) ? VT_INT : (vtype)v->ty;
}
static inline bool v_is_none(const val *v)
{
    return v_type(v) == VT_NONE;
}
static inline bool v_is_str(const val *v)
{
    return v_type(v) == VT_STR;
}
static inline bool v_is_int(const val *v)
{
    return v_type(v) == VT_INT;
} /* not bool */
static inline bool v_is_intlike(const val *v)
{
    vtype t = v_type(v);
    return t == VT_INT || t == VT_BOOL;
}
static inline bool v_is_number(const val *v)
{
    vtype t = v_type(v);
    return t == VT_INT || t == VT_BOOL || t == VT_FLOAT;
}
/* A VT_INT's value when it fits int64 (tagged, or a small box): true and
 * *x; false for an mpz int. */
static inline bool vi_small(const val *v, int64_t *x)
{
    if (v_is_tagged(v)) {
        *x = v_untag(v);
        return true;
    }
    if (v->u.ib.big) return false;
    *x = v->u.ib.small;
    return true;
}
/* A VT_INT's mpz, or NULL when it fits int64. */
static inline mpz_ptr vi_big(const val *v)
{
    return v_is_tagged(v) ? NULL : v->u.ib.big;
}
/* CPython type name, as type(v).__name__ ("int", "str", "TranscriptEvent", ...). */
const char *v_type_name(const val *v);
/* For an int that fits int64: 1 and *out; 0 otherwise (not int / too big). */
int v_as_i64(const val *v, int64_t *out);
/* Length as len() (TypeError if no len). -1 on error. */
int64_t v_len(vctx *c, val *v);

/* ---- protocol --------------------------------------------------------- */

/* Truthiness (bool(v)); never fails for the subset's types. */
bool v_truthy(const val *v);

/* Text. v_repr/v_tostr return str values; the *_buf variants append UTF-8
 * to a strbuf (faster for nesting). -1/NULL on error (e.g. int too big to
 * print: ValueError as CPython 3.11's 4300-digit limit). */
val *v_repr(vctx *c, val *v);
val *v_tostr(vctx *c, val *v); /* str(v) */
val *v_ascii(vctx *c, val *v); /* ascii(v), for f-string !a */
int v_repr_buf(vctx *c, strbuf *b, val *v);

/* format(v, spec) for f-strings (spec may be NULL or empty). */
val *v_format(vctx *c, val *v, val *spec);

/* Equality and hashing (CPython cross-type rules: 1 == 1.0 == True,
 * hash(1) == hash(1.0)). v_eq: 1/0, -1 on error. */
int v_eq(vctx *c, val *a, val *b);
int v_hash(vctx *c, val *v, int64_t *out); /* -1: TypeError unhashable */

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } vcmpop;
/* What `op` answers for two operands whose three-way order is `r` (<0, 0,
 * >0). */
static inline int v_cmp_result(vcmpop op, int r)
{
    switch (op) {
    case CMP_EQ:
        return r == 0;
    case CMP_NE:
        return r != 0;
    case CMP_LT:
        return r < 0;
    case CMP_LE:
        return r <= 0;
    case CMP_GT:
        return r > 0;
    case CMP_GE:
        return r >= 0;
    }
    return 0;
}
/* Two tagged ints: their words are in the ints' order. */
static inline int v_tagged_compare(vcmpop op, const val *a, const val *b)
{
    return v_cmp_result(op, ((intptr_t)a > (intptr_t)b) - ((intptr_t)a < (intptr_t)b));
}
/* Rich comparison with CPython's rules (TypeError "'<' not supported between
 * instances of 'int' and 'str'"). Returns 1/0, -1 on error. */
int v_compare(vctx *c, vcmpop op, val *a, val *b);
/* `a in b` (1/0/-1), `a is b` (identity with interning rules: None/bools
 * are singletons, equal tagged ints are identical; equal strings from distinct sources are NOT
 * guaranteed identical, as in CPython use discouraged). */
int v_contains(vctx *c, val *container, val *item);
bool v_is(val *a, val *b);

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_FLOORDIV, BIN_MOD, BIN_POW } vbinop;
typedef enum { UN_NEG, UN_POS, UN_NOT } vunop;
val *v_binop(vctx *c, vbinop op, val *a, val *b);
val *v_unop(vctx *c, vunop op, val *a);

/* Iteration: init fails (TypeError "'int' object is not iterable") with -1.
 * next returns the next item, or NULL at the end (v_failed false) or on error
 * (v_failed true). Iterating a dict yields keys. */
typedef struct {
    val *src;
    size_t i;
    int64_t cur; /* range */
    size_t n;
    mpz_ptr big; /* big range cursor */
} viter;
int v_iter_init(vctx *c, val *v, viter *it);
val *v_iter_next(vctx *c, viter *it);
/* Materializes any iterable into a fresh arena array (for list(), sorted(),
 * unpacking). Returns 0 and sets *items and *n, or -1. */
int v_iter_collect(vctx *c, val *v, val ***items, size_t *n);

/* Subscript: obj[key] where key may be a VT_SLICE. */
val *v_getitem(vctx *c, val *obj, val *key);

/* Attributes. Data attributes (docs/LANGUAGE.md list) are looked up by name;
 * AttributeError "'int' object has no attribute 'x'" as CPython. */
val *v_getattr(vctx *c, val *obj, const char *name);

/* Calls. Keyword names are NUL-terminated and borrowed. */
typedef struct {
    const char *name;
    val *value;
} vkwarg;

/* CPython looks the method up before evaluating the call's arguments:
 * call this first (0, or -1 with AttributeError set when obj's type has
 * no attribute `name`), then evaluate the arguments, then v_call_method. */
int v_check_method(vctx *c, val *obj, const char *name);
/* obj.name(args, **kw): method call by name (the checker guarantees the name
 * is allowlisted; a receiver without it raises AttributeError). */
val *v_call_method(vctx *c, val *obj, const char *name, val **args, size_t nargs, const vkwarg *kw,
                   size_t nkw);
/* callee(args, **kw) for a VT_BUILTIN (TypeError "'int' object is not
 * callable" otherwise). */
val *v_call(vctx *c, val *callee, val **args, size_t nargs, const vkwarg *kw, size_t nkw);

/* Global names: the builtins and result constructors; NULL when `name` is
 * not one of them (the evaluator handles session/True/False/None and raises
 * NameError "name 'x' is not defined" for the rest). */
val *v_builtin_lookup(const char *name);
/* The `session` global: NULL when the context has no image (the evaluator
 * then raises NameError "name 'session' is not defined"). */
val *v_session(vctx *c);
/* The context's session image is a read-only private mapping of a file (the
 * jail's sealed memfd), not anonymous memory: the session then drops the
 * image pages it has read from this process as it moves on (they are the
 * file's, and fault in again when read again), so a walk over a big session
 * does not keep the whole image resident in the child. Never call it for
 * an image in a malloc'd buffer: dropping would zero it. */
void v_session_image_mapped(vctx *c);

/* ---- outcomes (result.c) --------------------------------------------- */

/* A condition's value -> appends the outcome fields to `b` as
 * `"applicable": true` or `"applicable": false, "reason_code": "..."`.
 * TypeError when the value is not a bool or ConditionResult. 0/-1. */
int v_condition_outcome(vctx *c, val *v, strbuf *b);
/* An evaluator's value -> appends `"results": [...], "summary": ...` exactly
 * as EvalResult.result_items(eval_key) + ResultItem.to_wire. TypeError when
 * not an EvalResult; ValueError/TypeError from validation. 0/-1. */
int v_evaluator_outcome(vctx *c, val *v, const char *eval_key, strbuf *b);

/* ---- inline helpers --------------------------------------------------- */

int v__steps_slow(vctx *c);
struct vctx_hot {
    uint64_t steps;
    uint64_t max_steps;
};
/* The first member of vctx is a struct vctx_hot. */
static inline int v_step(vctx *c)
{
    struct vctx_hot *h = (struct vctx_hot *)c;
    if (++h->steps > h->max_steps) return v__steps_slow(c);
    return 0;
}

#endif
