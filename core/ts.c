/*
 * ts.c - Gorilla-compressed time series (see ts.h for the semantics).
 *
 * Compression: Pelkonen et al., "Gorilla: A Fast, Scalable, In-Memory Time
 * Series Database", VLDB 2015, as RedisTimeSeries does; the codec is
 * core/gorilla.c.  Samples are kept in time order in chunks of at most
 * TS_CHUNK_MAX_SAMPLES samples; each chunk is one bit stream (most
 * significant bit first):
 *
 *   sample 0:  64 bits  the value's IEEE-754 pattern   (its timestamp is in the header)
 *   sample k:  timestamp as delta-of-delta D = (t_k - t_k-1) - (t_k-1 - t_k-2),
 *              zigzag-coded Z = (D << 1) ^ (D >> 63), with the first delta
 *              taken against a previous delta of 0:
 *                '0'                      Z = 0        (regular interval: 1 bit)
 *                '10'    +  7 bits        Z < 2^7      (jitter up to +-64 ms)
 *                '110'   + 12 bits        Z < 2^12
 *                '1110'  + 20 bits        Z < 2^20
 *                '11110' + 32 bits        Z < 2^32
 *                '11111' + 64 bits        anything
 *              then the value as X = bits(v_k) XOR bits(v_k-1):
 *                '0'                      X = 0        (same value: 1 bit)
 *                '10' + meaningful bits   X fits the previous window
 *                                         (>= its leading and trailing zeros)
 *                '11' + 5 bits leading zeros (capped at 31)
 *                     + 6 bits (length - 1) + `length` meaningful bits,
 *                                         which sets the window
 *
 * At worst a sample takes 5+64 + 2+5+6+64 = 146 bits.  A regular series of
 * slowly changing values costs about 1 bit of timestamp and a few bits of
 * value per sample (Gorilla reports 1.37 bytes/sample on Facebook's data).
 *
 *   chunk (one allocation)             bytes
 *   first_ts, last_ts, prev_delta        24   last_ts/prev_delta/prev_bits/lead/trail
 *   prev_bits                             8   are the encoder's state, so appending
 *   count, nbits, cap                    12   is O(1) (no decode)
 *   lead, trail (+ padding)               4
 *   data[cap]                           cap   the bit stream; bits past nbits are 0
 *
 * Index: the chunk pointers form one array sorted by time, with
 * non-overlapping ranges (chunk i+1 starts after chunk i ends), found by
 * binary search.  Appending in time order extends the last chunk in place;
 * anything else (an out-of-order sample, a duplicate resolved by the policy,
 * a deletion) decodes the chunks it touches, merges, and re-encodes them into
 * new chunks (split evenly when over the limits) that replace the old ones
 * only once everything succeeded, so a failed request changes nothing.
 *
 * Retention: with R > 0 samples older than newest - R are invisible at once
 * (queries start at that cutoff, counts skip them) and freed a whole chunk at
 * a time as the cutoff passes a chunk's end; a rewritten chunk drops them.
 * Invariant: only the first chunk may hold samples below the cutoff.
 *
 * Memory for one day of 1-second samples (86 400), everything counted
 * (headers, index, slack), measured by tests/unit/test_ts.c:
 *   slowly changing value (0.1 steps in ~10% of seconds)   0.96 bytes/sample
 *   constant value                                          0.32 bytes/sample
 *   random doubles in [0, 1000) (incompressible)            7.76 bytes/sample
 * (a Redis sorted set holding the same samples: ~130 bytes/sample).
 * Per chunk: 48 bytes of header + the stream + 8 bytes in the index.
 *
 * Aggregation follows RedisTimeSeries's compaction.c: bucket start
 * t - ((t - align) mod b), sum accumulated in time order, avg = sum / n with
 * its long-double fallback when the sum would overflow, variance
 * (Σx² - 2·Σx·Σx/n + (Σx/n)²·n) / n and the sample variance var·n/(n-1)
 * (0 for n = 1); std is its square root.  One deviation: a variance that
 * rounding makes slightly negative is reported as 0 (RedisTimeSeries would
 * print it, and NaN for std).
 *
 * Snapshot encoding (version 3), little-endian:
 *   u8 version | u8 policy | i64 retention_ms | u32 nlabels
 *   nlabels x (blob name | blob value)            blob = u32 length + bytes
 *   u32 nrules                                    (version 2 on; 0 in version 1)
 *   nrules x (blob dest | u8 agg | i64 bucket_ms | i64 align | f64 quantile
 *             | u8 gen | i64 since)               (gen, since: version 3 on; 1, -1 before)
 *   u8 has_source [| blob source]                 (version 2 on)
 *   u32 nchunks
 *   nchunks x (u32 count | u32 nbits | i64 first_ts | ceil(nbits/8) bytes of stream)
 * The decoder replays every stream, checking timestamps strictly increase
 * across the whole series, values are finite, padding bits are zero, and
 * the retention invariant above, then rebuilds each chunk's encoder state.
 */
#include "core/ts.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/codec.h"
#include "core/gorilla.h"
#include "core/tdigest.h"

#define TS_ENC_VERSION 3              /* first byte of every encoding (1: before compaction rules, 2: before rule generations; still read) */
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

static size_t chunk_bytes(const ts_chunk_t *c) { return sizeof(ts_chunk_t) + c->cap; }

static bool chunk_full(const ts_chunk_t *c)
{
    return c->count >= TS_CHUNK_MAX_SAMPLES || c->nbits >= TS_CHUNK_MAX_BYTES * 8;
}

/* The chunk's encoder state, and back (the chunk keeps its own layout). */
static gorilla_enc_t chunk_enc(const ts_chunk_t *c)
{
    return (gorilla_enc_t){ c->first_ts, c->last_ts, c->prev_delta, c->prev_bits, c->count, c->nbits, c->lead,
                            c->trail };
}

static void chunk_set_enc(ts_chunk_t *c, const gorilla_enc_t *e)
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

/* Encodes one sample after the chunk's last (t > last_ts); the stream must
 * have room for TS_SAMPLE_MAX_BITS more bits. */
static void chunk_put(ts_chunk_t *c, int64_t t, double v)
{
    gorilla_enc_t e = chunk_enc(c);
    gorilla_put(&e, c->data, t, v);
    chunk_set_enc(c, &e);
}

/* Decodes a chunk we wrote (cannot fail on our own streams). */
static void chunk_decode(const ts_chunk_t *c, int64_t *t, double *v)
{
    (void)gorilla_decode(c->data, c->nbits, c->count, c->first_ts, TS_MAX_TIMESTAMP, t, v, NULL);
}

/* ======================================================================== */
/* The series and its memory accounting                                     */
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

static atomic_long unindexed;     /* live series not yet indexed */
static atomic_long pairs_alive;   /* labels of live series */

void ts_mark_indexed(ts_t *ts)
{
    if (!ts->indexed) {
        ts->indexed = true;
        atomic_fetch_sub(&unindexed, 1);
    }
}

long ts_unindexed_count(void) { return atomic_load(&unindexed); }
long ts_label_pairs_alive(void) { return atomic_load(&pairs_alive); }

static ts_chunk_t *chunk_new(ts_t *ts, uint32_t cap)
{
    ts_chunk_t *c = calloc(1, sizeof(ts_chunk_t) + cap);
    if (!c)
        return NULL;
    c->cap = cap;
    c->lead = GORILLA_NO_WINDOW;
    ts->mem += chunk_bytes(c);
    return c;
}

static void chunk_release(ts_t *ts, ts_chunk_t *c)
{
    if (!c)
        return;
    ts->mem -= chunk_bytes(c);
    free(c);
}

/* Makes room for one more sample; false on allocation failure (unchanged). */
static bool chunk_room(ts_t *ts, ts_chunk_t **pc)
{
    ts_chunk_t *c = *pc;
    uint64_t need = ((uint64_t)c->nbits + TS_SAMPLE_MAX_BITS + 7) / 8;
    if (need <= c->cap)
        return true;
    uint64_t ncap = c->cap * 2ULL;
    if (ncap < TS_CHUNK_MIN_CAP)
        ncap = TS_CHUNK_MIN_CAP;
    if (ncap < need)
        ncap = need;
    if (ncap > TS_CHUNK_CAP_MAX)
        ncap = TS_CHUNK_CAP_MAX;
    if (ncap < need)
        return false;   /* cannot happen: a chunk that is not full always fits one more */
    size_t old = chunk_bytes(c);
    ts_chunk_t *n = realloc(c, sizeof(ts_chunk_t) + ncap);
    if (!n)
        return false;
    memset(n->data + n->cap, 0, ncap - n->cap);
    n->cap = (uint32_t)ncap;
    ts->mem += chunk_bytes(n) - old;
    *pc = n;
    return true;
}

/* Trims a chunk's stream allocation to its size (a failure keeps it as is). */
static ts_chunk_t *chunk_shrink(ts_t *ts, ts_chunk_t *c)
{
    uint32_t used = (c->nbits + 7) / 8;
    if (used >= c->cap)
        return c;
    size_t old = chunk_bytes(c);
    ts_chunk_t *n = realloc(c, sizeof(ts_chunk_t) + used);
    if (!n)
        return c;
    n->cap = used;
    ts->mem -= old - chunk_bytes(n);
    return n;
}

static bool ensure_array(ts_t *ts, size_t want)
{
    if (want <= ts->cap)
        return true;
    size_t ncap = ts->cap ? ts->cap : 4;
    while (ncap < want)
        ncap *= 2;
    ts_chunk_t **n = realloc(ts->chunks, ncap * sizeof(*n));
    if (!n)
        return false;
    ts->mem += (ncap - ts->cap) * sizeof(*n);
    ts->chunks = n;
    ts->cap = ncap;
    return true;
}

static bool has_samples(const ts_t *ts) { return ts->nchunks > 0; }
static int64_t newest(const ts_t *ts) { return ts->chunks[ts->nchunks - 1]->last_ts; }

/* Samples below this are gone (INT64_MIN: none). */
static int64_t cutoff_for(int64_t retention, int64_t newest_ts)
{
    return retention > 0 ? newest_ts - retention : INT64_MIN;
}

static int64_t cutoff(const ts_t *ts)
{
    return has_samples(ts) ? cutoff_for(ts->retention, newest(ts)) : INT64_MIN;
}

/* Frees whole chunks that ended before the cutoff (the last chunk holds the
 * newest sample, so it always stays). */
static void trim(ts_t *ts)
{
    int64_t cut = cutoff(ts);
    size_t k = 0;
    while (k + 1 < ts->nchunks && ts->chunks[k]->last_ts < cut) {
        ts->total -= ts->chunks[k]->count;
        chunk_release(ts, ts->chunks[k]);
        k++;
    }
    if (k) {
        memmove(ts->chunks, ts->chunks + k, (ts->nchunks - k) * sizeof(ts->chunks[0]));
        ts->nchunks -= k;
    }
}

/* Index of the last chunk starting at or before t, or 0 if t precedes all;
 * the series has chunks. */
static size_t chunk_for(const ts_t *ts, int64_t t)
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
static size_t lower_bound(const int64_t *t, size_t n, int64_t x)
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

/* ======================================================================== */
/* Names                                                                    */
/* ======================================================================== */

static const char *const policy_names[TS_DUP__COUNT] = { "block", "first", "last", "min", "max", "sum" };
static const char *const agg_names[TS_AGG__COUNT] = { NULL,    "avg",   "sum",   "min",      "max",     "range",
                                                      "count", "first", "last",  "std.p",    "std.s",   "var.p",
                                                      "var.s", "twa",   "countNaN", "countAll", "quantile" };

const char *ts_policy_name(ts_policy_t p) { return (unsigned)p < TS_DUP__COUNT ? policy_names[p] : "?"; }

bool ts_policy_parse(const char *s, ts_policy_t *out)
{
    for (int i = 0; i < TS_DUP__COUNT; i++)
        if (strcasecmp(s, policy_names[i]) == 0) {
            *out = (ts_policy_t)i;
            return true;
        }
    return false;
}

