/* lease.c - see lease.h. */
#include "core/lease.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

#define LEASE_ENC_VERSION 1   /* first byte of every encoding */
#define LEASE_FIRST_CAP 4     /* the first array's leases */

typedef struct lease_ent {
    uint64_t id;
    int64_t expires_ms;
} lease_ent_t;

struct lease {
    uint64_t seed;           /* ids: mix(seed + seq * golden) */
    uint64_t seq;            /* acquisitions so far */
    uint32_t limit;          /* the last acquire's */
    uint32_t n, cap;         /* leases held (live or not yet purged), array size */
    lease_ent_t *v;
};

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t lease_seed(const char *key, size_t klen, int64_t now_ns)
{
    return tally_xxh64(key, klen, (uint64_t)now_ns ^ 0x6c65617365ULL);
}

lease_t *lease_new(uint64_t seed, uint32_t limit)
{
    lease_t *l = calloc(1, sizeof(*l));
    if (l) {
        l->seed = seed;
        l->limit = limit;
    }
    return l;
}

void lease_free(lease_t *l)
{
    if (l) {
        free(l->v);
        free(l);
    }
}

size_t lease_base_bytes(void) { return sizeof(lease_t); }

static uint32_t next_cap(uint32_t cap, uint32_t limit)
{
    uint32_t c = cap ? cap * 2 : LEASE_FIRST_CAP;
    if (c > limit)
        c = limit;
    return c;
}

size_t lease_grow_bytes(const lease_t *l, uint32_t limit)
{
    uint32_t n = l ? l->n : 0, cap = l ? l->cap : 0;
    if (n < cap || n >= limit)
        return 0;
    return (size_t)(next_cap(cap, limit) - cap) * sizeof(lease_ent_t);
}

size_t lease_max_bytes(uint32_t limit) { return sizeof(lease_t) + (size_t)limit * sizeof(lease_ent_t); }

bool lease_purge(lease_t *l, int64_t now_ms)
{
    /* stable: the leases kept stay in their order, so purging at t1 then t2
     * leaves what purging once at t2 does (a purge that was not journaled -
     * an acquire that went to make room - leaves the same state as replay) */
    uint32_t k = 0;
    for (uint32_t i = 0; i < l->n; i++)
        if (l->v[i].expires_ms > now_ms)
            l->v[k++] = l->v[i];
    bool any = k != l->n;
    l->n = k;
    return any;
}

void lease_info(const lease_t *l, int64_t now_ms, lease_info_t *out)
{
    out->limit = l->limit;
    out->active = 0;
    out->next_expiry_ms = -1;
    out->last_expiry_ms = -1;
    for (uint32_t i = 0; i < l->n; i++) {
        int64_t x = l->v[i].expires_ms;
        if (x <= now_ms)
            continue;
        out->active++;
        if (out->next_expiry_ms < 0 || x < out->next_expiry_ms)
            out->next_expiry_ms = x;
        if (x > out->last_expiry_ms)
            out->last_expiry_ms = x;
    }
}

static int64_t find(const lease_t *l, uint64_t id)
{
    if (id == 0)
        return -1;
    for (uint32_t i = 0; i < l->n; i++)
        if (l->v[i].id == id)
            return i;
    return -1;
}

core_status_t lease_acquire(lease_t *l, uint32_t limit, int64_t expires_ms, uint64_t *id)
{
    if (l->n >= limit) {
        l->limit = limit;
        return CORE_FULL;
    }
    if (l->n == l->cap) {
        uint32_t c = next_cap(l->cap, limit);
        lease_ent_t *v = realloc(l->v, (size_t)c * sizeof(*v));
        if (!v)
            return CORE_NOMEM;
        l->v = v;
        l->cap = c;
    }
    l->limit = limit;
    uint64_t x;
    do   /* mix is a bijection: distinct seqs give distinct ids; skip the one that gives 0 */
        x = mix64(l->seed + ++l->seq * 0x9e3779b97f4a7c15ULL);
    while (x == 0);
    l->v[l->n].id = x;
    l->v[l->n].expires_ms = expires_ms;
    l->n++;
    *id = x;
    return CORE_OK;
}

