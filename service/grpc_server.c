/* grpc_server.c - see grpc_server.h: the listening socket, the loops, TLS,
 * each connection's nghttp2 session and each stream's call.  What the
 * messages mean is grpc/grpc.h's; the decision is rls/'s. */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd/access.h"
#include "grpc/grpc.h"
#include "service/access_log.h"
#include "service/clock.h"
#include "service/grpc_server.h"
#include "service/log.h"
#include "service/tls.h"

#define ACCEPTS_PER_WAKE 64
#define READS_PER_WAKE 16
#define READ_CHUNK (64 * 1024)
#define SWEEP_NS (100 * 1000000LL)             /* deadlines are checked every 100 ms */
#define MAX_STREAMS 1024                        /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define STREAM_WINDOW (1 << 20)                 /* SETTINGS_INITIAL_WINDOW_SIZE */
#define CONN_WINDOW (16 << 20)                  /* the connection's receive window */
#define CONN_BODIES (64u << 20)                 /* request bodies a connection holds at once */
#define MAX_HEADER_LIST (64 * 1024)
#define OUT_BATCH (64 * 1024)                   /* bytes gathered for one send */

#define PATH_RLS "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
#define PATH_HEALTH "/grpc.health.v1.Health/Check"
#define SERVICE_RLS "envoy.service.ratelimit.v3.RateLimitService"

typedef struct loop loop_t;
typedef struct gconn gconn_t;

enum { CALL_UNKNOWN, CALL_RLS, CALL_HEALTH };

typedef struct gstream {
    int32_t id;
    struct gstream *prev, *next;
    gconn_t *c;
    int call;
    char path[128];
    bool post, grpc_ct, identity;   /* :method POST; content-type application/grpc[+proto]; grpc-encoding */
    char *auth;                      /* the authorization header, or NULL */
    int64_t deadline;                /* monotonic ns; 0: none */
    uint8_t *body;
    size_t len, cap;
    bool too_large, answered;
    uint8_t *out;                    /* the framed response message */
    size_t out_len, out_off;
    grpc_code_t code;
    char msg[384];                   /* grpc-message, percent-encoded */
    int64_t start_ns;                /* its HEADERS arrived (monotonic): the access log's duration */
    char token[CMD_TOKEN_NAME_MAX + 1]; /* the caller's token's name, for the access log ("": none) */
} gstream_t;

struct gconn {
    int fd;
    gconn_t *prev, *next;
    loop_t *loop;
    nghttp2_session *h2;
    gnutls_session_t tls;
    bool handshaking;
    bool goaway_sent;
    int64_t last_ns, start_ns;
    gstream_t *streams;
    size_t bodies;                   /* bytes of request bodies held */
    uint8_t *wbuf;                   /* bytes for the peer: wbuf[woff..wlen) not sent yet */
    size_t wlen, woff, wcap;
    uint32_t events;                 /* what epoll watches */
    char addr[INET6_ADDRSTRLEN];
};

struct loop {
    grpc_server_t *s;
    int ep, efd;
    pthread_t th;
    bool started;
    bool goaway_done;
    gconn_t *conns;
    uint8_t rbuf[READ_CHUNK];
};

struct grpc_server {
    int lfd, port;
    int nloops;
    loop_t *loops;
    cmd_server_t *srv;
    grpc_server_hooks_t hooks;
    bool tls;
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    nghttp2_session_callbacks *cbs;
    _Atomic bool ready, loading, quiesced, stopping;
    _Atomic unsigned busy;
    _Atomic unsigned nconns;
    unsigned max_conns;
    int64_t idle_ns, head_ns;
};

/* ------------------------------------------------------------------------ */
/* The gate and durability (resp_server.c's)                                */
/* ------------------------------------------------------------------------ */

static bool gate_enter(grpc_server_t *s)
{
    atomic_fetch_add(&s->busy, 1);
    if (!atomic_load(&s->ready) || atomic_load(&s->loading)) {
        atomic_fetch_sub(&s->busy, 1);
        return false;
    }
    return true;
}

