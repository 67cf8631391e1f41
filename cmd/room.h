/*
 * room.h - the bounds of one request: room under --maxmemory asked for
 * before a write allocates, and the caps on a value (--max-value-size), an
 * answer (--max-answer-size) and what a request reads
 * (CMD_WORK_VALUES x --max-value-size).  docs/keys.md, "Limits per request".
 *
 * Every write that allocates knows, before it allocates, the size its value
 * will reach and the bytes it adds (core's size functions: cms_bytes_for,
 * bloom_bytes_for, throttle_bytes_after, ...), and asks:
 *   - cmd_value_fits: may the value reach that size (--max-value-size)?
 *     BAD_REQUEST otherwise, naming the limit, the size and `what`;
 *   - cmd_make_room_for: room under --maxmemory for the bytes it adds
 *     (eviction, each eviction journaled as a deletion so that replay repeats
 *     it; OUT_OF_MEMORY when it cannot be had, at once when the bytes alone
 *     pass the limit).
 * cmd_grow asks both.  A write whose growth is only known under the key's
 * lock (a batch that may add sub-filters, a sliding log's entries) compares
 * it with cmd_room_now() there; when it does not fit, it undoes what it did,
 * closes its handle and calls cmd_room_retry, then starts again.  Replayed
 * requests are never refused by these limits.
 */
#ifndef TALLY_CMD_ROOM_H
#define TALLY_CMD_ROOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"

/* How much a request may read from its sources (BITOP, merges, unions) and
 * go over a value for each repeated parameter: this many values of the
 * largest size.  Enough for an operation on a few full-size values; what is
 * more would hold a shard lock for seconds. */
#define CMD_WORK_VALUES 4

/* Before a write that may grow memory: evicts under the configured policy
 * while over the limit, journaling each eviction (the journal space of each
 * is secured before the key is removed).  False (OUT_OF_MEMORY set) when
 * the limit is reached and nothing can be evicted, or (UNAVAILABLE) when
 * the journal cannot take the next eviction; keys already evicted stay
 * evicted (their deletions are journaled), the write itself is not
 * applied. */
bool cmd_make_room(cmd_ctx_t *ctx);
/* Like cmd_make_room, for a write known to add about `extra` bytes: evicts
 * until usage + extra fits under the limit; OUT_OF_MEMORY when it cannot (a
 * single value larger than the whole limit is refused, not allowed to
 * overshoot). */
bool cmd_make_room_for(cmd_ctx_t *ctx, uint64_t extra);
/* The keys a write reads or grows while it makes room for itself: never
 * evicted for it, and their bytes count with what it adds (a write they
 * and its growth cannot fit under the limit together is refused at once,
 * evicting nothing). */
typedef struct cmd_keep {
    const ks_key_t *keys;
    size_t n;
    uint64_t bytes;              /* what they take now */
} cmd_keep_t;
/* cmd_make_room_for, keeping keep's keys (NULL: none). */
bool cmd_make_room_keeping(cmd_ctx_t *ctx, uint64_t extra, const cmd_keep_t *keep);
/* The same for a write to one key, which takes `bytes` now (0 when not
 * known before it is locked). */
bool cmd_make_room_for_key(cmd_ctx_t *ctx, uint64_t extra, const char *key, size_t klen, uint64_t bytes);

/* The bytes a write may add now without evicting: UINT64_MAX without
 * --maxmemory or on replay. */
uint64_t cmd_room_now(const cmd_ctx_t *ctx);
/* The most bytes a value may reach (for core functions that take a
 * max_bytes): --max-value-size; UINT64_MAX when none or on replay. */
uint64_t cmd_value_limit(const cmd_ctx_t *ctx);
/* Whether a value may reach `bytes`: false with BAD_REQUEST naming
 * --max-value-size, the size and `what` ("the filter", ...), and as its
 * field `field` (NULL: none), the parameter that asked for the size. */
bool cmd_value_fits(cmd_ctx_t *ctx, const char *field, const char *what, uint64_t bytes);
/* cmd_value_fits(reach), then cmd_make_room_for(extra). */
bool cmd_grow(cmd_ctx_t *ctx, const char *field, const char *what, uint64_t reach, uint64_t extra);
/* After a write found under its lock that it needs `extra` more bytes than
 * cmd_room_now() allowed, and undid itself and closed its handle: evicts
 * for them (keeping keep's keys) and returns true to try again, at most a
 * few times (*attempts counts them, start it at 0); false with the error
 * set. */
bool cmd_room_retry(cmd_ctx_t *ctx, uint64_t extra, const cmd_keep_t *keep, unsigned *attempts);
/* Whether an answer of about `bytes` may be built (--max-answer-size):
 * false with BAD_REQUEST naming the limit, the estimate and `how` to read
 * less ("narrow the range or set count"). */
bool cmd_answer_fits(cmd_ctx_t *ctx, uint64_t bytes, const char *how);
/* The bytes one request may read from its sources, or go over for repeated
 * parameters: CMD_WORK_VALUES x --max-value-size (UINT64_MAX when none). */
uint64_t cmd_work_limit(const cmd_server_t *srv);
/* Whether a request may read `bytes` in all from its sources (`field`
 * names them): false with BAD_REQUEST naming the bound. */
bool cmd_work_fits(cmd_ctx_t *ctx, const char *field, uint64_t bytes);

/* Multi-key requests whose sources may repeat: first[i] is the index of
 * the first key equal to keys[i] (keys compared by bytes).  Returns false
 * when out of memory. */
bool cmd_keys_distinct(const ks_key_t *keys, size_t n, size_t *first);

#endif
