/*
 * it_resp.c - the Redis protocol's port (--resp-port) with real clients:
 * redis-cli, Python's redis package (Debian's python3-redis), and
 * redis-server as the reference, replies compared byte for byte over raw
 * sockets; bad input (huge and negative lengths, unterminated arrays, idle
 * clients, a client that never reads), authentication (NOAUTH, WRONGPASS,
 * NOPERM), QUIT and protocol errors closing the connection, and TLS
 * (--tls-cert: redis-cli --tls, python3-redis ssl=True, reloads, mTLS).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cmd/access.h"
#include "harness.h"
#include "redis_ref.h"
#include "resp_client.h"

RESP_SUITE_REF("--max-answer-size", "1mb", NULL)

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

/* redis-cli prints tally's answers as it prints Redis's (redis-cell's README
 * example, counters, HyperLogLog, keys). */
static void test_redis_cli(void **state)
{
    (void)state;
    static const cli_case_t cases[] = {
        { "PING", "PONG\n" },   /* (redis-cli prints an error with an empty line after it) */
        { "CL.THROTTLE user123 15 30 60", "0\n16\n15\n-1\n2\n" },
        { "CL.THROTTLE user123 15 30 60 0", "0\n16\n15\n-1\n2\n" },   /* a peek */
        { "CL.THROTTLE user123 0 30 0", "Cell error: Zero rates are not supported\n\n" },
        { "CL.THROTTLE user123 x 30 60", "Cell error: Couldn't parse as integer: x\n\n" },
        { "CL.THROTTLE user123 1 2", "Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\n\n" },
        { "PFADD cli:uv a b c", "1\n" },
        { "PFCOUNT cli:uv", "3\n" },
        { "INCRBY cli:n 41", "41\n" },
        { "INCR cli:n", "42\n" },
        { "EXPIRE cli:n 100", "1\n" },
        { "TTL cli:n", "100\n" },
        { "EXISTS cli:n cli:uv nope", "2\n" },
        { "DEL cli:n nope", "1\n" },
        { "NOSUCH a b", "ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \n\n" },
    };
    cli_expect(T.resp_port, "", cases, sizeof(cases) / sizeof(cases[0]));
    /* commands on redis-cli's standard input (and its interactive prompt)
     * make it read COMMAND DOCS first, for its help and hints: every
     * container's subcommands named as Redis names them ("cluster|slots") */
    char cmd[256], out[512];
    snprintf(cmd, sizeof(cmd), "printf 'PING\\nINCRBY cli:stdin 2\\nCLUSTER KEYSLOT a\\n' | redis-cli -p %d 2>&1",
             T.resp_port);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    int rc = pclose(f);
    if (rc != 0 || strcmp(out, "PONG\n2\nERR This instance has cluster support disabled\n\n") != 0)
        fail_msg("redis-cli reading its standard input: rc %d, printed:\n%s", rc, out);
}

