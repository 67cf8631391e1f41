/*
 * journal.h - the append-only journal with group commit.
 *
 * Appending (under the shard locks of the change) only copies the record into
 * an in-memory buffer and returns its LSN: the byte position just past it in
 * the endless stream of all journal bytes.  Before answering, the server asks
 * for that LSN (journal_try / journal_wait_async): the buffered bytes are
 * copied into the file through a shared mapping of space reserved in advance
 * (no system call per change), and under fsync=always a flusher thread gives
 * every waiting request of a batch one shared fdatasync().  So:
 *
 *   always    acknowledged => on disk (fdatasync before the answer)
 *   everysec  acknowledged => in the kernel's page cache before the answer, on
 *             disk within about a second (the syncer thread's fdatasync every
 *             second)
 *   no        acknowledged => in the page cache; the OS decides when it hits disk
 *
 * A kill -9 loses nothing acknowledged under any policy; a power loss can
 * lose the last second under everysec, more under no.
 *
 * A failed write (no space can be reserved, I/O error) is retried: the buffer
 * keeps the bytes in order, waiting requests get an error after a timeout,
 * and nothing that was acknowledged is ever lost.
 *
 * Rotation (for snapshots): journal_rotate() marks the current end as the
 * boundary; bytes before it go to the old file, which gets a seal record
 * (core/persist_fmt.h), is cut to its data, synced and closed, bytes after
 * to the new one.  journal_close() seals the file the same way.
 */
#ifndef TALLY_JOURNAL_H
#define TALLY_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/persist_fmt.h"
#include "service/options.h"

typedef struct journal journal_t;

/* Takes ownership of fd (a new journal file: its header, then reserved space). */
journal_t *journal_create(int fd, uint64_t seq, fsync_mode_t mode);
/* Flushes, fsyncs and closes; frees j. */
void journal_close(journal_t *j);

/* Appends a record; returns its LSN, or 0 when out of memory. */
uint64_t journal_append(journal_t *j, const journal_req_t *req);
/* Waits until `lsn` is written (and synced under fsync=always).  Returns
 * false with *err set if that did not happen within timeout_ms. */
bool journal_wait(journal_t *j, uint64_t lsn, int timeout_ms, const char **err);
/* The same without blocking the caller: returns true when `lsn` is already
 * as durable as the policy asks (after writing it inline when that is quick:
 * a healthy journal under everysec/no).  Otherwise returns false and
 * `done(ud, ok, err)` is called later, from the journal's flusher thread,
 * once it is (ok) or after timeout_ms (not ok).  Under fsync=always the
 * flusher gives every waiting request of a batch one shared fdatasync. */
typedef void (*journal_done_fn)(void *ud, bool ok, const char *err);
/* Only the inline part: true when `lsn` is (or was just made) as durable as
 * the policy asks without waiting for the disk. */
bool journal_try(journal_t *j, uint64_t lsn);
bool journal_wait_async(journal_t *j, uint64_t lsn, int timeout_ms, journal_done_fn done, void *ud);
/* Writes and fsyncs everything appended so far, whatever the policy. */
bool journal_sync(journal_t *j, const char **err);
/* Called every second by the service: retries of writes that failed.
 * Under everysec the journal's own syncer thread, at nice 19, starts the
 * write-back of what is written every 100 ms and fdatasyncs every second
 * (if that thread could not be started, this call fdatasyncs instead). */
void journal_tick(journal_t *j);

/* Sets the boundary: records appended from now on go to new_fd (already
 * holding a header, synced).  Call with every shard locked.  Fails (closing
 * new_fd, *err set) when the new file cannot get the space already promised
 * by journal_reserve. */
bool journal_rotate(journal_t *j, int new_fd, uint64_t new_seq, const char **err);

/* Secures file space for `bytes` of records about to be appended (call
 * before applying a change, so a change that could not be made durable is
 * refused untouched): false with *err (ENOSPC...) when the space cannot be
 * reserved or the journal fails with an I/O error.  journal_release() gives
 * the promise back once the change is appended (or was not made). */
bool journal_reserve(journal_t *j, uint64_t bytes, const char **err);
void journal_release(journal_t *j, uint64_t bytes);
/* Completes a pending rotation: the old file gets its last bytes, is fsynced
 * and closed.  Returns false (with *err) if that failed. */
bool journal_finish_rotation(journal_t *j, const char **err);

/* True while a boundary set by journal_rotate has not been completed. */
bool journal_rotation_pending(journal_t *j);
uint64_t journal_seq(journal_t *j);
/* What /info and /metrics show, read under one lock. */
typedef struct journal_stats {
    uint64_t seq;         /* the current file's number, as journal_seq */
    uint64_t bytes;       /* bytes in the current file */
    uint64_t records;     /* records appended since start */
    uint64_t unsynced;    /* bytes written, not yet fdatasync'd */
    bool healthy;         /* false while writes fail */
    bool no_space;        /* the last reservation found no space (cleared once a page can be had) */
} journal_stats_t;
journal_stats_t journal_stats(journal_t *j);

#endif
