/*
 * hash.h - the hash functions whose exact output tally must reproduce.
 *
 * MurmurHash64A and MurmurHash2 are Austin Appleby's public-domain hashes.
 * Redis hashes HyperLogLog elements with MurmurHash64A (seed 0xadc83b19);
 * RedisBloom uses MurmurHash64A for Bloom/Cuckoo and MurmurHash2 for
 * Count-Min and Top-K.  Matching their answers bit for bit requires the same
 * functions, reading blocks as little-endian words on every platform.
 *
 * xxh64() (from libxxhash) is what tally uses where no reference dictates a
 * hash: the keyspace, checksums of snapshot and journal records.
 */
#ifndef TALLY_HASH_H
#define TALLY_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t murmur64a(const void *key, size_t len, uint64_t seed);
uint32_t murmur2(const void *key, size_t len, uint32_t seed);

/* xxHash64 over a byte range; used for keyspace hashing and checksums. */
uint64_t tally_xxh64(const void *p, size_t len, uint64_t seed);

#endif
