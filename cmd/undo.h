/*
 * undo.h - pre-images: the state a change replaced, kept so that the change
 * can be taken back.  Semi-synchronous replication (--min-replicas-ack N)
 * answers a change only once N replicas hold it; when they do not in time,
 * the change is taken back and answered 503 "not applied", like a change
 * the full disk refused.
 *
 * How a change is kept takeable-back, only while the service asks for it
 * (cmd_hooks_t.undo_begin true: a semi-synchronous primary):
 *
 *   - every time a changing request locks keys (cmd_keys_lock), each key's
 *     state is captured with the shards locked, before the handler can touch
 *     it: its dump (core/keydump.h, no TTL) and absolute expiry, or "absent";
 *     the journal space of the record that restores it is secured at the same
 *     moment (so taking it back never meets a full disk), and a capture that
 *     cannot be had refuses the request before anything changes (503/507);
 *   - when the request's record is journaled (still under the locks), its
 *     captures go to the service (cmd_hooks_t.undo_register), which keeps
 *     them "in doubt" at the stream position after the record until enough
 *     replicas acknowledged that position;
 *   - captures of a lock that changed nothing are dropped when it is released.
 *
 * Taking back (cmd_undo_apply, called by the service with every change
 * excluded) restores a key to its pre-image and journals what it did as a
 * replacing restore (PUT /keys/{key}/restore?replace=true&ttl_ms=N, the
 * expiry kept absolute) or DELETE /keys/{key} for a key the change created:
 * replay and the replicas, which may have applied the change already,
 * arrive at the same state.
 */
#ifndef TALLY_CMD_UNDO_H
#define TALLY_CMD_UNDO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"

struct cmd_undo {
    struct cmd_undo *next;
    uint64_t pos;                /* the service's: stream position after the change's record */
    uint64_t held;               /* journal bytes secured for the restoring record */
    uint8_t *dump;               /* the key's dump without TTL; NULL: the key was absent */
    size_t dump_len;
    int64_t expire_ms;           /* absolute expiry of the pre-image, KS_NO_EXPIRY none */
    const void *owner;            /* the lock that captured it, until registered */
    size_t klen;
    char key[];
};

/* Captures keys[0..n) (shards locked) into ctx->undo, a key locked twice
 * once; `owner` is the handle that locked them.  False with the error set
 * (UNAVAILABLE: no journal space, OUT_OF_MEMORY): nothing was changed, the
 * caller unlocks. */
bool cmd_undo_capture(cmd_ctx_t *ctx, const void *owner, const ks_key_t *keys, size_t n);
/* Drops what `owner` captured that was not registered (its lock is being
 * released without a change). */
void cmd_undo_drop(cmd_ctx_t *ctx, const void *owner);
/* Frees a list, giving back the journal space its entries hold. */
void cmd_undo_free(cmd_server_t *srv, cmd_undo_t *list);
/* Restores u's key to its pre-image as of now_ns and journals the restoring
 * record in the space u holds (u still holds it: free u after).  *lsn is
 * the record's journal position (0 none).  False when memory was missing:
 * the key is then absent or untouched, and what happened is journaled. */
bool cmd_undo_apply(cmd_server_t *srv, const cmd_undo_t *u, int64_t now_ns, uint64_t *lsn);

#endif
