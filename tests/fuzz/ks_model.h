/*
 * ks_model.h - drives a keyspace with operations decoded from bytes and
 * checks every answer against a model: a plain array of what each key
 * holds.  Shared by the keyspace's model tests (tests/unit/
 * test_keyspace_model.c, seeded random bytes) and its fuzz target
 * (tests/fuzz/fuzz_keyspace.c).
 *
 * Three value types cover the keyspace's three ways of holding a value:
 *   - km_inl: an int64 kept inside the entry (inline_size 8);
 *   - km_heap: a separate allocation owning a buffer that grows in place
 *     (ks_entry_changed re-measures it);
 *   - km_maybe: 16 bytes kept inside the entry unless `big` is set
 *     (inline_ok), so replacing its value moves it in and out of the entry.
 *
 * Operations: put (new key, same type in place, another type), get, delete,
 * set and clear expiry, grow, time passing, active expiry, eviction under a
 * limit (allkeys and volatile LRU), snapshot with writes between its
 * slices (the records must show each key as it was at the barrier), and the
 * accounting check (the total is the sum of the entries' charges, each
 * what its type and key say).  A failed check calls KM_FAIL(fmt, ...).
 */
#ifndef TALLY_TESTS_KS_MODEL_H
#define TALLY_TESTS_KS_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/keyspace.h"
#include "core/persist_fmt.h"

#ifndef KM_FAIL
#define KM_FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), abort())
#endif

#define KM_KEYS 64
enum { KM_INL, KM_HEAP, KM_MAYBE, KM_NTYPES };

/* ---- the types ---------------------------------------------------------- */

typedef struct km_heap {
    int64_t v;
    size_t n;
    uint8_t *buf;    /* n bytes, each (uint8_t)v */
} km_heap_t;

typedef struct km_maybe {
    int64_t v;
    int64_t big;     /* nonzero: kept apart */
} km_maybe_t;

static size_t km_inl_size(const void *v) { (void)v; return sizeof(int64_t); }
static void km_inl_encode(const void *v, wbuf_t *out) { wbuf_put_i64(out, *(const int64_t *)v); }
static void *km_inl_decode(const uint8_t *p, size_t len, const char **why)
{
    (void)p; (void)len;
    *why = "not decoded by the model";
    return NULL;
}

static void km_heap_free(void *v)
{
    if (v) {
        free(((km_heap_t *)v)->buf);
        free(v);
    }
}
static size_t km_heap_size(const void *v) { return sizeof(km_heap_t) + ((const km_heap_t *)v)->n; }
static void km_heap_encode(const void *v, wbuf_t *out)
{
    const km_heap_t *h = v;
    wbuf_put_i64(out, h->v);
    wbuf_put_u64(out, h->n);
}

static size_t km_maybe_size(const void *v) { (void)v; return sizeof(km_maybe_t); }
static bool km_maybe_inline_ok(const void *v) { return ((const km_maybe_t *)v)->big == 0; }
static void km_maybe_encode(const void *v, wbuf_t *out)
{
    const km_maybe_t *m = v;
    wbuf_put_i64(out, m->v);
    wbuf_put_i64(out, m->big);
}

static void km_free(void *v) { free(v); }

static const ks_type_t km_types[KM_NTYPES] = {
    [KM_INL] = { .tag = 61, .name = "km_inl", .free = km_free, .size = km_inl_size, .encode = km_inl_encode,
                 .decode = km_inl_decode, .inline_size = sizeof(int64_t) },
    [KM_HEAP] = { .tag = 62, .name = "km_heap", .free = km_heap_free, .size = km_heap_size,
                  .encode = km_heap_encode, .decode = km_inl_decode },
    [KM_MAYBE] = { .tag = 63, .name = "km_maybe", .free = km_free, .size = km_maybe_size,
                   .encode = km_maybe_encode, .decode = km_inl_decode, .inline_size = sizeof(km_maybe_t),
                   .inline_ok = km_maybe_inline_ok },
};

/* ---- the model ---------------------------------------------------------- */

typedef struct km_slot {
    bool present;        /* stored (possibly expired, not yet removed) */
    int type;
    int64_t v;
    int64_t aux;         /* heap: the buffer's length; maybe: big */
    int64_t expire;      /* KS_NO_EXPIRY or absolute ms */
    bool roomy;          /* the entry has had an expiry: its cell has room for the vol index */
} km_slot_t;

