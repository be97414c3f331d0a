/* common/timeutil: wall-clock and monotonic time, RFC 3339 formatting and
 * parsing as the protocol uses it ("2026-08-28T12:00:10.812000Z"). */
#ifndef FPS_TIMEUTIL_H
#define FPS_TIMEUTIL_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Seconds since the epoch, wall clock, microsecond resolution. */
double time_now(void);
/* Monotonic milliseconds (for deadlines and durations). */
int64_t time_mono_ms(void);
/* Waits on `cv` (with `mu` held, as pthread_cond_timedwait) until signalled
 * or the monotonic deadline `deadline_ms` (time_mono_ms) passes; INT64_MAX
 * waits without a deadline. Returns 0 when woken, ETIMEDOUT at the
 * deadline. Callers re-check their condition either way. */
int time_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);
/* Formats `epoch` as UTC RFC 3339 with exactly six fractional digits and 'Z'.
 * `out` needs 28 bytes. Returns out. */
char *time_rfc3339(double epoch, char *out, size_t cap);
/* The same text written to `out` (at least 64 bytes), NUL-terminated; returns
 * its length (27 for years 0000..9999). Integer arithmetic, no gmtime. */
size_t time_rfc3339_n(double epoch, char *out);
char *time_rfc3339_now(char *out, size_t cap);
/* Parses an RFC 3339 timestamp (any fraction length, 'Z' or +hh:mm offset).
 * Returns 0 and sets *epoch, or -1 if `s` is not a valid timestamp. */
int time_parse_rfc3339(const char *s, double *epoch);

#endif
