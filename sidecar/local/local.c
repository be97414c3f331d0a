/* sidecar/local: the local evaluator registry (validation, TTL, persistence,
 * debounced change notification) and the catalog/definition lookups the
 * worker uses. Dispatch over HTTP and EvalResult conversion are in
 * local_dispatch.c; shared declarations in local_internal.h. */
#include "sidecar/local/local_internal.h"

#include "sidecar/local/catalog.h"
#include "common/canonjson.h"
#include "common/log.h"
#include "common/loopback.h"
#include "common/metrics.h"
#include "common/thread.h"
#include "common/timeutil.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ------------------------------------------------------------ helpers */

/* A rejection: the HTTP status doubles as the error's code. */
static void lerr(fps_err *e, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    e->code = status;
    e->http_status = status;
    snprintf(e->name, sizeof e->name, "%s", code);
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

int local_key_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > LOCAL_MAX_KEY_BYTES || !(s[0] >= 'a' && s[0] <= 'z')) return 0;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

/* 1 if s has a control character (tab/newline/CR allowed when `text`). */
int local_has_control(const char *s, int text)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (text && (*p == '\t' || *p == '\n' || *p == '\r')) continue;
        if (*p < 0x20 || *p == 0x7f) return 1;
    }
    return 0;
}

/* A bounded string field: required non-empty string, <= max bytes, no
 * control characters. Returns the value or NULL with err filled. */
static const char *bounded(const json_t *v, const char *field, size_t max, fps_err *e)
{
    if (!json_is_string(v)) {
        lerr(e, 422, "invalid_registration", "%s must be a string", field);
        return NULL;
    }
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0) {
        lerr(e, 422, "invalid_registration", "%s must not be empty", field);
        return NULL;
    }
    if (n > max) {
        lerr(e, 422, "invalid_registration", "%s is %zu bytes; maximum is %zu", field, n, max);
        return NULL;
    }
    if (strlen(s) != n || local_has_control(s, 0)) {
        lerr(e, 422, "invalid_registration", "%s must not contain control characters", field);
        return NULL;
    }
    return s;
}

static int only_fields(const json_t *obj, const char *const *allowed, const char *where, fps_err *e)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            if (!strcmp(k, allowed[i])) ok = 1;
        if (!ok) {
            char shown[64];
            snprintf(shown, sizeof shown, "%s", k);
            if (local_has_control(shown, 0) || strlen(k) > 48) snprintf(shown, sizeof shown, "?");
            lerr(e, 422, "invalid_registration", "%s has an unknown field '%s'", where, shown);
            return -1;
        }
    }
    return 0;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (p == NULL) abort();
    return p;
}

static void def_free(ldef *d)
{
    free(d->eval_key);
    free(d->eval_version);
    free(d->display_name);
    free(d->result_kind);
    free(d->condition);
    json_decref(d->labels);
}

static void ev_free(lev *ev)
{
    if (ev == NULL) return;
    for (size_t i = 0; i < ev->ndefs; i++)
        def_free(&ev->defs[i]);
    free(ev->defs);
    free(ev->name);
    free(ev->version);
    free(ev->endpoint);
    json_decref(ev->registration);
    secret_free(ev->owner);
    free(ev);
}

int local_endpoint_check(local_registry *r, const char *url, fps_err *e)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *user = NULL, *frag = NULL, *port = NULL;
    int rc = -1;
    if (u == NULL) abort();
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
        lerr(e, 422, "invalid_registration", "endpoint must be an absolute http:// URL");
        goto done;
    }
    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    curl_url_get(u, CURLUPART_USER, &user, 0);
    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0);
    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    if (user != NULL || frag != NULL) {
        lerr(e, 422, "invalid_registration", "endpoint must not contain credentials or a fragment");
        goto done;
    }
    int allowed = 0;
    if (host != NULL && r->cfg.allowed_hosts != NULL)
        for (size_t i = 0; i < r->cfg.allowed_hosts->len; i++)
            if (!strcasecmp(host, r->cfg.allowed_hosts->items[i])) allowed = 1;
    if (scheme == NULL || host == NULL ||
        (strcmp(scheme, "http") != 0 && !(allowed && !strcmp(scheme, "https")))) {
        lerr(e, 422, "invalid_registration", "endpoint must be an http:// URL");
        goto done;
    }
    int loop = loopback_host(host);
    if (!allowed && !loop) {
        lerr(e, 422, "invalid_registration",
             "endpoint must be a loopback address (127.0.0.0/8, [::1] or localhost) unless "
             "the operator allows its host with --allow-evaluator-host");
        goto done;
    }
    int p = port ? atoi(port) : 0;
    char ah[sizeof r->admin_host];
    pthread_mutex_lock(&r->mu);
    int admin_port = r->admin_port;
    memcpy(ah, r->admin_host, sizeof ah);
    pthread_mutex_unlock(&r->mu);
    /* The admin host is --listen's, brackets removed; so is curl's
     * "[v6]" before they are compared. */
    size_t bl = strlen(host);
    const char *bare = loopback_unbracket(host, &bl);
    int same_host = strlen(ah) == bl && !strncasecmp(bare, ah, bl);
    if (admin_port > 0 && p == admin_port &&
        (loop || same_host || !strcmp(ah, "0.0.0.0") || !strcmp(ah, "::"))) {
        lerr(e, 422, "invalid_registration",
             "endpoint must not be the sidecar's own admin API (port %d)", admin_port);
        goto done;
    }
    rc = 0;
done:
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_free(frag);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

