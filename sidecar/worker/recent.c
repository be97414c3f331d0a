/* sidecar/recent: see recent.h. */
#include "sidecar/worker/recent.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECENT_N 16

struct recent_ring {
    pthread_mutex_t mu; /* guards slot and next */
    struct {
        char id[128];
        rcbuf *raw; /* one reference, or NULL */
    } slot[RECENT_N];
    int next;
};

recent_ring *recent_new(void)
{
    recent_ring *r = calloc(1, sizeof *r);
    if (r != NULL) pthread_mutex_init(&r->mu, NULL);
    return r;
}

void recent_free(recent_ring *r)
{
    if (r == NULL) return;
    for (int k = 0; k < RECENT_N; k++)
        rcbuf_release(r->slot[k].raw);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void recent_put(recent_ring *r, const char *assignment_id, rcbuf *raw)
{
    if (raw == NULL || rcbuf_len(raw) > RECENT_MAX_BYTES) return;
    rcbuf *old[RECENT_N];
    int nold = 0;
    pthread_mutex_lock(&r->mu);
    int i = r->next;
    r->next = (i + 1) % RECENT_N;
    old[nold++] = r->slot[i].raw;
    snprintf(r->slot[i].id, sizeof r->slot[i].id, "%s", assignment_id);
    r->slot[i].raw = rcbuf_ref(raw);
    /* Bound the total: evict the oldest others while over budget. */
    size_t total = 0;
    for (int k = 0; k < RECENT_N; k++)
        total += r->slot[k].raw ? rcbuf_len(r->slot[k].raw) : 0;
    for (int k = 1; k < RECENT_N && total > RECENT_MAX_BYTES; k++) {
        int j = (i + k) % RECENT_N;
        if (r->slot[j].raw == NULL) continue;
        total -= rcbuf_len(r->slot[j].raw);
        old[nold++] = r->slot[j].raw;
        r->slot[j].raw = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    for (int k = 0; k < nold; k++) /* freed outside the lock (up to 25 MiB each) */
        rcbuf_release(old[k]);
}

rcbuf *recent_get(recent_ring *r, const char *assignment_id)
{
    rcbuf *raw = NULL;
    if (assignment_id == NULL) return NULL;
    pthread_mutex_lock(&r->mu);
    for (int k = 0; k < RECENT_N && raw == NULL; k++)
        if (r->slot[k].raw && !strcmp(r->slot[k].id, assignment_id))
            raw = rcbuf_ref(r->slot[k].raw);
    pthread_mutex_unlock(&r->mu);
    return raw;
}

size_t recent_bytes(recent_ring *r)
{
    size_t total = 0;
    pthread_mutex_lock(&r->mu);
    for (int k = 0; k < RECENT_N; k++)
        total += r->slot[k].raw ? rcbuf_len(r->slot[k].raw) : 0;
    pthread_mutex_unlock(&r->mu);
    return total;
}
