/* sandbox/lang/session: the `session` object (SessionTranscript) and its events
 * (TranscriptEvent), read lazily from the session image (simg_layout.h):
 * data attributes, events_of_type/count, the events tuple (built once per
 * evaluation), payload dicts built on first access straight from the
 * image's nodes (strings borrowed, no copies, no JSON parsing), repr and
 * equality as the reference's frozen dataclasses. When the image is a file
 * mapping (the jail's), walks drop the image pages behind them. */
#include "sandbox/lang/simg_layout.h"
#include "sandbox/lang/value_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

static const simg_hdr *hdr(const void *img)
{
    return (const simg_hdr *)img;
}

/* ---- the image's resident pages -------------------------------------- */

/* In the jail the image is the parent's memory: a sealed memfd the child
 * maps private and read-only. The pages an evaluation reads still count in
 * the child's resident set, so a walk over a 25 MiB session kept all of it
 * resident (CPython's session is its baseline, not its peak). So a scan
 * drops the pages behind it: whenever its furthest read has moved DROP_STEP
 * past the pages dropped so far, the pages up to DROP_KEEP before that read
 * are dropped (MADV_DONTNEED on a private read-only file mapping only clears
 * this process's page table entries; a page read again, a string still in
 * use, faults back in from the memfd, with the kernel's 64 KiB
 * fault-around). Events and their payloads lie in order in the image, so
 * a comprehension over session.events, and a join over the strings it
 * took, keep about DROP_STEP + DROP_KEEP resident. A read of more than a
 * shared short value far behind the dropped pages starts a new scan (a
 * second pass); there are at most DROP_SCANS of them, so however the
 * evaluation jumps around, a page is dropped, and faulted in again, at
 * most that many times. */
#define DROP_STEP ((size_t)256 << 10)
#define DROP_KEEP ((size_t)64 << 10)
#define DROP_SCANS 8

void v_session_image_mapped(vctx *c)
{
    c->img_mapped = c->img != NULL;
}

/* Notes that the evaluation reads `n` image bytes at offset `off`, part of
 * scan `sc` (c->img_data or c->img_recs). */
static void scan_read(vctx *c, struct vimg_scan *sc, uint64_t off, uint64_t n)
{
    if (!c->img_mapped) return;
    /* never past the mapping: what lies beyond it may be anonymous memory */
    size_t end = off + n < c->img_len ? (size_t)(off + n) : c->img_len;
    if (end > sc->hi) {
        sc->hi = end;
        if (end - sc->lo < DROP_STEP + DROP_KEEP) return;
        size_t to = (end - DROP_KEEP) & ~(size_t)4095;
        (void)madvise((char *)c->img + sc->lo, to - sc->lo, MADV_DONTNEED);
        sc->lo = to;
    } else if (n > SIMG_INTERN_VALUE && end + DROP_STEP < sc->lo && sc->restarts < DROP_SCANS) {
        sc->restarts++;
        sc->lo = (size_t)off & ~(size_t)4095;
        sc->hi = end;
    }
}

static void image_read(vctx *c, uint64_t off, uint64_t n)
{
    scan_read(c, &c->img_data, off, n);
}

/* The records i .. i+n-1, noted read. */
static const simg_event *event_recs(vctx *c, const void *img, uint32_t i, uint32_t n)
{
    const simg_event *r = (const simg_event *)((const char *)img + hdr(img)->events_off) + i;
    scan_read(c, &c->img_recs, (uint64_t)((const char *)r - (const char *)img),
              (uint64_t)n * sizeof *r);
    return r;
}

static const simg_event *event_rec(vctx *c, const void *img, uint32_t i)
{
    return event_recs(c, img, i, 1);
}

void vsess_note_read(vctx *c, const char *p, size_t n)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)c->img;
    if (off < c->img_len) image_read(c, off, n);
}

