/* common/log: see log.h. */
#include "common/log.h"
#include "common/pyfloat.h"
#include "common/timeutil.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static _Atomic int g_level = LOG_INFO;
static FILE *_Atomic g_stream = NULL;

void log_set_level(log_level level)
{
    g_level = (int)level;
}

log_level log_get_level(void)
{
    return (log_level)g_level;
}

void log_set_stream(FILE *f)
{
    g_stream = f;
}

int log_parse_level(const char *s, log_level *out)
{
    static const struct {
        const char *name;
        log_level level;
    } names[] = {{"debug", LOG_DEBUG},
                 {"info", LOG_INFO},
                 {"warn", LOG_WARN},
                 {"warning", LOG_WARN},
                 {"error", LOG_ERROR}};
    if (s == NULL) return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    return -1;
}

int log_key_is_secret(const char *key)
{
    static const char *const words[] = {"token",  "authorization", "secret", "password",  "passwd",
                                        "cookie", "api_key",       "apikey", "credential"};
    char lower[128];
    size_t n = 0;
    if (key == NULL) return 0;
    for (; key[n] != '\0' && n < sizeof lower - 1; n++)
        lower[n] = (char)tolower((unsigned char)key[n]);
    lower[n] = '\0';
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(lower, words[i]) != NULL) return 1;
    return 0;
}

static int value_is_secret(const char *v)
{
    return v != NULL && (strncasecmp(v, "bearer ", 7) == 0 || strncasecmp(v, "basic ", 6) == 0);
}

static const char *level_name(log_level l)
{
    switch (l) {
    case LOG_DEBUG:
        return "debug";
    case LOG_INFO:
        return "info";
    case LOG_WARN:
        return "warn";
    default:
        return "error";
    }
}

/* The ring of recent warnings and errors: owned lines (JSON objects, secrets
 * already redacted, no newline), oldest first from ring_next - ring_n. */
static char *ring[LOG_RING_CAP];
static unsigned long long ring_seq[LOG_RING_CAP];
static log_level ring_level[LOG_RING_CAP];
static size_t ring_next, ring_n;
static unsigned long long ring_total;
static pthread_mutex_t ring_mu = PTHREAD_MUTEX_INITIALIZER;

static void ring_push(log_level level, const char *line, size_t len)
{
    char *copy = strndup(line, len);
    if (copy == NULL) return;
    pthread_mutex_lock(&ring_mu);
    free(ring[ring_next]);
    ring[ring_next] = copy;
    ring_seq[ring_next] = ++ring_total;
    ring_level[ring_next] = level;
    ring_next = (ring_next + 1) % LOG_RING_CAP;
    if (ring_n < LOG_RING_CAP) ring_n++;
    pthread_mutex_unlock(&ring_mu);
}

void log_recent_json(strbuf *out, log_level min, unsigned long long after, size_t limit)
{
    pthread_mutex_lock(&ring_mu);
    size_t first = (ring_next + LOG_RING_CAP - ring_n) % LOG_RING_CAP, picked = 0;
    size_t idx[LOG_RING_CAP];
    for (size_t k = ring_n; k-- > 0;) { /* newest first, up to limit */
        size_t i = (first + k) % LOG_RING_CAP;
        if (ring_seq[i] <= after || picked == limit) break;
        if (ring_level[i] < min) continue;
        idx[picked++] = i;
    }
    strbuf_puts(out, "{\"entries\":[");
    for (size_t k = picked; k-- > 0;) { /* oldest first */
        size_t i = idx[k];
        strbuf_printf(out, "{\"seq\":%llu,\"entry\":", ring_seq[i]);
        strbuf_puts(out, ring[i]);
        strbuf_puts(out, k ? "}," : "}");
    }
    strbuf_printf(out, "],\"last_seq\":%llu,\"capacity\":%d}", ring_total, LOG_RING_CAP);
    pthread_mutex_unlock(&ring_mu);
}

void log_write(log_level level, const char *msg, const log_field *fields)
{
    int emit = (int)level >= g_level, keep = level >= LOG_WARN;
    if (!emit && !keep) return;
    strbuf b;
    char ts[40];
    strbuf_init(&b);
    time_rfc3339_now(ts, sizeof ts);
    strbuf_puts(&b, "{\"ts\":");
    strbuf_json_str(&b, ts);
    strbuf_puts(&b, ",\"level\":");
    strbuf_json_str(&b, level_name(level));
    strbuf_puts(&b, ",\"msg\":");
    strbuf_json_str(&b, msg ? msg : "");
    for (const log_field *f = fields; f != NULL && f->type != LOG_T_END; f++) {
        if (f->key == NULL) continue;
        strbuf_putc(&b, ',');
        strbuf_json_str(&b, f->key);
        strbuf_putc(&b, ':');
        if (log_key_is_secret(f->key) || (f->type == LOG_T_STR && value_is_secret(f->s))) {
            strbuf_json_str(&b, "[redacted]");
            continue;
        }
        switch (f->type) {
        case LOG_T_STR:
            if (f->s == NULL)
                strbuf_puts(&b, "null");
            else
                strbuf_json_str(&b, f->s);
            break;
        case LOG_T_INT:
            strbuf_printf(&b, "%lld", f->i);
            break;
        case LOG_T_DBL:
            if (isfinite(f->d))
                pyfloat_repr(&b, f->d);
            else
                strbuf_puts(&b, "null");
            break;
        case LOG_T_BOOL:
            strbuf_puts(&b, f->i ? "true" : "false");
            break;
        default:
            strbuf_puts(&b, "null");
            break;
        }
    }
    strbuf_puts(&b, "}\n");
    if (keep && b.data != NULL) ring_push(level, b.data, b.len - 1);
    FILE *out = g_stream;
    if (emit && out != NULL) {
        fwrite(b.data, 1, b.len, out);
        fflush(out);
    } else if (emit && b.data != NULL) {
        /* One write(2) per line so concurrent threads never interleave. */
        ssize_t r = write(STDERR_FILENO, b.data, b.len);
        (void)r;
    }
    strbuf_free(&b);
}
