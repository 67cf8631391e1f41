/*
 * keys_ops.h - operations on keys whatever they hold: listing, inspecting,
 * deleting, expiry, and a key as portable bytes (Redis's DUMP / RESTORE).
 *
 *   SCAN        a page of the keys under a prefix (and, in a cluster, in a
 *               range of slots), walked with Redis's SCAN cursor: a key
 *               present for the whole walk is returned at least once,
 *               whatever the tables do in between.  Buckets are taken
 *               whole, so a page may hold fewer than `limit` keys (even
 *               none) while the walk is not done; it stops before its
 *               answer would pass --max-answer-size.  A caller whose token
 *               has prefixes sees only the keys under them.
 *   KEY.INFO    what a key holds, its TTL and the memory it takes (Redis's
 *               TYPE, PTTL and MEMORY USAGE in one); NOT_FOUND when missing.
 *   DEL         deletes the key, whatever it holds; with a digest (the
 *               DUMP's), only if its value and expiry are still the ones
 *               dumped - else PRECONDITION_FAILED and nothing deleted: how
 *               the resharding tool removes a key it copied without losing
 *               a write that arrived in between.
 *   PEXPIRE     sets the key's expiry to now + ttl_ms; NOT_FOUND when missing.
 *               With `cond` (Redis 7's EXPIRE options), only when the key's
 *               expiry passes it - NX: it has none, XX: it has one, GT/LT:
 *               the new one is later/earlier than the current one (a key
 *               without an expiry counts as expiring never) - else nothing
 *               changes and `done` is false; with CMD_EXPIRE_PAST a ttl_ms
 *               not after now deletes the key (once the condition holds).
 *   PERSIST     removes the key's expiry (whether it had one is the answer);
 *               NOT_FOUND when missing.
 *   DUMP        the key's dump (core/keydump.h: versioned, checksummed, type
 *               tag, remaining TTL, the value's snapshot encoding) and the
 *               value's digest; NOT_FOUND when missing.
 *   RESTORE     a dump as the key's value.  The whole dump is validated
 *               before anything is locked (a damaged one is refused and
 *               nothing created); an existing key is EXISTS unless
 *               `replace` (then it is replaced whatever its type).  The TTL
 *               is the dump's remaining one, or ttl_ms when given (0: no
 *               expiry, as Redis's RESTORE ttl 0).  Its record holds the
 *               dump's bytes, so replay rebuilds the same value and expiry.
 *
 *   DBSIZE      how many keys the keyspace holds (Redis's DBSIZE: those
 *               expired but not yet removed count too); no arguments.
 *
 * ttl_ms in results: the milliseconds left, -1 without an expiry (PTTL's).
 */
#ifndef TALLY_CMD_KEYS_OPS_H
#define TALLY_CMD_KEYS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "cmd/keyrec.h"   /* cmd_del_args_t, cmd_restore_args_t and their records */

/* The journal ids of the keys and dumps operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_SCAN = 10,
    CMD_ID_KEY_INFO = 11,
    CMD_ID_DEL = 12,
    CMD_ID_PEXPIRE = 13,
    CMD_ID_PERSIST = 14,
    CMD_ID_DUMP = 15,
    CMD_ID_RESTORE = 16,
    CMD_ID_DBSIZE = 17,
};

#define CMD_SCAN_MAX_LIMIT 10000          /* keys in one page */
#define CMD_SCAN_BUCKETS_PER_PAGE 65536   /* bounds a page's work when a prefix matches little */

typedef struct cmd_scan_args {
    const char *prefix;          /* "" for every key */
    size_t plen;
    unsigned shard;              /* the cursor: where the page starts (0, 0: the walk's start) */
    uint64_t pos;
    size_t limit;                /* 1..CMD_SCAN_MAX_LIMIT */
    int64_t slot_lo, slot_hi;    /* only keys in these cluster slots; -1: every slot */
} cmd_scan_args_t;

typedef struct cmd_scan_key {
    const char *key;             /* into the result's own memory */
    size_t klen;
    const char *type;            /* the type's name (static) */
    int64_t ttl_ms;
} cmd_scan_key_t;

typedef struct cmd_scan_res {
    cmd_scan_key_t *keys;        /* the page: cmd_scan_res_free frees it */
    size_t n;
    bool done;                   /* the walk is over; else the next page's cursor: */
    unsigned shard;
    uint64_t pos;
} cmd_scan_res_t;
void cmd_scan_res_free(cmd_scan_res_t *r);

typedef struct cmd_key_args {
    const char *key;
    size_t klen;
} cmd_key_args_t;                /* KEY.INFO, PERSIST, DUMP */

typedef struct cmd_key_info_res {
    const char *type;            /* the type's name (static) */
    int64_t ttl_ms;
    int64_t expire_ms;           /* the absolute expiry (Unix ms), -1 without one */
    uint64_t memory_bytes;
} cmd_key_info_res_t;

#define CMD_EXPIRE_NX 1u          /* only a key without an expiry */
#define CMD_EXPIRE_XX 2u          /* only a key with an expiry */
#define CMD_EXPIRE_GT 4u          /* only a later expiry */
#define CMD_EXPIRE_LT 8u          /* only an earlier expiry */
#define CMD_EXPIRE_PAST 16u       /* a ttl_ms <= 0 deletes the key (Redis's EXPIRE in the past) */

typedef struct cmd_pexpire_args {
    const char *key;
    size_t klen;
    int64_t ttl_ms;              /* 1 .. INT64_MAX / 2 - now; down to -(INT64_MAX / 2) with CMD_EXPIRE_PAST */
    unsigned cond;               /* CMD_EXPIRE_*: NX alone, or XX with GT or LT */
} cmd_pexpire_args_t;

typedef struct cmd_keys_res {
    bool done;                   /* DEL: deleted; PERSIST: an expiry was removed; PEXPIRE: set (the condition held) */
    int64_t ttl_ms;              /* PEXPIRE: the TTL set */
} cmd_keys_res_t;

typedef struct cmd_dump_res {
    uint8_t *data;               /* the dump, malloc'd: the caller frees it */
    size_t len;
    uint64_t digest;             /* keydump_digest: DEL's precondition */
} cmd_dump_res_t;

typedef struct cmd_restore_res {
    const char *type;            /* the type restored (static) */
    int64_t ttl_ms;              /* -1: no expiry */
    bool replaced;               /* a key existed */
} cmd_restore_res_t;

typedef struct cmd_dbsize_res {
    uint64_t keys;
} cmd_dbsize_res_t;

extern const cmd_def_t CMD_DBSIZE;
extern const cmd_def_t CMD_SCAN, CMD_KEY_INFO, CMD_DEL, CMD_PEXPIRE, CMD_PERSIST, CMD_DUMP, CMD_RESTORE;

#endif
