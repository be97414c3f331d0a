/* common/ids: see ids.h. */
#include "common/ids.h"

#include <openssl/evp.h>
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
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    hex(md, 32, out);
}
