/*
 * it_etcd.c - failover elected in etcd (--coordinator), Jepsen-style, with
 * real processes: three etcd members (Debian's etcd-server, free ports, data
 * under the test's directory), one replication group of three tallyd with
 * --coordinator and --coordinator-ttl 2, behind a real HAProxy routing
 * changes by /readyz?role=primary; writers send changes through HAProxy,
 * each to a key of its own, and record every acknowledged one with the node
 * that answered it (HAProxy names it) and when.  Faults, each repeated:
 * kill -9 of the primary (restarted on its disk afterwards); the primary
 * SIGSTOPped past its lease and resumed; an etcd member killed (and
 * restarted); a replica lagging (SIGSTOPped) when the primary dies; and
 * partitions, made by TCP forwarders of this process that every node's path
 * to etcd and the replicas' path to each node (its --advertise-url) go
 * through (cut: nothing forwarded, nothing closed - connections hang) while
 * HAProxy reaches the nodes directly: the primary cut off from etcd but not
 * from its clients, the primary cut off from its replicas, and the etcd
 * leader cut off from everyone (its clients' paths cut, the process
 * SIGSTOPped so its peers hear nothing either).  Network namespaces are not
 * needed: everything runs on 127.0.0.1, without root.
 *
 * After every run: with --min-replicas-ack 1, 0 acknowledged changes lost
 * (each acknowledged key reads 1 on every node); no change acknowledged by a
 * node under an epoch older than one that had already acknowledged a change
 * (each node's epochs over time read from its log's promotion lines); every
 * node converges to byte-identical dumps of every key written.  Printed:
 * each failover's time (kill to the first change the new primary
 * acknowledged; the target is 2 x TTL) and, in a last run without
 * --min-replicas-ack, what kill -9 loses.  Each fault runs three times in
 * the optimised build and once under the sanitizer builds (TALLY_SLOW, or
 * BUILD naming a sanitizer build), so that make test's fault runs stay
 * within five minutes in all.  Skipped, saying
 * why, without etcd or HAProxy.
 */
#include <curl/curl.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define NODES 3
#define ETCDS 3
#define TTL_S 2
#define WRITERS 3
#define MAX_WRITES 200000

static char base[256];                 /* the test's directory */
static int etcd_client_port[ETCDS], etcd_peer_port[ETCDS];
static pid_t etcd_pid[ETCDS];
static char etcd_endpoints[256];
static pid_t haproxy_pid;
static int proxy_port;
static int node_port[NODES];
static tally_proc_t nodes[NODES];
static char node_dir[NODES][300];
static char prefix[64];
static bool with_acks;

static bool slow(void)
{
    const char *b = getenv("BUILD");
    return getenv("TALLY_SLOW") || (b && (strstr(b, "sanitize") || strstr(b, "tsan")));
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ----------------------------------------------------------- partitions -- */

/* A TCP forwarder on 127.0.0.1 (a thread of this process): what a node
 * reaches etcd through, and what the replicas reach their primary through
 * (its --advertise-url).  Cut, it forwards nothing and closes nothing - a
 * partition: connections hang, new ones are accepted and left waiting -
 * while HAProxy, the clients' path, still reaches the node directly. */
#define FWD_CONNS 128
typedef struct fwd {
    int lfd, port, target;
    atomic_bool cut, stop;
    pthread_t th;
    int a[FWD_CONNS], b[FWD_CONNS];   /* client side, target side (-1: not connected yet) */
    int n;
} fwd_t;

static void fwd_drop(fwd_t *f, int i)
{
    close(f->a[i]);
    if (f->b[i] >= 0)
        close(f->b[i]);
    f->a[i] = f->a[f->n - 1];
    f->b[i] = f->b[f->n - 1];
    f->n--;
}

static bool pump(int from, int to)
{
    char buf[16384];
    ssize_t got = read(from, buf, sizeof(buf));
    if (got <= 0)
        return false;
    for (ssize_t off = 0; off < got;) {
        ssize_t w = write(to, buf + off, (size_t)(got - off));
        if (w <= 0)
            return false;
        off += w;
    }
    return true;
}

static void *fwd_main(void *arg)
{
    fwd_t *f = arg;
    while (!atomic_load(&f->stop)) {
        bool cut = atomic_load(&f->cut);
        if (!cut)
            for (int i = 0; i < f->n; i++)
                if (f->b[i] < 0) {
                    struct sockaddr_in t = { .sin_family = AF_INET, .sin_port = htons((uint16_t)f->target),
                                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                    if (fd < 0 || connect(fd, (struct sockaddr *)&t, sizeof(t)) != 0) {
                        if (fd >= 0)
                            close(fd);
                        fwd_drop(f, i--);
                        continue;
                    }
                    f->b[i] = fd;
                }
        struct pollfd pf[1 + 2 * FWD_CONNS];
        int np = 0;
        pf[np++] = (struct pollfd){ .fd = f->lfd, .events = POLLIN };
        if (!cut)
            for (int i = 0; i < f->n; i++) {
                pf[np++] = (struct pollfd){ .fd = f->a[i], .events = POLLIN };
                pf[np++] = (struct pollfd){ .fd = f->b[i], .events = POLLIN };
            }
        if (poll(pf, (nfds_t)np, 50) <= 0)
            continue;
        if (!cut)
            for (int i = f->n - 1; i >= 0; i--) {
                short ea = pf[1 + 2 * i].revents, eb = pf[2 + 2 * i].revents;
                if (((ea & (POLLIN | POLLHUP | POLLERR)) && !pump(f->a[i], f->b[i])) ||
                    ((eb & (POLLIN | POLLHUP | POLLERR)) && !pump(f->b[i], f->a[i])))
                    fwd_drop(f, i);
            }
        if (pf[0].revents & POLLIN) {
            int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0 && f->n < FWD_CONNS) {
                f->a[f->n] = fd;
                f->b[f->n] = -1;
                f->n++;
            } else if (fd >= 0) {
                close(fd);
            }
        }
    }
    for (int i = f->n - 1; i >= 0; i--)
        fwd_drop(f, i);
    close(f->lfd);
    return NULL;
}

static void fwd_start(fwd_t *f, int target)
{
    memset(f, 0, sizeof(*f));
    f->target = target;
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    int one = 1;
    setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(f->lfd, 64) != 0 ||
        getsockname(f->lfd, (struct sockaddr *)&a, &len) != 0)
        fail_msg("forwarder: %s", strerror(errno));
    f->port = ntohs(a.sin_port);
    pthread_create(&f->th, NULL, fwd_main, f);
}

