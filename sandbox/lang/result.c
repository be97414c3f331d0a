/* sandbox/lang/result: the five result types (Score Metric Assertion EvalResult
 * ConditionResult) as the reference SDK's frozen dataclasses
 * (authoring.py): dataclass __init__ argument binding, __post_init__
 * validation with the same exception types and messages, repr/eq/hash;
 * and the outcomes of a condition or evaluator value: the reference's type
 * checks, its object-repr guard, EvalResult.result_items and
 * ResultItem.to_wire as JSON (json.dumps defaults). */
#include "sandbox/lang/value_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    vtype type;
    const char *name;
    int nfields;
    int nrequired;
    const char *fields[6];
} rdesc;

static const rdesc g_desc[] = {
    {VT_SCORE, "Score", 5, 1, {"value", "passed", "unit", "display_value", "description"}},
    {VT_METRIC, "Metric", 4, 1, {"value", "unit", "display_value", "description"}},
    {VT_ASSERTION, "Assertion", 2, 1, {"passed", "description"}},
    {VT_EVALRESULT,
     "EvalResult",
     6,
     0,
     {"score", "metrics", "assertions", "reasoning", "summary", "labels"}},
    {VT_CONDRESULT, "ConditionResult", 2, 1, {"applicable", "reason_code"}},
};

static const rdesc *desc_of(vtype t)
{
    for (size_t i = 0; i < sizeof g_desc / sizeof *g_desc; i++)
        if (g_desc[i].type == t) return &g_desc[i];
    return NULL;
}

/* ---- validation helpers (authoring.py) ----------------------------------- */

