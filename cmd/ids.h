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


    /* keys, dumps, HyperLogLog, Bloom, Cuckoo (10-59), geo (60-99) */
    CMD_ID_SCAN = 10,
    CMD_ID_KEY_INFO = 11,
    CMD_ID_DEL = 12,
    CMD_ID_PEXPIRE = 13,
    CMD_ID_PERSIST = 14,
    CMD_ID_DUMP = 15,
    CMD_ID_RESTORE = 16,
    CMD_ID_PFADD = 20,
    CMD_ID_PFCOUNT = 21,
    CMD_ID_PFMERGE = 22,
    CMD_ID_HLL_EXPORT = 23,
    CMD_ID_HLL_IMPORT = 24,
    CMD_ID_BF_RESERVE = 30,
    CMD_ID_BF_INSERT = 31,
    CMD_ID_BF_MEXISTS = 32,
    CMD_ID_BF_EXISTS = 33,
    CMD_ID_BF_INFO = 34,
    CMD_ID_BF_CARD = 35,
    CMD_ID_BF_SCANDUMP = 36,
    CMD_ID_BF_LOADCHUNK = 37,
    CMD_ID_CF_RESERVE = 40,
    CMD_ID_CF_INSERT = 41,
    CMD_ID_CF_MEXISTS = 42,
    CMD_ID_CF_EXISTS = 43,
    CMD_ID_CF_DEL = 44,
    CMD_ID_CF_COUNT = 45,
    CMD_ID_CF_INFO = 46,
    CMD_ID_CF_COMPACT = 47,
    CMD_ID_CF_SCANDUMP = 48,
    CMD_ID_CF_LOADCHUNK = 49,
    CMD_ID_GEOADD = 60,
    CMD_ID_ZREM = 61,
    CMD_ID_GEOPOS = 62,
    CMD_ID_GEOHASH = 63,
    CMD_ID_GEODIST = 64,
    CMD_ID_GEOSEARCH = 65,
    CMD_ID_GEOSEARCHSTORE = 66,


    /* Count-Min, Top-K, T-Digest, bitmaps, activity, geo (100-199) */
    /* Count-Min (100-109) */
    CMD_ID_CMS_INITBYDIM = 100,
    CMD_ID_CMS_INCRBY = 101,
    CMD_ID_CMS_QUERY = 102,
    CMD_ID_CMS_MERGE = 103,
    CMD_ID_CMS_INFO = 104,
    /* Top-K (110-119) */
    CMD_ID_TOPK_RESERVE = 110,
    CMD_ID_TOPK_ADD = 111,
    CMD_ID_TOPK_INCRBY = 112,
    CMD_ID_TOPK_LIST = 113,
    CMD_ID_TOPK_QUERY = 114,
    CMD_ID_TOPK_INFO = 115,
    /* T-Digest (120-139) */
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
    /* bit strings (140-159) */
    CMD_ID_SET = 140,
    CMD_ID_GET = 141,
    CMD_ID_GETRANGE = 142,
    CMD_ID_SETBIT = 143,
    CMD_ID_GETBIT = 144,
    CMD_ID_BITCOUNT = 145,
    CMD_ID_BITPOS = 146,
    CMD_ID_BITOP = 147,
    CMD_ID_BITFIELD = 148,
    CMD_ID_BITFIELD_RO = 149,
    /* activity (160-169) */
    CMD_ID_ACTIVITY_ADD = 160,
    CMD_ID_ACTIVITY_IMPORT = 161,
    CMD_ID_ACTIVITY_COUNT = 162,
    CMD_ID_ACTIVITY_USERS = 163,
    CMD_ID_ACTIVITY_RETENTION = 164,
    CMD_ID_ACTIVITY_INFO = 165,


    /* rate limiting (200-299) */
    CMD_ID_CL_THROTTLE = 200,
    CMD_ID_THROTTLE_SLIDING_LOG = 201,
    CMD_ID_THROTTLE_SLIDING_WINDOW = 202,
    CMD_ID_THROTTLE_FIXED_WINDOW = 203,
    CMD_ID_THROTTLE_TOKEN_BUCKET = 204,
    CMD_ID_THROTTLE_BATCH = 205,
    CMD_ID_THROTTLE_RESET = 206,


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
