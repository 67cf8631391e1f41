/*
 * keyspace.c - sharded hash tables of typed entries.  See keyspace.h for the
 * contract; this comment explains the mechanics, keyspace_int.h which file
 * holds which part.
 *
 * Each shard holds:
 *   - its entries, as cells of 4 KiB chunks of one size class each
 *     (keyspace_cells.c: classes 8 bytes apart up to 256 bytes), each
 *     named by a 32-bit handle (the chunk's index, the cell's);
 *   - an open-addressing table of handles (linear probing, any number of
 *     slots, at most 7/8 full: grown by a quarter past it, halved below
 *     1/8, rebuilt all at once; deletion shifts the run back, no
 *     tombstones).  A key's home is its hash's top bits scaled to the
 *     table's size, so homes are in hash order and walks (SCAN, snapshots)
 *     go in that order whatever the size.  Growing by a quarter keeps the
 *     load between 7/10 and 7/8 (doubling: 7/16 to 7/8).
 *     A slot is 4 bytes: the handle in its low bits and the top bits of
 *     the key's hash in the others (the more the fewer chunks the shard
 *     has: 19 bits with 1M keys over 256 shards, 16 with 10M), which
 *     filter lookups and give an entry's home slot without reading it
 *     while the table has at most 2^tag-bits slots (a larger one hashes
 *     the key again);
 *   - `vol`, a dense array of the entries with an expiry and their expiries
 *     (12 bytes each: handle and expiry), kept in blocks of 1024 that never
 *     move: only keys with a TTL pay for one.  Each such entry knows its
 *     index in it, so adding and removing is O(1) (swap with the last) and
 *     sampling for active expiry and volatile-lru is an index.
 *     allkeys-lru samples the table itself, as Redis its dict;
 *   - the snapshot state (see "Snapshots" in keyspace_snap.c).
 *
 * An entry is one cell: a 6-byte header (16 bits of LRU clock, a one-byte
 * type id, an 8-bit snapshot epoch, the key's length and flags), the key,
 * padding to the value's alignment, the value's area and, for an entry
 * with an expiry, its index in `vol` (4 bytes).  The area holds a small
 * value itself when its type allows (types.h, inline_size: a counter, a
 * rate limiter's state), else the value's pointer and the bytes its type
 * reported when last measured.  Neither the hash nor the expiry is stored
 * in the entry: the hash is computed again from the key (right after the
 * header) when an entry's shard or home is needed, the expiry lives in
 * `vol`.  A 10-byte counter key is a 24-byte cell (6 + 10 + 8) and a
 * 4-byte slot; with a TTL a 32-byte cell (the vol index), a 4-byte slot
 * and a 12-byte vol slot.  An entry made without an expiry has room for
 * no vol index unless its class's rounding left it: given an expiry, it
 * moves to a cell of the next class (ks_entry_set_expire says where).  A
 * type whose values differ in size (types.h, inline_len: a rate limiter's
 * state, 8 bytes for GCRA, 16 to 24 for a window or a token bucket, 48
 * with reservations) gives a value of at most NARROW_MAX bytes a narrow
 * entry (KF_NARROW: an area of the value's length rounded to 8, kept in
 * KF_AREA, so a 10-byte GCRA key is 24 bytes too and a sliding window's
 * 40); such an entry holds no larger value (ks_entry_value_fits), a writer
 * of one makes a new entry.
 *
 * Memory charged per entry: its cell, one table slot, one `vol` slot when
 * it has an expiry, plus what the type reports of a value stored apart.
 */
#include "core/keyspace_int.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"

/* ---- type ids ------------------------------------------------------------
 * An entry names its type by a one-byte id instead of an 8-byte pointer.
 * Ids are process-wide: a type gets its tag as id when that is free, else
 * the first free one, the first time a keyspace stores a value of it. */
_Atomic(const ks_type_t *) ks_type_ids[256];
static pthread_mutex_t type_ids_lock = PTHREAD_MUTEX_INITIALIZER;