const char *ts_agg_name(ts_agg_t a) { return (unsigned)a < TS_AGG__COUNT && agg_names[a] ? agg_names[a] : "none"; }

bool ts_agg_parse_any(const char *s, ts_agg_t *out, double *q)
{
    *q = 0;
    if ((s[0] == 'p' || s[0] == 'P') && s[1] >= '0' && s[1] <= '9') {
        char *end;
        double x = strtod(s + 1, &end);
        if (*end || !(x >= 0 && x <= 100))
            return false;
        *out = TS_AGG_QUANTILE;
        *q = x / 100;
        return true;
    }
    return ts_agg_parse(s, out);
}

void ts_agg_format(ts_agg_t a, double q, char *buf, size_t len)
{
    if (a == TS_AGG_QUANTILE)
        snprintf(buf, len, "p%.15g", q * 100);
    else
        snprintf(buf, len, "%s", ts_agg_name(a));
}

bool ts_agg_parse(const char *s, ts_agg_t *out)
{
    for (int i = 1; i < TS_AGG_QUANTILE; i++)
        if (strcasecmp(s, agg_names[i]) == 0) {
            *out = (ts_agg_t)i;
            return true;
        }
    return false;
}

/* ======================================================================== */
/* Create, free, accessors                                                  */
/* ======================================================================== */

ts_t *ts_create(int64_t retention_ms, ts_policy_t policy, const ts_label_t *labels, size_t nlabels)
{
    ts_t *ts = calloc(1, sizeof(*ts));
    if (!ts)
        return NULL;
    ts->retention = retention_ms;
    ts->policy = policy;
    ts->mem = sizeof(*ts);
    atomic_fetch_add(&unindexed, 1);
    if (nlabels) {
        ts->labels = calloc(nlabels, sizeof(ts_lbl_t));
        if (!ts->labels) {
            ts_free(ts);
            return NULL;
        }
        ts->mem += nlabels * sizeof(ts_lbl_t);
        for (size_t i = 0; i < nlabels; i++) {
            size_t sz = labels[i].name_len + labels[i].value_len + 2;
            char *p = malloc(sz);
            if (!p) {
                ts_free(ts);
                return NULL;
            }
            memcpy(p, labels[i].name, labels[i].name_len);
            p[labels[i].name_len] = '\0';
            memcpy(p + labels[i].name_len + 1, labels[i].value, labels[i].value_len);
            p[sz - 1] = '\0';
            ts->labels[i].name = p;
            ts->labels[i].value = p + labels[i].name_len + 1;
            ts->labels[i].nlen = (uint32_t)labels[i].name_len;
            ts->labels[i].vlen = (uint32_t)labels[i].value_len;
            ts->nlabels = i + 1;
            ts->mem += sz;
            atomic_fetch_add(&pairs_alive, 1);
        }
    }
    return ts;
}

void ts_free(ts_t *ts)
{
    if (!ts)
        return;
    if (!ts->indexed)
        atomic_fetch_sub(&unindexed, 1);
    atomic_fetch_sub(&pairs_alive, (long)ts->nlabels);
    for (size_t i = 0; i < ts->nchunks; i++)
        free(ts->chunks[i]);
    free(ts->chunks);
    for (size_t i = 0; i < ts->nlabels; i++)
        free(ts->labels[i].name);
    free(ts->labels);
    for (size_t i = 0; i < ts->nrules; i++)
        free(ts->rules[i].dest);
    free(ts->rules);
    free(ts->src);
    free(ts);
}

int64_t ts_retention(const ts_t *ts) { return ts->retention; }
ts_policy_t ts_policy(const ts_t *ts) { return ts->policy; }
size_t ts_label_count(const ts_t *ts) { return ts->nlabels; }

ts_label_t ts_label_at(const ts_t *ts, size_t i)
{
    ts_label_t l = { ts->labels[i].name, ts->labels[i].nlen, ts->labels[i].value, ts->labels[i].vlen };
    return l;
}

/* ======================================================================== */
/* Rewriting chunks (everything but in-order appends)                       */
/* ======================================================================== */

/* A growable list of chunk pointers. */
typedef struct cvec {
    ts_chunk_t **v;
    size_t n, cap;
} cvec_t;

static bool cvec_push(cvec_t *cv, ts_chunk_t *c)
{
    if (cv->n == cv->cap) {
        size_t ncap = cv->cap ? cv->cap * 2 : 8;
        ts_chunk_t **nv = realloc(cv->v, ncap * sizeof(*nv));
        if (!nv)
            return false;
        cv->v = nv;
        cv->cap = ncap;
    }
    cv->v[cv->n++] = c;
    return true;
}

static void cvec_discard(ts_t *ts, cvec_t *cv)
{
    for (size_t i = 0; i < cv->n; i++)
        chunk_release(ts, cv->v[i]);
    free(cv->v);
    cv->v = NULL;
    cv->n = cv->cap = 0;
}

/* Encodes t[]/v[] (n > 0, strictly increasing) into new chunks appended to
 * cv, split evenly when more than one chunk is needed. */
static bool encode_run(ts_t *ts, const int64_t *t, const double *v, size_t n, cvec_t *cv)
{
    size_t k = (n + TS_CHUNK_MAX_SAMPLES - 1) / TS_CHUNK_MAX_SAMPLES;
    size_t per = (n + k - 1) / k;
    ts_chunk_t *c = NULL;
    for (size_t i = 0; i < n; i++) {
        if (c && (c->count >= per || chunk_full(c))) {
            c = chunk_shrink(ts, c);
            if (!cvec_push(cv, c)) {
                chunk_release(ts, c);
                return false;
            }
            c = NULL;
        }
        if (!c && !(c = chunk_new(ts, TS_CHUNK_MIN_CAP)))
            return false;
        if (!chunk_room(ts, &c)) {
            chunk_release(ts, c);
            return false;
        }
        chunk_put(c, t[i], v[i]);
    }
    c = chunk_shrink(ts, c);
    if (!cvec_push(cv, c)) {
        chunk_release(ts, c);
        return false;
    }
    return true;
}

/* Replaces the old chunk at index aff[k] (ascending) by the new chunks
 * repl->v[rstart[k] .. rstart[k+1]), for each k < naff; when the series has
 * no chunks (naff = 0) all of repl becomes the series.  On success takes the
 * new chunks (repl is emptied) and frees the old ones; on allocation failure
 * changes nothing. */
static bool install(ts_t *ts, const size_t *aff, size_t naff, const size_t *rstart, cvec_t *repl)
{
    size_t nn = ts->nchunks - naff + repl->n;
    ts_chunk_t **arr = NULL;
    size_t acap = 0;
    if (nn) {
        acap = nn < 4 ? 4 : nn;
        arr = malloc(acap * sizeof(*arr));
        if (!arr)
            return false;
    }
    size_t o = 0, k = 0;
    if (ts->nchunks == 0) {
        for (size_t j = 0; j < repl->n; j++)
            arr[o++] = repl->v[j];
    }
    for (size_t i = 0; i < ts->nchunks; i++) {
        if (k < naff && aff[k] == i) {
            for (size_t j = rstart[k]; j < rstart[k + 1]; j++)
                arr[o++] = repl->v[j];
            ts->total -= ts->chunks[i]->count;
            chunk_release(ts, ts->chunks[i]);
            k++;
        } else {
            arr[o++] = ts->chunks[i];
        }
    }
    for (size_t j = 0; j < repl->n; j++)
        ts->total += repl->v[j]->count;
    ts->mem -= ts->cap * sizeof(*arr);
    ts->mem += acap * sizeof(*arr);
    free(ts->chunks);
    ts->chunks = arr;
    ts->nchunks = o;
    ts->cap = acap;
    free(repl->v);
    repl->v = NULL;
    repl->n = repl->cap = 0;
    return true;
}

/* ======================================================================== */
/* Adding samples                                                           */
/* ======================================================================== */

/* A decoded chunk cache for lookups in ascending timestamp order. */
typedef struct dcache {
    int64_t t[TS_CHUNK_MAX_SAMPLES];
    double v[TS_CHUNK_MAX_SAMPLES];
    size_t idx;             /* decoded chunk, SIZE_MAX none */
} dcache_t;

/* Looks for a sample at exactly t; on success stores its value. */
static bool lookup(const ts_t *ts, dcache_t *dc, int64_t t, double *v)
{
    if (!has_samples(ts))
        return false;
    size_t j = chunk_for(ts, t);
    const ts_chunk_t *c = ts->chunks[j];
    if (t < c->first_ts || t > c->last_ts)
        return false;
    if (dc->idx != j) {
        chunk_decode(c, dc->t, dc->v);
        dc->idx = j;
    }
    size_t i = lower_bound(dc->t, c->count, t);
    if (i < c->count && dc->t[i] == t) {
        *v = dc->v[i];
        return true;
    }
    return false;
}

static double apply_policy(ts_policy_t p, double cur, double v)
{
    switch (p) {
    case TS_DUP_FIRST: return cur;
    case TS_DUP_LAST: return v;
    case TS_DUP_MIN: return v < cur ? v : cur;
    case TS_DUP_MAX: return v > cur ? v : cur;
    case TS_DUP_SUM: return cur + v;
    default: return cur;
    }
}

/* In-order appends after the newest sample: extends the last chunk in place,
 * opening new chunks as they fill; rolled back on allocation failure. */
static core_status_t append_run(ts_t *ts, const ts_sample_t *s, size_t n)
{
    if (!ensure_array(ts, ts->nchunks + n / TS_MIN_SAMPLES_PER_FULL_CHUNK + 2))
        return CORE_NOMEM;
    size_t old_n = ts->nchunks;
    gorilla_enc_t saved = old_n ? chunk_enc(ts->chunks[old_n - 1]) : gorilla_empty();
    for (size_t i = 0; i < n; i++) {
        ts_chunk_t **pc = ts->nchunks ? &ts->chunks[ts->nchunks - 1] : NULL;
        if (!pc || chunk_full(*pc)) {
            if (pc)
                *pc = chunk_shrink(ts, *pc);
            ts_chunk_t *c = chunk_new(ts, TS_CHUNK_MIN_CAP);
            if (!c)
                goto rollback;
            ts->chunks[ts->nchunks++] = c;
            pc = &ts->chunks[ts->nchunks - 1];
        }
        if (!chunk_room(ts, pc))
            goto rollback;
        chunk_put(*pc, s[i].ts, s[i].value);
    }
    ts->total += n;
    trim(ts);
    return CORE_OK;

rollback:
    while (ts->nchunks > old_n)
        chunk_release(ts, ts->chunks[--ts->nchunks]);
    if (old_n) {
        ts_chunk_t *c = ts->chunks[old_n - 1];
        uint32_t from = saved.nbits, to = c->nbits;
        if (from & 7)
            c->data[from >> 3] &= (uint8_t)(0xff << (8 - (from & 7)));
        uint32_t b = (from + 7) / 8, e = (to + 7) / 8;
        if (e > b)
            memset(c->data + b, 0, e - b);
        chunk_set_enc(c, &saved);
    }
    return CORE_NOMEM;
}

typedef struct order {
    int64_t ts;
    size_t i;
} order_t;