/* The same commands to redis-server and to tally: the same bytes back. */
static void test_differential(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    /* a bit string with a zero byte in it, made by SETBIT on each side
     * (tally's over HTTP: no SETBIT on this port yet) */
    resp_free(redis_cmd(&R, "SETBIT", "d:b", "1", "1", NULL));
    resp_free(redis_cmd(&R, "SETBIT", "d:b", "23", "1", NULL));
    http_expect(&T, "POST", "/bits/d:b/setbit", "{\"offset\":1,\"value\":1}", 200, NULL);
    http_expect(&T, "POST", "/bits/d:b/setbit", "{\"offset\":23,\"value\":1}", 200, NULL);
    buf_t b = { 0 };
    mb(&b, "PING", NULL);
    mb(&b, "PING", "hello", NULL);
    mb(&b, "PING", "a", "b", NULL);
    mb(&b, "ECHO", "x y", NULL);
    mb(&b, "SELECT", "0", NULL);
    mb(&b, "SELECT", "x", NULL);
    mb(&b, "SELECT", "99999999999", NULL);
    mb(&b, "NOSUCH", NULL);
    mb(&b, "nosuch", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "b", "c", NULL);
    mb(&b, "nosuch", "line\r\nbreak", NULL);
    mb(&b, "CLIENT", "SETNAME", "a b", NULL);
    mb(&b, "CLIENT", "SETNAME", "me", NULL);
    mb(&b, "CLIENT", "GETNAME", NULL);
    mb(&b, "CLIENT", "NOSUCH", NULL);
    mb(&b, "CLIENT", "SETNAME", NULL);
    mb(&b, "CLIENT", NULL);
    mb(&b, "AUTH", "secret", NULL);
    mb(&b, "AUTH", "someone", "secret", NULL);
    mb(&b, "AUTH", "a", "b", "c", NULL);
    mb(&b, "HELLO", "4", NULL);
    mb(&b, "HELLO", "x", NULL);
    mb(&b, "HELLO", "2", "NOSUCH", NULL);
    mb(&b, "INCR", "d:n", NULL);
    mb(&b, "INCRBY", "d:n", "x", NULL);
    mb(&b, "INCRBY", "d:n", "01", NULL);
    mb(&b, "INCRBY", "d:n", "9223372036854775807", NULL);
    mb(&b, "DECRBY", "d:n", "-9223372036854775808", NULL);
    mb(&b, "DECRBY", "d:n", "5", NULL);
    mb(&b, "DECR", "d:n", NULL);
    mb(&b, "INCR", NULL);
    mb(&b, "PFADD", "d:h", "a", "b", "c", NULL);
    mb(&b, "PFADD", "d:h", "a", NULL);
    mb(&b, "PFADD", "d:h2", "c", "d", NULL);
    mb(&b, "PFCOUNT", "d:h", NULL);
    mb(&b, "PFCOUNT", "d:h", "d:h2", "d:none", NULL);
    mb(&b, "PFMERGE", "d:h3", "d:h", "d:h2", NULL);
    mb(&b, "PFCOUNT", "d:h3", NULL);
    mb(&b, "PFMERGE", "d:h4", NULL);
    mb(&b, "PFCOUNT", "d:h4", NULL);
    mb(&b, "PFADD", "d:n", "x", NULL);
    mb(&b, "PFCOUNT", "d:n", NULL);
    mb(&b, "INCR", "d:h", NULL);
    mb(&b, "EXISTS", "d:h", "d:h", "d:none", "d:n", NULL);
    mb(&b, "TTL", "d:n", NULL);
    mb(&b, "PTTL", "d:n", NULL);
    mb(&b, "TTL", "d:none", NULL);
    mb(&b, "PTTL", "d:none", NULL);
    mb(&b, "EXPIRE", "d:n", "100", NULL);
    mb(&b, "TTL", "d:n", NULL);
    mb(&b, "EXPIRE", "d:none", "100", NULL);
    mb(&b, "EXPIRE", "d:n", "x", NULL);
    mb(&b, "EXPIRE", "d:n", "9223372036854775807", NULL);
    mb(&b, "PERSIST", "d:n", NULL);
    mb(&b, "PERSIST", "d:n", NULL);
    mb(&b, "PERSIST", "d:none", NULL);
    mb(&b, "TTL", "d:n", NULL);
    mb(&b, "PEXPIRE", "d:h", "100000", NULL);
    mb(&b, "TTL", "d:h", NULL);
    mb(&b, "EXPIRE", "d:h", "-1", NULL);
    mb(&b, "EXISTS", "d:h", NULL);
    mb(&b, "DEL", "d:h2", "d:none", "d:h3", NULL);
    mb(&b, "DEL", "d:h2", NULL);
    mb(&b, "EXISTS", "d:h2", "d:h3", "d:h4", NULL);
    /* TYPE, GET */
    mb(&b, "TYPE", "d:n", NULL);
    mb(&b, "TYPE", "d:h4", NULL);
    mb(&b, "TYPE", "d:b", NULL);
    mb(&b, "TYPE", "d:none", NULL);
    mb(&b, "TYPE", NULL);
    mb(&b, "TYPE", "a", "b", NULL);
    mb(&b, "GET", "d:n", NULL);
    mb(&b, "GET", "d:b", NULL);
    mb(&b, "GET", "d:none", NULL);
    mb(&b, "GET", NULL);
    mb(&b, "INCRBY", "d:neg", "-42", NULL);
    mb(&b, "GET", "d:neg", NULL);
    /* EXPIREAT, PEXPIREAT, UNLINK */
    mb(&b, "EXPIREAT", "d:n", "4102444800", NULL);
    mb(&b, "PERSIST", "d:n", NULL);
    mb(&b, "PEXPIREAT", "d:n", "4102444800123", NULL);
    mb(&b, "PERSIST", "d:n", NULL);
    mb(&b, "EXPIREAT", "d:none", "4102444800", NULL);
    mb(&b, "PEXPIREAT", "d:none", "1", NULL);
    mb(&b, "EXPIREAT", "d:n", "x", NULL);
    mb(&b, "EXPIREAT", "d:n", "9223372036854775807", NULL);
    mb(&b, "EXPIREAT", "d:n", "-9223372036854775808", NULL);
    mb(&b, "PEXPIREAT", "d:n", "x", NULL);
    mb(&b, "EXPIREAT", "d:n", NULL);
    mb(&b, "EXISTS", "d:n", NULL);
    mb(&b, "PEXPIREAT", "d:n", "1", NULL);
    mb(&b, "EXISTS", "d:n", NULL);
    mb(&b, "PEXPIREAT", "d:neg", "-9223372036854775808", NULL);
    mb(&b, "EXISTS", "d:neg", NULL);
    mb(&b, "EXPIREAT", "d:h4", "0", NULL);
    mb(&b, "TYPE", "d:h4", NULL);
    mb(&b, "PFADD", "d:u1", "a", NULL);
    mb(&b, "UNLINK", "d:u1", "d:none", "d:b", NULL);
    mb(&b, "UNLINK", "d:u1", NULL);
    mb(&b, "UNLINK", NULL);
    mb(&b, "GET", "d:b", NULL);
    buf_puts(&b, "PING inline\r\n");
    buf_puts(&b, "ECHO \"quoted \\x41\"\r\n");
    mb(&b, "QUIT", NULL);
    mb(&b, "PING", NULL);   /* never answered: QUIT closed the connection */
    buf_t want = exchange(R.port, b.p, b.len);
    buf_t got = exchange(T.resp_port, b.p, b.len);
    if (want.len != got.len || memcmp(want.p, got.p, want.len) != 0)
        fail_msg("replies differ:\nredis:\n%s\ntally:\n%s", want.p, got.p);
    free(want.p);
    free(got.p);
    free(b.p);
}

