/*
 * lease.h - concurrency leases: a limit on requests in flight.
 *
 * A lease key holds a limit and the set of its active leases, each a 64-bit
 * id with an absolute expiry (ms since the epoch).  Acquiring adds a lease
 * when fewer than `limit` are live; releasing removes one by id; a lease
 * whose expiry has passed is no longer live - it counts for nothing, cannot
 * be released or renewed, and is dropped from the set by the next change
 * (lease_purge), so a crashed client cannot leak capacity, and leases that
 * expired while the server was down are free when it comes back: expiry is
 * absolute time, and every count is of live leases only.
 *
 * Ids: id = mix(seed + seq * golden), where mix is splitmix64's finalizer (a
 * bijection of 64-bit words), seed is drawn when the key is created (the
 * command layer derives it from the key and the creating request's time, so
 * a replayed journal draws the same) and seq counts the key's acquisitions.
 * So ids of one key never repeat while it lives, look random, and one
 * client cannot release another's lease by mistyping or reusing its own.
 * Id 0 is never given (it means "none").
 *
 * Order: the set is an array; an acquire appends, a release moves the last
 * lease into the hole, a purge keeps the order of what it keeps (so purging
 * at t1 and then at t2 leaves what purging once at t2 does).  The order is
 * part of the state (the encoding keeps it), so a value decoded from a
 * snapshot evolves exactly as the original.
 *
 * Memory: the array grows by doubling, never past the limit; a limit is at
 * most LEASE_MAX_LIMIT, so a key takes at most 16 x LEASE_MAX_LIMIT bytes
 * of leases.  lease_grow_bytes says what the next acquire would add, so the
 * caller can make room before anything is allocated.
 *
 * Encoding: u8 version (1) | u64 seed | u64 seq | u32 limit | u32 n |
 * n x (u64 id | i64 expires_ms).  Every field is validated on decode (ids
 * non-zero and distinct, n <= LEASE_MAX_LIMIT, expiries positive).
 */
#ifndef TALLY_LEASE_H
#define TALLY_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/types.h"

/* The on-disk tag of concurrency lease values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_LEASE = 14 };

#define LEASE_MAX_LIMIT 100000             /* leases one key may hold at once */
#define LEASE_MAX_TTL_MS 86400000LL        /* one day: a lease longer than that is renewed */

typedef struct lease lease_t;

typedef struct lease_info {
    uint32_t limit;              /* the limit of the last acquire */
    uint32_t active;             /* live leases */
    int64_t next_expiry_ms;      /* earliest expiry of a live lease; -1 when none */
    int64_t last_expiry_ms;      /* latest expiry of a live lease; -1 when none */
} lease_info_t;

extern const ks_type_t lease_type;

/* A new empty lease set; NULL when out of memory.  limit 1..LEASE_MAX_LIMIT. */
lease_t *lease_new(uint64_t seed, uint32_t limit);
void lease_free(lease_t *l);

/* The heap bytes of a new empty set (lease_type.size of lease_new's value). */
size_t lease_base_bytes(void);
/* The bytes the next lease_acquire with this limit may allocate (0 when the
 * array has room); l NULL: a new set's first array. */
size_t lease_grow_bytes(const lease_t *l, uint32_t limit);
/* The most bytes a set of this limit can reach. */
size_t lease_max_bytes(uint32_t limit);

/* Drops every lease expired at now_ms (expiry <= now_ms); true when one was. */
bool lease_purge(lease_t *l, int64_t now_ms);

/* What a reader sees at now_ms, counting live leases only (changes nothing). */
void lease_info(const lease_t *l, int64_t now_ms, lease_info_t *out);

/* Acquire, after lease_purge(l, now_ms).  Sets the limit to `limit`; when
 * fewer than `limit` leases are live, adds one expiring at expires_ms and
 * returns CORE_OK with *id; CORE_FULL when `limit` are live (nothing
 * added; the limit is still updated); CORE_NOMEM when its array could
 * not grow (nothing changed). */
core_status_t lease_acquire(lease_t *l, uint32_t limit, int64_t expires_ms, uint64_t *id);

/* Removes the live lease `id`; false when there is none (released, expired
 * or never given).  Call after lease_purge(l, now_ms). */
bool lease_release(lease_t *l, uint64_t id);
/* Sets the live lease `id`'s expiry to expires_ms; false when there is none.
 * Call after lease_purge. */
bool lease_renew(lease_t *l, uint64_t id, int64_t expires_ms);
/* The live lease `id`'s expiry at now_ms, or -1 when there is none. */
int64_t lease_expiry(const lease_t *l, uint64_t id, int64_t now_ms);

/* Leases held (live or not yet purged), and the i-th of them. */
uint32_t lease_count(const lease_t *l);
uint32_t lease_limit(const lease_t *l);
void lease_at(const lease_t *l, uint32_t i, uint64_t *id, int64_t *expires_ms);

/* The id seed a set of this key created at this time draws (a hash of both). */
uint64_t lease_seed(const char *key, size_t klen, int64_t now_ns);

#endif
