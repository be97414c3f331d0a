/* sidecar/recent: the transcripts of the last 16 processed assignments (at
 * most RECENT_MAX_BYTES in all: a transcript larger than that is not kept;
 * the memory budget counts the bound whole), as the bytes received, for
 * the admin playground
 * ("evaluate against a recent session"). It holds references, so keeping
 * them costs no copy; it has its own lock, apart from the worker's.
 * Thread-safe. */
#ifndef FPS_RECENT_H
#define FPS_RECENT_H
#include "common/rcbuf.h"

typedef struct recent_ring recent_ring;

#define RECENT_MAX_BYTES ((size_t)32 * 1024 * 1024)

recent_ring *recent_new(void);
/* Releases every reference it holds. NULL is a no-op. */
void recent_free(recent_ring *r);
/* Keeps a reference to `raw` under `assignment_id`, evicting the oldest
 * entries while over the byte budget. */
void recent_put(recent_ring *r, const char *assignment_id, rcbuf *raw);
/* A new reference to the bytes kept for `assignment_id`, or NULL. */
rcbuf *recent_get(recent_ring *r, const char *assignment_id);
/* The bytes it holds now (at most RECENT_MAX_BYTES). */
size_t recent_bytes(recent_ring *r);

#endif
