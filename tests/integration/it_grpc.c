/*
 * it_grpc.c - the gRPC port (--grpc-port) with real clients: Python's
 * grpcio (Debian's python3-grpcio; stubs generated here from proto/ by
 * python3-grpc-tools), raw HTTP/2 bytes over a socket for what a client
 * library never sends (tests/integration/grpc_client.py has the checks),
 * and h2load (nghttp2-client) for many streams and many connections.
 *
 *   - grpc.health.v1.Health/Check: SERVING, NOT_FOUND for another service;
 *   - an unknown method: UNIMPLEMENTED; ShouldRateLimit without a rate
 *     limit configuration: UNAVAILABLE; with --tokens: UNAUTHENTICATED
 *     without or with a wrong `authorization: Bearer` token;
 *   - a message over 4 MiB: RESOURCE_EXHAUSTED, the channel still serving;
 *   - 1000 calls in flight at once on one connection;
 *   - deadlines: a call whose grpc-timeout passes while its request is
 *     still arriving gets DEADLINE_EXCEEDED from tallyd (every grpcio call
 *     here sends a grpc-timeout of its own, and is answered in time);
 *   - a truncated message, a compressed one, bytes that are not protobuf:
 *     a status each, the connection still serving; malformed frames: a
 *     GOAWAY; the server unharmed after all of it;
 *   - h2load: 20 000 calls over 10 connections x 100 streams, and 200
 *     connections at once, every one answered;
 *   - TLS with ALPN h2 on --tls-cert, and mTLS with --tls-client-ca;
 *   - SIGTERM: a GOAWAY, and the stream open at that moment still finishes;
 *   - --access-log: a line per call, its gRPC status as the HTTP one.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/access.h"
#include "harness.h"

static char dir[256];        /* stubs, certificates, token files */
static bool have_tools;

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static int setup(void **state)
{
    (void)state;
    tmpdir_make(dir, sizeof(dir));
    have_tools = system("/usr/bin/python3 -c 'import grpc, grpc_tools, hpack' 2>/dev/null") == 0 &&
                 system("h2load --version >/dev/null 2>&1") == 0;
    if (!have_tools) {
        fprintf(stderr, "it_grpc: python3-grpcio, python3-grpc-tools, python3-hpack or nghttp2-client missing "
                        "(make deps-test installs them)\n");
        return 0;
    }
    /* tally's own proto/ compiled by grpc_tools; the google/protobuf
     * messages come from protobuf's own (its include directory first) */
    sh("mkdir -p %s/stubs && cd proto && /usr/bin/python3 -m grpc_tools.protoc "
       "-I\"$(/usr/bin/python3 -c 'import grpc_tools, os; print(os.path.dirname(grpc_tools.__file__))')/_proto\" -I. "
       "--python_out=%s/stubs --grpc_python_out=%s/stubs envoy/service/ratelimit/v3/rls.proto "
       "envoy/extensions/common/ratelimit/v3/ratelimit.proto envoy/type/v3/ratelimit_unit.proto "
       "envoy/config/core/v3/base.proto grpc/health/v1/health.proto",
       dir, dir, dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tmpdir_remove(dir);
    return 0;
}

/* A tallyd with --grpc-port on a free port (written to *port), plus args;
 * with wait, until its /readyz answers (HTTP without TLS). */
static void start_grpc_with(tally_proc_t *t, int *port, const char *const *args, bool wait)
{
    const char *all[24];
    static char pbuf[16];
    *port = tally_free_port();
    snprintf(pbuf, sizeof(pbuf), "%d", *port);
    size_t n = 0;
    all[n++] = "--grpc-port";
    all[n++] = pbuf;
    for (size_t i = 0; args && args[i] && n < 22; i++)
        all[n++] = args[i];
    all[n] = NULL;
    if (wait)
        tally_start(t, NULL, all);
    else
        tally_start_nowait(t, NULL, all);
}

static void start_grpc(tally_proc_t *t, int *port, const char *const *args) { start_grpc_with(t, port, args, true); }

/* Runs one check of grpc_client.py (env: extra environment assignments). */
static int check_env(const char *env, int port, const char *what)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "%s timeout 120 /usr/bin/python3 tests/integration/grpc_client.py %s/stubs 127.0.0.1:%d %s",
             env ? env : "", dir, port, what);
    int rc = system(cmd);
    return rc == 0 ? 0 : 1;
}

