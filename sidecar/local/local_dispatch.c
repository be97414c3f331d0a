/* sidecar/local_dispatch: dispatch of a planned local run to its evaluator
 * over HTTP (libcurl; bounded by the run timeout, 1 MiB answer cap, no
 * redirects, localhost pinned to 127.0.0.1, every request signed with the
 * registration's own secret, bounded concurrency, each dispatch slot with its pooled handle) and
 * the conversion of the EvalResult answer into wire result items exactly as the reference
 * EvalResult.result_items (docs/LANGUAGE.md "Result types"). Error messages are bounded and never
 * quote the evaluator's answer. */
#include "sidecar/local/local_internal.h"
#include "common/log.h"
#include "common/pyfloat.h"
#include "common/loopback.h"
#include "common/metrics.h"
#include "common/strbuf.h"
#include "common/timeutil.h"

#include <curl/curl.h>
#include <math.h>
#include <nettle/hmac.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------ EvalResult -> items */

static int fail(fps_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(fps_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fps_err_vset(e, LOCAL_EBAD_RESULT, 0, "eval_error", fmt, ap);
    va_end(ap);
    return LOCAL_EBAD_RESULT;
}

/* A result text field: absent/null allowed when optional; else a non-empty
 * string of at most max bytes without control characters (tab/newline/CR
 * allowed). *out borrowed or NULL. */
static int text_field(const json_t *v, const char *field, size_t max, const char **out,
                      fps_err *err)
{
    *out = NULL;
    if (v == NULL || json_is_null(v)) return 0;
    if (!json_is_string(v)) return fail(err, "%s must be a string", field);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n == 0) return fail(err, "%s must not be empty", field);
    if (n > max) return fail(err, "%s is %zu bytes; maximum is %zu", field, n, max);
    if (strlen(s) != n || local_has_control(s, 1))
        return fail(err, "%s must not contain control characters", field);
    *out = s;
    return 0;
}

static int finite_number(const json_t *v, const char *field, double *out, fps_err *err)
{
    if (!json_is_number(v)) return fail(err, "%s must be a number", field);
    double d = json_number_value(v);
    if (!isfinite(d)) return fail(err, "%s must be finite", field);
    *out = d;
    return 0;
}

static int known_fields(const json_t *o, const char *const *allowed, const char *where,
                        fps_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            if (!strcmp(k, allowed[i])) ok = 1;
        if (!ok) return fail(err, "%s has an unexpected field", where);
    }
    return 0;
}

static json_t *item_new(const char *key, const char *kind, json_t *numeric, json_t *boolean,
                        const char *unit, const char *display, const char *desc,
                        const char *reasoning, const json_t *labels)
{
    json_t *o = json_object();
    json_object_set_new(o, "result_key", json_string(key));
    json_object_set_new(o, "result_kind", json_string(kind));
    json_object_set_new(o, "numeric_value", numeric ? numeric : json_null());
    json_object_set_new(o, "bool_value", boolean ? boolean : json_null());
    json_object_set_new(o, "text_value", json_null());
    json_object_set_new(o, "unit", json_string(unit ? unit : ""));
    json_object_set_new(o, "display_value", display ? json_string(display) : json_null());
    json_object_set_new(o, "description", desc ? json_string(desc) : json_null());
    json_object_set_new(o, "reasoning", reasoning ? json_string(reasoning) : json_null());
    json_object_set_new(o, "labels", json_deep_copy(labels));
    return o;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Keys of an object, sorted (borrowed). Caller frees the array. */
static const char **sorted_keys(const json_t *o, size_t *n)
{
    *n = json_object_size(o);
    const char **keys = calloc(*n ? *n : 1, sizeof *keys);
    if (keys == NULL) abort();
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) keys[i++] = k;
    qsort(keys, *n, sizeof *keys, cmp_cstr);
    return keys;
}

static int key_field(const char *key, const char *field, fps_err *err)
{
    size_t n = strlen(key);
    if (n == 0) return fail(err, "%s must not be empty", field);
    if (n > LOCAL_MAX_KEY_BYTES)
        return fail(err, "%s is %zu bytes; maximum is %d", field, n, LOCAL_MAX_KEY_BYTES);
    if (!local_key_valid(key)) return fail(err, "%s must match ^[a-z][a-z0-9_]*$", field);
    return 0;
}

