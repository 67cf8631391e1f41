/*
 * server.h - the HTTP front: libmicrohttpd with epoll and a thread pool.
 *
 * Connections are bounded: --max-connections (with a headroom in which idle
 * keep-alive connections are closed to make room), --max-connections-per-ip,
 * and --header-timeout for a complete request head (see server_conn.c).
 *
 * Each request's body is accumulated up to the cap (413 beyond it), then
 * handed with its raw URI to api_dispatch().  Before the response is queued
 * the server waits, if the handler journaled a change, until the journal
 * holds it as the fsync policy promises.
 */
#ifndef TALLY_SERVER_H
#define TALLY_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "api/request.h"
#include "service/options.h"

typedef struct server server_t;

typedef struct server_hooks {
    void *ud;
    /* Blocks until the journal position is as durable as the policy says;
     * false when the journal cannot be written (the client gets 503). */
    bool (*journal_wait)(void *ud, uint64_t lsn, const char **err);
    /* Quick check, no waiting: true when already durable (or made so inline).
     * `pos` is the replication stream position the answer also waits for
     * with --min-replicas-ack (api_resp_t.repl_pos; 0: none known). */
    bool (*journal_try)(void *ud, uint64_t lsn, uint64_t pos);
    /* The same without blocking a worker: true when already durable, else
     * false and done(dud, ok, err) is called later from another thread. */
    bool (*journal_wait_async)(void *ud, uint64_t lsn, uint64_t pos,
                               void (*done)(void *dud, bool ok, const char *err), void *dud);
} server_hooks_t;

/* Starts listening.  Until server_set_ready(true) every route but the
 * operational ones (/healthz, /readyz, /info, /metrics) answers 503. */
server_t *server_start(const tally_opts_t *o, api_server_t *api, const server_hooks_t *hooks, char *err,
                       size_t errlen);
int server_port(const server_t *s);
/* Installs hooks; call before server_set_ready(true) (ready publishes them). */
void server_set_hooks(server_t *s, const server_hooks_t *hooks);
void server_set_ready(server_t *s, bool ready);
/* Ready, and not loading. */
bool server_ready(const server_t *s);
/* Loading (a replica replacing its keyspace with its primary's snapshot):
 * every route but the operational ones is refused without touching the
 * keyspace (503; a change the replica's 421), and /readyz is 503.
 * Setting it returns once no request that got past the check before is
 * still at work, so nothing reads a keyspace half replaced. */
void server_set_loading(server_t *s, bool loading);
unsigned server_inflight(const server_t *s);
/* Housekeeping, every ~100 ms: closes connections past --header-timeout
 * without a complete request head, and idle keep-alive connections while
 * more than --max-connections are open. */
void server_tick(server_t *s);
/* Appends the connection metrics (open, memory, closed/refused by reason). */
void server_metrics(server_t *s, wbuf_t *out);
/* tallyd's own memory per connection besides MHD's pool (tracking, request
 * state), for tally_connections_memory_bytes. */
#define SERVER_CONN_OVERHEAD 512
/* Stops accepting connections; in-flight requests continue. */
void server_quiesce(server_t *s);
/* Waits until no request is in flight, at most timeout_s; true if drained. */
bool server_drain(server_t *s, int timeout_s);
/* Closes every connection and stops the threads; frees s. */
void server_stop(server_t *s);

#endif
