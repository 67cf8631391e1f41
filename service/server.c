/* server.c - see server.h; this file is the requests' side (their state,
 * their dispatch, suspended requests, the answers) and starting and
 * stopping the server.  Connections and their deadlines are server_conn.c's
 * (its opening comment: why tallyd tracks them, and how a request body is
 * answered on the socket while MHD reads it). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/respond.h"
#include "api/router.h"
#include "service/access_log.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/server_int.h"
#include "service/tls.h"

/* libmicrohttpd's per-connection pool (see server_start): the URL limit
 * plus this much for the headers, and never less than SERVER_POOL_MIN. */
#define SERVER_HEADER_ROOM (8 * 1024)
#define SERVER_POOL_MIN (16 * 1024)

/* Per-request state, created by the URI callback (the first thing MHD calls
 * for a request) and freed by the completion callback. */
typedef struct req_state {
    char *uri;                     /* raw request target as the client sent it (stored after the struct) */
    size_t uri_len;
    size_t path_len;               /* of the path: up to its '?', or all of it */
    wbuf_t body;
    bool started;
    bool close;                    /* answer with Connection: close */
    int64_t start_ns;
    /* A suspended request: its answer is computed or made durable on another
     * thread, which stores it here and resumes the connection. */
    server_t *server;
    struct MHD_Connection *conn;
    conn_t *k;                     /* its connection's tracking (NULL: untracked, out of memory) */
    bool suspended;
    _Atomic bool answered;
    bool durable_ok;
    const char *durable_err;
    char ip[INET6_ADDRSTRLEN];     /* the peer's address, once asked for */
    char client[INET6_ADDRSTRLEN + 16]; /* the client's address (core/cidr.h), once asked for */
    char method[16];               /* for the access log */
    /* Request headers taken in the one pass over them (scan_header), in
     * MHD's pool: the Content-Type, and the two every request's guard
     * (api/guard.h) asks header_of for, so it needs no lookup of its own. */
    bool scanned;
    const char *ctype, *host, *origin;
    /* last and not cleared at creation (its header array is large): set
     * only when the request is suspended */
    api_resp_t resp;
} req_state_t;

/* ------------------------------------------------------------------------ */
/* MHD callbacks                                                            */
/* ------------------------------------------------------------------------ */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    server_t *s = cls;
    int64_t now = clock_mono_ns();
    conn_t *k = conn_of(c);
    conn_set(k, CONN_HEAD, now);
    size_t ulen = strlen(uri);
    req_state_t *st = malloc(sizeof(*st) + ulen + 1);   /* the URI copy follows the state */
    if (!st)
        return NULL;
    memset(st, 0, offsetof(req_state_t, resp));
    st->k = k;
    st->uri = memcpy((char *)(st + 1), uri, ulen + 1);
    st->uri_len = ulen;
    /* The router decodes the query string from this copy.  libmicrohttpd
     * would also parse it, into its per-connection memory pool, after this
     * callback returns: with a few hundred parameters the pool runs out and
     * the request is dropped unanswered.  Ending the string just after '?'
     * (in MHD's own read buffer, where it would write a NUL itself) leaves it
     * nothing to parse. */
    char *q = memchr(uri, '?', ulen);
    st->path_len = q ? (size_t)(q - uri) : ulen;
    if (q && q[1])
        q[1] = '\0';
    st->start_ns = now;
    atomic_fetch_add(&s->inflight, 1);
    return st;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    server_t *s = cls;
    req_state_t *st = *con_cls;
    conn_set(st ? st->k : conn_of(c), CONN_IDLE, clock_mono_coarse_ns());
    if (!st)
        return;
    if (st->suspended)
        api_resp_release(&st->resp);
    wbuf_free(&st->body);
    free(st);
    *con_cls = NULL;
    atomic_fetch_sub(&s->inflight, 1);
}

