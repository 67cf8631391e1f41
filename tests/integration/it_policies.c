/*
 * it_policies.c - named policies from --config on a real tallyd: the file
 * refused at start with its line and reason, reload on SIGHUP (a bad file
 * keeps the old policies), policy requests, key templates, shadow mode,
 * per-policy metrics, the gateway hook fed exactly what nginx auth_request,
 * Envoy ext_authz (HTTP service) and Traefik ForwardAuth send, and journal
 * replay that does not need the policies file.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static tally_proc_t T;
static char cfgdir[256];
static char cfg[300];

static const char POLICIES[] =
    "{\n"
    "  \"policies\": {\n"
    "    \"api\": {\"algorithm\": \"gcra\", \"max_burst\": 2, \"count_per_period\": 1, \"period\": 60,\n"
    "            \"key\": \"{header:X-Api-Key}\"},\n"
    "    \"nginx\": {\"algorithm\": \"sliding_log\", \"max_count\": 2, \"period\": 60, \"deny_status\": 403,\n"
    "              \"key\": \"{header:X-Api-Key|ip}\"},\n"
    "    \"envoy\": {\"algorithm\": \"sliding_window\", \"max_count\": 2, \"period\": 3600,\n"
    "              \"key\": \"{ip}:{method}:{host}{path}\"},\n"
    "    \"traefik\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"period\": 3600,\n"
    "                \"key\": \"{method}:{host}{path}:{ip}\"},\n"
    "    \"bucket\": {\"algorithm\": \"token_bucket\", \"capacity\": 2, \"refill_rate\": 0.001,\n"
    "               \"key\": \"{header:X-User}\", \"prefix\": \"u/\"},\n"
    "    \"global\": {\"algorithm\": \"fixed_window\", \"max_count\": 1000, \"period\": 3600, \"key\": \"all\"},\n"
    "    \"trial\": {\"algorithm\": \"sliding_log\", \"max_count\": 1, \"period\": 60, \"shadow\": true},\n"
    "    \"login\": {\"algorithm\": \"sliding_log\", \"max_count\": 5, \"period\": 300, \"key\": \"{ip}:{path}\"}\n"
    "  }\n"
    "}\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    tmpdir_make(cfgdir, sizeof(cfgdir));
    snprintf(cfg, sizeof(cfg), "%s/policies.json", cfgdir);
    write_file(cfg, POLICIES);
    const char *args[] = { "--config", cfg, "--trusted-proxies", "127.0.0.1,::1", NULL };
    tally_start(&T, NULL, args);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tally_cleanup(&T);
    tmpdir_remove(cfgdir);
    return 0;
}

static bool log_has(const tally_proc_t *p, const char *s)
{
    char *log = tally_log(p);
    bool has = strstr(log, s) != NULL;
    free(log);
    return has;
}

static void wait_log(const tally_proc_t *p, const char *s)
{
    for (int i = 0; i < 500; i++) {
        if (log_has(p, s))
            return;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    char *log = tally_log(p);
    fail_msg("'%s' never appeared in the log:\n%s", s, log);
}

static void assert_key(const char *escaped, bool exists)
{
    http_resp_t r = httpf(&T, "GET", NULL, "/keys/%s", escaped);
    if (exists)
        assert_status(&r, 200);
    else
        assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* The file                                                                 */
/* ------------------------------------------------------------------------ */

