/* cms.c - see cms.h. */
#include "core/cms.h"

#include <math.h>
#include <stdlib.h>

#include "core/hash.h"

#define CMS_ENC_VERSION 1        /* first byte of every encoding */
#define CMS_FLAG_CONSERVATIVE 1  /* flags bit: conservative update */

struct cms {
    uint32_t width;
    uint32_t depth;
    bool conservative;
    uint64_t total;
    uint64_t *cells;             /* depth rows of width counters */
};

/* ------------------------------------------------------------------------ */
/* Representation                                                           */
/* ------------------------------------------------------------------------ */

static bool dims_ok(uint64_t width, uint64_t depth)
{
    return width >= 1 && depth >= 1 && width <= UINT32_MAX && depth <= CMS_MAX_CELLS &&
           width * depth <= CMS_MAX_CELLS;
}

cms_t *cms_create(uint32_t width, uint32_t depth, bool conservative)
{
    if (!dims_ok(width, depth))
        return NULL;
    cms_t *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    c->cells = calloc((size_t)width * depth, sizeof(uint64_t));
    if (!c->cells) {
        free(c);
        return NULL;
    }
    c->width = width;
    c->depth = depth;
    c->conservative = conservative;
    c->total = 0;
    return c;
}

void cms_free(cms_t *c)
{
    if (!c)
        return;
    free(c->cells);
    free(c);
}

void cms_dims_from_prob(double error, double probability, uint64_t *width, uint64_t *depth)
{
    double w = ceil(2 / error);
    /* single precision, exactly as RedisBloom computes it */
    float d = log10f((float)probability) / log10f(0.5f);
    double dd = ceil((double)d);
    *width = w >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)w;
    *depth = dd < 1 ? 0 : dd >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)dd;
}

uint32_t cms_width(const cms_t *c) { return c->width; }
uint32_t cms_depth(const cms_t *c) { return c->depth; }
bool cms_conservative(const cms_t *c) { return c->conservative; }
uint64_t cms_total(const cms_t *c) { return c->total; }

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

/* The item's counter in row i (RedisBloom: MurmurHash2 seeded with the row). */
static inline size_t cell_of(const cms_t *c, const void *item, size_t len, uint32_t i)
{
    return (size_t)i * c->width + murmur2(item, len, i) % c->width;
}

bool cms_can_add(const cms_t *c, uint64_t sum) { return sum <= CMS_MAX_COUNT - c->total; }

uint64_t cms_query(const cms_t *c, const void *item, size_t len)
{
    uint64_t m = UINT64_MAX;
    for (uint32_t i = 0; i < c->depth; i++) {
        uint64_t v = c->cells[cell_of(c, item, len, i)];
        if (v < m)
            m = v;
    }
    return m;
}

uint64_t cms_incr(cms_t *c, const void *item, size_t len, uint64_t by)
{
    c->total += by;   /* every counter is <= total, so none can overflow */
    if (c->conservative) {
        uint64_t target = cms_query(c, item, len) + by;
        for (uint32_t i = 0; i < c->depth; i++) {
            uint64_t *v = &c->cells[cell_of(c, item, len, i)];
            if (*v < target)
                *v = target;
        }
        return target;
    }
    uint64_t m = UINT64_MAX;
    for (uint32_t i = 0; i < c->depth; i++) {
        uint64_t *v = &c->cells[cell_of(c, item, len, i)];
        *v += by;
        if (*v < m)
            m = *v;
    }
    return m;
}

/* a + w * x, false when the exact value leaves the int64 range. */
static bool weighted_add(int64_t *acc, uint64_t x, int64_t w)
{
    int64_t part;
    return x <= (uint64_t)INT64_MAX && !__builtin_mul_overflow((int64_t)x, w, &part) &&
           !__builtin_add_overflow(*acc, part, acc);
}

/* Counter j of the weighted sum, or -1 when it leaves [0, CMS_MAX_COUNT]. */
static int64_t merged_cell(const cms_t *const *srcs, const int64_t *weights, size_t n, size_t j)
{
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        if (!weighted_add(&v, srcs[i]->cells[j], weights[i]))
            return -1;
    return v;
}

