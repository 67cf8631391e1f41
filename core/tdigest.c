/* tdigest.c - see tdigest.h. */
#include "core/tdigest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TDIGEST_ENC_VERSION 1    /* first byte of every encoding */
#define TD_PI 3.14159265358979323846

typedef struct td_node {
    double mean;
    uint64_t weight;
} td_node_t;

struct tdigest {
    uint32_t compression;
    uint32_t cap;                /* nodes array length: 6c + 10 */
    uint32_t merged;             /* nodes[0, merged) are centroids sorted by mean */
    uint32_t unmerged;           /* nodes[merged, merged + unmerged) are buffered */
    uint64_t merged_weight;
    uint64_t unmerged_weight;
    uint64_t total_compressions;
    double min, max;             /* +inf / -inf while empty */
    td_node_t *nodes;
};

/* ------------------------------------------------------------------------ */
/* Representation                                                           */
/* ------------------------------------------------------------------------ */

static uint32_t cap_of(uint32_t compression) { return 6 * compression + 10; }

static tdigest_t *td_alloc(uint32_t compression)
{
    if (compression < 1 || compression > TDIGEST_MAX_COMPRESSION)
        return NULL;
    tdigest_t *td = calloc(1, sizeof(*td));
    if (!td)
        return NULL;
    td->compression = compression;
    td->cap = cap_of(compression);
    td->nodes = malloc((size_t)td->cap * sizeof(td_node_t));
    if (!td->nodes) {
        free(td);
        return NULL;
    }
    td->min = INFINITY;
    td->max = -INFINITY;
    return td;
}

tdigest_t *tdigest_create(uint32_t compression) { return td_alloc(compression); }

void tdigest_free(tdigest_t *td)
{
    if (!td)
        return;
    free(td->nodes);
    free(td);
}

void tdigest_reset(tdigest_t *td)
{
    td->merged = td->unmerged = 0;
    td->merged_weight = td->unmerged_weight = 0;
    td->total_compressions = 0;
    td->min = INFINITY;
    td->max = -INFINITY;
}

uint64_t tdigest_count(const tdigest_t *td) { return td->merged_weight + td->unmerged_weight; }
uint32_t tdigest_compression(const tdigest_t *td) { return td->compression; }

void tdigest_get_info(const tdigest_t *td, tdigest_info_t *out)
{
    out->compression = td->compression;
    out->capacity = td->cap;
    out->merged_nodes = td->merged;
    out->unmerged_nodes = td->unmerged;
    out->merged_weight = td->merged_weight;
    out->unmerged_weight = td->unmerged_weight;
    out->total_compressions = td->total_compressions;
}

static tdigest_t *td_clone(const tdigest_t *td)
{
    tdigest_t *c = td_alloc(td->compression);
    if (!c)
        return NULL;
    td_node_t *nodes = c->nodes;
    *c = *td;
    c->nodes = nodes;
    memcpy(c->nodes, td->nodes, (size_t)(td->merged + td->unmerged) * sizeof(td_node_t));
    return c;
}

/* ------------------------------------------------------------------------ */
/* Merging pass                                                             */
/* ------------------------------------------------------------------------ */

static int node_cmp(const void *a, const void *b)
{
    const td_node_t *x = a, *y = b;
    if (x->mean != y->mean)
        return x->mean < y->mean ? -1 : 1;
    /* equal means: order by weight so the result does not depend on the
     * sorting algorithm (equal nodes are interchangeable) */
    return (x->weight > y->weight) - (x->weight < y->weight);
}

/* The largest cumulative weight a centroid starting after `so_far` (of
 * `total`) may reach: one unit of k further along the q axis, where
 * k(q) = c/π · asin(2q − 1), so one unit is π/c in asin's argument. */
static double weight_limit(double compression, double so_far, double total)
{
    double a = asin(2.0 * so_far / total - 1.0) + TD_PI / compression;
    if (a >= TD_PI / 2)
        return total;
    return (sin(a) + 1.0) / 2.0 * total;
}

/* Sorts the buffer into the centroids and merges neighbours under the k₁
 * limit.  With `force`, also re-merges when nothing is buffered (a decoded
 * digest may hold more centroids than the pass would leave). */
