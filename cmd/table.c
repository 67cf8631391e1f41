/* table.c - every operation of the command table, by family. */
#include "cmd/table.h"

/* counters */
#include "cmd/counter.h"


/* keys, dumps, HyperLogLog, Bloom, Cuckoo */


/* Count-Min, Top-K, T-Digest, bitmaps, activity, geo */


/* rate limiting */


/* time series */
#include "cmd/ts.h"


const cmd_def_t *const cmd_defs[] = {
    /* counters */
    &CMD_INCRBY,
    &CMD_COUNTER_GET,


    /* keys, dumps, HyperLogLog, Bloom, Cuckoo */


    /* Count-Min, Top-K, T-Digest, bitmaps, activity, geo */


    /* rate limiting */


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
