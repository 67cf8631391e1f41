/* geo.c - see geo.h. */
#include "core/geo.h"

#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/zindex.h"

#define GEO_ENC_VERSION 1            /* first byte of every encoding */
#define SCORE_LIMIT (1ULL << 54)     /* 27 + 27 bits: the largest cell index GEOADD can produce */

/* A geo set is its (score, member) index: core/zindex.c. */
struct geo {
    zindex_t *z;
};

/* ------------------------------------------------------------------------ */
/* Set operations                                                           */
/* ------------------------------------------------------------------------ */

static geo_t *geo_wrap(zindex_t *z)
{
    geo_t *g = z ? malloc(sizeof(*g)) : NULL;
    if (!g) {
        zindex_free(z);
        return NULL;
    }
    g->z = z;
    return g;
}

geo_t *geo_create(void) { return geo_wrap(zindex_create()); }

void geo_free(geo_t *g)
{
    if (!g)
        return;
    zindex_free(g->z);
    free(g);
}

size_t geo_count(const geo_t *g) { return zindex_count(g->z); }
size_t geo_memory(const geo_t *g) { return sizeof(*g) + zindex_memory(g->z); }

uint64_t geo_add_bound(const geo_t *g, size_t n, uint64_t member_bytes)
{
    return (g ? 0 : sizeof(*g)) + zindex_add_bound(g ? g->z : NULL, n, member_bytes);
}

int geo_set(geo_t *g, const char *member, size_t len, uint64_t score, geo_add_mode_t mode)
{
    if (len > GEO_MEMBER_MAX)   /* never present: XX skips it, anything else cannot add it */
        return mode == GEO_ADD_XX ? GEO_SET_SKIPPED : CORE_NOMEM;
    return zindex_set(g->z, member, len, score, (zindex_mode_t)mode);
}

bool geo_score(const geo_t *g, const char *member, size_t len, uint64_t *score)
{
    return zindex_score(g->z, member, len, score);
}

bool geo_remove(geo_t *g, const char *member, size_t len) { return zindex_remove(g->z, member, len); }

void geo_range(const geo_t *g, uint64_t min, uint64_t max, geo_visit_fn fn, void *ud)
{
    zindex_range(g->z, min, max, fn, ud);
}

/* ------------------------------------------------------------------------ */
/* Search (GEOSEARCH / GEORADIUS)                                           */
/* ------------------------------------------------------------------------ */

typedef struct hits {
    geo_hit_t *a;
    size_t n, cap;
    bool oom;
} hits_t;

static bool hits_push(hits_t *h, const char *member, size_t len, uint64_t score, double lon, double lat, double dist)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        geo_hit_t *a = realloc(h->a, cap * sizeof(*a));
        if (!a) {
            h->oom = true;
            return false;
        }
        h->a = a;
        h->cap = cap;
    }
    h->a[h->n++] = (geo_hit_t){ member, len, score, lon, lat, dist };
    return true;
}

/* One cell's scan: the candidates that fall in the shape, in order, until
 * `limit` (0 = none) hits are collected. */
typedef struct scan {
    const geo_matcher_t *mt;
    hits_t *h;
    uint64_t limit;
} scan_t;

static bool scan_visit(void *ud, uint64_t score, const char *member, size_t len)
{
    scan_t *s = ud;
    double lon, lat, dist;
    if (geo_matcher_score(s->mt, score, &lon, &lat, &dist) && !hits_push(s->h, member, len, score, lon, lat, dist))
        return false;
    return !(s->h->n && s->limit && s->h->n >= s->limit);
}

/* Sorting works on (distance, index) pairs, then permutes the hits: the
 * permutation depends only on the comparisons, never on the element size,
 * and small elements sort much faster. */
typedef struct sortkey {
    double dist;
    size_t idx;
} sortkey_t;

static int dist_asc(const void *a, const void *b)
{
    double x = ((const sortkey_t *)a)->dist, y = ((const sortkey_t *)b)->dist;
    return x > y ? 1 : x == y ? 0 : -1;
}

static int dist_desc(const void *a, const void *b) { return -dist_asc(a, b); }

static inline void sk_swap(sortkey_t *a, sortkey_t *b)
{
    sortkey_t t = *a;
    *a = *b;
    *b = t;
}

static inline void sk_vecswap(sortkey_t *a, sortkey_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sk_swap(&a[i], &b[i]);
}

static size_t med3(const sortkey_t *a, size_t i, size_t j, size_t k, int (*cmp)(const void *, const void *))
{
    return cmp(&a[i], &a[j]) < 0 ? (cmp(&a[j], &a[k]) < 0 ? j : (cmp(&a[i], &a[k]) < 0 ? k : i))
                                 : (cmp(&a[j], &a[k]) > 0 ? j : (cmp(&a[i], &a[k]) < 0 ? i : k));
}

