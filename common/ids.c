/* common/ids: see ids.h. */
#include "common/ids.h"

#include <nettle/sha2.h>
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

void ids_request_id(char out[33])
{
    uuid_t u;
    uuid_generate_random(u);
    hex(u, sizeof u, out);
}

void ids_uuid(char out[37])
{
    uuid_t u;
    uuid_generate_random(u);
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
