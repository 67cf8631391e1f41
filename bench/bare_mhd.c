/*
 * bare_mhd.c - the reference for "how fast can libmicrohttpd answer at all":
 * the same daemon flags and thread pool as tallyd, answering every request
 * with a fixed JSON body of the size /throttle answers.  Reads and discards
 * any request body, like tallyd must.
 * Usage: bare_mhd PORT THREADS
 */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char BODY[] = "{\"allowed\":true,\"limit\":16,\"remaining\":15,\"retry_after\":-1,\"reset_after\":2,"
                           "\"retry_after_ms\":-1,\"reset_after_ms\":2000}";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
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

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bare_mhd PORT THREADS\n");
        return 2;
    }
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_TURBO,
                                            (uint16_t)atoi(argv[1]), NULL, NULL, on_request, NULL,
                                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)atoi(argv[2]),
                                            MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
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
