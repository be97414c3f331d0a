/* common/canonjson: canonical JSON, byte for byte as Python's
 * json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
 * writes it. One writer for every digest built on it: the catalog revision
 * the sidecar registers with and the emulator checks, and the emulator's
 * canonical views. tests/integration/test_emulator_canon.py checks the bytes
 * against Python itself. */
#include "common/canonjson.h"
#include "common/pyfloat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int canon_value(strbuf *b, const json_t *v, int sorted)
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
        pyfloat_repr(b, d);
        return 0;
    }
    case JSON_STRING:
        strbuf_json_strn(b, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_ARRAY: {
        strbuf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) strbuf_putc(b, ',');
            if (canon_value(b, json_array_get(v, i), sorted) != 0) return -1;
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
        if (n > 1 && sorted) qsort(keys, n, sizeof *keys, cmp_str);
        strbuf_putc(b, '{');
        int rc = 0;
        for (i = 0; i < n && rc == 0; i++) {
            if (i) strbuf_putc(b, ',');
            strbuf_json_str(b, keys[i]);
            strbuf_putc(b, ':');
            rc = canon_value(b, json_object_get(v, keys[i]), sorted);
        }
        strbuf_putc(b, '}');
        free(keys);
        return rc;
    }
    }
    return -1;
}

int canonjson_append(strbuf *out, const json_t *v)
{
    return canon_value(out, v, 1);
}

int canonjson_append_ordered(strbuf *out, const json_t *v)
{
    return canon_value(out, v, 0);
}

json_t *canonjson_seconds(double seconds)
{
    return json_real(round(seconds * 1000.0) / 1000.0);
}

static char *dumps(const json_t *v, int sorted, size_t *len)
{
    strbuf b;
    strbuf_init(&b);
    if (v == NULL || canon_value(&b, v, sorted) != 0) {
        strbuf_free(&b);
        return NULL;
    }
    return strbuf_detach(&b, len);
}

char *canonjson_dumps(const json_t *v, size_t *len)
{
    return dumps(v, 1, len);
}

char *canonjson_dumps_ordered(const json_t *v)
{
    return dumps(v, 0, NULL);
}
