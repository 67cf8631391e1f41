/*
 * it_resp_cluster.c - a 3-node tally cluster that Redis cluster clients
 * route themselves over the Redis port (redis/cmds_cluster.c):
 *
 *   - CLUSTER KEYSLOT against a real redis-server started with
 *     cluster-enabled, for many keys (hash tags, empty tags, binary bytes),
 *     byte for byte; and the "cluster support disabled" answers of a node
 *     without --cluster, byte for byte against a plain redis-server;
 *   - CLUSTER SLOTS (exact bytes), SHARDS, NODES, MYID, INFO from the map;
 *   - MOVED naming the owner's Redis address, CROSSSLOT for DEL, EXISTS,
 *     PFCOUNT, PFMERGE over several slots (and nothing changed), ASK while
 *     a slot migrates, ASKING for one command only, TRYAGAIN for a
 *     multi-key command whose keys have partly moved;
 *   - redis-cli -c following MOVED;
 *   - redis-py's RedisCluster (Debian's python3-redis) writing many keys
 *     over every node, then tally-reshard moving slots between nodes while
 *     the client keeps writing (it follows ASK and MOVED), then every value
 *     checked against the client's model and against the owners.
 */
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/slot.h"
#include "harness.h"
#include "redis_ref.h"
#include "resp_client.h"

#define NODES 3

static tally_proc_t N[NODES];
static tally_proc_t P;                 /* a node without --cluster */
static char dirs[NODES][256];
static const char *const names[NODES] = { "a", "b", "c" };
static unsigned epoch = 1;

/* The map: a 0-5460, b 5461-10922, c 10923-16383, and `extra` lines. */
static void map_text(char *out, size_t n, const char *slots, const char *extra)
{
    snprintf(out, n,
             "epoch %u\nnode a 127.0.0.1:%d resp=127.0.0.1:%d\nnode b 127.0.0.1:%d resp=127.0.0.1:%d\n"
             "node c 127.0.0.1:%d resp=127.0.0.1:%d\n%s%s",
             epoch, N[0].port, N[0].resp_port, N[1].port, N[1].resp_port, N[2].port, N[2].resp_port,
             slots ? slots : "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n", extra ? extra : "");
}

static void put_map(const char *text)
{
    json_t *j = json_pack("{s:s}", "map", text);
    char *body = json_dumps(j, JSON_COMPACT);
    for (int i = 0; i < NODES; i++) {
        http_resp_t r = http(&N[i], "PUT", "/admin/cluster", body, NULL);
        if (r.status != 200)
            fail_msg("PUT /admin/cluster on %s: %ld %s", names[i], r.status, r.body);
        http_free(&r);
    }
    free(body);
    json_decref(j);
}

static int setup(void **state)
{
    (void)state;
    const char *boot = "epoch 1\nnode a 127.0.0.1:1\nnode b 127.0.0.1:2\nnode c 127.0.0.1:3\n"
                       "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n";
    for (int i = 0; i < NODES; i++) {
        tmpdir_make(dirs[i], sizeof(dirs[i]));
        char path[1100];
        snprintf(path, sizeof(path), "%s/cluster.map", dirs[i]);
        file_write(path, boot, strlen(boot));
        const char *args[] = { "--cluster", path, "--cluster-node", names[i], "--resp-port", "0", NULL };
        tally_start(&N[i], dirs[i], args);
    }
    static const char *const pargs[] = { "--resp-port", "0", NULL };
    tally_start(&P, NULL, pargs);
    char text[1024];
    epoch = 2;
    map_text(text, sizeof(text), NULL, NULL);
    put_map(text);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(tally_stop(&N[i]), 0);
        tally_cleanup(&N[i]);
        tmpdir_remove(dirs[i]);
    }
    assert_int_equal(tally_stop(&P), 0);
    tally_cleanup(&P);
    return 0;
}

/* The owner of a slot under the setup's map. */
static int owner_of(unsigned slot) { return slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2; }

