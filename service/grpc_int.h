/*
 * grpc_int.h - the gRPC listener's parts (service/grpc_server.h), one
 * direction of calls:
 *
 *   grpc_server.c   sockets, TLS, the epoll loops, each connection's
 *                   nghttp2 session and bytes, deadlines, lifecycle
 *        |  nghttp2 calls back (grpc_calls_callbacks); the sweep answers
 *        v  late calls (grpc_answer); a closed connection frees its streams
 *   grpc_calls.c    each stream: its headers and body, then its call
 *                   (health, ShouldRateLimit through the gate, the
 *                   decision and the wait for durability) and its answer
 */
#ifndef TALLY_GRPC_INT_H
#define TALLY_GRPC_INT_H

#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/access.h"
#include "grpc/grpc.h"
#include "service/grpc_server.h"

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

typedef struct grpc_loop loop_t;
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

struct grpc_loop {
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
    /* ShouldRateLimit's decision: rls_should_rate_limit on --rls-config's
     * rls_t (service/rls_host.h); NULL decide: none configured, UNAVAILABLE */
    rls_t *rls;
    bool (*decide)(rls_t *r, cmd_ctx_t *ctx, const rls_request_t *q, rls_result_t *res);
    void (*result_free)(rls_result_t *res);
    nghttp2_session_callbacks *cbs;
    _Atomic bool ready, loading, quiesced, stopping;
    _Atomic unsigned busy;
    _Atomic unsigned nconns;
    unsigned max_conns;
    int64_t idle_ns, head_ns;
};

/* grpc_calls.c */
/* The session callbacks (headers, data, frames, stream close). */
bool grpc_calls_callbacks(nghttp2_session_callbacks **out);
/* Answers a stream (once): a status, or its message then grpc-status 0. */
void grpc_answer(gstream_t *st, grpc_code_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Frees a stream and takes it off its connection. */
void grpc_stream_free(gstream_t *st);

#endif
