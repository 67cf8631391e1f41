/*
 * repl.h - what the API knows of replication (service/repl.h does it).
 *
 * A replica follows a primary: it loads the primary's snapshot
 * (GET /replication/snapshot), then long-polls the primary's stream of
 * journal records from that position (GET /replication/log?from=...),
 * re-executing each through the replay path.  Each poll acknowledges
 * everything before `from`, which is what --min-replicas-ack waits for.
 * Changes sent to a replica are refused (421 READONLY naming the primary,
 * or 503 when it is unknown) before anything is touched: the check is the
 * command layer's (cmd_writable), made when a change is admitted.
 *
 * GET /replication/epoch answers this node's role and the highest epoch it
 * knows: what a node started with --peers asks the others before it takes
 * a change as a primary (service/repl.h).  Asked with `nonce=` (hex), a
 * node holding the group's secret (--peer-secret-file) signs the nonce and
 * the exact bytes of its answer (header X-Tally-Peer-Signature,
 * service/peers.h): a peer's word counts only when it is signed for the
 * question asked.
 *
 * These three routes need the `replicate` scope (api/auth.h), which admin
 * does not grant.  An `epoch` above TALLY_EPOCH_MAX (core/persist_fmt.h)
 * is a 400; a newer epoch than the node's is a 409 that changes nothing
 * (service/repl.h: a caller's epoch never fences a node by itself).
 *
 * GET /info's "replication" object is this node's cmd_repl_status_t, as
 * api_repl_status_json writes it.
 *
 * POST /admin/promote makes a replica the primary under a new epoch;
 * POST /admin/replicate?primary=URL makes any node a replica of URL (an old
 * primary rejoining).  GET /readyz?role=primary answers 200 only on the
 * primary: what an orchestrator (HAProxy) routes writes by.
 */
#ifndef TALLY_API_REPL_H
#define TALLY_API_REPL_H

#include <jansson.h>

#include "cmd/repl.h"

/* The signature of an answer to a peer (service/peers.h reads it). */
#define API_REPL_SIG_HEADER "X-Tally-Peer-Signature"

/* Adds the "replication" object of GET /info, from the service's state
 * (api_admin_hooks_t.repl_status, api/admin.h). */
void api_repl_status_json(json_t *obj, const cmd_repl_status_t *st);

/* The service serves each call (cmd/repl.h) through
 * api_admin_hooks_t.repl_run and api/repl.c answers its result; whether
 * the node takes changes at all is the command layer's (cmd_writable). */

#endif
