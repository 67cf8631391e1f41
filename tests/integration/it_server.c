/*
 * it_server.c - the service around the handlers: limits (body, URL),
 * routing errors, operational endpoints, the keys API, options from flags
 * and environment, readiness while loading, graceful shutdown.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static tally_proc_t T;

static int setup(void **state)
{
    (void)state;
    setenv("TALLY_MAX_BODY", "2kb", 1);   /* environment equivalents of flags */
    const char *args[] = { "--max-url", "1024", NULL };
    tally_start(&T, NULL, args);
    unsetenv("TALLY_MAX_BODY");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tally_cleanup(&T);
    return 0;
}

static void throttle(const tally_proc_t *p, const char *key)
{
    char body[256];
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"max_burst\":5,\"count_per_period\":1,\"period\":3600}", key);
    http_resp_t r = http(p, "POST", "/throttle", body, NULL);
    assert_status(&r, 200);
    http_free(&r);
}

static void test_ops_endpoints(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "GET", "/healthz", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/readyz", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    throttle(&T, "opsk");
    r = http(&T, "GET", "/info", NULL, NULL);
    assert_status(&r, 200);
    json_t *ks = json_object_get(r.json, "keyspace");
    assert_true(json_integer_value(json_object_get(ks, "keys")) >= 1);
    assert_true(json_integer_value(json_object_get(ks, "memory_bytes")) > 0);
    assert_non_null(json_object_get(r.json, "persistence"));
    assert_non_null(json_object_get(r.json, "server"));
    http_free(&r);
    r = http(&T, "GET", "/metrics", NULL, NULL);
    assert_status(&r, 200);
    char ct[128];
    assert_true(http_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_non_null(strstr(ct, "text/plain"));
    assert_non_null(strstr(r.body, "tally_http_requests_total{route=\"/throttle\",method=\"POST\",status=\"200\"}"));
    assert_non_null(strstr(r.body, "tally_http_request_duration_seconds_bucket{route=\"/throttle\",method=\"POST\",le=\"+Inf\"}"));
    assert_non_null(strstr(r.body, "tally_keys "));
    assert_non_null(strstr(r.body, "tally_memory_bytes "));
    assert_non_null(strstr(r.body, "tally_journal_records_total "));
    http_free(&r);
    /* a 404 is counted under "unmatched" */
    r = http(&T, "GET", "/nope", NULL, NULL);
    http_free(&r);
    r = http(&T, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(r.body, "route=\"unmatched\",method=\"\",status=\"404\"}"));
    http_free(&r);
    r = http(&T, "GET", "/info?x=1", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
}

static void test_limits(void **state)
{
    (void)state;
    /* body over --max-body (2kb via TALLY_MAX_BODY) */
    char *big = malloc(4096);
    memset(big, ' ', 4095);
    big[0] = '{';
    big[4094] = '}';
    big[4095] = '\0';
    http_resp_t r = http(&T, "POST", "/throttle", big, NULL);
    assert_error(&r, 413, "PAYLOAD_TOO_LARGE");
    http_free(&r);
    free(big);
    /* URL over --max-url 1024 */
    char url[2100] = "/keys/";
    memset(url + 6, 'u', 2000);
    url[2006] = '\0';
    r = http(&T, "GET", url, NULL, NULL);
    assert_error(&r, 414, "URI_TOO_LONG");
    http_free(&r);
    /* many query parameters (within the URL limit) reach the router: here
     * 200 of them, each refused by name rather than dropped by the server */
    char q[1100] = "/info?";
    for (int i = 0; i < 200; i++)
        strcat(q, i ? "&a" : "a");
    r = http(&T, "GET", q, NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* the server is still fine */
    r = http(&T, "GET", "/healthz", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
}

/* A GET /info whose URL is `url_len` bytes long (an unknown query parameter
 * padded with 'a', which the router refuses by name: the answer comes from
 * tallyd, not from libmicrohttpd) with an X-Pad header of `pad` bytes. */
static http_resp_t long_head(const tally_proc_t *p, size_t url_len, size_t pad)
{
    char *url = malloc(url_len + 1), *hdr = malloc(pad + 8);
    memcpy(url, "/info?x=", 8);
    memset(url + 8, 'a', url_len - 8);
    url[url_len] = '\0';
    memcpy(hdr, "X-Pad: ", 7);
    memset(hdr + 7, 'b', pad);
    hdr[7 + pad] = '\0';
    http_resp_t r = http_h(p, "GET", url, NULL, NULL, (const char *[]){ hdr, NULL });
    free(url);
    free(hdr);
    return r;
}

/* libmicrohttpd's per-connection pool is sized from --max-url (plus room
 * for the headers, service/server.c): at the default limits a URL of
 * exactly --max-url with a few KiB of headers, and a short URL with 20 KiB
 * of headers, still reach tallyd; one byte more of URL is tallyd's 414;
 * headers beyond the pool are libmicrohttpd's 431, and the server goes on. */
static void test_long_heads(void **state)
{
    (void)state;
    tally_proc_t S;
    tally_start(&S, NULL, NULL);
    http_resp_t r = long_head(&S, 16384, 6 * 1024);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = long_head(&S, 16385, 100);
    assert_error(&r, 414, "URI_TOO_LONG");
    http_free(&r);
    r = long_head(&S, 100, 20 * 1024);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = long_head(&S, 100, 64 * 1024);
    assert_status(&r, 431);
    http_free(&r);
    /* long heads again, each followed by a short request (the harness keeps
     * its connection alive: the pool is reset between them) */
    for (int i = 0; i < 3; i++) {
        r = long_head(&S, 16384, 4 * 1024);
        assert_error(&r, 400, "BAD_REQUEST");
        http_free(&r);
        r = http(&S, "GET", "/healthz", NULL, NULL);
        assert_status(&r, 200);
        http_free(&r);
    }
    tally_cleanup(&S);
}

static void test_keys_api(void **state)
{
    (void)state;
    char key[64];
    /* few shards: several keys share buckets, so pages end in every position */
    tally_proc_t S;
    tally_start(&S, NULL, (const char *[]){ "--shards", "16", NULL });
    for (int i = 0; i < 250; i++) {
        snprintf(key, sizeof(key), "page:%03d", i);
        throttle(&T, key);
        throttle(&S, key);
    }
    throttle(&T, "other");
    /* page through with small limits: every key exactly once (limit 1 puts
     * page ends on shard boundaries often) */
    static const int limits[] = { 1, 2, 3, 4, 5, 7, 11, 50 };
    for (size_t li = 0; li < 2 * sizeof(limits) / sizeof(limits[0]); li++) {
        const tally_proc_t *P = li % 2 ? &S : &T;
        int seen[250] = { 0 };
        char cursor[64] = "";
        int pages = 0;
        for (;;) {
            http_resp_t r = httpf(P, "GET", NULL, "/keys?prefix=page%%3A&limit=%d%s%s", limits[li / 2],
                                  cursor[0] ? "&cursor=" : "", cursor);
            assert_status(&r, 200);
            json_t *keys = json_object_get(r.json, "keys");
            /* a page is cut only between hash buckets, so it may exceed the
             * limit only when one bucket alone holds more keys */
            assert_true(json_array_size(keys) <= (size_t)limits[li / 2] + 8);
            for (size_t i = 0; i < json_array_size(keys); i++) {
                json_t *k = json_array_get(keys, i);
                const char *name = json_string_value(json_object_get(k, "key"));
                assert_true(strncmp(name, "page:", 5) == 0);
                assert_string_equal(json_string_value(json_object_get(k, "type")), "throttle");
                assert_true(json_integer_value(json_object_get(k, "ttl_ms")) > 0);
                seen[atoi(name + 5)]++;
            }
            json_t *c = json_object_get(r.json, "cursor");
            pages++;
            if (json_is_null(c)) {
                http_free(&r);
                break;
            }
            snprintf(cursor, sizeof(cursor), "%s", json_string_value(c));
            http_free(&r);
            assert_true(pages < 5000);
        }
        for (int i = 0; i < 250; i++)
            if (seen[i] != 1)
                fail_msg("limit %d: page:%03d listed %d times", limits[li / 2], i, seen[i]);
    }
    tally_cleanup(&S);
    http_resp_t r = http(&T, "GET", "/keys?cursor=garbage", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/keys?limit=0", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);

    /* TTLs */
    r = http(&T, "PUT", "/keys/other/ttl", "{\"ttl_ms\":500000}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/keys/other", NULL, NULL);
    long long ttl = json_int_of(&r, "ttl_ms");
    assert_true(ttl > 490000 && ttl <= 500000);
    assert_true(json_int_of(&r, "memory_bytes") > 0);
    http_free(&r);
    r = http(&T, "DELETE", "/keys/other/ttl", NULL, NULL);
    assert_true(json_bool_of(&r, "persisted"));
    http_free(&r);
    r = http(&T, "GET", "/keys/other", NULL, NULL);
    assert_int_equal(json_int_of(&r, "ttl_ms"), -1);
    http_free(&r);
    r = http(&T, "DELETE", "/keys/other/ttl", NULL, NULL);
    assert_false(json_bool_of(&r, "persisted"));
    http_free(&r);
    r = http(&T, "PUT", "/keys/other/ttl", "{\"ttl_ms\":0}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "PUT", "/keys/missing/ttl", "{\"ttl_ms\":10}", NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = http(&T, "DELETE", "/keys/missing/ttl", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* a short TTL really expires the key */
    r = http(&T, "PUT", "/keys/other/ttl", "{\"ttl_ms\":50}", NULL);
    http_free(&r);
    usleep(120 * 1000);
    r = http(&T, "GET", "/keys/other", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* delete */
    r = http(&T, "DELETE", "/keys/page%3A001", NULL, NULL);
    assert_true(json_bool_of(&r, "deleted"));
    http_free(&r);
    r = http(&T, "DELETE", "/keys/page%3A001", NULL, NULL);
    assert_false(json_bool_of(&r, "deleted"));
    http_free(&r);
    r = http(&T, "GET", "/keys/", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
}

/* Graceful shutdown: SIGTERM while clients hammer the server.  Every request
 * gets a complete answer or a refused connection, never a cut one; the
 * process exits 0 after a final snapshot. */
static _Atomic int stop_clients;
static _Atomic int cut_responses, ok_responses;
static tally_proc_t G;

static void *client(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_clients)) {
        http_resp_t r = http(&G, "POST", "/throttle",
                             "{\"key\":\"shut\",\"max_burst\":1000000,\"count_per_period\":1,\"period\":1}", NULL);
        if (r.status == 200 && r.json)
            atomic_fetch_add(&ok_responses, 1);
        else if (r.status > 0 && r.status != 503)
            atomic_fetch_add(&cut_responses, 1);   /* answered, but not a whole, valid answer */
        http_free(&r);
    }
    return NULL;
}

static void test_graceful_shutdown(void **state)
{
    (void)state;
    tally_start(&G, NULL, NULL);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, client, NULL);
    usleep(300 * 1000);
    int st = tally_stop(&G);   /* keeps G.port: clients keep trying, connections must be refused, not cut */
    usleep(100 * 1000);
    atomic_store(&stop_clients, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(st, 0);
    assert_true(atomic_load(&ok_responses) > 10);
    assert_int_equal(atomic_load(&cut_responses), 0);
    char *log = tally_log(&G);
    assert_non_null(strstr(log, "shutting down"));
    assert_non_null(strstr(log, "snapshot:"));
    free(log);
    tally_cleanup(&G);
}

/* /readyz answers 503 while a long journal replays; other routes too. */
static void test_ready_while_loading(void **state)
{
    (void)state;
    tally_proc_t L;
    tally_start(&L, NULL, (const char *[]){ "--snapshot-interval", "0", NULL });
    char body[160];
    for (int i = 0; i < 50000; i++) {
        snprintf(body, sizeof(body), "{\"key\":\"load%d\",\"max_burst\":9,\"count_per_period\":1,\"period\":9999}",
                 i % 5000);
        http_resp_t r = http(&L, "POST", "/throttle", body, NULL);
        http_free(&r);
    }
    tally_kill(&L);   /* no final snapshot: everything is in the journal */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", L.dir);
    tally_proc_t M;
    tally_start_nowait(&M, dir, (const char *[]){ "--snapshot-interval", "0", NULL });
    int not_ready = 0, refused_work = 0;
    int refused_keys[64];
    char body2[160];
    for (int i = 0; i < 20000; i++) {
        http_resp_t r = http(&M, "GET", "/readyz", NULL, NULL);
        long st = r.status;
        http_free(&r);
        if (st == 200)
            break;
        if (st == 503) {
            not_ready++;
            snprintf(body2, sizeof(body2), "{\"key\":\"x%d\",\"max_burst\":1,\"count_per_period\":1,\"period\":99}", i);
            r = http(&M, "POST", "/throttle", body2, NULL);
            if (r.status == 503 && refused_work < 64)
                refused_keys[refused_work++] = i;
            http_free(&r);
            r = http(&M, "GET", "/healthz", NULL, NULL);
            assert_status(&r, 200);   /* alive while loading */
            http_free(&r);
        }
    }
    assert_true(not_ready > 0);
    assert_true(refused_work > 0);
    http_resp_t r = http(&M, "GET", "/keys/load4999", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    for (int i = 0; i < refused_work; i++) {   /* refused while loading: nothing stored */
        r = httpf(&M, "GET", NULL, "/keys/x%d", refused_keys[i]);
        assert_error(&r, 404, "NOT_FOUND");
        http_free(&r);
    }
    char *log = tally_log(&M);
    assert_non_null(strstr(log, "50000 records"));
    free(log);
    tally_cleanup(&M);
    L.pid = 0;
    tally_cleanup(&L);
}

/* HEAD on every GET route: the GET answer's status and headers
 * (Content-Length included), no body. */
static void test_head_on_get_routes(void **state)
{
    (void)state;
    throttle(&T, "headk");
    const char *paths[] = { "/", "/healthz", "/readyz", "/info", "/metrics", "/keys/headk", "/throttle/headk?max_burst=5&count_per_period=1&period=3600",
                            "/keys/missing", "/uv/missing" };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        http_resp_t g = http(&T, "GET", paths[i], NULL, NULL);
        http_resp_t h = http(&T, "HEAD", paths[i], NULL, NULL);
        if (h.status != g.status)
            fail_msg("HEAD %s: %ld, GET: %ld", paths[i], h.status, g.status);
        assert_int_equal(h.len, 0);
        char glen[32], hlen[32], ct[128];
        assert_true(http_header(&h, "Content-Length", hlen, sizeof(hlen)));
        assert_true(http_header(&g, "Content-Length", glen, sizeof(glen)));
        /* /metrics and /info change between the two requests; the rest must match */
        if (i != 3 && i != 4 && i != 6 && strcmp(glen, hlen) != 0)
            fail_msg("HEAD %s: Content-Length %s, GET: %s", paths[i], hlen, glen);
        assert_true(http_header(&h, "Content-Type", ct, sizeof(ct)));
        http_free(&g);
        http_free(&h);
    }
    /* HEAD does not make a GET-less route exist, and 405 lists HEAD with GET */
    http_resp_t r = http(&T, "HEAD", "/admin/snapshot", NULL, NULL);
    assert_int_equal(r.status, 405);
    http_free(&r);
    r = http(&T, "POST", "/healthz", "{}", NULL);
    assert_error(&r, 405, "METHOD_NOT_ALLOWED");
    char allow[64];
    assert_true(http_header(&r, "Allow", allow, sizeof(allow)));
    assert_string_equal(allow, "GET, HEAD");
    http_free(&r);
}

/* GET / lists every route tallyd serves; a 404 names the routes under the
 * path's first segment. */
static void test_index_and_not_found(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "GET", "/", NULL, NULL);
    assert_status(&r, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "service")), "tallyd");
    assert_non_null(json_string_value(json_object_get(r.json, "version")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(r.json, "links"), "health")), "/healthz");
    json_t *routes = json_object_get(r.json, "routes");
    assert_true(json_array_size(routes) > 80);
    bool has_throttle = false;
    for (size_t i = 0; i < json_array_size(routes); i++)
        has_throttle |= !strcmp(json_string_value(json_array_get(routes, i)), "POST /throttle");
    assert_true(has_throttle);
    http_free(&r);
    r = http(&T, "GET", "/uv/a/b/c", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    assert_string_equal(msg, "no route matches /uv/a/b/c; routes under /uv: /uv/{key}, /uv/{key}/merge "
                             "(GET / lists every route)");
    http_free(&r);
    r = http(&T, "GET", "/nothing/here", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    assert_string_equal(msg, "no route matches /nothing/here; GET / lists every route");
    http_free(&r);
}

/* --pid-file: written once listening, holds the pid, removed on exit. */
static void test_pid_file(void **state)
{
    (void)state;
    char dir[256], pidf[300];
    tmpdir_make(dir, sizeof(dir));
    snprintf(pidf, sizeof(pidf), "%s/tallyd.pid", dir);
    const char *args[] = { "--in-memory", "--pid-file", pidf, NULL };
    tally_proc_t P;
    tally_start(&P, NULL, args);
    FILE *f = fopen(pidf, "r");
    assert_non_null(f);
    long pid = 0;
    assert_int_equal(fscanf(f, "%ld", &pid), 1);
    fclose(f);
    assert_int_equal(pid, (long)P.pid);
    assert_int_equal(tally_stop(&P), 0);
    assert_int_not_equal(access(pidf, F_OK), 0);
    tally_cleanup(&P);
    /* an unwritable pid file stops tallyd at start */
    const char *bad[] = { "--in-memory", "--pid-file", "/nonexistent-dir/tallyd.pid", NULL };
    assert_int_not_equal(tally_start_expect_exit(&P, NULL, bad), 0);
    char *log = tally_log(&P);
    assert_non_null(strstr(log, "--pid-file /nonexistent-dir/tallyd.pid"));
    free(log);
    tally_cleanup(&P);
    tmpdir_remove(dir);
}

static void test_help_and_bad_flags(void **state)
{
    (void)state;
    const char *bin = getenv("TALLYD") ? getenv("TALLYD") : "build/release/tallyd";
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s --help", bin);
    FILE *f = popen(cmd, "r");
    static char buf[65536];   /* all of it: a reader that stops early gives tallyd SIGPIPE */
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    assert_true(n < sizeof(buf) - 1);
    assert_int_equal(pclose(f), 0);
    const char *flags[] = { "--port", "TALLY_PORT", "--bind", "TALLY_BIND", "--threads", "TALLY_THREADS",
                            "--data-dir", "TALLY_DATA_DIR", "--snapshot-interval", "--journal", "--fsync",
                            "--max-body", "--maxmemory", "--check", "--pid-file", "TALLY_PID_FILE" };
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if (!strstr(buf, flags[i]))
            fail_msg("--help does not mention %s", flags[i]);
    snprintf(cmd, sizeof(cmd), "%s --fsync sometimes 2>/dev/null", bin);
    assert_int_not_equal(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s --port 99999 2>/dev/null", bin);
    assert_int_not_equal(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s --no-such-flag 2>/dev/null", bin);
    assert_int_not_equal(system(cmd), 0);
    /* --check takes exactly one file: a second one is refused, not ignored */
    snprintf(cmd, sizeof(cmd), "%s --check a b 2>&1", bin);
    f = popen(cmd, "r");
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    assert_int_equal(WEXITSTATUS(pclose(f)), 2);
    if (!strstr(buf, "unexpected argument 'b'"))
        fail_msg("tallyd --check a b: %s", buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_endpoints),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_long_heads),
        cmocka_unit_test(test_keys_api),
        cmocka_unit_test(test_graceful_shutdown),
        cmocka_unit_test(test_ready_while_loading),
        cmocka_unit_test(test_head_on_get_routes),
        cmocka_unit_test(test_index_and_not_found),
        cmocka_unit_test(test_pid_file),
        cmocka_unit_test(test_help_and_bad_flags),
    };
    return cmocka_run_group_tests_name("server (integration)", tests, setup, teardown);
}
