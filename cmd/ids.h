/*
 * ids.h - the journal ids of the operations (cmd/def.h): a command record
 * names its operation by this number, so a number is never reused nor
 * changed once a release wrote it - an operation that goes keeps its number
 * retired here.  Read-only operations have ids too (they are never
 * journaled; the numbers name them in tests and in COMMAND's order).
 *
 * Ranges by family group, so that families grow without renumbering:
 *   1-9      counters
 *   10-99    keys, dumps, unique visitors (HyperLogLog), Bloom, Cuckoo
 *   100-199  Count-Min, Top-K, T-Digest, bitmaps, activity, geo
 *   200-299  rate limiting: throttle, limiters, the gateway hook, policies
 *   300-399  time series
 */
#ifndef TALLY_CMD_IDS_H
#define TALLY_CMD_IDS_H

enum cmd_id {
    /* counters (1-9) */
    CMD_ID_INCRBY = 1,
    CMD_ID_COUNTER_GET = 2,


    /* keys, dumps, HyperLogLog, Bloom, Cuckoo (10-99) */


    /* Count-Min, Top-K, T-Digest, bitmaps, activity, geo (100-199) */


    /* rate limiting (200-299) */
    CMD_ID_CL_THROTTLE = 200,
    CMD_ID_THROTTLE_SLIDING_LOG = 201,
    CMD_ID_THROTTLE_SLIDING_WINDOW = 202,
    CMD_ID_THROTTLE_FIXED_WINDOW = 203,
    CMD_ID_THROTTLE_TOKEN_BUCKET = 204,
    CMD_ID_THROTTLE_BATCH = 205,
    CMD_ID_THROTTLE_RESET = 206,


    /* time series (300-399) */


    CMD_ID_END_
};

#endif
