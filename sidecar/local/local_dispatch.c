/* sidecar/local_dispatch: dispatch of a planned local run to the evaluator
 * registered for its definition (the lookup, the endpoint check, the
 * dispatch through the registry's client, local_client.c, and the outcome
 * noted against the evaluator), and the conversion of the EvalResult answer
 * into wire result items exactly as the reference EvalResult.result_items
 * (LANGUAGE.md "Result types"). Error messages are bounded and never quote
 * the evaluator's answer. */
#include "sidecar/local/local_internal.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/strbuf.h"
#include "common/timeutil.h"

#include <math.h>
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
        return LOCAL_EBAD_RESULT;
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
    return LOCAL_EBAD_RESULT;
}

/* ------------------------------------------------ an answer, judged */

static void reply_fail(local_dispatch_result *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void reply_fail(local_dispatch_result *out, const char *fmt, ...)
{
    out->status = EVAL_RUN_FAILED;
    snprintf(out->error_code, sizeof out->error_code, "%s", "eval_error");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->error_message, sizeof out->error_message, fmt, ap);
    va_end(ap);
}

void local_reply_judge(const local_reply *rp, const char *name, const char *eval_key,
                       const char *result_kind, local_dispatch_result *out)
{
    long status = rp->http_status;
    if (rp->truncated || rp->len > LOCAL_MAX_RESPONSE_BYTES) {
        reply_fail(out, "local evaluator '%s' answered more than %zu bytes", name,
                   LOCAL_MAX_RESPONSE_BYTES);
        return;
    }
    if (status >= 300 && status < 400) {
        reply_fail(out,
                   "local evaluator '%s' answered a redirect (HTTP %ld); redirects are not "
                   "followed",
                   name, status);
        return;
    }
    if (status < 200 || status >= 300) {
        reply_fail(out, "local evaluator '%s' answered HTTP %ld", name, status);
        return;
    }
    json_error_t je;
    json_t *answer = json_loadb(rp->body ? rp->body : "", rp->body ? rp->len : 0, 0, &je);
    if (answer == NULL) {
        reply_fail(out, "local evaluator '%s' answered invalid JSON (at byte %d)", name,
                   je.position);
        return;
    }
    fps_err bad;
    json_t *items = NULL;
    char *summary = NULL;
    int rc = local_result_items(answer, eval_key, &items, &summary, &bad);
    json_decref(answer);
    if (rc != 0) {
        reply_fail(out, "local evaluator '%s' returned an invalid EvalResult: %s", name, bad.msg);
        return;
    }
    int primary = 0;
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        if (!strcmp(json_string_value(json_object_get(it, "result_key")), eval_key) &&
            result_kind != NULL &&
            !strcmp(json_string_value(json_object_get(it, "result_kind")), result_kind))
            primary = 1;
    }
    if (!primary) {
        json_decref(items);
        free(summary);
        reply_fail(out, "result is missing the primary result (key '%s', kind '%s')", eval_key,
                   result_kind ? result_kind : "");
        return;
    }
    json_decref(out->results);
    out->results = items;
    free(out->summary);
    out->summary = summary;
    out->status = EVAL_RUN_SUCCEEDED;
    out->error_code[0] = '\0';
    out->error_message[0] = '\0';
}

/* ------------------------------------------------------------- dispatch */

void local_dispatch(local_registry *r, const local_dispatch_request *req,
                    local_dispatch_result *out)
{
    char *endpoint = NULL, *name = NULL, *kind = NULL;
    secret *key = NULL;
    double timeout = req->timeout_s;

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
    fps_err ee = {0};
    if (ev == NULL || local_endpoint_check(r, endpoint, &ee) != 0) {
        memset(out, 0, sizeof *out);
        out->results = json_array();
        out->started_at = out->finished_at = time_now();
        out->status = EVAL_RUN_FAILED;
        snprintf(out->error_code, sizeof out->error_code, "%s", "evaluator_unavailable");
        if (ev == NULL)
            snprintf(out->error_message, sizeof out->error_message, "%s",
                     "no registered local evaluator offers this definition (it expired or was "
                     "removed)");
        else /* e.g. restored, now the admin port */
            snprintf(out->error_message, sizeof out->error_message,
                     "the evaluator's endpoint is refused: %.400s", ee.msg);
    } else {
        if (endpoint == NULL || name == NULL || kind == NULL) abort();
        local_target t = {.endpoint = endpoint,
                          .name = name,
                          .result_kind = kind,
                          .key = key,
                          .timeout_s = timeout};
        local_client_dispatch(r->client, &t, req, out);
    }
    const char *status = evaluation_status_name(out->status);
    metrics_inc(METRIC_LOCAL_DISPATCHES, "outcome", status, "reason",
                out->error_code[0] ? out->error_code : "none", "evaluator",
                name ? name : "(unregistered)");
    if (name != NULL && out->status != EVAL_RUN_CANCELLED)
        local_note_dispatch(r, name, out->error_code, out->error_message);
    if (out->status != EVAL_RUN_SUCCEEDED)
        log_warn("local run failed", LOG_S("evaluation_run_id", req->evaluation_run_id),
                 LOG_S("eval_key", req->eval_key), LOG_S("status", status),
                 LOG_S("error_code", out->error_code), LOG_S("error", out->error_message));
    secret_free(key);
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