static void gate_leave(grpc_server_t *s) { atomic_fetch_sub_explicit(&s->busy, 1, memory_order_release); }

typedef struct durable_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, ok;
    const char *err;
} durable_wait_t;

static void durable_done(void *ud, bool ok, const char *err)
{
    durable_wait_t *w = ud;
    pthread_mutex_lock(&w->mu);
    w->ok = ok;
    w->err = err;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The loop waits for the journal (and the replicas it must wait for)
 * before it answers a decision that changed counters. */
static bool durable(grpc_server_t *s, uint64_t lsn, uint64_t pos, const char **err)
{
    const grpc_server_hooks_t *h = &s->hooks;
    if (!(lsn || pos) || !h->journal_wait_async || (h->journal_try && h->journal_try(h->ud, lsn, pos)))
        return true;
    durable_wait_t w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, NULL };
    if (h->journal_wait_async(h->ud, lsn, pos, durable_done, &w))
        return true;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    *err = w.err;
    return w.ok;
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */
/* ------------------------------------------------------------------------ */

#define NV(n, v, vl) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NONE }

static ssize_t body_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)ud;
    gstream_t *st = src->ptr;
    size_t n = st->out_len - st->out_off;
    if (n > length)
        n = length;
    memcpy(buf, st->out + st->out_off, n);
    st->out_off += n;
    if (st->out_off == st->out_len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        char code[4] = "0";
        nghttp2_nv trailer[] = { NV("grpc-status", code, 1) };
        if (nghttp2_submit_trailer(h2, id, trailer, 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

/* The access log's status of a gRPC status: the HTTP status gRPC's own
 * mapping gives it (grpc-gateway's), so that log tools read 429, 503 ... as
 * for HTTP; every gRPC answer itself is HTTP 200. */
static int http_status_of(grpc_code_t code)
{
    switch (code) {
    case GRPC_OK: return 200;
    case GRPC_CANCELLED: return 499;
    case GRPC_INVALID_ARGUMENT:
    case GRPC_FAILED_PRECONDITION:
    case GRPC_OUT_OF_RANGE:
        return 400;
    case GRPC_DEADLINE_EXCEEDED: return 504;
    case GRPC_NOT_FOUND: return 404;
    case GRPC_ALREADY_EXISTS:
    case GRPC_ABORTED:
        return 409;
    case GRPC_PERMISSION_DENIED: return 403;
    case GRPC_UNAUTHENTICATED: return 401;
    case GRPC_RESOURCE_EXHAUSTED: return 429;
    case GRPC_UNIMPLEMENTED: return 501;
    case GRPC_UNAVAILABLE: return 503;
    default: return 500;
    }
}

/* A status without a message (trailers only), or a message then grpc-status 0. */
static void answer(gstream_t *st, grpc_code_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void answer(gstream_t *st, grpc_code_t code, const char *fmt, ...)
{
    if (st->answered)
        return;
    st->answered = true;
    st->code = code;
    char raw[256] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
    }
    grpc_message_encode(raw, st->msg, sizeof(st->msg));
    if (access_log_enabled())
        access_log_write(clock_now_ns(), st->c->addr, st->token[0] ? st->token : NULL, "POST", st->path,
                         strlen(st->path), http_status_of(code), clock_mono_ns() - st->start_ns);
    char codebuf[8];
    int cl = snprintf(codebuf, sizeof(codebuf), "%d", (int)code);
    nghttp2_session *h2 = st->c->h2;
    if (code == GRPC_OK && st->out) {
        nghttp2_nv hdrs[] = { NV(":status", "200", 3), NV("content-type", "application/grpc", 16) };
        nghttp2_data_provider dp = { .source.ptr = st, .read_callback = body_read };
        if (nghttp2_submit_response(h2, st->id, hdrs, 2, &dp) != 0)
            nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    nghttp2_nv hdrs[] = { NV(":status", "200", 3), NV("content-type", "application/grpc", 16),
                          NV("grpc-status", codebuf, (size_t)cl), NV("grpc-message", st->msg, strlen(st->msg)) };
    if (nghttp2_submit_response(h2, st->id, hdrs, st->msg[0] ? 4 : 3, NULL) != 0)
        nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                    */
/* ------------------------------------------------------------------------ */

static const char *client_addr(void *ud) { return ((gconn_t *)ud)->addr; }

static void call_health(gstream_t *st, const uint8_t *msg, size_t mlen)
{
    grpc_server_t *s = st->c->loop->s;
    char *service = grpc_health_decode(msg, mlen);
    if (!service) {
        answer(st, GRPC_INVALID_ARGUMENT, "the HealthCheckRequest is not a valid protobuf message");
        return;
    }
    if (service[0] && strcmp(service, SERVICE_RLS) != 0) {
        answer(st, GRPC_NOT_FOUND, "unknown service %.120s", service);
        free(service);
        return;
    }
    free(service);
    bool serving = atomic_load(&s->ready) && !atomic_load(&s->loading);
    st->out = grpc_health_encode(serving ? GRPC_HEALTH_SERVING : GRPC_HEALTH_NOT_SERVING, &st->out_len);
    if (!st->out)
        answer(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
    else
        answer(st, GRPC_OK, NULL);
}

static void call_rls(gstream_t *st, const uint8_t *msg, size_t mlen)
{
    gconn_t *c = st->c;
    grpc_server_t *s = c->loop->s;
    const grpc_server_hooks_t *h = &s->hooks;
    cmd_tokens_t *set = NULL;
    const cmd_token_t *token = NULL;
    if (s->srv->auth) {   /* authorization: Bearer TOKEN, as HTTP's */
        const char *a = st->auth;
        if (!a || strncasecmp(a, "Bearer ", 7) != 0) {
            answer(st, GRPC_UNAUTHENTICATED, "missing token: send the metadata authorization: Bearer <token>");
            return;
        }
        a += 7;
        while (*a == ' ')
            a++;
        cmd_err_t e;
        if (!cmd_auth_identify(s->srv->auth, a, strlen(a), client_addr, c, clock_now_ns(), &set, &token, &e)) {
            answer(st, grpc_code_of(e.code), "%s", e.message);
            return;
        }
        snprintf(st->token, sizeof(st->token), "%s", token->name);
    }
    grpc_rls_req_t req;
    char err[256];
    if (!grpc_rls_decode(msg, mlen, &req, err, sizeof(err))) {
        cmd_tokens_release(set);
        answer(st, GRPC_INVALID_ARGUMENT, "%s", err);
        return;
    }
    if (!h->decide) {
        grpc_rls_req_free(&req);
        cmd_tokens_release(set);
        answer(st, GRPC_UNAVAILABLE, "no rate limit configuration: start tallyd with --rls-config");
        return;
    }
    if (!gate_enter(s)) {
        grpc_rls_req_free(&req);
        cmd_tokens_release(set);
        answer(st, GRPC_UNAVAILABLE, "tallyd is loading its data");
        return;
    }
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, s->srv, clock_now_ns(), false, 0);
    ctx.token = token;
    ctx.what_verb = "";
    ctx.what_name = "ShouldRateLimit";
    ctx.front = st;
    rls_result_t res;
    memset(&res, 0, sizeof(res));
    bool ok = h->decide(h->rls, &ctx, &req.q, &res);
    uint64_t lsn = ctx.journal_lsn, pos = ctx.repl_pos;
    cmd_err_t e = ctx.err;
    cmd_ctx_end(&ctx);
    gate_leave(s);
    grpc_rls_req_free(&req);
    if (!ok) {
        cmd_tokens_release(set);
        answer(st, grpc_code_of(e.code), "%s", e.message);
        return;
    }
    const char *why = NULL;
    if (!durable(s, lsn, pos, &why)) {
        h->result_free(&res);
        cmd_tokens_release(set);
        answer(st, GRPC_UNAVAILABLE, "%s", why ? why : "the decision could not be made durable");
        return;
    }
    st->out = grpc_rls_encode(&res, &st->out_len);
    h->result_free(&res);
    cmd_tokens_release(set);
    if (!st->out)
        answer(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
    else
        answer(st, GRPC_OK, NULL);
}

/* The request ended: its one message, its call. */
static void call_run(gstream_t *st)
{
    if (st->answered)
        return;
    if (!st->post) {
        answer(st, GRPC_UNIMPLEMENTED, "gRPC calls are POST requests");
        return;
    }
    if (!st->grpc_ct) {
        answer(st, GRPC_INVALID_ARGUMENT, "content-type: a gRPC call is application/grpc");
        return;
    }
    if (st->call == CALL_UNKNOWN) {
        answer(st, GRPC_UNIMPLEMENTED, "unknown method %s", st->path);
        return;
    }
    if (st->deadline && clock_mono_ns() > st->deadline) {
        answer(st, GRPC_DEADLINE_EXCEEDED, "the call's grpc-timeout passed before it ran");
        return;
    }
    const uint8_t *msg = NULL;
    size_t mlen = 0;
    switch (grpc_frame_parse(st->body, st->len, GRPC_MAX_MESSAGE, &msg, &mlen)) {
    case GRPC_FRAME_ONE:
        break;
    case GRPC_FRAME_SHORT:
        answer(st, GRPC_INTERNAL, "truncated message: the body ends before the length its prefix gives");
        return;
    case GRPC_FRAME_EXTRA:
        answer(st, GRPC_INVALID_ARGUMENT, "a unary call carries exactly one message");
        return;
    case GRPC_FRAME_COMPRESSED:
        answer(st, GRPC_UNIMPLEMENTED, "compressed messages are not accepted (grpc-accept-encoding: identity)");
        return;
    case GRPC_FRAME_BAD_FLAG:
        answer(st, GRPC_INTERNAL, "the message's flag byte is neither 0 nor 1");
        return;
    case GRPC_FRAME_TOO_LARGE:
        answer(st, GRPC_RESOURCE_EXHAUSTED, "message larger than the limit of %u bytes", GRPC_MAX_MESSAGE);
        return;
    }
    if (st->call == CALL_HEALTH)
        call_health(st, msg, mlen);
    else
        call_rls(st, msg, mlen);
}

/* ------------------------------------------------------------------------ */
/* nghttp2's callbacks                                                      */
/* ------------------------------------------------------------------------ */

static void stream_free(gstream_t *st)
{
    gconn_t *c = st->c;
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    c->bodies -= st->cap;
    free(st->body);
    free(st->out);
    free(st->auth);
    free(st);
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    gconn_t *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    gstream_t *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;   /* the stream is reset */
    st->id = f->hd.stream_id;
    st->c = c;
    st->start_ns = clock_mono_ns();
    st->identity = true;
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    nghttp2_session_set_stream_user_data(h2, st->id, st);
    return 0;
}

static bool name_is(const uint8_t *n, size_t nl, const char *lit)
{
    return nl == strlen(lit) && memcmp(n, lit, nl) == 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;   /* the request's trailers carry nothing tally reads */
    gstream_t *st = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (!st)
        return 0;
    if (name_is(name, nl, ":method")) {
        st->post = vl == 4 && memcmp(value, "POST", 4) == 0;
    } else if (name_is(name, nl, ":path")) {
        size_t n = vl < sizeof(st->path) - 1 ? vl : sizeof(st->path) - 1;
        memcpy(st->path, value, n);
        st->path[n] = '\0';
        for (size_t i = 0; i < n; i++)
            if (st->path[i] < 0x20 || st->path[i] > 0x7e)
                st->path[i] = '?';
        st->call = strcmp(st->path, PATH_RLS) == 0 ? CALL_RLS : strcmp(st->path, PATH_HEALTH) == 0 ? CALL_HEALTH : CALL_UNKNOWN;
    } else if (name_is(name, nl, "content-type")) {
        st->grpc_ct = vl >= 16 && memcmp(value, "application/grpc", 16) == 0 && (vl == 16 || value[16] == '+' || value[16] == ';');
    } else if (name_is(name, nl, "grpc-timeout")) {
        int64_t ns;
        int64_t now = clock_mono_ns();
        if (grpc_timeout_parse((const char *)value, vl, &ns) && ns < INT64_MAX - now)
            st->deadline = now + ns;   /* else as good as none */
    } else if (name_is(name, nl, "grpc-encoding")) {
        st->identity = vl == 8 && memcmp(value, "identity", 8) == 0;
    } else if (name_is(name, nl, "authorization") && !st->auth && vl <= 4096) {
        st->auth = strndup((const char *)value, vl);
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud)
{
    (void)flags;
    gconn_t *c = ud;
    gstream_t *st = nghttp2_session_get_stream_user_data(h2, id);
    if (!st || st->answered)
        return 0;
    if (st->len + len > (size_t)GRPC_MAX_MESSAGE + 5) {
        answer(st, GRPC_RESOURCE_EXHAUSTED, "message larger than the limit of %u bytes", GRPC_MAX_MESSAGE);
        return 0;
    }
    if (st->len + len > st->cap) {
        size_t cap = st->cap ? st->cap : 256;
        while (cap < st->len + len)
            cap *= 2;
        if (c->bodies - st->cap + cap > CONN_BODIES) {
            answer(st, GRPC_RESOURCE_EXHAUSTED, "the connection holds %u bytes of messages already", CONN_BODIES);
            return 0;
        }
        uint8_t *p = realloc(st->body, cap);
        if (!p) {
            answer(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
            return 0;
        }
        c->bodies += cap - st->cap;
        st->body = p;
        st->cap = cap;
    }
    memcpy(st->body + st->len, data, len);
    st->len += len;
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        gstream_t *st = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
        if (st)
            call_run(st);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    (void)ud;
    gstream_t *st = nghttp2_session_get_stream_user_data(h2, id);
    if (st) {
        nghttp2_session_set_stream_user_data(h2, id, NULL);
        stream_free(st);
    }
    return 0;
}

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
        stream_free(c->streams);
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
        if (s->tls) {
            static const gnutls_datum_t h2 = { (unsigned char *)"h2", 2 };
            if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_TICKETS) < 0 ||
                gnutls_priority_set(c->tls, s->prio) < 0 ||
                gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, s->cred) < 0 ||
                gnutls_alpn_set_protocols(c->tls, &h2, 1, GNUTLS_ALPN_MANDATORY) < 0) {
                conn_close(c);
                continue;
            }
            gnutls_transport_set_int(c->tls, fd);
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
                answer(st, GRPC_DEADLINE_EXCEEDED, "the call's grpc-timeout passed before its request ended");
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

static int listen_on(const char *addr, int port, int *bound, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        len = sizeof(*a6);
    } else {
        snprintf(err, errlen, "--bind: '%s' is not an IPv4 or IPv6 address", addr);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 511) != 0) {
        snprintf(err, errlen, "--grpc-port: cannot listen on %s:%d (%s)", addr, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        *bound = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    return fd;
}

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
    if (s->cred)
        gnutls_certificate_free_credentials(s->cred);
    if (s->prio)
        gnutls_priority_deinit(s->prio);
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
    s->tls = o->tls_cert[0] != '\0';
    if (s->tls && (gnutls_certificate_allocate_credentials(&s->cred) < 0 ||
                   gnutls_priority_init(&s->prio, TALLY_TLS_PRIORITIES, NULL) < 0)) {
        snprintf(err, errlen, "--grpc-port: cannot set up TLS");
        server_free(s);
        return NULL;
    }
    if (s->tls)
        gnutls_certificate_set_retrieve_function2(s->cred, (gnutls_certificate_retrieve_function2 *)tls_cert_callback());
    if (nghttp2_session_callbacks_new(&s->cbs) != 0) {
        snprintf(err, errlen, "out of memory");
        server_free(s);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(s->cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(s->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s->cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(s->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(s->cbs, on_stream_close);
    s->lfd = listen_on(o->bind, o->grpc_port, &s->port, err, errlen);
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
