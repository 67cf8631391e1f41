/*
 * journal.h - what a change writes besides itself: its journal record,
 * written into space secured before the change was made.
 *
 * The rule that makes a "not applied" answer change nothing: no record is
 * appended into space that was not secured before the change it records was
 * made.  A request secures its own record when it is admitted
 * (cmd_journal_reserve, from a bound the front-end gives: an HTTP request
 * as received takes at most twice its size plus a page); an operation whose
 * records can be larger (canonical forms) secures the rest first
 * (cmd_journal_reserve_more); an eviction secures its deletion before the
 * key is removed.  ctx->journal_used counts what the request appended, and
 * debug builds stop when it passes ctx->journal_held, so the test suites
 * check every operation's bound.
 *
 * These are the only writers of journal records: replay runs each record
 * again through the same operations, with ctx->replay set (nothing is
 * journaled then).
 */
#ifndef TALLY_CMD_JOURNAL_H
#define TALLY_CMD_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "cmd/keyrec.h"

/* The longest deletion an eviction journals (a DEL record, cmd/keyrec.h). */
#define CMD_EVICT_RECORD_MAX CMD_KEYREC_DEL_SIZE(KS_KEY_MAX)

/* Secures `bytes` of journal space for the request's records (nothing on
 * replay or without a journal): false with UNAVAILABLE set when the disk
 * cannot take it; what it holds is given back by cmd_journal_unreserve
 * (cmd_ctx_end). */
bool cmd_journal_reserve(cmd_ctx_t *ctx, uint64_t bytes);
/* Makes sure the request holds room for `bytes`, a bound on everything it
 * will still journal, securing only what the room it holds and has not
 * used leaves uncovered; false with UNAVAILABLE set. */
bool cmd_journal_reserve_more(cmd_ctx_t *ctx, uint64_t bytes);
void cmd_journal_unreserve(cmd_ctx_t *ctx);

/* Journals the request's change (call under the shard locks, only when
 * state changed): its operation's command record (ctx->rec, cmd_call).
 * Raises ctx->journal_lsn to the record's position. */
void cmd_journal_change(cmd_ctx_t *ctx);
/* Journals `rec`, a record the request writes in its secured space. */
void cmd_journal_record(cmd_ctx_t *ctx, const journal_req_t *rec);
/* Journals `key`'s state: with `dump` (a key dump, core/keydump.h) a
 * RESTORE record that replaces it with TTL ttl_ms (0: no expiry), without
 * it a DEL record (cmd/keyrec.h).  What a restore
 * that could not store its value, and a change taken back (cmd/undo.h),
 * leave in the journal. */
void cmd_journal_key_state(cmd_ctx_t *ctx, const char *key, size_t klen, const void *dump, size_t dump_len,
                           int64_t ttl_ms);
/* Journals a key's eviction as its deletion (in space the caller secured). */
void cmd_journal_eviction(cmd_ctx_t *ctx, const char *key, size_t len);

/* Percent-encodes a key as one path segment into out (NUL-terminated);
 * out must hold 3 * len + 1 bytes. */
size_t cmd_escape_segment(const char *key, size_t len, char *out);

#endif
