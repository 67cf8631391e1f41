/*
 * keycreate.h - creating a key's value, the step every reserving operation
 * shares (BF.RESERVE, CF.RESERVE, CMS.INITBYDIM, TOPK.RESERVE,
 * TDIGEST.CREATE): a new value stored under a key that must
 * not exist yet.
 */
#ifndef TALLY_CMD_KEYCREATE_H
#define TALLY_CMD_KEYCREATE_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd/keys.h"

/* Stores `value`, a new object of `type` (ownership passes here, NULL: the
 * caller's allocation failed), at the key, and with `fill` (may be NULL)
 * copies what the answer needs from it into `res` under the shard lock.
 * True once stored and journaled; false with ctx->err set and the value
 * freed, nothing changed: EXISTS ("a <type> already exists at this key")
 * when the key holds a `type` already, WRONGTYPE when it holds another
 * type, OUT_OF_MEMORY ("out of memory creating the <type>"), or a refusal
 * of the key handle (prefixes, cluster). */
bool cmd_create_key(cmd_ctx_t *ctx, const char *key, size_t klen, const ks_type_t *type, void *value,
                    void (*fill)(const void *value, void *res), void *res);

#endif
