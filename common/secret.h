/* common/secret: holds a credential (bearer token, admin token, evaluator
 * shared secret) so that it is never passed around as a plain string.
 *
 * The only way to read the bytes back is secret_expose(), which callers use
 * at the one place a credential must leave the process (an Authorization
 * header, a constant-time comparison). The logger has no field type for a
 * secret, and secret_free wipes the memory. */
#ifndef FPS_SECRET_H
#define FPS_SECRET_H
#include "common/err.h"

#include <stddef.h>

typedef struct secret secret;

/* Copies `value` (trailing whitespace/newlines trimmed). NULL if empty. */
secret *secret_from_str(const char *value);
/* fps_err codes (names): SECRET_EIO "cannot_read" / "cannot_write",
 * SECRET_EINVALID "invalid_secret" (empty, or larger than 4 KiB). */
enum { SECRET_EIO = -1, SECRET_EINVALID = -2 };
/* Reads a secret file (a mounted Kubernetes Secret, say). Returns NULL and
 * fills err (never containing file contents) if unreadable, empty or > 4 KiB. */
secret *secret_from_file(const char *path, fps_err *err);
/* Re-reads a secret file into s (a rotated Kubernetes Secret, say): 1 when
 * the value changed, 0 when it is the same, -1 with err (never the value)
 * when the file is unreadable, empty or > 4 KiB, s keeping its value. Safe
 * while other threads read s; one caller at a time rotates it. */
int secret_reload(secret *s, const char *path, fps_err *err);
/* Borrowed view of the current bytes and (unless len is NULL) their length,
 * read together: valid until secret_free, and for a while after a rotation
 * replaced them (long enough for one header or comparison). */
const char *secret_view(const secret *s, size_t *len);
/* The same, for callers that need only the bytes (NUL-terminated) or only
 * the length; a caller that needs both takes them from one secret_view. */
const char *secret_expose(const secret *s);
size_t secret_len(const secret *s);
/* Constant-time comparison against a candidate; 1 if equal. */
int secret_equals(const secret *s, const char *candidate, size_t len);
void secret_free(secret *s);

/* Fills out with 2*nbytes lowercase hex characters of kernel randomness
 * (getrandom) and a NUL; out must hold 2*nbytes+1. Returns 0 or -1. */
int secret_random_hex(char *out, size_t nbytes);
/* Reads the secret at path; when the file does not exist, creates it first
 * (O_EXCL, mode 0600) holding 32 random bytes as hex, and sets *created.
 * NULL with err filled (never the value) on failure. */
secret *secret_load_or_create(const char *path, int *created, fps_err *err);

#endif