/* The string at `off` (simg_layout.h) as a value borrowing its bytes. */
static val *img_str(vctx *c, const void *img, uint32_t off)
{
    simg_sv s;
    /* the bytes are not checked (a scan of every string): only that they
     * are not a character the interpreter shares that they cannot be */
    if (!simg_str_at(img, hdr(img)->total_len, off, &s) ||
        (s.blen == 1 && (!s.ascii || (unsigned char)s.s[0] >= 0x80)) ||
        (s.blen == 2 && s.clen == 1 && (unsigned char)s.s[0] < 0xC2))
        return v_raise(c, "RuntimeError", "corrupt session image");
    image_read(c, off, (uint64_t)(s.s - (const char *)img) - off + s.blen);
    return vs_new_owned(c, (char *)s.s, s.blen, s.clen, s.ascii);
}

/* Nodes are bounds-checked as they are read (simg_validate checks only the
 * header and the event records, so a child does not walk the whole image):
 * every string and block lies inside the image and a block lies before the
 * node that owns it, so reads stay in bounds and recursion terminates. */
static bool block_ok(const char *img, const simg_node *n, uint64_t bytes)
{
    uint64_t at = (uint64_t)((const char *)n - img), off = simg_off(*n);
    return (off & 7) == 0 && off >= sizeof(simg_hdr) && off + bytes <= at;
}

static val *corrupt(vctx *c)
{
    return v_raise(c, "RuntimeError", "corrupt session image");
}

static val *node_val(vctx *c, const char *img, const simg_node *n, int depth)
{
    if (depth > SIMG_MAX_DEPTH) return corrupt(c);
    simg_node v = *n;
    uint32_t off = simg_off(v);
    switch (simg_tag(v)) {
    case SN_NULL:
        return v_none();
    case SN_TRUE:
        return v_true();
    case SN_FALSE:
        return v_false();
    case SN_INT:
        return v_int64(c, simg_int(v));
    case SN_INT64:
    case SN_FLOAT: {
        if ((uint64_t)off + 8 > hdr(img)->total_len) return corrupt(c);
        image_read(c, off, 8);
        if (simg_tag(v) == SN_FLOAT) {
            double d;
            memcpy(&d, img + off, 8);
            return v_float(c, d);
        }
        int64_t i;
        memcpy(&i, img + off, 8);
        return v_int64(c, i);
    }
    case SN_BIGINT: {
        simg_sv s;
        if (!simg_str_at(img, hdr(img)->total_len, off, &s)) return corrupt(c);
        image_read(c, off, (uint64_t)(s.s - img) - off + s.blen);
        return vi_parse(c, s.s, s.blen, 10, true);
    }
    case SN_STR:
        return img_str(c, img, off);
    case SN_ARR: {
        uint32_t cnt = simg_count(v);
        if (!block_ok(img, n, (uint64_t)cnt * sizeof(simg_node))) return corrupt(c);
        image_read(c, off, (uint64_t)cnt * sizeof(simg_node));
        const simg_node *kids = (const simg_node *)(const void *)(img + off);
        val **items = v_items_alloc(c, cnt);
        if (!items) return NULL;
        for (uint32_t i = 0; i < cnt; i++) {
            items[i] = node_val(c, img, &kids[i], depth + 1);
            if (!items[i]) return NULL;
        }
        return v_list_take(c, items, cnt);
    }
    case SN_OBJ: {
        uint32_t cnt = simg_count(v);
        if (!block_ok(img, n, simg_obj_bytes(cnt))) return corrupt(c);
        image_read(c, off, simg_obj_bytes(cnt));
        /* lazy: lookups read the image; the table is built only if needed */
        val *d = v_new(c, VT_DICT);
        if (!d) return NULL;
        d->flags = VF_LAZY;
        d->u.t.fill = cnt;
        d->u.t.index = (int32_t *)(void *)(img + off);
        d->u.t.mask = (size_t)(uintptr_t)img;
        return d;
    }
    default:
        return v_raise(c, "ValueError", "corrupt session image");
    }
}

/* A lazy dict's block (simg_layout.h: `n` value nodes, then their `n` key
 * offsets) and image. */
