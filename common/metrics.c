/* common/metrics: the process-wide metrics registry and its Prometheus text
 * exposition (see metrics.h). One mutex guards everything; series live in an
 * open-addressing hash table keyed by their canonical text and in a per-family
 * list in creation order for rendering. */
#include "common/metrics.h"
#include "common/log.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { M_COUNTER = 0, M_GAUGE, M_HISTOGRAM } m_type;

#define MAX_BUCKETS 20
#define MAX_FAMILIES 128

typedef struct m_series m_series;

typedef struct {
    char *name;
    uint64_t name_hash; /* hash_str(name): lookups compare it first */
    char *help;
    m_type type;
    int nbuckets;
    double buckets[MAX_BUCKETS];
    m_series *first, *last;
    int warned;
    int process; /* process_*: sampled from /proc, never persisted */
} m_family;

struct m_series {
    m_family *fam;
    char *key;    /* canonical: name{a="x"} or name                      */
    char *labels; /* rendered label pairs without braces: a="x",b="y"    */
    double value; /* counter/gauge                                        */
    double sum;   /* histogram                                            */
    uint64_t count;
    uint64_t *bucket_counts; /* histogram: per bucket (non-cumulative)   */
    m_series *next;
};

static const double secs_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                      0.5,    1,     2.5,    5,     10,   30,    60,   120, 300};
#define NSECS (int)(sizeof secs_buckets / sizeof secs_buckets[0])

static const struct {
    const char *name;
    m_type type;
    const char *help;
} known[] = {
    {METRIC_ADMIN_CACHE_HITS, M_COUNTER,
     "Admin list pages answered from the response cache (no store query)."},
    {METRIC_ADMIN_CACHE_MISSES, M_COUNTER,
     "Admin list pages rendered from the store (not in the response cache, or stale)."},
    {METRIC_BUILD_INFO, M_GAUGE, "Always 1; the version label is the sidecar's version."},
    {METRIC_PROCESS_CPU, M_COUNTER, "Total user and system CPU time spent in seconds."},
    {METRIC_PROCESS_RSS, M_GAUGE, "Resident memory size in bytes."},
    {METRIC_PROCESS_FDS, M_GAUGE, "Number of open file descriptors."},
    {METRIC_PROCESS_START, M_GAUGE, "Start time of the process since the Unix epoch in seconds."},
    {METRIC_ASSIGNMENTS_CLAIMED, M_COUNTER, "Assignments claimed from the server."},
    {METRIC_RUNS, M_COUNTER,
     "Evaluation runs finished, by execution mode, terminal status and eval key (the first 100 "
     "keys; later ones as \"other\")."},
    {METRIC_CONDITIONS, M_COUNTER, "Condition decisions, by outcome and reason code."},
    {METRIC_HEARTBEAT_FAILURES, M_COUNTER, "Heartbeats that failed (other than lease loss)."},
    {METRIC_LEASES_LOST, M_COUNTER, "Assignments whose lease was lost (409 lease_lost)."},
    {METRIC_PROTOCOL_ERRORS, M_COUNTER, "Protocol errors, by call and error code."},
    {METRIC_SUBMISSIONS, M_COUNTER, "Result submissions, by outcome."},
    {METRIC_REPLAYS, M_COUNTER, "Idempotent replays acknowledged by the server, by call."},
    {METRIC_REGISTRATIONS, M_COUNTER, "Successful worker registrations with the server."},
    {METRIC_TRANSCRIPTS_TOO_LARGE, M_COUNTER, "Assignments refused as transcript_too_large."},
    {METRIC_ARCHIVE_ARCHIVED, M_COUNTER, "Transcripts written to the archive."},
    {METRIC_ARCHIVE_EVICTIONS, M_COUNTER, "Archive entries evicted (bytes or age bound)."},
    {METRIC_ARCHIVE_FAILURES, M_COUNTER, "Transcripts not archived (best-effort), by reason."},
    {METRIC_STORE_FAILURES, M_COUNTER,
     "Store operations of the worker that failed, by operation and store status."},
    {METRIC_LOCAL_DISPATCHES, M_COUNTER,
     "Local evaluator dispatches, by evaluator, outcome and reason."},
    {METRIC_ADMIN_REQUESTS, M_COUNTER, "Admin API requests answered, by status class."},
    {METRIC_ACTIVE_ASSIGNMENTS, M_GAUGE, "Assignments being processed."},
    {METRIC_ACTIVE_RUNS, M_GAUGE, "Evaluation runs in progress."},
    {METRIC_ACTIVE_SANDBOXES, M_GAUGE, "Sandbox child processes running."},
    {METRIC_OUTBOX_DEPTH, M_GAUGE, "Result submissions waiting in the outbox."},
    {METRIC_MEMORY_BUDGET, M_GAUGE, "The process tree's memory budget (0: none)."},
    {METRIC_MEMORY_TREE, M_GAUGE,
     "The process tree's resident memory as the budget counts it (RssAnon + RssFile + "
     "session images)."},
    {METRIC_MEMORY_ACCOUNTED, M_GAUGE,
     "Memory the budget accounts for: the base, the recent ring, assignments' and sandboxes' "
     "reservations."},
    {METRIC_MEMORY_WAITING, M_GAUGE,
     "Work waiting for memory: sandbox starts, plus 1 while claims are held back."},
    {METRIC_MEMORY_RERUNS, M_COUNTER,
     "Sandboxes stopped to keep the memory budget and run again (same outcome), by class."},
    {METRIC_MEMORY_REFUSED, M_COUNTER,
     "Playground evaluations answered 503 memory_budget_full (no room within 2 s)."},
    {METRIC_ARCHIVE_BYTES, M_GAUGE, "Bytes the transcript archive takes on disk (file and WAL)."},
    {METRIC_ARCHIVE_ENTRIES, M_GAUGE, "Transcripts kept in the archive."},
    {METRIC_BREAKER_OPEN, M_GAUGE,
     "1 while the circuit breaker is open: the server fails persistently, claims are paused."},
    {METRIC_RETRIES, M_COUNTER, "Retried server requests, by call."},
    {METRIC_RETRY_BUDGET_EXHAUSTED, M_COUNTER,
     "Retries not sent because the retry budget was exhausted, by call."},
    {METRIC_BREAKER_OPENED, M_COUNTER, "Times the circuit breaker opened."},
    {METRIC_LOCAL_EVALUATORS, M_GAUGE, "Local evaluators registered and within their TTL."},
    {METRIC_LOCAL_DEFINITIONS, M_GAUGE, "Definitions offered by local evaluators."},
    {METRIC_READY, M_GAUGE,
     "1 when the sidecar is ready (registered, server contacted, not draining)."},
    {METRIC_DRAINING, M_GAUGE, "1 while the sidecar drains for shutdown."},
    {METRIC_UPTIME, M_GAUGE, "Seconds since the process started."},
    {METRIC_EVAL_SECONDS, M_HISTOGRAM,
     "Evaluation duration in seconds, by mode and (for runs) eval key."},
    {METRIC_SANDBOX_START_SECONDS, M_HISTOGRAM, "Time to start a sandbox child in seconds."},
    {METRIC_SERVER_REQUEST_SECONDS, M_HISTOGRAM, "Server request latency in seconds, by call."},
    {METRIC_ADMIN_REQUEST_SECONDS, M_HISTOGRAM, "Admin API request latency in seconds, by route."},
};

