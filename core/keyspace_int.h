/*
 * keyspace_int.h - what the files of the keyspace share, and nobody else
 * (private to core/keyspace*.c): the shard and entry structures, the table
 * slot and vol slot encodings, the small helpers that read them, and the
 * functions one of the files calls in another.  core/keyspace.h is the
 * keyspace's face; keyspace.c's opening comment explains the mechanics.
 *
 *     keyspace.c        creation, the keyspace's settings and counters,
 *                       locking, type ids, entries (find, add, delete,
 *                       expiry, values) and their memory charge
 *     keyspace_table.c  a shard's open-addressing table (resizing,
 *                       removing a slot) and its vol array's blocks
 *     keyspace_snap.c   the copy-on-write snapshot and the walk in tag
 *                       order it shares with SCAN
 *     keyspace_walk.c   SCAN, active expiry, eviction sampling
 *
 * Calls run one way (keyspace.c -> table, snap; walk -> keyspace.c, snap):
 * the table calls no other file, and the snapshot only the public
 * ks_shard_lock/ks_shard_unlock (ks_snapshot_end takes each shard's lock).
 * What a lookup or a write runs per request (table_find, lru_touch, the
 * accessors) stays in keyspace.c or is static inline here.
 */
#ifndef TALLY_KEYSPACE_INT_H
#define TALLY_KEYSPACE_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/hash.h"
#include "core/keyspace.h"
#include "core/rng.h"

#define KS_MIN_SLOTS 16           /* a shard's table never shrinks below this */

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

static inline size_t area_size(const ks_type_t *t)
{
    size_t n = t->inline_size ? ((size_t)t->inline_size + 7u) & ~(size_t)7u : 0;
    if (always_inline(t))
        return n;   /* never a heap value: no room kept for one */
    return n < sizeof(heap_val_t) ? sizeof(heap_val_t) : n;
}

/* The registry of type ids (keyspace.c, type_id): an entry's type is
 * ks_type_ids[its id]. */
extern _Atomic(const ks_type_t *) ks_type_ids[256];

static inline const ks_type_t *type_of(const ks_entry_t *e)
{
    return atomic_load_explicit(&ks_type_ids[e->lru_tid & 0xff], memory_order_relaxed);
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

struct ks_shard {
    pthread_mutex_t lock;
#ifdef TALLY_DEBUG_LOCKS
    _Atomic uintptr_t owner;      /* the holder's ks_thread_tag address, 0 when free */
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
/* Lock checks                                                              */
/* ------------------------------------------------------------------------ */

#ifdef TALLY_DEBUG_LOCKS
/* Debug builds know which thread holds each shard lock, so that every entry
 * point asserts its caller holds the shard it touches (SQLite's
 * assert(sqlite3_mutex_held(...)) habit).  A thread is named by the address
 * of its own copy of ks_thread_tag (keyspace.c). */
extern _Thread_local char ks_thread_tag;
extern _Thread_local unsigned ks_shards_held;   /* how many shard locks this thread holds */
#define SHARD_HELD(sh) (atomic_load_explicit(&(sh)->owner, memory_order_relaxed) == (uintptr_t)&ks_thread_tag)
/* An entry's accessors take no keyspace to find its shard by; they check
 * that the caller holds some shard lock (an entry read without any is read
 * while another thread may change or free it). */
#define SOME_SHARD_HELD() (ks_shards_held > 0)
#else
#define SHARD_HELD(sh) true
#define SOME_SHARD_HELD() true
#endif

/* ------------------------------------------------------------------------ */
/* Hash table and vol array                                                 */
/* ------------------------------------------------------------------------ */

/* The bytes the allocator really hands out for a request of n: jemalloc's
 * size classes (8, 16, then 16 apart up to 128, then four classes per
 * doubling), which tallyd links. */
static inline size_t alloc_class(size_t n)
{
    if (n <= 8)
        return 8;
    if (n <= 128)
        return (n + 15) & ~(size_t)15;
    size_t spacing = (size_t)1 << (63 - __builtin_clzll((unsigned long long)(n - 1)) - 2);
    return (n + spacing - 1) & ~(spacing - 1);
}

/* The entry's key hashed again (ks_key's hash). */
static inline uint64_t entry_hash(uint64_t seed, const ks_entry_t *e)
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
static inline size_t grown_size(size_t n)
{
    return alloc_class((n + n / 4) * sizeof(uint64_t)) / sizeof(uint64_t);
}

/* Puts slot value s in its run (there is an empty slot). */
static inline void slot_insert(uint64_t *slots, size_t n, uint64_t s, size_t home)
{
    size_t i = home;
    while (slots[i])
        i = slot_next(i, n);
    slots[i] = s;
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

/* Adds e (room reserved, not in the array). */
static inline void vol_add(ks_shard_t *sh, ks_entry_t *e, int64_t expire_ms)
{
    vol_put(vol_at(sh, sh->nvol++), e, expire_ms);
    *vidx_of(e) = (uint32_t)sh->nvol;
    e->klen_f |= KF_VOL;
}

static inline vol_slot_t *vol_of(const ks_shard_t *sh, const ks_entry_t *e)
{
    return vol_at(sh, *vidx_of(e) - 1);
}

static inline int64_t entry_expire(const ks_shard_t *sh, const ks_entry_t *e)
{
    return is_vol(e) ? vol_expire(vol_of(sh, e)) : KS_NO_EXPIRY;
}

static inline bool expired(const ks_shard_t *sh, const ks_entry_t *e, int64_t now_ms)
{
    return is_vol(e) && vol_expire(vol_of(sh, e)) <= now_ms;
}


/* keyspace.c */
size_t ks_entry_mem(const ks_entry_t *e);
void ks_shard_delete(ks_t *ks, ks_shard_t *sh, ks_entry_t *e);

/* keyspace_table.c */
bool ks_table_resize(ks_shard_t *sh, size_t nslots);
void ks_slots_delete(uint64_t seed, uint64_t *slots, size_t n, size_t i);
bool ks_vol_reserve(ks_shard_t *sh);
void ks_vol_remove(ks_shard_t *sh, ks_entry_t *e);

/* keyspace_snap.c */
void ks_capture(ks_shard_t *sh, ks_entry_t *e);
uint64_t ks_visit_range(ks_shard_t *sh, uint64_t v, void (*fn)(ks_shard_t *, ks_entry_t *, void *), void *ud);

#endif
