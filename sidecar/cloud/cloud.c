/* sidecar/cloud: the shared HTTP layer of the cloud client (see cloud.h):
 * a fixed pool of curl easy handles, one per thread that may call the server
 * (curl_pool: created at start, so descriptors do not grow with load;
 * connections and the DNS cache reused; connections closed when the worker
 * goes idle: cloud_release_idle), the protocol headers, TLS verification
 * with an optional CA bundle, no redirects, response caps enforced while reading, server-URL
 * pinning, error envelopes, and the retry policy (backoff per endpoint,
 * the retry budget and the circuit breaker: cloud_policy.h). */
#include "sidecar/cloud/cloud.h"

#include "common/canonjson.h"
#include "common/ids.h"
#include "common/loopback.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/secret.h"
#include "common/strbuf.h"
#include "common/timeutil.h"
#include "sidecar/cloud/cloud_policy.h"
#include "sidecar/http/curl_pool.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct cloud {
    char *base;   /* server URL without trailing '/' (owned) */
    char *origin; /* scheme://authority (owned) */
    char *ca_bundle;
    char *worker_id;
    const secret *token; /* borrowed */
    long timeout_ms;
    int max_attempts;
    int64_t backoff_base_ms, backoff_cap_ms;
    /* the retry policy's state (under pmu) */
    pthread_mutex_t pmu;
    int ep_failures[CLOUD_EP__COUNT]; /* consecutive, per endpoint */
    policy_budget budget;
    policy_breaker breaker;
    unsigned rng; /* jitter */
    long long retries, budget_exhausted;
    atomic_int aborted;
    atomic_llong last_contact_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char user_agent[64];
    struct curl_slist *pin; /* owned: localhost pinned to 127.0.0.1, or NULL */
    curl_pool *handles;     /* owned: one per thread that may call the server */
};

void cloud_release_idle(cloud *c)
{
    curl_pool_close_idle(c->handles);
}

const char *cloud_mode_name(cloud_mode m)
{
    return m == CLOUD_MODE_PYTHON ? "python" : "local";
}

cloud_mode cloud_definition_mode(const json_t *def)
{
    const char *m = cloud_jstr(def, "execution_mode");
    return m != NULL && !strcmp(m, "python") ? CLOUD_MODE_PYTHON : CLOUD_MODE_LOCAL;
}

const char *cloud_endpoint_name(cloud_endpoint ep)
{
    static const char *const names[CLOUD_EP__COUNT] = {
        "register", "claim", "transcript", "definitions", "plan", "heartbeat", "result"};
    return ep >= 0 && ep < CLOUD_EP__COUNT ? names[ep] : "other";
}

static void handle_setup(CURL *h, void *arg);

