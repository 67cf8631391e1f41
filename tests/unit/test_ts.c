/*
 * test_ts.c - the Gorilla time series against a brute-force model.
 *
 * The model is a sorted array of (timestamp, value) to which samples are
 * added one at a time with RedisTimeSeries's rules (retention measured from
 * the newest sample, the duplicate policy, all-or-nothing batches), and whose
 * range queries filter and aggregate the plain array.  Seeded random
 * operations (in-order appends, out-of-order samples, duplicates, samples
 * older than retention, deletions) run against both; after every operation
 * the visible samples, the info and random range queries (every aggregation,
 * bucket sizes hitting sample timestamps exactly, alignments, reverse, count,
 * value and timestamp filters) must agree exactly, floats included: the
 * model computes aggregates with the same formulas in the same order.
 *
 * Also: the compression target (<= 2 bytes/sample for a regular 1-second
 * series of slowly changing values), snapshot round trips, hostile encodings,
 * timestamps at the ends of the range, and the bucket arithmetic.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/rng.h"
#include "core/ts.h"
#include "tests/ts_filter_model.h"

/* ------------------------------------------------------------------------ */
/* The model                                                                */
/* ------------------------------------------------------------------------ */

typedef struct model {
    int64_t *t;
    double *v;
    size_t n, cap;
    int64_t retention;
    ts_policy_t policy;
} model_t;

static void m_reserve(model_t *m, size_t want)
{
    if (want <= m->cap)
        return;
    size_t ncap = m->cap ? m->cap : 64;
    while (ncap < want)
        ncap *= 2;
    m->t = realloc(m->t, ncap * sizeof(*m->t));
    m->v = realloc(m->v, ncap * sizeof(*m->v));
    assert_non_null(m->t);
    assert_non_null(m->v);
    m->cap = ncap;
}

static void m_copy(model_t *dst, const model_t *src)
{
    *dst = *src;
    dst->t = NULL;
    dst->v = NULL;
    dst->cap = 0;
    m_reserve(dst, src->n + 1);
    if (src->n) {
        memcpy(dst->t, src->t, src->n * sizeof(*src->t));
        memcpy(dst->v, src->v, src->n * sizeof(*src->v));
    }
}

static void m_free(model_t *m)
{
    free(m->t);
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static size_t m_find(const model_t *m, int64_t t)   /* first index with m->t[i] >= t */
{
    size_t i = 0;
    while (i < m->n && m->t[i] < t)
        i++;
    return i;
}

/* One TS.ADD with the rules; returns the status, changing m only on success. */
static core_status_t m_add1(model_t *m, int64_t t, double v, ts_policy_t p)
{
    if (m->n && m->retention > 0 && t < m->t[m->n - 1] && m->t[m->n - 1] - t > m->retention)
        return CORE_TOO_OLD;
    size_t i = m_find(m, t);
    if (i < m->n && m->t[i] == t) {
        double cur = m->v[i];
        if ((p == TS_DUP_MIN || p == TS_DUP_MAX || p == TS_DUP_SUM) && (isnan(cur) || isnan(v)))
            return CORE_DUPLICATE;   /* RedisTimeSeries: NaN cannot be combined */
        switch (p) {
        case TS_DUP_BLOCK: return CORE_DUPLICATE;
        case TS_DUP_FIRST: break;
        case TS_DUP_LAST: cur = v; break;
        case TS_DUP_MIN: cur = v < cur ? v : cur; break;
        case TS_DUP_MAX: cur = v > cur ? v : cur; break;
        case TS_DUP_SUM: cur += v; break;
        default: fail();
        }
        if (isinf(cur))
            return CORE_OVERFLOW;
        m->v[i] = cur;
        return CORE_OK;
    }
    m_reserve(m, m->n + 1);
    memmove(m->t + i + 1, m->t + i, (m->n - i) * sizeof(*m->t));
    memmove(m->v + i + 1, m->v + i, (m->n - i) * sizeof(*m->v));
    m->t[i] = t;
    m->v[i] = v;
    m->n++;
    if (m->retention > 0) {   /* trim below newest - retention */
        int64_t cut = m->t[m->n - 1] - m->retention;
        size_t k = 0;
        while (k < m->n && m->t[k] < cut)
            k++;
        memmove(m->t, m->t + k, (m->n - k) * sizeof(*m->t));
        memmove(m->v, m->v + k, (m->n - k) * sizeof(*m->v));
        m->n -= k;
    }
    return CORE_OK;
}

static core_status_t m_add(model_t *m, const ts_sample_t *s, size_t n, ts_policy_t p, size_t *failed)
{
    model_t work;
    m_copy(&work, m);
    for (size_t i = 0; i < n; i++) {
        core_status_t st = m_add1(&work, s[i].ts, s[i].value, p);
        if (st != CORE_OK) {
            *failed = i;
            m_free(&work);
            return st;
        }
    }
    m_free(m);
    *m = work;
    return CORE_OK;
}

static int64_t m_delete(model_t *m, int64_t from, int64_t to)
{
    size_t o = 0;
    int64_t del = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (m->t[i] >= from && m->t[i] <= to) {
            del++;
        } else {
            m->t[o] = m->t[i];
            m->v[o++] = m->v[i];
        }
    }
    m->n = o;
    return del;
}

static double m_quantile;   /* the quantile of TS_AGG_QUANTILE in the query at hand */

static int m_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Aggregation as RedisTimeSeries's compaction.c computes it (and the exact
 * quantile: sorted, interpolated between closest ranks). */
static double m_aggregate(ts_agg_t a, const double *v, size_t n)
{
    if (a == TS_AGG_QUANTILE) {
        double *c = malloc(n * sizeof(*c));
        memcpy(c, v, n * sizeof(*c));
        qsort(c, n, sizeof(*c), m_cmp_double);
        double pos = (double)(n - 1) * m_quantile;
        size_t lo = (size_t)floor(pos);
        double r = lo + 1 >= n ? c[n - 1] : c[lo] + (pos - floor(pos)) * (c[lo + 1] - c[lo]);
        free(c);
        return r;
    }
    double sum = 0, sum2 = 0, mn = DBL_MAX, mx = -DBL_MAX;
    for (size_t i = 0; i < n; i++) {
        sum += v[i];
        sum2 += v[i] * v[i];
        if (v[i] < mn)
            mn = v[i];
        if (v[i] > mx)
            mx = v[i];
    }
    /* avg: RedisTimeSeries keeps a sum, and once adding the next value would
     * overflow, a running mean in long double: mean' = mean*(k-1)/k + x/k */
    double acc = 0, cnt = 0;
    bool running = false;
    for (size_t i = 0; i < n; i++) {
        cnt++;
        bool would = (acc < 0.0) == (v[i] < 0.0) && fabs(acc) > DBL_MAX - fabs(v[i]);
        if (running || would) {
            long double mean = running ? (long double)acc / cnt * (long double)(cnt - 1) : (long double)acc / cnt;
            acc = (double)(mean + (long double)v[i] / (long double)cnt);
            running = true;
        } else {
            acc += v[i];
        }
    }
    double avg = running ? acc : acc / cnt;
    double c = (double)n;
    double var = (sum2 - 2 * sum * sum / c + pow(sum / c, 2) * c) / c;
    if (var < 0)
        var = 0;
    double vars = n == 1 ? 0 : var * c / (double)(n - 1);
    switch (a) {
    case TS_AGG_AVG: return avg;
    case TS_AGG_SUM: return sum;
    case TS_AGG_MIN: return mn;
    case TS_AGG_MAX: return mx;
    case TS_AGG_RANGE: return mx - mn;
    case TS_AGG_COUNT:
    case TS_AGG_COUNT_NAN:
    case TS_AGG_COUNT_ALL: return c;
    case TS_AGG_FIRST: return v[0];
    case TS_AGG_LAST: return v[n - 1];
    case TS_AGG_VAR_P: return var;
    case TS_AGG_VAR_S: return vars;
    case TS_AGG_STD_P: return sqrt(var);
    case TS_AGG_STD_S: return sqrt(vars);
    default: fail(); return 0;
    }
}

typedef struct res {
    int64_t *t;
    double *v;
    size_t n, cap;
} res_t;

static bool res_push(void *ud, int64_t t, double v)
{
    res_t *r = ud;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->t = realloc(r->t, r->cap * sizeof(*r->t));
        r->v = realloc(r->v, r->cap * sizeof(*r->v));
    }
    r->t[r->n] = t;
    r->v[r->n++] = v;
    return true;
}

static void res_free(res_t *r)
{
    free(r->t);
    free(r->v);
    memset(r, 0, sizeof(*r));
}

static int64_t m_report(const ts_query_t *q, int64_t start)
{
    __int128 base = start < 0 ? 0 : start;
    if (q->bucket_ts == TS_BUCKET_END)
        base += q->bucket_ms;
    if (q->bucket_ts == TS_BUCKET_MID)
        base += q->bucket_ms / 2;
    return base > INT64_MAX ? INT64_MAX : (int64_t)base;   /* saturates at the end of time */
}

/* Whether a sample passes the query's filters (timestamps, then values: a
 * NaN is in no value range). */
static bool m_passes(const ts_query_t *q, int64_t t, double v)
{
    if (q->filter_ts) {
        bool hit = false;
        for (size_t k = 0; k < q->nfilter_ts; k++)
            hit |= q->filter_ts[k] == t;
        if (!hit)
            return false;
    }
    if ((q->has_min || q->has_max) && isnan(v))
        return false;
    return !((q->has_min && v < q->min) || (q->has_max && v > q->max));
}

/* Whether the aggregation counts a value. */
static bool m_counts(ts_agg_t a, double v)
{
    if (a == TS_AGG_COUNT_NAN)
        return isnan(v);
    return a == TS_AGG_NONE || a == TS_AGG_COUNT_ALL || !isnan(v);
}

/* Whether a sample passes the query's filters and is counted by its aggregation. */
static bool m_counted(const ts_query_t *q, int64_t t, double v) { return m_passes(q, t, v) && m_counts(q->agg, v); }

static int64_t m_bucket(const ts_query_t *q, int64_t t)
{
    __int128 k = ((__int128)t - q->align) / q->bucket_ms;
    if ((__int128)q->align + k * q->bucket_ms > t)
        k--;
    return (int64_t)((__int128)q->align + k * q->bucket_ms);
}

/* The samples an EMPTY or twa query sees (RedisTimeSeries's aggregation
 * iterator): its own S (in range, passing the filters, NaN included) in runs
 * of one bucket each, and the valid ones V (passing the filters, not NaN) of
 * the whole series. */
typedef struct m_view {
    res_t s, v;
    int64_t *rb;            /* run k: bucket rb[k], S samples [r0[k], r1[k]) */
    size_t *r0, *r1, nr;
} m_view_t;

static size_t m_last_below(const res_t *v, int64_t x, size_t skip)   /* the (skip+1)-th valid before x, or SIZE_MAX */
{
    for (size_t i = v->n; i-- > 0;)
        if (v->t[i] < x && skip-- == 0)
            return i;
    return SIZE_MAX;
}

static size_t m_first_from(const res_t *v, int64_t x, size_t skip)   /* the (skip+1)-th valid at or after x */
{
    for (size_t i = 0; i < v->n; i++)
        if (v->t[i] >= x && skip-- == 0)
            return i;
    return SIZE_MAX;
}

