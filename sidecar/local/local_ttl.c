/* sidecar/local/local_ttl: see local_ttl.h. */
#include "sidecar/local/local_ttl.h"

#include <math.h>

double local_ttl_renew(double now, double ttl_s)
{
    return now + ttl_s;
}

int local_ttl_expired(double expires_at, double now)
{
    return expires_at > 0 && expires_at <= now;
}

int64_t local_ttl_remaining_ms(double expires_at, double now)
{
    if (!(expires_at > 0)) return -1;
    double left = expires_at - now;
    if (left < 0) return -1;
    return (int64_t)llround(left * 1000.0);
}

double local_ttl_sleep_s(double expires_at, double now, double wait_s)
{
    if (expires_at > 0 && expires_at - now < wait_s) return expires_at - now;
    return wait_s;
}

int local_ttl_listed(double expired_at, double now)
{
    return now - expired_at <= LOCAL_EXPIRED_KEEP_S;
}
