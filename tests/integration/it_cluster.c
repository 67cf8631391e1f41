/*
 * it_cluster.c - a cluster of real tallyd processes on 127.0.0.1
 * (deploy/cluster/README.md): 421 MOVED on a slot a node does not own with
 * nothing changed, 400 CROSSSLOT on every multi-key form, hash tags keeping
 * keys together, the map reloaded (SIGHUP, POST /admin/reload,
 * PUT /admin/cluster) and fenced by its epoch, a quarter of the slots
 * resharded to a fourth node by tally-reshard while writer threads keep
 * incrementing counters - with an exact model: every acknowledged increment
 * is on the final owner, and nothing is left on the old one - and a real
 * HAProxy (configured by tallyd --haproxy-config) sending every request to
 * its key's owner.  Network namespaces are not used: the nodes differ by
 * port, which is all the routing sees.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/slot.h"
#include "tests/integration/cluster_client.h"
#include "tests/integration/harness.h"

#define NODES 4              /* a, b, c serve; d joins */
#define NKEYS 300
#define WRITERS 2

static tally_proc_t N[NODES];
static char dirs[NODES][256];   /* tmpdir_make fills at most 256 */
static const char *const names[NODES] = { "a", "b", "c", "d" };

/* The map: a 0-5460, b 5461-10922, c 10923-16383; d owns nothing. */
static void map_text(char *out, size_t n, unsigned epoch, const char *extra)
{
    snprintf(out, n,
             "epoch %u\nnode a 127.0.0.1:%d\nnode b 127.0.0.1:%d\nnode c 127.0.0.1:%d\nnode d 127.0.0.1:%d\n"
             "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n%s",
             epoch, N[0].port, N[1].port, N[2].port, N[3].port, extra ? extra : "");
}

static int owner_of(unsigned slot) { return slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2; }

static void put_map(int i, const char *text, long want)
{
    json_t *j = json_pack("{s:s}", "map", text);
    char *body = json_dumps(j, JSON_COMPACT);
    http_resp_t r = http(&N[i], "PUT", "/admin/cluster", body, NULL);
    if (r.status != want)
        fail_msg("PUT /admin/cluster on %s: %ld %s", names[i], r.status, r.body);
    http_free(&r);
    free(body);
    json_decref(j);
}

/* Percent-encodes a key as one path segment. */
static void api_escape(const char *k, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *k; k++) {
        unsigned char c = (unsigned char)*k;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~:", c)) {
            *out++ = (char)c;
        } else {
            *out++ = '%';
            *out++ = hex[c >> 4];
            *out++ = hex[c & 15];
        }
    }
    *out = '\0';
}

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* every node starts with placeholder addresses, then gets the real map */
    const char *boot = "epoch 1\nnode a 127.0.0.1:1\nnode b 127.0.0.1:2\nnode c 127.0.0.1:3\nnode d 127.0.0.1:4\n"
                       "slots a 0-5460\nslots b 5461-10922\nslots c 10923-16383\n";
    for (int i = 0; i < NODES; i++) {
        tmpdir_make(dirs[i], sizeof(dirs[i]));
        char path[1100];
        snprintf(path, sizeof(path), "%s/cluster.map", dirs[i]);
        file_write(path, boot, strlen(boot));
        const char *args[] = { "--cluster", path, "--cluster-node", names[i], NULL };
        tally_start(&N[i], dirs[i], args);
    }
    char text[1024];
    map_text(text, sizeof(text), 2, NULL);
    for (int i = 0; i < NODES; i++)
        put_map(i, text, 200);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++) {
        tally_cleanup(&N[i]);
        tmpdir_remove(dirs[i]);
    }
    curl_global_cleanup();
    return 0;
}

/* A key (prefix + number) whose slot the given node owns under the initial map. */
static void key_on(int node, const char *prefix, int from, char *out, size_t n, int *next)
{
    for (int i = from;; i++) {
        snprintf(out, n, "%s%d", prefix, i);
        if (owner_of(slot_of(out, strlen(out))) == node) {
            if (next)
                *next = i + 1;
            return;
        }
    }
}

