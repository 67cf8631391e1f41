/*
 * ts.h - time series as operations: RedisTimeSeries's commands on the
 * series of core/ts.h (its semantics: retention, duplicate policies, NaN,
 * aggregations, rules).
 *
 *   TS.CREATE       creates an empty series with its retention, duplicate
 *                   policy and labels; EXISTS when the key holds a series.
 *   TS.ADD          adds samples to one series, as TS.ADD does one and
 *                   TS.MADD several (on one key here): all or nothing, the
 *                   first sample that would fail named (older than the
 *                   retention: BAD_REQUEST; a duplicate the policy refuses:
 *                   EXISTS).  A missing series is created with the options
 *                   given (ignored when it exists, as TS.ADD ignores them);
 *                   on_duplicate is ON_DUPLICATE.  The series' rules then
 *                   write their destinations' closed buckets.
 *   TS.INCRBY,      add a sample at `timestamp` (at or after the newest) whose
 *   TS.DECRBY       value is the newest value plus (minus) `by`, creating
 *                   the series as TS.ADD does.
 *   TS.ALTER        replaces what is given of the retention (trimming at
 *                   once), the duplicate policy and the labels (as a whole).
 *   TS.DEL          deletes the samples with from <= t <= to and recomputes
 *                   the rules' buckets there; a series with rules refuses a
 *                   deletion reaching before its retention window (as
 *                   RedisTimeSeries), except on replay (what was served is
 *                   applied as it was).
 *   TS.CREATERULE   a rule from the series to `dest` (both must exist;
 *                   compactions do not chain; a destination has one source).
 *                   The record holds the rule's generation (core/ts.h): a
 *                   rule computes by the rules it was created with, for life.
 *   TS.DELETERULE   removes it.
 *   TS.INFO         the series' figures, labels, live rules and source.
 *   TS.RANGE,       samples or buckets in [from, to], oldest (newest) first;
 *   TS.REVRANGE     with `latest`, a destination's source's open bucket too.
 *   TS.QUERYINDEX   the keys of the series matching label filters, sorted.
 *   TS.MGET         their newest samples (and labels).
 *   TS.MRANGE,      their ranges (and labels); GROUPBY label REDUCE r
 *   TS.MREVRANGE    merges each group into one series.
 *
 * Links between series (a rule, its destination's source) are by key and
 * checked under the locks of every key involved: a rule whose destination
 * is gone or no longer names the source is stale, never shown, and dropped
 * by the source's next write (RedisTimeSeries drops both halves at once).
 * A write locks the series with its rules' destinations together
 * (cmd/ts_group.h), so that a compaction and its source change under the
 * same locks, in one record: replay finds the same destinations in the same
 * state and writes the same buckets.
 *
 * Reads of several series lock one series at a time, briefly: the answer is
 * assembled afterwards.  Answers are bounded by --max-answer-size (each row
 * counts TS_ROW_BOUND bytes, a row of k values k times); a query that would
 * pass it is refused, as is EMPTY reporting more than TS_MAX_EMPTY_BUCKETS.
 *
 * Results that hold memory (rows, keys, labels) are freed with the _free
 * function of their type.
 */
#ifndef TALLY_CMD_TS_H
#define TALLY_CMD_TS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "core/ts.h"

/* The journal ids of the time series operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
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
};

#define TS_MAX_EMPTY_BUCKETS 1000000   /* buckets one EMPTY query may report (each costs an answer row) */
/* An answer row [ts,value] at most: 20 digits, a shortest double (or a
 * "nan" string), the brackets and commas. */
#define TS_ROW_BOUND 48

/* ------------------------------------------------------------------------ */
/* Arguments                                                                */
/* ------------------------------------------------------------------------ */

/* Labels: a front-end's array (v), or the bytes of a journal record
 * (packed: n x (u32 length, name, u32 length, value), read by
 * cmd_ts_labels_get). */
typedef struct cmd_ts_labels {
    const ts_label_t *v;
    const uint8_t *packed;
    size_t n;
} cmd_ts_labels_t;

/* The labels as an array: l->v, or unpacked into out. */
const ts_label_t *cmd_ts_labels_get(const cmd_ts_labels_t *l, ts_label_t out[TS_MAX_LABELS]);