cms_merge_status_t cms_merge(cms_t *dst, const cms_t *const *srcs, const int64_t *weights, size_t n)
{
    int64_t total = 0;
    bool negative = false;
    for (size_t i = 0; i < n; i++) {
        if (srcs[i]->width != dst->width || srcs[i]->depth != dst->depth)
            return CMS_MERGE_DIMENSIONS;
        negative |= weights[i] < 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!weighted_add(&total, srcs[i]->total, weights[i]))
            return CMS_MERGE_OVERFLOW;
    if (total < 0)
        return CMS_MERGE_OVERFLOW;
    /* With weights >= 0 each counter is <= its sketch's total, so every
     * weighted counter sum is <= the weighted total checked above, and each
     * row's sum is too.  A negative weight can push a counter below zero, or
     * (subtracting a sketch whose rows sum to less than its total, as
     * conservative update leaves them) a row's sum above the new total: a
     * first pass checks every counter and row before anything is written. */
    size_t cells = (size_t)dst->width * dst->depth;
    for (size_t row = 0; negative && row < dst->depth; row++) {
        uint64_t sum = 0;
        for (size_t j = row * dst->width; j < (row + 1) * dst->width; j++) {
            int64_t v = merged_cell(srcs, weights, n, j);
            if (v < 0 || (uint64_t)v > (uint64_t)total - sum)
                return CMS_MERGE_OVERFLOW;
            sum += (uint64_t)v;
        }
    }
    /* Counter j of the result depends only on counter j of the sources:
     * computing in place is safe even when dst is a source. */
    for (size_t j = 0; j < cells; j++)
        dst->cells[j] = (uint64_t)merged_cell(srcs, weights, n, j);
    dst->total = (uint64_t)total;
    return CMS_MERGE_OK;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { cms_free(v); }

uint64_t cms_bytes_for(uint64_t width, uint64_t depth)
{
    return sizeof(cms_t) + width * depth * sizeof(uint64_t);
}

static size_t type_size(const void *v)
{
    const cms_t *c = v;
    return (size_t)cms_bytes_for(c->width, c->depth);
}

static void type_encode(const void *v, wbuf_t *out)
{
    const cms_t *c = v;
    size_t cells = (size_t)c->width * c->depth;
    wbuf_put_u8(out, CMS_ENC_VERSION);
    wbuf_put_u32(out, c->width);
    wbuf_put_u32(out, c->depth);
    wbuf_put_u8(out, c->conservative ? CMS_FLAG_CONSERVATIVE : 0);
    wbuf_put_u64(out, c->total);
    if (!wbuf_reserve(out, cells * 8))
        return;
    for (size_t j = 0; j < cells; j++)
        wbuf_put_u64(out, c->cells[j]);
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint32_t width = rbuf_u32(&r), depth = rbuf_u32(&r);
    uint8_t flags = rbuf_u8(&r);
    uint64_t total = rbuf_u64(&r);
    if (r.err) {
        *why = "cms: truncated header";
        return NULL;
    }
    if (ver != CMS_ENC_VERSION) {
        *why = "cms: unknown encoding version";
        return NULL;
    }
    if (!dims_ok(width, depth)) {
        *why = "cms: dimensions out of range";
        return NULL;
    }
    if (flags & ~CMS_FLAG_CONSERVATIVE) {
        *why = "cms: unknown flags";
        return NULL;
    }
    if (total > CMS_MAX_COUNT) {
        *why = "cms: total out of range";
        return NULL;
    }
    if (rbuf_left(&r) != (size_t)width * depth * 8) {
        *why = "cms: wrong length";
        return NULL;
    }
    cms_t *c = cms_create(width, depth, flags & CMS_FLAG_CONSERVATIVE);
    if (!c) {
        *why = "out of memory";
        return NULL;
    }
    c->total = total;
    for (uint32_t i = 0; i < depth; i++) {
        uint64_t sum = 0;   /* a row never holds more than the total */
        for (uint32_t j = 0; j < width; j++) {
            uint64_t v = rbuf_u64(&r);
            if (v > total - sum) {
                cms_free(c);
                *why = "cms: a row holds more than the total";
                return NULL;
            }
            sum += v;
            c->cells[(size_t)i * width + j] = v;
        }
    }
    return c;
}

const ks_type_t cms_type = {
    .tag = TYPE_TAG_CMS,
    .name = "cms",
    .noun = "a Count-Min sketch",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
