/* sandbox/lang/value_impl: private helpers shared by the value runtime's files
 * (alloc.c exc.c value.c int.c float.c str.c bytes.c containers.c format.c builtins.c
 * result.c session.c). Not for the evaluator: it uses value.h only. */
#ifndef FPS_VALUE_IMPL_H
#define FPS_VALUE_IMPL_H
#include "common/pyfloat.h"
#include "sandbox/lang/value.h"

#include <stdarg.h>
#include <string.h>

/* Size classes of v_alloc's small blocks: 16-byte granules up to 2032
 * bytes (the collector's largest small object is 2048 less its extra
 * byte, see alloc.c). */
#define VGRANULES 128

struct vctx {
    struct vctx_hot hot; /* must be first (v_step) */
    vlimits lim;
    void *spare[VGRANULES]; /* free small blocks by 16-byte granules, from
                               GC_generic_malloc_many (v_alloc) */
    val **roots;            /* values referenced only from malloc'd memory (the AST's
                            cached constants), kept visible to the collector */
    size_t nroots, caproots;
    vexc_kind exc;
    char exc_type[40];
    char exc_msg[512];
    const void *img;
    size_t img_len;
    val *session;
    /* the session's payload dicts as read, by event index (NULL until the
     * first is read): kept here rather than in the events, so that the
     * session's block of events holds no pointer for the collector to scan */
    val **payloads;
    /* dropping the image's pages behind a scan (session.c): only when img
     * is a read-only file mapping (v_session_image_mapped); one scan over
     * the payloads' data, one over the event records */
    bool img_mapped;
    struct vimg_scan {
        size_t lo;    /* the scan dropped the image's pages from its start to here */
        size_t hi;    /* the end of its furthest read */
        int restarts; /* scans started over from further back */
    } img_data, img_recs;
    int depth; /* recursion guard for repr/eq of nested values */
};

/* Builtin ids (VT_BUILTIN). Classes first. */
typedef enum {
    BI_BOOL,
    BI_DICT,
    BI_FLOAT,
    BI_INT,
    BI_LIST,
    BI_RANGE,
    BI_SET,
    BI_STR,
    BI_TUPLE,
    BI_SCORE,
    BI_METRIC,
    BI_ASSERTION,
    BI_EVALRESULT,
    BI_CONDRESULT,
    BI_ABS,
    BI_ALL,
    BI_ANY,
    BI_LEN,
    BI_MAX,
    BI_MIN,
    BI_ROUND,
    BI_SORTED,
    BI_SUM,
    BI__COUNT
} vbuiltin_id;
const char *vb_name(int id);
bool vb_is_class(int id);

/* allocation helpers (alloc.c) */
val *v_new(vctx *c, vtype t);
/* Bytes a value of type t occupies (v_new allocates that many): the header
 * and its own union member, not the largest member. */
size_t v_val_size(vtype t);
/* Pointer-free memory (text, hash indexes): not scanned by the collector and
 * not zeroed, except its last byte. */
void *v_alloc_bytes(vctx *c, size_t size);
/* Releases a block of the collected heap that nothing references any more
 * (the table a set or dict outgrew while it was built), so it is reused at
 * once rather than after the next collection. Memory outside the heap (a
 * lazy dict's image nodes) is left alone. */
void v_free(void *p);
/* Grows (or shrinks) a block from v_alloc; the old block must not be used. */
void *v_realloc(vctx *c, void *p, size_t size);
val **v_items_alloc(vctx *c, size_t n); /* checks the item cap */
/* An item array the caller fills completely (copies, repeats) before it
 * reads any item: not cleared first. Words the collector may see before
 * they are written are only ever taken for possible pointers. */
val **v_items_alloc_filled(vctx *c, size_t n);
int v_check_items(vctx *c, size_t n);
int v_check_strlen(vctx *c, size_t blen);

/* ints (int.c) */
mpz_ptr vi_mpz_new(vctx *c);
void vi_free_str(char *s);
/* The shared values (None, True, False, the shared strings), made once by
 * the first vctx_new (value.c). 0 or -1. */
int vi_shared_init(void);
/* Between two evaluations of one process (lang_recycle): drops the free block
 * lists and collects everything. */