typedef struct km {
    ks_t *ks;
    const char *prefix;  /* the keys' names: prefix + index (threads use their own) */
    km_slot_t slot[KM_KEYS];
    int64_t now;
    const uint8_t *p;    /* the operations' bytes */
    size_t len, off;
    bool single;         /* the only driver: global checks (totals, eviction, snapshots) hold */
    uint64_t ops;
} km_t;

static unsigned km_byte(km_t *m) { return m->off < m->len ? m->p[m->off++] : 0; }
static bool km_more(const km_t *m) { return m->off < m->len; }

static size_t km_keyname(const km_t *m, int i, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s%d", m->prefix, i);
    size_t len = (size_t)n;
    if (i % 4 == 3) {   /* some long keys: lengths vary across the allocation's sizes */
        size_t want = 60 + (size_t)i * 3;
        while (len < want && len + 1 < cap)
            buf[len++] = 'x';
        buf[len] = '\0';
    }
    return len;
}

static int km_keyindex(const km_t *m, const char *key, size_t len)
{
    size_t pl = strlen(m->prefix);
    if (len <= pl || memcmp(key, m->prefix, pl) != 0)
        return -1;
    int i = 0;
    for (size_t j = pl; j < len && key[j] >= '0' && key[j] <= '9' && i < 1000; j++)
        i = i * 10 + (key[j] - '0');
    return i;
}

static bool km_live(const km_slot_t *s, int64_t now)
{
    return s->present && !(s->expire != KS_NO_EXPIRY && s->expire <= now);
}

static void *km_new_value(int type, int64_t v, int64_t aux)
{
    switch (type) {
    case KM_INL: {
        int64_t *x = malloc(sizeof(*x));
        if (x)
            *x = v;
        return x;
    }
    case KM_HEAP: {
        km_heap_t *h = malloc(sizeof(*h));
        if (!h)
            return NULL;
        h->v = v;
        h->n = (size_t)aux;
        h->buf = malloc(h->n ? h->n : 1);
        if (!h->buf) {
            free(h);
            return NULL;
        }
        memset(h->buf, (uint8_t)v, h->n);
        return h;
    }
    default: {
        km_maybe_t *x = malloc(sizeof(*x));
        if (x) {
            x->v = v;
            x->big = aux;
        }
        return x;
    }
    }
}

/* What the keyspace charges an entry, worked out here independently of
 * keyspace.c: its cell (a 6-byte header, the key, padding to the area's
 * alignment - 16 when the value's size is a multiple of 16: it may need
 * it -, the value's area: the value of a type whose values are all inline,
 * else at least a pointer and a size; a 4-byte vol index when the entry
 * was made with an expiry or given one since), rounded up to its cell
 * class (8 bytes apart up to 256, 16-byte multiples for a 16-aligned
 * area); a 4-byte table slot; a 12-byte `vol` slot for a key with an
 * expiry; a value stored apart as measured. */
static size_t km_cell_class(size_t n, size_t align)
{
    static const size_t big[] = { 272, 288, 304, 336, 368, 400, 448, 496, 576, 672, 816, 1008, 1360 };
    if (n < 16)
        n = 16;
    n = (n + align - 1) / align * align;
    if (n <= 256)
        return n;
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        if (n <= big[i])
            return big[i];
    return 0;
}

static size_t km_charge(int type, size_t klen, bool volatile_key, bool roomy, size_t apart)
{
    size_t area = type == KM_INL ? sizeof(int64_t) : type == KM_HEAP ? 16 : sizeof(km_maybe_t);
    size_t at = type == KM_MAYBE ? 16 : 8;   /* a 16-byte value may need 16-alignment */
    size_t off = (6 + klen + at - 1) / at * at;
    return km_cell_class(off + area + (roomy ? 4 : 0), at) + 4 + (volatile_key ? 12 : 0) + apart;
}

