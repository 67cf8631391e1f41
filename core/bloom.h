/*
 * bloom.h - scalable Bloom filter with RedisBloom's BF.* semantics.
 *
 * A Bloom filter (Bloom, 1970) answers "maybe present" / "certainly absent"
 * from a bit array: an item sets k bits; a lookup that finds all k set says
 * "maybe".  For n items in m bits with k = ln2 * m/n hashes the false
 * positive rate is p ~ (1 - e^(-kn/m))^k, so for a target p each item needs
 *
 *     bits per item  bpe = -ln(p) / ln(2)^2     (1% -> 9.59, 0.1% -> 14.4)
 *     hashes         k   = ceil(ln(2) * bpe)    (1% -> 7,    0.1% -> 10)
 *
 * Scaling (Almeida et al., "Scalable Bloom Filters", 2007), as RedisBloom
 * does it: a filter is a chain of sub-filters.  The first is sized for
 * `capacity` items at error * 0.5; when the newest is full (its item count
 * reached its capacity) a new one is added with capacity * expansion and
 * half the previous error, so the compound rate stays below
 * error * (0.5 + 0.25 + ...) < error.  A non-scaling filter has one
 * sub-filter at the full error and refuses items once full.
 *
 * Hashing is RedisBloom's: h1 = MurmurHash64A(item, seed 0xc6a4a7935bd1e995),
 * h2 = MurmurHash64A(item, seed h1); probe i tests bit (h1 + i*h2) mod bits,
 * bit x being (byte x/8, mask 1 << x%8).  A sub-filter has bits =
 * floor(capacity * bpe) rounded up to a multiple of 64, hence even; so one
 * change: h2 is forced odd.  With an even step the k probes stay in one
 * residue class and the measured rate of RedisBloom's defaults grown 100x
 * was 0.0101 (> the configured 0.01); with an odd step it is 0.0087, the
 * theoretical 0.0088.
 *
 * An add first checks every sub-filter (newest first): "maybe present" adds
 * nothing and answers false, exactly BF.ADD's 0.
 *
 * Memory (one sub-filter): capacity 1e6 at 1% -> 1.2 MB; at 0.1% -> 1.8 MB.
 *
 * Keyspace encoding (version 1):
 *   u8 version | u8 flags (bit 0 scaling) | u32 expansion | f64 error |
 *   u64 capacity | u32 nfilters | nfilters x (u64 items | bit array bytes)
 * The geometry of every sub-filter follows from (error, capacity,
 * expansion, index), so it is recomputed, not stored, and decode checks the
 * array lengths against it.
 */
#ifndef TALLY_BLOOM_H
#define TALLY_BLOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/types.h"

#define BLOOM_DEFAULT_ERROR 0.01          /* RedisBloom's BF.ADD defaults */
#define BLOOM_DEFAULT_CAPACITY 100
#define BLOOM_DEFAULT_EXPANSION 2
#define BLOOM_MAX_CAPACITY 4294967294ULL  /* RedisBloom refuses >= UINT32_MAX */
#define BLOOM_MAX_EXPANSION 32768         /* keeps capacity * expansion^k in range for long */
#define BLOOM_MAX_FILTERS 128             /* sub-filters; beyond, the filter is full */
#define BLOOM_MAX_FILTER_BYTES (1ULL << 30)   /* one sub-filter's bit array, 1 GiB */

typedef struct bloom bloom_t;

extern const ks_type_t bloom_type;

/* Results of bloom_add. */
enum {
    BLOOM_ADDED = 1,        /* new: some bit was clear */
    BLOOM_PRESENT = 0,      /* maybe present already: nothing changed */
    BLOOM_NOMEM = CORE_NOMEM,   /* allocation failed */
    BLOOM_FULL = CORE_FULL,     /* non-scaling and full, or no more sub-filters allowed */
};

/* Why parameters are refused, or NULL if they are fine: the error rate must
 * be in (0, 1), capacity 1..BLOOM_MAX_CAPACITY, expansion
 * 1..BLOOM_MAX_EXPANSION, and the first sub-filter must fit in
 * BLOOM_MAX_FILTER_BYTES.  *field names the culprit. */
const char *bloom_validate(double error, uint64_t capacity, uint32_t expansion, const char **field);

/* A new empty filter (parameters validated); NULL on allocation failure. */
bloom_t *bloom_create(double error, uint64_t capacity, uint32_t expansion, bool scaling);
void bloom_free(bloom_t *b);

/* Undo log for a batch: every byte an add changes is recorded, so that a
 * batch that fails part-way is rolled back and changes nothing. */
typedef struct bloom_undo bloom_undo_t;
bloom_undo_t *bloom_undo_begin(const bloom_t *b);
/* Restores the state of bloom_undo_begin and frees the log. */
void bloom_undo_rollback(bloom_t *b, bloom_undo_t *u);
/* Keeps the changes and frees the log. */
void bloom_undo_commit(bloom_undo_t *u);

/* BF.ADD: one of BLOOM_ADDED / PRESENT / NOMEM / FULL.  On NOMEM or FULL
 * the filter is unchanged by this item.  `undo` may be NULL. */
int bloom_add(bloom_t *b, const void *item, size_t len, bloom_undo_t *undo);
/* BF.EXISTS. */
bool bloom_check(const bloom_t *b, const void *item, size_t len);

/* BF.INFO */
typedef struct bloom_info {
    uint64_t capacity;      /* sum of the sub-filters' capacities */
    uint64_t size_bytes;    /* bit arrays plus bookkeeping */
    uint64_t bits;          /* bits in all bit arrays */
    uint32_t filters;
    uint64_t items;
    uint32_t expansion;
    bool scaling;
    double error_rate;      /* as configured */
    uint32_t hashes;        /* of the newest sub-filter */
} bloom_info_t;
void bloom_get_info(const bloom_t *b, bloom_info_t *out);

size_t bloom_memory(const bloom_t *b);

#endif