void local_registry_set_admin_address(local_registry *r, const char *host, int port)
{
    pthread_mutex_lock(&r->mu);
    snprintf(r->admin_host, sizeof r->admin_host, "%s", host ? host : "");
    r->admin_port = port;
    pthread_mutex_unlock(&r->mu);
}

static int name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return 0;
    }
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Parses and validates a registration body into a new evaluator (not yet
 * checked against the others). NULL with err filled on a violation. */
static lev *parse_registration(local_registry *r, const char *name, const json_t *body, fps_err *e)
{
    static const char *const top[] = {"version", "endpoint", "ttl_seconds", "definitions", NULL};
    static const char *const dfields[] = {
        "eval_key", "eval_version",    "display_name", "result_kind",
        "labels",   "timeout_seconds", "condition",    NULL};
    lev *ev = calloc(1, sizeof *ev);
    if (ev == NULL) abort();
    if (!json_is_object(body)) {
        lerr(e, 400, "invalid_json", "the request body must be a JSON object");
        goto fail;
    }
    if (only_fields(body, top, "the registration", e)) goto fail;
    ev->name = xstrdup(name);
    const char *s;
    if ((s = bounded(json_object_get(body, "version"), "version", LOCAL_MAX_VERSION_BYTES, e)) ==
        NULL)
        goto fail;
    ev->version = xstrdup(s);
    if ((s = bounded(json_object_get(body, "endpoint"), "endpoint", 2048, e)) == NULL) goto fail;
    if (local_endpoint_check(r, s, e) != 0) goto fail;
    ev->endpoint = xstrdup(s);
    json_t *ttl = json_object_get(body, "ttl_seconds");
    ev->ttl = LOCAL_DEFAULT_TTL_S;
    if (ttl != NULL && !json_is_null(ttl)) {
        double t = json_is_number(ttl) ? json_number_value(ttl) : NAN;
        if (!json_is_number(ttl) || !isfinite(t) || t < 1 || t > 86400) {
            lerr(e, 422, "invalid_registration", "ttl_seconds must be a number from 1 to 86400");
            goto fail;
        }
        ev->ttl = t;
    }
    json_t *defs = json_object_get(body, "definitions");
    if (!json_is_array(defs)) {
        lerr(e, 422, "invalid_registration", "definitions must be an array");
        goto fail;
    }
    size_t nd = json_array_size(defs);
    if (nd == 0) {
        lerr(e, 422, "invalid_registration", "definitions must not be empty");
        goto fail;
    }
    if (nd > LOCAL_MAX_DEFINITIONS) {
        lerr(e, 422, "invalid_registration",
             "definitions: at most %d definitions are allowed in all", LOCAL_MAX_DEFINITIONS);
        goto fail;
    }
    ev->defs = calloc(nd, sizeof *ev->defs);
    if (ev->defs == NULL) abort();
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(defs, i);
        char f[96];
        ldef *x = &ev->defs[i];
        ev->ndefs = i + 1;
        snprintf(f, sizeof f, "definitions[%zu]", i);
        if (!json_is_object(d)) {
            lerr(e, 422, "invalid_registration", "%s must be an object", f);
            goto fail;
        }
        if (only_fields(d, dfields, f, e)) goto fail;
        snprintf(f, sizeof f, "definitions[%zu].eval_key", i);
        if ((s = bounded(json_object_get(d, "eval_key"), f, LOCAL_MAX_KEY_BYTES, e)) == NULL)
            goto fail;
        if (!local_key_valid(s)) {
            lerr(e, 422, "invalid_registration", "%s must match ^[a-z][a-z0-9_]*$", f);
            goto fail;
        }
        x->eval_key = xstrdup(s);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(ev->defs[j].eval_key, x->eval_key)) {
                lerr(e, 422, "invalid_registration",
                     "%s: duplicate eval key (also definitions[%zu])", f, j);
                goto fail;
            }
        snprintf(f, sizeof f, "definitions[%zu].eval_version", i);
        if ((s = bounded(json_object_get(d, "eval_version"), f, LOCAL_MAX_VERSION_BYTES, e)) ==
            NULL)
            goto fail;
        x->eval_version = xstrdup(s);
        snprintf(f, sizeof f, "definitions[%zu].display_name", i);
        json_t *dn = json_object_get(d, "display_name");
        if (dn != NULL && !json_is_null(dn)) {
            if ((s = bounded(dn, f, LOCAL_MAX_DISPLAY_NAME_BYTES, e)) == NULL) goto fail;
            x->display_name = xstrdup(s);
        } else { /* the reference: eval_key.replace("_", " ").capitalize() */
            x->display_name = xstrdup(x->eval_key);
            for (char *p = x->display_name; *p; p++)
                if (*p == '_') *p = ' ';
            if (x->display_name[0] >= 'a' && x->display_name[0] <= 'z') x->display_name[0] -= 32;
        }
        snprintf(f, sizeof f, "definitions[%zu].result_kind", i);
        json_t *rk = json_object_get(d, "result_kind");
        const char *kind = "score";
        if (rk != NULL && !json_is_null(rk)) {
            kind = json_string_value(rk);
            if (kind == NULL ||
                (strcmp(kind, "score") && strcmp(kind, "metric") && strcmp(kind, "assertion"))) {
                lerr(e, 422, "invalid_registration",
                     "%s must be one of 'score', 'metric', 'assertion'", f);
                goto fail;
            }
        }
        x->result_kind = xstrdup(kind);
        snprintf(f, sizeof f, "definitions[%zu].labels", i);
        json_t *labels = json_object_get(d, "labels");
        const char *lv[LOCAL_MAX_LABELS];
        size_t nl = 0;
        if (labels != NULL && !json_is_null(labels)) {
            if (!json_is_array(labels)) {
                lerr(e, 422, "invalid_registration", "%s must be an array of strings", f);
                goto fail;
            }
            if (json_array_size(labels) > LOCAL_MAX_LABELS) {
                lerr(e, 422, "invalid_registration", "%s: at most %d labels are allowed", f,
                     LOCAL_MAX_LABELS);
                goto fail;
            }
            for (size_t j = 0; j < json_array_size(labels); j++) {
                char lf[136];
                snprintf(lf, sizeof lf, "%s[%zu]", f, j);
                if ((s = bounded(json_array_get(labels, j), lf, LOCAL_MAX_LABEL_BYTES, e)) == NULL)
                    goto fail;
                lv[nl++] = s;
            }
            qsort(lv, nl, sizeof lv[0], cmp_str);
            for (size_t j = 1; j < nl; j++)
                if (!strcmp(lv[j - 1], lv[j])) {
                    lerr(e, 422, "invalid_registration", "%s must be unique", f);
                    goto fail;
                }
        }
        x->labels = json_array();
        for (size_t j = 0; j < nl; j++)
            json_array_append_new(x->labels, json_string(lv[j]));
        snprintf(f, sizeof f, "definitions[%zu].timeout_seconds", i);
        json_t *to = json_object_get(d, "timeout_seconds");
        if (to != NULL && !json_is_null(to)) {
            double t = json_is_number(to) ? json_number_value(to) : NAN;
            if (!json_is_number(to) || !isfinite(t) || t <= 0 || t > 86400) {
                lerr(e, 422, "invalid_registration",
                     "%s must be a finite number greater than zero (at most 86400)", f);
                goto fail;
            }
            x->timeout_s = t;
        }
        snprintf(f, sizeof f, "definitions[%zu].condition", i);
        json_t *cond = json_object_get(d, "condition");
        if (cond != NULL && !json_is_null(cond)) {
            if (!json_is_string(cond)) {
                lerr(e, 422, "invalid_registration", "%s must be a string", f);
                goto fail;
            }
            x->condition = malloc(json_string_length(cond) + 1);
            if (x->condition == NULL) abort();
            memcpy(x->condition, json_string_value(cond), json_string_length(cond) + 1);
        }
    }
    ev->registration = json_deep_copy(body);
    return ev;
