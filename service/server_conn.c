/* server_conn.c - the HTTP server's connections (service/server.h): their
 * tracking, the limits per address and in all, the deadlines of a request's
 * head and body, and the answers tallyd writes on the socket itself. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "api/respond.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/server_int.h"

/*
 * Connections.  libmicrohttpd closes a connection only when it is idle for
 * --timeout, which every byte resets, so a client sending its request head
 * one byte a second, or thousands of idle keep-alive connections, could hold
 * every slot.  So tallyd tracks each connection (MHD's connection
 * notifications) and the housekeeping tick (server_tick, every 100 ms):
 *
 *   - closes a connection that has not delivered a complete request head
 *     --header-timeout seconds after it started waiting for one (a fresh
 *     connection, or a request line without its headers);
 *   - above --max-connections (MHD itself accepts up to a headroom more, so
 *     /healthz, /readyz and new clients still get in), closes idle
 *     keep-alive connections, oldest first, and answers with
 *     "Connection: close" until the count is back under the cap;
 *   - refuses, at accept, more than --max-connections-per-ip from one
 *     client address;
 *   - answers 408 and closes a request whose body brought no byte for
 *     --header-timeout seconds (see below).
 *
 * Closing is shutdown(2) on the socket: MHD sees the end of the stream and
 * releases the connection itself.  The connection list is under conn_mu; a
 * connection's state and timestamps are atomics its MHD thread updates.
 *
 * Request bodies.  libmicrohttpd 0.9.75 lets an application queue an answer
 * only before the body (after the head) or after all of it, and it keeps a
 * chunk's declared size to itself: the access handler sees only the chunk's
 * bytes as they arrive (a size over 64 bits MHD refuses itself, 413 in
 * HTML).  So a chunked body that grows past --max-body, or a body that
 * stalls (say a chunk of FFFFFFFFFFFFFFFF bytes that never come), cannot be
 * answered through MHD.  tallyd answers those itself, on the socket, while
 * MHD is only reading it: the handler the moment the body passes --max-body
 * (413), the tick when a body brought no byte for --header-timeout (408),
 * then the connection is closed.  Who answers is decided by one
 * compare-and-swap of the connection's state from CONN_BODY to CONN_DONE,
 * so an answer is written once, by one thread, and never alongside MHD's.
 * After a 413 the rest of the body is read and dropped for CONN_LINGER_NS
 * (so the client reads the answer rather than a reset), then closed.
 */

/* The address bytes of a peer (IPv4 mapped into 16 bytes); false if none. */
static bool addr_key(const struct sockaddr *sa, uint8_t key[16])
{
    memset(key, 0, 16);
    if (!sa)
        return false;
    if (sa->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        return true;
    }
    return false;
}

/* The hash chain of an address (FNV-1a of its 16 bytes). */
static ipcount_t **ip_bucket(server_t *s, const uint8_t key[16])
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    return &s->ips[h % IP_BUCKETS];
}

/* The count of an address (created when `create`); conn_mu held. */
static ipcount_t *ip_find(server_t *s, const uint8_t key[16], bool create)
{
    ipcount_t **b = ip_bucket(s, key);
    for (ipcount_t *e = *b; e; e = e->next)
        if (memcmp(e->addr, key, 16) == 0)
            return e;
    if (!create)
        return NULL;
    ipcount_t *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    memcpy(e->addr, key, 16);
    e->next = *b;
    *b = e;
    return e;
}

/* One connection of the address fewer: its count goes at zero.  conn_mu held. */
static void ip_release(server_t *s, ipcount_t *e)
{
    if (--e->count > 0)
        return;
    for (ipcount_t **b = ip_bucket(s, e->addr); *b; b = &(*b)->next)
        if (*b == e) {
            *b = e->next;
            free(e);
            return;
        }
}

/* Accept policy: at most max_per_ip connections from one address. */
enum MHD_Result server_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    server_t *s = cls;
    uint8_t key[16];
    if (!s->max_per_ip || !addr_key(addr, key))
        return MHD_YES;
    pthread_mutex_lock(&s->conn_mu);
    ipcount_t *e = ip_find(s, key, false);
    bool ok = !e || (unsigned)e->count < s->max_per_ip;
    pthread_mutex_unlock(&s->conn_mu);
    if (!ok && atomic_fetch_add(&s->refused_per_ip, 1) % 1000 == 0)
        log_warn("connections: refusing a client address over --max-connections-per-ip %u", s->max_per_ip);
    return ok ? MHD_YES : MHD_NO;
}

void server_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    server_t *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_t *k = calloc(1, sizeof(*k));
        *socket_context = k;
        if (!k)
            return;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        atomic_store(&k->since_ns, clock_mono_ns());
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        uint8_t key[16];
        bool have = ci && addr_key(ci->client_addr, key);
        pthread_mutex_lock(&s->conn_mu);
        k->ip = have ? ip_find(s, key, true) : NULL;
        if (k->ip)
            k->ip->count++;
        k->next = s->conns;
        if (s->conns)
            s->conns->prev = k;
        s->conns = k;
        atomic_fetch_add(&s->nconns, 1);
        pthread_mutex_unlock(&s->conn_mu);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_t *k = *socket_context;
        if (!k)
            return;
        pthread_mutex_lock(&s->conn_mu);
        if (k->prev)
            k->prev->next = k->next;
        else
            s->conns = k->next;
        if (k->next)
            k->next->prev = k->prev;
        if (k->ip)
            ip_release(s, k->ip);
        atomic_fetch_sub(&s->nconns, 1);
        pthread_mutex_unlock(&s->conn_mu);
        free(k);
        *socket_context = NULL;
    }
}

