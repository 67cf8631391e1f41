/*
 * it_overrides.c - live per-tenant overrides of a policy's limits
 * (api/override.c, cmd/override.h) and "which limit said no" on a real
 * tallyd: set, read, listed, deleted with the admin scope and refused
 * without it; the next decision takes them, replacing the policy's and the
 * file's limits; they survive kill -9 and a restart (journal, then
 * snapshot) and a reload of the policies file; every refusal names its
 * policy and limit in the body, as RFC 9457 problem details, in the
 * access log and in /metrics.  (Replication: it_replication.c,
 * test_overrides_replicated.)
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static char dir[256], cfg[300], tokens[300], alog[300];

/* "ops-secret" (admin) and "gw-secret" (ratelimit), hashed by tallyd --hash-token */
static const char TOKENS[] =
    "{\"tokens\":["
    "{\"name\":\"ops\",\"sha256\":\"32323cfa9ec9d62750daad0836a4cf3d7b60d23723b7852a529667deed01669f\","
    "\"scopes\":[\"read\",\"write\",\"admin\"]},"
    "{\"name\":\"gw\",\"sha256\":\"b53b5edf5d9f8c56815de368f9857e6f3fbf912eb140850af60e82cd4ca364fa\","
    "\"scopes\":[\"ratelimit\"]}]}";

static const char POLICIES[] =
    "{\"policies\": {\n"
    "  \"api\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"period\": 3600, \"key\": \"{header:X-Api-Key}\",\n"
    "          \"overrides\": {\"gold\": {\"max_count\": 5, \"period\": 3600}}},\n"
    "  \"login\": {\"algorithm\": \"gcra\", \"max_burst\": 0, \"count_per_period\": 1, \"period\": 3600}\n"
    "}}\n";

static const char *const ADMIN[] = { "Authorization: Bearer ops-secret", NULL };

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
    tmpdir_make(dir, sizeof(dir));
    snprintf(cfg, sizeof(cfg), "%s/policies.json", dir);
    snprintf(tokens, sizeof(tokens), "%s/tokens.json", dir);
    snprintf(alog, sizeof(alog), "%s/access.log", dir);
    write_file(cfg, POLICIES);
    write_file(tokens, TOKENS);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tmpdir_remove(dir);
    return 0;
}

static void start(tally_proc_t *p, const char *data, bool with_tokens)
{
    const char *args[] = { "--config", cfg, "--access-log", alog, with_tokens ? "--tokens" : NULL, tokens, NULL };
    tally_start(p, data, args);
}

/* One decision of policy `policy` for tenant `tenant` through the hook. */
static http_resp_t hook(const tally_proc_t *p, const char *policy, const char *tenant, const char *accept,
                        bool admin)
{
    char k[300], a[300], path[200];
    snprintf(k, sizeof(k), "X-Api-Key: %s", tenant);
    snprintf(a, sizeof(a), "Accept: %s", accept ? accept : "*/*");
    snprintf(path, sizeof(path), "/hook/%s/x", policy);
    const char *h[] = { k, a, admin ? ADMIN[0] : NULL, NULL };
    return http_h(p, "GET", path, NULL, NULL, h);
}

static long long limit_of(const tally_proc_t *p, const char *tenant, bool admin)
{
    http_resp_t r = hook(p, "api", tenant, NULL, admin);
    if (r.status != 200 && r.status != 429)
        fail_msg("hook answered %ld: %s", r.status, r.body);
    long long l = json_int_of(&r, "limit");
    http_free(&r);
    return l;
}

static http_resp_t put(const tally_proc_t *p, const char *path, const char *body, bool admin)
{
    return http_h(p, "PUT", path, body, NULL, admin ? ADMIN : NULL);
}

