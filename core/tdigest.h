/*
 * tdigest.h - merging t-digest: quantiles, ranks and CDF of a stream in
 * bounded memory (RedisBloom's TDIGEST.*).
 *
 * Paper: Ted Dunning and Otmar Ertl, "Computing Extremely Accurate Quantiles
 * Using t-Digests" (2019), the "merging" variant.  The digest summarises the
 * values seen as a sorted list of centroids (mean, weight).  New values are
 * appended to a buffer; when the buffer is full (or a write request ends) the
 * buffer is sorted and merged with the centroids in one left-to-right pass
 * that lets a centroid grow only while it stays within one unit of the scale
 * function
 *
 *     k(q) = c / π · asin(2q − 1)               (Dunning's k₁, c = compression)
 *
 * where q is the fraction of all weight to the centroid's left.  k spans c
 * units over [0, 1] and its slope c / (π·√(q(1−q))) grows without bound at
 * both ends, so a centroid holds at most about π·√(q(1−q))/c of the data:
 * 1.6% at the median, 0.3% at q = 0.99, 0.1% at q = 0.999 and single values
 * at the very ends (c = 100).  Two neighbouring centroids always span more
 * than one unit, so a merged digest never has more than 2c + 1 centroids,
 * well inside RedisBloom's capacity of 6c + 10 nodes; the rest of the array
 * buffers new values between merges.
 *
 * Why k₁ and not RedisBloom's limit (weight · c / (2π·n·ln n) ≤ q(1−q)):
 * that limit lets the middle centroid hold n·π·ln(n)/(2c) values (21% of a
 * million at c = 100) with about c/π centroids in all, too coarse for the
 * accuracy below; k₁ is independent of n and has the same narrowing towards
 * the tails.  Every other rule - capacity 6c + 10 nodes, interpolation for
 * quantile and CDF (singletons exact, one value known to sit exactly at min
 * and one at max, half of a centroid's weight on each side of its mean),
 * rank and trimmed-mean definitions, edge-case answers - is RedisBloom's.
 *
 * Error (c = 100, 1M values added 1000 at a time, uniform and log-normal,
 * worst of 20 seeds): absolute rank error of quantile(q) at most 0.00026 at
 * q = 0.5, 0.00022 at q = 0.99 and 0.00011 at q = 0.999 (targets 0.005,
 * 0.0005, 0.0005; tests/unit/test_tdigest.c checks them, and the CDF, on one
 * seed each).  A digest holds about 1.2c centroids after 1M values.
 *
 * Memory: 16 bytes per node, capacity 6c + 10 nodes (merged centroids plus
 * the buffer of unmerged values):
 *
 *     compression   capacity   bytes
 *             100        610     9.8 KB
 *             500       3010    48 KB
 *            1000       6010    96 KB
 *
 * Edge cases, as RedisBloom: an empty digest answers NaN to quantile, CDF,
 * min, max, by-rank and trimmed mean; rank -2; a value below the minimum has
 * rank -1 and reverse rank n, above the maximum rank n and reverse rank -1;
 * by-rank with rank >= n is +inf (by-reverse-rank -inf).  Quantile 0 is always
 * the minimum and quantile 1 the maximum, also when every value fell into one
 * centroid (RedisBloom answers that centroid's mean for every q; its merge
 * never folds the extremes into a centroid, k₁ at a tiny c may).
 *
 * Encoding (version 1), little-endian:
 *
 *   u8  version = 1
 *   u32 compression
 *   u64 total_compressions
 *   f64 min, f64 max                 (+inf, -inf when empty)
 *   u32 nodes                        (merged + unmerged, <= capacity)
 *   u32 merged                       (<= nodes)
 *   nodes × { f64 mean, u64 weight } (merged ones first, sorted by mean)
 *
 * Randomness: none.  Everything is a function of the values added, so
 * journal replay and snapshots reproduce a digest exactly.
 */
#ifndef TALLY_TDIGEST_H
#define TALLY_TDIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/types.h"

/* The on-disk tag of merging T-Digest values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_TDIGEST = 8 };

#define TDIGEST_DEFAULT_COMPRESSION 100     /* RedisBloom's default */
#define TDIGEST_MAX_COMPRESSION 10000       /* capacity 60010 nodes, 960 KB */
#define TDIGEST_MAX_WEIGHT (UINT64_C(1) << 53)   /* total weight stays exact in a double */

typedef struct tdigest tdigest_t;

extern const ks_type_t tdigest_type;

/* A new empty digest; compression in [1, TDIGEST_MAX_COMPRESSION].  NULL on
 * allocation failure or a compression out of range. */
tdigest_t *tdigest_create(uint32_t compression);
/* The heap bytes (tdigest_type.size) of a digest of this compression,
 * before it is made (what PUT and MERGE ask room for). */
uint64_t tdigest_bytes_for(uint32_t compression);
void tdigest_free(tdigest_t *td);

/* Adds one finite value with weight 1.  Returns false, changing nothing, when
 * the total weight would exceed TDIGEST_MAX_WEIGHT. */
bool tdigest_add(tdigest_t *td, double value);
/* True if `n` more unit values fit under TDIGEST_MAX_WEIGHT. */
bool tdigest_can_add(const tdigest_t *td, uint64_t n);
/* Merges the buffered values into the centroids (no-op when none). */
void tdigest_flush(tdigest_t *td);
/* Empties the digest, keeping its compression. */
void tdigest_reset(tdigest_t *td);

/* TDIGEST.MERGE: a new digest with the given compression holding every
 * centroid of srcs[0..n) (NULL entries skipped), flushed.  min and max are
 * the sources' own.  Returns NULL with *overflow set when the total weight
 * would exceed TDIGEST_MAX_WEIGHT, or NULL (overflow false) when out of
 * memory. */
tdigest_t *tdigest_merge(uint32_t compression, const tdigest_t *const *srcs, size_t n, bool *overflow);

/* Queries.  A digest with buffered values is answered as if flushed (from a
 * flushed copy, so these never modify it; they answer NaN if that copy cannot
 * be allocated). */
double tdigest_quantile(const tdigest_t *td, double q);        /* q in [0,1] */
double tdigest_cdf(const tdigest_t *td, double value);
/* Rank: values below + half of those equal, rounded as RedisBloom does;
 * reverse counts from the top.  -2 when empty, -1 / n outside [min, max]. */
int64_t tdigest_rank(const tdigest_t *td, double value, bool reverse);
/* Value of the given rank (>= 0); NaN when empty, ±inf when rank >= n. */
double tdigest_by_rank(const tdigest_t *td, uint64_t rank, bool reverse);
/* Mean of the values between quantiles low < high (both in [0,1]). */
double tdigest_trimmed_mean(const tdigest_t *td, double low, double high);
double tdigest_min(const tdigest_t *td);                        /* NaN when empty */
double tdigest_max(const tdigest_t *td);

/* Facts for the info endpoint. */
typedef struct tdigest_info {
    uint32_t compression;
    uint32_t capacity;
    uint32_t merged_nodes;
    uint32_t unmerged_nodes;
    uint64_t merged_weight;
    uint64_t unmerged_weight;
    uint64_t total_compressions;
} tdigest_info_t;
void tdigest_get_info(const tdigest_t *td, tdigest_info_t *out);
uint64_t tdigest_count(const tdigest_t *td);
uint32_t tdigest_compression(const tdigest_t *td);

#endif