static void test_moved_changes_nothing(void **state)
{
    (void)state;
    char k[64], path[128];
    key_on(1, "mv", 0, k, sizeof(k), NULL);   /* b's */
    snprintf(path, sizeof(path), "/counter/%s", k);
    http_resp_t r = http(&N[0], "POST", path, "{\"by\":5}", NULL);
    assert_error(&r, 421, "MOVED");
    char v[64], want[64];
    assert_true(http_header(&r, "X-Tally-Owner", v, sizeof(v)));
    snprintf(want, sizeof(want), "127.0.0.1:%d", N[1].port);
    assert_string_equal(v, want);
    assert_true(http_header(&r, "X-Tally-Owner-Node", v, sizeof(v)));
    assert_string_equal(v, "b");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r.json, "error"), "address")), want);
    http_free(&r);
    /* nothing there, on any node; every kind of request is refused */
    const char *const reqs[][2] = { { "GET", "/keys/%s" }, { "DELETE", "/keys/%s" }, { "GET", "/keys/%s/dump" },
                                    { "GET", "/counter/%s" }, { "PUT", "/keys/%s/ttl" } };
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        snprintf(path, sizeof(path), reqs[i][1], k);
        r = http(&N[0], reqs[i][0], path, strcmp(reqs[i][0], "PUT") == 0 ? "{\"ttl_ms\":1000}" : NULL, NULL);
        if (r.status != 421)
            fail_msg("%s %s on a non-owner: %ld %s", reqs[i][0], path, r.status, r.body);
        http_free(&r);
    }
    snprintf(path, sizeof(path), "/keys?prefix=%s", k);
    for (int i = 0; i < NODES; i++) {
        json_t *j = http_get_json(&N[i], path);
        assert_int_equal(json_array_size(json_object_get(j, "keys")), 0);
        json_decref(j);
    }
    /* the owner serves it */
    snprintf(path, sizeof(path), "/counter/%s", k);
    http_expect(&N[1], "POST", path, "{\"by\":5}", 200, NULL);
    /* X-Tally-Key names the slot for a route whose key is in the body */
    json_t *body = json_pack("{s:s,s:i,s:i,s:i}", "key", k, "max_burst", 5, "count_per_period", 5, "period", 60);
    char *b = json_dumps(body, JSON_COMPACT);
    char hk[96];
    snprintf(hk, sizeof(hk), "X-Tally-Key: %s", k);
    const char *hdr[] = { hk, NULL };
    r = http_h(&N[0], "POST", "/throttle", b, NULL, hdr);
    assert_error(&r, 421, "MOVED");
    http_free(&r);
    char other[64];
    key_on(1, "mv", 1000, other, sizeof(other), NULL);
    char hk2[96];
    snprintf(hk2, sizeof(hk2), "X-Tally-Key: {%s}", other);   /* same node, another slot */
    const char *hdr2[] = { hk2, NULL };
    r = http_h(&N[1], "POST", "/throttle", b, NULL, hdr2);
    assert_error(&r, 400, "CROSSSLOT");
    http_free(&r);
    free(b);
    json_decref(body);
}

/* Every multi-key form refuses keys of two slots (both owned here, so only
 * the slot rule can refuse them) and accepts keys sharing a hash tag. */
