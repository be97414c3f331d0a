/* api/backtests: the backtest routes (SPEC §9): POST /v1/backtests (admin)
 * validates the request and starts one through api_backtest_ops, GET lists
 * them, GET /v1/backtests/{id} is one with its progress and summary, GET
 * /v1/backtests/{id}/results its rows (filtered, paginated as /v1/runs is:
 * limit and an opaque cursor), DELETE /v1/backtests/{id} (admin) cancels it.
 * The engine, its threads and what it keeps belong to the daemon; this file
 * owns only the wire shapes and the request's validation. */
#include "api/internal.h"

#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKTEST_LIMIT_MAX 1000000
#define ROWS_PAGE_DEFAULT 50
#define ROWS_PAGE_MAX 500

/* The engine of a backtest route, or NULL with rs filled (503). */
static const api_backtest_ops *need_engine(api_req *rq, api_resp *rs)
{
    const api_backtest_ops *b = &rq->srv->deps.backtest;
    if (b->ctx != NULL) return b;
    api_error(rs, 503, "backtests_unavailable",
              "backtests need the transcript archive (run --archive-max-mb N)");
    return NULL;
}

static void engine_failure(api_resp *rs, const fps_err *e)
{
    api_error_from(rs, e, "backtest_failed");
    if (rs->status == 429) rs->retry_after = 5;
}

/* The fields of a managed definition (the emulator's --definitions format). */
static const char *const def_fields[] = {"eval_key",         "eval_version",    "display_name",
                                         "result_kind",      "labels",          "condition_source",
                                         "evaluator_source", "timeout_seconds", NULL};

static int def_fail(api_resp *rs, const char *what, size_t i, const json_t *d, const char *fmt,
                    const char *arg)
{
    char msg[300];
    snprintf(msg, sizeof msg, fmt, arg);
    const char *key = json_string_value(json_object_get(d, "eval_key"));
    if (key && *key && strlen(key) <= 128)
        api_error(rs, 400, "invalid_request", "%s[%zu] (%.128s): %s", what, i, key, msg);
    else
        api_error(rs, 400, "invalid_request", "%s[%zu]: %s", what, i, msg);
    return -1;
}

/* 0 when every entry of `defs` (an array) is a managed definition: an
 * object of known fields only, each of its type, one per eval_key; else -1
 * with rs filled (400 naming the entry and the field). The sources are
 * compiled by the engine, which reports a source that does not compile in
 * the summary's input errors. */
static int check_definitions(const char *what, const json_t *defs, api_resp *rs)
{
    size_t i;
    const json_t *d;
    json_array_foreach(defs, i, d)
    {
        if (!json_is_object(d)) return def_fail(rs, what, i, d, "%s", "must be an object");
        const char *f;
        const json_t *v;
        json_object_foreach((json_t *)d, f, v)
        {
            size_t k = 0;
            while (def_fields[k] && strcmp(def_fields[k], f))
                k++;
            if (def_fields[k] == NULL)
                return def_fail(rs, what, i, d,
                                "unknown field '%.100s' (allowed: eval_key, eval_version,"
                                " display_name, result_kind, labels, condition_source,"
                                " evaluator_source, timeout_seconds)",
                                f);
        }
        const char *key = json_string_value(json_object_get(d, "eval_key"));
        if (key == NULL || key[0] == '\0' || strlen(key) > 128)
            return def_fail(rs, what, i, d, "%s", "eval_key must be a string of 1 to 128 bytes");
        if (!json_is_string(json_object_get(d, "evaluator_source")))
            return def_fail(rs, what, i, d, "%s", "evaluator_source must be a string");
        v = json_object_get(d, "condition_source");
        if (v && !json_is_null(v) && !json_is_string(v))
            return def_fail(rs, what, i, d, "%s", "condition_source must be a string or null");
        for (const char *const *sf = (const char *const[]){"eval_version", "display_name", NULL};
             *sf; sf++) {
            v = json_object_get(d, *sf);
            if (v && !json_is_string(v))
                return def_fail(rs, what, i, d, "%s must be a string", *sf);
        }
        v = json_object_get(d, "result_kind");
        const char *rk = json_string_value(v);
        if (v &&
            !(rk && (!strcmp(rk, "score") || !strcmp(rk, "metric") || !strcmp(rk, "assertion"))))
            return def_fail(rs, what, i, d, "%s",
                            "result_kind must be \"score\", \"metric\" or \"assertion\"");
        v = json_object_get(d, "timeout_seconds");
        if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) > 0))
            return def_fail(rs, what, i, d, "%s",
                            "timeout_seconds must be a positive number or null");
        v = json_object_get(d, "labels");
        if (v) {
            size_t j;
            const json_t *l;
            if (!json_is_array(v))
                return def_fail(rs, what, i, d, "%s", "labels must be an array of strings");
            json_array_foreach(v, j, l)
            {
                if (!json_is_string(l))
                    return def_fail(rs, what, i, d, "%s", "labels must be an array of strings");
            }
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(key,
                        json_string_value(json_object_get(json_array_get(defs, j), "eval_key"))))
                return def_fail(rs, what, i, d, "%s",
                                "its eval_key is given twice (one definition"
                                " per eval_key)");
    }
    return 0;
}

