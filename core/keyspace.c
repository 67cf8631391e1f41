/*
 * keyspace.c - sharded hash tables of typed entries.  See keyspace.h for the
 * contract; this file explains the mechanics.
 *
 * Each shard holds:
 *   - an open-addressing table of entry pointers (linear probing, any
 *     number of slots, at most 7/8 full: grown by a quarter past it, halved
 *     below 1/8, rehashed all at once; deletion shifts the run back, no
 *     tombstones).  A key's home is its hash's top bits scaled to the
 *     table's size, so homes are in hash order and walks (SCAN, snapshots)
 *     go in that order whatever the size.  Growing by a quarter keeps the
 *     load between 7/10 and 7/8 (doubling: 7/16 to 7/8), about 10 bytes of
 *     table a key instead of 13-17.
 *     A slot is 8 bytes: the entry's address (below 2^47, 16-aligned) and
 *     the top 21 bits of the key's hash in the bits the address leaves
 *     free, which give an entry's home slot without reading it (tables up
 *     to 2^21 slots a shard; larger ones hash the key again) and filter
 *     lookups;
 *   - `vol`, a dense array of the entries with an expiry and their expiries
 *     (12 bytes each: address and expiry packed, see vol_slot_t), kept in
 *     blocks of 1024 that never move: only keys with a TTL pay for one.
 *     Each such entry knows its index in it, so adding and removing is O(1)
 *     (swap with the last) and sampling for active expiry and volatile-lru
 *     is an index.  allkeys-lru samples the table itself, as Redis its dict;
 *   - the snapshot state (see "Snapshots" below).
 *
 * An entry is one allocation: an 8-byte header (24 bits of LRU clock, a
 * one-byte type id, the key's length and flags, a 16-bit snapshot epoch),
 * the value's area, its index in `vol` (4 bytes), then the key and a NUL.  The area holds a small value
 * itself when its type allows (types.h, inline_size: a counter, a rate
 * limiter's state), else the value's pointer and the bytes its type reported
 * when last measured.  Neither the hash nor the expiry is stored in the
 * entry: the hash is computed again from the key (in the entry's first cache
 * line) when an entry's shard or home is needed, the expiry lives in `vol`.
 * A 10-byte counter key is a 32-byte allocation (8 + 8 + 4 + 11) and an
 * 8-byte slot.  A type whose values differ in size (types.h, inline_len: a
 * rate limiter's state, 8 bytes for GCRA, 16 to 24 for a window or a token
 * bucket, 48 with reservations) gives a value of at most NARROW_MAX bytes
 * a narrow entry (KF_NARROW: an area at 8 of the value's length rounded to
 * 8, kept in KF_AREA, so a 10-byte GCRA key is 32 bytes too and a sliding
 * window's 48); such an entry holds no larger value (ks_entry_value_fits),
 * a writer of one makes a new entry.
 *
 * Memory charged per entry: the entry's allocation as the allocator rounds
 * it, one table slot, one `vol` slot when it has an expiry, plus what the
 * type reports of a value stored apart.
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

#define KS_MIN_SLOTS 16           /* a shard's table never shrinks below this */
#define KS_EVICT_SAMPLES 5        /* keys sampled per eviction, as Redis's maxmemory-samples */
#define KS_EVICT_SCAN 64          /* entries looked at when every sample was a key to keep */
#define KS_EXPIRE_REPEAT_PCT 25   /* resample a shard while > 25% of samples were expired */
#define KS_EXPIRE_STEP_BUDGET 4   /* a step samples at most 4x its shards' first rounds */

#define KF_INLINE 0x8000u         /* klen_f: the value lives in the entry's area */
#define KF_VOL 0x4000u            /* klen_f: the entry has an expiry (in the shard's vol array) */
#define KF_NARROW 0x2000u         /* klen_f: the area is at 8, KF_AREA long (types.h, inline_len) */
#define KF_AREA 0x1800u           /* klen_f, with KF_NARROW: the area's length in 8-byte words, less 1 */
#define KF_AREA_SHIFT 11
#define NARROW_MAX 32u            /* the longest narrow area: 4 words, what KF_AREA holds */
#define KF_KLEN 0x07ffu           /* klen_f: the key's length (<= KS_KEY_MAX) */
#define LRU_BITS 24               /* lru_tid: last access in seconds, 24 bits (wraps every 194 days) */
#define LRU_MASK ((1u << LRU_BITS) - 1)

/* A table slot: the entry's address | the hash's top 21 bits spread over the
 * address's 4 low (alignment) bits and its 17 top bits (above 2^47). */
#define SLOT_PTR 0x00007ffffffffff0ULL
#define TAG_BITS 21
#define TAG_SPACE ((uint64_t)1 << TAG_BITS)

struct ks_entry {
    uint32_t lru_tid;             /* last access (seconds, LRU_BITS, wraps) << 8 | type id */
    uint16_t klen_f;              /* key length | KF_INLINE | KF_VOL | KF_NARROW | KF_AREA */
    uint16_t snap_epoch;          /* snapshot epoch this entry has been handled for */
    /* at data_off(type): the value's area (area_size(type) bytes: the
     * value, or heap_val_t; with KF_NARROW, KF_AREA bytes at 8: a value
     * whose inline_len is at most that), the uint32_t index + 1 in the shard's vol
     * array (0: none), the key, NUL */
};
_Static_assert(sizeof(struct ks_entry) == 8, "the entry header is 8 bytes");
_Static_assert(KS_KEY_MAX <= KF_KLEN, "a key's length fits klen_f");
_Static_assert(NARROW_MAX == 8 * ((KF_AREA >> KF_AREA_SHIFT) + 1), "KF_AREA holds every narrow area");

