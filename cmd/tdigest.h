/*
 * tdigest.h - T-Digest's operations (RedisBloom's TDIGEST.*; the structure
 * and its answers, edge cases included, are core/tdigest.h).  A digest is
 * created before use: every other operation refuses a missing key
 * (NOT_FOUND), except TDIGEST.MERGE, which creates its destination.  Every
 * change leaves the digest flushed (no buffered values), so reads never
 * have to merge.
 *
 *   TDIGEST.CREATE        a digest of the given compression (EXISTS when the
 *                         key holds one).
 *   TDIGEST.ADD           adds the values (finite numbers); refused whole when
 *                         the digest would hold more than 2^53 values.
 *   TDIGEST.QUANTILE      the value at each quantile (in [0, 1]);
 *   TDIGEST.CDF           the fraction of values at or below each value;
 *   TDIGEST.RANK,         each value's rank, from the bottom or the top;
 *   TDIGEST.REVRANK
 *   TDIGEST.BYRANK,       the value of each rank, from the bottom or the top.
 *   TDIGEST.BYREVRANK     Each of these walks the digest once per value: n
 *                         values may walk it at most as far as a request may
 *                         read (CMD_WORK_VALUES x --max-value-size).
 *   TDIGEST.TRIMMED_MEAN  the mean of the values between two quantiles
 *                         (low < high).
 *   TDIGEST.MIN, .MAX     the smallest and largest value (NaN when empty).
 *   TDIGEST.MERGE         the destination becomes the merge of the sources
 *                         (and, without `override`, of itself when it
 *                         exists), with the given compression or else the
 *                         existing destination's (without `override`) or the
 *                         largest of the sources'.  A source named twice
 *                         counts twice, as in RedisBloom.  The sources read
 *                         may total CMD_WORK_VALUES x --max-value-size.
 *   TDIGEST.RESET         empties the digest, keeping its compression.
 *   TDIGEST.INFO          compression, capacity, nodes and weights, memory,
 *                         min and max.
 *
 * Records (after the version byte 1; lists as cmd/batch.h lays them out):
 *   TDIGEST.CREATE   key | u32 compression
 *   TDIGEST.ADD      key | f64 values
 *   TDIGEST.MERGE    key | sources (keys) | u32 compression (0: none given) | u8 override
 *   TDIGEST.RESET    key
 */
#ifndef TALLY_CMD_TDIGEST_H
#define TALLY_CMD_TDIGEST_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/batch.h"
#include "cmd/def.h"

/* The journal ids of the T-Digest operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_TDIGEST_CREATE = 120,
    CMD_ID_TDIGEST_ADD = 121,
    CMD_ID_TDIGEST_QUANTILE = 122,
    CMD_ID_TDIGEST_CDF = 123,
    CMD_ID_TDIGEST_RANK = 124,
    CMD_ID_TDIGEST_REVRANK = 125,
    CMD_ID_TDIGEST_BYRANK = 126,
    CMD_ID_TDIGEST_BYREVRANK = 127,
    CMD_ID_TDIGEST_TRIMMED_MEAN = 128,
    CMD_ID_TDIGEST_MIN = 129,
    CMD_ID_TDIGEST_MAX = 130,
    CMD_ID_TDIGEST_MERGE = 131,
    CMD_ID_TDIGEST_RESET = 132,
    CMD_ID_TDIGEST_INFO = 133,
};

typedef struct cmd_tdigest_info {
    uint32_t compression, capacity, merged_nodes, unmerged_nodes;
    uint64_t merged_weight, unmerged_weight, total_compressions;
    uint64_t observations;
    uint64_t size_bytes;
    double min, max;             /* NaN when empty */
} cmd_tdigest_info_t;

typedef struct cmd_tdigest_key_args {
    const char *key;
    size_t klen;
} cmd_tdigest_key_args_t;

typedef struct cmd_tdigest_create_args {
    const char *key;
    size_t klen;
    uint32_t compression;        /* 1..TDIGEST_MAX_COMPRESSION */
} cmd_tdigest_create_args_t;

typedef struct cmd_tdigest_add_args {
    const char *key;
    size_t klen;
    cmd_array_t values;          /* double: 1..CMD_BATCH_MAX finite values */
} cmd_tdigest_add_args_t;

typedef struct cmd_tdigest_add_res {
    uint64_t observations;       /* the digest's values after the add */
} cmd_tdigest_add_res_t;

/* TDIGEST.QUANTILE, CDF, RANK, REVRANK, BYRANK, BYREVRANK. */
typedef struct cmd_tdigest_query_args {
    const char *key;
    size_t klen;
    size_t n;
    const double *values;        /* QUANTILE (each in [0, 1]), CDF, RANK, REVRANK */
    const uint64_t *ranks;       /* BYRANK, BYREVRANK */
    double *out;                 /* out: n answers of QUANTILE, CDF, BYRANK, BYREVRANK */
    int64_t *out_ranks;          /* out: n answers of RANK, REVRANK */
} cmd_tdigest_query_args_t;

/* TDIGEST.TRIMMED_MEAN (low, high in [0, 1]), MIN, MAX. */
typedef struct cmd_tdigest_scalar_args {
    const char *key;
    size_t klen;
    double low, high;
} cmd_tdigest_scalar_args_t;

typedef struct cmd_tdigest_scalar_res {
    double v;
} cmd_tdigest_scalar_res_t;

typedef struct cmd_tdigest_merge_args {
    const char *key;             /* the destination */
    size_t klen;
    cmd_batch_t sources;         /* keys */
    uint32_t compression;        /* 1..TDIGEST_MAX_COMPRESSION; 0: none given */
    bool override;
} cmd_tdigest_merge_args_t;

extern const cmd_def_t CMD_TDIGEST_CREATE, CMD_TDIGEST_ADD, CMD_TDIGEST_QUANTILE, CMD_TDIGEST_CDF, CMD_TDIGEST_RANK,
    CMD_TDIGEST_REVRANK, CMD_TDIGEST_BYRANK, CMD_TDIGEST_BYREVRANK, CMD_TDIGEST_TRIMMED_MEAN, CMD_TDIGEST_MIN,
    CMD_TDIGEST_MAX, CMD_TDIGEST_MERGE, CMD_TDIGEST_RESET, CMD_TDIGEST_INFO;

#endif
