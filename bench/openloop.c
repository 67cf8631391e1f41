/*
 * openloop.c - an open-loop HTTP load generator for latency at a fixed rate.
 *
 * wrk measures throughput with closed loops (a connection sends its next
 * request when the previous one answers), which hides queueing delay.  To
 * check "p99 <= 1 ms at half of peak throughput", requests must be sent on a
 * fixed schedule whatever the server does, and each latency counted from the
 * instant the request was *due* (correcting coordinated omission).
 *
 * Usage: openloop PORT RATE SECONDS CONNS KIND [WARMUP]
 *   KIND: throttle_post | throttle_get | hook_get | limiter_post | policy_post | healthz
 *   (hook_get: GET /hook/bench/<n>, the policy of suite_10; limiter_post:
 *   POST /throttle with the token bucket; policy_post: POST /throttle naming
 *   the policy "bench" with a key of its own; a fixed number
 *   of requests at a rate far above a server's capacity is also how
 *   bench/callgrind.sh drives a server under valgrind)
 * WARMUP: seconds sent at the same rate before SECONDS, not counted (fresh
 * connections and a cold server stall their first requests; default 0).
 * Prints: "rate <achieved>/s p50 <ms> p90 <ms> p99 <ms> p999 <ms> max <ms> errors <n>".
 *
 * OL_SLOW=FILE also writes every counted request slower than 0.3 ms to FILE,
 * one line each in the order they were due: "<due, seconds after the
 * measured part began> <latency ms>".  bench/stalls.sh groups them into the
 * stalls that caused them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/rng.h"

typedef struct conn {
    int fd;
    bool busy;
    int64_t due_ns;          /* when the in-flight request was due */
    bool counted;            /* due after the warm-up */
    char out[512];
    size_t out_len, out_off;
    char in[8192];
    size_t in_len;
} conn_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

static void build(conn_t *c, const char *kind, rng_t *r)
{
    unsigned k = (unsigned)rng_below(r, 100000) + 1;
    if (!strcmp(kind, "throttle_post")) {
        char body[160];
        int bl = snprintf(body, sizeof(body),
                          "{\"key\":\"user:%u\",\"max_burst\":15,\"count_per_period\":30,\"period\":60}", k);
        c->out_len = (size_t)snprintf(c->out, sizeof(c->out),
                                      "POST /throttle HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %d\r\n\r\n%s",
                                      bl, body);
    } else if (!strcmp(kind, "throttle_get")) {
        c->out_len = (size_t)snprintf(c->out, sizeof(c->out),
                                      "GET /throttle/user:%u?max_burst=15&count_per_period=30&period=60 HTTP/1.1\r\n"
                                      "Host: localhost\r\n\r\n",
                                      k);
    } else if (!strcmp(kind, "limiter_post") || !strcmp(kind, "policy_post")) {
        char body[160];
        int bl = !strcmp(kind, "limiter_post")
                     ? snprintf(body, sizeof(body),
                                "{\"key\":\"user:%u\",\"algorithm\":\"token_bucket\",\"capacity\":15,"
                                "\"refill_rate\":0.5}",
                                k)
                     : snprintf(body, sizeof(body), "{\"policy\":\"bench\",\"key\":\"user:%u\"}", k);
        c->out_len = (size_t)snprintf(c->out, sizeof(c->out),
                                      "POST /throttle HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %d\r\n\r\n%s",
                                      bl, body);
    } else if (!strcmp(kind, "hook_get")) {
        c->out_len = (size_t)snprintf(c->out, sizeof(c->out), "GET /hook/bench/%u HTTP/1.1\r\nHost: localhost\r\n\r\n", k);
    } else {
        c->out_len = (size_t)snprintf(c->out, sizeof(c->out), "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
    }
    c->out_off = 0;
}

/* A complete response in c->in?  Returns its length or 0. */
static size_t complete(const conn_t *c)
{
    const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - c->in) + 4;
    const char *cl = memmem(c->in, head, "Content-Length:", 15);
    if (!cl)
        cl = memmem(c->in, head, "content-length:", 15);
    size_t body = cl ? (size_t)strtoul(cl + 15, NULL, 10) : 0;
    return c->in_len >= head + body ? head + body : 0;
}