cloud *cloud_new(const cloud_config *cfg, fps_err *err)
{
    cloud *c = calloc(1, sizeof *c);
    if (c == NULL) {
        fps_err_set(err, CLOUD_ERESOURCE, 0, "out_of_memory", "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_mutex_init(&c->pmu, NULL);
    policy_budget_init(&c->budget, POLICY_BUDGET_RATIO, POLICY_BUDGET_FLOOR_PER_S,
                       POLICY_BUDGET_WINDOW_S);
    policy_breaker_init(&c->breaker, POLICY_BREAKER_FAILURES, POLICY_BREAKER_SPAN_MS,
                        POLICY_BREAKER_PROBE_MS);
    c->rng = (unsigned)time_mono_ms() ^ (unsigned)(uintptr_t)c;
    const char *u = cfg->server_url;
    int https = strncmp(u, "https://", 8) == 0;
    if (!https && strncmp(u, "http://", 7) != 0) {
        fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url", "server URL must be http(s)");
        goto fail;
    }
    const char *auth = u + (https ? 8 : 7);
    size_t alen = strcspn(auth, "/?#");
    if (alen == 0 || memchr(auth, '@', alen) != NULL) {
        fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url",
                    "server URL has no host or carries credentials");
        goto fail;
    }
    /* Host for the loopback check. */
    char host[256];
    const char *h = auth;
    size_t hl;
    if (*h == '[') {
        const char *e = memchr(h, ']', alen);
        if (e == NULL) goto badhost;
        h++;
        hl = (size_t)(e - h);
    } else {
        hl = strcspn(h, ":/?#");
    }
    if (hl == 0 || hl >= sizeof host) goto badhost;
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (!https && !loopback_host(host)) {
        fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url",
                    "server URL must be https for non-loopback host '%s'", host);
        goto fail;
    }
    if (loopback_is_name(host)) { /* never resolved: pinned to 127.0.0.1 */
        const char *pp = h + hl;
        long port = *pp == ':' ? strtol(pp + 1, NULL, 10) : (https ? 443 : 80);
        char entry[300];
        if (port <= 0 || port > 65535 || loopback_pin_entry(host, (int)port, entry, sizeof entry))
            goto badhost;
        c->pin = curl_slist_append(NULL, entry);
    }
    c->origin = strndup(u, (size_t)(auth - u) + alen);
    c->base = strdup(u);
    size_t bl = strlen(c->base);
    if (strpbrk(c->base, "?#") != NULL) {
        fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url",
                    "server URL must not have a query or fragment");
        goto fail;
    }
    while (bl > 0 && c->base[bl - 1] == '/')
        c->base[--bl] = '\0';
    if (cfg->ca_bundle) c->ca_bundle = strdup(cfg->ca_bundle);
    c->worker_id = strdup(cfg->worker_id ? cfg->worker_id : "");
    c->token = cfg->token;
    c->timeout_ms = (long)((cfg->request_timeout_s > 0 ? cfg->request_timeout_s : 30) * 1000);
    c->max_attempts = cfg->max_attempts > 0 ? cfg->max_attempts : 5;
    c->backoff_base_ms =
        cfg->backoff_base_s > 0 ? (int64_t)(cfg->backoff_base_s * 1000) : POLICY_BACKOFF_BASE_MS;
    c->backoff_cap_ms =
        cfg->backoff_max_s > 0 ? (int64_t)(cfg->backoff_max_s * 1000) : POLICY_BACKOFF_CAP_MS;
    snprintf(c->user_agent, sizeof c->user_agent, "failproofai-sidecar/%s", FPS_VERSION);
    c->handles =
        curl_pool_new(cfg->threads > 0 ? cfg->threads : CLOUD_DEFAULT_THREADS, handle_setup, c);
    if (c->handles == NULL) {
        fps_err_set(err, CLOUD_ERESOURCE, 0, "unavailable",
                    "cannot create the HTTP client's handles");
        goto fail;
    }
    return c;
badhost:
    fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url", "server URL has a malformed host");
fail:
    cloud_free(c);
    return NULL;
}

void cloud_free(cloud *c)
{
    if (c == NULL) return;
    curl_pool_free(c->handles);
    pthread_mutex_destroy(&c->pmu);
    free(c->base);
    free(c->origin);
    free(c->ca_bundle);
    free(c->worker_id);
    curl_slist_free_all(c->pin);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void cloud_abort(cloud *c)
{
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->aborted, 1);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

long long cloud_last_contact_ms(const cloud *c)
{
    return atomic_load(&((cloud *)c)->last_contact_ms);
}

const char *cloud_origin(const cloud *c)
{
    return c->origin;
}

const char *cloud_worker_id(const cloud *c)
{
    return c->worker_id;
}

void cloud_set_protocol_error(cloud_error *e, const char *fmt, ...)
{
    e->retryable = 0;
    va_list ap;
    va_start(ap, fmt);
    fps_err_vset(&e->err, CLOUD_PROTOCOL, e->err.http_status, "protocol_error", fmt, ap);
    va_end(ap);
}

/* ---- URLs ---- */

char *cloud_url(cloud *c, const char *path_fmt, const char *id)
{
    strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, c->base);
    const char *p = path_fmt;
    const char *s = strstr(p, "%s");
    if (s == NULL || id == NULL) {
        strbuf_puts(&b, p);
    } else {
        strbuf_put(&b, p, (size_t)(s - p));
        char *esc = curl_easy_escape(NULL, id, 0);
        strbuf_puts(&b, esc ? esc : "");
        curl_free(esc);
        strbuf_puts(&b, s + 2);
    }
    return strbuf_detach(&b, NULL);
}