static const simg_node *lazy_block(const val *d, const char **img, const uint32_t **keys)
{
    /* a lazy dict keeps its image pointer in the integer mask field */
    *img = (const char *)(uintptr_t)d->u.t.mask; // NOLINT(performance-no-int-to-ptr)
    const simg_node *vals = (const simg_node *)(const void *)d->u.t.index;
    *keys = (const uint32_t *)(const void *)(vals + d->u.t.fill);
    return vals;
}

val *vsess_lazy_get(vctx *c, val *d, val *key, bool *found)
{
    *found = false;
    if (v_type(key) != VT_STR) {
        int64_t h;
        if (v_hash(c, key, &h)) return NULL;
        return NULL; /* JSON object keys are all str */
    }
    const char *img;
    const uint32_t *keys;
    const simg_node *vals = lazy_block(d, &img, &keys);
    size_t n = d->u.t.fill, len = hdr(img)->total_len;
    size_t blen = key->u.s.blen;
    for (size_t i = 0; i < n; i++) {
        /* a key's first word holds its length: its bytes are read only
         * when that matches (short keys are shared: their words are hot) */
        uint32_t off = keys[i], w;
        if ((uint64_t)off + 4 > len) return corrupt(c);
        memcpy(&w, img + off, 4);
        if (w >> 1 != blen) continue;
        simg_sv ks;
        if (!simg_str_at(img, len, off, &ks)) return corrupt(c);
        if (blen == 0 || (ks.s[0] == key->u.s.s[0] && !memcmp(ks.s, key->u.s.s, blen))) {
            *found = true;
            return node_val(c, img, &vals[i], 0);
        }
    }
    return NULL;
}

int vsess_lazy_force(vctx *c, val *d)
{
    const char *img;
    const uint32_t *keys;
    const simg_node *vals = lazy_block(d, &img, &keys);
    size_t n = d->u.t.fill;
    val *t = v_dict_new(c, n);
    if (!t) return -1;
    for (size_t i = 0; i < n; i++) {
        val *k = img_str(c, img, keys[i]);
        val *v = k ? node_val(c, img, &vals[i], 0) : NULL;
        if (!v || v_dict_set(c, t, k, v)) return -1;
    }
    d->u.t = t->u.t;
    d->flags = 0;
    return 0;
}

static val *make_event(vctx *c, const void *img, uint32_t i)
{
    val *e = v_new(c, VT_EVENT);
    if (!e) return NULL;
    e->u.ev.img = img;
    e->u.ev.index = i;
    return e;
}

static val *events_tuple(vctx *c, val *s)
{
    if (s->u.sess.events) return s->u.sess.events;
    uint32_t n = hdr(s->u.sess.img)->nevents;
    val **items = v_items_alloc(c, n);
    if (!items) return NULL;
    /* one block for all event values, each as long as an event needs, of
     * the pointer-free kind (an event holds no value: see payload) */
    size_t size = v_val_size(VT_EVENT);
    char *block = v_alloc_bytes(c, (size_t)(n ? n : 1) * size);
    if (!block) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        val *e = (val *)(void *)(block + i * size);
        e->ty = VT_EVENT;
        e->flags = 0;
        e->u.ev.img = s->u.sess.img;
        e->u.ev.index = i;
        items[i] = e;
    }
    (void)make_event;
    s->u.sess.events = v_tuple_take(c, items, n);
    return s->u.sess.events;
}

/* The event's payload dict, read once: the same value at every access. */
static val *payload(vctx *c, val *e)
{
    const void *img = e->u.ev.img;
    uint32_t i = e->u.ev.index;
    if (c->payloads == NULL) {
        c->payloads = v_items_alloc(c, hdr(img)->nevents); /* cleared */
        if (c->payloads == NULL) return NULL;
    }
    if (c->payloads[i]) return c->payloads[i];
    const simg_event *r = event_rec(c, img, i);
    val *d = node_val(c, img, &r->payload, 0);
    c->payloads[i] = d;
    return d;
}

static const char *const g_sess_fields[SF__COUNT] = {
    "assignment_id", "session_id", "session_revision_id", "agent_id", "environment",
    "started_at",    "ended_at",   "schema_version"};

