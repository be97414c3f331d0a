/* api/route_table: the admin API's routes (method, path pattern, handler,
 * body cap, synchronous or on a job thread, and what the caller must
 * present), and the path matcher that picks one. */
#include "api/internal.h"

#include <string.h>

const api_route api_routes[] = {
    {"GET", "/healthz", route_healthz, 0, 0, API_AUTH_OPEN},
    {"GET", "/readyz", route_readyz, 0, 0, API_AUTH_OPEN},
    {"GET", "/metrics", route_metrics, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/status", route_status, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/assignments", route_assignments, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/assignments/{}", route_assignment, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/runs", route_runs, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/runs/{}", route_run, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/stats", route_stats, 0, 0, API_AUTH_OPEN},
    {"POST", "/v1/evaluate", route_evaluate, API_EVALUATE_BODY_CAP, 1, API_AUTH_ADMIN},
    {"POST", "/v1/drain", route_drain, API_BODY_CAP, 0, API_AUTH_ADMIN},
    {"DELETE", "/v1/drain", route_resume, API_BODY_CAP, 0, API_AUTH_ADMIN},
    {"GET", "/v1/meta", route_meta, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/logs", route_logs, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/outbox", route_outbox, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/catalog", route_catalog, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/evaluators", route_evaluators, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/evaluators/{}", route_evaluator_get, 0, 0, API_AUTH_OPEN},
    {"PUT", "/v1/evaluators/{}", route_evaluator_put, API_BODY_CAP, 0, API_AUTH_REGISTRATION},
    {"DELETE", "/v1/evaluators/{}", route_evaluator_delete, API_BODY_CAP, 0, API_AUTH_REGISTRATION},
    {"POST", "/v1/evaluators/{}/heartbeat", route_evaluator_heartbeat, API_BODY_CAP, 0,
     API_AUTH_REGISTRATION},
    {"POST", "/v1/backtests", route_backtest_start, API_BODY_CAP, 0, API_AUTH_ADMIN},
    {"GET", "/v1/backtests", route_backtests, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/backtests/{}", route_backtest_get, 0, 0, API_AUTH_OPEN},
    {"GET", "/v1/backtests/{}/results", route_backtest_results, 0, 0, API_AUTH_OPEN},
    {"DELETE", "/v1/backtests/{}", route_backtest_cancel, API_BODY_CAP, 0, API_AUTH_ADMIN},
};
const size_t api_nroutes = sizeof api_routes / sizeof api_routes[0];

/* Matches `path` against `pattern`; copies the {} segment into param. */
int api_path_match(const char *pattern, const char *path, char *param, size_t cap)
{
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (p[0] == '{' && p[1] == '}') {
            size_t n = strcspn(s, "/");
            if (n == 0 || n >= cap) return 0;
            memcpy(param, s, n);
            param[n] = '\0';
            s += n;
            p += 2;
            continue;
        }
        if (*p != *s) return 0;
        p++;
        s++;
    }
    return *p == '\0' && *s == '\0';
}
