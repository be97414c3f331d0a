/* common/loopback: what "loopback" means, decided on addresses rather than
 * text. A host is loopback when it parses (inet_pton) as an address in
 * 127.0.0.0/8 or as ::1, or is the literal name "localhost", which callers
 * pin to 127.0.0.1 with CURLOPT_RESOLVE so that no resolver (search domains,
 * /etc/hosts, DNS) ever decides where a loopback-only credential goes.
 * Shared by the --server rule, the evaluator endpoint rule and the admin
 * API's Host check, so the three never disagree. */
#ifndef FPS_LOOPBACK_H
#define FPS_LOOPBACK_H
#include <stddef.h>

/* The host's first `*len` bytes without an IPv6 literal's brackets: for
 * "[v6]" returns host + 1 with *len reduced by 2, else host, *len as is.
 * Borrowed: points into host; not NUL-terminated where it ends early. */
const char *loopback_unbracket(const char *host, size_t *len);
/* 1 if host (no brackets, no port; "[::1]" is accepted too) is loopback. */
int loopback_host(const char *host);
/* 1 if host is the name localhost (any case), which needs pinning. */
int loopback_is_name(const char *host);
/* The CURLOPT_RESOLVE entry pinning localhost:port to 127.0.0.1
 * ("localhost:PORT:127.0.0.1"), written into out. Returns 0, or -1 if cap
 * is too small. */
int loopback_pin_entry(const char *host, int port, char *out, size_t cap);

#endif