/* The request as the engine takes it (a new object), or NULL with rs
 * filled (400 naming the field). */
static json_t *validate(json_t *body, api_resp *rs)
{
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "definitions") && strcmp(key, "baseline") && strcmp(key, "since") &&
            strcmp(key, "limit")) {
            api_error(rs, 400, "invalid_request",
                      "unknown field '%.100s' (allowed: definitions, baseline, since, limit)", key);
            return NULL;
        }
    }
    json_t *defs = json_object_get(body, "definitions");
    if (!json_is_array(defs) || json_array_size(defs) == 0) {
        api_error(rs, 400, "invalid_request",
                  "definitions must be a non-empty array of managed definitions");
        return NULL;
    }
    if (check_definitions("definitions", defs, rs) != 0) return NULL;
    json_t *baseline = json_object_get(body, "baseline");
    json_t *base_out;
    if (baseline == NULL) {
        base_out = json_string("production");
    } else if (json_is_null(baseline) || json_is_array(baseline) ||
               (json_is_string(baseline) && !strcmp(json_string_value(baseline), "production"))) {
        if (json_is_array(baseline) && check_definitions("baseline", baseline, rs) != 0)
            return NULL;
        base_out = json_incref(baseline);
    } else {
        api_error(rs, 400, "invalid_request",
                  "baseline must be \"production\", an array of definitions or null");
        return NULL;
    }
    json_t *out = json_pack("{s:O,s:o}", "definitions", defs, "baseline", base_out);
    json_t *since = json_object_get(body, "since");
    if (since != NULL && !json_is_null(since)) {
        double t;
        if (!json_is_string(since) || time_parse_rfc3339(json_string_value(since), &t) != 0) {
            api_error(rs, 400, "invalid_request",
                      "since must be an RFC 3339 time such as 2026-08-28T12:00:00Z");
            json_decref(out);
            return NULL;
        }
        json_object_set(out, "since", since);
    }
    json_t *limit = json_object_get(body, "limit");
    if (limit != NULL && !json_is_null(limit)) {
        if (!json_is_integer(limit) || json_integer_value(limit) < 1 ||
            json_integer_value(limit) > BACKTEST_LIMIT_MAX) {
            api_error(rs, 400, "invalid_request", "limit must be an integer from 1 to %d",
                      BACKTEST_LIMIT_MAX);
            json_decref(out);
            return NULL;
        }
        json_object_set(out, "limit", limit);
    }
    return out;
}