int local_result_items(const json_t *answer, const char *eval_key, json_t **items_out,
                       char **summary_out, fps_err *err)
{
    static const char *const score_f[] = {"value",         "passed",      "unit",
                                          "display_value", "description", NULL};
    static const char *const metric_f[] = {"value", "unit", "display_value", "description", NULL};
    static const char *const assert_f[] = {"passed", "description", NULL};
    json_t *items = NULL, *labels = NULL;
    const char **keys = NULL;
    *items_out = NULL;
    *summary_out = NULL;
    if (!json_is_object(answer)) return fail(err, "the answer must be a JSON object");
    const char *reasoning, *summary;
    if (text_field(json_object_get(answer, "reasoning"), "reasoning", LOCAL_MAX_REASONING_BYTES,
                   &reasoning, err) ||
        text_field(json_object_get(answer, "summary"), "summary", LOCAL_MAX_SUMMARY_BYTES, &summary,
                   err))
        return -1;
    /* labels: unique, <= 20, each 1..64 bytes, stored sorted */
    labels = json_array();
    json_t *lv = json_object_get(answer, "labels");
    if (lv != NULL && !json_is_null(lv)) {
        if (!json_is_array(lv)) {
            fail(err, "labels must be an array of strings");
            goto bad;
        }
        size_t nl = json_array_size(lv);
        if (nl > LOCAL_MAX_LABELS) {
            fail(err, "at most %d labels are allowed", LOCAL_MAX_LABELS);
            goto bad;
        }
        const char *ls[LOCAL_MAX_LABELS];
        for (size_t i = 0; i < nl; i++) {
            const json_t *l = json_array_get(lv, i);
            if (l == NULL || json_is_null(l)) {
                fail(err, "label must be a string");
                goto bad;
            }
            if (text_field(l, "label", LOCAL_MAX_LABEL_BYTES, &ls[i], err)) goto bad;
        }
        qsort(ls, nl, sizeof ls[0], cmp_cstr);
        for (size_t i = 1; i < nl; i++)
            if (!strcmp(ls[i - 1], ls[i])) {
                fail(err, "labels must be unique");
                goto bad;
            }
        for (size_t i = 0; i < nl; i++)
            json_array_append_new(labels, json_string(ls[i]));
    }
    items = json_array();
    int have_score = 0;
    /* score */
    json_t *sv = json_object_get(answer, "score");
    if (sv != NULL && !json_is_null(sv)) {
        double value = 0;
        json_t *passed = NULL;
        const char *unit = "ratio", *display = NULL, *desc = NULL;
        if (json_is_object(sv)) {
            if (known_fields(sv, score_f, "score", err)) goto bad;
            json_t *val = json_object_get(sv, "value");
            if (val == NULL) {
                fail(err, "score value is required");
                goto bad;
            }
            if (finite_number(val, "score value", &value, err)) goto bad;
            json_t *p = json_object_get(sv, "passed");
            if (p != NULL && !json_is_null(p)) {
                if (!json_is_boolean(p)) {
                    fail(err, "score passed must be a boolean or None");
                    goto bad;
                }
                passed = json_boolean(json_is_true(p));
            }
            json_t *u = json_object_get(sv, "unit");
            if (u != NULL) {
                if (!json_is_string(u)) {
                    fail(err, "unit must be a string");
                    json_decref(passed);
                    goto bad;
                }
                unit = json_string_value(u);
                if (*unit && text_field(u, "unit", LOCAL_MAX_UNIT_BYTES, &unit, err)) {
                    json_decref(passed);
                    goto bad;
                }
            }
            if (text_field(json_object_get(sv, "display_value"), "display value",
                           LOCAL_MAX_DISPLAY_VALUE_BYTES, &display, err) ||
                text_field(json_object_get(sv, "description"), "description",
                           LOCAL_MAX_DESCRIPTION_BYTES, &desc, err)) {
                json_decref(passed);
                goto bad;
            }
        } else if (json_is_number(sv)) {
            if (finite_number(sv, "score value", &value, err)) goto bad;
        } else {
            fail(err, "score must be a number or an object");
            goto bad;
        }
        if (!(value >= 0 && value <= 1)) {
            json_decref(passed);
            fail(err, "score value must be between 0 and 1");
            goto bad;
        }
        json_array_append_new(items, item_new(eval_key, "score", json_real(value), passed, unit,
                                              display, desc, reasoning, labels));
        have_score = 1;
    }
    /* metrics, sorted by key */
    json_t *mv = json_object_get(answer, "metrics");
    if (mv != NULL && !json_is_null(mv)) {
        if (!json_is_object(mv)) {
            fail(err, "metrics must be an object");
            goto bad;
        }
        size_t n;
        keys = sorted_keys(mv, &n);
        for (size_t i = 0; i < n; i++) {
            if (key_field(keys[i], "metric key", err)) goto bad;
            json_t *m = json_object_get(mv, keys[i]);
            double value = 0;
            const char *unit = "", *display = NULL, *desc = NULL;
            if (json_is_object(m)) {
                if (known_fields(m, metric_f, "metric", err)) goto bad;
                json_t *val = json_object_get(m, "value");
                if (val == NULL) {
                    fail(err, "metric value is required");
                    goto bad;
                }
                if (finite_number(val, "metric value", &value, err)) goto bad;
                json_t *u = json_object_get(m, "unit");
                if (u != NULL) {
                    if (!json_is_string(u)) {
                        fail(err, "unit must be a string");
                        goto bad;
                    }
                    unit = json_string_value(u);
                    if (*unit && text_field(u, "unit", LOCAL_MAX_UNIT_BYTES, &unit, err)) goto bad;
                }
                if (text_field(json_object_get(m, "display_value"), "display value",
                               LOCAL_MAX_DISPLAY_VALUE_BYTES, &display, err) ||
                    text_field(json_object_get(m, "description"), "description",
                               LOCAL_MAX_DESCRIPTION_BYTES, &desc, err))
                    goto bad;
            } else if (finite_number(m, "metric value", &value, err)) {
                goto bad;
            }
            const char *r = (!have_score && !strcmp(keys[i], eval_key)) ? reasoning : NULL;
            json_array_append_new(items, item_new(keys[i], "metric", json_real(value), NULL, unit,
                                                  display, desc, r, labels));
        }
        free(keys);
        keys = NULL;
    }
    /* assertions, sorted by key */
    json_t *av = json_object_get(answer, "assertions");
    if (av != NULL && !json_is_null(av)) {
        if (!json_is_object(av)) {
            fail(err, "assertions must be an object");
            goto bad;
        }
        size_t n;
        keys = sorted_keys(av, &n);
        for (size_t i = 0; i < n; i++) {
            if (key_field(keys[i], "assertion key", err)) goto bad;
            json_t *a = json_object_get(av, keys[i]);
            int passed;
            const char *desc = NULL;
            if (json_is_object(a)) {
                if (known_fields(a, assert_f, "assertion", err)) goto bad;
                json_t *p = json_object_get(a, "passed");
                if (!json_is_boolean(p)) {
                    fail(err, "assertion passed must be a boolean");
                    goto bad;
                }
                passed = json_is_true(p);
                if (text_field(json_object_get(a, "description"), "description",
                               LOCAL_MAX_DESCRIPTION_BYTES, &desc, err))
                    goto bad;
            } else if (json_is_boolean(a)) {
                passed = json_is_true(a);
            } else {
                fail(err, "assertion passed must be a boolean");
                goto bad;
            }
            int carries = !have_score && !strcmp(keys[i], eval_key) &&
                          (mv == NULL || json_object_get(mv, eval_key) == NULL);
            json_array_append_new(items,
                                  item_new(keys[i], "assertion", NULL, json_boolean(passed), "",
                                           NULL, desc, carries ? reasoning : NULL, labels));
        }
        free(keys);
        keys = NULL;
    }
    size_t ni = json_array_size(items);
    if (ni == 0) {
        fail(err, "an EvalResult must contain a score, metric, or assertion");
        goto bad;
    }
    if (ni > LOCAL_MAX_RESULTS) {
        fail(err, "an EvalResult may contain at most %d results", LOCAL_MAX_RESULTS);
        goto bad;
    }
    for (size_t i = 0; i < ni; i++)
        for (size_t j = i + 1; j < ni; j++)
            if (!strcmp(
                    json_string_value(json_object_get(json_array_get(items, i), "result_key")),
                    json_string_value(json_object_get(json_array_get(items, j), "result_key")))) {
                fail(err, "result keys must be unique within one evaluation run");
                goto bad;
            }
    json_decref(labels);
    *items_out = items;
    if (summary) {
        *summary_out = strdup(summary);
        if (*summary_out == NULL) abort();
    }
    return 0;
bad:
    free(keys);
    json_decref(items);
    json_decref(labels);
    return -1;
}

