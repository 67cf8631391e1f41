/*
 * keyspace.c - sharded hash tables of typed entries.  See keyspace.h for the
 * contract; this file explains the mechanics.
 *
 * Each shard holds:
 *   - a chained hash table with a power-of-two number of buckets, grown when
 *     the load reaches 1 and shrunk below 1/8 (rehashed all at once: shards
 *     keep tables small enough that this takes microseconds);
 *   - `vol`, a dense array of the entries with an expiry; each knows its
 *     index in it, so adding and removing is O(1) (swap with the last) and
 *     sampling for active expiry and volatile-lru is an array index.
 *     allkeys-lru samples the table itself, as Redis samples its dict: a
 *     random bucket, the next non-empty one from there, a random entry of
 *     its chain (no array of every entry: 8 bytes a key and more at its
 *     growth, saved);
 *   - the snapshot state (see "Snapshots" below).
 *
 * An entry is one allocation: a 48-byte header, the value's area, then the
 * key and a NUL.  The area holds a small value itself when its type allows
 * (types.h, inline_size: a counter, a rate limiter's state), else the
 * value's pointer and the bytes its type reported when last measured.  The
 * header keeps only the low 32 bits of the key's hash (bucket, shard and a
 * first comparison), the key's length and the inline flag in 16 bits, and a
 * 16-bit snapshot epoch; an entry's charge is computed from its type and key
 * rather than stored.
 *
 * Memory charged per entry: the entry's allocation, one bucket pointer, one
 * `vol` slot, plus what the type reports of a value stored apart.
 */
#include "core/keyspace.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/persist_fmt.h"
#include "core/rng.h"

#define KS_MIN_BUCKETS 16         /* a shard's table never shrinks below this */
#define KS_EVICT_SAMPLES 5        /* keys sampled per eviction, as Redis's maxmemory-samples */
#define KS_EVICT_SCAN 64          /* entries looked at when every sample was a key to keep */
#define KS_EXPIRE_REPEAT_PCT 25   /* resample a shard while > 25% of samples were expired */
#define KS_EXPIRE_STEP_BUDGET 4   /* a step samples at most 4x its shards' first rounds */
#define KS_EXPIRE_BATCH 32        /* samples whose memory is fetched ahead together */

#define KF_INLINE 0x8000u         /* klen_f: the value lives in the entry's area */
#define KF_KLEN 0x07ffu           /* klen_f: the key's length (<= KS_KEY_MAX) */

struct ks_entry {
    struct ks_entry *next;        /* hash chain */
    const ks_type_t *type;
    int64_t expire_ms;            /* KS_NO_EXPIRY or absolute ms */
    uint32_t hash;                /* low 32 bits of the key's hash (ks_key) */
    uint32_t vidx;                /* position + 1 in shard->vol, 0 = no expiry */
    uint32_t lru;                 /* last access, seconds (wraps; compared by difference) */
    uint32_t snap_slot;           /* index + 1 into shard->items while pinned */
    uint16_t snap_epoch;          /* snapshot epoch this entry has been handled for */
    uint16_t klen_f;              /* key length | KF_INLINE */
    /* the value's area (area_size(type) bytes: the value, or heap_val_t),
     * then the key, then NUL */
    _Alignas(16) unsigned char data[];
};
_Static_assert(sizeof(struct ks_entry) == 48, "the entry header is 48 bytes (44 used; 16-aligned for the value)");
_Static_assert(KS_KEY_MAX <= KF_KLEN, "a key's length fits klen_f");

/* The area of an entry whose value is a separate allocation. */
typedef struct heap_val {
    void *p;
    size_t mem;                   /* type->size(p) when last measured (charged) */
} heap_val_t;

static size_t area_size(const ks_type_t *t)
{
    size_t n = t->inline_size ? ((size_t)t->inline_size + 7u) & ~(size_t)7u : 0;
    return n < sizeof(heap_val_t) ? sizeof(heap_val_t) : n;
}

static inline bool is_inline(const ks_entry_t *e) { return e->klen_f & KF_INLINE; }
static inline size_t entry_klen(const ks_entry_t *e) { return e->klen_f & KF_KLEN; }
static inline heap_val_t *heap_of(const ks_entry_t *e) { return (heap_val_t *)(void *)e->data; }
static inline char *key_of(const ks_entry_t *e) { return (char *)e->data + area_size(e->type); }
static inline void *value_of(const ks_entry_t *e) { return is_inline(e) ? (void *)e->data : heap_of(e)->p; }