/* A malformed file is refused at start with the line and the reason. */
static void test_refused_at_start(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *says[2];
    } cases[] = {
        { "{\n  \"policies\": {\n    \"a\": {\"algorithm\": \"gcra\",, }\n  }\n}\n", { "line 3", NULL } },
        { "{\n  \"policies\": {\n    \"a\": {\n      \"algorithm\": \"leaky\",\n      \"max_count\": 1\n    }\n  }\n}\n",
          { "line 4", "unknown algorithm 'leaky'" } },
        { "{\"policies\": {\n \"ok\": {\"max_burst\": 1, \"count_per_period\": 1, \"period\": 1},\n"
          " \"log\": {\"algorithm\": \"sliding_log\",\n   \"max_count\": 200000, \"period\": 60}}}\n",
          { "line 4", "sliding_window" } },
        { "{\"policies\": {\n \"k\": {\"algorithm\": \"fixed_window\", \"max_count\": 1, \"period\": 60,\n"
          "   \"key\": \"{header:X-Api-Key}:{colour}\"}}}\n",
          { "line 3", "unknown source '{colour}'" } },
        { "{\"policies\": {\n \"k\": {\"algorithm\": \"fixed_window\", \"max_count\": 1, \"period\": 60,\n"
          "   \"key\": \"{ip\"}}}\n",
          { "line 3", "not closed" } },
        { "{\"policies\": {\n \"d\": {\"max_burst\": 1, \"count_per_period\": 1, \"period\": 1,\n"
          "   \"deny_status\": 404}}}\n",
          { "line 3", "deny_status" } },
        { "{\"policies\": {\n \"u\": {\"max_burst\": 1, \"count_per_period\": 1, \"period\": 1,\n"
          "\n   \"burst\": 3}}}\n",
          { "line 4", "unknown field 'burst'" } },
        { "{\"policies\": {\n\n \"m\": {\"algorithm\": \"token_bucket\", \"capacity\": 5}}}\n",
          { "line 3", "refill_rate" } },
        { "{\"policies\": {\"bad name!\": {\"max_burst\": 1, \"count_per_period\": 1, \"period\": 1}}}",
          { "line 1", "policy name" } },
        { "{\"limits\": {}}", { "line 1", "unknown field 'limits'" } },
        { "[1, 2]", { "line 1", "JSON object" } },
        { "{\"policies\": {\"a\": {\"period\": 1}, \"a\": {\"period\": 2}}}", { "line 1", "duplicate" } },
    };
    char path[400];
    snprintf(path, sizeof(path), "%s/bad.json", cfgdir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(path, cases[i].text);
        tally_proc_t p;
        const char *args[] = { "--config", path, "--in-memory", NULL };
        int st = tally_start_expect_exit(&p, NULL, args);
        char *log = tally_log(&p);
        if (st == 0)
            fail_msg("case %zu: tallyd started", i);
        for (int k = 0; k < 2; k++)
            if (cases[i].says[k] && !strstr(log, cases[i].says[k]))
                fail_msg("case %zu: expected '%s' in the log:\n%s", i, cases[i].says[k], log);
        if (!strstr(log, "bad.json"))
            fail_msg("case %zu: the log does not name the file:\n%s", i, log);
        free(log);
        tally_cleanup(&p);
    }
    /* a missing file */
    tally_proc_t p;
    const char *args[] = { "--config", "/nonexistent/policies.json", "--in-memory", NULL };
    assert_true(tally_start_expect_exit(&p, NULL, args) != 0);
    assert_true(log_has(&p, "/nonexistent/policies.json"));
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Requests naming a policy                                                 */
/* ------------------------------------------------------------------------ */

