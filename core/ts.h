/*
 * ts.h - a time series with RedisTimeSeries semantics, stored in
 * Gorilla-compressed chunks.
 *
 * A series is a set of samples (timestamp in ms, double value) with at most
 * one sample per timestamp, plus its configuration: retention, duplicate
 * policy and labels.  It answers what TS.ADD / TS.MADD / TS.RANGE /
 * TS.REVRANGE / TS.DEL / TS.INFO answer; the algorithm and the chunks' byte
 * layout are described at the top of ts.c, the snapshot encoding at the top
 * of ts_codec.c (core/ts_impl.h lists the parts).
 *
 * Semantics (RedisTimeSeries, see ../shared/REFERENCE.md):
 *   - Timestamps are integers in [0, TS_MAX_TIMESTAMP] (RedisTimeSeries uses
 *     uint64 ms and refuses negative input; we keep them in int64).
 *   - Values are finite doubles or NaN (a missing reading, as RedisTimeSeries
 *     stores it); infinities are refused upstream and never stored.  A NaN
 *     cannot be combined by the MIN, MAX or SUM duplicate policies (either
 *     side NaN: refused like BLOCK, CORE_DUPLICATE).  Aggregations skip NaN
 *     samples, except countNaN (counts only them) and countAll (counts all).
 *   - Retention R (ms, 0 = keep everything) is measured from the newest
 *     sample N: samples older than N - R are gone; adding a sample with
 *     N - t > R fails with CORE_TOO_OLD ("Timestamp is older than
 *     retention").  t = N - R is still accepted and visible.
 *   - A sample at a timestamp that already holds one is resolved by the
 *     duplicate policy: BLOCK refuses it (CORE_DUPLICATE), FIRST keeps the
 *     old value, LAST takes the new one, MIN/MAX keep the smaller/larger, SUM
 *     adds.  Never silently lost: with BLOCK the caller is told.
 *   - ts_add() of a batch is all or nothing: either every sample is applied
 *     as if added one at a time in the given order, or nothing changes.
 *
 * Ownership: ts_create() returns a series owned by the caller (normally
 * handed to the keyspace, which frees it through ts_type.free).  Label
 * strings passed in are copied.  Nothing here locks: the caller holds the
 * shard lock.
 */
#ifndef TALLY_TS_H
#define TALLY_TS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/types.h"

/* The on-disk tag of Gorilla-compressed time series values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_TS = 12 };

#define TS_MAX_TIMESTAMP INT64_MAX   /* largest timestamp (ms): RedisTimeSeries parses a long long >= 0 */
#define TS_MAX_LABELS 128            /* labels per series: enough for any real tagging scheme */
#define TS_MAX_LABEL_LEN 1024        /* bytes in a label name or value, like a key */
#define TS_CHUNK_BYTES 4096          /* a chunk's stream is full past this (RedisTimeSeries's default chunk size) */

typedef enum ts_policy {
    TS_DUP_BLOCK = 0,   /* RedisTimeSeries's default */
    TS_DUP_FIRST,
    TS_DUP_LAST,
    TS_DUP_MIN,
    TS_DUP_MAX,
    TS_DUP_SUM,
    TS_DUP__COUNT
} ts_policy_t;

typedef enum ts_agg {
    TS_AGG_NONE = 0,
    TS_AGG_AVG,
    TS_AGG_SUM,
    TS_AGG_MIN,
    TS_AGG_MAX,
    TS_AGG_RANGE,
    TS_AGG_COUNT,
    TS_AGG_FIRST,
    TS_AGG_LAST,
    TS_AGG_STD_P,
    TS_AGG_STD_S,
    TS_AGG_VAR_P,
    TS_AGG_VAR_S,
    TS_AGG_TWA,          /* time-weighted average over the linear interpolation */
    TS_AGG_COUNT_NAN,    /* NaN samples */
    TS_AGG_COUNT_ALL,    /* every sample, NaN or not */
    TS_AGG_QUANTILE,     /* pNN: the bucket's quantile (ts_query_t.quantile; exact up to TS_QUANTILE_EXACT_MAX values) */
    TS_AGG__COUNT
} ts_agg_t;

/* Which instant of a bucket its result is reported at (BUCKETTIMESTAMP). */
typedef enum ts_bucket_ts {
    TS_BUCKET_START = 0,
    TS_BUCKET_END,
    TS_BUCKET_MID
} ts_bucket_ts_t;