/* Whether `value` of type t is to be kept inside its entry. */
static bool value_inline(const ks_type_t *t, const void *value)
{
    return t->inline_size && value && (!t->inline_ok || t->inline_ok(value));
}

/* An element of a snapshot in progress: either a pinned entry to be encoded
 * when the snapshot reaches it, or the bytes of an entry's record captured
 * because a write was about to change it (buf NULL and len 0 when the entry
 * was captured into an earlier item). */
typedef struct snap_item {
    ks_entry_t *entry;
    uint8_t *buf;
    size_t len;
} snap_item_t;

struct ks_shard {
    pthread_mutex_t lock;
#ifdef TALLY_DEBUG_LOCKS
    _Atomic uintptr_t owner;      /* the holder's thread_tag address, 0 when free */
#endif
    ks_entry_t **table;
    size_t mask;                  /* buckets - 1 */
    size_t n;                     /* entries in the table */
    ks_entry_t **vol;
    size_t nvol, vol_cap;
    size_t mem;
    rng_t rng;                    /* sampling for expiry and eviction */

    uint16_t snap_active;         /* epoch of the snapshot in progress, 0 if none */
    bool snap_collected;          /* pinned entries have been listed */
    bool snap_failed;             /* a capture ran out of memory */
    snap_item_t *items;
    size_t nitems, items_cap, items_next;
} __attribute__((aligned(64)));

struct ks {
    unsigned bits;
    unsigned nshards;
    uint64_t seed;
    _Atomic uint64_t keys;
    _Atomic uint64_t mem;
    uint64_t maxmemory;
    ks_evict_policy_t policy;
    _Atomic unsigned evict_rr;    /* next shard to try evicting from */
    unsigned expire_next;         /* next shard ks_expire_step visits */
    uint16_t epoch;               /* last snapshot epoch handed out (wraps: see ks_snapshot_begin) */
    ks_shard_t *shards;
};

/* ------------------------------------------------------------------------ */
/* Creation                                                                 */
/* ------------------------------------------------------------------------ */

static bool shard_init(ks_shard_t *sh, uint64_t seed)
{
    memset(sh, 0, sizeof(*sh));
    if (pthread_mutex_init(&sh->lock, NULL) != 0)
        return false;
    sh->table = calloc(KS_MIN_BUCKETS, sizeof(*sh->table));
    if (!sh->table)
        return false;
    sh->mask = KS_MIN_BUCKETS - 1;
    rng_seed(&sh->rng, seed);
    return true;
}

ks_t *ks_create(unsigned shard_bits, uint64_t seed)
{
    if (shard_bits > 12)
        return NULL;
    ks_t *ks = calloc(1, sizeof(*ks));
    if (!ks)
        return NULL;
    ks->bits = shard_bits;
    ks->nshards = 1u << shard_bits;
    ks->seed = seed;
    ks->shards = aligned_alloc(64, sizeof(ks_shard_t) * ks->nshards);
    if (!ks->shards) {
        free(ks);
        return NULL;
    }
    for (unsigned i = 0; i < ks->nshards; i++) {
        if (!shard_init(&ks->shards[i], seed + i + 1)) {
            for (unsigned j = 0; j <= i; j++)
                free(ks->shards[j].table);
            free(ks->shards);
            free(ks);
            return NULL;
        }
    }
    return ks;
}

static void entry_free(ks_entry_t *e)
{
    if (!is_inline(e) && e->type->free)
        e->type->free(heap_of(e)->p);
    free(e);
}

void ks_free(ks_t *ks)
{
    if (!ks)
        return;
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_shard_t *sh = &ks->shards[i];
        for (size_t b = 0; b <= sh->mask; b++)
            for (ks_entry_t *e = sh->table[b], *next; e; e = next) {
                next = e->next;
                entry_free(e);
            }
        for (size_t j = 0; j < sh->nitems; j++)
            free(sh->items[j].buf);
        free(sh->items);
        free(sh->vol);
        free(sh->table);
        pthread_mutex_destroy(&sh->lock);
    }
    free(ks->shards);
    free(ks);
}

unsigned ks_shard_count(const ks_t *ks) { return ks->nshards; }
ks_shard_t *ks_shard_at(ks_t *ks, unsigned index) { return &ks->shards[index]; }

