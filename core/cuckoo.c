/* cuckoo.c - see cuckoo.h for the algorithm, the hashing and the encoding. */
#include "core/cuckoo.h"

#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/hash.h"
#include "core/rng.h"

#define CUCKOO_HASH_SEED 0                /* MurmurHash64A seed for items */
#define CUCKOO_ALT_MULT 0x5bd1e995ULL     /* RedisBloom's alternate-bucket multiplier */
#define CUCKOO_ENC_V1 1                   /* keyspace encoding of a generation-1 filter */
#define CUCKOO_ENC_V2 2                   /* the same layout, generation-2 rules */
#define CUCKOO_RB_FILTER_BYTES 40         /* sizeof(CuckooFilter) in RedisBloom's Size */
#define CUCKOO_RB_SUBF_BYTES 16           /* sizeof(SubCF) in RedisBloom's Size */
#define CUCKOO_COMPACT_RATIO 0.10         /* RedisBloom compacts once deletes pass 10% of items */

typedef struct subf {
    uint64_t buckets;   /* a power of two */
    uint8_t *data;      /* buckets * bucket_size slots of fp_bits */
} subf_t;

struct cuckoo {
    unsigned gen;       /* TALLY_GEN_*: whose rules it follows (cuckoo.h) */
    cuckoo_params_t p;  /* expansion already rounded to a power of two (or 0) */
    uint64_t buckets0;  /* buckets of the first sub-filter */
    uint64_t items, deletes;
    rng_t rng;
    uint32_t nfilters;
    size_t mem;
    subf_t f[CUCKOO_MAX_FILTERS];
};

/* ------------------------------------------------------------------------ */
/* Geometry and slots                                                       */
/* ------------------------------------------------------------------------ */

/* The least power of two >= x; UINT64_MAX (more than any limit it is
 * compared with) when that is 2^64: a decoded header's capacity can ask. */
static uint64_t next_pow2(uint64_t x)
{
    if (x <= 1)
        return 1;
    if (x > (1ULL << 63))
        return UINT64_MAX;
    return 1ULL << (64 - __builtin_clzll(x - 1));
}

static uint32_t round_expansion(uint32_t e) { return e == 0 ? 0 : (uint32_t)next_pow2(e); }

static uint64_t slot_bytes(uint64_t slots, uint32_t fp_bits)
{
    return (slots * fp_bits + 7) / 8;
}

/* Buckets of sub-filter i, or 0 if it cannot exist (more than
 * CUCKOO_MAX_BUCKETS). */
static uint64_t subf_buckets(const cuckoo_params_t *p, uint64_t buckets0, uint32_t i)
{
    uint64_t n = buckets0;
    for (uint32_t k = 0; k < i; k++)
        if (__builtin_mul_overflow(n, (uint64_t)p->expansion, &n))
            return 0;
    return n == 0 || n > CUCKOO_MAX_BUCKETS ? 0 : n;
}

/* Whether the filter may grow by one more sub-filter here. */
static bool can_grow(const cuckoo_t *c);

/* The checks of cuckoo_validate but the capacity's. */
static const char *params_check(const cuckoo_params_t *p, const char **field);

/* Whether a filter's own capacity is possible: what cuckoo_validate takes,
 * or what a RedisBloom header gives (its first sub-filter's slots, buckets
 * up to CUCKOO_MAX_BUCKETS). */
static bool capacity_possible(const cuckoo_params_t *p)
{
    return p->capacity >= 2ULL * p->bucket_size && next_pow2(p->capacity / p->bucket_size) <= CUCKOO_MAX_BUCKETS;
}

const char *cuckoo_validate(const cuckoo_params_t *p, uint64_t max_bytes, const char **field)
{
    const char *why = params_check(p, field);
    if (why)
        return why;
    if (p->capacity < 2ULL * p->bucket_size || p->capacity > CUCKOO_MAX_CAPACITY) {
        *field = "capacity";
        return "must be at least 2 * bucket_size and at most 4294967296";
    }
    uint64_t buckets = next_pow2(p->capacity / p->bucket_size);   /* <= 2^32: capacity is */
    if (max_bytes && slot_bytes(buckets * p->bucket_size, p->fp_bits) > max_bytes) {
        *field = "capacity";
        return "needs a sub-filter larger than the memory limit";
    }
    return NULL;
}

