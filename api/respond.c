/* api/respond: what a route handler uses to read its request and write its
 * response: JSON errors and bodies, query arguments, and the request body
 * parsed as a JSON object within its budget (optionally with one member
 * carved out unparsed). */
#include "api/internal.h"
#include "common/canonjson.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------- response helpers */

void api_error(api_resp *rs, int status, const char *code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rs->status = status;
    rs->content_type = "application/json";
    rs->static_data = NULL;
    strbuf_reset(&rs->body);
    strbuf_puts(&rs->body, "{\"error\":{\"code\":");
    strbuf_json_str(&rs->body, code);
    strbuf_puts(&rs->body, ",\"message\":");
    strbuf_json_str(&rs->body, msg);
    strbuf_puts(&rs->body, "}}");
}

void api_error_from(api_resp *rs, const fps_err *e, const char *dflt_code)
{
    api_error(rs, e->http_status ? e->http_status : 500, e->name[0] ? e->name : dflt_code, "%s",
              e->msg);
}

void api_json(api_resp *rs, int status, json_t *v)
{
    strbuf_reset(&rs->body);
    int rc = v ? canonjson_append_ordered(&rs->body, v) : -1; /* floats without noise */
    json_decref(v);
    if (rc != 0) {
        api_error(rs, 500, "internal_error", "could not serialize the response");
        return;
    }
    rs->status = status;
    rs->content_type = "application/json";
}

const char *api_query(const api_req *rq, const char *name)
{
    return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
}

int api_query_long(const api_req *rq, api_resp *rs, const char *name, long lo, long hi, long dflt,
                   long *out)
{
    const char *s = api_query(rq, name);
    *out = dflt;
    if (s == NULL) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        api_error(rs, 400, "invalid_request", "%s must be an integer from %ld to %ld", name, lo,
                  hi);
        return -1;
    }
    *out = v;
    return 0;
}

json_t *api_body_object_carve(const api_req *rq, api_resp *rs, const char *carve, const char **at,
                              size_t *len)
{
    fps_err err;
    char *rest = NULL; /* owned: the body with the carved value read as null */
    const char *text = rq->body;
    size_t n = rq->body_len;
    json_t *v = NULL;
    if (at) *at = NULL;
    if (len) *len = 0;
    if (rq->body == NULL || rq->body_len == 0) {
        api_error(rs, 400, "invalid_json", "the request body must be a JSON object");
        return NULL;
    }
    const char *cat = NULL;
    size_t clen = 0;
    int scanned = api_json_scan(rq->body, rq->body_len, carve, &cat, &clen, &err);
    if (scanned == API_JSON_ETOO_COMPLEX) {
        api_error(rs, err.http_status, err.name,
                  "%s (at most %d levels and %d values outside a transcript)", err.msg,
                  API_JSON_MAX_DEPTH, API_JSON_MAX_VALUES);
        return NULL;
    }
    if (scanned != 0) {
        api_error(rs, err.http_status, err.name, "%s", err.msg);
        return NULL;
    }
    if (cat != NULL) {
        size_t head = (size_t)(cat - rq->body), tail = rq->body_len - head - clen;
        rest = malloc(head + 4 + tail);
        if (rest == NULL) {
            api_error(rs, 503, "server_busy", "out of memory");
            return NULL;
        }
        static const char null_text[4] = {'n', 'u', 'l', 'l'}; /* no NUL: a span */
        memcpy(rest, rq->body, head);
        memcpy(rest + head, null_text, sizeof null_text);
        memcpy(rest + head + 4, cat + clen, tail);
        text = rest;
        n = head + 4 + tail;
        if (at) *at = cat;
        if (len) *len = clen;
    }
    json_error_t jerr;
    v = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL) {
        api_error(rs, 400, "invalid_json",
                  "request body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                  jerr.column);
    } else if (!json_is_object(v)) {
        json_decref(v);
        v = NULL;
        api_error(rs, 400, "invalid_json", "the request body must be a JSON object");
    }
    free(rest);
    if (v == NULL && at) *at = NULL;
    return v;
}

json_t *api_body_object(const api_req *rq, api_resp *rs)
{
    return api_body_object_carve(rq, rs, NULL, NULL, NULL);
}
