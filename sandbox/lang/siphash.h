/* sandbox/lang/siphash: SipHash-c-d (Aumasson and Bernstein), the keyed hash
 * behind the language's str/bytes hash(), as CPython 3.11 uses SipHash-1-3.
 * The key is per process and random (siphash_seed), so which strings
 * collide in a dict or set cannot be computed in advance by whoever writes
 * a session's text. Written against the reference test vectors
 * (tests/unit/test_lang_values.c); Debian packages no C library for it. */
#ifndef FPS_SIPHASH_H
#define FPS_SIPHASH_H
#include <stddef.h>
#include <stdint.h>

/* SipHash with `crounds` compression and `drounds` finalisation rounds of
 * the 16-byte key (k0, k1 as little-endian words of the key bytes). */
uint64_t siphash(int crounds, int drounds, uint64_t k0, uint64_t k1, const void *data, size_t len);

/* SipHash-1-3 of `data` under the process's key. */
uint64_t siphash_keyed13(const void *data, size_t len);

/* Draws a fresh random key (getrandom). Call it where the system call is
 * still allowed: the jail calls it in each child before loading seccomp;
 * the first evaluation context calls it when nothing has yet. 0, or -1 when
 * no randomness was available (the key then mixes the clock and
 * addresses). */
int siphash_seed(void);
/* Sets the key (tests). */
void siphash_set_key(uint64_t k0, uint64_t k1);
/* 1 once a key is in place. */
int siphash_seeded(void);

#endif
