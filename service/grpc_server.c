/* grpc_server.c - see grpc_server.h and grpc_int.h: the listening socket,
 * the loops, TLS, each connection's nghttp2 session and bytes. */
#include <errno.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/grpc_int.h"
#include "service/log.h"
#include "service/rls_host.h"
#include "service/tls.h"

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

static void conn_close(gconn_t *c)
{
    loop_t *l = c->loop;
    epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->h2)
        nghttp2_session_del(c->h2);   /* closes its streams: on_stream_close frees them */
    while (c->streams)
        grpc_stream_free(c->streams);
    if (c->tls)
        gnutls_deinit(c->tls);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c->wbuf);
    free(c);
    atomic_fetch_sub(&l->s->nconns, 1);
}

static void watch(gconn_t *c, uint32_t events)
{
    if (c->events == events)
        return;
    struct epoll_event ev = { .events = events, .data.ptr = c };
    epoll_ctl(c->loop->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

/* Bytes to the peer: >= 0 taken, -1 would block, -2 the connection is gone. */
static ssize_t conn_send(gconn_t *c, const uint8_t *p, size_t n)
{
    for (;;) {
        ssize_t w;
        if (c->tls) {
            w = gnutls_record_send(c->tls, p, n);
            if (w >= 0)
                return w;
            if (w == GNUTLS_E_INTERRUPTED)
                continue;
            return w == GNUTLS_E_AGAIN ? -1 : -2;
        }
        w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
    }
}

/* Bytes from the peer: > 0 read, 0 end of stream, -1 would block, -2 an error. */
static ssize_t conn_recv(gconn_t *c, uint8_t *p, size_t n)
{
    for (;;) {
        ssize_t r;
        if (c->tls) {
            r = gnutls_record_recv(c->tls, p, n);
            if (r >= 0)
                return r;
            if (r == GNUTLS_E_INTERRUPTED)
                continue;
            return r == GNUTLS_E_AGAIN ? -1 : r == GNUTLS_E_PREMATURE_TERMINATION ? 0 : -2;
        }
        r = recv(c->fd, p, n, 0);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
    }
}

/* Sends what nghttp2 has, gathered into one send of up to OUT_BATCH bytes
 * (nghttp2 lends a frame at a time: a call's HEADERS, DATA and trailers
 * would be three system calls); false when the connection was closed (or
 * is done: nothing more to read or write). */
static bool conn_flush(gconn_t *c)
{
    for (;;) {
        if (c->wlen > c->woff) {
            ssize_t w = conn_send(c, c->wbuf + c->woff, c->wlen - c->woff);
            if (w == -2) {
                conn_close(c);
                return false;
            }
            if (w == -1) {
                watch(c, EPOLLOUT);   /* the peer reads first; until then nothing more is read */
                return true;
            }
            c->woff += (size_t)w;
            c->last_ns = clock_mono_coarse_ns();
            continue;
        }
        c->wlen = c->woff = 0;
        while (c->wlen < OUT_BATCH) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->h2, &data);
            if (n < 0) {
                conn_close(c);
                return false;
            }
            if (n == 0)
                break;
            if (c->wlen + (size_t)n > c->wcap) {   /* nghttp2's buffer is only lent */
                size_t cap = c->wcap ? c->wcap * 2 : 16 * 1024;
                while (cap < c->wlen + (size_t)n)
                    cap *= 2;
                uint8_t *p = realloc(c->wbuf, cap);
                if (!p) {
                    conn_close(c);
                    return false;
                }
                c->wbuf = p;
                c->wcap = cap;
            }
            memcpy(c->wbuf + c->wlen, data, (size_t)n);
            c->wlen += (size_t)n;
        }
        if (c->wlen == 0)
            break;
    }
    if (c->wcap > 4 * OUT_BATCH) {   /* a burst is over: give its buffer back */
        free(c->wbuf);
        c->wbuf = NULL;
        c->wcap = 0;
    }
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2)) {
        conn_close(c);   /* after a GOAWAY (ours or the peer's), with every stream done */
        return false;
    }
    watch(c, EPOLLIN);
    return true;
}

