/*
 * zindex.h - an ordered index of (score, member): a sorted set.
 *
 * Members are byte strings (1..ZINDEX_MEMBER_MAX bytes), each with one
 * 64-bit unsigned score.  The index answers "what is this member's score"
 * in O(1) and walks a score range [min, max) in order in O(log n + k): what
 * a Redis sorted set does, built for integer scores (a geo set's geohashes,
 * see geo.h) rather than doubles:
 *
 *   member -> element      open-addressing hash table (linear probing,
 *                          backward-shift deletion), load <= 3/4
 *   (score, member) order  B+tree whose leaves hold the scores inline and
 *                          are chained, so a score range [min, max) is one
 *                          descent plus a walk: O(log n + k)
 *
 *   element (one allocation)      leaf (64 entries)
 *   +-------+------+-----+-----+  +---+------+------+-----------+---------+
 *   | score | hash | len | m.. |  | n | prev | next | score[64] | elem[64]|
 *   +-------+------+-----+-----+  +---+------+------+-----------+---------+
 *     u64     u32    u16   bytes
 *
 * Order: by score, then by member bytes (memcmp, shorter first on a common
 * prefix) - Redis's zset order.
 *
 * An insertion allocates every node it may need before it touches the tree,
 * so it either happens entirely or fails with CORE_NOMEM and changes
 * nothing.  A bulk load (zindex_load_*) takes members already in order and
 * builds the tree bottom-up in O(n), every node full: what a snapshot load
 * does.
 *
 * Memory per member (64-bit glibc, 10-byte members): element 32 B (malloc
 * chunk), hash slot 8 B / load (0.375..0.75) = 11..21 B, leaf slot 16 B /
 * fill (0.5..1; 1 after a bulk load) = 16..32 B: about 60-85 B, against
 * roughly 100-120 B for a Redis skiplist zset.
 */
#ifndef TALLY_ZINDEX_H
#define TALLY_ZINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define ZINDEX_MEMBER_MAX 65535   /* member lengths are stored in 16 bits */

typedef struct zindex zindex_t;

/* Seeds the member hash of every index (a process-wide secret, so a client
 * cannot precompute members that collide in the table and make each add
 * walk a long probe sequence: hash flooding).  Called once at start-up,
 * while no index exists; without it a fixed seed is used (tests). */
void zindex_set_seed(uint64_t seed);

/* An empty index, or NULL on allocation failure. */
zindex_t *zindex_create(void);
/* NULL is a no-op. */
void zindex_free(zindex_t *z);

size_t zindex_count(const zindex_t *z);
/* Heap bytes owned, the index itself included (O(1)). */
size_t zindex_memory(const zindex_t *z);
/* The longest run of occupied hash slots (a lookup's worst probe length):
 * for tests and diagnostics, O(table size). */
size_t zindex_probe_max(const zindex_t *z);
/* A bound on what inserting n members of member_bytes bytes in all adds to
 * zindex_memory of z (NULL: a new index), whatever they are: what a request
 * asks room for before it inserts. */
uint64_t zindex_add_bound(const zindex_t *z, size_t n, uint64_t member_bytes);

/* ZADD's flags: NX only adds new members, XX only moves existing ones. */
typedef enum { ZINDEX_SET = 0, ZINDEX_SET_NX = 1, ZINDEX_SET_XX = 2 } zindex_mode_t;
/* What zindex_set did. */
typedef enum { ZINDEX_ADDED, ZINDEX_UPDATED, ZINDEX_UNCHANGED, ZINDEX_SKIPPED } zindex_result_t;

/* Adds `member` with `score`, or moves it to `score`.  Returns a
 * zindex_result_t, or CORE_NOMEM (also for a member longer than
 * ZINDEX_MEMBER_MAX) with nothing changed. */
int zindex_set(zindex_t *z, const char *member, size_t len, uint64_t score, zindex_mode_t mode);
/* The member's score; false when absent. */
bool zindex_score(const zindex_t *z, const char *member, size_t len, uint64_t *score);
/* Removes the member; false when absent. */
bool zindex_remove(zindex_t *z, const char *member, size_t len);

/* Calls fn for each member with min <= score < max, in order; fn returns
 * false to stop.  `member` points into the index: valid until it changes. */
typedef bool (*zindex_visit_fn)(void *ud, uint64_t score, const char *member, size_t len);
void zindex_range(const zindex_t *z, uint64_t min, uint64_t max, zindex_visit_fn fn, void *ud);
/* Every member, in order. */
void zindex_each(const zindex_t *z, zindex_visit_fn fn, void *ud);

/* Bulk load: zindex_load_begin(n) makes an index with room for n members;
 * zindex_load_add appends one, which must sort strictly after the one
 * before (else CORE_UNORDERED) and not be present already (else
 * CORE_DUPLICATE); zindex_load_end builds the tree.  Until then the index
 * answers nothing but zindex_free.  Any failure (CORE_NOMEM included)
 * leaves an index to free with zindex_free, nothing else. */
zindex_t *zindex_load_begin(size_t n);
core_status_t zindex_load_add(zindex_t *z, uint64_t score, const char *member, size_t len);
core_status_t zindex_load_end(zindex_t *z);

#endif
