/* sandbox/lang/simg: the session image: a transcript parsed once in the parent
 * and flattened into one position-independent, read-only byte buffer that a
 * sandbox child maps and reads in place (no JSON parsing per evaluation).
 * The interpreter's `session` object reads events and payloads straight from
 * it. Layout is private to simg.c and the interpreter. */
#ifndef FPS_SIMG_H
#define FPS_SIMG_H
#include "common/err.h"

#include <stddef.h>

/* Errors (common/err.h): the status returned and fps_err.code, with its
 * name: SIMG_EINVALID "invalid_transcript" (not JSON, or not a transcript of
 * the expected shape), SIMG_ETOO_LARGE "too_large" (beyond what an image can
 * hold, or out of memory), SIMG_ECORRUPT "invalid_image" (simg_validate). */
enum { SIMG_EINVALID = -1, SIMG_ETOO_LARGE = -2, SIMG_ECORRUPT = -3 };

/* Builds the image of a transcript from its JSON text (a JSON object as the
 * protocol's transcript_response), in one pass with no intermediate tree:
 * the one builder. `assignment_id` overrides the transcript's own when not
 * NULL (which must still be a string). On success returns 0 and sets *out
 * (malloc'd, caller frees) and *out_len. On a transcript that is not the
 * expected shape returns SIMG_EINVALID with a precise message in e. By default Python json
 * semantics: big ints kept exactly, NaN/Infinity accepted, duplicate keys keep the first position
 * and the last value. SIMG_STRICT (a server's response, validated as the protocol's strict JSON)
 * makes duplicate keys and NaN/Infinity errors instead.
 *
 * SIMG_CONSUME: the caller gives the text up. As the parse moves on, the
 * whole pages of `json` behind it are handed back to the kernel
 * (madvise MADV_DONTNEED: they read as zeros after), so the text and the
 * image are not both resident while the image grows. The buffer stays the
 * caller's, to free after the call whatever it returns; its bytes are not
 * to be read again. Only for private anonymous memory the caller owns
 * alone (a malloc'd buffer, an anonymous mapping), never a file mapping or
 * a buffer that something else still reads. */
enum { SIMG_STRICT = 1u, SIMG_CONSUME = 2u };
int simg_build_text(const char *json, size_t len, const char *assignment_id, unsigned flags,
                    void **out, size_t *out_len, fps_err *e);

/* The transcript's session_id and session_revision_id in a built image
 * (borrowed from the image, NUL-terminated). */
const char *simg_session_id(const void *img);
const char *simg_session_revision_id(const void *img);

/* Checks that `buf` is a well-formed image (magic, version, every offset in
 * bounds). Returns 0 or SIMG_ECORRUPT with a message. Call before reading an
 * image that crossed a process boundary. */
int simg_validate(const void *buf, size_t len, fps_err *e);

#endif
