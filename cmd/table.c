/* table.c - every operation of the command table, by family. */
#include "cmd/table.h"

/* counters */
#include "cmd/counter.h"


/* keys, dumps, HyperLogLog, Bloom, Cuckoo */


/* Count-Min, Top-K, T-Digest, bitmaps, activity, geo */


/* rate limiting */
#include "cmd/throttle.h"


/* time series */


const cmd_def_t *const cmd_defs[] = {
    /* counters */
    &CMD_INCRBY,
    &CMD_COUNTER_GET,


    /* keys, dumps, HyperLogLog, Bloom, Cuckoo */


    /* Count-Min, Top-K, T-Digest, bitmaps, activity, geo */


    /* rate limiting */
    &CMD_CL_THROTTLE,
    &CMD_THROTTLE_SLIDING_LOG,
    &CMD_THROTTLE_SLIDING_WINDOW,
    &CMD_THROTTLE_FIXED_WINDOW,
    &CMD_THROTTLE_TOKEN_BUCKET,
    &CMD_THROTTLE_BATCH,
    &CMD_THROTTLE_RESET,


    /* time series */


};

const size_t cmd_ndefs = sizeof(cmd_defs) / sizeof(cmd_defs[0]);