/* Set, read, list, delete: the admin scope only; the next decision takes them. */
static void test_crud_and_scope(void **state)
{
    (void)state;
    tally_proc_t p;
    start(&p, NULL, true);
    const char *gw[] = { "Authorization: Bearer gw-secret", NULL };
    /* no token: 401; a ratelimit token: 403 (every route of the family) */
    http_resp_t r = put(&p, "/policies/api/overrides/acme", "{\"max_count\":10,\"period\":3600}", false);
    assert_error(&r, 401, "UNAUTHORIZED");
    http_free(&r);
    static const char *const routes[][2] = { { "PUT", "/policies/api/overrides/acme" },
                                             { "GET", "/policies/api/overrides/acme" },
                                             { "GET", "/policies/api/overrides" },
                                             { "DELETE", "/policies/api/overrides/acme" } };
    for (size_t i = 0; i < 4; i++) {
        r = http_h(&p, routes[i][0], routes[i][1], i == 0 ? "{\"max_count\":10,\"period\":3600}" : NULL, NULL, gw);
        assert_error(&r, 403, "FORBIDDEN");
        http_free(&r);
    }
    /* the default before: 2 */
    assert_int_equal(limit_of(&p, "acme", true), 2);
    /* set: 201, the stored form (sorted, algorithm filled in) */
    r = put(&p, "/policies/api/overrides/acme", "{\"period\":3600,\"max_count\":10}", true);
    assert_status(&r, 201);
    assert_string_equal(r.body, "{\"policy\":\"api\",\"tenant\":\"acme\",\"limits\":{\"algorithm\":\"fixed_window\","
                                "\"max_count\":10,\"period\":3600},\"created\":true}");
    http_free(&r);
    /* the next decision: the override's limit, named as such */
    assert_int_equal(limit_of(&p, "acme", true), 10);
    /* replaced, not added: 200 */
    r = put(&p, "/policies/api/overrides/acme", "{\"max_count\":3,\"period\":3600}", true);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "created"));
    http_free(&r);
    assert_int_equal(limit_of(&p, "acme", true), 3);
    /* the API's override wins over the file's */
    assert_int_equal(limit_of(&p, "gold", true), 5);
    r = put(&p, "/policies/api/overrides/gold", "{\"algorithm\":\"fixed_window\",\"max_count\":7,\"period\":3600}", true);
    assert_status(&r, 201);
    http_free(&r);
    assert_int_equal(limit_of(&p, "gold", true), 7);
    /* read one; an absent one is 404 */
    r = http_h(&p, "GET", "/policies/api/overrides/acme", NULL, NULL, ADMIN);
    assert_status(&r, 200);
    assert_string_equal(r.body, "{\"policy\":\"api\",\"tenant\":\"acme\",\"limits\":{\"algorithm\":\"fixed_window\","
                                "\"max_count\":3,\"period\":3600},\"applies\":true}");
    http_free(&r);
    r = http_h(&p, "GET", "/policies/api/overrides/nobody", NULL, NULL, ADMIN);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* the list, a page at a time */
    r = http_h(&p, "GET", "/policies/api/overrides?limit=1", NULL, NULL, ADMIN);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "total"), 2);
    assert_int_equal(json_int_of(&r, "file_overrides"), 1);
    assert_string_equal(json_string_value(json_object_get(r.json, "next")), "acme");
    http_free(&r);
    r = http_h(&p, "GET", "/policies/api/overrides?limit=1&after=acme", NULL, NULL, ADMIN);
    assert_status(&r, 200);
    assert_true(json_is_null(json_object_get(r.json, "next")));
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(r.json, "overrides"), 0), "tenant")), "gold");
    http_free(&r);
    r = http_h(&p, "GET", "/policies/api/overrides?limit=0", NULL, NULL, ADMIN);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* refused, changing nothing: an unknown policy, another algorithm, an
     * unknown member, bad parameters, a tenant too long */
    r = put(&p, "/policies/nope/overrides/acme", "{\"max_count\":10,\"period\":3600}", true);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = put(&p, "/policies/api/overrides/acme", "{\"algorithm\":\"gcra\",\"max_burst\":1,\"count_per_period\":1,"
                                                "\"period\":60}", true);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "\"field\":\"algorithm\""));
    http_free(&r);
    r = put(&p, "/policies/api/overrides/acme", "{\"max_count\":10,\"period\":3600,\"colour\":1}", true);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = put(&p, "/policies/api/overrides/acme", "{\"max_count\":0,\"period\":3600}", true);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    char longpath[600];
    snprintf(longpath, sizeof(longpath), "/policies/api/overrides/%0300d", 7);
    r = put(&p, longpath, "{\"max_count\":10,\"period\":3600}", true);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    assert_int_equal(limit_of(&p, "acme", true), 3);
    /* delete: the file's override again for gold, the default for acme */
    http_resp_t d = http_h(&p, "DELETE", "/policies/api/overrides/gold", NULL, NULL, ADMIN);
    assert_status(&d, 200);
    assert_string_equal(d.body, "{\"deleted\":true}");
    http_free(&d);
    d = http_h(&p, "DELETE", "/policies/api/overrides/gold", NULL, NULL, ADMIN);
    assert_string_equal(d.body, "{\"deleted\":false}");
    http_free(&d);
    assert_int_equal(limit_of(&p, "gold", true), 5);
    d = http_h(&p, "DELETE", "/policies/api/overrides/acme", NULL, NULL, ADMIN);
    http_free(&d);
    assert_int_equal(limit_of(&p, "acme", true), 2);
    /* the last one gone, the key goes */
    r = http_h(&p, "GET", "/keys/_tally:overrides:api", NULL, NULL, ADMIN);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    tally_cleanup(&p);
}