/* The URI is decoded by the router (segment by segment), never by MHD. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static const char *header_of(void *hctx, const char *name)
{
    const req_state_t *st = hctx;
    if (st->scanned) {   /* what scan_header kept: the first of each, as MHD's lookup gives */
        if ((name[0] | 0x20) == 'h' && strcasecmp(name, MHD_HTTP_HEADER_HOST) == 0)
            return st->host;
        if ((name[0] | 0x20) == 'o' && strcasecmp(name, MHD_HTTP_HEADER_ORIGIN) == 0)
            return st->origin;
    }
    return MHD_lookup_connection_value(st->conn, MHD_HEADER_KIND, name);
}

static const char *peer_ip_of(req_state_t *st)
{
    if (st->ip[0])
        return st->ip;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(st->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return NULL;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, st->ip, sizeof(st->ip));
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, st->ip, sizeof(st->ip));
    return st->ip[0] ? st->ip : NULL;
}

/* The client's address: the peer's, or what a --trusted-proxies peer's
 * X-Forwarded-For / X-Real-IP say (core/cidr.h). */
static const char *client_ip_of(void *hctx)
{
    req_state_t *st = hctx;
    if (st->client[0])
        return st->client;
    const char *peer = peer_ip_of(st);
    const char *xff = header_of(st, "X-Forwarded-For"), *real_ip = header_of(st, "X-Real-IP");
    size_t n = 0;
    const char *v = cidr_client_addr(&st->server->trusted, peer, xff, real_ip, &n);
    if (!v)
        return NULL;
    if (v == peer) {
        static _Atomic bool warned;   /* once: a gateway recipe without --trusted-proxies */
        if ((xff || real_ip) && !atomic_exchange(&warned, true))
            log_warn("{ip}: ignoring X-Forwarded-For/X-Real-IP from %s, which is not in --trusted-proxies; "
                     "keying by the peer address (start tallyd with --trusted-proxies <your proxies> "
                     "when a gateway sends them)", peer ? peer : "?");
        return peer;
    }
    snprintf(st->client, sizeof(st->client), "%.*s", (int)n, v);
    return st->client;
}

static enum MHD_Result send_resp(server_t *s, struct MHD_Connection *c, req_state_t *st, api_resp_t *r)
{
    struct MHD_Response *mr = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    if (!mr)
        return MHD_NO;
    r->body = NULL;   /* MHD frees it */
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype ? r->ctype : "application/json");
    for (int i = 0; i < r->nheaders; i++)
        MHD_add_response_header(mr, r->headers[i].name, r->headers[i].value);
    if (atomic_load_explicit(&s->closing, memory_order_relaxed) || over_cap(s) || (st && st->close))
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, mr);
    MHD_destroy_response(mr);
    int64_t took = clock_mono_ns() - (st ? st->start_ns : 0);
    metrics_record(r->route_index, r->status, took);
    if (st && st->uri && access_log_enabled()) {
        st->conn = c;
        access_log_write_refused(clock_now_ns(), client_ip_of(st), r->token_name[0] ? r->token_name : NULL,
                                 st->method[0] ? st->method : "-", st->uri, strcspn(st->uri, "?#"), r->status, took,
                                 r->violated);
    }
    return ret;
}

static enum MHD_Result send_error(server_t *s, struct MHD_Connection *c, req_state_t *st, api_code_t code,
                                  const char *msg)
{
    api_resp_t r;
    api_resp_init(&r);
    api_error(&r, code, "%s", msg);
    enum MHD_Result ret = send_resp(s, c, st, &r);
    api_resp_release(&r);
    return ret;
}

/* ------------------------------------------------------------------------ */
/* Suspended requests                                                       */
/* ------------------------------------------------------------------------ */

/* Called (from any thread) once a suspended request's answer is ready. */
static void answer_ready(req_state_t *st)
{
    atomic_store_explicit(&st->answered, true, memory_order_release);
    MHD_resume_connection(st->conn);
}

static void on_durable(void *ud, bool ok, const char *err)
{
    req_state_t *st = ud;
    st->durable_ok = ok;
    st->durable_err = err;
    answer_ready(st);
}

static void *deferred_main(void *arg)
{
    req_state_t *st = arg;
    st->resp.deferred(st->server->api, &st->resp);
    st->resp.deferred = NULL;
    st->durable_ok = true;
    answer_ready(st);
    return NULL;
}