/* Checks an entry's value, and its charge, against its slot. */
static void km_check_entry(const km_t *m, int i, const ks_entry_t *e)
{
    const km_slot_t *s = &m->slot[i];
    if (ks_entry_type(e) != &km_types[s->type])
        KM_FAIL("key %d: type %s, model %s", i, ks_entry_type(e)->name, km_types[s->type].name);
    const void *v = ks_entry_value(e);
    size_t klen;
    ks_entry_key(e, &klen);
    size_t apart = 0;
    switch (s->type) {
    case KM_INL:
        if (*(const int64_t *)v != s->v)
            KM_FAIL("key %d: %lld, model %lld", i, (long long)*(const int64_t *)v, (long long)s->v);
        break;
    case KM_HEAP: {
        const km_heap_t *h = v;
        if (h->v != s->v || (int64_t)h->n != s->aux || (h->n && h->buf[h->n - 1] != (uint8_t)s->v))
            KM_FAIL("key %d: heap value differs", i);
        apart = km_heap_size(h);
        break;
    }
    default: {
        const km_maybe_t *x = v;
        if (x->v != s->v || x->big != s->aux)
            KM_FAIL("key %d: maybe value differs", i);
        if (x->big)
            apart = sizeof(km_maybe_t);   /* apart: its block is charged */
        break;
    }
    }
    if (ks_entry_expire(m->ks, e) != s->expire)
        KM_FAIL("key %d: expiry %lld, model %lld", i, (long long)ks_entry_expire(m->ks, e), (long long)s->expire);
    size_t want = km_charge(s->type, klen, s->expire != KS_NO_EXPIRY, s->roomy, apart);
    if (want > ks_entry_overhead(klen) + (s->type == KM_INL ? sizeof(int64_t) : s->type == KM_HEAP ? apart : sizeof(km_maybe_t)))
        KM_FAIL("key %d: charged %zu, more than ks_entry_overhead says", i, want);
    if (ks_entry_memory(e) != want)
        KM_FAIL("key %d: charged %zu, expected %zu", i, ks_entry_memory(e), want);
}

/* ---- operations --------------------------------------------------------- */

static ks_key_t km_key(km_t *m, int i, char *buf, size_t cap)
{
    size_t len = km_keyname(m, i, buf, cap);
    return ks_key(m->ks, buf, len);
}

