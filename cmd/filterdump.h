/*
 * filterdump.h - RedisBloom's SCANDUMP / LOADCHUNK for the filters that
 * have them (BF.SCANDUMP, BF.LOADCHUNK, CF.SCANDUMP, CF.LOADCHUNK): the one
 * piece both families run, over core's ks_dump_ops_t.
 *
 * The bytes are RedisBloom's, unchanged (core/bloom.h and core/cuckoo.h
 * describe the format).  The cursor is RedisBloom's iterator: a dump at 0
 * answers the header and cursor 1; a dump at C answers the next chunk (at
 * most CMD_DUMP_CHUNK bytes) and its cursor, which is both what to load
 * the chunk with and where the next dump starts; cursor 0 and no bytes mean
 * the end.
 *
 * A load follows BF.LOADCHUNK: the header (cursor 1) creates the filter at
 * a missing key (NOT_FOUND for any other cursor there); on an existing
 * filter every chunk is written in place, and one that does not fit a
 * sub-filter's array is refused (nothing written).  The bytes are
 * untrusted: core validates the header completely; the filter it describes
 * may not pass --max-value-size, and room is made for it under --maxmemory
 * before it is built.  A load's record holds the key, the cursor and the
 * chunk, so that replay writes the same bytes.
 */
#ifndef TALLY_CMD_FILTERDUMP_H
#define TALLY_CMD_FILTERDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"

#define CMD_DUMP_CHUNK (512u << 10)   /* a chunk's bytes at most: half the default --max-body, so each loads back */

/* A filter family's dump: core's interface and why a value may have no dump. */
typedef struct cmd_filterdump {
    const ks_dump_ops_t *ops;
    const char *why_not;         /* the BAD_REQUEST when ops->header refuses a value */
    /* The header chunk's length, when it grows with the value (checked
     * against --max-answer-size before it is built); NULL: small. */
    uint64_t (*header_len)(const void *value);
} cmd_filterdump_t;

typedef struct cmd_scandump_args {
    const char *key;
    size_t klen;
    int64_t cursor;              /* >= 0 */
} cmd_scandump_args_t;

typedef struct cmd_scandump_res {
    uint8_t *data;               /* malloc'd, the caller's to free (NULL when len is 0) */
    size_t len;
    int64_t cursor;              /* the chunk's cursor: 1 after the header, 0 past the end */
} cmd_scandump_res_t;

typedef struct cmd_loadchunk_args {
    const char *key;
    size_t klen;
    int64_t cursor;              /* >= 1 */
    const uint8_t *data;
    size_t len;
} cmd_loadchunk_args_t;

typedef struct cmd_loadchunk_res {
    uint64_t loaded;             /* the chunk's bytes */
} cmd_loadchunk_res_t;

/* The operations' bodies, for the families' table rows. */
bool cmd_filter_scandump(cmd_ctx_t *ctx, const cmd_filterdump_t *d, const cmd_scandump_args_t *a,
                         cmd_scandump_res_t *r);
bool cmd_filter_loadchunk(cmd_ctx_t *ctx, const cmd_filterdump_t *d, const cmd_loadchunk_args_t *a,
                          cmd_loadchunk_res_t *r);
/* A load's record: u8 version 1 | key | i64 cursor | blob chunk. */
void cmd_loadchunk_encode(const void *args, wbuf_t *out);
bool cmd_loadchunk_decode(rbuf_t *in, void *args, const char **why);

#endif