static int bounded(vctx *c, val *v, const char *field, size_t maximum)
{
    if (v_type(v) != VT_STR) {
        v_raise(c, "TypeError", "%s must be a string", field);
        return -1;
    }
    if (v->u.s.blen == 0) {
        v_raise(c, "ValueError", "%s must not be empty", field);
        return -1;
    }
    if (v->u.s.blen > maximum) {
        v_raise(c, "ValueError", "%s is %zu bytes; maximum is %zu", field, (size_t)v->u.s.blen,
                maximum);
        return -1;
    }
    for (size_t i = 0; i < v->u.s.blen; i++) {
        unsigned char ch = (unsigned char)v->u.s.s[i];
        if ((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7F) {
            v_raise(c, "ValueError", "%s must not contain control characters (found U+%04X)", field,
                    ch);
            return -1;
        }
    }
    return 0;
}

static val *finite_num(vctx *c, val *v, const char *field)
{
    if (v_type(v) == VT_BOOL || !(v_type(v) == VT_INT || v_type(v) == VT_FLOAT))
        return v_raise(c, "TypeError", "%s must be a number", field);
    double d;
    if (v_type(v) == VT_FLOAT)
        d = v->u.f;
    else {
        int err;
        d = vi_to_double(c, v, &err);
        if (err) return NULL;
    }
    if (!isfinite(d)) return v_raise(c, "ValueError", "%s must be finite", field);
    return v_float(c, d);
}

static int validate_key(vctx *c, val *v, const char *field)
{
    if (bounded(c, v, field, 128)) return -1;
    const char *s = v->u.s.s;
    size_t n = v->u.s.blen;
    bool ok = n > 0 && s[0] >= 'a' && s[0] <= 'z';
    for (size_t i = 1; ok && i < n; i++)
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    if (!ok) {
        v_raise(c, "ValueError", "%s must match ^[a-z][a-z0-9_]*$", field);
        return -1;
    }
    return 0;
}

static int result_text(vctx *c, val *unit, val *display, val *desc)
{
    if (v_truthy(unit) && bounded(c, unit, "unit", 64)) return -1;
    if (v_type(display) != VT_NONE && bounded(c, display, "display value", 256)) return -1;
    if (v_type(desc) != VT_NONE && bounded(c, desc, "description", 1000)) return -1;
    return 0;
}

static val *labels_norm(vctx *c, val *labels)
{
    val **items;
    size_t n;
    if (v_iter_collect(c, labels, &items, &n)) return NULL;
    if (n > 20) return v_raise(c, "ValueError", "at most 20 labels are allowed");
    for (size_t i = 0; i < n; i++)
        if (bounded(c, items[i], "label", 64)) return NULL;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (vs_eq(items[i], items[j])) return v_raise(c, "ValueError", "labels must be unique");
    if (v_sort(c, items, n, NULL, false)) return NULL;
    return v_tuple_take(c, items, n);
}

static int post_init(vctx *c, val *r)
{
    val **f = r->u.rec.f;
    switch (v_type(r)) {
    case VT_SCORE: {
        val *v = finite_num(c, f[0], "score value");
        if (!v) return -1;
        if (!(v->u.f >= 0 && v->u.f <= 1)) {
            v_raise(c, "ValueError", "score value must be between 0 and 1");
            return -1;
        }
        f[0] = v;
        if (v_type(f[1]) != VT_NONE && v_type(f[1]) != VT_BOOL) {
            v_raise(c, "TypeError", "score passed must be a boolean or None");
            return -1;
        }
        return result_text(c, f[2], f[3], f[4]);
    }
    case VT_METRIC: {
        val *v = finite_num(c, f[0], "metric value");
        if (!v) return -1;
        f[0] = v;
        return result_text(c, f[1], f[2], f[3]);
    }
    case VT_ASSERTION:
        if (v_type(f[0]) != VT_BOOL) {
            v_raise(c, "TypeError", "assertion passed must be a boolean");
            return -1;
        }
        if (v_type(f[1]) != VT_NONE && bounded(c, f[1], "description", 1000)) return -1;
        return 0;
    case VT_CONDRESULT:
        if (v_type(f[0]) != VT_BOOL) {
            v_raise(c, "TypeError", "condition applicable must be a boolean");
            return -1;
        }
        return validate_key(c, f[1], "condition reason code");
    case VT_EVALRESULT:
        if (v_type(f[3]) != VT_NONE && bounded(c, f[3], "reasoning", 16384)) return -1;
        if (v_type(f[4]) != VT_NONE && bounded(c, f[4], "summary", 4096)) return -1;
        f[5] = labels_norm(c, f[5]);
        return f[5] ? 0 : -1;
    default:
        return 0;
    }
}

val *vr_construct(vctx *c, int id, val **args, size_t nargs, const vkwarg *kw, size_t nkw)
{
    vtype t = id == BI_SCORE        ? VT_SCORE
              : id == BI_METRIC     ? VT_METRIC
              : id == BI_ASSERTION  ? VT_ASSERTION
              : id == BI_EVALRESULT ? VT_EVALRESULT
                                    : VT_CONDRESULT;
    const rdesc *d = desc_of(t);
    if (nargs > (size_t)d->nfields)
        return v_raise(c, "TypeError",
                       "%s.__init__() takes from %d to %d positional arguments but %zu were given",
                       d->name, d->nrequired + 1, d->nfields + 1, nargs + 1);
    val *r = v_new(c, t);
    if (!r) return NULL;
    val **f = r->u.rec.f;
    for (size_t i = 0; i < nargs; i++)
        f[i] = args[i];
    for (size_t k = 0; k < nkw; k++) {
        int j;
        for (j = 0; j < d->nfields; j++)
            if (!strcmp(d->fields[j], kw[k].name)) break;
        if (j == d->nfields)
            return v_raise(c, "TypeError", "%s.__init__() got an unexpected keyword argument '%s'",
                           d->name, kw[k].name);
        if (f[j])
            return v_raise(c, "TypeError", "%s.__init__() got multiple values for argument '%s'",
                           d->name, kw[k].name);
        f[j] = kw[k].value;
    }
    for (int j = 0; j < d->nrequired; j++)
        if (!f[j])
            return v_raise(c, "TypeError",
                           "%s.__init__() missing 1 required positional argument: '%s'", d->name,
                           d->fields[j]);
    /* defaults */
    for (int j = 0; j < d->nfields; j++) {
        if (f[j]) continue;
        const char *fn = d->fields[j];
        if (t == VT_SCORE && !strcmp(fn, "unit"))
            f[j] = v_strz(c, "ratio");
        else if (t == VT_METRIC && !strcmp(fn, "unit"))
            f[j] = v_strz(c, "");
        else if (t == VT_CONDRESULT && !strcmp(fn, "reason_code"))
            f[j] = v_strz(c, "condition_false");
        else if (t == VT_EVALRESULT && (!strcmp(fn, "metrics") || !strcmp(fn, "assertions")))
            f[j] = v_dict_new(c, 0);
        else if (t == VT_EVALRESULT && !strcmp(fn, "labels"))
            f[j] = v_tuple(c, NULL, 0);
        else
            f[j] = v_none();
        if (!f[j]) return NULL;
    }
    if (post_init(c, r)) return NULL;
    return r;
}

int vr_repr_buf(vctx *c, strbuf *b, val *v)
{
    const rdesc *d = desc_of(v_type(v));
    if (!d) {
        strbuf_puts(b, "<object>");
        return 0;
    }
    strbuf_puts(b, d->name);
    strbuf_putc(b, '(');
    for (int j = 0; j < d->nfields; j++) {
        if (j) strbuf_put(b, ", ", 2);
        strbuf_puts(b, d->fields[j]);
        strbuf_putc(b, '=');
        if (v_repr_buf(c, b, v->u.rec.f[j])) return -1;
    }
    strbuf_putc(b, ')');
    return 0;
}

int vr_eq(vctx *c, val *a, val *b)
{
    const rdesc *d = desc_of(v_type(a));
    for (int j = 0; j < d->nfields; j++) {
        val *x = a->u.rec.f[j], *y = b->u.rec.f[j];
        if (x == y) continue;
        int r = v_eq(c, x, y);
        if (r <= 0) return r;
    }
    return 1;
}

int vr_hash(vctx *c, val *v, int64_t *out)
{
    const rdesc *d = desc_of(v_type(v));
    val t = {.ty = VT_TUPLE};
    t.u.seq.items = v->u.rec.f;
    t.u.seq.len = (size_t)d->nfields;
    int err = 0;
    *out = v_hash_tuple(c, &t, &err);
    return err ? -1 : 0;
}

val *vr_getattr(vctx *c, val *v, const char *name, bool *found)
{
    (void)c;
    const rdesc *d = desc_of(v_type(v));
    for (int j = 0; d && j < d->nfields; j++) {
        if (!strcmp(d->fields[j], name)) {
            *found = true;
            return v->u.rec.f[j];
        }
    }
    *found = false;
    return NULL;
}

/* ---- outcomes -------------------------------------------------------------- */

/* json.dumps(value) with its defaults (ensure_ascii, ", " and ": "). */
static int json_value(vctx *c, strbuf *b, val *v, int depth)
{
    if (depth > 500) {
        v_raise(c, "RecursionError",
                "maximum recursion depth exceeded while encoding a JSON object");
        return -1;
    }
    switch (v_type(v)) {
    case VT_NONE:
        strbuf_puts(b, "null");
        return 0;
    case VT_BOOL:
        strbuf_puts(b, v->u.b ? "true" : "false");
        return 0;
    case VT_INT:
        return vi_repr_buf(c, b, v);
    case VT_FLOAT:
        if (isnan(v->u.f))
            strbuf_puts(b, "NaN");
        else if (isinf(v->u.f))
            strbuf_puts(b, v->u.f > 0 ? "Infinity" : "-Infinity");
        else
            pyfloat_repr(b, v->u.f);
        return 0;
    case VT_STR: {
        strbuf_putc(b, '"');
        size_t i = 0;
        while (i < v->u.s.blen) {
            unsigned char ch = (unsigned char)v->u.s.s[i];
            if (ch < 0x80) {
                switch (ch) {
                case '"':
                    strbuf_put(b, "\\\"", 2);
                    break;
                case '\\':
                    strbuf_put(b, "\\\\", 2);
                    break;
                case '\n':
                    strbuf_put(b, "\\n", 2);
                    break;
                case '\r':
                    strbuf_put(b, "\\r", 2);
                    break;
                case '\t':
                    strbuf_put(b, "\\t", 2);
                    break;
                case '\b':
                    strbuf_put(b, "\\b", 2);
                    break;
                case '\f':
                    strbuf_put(b, "\\f", 2);
                    break;
                default:
                    if (ch < 0x20 || ch == 0x7f)
                        strbuf_printf(b, "\\u%04x", ch);
                    else
                        strbuf_putc(b, (char)ch);
                }
                i++;
                continue;
            }
            size_t adv;
            int32_t cp = vs_decode1(v->u.s.s + i, v->u.s.blen - i, &adv);
            if (cp >= 0x10000) {
                int32_t x = cp - 0x10000;
                strbuf_printf(b, "\\u%04x\\u%04x", 0xD800 + (x >> 10), 0xDC00 + (x & 0x3FF));
            } else
                strbuf_printf(b, "\\u%04x", cp);
            i += adv;
        }
        strbuf_putc(b, '"');
        return 0;
    }
    case VT_LIST:
    case VT_TUPLE:
        strbuf_putc(b, '[');
        for (size_t i = 0; i < v->u.seq.len; i++) {
            if (i) strbuf_put(b, ", ", 2);
            if (json_value(c, b, v->u.seq.items[i], depth + 1)) return -1;
        }
        strbuf_putc(b, ']');
        return 0;
    case VT_DICT:
        if (v_dict_force(c, v)) return -1;
        strbuf_putc(b, '{');
        for (size_t i = 0; i < v->u.t.len; i++) {
            val *k = v->u.t.entries[i].key;
            if (i) strbuf_put(b, ", ", 2);
            if (v_type(k) == VT_STR)
                json_value(c, b, k, depth + 1);
            else if (v_type(k) == VT_NONE || v_type(k) == VT_BOOL || v_type(k) == VT_INT ||
                     v_type(k) == VT_FLOAT) {
                strbuf_putc(b, '"');
                if (v_type(k) == VT_NONE)
                    strbuf_puts(b, "null");
                else if (v_type(k) == VT_BOOL)
                    strbuf_puts(b, k->u.b ? "true" : "false");
                else if (json_value(c, b, k, depth + 1))
                    return -1;
                strbuf_putc(b, '"');
            } else {
                v_raise(c, "TypeError", "keys must be str, int, float, bool or None, not %s",
                        v_type_name(k));
                return -1;
            }
            strbuf_put(b, ": ", 2);
            if (json_value(c, b, v->u.t.entries[i].value, depth + 1)) return -1;
        }
        strbuf_putc(b, '}');
        return 0;
    default:
        break;
    }
    v_raise(c, "TypeError", "Object of type %s is not JSON serializable", v_type_name(v));
    return -1;
}

/* The reference's output guard: repr must not match
 * " at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}". */
static int forbid_object_reprs(vctx *c, val *v, const char *field)
{
    strbuf b;
    strbuf_init(&b);
    if (v_repr_buf(c, &b, v)) {
        strbuf_free(&b);
        return -1;
    }
    const char *s = b.data ? b.data : "";
    size_t n = b.len;
    bool bad = false;
    for (size_t i = 0; i + 1 < n && !bad; i++) {
        if (s[i] != '0' || s[i + 1] != 'x') continue;
        size_t k = i + 2;
        while (k < n &&
               ((s[k] >= '0' && s[k] <= '9') || ((s[k] | 32) >= 'a' && (s[k] | 32) <= 'f')))
            k++;
        size_t hex = k - i - 2;
        if (hex >= 6 || (hex >= 1 && i >= 4 && !memcmp(s + i - 4, " at ", 4))) bad = true;
    }
    strbuf_free(&b);
    if (bad) {
        v_raise(c, "UnsafeEvaluatorSource", "%s result may not embed a runtime object repr", field);
        return -1;
    }
    return 0;
}

int v_condition_outcome(vctx *c, val *v, strbuf *b)
{
    if (v_type(v) != VT_BOOL && v_type(v) != VT_CONDRESULT) {
        v_raise(c, "TypeError", "condition_source must return bool or ConditionResult");
        return -1;
    }
    if (forbid_object_reprs(c, v, "condition_source")) return -1;
    bool app = v_type(v) == VT_BOOL ? v->u.b : v->u.rec.f[0]->u.b;
    if (app) {
        strbuf_puts(b, "\"applicable\": true");
        return 0;
    }
    strbuf_puts(b, "\"applicable\": false, \"reason_code\": ");
    if (v_type(v) == VT_BOOL)
        strbuf_puts(b, "\"condition_false\"");
    else if (json_value(c, b, v->u.rec.f[1], 0))
        return -1;
    return 0;
}

typedef struct {
    val *key;
    const char *kind;
    val *numeric, *boolv, *unit, *display, *desc, *reasoning;
} ritem;

static int sort_items(vctx *c, val *mapping, val ***keys, val ***vals, size_t *n)
{
    if (v_type(mapping) != VT_DICT) {
        v_raise(c, "AttributeError", "'%s' object has no attribute 'items'", v_type_name(mapping));
        return -1;
    }
    if (v_dict_force(c, mapping)) return -1;
    size_t m = mapping->u.t.len;
    val **ks = v_items_alloc(c, m), **vs = v_items_alloc(c, m);
    if (!ks || !vs) return -1;
    for (size_t i = 0; i < m; i++)
        ks[i] = mapping->u.t.entries[i].key;
    if (v_sort(c, ks, m, NULL, false)) return -1;
    for (size_t i = 0; i < m; i++) {
        vs[i] = v_dict_get(c, mapping, ks[i]);
        if (!vs[i]) return -1;
    }
    *keys = ks;
    *vals = vs;
    *n = m;
    return 0;
}

int v_evaluator_outcome(vctx *c, val *v, const char *eval_key, strbuf *out)
{
    if (v_type(v) != VT_EVALRESULT) {
        v_raise(c, "TypeError", "evaluator_source must return EvalResult");
        return -1;
    }
    if (forbid_object_reprs(c, v, "evaluator_source")) return -1;
    val **f = v->u.rec.f;
    val *score = f[0], *metrics = f[1], *assertions = f[2], *reasoning = f[3], *summary = f[4],
        *labels = f[5];
    val *ek = v_strz(c, eval_key && *eval_key ? eval_key : "result");
    if (!ek) return -1;
    size_t cap = 1;
    if (v_dict_force(c, metrics) || v_dict_force(c, assertions)) return -1;
    if (v_type(metrics) == VT_DICT) cap += metrics->u.t.len;
    if (v_type(assertions) == VT_DICT) cap += assertions->u.t.len;
    ritem *items = v_alloc(c, cap * sizeof *items);
    if (!items) return -1;
    size_t n = 0;
    val *none = v_none();
    if (v_type(score) != VT_NONE) {
        val *sv, *sp, *su, *sd, *sde;
        if (v_type(score) == VT_SCORE) {
            sv = score->u.rec.f[0];
            sp = score->u.rec.f[1];
            su = score->u.rec.f[2];
            sd = score->u.rec.f[3];
            sde = score->u.rec.f[4];
        } else {
            v_raise(c, "AttributeError", "'%s' object has no attribute 'value'",
                    v_type_name(score));
            return -1;
        }
        items[n++] = (ritem){ek, "score", sv, sp, su, sd, sde, reasoning};
    }
    val **ks, **vs;
    size_t m;
    if (sort_items(c, metrics, &ks, &vs, &m)) return -1;
    for (size_t i = 0; i < m; i++) {
        if (validate_key(c, ks[i], "metric key")) return -1;
        val *mv = vs[i];
        if (v_type(mv) != VT_METRIC) {
            val *a[1] = {mv};
            mv = vr_construct(c, BI_METRIC, a, 1, NULL, 0);
            if (!mv) return -1;
        }
        items[n++] = (ritem){
            ks[i],          "metric",       mv->u.rec.f[0], none,
            mv->u.rec.f[1], mv->u.rec.f[2], mv->u.rec.f[3], vs_eq(ks[i], ek) ? reasoning : none};
    }
    if (sort_items(c, assertions, &ks, &vs, &m)) return -1;
    for (size_t i = 0; i < m; i++) {
        if (validate_key(c, ks[i], "assertion key")) return -1;
        val *av = vs[i];
        if (v_type(av) != VT_ASSERTION) {
            val *a[1] = {av};
            av = vr_construct(c, BI_ASSERTION, a, 1, NULL, 0);
            if (!av) return -1;
        }
        items[n++] =
            (ritem){ks[i], "assertion", none,           av->u.rec.f[0],
                    NULL,  none,        av->u.rec.f[1], vs_eq(ks[i], ek) ? reasoning : none};
    }
    if (n == 0) {
        v_raise(c, "ValueError", "an EvalResult must contain a score, metric, or assertion");
        return -1;
    }
    if (n > 25) {
        v_raise(c, "ValueError", "an EvalResult may contain at most 25 results");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (vs_eq(items[i].key, items[j].key)) {
                v_raise(c, "ValueError", "result keys must be unique within one evaluation run");
                return -1;
            }
    strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, "\"results\": [");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        ritem *it = &items[i];
        if (i) strbuf_put(&b, ", ", 2);
        strbuf_puts(&b, "{\"result_key\": ");
        rc |= json_value(c, &b, it->key, 0);
        strbuf_printf(&b, ", \"result_kind\": \"%s\", \"numeric_value\": ", it->kind);
        rc |= json_value(c, &b, it->numeric, 0);
        strbuf_puts(&b, ", \"bool_value\": ");
        rc |= json_value(c, &b, it->boolv, 0);
        strbuf_puts(&b, ", \"text_value\": null, \"unit\": ");
        if (it->unit)
            rc |= json_value(c, &b, it->unit, 0);
        else
            strbuf_puts(&b, "\"\"");
        strbuf_puts(&b, ", \"display_value\": ");
        rc |= json_value(c, &b, it->display, 0);
        strbuf_puts(&b, ", \"description\": ");
        rc |= json_value(c, &b, it->desc, 0);
        strbuf_puts(&b, ", \"reasoning\": ");
        rc |= json_value(c, &b, it->reasoning, 0);
        strbuf_puts(&b, ", \"labels\": ");
        rc |= json_value(c, &b, labels, 0);
        strbuf_putc(&b, '}');
    }
    strbuf_puts(&b, "], \"summary\": ");
    if (rc == 0) rc = json_value(c, &b, summary, 0);
    if (rc == 0) strbuf_put(out, b.data, b.len);
    strbuf_free(&b);
    return rc ? -1 : 0;
}
