/* emulator/canonjson: the emulator's canonical JSON text (common/canonjson)
 * and the two digests the protocol builds on it (catalog_revision,
 * source_checksum). tests/integration/test_emulator_canon.py checks the
 * bytes against Python itself. */
#include "common/canonjson.h"
#include "common/ids.h"
#include "common/strbuf.h"
#include "emulator/emulator.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int emulator_canonical_json(const json_t *v, char **out, size_t *len)
{
    *out = canonjson_dumps(v, len);
    return *out == NULL ? -1 : 0;
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
