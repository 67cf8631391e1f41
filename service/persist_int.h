/*
 * persist_int.h - what the files of persistence share, and nobody else:
 * persist_t itself, and the functions one of them calls in another.
 * service/persist.h is persistence's face; the files and the protocol are
 * described there.
 *
 *     persist.c           the data directory's lifecycle: open (lock, load,
 *                         start the journal), housekeeping, /info and
 *                         /metrics, close
 *     persist_load.c      loading: the snapshot, the journals' replay, a
 *                         replica's snapshot in place of the keyspace
 *     persist_replay.c    one record re-executed (the HTTP adapter's for
 *                         the HTTP requests of older record kinds)
 *     persist_journal.c   the journal as changes use it: starting it, the
 *                         hooks (reserve, append, wait), the epoch record
 *     persist_snapshot.c  writing snapshots: to the file, for a replica,
 *                         periodically
 *     persist_check.c     tallyd --check
 *     persist_files.c     the data directory's files: names, listing,
 *                         mapping, creating and sealing journals
 *
 * Calls run one way (persist.c -> load, journal, snapshot; snapshot ->
 * journal; each of them -> files and replay): no file calls one that calls
 * it.
 */
#ifndef TALLY_PERSIST_INT_H
#define TALLY_PERSIST_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/persist_fmt.h"
#include "service/journal.h"
#include "service/persist.h"

#define SNAPSHOT_NAME "snapshot.tly"
#define SNAPSHOT_TMP "snapshot.tly.tmp"
#define LOCK_NAME "LOCK"

struct persist {
    char dir[512];
    cmd_server_t *srv;
    ks_t *ks;
    bool journal_on;
    fsync_mode_t fsync;
    int journal_wait_ms;                  /* a request waits this long for a failing disk */
    int snapshot_interval;
    int lock_fd;
    /* The journal: set once at start - or, when tallyd started on a full
     * disk, by the housekeeping once space returns (hence atomic: request
     * threads read it unlocked).  NULL with journal_on: waiting for space,
     * every change refused before it is applied. */
    _Atomic(journal_t *) j;
    uint64_t next_seq;                    /* journal seq a snapshot taken now would start at (journal off, or the
                                             journal not started yet) */
    /* A start on a full disk (under snap_mu after persist_open): the seal
     * of a journal a crash left open, and the new journal, wait for space. */
    bool seal_deferred;
    uint64_t seal_seq;
    journal_scan_t seal_sc;
    int64_t deferred_log_ns;              /* when the wait was last logged */
    _Atomic uint64_t dirty;
    pthread_mutex_t snap_mu;
    _Atomic int64_t last_snapshot_mono;   /* written by whoever snapshots, read by persist_tick */
    int64_t last_tick_sec;
    pthread_t periodic;                   /* the periodic snapshot's thread (persist_tick) ... */
    bool periodic_running;                /* ... started and not yet joined */
    _Atomic bool periodic_done;           /* ... and finished */
    /* last snapshot outcome, under snap_mu */
    bool have_last;
    snapshot_stats_t last;
    bool last_ok;
    char last_err[256];
    uint64_t snapshots_ok, snapshots_failed;
    int64_t load_ns;
    uint64_t loaded_keys, replayed_records;
    uint64_t journal_epoch;               /* the highest epoch record replayed at start */
    _Atomic uint64_t epoch;               /* written again into each journal a snapshot starts */
    /* closes and opens the data routes around a replica's load (server_set_loading) */
    void (*load_gate)(void *ud, bool loading);
    void *load_gate_ud;
};

/* The answer of a change refused while the journal waits for space. */
#define PERSIST_NO_JOURNAL                                                                                           \
    "tallyd started on a full disk and has no journal yet; changes are taken again once there is space"

/* Errors that mean "no room on the device", which may pass. */
static inline bool persist_space_error(int e) { return e == ENOSPC || e == EDQUOT || e == EFBIG; }

/* persist_files.c.  A file mapped read-only (MADV_SEQUENTIAL): 0 or the
 * errno; the journal file of a sequence number and back; the sequence
 * numbers present, sorted (malloc'd); a new journal with its header,
 * synced with its directory; whether a journal holds any record (or
 * anything that is not one); in words, what a scan found past the last
 * record; sealing a journal a crash left open (0 or the errno, err set). */
typedef struct mapped {
    uint8_t *p;
    size_t len;
} mapped_t;
int persist_map_file(const char *path, mapped_t *m);
void persist_unmap_file(mapped_t *m);
void persist_journal_path(const persist_t *p, uint64_t seq, char *out, size_t n);
bool persist_parse_journal_name(const char *name, uint64_t *seq);
int persist_list_journals(const persist_t *p, uint64_t **out, size_t *n);
int persist_create_journal(persist_t *p, uint64_t seq, int *fd_out, char *err, size_t errlen);
bool persist_journal_has_records(const char *path);
void persist_describe_end(const journal_scan_t *s, char *out, size_t n);
int persist_seal_journal(persist_t *p, uint64_t seq, const journal_scan_t *sc, char *err, size_t errlen);

/* persist_replay.c.  The name of an HTTP request record's method, NULL for
 * a number that names none; the record of a promotion's epoch (its body in
 * buf, JOURNAL_EPOCH_BUF bytes). */
const char *persist_method_name(unsigned method);
void persist_epoch_record(uint64_t epoch, int64_t now_ns, char *buf, journal_req_t *out);

/* persist_load.c.  Loads the snapshot and replays the journals (persist_open). */
bool persist_load(persist_t *p, char *err, size_t errlen);

/* persist_journal.c.  Starts the journal at p->next_seq (sealing first a
 * journal whose seal waited for space): 0 or the errno with err set; a
 * start on a full disk tried again (each second, from persist_tick, under
 * snap_mu); the epoch record `rec` appended, waited for until durable. */
int persist_journal_start(persist_t *p, char *err, size_t errlen);
void persist_journal_retry(persist_t *p, int64_t now);
bool persist_epoch_journal(persist_t *p, const journal_req_t *rec, char *err, size_t errlen);

/* persist_snapshot.c.  The periodic snapshot (persist_tick), here, and
 * joining its thread once it has finished (`wait`: even if it has not). */
void persist_periodic_snapshot(persist_t *p);
void persist_periodic_join(persist_t *p, bool wait);
void *persist_periodic_snapshot_main(void *arg);

#endif
