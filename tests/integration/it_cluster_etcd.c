/*
 * it_cluster_etcd.c - a cluster whose slot map lives in etcd
 * (deploy/cluster/README.md, "The map in etcd"): a real etcd started on
 * free ports with its data under the test's directory, three tallyd with
 * --cluster etcd:PREFIX --coordinator (each its own replication group),
 * and a real HAProxy generated from etcd's map.
 *
 *   - the nodes read the map at start and follow every change written in
 *     etcd (a newer epoch installed everywhere, a broken or older map
 *     refused with the current one kept, a node killed -9 and restarted
 *     reads the newest, etcd killed -9 and restarted: the watches resume);
 *     PUT /admin/cluster is refused, and tally-reshard changes nothing
 *     when the nodes are past etcd's epoch;
 *   - writer threads increment counters through HAProxy for the whole run,
 *     following 421 like a cluster client, with an exact model of every
 *     acknowledged increment;
 *   - tally-reshard --coordinator moves a range under that load, HAProxy
 *     following through its runtime API;
 *   - tally-reshard killed (SIGKILL, at a point named by
 *     TALLY_RESHARD_TEST_KILL_AT) after each step - begin, migrating, the
 *     first key moved, flipped, HAProxy updated - then resumed
 *     (--resume), and again then rolled back (--abort); a second reshard
 *     is refused while a record exists;
 *   - at the end: 0 acknowledged increments lost (each counter, read on
 *     its owner and through HAProxy, is its model's), no key on two nodes,
 *     every node on etcd's map, no reshard record left.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clustermap.h"
#include "core/slot.h"
#include "service/etcd.h"
#include "tests/integration/cluster_client.h"
#include "tests/integration/harness.h"

#define NODES 3
#define NKEYS 2000
#define WRITERS 2
#define PREFIX "/it/cluster"

static tally_proc_t N[NODES];
static int ports[NODES];
static char dirs[NODES][256];
static const char *const names[NODES] = { "a", "b", "c" };
static char top[256];                 /* etcd's data, HAProxy's files */
static pid_t etcd_pid, haproxy_pid;
static char etcd_url[64];             /* etcd://127.0.0.1:PORT */
static etcd_client_t *etcd;
static char hp_addr[64], hp_sock[400], hp_slots[400];
static bool skipped;
static char skip_reason[300];

static const char *bin_dir(void) { return getenv("BUILD") ? getenv("BUILD") : "build/release"; }

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Runs a program (argv NULL-terminated) with its output in top/NAME.log and
 * the environment variable kill_at set when given: its exit status, or
 * -signal. */
static int run(const char *name, const char *kill_at, const char *const *argv)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/%s.log", top, name);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (kill_at)
            setenv("TALLY_RESHARD_TEST_KILL_AT", kill_at, 1);
        else
            unsetenv("TALLY_RESHARD_TEST_KILL_AT");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

/* tally-reshard --coordinator ... with the given arguments (and HAProxy's
 * socket). */
static int reshard(const char *kill_at, const char *a1, const char *a2, const char *a3, const char *a4)
{
    char bin[512];
    snprintf(bin, sizeof(bin), "%s/tally-reshard", bin_dir());
    const char *argv[20] = { bin, "--coordinator", etcd_url, "--prefix", PREFIX, "--batch", "20" };
    int n = 7;
    if (hp_sock[0]) {
        argv[n++] = "--haproxy-socket";
        argv[n++] = hp_sock;
        argv[n++] = "--haproxy-map";
        argv[n++] = hp_slots;
    }
    const char *rest[] = { a1, a2, a3, a4 };
    for (int i = 0; i < 4 && rest[i]; i++)
        argv[n++] = rest[i];
    argv[n] = NULL;
    return run("tally-reshard", kill_at, argv);
}

