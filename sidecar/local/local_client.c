/* sidecar/local_client: the HTTP client that sends one local run to an
 * evaluator endpoint (libcurl; bounded by the run timeout, 1 MiB answer
 * cap, no redirects, localhost pinned to 127.0.0.1, the body signed with
 * the given key, bounded concurrency, each dispatch slot with its pooled
 * handle) and validates its EvalResult answer into wire result items. The
 * registry's dispatch (local_dispatch.c) and the backtest engine's --local
 * both send through it, so a run's body and signature are built in one
 * place. Error messages are bounded and never quote the evaluator's answer. */
#include "sidecar/local/local_internal.h"

#include "common/loopback.h"
#include "common/pyfloat.h"
#include "common/strbuf.h"
#include "common/timeutil.h"

#include <curl/curl.h>
#include <nettle/hmac.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct local_client {
    pthread_mutex_t mu;
    pthread_cond_t slot_cv;
    int active, max;    /* dispatches running, at most */
    curl_pool *handles; /* owned: one per slot */
};

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

static void handle_setup(CURL *h, void *arg)
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

static void set_result(local_dispatch_result *out, eval_run_status status, const char *code,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void set_result(local_dispatch_result *out, eval_run_status status, const char *code,
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
static int slot_acquire(local_client *c, int64_t deadline_ms, atomic_int *cancel)
{
    pthread_mutex_lock(&c->mu);
    while (c->active >= c->max) {
        int64_t now = time_mono_ms();
        if (now >= deadline_ms || (cancel && atomic_load(cancel))) {
            pthread_mutex_unlock(&c->mu);
            return -1;
        }
        int64_t wait = deadline_ms - now;
        if (wait > 100) wait = 100; /* re-check cancel */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + wait * 1000000LL;
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&c->slot_cv, &c->mu, &ts);
    }
    c->active++;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static void slot_release(local_client *c)
{
    pthread_mutex_lock(&c->mu);
    c->active--;
    pthread_cond_signal(&c->slot_cv);
    pthread_mutex_unlock(&c->mu);
}

/* Appends the signature header "X-FailproofAI-Signature: t=<now>,v1=<hex
 * HMAC-SHA256(key, t "." body)>" to sb. */
static void sign(strbuf *sb, const secret *key, const char *body, size_t len)
{
    char t[24];
    unsigned char mac[SHA256_DIGEST_SIZE];
    struct hmac_sha256_ctx ctx;
    snprintf(t, sizeof t, "%lld", (long long)time(NULL));
    size_t klen;
    const char *kb = secret_view(key, &klen);
    hmac_sha256_set_key(&ctx, klen, (const uint8_t *)kb);
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

local_client *local_client_new(int max_dispatch)
{
    local_client *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->max = max_dispatch > 0 ? max_dispatch : 16;
    c->handles = curl_pool_new(c->max, handle_setup, NULL); /* one per slot */
    if (c->handles == NULL) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->slot_cv, NULL);
    return c;
}

void local_client_free(local_client *c)
{
    if (c == NULL) return;
    curl_pool_free(c->handles);
    pthread_cond_destroy(&c->slot_cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void local_client_dispatch(local_client *c, const local_target *t,
                           const local_dispatch_request *req, local_dispatch_result *out)
{
    memset(out, 0, sizeof *out);
    out->status = EVAL_RUN_FAILED; /* until it is anything else */
    out->results = json_array();
    out->started_at = time_now();
    double timeout = t->timeout_s > 0 ? t->timeout_s : LOCAL_DEFAULT_TIMEOUT_S;
    int64_t deadline = time_mono_ms() + (int64_t)(timeout * 1000.0);
    const char *name = t->name ? t->name : t->endpoint;
    CURL *h = NULL;
    struct curl_slist *hdrs = NULL, *pin = NULL;
    xfer x = {.cancel = req->cancel};
    strbuf body, secret_hdr; /* secret_hdr: the signature header */
    strbuf_init(&body);
    strbuf_init(&secret_hdr);
    strbuf_init(&x.body);
    int have_slot = 0;

    if (slot_acquire(c, deadline, req->cancel) != 0) {
        if (req->cancel && atomic_load(req->cancel))
            set_result(out, EVAL_RUN_CANCELLED, "", "%s", "");
        else
            set_result(out, EVAL_RUN_TIMED_OUT, "eval_timeout",
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

    h = curl_pool_get(c->handles); /* never waits: we hold a slot */
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (t->key != NULL) {
        sign(&secret_hdr, t->key, body.data, body.len);
        hdrs = curl_slist_append(hdrs, secret_hdr.data);
    }
    pin = pin_localhost(t->endpoint);
    int64_t remaining = deadline - time_mono_ms();
    if (remaining < 1) remaining = 1;
    curl_easy_setopt(h, CURLOPT_URL, t->endpoint);
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
        set_result(out, EVAL_RUN_CANCELLED, "", "%s", "");
        out->error_code[0] = '\0';
        goto done;
    }
    int truncated = x.overflow || rc == CURLE_FILESIZE_EXCEEDED;
    if (!truncated && rc == CURLE_OPERATION_TIMEDOUT) {
        set_result(out, EVAL_RUN_TIMED_OUT, "eval_timeout",
                   "evaluation exceeded its configured timeout (%g s)", timeout);
        goto done;
    }
    if (!truncated && rc != CURLE_OK) {
        set_result(out, EVAL_RUN_FAILED, "evaluator_unavailable",
                   "local evaluator '%s' is unreachable: %s", name, curl_easy_strerror(rc));
        goto done;
    }
    /* the answer (an oversized one first, before any transfer error) */
    local_reply rp = {status, x.body.data, x.body.len, truncated};
    local_reply_judge(&rp, name, req->eval_key, t->result_kind, out);
done:
    out->finished_at = time_now();
    /* before the slot: a slot's holder never waits; it unsets the header
     * list freed below */
    if (h) curl_pool_put(c->handles, h);
    if (have_slot) slot_release(c);
    curl_slist_free_all(hdrs);
    if (secret_hdr.data != NULL) explicit_bzero(secret_hdr.data, secret_hdr.len);
    strbuf_free(&secret_hdr);
    curl_slist_free_all(pin);
    strbuf_free(&body);
    strbuf_free(&x.body);
}
