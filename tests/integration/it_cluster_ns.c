/*
 * it_cluster_ns.c - the cluster as the issue describes its test: three
 * tallyd, each in a network namespace of its own (ip netns, a veth pair to
 * the test's namespace), behind a real HAProxy configured by `tallyd
 * --haproxy-config`; mixed load through the proxy over every family
 * (counters, GCRA throttling with X-Tally-Key, HyperLogLog, Bloom, Cuckoo,
 * Count-Min, Top-K, T-Digest, SETBIT, BITFIELD, activity, geo with
 * /geo/nearby?key= and X-Tally-Key, time series) with an exact model of the
 * acknowledged writes; every key on exactly its owner; a misrouted request
 * answered 421 with nothing changed; a fourth node added (the runbook: new
 * map on every node - tally-reshard refuses to start while HAProxy has no
 * backend for it - HAProxy regenerated and reloaded) and a quarter of the
 * slots resharded to it by tally-reshard under load - 0 acknowledged writes
 * lost, 0 wrong answers - after which HAProxy, updated over its admin
 * socket by tally-reshard, sends the moved keys straight to the new owner.
 *
 * Each key is written by one writer thread only, so its model is exact: the
 * writer knows every acknowledged write, and after a third of its writes it
 * reads the key back (through HAProxy, following 421s as a cluster client
 * does) and compares - a read answered by a node that no longer owns the key
 * would miss writes, and counts as a wrong answer.
 *
 * Namespaces need root and a kernel that lets this process create them (a
 * container may refuse): otherwise the test prints why and passes without
 * running - it_cluster runs the same paths on 127.0.0.1 ports every time.
 * The namespaces and links are named after this process's pid, removed at
 * the end even after a failure, and leftovers of a killed run (a pid no
 * longer alive) are removed at the start.
 */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/slot.h"
#include "tests/integration/cluster_client.h"
#include "tests/integration/harness.h"

#define NODES 4               /* a, b, c from the start; d is added */
#define WRITERS 3
#define PER_FAMILY 8
#define MAX_SEQ 600           /* writes per key at most (a throttle key allows 1001) */
#define NS_PREFIX "tlyc"

enum { F_COUNTER, F_THROTTLE, F_UV, F_BLOOM, F_CUCKOO, F_CMS, F_TOPK, F_TDIGEST, F_SETBIT, F_BITFIELD, F_ACTIVITY,
       F_GEO, F_TS, F_COUNT };
static const char *const fam_names[F_COUNT] = { "counter", "throttle", "uv", "bloom", "cuckoo", "cms", "topk",
                                                "tdigest", "setbit", "bitfield", "activity", "geo", "ts" };
#define NKEYS (F_COUNT * PER_FAMILY)

typedef struct kmodel {
    int fam;
    char key[48];
    int next;                          /* the next write's sequence number */
    int n;                             /* writes acknowledged */
    unsigned char acked[MAX_SEQ];      /* which */
} kmodel_t;

static kmodel_t K[NKEYS];
static const char *const names[NODES] = { "a", "b", "c", "d" };
static char ns[NODES][32], veth[NODES][24], addr[NODES][64], dirs[NODES][256];
static pid_t pids[NODES];
static char subnet[32];                /* "10.R.S." */
static char hdir[256], hcfg[300], hpid[300], hsock[300], hmap[300], proxy[64];
static char today[16];
static int cleaned;

/* ---------------------------------------------------------------------- */
/* Namespaces                                                              */
/* ---------------------------------------------------------------------- */