static const char *params_check(const cuckoo_params_t *p, const char **field)
{
    if (p->bucket_size < 1 || p->bucket_size > CUCKOO_MAX_BUCKET_SIZE) {
        *field = "bucket_size";
        return "must be between 1 and 255";
    }
    if (p->max_iterations < 1 || p->max_iterations > CUCKOO_MAX_ITERATIONS) {
        *field = "max_iterations";
        return "must be between 1 and 65535";
    }
    if (p->expansion > CUCKOO_MAX_EXPANSION) {
        *field = "expansion";
        return "must be between 0 and 32768";
    }
    if (p->fp_bits != 8 && p->fp_bits != 12 && p->fp_bits != 16) {
        *field = "fingerprint_bits";
        return "must be 8, 12 or 16";
    }
    return NULL;
}

static inline uint32_t slot_get(const uint8_t *d, uint32_t bits, uint64_t s)
{
    switch (bits) {
    case 8:
        return d[s];
    case 16:
        return (uint32_t)d[2 * s] | (uint32_t)d[2 * s + 1] << 8;
    default: {
        uint64_t o = s + s / 2;
        if (s & 1)
            return (uint32_t)(d[o] >> 4) | (uint32_t)d[o + 1] << 4;
        return (uint32_t)d[o] | (uint32_t)(d[o + 1] & 0x0f) << 8;
    }
    }
}

static inline void slot_put(uint8_t *d, uint32_t bits, uint64_t s, uint32_t v)
{
    switch (bits) {
    case 8:
        d[s] = (uint8_t)v;
        break;
    case 16:
        d[2 * s] = (uint8_t)v;
        d[2 * s + 1] = (uint8_t)(v >> 8);
        break;
    default: {
        uint64_t o = s + s / 2;
        if (s & 1) {
            d[o] = (uint8_t)((d[o] & 0x0f) | (v & 0x0f) << 4);
            d[o + 1] = (uint8_t)(v >> 4);
        } else {
            d[o] = (uint8_t)v;
            d[o + 1] = (uint8_t)((d[o + 1] & 0xf0) | (v >> 8));
        }
    }
    }
}

typedef struct lookup {
    uint64_t h;
    uint32_t fp;
} lookup_t;

static inline lookup_t lookup_of(const cuckoo_t *c, const void *item, size_t len)
{
    lookup_t l;
    l.h = murmur64a(item, len, CUCKOO_HASH_SEED);
    uint64_t from = c->gen == TALLY_GEN_1 ? l.h >> 32 : l.h;
    l.fp = (uint32_t)(from % ((1u << c->p.fp_bits) - 1)) + 1;
    return l;
}

static inline uint64_t alt_index(uint64_t i, uint32_t fp, uint64_t buckets)
{
    return (i ^ ((uint64_t)fp * CUCKOO_ALT_MULT)) & (buckets - 1);
}

/* ------------------------------------------------------------------------ */
/* Create / free                                                            */
/* ------------------------------------------------------------------------ */

/* Allocates the next sub-filter; growing (an add found no room), one of at
 * most CUCKOO_MAX_GROW_BYTES.  False when it cannot exist or be allocated. */
static bool subf_add(cuckoo_t *c, bool growing)
{
    if (c->nfilters == CUCKOO_MAX_FILTERS || (growing && !can_grow(c)))
        return false;
    uint64_t n = subf_buckets(&c->p, c->buckets0, c->nfilters);
    if (!n)
        return false;
    uint64_t bytes = slot_bytes(n * c->p.bucket_size, c->p.fp_bits);
    uint8_t *d = calloc(bytes, 1);
    if (!d)
        return false;
    c->f[c->nfilters].buckets = n;
    c->f[c->nfilters].data = d;
    c->nfilters++;
    c->mem += bytes;
    return true;
}

static bool can_grow(const cuckoo_t *c)
{
    uint64_t n = c->nfilters < CUCKOO_MAX_FILTERS ? subf_buckets(&c->p, c->buckets0, c->nfilters) : 0;
    return n && slot_bytes(n * c->p.bucket_size, c->p.fp_bits) <= CUCKOO_MAX_GROW_BYTES;
}

static void subf_drop_last(cuckoo_t *c)
{
    subf_t *s = &c->f[--c->nfilters];
    c->mem -= slot_bytes(s->buckets * c->p.bucket_size, c->p.fp_bits);
    free(s->data);
    s->data = NULL;
    s->buckets = 0;
}

static cuckoo_t *alloc_shell(const cuckoo_params_t *p)
{
    cuckoo_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->p = *p;
    c->p.expansion = round_expansion(p->expansion);
    c->buckets0 = next_pow2(p->capacity / p->bucket_size);
    c->mem = sizeof(*c);
    return c;
}