static int check(int port, const char *what) { return check_env(NULL, port, what); }

static void assert_unharmed(tally_proc_t *t, int port)
{
    assert_int_equal(check(port, "health"), 0);
    http_resp_t r = http(t, "GET", "/readyz", NULL, NULL);
    assert_int_equal(r.status, 200);
    http_free(&r);
}

static void test_health_and_methods(void **state)
{
    (void)state;
    if (!have_tools)
        skip();
    tally_proc_t t;
    int port;
    static const char *const args[] = { "--in-memory", NULL };
    start_grpc(&t, &port, args);
    assert_int_equal(check(port, "health"), 0);
    assert_int_equal(check(port, "unimplemented"), 0);
    assert_int_equal(check(port, "rls_code UNAVAILABLE"), 0);
    assert_int_equal(check(port, "raw_not_protobuf"), 0);
    tally_cleanup(&t);
}

static void test_auth(void **state)
{
    (void)state;
    if (!have_tools)
        skip();
    char tokens[400], hex[65];
    cmd_token_hash_hex("gw-secret", 9, hex);
    snprintf(tokens, sizeof(tokens), "%s/tokens.json", dir);
    sh("printf '{\"tokens\":[{\"name\":\"gw\",\"sha256\":\"%s\",\"scopes\":[\"ratelimit\"]}]}' > %s", hex, tokens);
    char alog[300];
    snprintf(alog, sizeof(alog), "%s/access.log", dir);
    tally_proc_t t;
    int port;
    const char *const args[] = { "--in-memory", "--tokens", tokens, "--access-log", alog, NULL };
    start_grpc(&t, &port, args);
    assert_int_equal(check(port, "rls_code UNAUTHENTICATED"), 0);
    assert_int_equal(check(port, "rls_code UNAUTHENTICATED 'authorization=Bearer wrong'"), 0);
    assert_int_equal(check(port, "rls_code UNAUTHENTICATED 'authorization=Basic Z3c6Z3ctc2VjcmV0'"), 0);
    /* the right token passes authentication: what answers then is the service */
    assert_int_equal(check(port, "rls_code UNAVAILABLE 'authorization=Bearer gw-secret'"), 0);
    assert_int_equal(check(port, "health"), 0);   /* health checks need no token, as /readyz */
    tally_stop(&t);
    /* the access log: a line per call, the gRPC status as its HTTP equivalent */
    char *text = NULL;
    size_t len = 0;
    FILE *f = fopen(alog, "r");
    assert_non_null(f);
    FILE *m = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, m);
    fclose(f);
    fclose(m);
    assert_non_null(strstr(text, "\"token\":null,\"method\":\"POST\",\"path\":\"/envoy.service.ratelimit.v3.RateLimitService/"
                                 "ShouldRateLimit\",\"status\":401"));
    assert_non_null(strstr(text, "\"token\":\"gw\",\"method\":\"POST\",\"path\":\"/envoy.service.ratelimit.v3.RateLimitService/"
                                 "ShouldRateLimit\",\"status\":503"));
    assert_non_null(strstr(text, "\"path\":\"/grpc.health.v1.Health/Check\",\"status\":200"));
    assert_non_null(strstr(text, "\"path\":\"/grpc.health.v1.Health/Check\",\"status\":404"));
    free(text);
    tally_cleanup(&t);
}

static const char EDGE_YAML[] =
    "domain: edge\n"
    "descriptors:\n"
    "  - key: remote_address\n"
    "    rate_limit:\n"
    "      unit: minute\n"
    "      requests_per_unit: 3\n"
    "      name: per_ip\n"
    "  - key: path\n"
    "    value: /api\n"
    "    rate_limit:\n"
    "      unit: hour\n"
    "      requests_per_unit: 100\n"
    "  - key: free\n"
    "    value: \"yes\"\n"
    "    rate_limit:\n"
    "      unlimited: true\n";

/* ShouldRateLimit end to end: every field of the request and the answer
 * (grpc_client.py's rls_fields), then the tokens' checks. */