/* Runs a shell command quietly; its exit status, and its output in out. */
static int sh(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t n, const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char sink[512];
    size_t got = 0;
    if (!out) {
        out = sink;
        n = sizeof(sink);
    }
    out[0] = '\0';
    size_t r;
    while ((r = fread(out + got, 1, n - 1 - got, p)) > 0 && (got += r) < n - 1)
        ;
    while (got > 0 && (out[got - 1] == '\n' || out[got - 1] == ' '))
        got--;
    out[got] = '\0';
    while (fread(sink, 1, sizeof(sink), p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Namespaces (and their links) of runs whose process is gone. */
static void remove_leftovers(void)
{
    char list[4096];
    if (sh(list, sizeof(list), "ip netns list") != 0)
        return;
    for (char *save = NULL, *l = strtok_r(list, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int pid, i;
        if (sscanf(l, NS_PREFIX "%d-%d", &pid, &i) == 2 && kill(pid, 0) != 0 && errno == ESRCH) {
            sh(NULL, 0, "ip netns del " NS_PREFIX "%d-%d", pid, i);
            sh(NULL, 0, "ip link del tcv%dh%d", pid, i);
        }
    }
}

static void cleanup(void)
{
    if (cleaned++)
        return;
    FILE *f = hpid[0] ? fopen(hpid, "r") : NULL;
    if (f) {
        long p = 0;
        if (fscanf(f, "%ld", &p) == 1 && p > 0)
            kill((pid_t)p, SIGTERM);
        fclose(f);
    }
    for (int i = 0; i < NODES; i++) {
        if (pids[i] > 0) {
            kill(pids[i], SIGTERM);
            waitpid(pids[i], NULL, 0);
            pids[i] = 0;
        }
        if (ns[i][0]) {
            sh(NULL, 0, "ip netns del %s", ns[i]);   /* takes its end of the veth pair, and so the pair */
            sh(NULL, 0, "ip link del %s", veth[i]);  /* when it never got there */
        }
        if (dirs[i][0])
            tmpdir_remove(dirs[i]);
    }
    if (hdir[0])
        tmpdir_remove(hdir);
}

static void on_signal(int sig)
{
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Namespace i with a veth pair: 10.R.S.(4i+1) here, 10.R.S.(4i+2) there.
 * False with the reason when the system refuses. */
static bool ns_make(int i, char *why, size_t n)
{
    int pid = (int)getpid();
    snprintf(ns[i], sizeof(ns[i]), NS_PREFIX "%d-%d", pid, i);
    if (sh(why, n, "ip netns add %s", ns[i]) != 0) {
        ns[i][0] = '\0';
        return false;
    }
    snprintf(veth[i], sizeof(veth[i]), "tcv%dh%d", pid, i);
    char out[512];
    const char *steps[] = {
        "ip link add %1$s type veth peer name tcv%3$dn%4$d",
        "ip link set tcv%3$dn%4$d netns %2$s",
        "ip addr add %5$s%6$d/30 dev %1$s",
        "ip link set %1$s up",
        "ip netns exec %2$s ip addr add %5$s%7$d/30 dev tcv%3$dn%4$d",
        "ip netns exec %2$s ip link set tcv%3$dn%4$d up",
        "ip netns exec %2$s ip link set lo up",
    };
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), steps[s], veth[i], ns[i], pid, i, subnet, 4 * i + 1, 4 * i + 2);
        if (sh(out, sizeof(out), "%s", cmd) != 0) {
            snprintf(why, n, "%.400s: %.400s", cmd, out);
            return false;
        }
    }
    snprintf(addr[i], sizeof(addr[i]), "%s%d:8080", subnet, 4 * i + 2);
    return true;
}

/* ---------------------------------------------------------------------- */
/* Nodes and HAProxy                                                       */
/* ---------------------------------------------------------------------- */

/* The map: a 0-5460, b 5461-10922, c 10923-16383, and d when it is in. */
static void map_text(char *out, size_t n, unsigned epoch, bool with_d)
{
    char dline[128] = "";
    if (with_d)
        snprintf(dline, sizeof(dline), "node d %s\n", addr[3]);
    snprintf(out, n, "epoch %u\nnode a %s\nnode b %s\nnode c %s\n%sslots a 0-5460\nslots b 5461-10922\n"
             "slots c 10923-16383\n", epoch, addr[0], addr[1], addr[2], dline);
}

static long get_status(const char *at, const char *path)
{
    CURL *c = curl_easy_init();
    cc_resp_t r = cc_send(c, at, "GET", path, NULL, 0, NULL, NULL, false);
    curl_easy_cleanup(c);
    cc_free(&r);
    return r.status;
}

/* tallyd in namespace i, on its own address, port 8080 (as a pod would). */
static void node_start(int i, const char *map)
{
    char path[400], log[400];
    snprintf(path, sizeof(path), "%s/cluster.map", dirs[i]);
    file_write(path, map, strlen(map));
    snprintf(log, sizeof(log), "%s/tallyd.log", dirs[i]);
    char bindaddr[64];
    snprintf(bindaddr, sizeof(bindaddr), "%s%d", subnet, 4 * i + 2);
    const char *bin = getenv("TALLYD") ? getenv("TALLYD") : "build/release/tallyd";
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *f = freopen(log, "a", stderr);
        (void)f;
        execlp("ip", "ip", "netns", "exec", ns[i], bin, "--bind", bindaddr, "--port", "8080", "--data-dir", dirs[i],
               "--threads", "2", "--insecure-no-auth", "--cluster", path, "--cluster-node", names[i], (char *)NULL);
        _exit(127);
    }
    pids[i] = pid;
    for (int t = 0; t < 500; t++) {
        if (get_status(addr[i], "/readyz") == 200)
            return;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            pids[i] = 0;
            break;
        }
        usleep(20000);
    }
    size_t len;
    char *l = file_read(log, &len);
    fail_msg("tallyd %s in %s did not become ready; log:\n%s", names[i], ns[i], l);
}

