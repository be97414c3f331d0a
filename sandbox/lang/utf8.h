/* sandbox/lang/utf8: the one UTF-8 encoder of the language's files (the
 * lexer's escapes, the session image's \u escapes, str and bytes
 * operations). Inline: it sits on the hot paths of ingest and string work. */
#ifndef FPS_UTF8_H
#define FPS_UTF8_H
#include <stdint.h>

/* Writes code point cp (at most 0x10FFFF; surrogates are written as they
 * are, as CPython's surrogatepass would) as 1 to 4 bytes at o; returns the
 * count. */
static inline int utf8_encode(uint32_t cp, char *o)
{
    unsigned char *b = (unsigned char *)o;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | (cp >> 18));
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

#endif
