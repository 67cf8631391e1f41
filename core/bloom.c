/* bloom.c - see bloom.h for the algorithm, the hashing and the encoding. */
#include "core/bloom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/hash.h"

#define BLOOM_SEED 0xc6a4a7935bd1e995ULL      /* RedisBloom's first-hash seed */
#define BLOOM_LN2_SQUARED 0.480453013918201   /* ln(2)^2, RedisBloom's constant */
#define BLOOM_LN2 0.69314718055994530942      /* ln(2) */
#define BLOOM_TIGHTENING 0.5                  /* error ratio between sub-filters */
#define BLOOM_ENC_VERSION 1                   /* first byte of the keyspace encoding */
#define BLOOM_FLAG_SCALING 1                  /* flags bit in the encoding */

typedef struct link {
    uint64_t entries;   /* capacity of this sub-filter */
    double error;
    uint32_t hashes;
    uint64_t bits;      /* a multiple of 64 */
    uint64_t items;
    uint8_t *data;      /* bits / 8 bytes */
} link_t;

struct bloom {
    double error;       /* as configured */
    uint64_t capacity;  /* as configured */
    uint32_t expansion;
    bool scaling;
    uint64_t items;
    uint32_t nfilters;
    uint32_t nalloc;    /* slots in links */
    link_t *links;
};

/* Room for one more sub-filter in b->links. */
static bool links_reserve(bloom_t *b)
{
    if (b->nfilters < b->nalloc)
        return true;
    uint32_t n = b->nalloc ? b->nalloc * 2 : 2;
    link_t *l = realloc(b->links, n * sizeof(*l));
    if (!l)
        return false;
    b->links = l;
    b->nalloc = n;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Geometry                                                                 */
/* ------------------------------------------------------------------------ */

static double bits_per_entry(double error)
{
    double bpe = -(log(error) / BLOOM_LN2_SQUARED);
    return bpe < 0 ? -bpe : bpe;
}

/* Fills entries/error/hashes/bits of sub-filter `i`; false if it cannot
 * exist (overflow or over the size limit). */
static bool link_geometry(double error, uint64_t capacity, uint32_t expansion, bool scaling, uint32_t i,
                          link_t *l)
{
    double e = error * (scaling ? BLOOM_TIGHTENING : 1);
    uint64_t entries = capacity;
    for (uint32_t k = 0; k < i; k++) {
        e *= BLOOM_TIGHTENING;
        if (__builtin_mul_overflow(entries, (uint64_t)expansion, &entries))
            return false;
    }
    if (!(e > 0))
        return false;
    double bpe = bits_per_entry(e);
    double dbits = (double)entries * bpe;
    if (!(dbits < (double)(BLOOM_MAX_FILTER_BYTES * 8)))
        return false;
    uint64_t bits = (uint64_t)dbits;
    uint64_t bytes = bits % 64 ? (bits / 64 + 1) * 8 : bits / 8;
    if (bytes == 0)
        bytes = 8;   /* RedisBloom would divide by zero here */
    if (bytes > BLOOM_MAX_FILTER_BYTES)
        return false;
    l->entries = entries;
    l->error = e;
    l->hashes = (uint32_t)ceil(BLOOM_LN2 * bpe);
    l->bits = bytes * 8;
    l->items = 0;
    l->data = NULL;
    return true;
}

const char *bloom_validate(double error, uint64_t capacity, uint32_t expansion, const char **field)
{
    if (!(error > 0 && error < 1)) {
        *field = "error_rate";
        return "must be between 0 and 1 (exclusive)";
    }
    if (capacity < 1 || capacity > BLOOM_MAX_CAPACITY) {
        *field = "capacity";
        return "must be between 1 and 4294967294";
    }
    if (expansion < 1 || expansion > BLOOM_MAX_EXPANSION) {
        *field = "expansion";
        return "must be between 1 and 32768";
    }
    link_t l;
    if (!link_geometry(error, capacity, expansion, true, 0, &l) ||
        !link_geometry(error, capacity, expansion, false, 0, &l)) {
        *field = "capacity";
        return "needs a bit array over 1 GiB at this error rate";
    }
    return NULL;
}

static bool link_alloc(link_t *l)
{
    l->data = calloc(l->bits / 8, 1);
    return l->data != NULL;
}

bloom_t *bloom_create(double error, uint64_t capacity, uint32_t expansion, bool scaling)
{
    bloom_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->error = error;
    b->capacity = capacity;
    b->expansion = expansion;
    b->scaling = scaling;
    if (!links_reserve(b) || !link_geometry(error, capacity, expansion, scaling, 0, &b->links[0]) ||
        !link_alloc(&b->links[0])) {
        free(b->links);
        free(b);
        return NULL;
    }
    b->nfilters = 1;
    return b;
}

void bloom_free(bloom_t *b)
{
    if (!b)
        return;
    for (uint32_t i = 0; i < b->nfilters; i++)
        free(b->links[i].data);
    free(b->links);
    free(b);
}

size_t bloom_memory(const bloom_t *b)
{
    size_t m = sizeof(*b) + b->nalloc * sizeof(link_t);
    for (uint32_t i = 0; i < b->nfilters; i++)
        m += b->links[i].bits / 8;
    return m;
}

/* ------------------------------------------------------------------------ */
/* Undo log                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct undo_entry {
    uint64_t byte;
    uint32_t filter;
    uint8_t old;
} undo_entry_t;

struct bloom_undo {
    uint32_t nfilters;
    uint64_t items, last_items;
    undo_entry_t *e;
    size_t n, cap;
};

bloom_undo_t *bloom_undo_begin(const bloom_t *b)
{
    bloom_undo_t *u = calloc(1, sizeof(*u));
    if (u) {
        u->nfilters = b->nfilters;
        u->items = b->items;
        u->last_items = b->links[b->nfilters - 1].items;
    }
    return u;
}

static bool undo_log(bloom_undo_t *u, uint32_t filter, uint64_t byte, uint8_t old)
{
    if (!u || filter >= u->nfilters)
        return true;   /* a sub-filter added in this batch is dropped whole */
    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 256;
        undo_entry_t *e = realloc(u->e, cap * sizeof(*e));
        if (!e)
            return false;
        u->e = e;
        u->cap = cap;
    }
    u->e[u->n++] = (undo_entry_t){ byte, filter, old };
    return true;
}

