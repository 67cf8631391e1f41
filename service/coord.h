/*
 * coord.h - failover through etcd (--coordinator): one replication group
 * per key prefix, its primary elected there, unattended.
 *
 * Keys (under --coordinator-prefix P; values JSON):
 *   P/leader          {"url": advertise URL, "lease": id} - the primary,
 *                     put under its lease by a transaction that succeeds only
 *                     if the key does not exist (create_revision == 0).  The
 *                     key's create revision is the primary's epoch: issued by
 *                     etcd, above every earlier one, written in the journal as
 *                     the epoch record (repl.h), so every record carries it.
 *   P/members/URL     {"url", "epoch", "offset", "led", "role", "replica_id",
 *                     "primary", "vacant"} - each member's replication
 *                     position, under its own lease (it disappears with the
 *                     member); "vacant": published after that member's own
 *                     read of P/leader found no key (the position read since).
 *   P/sync            {"epoch", "min_acks", "replicas": [replica ids]} - with
 *                     --min-replicas-ack, the replicas whose acknowledgements
 *                     the primary of `epoch` counts (written by a transaction
 *                     that checks the writer still holds P/leader).
 *   P/epoch-floor     rewritten only to raise etcd's revision above an epoch
 *                     a data directory already knows (a group moving to etcd).
 *
 * Every member runs one thread that, every ~200 ms: keeps its lease alive
 * (every TTL/4), publishes its position when it changed, reads P/leader, and
 *   - follows the node the key names (POST /admin/replicate's path: a new
 *     snapshot from it, then its stream);
 *   - when there is no key, and every other member has published a position
 *     as "vacant" (and a replica of P/sync's set one of that set's epoch):
 *     the last primary stopped taking changes before its key could go, so
 *     such a position holds all that member acknowledged, while one
 *     published earlier - by a member cut off from etcd for a while - may
 *     not; it takes the key if its position is the highest among
 *     the members that answer - (epoch, offset in that epoch's stream, led,
 *     then the smaller URL) - and, with P/sync of that epoch naming S and
 *     min_acks k, at least |S| - k + 1 of S answer (so one of the replicas
 *     that acknowledged any answered change is among them, and the highest
 *     position holds it); then it is promoted under the key's revision.
 *
 * The primary takes changes only until its deadline: the monotonic time at
 * which it sent its last successful keepalive, plus the TTL, minus a fifth
 * of it.  etcd cannot expire the lease before that, so a paused or cut-off
 * primary stops (503, /readyz?role=primary 503) before another node can
 * take the key; a change whose acknowledgement arrives after the deadline is
 * answered 503 too.  The primary publishes P/sync before counting a
 * replica's acknowledgements, and removes a replica that stopped polling
 * (it stops counting it at once) only once --min-replicas-ack replicas it
 * still counts hold everything acknowledged until then: every answered
 * change is then held by k members of the published set.
 */
#ifndef TALLY_COORD_H
#define TALLY_COORD_H

#include <stddef.h>

#include "service/etcd.h"
#include "service/options.h"
#include "service/repl.h"

typedef struct coord coord_t;

/* Starts the coordinator's thread for r (o->coordinator set).  NULL with
 * err when the options or the password file are refused. */
coord_t *coord_open(const tally_opts_t *o, repl_t *r, char *err, size_t errlen);
/* A client of --coordinator's etcd with its TLS files and credentials (the
 * password file read now), requests bounded by timeout_ms (0: the client's
 * defaults); NULL with err.  The election's and the cluster map's. */
etcd_client_t *coord_etcd_open(const tally_opts_t *o, long timeout_ms, char *err, size_t errlen);
/* Stops the thread; a primary gives its key up (revokes its lease) so
 * another member takes over at once; frees c. */
void coord_close(coord_t *c);

#endif