/* Answers on the socket itself with the error envelope and
 * "Connection: close", then ends the sending side (see "Request bodies"
 * above: only after winning conn_claim into CONN_DONE).  Over TLS the bytes
 * on the socket belong to GnuTLS: the connection is only closed (the
 * client sees it end without an answer). */
void server_conn_answer(const server_t *s, int fd, api_code_t code, const char *msg)
{
    api_resp_t r;
    api_resp_init(&r);
    api_error(&r, code, "%s", msg);
    if (s->tls) {
        shutdown(fd, SHUT_RDWR);
        metrics_record(r.route_index, r.status, 0);
        api_resp_release(&r);
        return;
    }
    const char *reason = MHD_get_reason_phrase_for((unsigned)r.status);
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     r.status, reason ? reason : "", r.len);
    struct iovec iov[2] = { { head, (size_t)n }, { r.body, r.body ? r.len : 0 } };
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
    if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        log_debug("http: answering %d on the socket: %s", r.status, strerror(errno));
    shutdown(fd, SHUT_WR);
    metrics_record(r.route_index, r.status, 0);
    api_resp_release(&r);
}

void server_conns_free(server_t *s)
{
    for (size_t i = 0; i < IP_BUCKETS; i++)
        while (s->ips[i]) {
            ipcount_t *e = s->ips[i];
            s->ips[i] = e->next;
            free(e);
        }
}

void server_tick(server_t *s)
{
    int64_t now = clock_mono_ns();
    pthread_mutex_lock(&s->conn_mu);
    unsigned open = atomic_load(&s->nconns), shut = 0;
    conn_t *oldest = s->conns;
    for (conn_t *k = s->conns; k; k = k->next) {
        oldest = k;
        if (k->shut) {
            shut++;
            continue;
        }
        int st = atomic_load_explicit(&k->state, memory_order_relaxed);
        int64_t age = now - atomic_load_explicit(&k->since_ns, memory_order_relaxed);
        bool waiting_head = st == CONN_HEAD || (st == CONN_IDLE && !atomic_load(&k->served));
        if (waiting_head && age > s->header_timeout_ns && k->fd >= 0) {
            shutdown(k->fd, SHUT_RDWR);
            k->shut = true;
            shut++;
            atomic_fetch_add(&s->closed_head_timeout, 1);
        } else if (st == CONN_BODY && age > s->header_timeout_ns && k->fd >= 0 &&
                   conn_claim(k, CONN_BODY, CONN_DONE)) {
            char msg[160];
            snprintf(msg, sizeof(msg), "the request body brought no byte for %lld s (--header-timeout); closing",
                     (long long)(s->header_timeout_ns / 1000000000LL));
            server_conn_answer(s, k->fd, API_E_REQUEST_TIMEOUT, msg);
            shutdown(k->fd, SHUT_RDWR);
            k->shut = true;
            shut++;
            atomic_fetch_add(&s->closed_body_timeout, 1);
        } else if (st == CONN_DONE && age > CONN_LINGER_NS && k->fd >= 0) {
            shutdown(k->fd, SHUT_RDWR);   /* a 413 was answered; the rest of the body is not wanted */
            k->shut = true;
            shut++;
        }
    }
    /* over the cap: idle keep-alive connections go, oldest first */
    for (conn_t *k = oldest; k && open - shut > s->max_conns; k = k->prev) {
        if (k->shut || k->fd < 0 || atomic_load_explicit(&k->state, memory_order_relaxed) != CONN_IDLE)
            continue;
        shutdown(k->fd, SHUT_RDWR);
        k->shut = true;
        shut++;
        atomic_fetch_add(&s->closed_over_cap, 1);
    }
    pthread_mutex_unlock(&s->conn_mu);
}

void server_metrics(server_t *s, wbuf_t *out)
{
    char buf[1600];
    unsigned n = atomic_load(&s->nconns);
    int len = snprintf(buf, sizeof(buf),
                       "# HELP tally_connections_open Client connections open now.\n"
                       "# TYPE tally_connections_open gauge\n"
                       "tally_connections_open %u\n"
                       "# HELP tally_connections_memory_bytes Memory held by open connections (libmicrohttpd's "
                       "per-connection pool plus tallyd's tracking; kernel socket buffers not included).\n"
                       "# TYPE tally_connections_memory_bytes gauge\n"
                       "tally_connections_memory_bytes %llu\n"
                       "# HELP tally_connections_closed_total Connections closed by tallyd, by reason.\n"
                       "# TYPE tally_connections_closed_total counter\n"
                       "tally_connections_closed_total{reason=\"header_timeout\"} %llu\n"
                       "tally_connections_closed_total{reason=\"over_cap\"} %llu\n"
                       "tally_connections_closed_total{reason=\"body_timeout\"} %llu\n"
                       "# HELP tally_connections_refused_total Connections refused at accept, by reason.\n"
                       "# TYPE tally_connections_refused_total counter\n"
                       "tally_connections_refused_total{reason=\"per_ip\"} %llu\n",
                       n, (unsigned long long)n * (s->conn_mem + SERVER_CONN_OVERHEAD),
                       (unsigned long long)atomic_load(&s->closed_head_timeout),
                       (unsigned long long)atomic_load(&s->closed_over_cap),
                       (unsigned long long)atomic_load(&s->closed_body_timeout),
                       (unsigned long long)atomic_load(&s->refused_per_ip));
    wbuf_put_bytes(out, buf, (size_t)len);
}
