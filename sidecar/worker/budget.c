/* sidecar/worker/budget: see budget.h. */
#include "sidecar/worker/budget.h"

#include <stdlib.h>
#include <string.h>

void budget_init(budget *b, uint64_t limit, uint64_t base, uint64_t ring, uint64_t sandbox_reserve,
                 double factor)
{
    memset(b, 0, sizeof *b);
    b->limit = limit;
    b->base = base;
    b->ring = ring;
    b->sandbox_reserve = sandbox_reserve;
    b->factor = factor > 0 ? factor : 1;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
    return a < c ? -1 : a > c;
}

uint64_t budget_p95(const budget *b)
{
    if (b->nseen == 0) return 0;
    uint64_t v[BUDGET_HISTORY];
    memcpy(v, b->seen, b->nseen * sizeof v[0]);
    qsort(v, b->nseen, sizeof v[0], cmp_u64);
    /* nearest rank: the smallest value with at least 95 % at or below it */
    size_t rank = (b->nseen * 95 + 99) / 100;
    return v[rank - 1];
}

uint64_t budget_cost(const budget *b, uint64_t bytes)
{
    return (uint64_t)((double)bytes * b->factor);
}

uint64_t budget_estimate(const budget *b)
{
    uint64_t p = budget_p95(b);
    return budget_cost(b, p > BUDGET_MIN_TRANSCRIPT ? p : BUDGET_MIN_TRANSCRIPT);
}

uint64_t budget_in_use(const budget *b)
{
    return b->base + b->ring + b->assigned + b->sandboxed + b->other;
}

/* Room left for assignments beside one sandbox reservation (or beside the
 * sandboxes admitted, if more). */
static uint64_t room(const budget *b)
{
    uint64_t sbx = b->sandboxed > b->sandbox_reserve ? b->sandboxed : b->sandbox_reserve;
    uint64_t used = b->base + b->ring + b->assigned + sbx + b->other;
    return used < b->limit ? b->limit - used : 0;
}

long budget_claimable(const budget *b, long want)
{
    if (b->limit == 0 || want <= 0) return want > 0 ? want : 0;
    /* no size seen yet: one assignment at a time until its Content-Length
     * tells what transcripts weigh (the 1 MiB floor could be far off) */
    if (b->nseen == 0 && b->assignments > 0) return 0;
    if (b->nseen == 0) want = 1;
    uint64_t est = budget_estimate(b);
    uint64_t n = est ? room(b) / est : (uint64_t)want;
    /* With nothing held but the fixed part (the base, the ring, one
     * sandbox's reservation), one is always claimed, as the tree's first
     * sandbox always starts: its Content-Length then says whether it fits
     * (or can never fit: budget_never_fits, the server's 413). Otherwise a
     * valid budget whose room beside that fixed part is below one estimate
     * would never claim anything, and say nothing. What others hold comes
     * back, so then the claim waits. */
    if (n == 0 && b->assignments == 0 && b->other == 0 && b->sandboxed <= b->sandbox_reserve) n = 1;
    return n < (uint64_t)want ? (long)n : want;
}

uint64_t budget_claim(budget *b, long n)
{
    uint64_t est = budget_estimate(b);
    if (n > 0) {
        b->assigned += est * (uint64_t)n;
        b->assignments += n;
    }
    return est;
}

int budget_never_fits(const budget *b, uint64_t bytes)
{
    if (b->limit == 0) return 0;
    return b->base + b->ring + b->sandbox_reserve + budget_cost(b, bytes) > b->limit;
}

void budget_resize(budget *b, uint64_t *res, uint64_t bytes)
{
    uint64_t cost = budget_cost(b, bytes);
    b->assigned = b->assigned - *res + cost;
    *res = cost;
    b->seen[b->next] = bytes;
    b->next = (b->next + 1) % BUDGET_HISTORY;
    if (b->nseen < BUDGET_HISTORY) b->nseen++;
}

void budget_set(budget *b, uint64_t *res, uint64_t bytes)
{
    b->assigned = b->assigned - *res + bytes;
    *res = bytes;
}

void budget_release(budget *b, uint64_t res)
{
    b->assigned = res <= b->assigned ? b->assigned - res : 0;
    if (b->assignments > 0) b->assignments--;
}

uint64_t budget_sandbox_need(const budget *b, uint64_t seen)
{
    uint64_t need = seen + seen / 8;
    uint64_t top = b->sandbox_max > b->sandbox_reserve ? b->sandbox_max : 0;
    if (top && need > top) need = top;
    return need > b->sandbox_reserve ? need : b->sandbox_reserve;
}

int budget_sandbox_fits_bytes(const budget *b, uint64_t need)
{
    if (b->limit == 0 || b->sandboxes == 0) return 1;
    return budget_in_use(b) + b->excess + need <= b->limit;
}

int budget_background_fits(const budget *b, uint64_t need)
{
    if (b->limit == 0) return 1;
    if (b->waiting > 0) return 0;
    return budget_in_use(b) + b->excess + need + b->sandbox_reserve <= b->limit;
}

void budget_sandbox_add(budget *b, uint64_t bytes)
{
    b->sandboxed += bytes;
    b->sandboxes++;
}

void budget_sandbox_sub(budget *b, uint64_t bytes)
{
    if (b->sandboxes == 0) return;
    b->sandboxes--;
    b->sandboxed = bytes <= b->sandboxed ? b->sandboxed - bytes : 0;
}

uint64_t budget_excess(budget *b, uint64_t *slot, uint64_t reserved, uint64_t bytes)
{
    uint64_t ex = bytes > reserved ? bytes - reserved : 0;
    b->excess = *slot <= b->excess ? b->excess - *slot : 0;
    b->excess += ex;
    *slot = ex;
    return ex;
}

int budget_near(const budget *b)
{
    if (b->limit == 0 || b->sandboxes == 0) return 0;
    if (b->waiting > 0) return 1;
    uint64_t grow = b->sandbox_max > b->sandbox_reserve ? b->sandbox_max - b->sandbox_reserve : 0;
    return budget_in_use(b) + grow * (uint64_t)b->sandboxes > b->limit;
}

int budget_over(const budget *b)
{
    return b->limit != 0 && budget_in_use(b) + b->excess > b->limit;
}

uint64_t budget_sandbox_cap(const budget *b)
{
    if (b->limit == 0 || b->sandbox_max == 0) return 0;
    uint64_t room = b->limit > b->base ? b->limit - b->base : 0;
    return room < b->sandbox_max ? room : 0;
}

int budget_other_take(budget *b, uint64_t bytes)
{
    if (b->limit != 0 && room(b) < bytes) return 0;
    b->other += bytes;
    return 1;
}

void budget_other_put(budget *b, uint64_t bytes)
{
    b->other = bytes <= b->other ? b->other - bytes : 0;
}