static void fwd_stop(fwd_t *f)
{
    if (!f->th)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->th, NULL);
    f->th = 0;
}

static fwd_t to_etcd[NODES][ETCDS];    /* node i's path to etcd member j */
static fwd_t to_node[NODES];           /* the replicas' path to node i (its --advertise-url) */
static bool partitions;                /* this run's nodes go through the forwarders */

/* ---------------------------------------------------------------- etcd -- */

static void etcd_start(int i)
{
    char name[16], data[300], curl_[64], purl[64], cluster[400], log[300];
    snprintf(name, sizeof(name), "e%d", i);
    snprintf(data, sizeof(data), "%s/etcd%d", base, i);
    snprintf(log, sizeof(log), "%s/etcd%d.log", base, i);
    snprintf(curl_, sizeof(curl_), "http://127.0.0.1:%d", etcd_client_port[i]);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", etcd_peer_port[i]);
    int n = 0;
    for (int j = 0; j < ETCDS; j++)
        n += snprintf(cluster + n, sizeof(cluster) - (size_t)n, "%se%d=http://127.0.0.1:%d", j ? "," : "", j,
                      etcd_peer_port[j]);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("etcd", "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curl_,
               "--advertise-client-urls", curl_, "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
               "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", "it-etcd",
               "--heartbeat-interval", "50", "--election-timeout", "500", (char *)NULL);
        _exit(127);
    }
    etcd_pid[i] = pid;
}

static void etcd_kill(int i)
{
    if (etcd_pid[i] > 0) {
        kill(etcd_pid[i], SIGKILL);
        waitpid(etcd_pid[i], NULL, 0);
        etcd_pid[i] = 0;
    }
}

/* true when `etcdctl endpoint health` of all the members answers */
static bool etcd_healthy(void)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --endpoints=%s --command-timeout=1s endpoint health "
             ">/dev/null 2>&1", etcd_endpoints + strlen("etcd://"));
    return system(cmd) == 0;
}

/* the member that leads etcd now (-1 unknown) */
static int etcd_leader(void)
{
    for (int i = 0; i < ETCDS; i++) {
        if (etcd_pid[i] <= 0)
            continue;
        char cmd[300], out[4096] = "";
        snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:%d -w json endpoint status 2>/dev/null",
                 etcd_client_port[i]);
        FILE *f = popen(cmd, "r");
        if (!f)
            continue;
        size_t n = fread(out, 1, sizeof(out) - 1, f);
        out[n] = '\0';
        pclose(f);
        json_error_t je;
        json_t *a = json_loads(out, 0, &je);
        json_t *st = json_object_get(json_array_get(a, 0), "Status");
        json_int_t member = json_integer_value(json_object_get(json_object_get(st, "header"), "member_id"));
        json_int_t leader = json_integer_value(json_object_get(st, "leader"));
        json_decref(a);
        if (member && member == leader)
            return i;
    }
    return -1;
}

/* -------------------------------------------------------------- HAProxy -- */

