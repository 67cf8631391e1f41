/*
 * repl.h - replication: a primary's stream of changes, replicas that follow
 * it, semi-synchronous acknowledgements, promotion under epochs.
 *
 * The stream.  Every change a primary journals is also appended, as the
 * same framed journal record (core/persist_fmt.h), to an in-memory backlog
 * (--repl-backlog bytes, a ring like Redis's repl-backlog).  A position in
 * the stream is (run, offset): `run` names this primary's stream (new at
 * every start and promotion), `offset` counts the record bytes appended
 * since.  A replica first fetches a snapshot (persist_snapshot_to_buffer:
 * shard by shard, the position read at the barrier, when every shard is
 * locked), then long-polls the records after that position.  A replica that
 * reconnects continues from its position while the backlog still holds it
 * (410 otherwise: it fetches a new snapshot).  Each poll acknowledges every
 * record before its `from`.
 *
 * Epochs.  Each promotion raises the epoch (kept in the data directory's
 * EPOCH file, written before the promoted node takes a change), never past
 * TALLY_EPOCH_MAX (core/persist_fmt.h), which every reader of an epoch
 * checks.  Replicas send the highest epoch they know with every poll; a
 * poll of a newer epoch than this node's is refused (409) and changes
 * nothing - a caller's epoch never fences a node by itself, since anyone
 * holding a replicate token could send one.  With --peers it makes the
 * prober ask the group at once.
 *
 * The group (--peers).  A prober thread asks every configured member GET
 * /replication/epoch, signed for a fresh nonce (service/peers.h); an
 * unsigned, badly signed or malformed answer is no answer.  With M the
 * members besides this node (its own entry, recognised by its stream id,
 * left out) and a majority more than M/2 of them, each round decides from
 * that round's answers only:
 *   - follow epoch E's primary P (a configured member, never a URL a peer
 *     names that is not one) when a majority reports E with P (P answering
 *     as the primary of E, replicas of E naming P) and E is newer than this
 *     node's (a probing or fenced node: E not older; a replica: also E the
 *     same when its own primary, a member, no longer says it is primary);
 *   - else fenced (a primary, probing or fenced node) while a majority
 *     reports an epoch newer than this node's;
 *   - else a fenced node is probing again (the newer epoch is no longer a
 *     majority's: the fence lifts), and a probing node becomes the primary
 *     once a majority of the whole group, itself included, answered, none
 *     of them with a newer epoch, none probing under the same epoch.
 * A primary that hears too few answers stays the primary.
 *
 * Semi-synchronous writes (--min-replicas-ack N).  A change is refused
 * before it is applied (503) while fewer than N replicas are connected; once
 * applied and journaled, its answer waits until N replicas acknowledged the
 * stream past it, for --min-replicas-timeout ms.  Each change keeps the
 * pre-images of the keys it locked (cmd/undo.h) while it is in doubt; when
 * a wait times out, every change in doubt is taken back - with no change
 * in flight, each key restored to its state before the first of them and
 * the restoring records journaled and streamed - and their waits are
 * answered 503 "not applied" once those records are durable.
 */
#ifndef TALLY_REPL_H
#define TALLY_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/access.h"
#include "cmd/repl.h"
#include "cmd/undo.h"
#include "service/options.h"
#include "service/peers.h"
#include "service/persist.h"

typedef struct repl repl_t;

/* What replication reads from files: the bearer token this node presents
 * to a primary and to its peers (--replica-token, or --replica-token-file
 * with its trailing newline trimmed) and the group's secret
 * (--peer-secret-file, trailing newline trimmed, PEERS_SECRET_MIN bytes at
 * least).  A file readable by other users, or writable by group or others,
 * is refused; one readable by its group is taken with a warning. */