static void not_durable(api_resp_t *resp, const char *err)
{
    int route = resp->route_index;
    api_error(resp, API_E_UNAVAILABLE, "the change could not be made durable: %s", err ? err : "journal unavailable");
    resp->route_index = route;
}

/* Suspends the connection until another thread fills st->resp. */
static enum MHD_Result suspend(req_state_t *st, struct MHD_Connection *c, api_resp_t *resp)
{
    st->resp = *resp;
    st->conn = c;
    st->suspended = true;
    MHD_suspend_connection(c);
    return MHD_YES;
}

/* The request headers the server itself reads, taken in one pass over the
 * headers (a lookup each would walk the list again): the first of each
 * (as MHD_lookup_connection_value gives), and whether two Content-Length
 * headers differ.  The values live in MHD's pool until the request ends. */
struct head_scan {
    const char *cl, *te, *expect, *ctype, *host, *origin;
    bool cl_differ;
};

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size)
{
    (void)kind;
    (void)value_size;
    struct head_scan *h = cls;
    const char **slot = NULL;
    switch (key_size) {
    case sizeof(MHD_HTTP_HEADER_CONTENT_LENGTH) - 1:
        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
            if (h->cl && strcmp(h->cl, value) != 0)
                h->cl_differ = true;
            slot = &h->cl;
        }
        break;
    case sizeof(MHD_HTTP_HEADER_TRANSFER_ENCODING) - 1:
        if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
            slot = &h->te;
        break;
    case sizeof(MHD_HTTP_HEADER_EXPECT) - 1:   /* and Origin */
        if (strcasecmp(key, MHD_HTTP_HEADER_EXPECT) == 0)
            slot = &h->expect;
        else if (strcasecmp(key, MHD_HTTP_HEADER_ORIGIN) == 0)
            slot = &h->origin;
        break;
    case sizeof(MHD_HTTP_HEADER_HOST) - 1:
        if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
            slot = &h->host;
        break;
    case sizeof(MHD_HTTP_HEADER_CONTENT_TYPE) - 1:
        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_TYPE) == 0)
            slot = &h->ctype;
        break;
    default:
        break;
    }
    if (slot && !*slot)
        *slot = value;
    return MHD_YES;
}

/* Request framing a proxy in front could read differently (request
 * smuggling), or that would leave the connection waiting: two different
 * Content-Length headers, a Transfer-Encoding other than chunked. */
static const char *framing_error(const struct head_scan *h)
{
    if (h->cl_differ)
        return "the request has two different Content-Length headers";
    if (h->te && strcasecmp(h->te, "chunked") != 0)
        return "Transfer-Encoding other than chunked is not supported (send the body as is, or chunked)";
    if (h->te && h->cl)
        return "the request has both Transfer-Encoding and Content-Length";
    return NULL;
}

