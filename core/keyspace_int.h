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
 *     keyspace_cells.c  the cells entries live in: size classes, chunks,
 *                       handles
 *     keyspace_snap.c   the copy-on-write snapshot and the walk in tag
 *                       order it shares with SCAN
 *     keyspace_walk.c   SCAN, active expiry, eviction sampling
 *
 * Calls run one way (keyspace.c -> cells, table, snap; cells -> table;
 * walk -> keyspace.c, snap): the table calls no other file, and the
 * snapshot only the public ks_shard_lock/ks_shard_unlock (ks_snapshot_end
 * takes each shard's lock).
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
#define KF_NARROW 0x2000u         /* klen_f: the area is KF_AREA long (types.h, inline_len), 8-aligned */
#define KF_AREA 0x1800u           /* klen_f, with KF_NARROW: the area's length in 8-byte words, less 1 */
#define KF_AREA_SHIFT 11
#define NARROW_MAX 32u            /* the longest narrow area: 4 words, what KF_AREA holds */
#define KF_KLEN 0x07ffu           /* klen_f: the key's length (<= KS_KEY_MAX) */
#define LRU_UNIT_MS 10000         /* the LRU clock's tick: 16 bits of 10 s wrap every 7.6 days */

/* An entry is a cell of its shard's cell chunks (keyspace_cells.c), 8- or
 * 16-aligned, which starts with this 6-byte header. */
struct ks_entry {
    uint16_t lru;                 /* last access, in LRU_UNIT_MS ticks (wraps) */
    uint8_t tid;                  /* type id (ks_type_ids) */
    uint8_t snap_epoch;           /* snapshot epoch this entry has been handled for */
    uint16_t klen_f;              /* key length | KF_INLINE | KF_VOL | KF_NARROW | KF_AREA */
    /* then the key (no NUL), padding to the area's alignment (8, or 16 for
     * a type whose inline_size is a multiple of 16), the value's area
     * (area_size(type) bytes: the value, or heap_val_t; with KF_NARROW,
     * KF_AREA bytes), and with KF_VOL the uint32_t index + 1 of the entry
     * in the shard's vol array */
};
_Static_assert(sizeof(struct ks_entry) == 6, "the entry header is 6 bytes");
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

/* The alignment of a type's area: a value whose size is a multiple of 16
 * may need it (a token bucket's __int128 level); any other 8 (a type's
 * alignment divides its size: an 8-byte counter is at most 8-aligned).  A
 * narrow area holds at most NARROW_MAX bytes of a packed state: 8. */
static inline size_t area_align(const ks_type_t *t)
{
    return t->inline_size && t->inline_size % 16 == 0 ? 16 : 8;
}

/* Where the area starts in an entry with a key of klen bytes. */
static inline size_t data_off(size_t klen, size_t align)
{
    return (sizeof(struct ks_entry) + klen + align - 1) & ~(align - 1);
}

/* The registry of type ids (keyspace.c, type_id): an entry's type is
 * ks_type_ids[its id]. */
extern _Atomic(const ks_type_t *) ks_type_ids[256];

static inline const ks_type_t *type_of(const ks_entry_t *e)
{
    return atomic_load_explicit(&ks_type_ids[e->tid], memory_order_relaxed);
}

static inline uint16_t lru_now(int64_t now_ms) { return (uint16_t)(now_ms / LRU_UNIT_MS); }
static inline void lru_touch(ks_entry_t *e, int64_t now_ms) { e->lru = lru_now(now_ms); }
static inline uint32_t lru_idle(const ks_entry_t *e, uint16_t now) { return (uint16_t)(now - e->lru); }

static inline bool is_inline(const ks_entry_t *e) { return e->klen_f & KF_INLINE; }
static inline bool is_vol(const ks_entry_t *e) { return e->klen_f & KF_VOL; }
static inline size_t entry_klen(const ks_entry_t *e) { return e->klen_f & KF_KLEN; }
static inline bool is_narrow(const ks_entry_t *e) { return e->klen_f & KF_NARROW; }
/* The bytes a cell needs for a key of klen bytes and an area of `area`
 * bytes aligned to `align`, with a vol index if it has (or is to have) an
 * expiry: header, key, padding, area, index. */
static inline size_t cell_need(size_t klen, size_t align, size_t area, bool vol)
{
    return data_off(klen, align) + area + (vol ? sizeof(uint32_t) : 0);
}
/* The alignment of an entry's area: a narrow area's is 8. */
static inline size_t entry_align(const ks_entry_t *e) { return is_narrow(e) ? 8 : area_align(type_of(e)); }
/* An entry's area: where it starts, how long it is. */
static inline size_t entry_data_off(const ks_entry_t *e) { return data_off(entry_klen(e), entry_align(e)); }
static inline size_t narrow_area(const ks_entry_t *e) { return 8u * (((e->klen_f & KF_AREA) >> KF_AREA_SHIFT) + 1u); }
static inline size_t entry_area(const ks_entry_t *e) { return is_narrow(e) ? narrow_area(e) : area_size(type_of(e)); }
static inline unsigned char *data_of(const ks_entry_t *e) { return (unsigned char *)(uintptr_t)e + entry_data_off(e); }
static inline heap_val_t *heap_of(const ks_entry_t *e) { return (heap_val_t *)(void *)data_of(e); }
/* The bytes an entry uses of its cell: header, key, padding, area, and
 * the vol index when it has (vol) or is to have an expiry. */
static inline size_t entry_need(const ks_entry_t *e, bool vol)
{
    return cell_need(entry_klen(e), entry_align(e), entry_area(e), vol);
}
static inline uint32_t *vidx_of(const ks_entry_t *e)
{
    return (uint32_t *)(uintptr_t)((char *)(uintptr_t)e + entry_data_off(e) + entry_area(e));
}
static inline char *key_of(const ks_entry_t *e) { return (char *)(uintptr_t)e + sizeof(struct ks_entry); }
static inline void *value_of(const ks_entry_t *e) { return is_inline(e) ? (void *)data_of(e) : heap_of(e)->p; }

/* ---- cells ----------------------------------------------------------------
 * A shard's entries are cells of 4 KiB chunks, each chunk holding cells of
 * one size class (keyspace_cells.c).  A cell is named by a 32-bit handle:
 * its chunk's index in the shard's directory << 8 | its index in the
 * chunk + 1 (never 0).  A chunk starts with a 16-byte header naming its
 * index and cell size, so that an entry's address gives its handle and
 * size. */
#define CHUNK_SIZE 4096u
#define CHUNK_HDR 16u
#define CELL_BITS 8               /* a handle's bits for the cell in its chunk */

typedef struct chunk_hdr {
    uint32_t index;               /* in the shard's directory */
    uint16_t size;                /* the cells' size */
    uint8_t cls;                  /* their class */
} chunk_hdr_t;

typedef struct chunk {
    unsigned char *mem;           /* CHUNK_SIZE bytes, CHUNK_SIZE-aligned; NULL: index free */
    uint16_t size;                /* cell size */
    uint8_t cls;                  /* size class */
    uint8_t ncells;               /* cells it holds */
    uint8_t nlive;                /* cells in use */
    uint8_t bump;                 /* cells handed out at least once */
    uint8_t free;                 /* first free cell's index + 1 (0: none), a list through their first byte */
    uint32_t prev, next;          /* the class's list of chunks with room (index + 1); next: the list of free indexes */
} chunk_t;

#define NCLASS 44                 /* keyspace_cells.c's classes */

static inline const chunk_hdr_t *chunk_of(const ks_entry_t *e)
{
    return (const chunk_hdr_t *)((uintptr_t)e & ~(uintptr_t)(CHUNK_SIZE - 1));
}
/* The bytes of e's cell. */
static inline size_t cell_size(const ks_entry_t *e) { return chunk_of(e)->size; }
static inline uint32_t cell_handle(const ks_entry_t *e)
{
    const chunk_hdr_t *c = chunk_of(e);
    size_t i = ((uintptr_t)e - (uintptr_t)c - CHUNK_HDR) / c->size;
    return c->index << CELL_BITS | (uint32_t)(i + 1);
}

/* ---- slots ----------------------------------------------------------------
 * A table slot is 32 bits: a cell's handle in the low hbits bits, the top
 * tbits = 32 - hbits bits of the key's hash above it (0: empty).  hbits is
 * CELL_BITS plus what the shard's chunk directory needs, so a shard with
 * few chunks keeps many bits of tag: they filter lookups and, while the
 * table has at most 2^tbits slots, give an entry's home slot without
 * reading it. */
static inline uint32_t hash_tag(uint64_t hash, unsigned tbits)
{
    return tbits ? (uint32_t)(hash >> (64 - tbits)) : 0;
}
static inline uint32_t slot_make(uint32_t h, uint32_t tag, unsigned hbits)
{
    return (uint32_t)((uint64_t)tag << hbits) | h;
}

/* The captured bytes of an entry's record for a snapshot in progress
 * (a write was about to change the entry). */
typedef struct snap_item {
    uint8_t *buf;
    size_t len;
} snap_item_t;

/* An entry of the vol array, 12 bytes: the entry's cell handle and its
 * expiry (exact from 1 ms to KS_EXPIRE_MAX: later ones are clamped to it,
 * expire_clamp). */
typedef struct vol_slot {
    uint32_t h;
    uint32_t w[2];
} vol_slot_t;
_Static_assert(sizeof(vol_slot_t) == 12, "a vol slot is 12 bytes");

static inline int64_t vol_expire(const vol_slot_t *v)
{
    return (int64_t)((uint64_t)v->w[1] << 32 | v->w[0]);
}
static inline void vol_put(vol_slot_t *v, uint32_t h, int64_t expire_ms)
{
    assert(expire_ms >= 1 && expire_ms <= KS_EXPIRE_MAX && h);
    v->h = h;
    v->w[0] = (uint32_t)expire_ms;
    v->w[1] = (uint32_t)((uint64_t)expire_ms >> 32);
}

struct ks_shard {
    pthread_mutex_t lock;
#ifdef TALLY_DEBUG_LOCKS
    _Atomic uintptr_t owner;      /* the holder's ks_thread_tag address, 0 when free */
#endif
    uint32_t *slots;              /* the table: slot_make() values, 0 = empty */
    size_t nslots;                /* the table's size (any, >= KS_MIN_SLOTS) */
    size_t n;                     /* entries in the table */
    unsigned hbits, tbits;        /* a slot's bits of handle and of tag (32 in all) */
    chunk_t *chunks;              /* the cell chunks' directory */
    uint32_t nchunks, chunks_cap; /* indexes used so far, the directory's room (a power of two) */
    uint32_t free_index;          /* a free index of the directory + 1 (0: none), listed through next */
    uint32_t room[NCLASS];        /* per class, a chunk with a free cell (index + 1, 0: none) */
    vol_slot_t **vblk;            /* the entries with an expiry: blocks of the vol array */
    size_t nvblk, vblk_cap;       /* blocks in use, the directory's room */
    size_t nvol, vol_cap;         /* entries in the vol array, its slots */
    size_t mem;
    rng_t rng;                    /* sampling for expiry and eviction */
    uint64_t seed;                /* the keyspace's, to hash keys again */

    uint8_t snap_active;          /* epoch of the snapshot in progress, 0 if none */
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
    uint8_t epoch;                /* last snapshot epoch handed out (wraps: see ks_snapshot_end) */
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

/* The entry of handle h. */
static inline ks_entry_t *cell_at(const ks_shard_t *sh, uint32_t h)
{
    const chunk_t *c = &sh->chunks[h >> CELL_BITS];
    return (ks_entry_t *)(void *)(c->mem + CHUNK_HDR + (size_t)((h & ((1u << CELL_BITS) - 1)) - 1) * c->size);
}
static inline uint32_t slot_handle(const ks_shard_t *sh, uint32_t s)
{
    return (uint32_t)(s & (((uint64_t)1 << sh->hbits) - 1));
}
static inline uint32_t slot_tag(const ks_shard_t *sh, uint32_t s) { return (uint32_t)((uint64_t)s >> sh->hbits); }
static inline ks_entry_t *slot_entry(const ks_shard_t *sh, uint32_t s) { return cell_at(sh, slot_handle(sh, s)); }
static inline size_t slot_next(size_t i, size_t n) { return i + 1 == n ? 0 : i + 1; }

/* Homes.  A key's home slot in a table of n slots scales its hash's top
 * bits to [0, n) (multiply and shift, not mask), so n can be any size and
 * homes follow the hash's order: the table can grow by a quarter instead of
 * doubling, and a walk in hash order (SCAN, snapshots) does not depend on
 * the table's size.  While the table has at most 2^tbits slots the home
 * comes from the slot's tag (the hash's top tbits bits); a larger one uses
 * the top 32 bits, hashing the key again when only the slot is at hand.
 * Positions of that order are 32-bit numbers (the hash's top 32 bits). */
static inline bool tag_homes(const ks_shard_t *sh, size_t n) { return n <= ((uint64_t)1 << sh->tbits); }

/* The home of the position x (a hash's top 32 bits) in a table of n. */
static inline size_t home_of_pos(const ks_shard_t *sh, uint64_t x, size_t n)
{
    if (tag_homes(sh, n))
        return (size_t)(((x >> (32 - sh->tbits)) * n) >> sh->tbits);
    return (size_t)((x * n) >> 32);
}
static inline size_t home_of_hash(const ks_shard_t *sh, uint64_t hash, size_t n) { return home_of_pos(sh, hash >> 32, n); }

/* The home slot of the entry in slot s, in a table of n slots. */
static inline size_t slot_home(const ks_shard_t *sh, uint32_t s, size_t n)
{
    if (tag_homes(sh, n))
        return (size_t)(((uint64_t)slot_tag(sh, s) * n) >> sh->tbits);
    return home_of_hash(sh, entry_hash(sh->seed, slot_entry(sh, s)), n);
}

#define TABLE_MAP_MIN 16384u      /* tables this large are mapped (keyspace_table.c) */

/* The size a table of n slots grows to past 7/8 full: a quarter more,
 * rounded up to what it takes anyway (an allocator's class, or whole pages
 * from TABLE_MAP_MIN bytes).  The load then stays between 7/10 and 7/8 as
 * keys are added, where doubling would leave it anywhere from 7/16. */
static inline size_t grown_size(size_t n)
{
    size_t bytes = (n + n / 4) * sizeof(uint32_t);
    bytes = bytes < TABLE_MAP_MIN ? alloc_class(bytes) : (bytes + 4095u) & ~(size_t)4095u;
    return bytes / sizeof(uint32_t);
}

/* Puts slot value s in its run (there is an empty slot). */
static inline void slot_insert(uint32_t *slots, size_t n, uint32_t s, size_t home)
{
    size_t i = home;
    while (slots[i])
        i = slot_next(i, n);
    slots[i] = s;
}

/* The slot holding handle h of an entry whose hash is `hash`. */
static inline size_t slot_find(const ks_shard_t *sh, uint32_t h, uint64_t hash)
{
    size_t i = home_of_hash(sh, hash, sh->nslots);
    while (slot_handle(sh, sh->slots[i]) != h) {
        assert(sh->slots[i]);
        i = slot_next(i, sh->nslots);
    }
    return i;
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
    vol_put(vol_at(sh, sh->nvol++), cell_handle(e), expire_ms);
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


static inline ks_entry_t *vol_entry(const ks_shard_t *sh, const vol_slot_t *v) { return cell_at(sh, v->h); }

/* keyspace.c */
size_t ks_entry_mem(const ks_entry_t *e);
void ks_shard_delete(ks_t *ks, ks_shard_t *sh, ks_entry_t *e);

/* keyspace_table.c */
uint32_t *ks_table_alloc(size_t nslots);
void ks_table_free(uint32_t *t, size_t nslots);
bool ks_table_rebuild(ks_shard_t *sh, size_t nslots, unsigned tbits);
bool ks_table_resize(ks_shard_t *sh, size_t nslots);
void ks_slots_delete(ks_shard_t *sh, size_t i);
bool ks_vol_reserve(ks_shard_t *sh);
void ks_vol_remove(ks_shard_t *sh, ks_entry_t *e);

/* keyspace_cells.c */
size_t ks_cell_class_size(size_t need, size_t align);
ks_entry_t *ks_cell_alloc(ks_shard_t *sh, size_t need, size_t align);
void ks_cell_free(ks_shard_t *sh, ks_entry_t *e);
void ks_cells_destroy(ks_shard_t *sh);

/* keyspace_snap.c */
void ks_capture(ks_shard_t *sh, ks_entry_t *e);
uint64_t ks_visit_range(ks_shard_t *sh, uint64_t v, void (*fn)(ks_shard_t *, ks_entry_t *, void *), void *ud);

#endif