static m_series *series_get_locked(const char *name, m_type type, const char *const *labels);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static m_family families[MAX_FAMILIES];
static int nfamilies;
static int initialized;
static m_series **table; /* open addressing, capacity 2*MAX_SERIES */
static size_t table_cap;
static size_t nseries;
static int series_cap_warned;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static int valid_metric_name(const char *s)
{
    if (s == NULL ||
        !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' || *s == ':'))
        return 0;
    size_t n = 0;
    for (; *s; s++, n++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':'))
            return 0;
    }
    return n <= 200;
}

static int valid_label_name(const char *s)
{
    if (s == NULL || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
    if (s[0] == '_' && s[1] == '_') return 0;
    size_t n = 0;
    for (; *s; s++, n++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return n <= 100 && strcmp(s - n, "le") != 0;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL) abort();
    return p;
}

static m_family *family_add_locked(const char *name, m_type type, const char *help)
{
    if (nfamilies >= MAX_FAMILIES) return NULL;
    m_family *f = &families[nfamilies++];
    memset(f, 0, sizeof *f);
    f->name = xstrdup(name);
    f->name_hash = hash_str(name);
    f->help = xstrdup(help);
    f->type = type;
    f->process = strncmp(name, "process_", 8) == 0;
    if (type == M_HISTOGRAM) {
        f->nbuckets = NSECS;
        memcpy(f->buckets, secs_buckets, sizeof secs_buckets);
    }
    return f;
}

static void init_locked(void)
{
    if (initialized) return;
    initialized = 1;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        family_add_locked(known[i].name, known[i].type, known[i].help);
    table_cap = (size_t)2 * METRICS_MAX_SERIES;
    table = calloc(table_cap, sizeof *table);
    if (table == NULL) abort();
    m_series *b =
        series_get_locked(METRIC_BUILD_INFO, M_GAUGE, METRICS_LABELS_("version", FPS_VERSION));
    if (b) b->value = 1;
}

static m_family *family_find_locked(const char *name)
{
    uint64_t h = hash_str(name);
    for (int i = 0; i < nfamilies; i++)
        if (families[i].name_hash == h && strcmp(families[i].name, name) == 0) return &families[i];
    return NULL;
}

static const char *type_name(m_type t)
{
    return t == M_COUNTER ? "counter" : t == M_GAUGE ? "gauge" : "histogram";
}

/* Appends `v` as a label value with the exposition format's escapes. */
static void put_label_value(strbuf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            strbuf_puts(b, "\\\\");
        else if (*v == '"')
            strbuf_puts(b, "\\\"");
        else if (*v == '\n')
            strbuf_puts(b, "\\n");
        else
            strbuf_putc(b, *v);
    }
}

