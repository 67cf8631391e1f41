/*
 * bloom.h - scalable Bloom filter, bit for bit RedisBloom's BF.*.
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
 * does it: a filter is a chain of sub-filters ("links").  The first is sized
 * for `capacity` items at error * 0.5; when the newest holds as many items as
 * its capacity, the next add first appends a link with capacity * expansion
 * and half the newest link's error, so the compound rate stays below
 * error * (0.5 + 0.25 + ...) < error.  A non-scaling filter (expansion 0)
 * has one link at the full error and refuses items once full.  Error rates
 * above 0.25 are taken as 0.25.  There is no fixed limit on the number of
 * links or their size: growth is refused only when the filter would exceed
 * the memory limit the caller passes (tally's --maxmemory), when a link's
 * error rate underflows, or when memory runs out.
 *
 * Geometry of a link (RedisBloom's bloom_init with NOROUND, what BF.RESERVE
 * and BF.ADD build): bits = floor(capacity * bpe) (at least 1), rounded up to
 * a multiple of 64; hashes = ceil(0.693147180559945 * bpe).  Filters loaded
 * from older RedisBloom dumps may instead have power-of-two links (n2 > 0:
 * probes are taken mod 2^n2, capacity grown to fill the rounding) and 32-bit
 * hashing (no FORCE64 option); both are supported, and such a chain grows by
 * the same rules it was made with.
 *
 * Hashing: h1 = MurmurHash64A(item, seed 0xc6a4a7935bd1e995), h2 =
 * MurmurHash64A(item, seed h1) (FORCE64; otherwise the 32-bit MurmurHash2
 * with seed 0x9747b28c, then seeded with h1); probe i tests bit
 * (h1 + i*h2) mod m (64-bit arithmetic, m = bits, or 2^n2), bit x being byte
 * x/8, mask 1 << x%8.  An add first checks every link, newest first: "maybe
 * present" adds nothing and answers false (BF.ADD's 0); otherwise the item's
 * bits are set in the newest link.
 *
 * Because bits is a multiple of 64, an item whose h2 is even probes only one
 * residue class of the array, so the measured false-positive rate of small
 * filters sits slightly above the configured one (RedisBloom's defaults grown
 * 100x: 0.0101 for 0.01).  Generation 1 of tally forced h2 odd to avoid
 * that; filters created by generation 1 (core/types.h) keep that rule, so
 * that old snapshots and journals answer as they did (their dumps carry the
 * option bit BLOOM_OPT_TALLY_ODD_STEP, which RedisBloom refuses to load
 * rather than answer wrongly).
 *
 * BF.SCANDUMP / BF.LOADCHUNK format (RedisBloom's, little-endian, packed):
 *
 *   header chunk, cursor 1:  20 + 53 * nfilters bytes
 *     +----------+----------+---------+--------+
 *     | u64 size | u32 nfil | u32 opt | u32 gr |   size = items in all links
 *     +----------+----------+---------+--------+
 *     nfilters x +-----------+----------+----------+-----------+---------+
 *                | u64 bytes | u64 bits | u64 size | f64 error | f64 bpe |
 *                +-----------+----------+----------+-----------+---------+
 *                | u32 hashes | u64 entries | u8 n2 |
 *                +------------+-------------+-------+
 *   data chunks: the links' bit arrays, concatenated, cut into pieces of at
 *   most 16 MiB that never span two links.  SCANDUMP at cursor 0 answers
 *   (1, header); at cursor c >= 1 it answers the bytes from offset c - 1 of
 *   the concatenation and the cursor c + length; past the end (0, "").
 *   LOADCHUNK takes (cursor, bytes) as SCANDUMP returned them: the header
 *   with cursor 1 creates the filter (zeroed), a data chunk is written at
 *   offset cursor - length - 1.
 *
 * Memory: one link of capacity 1e6 at 1% takes 1.2 MB, at 0.1% 1.8 MB.
 * BF.INFO's Size is RedisBloom's accounting, 32 + 64 per link + bit arrays
 * (296 for BF.RESERVE 0.001 100), reported as size_bytes.
 *
 * Keyspace encoding: version 2 is u8 2 | the dump header | the bit arrays;
 * version 1 (generation 1) was
 *   u8 1 | u8 flags (bit 0 scaling) | u32 expansion | f64 error |
 *   u64 capacity | u32 nfilters | nfilters x (u64 items | bit array bytes)
 * and decodes to a generation-1 filter.
 */