/* kill -9 and restart (journal replay, then a snapshot), and a reload. */
static void test_durable_and_reload(void **state)
{
    (void)state;
    char data[300];
    snprintf(data, sizeof(data), "%s/data", dir);
    tally_proc_t p;
    start(&p, data, false);
    http_resp_t r = put(&p, "/policies/api/overrides/acme", "{\"max_count\":10,\"period\":3600}", false);
    assert_status(&r, 201);
    http_free(&r);
    r = put(&p, "/policies/login/overrides/acme", "{\"max_burst\":3,\"count_per_period\":1,\"period\":3600}", false);
    assert_status(&r, 201);
    http_free(&r);
    tally_kill(&p);
    start(&p, data, false);
    assert_int_equal(limit_of(&p, "acme", false), 10);
    http_expect(&p, "GET", "/policies/login/overrides/acme", NULL, 200, NULL);
    /* through a snapshot */
    http_expect(&p, "POST", "/admin/snapshot", NULL, 200, NULL);
    tally_kill(&p);
    start(&p, data, false);
    assert_int_equal(limit_of(&p, "acme", false), 10);
    /* a reload keeps them; one whose policy changed algorithm stays but no longer applies */
    write_file(cfg, "{\"policies\": {\n"
                    "  \"api\": {\"algorithm\": \"fixed_window\", \"max_count\": 4, \"period\": 3600, \"key\": \"{header:X-Api-Key}\"},\n"
                    "  \"login\": {\"algorithm\": \"fixed_window\", \"max_count\": 1, \"period\": 3600}\n"
                    "}}\n");
    kill(p.pid, SIGHUP);
    for (int i = 0; i < 500; i++) {
        char *log = tally_log(&p);
        bool done = strstr(log, "reloaded") != NULL;
        free(log);
        if (done)
            break;
        usleep(10000);
    }
    assert_int_equal(limit_of(&p, "acme", false), 10);
    assert_int_equal(limit_of(&p, "other", false), 4);
    r = http(&p, "GET", "/policies/login/overrides/acme", NULL, NULL);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "applies"));
    http_free(&r);
    write_file(cfg, POLICIES);
    tally_cleanup(&p);
    tmpdir_remove(data);
}