void route_backtest_start(api_req *rq, api_resp *rs)
{
    const api_backtest_ops *b = need_engine(rq, rs);
    if (b == NULL) return;
    json_t *body = api_body_object(rq, rs);
    if (body == NULL) return;
    json_t *req = validate(body, rs);
    json_decref(body);
    if (req == NULL) return;
    char *id = NULL;
    fps_err e = {0};
    int st = b->start(b->ctx, req, &id, &e);
    json_decref(req);
    if (id == NULL || st < 200 || st >= 300) {
        free(id);
        engine_failure(rs, &e);
        return;
    }
    json_t *doc = b->get(b->ctx, id);
    if (doc == NULL) doc = json_pack("{s:s,s:s}", "id", id, "state", "queued");
    free(id);
    api_json(rs, 202, doc);
}

void route_backtests(api_req *rq, api_resp *rs)
{
    const api_backtest_ops *b = need_engine(rq, rs);
    if (b == NULL) return;
    json_t *list = b->list(b->ctx);
    api_json(rs, 200, json_pack("{s:o}", "backtests", list ? list : json_array()));
}

void route_backtest_get(api_req *rq, api_resp *rs)
{
    const api_backtest_ops *b = need_engine(rq, rs);
    if (b == NULL) return;
    json_t *doc = b->get(b->ctx, rq->param);
    if (doc == NULL) {
        api_error(rs, 404, "not_found",
                  "no backtest '%.100s' (finished ones are pruned with the"
                  " history)",
                  rq->param);
        return;
    }
    api_json(rs, 200, doc);
}

void route_backtest_results(api_req *rq, api_resp *rs)
{
    const api_backtest_ops *b = need_engine(rq, rs);
    if (b == NULL) return;
    const char *changed = api_query(rq, "changed");
    int changed_only = 0;
    if (changed != NULL) {
        if (!strcmp(changed, "true") || !strcmp(changed, "1"))
            changed_only = 1;
        else if (strcmp(changed, "false") && strcmp(changed, "0")) {
            api_error(rs, 400, "invalid_request", "changed must be true or false");
            return;
        }
    }
    const char *eval_key = api_query(rq, "eval_key");
    if (eval_key != NULL && eval_key[0] == '\0') eval_key = NULL;
    long limit, offset;
    if (api_query_long(rq, rs, "limit", 1, ROWS_PAGE_MAX, ROWS_PAGE_DEFAULT, &limit)) return;
    /* the cursor is the offset of the next row, opaque to clients */
    const char *cursor = api_query(rq, "cursor");
    offset = 0;
    if (cursor != NULL && cursor[0] != '\0') {
        char *end;
        offset = strtol(cursor, &end, 10);
        if (*end != '\0' || offset < 0) {
            api_error(rs, 400, "invalid_request", "cursor is not one this server returned");
            return;
        }
    }
    size_t total = 0;
    json_t *rows =
        b->rows(b->ctx, rq->param, changed_only, eval_key, (size_t)offset, (size_t)limit, &total);
    if (rows == NULL) {
        api_error(rs, 404, "not_found", "no backtest '%.100s'", rq->param);
        return;
    }
    size_t next = (size_t)offset + json_array_size(rows);
    json_t *nc = json_null();
    if (next < total && json_array_size(rows) > 0) {
        char buf[32];
        snprintf(buf, sizeof buf, "%zu", next);
        nc = json_string(buf);
    }
    api_json(
        rs, 200,
        json_pack("{s:o,s:I,s:o}", "rows", rows, "total", (json_int_t)total, "next_cursor", nc));
}

void route_backtest_cancel(api_req *rq, api_resp *rs)
{
    const api_backtest_ops *b = need_engine(rq, rs);
    if (b == NULL) return;
    if (rq->body_len != 0) {
        json_t *body = api_body_object(rq, rs);
        if (body == NULL) return;
        json_decref(body);
    }
    fps_err e = {0};
    int st = b->cancel(b->ctx, rq->param, &e);
    if (st != 200) {
        if (st == 404)
            api_error(rs, 404, "not_found", "no backtest '%.100s'", rq->param);
        else
            engine_failure(rs, &e);
        return;
    }
    json_t *doc = b->get(b->ctx, rq->param);
    api_json(rs, 200, doc ? doc : json_pack("{s:s}", "id", rq->param));
}