/* ------------------------------------------------------------- dispatch */

typedef struct {
    strbuf body;
    int overflow;
    atomic_int *cancel;
    int cancelled;
} xfer;

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    if (x->body.len + n > LOCAL_MAX_RESPONSE_BYTES) {
        x->overflow = 1;
        return 0; /* abort the transfer */
    }
    strbuf_put(&x->body, data, n);
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    xfer *x = ud;
    if (x->cancel != NULL && atomic_load(x->cancel)) {
        x->cancelled = 1;
        return 1;
    }
    return 0;
}

void local_dispatch_handle_setup(CURL *h, void *arg)
{
    (void)arg;
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    /* closed after each dispatch, as before pooling: an evaluator (a
     * one-connection-at-a-time server, say) never sees a connection held */
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)LOCAL_MAX_RESPONSE_BYTES);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "failproofai-sidecar/" FPS_VERSION);
}

static void set_result(local_dispatch_result *out, const char *status, const char *code,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void set_result(local_dispatch_result *out, const char *status, const char *code,
                       const char *fmt, ...)
{
    out->status = status;
    snprintf(out->error_code, sizeof out->error_code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->error_message, sizeof out->error_message, fmt, ap);
    va_end(ap);
}

/* Waits for a dispatch slot until deadline_ms (monotonic). 0 or -1. */
static int slot_acquire(local_registry *r, int64_t deadline_ms, atomic_int *cancel)
{
    pthread_mutex_lock(&r->mu);
    while (r->active_dispatch >= r->cfg.max_dispatch) {
        int64_t now = time_mono_ms();
        if (now >= deadline_ms || (cancel && atomic_load(cancel))) {
            pthread_mutex_unlock(&r->mu);
            return -1;
        }
        int64_t wait = deadline_ms - now;
        if (wait > 100) wait = 100; /* re-check cancel */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + wait * 1000000LL;
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&r->slot_cv, &r->mu, &ts);
    }
    r->active_dispatch++;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static void slot_release(local_registry *r)
{
    pthread_mutex_lock(&r->mu);
    r->active_dispatch--;
    pthread_cond_signal(&r->slot_cv);
    pthread_mutex_unlock(&r->mu);
}

/* Appends the signature header "X-FailproofAI-Signature: t=<now>,v1=<hex
 * HMAC-SHA256(key, t "." body)>" to sb. */
static void sign(strbuf *sb, const secret *key, const char *body, size_t len)
{
    char t[24];
    unsigned char mac[SHA256_DIGEST_SIZE];
    struct hmac_sha256_ctx ctx;
    snprintf(t, sizeof t, "%lld", (long long)time(NULL));
    hmac_sha256_set_key(&ctx, secret_len(key), (const uint8_t *)secret_expose(key));
    hmac_sha256_update(&ctx, strlen(t), (const uint8_t *)t);
    hmac_sha256_update(&ctx, 1, (const uint8_t *)".");
    hmac_sha256_update(&ctx, len, (const uint8_t *)body);
    hmac_sha256_digest(&ctx, sizeof mac, mac);
    strbuf_printf(sb, "%s: t=%s,v1=", LOCAL_SIGNATURE_HEADER, t);
    for (size_t i = 0; i < sizeof mac; i++)
        strbuf_printf(sb, "%02x", mac[i]);
    explicit_bzero(&ctx, sizeof ctx);
}

/* The CURLOPT_RESOLVE list pinning a localhost endpoint to 127.0.0.1, or
 * NULL (an address needs no resolving; an allowed host is resolved). */
static struct curl_slist *pin_localhost(const char *endpoint)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    struct curl_slist *pin = NULL;
    if (u != NULL && curl_url_set(u, CURLUPART_URL, endpoint, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
        loopback_is_name(host)) {
        char entry[300];
        if (loopback_pin_entry(host, atoi(port), entry, sizeof entry) == 0)
            pin = curl_slist_append(NULL, entry);
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return pin;
}

void local_dispatch(local_registry *r, const local_dispatch_request *req,
                    local_dispatch_result *out)
{
    memset(out, 0, sizeof *out);
    out->results = json_array();
    out->started_at = time_now();
    double timeout = req->timeout_s;
    int64_t t0 = time_mono_ms();
    int64_t deadline = 0;
    char *endpoint = NULL, *name = NULL, *kind = NULL;
    CURL *h = NULL;
    struct curl_slist *hdrs = NULL, *pin = NULL;
    secret *key = NULL;
    xfer x = {.cancel = req->cancel};
    strbuf body, secret_hdr; /* secret_hdr: the signature header */
    strbuf_init(&body);
    strbuf_init(&secret_hdr);
    strbuf_init(&x.body);
    int have_slot = 0;

    pthread_mutex_lock(&r->mu);
    ldef *d = NULL;
    lev *ev = req->eval_key ? local_find_def_locked(r, req->eval_key, req->eval_version, &d) : NULL;
    if (ev != NULL) {
        endpoint = strdup(ev->endpoint);
        name = strdup(ev->name);
        kind = strdup(req->result_kind ? req->result_kind : d->result_kind);
        key = ev->owner ? secret_from_str(secret_expose(ev->owner)) : NULL;
        if (!(timeout > 0)) timeout = d->timeout_s; /* as registered */
    }
    pthread_mutex_unlock(&r->mu);
    if (!(timeout > 0)) timeout = LOCAL_DEFAULT_TIMEOUT_S;
    deadline = t0 + (int64_t)(timeout * 1000.0);
    if (ev == NULL) {
        set_result(out, "failed", "evaluator_unavailable",
                   "no registered local evaluator offers this definition (it expired or was "
                   "removed)");
        goto done;
    }
    if (endpoint == NULL || name == NULL || kind == NULL) abort();
    fps_err ee = {0};
    if (local_endpoint_check(r, endpoint, &ee) != 0) { /* e.g. restored, now the admin port */
        set_result(out, "failed", "evaluator_unavailable",
                   "the evaluator's endpoint is refused: %s", ee.msg);
        goto done;
    }
    if (slot_acquire(r, deadline, req->cancel) != 0) {
        if (req->cancel && atomic_load(req->cancel))
            set_result(out, "cancelled", "", "%s", "");
        else
            set_result(out, "timed_out", "eval_timeout",
                       "evaluation exceeded its configured timeout (waiting for a dispatch slot)");
        goto done;
    }
    have_slot = 1;

    /* body: the transcript goes in as received (no re-serialization) */
    strbuf_puts(&body, "{\"evaluation_run_id\":");
    strbuf_json_str(&body, req->evaluation_run_id ? req->evaluation_run_id : "");
    strbuf_puts(&body, ",\"eval_key\":");
    strbuf_json_str(&body, req->eval_key);
    strbuf_puts(&body, ",\"eval_version\":");
    strbuf_json_str(&body, req->eval_version ? req->eval_version : "");
    strbuf_puts(&body, ",\"timeout_seconds\":");
    pyfloat_repr(&body, timeout); /* shortest round-trip form: no float noise */
    strbuf_puts(&body, ",\"transcript\":");
    if (req->transcript != NULL)
        strbuf_put(&body, req->transcript, req->transcript_len);
    else
        strbuf_puts(&body, "null");
    strbuf_putc(&body, '}');

    h = curl_pool_get(r->handles); /* never waits: we hold a slot */
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (key != NULL) {
        sign(&secret_hdr, key, body.data, body.len);
        hdrs = curl_slist_append(hdrs, secret_hdr.data);
    }
    pin = pin_localhost(endpoint);
    int64_t remaining = deadline - time_mono_ms();
    if (remaining < 1) remaining = 1;
    curl_easy_setopt(h, CURLOPT_URL, endpoint);
    curl_easy_setopt(h, CURLOPT_RESOLVE, pin);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.len);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)remaining);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(remaining < 10000 ? remaining : 10000));
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    out->http_status = status;
    if (x.cancelled) {
        set_result(out, "cancelled", "", "%s", "");
        out->error_code[0] = '\0';
        goto done;
    }
    if (x.overflow || rc == CURLE_FILESIZE_EXCEEDED) {
        set_result(out, "failed", "eval_error", "local evaluator '%s' answered more than %zu bytes",
                   name, LOCAL_MAX_RESPONSE_BYTES);
        goto done;
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        set_result(out, "timed_out", "eval_timeout",
                   "evaluation exceeded its configured timeout (%g s)", timeout);
        goto done;
    }
    if (rc != CURLE_OK) {
        set_result(out, "failed", "evaluator_unavailable",
                   "local evaluator '%s' is unreachable: %s", name, curl_easy_strerror(rc));
        goto done;
    }
    if (status >= 300 && status < 400) {
        set_result(out, "failed", "eval_error",
                   "local evaluator '%s' answered a redirect (HTTP %ld); redirects are not "
                   "followed",
                   name, status);
        goto done;
    }
    if (status < 200 || status >= 300) {
        set_result(out, "failed", "eval_error", "local evaluator '%s' answered HTTP %ld", name,
                   status);
        goto done;
    }
    json_error_t je;
    json_t *answer = json_loadb(x.body.data ? x.body.data : "", x.body.len, 0, &je);
    if (answer == NULL) {
        set_result(out, "failed", "eval_error",
                   "local evaluator '%s' answered invalid JSON (at byte %d)", name, je.position);
        goto done;
    }
    fps_err bad;
    json_t *items = NULL;
    char *summary = NULL;
    if (local_result_items(answer, req->eval_key, &items, &summary, &bad) != 0) {
        json_decref(answer);
        set_result(out, "failed", "eval_error",
                   "local evaluator '%s' returned an invalid "
                   "EvalResult: %s",
                   name, bad.msg);
        goto done;
    }
    json_decref(answer);
    int primary = 0;
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        if (!strcmp(json_string_value(json_object_get(it, "result_key")), req->eval_key) &&
            !strcmp(json_string_value(json_object_get(it, "result_kind")), kind))
            primary = 1;
    }
    if (!primary) {
        json_decref(items);
        free(summary);
        set_result(out, "failed", "eval_error",
                   "result is missing the primary result (key '%s', kind '%s')", req->eval_key,
                   kind);
        goto done;
    }
    json_decref(out->results);
    out->results = items;
    out->summary = summary;
    out->status = "succeeded";
