/*
 * it_calendar.c - calendar fixed windows on a real tallyd: POST /throttle,
 * GET /throttle/{key} (the RateLimit headers), a policy of --config and the
 * gateway hook and THROTTLE.FIXED_WINDOW on the Redis port count to the real local boundary of their time zone, which
 * Python's zoneinfo computes here independently; bad values are refused in
 * each form (400 with the field, the policy file at start with its line)
 * and change nothing; the journal replays the windows after kill -9, and a
 * replica replaying the stream sets the same window ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/integration/harness.h"
#include "tests/integration/resp_client.h"

static tally_proc_t T;
static char cfgdir[256];
static char cfg[300];

static const char POLICIES[] =
    "{\n"
    "  \"policies\": {\n"
    "    \"weekly\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"calendar\": \"week\",\n"
    "               \"week_start\": \"sunday\", \"time_zone\": \"Australia/Lord_Howe\",\n"
    "               \"key\": \"{header:X-Api-Key}\"},\n"
    "    \"billing\": {\"algorithm\": \"fixed_window\", \"max_count\": 1000, \"calendar\": \"month\",\n"
    "                \"anchor_day\": 31, \"time_zone\": \"America/New_York\", \"key\": \"{header:X-Api-Key}\"}\n"
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
    const char *args[] = { "--config", cfg, "--resp-port", "0", NULL };
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

/* The end of the period holding `now` (Unix seconds), by Python's zoneinfo:
 * the next local midnight that starts a period of `kind` ("day", "week"
 * starting on weekday ws 1..7, "month" on anchor day `anchor`). */
static long long zoneinfo_end(const char *zone, const char *kind, int ws, int anchor, long long now)
{
    char cmd[1400];
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 -c '\n"
             "import calendar, datetime as dt, zoneinfo\n"
             "z = zoneinfo.ZoneInfo(\"%s\"); kind, ws, anchor = \"%s\", %d, %d\n"
             "d = dt.datetime.fromtimestamp(%lld, z).date()\n"
             "def starts(d):\n"
             "    if kind == \"day\": return True\n"
             "    if kind == \"week\": return d.isoweekday() == ws\n"
             "    return d.day == min(anchor, calendar.monthrange(d.year, d.month)[1])\n"
             "d += dt.timedelta(days=1)\n"
             "while not starts(d): d += dt.timedelta(days=1)\n"
             "print(int(dt.datetime(d.year, d.month, d.day, tzinfo=z).timestamp()))'",
             zone, kind, ws, anchor, now);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    long long end = 0;
    assert_int_equal(fscanf(p, "%lld", &end), 1);
    assert_int_equal(pclose(p), 0);
    return end;
}

/* reset_after (whole seconds, rounded up) of a request made between
 * `before` and `after` counts to `end`. */
static void assert_counts_to(long long reset_after, long long end, long long before, long long after)
{
    if (reset_after < end - after || reset_after > end - before + 1)
        fail_msg("reset_after %lld, the boundary %lld is %lld..%lld s away", reset_after, end, end - after,
                 end - before + 1);
}

/* ------------------------------------------------------------------------ */

static void test_post_and_get(void **state)
{
    (void)state;
    const char *body = "{\"key\":\"ktm\",\"algorithm\":\"fixed_window\",\"max_count\":2,\"calendar\":\"day\","
                       "\"time_zone\":\"Asia/Kathmandu\"}";
    long long before = time(NULL);
    http_resp_t r = http(&T, "POST", "/throttle", body, NULL);
    long long after = time(NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "allowed"));
    long long end = zoneinfo_end("Asia/Kathmandu", "day", 0, 0, before);
    if (end == zoneinfo_end("Asia/Kathmandu", "day", 0, 0, after))
        assert_counts_to(json_int_of(&r, "reset_after"), end, before, after);
    http_free(&r);
    r = http(&T, "POST", "/throttle", body, NULL);
    assert_true(json_bool_of(&r, "allowed"));
    http_free(&r);
    before = time(NULL);
    r = http(&T, "POST", "/throttle", body, NULL);
    after = time(NULL);
    assert_false(json_bool_of(&r, "allowed"));
    assert_int_equal(json_int_of(&r, "remaining"), 0);
    if (end == zoneinfo_end("Asia/Kathmandu", "day", 0, 0, after))
        assert_counts_to(json_int_of(&r, "retry_after"), end, before, after);
    http_free(&r);

    /* GET for gateways: the RateLimit headers count to the billing date */
    const char *q = "/throttle/bill?algorithm=fixed_window&max_count=5&calendar=month&anchor_day=31"
                    "&time_zone=America/New_York";
    before = time(NULL);
    r = http(&T, "GET", q, NULL, NULL);
    after = time(NULL);
    assert_status(&r, 200);
    char v[128];
    assert_true(http_header(&r, "RateLimit-Reset", v, sizeof(v)));
    end = zoneinfo_end("America/New_York", "month", 0, 31, before);
    if (end == zoneinfo_end("America/New_York", "month", 0, 31, after))
        assert_counts_to(atoll(v), end, before, after);
    assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
    assert_string_equal(v, "\"default\";q=5;w=2678400");   /* w: the longest month */
    http_free(&r);
}