/* etcd's map (parsed) and whether a reshard record exists. */
static cmap_t *etcd_map(bool *record)
{
    etcd_kv_t kv;
    int found = 0;
    assert_int_equal(etcd_get(etcd, PREFIX "/map", strlen(PREFIX "/map"), &kv, &found, NULL), 0);
    assert_true(found);
    char err[256];
    cmap_t *m = cmap_parse(kv.value, kv.value_len, err, sizeof(err));
    etcd_kv_free(&kv);
    if (!m)
        fail_msg("etcd's map: %s", err);
    if (record) {
        etcd_kv_t r;
        found = 0;
        assert_int_equal(etcd_get(etcd, PREFIX "/reshard", strlen(PREFIX "/reshard"), &r, &found, NULL), 0);
        *record = found;
        if (found)
            etcd_kv_free(&r);
    }
    return m;
}

/* The step of the reshard record ("" when none). */
static void record_step(char *out, size_t n)
{
    etcd_kv_t r;
    int found = 0;
    assert_int_equal(etcd_get(etcd, PREFIX "/reshard", strlen(PREFIX "/reshard"), &r, &found, NULL), 0);
    out[0] = '\0';
    if (!found)
        return;
    json_t *j = json_loadb(r.value, r.value_len, 0, NULL);
    snprintf(out, n, "%s", json_string_value(json_object_get(j, "step")) ? json_string_value(json_object_get(j, "step")) : "?");
    json_decref(j);
    etcd_kv_free(&r);
}

static long long epoch_of(int i)
{
    json_t *j = http_get_json(&N[i], "/cluster");
    long long e = json_integer_value(json_object_get(j, "epoch"));
    json_decref(j);
    return e;
}

/* Every node holds etcd's map (same text), within 10 s. */
static void converge(void)
{
    cmap_t *m = etcd_map(NULL);
    for (int tries = 0;; tries++) {
        int same = 0;
        for (int i = 0; i < NODES; i++) {
            json_t *j = http_get_json(&N[i], "/cluster");
            const char *t = json_string_value(json_object_get(j, "map"));
            same += t && strlen(t) == m->text_len && memcmp(t, m->text, m->text_len) == 0;
            json_decref(j);
        }
        if (same == NODES)
            break;
        if (tries == 200)
            fail_msg("the nodes do not hold etcd's map (epoch %llu) after 10 s", (unsigned long long)m->epoch);
        sleep_ms(50);
    }
    cmap_free(m);
}

static void map_text(char *out, size_t n, unsigned epoch, const char *slots)
{
    snprintf(out, n, "epoch %u\nnode a 127.0.0.1:%d\nnode b 127.0.0.1:%d\nnode c 127.0.0.1:%d\n%s", epoch, ports[0],
             ports[1], ports[2], slots);
}

static void wait_primary(int i);

static void start_node(int i)
{
    char port[16], adv[64], gp[64];
    snprintf(port, sizeof(port), "%d", ports[i]);
    snprintf(adv, sizeof(adv), "http://127.0.0.1:%d", ports[i]);
    snprintf(gp, sizeof(gp), "/it/groups/%s", names[i]);
    const char *args[] = { "--port", port, "--cluster", "etcd:" PREFIX, "--cluster-node", names[i], "--coordinator",
                           etcd_url, "--coordinator-prefix", gp, "--coordinator-ttl", "2", "--advertise-url", adv, NULL };
    tally_start(&N[i], dirs[i], args);
    wait_primary(i);
}

/* Node i is elected primary of its own group: ready for changes. */
static void wait_primary(int i)
{
    for (int t = 0;; t++) {
        http_resp_t r = http(&N[i], "GET", "/readyz?role=primary", NULL, NULL);
        long s = r.status;
        http_free(&r);
        if (s == 200)
            break;
        if (t == 200)
            fail_msg("node %s did not become its group's primary in 10 s", names[i]);
        sleep_ms(50);
    }
}

static int etcd_cport, etcd_pport;

/* Starts etcd on its ports and data directory (the same at a restart) and
 * waits until it takes a write. */