static int order_cmp(const void *a, const void *b)
{
    const order_t *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

/* Merges the sorted, resolved updates ut[]/uv[] (unique timestamps) into the
 * series, dropping whatever ends below the new retention cutoff. */
static core_status_t merge_updates(ts_t *ts, const int64_t *ut, const double *uv, size_t nu)
{
    int64_t new_newest = has_samples(ts) && newest(ts) > ut[nu - 1] ? newest(ts) : ut[nu - 1];
    int64_t cut = cutoff_for(ts->retention, new_newest);
    core_status_t st = CORE_NOMEM;
    cvec_t repl = { 0 };
    size_t *aff = NULL, *rstart = NULL, naff = 0;
    int64_t *mt = malloc((TS_CHUNK_MAX_SAMPLES + nu) * sizeof(*mt));
    double *mv = malloc((TS_CHUNK_MAX_SAMPLES + nu) * sizeof(*mv));
    int64_t *ct = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*ct));
    double *cv = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*cv));
    aff = malloc((nu + 1) * sizeof(*aff));
    rstart = malloc((nu + 2) * sizeof(*rstart));
    if (!mt || !mv || !ct || !cv || !aff || !rstart)
        goto out;

    if (!has_samples(ts)) {
        size_t m = 0;
        for (size_t i = 0; i < nu; i++)
            if (ut[i] >= cut) {
                mt[m] = ut[i];
                mv[m++] = uv[i];
            }
        if (m && !encode_run(ts, mt, mv, m, &repl))
            goto out;
        rstart[0] = 0;
    } else {
        size_t u = 0;
        while (u < nu) {
            size_t j = chunk_for(ts, ut[u]);
            size_t ue = u + 1;
            while (ue < nu && chunk_for(ts, ut[ue]) == j)
                ue++;
            const ts_chunk_t *c = ts->chunks[j];
            chunk_decode(c, ct, cv);
            size_t a = 0, m = 0, b = u;
            while (a < c->count || b < ue) {
                int64_t t;
                double v;
                if (b >= ue || (a < c->count && ct[a] < ut[b])) {
                    t = ct[a];
                    v = cv[a++];
                } else {
                    if (a < c->count && ct[a] == ut[b])
                        a++;   /* replaced by its resolved value */
                    t = ut[b];
                    v = uv[b++];
                }
                if (t >= cut) {
                    mt[m] = t;
                    mv[m++] = v;
                }
            }
            aff[naff] = j;
            rstart[naff++] = repl.n;
            if (m && !encode_run(ts, mt, mv, m, &repl))
                goto out;
            u = ue;
        }
        rstart[naff] = repl.n;
    }
    if (!install(ts, aff, naff, rstart, &repl))
        goto out;
    trim(ts);
    st = CORE_OK;
out:
    cvec_discard(ts, &repl);
    free(mt);
    free(mv);
    free(ct);
    free(cv);
    free(aff);
    free(rstart);
    return st;
}

core_status_t ts_add(ts_t *ts, const ts_sample_t *s, size_t n, ts_policy_t policy, size_t *failed)
{
    size_t dummy;
    if (!failed)
        failed = &dummy;
    *failed = 0;
    if (n == 0)
        return CORE_OK;

    /* The common case: every sample newer than everything before it. */
    bool in_order = true;
    int64_t prev = has_samples(ts) ? newest(ts) : -1;
    for (size_t i = 0; i < n && in_order; i++) {
        in_order = s[i].ts > prev;
        prev = s[i].ts;
    }
    if (in_order)
        return append_run(ts, s, n);

    core_status_t st = CORE_NOMEM;
    order_t *ord = malloc(n * sizeof(*ord));
    uint8_t *dup = calloc(n, 1);          /* 1: earlier sample in the batch, 2: in the series */
    dcache_t *dc = malloc(sizeof(*dc));
    int64_t *ut = malloc(n * sizeof(*ut));
    double *uv = malloc(n * sizeof(*uv));
    if (!ord || !dup || !dc || !ut || !uv)
        goto out;
    for (size_t i = 0; i < n; i++) {
        ord[i].ts = s[i].ts;
        ord[i].i = i;
    }
    qsort(ord, n, sizeof(*ord), order_cmp);

    /* Duplicates, found in timestamp order so each chunk is decoded once. */
    dc->idx = SIZE_MAX;
    for (size_t g = 0; g < n;) {
        size_t ge = g + 1;
        while (ge < n && ord[ge].ts == ord[g].ts)
            dup[ord[ge++].i] = 1;
        double ev;
        if (lookup(ts, dc, ord[g].ts, &ev))
            dup[ord[g].i] = 2;
        g = ge;
    }

    /* The first sample that fails when applied one at a time. */
    size_t fail = n;
    core_status_t why = CORE_OK;
    bool have = has_samples(ts);
    int64_t top = have ? newest(ts) : 0;
    for (size_t i = 0; i < n; i++) {
        if (ts->retention > 0 && have && s[i].ts < top && top - s[i].ts > ts->retention) {
            fail = i;
            why = CORE_TOO_OLD;
            break;
        }
        if (policy == TS_DUP_BLOCK && dup[i]) {
            fail = i;
            why = CORE_DUPLICATE;
            break;
        }
        if (!have || s[i].ts > top)
            top = s[i].ts;
        have = true;
    }

    /* Resolve each timestamp's final value, in batch order within it.  MIN,
     * MAX and SUM cannot combine a NaN (RedisTimeSeries refuses it as BLOCK
     * does); a result that is not finite is an overflow. */
    size_t nu = 0, overflow = n;
    core_status_t ovf_why = CORE_OVERFLOW;
    bool combines = policy == TS_DUP_MIN || policy == TS_DUP_MAX || policy == TS_DUP_SUM;
    dc->idx = SIZE_MAX;
    for (size_t g = 0; g < n;) {
        size_t ge = g + 1;
        while (ge < n && ord[ge].ts == ord[g].ts)
            ge++;
        double cur;
        size_t k = g;
        if (!(dup[ord[g].i] == 2 && lookup(ts, dc, ord[g].ts, &cur)))
            cur = s[ord[k++].i].value;
        for (; k < ge && ord[k].i < fail; k++) {
            double v = s[ord[k].i].value;
            bool nan_clash = combines && (isnan(cur) || isnan(v));
            cur = apply_policy(policy, cur, v);
            if ((nan_clash || isinf(cur)) && ord[k].i < overflow) {
                overflow = ord[k].i;
                ovf_why = nan_clash ? CORE_DUPLICATE : CORE_OVERFLOW;
            }
        }
        ut[nu] = ord[g].ts;
        uv[nu++] = cur;
        g = ge;
    }
    if (overflow < fail) {
        *failed = overflow;
        st = ovf_why;
        goto out;
    }
    if (fail < n) {
        *failed = fail;
        st = why;
        goto out;
    }
    st = merge_updates(ts, ut, uv, nu);
out:
    free(ord);
    free(dup);
    free(dc);
    free(ut);
    free(uv);
    return st;
}

/* ======================================================================== */
/* Deleting                                                                 */
/* ======================================================================== */

int64_t ts_delete_range(ts_t *ts, int64_t from, int64_t to)
{
    if (!has_samples(ts))
        return 0;
    int64_t cut = cutoff(ts);
    if (from < cut)
        from = cut;
    if (from > to)
        return 0;
    int64_t *ct = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*ct));
    double *cv = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*cv));
    size_t *aff = malloc((ts->nchunks + 1) * sizeof(*aff));
    size_t *rstart = malloc((ts->nchunks + 2) * sizeof(*rstart));
    cvec_t repl = { 0 };
    int64_t deleted = -1;
    if (!ct || !cv || !aff || !rstart)
        goto out;

    /* Count first: a deletion of nothing must change nothing. */
    int64_t count = 0;
    size_t j0 = chunk_for(ts, from);
    if (ts->chunks[j0]->last_ts < from)
        j0++;
    size_t j1 = j0;
    for (; j1 < ts->nchunks && ts->chunks[j1]->first_ts <= to; j1++) {
        const ts_chunk_t *c = ts->chunks[j1];
        if (c->first_ts >= from && c->last_ts <= to) {
            count += c->count;
        } else {
            chunk_decode(c, ct, cv);
            for (uint32_t i = 0; i < c->count; i++)
                count += ct[i] >= from && ct[i] <= to;
        }
    }
    if (count == 0) {
        deleted = 0;
        goto out;
    }
    /* Rewrite the chunks in [j0, j1), and the first chunk if it still holds
     * samples below the cutoff (the newest sample may go, and those must not
     * come back into view). */
    size_t naff = 0;
    for (size_t j = (ts->chunks[0]->first_ts < cut ? 0 : j0); j < j1; j++) {
        if (j > 0 && j < j0)
            continue;
        const ts_chunk_t *c = ts->chunks[j];
        aff[naff] = j;
        rstart[naff++] = repl.n;
        if (c->first_ts >= from && c->last_ts <= to)
            continue;   /* entirely deleted */
        chunk_decode(c, ct, cv);
        size_t m = 0;
        for (uint32_t i = 0; i < c->count; i++)
            if (ct[i] >= cut && (ct[i] < from || ct[i] > to)) {
                ct[m] = ct[i];
                cv[m++] = cv[i];
            }
        if (m && !encode_run(ts, ct, cv, m, &repl))
            goto out;
    }
    rstart[naff] = repl.n;
    if (!install(ts, aff, naff, rstart, &repl))
        goto out;
    deleted = count;
out:
    cvec_discard(ts, &repl);
    free(ct);
    free(cv);
    free(aff);
    free(rstart);
    return deleted;
}

bool ts_delete_beyond_retention(const ts_t *ts, const ts_rule_t *rule, int64_t from)
{
    int64_t t = from;
    if (rule) {
        t = ts_bucket_start(from, rule->bucket_ms, rule->align);
        if (t < 0)
            t = 0;
    }
    return t < cutoff(ts);   /* (no retention or no samples: INT64_MIN) */
}

/* ======================================================================== */
/* INCRBY, ALTER                                                            */
/* ======================================================================== */

bool ts_last(const ts_t *ts, ts_sample_t *out)
{
    if (!has_samples(ts))
        return false;
    const ts_chunk_t *c = ts->chunks[ts->nchunks - 1];
    double v;
    memcpy(&v, &c->prev_bits, sizeof(v));   /* the encoder keeps the last value's bits */
    *out = (ts_sample_t){ c->last_ts, v };
    return true;
}

core_status_t ts_incrby(ts_t *ts, int64_t t, double by, double *value)
{
    ts_sample_t last = { 0, 0 };
    bool have = ts_last(ts, &last);
    if (have && t < last.ts)
        return CORE_UNORDERED;
    double v = (have ? last.value : 0) + by;
    if (!isfinite(v))
        return CORE_OVERFLOW;   /* a NaN newest value, or past the doubles */
    ts_sample_t s = { t, v };
    core_status_t st = ts_add(ts, &s, 1, TS_DUP_LAST, NULL);
    if (st == CORE_OK)
        *value = v;
    return st;
}

void ts_set_retention(ts_t *ts, int64_t retention_ms)
{
    ts->retention = retention_ms;
    trim(ts);
}

void ts_set_policy(ts_t *ts, ts_policy_t policy) { ts->policy = policy; }

bool ts_set_labels(ts_t *ts, const ts_label_t *labels, size_t nlabels)
{
    ts_t *fresh = ts_create(0, TS_DUP_BLOCK, labels, nlabels);
    if (!fresh)
        return false;
    for (size_t i = 0; i < ts->nlabels; i++) {
        ts->mem -= ts->labels[i].nlen + ts->labels[i].vlen + 2;
        free(ts->labels[i].name);
    }
    ts->mem -= ts->nlabels * sizeof(ts_lbl_t);
    atomic_fetch_sub(&pairs_alive, (long)ts->nlabels);
    free(ts->labels);
    ts->labels = fresh->labels;
    ts->nlabels = fresh->nlabels;
    ts->mem += fresh->mem - sizeof(*fresh);
    fresh->labels = NULL;
    fresh->nlabels = 0;
    ts_free(fresh);
    return true;
}

/* ======================================================================== */
/* Compaction rules                                                         */
/* ======================================================================== */

size_t ts_rule_count(const ts_t *ts) { return ts->nrules; }

ts_rule_t ts_rule_at(const ts_t *ts, size_t i)
{
    const ts_rl_t *r = &ts->rules[i];
    return (ts_rule_t){ r->dest, r->dlen, r->agg, r->bucket_ms, r->align, r->quantile, r->gen, r->since };
}

long ts_rule_find(const ts_t *ts, const char *dest, size_t len)
{
    for (size_t i = 0; i < ts->nrules; i++)
        if (ts->rules[i].dlen == len && memcmp(ts->rules[i].dest, dest, len) == 0)
            return (long)i;
    return -1;
}

