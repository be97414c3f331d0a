/* api/gate: the browser hardening's checks on a request's headers: the Host
 * allowlist (loopback names, --listen's host, --admin-host), same-origin
 * Origin, the JSON rule of state-changing requests (Content-Type JSON, or
 * no body beside an Authorization header), and the bearer token it
 * presents. */
#include "api/internal.h"
#include "common/loopback.h"

#include <string.h>
#include <strings.h>

int api_is_state_changing(const char *method)
{
    return !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "DELETE") ||
           !strcmp(method, "PATCH");
}

/* common/loopback's rule, plus the absolute name "localhost.", which a Host
 * header or --listen may carry (both bind or answer on 127.0.0.1 here; no
 * resolver is asked). */
int api_name_is_loopback(const char *h)
{
    return loopback_host(h) || !strcasecmp(h, "localhost.");
}

/* Splits a Host/authority value into its host name (brackets removed).
 * Returns 0, or -1 if malformed. */
static int authority_host(const char *v, char *out, size_t cap)
{
    size_t n;
    const char *rest;
    if (v == NULL || *v == '\0') return -1;
    if (*v == '[') {
        const char *e = strchr(v, ']');
        if (e == NULL) return -1;
        n = (size_t)(e - v - 1);
        v++;
        rest = e + 1;
    } else {
        n = strcspn(v, ":");
        rest = v + n;
    }
    if (n == 0 || n >= cap) return -1;
    if (*rest == ':') {
        rest++;
        if (*rest == '\0' || strspn(rest, "0123456789") != strlen(rest) || strlen(rest) > 5)
            return -1;
    } else if (*rest != '\0') {
        return -1;
    }
    memcpy(out, v, n);
    out[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] <= 0x20 || out[i] == '/' || out[i] == '@') return -1;
    return 0;
}

int api_host_allowed(api_server *srv, const char *hostval)
{
    char h[256];
    if (authority_host(hostval, h, sizeof h) != 0) return 0;
    if (api_name_is_loopback(h)) return 1;
    if (srv->listen_host[0] && !strcasecmp(h, srv->listen_host) && strcmp(h, "0.0.0.0") &&
        strcmp(h, "::"))
        return 1;
    const cli_list *l = srv->deps.cfg.admin_hosts;
    for (size_t i = 0; l != NULL && i < l->len; i++)
        if (!strcasecmp(h, l->items[i])) return 1;
    return 0;
}

/* Same-origin: Origin must be http(s)://<the request's Host>. */
int api_origin_ok(const char *origin, const char *hostval)
{
    if (origin == NULL) return 1;
    const char *auth;
    if (!strncasecmp(origin, "http://", 7))
        auth = origin + 7;
    else if (!strncasecmp(origin, "https://", 8))
        auth = origin + 8;
    else
        return 0; /* "null", file://, chrome-extension://, ... */
    if (hostval == NULL) return 0;
    size_t n = strlen(auth);
    if (n > 0 && auth[n - 1] == '/') n--;
    return n == strlen(hostval) && strncasecmp(auth, hostval, n) == 0;
}

static int content_type_json(const char *ct)
{
    if (ct == NULL) return 0;
    while (*ct == ' ')
        ct++;
    if (strncasecmp(ct, "application/json", 16) != 0) return 0;
    const char *p = ct + 16;
    while (*p == ' ')
        p++;
    if (*p == '\0') return 1;
    if (*p != ';') return 0;
    p++;
    while (*p == ' ')
        p++;
    if (*p == '\0') return 1;
    if (strncasecmp(p, "charset=", 8) == 0) {
        p += 8;
        if (*p == '"') p++;
        return strncasecmp(p, "utf-8", 5) == 0 || strncasecmp(p, "utf8", 4) == 0;
    }
    return 0;
}

/* The JSON rule keeps a browser's simple cross-site requests (forms,
 * text/plain) out. A request carrying an Authorization header cannot
 * be one (a cross-origin custom header needs a preflight, which is
 * refused), so such a request may have no body at all; a body it has
 * must still be JSON. Its token is checked next, in authorize. */
int api_json_rule_ok(struct MHD_Connection *conn)
{
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    const char *clen = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
    int bodiless = te == NULL && (clen == NULL || strcmp(clen, "0") == 0);
    return (authz != NULL && bodiless) || content_type_json(ct);
}

/* The bearer token of the request, or NULL. */
const char *api_bearer(struct MHD_Connection *conn)
{
    const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (a == NULL || strncasecmp(a, "Bearer ", 7) != 0) return NULL;
    a += 7;
    while (*a == ' ')
        a++;
    return a;
}