/* twa of a bucket without valid samples, as RedisTimeSeries's
 * twa_calc_empty_bucket_val: b1, b2 the two valid samples nearest before,
 * a1, a2 nearest after. */
static double m_twa_empty(const res_t *v, int64_t ta, int64_t tb, size_t b1, size_t b2, size_t a1, size_t a2)
{
    const size_t no = SIZE_MAX;
    if (b1 != no && a1 != no) {
        double dv = v->v[a1] - v->v[b1], dt = (double)(v->t[a1] - v->t[b1]);
        double va = v->v[b1] + ((double)(ta - v->t[b1]) * dv) / dt, vb = v->v[b1] + ((double)(tb - v->t[b1]) * dv) / dt;
        return (va + vb) / 2.0;
    }
    bool near_before = b2 != no && v->t[b1] + (v->t[b1] - v->t[b2]) > ta;
    bool near_after = a2 != no && tb + (v->t[a2] - v->t[a1]) > v->t[a1];
    if (!near_before && !near_after)
        return NAN;
    if (a2 != no)
        return tb + (v->t[a2] - v->t[a1]) / 2 <= v->t[a1] ? NAN : v->v[a1];
    return v->t[b1] + (v->t[b1] - v->t[b2]) / 2 <= ta ? NAN : v->v[b1];
}

/* twa of run k: the trapezoids of its valid samples and, along the line to
 * the neighbour RedisTimeSeries uses on each side, to the window's ends. */
static double m_twa_run(const m_view_t *w, const ts_query_t *q, size_t k)
{
    const res_t *s = &w->s;
    int64_t ta = w->rb[k] < 0 ? 0 : w->rb[k], tb = (int64_t)((__int128)w->rb[k] + q->bucket_ms < q->to
                                                               ? w->rb[k] + q->bucket_ms : q->to);
    if (ta < q->from)
        ta = q->from;
    /* the valid samples of the run */
    int64_t vt[4096];
    double vv[4096];
    size_t m = 0;
    for (size_t i = w->r0[k]; i < w->r1[k]; i++)
        if (!isnan(s->v[i])) {
            assert_true(m < 4096);
            vt[m] = s->t[i];
            vv[m++] = s->v[i];
        }
    /* neighbours (SIZE_MAX: none) as points (lt, lv), (rt, rv) */
    bool hl = false, hr = false;
    int64_t lt = 0, rt = 0;
    double lv = 0, rv = 0;
    if (!q->reverse) {
        if (k == 0) {
            size_t i = m_last_below(&w->v, s->t[w->r0[0]], 0);
            if ((hl = i != SIZE_MAX))
                lt = w->v.t[i], lv = w->v.v[i];
        } else {
            for (size_t i = w->r1[k - 1]; i-- > w->r0[k - 1] && !hl;)
                if (!isnan(s->v[i]))
                    hl = true, lt = s->t[i], lv = s->v[i];
        }
        if (k + 1 < w->nr) {
            if ((hr = !isnan(s->v[w->r0[k + 1]])))
                rt = s->t[w->r0[k + 1]], rv = s->v[w->r0[k + 1]];
        } else {
            size_t i = m_first_from(&w->v, vt[m - 1] + 1, 0);
            if ((hr = i != SIZE_MAX))
                rt = w->v.t[i], rv = w->v.v[i];
        }
    } else {
        if (k + 1 == w->nr) {
            size_t i = m_first_from(&w->v, s->t[w->r1[k] - 1] + 1, 0);
            if ((hr = i != SIZE_MAX))
                rt = w->v.t[i], rv = w->v.v[i];
        } else {
            for (size_t i = w->r0[k + 1]; i < w->r1[k + 1] && !hr; i++)
                if (!isnan(s->v[i]))
                    hr = true, rt = s->t[i], rv = s->v[i];
        }
        if (k > 0) {
            if ((hl = !isnan(s->v[w->r1[k - 1] - 1])))
                lt = s->t[w->r1[k - 1] - 1], lv = s->v[w->r1[k - 1] - 1];
        } else {
            size_t i = m_last_below(&w->v, vt[0], 0);
            if ((hl = i != SIZE_MAX))
                lt = w->v.t[i], lv = w->v.v[i];
        }
    }
    int64_t first = hl ? ta : vt[0], last = hr ? tb : vt[m - 1];
    if (first == last)
        return q->reverse ? vv[0] : vv[m - 1];
    double terms[4097];
    size_t nt = 0;
    if (hl) {
        double vab = lv + ((double)(ta - lt) * (vv[0] - lv)) / (double)(vt[0] - lt);
        terms[nt++] = ((vab + vv[0]) * (double)(vt[0] - ta)) / 2.0;
    }
    for (size_t i = 1; i < m; i++)
        terms[nt++] = ((vv[i - 1] + vv[i]) * (double)(vt[i] - vt[i - 1])) / 2.0;
    if (hr) {
        double vab = vv[m - 1] + ((double)(tb - vt[m - 1]) * (rv - vv[m - 1])) / (double)(rt - vt[m - 1]);
        terms[nt++] = ((vab + vv[m - 1]) * (double)(tb - vt[m - 1])) / 2.0;
    }
    double res = 0;   /* summed in the order the query walks */
    for (size_t i = 0; i < nt; i++)
        res += terms[q->reverse ? nt - 1 - i : i];
    return res / (double)llabs(last - first);
}

/* EMPTY and twa by brute force (forward order; the caller reverses). */
static void m_range_rich(const model_t *m, const ts_query_t *q, res_t *all)
{
    m_view_t w = { 0 };
    for (size_t i = 0; i < m->n; i++) {
        if (m->t[i] >= q->from && m->t[i] <= q->to && m_passes(q, m->t[i], m->v[i]))
            res_push(&w.s, m->t[i], m->v[i]);
        if (m_passes(q, m->t[i], m->v[i]) && !isnan(m->v[i]))
            res_push(&w.v, m->t[i], m->v[i]);
    }
    w.rb = malloc((w.s.n + 1) * sizeof(*w.rb));
    w.r0 = malloc((w.s.n + 1) * sizeof(*w.r0));
    w.r1 = malloc((w.s.n + 1) * sizeof(*w.r1));
    for (size_t i = 0; i < w.s.n; i++) {
        int64_t b = m_bucket(q, w.s.t[i]);
        if (!w.nr || w.rb[w.nr - 1] != b) {
            w.rb[w.nr] = b;
            w.r0[w.nr] = i;
            w.nr++;
        }
        w.r1[w.nr - 1] = i + 1;
    }
    /* the buckets reported: (start, run or SIZE_MAX, the start of its gap) */
    size_t cap = 1024, ne = 0;
    int64_t *eb = malloc(cap * sizeof(*eb)), *eg = malloc(cap * sizeof(*eg));
    size_t *ek = malloc(cap * sizeof(*ek));
#define M_EMIT(B, K, G)                                                                                                 \
    do {                                                                                                               \
        if (ne == cap) {                                                                                               \
            cap *= 2;                                                                                                  \
            eb = realloc(eb, cap * sizeof(*eb));                                                                       \
            eg = realloc(eg, cap * sizeof(*eg));                                                                       \
            ek = realloc(ek, cap * sizeof(*ek));                                                                       \
        }                                                                                                              \
        eb[ne] = (B), ek[ne] = (K), eg[ne++] = (G);                                                                    \
    } while (0)
    int64_t bf = m_bucket(q, q->from), bt = m_bucket(q, q->to);
    bool sides_from = m_last_below(&w.v, q->from, 0) != SIZE_MAX && m_first_from(&w.v, q->from, 0) != SIZE_MAX;
    if (q->empty && w.nr == 0 && sides_from)
        for (__int128 b = bf; b <= bt; b += q->bucket_ms)
            M_EMIT((int64_t)b, SIZE_MAX, bf);
    if (q->empty && w.nr > 0 && bf < w.rb[0] && sides_from)
        for (__int128 b = bf; b < w.rb[0]; b += q->bucket_ms)
            M_EMIT((int64_t)b, SIZE_MAX, bf);
    for (size_t k = 0; k < w.nr; k++) {
        if (q->empty && k > 0)
            for (__int128 b = (__int128)w.rb[k - 1] + q->bucket_ms; b < w.rb[k]; b += q->bucket_ms)
                M_EMIT((int64_t)b, SIZE_MAX, w.rb[k - 1] + q->bucket_ms);
        bool any = false;
        for (size_t i = w.r0[k]; i < w.r1[k]; i++)
            any |= m_counts(q->agg, w.s.v[i]);
        if (any || q->empty)
            M_EMIT(w.rb[k], k, 0);
    }
    if (q->empty && w.nr > 0 && (__int128)w.rb[w.nr - 1] + q->bucket_ms <= bt) {
        int64_t lo = w.rb[w.nr - 1] + q->bucket_ms;
        if (m_last_below(&w.v, lo, 0) != SIZE_MAX && m_first_from(&w.v, lo, 0) != SIZE_MAX)
            for (__int128 b = lo; b <= bt; b += q->bucket_ms)
                M_EMIT((int64_t)b, SIZE_MAX, lo);
    }
#undef M_EMIT
    double *vals = malloc((w.s.n + 1) * sizeof(*vals));
    for (size_t e = 0; e < ne; e++) {
        int64_t b = eb[e];
        size_t k = ek[e], nv = 0;
        if (k != SIZE_MAX)
            for (size_t i = w.r0[k]; i < w.r1[k]; i++)
                if (m_counts(q->agg, w.s.v[i]))
                    vals[nv++] = w.s.v[i];
        int64_t ta = b < 0 ? 0 : b, tb = (int64_t)((__int128)b + q->bucket_ms < q->to ? b + q->bucket_ms : q->to);
        if (ta < q->from)
            ta = q->from;
        double v;
        if (nv && q->agg == TS_AGG_TWA) {
            v = m_twa_run(&w, q, k);
        } else if (nv) {
            v = m_aggregate(q->agg, vals, nv);
        } else if (q->agg == TS_AGG_SUM || q->agg == TS_AGG_COUNT || q->agg == TS_AGG_COUNT_NAN ||
                   q->agg == TS_AGG_COUNT_ALL) {
            v = 0;
        } else if (q->agg == TS_AGG_LAST) {   /* the last valid sample before the bucket */
            size_t i = m_last_below(&w.v, b, 0);
            v = i == SIZE_MAX ? NAN : w.v.v[i];
        } else if (q->agg == TS_AGG_TWA) {
            int64_t at = k == SIZE_MAX ? (eg[e] < q->from ? q->from : eg[e]) : ta;   /* a gap's neighbours */
            int64_t after = k == SIZE_MAX ? at : tb;
            v = m_twa_empty(&w.v, ta, tb, m_last_below(&w.v, at, 0), m_last_below(&w.v, at, 1),
                            m_first_from(&w.v, after, 0), m_first_from(&w.v, after, 1));
        } else {
            v = NAN;
        }
        res_push(all, m_report(q, b), v);
    }
    free(vals);
    free(eb);
    free(eg);
    free(ek);
    free(w.rb);
    free(w.r0);
    free(w.r1);
    res_free(&w.s);
    res_free(&w.v);
}