/* TYPE of each of tally's types (the names Redis, RedisBloom and
 * RedisTimeSeries answer; no redis-server here has those modules), and
 * GET refusing what is not a counter or a bit string. */
static void test_type_get(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/bloom/ty:bf", "{\"capacity\":100,\"error_rate\":0.01}", 201, NULL);
    http_expect(&T, "PUT", "/cuckoo/ty:cf", "{\"capacity\":100}", 201, NULL);
    http_expect(&T, "PUT", "/cms/ty:cms", "{\"width\":10,\"depth\":2}", 201, NULL);
    http_expect(&T, "PUT", "/topk/ty:topk", "{\"k\":2}", 201, NULL);
    http_expect(&T, "PUT", "/tdigest/ty:td", "{\"compression\":100}", 201, NULL);
    http_expect(&T, "POST", "/ts/ty:ts", "{\"samples\":[[1,1]]}", 200, NULL);
    http_expect(&T, "POST", "/geo/ty:geo", "{\"members\":[{\"member\":\"m\",\"lon\":13.4,\"lat\":52.5}]}", 200, NULL);
    http_expect(&T, "POST", "/activity/ty:act", "{\"day\":\"2026-11-21\",\"users\":[1]}", 200, NULL);
    buf_t b = { 0 };
    static const char *const keys[] = { "ty:bf", "ty:cf",  "ty:cms", "ty:topk", "ty:td",
                                        "ty:ts", "ty:geo", "ty:act", "ty:thr" };
    mb(&b, "CL.THROTTLE", "ty:thr", "1", "1", "60", NULL);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        mb(&b, "TYPE", keys[i], NULL);
    mb(&b, "PFADD", "ty:uv", "a", NULL);
    mb(&b, "TYPE", "ty:uv", NULL);
    mb(&b, "GET", "ty:bf", NULL);
    mb(&b, "GET", "ty:uv", NULL);
    mb(&b, "GET", "ty:thr", NULL);
    mb(&b, "GET", "ty:geo", NULL);
    buf_t got = exchange(T.resp_port, b.p, b.len);
    const char *wt = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    char want[1024];
    snprintf(want, sizeof(want),
             "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n"
             "+MBbloom--\r\n+MBbloomCF\r\n+CMSk-TYPE\r\n+TopK-TYPE\r\n+TDIS-TYPE\r\n+TSDB-TYPE\r\n+zset\r\n"
             "+activity\r\n+string\r\n:1\r\n+string\r\n%s%s%s%s",
             wt, wt, wt, wt);
    if (strcmp(got.p, want) != 0)
        fail_msg("TYPE/GET: got\n%s\nwant\n%s", got.p, want);
    free(got.p);
    free(b.p);
}

/* After HELLO 3 the replies are RESP3's: compared with redis-server's
 * (HELLO's own map names the server: checked apart). */
static void test_resp3(void **state)
{
    (void)state;
    int fd = connect_to(T.resp_port);
    buf_t b = { 0 };
    mb(&b, "HELLO", "3", "SETNAME", "r3", NULL);
    send_all(fd, b.p, b.len);
    char head[] = "%7\r\n$6\r\nserver\r\n$5\r\ntally\r\n$7\r\nversion\r\n";
    expect_bytes(fd, head);
    close(fd);
    if (!have_redis)
        skip();
    b.len = 0;
    mb(&b, "HELLO", "3", NULL);
    buf_t after = { 0 };
    mb(&after, "CLIENT", "GETNAME", NULL);
    mb(&after, "CLIENT", "SETNAME", "x", NULL);
    mb(&after, "CLIENT", "GETNAME", NULL);
    mb(&after, "PING", NULL);
    mb(&after, "INCR", "r3:n", NULL);
    mb(&after, "PFADD", "r3:h", "a", NULL);
    mb(&after, "PFCOUNT", "r3:h", NULL);
    mb(&after, "TTL", "r3:none", NULL);
    mb(&after, "INCR", "r3:h", NULL);
    mb(&after, "HELLO", "2", NULL);
    buf_t cmds = { 0 };
    buf_put(&cmds, b.p, b.len);
    buf_put(&cmds, after.p, after.len);
    mb(&cmds, "CLIENT", "SETNAME", "", NULL);
    mb(&cmds, "CLIENT", "GETNAME", NULL);
    buf_t want = exchange(R.port, cmds.p, cmds.len);
    buf_t got = exchange(T.resp_port, cmds.p, cmds.len);
    /* drop each HELLO's map (server, version, id differ), compare the rest */
    char *w1 = strstr(want.p, "$7\r\nmodules\r\n*0\r\n"), *g1 = strstr(got.p, "$7\r\nmodules\r\n*0\r\n");
    assert_non_null(w1);
    assert_non_null(g1);
    w1 += 18;
    g1 += 18;
    char *w2 = strstr(w1, "*14\r\n$6\r\nserver"), *g2 = strstr(g1, "*14\r\n$6\r\nserver");   /* HELLO 2's, in RESP2 */
    assert_non_null(w2);
    assert_non_null(g2);
    if (w2 - w1 != g2 - g1 || memcmp(w1, g1, (size_t)(w2 - w1)) != 0)
        fail_msg("RESP3 replies differ:\nredis:\n%.*s\ntally:\n%.*s", (int)(w2 - w1), w1, (int)(g2 - g1), g1);
    /* after HELLO 2: RESP2's null again */
    size_t wl = strlen(want.p), gl = strlen(got.p);
    assert_true(wl > 5 && gl > 5);
    assert_string_equal(want.p + wl - 5, "$-1\r\n");
    assert_string_equal(got.p + gl - 5, "$-1\r\n");
    free(want.p);
    free(got.p);
    free(cmds.p);
    free(after.p);
    free(b.p);
}