static void td_compress(tdigest_t *td, bool force)
{
    uint32_t n = td->merged + td->unmerged;
    if (n == 0 || (td->unmerged == 0 && !force))
        return;
    td_node_t *all = td->nodes, *src = all, *tmp = NULL;
    if (td->unmerged > 0) {
        qsort(all + td->merged, td->unmerged, sizeof(td_node_t), node_cmp);
        tmp = td->merged > 0 ? malloc((size_t)n * sizeof(td_node_t)) : NULL;
        if (tmp) {
            /* merge the two sorted runs */
            uint32_t i = 0, j = td->merged, o = 0;
            while (i < td->merged && j < n)
                tmp[o++] = node_cmp(&all[j], &all[i]) < 0 ? all[j++] : all[i++];
            while (i < td->merged)
                tmp[o++] = all[i++];
            while (j < n)
                tmp[o++] = all[j++];
            src = tmp;
        } else if (td->merged > 0) {
            qsort(all, n, sizeof(td_node_t), node_cmp);
        }
    }
    double total = (double)(td->merged_weight + td->unmerged_weight);
    double c = td->compression;
    td_node_t cur = src[0];
    double so_far = 0;
    double limit = weight_limit(c, so_far, total);
    uint32_t out = 0;
    for (uint32_t i = 1; i < n; i++) {
        td_node_t x = src[i];
        if (so_far + (double)cur.weight + (double)x.weight <= limit) {
            cur.weight += x.weight;
            cur.mean += (x.mean - cur.mean) * (double)x.weight / (double)cur.weight;
        } else {
            all[out++] = cur;        /* out <= i - 1: never overwrites an unread node */
            so_far += (double)cur.weight;
            limit = weight_limit(c, so_far, total);
            cur = x;
        }
    }
    all[out++] = cur;
    for (uint32_t i = 0; i < out; i++) {   /* rounding must never leave [min, max] */
        if (all[i].mean < td->min)
            all[i].mean = td->min;
        if (all[i].mean > td->max)
            all[i].mean = td->max;
    }
    free(tmp);
    td->merged = out;
    td->unmerged = 0;
    td->merged_weight += td->unmerged_weight;
    td->unmerged_weight = 0;
    td->total_compressions++;
}

void tdigest_flush(tdigest_t *td) { td_compress(td, false); }

/* Appends one node to the buffer, merging first when the buffer is full. */
static void td_push(tdigest_t *td, double mean, uint64_t weight)
{
    if (td->merged + td->unmerged >= td->cap - 1)
        td_compress(td, true);
    if (td->merged + td->unmerged >= td->cap) {
        /* unreachable: a merging pass leaves at most c + 1 centroids (each
         * neighbouring pair spans more than one unit of k) - but never write
         * past the array */
        td_node_t *last = &td->nodes[td->merged + td->unmerged - 1];
        last->weight += weight;
        last->mean += (mean - last->mean) * (double)weight / (double)last->weight;
        if (td->unmerged)
            td->unmerged_weight += weight;
        else
            td->merged_weight += weight;
        return;
    }
    td->nodes[td->merged + td->unmerged] = (td_node_t){ mean, weight };
    td->unmerged++;
    td->unmerged_weight += weight;
}

bool tdigest_can_add(const tdigest_t *td, uint64_t n)
{
    return n <= TDIGEST_MAX_WEIGHT - tdigest_count(td);
}

bool tdigest_add(tdigest_t *td, double value)
{
    if (!isfinite(value) || !tdigest_can_add(td, 1))
        return false;
    if (value < td->min)
        td->min = value;
    if (value > td->max)
        td->max = value;
    td_push(td, value, 1);
    return true;
}