/* Builds the canonical label text (sorted by name) into b. Returns 0 or -1. */
static int build_labels(const char *const *labels, strbuf *b)
{
    const char *names[METRICS_MAX_LABELS], *vals[METRICS_MAX_LABELS];
    int n = 0;
    for (int i = 0; labels != NULL && labels[i] != NULL; i += 2) {
        if (labels[i + 1] == NULL || n >= METRICS_MAX_LABELS || !valid_label_name(labels[i]))
            return -1;
        names[n] = labels[i];
        vals[n] = labels[i + 1];
        n++;
    }
    for (int i = 1; i < n; i++) /* insertion sort by name */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
            t = vals[j];
            vals[j] = vals[j - 1];
            vals[j - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        if (i > 0 && strcmp(names[i - 1], names[i]) == 0) return -1;
        if (i > 0) strbuf_putc(b, ',');
        strbuf_puts(b, names[i]);
        strbuf_put(b, "=\"", 2);
        put_label_value(b, vals[i]);
        strbuf_putc(b, '"');
    }
    return 0;
}

static void warn_once(m_family *f, const char *name, const char *why)
{
    if (f != NULL) {
        if (f->warned) return;
        f->warned = 1;
    }
    log_warn("metric update ignored", LOG_S("metric", name), LOG_S("reason", why));
}

/* Finds or creates the series; NULL if refused. Called with mu held. */
static m_series *series_get_locked(const char *name, m_type type, const char *const *labels)
{
    init_locked();
    m_family *f = family_find_locked(name); /* a known family's name is valid */
    if (f == NULL) {
        if (!valid_metric_name(name)) {
            warn_once(NULL, "(invalid)", "invalid metric name");
            return NULL;
        }
        f = family_add_locked(name, type, "failproofai-sidecar metric.");
        if (f == NULL) {
            warn_once(NULL, name, "too many metric families");
            return NULL;
        }
    }
    if (f->type != type) {
        warn_once(f, name, "metric used with the wrong type");
        return NULL;
    }
    /* Reused by every call (mu held): a lookup allocates nothing. */
    static strbuf lb, key;
    strbuf_reset(&lb);
    strbuf_reset(&key);
    m_series *s = NULL;
    if (build_labels(labels, &lb) != 0) {
        warn_once(f, name, "invalid labels");
        goto done;
    }
    strbuf_puts(&key, name);
    if (lb.len > 0) {
        strbuf_putc(&key, '{');
        strbuf_put(&key, lb.data, lb.len);
        strbuf_putc(&key, '}');
    }
    size_t i = hash_str(key.data) & (table_cap - 1);
    while (table[i] != NULL) {
        if (strcmp(table[i]->key, key.data) == 0) {
            s = table[i];
            goto done;
        }
        i = (i + 1) & (table_cap - 1);
    }
    if (nseries >= METRICS_MAX_SERIES) {
        if (!series_cap_warned) {
            series_cap_warned = 1;
            log_warn("metric series cap reached; new series dropped", LOG_S("metric", name));
        }
        goto done;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) abort();
    s->fam = f;
    s->key = xstrdup(key.data);
    s->labels = xstrdup(lb.len > 0 ? lb.data : "");
    if (type == M_HISTOGRAM) {
        s->bucket_counts = calloc((size_t)f->nbuckets, sizeof *s->bucket_counts);
        if (s->bucket_counts == NULL) abort();
    }
    if (f->last)
        f->last->next = s;
    else
        f->first = s;
    f->last = s;
    table[i] = s;
    nseries++;
done:
    return s;
}

