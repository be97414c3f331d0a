/* sidecar/local/local_ttl: a local registration's TTL clock (Consul-style,
 * SPEC §4), in wall-clock epoch seconds. A registration renewed at `now`
 * (registered, replaced, heartbeated) expires ttl seconds later; an
 * expires_at of 0 or less never expires. Expiry is inclusive: at its
 * expires_at a registration is gone (its name and eval keys released), even
 * before the registry's timer thread removes it. One that expired stays
 * listed, as expired, for LOCAL_EXPIRED_KEEP_S. The registry (local.c)
 * keeps every time through these; pure functions, any thread; unit-tested
 * (tests/unit/test_local_registry.c). */
#ifndef FPS_LOCAL_TTL_H
#define FPS_LOCAL_TTL_H
#include <stdint.h>

/* How long an expired registration stays listed (state "expired"). */
#define LOCAL_EXPIRED_KEEP_S 3600.0

/* The expiry of a registration renewed at now with ttl_s: now + ttl_s. */
double local_ttl_renew(double now, double ttl_s);

/* 1 if a registration expiring at expires_at is gone at now
 * (expires_at > 0 and expires_at <= now), else 0. */
int local_ttl_expired(double expires_at, double now);

/* What the admin API reports as ttl_remaining_seconds, in milliseconds:
 * expires_at - now rounded to the nearest millisecond (half away from
 * zero), or -1 when it never expires or the time is already past (the view
 * reports null). At its expires_at exactly, 0. */
int64_t local_ttl_remaining_ms(double expires_at, double now);

/* The timer thread's sleep: the time until expires_at when it expires and
 * that is sooner than wait_s, else wait_s (an expiry already past gives
 * what is left, zero or less: no wait). */
double local_ttl_sleep_s(double expires_at, double now, double wait_s);

/* 1 while a registration that expired at expired_at is still listed as
 * expired at now (now - expired_at <= LOCAL_EXPIRED_KEEP_S), else 0. */
int local_ttl_listed(double expired_at, double now);

#endif
