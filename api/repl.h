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
 * POST /admin/promote makes a replica the primary under a new epoch;
 * POST /admin/replicate?primary=URL makes any node a replica of URL (an old
 * primary rejoining).  GET /readyz?role=primary answers 200 only on the
 * primary: what an orchestrator (HAProxy) routes writes by.
 */
#ifndef TALLY_API_REPL_H
#define TALLY_API_REPL_H

#include "api/api.h"

#define API_REPL_URL_MAX 512
#define API_REPL_ID_MAX 40
#define API_REPL_NONCE_MIN 32        /* hex digits of a nonce: at least 128 random bits */
#define API_REPL_NONCE_MAX 128

typedef enum api_repl_op {
    API_REPL_SNAPSHOT,           /* GET /replication/snapshot */
    API_REPL_LOG,                /* GET /replication/log */
    API_REPL_PROMOTE,            /* POST /admin/promote */
    API_REPL_FOLLOW,             /* POST /admin/replicate?primary=URL */
    API_REPL_EPOCH               /* GET /replication/epoch */
} api_repl_op_t;

/* One replication request, its parameters checked by api/repl.c. */
typedef struct api_repl_call {
    api_repl_op_t op;
    char run[API_REPL_ID_MAX];   /* log: the primary's stream id the position belongs to */
    uint64_t from;               /* log: the replica's position (= acknowledgement) */
    uint64_t records;            /* log: records the replica has applied in this stream */
    uint64_t epoch;              /* snapshot, log: the highest epoch the replica knows */
    int wait_ms;                 /* log: how long to wait for a record */
    char id[API_REPL_ID_MAX];    /* log: the replica's name */
    char addr[64];               /* log: the replica's address */
    char primary[API_REPL_URL_MAX];  /* follow: the primary's base URL */
    char nonce[API_REPL_NONCE_MAX + 1];  /* epoch: the asker's nonce ("" none: the answer is not signed) */
} api_repl_call_t;

/* The service serves each call through api_admin_hooks_t.repl_run; whether
 * the node takes changes at all is the command layer's (cmd_writable). */

#endif
