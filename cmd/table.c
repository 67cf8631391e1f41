/* table.c - every operation of the command table, by family. */
#include "cmd/table.h"

/* counters */
#include "cmd/counter.h"


/* keys, dumps, HyperLogLog, Bloom, Cuckoo, geo */
#include "cmd/bloom.h"
#include "cmd/cuckoo.h"
#include "cmd/geo.h"
#include "cmd/keys_ops.h"
#include "cmd/uv.h"


/* Count-Min, Top-K, T-Digest, bitmaps, activity, geo */
#include "cmd/activity.h"
#include "cmd/bits.h"
#include "cmd/cms.h"
#include "cmd/tdigest.h"
#include "cmd/topk.h"


/* rate limiting */
#include "cmd/throttle.h"


/* time series */
#include "cmd/ts.h"


const cmd_def_t *const cmd_defs[] = {
    /* counters */
    &CMD_INCRBY,
    &CMD_COUNTER_GET,


    /* keys, dumps, HyperLogLog, Bloom, Cuckoo, geo */
    &CMD_SCAN,
    &CMD_KEY_INFO,
    &CMD_DEL,
    &CMD_PEXPIRE,
    &CMD_PERSIST,
    &CMD_DUMP,
    &CMD_RESTORE,
    &CMD_PFADD,
    &CMD_PFCOUNT,
    &CMD_PFMERGE,
    &CMD_HLL_EXPORT,
    &CMD_HLL_IMPORT,
    &CMD_BF_RESERVE,
    &CMD_BF_INSERT,
    &CMD_BF_MEXISTS,
    &CMD_BF_EXISTS,
    &CMD_BF_INFO,
    &CMD_BF_CARD,
    &CMD_BF_SCANDUMP,
    &CMD_BF_LOADCHUNK,
    &CMD_CF_RESERVE,
    &CMD_CF_INSERT,
    &CMD_CF_MEXISTS,
    &CMD_CF_EXISTS,
    &CMD_CF_DEL,
    &CMD_CF_COUNT,
    &CMD_CF_INFO,
    &CMD_CF_COMPACT,
    &CMD_CF_SCANDUMP,
    &CMD_CF_LOADCHUNK,
    &CMD_GEOADD,
    &CMD_ZREM,
    &CMD_GEOPOS,
    &CMD_GEOHASH,
    &CMD_GEODIST,
    &CMD_GEOSEARCH,
    &CMD_GEOSEARCHSTORE,


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
    &CMD_CL_THROTTLE,
    &CMD_THROTTLE_SLIDING_LOG,
    &CMD_THROTTLE_SLIDING_WINDOW,
    &CMD_THROTTLE_FIXED_WINDOW,
    &CMD_THROTTLE_TOKEN_BUCKET,
    &CMD_THROTTLE_BATCH,
    &CMD_THROTTLE_RESET,


    /* time series */
    &CMD_TS_CREATE,
    &CMD_TS_ADD,
    &CMD_TS_INCRBY,
    &CMD_TS_DECRBY,
    &CMD_TS_ALTER,
    &CMD_TS_DEL,
    &CMD_TS_CREATERULE,
    &CMD_TS_DELETERULE,
    &CMD_TS_INFO,
    &CMD_TS_RANGE,
    &CMD_TS_REVRANGE,
    &CMD_TS_QUERYINDEX,
    &CMD_TS_MGET,
    &CMD_TS_MRANGE,
    &CMD_TS_MREVRANGE,


};

const size_t cmd_ndefs = sizeof(cmd_defs) / sizeof(cmd_defs[0]);