cuckoo_t *cuckoo_create_gen(unsigned gen, const cuckoo_params_t *p, uint64_t seed)
{
    cuckoo_t *c = alloc_shell(p);
    if (!c)
        return NULL;
    c->gen = gen == TALLY_GEN_1 ? TALLY_GEN_1 : TALLY_GEN_2;
    if (c->gen == TALLY_GEN_1)   /* generation 2 draws nothing: its state stays zero */
        rng_seed(&c->rng, seed);
    if (!subf_add(c, false)) {
        free(c);
        return NULL;
    }
    return c;
}

cuckoo_t *cuckoo_create(const cuckoo_params_t *p, uint64_t seed)
{
    return cuckoo_create_gen(TALLY_GEN_CURRENT, p, seed);
}

void cuckoo_free(cuckoo_t *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->nfilters; i++)
        free(c->f[i].data);
    free(c);
}

size_t cuckoo_memory(const cuckoo_t *c) { return c->mem; }

/* ------------------------------------------------------------------------ */
/* Undo log                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct undo_entry {
    uint64_t slot;
    uint32_t filter;
    uint32_t old;
} undo_entry_t;

struct cuckoo_undo {
    uint32_t nfilters;
    uint64_t items, deletes;
    rng_t rng;
    undo_entry_t *e;
    size_t n, cap;
    uint32_t ndropped;  /* sub-filters a compaction freed, newest first: kept until commit */
    subf_t dropped[CUCKOO_MAX_FILTERS];
};

static void undo_init(cuckoo_undo_t *u, const cuckoo_t *c)
{
    memset(u, 0, sizeof(*u));
    u->nfilters = c->nfilters;
    u->items = c->items;
    u->deletes = c->deletes;
    u->rng = c->rng;
}

cuckoo_undo_t *cuckoo_undo_begin(const cuckoo_t *c)
{
    cuckoo_undo_t *u = malloc(sizeof(*u));
    if (u)
        undo_init(u, c);
    return u;
}

/* Writes slot s of sub-filter fi, logging its old value first (u may be
 * NULL: no log). */
static bool put_logged(cuckoo_t *c, cuckoo_undo_t *u, uint32_t fi, uint64_t s, uint32_t v)
{
    uint8_t *d = c->f[fi].data;
    if (!u) {
        slot_put(d, c->p.fp_bits, s, v);
        return true;
    }
    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 64;
        undo_entry_t *e = realloc(u->e, cap * sizeof(*e));
        if (!e)
            return false;
        u->e = e;
        u->cap = cap;
    }
    u->e[u->n++] = (undo_entry_t){ s, fi, slot_get(d, c->p.fp_bits, s) };
    slot_put(d, c->p.fp_bits, s, v);
    return true;
}

/* Undoes slot writes back to position `mark` (sub-filters added since are
 * dropped by the caller). */
static void undo_to(cuckoo_t *c, cuckoo_undo_t *u, size_t mark)
{
    while (u->n > mark) {
        undo_entry_t *e = &u->e[--u->n];
        if (e->filter < c->nfilters)
            slot_put(c->f[e->filter].data, c->p.fp_bits, e->slot, e->old);
    }
}

void cuckoo_undo_rollback(cuckoo_t *c, cuckoo_undo_t *u)
{
    if (!u)
        return;
    while (u->ndropped > 0) {   /* sub-filters a compaction emptied come back first */
        c->f[c->nfilters] = u->dropped[--u->ndropped];
        c->mem += slot_bytes(c->f[c->nfilters].buckets * c->p.bucket_size, c->p.fp_bits);
        c->nfilters++;
    }
    undo_to(c, u, 0);
    while (c->nfilters > u->nfilters)
        subf_drop_last(c);
    c->items = u->items;
    c->deletes = u->deletes;
    c->rng = u->rng;
    cuckoo_undo_commit(u);
}