static void start_etcd(void)
{
    char data[400], curl_[64], purl[64], init[96], log[400];
    snprintf(data, sizeof(data), "%s/etcd", top);
    snprintf(curl_, sizeof(curl_), "http://127.0.0.1:%d", etcd_cport);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", etcd_pport);
    snprintf(init, sizeof(init), "it=%s", purl);
    snprintf(log, sizeof(log), "%s/etcd.log", top);
    etcd_pid = fork();
    if (etcd_pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execlp("etcd", "etcd", "--name", "it", "--data-dir", data, "--listen-client-urls", curl_,
               "--advertise-client-urls", curl_, "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
               "--initial-cluster", init, (char *)NULL);
        _exit(127);
    }
    for (int t = 0;; t++) {
        int64_t rev;
        if (etcd_put(etcd, "/it/hello", 9, "1", 1, 0, &rev) == 0)
            break;
        if (t == 200)
            fail_msg("etcd did not answer in 10 s: %s", etcd_error(etcd));
        sleep_ms(50);
    }
}

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (system("command -v etcd >/dev/null 2>&1") != 0 || system("command -v haproxy >/dev/null 2>&1") != 0) {
        skipped = true;
        snprintf(skip_reason, sizeof(skip_reason), "etcd or haproxy is not installed (tools/deps.sh test installs them)");
        return 0;
    }
    tmpdir_make(top, sizeof(top));
    etcd_cport = tally_free_port();
    etcd_pport = tally_free_port();
    snprintf(etcd_url, sizeof(etcd_url), "etcd://127.0.0.1:%d", etcd_cport);
    char err[256];
    etcd_config_t cfg = { .endpoints = etcd_url, .timeout_ms = 2000 };
    etcd = etcd_open(&cfg, err, sizeof(err));
    if (!etcd)
        fail_msg("etcd_open: %s", err);
    start_etcd();
    for (int i = 0; i < NODES; i++) {
        ports[i] = tally_free_port();
        tmpdir_make(dirs[i], sizeof(dirs[i]));
    }
    /* the first map, written by tally-reshard --init */
    char text[1024], path[400];
    map_text(text, sizeof(text), 1, "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n");
    snprintf(path, sizeof(path), "%s/first.map", top);
    file_write(path, text, strlen(text));
    char bin[512];
    snprintf(bin, sizeof(bin), "%s/tally-reshard", bin_dir());
    const char *argv[] = { bin, "--coordinator", etcd_url, "--prefix", PREFIX, "--init", path, NULL };
    assert_int_equal(run("init", NULL, argv), 0);
    assert_int_equal(run("init", NULL, argv), 0);   /* the same map again: nothing to do */
    for (int i = 0; i < NODES; i++)
        start_node(i);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (skipped) {
        curl_global_cleanup();
        return 0;
    }
    if (haproxy_pid > 0)
        kill(haproxy_pid, SIGTERM);
    for (int i = 0; i < NODES; i++) {
        tally_cleanup(&N[i]);
        tmpdir_remove(dirs[i]);
    }
    etcd_close(etcd);
    if (etcd_pid > 0) {
        kill(etcd_pid, SIGTERM);
        waitpid(etcd_pid, NULL, 0);
    }
    tmpdir_remove(top);
    curl_global_cleanup();
    return 0;
}

#define SKIP_IF_NEEDED()                                                                                              \
    do {                                                                                                              \
        if (skipped) {                                                                                                \
            printf("SKIP it_cluster_etcd: %s\n", skip_reason);                                                        \
            return;                                                                                                   \
        }                                                                                                             \
    } while (0)

/* ---------------------------------------------------------------------- */
/* The watch                                                               */
/* ---------------------------------------------------------------------- */

static void put_map(const char *text)
{
    int64_t rev;
    assert_int_equal(etcd_put(etcd, PREFIX "/map", strlen(PREFIX "/map"), text, strlen(text), 0, &rev), 0);
}