static void m_range(const model_t *m, const ts_query_t *q, res_t *out)
{
    m_quantile = q->quantile;
    res_t sel = { 0 };
    for (size_t i = 0; i < m->n; i++) {
        int64_t t = m->t[i];
        double v = m->v[i];
        if (t < q->from || t > q->to)
            continue;
        if (!m_counted(q, t, v))
            continue;
        res_push(&sel, t, v);
    }
    res_t all = { 0 };
    if (q->agg != TS_AGG_NONE && (q->empty || q->agg == TS_AGG_TWA)) {
        m_range_rich(m, q, &all);
    } else if (q->agg == TS_AGG_NONE) {
        all = sel;
        memset(&sel, 0, sizeof(sel));
    } else {
        size_t i = 0;
        while (i < sel.n) {
            /* bucket start by brute force: the largest s <= t with s = align + k*bucket */
            int64_t t = sel.t[i];
            __int128 k = ((__int128)t - q->align) / q->bucket_ms;
            if ((__int128)q->align + k * q->bucket_ms > t)
                k--;
            int64_t start = (int64_t)((__int128)q->align + k * q->bucket_ms);
            assert_true(start <= t && (__int128)start + q->bucket_ms > t);
            size_t j = i;
            while (j < sel.n && sel.t[j] < (__int128)start + q->bucket_ms)
                j++;
            res_push(&all, m_report(q, start), m_aggregate(q->agg, sel.v + i, j - i));
            i = j;
        }
    }
    res_free(&sel);
    for (size_t k = 0; k < all.n; k++) {
        size_t src = q->reverse ? all.n - 1 - k : k;
        if (q->count && out->n == q->count)
            break;
        res_push(out, all.t[src], all.v[src]);
    }
    res_free(&all);
}

/* ------------------------------------------------------------------------ */
/* Comparisons                                                              */
/* ------------------------------------------------------------------------ */

static void describe(const ts_query_t *q, char *buf, size_t n)
{
    snprintf(buf, n, "from=%lld to=%lld rev=%d count=%llu agg=%s bucket=%lld align=%lld bts=%d min=%d:%g max=%d:%g fts=%zu",
             (long long)q->from, (long long)q->to, q->reverse, (unsigned long long)q->count, ts_agg_name(q->agg),
             (long long)q->bucket_ms, (long long)q->align, q->bucket_ts, q->has_min, q->min, q->has_max, q->max,
             q->nfilter_ts);
}

static void check_query(const ts_t *ts, const model_t *m, const ts_query_t *q)
{
    res_t got = { 0 }, want = { 0 };
    assert_int_equal(ts_range(ts, q, res_push, &got), CORE_OK);
    m_range(m, q, &want);
    char d[256];
    describe(q, d, sizeof(d));
    if (got.n != want.n)
        fail_msg("query %s: %zu results, model %zu", d, got.n, want.n);
    for (size_t i = 0; i < got.n; i++) {
        bool same = memcmp(&got.v[i], &want.v[i], sizeof(double)) == 0 || (isnan(got.v[i]) && isnan(want.v[i]));
        if (got.t[i] != want.t[i] || !same)
            fail_msg("query %s: result %zu is [%lld, %.17g], model [%lld, %.17g]", d, i, (long long)got.t[i],
                     got.v[i], (long long)want.t[i], want.v[i]);
    }
    res_free(&got);
    res_free(&want);
}

static void check_all(const ts_t *ts, const model_t *m)
{
    ts_info_t info;
    ts_get_info(ts, &info);
    assert_int_equal(info.samples, m->n);
    assert_int_equal(info.first_ts, m->n ? m->t[0] : -1);
    assert_int_equal(info.last_ts, m->n ? m->t[m->n - 1] : -1);
    ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP };
    check_query(ts, m, &q);
}

/* ------------------------------------------------------------------------ */
/* Random operations                                                        */
/* ------------------------------------------------------------------------ */

static double rand_value(rng_t *r, int style)
{
    switch (style) {
    case 0: return (double)rng_below(r, 6) * 0.5 - 1;                 /* few distinct values: duplicates of values */
    case 1: return round((rng_double(r) * 200 - 100) * 10) / 10;     /* decimals */
    case 2: return (rng_double(r) - 0.5) * 1e6;                       /* arbitrary doubles */
    case 3: return rng_below(r, 50) == 0 ? 1.5e308 : (double)rng_below(r, 1000);   /* SUM may overflow */
    default: return rng_below(r, 6) == 0 ? NAN : (double)rng_below(r, 100);          /* missing readings */
    }
}

static void random_query(rng_t *r, const model_t *m, ts_query_t *q, int64_t *fts)
{
    memset(q, 0, sizeof(*q));
    int64_t lo = m->n ? m->t[0] : 0, hi = m->n ? m->t[m->n - 1] : 1000;
    int64_t span = hi - lo + 1;
    q->from = rng_below(r, 4) == 0 ? 0 : lo + (int64_t)rng_below(r, (uint64_t)span) - span / 10;
    if (q->from < 0)
        q->from = 0;
    q->to = rng_below(r, 4) == 0 ? TS_MAX_TIMESTAMP : q->from + (int64_t)rng_below(r, (uint64_t)span + 1);
    q->reverse = rng_below(r, 2);
    q->count = rng_below(r, 3) == 0 ? 1 + rng_below(r, 20) : 0;
    if (rng_below(r, 5) == 0) {
        q->has_min = true;
        q->min = rand_value(r, 0);
    }
    if (rng_below(r, 5) == 0) {
        q->has_max = true;
        q->max = rand_value(r, 0) + 1;
    }
    if (rng_below(r, 8) == 0 && m->n) {
        size_t k = 1 + rng_below(r, 10);
        for (size_t i = 0; i < k; i++)
            fts[i] = rng_below(r, 2) ? m->t[rng_below(r, m->n)] : (int64_t)rng_below(r, (uint64_t)hi + 2);
        /* sorted, as the API hands them over */
        for (size_t i = 1; i < k; i++)
            for (size_t j = i; j > 0 && fts[j - 1] > fts[j]; j--) {
                int64_t x = fts[j];
                fts[j] = fts[j - 1];
                fts[j - 1] = x;
            }
        q->filter_ts = fts;
        q->nfilter_ts = k;
    }
    if (rng_below(r, 5) != 0) {
        static const int64_t buckets[] = { 1, 3, 10, 250, 1000, 2000, 5000, 60000, 1000000 };
        q->agg = (ts_agg_t)(1 + rng_below(r, TS_AGG__COUNT - 1));
        static const double qs[] = { 0, 0.5, 0.9, 0.99, 1 };
        q->quantile = q->agg == TS_AGG_QUANTILE ? (rng_below(r, 2) ? qs[rng_below(r, 5)] : rng_double(r)) : 0;
        q->bucket_ms = buckets[rng_below(r, sizeof(buckets) / sizeof(buckets[0]))];
        switch (rng_below(r, 4)) {
        case 0: q->align = 0; break;
        case 1: q->align = q->from; break;        /* ALIGN start */
        case 2: q->align = q->to == TS_MAX_TIMESTAMP ? hi : q->to; break;   /* ALIGN end */
        default: q->align = (int64_t)rng_below(r, (uint64_t)hi + 5000); break;
        }
        q->bucket_ts = (ts_bucket_ts_t)rng_below(r, 3);
        q->empty = q->bucket_ms >= 1000 && rng_below(r, 3) == 0;   /* (smaller buckets: too many to walk) */
    }
}

typedef struct scenario {
    uint64_t seed;
    int64_t retention;
    ts_policy_t policy;
    int64_t t0;          /* first timestamp */
    int value_style;
    int steps;
} scenario_t;

