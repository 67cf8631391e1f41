/*
 * it_gateway_nginx.c - a real nginx (the Debian package) in front of a static
 * backend, asking tallyd with auth_request before every request:
 *
 *   client -> nginx :N  --auth_request-->  tallyd /hook/{policy}$request_uri
 *                       <-- 200 / 403 ---
 *          <- 200 backend body, or 429 + Retry-After (error_page 403 = @limited)
 *
 * Keys from a header (X-Api-Key) and from the client address
 * (X-Forwarded-For: $remote_addr).  nginx runs unprivileged-friendly: one
 * process, pid file, logs and temp paths inside a temporary directory, ports
 * picked free.  The configuration is the one in deploy/gateways/nginx with the
 * addresses filled in.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static tally_proc_t T;
static tally_proc_t N;   /* nginx: only .port is used, for http() */
static pid_t nginx_pid;
static char dir[256];

static const char POLICIES[] =
    "{\"policies\": {\n"
    "  \"per_key\": {\"algorithm\": \"sliding_log\", \"max_count\": 3, \"period\": 60,\n"
    "              \"key\": \"{header:X-Api-Key}\", \"deny_status\": 403},\n"
    "  \"per_ip\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"period\": 3600,\n"
    "             \"key\": \"{ip}\", \"deny_status\": 403}\n"
    "}}\n";

