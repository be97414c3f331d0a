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
void strbuf_putc(strbuf *b, char c);
void strbuf_put(strbuf *b, const void *data, size_t len);
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
