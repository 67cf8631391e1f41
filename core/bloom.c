/* bloom.c - see bloom.h for the algorithm, the hashing and the formats. */
#include "core/bloom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/hash.h"

#define BLOOM_SEED64 0xc6a4a7935bd1e995ULL    /* RedisBloom's first 64-bit hash seed */
#define BLOOM_SEED32 0x9747b28cu              /* its first 32-bit hash seed (no FORCE64) */
#define BLOOM_LN2_SQUARED 0.480453013918201   /* ln(2)^2, RedisBloom's constant */
#define BLOOM_LN2_RB 0.693147180559945        /* ln(2) as RedisBloom writes it (hash count) */
#define BLOOM_LN2_GEN1 0.69314718055994530942 /* ln(2) as generation 1 wrote it */
#define BLOOM_TIGHTENING 0.5                  /* error ratio between links */
#define BLOOM_ENC_V1 1                        /* generation-1 keyspace encoding */
#define BLOOM_ENC_V2 2                        /* version byte + dump header + arrays */
#define BLOOM_V1_FLAG_SCALING 1               /* flags bit of the version-1 encoding */
#define BLOOM_RB_CHAIN_BYTES 32               /* sizeof(SBChain) in RedisBloom's Size */
#define BLOOM_RB_LINK_BYTES 64                /* sizeof(SBLink) in RedisBloom's Size */
#define BLOOM_MAX_BYTES (UINT64_C(1) << 60)   /* a link's bytes * 8 must fit in 64 bits */
#define BLOOM_MAX_BPE 1550.0                  /* above -ln(p)/ln2^2 of the smallest double p (1549.5): no error
                                                 rate gives more, and lookups stay bounded (<= 1075 hashes) */
#define BLOOM_KNOWN_OPTS (BLOOM_OPT_NOROUND | BLOOM_OPT_ENTS_IS_BITS | BLOOM_OPT_FORCE64 | \
                          BLOOM_OPT_NO_SCALING | BLOOM_OPT_TALLY_ODD_STEP)

typedef struct link {
    uint64_t entries;   /* capacity of this link */
    double error;
    double bpe;
    uint32_t hashes;
    uint8_t n2;         /* 0: probes mod bits; else mod 2^n2 */
    uint64_t bytes;     /* a multiple of 8 */
    uint64_t bits;      /* bytes * 8 */
    uint64_t items;     /* RedisBloom's link "size" */
    uint8_t *data;
} link_t;

struct bloom {
    uint64_t items;     /* sum of the links' items */
    uint32_t options;   /* BLOOM_OPT_* */
    uint32_t growth;    /* expansion */
    uint32_t nfilters;
    uint32_t nalloc;    /* slots in links */
    uint64_t bytes;     /* sum of the links' bytes */
    link_t *links;
};