void vi_recycle(void);
/* The collector's heap size in bytes (lang_heap_bytes). */
size_t vi_heap_bytes(void);
/* frees mpz_get_str(NULL, ...)'s text (GMP's allocator) */ /* arena-tracked, initialized */
void vi_get_mpz(const val *v, mpz_t out);                   /* out must be initialized; bool ok */
val *vi_from_mpz_take(vctx *c, mpz_ptr z); /* normalizes; z must be from vi_mpz_new */
int vi_sign(const val *v);
int vi_cmp(const val *a, const val *b); /* int/bool only */
int64_t vi_hash(const val *v);
double vi_to_double(vctx *c, const val *v,
                    int *err); /* correctly rounded; err: OverflowError raised */
int vi_repr_buf(vctx *c, strbuf *b, const val *v);
val *vi_binop(vctx *c, vbinop op, val *a, val *b); /* both int/bool */
val *vi_from_double(vctx *c, double d);            /* int(float): truncation, errors raised */
int vi_cmp_double(const val *a, double d); /* a int/bool, d finite or inf; nan handled by caller */
val *vi_parse(vctx *c, const char *s, size_t len, int base, bool literal); /* int(str, base) */
double vi_ratio_to_double(vctx *c, const mpz_t num, const mpz_t den, int *err);

/* floats (float.c) */
int64_t vf_hash(double d);
val *vf_method(vctx *c, val *v, const char *name, val **a, size_t na, const vkwarg *kw, size_t nkw,
               bool *found);
val *vf_binop(vctx *c, vbinop op, double a, double b);
val *vf_parse(vctx *c, const char *s, size_t len); /* float(str) */
val *vf_round(vctx *c, double x, val *ndigits);    /* ndigits NULL/None => int */

/* complex (complex.c) */
val *vc_binop(vctx *c, vbinop op, val *a, val *b);
int vc_repr_buf(strbuf *b, const val *v);
int64_t vc_hash(const val *v);
int vc_eq(vctx *c, val *a, val *b);
val *vc_abs(vctx *c, val *v);

/* big ranges (bigrange.c) */
val *vbr_new(vctx *c, val *start, val *stop, val *step);
int64_t vbr_len(vctx *c, val *v);
bool vbr_truthy(const val *v);
int vbr_repr_buf(vctx *c, strbuf *b, val *v);
val *vbr_getitem(vctx *c, val *v, val *key);
int vbr_contains(vctx *c, val *v, val *x);
int vbr_eq(val *a, val *b);
int vbr_hash(vctx *c, val *v, int64_t *out);
val *vbr_next(vctx *c, viter *it);
val *vbr_method(vctx *c, val *v, const char *name, val **a, size_t na, const vkwarg *kw, size_t nkw,
                bool *found);

/* strings (str.c) */
val *vs_new_owned(vctx *c, char *s, size_t blen, size_t clen, bool ascii); /* s in arena */
/* A new str or bytes (t) of blen bytes, its text in the same block as its
 * header: the caller writes the text at *text (room for blen bytes and a
 * NUL; the NUL is written). For bytes that is all; a str is completed by
 * vs_done. NULL (the limit raised) past the string cap. */
val *vs_alloc(vctx *c, vtype t, size_t blen, char **text);
/* Completes a str from vs_alloc whose first blen bytes (at most the
 * allocated length) are written: the shared equal string when there is one
 * (empty, one Latin-1 character), else v. */
val *vs_done(vctx *c, val *v, size_t blen, size_t clen, bool ascii);
size_t vs_count_cps(const char *s, size_t blen, bool *ascii);
int vs_repr_buf(strbuf *b, const val *s);
/* repr() of the UTF-8 text p[0, n) as a str's: what vs_repr_buf writes. */
int vs_repr_text(strbuf *b, const char *p, size_t n);
int vs_ascii_buf(strbuf *b, const val *s);
int64_t vs_hash(val *s);
int vs_cmp(const val *a, const val *b); /* code point order == UTF-8 byte order */
val *vs_concat(vctx *c, val *a, val *b);
val *vs_from_i64(vctx *c, int64_t x);          /* str(x), decimal */
size_t vs_i64_digits(char out[24], int64_t x); /* x in decimal; its length */
/* splitlines' keepends (a C int, as CPython reads it). 0 or -1. */
int vs_keepends(vctx *c, val *v, bool *keep);
val *vs_empty(void); /* the shared '' */
/* The shared strings ('' and the 256 one-character Latin-1 strings) live in
 * `block` (VS_SHARED_COUNT values in the collected heap, never freed), set
 * up once before any context exists. */