/* This thread's slot of s->busy, handed out on its first request. */
static busy_slot_t *busy_slot(server_t *s)
{
    static _Thread_local server_t *owner;
    static _Thread_local busy_slot_t *slot;
    if (owner != s) {
        slot = &s->busy[atomic_fetch_add(&s->nbusy, 1) % BUSY_SLOTS];
        owner = s;
    }
    return slot;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)url;
    (void)version;
    server_t *s = cls;
    req_state_t *st = *con_cls;
    if (!st)
        return MHD_NO;   /* allocation failed in on_uri: drop the connection */

    if (!st->started) {
        st->started = true;
        size_t mlen = strnlen(method, sizeof(st->method) - 1);   /* for the access log; longer ones cut */
        memcpy(st->method, method, mlen);
        st->method[mlen] = '\0';
        conn_set(st->k, CONN_BUSY, 0);
        if (!st->uri)
            return MHD_NO;
        struct head_scan h = { NULL, NULL, NULL, NULL, NULL, NULL, false };
        MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_header, &h);
        st->ctype = h.ctype;
        st->host = h.host;
        st->origin = h.origin;
        st->scanned = true;
        const char *cl = h.cl, *te = h.te;
        const char *why = framing_error(&h);
        if (why) {
            st->close = true;   /* the rest of the stream cannot be trusted */
            return send_error(s, c, st, API_E_BAD_REQUEST, why);
        }
        if (st->uri_len > s->max_url)
            return send_error(s, c, st, API_E_URI_TOO_LONG, "the request URL is longer than the limit");
        unsigned long long clen = cl ? strtoull(cl, NULL, 10) : 0;
        if (clen > s->body_limit) {
            char msg[96];
            snprintf(msg, sizeof(msg), "the request body is larger than the limit of %zu bytes", s->body_limit);
            return send_error(s, c, st, API_E_PAYLOAD_TOO_LARGE, msg);
        }
        /* a body is coming: its progress is watched (with Expect:
         * 100-continue, from its first bytes, after MHD's interim answer) */
        conn_t *k = st->k;
        if (k && (te || clen > 0) && !h.expect)
            conn_claim(k, CONN_BUSY, CONN_BODY);
        return MHD_YES;
    }
    if (*upload_size) {
        conn_t *k = st->k;
        bool answered = k && atomic_load(&k->state) == CONN_DONE;
        if (k && !answered && !conn_claim(k, CONN_BODY, CONN_BODY))   /* progress: the stall deadline restarts */
            conn_claim(k, CONN_BUSY, CONN_BODY);                      /* the first bytes after 100 Continue */
        if (!answered && st->body.len + *upload_size > s->body_limit) {
            /* only a chunked body gets here (a Content-Length over the limit
             * was answered before the body): answer now, not at its end */
            wbuf_free(&st->body);
            if (!k)
                return MHD_NO;   /* untracked (out of memory): just close */
            if (conn_claim(k, CONN_BODY, CONN_DONE)) {
                char msg[96];
                snprintf(msg, sizeof(msg), "the request body is larger than the limit of %zu bytes", s->body_limit);
                server_conn_answer(s, k->fd, API_E_PAYLOAD_TOO_LARGE, msg);
            }
        } else if (!answered) {
            wbuf_put_bytes(&st->body, upload, *upload_size);
        }
        *upload_size = 0;   /* after an answer on the socket: read and dropped */
        return MHD_YES;
    }
    {
        /* the whole request is here: MHD answers it, unless tallyd already
         * did on the socket (then the connection ends) */
        conn_t *k = st->k;
        if (k && !st->suspended && !conn_claim(k, CONN_BODY, CONN_BUSY) &&
            atomic_load(&k->state) == CONN_DONE)
            return MHD_NO;
    }
    if (st->suspended) {
        if (!atomic_load_explicit(&st->answered, memory_order_acquire))
            return MHD_YES;   /* not ours to answer yet */
        if (!st->durable_ok)
            not_durable(&st->resp, st->durable_err);
        st->suspended = false;
        enum MHD_Result ret = send_resp(s, c, st, &st->resp);
        api_resp_release(&st->resp);
        return ret;
    }
    if (st->body.oom)
        return send_error(s, c, st, API_E_OUT_OF_MEMORY, "out of memory reading the request body");

    api_req_t req;
    const char *q = st->path_len < st->uri_len ? st->uri + st->path_len : NULL;   /* its '?' */
    api_req_init(&req, api_method_parse(method), st->uri, st->path_len, clock_now_ns());
    if (q) {
        req.query = q + 1;
        /* a fragment is never sent by clients, but do not let one reach the router */
        req.query_len = strcspn(q + 1, "#");
    }
    req.ctype = st->ctype;
    req.body = st->body.data;
    req.body_len = st->body.len;
    st->conn = c;
    req.header = header_of;
    req.client_ip = client_ip_of;
    req.hctx = st;
    st->server = s;

    api_resp_t resp;
    /* the gate (server_set_loading): counted in before the flags are read,
     * so a loader that saw no one counted knows every later request sees
     * its flag.  While it is closed, the operational routes still run, not
     * counted: nothing waits for them (/info may wait for the loader). */
    busy_slot_t *slot = busy_slot(s);
    atomic_fetch_add(&slot->n, 1);
    if (!atomic_load(&s->ready) || atomic_load(&s->loading)) {
        atomic_fetch_sub(&slot->n, 1);
        if (!api_path_operational(req.path, req.path_len)) {
            if (!atomic_load(&s->ready)) {
                api_req_release(&req);
                return send_error(s, c, st, API_E_UNAVAILABLE, "not ready: loading data or shutting down");
            }
            req.loading = true;   /* routed and refused without the keyspace (a change: 421) */
        }
        slot = NULL;
    }
    api_dispatch(s->api, &req, &resp);
    if (slot)
        atomic_fetch_sub_explicit(&slot->n, 1, memory_order_release);
    api_req_release(&req);
    if (resp.deferred) {
        /* slow work runs on its own thread; this worker keeps serving */
        suspend(st, c, &resp);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, deferred_main, st) != 0) {
            st->resp.deferred = NULL;
            api_error(&st->resp, API_E_INTERNAL, "cannot start a thread for this request");
            st->durable_ok = true;
            answer_ready(st);
        }
        pthread_attr_destroy(&attr);
        return MHD_YES;
    }
    if (resp.journal_lsn && s->hooks.journal_wait_async &&
        !(s->hooks.journal_try && s->hooks.journal_try(s->hooks.ud, resp.journal_lsn, resp.repl_pos))) {
        /* suspend first: the journal may answer from its thread at once */
        suspend(st, c, &resp);
        if (s->hooks.journal_wait_async(s->hooks.ud, resp.journal_lsn, resp.repl_pos, on_durable, st)) {
            st->durable_ok = true;
            answer_ready(st);
        }
        return MHD_YES;
    }
    if (resp.journal_lsn && !s->hooks.journal_wait_async && s->hooks.journal_wait) {
        const char *err = NULL;
        if (!s->hooks.journal_wait(s->hooks.ud, resp.journal_lsn, &err))
            not_durable(&resp, err);
    }
    enum MHD_Result ret = send_resp(s, c, st, &resp);
    api_resp_release(&resp);
    return ret;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */
/* ------------------------------------------------------------------------ */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    log_debug("http: %s", msg);
}

server_t *server_start(const tally_opts_t *o, api_server_t *api, const server_hooks_t *hooks, char *err,
                       size_t errlen)
{
    server_t *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->api = api;
    s->hooks = *hooks;
    s->quiesced = MHD_INVALID_SOCKET;
    s->body_limit = o->body_limit;
    s->max_url = o->max_url;
    pthread_mutex_init(&s->conn_mu, NULL);
    s->max_conns = (unsigned)o->max_connections;
    s->max_per_ip = o->max_conn_per_ip ? (unsigned)o->max_conn_per_ip
                                       : (o->max_connections > 1 ? (unsigned)o->max_connections / 2 : 1u);
    s->header_timeout_ns = (int64_t)o->header_timeout * 1000000000LL;

    if (!cidr_parse(o->trusted_proxies, &s->trusted, err, errlen)) {
        pthread_mutex_destroy(&s->conn_mu);
        free(s);
        return NULL;
    }
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    struct sockaddr *addr;
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_USE_TURBO |
                     MHD_ALLOW_SUSPEND_RESUME;
    memset(&a4, 0, sizeof(a4));
    memset(&a6, 0, sizeof(a6));
    if (inet_pton(AF_INET, o->bind, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)o->port);
        addr = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, o->bind, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)o->port);
        addr = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--bind: '%s' is not an IPv4 or IPv6 address", o->bind);
        cidr_set_free(&s->trusted);
        pthread_mutex_destroy(&s->conn_mu);
        free(s);
        return NULL;
    }
    /* The request line and headers must fit in MHD's per-connection pool,
     * with its bookkeeping (a header entry per header, the answer's head).
     * libmicrohttpd 0.9.75 zeroes the whole pool before every request of a
     * keep-alive connection (MHD_pool_reset), so its size is paid on every
     * request: it is the URL limit plus SERVER_HEADER_ROOM for the headers
     * (more when the URL is shorter), at least SERVER_POOL_MIN.  A head
     * that does not fit gets libmicrohttpd's 414 or 431. */
    size_t conn_mem = o->max_url + SERVER_HEADER_ROOM;
    if (conn_mem < SERVER_POOL_MIN)
        conn_mem = SERVER_POOL_MIN;
    /* the logger first, so MHD's complaints about later options reach it;
     * one thread is MHD's own epoll thread, not a pool of one */
    s->conn_mem = conn_mem;
    /* MHD accepts a headroom above the cap: over the cap, idle connections
     * are closed and answers carry Connection: close (server_tick) */
    unsigned headroom = 64 + s->max_conns / 16;
    /* HTTPS only, never both on one port: the credentials come from
     * service/tls.h for each handshake */
    s->tls = o->tls_cert[0] != '\0';
    struct MHD_OptionItem tls_opts[] = {
        { MHD_OPTION_HTTPS_CERT_CALLBACK, 0, tls_cert_callback() },
        { MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TALLY_TLS_PRIORITIES },
        { MHD_OPTION_END, 0, NULL },
    };
    if (s->tls)
        flags |= MHD_USE_TLS;
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, server_on_accept, s, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_THREAD_POOL_SIZE, o->threads > 1 ? (unsigned)o->threads : 0u,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->conn_timeout,
                            MHD_OPTION_CONNECTION_LIMIT, s->max_conns + headroom,
                            MHD_OPTION_NOTIFY_CONNECTION, server_on_connection, s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_mem,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
                            MHD_OPTION_ARRAY, s->tls ? tls_opts : &tls_opts[2],
                            MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%d (address in use, or not permitted%s)", o->bind, o->port,
                 s->tls ? ", or TLS could not be set up" : "");
        cidr_set_free(&s->trusted);
        pthread_mutex_destroy(&s->conn_mu);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    return s;
}