ks_key_t ks_key(const ks_t *ks, const void *p, size_t len)
{
    ks_key_t k;
    k.p = p;
    k.len = len;
    k.hash = tally_xxh64(p, len, ks->seed);
    /* entries keep the low 32 bits: the shard is their top bits, the
     * bucket their low bits (the two meet only past 2^(32 - bits) buckets
     * in a shard, where chains get longer but stay correct) */
    k.shard = ks->bits ? (unsigned)((uint32_t)k.hash >> (32 - ks->bits)) : 0;
    return k;
}

uint64_t ks_total_keys(const ks_t *ks) { return atomic_load_explicit(&ks->keys, memory_order_relaxed); }
uint64_t ks_total_memory(const ks_t *ks) { return atomic_load_explicit(&ks->mem, memory_order_relaxed); }

void ks_set_maxmemory(ks_t *ks, uint64_t bytes, ks_evict_policy_t policy)
{
    ks->maxmemory = bytes;
    ks->policy = policy;
}

uint64_t ks_hash_seed(const ks_t *ks) { return ks->seed; }

uint64_t ks_maxmemory(const ks_t *ks) { return ks->maxmemory; }
ks_evict_policy_t ks_evict_policy(const ks_t *ks) { return ks->policy; }

bool ks_over_limit(const ks_t *ks)
{
    return ks->maxmemory && ks_total_memory(ks) >= ks->maxmemory;
}

/* ------------------------------------------------------------------------ */
/* Locking                                                                  */
/* ------------------------------------------------------------------------ */

#ifdef TALLY_DEBUG_LOCKS
/* Debug builds know which thread holds each shard lock, so that every entry
 * point asserts its caller holds the shard it touches (SQLite's
 * assert(sqlite3_mutex_held(...)) habit).  A thread is named by the address
 * of its own copy of thread_tag. */
static _Thread_local char thread_tag;
#define SHARD_HELD(sh) (atomic_load_explicit(&(sh)->owner, memory_order_relaxed) == (uintptr_t)&thread_tag)

void ks_shard_lock(ks_shard_t *sh)
{
    assert(!SHARD_HELD(sh));   /* not recursive */
    pthread_mutex_lock(&sh->lock);
    atomic_store_explicit(&sh->owner, (uintptr_t)&thread_tag, memory_order_relaxed);
}

void ks_shard_unlock(ks_shard_t *sh)
{
    assert(SHARD_HELD(sh));
    atomic_store_explicit(&sh->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&sh->lock);
}
#else
#define SHARD_HELD(sh) true
void ks_shard_lock(ks_shard_t *sh) { pthread_mutex_lock(&sh->lock); }
void ks_shard_unlock(ks_shard_t *sh) { pthread_mutex_unlock(&sh->lock); }
#endif

/* Visits the distinct shard indexes of keys[] in ascending order. */
static void for_each_key_shard(ks_t *ks, const ks_key_t *keys, size_t n, bool lock)
{
    unsigned prev = 0;
    bool first = true;
    for (;;) {
        /* smallest shard index greater than prev: n is small (a request's keys) */
        bool found = false;
        unsigned best = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned s = keys[i].shard;
            if ((first || s > prev) && (!found || s < best)) {
                best = s;
                found = true;
            }
        }
        if (!found)
            return;
        if (lock)
            ks_shard_lock(&ks->shards[best]);
        else
            ks_shard_unlock(&ks->shards[best]);
        prev = best;
        first = false;
    }
}

void ks_lock_keys(ks_t *ks, const ks_key_t *keys, size_t n) { for_each_key_shard(ks, keys, n, true); }
void ks_unlock_keys(ks_t *ks, const ks_key_t *keys, size_t n) { for_each_key_shard(ks, keys, n, false); }

void ks_lock_all(ks_t *ks)
{
    for (unsigned i = 0; i < ks->nshards; i++)
        ks_shard_lock(&ks->shards[i]);
}

void ks_unlock_all(ks_t *ks)
{
    for (unsigned i = ks->nshards; i-- > 0;)
        ks_shard_unlock(&ks->shards[i]);
}

/* ------------------------------------------------------------------------ */
/* Hash table and dense arrays                                              */
/* ------------------------------------------------------------------------ */

/* The entry's allocation and its two table slots (bucket, vol). */
static size_t type_overhead(const ks_type_t *t, size_t klen)
{
    return sizeof(ks_entry_t) + area_size(t) + klen + 1 + 2 * sizeof(void *);
}

/* Without the type: the overhead of a value stored apart (the largest but
 * for an inline value of more than 16 bytes, whose bytes its size counts). */