fail:
    ev_free(ev);
    return NULL;
}

/* Compile-checks every condition of a parsed registration in a jailed child
 * (sbx_check): the source is untrusted, so it is never parsed in the daemon.
 * Called with no registry lock held: it may wait for a sandbox slot, from
 * the playground's budget (an admin-API request), after any waiting worker.
 * Returns 0, or the status with e filled: 422 when a condition is rejected
 * (the compiler's message), 503 when the jail could not give a verdict. */
static int conditions_check(local_registry *r, const lev *ev, fps_err *e)
{
    for (size_t i = 0; i < ev->ndefs; i++) {
        const ldef *x = &ev->defs[i];
        if (x->condition == NULL) continue;
        sbx_request req = {.kind = LANG_CONDITION,
                           .source = x->condition,
                           .source_len = strlen(x->condition),
                           .timeout_s = LOCAL_CHECK_TIMEOUT_S,
                           .playground = 1};
        sbx_outcome out;
        sbx_check(r->cfg.pool, &req, &out);
        const json_t *o = out.status == SBX_OK ? out.json : NULL;
        const char *stage = json_string_value(json_object_get(o, "stage"));
        if (o != NULL && json_is_true(json_object_get(o, "ok"))) {
            sbx_outcome_free(&out);
            continue;
        }
        if (stage != NULL && !strcmp(stage, "compile")) {
            const char *m = json_string_value(json_object_get(o, "message"));
            lerr(e, 422, "invalid_registration", "definitions[%zu].condition is rejected: %s", i,
                 m != NULL && *m ? m : "invalid source");
        } else {
            const char *why = out.status == SBX_TIMEOUT ? "no sandbox result in time"
                              : out.detail[0]           ? out.detail
                                                        : "no compile outcome";
            lerr(e, 503, "sandbox_unavailable",
                 "definitions[%zu].condition could not be checked in the sandbox: %s; retry", i,
                 why);
        }
        sbx_outcome_free(&out);
        return e->http_status;
    }
    return 0;
}

/* --------------------------------------------------------- registry core */

static lev *find_locked(local_registry *r, const char *name, size_t *idx)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->evs[i]->name, name)) {
            if (idx) *idx = i;
            return r->evs[i];
        }
    return NULL;
}

/* The catalog entries of one evaluator, as canonical-ish text for comparing. */
static json_t *catalog_of(lev **evs, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < evs[i]->ndefs; j++) {
            ldef *d = &evs[i]->defs[j];
            json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:O}", "eval_key", d->eval_key,
                                                 "display_name", d->display_name, "eval_version",
                                                 d->eval_version, "result_kind", d->result_kind,
                                                 "labels", d->labels));
        }
    return arr;
}

static json_t *sorted_catalog_locked(local_registry *r)
{
    json_t *arr = catalog_of(r->evs, r->n);
    size_t n = json_array_size(arr);
    json_t **items = n ? malloc(n * sizeof *items) : NULL;
    for (size_t i = 0; i < n; i++)
        items[i] = json_incref(json_array_get(arr, i));
    if (n) qsort(items, n, sizeof *items, catalog_entry_cmp);
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(out, items[i]);
    free(items);
    json_decref(arr);
    return out;
}

