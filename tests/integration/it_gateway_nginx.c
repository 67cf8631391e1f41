/*
 * it_gateway_nginx.c - a real nginx (the Debian package) in front of a static
 * backend, asking tallyd with auth_request before every request:
 *
 *   client -> nginx :N  --auth_request-->  tallyd /hook/{policy}$request_uri
 *                       <-- 200 / 403 ---
 *          <- 200 backend body, or 429 + Retry-After (error_page 403 = @limited)
 *
 * Keys from a header (X-Api-Key) and from the client address
 * (X-Forwarded-For: $remote_addr; tallyd believes it from nginx's address
 * only, --trusted-proxies 127.0.0.1: a client connecting from 127.0.0.2 with
 * a forged X-Forwarded-For is limited as 127.0.0.2).  nginx runs unprivileged-friendly: one
 * process, pid file, logs and temp paths inside a temporary directory, ports
 * picked free.  Next to the test's own server, the shipped example
 * deploy/gateways/nginx/tally.conf runs as is (addresses substituted) with
 * deploy/gateways/policies.json, in front of a static "application".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include <curl/curl.h>

#include "tests/integration/harness.h"

#define DEPLOY_DIR "deploy/gateways"   /* tests run from the repository root */

static tally_proc_t T;
static tally_proc_t N;   /* nginx, the test's server: only .port is used, for http() */
static tally_proc_t D;   /* nginx, the deploy example's server */
static pid_t nginx_pid;
static char dir[256];

static const char POLICIES[] =
    "{\"policies\": {\n"
    "  \"per_key\": {\"algorithm\": \"sliding_log\", \"max_count\": 3, \"period\": 60,\n"
    "              \"key\": \"{header:X-Api-Key}\", \"deny_status\": 403},\n"
    "  \"per_ip\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"period\": 3600,\n"
    "             \"key\": \"{ip}\", \"deny_status\": 403}\n"
    "}}\n";

/* The deploy example's policies plus the test's own. */
static char *merged_policies(void)
{
    json_error_t je;
    json_t *deploy = json_load_file(DEPLOY_DIR "/policies.json", 0, &je);
    if (!deploy)
        fail_msg("%s/policies.json: line %d: %s", DEPLOY_DIR, je.line, je.text);
    json_t *mine = json_loads(POLICIES, 0, &je);
    assert_non_null(mine);
    json_object_update(json_object_get(deploy, "policies"), json_object_get(mine, "policies"));
    char *text = json_dumps(deploy, JSON_INDENT(2));
    json_decref(deploy);
    json_decref(mine);
    return text;
}

/* The shipped snippet with this test's addresses; malloc'd. */
static char *deploy_snippet(int tally_port, int app_port, int listen_port)
{
    FILE *f = fopen(DEPLOY_DIR "/nginx/tally.conf", "r");
    if (!f)
        fail_msg("%s/nginx/tally.conf: %s", DEPLOY_DIR, strerror(errno));
    char *in = calloc(1, 65536);
    size_t n = fread(in, 1, 65535, f);
    fclose(f);
    in[n] = '\0';
    char headers[PATH_MAX];
    if (!realpath(DEPLOY_DIR "/nginx/tally-headers.conf", headers))
        fail_msg("tally-headers.conf: %s", strerror(errno));
    char tally[64], app[64], listen[64], include[PATH_MAX + 16];
    snprintf(tally, sizeof(tally), "server 127.0.0.1:%d;", tally_port);
    snprintf(app, sizeof(app), "server 127.0.0.1:%d;", app_port);
    snprintf(listen, sizeof(listen), "listen 127.0.0.1:%d;", listen_port);
    snprintf(include, sizeof(include), "include %s;", headers);
    const char *from[] = { "server 127.0.0.1:8081;", "server 127.0.0.1:3000;", "listen 8000;",
                           "include conf.d/tally-headers.conf;" };
    const char *to[] = { tally, app, listen, include };
    char *out = calloc(1, 2 * 65536);
    size_t o = 0;
    for (const char *p = in; *p;) {
        size_t k = 0;
        for (; k < 4; k++)
            if (!strncmp(p, from[k], strlen(from[k])))
                break;
        if (k < 4) {
            o += (size_t)snprintf(out + o, 2 * 65536 - o, "%s", to[k]);
            p += strlen(from[k]);
        } else {
            out[o++] = *p++;
        }
    }
    free(in);
    if (!strstr(out, tally) || !strstr(out, app) || !strstr(out, listen) || !strstr(out, include))
        fail_msg("deploy/gateways/nginx/tally.conf no longer has the addresses this test substitutes");
    return out;
}

