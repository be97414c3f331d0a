/* sidecar/cloud_policy: the arithmetic of how the cloud client treats a
 * failing server, with time and randomness passed in so that it is
 * unit-tested on its own (tests/unit/test_cloud_policy.c):
 *   - backoff with full jitter: a delay drawn uniformly from [0, ceiling],
 *     the ceiling base x 2^(n-1) after n consecutive failures of the same
 *     endpoint, capped;
 *   - a retry budget (as Finagle's and Envoy's): retries may be at most a
 *     fraction of the requests sent in a sliding window, plus a small floor
 *     per second, so a failing server never sees more than that;
 *   - a circuit breaker: after persistent failure (several consecutive
 *     failed requests spanning a minimum time) it opens; while open, new
 *     work (claims) is refused except one probe per probe interval; any
 *     answered request closes it.
 * Not thread-safe: the cloud client holds these under its lock. */
#ifndef FPS_CLOUD_POLICY_H
#define FPS_CLOUD_POLICY_H
#include <stdint.h>

/* Defaults used by the cloud client. */
#define POLICY_BACKOFF_BASE_MS 10
#define POLICY_BACKOFF_CAP_MS 5000
#define POLICY_BUDGET_RATIO 0.2
#define POLICY_BUDGET_FLOOR_PER_S 10.0
#define POLICY_BUDGET_WINDOW_S 10
#define POLICY_BREAKER_FAILURES 5
#define POLICY_BREAKER_SPAN_MS 1000
#define POLICY_BREAKER_PROBE_MS 2000

/* The full-jitter delay after `failures` (>= 1) consecutive failures: `u`
 * (uniform in [0, 1)) times min(cap, base x 2^(failures - 1)). 0 when
 * failures < 1. */
int64_t policy_backoff_ms(int64_t base_ms, int64_t cap_ms, int failures, double u);

#define POLICY_WINDOW_MAX 60
typedef struct {
    double ratio;                   /* retries allowed per request sent          */
    double floor_per_s;             /* plus this many per second of the window   */
    int window_s;                   /* sliding window, whole seconds (<= 60)     */
    int64_t sec[POLICY_WINDOW_MAX]; /* the second each bucket counts */
    long requests[POLICY_WINDOW_MAX], retries[POLICY_WINDOW_MAX];
} policy_budget;

void policy_budget_init(policy_budget *b, double ratio, double floor_per_s, int window_s);
/* A request was sent (every attempt, retries included). */
void policy_budget_sent(policy_budget *b, int64_t now_ms);
/* May a retry be sent now? If so it is counted (1); else 0. Allowed while
 * retries in the window < ratio x requests in the window + floor x window. */
int policy_budget_take(policy_budget *b, int64_t now_ms);
/* Requests and retries in the window ending at now_ms. */
void policy_budget_counts(const policy_budget *b, int64_t now_ms, long *requests, long *retries);

typedef enum { BREAKER_CLOSED = 0, BREAKER_OPEN, BREAKER_HALF_OPEN } policy_breaker_state;
typedef struct {
    int threshold;    /* consecutive failed requests ...             */
    int64_t span_ms;  /* ... spanning at least this long, to open    */
    int64_t probe_ms; /* while open: one probe per this long         */
    policy_breaker_state state;
    int failures;          /* consecutive */
    int64_t first_fail_ms; /* of the current streak */
    int64_t probe_at_ms;   /* last probe (open / half-open) */
    long opened;           /* times it opened (metrics) */
} policy_breaker;

void policy_breaker_init(policy_breaker *k, int threshold, int64_t span_ms, int64_t probe_ms);
/* The server answered (any answer but a server-side failure). */
void policy_breaker_success(policy_breaker *k);
/* A request failed on the server's side (transport, 5xx, retryable). */
void policy_breaker_failure(policy_breaker *k, int64_t now_ms);
/* May new work be requested now? Closed: yes. Open: yes once per probe
 * interval (then half-open until the probe's answer); else no, with the
 * milliseconds until the next probe in *wait_ms. */
int policy_breaker_allow(policy_breaker *k, int64_t now_ms, int64_t *wait_ms);

#endif
