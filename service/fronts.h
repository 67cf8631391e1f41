/*
 * fronts.h - the ports beside HTTP, started, gated and stopped together:
 * the Redis protocol (--resp-port, service/resp_server.h) and gRPC
 * (--grpc-port, service/grpc_server.h).  Each is off unless its flag is
 * given; both take the same wait for durability and TLS credentials.
 * Process-wide, as main.c's state: fronts_start once.
 */
#ifndef TALLY_FRONTS_H
#define TALLY_FRONTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "service/front.h"
#include "service/options.h"

/* The wait for durability and --tls-cert's credentials (service/front.h). */
typedef front_hooks_t fronts_hooks_t;

/* Starts the ports given; false with err (none left started).  `at` gets
 * what the start log line says of them ("; Redis protocol on ...; gRPC
 * on ..."). */
bool fronts_start(const tally_opts_t *o, cmd_server_t *srv, const fronts_hooks_t *h, char *at, size_t atlen,
                  char *err, size_t errlen);
void fronts_set_ready(bool ready);
/* A replica replacing its keyspace: returns once no command or call that
 * passed a port's gate is still running. */
void fronts_set_loading(bool loading);
/* Stops accepting (gRPC: a GOAWAY on each connection). */
void fronts_quiesce(void);
/* Waits up to `seconds` for the gRPC port's connections to finish their
 * open streams; false (logged) if some remain. */
bool fronts_drain(int seconds);
/* Stops both (each loop ends the command or call it runs); safe when none
 * were started, and twice. */
void fronts_stop(void);

#endif