void metrics_counter_add(const char *name, double delta, const char *const *labels)
{
    if (!(delta >= 0) || isinf(delta)) return; /* counters only go up */
    pthread_mutex_lock(&mu);
    m_series *s = series_get_locked(name, M_COUNTER, labels);
    if (s) s->value += delta;
    pthread_mutex_unlock(&mu);
}

void metrics_gauge_set_l(const char *name, double value, const char *const *labels)
{
    pthread_mutex_lock(&mu);
    m_series *s = series_get_locked(name, M_GAUGE, labels);
    if (s) s->value = value;
    pthread_mutex_unlock(&mu);
}

void metrics_gauge_add_l(const char *name, double delta, const char *const *labels)
{
    pthread_mutex_lock(&mu);
    m_series *s = series_get_locked(name, M_GAUGE, labels);
    if (s) s->value += delta;
    pthread_mutex_unlock(&mu);
}

void metrics_histogram_observe(const char *name, double value, const char *const *labels)
{
    if (isnan(value)) return;
    pthread_mutex_lock(&mu);
    m_series *s = series_get_locked(name, M_HISTOGRAM, labels);
    if (s) {
        s->sum += value;
        s->count++;
        for (int i = 0; i < s->fam->nbuckets; i++)
            if (value <= s->fam->buckets[i]) {
                s->bucket_counts[i]++;
                break;
            }
    }
    pthread_mutex_unlock(&mu);
}

double metrics_value(const char *name, const char *const *labels)
{
    double v = 0;
    pthread_mutex_lock(&mu);
    init_locked();
    m_family *f = family_find_locked(name);
    if (f != NULL && f->type != M_HISTOGRAM) {
        m_series *s = series_get_locked(name, f->type, labels);
        if (s) v = s->value;
    }
    pthread_mutex_unlock(&mu);
    return v;
}

static char *eval_keys[METRICS_EVAL_KEY_CAP]; /* owned: the keys labelled so far */
static size_t n_eval_keys;

/* 1 if key is (now) one of the labelled keys, 0 once the cap is reached.
 * Called with mu held. */
static int eval_key_note_locked(const char *key)
{
    for (size_t i = 0; i < n_eval_keys; i++)
        if (strcmp(eval_keys[i], key) == 0) return 1;
    if (n_eval_keys == METRICS_EVAL_KEY_CAP) return 0;
    eval_keys[n_eval_keys++] = xstrdup(key);
    return 1;
}

const char *metrics_eval_key(const char *key)
{
    if (key == NULL) return "other";
    pthread_mutex_lock(&mu);
    int labelled = eval_key_note_locked(key);
    pthread_mutex_unlock(&mu);
    return labelled ? key : "other";
}

double metrics_family_total(const char *name)
{
    double v = 0;
    pthread_mutex_lock(&mu);
    init_locked();
    m_family *f = family_find_locked(name);
    for (m_series *s = f && f->type != M_HISTOGRAM ? f->first : NULL; s; s = s->next)
        v += s->value;
    pthread_mutex_unlock(&mu);
    return v;
}

/* ---- process metrics (Linux /proc) ---- */

/* Boot time from /proc/stat's btime, or 0. */
static double boot_time(void)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[256];
    double bt = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "btime ", 6) == 0) {
            bt = strtod(line + 6, NULL);
            break;
        }
    if (f != NULL) fclose(f);
    return bt;
}

/* Sets a process_* series (called with mu held). */
static void process_set_locked(const char *name, m_type type, double v)
{
    m_series *s = series_get_locked(name, type, NULL);
    if (s) s->value = v;
}

/* Samples CPU time, start time, RSS and open descriptors from /proc/self. */
static void process_sample_locked(void)
{
    static double start_time = -1;
    double ticks = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p != NULL && ticks > 0) {
        unsigned long long utime = 0, stime = 0, start = 0;
        /* after ") ": state(3) ... utime(14) stime(15) ... starttime(22) */
        if (sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                   "%*d %llu",
                   &utime, &stime, &start) == 3) {
            process_set_locked(METRIC_PROCESS_CPU, M_COUNTER, (double)(utime + stime) / ticks);
            if (start_time < 0) start_time = boot_time() + (double)start / ticks;
            process_set_locked(METRIC_PROCESS_START, M_GAUGE, start_time);
        }
    }
    f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f != NULL && fscanf(f, "%llu %llu", &size, &resident) == 2)
        process_set_locked(METRIC_PROCESS_RSS, M_GAUGE, (double)resident * page);
    if (f != NULL) fclose(f);
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        long fds = -1; /* the directory's own descriptor is listed too */
        for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
            if (e->d_name[0] != '.') fds++;
        closedir(d);
        process_set_locked(METRIC_PROCESS_FDS, M_GAUGE, (double)fds);
    }
}

