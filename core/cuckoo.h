/*
 * cuckoo.h - Cuckoo filter with RedisBloom's CF.* semantics, plus a choice
 * of 8, 12 or 16-bit fingerprints.
 *
 * A cuckoo filter (Fan, Andersen, Kaminsky, Mitzenmacher, "Cuckoo Filter:
 * Practically Better Than Bloom", CoNEXT 2014) stores a short fingerprint of
 * each item in one of two candidate buckets of `bucket_size` slots:
 *
 *     h  = MurmurHash64A(item, seed 0)
 *     fp = (h >> 32) mod (2^f - 1) + 1             (never 0: 0 marks a free slot)
 *     i1 = h mod buckets,  i2 = i1 XOR (fp * 0x5bd1e995) mod buckets
 *
 * Because `buckets` is a power of two, i1 = alt(i2, fp) too, so an entry can
 * move between its two buckets knowing only its fingerprint.  An insert that
 * finds both buckets full evicts a resident fingerprint to its other bucket,
 * up to `max_iterations` times ("cuckoo hashing"); which slot is evicted is
 * chosen by a xoshiro256** generator seeded from the key and kept in the
 * encoding, so journal replay and snapshot reload make exactly the same
 * choices.  A failed eviction chain is undone.  When the newest sub-filter
 * cannot take an item, a new one with `expansion` times the buckets is added
 * (RedisBloom: at most 32 sub-filters, expansion rounded up to a power of two,
 * 0 = never grow); with no room left the add fails with CUCKOO_FULL, never
 * loops.
 *
 * False positive rate: a lookup compares 2 * bucket_size fingerprints per
 * sub-filter, each matching with probability 1/(2^f - 1):
 *
 *     FPR ~ 2 * b * filters / (2^f - 1)      b=2: f=8 1.6%, f=12 0.1%, f=16 0.006%
 *
 * Deleting removes one copy of the item's fingerprint from one of its
 * buckets, so adding an item twice and deleting it once leaves it present,
 * and deleting an item that was added never removes a different item's
 * presence (each add stored its own copy).  As in RedisBloom, deleting an item
 * that was never added may remove a colliding item's fingerprint.
 *
 * Memory: buckets * bucket_size * f / 8 bytes per sub-filter (12-bit
 * fingerprints packed two per three bytes).  Capacity 1e6, b=2:
 * f=8 1 MiB, f=12 1.5 MiB, f=16 2 MiB.  Expected fill before the first
 * failure: ~84% at b=2, ~95% at b=4.
 *
 * Keyspace encoding (version 1):
 *   u8 version | u8 fp_bits | u16 bucket_size | u16 max_iterations |
 *   u16 expansion | u64 capacity | u64 items | u64 deletes | 4 x u64 rng |
 *   u8 filters | each sub-filter's slot bytes
 * Bucket counts follow from (capacity, bucket_size, expansion, index); decode
 * checks array lengths, the unused padding bits and that `items` equals the
 * number of occupied slots.
 */
#ifndef TALLY_CUCKOO_H
#define TALLY_CUCKOO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/types.h"

#define CUCKOO_DEFAULT_CAPACITY 1024      /* RedisBloom's CF.ADD auto-create size */
#define CUCKOO_DEFAULT_BUCKET_SIZE 2
#define CUCKOO_DEFAULT_MAX_ITERATIONS 20
#define CUCKOO_DEFAULT_EXPANSION 1
#define CUCKOO_DEFAULT_FP_BITS 8          /* RedisBloom's only size */
#define CUCKOO_MAX_FILTERS 32             /* RedisBloom: "can grow up to 32 times" */
#define CUCKOO_MAX_BUCKET_SIZE 255
#define CUCKOO_MAX_ITERATIONS 65535
#define CUCKOO_MAX_EXPANSION 32768
#define CUCKOO_MAX_CAPACITY (1ULL << 32)
#define CUCKOO_MAX_FILTER_BYTES (1ULL << 30)  /* one sub-filter, 1 GiB */

typedef struct cuckoo cuckoo_t;

extern const ks_type_t cuckoo_type;

typedef struct cuckoo_params {
    uint64_t capacity;
    uint32_t bucket_size;
    uint32_t max_iterations;
    uint32_t expansion;
    uint32_t fp_bits;
} cuckoo_params_t;

/* Results of cuckoo_add. */
enum {
    CUCKOO_ADDED = 1,
    CUCKOO_EXISTS = 0,      /* nx and the item may be present: nothing changed */
    CUCKOO_NOMEM = CORE_NOMEM,
    CUCKOO_FULL = CORE_FULL,    /* no slot, and no sub-filter can be added */
};

/* Why parameters are refused, or NULL; *field names the culprit.  capacity
 * >= 2 * bucket_size (RedisBloom) and <= 2^32, bucket_size 1..255,
 * max_iterations 1..65535, expansion 0..32768, fp_bits 8/12/16, first
 * sub-filter <= 1 GiB. */
const char *cuckoo_validate(const cuckoo_params_t *p, const char **field);

/* A new empty filter; `seed` seeds the eviction choices (the API derives it
 * from the key).  NULL on allocation failure. */
cuckoo_t *cuckoo_create(const cuckoo_params_t *p, uint64_t seed);
void cuckoo_free(cuckoo_t *c);

/* Undo log for a batch (see bloom.h): a failed batch is rolled back whole. */
typedef struct cuckoo_undo cuckoo_undo_t;
cuckoo_undo_t *cuckoo_undo_begin(const cuckoo_t *c);
void cuckoo_undo_rollback(cuckoo_t *c, cuckoo_undo_t *u);
void cuckoo_undo_commit(cuckoo_undo_t *u);

/* CF.ADD (nx false: duplicates allowed) / CF.ADDNX (nx true).  On NOMEM or
 * FULL the filter is unchanged by this item.  `undo` may be NULL. */
int cuckoo_add(cuckoo_t *c, const void *item, size_t len, bool nx, cuckoo_undo_t *undo);
/* CF.EXISTS */
bool cuckoo_check(const cuckoo_t *c, const void *item, size_t len);
/* CF.COUNT: copies of the item's fingerprint in its buckets (may overcount). */
uint64_t cuckoo_count(const cuckoo_t *c, const void *item, size_t len);
/* CF.DEL: removes one copy; false if the fingerprint is not there.
 * `undo` may be NULL. */
bool cuckoo_delete(cuckoo_t *c, const void *item, size_t len, cuckoo_undo_t *undo);

/* CF.INFO */
typedef struct cuckoo_info {
    uint64_t size_bytes;
    uint64_t buckets;         /* all sub-filters */
    uint32_t filters;
    uint64_t items;
    uint64_t deletes;
    uint64_t capacity;        /* as configured */
    uint32_t bucket_size, max_iterations, expansion, fp_bits;
} cuckoo_info_t;
void cuckoo_get_info(const cuckoo_t *c, cuckoo_info_t *out);

size_t cuckoo_memory(const cuckoo_t *c);

#endif