/* Every refusal names its policy and limit: body, problem details, access log, metrics. */
static void test_violated(void **state)
{
    (void)state;
    tally_proc_t p;
    start(&p, NULL, false);
    http_resp_t r = put(&p, "/policies/api/overrides/acme", "{\"max_count\":1,\"period\":3600}", false);
    http_free(&r);
    for (int i = 0; i < 2; i++) {
        r = hook(&p, "api", "acme", NULL, false);
        assert_status(&r, i ? 429 : 200);
        if (i) {
            assert_non_null(strstr(r.body, ",\"violated\":[{\"policy\":\"api\",\"limit\":\"override\"}]}"));
            assert_non_null(strstr(r.body, "{\"allowed\":false,\"limit\":1,"));   /* the fields as before */
            char ct[100];
            assert_true(http_header(&r, "Content-Type", ct, sizeof(ct)));
            assert_string_equal(ct, "application/json");
        } else {
            assert_null(strstr(r.body, "violated"));
        }
        http_free(&r);
    }
    /* problem details when asked for */
    r = hook(&p, "api", "acme", "application/problem+json, application/json;q=0.5", false);
    assert_status(&r, 429);
    char ct[100];
    assert_true(http_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_string_equal(ct, "application/problem+json");
    assert_string_equal(json_string_value(json_object_get(r.json, "type")),
                        "https://iana.org/assignments/http-problem-types#quota-exceeded");
    assert_int_equal(json_integer_value(json_object_get(r.json, "status")), 429);
    json_t *vp = json_object_get(r.json, "violated-policies");
    assert_int_equal(json_array_size(vp), 1);
    assert_string_equal(json_string_value(json_array_get(vp, 0)), "api");
    assert_false(json_bool_of(&r, "allowed"));
    http_free(&r);
    /* the file's override and the default, by name */
    for (int i = 0; i < 6; i++) {
        r = hook(&p, "api", "gold", NULL, false);
        http_free(&r);
    }
    r = hook(&p, "api", "gold", NULL, false);
    assert_non_null(strstr(r.body, "\"violated\":[{\"policy\":\"api\",\"limit\":\"file-override\"}]"));
    http_free(&r);
    for (int i = 0; i < 3; i++) {
        r = hook(&p, "api", "plain", NULL, false);
        http_free(&r);
    }
    /* a batch names each refused item; a request's own parameters are "default"/"request" */
    r = http(&p, "POST", "/throttle", "{\"requests\":[{\"policy\":\"api\",\"key\":\"acme\"},"
                                      "{\"key\":\"own\",\"algorithm\":\"fixed_window\",\"max_count\":1,\"period\":60}]}",
             NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"violated\":[{\"policy\":\"api\",\"limit\":\"override\"}]"));
    http_free(&r);
    r = http(&p, "POST", "/throttle", "{\"key\":\"own\",\"algorithm\":\"fixed_window\",\"max_count\":1,\"period\":60}",
             NULL);
    http_free(&r);
    r = http(&p, "POST", "/throttle", "{\"key\":\"own\",\"algorithm\":\"fixed_window\",\"max_count\":1,\"period\":60}",
             NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"violated\":[{\"policy\":\"default\",\"limit\":\"request\"}]"));
    http_free(&r);
    /* metrics: by policy and limit, tenants never labels */
    r = http(&p, "GET", "/metrics", NULL, NULL);
    assert_non_null(
        strstr(r.body, "tally_ratelimit_limit_decisions_total{policy=\"api\",limit=\"override\",decision=\"allowed\"} 1\n"));
    assert_non_null(
        strstr(r.body, "tally_ratelimit_limit_decisions_total{policy=\"api\",limit=\"override\",decision=\"limited\"} 3\n"));
    assert_non_null(strstr(
        r.body, "tally_ratelimit_limit_decisions_total{policy=\"api\",limit=\"file-override\",decision=\"allowed\"} 5\n"));
    assert_non_null(strstr(
        r.body, "tally_ratelimit_limit_decisions_total{policy=\"api\",limit=\"file-override\",decision=\"limited\"} 2\n"));
    assert_non_null(
        strstr(r.body, "tally_ratelimit_limit_decisions_total{policy=\"api\",limit=\"default\",decision=\"limited\"} 1\n"));
    assert_null(strstr(r.body, "acme"));
    assert_null(strstr(r.body, "gold"));
    http_free(&r);
    /* the access log: the refusals' lines name them */
    tally_stop(&p);
    size_t n;
    char *log = file_read(alog, &n);
    assert_non_null(strstr(log, "\"path\":\"/hook/api/x\",\"violated\":[\"api/override\"],\"status\":429"));
    assert_non_null(strstr(log, "\"path\":\"/hook/api/x\",\"violated\":[\"api/file-override\"],\"status\":429"));
    assert_non_null(strstr(log, "\"path\":\"/throttle\",\"violated\":[\"default/request\"],\"status\":200"));
    assert_non_null(strstr(log, "\"path\":\"/hook/api/x\",\"status\":200"));
    free(log);
    tally_cleanup(&p);
}