static void put_number(strbuf *b, double v)
{
    if (isnan(v))
        strbuf_puts(b, "NaN");
    else if (isinf(v))
        strbuf_puts(b, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        strbuf_printf(b, "%.0f", v);
    else {
        char tmp[40];
        for (int prec = 15; prec <= 17; prec++) { /* shortest form that round-trips */
            snprintf(tmp, sizeof tmp, "%.*g", prec, v);
            if (strtod(tmp, NULL) == v) break;
        }
        strbuf_puts(b, tmp);
    }
}

static void put_help(strbuf *b, const char *help)
{
    for (; *help; help++) {
        if (*help == '\\')
            strbuf_puts(b, "\\\\");
        else if (*help == '\n')
            strbuf_puts(b, "\\n");
        else
            strbuf_putc(b, *help);
    }
}

static int cmp_family(const void *a, const void *b)
{
    return strcmp((*(m_family *const *)a)->name, (*(m_family *const *)b)->name);
}

void metrics_render(strbuf *out)
{
    pthread_mutex_lock(&mu);
    init_locked();
    process_sample_locked();
    m_family *order[MAX_FAMILIES];
    for (int i = 0; i < nfamilies; i++)
        order[i] = &families[i];
    qsort(order, (size_t)nfamilies, sizeof order[0], cmp_family);
    for (int fi = 0; fi < nfamilies; fi++) {
        m_family *f = order[fi];
        strbuf_printf(out, "# HELP %s ", f->name);
        put_help(out, f->help);
        strbuf_printf(out, "\n# TYPE %s %s\n", f->name, type_name(f->type));
        if (f->first == NULL) { /* declared, not used yet: present at zero */
            if (f->type != M_HISTOGRAM) {
                strbuf_printf(out, "%s 0\n", f->name);
                continue;
            }
            for (int i = 0; i < f->nbuckets; i++) {
                strbuf_printf(out, "%s_bucket{le=\"", f->name);
                put_number(out, f->buckets[i]);
                strbuf_puts(out, "\"} 0\n");
            }
            strbuf_printf(out, "%s_bucket{le=\"+Inf\"} 0\n%s_sum 0\n%s_count 0\n", f->name, f->name,
                          f->name);
            continue;
        }
        for (m_series *s = f->first; s; s = s->next) {
            const char *sep = s->labels[0] ? "," : "";
            if (f->type != M_HISTOGRAM) {
                strbuf_puts(out, f->name);
                if (s->labels[0]) strbuf_printf(out, "{%s}", s->labels);
                strbuf_putc(out, ' ');
                put_number(out, s->value);
                strbuf_putc(out, '\n');
                continue;
            }
            uint64_t cum = 0;
            for (int i = 0; i < f->nbuckets; i++) {
                cum += s->bucket_counts[i];
                strbuf_printf(out, "%s_bucket{%s%sle=\"", f->name, s->labels, sep);
                put_number(out, f->buckets[i]);
                strbuf_printf(out, "\"} %llu\n", (unsigned long long)cum);
            }
            strbuf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", f->name, s->labels, sep,
                          (unsigned long long)s->count);
            strbuf_printf(out, "%s_sum", f->name);
            if (s->labels[0]) strbuf_printf(out, "{%s}", s->labels);
            strbuf_putc(out, ' ');
            put_number(out, s->sum);
            strbuf_printf(out, "\n%s_count", f->name);
            if (s->labels[0]) strbuf_printf(out, "{%s}", s->labels);
            strbuf_printf(out, " %llu\n", (unsigned long long)s->count);
        }
    }
    pthread_mutex_unlock(&mu);
}