static bool session_start(gconn_t *c)
{
    grpc_server_t *s = c->loop->s;
    if (nghttp2_session_server_new(&c->h2, s->cbs, c) != 0)
        return false;
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST },
    };
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0)
        return false;
    if (atomic_load(&s->quiesced)) {
        nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
        c->goaway_sent = true;
    }
    return true;
}

static void conn_readable(gconn_t *c);

/* TLS: the handshake goes on; true while the connection lives. */
static bool handshake(gconn_t *c)
{
    int r = gnutls_handshake(c->tls);
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
        watch(c, gnutls_record_get_direction(c->tls) ? EPOLLOUT : EPOLLIN);
        return true;
    }
    if (r < 0) {
        log_debug("grpc: TLS handshake with %s failed: %s", c->addr, gnutls_strerror(r));
        conn_close(c);
        return false;
    }
    gnutls_datum_t proto = { NULL, 0 };
    if (gnutls_alpn_get_selected_protocol(c->tls, &proto) == 0 && !(proto.size == 2 && memcmp(proto.data, "h2", 2) == 0)) {
        conn_close(c);   /* not HTTP/2 */
        return false;
    }
    c->handshaking = false;
    c->last_ns = clock_mono_coarse_ns();
    if (!session_start(c)) {
        conn_close(c);
        return false;
    }
    if (!conn_flush(c))
        return false;
    conn_readable(c);   /* the client's preface may have come with its last handshake message */
    return true;
}

static void conn_readable(gconn_t *c)
{
    loop_t *l = c->loop;
    for (int round = 0; round < READS_PER_WAKE; round++) {
        if (c->wlen > c->woff)
            break;   /* the peer does not read: neither does tallyd */
        ssize_t n = conn_recv(c, l->rbuf, sizeof(l->rbuf));
        if (n == -1)
            break;
        if (n <= 0) {
            conn_close(c);
            return;
        }
        c->last_ns = clock_mono_coarse_ns();
        ssize_t used = nghttp2_session_mem_recv(c->h2, l->rbuf, (size_t)n);
        if (used < 0) {
            /* a protocol error: nghttp2 queued a GOAWAY when it could; send it, then close */
            log_debug("grpc: closing %s's connection: %s", c->addr, nghttp2_strerror((int)used));
            if (!c->goaway_sent)
                nghttp2_session_terminate_session(c->h2, NGHTTP2_PROTOCOL_ERROR);
            const uint8_t *data;
            ssize_t m;
            while ((m = nghttp2_session_mem_send(c->h2, &data)) > 0)
                if (conn_send(c, data, (size_t)m) < 0)
                    break;
            conn_close(c);
            return;
        }
        if ((size_t)n < sizeof(l->rbuf) && !(c->tls && gnutls_record_check_pending(c->tls)))
            break;
    }
    conn_flush(c);
}

static void conn_event(gconn_t *c, uint32_t ev)
{
    if ((ev & (EPOLLERR | EPOLLHUP)) && !(ev & EPOLLIN)) {
        conn_close(c);
        return;
    }
    if (c->handshaking) {
        handshake(c);
        return;
    }
    if (ev & EPOLLOUT) {
        if (!conn_flush(c))
            return;
    }
    if (ev & EPOLLIN)
        conn_readable(c);
}