char *cloud_pin_url(cloud *c, const char *u, fps_err *err)
{
    if (u == NULL || *u == '\0') {
        fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url", "empty URL");
        return NULL;
    }
    for (const unsigned char *p = (const unsigned char *)u; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f || *p == '\\' || *p == '#') {
            fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url",
                        "URL contains a forbidden character");
            return NULL;
        }
    }
    if (u[0] == '/') {
        if (u[1] == '/') {
            fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url",
                        "protocol-relative URL points away from the configured origin");
            return NULL;
        }
        size_t ol = strlen(c->origin), ul = strlen(u);
        char *out = malloc(ol + ul + 1);
        if (out == NULL) return NULL;
        memcpy(out, c->origin, ol);
        memcpy(out + ol, u, ul + 1);
        return out;
    }
    size_t ol = strlen(c->origin);
    if (strncasecmp(u, c->origin, ol) == 0 && u[ol] == '/') return strdup(u);
    fps_err_set(err, CLOUD_EINVALID, 0, "invalid_url", "URL is not on the configured origin %s",
                c->origin);
    return NULL;
}

/* ---- transfer ---- */

typedef struct {
    strbuf body;
    size_t cap;
    int too_large;
    int sized; /* the first bytes came: Content-Length looked at */
    cloud *c;
    CURL *h;
    const cloud_req *r;
    char *refused; /* the size hook's message (e->err.msg), or NULL */
    size_t rcap;
} xfer;

/* The first bytes of a body: with a Content-Length, the buffer is made
 * that size at once (a transcript is held once, never regrown), and the
 * request's size hook may refuse it. 0, or -1 to stop reading. */
static int on_first_bytes(xfer *x)
{
    x->sized = 1;
    curl_off_t cl = -1;
    if (curl_easy_getinfo(x->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) != CURLE_OK || cl < 0)
        return 0;
    long status = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    if ((size_t)cl > x->cap) {
        x->too_large = 1;
        return -1;
    }
    if (status < 200 || status >= 300) return 0;
    if (x->r->on_size != NULL && x->r->on_size(x->r->size_ud, (size_t)cl, x->refused, x->rcap)) {
        x->too_large = 2;
        return -1;
    }
    strbuf_reserve(&x->body, (size_t)cl);
    return 0;
}

static size_t on_write(char *data, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    if (!x->sized && on_first_bytes(x) != 0) return 0;
    if (x->body.len + n > x->cap) {
        x->too_large = 1;
        return 0; /* stop reading past the cap */
    }
    strbuf_put(&x->body, data, n);
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    xfer *x = ud;
    if (dt > 0 && (size_t)dt > x->cap) {
        x->too_large = 1;
        return 1;
    }
    return atomic_load(&x->c->aborted) ? 1 : 0;
}

/* Sleeps up to ms, woken early by cloud_abort. Returns -1 if aborted. */
static int backoff_wait(cloud *c, long ms)
{
    int64_t until = time_mono_ms() + ms;
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->aborted)) {
        if (time_cond_wait_until(&c->cv, &c->mu, until) == ETIMEDOUT) break;
    }
    int ab = atomic_load(&c->aborted);
    pthread_mutex_unlock(&c->mu);
    return ab ? -1 : 0;
}

/* Parses an error envelope; 1 if `j` is one (fills e). */
static int parse_envelope(const json_t *j, long status, cloud_error *e)
{
    if (!json_is_object(j)) return 0;
    const json_t *pv = json_object_get(j, "protocol_version");
    const json_t *er = json_object_get(j, "error");
    if (!json_is_object(er)) return 0;
    const json_t *code = json_object_get(er, "code"), *msg = json_object_get(er, "message"),
                 *rt = json_object_get(er, "retryable");
    if (!json_is_string(code) || !json_is_boolean(rt)) return 0;
    if (!json_is_string(pv) || strcmp(json_string_value(pv), "2") != 0) {
        cloud_set_protocol_error(
            e, "HTTP %ld error envelope with protocol_version other than \"2\"", status);
        return 1;
    }
    e->err.code = CLOUD_REMOTE;
    e->retryable = json_is_true(rt);
    snprintf(e->err.name, sizeof e->err.name, "%s", json_string_value(code));
    e->errc = !strcmp(e->err.name, "lease_lost")             ? CLOUD_ERRC_LEASE_LOST
              : !strcmp(e->err.name, "catalog_mismatch")     ? CLOUD_ERRC_CATALOG_MISMATCH
              : !strcmp(e->err.name, "transcript_too_large") ? CLOUD_ERRC_TRANSCRIPT_TOO_LARGE
                                                             : CLOUD_ERRC_OTHER;
    snprintf(e->err.msg, sizeof e->err.msg, "%s",
             json_is_string(msg) ? json_string_value(msg) : "");
    return 1;
}

