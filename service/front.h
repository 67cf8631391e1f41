/*
 * front.h - what the listeners of the non-HTTP front-ends (the Redis port,
 * service/resp_server.c; the gRPC port, service/grpc_server.c) share: the
 * hooks main.c gives them (the wait for a change to be durable, as the
 * HTTP listener's in service/server.h, and --tls-cert's credentials), the
 * listening socket, and the blocking wait for durability.
 */
#ifndef TALLY_FRONT_H
#define TALLY_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Try without blocking; else wait_async calls done from another thread.
 * NULL members: nothing to wait for.  tls: every connection speaks TLS
 * with these credentials (service/tls.h); NULL: plain TCP. */
typedef struct front_hooks {
    void *ud;
    bool (*journal_try)(void *ud, uint64_t lsn, uint64_t pos);
    bool (*journal_wait_async)(void *ud, uint64_t lsn, uint64_t pos,
                               void (*done)(void *dud, bool ok, const char *err), void *dud);
    struct tls *tls;
} front_hooks_t;

/* A nonblocking listening socket on addr:port (IPv4 or IPv6; port 0 picks
 * one, *bound says which); -1 with err naming `flag` (the option whose
 * port it is). */
int front_listen(const char *addr, int port, const char *flag, int *bound, char *err, size_t errlen);

/* Blocks until the journal position lsn (and replication position pos)
 * is as durable as the policy says: false with *err when it cannot be.
 * Nothing to wait for (lsn and pos 0, or no journal): true at once. */
bool front_durable(const front_hooks_t *h, uint64_t lsn, uint64_t pos, const char **err);

#endif