static void test_crossslot(void **state)
{
    (void)state;
    char x[64], y[64];
    int next;
    key_on(0, "cs", 0, x, sizeof(x), &next);
    do
        key_on(0, "cs", next, y, sizeof(y), &next);
    while (slot_of(x, strlen(x)) == slot_of(y, strlen(y)));
    char path[256], body[512];
    /* sources exist, so only the slot can be the problem */
    snprintf(path, sizeof(path), "/uv/%s", y);
    http_expect(&N[0], "POST", path, "{\"items\":[\"a\"]}", 200, NULL);
    struct { const char *method, *path, *body; } forms[] = {
        { "GET", "/uv/%s?union=%s", NULL },
        { "POST", "/uv/%s/merge", "{\"sources\":[\"%s\"]}" },
        { "POST", "/bits/%s/op", "{\"op\":\"or\",\"sources\":[\"%s\"]}" },
        { "POST", "/cms/%s/merge", "{\"sources\":[\"%s\"]}" },
        { "POST", "/tdigest/%s/merge", "{\"sources\":[\"%s\"]}" },
        { "POST", "/geo/%s/store?source=%s&member=m&radius=5&unit=km", NULL },
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        snprintf(path, sizeof(path), forms[i].path, x, y);
        if (forms[i].body)
            snprintf(body, sizeof(body), forms[i].body, y);
        http_resp_t r = http(&N[0], forms[i].method, path, forms[i].body ? body : NULL, NULL);
        if (r.status != 400 || !strstr(r.body, "CROSSSLOT"))
            fail_msg("%s %s %s: %ld %s", forms[i].method, path, forms[i].body ? body : "", r.status, r.body);
        http_free(&r);
    }
    snprintf(body, sizeof(body),
             "{\"requests\":[{\"key\":\"%s\",\"max_burst\":1,\"count_per_period\":1,\"period\":1},"
             "{\"key\":\"%s\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}]}", x, y);
    http_resp_t r = http(&N[0], "POST", "/throttle", body, NULL);
    assert_error(&r, 400, "CROSSSLOT");
    http_free(&r);
    snprintf(path, sizeof(path), "/keys?prefix=%s", x);
    json_t *j = http_get_json(&N[0], path);
    assert_int_equal(json_array_size(json_object_get(j, "keys")), 0);   /* nothing created */
    json_decref(j);
    /* a hash tag keeps them together: routed and merged */
    char tx[64], ty[64];
    for (int i = 0;; i++) {
        snprintf(tx, sizeof(tx), "{t%d}:x", i);
        if (owner_of(slot_of(tx, strlen(tx))) == 0)
            break;
    }
    snprintf(ty, sizeof(ty), "{%.*s}:y", (int)(strchr(tx, '}') - tx - 1), tx + 1);
    char ex[200], ey[200];
    api_escape(tx, ex);
    api_escape(ty, ey);
    snprintf(path, sizeof(path), "/uv/%s", ey);
    http_expect(&N[0], "POST", path, "{\"items\":[\"a\",\"b\"]}", 200, NULL);
    snprintf(path, sizeof(path), "/uv/%s/merge", ex);
    snprintf(body, sizeof(body), "{\"sources\":[\"%s\"]}", ty);
    http_expect(&N[0], "POST", path, body, 200, NULL);
}

static long long epoch_of(int i)
{
    json_t *j = http_get_json(&N[i], "/cluster");
    long long e = json_integer_value(json_object_get(j, "epoch"));
    json_decref(j);
    return e;
}

/* The map is reloaded from the file (SIGHUP, POST /admin/reload), and an
 * older epoch, or another map under the same epoch, is refused. */
static void test_reload_and_fencing(void **state)
{
    (void)state;
    char text[1024], path[1100];
    long long e = epoch_of(2);
    snprintf(path, sizeof(path), "%s/cluster.map", dirs[2]);
    map_text(text, sizeof(text), (unsigned)e + 1, "# reloaded by SIGHUP\n");
    file_write(path, text, strlen(text));
    kill(N[2].pid, SIGHUP);
    for (int i = 0; i < 100 && epoch_of(2) != e + 1; i++)
        usleep(20000);
    assert_int_equal(epoch_of(2), e + 1);
    map_text(text, sizeof(text), (unsigned)e + 2, "# reloaded by POST /admin/reload\n");
    file_write(path, text, strlen(text));
    http_expect(&N[2], "POST", "/admin/reload", NULL, 200, NULL);
    assert_int_equal(epoch_of(2), e + 2);
    /* older: refused, the map stays */
    map_text(text, sizeof(text), (unsigned)e, NULL);
    file_write(path, text, strlen(text));
    http_resp_t r = http(&N[2], "POST", "/admin/reload", NULL, NULL);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "older"));
    http_free(&r);
    assert_int_equal(epoch_of(2), e + 2);
    put_map(2, text, 400);
    /* same epoch, other contents: refused; a damaged map: refused */
    map_text(text, sizeof(text), (unsigned)e + 2, "# something else\n");
    put_map(2, text, 400);
    put_map(2, "epoch 99\nnode a 127.0.0.1:1\n", 400);
    /* a map without this node: refused */
    put_map(2, "epoch 99\nnode x 127.0.0.1:1\nslots x 0-16383\n", 400);
    assert_int_equal(epoch_of(2), e + 2);
    /* PUT wrote the file: a restart keeps the newest map */
    map_text(text, sizeof(text), (unsigned)e + 3, NULL);
    put_map(2, text, 200);
    size_t len;
    char *f = file_read(path, &len);
    assert_int_equal(len, strlen(text));
    assert_memory_equal(f, text, len);
    free(f);
    /* every node at the same epoch again */
    for (int i = 0; i < NODES; i++)
        if (i != 2)
            put_map(i, text, 200);
}

