/* sidecar/catalog: catalog normalization and revision (see catalog.h). */
#include "sidecar/local/catalog.h"

#include "common/canonjson.h"
#include "common/ids.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_json_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

int catalog_entry_cmp(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(x, "eval_key")),
                   json_string_value(json_object_get(y, "eval_key")));
    if (c) return c;
    return strcmp(json_string_value(json_object_get(x, "eval_version")),
                  json_string_value(json_object_get(y, "eval_version")));
}

json_t *catalog_normalize(const json_t *defs, fps_err *err)
{
    static const char *const fields[] = {"eval_key", "eval_version", "display_name", "result_kind"};
    json_t *out = json_array();
    json_t **items = NULL;
    size_t n = defs ? json_array_size(defs) : 0;
    if (defs != NULL && !json_is_array(defs)) {
        fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog", "catalog must be an array");
        goto fail;
    }
    if (n > 100) {
        fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog",
                    "catalog has %zu definitions (at most 100)", n);
        goto fail;
    }
    items = calloc(n ? n : 1, sizeof *items);
    if (items == NULL) goto fail;
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(defs, i);
        if (!json_is_object(d)) {
            fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog",
                        "catalog[%zu] must be an object", i);
            goto fail;
        }
        json_t *e = json_object();
        items[i] = e;
        for (size_t f = 0; f < 4; f++) {
            json_t *s = json_object_get(d, fields[f]);
            if (!json_is_string(s)) {
                fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog",
                            "catalog[%zu].%s must be a string", i, fields[f]);
                goto fail;
            }
            json_object_set_new(e, fields[f], json_string(json_string_value(s)));
        }
        json_t *labels = json_object_get(d, "labels");
        json_t *sorted = json_array();
        json_object_set_new(e, "labels", sorted);
        if (labels != NULL && !json_is_null(labels)) {
            if (!json_is_array(labels)) {
                fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog",
                            "catalog[%zu].labels must be an array", i);
                goto fail;
            }
            size_t nl = json_array_size(labels);
            json_t **ls = calloc(nl ? nl : 1, sizeof *ls);
            if (ls == NULL) goto fail;
            for (size_t j = 0; j < nl; j++) {
                ls[j] = json_array_get(labels, j);
                if (!json_is_string(ls[j])) {
                    free(ls);
                    fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog",
                                "catalog[%zu].labels[%zu] must be a string", i, j);
                    goto fail;
                }
            }
            qsort(ls, nl, sizeof *ls, cmp_json_str);
            for (size_t j = 0; j < nl; j++)
                json_array_append(sorted, ls[j]);
            free(ls);
        }
    }
    qsort(items, n, sizeof *items, catalog_entry_cmp);
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(out, items[i]);
        items[i] = NULL;
    }
    free(items);
    return out;
fail:
    if (items)
        for (size_t i = 0; i < n; i++)
            json_decref(items[i]);
    free(items);
    json_decref(out);
    return NULL;
}

int catalog_revision(const json_t *defs, char *out, size_t outcap, fps_err *err)
{
    strbuf b;
    char hex[65];
    int rc = -1;
    strbuf_init(&b);
    json_t *norm = catalog_normalize(defs, err);
    if (norm == NULL) goto done;
    if (outcap < CATALOG_REVISION_LEN + 1) {
        fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog", "revision buffer too small");
        goto done;
    }
    if (canonjson_append(&b, norm) != 0) {
        fps_err_set(err, CATALOG_EINVALID, 0, "invalid_catalog", "catalog is not serializable");
        goto done;
    }
    ids_sha256_hex(b.data, b.len, hex);
    snprintf(out, outcap, "sha256:%s", hex);
    rc = 0;
done:
    json_decref(norm);
    strbuf_free(&b);
    return rc;
}