static void put_map(int i, const char *text)
{
    json_t *j = json_pack("{s:s}", "map", text);
    char *body = json_dumps(j, JSON_COMPACT);
    CURL *c = curl_easy_init();
    cc_resp_t r = cc_send(c, addr[i], "PUT", "/admin/cluster", body, strlen(body), NULL, NULL, false);
    if (r.status != 200)
        fail_msg("PUT /admin/cluster on %s: %ld %s", names[i], r.status, r.body);
    cc_free(&r);
    curl_easy_cleanup(c);
    free(body);
    json_decref(j);
}

/* HAProxy with the configuration tallyd generates for the map (a reload
 * of the running one, hitless, when there is one), on 127.0.0.1:port. */
static void haproxy_start(const char *map, int port)
{
    char mapf[400], cmd[4000], old[64] = "";
    snprintf(mapf, sizeof(mapf), "%s/cluster.map", hdir);
    file_write(mapf, map, strlen(map));
    if (access(hpid, F_OK) == 0) {
        size_t len;
        char *p = file_read(hpid, &len);
        snprintf(old, sizeof(old), "-sf %ld", atol(p));
        free(p);
    }
    char out[2048];
    const char *t = getenv("TALLYD") ? getenv("TALLYD") : "build/release/tallyd";
    snprintf(cmd, sizeof(cmd), "%s --haproxy-lua > %s/tally-slot.lua && "
             "%s --cluster %s --haproxy-slots > %s && %s --cluster %s --haproxy-config --haproxy-map %s "
             "--haproxy-socket %s | sed 's/^    bind :8080$/    bind 127.0.0.1:%d/' > %s && haproxy -q -c -f %s && "
             "haproxy -q -D -p %s -f %s %s", t, hdir, t, mapf, hmap, t, mapf, hmap, hsock, port, hcfg, hcfg, hpid, hcfg, old);
    if (sh(out, sizeof(out), "%s", cmd) != 0)
        fail_msg("starting HAProxy: %s", out);
    snprintf(proxy, sizeof(proxy), "127.0.0.1:%d", port);
    /* the health checks (inter 1s, rise 1) mark the backends up */
    usleep(2500000);
}

/* ---------------------------------------------------------------------- */
/* The families: one write, and the check of the model                     */
/* ---------------------------------------------------------------------- */

typedef struct req {
    const char *method;
    char path[160];
    char body[256];
    const char *rkey;      /* X-Tally-Key */
} req_t;

static const char *const tp_query = "max_burst=1000&count_per_period=1&period=3600";

