/* redis_ref.c - see redis_ref.h.  A minimal RESP2 client: enough for tests. */
#include "tests/integration/redis_ref.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        fail_msg("free_port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

bool redis_ref_start(redis_ref_t *r)
{
    memset(r, 0, sizeof(*r));
    if (system("command -v redis-server >/dev/null 2>&1") != 0)
        return false;
    for (int attempt = 0; attempt < 5; attempt++) {
        tmpdir_make(r->dir, sizeof(r->dir));
        r->port = free_port();
        char port[16], log[300];
        snprintf(port, sizeof(port), "%d", r->port);
        snprintf(log, sizeof(log), "%s/redis.log", r->dir);
        pid_t pid = fork();
        if (pid == 0) {
            execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", r->dir, "--logfile", log, (char *)NULL);
            _exit(127);
        }
        r->pid = pid;
        for (int i = 0; i < 500; i++) {
            r->fd = connect_to(r->port);
            if (r->fd >= 0) {
                resp_t *p = redis_cmd(r, "PING", NULL);
                bool ok = p && p->kind == RESP_STRING;
                resp_free(p);
                if (ok)
                    return true;
                close(r->fd);
            }
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid)
                break;   /* port taken: retry */
            struct timespec ts = { 0, 10 * 1000000L };
            nanosleep(&ts, NULL);
        }
        redis_ref_stop(r);
    }
    fail_msg("redis-server did not start");
    return false;
}

void redis_ref_stop(redis_ref_t *r)
{
    if (r->fd > 0)
        close(r->fd);
    r->fd = -1;
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
    if (r->dir[0])
        tmpdir_remove(r->dir);
    r->dir[0] = '\0';
    free(r->rbuf);
    r->rbuf = NULL;
    r->rlen = r->rcap = r->roff = 0;
}

static void send_all(redis_ref_t *r, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(r->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail_msg("redis write: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
}

void redis_send(redis_ref_t *r, int argc, const char *const *argv, const size_t *lens)
{
    size_t cap = 64;
    for (int i = 0; i < argc; i++)
        cap += (lens ? lens[i] : strlen(argv[i])) + 32;
    char *buf = malloc(cap), *p = buf;
    p += sprintf(p, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        p += sprintf(p, "$%zu\r\n", l);
        memcpy(p, argv[i], l);
        p += l;
        *p++ = '\r';
        *p++ = '\n';
    }
    send_all(r, buf, (size_t)(p - buf));
    free(buf);
}

/* Ensures n bytes are buffered from roff. */
static void need(redis_ref_t *r, size_t n)
{
    while (r->rlen - r->roff < n) {
        if (r->roff > 0 && r->roff == r->rlen) {
            r->roff = r->rlen = 0;
        }
        if (r->rcap - r->rlen < 65536) {
            r->rcap = r->rcap * 2 + 65536;
            r->rbuf = realloc(r->rbuf, r->rcap);
        }
        ssize_t got = read(r->fd, r->rbuf + r->rlen, r->rcap - r->rlen);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            fail_msg("redis read: connection closed");
        r->rlen += (size_t)got;
    }
}

static char *read_line(redis_ref_t *r, size_t *len)
{
    for (size_t scan = 0;; scan++) {
        need(r, scan + 2);
        if (r->rbuf[r->roff + scan] == '\r' && r->rbuf[r->roff + scan + 1] == '\n') {
            char *s = strndup(r->rbuf + r->roff, scan);
            r->roff += scan + 2;
            *len = scan;
            return s;
        }
    }
}

resp_t *redis_read(redis_ref_t *r)
{
    need(r, 1);
    char type = r->rbuf[r->roff++];
    size_t len;
    char *line = read_line(r, &len);
    resp_t *v = calloc(1, sizeof(*v));
    switch (type) {
    case '+': v->kind = RESP_STRING; v->str = line; v->len = len; return v;
    case '-': v->kind = RESP_ERROR; v->str = line; v->len = len; return v;
    case ':': v->kind = RESP_INT; v->integer = strtoll(line, NULL, 10); break;
    case '$': {
        long long n = strtoll(line, NULL, 10);
        if (n < 0) {
            v->kind = RESP_NIL;
            break;
        }
        need(r, (size_t)n + 2);
        v->kind = RESP_BULK;
        v->str = malloc((size_t)n + 1);
        memcpy(v->str, r->rbuf + r->roff, (size_t)n);
        v->str[n] = '\0';
        v->len = (size_t)n;
        r->roff += (size_t)n + 2;
        break;
    }
    case '*': {
        long long n = strtoll(line, NULL, 10);
        if (n < 0) {
            v->kind = RESP_NIL;
            break;
        }
        v->kind = RESP_ARRAY;
        v->n = (size_t)n;
        v->elems = calloc((size_t)n + 1, sizeof(*v->elems));
        for (long long i = 0; i < n; i++)
            v->elems[i] = redis_read(r);
        break;
    }
    default:
        fail_msg("redis: unexpected reply type '%c'", type);
    }
    free(line);
    return v;
}

resp_t *redis_cmdv(redis_ref_t *r, int argc, const char *const *argv, const size_t *lens)
{
    redis_send(r, argc, argv, lens);
    return redis_read(r);
}

resp_t *redis_cmd(redis_ref_t *r, const char *arg0, ...)
{
    const char *argv[256];
    int argc = 0;
    argv[argc++] = arg0;
    va_list ap;
    va_start(ap, arg0);
    const char *a;
    while (argc < 255 && (a = va_arg(ap, const char *)))
        argv[argc++] = a;
    va_end(ap);
    return redis_cmdv(r, argc, argv, NULL);
}

void resp_free(resp_t *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++)
        resp_free(v->elems[i]);
    free(v->elems);
    free(v->str);
    free(v);
}
