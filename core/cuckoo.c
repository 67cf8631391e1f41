/* cuckoo.c - see cuckoo.h for the algorithm, the hashing and the encoding. */
#include "core/cuckoo.h"

#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/hash.h"
#include "core/rng.h"

#define CUCKOO_HASH_SEED 0                /* MurmurHash64A seed for items */
#define CUCKOO_ALT_MULT 0x5bd1e995ULL     /* RedisBloom's alternate-bucket multiplier */
#define CUCKOO_ENC_VERSION 1              /* first byte of the keyspace encoding */

typedef struct subf {
    uint64_t buckets;   /* a power of two */
    uint8_t *data;      /* buckets * bucket_size slots of fp_bits */
} subf_t;

struct cuckoo {
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

static uint64_t next_pow2(uint64_t x)
{
    if (x <= 1)
        return 1;
    return 1ULL << (64 - __builtin_clzll(x - 1));
}

static uint32_t round_expansion(uint32_t e) { return e == 0 ? 0 : (uint32_t)next_pow2(e); }

static uint64_t slot_bytes(uint64_t slots, uint32_t fp_bits)
{
    return (slots * fp_bits + 7) / 8;
}

/* Buckets of sub-filter i, or 0 if it cannot exist. */
static uint64_t subf_buckets(const cuckoo_params_t *p, uint64_t buckets0, uint32_t i)
{
    uint64_t n = buckets0;
    for (uint32_t k = 0; k < i; k++)
        if (__builtin_mul_overflow(n, (uint64_t)p->expansion, &n))
            return 0;
    if (n == 0 || n > CUCKOO_MAX_FILTER_BYTES || slot_bytes(n * p->bucket_size, p->fp_bits) > CUCKOO_MAX_FILTER_BYTES)
        return 0;
    return n;
}

const char *cuckoo_validate(const cuckoo_params_t *p, const char **field)
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
    if (p->capacity < 2ULL * p->bucket_size || p->capacity > CUCKOO_MAX_CAPACITY) {
        *field = "capacity";
        return "must be at least 2 * bucket_size and at most 4294967296";
    }
    cuckoo_params_t q = *p;
    q.expansion = round_expansion(p->expansion);
    if (!subf_buckets(&q, next_pow2(p->capacity / p->bucket_size), 0)) {
        *field = "capacity";
        return "needs a sub-filter over 1 GiB";
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
    l.fp = (uint32_t)((l.h >> 32) % ((1u << c->p.fp_bits) - 1)) + 1;
    return l;
}

static inline uint64_t alt_index(uint64_t i, uint32_t fp, uint64_t buckets)
{
    return (i ^ ((uint64_t)fp * CUCKOO_ALT_MULT)) & (buckets - 1);
}

/* ------------------------------------------------------------------------ */
/* Create / free                                                            */
/* ------------------------------------------------------------------------ */

static bool subf_add(cuckoo_t *c)
{
    if (c->nfilters == CUCKOO_MAX_FILTERS)
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

cuckoo_t *cuckoo_create(const cuckoo_params_t *p, uint64_t seed)
{
    cuckoo_t *c = alloc_shell(p);
    if (!c)
        return NULL;
    rng_seed(&c->rng, seed);
    if (!subf_add(c)) {
        free(c);
        return NULL;
    }
    return c;
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

/* Writes slot s of sub-filter fi, logging its old value first. */
static bool put_logged(cuckoo_t *c, cuckoo_undo_t *u, uint32_t fi, uint64_t s, uint32_t v)
{
    uint8_t *d = c->f[fi].data;
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
    free(u->e);
    free(u);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

/* First free slot of bucket i in sub-filter fi, or -1. */
static int64_t free_slot(const cuckoo_t *c, uint32_t fi, uint64_t i)
{
    const uint8_t *d = c->f[fi].data;
    uint64_t s0 = i * c->p.bucket_size;
    for (uint64_t s = s0; s < s0 + c->p.bucket_size; s++)
        if (slot_get(d, c->p.fp_bits, s) == 0)
            return (int64_t)s;
    return -1;
}

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
    /* Evict along a chain in the newest sub-filter: kick a random resident
     * of the current bucket to its other bucket. */
    uint32_t fi = c->nfilters - 1;
    uint64_t n = c->f[fi].buckets;
    size_t mark = u->n;
    rng_t saved = c->rng;
    uint32_t fp = l.fp;
    uint64_t i = l.h & (n - 1);
    if (rng_next(&c->rng) & 1)
        i = alt_index(i, fp, n);
    for (uint32_t it = 0; it < c->p.max_iterations; it++) {
        uint64_t victim = i * c->p.bucket_size + rng_below(&c->rng, c->p.bucket_size);
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

int cuckoo_add(cuckoo_t *c, const void *item, size_t len, bool nx, cuckoo_undo_t *undo)
{
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
    if (rc == CUCKOO_FULL && c->p.expansion > 0) {
        if (!subf_add(c))
            rc = c->nfilters == CUCKOO_MAX_FILTERS || !subf_buckets(&c->p, c->buckets0, c->nfilters) ? CUCKOO_FULL
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

bool cuckoo_delete(cuckoo_t *c, const void *item, size_t len, cuckoo_undo_t *undo)
{
    lookup_t l = lookup_of(c, item, len);
    for (uint32_t fi = c->nfilters; fi-- > 0;) {
        uint64_t n = c->f[fi].buckets, i1 = l.h & (n - 1), i2 = alt_index(i1, l.fp, n), s;
        if (bucket_has(c, fi, i1, l.fp, &s) || bucket_has(c, fi, i2, l.fp, &s)) {
            if (undo) {
                if (!put_logged(c, undo, fi, s, 0))
                    return false;
            } else {
                slot_put(c->f[fi].data, c->p.fp_bits, s, 0);
            }
            c->items--;
            c->deletes++;
            return true;
        }
    }
    return false;
}

void cuckoo_get_info(const cuckoo_t *c, cuckoo_info_t *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < c->nfilters; i++)
        out->buckets += c->f[i].buckets;
    out->size_bytes = c->mem;
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
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { cuckoo_free(v); }
static size_t type_size(const void *v) { return cuckoo_memory(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const cuckoo_t *c = v;
    wbuf_put_u8(out, CUCKOO_ENC_VERSION);
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
    if (r.err || ver != CUCKOO_ENC_VERSION) {
        *why = "cuckoo: truncated header or unknown version";
        return NULL;
    }
    if (cuckoo_validate(&prm, &field) || round_expansion(prm.expansion) != prm.expansion) {
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
        if (!subf_add(c)) {
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
    if (occupied != items) {
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
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