/* Write number q to key k. */
static void op_write(const kmodel_t *k, int q, req_t *r)
{
    const char *key = k->key;
    r->method = "POST";
    r->rkey = NULL;
    r->body[0] = '\0';
    switch (k->fam) {
    case F_COUNTER:
        snprintf(r->path, sizeof(r->path), "/counter/%s", key);
        snprintf(r->body, sizeof(r->body), "{\"by\":1}");
        break;
    case F_THROTTLE:
        snprintf(r->path, sizeof(r->path), "/throttle");
        snprintf(r->body, sizeof(r->body), "{\"key\":\"%s\",\"max_burst\":1000,\"count_per_period\":1,\"period\":3600}", key);
        r->rkey = key;
        break;
    case F_UV:
    case F_BLOOM:
    case F_CUCKOO:
        snprintf(r->path, sizeof(r->path), "/%s/%s", fam_names[k->fam], key);
        snprintf(r->body, sizeof(r->body), "{\"items\":[\"i%d\"]}", q);
        break;
    case F_CMS:
        snprintf(r->path, sizeof(r->path), "/cms/%s", key);
        snprintf(r->body, sizeof(r->body), "{\"increments\":[{\"item\":\"x\",\"by\":1}]}");
        break;
    case F_TOPK:
        snprintf(r->path, sizeof(r->path), "/topk/%s", key);
        snprintf(r->body, sizeof(r->body), "{\"items\":[\"hot\"]}");
        break;
    case F_TDIGEST:
        snprintf(r->path, sizeof(r->path), "/tdigest/%s", key);
        snprintf(r->body, sizeof(r->body), "{\"values\":[%d]}", q);
        break;
    case F_SETBIT:
        snprintf(r->path, sizeof(r->path), "/bits/%s/setbit", key);
        snprintf(r->body, sizeof(r->body), "{\"offset\":%d,\"value\":1}", q);
        break;
    case F_BITFIELD:
        snprintf(r->path, sizeof(r->path), "/bits/%s/field", key);
        snprintf(r->body, sizeof(r->body), "{\"ops\":[{\"incrby\":\"u32\",\"offset\":0,\"increment\":1}]}");
        break;
    case F_ACTIVITY:
        snprintf(r->path, sizeof(r->path), "/activity/%s", key);
        snprintf(r->body, sizeof(r->body), "{\"day\":\"%s\",\"users\":[%d]}", today, q);
        break;
    case F_GEO:
        snprintf(r->path, sizeof(r->path), "/geo/%s", key);
        snprintf(r->body, sizeof(r->body), "{\"members\":[{\"member\":\"g%d\",\"lon\":%.5f,\"lat\":48.85}]}", q,
                 2.35 + q * 1e-5);
        break;
    case F_TS:
        snprintf(r->path, sizeof(r->path), "/ts/%s", key);
        snprintf(r->body, sizeof(r->body), "{\"samples\":[[%d,1]]}", 1000 + q);
        break;
    }
}

/* One request: following 421s like a cluster client (follow), or not
 * (HAProxy must have sent it to the owner). */
static cc_resp_t ask(CURL *c, const char *at, bool follow, const char *method, const char *path, const char *body,
                     const char *rkey)
{
    return follow ? cc_call(c, at, method, path, body, rkey)
                  : cc_send(c, at, method, path, body, body ? strlen(body) : 0, NULL, rkey, false);
}

/* A JSON answer's integer at a path of object members and array indexes
 * ("items.0.count"); -1 when absent. */
static long long jnum(json_t *j, const char *dotted)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", dotted);
    for (char *save = NULL, *t = strtok_r(buf, ".", &save); t && j; t = strtok_r(NULL, ".", &save))
        j = json_is_array(j) ? json_array_get(j, (size_t)atoi(t)) : json_object_get(j, t);
    return json_is_integer(j) ? (long long)json_integer_value(j) : json_is_true(j) ? 1 : -1;
}

/* Whether key k's state, read at `at`, is exactly (or for HyperLogLog:
 * within its error of) what its model says; why gets the difference. */
