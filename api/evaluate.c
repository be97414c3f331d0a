/* api/evaluate: POST /v1/evaluate, the playground. Compile-checks
 * (mode "check") or runs (mode "run", the default) one expression or
 * condition against a posted transcript, always in a jailed child through
 * sbx_eval; nothing is submitted anywhere. Runs on a job thread while the
 * connection is suspended (see request.c), so a 60 s evaluation never blocks the
 * server's event loops.
 *
 * Compile-checks go through the jail as well (sbx_check).
 *
 * An inline transcript never becomes a JSON tree: api_body_object_carve
 * leaves it out of the parsed body and its bytes go straight to the session
 * image (simg_build_text), so a request's memory stays near its size.
 *
 * Body: {"kind": "evaluator"|"condition"|"raw", "source": "...",
 *        "eval_key": "q", "mode": "run"|"check", "timeout_seconds": 30,
 *        "transcript": {...}} -- or "assignment_id" instead of "transcript":
 *        a recently processed assignment's session image kept by the
 *        worker (the one its evaluations read: its assignment_id is the
 *        assignment's)
 * Answer: docs/LANGUAGE.md's outcome object ({"ok", "stage", ...}, with any
 * location the interpreter gives) plus "kind", "mode" and timings. */
#include "api/internal.h"
#include "common/canonjson.h"
#include "common/metrics.h"
#include "common/timeutil.h"
#include "sandbox/lang/simg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int valid_key(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128 || !(s[0] >= 'a' && s[0] <= 'z')) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