static void run_scenario(const scenario_t *sc)
{
    rng_t r;
    rng_seed(&r, sc->seed);
    ts_t *ts = ts_create(sc->retention, sc->policy, NULL, 0);
    assert_non_null(ts);
    model_t m = { .retention = sc->retention, .policy = sc->policy };
    int64_t clock = sc->t0;
    ts_sample_t *batch = malloc(3000 * sizeof(*batch));
    int64_t fts[16];
    size_t adds_ok = 0, adds_failed = 0;
    for (int step = 0; step < sc->steps; step++) {
        unsigned op = (unsigned)rng_below(&r, 100);
        if (op < 75) {
            size_t n = rng_below(&r, 10) == 0 ? 200 + rng_below(&r, 2500) : 1 + rng_below(&r, 8);
            for (size_t i = 0; i < n; i++) {
                unsigned kind = (unsigned)rng_below(&r, 100);
                int64_t t;
                if (kind < 70 || m.n == 0) {
                    clock += 1000 + (rng_below(&r, 4) == 0 ? (int64_t)rng_below(&r, 41) - 20 : 0);
                    t = clock;
                } else if (kind < 85) {           /* out of order, maybe older than retention */
                    int64_t back = (int64_t)rng_below(&r, sc->retention ? (uint64_t)sc->retention * 3 / 2 + 2 : 50000);
                    t = clock - back < 0 ? 0 : clock - back;
                } else if (kind < 97) {           /* an existing timestamp */
                    t = m.t[rng_below(&r, m.n)];
                } else {                          /* exactly at the retention boundary */
                    t = sc->retention && m.n && m.t[m.n - 1] > sc->retention
                            ? m.t[m.n - 1] - sc->retention - (int64_t)rng_below(&r, 2)
                            : clock;
                }
                batch[i].ts = t;
                batch[i].value = rand_value(&r, sc->value_style);
            }
            ts_policy_t p = rng_below(&r, 4) == 0 ? (ts_policy_t)rng_below(&r, TS_DUP__COUNT) : sc->policy;
            size_t f1 = 0, f2 = 0;
            core_status_t s1 = ts_add(ts, batch, n, p, &f1);
            core_status_t s2 = m_add(&m, batch, n, p, &f2);
            if (s1 != s2 || (s1 != CORE_OK && f1 != f2))
                fail_msg("seed %llu step %d: add of %zu -> %d at %zu, model %d at %zu", (unsigned long long)sc->seed,
                         step, n, s1, f1, s2, f2);
            if (s1 == CORE_OK)
                adds_ok++;
            else
                adds_failed++;
        } else if (op < 82) {
            int64_t lo = m.n ? m.t[rng_below(&r, m.n)] : 0;
            int64_t hi = lo + (int64_t)rng_below(&r, 20000);
            if (rng_below(&r, 3) == 0)
                hi = TS_MAX_TIMESTAMP;   /* may delete the newest sample */
            int64_t d1 = ts_delete_range(ts, lo, hi);
            int64_t d2 = m_delete(&m, lo, hi);
            assert_int_equal(d1, d2);
        } else {
            for (int k = 0; k < 5; k++) {
                ts_query_t q;
                random_query(&r, &m, &q, fts);
                if (q.from <= q.to)
                    check_query(ts, &m, &q);
            }
        }
        check_all(ts, &m);
    }
    /* Both outcomes must have been exercised. */
    assert_true(adds_ok > 0);
    if (sc->policy == TS_DUP_BLOCK || sc->retention)
        assert_true(adds_failed > 0);

    /* The snapshot encoding round-trips to the same series and bytes. */
    wbuf_t a = WBUF_INIT, b = WBUF_INIT;
    ts_type.encode(ts, &a);
    const char *why = NULL;
    ts_t *back = ts_type.decode(a.data, a.len, &why);
    if (!back)
        fail_msg("decode of our own encoding failed: %s", why);
    check_all(back, &m);
    ts_type.encode(back, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    /* and keeps working after the round trip */
    ts_sample_t more = { clock + 1000, 42 };
    size_t f;
    assert_int_equal(ts_add(back, &more, 1, TS_DUP_LAST, &f), CORE_OK);
    assert_int_equal(m_add(&m, &more, 1, TS_DUP_LAST, &f), CORE_OK);
    check_all(back, &m);

    wbuf_free(&a);
    wbuf_free(&b);
    ts_free(back);
    ts_free(ts);
    m_free(&m);
    free(batch);
}

static void test_random_policies(void **state)
{
    (void)state;
    for (int p = 0; p < TS_DUP__COUNT; p++) {
        scenario_t sc = { .seed = 1000 + (uint64_t)p, .retention = 0, .policy = (ts_policy_t)p, .t0 = 1686697976001LL,
                          .value_style = p % 3, .steps = 400 };
        run_scenario(&sc);
    }
}

static void test_random_retention(void **state)
{
    (void)state;
    static const int64_t ret[] = { 1, 1000, 7000, 60000, 250000 };
    for (size_t i = 0; i < sizeof(ret) / sizeof(ret[0]); i++) {
        scenario_t sc = { .seed = 2000 + i, .retention = ret[i], .policy = (ts_policy_t)(i % TS_DUP__COUNT),
                          .t0 = (int64_t)i * 3, .value_style = (int)(i % 3), .steps = 400 };
        run_scenario(&sc);
    }
}

static void test_random_sum_overflow(void **state)
{
    (void)state;
    scenario_t sc = { .seed = 3000, .retention = 0, .policy = TS_DUP_SUM, .t0 = 5, .value_style = 3, .steps = 400 };
    run_scenario(&sc);
}

/* Missing readings (NaN) under every policy, with and without retention:
 * MIN/MAX/SUM refuse to combine them, aggregations skip them but countNaN
 * and countAll, EMPTY and twa see through them. */
static void test_random_nan(void **state)
{
    (void)state;
    for (int p = 0; p < TS_DUP__COUNT; p++) {
        scenario_t sc = { .seed = 4000 + (uint64_t)p, .retention = p % 2 ? 30000 : 0, .policy = (ts_policy_t)p,
                          .t0 = 1000, .value_style = 4, .steps = 300 };
        run_scenario(&sc);
    }
}

/* Compaction rules against the brute force: after any sequence of in-order,
 * out-of-order and duplicate adds and deletions on the source, every
 * destination holds exactly the source's aggregate of each closed bucket
 * (each bucket before the one of the newest sample) that has counted
 * samples, at the bucket's start.  (twa is left out: a bucket's twa looks at
 * its neighbours, which a later out-of-order sample may change without
 * touching the bucket.)  Then the encoding round-trips the rules and the
 * source link. */
static void test_rules_random(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        rng_t r;
        rng_seed(&r, 5000 + seed);
        ts_t *src = ts_create(0, TS_DUP_LAST, NULL, 0);
        model_t m = { .policy = TS_DUP_LAST };
        enum { NR = 3 };
        ts_t *dst[NR];
        ts_rule_t rule[NR];
        char names[NR][16];
        for (int i = 0; i < NR; i++) {
            snprintf(names[i], sizeof(names[i]), "d%d", i);
            ts_agg_t agg;
            do
                agg = (ts_agg_t)(1 + rng_below(&r, TS_AGG__COUNT - 1));
            while (agg == TS_AGG_TWA);
            static const int64_t buckets[] = { 1, 7, 100, 1000, 3600 };
            rule[i] = (ts_rule_t){ names[i],
                                   strlen(names[i]),
                                   agg,
                                   buckets[rng_below(&r, 5)],
                                   (int64_t)rng_below(&r, 500),
                                   agg == TS_AGG_QUANTILE ? rng_double(&r) : 0,
                                   (uint8_t)(seed % 2 ? TS_RULE_GEN_2 : TS_RULE_GEN_1),
                                   -1 };
            assert_true(ts_rule_add(src, &rule[i]));
            dst[i] = ts_create(0, TS_DUP_BLOCK, NULL, 0);
            assert_true(ts_set_source(dst[i], "src", 3));
        }
        int64_t clock = 1000;
        for (int step = 0; step < 300; step++) {
            ts_sample_t batch[20];
            size_t n = 1 + rng_below(&r, 20);
            ts_sample_t last;
            int64_t old_newest = ts_last(src, &last) ? last.ts : -1;
            const char *lastop = "add";
            if (rng_below(&r, 10) == 0 && m.n) {
                lastop = "delete";
                int64_t from = m.t[rng_below(&r, m.n)], to = from + (int64_t)rng_below(&r, 3000);
                assert_int_equal(ts_delete_range(src, from, to), m_delete(&m, from, to));
                for (int i = 0; i < NR; i++)
                    assert_int_equal(ts_rule_deleted(src, &rule[i], from, to, dst[i]), CORE_OK);
            } else {
                int64_t t[20];
                for (size_t i = 0; i < n; i++) {
                    if (rng_below(&r, 4) || !m.n)
                        clock += (int64_t)rng_below(&r, 400);
                    batch[i].ts = rng_below(&r, 4) ? clock : clock - (int64_t)rng_below(&r, 5000);
                    if (batch[i].ts < 0)
                        batch[i].ts = 0;
                    batch[i].value = rng_below(&r, 8) == 0 ? NAN : (double)rng_below(&r, 100) - 50;
                    t[i] = batch[i].ts;
                }
                size_t f1, f2;
                assert_int_equal(ts_add(src, batch, n, TS_DUP_LAST, &f1), CORE_OK);
                assert_int_equal(m_add(&m, batch, n, TS_DUP_LAST, &f2), CORE_OK);
                for (int i = 0; i < NR; i++)
                    assert_int_equal(ts_rule_added(src, &rule[i], old_newest, t, n, dst[i]), CORE_OK);
            }
            for (int i = 0; i < NR; i++) {
                ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP, .agg = rule[i].agg, .bucket_ms = rule[i].bucket_ms,
                                 .align = rule[i].align, .quantile = rule[i].quantile };
                res_t want = { 0 }, got = { 0 };
                m_range(&m, &q, &want);
                int64_t open = m.n ? ts_bucket_start(m.t[m.n - 1], rule[i].bucket_ms, rule[i].align) : INT64_MAX;
                size_t keep = 0;
                while (keep < want.n && want.t[keep] < (open < 0 ? 0 : open))
                    keep++;
                if (open < 0)
                    keep = 0;
                ts_query_t all = { .from = 0, .to = TS_MAX_TIMESTAMP };
                assert_int_equal(ts_range(dst[i], &all, res_push, &got), CORE_OK);
                if (got.n != keep) {
                    for (size_t k = 0; k < got.n || k < want.n; k++)
                        print_message("%zu: got %lld %g  model %lld %g\n", k, k < got.n ? (long long)got.t[k] : -1LL,
                                      k < got.n ? got.v[k] : 0, k < want.n ? (long long)want.t[k] : -1LL,
                                      k < want.n ? want.v[k] : 0);
                    print_message("open %lld newest %lld last op %s\n", (long long)open, m.n ? (long long)m.t[m.n - 1] : -1LL, lastop);
                }
                if (got.n != keep)
                    fail_msg("seed %llu step %d rule %s/%lld/%lld: %zu buckets, model %zu",
                             (unsigned long long)seed, step, ts_agg_name(rule[i].agg), (long long)rule[i].bucket_ms,
                             (long long)rule[i].align, got.n, keep);
                for (size_t k = 0; k < keep; k++)
                    if (got.t[k] != want.t[k] || !(got.v[k] == want.v[k] || (isnan(got.v[k]) && isnan(want.v[k]))))
                        fail_msg("seed %llu step %d rule %s: bucket %zu is [%lld, %g], model [%lld, %g]",
                                 (unsigned long long)seed, step, ts_agg_name(rule[i].agg), k, (long long)got.t[k],
                                 got.v[k], (long long)want.t[k], want.v[k]);
                /* LATEST: the open bucket is the model's last bucket when it is open */
                ts_sample_t ob;
                if (ts_rule_open_bucket(src, &rule[i], &ob)) {
                    assert_true(want.n == keep + 1);
                    assert_int_equal(ob.ts, want.t[keep]);
                    assert_true(ob.value == want.v[keep] || (isnan(ob.value) && isnan(want.v[keep])));
                } else {
                    assert_int_equal(want.n, keep);
                }
                res_free(&want);
                res_free(&got);
            }
        }
        /* rules and the source link survive the encoding */
        wbuf_t a = WBUF_INIT;
        ts_type.encode(src, &a);
        const char *why;
        ts_t *back = ts_type.decode(a.data, a.len, &why);
        assert_non_null(back);
        assert_int_equal(ts_rule_count(back), NR);
        for (int i = 0; i < NR; i++) {
            ts_rule_t x = ts_rule_at(back, (size_t)i);
            assert_int_equal(x.dest_len, rule[i].dest_len);
            assert_memory_equal(x.dest, rule[i].dest, x.dest_len);
            assert_int_equal(x.agg, rule[i].agg);
            assert_int_equal(x.bucket_ms, rule[i].bucket_ms);
            assert_int_equal(x.align, rule[i].align);
        }
        ts_free(back);
        wbuf_free(&a);
        for (int i = 0; i < NR; i++) {
            wbuf_t d = WBUF_INIT;
            ts_type.encode(dst[i], &d);
            ts_t *db = ts_type.decode(d.data, d.len, &why);
            assert_non_null(db);
            size_t len;
            const char *sname = ts_source(db, &len);
            assert_true(sname && len == 3 && memcmp(sname, "src", 3) == 0);
            ts_free(db);
            wbuf_free(&d);
            ts_free(dst[i]);
        }
        ts_free(src);
        m_free(&m);
    }
}

/* Label filters against the brute force over random labels and filters;
 * malformed filters refused. */