static const char *nginx_bin(void)
{
    const char *b = getenv("NGINX");
    if (b && *b)
        return b;
    return access("/usr/sbin/nginx", X_OK) == 0 ? "/usr/sbin/nginx" : NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &n) != 0)
        fail_msg("free_port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* The auth_request wiring of deploy/gateways/nginx/nginx.conf for one policy. */
static int location(char *out, size_t n, const char *prefix, const char *policy)
{
    return snprintf(out, n,
                    "    location %s {\n"
                    "      auth_request /_tally/%s;\n"
                    "      auth_request_set $tally_retry $upstream_http_retry_after;\n"
                    "      auth_request_set $tally_limit $upstream_http_ratelimit_limit;\n"
                    "      auth_request_set $tally_remaining $upstream_http_ratelimit_remaining;\n"
                    "      auth_request_set $tally_reset $upstream_http_ratelimit_reset;\n"
                    "      add_header RateLimit-Limit $tally_limit always;\n"
                    "      add_header RateLimit-Remaining $tally_remaining always;\n"
                    "      add_header RateLimit-Reset $tally_reset always;\n"
                    "      error_page 403 = @limited;\n"
                    "      try_files /ok.txt =404;\n"
                    "    }\n"
                    "    location = /_tally/%s {\n"
                    "      internal;\n"
                    "      proxy_pass http://tally/hook/%s$request_uri;\n"
                    "      proxy_pass_request_body off;\n"
                    "      proxy_set_header Content-Length \"\";\n"
                    "      proxy_set_header X-Original-URI $request_uri;\n"
                    "      proxy_set_header X-Forwarded-For $remote_addr;\n"
                    "      proxy_http_version 1.1;\n"
                    "      proxy_set_header Connection \"\";\n"
                    "    }\n",
                    prefix, policy, policy, policy);
}

static void start_nginx(int tally_port)
{
    N.port = free_port();
    char path[400], conf[8192];
    snprintf(path, sizeof(path), "%s/www", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/www/ok.txt", dir);
    write_file(path, "backend ok\n");
    int o = snprintf(conf, sizeof(conf),
                     "daemon off;\n"
                     "master_process off;\n"
                     "pid %s/nginx.pid;\n"
                     "error_log %s/error.log warn;\n"
                     "events { worker_connections 256; }\n"
                     "http {\n"
                     "  access_log off;\n"
                     "  client_body_temp_path %s/body;\n"
                     "  proxy_temp_path %s/proxy;\n"
                     "  fastcgi_temp_path %s/fastcgi;\n"
                     "  uwsgi_temp_path %s/uwsgi;\n"
                     "  scgi_temp_path %s/scgi;\n"
                     "  upstream tally { server 127.0.0.1:%d; keepalive 16; }\n"
                     "  server {\n"
                     "    listen 127.0.0.1:%d;\n"
                     "    root %s/www;\n"
                     "    default_type text/plain;\n",
                     dir, dir, dir, dir, dir, dir, dir, tally_port, N.port, dir);
    o += location(conf + o, sizeof(conf) - (size_t)o, "/keyed/", "per_key");
    o += location(conf + o, sizeof(conf) - (size_t)o, "/byip/", "per_ip");
    snprintf(conf + o, sizeof(conf) - (size_t)o,
             "    location @limited {\n"
             "      add_header Retry-After $tally_retry always;\n"
             "      add_header RateLimit-Limit $tally_limit always;\n"
             "      add_header RateLimit-Remaining $tally_remaining always;\n"
             "      add_header RateLimit-Reset $tally_reset always;\n"
             "      return 429 \"rate limited\\n\";\n"
             "    }\n"
             "  }\n"
             "}\n");
    snprintf(path, sizeof(path), "%s/nginx.conf", dir);
    write_file(path, conf);

    char errlog[400];
    snprintf(errlog, sizeof(errlog), "%s/error.log", dir);
    nginx_pid = fork();
    if (nginx_pid == 0) {
        int fd = open(errlog, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(nginx_bin(), "nginx", "-p", dir, "-c", path, "-e", errlog, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        int st;
        if (waitpid(nginx_pid, &st, WNOHANG) == nginx_pid) {
            nginx_pid = 0;
            char cmd[600];
            snprintf(cmd, sizeof(cmd), "cat %s >&2", errlog);
            if (system(cmd) != 0)
                fprintf(stderr, "(no nginx log)\n");
            fail_msg("nginx exited during start-up (see its log above)");
        }
        http_resp_t r = http(&N, "GET", "/ok.txt", NULL, NULL);
        long s = r.status;
        http_free(&r);
        if (s == 200)
            return;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    fail_msg("nginx did not answer on port %d", N.port);
}

static int setup(void **state)
{
    (void)state;
    if (!nginx_bin()) {
        fprintf(stderr, "it_gateway_nginx: nginx is not installed (make deps installs the Debian package)\n");
        return -1;
    }
    tmpdir_make(dir, sizeof(dir));
    chmod(dir, 0755);
    char cfg[400];
    snprintf(cfg, sizeof(cfg), "%s/policies.json", dir);
    write_file(cfg, POLICIES);
    const char *args[] = { "--config", cfg, "--in-memory", NULL };
    tally_start(&T, NULL, args);
    start_nginx(T.port);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (nginx_pid > 0) {
        kill(nginx_pid, SIGTERM);
        waitpid(nginx_pid, NULL, 0);
        nginx_pid = 0;
    }
    tally_cleanup(&T);
    if (dir[0])
        tmpdir_remove(dir);
    return 0;
}

static void get_through(const char *path, const char *const *headers, long status, http_resp_t *out)
{
    *out = http_h(&N, "GET", path, NULL, NULL, headers);
    if (out->status != status)
        fail_msg("GET %s through nginx: expected %ld, got %ld: %s", path, status, out->status, out->body);
}

/* Keyed by a header: 200 from the backend with tally's RateLimit headers
 * until the limit, then 429 with Retry-After; other keys are independent. */
static void test_key_from_header(void **state)
{
    (void)state;
    const char *k1[] = { "X-Api-Key: key-one", NULL };
    char v[64];
    for (int i = 0; i < 3; i++) {
        http_resp_t r;
        get_through("/keyed/orders?page=1", k1, 200, &r);
        assert_string_equal(r.body, "backend ok\n");
        assert_true(http_header(&r, "RateLimit-Remaining", v, sizeof(v)));
        assert_int_equal(atoi(v), 2 - i);
        assert_true(http_header(&r, "RateLimit-Limit", v, sizeof(v)));
        assert_string_equal(v, "3");
        http_free(&r);
    }
    http_resp_t r;
    get_through("/keyed/orders?page=2", k1, 429, &r);
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    int retry = atoi(v);
    if (retry < 1 || retry > 60)
        fail_msg("Retry-After %d", retry);
    assert_true(http_header(&r, "RateLimit-Remaining", v, sizeof(v)));
    assert_string_equal(v, "0");
    assert_non_null(strstr(r.body, "rate limited"));
    http_free(&r);
    /* another key is not affected */
    const char *k2[] = { "X-Api-Key: key-two", NULL };
    get_through("/keyed/orders", k2, 200, &r);
    http_free(&r);
    /* tally saw the keys nginx sent */
    r = http(&T, "GET", "/keys/per_key:key-one", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
}

/* Keyed by the client address (X-Forwarded-For: $remote_addr). */
static void test_key_from_address(void **state)
{
    (void)state;
    http_resp_t r;
    for (int i = 0; i < 2; i++) {
        get_through("/byip/anything", NULL, 200, &r);
        http_free(&r);
    }
    get_through("/byip/anything", NULL, 429, &r);
    char v[64];
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_true(atoi(v) >= 1 && atoi(v) <= 3600);
    http_free(&r);
    /* a client-sent X-Forwarded-For cannot pick another key: nginx overwrites it */
    const char *spoof[] = { "X-Forwarded-For: 10.0.0.1", NULL };
    get_through("/byip/anything", spoof, 429, &r);
    http_free(&r);
    r = http(&T, "GET", "/keys/per_ip:127.0.0.1", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
}

/* An error in tally is an error at nginx (500), never a 429. */
static void test_errors_are_not_limits(void **state)
{
    (void)state;
    http_resp_t r;
    get_through("/keyed/orders", NULL, 500, &r);   /* no X-Api-Key: tally answers 400 */
    char v[64];
    assert_false(http_header(&r, "Retry-After", v, sizeof(v)) && v[0]);
    http_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_from_header),
        cmocka_unit_test(test_key_from_address),
        cmocka_unit_test(test_errors_are_not_limits),
    };
    return cmocka_run_group_tests_name("nginx auth_request -> tallyd (integration)", tests, setup, teardown);
}
