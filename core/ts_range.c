/*
 * ts_range.c - range queries (TS.RANGE, TS.REVRANGE and what rules and
 * TS.MRANGE ask): samples in a window, filtered, aggregated into buckets,
 * forward or reversed; EMPTY and twa as RedisTimeSeries computes them (ts.h
 * states the contract).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_impl.h"

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
        tsi_agg_reset(&r->agg);
        for (size_t i = r->rn; i-- > 0;)
            tsi_agg_add(&r->agg, r->rbuf[i]);
        r->rn = 0;
    }
    out(r, report_ts(r->q, r->bucket), tsi_agg_final(&r->agg));
    r->have_bucket = false;
    tsi_agg_reset(&r->agg);
}

static bool ts_filtered(const ts_query_t *q, int64_t t)
{
    size_t i = lower_bound(q->filter_ts, q->nfilter_ts, t);
    return i < q->nfilter_ts && q->filter_ts[i] == t;
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
        r->bucket = bucket_start(t, q->bucket_ms, q->align);
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
        tsi_agg_add(&r->agg, v);
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
        int64_t b = bucket_start(p.t[i], q->bucket_ms, q->align);
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
        tsi_agg_reset(g);
        for (size_t i = pl->runs[k].i0; i < pl->runs[k].i1; i++)
            if (agg_counts(type, p->v[i]))
                tsi_agg_add(g, p->v[i]);
        return tsi_agg_final(g);
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
        tsi_agg_reset(&pl.agg[a]);
    }
    /* the runs of the query's samples, one per bucket */
    const pts_t *p = &pl.p;
    pl.runs = malloc((p->i1 - p->i0 + 1) * sizeof(*pl.runs));
    items = malloc((2 * (p->i1 - p->i0) + 3) * sizeof(*items));
    if (!pl.runs || !items)
        goto out;
    for (size_t i = p->i0; i < p->i1;) {
        run_t *x = &pl.runs[pl.nruns++];
        x->b = bucket_start(p->t[i], q->bucket_ms, q->align);
        x->i0 = i;
        while (i < p->i1 && (uint64_t)p->t[i] - (uint64_t)x->b < (uint64_t)q->bucket_ms)
            i++;
        x->i1 = i;
    }
    /* the answer's items, in time order, and how many buckets they hold */
    size_t ni = 0;
    uint64_t rows = 0, bms = (uint64_t)q->bucket_ms;
    int64_t bfrom = bucket_start(from, q->bucket_ms, q->align), bto = bucket_start(to, q->bucket_ms, q->align);
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
        tsi_agg_release(&pl.agg[a]);
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
    tsi_agg_reset(&r.agg);
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
        tsi_agg_release(&r.agg);
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
    tsi_agg_release(&r.agg);
    return r.oom || r.agg.oom ? CORE_NOMEM : CORE_OK;
}