/* Records a catalog change: bump the generation and schedule the callback. */
static void changed_locked(local_registry *r)
{
    r->generation++;
    if (!r->change_pending) {
        r->change_pending = 1;
        r->change_due = time_mono_ms() + (int64_t)(r->cfg.debounce_s * 1000);
    }
    pthread_cond_broadcast(&r->cv);
}

static void gauges_locked(local_registry *r)
{
    size_t defs = 0;
    for (size_t i = 0; i < r->n; i++)
        defs += r->evs[i]->ndefs;
    metrics_gauge_set(METRIC_LOCAL_EVALUATORS, (double)r->n);
    metrics_gauge_set(METRIC_LOCAL_DEFINITIONS, (double)defs);
}

static void remove_at_locked(local_registry *r, size_t i)
{
    ev_free(r->evs[i]);
    memmove(&r->evs[i], &r->evs[i + 1], (r->n - i - 1) * sizeof r->evs[0]);
    r->n--;
}

/* Drops the expired entry under name, if any (re-registered). */
static void expired_forget_locked(local_registry *r, const char *name)
{
    for (size_t i = 0; i < r->nexpired; i++)
        if (strcmp(r->expired[i].name, name) == 0) {
            memmove(&r->expired[i], &r->expired[i + 1],
                    (r->nexpired - i - 1) * sizeof r->expired[0]);
            r->nexpired--;
            return;
        }
}

/* Keeps name listed as expired since at (the oldest entry goes when full). */
static void expired_add_locked(local_registry *r, const char *name, const char *version, double at)
{
    expired_forget_locked(r, name);
    if (r->nexpired == LOCAL_EXPIRED_MAX) {
        memmove(&r->expired[0], &r->expired[1], (r->nexpired - 1) * sizeof r->expired[0]);
        r->nexpired--;
    }
    lexpired *x = &r->expired[r->nexpired++];
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->version, sizeof x->version, "%s", version != NULL ? version : "");
    x->expired_at = at;
}

void local_note_dispatch(local_registry *r, const char *name, const char *error_code,
                         const char *message)
{
    pthread_mutex_lock(&r->mu);
    lev *ev = find_locked(r, name, NULL);
    if (ev != NULL && (error_code == NULL || error_code[0] == '\0')) {
        ev->failing_since = 0;
    } else if (ev != NULL) {
        if (ev->failing_since == 0) ev->failing_since = time_now();
        snprintf(ev->last_error, sizeof ev->last_error, "%s: %s", error_code,
                 message ? message : "");
    }
    pthread_mutex_unlock(&r->mu);
}

