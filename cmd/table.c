/* table.c - every operation of the command table, by family. */
#include "cmd/table.h"

/* counters */
#include "cmd/counter.h"


/* keys, dumps, HyperLogLog, Bloom, Cuckoo */


/* Count-Min, Top-K, T-Digest, bitmaps, activity, geo */
#include "cmd/activity.h"
#include "cmd/bits.h"
#include "cmd/cms.h"
#include "cmd/tdigest.h"
#include "cmd/topk.h"


/* rate limiting */


/* time series */


const cmd_def_t *const cmd_defs[] = {
    /* counters */
    &CMD_INCRBY,
    &CMD_COUNTER_GET,


    /* keys, dumps, HyperLogLog, Bloom, Cuckoo */


    /* Count-Min, Top-K, T-Digest, bitmaps, activity, geo */
    &CMD_CMS_INITBYDIM,
    &CMD_CMS_INCRBY,
    &CMD_CMS_QUERY,
    &CMD_CMS_MERGE,
    &CMD_CMS_INFO,
    &CMD_TOPK_RESERVE,
    &CMD_TOPK_ADD,
    &CMD_TOPK_INCRBY,
    &CMD_TOPK_LIST,
    &CMD_TOPK_QUERY,
    &CMD_TOPK_INFO,
    &CMD_TDIGEST_CREATE,
    &CMD_TDIGEST_ADD,
    &CMD_TDIGEST_QUANTILE,
    &CMD_TDIGEST_CDF,
    &CMD_TDIGEST_RANK,
    &CMD_TDIGEST_REVRANK,
    &CMD_TDIGEST_BYRANK,
    &CMD_TDIGEST_BYREVRANK,
    &CMD_TDIGEST_TRIMMED_MEAN,
    &CMD_TDIGEST_MIN,
    &CMD_TDIGEST_MAX,
    &CMD_TDIGEST_MERGE,
    &CMD_TDIGEST_RESET,
    &CMD_TDIGEST_INFO,
    &CMD_SET,
    &CMD_GET,
    &CMD_GETRANGE,
    &CMD_SETBIT,
    &CMD_GETBIT,
    &CMD_BITCOUNT,
    &CMD_BITPOS,
    &CMD_BITOP,
    &CMD_BITFIELD,
    &CMD_BITFIELD_RO,
    &CMD_ACTIVITY_ADD,
    &CMD_ACTIVITY_IMPORT,
    &CMD_ACTIVITY_COUNT,
    &CMD_ACTIVITY_USERS,
    &CMD_ACTIVITY_RETENTION,
    &CMD_ACTIVITY_INFO,


    /* rate limiting */


    /* time series */


};

const size_t cmd_ndefs = sizeof(cmd_defs) / sizeof(cmd_defs[0]);
