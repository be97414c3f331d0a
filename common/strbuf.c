/* common/strbuf: see strbuf.h. */
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_init(strbuf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void strbuf_free(strbuf *b)
{
    free(b->data);
    strbuf_init(b);
}

void strbuf_reset(strbuf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

static void grow(strbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL) abort();
    b->data = p;
    b->cap = cap;
}

void strbuf_reserve(strbuf *b, size_t extra)
{
    grow(b, extra);
}

void strbuf_put_slow(strbuf *b, const void *data, size_t len)
{
    grow(b, len);
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void strbuf_put_i64(strbuf *b, long long v)
{
    char tmp[24];
    char *e = tmp + sizeof tmp, *p = e;
    /* unsigned magnitude: LLONG_MIN has no positive counterpart */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    strbuf_put(b, p, (size_t)(e - p));
}

void strbuf_puts(strbuf *b, const char *s)
{
    strbuf_put(b, s, strlen(s));
}

void strbuf_vprintf(strbuf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    grow(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void strbuf_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

/* 1 for the bytes json.dumps(ensure_ascii=False) escapes: '"', '\\' and
 * control characters below 0x20. */
static const unsigned char JSON_ESC[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, ['\\'] = 1,
};

void strbuf_json_strn(strbuf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    grow(b, len + 2);
    b->data[b->len++] = '"';
    while (p < end) {
        const unsigned char *run = p;
        while (p < end && !JSON_ESC[*p])
            p++;
        if (p > run) strbuf_put(b, run, (size_t)(p - run));
        if (p == end) break;
        unsigned char c = *p++;
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t n = 2;
        switch (c) {
        case '"':
        case '\\':
            esc[1] = (char)c;
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        default:
            esc[1] = 'u';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        strbuf_put(b, esc, n);
    }
    strbuf_putc(b, '"');
}

void strbuf_json_str(strbuf *b, const char *s)
{
    strbuf_json_strn(b, s, strlen(s));
}

char *strbuf_detach(strbuf *b, size_t *len)
{
    char *p = b->data;
    if (p == NULL) {
        /* never-written buffer: hand back an owned empty string */
        p = malloc(1);
        if (p == NULL) abort();
        p[0] = '\0';
    }
    if (len) *len = b->len;
    strbuf_init(b);
    return p;
}