static bool op_check(CURL *c, const char *at, bool follow, const kmodel_t *k, char *why, size_t n)
{
    char path[256], *body = NULL;
    const char *method = "GET", *rkey = NULL, *field;
    long long want = k->n;
    const char *key = k->key;
    if (k->n == 0)
        return true;   /* never acknowledged: the key may not exist */
    switch (k->fam) {
    case F_COUNTER:
        snprintf(path, sizeof(path), "/counter/%s", key), field = "value";
        break;
    case F_THROTTLE:   /* quantity 0 reads the state: 1001 - n left */
        snprintf(path, sizeof(path), "/throttle/%s?%s&quantity=0", key, tp_query), field = "remaining";
        want = 1001 - k->n;
        break;
    case F_UV:
        snprintf(path, sizeof(path), "/uv/%s", key), field = "count";
        break;
    case F_BLOOM:
    case F_CUCKOO: {   /* every acknowledged item is there (no false negatives in either) */
        size_t cap = 16 + (size_t)k->n * 12;
        body = malloc(cap);
        size_t off = (size_t)snprintf(body, cap, "{\"items\":[");
        for (int q = 0; q < k->next; q++)
            if (k->acked[q])
                off += (size_t)snprintf(body + off, cap - off, "%s\"i%d\"", off > 10 ? "," : "", q);
        snprintf(body + off, cap - off, "]}");
        method = "POST";
        snprintf(path, sizeof(path), "/%s/%s/exists", fam_names[k->fam], key), field = "exists";
        break;
    }
    case F_CMS:
        snprintf(path, sizeof(path), "/cms/%s/count?item=x", key), field = "counts.0";
        break;
    case F_TOPK:
        snprintf(path, sizeof(path), "/topk/%s/list", key), field = "items.0.count";
        break;
    case F_TDIGEST:
        snprintf(path, sizeof(path), "/tdigest/%s", key), field = "observations";
        break;
    case F_SETBIT:
        snprintf(path, sizeof(path), "/bits/%s/count", key), field = "count";
        break;
    case F_BITFIELD:
        method = "POST";
        body = strdup("{\"ops\":[{\"get\":\"u32\",\"offset\":0}]}");
        snprintf(path, sizeof(path), "/bits/%s/field_ro", key), field = "results.0";
        break;
    case F_ACTIVITY:
        snprintf(path, sizeof(path), "/activity/%s/count?from=%s&to=%s", key, today, today), field = "users";
        break;
    case F_GEO:   /* every acknowledged member, found by /geo/nearby?key= routed by X-Tally-Key */
        snprintf(path, sizeof(path), "/geo/nearby?key=%s&lon=2.35&lat=48.85&radius=50&unit=km", key), field = "results";
        rkey = key;
        break;
    default:
        snprintf(path, sizeof(path), "/ts/%s", key), field = "samples";
        break;
    }
    cc_resp_t r = ask(c, at, follow, method, path, body, rkey);
    free(body);
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    bool ok = j != NULL;
    long long got = -1;
    if (ok && (k->fam == F_BLOOM || k->fam == F_CUCKOO || k->fam == F_GEO)) {
        json_t *a = json_object_get(j, field), *e;
        size_t i;
        got = (long long)json_array_size(a);
        json_array_foreach(a, i, e)
            if (k->fam != F_GEO && !json_is_true(e))
                ok = false;
        if (k->fam == F_GEO)
            json_array_foreach(a, i, e) {
                int q = atoi(json_string_value(json_object_get(e, "member")) + 1);
                if (q < 0 || q >= MAX_SEQ || !k->acked[q])
                    ok = false;
            }
    } else if (ok) {
        got = jnum(j, field);
    }
    if (ok && k->fam == F_UV) {
        /* HyperLogLog's small-range (linear counting) standard error over m
         * registers is sqrt(m (e^t - t - 1)), t = n/m: 5 of them, and 3 */
        double m = 16384, t = (double)want / m;
        ok = llabs(got - want) <= 3 + (long long)(5 * sqrt(m * (exp(t) - t - 1)));
    }
    else if (ok)
        ok = got == want;
    if (!ok)
        snprintf(why, n, "%s %s at %s: %ld %s (%lld writes acknowledged, %s %lld)", method, path, at, r.status,
                 r.body ? r.body : "", (long long)k->n, field, got);
    json_decref(j);
    cc_free(&r);
    return ok;
}

/* ---------------------------------------------------------------------- */
/* The load                                                                */
/* ---------------------------------------------------------------------- */

static atomic_int stop;
static atomic_llong writes, checks, redirects, asks, failures, wrong;
static char failure[1024];
static pthread_mutex_t failure_mu = PTHREAD_MUTEX_INITIALIZER;