/* Python's redis package: a pipeline of 1000 commands, replies in order. */
static void test_python_pipeline(void **state)
{
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0 || system("/usr/bin/python3 -c 'import redis' 2>/dev/null") != 0)
        skip();   /* tools/deps.sh test installs python3-redis */
    char script[] =
        "import redis, sys\n"
        "r = redis.Redis(port=int(sys.argv[1]))\n"
        "p = r.pipeline(transaction=False)\n"
        "for i in range(500):\n"
        "    p.incr('py:n')\n"
        "    p.execute_command('CL.THROTTLE', 'py:t', 9, 1, 3600)\n"
        "res = p.execute()\n"
        "assert len(res) == 1000, len(res)\n"
        "for i in range(500):\n"
        "    assert res[2 * i] == i + 1, (i, res[2 * i])\n"
        "    t = res[2 * i + 1]\n"
        "    assert t[0] == (0 if i < 10 else 1), (i, t)\n"
        "    assert t[1] == 10 and t[2] == (9 - i if i < 10 else 0), (i, t)\n"
        "assert r.pfadd('py:h', 'a', 'b', 'c') == 1\n"
        "assert r.pfcount('py:h') == 3\n"
        "assert r.expire('py:n', 50) is True and r.ttl('py:n') == 50\n"
        "assert r.exists('py:n', 'py:h', 'py:none') == 2\n"
        "assert r.delete('py:n') == 1 and r.get is not None\n"
        "assert r.ping() is True\n"
        "print('ok')\n";
    python_expect_ok(script, T.resp_port);
}

/* Bad input: each protocol error answered as redis-server answers it, the
 * connection closed, nothing changed, nothing crashed. */
static void test_bad_input(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "*1\r\n$99999999999\r\n",           /* a huge bulk length */
        "*1\r\n$-5\r\n",                    /* a negative one */
        "*2\r\n$3\r\nDEL\r\nbad:k\r\n",     /* '$' expected */
        "*99999999999\r\n",                 /* a huge count */
        "*1\r\n$4\r\nPING\r\n*3\r\n$4\r\nINCR\r\n",   /* answered, then unterminated: the client hangs up */
        "PING \"unbalanced\r\n",
        "*1\r\n$1000000000\r\n",            /* larger than --max-body: refused before any byte of it */
    };
    buf_t setup = { 0 };
    mb(&setup, "INCRBY", "bad:k", "7", NULL);
    free(exchange(T.resp_port, setup.p, setup.len).p);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        buf_t got = exchange(T.resp_port, bad[i], strlen(bad[i]));
        if (have_redis && i != 6) {   /* tally's --max-body is smaller than Redis's 512 MB */
            buf_t want = exchange(R.port, bad[i], strlen(bad[i]));
            if (strcmp(want.p, got.p) != 0)
                fail_msg("bad input %zu: redis \"%s\", tally \"%s\"", i, want.p, got.p);
            free(want.p);
        }
        if (i == 6)
            assert_string_equal(got.p, "-ERR Protocol error: invalid bulk length\r\n");
        free(got.p);
    }
    buf_t check = { 0 };
    mb(&check, "INCRBY", "bad:k", "0", NULL);
    expect_reply(T.resp_port, &check, ":7\r\n");
    free(check.p);
    free(setup.p);
}