/* The area of an entry whose value is a separate allocation. */
typedef struct heap_val {
    void *p;
    size_t mem;                   /* type->size(p) when last measured (charged) */
} heap_val_t;

/* A type's values are all kept inline: its area is just the value. */
static inline bool always_inline(const ks_type_t *t) { return t->inline_size && !t->inline_ok; }

static size_t area_size(const ks_type_t *t)
{
    size_t n = t->inline_size ? ((size_t)t->inline_size + 7u) & ~(size_t)7u : 0;
    if (always_inline(t))
        return n;   /* never a heap value: no room kept for one */
    return n < sizeof(heap_val_t) ? sizeof(heap_val_t) : n;
}

/* ---- type ids ------------------------------------------------------------
 * An entry names its type by a one-byte id instead of an 8-byte pointer.
 * Ids are process-wide: a type gets its tag as id when that is free, else
 * the first free one, the first time a keyspace stores a value of it. */
static _Atomic(const ks_type_t *) type_ids[256];
static pthread_mutex_t type_ids_lock = PTHREAD_MUTEX_INITIALIZER;

/* The type's id, registering it; -1 when 256 types are registered. */
static int type_id(const ks_type_t *t)
{
    if (atomic_load_explicit(&type_ids[t->tag], memory_order_acquire) == t)
        return t->tag;
    for (int i = 0; i < 256; i++)
        if (atomic_load_explicit(&type_ids[i], memory_order_acquire) == t)
            return i;
    int id = -1;
    pthread_mutex_lock(&type_ids_lock);
    for (int i = 0; i < 256 && id < 0; i++)
        if (atomic_load_explicit(&type_ids[i], memory_order_relaxed) == t)
            id = i;
    if (id < 0 && !atomic_load_explicit(&type_ids[t->tag], memory_order_relaxed))
        id = t->tag;
    for (int i = 0; i < 256 && id < 0; i++)
        if (!atomic_load_explicit(&type_ids[i], memory_order_relaxed))
            id = i;
    if (id >= 0)
        atomic_store_explicit(&type_ids[id], t, memory_order_release);
    pthread_mutex_unlock(&type_ids_lock);
    return id;
}

static inline const ks_type_t *type_of(const ks_entry_t *e)
{
    return atomic_load_explicit(&type_ids[e->lru_tid & 0xff], memory_order_relaxed);
}

static inline uint32_t lru_now(int64_t now_ms) { return (uint32_t)(now_ms / 1000) & LRU_MASK; }
static inline void lru_touch(ks_entry_t *e, int64_t now_ms) { e->lru_tid = (lru_now(now_ms) << 8) | (e->lru_tid & 0xff); }
static inline uint32_t lru_idle(const ks_entry_t *e, uint32_t now) { return (now - (e->lru_tid >> 8)) & LRU_MASK; }

/* Where the value's area starts.  Entries are malloc'd, so 16-aligned; a
 * value whose size is a multiple of 16 may need that alignment (a token
 * bucket's __int128 level) and starts at 16, any other at 8, right after
 * the header (a type's alignment divides its size: an 8-byte counter is at
 * most 8-aligned). */
static inline size_t data_off(const ks_type_t *t)
{
    return t->inline_size && t->inline_size % 16 == 0 ? 16 : sizeof(ks_entry_t);
}

static inline bool is_inline(const ks_entry_t *e) { return e->klen_f & KF_INLINE; }
static inline bool is_vol(const ks_entry_t *e) { return e->klen_f & KF_VOL; }
static inline size_t entry_klen(const ks_entry_t *e) { return e->klen_f & KF_KLEN; }
static inline bool is_narrow(const ks_entry_t *e) { return e->klen_f & KF_NARROW; }
/* An entry's area: where it starts, how long it is. */
static inline size_t entry_data_off(const ks_entry_t *e) { return is_narrow(e) ? sizeof(ks_entry_t) : data_off(type_of(e)); }
static inline size_t narrow_area(const ks_entry_t *e) { return 8u * (((e->klen_f & KF_AREA) >> KF_AREA_SHIFT) + 1u); }
static inline size_t entry_area(const ks_entry_t *e) { return is_narrow(e) ? narrow_area(e) : area_size(type_of(e)); }
static inline unsigned char *data_of(const ks_entry_t *e) { return (unsigned char *)(uintptr_t)e + entry_data_off(e); }
static inline heap_val_t *heap_of(const ks_entry_t *e) { return (heap_val_t *)(void *)data_of(e); }
static inline uint32_t *vidx_of(const ks_entry_t *e)
{
    return (uint32_t *)(uintptr_t)((char *)(uintptr_t)e + entry_data_off(e) + entry_area(e));
}
static inline char *key_of(const ks_entry_t *e) { return (char *)(vidx_of(e) + 1); }
static inline void *value_of(const ks_entry_t *e) { return is_inline(e) ? (void *)data_of(e) : heap_of(e)->p; }

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

/* ---- slots ---------------------------------------------------------------- */

static inline uint32_t hash_tag(uint64_t hash) { return (uint32_t)(hash >> (64 - TAG_BITS)); }
static inline ks_entry_t *slot_entry(uint64_t s) { return (ks_entry_t *)(uintptr_t)(s & SLOT_PTR); }
static inline uint32_t slot_tag(uint64_t s) { return (uint32_t)(s & 0xf) | (uint32_t)(s >> 47) << 4; }
static inline uint64_t slot_make(const ks_entry_t *e, uint32_t tag)
{
    return (uint64_t)(uintptr_t)e | (tag & 0xf) | (uint64_t)(tag >> 4) << 47;
}
static inline size_t slot_next(size_t i, size_t n) { return i + 1 == n ? 0 : i + 1; }

