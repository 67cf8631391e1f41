/*
 * keyspace.h - key (bytes, <= 1024) -> typed value, with expiry.
 *
 * The keyspace is split into a power-of-two number of shards, each an
 * open-addressing hash table behind its own mutex, so that requests on
 * different keys run in parallel on every core.  A key's shard is picked by
 * the top bits of the low 32 bits of its hash and its slot by the high 32
 * bits, so the two never correlate.  Entries do not move: a ks_entry_t*
 * stays valid until the entry is deleted, whatever is added meanwhile,
 * except that ks_entry_set_expire may move the entry it is given (and
 * says where).
 *
 * Locking contract: every function taking a ks_shard_t* must be called with
 * that shard locked (ks_shard_lock), except where noted.  An operation on
 * several keys locks their shards in ascending index order (ks_lock_keys) so
 * that two such operations never deadlock.
 *
 * Expiry: each entry may carry an absolute expiry in milliseconds (kept
 * by its shard, beside the entry's address, so ks_entry_expire takes ks).  Lookups
 * take `now_ms` (core has no clock) and remove an expired entry lazily;
 * ks_expire_step() samples volatile keys actively, like Redis's activeExpire.
 *
 * Values: a type with inline_size (types.h) has its values kept inside
 * their entries; ks_entry_value is then an address inside the entry, valid
 * until the entry is deleted or its value replaced.
 *
 * Memory: every entry is charged its cell (header, key, value area) as its
 * size class rounds it, its table slot and, with an expiry, its slot
 * of the shard's array of volatile keys, plus type->size(value) of a value
 * stored apart.
 * After changing a value, call ks_entry_changed() so the charge follows it.
 * With a memory limit, ks_evict() removes approximately least-recently-used
 * keys by sampling (allkeys-lru or volatile-lru), as Redis does.
 *
 * Snapshots: a snapshot is a consistent image of the whole keyspace at one
 * instant (the "barrier"), written shard by shard while requests continue.
 * Consistency comes from copy-on-write at entry granularity: after the
 * barrier, the first write to an entry that the snapshot has not yet written
 * encodes its old state first.  So every mutation must go through
 * ks_find_write(), ks_entry_delete(), ks_entry_set_expire() — never modify a
 * value reached through ks_find() alone.
 */
#ifndef TALLY_KEYSPACE_H
#define TALLY_KEYSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"
#include "core/types.h"

#define KS_KEY_MAX 1024          /* longest key in bytes (DESIGN §2) */
#define KS_NO_EXPIRY 0           /* expire_ms value meaning "never" */
/* The latest expiry kept exactly: 2^53 - 1 ms after the epoch (the year
 * 287 396).  A later one is kept as KS_EXPIRE_MAX, which ks_entry_expire
 * then returns: the key still outlives any server.  (The array of volatile
 * keys once packed an expiry in 53 bits; it holds 64 now, and the bound
 * stays so that what a key reports, dumps and replays does not change
 * between versions.) */
#define KS_EXPIRE_MAX (((int64_t)1 << 53) - 1)

typedef struct ks ks_t;
typedef struct ks_shard ks_shard_t;
typedef struct ks_entry ks_entry_t;

typedef enum ks_evict_policy {
    KS_NOEVICTION = 0,
    KS_ALLKEYS_LRU,
    KS_VOLATILE_LRU
} ks_evict_policy_t;

/* A key with its hash and shard computed once. */
typedef struct ks_key {
    const char *p;
    size_t len;
    uint64_t hash;
    unsigned shard;
} ks_key_t;

/* ------------------------------------------------------------------------ */
/* Whole keyspace (no lock needed)                                          */
/* ------------------------------------------------------------------------ */

/* Creates a keyspace with 2^shard_bits shards (0..12).  `seed` keys the hash
 * (pick it at random in production so keys cannot be chosen to collide).
 * Returns NULL on allocation failure. */