#ifndef TALLY_BLOOM_H
#define TALLY_BLOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/types.h"

/* The on-disk tag of scalable Bloom filter values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_BLOOM = 4 };

#define BLOOM_DEFAULT_ERROR 0.01          /* RedisBloom's BF.ADD defaults */
#define BLOOM_DEFAULT_CAPACITY 100
#define BLOOM_DEFAULT_EXPANSION 2
#define BLOOM_ERROR_CAP 0.25              /* RedisBloom builds larger error rates at 0.25 */
#define BLOOM_MAX_CAPACITY 4294967294ULL  /* RedisBloom 2.x refused >= UINT32_MAX (2.8 caps at 2^30) */
#define BLOOM_MAX_EXPANSION 32768         /* RedisBloom's bf-expansion-factor maximum */
#define BLOOM_DUMP_CHUNK (16u << 20)      /* RedisBloom's MAX_SCANDUMP_SIZE */
#define BLOOM_DUMP_HEADER_FIXED 20        /* dump header bytes before the links */
#define BLOOM_DUMP_LINK 53                /* dump header bytes per link */

/* RedisBloom's option bits, as in the dump header. */
#define BLOOM_OPT_NOROUND 1               /* exact bit counts, not powers of two */
#define BLOOM_OPT_ENTS_IS_BITS 2          /* capacity given as log2 of the bits */
#define BLOOM_OPT_FORCE64 4               /* 64-bit hashing */
#define BLOOM_OPT_NO_SCALING 8
#define BLOOM_OPT_TALLY_ODD_STEP 0x10000  /* generation 1: h2 forced odd (tally only) */

typedef struct bloom bloom_t;

extern const ks_type_t bloom_type;
extern const ks_dump_ops_t bloom_dump_ops;   /* the dump functions below, on void * */

/* Results of bloom_add. */
enum {
    BLOOM_ADDED = 1,        /* new: some bit was clear */
    BLOOM_PRESENT = 0,      /* maybe present already: nothing changed */
    BLOOM_NOMEM = CORE_NOMEM,   /* allocation failed */
    BLOOM_FULL = CORE_FULL,     /* non-scaling and full ("non scaling filter is full") */
    BLOOM_LIMIT = CORE_LIMIT,   /* the next link cannot be built (its error rate underflowed,
                                   its size overflowed) */
    BLOOM_BUDGET = CORE_BUDGET, /* the next link would take the filter past max_bytes */
};

/* Why creation parameters are refused, or NULL if they are fine: the error
 * rate must be in (0, 1), capacity 1..BLOOM_MAX_CAPACITY, expansion
 * 0..BLOOM_MAX_EXPANSION (0 = non-scaling), and the first link must be
 * computable.  *field names the culprit. */
const char *bloom_validate(double error, uint64_t capacity, uint32_t expansion, bool scaling, const char **field);
/* bloom_memory of the filter bloom_create would make with these (validated)
 * parameters, before it is made: what a PUT asks room for.  0 when the
 * first link cannot be built. */
uint64_t bloom_bytes_for(double error, uint64_t capacity, uint32_t expansion, bool scaling);

/* A new empty filter of the current generation (parameters validated; an
 * expansion of 0 makes it non-scaling); NULL on allocation failure. */
bloom_t *bloom_create(double error, uint64_t capacity, uint32_t expansion, bool scaling);
/* The same with the rules of generation `gen` (TALLY_GEN_*). */
bloom_t *bloom_create_gen(unsigned gen, double error, uint64_t capacity, uint32_t expansion, bool scaling);
void bloom_free(bloom_t *b);

/* Undo log for a batch: every byte an add changes is recorded, so that a
 * batch that fails part-way is rolled back and changes nothing. */