/* Room for one more link in b->links. */
static bool links_reserve(bloom_t *b)
{
    if (b->nfilters < b->nalloc)
        return true;
    if (b->nalloc == UINT32_MAX)
        return false;
    uint32_t n = b->nalloc ? (b->nalloc > UINT32_MAX / 2 ? UINT32_MAX : b->nalloc * 2) : 2;
    link_t *l = realloc(b->links, (size_t)n * sizeof(*l));
    if (!l)
        return false;
    b->links = l;
    b->nalloc = n;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Geometry (RedisBloom's bloom_init)                                       */
/* ------------------------------------------------------------------------ */

static double bits_per_entry(double error)
{
    double bpe = -(log(error) / BLOOM_LN2_SQUARED);
    return bpe < 0 ? -bpe : bpe;
}

static double ln2_of(uint32_t options) { return options & BLOOM_OPT_TALLY_ODD_STEP ? BLOOM_LN2_GEN1 : BLOOM_LN2_RB; }

/* Fills a link for `entries` items at `error` under the chain's options,
 * data NULL.  False when RedisBloom would refuse (bad arguments, a power of
 * two past 2^63) or the array cannot be represented. */
static bool link_init(link_t *l, uint64_t entries, double error, uint32_t options)
{
    if (entries < 1 || !(error > 0) || !(error < 1))
        return false;
    memset(l, 0, sizeof(*l));
    l->error = error;
    l->entries = entries;
    l->bpe = bits_per_entry(error);
    uint64_t bits;
    double want = (double)entries * l->bpe;
    if (options & BLOOM_OPT_ENTS_IS_BITS) {
        if (entries > 63)
            return false;
        l->n2 = (uint8_t)entries;
        bits = UINT64_C(1) << l->n2;
        l->entries = (uint64_t)((double)bits / l->bpe);
    } else if (options & BLOOM_OPT_NOROUND) {
        if (!(want < 9.2e18))
            return false;
        bits = (uint64_t)want;
        if (bits == 0)
            bits = 1;
    } else {
        double bn2 = logb(want);
        if (!(bn2 <= 62))
            return false;
        l->n2 = bn2 < 0 ? 0 : (uint8_t)(bn2 + 1);
        bits = UINT64_C(1) << l->n2;
        /* the rounding up leaves room for more items */
        uint64_t bit_diff = (uint64_t)((double)bits - want);
        l->entries += (uint64_t)((double)bit_diff / l->bpe);
    }
    l->bytes = bits % 64 ? (bits / 64 + 1) * 8 : bits / 8;
    if (l->bytes > BLOOM_MAX_BYTES)
        return false;
    l->bits = l->bytes * 8;
    l->hashes = (uint32_t)ceil(ln2_of(options) * l->bpe);
    return true;
}

const char *bloom_validate(double error, uint64_t capacity, uint32_t expansion, bool scaling, const char **field)
{
    if (!(error > 0 && error < 1)) {
        *field = "error_rate";
        return "must be between 0 and 1 (exclusive)";
    }
    if (capacity < 1 || capacity > BLOOM_MAX_CAPACITY) {
        *field = "capacity";
        return "must be between 1 and 4294967294";
    }
    if (expansion > BLOOM_MAX_EXPANSION) {
        *field = "expansion";
        return "must be between 0 and 32768";
    }
    link_t l;
    double e = error > BLOOM_ERROR_CAP ? BLOOM_ERROR_CAP : error;
    if (scaling && expansion > 0)
        e *= BLOOM_TIGHTENING;
    if (!link_init(&l, capacity, e, BLOOM_OPT_NOROUND | BLOOM_OPT_FORCE64)) {
        *field = "capacity";
        return "needs a bit array too large to represent at this error rate";
    }
    return NULL;
}

uint64_t bloom_bytes_for(double error, uint64_t capacity, uint32_t expansion, bool scaling)
{
    link_t l;
    double e = error > BLOOM_ERROR_CAP ? BLOOM_ERROR_CAP : error;
    if (scaling && expansion > 0)
        e *= BLOOM_TIGHTENING;
    if (!link_init(&l, capacity, e, BLOOM_OPT_NOROUND | BLOOM_OPT_FORCE64))
        return 0;
    return sizeof(bloom_t) + 2 * sizeof(link_t) + l.bytes;   /* bloom_create_gen reserves two links */
}

/* Appends a zeroed link (room reserved by the caller); false on allocation
 * failure. */
static bool link_push(bloom_t *b, const link_t *geometry)
{
    link_t *l = &b->links[b->nfilters];
    *l = *geometry;
    l->data = calloc(l->bytes, 1);
    if (!l->data)
        return false;
    b->nfilters++;
    b->bytes += l->bytes;
    return true;
}

bloom_t *bloom_create_gen(unsigned gen, double error, uint64_t capacity, uint32_t expansion, bool scaling)
{
    bloom_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    if (expansion == 0)
        scaling = false;
    b->options = BLOOM_OPT_NOROUND | BLOOM_OPT_FORCE64 | (scaling ? 0 : BLOOM_OPT_NO_SCALING);
    if (gen == TALLY_GEN_1)
        b->options |= BLOOM_OPT_TALLY_ODD_STEP;   /* nor did generation 1 cap the error */
    else if (error > BLOOM_ERROR_CAP)
        error = BLOOM_ERROR_CAP;
    b->growth = expansion;
    link_t l;
    if (!links_reserve(b) || !link_init(&l, capacity, error * (scaling ? BLOOM_TIGHTENING : 1), b->options) ||
        !link_push(b, &l)) {
        free(b->links);
        free(b);
        return NULL;
    }
    return b;
}

bloom_t *bloom_create(double error, uint64_t capacity, uint32_t expansion, bool scaling)
{
    return bloom_create_gen(TALLY_GEN_CURRENT, error, capacity, expansion, scaling);
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

size_t bloom_memory(const bloom_t *b) { return sizeof(*b) + (size_t)b->nalloc * sizeof(link_t) + b->bytes; }

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
        return true;   /* a link added in this batch is dropped whole */
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
        b->bytes -= b->links[i].bytes;
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

static inline hashval_t item_hash(const bloom_t *b, const void *item, size_t len)
{
    hashval_t h;
    if (b->options & BLOOM_OPT_FORCE64) {
        h.a = murmur64a(item, len, BLOOM_SEED64);
        h.b = murmur64a(item, len, h.a);
    } else {
        h.a = murmur2(item, len, BLOOM_SEED32);
        h.b = murmur2(item, len, (uint32_t)h.a);
    }
    if (b->options & BLOOM_OPT_TALLY_ODD_STEP)
        h.b |= 1;
    return h;
}

static inline uint64_t link_mod(const link_t *l) { return l->n2 ? UINT64_C(1) << l->n2 : l->bits; }

static inline bool link_check(const link_t *l, hashval_t h)
{
    uint64_t mod = link_mod(l);
    for (uint64_t i = 0; i < l->hashes; i++) {
        uint64_t x = (h.a + i * h.b) % mod;
        if (!(l->data[x >> 3] & (1u << (x & 7))))
            return false;
    }
    return true;
}

/* Whether some link, newest first, has all of h's bits set. */
static bool chain_check(const bloom_t *b, hashval_t h)
{
    for (uint32_t i = b->nfilters; i-- > 0;)
        if (link_check(&b->links[i], h))
            return true;
    return false;
}

bool bloom_check(const bloom_t *b, const void *item, size_t len) { return chain_check(b, item_hash(b, item, len)); }

/* The link that follows the newest (RedisBloom's SBChain_AddLink), data
 * NULL; false when it cannot be built. */
static bool next_link(const bloom_t *b, link_t *l)
{
    const link_t *cur = &b->links[b->nfilters - 1];
    uint64_t entries;
    return !__builtin_mul_overflow(cur->entries, (uint64_t)b->growth, &entries) &&
           link_init(l, entries, cur->error * BLOOM_TIGHTENING, b->options);
}

/* What appending link l adds to bloom_memory: its array, and the links
 * array when it doubles. */
static uint64_t link_cost(const bloom_t *b, const link_t *l)
{
    uint64_t more = b->nfilters < b->nalloc ? 0 : (uint64_t)(b->nalloc ? b->nalloc : 2) * sizeof(link_t);
    return l->bytes + more;
}

uint64_t bloom_next_link_bytes(const bloom_t *b)
{
    link_t l;
    return next_link(b, &l) ? link_cost(b, &l) : 0;
}

uint64_t bloom_growth_bound(const bloom_t *b, uint64_t n)
{
    if (b->options & BLOOM_OPT_NO_SCALING)
        return 0;
    const link_t *last = &b->links[b->nfilters - 1];
    uint64_t left = last->entries > last->items ? last->entries - last->items : 0, bytes = 0;
    uint32_t nalloc = b->nalloc, nfilters = b->nfilters;
    link_t cur = *last;
    while (n > left) {
        n -= left;
        uint64_t entries;
        link_t l;
        if (__builtin_mul_overflow(cur.entries, (uint64_t)b->growth, &entries) ||
            !link_init(&l, entries, cur.error * BLOOM_TIGHTENING, b->options))
            return bytes;   /* the add stops there (BLOOM_LIMIT): nothing more to allocate */
        uint64_t more = nfilters < nalloc ? 0 : (uint64_t)(nalloc ? nalloc : 2) * sizeof(link_t);
        if (nfilters == nalloc)
            nalloc = nalloc ? nalloc * 2 : 2;
        nfilters++;
        if (__builtin_add_overflow(bytes, l.bytes + more, &bytes))
            return UINT64_MAX;
        cur = l;
        left = l.entries;
    }
    return bytes;
}

/* Appends the next link, if the filter then takes at most max_bytes. */
static int grow(bloom_t *b, uint64_t max_bytes)
{
    link_t l;
    if (!next_link(b, &l))
        return BLOOM_LIMIT;
    uint64_t cost = link_cost(b, &l), mem = bloom_memory(b);
    if (max_bytes && (cost > max_bytes || mem > max_bytes - cost))
        return BLOOM_BUDGET;
    if (!links_reserve(b) || !link_push(b, &l))
        return BLOOM_NOMEM;
    return BLOOM_ADDED;
}

int bloom_add(bloom_t *b, const void *item, size_t len, uint64_t max_bytes, bloom_undo_t *undo)
{
    hashval_t h = item_hash(b, item, len);
    if (chain_check(b, h))
        return BLOOM_PRESENT;

    if (b->links[b->nfilters - 1].items >= b->links[b->nfilters - 1].entries) {
        if (b->options & BLOOM_OPT_NO_SCALING)
            return BLOOM_FULL;
        int rc = grow(b, max_bytes);
        if (rc != BLOOM_ADDED)
            return rc;
    }
    uint32_t ci = b->nfilters - 1;
    link_t *l = &b->links[ci];
    uint64_t mod = link_mod(l);
    for (uint64_t i = 0; i < l->hashes; i++) {
        uint64_t x = (h.a + i * h.b) % mod;
        uint8_t mask = (uint8_t)(1u << (x & 7)), old = l->data[x >> 3];
        if (!(old & mask)) {
            if (!undo_log(undo, ci, x >> 3, old))
                return BLOOM_NOMEM;   /* bits set so far stay logged: the caller rolls back */
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
    out->size_bytes = BLOOM_RB_CHAIN_BYTES + (uint64_t)b->nfilters * BLOOM_RB_LINK_BYTES + b->bytes;
    out->filters = b->nfilters;
    out->items = b->items;
    out->expansion = b->growth;
    out->scaling = !(b->options & BLOOM_OPT_NO_SCALING);
    out->error_rate = b->links[0].error / (out->scaling ? BLOOM_TIGHTENING : 1);
    out->hashes = b->links[b->nfilters - 1].hashes;
}

bool bloom_get_link(const bloom_t *b, uint32_t i, bloom_link_info_t *out)
{
    if (i >= b->nfilters)
        return false;
    const link_t *l = &b->links[i];
    *out = (bloom_link_info_t){ l->bytes, l->bits, l->hashes, b->options & BLOOM_OPT_FORCE64 ? 64 : 32,
                                l->entries, l->items, l->error };
    return true;
}

/* ------------------------------------------------------------------------ */
/* Dump and load (BF.SCANDUMP / BF.LOADCHUNK), shared with the encoding     */
/* ------------------------------------------------------------------------ */

void bloom_dump_header(const bloom_t *b, wbuf_t *out)
{
    wbuf_put_u64(out, b->items);
    wbuf_put_u32(out, b->nfilters);
    wbuf_put_u32(out, b->options);
    wbuf_put_u32(out, b->growth);
    for (uint32_t i = 0; i < b->nfilters; i++) {
        const link_t *l = &b->links[i];
        wbuf_put_u64(out, l->bytes);
        wbuf_put_u64(out, l->bits);
        wbuf_put_u64(out, l->items);
        wbuf_put_f64(out, l->error);
        wbuf_put_f64(out, l->bpe);
        wbuf_put_u32(out, l->hashes);
        wbuf_put_u64(out, l->entries);
        wbuf_put_u8(out, l->n2);
    }
}

/* The link holding byte `pos` of the concatenated arrays, and the offset in
 * it; NULL past the end. */
static link_t *link_at(const bloom_t *b, uint64_t pos, uint64_t *offset)
{
    uint64_t seek = 0;
    for (uint32_t i = 0; i < b->nfilters; i++) {
        if (pos - seek < b->links[i].bytes) {
            *offset = pos - seek;
            return &b->links[i];
        }
        seek += b->links[i].bytes;
    }
    return NULL;
}

const uint8_t *bloom_dump_chunk(const bloom_t *b, int64_t *cursor, size_t max_len, size_t *len)
{
    uint64_t off;
    const link_t *l = *cursor >= 1 ? link_at(b, (uint64_t)*cursor - 1, &off) : NULL;
    *len = 0;
    if (!l) {
        *cursor = 0;
        return NULL;
    }
    uint64_t n = l->bytes - off < max_len ? l->bytes - off : max_len;
    *len = (size_t)n;
    *cursor += (int64_t)n;
    return l->data + off;
}

/* Parses and validates a dump header at the start of r (RedisBloom checks
 * less: here every field must be one its code could have produced, so that
 * lookups stay bounded and growth well-defined).  Returns a filter with its
 * links described but no arrays allocated, or NULL with *why set. */
static bloom_t *header_parse(rbuf_t *r, const char **why)
{
    uint64_t items = rbuf_u64(r);
    uint32_t nfilters = rbuf_u32(r), options = rbuf_u32(r), growth = rbuf_u32(r);
    if (r->err) {
        *why = "bloom: truncated header";
        return NULL;
    }
    if (nfilters == 0 || rbuf_left(r) / BLOOM_DUMP_LINK < nfilters) {
        *why = "bloom: header length does not match its number of filters";
        return NULL;
    }
    if (options & ~(uint32_t)BLOOM_KNOWN_OPTS) {
        *why = "bloom: unknown options";
        return NULL;
    }
    bloom_t *b = calloc(1, sizeof(*b));
    link_t *links = b ? calloc(nfilters, sizeof(*links)) : NULL;
    if (!links) {
        free(b);
        *why = "out of memory";
        return NULL;
    }
    b->links = links;
    b->nalloc = nfilters;
    b->options = options;
    b->growth = growth;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < nfilters; i++) {
        link_t *l = &links[i];
        l->bytes = rbuf_u64(r);
        l->bits = rbuf_u64(r);
        l->items = rbuf_u64(r);
        l->error = rbuf_f64(r);
        l->bpe = rbuf_f64(r);
        l->hashes = rbuf_u32(r);
        l->entries = rbuf_u64(r);
        l->n2 = rbuf_u8(r);
        /* RedisBloom's bloom_validate_integrity: the error in (0, 1) and the
         * hash count its ceil(ln2 * bits per entry); the bits per entry are
         * not tied to the error (a filter loaded from such a header dumps
         * it again), only bounded */
        if (!(l->error > 0 && l->error < 1) || !(l->bpe > 0 && l->bpe <= BLOOM_MAX_BPE) ||
            l->hashes != (uint32_t)ceil(ln2_of(options) * l->bpe)) {
            *why = "bloom: a filter's error rate, bits per entry and hash count disagree";
            goto fail;
        }
        if (l->bytes == 0 || l->bytes % 8 || l->bytes > BLOOM_MAX_BYTES || l->bits != l->bytes * 8 ||
            l->n2 > 63 || (l->n2 && (UINT64_C(1) << l->n2) > l->bits)) {
            *why = "bloom: a filter's bit array size is inconsistent";
            goto fail;
        }
        if (__builtin_add_overflow(sum, l->items, &sum) || __builtin_add_overflow(b->bytes, l->bytes, &b->bytes)) {
            *why = "bloom: sizes overflow";
            goto fail;
        }
    }
    if (sum != items) {
        *why = "bloom: item count does not match its filters";
        goto fail;
    }
    b->items = items;
    b->nfilters = nfilters;   /* arrays still NULL */
    return b;
fail:
    free(links);
    free(b);
    return NULL;
}

/* Allocates zeroed arrays for every link of a parsed header. */
static bool arrays_alloc(bloom_t *b)
{
    for (uint32_t i = 0; i < b->nfilters; i++) {
        b->links[i].data = calloc(b->links[i].bytes, 1);
        if (!b->links[i].data)
            return false;
    }
    return true;
}

uint64_t bloom_load_header_bytes(const uint8_t *p, size_t len)
{
    rbuf_t r = rbuf_make(p, len);
    const char *why;
    bloom_t *b = header_parse(&r, &why);
    uint64_t bytes = b && rbuf_done(&r) ? bloom_memory(b) : 0;
    bloom_free(b);
    return bytes;
}

bloom_t *bloom_load_header(const uint8_t *p, size_t len, uint64_t max_bytes, bool *nomem, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    *nomem = false;
    bloom_t *b = header_parse(&r, why);
    if (!b)
        return NULL;
    if (!rbuf_done(&r)) {
        *why = "bloom: header length does not match its number of filters";
        bloom_free(b);
        return NULL;
    }
    if (max_bytes && bloom_memory(b) > max_bytes) {
        *why = "bloom: the filter is larger than the limit on a value's size";
        bloom_free(b);
        return NULL;
    }
    if (!arrays_alloc(b)) {
        *nomem = true;
        *why = "out of memory";
        bloom_free(b);
        return NULL;
    }
    return b;
}

bool bloom_load_chunk(bloom_t *b, int64_t cursor, const uint8_t *p, size_t len, const char **why)
{
    if (cursor <= 0 || (uint64_t)cursor < len) {
        *why = "received bad data";
        return false;
    }
    uint64_t start = (uint64_t)cursor - len, off;
    link_t *l = start >= 1 ? link_at(b, start - 1, &off) : NULL;
    if (!l) {
        *why = "invalid offset - no link found";
        return false;
    }
    if (len > l->bytes - off) {
        *why = "invalid chunk - Too big for current filter";
        return false;
    }
    memcpy(l->data + off, p, len);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { bloom_free(v); }
static size_t type_size(const void *v) { return bloom_memory(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const bloom_t *b = v;
    wbuf_put_u8(out, BLOOM_ENC_V2);
    bloom_dump_header(b, out);
    if (!wbuf_reserve(out, b->bytes))
        return;
    for (uint32_t i = 0; i < b->nfilters; i++)
        wbuf_put_bytes(out, b->links[i].data, b->links[i].bytes);
}

static void *decode_v2(rbuf_t *r, const char **why)
{
    bloom_t *b = header_parse(r, why);
    if (!b)
        return NULL;
    if (rbuf_left(r) != b->bytes) {   /* checked before allocating what the header claims */
        *why = "bloom: bit arrays do not match the header";
        bloom_free(b);
        return NULL;
    }
    for (uint32_t i = 0; i < b->nfilters; i++) {
        link_t *l = &b->links[i];
        const uint8_t *d = rbuf_bytes(r, l->bytes);
        l->data = d ? malloc(l->bytes) : NULL;
        if (!l->data) {
            *why = "out of memory";
            bloom_free(b);
            return NULL;
        }
        memcpy(l->data, d, l->bytes);
    }
    return b;
}

/* Generation 1: the geometry follows from (error, capacity, expansion), each
 * link computed afresh with generation 1's ln 2. */
static void *decode_v1(rbuf_t *r, const char **why)
{
    uint8_t flags = rbuf_u8(r);
    uint32_t expansion = rbuf_u32(r);
    double error = rbuf_f64(r);
    uint64_t capacity = rbuf_u64(r);
    uint32_t nfilters = rbuf_u32(r);
    const char *field;
    if (r->err) {
        *why = "bloom: truncated header";
        return NULL;
    }
    bool scaling = flags & BLOOM_V1_FLAG_SCALING;
    if ((flags & ~BLOOM_V1_FLAG_SCALING) || expansion == 0 ||
        bloom_validate(error, capacity, expansion, scaling, &field)) {
        *why = "bloom: invalid parameters";
        return NULL;
    }
    if (nfilters < 1 || (!scaling && nfilters != 1) || rbuf_left(r) / 9 < nfilters) {
        *why = "bloom: invalid sub-filter count";
        return NULL;
    }
    /* the first bit array must be in the input before it is allocated: a
     * few bytes of header may not claim gigabytes (untrusted: a restore) */
    link_t first;
    unsigned opts = BLOOM_OPT_NOROUND | BLOOM_OPT_FORCE64 | BLOOM_OPT_TALLY_ODD_STEP |
                    (scaling ? 0 : BLOOM_OPT_NO_SCALING);
    if (!link_init(&first, capacity, error * (scaling ? BLOOM_TIGHTENING : 1), opts) ||
        rbuf_left(r) < first.bytes + 8) {
        *why = "bloom: truncated bit array";
        return NULL;
    }
    bloom_t *b = bloom_create_gen(TALLY_GEN_1, error, capacity, expansion, scaling);
    if (!b) {
        *why = "out of memory";
        return NULL;
    }
    for (uint32_t i = 0; i < nfilters; i++) {
        if (i > 0) {
            const link_t *cur = &b->links[i - 1];
            uint64_t entries;
            link_t l;
            if (__builtin_mul_overflow(cur->entries, (uint64_t)expansion, &entries) ||
                !link_init(&l, entries, cur->error * BLOOM_TIGHTENING, b->options) ||
                rbuf_left(r) < l.bytes + 8) {
                *why = "bloom: truncated or impossible sub-filter";
                goto fail;
            }
            if (!links_reserve(b) || !link_push(b, &l)) {
                *why = "out of memory";
                goto fail;
            }
        }
        link_t *l = &b->links[i];
        uint64_t items = rbuf_u64(r);
        const uint8_t *data = rbuf_bytes(r, l->bytes);
        /* earlier sub-filters are exactly full; the newest holds at most
         * its capacity */
        if (!data || (i + 1 < nfilters ? items != l->entries : items > l->entries)) {
            *why = r->err ? "bloom: truncated bit array" : "bloom: item count does not fit its sub-filter";
            goto fail;
        }
        memcpy(l->data, data, l->bytes);
        l->items = items;
        b->items += items;
    }
    return b;
fail:
    bloom_free(b);
    return NULL;
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    bloom_t *b = ver == BLOOM_ENC_V2 ? decode_v2(&r, why) : ver == BLOOM_ENC_V1 ? decode_v1(&r, why) : NULL;
    if (!b) {
        if (ver != BLOOM_ENC_V1 && ver != BLOOM_ENC_V2)
            *why = "bloom: unknown encoding version";
        return NULL;
    }
    if (!rbuf_done(&r)) {
        *why = "bloom: trailing bytes";
        bloom_free(b);
        return NULL;
    }
    return b;
}

const ks_type_t bloom_type = {
    .tag = TYPE_TAG_BLOOM,
    .name = "bloom",
    .noun = "a Bloom filter",
    .missing = "no bloom filter at this key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};

static bool dump_header(const void *v, wbuf_t *out)
{
    bloom_dump_header(v, out);
    return true;
}
static const uint8_t *dump_chunk(const void *v, int64_t *cursor, size_t max_len, size_t *len)
{
    return bloom_dump_chunk(v, cursor, max_len, len);
}
static void *load_header(const uint8_t *p, size_t len, uint64_t max_bytes, bool *nomem, const char **why)
{
    return bloom_load_header(p, len, max_bytes, nomem, why);
}
static bool load_chunk(void *v, int64_t cursor, const uint8_t *p, size_t len, const char **why)
{
    return bloom_load_chunk(v, cursor, p, len, why);
}
static uint64_t header_bytes(const uint8_t *p, size_t len) { return bloom_load_header_bytes(p, len); }

const ks_dump_ops_t bloom_dump_ops = { &bloom_type, dump_header, dump_chunk, load_header, load_chunk, header_bytes };