/* ---------------------------------------------------------------------- */
/* Resharding under load                                                   */
/* ---------------------------------------------------------------------- */

static atomic_int stop;
static atomic_llong acked[NKEYS];
static atomic_llong redirects, asks, failures;
static char failure[512];
static int ports_seen[NODES];

/* A cluster client: sends to the node the initial map names and follows
 * 421s (MOVED: to the owner; ASK: to the target, once, with
 * X-Tally-Asking). Counts every acknowledged increment. */
static void *writer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    CURL *c = curl_easy_init();
    while (!atomic_load(&stop)) {
        int k = (int)(rand_r(&seed) % NKEYS);
        char key[32], path[64], addr[64];
        snprintf(key, sizeof(key), "w%d", k);
        snprintf(path, sizeof(path), "/counter/%s", key);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", ports_seen[owner_of(slot_of(key, strlen(key)))]);
        cc_resp_t w = cc_call(c, addr, "POST", path, "{\"by\":1}", NULL);
        atomic_fetch_add(&asks, w.asks);
        atomic_fetch_add(&redirects, w.moved);
        if (w.status == 200) {
            atomic_fetch_add(&acked[k], 1);
        } else if (w.status == 503) {
            /* TRYAGAIN (only for multi-key requests) or a busy journal: not applied, retry */
        } else {
            if (atomic_fetch_add(&failures, 1) == 0)
                snprintf(failure, sizeof(failure), "POST %s (first sent to %s): %ld %s", path, addr, w.status,
                         w.code);
        }
        cc_free(&w);
    }
    curl_easy_cleanup(c);
    return NULL;
}

static int run_reshard(const char *slots, const char *to)
{
    char bin[512], node[64];
    snprintf(bin, sizeof(bin), "%s/tally-reshard", getenv("BUILD") ? getenv("BUILD") : "build/release");
    snprintf(node, sizeof(node), "127.0.0.1:%d", N[0].port);
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, bin, "--node", node, "--slots", slots, "--to", to, "--batch", "50", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_reshard_under_load(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++)
        ports_seen[i] = N[i].port;
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&t[i], NULL, writer, (void *)(uintptr_t)(i + 1));
    usleep(300000);   /* keys exist before the move starts */
    /* a quarter of the slots, from a (0-5460) to d, while the writers write */
    int rc = run_reshard("0-4095", "d");
    usleep(200000);
    atomic_store(&stop, 1);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(rc, 0);
    if (atomic_load(&failures))
        fail_msg("%lld failed writes; first: %s", (long long)atomic_load(&failures), failure);
    /* the exact model: each key's counter is what was acknowledged, on its
     * owner under the final map, and nowhere else */
    json_t *m = http_get_json(&N[3], "/cluster");
    long long total = 0, moved_keys = 0;
    for (int k = 0; k < NKEYS; k++) {
        char key[32], path[64];
        snprintf(key, sizeof(key), "w%d", k);
        unsigned slot = slot_of(key, strlen(key));
        int owner = slot <= 4095 ? 3 : owner_of(slot);
        moved_keys += owner == 3;
        long long want = atomic_load(&acked[k]);
        total += want;
        snprintf(path, sizeof(path), "/counter/%s", key);
        http_resp_t r = http(&N[owner], "GET", path, NULL, NULL);
        if (want == 0) {
            http_free(&r);
            continue;
        }
        if (r.status != 200 || json_int_of(&r, "value") != want)
            fail_msg("%s (slot %u) on %s: %ld %s, %lld increments acknowledged", key, slot, names[owner], r.status,
                     r.body, want);
        http_free(&r);
        for (int i = 0; i < NODES; i++) {
            if (i == owner)
                continue;
            snprintf(path, sizeof(path), "/keys?prefix=%s&limit=1000", key);
            json_t *j = http_get_json(&N[i], path);
            json_t *e;
            size_t x;
            json_array_foreach(json_object_get(j, "keys"), x, e)
                if (strcmp(json_string_value(json_object_get(e, "key")), key) == 0)
                    fail_msg("%s is also on %s", key, names[i]);
            json_decref(j);
        }
    }
    json_decref(m);
    /* the old owner now sends the moved range away */
    char key[32];
    for (int i = 0;; i++) {
        snprintf(key, sizeof(key), "w%d", i);
        if (slot_of(key, strlen(key)) <= 4095)
            break;
    }
    char path[64];
    snprintf(path, sizeof(path), "/counter/%s", key);
    http_resp_t r = http(&N[0], "GET", path, NULL, NULL);
    assert_error(&r, 421, "MOVED");
    http_free(&r);
    printf("reshard: %lld increments acknowledged over %d keys (%lld moved to d), %lld MOVED and %lld ASK "
           "redirects followed, 0 lost\n", total, NKEYS, moved_keys, (long long)atomic_load(&redirects),
           (long long)atomic_load(&asks));
    assert_true(moved_keys > 0);
}

