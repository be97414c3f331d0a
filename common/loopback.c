/* common/loopback: see loopback.h. */
#include "common/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int loopback_is_name(const char *host)
{
    return host != NULL && strcasecmp(host, "localhost") == 0;
}

const char *loopback_unbracket(const char *host, size_t *len)
{
    if (*len >= 2 && host[0] == '[' && host[*len - 1] == ']') {
        *len -= 2;
        return host + 1;
    }
    return host;
}

int loopback_host(const char *host)
{
    if (host == NULL) return 0;
    if (loopback_is_name(host)) return 1;
    char buf[64];
    size_t n = strlen(host);
    const char *bare = loopback_unbracket(host, &n);
    if (bare != host) {
        if (n >= sizeof buf) return 0;
        memcpy(buf, bare, n);
        buf[n] = '\0';
        host = buf;
    }
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

int loopback_pin_entry(const char *host, int port, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s:%d:127.0.0.1", host, port);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}
