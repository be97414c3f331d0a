/* sidecar/curl_pool: a fixed set of libcurl easy handles that the threads of
 * one HTTP client borrow a request at a time, so the daemon's open
 * descriptors do not grow with load.
 *
 * libcurl gives an easy handle its own internal multi handle, with a wake-up
 * socket pair, the first time it performs, and keeps it (and the handle's
 * kept-alive connections) until the handle is freed. A pool therefore
 * creates every handle at start and primes it (one perform without a URL,
 * which fails before any I/O) so those socket pairs exist from the start,
 * caps each handle at one cached connection, and lends the handle returned
 * longest ago first: under load every handle's connection is warm after the
 * pool's first `size` requests and the descriptor count stays put. A
 * borrower waits while all handles are lent; size the pool to the number of
 * threads that may borrow at once. Thread-safe. */
#ifndef FPS_CURL_POOL_H
#define FPS_CURL_POOL_H
#include <curl/curl.h>

typedef struct curl_pool curl_pool;

/* `size` primed handles (1..256); NULL when libcurl cannot create them. */
curl_pool *curl_pool_new(int size);
/* Frees the pool and its handles (none may be lent). NULL is a no-op. */
void curl_pool_free(curl_pool *p);
/* A handle reset to libcurl's defaults but for NOSIGNAL and the one-cached-
 * connection cap (its connection and caches kept), lent to the caller until
 * curl_pool_put. Waits while every handle is lent. */
CURL *curl_pool_get(curl_pool *p);
/* Returns a handle from curl_pool_get. Options pointing at the borrower's
 * buffers must not be used again: the next borrower's reset clears them. */
void curl_pool_put(curl_pool *p, CURL *h);
/* Closes the kept-alive connections of the handles not lent (each is
 * replaced by a new primed handle: same descriptor count but for the
 * connections). For a client gone idle. */
void curl_pool_close_idle(curl_pool *p);

#endif
