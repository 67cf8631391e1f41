/* hash.c - see hash.h. */
#include "core/hash.h"

#include <xxhash.h>

#include "core/codec.h"

uint64_t murmur64a(const void *key, size_t len, uint64_t seed)
{
    const uint64_t m = 0xc6a4a7935bd1e995ULL;   /* the algorithm's multiplier */
    const int r = 47;                            /* and its shift */
    const uint8_t *p = key;
    uint64_t h = seed ^ ((uint64_t)len * m);
    size_t blocks = len / 8;

    for (size_t i = 0; i < blocks; i++, p += 8) {
        uint64_t k = le64_load(p);
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
    }
    switch (len & 7) {
    case 7: h ^= (uint64_t)p[6] << 48; /* fall through */
    case 6: h ^= (uint64_t)p[5] << 40; /* fall through */
    case 5: h ^= (uint64_t)p[4] << 32; /* fall through */
    case 4: h ^= (uint64_t)p[3] << 24; /* fall through */
    case 3: h ^= (uint64_t)p[2] << 16; /* fall through */
    case 2: h ^= (uint64_t)p[1] << 8;  /* fall through */
    case 1: h ^= (uint64_t)p[0];
            h *= m;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

uint32_t murmur2(const void *key, size_t len, uint32_t seed)
{
    const uint32_t m = 0x5bd1e995;   /* the algorithm's multiplier */
    const int r = 24;                /* and its shift */
    const uint8_t *p = key;
    uint32_t h = seed ^ (uint32_t)len;

    while (len >= 4) {
        uint32_t k = le32_load(p);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
        p += 4;
        len -= 4;
    }
    switch (len) {
    case 3: h ^= (uint32_t)p[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)p[1] << 8;  /* fall through */
    case 1: h ^= p[0];
            h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

uint64_t tally_xxh64(const void *p, size_t len, uint64_t seed)
{
    return XXH64(p, len, seed);
}
