/* grpc_calls.c - see grpc_int.h: each stream's headers and body, its call
 * and its answer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "service/access_log.h"
#include "service/clock.h"
#include "service/grpc_int.h"

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

/* The loop waits for the journal (and the replicas it must wait for)
 * before it answers a decision that changed counters. */
static bool durable(grpc_server_t *s, uint64_t lsn, uint64_t pos, const char **err)
{
    return front_durable(&s->hooks, lsn, pos, err);
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

void grpc_answer(gstream_t *st, grpc_code_t code, const char *fmt, ...)
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
        grpc_answer(st, GRPC_INVALID_ARGUMENT, "the HealthCheckRequest is not a valid protobuf message");
        return;
    }
    if (service[0] && strcmp(service, SERVICE_RLS) != 0) {
        grpc_answer(st, GRPC_NOT_FOUND, "unknown service %.120s", service);
        free(service);
        return;
    }
    free(service);
    bool serving = atomic_load(&s->ready) && !atomic_load(&s->loading);
    st->out = grpc_health_encode(serving ? GRPC_HEALTH_SERVING : GRPC_HEALTH_NOT_SERVING, &st->out_len);
    if (!st->out)
        grpc_answer(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
    else
        grpc_answer(st, GRPC_OK, NULL);
}

static void call_rls(gstream_t *st, const uint8_t *msg, size_t mlen)
{
    gconn_t *c = st->c;
    grpc_server_t *s = c->loop->s;
    cmd_tokens_t *set = NULL;
    const cmd_token_t *token = NULL;
    if (s->srv->auth) {   /* authorization: Bearer TOKEN, as HTTP's */
        const char *a = st->auth;
        if (!a || strncasecmp(a, "Bearer ", 7) != 0) {
            grpc_answer(st, GRPC_UNAUTHENTICATED, "missing token: send the metadata authorization: Bearer <token>");
            return;
        }
        a += 7;
        while (*a == ' ')
            a++;
        cmd_err_t e;
        if (!cmd_auth_identify(s->srv->auth, a, strlen(a), client_addr, c, clock_now_ns(), &set, &token, &e)) {
            grpc_answer(st, grpc_code_of(e.code), "%s", e.message);
            return;
        }
        snprintf(st->token, sizeof(st->token), "%s", token->name);
    }
    grpc_rls_req_t req;
    char err[256];
    if (!grpc_rls_decode(msg, mlen, &req, err, sizeof(err))) {
        cmd_tokens_release(set);
        grpc_answer(st, GRPC_INVALID_ARGUMENT, "%s", err);
        return;
    }
    if (!s->decide) {
        grpc_rls_req_free(&req);
        cmd_tokens_release(set);
        grpc_answer(st, GRPC_UNAVAILABLE, "no rate limit configuration: start tallyd with --rls-config");
        return;
    }
    if (!gate_enter(s)) {
        grpc_rls_req_free(&req);
        cmd_tokens_release(set);
        grpc_answer(st, GRPC_UNAVAILABLE, "tallyd is loading its data");
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
    bool ok = s->decide(s->rls, &ctx, &req.q, &res);
    uint64_t lsn = ctx.journal_lsn, pos = ctx.repl_pos;
    cmd_err_t e = ctx.err;
    cmd_ctx_end(&ctx);
    gate_leave(s);
    grpc_rls_req_free(&req);
    if (!ok) {
        cmd_tokens_release(set);
        grpc_answer(st, grpc_code_of(e.code), "%s", e.message);
        return;
    }
    const char *why = NULL;
    if (!durable(s, lsn, pos, &why)) {
        s->result_free(&res);
        cmd_tokens_release(set);
        grpc_answer(st, GRPC_UNAVAILABLE, "%s", why ? why : "the decision could not be made durable");
        return;
    }
    st->out = grpc_rls_encode(&res, &st->out_len);
    s->result_free(&res);
    cmd_tokens_release(set);
    if (!st->out)
        grpc_answer(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
    else
        grpc_answer(st, GRPC_OK, NULL);
}

/* The request ended: its one message, its call. */
static void call_run(gstream_t *st)
{
    if (st->answered)
        return;
    if (!st->post) {
        grpc_answer(st, GRPC_UNIMPLEMENTED, "gRPC calls are POST requests");
        return;
    }
    if (!st->grpc_ct) {
        grpc_answer(st, GRPC_INVALID_ARGUMENT, "content-type: a gRPC call is application/grpc");
        return;
    }
    if (st->call == CALL_UNKNOWN) {
        grpc_answer(st, GRPC_UNIMPLEMENTED, "unknown method %s", st->path);
        return;
    }
    if (st->deadline && clock_mono_ns() > st->deadline) {
        grpc_answer(st, GRPC_DEADLINE_EXCEEDED, "the call's grpc-timeout passed before it ran");
        return;
    }
    const uint8_t *msg = NULL;
    size_t mlen = 0;
    switch (grpc_frame_parse(st->body, st->len, GRPC_MAX_MESSAGE, &msg, &mlen)) {
    case GRPC_FRAME_ONE:
        break;
    case GRPC_FRAME_SHORT:
        grpc_answer(st, GRPC_INTERNAL, "truncated message: the body ends before the length its prefix gives");
        return;
    case GRPC_FRAME_EXTRA:
        grpc_answer(st, GRPC_INVALID_ARGUMENT, "a unary call carries exactly one message");
        return;
    case GRPC_FRAME_COMPRESSED:
        grpc_answer(st, GRPC_UNIMPLEMENTED, "compressed messages are not accepted (grpc-accept-encoding: identity)");
        return;
    case GRPC_FRAME_BAD_FLAG:
        grpc_answer(st, GRPC_INTERNAL, "the message's flag byte is neither 0 nor 1");
        return;
    case GRPC_FRAME_TOO_LARGE:
        grpc_answer(st, GRPC_RESOURCE_EXHAUSTED, "message larger than the limit of %u bytes", GRPC_MAX_MESSAGE);
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

void grpc_stream_free(gstream_t *st)
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
        grpc_answer(st, GRPC_RESOURCE_EXHAUSTED, "message larger than the limit of %u bytes", GRPC_MAX_MESSAGE);
        return 0;
    }
    if (st->len + len > st->cap) {
        size_t cap = st->cap ? st->cap : 256;
        while (cap < st->len + len)
            cap *= 2;
        if (c->bodies - st->cap + cap > CONN_BODIES) {
            grpc_answer(st, GRPC_RESOURCE_EXHAUSTED, "the connection holds %u bytes of messages already", CONN_BODIES);
            return 0;
        }
        uint8_t *p = realloc(st->body, cap);
        if (!p) {
            grpc_answer(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
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
        grpc_stream_free(st);
    }
    return 0;
}

bool grpc_calls_callbacks(nghttp2_session_callbacks **out)
{
    if (nghttp2_session_callbacks_new(out) != 0)
        return false;
    nghttp2_session_callbacks_set_on_begin_headers_callback(*out, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(*out, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(*out, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(*out, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(*out, on_stream_close);
    return true;
}
