/* sidecar/recent: the session images of the last 16 processed assignments
 * (at most the bound given to recent_new, by default RECENT_MAX_BYTES, of
 * image in all: a larger one is not kept; the memory budget counts the bound
 * whole), for the admin playground
 * ("evaluate against a recent session"). It holds references to the
 * assignments' own images (sealed memfds, sbx_image_ref), so keeping them
 * costs no copy, no parse when the playground evaluates against one, and
 * does not keep the transcript's bytes as received; it has its own lock,
 * apart from the worker's. Thread-safe. */
#ifndef FPS_RECENT_H
#define FPS_RECENT_H
#include "sandbox/jail/sbx.h"

typedef struct recent_ring recent_ring;

#define RECENT_MAX_BYTES ((size_t)32 * 1024 * 1024) /* the default bound */

/* A ring that keeps at most `max_bytes` of images (0: keeps none), or NULL
 * when out of memory. */
recent_ring *recent_new(size_t max_bytes);
/* Releases every reference it holds. NULL is a no-op. */
void recent_free(recent_ring *r);
/* Keeps a reference to `img` under `assignment_id`, evicting the oldest
 * entries while over the byte budget. */
void recent_put(recent_ring *r, const char *assignment_id, sbx_image *img);
/* A new reference to the image kept for `assignment_id`, or NULL. */
sbx_image *recent_get(recent_ring *r, const char *assignment_id);
/* The image bytes it holds now (at most its bound). */
size_t recent_bytes(recent_ring *r);

#endif