ks_t *ks_create(unsigned shard_bits, uint64_t seed);
/* Frees every entry and the keyspace; NULL is a no-op. */
void ks_free(ks_t *ks);

unsigned ks_shard_count(const ks_t *ks);
ks_shard_t *ks_shard_at(ks_t *ks, unsigned index);
ks_key_t ks_key(const ks_t *ks, const void *p, size_t len);

/* Approximate totals, readable without locks. */
uint64_t ks_total_keys(const ks_t *ks);
uint64_t ks_total_memory(const ks_t *ks);

void ks_set_maxmemory(ks_t *ks, uint64_t bytes, ks_evict_policy_t policy);
uint64_t ks_maxmemory(const ks_t *ks);
/* The seed ks_create was given: tables of the keyspace's own (indexes
 * beside it) derive theirs from it, so none is guessable. */
uint64_t ks_hash_seed(const ks_t *ks);
ks_evict_policy_t ks_evict_policy(const ks_t *ks);
/* True when a memory limit is set and current usage is at or above it. */
bool ks_over_limit(const ks_t *ks);

void ks_shard_lock(ks_shard_t *sh);
void ks_shard_unlock(ks_shard_t *sh);
/* Locks the distinct shards of keys[0..n) in ascending order. */
void ks_lock_keys(ks_t *ks, const ks_key_t *keys, size_t n);
void ks_unlock_keys(ks_t *ks, const ks_key_t *keys, size_t n);
void ks_lock_all(ks_t *ks);
void ks_unlock_all(ks_t *ks);

/* ------------------------------------------------------------------------ */
/* Entries (shard locked)                                                   */
/* ------------------------------------------------------------------------ */

/* Finds a live entry for reading, or NULL.  An expired entry is deleted. */
ks_entry_t *ks_find(ks_t *ks, const ks_key_t *k, int64_t now_ms);
/* Finds a live entry that the caller is about to modify, or NULL. */
ks_entry_t *ks_find_write(ks_t *ks, const ks_key_t *k, int64_t now_ms);
/* Declares that the caller is about to modify an entry it found with
 * ks_find (same effect as having used ks_find_write). */
void ks_entry_prepare_write(ks_t *ks, ks_entry_t *e);
/* Adds a new entry owning `value` (the key must not exist: call ks_find
 * first).  Returns NULL on allocation failure, in which case the caller still
 * owns `value`. */
ks_entry_t *ks_add(ks_t *ks, const ks_key_t *k, const ks_type_t *type, void *value,
                   int64_t expire_ms, int64_t now_ms);
/* Removes the entry and frees its value. */
void ks_entry_delete(ks_t *ks, ks_entry_t *e);
/* Sets (or with KS_NO_EXPIRY clears) the absolute expiry (ks_add's and
 * this one's: one before 1 ms is kept as 1, one after KS_EXPIRE_MAX as
 * KS_EXPIRE_MAX).  An entry made without an expiry may have no room for
 * one: it is then moved, and *e is its new address (the old one, and
 * pointers into its value, are no longer valid).  Returns false, changing
 * nothing, when the shard's array of volatile keys or the entry could not
 * grow (out of memory). */
bool ks_entry_set_expire(ks_t *ks, ks_entry_t **e, int64_t expire_ms);
/* Re-measures the value after a change (memory accounting). */
void ks_entry_changed(ks_t *ks, ks_entry_t *e);
/* Replaces the value (freeing the old one) after ks_find_write.  The value
 * must fit the entry (ks_entry_value_fits); one that does not takes a new
 * entry (ks_entry_delete, ks_add). */
void ks_entry_replace_value(ks_t *ks, ks_entry_t *e, void *value);
/* Whether `value` (of the entry's type) can replace the entry's: false only
 * for an entry made with a narrow area (a value whose inline_len is at most
 * 8 bytes: types.h) and a value that needs more. */
bool ks_entry_value_fits(const ks_entry_t *e, const void *value);

