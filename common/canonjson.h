/* common/canonjson: canonical JSON (Python's json.dumps with
 * ensure_ascii=False, sort_keys=True, separators=(",", ":")), the form the
 * protocol's digests are taken over. */
#ifndef FPS_CANONJSON_H
#define FPS_CANONJSON_H
#include "common/strbuf.h"

#include <jansson.h>

/* Appends the canonical JSON of v to out: keys sorted by code point, floats
 * as CPython's repr, strings escaped as strbuf_json_strn. Returns 0, or -1
 * for a value JSON cannot represent (a non-finite real) or out of memory;
 * out may then hold a partial text. */
int canonjson_append(strbuf *out, const json_t *v);
/* The same writer with each object's keys in their own (insertion) order:
 * compact JSON whose floats carry no noise (0.1, not 0.10000000000000001),
 * for every JSON text the sidecar writes that is not a digest input. */
int canonjson_append_ordered(strbuf *out, const json_t *v);
/* canonjson_append into a malloc'd string (its length in *len unless len is
 * NULL), or NULL when v cannot be written or memory ran out. */
char *canonjson_dumps(const json_t *v, size_t *len);
/* canonjson_append_ordered into a malloc'd string (json_dumps' stand-in), or
 * NULL when v cannot be written (a non-finite real) or memory ran out. */
char *canonjson_dumps_ordered(const json_t *v);
/* A duration in seconds as the admin API reports it: a new real rounded to
 * the millisecond (9.201, not 9.200621604919434), or NULL out of memory. */
json_t *canonjson_seconds(double seconds);

#endif