static void test_label_filters(void **state)
{
    (void)state;
    static const char *const ln[] = { "a", "b", "c" };
    static const char *const lv[] = { "x", "y", "zz" };
    rng_t r;
    rng_seed(&r, 77);
    for (int round = 0; round < 2000; round++) {
        ts_label_t lab[3];
        const char *names[3], *values[3];
        size_t n = 0;
        for (size_t i = 0; i < 3; i++)
            if (rng_below(&r, 3)) {
                names[n] = ln[i];
                values[n] = lv[rng_below(&r, 3)];
                lab[n] = (ts_label_t){ names[n], 1, values[n], strlen(values[n]) };
                n++;
            }
        ts_t *ts = ts_create(0, TS_DUP_BLOCK, lab, n);
        char f[3][64];
        ts_matcher_t m[3];
        size_t nf = 1 + rng_below(&r, 3);
        bool want = true;
        for (size_t k = 0; k < nf; k++) {
            const char *op = rng_below(&r, 2) ? "!=" : "=";
            switch (rng_below(&r, 3)) {
            case 0: snprintf(f[k], sizeof(f[k]), "%s%s", ln[rng_below(&r, 3)], op); break;
            case 1: snprintf(f[k], sizeof(f[k]), "%s%s%s", ln[rng_below(&r, 3)], op, lv[rng_below(&r, 3)]); break;
            default:
                snprintf(f[k], sizeof(f[k]), "%s%s(%s,%s)", ln[rng_below(&r, 3)], op, lv[rng_below(&r, 3)],
                         lv[rng_below(&r, 3)]);
            }
            const char *why;
            assert_true(ts_matcher_parse(f[k], strlen(f[k]), &m[k], &why));
            want &= ts_filter_model(f[k], names, values, n);
        }
        if (ts_matches(ts, m, nf) != want)
            fail_msg("round %d: filters %s %s %s on %zu labels: %d, model %d", round, f[0], nf > 1 ? f[1] : "",
                     nf > 2 ? f[2] : "", n, !want, want);
        ts_free(ts);
    }
    static const char *const bad[] = { "a",     "=x",    "!=x",   "a=(x", "a=(", "a=(x,,y)", "a=(x,)", "a=x,y",
                                       "a=x=y", "a(=x", "a=(x)y" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ts_matcher_t m;
        const char *why;
        if (ts_matcher_parse(bad[i], strlen(bad[i]), &m, &why))
            fail_msg("filter '%s' accepted", bad[i]);
    }
    ts_matcher_t m;
    const char *why;
    assert_true(ts_matcher_parse("a=x", 3, &m, &why) && ts_matcher_positive(&m));
    assert_true(ts_matcher_parse("a=(x,y)", 7, &m, &why) && ts_matcher_positive(&m) && m.nvalues == 2);
    assert_true(ts_matcher_parse("a!=x", 4, &m, &why) && !ts_matcher_positive(&m));
    assert_true(ts_matcher_parse("a=", 2, &m, &why) && !ts_matcher_positive(&m));
    /* RedisTimeSeries tests/flow/test_ts_queryindex.py test_label_index:
     * 'generation=x', 'class=()' answers no series (an empty list matches
     * nothing, and it selects: it may be a query's only positive filter);
     * its negation matches every series, with or without the label */
    ts_label_t lab[2] = { { "generation", 10, "x", 1 }, { "class", 5, "top", 3 } };
    ts_t *ts = ts_create(0, TS_DUP_BLOCK, lab, 2), *bare = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    assert_true(ts_matcher_parse("class=()", 8, &m, &why) && ts_matcher_positive(&m) && m.nvalues == 0);
    assert_false(ts_matches(ts, &m, 1));
    assert_false(ts_matches(bare, &m, 1));
    assert_true(ts_matcher_parse("class!=()", 9, &m, &why) && !ts_matcher_positive(&m));
    assert_true(ts_matches(ts, &m, 1));
    assert_true(ts_matches(bare, &m, 1));
    const char *names[2] = { "generation", "class" }, *values[2] = { "x", "top" };
    assert_false(ts_filter_model("class=()", names, values, 2));
    assert_true(ts_filter_model("class!=()", names, values, 2));
    ts_free(ts);
    ts_free(bare);
}

/* A version-1 encoding (before rules) still decodes, to a series without
 * rules or source, and re-encodes as version 3. */