/* Whether an entry's address leaves room for the tag. */
static inline bool slot_fits(const ks_entry_t *e) { return ((uint64_t)(uintptr_t)e & ~SLOT_PTR) == 0; }

/* The captured bytes of an entry's record for a snapshot in progress
 * (a write was about to change the entry). */
typedef struct snap_item {
    uint8_t *buf;
    size_t len;
} snap_item_t;

/* An entry of the vol array, 12 bytes: the entry's address and its expiry
 * packed in three 32-bit words.  An entry's address is below 2^47 and
 * 16-aligned (slot_fits, checked when it is made), 43 significant bits;
 * the expiry takes the other 53, exact from 1 ms to KS_EXPIRE_MAX (2^53 - 1
 * ms after the epoch, the year 287 396): later ones are clamped to it
 * (expire_clamp).  The first 8 bytes hold the address's bits and the
 * expiry's low 21, the last 4 the expiry's high 32.  16-byte slots
 * {address, expiry} cost 4.3 bytes more a volatile key (1M GCRA keys). */
typedef struct vol_slot {
    uint32_t w[3];
} vol_slot_t;
_Static_assert(sizeof(vol_slot_t) == 12, "a vol slot is 12 bytes");

#define VOL_ADDR_BITS 43
#define VOL_ADDR_MASK (((uint64_t)1 << VOL_ADDR_BITS) - 1)

static inline uint64_t vol_lo(const vol_slot_t *v)
{
    uint64_t lo;
    memcpy(&lo, v->w, sizeof(lo));
    return lo;
}
static inline ks_entry_t *vol_entry(const vol_slot_t *v)
{
    return (ks_entry_t *)(uintptr_t)((vol_lo(v) & VOL_ADDR_MASK) << 4);
}
static inline int64_t vol_expire(const vol_slot_t *v)
{
    return (int64_t)(vol_lo(v) >> VOL_ADDR_BITS | (uint64_t)v->w[2] << (64 - VOL_ADDR_BITS));
}
static inline void vol_put(vol_slot_t *v, ks_entry_t *e, int64_t expire_ms)
{
    assert(expire_ms >= 1 && expire_ms <= KS_EXPIRE_MAX && ((uint64_t)(uintptr_t)e & ~SLOT_PTR) == 0);
    uint64_t lo = (uint64_t)(uintptr_t)e >> 4 | (uint64_t)expire_ms << VOL_ADDR_BITS;
    memcpy(v->w, &lo, sizeof(lo));
    v->w[2] = (uint32_t)((uint64_t)expire_ms >> (64 - VOL_ADDR_BITS));
}

/* The expiry kept for a requested one (not KS_NO_EXPIRY): a time before
 * the epoch's first millisecond is 1 (expired at the next access), a time
 * past KS_EXPIRE_MAX is KS_EXPIRE_MAX (keyspace.h). */
static inline int64_t expire_clamp(int64_t expire_ms)
{
    return expire_ms < 1 ? 1 : expire_ms > KS_EXPIRE_MAX ? KS_EXPIRE_MAX : expire_ms;
}

struct ks_shard {
    pthread_mutex_t lock;
#ifdef TALLY_DEBUG_LOCKS
    _Atomic uintptr_t owner;      /* the holder's thread_tag address, 0 when free */
#endif
    uint64_t *slots;              /* the table: slot_make() values, 0 = empty */
    size_t nslots;                /* the table's size (any, >= KS_MIN_SLOTS) */
    size_t n;                     /* entries in the table */
    vol_slot_t **vblk;            /* the entries with an expiry: blocks of the vol array */
    size_t nvblk, vblk_cap;       /* blocks in use, the directory's room */
    size_t nvol, vol_cap;         /* entries in the vol array, its slots */
    size_t mem;
    rng_t rng;                    /* sampling for expiry and eviction */
    uint64_t seed;                /* the keyspace's, to hash keys again */