static const char *nginx_bin(void)
{
    const char *b = getenv("NGINX");
    if (b && *b)
        return b;
    return access("/usr/sbin/nginx", X_OK) == 0 ? "/usr/sbin/nginx" : NULL;
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
                    "      proxy_method HEAD;\n"
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
    N.port = tally_free_port();
    D.port = tally_free_port();
    int app_port = tally_free_port();
    char path[400], conf[16384];
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
                     "  server {\n"
                     "    listen 127.0.0.1:%d;\n"
                     "    root %s/www;\n"
                     "    default_type text/plain;\n",
                     dir, dir, dir, dir, dir, dir, dir, N.port, dir);
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
             "  server {\n"
             "    listen 127.0.0.1:%d;\n"
             "    root %s/www;\n"
             "    default_type text/plain;\n"
             "    location / { return 200 \"backend ok\\n\"; }\n"
             "  }\n",
             app_port, dir);
    o += (int)strlen(conf + o);
    char *snippet = deploy_snippet(tally_port, app_port, D.port);
    snprintf(conf + o, sizeof(conf) - (size_t)o, "%s}\n", snippet);
    free(snippet);
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
    char *policies = merged_policies();
    write_file(cfg, policies);
    free(policies);
    const char *args[] = { "--config", cfg, "--in-memory", "--trusted-proxies", "127.0.0.1", NULL };
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

/* GET through nginx from the local address `from` (127.0.0.2: a client other
 * than nginx, which reaches tallyd from 127.0.0.1) with an X-Forwarded-For
 * header of the client's choosing; returns the status. */
static long get_from(const char *from, const char *path, const char *forged_xff)
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    char url[256], h[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", N.port, path);
    snprintf(h, sizeof(h), "X-Forwarded-For: %s", forged_xff);
    struct curl_slist *hs = curl_slist_append(NULL, h);
    FILE *devnull = fopen("/dev/null", "w");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_INTERFACE, from);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, devnull);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long status = 0;
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        fail_msg("GET %s from %s: %s", path, from, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    fclose(devnull);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    return status;
}

/* The {ip} bypass of issue 15: a fresh forged X-Forwarded-For on every
 * request.  Through nginx, every one is counted under the real client's
 * address (127.0.0.2), none under a forged one or under nginx's own. */