static void test_decode_version1(void **state)
{
    (void)state;
    ts_t *ts = ts_create(5000, TS_DUP_MAX, (ts_label_t[]){ { "a", 1, "b", 1 } }, 1);
    ts_sample_t s[] = { { 10, 1 }, { 20, 2.5 } };
    assert_int_equal(ts_add(ts, s, 2, TS_DUP_MAX, NULL), CORE_OK);
    wbuf_t a = WBUF_INIT;
    ts_type.encode(ts, &a);
    /* version 3 without rules = version 1 + u32 nrules (0) + u8 has_source (0) after the labels */
    size_t labels_end = 1 + 1 + 8 + 4 + (4 + 1) + (4 + 1);
    assert_int_equal(a.data[0], 3);
    wbuf_t v1 = WBUF_INIT;
    wbuf_put_u8(&v1, 1);
    wbuf_put_bytes(&v1, a.data + 1, labels_end - 1);
    wbuf_put_bytes(&v1, a.data + labels_end + 5, a.len - labels_end - 5);
    const char *why = NULL;
    ts_t *back = ts_type.decode(v1.data, v1.len, &why);
    if (!back)
        fail_msg("version 1 refused: %s", why);
    assert_int_equal(ts_rule_count(back), 0);
    size_t len;
    assert_null(ts_source(back, &len));
    wbuf_t b = WBUF_INIT;
    ts_type.encode(back, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    wbuf_free(&a);
    wbuf_free(&b);
    wbuf_free(&v1);
    ts_free(back);
    ts_free(ts);
}

/* Adds one sample to src and applies rule 0 into dst, as a write does. */
static void rule_add1(ts_t *src, ts_t *dst, int64_t t, double v)
{
    ts_sample_t last, s = { t, v };
    int64_t old = ts_last(src, &last) ? last.ts : -1;
    assert_int_equal(ts_add(src, &s, 1, TS_DUP_LAST, NULL), CORE_OK);
    ts_rule_touch(src, 0, old, &t, 1, 0, 0);
    ts_rule_t r = ts_rule_at(src, 0);
    assert_int_equal(ts_rule_added(src, &r, old, &t, 1, dst), CORE_OK);
}

static void expect_open(const ts_t *src, bool has, int64_t at, double value)
{
    ts_rule_t r = ts_rule_at(src, 0);
    ts_sample_t o;
    bool got = ts_rule_open_bucket(src, &r, &o);
    assert_int_equal(got, has);
    if (has && (o.ts != at || o.value != value))
        fail_msg("open bucket [%lld, %.17g], want [%lld, %.17g]", (long long)o.ts, o.value, (long long)at, value);
}

/* Rule generations (ts_rule_t.gen).  RedisTimeSeries tests/flow/
 * test_ts_createrule.py test_create_rule_non_empty_src_series: a rule created
 * on a source holding 1, 2, 3, 11 shows no open bucket (LATEST) until a
 * sample comes, and then aggregates only what came after it; a generation-1
 * rule (created before issue 37, or by a journal of then) keeps aggregating
 * the whole bucket.  A write touching that bucket otherwise than by an
 * in-order append makes it a bucket like any other.  And twa: generation 2
 * is RedisTimeSeries's arithmetic (test_ts_range.py test_agg_twa case 7: 15),
 * generation 1 the old one (14.999999999999998). */
static void test_rule_generations(void **state)
{
    (void)state;
    ts_sample_t pre[] = { { 1, 1 }, { 2, 2 }, { 3, 3 }, { 11, 11 } };
    for (int gen = TS_RULE_GEN_1; gen <= TS_RULE_GEN_2; gen++)
        for (int64_t align = 0; align <= 5; align += 5) {
            ts_t *src = ts_create(0, TS_DUP_LAST, NULL, 0), *dst = ts_create(0, TS_DUP_LAST, NULL, 0);
            assert_int_equal(ts_add(src, pre, 4, TS_DUP_LAST, NULL), CORE_OK);
            ts_rule_t r = { "d", 1, TS_AGG_AVG, 10, align, 0, (uint8_t)gen, gen == TS_RULE_GEN_2 ? 11 : -1 };
            assert_true(ts_rule_add(src, &r));
            int64_t b = align ? 5 : 10;   /* the bucket of 11 */
            if (gen == TS_RULE_GEN_2) {
                expect_open(src, false, 0, 0);
                rule_add1(src, dst, 12, 12);
                expect_open(src, true, b, 12);
                rule_add1(src, dst, 30, 30);   /* closes it: 12 alone */
            } else {
                expect_open(src, true, b, 11);
                rule_add1(src, dst, 12, 12);
                expect_open(src, true, b, 11.5);
                rule_add1(src, dst, 30, 30);
            }
            ts_query_t all = { .from = 0, .to = TS_MAX_TIMESTAMP };
            res_t got = { 0 };
            assert_int_equal(ts_range(dst, &all, res_push, &got), CORE_OK);
            assert_int_equal(got.n, 1);
            assert_int_equal(got.t[0], b);
            double want = gen == TS_RULE_GEN_2 ? 12 : 11.5;
            if (got.v[0] != want)
                fail_msg("gen %d align %lld: closed bucket %.17g, want %.17g", gen, (long long)align, got.v[0], want);
            res_free(&got);
            /* an out-of-order sample into that bucket: recomputed from every sample */
            rule_add1(src, dst, align ? 6 : 10, 20);
            assert_int_equal(ts_rule_at(src, 0).since, -1);
            assert_int_equal(ts_range(dst, &all, res_push, &got), CORE_OK);
            want = (20 + 11 + 12) / 3.0;
            if (got.n != 1 || got.v[0] != want)
                fail_msg("gen %d align %lld: recomputed bucket %.17g, want %.17g", gen, (long long)align, got.v[0], want);
            res_free(&got);
            ts_free(src);
            ts_free(dst);
        }
    /* a deletion reaching the bucket open at creation forgets `since` too */
    ts_t *src = ts_create(0, TS_DUP_LAST, NULL, 0);
    assert_int_equal(ts_add(src, pre, 4, TS_DUP_LAST, NULL), CORE_OK);
    ts_rule_t r = { "d", 1, TS_AGG_SUM, 10, 0, 0, TS_RULE_GEN_2, 11 };
    assert_true(ts_rule_add(src, &r));
    ts_rule_touch(src, 0, -1, NULL, 0, 0, 5);
    assert_int_equal(ts_rule_at(src, 0).since, 11);
    ts_rule_touch(src, 0, -1, NULL, 0, 0, 10);
    assert_int_equal(ts_rule_at(src, 0).since, -1);
    expect_open(src, true, 10, 11);
    ts_free(src);

    /* twa by generation */
    ts_sample_t tw[] = { { 3, 3 }, { 9, 9 }, { 13, 13 }, { 22, 22 } };   /* (test_agg_twa case 7) */
    for (int gen = TS_RULE_GEN_1; gen <= TS_RULE_GEN_2; gen++) {
        src = ts_create(0, TS_DUP_LAST, NULL, 0);
        ts_t *dst = ts_create(0, TS_DUP_LAST, NULL, 0);
        ts_rule_t t = { "d", 1, TS_AGG_TWA, 10, 0, 0, (uint8_t)gen, -1 };
        assert_true(ts_rule_add(src, &t));
        for (size_t i = 0; i < 4; i++)
            rule_add1(src, dst, tw[i].ts, tw[i].value);
        ts_query_t all = { .from = 10, .to = 10 };
        res_t got = { 0 };
        assert_int_equal(ts_range(dst, &all, res_push, &got), CORE_OK);
        assert_int_equal(got.n, 1);
        if (gen == TS_RULE_GEN_2)
            assert_true(got.v[0] == 15);
        else
            if (got.v[0] != 14.999999999999998)
                fail_msg("generation 1 twa %.17g", got.v[0]);
        res_free(&got);
        ts_free(src);
        ts_free(dst);
    }
}

/* GROUPBY ... REDUCE of nothing counted (RedisTimeSeries tests/flow/
 * test_ts_mrange_groupby.py test_groupby_reduce_count_with_nan): the count
 * family answers 0, the rest NaN. */
static void test_reduce_nothing_counted(void **state)
{
    (void)state;
    const double nans[] = { NAN, NAN }, vals[] = { 1, 2 };
    assert_true(ts_reduce(TS_AGG_COUNT, nans, 2) == 0);
    assert_true(ts_reduce(TS_AGG_COUNT_NAN, vals, 2) == 0);
    assert_true(ts_reduce(TS_AGG_COUNT_NAN, nans, 2) == 2);
    assert_true(ts_reduce(TS_AGG_COUNT_ALL, nans, 2) == 2);
    assert_true(ts_reduce(TS_AGG_COUNT_ALL, nans, 0) == 0);
    assert_true(isnan(ts_reduce(TS_AGG_SUM, nans, 2)));
    assert_true(isnan(ts_reduce(TS_AGG_MAX, nans, 2)));
    assert_true(ts_reduce(TS_AGG_SUM, vals, 2) == 3);
}

/* A version-2 encoding (rules without generation) decodes to generation-1
 * rules (the rules that served them, for life) and re-encodes as version 3
 * with generation 1 and no `since`. */
static void test_decode_version2(void **state)
{
    (void)state;
    ts_t *ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_rule_t r = { "d1", 2, TS_AGG_TWA, 10, 0, 0, TS_RULE_GEN_1, -1 };
    assert_true(ts_rule_add(ts, &r));
    wbuf_t a = WBUF_INIT;
    ts_type.encode(ts, &a);
    /* the rule: blob "d1" | agg | bucket | align | quantile, then gen | since */
    size_t rule_end = 1 + 1 + 8 + 4 + 4 + (4 + 2) + 1 + 8 + 8 + 8;
    assert_int_equal(a.data[0], 3);
    assert_int_equal(a.data[rule_end], TS_RULE_GEN_1);
    wbuf_t v2 = WBUF_INIT;
    wbuf_put_u8(&v2, 2);
    wbuf_put_bytes(&v2, a.data + 1, rule_end - 1);
    wbuf_put_bytes(&v2, a.data + rule_end + 9, a.len - rule_end - 9);
    const char *why = NULL;
    ts_t *back = ts_type.decode(v2.data, v2.len, &why);
    if (!back)
        fail_msg("version 2 refused: %s", why);
    assert_int_equal(ts_rule_count(back), 1);
    ts_rule_t got = ts_rule_at(back, 0);
    assert_int_equal(got.gen, TS_RULE_GEN_1);
    assert_int_equal(got.since, -1);
    wbuf_t b = WBUF_INIT;
    ts_type.encode(back, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    /* a generation the decoder does not know, or a since on generation 1, is refused */
    a.data[rule_end] = 3;
    assert_null(ts_type.decode(a.data, a.len, &why));
    a.data[rule_end] = TS_RULE_GEN_1;
    a.data[rule_end + 1] = 5;
    assert_null(ts_type.decode(a.data, a.len, &why));
    wbuf_free(&a);
    wbuf_free(&b);
    wbuf_free(&v2);
    ts_free(back);
    ts_free(ts);
}

/* ------------------------------------------------------------------------ */
/* Targeted cases                                                           */
/* ------------------------------------------------------------------------ */

/* Runs one aggregated query and compares with want[] (pairs of ts, value;
 * NaN matches NaN). */
static void expect_agg(const ts_t *ts, int64_t from, int64_t to, const char *agg, int64_t bucket, int64_t align,
                       bool empty, bool reverse, const double *want, size_t nwant)
{
    ts_query_t q = { .from = from, .to = to, .bucket_ms = bucket, .align = align, .empty = empty, .reverse = reverse };
    assert_true(ts_agg_parse(agg, &q.agg));
    res_t got = { 0 };
    assert_int_equal(ts_range(ts, &q, res_push, &got), CORE_OK);
    if (got.n != nwant / 2)
        fail_msg("%s %lld..%lld bucket %lld: %zu results, want %zu", agg, (long long)from, (long long)to,
                 (long long)bucket, got.n, nwant / 2);
    for (size_t i = 0; i < got.n; i++) {
        size_t k = reverse ? got.n - 1 - i : i;
        double w = want[2 * k + 1];
        if (got.t[i] != (int64_t)want[2 * k] || !((isnan(w) && isnan(got.v[i])) || fabs(got.v[i] - w) < 1e-12))
            fail_msg("%s %lld..%lld: result %zu is [%lld, %g], want [%g, %g]", agg, (long long)from, (long long)to, i,
                     (long long)got.t[i], got.v[i], want[2 * k], w);
    }
    res_free(&got);
}

/* RedisTimeSeries's own expectations (tests/flow/test_ts_range.py): EMPTY
 * gap filling, twa's interpolation, NaN samples. */
static void test_flow_expectations(void **state)
{
    (void)state;
    ts_t *t1 = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_sample_t s1[] = { { 15, 1 }, { 17, 4 }, { 51, 3 }, { 73, 5 }, { 75, 3 } };
    assert_int_equal(ts_add(t1, s1, 5, TS_DUP_BLOCK, NULL), CORE_OK);
    for (int rev = 0; rev < 2; rev++) {
        const double mx[] = { 10, 4, 20, NAN, 30, NAN, 40, NAN, 50, 3, 60, NAN, 70, 5 };
        expect_agg(t1, 0, 100, "max", 10, 0, true, rev, mx, 14);
        const double last[] = { 10, 4, 20, 4, 30, 4, 40, 4, 50, 3, 60, 3, 70, 3 };
        expect_agg(t1, 0, 100, "last", 10, 0, true, rev, last, 14);
        const double sum[] = { 10, 5, 20, 0, 30, 0, 40, 0, 50, 3, 60, 0, 70, 8 };
        expect_agg(t1, 0, 100, "sum", 10, 0, true, rev, sum, 14);
    }
    ts_free(t1);

    ts_t *a = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_sample_t sa[] = { { 10, 100 }, { 20, 110 } };
    assert_int_equal(ts_add(a, sa, 2, TS_DUP_BLOCK, NULL), CORE_OK);
    for (int rev = 0; rev < 2; rev++) {
        const double c3[] = { 11, 100, 12, 100, 13, 100, 14, 100, 15, 100, 16, 100 };
        expect_agg(a, 11, 16, "last", 1, 0, true, rev, c3, 12);
        const double c4[] = { 10, 100, 11, 100, 12, 100 };
        expect_agg(a, 8, 12, "last", 1, 0, true, rev, c4, 6);
        const double c5[] = { 18, 100, 19, 100, 20, 110 };
        expect_agg(a, 18, 22, "last", 1, 0, true, rev, c5, 6);
        const double twa3[] = { 11, 101.5, 12, 102.5, 13, 103.5, 14, 104.5, 15, 105.5, 16, 106 };
        expect_agg(a, 11, 16, "twa", 1, 0, true, rev, twa3, 12);
        static const char *const aggs[] = { "last", "twa", "avg", "max", "min", "sum", "first", "count" };
        for (size_t k = 0; k < 8; k++) {
            expect_agg(a, 2, 5, aggs[k], 1, 0, true, rev, NULL, 0);
            expect_agg(a, 25, 30, aggs[k], 1, 0, true, rev, NULL, 0);
        }
        const double nan6[] = { 11, NAN, 12, NAN, 13, NAN, 14, NAN, 15, NAN, 16, NAN };
        expect_agg(a, 11, 16, "std.p", 1, 0, true, rev, nan6, 12);
        const double zero6[] = { 11, 0, 12, 0, 13, 0, 14, 0, 15, 0, 16, 0 };
        expect_agg(a, 11, 16, "count", 1, 0, true, rev, zero6, 12);
        /* twa without EMPTY reports no bucket without samples; with it, the line */
        expect_agg(a, 16, 18, "twa", 100, 0, false, rev, NULL, 0);
        const double w19[] = { 0, 107 };
        expect_agg(a, 16, 18, "twa", 100, 0, true, rev, w19, 2);
        const double w21[] = { 0, 106.5 };
        expect_agg(a, 14, 19, "twa", 100, 0, true, rev, w21, 2);
    }
    ts_free(a);

    ts_t *n = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_sample_t sn[] = { { 10, 10 },   { 20, NAN },  { 30, 20 },  { 40, NAN }, { 50, 30 },
                         { 110, NAN }, { 120, NAN }, { 130, NAN }, { 210, 40 }, { 220, 50 } };
    assert_int_equal(ts_add(n, sn, 10, TS_DUP_BLOCK, NULL), CORE_OK);
    const double sum2[] = { 0, 60, 200, 90 };
    expect_agg(n, 0, 299, "sum", 100, 0, false, false, sum2, 4);
    const double sum3[] = { 0, 60, 100, 0, 200, 90 };
    expect_agg(n, 0, 299, "sum", 100, 0, true, false, sum3, 6);
    const double cnt[] = { 0, 3, 100, 0, 200, 2 };
    expect_agg(n, 0, 299, "count", 100, 0, true, false, cnt, 6);
    const double cnan[] = { 0, 2, 100, 3 };
    expect_agg(n, 0, 299, "countNaN", 100, 0, false, false, cnan, 4);
    const double call[] = { 0, 5, 100, 3, 200, 2 };
    expect_agg(n, 0, 299, "countAll", 100, 0, false, false, call, 6);
    const double lst[] = { 0, 30, 100, 30, 200, 50 };
    expect_agg(n, 0, 299, "last", 100, 0, true, false, lst, 6);
    /* MIN/MAX/SUM cannot combine a NaN; LAST can */
    ts_sample_t d = { 20, 1 };
    size_t f;
    assert_int_equal(ts_add(n, &d, 1, TS_DUP_SUM, &f), CORE_DUPLICATE);
    d.ts = 10;
    d.value = NAN;
    assert_int_equal(ts_add(n, &d, 1, TS_DUP_MAX, &f), CORE_DUPLICATE);
    assert_int_equal(ts_add(n, &d, 1, TS_DUP_LAST, &f), CORE_OK);
    /* INCRBY on a NaN newest value is refused; before the newest, unordered */
    ts_sample_t nan_last = { 300, NAN };
    assert_int_equal(ts_add(n, &nan_last, 1, TS_DUP_BLOCK, &f), CORE_OK);
    double v;
    assert_int_equal(ts_incrby(n, 400, 1, &v), CORE_OVERFLOW);
    assert_int_equal(ts_incrby(n, 299, 1, &v), CORE_UNORDERED);
    ts_free(n);

    ts_t *c = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    assert_int_equal(ts_incrby(c, 5, 2.5, &v), CORE_OK);
    assert_true(v == 2.5);
    assert_int_equal(ts_incrby(c, 5, -1, &v), CORE_OK);   /* same timestamp: LAST */
    assert_true(v == 1.5);
    assert_int_equal(ts_incrby(c, 9, 10, &v), CORE_OK);
    ts_sample_t last;
    assert_true(ts_last(c, &last) && last.ts == 9 && last.value == 11.5);
    ts_info_t info;
    ts_get_info(c, &info);
    assert_int_equal(info.samples, 2);
    ts_free(c);
}

/* The seed's three temperatures: all kept (a zset would lose one). */
static void test_seed_example(void **state)
{
    (void)state;
    ts_t *ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_sample_t s[] = { { 1686697976001, 21 }, { 1686697977001, 22 }, { 1686697978001, 21 } };
    assert_int_equal(ts_add(ts, s, 3, TS_DUP_BLOCK, NULL), CORE_OK);
    ts_info_t info;
    ts_get_info(ts, &info);
    assert_int_equal(info.samples, 3);
    /* a duplicate timestamp under BLOCK is refused, nothing changes */
    ts_sample_t d[] = { { 1686697979001, 23 }, { 1686697977001, 99 } };
    size_t f = 99;
    assert_int_equal(ts_add(ts, d, 2, TS_DUP_BLOCK, &f), CORE_DUPLICATE);
    assert_int_equal(f, 1);
    ts_get_info(ts, &info);
    assert_int_equal(info.samples, 3);
    assert_int_equal(info.last_ts, 1686697978001);
    /* the same with SUM adds */
    assert_int_equal(ts_add(ts, d + 1, 1, TS_DUP_SUM, &f), CORE_OK);
    res_t got = { 0 };
    ts_query_t q = { .from = 1686697977001, .to = 1686697977001 };
    ts_range(ts, &q, res_push, &got);
    assert_int_equal(got.n, 1);
    assert_true(got.v[0] == 121);
    res_free(&got);
    ts_free(ts);
}

/* Retention: t = newest - R is accepted and visible; newest - R - 1 is not. */
static void test_retention_boundary(void **state)
{
    (void)state;
    ts_t *ts = ts_create(100, TS_DUP_LAST, NULL, 0);
    ts_sample_t s = { 1000, 1 };
    assert_int_equal(ts_add(ts, &s, 1, TS_DUP_LAST, NULL), CORE_OK);
    s = (ts_sample_t){ 900, 2 };
    assert_int_equal(ts_add(ts, &s, 1, TS_DUP_LAST, NULL), CORE_OK);
    s = (ts_sample_t){ 899, 3 };
    size_t f;
    assert_int_equal(ts_add(ts, &s, 1, TS_DUP_LAST, &f), CORE_TOO_OLD);
    ts_info_t info;
    ts_get_info(ts, &info);
    assert_int_equal(info.samples, 2);
    assert_int_equal(info.first_ts, 900);
    /* a newer sample pushes 900 out of view */
    s = (ts_sample_t){ 1001, 4 };
    assert_int_equal(ts_add(ts, &s, 1, TS_DUP_LAST, NULL), CORE_OK);
    ts_get_info(ts, &info);
    assert_int_equal(info.samples, 2);
    assert_int_equal(info.first_ts, 1000);
    /* deleting the newest must not bring 900 back */
    assert_int_equal(ts_delete_range(ts, 1001, 1001), 1);
    ts_get_info(ts, &info);
    assert_int_equal(info.samples, 1);
    assert_int_equal(info.first_ts, 1000);
    assert_int_equal(info.last_ts, 1000);
    ts_free(ts);
}

/* Buckets: start = t - ((t - align) mod b); a start before 0 is reported as 0. */
static void test_bucket_arithmetic(void **state)
{
    (void)state;
    assert_int_equal(ts_bucket_start(0, 10, 0), 0);
    assert_int_equal(ts_bucket_start(9, 10, 0), 0);
    assert_int_equal(ts_bucket_start(10, 10, 0), 10);
    assert_int_equal(ts_bucket_start(10, 10, 3), 3);
    assert_int_equal(ts_bucket_start(12, 10, 3), 3);
    assert_int_equal(ts_bucket_start(13, 10, 3), 13);
    assert_int_equal(ts_bucket_start(2, 10, 3), -7);
    assert_int_equal(ts_bucket_start(2, 10, 25), -5);
    assert_int_equal(ts_bucket_start(TS_MAX_TIMESTAMP, 1000, 0), TS_MAX_TIMESTAMP - TS_MAX_TIMESTAMP % 1000);
    assert_int_equal(ts_bucket_start(0, TS_MAX_TIMESTAMP, TS_MAX_TIMESTAMP), 0);
    assert_int_equal(ts_bucket_start(5, TS_MAX_TIMESTAMP, TS_MAX_TIMESTAMP - 1), -1);

    ts_t *ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_sample_t s[] = { { 1, 1 }, { 2, 2 }, { 3, 3 }, { 12, 4 }, { 13, 5 } };
    assert_int_equal(ts_add(ts, s, 5, TS_DUP_BLOCK, NULL), CORE_OK);
    res_t got = { 0 };
    ts_query_t q = { .from = 0, .to = 100, .agg = TS_AGG_SUM, .bucket_ms = 10, .align = 3 };
    ts_range(ts, &q, res_push, &got);   /* buckets [-7,3) [3,13) [13,23) */
    assert_int_equal(got.n, 3);
    assert_int_equal(got.t[0], 0);
    assert_true(got.v[0] == 3);
    assert_int_equal(got.t[1], 3);
    assert_true(got.v[1] == 7);
    assert_int_equal(got.t[2], 13);
    assert_true(got.v[2] == 5);
    res_free(&got);
    q.bucket_ts = TS_BUCKET_END;
    ts_range(ts, &q, res_push, &got);
    assert_int_equal(got.t[0], 10);   /* max(0, -7) + 10, as RedisTimeSeries normalises first */
    assert_int_equal(got.t[1], 13);
    res_free(&got);
    q.reverse = true;
    q.count = 2;
    q.bucket_ts = TS_BUCKET_MID;
    ts_range(ts, &q, res_push, &got);
    assert_int_equal(got.n, 2);
    assert_int_equal(got.t[0], 18);
    assert_int_equal(got.t[1], 8);
    res_free(&got);
    ts_free(ts);
}

/* Timestamps at both ends of the range and huge jumps between them. */
static void test_extreme_timestamps(void **state)
{
    (void)state;
    ts_t *ts = ts_create(0, TS_DUP_LAST, NULL, 0);
    model_t m = { .policy = TS_DUP_LAST };
    ts_sample_t s[] = { { 0, 1 },        { 1, -0.0 },  { TS_MAX_TIMESTAMP, 3 }, { TS_MAX_TIMESTAMP / 2, DBL_MAX },
                        { 2, -DBL_MAX }, { 3, 5e-324 }, { TS_MAX_TIMESTAMP - 1, 7 }, { 4, DBL_MIN } };
    size_t f;
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        assert_int_equal(ts_add(ts, &s[i], 1, TS_DUP_LAST, &f), CORE_OK);
        assert_int_equal(m_add(&m, &s[i], 1, TS_DUP_LAST, &f), CORE_OK);
        check_all(ts, &m);
    }
    ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP, .agg = TS_AGG_COUNT, .bucket_ms = TS_MAX_TIMESTAMP };
    check_query(ts, &m, &q);
    q.bucket_ts = TS_BUCKET_END;
    check_query(ts, &m, &q);
    q.reverse = true;
    q.agg = TS_AGG_MAX;
    q.bucket_ms = 2;
    check_query(ts, &m, &q);
    /* an in-order run after the maximum is impossible; one before it is a merge */
    ts_sample_t run[100];
    for (int i = 0; i < 100; i++)
        run[i] = (ts_sample_t){ 1000 + i * 1000, i };
    assert_int_equal(ts_add(ts, run, 100, TS_DUP_LAST, &f), CORE_OK);
    assert_int_equal(m_add(&m, run, 100, TS_DUP_LAST, &f), CORE_OK);
    check_all(ts, &m);
    ts_free(ts);
    m_free(&m);
}

