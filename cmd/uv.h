/*
 * uv.h - unique counting with Redis's HyperLogLog as operations (PFADD,
 * PFCOUNT, PFMERGE), answers equal to Redis's for the same items
 * (core/hll.h teaches the structure).
 *
 *   PFADD        adds items; with none it creates an empty HyperLogLog, as
 *                PFADD key does.  `updated`: whether a register changed (or
 *                the key was created).
 *   PFCOUNT      the cardinality of the key, or with `unions` of the union
 *                of the keys (computed under all their shards' locks; a key
 *                named twice counts once; missing keys are empty).  Like
 *                Redis, a single-key count stores the cardinality in the
 *                value's header when it was stale; that cache is derived
 *                data, not journaled, so a count needs no journal space and
 *                works on a full disk (a restart recomputes it).
 *   PFMERGE      the register-wise maximum of the key and its sources into
 *                the key (created when missing), then PFCOUNT of it: one
 *                atomic operation.
 *   HLL.EXPORT   the bytes Redis stores for the HyperLogLog (GET key);
 *                NOT_FOUND when missing.
 *   HLL.IMPORT   the key set from bytes read from Redis (SET key bytes),
 *                validated completely; replaces a HyperLogLog there.  Its
 *                record holds the bytes.
 */
#ifndef TALLY_CMD_UV_H
#define TALLY_CMD_UV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "cmd/itemlist.h"

/* The journal ids of the HyperLogLog operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_PFADD = 20,
    CMD_ID_PFCOUNT = 21,
    CMD_ID_PFMERGE = 22,
    CMD_ID_HLL_EXPORT = 23,
    CMD_ID_HLL_IMPORT = 24,
};

#define CMD_UV_MAX_KEYS 1000   /* keys in one union count or merge, the key's own included */

typedef struct cmd_pfadd_args {
    const char *key;
    size_t klen;
    cmd_items_t items;           /* 0..CMD_ITEMS_MAX */
} cmd_pfadd_args_t;

typedef struct cmd_pfcount_args {
    const char *key;
    size_t klen;
    cmd_items_t unions;          /* other keys (valid keys), 0..CMD_UV_MAX_KEYS - 1 */
} cmd_pfcount_args_t;

typedef struct cmd_pfmerge_args {
    const char *key;
    size_t klen;
    cmd_items_t sources;         /* keys, 1..CMD_UV_MAX_KEYS - 1 */
} cmd_pfmerge_args_t;

typedef struct cmd_hll_key_args {
    const char *key;
    size_t klen;
} cmd_hll_key_args_t;            /* HLL.EXPORT */

typedef struct cmd_hll_import_args {
    const char *key;
    size_t klen;
    const uint8_t *bytes;        /* a Redis HyperLogLog string (untrusted) */
    size_t len;
} cmd_hll_import_args_t;

typedef struct cmd_uv_res {
    bool updated;                /* PFADD */
    uint64_t count;              /* PFCOUNT, PFMERGE, HLL.IMPORT */
    bool sparse;                 /* HLL.IMPORT: the encoding */
    bool replaced;               /* HLL.IMPORT: a HyperLogLog was there */
    uint8_t *data;               /* HLL.EXPORT: the bytes, malloc'd (the caller frees) */
    size_t len;
} cmd_uv_res_t;

extern const cmd_def_t CMD_PFADD, CMD_PFCOUNT, CMD_PFMERGE, CMD_HLL_EXPORT, CMD_HLL_IMPORT;

#endif
