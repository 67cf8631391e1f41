/* front.c - see front.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/front.h"

int front_listen(const char *addr, int port, const char *flag, int *bound, char *err, size_t errlen)
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
        snprintf(err, errlen, "%s: cannot listen on %s:%d (%s)", flag, addr, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        *bound = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    return fd;
}

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

bool front_durable(const front_hooks_t *h, uint64_t lsn, uint64_t pos, const char **err)
{
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
