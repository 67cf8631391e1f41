/*
 * persist.h - durability: the data directory, snapshots and the journal.
 *
 * Files in the data directory:
 *   LOCK                    held (flock) while a tallyd uses the directory
 *   snapshot.tly            the latest complete snapshot (core/persist_fmt.h)
 *   snapshot.tly.tmp        a snapshot being written (removed on failure)
 *   journal.<seq>.tlj       changes after the snapshot, seq = 1, 2, ...
 *
 * Start-up loads snapshot.tly, then replays journal.<s>.tlj for s from the
 * snapshot's journal_seq upward, through the same API handlers that served
 * the requests.  Both kinds of file are read by the one reader of
 * core/persist_fmt (shared with --check).  A torn last record of the newest
 * journal (a crash mid-write, never acknowledged) is dropped with a log line
 * naming the offset; any other damage refuses to start and leaves every file
 * as it is.  A journal left open by a crash is then sealed before the next
 * one is created.
 *
 * Snapshot: new journal file created and synced -> barrier (all shard locks:
 * journal boundary + snapshot epoch) -> old journal completed and synced ->
 * records written shard by shard to snapshot.tly.tmp -> fflush/fsync -> close
 * -> rename -> fsync(dir) -> older journals deleted.  At every instant some
 * (snapshot, journals) set on disk holds everything acknowledged.
 */
#ifndef TALLY_PERSIST_H
#define TALLY_PERSIST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cmd/cmd.h"
#include "cmd/persist.h"
#include "service/options.h"

typedef struct persist persist_t;

typedef cmd_snapshot_stats_t snapshot_stats_t;   /* a snapshot taken (cmd/persist.h) */

/* Opens (creating) the data directory, locks it, loads the snapshot and
 * replays the journals into srv->ks.  Returns NULL with a message that names
 * the file, the offset and what to do when anything is damaged. */
persist_t *persist_open(const tally_opts_t *o, cmd_server_t *srv, char *err, size_t errlen);

/* api_hooks_t.journal */
uint64_t persist_journal_hook(void *ud, const journal_req_t *req);
/* api_hooks_t.journal_reserve / journal_release */
bool persist_reserve_hook(void *ud, uint64_t bytes, const char **err);
/* NULL while changes can be made durable; else why not (a static string):
 * tallyd started on a full disk and its journal waits for space, or journal
 * writes are failing.  Reads are served either way. */
const char *persist_unwritable(persist_t *p);
void persist_release_hook(void *ud, uint64_t bytes);
/* server_hooks_t.journal_wait */
bool persist_wait_hook(void *ud, uint64_t lsn, const char **err);
/* server_hooks_t.journal_try */
bool persist_try_hook(void *ud, uint64_t lsn);
/* server_hooks_t.journal_wait_async */
bool persist_wait_async_hook(void *ud, uint64_t lsn, void (*done)(void *ud, bool ok, const char *err), void *dud);

/* Takes a snapshot now (one at a time: a second caller waits for the first
 * and then takes its own).  Returns false with err filled on failure. */
bool persist_snapshot(persist_t *p, snapshot_stats_t *st, char *err, size_t errlen);
/* A snapshot for a replica, into `out` (the snapshot file's bytes; its
 * journal_seq is 0): taken like persist_snapshot (shard by shard, one
 * snapshot at a time) but not written to disk.  at_barrier(ud) runs while
 * every shard is locked, at the instant the snapshot shows: the replication
 * stream's position is read there. */
bool persist_snapshot_to_buffer(persist_t *p, wbuf_t *out, void (*at_barrier)(void *ud), void *ud, char *err,
                                size_t errlen);
/* Replaces the whole keyspace with a snapshot's keys (a replica's full
 * resynchronisation): the bytes are checked completely first, like a
 * snapshot file; false with err when they are refused. */
bool persist_load_snapshot_bytes(persist_t *p, const uint8_t *bytes, size_t len, char *err, size_t errlen);
/* What closes the data routes while persist_load_snapshot_bytes replaces
 * the keyspace and opens them after (server_set_loading): gate(ud, true)
 * returns once no request is reading. */
void persist_set_load_gate(persist_t *p, void (*gate)(void *ud, bool loading), void *ud);
/* Re-executes one journal record (the rules of algorithm generation `gen`):
 * an operation of the command table directly, an HTTP request of an older
 * record kind through the HTTP adapter (req.replay); a refusal is logged
 * with `where` and `off`. */
void persist_replay_request(cmd_server_t *srv, const journal_req_t *q, unsigned gen, const char *where, size_t off);
/* Whether a record is one replay knows: any but an HTTP request whose
 * method the HTTP adapter does not number. */
bool persist_record_known(const journal_req_t *q);
/* The highest epoch record (core/persist_fmt.h) the journals replayed at
 * start held; 0 when none. */
uint64_t persist_journal_epoch(persist_t *p);
/* Writes the epoch record of a promotion to the journal and waits until it
 * is durable; *rec (its body in buf, JOURNAL_EPOCH_BUF bytes) is the record,
 * for the replication stream.  False with err when the journal refused it.
 * From then on every snapshot writes the record again at the start of the
 * journal it begins (the journals holding it are deleted), so the newest
 * journal always holds the epoch. */
bool persist_epoch_append(persist_t *p, uint64_t epoch, journal_req_t *rec, char *buf, char *err, size_t errlen);
/* The epoch a snapshot writes into the journal it begins (the highest kept;
 * 0: none, nothing written). */
void persist_epoch_keep(persist_t *p, uint64_t epoch);
/* Called by the service every ~100 ms: journal fsync/retries each second
 * (write-back started in between), and the periodic snapshot when due and
 * anything changed, started on a thread of its own at nice 19. */
void persist_tick(persist_t *p);
/* Changes since the last successful snapshot. */
uint64_t persist_dirty(persist_t *p);
/* The data directory's state for /info (cmd/persist.h). */
void persist_status(persist_t *p, cmd_persist_status_t *st);
void persist_metrics(persist_t *p, wbuf_t *out);
/* Waits for a periodic snapshot under way, syncs and closes the journal and
 * releases the directory lock. */
void persist_close(persist_t *p);

/* `tallyd --check FILE`: verifies a snapshot or journal without loading it
 * into a server and prints what it holds.  Returns 0 when the file is sound,
 * 1 when damaged, 2 when it cannot be read. */
int persist_check(const char *path, FILE *out);

#endif