/* One command's raw reply from a port (at most 8 words, NULL-terminated). */
static buf_t cmd1(int port, const char *w0, ...)
{
    const char *w[9] = { w0 };
    va_list ap;
    va_start(ap, w0);
    for (size_t n = 1; n < 8 && (w[n] = va_arg(ap, const char *)) != NULL; n++)
        ;
    va_end(ap);
    buf_t m = { 0 };
    mb(&m, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], NULL);
    buf_t b = exchange(port, m.p, m.len);
    free(m.p);
    return b;
}

#define EXPECT_REPLY(port, want, ...)                                                                          \
    do {                                                                                                       \
        buf_t got_ = cmd1(port, __VA_ARGS__, NULL);                                                            \
        if (got_.len != strlen(want) || memcmp(got_.p, want, got_.len) != 0)                                   \
            fail_msg("%s:%d: got '%.*s', want '%s'", __FILE__, __LINE__, (int)got_.len, got_.p, want);         \
        free(got_.p);                                                                                          \
    } while (0)

/* A key (prefix + number) whose slot satisfies pred. */
static void key_where(char *out, size_t n, const char *prefix, bool (*pred)(unsigned))
{
    for (int i = 0;; i++) {
        snprintf(out, n, "%s%d", prefix, i);
        if (pred(slot_of(out, strlen(out))))
            return;
    }
}

/* ------------------------------------------------------------------------ */
/* CLUSTER KEYSLOT against redis-server                                     */
/* ------------------------------------------------------------------------ */

/* redis-server with cluster-enabled (CLUSTER KEYSLOT answers only then),
 * in its own directory; false when redis-server is not installed. */
static bool cluster_redis_start(char *dir, size_t dlen, pid_t *pid, int *port)
{
    if (system("command -v redis-server >/dev/null 2>&1") != 0)
        return false;
    tmpdir_make(dir, dlen);
    for (int attempt = 0; attempt < 5; attempt++) {
        *port = tally_free_port();
        char ps[16], conf[400], log[400];
        snprintf(ps, sizeof(ps), "%d", *port);
        snprintf(conf, sizeof(conf), "%s/nodes.conf", dir);
        snprintf(log, sizeof(log), "%s/redis.log", dir);
        *pid = fork();
        if (*pid == 0) {
            execlp("redis-server", "redis-server", "--port", ps, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                   "no", "--dir", dir, "--logfile", log, "--cluster-enabled", "yes", "--cluster-config-file", conf,
                   (char *)NULL);
            _exit(127);
        }
        for (int i = 0; i < 500; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
            bool up = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
            if (fd >= 0)
                close(fd);
            if (up) {
                /* the port answered: redis-server's, unless another process
                 * took the port first and redis-server is exiting on it */
                struct timespec ts = { 0, 100 * 1000000L };
                nanosleep(&ts, NULL);
                if (waitpid(*pid, NULL, WNOHANG) == *pid)
                    break;
                return true;
            }
            if (waitpid(*pid, NULL, WNOHANG) == *pid)
                break;
            struct timespec ts = { 0, 10 * 1000000L };
            nanosleep(&ts, NULL);
        }
        kill(*pid, SIGTERM);
        waitpid(*pid, NULL, 0);
    }
    fail_msg("redis-server --cluster-enabled yes did not start");
    return false;
}

