/*
 * cms.h - the Count-Min sketch's operations (RedisBloom's CMS.*; the
 * structure is core/cms.h).  Like RedisBloom, a sketch is created before
 * use: every other operation refuses a missing key (NOT_FOUND).
 *
 *   CMS.INITBYDIM   creates a width x depth sketch (EXISTS when the key holds
 *                   one).  CMS.INITBYPROB is the same operation: its front-end
 *                   turns error and probability into the dimensions
 *                   (cms_dims_from_prob, RedisBloom's arithmetic) and says so
 *                   with `by_prob` (the size is then blamed on 'error').  A
 *                   sketch past CMS_MAX_CELLS counters is refused.
 *   CMS.INCRBY      adds each item's increment (0 reads it) and answers each
 *                   item's estimate after its own increment.  A batch that
 *                   would take the sketch's total past 2^63 - 1 is refused
 *                   whole (nothing is added).
 *   CMS.QUERY       each item's estimate (never below its true count).
 *   CMS.MERGE       overwrites the destination (which must exist) with the
 *                   weighted sum of the sources (weights 1 when none are
 *                   given; negative ones subtract).  A source named several
 *                   times is read once with its weights summed; a merge where
 *                   a counter or the total would fall below 0 or pass
 *                   2^63 - 1 is refused whole (RedisBloom's "CMS: MERGE
 *                   overflow"); sources must have the destination's width and
 *                   depth; the sources read may total at most
 *                   CMD_WORK_VALUES x --max-value-size.
 *   CMS.INFO        width, depth, total count, conservative update, memory.
 *
 * Records (after the version byte 1; lists as cmd/batch.h lays them out):
 *   CMS.INITBYDIM   key | u64 width | u64 depth | u8 conservative | u8 by_prob
 *   CMS.INCRBY      key | u8 as_increments | items with increments
 *   CMS.MERGE       key | sources (keys) | i64 weights (none, or one a source)
 */
#ifndef TALLY_CMD_CMS_H
#define TALLY_CMD_CMS_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/batch.h"
#include "cmd/def.h"

/* The journal ids of the Count-Min sketches operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_CMS_INITBYDIM = 100,
    CMD_ID_CMS_INCRBY = 101,
    CMD_ID_CMS_QUERY = 102,
    CMD_ID_CMS_MERGE = 103,
    CMD_ID_CMS_INFO = 104,
};

/* What CMS.INFO answers (and the creation and the merge). */
typedef struct cmd_cms_info {
    uint32_t width, depth;
    uint64_t count;              /* the total of all increments */
    bool conservative;
    uint64_t size_bytes;
} cmd_cms_info_t;

typedef struct cmd_cms_initbydim_args {
    const char *key;
    size_t klen;
    uint64_t width, depth;       /* >= 1 */
    bool conservative;           /* conservative update (Estan and Varghese) */
    bool by_prob;                /* the dimensions come from error and probability (CMS.INITBYPROB) */
} cmd_cms_initbydim_args_t;

typedef struct cmd_cms_incrby_args {
    const char *key;
    size_t klen;
    cmd_batch_t items;           /* increments 0..CMS_MAX_COUNT */
    bool as_increments;          /* given as increments (messages name 'increments'; else 'items') */
    uint64_t *counts;            /* out, not journaled: items.n estimates, or NULL */
} cmd_cms_incrby_args_t;

typedef struct cmd_cms_query_args {
    const char *key;
    size_t klen;
    cmd_batch_t items;
    uint64_t *counts;            /* out: items.n estimates */
} cmd_cms_query_args_t;

typedef struct cmd_cms_merge_args {
    const char *key;             /* the destination */
    size_t klen;
    cmd_batch_t sources;         /* keys */
    cmd_array_t weights;         /* int64_t, one a source; n == 0: 1 each */
} cmd_cms_merge_args_t;

typedef struct cmd_cms_key_args {
    const char *key;
    size_t klen;
} cmd_cms_key_args_t;

extern const cmd_def_t CMD_CMS_INITBYDIM, CMD_CMS_INCRBY, CMD_CMS_QUERY, CMD_CMS_MERGE, CMD_CMS_INFO;

#endif