/* avg switches to a running mean instead of overflowing (RedisTimeSeries). */
static void test_avg_overflow(void **state)
{
    (void)state;
    ts_t *ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_sample_t s[] = { { 1, 1.5e308 }, { 2, 1.5e308 }, { 3, 1.5e308 }, { 4, -1e308 } };
    assert_int_equal(ts_add(ts, s, 4, TS_DUP_BLOCK, NULL), CORE_OK);
    res_t got = { 0 };
    ts_query_t q = { .from = 0, .to = 10, .agg = TS_AGG_AVG, .bucket_ms = 100 };
    ts_range(ts, &q, res_push, &got);
    assert_int_equal(got.n, 1);
    assert_true(isfinite(got.v[0]));
    assert_true(fabs(got.v[0] - 0.875e308) < 1e295);
    res_free(&got);
    q.agg = TS_AGG_SUM;   /* the plain sum does overflow: reported as inf */
    ts_range(ts, &q, res_push, &got);
    assert_true(isinf(got.v[0]));
    res_free(&got);
    ts_free(ts);
}

/* The variance formula agrees with a two-pass computation. */
static void test_variance_accuracy(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 77);
    ts_t *ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    double v[500], sum = 0;
    for (int i = 0; i < 500; i++) {
        v[i] = 20 + rng_double(&r) * 5;
        sum += v[i];
        ts_sample_t s = { i, v[i] };
        assert_int_equal(ts_add(ts, &s, 1, TS_DUP_BLOCK, NULL), CORE_OK);
    }
    double mean = sum / 500, ss = 0;
    for (int i = 0; i < 500; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    static const struct {
        ts_agg_t a;
        double want;
    } cases[] = { { TS_AGG_VAR_P, 0 }, { TS_AGG_VAR_S, 0 }, { TS_AGG_STD_P, 0 }, { TS_AGG_STD_S, 0 } };
    double wants[4] = { ss / 500, ss / 499, sqrt(ss / 500), sqrt(ss / 499) };
    for (int i = 0; i < 4; i++) {
        res_t got = { 0 };
        ts_query_t q = { .from = 0, .to = 1000, .agg = cases[i].a, .bucket_ms = 1000 };
        ts_range(ts, &q, res_push, &got);
        assert_int_equal(got.n, 1);
        assert_true(fabs(got.v[0] - wants[i]) <= 1e-9 * wants[i]);
        res_free(&got);
    }
    /* identical values: exactly 0, never NaN */
    ts_t *flat = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    for (int i = 0; i < 7; i++) {
        ts_sample_t s = { i, 0.1 };
        ts_add(flat, &s, 1, TS_DUP_BLOCK, NULL);
    }
    res_t got = { 0 };
    ts_query_t q = { .from = 0, .to = 10, .agg = TS_AGG_STD_S, .bucket_ms = 100 };
    ts_range(flat, &q, res_push, &got);
    assert_false(isnan(got.v[0]));
    assert_true(got.v[0] >= 0 && got.v[0] < 1e-7);
    res_free(&got);
    ts_free(flat);
    ts_free(ts);
}

/* ------------------------------------------------------------------------ */
/* Compression                                                              */
/* ------------------------------------------------------------------------ */