static void insertion_sort(sortkey_t *a, size_t n, int (*cmp)(const void *, const void *))
{
    for (size_t m = 1; m < n; m++)
        for (size_t l = m; l > 0 && cmp(&a[l - 1], &a[l]) > 0; l--)
            sk_swap(&a[l], &a[l - 1]);
}

/* Bentley & McIlroy's quicksort ("Engineering a Sort Function", 1993) as
 * NetBSD's libc has it, recursing only into partitions that overlap the
 * wanted index range [lo, hi] (absolute indexes; `base` is a's offset).
 * Redis uses this for COUNT; its exact comparisons and swaps decide the
 * order of equal distances, so they are reproduced step by step.  Measured
 * against redis-server 7.0: it never takes the original's shortcut to
 * insertion sort when a partition pass swapped nothing, so neither do we. */
static void pqsort_range(sortkey_t *a, size_t n, size_t base, size_t lo, size_t hi,
                         int (*cmp)(const void *, const void *))
{
    for (;;) {
        if (n < 7) {
            insertion_sort(a, n, cmp);
            return;
        }
        size_t pm = n / 2;
        if (n > 7) {
            size_t pl = 0, pn = n - 1;
            if (n > 40) {
                size_t d = n / 8;
                pl = med3(a, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(a, pm - d, pm, pm + d, cmp);
                pn = med3(a, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(a, pl, pm, pn, cmp);
        }
        sk_swap(&a[0], &a[pm]);
        /* [0] pivot | [1, pa) equal | [pa, pb) less | (pc, pd] greater | (pd, n) equal */
        ptrdiff_t pa = 1, pb = 1, pc = (ptrdiff_t)n - 1, pd = (ptrdiff_t)n - 1;
        for (;;) {
            int r;
            while (pb <= pc && (r = cmp(&a[pb], &a[0])) <= 0) {
                if (r == 0) {
                    sk_swap(&a[pa], &a[pb]);
                    pa++;
                }
                pb++;
            }
            while (pb <= pc && (r = cmp(&a[pc], &a[0])) >= 0) {
                if (r == 0) {
                    sk_swap(&a[pc], &a[pd]);
                    pd--;
                }
                pc--;
            }
            if (pb > pc)
                break;
            sk_swap(&a[pb], &a[pc]);
            pb++;
            pc--;
        }
        ptrdiff_t pn = (ptrdiff_t)n;
        ptrdiff_t r = pa < pb - pa ? pa : pb - pa;
        sk_vecswap(a, a + (pb - r), (size_t)r);
        r = (pd - pc) < (pn - pd - 1) ? (pd - pc) : (pn - pd - 1);
        sk_vecswap(a + pb, a + (pn - r), (size_t)r);
        size_t left = (size_t)(pb - pa), right = (size_t)(pd - pc);
        if (left > 1 && !(hi < base || lo >= base + left))
            pqsort_range(a, left, base, lo, hi, cmp);
        if (right <= 1)
            return;
        a += n - right;
        base += n - right;
        n = right;
        if (hi < base || lo >= base + n)
            return;
    }
}

/* Sorts hits[0..n) by distance as Redis does: libc qsort for a full sort,
 * pqsort when only the first `returned` are wanted.  Returns false on
 * allocation failure (hits untouched). */
static bool sort_hits(geo_hit_t *hits, size_t n, size_t returned, bool desc)
{
    sortkey_t *k = malloc(n * sizeof(*k));
    geo_hit_t *tmp = malloc(returned * sizeof(*tmp));
    if (!k || !tmp) {
        free(k);
        free(tmp);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (sortkey_t){ hits[i].dist, i };
    int (*cmp)(const void *, const void *) = desc ? dist_desc : dist_asc;
    if (returned == n)
        qsort(k, n, sizeof(*k), cmp);
    else
        pqsort_range(k, n, 0, 0, returned - 1, cmp);
    for (size_t i = 0; i < returned; i++)
        tmp[i] = hits[k[i].idx];
    memcpy(hits, tmp, returned * sizeof(*tmp));
    free(tmp);
    free(k);
    return true;
}

void geo_pqsort(geo_hit_t *a, size_t n, bool desc, size_t lo, size_t hi)
{
    sortkey_t *k = malloc(n * sizeof(*k));
    geo_hit_t *tmp = malloc(n * sizeof(*tmp));
    if (!k || !tmp)
        abort();   /* test helper */
    for (size_t i = 0; i < n; i++)
        k[i] = (sortkey_t){ a[i].dist, i };
    pqsort_range(k, n, 0, lo, hi, desc ? dist_desc : dist_asc);
    for (size_t i = 0; i < n; i++)
        tmp[i] = a[k[i].idx];
    memcpy(a, tmp, n * sizeof(*tmp));
    free(tmp);
    free(k);
}

bool geo_search(const geo_t *g, const geo_query_t *q, geo_hit_t **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (zindex_count(g->z) == 0)
        return true;
    geo_cells_t c;
    geo_search_cells(&q->shape, &c);
    hits_t h = { NULL, 0, 0, false };
    uint64_t limit = q->any ? q->count : 0;
    geo_matcher_t mt;
    geo_matcher_init(&mt, &q->shape);
    int last = 0;
    for (int i = 0; i < 9; i++) {
        geohash_t cell = c.cell[i];
        if (cell.bits == 0 && cell.step == 0)
            continue;   /* pruned */
        /* with huge radii neighbours coincide: skip a repeat of the last cell scanned */
        if (last && cell.bits == c.cell[last].bits && cell.step == c.cell[last].step)
            continue;
        if (h.n && limit && h.n >= limit)
            break;
        uint64_t min, max;
        geohash_score_range(cell, &min, &max);
        zindex_range(g->z, min, max, scan_visit, &(scan_t){ &mt, &h, limit });
        if (h.oom) {
            free(h.a);
            return false;
        }
        last = i;
    }

    geo_sort_t sort = q->sort;
    if (q->count && sort == GEO_SORT_NONE && !q->any)
        sort = GEO_SORT_ASC;   /* COUNT means the nearest ones */
    size_t returned = (q->count == 0 || h.n < q->count) ? h.n : (size_t)q->count;
    if (sort != GEO_SORT_NONE && h.n > 0 && !sort_hits(h.a, h.n, returned, sort == GEO_SORT_DESC)) {
        free(h.a);
        return false;
    }
    for (size_t i = 0; i < returned; i++)
        h.a[i].dist /= q->shape.to_m;
    *out = h.a;
    *nout = returned;
    return true;
}


/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { geo_free(v); }
static size_t type_size(const void *v) { return geo_memory(v); }

static bool encode_member(void *ud, uint64_t score, const char *member, size_t len)
{
    wbuf_t *out = ud;
    wbuf_put_u64(out, score);
    wbuf_put_u16(out, (uint16_t)len);
    wbuf_put_bytes(out, member, len);
    return true;
}

static void type_encode(const void *v, wbuf_t *out)
{
    const geo_t *g = v;
    wbuf_put_u8(out, GEO_ENC_VERSION);
    wbuf_put_u64(out, geo_count(g));
    zindex_each(g->z, encode_member, out);
}

static void *decode_fail(zindex_t *z, const char *msg, const char **why)
{
    zindex_free(z);
    *why = msg;
    return NULL;
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint64_t count = rbuf_u64(&r);
    if (r.err) {
        *why = "geo: truncated header";
        return NULL;
    }
    if (ver != GEO_ENC_VERSION) {
        *why = "geo: unknown encoding version";
        return NULL;
    }
    if (count > rbuf_left(&r) / 11) {   /* each member takes >= 8 + 2 + 1 bytes */
        *why = "geo: member count exceeds the data";
        return NULL;
    }
    zindex_t *z = zindex_load_begin((size_t)count);
    if (!z)
        return decode_fail(NULL, "out of memory", why);
    for (size_t i = 0; i < count; i++) {
        uint64_t score = rbuf_u64(&r);
        uint16_t mlen = rbuf_u16(&r);
        const uint8_t *m = rbuf_bytes(&r, mlen);
        if (!m)
            return decode_fail(z, "geo: truncated member", why);
        if (score >= SCORE_LIMIT || (uint64_t)(double)score != score)
            return decode_fail(z, "geo: score is not a geohash", why);
        if (mlen == 0 || mlen > GEO_MEMBER_MAX || !codec_text_ok(m, mlen))
            return decode_fail(z, "geo: bad member", why);
        switch (zindex_load_add(z, score, (const char *)m, mlen)) {
        case CORE_OK: break;
        case CORE_UNORDERED: return decode_fail(z, "geo: members out of order", why);
        case CORE_DUPLICATE: return decode_fail(z, "geo: duplicate member", why);
        default: return decode_fail(z, "out of memory", why);
        }
    }
    if (!rbuf_done(&r))
        return decode_fail(z, "geo: trailing bytes", why);
    if (zindex_load_end(z) != CORE_OK)
        return decode_fail(z, "out of memory", why);
    geo_t *g = geo_wrap(z);
    if (!g)
        *why = "out of memory";
    return g;
}

const ks_type_t geo_type = {
    .tag = TYPE_TAG_GEO,
    .name = "geo",
    .noun = "a geo set",
    .missing = "no such key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
