/*
 * ts_impl.h - what the files of the time series share inside core (not a
 * public header: only core/ts*.c include it).  The series' representation
 * (chunks, labels, rules) and the helpers every part reads it with; the
 * layout and the algorithm are described at the top of ts.c.
 *
 *   ts.c         chunks, the series, adding, deleting, INCRBY, ALTER, info
 *   ts_rule.c    compaction rules
 *   ts_filter.c  label filters
 *   ts_agg.c     names, aggregators, GROUPBY's reduce
 *   ts_range.c   range queries (EMPTY, twa, several aggregations)
 *   ts_codec.c   the snapshot encoding (ts_type)
 *
 * Functions defined in one of them and called from another are prefixed
 * tsi_.
 */
#ifndef TALLY_TS_IMPL_H
#define TALLY_TS_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/gorilla.h"
#include "core/tdigest.h"
#include "core/ts.h"

#define TS_CHUNK_MAX_SAMPLES 1024     /* bounds the cost of an out-of-order insert (one decode) */
#define TS_CHUNK_MAX_BYTES TS_CHUNK_BYTES   /* a chunk is full past this many stream bytes */
#define TS_SAMPLE_MAX_BITS GORILLA_SAMPLE_MAX_BITS   /* one more sample, at worst */
#define TS_CHUNK_CAP_MAX (TS_CHUNK_MAX_BYTES + (TS_SAMPLE_MAX_BITS + 7) / 8)   /* room for one more sample */
#define TS_CHUNK_MIN_CAP 32           /* first allocation of a chunk's stream */
#define TS_MIN_SAMPLES_PER_FULL_CHUNK ((TS_CHUNK_MAX_BYTES * 8) / TS_SAMPLE_MAX_BITS)   /* 224 */

/* ======================================================================== */
/* Chunks                                                                   */
/* ======================================================================== */


typedef struct ts_chunk {
    int64_t first_ts;
    int64_t last_ts;
    int64_t prev_delta;     /* last_ts - the timestamp before it (0 with one sample) */
    uint64_t prev_bits;     /* the last value's bit pattern */
    uint32_t count;
    uint32_t nbits;
    uint32_t cap;           /* bytes of data[] */
    uint8_t lead, trail;    /* the XOR window, lead = GORILLA_NO_WINDOW before the first '11' */
    uint8_t data[];
} ts_chunk_t;

static inline size_t chunk_bytes(const ts_chunk_t *c) { return sizeof(ts_chunk_t) + c->cap; }

static inline bool chunk_full(const ts_chunk_t *c)
{
    return c->count >= TS_CHUNK_MAX_SAMPLES || c->nbits >= TS_CHUNK_MAX_BYTES * 8;
}

/* The chunk's encoder state, and back (the chunk keeps its own layout). */
static inline gorilla_enc_t chunk_enc(const ts_chunk_t *c)
{
    return (gorilla_enc_t){ c->first_ts, c->last_ts, c->prev_delta, c->prev_bits, c->count, c->nbits, c->lead,
                            c->trail };
}

static inline void chunk_set_enc(ts_chunk_t *c, const gorilla_enc_t *e)
{
    c->first_ts = e->first_ts;
    c->last_ts = e->last_ts;
    c->prev_delta = e->prev_delta;
    c->prev_bits = e->prev_bits;
    c->count = e->count;
    c->nbits = e->nbits;
    c->lead = e->lead;
    c->trail = e->trail;
}

/* Decodes a chunk we wrote (cannot fail on our own streams). */
static inline void chunk_decode(const ts_chunk_t *c, int64_t *t, double *v)
{
    (void)gorilla_decode(c->data, c->nbits, c->count, c->first_ts, TS_MAX_TIMESTAMP, t, v, NULL);
}

/* ======================================================================== */
/* The series                                                               */
/* ======================================================================== */

typedef struct ts_lbl {
    char *name;             /* one allocation: name NUL value NUL */
    char *value;
    uint32_t nlen, vlen;
} ts_lbl_t;

