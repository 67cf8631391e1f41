/*
 * it_resp_server.c - the Redis port as a server: its commands through the
 * access log (--access-log, one line per command), a reload of --tokens
 * reaching connections that authenticated before it, the server commands
 * (INFO, COMMAND, CLIENT) compared with redis-server's shapes, replicas
 * (READONLY errors, READONLY/READWRITE, WAIT), WAIT blocking its own
 * client alone, and many idle and slow clients.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd/access.h"
#include "harness.h"
#include "redis_ref.h"
#include "resp_client.h"

/* Sends cmds on a new connection, reads until `want` replies' worth of
 * bytes equal want exactly (fails otherwise), and closes. */
static void expect_exchange(int port, const buf_t *cmds, const char *want)
{
    int fd = connect_to(port);
    send_all(fd, cmds->p, cmds->len);
    expect_bytes(fd, want);
    close(fd);
}

/* True when fd has bytes to read (or its peer closed) right now. */
static bool readable_now(int fd)
{
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    return poll(&pf, 1, 0) > 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* The access log                                                           */
/* ------------------------------------------------------------------------ */

/* Each command is one line of the access log, HTTP's file and format: the
 * command's name (a container's subcommand after '|'), its first key, the
 * client, the token, the outcome ("ok" or the error's code), the
 * duration; an unknown command and a refused one are logged too. */
static void test_access_log(void **state)
{
    (void)state;
    char dir[256], logf[300], tokf[300], hex[2 * CMD_TOKEN_SHA256_LEN + 1], json[512];
    tmpdir_make(dir, sizeof(dir));
    snprintf(logf, sizeof(logf), "%s/access.log", dir);
    snprintf(tokf, sizeof(tokf), "%s/tokens.json", dir);
    cmd_token_hash_hex("s3cret", 6, hex);
    snprintf(json, sizeof(json), "{\"tokens\":[{\"name\":\"app\",\"sha256\":\"%s\",\"scopes\":[\"read\",\"write\"]}]}",
             hex);
    file_write(tokf, json, strlen(json));
    const char *args[] = { "--resp-port", "0", "--access-log", logf, "--tokens", tokf, NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    buf_t b = { 0 };
    mb(&b, "PING", NULL);
    mb(&b, "AUTH", "s3cret", NULL);
    mb(&b, "CL.THROTTLE", "al:\"t\"", "1", "1", "60", NULL);
    mb(&b, "PFADD", "al:h", "x", NULL);
    mb(&b, "INCR", "al:h", NULL);
    mb(&b, "NOSUCH", "a", NULL);
    mb(&b, "CLIENT", "SETNAME", "logged", NULL);
    expect_exchange(p.resp_port, &b,
                    "-NOAUTH Authentication required.\r\n+OK\r\n*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n:1\r\n"
                    "-ERR value is not an integer or out of range\r\n"
                    "-ERR unknown command 'NOSUCH', with args beginning with: 'a' \r\n+OK\r\n");
    free(b.p);
    char *log = NULL;
    for (int i = 0; i < 100; i++) {   /* the last line may lag the reply by a moment */
        free(log);
        size_t len;
        log = file_read(logf, &len);
        if (strstr(log, "client|setname"))
            break;
        usleep(50 * 1000);
    }
    const char *want[] = {
        "\"client\":\"127.0.0.1\",\"token\":null,\"command\":\"ping\",\"key\":null,\"outcome\":\"NOAUTH\",\"duration_ms\":",
        "\"token\":\"app\",\"command\":\"auth\",\"key\":null,\"outcome\":\"ok\"",
        "\"token\":\"app\",\"command\":\"cl.throttle\",\"key\":\"al:\\\"t\\\"\",\"outcome\":\"ok\"",
        "\"command\":\"pfadd\",\"key\":\"al:h\",\"outcome\":\"ok\"",
        "\"command\":\"incr\",\"key\":\"al:h\",\"outcome\":\"ERR\"",
        "\"command\":\"NOSUCH\",\"key\":null,\"outcome\":\"ERR\"",
        "\"command\":\"client|setname\",\"key\":null,\"outcome\":\"ok\"",
    };
    const char *at = log;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *hit = strstr(at, want[i]);
        if (!hit)
            fail_msg("access log: no line with %s after the previous one in:\n%s", want[i], log);
        at = hit;
    }
    assert_non_null(strstr(log, "{\"time\":\""));
    free(log);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
    tmpdir_remove(dir);
}

/* ------------------------------------------------------------------------ */
/* Tokens reloaded                                                          */
/* ------------------------------------------------------------------------ */

static void write_tokens(const char *path, bool with_old, const char *new_scopes)
{
    char a[2 * CMD_TOKEN_SHA256_LEN + 1], b[2 * CMD_TOKEN_SHA256_LEN + 1], json[1024];
    cmd_token_hash_hex("old-secret", 10, a);
    cmd_token_hash_hex("new-secret", 10, b);
    int n = snprintf(json, sizeof(json), "{\"tokens\":[");
    if (with_old)
        n += snprintf(json + n, sizeof(json) - (size_t)n, "{\"name\":\"old\",\"sha256\":\"%s\",\"scopes\":[\"read\",\"write\",\"admin\"]},", a);
    snprintf(json + n, sizeof(json) - (size_t)n, "{\"name\":\"new\",\"sha256\":\"%s\",\"scopes\":[%s]}]}", b,
             new_scopes);
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    file_write(tmp, json, strlen(json));
    assert_int_equal(rename(tmp, path), 0);
}

/* A reload that removes a token puts the connections that authenticated
 * with it back before AUTH: their next command answers NOAUTH, as an HTTP
 * request with that token answers 401 (the connection stays, and may
 * AUTH again); a reload that changes a token's scopes applies to its
 * connections' next command, as to HTTP's next request. */
static void test_token_reload(void **state)
{
    (void)state;
    char dir[256], tokf[300];
    tmpdir_make(dir, sizeof(dir));
    snprintf(tokf, sizeof(tokf), "%s/tokens.json", dir);
    write_tokens(tokf, true, "\"read\",\"write\",\"ratelimit\"");
    const char *args[] = { "--resp-port", "0", "--tokens", tokf, NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    int fo = connect_to(p.resp_port), fn = connect_to(p.resp_port);
    buf_t b = { 0 };
    mb(&b, "AUTH", "old-secret", NULL);
    mb(&b, "INCR", "tr:n", NULL);
    send_all(fo, b.p, b.len);
    expect_bytes(fo, "+OK\r\n:1\r\n");
    b.len = 0;
    mb(&b, "AUTH", "new", "new-secret", NULL);
    mb(&b, "INCR", "tr:n", NULL);
    send_all(fn, b.p, b.len);
    expect_bytes(fn, "+OK\r\n:2\r\n");
    /* "old" removed, "new" now read-only */
    write_tokens(tokf, false, "\"read\"");
    http_resp_t r = http_h(&p, "POST", "/admin/reload", NULL, NULL,
                           (const char *const[]){ "Authorization: Bearer old-secret", NULL });
    assert_int_equal(r.status, 200);
    http_free(&r);
    b.len = 0;
    mb(&b, "GET", "tr:n", NULL);
    mb(&b, "PING", NULL);
    send_all(fo, b.p, b.len);
    expect_bytes(fo, "-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n");
    b.len = 0;
    mb(&b, "GET", "tr:n", NULL);
    mb(&b, "INCR", "tr:n", NULL);
    send_all(fn, b.p, b.len);
    expect_bytes(fn, "$1\r\n2\r\n-NOPERM ");
    /* the connection put back before AUTH may authenticate again */
    b.len = 0;
    mb(&b, "AUTH", "old-secret", NULL);
    mb(&b, "AUTH", "new-secret", NULL);
    mb(&b, "GET", "tr:n", NULL);
    send_all(fo, b.p, b.len);
    expect_bytes(fo, "-WRONGPASS invalid username-password pair or user is disabled.\r\n+OK\r\n$1\r\n2\r\n");
    close(fo);
    close(fn);
    /* CLIENT INFO names the token as the user */
    b.len = 0;
    mb(&b, "AUTH", "new", "new-secret", NULL);
    mb(&b, "CLIENT", "INFO", NULL);
    buf_t got = exchange(p.resp_port, b.p, b.len);
    if (!strstr(got.p, " user=new redir=-1 "))
        fail_msg("CLIENT INFO: %s", got.p);
    free(got.p);
    free(b.p);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
    tmpdir_remove(dir);
}

/* ------------------------------------------------------------------------ */
/* Server commands                                                          */
/* ------------------------------------------------------------------------ */

/* COMMAND INFO, COUNT's shape, GETKEYS, an unknown INFO section, WAIT
 * without replicas and READONLY outside a cluster answer as redis-server
 * 7.0 does, byte for byte; INFO's sections, CLIENT LIST/INFO's line
 * (python3-redis parses them), CLIENT SETINFO and NO-EVICT. */
static void test_server_commands(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--in-memory", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    redis_ref_t ref;
    if (redis_ref_start(&ref)) {
        buf_t b = { 0 };
        mb(&b, "COMMAND", "INFO", "get", "incr", "pfadd", "ping", "auth", "info", "wait", "nosuch", NULL);
        mb(&b, "COMMAND", "INFO", "command|count", "client|id", "client|list", "client|setname", NULL);
        mb(&b, "COMMAND", "GETKEYS", "get", "a", NULL);
        mb(&b, "COMMAND", "GETKEYS", "pfcount", "a", "b", "c", NULL);
        mb(&b, "COMMAND", "GETKEYS", "nosuch", "a", NULL);
        mb(&b, "COMMAND", "GETKEYS", "ping", "a", NULL);
        mb(&b, "COMMAND", "NOSUCH", NULL);
        mb(&b, "COMMAND", "COUNT", "extra", NULL);
        mb(&b, "INFO", "nosuch", NULL);
        mb(&b, "WAIT", "0", "0", NULL);
        mb(&b, "WAIT", "x", "0", NULL);
        mb(&b, "WAIT", "0", "-1", NULL);
        mb(&b, "READONLY", NULL);
        mb(&b, "READWRITE", NULL);
        mb(&b, "CLIENT", "NOSUCH", NULL);
        mb(&b, "CLIENT", "ID", "extra", NULL);
        mb(&b, "CLIENT", "NO-EVICT", "on", NULL);
        mb(&b, "CLIENT", "NO-EVICT", "maybe", NULL);
        mb(&b, "CLIENT", "LIST", "TYPE", "pubsub", NULL);
        mb(&b, "CLIENT", "LIST", "TYPE", "bogus", NULL);
        mb(&b, "CLIENT", "GETNAME", NULL);
        resp_diff(ref.port, p.resp_port, &b);
        b.len = 0;
        mb(&b, "HELLO", "3", NULL);   /* RESP3: sets, maps, verbatim-free parts */
        buf_t skip = exchange(p.resp_port, b.p, b.len);
        free(skip.p);
        b.len = 0;
        mb(&b, "HELLO", "3", NULL);
        mb(&b, "COMMAND", "INFO", "get", "incr", NULL);
        buf_t want = exchange(ref.port, b.p, b.len), got = exchange(p.resp_port, b.p, b.len);
        /* after HELLO's map (which names the server): the same bytes */
        const char *w = strstr(want.p, "*2\r\n*10\r\n"), *g = strstr(got.p, "*2\r\n*10\r\n");
        assert_non_null(w);
        assert_non_null(g);
        assert_string_equal(g, w);
        free(want.p);
        free(got.p);
        free(b.p);
        redis_ref_stop(&ref);
    }
    /* INFO: Redis's layout, tally's figures */
    buf_t b = { 0 };
    mb(&b, "INCR", "sc:n", NULL);
    mb(&b, "INFO", NULL);
    mb(&b, "INFO", "server", "keyspace", NULL);
    mb(&b, "COMMAND", "COUNT", NULL);
    mb(&b, "CLIENT", "SETNAME", "me", NULL);
    mb(&b, "CLIENT", "SETINFO", "lib-name", "tally-test", NULL);
    mb(&b, "CLIENT", "SETINFO", "lib-ver", "1.2", NULL);
    mb(&b, "CLIENT", "SETINFO", "lib-nope", "1.2", NULL);
    mb(&b, "CLIENT", "INFO", NULL);
    mb(&b, "CLIENT", "LIST", NULL);
    buf_t got = exchange(p.resp_port, b.p, b.len);
    const char *want_in[] = { "# Server\r\nredis_version:7.0.15\r\ntally_version:", "\r\nredis_mode:standalone\r\n",
                              "\r\n\r\n# Clients\r\nconnected_clients:", "\r\n\r\n# Memory\r\nused_memory:",
                              "\r\n\r\n# Persistence\r\nloading:0\r\n", "\r\n\r\n# Stats\r\n",
                              "\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
                              "\r\n\r\n# CPU\r\nused_cpu_sys:", "\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n",
                              "+OK\r\n+OK\r\n+OK\r\n-ERR Unrecognized option 'lib-nope'\r\n",
                              " name=me age=", " cmd=client|info user=default redir=-1 resp=2 lib-name=tally-test lib-ver=1.2\n",
                              " cmd=client|list user=default redir=-1 resp=2 lib-name=tally-test lib-ver=1.2\n" };
    for (size_t i = 0; i < sizeof(want_in) / sizeof(want_in[0]); i++)
        if (!strstr(got.p, want_in[i]))
            fail_msg("no \"%s\" in:\n%s", want_in[i], got.p);
    char tcp[64];
    snprintf(tcp, sizeof(tcp), "tcp_port:%d\r\n", p.resp_port);
    assert_non_null(strstr(got.p, tcp));
    /* INFO server keyspace: those two sections only */
    const char *one = strstr(got.p, "# Server\r\n");
    assert_non_null(one);
    const char *two = strstr(one + 1, "# Server\r\n");
    assert_non_null(two);
    const char *after = strstr(two, "\r\n\r\n# ");
    assert_non_null(after);
    assert_int_equal(strncmp(after, "\r\n\r\n# Keyspace\r\n", 16), 0);
    free(got.p);
    free(b.p);
    /* python3-redis reads them */
    if (have_python_redis()) {
        char out[4096];
        const char *script = "import redis, sys\n"
                             "r = redis.Redis(port=int(sys.argv[1]))\n"
                             "r.client_setname('py')\n"
                             "other = redis.Redis(port=int(sys.argv[1]))\n"
                             "other.client_setname('other')\n"
                             "i = r.info()\n"
                             "assert i['redis_version'] == '7.0.15', i\n"
                             "assert i['role'] == 'master'\n"
                             "assert i['connected_clients'] >= 2, i['connected_clients']\n"
                             "assert i['db0']['keys'] == 1, i['db0']\n"
                             "names = sorted(c['name'] for c in r.client_list())\n"
                             "assert 'py' in names and 'other' in names, names\n"
                             "me = r.client_info()\n"
                             "assert me['name'] == 'py' and int(me['id']) == r.client_id(), me\n"
                             "assert r.command_count() > 20\n"
                             "cmds = r.command()\n"
                             "assert cmds['get']['arity'] == 2, cmds['get']\n"
                             "print('ok')\n";
        if (!run_python(script, p.resp_port, out, sizeof(out)))
            fail_msg("python3-redis: %s", out);
        assert_string_equal(out, "ok\n");
    }
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Replicas                                                                 */
/* ------------------------------------------------------------------------ */

/* A primary and a replica over RESP: a write to the replica answers
 * Redis's READONLY error and changes nothing; WAIT on the primary counts
 * the replica once it holds the change (and gives up at its timeout when
 * asked for more replicas than there are); WAIT on the replica is
 * refused as Redis refuses it; INFO replication says who is who. */
static void test_replicas(void **state)
{
    (void)state;
    const char *pargs[] = { "--resp-port", "0", "--threads", "1", NULL };
    tally_proc_t p, r;
    tally_start(&p, NULL, pargs);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", p.port);
    const char *rargs[] = { "--resp-port", "0", "--replica-of", url, NULL };
    tally_start(&r, NULL, rargs);
    buf_t b = { 0 };
    mb(&b, "INCRBY", "rp:n", "7", NULL);
    mb(&b, "WAIT", "1", "10000", NULL);
    expect_exchange(p.resp_port, &b, ":7\r\n:1\r\n");
    b.len = 0;
    mb(&b, "GET", "rp:n", NULL);
    mb(&b, "INCR", "rp:n", NULL);
    mb(&b, "PFADD", "rp:h", "a", NULL);
    mb(&b, "GET", "rp:n", NULL);
    mb(&b, "WAIT", "1", "10", NULL);
    mb(&b, "INFO", "replication", NULL);
    buf_t got = exchange(r.resp_port, b.p, b.len);
    const char *want = "$1\r\n7\r\n-READONLY You can't write against a read only replica.\r\n"
                       "-READONLY You can't write against a read only replica.\r\n$1\r\n7\r\n"
                       "-ERR WAIT cannot be used with replica instances.";
    if (strncmp(got.p, want, strlen(want)) != 0)
        fail_msg("replica answered:\n%s", got.p);
    assert_non_null(strstr(got.p, "# Replication\r\nrole:slave\r\n"));
    free(got.p);
    /* more replicas than there are: the timeout, then the count (on a
     * connection left open: one that closes its side while WAIT blocks it
     * is dropped, as redis-server drops it) */
    b.len = 0;
    mb(&b, "INCR", "rp:n", NULL);
    mb(&b, "WAIT", "2", "200", NULL);
    expect_exchange(p.resp_port, &b, ":8\r\n:1\r\n");
    b.len = 0;
    mb(&b, "INFO", "replication", NULL);
    got = exchange(p.resp_port, b.p, b.len);
    assert_non_null(strstr(got.p, "role:master\r\nconnected_slaves:1\r\nslave0:addr="));
    free(got.p);
    /* the replica stopped: WAIT 1 blocks its client alone (the primary's
     * single loop answers another meanwhile), and answers 1 once the
     * replica, running again, caught up */
    tally_pause(&r);
    int waiter = connect_to(p.resp_port), other = connect_to(p.resp_port);
    b.len = 0;
    mb(&b, "INCR", "rp:n", NULL);
    mb(&b, "WAIT", "1", "15000", NULL);
    mb(&b, "GET", "rp:n", NULL);
    send_all(waiter, b.p, b.len);
    expect_bytes(waiter, ":9\r\n");
    b.len = 0;
    mb(&b, "INCR", "rp:other", NULL);
    mb(&b, "PING", NULL);
    send_all(other, b.p, b.len);
    expect_bytes(other, ":1\r\n+PONG\r\n");
    assert_false(readable_now(waiter));
    tally_resume(&r);
    expect_bytes(waiter, ":1\r\n$1\r\n9\r\n");
    close(waiter);
    close(other);
    free(b.p);
    assert_int_equal(tally_stop(&r), 0);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&r);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* WAIT blocks its client alone                                             */
/* ------------------------------------------------------------------------ */

/* The client in WAIT, on a primary without replicas, is parked: its
 * loop (one: --threads 1) answers the other clients meanwhile, the
 * commands pipelined after WAIT run after its answer, in order; inside
 * MULTI it answers at once (as Redis); a client gone while parked is
 * freed; one parked when tallyd stops gets the count so far and the
 * stop does not wait for its timeout. */
static void test_wait_blocks_its_client(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--threads", "1", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    int waiter = connect_to(p.resp_port), other = connect_to(p.resp_port);
    buf_t b = { 0 };
    mb(&b, "INCR", "w:before", NULL);
    mb(&b, "WAIT", "1", "2000", NULL);
    mb(&b, "INCR", "w:before", NULL);
    int64_t t0 = now_ms();
    send_all(waiter, b.p, b.len);
    expect_bytes(waiter, ":1\r\n");   /* what came before WAIT is answered at once */
    for (int i = 1; i <= 20; i++) {
        b.len = 0;
        mb(&b, "PING", NULL);
        mb(&b, "INCR", "w:other", NULL);
        send_all(other, b.p, b.len);
        char want[32];
        snprintf(want, sizeof(want), "+PONG\r\n:%d\r\n", i);
        expect_bytes(other, want);
    }
    assert_false(readable_now(waiter));   /* the other client's answers came first */
    expect_bytes(waiter, ":0\r\n:2\r\n");
    assert_true(now_ms() - t0 >= 1900);   /* WAIT waited out its timeout */
    /* a pipeline around WAITs keeps its order, whether WAIT answers at
     * once (0 replicas wanted) or after its timeout */
    b.len = 0;
    mb(&b, "INCR", "w:a", NULL);
    mb(&b, "WAIT", "0", "0", NULL);
    mb(&b, "INCR", "w:a", NULL);
    mb(&b, "WAIT", "1", "50", NULL);
    mb(&b, "INCR", "w:a", NULL);
    mb(&b, "WAIT", "2", "20", NULL);
    mb(&b, "WAIT", "1", "1", NULL);
    mb(&b, "PING", NULL);
    send_all(waiter, b.p, b.len);
    expect_bytes(waiter, ":1\r\n:0\r\n:2\r\n:0\r\n:3\r\n:0\r\n:0\r\n+PONG\r\n");
    /* inside MULTI: the count at once, not the 60 s of WAIT 1 0 */
    b.len = 0;
    mb(&b, "MULTI", NULL);
    mb(&b, "INCR", "w:a", NULL);
    mb(&b, "WAIT", "1", "0", NULL);
    mb(&b, "EXEC", NULL);
    t0 = now_ms();
    send_all(waiter, b.p, b.len);
    expect_bytes(waiter, "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:4\r\n:0\r\n");
    assert_true(now_ms() - t0 < 10000);
    /* a client that leaves while parked is freed: gone from CLIENT LIST */
    int gone = connect_to(p.resp_port);
    b.len = 0;
    mb(&b, "CLIENT", "SETNAME", "parked-gone", NULL);
    mb(&b, "WAIT", "1", "0", NULL);
    send_all(gone, b.p, b.len);
    expect_bytes(gone, "+OK\r\n");
    close(gone);
    bool listed = true;
    for (int i = 0; i < 100 && listed; i++) {
        b.len = 0;
        mb(&b, "CLIENT", "LIST", NULL);
        send_all(other, b.p, b.len);
        char head[32];
        size_t hl = 0;
        while (hl < sizeof(head) - 1) {
            ssize_t r = recv(other, head + hl, 1, 0);
            assert_true(r == 1);
            if (head[hl++] == '\n')
                break;
        }
        head[hl] = '\0';
        assert_int_equal(head[0], '$');
        size_t len = (size_t)atol(head + 1) + 2, got = 0;
        char *list = malloc(len + 1);
        while (got < len) {
            ssize_t r = recv(other, list + got, len - got, 0);
            assert_true(r > 0);
            got += (size_t)r;
        }
        list[len] = '\0';
        listed = strstr(list, "name=parked-gone ") != NULL;
        free(list);
        if (listed)
            usleep(20 * 1000);
    }
    assert_false(listed);
    /* one parked at the stop (PING's answer: WAIT was read, with it):
     * answered, and the stop is prompt */
    b.len = 0;
    mb(&b, "PING", NULL);
    mb(&b, "WAIT", "1", "0", NULL);
    send_all(waiter, b.p, b.len);
    expect_bytes(waiter, "+PONG\r\n");
    t0 = now_ms();
    assert_int_equal(tally_stop(&p), 0);
    assert_true(now_ms() - t0 < 30000);
    expect_bytes(waiter, ":0\r\n");
    close(waiter);
    close(other);
    free(b.p);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Many clients                                                             */
/* ------------------------------------------------------------------------ */

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

/* 10 000 idle clients and 500 slow ones (each sending its command one
 * byte at a time, and never reading a large reply) at once: nothing
 * crashes, memory stays bounded, and another client is served throughout
 * and after; CLIENT LIST lists them all. */
static void test_many_clients(void **state)
{
    (void)state;
    enum { IDLE = 10000, SLOW = 500 };
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t need = IDLE + SLOW + 256;
    if (rl.rlim_cur < need) {
        rl.rlim_cur = need <= rl.rlim_max ? need : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);   /* inherited by tallyd */
    }
    if (rl.rlim_cur < need) {
        fprintf(stderr, "it_resp_server: RLIMIT_NOFILE %llu < %llu; skipped\n", (unsigned long long)rl.rlim_cur,
                (unsigned long long)need);
        skip();
        return;
    }
    const char *args[] = { "--resp-port", "0", "--in-memory", "--max-connections", "11000", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    long before = rss_kb(p.pid);
    int *idle = malloc(IDLE * sizeof(int)), *slow = malloc(SLOW * sizeof(int));
    for (int i = 0; i < IDLE; i++)
        idle[i] = connect_to(p.resp_port);
    const char *cmd = "*2\r\n$4\r\nECHO\r\n$6\r\nslowly\r\n";   /* without its last \n until the end */
    size_t cmdlen = strlen(cmd);
    for (int i = 0; i < SLOW; i++) {
        slow[i] = connect_to(p.resp_port);
        int small = 4096;
        setsockopt(slow[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    }
    int probe = connect_to(p.resp_port);
    for (size_t k = 0; k + 1 < cmdlen; k++) {   /* one byte at a time, to each slow client */
        for (int i = 0; i < SLOW; i++)
            send_all(slow[i], cmd + k, 1);
        if (k % 8 == 0) {
            send_all(probe, "PING\r\n", 6);
            expect_bytes(probe, "+PONG\r\n");
        }
    }
    /* each one is answered once its command is complete */
    for (int i = 0; i < SLOW; i++)
        send_all(slow[i], "\n", 1);
    for (int i = 0; i < SLOW; i += 50)
        expect_bytes(slow[i], "$6\r\nslowly\r\n");
    /* then large replies none of them reads */
    char big[64 * 1024 + 64];
    int n = snprintf(big, sizeof(big), "*2\r\n$4\r\nECHO\r\n$%d\r\n", 64 * 1024);
    memset(big + n, 'y', 64 * 1024);
    memcpy(big + n + 64 * 1024, "\r\n", 2);
    for (int i = 0; i < SLOW; i++)
        for (int j = 0; j < 4; j++) {
            ssize_t w = send(slow[i], big, (size_t)n + 64 * 1024 + 2, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
        }
    send_all(probe, "PING\r\n", 6);
    expect_bytes(probe, "+PONG\r\n");
    buf_t b = { 0 };
    mb(&b, "CLIENT", "LIST", NULL);
    send_all(probe, b.p, b.len);
    free(b.p);
    /* the list's bulk: count its lines */
    char head[32];
    size_t hl = 0;
    while (hl < sizeof(head) - 1) {
        ssize_t r = recv(probe, head + hl, 1, 0);
        assert_true(r == 1);
        if (head[hl++] == '\n')
            break;
    }
    head[hl] = '\0';
    assert_int_equal(head[0], '$');
    long len = atol(head + 1);
    char *list = malloc((size_t)len + 2);
    size_t got = 0;
    while (got < (size_t)len + 2) {
        ssize_t r = recv(probe, list + got, (size_t)len + 2 - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
    long lines = 0;
    for (long i = 0; i < len; i++)
        lines += list[i] == '\n';
    free(list);
    assert_true(lines >= IDLE + 1);
    long during = rss_kb(p.pid);
    /* 64 KiB of input buffer at most and a few replies per connection: far
     * below 2 GB; the bound that matters is that it does not grow with
     * what the slow clients were sent beyond their caps */
    if (during - before > 1024 * 1024)
        fail_msg("tallyd grew from %ld kB to %ld kB with %d idle and %d slow clients", before, during, IDLE, SLOW);
    for (int i = 0; i < IDLE; i++)
        close(idle[i]);
    for (int i = 0; i < SLOW; i++)
        close(slow[i]);
    send_all(probe, "PING\r\n", 6);
    expect_bytes(probe, "+PONG\r\n");
    close(probe);
    free(idle);
    free(slow);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_access_log),
        cmocka_unit_test(test_token_reload),
        cmocka_unit_test(test_server_commands),
        cmocka_unit_test(test_replicas),
        cmocka_unit_test(test_wait_blocks_its_client),
        cmocka_unit_test(test_many_clients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