static void record(atomic_llong *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record(atomic_llong *what, const char *fmt, ...)
{
    atomic_fetch_add(what, 1);
    pthread_mutex_lock(&failure_mu);
    if (!failure[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(failure, sizeof(failure), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&failure_mu);
}

/* Writer t: the keys k with k % WRITERS == t, through HAProxy, following
 * 421s; every third write is followed by a read of the key checked
 * against the model. */
static void *writer(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned seed = (unsigned)t * 7919u + 1;
    CURL *c = curl_easy_init();
    while (!atomic_load(&stop)) {
        int i = (int)(rand_r(&seed) % (NKEYS / WRITERS)) * WRITERS + t;
        kmodel_t *k = &K[i];
        if (k->next >= MAX_SEQ)
            continue;
        req_t q;
        int seq = k->next++;
        op_write(k, seq, &q);
        cc_resp_t r = cc_call(c, proxy, q.method, q.path, q.body, q.rkey);
        atomic_fetch_add(&redirects, r.moved);
        atomic_fetch_add(&asks, r.asks);
        atomic_fetch_add(&writes, 1);
        if (r.status / 100 == 2) {
            k->acked[seq] = 1;
            k->n++;
        } else if (r.status != 503) {   /* 503: not applied (a busy journal), the client retries */
            record(&failures, "%s %s %s: %ld %s", q.method, q.path, q.body, r.status, r.body ? r.body : "");
        }
        cc_free(&r);
        if (rand_r(&seed) % 3 == 0) {
            char why[900];
            atomic_fetch_add(&checks, 1);
            if (!op_check(c, proxy, true, k, why, sizeof(why)))
                record(&wrong, "%s", why);
        }
    }
    curl_easy_cleanup(c);
    return NULL;
}

static void load(pthread_t *th, bool start)
{
    if (start) {
        atomic_store(&stop, 0);
        for (int t = 0; t < WRITERS; t++)
            pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t);
    } else {
        atomic_store(&stop, 1);
        for (int t = 0; t < WRITERS; t++)
            pthread_join(th[t], NULL);
    }
}

/* The owner of a slot: the initial map, with slots 0..moved_hi on d. */
static int owner_of(unsigned slot, int moved_hi)
{
    return (int)slot <= moved_hi ? 3 : slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2;
}

/* Every key's state is its model's on its owner, asked directly, and every
 * other node answers 421 MOVED for it. */
static void check_placement(int nnodes, int moved_hi)
{
    CURL *c = curl_easy_init();
    for (int i = 0; i < NKEYS; i++) {
        const kmodel_t *k = &K[i];
        unsigned slot = slot_of(k->key, strlen(k->key));
        int owner = owner_of(slot, moved_hi);
        char why[900], path[128];
        if (!op_check(c, addr[owner], false, k, why, sizeof(why)))
            fail_msg("%s (%s, slot %u) on its owner %s: %s", k->key, fam_names[k->fam], slot, names[owner], why);
        snprintf(path, sizeof(path), "/keys/%s", k->key);
        bool made = k->n > 0 || k->fam == F_CMS || k->fam == F_TOPK || k->fam == F_TDIGEST;
        for (int j = 0; j < nnodes; j++) {
            cc_resp_t r = cc_send(c, addr[j], "GET", path, NULL, 0, NULL, NULL, false);
            long want = j != owner ? 421 : !made && r.status == 404 ? 404 : 200;   /* 404: never written */
            if (r.status != want || (j != owner && strcmp(r.code, "MOVED") != 0))
                fail_msg("GET %s (slot %u) on %s: %ld %s; its owner is %s", path, slot, names[j], r.status, r.body,
                         names[owner]);
            cc_free(&r);
        }
    }
    curl_easy_cleanup(c);
}

/* A sample of node i's /metrics. */
static long long metric(int node, const char *name) { return cc_metric(addr[node], name); }

/* ---------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    for (int f = 0, i = 0; f < F_COUNT; f++)
        for (int j = 0; j < PER_FAMILY; j++, i++) {
            K[i].fam = f;
            snprintf(K[i].key, sizeof(K[i].key), "ns-%s-%d", fam_names[f], j);
        }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(today, sizeof(today), "%Y-%m-%d", &tm);
    tmpdir_make(hdir, sizeof(hdir));
    snprintf(hcfg, sizeof(hcfg), "%s/haproxy.cfg", hdir);
    snprintf(hpid, sizeof(hpid), "%s/haproxy.pid", hdir);
    snprintf(hsock, sizeof(hsock), "%s/haproxy.sock", hdir);
    snprintf(hmap, sizeof(hmap), "%s/tally-slots.map", hdir);
    for (int i = 0; i < NODES; i++)
        tmpdir_make(dirs[i], sizeof(dirs[i]));
    char map[1024];
    map_text(map, sizeof(map), 1, false);
    for (int i = 0; i < 3; i++)
        node_start(i, map);
    haproxy_start(map, tally_free_port());
    /* the sketches that need a size first */
    CURL *c = curl_easy_init();
    for (int i = 0; i < NKEYS; i++) {
        const char *body = K[i].fam == F_CMS ? "{\"width\":100,\"depth\":4}" : K[i].fam == F_TOPK ? "{\"k\":3}"
                         : K[i].fam == F_TDIGEST ? "{}" : NULL;
        if (!body)
            continue;
        char path[128];
        snprintf(path, sizeof(path), "/%s/%s", fam_names[K[i].fam], K[i].key);
        cc_resp_t r = cc_call(c, proxy, "PUT", path, body, NULL);
        if (r.status != 201)
            fail_msg("PUT %s through HAProxy: %ld %s", path, r.status, r.body);
        cc_free(&r);
    }
    curl_easy_cleanup(c);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cleanup();
    curl_global_cleanup();
    return 0;
}

/* Mixed load through HAProxy on three nodes, then every key on its owner. */
static void test_load_through_haproxy(void **state)
{
    (void)state;
    pthread_t th[WRITERS];
    load(th, true);
    sleep(2);
    load(th, false);
    if (atomic_load(&failures) || atomic_load(&wrong))
        fail_msg("%lld failed writes, %lld wrong answers; first: %s", (long long)atomic_load(&failures),
                 (long long)atomic_load(&wrong), failure);
    /* HAProxy computed every slot itself: no node sent a request away */
    for (int i = 0; i < 3; i++)
        assert_int_equal(metric(i, "tally_cluster_redirects_total{kind=\"moved\"}"), 0);
    assert_int_equal(atomic_load(&redirects), 0);
    check_placement(3, -1);
    printf("load: %lld writes and %lld checked reads over %d keys of %d families through HAProxy, every key on "
           "its owner\n", (long long)atomic_load(&writes), (long long)atomic_load(&checks), NKEYS, F_COUNT);
}

/* A request sent to a node that does not own the key: 421 naming the
 * owner, and nothing changed anywhere. */
static void test_misrouted_changes_nothing(void **state)
{
    (void)state;
    kmodel_t *k = &K[F_COUNTER * PER_FAMILY];
    unsigned slot = slot_of(k->key, strlen(k->key));
    int owner = owner_of(slot, -1), other = (owner + 1) % 3;
    char path[128];
    snprintf(path, sizeof(path), "/counter/%s", k->key);
    CURL *c = curl_easy_init();
    cc_resp_t r = cc_send(c, addr[other], "POST", path, "{\"by\":1000}", 11, NULL, NULL, false);
    assert_int_equal(r.status, 421);
    assert_string_equal(r.code, "MOVED");
    assert_string_equal(r.owner, addr[owner]);
    cc_free(&r);
    snprintf(path, sizeof(path), "/throttle");
    char body[256];
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"max_burst\":1000,\"count_per_period\":1,\"period\":3600}",
             K[F_THROTTLE * PER_FAMILY].key);
    unsigned tslot = slot_of(K[F_THROTTLE * PER_FAMILY].key, strlen(K[F_THROTTLE * PER_FAMILY].key));
    r = cc_send(c, addr[(owner_of(tslot, -1) + 1) % 3], "POST", path, body, strlen(body), NULL,
                K[F_THROTTLE * PER_FAMILY].key, false);
    assert_int_equal(r.status, 421);
    cc_free(&r);
    curl_easy_cleanup(c);
    check_placement(3, -1);   /* the models still hold: nothing was applied */
}