int server_port(const server_t *s) { return s->port; }
void server_set_hooks(server_t *s, const server_hooks_t *hooks) { s->hooks = *hooks; }
void server_set_ready(server_t *s, bool ready) { atomic_store(&s->ready, ready); }
bool server_ready(const server_t *s) { return atomic_load(&s->ready) && !atomic_load(&s->loading); }

void server_set_loading(server_t *s, bool loading)
{
    atomic_store(&s->loading, loading);
    if (!loading)
        return;
    /* every request that passed the gate before the flag was set finishes
     * its dispatch; each slot is seen empty once (a request counted in
     * after that sees the flag).  The caller holds nothing such a request
     * may wait for. */
    for (unsigned i = 0; i < BUSY_SLOTS; i++)
        while (atomic_load(&s->busy[i].n) != 0)
            sched_yield();
}
unsigned server_inflight(const server_t *s) { return atomic_load(&s->inflight); }

/* The listening socket stops listening at once: a client connecting now is
 * refused rather than left in the backlog until exit.  It is shut down, not
 * closed: MHD's worker threads may still take it out of their epoll sets
 * (libmicrohttpd: with internal threads the socket must stay open until
 * MHD_stop_daemon), and a closed descriptor's number could meanwhile be
 * reused by a connection or a file.  server_stop closes it. */
void server_quiesce(server_t *s)
{
    atomic_store(&s->closing, true);
    if (s->quiesced != MHD_INVALID_SOCKET)
        return;
    s->quiesced = MHD_quiesce_daemon(s->d);
    if (s->quiesced != MHD_INVALID_SOCKET)
        shutdown(s->quiesced, SHUT_RDWR);
}

bool server_drain(server_t *s, int timeout_s)
{
    int64_t deadline = clock_mono_ns() + (int64_t)timeout_s * 1000000000LL;
    while (atomic_load(&s->inflight) > 0) {
        if (clock_mono_ns() >= deadline)
            return false;
        usleep(2000);
    }
    return true;
}

void server_stop(server_t *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    if (s->quiesced != MHD_INVALID_SOCKET)
        close(s->quiesced);
    server_conns_free(s);
    cidr_set_free(&s->trusted);
    pthread_mutex_destroy(&s->conn_mu);
    free(s);
}