/* The type's id, registering it; -1 when 256 types are registered. */
static int type_id(const ks_type_t *t)
{
    if (atomic_load_explicit(&ks_type_ids[t->tag], memory_order_acquire) == t)
        return t->tag;
    for (int i = 0; i < 256; i++)
        if (atomic_load_explicit(&ks_type_ids[i], memory_order_acquire) == t)
            return i;
    int id = -1;
    pthread_mutex_lock(&type_ids_lock);
    for (int i = 0; i < 256 && id < 0; i++)
        if (atomic_load_explicit(&ks_type_ids[i], memory_order_relaxed) == t)
            id = i;
    if (id < 0 && !atomic_load_explicit(&ks_type_ids[t->tag], memory_order_relaxed))
        id = t->tag;
    for (int i = 0; i < 256 && id < 0; i++)
        if (!atomic_load_explicit(&ks_type_ids[i], memory_order_relaxed))
            id = i;
    if (id >= 0)
        atomic_store_explicit(&ks_type_ids[id], t, memory_order_release);
    pthread_mutex_unlock(&type_ids_lock);
    return id;
}

/* Whether `value` of type t is to be kept inside its entry. */
static bool value_inline(const ks_type_t *t, const void *value)
{
    return t->inline_size && value && (!t->inline_ok || t->inline_ok(value));
}

/* The bytes an inline value takes (types.h, inline_len). */
static size_t value_len(const ks_type_t *t, const void *value)
{
    return t->inline_len ? t->inline_len(value) : t->inline_size;
}

/* The narrow area `value` of type t, new, gets (0: none, the type's
 * area): an inline value of at most NARROW_MAX bytes, rounded to 8, of a
 * type whose area is larger. */
static size_t value_narrow(const ks_type_t *t, const void *value)
{
    if (!t->inline_len || !value_inline(t, value))
        return 0;
    size_t n = ((size_t)t->inline_len(value) + 7u) & ~(size_t)7u;
    return n && n <= NARROW_MAX && n < area_size(t) ? n : 0;
}

/* The expiry kept for a requested one (not KS_NO_EXPIRY): a time before
 * the epoch's first millisecond is 1 (expired at the next access), a time
 * past KS_EXPIRE_MAX is KS_EXPIRE_MAX (keyspace.h). */
static inline int64_t expire_clamp(int64_t expire_ms)
{
    return expire_ms < 1 ? 1 : expire_ms > KS_EXPIRE_MAX ? KS_EXPIRE_MAX : expire_ms;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                 */
/* ------------------------------------------------------------------------ */

static bool shard_init(ks_shard_t *sh, uint64_t seed, uint64_t rng_seed_value)
{
    memset(sh, 0, sizeof(*sh));
    if (pthread_mutex_init(&sh->lock, NULL) != 0)
        return false;
    sh->slots = ks_table_alloc(KS_MIN_SLOTS);
    if (!sh->slots) {
        pthread_mutex_destroy(&sh->lock);
        return false;
    }
    sh->nslots = KS_MIN_SLOTS;
    sh->hbits = CELL_BITS;   /* one chunk's handles */
    sh->tbits = 32 - CELL_BITS;
    sh->seed = seed;
    rng_seed(&sh->rng, rng_seed_value);
    return true;
}

static void shard_destroy(ks_shard_t *sh);

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
        if (!shard_init(&ks->shards[i], seed, seed + i + 1)) {
            for (unsigned j = 0; j < i; j++)
                shard_destroy(&ks->shards[j]);
            free(ks->shards);
            free(ks);
            return NULL;
        }
    }
    return ks;
}

/* Frees a value stored apart. */
static void value_free(const ks_entry_t *e)
{
    const ks_type_t *t = type_of(e);
    if (!is_inline(e) && t->free)
        t->free(heap_of(e)->p);
}

static void shard_destroy(ks_shard_t *sh)
{
    for (size_t i = 0; i < sh->nslots; i++)
        if (sh->slots[i])
            value_free(slot_entry(sh, sh->slots[i]));
    ks_cells_destroy(sh);
    for (size_t j = sh->items_next; j < sh->nitems; j++)
        free(sh->items[j].buf);
    free(sh->items);
    for (size_t j = 0; j < sh->nvblk; j++)
        free(sh->vblk[j]);
    free(sh->vblk);
    ks_table_free(sh->slots, sh->nslots);
    pthread_mutex_destroy(&sh->lock);
}

void ks_free(ks_t *ks)
{
    if (!ks)
        return;
    for (unsigned i = 0; i < ks->nshards; i++)
        shard_destroy(&ks->shards[i]);
    free(ks->shards);
    free(ks);
}

/* ------------------------------------------------------------------------ */
/* Keyspace                                                                 */
/* ------------------------------------------------------------------------ */

unsigned ks_shard_count(const ks_t *ks) { return ks->nshards; }
ks_shard_t *ks_shard_at(ks_t *ks, unsigned index) { return &ks->shards[index]; }