static void haproxy_start(void)
{
    char path[300], log[300], cfg[2048];
    snprintf(path, sizeof(path), "%s/haproxy.cfg", base);
    snprintf(log, sizeof(log), "%s/haproxy.log", base);
    int n = snprintf(cfg, sizeof(cfg),
                     "global\n    maxconn 256\n"
                     "defaults\n    mode http\n    timeout connect 500ms\n    timeout client 10s\n"
                     "    timeout server 3s\n    retries 0\n"
                     "frontend changes\n    bind 127.0.0.1:%d\n    default_backend primary\n"
                     "backend primary\n    option httpchk GET /readyz?role=primary\n"
                     "    http-check expect status 200\n    http-response set-header X-Node %%s\n"
                     "    default-server inter 100ms fall 1 rise 1\n",
                     proxy_port);
    for (int i = 0; i < NODES; i++)
        n += snprintf(cfg + n, sizeof(cfg) - (size_t)n, "    server n%d 127.0.0.1:%d check\n", i, node_port[i]);
    file_write(path, cfg, (size_t)n);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execl("/usr/sbin/haproxy", "haproxy", "-db", "-f", path, (char *)NULL);
        _exit(127);
    }
    haproxy_pid = pid;
}

/* ---------------------------------------------------------------- tallyd -- */

static char node_url[NODES][64];       /* each node's --advertise-url */

static void node_start(int i)
{
    char port[16], ttl[16], eps[256];
    snprintf(port, sizeof(port), "%d", node_port[i]);
    snprintf(ttl, sizeof(ttl), "%d", TTL_S);
    snprintf(eps, sizeof(eps), "%s", etcd_endpoints);
    if (partitions) {
        int n = snprintf(eps, sizeof(eps), "etcd://");
        for (int j = 0; j < ETCDS; j++)
            n += snprintf(eps + n, sizeof(eps) - (size_t)n, "%s127.0.0.1:%d", j ? "," : "", to_etcd[i][j].port);
    }
    const char *args[24] = { "--port", port, "--coordinator", eps, "--coordinator-prefix", prefix,
                             "--coordinator-ttl", ttl, "--advertise-url", node_url[i], "--snapshot-interval", "0" };
    int n = 12;
    if (with_acks) {
        args[n++] = "--min-replicas-ack";
        args[n++] = "1";
        args[n++] = "--min-replicas-timeout";
        args[n++] = "1000";
    }
    args[n] = NULL;
    tally_start(&nodes[i], node_dir[i], args);
    nodes[i].own_dir = false;
}

static const char *role_of(int i, char *out, size_t n)
{
    out[0] = '\0';
    if (nodes[i].pid <= 0)
        return out;
    http_resp_t a = http(&nodes[i], "GET", "/info", NULL, NULL);
    const char *role = a.status == 200 ? json_string_value(json_object_get(json_object_get(a.json, "replication"),
                                                                           "role"))
                                       : NULL;
    snprintf(out, n, "%s", role ? role : "");
    http_free(&a);
    return out;
}

/* The primary's index once it is one and the others are its synced
 * replicas (30 s at most). */
static int wait_group(void)
{
    for (int t = 0; t < 1500; t++) {
        int primary = -1, synced = 0;
        for (int i = 0; i < NODES; i++) {
            char role[32];
            if (!strcmp(role_of(i, role, sizeof(role)), "primary"))
                primary = i;
        }
        if (primary >= 0) {
            for (int i = 0; i < NODES; i++) {
                if (i == primary)
                    continue;
                json_t *o = http_get_json(&nodes[i], "/info");
                json_t *link = json_object_get(json_object_get(o, "replication"), "link");
                const char *p = json_string_value(json_object_get(json_object_get(o, "replication"), "primary"));
                synced += json_is_true(json_object_get(link, "synced")) && p && !strcmp(p, node_url[primary]);
                json_decref(o);
            }
            if (synced == NODES - 1)
                return primary;
        }
        sleep_ms(20);
    }
    fail_msg("the group did not settle on one primary with two synced replicas in 30 s");
    return -1;
}

/* --------------------------------------------------------------- writers -- */

typedef struct op {
    _Atomic int state;         /* 0 not sent, 1 sent, 2 acknowledged, 3 refused */
    int node;                  /* who acknowledged it */
    int64_t at;                /* wall ms, when the answer arrived */
} op_t;

static op_t *ops;
static atomic_int next_op;
static atomic_bool writers_stop;
static pthread_t writer_th[WRITERS];

static size_t hdr_cb(char *b, size_t size, size_t n, void *ud)
{
    size_t len = size * n;
    int *node = ud;
    if (len > 8 && !strncasecmp(b, "X-Node: n", 9) && len > 9)
        *node = b[9] - '0';
    return len;
}

static size_t discard(char *b, size_t size, size_t n, void *ud)
{
    (void)b, (void)ud;
    return size * n;
}

