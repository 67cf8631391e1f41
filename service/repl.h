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
 * EPOCH file, written before the promoted node takes a change).  Replicas
 * send the highest epoch they know with every poll; a primary that sees a
 * newer epoch than its own was replaced: it becomes "fenced" and takes no
 * change until it is made a replica (POST /admin/replicate).
 *
 * Semi-synchronous writes (--min-replicas-ack N).  A change is refused
 * before it is applied (503) while fewer than N replicas are connected; once
 * applied and journaled, its answer waits until N replicas acknowledged the
 * stream past it, for --min-replicas-timeout ms.  Each change keeps the
 * pre-images of the keys it locked (api/undo.h) while it is in doubt; when
 * a wait times out, every change in doubt is taken back - with no change
 * in flight, each key restored to its state before the first of them and
 * the restoring records journaled and streamed - and their waits are
 * answered 503 "not applied" once those records are durable.
 */
#ifndef TALLY_REPL_H
#define TALLY_REPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"
#include "api/repl.h"
#include "service/options.h"
#include "service/persist.h"

typedef struct repl repl_t;

/* Reads the data directory's EPOCH, starts following --replica-of when
 * given.  NULL with err on failure. */
repl_t *repl_open(const tally_opts_t *o, api_server_t *api, persist_t *p, char *err, size_t errlen);
/* Stops following, wakes every poll; frees r. */
void repl_close(repl_t *r);
/* The hooks api/repl.h calls. */
const api_repl_hooks_t *repl_hooks(repl_t *r);

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
/* api_hooks_t.undo_begin, undo_end, undo_register (api/undo.h): whether a
 * change keeps pre-images (a semi-synchronous primary; the change then
 * holds the gate that taking back excludes), its end, and the pre-images of
 * a record just journaled, in doubt from then on at the returned position. */
bool repl_undo_begin(repl_t *r);
void repl_undo_end(repl_t *r);
uint64_t repl_undo_register(repl_t *r, api_undo_t *list);
/* Every ~100 ms: drops pre-images the replicas made safe; when a wait timed
 * out, takes back every change in doubt and answers their waits 503. */
void repl_tick(repl_t *r);

void repl_info(repl_t *r, json_t *obj);
void repl_metrics(repl_t *r, wbuf_t *out);

#endif
