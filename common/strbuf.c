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

void strbuf_put(strbuf *b, const void *data, size_t len)
{
    grow(b, len);
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void strbuf_putc(strbuf *b, char c)
{
    strbuf_put(b, &c, 1);
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

void strbuf_json_strn(strbuf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    strbuf_putc(b, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            strbuf_puts(b, "\\\"");
            break;
        case '\\':
            strbuf_puts(b, "\\\\");
            break;
        case '\n':
            strbuf_puts(b, "\\n");
            break;
        case '\r':
            strbuf_puts(b, "\\r");
            break;
        case '\t':
            strbuf_puts(b, "\\t");
            break;
        case '\b':
            strbuf_puts(b, "\\b");
            break;
        case '\f':
            strbuf_puts(b, "\\f");
            break;
        default:
            if (c < 0x20) {
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                strbuf_put(b, esc, 6);
            } else {
                strbuf_putc(b, (char)c);
            }
        }
    }
    strbuf_putc(b, '"');
}

void strbuf_json_str(strbuf *b, const char *s)
{
    strbuf_json_strn(b, s, strlen(s));
}

char *strbuf_detach(strbuf *b, size_t *len)
{
    if (b->data == NULL) grow(b, 0), b->data[0] = '\0';
    char *p = b->data;
    if (len) *len = b->len;
    strbuf_init(b);
    return p;
}