/* ts_add and ts_range answer a core_status_t: CORE_OK, CORE_TOO_OLD (older
 * than retention, measured from the newest sample), CORE_DUPLICATE (the
 * timestamp holds a sample and the policy is BLOCK), CORE_OVERFLOW (the
 * policy's result is not finite: SUM of huge values) or CORE_NOMEM. */

typedef struct ts ts_t;

typedef struct ts_sample {
    int64_t ts;
    double value;
} ts_sample_t;

typedef struct ts_label {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} ts_label_t;

extern const ks_type_t ts_type;

/* ------------------------------------------------------------------------ */
/* Names                                                                    */
/* ------------------------------------------------------------------------ */

/* "block", "first", ...; and back (case-insensitive).  Parse returns false
 * for an unknown name. */
const char *ts_policy_name(ts_policy_t p);
bool ts_policy_parse(const char *s, ts_policy_t *out);
/* "avg", "sum", ..., "std.p", "var.s"; TS_AGG_NONE has no name. */
const char *ts_agg_name(ts_agg_t a);
bool ts_agg_parse(const char *s, ts_agg_t *out);
/* ts_agg_parse, and "pNN" (NN a number from 0 to 100: p50, p99, p99.9) as
 * TS_AGG_QUANTILE with *q = NN / 100.  The quantile of a bucket's n sorted
 * values x is exact up to TS_QUANTILE_EXACT_MAX values, interpolated
 * linearly between closest ranks: h = (n - 1)·q,
 * x[floor h] + (h - floor h)·(x[floor h + 1] - x[floor h]); a bigger bucket
 * is summarised by a T-Digest of compression TS_QUANTILE_COMPRESSION (rank
 * error within 0.05% at the median, 0.02% toward the tails; tests/unit/test_ts),
 * so one bucket never holds more than 512 KiB of values.  Its name back:
 * ts_agg_format ("p99" for 0.99). */
