/*
 * keys.h - the key handle: how every operation reaches a value in the
 * keyspace.
 *
 * An operation that reads or changes one key makes two calls around its
 * work:
 *
 *     cmd_key_t h;
 *     if (!cmd_key_open(ctx, key, klen, &bloom_type, CMD_WRITE, &h))
 *         return false;                NOT_FOUND / WRONGTYPE set, nothing locked
 *     bloom_t *b = cmd_key_value(&h);  NULL: the key does not exist
 *     ... change b, or cmd_key_add / cmd_key_replace / cmd_key_delete ...
 *     cmd_key_close(&h, changed);      re-measured and journaled if changed, unlocked
 *
 * cmd_key_open checks the caller's token prefixes (cmd/access.h: a key
 * outside them is refused before anything is locked or looked at), locks
 * the key's shard, checks the keys' cluster slot with the lock held
 * (cmd/cluster.h), finds the key (an expired one is gone), checks its type
 * (WRONGTYPE naming both types), refuses a missing key that must exist, and
 * with CMD_WRITE prepares the entry for modification (the snapshot in
 * progress keeps its old state first).  cmd_key_close does the rest under
 * the lock: the memory charge follows the value, and the change is
 * journaled (cmd/journal.h) only when state changed.
 *
 * With --min-replicas-ack, cmd_keys_lock also keeps each key's state as it
 * was when locked, so that a change the replicas did not confirm can be
 * taken back (cmd/undo.h); cmd_key_close drops it when nothing changed.
 *
 * Operations on several keys (unions, BITOP, merges) lock them all at once
 * with cmd_keys_lock, which orders the shard locks so that two such
 * operations never deadlock, and then look each key up with cmd_keys_find
 * in the order their errors should be reported; the same cmd_key_close ends
 * them.
 */
#ifndef TALLY_CMD_KEYS_H
#define TALLY_CMD_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd/cmd.h"

#define CMD_READ 0u              /* look the key up */
#define CMD_WRITE 1u             /* the operation may change the value: prepare it */
#define CMD_MUST_EXIST 2u        /* a missing key is refused (NOT_FOUND) */

typedef struct cmd_key {
    cmd_ctx_t *ctx;
    ks_key_t *keys;              /* the keys locked (one, or a multi-key operation's) */
    size_t n;
    ks_entry_t *e;               /* the entry opened (for writing); NULL when missing */
    ks_key_t key;                /* storage of the key of cmd_key_open */
    bool locked;
    bool held;                   /* the locks are the transaction's (ctx->hold): close keeps them */
} cmd_key_t;

/* Locks the key's shard and looks it up expecting `type` (NULL: any type).
 * Returns true with the shard locked and h->e the entry (NULL when the key
 * does not exist), prepared for modification with CMD_WRITE.  Returns false
 * with nothing locked and ctx->err set: NOT_FOUND when missing under
 * CMD_MUST_EXIST, WRONGTYPE when the key holds another type, FORBIDDEN when
 * it is outside the caller's token prefixes, a cluster's redirect. */
__attribute__((warn_unused_result)) bool cmd_key_open(cmd_ctx_t *ctx, const char *key, size_t len,
                                                     const ks_type_t *type, unsigned flags, cmd_key_t *h);
/* The value of the open entry, NULL when the key does not exist. */
static inline void *cmd_key_value(const cmd_key_t *h) { return h->e ? ks_entry_value(h->e) : NULL; }
/* Stores `value` (owned by the keyspace from then on) at the missing key -
 * keys[0] of a multi-key handle - and makes it the open entry.  False when
 * out of memory: nothing is stored, the caller still owns `value`. */
bool cmd_key_add(cmd_key_t *h, const ks_type_t *type, void *value, int64_t expire_ms);
/* Replaces the open entry's value (the old one is freed). */
void cmd_key_replace(cmd_key_t *h, void *value);
/* Deletes the open entry; h->e becomes NULL. */
void cmd_key_delete(cmd_key_t *h);
/* Ends the work on the key(s): when `changed`, re-measures the open entry
 * (memory accounting) and journals the change, still under the lock; then
 * unlocks.  Does nothing on a handle already closed (a failed open or
 * cmd_keys_find has closed it). */
