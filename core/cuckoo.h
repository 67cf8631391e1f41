/*
 * cuckoo.h - Cuckoo filter with RedisBloom's CF.* semantics, plus a choice
 * of 8, 12 or 16-bit fingerprints.
 *
 * A cuckoo filter (Fan, Andersen, Kaminsky, Mitzenmacher, "Cuckoo Filter:
 * Practically Better Than Bloom", CoNEXT 2014) stores a short fingerprint of
 * each item in one of two candidate buckets of `bucket_size` slots:
 *
 *     h  = MurmurHash64A(item, seed 0)
 *     fp = h mod (2^f - 1) + 1                     (never 0: 0 marks a free slot)
 *     i1 = h mod buckets,  i2 = i1 XOR (fp * 0x5bd1e995) mod buckets
 *
 * Because `buckets` is a power of two, i1 = alt(i2, fp) too, so an entry can
 * move between its two buckets knowing only its fingerprint.  The first
 * sub-filter has next_pow2(capacity / bucket_size) buckets.  An insert takes
 * the first free slot of i1, then of i2, in the newest sub-filter that has
 * one (newest first); if none has, it evicts in the newest sub-filter, as
 * RedisBloom's Filter_KOInsert does: put the fingerprint in slot 0 of
 * bucket i1, move the evicted one to its other bucket, and so on, taking
 * slot 1, 2, ... (mod bucket_size) at each step, up to `max_iterations`
 * times ("cuckoo hashing").  A failed eviction chain is undone.  Then a new
 * sub-filter with `expansion` times the buckets of the previous one is added
 * (expansion rounded up to a power of two; 0 = never grow, the add fails with
 * CUCKOO_FULL, "Filter is full").  A filter that already has 32 sub-filters
 * refuses every add (CUCKOO_MAXEXP, RedisBloom's "Maximum expansions
 * reached"; RedisBloom checks once per command, so one CF.INSERT may take a
 * filter past 32: here each item is checked, and a batch that would need a
 * 33rd sub-filter is refused).  So with 8-bit fingerprints the same adds
 * give RedisBloom's buckets, filters and slots, byte for byte.
 *
 * Deletion (CF.DEL) frees one copy of the fingerprint, newest sub-filter
 * first; once the deletes since the last compaction pass 10% of the items
 * and there is more than one sub-filter, the filter is compacted as
 * RedisBloom does it (CF.COMPACT, cuckoo_compact): from the newest
 * sub-filter down, every fingerprint that finds a free slot in one of its
 * buckets of an older sub-filter moves there; an emptied newest sub-filter
 * is freed (automatic compaction stops at the first sub-filter it cannot
 * empty, CF.COMPACT goes on).
 *
 * Generation 1 (filters created before issue 18 and replayed from journal
 * version 1, core/types.h; encoding version 1) keeps its rules: fp = (h >>
 * 32) mod (2^f - 1) + 1; evictions start from a random one of the two buckets
 * and take random slots, from a xoshiro256** generator seeded from the key
 * and kept in the encoding; growth stops at 32 sub-filters (CUCKOO_FULL); no
 * compaction.
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
 * CF.COUNT differs on purpose: when an item's two buckets are the same one
 * RedisBloom counts its copies twice; here once.
 *
 * CF.SCANDUMP / CF.LOADCHUNK format (RedisBloom's, 8-bit fingerprints only),
 * little-endian, packed:
 *   header chunk (cursor 1): u64 items | u64 buckets of the first sub-filter |
 *     u64 deletes | u64 filters | u16 bucket_size | u16 max_iterations |
 *     u16 expansion                                              (38 bytes)
 *   data chunks: the sub-filters' slot arrays (bucket by bucket), cut as for
 *   Bloom (bloom.h): SCANDUMP at cursor c >= 1 answers the bytes from offset
 *   c - 1 and the cursor c + length; LOADCHUNK writes a chunk at offset
 *   cursor - length - 1.
 *
 * CF.INFO's Size is RedisBloom's accounting: 40 + 16 per sub-filter + the
 * slot arrays (1080 for CF.RESERVE 1000); generation 1 reports its heap use.
 *
 * Keyspace encoding (version 2; version 1 is the same layout for a
 * generation-1 filter):
 *   u8 version | u8 fp_bits | u16 bucket_size | u16 max_iterations |
 *   u16 expansion | u64 capacity | u64 items | u64 deletes | 4 x u64 rng |
 *   u8 filters | each sub-filter's slot bytes
 * Bucket counts follow from (capacity, bucket_size, expansion, index); decode
 * checks array lengths, the unused padding bits and, for generation 1, that
 * `items` equals the number of occupied slots (a filter loaded from a
 * RedisBloom dump keeps the count the dump carried).
 */
#ifndef TALLY_CUCKOO_H
#define TALLY_CUCKOO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/types.h"

/* The on-disk tag of Cuckoo filter values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_CUCKOO = 5 };

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
#define CUCKOO_MAX_BUCKETS (1ULL << 32)       /* of one sub-filter: the first of CUCKOO_MAX_CAPACITY at bucket size 1
                                                 (RedisBloom's largest reservation, 2^30, reaches it growing) */
#define CUCKOO_MAX_GROW_BYTES (1ULL << 30)    /* a sub-filter a filter grows here takes at most 1 GiB */

typedef struct cuckoo cuckoo_t;

extern const ks_type_t cuckoo_type;
extern const ks_dump_ops_t cuckoo_dump_ops;   /* the dump functions below, on void * */

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
    CUCKOO_MAXEXP = CORE_LIMIT, /* already 32 sub-filters ("Maximum expansions reached") */
    CUCKOO_BUDGET = CORE_BUDGET, /* the next sub-filter would take the filter past max_bytes */
};