ks_key_t ks_key(const ks_t *ks, const void *p, size_t len)
{
    ks_key_t k;
    k.p = p;
    k.len = len;
    k.hash = tally_xxh64(p, len, ks->seed);
    /* the shard is the top bits of the low 32 bits, the home slot in the
     * shard's table the low bits of the high 32: the two never correlate */
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
/* SHARD_HELD's and SOME_SHARD_HELD's state (keyspace_int.h) */
_Thread_local char ks_thread_tag;
_Thread_local unsigned ks_shards_held;

void ks_shard_lock(ks_shard_t *sh)
{
    assert(!SHARD_HELD(sh));   /* not recursive */
    pthread_mutex_lock(&sh->lock);
    atomic_store_explicit(&sh->owner, (uintptr_t)&ks_thread_tag, memory_order_relaxed);
    ks_shards_held++;
}

void ks_shard_unlock(ks_shard_t *sh)
{
    assert(SHARD_HELD(sh));
    ks_shards_held--;
    atomic_store_explicit(&sh->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&sh->lock);
}
#else
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
/* Memory and values                                                        */
/* ------------------------------------------------------------------------ */

/* Without the type: an upper bound of what an entry costs besides its
 * value's size (the cell with the largest area, its table slot and a `vol`
 * slot), so that a request asking this much room never gets less. */
size_t ks_entry_overhead(size_t klen)
{
    size_t area = KS_INLINE_MAX > sizeof(heap_val_t) ? KS_INLINE_MAX : sizeof(heap_val_t);
    return ks_cell_class_size(cell_need(klen, 16, area, true), 16) + sizeof(uint32_t) + sizeof(vol_slot_t);
}

/* What the entry is charged, computed rather than stored: its cell, its
 * table slot, its `vol` slot when it has an expiry, and a value stored
 * apart as its type last measured it. */
size_t ks_entry_mem(const ks_entry_t *e)
{
    return cell_size(e) + sizeof(uint32_t) + (is_vol(e) ? sizeof(vol_slot_t) : 0) + (is_inline(e) ? 0 : heap_of(e)->mem);
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
 * inline values are copied in and their block freed.  The caller has
 * checked value_inline() for a type whose values are all inline. */
static void value_store(ks_entry_t *e, void *value)
{
    const ks_type_t *t = type_of(e);
    if (value_inline(t, value)) {
        assert(value_len(t, value) <= entry_area(e));
        memcpy(data_of(e), value, value_len(t, value));
        free(value);
        e->klen_f |= KF_INLINE;
    } else {
        assert(!always_inline(t) && !is_narrow(e));
        heap_of(e)->p = value;
        heap_of(e)->mem = t->size ? t->size(value) : 0;
        e->klen_f &= (uint16_t)~KF_INLINE;
    }
}

/* ------------------------------------------------------------------------ */
/* Entries                                                                  */
/* ------------------------------------------------------------------------ */

/* A lookup in sh's table, kept here with ks_find, its caller: inlined
 * there (the table's other operations are in keyspace_table.c). */
static ks_entry_t *table_find(ks_shard_t *sh, const ks_key_t *k)
{
    uint32_t tag = hash_tag(k->hash, sh->tbits);
    size_t i = home_of_hash(sh, k->hash, sh->nslots);
    for (uint32_t s; (s = sh->slots[i]) != 0; i = slot_next(i, sh->nslots)) {
        if (slot_tag(sh, s) != tag)
            continue;
        ks_entry_t *e = slot_entry(sh, s);
        if (entry_klen(e) == k->len) {
            if (!is_inline(e))   /* the caller reads the value next: its miss overlaps the key's */
                __builtin_prefetch(heap_of(e)->p);
            if (memcmp(key_of(e), k->p, k->len) == 0)
                return e;
        }
    }
    return NULL;
}

/* Unlinks and frees an entry.  Snapshot capture must already have happened. */
static void entry_remove(ks_t *ks, ks_shard_t *sh, ks_entry_t *e)
{
    ks_slots_delete(sh, slot_find(sh, cell_handle(e), entry_hash(sh->seed, e)));

    sh->n--;
    charge_sub(ks, sh, ks_entry_mem(e));
    ks_vol_remove(sh, e);
    atomic_fetch_sub_explicit(&ks->keys, 1, memory_order_relaxed);
    value_free(e);
    ks_cell_free(sh, e);

    if (sh->nslots > KS_MIN_SLOTS && sh->n < sh->nslots / 8)
        ks_table_resize(sh, sh->nslots / 2 < KS_MIN_SLOTS ? KS_MIN_SLOTS : sh->nslots / 2);
}

static ks_shard_t *entry_shard(const ks_t *ks, const ks_entry_t *e)
{
    if (!ks->bits)
        return &ks->shards[0];
    return &ks->shards[(uint32_t)entry_hash(ks->seed, e) >> (32 - ks->bits)];
}

void ks_shard_delete(ks_t *ks, ks_shard_t *sh, ks_entry_t *e)
{
    ks_capture(sh, e);
    entry_remove(ks, sh, e);
}

ks_entry_t *ks_find(ks_t *ks, const ks_key_t *k, int64_t now_ms)
{
    ks_shard_t *sh = &ks->shards[k->shard];
    assert(SHARD_HELD(sh));
    ks_entry_t *e = table_find(sh, k);
    if (!e)
        return NULL;
    if (expired(sh, e, now_ms)) {
        ks_shard_delete(ks, sh, e);
        return NULL;
    }
    lru_touch(e, now_ms);
    return e;
}

ks_entry_t *ks_find_write(ks_t *ks, const ks_key_t *k, int64_t now_ms)
{
    ks_entry_t *e = ks_find(ks, k, now_ms);
    if (e)
        ks_capture(&ks->shards[k->shard], e);
    return e;
}

void ks_entry_prepare_write(ks_t *ks, ks_entry_t *e)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    ks_capture(sh, e);
}

/* Sets e's expiry (not KS_NO_EXPIRY, > 0), room in the vol map and for
 * the vol index in its cell reserved. */
static void vol_set(ks_t *ks, ks_shard_t *sh, ks_entry_t *e, int64_t expire_ms)
{
    if (is_vol(e)) {
        vol_put(vol_of(sh, e), cell_handle(e), expire_ms);
        return;
    }
    assert(cell_size(e) >= entry_need(e, true));
    charge_sub(ks, sh, ks_entry_mem(e));
    vol_add(sh, e, expire_ms);
    charge_add(ks, sh, ks_entry_mem(e));
}

ks_entry_t *ks_add(ks_t *ks, const ks_key_t *k, const ks_type_t *type, void *value,
                   int64_t expire_ms, int64_t now_ms)
{
    ks_shard_t *sh = &ks->shards[k->shard];
    assert(SHARD_HELD(sh));
    if (k->len > KS_KEY_MAX || sh->n >= UINT32_MAX - 1)
        return NULL;
    if (always_inline(type) && !value_inline(type, value))
        return NULL;   /* no room for anything but the value's bytes */
    int tid = type_id(type);
    if (tid < 0)
        return NULL;
    /* room first, so that a failure changes nothing */
    if ((sh->n + 1) * 8 > sh->nslots * 7 && !ks_table_resize(sh, grown_size(sh->nslots)) && sh->n + 1 > sh->nslots - 1)
        return NULL;   /* a table must keep an empty slot */
    if (expire_ms != KS_NO_EXPIRY && !ks_vol_reserve(sh))
        return NULL;
    size_t narrow = value_narrow(type, value);
    /* (the cell may take a bit of the slots' tag: the slot is made after) */
    size_t align = narrow ? 8 : area_align(type);   /* as entry_align will say */
    ks_entry_t *e = ks_cell_alloc(sh, cell_need(k->len, align, narrow ? narrow : area_size(type), expire_ms != KS_NO_EXPIRY),
                                  align);
    if (!e)
        return NULL;
    e->tid = (uint8_t)tid;
    lru_touch(e, now_ms);
    e->klen_f = (uint16_t)(k->len | (narrow ? KF_NARROW | (narrow / 8u - 1u) << KF_AREA_SHIFT : 0));
    e->snap_epoch = sh->snap_active;   /* born after the barrier: not in this snapshot */
    memcpy(key_of(e), k->p, k->len);
    value_store(e, value);   /* the caller's value is the keyspace's from here */
    slot_insert(sh->slots, sh->nslots, slot_make(cell_handle(e), hash_tag(k->hash, sh->tbits), sh->hbits),
                home_of_hash(sh, k->hash, sh->nslots));
    sh->n++;
    atomic_fetch_add_explicit(&ks->keys, 1, memory_order_relaxed);
    charge_add(ks, sh, ks_entry_mem(e));
    if (expire_ms != KS_NO_EXPIRY)
        vol_set(ks, sh, e, expire_clamp(expire_ms));
    return e;
}

void ks_entry_delete(ks_t *ks, ks_entry_t *e)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    ks_shard_delete(ks, sh, e);
}