bool lease_release(lease_t *l, uint64_t id)
{
    int64_t i = find(l, id);
    if (i < 0)
        return false;
    l->v[i] = l->v[--l->n];
    return true;
}

bool lease_renew(lease_t *l, uint64_t id, int64_t expires_ms)
{
    int64_t i = find(l, id);
    if (i < 0)
        return false;
    l->v[i].expires_ms = expires_ms;
    return true;
}

int64_t lease_expiry(const lease_t *l, uint64_t id, int64_t now_ms)
{
    int64_t i = find(l, id);
    if (i < 0 || l->v[i].expires_ms <= now_ms)
        return -1;
    return l->v[i].expires_ms;
}

uint32_t lease_count(const lease_t *l) { return l->n; }
uint32_t lease_limit(const lease_t *l) { return l->limit; }

void lease_at(const lease_t *l, uint32_t i, uint64_t *id, int64_t *expires_ms)
{
    *id = l->v[i].id;
    *expires_ms = l->v[i].expires_ms;
}

static void type_free(void *v) { lease_free(v); }

static size_t type_size(const void *v)
{
    const lease_t *l = v;
    return sizeof(lease_t) + (size_t)l->cap * sizeof(lease_ent_t);
}

static void type_encode(const void *v, wbuf_t *out)
{
    const lease_t *l = v;
    wbuf_put_u8(out, LEASE_ENC_VERSION);
    wbuf_put_u64(out, l->seed);
    wbuf_put_u64(out, l->seq);
    wbuf_put_u32(out, l->limit);
    wbuf_put_u32(out, l->n);
    for (uint32_t i = 0; i < l->n; i++) {
        wbuf_put_u64(out, l->v[i].id);
        wbuf_put_i64(out, l->v[i].expires_ms);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint64_t seed = rbuf_u64(&r), seq = rbuf_u64(&r);
    uint32_t limit = rbuf_u32(&r), n = rbuf_u32(&r);
    if (ver != LEASE_ENC_VERSION) {
        *why = "lease: unknown encoding version";
        return NULL;
    }
    if (limit < 1 || limit > LEASE_MAX_LIMIT || n > LEASE_MAX_LIMIT || rbuf_left(&r) != (size_t)n * 16) {
        *why = "lease: bad limit or length";
        return NULL;
    }
    lease_t *l = lease_new(seed, limit);
    if (!l || (n && !(l->v = malloc((size_t)n * sizeof(lease_ent_t))))) {
        lease_free(l);
        *why = "out of memory";
        return NULL;
    }
    l->seq = seq;
    l->cap = n;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = rbuf_u64(&r);
        int64_t x = rbuf_i64(&r);
        if (id == 0 || x <= 0) {
            lease_free(l);
            *why = "lease: bad or repeated lease";
            return NULL;
        }
        l->v[i].id = id;
        l->v[i].expires_ms = x;
        l->n = i + 1;
    }
    if (!rbuf_done(&r)) {
        lease_free(l);
        *why = "lease: wrong length";
        return NULL;
    }
    if (n > 1) {   /* distinct ids: sorted copy, O(n log n) */
        uint64_t *ids = malloc((size_t)n * sizeof(*ids));
        if (!ids) {
            lease_free(l);
            *why = "out of memory";
            return NULL;
        }
        for (uint32_t i = 0; i < n; i++)
            ids[i] = l->v[i].id;
        qsort(ids, n, sizeof(*ids), cmp_u64);
        bool dup = false;
        for (uint32_t i = 1; i < n && !dup; i++)
            dup = ids[i] == ids[i - 1];
        free(ids);
        if (dup) {
            lease_free(l);
            *why = "lease: repeated lease id";
            return NULL;
        }
    }
    return l;
}

const ks_type_t lease_type = {
    .tag = TYPE_TAG_LEASE,
    .name = "lease",
    .noun = "a lease set",
    .missing = "no such key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
