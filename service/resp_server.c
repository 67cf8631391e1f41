/* resp_server.c - see resp_server.h: the listening socket, the loops, each
 * connection's buffers and deadlines.  What a connection's bytes mean is
 * redis/conn.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/version.h"
#include "service/access_log.h"
#include "redis/conn.h"
#include "service/clock.h"
#include "service/front.h"
#include "service/log.h"
#include "service/resp_server.h"
#include "service/tls.h"

#define IN_START (16 * 1024)          /* a connection's first input buffer */
#define IN_KEEP (64 * 1024)           /* an idle connection's input buffer is given back above this */
#define READS_PER_WAKE 16             /* reads of one connection before the loop serves the others */
#define ACCEPTS_PER_WAKE 64
#define SWEEP_NS 1000000000LL         /* deadlines are checked every second */
#define PARK_POLL_MS 2                /* a parked WAIT is looked at again this often */
#define MAX_CLIENTS_ERR "-ERR max number of clients reached\r\n"

typedef struct loop loop_t;

typedef struct rconn {
    int fd;
    struct rconn *prev, *next;
    loop_t *loop;
    int64_t last_ns;                  /* the last byte read or written (monotonic) */
    char *in;                         /* received, not yet consumed: in[0..in_len) */
    size_t in_len, in_cap;
    redis_conn_t *rc;
    uint32_t events;                  /* what epoll watches for it (arm) */
    bool closing;                     /* QUIT or a protocol error: send what is left, then close */
    /* TLS (--tls-cert): the session; its handshake runs until hs_start_ns
     * + --header-timeout at most */
    gnutls_session_t tls;
    bool handshaking;
    bool pending;                     /* on the loop's pending list: GnuTLS holds decrypted input */
    size_t tls_wpend;                 /* bytes of a gnutls_record_send that returned AGAIN (sent again with NULL) */
    int64_t hs_start_ns;
    struct rconn *pnext;
    bool settling;                    /* on the loop's settle list: replies wait for the round's durability */
    struct rconn *snext;
    /* on the loop's parked list: a WAIT blocks it (redis_conn_parked);
     * nothing is read from it meanwhile, and only the peer's hangup is
     * watched for besides sending (arm) */
    bool parked;
    struct rconn *knext;
} rconn_t;

struct loop {
    resp_server_t *s;
    int ep, efd;                      /* its epoll set; an eventfd that stops it */
    pthread_t th;
    bool started;
    rconn_t *conns;                   /* its connections */
    rconn_t *pending;                 /* TLS connections with input GnuTLS already decrypted (not seen by epoll) */
    /* group commit: the connections whose replies wait for changes to be
     * durable, and the highest positions they wait for (settle_round) */
    rconn_t *settle;
    uint64_t wait_lsn, wait_pos;
    rconn_t *parked;                  /* connections a WAIT blocks (parked_round) */
    int64_t park_check_ns;            /* when they are looked at next (monotonic) */
};

struct resp_server {
    int lfd, port;
    int nloops;
    loop_t *loops;
    redis_cfg_t cfg;
    resp_server_hooks_t hooks;
    _Atomic bool ready, loading, quiesced, stopping;
    _Atomic unsigned busy;            /* commands past the gate (resp_server_set_loading) */
    _Atomic unsigned nconns;
    _Atomic uint64_t next_id;
    unsigned max_conns;
    int64_t idle_ns, head_ns;
    size_t in_limit;
    int64_t started_ns;               /* monotonic, for INFO's uptime */
    tls_t *tls;                       /* --tls-cert: every connection speaks TLS; NULL: none does */
};

/* ------------------------------------------------------------------------ */
/* The front-end's hooks                                                    */
/* ------------------------------------------------------------------------ */

static bool gate_enter(void *ud, bool *loading)
{
    resp_server_t *s = ud;
    atomic_fetch_add(&s->busy, 1);
    if (!atomic_load(&s->ready) || atomic_load(&s->loading)) {
        atomic_fetch_sub(&s->busy, 1);
        if (!atomic_load(&s->ready))
            return false;
        *loading = true;   /* refused by admission, without the keyspace */
    }
    return true;
}

static void gate_leave(void *ud)
{
    resp_server_t *s = ud;
    atomic_fetch_sub_explicit(&s->busy, 1, memory_order_release);
}

/* The loop waits for the journal (and, with --min-replicas-ack, the
 * replicas) before it answers a change: the next command of the pipeline
 * runs only then, so a reply never promises what a crash could lose. */
