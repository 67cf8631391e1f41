/*
 * grpc_server.h - the gRPC listener (--grpc-port): Envoy's rate limit
 * service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit)
 * and gRPC's health check (grpc.health.v1.Health/Check) over HTTP/2.
 *
 * HTTP/2 is nghttp2's (its session, frames, HPACK, flow control and flood
 * protections); the sockets, TLS and loops are ours, as resp_server.c's:
 * --threads loops, each with its own epoll set, all waiting on the one
 * listening socket with EPOLLEXCLUSIVE, each serving the connections it
 * accepted from start to end.  A call runs on its loop's thread when its
 * request ends (END_STREAM); the message translation is grpc/grpc.h's and
 * the decision rls/'s, on the command layer.
 *
 * Cleartext HTTP/2 with prior knowledge (Envoy's envoy_grpc clusters), or
 * with --tls-cert TLS with ALPN h2 on the same credentials, client CAs and
 * reloads as HTTPS (service/tls.h).
 *
 * Limits:
 *   connections     --max-connections for the port (over it: closed at once)
 *   streams         1024 concurrent streams a connection (SETTINGS), more
 *                   are refused by HTTP/2 (REFUSED_STREAM: clients queue)
 *   a message       4 MiB (RESOURCE_EXHAUSTED); the bodies a connection
 *                   holds at once: 64 MiB (RESOURCE_EXHAUSTED past it)
 *   a call          its grpc-timeout: DEADLINE_EXCEEDED when it passes
 *                   before the call ran (checked every 100 ms)
 *   idle            --timeout seconds without a byte and no stream open: a
 *                   GOAWAY, closed
 *   handshake       --header-timeout seconds for TLS and the client's
 *                   preface: closed
 *   output          a connection whose peer does not read is not read either
 *                   (its streams wait; HTTP/2 flow control holds the peer)
 *
 * Shutdown: grpc_server_quiesce stops accepting and sends each connection
 * a GOAWAY naming the last stream it took: those finish, new ones go to
 * another server; grpc_server_drain waits for the connections to end.
 */
#ifndef TALLY_GRPC_SERVER_H
#define TALLY_GRPC_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "service/front.h"
#include "service/options.h"

typedef struct grpc_server grpc_server_t;

/* The wait for durability and the TLS credentials (service/front.h):
 * every connection speaks TLS with ALPN h2 when tls is set. */
typedef front_hooks_t grpc_server_hooks_t;

/* Listens on --bind:--grpc-port and starts the loops; NULL with err.
 * ShouldRateLimit decides on --rls-config's service (rls_host_get: start
 * rls_host first; without it the call answers UNAVAILABLE).  Until
 * grpc_server_set_ready(true), ShouldRateLimit answers UNAVAILABLE and the
 * health check NOT_SERVING. */
grpc_server_t *grpc_server_start(const tally_opts_t *o, cmd_server_t *srv, const grpc_server_hooks_t *hooks,
                                 char *err, size_t errlen);
int grpc_server_port(const grpc_server_t *s);
void grpc_server_set_ready(grpc_server_t *s, bool ready);
/* A replica replacing its keyspace: returns once no call that passed the
 * gate is still running (calls meanwhile answer UNAVAILABLE). */
void grpc_server_set_loading(grpc_server_t *s, bool loading);
/* Stops accepting; every connection gets a GOAWAY, its open streams finish. */
void grpc_server_quiesce(grpc_server_t *s);
/* Waits up to `seconds` for every connection to end; false if some remain. */
bool grpc_server_drain(grpc_server_t *s, int seconds);
/* Stops the loops, closes every connection, frees s. */
void grpc_server_stop(grpc_server_t *s);

#endif