val *vsess_getattr(vctx *c, val *v, const char *name, bool *found)
{
    *found = true;
    if (v_type(v) == VT_SESSION) {
        const simg_hdr *h = hdr(v->u.sess.img);
        if (!strcmp(name, "events")) return events_tuple(c, v);
        if (!strcmp(name, "event_count")) return v_int64(c, h->event_count);
        for (int k = 0; k < SF__COUNT; k++)
            if (!strcmp(name, g_sess_fields[k])) return img_str(c, v->u.sess.img, h->fields[k]);
    } else {
        const simg_event *r = event_rec(c, v->u.ev.img, v->u.ev.index);
        if (!strcmp(name, "id")) return img_str(c, v->u.ev.img, r->id);
        if (!strcmp(name, "ts")) return img_str(c, v->u.ev.img, r->ts);
        if (!strcmp(name, "event_type")) return img_str(c, v->u.ev.img, r->type);
        if (!strcmp(name, "payload")) return payload(c, v);
    }
    *found = false;
    return NULL;
}

static val *one_event_type_arg(vctx *c, const char *mname, val **a, size_t na, const vkwarg *kw,
                               size_t nkw)
{
    if (na + nkw == 0)
        return v_raise(
            c, "TypeError",
            "SessionTranscript.%s() missing 1 required positional argument: 'event_type'", mname);
    if (na > 1 || na + nkw > 1) {
        if (nkw && na == 1 && !strcmp(kw[0].name, "event_type"))
            return v_raise(c, "TypeError",
                           "SessionTranscript.%s() got multiple values for argument 'event_type'",
                           mname);
        if (nkw && strcmp(kw[0].name, "event_type"))
            return v_raise(c, "TypeError",
                           "SessionTranscript.%s() got an unexpected keyword argument '%s'", mname,
                           kw[0].name);
        return v_raise(c, "TypeError",
                       "SessionTranscript.%s() takes 2 positional arguments but %zu were given",
                       mname, na + 1);
    }
    if (nkw) {
        if (strcmp(kw[0].name, "event_type"))
            return v_raise(c, "TypeError",
                           "SessionTranscript.%s() got an unexpected keyword argument '%s'", mname,
                           kw[0].name);
        return kw[0].value;
    }
    return a[0];
}

/* count() and events_of_type() walk every record, so the records are noted
 * read a chunk at a time (noting each one cost as much as its comparison). */
#define REC_CHUNK 256

val *vsess_method(vctx *c, val *v, const char *name, val **a, size_t na, const vkwarg *kw,
                  size_t nkw, bool *found)
{
    bool of_type = !strcmp(name, "events_of_type");
    if (!of_type && strcmp(name, "count")) {
        *found = false;
        return NULL;
    }
    *found = true;
    val *t = one_event_type_arg(c, name, a, na, kw, nkw);
    if (!t) return NULL;
    /* count() reads the records in place; only events_of_type() needs the
     * event values (the tuple, built once per session). */
    val *evs = of_type ? events_tuple(c, v) : NULL;
    if (of_type && !evs) return NULL;
    size_t n = hdr(v->u.sess.img)->nevents;
    if (v_steps(c, n / 16)) return NULL;
    val **out = of_type ? v_items_alloc(c, n) : NULL;
    if (of_type && !out) return NULL;
    size_t k = 0;
    const void *img = v->u.sess.img;
    bool str = v_type(t) == VT_STR;
    const simg_event *r = NULL;
    /* the answers for the last few type strings: short types are stored
     * once per image, so a scan compares each distinct one once */
    uint32_t memo_off[4] = {0, 0, 0, 0};
    bool memo_eq[4] = {false, false, false, false};
    size_t len = hdr(img)->total_len;
    for (size_t i = 0; i < n; i++, r++) {
        if (i % REC_CHUNK == 0)
            r = event_recs(c, img, (uint32_t)i, (uint32_t)(n - i < REC_CHUNK ? n - i : REC_CHUNK));
        bool eq;
        if (str) {
            uint32_t off = r->type;
            unsigned m = (off * 0x9E3779B1u) >> 30;
            if (memo_off[m] == off) {
                eq = memo_eq[m];
            } else {
                simg_sv ts;
                if (!simg_str_at(img, len, off, &ts)) return corrupt(c);
                eq = ts.blen == t->u.s.blen && !memcmp(ts.s, t->u.s.s, t->u.s.blen);
                memo_off[m] = off;
                memo_eq[m] = eq;
            }
        } else {
            val *ts = img_str(c, img, r->type);
            if (!ts) return NULL;
            int e = v_eq(c, ts, t);
            if (e < 0) return NULL;
            eq = e;
        }
        if (!eq) continue;
        if (of_type) out[k] = evs->u.seq.items[i];
        k++;
    }
    if (!of_type) return v_int64(c, (int64_t)k);
    return v_tuple_take(c, out, k);
}