static void *writer(void *arg)
{
    (void)arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    while (!atomic_load(&writers_stop)) {
        int k = atomic_fetch_add(&next_op, 1);
        if (k >= MAX_WRITES)
            break;
        char url[128];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/counter/w-%d", proxy_port, k);
        int node = -1;
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"by\":1}");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 4000L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, hdr_cb);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &node);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        atomic_store(&ops[k].state, 1);
        CURLcode rc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        ops[k].at = wall_ms();
        ops[k].node = node;
        atomic_store(&ops[k].state, rc == CURLE_OK && status == 200 ? 2 : 3);
        if (status != 200)
            sleep_ms(20);
    }
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return NULL;
}

static void writers_start(void)
{
    atomic_store(&writers_stop, false);
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&writer_th[i], NULL, writer, NULL);
}

static void writers_join(void)
{
    atomic_store(&writers_stop, true);
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(writer_th[i], NULL);
        writer_th[i] = 0;
    }
}

/* The first change acknowledged at or after `since` (wall ms) by a node
 * other than `old`; its time, or 0 after 20 s. */
static int64_t first_ack_elsewhere(int old, int64_t since)
{
    for (int t = 0; t < 2000; t++) {
        int n = atomic_load(&next_op);
        int64_t best = 0;
        for (int k = 0; k < n && k < MAX_WRITES; k++)
            if (atomic_load(&ops[k].state) == 2 && ops[k].node != old && ops[k].node >= 0 && ops[k].at >= since &&
                (!best || ops[k].at < best))
                best = ops[k].at;
        if (best)
            return best;
        sleep_ms(10);
    }
    return 0;
}

/* Whether some change was acknowledged at or after `since` (wall ms),
 * waiting 15 s at most. */
static bool acked_since(int64_t since)
{
    for (int t = 0; t < 1500; t++) {
        int n = atomic_load(&next_op);
        for (int k = 0; k < n && k < MAX_WRITES; k++)
            if (atomic_load(&ops[k].state) == 2 && ops[k].at >= since)
                return true;
        sleep_ms(10);
    }
    return false;
}

/* --------------------------------------------------------------- checks -- */

/* Each node's promotions: (wall ms, epoch), from its log's lines
 * "...Z INFO  replication: promoted to primary under epoch N". */
typedef struct promo {
    int64_t at;
    long long epoch;
} promo_t;