typedef struct bloom_undo bloom_undo_t;
bloom_undo_t *bloom_undo_begin(const bloom_t *b);
/* Restores the state of bloom_undo_begin and frees the log. */
void bloom_undo_rollback(bloom_t *b, bloom_undo_t *u);
/* Keeps the changes and frees the log. */
void bloom_undo_commit(bloom_undo_t *u);

/* BF.ADD: one of BLOOM_ADDED / PRESENT / NOMEM / FULL / LIMIT / BUDGET.  A
 * new link is added only if bloom_memory then stays at most max_bytes
 * (0 = no limit): BLOOM_BUDGET otherwise, and bloom_next_link_bytes tells
 * what it would add, so the caller can make room (or refuse the size) and
 * try again.  On an error the filter is unchanged by this item.  `undo`
 * may be NULL. */
int bloom_add(bloom_t *b, const void *item, size_t len, uint64_t max_bytes, bloom_undo_t *undo);
/* What the next link would add to bloom_memory (its bit array, the link
 * table's growth); 0 when it cannot be built. */
uint64_t bloom_next_link_bytes(const bloom_t *b);
/* What n more new items may add to bloom_memory at most (the links they
 * would fill, up to one that cannot be built, where adds stop; UINT64_MAX
 * when the sum overflows). */
uint64_t bloom_growth_bound(const bloom_t *b, uint64_t n);
/* BF.EXISTS. */
bool bloom_check(const bloom_t *b, const void *item, size_t len);

/* BF.INFO (and BF.CARD = items) */
typedef struct bloom_info {
    uint64_t capacity;      /* sum of the links' capacities */
    uint64_t size_bytes;    /* RedisBloom's accounting: 32 + 64 per link + bit arrays */
    uint64_t bits;          /* bits in all bit arrays */
    uint32_t filters;
    uint64_t items;
    uint32_t expansion;     /* meaningful only when scaling */
    bool scaling;
    double error_rate;      /* as built: the first link's, doubled when scaling */
    uint32_t hashes;        /* of the newest link */
} bloom_info_t;
void bloom_get_info(const bloom_t *b, bloom_info_t *out);

/* BF.DEBUG: link i (0 = oldest); false when there is no such link. */
typedef struct bloom_link_info {
    uint64_t bytes, bits;
    uint32_t hashes;
    uint32_t hash_width;    /* 64 or 32 */
    uint64_t capacity, items;
    double error;
} bloom_link_info_t;
bool bloom_get_link(const bloom_t *b, uint32_t i, bloom_link_info_t *out);

/* Heap bytes actually used (the keyspace's accounting). */
size_t bloom_memory(const bloom_t *b);

/* BF.SCANDUMP.  The header chunk (cursor 0 answers it with next cursor 1): */
void bloom_dump_header(const bloom_t *b, wbuf_t *out);
/* The data chunk at *cursor (>= 1), at most max_len bytes: returns a
 * pointer into the filter (valid until it changes), sets *len and advances
 * *cursor past it.  Past the end, or for a cursor < 1, returns NULL with
 * *len 0 and *cursor 0. */
const uint8_t *bloom_dump_chunk(const bloom_t *b, int64_t *cursor, size_t max_len, size_t *len);

/* BF.LOADCHUNK with cursor 1 on a missing key: a new zeroed filter from a
 * header chunk, validated completely (untrusted bytes); its bloom_memory may
 * be at most max_bytes (0 = no limit).  NULL with *why set on refusal
 * (*nomem true when only memory was missing). */
bloom_t *bloom_load_header(const uint8_t *p, size_t len, uint64_t max_bytes, bool *nomem, const char **why);
/* BF.LOADCHUNK of a data chunk: writes it where (cursor, len) say
 * (offset cursor - len - 1 of the concatenated arrays, inside one link).
 * False with *why set, changing nothing, when it does not fit. */
bool bloom_load_chunk(bloom_t *b, int64_t cursor, const uint8_t *p, size_t len, const char **why);
/* bloom_memory of the filter bloom_load_header would build from a header
 * chunk, without allocating its arrays; 0 when the header is refused. */
uint64_t bloom_load_header_bytes(const uint8_t *p, size_t len);

#endif