static void test_policy_and_hook(void **state)
{
    (void)state;
    const char *h[] = { "X-Api-Key: ann", NULL };
    long long before = time(NULL);
    http_resp_t r = http_h(&T, "GET", "/hook/weekly/v1/x", NULL, NULL, h);
    long long after = time(NULL);
    assert_status(&r, 200);
    long long end = zoneinfo_end("Australia/Lord_Howe", "week", 7, 0, before);
    char v[64];
    assert_true(http_header(&r, "RateLimit-Reset", v, sizeof(v)));
    if (end == zoneinfo_end("Australia/Lord_Howe", "week", 7, 0, after))
        assert_counts_to(atoll(v), end, before, after);
    http_free(&r);
    r = http(&T, "POST", "/throttle", "{\"policy\":\"weekly\",\"key\":\"ann\"}", NULL);
    assert_true(json_bool_of(&r, "allowed"));
    assert_int_equal(json_int_of(&r, "remaining"), 0);
    http_free(&r);
    r = http_h(&T, "GET", "/hook/weekly/v1/x", NULL, NULL, h);
    assert_status(&r, 429);
    http_free(&r);
    /* the policy's calendar cannot be overridden by the request */
    r = http(&T, "POST", "/throttle", "{\"policy\":\"weekly\",\"key\":\"ann\",\"time_zone\":\"UTC\"}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    before = time(NULL);
    r = http(&T, "POST", "/throttle", "{\"policy\":\"billing\",\"key\":\"ann\",\"quantity\":10}", NULL);
    after = time(NULL);
    end = zoneinfo_end("America/New_York", "month", 0, 31, before);
    if (end == zoneinfo_end("America/New_York", "month", 0, 31, after))
        assert_counts_to(json_int_of(&r, "reset_after"), end, before, after);
    assert_int_equal(json_int_of(&r, "remaining"), 990);
    http_free(&r);
}

/* Bad values: 400 with the field, nothing stored. */
static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *body, *field, *says;
    } cases[] = {
        { "\"calendar\":\"fortnight\"", "calendar", "day, week, month, quarter or year" },
        { "\"calendar\":\"day\",\"time_zone\":\"Mars/Olympus\"", "time_zone", "not a time zone" },
        { "\"calendar\":\"day\",\"time_zone\":\"../../etc/passwd\"", "time_zone", "not a time zone" },
        { "\"calendar\":\"month\",\"anchor_day\":0", "anchor_day", "between 1 and 31" },
        { "\"calendar\":\"month\",\"anchor_day\":32", "anchor_day", "between 1 and 31" },
        { "\"calendar\":\"day\",\"period\":86400", "period", "cannot be given with 'calendar'" },
        { "\"calendar\":\"day\",\"anchor_day\":3", "anchor_day", "month, quarter and year" },
        { "\"calendar\":\"month\",\"week_start\":\"monday\"", "week_start", "week calendar only" },
        { "\"calendar\":\"week\",\"week_start\":\"mon\"", "week_start", "monday .. sunday" },
        { "\"period\":60,\"time_zone\":\"UTC\"", "time_zone", "needs 'calendar'" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[300];
        snprintf(body, sizeof(body), "{\"key\":\"bad\",\"algorithm\":\"fixed_window\",\"max_count\":1,%s}",
                 cases[i].body);
        http_resp_t r = http(&T, "POST", "/throttle", body, NULL);
        assert_error(&r, 400, "BAD_REQUEST");
        json_t *e = json_object_get(r.json, "error");
        const char *field = json_string_value(json_object_get(e, "field"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        if (!field || strcmp(field, cases[i].field) || !msg || !strstr(msg, cases[i].says))
            fail_msg("case %zu: %s", i, r.body);
        http_free(&r);
    }
    http_resp_t r = http(&T, "POST", "/throttle",
                         "{\"key\":\"bad\",\"algorithm\":\"sliding_window\",\"max_count\":1,\"period\":60,"
                         "\"calendar\":\"day\"}",
                         NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/throttle/bad?algorithm=fixed_window&max_count=1&calendar=day&time_zone=Nowhere", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/keys/bad", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* the policy file: refused at start with its line and reason */
    char path[400];
    snprintf(path, sizeof(path), "%s/bad.json", cfgdir);
    write_file(path, "{\"policies\": {\n \"m\": {\"algorithm\": \"fixed_window\", \"max_count\": 1,\n"
                     "   \"calendar\": \"month\", \"anchor_day\": 32}}}\n");
    tally_proc_t p;
    const char *args[] = { "--config", path, "--in-memory", NULL };
    assert_true(tally_start_expect_exit(&p, NULL, args) != 0);
    char *log = tally_log(&p);
    if (!strstr(log, "line 3") || !strstr(log, "anchor_day"))
        fail_msg("the log does not say where and why:\n%s", log);
    free(log);
    tally_cleanup(&p);
}

/* THROTTLE.FIXED_WINDOW over RESP: CL.THROTTLE's five integers, reset_after
 * to the local midnight; errors in Redis's form, nothing stored. */
static void test_resp(void **state)
{
    (void)state;
    assert_true(T.resp_port > 0);
    buf_t cmds = { 0 };
    mb(&cmds, "THROTTLE.FIXED_WINDOW", "r1", "1", "CALENDAR", "day", "TIME_ZONE", "Asia/Kolkata", NULL);
    mb(&cmds, "THROTTLE.FIXED_WINDOW", "r1", "1", "CALENDAR", "day", "TIME_ZONE", "Asia/Kolkata", NULL);
    mb(&cmds, "THROTTLE.FIXED_WINDOW", "r2", "1", "CALENDAR", "day", "TIME_ZONE", "Nowhere/Town", NULL);
    mb(&cmds, "THROTTLE.FIXED_WINDOW", "r2", "1", "CALENDAR", "month", "ANCHOR_DAY", "0", NULL);
    mb(&cmds, "THROTTLE.FIXED_WINDOW", "r2", "1", "60", "TIME_ZONE", "UTC", NULL);
    mb(&cmds, "EXISTS", "r2", NULL);
    long long before = time(NULL);
    buf_t out = exchange(T.resp_port, cmds.p, cmds.len);
    long long after = time(NULL);
    long long a[5], b[5];
    int used = 0;
    char *p = out.p;
    assert_int_equal(sscanf(p, "*5\r\n:%lld\r\n:%lld\r\n:%lld\r\n:%lld\r\n:%lld\r\n%n", &a[0], &a[1], &a[2], &a[3], &a[4],
                            &used),
                     5);
    p += used;
    assert_int_equal(sscanf(p, "*5\r\n:%lld\r\n:%lld\r\n:%lld\r\n:%lld\r\n:%lld\r\n%n", &b[0], &b[1], &b[2], &b[3], &b[4],
                            &used),
                     5);
    p += used;
    assert_int_equal(a[0], 0);   /* allowed */
    assert_int_equal(a[1], 1);
    assert_int_equal(a[2], 0);
    assert_int_equal(a[3], -1);
    assert_int_equal(b[0], 1);   /* limited until the local midnight */
    long long end = zoneinfo_end("Asia/Kolkata", "day", 0, 0, before);
    if (end == zoneinfo_end("Asia/Kolkata", "day", 0, 0, after)) {
        assert_counts_to(a[4], end, before, after);
        assert_counts_to(b[3], end, before, after);
    }
    if (!strstr(p, "-ERR time_zone 'Nowhere/Town' is not a time zone") ||
        !strstr(p, "-ERR anchor_day must be an integer between 1 and 31") ||
        !strstr(p, "-ERR syntax error: unknown option 'TIME_ZONE'") || !strstr(p, ":0\r\n"))
        fail_msg("replies: %.*s", (int)out.len, out.p);
    free(cmds.p);
    free(out.p);
}

/* kill -9, restart from the journal: the window and its count are back. */
static void test_replay(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    const char *body = "{\"key\":\"q\",\"algorithm\":\"fixed_window\",\"max_count\":5,\"calendar\":\"quarter\","
                       "\"anchor_day\":15,\"time_zone\":\"Asia/Kolkata\",\"quantity\":3}";
    http_resp_t r = http(&p, "POST", "/throttle", body, NULL);
    assert_true(json_bool_of(&r, "allowed"));
    long long reset = json_int_of(&r, "reset_after");
    http_free(&r);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    tally_kill(&p);
    tally_start(&p, dir, NULL);
    r = http(&p, "POST", "/throttle",
             "{\"key\":\"q\",\"algorithm\":\"fixed_window\",\"max_count\":5,\"calendar\":\"quarter\","
             "\"anchor_day\":15,\"time_zone\":\"Asia/Kolkata\",\"quantity\":0}",
             NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 2);
    long long again = json_int_of(&r, "reset_after");
    assert_true(again <= reset && again >= reset - 30);
    http_free(&r);
    tally_stop(&p);
    tally_cleanup(&p);
}

/* A key's ttl_ms on p (-1: no TTL or no key). */
static long long ttl_of(const tally_proc_t *p, const char *key)
{
    http_resp_t r = httpf(p, "GET", NULL, "/keys/%s", key);
    long long ttl = r.status == 200 ? json_int_of(&r, "ttl_ms") : -1;
    http_free(&r);
    return ttl;
}

static long long repl_records(const tally_proc_t *p, bool link)
{
    json_t *o = http_get_json(p, "/info");
    json_t *r = json_object_get(o, "replication");
    json_t *v = json_object_get(link ? json_object_get(r, "link") : r, "records");
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(o);
    return x;
}

/* A replica replays the calendar decisions to the same window ends: each
 * key expires at the same instant on both (its window's end, zoneinfo's). */
static void test_replica(void **state)
{
    (void)state;
    tally_proc_t p, r;
    tally_start(&p, NULL, NULL);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", p.port);
    const char *args[] = { "--replica-of", url, NULL };
    tally_start(&r, NULL, args);
    static const struct {
        const char *key, *body, *zone, *kind;
        int ws, anchor;
    } cases[] = {
        { "rd", "\"calendar\":\"day\",\"time_zone\":\"Europe/Paris\"", "Europe/Paris", "day", 0, 0 },
        { "rm", "\"calendar\":\"month\",\"anchor_day\":31,\"time_zone\":\"America/New_York\"", "America/New_York",
          "month", 0, 31 },
        { "rw", "\"calendar\":\"week\",\"week_start\":\"sunday\",\"time_zone\":\"Asia/Kathmandu\"", "Asia/Kathmandu",
          "week", 7, 0 },
    };
    long long before = time(NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[300];
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"algorithm\":\"fixed_window\",\"max_count\":9,%s}", cases[i].key,
                 cases[i].body);
        http_resp_t x = http(&p, "POST", "/throttle", body, NULL);
        assert_true(json_bool_of(&x, "allowed"));
        http_free(&x);
    }
    long long after = time(NULL);
    long long head = repl_records(&p, false);
    for (int i = 0; i < 1000 && repl_records(&r, true) != head; i++) {
        struct timespec ts = { 0, 20 * 1000000L };
        nanosleep(&ts, NULL);
    }
    assert_int_equal(repl_records(&r, true), head);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long long now0 = time(NULL);
        long long tp = ttl_of(&p, cases[i].key), tr = ttl_of(&r, cases[i].key);
        assert_true(tp > 0 && tr > 0);
        if (tp - tr > 2000 || tr - tp > 2000)   /* the same absolute instant, read a moment apart */
            fail_msg("%s: ttl %lld ms on the primary, %lld on the replica", cases[i].key, tp, tr);
        long long end = zoneinfo_end(cases[i].zone, cases[i].kind, cases[i].ws, cases[i].anchor, before);
        if (end == zoneinfo_end(cases[i].zone, cases[i].kind, cases[i].ws, cases[i].anchor, after))
            assert_counts_to((tr + 999) / 1000, end, now0 - 1, time(NULL) + 1);
    }
    tally_stop(&r);
    tally_cleanup(&r);
    tally_stop(&p);
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_post_and_get),
        cmocka_unit_test(test_policy_and_hook),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_resp),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_replica),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
