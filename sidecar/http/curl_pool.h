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
 * threads that may borrow at once. Thread-safe.
 *
 * The options every request of one client shares are set once per handle,
 * by the client's setup function, when the handle is created; a handle is
 * never reset between borrowers (a reset and twenty options again cost more
 * than the options that change). So a borrower sets, on every request, each
 * option any of its requests sets (URL, headers, body or method, timeouts,
 * the WRITEDATA-style pointers into its own buffers). */
#ifndef FPS_CURL_POOL_H
#define FPS_CURL_POOL_H
#include <curl/curl.h>

typedef struct curl_pool curl_pool;

/* Sets the client's constant options on a new handle; `arg` is borrowed and
 * must outlive the pool. */
typedef void (*curl_pool_setup)(CURL *h, void *arg);

/* `size` primed handles (1..256), each given `setup(h, arg)` (NOSIGNAL and
 * the one-cached-connection cap are set already); NULL when libcurl cannot
 * create them. */
curl_pool *curl_pool_new(int size, curl_pool_setup setup, void *arg);
/* Frees the pool and its handles (none may be lent). NULL is a no-op. */
void curl_pool_free(curl_pool *p);
/* A handle with the client's constant options and whatever per-request
 * options its last borrower set (its connection and caches kept), lent to
 * the caller until curl_pool_put. Waits while every handle is lent. */
CURL *curl_pool_get(curl_pool *p);
/* Returns a handle from curl_pool_get. Its header list is unset here, so the
 * borrower may free the list once this returns; other options pointing at
 * the borrower's buffers stay set but unused until the next borrower sets its
 * own. */
void curl_pool_put(curl_pool *p, CURL *h);
/* Closes the kept-alive connections of the handles not lent (each is
 * replaced by a new primed handle: same descriptor count but for the
 * connections). For a client gone idle. */
void curl_pool_close_idle(curl_pool *p);

#endif