#define VS_SHARED_COUNT 257
void vs_shared_init(val *block);
/* Between two evaluations of one process (lang_recycle): forgets the string
 * cursors and the hashes cached on the shared strings. */
void vs_recycle(void);
val *vs_repeat(vctx *c, val *a, int64_t n);
/* Fills p[0..n) with copies of unit (ulen > 0 bytes), the last one cut. */
void vs_fill_repeat(char *p, const char *unit, size_t ulen, size_t n);
val *vs_getitem(vctx *c, val *s, val *key);
int vs_contains(vctx *c, val *hay, val *needle);
val *vs_method(vctx *c, val *s, const char *name, val **args, size_t nargs, const vkwarg *kw,
               size_t nkw, bool *found);
val *vs_char_at(vctx *c, val *s, size_t idx);     /* code point index */
val *vs_char(vctx *c, const char *p, size_t adv); /* the character of adv bytes at p */
size_t vs_offset(const val *s, size_t cpidx);     /* byte offset of code point idx */
val *vs_substr(vctx *c, val *s, size_t cp_lo, size_t cp_hi);
/* The substring s[p .. p+blen) of s's bytes (whole characters): shares s's
 * text, and the empty and one-character Latin-1 strings are the shared
 * ones, so splitting allocates at most one small value per piece. */
val *vs_substr_bytes(vctx *c, const val *s, const char *p, size_t blen);
static inline bool vs_eq(const val *a, const val *b)
{
    if (a->u.s.blen != b->u.s.blen) return false;
    if (a->u.s.hash && b->u.s.hash && a->u.s.hash != b->u.s.hash) return false; /* both cached */
    return a->u.s.s == b->u.s.s || memcmp(a->u.s.s, b->u.s.s, a->u.s.blen) == 0;
}
bool vs_isspace_cp(int32_t cp);
int vs_decimal_value(int32_t cp);
char *vs_to_ascii_number(const char *s, size_t len, size_t *outlen);
int32_t vs_decode1(const char *s, size_t len, size_t *adv);
/* The code point that ends at byte `end` of s and starts no earlier than
 * byte lo (lo < end): its value, and in *start the byte where it begins. */
int32_t vs_decode_before(const char *s, size_t lo, size_t end, size_t *start);
/* The span [*lo, *hi) of s[0, len) without the Unicode white space
 * (vs_isspace_cp) at either end: what str.strip(), int() and float() read. */
void vs_trim_space(const char *s, size_t len, size_t *lo, size_t *hi);

/* repr() of text and bytes alike: the quote put around p[0, n) (' unless
 * the text holds ' and no "), and an ASCII byte ch (< 128) as it stands
 * inside quote q (backslash, the quote, \t \n \r escaped, other control
 * bytes and DEL as \xNN). */
static inline char vs_repr_quote(const char *p, size_t n)
{
    return memchr(p, '\'', n) != NULL && memchr(p, '"', n) == NULL ? '"' : '\'';
}
static inline void vs_repr_ascii(strbuf *b, unsigned char ch, char q)
{
    if (ch == (unsigned char)q || ch == '\\') {
        strbuf_putc(b, '\\');
        strbuf_putc(b, (char)ch);
    } else if (ch == '\t')
        strbuf_put(b, "\\t", 2);
    else if (ch == '\n')
        strbuf_put(b, "\\n", 2);
    else if (ch == '\r')
        strbuf_put(b, "\\r", 2);
    else if (ch < 32 || ch == 127)
        strbuf_printf(b, "\\x%02x", ch);
    else
        strbuf_putc(b, (char)ch);
}

/* bytes (bytes.c) */
int vby_repr_buf(strbuf *b, const val *v);
val *vby_method(vctx *c, val *s, const char *name, val **args, size_t nargs, const vkwarg *kw,
                size_t nkw, bool *found);
val *vby_getitem(vctx *c, val *s, val *key);
val *vs_encode(vctx *c, val *s, val *encoding, val *errors);
val *vby_percent(vctx *c, val *fmt, val *args);

/* containers (containers.c) */
int vseq_slice_indices(vctx *c, val *slice, int64_t len, int64_t *start, int64_t *stop,
                       int64_t *step, int64_t *slen);
