/* common/rcbuf: immutable bytes shared by reference count. A transcript is
 * received once and then read, unchanged, by several owners with different
 * lifetimes (the assignment that parses it and dispatches it to local
 * evaluators, the worker's recent-transcript ring the admin playground
 * reads); each holds a reference instead of a copy. Thread-safe reference
 * counting; the bytes themselves are never written after rcbuf_take. */
#ifndef FPS_RCBUF_H
#define FPS_RCBUF_H
#include <stddef.h>

typedef struct rcbuf rcbuf;

/* Wraps `data` (malloc'd, `len` bytes, NUL-terminated at data[len]) with one
 * reference; takes ownership of data, also on failure (then NULL). */
rcbuf *rcbuf_take(char *data, size_t len);
/* Adds a reference (NULL passes through). */
rcbuf *rcbuf_ref(rcbuf *b);
/* Drops a reference; the last one frees the bytes. NULL is a no-op. */
void rcbuf_release(rcbuf *b);
/* The bytes (borrowed while a reference is held; NUL-terminated). */
const char *rcbuf_data(const rcbuf *b);
size_t rcbuf_len(const rcbuf *b);

#endif