static bool durable(void *ud, uint64_t lsn, uint64_t pos, const char **err)
{
    resp_server_t *s = ud;
    return front_durable(&s->hooks, lsn, pos, err);
}

static bool log_on(void *ud)
{
    (void)ud;
    return access_log_enabled();
}

static void log_line(void *ud, const redis_log_line_t *e)
{
    (void)ud;
    access_log_write_command(clock_now_ns(), e->client, e->token, e->command, e->command_len, e->key, e->key_len,
                             e->outcome, e->outcome_len, e->duration_ns);
}

static void process_info(void *ud, redis_process_t *out)
{
    resp_server_t *s = ud;
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(out->os, sizeof(out->os), "%s %s %s", u.sysname, u.release, u.machine);
    out->pid = (long)getpid();
    out->uptime_s = (clock_mono_ns() - s->started_ns) / 1000000000LL;
    out->time_us = clock_now_ns() / 1000;
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lld %lld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    out->rss_bytes = rss * sysconf(_SC_PAGESIZE);
    struct rusage ru, ch;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        out->cpu_sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
        out->cpu_user = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    }
    if (getrusage(RUSAGE_CHILDREN, &ch) == 0) {
        out->cpu_sys_children = (double)ch.ru_stime.tv_sec + ch.ru_stime.tv_usec / 1e6;
        out->cpu_user_children = (double)ch.ru_utime.tv_sec + ch.ru_utime.tv_usec / 1e6;
    }
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

static void conn_close(rconn_t *c)
{
    loop_t *l = c->loop;
    epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->pending)
        for (rconn_t **pp = &l->pending; *pp; pp = &(*pp)->pnext)
            if (*pp == c) {
                *pp = c->pnext;
                break;
            }
    if (c->settling)
        for (rconn_t **pp = &l->settle; *pp; pp = &(*pp)->snext)
            if (*pp == c) {
                *pp = c->snext;
                break;
            }
    if (c->parked)
        for (rconn_t **pp = &l->parked; *pp; pp = &(*pp)->knext)
            if (*pp == c) {
                *pp = c->knext;
                break;
            }
    if (c->tls) {
        if (!c->handshaking)
            gnutls_bye(c->tls, GNUTLS_SHUT_WR);   /* one try: the socket is nonblocking */
        gnutls_deinit(c->tls);
    }
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    redis_conn_free(c->rc);
    free(c->in);
    free(c);
    atomic_fetch_sub(&l->s->nconns, 1);
}

/* What epoll watches: input (none once closing; while parked only the
 * peer's hangup, so that input waiting in the socket does not wake the
 * loop, yet a client gone is freed), and room to send when out is set. */
