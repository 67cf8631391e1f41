/*
 * cuckoo.h - Cuckoo filters as operations: RedisBloom's CF.* (core/cuckoo.h
 * teaches the structure).
 *
 *   CF.RESERVE    creates an empty filter (capacity, bucket size, maximum
 *                 evictions, expansion, fingerprint bits); EXISTS when the
 *                 key holds a filter already.
 *   CF.INSERT     adds items (CF.ADD; with `nx` CF.ADDNX: an item that may
 *                 be present is not added again), creating the filter with
 *                 RedisBloom's CF.ADD defaults (capacity 1024).  added[i]
 *                 tells whether item i was added.  A batch is all or
 *                 nothing: when the filter cannot take an item (no slot, no
 *                 sub-filter can be added) the batch is refused
 *                 (OUT_OF_MEMORY) and the filter rolled back (RedisBloom's
 *                 CF.INSERT answers -1 for each item that found no room and
 *                 keeps the others).  A filter made with expansion 0 never
 *                 grows; one with 32 sub-filters refuses every add
 *                 ("Maximum expansions reached").  Room is asked for what
 *                 the batch adds, as for BF.INSERT.
 *                 The Redis protocol's CF.INSERT adds RedisBloom's options
 *                 and rule: `nocreate` (NOT_FOUND for a missing filter),
 *                 `capacity` (the filter's when the insert creates it), and
 *                 `partial`: an item that finds no room (or would need a
 *                 33rd sub-filter) is skipped and flagged in noroom[], the
 *                 others kept, and a filter that has its 32 sub-filters
 *                 already refuses the batch whole (RedisBloom checks that
 *                 once, before the items).
 *   CF.MEXISTS    whether each item may be present (false for all at a
 *   CF.EXISTS     missing key); CF.EXISTS is the one-item form.
 *   CF.DEL        removes one copy of each item (removed[i]); NOT_FOUND
 *                 when the filter is missing.
 *   CF.COUNT      the copies of an item's fingerprint (may overcount; 0 at
 *                 a missing key).
 *   CF.INFO       the filter's parameters and counts (NOT_FOUND when missing).
 *   CF.COMPACT    moves fingerprints into older sub-filters and frees the
 *                 emptied newest ones; answers the info after it.
 *   CF.SCANDUMP   RedisBloom's dump and load, chunk by chunk
 *   CF.LOADCHUNK  (cmd/filterdump.h); only 8-bit fingerprints have a dump.
 *
 * The eviction generator is seeded from the key, so a key rebuilt by replay
 * makes the same choices.  The parameters are validated by the front-end
 * (cuckoo_validate, with its field names) and by the record decoders.
 */
#ifndef TALLY_CMD_CUCKOO_H
#define TALLY_CMD_CUCKOO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "cmd/filterdump.h"
#include "cmd/itemlist.h"
#include "core/cuckoo.h"

/* The journal ids of the Cuckoo filters operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_CF_RESERVE = 40,
    CMD_ID_CF_INSERT = 41,
    CMD_ID_CF_MEXISTS = 42,
    CMD_ID_CF_EXISTS = 43,
    CMD_ID_CF_DEL = 44,
    CMD_ID_CF_COUNT = 45,
    CMD_ID_CF_INFO = 46,
    CMD_ID_CF_COMPACT = 47,
    CMD_ID_CF_SCANDUMP = 48,
    CMD_ID_CF_LOADCHUNK = 49,
};

typedef struct cmd_cf_reserve_args {
    const char *key;
    size_t klen;
    cuckoo_params_t p;           /* cuckoo_validate(&p, 0) holds */
} cmd_cf_reserve_args_t;

typedef struct cmd_cf_items_args {
    const char *key;
    size_t klen;
    cmd_items_t items;           /* 1..CMD_ITEMS_MAX */
    bool nx;                     /* CF.INSERT: CF.ADDNX's rule */
    bool *out;                   /* per item (CF.INSERT added, CF.MEXISTS found, CF.DEL removed); may be NULL
                                    for a change */
    /* CF.INSERT only (all zero: HTTP's insert) */
    bool nocreate;               /* NOT_FOUND for a missing filter */
    uint64_t capacity;           /* of the filter the insert creates (0: CUCKOO_DEFAULT_CAPACITY) */
    bool partial;                /* skip the items that find no room instead of refusing the batch */
    bool *noroom;                /* out with partial, per item (may be NULL) */
} cmd_cf_items_args_t;

typedef struct cmd_cf_count_args {
    const char *key;
    size_t klen;
    const char *item;
    size_t ilen;
} cmd_cf_count_args_t;

typedef struct cmd_cf_key_args {
    const char *key;
    size_t klen;
} cmd_cf_key_args_t;             /* CF.INFO, CF.COMPACT */

typedef struct cmd_cf_res {
    uint64_t n;                  /* items added, found or removed; CF.COUNT: the count */
} cmd_cf_res_t;

typedef struct cmd_cf_info_res {
    cuckoo_info_t info;
} cmd_cf_info_res_t;

extern const cmd_def_t CMD_CF_RESERVE, CMD_CF_INSERT, CMD_CF_MEXISTS, CMD_CF_EXISTS, CMD_CF_DEL, CMD_CF_COUNT,
    CMD_CF_INFO, CMD_CF_COMPACT, CMD_CF_SCANDUMP, CMD_CF_LOADCHUNK;

#endif
