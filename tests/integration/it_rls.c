/*
 * it_rls.c - --rls-config on a real tallyd, without --grpc-port (the set
 * is loaded and checked; the gRPC transport's own suite decides through
 * it): start refused on a bad file with its line; POST /admin/reload and
 * SIGHUP refuse a bad file, log it, and keep the set loaded before (its
 * rules stay in /metrics), then take a good one; a directory in
 * envoyproxy/ratelimit's runtime layout.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static char dir[256];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
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

static bool metrics_has(const tally_proc_t *p, const char *s)
{
    http_resp_t r = http(p, "GET", "/metrics", NULL, NULL);
    assert_status(&r, 200);
    bool has = strstr(r.body, s) != NULL;
    http_free(&r);
    return has;
}

static const char GOOD[] = "domain: mongo_cps\n"
                           "descriptors:\n"
                           "  - key: database\n"
                           "    value: users\n"
                           "    rate_limit:\n"
                           "      unit: second\n"
                           "      requests_per_unit: 500\n";

static const char BAD[] = "domain: mongo_cps\n"
                          "descriptors:\n"
                          "  - key: database\n"
                          "    rate_limit:\n"
                          "      unit: fortnight\n"
                          "      requests_per_unit: 5\n";

static void test_start_refused(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof(path), "%s/bad.yaml", dir);
    write_file(path, BAD);
    tally_proc_t p;
    const char *args[] = { "--rls-config", path, "--in-memory", NULL };
    assert_true(tally_start_expect_exit(&p, NULL, args) != 0);
    assert_true(log_has(&p, "bad.yaml:5: unit: invalid rate limit unit 'fortnight'; refusing to start"));
    tally_cleanup(&p);
    const char *missing[] = { "--rls-config", "/nonexistent/rls.yaml", "--in-memory", NULL };
    assert_true(tally_start_expect_exit(&p, NULL, missing) != 0);
    assert_true(log_has(&p, "/nonexistent/rls.yaml"));
    tally_cleanup(&p);
}

static void test_reload_keeps_old_set(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof(path), "%s/rls.yaml", dir);
    write_file(path, GOOD);
    tally_proc_t T;
    const char *args[] = { "--rls-config", path, "--in-memory", NULL };
    tally_start(&T, NULL, args);
    assert_true(log_has(&T, "start: --rls-config"));
    assert_true(log_has(&T, "1 domain, 1 rate limit rule"));
    assert_true(metrics_has(&T, "tally_rls_hits_total{domain=\"mongo_cps\",rule=\"mongo_cps.database_users\","
                                "result=\"total_hits\"} 0\n"));

    /* a bad file: refused with its line and field, the set loaded before stays */
    write_file(path, BAD);
    http_resp_t r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "rls.yaml:5: unit: invalid rate limit unit 'fortnight'"));
    assert_non_null(strstr(r.body, "the rate limit configuration loaded before stays"));
    http_free(&r);
    assert_true(log_has(&T, "POST /admin/reload: "));
    assert_true(log_has(&T, "keeping the rate limit configuration loaded before"));
    kill(T.pid, SIGHUP);
    char said[600];
    snprintf(said, sizeof(said), "SIGHUP: %s:5: unit: invalid rate limit unit 'fortnight'; keeping the rate limit "
                                 "configuration loaded before", path);
    wait_log(&T, said);
    assert_true(metrics_has(&T, "rule=\"mongo_cps.database_users\""));
    /* the bad YAML itself (a tab where YAML allows none) */
    write_file(path, "domain: x\ndescriptors:\n\t- key: a\n");
    r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "rls.yaml:3: yaml: error loading config file"));
    http_free(&r);

    /* a good file: taken; its rules' series appear, the old ones keep counting */
    write_file(path, "domain: messaging\n"
                     "descriptors:\n"
                     "  - key: to_number\n"
                     "    rate_limit: {unit: day, requests_per_unit: 100}\n"
                     "  - key: ldap\n"
                     "    rate_limit: {unlimited: true}\n");
    r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    assert_true(log_has(&T, "POST /admin/reload: --rls-config"));
    assert_true(log_has(&T, "1 domain, 2 rate limit rules"));
    assert_true(metrics_has(&T, "rule=\"messaging.to_number\",result=\"over_limit\"} 0\n"));

    /* a directory in envoyproxy/ratelimit's runtime layout */
    tally_kill(&T);
    tally_cleanup(&T);
    char sub[300], f1[400], f2[400];
    snprintf(sub, sizeof(sub), "%s/config", dir);
    mkdir(sub, 0755);
    snprintf(f1, sizeof(f1), "%s/a.yaml", sub);
    snprintf(f2, sizeof(f2), "%s/b.yml", sub);
    write_file(f1, GOOD);
    write_file(f2, "domain: internal\ndescriptors:\n  - key: azure\n    rate_limit: {unit: minute, requests_per_unit: 100}\n");
    const char *dargs[] = { "--rls-config", sub, "--in-memory", "--rls-charge-all", "--rls-response-headers", NULL };
    tally_start(&T, NULL, dargs);
    assert_true(log_has(&T, "2 domains, 2 rate limit rules"));
    /* the same domain twice: the reload is refused */
    write_file(f2, GOOD);
    kill(T.pid, SIGHUP);
    wait_log(&T, "duplicate domain 'mongo_cps' in config file");
    assert_true(metrics_has(&T, "rule=\"internal.azure\""));
    tally_kill(&T);
    tally_cleanup(&T);
    unlink(f1);
    unlink(f2);
    rmdir(sub);
}

/* With --config too: both files reload; both refusals are answered, joined. */
static void test_reload_with_policies(void **state)
{
    (void)state;
    char rls[300], pol[300];
    snprintf(rls, sizeof(rls), "%s/both.yaml", dir);
    snprintf(pol, sizeof(pol), "%s/both.json", dir);
    write_file(rls, GOOD);
    write_file(pol, "{\"policies\": {\"r\": {\"algorithm\": \"sliding_log\", \"max_count\": 2, \"period\": 600}}}");
    tally_proc_t T;
    const char *args[] = { "--rls-config", rls, "--config", pol, "--in-memory", NULL };
    tally_start(&T, NULL, args);
    http_resp_t r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "policies"), 1);
    http_free(&r);
    write_file(rls, BAD);
    write_file(pol, "{\"policies\": [}");
    r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "the policies loaded before stay; "));
    assert_non_null(strstr(r.body, "both.yaml:5: unit: invalid rate limit unit 'fortnight'; the rate limit "
                                   "configuration loaded before stays"));
    http_free(&r);
    /* the policies fixed, the rate limit file still bad: only its refusal */
    write_file(pol, "{\"policies\": {}}");
    r = http(&T, "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_null(strstr(r.body, "\"message\":\"; "));
    assert_null(strstr(r.body, "policies loaded before"));
    assert_non_null(strstr(r.body, "both.yaml:5: unit"));
    http_free(&r);
    tally_kill(&T);
    tally_cleanup(&T);
}

static int setup(void **state)
{
    (void)state;
    tmpdir_make(dir, sizeof(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tmpdir_remove(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_refused),
        cmocka_unit_test(test_reload_keeps_old_set),
        cmocka_unit_test(test_reload_with_policies),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