/* PUT of bytes with X-Tally-Asking: 1 (a restore on an importing node, as
 * the tool does it); returns the status. */
static long put_asking(int port, const char *path, const void *body, size_t len)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    CURL *c = curl_easy_init();
    cc_resp_t r = cc_send(c, addr, "PUT", path, body, len, "application/octet-stream", NULL, true);
    curl_easy_cleanup(c);
    cc_free(&r);
    return r.status;
}

/* An interrupted move resumes: the migrating map reached only the target
 * and the source, and one key was already copied to the target but not
 * deleted from the source, when the tool "died"; run again, it finishes the
 * move, installs the maps everywhere, and every value is intact. */
static void test_reshard_resume(void **state)
{
    (void)state;
    json_t *m = http_get_json(&N[0], "/cluster");
    long long e = json_integer_value(json_object_get(m, "epoch"));
    json_decref(m);
    char keys[5][32];
    int next = 0;
    for (int i = 0; i < 5; i++) {
        char path[256];
        for (;; next++) {
            snprintf(keys[i], sizeof(keys[i]), "rs%d", next);
            unsigned s = slot_of(keys[i], strlen(keys[i]));
            if (s >= 4096 && s <= 5460)
                break;
        }
        next++;
        snprintf(path, sizeof(path), "/counter/%s", keys[i]);
        http_expect(&N[0], "POST", path, "{\"by\":7}", 200, NULL);
    }
    char text[1024];
    snprintf(text, sizeof(text),
             "epoch %lld\nnode a 127.0.0.1:%d\nnode b 127.0.0.1:%d\nnode c 127.0.0.1:%d\nnode d 127.0.0.1:%d\n"
             "slots d 0-4095\nslots a 4096-5460\nslots b 5461-10922\nslots c 10923-16383\nmigrate 4096-5460 a d\n",
             e + 1, N[0].port, N[1].port, N[2].port, N[3].port);
    put_map(3, text, 200);
    put_map(0, text, 200);
    /* one key copied, not deleted */
    char path[256];
    snprintf(path, sizeof(path), "/keys/%s/dump", keys[0]);
    http_resp_t d = http(&N[0], "GET", path, NULL, NULL);
    assert_status(&d, 200);
    snprintf(path, sizeof(path), "/keys/%s/restore", keys[0]);
    assert_int_equal(put_asking(N[3].port, path, d.body, d.len), 201);
    http_resp_t r = http_bin(&N[3], "PUT", path, d.body, d.len, "application/octet-stream");
    assert_error(&r, 421, "MOVED");   /* without X-Tally-Asking the importing node refuses */
    http_free(&r);
    http_free(&d);
    assert_int_equal(run_reshard("4096-5460", "d"), 0);
    for (int i = 0; i < NODES; i++)
        assert_int_equal(epoch_of(i), e + 2);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "/counter/%s", keys[i]);
        r = http(&N[3], "GET", path, NULL, NULL);
        assert_status(&r, 200);
        assert_int_equal(json_int_of(&r, "value"), 7);
        http_free(&r);
        r = http(&N[0], "GET", path, NULL, NULL);
        assert_error(&r, 421, "MOVED");
        http_free(&r);
    }
    /* a run for a range already moved only makes sure every node agrees */
    assert_int_equal(run_reshard("4096-5460", "d"), 0);
    assert_int_equal(epoch_of(1), e + 2);
}

/* ---------------------------------------------------------------------- */
/* HAProxy                                                                 */
/* ---------------------------------------------------------------------- */