done:
    if (out->status == NULL) out->status = "failed";
    out->finished_at = time_now();
    /* before the slot: a slot's holder never waits; it unsets the header
     * list freed below */
    if (h) curl_pool_put(r->handles, h);
    if (have_slot) slot_release(r);
    metrics_inc(METRIC_LOCAL_DISPATCHES, "outcome", out->status, "reason",
                out->error_code[0] ? out->error_code : "none", "evaluator",
                name ? name : "(unregistered)");
    if (name != NULL && strcmp(out->status, "cancelled") != 0)
        local_note_dispatch(r, name, out->error_code, out->error_message);
    if (strcmp(out->status, "succeeded") != 0)
        log_warn("local run failed", LOG_S("evaluation_run_id", req->evaluation_run_id),
                 LOG_S("eval_key", req->eval_key), LOG_S("status", out->status),
                 LOG_S("error_code", out->error_code), LOG_S("error", out->error_message));
    curl_slist_free_all(hdrs);
    if (secret_hdr.data != NULL) explicit_bzero(secret_hdr.data, secret_hdr.len);
    strbuf_free(&secret_hdr);
    curl_slist_free_all(pin);
    secret_free(key);
    strbuf_free(&body);
    strbuf_free(&x.body);
    free(endpoint);
    free(name);
    free(kind);
}

void local_dispatch_result_free(local_dispatch_result *out)
{
    json_decref(out->results);
    free(out->summary);
    out->results = NULL;
    out->summary = NULL;
}