void bloom_undo_rollback(bloom_t *b, bloom_undo_t *u)
{
    if (!u)
        return;
    for (size_t i = u->n; i-- > 0;)
        b->links[u->e[i].filter].data[u->e[i].byte] = u->e[i].old;
    for (uint32_t i = u->nfilters; i < b->nfilters; i++) {
        free(b->links[i].data);
        b->links[i].data = NULL;
    }
    b->nfilters = u->nfilters;
    b->items = u->items;
    b->links[b->nfilters - 1].items = u->last_items;
    bloom_undo_commit(u);
}

void bloom_undo_commit(bloom_undo_t *u)
{
    if (!u)
        return;
    free(u->e);
    free(u);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

typedef struct hashval {
    uint64_t a, b;
} hashval_t;

static inline hashval_t item_hash(const void *item, size_t len)
{
    hashval_t h;
    h.a = murmur64a(item, len, BLOOM_SEED);
    h.b = murmur64a(item, len, h.a) | 1;
    return h;
}

static inline bool link_check(const link_t *l, hashval_t h)
{
    for (uint64_t i = 0; i < l->hashes; i++) {
        uint64_t x = (h.a + i * h.b) % l->bits;
        if (!(l->data[x >> 3] & (1u << (x & 7))))
            return false;
    }
    return true;
}

bool bloom_check(const bloom_t *b, const void *item, size_t len)
{
    hashval_t h = item_hash(item, len);
    for (uint32_t i = b->nfilters; i-- > 0;)
        if (link_check(&b->links[i], h))
            return true;
    return false;
}

int bloom_add(bloom_t *b, const void *item, size_t len, bloom_undo_t *undo)
{
    hashval_t h = item_hash(item, len);
    for (uint32_t i = b->nfilters; i-- > 0;)
        if (link_check(&b->links[i], h))
            return BLOOM_PRESENT;

    uint32_t ci = b->nfilters - 1;
    if (b->links[ci].items >= b->links[ci].entries) {
        if (!b->scaling || b->nfilters == BLOOM_MAX_FILTERS)
            return BLOOM_FULL;
        if (!links_reserve(b))
            return BLOOM_NOMEM;
        link_t *nl = &b->links[b->nfilters];
        if (!link_geometry(b->error, b->capacity, b->expansion, true, b->nfilters, nl))
            return BLOOM_FULL;
        if (!link_alloc(nl))
            return BLOOM_NOMEM;
        b->nfilters++;
        ci++;
    }
    link_t *l = &b->links[ci];
    for (uint64_t i = 0; i < l->hashes; i++) {
        uint64_t x = (h.a + i * h.b) % l->bits;
        uint8_t mask = (uint8_t)(1u << (x & 7)), old = l->data[x >> 3];
        if (!(old & mask)) {
            if (!undo_log(undo, ci, x >> 3, old))
                return BLOOM_NOMEM;
            l->data[x >> 3] = old | mask;
        }
    }
    l->items++;
    b->items++;
    return BLOOM_ADDED;
}

void bloom_get_info(const bloom_t *b, bloom_info_t *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < b->nfilters; i++) {
        out->capacity += b->links[i].entries;
        out->bits += b->links[i].bits;
    }
    out->size_bytes = bloom_memory(b);
    out->filters = b->nfilters;
    out->items = b->items;
    out->expansion = b->expansion;
    out->scaling = b->scaling;
    out->error_rate = b->error;
    out->hashes = b->links[b->nfilters - 1].hashes;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { bloom_free(v); }
static size_t type_size(const void *v) { return bloom_memory(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const bloom_t *b = v;
    wbuf_put_u8(out, BLOOM_ENC_VERSION);
    wbuf_put_u8(out, b->scaling ? BLOOM_FLAG_SCALING : 0);
    wbuf_put_u32(out, b->expansion);
    wbuf_put_f64(out, b->error);
    wbuf_put_u64(out, b->capacity);
    wbuf_put_u32(out, b->nfilters);
    for (uint32_t i = 0; i < b->nfilters; i++) {
        wbuf_put_u64(out, b->links[i].items);
        wbuf_put_bytes(out, b->links[i].data, b->links[i].bits / 8);
    }
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint8_t flags = rbuf_u8(&r);
    uint32_t expansion = rbuf_u32(&r);
    double error = rbuf_f64(&r);
    uint64_t capacity = rbuf_u64(&r);
    uint32_t nfilters = rbuf_u32(&r);
    const char *field;
    if (r.err) {
        *why = "bloom: truncated header";
        return NULL;
    }
    if (ver != BLOOM_ENC_VERSION || (flags & ~BLOOM_FLAG_SCALING)) {
        *why = "bloom: unknown encoding version or flags";
        return NULL;
    }
    if (bloom_validate(error, capacity, expansion, &field)) {
        *why = "bloom: invalid parameters";
        return NULL;
    }
    bool scaling = flags & BLOOM_FLAG_SCALING;
    if (nfilters < 1 || nfilters > BLOOM_MAX_FILTERS || (!scaling && nfilters != 1)) {
        *why = "bloom: invalid sub-filter count";
        return NULL;
    }
    bloom_t *b = calloc(1, sizeof(*b));
    if (!b) {
        *why = "out of memory";
        return NULL;
    }
    b->error = error;
    b->capacity = capacity;
    b->expansion = expansion;
    b->scaling = scaling;
    for (uint32_t i = 0; i < nfilters; i++) {
        if (!links_reserve(b)) {
            *why = "out of memory";
            goto fail;
        }
        link_t *l = &b->links[i];
        uint64_t items = rbuf_u64(&r);
        if (!link_geometry(error, capacity, expansion, scaling, i, l)) {
            *why = "bloom: sub-filter cannot exist";
            goto fail;
        }
        const uint8_t *data = rbuf_bytes(&r, l->bits / 8);
        /* earlier sub-filters are exactly full; the newest holds at most
         * its capacity */
        if (!data || (i + 1 < nfilters ? items != l->entries : items > l->entries)) {
            *why = r.err ? "bloom: truncated bit array" : "bloom: item count does not fit its sub-filter";
            goto fail;
        }
        l->data = malloc(l->bits / 8);
        if (!l->data) {
            *why = "out of memory";
            goto fail;
        }
        memcpy(l->data, data, l->bits / 8);
        l->items = items;
        b->items += items;
        b->nfilters = i + 1;
    }
    if (!rbuf_done(&r)) {
        *why = "bloom: trailing bytes";
        goto fail;
    }
    return b;
fail:
    bloom_free(b);
    return NULL;
}

const ks_type_t bloom_type = {
    .tag = TYPE_TAG_BLOOM,
    .name = "bloom",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
