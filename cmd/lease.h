/*
 * lease.h - concurrency leases as operations (core/lease.h): a limit on
 * requests in flight.
 *
 *   LEASE.ACQUIRE  key limit ttl_ms: drops the key's expired leases, sets its
 *                  limit, and grants a lease expiring at now + ttl_ms when
 *                  fewer than `limit` are live; refused otherwise, with the
 *                  time until the earliest live lease expires (at worst).
 *   LEASE.RELEASE  key id: frees the live lease `id` (false when there is
 *                  none: released, expired, never given).
 *   LEASE.RENEW    key id ttl_ms: the live lease `id` now expires at now +
 *                  ttl_ms (false when there is none: an expired lease is not
 *                  brought back - its slot may be another's).
 *   LEASE.INFO     key: the limit and the live leases (a read).
 *
 * The key exists while it holds a lease: it expires LEASE_KEY_GRACE_MS after
 * its latest lease (lease.c says why), and the change that drops its last
 * lease deletes it; a missing key reads as no lease and limit 0.
 *
 * Replay: the records hold the arguments and the time; a lease's id and
 * expiry are functions of them and the key's state (the id is drawn from the
 * key's seed and its count of acquisitions, core/lease.h; a new key's seed
 * from the key and the time), so a journal or a replica's stream replays to
 * the same ids, expiries and set, byte for byte.  Expired leases are dropped
 * by the changes only (at their record's time), never by a read.
 */
#ifndef TALLY_CMD_LEASE_H
#define TALLY_CMD_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/def.h"

/* The journal ids of the lease operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_LEASE_ACQUIRE = 500,
    CMD_ID_LEASE_RELEASE = 501,
    CMD_ID_LEASE_RENEW = 502,
    CMD_ID_LEASE_INFO = 503,
};

#define LEASE_KEY_GRACE_MS 60000   /* a key outlives its latest lease by this much */

typedef struct cmd_lease_acquire_args {
    const char *key;
    size_t klen;
    int64_t limit;               /* 1 .. LEASE_MAX_LIMIT */
    int64_t ttl_ms;              /* 1 .. LEASE_MAX_TTL_MS */
} cmd_lease_acquire_args_t;

typedef struct cmd_lease_id_args {
    const char *key;
    size_t klen;
    uint64_t id;                 /* non-zero */
    int64_t ttl_ms;              /* RENEW: 1 .. LEASE_MAX_TTL_MS */
} cmd_lease_id_args_t;

typedef struct cmd_lease_key_args {
    const char *key;
    size_t klen;
} cmd_lease_key_args_t;

typedef struct cmd_lease_res {
    bool ok;                     /* ACQUIRE granted, RELEASE released, RENEW renewed, INFO the key exists */
    uint64_t id;                 /* ACQUIRE: the lease granted; 0 otherwise */
    int64_t limit;               /* the key's limit after the operation (0: no key) */
    int64_t active;              /* live leases after it */
    int64_t remaining;           /* limit - active, at least 0 */
    int64_t expires_ms;          /* ACQUIRE/RENEW: the lease's expiry (absolute); -1 */
    int64_t ttl_ms;              /* ACQUIRE/RENEW: its ttl; -1 */
    int64_t retry_after_ms;      /* ACQUIRE refused: until the earliest live lease expires; -1 */
    int64_t next_expiry_ms;      /* the earliest live lease's expiry; -1 when none */
    int64_t reset_after_ms;      /* until the latest live lease expires (all capacity back); 0 when none */
} cmd_lease_res_t;

extern const cmd_def_t CMD_LEASE_ACQUIRE, CMD_LEASE_RELEASE, CMD_LEASE_RENEW, CMD_LEASE_INFO;

/* The id's text form (16 lower-case hex digits) into out[17]; and back:
 * false for anything else (and for 0). */
void cmd_lease_id_format(uint64_t id, char out[17]);
bool cmd_lease_id_parse(const char *s, size_t len, uint64_t *id);

#endif