static void accept_some(loop_t *l)
{
    grpc_server_t *s = l->s;
    for (int i = 0; i < ACCEPTS_PER_WAKE && !atomic_load(&s->quiesced); i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(s->lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (atomic_fetch_add(&s->nconns, 1) >= s->max_conns) {
            atomic_fetch_sub(&s->nconns, 1);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        gconn_t *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            atomic_fetch_sub(&s->nconns, 1);
            continue;
        }
        c->fd = fd;
        c->loop = l;
        c->last_ns = c->start_ns = clock_mono_coarse_ns();
        if (peer.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, c->addr, sizeof(c->addr));
        else if (peer.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, c->addr, sizeof(c->addr));
        c->events = EPOLLIN;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        bool ok = epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) == 0;
        c->next = l->conns;
        if (l->conns)
            l->conns->prev = c;
        l->conns = c;
        if (!ok) {
            conn_close(c);
            continue;
        }
        if (s->hooks.tls) {   /* HTTPS's credentials and checks (tls_session_new), ALPN h2 */
            static const gnutls_datum_t h2 = { (unsigned char *)"h2", 2 };
            if (tls_session_new(s->hooks.tls, fd, &c->tls) != 0 ||
                gnutls_alpn_set_protocols(c->tls, &h2, 1, GNUTLS_ALPN_MANDATORY) < 0) {
                conn_close(c);
                continue;
            }
            c->handshaking = true;
            handshake(c);
            continue;
        }
        if (!session_start(c)) {
            conn_close(c);
            continue;
        }
        conn_flush(c);
    }
}

/* Deadlines: calls whose grpc-timeout passed, connections idle or too
 * slow to start. */
static void sweep(loop_t *l, int64_t now_coarse)
{
    grpc_server_t *s = l->s;
    int64_t now = clock_mono_ns();
    for (gconn_t *c = l->conns, *next; c; c = next) {
        next = c->next;
        if (c->handshaking || !c->h2) {
            if (now_coarse - c->start_ns > s->head_ns)
                conn_close(c);
            continue;
        }
        bool late = false;
        for (gstream_t *st = c->streams; st; st = st->next)
            if (st->deadline && !st->answered && now > st->deadline) {
                grpc_answer(st, GRPC_DEADLINE_EXCEEDED, "the call's grpc-timeout passed before its request ended");
                late = true;
            }
        if (!c->streams && now_coarse - c->last_ns > s->idle_ns && !c->goaway_sent) {
            nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                                  NGHTTP2_NO_ERROR, (const uint8_t *)"idle", 4);
            c->goaway_sent = true;
            late = true;
        } else if (c->goaway_sent && !c->streams && now_coarse - c->last_ns > s->idle_ns + 1000000000LL) {
            conn_close(c);   /* the peer never closed after our GOAWAY */
            continue;
        }
        if (late && c->wlen == c->woff)
            conn_flush(c);
    }
}

/* Shutdown: a GOAWAY on every connection, naming the last stream taken. */
static void goaway_all(loop_t *l)
{
    l->goaway_done = true;
    for (gconn_t *c = l->conns, *next; c; c = next) {
        next = c->next;
        if (!c->h2) {
            conn_close(c);   /* still handshaking */
            continue;
        }
        if (!c->goaway_sent) {
            nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                                  NGHTTP2_NO_ERROR, (const uint8_t *)"shutting down", 13);
            c->goaway_sent = true;
        }
        if (c->wlen == c->woff)
            conn_flush(c);
    }
}