static void test_keyslot_like_redis(void **state)
{
    (void)state;
    /* many keys: plain, tagged, empty and odd tags, binary bytes */
    buf_t cmds = { 0 };
    static const char *const fixed[] = { "", "foo", "bar", "{user1000}.following", "{user1000}.followers",
                                         "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "x{",
                                         "}x{y", "a}{b}", "{tenant42}:logins", "123456789", "{a}{b}", "{{}}" };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        mb(&cmds, "CLUSTER", "KEYSLOT", fixed[i], NULL);
    unsigned seed = 40;
    for (int i = 0; i < 400; i++) {
        char k[40];
        size_t n = 1 + (size_t)(rand_r(&seed) % 30);
        for (size_t j = 0; j < n; j++) {
            int r = rand_r(&seed) % 16;
            k[j] = r == 0 ? '{' : r == 1 ? '}' : (char)(' ' + rand_r(&seed) % 95);
        }
        /* a binary key, as RESP carries it */
        char line[128];
        int len = snprintf(line, sizeof(line), "*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$%zu\r\n", n);
        buf_put(&cmds, line, (size_t)len);
        buf_put(&cmds, k, n);
        buf_put(&cmds, "\r\n", 2);
        if (i % 50 == 0) {
            k[0] = '\0';   /* a NUL byte inside */
            len = snprintf(line, sizeof(line), "*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$%zu\r\n", n);
            buf_put(&cmds, line, (size_t)len);
            buf_put(&cmds, k, n);
            buf_put(&cmds, "\r\n", 2);
        }
    }
    mb(&cmds, "CLUSTER", "KEYSLOT", NULL);          /* arity errors */
    mb(&cmds, "CLUSTER", "KEYSLOT", "a", "b", NULL);
    mb(&cmds, "CLUSTER", "NOSUCH", NULL);
    char dir[256];
    pid_t pid;
    int port;
    if (!cluster_redis_start(dir, sizeof(dir), &pid, &port)) {
        printf("SKIP CLUSTER KEYSLOT against redis-server: not installed\n");
        /* still: the known values */
        EXPECT_REPLY(N[0].resp_port, ":12182\r\n", "CLUSTER", "KEYSLOT", "foo");
        EXPECT_REPLY(N[0].resp_port, ":3443\r\n", "CLUSTER", "KEYSLOT", "{user1000}.following");
    } else {
        resp_diff(port, N[0].resp_port, &cmds);
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        tmpdir_remove(dir);
    }
    free(cmds.p);
}

/* A node without --cluster answers as a Redis without cluster support. */
static void test_cluster_disabled(void **state)
{
    (void)state;
    redis_ref_t R;
    buf_t cmds = { 0 };
    mb(&cmds, "CLUSTER", "SLOTS", NULL);
    mb(&cmds, "CLUSTER", "SHARDS", NULL);
    mb(&cmds, "CLUSTER", "NODES", NULL);
    mb(&cmds, "CLUSTER", "MYID", NULL);
    mb(&cmds, "CLUSTER", "INFO", NULL);
    mb(&cmds, "CLUSTER", "KEYSLOT", "foo", NULL);
    mb(&cmds, "READONLY", NULL);
    mb(&cmds, "READWRITE", NULL);
    mb(&cmds, "ASKING", NULL);
    mb(&cmds, "READONLY", "x", NULL);
    if (!redis_ref_start(&R)) {
        printf("SKIP cluster disabled against redis-server: not installed\n");
        EXPECT_REPLY(P.resp_port, "-ERR This instance has cluster support disabled\r\n", "CLUSTER", "SLOTS");
    } else {
        resp_diff(R.port, P.resp_port, &cmds);
        redis_ref_stop(&R);
    }
    free(cmds.p);
}

/* ------------------------------------------------------------------------ */
/* The map as Redis Cluster's commands give it                              */
/* ------------------------------------------------------------------------ */

static void node_id_of(int node, char *id, size_t n)
{
    buf_t b = cmd1(N[node].resp_port, "CLUSTER", "MYID", NULL);
    assert_true(b.len == 5 + 40 + 2 && memcmp(b.p, "$40\r\n", 5) == 0);
    snprintf(id, n, "%.40s", b.p + 5);
    free(b.p);
}

static void test_cluster_slots_shards_nodes(void **state)
{
    (void)state;
    char ids[NODES][41];
    for (int i = 0; i < NODES; i++) {
        node_id_of(i, ids[i], sizeof(ids[i]));
        for (int j = 0; j < i; j++)
            assert_string_not_equal(ids[i], ids[j]);
    }
    /* every node says the same: the map's ranges with each owner's Redis address and id */
    char want[2048];
    snprintf(want, sizeof(want),
             "*3\r\n"
             "*3\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:%d\r\n$40\r\n%s\r\n*0\r\n"
             "*3\r\n:5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:%d\r\n$40\r\n%s\r\n*0\r\n"
             "*3\r\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:%d\r\n$40\r\n%s\r\n*0\r\n",
             N[0].resp_port, ids[0], N[1].resp_port, ids[1], N[2].resp_port, ids[2]);
    for (int i = 0; i < NODES; i++)
        EXPECT_REPLY(N[i].resp_port, want, "CLUSTER", "SLOTS");
    /* SHARDS: a shard per node, its ranges and its one node */
    buf_t b = cmd1(N[1].resp_port, "CLUSTER", "SHARDS", NULL);
    char shard[1024];
    snprintf(shard, sizeof(shard),
             "*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n%s\r\n"
             "$4\r\nport\r\n:%d\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
             "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n",
             ids[1], N[1].resp_port);
    if (b.len < 4 || memcmp(b.p, "*3\r\n", 4) != 0 || !memmem(b.p, b.len, shard, strlen(shard)))
        fail_msg("CLUSTER SHARDS: %.*s\nwant a shard: %s", (int)b.len, b.p, shard);
    free(b.p);
    /* NODES: a line per node, "myself" on the one asked */
    b = cmd1(N[2].resp_port, "CLUSTER", "NODES", NULL);
    char line[256];
    snprintf(line, sizeof(line), "%s 127.0.0.1:%d@0 myself,master - 0 0 %u connected 10923-16383\n", ids[2],
             N[2].resp_port, epoch);
    if (!memmem(b.p, b.len, line, strlen(line)))
        fail_msg("CLUSTER NODES: %.*s\nwant: %s", (int)b.len, b.p, line);
    snprintf(line, sizeof(line), "%s 127.0.0.1:%d@0 master - 0 0 %u connected 0-5460\n", ids[0], N[0].resp_port,
             epoch);
    if (!memmem(b.p, b.len, line, strlen(line)))
        fail_msg("CLUSTER NODES: %.*s\nwant: %s", (int)b.len, b.p, line);
    free(b.p);
    /* INFO: the state redis-cli --cluster and clients read */
    b = cmd1(N[0].resp_port, "CLUSTER", "INFO", NULL);
    char ep[64];
    snprintf(ep, sizeof(ep), "cluster_current_epoch:%u\r\n", epoch);
    if (!memmem(b.p, b.len, "cluster_state:ok\r\n", 18) || !memmem(b.p, b.len, "cluster_known_nodes:3\r\n", 23) ||
        !memmem(b.p, b.len, "cluster_slots_assigned:16384\r\n", 30) || !memmem(b.p, b.len, ep, strlen(ep)))
        fail_msg("CLUSTER INFO: %.*s", (int)b.len, b.p);
    free(b.p);
    EXPECT_REPLY(N[0].resp_port, "+OK\r\n", "READONLY");
    EXPECT_REPLY(N[0].resp_port, "+OK\r\n", "READWRITE");
    EXPECT_REPLY(N[0].resp_port, "-ERR unknown subcommand 'nosuch'. Try CLUSTER HELP.\r\n", "CLUSTER", "nosuch");
    EXPECT_REPLY(N[0].resp_port, "-ERR wrong number of arguments for 'cluster|slots' command\r\n", "CLUSTER",
                 "SLOTS", "x");
}

/* ------------------------------------------------------------------------ */
/* MOVED, CROSSSLOT, ASK, ASKING, TRYAGAIN                                  */
/* ------------------------------------------------------------------------ */

static bool in_a(unsigned s) { return owner_of(s) == 0; }
static bool in_b(unsigned s) { return owner_of(s) == 1; }
static bool in_c(unsigned s) { return owner_of(s) == 2; }
static bool in_0_99(unsigned s) { return s < 100; }

static void test_moved_and_crossslot(void **state)
{
    (void)state;
    char kb[64], kc[64], want[128];
    key_where(kb, sizeof(kb), "mv:b:", in_b);
    key_where(kc, sizeof(kc), "mv:c:", in_c);
    unsigned sb = slot_of(kb, strlen(kb));
    snprintf(want, sizeof(want), "-MOVED %u 127.0.0.1:%d\r\n", sb, N[1].resp_port);
    EXPECT_REPLY(N[0].resp_port, want, "INCR", kb);
    EXPECT_REPLY(N[0].resp_port, want, "GET", kb);
    EXPECT_REPLY(N[0].resp_port, want, "PFADD", kb, "x");
    EXPECT_REPLY(N[1].resp_port, ":1\r\n", "INCR", kb);
    EXPECT_REPLY(N[2].resp_port, ":1\r\n", "INCR", kc);
    /* keys in two slots: CROSSSLOT, whichever node is asked, and nothing changes */
    const char *cross = "-CROSSSLOT Keys in request don't hash to the same slot\r\n";
    for (int i = 0; i < NODES; i++) {
        EXPECT_REPLY(N[i].resp_port, cross, "DEL", kb, kc);
        EXPECT_REPLY(N[i].resp_port, cross, "EXISTS", kb, kc);
        EXPECT_REPLY(N[i].resp_port, cross, "PFCOUNT", kb, kc);
        EXPECT_REPLY(N[i].resp_port, cross, "PFMERGE", kb, kc);
        EXPECT_REPLY(N[i].resp_port, cross, "UNLINK", kb, kb, kc);
    }
    EXPECT_REPLY(N[1].resp_port, "$1\r\n1\r\n", "GET", kb);
    EXPECT_REPLY(N[2].resp_port, "$1\r\n1\r\n", "GET", kc);
    /* a hash tag keeps keys together: served by their owner */
    char t1[128], t2[128];
    snprintf(t1, sizeof(t1), "{%s}:1", kb);
    snprintf(t2, sizeof(t2), "{%s}:2", kb);
    EXPECT_REPLY(N[1].resp_port, ":1\r\n", "PFADD", t1, "x");
    EXPECT_REPLY(N[1].resp_port, ":1\r\n", "PFADD", t2, "y");
    EXPECT_REPLY(N[1].resp_port, ":2\r\n", "PFCOUNT", t1, t2);
    EXPECT_REPLY(N[1].resp_port, ":2\r\n", "DEL", t1, t2);
    EXPECT_REPLY(N[0].resp_port, want, "DEL", t1, t2);
}

static void test_ask_asking_tryagain(void **state)
{
    (void)state;
    /* slots 0-99 migrate from a to b */
    char text[1024], kstay[64], kgone[128], knew[64], want[128];
    key_where(kstay, sizeof(kstay), "ask:stay:", in_0_99);
    snprintf(kgone, sizeof(kgone), "{%s}gone", kstay);   /* same slot */
    key_where(knew, sizeof(knew), "ask:new:", in_0_99);
    unsigned s = slot_of(kstay, strlen(kstay)), sn = slot_of(knew, strlen(knew));
    EXPECT_REPLY(N[0].resp_port, ":5\r\n", "INCRBY", kstay, "5");
    epoch++;
    map_text(text, sizeof(text), NULL, "migrate 0-99 a b\n");
    put_map(text);
    /* CLUSTER NODES shows the moving slots on both sides, as Redis does */
    char ida[41], idb[41], mig[128];
    node_id_of(0, ida, sizeof(ida));
    node_id_of(1, idb, sizeof(idb));
    buf_t nb = cmd1(N[0].resp_port, "CLUSTER", "NODES", NULL);
    snprintf(mig, sizeof(mig), " [0->-%s] [1->-%s]", idb, idb);
    if (!memmem(nb.p, nb.len, mig, strlen(mig)))
        fail_msg("CLUSTER NODES on the source: %.*s\nwant: %s", (int)nb.len, nb.p, mig);
    free(nb.p);
    nb = cmd1(N[1].resp_port, "CLUSTER", "NODES", NULL);
    snprintf(mig, sizeof(mig), " [99-<-%s]\n", ida);
    if (!memmem(nb.p, nb.len, mig, strlen(mig)))
        fail_msg("CLUSTER NODES on the target: %.*s\nwant: %s", (int)nb.len, nb.p, mig);
    free(nb.p);
    /* the source serves the keys it still holds */
    EXPECT_REPLY(N[0].resp_port, ":6\r\n", "INCR", kstay);
    /* a key it does not hold: ASK, naming the target's Redis address */
    snprintf(want, sizeof(want), "-ASK %u 127.0.0.1:%d\r\n", sn, N[1].resp_port);
    EXPECT_REPLY(N[0].resp_port, want, "INCR", knew);
    /* the target: MOVED to the owner, unless ASKING came first, for one command */
    char moved[128];
    snprintf(moved, sizeof(moved), "-MOVED %u 127.0.0.1:%d\r\n", sn, N[0].resp_port);
    EXPECT_REPLY(N[1].resp_port, moved, "INCR", knew);
    buf_t m = { 0 };
    mb(&m, "ASKING", NULL);
    mb(&m, "INCR", knew, NULL);
    mb(&m, "INCR", knew, NULL);
    buf_t got = exchange(N[1].resp_port, m.p, m.len);
    char w3[256];
    snprintf(w3, sizeof(w3), "+OK\r\n:1\r\n%s", moved);
    if (got.len != strlen(w3) || memcmp(got.p, w3, got.len) != 0)
        fail_msg("ASKING: got '%.*s', want '%s'", (int)got.len, got.p, w3);
    free(got.p);
    free(m.p);
    /* kgone is on the target (moved there as tally-reshard would): a
     * command on kstay and kgone together finds only some keys: TRYAGAIN */
    m.p = NULL;
    m.len = m.cap = 0;
    mb(&m, "ASKING", NULL);
    mb(&m, "PFADD", kgone, "x", NULL);
    free(exchange(N[1].resp_port, m.p, m.len).p);
    free(m.p);
    EXPECT_REPLY(N[0].resp_port, "-TRYAGAIN Multiple keys request during rehashing of slot\r\n", "PFCOUNT", kgone,
                 kstay);
    (void)s;
}

/* ------------------------------------------------------------------------ */
/* Real clients                                                             */
/* ------------------------------------------------------------------------ */

static void test_redis_cli_follows_moved(void **state)
{
    (void)state;
    /* back to the setup's ownership (after the migration test) */
    char text[1024];
    epoch++;
    map_text(text, sizeof(text), NULL, NULL);
    put_map(text);
    char kc[64], cmd[512], out[1024];
    key_where(kc, sizeof(kc), "cli:c:", in_c);
    snprintf(cmd, sizeof(cmd), "redis-cli -c -p %d INCRBY %s 7 2>&1 && redis-cli -c -p %d GET %s 2>&1",
             N[0].resp_port, kc, N[1].resp_port, kc);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    assert_int_equal(pclose(f), 0);
    unsigned s = slot_of(kc, strlen(kc));
    /* the answer of each, after redis-cli's redirect line */
    /* (redis-cli prints its "-> Redirected" line only on a terminal) */
    if (strcmp(out, "7\n7\n") != 0)
        fail_msg("redis-cli -c: '%s', want INCRBY's 7 from node a and GET's 7 from node b, both redirected to c (slot "
                 "%u)", out, s);
    EXPECT_REPLY(N[2].resp_port, "$1\r\n7\r\n", "GET", kc);
}

/* How many MOVED a node has answered (/info's cluster.answers). */
static long long moved_count(int node)
{
    json_t *info = http_get_json(&N[node], "/info");
    json_t *a = json_object_get(json_object_get(json_object_get(info, "cluster"), "answers"), "moved");
    assert_non_null(a);
    long long v = json_integer_value(a);
    json_decref(info);
    return v;
}

static void test_redis_cluster_client_through_reshard(void **state)
{
    (void)state;
    if (!have_python_redis()) {
        printf("SKIP RedisCluster: python3-redis is not installed\n");
        return;
    }
    char bin[600], script[8192], out[8192];
    snprintf(bin, sizeof(bin), "%s/tally-reshard", getenv("BUILD") ? getenv("BUILD") : "build/release");
    /* RedisCluster reads INFO's cluster_enabled and COMMAND's key positions
     * at start: tally's own answers */
    snprintf(script, sizeof(script),
             "import sys, subprocess, logging, redis\n"
             "logging.disable(logging.CRITICAL)   # redis-py logs every ASK it follows\n"
             "from redis.cluster import RedisCluster\n"
             "port = int(sys.argv[1])\n"
             "rc = RedisCluster(host='127.0.0.1', port=port)\n"
             "assert len(rc.get_primaries()) == 3, rc.get_nodes()\n"
             "model = {}\n"
             "def write(i, n):\n"
             "    k = 'rc:%%d' %% i\n"
             "    v = rc.incrby(k, n)\n"
             "    model[k] = model.get(k, 0) + n\n"
             "    assert v == model[k], (k, v, model[k])\n"
             "    rc.pfadd('rc:{%%d}:hll' %% (i %% 50), k)\n"
             "for i in range(1500):\n"
             "    write(i, i %% 7 + 1)\n"
             "assert rc.cluster_keyslot('{user1000}.following') == 3443\n"
             "# move slots 5461-8191 from b to c while writing\n"
             "p = subprocess.Popen(['%s', '--node', '127.0.0.1:%d', '--slots', '5461-8191', '--to', 'c',\n"
             "                      '--batch', '20'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)\n"
             "rounds = 0\n"
             "while p.poll() is None or rounds < 1:\n"
             "    for i in range(1500):\n"
             "        write(i, 1)\n"
             "    rounds += 1\n"
             "outp = p.stdout.read().decode()\n"
             "assert p.returncode == 0, outp\n"
             "for i in range(0, 1500, 3):\n"
             "    write(i, 2)\n"
             "bad = [k for k, v in model.items() if int(rc.get(k)) != v]\n"
             "assert not bad, bad[:10]\n"
             "hll = sum(rc.pfcount('rc:{%%d}:hll' %% j) for j in range(50))\n"
             "assert abs(hll - 1500) < 60, hll\n"
             "slots = rc.cluster_slots(target_nodes=RedisCluster.RANDOM)\n"
             "owners = sorted((lo, hi, a[1]) for (lo, hi), v in slots.items() for a in [v['primary']])\n"
             "print('rounds', rounds, 'keys', len(model), 'owners', owners)\n",
             bin, N[1].port);
    long long moved0 = moved_count(1);
    if (!run_python(script, N[0].resp_port, out, sizeof(out)))
        fail_msg("RedisCluster through a reshard:\n%s", out);
    printf("RedisCluster: %s", out);
    /* the client was sent on by b at least once (its slot map was old after the flip) */
    long long nmoved = moved_count(1) - moved0;
    printf("RedisCluster: node b answered %lld MOVED during and after the move\n", nmoved);
    assert_true(nmoved > 0);
    /* the owners after the move: b keeps 8192-10922, c has 5461-8191 */
    char want[256];
    snprintf(want, sizeof(want), "(5461, 8191, %d)", N[2].resp_port);
    if (!strstr(out, want))
        fail_msg("CLUSTER SLOTS after the reshard: %s (want %s)", out, want);
    /* and the keys of the moved slots are on c, none left on b */
    for (int i = 0; i < 1500; i += 37) {
        char k[32];
        snprintf(k, sizeof(k), "rc:%d", i);
        unsigned s = slot_of(k, strlen(k));
        if (s < 5461 || s > 8191)
            continue;
        char moved[128];
        snprintf(moved, sizeof(moved), "-MOVED %u 127.0.0.1:%d\r\n", s, N[2].resp_port);
        EXPECT_REPLY(N[1].resp_port, moved, "GET", k);
        buf_t b = cmd1(N[2].resp_port, "GET", k, NULL);
        assert_true(b.len > 0 && b.p[0] == '$');
        free(b.p);
    }
}

/* A replica of node a, started with the cluster's map and a's name: reads
 * after READONLY, MOVED to a otherwise and for every write (a Redis Cluster
 * replica's answers). */
static void test_replica_readonly(void **state)
{
    (void)state;
    char ka[64], mapf[400], url[64], want[128];
    key_where(ka, sizeof(ka), "rep:a:", in_a);
    EXPECT_REPLY(N[0].resp_port, ":9\r\n", "INCRBY", ka, "9");
    json_t *m = http_get_json(&N[0], "/cluster");
    const char *text = json_string_value(json_object_get(m, "map"));
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    snprintf(mapf, sizeof(mapf), "%s/cluster.map", dir);
    file_write(mapf, text, strlen(text));
    json_decref(m);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", N[0].port);
    const char *args[] = { "--replica-of", url, "--cluster", mapf, "--cluster-node", "a", "--resp-port", "0", NULL };
    tally_proc_t r;
    tally_start(&r, dir, args);
    unsigned s = slot_of(ka, strlen(ka));
    snprintf(want, sizeof(want), "-MOVED %u 127.0.0.1:%d\r\n", s, N[0].resp_port);
    EXPECT_REPLY(r.resp_port, want, "GET", ka);
    /* after READONLY, reads are served (once the change has arrived) */
    bool seen = false;
    for (int i = 0; i < 200 && !seen; i++) {
        buf_t b = { 0 };
        mb(&b, "READONLY", NULL);
        mb(&b, "GET", ka, NULL);
        buf_t got = exchange(r.resp_port, b.p, b.len);
        seen = got.len == strlen("+OK\r\n$1\r\n9\r\n") && memcmp(got.p, "+OK\r\n$1\r\n9\r\n", got.len) == 0;
        if (!seen && (got.len < 5 || memcmp(got.p, "+OK\r\n", 5) != 0))
            fail_msg("READONLY on a replica: %.*s", (int)got.len, got.p);
        free(got.p);
        free(b.p);
        if (!seen)
            usleep(50000);
    }
    assert_true(seen);
    /* writes go to the primary, READONLY or not; READWRITE ends READONLY */
    buf_t b = { 0 };
    mb(&b, "READONLY", NULL);
    mb(&b, "INCR", ka, NULL);
    mb(&b, "READWRITE", NULL);
    mb(&b, "GET", ka, NULL);
    buf_t got = exchange(r.resp_port, b.p, b.len);
    char w4[320];
    snprintf(w4, sizeof(w4), "+OK\r\n%s+OK\r\n%s", want, want);
    if (got.len != strlen(w4) || memcmp(got.p, w4, got.len) != 0)
        fail_msg("replica: got '%.*s', want '%s'", (int)got.len, got.p, w4);
    free(got.p);
    free(b.p);
    assert_int_equal(tally_stop(&r), 0);
    tally_cleanup(&r);
    tmpdir_remove(dir);
}

/* A node whose data holds keys of slots it does not serve (placed by the
 * former CRC32 slot function, or by no cluster at all) refuses to start
 * with --cluster, naming a key, and starts without it with the keys intact. */
static void test_misplaced_keys_refused(void **state)
{
    (void)state;
    char dir[256], mapf[400];
    tmpdir_make(dir, sizeof(dir));
    tally_proc_t t;
    static const char *const plain[] = { "--resp-port", "0", NULL };
    tally_start(&t, dir, plain);
    char kb[64];
    key_where(kb, sizeof(kb), "old:", in_b);
    EXPECT_REPLY(t.resp_port, ":3\r\n", "INCRBY", kb, "3");
    assert_int_equal(tally_stop(&t), 0);
    snprintf(mapf, sizeof(mapf), "%s/cluster.map", dir);
    const char *m = "epoch 1\nnode a 127.0.0.1:1\nnode b 127.0.0.1:2\nslots a 0-5460\nslots b 5461-16383\n";
    file_write(mapf, m, strlen(m));
    const char *args[] = { "--cluster", mapf, "--cluster-node", "a", "--resp-port", "0", NULL };
    assert_int_not_equal(tally_start_expect_exit(&t, dir, args), 0);
    char *log = tally_log(&t);
    char want[256];
    snprintf(want, sizeof(want), "1 of the 1 keys held here are in slots this node neither owns nor imports (e.g. \"%s\": slot %u, node b's)",
             kb, slot_of(kb, strlen(kb)));
    if (!strstr(log, want) || !strstr(log, "refusing to start"))
        fail_msg("log: %s\nwant: %s", log, want);
    free(log);
    tally_cleanup(&t);
    tally_start(&t, dir, plain);
    EXPECT_REPLY(t.resp_port, "$1\r\n3\r\n", "GET", kb);
    assert_int_equal(tally_stop(&t), 0);
    tally_cleanup(&t);
    tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyslot_like_redis),
        cmocka_unit_test(test_cluster_disabled),
        cmocka_unit_test(test_cluster_slots_shards_nodes),
        cmocka_unit_test(test_moved_and_crossslot),
        cmocka_unit_test(test_ask_asking_tryagain),
        cmocka_unit_test(test_redis_cli_follows_moved),
        cmocka_unit_test(test_redis_cluster_client_through_reshard),
        cmocka_unit_test(test_replica_readonly),
        cmocka_unit_test(test_misplaced_keys_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
