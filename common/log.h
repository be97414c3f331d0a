/* common/log: structured logging, one JSON object per line on stderr.
 *
 *   log_info("claimed assignments", LOG_S("assignment_id", id), LOG_I("count", n));
 *
 * Fields are typed key/value pairs built with the LOG_* macros. Secrets cannot
 * be logged by accident: a field whose key names a credential (token,
 * authorization, secret, password, cookie, api_key) is always written as
 * "[redacted]", and so is any string value that starts with "Bearer ". Tokens
 * themselves live in `secret` objects (common/secret.h), which have no
 * string conversion the logger would accept. Thread-safe: one line is one
 * write(2).
 *
 * The last LOG_RING_CAP warnings and errors are also kept in memory, as
 * written (redacted), whatever the level set, for the admin API's log tail. */
#ifndef FPS_LOG_H
#define FPS_LOG_H
#include "common/strbuf.h"

#include <stdio.h>

#define LOG_RING_CAP 200

typedef enum { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

typedef enum { LOG_T_END = 0, LOG_T_STR, LOG_T_INT, LOG_T_DBL, LOG_T_BOOL } log_ftype;

/* One field. Built only by the macros below. */
typedef struct {
    log_ftype type;
    const char *key;
    const char *s;
    long long i;
    double d;
} log_field;

#define LOG_S(k, v) ((log_field){LOG_T_STR, (k), (v), 0, 0})
#define LOG_I(k, v) ((log_field){LOG_T_INT, (k), NULL, (long long)(v), 0})
#define LOG_D(k, v) ((log_field){LOG_T_DBL, (k), NULL, 0, (double)(v)})
#define LOG_B(k, v) ((log_field){LOG_T_BOOL, (k), NULL, (v) ? 1 : 0, 0})
#define LOG_END_ ((log_field){LOG_T_END, NULL, NULL, 0, 0})

void log_set_level(log_level level);
log_level log_get_level(void);
/* Parses "debug|info|warn|warning|error"; returns 0 on success, -1 otherwise. */
int log_parse_level(const char *s, log_level *out);
/* Redirects output (tests); NULL restores stderr. Borrowed, not closed. */
void log_set_stream(FILE *f);

void log_write(log_level level, const char *msg, const log_field *fields);

#define log_at_(lvl, msg, ...)                                                                     \
    log_write((lvl), (msg), (const log_field[]){__VA_ARGS__ __VA_OPT__(, ) LOG_END_})
#define log_debug(msg, ...) log_at_(LOG_DEBUG, (msg)__VA_OPT__(, ) __VA_ARGS__)
#define log_info(msg, ...) log_at_(LOG_INFO, (msg)__VA_OPT__(, ) __VA_ARGS__)
#define log_warn(msg, ...) log_at_(LOG_WARN, (msg)__VA_OPT__(, ) __VA_ARGS__)
#define log_error(msg, ...) log_at_(LOG_ERROR, (msg)__VA_OPT__(, ) __VA_ARGS__)

/* Appends {"entries":[{"seq":N,"entry":{log line}}...],"last_seq":N,"capacity":C}:
 * the kept lines with seq > after and level >= min (LOG_WARN or LOG_ERROR),
 * at most `limit` of the newest, oldest first. */
void log_recent_json(strbuf *out, log_level min, unsigned long long after, size_t limit);

/* True if a field with this key would be redacted (exposed for tests). */
int log_key_is_secret(const char *key);

#endif
