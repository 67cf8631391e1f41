/*
 * topk.h - HeavyKeeper: the k most frequent items of a stream (RedisBloom's
 * TOPK.*).
 *
 * Paper: Junzhi Gong et al., "HeavyKeeper: An Accurate Algorithm for Finding
 * Top-k Elephant Flows" (USENIX ATC 2018).  Two parts:
 *
 *   - a sketch of `depth` rows × `width` buckets, each bucket a 32-bit item
 *     fingerprint and a 64-bit count.  Row i maps an item to bucket
 *     MurmurHash2(item, seed = i) mod width; the fingerprint is
 *     MurmurHash2(item, seed = 1919) - RedisBloom's hashing;
 *   - a min-heap of the k items with the largest estimated counts (the item
 *     bytes, fingerprint and count).
 *
 * Adding an item with increment n, for each row:
 *   - empty bucket: it takes the item's fingerprint and count n;
 *   - same fingerprint: count += n;
 *   - another fingerprint: "exponential decay" - each of the n units
 *     decrements the bucket's count with probability decay^count; a bucket
 *     decayed to zero is taken over by the item with the units left.
 * The item's estimate is the largest count among its own buckets.  If it is
 * at least the heap minimum (the root's count, 0 while the heap has free
 * slots), the item's heap count becomes the estimate, or, when it is not in
 * the heap, it replaces the root, which is reported as "expelled".  Large
 * flows hold their buckets (decay^count is tiny for a large count) while
 * small ones wash each other out.
 *
 * The heap is RedisBloom's too, slot for slot: a new item enters at the root
 * and sinks by RedisBloom's heapifyDown, whose handling of equal counts
 * decides which of several items with the minimum count is expelled next;
 * LIST orders by count, largest first, equal counts in heap slot order (the
 * order RedisBloom's qsort gives on glibc, whose qsort is a stable merge
 * sort).  COUNT is RedisBloom's: the largest of the item's buckets holding
 * its fingerprint, for a listed item only among those at or above the heap
 * minimum.  So without decay decisions (no two items share a bucket, or
 * decay 1) tally answers exactly as RedisBloom: the same expelled items, the
 * same LIST, the same COUNT.
 *
 * Generation 1 (Top-Ks created before issue 18 and replayed from journal
 * version 1, core/types.h; encoding version 1) kept its own rules, still
 * applied to those values: a same-fingerprint bucket took the increment only
 * when the item was in the heap or the count was at most the heap minimum;
 * an item entered the heap only with an estimate strictly above the minimum;
 * its heap count only grew when it was not looked up; sinking used the
 * textbook sift-down; COUNT answered the heap count for a listed item; LIST
 * broke ties by item bytes.
 *
 * Defaults as RedisBloom: width 8, depth 7, decay 0.9.  Recommended for a
 * given k: width = k·log2(k), depth = max(5, log2(k)) (RedisBloom writes
 * "k·log(k)" without a base).  Precision - the share of listed items that are
 * among the true k most frequent, ties included - on Zipf(1.0) streams of 1M
 * events over 100k items, each stream with its own item names (so its own
 * layout in the buckets):
 *
 *     k     width × depth        mean      streams below 99%
 *     10    34 × 5   (log2)      99.7%     3 of 100 (one item missed: 90%)
 *     100   665 × 7  (log2)      99.8%     0 of 40  (all >= 99%)
 *     10    24 × 5   (ln)        95.5%     45 of 100
 *     100   461 × 5  (ln)        99.4%     3 of 40  (97-98%)
 *
 * (measured with generation 1's rules, see below; tests/unit/test_topk.c
 * checks the log2 rows on 8 seeded streams, where generation 2 lists the
 * true top k on all 8 for both k.)  The
 * misses are HeavyKeeper's: with ~24 buckets per row and 100k items, about 3%
 * of all events land in each bucket, so an item with 1% of the stream keeps
 * losing its buckets to the flood of light items while its count is small
 * (decay^count is large), and can stay stuck near 1 for a third of the
 * stream; at k = 100 the early decay costs the items ranked near 100 about
 * 16 ± 13 counts, more than the gap between neighbours.  Wider sketches fix
 * both (k = 10 at 50 × 5: 100% on 40 of 40 streams).
 *
 * Determinism: RedisBloom draws decay decisions from rand().  Here they come
 * from a xoshiro256** generator whose 32-byte state is part of the structure
 * and of its encoding, seeded at creation by the caller (tally seeds it from
 * the key), so journal replay and snapshot reload reproduce every decision.
 * Increments of n > 1 draw the number of failed decay trials before each
 * success from the geometric distribution (one draw per decrement) instead of
 * one draw per unit: the same probabilities, without n draws per bucket.
 *
 * Differences from RedisBloom that only remove defects: a heap count that
 * drops (its buckets decayed) is sifted up, where RedisBloom leaves its heap
 * out of order; counts are 64-bit (RedisBloom's wrap at 2^32); heap
 * membership is found through a fingerprint index in O(1) rather than a scan
 * of k slots.
 *
 * Memory: 12 bytes per bucket, plus 24 bytes and the item's bytes per heap
 * slot, an index of 4 bytes × (a power of two >= 2k), and 2 KB of decay
 * table.  Defaults (k = 10): 672 + 240 + 128 bytes.  k = 100 at 461 × 5:
 * 27 KB + 2.4 KB + 1 KB.
 *
 * Encoding (version 2; version 1 is the same layout for a generation-1
 * Top-K), little-endian:
 *
 *   u8  version = 2
 *   u32 k, u32 width, u32 depth     (k <= TOPK_MAX_K, width·depth <= TOPK_MAX_BUCKETS)
 *   f64 decay                       (0 < decay <= 1)
 *   4 × u64 generator state         (not all zero)
 *   width·depth × { u32 fingerprint, u64 count }
 *   k × { u8 used, u64 count, [if used: u32 length, bytes] }   heap array order
 * Heap slots must satisfy the heap order; unused slots have count 0; used
 * slots hold distinct items.
 */