static void *timer_main(void *arg)
{
    local_registry *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        double now = time_now();
        /* TTL expiry */
        char **gone = NULL;
        size_t ngone = 0;
        for (size_t i = 0; i < r->n;) {
            if (local_ttl_expired(r->evs[i]->expires_at, now)) {
                log_warn("local evaluator missed its TTL; removed from the catalog",
                         LOG_S("evaluator", r->evs[i]->name), LOG_D("ttl_seconds", r->evs[i]->ttl));
                expired_add_locked(r, r->evs[i]->name, r->evs[i]->version, now);
                char **g = realloc(gone, (ngone + 1) * sizeof *g);
                if (g == NULL) abort();
                gone = g;
                gone[ngone++] = xstrdup(r->evs[i]->name);
                remove_at_locked(r, i);
                changed_locked(r);
                gauges_locked(r);
            } else {
                i++;
            }
        }
        if (ngone > 0) {
            store *db = r->cfg.db;
            pthread_mutex_unlock(&r->mu);
            for (size_t i = 0; i < ngone; i++) {
                if (db) store_evaluator_delete(db, gone[i], NULL);
                free(gone[i]);
            }
            free(gone);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        int64_t mono = time_mono_ms();
        if (r->change_pending && mono >= r->change_due) {
            r->change_pending = 0;
            local_change_fn fn = r->fn;
            void *ud = r->ud;
            pthread_mutex_unlock(&r->mu);
            if (fn) fn(ud);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        /* sleep until the next expiry, the debounce deadline, or 1 s */
        double wait_s = 1.0;
        for (size_t i = 0; i < r->n; i++)
            wait_s = local_ttl_sleep_s(r->evs[i]->expires_at, now, wait_s);
        if (r->change_pending && (double)(r->change_due - mono) / 1000.0 < wait_s)
            wait_s = (double)(r->change_due - mono) / 1000.0;
        if (wait_s < 0.005) wait_s = 0.005;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = (long long)ts.tv_nsec + (long long)(wait_s * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Checks an evaluator against the others (unique keys, <= 100 in all). */
static int check_against_locked(local_registry *r, const lev *ev, fps_err *e)
{
    size_t total = ev->ndefs;
    double now = time_now();
    for (size_t i = 0; i < r->n; i++) {
        const lev *o = r->evs[i];
        if (!strcmp(o->name, ev->name)) continue;
        if (local_ttl_expired(o->expires_at, now)) continue; /* expiry released its keys */
        total += o->ndefs;
        for (size_t j = 0; j < ev->ndefs; j++)
            for (size_t k = 0; k < o->ndefs; k++)
                if (!strcmp(ev->defs[j].eval_key, o->defs[k].eval_key)) {
                    lerr(e, 409, "duplicate_eval_key",
                         "definitions[%zu].eval_key is already registered by evaluator '%s' "
                         "(eval keys must be unique across all evaluators)",
                         j, o->name);
                    return -1;
                }
    }
    if (total > LOCAL_MAX_DEFINITIONS) {
        lerr(e, 422, "too_many_definitions",
             "definitions: at most %d definitions are allowed in all evaluators (this "
             "registration would make %zu)",
             LOCAL_MAX_DEFINITIONS, total);
        return -1;
    }
    return 0;
}

/* A stored registration's conditions are checked again in the jail (the
 * language may have changed since); a rejected one drops it. When the jail
 * cannot give a verdict the registration is kept: every run compiles its
 * condition in the jail anyway, and losing it would be worse. */
static int restored_conditions_bad(local_registry *r, const lev *ev, fps_err *e)
{
    int st = conditions_check(r, ev, e);
    if (st != 0 && st != 422) {
        log_warn("stored local evaluator conditions not re-checked; kept",
                 LOG_S("evaluator", ev->name), LOG_S("reason", e->msg));
        return 0;
    }
    return st != 0;
}

local_registry *local_registry_new(const local_config *cfg, fps_err *err)
{
    local_registry *r = calloc(1, sizeof *r);
    if (r == NULL) {
        fps_err_set(err, LOCAL_ESTART, 0, "cannot_start", "local evaluators: out of memory");
        return NULL;
    }
    r->cfg = *cfg;
    if (r->cfg.max_dispatch <= 0) r->cfg.max_dispatch = 16;
    if (r->cfg.debounce_s <= 0) r->cfg.debounce_s = 0.25;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->put_mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->client = local_client_new(r->cfg.max_dispatch);
    if (r->client == NULL) {
        fps_err_set(err, LOCAL_ESTART, 0, "cannot_start",
                    "local evaluators: cannot create the HTTP client's handles");
        goto fail;
    }
    if (r->cfg.db != NULL) {
        store_evaluator *list = NULL;
        size_t n = 0;
        store_err se = {0};
        if (store_evaluator_list(r->cfg.db, &list, &n, &se) != STORE_OK) {
            fps_err_set(err, LOCAL_ESTART, 0, "cannot_start", "local evaluators: %s", se.msg);
            goto fail;
        }
        double now = time_now();
        for (size_t i = 0; i < n; i++) {
            json_error_t je;
            json_t *stored = json_loads(list[i].registration_json, 0, &je);
            /* {"registration": body, "owner_secret": hex}; a bare body was
             * written before registrations had owners */
            json_t *body = json_object_get(stored, "registration");
            const char *owner = json_string_value(json_object_get(stored, "owner_secret"));
            if (!json_is_object(body)) body = stored;
            fps_err le = {0};
            lev *ev = NULL;
            if (local_ttl_expired(list[i].expires_at, now)) {
                log_info("local evaluator expired while the sidecar was down",
                         LOG_S("evaluator", list[i].name));
                /* listed as expired for the same hour as one that expired live */
                if (local_ttl_listed(list[i].expires_at, now))
                    expired_add_locked(r, list[i].name,
                                       json_string_value(json_object_get(body, "version")),
                                       list[i].expires_at);
            } else if (body == NULL ||
                       (ev = parse_registration(r, list[i].name, body, &le)) == NULL ||
                       check_against_locked(r, ev, &le) != 0 ||
                       restored_conditions_bad(r, ev, &le)) {
                log_warn("stored local evaluator registration no longer valid; dropped",
                         LOG_S("evaluator", list[i].name), LOG_S("reason", le.msg));
                ev_free(ev);
                ev = NULL;
            }
            if (ev != NULL && owner != NULL) ev->owner = secret_from_str(owner);
            json_decref(stored);
            if (ev == NULL) {
                store_evaluator_delete(r->cfg.db, list[i].name, NULL);
                continue;
            }
            ev->ttl = list[i].ttl_seconds > 0 ? list[i].ttl_seconds : ev->ttl;
            ev->registered_at = list[i].registered_at;
            ev->heartbeat_at = list[i].heartbeat_at;
            ev->expires_at = list[i].expires_at;
            lev **evs = realloc(r->evs, (r->n + 1) * sizeof *evs);
            if (evs == NULL) abort();
            r->evs = evs;
            r->evs[r->n++] = ev;
            if (ev->owner == NULL)
                log_warn("local evaluator restored without an owner (persisted before "
                         "registrations had owners): only the admin token may adopt, renew or "
                         "delete it",
                         LOG_S("evaluator", ev->name),
                         LOG_D("ttl_remaining_seconds", ev->expires_at - now));
            else
                log_info("local evaluator restored", LOG_S("evaluator", ev->name),
                         LOG_D("ttl_remaining_seconds", ev->expires_at - now));
        }
        store_evaluators_free(list, n);
        if (r->n > 0) r->generation = 1;
    }
    gauges_locked(r);
    if (pthread_create(&r->thread, NULL, timer_main, r) != 0) {
        fps_err_set(err, LOCAL_ESTART, 0, "cannot_start",
                    "local evaluators: cannot start the TTL thread");
        goto fail;
    }
    return r;
fail:
    for (size_t i = 0; i < r->n; i++)
        ev_free(r->evs[i]);
    free(r->evs);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->put_mu);
    pthread_cond_destroy(&r->cv);
    local_client_free(r->client);
    free(r);
    return NULL;
}

void local_registry_free(local_registry *r)
{
    if (r == NULL) return;
    thread_stop_join(r->thread, &r->mu, &r->cv, &r->stop);
    for (size_t i = 0; i < r->n; i++)
        ev_free(r->evs[i]);
    free(r->evs);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->put_mu);
    pthread_cond_destroy(&r->cv);
    local_client_free(r->client);
    free(r);
}

void local_registry_set_change_callback(local_registry *r, local_change_fn fn, void *ud)
{
    pthread_mutex_lock(&r->mu);
    r->fn = fn;
    r->ud = ud;
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------- admin operations */

static json_t *time_or_null(double t)
{
    char buf[40];
    return t > 0 ? json_string(time_rfc3339(t, buf, sizeof buf)) : json_null();
}

static json_t *view_locked(const lev *ev)
{
    double now = time_now();
    json_t *defs = json_array();
    for (size_t i = 0; i < ev->ndefs; i++) {
        const ldef *d = &ev->defs[i];
        json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:O}", "eval_key", d->eval_key, "eval_version",
                              d->eval_version, "display_name", d->display_name, "result_kind",
                              d->result_kind, "labels", d->labels);
        json_object_set_new(o, "timeout_seconds",
                            d->timeout_s > 0 ? json_real(d->timeout_s) : json_null());
        json_object_set_new(o, "condition", d->condition ? json_string(d->condition) : json_null());
        json_array_append_new(defs, o);
    }
    int64_t remaining_ms = local_ttl_remaining_ms(ev->expires_at, now);
    json_t *v = json_pack("{s:s,s:s,s:s,s:f}", "name", ev->name, "version", ev->version, "endpoint",
                          ev->endpoint, "ttl_seconds", ev->ttl);
    json_object_set_new(v, "registered_at", time_or_null(ev->registered_at));
    json_object_set_new(v, "last_heartbeat_at", time_or_null(ev->heartbeat_at));
    json_object_set_new(v, "expires_at", time_or_null(ev->expires_at));
    json_object_set_new(v, "ttl_remaining_seconds",
                        remaining_ms >= 0 ? json_real((double)remaining_ms / 1000.0) : json_null());
    /* alive: within its TTL and its last dispatch (if any) succeeded */
    json_object_set_new(v, "state", json_string(ev->failing_since > 0 ? "failing" : "alive"));
    json_object_set_new(v, "alive", json_true());
    json_object_set_new(v, "failing_since", time_or_null(ev->failing_since));
    json_object_set_new(v, "last_error",
                        ev->failing_since > 0 ? json_string(ev->last_error) : json_null());
    json_object_set_new(v, "definitions", defs);
    return v;
}

/* 1 if `who` may replace, renew or remove ev: an admin, or the holder of
 * its secret. A registration persisted before registrations had owners has
 * no secret to prove: only an admin may adopt it (a PUT, whose answer
 * carries its new secret), renew or delete it; otherwise the first local
 * process to present the registration token would take it over. */
static int owner_ok(const lev *ev, const local_caller *who)
{
    if (who->admin) return 1;
    const char *s = who->owner_secret;
    return ev->owner != NULL && s != NULL && secret_equals(ev->owner, s, strlen(s));
}

static int not_owner(fps_err *e, const lev *ev)
{
    if (ev->owner == NULL)
        lerr(e, 403, "not_owner",
             "evaluator '%s' was registered before registrations had owners: an operator must "
             "adopt it (PUT with the admin token; the answer carries its new registration "
             "secret) or delete it",
             ev->name);
    else
        lerr(e, 403, "not_owner",
             "evaluator '%s' is registered by another owner: present its %s, use the admin "
             "token, or wait until its TTL runs out",
             ev->name, "X-FailproofAI-Registration-Secret");
    return 403;
}

/* The live registration under name (expired ones count as gone: expiry
 * releases the name even before the timer thread removes it); lock held. */
static lev *live_locked(local_registry *r, const char *name, size_t *idx)
{
    lev *ev = find_locked(r, name, idx);
    if (ev != NULL && local_ttl_expired(ev->expires_at, time_now())) return NULL;
    return ev;
}

int local_registry_put(local_registry *r, const char *name, const json_t *body,
                       const local_caller *who, json_t **out, fps_err *err)
{
    char fresh[65] = "";
    char *text = NULL;
    *out = NULL;
    memset(err, 0, sizeof *err);
    if (name == NULL || !name_valid(name)) {
        lerr(err, 422, "invalid_registration",
             "name must be 1..128 characters of [A-Za-z0-9._-] starting with a letter or digit");
        return err->http_status;
    }
    lev *ev = parse_registration(r, name, body, err);
    if (ev == NULL) return err->http_status;
    if (conditions_check(r, ev, err) != 0) { /* no lock held: may wait for a slot */
        ev_free(ev);
        return err->http_status;
    }
    double now = time_now();
    ev->registered_at = ev->heartbeat_at = now;
    ev->expires_at = local_ttl_renew(now, ev->ttl);
    /* Registrations are changed one at a time: the owner check, the
     * persisting (outside the registry lock: SQLite may wait) and the
     * apply below see the same registration under this name. */
    pthread_mutex_lock(&r->put_mu);
    pthread_mutex_lock(&r->mu);
    const lev *cur = live_locked(r, name, NULL);
    int bad =
        cur != NULL && !owner_ok(cur, who) ? not_owner(err, cur) : check_against_locked(r, ev, err);
    if (!bad && cur != NULL && cur->owner != NULL)
        ev->owner = secret_from_str(secret_expose(cur->owner));
    pthread_mutex_unlock(&r->mu);
    if (bad) goto fail;
    if (ev->owner == NULL) { /* a new name, or an admin adopting an ownerless one */
        if (secret_random_hex(fresh, 32) != 0) {
            lerr(err, 503, "unavailable", "could not generate a registration secret");
            goto fail;
        }
        ev->owner = secret_from_str(fresh);
    }
    json_t *stored = json_pack("{s:O,s:s}", "registration", ev->registration, "owner_secret",
                               secret_expose(ev->owner));
    text = canonjson_dumps(stored, NULL);
    json_decref(stored);
    if (text == NULL) abort();
    if (r->cfg.db != NULL) {
        store_err se = {0};
        if (store_evaluator_put(r->cfg.db, name, text, ev->ttl, now, &se) != STORE_OK) {
            lerr(err, 503, "store_unavailable", "the registration could not be persisted: %s",
                 store_status_name(se.code));
            goto fail;
        }
    }
    pthread_mutex_lock(&r->mu);
    size_t idx;
    lev *old = find_locked(r, name, &idx); /* an expired one is replaced like a live one */
    int status = live_locked(r, name, NULL) != NULL && !fresh[0] ? 200 : 201;
    json_t *before = old ? catalog_of(&old, 1) : json_array();
    json_t *after = catalog_of(&ev, 1);
    if (old) {
        r->evs[idx] = ev;
        if (status == 200) ev->registered_at = old->registered_at;
        ev_free(old);
    } else {
        lev **evs = realloc(r->evs, (r->n + 1) * sizeof *evs);
        if (evs == NULL) abort();
        r->evs = evs;
        r->evs[r->n++] = ev;
    }
    if (!json_equal(before, after))
        changed_locked(r);
    else
        pthread_cond_broadcast(&r->cv); /* new expiry */
    json_decref(before);
    json_decref(after);
    gauges_locked(r);
    *out = view_locked(ev);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&r->put_mu);
    if (fresh[0]) json_object_set_new(*out, "registration_secret", json_string(fresh));
    explicit_bzero(fresh, sizeof fresh);
    free(text);
    log_info(status == 201 ? "local evaluator registered" : "local evaluator replaced",
             LOG_S("evaluator", name), LOG_I("definitions", (long long)ev->ndefs),
             LOG_B("by_admin", who->admin));
    return status;
fail:
    pthread_mutex_unlock(&r->put_mu);
    explicit_bzero(fresh, sizeof fresh);
    free(text);
    ev_free(ev);
    return err->http_status;
}

