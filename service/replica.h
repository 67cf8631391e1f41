/*
 * replica.h - the follower: a thread that makes this node a copy of a
 * primary (service/repl.h for the protocol), over HTTP with libcurl.
 *
 * It fetches GET /replication/snapshot, loads it in place of the keyspace
 * (persist_load_snapshot_bytes), then loops on GET /replication/log from its
 * position, re-executing every record through the replay path (the same
 * handlers that served it on the primary).  On a lost connection it retries
 * every half second from the same position; on 410 it fetches a new
 * snapshot.  Replicated changes are not journaled on the replica: a replica
 * restarting fetches a snapshot again, and a promotion takes a local
 * snapshot before the new primary takes its first change.
 */
#ifndef TALLY_REPLICA_H
#define TALLY_REPLICA_H

#include <stdint.h>

#include "cmd/cmd.h"
#include "cmd/repl.h"
#include "service/persist.h"

typedef struct replica replica_t;

/* Starts following `primary` (a base URL: --replica-of, POST
 * /admin/replicate or a member of --peers, never a URL a peer named) with
 * bearer `token` ("" none).  `epoch`: the highest epoch this node knows.
 * The token goes to that URL only: no redirect is followed and no proxy of
 * the environment is used.  The primary's epochs (its headers, the epoch
 * records of its stream) above TALLY_EPOCH_MAX are refused as damage.  NULL
 * when out of memory. */
replica_t *replica_start(const char *primary, const char *token, cmd_server_t *srv, persist_t *p, uint64_t epoch);
/* Replaces the bearer token of the exchanges that follow (a reload of
 * --replica-token-file); false when out of memory (the old one stays). */
bool replica_set_token(replica_t *f, const char *token);
/* Stops the thread (an exchange in flight is aborted) and frees f. */
void replica_stop(replica_t *f);
/* The highest epoch seen from the primary (or given at start). */
uint64_t replica_epoch(replica_t *f);
/* The follower's side of /info (cmd/repl.h) and /metrics. */
void replica_status(replica_t *f, cmd_repl_link_t *st);
void replica_metrics(replica_t *f, wbuf_t *out);

#endif