/* 200 idle clients hold nothing up; each is served when it speaks. */
static void test_idle_clients(void **state)
{
    (void)state;
    enum { N = 200 };
    int fds[N];
    for (int i = 0; i < N; i++)
        fds[i] = connect_to(T.resp_port);
    buf_t b = { 0 };
    mb(&b, "PING", NULL);
    expect_reply(T.resp_port, &b, "+PONG\r\n");
    for (int i = 0; i < N; i += 37) {
        send_all(fds[i], b.p, b.len);
        expect_bytes(fds[i], "+PONG\r\n");
    }
    for (int i = 0; i < N; i++)
        close(fds[i]);
    free(b.p);
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long kb = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* A client that never reads its replies is dropped once they pass the
 * output cap (--max-answer-size 1mb + 1 MiB here); memory stays bounded. */
static void test_slow_reader(void **state)
{
    (void)state;
    long before = rss_kb(T.pid);
    int fd = connect_to(T.resp_port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    size_t big = 256 * 1024;
    char *payload = malloc(big);
    memset(payload, 'x', big);
    buf_t cmd = { 0 };
    char head[64];
    snprintf(head, sizeof(head), "*2\r\n$4\r\nECHO\r\n$%zu\r\n", big);
    buf_puts(&cmd, head);
    buf_put(&cmd, payload, big);
    buf_puts(&cmd, "\r\n");
    /* 64 MiB of replies asked for; the server drops the client long before */
    bool dropped = false;
    for (int i = 0; i < 256 && !dropped; i++) {
        size_t off = 0;
        while (off < cmd.len) {
            ssize_t w = send(fd, cmd.p + off, cmd.len - off, MSG_NOSIGNAL);
            if (w <= 0) {
                dropped = true;
                break;
            }
            off += (size_t)w;
        }
    }
    assert_true(dropped);
    assert_true(read_to_eof(fd, NULL));
    close(fd);
    long after = rss_kb(T.pid);
    if (after - before > 64 * 1024)
        fail_msg("tallyd grew from %ld kB to %ld kB for one slow reader", before, after);
    buf_t b = { 0 };
    mb(&b, "PING", NULL);
    expect_reply(T.resp_port, &b, "+PONG\r\n");
    free(b.p);
    free(cmd.p);
    free(payload);
}

/* --tokens: NOAUTH before AUTH, WRONGPASS for an unknown token or a name
 * that is not the token's, NOPERM naming a key outside its prefixes. */
static void test_auth(void **state)
{
    (void)state;
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    char hex[2 * CMD_TOKEN_SHA256_LEN + 1], path[300], json[512];
    cmd_token_hash_hex("s3cret", 6, hex);
    snprintf(json, sizeof(json),
             "{\"tokens\":[{\"name\":\"app\",\"sha256\":\"%s\",\"scopes\":[\"read\",\"write\",\"ratelimit\"],"
             "\"prefixes\":[\"app:\"]}]}", hex);
    snprintf(path, sizeof(path), "%s/tokens.json", dir);
    file_write(path, json, strlen(json));
    const char *args[] = { "--resp-port", "0", "--tokens", path, NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    int fd = connect_to(p.resp_port);
    buf_t b = { 0 };
    mb(&b, "PING", NULL);
    mb(&b, "INCR", "app:n", NULL);
    mb(&b, "NOSUCH", NULL);
    mb(&b, "HELLO", "3", NULL);
    mb(&b, "AUTH", "wrong", NULL);
    mb(&b, "AUTH", "someone", "s3cret", NULL);
    mb(&b, "PING", NULL);
    mb(&b, "AUTH", "s3cret", NULL);
    mb(&b, "INCR", "app:n", NULL);
    mb(&b, "INCR", "other:n", NULL);
    mb(&b, "AUTH", "app", "s3cret", NULL);
    mb(&b, "CL.THROTTLE", "app:t", "1", "1", "60", NULL);
    mb(&b, "RESET", NULL);
    mb(&b, "PING", NULL);
    send_all(fd, b.p, b.len);
    expect_bytes(fd, "-NOAUTH Authentication required.\r\n"
                     "-NOAUTH Authentication required.\r\n"
                     "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"
                     "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
                     "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
                     "protocol version at the same time\r\n"
                     "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
                     "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
                     "-NOAUTH Authentication required.\r\n"
                     "+OK\r\n"
                     ":1\r\n"
                     "-NOPERM key \"other:n\" is outside the prefixes of token \"app\": ");
    char rest[256];
    ssize_t n = recv(fd, rest, sizeof(rest) - 1, 0);
    assert_true(n > 0);
    rest[n] = '\0';
    char *eol = strstr(rest, "\r\n");
    assert_non_null(eol);
    close(fd);
    /* the rest, on a fresh connection: HELLO 3 AUTH, then the decision */
    fd = connect_to(p.resp_port);
    b.len = 0;
    mb(&b, "HELLO", "2", "AUTH", "app", "s3cret", NULL);
    send_all(fd, b.p, b.len);
    expect_bytes(fd, "*14\r\n$6\r\nserver\r\n$5\r\ntally\r\n");
    close(fd);
    fd = connect_to(p.resp_port);
    b.len = 0;
    mb(&b, "AUTH", "app", "s3cret", NULL);
    mb(&b, "CL.THROTTLE", "app:t2", "1", "1", "60", NULL);
    mb(&b, "RESET", NULL);
    mb(&b, "PING", NULL);
    send_all(fd, b.p, b.len);
    expect_bytes(fd, "+OK\r\n*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n+RESET\r\n-NOAUTH Authentication required.\r\n");
    close(fd);
    free(b.p);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
    tmpdir_remove(dir);
}

/* The Redis port over TLS (--tls-cert): the certificate HTTPS serves. */
static void tls_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tls_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

/* An EC P-256 key and certificate dir/name.{key,pem} with subject CN=cn,
 * signed by the CA dir/ca (NULL: self-signed, a CA). */
static void tls_cert(const char *dir, const char *name, const char *cn, const char *ca)
{
    if (!ca) {
        tls_sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key "
               "-out %s.pem -days 2 -subj /CN=%s 2>/dev/null",
               dir, name, name, cn);
        return;
    }
    tls_sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key -out %s.csr "
           "-subj /CN=%s 2>/dev/null && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > %s.ext && "
           "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial -out %s.pem -days 2 "
           "-extfile %s.ext 2>/dev/null",
           dir, name, name, cn, name, name, ca, ca, name, name);
}

/* redis-cli --tls against the port with `extra` options; its output (both
 * streams) in out, its exit status returned. */
static int tls_cli(int port, const char *dir, const char *extra, const char *cmd, char *out, size_t cap)
{
    char line[2048];
    snprintf(line, sizeof(line), "timeout 20 redis-cli --tls --cacert %s/ca.pem -p %d %s %s 2>&1", dir, port, extra,
             cmd);
    FILE *f = popen(line, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    return pclose(f);
}

/* The subject of the certificate the port shows a new connection. */
static void tls_subject(int port, const char *dir, char *out, size_t cap)
{
    char script[1024];
    snprintf(script, sizeof(script),
             "import socket, ssl, sys\n"
             "ctx = ssl.create_default_context(cafile='%s/ca.pem')\n"
             "with socket.create_connection(('127.0.0.1', int(sys.argv[1]))) as raw:\n"
             "    with ctx.wrap_socket(raw, server_hostname='localhost') as s:\n"
             "        print(dict(x[0] for x in s.getpeercert()['subject'])['commonName'])\n",
             dir);
    if (!run_python(script, port, out, cap))
        fail_msg("python ssl: %s", out);
}

/* With --tls-cert the port speaks TLS only: redis-cli --tls and python3-redis
 * (ssl=True) are served, a pipeline of a thousand commands included; a
 * client speaking clear RESP gets nothing and is closed; a client that
 * never completes its handshake is closed at --header-timeout; SIGHUP
 * gives new connections the new certificate; with --tls-client-ca a
 * client without a certificate from those CAs fails its handshake. */
static void test_tls(void **state)
{
    (void)state;
    if (system("openssl version >/dev/null 2>&1") != 0 ||
        system("redis-cli --help 2>&1 | grep -q -- --tls") != 0) {
        skip();
        return;
    }
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    tls_cert(dir, "ca", "resp-test-ca", NULL);
    tls_cert(dir, "server", "first.resp.test", "ca");
    tls_cert(dir, "second", "second.resp.test", "ca");
    tls_cert(dir, "client", "a-client", "ca");
    tls_cert(dir, "stranger", "a-stranger", NULL);
    tls_sh("cd %s && cp server.pem live.pem && cp server.key live.key", dir);
    char cert[400], key[400], ca[400];
    snprintf(cert, sizeof(cert), "%s/live.pem", dir);
    snprintf(key, sizeof(key), "%s/live.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    const char *args[] = { "--in-memory", "--resp-port", "0", "--tls-cert", cert, "--tls-key", key,
                           "--header-timeout", "1", NULL };
    tally_proc_t p;
    tally_start_nowait(&p, NULL, args);
    assert_true(p.resp_port > 0);
    char out[4096];
    int rc = -1;
    for (int i = 0; i < 100; i++) {   /* until it is ready */
        rc = tls_cli(p.resp_port, dir, "", "CL.THROTTLE tls:t 1 1 60", out, sizeof(out));
        if (rc == 0 && !strstr(out, "LOADING"))
            break;
        usleep(100 * 1000);
    }
    assert_int_equal(rc, 0);
    assert_string_equal(out, "0\n2\n1\n-1\n60\n");
    assert_int_equal(tls_cli(p.resp_port, dir, "", "INCRBY tls:n 5", out, sizeof(out)), 0);
    assert_string_equal(out, "5\n");
    /* python3-redis over TLS, and a long pipeline (TLS records larger than
     * one read, decrypted input the socket no longer shows) */
    if (have_python_redis()) {
        char script[1024];
        snprintf(script, sizeof(script),
                 "import redis, sys\n"
                 "r = redis.Redis(port=int(sys.argv[1]), ssl=True, ssl_ca_certs='%s', ssl_check_hostname=False)\n"
                 "assert r.ping()\n"
                 "p = r.pipeline(transaction=False)\n"
                 "for i in range(1000):\n"
                 "    p.incr('tls:p')\n"
                 "    p.echo('x' * 3000)\n"
                 "got = p.execute()\n"
                 "assert got[-2] == 1000, got[-2]\n"
                 "assert got[-1] == b'x' * 3000\n"
                 "print(r.get('tls:n'))\n",
                 ca);
        if (!run_python(script, p.resp_port, out, sizeof(out)))
            fail_msg("python3-redis over TLS: %s", out);
        assert_string_equal(out, "b'5'\n");
    }
    /* clear RESP gets no reply: the handshake fails, the port closes */
    buf_t got = exchange(p.resp_port, "PING\r\n", 6);
    assert_null(strstr(got.p ? got.p : "", "PONG"));
    free(got.p);
    /* a handshake that never completes: closed at --header-timeout */
    int fd = connect_to(p.resp_port);
    assert_true(read_to_eof(fd, NULL));
    close(fd);
    /* SIGHUP: new connections get the new certificate */
    tls_subject(p.resp_port, dir, out, sizeof(out));
    assert_string_equal(out, "first.resp.test\n");
    tls_sh("cd %s && cp second.pem live.pem.tmp && cp second.key live.key.tmp && mv live.key.tmp live.key && "
           "mv live.pem.tmp live.pem",
           dir);
    kill(p.pid, SIGHUP);
    for (int i = 0; i < 100; i++) {
        tls_subject(p.resp_port, dir, out, sizeof(out));
        if (strcmp(out, "second.resp.test\n") == 0)
            break;
        usleep(100 * 1000);
    }
    assert_string_equal(out, "second.resp.test\n");
    assert_int_equal(tls_cli(p.resp_port, dir, "", "GET tls:n", out, sizeof(out)), 0);
    assert_string_equal(out, "5\n");
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);

    /* mTLS: --tls-client-ca */
    const char *margs[] = { "--in-memory", "--resp-port", "0", "--tls-cert", cert, "--tls-key", key,
                            "--tls-client-ca", ca, NULL };
    tally_start_nowait(&p, NULL, margs);
    char good[1024], bad[1024];
    snprintf(good, sizeof(good), "--cert %s/client.pem --key %s/client.key", dir, dir);
    snprintf(bad, sizeof(bad), "--cert %s/stranger.pem --key %s/stranger.key", dir, dir);
    for (int i = 0; i < 100; i++) {
        rc = tls_cli(p.resp_port, dir, good, "PING", out, sizeof(out));
        if (rc == 0)
            break;
        usleep(100 * 1000);
    }
    assert_int_equal(rc, 0);
    assert_string_equal(out, "PONG\n");
    tls_cli(p.resp_port, dir, "", "PING", out, sizeof(out));
    assert_null(strstr(out, "PONG"));
    tls_cli(p.resp_port, dir, bad, "PING", out, sizeof(out));
    assert_null(strstr(out, "PONG"));
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
    tmpdir_remove(dir);
}

/* --max-connections caps the port (Redis's "max number of clients"
 * refusal); --timeout closes an idle client, --header-timeout one whose
 * command stopped arriving; SIGTERM with clients connected exits 0. */
/* Whether the server closed fd (nothing sent on it) within ms. */
static bool closed_within(int fd, int ms)
{
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    if (poll(&pf, 1, ms) <= 0)
        return false;
    char b[64];
    ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void test_connection_limits(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--max-connections", "4", "--timeout", "2", "--header-timeout", "1",
                           NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_to(p.resp_port);
        send_all(fds[i], "PING\r\n", 6);
        expect_bytes(fds[i], "+PONG\r\n");
    }
    int extra = connect_to(p.resp_port);
    buf_t got = { 0 };
    assert_true(read_to_eof(extra, &got));
    assert_string_equal(got.p, "-ERR max number of clients reached\r\n");
    close(extra);
    free(got.p);
    /* one stops in the middle of a command: closed (--header-timeout);
     * fds[1] keeps talking past the idle timeout of the others (2 s): they
     * are closed, it is not.  Deadlines are checked once a second, so it
     * talks every half second at most while it waits for all three */
    send_all(fds[0], "*2\r\n$4\r\nECHO\r\n", 14);
    bool closed[4] = { false, false, false, false };
    for (int i = 0; i < 60 && !(closed[0] && closed[2] && closed[3]); i++) {
        send_all(fds[1], "PING\r\n", 6);
        expect_bytes(fds[1], "+PONG\r\n");
        for (int j = 0; j < 4; j++)
            closed[j] = j != 1 && (closed[j] || closed_within(fds[j], 150));
    }
    assert_true(closed[0] && closed[2] && closed[3]);
    send_all(fds[1], "PING\r\n", 6);
    expect_bytes(fds[1], "+PONG\r\n");
    assert_int_equal(tally_stop(&p), 0);   /* with fds[1] still connected */
    assert_true(read_to_eof(fds[1], NULL));
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    tally_cleanup(&p);
}

/* A change answered over RESP is in the journal: a restart replays it, and
 * HTTP reads what RESP wrote (one operation, two front-ends). */
static void test_durable_across_restart(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    buf_t b = { 0 };
    mb(&b, "INCRBY", "dur:n", "41", NULL);
    mb(&b, "INCR", "dur:n", NULL);
    mb(&b, "PFADD", "dur:h", "a", "b", NULL);
    mb(&b, "CL.THROTTLE", "dur:t", "0", "1", "3600", NULL);
    expect_reply(p.resp_port, &b, ":41\r\n:42\r\n:1\r\n*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:3600\r\n");
    tally_proc_t q;
    resp_restart(&p, &q, args);
    http_expect(&q, "GET", "/counter/dur:n", NULL, 200, NULL);
    http_resp_t r = http(&q, "GET", "/counter/dur:n", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 42);
    http_free(&r);
    b.len = 0;
    mb(&b, "PFCOUNT", "dur:h", NULL);
    mb(&b, "CL.THROTTLE", "dur:t", "0", "1", "3600", NULL);
    buf_t got = exchange(q.resp_port, b.p, b.len);
    if (strncmp(got.p, ":2\r\n*5\r\n:1\r\n:1\r\n:0\r\n", 20) != 0)
        fail_msg("after the restart: %s", got.p);
    assert_int_equal(strncmp(got.p, ":2\r\n*5\r\n:1\r\n:1\r\n:0\r\n", 20), 0);
    free(got.p);
    free(b.p);
    resp_restart_end(&p, &q);
}

/* A full disk (RLIMIT_FSIZE) under pipelined changes with --fsync always:
 * each pipeline's changes wait for the journal once (group commit); when
 * that wait or the journal space fails, nothing after the last reply sent
 * was acknowledged.  An exact model: the last INCR reply seen is the value
 * found after a kill -9 and a restart. */
static void test_disk_full_pipelines(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--fsync", "always", "--snapshot-interval", "0",
                           "--journal-timeout", "1", NULL };
    tally_proc_t p;
    tally_set_file_limit(16 * 1024);
    tally_start(&p, NULL, args);
    tally_set_file_limit(0);
    long long acked = 0;
    bool refused = false;
    for (int round = 0; round < 200 && !refused; round++) {
        buf_t b = { 0 };
        for (int i = 0; i < 20; i++)
            mb(&b, "INCR", "full:c", NULL);
        buf_t got = exchange(p.resp_port, b.p, b.len);
        for (char *line = got.p; line && *line; line = strstr(line, "\r\n") ? strstr(line, "\r\n") + 2 : NULL) {
            if (*line == ':') {
                long long v = strtoll(line + 1, NULL, 10);
                assert_int_equal(v, acked + 1);   /* in order, none skipped */
                acked = v;
            } else if (*line == '-') {
                refused = true;
                if (!strstr(line, "journal") && !strstr(line, "durable") && !strstr(line, "space"))
                    fail_msg("unexpected refusal: %s", line);
            }
        }
        free(got.p);
        free(b.p);
    }
    assert_true(refused);
    assert_true(acked > 0);
    tally_proc_t q;
    resp_restart(&p, &q, (const char *[]){ "--resp-port", "0", NULL });
    buf_t b = { 0 };
    mb(&b, "GET", "full:c", NULL);
    buf_t got = exchange(q.resp_port, b.p, b.len);
    char want[64];
    snprintf(want, sizeof(want), "$%d\r\n%lld\r\n", snprintf(NULL, 0, "%lld", acked), acked);
    if (strcmp(got.p, want) != 0)
        fail_msg("%lld acknowledged before the disk filled; after a restart: %s", acked, got.p);
    free(got.p);
    free(b.p);
    resp_restart_end(&p, &q);
}