val *vseq_getitem(vctx *c, val *seq, val *key);
val *vseq_concat(vctx *c, val *a, val *b);
val *vseq_repeat(vctx *c, val *a, int64_t n);
int vseq_cmp(vctx *c, vcmpop op, val *a, val *b); /* same-type list/tuple */
int vseq_eq(vctx *c, val *a, val *b);
int vdict_eq(vctx *c, val *a, val *b);
int vset_eq(vctx *c, val *a, val *b);
int vset_cmp(vctx *c, vcmpop op, val *a, val *b);
val *vcont_method(vctx *c, val *o, const char *name, val **args, size_t nargs, const vkwarg *kw,
                  size_t nkw, bool *found);
val *vrange_getitem(vctx *c, val *r, val *key);
int vrange_contains(vctx *c, val *r, val *item);
int vrange_eq(val *a, val *b);
val *vset_copy(vctx *c, val *s);
val *vset_from_iterable(vctx *c, val *it);
int vset_discard(vctx *c, val *set, val *key);
int v_int_index(vctx *c, val *v, int64_t *out, const char *what); /* __index__ of int/bool */
int vseq_index_norm(int64_t *i, int64_t len);
extern val v_dummy_key;
/* The next live entry (neither empty nor a deleted key's dummy) of set s at
 * slot *pos or after, *pos then the slot past it; NULL after the last. As
 * CPython's set_next: for (size_t i = 0; (e = vset_next(s, &i)) != NULL;) */
static inline vsentry *vset_next(const val *s, size_t *pos)
{
    for (size_t i = *pos; i <= s->u.t.mask; i++) {
        vsentry *e = &s->u.t.sentries[i];
        if (e->key && e->key != &v_dummy_key) {
            *pos = i + 1;
            return e;
        }
    }
    *pos = s->u.t.mask + 1;
    return NULL;
}

/* formatting (format.c) */
val *vfmt_format(vctx *c, val *v, const char *spec, size_t speclen);
val *vfmt_percent(vctx *c, val *fmt, val *args);

/* builtins (builtins.c) */
val *vb_call(vctx *c, int id, val **args, size_t nargs, const vkwarg *kw, size_t nkw);
/* sorting helper shared with the evaluator-free world */
int v_sort(vctx *c, val **items, size_t n, val *key, bool reverse);
val *v_call_builtin_1(vctx *c, val *fn, val *arg);

/* results (result.c) */
val *vr_construct(vctx *c, int id, val **args, size_t nargs, const vkwarg *kw, size_t nkw);
int vr_repr_buf(vctx *c, strbuf *b, val *v);
int vr_eq(vctx *c, val *a, val *b);
val *vr_getattr(vctx *c, val *v, const char *name, bool *found);
int vr_hash(vctx *c, val *v, int64_t *out);

/* lazy payload dicts (session.c): u.t.len 0, u.t.fill = item count,
 * u.t.index = the image's key/value node block, u.t.mask = image base */
static inline bool vd_lazy(const val *d)
{
    return (d->flags & VF_LAZY) != 0;
}
static inline size_t vd_len(const val *d)
{
    return vd_lazy(d) ? d->u.t.fill : d->u.t.len;
}
val *vsess_lazy_get(vctx *c, val *d, val *key, bool *found);
int vsess_lazy_force(vctx *c, val *d);

/* session (session.c) */
/* The evaluation is about to read the n bytes at p, maybe the session
 * image's (a string value that borrows them): lets the session drop the
 * image pages read before (see session.c). For readers that go over many
 * strings long after they were taken from the session (str.join). */
void vsess_note_read(vctx *c, const char *p, size_t n);
static inline void vsess_reading(vctx *c, const char *p, size_t n)
{
    if (c->img_mapped) vsess_note_read(c, p, n);
}
val *vsess_getattr(vctx *c, val *v, const char *name, bool *found);
val *vsess_method(vctx *c, val *v, const char *name, val **args, size_t nargs, const vkwarg *kw,
                  size_t nkw, bool *found);
int vsess_repr_buf(vctx *c, strbuf *b, val *v);
int vsess_eq(vctx *c, val *a, val *b);

/* argument parsing: positional names then keyword-capable names.
 * `spec` names every parameter; `npos_only` of them are positional-only;
 * out[i] = NULL when absent. Raises TypeError as CPython would. */
int v_parse_args(vctx *c, const char *fname, val **args, size_t nargs, const vkwarg *kw, size_t nkw,
                 const char *const *names, size_t nnames, size_t npos_only, size_t nrequired,
                 val **out);

/* hashing (CPython's algorithm for numbers and tuples) */
#define VHASH_MODULUS (((int64_t)1 << 61) - 1)
int64_t v_hash_tuple(vctx *c, val *t, int *err);

#endif