static int promotions(int i, promo_t *out, int max)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s.log", node_dir[i]);
    size_t len;
    char *log = file_read(path, &len);
    int n = 0;
    for (char *line = log; line && *line && n < max;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char *m = strstr(line, "promoted to primary under epoch ");
        if (m) {
            struct tm tm = { 0 };
            int ms = 0;
            if (sscanf(line, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                       &tm.tm_sec, &ms) == 7) {
                tm.tm_year -= 1900;
                tm.tm_mon -= 1;
                out[n].at = (int64_t)timegm(&tm) * 1000 + ms;
                out[n].epoch = atoll(m + strlen("promoted to primary under epoch "));
                n++;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(log);
    return n;
}

static int cmp_at(const void *a, const void *b)
{
    const op_t *x = *(op_t *const *)a, *y = *(op_t *const *)b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* No change acknowledged under an epoch older than one that had already
 * acknowledged a change. */
static void check_epochs(void)
{
    promo_t pr[NODES][64];
    int np[NODES];
    for (int i = 0; i < NODES; i++)
        np[i] = promotions(i, pr[i], 64);
    int n = atomic_load(&next_op);
    if (n > MAX_WRITES)
        n = MAX_WRITES;
    op_t **acked = malloc(sizeof(*acked) * (size_t)(n ? n : 1));
    int na = 0;
    for (int k = 0; k < n; k++)
        if (atomic_load(&ops[k].state) == 2)
            acked[na++] = &ops[k];
    qsort(acked, (size_t)na, sizeof(*acked), cmp_at);
    long long top = 0;
    int64_t top_at = 0;
    for (int k = 0; k < na; k++) {
        int node = acked[k]->node;
        assert_true(node >= 0 && node < NODES);
        long long e = -1;
        for (int j = 0; j < np[node]; j++)
            if (pr[node][j].at <= acked[k]->at)
                e = pr[node][j].epoch;
        if (e < 0)
            fail_msg("node %d acknowledged a change at %lld before any promotion in its log", node,
                     (long long)acked[k]->at);
        if (e < top)
            fail_msg("node %d acknowledged a change at %lld under epoch %lld, after epoch %lld had acknowledged one "
                     "at %lld",
                     node, (long long)acked[k]->at, e, top, (long long)top_at);
        if (e > top) {
            top = e;
            top_at = acked[k]->at;
        }
    }
    free(acked);
}

/* Every node holds every key's same dump; returns the acknowledged
 * changes missing on the primary. */
static int check_converged(int primary)
{
    long long head = 0;
    json_t *o = http_get_json(&nodes[primary], "/info");
    head = json_integer_value(json_object_get(json_object_get(o, "replication"), "records"));
    json_decref(o);
    for (int i = 0; i < NODES; i++) {
        if (i == primary)
            continue;
        bool done = false;
        for (int t = 0; t < 1500 && !done; t++) {
            o = http_get_json(&nodes[i], "/info");
            json_t *link = json_object_get(json_object_get(o, "replication"), "link");
            done = json_is_true(json_object_get(link, "synced")) &&
                   json_integer_value(json_object_get(link, "records")) == head;
            json_decref(o);
            if (!done)
                sleep_ms(20);
        }
        if (!done)
            fail_msg("node %d did not catch up with the primary (node %d)", i, primary);
    }
    int n = atomic_load(&next_op), lost = 0, identical = 0;
    if (n > MAX_WRITES)
        n = MAX_WRITES;
    for (int k = 0; k < n; k++) {
        http_resp_t d[NODES];
        for (int i = 0; i < NODES; i++) {
            d[i] = httpf(&nodes[i], "GET", NULL, "/keys/w-%d/dump", k);
            for (int t = 0; t < 500 && d[i].status == 503; t++) {   /* a replica loading a snapshot */
                http_free(&d[i]);
                sleep_ms(20);
                d[i] = httpf(&nodes[i], "GET", NULL, "/keys/w-%d/dump", k);
            }
        }
        for (int i = 1; i < NODES; i++)
            if (d[i].status != d[0].status || d[i].len != d[0].len ||
                (d[0].len && memcmp(d[i].body, d[0].body, d[0].len) != 0))
                fail_msg("key w-%d: node %d answers %ld (%.*s), node 0 %ld (%zu bytes)", k, i, d[i].status,
                         d[i].status == 200 ? 0 : (int)d[i].len, d[i].body ? d[i].body : "", d[0].status, d[0].len);
        if (atomic_load(&ops[k].state) == 2) {
            http_resp_t v = httpf(&nodes[primary], "GET", NULL, "/counter/w-%d", k);
            if (v.status != 200 || json_int_of(&v, "value") != 1) {
                if (lost++ < 10)
                    printf("  lost: w-%d, acknowledged by node %d at %lld\n", k, ops[k].node, (long long)ops[k].at);
            }
            http_free(&v);
        }
        identical += d[0].status == 200;
        for (int i = 0; i < NODES; i++)
            http_free(&d[i]);
    }
    printf("  converged: %d keys byte-identical on %d nodes\n", identical, NODES);
    return lost;
}

/* ------------------------------------------------------------ the runs -- */

static int group_setup(void **state)
{
    (void)state;
    if (system("command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1") != 0) {
        printf("it_etcd: etcd and etcdctl are not installed (tools/deps.sh test: etcd-server, etcd-client): skipped\n");
        return 0;
    }
    if (access("/usr/sbin/haproxy", X_OK) != 0) {
        printf("it_etcd: haproxy is not installed (tools/deps.sh test installs it): skipped\n");
        return 0;
    }
    tmpdir_make(base, sizeof(base));
    int n = snprintf(etcd_endpoints, sizeof(etcd_endpoints), "etcd://");
    for (int i = 0; i < ETCDS; i++) {
        etcd_client_port[i] = tally_free_port();
        etcd_peer_port[i] = tally_free_port();
        n += snprintf(etcd_endpoints + n, sizeof(etcd_endpoints) - (size_t)n, "%s127.0.0.1:%d", i ? "," : "",
                      etcd_client_port[i]);
    }
    for (int i = 0; i < ETCDS; i++)
        etcd_start(i);
    for (int t = 0; t < 300 && !etcd_healthy(); t++)
        sleep_ms(100);
    if (!etcd_healthy()) {
        printf("it_etcd: the three etcd members did not become healthy\n");
        return -1;
    }
    return 0;
}

/* After each test, failed ones included: nothing of its run stays up. */
static int run_teardown(void **state)
{
    (void)state;
    if (ops) {
        atomic_store(&writers_stop, true);
        for (int i = 0; i < WRITERS; i++)
            if (writer_th[i]) {
                pthread_join(writer_th[i], NULL);
                writer_th[i] = 0;
            }
    }
    if (haproxy_pid > 0) {
        kill(haproxy_pid, SIGKILL);
        waitpid(haproxy_pid, NULL, 0);
        haproxy_pid = 0;
    }
    for (int i = 0; i < NODES; i++) {
        if (nodes[i].pid > 0)
            kill(nodes[i].pid, SIGCONT);   /* a test that failed while one was paused */
        if (nodes[i].pid > 0 || nodes[i].log[0])
            tally_kill(&nodes[i]);
        memset(&nodes[i], 0, sizeof(nodes[i]));
    }
    for (int i = 0; i < NODES; i++) {
        fwd_stop(&to_node[i]);
        for (int j = 0; j < ETCDS; j++)
            fwd_stop(&to_etcd[i][j]);
    }
    partitions = false;
    for (int j = 0; j < ETCDS; j++)
        if (etcd_pid[j] > 0)
            kill(etcd_pid[j], SIGCONT);
    free(ops);
    ops = NULL;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < ETCDS; i++)
        etcd_kill(i);
    if (base[0] && !getenv("IT_ETCD_KEEP"))   /* IT_ETCD_KEEP=1: the logs stay, for a failure's post-mortem */
        tmpdir_remove(base);
    else if (base[0])
        printf("it_etcd: logs kept in %s\n", base);
    return 0;
}

static bool skipped(void) { return base[0] == '\0'; }

static void run_start_with(const char *name, bool acks, bool through_forwarders)
{
    with_acks = acks;
    partitions = through_forwarders;
    snprintf(prefix, sizeof(prefix), "/it/%s", name);
    proxy_port = tally_free_port();
    for (int i = 0; i < NODES; i++) {
        node_port[i] = tally_free_port();
        snprintf(node_dir[i], sizeof(node_dir[i]), "%s/%s-n%d", base, name, i);
        mkdir(node_dir[i], 0700);
        snprintf(node_url[i], sizeof(node_url[i]), "http://127.0.0.1:%d", node_port[i]);
        if (partitions) {
            fwd_start(&to_node[i], node_port[i]);
            snprintf(node_url[i], sizeof(node_url[i]), "http://127.0.0.1:%d", to_node[i].port);
            for (int j = 0; j < ETCDS; j++)
                fwd_start(&to_etcd[i][j], etcd_client_port[j]);
        }
    }
    for (int i = 0; i < NODES; i++)
        node_start(i);
    haproxy_start();
    ops = calloc(MAX_WRITES, sizeof(*ops));
    atomic_store(&next_op, 0);
    wait_group();
    writers_start();
}

static void run_start(const char *name, bool acks) { run_start_with(name, acks, false); }

static void run_end(int *lost_out)
{
    writers_join();
    int primary = wait_group();
    check_epochs();
    int lost = check_converged(primary);
    int acked = 0, n = atomic_load(&next_op);
    for (int k = 0; k < n && k < MAX_WRITES; k++)
        acked += atomic_load(&ops[k].state) == 2;
    printf("  %d changes acknowledged, %d lost\n", acked, lost);
    if (lost_out)
        *lost_out = lost;
    else
        assert_int_equal(lost, 0);
    if (haproxy_pid > 0) {
        kill(haproxy_pid, SIGTERM);
        waitpid(haproxy_pid, NULL, 0);
        haproxy_pid = 0;
    }
    for (int i = 0; i < NODES; i++)
        if (nodes[i].pid > 0)
            tally_cleanup(&nodes[i]);
    for (int i = 0; partitions && i < NODES; i++) {
        fwd_stop(&to_node[i]);
        for (int j = 0; j < ETCDS; j++)
            fwd_stop(&to_etcd[i][j]);
    }
    partitions = false;
    free(ops);
    ops = NULL;
}

static int primary_now(void)
{
    for (int t = 0; t < 1500; t++) {
        for (int i = 0; i < NODES; i++) {
            char role[32];
            if (!strcmp(role_of(i, role, sizeof(role)), "primary"))
                return i;
        }
        sleep_ms(20);
    }
    fail_msg("no primary in 30 s");
    return -1;
}

static int rounds(void) { return slow() ? 1 : 3; }

/* kill -9 of the primary, restarted on its disk once another took over */
static void test_kill_primary(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start("kill", true);
    int first = primary_now();
    char cs[400] = "";
    for (int t = 0; t < 250 && !strstr(cs, "primary under epoch"); t++) {
        json_t *o = http_get_json(&nodes[first], "/info");
        const char *v = json_string_value(json_object_get(json_object_get(o, "replication"), "coordinator"));
        snprintf(cs, sizeof(cs), "%s", v ? v : "");
        json_decref(o);
        if (!strstr(cs, "primary under epoch"))
            sleep_ms(20);
    }
    if (!strstr(cs, "primary under epoch"))
        fail_msg("the primary's /info says coordinator \"%s\"", cs);
    double worst = 0;
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int p = primary_now();
        int64_t t0 = wall_ms();
        tally_kill(&nodes[p]);
        int64_t t1 = first_ack_elsewhere(p, t0);
        if (!t1)
            fail_msg("round %d: no change acknowledged by another node within 20 s of the kill", r);
        double s = (double)(t1 - t0) / 1000.0;
        worst = s > worst ? s : worst;
        printf("  kill -9 round %d: failover in %.2f s (kill to the first change the new primary acknowledged; "
               "TTL %d s)\n",
               r, s, TTL_S);
        node_start(p);
        wait_group();
    }
    printf("  kill -9: worst failover %.2f s, target %d s (2 x TTL)\n", worst, 2 * TTL_S);
    run_end(NULL);
}

/* the primary SIGSTOPped past its lease, then resumed: it takes no change
 * after the new primary's first (check_epochs), and follows it */
static void test_pause_primary(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start("pause", true);
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int p = primary_now();
        int64_t t0 = wall_ms();
        tally_pause(&nodes[p]);
        if (!first_ack_elsewhere(p, t0))
            fail_msg("round %d: no change acknowledged by another node while the primary was stopped", r);
        sleep_ms(TTL_S * 1000);
        tally_resume(&nodes[p]);
        wait_group();
        char role[32];
        assert_string_equal(role_of(p, role, sizeof(role)), "replica");
    }
    run_end(NULL);
}

