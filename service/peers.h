/*
 * peers.h - asking the other nodes of a replication group (--peers) which
 * epoch and role they have: GET /replication/epoch over HTTP (libcurl).
 *
 * This is the evidence a node that starts as a primary weighs before taking
 * a change (service/repl.c decides): a peer promoted under a newer epoch, or
 * following another node, means this node was replaced.  It is a question,
 * not a vote: nothing here elects anyone.
 */
#ifndef TALLY_PEERS_H
#define TALLY_PEERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/repl.h"

/* One peer's answer. */
typedef struct peer_answer {
    bool answered;               /* a 200 with a well-formed body */
    char role[16];               /* "primary", "replica", "fenced", "probing" */
    uint64_t epoch;              /* the highest epoch the peer knows */
    char primary[API_REPL_URL_MAX];  /* a replica's primary ("" unknown / not a replica) */
    char run[API_REPL_ID_MAX];   /* the peer's stream id (tells a node listed among its own peers) */
    char error[800];             /* why there is no answer */
} peer_answer_t;

/* Asks `url` (a base URL) with bearer `token` ("" none), waiting at most
 * timeout_ms, or until *stop turns true (a shutdown).  Always fills *out. */
void peers_ask(const char *url, const char *token, long timeout_ms, const _Atomic bool *stop, peer_answer_t *out);

#endif