int metrics_counters_foreach(metrics_counter_fn fn, void *ud)
{
    int rc = 0;
    pthread_mutex_lock(&mu);
    init_locked();
    for (int fi = 0; fi < nfamilies && rc == 0; fi++) {
        if (families[fi].type != M_COUNTER || families[fi].process) continue;
        for (m_series *s = families[fi].first; s && rc == 0; s = s->next)
            rc = fn(s->key, s->value, ud);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int metrics_key_split(const char *key, size_t *name_len, const char **labels, size_t *labels_len)
{
    size_t n = strlen(key), name = strcspn(key, "{");
    if (name == 0) return -1;
    if (name == n) {
        *labels = key + n;
        *labels_len = 0;
    } else {
        if (key[n - 1] != '}' || n - name < 2) return -1;
        *labels = key + name + 1;
        *labels_len = n - name - 2;
    }
    *name_len = name;
    return 0;
}

int metrics_key_join(char *out, size_t cap, const char *name, const char *labels)
{
    int n = labels != NULL && labels[0] != '\0' ? snprintf(out, cap, "%s{%s}", name, labels)
                                                : snprintf(out, cap, "%s", name);
    if (n >= 0 && (size_t)n < cap) return 0;
    if (cap > 0) out[0] = '\0';
    return -1;
}

/* Parses a canonical key into name + label pairs (allocated into `arena`,
 * pointers into it stored in labels[]). Returns 0 or -1. */
static int parse_key(const char *key, char *arena, size_t cap, char **name, const char **labels)
{
    size_t n = strlen(key);
    if (n + 1 > cap) return -1;
    memcpy(arena, key, n + 1);
    char *p = arena;
    *name = p;
    char *brace = strchr(p, '{');
    int nl = 0;
    labels[0] = NULL;
    if (brace == NULL) return valid_metric_name(p) ? 0 : -1;
    *brace = '\0';
    if (!valid_metric_name(p) || n < 2 || arena[n - 1] != '}') return -1;
    arena[n - 1] = '\0';
    p = brace + 1;
    while (*p) {
        if (nl >= METRICS_MAX_LABELS) return -1;
        char *eq = strchr(p, '=');
        if (eq == NULL || eq[1] != '"') return -1;
        *eq = '\0';
        labels[(size_t)2 * nl] = p;
        char *v = eq + 2, *w = v;
        char *r = v;
        for (;;) {
            if (*r == '\0') return -1;
            if (*r == '"') break;
            if (*r == '\\') {
                r++;
                if (*r == 'n')
                    *w++ = '\n';
                else if (*r == '\\' || *r == '"')
                    *w++ = *r;
                else
                    return -1;
                r++;
                continue;
            }
            *w++ = *r++;
        }
        *w = '\0';
        labels[(size_t)2 * nl + 1] = v;
        nl++;
        p = r + 1;
        if (*p == ',')
            p++;
        else if (*p != '\0')
            return -1;
    }
    labels[(size_t)2 * nl] = NULL;
    return 0;
}

int metrics_counter_seed(const char *key, double value)
{
    char arena[1024];
    char *name;
    const char *labels[2 * METRICS_MAX_LABELS + 1];
    if (key == NULL || !(value >= 0) || isinf(value)) return -1;
    if (parse_key(key, arena, sizeof arena, &name, labels) != 0) return -1;
    int rc = -1;
    pthread_mutex_lock(&mu);
    init_locked();
    m_family *f = family_find_locked(name);
    for (size_t i = 0; labels[i] != NULL; i += 2) /* restored keys keep their label */
        if (strcmp(labels[i], "eval_key") == 0 && strcmp(labels[i + 1], "other") != 0)
            eval_key_note_locked(labels[i + 1]);
    if (f == NULL || (f->type == M_COUNTER && !f->process)) {
        m_series *s = series_get_locked(name, M_COUNTER, labels);
        if (s) {
            s->value = value;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void metrics_reset(void)
{
    pthread_mutex_lock(&mu);
    init_locked();
    for (int fi = 0; fi < nfamilies; fi++) {
        m_series *s = families[fi].first;
        while (s) {
            m_series *next = s->next;
            free(s->key);
            free(s->labels);
            free(s->bucket_counts);
            free(s);
            s = next;
        }
        families[fi].first = families[fi].last = NULL;
    }
    memset(table, 0, table_cap * sizeof *table);
    nseries = 0;
    for (size_t i = 0; i < n_eval_keys; i++)
        free(eval_keys[i]);
    n_eval_keys = 0;
    m_series *b =
        series_get_locked(METRIC_BUILD_INFO, M_GAUGE, METRICS_LABELS_("version", FPS_VERSION));
    if (b) b->value = 1;
    pthread_mutex_unlock(&mu);
}