static void test_nodes_follow_etcd(void **state)
{
    (void)state;
    SKIP_IF_NEEDED();
    converge();
    for (int i = 0; i < NODES; i++)
        assert_int_equal(epoch_of(i), 1);
    /* the map is etcd's: PUT /admin/cluster is refused, nothing changes */
    char text[1024];
    map_text(text, sizeof(text), 9, "slots a 0-16383\n");
    json_t *j = json_pack("{s:s}", "map", text);
    char *body = json_dumps(j, JSON_COMPACT);
    http_resp_t r = http(&N[0], "PUT", "/admin/cluster", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "etcd"));
    http_free(&r);
    free(body);
    json_decref(j);
    assert_int_equal(epoch_of(0), 1);
    /* a newer epoch written in etcd reaches every node (how soon: printed) */
    map_text(text, sizeof(text), 2, "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    put_map(text);
    for (int i = 0; i < NODES; i++)
        for (int t = 0; epoch_of(i) != 2; t++) {
            if (t == 10000)
                fail_msg("node %s did not take epoch 2 from etcd in 10 s", names[i]);
            sleep_ms(1);
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("watch: a map written in etcd was served by all %d nodes %.1f ms later\n", NODES,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    converge();
    /* a map that does not parse, then an older epoch: refused, the
     * current one stays (and the log says why) */
    put_map("epoch 3\nslots nobody 0-16383\n");
    map_text(text, sizeof(text), 1, "slots a 0-16383\n");
    put_map(text);
    sleep_ms(300);
    for (int i = 0; i < NODES; i++)
        assert_int_equal(epoch_of(i), 2);
    char *log = tally_log(&N[1]);
    assert_non_null(strstr(log, "refused"));
    free(log);
    /* tally-reshard sees the nodes are past etcd's epoch: it changes nothing */
    assert_int_equal(reshard(NULL, "--slots", "0-10", "--to", "b"), 1);
    char path[400];
    snprintf(path, sizeof(path), "%s/tally-reshard.log", top);
    size_t len;
    log = file_read(path, &len);
    assert_non_null(strstr(log, "newer than etcd's map"));
    free(log);
    char step[32];
    record_step(step, sizeof(step));
    assert_string_equal(step, "");
    /* a node killed while the map changes reads the newest at its start */
    tally_kill(&N[2]);
    map_text(text, sizeof(text), 4, "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n");
    put_map(text);
    start_node(2);
    converge();
    for (int i = 0; i < NODES; i++)
        assert_int_equal(epoch_of(i), 4);
    /* etcd killed -9 and restarted: the watches break, the nodes read the
     * key again and watch anew, and take the next map */
    kill(etcd_pid, SIGKILL);
    waitpid(etcd_pid, NULL, 0);
    sleep_ms(500);
    start_etcd();
    map_text(text, sizeof(text), 5, "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n");
    put_map(text);
    converge();
    for (int i = 0; i < NODES; i++) {
        wait_primary(i);
        log = tally_log(&N[i]);
        assert_non_null(strstr(log, "reading it again"));
        free(log);
    }
}

/* A node refuses to start, saying why, when it cannot have etcd's map. */
static void test_refuses_to_start(void **state)
{
    (void)state;
    SKIP_IF_NEEDED();
    char dir[256], adv[64], port[16];
    int p = tally_free_port();
    snprintf(port, sizeof(port), "%d", p);
    snprintf(adv, sizeof(adv), "http://127.0.0.1:%d", p);
    tmpdir_make(dir, sizeof(dir));
    struct {
        const char *cluster, *coordinator, *says;
    } cases[] = {
        { "etcd:/it/nothing", etcd_url, "etcd holds no cluster map at /it/nothing/map" },
        { "etcd", NULL, "--cluster etcd needs --coordinator" },
        { "etcd:" PREFIX, "etcd://127.0.0.1:1", "cannot read the cluster map " PREFIX "/map from etcd" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tally_proc_t t = { 0 };
        const char *with[] = { "--port", port, "--cluster", cases[i].cluster, "--cluster-node", "a", "--coordinator",
                               cases[i].coordinator, "--coordinator-prefix", "/it/groups/x", "--advertise-url", adv,
                               NULL };
        const char *without[] = { "--port", port, "--cluster", cases[i].cluster, "--cluster-node", "a", NULL };
        assert_int_equal(tally_start_expect_exit(&t, dir, cases[i].coordinator ? with : without), 1);
        char *log = tally_log(&t);
        if (!strstr(log, cases[i].says) || !strstr(log, "refusing to start"))
            fail_msg("--cluster %s: the log does not say \"%s\":\n%s", cases[i].cluster, cases[i].says, log);
        free(log);
        tally_cleanup(&t);
    }
    tmpdir_remove(dir);
}

/* ---------------------------------------------------------------------- */
/* Load through HAProxy, with an exact model                               */
/* ---------------------------------------------------------------------- */

static atomic_int stop;
static atomic_llong acked[NKEYS];
static atomic_llong writes, redirects, retries, failures;
static char failure[512];
static pthread_t writers[WRITERS];

static void *writer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    CURL *c = curl_easy_init();
    while (!atomic_load(&stop)) {
        int k = (int)(rand_r(&seed) % NKEYS);
        char path[64];
        snprintf(path, sizeof(path), "/counter/w%d", k);
        cc_resp_t w = cc_call(c, hp_addr, "POST", path, "{\"by\":1}", NULL);
        atomic_fetch_add(&redirects, w.moved + w.asks);
        if (w.status == 200) {
            atomic_fetch_add(&acked[k], 1);
            atomic_fetch_add(&writes, 1);
        } else if (w.status == 503 || w.status == 421) {
            /* not applied: TRYAGAIN, or still redirected after five hops while
             * the nodes take a new map (a 421 changes nothing); retry */
            atomic_fetch_add(&retries, 1);
        } else if (atomic_fetch_add(&failures, 1) == 0) {
            snprintf(failure, sizeof(failure), "POST %s through HAProxy: %ld %s %s", path, w.status, w.code,
                     w.body ? w.body : "");
        }
        cc_free(&w);
    }
    curl_easy_cleanup(c);
    return NULL;
}

static void start_haproxy(void)
{
    int port = tally_free_port();
    char cfg[400], pidf[400], cmd[8000], adv[64];
    snprintf(hp_addr, sizeof(hp_addr), "127.0.0.1:%d", port);
    snprintf(cfg, sizeof(cfg), "%s/haproxy.cfg", top);
    snprintf(pidf, sizeof(pidf), "%s/haproxy.pid", top);
    snprintf(hp_slots, sizeof(hp_slots), "%s/tally-slots.map", top);
    snprintf(hp_sock, sizeof(hp_sock), "%s/haproxy.sock", top);
    snprintf(adv, sizeof(adv), "http://127.0.0.1:%d", ports[0]);
    const char *t = getenv("TALLYD");
    /* the configuration and the slot map from etcd's map */
    const char *common = "--cluster etcd:" PREFIX " --coordinator";
    snprintf(cmd, sizeof(cmd),
             "%s --haproxy-lua > %s/tally-slot.lua && %s %s %s --advertise-url %s --haproxy-slots > %s && "
             "%s %s %s --advertise-url %s --haproxy-config --haproxy-map %s --haproxy-socket %s | "
             "sed 's/^    bind :8080$/    bind 127.0.0.1:%d/' > %s && haproxy -q -c -f %s && haproxy -q -D -p %s -f %s",
             t, top, t, common, etcd_url, adv, hp_slots, t, common, etcd_url, adv, hp_slots, hp_sock, port, cfg, cfg,
             pidf, cfg);
    assert_int_equal(system(cmd), 0);
    size_t len;
    char *pid = file_read(pidf, &len);
    haproxy_pid = (pid_t)atol(pid);
    free(pid);
    /* every backend up */
    tally_proc_t hp = { 0 };
    hp.port = port;
    for (int i = 0, ok = 0; ok < 20; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/counter/probe%d", i % 50);
        http_resp_t r = http(&hp, "GET", path, NULL, NULL);
        ok = (r.status == 200 || r.status == 404) ? ok + 1 : 0;
        http_free(&r);
        if (i == 400)
            fail_msg("HAProxy does not reach the nodes after 10 s");
        sleep_ms(25);
    }
}

static void test_reshard_under_load(void **state)
{
    (void)state;
    SKIP_IF_NEEDED();
    start_haproxy();
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&writers[i], NULL, writer, (void *)(uintptr_t)(i + 1));
    sleep_ms(500);
    /* a's slots 4000-5460 to b while the writers write */
    assert_int_equal(reshard(NULL, "--slots", "4000-5460", "--to", "b"), 0);
    bool rec;
    cmap_t *m = etcd_map(&rec);
    assert_false(rec);
    assert_int_equal(m->epoch, 7);   /* 5, migrating, flipped */
    for (unsigned s = 4000; s <= 5460; s++)
        assert_int_equal(m->owner[s], 1);
    cmap_free(m);
    converge();
    /* HAProxy's map file follows too */
    size_t len;
    char *f = file_read(hp_slots, &len);
    assert_non_null(strstr(f, "4000:10922 tally_b\n"));
    free(f);
}

/* ---------------------------------------------------------------------- */
/* tally-reshard killed at each step                                        */
/* ---------------------------------------------------------------------- */

static const char *const steps[] = { "begin", "migrating", "moving", "flipped", "haproxy" };
/* the record's step after a kill at each point */
static const char *const recorded[] = { "begin", "migrating", "migrating", "flipped", "flipped" };

static void range_owned(unsigned lo, unsigned hi, int node)
{
    cmap_t *m = etcd_map(NULL);
    for (unsigned s = lo; s <= hi; s++) {
        if (m->owner[s] != node || m->migrating_to[s] >= 0)
            fail_msg("slot %u: owner %s%s, expected %s alone", s, m->nodes[m->owner[s]].name,
                     m->migrating_to[s] >= 0 ? " (migrating)" : "", names[node]);
    }
    cmap_free(m);
}

static void test_kill_then_resume(void **state)
{
    (void)state;
    SKIP_IF_NEEDED();
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        char slots[32], step[32];
        unsigned lo = (unsigned)i * 300, hi = lo + 299;
        snprintf(slots, sizeof(slots), "%u-%u", lo, hi);
        assert_int_equal(reshard(steps[i], "--slots", slots, "--to", "c"), -SIGKILL);
        record_step(step, sizeof(step));
        assert_string_equal(step, recorded[i]);
        if (i == 1) {
            /* a second reshard cannot begin while one is recorded */
            assert_int_equal(reshard(NULL, "--slots", "3000-3100", "--to", "b"), 1);
            record_step(step, sizeof(step));
            assert_string_equal(step, "migrating");
        }
        assert_int_equal(reshard(NULL, "--resume", NULL, NULL, NULL), 0);
        record_step(step, sizeof(step));
        assert_string_equal(step, "");
        range_owned(lo, hi, 2);
        converge();
        assert_int_equal(reshard(NULL, "--resume", NULL, NULL, NULL), 0);   /* nothing left: says so */
    }
}