/* A PFADD of more elements than one change holds (25 000 > 10 000) is
 * taken, in changes of at most 10 000, and replays after a kill -9. */
static void test_pfadd_large(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    buf_t b = { 0 };
    char w[32];
    buf_puts(&b, "*25002\r\n$5\r\nPFADD\r\n$5\r\nbig:h\r\n");
    for (int i = 0; i < 25000; i++) {
        int n = snprintf(w, sizeof(w), "e%d", i);
        char head[16];
        snprintf(head, sizeof(head), "$%d\r\n", n);
        buf_puts(&b, head);
        buf_puts(&b, w);
        buf_puts(&b, "\r\n");
    }
    mb(&b, "PFADD", "big:h", "e1", NULL);
    expect_reply(p.resp_port, &b, ":1\r\n:0\r\n");
    tally_proc_t q;
    resp_restart(&p, &q, args);
    b.len = 0;
    mb(&b, "PFCOUNT", "big:h", NULL);
    buf_t got = exchange(q.resp_port, b.p, b.len);
    long long n = strtoll(got.p + 1, NULL, 10);
    if (n < 24500 || n > 25500)
        fail_msg("PFCOUNT after the restart: %s", got.p);
    free(got.p);
    free(b.p);
    resp_restart_end(&p, &q);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_cli),
        cmocka_unit_test(test_differential),
        cmocka_unit_test(test_type_get),
        cmocka_unit_test(test_resp3),
        cmocka_unit_test(test_python_pipeline),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_idle_clients),
        cmocka_unit_test(test_slow_reader),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_connection_limits),
        cmocka_unit_test(test_durable_across_restart),
        cmocka_unit_test(test_disk_full_pipelines),
        cmocka_unit_test(test_pfadd_large),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
