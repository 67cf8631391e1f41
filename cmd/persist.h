/*
 * persist.h - what the service says of its durability, typed: a snapshot's
 * outcome and the data directory's state, as service/persist.h reports
 * them and a front-end renders them (api/ops.c: POST /admin/snapshot and
 * the "persistence" object of /info).  No protocol here.
 */
#ifndef TALLY_CMD_PERSIST_H
#define TALLY_CMD_PERSIST_H

#include <stdbool.h>
#include <stdint.h>

#define CMD_PERSIST_DIR_MAX 512      /* the data directory's path, NUL included */
#define CMD_PERSIST_ERROR_MAX 256    /* why the last snapshot failed */

/* A snapshot taken. */
typedef struct cmd_snapshot_stats {
    uint64_t bytes;
    uint64_t records;            /* keys */
    int64_t duration_ns;
    int64_t max_lock_ns;         /* longest a shard lock was held by the snapshot */
    int64_t finished_ms;         /* wall clock */
    uint64_t journal_seq;        /* the journal that follows it */
} cmd_snapshot_stats_t;

/* The data directory, for /info. */
typedef struct cmd_persist_status {
    char data_dir[CMD_PERSIST_DIR_MAX];
    bool journal;                /* --journal on */
    const char *fsync;           /* the --fsync policy's name (static) */
    int snapshot_interval;       /* seconds; 0 none */
    uint64_t changes_since_snapshot;
    int64_t load_ns;             /* loading at start: the snapshot and the journals' replay */
    uint64_t replayed_records;
    const char *unwritable;      /* why changes cannot be made durable now (static), or NULL */
    bool has_journal;            /* a journal is open: the four below are its */
    uint64_t journal_seq, journal_bytes, journal_unsynced_bytes;
    bool journal_healthy;
    bool has_last;               /* a snapshot was attempted since start: */
    bool last_ok;                /* ... and succeeded (last), or failed (last_error) */
    cmd_snapshot_stats_t last;
    char last_error[CMD_PERSIST_ERROR_MAX];
} cmd_persist_status_t;

#endif
