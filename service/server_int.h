/*
 * server_int.h - what the two files of the HTTP server share, and nobody
 * else: server_t itself and a connection's tracking.  service/server.h is
 * the server's face.
 *
 *     server.c        requests: MHD's callbacks, the request's state, its
 *                     dispatch to api/, suspended requests, the answers;
 *                     starting and stopping
 *     server_conn.c   connections: their tracking, the limits per address
 *                     and in all, the deadlines of a request's head and
 *                     body, and the answers written on the socket itself
 *
 * server.c calls server_conn.c, never the reverse.  What a request does to
 * its connection's state on the request path (conn_set, conn_claim) is
 * inline here: no call more per request than before the split.
 */
#ifndef TALLY_SERVER_INT_H
#define TALLY_SERVER_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/respond.h"
#include "core/cidr.h"
#include "service/clock.h"
#include "service/server.h"

enum conn_state { CONN_IDLE = 0, CONN_HEAD, CONN_BUSY, CONN_BODY, CONN_DONE };
#define CONN_LINGER_NS 1000000000LL

typedef struct conn {
    struct conn *prev, *next;      /* in server.conns, under conn_mu */
    struct ipcount *ip;            /* its address's count */
    int fd;
    bool shut;                     /* shutdown(2) already issued */
    _Atomic int state;             /* enum conn_state */
    _Atomic int64_t since_ns;      /* when the state was entered (monotonic) */
    _Atomic bool served;           /* a request was answered on it */
} conn_t;

/* Connections per client address (a small chained hash, under conn_mu). */
typedef struct ipcount {
    struct ipcount *next;
    uint8_t addr[16];
    int count;
} ipcount_t;
#define IP_BUCKETS 1024

/* Requests in their dispatch on the threads that run them, for
 * server_set_loading: each request thread counts on a line of its own (no
 * line shared between threads on the request path); more threads than
 * slots share slots, which only makes the loader wait for more of them. */
#define BUSY_SLOTS 64
typedef struct busy_slot {
    _Atomic unsigned n;
} __attribute__((aligned(64))) busy_slot_t;

struct server {
    struct MHD_Daemon *d;
    api_server_t *api;
    server_hooks_t hooks;
    size_t body_limit;
    size_t max_url;
    int port;
    _Atomic bool ready;
    _Atomic bool closing;          /* shutting down: answer with Connection: close */
    _Atomic bool loading;          /* the keyspace is being replaced: requests are refused (api_req_t.loading) */
    _Atomic unsigned inflight;
    busy_slot_t busy[BUSY_SLOTS];  /* requests between the gate and the end of their dispatch */
    _Atomic unsigned nbusy;        /* slots handed out */
    /* connections (server_conn.c) */
    pthread_mutex_t conn_mu;
    conn_t *conns;                 /* newest first */
    ipcount_t *ips[IP_BUCKETS];
    _Atomic unsigned nconns;
    unsigned max_conns, max_per_ip;
    int64_t header_timeout_ns;
    size_t conn_mem;               /* MHD's pool per connection */
    bool tls;                      /* HTTPS (service/tls.h): nothing is written on the socket itself */
    MHD_socket quiesced;           /* the listening socket MHD_quiesce_daemon gave back, or MHD_INVALID_SOCKET */
    cidr_set_t trusted;            /* --trusted-proxies: whose forwarding headers {ip} believes */
    _Atomic uint64_t refused_per_ip, closed_head_timeout, closed_over_cap, closed_body_timeout;
};

/* server_conn.c.  MHD's accept policy and connection notifications
 * (MHD_OPTION_NOTIFY_CONNECTION), cls the server; the error envelope of
 * `code` answered on the socket itself, then its sending side ended (only
 * by the thread that won conn_claim into CONN_DONE: see server_conn.c);
 * the table of addresses freed (server_stop). */
enum MHD_Result server_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void server_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);
void server_conn_answer(const server_t *s, int fd, api_code_t code, const char *msg);
void server_conns_free(server_t *s);

static inline conn_t *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Nothing times a connection while its request is being handled
 * (server_tick looks at HEAD, IDLE, BODY and DONE), so entering CONN_BUSY
 * leaves since_ns alone: a clock read fewer per request. */
static inline void conn_set(conn_t *k, enum conn_state state, int64_t now_ns)
{
    if (!k)
        return;
    if (state != CONN_BUSY)
        atomic_store_explicit(&k->since_ns, now_ns, memory_order_relaxed);
    atomic_store_explicit(&k->state, state, memory_order_relaxed);
    if (state == CONN_IDLE)
        atomic_store_explicit(&k->served, true, memory_order_relaxed);
}

/* Moves the connection from state `from` to `to` if it is in `from`. */
static inline bool conn_claim(conn_t *k, enum conn_state from, enum conn_state to)
{
    int expected = from;
    if (!atomic_compare_exchange_strong(&k->state, &expected, to))
        return false;
    if (to != CONN_BUSY)   /* deadlines in seconds: the coarse clock will do */
        atomic_store_explicit(&k->since_ns, clock_mono_coarse_ns(), memory_order_relaxed);
    return true;
}

static inline bool over_cap(const server_t *s)
{
    return atomic_load_explicit(&s->nconns, memory_order_relaxed) > s->max_conns;
}

#endif