static void test_should_rate_limit(void **state)
{
    (void)state;
    if (!have_tools)
        skip();
    char yaml[300], tokens[300], hex_gw[65], hex_rd[65];
    snprintf(yaml, sizeof(yaml), "%s/edge.yaml", dir);
    FILE *f = fopen(yaml, "w");
    assert_non_null(f);
    fputs(EDGE_YAML, f);
    fclose(f);
    tally_proc_t t;
    int port;
    {
        const char *const args[] = { "--in-memory", "--rls-config", yaml, NULL };
        start_grpc(&t, &port, args);
        assert_int_equal(check(port, "rls_fields"), 0);
        assert_unharmed(&t, port);
        tally_cleanup(&t);
    }
    cmd_token_hash_hex("gw-secret", 9, hex_gw);
    cmd_token_hash_hex("read-secret", 11, hex_rd);
    snprintf(tokens, sizeof(tokens), "%s/tokens-rls.json", dir);
    sh("printf '{\"tokens\":[{\"name\":\"gw\",\"sha256\":\"%s\",\"scopes\":[\"ratelimit\"]},"
       "{\"name\":\"reader\",\"sha256\":\"%s\",\"scopes\":[\"read\"]}]}' > %s",
       hex_gw, hex_rd, tokens);
    {
        const char *const args[] = { "--in-memory", "--rls-config", yaml, "--tokens", tokens, NULL };
        start_grpc(&t, &port, args);
        assert_int_equal(check(port, "rls_code UNAUTHENTICATED"), 0);
        assert_int_equal(check(port, "rls_code PERMISSION_DENIED 'authorization=Bearer read-secret'"), 0);
        assert_int_equal(check(port, "rls_fields 'authorization=Bearer gw-secret'"), 0);
        tally_cleanup(&t);
    }
    {   /* deploy/gateways/envoy's recipe: what its Envoy sends, against its file */
        const char *const args[] = { "--in-memory", "--rls-config", "deploy/gateways/envoy/ratelimit.yaml", NULL };
        start_grpc(&t, &port, args);
        assert_int_equal(check(port, "envoy_recipe"), 0);
        tally_cleanup(&t);
    }
}

static void test_limits_and_deadlines(void **state)
{
    (void)state;
    if (!have_tools)
        skip();
    tally_proc_t t;
    int port;
    static const char *const args[] = { "--in-memory", NULL };
    start_grpc(&t, &port, args);
    assert_int_equal(check(port, "too_large"), 0);
    assert_int_equal(check(port, "concurrent 1000"), 0);
    assert_int_equal(check(port, "raw_deadline"), 0);
    assert_unharmed(&t, port);
    tally_cleanup(&t);
}

static void test_bad_bytes(void **state)
{
    (void)state;
    if (!have_tools)
        skip();
    tally_proc_t t;
    int port;
    static const char *const args[] = { "--in-memory", NULL };
    start_grpc(&t, &port, args);
    assert_int_equal(check(port, "raw_truncated"), 0);
    assert_int_equal(check(port, "raw_compressed"), 0);
    assert_int_equal(check(port, "raw_malformed"), 0);
    assert_unharmed(&t, port);
    tally_cleanup(&t);
}

/* h2load's summary line: every request done and succeeded. */
static void h2load_all_ok(const char *cmd, int n)
{
    char full[2048], line[512], want[128];
    snprintf(full, sizeof(full), "%s 2>&1", cmd);
    FILE *f = popen(full, "r");
    assert_non_null(f);
    bool ok = false, codes = false;
    snprintf(want, sizeof(want), "requests: %d total, %d started, %d done, %d succeeded, 0 failed, 0 errored", n, n, n, n);
    char codes_want[128];
    snprintf(codes_want, sizeof(codes_want), "status codes: %d 2xx", n);
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, want))
            ok = true;
        if (strstr(line, codes_want))
            codes = true;
    }
    int rc = pclose(f);
    if (!ok || !codes || rc != 0)
        fail_msg("h2load: expected '%s' and '%s' (%s)", want, codes_want, cmd);
}