/* Moves e to a cell with room for a vol index; NULL (e unchanged) when
 * there is no memory for one. */
static ks_entry_t *entry_grow(ks_shard_t *sh, ks_entry_t *e)
{
    ks_entry_t *ne = ks_cell_alloc(sh, entry_need(e, true), entry_align(e));
    if (!ne)
        return NULL;
    memcpy(ne, e, entry_need(e, false));
    size_t i = slot_find(sh, cell_handle(e), entry_hash(sh->seed, e));
    sh->slots[i] = slot_make(cell_handle(ne), slot_tag(sh, sh->slots[i]), sh->hbits);
    ks_cell_free(sh, e);
    return ne;
}

bool ks_entry_set_expire(ks_t *ks, ks_entry_t **ep, int64_t expire_ms)
{
    ks_entry_t *e = *ep;
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    if (expire_ms != KS_NO_EXPIRY)
        expire_ms = expire_clamp(expire_ms);   /* a time in the past expires on next access */
    if (entry_expire(sh, e) == expire_ms)
        return true;
    if (expire_ms != KS_NO_EXPIRY && !is_vol(e) && !ks_vol_reserve(sh))
        return false;
    ks_capture(sh, e);
    if (expire_ms != KS_NO_EXPIRY && !is_vol(e) && cell_size(e) < entry_need(e, true)) {
        size_t mem = ks_entry_mem(e);
        ks_entry_t *ne = entry_grow(sh, e);
        if (!ne)
            return false;
        *ep = e = ne;
        charge_sub(ks, sh, mem);
        charge_add(ks, sh, ks_entry_mem(e));
    }
    if (expire_ms == KS_NO_EXPIRY) {
        charge_sub(ks, sh, ks_entry_mem(e));
        ks_vol_remove(sh, e);
        charge_add(ks, sh, ks_entry_mem(e));
    } else {
        vol_set(ks, sh, e, expire_ms);
    }
    return true;
}