/* an etcd member killed (the leader in the first round), then restarted:
 * the group keeps its primary or elects one, and loses nothing */
static void test_etcd_member_killed(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start("etcdkill", true);
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int victim = r == 0 ? etcd_leader() : r % ETCDS;
        if (victim < 0)
            victim = 0;
        etcd_kill(victim);
        sleep_ms(TTL_S * 1500);
        if (!acked_since(wall_ms()))
            fail_msg("round %d: no change acknowledged with etcd member %d down", r, victim);
        etcd_start(victim);
        for (int t = 0; t < 300 && !etcd_healthy(); t++)
            sleep_ms(100);
        wait_group();
    }
    run_end(NULL);
}

/* a replica lagging (stopped) when the primary dies: the other replica is
 * elected (or, when the stopped one counted for --min-replicas-ack, the
 * group waits for it), nothing acknowledged is lost */
static void test_lagging_replica(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start("lag", true);
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int p = primary_now(), lag = (p + 1) % NODES;
        tally_pause(&nodes[lag]);
        sleep_ms(1000);
        int64_t t0 = wall_ms();
        tally_kill(&nodes[p]);
        sleep_ms(500);
        tally_resume(&nodes[lag]);
        if (!first_ack_elsewhere(p, t0))
            fail_msg("round %d: no change acknowledged after the primary died", r);
        node_start(p);
        wait_group();
    }
    run_end(NULL);
}

