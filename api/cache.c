/* api/cache: the response cache of the admin API's list routes (GET /v1/runs
 * and GET /v1/assignments). A few finished MHD responses (body and headers,
 * ready to queue on any connection) keyed on the normalized query and tagged
 * with the store's change version read BEFORE the page was rendered
 * (store_change_version). An entry is served only while the version still
 * reads the same, i.e. while no commit has finished since the render began, so
 * a request that arrives after a commit never sees a page older than it. The
 * pages hold only stored values (no ages computed from the clock), so a page
 * stays right for as long as the data does.
 *
 * Bounded: API_CACHE_SLOTS entries and API_CACHE_BYTES of bodies, least
 * recently used evicted first. Thread-safe: one mutex held only for the
 * lookup/insert (never while rendering or sending); entries are reference
 * counted so one can be evicted while connections are still being answered
 * with it (MHD keeps its own reference on the response while sending). */
#include "api/internal.h"

#include <stdlib.h>
#include <string.h>

#define API_CACHE_SLOTS 16
#define API_CACHE_BYTES ((size_t)8 * 1024 * 1024)

struct api_cached {
    atomic_int refs;           /* the cache's own + one per request being answered */
    struct MHD_Response *resp; /* owned: one MHD reference */
    size_t bytes;              /* body size */
    uint64_t version;          /* store change version read before rendering */
    uint64_t used;             /* LRU tick (under the cache mutex) */
    size_t klen;
    char key[]; /* klen bytes, not NUL-terminated */
};

struct api_cache {
    pthread_mutex_t mu;
    api_cached *slot[API_CACHE_SLOTS]; /* owned references; NULL = free */
    size_t bytes;                      /* sum of the slots' bytes */
    uint64_t tick;
    unsigned long long hits, misses;           /* under mu */
    unsigned long long told_hits, told_misses; /* already handed to metrics */
};

api_cache *api_cache_new(void)
{
    api_cache *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void api_cache_release(api_cached *e)
{
    if (e == NULL || atomic_fetch_sub(&e->refs, 1) != 1) return;
    MHD_destroy_response(e->resp);
    free(e);
}

/* Takes slot i out of the table (mu held); returns the cache's reference. */
static api_cached *unlink_slot(api_cache *c, int i)
{
    api_cached *e = c->slot[i];
    c->slot[i] = NULL;
    c->bytes -= e->bytes;
    return e;
}

static int find(const api_cache *c, const char *key, size_t klen)
{
    for (int i = 0; i < API_CACHE_SLOTS; i++) {
        const api_cached *e = c->slot[i];
        if (e != NULL && e->klen == klen && memcmp(e->key, key, klen) == 0) return i;
    }
    return -1;
}

void api_cache_free(api_cache *c)
{
    if (c == NULL) return;
    for (int i = 0; i < API_CACHE_SLOTS; i++)
        if (c->slot[i] != NULL) api_cache_release(unlink_slot(c, i));
    pthread_mutex_destroy(&c->mu);
    free(c);
}

api_cached *api_cache_get(api_cache *c, const char *key, size_t klen, uint64_t version)
{
    api_cached *hit = NULL, *stale = NULL;
    pthread_mutex_lock(&c->mu);
    int i = find(c, key, klen);
    if (i >= 0 && c->slot[i]->version == version) {
        hit = c->slot[i];
        hit->used = ++c->tick;
        atomic_fetch_add(&hit->refs, 1);
        c->hits++;
    } else {
        /* versions only grow: an older page of this query is dead weight */
        if (i >= 0 && c->slot[i]->version < version) stale = unlink_slot(c, i);
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    api_cache_release(stale);
    return hit;
}

struct MHD_Response *api_cached_response(const api_cached *e)
{
    return e->resp;
}

void api_cache_put(api_cache *c, const char *key, size_t klen, uint64_t version,
                   struct MHD_Response *resp, size_t bytes)
{
    api_cached *gone[API_CACHE_SLOTS + 1];
    int ngone = 0;
    api_cached *e = bytes <= API_CACHE_BYTES / 4 ? malloc(sizeof *e + klen) : NULL;
    if (e == NULL) {
        MHD_destroy_response(resp);
        return;
    }
    atomic_init(&e->refs, 1);
    e->resp = resp;
    e->bytes = bytes;
    e->version = version;
    e->klen = klen;
    memcpy(e->key, key, klen);
    pthread_mutex_lock(&c->mu);
    int i = find(c, key, klen);
    if (i >= 0 && c->slot[i]->version >= version) {
        gone[ngone++] = e; /* a render that began later already stored its page */
        goto out;
    }
    if (i >= 0) gone[ngone++] = unlink_slot(c, i);
    for (;;) { /* evict the least recently used until a slot and the bytes fit */
        int free_slot = -1, lru = -1;
        for (int j = 0; j < API_CACHE_SLOTS; j++) {
            if (c->slot[j] == NULL) {
                if (free_slot < 0) free_slot = j;
            } else if (lru < 0 || c->slot[j]->used < c->slot[lru]->used) {
                lru = j;
            }
        }
        if (free_slot >= 0 && c->bytes + bytes <= API_CACHE_BYTES) {
            e->used = ++c->tick;
            c->slot[free_slot] = e;
            c->bytes += bytes;
            break;
        }
        gone[ngone++] = unlink_slot(c, lru); /* lru >= 0: some slot is taken */
    }
out:
    pthread_mutex_unlock(&c->mu);
    for (int j = 0; j < ngone; j++)
        api_cache_release(gone[j]);
}

void api_cache_counts(api_cache *c, unsigned long long *new_hits, unsigned long long *new_misses)
{
    *new_hits = *new_misses = 0;
    if (c == NULL) return;
    pthread_mutex_lock(&c->mu);
    *new_hits = c->hits - c->told_hits;
    *new_misses = c->misses - c->told_misses;
    c->told_hits = c->hits;
    c->told_misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}
