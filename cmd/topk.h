/*
 * topk.h - Top-K's operations (RedisBloom's TOPK.*, HeavyKeeper; the
 * structure is core/topk.h).  A Top-K is created before use: every other
 * operation refuses a missing key (NOT_FOUND).
 *
 *   TOPK.RESERVE   creates a Top-K keeping k items, with a width x depth
 *                  HeavyKeeper of the given decay (EXISTS when the key holds
 *                  one).  Its decay decisions come from a generator seeded
 *                  from the key, so the same requests on the same key give
 *                  the same answers, live, replayed or reloaded; it is made
 *                  with the rules of the request's generation.
 *   TOPK.ADD       counts each item once; answers, for each, the item it
 *                  pushed out of the list (or none).
 *   TOPK.INCRBY    the same with an increment per item (1..100 000, as
 *                  RedisBloom's limit).
 *   TOPK.LIST      the listed items with their counts, largest first
 *                  (TOPK.LIST WITHCOUNT).
 *   TOPK.QUERY     for each item whether it is listed, and its estimated
 *                  count (TOPK.QUERY and TOPK.COUNT at once).
 *   TOPK.INFO      k, width, depth, decay, memory.
 *
 * The list keeps a copy of each item it takes in: an add asks room for the
 * items' bytes first, and refuses a batch that could take the value past
 * --max-value-size.
 *
 * Records (after the version byte 1; lists as cmd/batch.h lays them out):
 *   TOPK.RESERVE   key | u32 k | u32 width | u32 depth | f64 decay
 *   TOPK.ADD       key | items
 *   TOPK.INCRBY    key | items with increments
 */
#ifndef TALLY_CMD_TOPK_H
#define TALLY_CMD_TOPK_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/batch.h"
#include "cmd/def.h"

/* The journal ids of the Top-K operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_TOPK_RESERVE = 110,
    CMD_ID_TOPK_ADD = 111,
    CMD_ID_TOPK_INCRBY = 112,
    CMD_ID_TOPK_LIST = 113,
    CMD_ID_TOPK_QUERY = 114,
    CMD_ID_TOPK_INFO = 115,
};

typedef struct cmd_topk_info {
    uint32_t k, width, depth;
    double decay;
    uint64_t size_bytes;
} cmd_topk_info_t;

typedef struct cmd_topk_reserve_args {
    const char *key;
    size_t klen;
    uint32_t k;                  /* 1..TOPK_MAX_K */
    uint32_t width, depth;       /* >= 1 */
    double decay;                /* in (0, 1] */
} cmd_topk_reserve_args_t;

/* An item the list held, as an answer owns it. */
typedef struct cmd_topk_item {
    char *p;                     /* malloc'd (the caller frees it); NULL: none */
    size_t len;
} cmd_topk_item_t;

/* TOPK.ADD and TOPK.INCRBY. */
typedef struct cmd_topk_add_args {
    const char *key;
    size_t klen;
    cmd_batch_t items;           /* TOPK.INCRBY: increments 1..TOPK_MAX_INCREMENT */
    cmd_topk_item_t *expelled;   /* out, not journaled: items.n items pushed out (p NULL: none), or NULL */
} cmd_topk_add_args_t;

typedef struct cmd_topk_query_args {
    const char *key;
    size_t klen;
    cmd_batch_t items;
    bool *listed;                /* out: items.n */
    uint64_t *counts;            /* out: items.n */
} cmd_topk_query_args_t;

typedef struct cmd_topk_key_args {
    const char *key;
    size_t klen;
} cmd_topk_key_args_t;

/* TOPK.LIST's answer: copies of the listed items, free with
 * cmd_topk_list_free. */
typedef struct cmd_topk_entry {
    const char *item;            /* into the answer's text */
    size_t len;
    uint64_t count;
} cmd_topk_entry_t;

typedef struct cmd_topk_list_res {
    size_t n;
    cmd_topk_entry_t *v;
    char *text;
} cmd_topk_list_res_t;

void cmd_topk_list_free(cmd_topk_list_res_t *r);

extern const cmd_def_t CMD_TOPK_RESERVE, CMD_TOPK_ADD, CMD_TOPK_INCRBY, CMD_TOPK_LIST, CMD_TOPK_QUERY, CMD_TOPK_INFO;

#endif