/* without --min-replicas-ack: kill -9 loses what the replicas had not
 * received (measured, printed; the other checks hold) */
static void test_kill_without_acks(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start("async", false);
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int p = primary_now();
        int64_t t0 = wall_ms();
        tally_kill(&nodes[p]);
        int64_t t1 = first_ack_elsewhere(p, t0);
        if (!t1)
            fail_msg("round %d: no failover within 20 s", r);
        printf("  without --min-replicas-ack, kill -9 round %d: failover in %.2f s\n", r, (double)(t1 - t0) / 1000.0);
        node_start(p);
        wait_group();
    }
    int lost = 0;
    run_end(&lost);
    printf("  without --min-replicas-ack: %d acknowledged changes lost over %d kill -9 rounds\n", lost, rounds());
}

/* the primary cut off from etcd, not from its clients nor its replicas: it
 * stops taking changes before its lease can expire, a replica is elected,
 * and once the cut heals the old primary follows it */
static void test_partition_from_etcd(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start_with("cutetcd", true, true);
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int p = primary_now();
        int64_t t0 = wall_ms();
        for (int j = 0; j < ETCDS; j++)
            atomic_store(&to_etcd[p][j].cut, true);
        int64_t t1 = first_ack_elsewhere(p, t0);
        if (!t1)
            fail_msg("round %d: no change acknowledged by another node with the primary cut off from etcd", r);
        printf("  primary cut off from etcd, round %d: another node took changes %.2f s after the cut\n", r,
               (double)(t1 - t0) / 1000.0);
        http_expect(&nodes[p], "GET", "/readyz?role=primary", NULL, 503, NULL);
        sleep_ms(1000);
        for (int j = 0; j < ETCDS; j++)
            atomic_store(&to_etcd[p][j].cut, false);
        wait_group();
        char role[32];
        assert_string_equal(role_of(p, role, sizeof(role)), "replica");
    }
    run_end(NULL);
}

/* the primary cut off from its replicas, not from etcd nor its clients: it
 * keeps the lease; with --min-replicas-ack 1 its changes time out and are
 * answered 503 (not applied) until the cut heals; nothing is lost */
static void test_partition_from_replicas(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start_with("cutrepl", true, true);
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int p = primary_now();
        atomic_store(&to_node[p].cut, true);
        sleep_ms(TTL_S * 1500);
        atomic_store(&to_node[p].cut, false);
        /* it keeps its key (a machine too loaded to renew the lease in time
         * may lose it, which the checks after the run allow for) */
        int now = wait_group();
        printf("  primary cut off from its replicas, round %d: %s\n", r,
               now == p ? "it kept the key" : "another node was elected (its lease lapsed)");
    }
    run_end(NULL);
}