static void test_h2load(void **state)
{
    (void)state;
    if (!have_tools)
        skip();
    tally_proc_t t;
    int port;
    static const char *const args[] = { "--in-memory", NULL };
    start_grpc(&t, &port, args);
    char body[300], cmd[1024];
    snprintf(body, sizeof(body), "%s/health.bin", dir);
    sh("printf '\\000\\000\\000\\000\\000' > %s", body);   /* an empty HealthCheckRequest, framed */
    const char *hdrs = "-H 'content-type: application/grpc' -H 'te: trailers'";
    snprintf(cmd, sizeof(cmd), "h2load -n 20000 -c 10 -m 100 %s -d %s http://127.0.0.1:%d/grpc.health.v1.Health/Check",
             hdrs, body, port);
    h2load_all_ok(cmd, 20000);
    snprintf(cmd, sizeof(cmd), "h2load -n 2000 -c 200 -m 10 %s -d %s http://127.0.0.1:%d/grpc.health.v1.Health/Check",
             hdrs, body, port);
    h2load_all_ok(cmd, 2000);
    assert_unharmed(&t, port);
    tally_cleanup(&t);
}

/* Over TLS: health checks until one answers SERVING (10 s at most). */
static void wait_serving(int port, const char *env)
{
    for (int i = 0; i < 100; i++) {
        if (check_env(env, port, "health >/dev/null 2>&1") == 0)
            return;
        usleep(100 * 1000);
    }
    fail_msg("the gRPC port did not answer SERVING over TLS in 10 s");
}

static void make_cert(const char *name, const char *cn, const char *ca)
{
    if (!ca) {
        sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key "
           "-out %s.pem -days 2 -subj /CN=%s 2>/dev/null",
           dir, name, name, cn);
        return;
    }
    sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key -out %s.csr "
       "-subj /CN=%s 2>/dev/null && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > %s.ext && "
       "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial -out %s.pem -days 2 "
       "-extfile %s.ext 2>/dev/null",
       dir, name, name, cn, name, name, ca, ca, name, name);
}

static void test_tls(void **state)
{
    (void)state;
    if (!have_tools || system("openssl version >/dev/null 2>&1") != 0)
        skip();
    make_cert("ca", "tally-test-ca", NULL);
    make_cert("server", "localhost", "ca");
    make_cert("client", "gateway", "ca");
    char cert[300], key[300], ca[300], env[1024];
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    tally_proc_t t;
    int port;
    {
        const char *const args[] = { "--in-memory", "--tls-cert", cert, "--tls-key", key, NULL };
        start_grpc_with(&t, &port, args, false);
        snprintf(env, sizeof(env), "GRPC_CA=%s", ca);
        wait_serving(port, env);
        assert_int_equal(check_env(env, port, "health"), 0);
        assert_int_equal(check_env(env, port, "concurrent 200"), 0);
        /* cleartext HTTP/2 on the TLS port: no answer */
        assert_int_not_equal(check(port, "health >/dev/null 2>&1"), 0);
        tally_cleanup(&t);
    }
    {
        const char *const args[] = { "--in-memory", "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca, NULL };
        start_grpc_with(&t, &port, args, false);
        snprintf(env, sizeof(env), "GRPC_CA=%s GRPC_CLIENT_CERT=%s/client.pem GRPC_CLIENT_KEY=%s/client.key", ca, dir,
                 dir);
        wait_serving(port, env);
        assert_int_equal(check_env(env, port, "health"), 0);
        snprintf(env, sizeof(env), "GRPC_CA=%s", ca);   /* no client certificate: the handshake fails */
        assert_int_not_equal(check_env(env, port, "health >/dev/null 2>&1"), 0);
        tally_cleanup(&t);
    }
}

static void test_goaway_on_sigterm(void **state)
{
    (void)state;
    if (!have_tools)
        skip();
    tally_proc_t t;
    int port;
    static const char *const args[] = { "--in-memory", NULL };
    start_grpc(&t, &port, args);
    char what[64];
    snprintf(what, sizeof(what), "raw_goaway_drain %d", (int)t.pid);
    assert_int_equal(check(port, what), 0);
    assert_int_equal(tally_stop(&t), 0);
    tally_cleanup(&t);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_and_methods),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_should_rate_limit),
        cmocka_unit_test(test_limits_and_deadlines),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_h2load),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_goaway_on_sigterm),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
