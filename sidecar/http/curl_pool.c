/* sidecar/curl_pool: see curl_pool.h. The idle handles form a ring, oldest
 * returned first. */
#include "sidecar/http/curl_pool.h"

#include <pthread.h>
#include <stdlib.h>

struct curl_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a handle came back */
    int size;
    int head, count; /* the idle ring: ring[head], ... count of them */
    CURL **ring;     /* owned: every handle not lent */
    curl_pool_setup setup;
    void *arg; /* borrowed: setup's */
};

/* A new handle that has performed once (without a URL: libcurl fails before
 * any I/O), so its internal multi handle and wake-up socket pair exist, and
 * has the client's constant options. */
static CURL *primed_handle(const curl_pool *p)
{
    CURL *h = curl_easy_init();
    if (h == NULL) return NULL;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_perform(h); /* CURLE_URL_MALFORMAT, by design */
    curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 1L);
    p->setup(h, p->arg);
    return h;
}

curl_pool *curl_pool_new(int size, curl_pool_setup setup, void *arg)
{
    if (size < 1 || size > 256 || setup == NULL) return NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return NULL;
    curl_pool *p = calloc(1, sizeof *p);
    if (p == NULL) goto fail;
    p->ring = calloc((size_t)size, sizeof *p->ring);
    if (p->ring == NULL) goto fail;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->size = size;
    p->setup = setup;
    p->arg = arg;
    for (; p->count < size; p->count++)
        if ((p->ring[p->count] = primed_handle(p)) == NULL) {
            curl_pool_free(p);
            return NULL;
        }
    return p;
fail:
    if (p != NULL) free(p->ring);
    free(p);
    curl_global_cleanup();
    return NULL;
}

void curl_pool_free(curl_pool *p)
{
    if (p == NULL) return;
    for (int i = 0; i < p->count; i++)
        curl_easy_cleanup(p->ring[(p->head + i) % p->size]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->ring);
    free(p);
    curl_global_cleanup();
}

CURL *curl_pool_get(curl_pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->count == 0)
        pthread_cond_wait(&p->cv, &p->mu);
    CURL *h = p->ring[p->head];
    p->head = (p->head + 1) % p->size;
    p->count--;
    pthread_mutex_unlock(&p->mu);
    return h;
}

void curl_pool_put(curl_pool *p, CURL *h)
{
    if (h == NULL) return;
    /* A borrower's header list (a token or a signature in it) is freed once
     * the request is done: the handle keeps no pointer to it. */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    pthread_mutex_lock(&p->mu);
    p->ring[(p->head + p->count) % p->size] = h;
    p->count++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void curl_pool_close_idle(curl_pool *p)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->count; i++) {
        CURL **slot = &p->ring[(p->head + i) % p->size];
        CURL *fresh = primed_handle(p);
        if (fresh == NULL) continue; /* keeps the old one, connection and all */
        curl_easy_cleanup(*slot);
        *slot = fresh;
    }
    pthread_mutex_unlock(&p->mu);
}
