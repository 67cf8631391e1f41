/*
 * test_etcd.c - service/etcd.c against a real etcd (Debian's etcd-server,
 * started by the test on free ports, data under a temporary directory):
 * endpoint parsing, keys and values with any bytes, prefix ranges and
 * deletes, transactions (create-if-absent both ways), leases (grant, keep
 * alive, revoke deletes their keys, a revoked lease keeps alive to TTL 0),
 * watch of a prefix from a revision, failover past a member that does not
 * answer, a bounded failure when none answers, TLS with a client
 * certificate, and user/password authentication.  Skipped (with the reason)
 * when etcd is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "service/etcd.h"

static char tmpdir[] = "/tmp/test_etcd.XXXXXX";
static pid_t etcd_pid, etcd_tls_pid;
static int client_port, tls_port;
static char endpoints[64];

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &n))
        abort();
    close(fd);
    return ntohs(a.sin_port);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts one etcd member (extra: more flags); waits until c answers. */
static pid_t start_etcd(const char *name, int cport, const char *scheme, const char *const *extra)
{
    int pport = free_port();
    char data[256], curl[128], purl[128], cluster[160], log[256];
    snprintf(data, sizeof data, "%s/%s", tmpdir, name);
    snprintf(log, sizeof log, "%s/%s.log", tmpdir, name);
    snprintf(curl, sizeof curl, "%s://127.0.0.1:%d", scheme, cport);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", pport);
    snprintf(cluster, sizeof cluster, "%s=%s", name, purl);
    const char *argv[32] = {"etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curl,
                            "--advertise-client-urls", curl, "--listen-peer-urls", purl,
                            "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster};
    int n = 15;
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "w", stderr);
        (void)f;
        dup2(2, 1);
        execvp("etcd", (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_ready(etcd_client_t *c)
{
    for (int i = 0; i < 200; i++) {
        etcd_kv_t kv;
        int found;
        if (etcd_get(c, "ready", 5, &kv, &found, NULL) == 0) {
            if (found)
                etcd_kv_free(&kv);
            return 0;
        }
        sleep_ms(50);
    }
    return -1;
}

static etcd_client_t *open_plain(const char *eps)
{
    char err[200];
    etcd_config_t cfg = {.endpoints = eps, .timeout_ms = 2000};
    etcd_client_t *c = etcd_open(&cfg, err, sizeof err);
    if (!c)
        fail_msg("etcd_open: %s", err);
    return c;
}

static int setup(void **state)
{
    (void)state;
    if (system("command -v etcd >/dev/null 2>&1") != 0)
        return -1;
    if (!mkdtemp(tmpdir))
        return -1;
    client_port = free_port();
    snprintf(endpoints, sizeof endpoints, "etcd://127.0.0.1:%d", client_port);
    etcd_pid = start_etcd("plain", client_port, "http", NULL);
    etcd_client_t *c = open_plain(endpoints);
    int r = wait_ready(c);
    etcd_close(c);
    return r;
}

static int teardown(void **state)
{
    (void)state;
    pid_t pids[] = {etcd_pid, etcd_tls_pid};
    for (int i = 0; i < 2; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_parse(void **state)
{
    (void)state;
    char err[200];
    int tls = -1;
    assert_int_equal(etcd_parse_endpoints("etcd://a:1,b:2", &tls, err, sizeof err), 0);
    assert_int_equal(tls, 0);
    assert_int_equal(etcd_parse_endpoints("etcds://10.0.0.1:2379", &tls, err, sizeof err), 0);
    assert_int_equal(tls, 1);
    assert_int_equal(etcd_parse_endpoints("host:2379", &tls, err, sizeof err), 0);
    const char *bad[] = {"", "etcd://", "http://a:1", "etcd://a", "etcd://a:0", "etcd://a:99999", "etcd://a:1,",
                         "etcd://a:1,,b:2", "etcd://:1", "etcd://a:1/x", "etcd://u@a:1", "etcd://a:x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        if (etcd_parse_endpoints(bad[i], NULL, err, sizeof err) != -1)
            fail_msg("accepted %s", bad[i]);
        assert_true(err[0] != '\0');
    }
    etcd_config_t cfg = {.endpoints = "a:1", .cert = "x"};
    assert_null(etcd_open(&cfg, err, sizeof err));
    etcd_config_t cfg2 = {.endpoints = "a:1", .user = "x"};
    assert_null(etcd_open(&cfg2, err, sizeof err));
}

static void test_kv(void **state)
{
    (void)state;
    etcd_client_t *c = open_plain(endpoints);
    const char key[] = "/t/kv/\0\xff bin", val[] = "v\0\x01\xfe";
    int64_t rev = 0, rev2 = 0;
    assert_int_equal(etcd_put(c, key, sizeof key - 1, val, sizeof val - 1, 0, &rev), 0);
    assert_true(rev > 0);
    etcd_kv_t kv;
    int found = 0;
    assert_int_equal(etcd_get(c, key, sizeof key - 1, &kv, &found, &rev2), 0);
    assert_int_equal(found, 1);
    assert_int_equal(rev2, rev);
    assert_int_equal(kv.key_len, sizeof key - 1);
    assert_memory_equal(kv.key, key, sizeof key - 1);
    assert_int_equal(kv.value_len, sizeof val - 1);
    assert_memory_equal(kv.value, val, sizeof val - 1);
    assert_int_equal(kv.create_revision, rev);
    assert_int_equal(kv.mod_revision, rev);
    assert_int_equal(kv.version, 1);
    etcd_kv_free(&kv);
    /* empty value, missing key */
    assert_int_equal(etcd_put(c, "/t/kv/empty", 11, "", 0, 0, NULL), 0);
    assert_int_equal(etcd_get(c, "/t/kv/empty", 11, &kv, &found, NULL), 0);
    assert_int_equal(found, 1);
    assert_int_equal(kv.value_len, 0);
    etcd_kv_free(&kv);
    assert_int_equal(etcd_get(c, "/t/kv/none", 10, &kv, &found, NULL), 0);
    assert_int_equal(found, 0);
    /* prefix: in key order, not the neighbour "/t/kw" */
    assert_int_equal(etcd_put(c, "/t/kw", 5, "x", 1, 0, NULL), 0);
    etcd_range_t r;
    assert_int_equal(etcd_get_prefix(c, "/t/kv/", 6, &r), 0);
    assert_int_equal(r.n, 2);
    assert_memory_equal(r.kvs[0].key, key, sizeof key - 1);
    assert_string_equal(r.kvs[1].key, "/t/kv/empty");
    etcd_range_free(&r);
    int64_t deleted = 0;
    assert_int_equal(etcd_delete(c, "/t/kv/", 6, 1, &deleted), 0);
    assert_int_equal(deleted, 2);
    assert_int_equal(etcd_delete(c, "/t/kw", 5, 0, &deleted), 0);
    assert_int_equal(deleted, 1);
    assert_int_equal(etcd_get_prefix(c, "/t/", 3, &r), 0);
    assert_int_equal(r.n, 0);
    etcd_range_free(&r);
    etcd_close(c);
}

static void test_txn(void **state)
{
    (void)state;
    etcd_client_t *c = open_plain(endpoints);
    const char *k = "/t/txn/leader";
    etcd_cmp_t absent = {.key = k, .key_len = strlen(k), .target = ETCD_TARGET_CREATE, .op = ETCD_CMP_EQUAL, .number = 0};
    etcd_op_t put = {.kind = ETCD_OP_PUT, .key = k, .key_len = strlen(k), .value = "one", .value_len = 3};
    etcd_op_t get = {.kind = ETCD_OP_GET, .key = k, .key_len = strlen(k)};
    etcd_txn_result_t t;
    assert_int_equal(etcd_txn(c, &absent, 1, &put, 1, &get, 1, &t), 0);
    assert_true(t.succeeded);
    int64_t created = t.revision;
    assert_int_equal(t.n, 1);
    etcd_txn_free(&t);
    put.value = "two";
    assert_int_equal(etcd_txn(c, &absent, 1, &put, 1, &get, 1, &t), 0);
    assert_false(t.succeeded);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.results[0].n, 1);
    assert_int_equal(t.results[0].kvs[0].create_revision, created);
    assert_memory_equal(t.results[0].kvs[0].value, "one", 3);
    etcd_txn_free(&t);
    /* compare by value and by mod revision, delete in the success branch */
    etcd_cmp_t both[2] = {{.key = k, .key_len = strlen(k), .target = ETCD_TARGET_VALUE, .op = ETCD_CMP_EQUAL,
                           .value = "one", .value_len = 3},
                          {.key = k, .key_len = strlen(k), .target = ETCD_TARGET_MOD, .op = ETCD_CMP_EQUAL, .number = created}};
    etcd_op_t del = {.kind = ETCD_OP_DELETE, .key = k, .key_len = strlen(k)};
    assert_int_equal(etcd_txn(c, both, 2, &del, 1, NULL, 0, &t), 0);
    assert_true(t.succeeded);
    assert_int_equal(t.results[0].count, 1);
    etcd_txn_free(&t);
    etcd_close(c);
}

static void test_lease(void **state)
{
    (void)state;
    etcd_client_t *c = open_plain(endpoints);
    int64_t id = 0, ttl = 0;
    assert_int_equal(etcd_lease_grant(c, 5, &id, &ttl), 0);
    assert_true(id != 0);
    assert_int_equal(ttl, 5);
    assert_int_equal(etcd_put(c, "/t/lease/a", 10, "x", 1, id, NULL), 0);
    etcd_kv_t kv;
    int found;
    assert_int_equal(etcd_get(c, "/t/lease/a", 10, &kv, &found, NULL), 0);
    assert_int_equal(found, 1);
    assert_int_equal(kv.lease, id);
    etcd_kv_free(&kv);
    ttl = 0;
    assert_int_equal(etcd_lease_keepalive(c, id, &ttl), 0);
    assert_int_equal(ttl, 5);
    assert_int_equal(etcd_lease_revoke(c, id), 0);
    assert_int_equal(etcd_get(c, "/t/lease/a", 10, &kv, &found, NULL), 0);
    assert_int_equal(found, 0);
    assert_int_equal(etcd_lease_keepalive(c, id, &ttl), 0);
    assert_int_equal(ttl, 0);
    assert_int_equal(etcd_lease_revoke(c, id), 0); /* already gone: not an error */
    /* a put under a lease that does not exist is the request's own error */
    assert_int_equal(etcd_put(c, "/t/lease/b", 10, "x", 1, id, NULL), -1);
    assert_non_null(strstr(etcd_error(c), "lease not found"));
    etcd_close(c);
}

typedef struct {
    int n;
    char keys[8][32];
    int kinds[8];
} seen_t;

static int on_event(void *arg, const etcd_event_t *ev, int64_t revision)
{
    seen_t *s = arg;
    (void)revision;
    snprintf(s->keys[s->n], sizeof s->keys[0], "%.*s", (int)ev->kv->key_len, ev->kv->key);
    s->kinds[s->n] = ev->kind;
    return ++s->n == 3;
}

static void *writer(void *arg)
{
    (void)arg;
    etcd_client_t *c = open_plain(endpoints);
    sleep_ms(300);
    etcd_put(c, "/t/w/b", 6, "2", 1, 0, NULL);
    etcd_put(c, "/t/other", 8, "x", 1, 0, NULL);
    etcd_delete(c, "/t/w/a", 6, 0, NULL);
    etcd_close(c);
    return NULL;
}

static void test_watch(void **state)
{
    (void)state;
    etcd_client_t *c = open_plain(endpoints);
    int64_t rev = 0;
    assert_int_equal(etcd_put(c, "/t/w/a", 6, "1", 1, 0, &rev), 0);
    pthread_t th;
    pthread_create(&th, NULL, writer, NULL);
    seen_t s = {0};
    int64_t next = 0;
    /* from the revision of the first put: that put, then the later ones */
    assert_int_equal(etcd_watch(c, "/t/w/", 5, 1, rev, on_event, &s, NULL, &next), 0);
    pthread_join(th, NULL);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.keys[0], "/t/w/a");
    assert_int_equal(s.kinds[0], ETCD_EVENT_PUT);
    assert_string_equal(s.keys[1], "/t/w/b");
    assert_string_equal(s.keys[2], "/t/w/a");
    assert_int_equal(s.kinds[2], ETCD_EVENT_DELETE);
    assert_true(next > rev + 2);
    /* stop flag: an idle watch returns when asked */
    volatile int stop = 1;
    seen_t none = {0};
    double t0 = now_s();
    assert_int_equal(etcd_watch(c, "/t/idle/", 8, 1, 0, on_event, &none, &stop, NULL), 0);
    assert_true(now_s() - t0 < 5);
    assert_int_equal(none.n, 0);
    etcd_close(c);
}

static void test_failover(void **state)
{
    (void)state;
    char eps[128];
    int dead = free_port();
    snprintf(eps, sizeof eps, "etcd://127.0.0.1:%d,127.0.0.1:%d", dead, client_port);
    etcd_client_t *c = open_plain(eps);
    assert_int_equal(etcd_put(c, "/t/f", 4, "x", 1, 0, NULL), 0);
    assert_int_equal(etcd_delete(c, "/t/f", 4, 0, NULL), 0);
    etcd_close(c);
    /* no member answers: a bounded failure naming the last one tried */
    snprintf(eps, sizeof eps, "127.0.0.1:%d,127.0.0.1:%d", dead, free_port());
    c = open_plain(eps);
    double t0 = now_s();
    etcd_kv_t kv;
    int found;
    assert_int_equal(etcd_get(c, "/t/f", 4, &kv, &found, NULL), -1);
    assert_true(now_s() - t0 < 5);
    assert_non_null(strstr(etcd_error(c), "127.0.0.1:"));
    etcd_close(c);
}

static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void test_tls(void **state)
{
    (void)state;
    if (sh("command -v openssl >/dev/null 2>&1") != 0) {
        print_message("test_tls: skipped, openssl is not installed\n");
        return;
    }
    /* a CA, a member certificate for 127.0.0.1 and a client certificate */
    assert_int_equal(
        sh("cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca "
           ">/dev/null 2>&1 && "
           "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=etcd >/dev/null 2>&1 && "
           "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > srv.ext && "
           "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 "
           "-extfile srv.ext >/dev/null 2>&1 && "
           "openssl req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj /CN=tally >/dev/null 2>&1 && "
           "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext && "
           "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2 "
           "-extfile cli.ext >/dev/null 2>&1",
           tmpdir),
        0);
    char ca[256], srv[256], srvkey[256], cli[256], clikey[256], eps[64], err[200];
    snprintf(ca, sizeof ca, "%s/ca.pem", tmpdir);
    snprintf(srv, sizeof srv, "%s/srv.pem", tmpdir);
    snprintf(srvkey, sizeof srvkey, "%s/srv.key", tmpdir);
    snprintf(cli, sizeof cli, "%s/cli.pem", tmpdir);
    snprintf(clikey, sizeof clikey, "%s/cli.key", tmpdir);
    tls_port = free_port();
    const char *extra[] = {"--cert-file", srv, "--key-file", srvkey, "--client-cert-auth", "--trusted-ca-file", ca, NULL};
    etcd_tls_pid = start_etcd("tls", tls_port, "https", extra);
    snprintf(eps, sizeof eps, "etcds://127.0.0.1:%d", tls_port);
    etcd_config_t cfg = {.endpoints = eps, .cacert = ca, .cert = cli, .key = clikey, .timeout_ms = 2000};
    etcd_client_t *c = etcd_open(&cfg, err, sizeof err);
    assert_non_null(c);
    assert_int_equal(wait_ready(c), 0);
    assert_int_equal(etcd_put(c, "/t/tls", 6, "secure", 6, 0, NULL), 0);
    etcd_close(c);
    /* without the client certificate the member refuses */
    etcd_config_t nocert = {.endpoints = eps, .cacert = ca, .timeout_ms = 1000};
    c = etcd_open(&nocert, err, sizeof err);
    assert_int_equal(etcd_put(c, "/t/tls", 6, "x", 1, 0, NULL), -1);
    etcd_close(c);
    /* without the CA the member's certificate is not trusted */
    etcd_config_t noca = {.endpoints = eps, .cert = cli, .key = clikey, .timeout_ms = 1000};
    c = etcd_open(&noca, err, sizeof err);
    assert_int_equal(etcd_put(c, "/t/tls", 6, "x", 1, 0, NULL), -1);
    etcd_close(c);
}

/* Last: turns authentication on in the plain member. */
static void test_auth(void **state)
{
    (void)state;
    assert_int_equal(sh("etcdctl --endpoints=127.0.0.1:%d user add root:rootpw >/dev/null 2>&1 && "
                        "etcdctl --endpoints=127.0.0.1:%d user add tally:s3cret >/dev/null 2>&1 && "
                        "etcdctl --endpoints=127.0.0.1:%d role add tallyrole >/dev/null 2>&1 && "
                        "etcdctl --endpoints=127.0.0.1:%d role grant-permission tallyrole --prefix=true readwrite /tally/ >/dev/null 2>&1 && "
                        "etcdctl --endpoints=127.0.0.1:%d user grant-role tally tallyrole >/dev/null 2>&1 && "
                        "etcdctl --endpoints=127.0.0.1:%d auth enable >/dev/null 2>&1",
                        client_port, client_port, client_port, client_port, client_port, client_port),
                     0);
    char err[200];
    etcd_config_t cfg = {.endpoints = endpoints, .user = "tally", .password = "s3cret", .timeout_ms = 2000};
    etcd_client_t *c = etcd_open(&cfg, err, sizeof err);
    assert_non_null(c);
    assert_int_equal(etcd_put(c, "/tally/x", 8, "1", 1, 0, NULL), 0);
    etcd_kv_t kv;
    int found;
    assert_int_equal(etcd_get(c, "/tally/x", 8, &kv, &found, NULL), 0);
    assert_int_equal(found, 1);
    etcd_kv_free(&kv);
    /* outside its role's prefix: permission denied, not retried */
    assert_int_equal(etcd_put(c, "/other", 6, "1", 1, 0, NULL), -1);
    assert_non_null(strstr(etcd_error(c), "permission denied"));
    int64_t id;
    assert_int_equal(etcd_lease_grant(c, 5, &id, NULL), 0);
    assert_int_equal(etcd_lease_revoke(c, id), 0);
    etcd_close(c);
    /* a wrong password, and no credentials at all */
    etcd_config_t bad = {.endpoints = endpoints, .user = "tally", .password = "wrong", .timeout_ms = 2000};
    c = etcd_open(&bad, err, sizeof err);
    assert_int_equal(etcd_put(c, "/tally/x", 8, "1", 1, 0, NULL), -1);
    assert_non_null(strstr(etcd_error(c), "authentication failed"));
    etcd_close(c);
    c = open_plain(endpoints);
    assert_int_equal(etcd_put(c, "/tally/x", 8, "1", 1, 0, NULL), -1);
    etcd_close(c);
}

int main(void)
{
    if (system("command -v etcd >/dev/null 2>&1") != 0) {
        printf("test_etcd: skipped, etcd is not installed (Debian: etcd-server)\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse), cmocka_unit_test(test_kv),       cmocka_unit_test(test_txn),
        cmocka_unit_test(test_lease), cmocka_unit_test(test_watch),    cmocka_unit_test(test_failover),
        cmocka_unit_test(test_tls),   cmocka_unit_test(test_auth),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
