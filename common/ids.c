/* common/ids: see ids.h. */
#include "common/ids.h"

#include <nettle/sha2.h>
#include <string.h>
#include <sys/random.h>
#include <uuid/uuid.h>

static void hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* A random version-4 UUID. The bytes come from a per-thread pool that
 * getrandom refills 256 bytes at a time: one system call per 16 ids, where
 * uuid_generate_random makes one per id (ids are not secrets). */
static void random_uuid(uuid_t u)
{
    static _Thread_local unsigned char pool[256];
    static _Thread_local size_t used = sizeof pool;
    if (used + sizeof(uuid_t) > sizeof pool) {
        if (getrandom(pool, sizeof pool, 0) != (ssize_t)sizeof pool) {
            uuid_generate_random(u);
            return;
        }
        used = 0;
    }
    memcpy(u, pool + used, sizeof(uuid_t));
    used += sizeof(uuid_t);
    u[6] = (unsigned char)((u[6] & 0x0f) | 0x40); /* version 4 */
    u[8] = (unsigned char)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

void ids_request_id(char out[33])
{
    uuid_t u;
    random_uuid(u);
    hex(u, sizeof u, out);
}

void ids_uuid(char out[37])
{
    uuid_t u;
    random_uuid(u);
    uuid_unparse_lower(u, out);
}

void ids_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[SHA256_DIGEST_SIZE];
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    sha256_digest(&ctx, sizeof md, md);
    hex(md, sizeof md, out);
}
