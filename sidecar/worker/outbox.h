/* sidecar/outbox: result submission (SPEC §2 step 8, §3). It owns the
 * pending results: their queue, its lock, the thread that retries them and
 * the store's outbox table. A result is serialized once and stored with its
 * outbox entry before its first submission; every retry, also after a
 * restart, sends the stored bytes unchanged. With a store the bytes live
 * only there (the queue keeps the schedule: ids, attempts, next attempt);
 * without one (memory only) the queue keeps them. An entry leaves on
 * committed / idempotent_replay or a non-retryable answer. Thread-safe. */
#ifndef FPS_OUTBOX_H
#define FPS_OUTBOX_H
#include "sidecar/cloud/cloud.h"

#include <stddef.h>
#include <stdint.h>

typedef struct outbox outbox;
struct store;

typedef enum {
    OUTBOX_COMMITTED, /* accepted                                  */
    OUTBOX_REPLAYED,  /* accepted earlier (idempotent_replay)      */
    OUTBOX_RETRY,     /* failed retryably: stays, tried again       */
    OUTBOX_REJECTED,  /* failed for good (e.g. lease_lost): leaves  */
} outbox_outcome;

typedef struct {
    void *ud;
    /* After every answered attempt, with the outbox's lock held (so `owner`,
     * as given to outbox_put and NULL once detached or after a restart, is
     * still attached): count, react to lease_lost. Must not call into the
     * outbox. e is NULL for OUTBOX_COMMITTED / OUTBOX_REPLAYED. */
    void (*answered)(void *ud, void *owner, outbox_outcome oc, const cloud_error *e);
    /* The delay before the next attempt of an entry that failed `attempts`
     * times, the last time with `e` (milliseconds; lock held, so it must not
     * call into the outbox). NULL: 1 s doubling to 32 s. */
    int64_t (*retry_delay_ms)(void *ud, int attempts, const cloud_error *e);
} outbox_hooks;

/* cloud and store are borrowed (store may be NULL) and outlive the outbox. */
outbox *outbox_new(struct cloud *c, struct store *st, const outbox_hooks *h);
/* Loads the store's pending entries (left by an earlier process; due at
 * once) and starts the retry thread. Returns the number loaded, or -1 with
 * a message. */
enum { OUTBOX_ESTART = -1 }; /* fps_err name "cannot_start" */
long outbox_start(outbox *o, fps_err *err);
/* Submits a result that is already durable (in the store's outbox table
 * when there is a store): the first attempt runs on the calling thread;
 * a retryable failure leaves it to the retry thread, whose next attempt
 * never waits past half the time left of `lease_expires_epoch` (the lease
 * the result belongs to, wall clock; 0 = unknown). Takes `body` (malloc'd,
 * `len` bytes). `owner` is opaque and passed back to the hook. */
void outbox_put(outbox *o, void *owner, const char *run_id, const char *assignment_id,
                const char *submission_id, double lease_expires_epoch, char *body, size_t len);
/* Clears `owner` from its entries (its assignment is going away). */
void outbox_detach(outbox *o, const void *owner);
/* Pending entries (including those being attempted). */
long outbox_depth(outbox *o);
/* Waits until no entry is pending or the monotonic deadline passes.
 * 1 if empty. */
int outbox_wait_empty(outbox *o, int64_t deadline_ms);
/* Ends the retry thread (call cloud_abort first so attempts end at once).
 * Pending entries stay in the store. */
void outbox_stop(outbox *o);
/* Stops if needed and frees. NULL is a no-op. */
void outbox_free(outbox *o);

#endif