tdigest_t *tdigest_merge(uint32_t compression, const tdigest_t *const *srcs, size_t n, bool *overflow)
{
    *overflow = false;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!srcs[i])
            continue;
        uint64_t w = tdigest_count(srcs[i]);
        if (w > TDIGEST_MAX_WEIGHT - total) {
            *overflow = true;
            return NULL;
        }
        total += w;
    }
    tdigest_t *td = td_alloc(compression);
    if (!td)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const tdigest_t *s = srcs[i];
        if (!s || tdigest_count(s) == 0)
            continue;
        if (s->min < td->min)
            td->min = s->min;
        if (s->max > td->max)
            td->max = s->max;
        for (uint32_t j = 0; j < s->merged + s->unmerged; j++)
            td_push(td, s->nodes[j].mean, s->nodes[j].weight);
    }
    td_compress(td, false);
    return td;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */
/* ------------------------------------------------------------------------ */

/* The digest to answer from: itself when nothing is buffered, else a flushed
 * copy stored in *tmp (freed by the caller), or NULL when out of memory. */
static const tdigest_t *view_of(const tdigest_t *td, tdigest_t **tmp)
{
    *tmp = NULL;
    if (td->unmerged == 0)
        return td;
    *tmp = td_clone(td);
    if (*tmp)
        td_compress(*tmp, false);
    return *tmp;
}

/* Weighted average of x1 and x2 (weights w1, w2), kept between them. */
static double between(double x1, double w1, double x2, double w2)
{
    double lo = x1 < x2 ? x1 : x2, hi = x1 < x2 ? x2 : x1;
    double x = (x1 * w1 + x2 * w2) / (w1 + w2);
    return x < lo ? lo : x > hi ? hi : x;
}

/* The value at cumulative weight `index` of a flushed digest with >= 2
 * centroids.  Each centroid's weight is taken as spread half on each side of
 * its mean; a singleton is exactly at its mean; one value sits exactly at min
 * and one at max. */
static double value_at(const tdigest_t *td, double index)
{
    const td_node_t *c = td->nodes;
    uint32_t n = td->merged;
    double total = (double)td->merged_weight;
    if (index < 1)
        return td->min;
    if (index > total - 1)
        return td->max;
    double w0 = (double)c[0].weight;
    if (w0 > 1 && index < w0 / 2)    /* between the value at min and the first mean */
        return td->min + (index - 1) / (w0 / 2 - 1) * (c[0].mean - td->min);
    double wn = (double)c[n - 1].weight;
    if (wn > 1 && total - index <= wn / 2) {
        if (wn / 2 - 1 <= 0)
            return td->max;
        return td->max - (total - index - 1) / (wn / 2 - 1) * (td->max - c[n - 1].mean);
    }
    double so_far = w0 / 2;
    for (uint32_t i = 0; i + 1 < n; i++) {
        double wl = (double)c[i].weight, wr = (double)c[i + 1].weight;
        double dw = (wl + wr) / 2;
        if (so_far + dw > index) {
            double left_unit = 0, right_unit = 0;
            if (wl == 1) {
                if (index - so_far < 0.5)
                    return c[i].mean;
                left_unit = 0.5;
            }
            if (wr == 1) {
                if (so_far + dw - index <= 0.5)
                    return c[i + 1].mean;
                right_unit = 0.5;
            }
            double z1 = index - so_far - left_unit;
            double z2 = so_far + dw - index - right_unit;
            return between(c[i].mean, z2, c[i + 1].mean, z1);
        }
        so_far += dw;
    }
    return td->max;
}

static double quantile_of(const tdigest_t *td, double q)
{
    if (td->merged == 0)
        return NAN;
    double index = q * (double)td->merged_weight;
    if (td->merged == 1)   /* the extremes are known exactly; the rest is the mean */
        return index < 1 ? td->min : index > (double)td->merged_weight - 1 ? td->max : td->nodes[0].mean;
    return value_at(td, index);
}

double tdigest_quantile(const tdigest_t *td, double q)
{
    if (!(q >= 0 && q <= 1))
        return NAN;
    tdigest_t *tmp;
    const tdigest_t *v = view_of(td, &tmp);
    double r = v ? quantile_of(v, q) : NAN;
    tdigest_free(tmp);
    return r;
}

