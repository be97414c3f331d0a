/* sandbox/lang/siphash: SipHash-c-d and the process's hash key (siphash.h). */
#include "sandbox/lang/siphash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

static uint64_t g_k0, g_k1;
static int g_seeded;

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static inline void sipround(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = ROTL(v[1], 13);
    v[1] ^= v[0];
    v[0] = ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = ROTL(v[3], 16);
    v[3] ^= v[2];
    v[0] += v[3];
    v[3] = ROTL(v[3], 21);
    v[3] ^= v[0];
    v[2] += v[1];
    v[1] = ROTL(v[1], 17);
    v[1] ^= v[2];
    v[2] = ROTL(v[2], 32);
}

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof x); /* one load; the words are little-endian */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x;
}

/* The body, inlined with constant round counts where they are known, so
 * the rounds unroll (str hashing is on every dict and set key's path). */
static inline __attribute__((always_inline)) uint64_t sip(int crounds, int drounds, uint64_t k0,
                                                          uint64_t k1, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = load_le64(p + i);
        v[3] ^= m;
        for (int r = 0; r < crounds; r++)
            sipround(v);
        v[0] ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++)
        b |= (uint64_t)p[whole + i] << (8 * i);
    v[3] ^= b;
    for (int r = 0; r < crounds; r++)
        sipround(v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for (int r = 0; r < drounds; r++)
        sipround(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint64_t siphash(int crounds, int drounds, uint64_t k0, uint64_t k1, const void *data, size_t len)
{
    return sip(crounds, drounds, k0, k1, data, len);
}

uint64_t siphash_keyed13(const void *data, size_t len)
{
    if (!g_seeded) siphash_seed();
    return sip(1, 3, g_k0, g_k1, data, len);
}

void siphash_set_key(uint64_t k0, uint64_t k1)
{
    g_k0 = k0;
    g_k1 = k1;
    g_seeded = 1;
}

int siphash_seeded(void)
{
    return g_seeded;
}

int siphash_seed(void)
{
    unsigned char key[16];
    size_t got = 0;
    while (got < sizeof key) {
        ssize_t n = getrandom(key + got, sizeof key - got, 0);
        if (n <= 0) break;
        got += (size_t)n;
    }
    int rc = 0;
    if (got < sizeof key) {
        /* No randomness: still differ per process and per run. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t mix[2] = {(uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32),
                           (uint64_t)(uintptr_t)&got ^ (uint64_t)(uintptr_t)&g_k0};
        memcpy(key, mix, sizeof key);
        rc = -1;
    }
    siphash_set_key(load_le64(key), load_le64(key + 8));
    return rc;
}
