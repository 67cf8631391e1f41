/*
 * bare_mhd.c - the references for "how fast can libmicrohttpd answer at
 * all", with the same daemon flags and thread pool as tallyd.
 *
 *   fixed   answers every request with a constant JSON body of the size
 *           /throttle answers (and reads and drops any request body);
 *   honest  does what any real /throttle handler must, and nothing more:
 *           keeps the request body, looks up its Content-Type, takes a
 *           per-request state that is freed when the request completes,
 *           and answers a body and the five RateLimit headers formatted
 *           for this request (the numbers vary), like tallyd's answer.
 *
 * The gap between tallyd and `honest` is tallyd's own work: routing,
 * parsing, the decision, the journal, metrics.
 * Usage: bare_mhd PORT THREADS [fixed|honest [POOL]]   (fixed by default)
 * POOL: MHD_OPTION_CONNECTION_MEMORY_LIMIT in bytes (libmicrohttpd's
 * default, 32 KiB, if absent), to compare with tallyd at the same pool size.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char BODY[] = "{\"allowed\":true,\"limit\":16,\"remaining\":15,\"retry_after\":-1,\"reset_after\":2,"
                           "\"retry_after_ms\":-1,\"reset_after_ms\":2000}";

static enum MHD_Result on_fixed(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)cls; (void)url; (void)method; (void)version; (void)upload;
    if (!*con_cls) {
        *con_cls = (void *)1;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(sizeof(BODY) - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* The honest handler's per-request state: the body as it arrives. */
typedef struct {
    char body[1024];
    size_t len;
} honest_req_t;

/* varies the numbers, as a real decision does */
static unsigned long counter;

static enum MHD_Result on_honest(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)cls; (void)url; (void)method; (void)version;
    honest_req_t *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof(*st));
        *con_cls = st;
        return st ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        size_t n = *upload_size < sizeof(st->body) - st->len ? *upload_size : sizeof(st->body) - st->len;
        memcpy(st->body + st->len, upload, n);
        st->len += n;
        *upload_size = 0;
        return MHD_YES;
    }
    const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    int remaining = (int)(n % 16), reset = (int)(n % 7) + (ctype != NULL) + (st->len > 0);
    char *body = malloc(160);
    if (!body)
        return MHD_NO;
    int len = snprintf(body, 160, "{\"allowed\":true,\"limit\":16,\"remaining\":%d,\"retry_after\":-1,\"reset_after\":%d,"
                       "\"retry_after_ms\":-1,\"reset_after_ms\":%d}", remaining, reset, reset * 1000);
    struct MHD_Response *r = MHD_create_response_from_buffer((size_t)len, body, MHD_RESPMEM_MUST_FREE);
    char v[5][64];
    snprintf(v[0], sizeof(v[0]), "%d", 16);
    snprintf(v[1], sizeof(v[1]), "%d", remaining);
    snprintf(v[2], sizeof(v[2]), "%d", reset);
    snprintf(v[3], sizeof(v[3]), "\"default\";q=%d;w=%d", 16, 32);
    snprintf(v[4], sizeof(v[4]), "\"default\";r=%d;t=%d", remaining, reset);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, "RateLimit-Limit", v[0]);
    MHD_add_response_header(r, "RateLimit-Remaining", v[1]);
    MHD_add_response_header(r, "RateLimit-Reset", v[2]);
    MHD_add_response_header(r, "RateLimit-Policy", v[3]);
    MHD_add_response_header(r, "RateLimit", v[4]);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls; (void)c; (void)toe;
    if (cls)
        free(*con_cls);
    *con_cls = NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (argc > 3 && strcmp(argv[3], "fixed") != 0 && strcmp(argv[3], "honest") != 0)) {
        fprintf(stderr, "usage: bare_mhd PORT THREADS [fixed|honest [POOL]]\n");
        return 2;
    }
    bool honest = argc > 3 && strcmp(argv[3], "honest") == 0;
    unsigned threads = (unsigned)atoi(argv[2]);
    size_t pool = argc > 4 ? (size_t)strtoul(argv[4], NULL, 10) : 0;
    struct sockaddr_in a;   /* 127.0.0.1, as tallyd binds by default */
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)atoi(argv[1]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_TURBO,
                                            (uint16_t)atoi(argv[1]), NULL, NULL, honest ? on_honest : on_fixed,
                                            NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
                                            MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 0u,
                                            MHD_OPTION_CONNECTION_TIMEOUT, 60u,
                                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool ? pool : (size_t)32 * 1024,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, honest ? (void *)1 : NULL,
                                            MHD_OPTION_END);
    if (!d) {
        perror("MHD_start_daemon");
        return 1;
    }
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigprocmask(SIG_BLOCK, &s, NULL);
    int sig;
    sigwait(&s, &sig);
    MHD_stop_daemon(d);
    return 0;
}
