/*
 * it_ratelimit.c - every algorithm through /throttle on a real tallyd:
 * the common answer, peeks and oversized requests, one key one algorithm,
 * atomic multi-limit batches, counters, persistence through the journal and
 * the snapshot, and the bad-input list (each its envelope, none changes
 * state).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

static const char *const ALGOS[] = {
    "\"algorithm\":\"gcra\",\"max_burst\":2,\"count_per_period\":1,\"period\":60",
    "\"algorithm\":\"sliding_log\",\"max_count\":3,\"period\":60",
    "\"algorithm\":\"sliding_window\",\"max_count\":3,\"period\":3600",
    "\"algorithm\":\"fixed_window\",\"max_count\":3,\"period\":3600",
    "\"algorithm\":\"token_bucket\",\"capacity\":3,\"refill_rate\":0.001",
};
#define NALGOS (sizeof(ALGOS) / sizeof(ALGOS[0]))

static http_resp_t post_algo(const char *key, size_t a, int quantity)
{
    char body[512];
    snprintf(body, sizeof(body), "{\"key\":\"%s\",%s,\"quantity\":%d}", key, ALGOS[a], quantity);
    return http(&T, "POST", "/throttle", body, NULL);
}

static long long peek_remaining(const char *key, size_t a)
{
    http_resp_t r = post_algo(key, a, 0);
    assert_status(&r, 200);
    long long v = json_int_of(&r, "remaining");
    http_free(&r);
    return v;
}

static int count_keys(const char *prefix)
{
    http_resp_t r = httpf(&T, "GET", NULL, "/keys?prefix=%s&limit=1000", prefix);
    assert_status(&r, 200);
    int n = (int)json_array_size(json_object_get(r.json, "keys"));
    http_free(&r);
    return n;
}

/* Limit 3 with every algorithm: three allowed (remaining 2, 1, 0), the
 * fourth limited with a retry time, a peek allowed without recording, a
 * request larger than the limit never fits; every key expires. */
static void test_every_algorithm(void **state)
{
    (void)state;
    static const long long max_retry[] = { 60, 60, 7200, 3600, 1000 };
    for (size_t a = 0; a < NALGOS; a++) {
        char key[32];
        snprintf(key, sizeof(key), "algo%zu", a);
        for (int i = 0; i < 3; i++) {
            http_resp_t r = post_algo(key, a, 1);
            assert_status(&r, 200);
            if (!json_bool_of(&r, "allowed"))
                fail_msg("%s: request %d refused: %s", ALGOS[a], i, r.body);
            assert_int_equal(json_int_of(&r, "limit"), 3);
            assert_int_equal(json_int_of(&r, "remaining"), 2 - i);
            assert_int_equal(json_int_of(&r, "retry_after"), -1);
            assert_int_equal(json_int_of(&r, "retry_after_ms"), -1);
            assert_true(json_int_of(&r, "reset_after") >= 1);
            assert_true(json_int_of(&r, "reset_after_ms") >= 1);
            char v[64];
            assert_true(http_header(&r, "RateLimit-Remaining", v, sizeof(v)));
            assert_int_equal(atoi(v), 2 - i);
            http_free(&r);
        }
        http_resp_t r = post_algo(key, a, 1);
        assert_false(json_bool_of(&r, "allowed"));
        long long retry = json_int_of(&r, "retry_after");
        if (retry < 1 || retry > max_retry[a])
            fail_msg("%s: retry_after %lld", ALGOS[a], retry);
        assert_true(json_int_of(&r, "retry_after_ms") > 0);
        char v[64];
        assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
        assert_int_equal(atoll(v), retry);
        http_free(&r);
        /* peek: allowed (a full limiter still fits nothing more), nothing recorded */
        r = post_algo(key, a, 0);
        assert_true(json_bool_of(&r, "allowed"));
        assert_int_equal(json_int_of(&r, "remaining"), 0);
        http_free(&r);
        /* larger than the limit: never */
        r = post_algo(key, a, 4);
        assert_false(json_bool_of(&r, "allowed"));
        assert_int_equal(json_int_of(&r, "retry_after"), -1);
        assert_false(http_header(&r, "Retry-After", v, sizeof(v)));
        http_free(&r);
        /* the key holds a throttle and expires */
        r = httpf(&T, "GET", NULL, "/keys/%s", key);
        assert_status(&r, 200);
        assert_string_equal(json_string_value(json_object_get(r.json, "type")), "throttle");
        assert_true(json_int_of(&r, "ttl_ms") > 0);
        http_free(&r);
        /* a peek on a fresh key stores nothing */
        snprintf(key, sizeof(key), "fresh%zu", a);
        assert_int_equal(peek_remaining(key, a), 3);
        r = httpf(&T, "GET", NULL, "/keys/%s", key);
        assert_error(&r, 404, "NOT_FOUND");
        http_free(&r);
    }
}