/* OL_SLOW: the requests slower than 0.3 ms, by due time (answers arrive in
 * about the order they were due; sort -g orders the rest). */
static bool write_slow(const char *path, const int64_t *due, const int64_t *lat, size_t n, int64_t from)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (lat[i] > 300000)
            fprintf(f, "%.6f %.3f\n", (double)(due[i] - from) / 1e9, (double)lat[i] / 1e6);
    return fclose(f) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: openloop PORT RATE SECONDS CONNS KIND [WARMUP]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    double rate = atof(argv[2]);
    double secs = atof(argv[3]);
    int nconn = atoi(argv[4]);
    const char *kind = argv[5];
    size_t warm = argc > 6 ? (size_t)(rate * atof(argv[6])) : 0;
    size_t total = (size_t)(rate * secs), all = warm + total;
    int64_t *lat = malloc(total * sizeof(*lat));
    int64_t *due = malloc(total * sizeof(*due));   /* when each counted request was due */
    conn_t *conns = calloc((size_t)nconn, sizeof(*conns));
    int ep = epoll_create1(0);
    for (int i = 0; i < nconn; i++) {
        conns[i].fd = dial(port);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    rng_t r;
    rng_seed(&r, 7);
    int64_t start = now_ns() + 10000000;
    double interval = 1e9 / rate;
    size_t sent = 0, done = 0, errors = 0;
    int64_t measured_from = start + (int64_t)((double)warm * interval);
    int idle_hint = 0;
    while (done < total) {
        int64_t t = now_ns();
        /* send everything that is due, on idle connections */
        while (sent < all && start + (int64_t)((double)sent * interval) <= t) {
            int ci = -1;
            for (int k = 0; k < nconn; k++) {
                int i = (idle_hint + k) % nconn;
                if (!conns[i].busy) {
                    ci = i;
                    break;
                }
            }
            if (ci < 0)
                break;   /* all busy: the request waits (its latency keeps counting from due) */
            idle_hint = ci + 1;
            conn_t *c = &conns[ci];
            build(c, kind, &r);
            c->busy = true;
            c->due_ns = start + (int64_t)((double)sent * interval);
            c->counted = sent >= warm;
            c->in_len = 0;
            ssize_t w = write(c->fd, c->out, c->out_len);
            if (w != (ssize_t)c->out_len) {
                fprintf(stderr, "openloop: short write\n");
                return 1;
            }
            sent++;
        }
        struct epoll_event evs[64];
        int64_t next_due = sent < all ? start + (int64_t)((double)sent * interval) : t + 1000000;
        int timeout = next_due > t ? (int)((next_due - t) / 1000000) : 0;
        int n = epoll_wait(ep, evs, 64, timeout);
        for (int e = 0; e < n; e++) {
            conn_t *c = &conns[evs[e].data.u32];
            ssize_t got = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN)
                    continue;
                fprintf(stderr, "openloop: connection closed by the server\n");
                return 1;
            }
            c->in_len += (size_t)got;
            size_t len = complete(c);
            if (len && c->busy) {
                if (strncmp(c->in, "HTTP/1.1 2", 10) != 0 && strncmp(c->in, "HTTP/1.1 429", 12) != 0)
                    errors++;
                if (c->counted) {
                    due[done] = c->due_ns;
                    lat[done++] = now_ns() - c->due_ns;
                }
                c->busy = false;
                c->in_len = 0;
            }
        }
    }
    double elapsed = (double)(now_ns() - measured_from) / 1e9;
    const char *slow = getenv("OL_SLOW");
    if (slow && !write_slow(slow, due, lat, total, measured_from))
        return 1;
    qsort(lat, total, sizeof(*lat), cmp_i64);
#define PCT(p) ((double)lat[(size_t)((double)(total - 1) * (p))] / 1e6)
    printf("rate %.0f p50 %.3f p90 %.3f p99 %.3f p999 %.3f max %.3f errors %zu\n", (double)total / elapsed,
           PCT(0.50), PCT(0.90), PCT(0.99), PCT(0.999), (double)lat[total - 1] / 1e6, errors);
    return 0;
}
