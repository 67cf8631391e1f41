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


    /* time series (300-399) */
    CMD_ID_TS_CREATE = 300,
    CMD_ID_TS_ADD = 301,
    CMD_ID_TS_INCRBY = 302,
    CMD_ID_TS_DECRBY = 303,
    CMD_ID_TS_ALTER = 304,
    CMD_ID_TS_DEL = 305,
    CMD_ID_TS_CREATERULE = 306,
    CMD_ID_TS_DELETERULE = 307,
    CMD_ID_TS_INFO = 308,
    CMD_ID_TS_RANGE = 309,
    CMD_ID_TS_REVRANGE = 310,
    CMD_ID_TS_QUERYINDEX = 311,
    CMD_ID_TS_MGET = 312,
    CMD_ID_TS_MRANGE = 313,
    CMD_ID_TS_MREVRANGE = 314,


    CMD_ID_END_
};

#endif
