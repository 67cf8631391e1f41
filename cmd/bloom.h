/*
 * bloom.h - Bloom filters as operations: RedisBloom's BF.* (core/bloom.h
 * teaches the structure).
 *
 *   BF.RESERVE    creates an empty filter with an error rate, a capacity and
 *                 an expansion (0, or scaling false: it never grows); EXISTS
 *                 when the key holds a filter already.
 *   BF.INSERT     adds items (BF.MADD; with options BF.INSERT), creating the
 *                 filter with the options given (RedisBloom's BF.ADD defaults
 *                 otherwise: error 0.01, capacity 100, expansion 2) unless
 *                 `nocreate` (NOT_FOUND for a missing filter).  added[i]
 *                 tells whether item i was new.  A batch is all or nothing:
 *                 when a non-scaling filter fills up part-way (RedisBloom
 *                 answers "non scaling filter is full" for the item that did
 *                 not fit and keeps the earlier ones) the whole batch is
 *                 refused (OUT_OF_MEMORY) and the filter rolled back.  Room
 *                 is asked for what the batch adds: a new filter, and the
 *                 sub-filters it grows, which are added only while the
 *                 filter stays within what the limits allow now; one that
 *                 would pass them stops the batch, which is rolled back and
 *                 either refused (--max-value-size) or started again once
 *                 room is made.
 *                 With `partial` (the Redis protocol's BF.MADD and
 *                 BF.INSERT, RedisBloom's rule) such a batch keeps the items
 *                 before the one that did not fit (a non-scaling filter
 *                 full, or a sub-filter that cannot be built) and stops
 *                 there: res.done items were run, the last one refused
 *                 when res.stop says why.
 *   BF.MEXISTS    whether each item may have been added (false for all at a
 *   BF.EXISTS     missing key); BF.EXISTS is the one-item form.
 *   BF.INFO       the filter's parameters and counts (NOT_FOUND when missing).
 *   BF.CARD       the items added (0 for a missing key).
 *   BF.SCANDUMP   RedisBloom's dump and load, chunk by chunk (cmd/filterdump.h).
 *   BF.LOADCHUNK
 *
 * Each item looked up or added walks every sub-filter, newest first: items x
 * sub-filters is bounded like what a request may read (cmd_work_fits).
 *
 * The parameters are validated by the front-end (bloom_validate, with its
 * field names) and by the record decoders: the operations take them as
 * valid.
 */
#ifndef TALLY_CMD_BLOOM_H
#define TALLY_CMD_BLOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "cmd/filterdump.h"
#include "cmd/itemlist.h"
#include "core/bloom.h"

/* The journal ids of the Bloom filters operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_BF_RESERVE = 30,
    CMD_ID_BF_INSERT = 31,
    CMD_ID_BF_MEXISTS = 32,
    CMD_ID_BF_EXISTS = 33,
    CMD_ID_BF_INFO = 34,
    CMD_ID_BF_CARD = 35,
    CMD_ID_BF_SCANDUMP = 36,
    CMD_ID_BF_LOADCHUNK = 37,
};

/* A filter's creation parameters (bloom_validate holds for them). */
typedef struct cmd_bf_params {
    double error;
    uint64_t capacity;
    uint32_t expansion;          /* 0: non-scaling */
    bool scaling;
} cmd_bf_params_t;

typedef struct cmd_bf_reserve_args {
    const char *key;
    size_t klen;
    cmd_bf_params_t p;
} cmd_bf_reserve_args_t;

typedef struct cmd_bf_insert_args {
    const char *key;
    size_t klen;
    cmd_items_t items;           /* 1..CMD_ITEMS_MAX */
    bool nocreate;
    cmd_bf_params_t p;           /* the filter's, when the insert creates it */
    bool *added;                 /* out, items.n entries (NULL: not wanted) */
    bool partial;                /* stop at an item the filter cannot take, keeping the earlier ones */
} cmd_bf_insert_args_t;

typedef struct cmd_bf_exists_args {
    const char *key;
    size_t klen;
    cmd_items_t items;
    bool *found;                 /* out, items.n entries */
} cmd_bf_exists_args_t;

typedef struct cmd_bf_key_args {
    const char *key;
    size_t klen;
} cmd_bf_key_args_t;             /* BF.INFO, BF.CARD */

typedef struct cmd_bf_res {
    size_t n;                    /* BF.INSERT: items added; BF.MEXISTS: items found */
    /* BF.INSERT: the items run (items.n unless a partial batch stopped),
     * and why the last of them was refused: 0 (it was not), BLOOM_FULL (a
     * non-scaling filter is full) or BLOOM_LIMIT (the next sub-filter
     * cannot be built) */
    size_t done;
    int stop;
} cmd_bf_res_t;

typedef struct cmd_bf_info_res {
    bloom_info_t info;           /* BF.CARD: info.items only */
} cmd_bf_info_res_t;

extern const cmd_def_t CMD_BF_RESERVE, CMD_BF_INSERT, CMD_BF_MEXISTS, CMD_BF_EXISTS, CMD_BF_INFO, CMD_BF_CARD,
    CMD_BF_SCANDUMP, CMD_BF_LOADCHUNK;

#endif