void route_evaluate(api_req *rq, api_resp *rs)
{
    api_server *srv = rq->srv;
    sbx_image *img = NULL;
    sbx_image *recent = NULL; /* one reference: a recent assignment's session image */
    sbx_outcome out = {0};
    int have_out = 0;
    const char *inline_text = NULL; /* borrowed from the request body */
    size_t inline_len = 0;
    json_t *body = api_body_object_carve(rq, rs, "transcript", &inline_text, &inline_len);
    if (body == NULL) return;
    if (inline_text != NULL && inline_len == 4 && memcmp(inline_text, "null", 4) == 0)
        inline_text = NULL;

    const char *kind_s = "evaluator", *mode = "run", *eval_key = "q";
    double timeout = 30;
    lang_kind kind;
    json_t *v;
    if ((v = json_object_get(body, "kind")) != NULL) {
        if (!json_is_string(v)) {
            api_error(rs, 422, "invalid_request", "kind must be a string");
            goto done;
        }
        kind_s = json_string_value(v);
    }
    if (lang_kind_parse(kind_s, &kind) != 0) {
        api_error(rs, 422, "invalid_request", "kind must be one of raw, condition, evaluator");
        goto done;
    }
    v = json_object_get(body, "source");
    if (!json_is_string(v)) {
        api_error(rs, 422, "invalid_request", "source must be a string");
        goto done;
    }
    const char *src = json_string_value(v);
    size_t src_len = json_string_length(v);
    if ((v = json_object_get(body, "mode")) != NULL) {
        if (!json_is_string(v) || (strcmp(json_string_value(v), "run") != 0 &&
                                   strcmp(json_string_value(v), "check") != 0)) {
            api_error(rs, 422, "invalid_request", "mode must be \"run\" or \"check\"");
            goto done;
        }
        mode = json_string_value(v);
    }
    if ((v = json_object_get(body, "eval_key")) != NULL && !json_is_null(v)) {
        if (!json_is_string(v) || !valid_key(json_string_value(v))) {
            api_error(rs, 422, "invalid_request",
                      "eval_key must be a string matching ^[a-z][a-z0-9_]*$ (at most 128 bytes)");
            goto done;
        }
        eval_key = json_string_value(v);
    }
    if ((v = json_object_get(body, "timeout_seconds")) != NULL && !json_is_null(v)) {
        if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 60 ||
            !isfinite(json_number_value(v))) {
            api_error(rs, 422, "invalid_request", "timeout_seconds must be a number in (0, 60]");
            goto done;
        }
        timeout = json_number_value(v);
    }
    /* an escaped member name ("transcr\u0069pt") is not carved: it was
     * parsed within the value budget like the rest */
    json_t *transcript = json_object_get(body, "transcript");
    if (transcript != NULL && json_is_null(transcript)) transcript = NULL;
    if ((transcript != NULL && !json_is_object(transcript)) ||
        (inline_text != NULL && inline_text[0] != '{')) {
        api_error(rs, 422, "invalid_request", "transcript must be a JSON object");
        goto done;
    }
    json_t *aid = json_object_get(body, "assignment_id");
    if (aid != NULL && !json_is_null(aid) && transcript == NULL && inline_text == NULL) {
        if (!json_is_string(aid)) {
            api_error(rs, 422, "invalid_request", "assignment_id must be a string");
            goto done;
        }
        const api_worker_ops *w = &srv->deps.worker;
        if (w->ctx != NULL) recent = w->recent_image(w->ctx, json_string_value(aid));
        if (recent == NULL) {
            api_error(rs, 404, "not_found",
                      "no recent transcript for this assignment (only the last few are kept)");
            goto done;
        }
    }

    int check = !strcmp(mode, "check");
    if (srv->deps.pool == NULL) {
        api_error(rs, 503, "sandbox_unavailable", "the sandbox pool is not running");
        goto done;
    }
    if (recent != NULL && !check) {
        img = recent; /* built when its assignment was fetched */
        recent = NULL;
    } else if ((transcript != NULL || inline_text != NULL) && !check) {
        fps_err e;
        pthread_mutex_lock(&srv->build_mu);
        if (inline_text != NULL) {
            img = sbx_image_new(inline_text, inline_len, NULL, 0, &e);
        } else { /* a body whose transcript could not be carved out: its tree, as text */
            char *text = canonjson_dumps_ordered(transcript);
            img = text ? sbx_image_new(text, strlen(text), NULL, 0, &e) : NULL;
            if (text == NULL)
                fps_err_set(&e, SIMG_EINVALID, 0, "invalid_transcript",
                            "the transcript cannot be serialized");
            free(text);
        }
        pthread_mutex_unlock(&srv->build_mu);
        if (img == NULL && e.code == SBX_JAIL_FAILURE) {
            api_error(rs, 503, "sandbox_failure", "the sandbox failed: %s", e.msg);
            goto done;
        }
        if (img == NULL) {
            api_error(rs, e.code == SIMG_ETOO_LARGE ? 413 : 422,
                      e.code == SIMG_ETOO_LARGE ? "transcript_too_large" : "invalid_transcript",
                      "transcript: %s", e.msg);
            goto done;
        }
    }
    sbx_request req = {.kind = kind,
                       .source = src,
                       .source_len = src_len,
                       .eval_key = eval_key,
                       .timeout_s = timeout,
                       .image = img,
                       .cancel = &srv->eval_cancel,
                       .playground = 1};
    int64_t t0 = time_mono_ms();
    if (check)
        sbx_check(srv->deps.pool, &req, &out); /* compile only, in the jail too */
    else
        sbx_eval(srv->deps.pool, &req, &out);
    have_out = 1;
    if (!check)
        metrics_observe(METRIC_EVAL_SECONDS, (double)(time_mono_ms() - t0) / 1000.0, "mode",
                        "playground");
    json_t *o = NULL;
    switch (out.status) {
    case SBX_OK:
        o = json_is_object(out.json) ? json_deep_copy(out.json) : NULL;
        if (o == NULL)
            o = json_pack("{s:b,s:s,s:s}", "ok", 0, "stage", "jail", "message",
                          "the sandbox returned no outcome");
        if (check && json_is_true(json_object_get(o, "ok")))
            json_object_set_new(o, "stage", json_string("compile"));
        break;
    case SBX_TIMEOUT:
        if (strcmp(out.limit, "memory_budget") == 0) {
            /* no room for its sandbox within a short wait: live work goes
             * first, nothing ran */
            api_error(rs, 503, "memory_budget_full",
                      "no room in the memory budget for the evaluation's sandbox now (live work "
                      "goes first): retry shortly");
            goto done;
        }
        o = json_pack("{s:b,s:s,s:s}", "ok", 0, "stage", "limit", "error_type",
                      out.limit[0] ? out.limit : "timeout");
        break;
    case SBX_OUTPUT:
        o = json_pack("{s:b,s:s,s:s}", "ok", 0, "stage", "limit", "error_type", "output");
        break;
    case SBX_CANCELLED:
        api_error(rs, 503, "stopping", "the evaluation was cancelled: the sidecar is stopping");
        goto done;
    case SBX_JAIL_FAILURE:
    default:
        api_error(rs, 503, "sandbox_failure", "the sandbox failed: %s", out.detail);
        goto done;
    }
    json_object_set_new(o, "kind", json_string(kind_s));
    json_object_set_new(o, "mode", json_string(mode));
    /* to the microsecond: the digits beyond are the clock's, not news */
    json_object_set_new(o, "wait_ms", json_real(round(out.wait_ms * 1000) / 1000));
    json_object_set_new(o, "run_ms", json_real(round(out.run_ms * 1000) / 1000));
    api_json(rs, 200, o);
done:
    if (have_out) sbx_outcome_free(&out);
    if (img) sbx_image_release(img);
    sbx_image_release(recent);
    json_decref(body);
}
