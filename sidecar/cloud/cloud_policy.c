/* sidecar/cloud_policy: see cloud_policy.h. */
#include "sidecar/cloud/cloud_policy.h"

#include <string.h>

int64_t policy_backoff_ms(int64_t base_ms, int64_t cap_ms, int failures, double u)
{
    if (failures < 1) return 0;
    int64_t ceiling = base_ms;
    for (int i = 1; i < failures && ceiling < cap_ms; i++)
        ceiling *= 2;
    if (ceiling > cap_ms) ceiling = cap_ms;
    if (u < 0) u = 0;
    if (u >= 1) u = 0.999999;
    return (int64_t)(u * (double)(ceiling + 1));
}

void policy_budget_init(policy_budget *b, double ratio, double floor_per_s, int window_s)
{
    memset(b, 0, sizeof *b);
    b->ratio = ratio;
    b->floor_per_s = floor_per_s;
    b->window_s = window_s < 1 ? 1 : window_s > POLICY_WINDOW_MAX ? POLICY_WINDOW_MAX : window_s;
    for (int i = 0; i < POLICY_WINDOW_MAX; i++)
        b->sec[i] = -1;
}

/* The bucket of second `s`, emptied if it held an older second. */
static int bucket(policy_budget *b, int64_t s)
{
    int i = (int)(s % b->window_s);
    if (b->sec[i] != s) {
        b->sec[i] = s;
        b->requests[i] = 0;
        b->retries[i] = 0;
    }
    return i;
}

void policy_budget_sent(policy_budget *b, int64_t now_ms)
{
    b->requests[bucket(b, now_ms / 1000)]++;
}

void policy_budget_counts(const policy_budget *b, int64_t now_ms, long *requests, long *retries)
{
    int64_t s = now_ms / 1000;
    *requests = 0;
    *retries = 0;
    for (int i = 0; i < b->window_s; i++) {
        if (b->sec[i] < 0 || b->sec[i] > s || s - b->sec[i] >= b->window_s) continue;
        *requests += b->requests[i];
        *retries += b->retries[i];
    }
}

int policy_budget_take(policy_budget *b, int64_t now_ms)
{
    long req, ret;
    policy_budget_counts(b, now_ms, &req, &ret);
    if ((double)ret + 1 > b->ratio * (double)req + b->floor_per_s * b->window_s) return 0;
    b->retries[bucket(b, now_ms / 1000)]++;
    return 1;
}

void policy_breaker_init(policy_breaker *k, int threshold, int64_t span_ms, int64_t probe_ms)
{
    memset(k, 0, sizeof *k);
    k->threshold = threshold;
    k->span_ms = span_ms;
    k->probe_ms = probe_ms;
}

void policy_breaker_success(policy_breaker *k)
{
    k->state = BREAKER_CLOSED;
    k->failures = 0;
}

void policy_breaker_failure(policy_breaker *k, int64_t now_ms)
{
    if (k->failures++ == 0) k->first_fail_ms = now_ms;
    if (k->state == BREAKER_HALF_OPEN) {
        k->state = BREAKER_OPEN; /* the probe failed: wait for the next */
        return;
    }
    if (k->state == BREAKER_CLOSED && k->failures >= k->threshold &&
        now_ms - k->first_fail_ms >= k->span_ms) {
        k->state = BREAKER_OPEN;
        k->probe_at_ms = now_ms;
        k->opened++;
    }
}

int policy_breaker_allow(policy_breaker *k, int64_t now_ms, int64_t *wait_ms)
{
    *wait_ms = 0;
    if (k->state == BREAKER_CLOSED) return 1;
    int64_t next = k->probe_at_ms + k->probe_ms;
    if (now_ms >= next) {
        /* A probe; a half-open breaker whose probe never got an answer
         * (e.g. aborted) probes again after the interval too. */
        k->state = BREAKER_HALF_OPEN;
        k->probe_at_ms = now_ms;
        return 1;
    }
    *wait_ms = next - now_ms;
    return 0;
}