int local_registry_heartbeat(local_registry *r, const char *name, const local_caller *who,
                             json_t **out, fps_err *err)
{
    *out = NULL;
    memset(err, 0, sizeof *err);
    double now = time_now();
    pthread_mutex_lock(&r->mu);
    lev *ev = live_locked(r, name, NULL);
    if (ev == NULL) {
        pthread_mutex_unlock(&r->mu);
        lerr(err, 404, "not_found",
             "no evaluator is registered under this name (expired or never registered; "
             "register again with PUT)");
        return 404;
    }
    if (!owner_ok(ev, who)) {
        pthread_mutex_unlock(&r->mu);
        return not_owner(err, ev);
    }
    ev->heartbeat_at = now;
    ev->expires_at = local_ttl_renew(now, ev->ttl);
    *out = view_locked(ev);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->cfg.db != NULL) store_evaluator_heartbeat(r->cfg.db, name, now, NULL);
    return 200;
}

int local_registry_delete(local_registry *r, const char *name, const local_caller *who,
                          fps_err *err)
{
    memset(err, 0, sizeof *err);
    pthread_mutex_lock(&r->put_mu);
    pthread_mutex_lock(&r->mu);
    size_t idx;
    lev *ev = live_locked(r, name, &idx);
    int status = ev == NULL ? 404 : !owner_ok(ev, who) ? not_owner(err, ev) : 200;
    if (status == 404) lerr(err, 404, "not_found", "no evaluator is registered under this name");
    if (status == 200) {
        remove_at_locked(r, idx);
        changed_locked(r);
        gauges_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
    if (status == 200 && r->cfg.db != NULL) store_evaluator_delete(r->cfg.db, name, NULL);
    pthread_mutex_unlock(&r->put_mu);
    if (status == 200) log_info("local evaluator deleted", LOG_S("evaluator", name));
    return status;
}

json_t *local_registry_get(local_registry *r, const char *name)
{
    pthread_mutex_lock(&r->mu);
    lev *ev = find_locked(r, name, NULL);
    json_t *v = ev ? view_locked(ev) : NULL;
    pthread_mutex_unlock(&r->mu);
    return v;
}

static int cmp_ev(const void *a, const void *b)
{
    return strcmp((*(lev *const *)a)->name, (*(lev *const *)b)->name);
}

json_t *local_registry_list(local_registry *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->n > 1) qsort(r->evs, r->n, sizeof r->evs[0], cmp_ev);
    json_t *arr = json_array();
    for (size_t i = 0; i < r->n; i++)
        json_array_append_new(arr, view_locked(r->evs[i]));
    /* evaluators that missed their TTL within the hour, marked */
    double now = time_now();
    for (size_t i = 0; i < r->nexpired; i++) {
        const lexpired *x = &r->expired[i];
        if (!local_ttl_listed(x->expired_at, now) || find_locked(r, x->name, NULL)) continue;
        json_t *v = json_pack("{s:s,s:s,s:s,s:b}", "name", x->name, "version", x->version, "state",
                              "expired", "alive", 0);
        json_object_set_new(v, "expired_at", time_or_null(x->expired_at));
        json_object_set_new(v, "definitions", json_array());
        json_array_append_new(arr, v);
    }
    pthread_mutex_unlock(&r->mu);
    return json_pack("{s:o}", "evaluators", arr);
}