/* The options every request of this client shares (curl_pool setup). */
static void handle_setup(CURL *h, void *arg)
{
    const cloud *c = arg;
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms < 10000 ? c->timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (c->ca_bundle) curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_bundle);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
}

/* One HTTP attempt. */
static void attempt(cloud *c, const cloud_req *r, const char *rid, json_t **out, cloud_error *e)
{
    char refused[sizeof e->err.msg] = "";
    xfer x = {.cap = r->cap ? r->cap : CLOUD_MAX_RESPONSE,
              .c = c,
              .r = r,
              .refused = refused,
              .rcap = sizeof refused};
    strbuf_init(&x.body);
    struct curl_slist *hdrs = NULL;
    char line[512];
    CURL *h = curl_pool_get(c->handles);
    x.h = h;
    *out = NULL;
    strbuf auth;
    strbuf_init(&auth);
    strbuf_puts(&auth, "Authorization: Bearer ");
    if (c->token) { /* the token file may rotate: bytes and length from one view */
        size_t tlen;
        const char *tok = secret_view(c->token, &tlen);
        strbuf_put(&auth, tok, tlen);
    }
    hdrs = curl_slist_append(hdrs, auth.data);
    memset(auth.data, 0, auth.len);
    strbuf_free(&auth);
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    snprintf(line, sizeof line, "X-Request-Id: %s", rid);
    hdrs = curl_slist_append(hdrs, line);
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (r->body) hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    if (r->lease_generation > 0) {
        snprintf(line, sizeof line, "X-FailproofAI-Worker-Id: %s", c->worker_id);
        hdrs = curl_slist_append(hdrs, line);
        snprintf(line, sizeof line, "X-FailproofAI-Lease-Generation: %lld", r->lease_generation);
        hdrs = curl_slist_append(hdrs, line);
    }
    curl_easy_setopt(h, CURLOPT_URL, r->url);
    curl_easy_setopt(h, CURLOPT_RESOLVE, c->pin); /* re-pinned for every request */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
    if (r->body) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    e->err.http_status = status;
    e->response_bytes = x.body.len;
    if (x.too_large == 2) {
        /* the size hook refused it (not retried: a size does not change) */
        cloud_set_protocol_error(e, "%s", refused);
        snprintf(e->err.name, sizeof e->err.name, "response_too_large");
        e->errc = CLOUD_ERRC_RESPONSE_TOO_LARGE;
        goto done;
    }
    if (x.too_large) {
        cloud_set_protocol_error(e, "response larger than the %zu-byte cap", x.cap);
        snprintf(e->err.name, sizeof e->err.name, "response_too_large");
        e->errc = CLOUD_ERRC_RESPONSE_TOO_LARGE;
        goto done;
    }
    if (cc != CURLE_OK) {
        if (atomic_load(&c->aborted)) {
            e->err.code = CLOUD_ABORTED;
            snprintf(e->err.name, sizeof e->err.name, "aborted");
            snprintf(e->err.msg, sizeof e->err.msg, "request aborted by shutdown");
            goto done;
        }
        e->err.code = CLOUD_TRANSPORT;
        e->retryable = 1;
        snprintf(e->err.name, sizeof e->err.name, "transport_error");
        snprintf(e->err.msg, sizeof e->err.msg, "%s", curl_easy_strerror(cc));
        goto done;
    }
    atomic_store(&c->last_contact_ms, time_mono_ms());
    int ok_status = status >= 200 && status < 300;
    if (ok_status && r->raw_out != NULL) {
        /* the caller parses this body itself (a transcript: straight to its
         * session image); no tree is built here */
        e->err.code = CLOUD_OK;
        *r->raw_out = strbuf_detach(&x.body, r->raw_len);
        goto done;
    }
    json_error_t je;
    json_t *j =
        x.body.len ? json_loadb(x.body.data, x.body.len, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (status >= 300 && status < 400) {
        json_decref(j);
        cloud_set_protocol_error(e, "HTTP %ld redirect refused (redirects are never followed)",
                                 status);
        snprintf(e->err.name, sizeof e->err.name, "redirect_refused");
        goto done;
    }
    if (status < 200 || status >= 300) {
        int env = parse_envelope(j, status, e);
        json_decref(j);
        if (env) goto done;
        if (status == 429 || status == 502 || status == 503 || status == 504) {
            e->err.code = CLOUD_TRANSPORT;
            e->retryable = 1;
            snprintf(e->err.name, sizeof e->err.name, "transport_error");
            snprintf(e->err.msg, sizeof e->err.msg, "HTTP %ld without an error envelope", status);
        } else {
            cloud_set_protocol_error(e, "HTTP %ld without a valid error envelope", status);
        }
        goto done;
    }
    if (!json_is_object(j)) {
        cloud_set_protocol_error(
            e, j ? "response is not a JSON object" : "response is not valid JSON: %s",
            x.body.len ? je.text : "empty body");
        json_decref(j);
        goto done;
    }
    if (!r->allow_no_version) {
        const json_t *pv = json_object_get(j, "protocol_version");
        if (!json_is_string(pv) || strcmp(json_string_value(pv), "2") != 0) {
            cloud_set_protocol_error(e, "protocol_version must be \"2\"");
            snprintf(e->err.name, sizeof e->err.name, "unsupported_protocol_version");
            json_decref(j);
            goto done;
        }
    }
    e->err.code = CLOUD_OK;
    *out = j;
done:
    curl_pool_put(c->handles, h); /* unsets the header list freed next */
    curl_slist_free_all(hdrs);
    strbuf_free(&x.body);
}

/* ---- the retry policy ---- */

/* The jittered delay after ep's consecutive failures (c->pmu held). */
static int64_t backoff_locked(cloud *c, cloud_endpoint ep)
{
    double u = (double)rand_r(&c->rng) / ((double)RAND_MAX + 1.0);
    return policy_backoff_ms(c->backoff_base_ms, c->backoff_cap_ms, c->ep_failures[ep], u);
}

long long cloud_backoff_ms(cloud *c, cloud_endpoint ep)
{
    pthread_mutex_lock(&c->pmu);
    int64_t d = backoff_locked(c, ep);
    pthread_mutex_unlock(&c->pmu);
    return d;
}

int cloud_claim_permit(cloud *c, long long *wait_ms)
{
    int64_t wait = 0;
    pthread_mutex_lock(&c->pmu);
    int ok = policy_breaker_allow(&c->breaker, time_mono_ms(), &wait);
    pthread_mutex_unlock(&c->pmu);
    *wait_ms = wait;
    return ok;
}

void cloud_policy_stats_get(cloud *c, cloud_policy_stats *out)
{
    static const char *const states[] = {"closed", "open", "half_open"};
    pthread_mutex_lock(&c->pmu);
    out->retries = c->retries;
    out->budget_exhausted = c->budget_exhausted;
    out->breaker_opened = c->breaker.opened;
    out->breaker_open = c->breaker.state != BREAKER_CLOSED;
    out->breaker_state = states[c->breaker.state];
    out->consecutive_failures = c->breaker.failures;
    policy_budget_counts(&c->budget, time_mono_ms(), &out->window_requests, &out->window_retries);
    pthread_mutex_unlock(&c->pmu);
}

/* Books an attempt's outcome: the budget's request count, the endpoint's
 * failure streak, the breaker. A server-side failure is a transport error
 * or a retryable error answer; any other answer shows the server works. */
static void book_attempt(cloud *c, cloud_endpoint ep, const cloud_error *e)
{
    if (e->err.code == CLOUD_ABORTED) return;
    int failed = e->err.code == CLOUD_TRANSPORT || (e->err.code == CLOUD_REMOTE && e->retryable);
    int64_t now = time_mono_ms();
    pthread_mutex_lock(&c->pmu);
    policy_budget_sent(&c->budget, now);
    int was_open = c->breaker.state != BREAKER_CLOSED;
    if (failed) {
        c->ep_failures[ep]++;
        policy_breaker_failure(&c->breaker, now);
    } else {
        c->ep_failures[ep] = 0;
        policy_breaker_success(&c->breaker);
    }
    int open = c->breaker.state != BREAKER_CLOSED;
    int failures = c->breaker.failures;
    pthread_mutex_unlock(&c->pmu);
    if (open == was_open) return;
    metrics_gauge_set(METRIC_BREAKER_OPEN, open);
    if (open) {
        metrics_inc(METRIC_BREAKER_OPENED);
        log_warn("server failing: circuit breaker open (claims paused, heartbeats and results go "
                 "on, slow probes)",
                 LOG_I("consecutive_failures", failures), LOG_S("last_code", e->err.name));
    } else {
        log_info("server answering again: circuit breaker closed");
    }
}

enum { RETRY_NO, RETRY_YES, RETRY_LATER };

/* May the call retry after `delay_ms`? RETRY_NO past the lease it serves
 * and, while the breaker is open, for anything but heartbeats and results
 * (work already held); RETRY_LATER beyond the retry budget (counted as
 * exhausted); else RETRY_YES, and the retry is counted. */
static int retry_permit(cloud *c, const cloud_req *r, int64_t delay_ms)
{
    if (r->lease_expires_epoch > 0 &&
        time_now() + (double)delay_ms / 1000 >= r->lease_expires_epoch)
        return RETRY_NO;
    const char *nm = cloud_endpoint_name(r->ep);
    pthread_mutex_lock(&c->pmu);
    int verdict = RETRY_YES;
    if (c->breaker.state != BREAKER_CLOSED && r->ep != CLOUD_EP_HEARTBEAT &&
        r->ep != CLOUD_EP_RESULT)
        verdict = RETRY_NO;
    else if (!policy_budget_take(&c->budget, time_mono_ms()))
        verdict = RETRY_LATER;
    if (verdict == RETRY_LATER) c->budget_exhausted++;
    if (verdict == RETRY_YES) c->retries++;
    pthread_mutex_unlock(&c->pmu);
    if (verdict == RETRY_LATER) metrics_inc(METRIC_RETRY_BUDGET_EXHAUSTED, "call", nm);
    if (verdict == RETRY_YES) metrics_inc(METRIC_RETRIES, "call", nm);
    return verdict;
}

static void set_aborted(cloud_error *e)
{
    memset(e, 0, sizeof *e);
    e->err.code = CLOUD_ABORTED;
    snprintf(e->err.name, sizeof e->err.name, "aborted");
    snprintf(e->err.msg, sizeof e->err.msg, "request aborted by shutdown");
}

int cloud_call(cloud *c, const cloud_req *r, json_t **out, cloud_error *e)
{
    memset(e, 0, sizeof *e);
    ids_request_id(e->request_id);
    char rid[33];
    memcpy(rid, e->request_id, sizeof rid);
    const char *nm = cloud_endpoint_name(r->ep);
    if (r->again && retry_permit(c, r, 0) != RETRY_YES) {
        e->err.code = CLOUD_TRANSPORT;
        e->retryable = 1;
        e->errc = CLOUD_ERRC_RETRY_BUDGET_EXHAUSTED;
        snprintf(e->err.name, sizeof e->err.name, "retry_budget_exhausted");
        snprintf(e->err.msg, sizeof e->err.msg, "not sent: the retry budget is exhausted");
        return -1;
    }
    /* A call that serves a lease retries while the lease lasts (the
     * budget still bounds the rate); others max_attempts times. */
    int max = !r->retry ? 1 : r->lease_expires_epoch > 0 ? INT_MAX : c->max_attempts;
    for (int i = 0;; i++) {
        if (atomic_load(&c->aborted)) {
            set_aborted(e);
            break;
        }
        memset(e, 0, sizeof *e);
        int64_t t0 = time_mono_ms();
        attempt(c, r, rid, out, e);
        memcpy(e->request_id, rid, sizeof rid);
        metrics_observe(METRIC_SERVER_REQUEST_SECONDS, (time_mono_ms() - t0) / 1000.0, "call", nm);
        if (e->err.code == CLOUD_PROTOCOL)
            metrics_inc(METRIC_PROTOCOL_ERRORS, "call", nm, "code", e->err.name);
        book_attempt(c, r->ep, e);
        if (e->err.code == CLOUD_OK) return 0;
        if (!e->retryable || i + 1 >= max) break;
        int64_t d = cloud_backoff_ms(c, r->ep);
        int verdict = retry_permit(c, r, d);
        /* Beyond the budget, a call that serves a lease waits for budget
         * (a quarter second at a time, within the lease); others give up. */
        while (verdict == RETRY_LATER && r->lease_expires_epoch > 0 &&
               backoff_wait(c, d < 250 ? 250 : (long)d) == 0)
            verdict = retry_permit(c, r, d);
        if (verdict != RETRY_YES) {
            if (atomic_load(&c->aborted)) set_aborted(e);
            break;
        }
        log_debug("retrying cloud call", LOG_S("url", r->url), LOG_S("code", e->err.name),
                  LOG_S("request_id", rid), LOG_I("attempt", i + 1), LOG_I("delay_ms", d));
        if (backoff_wait(c, (long)d) != 0) continue; /* aborted: reported above */
    }
    return -1;
}

int cloud_post_json(cloud *c, cloud_req *req, const json_t *body, json_t **out, cloud_error *e)
{
    char *text = canonjson_dumps_ordered(body);
    if (text == NULL) {
        *out = NULL;
        memset(e, 0, sizeof *e);
        cloud_set_protocol_error(e, "cannot serialize the request body");
        return -1;
    }
    req->method = "POST";
    req->body = text;
    req->body_len = strlen(text);
    int rc = cloud_call(c, req, out, e);
    req->body = NULL;
    free(text);
    return rc;
}

/* ---- strict field helpers ---- */

const char *cloud_req_str(const json_t *o, const char *key, const char *ctx, cloud_error *e)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        cloud_set_protocol_error(e, "%s%s%s must be a string", ctx ? ctx : "", ctx ? "." : "", key);
        return NULL;
    }
    return json_string_value(v);
}