static void arm(rconn_t *c, bool out)
{
    uint32_t want = (c->closing ? 0 : c->parked ? EPOLLRDHUP : EPOLLIN) | (out ? EPOLLOUT : 0);
    if (c->events == want)
        return;
    struct epoll_event ev = { .events = want, .data.ptr = c };
    epoll_ctl(c->loop->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = want;
}

/* send(2), or GnuTLS's record send, with errno set as send's on the
 * outcomes the caller tells apart (EAGAIN, EINTR; EPIPE for the rest).
 * A TLS send that returned AGAIN is repeated with NULL (GnuTLS resends
 * the record it built) before anything new goes out. */
static ssize_t io_send(rconn_t *c, const char *buf, size_t len)
{
    if (!c->tls)
        return send(c->fd, buf, len, MSG_NOSIGNAL);
    size_t n = c->tls_wpend ? c->tls_wpend : len;
    ssize_t w = c->tls_wpend ? gnutls_record_send(c->tls, NULL, 0) : gnutls_record_send(c->tls, buf, n);
    if (w >= 0) {
        c->tls_wpend = 0;
        return w;
    }
    if (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED) {
        c->tls_wpend = n;
        errno = w == GNUTLS_E_AGAIN ? EAGAIN : EINTR;
    } else {
        errno = EPIPE;
    }
    return -1;
}

/* recv(2), or GnuTLS's record receive, the same way: 0 the end, -1 with
 * errno (EAGAIN, EINTR, ECONNRESET for the rest: a fatal TLS error, an
 * attempt to renegotiate, which tallyd refuses). */
static ssize_t io_recv(rconn_t *c, char *buf, size_t len)
{
    if (!c->tls)
        return recv(c->fd, buf, len, 0);
    ssize_t n = gnutls_record_recv(c->tls, buf, len);
    if (n >= 0)
        return n;
    if (n == GNUTLS_E_AGAIN)
        errno = EAGAIN;
    else if (n == GNUTLS_E_INTERRUPTED || (n != GNUTLS_E_REHANDSHAKE && !gnutls_error_is_fatal((int)n)))
        errno = EINTR;   /* a warning alert: read on */
    else
        errno = ECONNRESET;
    return -1;
}

/* Sends what the connection has pending; false when it was closed. */
static bool conn_flush(rconn_t *c)
{
    resp_out_t *o = redis_conn_out(c->rc);
    while (o->len) {
        ssize_t w = io_send(c, o->buf, o->len);
        if (w > 0) {
            resp_out_consume(o, (size_t)w);
            c->last_ns = clock_mono_coarse_ns();
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            arm(c, true);
            return true;
        }
        conn_close(c);
        return false;
    }
    if (c->closing) {
        conn_close(c);
        return false;
    }
    arm(c, false);
    return true;
}

/* Room for at least one more read; false at the input limit. */
static bool in_room(rconn_t *c, resp_server_t *s)
{
    if (c->in_cap - c->in_len >= 4096 || (c->in_cap == s->in_limit && c->in_len < c->in_cap))
        return true;
    if (c->in_cap >= s->in_limit)
        return false;
    size_t cap = c->in_cap ? c->in_cap * 2 : IN_START;
    if (cap > s->in_limit)
        cap = s->in_limit;
    char *p = realloc(c->in, cap);
    if (!p)
        return false;
    c->in = p;
    c->in_cap = cap;
    return true;
}

/* What a connection answered goes out; after QUIT or a protocol error
 * nothing more is read. */
static void conn_send(rconn_t *c)
{
    if (c->closing)
        arm(c, true);
    conn_flush(c);
}

/* Runs the complete commands in the input; false when the connection was
 * closed. */
static bool conn_feed(rconn_t *c)
{
    size_t used = 0;
    redis_status_t st = redis_conn_feed(c->rc, c->in, c->in_len, &used);
    if (used) {
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
    }
    if (st == REDIS_DROP) {
        conn_close(c);
        return false;
    }
    if (st == REDIS_CLOSE)
        c->closing = true;
    return true;
}

/* After a feed: a WAIT that blocks parks the connection; input GnuTLS
 * already decrypted brings the loop back; the replies go out, once the
 * round's changes are durable when they wait for that. */
static void conn_fed(rconn_t *c)
{
    loop_t *l = c->loop;
    if (!c->parked && redis_conn_parked(c->rc)) {
        c->parked = true;
        c->knext = l->parked;
        l->parked = c;
    }
    /* input GnuTLS already took off the socket wakes no epoll: the loop
     * comes back for it */
    if (c->tls && !c->pending && !c->closing && !c->parked && gnutls_record_check_pending(c->tls)) {
        c->pending = true;
        c->pnext = l->pending;
        l->pending = c;
    }
    uint64_t lsn, pos;
    if (redis_conn_waiting(c->rc, &lsn, &pos)) {   /* sent once the round's changes are durable */
        if (!c->settling) {
            c->settling = true;
            c->snext = l->settle;
            l->settle = c;
        }
        if (lsn > l->wait_lsn)
            l->wait_lsn = lsn;
        if (pos > l->wait_pos)
            l->wait_pos = pos;
        return;
    }
    conn_send(c);
}

static void conn_readable(rconn_t *c)
{
    resp_server_t *s = c->loop->s;
    for (int round = 0; round < READS_PER_WAKE && !c->closing && !c->parked; round++) {
        if (!in_room(c, s)) {
            log_debug("resp: closing a client whose command passed the input limit of %zu bytes", s->in_limit);
            conn_close(c);
            return;
        }
        size_t room = c->in_cap - c->in_len;
        ssize_t n = io_recv(c, c->in + c->in_len, room);
        if (n == 0) {
            conn_close(c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_close(c);
            return;
        }
        c->in_len += (size_t)n;
        c->last_ns = clock_mono_coarse_ns();
        if (!conn_feed(c))
            return;
        if (redis_conn_parked(c->rc))
            break;   /* the rest waits for WAIT's answer (parked_round) */
        if ((size_t)n < room && !(c->tls && gnutls_record_check_pending(c->tls)))
            break;   /* the socket is drained */
    }
    if (c->in_len == 0 && c->in_cap > IN_KEEP) {   /* a large command is done: give its buffer back */
        free(c->in);
        c->in = NULL;
        c->in_cap = 0;
    }
    conn_fed(c);
}

/* The connections a WAIT parked, looked at every PARK_POLL_MS (or all
 * answered at once: `now`, the loop stops): one answered is fed the input
 * that followed WAIT, and reads again. */
static void parked_round(loop_t *l, bool now)
{
    if (!l->parked)
        return;
    int64_t t = clock_mono_ns();
    if (!now && t < l->park_check_ns)
        return;
    l->park_check_ns = t + PARK_POLL_MS * 1000000LL;
    rconn_t *c = l->parked;
    l->parked = NULL;
    while (c) {
        rconn_t *next = c->knext;
        c->knext = NULL;
        if (!redis_conn_resume(c->rc, now)) {
            c->knext = l->parked;
            l->parked = c;
        } else {
            c->parked = false;
            c->last_ns = clock_mono_coarse_ns();
            if (!now && conn_feed(c))
                conn_fed(c);   /* arms its input again (conn_send), unless parked anew */
        }
        c = next;
    }
}

/* Group commit across the loop's round: one wait for the highest journal
 * (and replication) position the connections fed in this round hold, then
 * each connection's settle finds its own position durable at once (or
 * cuts its replies when the wait failed), and its replies go out. */
static void settle_round(loop_t *l)
{
    if (!l->settle)
        return;
    const redis_hooks_t *hk = &l->s->cfg.hooks;
    const char *why = NULL;
    if (hk->durable)
        (void)hk->durable(hk->ud, l->wait_lsn, l->wait_pos, &why);
    l->wait_lsn = l->wait_pos = 0;
    rconn_t *c = l->settle;
    l->settle = NULL;
    while (c) {
        rconn_t *next = c->snext;
        c->settling = false;
        c->snext = NULL;
        redis_status_t st = redis_conn_settle(c->rc, c->closing ? REDIS_CLOSE : REDIS_OK);
        if (st == REDIS_DROP) {
            conn_close(c);
        } else {
            c->closing = st == REDIS_CLOSE;
            conn_send(c);
        }
        c = next;
    }
}

/* Steps the TLS handshake (nonblocking); once done, reads what followed. */
static void conn_handshake(rconn_t *c)
{
    int r;
    do
        r = gnutls_handshake(c->tls);
    while (r == GNUTLS_E_INTERRUPTED);
    if (r == GNUTLS_E_AGAIN) {
        arm(c, gnutls_record_get_direction(c->tls) == 1);
        return;
    }
    if (r < 0) {
        log_debug("resp: TLS handshake failed: %s", gnutls_strerror(r));
        conn_close(c);
        return;
    }
    c->handshaking = false;
    c->last_ns = clock_mono_coarse_ns();
    conn_readable(c);
}

/* An address as text: the IP alone (ip, INET6_ADDRSTRLEN bytes) and
 * "ip:port" (full). */
static void addr_text(const struct sockaddr_storage *ss, char *ip, char *full, size_t n)
{
    int port = 0;
    ip[0] = '\0';
    if (ss->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip, INET6_ADDRSTRLEN);
        port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip, INET6_ADDRSTRLEN);
        port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    }
    snprintf(full, n, "%s:%d", ip, port);
}