const ks_type_t *ks_entry_type(const ks_entry_t *e);
void *ks_entry_value(const ks_entry_t *e);
/* The key's bytes (*len of them, not NUL-terminated), inside the entry. */
const char *ks_entry_key(const ks_entry_t *e, size_t *len);
/* The entry's expiry (KS_NO_EXPIRY if none): kept in its shard's array of
 * volatile keys, not in the entry, hence the keyspace. */
int64_t ks_entry_expire(const ks_t *ks, const ks_entry_t *e);
size_t ks_entry_memory(const ks_entry_t *e);
/* What an entry costs besides its value (struct, key, table slots): with
 * type->size(value), what ks_add charges for a key of klen bytes. */
size_t ks_entry_overhead(size_t klen);

/* ------------------------------------------------------------------------ */
/* Iteration, expiry and eviction                                           */
/* ------------------------------------------------------------------------ */

/* Calls fn for each live entry in the step of hash order at the cursor
 * (the keys of about one home slot) and advances it: an entry present for
 * the whole scan is visited at least once even if the table is resized in
 * between (the cursor is a position in hash order, whatever the table's
 * size).  *cursor is 0 at the start and becomes 0 when the shard is done.
 * Takes at most `max_buckets` steps.  fn must not add or delete keys.
 * Shard locked. */
typedef void (*ks_visit_fn)(void *ud, ks_entry_t *e);
void ks_shard_scan(ks_t *ks, ks_shard_t *sh, uint64_t *cursor, size_t max_buckets,
                   int64_t now_ms, ks_visit_fn fn, void *ud);

/* Active expiry, one step: visits the next `shards` shards (round robin, from
 * where the last step stopped), locking each in turn (call without locks, and
 * from one thread at a time).  In each it samples `samples` volatile keys and
 * deletes the expired ones, and samples again while more than a quarter were
 * expired, as Redis's activeExpireCycle does.  A step samples at most
 * 4 * shards * samples keys in all, so that one step of a mass expiry is
 * short; the next step goes on from there.  Returns how many were deleted. */
size_t ks_expire_step(ks_t *ks, int64_t now_ms, size_t samples, unsigned shards);

/* Evicts one approximately-LRU key under the configured policy, calling
 * `on_evict` with the key (under its shard lock) before deleting it, so the
 * caller can journal the deletion.  Call without locks.  Returns the bytes
 * freed, 0 when nothing could be evicted. */
typedef void (*ks_evict_fn)(void *ud, const char *key, size_t len);
size_t ks_evict(ks_t *ks, int64_t now_ms, ks_evict_fn on_evict, void *ud);
/* The same, never evicting one of keep[0..nkeep) (the keys a request
 * reads or writes while it makes room for itself). */
size_t ks_evict_keep(ks_t *ks, int64_t now_ms, const ks_key_t *keep, size_t nkeep, ks_evict_fn on_evict, void *ud);

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                */
/* ------------------------------------------------------------------------ */

/* Starts a snapshot: the caller holds every shard lock (ks_lock_all) and
 * makes this instant the barrier (e.g. rotates the journal) before unlocking. */
void ks_snapshot_begin(ks_t *ks);
/* Encodes up to about `budget` bytes of this shard's snapshot records into
 * `out`.  Call with the shard locked, repeatedly, releasing the lock between
 * calls so requests proceed; returns true once the shard is complete.
 * *records is increased by the number of records written.  Returns true with
 * out->oom set if encoding ran out of memory. */
bool ks_snapshot_drain(ks_t *ks, ks_shard_t *sh, wbuf_t *out, size_t budget, uint64_t *records);
/* Ends (or aborts) the snapshot, releasing copies it kept. Call without locks. */
void ks_snapshot_end(ks_t *ks);
/* True if an allocation failed while copying entries for the snapshot. */
bool ks_snapshot_failed(ks_t *ks);

#endif
