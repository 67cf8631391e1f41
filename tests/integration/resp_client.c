/* resp_client.c - raw RESP over sockets for the Redis port's tests
 * (resp_client.h). */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"
#include "resp_client.h"


void buf_put(buf_t *b, const void *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void buf_puts(buf_t *b, const char *s) { buf_put(b, s, strlen(s)); }

/* Appends one multibulk command: words up to NULL. */
void mb(buf_t *b, const char *w0, ...)
{
    const char *w[65];
    int n = 0;
    va_list ap;
    va_start(ap, w0);
    for (const char *x = w0; x && n < 64; x = va_arg(ap, const char *))
        w[n++] = x;
    va_end(ap);
    w[n] = NULL;
    mb_words(b, w);
}

void mb_words(buf_t *b, const char *const *w)
{
    size_t n = 0;
    while (w[n])
        n++;
    char head[32];
    snprintf(head, sizeof(head), "*%zu\r\n", n);
    buf_puts(b, head);
    for (size_t i = 0; i < n; i++) {
        snprintf(head, sizeof(head), "$%zu\r\n", strlen(w[i]));
        buf_puts(b, head);
        buf_puts(b, w[i]);
        buf_puts(b, "\r\n");
    }
}

int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = { 20, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Reads until the peer closes: true when it did (false: a timeout). */
bool read_to_eof(int fd, buf_t *out)
{
    char tmp[65536];
    for (;;) {
        ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
        if (n > 0) {
            if (out)
                buf_put(out, tmp, (size_t)n);
            continue;
        }
        if (n == 0 || errno == ECONNRESET)
            return true;
        if (errno == EINTR)
            continue;
        return false;
    }
}

/* Sends bytes, closes its side, and returns everything answered. */
buf_t exchange(int port, const char *bytes, size_t len)
{
    int fd = connect_to(port);
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, bytes + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    buf_t out = { 0 };
    buf_put(&out, "", 0);
    assert_true(read_to_eof(fd, &out));
    close(fd);
    return out;
}

/* Reads exactly the bytes `want` from fd (fails the test on anything else). */
void expect_bytes(int fd, const char *want)
{
    size_t n = strlen(want), got = 0;
    char *b = malloc(n + 1);
    while (got < n) {
        ssize_t r = recv(fd, b + got, n - got, 0);
        if (r <= 0)
            fail_msg("connection ended after %zu of %zu bytes (want \"%s\")", got, n, want);
        got += (size_t)r;
    }
    b[n] = '\0';
    assert_string_equal(b, want);
    free(b);
}

void send_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}


void resp_diff(int ref_port, int port, const buf_t *cmds)
{
    buf_t want = exchange(ref_port, cmds->p, cmds->len);
    buf_t got = exchange(port, cmds->p, cmds->len);
    if (want.len != got.len || memcmp(want.p, got.p, want.len) != 0) {
        size_t i = 0;
        while (i < want.len && i < got.len && want.p[i] == got.p[i])
            i++;
        size_t from = i > 200 ? i - 200 : 0;
        fail_msg("replies differ at byte %zu:\nredis:\n%.*s\ntally:\n%.*s", i, (int)(want.len - from > 600 ? 600 : want.len - from),
                 want.p + from, (int)(got.len - from > 600 ? 600 : got.len - from), got.p + from);
    }
    free(want.p);
    free(got.p);
}

bool have_python_redis(void)
{
    return access("/usr/bin/python3", X_OK) == 0 && system("/usr/bin/python3 -c 'import redis' 2>/dev/null") == 0;
}

bool run_python(const char *script, int port, char *out, size_t cap)
{
    char path[] = "/tmp/it_resp_py_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, script, strlen(script)), (ssize_t)strlen(script));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %d 2>&1", path, port);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    int rc = pclose(f);
    unlink(path);
    return rc == 0;
}

void python_expect_ok(const char *script, int port)
{
    char out[8192];
    if (!run_python(script, port, out, sizeof(out)) || strcmp(out, "ok\n") != 0)
        fail_msg("python3 redis: %s", out);
}

void cli_expect(int port, const char *opts, const cli_case_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "redis-cli %s%s-p %d %s 2>&1", opts, *opts ? " " : "", port, cases[i].args);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        char out[2048];
        size_t got = fread(out, 1, sizeof(out) - 1, f);
        out[got] = '\0';
        pclose(f);
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("redis-cli %s: got \"%s\", want \"%s\"", cases[i].args, out, cases[i].want);
    }
}

void expect_reply(int port, const buf_t *cmds, const char *want)
{
    buf_t got = exchange(port, cmds->p, cmds->len);
    assert_string_equal(got.p, want);
    free(got.p);
}

void resp_restart(tally_proc_t *p, tally_proc_t *q, const char *const *args)
{
    tally_kill(p);   /* no final snapshot: the journal alone */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p->dir);
    tally_start(q, dir, args);
}

void resp_restart_end(tally_proc_t *p, tally_proc_t *q)
{
    assert_int_equal(tally_stop(q), 0);
    tally_cleanup(q);
    tally_cleanup(p);
}

void resp_suite_start(tally_proc_t *t, const char *const *extra, redis_ref_t *ref, bool *have_ref)
{
    const char *args[32] = { "--resp-port", "0" };
    size_t n = 2;
    for (; extra && extra[n - 2]; n++) {
        assert_true(n < sizeof(args) / sizeof(args[0]) - 1);
        args[n] = extra[n - 2];
    }
    args[n] = NULL;
    tally_start(t, NULL, args);
    if (ref)
        *have_ref = redis_ref_start(ref);
}

void resp_suite_stop(tally_proc_t *t, redis_ref_t *ref, bool have_ref)
{
    if (ref && have_ref)
        redis_ref_stop(ref);
    assert_int_equal(tally_stop(t), 0);   /* a clean SIGTERM with the RESP port open */
    tally_cleanup(t);
}

buf_t exchange_proto(int port, int proto, const buf_t *cmds)
{
    buf_t all = { 0 };
    if (proto == 3)
        mb(&all, "HELLO", "3", NULL);
    buf_put(&all, cmds->p, cmds->len);
    buf_t got = exchange(port, all.p, all.len);
    free(all.p);
    assert_non_null(got.p);
    if (proto == 3) {
        static const char end[] = "$7\r\nmodules\r\n*0\r\n";
        char *g = strstr(got.p, end);
        assert_non_null(g);
        g += strlen(end);
        got.len -= (size_t)(g - got.p);
        memmove(got.p, g, got.len + 1);
    }
    return got;
}

buf_t resp3_diff(int ref_port, int port, const buf_t *cmds)
{
    buf_t want = exchange_proto(ref_port, 3, cmds);
    buf_t got = exchange_proto(port, 3, cmds);
    const char *w = want.p, *g = got.p;
    size_t wl = want.len, gl = got.len;
    if (wl != gl || memcmp(w, g, wl) != 0) {
        size_t i = 0;
        while (i < wl && i < gl && w[i] == g[i])
            i++;
        size_t from = i > 200 ? i - 200 : 0;
        fail_msg("RESP3 replies differ at byte %zu:\nredis:\n%.*s\ntally:\n%.*s", i,
                 (int)(wl - from > 600 ? 600 : wl - from), w + from, (int)(gl - from > 600 ? 600 : gl - from),
                 g + from);
    }
    free(want.p);
    return got;
}