int local_registry_count(local_registry *r, int *definitions)
{
    pthread_mutex_lock(&r->mu);
    int defs = 0, n = (int)r->n;
    for (size_t i = 0; i < r->n; i++)
        defs += (int)r->evs[i]->ndefs;
    pthread_mutex_unlock(&r->mu);
    if (definitions) *definitions = defs;
    return n;
}

/* ------------------------------------------------------- worker side */

json_t *local_registry_catalog(local_registry *r, uint64_t *generation)
{
    pthread_mutex_lock(&r->mu);
    json_t *cat = sorted_catalog_locked(r);
    if (generation) *generation = r->generation;
    pthread_mutex_unlock(&r->mu);
    return cat;
}

/* Finds a definition; returns its evaluator (registry lock held). */
lev *local_find_def_locked(local_registry *r, const char *key, const char *version, ldef **def)
{
    double now = time_now();
    for (size_t i = 0; i < r->n; i++) {
        lev *ev = r->evs[i];
        if (local_ttl_expired(ev->expires_at, now)) continue;
        for (size_t j = 0; j < ev->ndefs; j++)
            if (!strcmp(ev->defs[j].eval_key, key) &&
                (version == NULL || !strcmp(ev->defs[j].eval_version, version))) {
                *def = &ev->defs[j];
                return ev;
            }
    }
    return NULL;
}