/* Decisions from several threads while the main thread sets, replaces
 * and deletes the same tenant's override: every decision runs by one of
 * the limits in play (the default 2, or an override's 10 or 20), never
 * fails, and the last state decides at the end.  (ThreadSanitizer runs
 * this: the parsed limits kept in the value are written by decisions.) */
#define DECIDERS 3

struct decider {
    tally_proc_t p;
    long sent, odd;
    char err[200];
};

static _Atomic int deciders_stop;

static void *decider_main(void *arg)
{
    struct decider *d = arg;
    while (!atomic_load(&deciders_stop)) {
        http_resp_t r = hook(&d->p, "api", "busy", NULL, false);
        if (r.status != 200 && r.status != 429) {
            snprintf(d->err, sizeof(d->err), "hook answered %ld: %.120s", r.status, r.body ? r.body : "");
            http_free(&r);
            break;
        }
        json_t *l = json_object_get(r.json, "limit");
        long long v = json_is_integer(l) ? json_integer_value(l) : -1;
        if (v != 2 && v != 10 && v != 20)
            d->odd++;
        d->sent++;
        http_free(&r);
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    tally_proc_t p;
    start(&p, NULL, false);
    static struct decider ds[DECIDERS];
    pthread_t th[DECIDERS];
    atomic_store(&deciders_stop, 0);
    for (int i = 0; i < DECIDERS; i++) {
        ds[i] = (struct decider){ .p = p };
        assert_int_equal(pthread_create(&th[i], NULL, decider_main, &ds[i]), 0);
    }
    for (int i = 0; i < 60; i++) {
        http_resp_t r = put(&p, "/policies/api/overrides/busy", i % 2 ? "{\"max_count\":20,\"period\":3600}"
                                                                       : "{\"max_count\":10,\"period\":3600}", false);
        http_free(&r);
        if (i % 3 == 2) {
            r = http(&p, "DELETE", "/policies/api/overrides/busy", NULL, NULL);
            http_free(&r);
        }
    }
    http_resp_t r = put(&p, "/policies/api/overrides/busy", "{\"max_count\":20,\"period\":3600}", false);
    http_free(&r);
    atomic_store(&deciders_stop, 1);
    long sent = 0;
    for (int i = 0; i < DECIDERS; i++) {
        pthread_join(th[i], NULL);
        if (ds[i].err[0])
            fail_msg("decider %d: %s", i, ds[i].err);
        assert_int_equal(ds[i].odd, 0);
        sent += ds[i].sent;
    }
    printf("%ld decisions while the override changed 80 times\n", sent);
    assert_true(sent > 0);
    assert_int_equal(limit_of(&p, "busy", false), 20);
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crud_and_scope),
        cmocka_unit_test(test_durable_and_reload),
        cmocka_unit_test(test_violated),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