/* Fraction of the weight below x plus half of the weight at x. */
static double cdf_of(const tdigest_t *td, double x)
{
    const td_node_t *c = td->nodes;
    uint32_t n = td->merged;
    if (n == 0)
        return NAN;
    if (x < td->min)
        return 0;
    if (x > td->max)
        return 1;
    if (n == 1)
        return 0.5;   /* RedisBloom: one centroid is too little to interpolate */
    double total = (double)td->merged_weight;
    if (x < c[0].mean) {
        double width = c[0].mean - td->min;
        if (!(width > 0))
            return 0;
        if (x == td->min)
            return 0.5 / total;
        return (1 + (x - td->min) / width * ((double)c[0].weight / 2 - 1)) / total;
    }
    if (x > c[n - 1].mean) {
        double width = td->max - c[n - 1].mean;
        if (!(width > 0))
            return 1;
        if (x == td->max)
            return 1 - 0.5 / total;
        return 1 - (1 + (td->max - x) / width * ((double)c[n - 1].weight / 2 - 1)) / total;
    }
    double so_far = 0;   /* weight of the centroids left of c[i] */
    for (uint32_t i = 0; i + 1 < n; i++) {
        if (c[i].mean == x) {
            double at = 0;   /* every centroid exactly at x counts half */
            while (i < n && c[i].mean == x)
                at += (double)c[i++].weight;
            return (so_far + at / 2) / total;
        }
        if (c[i].mean <= x && x < c[i + 1].mean) {
            double wl = (double)c[i].weight, wr = (double)c[i + 1].weight;
            double gap = c[i + 1].mean - c[i].mean;
            if (!(gap > 0))
                return (so_far + (wl + wr) / 2) / total;
            if (wl == 1 && wr == 1)   /* two singletons: nothing to interpolate */
                return (so_far + 1) / total;
            double left_out = wl == 1 ? 0.5 : 0, right_out = wr == 1 ? 0.5 : 0;
            double span = (wl + wr) / 2 - left_out - right_out;
            double base = so_far + wl / 2 + left_out;
            return (base + span * (x - c[i].mean) / gap) / total;
        }
        so_far += (double)c[i].weight;
    }
    return 1 - 0.5 / total;   /* x equals the last mean */
}

double tdigest_cdf(const tdigest_t *td, double value)
{
    tdigest_t *tmp;
    const tdigest_t *v = view_of(td, &tmp);
    double r = v ? cdf_of(v, value) : NAN;
    tdigest_free(tmp);
    return r;
}

/* RedisBloom's rounding for ranks: halves go towards zero. */
static double round_half_down(double f)
{
    double ip;
    double frac = modf(f, &ip);
    if (fabs(frac) <= 0.5)
        return ip;
    return ip >= 0 ? ip + 1 : ip - 1;
}

int64_t tdigest_rank(const tdigest_t *td, double value, bool reverse)
{
    uint64_t n = tdigest_count(td);
    if (n == 0)
        return -2;
    if (value < td->min)
        return reverse ? (int64_t)n : -1;
    if (value > td->max)
        return reverse ? -1 : (int64_t)n;
    double c = tdigest_cdf(td, value) * (double)n;
    if (isnan(c))
        return -2;
    return reverse ? (int64_t)round((double)n - round(c)) : (int64_t)round_half_down(c);
}

double tdigest_by_rank(const tdigest_t *td, uint64_t rank, bool reverse)
{
    uint64_t n = tdigest_count(td);
    if (n == 0)
        return NAN;
    if (rank == 0)
        return reverse ? td->max : td->min;
    if (rank >= n)
        return reverse ? -INFINITY : INFINITY;
    double r = reverse ? (double)(n - rank - 1) : (double)rank;
    return tdigest_quantile(td, r / (double)n);
}

static double trimmed_of(const tdigest_t *td, double low, double high)
{
    if (td->merged == 0)
        return NAN;
    if (td->merged == 1)
        return td->nodes[0].mean;
    double total = (double)td->merged_weight;
    double from = floor(total * low), to = ceil(total * high);
    double done = 0, sum = 0, count = 0;
    for (uint32_t i = 0; i < td->merged && done < to; i++) {
        double w = (double)td->nodes[i].weight;
        /* the part of [done, done + w) inside [from, to) */
        double a = done > from ? done : from;
        double b = done + w < to ? done + w : to;
        if (b > a) {
            sum += td->nodes[i].mean * (b - a);
            count += b - a;
        }
        done += w;
    }
    return sum / count;
}

