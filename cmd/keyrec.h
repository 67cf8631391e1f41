/*
 * keyrec.h - the records of DEL and RESTORE (cmd/keys_ops.h), which the
 * layer itself writes besides the operations: an eviction journals its key's
 * deletion, and a change taken back (cmd/undo.h) or a restore that could not
 * store its value journals the key's state.  Here, below both the layer's
 * journal and the operations, so that neither calls the other.
 */
#ifndef TALLY_CMD_KEYREC_H
#define TALLY_CMD_KEYREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"
#include "core/persist_fmt.h"

typedef struct cmd_del_args {
    const char *key;
    size_t klen;
    bool has_digest;
    uint64_t digest;             /* keydump_digest of the value expected */
} cmd_del_args_t;

typedef struct cmd_restore_args {
    const char *key;
    size_t klen;
    bool replace;
    bool has_ttl;
    int64_t ttl_ms;              /* with has_ttl: 0 (no expiry) .. INT64_MAX / 2 - now */
    const uint8_t *dump;
    size_t len;
} cmd_restore_args_t;

/* DEL: u8 version 1 | key | u8 has_digest | u64 digest (0 without). */
void cmd_keyrec_del_encode(const void *args, wbuf_t *out);
bool cmd_keyrec_del_decode(rbuf_t *in, void *args, const char **why);
/* RESTORE: u8 version 1 | key | u8 flags (1 replace, 2 has_ttl) | i64 ttl_ms
 * (0 without) | blob dump. */
void cmd_keyrec_restore_encode(const void *args, wbuf_t *out);
/* The record but the dump's bytes, which follow it (journal_req_t.tail):
 * how the layer journals a key's state without copying its dump. */
void cmd_keyrec_restore_head(const cmd_restore_args_t *a, wbuf_t *out);
bool cmd_keyrec_restore_decode(rbuf_t *in, void *args, const char **why);

/* The sizes of those records whole (frame, header and arguments): what a
 * deletion or a key's state takes in the journal. */
#define CMD_KEYREC_DEL_SIZE(klen) (JOURNAL_COMMAND_FIXED + 1 + 4 + (uint64_t)(klen) + 1 + 8)
#define CMD_KEYREC_RESTORE_SIZE(klen, dump_len) \
    (JOURNAL_COMMAND_FIXED + 1 + 4 + (uint64_t)(klen) + 1 + 8 + 4 + (uint64_t)(dump_len))

#endif