/* The gateway form takes the same parameters as a query string. */
static void test_gateway_get_algorithms(void **state)
{
    (void)state;
    const char *q = "/throttle/gwlog?algorithm=sliding_log&max_count=2&period=60";
    for (int i = 0; i < 2; i++) {
        http_resp_t r = http(&T, "GET", q, NULL, NULL);
        assert_status(&r, 200);
        char v[64];
        assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
        assert_string_equal(v, "\"default\";q=2;w=60");
        http_free(&r);
    }
    http_resp_t r = http(&T, "GET", q, NULL, NULL);
    assert_status(&r, 429);
    http_free(&r);
    r = httpf(&T, "GET", NULL, "%s&deny_status=403", q);
    assert_status(&r, 403);
    http_free(&r);
    r = http(&T, "GET", "/throttle/gwtb?algorithm=token_bucket&capacity=1&refill_rate=0.5&shadow=true", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/throttle/gwtb?algorithm=token_bucket&capacity=1&refill_rate=0.5&shadow=true", NULL, NULL);
    assert_status(&r, 200);   /* shadow: limited but allowed */
    assert_true(json_bool_of(&r, "shadow_limited"));
    http_free(&r);
}

/* A key keeps its algorithm: another one is a conflict until reset. */
static void test_algorithm_conflict(void **state)
{
    (void)state;
    http_resp_t r = post_algo("conflict", 0, 1);
    assert_status(&r, 200);
    http_free(&r);
    r = post_algo("conflict", 1, 1);
    assert_error(&r, 409, "WRONGTYPE");
    const char *m = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    assert_non_null(strstr(m, "gcra"));
    assert_non_null(strstr(m, "sliding_log"));
    http_free(&r);
    r = http(&T, "DELETE", "/throttle/conflict", NULL, NULL);
    assert_true(json_bool_of(&r, "deleted"));
    http_free(&r);
    r = post_algo("conflict", 1, 1);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 2);
    http_free(&r);
    /* a counter is not a throttle, and the other way round */
    r = http(&T, "POST", "/counter/conflict", "{}", NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
    r = http(&T, "POST", "/counter/cnt-conflict", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = post_algo("cnt-conflict", 2, 1);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
}

/* Per-user, per-IP and global limits at once: allowed only if all allow, and
 * a refusal consumes nothing anywhere. */
static void test_batch_atomic(void **state)
{
    (void)state;
    const char *batch = "{\"requests\":["
                        "{\"key\":\"b:user:alice\",\"algorithm\":\"sliding_log\",\"max_count\":2,\"period\":60},"
                        "{\"key\":\"b:ip:1.2.3.4\",\"algorithm\":\"fixed_window\",\"max_count\":5,\"period\":3600},"
                        "{\"key\":\"b:global\",\"algorithm\":\"token_bucket\",\"capacity\":100,\"refill_rate\":0.001}]}";
    for (int i = 0; i < 2; i++) {
        http_resp_t r = http(&T, "POST", "/throttle", batch, NULL);
        assert_status(&r, 200);
        assert_true(json_bool_of(&r, "allowed"));
        json_t *res = json_object_get(r.json, "results");
        assert_int_equal(json_array_size(res), 3);
        assert_string_equal(json_string_value(json_object_get(json_array_get(res, 0), "key")), "b:user:alice");
        assert_int_equal(json_integer_value(json_object_get(json_array_get(res, 0), "remaining")), 1 - i);
        assert_int_equal(json_int_of(&r, "remaining"), 1 - i);   /* the tightest limit speaks */
        http_free(&r);
    }
    http_resp_t r = http(&T, "POST", "/throttle", batch, NULL);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "allowed"));
    json_t *res = json_object_get(r.json, "results");
    assert_false(json_is_true(json_object_get(json_array_get(res, 0), "allowed")));
    assert_true(json_is_true(json_object_get(json_array_get(res, 1), "allowed")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(res, 1), "remaining")), 3);   /* not consumed */
    assert_true(json_int_of(&r, "retry_after") >= 1);
    char v[32];
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    http_free(&r);
    /* nothing was consumed by the refused batch */
    r = http(&T, "POST", "/throttle",
             "{\"key\":\"b:ip:1.2.3.4\",\"algorithm\":\"fixed_window\",\"max_count\":5,\"period\":3600,\"quantity\":0}",
             NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 3);
    http_free(&r);
    r = http(&T, "POST", "/throttle",
             "{\"key\":\"b:global\",\"algorithm\":\"token_bucket\",\"capacity\":100,\"refill_rate\":0.001,\"quantity\":0}",
             NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 98);
    http_free(&r);

    /* the same key twice: the second sees the first */
    const char *dup = "{\"requests\":["
                      "{\"key\":\"b:dup\",\"algorithm\":\"sliding_log\",\"max_count\":3,\"period\":60,\"quantity\":2},"
                      "{\"key\":\"b:dup\",\"algorithm\":\"sliding_log\",\"max_count\":3,\"period\":60,\"quantity\":2}]}";
    r = http(&T, "POST", "/throttle", dup, NULL);
    assert_false(json_bool_of(&r, "allowed"));
    http_free(&r);
    r = http(&T, "GET", "/keys/b:dup", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    const char *dup_ok = "{\"requests\":["
                         "{\"key\":\"b:dup\",\"algorithm\":\"sliding_log\",\"max_count\":3,\"period\":60,\"quantity\":1},"
                         "{\"key\":\"b:dup\",\"algorithm\":\"sliding_log\",\"max_count\":3,\"period\":60,\"quantity\":2}]}";
    r = http(&T, "POST", "/throttle", dup_ok, NULL);
    assert_true(json_bool_of(&r, "allowed"));
    res = json_object_get(r.json, "results");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(res, 1), "remaining")), 0);
    http_free(&r);
    /* two algorithms on one key inside a batch: a conflict, nothing recorded */
    r = http(&T, "POST", "/throttle",
             "{\"requests\":[{\"key\":\"b:two\",\"algorithm\":\"sliding_log\",\"max_count\":3,\"period\":60},"
             "{\"key\":\"b:two\",\"algorithm\":\"fixed_window\",\"max_count\":3,\"period\":60}]}",
             NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
    r = http(&T, "GET", "/keys/b:two", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* a shadow item never blocks the others */
    r = http(&T, "POST", "/throttle",
             "{\"requests\":[{\"key\":\"b:user:alice\",\"algorithm\":\"sliding_log\",\"max_count\":2,\"period\":60,"
             "\"shadow\":true},{\"key\":\"b:shadowed-other\",\"algorithm\":\"sliding_log\",\"max_count\":2,\"period\":60}]}",
             NULL);
    assert_true(json_bool_of(&r, "allowed"));
    res = json_object_get(r.json, "results");
    assert_true(json_is_true(json_object_get(json_array_get(res, 0), "shadow_limited")));
    http_free(&r);
    r = http(&T, "GET", "/keys/b:shadowed-other", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
}

/* The bad-input list: each its envelope, naming the field; none
 * changes state. */
static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        const char *field;
        const char *says;     /* substring of the message, or NULL */
    } cases[] = {
        { "{\"key\":\"bad1\",\"algorithm\":\"leaky\",\"max_count\":1,\"period\":1}", "algorithm", "unknown algorithm" },
        { "{\"key\":\"bad1\",\"algorithm\":5}", "algorithm", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"sliding_log\",\"period\":60}", "max_count", "missing" },
        { "{\"key\":\"bad1\",\"algorithm\":\"sliding_log\",\"max_count\":-1,\"period\":60}", "max_count", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"sliding_log\",\"max_count\":100001,\"period\":60}", "max_count",
          "sliding_window" },
        { "{\"key\":\"bad1\",\"algorithm\":\"sliding_window\",\"max_count\":5,\"period\":-60}", "period", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"fixed_window\",\"max_count\":5,\"period\":0}", "period", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"fixed_window\",\"max_count\":5}", "period", "missing" },
        { "{\"key\":\"bad1\",\"algorithm\":\"token_bucket\",\"capacity\":0,\"refill_rate\":1}", "capacity", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"token_bucket\",\"capacity\":1,\"refill_rate\":-1}", "refill_rate", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"token_bucket\",\"capacity\":1,\"refill_rate\":0}", "refill_rate", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"token_bucket\",\"capacity\":1}", "refill_rate", "missing" },
        { "{\"key\":\"bad1\",\"algorithm\":\"token_bucket\",\"capacity\":1,\"refill_rate\":\"1\"}", "refill_rate", NULL },
        { "{\"key\":\"bad1\",\"algorithm\":\"gcra\",\"max_count\":1,\"period\":1}", "max_count", "does not apply" },
        { "{\"key\":\"bad1\",\"algorithm\":\"sliding_window\",\"max_burst\":1,\"max_count\":1,\"period\":1}", "max_burst",
          NULL },
        { "{\"key\":\"bad1\",\"policy\":\"nope\"}", "policy", "unknown policy" },
        { "{\"key\":\"bad1\",\"policy\":7}", "policy", NULL },
        { "{\"key\":\"bad1\",\"max_burst\":1,\"count_per_period\":1,\"period\":1,\"shadow\":\"yes\"}", "shadow", NULL },
        { "{\"key\":\"bad1\",\"max_burst\":1,\"count_per_period\":1,\"period\":1,\"quantity\":1.5}", "quantity", NULL },
        { "{\"key\":\"bad1\",\"max_burst\":1,\"count_per_period\":1,\"period\":1,\"quantity\":-2}", "quantity", NULL },
        { "{\"requests\":[]}", "requests", NULL },
        { "{\"requests\":{}}", "requests", NULL },
        { "{\"requests\":[1]}", "requests[0]", NULL },
        { "{\"key\":\"bad1\",\"requests\":[{\"key\":\"bad2\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}]}",
          "requests", NULL },
        { "{\"requests\":[{\"key\":\"bad2\",\"max_burst\":1,\"count_per_period\":1,\"period\":1},"
          "{\"key\":\"bad3\",\"algorithm\":\"nope\"}]}",
          "requests[1].algorithm", "nothing was counted" },
        { "{\"requests\":[{\"key\":\"bad2\",\"max_burst\":1,\"count_per_period\":1,\"period\":1},"
          "{\"key\":\"bad3\",\"max_burst\":1,\"count_per_period\":1,\"period\":1,\"extra\":1}]}",
          "requests[1].extra", NULL },
        { "{\"requests\":[{\"key\":\"bad2\",\"max_burst\":1,\"count_per_period\":1,\"period\":1},"
          "{\"policy\":\"nope\",\"key\":\"x\"}]}",
          "requests[1].policy", NULL },
        { "{\"requests\":[{\"key\":\"bad2\",\"max_burst\":1,\"count_per_period\":1,\"period\":1},"
          "{\"max_burst\":1,\"count_per_period\":1,\"period\":1}]}",
          "requests[1].key", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_resp_t r = http(&T, "POST", "/throttle", cases[i].body, NULL);
        if (r.status != 400)
            fail_msg("case %zu (%s): expected 400, got %ld %s", i, cases[i].body, r.status, r.body);
        assert_error(&r, 400, "BAD_REQUEST");
        json_t *e = json_object_get(r.json, "error");
        const char *f = json_string_value(json_object_get(e, "field"));
        if (!f || strcmp(f, cases[i].field) != 0)
            fail_msg("case %zu: expected field %s in %s", i, cases[i].field, r.body);
        if (cases[i].says && !strstr(json_string_value(json_object_get(e, "message")), cases[i].says))
            fail_msg("case %zu: expected '%s' in %s", i, cases[i].says, r.body);
        http_free(&r);
    }
    static const char *const gets[] = {
        "/throttle/bad1?algorithm=sliding_log&max_count=0&period=60",
        "/throttle/bad1?algorithm=sliding_log&max_count=1&period=60&deny_status=404",
        "/throttle/bad1?algorithm=sliding_log&max_count=1&period=60&deny_status=500",
        "/throttle/bad1?algorithm=sliding_log&max_count=1&max_count=2&period=60",
        "/throttle/bad1?algorithm=sliding_log&max_count=1&period=60&capacity=3",
        "/throttle/bad1?policy=nope",
        "/throttle/bad1?algorithm=token_bucket&capacity=1&refill_rate=fast",
    };
    for (size_t i = 0; i < sizeof(gets) / sizeof(gets[0]); i++) {
        http_resp_t r = http(&T, "GET", gets[i], NULL, NULL);
        if (r.status != 400)
            fail_msg("GET %s: expected 400, got %ld %s", gets[i], r.status, r.body);
        assert_error(&r, 400, "BAD_REQUEST");
        http_free(&r);
    }
    http_resp_t r = http(&T, "DELETE", "/throttle/bad1?policy=nope", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* more than 10 000 requests in one batch */
    size_t cap = 10001 * 80 + 64;
    char *big = malloc(cap);
    size_t n = (size_t)snprintf(big, cap, "{\"requests\":[");
    for (int i = 0; i < 10001; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s{\"key\":\"bad4\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}",
                              i ? "," : "");
    snprintf(big + n, cap - n, "]}");
    r = http(&T, "POST", "/throttle", big, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    free(big);
    /* none of them stored anything */
    assert_int_equal(count_keys("bad"), 0);
}

static void test_counters(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/counter/c:apikey:12", NULL, NULL);   /* no body = by 1 */
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "value"), 1);
    assert_int_equal(json_int_of(&r, "ttl_ms"), -1);
    http_free(&r);
    r = http(&T, "POST", "/counter/c:apikey:12", "{\"by\":5,\"ttl\":60}", NULL);
    assert_int_equal(json_int_of(&r, "value"), 6);
    long long ttl = json_int_of(&r, "ttl_ms");
    assert_true(ttl > 59000 && ttl <= 60000);
    http_free(&r);
    /* without a TTL the expiry is kept (INCRBY) */
    r = http(&T, "POST", "/counter/c:apikey:12", "{\"by\":-10}", NULL);
    assert_int_equal(json_int_of(&r, "value"), -4);
    assert_true(json_int_of(&r, "ttl_ms") > 58000);
    http_free(&r);
    /* a TTL given again resets it (EXPIRE after INCR) */
    r = http(&T, "POST", "/counter/c:apikey:12", "{\"by\":0,\"ttl_ms\":500000}", NULL);
    assert_int_equal(json_int_of(&r, "value"), -4);
    assert_true(json_int_of(&r, "ttl_ms") > 499000);
    http_free(&r);
    r = http(&T, "GET", "/counter/c:apikey:12", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), -4);
    http_free(&r);
    /* a missing counter reads 0, ttl_ms -2; by 0 creates nothing */
    r = http(&T, "GET", "/counter/c:missing", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 0);
    assert_int_equal(json_int_of(&r, "ttl_ms"), -2);
    http_free(&r);
    r = http(&T, "POST", "/counter/c:missing", "{\"by\":0}", NULL);
    assert_int_equal(json_int_of(&r, "value"), 0);
    http_free(&r);
    r = http(&T, "GET", "/keys/c:missing", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* overflow is refused and changes nothing */
    r = http(&T, "POST", "/counter/c:big", "{\"by\":9223372036854775807}", NULL);
    assert_int_equal(json_int_of(&r, "value"), INT64_MAX);
    http_free(&r);
    r = http(&T, "POST", "/counter/c:big", "{\"by\":1}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/counter/c:big", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), INT64_MAX);
    http_free(&r);
    static const char *const bad[] = { "{\"by\":1.5}", "{\"ttl\":0}", "{\"ttl\":-5}", "{\"ttl\":1,\"ttl_ms\":1000}",
                                       "{\"by\":\"1\"}", "{\"incr\":1}", "[1]", "nope" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = http(&T, "POST", "/counter/c:bad", bad[i], NULL);
        if (r.status != 400)
            fail_msg("counter body %s: expected 400, got %ld", bad[i], r.status);
        http_free(&r);
    }
    r = http(&T, "GET", "/keys/c:bad", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* the seeds' pattern: a counter per API key per minute that expires */
    r = http(&T, "POST", "/counter/c:zA21X31:17", "{\"ttl\":59}", NULL);
    assert_int_equal(json_int_of(&r, "value"), 1);
    assert_true(json_int_of(&r, "ttl_ms") <= 59000);
    http_free(&r);
}

/* Journal replay (SIGKILL) and then the snapshot (SIGTERM) restore every
 * algorithm's state exactly: the same remaining on a peek. */
static void test_persistence(void **state)
{
    (void)state;
    tally_proc_t P;
    tally_start(&P, NULL, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", P.dir);
    tally_proc_t saved = T;
    T = P;
    long long before[NALGOS];
    for (size_t a = 0; a < NALGOS; a++) {
        char key[32];
        snprintf(key, sizeof(key), "p%zu", a);
        http_resp_t r = post_algo(key, a, 2);
        assert_true(json_bool_of(&r, "allowed"));
        http_free(&r);
        before[a] = peek_remaining(key, a);
        assert_int_equal(before[a], 1);
    }
    http_resp_t r = http(&T, "POST", "/counter/p:counter", "{\"by\":41,\"ttl\":3600}", NULL);
    http_free(&r);
    for (int round = 0; round < 2; round++) {
        if (round == 0)
            tally_kill(&T);   /* journal only */
        else
            assert_int_equal(tally_stop(&T), 0);   /* snapshot */
        char log[300];
        snprintf(log, sizeof(log), "%s.log", dir);
        unlink(log);   /* the harness reads the port from the log */
        tally_start(&T, dir, NULL);
        for (size_t a = 0; a < NALGOS; a++) {
            char key[32];
            snprintf(key, sizeof(key), "p%zu", a);
            long long now = peek_remaining(key, a);
            if (now != before[a])
                fail_msg("round %d: %s remaining %lld, was %lld", round, ALGOS[a], now, before[a]);
        }
        r = http(&T, "GET", "/counter/p:counter", NULL, NULL);
        assert_int_equal(json_int_of(&r, "value"), 41);
        assert_true(json_int_of(&r, "ttl_ms") > 3000000);
        http_free(&r);
    }
    tally_stop(&T);
    tmpdir_remove(dir);
    char log[300];
    snprintf(log, sizeof(log), "%s.log", dir);
    unlink(log);
    T = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_algorithm),
        cmocka_unit_test(test_gateway_get_algorithms),
        cmocka_unit_test(test_algorithm_conflict),
        cmocka_unit_test(test_batch_atomic),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_persistence),
    };
    return cmocka_run_group_tests_name("rate limiting (integration)", tests, setup, teardown);
}
