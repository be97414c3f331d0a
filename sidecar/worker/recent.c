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
        sbx_image *img; /* one reference, or NULL */
    } slot[RECENT_N];
    int next;
    size_t max; /* bytes of image it may hold; set once */
};

recent_ring *recent_new(size_t max_bytes)
{
    recent_ring *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->max = max_bytes;
    return r;
}

void recent_free(recent_ring *r)
{
    if (r == NULL) return;
    for (int k = 0; k < RECENT_N; k++)
        sbx_image_release(r->slot[k].img);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void recent_put(recent_ring *r, const char *assignment_id, sbx_image *img)
{
    if (img == NULL || sbx_image_len(img) > r->max) return;
    sbx_image *old[RECENT_N];
    int nold = 0;
    pthread_mutex_lock(&r->mu);
    int i = r->next;
    r->next = (i + 1) % RECENT_N;
    old[nold++] = r->slot[i].img;
    snprintf(r->slot[i].id, sizeof r->slot[i].id, "%s", assignment_id);
    r->slot[i].img = sbx_image_ref(img);
    /* Bound the total: evict the oldest others while over budget. */
    size_t total = 0;
    for (int k = 0; k < RECENT_N; k++)
        total += r->slot[k].img ? sbx_image_len(r->slot[k].img) : 0;
    for (int k = 1; k < RECENT_N && total > r->max; k++) {
        int j = (i + k) % RECENT_N;
        if (r->slot[j].img == NULL) continue;
        total -= sbx_image_len(r->slot[j].img);
        old[nold++] = r->slot[j].img;
        r->slot[j].img = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    for (int k = 0; k < nold; k++) /* freed outside the lock (up to 32 MiB each) */
        sbx_image_release(old[k]);
}

sbx_image *recent_get(recent_ring *r, const char *assignment_id)
{
    sbx_image *img = NULL;
    if (assignment_id == NULL) return NULL;
    pthread_mutex_lock(&r->mu);
    for (int k = 0; k < RECENT_N && img == NULL; k++)
        if (r->slot[k].img && !strcmp(r->slot[k].id, assignment_id))
            img = sbx_image_ref(r->slot[k].img);
    pthread_mutex_unlock(&r->mu);
    return img;
}

size_t recent_bytes(recent_ring *r)
{
    size_t total = 0;
    pthread_mutex_lock(&r->mu);
    for (int k = 0; k < RECENT_N; k++)
        total += r->slot[k].img ? sbx_image_len(r->slot[k].img) : 0;
    pthread_mutex_unlock(&r->mu);
    return total;
}