typedef struct ts_rl {
    char *dest;             /* NUL-terminated copy */
    uint32_t dlen;
    ts_agg_t agg;
    int64_t bucket_ms, align;
    double quantile;
    uint8_t gen;
    int64_t since;
} ts_rl_t;

struct ts {
    ts_chunk_t **chunks;    /* sorted by time, non-overlapping */
    size_t nchunks, cap;
    uint64_t total;         /* samples stored, including any below the retention cutoff */
    int64_t retention;      /* ms, 0 = forever */
    ts_policy_t policy;
    ts_lbl_t *labels;
    size_t nlabels;
    size_t mem;             /* heap bytes owned, kept current for O(1) ts_type.size */
    ts_rl_t *rules;         /* compaction rules of this source */
    size_t nrules;
    char *src;              /* the source this series is the destination of, or NULL */
    uint32_t src_len;
    bool indexed;           /* ts_mark_indexed was called */
};


static inline bool has_samples(const ts_t *ts) { return ts->nchunks > 0; }
static inline int64_t newest(const ts_t *ts) { return ts->chunks[ts->nchunks - 1]->last_ts; }

/* Samples below this are gone (INT64_MIN: none). */
static inline int64_t cutoff_for(int64_t retention, int64_t newest_ts)
{
    return retention > 0 ? newest_ts - retention : INT64_MIN;
}

static inline int64_t cutoff(const ts_t *ts)
{
    return has_samples(ts) ? cutoff_for(ts->retention, newest(ts)) : INT64_MIN;
}

/* Index of the last chunk starting at or before t, or 0 if t precedes all;
 * the series has chunks. */
static inline size_t chunk_for(const ts_t *ts, int64_t t)
{
    size_t lo = 0, hi = ts->nchunks;   /* answer in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts->chunks[mid]->first_ts <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* First index in t[0..n) with t[i] >= x. */
static inline size_t lower_bound(const int64_t *t, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A new empty chunk with `cap` bytes of stream, counted in ts->mem; NULL
 * when out of memory. */
ts_chunk_t *tsi_chunk_new(ts_t *ts, uint32_t cap);
/* Makes the chunk array hold `want` pointers; false when out of memory
 * (unchanged). */
bool tsi_ensure_array(ts_t *ts, size_t want);

/* ======================================================================== */
/* Aggregators (ts_agg.c)                                                   */
/* ======================================================================== */

typedef struct agg {
    ts_agg_t type;
    double q;                  /* TS_AGG_QUANTILE: the quantile, and the bucket's values, */
    double *qv;
    size_t qn, qcap;
    tdigest_t *td;             /* ... or, past TS_QUANTILE_EXACT_MAX of them, a digest of the */
    uint64_t ninf, pinf;       /* finite ones and counts of -inf and +inf */
    bool oom;
    uint64_t n;
    double sum, sum2;
    double min, max, first, last;
    double avg_val, avg_cnt;   /* RedisTimeSeries's AvgContext */
    bool avg_ovf;
} agg_t;

/* Empties the aggregator for a new bucket (keeps its type, quantile and
 * value buffer). */
void tsi_agg_reset(agg_t *a);
/* Counts one value in. */
void tsi_agg_add(agg_t *a, double v);
/* The bucket's value. */
double tsi_agg_final(agg_t *a);
/* Frees what the aggregator holds beyond itself. */
void tsi_agg_release(agg_t *a);
/* Whether aggregation a counts v (RedisTimeSeries's isValueValid); inline:
 * a range asks it of every sample. */
static inline bool agg_counts(ts_agg_t a, double v)
{
    switch (a) {
    case TS_AGG_COUNT_NAN: return isnan(v);
    case TS_AGG_COUNT_ALL:
    case TS_AGG_NONE: return true;
    default: return !isnan(v);
    }
}

/* ts_bucket_start, inlined where buckets are walked sample by sample. */
static inline int64_t bucket_start(int64_t t, int64_t bucket_ms, int64_t align)
{
    int64_t m = (t - align) % bucket_ms;   /* t, align >= 0: the difference fits */
    if (m < 0)
        m += bucket_ms;
    return t - m;
}

#endif