size_t ks_entry_overhead(size_t klen)
{
    return sizeof(ks_entry_t) + sizeof(heap_val_t) + klen + 1 + 2 * sizeof(void *);
}

/* What the entry is charged: computed, not stored. */
static size_t entry_mem(const ks_entry_t *e)
{
    return type_overhead(e->type, entry_klen(e)) + (is_inline(e) ? 0 : heap_of(e)->mem);
}

static void charge_add(ks_t *ks, ks_shard_t *sh, size_t mem)
{
    sh->mem += mem;
    atomic_fetch_add_explicit(&ks->mem, mem, memory_order_relaxed);
}

static void charge_sub(ks_t *ks, ks_shard_t *sh, size_t mem)
{
    sh->mem -= mem;
    atomic_fetch_sub_explicit(&ks->mem, mem, memory_order_relaxed);
}

/* Stores `value` in e's area (the area's previous value already released):
 * inline values are copied in and their block freed. */
static void value_store(ks_entry_t *e, void *value)
{
    if (value_inline(e->type, value)) {
        memcpy(e->data, value, e->type->inline_size);
        free(value);
        e->klen_f |= KF_INLINE;
    } else {
        heap_of(e)->p = value;
        heap_of(e)->mem = e->type->size ? e->type->size(value) : 0;
        e->klen_f &= (uint16_t)~KF_INLINE;
    }
}

static void table_resize(ks_shard_t *sh, size_t buckets)
{
    if (buckets - 1 > UINT32_MAX)
        return;   /* bucket indexes come from 32 bits of hash */
    ks_entry_t **t = calloc(buckets, sizeof(*t));
    if (!t)
        return;   /* keep the old table: longer chains, still correct */
    size_t mask = buckets - 1;
    for (size_t i = 0; i <= sh->mask; i++) {
        ks_entry_t *e = sh->table[i];
        while (e) {
            ks_entry_t *next = e->next;
            size_t b = e->hash & mask;
            e->next = t[b];
            t[b] = e;
            e = next;
        }
    }
    free(sh->table);
    sh->table = t;
    sh->mask = mask;
}

static bool array_push(ks_entry_t ***arr, size_t *n, size_t *cap, ks_entry_t *e)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        ks_entry_t **p = realloc(*arr, nc * sizeof(*p));
        if (!p)
            return false;
        *arr = p;
        *cap = nc;
    }
    (*arr)[(*n)++] = e;
    return true;
}

static void vol_remove(ks_shard_t *sh, ks_entry_t *e)
{
    if (!e->vidx)
        return;
    size_t i = e->vidx - 1;
    ks_entry_t *last = sh->vol[--sh->nvol];
    sh->vol[i] = last;
    last->vidx = (uint32_t)(i + 1);
    e->vidx = 0;
}

static ks_entry_t *table_find(ks_shard_t *sh, const ks_key_t *k)
{
    uint32_t h = (uint32_t)k->hash;
    for (ks_entry_t *e = sh->table[h & sh->mask]; e; e = e->next)
        if (e->hash == h && entry_klen(e) == k->len) {
            if (!is_inline(e))   /* the caller reads the value next: its miss overlaps the key's */
                __builtin_prefetch(heap_of(e)->p);
            if (memcmp(key_of(e), k->p, k->len) == 0)
                return e;
        }
    return NULL;
}