void ks_entry_changed(ks_t *ks, ks_entry_t *e)
{
    if (is_inline(e)) {
        assert(SHARD_HELD(entry_shard(ks, e)));
        assert(!type_of(e)->size || type_of(e)->size(data_of(e)) == value_len(type_of(e), data_of(e)));
        return;   /* an inline value's charge never changes */
    }
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    const ks_type_t *t = type_of(e);
    size_t mem = t->size ? t->size(heap_of(e)->p) : 0;
    charge_sub(ks, sh, heap_of(e)->mem);
    charge_add(ks, sh, mem);
    heap_of(e)->mem = mem;
}

void ks_entry_replace_value(ks_t *ks, ks_entry_t *e, void *value)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    const ks_type_t *t = type_of(e);
    /* a type whose values are all inline has no room for another, nor a narrow area */
    assert(ks_entry_value_fits(e, value));
    ks_capture(sh, e);
    charge_sub(ks, sh, ks_entry_mem(e));
    if (!is_inline(e) && t->free)
        t->free(heap_of(e)->p);
    value_store(e, value);
    charge_add(ks, sh, ks_entry_mem(e));
}

bool ks_entry_value_fits(const ks_entry_t *e, const void *value)
{
    assert(SOME_SHARD_HELD());
    const ks_type_t *t = type_of(e);
    if (is_narrow(e))
        return value_inline(t, value) && value_len(t, value) <= narrow_area(e);
    return !always_inline(t) || value_inline(t, value);
}

const ks_type_t *ks_entry_type(const ks_entry_t *e)
{
    assert(SOME_SHARD_HELD());
    return type_of(e);
}

void *ks_entry_value(const ks_entry_t *e)
{
    assert(SOME_SHARD_HELD());
    return value_of(e);
}

size_t ks_entry_memory(const ks_entry_t *e)
{
    assert(SOME_SHARD_HELD());
    return ks_entry_mem(e);
}

int64_t ks_entry_expire(const ks_t *ks, const ks_entry_t *e)
{
    assert(SHARD_HELD(entry_shard(ks, e)));
    return is_vol(e) ? entry_expire(entry_shard(ks, e), e) : KS_NO_EXPIRY;
}

const char *ks_entry_key(const ks_entry_t *e, size_t *len)
{
    assert(SOME_SHARD_HELD());
    if (len)
        *len = entry_klen(e);
    return key_of(e);
}
