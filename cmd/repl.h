/*
 * repl.h - replication's calls, their results and the node's replication
 * state, typed: what passes between a front-end and the service that
 * replicates (service/repl.h), so that the service answers in no protocol
 * and each front-end says it in its own (api/repl.c: the HTTP routes
 * /replication/... and /admin/promote, /admin/replicate, and the
 * "replication" object of /info).
 *
 *     front-end                 service/repl.h
 *     cmd_repl_call_t    ->     repl_run        (may wait: a thread of its own)
 *                        <-     cmd_repl_result_t
 *     /info              <-     cmd_repl_status_t (repl_status)
 *
 * A refusal is a cmd_err_t (cmd/err.h) whose message is the one tally has
 * always answered; a result holds values, never text meant for a protocol.
 */
#ifndef TALLY_CMD_REPL_H
#define TALLY_CMD_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/err.h"

#define CMD_REPL_URL_MAX 512         /* a primary's or a member's base URL, NUL included */
#define CMD_REPL_ID_MAX 40           /* a stream id or a replica's name, NUL included */
#define CMD_REPL_ADDR_MAX 64         /* a replica's address as text, NUL included */
#define CMD_REPL_NONCE_MIN 32        /* hex digits of a nonce: at least 128 random bits */
#define CMD_REPL_NONCE_MAX 128
#define CMD_REPL_SIG_MAX 128         /* a signature's text, NUL included (service/peers.h: 77 bytes) */
#define CMD_REPL_GROUP_MAX 16        /* members of --peers (service/options.h: OPTS_PEERS_MAX) */
#define CMD_REPL_REPLICAS_MAX 32     /* replicas a primary keeps track of at once */
#define CMD_REPL_STATE_MAX 1400      /* the outcome of the last round of questions to the peers */
#define CMD_REPL_ERROR_MAX 1100      /* a follower's last error */

typedef enum cmd_repl_op {
    CMD_REPL_SNAPSHOT,           /* a replica asks for a snapshot and its stream position */
    CMD_REPL_LOG,                /* a replica polls the records after its position */
    CMD_REPL_PROMOTE,            /* this node becomes the primary under a new epoch */
    CMD_REPL_FOLLOW,             /* this node becomes a replica of `primary` */
    CMD_REPL_EPOCH               /* a peer asks this node's role and epoch */
} cmd_repl_op_t;

/* One replication call, its parameters checked by the front-end. */
typedef struct cmd_repl_call {
    cmd_repl_op_t op;
    char run[CMD_REPL_ID_MAX];   /* log: the primary's stream id the position belongs to */
    uint64_t from;               /* log: the replica's position (= acknowledgement) */
    uint64_t records;            /* log: records the replica has applied in this stream */
    uint64_t epoch;              /* snapshot, log: the highest epoch the replica knows */
    int wait_ms;                 /* log: how long to wait for a record */
    char id[CMD_REPL_ID_MAX];    /* log: the replica's name */
    char addr[CMD_REPL_ADDR_MAX];    /* log: the replica's address */
    char primary[CMD_REPL_URL_MAX];  /* follow: the primary's base URL */
    char nonce[CMD_REPL_NONCE_MAX + 1];  /* epoch: the asker's nonce ("" none: the answer is not signed) */
} cmd_repl_call_t;

/* What a call came to.  Refused: `ok` false and `err` set, nothing else. */
typedef struct cmd_repl_result {
    bool ok;
    cmd_err_t err;
    /* SNAPSHOT: the snapshot's bytes; LOG: the framed records after `from`
     * (core/persist_fmt.h), possibly none.  malloc'd: the front-end frees
     * them (or hands them to its answer); NULL when len is 0. */
    uint8_t *data;
    size_t len;
    /* SNAPSHOT: the stream position the snapshot shows (run, offset,
     * records appended before it) and the primary's epoch.  LOG: the
     * stream's head (offset), its records and the epoch, after the poll.
     * PROMOTE: the epoch this node is the primary of.  EPOCH: the highest
     * epoch known and this node's stream id. */
    char run[CMD_REPL_ID_MAX];
    uint64_t offset, records, epoch;
    bool promoted;               /* PROMOTE: false when this node was the primary already */
    const char *role;            /* EPOCH: "primary", "replica", "fenced" or "probing" (static) */
    bool has_primary;            /* EPOCH: a replica's, in `primary` */
    char primary[CMD_REPL_URL_MAX];
} cmd_repl_result_t;

/* A replica as its primary sees it, from its polls. */
typedef struct cmd_repl_replica {
    char id[CMD_REPL_ID_MAX];
    char addr[CMD_REPL_ADDR_MAX];
    bool connected;              /* polled in the last few seconds */
    uint64_t offset;             /* the stream offset it holds everything before */
    uint64_t records;            /* records it has applied */
    uint64_t lag_records;        /* records it is behind the head */
    int64_t lag_ms;              /* age of the oldest record it has not acknowledged */
    int64_t last_seen_ms_ago;
} cmd_repl_replica_t;

/* A replica's link to its primary (the follower thread's). */
typedef struct cmd_repl_link {
    char id[CMD_REPL_ID_MAX];    /* the name it polls under */
    bool up;                     /* its last exchange succeeded */
    bool synced;                 /* it has a position in `run` */
    char run[CMD_REPL_ID_MAX];
    uint64_t offset, records, lag_records;
    uint64_t primary_epoch;      /* the highest epoch seen from the primary */
    uint64_t full_syncs, resumes, applied;
    int64_t last_ok_ms_ago;      /* -1: never */
    char last_error[CMD_REPL_ERROR_MAX];
    uint64_t last_snapshot_bytes;
    int64_t last_snapshot_ms;    /* its fetch and load */
} cmd_repl_link_t;

/* This node's replication, for /info. */
typedef struct cmd_repl_status {
    const char *role;            /* "primary", "replica", "fenced" or "probing" (static) */
    uint64_t epoch;
    char run[CMD_REPL_ID_MAX];   /* this node's stream id */
    uint64_t offset, records;    /* its stream's head and the records appended */
    uint64_t backlog_bytes, backlog_capacity;
    int min_replicas_ack, min_replicas_timeout_ms;
    bool has_primary;            /* a replica's, in `primary` */
    char primary[CMD_REPL_URL_MAX];
    /* --peers: the members, what the last round of questions found, and
     * the highest epoch its answers reported (ngroup 0: no --peers) */
    int ngroup;
    char group[CMD_REPL_GROUP_MAX][CMD_REPL_URL_MAX];
    char peers_state[CMD_REPL_STATE_MAX];
    uint64_t peers_epoch;
    /* --coordinator: what the coordinator did or waits for, last */
    bool coordinated;
    char coordinator_state[CMD_REPL_STATE_MAX];
    /* the replicas that polled this node's stream */
    int nreplicas, replicas_connected;
    cmd_repl_replica_t replicas[CMD_REPL_REPLICAS_MAX];
    uint64_t acks_timed_out, refused_too_few_replicas, keys_taken_back;
    bool has_link;               /* a replica: its link to the primary */
    cmd_repl_link_t link;
} cmd_repl_status_t;

#endif