int cloud_req_int(const json_t *o, const char *key, const char *ctx, long long min, long long *out,
                  cloud_error *e)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) {
        cloud_set_protocol_error(e, "%s%s%s must be an integer", ctx ? ctx : "", ctx ? "." : "",
                                 key);
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < min) {
        cloud_set_protocol_error(e, "%s%s%s must be >= %lld", ctx ? ctx : "", ctx ? "." : "", key,
                                 min);
        return -1;
    }
    *out = x;
    return 0;
}

int cloud_opt_str(const json_t *o, const char *key, const char *ctx, const char **out,
                  cloud_error *e)
{
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    if (v == NULL || json_is_null(v)) return 0;
    if (!json_is_string(v)) {
        cloud_set_protocol_error(e, "%s%s%s must be a string or null", ctx ? ctx : "",
                                 ctx ? "." : "", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

int cloud_opt_timeout(const json_t *o, const char *ctx, double *out, cloud_error *e)
{
    const json_t *v = json_object_get(o, "timeout_seconds");
    *out = 0;
    if (v == NULL || json_is_null(v)) return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) <= 0) {
        cloud_set_protocol_error(e, "%s.timeout_seconds must be a finite number > 0", ctx);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

int cloud_str_list(const json_t *o, const char *key, const char *ctx, cloud_error *e)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_array(v)) {
        cloud_set_protocol_error(e, "%s%s%s must be an array", ctx ? ctx : "", ctx ? "." : "", key);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i))) {
            cloud_set_protocol_error(e, "%s%s%s[%zu] must be a string", ctx ? ctx : "",
                                     ctx ? "." : "", key, i);
            return -1;
        }
    return 0;
}