static void test_kill_then_abort(void **state)
{
    (void)state;
    SKIP_IF_NEEDED();
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        char slots[32], step[32];
        unsigned lo = 1500 + (unsigned)i * 300, hi = lo + 299;
        snprintf(slots, sizeof(slots), "%u-%u", lo, hi);
        cmap_t *before = etcd_map(NULL);
        uint64_t e0 = before->epoch;
        cmap_free(before);
        assert_int_equal(reshard(steps[i], "--slots", slots, "--to", "c"), -SIGKILL);
        record_step(step, sizeof(step));
        assert_string_equal(step, recorded[i]);
        assert_int_equal(reshard(NULL, "--abort", NULL, NULL, NULL), 0);
        record_step(step, sizeof(step));
        assert_string_equal(step, "");
        cmap_t *m = etcd_map(NULL);
        uint64_t e1 = m->epoch;
        cmap_free(m);
        if (i == 0) {
            /* nothing had changed: nothing changes */
            assert_int_equal(e1, e0);
            range_owned(lo, hi, 0);
        } else if (i <= 2) {
            /* migrating: turned around, the keys moved back, the range a's
             * again (migrate, reverse, flip back) */
            assert_int_equal(e1, e0 + 3);
            range_owned(lo, hi, 0);
        } else {
            /* past the flip the move is complete: --abort finishes it */
            assert_int_equal(e1, e0 + 2);
            range_owned(lo, hi, 2);
        }
        converge();
    }
}

