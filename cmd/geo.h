/*
 * geo.h - Redis's GEO commands as operations, with Redis's exact numbers
 * (core/geo.h and core/geohash.h teach the structure).
 *
 *   GEOADD          adds members at their positions (scores: geohash_score
 *                   of a valid longitude/latitude) or moves them; `nx` only
 *                   adds, `xx` only moves (on a missing key: nothing, no key
 *                   created); `added` counts the new members, with `ch` the
 *                   moved ones too (GEOADD ... CH).  A batch that runs out
 *                   of memory part-way is put back: nothing changes.
 *   ZREM            removes members; the key is deleted with its last one
 *                   (an empty set is no key, as in Redis).
 *   GEOPOS          each member's score, or not found (its position and its
 *   GEOHASH         hash are the front-end's to print from the score), and
 *                   the set's size (ZCARD, ZSCORE over RESP).
 *   GEODIST         the distance between two members in the unit asked for
 *                   (metres per unit in to_m), or not found when either is
 *                   missing (or the key is).
 *   GEOSEARCH       the members within a radius or a box around a member or
 *                   a position (Redis's BYRADIUS / BYBOX, COUNT [ANY],
 *                   ASC|DESC), with their distances, scores and decoded
 *                   positions.  A missing key has no members, even around a
 *                   member; a missing centre member is NOT_FOUND (Redis:
 *                   "could not decode requested zset member").  The answer
 *                   is estimated first (--max-answer-size), from the with*
 *                   options the front-end prints.
 *   GEOSEARCHSTORE  the members GEOSEARCH finds in `source` become the geo
 *                   set at the key, replacing what was there (its TTL too);
 *                   none deletes the key, as in Redis.  The key may be the
 *                   source; it must hold a geo set or nothing (Redis would
 *                   overwrite any type).
 *
 *   ZRANGE          members in (score, member) order, with their scores
 *                   (Redis's ZRANGE by rank or BYSCORE, REV, LIMIT, as
 *                   genericZrangebyrankCommand and genericZrangebyscoreCommand
 *                   select them); a missing key has none.  The answer is
 *                   estimated first (--max-answer-size).
 *
 * Members are keys' text: 1..1024 bytes of UTF-8 without NUL (validated by
 * the front-end and by the record decoders).
 */
#ifndef TALLY_CMD_GEO_H
#define TALLY_CMD_GEO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "cmd/itemlist.h"
#include "core/geo.h"

/* The journal ids of the geo sets operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_GEOADD = 60,
    CMD_ID_ZREM = 61,
    CMD_ID_GEOPOS = 62,
    CMD_ID_GEOHASH = 63,
    CMD_ID_GEODIST = 64,
    CMD_ID_GEOSEARCH = 65,
    CMD_ID_GEOSEARCHSTORE = 66,
    CMD_ID_ZRANGE = 67,
};

typedef struct cmd_geoadd_args {
    const char *key;
    size_t klen;
    cmd_items_t members;         /* 1..CMD_ITEMS_MAX, each with its score (num) */
    bool nx, xx, ch;             /* not nx and xx both */
} cmd_geoadd_args_t;

typedef struct cmd_geo_members_args {
    const char *key;
    size_t klen;
    cmd_items_t members;         /* ZREM: 1..CMD_ITEMS_MAX; GEOPOS, GEOHASH: 0..CMD_ITEMS_MAX */
    uint64_t *scores;            /* GEOPOS, GEOHASH: out, one per member */
    bool *found;                 /* GEOPOS, GEOHASH: out, one per member */
} cmd_geo_members_args_t;

typedef struct cmd_geodist_args {
    const char *key;
    size_t klen;
    const char *from, *to;
    size_t flen, tlen;
    double to_m;                 /* metres per unit */
} cmd_geodist_args_t;

typedef struct cmd_geosearch_args {
    const char *key;             /* GEOSEARCHSTORE: the destination */
    size_t klen;
    const char *source;          /* the set searched (GEOSEARCH: ignored, the key is) */
    size_t slen;
    const char *member;          /* the centre, or NULL for q.shape's lon/lat */
    size_t mlen;
    geo_query_t q;
    bool withdist, withcoord, withhash;   /* GEOSEARCH: what the answer prints (its estimate) */
} cmd_geosearch_args_t;

typedef struct cmd_zrange_args {
    const char *key;
    size_t klen;
    bool by_score;               /* else by rank */
    bool rev;                    /* from the highest score */
    int64_t start, stop;         /* by rank: as Redis, negative from the end */
    double min, max;             /* by score (not NaN) */
    bool minex, maxex;           /* exclusive bounds ("(1.5") */
    int64_t offset, limit;       /* by score: LIMIT (offset < 0: none; limit < 0: all) */
    bool withscores;             /* what the answer prints (its estimate) */
} cmd_zrange_args_t;

typedef struct cmd_geo_res {
    uint64_t n;                  /* GEOADD added, ZREM removed, GEOSEARCH and GEOSEARCHSTORE found */
    uint64_t count;              /* GEOPOS, GEOHASH: the set's members (0: no key; ZCARD) */
    bool found;                  /* GEODIST: both members exist */
    double distance;             /* GEODIST, in the unit asked for */
    geo_hit_t *hits;             /* GEOSEARCH, ZRANGE: n hits (members copied): cmd_geo_res_free */
} cmd_geo_res_t;
void cmd_geo_res_free(cmd_geo_res_t *r);

extern const cmd_def_t CMD_GEOADD, CMD_ZREM, CMD_GEOPOS, CMD_GEOHASH, CMD_GEODIST, CMD_GEOSEARCH,
    CMD_GEOSEARCHSTORE, CMD_ZRANGE;

#endif
