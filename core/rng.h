/*
 * rng.h - a small, seeded, platform-independent random generator.
 *
 * core/ never calls rand() or reads a clock: a structure that needs randomness
 * (Top-K decay, keyspace sampling) owns an rng_t seeded from something
 * deterministic (the key, its history), so that journal replay and snapshot
 * reload reproduce exactly the same state.  Tests use it too, so a seed names
 * a reproducible input on every machine.
 *
 * Generator: xoshiro256** (Blackman & Vigna), state expanded from a 64-bit
 * seed with splitmix64.  Period 2^256 - 1; the state is 32 bytes and is what a
 * structure encodes when it snapshots its randomness.
 */
#ifndef TALLY_RNG_H
#define TALLY_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
} rng_t;

static inline uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void rng_seed(rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix64(&seed);
}

static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* Next 64 uniformly random bits. */
static inline uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double rng_double(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [0, n) (n > 0), without modulo bias (Lemire). */
static inline uint64_t rng_below(rng_t *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = -n % n;
        while (lo < t) {
            m = (unsigned __int128)rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

#endif