/* Why parameters are refused, or NULL; *field names the culprit.  capacity
 * >= 2 * bucket_size (RedisBloom) and <= 2^32, bucket_size 1..255,
 * max_iterations 1..65535, expansion 0..32768, fp_bits 8/12/16, the first
 * sub-filter's slots within max_bytes (0: no limit). */
const char *cuckoo_validate(const cuckoo_params_t *p, uint64_t max_bytes, const char **field);

/* A new empty filter; `seed` seeds the eviction choices (the API derives it
 * from the key).  NULL on allocation failure. */
cuckoo_t *cuckoo_create(const cuckoo_params_t *p, uint64_t seed);
/* The same with the rules of generation `gen` (TALLY_GEN_*). */
cuckoo_t *cuckoo_create_gen(unsigned gen, const cuckoo_params_t *p, uint64_t seed);
void cuckoo_free(cuckoo_t *c);

/* Undo log for a batch (see bloom.h): a failed batch is rolled back whole. */
typedef struct cuckoo_undo cuckoo_undo_t;
cuckoo_undo_t *cuckoo_undo_begin(const cuckoo_t *c);
void cuckoo_undo_rollback(cuckoo_t *c, cuckoo_undo_t *u);
void cuckoo_undo_commit(cuckoo_undo_t *u);

/* CF.ADD (nx false: duplicates allowed) / CF.ADDNX (nx true).  On NOMEM,
 * FULL or MAXEXP the filter is unchanged by this item.  `undo` may be NULL. */
int cuckoo_add(cuckoo_t *c, const void *item, size_t len, bool nx, cuckoo_undo_t *undo);
/* cuckoo_add, adding a sub-filter only if cuckoo_memory then stays at most
 * max_bytes (0 = no limit): CUCKOO_BUDGET otherwise (nothing changed by this
 * item), and cuckoo_next_filter_bytes tells what the sub-filter would add,
 * so the caller can make room (or refuse the size) and try again. */
int cuckoo_add_within(cuckoo_t *c, const void *item, size_t len, bool nx, uint64_t max_bytes, cuckoo_undo_t *undo);
/* The bytes the next sub-filter would add; 0 when the filter cannot grow. */
uint64_t cuckoo_next_filter_bytes(const cuckoo_t *c);
/* The bytes of the sub-filters to add, from the next one, until they hold
 * `slots` slots (at least the next one; fewer when the filter cannot grow
 * that far): what a batch that must grow asks room for. */
uint64_t cuckoo_growth_estimate(const cuckoo_t *c, uint64_t slots);
/* cuckoo_memory of the filter cuckoo_create would make with these
 * (validated) parameters, before it is made; 0 when it cannot be. */
uint64_t cuckoo_bytes_for(const cuckoo_params_t *p);
/* CF.EXISTS */
bool cuckoo_check(const cuckoo_t *c, const void *item, size_t len);
/* CF.COUNT: copies of the item's fingerprint in its buckets (may overcount). */
uint64_t cuckoo_count(const cuckoo_t *c, const void *item, size_t len);
/* CF.DEL: removes one copy (and may compact, see above); false if the
 * fingerprint is not there, or if the undo log ran out of memory (then the
 * caller rolls back).  `undo` may be NULL. */
bool cuckoo_delete(cuckoo_t *c, const void *item, size_t len, cuckoo_undo_t *undo);
/* CF.COMPACT. */
void cuckoo_compact(cuckoo_t *c);

/* CF.INFO */
typedef struct cuckoo_info {
    uint64_t size_bytes;
    uint64_t buckets;         /* all sub-filters */
    uint64_t buckets0;        /* the first sub-filter's (RedisBloom's "Number of buckets") */
    uint32_t filters;
    uint64_t items;
    uint64_t deletes;
    uint64_t capacity;        /* as configured */
    uint32_t bucket_size, max_iterations, expansion, fp_bits;
} cuckoo_info_t;
void cuckoo_get_info(const cuckoo_t *c, cuckoo_info_t *out);

size_t cuckoo_memory(const cuckoo_t *c);

/* CF.SCANDUMP: the header chunk; false (nothing written) for fingerprints
 * other than 8 bits, which RedisBloom's format cannot carry. */
bool cuckoo_dump_header(const cuckoo_t *c, wbuf_t *out);
/* The data chunk at *cursor (>= 1), at most max_len bytes, as
 * bloom_dump_chunk; NULL with *len 0 and *cursor 0 past the end. */
const uint8_t *cuckoo_dump_chunk(const cuckoo_t *c, int64_t *cursor, size_t max_len, size_t *len);
/* CF.LOADCHUNK with cursor 1 on a missing key: a new zeroed generation-2
 * filter from a header chunk, validated completely; its slot arrays may
 * total at most max_bytes (0 = no limit).  NULL with *why set on refusal
 * (*nomem when only memory was missing). */
cuckoo_t *cuckoo_load_header(const uint8_t *p, size_t len, uint64_t max_bytes, bool *nomem, const char **why);
/* CF.LOADCHUNK of a data chunk (as bloom_load_chunk). */
bool cuckoo_load_chunk(cuckoo_t *c, int64_t cursor, const uint8_t *p, size_t len, const char **why);
/* cuckoo_memory of the filter cuckoo_load_header would build from a header
 * chunk, without building it; 0 when the header is refused. */
uint64_t cuckoo_load_header_bytes(const uint8_t *p, size_t len);

#endif