/* Unlinks and frees an entry.  Snapshot capture must already have happened. */
static void entry_remove(ks_t *ks, ks_shard_t *sh, ks_entry_t *e)
{
    /* the entry moved into e's place in `vol` is a random one, a cache
     * miss: fetched together with e's bucket rather than after it */
    if (e->vidx)
        __builtin_prefetch(sh->vol[sh->nvol - 1], 1);
    ks_entry_t **pp = &sh->table[e->hash & sh->mask];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;

    sh->n--;
    vol_remove(sh, e);

    charge_sub(ks, sh, entry_mem(e));
    atomic_fetch_sub_explicit(&ks->keys, 1, memory_order_relaxed);
    entry_free(e);

    if (sh->mask + 1 > KS_MIN_BUCKETS && sh->n < (sh->mask + 1) / 8)
        table_resize(sh, (sh->mask + 1) / 2);
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                */
/* ------------------------------------------------------------------------ */

/*
 * How a consistent snapshot is taken without stopping the world:
 *
 * ks_snapshot_begin() runs with every shard locked and stamps each shard
 * with a new epoch E.  From then on an entry is "handled" for E once its
 * state as of the barrier is safe: either written to the file, or copied.
 *
 *  - The first time the snapshot visits a shard it pins every entry not yet
 *    handled (snap_slot = its position in `items`) and marks it handled.
 *  - A writer about to change an entry calls capture(): if the shard's
 *    entries have not been listed yet and this one is unhandled, or if it is
 *    pinned, the writer encodes the entry's current record into `items`
 *    first.  Entries created after the barrier are born handled.
 *  - The snapshot then encodes pinned entries as it reaches them, and copies
 *    the captured bytes of the others.
 *
 * The encoded records therefore show each key exactly as it was at the
 * barrier, while the journal after the barrier holds every later change.
 */

static void record_encode(wbuf_t *out, const ks_entry_t *e)
{
    snapfmt_put_record(out, e->type->tag, key_of(e), entry_klen(e), e->expire_ms, e->type->encode, value_of(e));
}

static bool items_push(ks_shard_t *sh, snap_item_t it)
{
    if (sh->nitems == sh->items_cap) {
        size_t nc = sh->items_cap ? sh->items_cap * 2 : 64;
        snap_item_t *p = realloc(sh->items, nc * sizeof(*p));
        if (!p)
            return false;
        sh->items = p;
        sh->items_cap = nc;
    }
    sh->items[sh->nitems++] = it;
    return true;
}

static void capture(ks_shard_t *sh, ks_entry_t *e)
{
    if (!sh->snap_active)
        return;
    bool unlisted = !sh->snap_collected && e->snap_epoch != sh->snap_active;
    if (!unlisted && !e->snap_slot)
        return;
    wbuf_t b = WBUF_INIT;
    record_encode(&b, e);
    if (b.oom) {
        wbuf_free(&b);
        sh->snap_failed = true;
    }
    snap_item_t it = { NULL, b.data, b.len };
    if (e->snap_slot) {
        sh->items[e->snap_slot - 1] = it;
        e->snap_slot = 0;
    } else {
        e->snap_epoch = sh->snap_active;
        if (!items_push(sh, it)) {
            free(it.buf);
            sh->snap_failed = true;
        }
    }
}

void ks_snapshot_begin(ks_t *ks)
{
    uint16_t e = ++ks->epoch;
    if (e == 0) {
        /* 16 bits of epoch wrapped (once in 65 535 snapshots): an entry that
         * no snapshot reached since (snapshots ended before collecting its
         * shard) could carry the new epoch.  Every entry is reset, under the
         * locks the caller holds: one pass over the keys. */
        for (unsigned i = 0; i < ks->nshards; i++)
            for (size_t b = 0; b <= ks->shards[i].mask; b++)
                for (ks_entry_t *x = ks->shards[i].table[b]; x; x = x->next)
                    x->snap_epoch = 0;
        e = ++ks->epoch;   /* 0 means "no snapshot" */
    }
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_shard_t *sh = &ks->shards[i];
        sh->snap_active = e;
        sh->snap_collected = false;
        sh->snap_failed = false;
        sh->nitems = sh->items_next = 0;
    }
}

bool ks_snapshot_drain(ks_t *ks, ks_shard_t *sh, wbuf_t *out, size_t budget, uint64_t *records)
{
    assert(SHARD_HELD(sh));
    (void)ks;
    if (!sh->snap_active)
        return true;
    if (!sh->snap_collected) {
        for (size_t b = 0; b <= sh->mask; b++)
            for (ks_entry_t *e = sh->table[b]; e; e = e->next) {
                if (e->snap_epoch == sh->snap_active)
                    continue;
                e->snap_epoch = sh->snap_active;
                snap_item_t it = { e, NULL, 0 };
                if (!items_push(sh, it)) {
                    sh->snap_failed = true;
                    out->oom = true;
                    return true;
                }
                e->snap_slot = (uint32_t)sh->nitems;
            }
        sh->snap_collected = true;
    }
    size_t start = out->len;
    while (sh->items_next < sh->nitems && out->len - start < budget) {
        snap_item_t *it = &sh->items[sh->items_next++];
        if (it->entry) {
            record_encode(out, it->entry);
            it->entry->snap_slot = 0;
            it->entry = NULL;
            (*records)++;
        } else if (it->buf) {
            wbuf_put_bytes(out, it->buf, it->len);
            free(it->buf);
            it->buf = NULL;
            (*records)++;
        }
        if (out->oom)
            return true;
    }
    if (sh->snap_failed)
        out->oom = true;
    return sh->items_next == sh->nitems;
}