int vsess_repr_buf(vctx *c, strbuf *b, val *v)
{
    if (v_type(v) == VT_EVENT) {
        const simg_event *r = event_rec(c, v->u.ev.img, v->u.ev.index);
        val *f[3] = {img_str(c, v->u.ev.img, r->id), img_str(c, v->u.ev.img, r->ts),
                     img_str(c, v->u.ev.img, r->type)};
        val *p = payload(c, v);
        if (!f[0] || !f[1] || !f[2] || !p) return -1;
        strbuf_puts(b, "TranscriptEvent(id=");
        vs_repr_buf(b, f[0]);
        strbuf_puts(b, ", ts=");
        vs_repr_buf(b, f[1]);
        strbuf_puts(b, ", event_type=");
        vs_repr_buf(b, f[2]);
        strbuf_puts(b, ", payload=");
        if (v_repr_buf(c, b, p)) return -1;
        strbuf_putc(b, ')');
        return 0;
    }
    const simg_hdr *h = hdr(v->u.sess.img);
    strbuf_puts(b, "SessionTranscript(");
    for (int k = 0; k < SF_SCHEMA_VERSION; k++) {
        strbuf_puts(b, g_sess_fields[k]);
        strbuf_putc(b, '=');
        val *s = img_str(c, v->u.sess.img, h->fields[k]);
        if (!s) return -1;
        vs_repr_buf(b, s);
        strbuf_put(b, ", ", 2);
    }
    strbuf_printf(b, "event_count=%lld, events=", (long long)h->event_count);
    val *evs = events_tuple(c, v);
    if (!evs || v_repr_buf(c, b, evs)) return -1;
    strbuf_puts(b, ", schema_version=");
    val *s = img_str(c, v->u.sess.img, h->fields[SF_SCHEMA_VERSION]);
    if (!s) return -1;
    vs_repr_buf(b, s);
    strbuf_putc(b, ')');
    return 0;
}

int vsess_eq(vctx *c, val *a, val *b)
{
    if (v_type(a) == VT_SESSION) return 1; /* one session per evaluation */
    if (a->u.ev.img == b->u.ev.img && a->u.ev.index == b->u.ev.index) return 1;
    const simg_event *x = event_rec(c, a->u.ev.img, a->u.ev.index),
                     *y = event_rec(c, b->u.ev.img, b->u.ev.index);
    const char *ia = a->u.ev.img, *ib = b->u.ev.img;
    const uint32_t xs[3] = {x->id, x->ts, x->type}, ys[3] = {y->id, y->ts, y->type};
    for (int k = 0; k < 3; k++) {
        simg_sv p, q;
        if (!simg_str_at(ia, hdr(ia)->total_len, xs[k], &p) ||
            !simg_str_at(ib, hdr(ib)->total_len, ys[k], &q)) {
            (void)corrupt(c);
            return -1;
        }
        if (p.blen != q.blen || memcmp(p.s, q.s, p.blen)) return 0;
    }
    val *pa = payload(c, a), *pb = payload(c, b);
    if (!pa || !pb) return -1;
    return v_eq(c, pa, pb);
}