static double bytes_per_sample(int style, uint64_t seed, size_t batch)
{
    rng_t r;
    rng_seed(&r, seed);
    ts_t *ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    const size_t n = 86400;
    ts_sample_t *s = malloc(n * sizeof(*s));
    double temp = 21.0;
    int64_t t0 = 1686697976000LL;
    for (size_t i = 0; i < n; i++) {
        if (style == 0 && rng_below(&r, 10) == 0)   /* slowly changing: a 0.1 step in ~10% of seconds */
            temp = round((temp + (rng_below(&r, 2) ? 0.1 : -0.1)) * 10) / 10;
        s[i].ts = t0 + (int64_t)i * 1000;
        s[i].value = style == 0 ? temp : style == 1 ? 42.0 : rng_double(&r) * 1000;
    }
    for (size_t i = 0; i < n; i += batch) {
        size_t k = n - i < batch ? n - i : batch;
        assert_int_equal(ts_add(ts, s + i, k, TS_DUP_BLOCK, NULL), CORE_OK);
    }
    ts_info_t info;
    ts_get_info(ts, &info);
    assert_int_equal(info.samples, n);
    assert_int_equal(info.memory_bytes, ts_type.size(ts));
    double bps = (double)info.memory_bytes / (double)n;
    /* the query path decodes what was written */
    res_t got = { 0 };
    ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP };
    ts_range(ts, &q, res_push, &got);
    assert_int_equal(got.n, n);
    for (size_t i = 0; i < n; i++)
        assert_true(got.t[i] == s[i].ts && got.v[i] == s[i].value);
    res_free(&got);
    print_message("  style %d, batches of %zu: %zu bytes for %zu samples = %.3f bytes/sample (%zu chunks, %zu stream bytes)\n",
                  style, batch, info.memory_bytes, n, bps, info.chunks, info.data_bytes);
    free(s);
    ts_free(ts);
    return bps;
}

static void test_compression_target(void **state)
{
    (void)state;
    assert_true(bytes_per_sample(0, 1, 1) <= 2.0);      /* one TS.ADD per second */
    assert_true(bytes_per_sample(0, 2, 1000) <= 2.0);   /* batches of 1000 */
    assert_true(bytes_per_sample(1, 3, 1000) <= 0.5);   /* constant */
    assert_true(bytes_per_sample(2, 4, 1000) <= 10.0);  /* random doubles: ~8 bytes of entropy */
}

/* ------------------------------------------------------------------------ */
/* Hostile encodings                                                        */
/* ------------------------------------------------------------------------ */

static void test_decode_hostile(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 99);
    ts_label_t lab[] = { { "sensor", 6, "t1", 2 }, { "room", 4, "kitchen", 7 } };
    ts_t *ts = ts_create(5000, TS_DUP_MAX, lab, 2);
    for (int i = 0; i < 3000; i++) {
        ts_sample_t s = { 1000 + i * 7 + (int64_t)rng_below(&r, 5), rand_value(&r, 1) };
        ts_add(ts, &s, 1, TS_DUP_MAX, NULL);
    }
    wbuf_t a = WBUF_INIT;
    ts_type.encode(ts, &a);
    const char *why;
    ts_t *ok = ts_type.decode(a.data, a.len, &why);
    assert_non_null(ok);
    assert_int_equal(ts_label_count(ok), 2);
    ts_label_t l = ts_label_at(ok, 1);
    assert_int_equal(l.value_len, 7);
    assert_memory_equal(l.value, "kitchen", 7);
    assert_int_equal(ts_retention(ok), 5000);
    assert_int_equal(ts_policy(ok), TS_DUP_MAX);
    ts_free(ok);
    /* every truncation fails cleanly */
    for (size_t n = 0; n < a.len; n += 1 + n / 16)
        assert_null(ts_type.decode(a.data, n, &why));
    /* random corruption never crashes; what decodes re-encodes stably */
    uint8_t *buf = malloc(a.len);
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, a.data, a.len);
        int flips = 1 + (int)rng_below(&r, 3);
        for (int i = 0; i < flips; i++)
            buf[rng_below(&r, a.len)] ^= (uint8_t)(1u << rng_below(&r, 8));
        ts_t *v = ts_type.decode(buf, a.len, &why);
        if (v) {
            wbuf_t b = WBUF_INIT, c = WBUF_INIT;
            ts_type.encode(v, &b);
            ts_t *w = ts_type.decode(b.data, b.len, &why);
            assert_non_null(w);
            ts_type.encode(w, &c);
            assert_int_equal(b.len, c.len);
            assert_memory_equal(b.data, c.data, b.len);
            res_t got = { 0 };
            ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP, .agg = TS_AGG_AVG, .bucket_ms = 100 };
            assert_int_equal(ts_range(v, &q, res_push, &got), CORE_OK);
            res_free(&got);
            ts_free(w);
            ts_free(v);
            wbuf_free(&b);
            wbuf_free(&c);
        }
    }
    free(buf);
    wbuf_free(&a);
    ts_free(ts);
}

static void test_names(void **state)
{
    (void)state;
    ts_policy_t p;
    assert_true(ts_policy_parse("BLOCK", &p) && p == TS_DUP_BLOCK);
    assert_true(ts_policy_parse("sum", &p) && p == TS_DUP_SUM);
    assert_false(ts_policy_parse("ignore", &p));
    ts_agg_t a;
    assert_true(ts_agg_parse("std.p", &a) && a == TS_AGG_STD_P);
    assert_true(ts_agg_parse("VAR.S", &a) && a == TS_AGG_VAR_S);
    assert_true(ts_agg_parse("twa", &a) && a == TS_AGG_TWA);
    assert_true(ts_agg_parse("countnan", &a) && a == TS_AGG_COUNT_NAN);
    assert_true(ts_agg_parse("countAll", &a) && a == TS_AGG_COUNT_ALL);
    assert_false(ts_agg_parse("median", &a));
    for (int i = 1; i < TS_AGG_QUANTILE; i++)
        assert_true(ts_agg_parse(ts_agg_name((ts_agg_t)i), &a) && a == (ts_agg_t)i);
    double q;
    assert_true(ts_agg_parse_any("p99", &a, &q) && a == TS_AGG_QUANTILE && q == 0.99);
    assert_true(ts_agg_parse_any("p99.9", &a, &q) && a == TS_AGG_QUANTILE && fabs(q - 0.999) < 1e-15);
    assert_true(ts_agg_parse_any("p0", &a, &q) && q == 0);
    assert_true(ts_agg_parse_any("p100", &a, &q) && q == 1);
    assert_true(ts_agg_parse_any("avg", &a, &q) && a == TS_AGG_AVG);
    assert_false(ts_agg_parse_any("p101", &a, &q));
    assert_false(ts_agg_parse_any("p", &a, &q));
    assert_false(ts_agg_parse_any("p5x", &a, &q));
    assert_false(ts_agg_parse_any("p-1", &a, &q));
    assert_false(ts_agg_parse("quantile", &a));
    char buf[32];
    ts_agg_format(TS_AGG_QUANTILE, 0.99, buf, sizeof(buf));
    assert_string_equal(buf, "p99");
}

/* A bucket of more than TS_QUANTILE_EXACT_MAX values is summarised by a
 * T-Digest (bounded memory): its pNN against the exact quantile of the same
 * seeded values, as a rank error (below + half of equal, over n), for a
 * uniform and a heavy-tailed distribution; the bounds are the ones
 * core/ts.h states. */
static double sorted_rank(const double *v, size_t n, double x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t below = lo, eq = 0;
    while (below + eq < n && v[below + eq] == x)
        eq++;
    return ((double)below + (double)eq / 2) / (double)n;
}

static void test_quantile_large_bucket(void **state)
{
    (void)state;
    enum { N = 3 * TS_QUANTILE_EXACT_MAX };
    static const struct {
        double q, bound;
    } checks[] = { { 0.5, 0.0005 }, { 0.9, 0.0003 }, { 0.99, 0.0002 }, { 0.999, 0.0002 }, { 0.01, 0.0002 } };
    for (int dist = 0; dist < 2; dist++) {
        rng_t r;
        rng_seed(&r, 20261125 + (uint64_t)dist);
        ts_t *ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
        assert_non_null(ts);
        double *sorted = malloc(N * sizeof(*sorted));
        ts_sample_t *batch = malloc(N * sizeof(*batch));
        assert_non_null(sorted);
        assert_non_null(batch);
        for (size_t i = 0; i < N; i++) {
            double u = rng_double(&r);
            double v = dist == 0 ? u * 1000 : exp(6 * u * u * u);   /* heavy right tail */
            batch[i] = (ts_sample_t){ (int64_t)i + 1, v };
            sorted[i] = v;
        }
        assert_int_equal(ts_add(ts, batch, N, TS_DUP_BLOCK, NULL), CORE_OK);
        qsort(sorted, N, sizeof(*sorted), m_cmp_double);
        for (size_t j = 0; j < sizeof(checks) / sizeof(checks[0]); j++) {
            ts_query_t q = { .from = 0, .to = INT64_MAX, .agg = TS_AGG_QUANTILE, .bucket_ms = INT64_C(1) << 40,
                             .quantile = checks[j].q };
            res_t got = { 0 };
            assert_int_equal(ts_range(ts, &q, res_push, &got), CORE_OK);
            assert_int_equal(got.n, 1);
            double err = fabs(sorted_rank(sorted, N, got.v[0]) - checks[j].q);
            print_message("dist %d p%g: rank error %.6f (bound %g)\n", dist, checks[j].q * 100, err, checks[j].bound);
            if (err > checks[j].bound)
                fail_msg("dist %d p%g: rank error %.6f > %g", dist, checks[j].q * 100, err, checks[j].bound);
            res_free(&got);
        }
        /* up to TS_QUANTILE_EXACT_MAX values it is still exact */
        ts_query_t q = { .from = 1, .to = TS_QUANTILE_EXACT_MAX, .agg = TS_AGG_QUANTILE,
                         .bucket_ms = INT64_C(1) << 40, .quantile = 0.5 };
        res_t got = { 0 };
        assert_int_equal(ts_range(ts, &q, res_push, &got), CORE_OK);
        for (size_t i = 0; i < TS_QUANTILE_EXACT_MAX; i++)
            sorted[i] = batch[i].value;
        qsort(sorted, TS_QUANTILE_EXACT_MAX, sizeof(*sorted), m_cmp_double);
        double h = (double)(TS_QUANTILE_EXACT_MAX - 1) * 0.5;
        size_t lo = (size_t)h;
        assert_true(got.v[0] == sorted[lo] + (h - (double)lo) * (sorted[lo + 1] - sorted[lo]));
        res_free(&got);
        free(sorted);
        free(batch);
        ts_free(ts);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_seed_example),
        cmocka_unit_test(test_retention_boundary),
        cmocka_unit_test(test_bucket_arithmetic),
        cmocka_unit_test(test_extreme_timestamps),
        cmocka_unit_test(test_avg_overflow),
        cmocka_unit_test(test_variance_accuracy),
        cmocka_unit_test(test_random_policies),
        cmocka_unit_test(test_random_retention),
        cmocka_unit_test(test_random_sum_overflow),
        cmocka_unit_test(test_random_nan),
        cmocka_unit_test(test_flow_expectations),
        cmocka_unit_test(test_rules_random),
        cmocka_unit_test(test_decode_version1),
        cmocka_unit_test(test_decode_version2),
        cmocka_unit_test(test_rule_generations),
        cmocka_unit_test(test_reduce_nothing_counted),
        cmocka_unit_test(test_label_filters),
        cmocka_unit_test(test_compression_target),
        cmocka_unit_test(test_decode_hostile),
        cmocka_unit_test(test_quantile_large_bucket),
    };
    return cmocka_run_group_tests_name("ts", tests, NULL, NULL);
}