#define TS_QUANTILE_EXACT_MAX 65536
#define TS_QUANTILE_COMPRESSION 500
bool ts_agg_parse_any(const char *s, ts_agg_t *out, double *q);
void ts_agg_format(ts_agg_t a, double q, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Series                                                                   */
/* ------------------------------------------------------------------------ */

/* A new empty series; labels are copied (names must be distinct, the caller
 * checks lengths against TS_MAX_LABEL_LEN and count against TS_MAX_LABELS).
 * NULL on allocation failure. */
ts_t *ts_create(int64_t retention_ms, ts_policy_t policy, const ts_label_t *labels, size_t nlabels);
/* NULL is a no-op. */
void ts_free(ts_t *ts);

int64_t ts_retention(const ts_t *ts);
ts_policy_t ts_policy(const ts_t *ts);
size_t ts_label_count(const ts_t *ts);
ts_label_t ts_label_at(const ts_t *ts, size_t i);

/* Adds n samples as if one at a time in order, resolving duplicates with
 * `policy` (the series' own policy or a per-request ON_DUPLICATE).  All or
 * nothing: on any error nothing changed and *failed (if not NULL) is the
 * index of the first sample that fails in that order (0 for CORE_NOMEM).
 * Timestamps must be in [0, TS_MAX_TIMESTAMP] and values finite or NaN. */
core_status_t ts_add(ts_t *ts, const ts_sample_t *samples, size_t n, ts_policy_t policy, size_t *failed);

/* TS.INCRBY / TS.DECRBY: adds a sample at t whose value is the newest
 * sample's value (0 for an empty series) plus `by`, resolving a sample
 * already at t by LAST.  CORE_UNORDERED when t is before the newest sample,
 * CORE_OVERFLOW when the newest value is NaN or the result is not finite
 * (nothing changes), else what ts_add answers; *value receives the value
 * written. */
core_status_t ts_incrby(ts_t *ts, int64_t t, double by, double *value);

/* TS.ALTER: changes the retention (trimming at once what falls out of it) and
 * the duplicate policy. */
void ts_set_retention(ts_t *ts, int64_t retention_ms);
void ts_set_policy(ts_t *ts, ts_policy_t policy);
/* Replaces every label (same rules as ts_create); false on allocation
 * failure, with the old labels kept. */
bool ts_set_labels(ts_t *ts, const ts_label_t *labels, size_t nlabels);

/* The newest sample; false when the series is empty. */
bool ts_last(const ts_t *ts, ts_sample_t *out);

/* ------------------------------------------------------------------------ */
/* Compaction rules (TS.CREATERULE)                                         */
/* ------------------------------------------------------------------------ */

/* A rule of a source series: each closed bucket of the source (every bucket
 * before the one holding its newest sample, the "open" bucket) is
 * aggregated into one sample of the destination series, at the bucket's
 * start.  The destination names its source (ts_source) so that one series
 * is the destination of one rule at most; a source is not a destination and
 * a destination has no rules of its own (no chains).  Links are by key name
 * and checked where used: a rule whose destination is gone, or no longer
 * names this source, is dropped by the caller. */
typedef struct ts_rule {
    const char *dest;
    size_t dest_len;
    ts_agg_t agg;
    int64_t bucket_ms;
    int64_t align;
    double quantile;       /* TS_AGG_QUANTILE */
    uint8_t gen;           /* TS_RULE_GEN_*: the rules it computes by, for life */
    int64_t since;         /* generation 2: the source's newest timestamp when it was created, -1 none */
} ts_rule_t;

/* A rule computes its buckets by the rules of the generation that created it
 * (a journal replays to the state it was written with):
 *   1  before issue 37: twa over the polyline weighted by shares of the
 *      window; a rule created on a non-empty source aggregates the samples
 *      written before it too
 *   2  RedisTimeSeries's: twa in its arithmetic (ts_range), and the bucket
 *      that was open when the rule was created aggregates only the samples
 *      after `since` - until a write other than an in-order append (or a
 *      deletion) touches it, when it is recomputed from every sample, as
 *      RedisTimeSeries's context then is (ts_rule_touch). */
enum { TS_RULE_GEN_1 = 1, TS_RULE_GEN_2 = 2 };

#define TS_MAX_RULES 64   /* rules per source */

size_t ts_rule_count(const ts_t *ts);
ts_rule_t ts_rule_at(const ts_t *ts, size_t i);
/* Index of the rule writing to dest, or -1. */
long ts_rule_find(const ts_t *ts, const char *dest, size_t len);
/* Adds a rule (dest copied); false on allocation failure. */
bool ts_rule_add(ts_t *ts, const ts_rule_t *rule);
void ts_rule_remove(ts_t *ts, size_t i);
/* The source this series is the destination of (NULL, 0 when none). */
const char *ts_source(const ts_t *ts, size_t *len);
/* Sets (name != NULL) or clears the source; false on allocation failure. */
bool ts_set_source(ts_t *ts, const char *name, size_t len);

/* The aggregate of the source's counted samples in the bucket starting at b
 * (CORE_OK with *has = false when it holds none). */
core_status_t ts_rule_bucket(const ts_t *src, const ts_rule_t *rule, int64_t b, double *value, bool *has);
/* The open bucket: the one holding the source's newest sample, still
 * changing; false when the source is empty. */
bool ts_rule_open_bucket(const ts_t *src, const ts_rule_t *rule, ts_sample_t *out);

/* Before rule i of src is applied after a write (samples t[0..n) added when
 * the newest was old_newest; or, t NULL, a deletion of [from, to]): a
 * generation-2 rule forgets `since` when the write touches the bucket that
 * was open at its creation otherwise than by appending after old_newest. */
void ts_rule_touch(ts_t *src, size_t i, int64_t old_newest, const int64_t *t, size_t n, int64_t from, int64_t to);

/* Applies a rule after samples were added to src (old_newest: the newest
 * timestamp before them, -1 when src was empty; t[0..n): their timestamps):
 * every closed bucket they touched, and the bucket that was open and closed
 * now, is recomputed from src and written into dst at its start (replacing
 * what is there; buckets older than dst's retention are skipped).  After
 * a deletion of [from, to] (ts_rule_deleted) every closed bucket of dst in
 * that span is recomputed, and removed when it holds no sample any more. */
core_status_t ts_rule_added(const ts_t *src, const ts_rule_t *rule, int64_t old_newest, const int64_t *t, size_t n,
                            ts_t *dst);
core_status_t ts_rule_deleted(const ts_t *src, const ts_rule_t *rule, int64_t from, int64_t to, ts_t *dst);

/* Whether a deletion starting at `from` reaches before the retention window
 * in the way RedisTimeSeries refuses for a series with compaction rules
 * (TS.DEL: "deleting samples or compaction buckets beyond the series
 * retention period is not possible"): with a retention, `from` (rule NULL)
 * or the start of the rule's bucket holding `from` is older than the newest
 * sample minus the retention.  A destination bucket holds samples the
 * source no longer has there, so it could only be rebuilt from part of
 * them. */
bool ts_delete_beyond_retention(const ts_t *ts, const ts_rule_t *rule, int64_t from);

/* Deletes the samples with from <= t <= to (TS.DEL).  Returns how many went
 * (0 leaves the series untouched), or -1 on allocation failure (unchanged). */
int64_t ts_delete_range(ts_t *ts, int64_t from, int64_t to);

typedef struct ts_info {
    uint64_t samples;        /* visible samples (within retention) */
    int64_t first_ts;        /* -1 when empty */
    int64_t last_ts;         /* -1 when empty */
    size_t memory_bytes;     /* heap owned by the series, as ts_type.size */
    size_t chunks;
    size_t data_bytes;       /* compressed sample bytes in use (without headers and slack) */
} ts_info_t;

void ts_get_info(const ts_t *ts, ts_info_t *out);

/* Chunk i (< ts_info_t.chunks) of the series, oldest first: its stored
 * samples (hidden ones below the retention included) and their first and
 * last timestamps (TS.INFO DEBUG). */
typedef struct ts_chunk_info {
    uint64_t samples;
    int64_t first_ts, last_ts;
} ts_chunk_info_t;
void ts_get_chunk_info(const ts_t *ts, size_t i, ts_chunk_info_t *out);

/* ------------------------------------------------------------------------ */
/* Label filters (TS.MGET / TS.MRANGE / TS.QUERYINDEX)                      */
/* ------------------------------------------------------------------------ */

/* One matcher of RedisTimeSeries's filter syntax:
 *   l=v       the label l is v            l!=v       l is not v (or absent)
 *   l=        l is absent                 l!=        l is present
 *   l=(a,b)   l is one of a, b            l!=(a,b)   l is none of them (or absent)
 *   l=()      nothing (an empty list)     l!=()      everything
 * Values point into the parsed text. */
#define TS_FILTER_MAX_VALUES 64

typedef struct ts_matcher {
    const char *name;
    size_t name_len;
    bool negate;                         /* != */
    bool list;                           /* (a,b,...): nvalues may be 0 */
    size_t nvalues;                      /* 0 without a list: l= (absent) / l!= (present) */
    const char *value[TS_FILTER_MAX_VALUES];
    size_t value_len[TS_FILTER_MAX_VALUES];
} ts_matcher_t;

/* Parses one filter; false with *why set on bad syntax. */
bool ts_matcher_parse(const char *s, size_t len, ts_matcher_t *out, const char **why);
/* Whether a matcher selects series (l=v, l=(a,b), l=()): a query needs one. */
bool ts_matcher_positive(const ts_matcher_t *m);
/* Whether the series satisfies every matcher. */
bool ts_matches(const ts_t *ts, const ts_matcher_t *m, size_t n);
/* The value of label `name`, or NULL. */
const char *ts_label_get(const ts_t *ts, const char *name, size_t len, size_t *vlen);

/* Bookkeeping for a label index kept by the caller (api/ts_index.c): every
 * series starts "unindexed" (created, or decoded from a snapshot or a dump)
 * until ts_mark_indexed; while any unindexed series exists in the process
 * an index may be missing some, and queries must scan.  ts_label_pairs_alive
 * is the number of (label, series) pairs of every live series, to bound an
 * index's stale entries.  Process-wide, atomic. */
void ts_mark_indexed(ts_t *ts);
long ts_unindexed_count(void);
long ts_label_pairs_alive(void);

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct ts_query {
    int64_t from, to;              /* inclusive, from <= to */
    bool reverse;                  /* newest first (TS.REVRANGE) */
    uint64_t count;                /* most samples/buckets to emit; 0 = all */
    bool has_min, has_max;         /* FILTER_BY_VALUE, inclusive bounds */
    double min, max;
    const int64_t *filter_ts;      /* FILTER_BY_TS: sorted ascending, or NULL */
    size_t nfilter_ts;
    ts_agg_t agg;                  /* TS_AGG_NONE: raw samples */
    int64_t bucket_ms;             /* > 0 with an aggregation */
    int64_t align;                 /* buckets start where (t - align) mod bucket_ms == 0 */
    ts_bucket_ts_t bucket_ts;
    bool empty;                    /* EMPTY: also report empty buckets (see ts_range) */
    bool has_extra;                /* LATEST: one more sample after every stored one (a source's open bucket) */
    ts_sample_t extra;
    uint64_t max_results;          /* > 0: CORE_LIMIT instead of emitting more (bounds EMPTY) */
    double quantile;               /* TS_AGG_QUANTILE: in [0, 1] */
    size_t naggs;                  /* > 1: several aggregations (agg=min,max), aggs[0] == agg (ts_range_rows) */
    const ts_agg_t *aggs;
    const double *quantiles;       /* their quantiles (TS_AGG_QUANTILE) */
    bool legacy_twa;               /* twa of a rule of generation 1 (see ts_rule_t.gen) */
    bool no_before;                /* twa: no neighbour before `from` (a rule's fresh start) */
} ts_query_t;

#define TS_MAX_AGGS 16             /* aggregations in one query, as RedisTimeSeries's TS_AGG_TYPES_MAX */

/* Receives each result in order; returns false to stop with CORE_NOMEM. */
typedef bool (*ts_emit_fn)(void *ud, int64_t ts, double value);
/* Receives each bucket of several aggregations: values[0..n) in the order of q->aggs. */
typedef bool (*ts_emit_row_fn)(void *ud, int64_t ts, const double *values, size_t n);

/* Runs a range query: samples in [from, to] within retention, filtered by
 * timestamp then value (a NaN passes no value filter), optionally aggregated
 * into buckets starting at t - ((t - align) mod bucket_ms) (reported as
 * max(0, start) [+ bucket or bucket/2]), in time order or reversed, at most
 * `count` results.  Within a bucket samples are aggregated in time order
 * whatever the direction, with RedisTimeSeries's formulas (see ts_agg.c); an
 * aggregation skips the samples it does not count (NaN, except for countNaN
 * and countAll).  Without EMPTY, a bucket is reported when it holds a sample
 * the aggregation counts.
 *
 * EMPTY (q->empty) follows RedisTimeSeries's aggregation iterator: the
 * buckets come from the query's samples (in range, passing the filters, NaN
 * included), so a bucket holding only samples the aggregation skips is
 * reported too, with the empty value; so are the empty buckets between two
 * buckets of samples, and those from the bucket of `from` before the first
 * (to the bucket of `to` after the last; the whole range when it holds no
 * sample) when a valid sample - not NaN, passing the filters, in or out of
 * range - lies before and one after them.  The empty value is 0 for sum,
 * count, countNaN and countAll; for last the last valid sample before the
 * bucket; for twa RedisTimeSeries's twa_calc_empty_bucket_val (the average of
 * the line between the valid samples around it at its window's two ends; with
 * samples on one side only, the nearest when within half their step); NaN
 * otherwise.
 *
 * twa is RedisTimeSeries's, in its arithmetic (the same bits): over the
 * bucket's window [max(start, from), min(start + bucket_ms, to)], the
 * trapezoids between its valid samples and, along the line to the
 * neighbour, to the window's ends - the neighbour before is the last valid
 * sample of the previous bucket of samples (none when that bucket had only
 * NaN), or for the first bucket the nearest valid sample before it; the one
 * after is the first sample of the next bucket when it is valid, or for the
 * last bucket the nearest valid sample after it - summed in the order the
 * query walks and divided by the span from the first point to the last (a
 * zero span reports the last sample's value).  A rule of generation 1
 * (q->legacy_twa) computes the older polyline average instead.
 *
 * Returns CORE_OK, CORE_NOMEM, or CORE_LIMIT when more than q->max_results
 * would be emitted (the results emitted so far are to be discarded). */
core_status_t ts_range(const ts_t *ts, const ts_query_t *q, ts_emit_fn emit, void *ud);
/* ts_range of several aggregations (q->naggs >= 1): a row per bucket.  A
 * bucket is reported when any of them counts a sample in it (or with
 * EMPTY); the others report their empty value there. */
core_status_t ts_range_rows(const ts_t *ts, const ts_query_t *q, ts_emit_row_fn emit, void *ud);

/* One aggregation over values[0..n) in order (GROUPBY ... REDUCE): the
 * values it counts (see ts_range); when it counts none, 0 for count,
 * countNaN and countAll, NaN for the others. */
double ts_reduce(ts_agg_t a, const double *v, size_t n);

/* The first timestamp of the bucket holding t (may be negative). */
int64_t ts_bucket_start(int64_t t, int64_t bucket_ms, int64_t align);

#endif