void cmd_key_close(cmd_key_t *h, bool changed);

/* The multi-key form: locks the shards of keys[0..n) in ascending order
 * (never deadlocks with another such operation).  keys[0] is the
 * destination when there is one.  End with cmd_key_close.  Every key must
 * be within the caller's token prefixes and, in a cluster, in one slot this
 * node serves: otherwise ctx->err is set, nothing is locked and false is
 * returned - the one place every operation passes through, so none can
 * forget the checks. */
__attribute__((warn_unused_result)) bool cmd_keys_lock(cmd_ctx_t *ctx, ks_key_t *keys, size_t n, cmd_key_t *h);
/* The prefix and slot checks of cmd_keys_lock without locking: what a
 * multi-key operation checks before it evicts for room; cmd_keys_lock
 * checks both again under the locks. */
bool cmd_keys_allowed_here(cmd_ctx_t *ctx, const ks_key_t *keys, size_t n);
/* Looks keys[i] up with the rules of cmd_key_open; `role` (may be NULL)
 * names the key in a WRONGTYPE message ("sources[1]").  With CMD_WRITE the
 * entry becomes the open entry that cmd_key_close re-measures.  *e (may be
 * NULL) is the entry, NULL when missing.  On failure every lock is
 * released, ctx->err is set and false is returned. */
bool cmd_keys_find(cmd_key_t *h, size_t i, const ks_type_t *type, unsigned flags, const char *role,
                   ks_entry_t **e);

/* ------------------------------------------------------------------------
 * Transactions (Redis's MULTI/EXEC): the locks of every key a transaction's
 * operations name, taken once for all of them, so that no other client's
 * operation on those keys runs between two of its own.
 *
 *     cmd_hold_t hold;
 *     cmd_hold_begin(&hold, srv, keys, n, all);   the shards, in ascending order
 *     for each operation: ctx.hold = &hold; cmd_admit; cmd_call; cmd_ctx_end
 *     cmd_hold_end(&hold);                        unlocked; then wait for durability
 *
 * Under a hold, cmd_keys_lock locks nothing: every key must be in a shard
 * the hold has (else INTERNAL: the front-end did not name it), and the
 * prefix, slot and pre-image steps run as usual; cmd_key_close journals each
 * operation's change as it happens and keeps the locks.  Shards are taken in
 * ascending index order like cmd_keys_lock's, so two holds, or a hold and a
 * multi-key operation, never deadlock; `all` takes every shard (operations
 * that reach keys their arguments do not name, or keys by a pattern).  No
 * key is evicted under a hold (that would lock other shards): a write past
 * --maxmemory is refused.  With semi-synchronous replication the gate of
 * cmd_admit (hooks.undo_begin) is entered once, before the locks, for the
 * whole hold.  Only the thread that began a hold may use or end it.
 * ------------------------------------------------------------------------ */
typedef struct cmd_hold {
    cmd_server_t *srv;
    unsigned char *shard;        /* per shard index: 1 held */
    bool all;                    /* every shard */
    bool undo;                   /* hooks.undo_begin said true: pre-images are kept */
} cmd_hold_t;

/* Locks the shards of keys[0..n) (every shard with `all`).  False when out
 * of memory (nothing held). */
bool cmd_hold_begin(cmd_hold_t *hold, cmd_server_t *srv, const ks_key_t *keys, size_t n, bool all);
/* Unlocks what cmd_hold_begin locked and leaves the gate. */
void cmd_hold_end(cmd_hold_t *hold);
/* Whether the context's hold has shard `i` (false without a hold). */
bool cmd_hold_has(const cmd_ctx_t *ctx, unsigned i);
/* A shard's lock for an operation that walks shards itself (SCAN, label
 * selections): nothing to do for one its transaction holds.  A
 * transaction running such an operation holds every shard (`all`): debug
 * builds stop on any other. */
void cmd_shard_lock(cmd_ctx_t *ctx, unsigned i);
void cmd_shard_unlock(cmd_ctx_t *ctx, unsigned i);

#endif