int local_registry_definition(local_registry *r, const char *eval_key, const char *eval_version,
                              local_definition *out)
{
    memset(out, 0, sizeof *out);
    if (eval_key == NULL) return -1;
    pthread_mutex_lock(&r->mu);
    ldef *d = NULL;
    lev *ev = local_find_def_locked(r, eval_key, eval_version, &d);
    if (ev != NULL) {
        out->evaluator = xstrdup(ev->name);
        out->eval_key = xstrdup(d->eval_key);
        out->eval_version = xstrdup(d->eval_version);
        out->display_name = xstrdup(d->display_name);
        out->result_kind = xstrdup(d->result_kind);
        out->condition = d->condition ? xstrdup(d->condition) : NULL;
        out->timeout_s = d->timeout_s;
    }
    pthread_mutex_unlock(&r->mu);
    return ev ? 0 : -1;
}

void local_definition_free(local_definition *d)
{
    if (d == NULL) return;
    free(d->evaluator);
    free(d->eval_key);
    free(d->eval_version);
    free(d->display_name);
    free(d->result_kind);
    free(d->condition);
    memset(d, 0, sizeof *d);
}

int local_condition(local_registry *r, sbx_pool *pool, const char *eval_key,
                    const char *eval_version, sbx_image *img, double timeout_s, double budget_s,
                    atomic_int *cancel, local_condition_outcome *out)
{
    memset(out, 0, sizeof *out);
    local_definition d;
    if (local_registry_definition(r, eval_key, eval_version, &d) != 0) {
        snprintf(out->reason_code, sizeof out->reason_code, "condition_error");
        snprintf(out->detail, sizeof out->detail, "no local evaluator offers this definition");
        return -1;
    }
    if (d.condition == NULL) {
        out->applicable = 1;
        local_definition_free(&d);
        return 0;
    }
    sbx_request req = {.kind = LANG_CONDITION,
                       .source = d.condition,
                       .source_len = strlen(d.condition),
                       .eval_key = d.eval_key,
                       .timeout_s = timeout_s,
                       .image = img,
                       .cancel = cancel,
                       .budget_s = budget_s};
    sbx_outcome o = {0};
    int64_t t0 = time_mono_ms();
    sbx_eval(pool, &req, &o);
    metrics_observe(METRIC_EVAL_SECONDS, (double)(time_mono_ms() - t0) / 1000.0, "mode",
                    "condition");
    snprintf(out->reason_code, sizeof out->reason_code, "condition_error");
    if (o.status == SBX_TIMEOUT && (!strcmp(o.limit, "slot") || !strcmp(o.limit, "budget"))) {
        snprintf(out->reason_code, sizeof out->reason_code, "lease_exhausted");
        snprintf(out->detail, sizeof out->detail, "the lease ran out (%s)", o.limit);
    } else if (o.status != SBX_OK) {
        snprintf(out->detail, sizeof out->detail, "condition did not finish: %.200s",
                 o.status == SBX_TIMEOUT     ? "timeout"
                 : o.status == SBX_OUTPUT    ? "output limit"
                 : o.status == SBX_CANCELLED ? "cancelled"
                                             : o.detail);
    } else if (!json_is_true(json_object_get(o.json, "ok"))) {
        const char *stage = json_string_value(json_object_get(o.json, "stage"));
        const char *et = json_string_value(json_object_get(o.json, "error_type"));
        const char *msg = json_string_value(json_object_get(o.json, "message"));
        snprintf(out->detail, sizeof out->detail, "condition %s error: %s",
                 stage ? stage : "unknown",
                 et    ? et
                 : msg ? msg
                       : "unknown");
    } else {
        json_t *app = json_object_get(o.json, "applicable");
        const char *rc = json_string_value(json_object_get(o.json, "reason_code"));
        if (json_is_true(app)) {
            out->applicable = 1;
            out->reason_code[0] = '\0';
        } else if (json_is_false(app)) {
            snprintf(out->reason_code, sizeof out->reason_code, "%s",
                     rc && local_key_valid(rc) ? rc : "condition_false");
        } else {
            snprintf(out->detail, sizeof out->detail, "condition outcome has no 'applicable'");
        }
    }
    sbx_outcome_free(&o);
    local_definition_free(&d);
    return 0;
}