/* ---------------------------------------------------------------------- */
/* The end: nothing acknowledged lost                                       */
/* ---------------------------------------------------------------------- */

static void test_model(void **state)
{
    (void)state;
    SKIP_IF_NEEDED();
    atomic_store(&stop, 1);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(writers[i], NULL);
    if (atomic_load(&failures))
        fail_msg("%lld failed writes; first: %s", (long long)atomic_load(&failures), failure);
    converge();
    cmap_t *m = etcd_map(NULL);
    tally_proc_t hp = { 0 };
    hp.port = atoi(strchr(hp_addr, ':') + 1);
    long long total = 0;
    int keys = 0;
    for (int k = 0; k < NKEYS; k++) {
        char key[32], path[64];
        snprintf(key, sizeof(key), "w%d", k);
        long long want = atomic_load(&acked[k]);
        if (want == 0)
            continue;
        keys++;
        total += want;
        int owner = m->owner[slot_of(key, strlen(key))];
        snprintf(path, sizeof(path), "/counter/%s", key);
        for (int i = 0; i < NODES; i++) {
            http_resp_t r = http(&N[i], "GET", path, NULL, NULL);
            if (i == owner && (r.status != 200 || json_int_of(&r, "value") != want))
                fail_msg("%s on its owner %s: %ld %s, %lld increments acknowledged", key, names[i], r.status, r.body,
                         want);
            if (i != owner && r.status != 421)
                fail_msg("%s on %s (not its owner): %ld %s", key, names[i], r.status, r.body);
            http_free(&r);
        }
        http_resp_t r = http(&hp, "GET", path, NULL, NULL);   /* HAProxy routes to the owner, no redirect */
        if (r.status != 200 || json_int_of(&r, "value") != want)
            fail_msg("%s through HAProxy: %ld %s, %lld acknowledged", key, r.status, r.body, want);
        http_free(&r);
    }
    /* no key left behind on a node that does not own it */
    for (int i = 0; i < NODES; i++) {
        json_t *j = http_get_json(&N[i], "/keys?prefix=w&limit=10000");
        json_t *e;
        size_t x;
        json_array_foreach(json_object_get(j, "keys"), x, e) {
            const char *key = json_string_value(json_object_get(e, "key"));
            if (m->owner[slot_of(key, strlen(key))] != i)
                fail_msg("%s is on %s, which does not own its slot", key, names[i]);
        }
        json_decref(j);
    }
    printf("cluster on etcd: epoch %llu; %lld increments acknowledged over %d keys through HAProxy during 11 "
           "reshards (5 killed and resumed, 5 killed and rolled back), %lld redirects followed, %lld retried, "
           "0 lost\n", (unsigned long long)m->epoch, total, keys, (long long)atomic_load(&redirects),
           (long long)atomic_load(&retries));
    cmap_free(m);
    assert_true(total > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodes_follow_etcd),
        cmocka_unit_test(test_refuses_to_start),
        cmocka_unit_test(test_reshard_under_load),
        cmocka_unit_test(test_kill_then_resume),
        cmocka_unit_test(test_kill_then_abort),
        cmocka_unit_test(test_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