static char *dup_name(const char *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

bool ts_rule_add(ts_t *ts, const ts_rule_t *rule)
{
    char *d = dup_name(rule->dest, rule->dest_len);
    ts_rl_t *n = d ? realloc(ts->rules, (ts->nrules + 1) * sizeof(*n)) : NULL;
    if (!n) {
        free(d);
        return false;
    }
    ts->rules = n;
    n[ts->nrules++] = (ts_rl_t){ d,           (uint32_t)rule->dest_len, rule->agg, rule->bucket_ms, rule->align,
                                 rule->quantile, rule->gen,                rule->since };
    ts->mem += sizeof(*n) + rule->dest_len + 1;
    return true;
}

void ts_rule_remove(ts_t *ts, size_t i)
{
    ts->mem -= sizeof(ts_rl_t) + ts->rules[i].dlen + 1;
    free(ts->rules[i].dest);
    memmove(ts->rules + i, ts->rules + i + 1, (ts->nrules - i - 1) * sizeof(ts->rules[0]));
    if (--ts->nrules == 0) {
        free(ts->rules);
        ts->rules = NULL;
    }
}

const char *ts_source(const ts_t *ts, size_t *len)
{
    *len = ts->src ? ts->src_len : 0;
    return ts->src;
}

bool ts_set_source(ts_t *ts, const char *name, size_t len)
{
    char *d = NULL;
    if (name && !(d = dup_name(name, len)))
        return false;
    if (ts->src)
        ts->mem -= ts->src_len + 1;
    free(ts->src);
    ts->src = d;
    ts->src_len = d ? (uint32_t)len : 0;
    if (d)
        ts->mem += len + 1;
    return true;
}

typedef struct one {
    int64_t ts;
    double v;
    bool has;
} one_t;

static bool take_one(void *ud, int64_t t, double v)
{
    one_t *o = ud;
    o->ts = t;
    o->v = v;
    o->has = true;
    return true;
}

core_status_t ts_rule_bucket(const ts_t *src, const ts_rule_t *rule, int64_t b, double *value, bool *has)
{
    /* the range [b, b + bucket] so that twa's window reaches the bucket's
     * end; the first result is this bucket's when it has samples */
    int64_t lo = b < 0 ? 0 : b;
    int64_t hi = b > INT64_MAX - rule->bucket_ms ? INT64_MAX : b + rule->bucket_ms;
    ts_query_t q = { .from = lo, .to = hi, .count = 1, .agg = rule->agg, .bucket_ms = rule->bucket_ms,
                     .align = rule->align, .quantile = rule->quantile, .legacy_twa = rule->gen == TS_RULE_GEN_1 };
    if (rule->gen == TS_RULE_GEN_2 && rule->since >= 0 && ts_bucket_start(rule->since, rule->bucket_ms, rule->align) == b) {
        /* the bucket open when the rule was created: the samples after it
         * only, from a fresh start (no neighbour before); a first result in
         * a later bucket means none */
        q.from = rule->since + 1;
        q.no_before = true;
    }
    one_t o = { 0 };
    core_status_t st = ts_range(src, &q, take_one, &o);
    *has = st == CORE_OK && o.has && o.ts == lo;
    if (*has)
        *value = o.v;
    return st;
}

bool ts_rule_open_bucket(const ts_t *src, const ts_rule_t *rule, ts_sample_t *out)
{
    if (!has_samples(src))
        return false;
    int64_t b = ts_bucket_start(newest(src), rule->bucket_ms, rule->align);
    bool has;
    if (ts_rule_bucket(src, rule, b, &out->value, &has) != CORE_OK || !has)
        return false;
    out->ts = b < 0 ? 0 : b;
    return true;
}

void ts_rule_touch(ts_t *src, size_t i, int64_t old_newest, const int64_t *t, size_t n, int64_t from, int64_t to)
{
    ts_rl_t *r = &src->rules[i];
    if (r->gen != TS_RULE_GEN_2 || r->since < 0)
        return;
    int64_t b0 = ts_bucket_start(r->since, r->bucket_ms, r->align);
    (void)from;   /* a deletion anywhere from it on touches it, or may open it again */
    bool touched = !t && to >= b0;
    for (size_t k = 0; t && k < n && !touched; k++)
        touched = t[k] <= old_newest && ts_bucket_start(t[k], r->bucket_ms, r->align) == b0;
    if (touched)
        r->since = -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Recomputes the bucket starts b[0..n) (sorted, unique) into dst: a bucket
 * with samples is written (LAST), one without is deleted from dst. */
static core_status_t rule_write(const ts_t *src, const ts_rule_t *rule, const int64_t *b, size_t n, ts_t *dst)
{
    ts_sample_t *s = malloc((n ? n : 1) * sizeof(*s));
    if (!s)
        return CORE_NOMEM;
    size_t m = 0;
    core_status_t st = CORE_OK;
    for (size_t i = 0; i < n && st == CORE_OK; i++) {
        double v;
        bool has;
        st = ts_rule_bucket(src, rule, b[i], &v, &has);
        int64_t at = b[i] < 0 ? 0 : b[i];
        if (st != CORE_OK)
            break;
        if (has)
            s[m++] = (ts_sample_t){ at, v };
        else if (ts_delete_range(dst, at, at) < 0)
            st = CORE_NOMEM;
    }
    if (st == CORE_OK && m) {
        /* what dst's retention would refuse is skipped, not an error */
        int64_t top = has_samples(dst) ? newest(dst) : INT64_MIN;
        if (s[m - 1].ts > top)
            top = s[m - 1].ts;
        int64_t cut = cutoff_for(dst->retention, top);
        size_t k = 0;
        while (k < m && s[k].ts < cut)
            k++;
        if (k < m)
            st = ts_add(dst, s + k, m - k, TS_DUP_LAST, NULL);
    }
    free(s);
    return st;
}

core_status_t ts_rule_added(const ts_t *src, const ts_rule_t *rule, int64_t old_newest, const int64_t *t, size_t n,
                            ts_t *dst)
{
    if (!has_samples(src))
        return CORE_OK;
    int64_t open = ts_bucket_start(newest(src), rule->bucket_ms, rule->align);
    int64_t *b = malloc((n + 1) * sizeof(*b));
    if (!b)
        return CORE_NOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = ts_bucket_start(t[i], rule->bucket_ms, rule->align);
        if (s < open)
            b[m++] = s;
    }
    if (old_newest >= 0) {
        int64_t s = ts_bucket_start(old_newest, rule->bucket_ms, rule->align);
        if (s < open)
            b[m++] = s;
    }
    qsort(b, m, sizeof(*b), cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (u == 0 || b[u - 1] != b[i])
            b[u++] = b[i];
    core_status_t st = rule_write(src, rule, b, u, dst);
    free(b);
    return st;
}

static bool push_i64(void *ud, int64_t t, double v)
{
    (void)v;
    int64_t **pb = ud;   /* pb[0]: array, pb[1]: [n, cap] */
    int64_t *nc = pb[1];
    if (nc[0] == nc[1]) {
        int64_t ncap = nc[1] ? nc[1] * 2 : 64;
        int64_t *n = realloc(pb[0], (size_t)ncap * sizeof(*n));
        if (!n)
            return false;
        pb[0] = n;
        nc[1] = ncap;
    }
    pb[0][nc[0]++] = t;
    return true;
}

core_status_t ts_rule_deleted(const ts_t *src, const ts_rule_t *rule, int64_t from, int64_t to, ts_t *dst)
{
    /* the buckets dst holds from the span on: recomputed up to the span's
     * end, deleted from the open bucket on (the newest sample may have gone,
     * opening an earlier bucket again) */
    int64_t lo = ts_bucket_start(from, rule->bucket_ms, rule->align);
    int64_t hi = ts_bucket_start(to, rule->bucket_ms, rule->align);
    int64_t open = has_samples(src) ? ts_bucket_start(newest(src), rule->bucket_ms, rule->align) : INT64_MIN;
    int64_t first = open < lo ? open : lo;
    ts_query_t q = { .from = first < 0 ? 0 : first, .to = TS_MAX_TIMESTAMP };
    int64_t nc[2] = { 0, 0 };
    int64_t *pb[2] = { NULL, nc };
    core_status_t st = ts_range(dst, &q, push_i64, pb);
    size_t m = 0;
    for (int64_t i = 0; st == CORE_OK && i < nc[0]; i++) {
        int64_t b = ts_bucket_start(pb[0][i], rule->bucket_ms, rule->align);
        if (b >= open) {
            if (ts_delete_range(dst, pb[0][i], pb[0][i]) < 0)
                st = CORE_NOMEM;
        } else if (b <= hi && (m == 0 || pb[0][m - 1] != b)) {
            pb[0][m++] = b;
        }
    }
    if (st == CORE_OK)
        st = rule_write(src, rule, pb[0], m, dst);
    free(pb[0]);
    return st;
}

/* ======================================================================== */
/* Label filters                                                            */
/* ======================================================================== */

bool ts_matcher_parse(const char *s, size_t len, ts_matcher_t *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    const char *eq = memchr(s, '=', len);
    if (!eq) {
        *why = "a filter is label=value, label!=value, label=, label!=, label=(a,b) or label!=(a,b)";
        return false;
    }
    size_t nl = (size_t)(eq - s);
    if (nl > 0 && s[nl - 1] == '!') {
        out->negate = true;
        nl--;
    }
    if (nl == 0) {
        *why = "a filter needs a label name before '=' or '!='";
        return false;
    }
    out->name = s;
    out->name_len = nl;
    for (size_t i = 0; i < nl; i++)
        if (strchr("(),=", s[i])) {
            *why = "a label name cannot contain '(', ')', ',' or '='";
            return false;
        }
    const char *v = eq + 1, *end = s + len;
    if (v == end)
        return true;   /* l= / l!= */
    if (*v == '(') {
        if (end[-1] != ')' || end - v < 2) {
            *why = "a list of values is (a,b,...)";
            return false;
        }
        out->list = true;   /* () is the empty list: l=() matches nothing (RedisTimeSeries) */
        const char *p = v + 1, *stop = end - 1;
        while (p < stop || (p == stop && out->nvalues > 0)) {
            const char *c = memchr(p, ',', (size_t)(stop - p));
            const char *e = c ? c : stop;
            if (e == p) {
                *why = "an empty value in a list of values";
                return false;
            }
            if (out->nvalues == TS_FILTER_MAX_VALUES) {
                *why = "at most 64 values in a list";
                return false;
            }
            for (const char *q = p; q < e; q++)
                if (strchr("()=", *q)) {
                    *why = "a value cannot contain '(', ')', ',' or '='";
                    return false;
                }
            out->value[out->nvalues] = p;
            out->value_len[out->nvalues++] = (size_t)(e - p);
            p = e + 1;
        }
        return true;
    }
    for (const char *q = v; q < end; q++)
        if (strchr("(),=", *q)) {
            *why = "a value cannot contain '(', ')', ',' or '=' (a list is written (a,b))";
            return false;
        }
    out->value[0] = v;
    out->value_len[0] = (size_t)(end - v);
    out->nvalues = 1;
    return true;
}

bool ts_matcher_positive(const ts_matcher_t *m) { return !m->negate && (m->nvalues > 0 || m->list); }

const char *ts_label_get(const ts_t *ts, const char *name, size_t len, size_t *vlen)
{
    for (size_t i = 0; i < ts->nlabels; i++)
        if (ts->labels[i].nlen == len && memcmp(ts->labels[i].name, name, len) == 0) {
            *vlen = ts->labels[i].vlen;
            return ts->labels[i].value;
        }
    return NULL;
}

bool ts_matches(const ts_t *ts, const ts_matcher_t *m, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        size_t vl;
        const char *v = ts_label_get(ts, m[k].name, m[k].name_len, &vl);
        bool in = false;
        for (size_t i = 0; v && i < m[k].nvalues && !in; i++)
            in = m[k].value_len[i] == vl && memcmp(m[k].value[i], v, vl) == 0;
        bool ok;
        if (m[k].nvalues == 0 && !m[k].list)
            ok = m[k].negate ? v != NULL : v == NULL;
        else
            ok = m[k].negate ? !in : in;
        if (!ok)
            return false;
    }
    return true;
}

/* ======================================================================== */
/* Info                                                                     */
/* ======================================================================== */

void ts_get_info(const ts_t *ts, ts_info_t *out)
{
    memset(out, 0, sizeof(*out));
    out->memory_bytes = ts->mem;
    out->chunks = ts->nchunks;
    out->first_ts = out->last_ts = -1;
    for (size_t i = 0; i < ts->nchunks; i++)
        out->data_bytes += (ts->chunks[i]->nbits + 7) / 8;
    if (!has_samples(ts))
        return;
    out->samples = ts->total;
    out->last_ts = newest(ts);
    const ts_chunk_t *c = ts->chunks[0];
    int64_t cut = cutoff(ts);
    out->first_ts = c->first_ts;
    if (c->first_ts < cut) {   /* only the first chunk may hold samples below the cutoff */
        int64_t t[TS_CHUNK_MAX_SAMPLES];
        chunk_decode(c, t, NULL);
        size_t hidden = lower_bound(t, c->count, cut);
        out->samples -= hidden;
        out->first_ts = t[hidden];
    }
}

/* ======================================================================== */
/* Queries and aggregation                                                  */
/* ======================================================================== */

int64_t ts_bucket_start(int64_t t, int64_t bucket_ms, int64_t align)
{
    int64_t m = (t - align) % bucket_ms;   /* t, align >= 0: the difference fits */
    if (m < 0)
        m += bucket_ms;
    return t - m;
}

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

static void agg_reset(agg_t *a)
{
    tdigest_free(a->td);
    agg_t keep = *a;
    memset(a, 0, sizeof(*a));
    a->type = keep.type;
    a->q = keep.q;
    a->qv = keep.qv;
    a->qcap = keep.qcap;
    a->oom = keep.oom;
    a->min = DBL_MAX;
    a->max = -DBL_MAX;
}

/* The bucket's values so far move into a T-Digest (bounded memory: the
 * values of a bucket are not all kept past TS_QUANTILE_EXACT_MAX); false
 * when it cannot be allocated (the values stay, exact). */
static bool agg_to_digest(agg_t *a)
{
    a->td = tdigest_create(TS_QUANTILE_COMPRESSION);
    if (!a->td)
        return false;
    for (size_t i = 0; i < a->qn; i++) {
        double v = a->qv[i];
        if (isfinite(v))
            tdigest_add(a->td, v);   /* (weight 65536 is far below TDIGEST_MAX_WEIGHT) */
        else
            *(v < 0 ? &a->ninf : &a->pinf) += 1;
    }
    a->qn = 0;
    return true;
}

/* What an aggregator holds beyond itself. */
static void agg_release(agg_t *a)
{
    free(a->qv);
    a->qv = NULL;
    tdigest_free(a->td);
    a->td = NULL;
}

/* The quantile q of the digest's values and the infinities counted beside
 * it: the rank h = (n - 1)·q of the whole falls among the -infs, the +infs,
 * or the digest (at its own quantile of that rank). */
static double digest_quantile(const agg_t *a, double q)
{
    double n = (double)(a->n), h = (n - 1) * q, lo = (double)a->ninf, hi = n - (double)a->pinf;
    if (h < lo)
        return -INFINITY;
    if (h > hi - 1)
        return INFINITY;
    double m = hi - lo;
    return tdigest_quantile(a->td, m > 1 ? (h - lo) / (m - 1) : 0.5);
}

static void agg_add(agg_t *a, double v)
{
    if (a->n == 0)
        a->first = v;
    a->n++;
    a->last = v;
    switch (a->type) {
    case TS_AGG_AVG:
        a->avg_cnt++;
        if (((a->avg_val < 0.0) == (v < 0.0) && fabs(a->avg_val) > DBL_MAX - fabs(v)) || a->avg_ovf) {
            /* the running sum would overflow: continue as a running mean */
            long double lv = a->avg_val;
            if (a->avg_ovf)
                lv = lv / a->avg_cnt * (long double)(a->avg_cnt - 1);
            else
                lv /= a->avg_cnt;
            lv += (long double)v / (long double)a->avg_cnt;
            a->avg_val = (double)lv;
            a->avg_ovf = true;
        } else {
            a->avg_val += v;
        }
        break;
    case TS_AGG_SUM: a->sum += v; break;
    case TS_AGG_QUANTILE:
        if (a->td || (a->qn == TS_QUANTILE_EXACT_MAX && agg_to_digest(a))) {
            if (isfinite(v))
                a->oom |= !tdigest_add(a->td, v);
            else
                *(v < 0 ? &a->ninf : &a->pinf) += 1;
            break;
        }
        if (a->qn == a->qcap) {
            size_t ncap = a->qcap ? a->qcap * 2 : 64;
            double *n = realloc(a->qv, ncap * sizeof(*n));
            if (!n) {
                a->oom = true;
                return;
            }
            a->qv = n;
            a->qcap = ncap;
        }
        a->qv[a->qn++] = v;
        break;
    case TS_AGG_MIN:
    case TS_AGG_MAX:
    case TS_AGG_RANGE:
        if (v < a->min)
            a->min = v;
        if (v > a->max)
            a->max = v;
        break;
    case TS_AGG_STD_P:
    case TS_AGG_STD_S:
    case TS_AGG_VAR_P:
    case TS_AGG_VAR_S:
        a->sum += v;
        a->sum2 += v * v;
        break;
    default: break;
    }
}

static double variance(double sum, double sum2, uint64_t n)
{
    double c = (double)n;
    double var = (sum2 - 2 * sum * sum / c + pow(sum / c, 2) * c) / c;
    return var < 0 ? 0 : var;   /* rounding can dip below 0; the true value cannot */
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The exact quantile of v[0..n) (sorted here), see ts_agg_parse_any. */
static double quantile_of(double *v, size_t n, double q)
{
    qsort(v, n, sizeof(*v), cmp_double);
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)h;
    if (lo >= n - 1)
        return v[n - 1];
    double f = h - (double)lo;
    return f == 0 ? v[lo] : v[lo] + f * (v[lo + 1] - v[lo]);
}

static double agg_final(agg_t *a)
{
    switch (a->type) {
    case TS_AGG_QUANTILE: return a->td ? digest_quantile(a, a->q) : a->qn ? quantile_of(a->qv, a->qn, a->q) : NAN;
    case TS_AGG_AVG: return a->avg_ovf ? a->avg_val : a->avg_val / a->avg_cnt;
    case TS_AGG_SUM: return a->sum;
    case TS_AGG_MIN: return a->min;
    case TS_AGG_MAX: return a->max;
    case TS_AGG_RANGE: return a->max - a->min;
    case TS_AGG_COUNT:
    case TS_AGG_COUNT_NAN:
    case TS_AGG_COUNT_ALL: return (double)a->n;
    case TS_AGG_FIRST: return a->first;
    case TS_AGG_LAST: return a->last;
    case TS_AGG_VAR_P: return variance(a->sum, a->sum2, a->n);
    case TS_AGG_VAR_S: return a->n == 1 ? 0 : variance(a->sum, a->sum2, a->n) * (double)a->n / (double)(a->n - 1);
    case TS_AGG_STD_P: return sqrt(variance(a->sum, a->sum2, a->n));
    case TS_AGG_STD_S:
        return a->n == 1 ? 0 : sqrt(variance(a->sum, a->sum2, a->n) * (double)a->n / (double)(a->n - 1));
    default: return 0;
    }
}

typedef struct qrun {
    const ts_query_t *q;
    ts_emit_fn emit;
    ts_emit_row_fn emit_row;   /* several aggregations (range_buckets): rows, when set */
    void *ud;
    uint64_t emitted;
    bool done;             /* count reached or emit failed */
    bool oom;
    agg_t agg;
    bool have_bucket;
    int64_t bucket;
    double *rbuf;          /* reverse: the current bucket's values, newest first */
    size_t rn, rcap;
} qrun_t;

static void out(qrun_t *r, int64_t t, double v)
{
    if (!r->emit(r->ud, t, v)) {
        r->oom = r->done = true;
        return;
    }
    if (++r->emitted == r->q->count)
        r->done = true;
}

static int64_t report_ts(const ts_query_t *q, int64_t start)
{
    int64_t base = start < 0 ? 0 : start;
    int64_t add = q->bucket_ts == TS_BUCKET_END ? q->bucket_ms : q->bucket_ts == TS_BUCKET_MID ? q->bucket_ms / 2 : 0;
    return base > INT64_MAX - add ? INT64_MAX : base + add;
}

static void flush_bucket(qrun_t *r)
{
    if (!r->have_bucket)
        return;
    if (r->q->reverse) {
        agg_reset(&r->agg);
        for (size_t i = r->rn; i-- > 0;)
            agg_add(&r->agg, r->rbuf[i]);
        r->rn = 0;
    }
    out(r, report_ts(r->q, r->bucket), agg_final(&r->agg));
    r->have_bucket = false;
    agg_reset(&r->agg);
}

static bool ts_filtered(const ts_query_t *q, int64_t t)
{
    size_t i = lower_bound(q->filter_ts, q->nfilter_ts, t);
    return i < q->nfilter_ts && q->filter_ts[i] == t;
}

/* Whether the aggregation counts this value (RedisTimeSeries's isValueValid). */
static bool agg_counts(ts_agg_t a, double v)
{
    switch (a) {
    case TS_AGG_COUNT_NAN: return isnan(v);
    case TS_AGG_COUNT_ALL:
    case TS_AGG_NONE: return true;
    default: return !isnan(v);
    }
}

double ts_reduce(ts_agg_t a, const double *v, size_t n)
{
    agg_t g = { .type = a };
    agg_reset(&g);
    for (size_t i = 0; i < n; i++)
        if (agg_counts(a, v[i]))
            agg_add(&g, v[i]);
    /* no value counted: the count family answers 0, the rest NaN ("no
     * data"), as RedisTimeSeries's reducer does */
    bool counts = a == TS_AGG_COUNT || a == TS_AGG_COUNT_NAN || a == TS_AGG_COUNT_ALL;
    double r = g.oom ? NAN : g.n ? agg_final(&g) : counts ? 0 : NAN;
    agg_release(&g);
    return r;
}

/* FILTER_BY_TS and FILTER_BY_VALUE (a NaN is in no value range). */
static bool passes(const ts_query_t *q, int64_t t, double v)
{
    if (q->filter_ts && !ts_filtered(q, t))
        return false;
    if ((q->has_min || q->has_max) && isnan(v))
        return false;
    return !((q->has_min && v < q->min) || (q->has_max && v > q->max));
}

static void feed(qrun_t *r, int64_t t, double v)
{
    const ts_query_t *q = r->q;
    if (!passes(q, t, v) || !agg_counts(q->agg, v))
        return;
    if (q->agg == TS_AGG_NONE) {
        out(r, t, v);
        return;
    }
    /* still in the current bucket? (a compare, not a division, per sample) */
    bool same = r->have_bucket && t >= r->bucket && (uint64_t)t - (uint64_t)r->bucket < (uint64_t)q->bucket_ms;
    if (!same) {
        if (r->have_bucket) {
            flush_bucket(r);
            if (r->done)
                return;
        }
        r->have_bucket = true;
        r->bucket = ts_bucket_start(t, q->bucket_ms, q->align);
    }
    if (q->reverse) {
        if (r->rn == r->rcap) {
            size_t ncap = r->rcap ? r->rcap * 2 : 256;
            double *nb = realloc(r->rbuf, ncap * sizeof(*nb));
            if (!nb) {
                r->oom = r->done = true;
                return;
            }
            r->rbuf = nb;
            r->rcap = ncap;
        }
        r->rbuf[r->rn++] = v;
    } else {
        agg_add(&r->agg, v);
    }
}

/* ------------------------------------------------------------------------ */
/* Neighbours: samples a bucket looks at beyond its own                     */
/* ------------------------------------------------------------------------ */

/* A growable list of samples in time order. */
typedef struct pts {
    int64_t *t;
    double *v;
    size_t n, cap;
    size_t i0, i1;          /* the query's own samples (see range_buckets and legacy_twa) */
} pts_t;

static bool pts_push(pts_t *p, int64_t t, double v)
{
    if (p->n == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 256;
        int64_t *nt = realloc(p->t, ncap * sizeof(*nt));
        if (!nt)
            return false;
        p->t = nt;
        double *nv = realloc(p->v, ncap * sizeof(*nv));
        if (!nv)
            return false;
        p->v = nv;
        p->cap = ncap;
    }
    p->t[p->n] = t;
    p->v[p->n++] = v;
    return true;
}

typedef bool (*sample_ok_fn)(const ts_query_t *q, int64_t t, double v);

/* What generation-1 twa rules interpolate from: the samples the aggregation counts. */
static bool counted(const ts_query_t *q, int64_t t, double v) { return passes(q, t, v) && agg_counts(q->agg, v); }
/* What RedisTimeSeries interpolates from and fills gaps between: samples
 * passing the filters that are not NaN. */
static bool valid(const ts_query_t *q, int64_t t, double v) { return passes(q, t, v) && !isnan(v); }

/* Up to k (<= 2) samples satisfying ok nearest before `from` (dir < 0, not
 * below `cut`; nearest first) or after `to` (dir > 0); how many were found.
 * tb/vb: decode buffers. */
static size_t neighbours(const ts_t *ts, const ts_query_t *q, int dir, int64_t from, int64_t to, int64_t cut,
                         int64_t *tb, double *vb, sample_ok_fn ok, size_t k, int64_t *ot, double *ov)
{
    size_t n = 0;
    if (!has_samples(ts))
        return 0;
    if (dir < 0) {
        if (from == 0 || from <= cut)
            return 0;
        for (size_t j = chunk_for(ts, from - 1) + 1; j-- > 0 && n < k;) {
            const ts_chunk_t *c = ts->chunks[j];
            if (c->last_ts < cut)
                break;
            if (c->first_ts >= from)
                continue;
            chunk_decode(c, tb, vb);
            for (size_t i = lower_bound(tb, c->count, from); i-- > 0 && n < k;) {
                if (tb[i] < cut)
                    return n;
                if (ok(q, tb[i], vb[i])) {
                    ot[n] = tb[i];
                    ov[n++] = vb[i];
                }
            }
        }
        return n;
    }
    if (to == TS_MAX_TIMESTAMP)
        return 0;
    for (size_t j = chunk_for(ts, to + 1); j < ts->nchunks && n < k; j++) {
        const ts_chunk_t *c = ts->chunks[j];
        if (c->last_ts <= to)
            continue;
        chunk_decode(c, tb, vb);
        for (size_t i = lower_bound(tb, c->count, to + 1); i < c->count && n < k; i++)
            if (ok(q, tb[i], vb[i])) {
                ot[n] = tb[i];
                ov[n++] = vb[i];
            }
    }
    return n;
}

/* The samples a query looks at into p, in time order: up to `k` samples
 * satisfying ok before `from`, then the query's own [p->i0, p->i1): those
 * in [from, to] satisfying in_ok (and the LATEST extra sample), then up to
 * `k` satisfying ok after `to`. */
static bool gather(const ts_t *ts, const ts_query_t *q, int64_t from, int64_t to, int64_t *tb, double *vb,
                   sample_ok_fn ok, sample_ok_fn in_ok, size_t k, pts_t *p)
{
    int64_t nt[2];
    double nv[2];
    int64_t cut = cutoff(ts);
    for (size_t i = k ? neighbours(ts, q, -1, from, to, cut, tb, vb, ok, k, nt, nv) : 0; i-- > 0;)
        if (!pts_push(p, nt[i], nv[i]))
            return false;
    p->i0 = p->n;
    for (size_t j = has_samples(ts) ? chunk_for(ts, from) : 0; j < ts->nchunks && ts->chunks[j]->first_ts <= to; j++) {
        const ts_chunk_t *c = ts->chunks[j];
        if (c->last_ts < from)
            continue;
        chunk_decode(c, tb, vb);
        for (size_t i = lower_bound(tb, c->count, from); i < c->count && tb[i] <= to; i++)
            if (in_ok(q, tb[i], vb[i]) && !pts_push(p, tb[i], vb[i]))
                return false;
    }
    if (q->has_extra && q->extra.ts >= from && q->extra.ts <= to && in_ok(q, q->extra.ts, q->extra.value) &&
        !pts_push(p, q->extra.ts, q->extra.value))
        return false;
    p->i1 = p->n;
    size_t m = neighbours(ts, q, 1, from, to, cut, tb, vb, ok, k ? k : 2, nt, nv);
    for (size_t i = 0; i < m; i++)
        if (!pts_push(p, nt[i], nv[i]))
            return false;
    return true;
}

/* ------------------------------------------------------------------------ */
/* twa of the rules created before issue 37 (generation 1 of a rule)        */
/* ------------------------------------------------------------------------ */

/* The line through points k and k+1 at x (t[k] <= x <= t[k+1]), in
 * RedisTimeSeries's form v1 + (x - t1)·(v2 - v1) / (t2 - t1). */
static double line_at(const pts_t *p, size_t k, int64_t x)
{
    if (x == p->t[k])
        return p->v[k];
    if (x == p->t[k + 1])
        return p->v[k + 1];
    double v1 = p->v[k], v2 = p->v[k + 1], dv = v2 - v1;
    double v = v1 + (double)(x - p->t[k]) * dv / (double)(p->t[k + 1] - p->t[k]);
    if (isfinite(v))
        return v;
    double r = (double)(x - p->t[k]) / (double)(p->t[k + 1] - p->t[k]);   /* huge values: no overflow */
    return v1 * (1 - r) + v2 * r;
}

/* The average of the polyline over [a, b], p->t[0] <= a <= b <= p->t[n-1]. */
static double twa_window(const pts_t *p, int64_t a, int64_t b)
{
    size_t k = lower_bound(p->t, p->n, a);
    if (k == p->n || p->t[k] > a)
        k--;                                /* t[k] <= a < t[k+1] */
    if (k == p->n - 1)
        return p->v[k];                      /* a == b == the last point */
    if (a == b)
        return line_at(p, k, a);
    /* each trapezoid weighted by its share of the window, so that huge values
     * cannot overflow on the way */
    double sum = 0, f0 = line_at(p, k, a), w = (double)(b - a);
    int64_t x0 = a;
    while (x0 < b) {
        int64_t x1 = p->t[k + 1] < b ? p->t[k + 1] : b;
        double f1 = line_at(p, k, x1);
        sum += (f0 * 0.5 + f1 * 0.5) * ((double)(x1 - x0) / w);
        x0 = x1;
        f0 = f1;
        k++;
    }
    return sum;
}

/* The first-generation twa of a rule's buckets (forward, no EMPTY): the
 * average over [max(start, from), min(start + bucket_ms, to)], clipped to
 * the first and last counted samples, of the line through the counted
 * samples and the nearest counted ones outside [from, to].  Kept so that a
 * rule created before issue 37 computes what it always did (journals replay
 * to the same state). */
static core_status_t legacy_twa(const ts_t *ts, const ts_query_t *q, int64_t from, int64_t to, qrun_t *r,
                                int64_t *tb, double *vb)
{
    pts_t p = { 0 };
    core_status_t st = CORE_NOMEM;
    if (!gather(ts, q, from, to, tb, vb, counted, counted, 1, &p))
        goto out;
    st = CORE_OK;
    for (size_t i = p.i0; i < p.i1 && !r->done;) {
        int64_t b = ts_bucket_start(p.t[i], q->bucket_ms, q->align);
        int64_t e = b > INT64_MAX - q->bucket_ms ? INT64_MAX : b + q->bucket_ms;
        int64_t wa = b > from ? b : from, wb = e < to ? e : to;
        if (wa < p.t[0])
            wa = p.t[0];
        if (wb > p.t[p.n - 1])
            wb = p.t[p.n - 1];
        out(r, report_ts(q, b), wa <= wb ? twa_window(&p, wa, wb) : NAN);
        while (i < p.i1 && (uint64_t)p.t[i] - (uint64_t)b < (uint64_t)q->bucket_ms)
            i++;
    }
out:
    free(p.t);
    free(p.v);
    return st;
}

/* ------------------------------------------------------------------------ */
/* EMPTY, twa and several aggregations: RedisTimeSeries's aggregation       */
/* iterator (its filter_iterator.c and compaction.c), bucket by bucket      */
/* ------------------------------------------------------------------------ */

/* The buckets a query reports come from its own samples: those in range
 * passing the filters, NaN included.  A bucket of them with a sample an
 * aggregation counts gets that aggregation's value; one without any (only
 * NaN, or for countNaN no NaN) is reported only with EMPTY, with the empty
 * value.  EMPTY also reports the empty buckets between two buckets of
 * samples, and those before the first (from the bucket of `from`) and after
 * the last (to the bucket of `to`) when a valid sample (not NaN, passing the
 * filters, in or out of range) lies on each side of them.  Empty values:
 * 0 for sum and the counts, for last the last valid sample before the
 * bucket, for twa the line between the valid samples around it, NaN for the
 * rest. */

typedef struct run {
    int64_t b;              /* bucket start */
    size_t i0, i1;          /* its samples in the points */
} run_t;

typedef struct plan {
    const ts_query_t *q;
    int64_t from, to;
    pts_t p;                /* two valid samples before, the query's own, two after */
    run_t *runs;
    size_t nruns;
    size_t naggs;
    const ts_agg_t *aggs;
    agg_t *agg;             /* one state per aggregation */
    double *row;
} plan_t;

#define NONE SIZE_MAX

/* The nearest valid point before index i (NONE). */
static size_t valid_below(const pts_t *p, size_t i)
{
    while (i-- > 0)
        if (!isnan(p->v[i]))
            return i;
    return NONE;
}

/* The nearest valid point from index i on (NONE). */
static size_t valid_from(const pts_t *p, size_t i)
{
    for (; i < p->n; i++)
        if (!isnan(p->v[i]))
            return i;
    return NONE;
}

/* The last valid point with t < x and the one before it, first valid with
 * t >= x and the one after it (each NONE when missing). */
static void around(const pts_t *p, int64_t before, int64_t after, size_t *b1, size_t *b2, size_t *a1, size_t *a2)
{
    *b1 = valid_below(p, lower_bound(p->t, p->n, before));
    *b2 = *b1 == NONE ? NONE : valid_below(p, *b1);
    *a1 = valid_from(p, lower_bound(p->t, p->n, after));
    *a2 = *a1 == NONE ? NONE : valid_from(p, *a1 + 1);
}

static int64_t bucket_end(const plan_t *pl, int64_t b)
{
    return b > INT64_MAX - pl->q->bucket_ms ? INT64_MAX : b + pl->q->bucket_ms;
}

/* A twa window: [max(start, from), min(start + bucket_ms, to)]. */
static int64_t win_a(const plan_t *pl, int64_t b) { return b < pl->from ? pl->from : b; }
static int64_t win_b(const plan_t *pl, int64_t b)
{
    int64_t e = bucket_end(pl, b);
    return e < pl->to ? e : pl->to;
}

/* twa of a bucket without valid samples (RedisTimeSeries's
 * twa_calc_empty_bucket_val): the average of the line between the valid
 * samples around it at its window's two ends; with samples on one side
 * only, the nearest one when it is within half the step between the two
 * nearest of that side, else NaN. */
static double twa_empty(const pts_t *p, int64_t ta, int64_t tb, size_t b1, size_t b2, size_t a1, size_t a2)
{
    bool empty = true;
    if (b1 != NONE && b2 != NONE && p->t[b1] + (p->t[b1] - p->t[b2]) > ta)
        empty = false;
    if (a1 != NONE && a2 != NONE && tb + (p->t[a2] - p->t[a1]) > p->t[a1])
        empty = false;
    if (b1 != NONE && a1 != NONE) {
        double dv = p->v[a1] - p->v[b1], dt = (double)(p->t[a1] - p->t[b1]);
        double va = p->v[b1] + ((double)(ta - p->t[b1]) * dv) / dt;
        double vb = p->v[b1] + ((double)(tb - p->t[b1]) * dv) / dt;
        return (va + vb) / 2.0;
    }
    if (empty)
        return NAN;
    if (a2 != NONE)
        return tb + (p->t[a2] - p->t[a1]) / 2 <= p->t[a1] ? NAN : p->v[a1];
    return p->t[b1] + (p->t[b1] - p->t[b2]) / 2 <= ta ? NAN : p->v[b1];
}

/* twa of run k, with RedisTimeSeries's neighbours and arithmetic
 * (TwaAddValue, TwaAddNextBucketFirstSample, TwaFinalize): the trapezoids
 * between the valid samples, and from the window's ends to them along the
 * line to the neighbour outside (the last valid sample of the previous run
 * of samples when it has one - or before the first run, the nearest valid
 * sample before it -, the first sample of the next run when it is valid -
 * or after the last run, the nearest valid sample after it); summed in the
 * order the query walks (so a reverse range sums them backwards, as
 * RedisTimeSeries does), divided by the window from the first point to the
 * last. */
static double twa_run(const plan_t *pl, size_t k)
{
    const pts_t *p = &pl->p;
    const run_t *r = &pl->runs[k];
    size_t j1 = valid_from(p, r->i0), jm = valid_below(p, r->i1);   /* (a run with a valid sample) */
    size_t L, R;
    if (!pl->q->reverse) {
        L = k == 0 ? valid_below(p, p->i0) : valid_below(p, pl->runs[k - 1].i1);
        if (k > 0 && L < pl->runs[k - 1].i0)
            L = NONE;   /* the previous run had no valid sample */
        R = k + 1 < pl->nruns ? (isnan(p->v[r->i1]) ? NONE : r->i1) : valid_from(p, jm + 1);
    } else {
        R = k + 1 == pl->nruns ? valid_from(p, p->i1) : valid_from(p, pl->runs[k + 1].i0);
        if (k + 1 < pl->nruns && R >= pl->runs[k + 1].i1)
            R = NONE;
        L = k > 0 ? (isnan(p->v[r->i0 - 1]) ? NONE : r->i0 - 1) : valid_below(p, j1);
    }
    int64_t ta = win_a(pl, r->b < 0 ? 0 : r->b), tb = win_b(pl, r->b);
    int64_t first = L != NONE ? ta : p->t[j1], last = R != NONE ? tb : p->t[jm];
    if (first == last)
        return pl->q->reverse ? p->v[j1] : p->v[jm];
    /* the ends: the line from the older point (vab) to the window's end */
    double left = 0, right = 0;
    if (L != NONE) {
        double vab = p->v[L] + ((double)(ta - p->t[L]) * (p->v[j1] - p->v[L])) / (double)(p->t[j1] - p->t[L]);
        left = ((vab + p->v[j1]) * (double)(p->t[j1] - ta)) / 2.0;
    }
    if (R != NONE) {
        double vab = p->v[jm] + ((double)(tb - p->t[jm]) * (p->v[R] - p->v[jm])) / (double)(p->t[R] - p->t[jm]);
        right = ((vab + p->v[jm]) * (double)(tb - p->t[jm])) / 2.0;
    }
    double res = 0;
    if (!pl->q->reverse) {
        if (L != NONE)
            res += left;
        for (size_t a = j1, b = valid_from(p, j1 + 1); b != NONE && b <= jm; a = b, b = valid_from(p, b + 1))
            res += ((p->v[a] + p->v[b]) * (double)(p->t[b] - p->t[a])) / 2.0;
        if (R != NONE)
            res += right;
    } else {
        if (R != NONE)
            res += right;
        for (size_t b = jm, a = valid_below(p, jm); a != NONE && a >= j1; b = a, a = valid_below(p, a))
            res += ((p->v[a] + p->v[b]) * (double)(p->t[b] - p->t[a])) / 2.0;
        if (L != NONE)
            res += left;
    }
    return res / (double)llabs(last - first);
}

/* The value of aggregation a for the bucket starting at b: run k's (NONE:
 * an empty bucket), or the empty value. */
static double plan_value(plan_t *pl, size_t a, int64_t b, size_t k)
{
    const pts_t *p = &pl->p;
    ts_agg_t type = pl->aggs[a];
    bool has = false;
    if (k != NONE)
        for (size_t i = pl->runs[k].i0; i < pl->runs[k].i1 && !has; i++)
            has = agg_counts(type, p->v[i]);
    if (has && type == TS_AGG_TWA)
        return twa_run(pl, k);
    if (has) {
        agg_t *g = &pl->agg[a];
        agg_reset(g);
        for (size_t i = pl->runs[k].i0; i < pl->runs[k].i1; i++)
            if (agg_counts(type, p->v[i]))
                agg_add(g, p->v[i]);
        return agg_final(g);
    }
    switch (type) {
    case TS_AGG_SUM:
    case TS_AGG_COUNT:
    case TS_AGG_COUNT_NAN:
    case TS_AGG_COUNT_ALL: return 0;
    case TS_AGG_LAST: {
        size_t i = valid_below(p, lower_bound(p->t, p->n, b));
        return i == NONE ? NAN : p->v[i];
    }
    case TS_AGG_TWA: {
        size_t b1, b2, a1, a2;
        int64_t bn = b < 0 ? 0 : b, ta = win_a(pl, bn), tb = win_b(pl, b);
        if (k != NONE) {
            around(p, ta, tb, &b1, &b2, &a1, &a2);
        } else {
            /* a gap: its neighbours, as RedisTimeSeries finds them for the
             * whole gap (around the first bucket's start) */
            size_t j = lower_bound(p->t, p->n, ta);
            b1 = valid_below(p, j);
            b2 = b1 == NONE ? NONE : valid_below(p, b1);
            a1 = valid_from(p, j);
            a2 = a1 == NONE ? NONE : valid_from(p, a1 + 1);
        }
        return twa_empty(p, ta, tb, b1, b2, a1, a2);
    }
    default: return NAN;
    }
}

/* Reports the bucket starting at b (run k, or NONE). */
static void plan_row(plan_t *pl, qrun_t *r, int64_t b, size_t k)
{
    for (size_t a = 0; a < pl->naggs; a++)
        pl->row[a] = plan_value(pl, a, b, k);
    if (r->done)
        return;
    int64_t at = report_ts(pl->q, b);
    if (!(r->emit_row ? r->emit_row(r->ud, at, pl->row, pl->naggs) : r->emit(r->ud, at, pl->row[0]))) {
        r->oom = r->done = true;
        return;
    }
    if (++r->emitted == pl->q->count)
        r->done = true;
}

/* Whether a valid point lies before x and one at or after it. */
static bool both_sides(const pts_t *p, int64_t x)
{
    size_t j = lower_bound(p->t, p->n, x);
    return valid_below(p, j) != NONE && valid_from(p, j) != NONE;
}

/* An item of the answer: run k, or the empty buckets [lo, hi] (k NONE). */
typedef struct item {
    int64_t lo, hi;
    size_t k;
} item_t;

static core_status_t range_buckets(const ts_t *ts, const ts_query_t *q, int64_t from, int64_t to, qrun_t *r,
                                   int64_t *tb, double *vb)
{
    const ts_agg_t one[1] = { q->agg };
    const double oneq[1] = { q->quantile };
    plan_t pl = { .q = q, .from = from, .to = to, .naggs = q->naggs > 1 ? q->naggs : 1 };
    pl.aggs = q->naggs > 1 ? q->aggs : one;
    const double *quant = q->naggs > 1 ? q->quantiles : oneq;
    item_t *items = NULL;
    core_status_t st = CORE_NOMEM;
    pl.agg = calloc(pl.naggs, sizeof(*pl.agg));
    pl.row = malloc(pl.naggs * sizeof(*pl.row));
    if (!pl.agg || !pl.row || !gather(ts, q, from, to, tb, vb, valid, passes, q->no_before ? 0 : 2, &pl.p))
        goto out;
    for (size_t a = 0; a < pl.naggs; a++) {
        pl.agg[a].type = pl.aggs[a];
        pl.agg[a].q = quant[a];
        agg_reset(&pl.agg[a]);
    }
    /* the runs of the query's samples, one per bucket */
    const pts_t *p = &pl.p;
    pl.runs = malloc((p->i1 - p->i0 + 1) * sizeof(*pl.runs));
    items = malloc((2 * (p->i1 - p->i0) + 3) * sizeof(*items));
    if (!pl.runs || !items)
        goto out;
    for (size_t i = p->i0; i < p->i1;) {
        run_t *x = &pl.runs[pl.nruns++];
        x->b = ts_bucket_start(p->t[i], q->bucket_ms, q->align);
        x->i0 = i;
        while (i < p->i1 && (uint64_t)p->t[i] - (uint64_t)x->b < (uint64_t)q->bucket_ms)
            i++;
        x->i1 = i;
    }
    /* the answer's items, in time order, and how many buckets they hold */
    size_t ni = 0;
    uint64_t rows = 0, bms = (uint64_t)q->bucket_ms;
    int64_t bfrom = ts_bucket_start(from, q->bucket_ms, q->align), bto = ts_bucket_start(to, q->bucket_ms, q->align);
    if (q->empty && pl.nruns == 0) {
        if (both_sides(p, from))
            items[ni++] = (item_t){ bfrom, bto, NONE };
    } else if (q->empty && bfrom < pl.runs[0].b && both_sides(p, from)) {
        items[ni++] = (item_t){ bfrom, pl.runs[0].b - q->bucket_ms, NONE };
    }
    for (size_t k = 0; k < pl.nruns; k++) {
        bool any = false;
        for (size_t i = pl.runs[k].i0; i < pl.runs[k].i1 && !any; i++)
            for (size_t a = 0; a < pl.naggs && !any; a++)
                any = agg_counts(pl.aggs[a], p->v[i]);
        if (q->empty && k > 0 && (uint64_t)pl.runs[k].b - (uint64_t)pl.runs[k - 1].b > bms)
            items[ni++] = (item_t){ pl.runs[k - 1].b + q->bucket_ms, pl.runs[k].b - q->bucket_ms, NONE };
        if (any || q->empty)
            items[ni++] = (item_t){ pl.runs[k].b, pl.runs[k].b, k };
    }
    if (q->empty && pl.nruns > 0 && pl.runs[pl.nruns - 1].b < bto) {
        int64_t lo = pl.runs[pl.nruns - 1].b + q->bucket_ms;
        if (both_sides(p, lo))
            items[ni++] = (item_t){ lo, bto, NONE };
    }
    for (size_t i = 0; i < ni; i++)
        rows += ((uint64_t)items[i].hi - (uint64_t)items[i].lo) / bms + 1;
    if (q->count && q->count < rows)
        rows = q->count;
    st = CORE_OK;
    if (q->max_results && rows > q->max_results) {
        st = CORE_LIMIT;
        goto out;
    }
    for (size_t n = 0; n < ni && !r->done; n++) {
        const item_t *it = &items[q->reverse ? ni - 1 - n : n];
        uint64_t nb = ((uint64_t)it->hi - (uint64_t)it->lo) / bms + 1;
        for (uint64_t j = 0; j < nb && !r->done; j++) {
            int64_t b = q->reverse ? (int64_t)((uint64_t)it->hi - j * bms) : (int64_t)((uint64_t)it->lo + j * bms);
            plan_row(&pl, r, b, it->k);
        }
    }
out:
    for (size_t a = 0; pl.agg && a < pl.naggs; a++) {
        r->agg.oom |= pl.agg[a].oom;
        agg_release(&pl.agg[a]);
    }
    free(pl.agg);
    free(pl.row);
    free(pl.runs);
    free(items);
    free(pl.p.t);
    free(pl.p.v);
    return st;
}

static core_status_t range_run(const ts_t *ts, const ts_query_t *q, ts_emit_fn emit, ts_emit_row_fn emit_row,
                               void *ud);

core_status_t ts_range(const ts_t *ts, const ts_query_t *q, ts_emit_fn emit, void *ud)
{
    return range_run(ts, q, emit, NULL, ud);
}

core_status_t ts_range_rows(const ts_t *ts, const ts_query_t *q, ts_emit_row_fn emit, void *ud)
{
    return range_run(ts, q, NULL, emit, ud);
}

static core_status_t range_run(const ts_t *ts, const ts_query_t *q, ts_emit_fn emit, ts_emit_row_fn emit_row,
                               void *ud)
{
    if (!has_samples(ts) && !q->has_extra)
        return CORE_OK;
    int64_t from = q->from, to = q->to;
    int64_t cut = cutoff(ts);
    if (from < cut)
        from = cut;
    if (from > to)
        return CORE_OK;
    qrun_t r = { .q = q, .emit = emit, .emit_row = emit_row, .ud = ud };
    r.agg.type = q->agg;
    r.agg.q = q->quantile;
    agg_reset(&r.agg);
    int64_t *t = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*t));
    double *v = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*v));
    if (!t || !v) {
        free(t);
        free(v);
        return CORE_NOMEM;
    }
    if (q->agg != TS_AGG_NONE && (q->empty || q->agg == TS_AGG_TWA || q->naggs > 1)) {
        core_status_t st = q->legacy_twa && q->agg == TS_AGG_TWA && !q->empty && !q->reverse && q->naggs <= 1
                               ? legacy_twa(ts, q, from, to, &r, t, v)
                               : range_buckets(ts, q, from, to, &r, t, v);
        free(t);
        free(v);
        agg_release(&r.agg);
        return r.oom || r.agg.oom ? CORE_NOMEM : st;
    }
    bool extra = q->has_extra && q->extra.ts >= from && q->extra.ts <= to;
    if (!q->reverse) {
        size_t j = chunk_for(ts, from);
        for (; j < ts->nchunks && !r.done && ts->chunks[j]->first_ts <= to; j++) {
            const ts_chunk_t *c = ts->chunks[j];
            if (c->last_ts < from)
                continue;
            chunk_decode(c, t, v);
            for (size_t i = lower_bound(t, c->count, from); i < c->count && t[i] <= to && !r.done; i++)
                feed(&r, t[i], v[i]);
        }
        if (extra && !r.done)
            feed(&r, q->extra.ts, q->extra.value);
    } else if (extra || has_samples(ts)) {
        if (extra)
            feed(&r, q->extra.ts, q->extra.value);
        size_t j = has_samples(ts) ? chunk_for(ts, to) + 1 : 0;
        while (j-- > 0 && !r.done && ts->chunks[j]->last_ts >= from) {
            const ts_chunk_t *c = ts->chunks[j];
            if (c->first_ts > to)
                continue;
            chunk_decode(c, t, v);
            size_t lo = lower_bound(t, c->count, from);
            size_t hi = to == INT64_MAX ? c->count : lower_bound(t, c->count, to + 1);
            for (size_t i = hi; i > lo && !r.done; i--)
                feed(&r, t[i - 1], v[i - 1]);
        }
    }
    if (!r.done)
        flush_bucket(&r);
    free(t);
    free(v);
    free(r.rbuf);
    agg_release(&r.agg);
    return r.oom || r.agg.oom ? CORE_NOMEM : CORE_OK;
}