/* What a series is created with. */
typedef struct cmd_ts_opts {
    int64_t retention_ms;        /* >= 0; 0 keeps everything */
    ts_policy_t policy;
    cmd_ts_labels_t labels;      /* distinct names; lengths within TS_MAX_LABEL_LEN */
} cmd_ts_opts_t;

typedef struct cmd_ts_create_args {
    const char *key;
    size_t klen;
    cmd_ts_opts_t opts;
} cmd_ts_create_args_t;

/* Samples: a front-end's array (v), or a record's bytes (packed: n x (i64
 * timestamp, f64 value)). */
typedef struct cmd_ts_samples {
    const ts_sample_t *v;
    const uint8_t *packed;
    size_t n;
} cmd_ts_samples_t;

typedef struct cmd_ts_add_args {
    const char *key;
    size_t klen;
    cmd_ts_opts_t opts;          /* when the series is created */
    bool has_on_duplicate;
    ts_policy_t on_duplicate;
    cmd_ts_samples_t samples;    /* 1 or more; timestamps resolved (no "now") */
    /* The size of the request as the front-end received it, which bounds
     * what a new series' labels take: part of what the write may add, for
     * --maxmemory and --max-value-size (not journaled: replay is never
     * refused by them). */
    uint64_t request_bytes;
} cmd_ts_add_args_t;

typedef struct cmd_ts_incrby_args {
    const char *key;
    size_t klen;
    cmd_ts_opts_t opts;          /* when the series is created */
    double by;                   /* finite; TS.DECRBY subtracts it */
    int64_t timestamp;           /* >= 0, resolved */
    uint64_t request_bytes;      /* as in cmd_ts_add_args_t */
} cmd_ts_incrby_args_t;

typedef struct cmd_ts_alter_args {
    const char *key;
    size_t klen;
    bool has_retention, has_policy, has_labels;
    int64_t retention_ms;
    ts_policy_t policy;
    cmd_ts_labels_t labels;
} cmd_ts_alter_args_t;

typedef struct cmd_ts_del_args {
    const char *key;
    size_t klen;
    int64_t from, to;            /* >= 0; from > to deletes nothing */
} cmd_ts_del_args_t;

typedef struct cmd_ts_createrule_args {
    const char *key, *dest;
    size_t klen, dlen;
    ts_agg_t agg;
    double quantile;             /* TS_AGG_QUANTILE; else 0 */
    int64_t bucket_ms;           /* >= 1 */
    int64_t align;               /* >= 0 */
    unsigned gen;                /* TS_RULE_GEN_*: 2 for a rule created now; what a replayed request carried */
} cmd_ts_createrule_args_t;

typedef struct cmd_ts_deleterule_args {
    const char *key, *dest;
    size_t klen, dlen;
} cmd_ts_deleterule_args_t;

/* A key (TS.INFO). */
typedef struct cmd_ts_key_args {
    const char *key;
    size_t klen;
} cmd_ts_key_args_t;

/* TS.RANGE / TS.REVRANGE.  The operation sets the query's direction, its
 * max_results and its LATEST sample itself; filter_ts, aggs and quantiles
 * stay the caller's. */
typedef struct cmd_ts_range_args {
    const char *key;
    size_t klen;
    ts_query_t query;
    bool latest;
} cmd_ts_range_args_t;

/* A name (selected_labels). */
typedef struct cmd_ts_name {
    const char *p;               /* NUL-terminated */
    size_t len;
} cmd_ts_name_t;

/* Which labels a multi-series answer shows: all (WITHLABELS), the named
 * ones (SELECTED_LABELS), or none. */
typedef struct cmd_ts_labelsel {
    bool all;
    const cmd_ts_name_t *names;
    size_t n;
} cmd_ts_labelsel_t;

/* The series of TS.QUERYINDEX, TS.MGET and TS.MRANGE: those matching every
 * matcher, one of them positive (ts_matcher_positive). */
typedef struct cmd_ts_filter {
    const ts_matcher_t *m;
    size_t n;
} cmd_ts_filter_t;

typedef struct cmd_ts_mget_args {
    cmd_ts_filter_t filter;
    cmd_ts_labelsel_t sel;
    bool latest;
} cmd_ts_mget_args_t;

/* With groupby, the query has one aggregation at most, reduce is not twa,
 * first or last, and exclude_empty is not set: a front-end refuses those
 * combinations of its parameters (RedisTimeSeries's rules) as it parses
 * them. */
