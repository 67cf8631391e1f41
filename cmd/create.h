/*
 * create.h - the step every create operation shares (CMS.INITBYDIM,
 * TOPK.RESERVE, TDIGEST.CREATE: structures made explicitly with their
 * parameters, as RedisBloom makes them): a new value stored at a key that
 * holds none.
 */
#ifndef TALLY_CMD_CREATE_H
#define TALLY_CMD_CREATE_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd/cmd.h"

/* Stores `value`, a new value of `type` (owned by the keyspace from then
 * on), at the key, and journals the change.  Refuses, freeing the value and
 * changing nothing: OUT_OF_MEMORY when value is NULL (the caller's
 * allocation failed) or cannot be stored, EXISTS when the key holds a
 * `type` already, WRONGTYPE when it holds another type (and the key
 * handle's refusals: prefixes, slot).  fill (may be NULL) runs under the
 * key's lock once the value is stored, to copy what the answer needs into
 * res. */
bool cmd_key_create(cmd_ctx_t *ctx, const char *key, size_t klen, const ks_type_t *type, void *value,
                    void (*fill)(const void *value, void *res), void *res);

#endif
