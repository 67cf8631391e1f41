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


/* rate limiting */


/* time series */


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


    /* rate limiting */


    /* time series */


};

const size_t cmd_ndefs = sizeof(cmd_defs) / sizeof(cmd_defs[0]);