typedef struct cmd_ts_mrange_args {
    cmd_ts_filter_t filter;
    cmd_ts_labelsel_t sel;
    ts_query_t query;            /* as in cmd_ts_range_args_t */
    bool latest;
    const char *groupby;         /* NUL-terminated; NULL: no grouping */
    ts_agg_t reduce;             /* GROUPBY's REDUCE */
    bool exclude_empty;          /* EXCLUDEEMPTY: series with nothing to answer are left out */
} cmd_ts_mrange_args_t;

/* ------------------------------------------------------------------------ */
/* Results                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct cmd_ts_created_res {
    bool created;                /* TS.ADD, TS.INCRBY: the series was created */
} cmd_ts_created_res_t;

typedef struct cmd_ts_incrby_res {
    int64_t timestamp;
    double value;
    bool created;
} cmd_ts_incrby_res_t;

typedef struct cmd_ts_del_res {
    int64_t deleted;
} cmd_ts_del_res_t;

/* Rows of a range: s[i] the timestamp and first value, more[i * stride ..]
 * the other aggregations' values of the row (agg=min,max). */
typedef struct cmd_ts_rows {
    ts_sample_t *s;
    size_t n, cap;
    double *more;
    size_t stride;
    /* how they are bounded while read (--max-answer-size): at most `max`
     * rows' worth, then `over` */
    bool capped, over;
    size_t max;
} cmd_ts_rows_t;
void cmd_ts_rows_free(cmd_ts_rows_t *r);

typedef struct cmd_ts_range_res {
    cmd_ts_rows_t rows;
} cmd_ts_range_res_t;

/* A rule as TS.INFO shows it. */
typedef struct cmd_ts_rule_shown {
    const char *dest;
    size_t dest_len;
    ts_agg_t agg;
    double quantile;
    int64_t bucket_ms, align;
} cmd_ts_rule_shown_t;

typedef struct cmd_ts_info_res {
    ts_info_t info;
    ts_chunk_info_t *chunks;     /* info.chunks of them, oldest first (TS.INFO DEBUG) */
    int64_t retention_ms;
    ts_policy_t policy;
    ts_label_t *labels;          /* names NUL-terminated */
    size_t nlabels;
    cmd_ts_rule_shown_t *rules;  /* the live rules to keys the caller sees */
    size_t nrules;
    const char *source;          /* the live source, when the caller sees it; else NULL */
    size_t source_len;
    char *text;                  /* holds the names and values above */
} cmd_ts_info_res_t;
void cmd_ts_info_free(cmd_ts_info_res_t *r);

typedef struct cmd_ts_keys_res {
    char **k;                    /* NUL-terminated */
    size_t *len;
    size_t n;
} cmd_ts_keys_res_t;
void cmd_ts_keys_free(cmd_ts_keys_res_t *r);

/* Labels shown: pairs to set in order into an object, a repeated name
 * replacing the value it had (value NULL: null). */
typedef struct cmd_ts_shown {
    const char *name;            /* NUL-terminated */
    const char *value;
    size_t value_len;
} cmd_ts_shown_t;

typedef struct cmd_ts_series {
    char *key;                   /* NUL-terminated; GROUPBY: "label=value" */
    size_t klen;
    bool has_labels;             /* labels were asked for */
    cmd_ts_shown_t *labels;
    size_t nlabels;
    bool has_sample;             /* TS.MGET */
    ts_sample_t sample;
    cmd_ts_rows_t rows;          /* TS.MRANGE */
    char *group;                 /* (while grouping: the series' value of the label) */
    void *mem;                   /* owns labels */
} cmd_ts_series_t;

typedef struct cmd_ts_multi_res {
    cmd_ts_series_t *v;
    size_t n;
} cmd_ts_multi_res_t;
void cmd_ts_multi_free(cmd_ts_multi_res_t *r);

extern const cmd_def_t CMD_TS_CREATE, CMD_TS_ADD, CMD_TS_INCRBY, CMD_TS_DECRBY, CMD_TS_ALTER, CMD_TS_DEL,
    CMD_TS_CREATERULE, CMD_TS_DELETERULE, CMD_TS_INFO, CMD_TS_RANGE, CMD_TS_REVRANGE, CMD_TS_QUERYINDEX,
    CMD_TS_MGET, CMD_TS_MRANGE, CMD_TS_MREVRANGE;

#endif
