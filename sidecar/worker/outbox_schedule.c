/* sidecar/worker/outbox_schedule: see outbox_schedule.h. */
#include "sidecar/worker/outbox_schedule.h"

int64_t outbox_default_backoff_ms(int attempts)
{
    int shift = attempts <= 0 ? 0 : attempts < 6 ? attempts : 5;
    return 1000LL << shift;
}

int64_t outbox_retry_delay_ms(int sent, int64_t backoff_ms, double lease_end, double now)
{
    int64_t delay = sent ? backoff_ms : OUTBOX_NOT_SENT_PAUSE_MS;
    double left_ms = (lease_end - now) * 1000;
    if (lease_end > 0 && left_ms > 0 && (double)delay > left_ms / 2) delay = (int64_t)(left_ms / 2);
    return delay;
}