/* The runbook's "adding a node", then a quarter of the slots (0-4095, from
 * a) moved to it by tally-reshard while the writers go on. */
static void test_add_node_and_reshard_under_load(void **state)
{
    (void)state;
    char map[1024];
    map_text(map, sizeof(map), 2, true);
    node_start(3, map);
    for (int i = 0; i < 3; i++)
        put_map(i, map);
    char bin[512], out[8192];
    snprintf(bin, sizeof(bin), "%s/tally-reshard", getenv("BUILD") ? getenv("BUILD") : "build/release");
    /* HAProxy has no backend for d yet: tally-reshard refuses to start */
    int rc = sh(out, sizeof(out), "%s --node %s --slots 0-4095 --to d --haproxy-socket %s --haproxy-map %s", bin,
                addr[0], hsock, hmap);
    if (rc != 1 || !strstr(out, "no backend tally_d") || !strstr(out, "nothing was moved"))
        fail_msg("tally-reshard with a proxy that cannot reach d: %d\n%s", rc, out);
    int port = atoi(strchr(proxy, ':') + 1);
    haproxy_start(map, port);   /* regenerated with d's backend, reloaded */

    pthread_t th[WRITERS];
    long long before = atomic_load(&writes);
    load(th, true);
    usleep(500000);
    rc = sh(out, sizeof(out), "%s --node %s --slots 0-4095 --to d --batch 5 --haproxy-socket %s --haproxy-map %s",
                bin, addr[0], hsock, hmap);
    usleep(500000);
    load(th, false);
    if (rc != 0)
        fail_msg("tally-reshard: %d\n%s", rc, out);
    if (atomic_load(&failures) || atomic_load(&wrong))
        fail_msg("%lld failed writes, %lld wrong answers during the reshard; first: %s",
                 (long long)atomic_load(&failures), (long long)atomic_load(&wrong), failure);
    /* 0 acknowledged writes lost: each key's state is its model's on its
     * new owner, and the others answer MOVED */
    check_placement(4, 4095);
    int moved = 0;
    for (int i = 0; i < NKEYS; i++)
        moved += slot_of(K[i].key, strlen(K[i].key)) <= 4095;
    assert_true(moved > 0);
    printf("reshard: slots 0-4095 a -> d under load: %lld writes (%lld redirects followed: %lld MOVED, %lld ASK), "
           "%lld checked reads, %d of %d keys moved, 0 lost, 0 wrong answers\n",
           (long long)atomic_load(&writes) - before, (long long)(atomic_load(&redirects) + atomic_load(&asks)),
           (long long)atomic_load(&redirects), (long long)atomic_load(&asks), (long long)atomic_load(&checks), moved,
           NKEYS);

    /* HAProxy followed the flip (tally-reshard --haproxy-socket): reads of
     * every key through it reach the owner at once */
    long long a_moved = metric(0, "tally_cluster_redirects_total{kind=\"moved\"}");
    CURL *c = curl_easy_init();
    for (int i = 0; i < NKEYS; i++) {
        char why[900];
        if (!op_check(c, proxy, false, &K[i], why, sizeof(why)))
            fail_msg("through HAProxy after the reshard, %s: %s", K[i].key, why);
    }
    curl_easy_cleanup(c);
    assert_int_equal(metric(0, "tally_cluster_redirects_total{kind=\"moved\"}"), a_moved);
    assert_int_equal(metric(3, "tally_cluster_slots_owned"), 4096);
    size_t len;
    char *f = file_read(hmap, &len);
    assert_non_null(strstr(f, "0:4095 tally_d\n"));
    free(f);
}

int main(void)
{
    char why[1024] = "";
    if (geteuid() != 0) {
        printf("SKIP it_cluster_ns: network namespaces need root (it_cluster covers the cluster on 127.0.0.1)\n");
        return 0;
    }
    if (sh(why, sizeof(why), "command -v ip && command -v haproxy") != 0) {
        printf("SKIP it_cluster_ns: needs ip (iproute2) and haproxy (tools/deps.sh test installs them)\n");
        return 0;
    }
    /* the subnet 10.R.S.0/26 of this run, from its pid */
    int pid = (int)getpid();
    snprintf(subnet, sizeof(subnet), "10.%d.%d.", 200 + (pid >> 8) % 50, pid & 255);
    remove_leftovers();
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (int i = 0; i < NODES; i++)
        if (!ns_make(i, why, sizeof(why))) {
            cleanup();
            printf("SKIP it_cluster_ns: cannot make network namespaces here (%s); it_cluster covers the cluster "
                   "on 127.0.0.1\n", why);
            return 0;
        }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_through_haproxy),
        cmocka_unit_test(test_misrouted_changes_nothing),
        cmocka_unit_test(test_add_node_and_reshard_under_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