bool ks_snapshot_failed(ks_t *ks)
{
    for (unsigned i = 0; i < ks->nshards; i++)
        if (ks->shards[i].snap_failed)
            return true;
    return false;
}

void ks_snapshot_end(ks_t *ks)
{
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_shard_t *sh = &ks->shards[i];
        ks_shard_lock(sh);
        for (size_t j = 0; j < sh->nitems; j++) {
            if (sh->items[j].entry)
                sh->items[j].entry->snap_slot = 0;
            free(sh->items[j].buf);
        }
        sh->nitems = sh->items_next = 0;
        sh->snap_active = 0;
        sh->snap_collected = false;
        if (sh->items_cap > 1024) {
            free(sh->items);
            sh->items = NULL;
            sh->items_cap = 0;
        }
        ks_shard_unlock(sh);
    }
}

/* ------------------------------------------------------------------------ */
/* Entries                                                                  */
/* ------------------------------------------------------------------------ */

static ks_shard_t *entry_shard(ks_t *ks, const ks_entry_t *e)
{
    return &ks->shards[ks->bits ? e->hash >> (32 - ks->bits) : 0];
}

static bool expired(const ks_entry_t *e, int64_t now_ms)
{
    return e->expire_ms != KS_NO_EXPIRY && e->expire_ms <= now_ms;
}

static void entry_delete(ks_t *ks, ks_shard_t *sh, ks_entry_t *e)
{
    capture(sh, e);
    entry_remove(ks, sh, e);
}

ks_entry_t *ks_find(ks_t *ks, const ks_key_t *k, int64_t now_ms)
{
    ks_shard_t *sh = &ks->shards[k->shard];
    assert(SHARD_HELD(sh));
    ks_entry_t *e = table_find(sh, k);
    if (!e)
        return NULL;
    if (expired(e, now_ms)) {
        entry_delete(ks, sh, e);
        return NULL;
    }
    e->lru = (uint32_t)(now_ms / 1000);
    return e;
}

ks_entry_t *ks_find_write(ks_t *ks, const ks_key_t *k, int64_t now_ms)
{
    ks_entry_t *e = ks_find(ks, k, now_ms);
    if (e)
        capture(&ks->shards[k->shard], e);
    return e;
}

void ks_entry_prepare_write(ks_t *ks, ks_entry_t *e)
{
    assert(SHARD_HELD(entry_shard(ks, e)));
    capture(entry_shard(ks, e), e);
}

ks_entry_t *ks_add(ks_t *ks, const ks_key_t *k, const ks_type_t *type, void *value,
                   int64_t expire_ms, int64_t now_ms)
{
    ks_shard_t *sh = &ks->shards[k->shard];
    assert(SHARD_HELD(sh));
    if (k->len > KS_KEY_MAX || sh->n >= UINT32_MAX - 1)
        return NULL;
    size_t area = area_size(type);
    ks_entry_t *e = malloc(sizeof(*e) + area + k->len + 1);
    if (!e)
        return NULL;
    memset(e, 0, sizeof(*e));
    e->type = type;
    char *key = key_of(e);
    memcpy(key, k->p, k->len);
    key[k->len] = '\0';
    e->klen_f = (uint16_t)k->len;
    e->hash = (uint32_t)k->hash;
    e->expire_ms = KS_NO_EXPIRY;
    e->lru = (uint32_t)(now_ms / 1000);
    e->snap_epoch = sh->snap_active;   /* born after the barrier: not in this snapshot */
    sh->n++;
    value_store(e, value);   /* the caller's value is the keyspace's from here */
    size_t b = e->hash & sh->mask;
    e->next = sh->table[b];
    sh->table[b] = e;
    atomic_fetch_add_explicit(&ks->keys, 1, memory_order_relaxed);
    charge_add(ks, sh, entry_mem(e));
    if (expire_ms != KS_NO_EXPIRY)
        ks_entry_set_expire(ks, e, expire_ms);
    if (sh->n > sh->mask + 1)
        table_resize(sh, (sh->mask + 1) * 2);
    return e;
}

void ks_entry_delete(ks_t *ks, ks_entry_t *e)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    entry_delete(ks, sh, e);
}