/* the etcd leader cut off (its clients' paths and its peers' path to it):
 * etcd elects another leader, tallyd's requests go to the other members;
 * the group goes on, nothing is lost */
static void test_partition_etcd_leader(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start_with("cutleader", true, true);
    for (int r = 0; r < rounds(); r++) {
        sleep_ms(800);
        int victim = etcd_leader();
        if (victim < 0)
            victim = r % ETCDS;
        for (int i = 0; i < NODES; i++)
            atomic_store(&to_etcd[i][victim].cut, true);
        kill(etcd_pid[victim], SIGSTOP);   /* and from its peers: it answers no one */
        sleep_ms(TTL_S * 1500);
        if (!acked_since(wall_ms()))
            fail_msg("round %d: no change acknowledged with the etcd leader (member %d) cut off", r, victim);
        kill(etcd_pid[victim], SIGCONT);
        for (int i = 0; i < NODES; i++)
            atomic_store(&to_etcd[i][victim].cut, false);
        for (int t = 0; t < 300 && !etcd_healthy(); t++)
            sleep_ms(100);
        wait_group();
    }
    run_end(NULL);
}

/* --coordinator's companions are checked at start: each refusal names why */
static void test_options_refused(void **state)
{
    (void)state;
    static const struct {
        const char *args[8];
        const char *says;
    } bad[] = {
        { { "--coordinator", "etcd://127.0.0.1:2379", NULL }, "--coordinator needs --advertise-url" },
        { { "--coordinator", "http://127.0.0.1:2379", "--advertise-url", "http://127.0.0.1:1", NULL },
          "the scheme must be etcd:// or etcds://" },
        { { "--coordinator", "etcd://127.0.0.1", "--advertise-url", "http://127.0.0.1:1", NULL }, "expected host:port" },
        { { "--coordinator", "etcd://127.0.0.1:2379", "--advertise-url", "http://127.0.0.1:1", "--replica-of",
            "http://127.0.0.1:2", NULL },
          "--coordinator and --replica-of: keep one" },
        { { "--coordinator", "etcd://127.0.0.1:2379", "--advertise-url", "http://127.0.0.1:1", "--coordinator-user",
            "tally", NULL },
          "--coordinator-user and --coordinator-password-file go together" },
        { { "--coordinator", "etcd://127.0.0.1:2379", "--advertise-url", "http://127.0.0.1:1", "--coordinator-prefix",
            "tally", NULL },
          "--coordinator-prefix: 'tally' must start with /" },
        { { "--advertise-url", "http://127.0.0.1:1", NULL }, "go with --coordinator" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tally_proc_t p;
        assert_int_not_equal(tally_start_expect_exit(&p, NULL, bad[i].args), 0);
        char *log = tally_log(&p);
        if (!strstr(log, bad[i].says))
            fail_msg("refusal %zu: the log does not say \"%s\":\n%s", i, bad[i].says, log);
        free(log);
        tally_cleanup(&p);
    }
}

/* every node killed at once (kill -9) and restarted: the former primary,
 * whose journal holds every change it answered, is elected again (the
 * replicas keep nothing they replicated); nothing acknowledged is lost */
static void test_whole_group_restart(void **state)
{
    (void)state;
    if (skipped())
        return;
    run_start("restart", true);
    for (int r = 0; r < (slow() ? 1 : 2); r++) {
        sleep_ms(800);
        int p = primary_now();
        for (int i = 0; i < NODES; i++)
            tally_kill(&nodes[i]);
        for (int i = 0; i < NODES; i++)
            node_start(i);
        assert_int_equal(wait_group(), p);
    }
    run_end(NULL);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (getenv("IT_ETCD_ONLY"))   /* one test by name (a pattern), while working on it */
        cmocka_set_test_filter(getenv("IT_ETCD_ONLY"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_refused),
        cmocka_unit_test_teardown(test_kill_primary, run_teardown),
        cmocka_unit_test_teardown(test_pause_primary, run_teardown),
        cmocka_unit_test_teardown(test_etcd_member_killed, run_teardown),
        cmocka_unit_test_teardown(test_lagging_replica, run_teardown),
        cmocka_unit_test_teardown(test_whole_group_restart, run_teardown),
        cmocka_unit_test_teardown(test_partition_from_etcd, run_teardown),
        cmocka_unit_test_teardown(test_partition_from_replicas, run_teardown),
        cmocka_unit_test_teardown(test_partition_etcd_leader, run_teardown),
        cmocka_unit_test_teardown(test_kill_without_acks, run_teardown),
    };
    if (getenv("TEST_FILTER"))   /* one test by name (cmocka's * and ? patterns) */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    curl_global_cleanup();
    return rc;
}