static void test_policy_requests(void **state)
{
    (void)state;
    /* POST, GET ?policy= and the hook share the counter <prefix><key> */
    http_resp_t r = http(&T, "POST", "/throttle", "{\"policy\":\"api\",\"key\":\"alice\"}", NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "allowed"));
    assert_int_equal(json_int_of(&r, "remaining"), 2);
    assert_string_equal(json_string_value(json_object_get(r.json, "policy")), "api");
    char v[128];
    assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
    assert_string_equal(v, "\"api\";q=3;w=180");
    http_free(&r);
    r = http(&T, "GET", "/throttle/alice?policy=api", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 1);
    http_free(&r);
    const char *h[] = { "X-Api-Key: alice", NULL };
    r = http_h(&T, "GET", "/hook/api/v1/things", NULL, NULL, h);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 0);
    http_free(&r);
    r = http(&T, "GET", "/throttle/alice?policy=api", NULL, NULL);
    assert_status(&r, 429);   /* the policy's deny status */
    http_free(&r);
    assert_key("api:alice", true);
    assert_key("alice", false);
    /* a key-less POST takes its key from the template over this request */
    r = http_h(&T, "POST", "/throttle", "{\"policy\":\"api\",\"quantity\":0}", NULL, h);
    assert_int_equal(json_int_of(&r, "remaining"), 0);
    http_free(&r);
    r = http(&T, "POST", "/throttle", "{\"policy\":\"api\"}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* policy parameters cannot be overridden */
    r = http(&T, "POST", "/throttle", "{\"policy\":\"api\",\"key\":\"x\",\"max_burst\":100}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "POST", "/throttle", "{\"policy\":\"api\",\"key\":\"x\",\"shadow\":true}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* reset through the policy */
    r = http(&T, "DELETE", "/throttle/alice?policy=api", NULL, NULL);
    assert_true(json_bool_of(&r, "deleted"));
    http_free(&r);
    assert_key("api:alice", false);
    /* a custom prefix */
    r = http(&T, "POST", "/throttle", "{\"policy\":\"bucket\",\"key\":\"bob\"}", NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 1);
    http_free(&r);
    assert_key("u%2Fbob", true);
    /* a key too long with its prefix */
    char body[1200], key[1030];
    memset(key, 'k', 1023);
    key[1023] = '\0';
    snprintf(body, sizeof(body), "{\"policy\":\"api\",\"key\":\"%s\"}", key);
    r = http(&T, "POST", "/throttle", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* several policies at once, atomically */
    const char *batch = "{\"requests\":[{\"policy\":\"bucket\",\"key\":\"carol\"},"
                        "{\"policy\":\"global\"},{\"policy\":\"bucket\",\"key\":\"carol\",\"quantity\":2}]}";
    const char *ip[] = { "X-Forwarded-For: 192.0.2.1", NULL };
    r = http_h(&T, "POST", "/throttle", batch, NULL, ip);
    assert_false(json_bool_of(&r, "allowed"));   /* 1 + 2 > capacity 2 */
    http_free(&r);
    assert_key("u%2Fcarol", false);
    assert_key("global:all", false);
}

/* ------------------------------------------------------------------------ */
/* The hook, fed what each gateway sends                                    */
/* ------------------------------------------------------------------------ */

/* nginx: `auth_request /_tally;` with `proxy_pass http://tally/hook/nginx$request_uri;`,
 * `proxy_pass_request_body off; proxy_set_header Content-Length "";
 * proxy_set_header X-Original-URI $request_uri; proxy_set_header X-Forwarded-For $remote_addr;`
 * The subrequest keeps the original method and headers. */
static void test_hook_nginx(void **state)
{
    (void)state;
    const char *h[] = { "X-Original-URI: /v1/orders?page=2", "X-Forwarded-For: 203.0.113.9",
                        "User-Agent: curl/8.0", "Accept: */*", "Connection: close", NULL };
    for (int i = 0; i < 2; i++) {
        http_resp_t r = http_h(&T, "POST", "/hook/nginx/v1/orders?page=2", NULL, NULL, h);
        assert_status(&r, 200);
        char v[64];
        assert_true(http_header(&r, "RateLimit-Remaining", v, sizeof(v)));
        assert_int_equal(atoi(v), 1 - i);
        http_free(&r);
    }
    http_resp_t r = http_h(&T, "POST", "/hook/nginx/v1/orders?page=2", NULL, NULL, h);
    assert_status(&r, 403);   /* nginx maps it: error_page 403 = @limited */
    char v[64];
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_true(atoi(v) >= 1 && atoi(v) <= 60);
    http_free(&r);
    assert_key("nginx:203.0.113.9", true);
    /* the API key wins over the address when present */
    const char *k[] = { "X-Api-Key: key-1", "X-Forwarded-For: 203.0.113.9", NULL };
    r = http_h(&T, "GET", "/hook/nginx/", NULL, NULL, k);
    assert_status(&r, 200);
    http_free(&r);
    assert_key("nginx:key-1", true);
    /* with neither header nor forwarding headers, the peer's address */
    r = http(&T, "GET", "/hook/nginx/", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    assert_key("nginx:127.0.0.1", true);
    /* HEAD works the same (nginx may forward any method) */
    const char *k2[] = { "X-Api-Key: key-2", NULL };
    r = http_h(&T, "HEAD", "/hook/nginx", NULL, NULL, k2);
    assert_status(&r, 200);
    assert_true(http_header(&r, "RateLimit-Limit", v, sizeof(v)));
    http_free(&r);
}

/* Envoy ext_authz, HTTP service, path_prefix "/hook/envoy": the original
 * method and path (with its query) after the prefix, Host = the original
 * :authority, Content-Length 0, Authorization, and the headers allowed by
 * allowed_headers (here x-forwarded-for, which Envoy sets). */
static void test_hook_envoy(void **state)
{
    (void)state;
    const char *h[] = { "Host: shop.example.com", "Content-Length: 0", "Authorization: Bearer abc",
                        "x-forwarded-for: 198.51.100.7", "x-envoy-expected-rq-timeout-ms: 200",
                        "x-request-id: 2cbd2bad-8298-4e75-af98-c9301b7ba061", NULL };
    for (int i = 0; i < 2; i++) {
        http_resp_t r = http_h(&T, "PUT", "/hook/envoy/v1/carts/42?coupon=x", NULL, NULL, h);
        assert_status(&r, 200);
        http_free(&r);
    }
    http_resp_t r = http_h(&T, "PUT", "/hook/envoy/v1/carts/42?coupon=x", NULL, NULL, h);
    assert_status(&r, 429);   /* Envoy passes it to the client with these headers */
    char v[128];
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_true(http_header(&r, "RateLimit", v, sizeof(v)));
    assert_non_null(strstr(v, "\"envoy\";r=0"));
    assert_false(json_bool_of(&r, "allowed"));
    http_free(&r);
    assert_key("envoy:198.51.100.7:PUT:shop.example.com%2Fv1%2Fcarts%2F42", true);
}

/* Traefik ForwardAuth: GET to the configured address with the original
 * headers plus X-Forwarded-Method/-Proto/-Host/-Uri/-For. */
static void test_hook_traefik(void **state)
{
    (void)state;
    const char *h[] = { "X-Forwarded-Method: DELETE", "X-Forwarded-Proto: https",
                        "X-Forwarded-Host: api.example.com", "X-Forwarded-Uri: /v1/items/7?force=1",
                        "X-Forwarded-For: 192.0.2.44", "User-Agent: Mozilla/5.0", "Accept-Encoding: gzip", NULL };
    for (int i = 0; i < 2; i++) {
        http_resp_t r = http_h(&T, "GET", "/hook/traefik", NULL, NULL, h);
        assert_status(&r, 200);
        http_free(&r);
    }
    http_resp_t r = http_h(&T, "GET", "/hook/traefik", NULL, NULL, h);
    assert_status(&r, 429);   /* Traefik returns it to the client unchanged */
    char v[64];
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    http_free(&r);
    assert_key("traefik:DELETE:api.example.com%2Fv1%2Fitems%2F7:192.0.2.44", true);
}

/* {path} is one key however the path is spelled (core/urlpath.h): the
 * outside review escaped the sample login policy with each of these, sent
 * as nginx (X-Original-URI), Traefik (X-Forwarded-Uri) or in the hook's
 * own path. */
static void test_path_spellings(void **state)
{
    (void)state;
    static const char *const nginx[] = { "/login/", "//login", "/./login", "/%6Cogin", "/login;x",
                                         "/login%20", "/LOGIN", "/a/../login?next=/" };
    for (size_t i = 0; i < sizeof(nginx) / sizeof(nginx[0]); i++) {
        char h[128];
        snprintf(h, sizeof(h), "X-Original-URI: %s", nginx[i]);
        const char *hs[] = { h, "X-Forwarded-For: 198.51.100.20", NULL };
        http_resp_t r = http_h(&T, "HEAD", "/hook/login", NULL, NULL, hs);
        assert_status(&r, i < 5 ? 200 : 429);
        http_free(&r);
    }
    const char *traefik[] = { "X-Forwarded-Uri: /Login;jsessionid=9/", "X-Forwarded-For: 198.51.100.20", NULL };
    http_resp_t r = http_h(&T, "GET", "/hook/login", NULL, NULL, traefik);
    assert_status(&r, 429);
    http_free(&r);
    const char *direct[] = { "X-Forwarded-For: 198.51.100.20", NULL };
    r = http_h(&T, "GET", "/hook/login/%6Cogin/", NULL, NULL, direct);
    assert_status(&r, 429);
    http_free(&r);
    assert_key("login:198.51.100.20:%2Flogin", true);
    r = http(&T, "GET", "/keys?prefix=login:198.51.100.20", NULL, NULL);
    assert_status(&r, 200);
    int n = 0;
    for (const char *k = r.body; (k = strstr(k, "\"key\":")); k++)
        n++;
    assert_int_equal(n, 1);
    http_free(&r);
}

/* Errors are never "limited": their statuses are not deny statuses. */
static void test_hook_errors(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "GET", "/hook/nope/x", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    char v[64];
    assert_false(http_header(&r, "Retry-After", v, sizeof(v)));
    http_free(&r);
    /* the template's header is absent and has no fallback */
    r = http(&T, "GET", "/hook/api/x", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "X-Api-Key"));
    http_free(&r);
    const char *empty[] = { "X-Api-Key:", NULL };   /* curl: remove; an empty value is absent too */
    r = http_h(&T, "GET", "/hook/api/x", NULL, NULL, empty);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* a header value that is not UTF-8 cannot be a key */
    const char *bin[] = { "X-Api-Key: \xff\xfe", NULL };
    r = http_h(&T, "GET", "/hook/api/x", NULL, NULL, bin);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
}

/* Shadow mode: decided and counted, always allowed. */
static void test_shadow_and_metrics(void **state)
{
    (void)state;
    const char *h[] = { "X-Real-IP: 10.9.8.7", NULL };
    for (int i = 0; i < 3; i++) {
        http_resp_t r = http_h(&T, "GET", "/hook/trial/signup", NULL, NULL, h);
        assert_status(&r, 200);
        assert_true(json_bool_of(&r, "allowed"));
        if (i > 0)
            assert_true(json_bool_of(&r, "shadow_limited"));
        char v[64];
        assert_false(http_header(&r, "Retry-After", v, sizeof(v)));
        http_free(&r);
    }
    assert_key("trial:10.9.8.7", true);
    http_resp_t r = http(&T, "GET", "/metrics", NULL, NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"trial\",decision=\"allowed\"} 1\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"trial\",decision=\"shadow_limited\"} 2\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"trial\",decision=\"limited\"} 0\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"traefik\",decision=\"limited\"} 1\n"));
    http_free(&r);
}

/* SIGHUP: a good file replaces the policies (state and counters stay); a bad
 * one is refused with its line and the old policies keep working. */
static void test_reload(void **state)
{
    (void)state;
    char path[400];
    snprintf(path, sizeof(path), "%s/reload.json", cfgdir);
    write_file(path, "{\"policies\": {\"r\": {\"algorithm\": \"sliding_log\", \"max_count\": 2, \"period\": 600}}}");
    tally_proc_t p;
    const char *args[] = { "--config", path, "--in-memory", "--trusted-proxies", "127.0.0.1,::1", NULL };
    tally_start(&p, NULL, args);
    tally_proc_t saved = T;
    T = p;
    const char *h[] = { "X-Forwarded-For: 192.0.2.8", NULL };
    for (int i = 0; i < 3; i++) {
        http_resp_t r = http_h(&T, "GET", "/hook/r/", NULL, NULL, h);
        assert_status(&r, i < 2 ? 200 : 429);
        http_free(&r);
    }
    write_file(path, "{\"policies\": {\n"
                     "  \"r\": {\"algorithm\": \"sliding_log\", \"max_count\": 5, \"period\": 600},\n"
                     "  \"s\": {\"algorithm\": \"fixed_window\", \"max_count\": 1, \"period\": 3600}}}");
    kill(T.pid, SIGHUP);
    wait_log(&T, "reloaded");
    /* the same counter under the new limit: 2 used of 5 */
    http_resp_t r = http_h(&T, "GET", "/hook/r/", NULL, NULL, h);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 2);
    http_free(&r);
    r = http_h(&T, "GET", "/hook/s/", NULL, NULL, h);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"r\",decision=\"allowed\"} 3\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"r\",decision=\"limited\"} 1\n"));
    http_free(&r);
    /* a bad file: refused, logged with its line; the policies stay */
    write_file(path, "{\"policies\": {\n  \"r\": {\"algorithm\": \"sliding_log\",\n  \"max_count\": 0, \"period\": 600}}}");
    kill(T.pid, SIGHUP);
    wait_log(&T, "keeping the policies loaded before");
    assert_true(log_has(&T, "line 3"));
    r = http_h(&T, "GET", "/hook/r/", NULL, NULL, h);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 1);
    http_free(&r);
    r = http_h(&T, "GET", "/hook/s/", NULL, NULL, h);
    assert_status(&r, 429);
    http_free(&r);
    /* a removed file: same */
    unlink(path);
    kill(T.pid, SIGHUP);
    for (int i = 0; i < 500 && !log_has(&T, "No such file"); i++)
        usleep(10000);
    assert_true(log_has(&T, "No such file"));
    r = http_h(&T, "GET", "/hook/r/", NULL, NULL, h);
    assert_status(&r, 200);
    http_free(&r);
    /* POST /admin/reload does what SIGHUP does, and answers how it went */
    r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "No such file"));
    assert_non_null(strstr(r.body, "the policies loaded before stay"));
    http_free(&r);
    write_file(path, "{\"policies\": {\"r\": {\"algorithm\": \"sliding_log\", \"max_count\": 9, \"period\": 600}}}");
    r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "policies"), 1);
    http_free(&r);
    assert_true(log_has(&T, "POST /admin/reload: reloaded"));
    assert_true(log_has(&T, ": 1 rate-limit policy\n"));
    r = http_h(&T, "GET", "/hook/r/", NULL, NULL, h);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 9 - 6);   /* 5 used before, this one */
    http_free(&r);
    r = http_h(&T, "GET", "/hook/s/", NULL, NULL, h);   /* gone with the reload */
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    tally_cleanup(&T);
    T = saved;
}