static int free_port(void)
{
    tally_proc_t p;   /* a port nothing listens on: the one a stopped tallyd had */
    tally_start(&p, NULL, NULL);
    int port = p.port;
    tally_cleanup(&p);
    return port;
}

/* A sample of node i's /metrics. */
static long long metric(int node, const char *name)
{
    char at[64];
    snprintf(at, sizeof(at), "127.0.0.1:%d", N[node].port);
    return cc_metric(at, name);
}

/* /info's and /metrics' cluster fields on node d, which owns slots lo-hi. */
static void check_cluster_stats(unsigned lo, unsigned hi)
{
    json_t *info = http_get_json(&N[3], "/info");
    json_t *c = json_object_get(info, "cluster");
    char want[32];
    snprintf(want, sizeof(want), "%u-%u", lo, hi);
    assert_string_equal(json_string_value(json_object_get(c, "node")), "d");
    assert_int_equal(json_integer_value(json_object_get(c, "epoch")), epoch_of(3));
    assert_int_equal(json_array_size(json_object_get(c, "slots")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(c, "slots"), 0)), want);
    assert_int_equal(json_integer_value(json_object_get(c, "slots_owned")), hi - lo + 1);
    assert_int_equal(json_array_size(json_object_get(c, "migrating")), 0);
    assert_int_equal(json_array_size(json_object_get(c, "importing")), 0);
    assert_non_null(json_object_get(json_object_get(c, "answers"), "moved"));
    json_decref(info);
    assert_int_equal(metric(3, "tally_cluster_slots_owned"), hi - lo + 1);
    assert_int_equal(metric(3, "tally_cluster_epoch"), epoch_of(3));
    assert_int_equal(metric(3, "tally_cluster_slots_importing"), 0);
}

/* HAProxy with the generated configuration sends every request to its
 * key's owner; then slots 5461-6500 move from b to d with tally-reshard
 * --haproxy-socket, and HAProxy follows at once: every request for the
 * moved keys goes straight to d (b answers no MOVED), and the slot map file
 * holds the new ranges for HAProxy's next start. */