    uint16_t snap_active;         /* epoch of the snapshot in progress, 0 if none */
    bool snap_walked;             /* the table walk has visited every home slot */
    bool snap_failed;             /* a capture ran out of memory */
    uint64_t snap_cursor;         /* the table walk's cursor (ks_shard_scan's order) */
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

static bool shard_init(ks_shard_t *sh, uint64_t seed, uint64_t rng_seed_value)
{
    memset(sh, 0, sizeof(*sh));
    if (pthread_mutex_init(&sh->lock, NULL) != 0)
        return false;
    sh->slots = calloc(KS_MIN_SLOTS, sizeof(*sh->slots));
    if (!sh->slots) {
        pthread_mutex_destroy(&sh->lock);
        return false;
    }
    sh->nslots = KS_MIN_SLOTS;
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

static void entry_free(ks_entry_t *e)
{
    const ks_type_t *t = type_of(e);
    if (!is_inline(e) && t->free)
        t->free(heap_of(e)->p);
    free(e);
}

static void shard_destroy(ks_shard_t *sh)
{
    for (size_t i = 0; i < sh->nslots; i++)
        if (sh->slots[i])
            entry_free(slot_entry(sh->slots[i]));
    for (size_t j = sh->items_next; j < sh->nitems; j++)
        free(sh->items[j].buf);
    free(sh->items);
    for (size_t j = 0; j < sh->nvblk; j++)
        free(sh->vblk[j]);
    free(sh->vblk);
    free(sh->slots);
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
/* Debug builds know which thread holds each shard lock, so that every entry
 * point asserts its caller holds the shard it touches (SQLite's
 * assert(sqlite3_mutex_held(...)) habit).  A thread is named by the address
 * of its own copy of thread_tag. */
static _Thread_local char thread_tag;
static _Thread_local unsigned shards_held;   /* how many shard locks this thread holds */
#define SHARD_HELD(sh) (atomic_load_explicit(&(sh)->owner, memory_order_relaxed) == (uintptr_t)&thread_tag)
/* An entry's accessors take no keyspace to find its shard by; they check
 * that the caller holds some shard lock (an entry read without any is read
 * while another thread may change or free it). */
#define SOME_SHARD_HELD() (shards_held > 0)

void ks_shard_lock(ks_shard_t *sh)
{
    assert(!SHARD_HELD(sh));   /* not recursive */
    pthread_mutex_lock(&sh->lock);
    atomic_store_explicit(&sh->owner, (uintptr_t)&thread_tag, memory_order_relaxed);
    shards_held++;
}

void ks_shard_unlock(ks_shard_t *sh)
{
    assert(SHARD_HELD(sh));
    shards_held--;
    atomic_store_explicit(&sh->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&sh->lock);
}
#else
#define SHARD_HELD(sh) true
#define SOME_SHARD_HELD() true
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
/* Hash table and vol array                                                 */
/* ------------------------------------------------------------------------ */

/* The bytes the allocator really hands out for a request of n: jemalloc's
 * size classes (8, 16, then 16 apart up to 128, then four classes per
 * doubling), which tallyd links. */
static size_t alloc_class(size_t n)
{
    if (n <= 8)
        return 8;
    if (n <= 128)
        return (n + 15) & ~(size_t)15;
    size_t spacing = (size_t)1 << (63 - __builtin_clzll((unsigned long long)(n - 1)) - 2);
    return (n + spacing - 1) & ~(spacing - 1);
}

static size_t entry_alloc_size(const ks_type_t *t, size_t narrow, size_t klen)
{
    if (narrow)
        return sizeof(ks_entry_t) + narrow + sizeof(uint32_t) + klen + 1;
    return data_off(t) + area_size(t) + sizeof(uint32_t) + klen + 1;
}

/* Without the type: an upper bound of what an entry costs besides its
 * value's size (the allocation with the largest area, its table slot and
 * a `vol` slot), so that a request asking this much room never gets less. */
size_t ks_entry_overhead(size_t klen)
{
    size_t area = KS_INLINE_MAX > sizeof(heap_val_t) ? KS_INLINE_MAX : sizeof(heap_val_t);
    return alloc_class(16 + area + sizeof(uint32_t) + klen + 1) + sizeof(uint64_t) + sizeof(vol_slot_t);
}

/* What the entry is charged, computed rather than stored: its allocation
 * as the allocator rounds it, its table slot, its `vol` slot when it has
 * an expiry, and a value stored apart as its type last measured it. */
static size_t entry_mem(const ks_entry_t *e)
{
    return alloc_class(entry_alloc_size(type_of(e), is_narrow(e) ? narrow_area(e) : 0, entry_klen(e))) + sizeof(uint64_t) +
           (is_vol(e) ? sizeof(vol_slot_t) : 0) + (is_inline(e) ? 0 : heap_of(e)->mem);
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

/* The entry's key hashed again (ks_key's hash). */
static uint64_t entry_hash(uint64_t seed, const ks_entry_t *e)
{
    return tally_xxh64(key_of(e), entry_klen(e), seed);
}

/* Homes.  A key's home slot in a table of n slots scales its hash's top
 * bits to [0, n) (multiply and shift, not mask), so n can be any size and
 * homes follow the hash's order: the table can grow by a quarter instead of
 * doubling, and a walk in tag order (SCAN, snapshots) does not depend on
 * the table's size.  Up to 2^21 slots the home comes from the slot's tag
 * (the hash's top 21 bits); a larger table uses the top 32 bits, hashing
 * the key again when only the slot is at hand. */
static inline size_t home_of_hash(uint64_t hash, size_t n)
{
    if (n <= TAG_SPACE)
        return (size_t)(((uint64_t)hash_tag(hash) * n) >> TAG_BITS);
    return (size_t)(((hash >> 32) * (uint64_t)n) >> 32);
}

/* The home slot of the entry in slot s, in a table of n slots. */
static inline size_t slot_home(uint64_t seed, uint64_t s, size_t n)
{
    if (n <= TAG_SPACE)
        return (size_t)(((uint64_t)slot_tag(s) * n) >> TAG_BITS);
    return home_of_hash(entry_hash(seed, slot_entry(s)), n);
}

/* The first and last home slots of the keys whose tag is t. */
static inline size_t tag_home_lo(uint64_t t, size_t n)
{
    return n <= TAG_SPACE ? (size_t)((t * n) >> TAG_BITS) : (size_t)(((t << (32 - TAG_BITS)) * n) >> 32);
}
static inline size_t tag_home_hi(uint64_t t, size_t n)
{
    if (n <= TAG_SPACE)
        return (size_t)((t * n) >> TAG_BITS);
    return (size_t)((((t + 1) << (32 - TAG_BITS)) - 1) * n >> 32);
}

/* The size a table of n slots grows to past 7/8 full: a quarter more,
 * rounded up to what the allocator hands out anyway.  The load then stays
 * between 7/10 and 7/8 as keys are added, where doubling would leave it
 * anywhere from 7/16. */
static size_t grown_size(size_t n)
{
    return alloc_class((n + n / 4) * sizeof(uint64_t)) / sizeof(uint64_t);
}

/* Puts slot value s in its run (there is an empty slot). */
static void slot_insert(uint64_t *slots, size_t n, uint64_t s, size_t home)
{
    size_t i = home;
    while (slots[i])
        i = slot_next(i, n);
    slots[i] = s;
}

static bool table_resize(ks_shard_t *sh, size_t nslots)
{
    if (nslots > UINT32_MAX)
        return false;   /* homes come from 32 bits of hash */
    uint64_t *t = calloc(nslots, sizeof(*t));
    if (!t)
        return false;   /* keep the old table: fuller, still correct */
    for (size_t i = 0; i < sh->nslots; i++)
        if (sh->slots[i])
            slot_insert(t, nslots, sh->slots[i], slot_home(sh->seed, sh->slots[i], nslots));
    free(sh->slots);
    sh->slots = t;
    sh->nslots = nslots;
    return true;
}

/* Empties slot i, moving back the entries of its run that may move
 * (linear probing's deletion: no tombstones). */
static void slots_delete(uint64_t seed, uint64_t *slots, size_t n, size_t i)
{
    size_t j = i;
    for (;;) {
        j = slot_next(j, n);
        if (!slots[j])
            break;
        size_t k = slot_home(seed, slots[j], n);
        /* the entry at j stays when its home is cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        slots[i] = slots[j];
        i = j;
    }
    slots[i] = 0;
}

static ks_entry_t *table_find(ks_shard_t *sh, const ks_key_t *k)
{
    uint32_t tag = hash_tag(k->hash);
    size_t i = home_of_hash(k->hash, sh->nslots);
    for (uint64_t s; (s = sh->slots[i]) != 0; i = slot_next(i, sh->nslots)) {
        if (slot_tag(s) != tag)
            continue;
        ks_entry_t *e = slot_entry(s);
        if (entry_klen(e) == k->len) {
            if (!is_inline(e))   /* the caller reads the value next: its miss overlaps the key's */
                __builtin_prefetch(heap_of(e)->p);
            if (memcmp(key_of(e), k->p, k->len) == 0)
                return e;
        }
    }
    return NULL;
}

/* ---- the vol array ------------------------------------------------------- */

/* The vol array is kept in blocks of VOL_BLOCK slots, found through a
 * small directory, rather than as one array grown by realloc: a grown
 * array is copied and the old one freed, and what the allocator keeps of
 * the copies outlasts a load (measured right after 1M GCRA keys, RSS per
 * key went from 66.8 to 74.5 bytes when the array grew by a quarter
 * instead of doubling: four times as many copies).  Blocks are never
 * moved, so the slack is at most one block a shard, whatever the count,
 * where a doubled array was anywhere from half to all full (about 21 bytes
 * a volatile key on average; 27 at 10M keys over 256 shards, each holding
 * 39 000 in room for 65 536).  A block is 12 KiB, one of jemalloc's small
 * classes: from 16 KiB on an allocation is "large" and jemalloc adds a
 * page to it to vary where it starts in its page (cache-oblivious), which
 * 16 KiB blocks paid as 4 bytes a key at 1M keys.  The first block grows
 * by doubling from VOL_MIN slots, so that a shard with few volatile keys
 * keeps a small array. */
#define VOL_BLOCK_SHIFT 10
#define VOL_BLOCK ((size_t)1 << VOL_BLOCK_SHIFT)
#define VOL_MIN 16
_Static_assert(VOL_BLOCK * sizeof(vol_slot_t) == 12288, "a vol block is jemalloc's 12 KiB class");

static inline vol_slot_t *vol_at(const ks_shard_t *sh, size_t i)
{
    return &sh->vblk[i >> VOL_BLOCK_SHIFT][i & (VOL_BLOCK - 1)];
}

/* Makes room for one more entry in the vol array. */
static bool vol_reserve(ks_shard_t *sh)
{
    if (sh->nvol < sh->vol_cap)
        return true;
    if (sh->nvol >= UINT32_MAX - 1)
        return false;   /* the entry's index is 32 bits (index + 1) */
    if (sh->nvblk == sh->vblk_cap && (sh->nvblk == 0 || sh->vol_cap >= VOL_BLOCK)) {
        size_t nc = sh->vblk_cap ? sh->vblk_cap * 2 : 1;
        vol_slot_t **d = realloc(sh->vblk, nc * sizeof(*d));
        if (!d)
            return false;
        sh->vblk = d;
        sh->vblk_cap = nc;
    }
    if (sh->vol_cap < VOL_BLOCK) {
        size_t nc = sh->vol_cap ? sh->vol_cap * 2 : VOL_MIN;
        vol_slot_t *p = realloc(sh->nvblk ? sh->vblk[0] : NULL, nc * sizeof(*p));
        if (!p)
            return false;
        sh->vblk[0] = p;
        sh->nvblk = 1;
        sh->vol_cap = nc;
        return true;
    }
    vol_slot_t *p = malloc(VOL_BLOCK * sizeof(*p));
    if (!p)
        return false;
    sh->vblk[sh->nvblk++] = p;
    sh->vol_cap += VOL_BLOCK;
    return true;
}

/* Adds e (room reserved, not in the array). */
static void vol_add(ks_shard_t *sh, ks_entry_t *e, int64_t expire_ms)
{
    vol_put(vol_at(sh, sh->nvol++), e, expire_ms);
    *vidx_of(e) = (uint32_t)sh->nvol;
    e->klen_f |= KF_VOL;
}

/* Gives back room the vol array no longer needs, with hysteresis: the last
 * block once half a block more is free before it, the first block (alone)
 * halved below a quarter full, so that keys coming and going around a
 * boundary do not allocate and free at every step. */
static void vol_trim(ks_shard_t *sh)
{
    if (sh->nvblk > 1) {
        if (sh->nvol + VOL_BLOCK / 2 < (sh->nvblk - 1) * VOL_BLOCK) {
            free(sh->vblk[--sh->nvblk]);
            sh->vol_cap -= VOL_BLOCK;
        }
        return;
    }
    if (sh->vol_cap > 4 * VOL_MIN && sh->nvol < sh->vol_cap / 4) {
        vol_slot_t *p = realloc(sh->vblk[0], sh->vol_cap / 2 * sizeof(*p));
        if (p) {
            sh->vblk[0] = p;
            sh->vol_cap /= 2;
        }
    }
}

static void vol_remove(ks_shard_t *sh, ks_entry_t *e)
{
    if (!is_vol(e))
        return;
    uint32_t *vi = vidx_of(e);
    vol_slot_t *slot = vol_at(sh, *vi - 1), *last = vol_at(sh, --sh->nvol);
    if (slot != last) {
        *slot = *last;
        *vidx_of(vol_entry(slot)) = *vi;
    }
    *vi = 0;
    e->klen_f &= (uint16_t)~KF_VOL;
    vol_trim(sh);
}

static inline vol_slot_t *vol_of(const ks_shard_t *sh, const ks_entry_t *e)
{
    return vol_at(sh, *vidx_of(e) - 1);
}

static inline int64_t entry_expire(const ks_shard_t *sh, const ks_entry_t *e)
{
    return is_vol(e) ? vol_expire(vol_of(sh, e)) : KS_NO_EXPIRY;
}

/* Unlinks and frees an entry.  Snapshot capture must already have happened. */
static void entry_remove(ks_t *ks, ks_shard_t *sh, ks_entry_t *e)
{
    size_t i = home_of_hash(entry_hash(sh->seed, e), sh->nslots);
    while (slot_entry(sh->slots[i]) != e) {
        assert(sh->slots[i]);
        i = slot_next(i, sh->nslots);
    }
    slots_delete(sh->seed, sh->slots, sh->nslots, i);

    sh->n--;
    charge_sub(ks, sh, entry_mem(e));
    vol_remove(sh, e);
    atomic_fetch_sub_explicit(&ks->keys, 1, memory_order_relaxed);
    entry_free(e);

    if (sh->nslots > KS_MIN_SLOTS && sh->n < sh->nslots / 8)
        table_resize(sh, sh->nslots / 2 < KS_MIN_SLOTS ? KS_MIN_SLOTS : sh->nslots / 2);
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
 *  - The snapshot walks each shard's table home slot by home slot, in
 *    ks_shard_scan's cursor order, and writes every entry not yet handled
 *    (marking it handled).  That order visits every entry present for the
 *    whole walk at least once, across any resizes in between (Redis's
 *    dictScan guarantee); the epoch keeps an entry from being written twice.
 *  - A writer about to change an unhandled entry calls capture(), which
 *    encodes the entry's current record into `items` and marks it handled.
 *    Entries created after the barrier are born handled.
 *  - An entry unhandled when the walk reaches it is therefore unchanged since
 *    the barrier; one deleted in between was captured before.
 *
 * The encoded records therefore show each key exactly as it was at the
 * barrier, while the journal after the barrier holds every later change.
 * Nothing is kept per key but the 16-bit epoch, and nothing is listed: a
 * snapshot's memory is the records captured ahead of the walk.
 */

static void record_encode(wbuf_t *out, const ks_shard_t *sh, const ks_entry_t *e)
{
    const ks_type_t *t = type_of(e);
    snapfmt_put_record(out, t->tag, key_of(e), entry_klen(e), entry_expire(sh, e), t->encode, value_of(e));
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
    if (!sh->snap_active || e->snap_epoch == sh->snap_active)
        return;
    e->snap_epoch = sh->snap_active;
    wbuf_t b = WBUF_INIT;
    record_encode(&b, sh, e);
    if (b.oom) {
        wbuf_free(&b);
        sh->snap_failed = true;
        return;
    }
    snap_item_t it = { b.data, b.len };
    if (!items_push(sh, it)) {
        free(it.buf);
        sh->snap_failed = true;
    }
}

void ks_snapshot_begin(ks_t *ks)
{
    uint16_t e = ++ks->epoch;
    if (e == 0) {
        /* 16 bits of epoch wrapped (once in 65 535 snapshots): an entry that
         * no snapshot reached since (snapshots ended before walking its
         * shard) could carry the new epoch.  Every entry is reset, under the
         * locks the caller holds: one pass over the keys. */
        for (unsigned i = 0; i < ks->nshards; i++)
            for (size_t j = 0; j < ks->shards[i].nslots; j++)
                if (ks->shards[i].slots[j])
                    slot_entry(ks->shards[i].slots[j])->snap_epoch = 0;
        e = ++ks->epoch;   /* 0 means "no snapshot" */
    }
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_shard_t *sh = &ks->shards[i];
        sh->snap_active = e;
        sh->snap_walked = false;
        sh->snap_cursor = 0;
        sh->snap_failed = false;
        sh->nitems = sh->items_next = 0;
    }
}

/* Calls fn(sh, e, ud) for each entry whose tag is in [v, v + w), w about
 * one home slot's share of the tags, and returns the cursor after them (0
 * when v's range was the last).  Their homes run from the first tag's to
 * the last's and each sits in the run from its home on, so the walk goes
 * from the first home to the first empty slot at or past the last home.
 * A cursor is a position in tag order, whatever the table's size, so an
 * entry present for a whole walk is visited even if the table is resized
 * in between.  fn must not add or delete. */
static uint64_t visit_range(ks_shard_t *sh, uint64_t v, void (*fn)(ks_shard_t *, ks_entry_t *, void *), void *ud)
{
    size_t n = sh->nslots;
    if (v >= TAG_SPACE)
        return 0;
    uint64_t end = v + (n >= TAG_SPACE ? 1 : TAG_SPACE / n);
    if (end > TAG_SPACE)
        end = TAG_SPACE;
    size_t i = tag_home_lo(v, n), span = tag_home_hi(end - 1, n) - i;
    for (size_t d = 0; d <= n; d++, i = slot_next(i, n)) {
        uint64_t s = sh->slots[i];
        if (!s) {
            if (d >= span)
                break;
            continue;
        }
        if (slot_tag(s) >= v && slot_tag(s) < end)
            fn(sh, slot_entry(s), ud);
    }
    return end == TAG_SPACE ? 0 : end;
}

struct drain_ctx {
    wbuf_t *out;
    uint64_t *records;
};

static void drain_visit(ks_shard_t *sh, ks_entry_t *e, void *ud)
{
    struct drain_ctx *d = ud;
    if (e->snap_epoch == sh->snap_active)
        return;
    e->snap_epoch = sh->snap_active;
    record_encode(d->out, sh, e);
    (*d->records)++;
}

bool ks_snapshot_drain(ks_t *ks, ks_shard_t *sh, wbuf_t *out, size_t budget, uint64_t *records)
{
    assert(SHARD_HELD(sh));
    (void)ks;
    if (!sh->snap_active)
        return true;
    size_t start = out->len;
    struct drain_ctx d = { out, records };
    for (;;) {
        /* records captured ahead of the walk first */
        while (sh->items_next < sh->nitems && out->len - start < budget) {
            snap_item_t *it = &sh->items[sh->items_next++];
            wbuf_put_bytes(out, it->buf, it->len);
            free(it->buf);
            it->buf = NULL;
            (*records)++;
        }
        if (out->oom)
            return true;
        if (sh->snap_walked || out->len - start >= budget)
            break;
        uint64_t next = visit_range(sh, sh->snap_cursor, drain_visit, &d);
        if (out->oom)
            return true;
        sh->snap_cursor = next;
        if (sh->snap_cursor == 0)
            sh->snap_walked = true;
    }
    if (sh->snap_failed)
        out->oom = true;
    /* once walked, every entry is handled: no capture adds an item */
    return sh->snap_walked && sh->items_next == sh->nitems;
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
        for (size_t j = sh->items_next; j < sh->nitems; j++)
            free(sh->items[j].buf);
        sh->nitems = sh->items_next = 0;
        sh->snap_active = 0;
        sh->snap_walked = false;
        sh->snap_cursor = 0;
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

static ks_shard_t *entry_shard(const ks_t *ks, const ks_entry_t *e)
{
    if (!ks->bits)
        return &ks->shards[0];
    return &ks->shards[(uint32_t)entry_hash(ks->seed, e) >> (32 - ks->bits)];
}

static bool expired(const ks_shard_t *sh, const ks_entry_t *e, int64_t now_ms)
{
    return is_vol(e) && vol_expire(vol_of(sh, e)) <= now_ms;
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
    if (expired(sh, e, now_ms)) {
        entry_delete(ks, sh, e);
        return NULL;
    }
    lru_touch(e, now_ms);
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
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    capture(sh, e);
}

/* Sets e's expiry (not KS_NO_EXPIRY, > 0), room in the vol map reserved. */
static void vol_set(ks_t *ks, ks_shard_t *sh, ks_entry_t *e, int64_t expire_ms)
{
    if (is_vol(e)) {
        vol_put(vol_of(sh, e), e, expire_ms);
        return;
    }
    charge_sub(ks, sh, entry_mem(e));
    vol_add(sh, e, expire_ms);
    charge_add(ks, sh, entry_mem(e));
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
    if ((sh->n + 1) * 8 > sh->nslots * 7 && !table_resize(sh, grown_size(sh->nslots)) && sh->n + 1 > sh->nslots - 1)
        return NULL;   /* a table must keep an empty slot */
    if (expire_ms != KS_NO_EXPIRY && !vol_reserve(sh))
        return NULL;
    size_t narrow = value_narrow(type, value);
    ks_entry_t *e = malloc(entry_alloc_size(type, narrow, k->len));
    if (!e)
        return NULL;
    if (!slot_fits(e)) {   /* an address above 2^47: no room for the tag */
        free(e);
        return NULL;
    }
    e->lru_tid = (uint32_t)tid;
    lru_touch(e, now_ms);
    e->klen_f = (uint16_t)(k->len | (narrow ? KF_NARROW | (narrow / 8u - 1u) << KF_AREA_SHIFT : 0));
    e->snap_epoch = sh->snap_active;   /* born after the barrier: not in this snapshot */
    *vidx_of(e) = 0;
    char *key = key_of(e);
    memcpy(key, k->p, k->len);
    key[k->len] = '\0';
    value_store(e, value);   /* the caller's value is the keyspace's from here */
    slot_insert(sh->slots, sh->nslots, slot_make(e, hash_tag(k->hash)), home_of_hash(k->hash, sh->nslots));
    sh->n++;
    atomic_fetch_add_explicit(&ks->keys, 1, memory_order_relaxed);
    charge_add(ks, sh, entry_mem(e));
    if (expire_ms != KS_NO_EXPIRY)
        vol_set(ks, sh, e, expire_clamp(expire_ms));
    return e;
}

void ks_entry_delete(ks_t *ks, ks_entry_t *e)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    entry_delete(ks, sh, e);
}

bool ks_entry_set_expire(ks_t *ks, ks_entry_t *e, int64_t expire_ms)
{
    ks_shard_t *sh = entry_shard(ks, e);
    assert(SHARD_HELD(sh));
    if (expire_ms != KS_NO_EXPIRY)
        expire_ms = expire_clamp(expire_ms);   /* a time in the past expires on next access */
    if (entry_expire(sh, e) == expire_ms)
        return true;
    if (expire_ms != KS_NO_EXPIRY && !is_vol(e) && !vol_reserve(sh))
        return false;
    capture(sh, e);
    if (expire_ms == KS_NO_EXPIRY) {
        charge_sub(ks, sh, entry_mem(e));
        vol_remove(sh, e);
        charge_add(ks, sh, entry_mem(e));
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
    capture(sh, e);
    charge_sub(ks, sh, entry_mem(e));
    if (!is_inline(e) && t->free)
        t->free(heap_of(e)->p);
    value_store(e, value);
    charge_add(ks, sh, entry_mem(e));
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
    return entry_mem(e);
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

/* ------------------------------------------------------------------------ */
/* Iteration, expiry, eviction                                              */
/* ------------------------------------------------------------------------ */

struct scan_ctx {
    int64_t now_ms;
    ks_visit_fn fn;
    void *ud;
};

static void scan_visit(ks_shard_t *sh, ks_entry_t *e, void *ud)
{
    struct scan_ctx *c = ud;
    if (!expired(sh, e, c->now_ms))
        c->fn(c->ud, e);
}

void ks_shard_scan(ks_t *ks, ks_shard_t *sh, uint64_t *cursor, size_t max_buckets,
                   int64_t now_ms, ks_visit_fn fn, void *ud)
{
    assert(SHARD_HELD(sh));
    (void)ks;
    struct scan_ctx c = { now_ms, fn, ud };
    uint64_t v = *cursor;
    if (max_buckets == 0)
        max_buckets = 1;
    do {
        v = visit_range(sh, v, scan_visit, &c);
    } while (v != 0 && --max_buckets > 0);
    *cursor = v;
}

/* Samples n volatile entries of sh at random and deletes the expired ones;
 * returns how many it deleted.  The expiry is in the vol array beside the
 * entry's address, so only an expired key's entry is touched. */
static size_t expire_sample(ks_t *ks, ks_shard_t *sh, int64_t now_ms, size_t n)
{
    size_t hit = 0;
    for (; n > 0 && sh->nvol > 0; n--) {
        const vol_slot_t *v = vol_at(sh, (size_t)rng_below(&sh->rng, sh->nvol));
        if (vol_expire(v) <= now_ms) {
            entry_delete(ks, sh, vol_entry(v));
            hit++;
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

/* An entry of a non-empty shard at random: from a random slot, the first
 * full one on.  Entries after runs of empty slots are a little likelier;
 * with the load between 1/8 and 7/8 the runs are short. */
static ks_entry_t *table_sample(ks_shard_t *sh)
{
    size_t i = (size_t)rng_below(&sh->rng, sh->nslots);
    while (!sh->slots[i])
        i = slot_next(i, sh->nslots);
    return slot_entry(sh->slots[i]);
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
    uint32_t now_s = lru_now(now_ms);
    for (unsigned tries = 0; tries < ks->nshards; tries++) {
        unsigned i = atomic_fetch_add_explicit(&ks->evict_rr, 1, memory_order_relaxed) & (ks->nshards - 1);
        ks_shard_t *sh = &ks->shards[i];
        ks_shard_lock(sh);
        bool vol = ks->policy == KS_VOLATILE_LRU;
        size_t n = vol ? sh->nvol : sh->n;
        ks_entry_t *best = NULL;
        uint32_t best_idle = 0;
        for (int s = 0; n && s < KS_EVICT_SAMPLES; s++) {
            ks_entry_t *e = vol ? vol_entry(vol_at(sh, (size_t)rng_below(&sh->rng, n))) : table_sample(sh);
            uint32_t idle = lru_idle(e, now_s);
            if ((!best || idle > best_idle) && !kept(e, keep, nkeep)) {
                best = e;
                best_idle = idle;
            }
        }
        /* the samples were all kept: another, in order */
        size_t looked = 0;
        for (size_t k = 0; vol && !best && k < n && k < KS_EVICT_SCAN; k++)
            if (!kept(vol_entry(vol_at(sh, k)), keep, nkeep))
                best = vol_entry(vol_at(sh, k));
        for (size_t k = 0; !vol && !best && k < sh->nslots && looked < KS_EVICT_SCAN; k++)
            if (sh->slots[k] && (looked++, !kept(slot_entry(sh->slots[k]), keep, nkeep)))
                best = slot_entry(sh->slots[k]);
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
