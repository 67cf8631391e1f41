/* server.c - see server.h. */
#include "service/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/log.h"
#include "service/metrics.h"

struct server {
    struct MHD_Daemon *d;
    api_server_t *api;
    server_hooks_t hooks;
    size_t body_limit;
    size_t max_url;
    int port;
    _Atomic bool ready;
    _Atomic bool closing;          /* shutting down: answer with Connection: close */
    _Atomic unsigned inflight;
};

/* Per-request state, created by the URI callback (the first thing MHD calls
 * for a request) and freed by the completion callback. */
typedef struct req_state {
    char *uri;                     /* raw request target as the client sent it */
    wbuf_t body;
    bool started;
    bool too_large;
    int64_t start_ns;
    /* A suspended request: its answer is computed or made durable on another
     * thread, which stores it here and resumes the connection. */
    server_t *server;
    struct MHD_Connection *conn;
    bool suspended;
    _Atomic bool answered;
    bool durable_ok;
    const char *durable_err;
    api_resp_t resp;
    char ip[INET6_ADDRSTRLEN];     /* the peer's address, once asked for */
} req_state_t;

/* ------------------------------------------------------------------------ */
/* MHD callbacks                                                            */
/* ------------------------------------------------------------------------ */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)c;
    server_t *s = cls;
    req_state_t *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->uri = strdup(uri);
    /* The router decodes the query string from this copy.  libmicrohttpd
     * would also parse it, into its per-connection memory pool, after this
     * callback returns: with a few hundred parameters the pool runs out and
     * the request is dropped unanswered.  Ending the string just after '?'
     * (in MHD's own read buffer, where it would write a NUL itself) leaves it
     * nothing to parse. */
    char *q = strchr(uri, '?');
    if (q && q[1])
        q[1] = '\0';
    st->start_ns = clock_mono_ns();
    atomic_fetch_add(&s->inflight, 1);
    return st;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    server_t *s = cls;
    req_state_t *st = *con_cls;
    if (!st)
        return;
    if (st->suspended)
        api_resp_release(&st->resp);
    free(st->uri);
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
    return MHD_lookup_connection_value(st->conn, MHD_HEADER_KIND, name);
}

static const char *client_ip_of(void *hctx)
{
    req_state_t *st = hctx;
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

static enum MHD_Result send_resp(server_t *s, struct MHD_Connection *c, req_state_t *st, api_resp_t *r)
{
    struct MHD_Response *mr = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    if (!mr)
        return MHD_NO;
    r->body = NULL;   /* MHD frees it */
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype ? r->ctype : "application/json");
    for (int i = 0; i < r->nheaders; i++)
        MHD_add_response_header(mr, r->headers[i].name, r->headers[i].value);
    if (atomic_load_explicit(&s->closing, memory_order_relaxed))
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, mr);
    MHD_destroy_response(mr);
    metrics_record(r->route_index, r->status, clock_mono_ns() - (st ? st->start_ns : 0));
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
        if (!st->uri)
            return MHD_NO;
        if (strlen(st->uri) > s->max_url)
            return send_error(s, c, st, API_E_URI_TOO_LONG, "the request URL is longer than the limit");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->body_limit) {
            char msg[96];
            snprintf(msg, sizeof(msg), "the request body is larger than the limit of %zu bytes", s->body_limit);
            return send_error(s, c, st, API_E_PAYLOAD_TOO_LARGE, msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!st->too_large) {
            if (st->body.len + *upload_size > s->body_limit) {
                st->too_large = true;
                wbuf_free(&st->body);
            } else {
                wbuf_put_bytes(&st->body, upload, *upload_size);
            }
        }
        *upload_size = 0;
        return MHD_YES;
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
    if (st->too_large) {
        char msg[96];
        snprintf(msg, sizeof(msg), "the request body is larger than the limit of %zu bytes", s->body_limit);
        return send_error(s, c, st, API_E_PAYLOAD_TOO_LARGE, msg);
    }
    if (st->body.oom)
        return send_error(s, c, st, API_E_OUT_OF_MEMORY, "out of memory reading the request body");

    api_req_t req;
    const char *q = strchr(st->uri, '?');
    api_req_init(&req, api_method_parse(method), st->uri, q ? (size_t)(q - st->uri) : strlen(st->uri),
                 clock_now_ns());
    if (q) {
        req.query = q + 1;
        /* a fragment is never sent by clients, but do not let one reach the router */
        req.query_len = strcspn(q + 1, "#");
    }
    req.ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    req.body = st->body.data;
    req.body_len = st->body.len;
    st->conn = c;
    req.header = header_of;
    req.client_ip = client_ip_of;
    req.hctx = st;

    api_resp_t resp;
    if (!atomic_load_explicit(&s->ready, memory_order_acquire) && !api_path_operational(req.path, req.path_len)) {
        return send_error(s, c, st, API_E_UNAVAILABLE, "not ready: loading data or shutting down");
    }
    api_dispatch(s->api, &req, &resp);
    api_req_release(&req);
    st->server = s;
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
        !(s->hooks.journal_try && s->hooks.journal_try(s->hooks.ud, resp.journal_lsn))) {
        /* suspend first: the journal may answer from its thread at once */
        suspend(st, c, &resp);
        if (s->hooks.journal_wait_async(s->hooks.ud, resp.journal_lsn, on_durable, st)) {
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
    s->body_limit = o->body_limit;
    s->max_url = o->max_url;

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
        free(s);
        return NULL;
    }
    /* The request line and headers must fit in MHD's per-connection pool.
     * MHD clears the pool between requests, so its size is paid per request:
     * keep it as small as the URL limit allows. */
    size_t conn_mem = o->max_url + 16 * 1024;
    if (conn_mem < 32 * 1024)
        conn_mem = 32 * 1024;
    /* the logger first, so MHD's complaints about later options reach it;
     * one thread is MHD's own epoll thread, not a pool of one */
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_THREAD_POOL_SIZE, o->threads > 1 ? (unsigned)o->threads : 0u,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->conn_timeout,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_mem,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
                            MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%d (address in use, or not permitted)", o->bind, o->port);
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
bool server_ready(const server_t *s) { return atomic_load(&s->ready); }
unsigned server_inflight(const server_t *s) { return atomic_load(&s->inflight); }

void server_quiesce(server_t *s)
{
    atomic_store(&s->closing, true);
    MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
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
    free(s);
}
