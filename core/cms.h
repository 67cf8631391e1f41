/*
 * cms.h - Count-Min sketch: approximate per-item counts of a stream
 * (RedisBloom's CMS.*).
 *
 * Paper: Graham Cormode and S. Muthukrishnan, "An Improved Data Stream
 * Summary: The Count-Min Sketch and its Applications" (2005).  A sketch is
 * `depth` rows of `width` counters.  Row i maps an item to the counter
 * MurmurHash2(item, seed = i) mod width - RedisBloom's hashing, so the same
 * items land in the same counters as in Redis.  Incrementing an item by n adds
 * n to its counter in every row; its count is the smallest of those counters.
 * Other items only ever add to a counter, so the answer never under-counts:
 *
 *     true ≤ estimate ≤ true + ε·N   with probability ≥ 1 − δ
 *
 * for N the total of all increments, width = ⌈e/ε⌉ and depth = ⌈ln(1/δ)⌉.
 * RedisBloom's CMS.INITBYPROB uses width = ⌈2/ε⌉ and depth =
 * ⌈log10(δ)/log10(0.5)⌉ = ⌈log2(1/δ)⌉ (computed in single precision, as it
 * does); ε = 0.001, δ = 0.002 gives 2000 × 9.
 *
 * Conservative update (Estan and Varghese, 2002), a create-time option:
 * instead of adding n to every row, raise each of the item's counters to at
 * least (its current estimate + n).  Estimates stay upper bounds and are
 * usually much tighter; the price is that a sketch so built should not be
 * merged with weights expecting linearity (the merge is still an upper bound).
 *
 * Counters are 64-bit.  The total N is kept and every counter is at most N,
 * so refusing any increment that would take N past INT64_MAX (counts are JSON
 * integers) guarantees that no counter overflows: an increment batch is
 * checked as a whole and either applies entirely or not at all.
 *
 * MERGE (CMS.MERGE) overwrites the destination with the weighted sum of
 * sources of the same width and depth, counter by counter (the destination
 * may be one of the sources).  Weights may be negative, as in RedisBloom:
 * merging A and B with weights 1, -1 subtracts B's increments from A's (the
 * estimates stay upper bounds only if B's items were all counted in A).  As
 * RedisBloom does, a merge where any counter or the total would leave its
 * range - below 0, or above CMS_MAX_COUNT here (RedisBloom's counters are
 * 32-bit) - is refused as a whole; so is one that would leave a row holding
 * more than the total (possible only when subtracting a sketch built with
 * conservative update), which would break the invariant above.
 *
 * Memory: 8 bytes per counter.
 *
 *     error   probability   width × depth     bytes
 *     0.01        0.01        200 × 7        11 KB
 *     0.001       0.002      2000 × 9       141 KB
 *     0.0001      0.001     20000 × 10     1.5 MB
 *
 * Encoding (version 1), little-endian:
 *
 *   u8  version = 1
 *   u32 width, u32 depth            (width·depth <= CMS_MAX_CELLS)
 *   u8  flags                       (bit 0: conservative update)
 *   u64 total                       (<= INT64_MAX)
 *   width·depth × u64 counters      (row by row; each row sums to <= total)
 */
#ifndef TALLY_CMS_H
#define TALLY_CMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/types.h"

/* The on-disk tag of Count-Min sketch values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_CMS = 6 };

#define CMS_MAX_CELLS (UINT64_C(1) << 26)   /* 512 MiB of counters: a sane upper bound per key */
#define CMS_MAX_COUNT ((uint64_t)INT64_MAX)  /* counts are reported as JSON integers */

typedef struct cms cms_t;

extern const ks_type_t cms_type;

/* A new zeroed sketch (width, depth >= 1, width·depth <= CMS_MAX_CELLS);
 * NULL on allocation failure or bad dimensions. */
cms_t *cms_create(uint32_t width, uint32_t depth, bool conservative);
/* The heap bytes (cms_type.size) of a width x depth sketch, before it is
 * made (width·depth <= CMS_MAX_CELLS). */
uint64_t cms_bytes_for(uint64_t width, uint64_t depth);
void cms_free(cms_t *c);

/* RedisBloom's CMS_DimFromProb for error, probability in (0, 1).  The results
 * may exceed the limits of cms_create, and depth is 0 for a probability
 * that rounds to 1 in single precision (RedisBloom refuses it); the caller
 * checks. */
void cms_dims_from_prob(double error, double probability, uint64_t *width, uint64_t *depth);

uint32_t cms_width(const cms_t *c);
uint32_t cms_depth(const cms_t *c);
bool cms_conservative(const cms_t *c);
/* Sum of all increments (N). */
uint64_t cms_total(const cms_t *c);

/* True when increments summing to `sum` can be applied without the total
 * exceeding CMS_MAX_COUNT (and so without any counter overflowing). */
bool cms_can_add(const cms_t *c, uint64_t sum);
/* Adds `by` to the item (the caller checked cms_can_add); returns its new
 * estimate. */
uint64_t cms_incr(cms_t *c, const void *item, size_t len, uint64_t by);
/* The item's estimate: >= its true count. */
uint64_t cms_query(const cms_t *c, const void *item, size_t len);

typedef enum cms_merge_status {
    CMS_MERGE_OK = 0,
    CMS_MERGE_DIMENSIONS,    /* a source's width or depth differs from the destination's */
    CMS_MERGE_OVERFLOW       /* a counter or the total would leave [0, CMS_MAX_COUNT], or a row would
                                hold more than the total (RedisBloom's "MERGE overflow") */
} cms_merge_status_t;

/* dst := Σ weights[i]·srcs[i], counter by counter, total likewise.  srcs may
 * include dst.  On failure nothing changes. */
cms_merge_status_t cms_merge(cms_t *dst, const cms_t *const *srcs, const int64_t *weights, size_t n);

#endif