static void *loop_main(void *arg)
{
    loop_t *l = arg;
    grpc_server_t *s = l->s;
    struct epoll_event evs[128];
    int64_t next_sweep = clock_mono_coarse_ns() + SWEEP_NS;
    while (!atomic_load(&s->stopping)) {
        int n = epoll_wait(l->ep, evs, (int)(sizeof(evs) / sizeof(evs[0])), 100);
        for (int i = 0; i < n && !atomic_load(&s->stopping); i++) {
            void *p = evs[i].data.ptr;
            if (p == (void *)l) {
                uint64_t v;
                ssize_t r = read(l->efd, &v, sizeof(v));
                (void)r;
                continue;
            }
            if (p == (void *)s) {
                accept_some(l);
                continue;
            }
            conn_event(p, evs[i].events);
        }
        if (atomic_load(&s->quiesced) && !l->goaway_done)
            goaway_all(l);
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

static void server_free(grpc_server_t *s)
{
    for (int i = 0; s->loops && i < s->nloops; i++) {
        loop_t *l = &s->loops[i];
        while (l->conns) {
            gconn_t *c = l->conns;
            if (c->h2 && c->wlen == c->woff) {   /* what is pending, once, without waiting */
                const uint8_t *data;
                ssize_t m = nghttp2_session_mem_send(c->h2, &data);
                if (m > 0 && !c->tls) {
                    ssize_t w = send(c->fd, data, (size_t)m, MSG_NOSIGNAL | MSG_DONTWAIT);
                    (void)w;
                }
            }
            conn_close(c);
        }
        if (l->ep >= 0)
            close(l->ep);
        if (l->efd >= 0)
            close(l->efd);
    }
    free(s->loops);
    if (s->cbs)
        nghttp2_session_callbacks_del(s->cbs);
    if (s->lfd >= 0)
        close(s->lfd);
    free(s);
}

grpc_server_t *grpc_server_start(const tally_opts_t *o, cmd_server_t *srv, const grpc_server_hooks_t *hooks,
                                 char *err, size_t errlen)
{
    grpc_server_t *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->lfd = -1;
    s->srv = srv;
    s->hooks = *hooks;
    s->max_conns = (unsigned)o->max_connections;
    s->idle_ns = (int64_t)o->conn_timeout * 1000000000LL;
    s->head_ns = (int64_t)o->header_timeout * 1000000000LL;
    if ((s->rls = rls_host_get())) {   /* --rls-config: ShouldRateLimit's decisions */
        s->decide = rls_should_rate_limit;
        s->result_free = rls_result_free;
    }
    if (!grpc_calls_callbacks(&s->cbs)) {
        snprintf(err, errlen, "out of memory");
        server_free(s);
        return NULL;
    }
    s->lfd = front_listen(o->bind, o->grpc_port, "--grpc-port", &s->port, err, errlen);
    if (s->lfd < 0) {
        server_free(s);
        return NULL;
    }
    s->nloops = o->threads > 0 ? o->threads : 1;
    s->loops = calloc((size_t)s->nloops, sizeof(*s->loops));
    if (!s->loops) {
        snprintf(err, errlen, "out of memory");
        server_free(s);
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
            snprintf(err, errlen, "--grpc-port: cannot start its event loops (%s)", strerror(errno));
            grpc_server_stop(s);
            return NULL;
        }
        l->started = true;
    }
    return s;
}

int grpc_server_port(const grpc_server_t *s) { return s->port; }
void grpc_server_set_ready(grpc_server_t *s, bool ready) { atomic_store(&s->ready, ready); }

void grpc_server_set_loading(grpc_server_t *s, bool loading)
{
    atomic_store(&s->loading, loading);
    if (!loading)
        return;
    while (atomic_load(&s->busy) != 0)
        sched_yield();
}

static void wake_all(grpc_server_t *s)
{
    for (int i = 0; i < s->nloops; i++) {
        loop_t *l = &s->loops[i];
        if (!l->started)
            continue;
        uint64_t one = 1;
        ssize_t w = write(l->efd, &one, sizeof(one));
        (void)w;
    }
}

void grpc_server_quiesce(grpc_server_t *s)
{
    if (atomic_exchange(&s->quiesced, true))
        return;
    for (int i = 0; i < s->nloops; i++)
        if (s->loops[i].ep >= 0)
            epoll_ctl(s->loops[i].ep, EPOLL_CTL_DEL, s->lfd, NULL);
    shutdown(s->lfd, SHUT_RDWR);
    wake_all(s);   /* each loop sends its GOAWAYs */
}

bool grpc_server_drain(grpc_server_t *s, int seconds)
{
    int64_t until = clock_mono_ns() + (int64_t)seconds * 1000000000LL;
    while (atomic_load(&s->nconns) != 0) {
        if (clock_mono_ns() >= until)
            return false;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    return true;
}

void grpc_server_stop(grpc_server_t *s)
{
    if (!s)
        return;
    grpc_server_quiesce(s);
    atomic_store(&s->stopping, true);
    wake_all(s);
    for (int i = 0; i < s->nloops; i++)
        if (s->loops[i].started)
            pthread_join(s->loops[i].th, NULL);
    server_free(s);
}