void ks_entry_set_expire(ks_t *ks, ks_entry_t *e, int64_t expire_ms)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    if (expire_ms < 0)
        expire_ms = 1;   /* already in the past: expires on next access */
    if (e->expire_ms == expire_ms)
        return;
    capture(sh, e);
    e->expire_ms = expire_ms;
    if (expire_ms == KS_NO_EXPIRY) {
        vol_remove(sh, e);
    } else if (!e->vidx) {
        if (array_push(&sh->vol, &sh->nvol, &sh->vol_cap, e))
            e->vidx = (uint32_t)sh->nvol;
        /* on allocation failure the key still expires lazily on access */
    }
}

void ks_entry_changed(ks_t *ks, ks_entry_t *e)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    if (is_inline(e)) {
        assert(!e->type->size || e->type->size(e->data) == e->type->inline_size);
        return;   /* an inline value's charge never changes */
    }
    size_t mem = e->type->size ? e->type->size(heap_of(e)->p) : 0;
    charge_sub(ks, sh, heap_of(e)->mem);
    charge_add(ks, sh, mem);
    heap_of(e)->mem = mem;
}

void ks_entry_replace_value(ks_t *ks, ks_entry_t *e, void *value)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    capture(sh, e);
    charge_sub(ks, sh, entry_mem(e));
    if (!is_inline(e) && e->type->free)
        e->type->free(heap_of(e)->p);
    value_store(e, value);
    charge_add(ks, sh, entry_mem(e));
}

const ks_type_t *ks_entry_type(const ks_entry_t *e) { return e->type; }
void *ks_entry_value(const ks_entry_t *e) { return value_of(e); }
int64_t ks_entry_expire(const ks_entry_t *e) { return e->expire_ms; }
size_t ks_entry_memory(const ks_entry_t *e) { return entry_mem(e); }

const char *ks_entry_key(const ks_entry_t *e, size_t *len)
{
    if (len)
        *len = entry_klen(e);
    return key_of(e);
}

/* ------------------------------------------------------------------------ */
/* Iteration, expiry, eviction                                              */
/* ------------------------------------------------------------------------ */

static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
    return __builtin_bswap64(v);
}

void ks_shard_scan(ks_t *ks, ks_shard_t *sh, uint64_t *cursor, size_t max_buckets,
                   int64_t now_ms, ks_visit_fn fn, void *ud)
{
    assert(SHARD_HELD(sh));
    (void)ks;
    uint64_t v = *cursor;
    if (max_buckets == 0)
        max_buckets = 1;
    do {
        for (ks_entry_t *e = sh->table[v & sh->mask]; e; e = e->next)
            if (!expired(e, now_ms))
                fn(ud, e);
        /* reverse-binary increment over the masked bits (Redis dictScan) */
        v |= ~(uint64_t)sh->mask;
        v = rev64(v);
        v++;
        v = rev64(v);
    } while (v != 0 && --max_buckets > 0);
    *cursor = v;
}

/* Samples n volatile entries of sh at random and deletes the expired ones;
 * returns how many it deleted.  Each sample is two cache misses (a random
 * slot of a large array, then a random entry): a batch's slots, then their
 * entries, are fetched ahead together instead of one miss after another
 * (bench/expire_micro: about 30% less CPU per expired key under a stream
 * of short-lived keys). */
static size_t expire_sample(ks_t *ks, ks_shard_t *sh, int64_t now_ms, size_t n)
{
    size_t at[KS_EXPIRE_BATCH];
    size_t hit = 0;
    while (n > 0 && sh->nvol > 0) {
        size_t m = n < KS_EXPIRE_BATCH ? n : KS_EXPIRE_BATCH;
        n -= m;
        for (size_t j = 0; j < m; j++) {
            at[j] = (size_t)rng_below(&sh->rng, sh->nvol);
            __builtin_prefetch(&sh->vol[at[j]]);
        }
        for (size_t j = 0; j < m; j++)
            __builtin_prefetch(sh->vol[at[j]]);
        for (size_t j = 0; j < m && sh->nvol > 0; j++) {
            /* a deletion moved the last slot into the deleted one's place:
             * a sample past the shortened array is drawn again */
            size_t i = at[j] < sh->nvol ? at[j] : (size_t)rng_below(&sh->rng, sh->nvol);
            ks_entry_t *e = sh->vol[i];
            if (expired(e, now_ms)) {
                entry_delete(ks, sh, e);
                hit++;
            }
        }
    }
    return hit;
}