#ifndef TALLY_TOPK_H
#define TALLY_TOPK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/types.h"

/* The on-disk tag of HeavyKeeper Top-K values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_TOPK = 7 };

#define TOPK_DEFAULT_WIDTH 8
#define TOPK_DEFAULT_DEPTH 7
#define TOPK_DEFAULT_DECAY 0.9
#define TOPK_MAX_K 10000                     /* a list is one response: the batch limit */
#define TOPK_MAX_BUCKETS (UINT64_C(1) << 24) /* 192 MiB of buckets */
#define TOPK_MAX_INCREMENT 100000            /* RedisBloom's TOPK.INCRBY limit */

typedef struct topk topk_t;

extern const ks_type_t topk_type;

/* A new empty Top-K (1 <= k <= TOPK_MAX_K, width, depth >= 1 with
 * width·depth <= TOPK_MAX_BUCKETS, 0 < decay <= 1) whose decay decisions are
 * seeded with `seed`.  NULL on allocation failure or bad parameters. */
topk_t *topk_create(uint32_t k, uint32_t width, uint32_t depth, double decay, uint64_t seed);
/* The heap bytes (topk_type.size) of a new Top-K with these (valid)
 * dimensions, before it is made; each item it keeps adds its length (at
 * least 1). */
uint64_t topk_bytes_for(uint32_t k, uint32_t width, uint32_t depth);
/* The bytes of the items the heap holds (each counted as at least 1). */
size_t topk_item_bytes(const topk_t *t);
/* The same with the rules of generation `gen` (TALLY_GEN_*). */
topk_t *topk_create_gen(unsigned gen, uint32_t k, uint32_t width, uint32_t depth, double decay, uint64_t seed);
void topk_free(topk_t *t);

uint32_t topk_k(const topk_t *t);
uint32_t topk_width(const topk_t *t);
uint32_t topk_depth(const topk_t *t);
double topk_decay(const topk_t *t);

/* Adds `by` (1..TOPK_MAX_INCREMENT) occurrences of the item.  When the item
 * enters the heap and pushes another out, *expelled receives that item (the
 * caller frees it) and *elen its length; otherwise *expelled is NULL.  Never
 * fails: if memory for the item's copy cannot be found, the item simply does
 * not enter the heap. */
void topk_add(topk_t *t, const void *item, size_t len, uint32_t by, char **expelled, size_t *elen);
/* True when the item is in the top-k list. */
bool topk_query(const topk_t *t, const void *item, size_t len);
/* The item's estimated count (TOPK.COUNT). */
uint64_t topk_count(const topk_t *t, const void *item, size_t len);

typedef struct topk_entry {
    const char *item;            /* points into the structure: valid until the next change */
    size_t len;
    uint64_t count;
} topk_entry_t;
/* Fills out[0..k) with the listed items, largest count first (ties in heap
 * slot order; generation 1: by item bytes); returns how many. */
size_t topk_list(const topk_t *t, topk_entry_t *out);

#endif