static void test_haproxy_routes_to_owner(void **state)
{
    (void)state;
    if (system("command -v haproxy >/dev/null 2>&1") != 0) {
        printf("SKIP haproxy routing: haproxy is not installed (tools/deps.sh test installs it)\n");
        return;
    }
    check_cluster_stats(0, 5460);   /* a's slots all moved to d */
    /* deploy/cluster's files are what tallyd generates from its cluster.map */
    char chk[2048];
    snprintf(chk, sizeof(chk), "%1$s --cluster deploy/cluster/cluster.map --haproxy-config --haproxy-map "
             "/usr/local/etc/haproxy/tally-slots.map --haproxy-socket ipv4@127.0.0.1:9999 | cmp - deploy/cluster/haproxy.cfg "
             "&& %1$s --cluster deploy/cluster/cluster.map --haproxy-slots | cmp - deploy/cluster/tally-slots.map "
             "&& %1$s --haproxy-lua | cmp - deploy/cluster/tally-slot.lua",
             getenv("TALLYD"));
    if (system(chk) != 0)
        fail_msg("deploy/cluster/haproxy.cfg, tally-slots.map or tally-slot.lua differs from what tallyd generates (the commands "
                 "are in deploy/cluster/statefulset.yaml)");
    json_t *m = http_get_json(&N[0], "/cluster");
    const char *text = json_string_value(json_object_get(m, "map"));
    char mapf[1100], cfg[1100], pidf[1100], slots[1100], sock[1100], cmd[12000];
    snprintf(mapf, sizeof(mapf), "%s/final.map", dirs[0]);
    snprintf(cfg, sizeof(cfg), "%s/haproxy.cfg", dirs[0]);
    snprintf(pidf, sizeof(pidf), "%s/haproxy.pid", dirs[0]);
    snprintf(slots, sizeof(slots), "%s/tally-slots.map", dirs[0]);
    snprintf(sock, sizeof(sock), "%s/haproxy.sock", dirs[0]);
    file_write(mapf, text, strlen(text));
    json_decref(m);
    int port = free_port();
    const char *t = getenv("TALLYD");
    snprintf(cmd, sizeof(cmd), "%s --haproxy-lua > %s/tally-slot.lua && "
             "%s --cluster %s --haproxy-slots > %s && %s --cluster %s --haproxy-config --haproxy-map %s "
             "--haproxy-socket %s | sed 's/^    bind :8080$/    bind 127.0.0.1:%d/' > %s && haproxy -q -c -f %s && "
             "haproxy -q -D -p %s -f %s", t, dirs[0], t, mapf, slots, t, mapf, slots, sock, port, cfg, cfg, pidf, cfg);
    assert_int_equal(system(cmd), 0);
    tally_proc_t hp = { 0 };
    hp.port = port;
    /* wait for the health checks to mark every backend up */
    usleep(2500000);
    int n = 200;
    for (int i = 0; i < n; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/counter/hp%d", i);
        http_resp_t r = http(&hp, "POST", path, "{\"by\":1}", NULL);
        if (r.status != 200)
            fail_msg("through HAProxy: POST %s: %ld %s", path, r.status, r.body);
        http_free(&r);
    }
    /* a route whose key is in the body, routed by X-Tally-Key */
    const char *hk[] = { "X-Tally-Key: hp-limit", NULL };
    http_resp_t r = http_h(&hp, "POST", "/throttle",
                           "{\"key\":\"hp-limit\",\"max_burst\":5,\"count_per_period\":5,\"period\":60}", NULL, hk);
    assert_int_equal(r.status, 200);
    http_free(&r);
    for (int i = 0; i < n; i++) {
        char key[32], path[96];
        snprintf(key, sizeof(key), "hp%d", i);
        unsigned slot = slot_of(key, strlen(key));
        int owner = slot <= 5460 ? 3 : owner_of(slot);
        snprintf(path, sizeof(path), "/keys/%s", key);
        for (int j = 0; j < NODES; j++) {
            r = http(&N[j], "GET", path, NULL, NULL);
            if (r.status != (j == owner ? 200 : 421))
                fail_msg("%s (slot %u) on %s: %ld", key, slot, names[j], r.status);
            http_free(&r);
        }
    }

    /* HAProxy follows a reshard at runtime */
    long long moved_before = metric(1, "tally_cluster_redirects_total{kind=\"moved\"}");
    assert_true(moved_before >= 0);
    char bin[512], node[64];
    snprintf(bin, sizeof(bin), "%s/tally-reshard", getenv("BUILD") ? getenv("BUILD") : "build/release");
    snprintf(node, sizeof(node), "127.0.0.1:%d", N[1].port);
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, bin, "--node", node, "--slots", "5461-6500", "--to", "d", "--haproxy-socket", sock,
              "--haproxy-map", slots, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int followed = 0;
    for (int i = 0; i < n; i++) {
        char key[32], path[96];
        snprintf(key, sizeof(key), "hp%d", i);
        unsigned slot = slot_of(key, strlen(key));
        if (slot < 5461 || slot > 6500)
            continue;
        snprintf(path, sizeof(path), "/counter/%s", key);
        r = http(&hp, "POST", path, "{\"by\":1}", NULL);
        if (r.status != 200 || json_int_of(&r, "value") != 2)
            fail_msg("through HAProxy after the reshard: POST %s (slot %u): %ld %s", path, slot, r.status, r.body);
        http_free(&r);
        followed++;
    }
    assert_true(followed > 0);
    assert_int_equal(metric(1, "tally_cluster_redirects_total{kind=\"moved\"}"), moved_before);
    check_cluster_stats(0, 6500);
    size_t len;
    char *f = file_read(slots, &len);
    assert_non_null(strstr(f, "0:6500 tally_d\n"));
    assert_non_null(strstr(f, "6501:10922 tally_b\n"));
    free(f);
    printf("haproxy: %d requests for slots moved from b to d went straight to d after tally-reshard "
           "--haproxy-socket (b answered 0 MOVED)\n", followed);
    char *hpid = file_read(pidf, &len);
    kill((pid_t)atol(hpid), SIGTERM);
    free(hpid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moved_changes_nothing),
        cmocka_unit_test(test_crossslot),
        cmocka_unit_test(test_reload_and_fencing),
        cmocka_unit_test(test_reshard_under_load),
        cmocka_unit_test(test_reshard_resume),
        cmocka_unit_test(test_haproxy_routes_to_owner),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
