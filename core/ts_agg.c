/*
 * ts_agg.c - the names of duplicate policies and aggregations, and the
 * aggregators a range query and a compaction rule fold a bucket with.
 *
 * Aggregation follows RedisTimeSeries's compaction.c: bucket start
 * t - ((t - align) mod b), sum accumulated in time order, avg = sum / n with
 * its long-double fallback when the sum would overflow, variance
 * (Σx² - 2·Σx·Σx/n + (Σx/n)²·n) / n and the sample variance var·n/(n-1)
 * (0 for n = 1); std is its square root.  One deviation: a variance that
 * rounding makes slightly negative is reported as 0 (RedisTimeSeries would
 * print it, and NaN for std).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/ts_impl.h"

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
/* Aggregators                                                              */
/* ======================================================================== */

int64_t ts_bucket_start(int64_t t, int64_t bucket_ms, int64_t align) { return bucket_start(t, bucket_ms, align); }

void tsi_agg_reset(agg_t *a)
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
void tsi_agg_release(agg_t *a)
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

void tsi_agg_add(agg_t *a, double v)
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

double tsi_agg_final(agg_t *a)
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

double ts_reduce(ts_agg_t a, const double *v, size_t n)
{
    agg_t g = { .type = a };
    tsi_agg_reset(&g);
    for (size_t i = 0; i < n; i++)
        if (agg_counts(a, v[i]))
            tsi_agg_add(&g, v[i]);
    /* no value counted: the count family answers 0, the rest NaN ("no
     * data"), as RedisTimeSeries's reducer does */
    bool counts = a == TS_AGG_COUNT || a == TS_AGG_COUNT_NAN || a == TS_AGG_COUNT_ALL;
    double r = g.oom ? NAN : g.n ? tsi_agg_final(&g) : counts ? 0 : NAN;
    tsi_agg_release(&g);
    return r;
}
