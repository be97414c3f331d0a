/* sidecar/catalog: the local catalog of definitions as the register call
 * sends it, and its revision (SPEC §2 step 1), byte-compatible with the
 * reference: "sha256:" + hex SHA-256 of
 *   json.dumps(sorted catalog, ensure_ascii=False, sort_keys=True,
 *              separators=(",", ":"))
 * where each entry is {display_name, eval_key, eval_version, labels (sorted),
 * result_kind}. Pure functions; thread-safe. */
#ifndef FPS_CATALOG_H
#define FPS_CATALOG_H
#include "common/err.h"
#include "common/strbuf.h"

#include <jansson.h>
#include <stddef.h>

#define CATALOG_REVISION_LEN 71 /* "sha256:" + 64 hex */

/* Normalizes a catalog (a JSON array of definitions with at least eval_key,
 * eval_version, display_name, result_kind; labels optional) into the wire
 * form: only the five fields, labels sorted, entries sorted by eval_key
 * (then eval_version). Returns a new array, or NULL with a message in err if
 * an entry lacks a field or has the wrong type, or there are more than 100. */
enum { CATALOG_EINVALID = -1 }; /* fps_err name "invalid_catalog" */
json_t *catalog_normalize(const json_t *defs, fps_err *err);
/* The catalog's order, a qsort comparator over json_t * entries with string
 * eval_key and eval_version: by eval_key, then eval_version. */
int catalog_entry_cmp(const void *a, const void *b);

/* The revision of a catalog (normalized first). out needs
 * CATALOG_REVISION_LEN + 1 bytes. Returns 0 or -1 with a message. An empty
 * catalog (NULL or []) has the revision of "[]". */
int catalog_revision(const json_t *defs, char *out, size_t outcap, fps_err *err);

#endif
