/*
 * it_connections.c - connection exhaustion and protocol edges, with raw
 * sockets: slowloris clients (a request head one byte a second), thousands
 * of idle keep-alive connections, a per-address cap, and the framing a proxy
 * in front could read differently (two Content-Lengths, Transfer-Encoding
 * other than chunked), an over-size body in a pipeline, chunked bodies whose
 * declared size is beyond --max-body or that stall.
 *
 * "Served" means: a fresh client gets an answer within 100 ms while the
 * attack holds its connections.  Idle and slow connections come from
 * 127.0.0.2 (all of 127/8 is loopback), the probes from 127.0.0.1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connection from `src` to the server; -1 when refused. */
static int dial(const tally_proc_t *p, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    if (src) {
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
            close(fd);
            return -1;
        }
    }
    a.sin_port = htons((uint16_t)p->port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until the response holds `want` complete answers (or the peer
 * closes, or timeout_ms); returns the bytes read (NUL-terminated, malloc'd). */
static char *read_answers(int fd, int want, int timeout_ms, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
        buf[n] = '\0';
        int got = 0;
        for (const char *q = buf; (q = strstr(q, "HTTP/1.1 ")) != NULL; q++)
            got++;
        if (got >= want) {
            /* the last answer's body too (every answer here is small) */
            const char *last = buf;
            for (const char *q = buf; (q = strstr(q, "HTTP/1.1 ")) != NULL; q++)
                last = q;
            const char *hend = strstr(last, "\r\n\r\n");
            const char *cl = strcasestr(last, "Content-Length:");
            if (hend && cl && (size_t)(buf + n - (hend + 4)) >= strtoul(cl + 15, NULL, 10))
                break;
        }
        int64_t left = end - now_ms();
        struct pollfd pf = { fd, POLLIN, 0 };
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            break;
        if (n + 4096 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* One request on a fresh connection from 127.0.0.1; the status, and the time
 * to the answer in *ms (-1 status: no answer in 2 s). */
static int probe(const tally_proc_t *p, const char *req, int64_t *ms)
{
    int64_t t0 = now_ms();
    int fd = dial(p, "127.0.0.1");
    if (fd < 0)
        return -1;
    assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    size_t n;
    char *a = read_answers(fd, 1, 2000, &n);
    *ms = now_ms() - t0;
    int st = strncmp(a, "HTTP/1.1 ", 9) == 0 ? atoi(a + 9) : -1;
    free(a);
    close(fd);
    return st;
}

static long metric(const tally_proc_t *p, const char *name)
{
    http_resp_t r = http(p, "GET", "/metrics", NULL, NULL);
    const char *m = strstr(r.body, name);
    while (m && m > r.body && m[-1] != '\n')
        m = strstr(m + 1, name);
    long v = m ? strtol(m + strlen(name), NULL, 10) : -1;
    http_free(&r);
    return v;
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* Room for n descriptors in this process and the tallyd it starts. */
static int want_fds(int n)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t want = (rlim_t)n + 512;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    return (int)rl.rlim_cur - 512;
}

#define READYZ "GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n"
#define WRITE "POST /counter/probe HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{\"by\":1}"

static void expect_served(const tally_proc_t *p, const char *what)
{
    int64_t ms;
    int st = probe(p, READYZ, &ms);
    printf("    %s: /readyz %d in %lld ms", what, st, (long long)ms);
    if (st != 200 || ms > 100)
        fail_msg("%s: /readyz answered %d in %lld ms", what, st, (long long)ms);
    st = probe(p, WRITE, &ms);
    printf(", a new client's write %d in %lld ms\n", st, (long long)ms);
    if (st != 200 || ms > 100)
        fail_msg("%s: a new client's write answered %d in %lld ms", what, st, (long long)ms);
}

/* 500 clients sending their request head one byte a second, with
 * --max-connections 500: before, each byte reset the idle timer and nobody
 * else got in for the whole test. */
static void test_slowloris(void **state)
{
    (void)state;
    want_fds(1200);
    tally_proc_t p;
    tally_start(&p, NULL,
                (const char *[]){ "--in-memory", "--max-connections", "500", "--timeout", "10", "--header-timeout",
                                  "3", "--max-connections-per-ip", "1000", NULL });
    enum { N = 500 };
    static int fds[N];
    static const char head[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    for (int i = 0; i < N; i++) {
        fds[i] = dial(&p, "127.0.0.2");
        assert_true(fds[i] >= 0);
        send(fds[i], "G", 1, MSG_NOSIGNAL);
    }
    int64_t t0 = now_ms();
    size_t sent = 1;
    while (now_ms() - t0 < 2500) {
        for (int i = 0; i < N; i++)
            send(fds[i], head + sent, 1, MSG_NOSIGNAL);
        sent++;
        expect_served(&p, "500 slow clients");
        usleep(500 * 1000);
    }
    /* past --header-timeout, the slow ones are closed */
    usleep(1500 * 1000);
    int closed = 0;
    for (int i = 0; i < N; i++) {
        send(fds[i], head + sent, 1, MSG_NOSIGNAL);
        char c;
        struct pollfd pf = { fds[i], POLLIN, 0 };
        if (poll(&pf, 1, 100) == 1 && recv(fds[i], &c, 1, 0) <= 0)
            closed++;
        close(fds[i]);
    }
    printf("    %d of %d slow connections closed after --header-timeout 3\n", closed, N);
    assert_int_equal(closed, N);
    assert_true(metric(&p, "tally_connections_closed_total{reason=\"header_timeout\"} ") >= N);
    tally_cleanup(&p);
}

/* 10 000 idle keep-alive connections (each answered once) at the default
 * --max-connections 10000: before, new clients were locked out ~58 s. */
static void test_idle_keepalive(void **state)
{
    (void)state;
    int n = want_fds(2 * 10000 + 200) / 2;
    if (n > 10000)
        n = 10000;
    if (n < 10000)
        printf("    only %d descriptors: testing %d idle connections (cap scaled the same)\n", 2 * n, n);
    /* the cap a little under what the idle clients open: they fill it */
    char cap[16];
    snprintf(cap, sizeof(cap), "%d", n - 100);
    tally_proc_t p;
    tally_start(&p, NULL, (const char *[]){ "--in-memory", "--max-connections", cap, "--max-connections-per-ip",
                                            "100000", NULL });
    long rss0 = rss_kb(p.pid);
    int *fds = calloc((size_t)n, sizeof(int));
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    int open = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = dial(&p, "127.0.0.2");
        if (fds[i] < 0)
            break;
        send(fds[i], req, sizeof(req) - 1, MSG_NOSIGNAL);
        open++;
    }
    int answered = 0;
    for (int i = 0; i < open; i++) {
        size_t len;
        char *a = read_answers(fds[i], 1, 2000, &len);
        answered += strncmp(a, "HTTP/1.1 200", 12) == 0;
        free(a);
    }
    long conns = metric(&p, "tally_connections_open ");
    long mem = metric(&p, "tally_connections_memory_bytes ");
    long rss1 = rss_kb(p.pid);
    printf("    %d idle keep-alive connections (%d answered); tallyd RSS %ld -> %ld KiB (%.1f KiB each), "
           "/metrics: %ld open, %ld bytes\n",
           open, answered, rss0, rss1, open ? (double)(rss1 - rss0) / open : 0.0, conns, mem);
    assert_true(answered >= n - 10);
    assert_true(mem > 0);
    expect_served(&p, "idle connections at the cap");
    expect_served(&p, "idle connections at the cap, again");
    usleep(300 * 1000);
    /* over the cap, answers carry Connection: close and idle ones are closed */
    long over = metric(&p, "tally_connections_closed_total{reason=\"over_cap\"} ");
    long now_open = metric(&p, "tally_connections_open ");
    printf("    open now %ld (cap %s; %ld idle ones closed by the sweep)\n", now_open, cap, over);
    assert_true(now_open <= atol(cap) + 8);   /* + this test's own connections */
    for (int i = 0; i < open; i++)
        close(fds[i]);
    free(fds);
    tally_cleanup(&p);
}

/* One address may hold at most --max-connections-per-ip; others get in. */
static void test_per_ip_cap(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, (const char *[]){ "--in-memory", "--max-connections-per-ip", "5", NULL });
    int fds[8], refused = 0;
    for (int i = 0; i < 8; i++) {
        fds[i] = dial(&p, "127.0.0.2");
        if (fds[i] < 0) {
            refused++;
            continue;
        }
        send(fds[i], READYZ, strlen(READYZ), MSG_NOSIGNAL);
        size_t len;
        char *a = read_answers(fds[i], 1, 1000, &len);
        refused += len == 0;
        free(a);
    }
    assert_int_equal(refused, 3);
    expect_served(&p, "an address at its cap");
    for (int i = 0; i < 8; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    assert_true(metric(&p, "tally_connections_refused_total{reason=\"per_ip\"} ") >= 3);
    tally_cleanup(&p);
}

/* Sends raw bytes on a fresh connection; the answers within timeout_ms. */
static char *exchange(const tally_proc_t *p, const char *bytes, size_t len, int want, int timeout_ms)
{
    int fd = dial(p, "127.0.0.1");
    assert_true(fd >= 0);
    send(fd, bytes, len, MSG_NOSIGNAL);
    size_t n;
    char *a = read_answers(fd, want, timeout_ms, &n);
    close(fd);
    return a;
}

static void expect_answer(const tally_proc_t *p, const char *what, const char *bytes, int status, const char *code)
{
    int64_t t0 = now_ms();
    char *a = exchange(p, bytes, strlen(bytes), 1, 3000);
    int64_t ms = now_ms() - t0;
    int st = strncmp(a, "HTTP/1.1 ", 9) == 0 ? atoi(a + 9) : -1;
    if (st != status || ms > 1000 || (code && !strstr(a, code)))
        fail_msg("%s: expected %d %s at once, got %d after %lld ms:\n%s", what, status, code ? code : "", st,
                 (long long)ms, a);
    free(a);
}

static void test_protocol_edges(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, (const char *[]){ "--in-memory", "--max-body", "1kb", NULL });
    expect_answer(&p, "two different Content-Length",
                  "POST /counter/x HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 8\r\n"
                  "Content-Length: 9\r\n\r\n{\"by\":1}",
                  400, "\"BAD_REQUEST\"");
    expect_answer(&p, "Transfer-Encoding: gzip",
                  "POST /counter/x HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip"
                  "\r\n\r\nxxxx",
                  400, "\"BAD_REQUEST\"");
    /* nothing of that was applied */
    http_resp_t r = http(&p, "GET", "/counter/x", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 0);
    http_free(&r);
    /* a pipeline: two good requests, then a body over --max-body */
    char big[4096];
    int n = snprintf(big, sizeof(big),
                     "POST /counter/y HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 8\r\n"
                     "\r\n{\"by\":1}"
                     "POST /counter/y HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 8\r\n"
                     "\r\n{\"by\":1}"
                     "POST /counter/y HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n"
                     "\r\n");
    memset(big + n, 'a', 2000);
    char *a = exchange(&p, big, (size_t)n + 2000, 3, 3000);
    const char *s1 = strstr(a, "HTTP/1.1 200");
    const char *s2 = s1 ? strstr(s1 + 1, "HTTP/1.1 200") : NULL;
    const char *s3 = s2 ? strstr(s2 + 1, "HTTP/1.1 413") : NULL;
    if (!s3)
        fail_msg("pipeline: expected 200, 200, 413, got:\n%s", a);
    assert_non_null(strstr(s3, "PAYLOAD_TOO_LARGE"));
    free(a);
    r = http(&p, "GET", "/counter/y", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 2);
    http_free(&r);
    tally_cleanup(&p);
}

/* Whether the peer closes the connection within timeout_ms (EOF or reset). */
static bool closed_within(int fd, int timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    char buf[4096];
    for (;;) {
        int64_t left = end - now_ms();
        struct pollfd pf = { fd, POLLIN, 0 };
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            return false;
        if (recv(fd, buf, sizeof(buf), 0) <= 0)
            return true;
    }
}

/* Sends `bytes` (then nothing) on a fresh connection: the answer must be
 * `status` (with `code` in it, when given) between min_ms and max_ms after
 * the send, and the connection closed after it. */
static void expect_chunked(const tally_proc_t *p, const char *what, const char *bytes, size_t len, int status,
                           const char *code, int min_ms, int max_ms)
{
    int fd = dial(p, "127.0.0.1");
    assert_true(fd >= 0);
    int64_t t0 = now_ms();
    assert_int_equal(send(fd, bytes, len, MSG_NOSIGNAL), (ssize_t)len);
    size_t n;
    char *a = read_answers(fd, 1, max_ms + 2000, &n);
    int64_t ms = now_ms() - t0;
    int st = strncmp(a, "HTTP/1.1 ", 9) == 0 ? atoi(a + 9) : -1;
    printf("%s: %d after %lld ms\n", what, st, (long long)ms);
    if (st != status || ms < min_ms || ms > max_ms || (code && !strstr(a, code)))
        fail_msg("%s: expected %d %s in %d..%d ms, got %d after %lld ms:\n%s", what, status, code ? code : "", min_ms,
                 max_ms, st, (long long)ms, a);
    if (!closed_within(fd, 3000))
        fail_msg("%s: the connection stayed open after the answer", what);
    free(a);
    close(fd);
}

#define CHUNKED_HEAD                                                                                                \
    "POST /counter/c HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"

/* Chunked bodies whose declared size is beyond --max-body: libmicrohttpd
 * keeps a chunk's size to itself, so tallyd answers by what arrives - 413 the
 * moment the body passes the limit, 408 when it stalls for --header-timeout
 * - and closes; a size over 64 bits libmicrohttpd refuses itself at once. */
static void test_chunked_edges(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, (const char *[]){ "--in-memory", "--max-body", "1kb", "--header-timeout", "2", NULL });
    char buf[4096];
    /* the declared size overflows 64 bits: MHD's own 413, at once */
    int n = snprintf(buf, sizeof(buf), CHUNKED_HEAD "1FFFFFFFFFFFFFFFF\r\n{\"by\":1}");
    expect_chunked(&p, "chunk size over 64 bits", buf, (size_t)n, 413, NULL, 0, 1000);
    /* FFFFFFFFFFFFFFFF with more than --max-body behind it: 413 at once */
    n = snprintf(buf, sizeof(buf), CHUNKED_HEAD "FFFFFFFFFFFFFFFF\r\n");
    memset(buf + n, ' ', 2000);
    expect_chunked(&p, "chunk of 2^64-1 bytes, 2000 sent", buf, (size_t)n + 2000, 413, "\"PAYLOAD_TOO_LARGE\"", 0,
                   1000);
    /* ... as a pipelined request after a good one: that one is answered */
    n = snprintf(buf, sizeof(buf),
                 "POST /counter/d HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n"
                 "{\"by\":1}" CHUNKED_HEAD "FFFFFFFFFFFFFFFF\r\n");
    memset(buf + n, ' ', 2000);
    char *a = exchange(&p, buf, (size_t)n + 2000, 2, 2000);
    const char *s1 = strstr(a, "HTTP/1.1 200");
    if (!s1 || !strstr(s1, "HTTP/1.1 413"))
        fail_msg("pipeline: expected 200 then 413, got:\n%s", a);
    free(a);
    /* the declared size, then a few bytes or none, then silence: 408 after
     * --header-timeout (2 s here; the tick runs every 100 ms), not --timeout */
    n = snprintf(buf, sizeof(buf), CHUNKED_HEAD "FFFFFFFFFFFFFFFF\r\n{\"by\":1}");
    expect_chunked(&p, "chunk of 2^64-1 bytes, 8 sent", buf, (size_t)n, 408, "\"REQUEST_TIMEOUT\"", 1900, 3500);
    n = snprintf(buf, sizeof(buf), CHUNKED_HEAD "FFFFFFFFFFFFFFFF\r\n");
    expect_chunked(&p, "chunk of 2^64-1 bytes, none sent", buf, (size_t)n, 408, "\"REQUEST_TIMEOUT\"", 1900, 3500);
    /* a Content-Length body that stalls: the same deadline */
    n = snprintf(buf, sizeof(buf),
                 "POST /counter/c HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 "Content-Length: 100\r\n\r\n{");
    expect_chunked(&p, "Content-Length 100, 1 sent", buf, (size_t)n, 408, "\"REQUEST_TIMEOUT\"", 1900, 3500);
    /* a chunked body within the limit, sent slowly but steadily (3.6 s in
     * all, never 2 s without a byte), is served */
    int fd = dial(&p, "127.0.0.1");
    assert_true(fd >= 0);
    const char *parts[] = { CHUNKED_HEAD "8\r\n{\"by", "\":1}", "\r\n", "2\r\n  \r\n", "0\r\n", "\r\n" };
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        send(fd, parts[i], strlen(parts[i]), MSG_NOSIGNAL);
        usleep(600 * 1000);
    }
    size_t len;
    a = read_answers(fd, 1, 2000, &len);
    if (strncmp(a, "HTTP/1.1 200", 12) != 0)
        fail_msg("a slow chunked body within the limits: %s", a);
    free(a);
    close(fd);
    /* only the pipelined good request and the slow one changed anything */
    http_resp_t r = http(&p, "GET", "/counter/c", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 1);
    http_free(&r);
    r = http(&p, "GET", "/counter/d", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 1);
    http_free(&r);
    assert_true(metric(&p, "tally_connections_closed_total{reason=\"body_timeout\"} ") >= 3);
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_edges),
        cmocka_unit_test(test_chunked_edges),
        cmocka_unit_test(test_per_ip_cap),
        cmocka_unit_test(test_slowloris),
        cmocka_unit_test(test_idle_keepalive),
    };
    return cmocka_run_group_tests_name("connections", tests, NULL, NULL);
}
