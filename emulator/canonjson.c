/* emulator/canonjson: canonical JSON as Python's
 * json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
 * writes it, byte for byte; and the two digests the protocol builds on it
 * (catalog_revision, source_checksum). tests/integration/test_emulator_canon.py
 * checks the bytes against Python itself. */
#include "common/ids.h"
#include "common/strbuf.h"
#include "emulator/emulator.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* repr(float) of CPython: the shortest digits that round-trip; fixed notation
 * when the decimal point falls in (-4, 16], else d.ddde±XX. */
static void put_float(strbuf *b, double d)
{
    char buf[48];
    if (d == 0) {
        strbuf_puts(b, signbit(d) ? "-0.0" : "0.0");
        return;
    }
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, d);
        if (strtod(buf, NULL) == d) break;
    }
    const char *s = buf;
    if (*s == '-') {
        strbuf_putc(b, '-');
        s++;
    }
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < 23) digits[nd++] = *s;
    digits[nd] = '\0';
    int exp10 = (*s == 'e') ? atoi(s + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = '\0';
    int decpt = exp10 + 1;
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            strbuf_puts(b, "0.");
            for (int i = 0; i < -decpt; i++)
                strbuf_putc(b, '0');
            strbuf_put(b, digits, (size_t)nd);
        } else if (decpt >= nd) {
            strbuf_put(b, digits, (size_t)nd);
            for (int i = nd; i < decpt; i++)
                strbuf_putc(b, '0');
            strbuf_puts(b, ".0");
        } else {
            strbuf_put(b, digits, (size_t)decpt);
            strbuf_putc(b, '.');
            strbuf_put(b, digits + decpt, (size_t)(nd - decpt));
        }
    } else {
        strbuf_putc(b, digits[0]);
        if (nd > 1) {
            strbuf_putc(b, '.');
            strbuf_put(b, digits + 1, (size_t)(nd - 1));
        }
        int e = decpt - 1;
        strbuf_printf(b, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int put_value(strbuf *b, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        strbuf_puts(b, "null");
        return 0;
    case JSON_TRUE:
        strbuf_puts(b, "true");
        return 0;
    case JSON_FALSE:
        strbuf_puts(b, "false");
        return 0;
    case JSON_INTEGER:
        strbuf_printf(b, "%lld", (long long)json_integer_value(v));
        return 0;
    case JSON_REAL: {
        double d = json_real_value(v);
        if (!isfinite(d)) return -1;
        put_float(b, d);
        return 0;
    }
    case JSON_STRING:
        strbuf_json_strn(b, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_ARRAY: {
        strbuf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) strbuf_putc(b, ',');
            if (put_value(b, json_array_get(v, i)) != 0) return -1;
        }
        strbuf_putc(b, ']');
        return 0;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v), i = 0;
        if (n == 0) {
            strbuf_puts(b, "{}");
            return 0;
        }
        const char **keys = malloc(n * sizeof *keys);
        if (keys == NULL) return -1;
        const char *k;
        json_t *item;
        json_object_foreach((json_t *)v, k, item) keys[i++] = k;
        n = i; /* the keys filled: json_object_size(v), spelled out for the analyzer */
        if (n > 1) qsort(keys, n, sizeof *keys, cmp_str);
        strbuf_putc(b, '{');
        int rc = 0;
        for (i = 0; i < n && rc == 0; i++) {
            if (i) strbuf_putc(b, ',');
            strbuf_json_str(b, keys[i]);
            strbuf_putc(b, ':');
            rc = put_value(b, json_object_get(v, keys[i]));
        }
        strbuf_putc(b, '}');
        free(keys);
        return rc;
    }
    }
    return -1;
}

int emulator_canonical_json(const json_t *v, char **out, size_t *len)
{
    strbuf b;
    strbuf_init(&b);
    if (put_value(&b, v) != 0) {
        strbuf_free(&b);
        return -1;
    }
    *out = strbuf_detach(&b, len);
    return 0;
}

static int cmp_def_key(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *kx = json_string_value(json_object_get(x, "eval_key"));
    const char *ky = json_string_value(json_object_get(y, "eval_key"));
    return strcmp(kx ? kx : "", ky ? ky : "");
}

int emulator_catalog_revision(const json_t *catalog, int sort_labels, char out[72])
{
    size_t n = json_array_size(catalog);
    json_t **defs = malloc((n ? n : 1) * sizeof *defs);
    json_t *arr = json_array();
    int rc = -1;
    if (defs == NULL || arr == NULL) goto fail;
    for (size_t i = 0; i < n; i++)
        defs[i] = json_array_get(catalog, i);
    qsort(defs, n, sizeof *defs, cmp_def_key);
    for (size_t i = 0; i < n; i++) {
        json_t *labels = json_deep_copy(json_object_get(defs[i], "labels"));
        if (labels == NULL) labels = json_array();
        if (sort_labels) {
            size_t nl = json_array_size(labels);
            const char **ls = malloc((nl ? nl : 1) * sizeof *ls);
            json_t *sorted = json_array();
            for (size_t j = 0; j < nl; j++)
                ls[j] = json_string_value(json_array_get(labels, j));
            int ok = 1;
            for (size_t j = 0; j < nl; j++)
                ok &= ls[j] != NULL;
            if (ok) {
                qsort(ls, nl, sizeof *ls, cmp_str);
                for (size_t j = 0; j < nl; j++)
                    json_array_append_new(sorted, json_string(ls[j]));
                json_decref(labels);
                labels = sorted;
            } else {
                json_decref(sorted);
            }
            free(ls);
        }
        json_t *e = json_object();
        const char *fields[] = {"display_name", "eval_key", "eval_version", "result_kind"};
        for (size_t f = 0; f < 4; f++) {
            json_t *fv = json_object_get(defs[i], fields[f]);
            json_object_set_new(e, fields[f], fv ? json_deep_copy(fv) : json_null());
        }
        json_object_set_new(e, "labels", labels);
        json_array_append_new(arr, e);
    }
    char *text = NULL;
    size_t len = 0;
    if (emulator_canonical_json(arr, &text, &len) != 0) goto fail;
    char hex[65];
    ids_sha256_hex(text, len, hex);
    free(text);
    snprintf(out, 72, "sha256:%s", hex);
    rc = 0;
fail:
    json_decref(arr);
    free(defs);
    return rc;
}

void emulator_source_checksum(const char *condition_source, const char *evaluator_source,
                              char out[72])
{
    strbuf b;
    strbuf_init(&b);
    if (condition_source) strbuf_puts(&b, condition_source);
    strbuf_putc(&b, '\0');
    strbuf_puts(&b, evaluator_source ? evaluator_source : "");
    char hex[65];
    ids_sha256_hex(b.data, b.len, hex);
    strbuf_free(&b);
    snprintf(out, 72, "sha256:%s", hex);
}