void cuckoo_undo_commit(cuckoo_undo_t *u)
{
    if (!u)
        return;
    for (uint32_t i = 0; i < u->ndropped; i++)
        free(u->dropped[i].data);
    free(u->e);
    free(u);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

/* Whether bucket i of sub-filter fi holds fp; its first slot holding it goes
 * to *slot (slot may be NULL). */
static bool bucket_has(const cuckoo_t *c, uint32_t fi, uint64_t i, uint32_t fp, uint64_t *slot)
{
    const uint8_t *d = c->f[fi].data;
    uint64_t s0 = i * c->p.bucket_size;
    for (uint64_t s = s0; s < s0 + c->p.bucket_size; s++)
        if (slot_get(d, c->p.fp_bits, s) == fp) {
            if (slot)
                *slot = s;
            return true;
        }
    return false;
}

/* First free slot of bucket i in sub-filter fi, or -1 (an empty slot holds
 * fingerprint 0, which no item has). */
static int64_t free_slot(const cuckoo_t *c, uint32_t fi, uint64_t i)
{
    uint64_t s;
    return bucket_has(c, fi, i, 0, &s) ? (int64_t)s : -1;
}

static bool lookup_check(const cuckoo_t *c, lookup_t l)
{
    for (uint32_t fi = c->nfilters; fi-- > 0;) {
        uint64_t n = c->f[fi].buckets, i1 = l.h & (n - 1), i2 = alt_index(i1, l.fp, n);
        if (bucket_has(c, fi, i1, l.fp, NULL) || bucket_has(c, fi, i2, l.fp, NULL))
            return true;
    }
    return false;
}

bool cuckoo_check(const cuckoo_t *c, const void *item, size_t len)
{
    return lookup_check(c, lookup_of(c, item, len));
}

static uint64_t bucket_count(const cuckoo_t *c, uint32_t fi, uint64_t i, uint32_t fp)
{
    const uint8_t *d = c->f[fi].data;
    uint64_t s0 = i * c->p.bucket_size, n = 0;
    for (uint64_t s = s0; s < s0 + c->p.bucket_size; s++)
        n += slot_get(d, c->p.fp_bits, s) == fp;
    return n;
}

uint64_t cuckoo_count(const cuckoo_t *c, const void *item, size_t len)
{
    lookup_t l = lookup_of(c, item, len);
    uint64_t total = 0;
    for (uint32_t fi = 0; fi < c->nfilters; fi++) {
        uint64_t n = c->f[fi].buckets, i1 = l.h & (n - 1), i2 = alt_index(i1, l.fp, n);
        total += bucket_count(c, fi, i1, l.fp);
        if (i2 != i1)
            total += bucket_count(c, fi, i2, l.fp);
    }
    return total;
}

/* Places fp in a free slot of either bucket of any sub-filter, newest
 * first; then tries evictions in the newest.  Returns ADDED, FULL (nothing
 * changed) or NOMEM. */
static int insert_fp(cuckoo_t *c, lookup_t l, cuckoo_undo_t *u)
{
    for (uint32_t fi = c->nfilters; fi-- > 0;) {
        uint64_t n = c->f[fi].buckets, i1 = l.h & (n - 1), i2 = alt_index(i1, l.fp, n);
        int64_t s = free_slot(c, fi, i1);
        if (s < 0)
            s = free_slot(c, fi, i2);
        if (s >= 0)
            return put_logged(c, u, fi, (uint64_t)s, l.fp) ? CUCKOO_ADDED : CUCKOO_NOMEM;
    }
    /* Evict along a chain in the newest sub-filter: kick a resident of the
     * current bucket to its other bucket.  Generation 2 (RedisBloom's
     * Filter_KOInsert) starts at the first bucket and takes slot 0, 1, ...
     * in turn; generation 1 chose the bucket and the slots at random. */
    uint32_t fi = c->nfilters - 1;
    uint64_t n = c->f[fi].buckets;
    size_t mark = u->n;
    rng_t saved = c->rng;
    uint32_t fp = l.fp;
    uint64_t i = l.h & (n - 1);
    bool random = c->gen == TALLY_GEN_1;
    if (random && (rng_next(&c->rng) & 1))
        i = alt_index(i, fp, n);
    for (uint32_t it = 0; it < c->p.max_iterations; it++) {
        uint64_t victim = i * c->p.bucket_size +
                          (random ? rng_below(&c->rng, c->p.bucket_size) : it % c->p.bucket_size);
        uint32_t out = slot_get(c->f[fi].data, c->p.fp_bits, victim);
        if (!put_logged(c, u, fi, victim, fp)) {
            undo_to(c, u, mark);
            c->rng = saved;
            return CUCKOO_NOMEM;
        }
        fp = out;
        i = alt_index(i, fp, n);
        int64_t s = free_slot(c, fi, i);
        if (s >= 0) {
            if (!put_logged(c, u, fi, (uint64_t)s, fp)) {
                undo_to(c, u, mark);
                c->rng = saved;
                return CUCKOO_NOMEM;
            }
            return CUCKOO_ADDED;
        }
    }
    /* No luck: put every evicted fingerprint back where it was. */
    undo_to(c, u, mark);
    c->rng = saved;
    return CUCKOO_FULL;
}

uint64_t cuckoo_bytes_for(const cuckoo_params_t *p)
{
    cuckoo_params_t q = *p;
    q.expansion = round_expansion(p->expansion);
    uint64_t n = subf_buckets(&q, next_pow2(p->capacity / p->bucket_size), 0);
    return n ? sizeof(cuckoo_t) + slot_bytes(n * q.bucket_size, q.fp_bits) : 0;
}

uint64_t cuckoo_next_filter_bytes(const cuckoo_t *c)
{
    if (c->nfilters >= CUCKOO_MAX_FILTERS || c->p.expansion == 0 || !can_grow(c))
        return 0;
    uint64_t n = subf_buckets(&c->p, c->buckets0, c->nfilters);
    return n ? slot_bytes(n * c->p.bucket_size, c->p.fp_bits) : 0;
}

uint64_t cuckoo_growth_estimate(const cuckoo_t *c, uint64_t slots)
{
    uint64_t bytes = 0, got = 0;
    for (uint32_t i = c->nfilters; i < CUCKOO_MAX_FILTERS && c->p.expansion && (i == c->nfilters || got < slots);
         i++) {
        uint64_t n = subf_buckets(&c->p, c->buckets0, i);
        if (!n || slot_bytes(n * c->p.bucket_size, c->p.fp_bits) > CUCKOO_MAX_GROW_BYTES)
            break;   /* growth stops there (can_grow) */
        bytes += slot_bytes(n * c->p.bucket_size, c->p.fp_bits);
        got += n * c->p.bucket_size;
    }
    return bytes;
}

int cuckoo_add(cuckoo_t *c, const void *item, size_t len, bool nx, cuckoo_undo_t *undo)
{
    return cuckoo_add_within(c, item, len, nx, 0, undo);
}

int cuckoo_add_within(cuckoo_t *c, const void *item, size_t len, bool nx, uint64_t max_bytes, cuckoo_undo_t *undo)
{
    if (c->gen != TALLY_GEN_1 && c->nfilters >= CUCKOO_MAX_FILTERS)
        return CUCKOO_MAXEXP;
    lookup_t l = lookup_of(c, item, len);
    if (nx && lookup_check(c, l))
        return CUCKOO_EXISTS;
    cuckoo_undo_t local;
    cuckoo_undo_t *u = undo;
    if (!u) {
        undo_init(&local, c);
        u = &local;
    }
    int rc = insert_fp(c, l, u);
    uint64_t next = rc == CUCKOO_FULL && max_bytes ? cuckoo_next_filter_bytes(c) : 0;
    if (next && (next > max_bytes || c->mem > max_bytes - next)) {
        rc = CUCKOO_BUDGET;   /* the caller makes room, or refuses the size, and tries again */
    } else if (rc == CUCKOO_FULL && c->p.expansion > 0) {
        if (!subf_add(c, true))
            rc = !can_grow(c) ? CUCKOO_FULL
                                                                                                    : CUCKOO_NOMEM;
        else
            rc = insert_fp(c, l, u);   /* the new sub-filter has room */
    }
    if (rc == CUCKOO_ADDED)
        c->items++;
    if (!undo)
        free(local.e);
    return rc;
}

/* Moves the fingerprint in slot `slot` (bucket b) of sub-filter fi to a
 * free slot of one of its buckets in an older sub-filter (RedisBloom's
 * relocateSlot): 1 moved or empty, 0 no room, -1 out of memory. */
static int relocate(cuckoo_t *c, uint32_t fi, uint64_t b, uint64_t slot, cuckoo_undo_t *u)
{
    uint32_t fp = slot_get(c->f[fi].data, c->p.fp_bits, slot);
    if (fp == 0)
        return 1;
    /* an older sub-filter has as many buckets or a power of two fewer: the
     * bucket index masked to its size is one of the item's buckets there */
    for (uint32_t old = 0; old < fi; old++) {
        uint64_t n = c->f[old].buckets, i1 = b & (n - 1), i2 = alt_index(i1, fp, n);
        int64_t s = free_slot(c, old, i1);
        if (s < 0)
            s = free_slot(c, old, i2);
        if (s >= 0)
            return put_logged(c, u, old, (uint64_t)s, fp) && put_logged(c, u, fi, slot, 0) ? 1 : -1;
    }
    return 0;
}

/* RedisBloom's CuckooFilter_Compact: from the newest sub-filter down to the
 * second, moves every fingerprint that finds room into an older one; a
 * newest sub-filter left empty is freed.  Unless `cont`, stops at the first
 * sub-filter that cannot be emptied.  Resets the delete count.  False when
 * the undo log ran out of memory (the caller rolls back). */
static bool compact(cuckoo_t *c, bool cont, cuckoo_undo_t *u)
{
    for (uint32_t fi = c->nfilters; fi-- > 1;) {
        bool emptied = true;
        for (uint64_t b = 0; b < c->f[fi].buckets; b++)
            for (uint64_t s = b * c->p.bucket_size; s < (b + 1) * c->p.bucket_size; s++) {
                int rc = relocate(c, fi, b, s, u);
                if (rc < 0)
                    return false;
                emptied &= rc == 1;
            }
        if (emptied && fi == c->nfilters - 1) {
            if (u) {
                u->dropped[u->ndropped++] = c->f[fi];
                c->mem -= slot_bytes(c->f[fi].buckets * c->p.bucket_size, c->p.fp_bits);
                c->f[--c->nfilters] = (subf_t){ 0, NULL };
            } else {
                subf_drop_last(c);
            }
        } else if (!emptied && !cont) {
            break;
        }
    }
    c->deletes = 0;
    return true;
}

void cuckoo_compact(cuckoo_t *c)
{
    compact(c, true, NULL);
}

bool cuckoo_delete(cuckoo_t *c, const void *item, size_t len, cuckoo_undo_t *undo)
{
    lookup_t l = lookup_of(c, item, len);
    for (uint32_t fi = c->nfilters; fi-- > 0;) {
        uint64_t n = c->f[fi].buckets, i1 = l.h & (n - 1), i2 = alt_index(i1, l.fp, n), s;
        if (bucket_has(c, fi, i1, l.fp, &s) || bucket_has(c, fi, i2, l.fp, &s)) {
            if (!put_logged(c, undo, fi, s, 0))
                return false;
            c->items--;
            c->deletes++;
            if (c->gen != TALLY_GEN_1 && c->nfilters > 1 &&
                (double)c->deletes > (double)c->items * CUCKOO_COMPACT_RATIO)
                return compact(c, false, undo);
            return true;
        }
    }
    return false;
}

void cuckoo_get_info(const cuckoo_t *c, cuckoo_info_t *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t slots = 0;
    for (uint32_t i = 0; i < c->nfilters; i++) {
        out->buckets += c->f[i].buckets;
        slots += slot_bytes(c->f[i].buckets * c->p.bucket_size, c->p.fp_bits);
    }
    out->buckets0 = c->buckets0;
    out->size_bytes = c->gen == TALLY_GEN_1 ? c->mem
                                            : CUCKOO_RB_FILTER_BYTES + (uint64_t)c->nfilters * CUCKOO_RB_SUBF_BYTES + slots;
    out->filters = c->nfilters;
    out->items = c->items;
    out->deletes = c->deletes;
    out->capacity = c->p.capacity;
    out->bucket_size = c->p.bucket_size;
    out->max_iterations = c->p.max_iterations;
    out->expansion = c->p.expansion;
    out->fp_bits = c->p.fp_bits;
}

/* ------------------------------------------------------------------------ */
/* Dump and load (CF.SCANDUMP / CF.LOADCHUNK)                               */
/* ------------------------------------------------------------------------ */

bool cuckoo_dump_header(const cuckoo_t *c, wbuf_t *out)
{
    if (c->p.fp_bits != 8)
        return false;
    wbuf_put_u64(out, c->items);
    wbuf_put_u64(out, c->buckets0);
    wbuf_put_u64(out, c->deletes);
    wbuf_put_u64(out, c->nfilters);
    wbuf_put_u16(out, (uint16_t)c->p.bucket_size);
    wbuf_put_u16(out, (uint16_t)c->p.max_iterations);
    wbuf_put_u16(out, (uint16_t)c->p.expansion);
    return true;
}

/* The sub-filter holding byte `pos` of the concatenated slot arrays, and the
 * offset in it; -1 past the end. */
static int subf_at(const cuckoo_t *c, uint64_t pos, uint64_t *offset)
{
    for (uint32_t i = 0; i < c->nfilters; i++) {
        uint64_t bytes = slot_bytes(c->f[i].buckets * c->p.bucket_size, c->p.fp_bits);
        if (pos < bytes) {
            *offset = pos;
            return (int)i;
        }
        pos -= bytes;
    }
    return -1;
}

const uint8_t *cuckoo_dump_chunk(const cuckoo_t *c, int64_t *cursor, size_t max_len, size_t *len)
{
    uint64_t off;
    int fi = *cursor >= 1 && c->p.fp_bits == 8 ? subf_at(c, (uint64_t)*cursor - 1, &off) : -1;
    *len = 0;
    if (fi < 0) {
        *cursor = 0;
        return NULL;
    }
    uint64_t left = c->f[fi].buckets * c->p.bucket_size - off;
    *len = (size_t)(left < max_len ? left : max_len);
    *cursor += (int64_t)*len;
    return c->f[fi].data + off;
}

/* A header chunk, checked: false with *why when RedisBloom's code could not
 * have produced it. */
typedef struct header {
    cuckoo_params_t prm;
    uint64_t items, buckets, deletes, nfilters;
} header_t;

static bool header_read(const uint8_t *p, size_t len, header_t *h, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    h->items = rbuf_u64(&r);
    h->buckets = rbuf_u64(&r);
    h->deletes = rbuf_u64(&r);
    h->nfilters = rbuf_u64(&r);
    h->prm = (cuckoo_params_t){ .fp_bits = 8 };
    h->prm.bucket_size = rbuf_u16(&r);
    h->prm.max_iterations = rbuf_u16(&r);
    h->prm.expansion = rbuf_u16(&r);
    const char *field;
    if (!rbuf_done(&r)) {
        *why = "cuckoo: a header is 38 bytes";
        return false;
    }
    /* what RedisBloom's code can produce: a power-of-two bucket count of at
     * least 2 (capacity >= 2 * bucket size), expansion 0 or a power of two,
     * one sub-filter unless it expands, at most 32 of them */
    if (h->buckets < 2 || (h->buckets & (h->buckets - 1)) || h->buckets > CUCKOO_MAX_BUCKETS || h->nfilters < 1 ||
        h->nfilters > CUCKOO_MAX_FILTERS || round_expansion(h->prm.expansion) != h->prm.expansion ||
        (h->prm.expansion == 0 && h->nfilters != 1)) {
        *why = "cuckoo: invalid geometry in the header";
        return false;
    }
    h->prm.capacity = h->buckets * h->prm.bucket_size;
    if (params_check(&h->prm, &field) || !capacity_possible(&h->prm)) {
        *why = "cuckoo: invalid parameters in the header";
        return false;
    }
    return true;
}

/* cuckoo_memory of the filter a checked header describes, or 0 when one of
 * its sub-filters is too large to exist. */
static uint64_t header_memory(const header_t *h)
{
    cuckoo_params_t q = h->prm;
    q.expansion = round_expansion(h->prm.expansion);
    uint64_t buckets0 = next_pow2(q.capacity / q.bucket_size), total = sizeof(cuckoo_t);
    for (uint32_t i = 0; i < h->nfilters; i++) {
        uint64_t n = subf_buckets(&q, buckets0, i);
        if (!n)
            return 0;
        total += slot_bytes(n * q.bucket_size, q.fp_bits);
    }
    return total;
}

uint64_t cuckoo_load_header_bytes(const uint8_t *p, size_t len)
{
    header_t h;
    const char *why;
    return header_read(p, len, &h, &why) ? header_memory(&h) : 0;
}

cuckoo_t *cuckoo_load_header(const uint8_t *p, size_t len, uint64_t max_bytes, bool *nomem, const char **why)
{
    header_t h;
    *nomem = false;
    if (!header_read(p, len, &h, why))
        return NULL;
    uint64_t total = header_memory(&h);   /* checked before the sub-filters are allocated */
    if (!total || (max_bytes && total > max_bytes)) {
        *why = total ? "cuckoo: the filter is larger than the limit on a value's size" : "cuckoo: a sub-filter is too large";
        return NULL;
    }
    cuckoo_t *c = alloc_shell(&h.prm);
    if (!c) {
        *nomem = true;
        *why = "out of memory";
        return NULL;
    }
    c->gen = TALLY_GEN_2;
    c->items = h.items;
    c->deletes = h.deletes;
    while (c->nfilters < h.nfilters)
        if (!subf_add(c, false)) {
            *nomem = true;
            *why = "out of memory";
            cuckoo_free(c);
            return NULL;
        }
    return c;
}

bool cuckoo_load_chunk(cuckoo_t *c, int64_t cursor, const uint8_t *p, size_t len, const char **why)
{
    uint64_t off;
    if (len == 0 || cursor <= 0 || (uint64_t)cursor - 1 < len || c->p.fp_bits != 8) {
        *why = "received bad data";
        return false;
    }
    int fi = subf_at(c, (uint64_t)cursor - len - 1, &off);
    if (fi < 0 || len > c->f[fi].buckets * c->p.bucket_size - off) {
        *why = "invalid offset: the chunk does not fit the filter";
        return false;
    }
    memcpy(c->f[fi].data + off, p, len);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { cuckoo_free(v); }
static size_t type_size(const void *v) { return cuckoo_memory(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const cuckoo_t *c = v;
    wbuf_put_u8(out, c->gen == TALLY_GEN_1 ? CUCKOO_ENC_V1 : CUCKOO_ENC_V2);
    wbuf_put_u8(out, (uint8_t)c->p.fp_bits);
    wbuf_put_u16(out, (uint16_t)c->p.bucket_size);
    wbuf_put_u16(out, (uint16_t)c->p.max_iterations);
    wbuf_put_u16(out, (uint16_t)c->p.expansion);
    wbuf_put_u64(out, c->p.capacity);
    wbuf_put_u64(out, c->items);
    wbuf_put_u64(out, c->deletes);
    for (int i = 0; i < 4; i++)
        wbuf_put_u64(out, c->rng.s[i]);
    wbuf_put_u8(out, (uint8_t)c->nfilters);
    for (uint32_t i = 0; i < c->nfilters; i++)
        wbuf_put_bytes(out, c->f[i].data, slot_bytes(c->f[i].buckets * c->p.bucket_size, c->p.fp_bits));
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    cuckoo_params_t prm;
    prm.fp_bits = rbuf_u8(&r);
    prm.bucket_size = rbuf_u16(&r);
    prm.max_iterations = rbuf_u16(&r);
    prm.expansion = rbuf_u16(&r);
    prm.capacity = rbuf_u64(&r);
    uint64_t items = rbuf_u64(&r), deletes = rbuf_u64(&r);
    rng_t rng;
    for (int i = 0; i < 4; i++)
        rng.s[i] = rbuf_u64(&r);
    uint8_t nfilters = rbuf_u8(&r);
    const char *field;
    if (r.err || (ver != CUCKOO_ENC_V1 && ver != CUCKOO_ENC_V2)) {
        *why = "cuckoo: truncated header or unknown version";
        return NULL;
    }
    if (params_check(&prm, &field) || !capacity_possible(&prm) || round_expansion(prm.expansion) != prm.expansion) {
        *why = "cuckoo: invalid parameters";
        return NULL;
    }
    if (nfilters < 1 || nfilters > CUCKOO_MAX_FILTERS || (prm.expansion == 0 && nfilters != 1)) {
        *why = "cuckoo: invalid sub-filter count";
        return NULL;
    }
    cuckoo_t *c = alloc_shell(&prm);
    if (!c) {
        *why = "out of memory";
        return NULL;
    }
    c->gen = ver == CUCKOO_ENC_V1 ? TALLY_GEN_1 : TALLY_GEN_2;
    c->items = items;
    c->deletes = deletes;
    c->rng = rng;
    uint64_t occupied = 0;
    for (uint32_t i = 0; i < nfilters; i++) {
        uint64_t n = subf_buckets(&c->p, c->buckets0, i);
        uint64_t slots = n * c->p.bucket_size, bytes = slot_bytes(slots, c->p.fp_bits);
        const uint8_t *d = n ? rbuf_bytes(&r, bytes) : NULL;
        if (!d) {
            *why = "cuckoo: truncated or impossible sub-filter";
            goto fail;
        }
        if (c->p.fp_bits == 12 && (slots & 1) && (d[bytes - 1] & 0xf0)) {
            *why = "cuckoo: padding bits set";
            goto fail;
        }
        if (!subf_add(c, false)) {
            *why = "out of memory";
            goto fail;
        }
        memcpy(c->f[i].data, d, bytes);
        for (uint64_t s = 0; s < slots; s++)
            occupied += slot_get(d, c->p.fp_bits, s) != 0;
    }
    if (!rbuf_done(&r)) {
        *why = "cuckoo: trailing bytes";
        goto fail;
    }
    /* generation 2 keeps the count a RedisBloom dump carried (BF.LOADCHUNK
     * does not recount either) */
    if (c->gen == TALLY_GEN_1 && occupied != items) {
        *why = "cuckoo: item count does not match the occupied slots";
        goto fail;
    }
    return c;
fail:
    cuckoo_free(c);
    return NULL;
}

const ks_type_t cuckoo_type = {
    .tag = TYPE_TAG_CUCKOO,
    .name = "cuckoo",
    .noun = "a Cuckoo filter",
    .missing = "no cuckoo filter at this key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};

static bool dump_header(const void *v, wbuf_t *out) { return cuckoo_dump_header(v, out); }
static const uint8_t *dump_chunk(const void *v, int64_t *cursor, size_t max_len, size_t *len)
{
    return cuckoo_dump_chunk(v, cursor, max_len, len);
}
static void *load_header(const uint8_t *p, size_t len, uint64_t max_bytes, bool *nomem, const char **why)
{
    return cuckoo_load_header(p, len, max_bytes, nomem, why);
}
static bool load_chunk(void *v, int64_t cursor, const uint8_t *p, size_t len, const char **why)
{
    return cuckoo_load_chunk(v, cursor, p, len, why);
}

static uint64_t header_bytes(const uint8_t *p, size_t len) { return cuckoo_load_header_bytes(p, len); }

const ks_dump_ops_t cuckoo_dump_ops = { &cuckoo_type, dump_header, dump_chunk, load_header, load_chunk, header_bytes };
