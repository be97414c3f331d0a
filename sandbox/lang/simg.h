/* sandbox/lang/simg: the session image: a transcript parsed once in the parent
 * and flattened into one position-independent, read-only byte buffer that a
 * sandbox child maps and reads in place (no JSON parsing per evaluation).
 * The interpreter's `session` object reads events and payloads straight from
 * it. Layout is private to simg.c and the interpreter. */
#ifndef FPS_SIMG_H
#define FPS_SIMG_H
#include <jansson.h>
#include <stddef.h>

/* Builds the image of a transcript (a JSON object as the protocol's
 * transcript_response; `assignment_id` overrides the transcript's own when
 * not NULL; simg_build_text still requires the transcript's to be a string). On success returns 0
 * and sets *out (malloc'd, caller frees) and *out_len. On a transcript that is not the expected
 * shape returns -1 with a precise message in err. */
int simg_build(const json_t *transcript, const char *assignment_id, void **out, size_t *out_len,
               char *err, size_t errcap);

/* Same as simg_build, straight from the transcript's JSON text (one pass,
 * no intermediate tree): the ingest path. By default Python json semantics:
 * big ints kept exactly, NaN/Infinity accepted, duplicate keys keep the first
 * position and the last value. SIMG_STRICT (a server's response, validated
 * as the protocol's strict JSON) makes duplicate keys and NaN/Infinity
 * errors instead. */
enum { SIMG_STRICT = 1u };
int simg_build_text(const char *json, size_t len, const char *assignment_id, unsigned flags,
                    void **out, size_t *out_len, char *err, size_t errcap);

/* The transcript's session_revision_id in a built image (borrowed from
 * the image, NUL-terminated). */
const char *simg_session_revision_id(const void *img);

/* Checks that `buf` is a well-formed image (magic, version, every offset in
 * bounds). Returns 0 or -1 with a message. Call before reading an image
 * that crossed a process boundary. */
int simg_validate(const void *buf, size_t len, char *err, size_t errcap);

#endif