double tdigest_trimmed_mean(const tdigest_t *td, double low, double high)
{
    if (!(low >= 0 && high <= 1 && low < high))
        return NAN;
    tdigest_t *tmp;
    const tdigest_t *v = view_of(td, &tmp);
    double r = v ? trimmed_of(v, low, high) : NAN;
    tdigest_free(tmp);
    return r;
}

double tdigest_min(const tdigest_t *td) { return tdigest_count(td) ? td->min : NAN; }
double tdigest_max(const tdigest_t *td) { return tdigest_count(td) ? td->max : NAN; }

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { tdigest_free(v); }

uint64_t tdigest_bytes_for(uint32_t compression)
{
    return sizeof(tdigest_t) + (uint64_t)cap_of(compression) * sizeof(td_node_t);
}

static size_t type_size(const void *v)
{
    const tdigest_t *td = v;
    return sizeof(*td) + (size_t)td->cap * sizeof(td_node_t);
}

static void type_encode(const void *v, wbuf_t *out)
{
    const tdigest_t *td = v;
    uint32_t n = td->merged + td->unmerged;
    wbuf_put_u8(out, TDIGEST_ENC_VERSION);
    wbuf_put_u32(out, td->compression);
    wbuf_put_u64(out, td->total_compressions);
    wbuf_put_f64(out, td->min);
    wbuf_put_f64(out, td->max);
    wbuf_put_u32(out, n);
    wbuf_put_u32(out, td->merged);
    if (!wbuf_reserve(out, (size_t)n * 16))
        return;
    for (uint32_t i = 0; i < n; i++) {
        wbuf_put_f64(out, td->nodes[i].mean);
        wbuf_put_u64(out, td->nodes[i].weight);
    }
}

static void *fail(tdigest_t *td, const char **why, const char *msg)
{
    tdigest_free(td);
    *why = msg;
    return NULL;
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint32_t compression = rbuf_u32(&r);
    uint64_t compressions = rbuf_u64(&r);
    double min = rbuf_f64(&r), max = rbuf_f64(&r);
    uint32_t n = rbuf_u32(&r), merged = rbuf_u32(&r);
    if (r.err)
        return fail(NULL, why, "tdigest: truncated header");
    if (ver != TDIGEST_ENC_VERSION)
        return fail(NULL, why, "tdigest: unknown encoding version");
    if (compression < 1 || compression > TDIGEST_MAX_COMPRESSION)
        return fail(NULL, why, "tdigest: compression out of range");
    if (n > cap_of(compression) || merged > n)
        return fail(NULL, why, "tdigest: node counts out of range");
    if (rbuf_left(&r) != (size_t)n * 16)
        return fail(NULL, why, "tdigest: wrong length");
    if (n == 0 ? !(min == INFINITY && max == -INFINITY) : !(isfinite(min) && isfinite(max) && min <= max))
        return fail(NULL, why, "tdigest: bad min/max");
    tdigest_t *td = td_alloc(compression);
    if (!td)
        return fail(NULL, why, "out of memory");
    td->total_compressions = compressions;
    td->min = min;
    td->max = max;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        double mean = rbuf_f64(&r);
        uint64_t w = rbuf_u64(&r);
        if (!isfinite(mean) || mean < min || mean > max)
            return fail(td, why, "tdigest: centroid mean outside [min, max]");
        if (w == 0 || w > TDIGEST_MAX_WEIGHT - total)
            return fail(td, why, "tdigest: bad centroid weight");
        if (i > 0 && i < merged && mean < td->nodes[i - 1].mean)
            return fail(td, why, "tdigest: centroids not sorted");
        total += w;
        td->nodes[i] = (td_node_t){ mean, w };
        if (i < merged)
            td->merged_weight += w;
        else
            td->unmerged_weight += w;
    }
    td->merged = merged;
    td->unmerged = n - merged;
    return td;
}

const ks_type_t tdigest_type = {
    .tag = TYPE_TAG_TDIGEST,
    .name = "tdigest",
    .noun = "a T-Digest",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