static void km_put(km_t *m)
{
    int i = (int)(km_byte(m) % KM_KEYS);
    int type = (int)(km_byte(m) % KM_NTYPES);
    int64_t v = (int64_t)km_byte(m) - 100;
    int64_t aux = type == KM_HEAP ? (int64_t)(km_byte(m) % 200) : type == KM_MAYBE ? (int64_t)(km_byte(m) % 3 == 0) : 0;
    unsigned ex = km_byte(m) % 4;
    char buf[KS_KEY_MAX + 1];
    ks_key_t k = km_key(m, i, buf, sizeof(buf));
    ks_shard_t *sh = ks_shard_at(m->ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find_write(m->ks, &k, m->now);
    if (e && ks_entry_type(e) == &km_types[type] && type == KM_INL) {
        *(int64_t *)ks_entry_value(e) = v;   /* in place, inside the entry */
        ks_entry_changed(m->ks, e);
    } else if (e && ks_entry_type(e) == &km_types[type]) {
        void *nv = km_new_value(type, v, aux);
        if (!nv)
            KM_FAIL("out of memory");
        ks_entry_replace_value(m->ks, e, nv);
    } else {
        if (e)
            ks_entry_delete(m->ks, e);
        void *nv = km_new_value(type, v, aux);
        e = nv ? ks_add(m->ks, &k, &km_types[type], nv, KS_NO_EXPIRY, m->now) : NULL;
        if (!e)
            KM_FAIL("out of memory adding key %d", i);
        m->slot[i].expire = KS_NO_EXPIRY;
        m->slot[i].roomy = false;
    }
    km_slot_t *s = &m->slot[i];
    s->present = true;
    s->type = type;
    s->v = v;
    s->aux = aux;
    if (ex == 1) {
        s->expire = m->now + 1 + (int64_t)(km_byte(m) % 8);
        s->roomy = true;
        ks_entry_set_expire(m->ks, &e, s->expire);
    } else if (ex == 2) {
        s->expire = KS_NO_EXPIRY;
        ks_entry_set_expire(m->ks, &e, KS_NO_EXPIRY);
    }
    km_check_entry(m, i, e);
    ks_shard_unlock(sh);
}

static void km_get(km_t *m)
{
    int i = (int)(km_byte(m) % KM_KEYS);
    char buf[KS_KEY_MAX + 1];
    ks_key_t k = km_key(m, i, buf, sizeof(buf));
    ks_shard_t *sh = ks_shard_at(m->ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(m->ks, &k, m->now);
    bool live = km_live(&m->slot[i], m->now);
    if (!live)
        m->slot[i].present = false;   /* gone, lazily, if it was stored */
    if (!!e != live)
        KM_FAIL("key %d: %s, model %s", i, e ? "found" : "missing", live ? "live" : "absent");
    if (e) {
        size_t klen;
        const char *key = ks_entry_key(e, &klen);
        if (klen != k.len || memcmp(key, buf, klen) != 0)
            KM_FAIL("key %d: the entry's key differs", i);
        km_check_entry(m, i, e);
    }
    ks_shard_unlock(sh);
}

static void km_del(km_t *m)
{
    int i = (int)(km_byte(m) % KM_KEYS);
    char buf[KS_KEY_MAX + 1];
    ks_key_t k = km_key(m, i, buf, sizeof(buf));
    ks_shard_t *sh = ks_shard_at(m->ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find_write(m->ks, &k, m->now);
    if (!!e != km_live(&m->slot[i], m->now))
        KM_FAIL("key %d: delete found %d", i, e != NULL);
    if (e)
        ks_entry_delete(m->ks, e);
    m->slot[i].present = false;
    ks_shard_unlock(sh);
}

static void km_expire(km_t *m)
{
    int i = (int)(km_byte(m) % KM_KEYS);
    unsigned how = km_byte(m);
    char buf[KS_KEY_MAX + 1];
    ks_key_t k = km_key(m, i, buf, sizeof(buf));
    ks_shard_t *sh = ks_shard_at(m->ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find_write(m->ks, &k, m->now);
    if (!!e != km_live(&m->slot[i], m->now))
        KM_FAIL("key %d: expire found %d", i, e != NULL);
    if (!e) {
        m->slot[i].present = false;
    } else {
        /* now and then a time past what is kept exactly: kept as KS_EXPIRE_MAX */
        int64_t at = how % 3 == 0   ? KS_NO_EXPIRY
                     : how % 7 == 1 ? INT64_MAX - (int64_t)how
                                    : m->now + 1 + (int64_t)(how % 16);
        ks_entry_set_expire(m->ks, &e, at);
        m->slot[i].expire = at > KS_EXPIRE_MAX ? KS_EXPIRE_MAX : at;
        if (at != KS_NO_EXPIRY)
            m->slot[i].roomy = true;
        km_check_entry(m, i, e);
    }
    ks_shard_unlock(sh);
}

/* Grows or shrinks a separate value in place (its charge follows). */
static void km_grow(km_t *m)
{
    int i = (int)(km_byte(m) % KM_KEYS);
    size_t n = km_byte(m) % 250;
    char buf[KS_KEY_MAX + 1];
    ks_key_t k = km_key(m, i, buf, sizeof(buf));
    ks_shard_t *sh = ks_shard_at(m->ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find_write(m->ks, &k, m->now);
    if (!e)
        m->slot[i].present = false;
    if (e && ks_entry_type(e) == &km_types[KM_HEAP]) {
        km_heap_t *h = ks_entry_value(e);
        uint8_t *nb = realloc(h->buf, n ? n : 1);
        if (!nb)
            KM_FAIL("out of memory");
        if (n > h->n)
            memset(nb + h->n, (uint8_t)h->v, n - h->n);
        h->buf = nb;
        h->n = n;
        ks_entry_changed(m->ks, e);
        m->slot[i].aux = (int64_t)n;
        km_check_entry(m, i, e);
    }
    ks_shard_unlock(sh);
}

static void km_on_evict(void *ud, const char *key, size_t len)
{
    km_t *m = ud;
    int i = km_keyindex(m, key, len);
    if (i < 0 || i >= KM_KEYS || !m->slot[i].present)
        KM_FAIL("evicted a key the model does not hold: %.*s", (int)len, key);
    m->slot[i].present = false;
}

static void km_evict(km_t *m)
{
    ks_evict_policy_t pol = km_byte(m) % 2 ? KS_ALLKEYS_LRU : KS_VOLATILE_LRU;
    uint64_t total = ks_total_memory(m->ks);
    ks_set_maxmemory(m->ks, total - total / 4, pol);
    while (ks_over_limit(m->ks)) {
        uint64_t before = ks_total_memory(m->ks);
        size_t freed = ks_evict(m->ks, m->now, km_on_evict, m);
        if (!freed)
            break;   /* volatile-lru with no volatile key left */
        if (before - ks_total_memory(m->ks) != freed)
            KM_FAIL("eviction said %zu bytes, freed %llu", freed,
                    (unsigned long long)(before - ks_total_memory(m->ks)));
    }
    if (pol == KS_ALLKEYS_LRU && ks_over_limit(m->ks))
        KM_FAIL("allkeys-lru left the keyspace over its limit");
    ks_set_maxmemory(m->ks, 0, KS_NOEVICTION);
}

typedef struct km_sum {
    const km_t *m;
    uint64_t mem, keys;
} km_sum_t;

static void km_sum_visit(void *ud, ks_entry_t *e)
{
    km_sum_t *s = ud;
    size_t len;
    const char *key = ks_entry_key(e, &len);
    int i = km_keyindex(s->m, key, len);
    if (i < 0 || i >= KM_KEYS || !s->m->slot[i].present)
        KM_FAIL("the keyspace holds a key the model does not: %.*s", (int)len, key);
    km_check_entry(s->m, i, e);
    s->mem += ks_entry_memory(e);
    s->keys++;
}

/* Every stored entry visited once: the totals are the sum of the entries'
 * charges, and every key the model holds live is there. */
static void km_check_totals(km_t *m)
{
    km_sum_t s = { m, 0, 0 };
    for (unsigned i = 0; i < ks_shard_count(m->ks); i++) {
        ks_shard_t *sh = ks_shard_at(m->ks, i);
        ks_shard_lock(sh);
        uint64_t cur = 0;
        do
            ks_shard_scan(m->ks, sh, &cur, 1 << 20, INT64_MIN, km_sum_visit, &s);
        while (cur != 0);
        ks_shard_unlock(sh);
    }
    if (s.mem != ks_total_memory(m->ks) || s.keys != ks_total_keys(m->ks))
        KM_FAIL("totals %llu bytes %llu keys, entries sum to %llu bytes %llu keys",
                (unsigned long long)ks_total_memory(m->ks), (unsigned long long)ks_total_keys(m->ks),
                (unsigned long long)s.mem, (unsigned long long)s.keys);
    uint64_t live = 0, stored = 0;
    for (int i = 0; i < KM_KEYS; i++) {
        live += km_live(&m->slot[i], m->now);
        stored += m->slot[i].present;
    }
    if (s.keys < live || s.keys > stored)
        KM_FAIL("%llu keys stored, model %llu live of %llu", (unsigned long long)s.keys,
                (unsigned long long)live, (unsigned long long)stored);
}

static void km_step(km_t *m, bool in_snapshot);

/* A snapshot with writes between its slices: its records are the keys as
 * they were at the barrier. */
static void km_snapshot(km_t *m)
{
    km_slot_t at[KM_KEYS];
    memcpy(at, m->slot, sizeof(at));
    int64_t barrier = m->now;
    ks_lock_all(m->ks);
    ks_snapshot_begin(m->ks);
    ks_unlock_all(m->ks);
    wbuf_t out = WBUF_INIT;
    uint64_t records = 0;
    size_t budget = 16 + km_byte(m) % 200;
    for (unsigned i = 0; i < ks_shard_count(m->ks); i++) {
        ks_shard_t *sh = ks_shard_at(m->ks, i);
        bool done;
        do {
            for (unsigned w = km_byte(m) % 4; w > 0 && km_more(m); w--)
                km_step(m, true);
            ks_shard_lock(sh);
            done = ks_snapshot_drain(m->ks, sh, &out, budget, &records);
            ks_shard_unlock(sh);
        } while (!done);
    }
    if (out.oom || ks_snapshot_failed(m->ks))
        KM_FAIL("snapshot out of memory");
    ks_snapshot_end(m->ks);

    bool seen[KM_KEYS] = { false };
    size_t off = 0;
    uint64_t n = 0;
    while (off < out.len) {
        snap_record_t r;
        size_t used;
        uint64_t cnt;
        const char *why;
        if (snapfmt_parse_record(out.data + off, out.len - off, &r, &used, &cnt, &why) != PARSE_OK)
            KM_FAIL("snapshot record does not parse: %s", why);
        off += used;
        n++;
        int i = km_keyindex(m, r.key, r.klen);
        if (i < 0 || i >= KM_KEYS || seen[i])
            KM_FAIL("snapshot record of key %d (%.*s) unexpected or twice", i, (int)r.klen, r.key);
        seen[i] = true;
        const km_slot_t *s = &at[i];
        if (!s->present)
            KM_FAIL("snapshot holds key %d, absent at the barrier", i);
        if (r.tag != km_types[s->type].tag || r.expire_ms != s->expire)
            KM_FAIL("snapshot key %d: tag %u expiry %lld, barrier %u %lld", i, r.tag, (long long)r.expire_ms,
                    km_types[s->type].tag, (long long)s->expire);
        if (r.vlen < 8 || (int64_t)le64_load(r.value) != s->v)
            KM_FAIL("snapshot key %d: value differs from the barrier's", i);
        if (s->type != KM_INL && (r.vlen != 16 || (int64_t)le64_load(r.value + 8) != s->aux))
            KM_FAIL("snapshot key %d: second field differs from the barrier's", i);
    }
    if (n != records)
        KM_FAIL("snapshot counted %llu records, wrote %llu", (unsigned long long)records, (unsigned long long)n);
    for (int i = 0; i < KM_KEYS; i++)
        if (km_live(&at[i], barrier) && !seen[i])
            KM_FAIL("snapshot misses key %d, live at the barrier", i);
    wbuf_free(&out);
}

static void km_step(km_t *m, bool in_snapshot)
{
    m->ops++;
    switch (km_byte(m) % 12) {
    case 0: case 1: case 2: km_put(m); break;
    case 3: case 4: km_get(m); break;
    case 5: km_del(m); break;
    case 6: km_expire(m); break;
    case 7: km_grow(m); break;
    case 8: m->now += km_byte(m) % 16; break;
    case 9:
        if (m->single)
            ks_expire_step(m->ks, m->now, 1 + km_byte(m) % 20, ks_shard_count(m->ks));
        break;
    case 10:
        if (m->single)
            km_evict(m);
        break;
    default:
        if (m->single && !in_snapshot)
            km_byte(m) % 2 ? km_snapshot(m) : km_check_totals(m);
        break;
    }
}

/* Runs the operations of p[0..len) on ks from a fresh model; with `single`
 * the driver is alone on ks (totals, eviction, expiry steps and snapshots
 * are checked), else it shares ks with others on other prefixes. */
static void km_run(ks_t *ks, const char *prefix, const uint8_t *p, size_t len, bool single, uint64_t *ops)
{
    km_t *m = calloc(1, sizeof(*m));
    if (!m)
        KM_FAIL("out of memory");
    m->ks = ks;
    m->prefix = prefix;
    m->now = 1000;
    m->p = p;
    m->len = len;
    m->single = single;
    while (km_more(m))
        km_step(m, false);
    if (single)
        km_check_totals(m);
    /* every key deleted: nothing stays charged */
    for (int i = 0; i < KM_KEYS; i++) {
        char buf[KS_KEY_MAX + 1];
        ks_key_t k = km_key(m, i, buf, sizeof(buf));
        ks_shard_t *sh = ks_shard_at(ks, k.shard);
        ks_shard_lock(sh);
        ks_entry_t *e = ks_find_write(ks, &k, INT64_MIN);
        if (e)
            ks_entry_delete(ks, e);
        ks_shard_unlock(sh);
    }
    if (single && (ks_total_memory(ks) != 0 || ks_total_keys(ks) != 0))
        KM_FAIL("empty keyspace still charged %llu bytes, %llu keys", (unsigned long long)ks_total_memory(ks),
                (unsigned long long)ks_total_keys(ks));
    if (ops)
        *ops += m->ops;
    free(m);
}

#endif
