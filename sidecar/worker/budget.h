/* sidecar/worker/budget: the arithmetic of the memory budget (docs in the
 * README's "Memory budget"): what the process tree may hold, what it holds
 * by account, and what may be admitted now. The account is the tree at
 * start (`base`), the recent-transcript ring's bound, one reservation per
 * assignment in flight (its transcript's bytes times the parent's bytes per
 * transcript byte: the estimate until its Content-Length is known), one
 * reservation per sandbox running (the reserve, or what a stopped one was
 * seen to use), and other holders (the archive's writer); the running
 * sandboxes' sampled growth beyond their reservations (`excess`) counts
 * beside it when a start is admitted or a sandbox is to be stopped. A claim asks only for the
 * assignments whose estimates fit beside one sandbox reservation, so a claimed assignment never
 * waits on memory and some sandbox can always start; sandbox starts wait for room, but the first
 * one of the tree always starts. Pure: no locks, no clock, no I/O (the worker holds its lock around
 * every call); a budget of 0 bytes admits everything. */
#ifndef FPS_BUDGET_H
#define FPS_BUDGET_H
#include <stddef.h>
#include <stdint.h>

/* Transcript sizes kept for the percentile. */
#define BUDGET_HISTORY 256
/* The smallest estimate of a transcript not yet seen. */
#define BUDGET_MIN_TRANSCRIPT ((uint64_t)1 << 20)

typedef struct {
    /* configuration (budget_init) */
    uint64_t limit;           /* bytes; 0 = no budget                         */
    uint64_t base;            /* the tree at start                            */
    uint64_t ring;            /* the recent ring's bound, counted whole       */
    uint64_t sandbox_reserve; /* per sandbox                                  */
    uint64_t sandbox_max;     /* what one sandbox may reach (its limit; 0 = the
                                 reserve): how far the running ones may grow  */
    double factor;            /* parent bytes per transcript byte in flight   */
    /* the account */
    uint64_t assigned;  /* sum of the assignments' reservations */
    uint64_t sandboxed; /* sum of the sandboxes' reservations   */
    long assignments;   /* assignments holding a reservation    */
    long sandboxes;     /* sandboxes admitted                   */
    long waiting;       /* live sandbox starts waiting for room */
    uint64_t excess;    /* running sandboxes' sampled bytes above their
                           reservations (budget_excess)          */
    uint64_t other;     /* other holders' bytes (the archive's)  */
    /* transcript sizes seen (a ring) */
    uint64_t seen[BUDGET_HISTORY];
    size_t nseen, next;
} budget;

void budget_init(budget *b, uint64_t limit, uint64_t base, uint64_t ring, uint64_t sandbox_reserve,
                 double factor);
/* The 95th percentile of the transcript sizes seen (nearest rank), or 0
 * when none was seen. */
uint64_t budget_p95(const budget *b);
/* What an assignment in flight holds for a transcript of `bytes`. */
uint64_t budget_cost(const budget *b, uint64_t bytes);
/* The reservation of an assignment claimed now: the cost of the larger of
 * the p95 and BUDGET_MIN_TRANSCRIPT. */
uint64_t budget_estimate(const budget *b);
/* The bytes accounted for now (base, ring, reservations). */
uint64_t budget_in_use(const budget *b);
/* How many of `want` assignments a claim may ask for now (0..want): those
 * whose estimates fit beside one sandbox reservation; before any
 * transcript's size is known, one, and only while none is in flight.
 * While nothing is held beyond the base, the ring and one sandbox's
 * reservation, at least one, whatever the room. With no budget, `want`. */
long budget_claimable(const budget *b, long want);
/* Reserves `n` claimed assignments at the estimate; returns the
 * reservation each one holds (to pass to budget_resize and
 * budget_release). */
uint64_t budget_claim(budget *b, long n);
/* 1 if a transcript of `bytes` can never fit (with nothing else in flight
 * but one sandbox), else 0. Never with no budget. */
int budget_never_fits(const budget *b, uint64_t bytes);
/* The transcript's size is known: the assignment's reservation *res
 * becomes its cost (larger or smaller) and the size joins the history. */
void budget_resize(budget *b, uint64_t *res, uint64_t bytes);
/* The assignment's reservation *res becomes `bytes` as measured (its
 * transcript's peak is over: what it holds from now on is known). The
 * history is unchanged. */
void budget_set(budget *b, uint64_t *res, uint64_t bytes);
/* An assignment ends: its reservation goes. */
void budget_release(budget *b, uint64_t res);
/* ---- sandboxes: their reservations, their growth, background work ---- */

/* What a sandbox is admitted against: the reservation, or, for one that
 * was stopped for outgrowing it, what it was seen to use plus an eighth
 * (never above sandbox_max when that is larger than the reserve). */
uint64_t budget_sandbox_need(const budget *b, uint64_t seen);
/* 1 if a sandbox of `need` bytes (its reservation: sandbox_reserve, or
 * budget_sandbox_need) fits now (beside the sampled excess), or no sandbox
 * runs. */
int budget_sandbox_fits_bytes(const budget *b, uint64_t need);
/* 1 if background work's sandbox of `need` fits now: no live start is
 * waiting, and room for one more live reservation is left beside it. */
int budget_background_fits(const budget *b, uint64_t need);
/* A sandbox admitted with a reservation of `bytes`, and let go (a sub with
 * no sandbox counted changes nothing). */
void budget_sandbox_add(budget *b, uint64_t bytes);
void budget_sandbox_sub(budget *b, uint64_t bytes);
/* A running sandbox reserved `reserved` and was sampled at `bytes`: its
 * part of the excess (*slot, 0 at first) is updated. Returns the new part. */
uint64_t budget_excess(budget *b, uint64_t *slot, uint64_t reserved, uint64_t bytes);
/* 1 while running sandboxes' samples matter: a budget, sandboxes running,
 * and either a start waits or the running ones, grown to sandbox_max,
 * would exceed the budget. */
int budget_near(const budget *b);
/* 1 if the account plus the sampled excess exceeds the budget. */
int budget_over(const budget *b);
/* The bytes one sandbox may hold at most, when that is below sandbox_max:
 * the budget less the base (the one exception to "outcomes never depend
 * on the budget"); else 0 (no cap). */
uint64_t budget_sandbox_cap(const budget *b);
/* Other holders (the archive's compression): 1 and counted if `bytes` fit
 * beside one sandbox reservation (never waits), else 0. */
int budget_other_take(budget *b, uint64_t bytes);
void budget_other_put(budget *b, uint64_t bytes);

#endif