size_t ks_expire_step(ks_t *ks, int64_t now_ms, size_t samples, unsigned shards)
{
    size_t deleted = 0;
    size_t budget = (size_t)shards * samples * KS_EXPIRE_STEP_BUDGET;
    for (unsigned visited = 0; visited < shards && budget > 0; visited++) {
        ks_shard_t *sh = &ks->shards[ks->expire_next];
        ks->expire_next = (ks->expire_next + 1) & (ks->nshards - 1);
        ks_shard_lock(sh);
        for (int round = 0; round < 16 && sh->nvol > 0 && budget > 0; round++) {
            size_t n = samples < sh->nvol ? samples : sh->nvol;
            if (n > budget)
                n = budget;
            budget -= n;
            size_t hit = expire_sample(ks, sh, now_ms, n);
            deleted += hit;
            if (hit * 100 <= n * KS_EXPIRE_REPEAT_PCT)
                break;
        }
        ks_shard_unlock(sh);
    }
    return deleted;
}

/* An entry of a non-empty shard at random, Redis-dict style: from a random
 * bucket, the first non-empty one on (wrapping), and a random entry of its
 * chain.  Entries after runs of empty buckets, and in short chains, are a
 * little likelier; with the load between 1/8 and 1 the runs are short. */
static ks_entry_t *table_sample(ks_shard_t *sh)
{
    size_t b = (size_t)rng_below(&sh->rng, sh->mask + 1);
    while (!sh->table[b])
        b = (b + 1) & sh->mask;
    size_t len = 0;
    for (ks_entry_t *e = sh->table[b]; e; e = e->next)
        len++;
    ks_entry_t *e = sh->table[b];
    for (size_t i = (size_t)rng_below(&sh->rng, len); i > 0; i--)
        e = e->next;
    return e;
}

/* Whether e is one of keep[0..nkeep). */
static bool kept(const ks_entry_t *e, const ks_key_t *keep, size_t nkeep)
{
    for (size_t i = 0; i < nkeep; i++)
        if (keep[i].len == entry_klen(e) && memcmp(keep[i].p, key_of(e), keep[i].len) == 0)
            return true;
    return false;
}

size_t ks_evict_keep(ks_t *ks, int64_t now_ms, const ks_key_t *keep, size_t nkeep, ks_evict_fn on_evict, void *ud)
{
    if (ks->policy == KS_NOEVICTION)
        return 0;
    uint32_t now_s = (uint32_t)(now_ms / 1000);
    for (unsigned tries = 0; tries < ks->nshards; tries++) {
        unsigned i = atomic_fetch_add_explicit(&ks->evict_rr, 1, memory_order_relaxed) & (ks->nshards - 1);
        ks_shard_t *sh = &ks->shards[i];
        ks_shard_lock(sh);
        bool vol = ks->policy == KS_VOLATILE_LRU;
        size_t n = vol ? sh->nvol : sh->n;
        ks_entry_t *best = NULL;
        uint32_t best_idle = 0;
        for (int s = 0; n && s < KS_EVICT_SAMPLES; s++) {
            ks_entry_t *e = vol ? sh->vol[rng_below(&sh->rng, n)] : table_sample(sh);
            uint32_t idle = now_s - e->lru;
            if ((!best || idle > best_idle) && !kept(e, keep, nkeep)) {
                best = e;
                best_idle = idle;
            }
        }
        /* the samples were all kept: another, in order */
        size_t looked = 0;
        for (size_t k = 0; vol && !best && k < n && k < KS_EVICT_SCAN; k++)
            if (!kept(sh->vol[k], keep, nkeep))
                best = sh->vol[k];
        for (size_t b = 0; !vol && !best && b <= sh->mask && looked < KS_EVICT_SCAN; b++)
            for (ks_entry_t *e = sh->table[b]; e && !best && looked < KS_EVICT_SCAN; e = e->next, looked++)
                if (!kept(e, keep, nkeep))
                    best = e;
        if (!best) {
            ks_shard_unlock(sh);
            continue;
        }
        size_t freed = entry_mem(best);
        if (on_evict)
            on_evict(ud, key_of(best), entry_klen(best));
        entry_delete(ks, sh, best);
        ks_shard_unlock(sh);
        return freed;
    }
    return 0;
}

size_t ks_evict(ks_t *ks, int64_t now_ms, ks_evict_fn on_evict, void *ud)
{
    return ks_evict_keep(ks, now_ms, NULL, 0, on_evict, ud);
}