/* ======================================================================== */
/* Keyspace type: snapshot encoding                                         */
/* ======================================================================== */

static void type_free(void *v) { ts_free(v); }
static size_t type_size(const void *v) { return ((const ts_t *)v)->mem; }

static void type_encode(const void *value, wbuf_t *out)
{
    const ts_t *ts = value;
    wbuf_put_u8(out, TS_ENC_VERSION);
    wbuf_put_u8(out, (uint8_t)ts->policy);
    wbuf_put_i64(out, ts->retention);
    wbuf_put_u32(out, (uint32_t)ts->nlabels);
    for (size_t i = 0; i < ts->nlabels; i++) {
        wbuf_put_blob(out, ts->labels[i].name, ts->labels[i].nlen);
        wbuf_put_blob(out, ts->labels[i].value, ts->labels[i].vlen);
    }
    wbuf_put_u32(out, (uint32_t)ts->nrules);
    for (size_t i = 0; i < ts->nrules; i++) {
        wbuf_put_blob(out, ts->rules[i].dest, ts->rules[i].dlen);
        wbuf_put_u8(out, (uint8_t)ts->rules[i].agg);
        wbuf_put_i64(out, ts->rules[i].bucket_ms);
        wbuf_put_i64(out, ts->rules[i].align);
        wbuf_put_f64(out, ts->rules[i].quantile);
        wbuf_put_u8(out, ts->rules[i].gen);
        wbuf_put_i64(out, ts->rules[i].since);
    }
    wbuf_put_u8(out, ts->src != NULL);
    if (ts->src)
        wbuf_put_blob(out, ts->src, ts->src_len);
    wbuf_put_u32(out, (uint32_t)ts->nchunks);
    for (size_t i = 0; i < ts->nchunks; i++) {
        const ts_chunk_t *c = ts->chunks[i];
        wbuf_put_u32(out, c->count);
        wbuf_put_u32(out, c->nbits);
        wbuf_put_i64(out, c->first_ts);
        wbuf_put_bytes(out, c->data, (c->nbits + 7) / 8);
    }
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint8_t policy = rbuf_u8(&r);
    int64_t retention = rbuf_i64(&r);
    uint32_t nlabels = rbuf_u32(&r);
    if (r.err) {
        *why = "ts: truncated header";
        return NULL;
    }
    if (ver < 1 || ver > TS_ENC_VERSION) {
        *why = "ts: unknown encoding version";
        return NULL;
    }
    if (policy >= TS_DUP__COUNT || retention < 0) {
        *why = "ts: bad policy or retention";
        return NULL;
    }
    if (nlabels > TS_MAX_LABELS) {
        *why = "ts: too many labels";
        return NULL;
    }
    ts_label_t lab[TS_MAX_LABELS];
    for (uint32_t i = 0; i < nlabels; i++) {
        size_t nl, vl;
        const uint8_t *np = rbuf_blob(&r, &nl);
        const uint8_t *vp = rbuf_blob(&r, &vl);
        if (!np || !vp || nl == 0 || vl == 0 || nl > TS_MAX_LABEL_LEN || vl > TS_MAX_LABEL_LEN || !codec_text_ok(np, nl) ||
            !codec_text_ok(vp, vl)) {
            *why = "ts: bad label";
            return NULL;
        }
        for (uint32_t k = 0; k < i; k++)
            if (lab[k].name_len == nl && memcmp(lab[k].name, np, nl) == 0) {
                *why = "ts: duplicate label";
                return NULL;
            }
        lab[i] = (ts_label_t){ (const char *)np, nl, (const char *)vp, vl };
    }
    ts_rule_t rules[TS_MAX_RULES];
    uint32_t nrules = 0;
    const uint8_t *srcp = NULL;
    size_t srcl = 0;
    if (ver >= 2) {
        nrules = rbuf_u32(&r);
        if (r.err || nrules > TS_MAX_RULES) {
            *why = "ts: bad rule count";
            return NULL;
        }
        for (uint32_t i = 0; i < nrules; i++) {
            size_t dl;
            const uint8_t *dp = rbuf_blob(&r, &dl);
            uint8_t agg = rbuf_u8(&r);
            int64_t bucket = rbuf_i64(&r), align = rbuf_i64(&r);
            double quant = rbuf_f64(&r);
            uint8_t gen = TS_RULE_GEN_1;   /* (version 2: before issue 37) */
            int64_t since = -1;
            if (ver >= 3) {
                gen = rbuf_u8(&r);
                since = rbuf_i64(&r);
            }
            if (r.err || !dp || dl == 0 || dl > TS_MAX_LABEL_LEN * 64 || agg == TS_AGG_NONE || agg >= TS_AGG__COUNT ||
                bucket <= 0 || align < 0 || !(quant >= 0 && quant <= 1) || (agg != TS_AGG_QUANTILE && quant != 0) ||
                (gen != TS_RULE_GEN_1 && gen != TS_RULE_GEN_2) || since < -1 || (gen == TS_RULE_GEN_1 && since != -1)) {
                *why = "ts: bad rule";
                return NULL;
            }
            rules[i] = (ts_rule_t){ (const char *)dp, dl, (ts_agg_t)agg, bucket, align, quant, gen, since };
        }
        uint8_t has_src = rbuf_u8(&r);
        if (has_src > 1 || (has_src && (!(srcp = rbuf_blob(&r, &srcl)) || srcl == 0))) {
            *why = "ts: bad source";
            return NULL;
        }
    }
    uint32_t nchunks = rbuf_u32(&r);
    if (r.err || (uint64_t)nchunks * 17 > rbuf_left(&r)) {   /* each chunk takes >= 16 + 1 bytes */
        *why = "ts: bad chunk count";
        return NULL;
    }
    ts_t *ts = ts_create(retention, (ts_policy_t)policy, lab, nlabels);
    bool ok = ts && (!nchunks || ensure_array(ts, nchunks)) && (!srcp || ts_set_source(ts, (const char *)srcp, srcl));
    for (uint32_t i = 0; ok && i < nrules; i++)
        ok = ts_rule_add(ts, &rules[i]);
    if (!ok) {
        ts_free(ts);
        *why = "out of memory";
        return NULL;
    }
    for (uint32_t i = 0; i < nchunks; i++) {
        uint32_t count = rbuf_u32(&r);
        uint32_t nbits = rbuf_u32(&r);
        int64_t first = rbuf_i64(&r);
        if (r.err || count == 0 || count > TS_CHUNK_MAX_SAMPLES || nbits < 64 ||
            nbits > (uint32_t)TS_CHUNK_CAP_MAX * 8 || first < 0) {
            *why = "ts: bad chunk header";
            goto fail;
        }
        uint32_t nbytes = (nbits + 7) / 8;
        const uint8_t *d = rbuf_bytes(&r, nbytes);
        if (!d) {
            *why = "ts: truncated chunk";
            goto fail;
        }
        if ((nbits & 7) && (d[nbytes - 1] & (0xff >> (nbits & 7)))) {
            *why = "ts: nonzero padding bits";
            goto fail;
        }
        gorilla_enc_t g;
        if (!gorilla_decode(d, nbits, count, first, TS_MAX_TIMESTAMP, NULL, NULL, &g)) {
            *why = "ts: corrupt chunk stream";
            goto fail;
        }
        if (i > 0 && first <= ts->chunks[i - 1]->last_ts) {
            *why = "ts: chunks out of order";
            goto fail;
        }
        ts_chunk_t *c = chunk_new(ts, nbytes);
        if (!c) {
            *why = "out of memory";
            goto fail;
        }
        memcpy(c->data, d, nbytes);
        chunk_set_enc(c, &g);
        ts->chunks[ts->nchunks++] = c;
        ts->total += count;
    }
    if (!rbuf_done(&r)) {
        *why = "ts: trailing bytes";
        goto fail;
    }
    if (ts->nchunks) {
        int64_t cut = cutoff(ts);
        for (size_t i = 0; i < ts->nchunks; i++)
            if ((i > 0 && ts->chunks[i]->first_ts < cut) || ts->chunks[i]->last_ts < cut) {
                *why = "ts: samples past retention beyond the first chunk";
                goto fail;
            }
    }
    return ts;
fail:
    ts_free(ts);
    return NULL;
}

const ks_type_t ts_type = {
    .tag = TYPE_TAG_TS,
    .name = "ts",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