static void accept_some(loop_t *l)
{
    resp_server_t *s = l->s;
    for (int i = 0; i < ACCEPTS_PER_WAKE && !atomic_load(&s->quiesced); i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(s->lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;   /* EAGAIN: another loop took it, or none left */
        if (atomic_fetch_add(&s->nconns, 1) >= s->max_conns) {
            atomic_fetch_sub(&s->nconns, 1);
            ssize_t w = send(fd, MAX_CLIENTS_ERR, sizeof(MAX_CLIENTS_ERR) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        char addr[INET6_ADDRSTRLEN] = "", peer_s[INET6_ADDRSTRLEN + 16], local_s[INET6_ADDRSTRLEN + 16];
        addr_text(&peer, addr, peer_s, sizeof(peer_s));
        struct sockaddr_storage me;
        socklen_t mlen = sizeof(me);
        char maddr[INET6_ADDRSTRLEN] = "";
        if (getsockname(fd, (struct sockaddr *)&me, &mlen) == 0)
            addr_text(&me, maddr, local_s, sizeof(local_s));
        else
            local_s[0] = '\0';
        rconn_t *c = calloc(1, sizeof(*c));
        redis_conn_t *rc = c ? redis_conn_new(&s->cfg, atomic_fetch_add(&s->next_id, 1), addr) : NULL;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        if (!rc || epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            redis_conn_free(rc);
            free(c);
            close(fd);
            atomic_fetch_sub(&s->nconns, 1);
            continue;
        }
        int tr = s->tls ? tls_session_new(s->tls, fd, &c->tls) : 0;
        if (tr < 0) {
            log_warn("resp: cannot start a TLS session: %s", gnutls_strerror(tr));
            epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
            redis_conn_free(rc);
            free(c);
            close(fd);
            atomic_fetch_sub(&s->nconns, 1);
            continue;
        }
        c->fd = fd;
        c->events = EPOLLIN;
        c->loop = l;
        c->rc = rc;
        redis_conn_set_socket(rc, fd, peer_s, local_s);
        c->last_ns = c->hs_start_ns = clock_mono_coarse_ns();
        c->handshaking = c->tls != NULL;
        c->next = l->conns;
        if (l->conns)
            l->conns->prev = c;
        l->conns = c;
    }
}

/* Closes the connections past their deadline: idle (--timeout), or in
 * the middle of a command that stopped arriving (--header-timeout). */
static void sweep(loop_t *l, int64_t now)
{
    resp_server_t *s = l->s;
    for (rconn_t *c = l->conns, *next; c; c = next) {
        next = c->next;
        if (c->parked)
            continue;   /* WAIT's timeout is its deadline (Redis times no blocked client out) */
        if (c->handshaking) {   /* the head deadline covers the handshake, from its start */
            if (now - c->hs_start_ns > s->head_ns)
                conn_close(c);
            continue;
        }
        int64_t limit = c->in_len ? s->head_ns : s->idle_ns;
        if (now - c->last_ns > limit)
            conn_close(c);
    }
}

static void *loop_main(void *arg)
{
    loop_t *l = arg;
    resp_server_t *s = l->s;
    struct epoll_event evs[128];
    int64_t next_sweep = clock_mono_coarse_ns() + SWEEP_NS;
    while (!atomic_load(&s->stopping)) {
        int n = epoll_wait(l->ep, evs, (int)(sizeof(evs) / sizeof(evs[0])),
                           l->pending ? 0 : l->parked ? PARK_POLL_MS : 250);
        for (int i = 0; i < n && !atomic_load(&s->stopping); i++) {
            void *p = evs[i].data.ptr;
            if (p == (void *)l)
                continue;   /* the stop eventfd */
            if (p == (void *)s) {
                accept_some(l);
                continue;
            }
            rconn_t *c = p;
            if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN)) {
                conn_close(c);
                continue;
            }
            if (c->handshaking)
                conn_handshake(c);
            else if (evs[i].events & EPOLLIN)
                conn_readable(c);   /* flushes, and may close */
            else if (c->parked && (evs[i].events & EPOLLRDHUP))
                conn_close(c);   /* gone while WAIT blocks it (Redis frees a blocked client too) */
            else if ((evs[i].events & EPOLLOUT) && !c->settling)
                conn_flush(c);   /* (a settling connection's replies wait for settle_round) */
        }
        /* TLS input already decrypted: one more round each */
        rconn_t *p = l->pending;
        l->pending = NULL;
        while (p && !atomic_load(&s->stopping)) {
            rconn_t *c = p;
            p = c->pnext;
            c->pending = false;
            c->pnext = NULL;
            conn_readable(c);
        }
        parked_round(l, false);
        settle_round(l);
        int64_t now = clock_mono_coarse_ns();
        if (now >= next_sweep) {
            sweep(l, now);
            next_sweep = now + SWEEP_NS;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */
/* ------------------------------------------------------------------------ */

static void loops_free(resp_server_t *s)
{
    for (int i = 0; i < s->nloops; i++) {
        loop_t *l = &s->loops[i];
        parked_round(l, true);   /* WAIT answers the count so far; what followed it is not read */
        while (l->conns) {
            rconn_t *c = l->conns;
            resp_out_t *o = redis_conn_out(c->rc);
            /* replies of changes not yet durable wait for them (or are cut) */
            if (redis_conn_settle(c->rc, REDIS_OK) == REDIS_DROP)
                o->len = 0;
            if (o->len && !c->handshaking) {   /* what is pending, once, without waiting */
                ssize_t w = c->tls ? io_send(c, o->buf, o->len) : send(c->fd, o->buf, o->len, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void)w;
            }
            conn_close(c);
        }
        if (l->ep >= 0)
            close(l->ep);
        if (l->efd >= 0)
            close(l->efd);
    }
    free(s->loops);
}

resp_server_t *resp_server_start(const tally_opts_t *o, cmd_server_t *srv, const resp_server_hooks_t *hooks,
                                 char *err, size_t errlen)
{
    resp_server_t *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->hooks = *hooks;
    s->tls = hooks->tls;
    s->max_conns = (unsigned)o->max_connections;
    s->idle_ns = (int64_t)o->conn_timeout * 1000000000LL;
    s->head_ns = (int64_t)o->header_timeout * 1000000000LL;
    s->in_limit = 2 * o->body_limit + RESP_MAX_INLINE_DEFAULT;
    atomic_store(&s->next_id, 1);
    s->cfg.srv = srv;
    s->cfg.hooks = (redis_hooks_t){ s, clock_now_ns, gate_enter, gate_leave, durable, log_on, log_line, clock_mono_ns,
                                    process_info };
    s->started_ns = clock_mono_ns();
    s->cfg.limits = resp_limits_default();
    s->cfg.limits.max_bulk = o->body_limit;
    s->cfg.out_limit = (size_t)(o->max_answer ? o->max_answer : 64ULL << 20) + (1u << 20);
    s->cfg.version = TALLY_VERSION;
    s->cfg.max_clients = s->max_conns;
    s->cfg.clients = redis_clients_new();
    s->lfd = s->cfg.clients ? front_listen(o->bind, o->resp_port, "--resp-port", &s->port, err, errlen) : -1;
    if (s->lfd < 0) {
        if (!s->cfg.clients)
            snprintf(err, errlen, "out of memory");
        redis_clients_free(s->cfg.clients);
        free(s);
        return NULL;
    }
    s->cfg.port = s->port;
    s->nloops = o->threads > 0 ? o->threads : 1;
    s->loops = calloc((size_t)s->nloops, sizeof(*s->loops));
    if (!s->loops) {
        snprintf(err, errlen, "out of memory");
        close(s->lfd);
        redis_clients_free(s->cfg.clients);
        free(s);
        return NULL;
    }
    for (int i = 0; i < s->nloops; i++)
        s->loops[i].ep = s->loops[i].efd = -1;
    for (int i = 0; i < s->nloops; i++) {
        loop_t *l = &s->loops[i];
        l->s = s;
        l->ep = epoll_create1(EPOLL_CLOEXEC);
        l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct epoll_event lev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = s };
        struct epoll_event eev = { .events = EPOLLIN, .data.ptr = l };
        if (l->ep < 0 || l->efd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, s->lfd, &lev) != 0 ||
            epoll_ctl(l->ep, EPOLL_CTL_ADD, l->efd, &eev) != 0 || pthread_create(&l->th, NULL, loop_main, l) != 0) {
            snprintf(err, errlen, "--resp-port: cannot start its event loops (%s)", strerror(errno));
            resp_server_stop(s);
            return NULL;
        }
        l->started = true;
    }
    return s;
}

int resp_server_port(const resp_server_t *s) { return s->port; }
void resp_server_set_ready(resp_server_t *s, bool ready) { atomic_store(&s->ready, ready); }

void resp_server_set_loading(resp_server_t *s, bool loading)
{
    atomic_store(&s->loading, loading);
    if (!loading)
        return;
    while (atomic_load(&s->busy) != 0)
        sched_yield();
}

void resp_server_quiesce(resp_server_t *s)
{
    if (atomic_exchange(&s->quiesced, true))
        return;
    for (int i = 0; i < s->nloops; i++)
        if (s->loops[i].ep >= 0)
            epoll_ctl(s->loops[i].ep, EPOLL_CTL_DEL, s->lfd, NULL);
    shutdown(s->lfd, SHUT_RDWR);   /* connecting clients are refused now; closed by resp_server_stop */
}

void resp_server_stop(resp_server_t *s)
{
    if (!s)
        return;
    resp_server_quiesce(s);
    atomic_store(&s->stopping, true);
    for (int i = 0; i < s->nloops; i++) {
        loop_t *l = &s->loops[i];
        if (!l->started)
            continue;
        uint64_t one = 1;
        ssize_t w = write(l->efd, &one, sizeof(one));
        (void)w;
        pthread_join(l->th, NULL);
    }
    loops_free(s);
    close(s->lfd);
    redis_clients_free(s->cfg.clients);
    free(s);
}
