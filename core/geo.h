/*
 * geo.h - a geo set: members with a position, searchable by area.
 *
 * The value of a /geo key, and Redis's GEO commands over it.  Like Redis, a
 * geo set is a sorted set whose score is the point's 52-bit geohash (see
 * geohash.h), kept in core/zindex.h's ordered (score, member) index: a
 * hash table for member -> score and a B+tree for score ranges, about
 * 60-85 bytes per member against 100-120 for a Redis zset (see zindex.h).
 * Order: by score, then by member bytes - Redis's zset order, which decides
 * the order of unsorted search results and of equal distances.
 *
 * Search (geo_search) is Redis's GEOSEARCH: the 9 cells of geo_search_cells()
 * scanned in Redis's order, each candidate decoded and tested with
 * geo_in_shape(), ANY stopping at COUNT hits, then sorting exactly as Redis
 * does (libc qsort for a full sort, a reproduction of Redis's partial
 * quicksort pqsort when COUNT cuts the list), so that even the order of
 * equal distances matches.
 *
 * Encoding (version 1): u8 version | u64 count | count x (u64 score |
 * u16 len | member bytes), in (score, member) order.  Decoding checks every
 * score (a double-exact integer below 2^54), member (1..GEO_MEMBER_MAX bytes
 * of UTF-8 without NUL), the strict order and the count, and bulk-loads the
 * index in O(n).
 */
#ifndef TALLY_GEO_H
#define TALLY_GEO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/geohash.h"
#include "core/status.h"
#include "core/types.h"
#include "core/zindex.h"

/* The on-disk tag of geohash-sorted member set values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_GEO = 11 };

#define GEO_MEMBER_MAX 1024       /* longest member in bytes, like keys */

typedef struct geo geo_t;

extern const ks_type_t geo_type;

/* An empty set, or NULL on allocation failure. */
geo_t *geo_create(void);
/* NULL is a no-op. */
void geo_free(geo_t *g);

size_t geo_count(const geo_t *g);
/* Heap bytes owned (O(1)). */
size_t geo_memory(const geo_t *g);
/* A bound on what adding n members of member_bytes bytes in all adds to
 * geo_memory of g (NULL: a new set): what GEOADD asks room for. */
uint64_t geo_add_bound(const geo_t *g, size_t n, uint64_t member_bytes);

/* GEOADD's flags. */
typedef enum { GEO_ADD = ZINDEX_SET, GEO_ADD_NX = ZINDEX_SET_NX, GEO_ADD_XX = ZINDEX_SET_XX } geo_add_mode_t;
typedef enum {
    GEO_SET_ADDED = ZINDEX_ADDED,
    GEO_SET_UPDATED = ZINDEX_UPDATED,
    GEO_SET_UNCHANGED = ZINDEX_UNCHANGED,
    GEO_SET_SKIPPED = ZINDEX_SKIPPED
} geo_set_result_t;

/* Adds `member` with `score` (from geohash_score), or moves it (unless NX).
 * XX only updates existing members; NX only adds new ones.  Returns a
 * geo_set_result_t, or CORE_NOMEM with nothing changed. */
int geo_set(geo_t *g, const char *member, size_t len, uint64_t score, geo_add_mode_t mode);
/* The member's score; false when absent. */
bool geo_score(const geo_t *g, const char *member, size_t len, uint64_t *score);
/* Removes the member; false when absent. */
bool geo_remove(geo_t *g, const char *member, size_t len);

/* Calls fn for each member with min <= score < max in order; fn returns
 * false to stop. */
typedef bool (*geo_visit_fn)(void *ud, uint64_t score, const char *member, size_t len);
void geo_range(const geo_t *g, uint64_t min, uint64_t max, geo_visit_fn fn, void *ud);

/* ------------------------------------------------------------------------ */
/* Search                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum { GEO_SORT_NONE, GEO_SORT_ASC, GEO_SORT_DESC } geo_sort_t;

typedef struct geo_query {
    geo_shape_t shape;            /* centre (decoded member position or input), size, unit */
    uint64_t count;               /* 0 = no limit */
    bool any;                     /* stop at `count` hits (requires count) */
    geo_sort_t sort;
} geo_query_t;

typedef struct geo_hit {
    const char *member;           /* points into the set: valid until it changes */
    size_t len;
    uint64_t score;
    double lon, lat;              /* decoded position */
    double dist;                  /* distance from the centre, in the query's unit */
} geo_hit_t;

/* Runs the search; *hits (malloc'd, caller frees; NULL when none) receives
 * the results in answer order and *n their number.  Returns false on
 * allocation failure. */
bool geo_search(const geo_t *g, const geo_query_t *q, geo_hit_t **hits, size_t *n);

/* Redis's partial quicksort (pqsort: NetBSD qsort with recursion only into
 * partitions that overlap [lo, hi]) on hits by distance; exposed for tests. */
void geo_pqsort(geo_hit_t *a, size_t n, bool desc, size_t lo, size_t hi);

#endif
