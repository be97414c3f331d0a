/* common/strbuf: a growable byte buffer for building text (JSON, HTTP bodies,
 * log lines). Always NUL-terminated when data != NULL. Owned by its user;
 * strbuf_free releases it. Allocation failure aborts: these buffers are small
 * and a daemon that cannot allocate a log line cannot do anything useful. */
#ifndef FPS_STRBUF_H
#define FPS_STRBUF_H
#include <stdarg.h>
#include <stddef.h>

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} strbuf;

void strbuf_init(strbuf *b);
void strbuf_free(strbuf *b);
void strbuf_reset(strbuf *b);
/* Makes room for `extra` more bytes (plus the NUL) without changing len. */
void strbuf_reserve(strbuf *b, size_t extra);
void strbuf_put_slow(strbuf *b, const void *data, size_t len);

/* put and putc are inline: hot paths (JSON rendering) call them per field. */
static inline void strbuf_put(strbuf *b, const void *data, size_t len)
{
    /* cap > 0 implies data != NULL; the check spells that out for the
     * static analyzer and costs one predictable branch */
    if (b->data && b->len + len < b->cap) {
        if (len) __builtin_memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = '\0';
        return;
    }
    strbuf_put_slow(b, data, len);
}

static inline void strbuf_putc(strbuf *b, char c)
{
    if (b->data && b->len + 1 < b->cap) {
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
        return;
    }
    strbuf_put_slow(b, &c, 1);
}

/* Appends the decimal text of v (hand-rolled: no printf). */
void strbuf_put_i64(strbuf *b, long long v);
void strbuf_puts(strbuf *b, const char *s);
void strbuf_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vprintf(strbuf *b, const char *fmt, va_list ap);
/* Appends `s` as a JSON string literal (quotes included), UTF-8 passed through.
 * The escaping is exactly Python's json.dumps(ensure_ascii=False): '"', '\\'
 * and control characters below 0x20 only (\n \r \t \b \f by name, the rest
 * as lowercase \u00xx), so canonical JSON (catalog revisions) can use it. */
void strbuf_json_str(strbuf *b, const char *s);
void strbuf_json_strn(strbuf *b, const char *s, size_t len);
/* Transfers ownership of the bytes to the caller (never NULL); b is reset. */
char *strbuf_detach(strbuf *b, size_t *len);

#endif
