/* api/body: request bodies turned into JSON with bounded memory. A JSON tree
 * costs far more than its text (a 2-byte "{}" is a ~100-byte jansson object),
 * so before any tree is built one pass over the bytes checks the nesting
 * depth and counts the values against a budget; only a body within both is
 * handed to jansson. POST /v1/evaluate's transcript, which may legitimately
 * be large, is carved out of the body in the same pass and never becomes a
 * tree: its bytes go straight to the session image (simg_build_text). */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end;
    size_t values;                    /* counted so far */
    size_t max_values;                /* budget */
    int max_depth;                    /* deepest nesting allowed */
    const char *carve;                /* top-level member whose value is carved out, or NULL */
    size_t carve_keylen;              /* strlen(carve) */
    const char *carve_at, *carve_end; /* the carved value's bytes */
    int counting;                     /* 0 while inside the carved value */
    fps_err *err;
} scan;

static int scan_fail(scan *s, const char *msg)
{
    return fps_err_set(s->err, API_JSON_EINVALID, 400, "invalid_json", "%s", msg);
}

/* Over the depth or value budget, so the caller answers 413. */
static int scan_over(scan *s, const char *msg)
{
    return fps_err_set(s->err, API_JSON_ETOO_COMPLEX, 413, "body_too_complex", "%s", msg);
}

static void skip_ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* A string starting at s->p (the opening quote); leaves p past the closing
 * one. Only finds its end: escapes are validated by the real parser. */
static int skip_string(scan *s)
{
    s->p++;
    while (s->p < s->end) {
        unsigned char c = (unsigned char)*s->p++;
        if (c == '"') return 0;
        if (c == '\\') {
            if (s->p == s->end) break;
            s->p++;
        } else if (c < 0x20) {
            return scan_fail(s, "request body is not valid JSON: control character in a string");
        }
    }
    return scan_fail(s, "request body is not valid JSON: unterminated string");
}

static int value(scan *s, int depth);

/* The members or elements of an object/array whose opening bracket is at p. */
static int container(scan *s, int depth)
{
    char close = *s->p == '{' ? '}' : ']';
    int object = close == '}';
    if (depth >= s->max_depth) return scan_over(s, "request body nests JSON too deeply");
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        int carve_this = 0;
        skip_ws(s);
        if (object) {
            if (s->p == s->end || *s->p != '"')
                return scan_fail(s, "request body is not valid JSON: expected a member name");
            const char *k = s->p + 1;
            int rc = skip_string(s);
            if (rc) return rc;
            carve_this = depth == 0 && s->carve != NULL &&
                         (size_t)(s->p - 1 - k) == s->carve_keylen &&
                         memcmp(k, s->carve, s->carve_keylen) == 0;
            skip_ws(s);
            if (s->p == s->end || *s->p != ':')
                return scan_fail(s, "request body is not valid JSON: expected ':'");
            s->p++;
            skip_ws(s);
        }
        if (carve_this) {
            if (s->carve_at != NULL)
                return scan_fail(s, "request body has a duplicate member name");
            s->carve_at = s->p;
            s->counting = 0;
            int rc = value(s, depth + 1);
            if (rc) return rc;
            s->counting = 1;
            s->carve_end = s->p;
        } else {
            int rc = value(s, depth + 1);
            if (rc) return rc;
        }
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 0;
        }
        return scan_fail(s, "request body is not valid JSON: expected ',' or a closing bracket");
    }
}

static int value(scan *s, int depth)
{
    skip_ws(s);
    if (s->p == s->end) return scan_fail(s, "request body is not valid JSON: value expected");
    if (s->counting && ++s->values > s->max_values)
        return scan_over(s, "request body has too many JSON values");
    switch (*s->p) {
    case '{':
    case '[':
        return container(s, depth);
    case '"':
        return skip_string(s);
    default: /* number or literal: the real parser validates it */
        while (s->p < s->end && strchr(",]} \t\r\n", *s->p) == NULL)
            s->p++;
        return 0;
    }
}

int api_json_scan(const char *buf, size_t len, const char *carve, const char **carve_at,
                  size_t *carve_len, fps_err *err)
{
    scan s = {.p = buf,
              .end = buf + len,
              .max_values = API_JSON_MAX_VALUES,
              .max_depth = API_JSON_MAX_DEPTH,
              .carve = carve,
              .carve_keylen = carve ? strlen(carve) : 0,
              .counting = 1,
              .err = err};
    if (carve_at) *carve_at = NULL;
    if (carve_len) *carve_len = 0;
    int rc = value(&s, 0);
    if (rc) return rc;
    skip_ws(&s);
    if (s.p != s.end) return scan_fail(&s, "request body is not valid JSON: text after the value");
    if (carve_at && carve_len && s.carve_at) {
        *carve_at = s.carve_at;
        *carve_len = (size_t)(s.carve_end - s.carve_at);
    }
    return 0;
}