static void test_forged_forwarded_for(void **state)
{
    (void)state;
    const char *forged[] = { "198.51.100.1", "198.51.100.2, 198.51.100.3", "127.0.0.1", "garbage" };
    for (int i = 0; i < 4; i++) {
        long want = i < 2 ? 200 : 429;   /* per_ip: 2 an hour */
        long got = get_from("127.0.0.2", "/byip/forged", forged[i]);
        if (got != want)
            fail_msg("request %d with X-Forwarded-For: %s: expected %ld, got %ld", i, forged[i], want, got);
    }
    http_resp_t r = http(&T, "GET", "/keys/per_ip:127.0.0.2", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    static const char *const not_keys[] = { "/keys/per_ip:198.51.100.1", "/keys/per_ip:198.51.100.3",
                                            "/keys/per_ip:garbage" };
    for (size_t i = 0; i < sizeof(not_keys) / sizeof(not_keys[0]); i++) {
        r = http(&T, "GET", not_keys[i], NULL, NULL);
        assert_status(&r, 404);
        http_free(&r);
    }
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

/* The shipped example, as is: policy api_nginx (GCRA, 10/s, bursts of 21,
 * per client of an API key nginx knows, else per address) and login_nginx
 * (5 per 5 minutes per address and path, however the path is spelled). */
static void test_deploy_example(void **state)
{
    (void)state;
    const char *key[] = { "X-Api-Key: example-key-replace-me", NULL };
    int allowed = 0, limited_at = -1;
    char v[64];
    for (int i = 0; i < 40 && limited_at < 0; i++) {
        http_resp_t r = http_h(&D, "GET", "/orders/17?expand=1", NULL, NULL, key);
        if (r.status == 200) {
            assert_string_equal(r.body, "backend ok\n");
            assert_true(http_header(&r, "RateLimit-Limit", v, sizeof(v)));
            assert_string_equal(v, "21");
            allowed++;
        } else if (r.status == 429) {
            limited_at = i;
            assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
            assert_int_equal(atoi(v), 1);
            assert_non_null(strstr(r.body, "RATE_LIMITED"));
        } else {
            fail_msg("GET through the deploy example: %ld %s", r.status, r.body);
        }
        http_free(&r);
    }
    if (limited_at < 0 || allowed < 21 || allowed > 24)
        fail_msg("deploy example: %d allowed before the first 429 (expected 21, a few more if slow)", allowed);
    http_resp_t r = http(&T, "GET", "/keys/api:client-example", NULL, NULL);   /* shared with policy "api" */
    assert_status(&r, 200);
    http_free(&r);
    /* the outside review's bypasses: each spelling of /login a fresh bucket */
    static const char *const spellings[] = { "/login/", "//login", "/%6Cogin", "/login;x", "/login%20" };
    for (int i = 0; i < 5; i++) {
        r = http(&D, "POST", spellings[i], "user=a", "application/x-www-form-urlencoded");
        assert_status(&r, 200);
        http_free(&r);
    }
    r = http(&D, "POST", "/login?next=%2F", "user=a", "application/x-www-form-urlencoded");
    assert_status(&r, 429);
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_true(atoi(v) >= 299 && atoi(v) <= 300);
    http_free(&r);
    r = http(&T, "GET", "/keys/login:127.0.0.1:%2Flogin", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/keys?prefix=login:", NULL, NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"key\":\"login:127.0.0.1:/login\""));
    int login_keys = 0;
    for (const char *k = r.body; (k = strstr(k, "\"key\":\"login:")); k++)
        login_keys++;
    assert_int_equal(login_keys, 1);   /* one bucket for every spelling */
    http_free(&r);
}

/* A client-chosen key is no identity: made-up API keys and X-Client-Id
 * headers, a new one on every request, all count under the client's
 * address through the shipped example (the review's "random X-Api-Key per
 * request is never limited"). */
static void test_deploy_made_up_keys(void **state)
{
    (void)state;
    int allowed = 0, limited = 0;
    for (int i = 0; i < 40; i++) {
        char k1[64], k2[64];
        snprintf(k1, sizeof(k1), "X-Api-Key: made-up-%d", i);
        snprintf(k2, sizeof(k2), "X-Client-Id: someone-%d", i);
        const char *h[] = { k1, k2, NULL };
        http_resp_t r = http_h(&D, "GET", "/orders", NULL, NULL, h);
        if (r.status == 200)
            allowed++;
        else if (r.status == 429)
            limited++;
        else
            fail_msg("GET through the deploy example: %ld %s", r.status, r.body);
        http_free(&r);
    }
    if (allowed > 25 || limited < 15)
        fail_msg("made-up keys: %d allowed, %d limited (expected 21, a few more if slow)", allowed, limited);
    http_resp_t r = http(&T, "GET", "/keys/api:127.0.0.1", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/keys/api:someone-0", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_from_header),
        cmocka_unit_test(test_key_from_address),
        cmocka_unit_test(test_forged_forwarded_for),
        cmocka_unit_test(test_errors_are_not_limits),
        cmocka_unit_test(test_deploy_example),
        cmocka_unit_test(test_deploy_made_up_keys),
    };
    return cmocka_run_group_tests_name("nginx auth_request -> tallyd (integration)", tests, setup, teardown);
}