/* Replay needs no policies: the journal holds resolved requests. */
static void test_replay_without_config(void **state)
{
    (void)state;
    char path[400];
    snprintf(path, sizeof(path), "%s/replay.json", cfgdir);
    write_file(path, "{\"policies\": {\n"
                     "  \"log\": {\"algorithm\": \"sliding_log\", \"max_count\": 5, \"period\": 600, \"key\": \"{header:X-Api-Key}\"},\n"
                     "  \"tb\": {\"algorithm\": \"token_bucket\", \"capacity\": 5, \"refill_rate\": 0.001}}}");
    tally_proc_t p;
    const char *args[] = { "--config", path, "--trusted-proxies", "127.0.0.1,::1", NULL };
    tally_start(&p, NULL, args);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    tally_proc_t saved = T;
    T = p;
    const char *h[] = { "X-Api-Key: zed", "X-Forwarded-For: 192.0.2.99", NULL };
    for (int i = 0; i < 3; i++) {
        http_resp_t r = http_h(&T, "GET", "/hook/log/a", NULL, NULL, h);
        assert_status(&r, 200);
        http_free(&r);
    }
    http_resp_t r = http_h(&T, "POST", "/throttle",
                           "{\"requests\":[{\"policy\":\"tb\",\"quantity\":2},{\"policy\":\"log\",\"key\":\"zed\"}]}", NULL, h);
    assert_true(json_bool_of(&r, "allowed"));
    http_free(&r);
    r = http(&T, "POST", "/throttle", "{\"policy\":\"tb\",\"key\":\"192.0.2.99\"}", NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 2);
    http_free(&r);
    tally_kill(&T);
    char log[300];
    snprintf(log, sizeof(log), "%s.log", dir);
    unlink(log);
    tally_start(&T, dir, NULL);   /* no --config at all */
    r = http(&T, "POST", "/throttle",
             "{\"key\":\"log:zed\",\"algorithm\":\"sliding_log\",\"max_count\":5,\"period\":600,\"quantity\":0}", NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 1);
    http_free(&r);
    r = http(&T, "POST", "/throttle",
             "{\"key\":\"tb:192.0.2.99\",\"algorithm\":\"token_bucket\",\"capacity\":5,\"refill_rate\":0.001,"
             "\"quantity\":0}",
             NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 2);
    http_free(&r);
    /* and the hook without policies is an error, not a denial */
    r = http_h(&T, "GET", "/hook/log/a", NULL, NULL, h);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* and there is nothing to reload */
    r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "without --config"));
    http_free(&r);
    tally_stop(&T);
    tmpdir_remove(dir);
    unlink(log);
    T = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_at_start),
        cmocka_unit_test(test_policy_requests),
        cmocka_unit_test(test_hook_nginx),
        cmocka_unit_test(test_hook_envoy),
        cmocka_unit_test(test_hook_traefik),
        cmocka_unit_test(test_path_spellings),
        cmocka_unit_test(test_hook_errors),
        cmocka_unit_test(test_shadow_and_metrics),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_replay_without_config),
    };
    return cmocka_run_group_tests_name("policies and gateway hook (integration)", tests, setup, teardown);
}