typedef struct repl_creds {
    char token[CMD_TOKEN_MAX_LEN + 1];   /* "" none */
    uint8_t secret[PEERS_SECRET_MAX];
    size_t secret_len;                   /* 0: no --peer-secret-file */
} repl_creds_t;
/* Reads the files of o into *c; false with err naming the file and why. */
bool repl_creds_load(const tally_opts_t *o, repl_creds_t *c, char *err, size_t errlen);
/* Zeroes *c (the secret does not linger on a stack). */
void repl_creds_wipe(repl_creds_t *c);

/* Reads the data directory's EPOCH (a value that is not an epoch is
 * refused, naming the file), starts following --replica-of when given.
 * NULL with err on failure. */
repl_t *repl_open(const tally_opts_t *o, const repl_creds_t *c, cmd_server_t *srv, persist_t *p, char *err,
                  size_t errlen);
/* The EPOCH file's text: a decimal epoch up to TALLY_EPOCH_MAX, then at
 * most one newline; false for anything else (*epoch untouched). */
bool repl_epoch_parse(const char *text, size_t len, uint64_t *epoch);
/* Reads a one-line secret file (--coordinator-password-file) into buf as a
 * string, with the rules of the credential files above; false with err. */
bool repl_secret_read(const char *flag, const char *path, char *buf, size_t max, char *err, size_t errlen);
/* Whether o names a file repl_reload re-reads. */
bool repl_reloadable(const tally_opts_t *o);
/* Re-reads --replica-token-file and --peer-secret-file (SIGHUP, POST
 * /admin/reload); a refused file changes nothing (the token and secret
 * before stay), false with err. */
bool repl_reload(repl_t *r, const tally_opts_t *o, char *err, size_t errlen);
/* Stops following, wakes every poll; frees r. */
void repl_close(repl_t *r);
/* What the command layer and the replication routes ask (cmd_hooks_t's
 * writable and role, api_admin_hooks_t's repl_run and repl_sign): whether
 * this node takes changes (false: the primary's URL in `primary`, ""
 * unknown), its role's name, a replication call served on a thread of its
 * own (cmd/repl.h: *out filled, the front-end answers it), and the
 * signature of an answer to a peer's question (service/peers.h: false
 * without --peer-secret-file). */
bool repl_writable(repl_t *r, char *primary, size_t n);
const char *repl_role(repl_t *r);
void repl_run(repl_t *r, const cmd_repl_call_t *c, cmd_repl_result_t *out);
bool repl_sign(repl_t *r, const char *nonce, const void *body, size_t len, char out[CMD_REPL_SIG_MAX]);

/* A change journaled on the primary (called with the shards of its keys
 * locked, so the stream orders changes to one key as they were made). */
void repl_append(repl_t *r, const journal_req_t *req);
/* --min-replicas-ack: false with *err (not applied: 503) while fewer
 * replicas than required are connected. */
bool repl_reserve_ok(repl_t *r, const char **err);
/* The journal's wait hooks with the replicas' acknowledgement added when
 * --min-replicas-ack is set (same contracts as persist_*_hook). */
bool repl_try_hook(repl_t *r, persist_t *p, uint64_t lsn);
bool repl_wait_async_hook(repl_t *r, persist_t *p, uint64_t lsn, uint64_t pos,
                          void (*done)(void *ud, bool ok, const char *err), void *dud);
/* cmd_hooks_t.undo_begin, undo_end, undo_register (cmd/undo.h): whether a
 * change keeps pre-images (a semi-synchronous primary; the change then
 * holds the gate that taking back excludes), its end, and the pre-images of
 * a record just journaled, in doubt from then on at the returned position. */
bool repl_undo_begin(repl_t *r);
void repl_undo_end(repl_t *r);
uint64_t repl_undo_register(repl_t *r, cmd_undo_t *list);
/* Every ~100 ms: drops pre-images the replicas made safe; when a wait timed
 * out, takes back every change in doubt and answers their waits 503. */
void repl_tick(repl_t *r);

/* This node's replication for /info (cmd/repl.h), and its metrics. */
void repl_status(repl_t *r, cmd_repl_status_t *st);
void repl_metrics(repl_t *r, wbuf_t *out);

#endif
