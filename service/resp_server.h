/*
 * resp_server.h - the Redis protocol's listener (--resp-port): sockets and
 * event loops; each connection's commands are the Redis front-end's
 * (redis/conn.h).
 *
 * Our own epoll loop, as Redis runs its own (ae), and no new dependency:
 * --threads loops, each with its own epoll set, all waiting on the one
 * listening socket with EPOLLEXCLUSIVE (the kernel wakes one of them per
 * connection), each serving the connections it accepted from start to
 * end.  A command runs on its loop's thread (the command layer takes the
 * keys' locks), so a pipeline's replies leave in order.
 *
 * TLS: with --tls-cert every connection speaks TLS (service/tls.h's
 * credentials, so reloads reach new handshakes); the handshake runs
 * nonblocking in the loop and must end within --header-timeout of its
 * start.  Input GnuTLS has already decrypted wakes no epoll: such
 * connections wait on the loop's pending list and are served before it
 * sleeps again.
 *
 * Limits, the HTTP listener's where it has one:
 *   connections     --max-connections for the port (over it: Redis's
 *                   "-ERR max number of clients reached", closed)
 *   idle            --timeout seconds without a byte either way: closed
 *   a command       arriving: --header-timeout seconds without a byte while a
 *                   command is incomplete: closed
 *   input           a command's argument: --max-body (the parser's max_bulk);
 *                   the unparsed input of a connection: 2 x --max-body + 64 KiB
 *                   (one command at most): more is a protocol error
 *   output          a connection's unsent replies: --max-answer-size + 1 MiB
 *                   (64 MiB + 1 MiB by default; 65 MiB when --max-answer-size is
 *                   0): a client that does not read them is dropped, as
 *                   Redis's client-output-buffer-limit drops one
 */
#ifndef TALLY_RESP_SERVER_H
#define TALLY_RESP_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "service/front.h"
#include "service/options.h"

typedef struct resp_server resp_server_t;

/* The wait for durability and the TLS credentials (service/front.h). */
typedef front_hooks_t resp_server_hooks_t;

/* Listens on --bind:--resp-port and starts the loops; NULL with err.
 * Until resp_server_set_ready(true), data commands answer -LOADING. */
resp_server_t *resp_server_start(const tally_opts_t *o, cmd_server_t *srv, const resp_server_hooks_t *hooks,
                                 char *err, size_t errlen);
int resp_server_port(const resp_server_t *s);
void resp_server_set_ready(resp_server_t *s, bool ready);
/* A replica replacing its keyspace (service/server.h's server_set_loading):
 * returns once no command that passed the gate is still running. */
void resp_server_set_loading(resp_server_t *s, bool loading);
/* Stops accepting connections. */
void resp_server_quiesce(resp_server_t *s);
/* Stops the loops (each finishes the command it runs and sends what its
 * connections have pending, without waiting), closes every connection,
 * frees s. */
void resp_server_stop(resp_server_t *s);

#endif
