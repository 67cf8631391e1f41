/*
 * it_cms.c - /cms through a real tallyd: create by dimensions and by error
 * rates, increments and counts against exact counts, merge with weights,
 * atomic overflow refusal, every kind of bad input leaving state untouched,
 * WRONGTYPE, and state surviving SIGTERM and kill -9.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

static void test_create_incr_count(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/cms/c1", "{\"error\":0.001,\"probability\":0.002}", 201,
                "{\"width\":2000,\"depth\":9,\"count\":0,\"conservative\":false,\"size_bytes\":144032}");
    http_expect(&T, "PUT", "/cms/c1", "{\"width\":10,\"depth\":2}", 409, NULL);
    http_expect(&T, "POST", "/cms/c1", "{\"increments\":[{\"item\":\"a\",\"by\":3},{\"item\":\"b\"},{\"item\":\"a\",\"by\":0}]}",
                200, "{\"counts\":[3,1,3]}");
    http_expect(&T, "POST", "/cms/c1", "{\"items\":[\"a\",\"c\",\"c\"]}", 200, "{\"counts\":[4,1,2]}");
    http_expect(&T, "GET", "/cms/c1/count?item=a&item=b&item=c&item=never", NULL, 200, "{\"counts\":[4,1,2,0]}");
    http_expect(&T, "POST", "/cms/c1/count", "{\"items\":[\"a\",\"b\",\"c\",\"never\"]}", 200, "{\"counts\":[4,1,2,0]}");
    http_expect(&T, "POST", "/cms/c1/count", "{\"increments\":[{\"item\":\"a\"}]}", 400, NULL);
    http_expect(&T, "POST", "/cms/c1/count", "{\"items\":[]}", 400, NULL);
    http_expect(&T, "POST", "/cms/nope/count", "{\"items\":[\"a\"]}", 404, NULL);
    http_expect(&T, "GET", "/cms/c1", NULL, 200,
                "{\"width\":2000,\"depth\":9,\"count\":7,\"conservative\":false,\"size_bytes\":144032}");
    /* an integer item stands for its decimal text */
    http_expect(&T, "POST", "/cms/c1", "{\"items\":[7,\"7\"],\"increments\":null}", 400, NULL);
    http_expect(&T, "POST", "/cms/c1", "{\"items\":[7,\"7\",-1]}", 200, "{\"counts\":[1,2,1]}");
    http_expect(&T, "POST", "/cms/c1", "{\"increments\":[{\"item\":7,\"by\":5}]}", 200, "{\"counts\":[7]}");
    http_expect(&T, "GET", "/cms/c1/count?item=7&item=-1", NULL, 200, "{\"counts\":[7,1]}");
    http_expect(&T, "POST", "/cms/c1", "{\"items\":[7.5]}", 400, NULL);
    /* items are bytes: a percent-encoded query item equals the JSON one */
    http_expect(&T, "POST", "/cms/c1", "{\"items\":[\"a b/é\"]}", 200, "{\"counts\":[1]}");
    http_expect(&T, "GET", "/cms/c1/count?item=a+b%2F%C3%A9", NULL, 200, "{\"counts\":[1]}");
    /* conservative update */
    http_expect(&T, "PUT", "/cms/cons", "{\"width\":5,\"depth\":2,\"conservative\":true}", 201,
                "{\"width\":5,\"depth\":2,\"count\":0,\"conservative\":true,\"size_bytes\":112}");
    http_expect(&T, "GET", "/keys/cons", NULL, 200, NULL);
}

/* Many items with skewed counts: every answer is >= the exact count. */
static void test_never_undercounts(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/cms/skew", "{\"width\":50,\"depth\":4}", 201, NULL);
    enum { ITEMS = 300 };
    long exact[ITEMS] = { 0 };
    char *body = malloc(1 << 20), *path = malloc(1 << 16);
    for (int round = 0; round < 5; round++) {
        size_t n = (size_t)snprintf(body, 32, "{\"increments\":[");
        for (int i = 0; i < ITEMS; i++) {
            int by = (i * 7 + round) % 13 == 0 ? 50 : 1 + (i % 3);
            exact[i] += by;
            n += (size_t)snprintf(body + n, 64, "%s{\"item\":\"u%d\",\"by\":%d}", i ? "," : "", i, by);
        }
        snprintf(body + n, 8, "]}");
        http_resp_t r = http(&T, "POST", "/cms/skew", body, NULL);
        assert_status(&r, 200);
        http_free(&r);
    }
    size_t n = (size_t)snprintf(path, 32, "/cms/skew/count?");
    for (int i = 0; i < ITEMS; i++)
        n += (size_t)snprintf(path + n, 32, "%sitem=u%d", i ? "&" : "", i);
    json_t *j = http_get_json(&T, path);
    json_t *counts = json_object_get(j, "counts");
    assert_int_equal(json_array_size(counts), ITEMS);
    for (int i = 0; i < ITEMS; i++)
        if (json_integer_value(json_array_get(counts, i)) < exact[i])
            fail_msg("u%d: estimate %lld < exact %ld", i, (long long)json_integer_value(json_array_get(counts, i)),
                     exact[i]);
    json_decref(j);
    free(body);
    free(path);
}

/* CMS.MERGE dest 2 test1 test2 WEIGHTS 1 3 (RedisBloom's documented example). */
static void test_merge(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/cms/test1", "{\"width\":100,\"depth\":5}", 201, NULL);
    http_expect(&T, "PUT", "/cms/test2", "{\"width\":100,\"depth\":5}", 201, NULL);
    http_expect(&T, "PUT", "/cms/dest", "{\"width\":100,\"depth\":5}", 201, NULL);
    http_expect(&T, "PUT", "/cms/other", "{\"width\":101,\"depth\":5}", 201, NULL);
    http_expect(&T, "POST", "/cms/test1", "{\"increments\":[{\"item\":\"x\",\"by\":2},{\"item\":\"y\"}]}", 200, NULL);
    http_expect(&T, "POST", "/cms/test2", "{\"increments\":[{\"item\":\"x\",\"by\":5}]}", 200, NULL);
    http_expect(&T, "POST", "/cms/dest", "{\"items\":[\"old\"]}", 200, NULL);
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"test1\",\"test2\"],\"weights\":[1,3]}", 200,
                "{\"width\":100,\"depth\":5,\"count\":18,\"conservative\":false,\"size_bytes\":4032}");
    /* the destination was overwritten: "old" is gone */
    http_expect(&T, "GET", "/cms/dest/count?item=x&item=y&item=old", NULL, 200, "{\"counts\":[17,1,0]}");
    /* default weights 1; the destination may be a source */
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"dest\",\"test1\"]}", 200, NULL);
    http_expect(&T, "GET", "/cms/dest/count?item=x&item=y", NULL, 200, "{\"counts\":[19,2]}");
    /* refusals change nothing */
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"test1\",\"other\"]}", 400, NULL);
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"test1\",\"missing\"]}", 404, NULL);
    http_expect(&T, "POST", "/cms/nodest/merge", "{\"sources\":[\"test1\"]}", 404, NULL);
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"test1\"],\"weights\":[1,2]}", 400, NULL);
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"test1\"],\"weights\":[-1]}", 400, NULL);
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"test1\"],\"weights\":[4611686018427387904]}", 400, NULL);
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[]}", 400, NULL);
    http_expect(&T, "POST", "/cms/dest/merge", "{\"sources\":[\"\"]}", 400, NULL);
    http_expect(&T, "GET", "/cms/dest/count?item=x&item=y", NULL, 200, "{\"counts\":[19,2]}");
    http_expect(&T, "GET", "/cms/nodest", NULL, 404, NULL);
}

/* RedisBloom's test_cms.py test_merge_success: merge three sketches, then
 * take one out again with weight -1 (either order); taking it out twice is
 * "MERGE overflow" (here 400, nothing changed). */
static void test_merge_negative(void **state)
{
    (void)state;
    static const char *const names[] = { "m1", "m2", "m3", "m4", "m5", "m6" };
    for (int i = 0; i < 6; i++) {
        char path[32];
        snprintf(path, sizeof(path), "/cms/%s", names[i]);
        http_expect(&T, "PUT", path, "{\"width\":1000,\"depth\":5}", 201, NULL);
    }
    static const char *const pfx[] = { "foo", "bar", "baz" };
    for (int k = 0; k < 3; k++) {
        char body[4096], path[32];
        size_t o = (size_t)snprintf(body, sizeof(body), "{\"items\":[");
        for (int i = 0; i < 100; i++)
            o += (size_t)snprintf(body + o, sizeof(body) - o, "%s\"%s%d\"", i ? "," : "", pfx[k], i);
        snprintf(body + o, sizeof(body) - o, "]}");
        snprintf(path, sizeof(path), "/cms/%s", names[k]);
        http_expect(&T, "POST", path, body, 200, NULL);
    }
    http_expect(&T, "POST", "/cms/m5/merge", "{\"sources\":[\"m1\",\"m2\",\"m3\"],\"weights\":[1,1,1]}", 200, NULL);
    static const char *const merges[] = { "{\"sources\":[\"m5\",\"m3\"],\"weights\":[1,-1]}",
                                          "{\"sources\":[\"m3\",\"m5\"],\"weights\":[-1,1]}" };
    for (int m = 0; m < 2; m++) {
        http_expect(&T, "POST", "/cms/m6/merge", merges[m], 200,
                    "{\"width\":1000,\"depth\":5,\"count\":200,\"conservative\":false,\"size_bytes\":40032}");
        for (int i = 0; i < 100; i += 7) {
            char path[96];
            snprintf(path, sizeof(path), "/cms/m6/count?item=foo%d&item=bar%d&item=baz%d", i, i, i);
            http_expect(&T, "GET", path, NULL, 200, "{\"counts\":[1,1,0]}");
        }
    }
    http_resp_t r = http(&T, "POST", "/cms/m6/merge", "{\"sources\":[\"m6\",\"m3\"],\"weights\":[1,-1]}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "merge overflow"));
    http_free(&r);
    http_expect(&T, "POST", "/cms/m6/merge", "{\"sources\":[\"m3\",\"m6\"],\"weights\":[-1,1]}", 400, NULL);
    http_expect(&T, "GET", "/cms/m6", NULL, 200,
                "{\"width\":1000,\"depth\":5,\"count\":200,\"conservative\":false,\"size_bytes\":40032}");
    /* test_merge_overflow_large_cell, with 64-bit counters: 1, -2 and -2, -2
     * underflow; 2, 0 is fine here (RedisBloom's 32-bit counters overflow) */
    http_expect(&T, "PUT", "/cms/o1", "{\"width\":2,\"depth\":2}", 201, NULL);
    http_expect(&T, "PUT", "/cms/o2", "{\"width\":2,\"depth\":2}", 201, NULL);
    http_expect(&T, "POST", "/cms/o1", "{\"increments\":[{\"item\":\"foo\",\"by\":4000000000}]}", 200, NULL);
    http_expect(&T, "POST", "/cms/o2", "{\"increments\":[{\"item\":\"foo\",\"by\":4000000000}]}", 200, NULL);
    http_expect(&T, "POST", "/cms/o1/merge", "{\"sources\":[\"o1\",\"o2\"],\"weights\":[1,-2]}", 400, NULL);
    http_expect(&T, "POST", "/cms/o1/merge", "{\"sources\":[\"o1\",\"o2\"],\"weights\":[-2,-2]}", 400, NULL);
    http_expect(&T, "POST", "/cms/o1/merge", "{\"sources\":[\"o1\",\"o2\"],\"weights\":[-2,1]}", 400, NULL);
    http_expect(&T, "GET", "/cms/o1/count?item=foo", NULL, 200, "{\"counts\":[4000000000]}");
    http_expect(&T, "POST", "/cms/o1/merge", "{\"sources\":[\"o1\",\"o2\"],\"weights\":[2,0]}", 200, NULL);
    http_expect(&T, "GET", "/cms/o1/count?item=foo", NULL, 200, "{\"counts\":[8000000000]}");
    http_expect(&T, "POST", "/cms/o1/merge", "{\"sources\":[\"o1\",\"o2\"],\"weights\":[4611686018427387904,1]}",
                400, NULL);
}

/* A batch that would overflow the total is refused whole. */
static void test_overflow_atomic(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/cms/big", "{\"width\":10,\"depth\":3}", 201, NULL);
    http_expect(&T, "POST", "/cms/big", "{\"increments\":[{\"item\":\"a\",\"by\":9223372036854775800}]}", 200,
                "{\"counts\":[9223372036854775800]}");
    http_expect(&T, "POST", "/cms/big", "{\"increments\":[{\"item\":\"b\",\"by\":3},{\"item\":\"c\",\"by\":5}]}", 400, NULL);
    http_expect(&T, "GET", "/cms/big/count?item=b&item=c", NULL, 200, NULL);
    json_t *j = http_get_json(&T, "/cms/big");
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 9223372036854775800LL);
    json_decref(j);
    http_expect(&T, "POST", "/cms/big", "{\"increments\":[{\"item\":\"b\",\"by\":3},{\"item\":\"c\",\"by\":4}]}", 200, NULL);
    http_expect(&T, "POST", "/cms/big", "{\"items\":[\"d\"]}", 400, NULL);
    http_expect(&T, "POST", "/cms/big", "{\"increments\":[{\"item\":\"d\",\"by\":0}]}", 200, NULL);
    /* merging it with itself would overflow */
    http_expect(&T, "POST", "/cms/big/merge", "{\"sources\":[\"big\",\"big\"]}", 400, NULL);
    j = http_get_json(&T, "/cms/big");
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 9223372036854775807LL);
    json_decref(j);
}

static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *method, *path, *body, *field;
        long status;
    } cases[] = {
        { "PUT", "/cms/bad", "{}", "width", 400 },
        { "PUT", "/cms/bad", "{\"width\":10}", "depth", 400 },
        { "PUT", "/cms/bad", "{\"width\":0,\"depth\":5}", "width", 400 },
        { "PUT", "/cms/bad", "{\"width\":10,\"depth\":0}", "depth", 400 },
        { "PUT", "/cms/bad", "{\"width\":-1,\"depth\":5}", "width", 400 },
        { "PUT", "/cms/bad", "{\"width\":\"10\",\"depth\":5}", "width", 400 },
        { "PUT", "/cms/bad", "{\"width\":1.5,\"depth\":5}", "width", 400 },
        { "PUT", "/cms/bad", "{\"width\":100000000,\"depth\":5}", "width", 400 },
        { "PUT", "/cms/bad", "{\"error\":0,\"probability\":0.1}", "error", 400 },
        { "PUT", "/cms/bad", "{\"error\":1,\"probability\":0.1}", "error", 400 },
        { "PUT", "/cms/bad", "{\"error\":0.1,\"probability\":1.5}", "probability", 400 },
        { "PUT", "/cms/bad", "{\"error\":0.1,\"probability\":0}", "probability", 400 },
        { "PUT", "/cms/bad", "{\"error\":-0.1,\"probability\":0.1}", "error", 400 },
        { "PUT", "/cms/bad", "{\"error\":\"x\",\"probability\":0.1}", "error", 400 },
        { "PUT", "/cms/bad", "{\"error\":0.0000001,\"probability\":0.1}", "error", 400 },
        { "PUT", "/cms/bad", "{\"error\":0.1}", "probability", 400 },
        /* RedisBloom's test_cms.py initbyprob refusals: depth 0, width past any limit */
        { "PUT", "/cms/bad", "{\"error\":0.9,\"probability\":0.9999999999999999}", "probability", 400 },
        { "PUT", "/cms/bad", "{\"error\":0.0000000000000000001,\"probability\":0.9}", "error", 400 },
        { "PUT", "/cms/bad", "{\"width\":10,\"depth\":5,\"error\":0.1}", "error", 400 },
        { "PUT", "/cms/bad", "{\"width\":10,\"depth\":5,\"conservative\":1}", "conservative", 400 },
        { "PUT", "/cms/bad", "{\"width\":10,\"depth\":5,\"colour\":1}", "colour", 400 },
        { "PUT", "/cms/bad", "not json", NULL, 400 },
        { "POST", "/cms/bad", "{\"items\":[\"a\"]}", NULL, 404 },
        { "POST", "/cms/keep", "{}", "items", 400 },
        { "POST", "/cms/keep", "{\"items\":[]}", "items", 400 },
        { "POST", "/cms/keep", "{\"items\":\"a\"}", "items", 400 },
        { "POST", "/cms/keep", "{\"items\":[\"a\",1.5]}", "items", 400 },
        { "POST", "/cms/keep", "{\"items\":[true]}", "items", 400 },
        { "POST", "/cms/keep", "{\"items\":[\"a\"],\"increments\":[]}", "items", 400 },
        { "POST", "/cms/keep", "{\"increments\":[{\"item\":\"a\",\"by\":-1}]}", "increments", 400 },
        { "POST", "/cms/keep", "{\"increments\":[{\"item\":\"a\",\"by\":1.5}]}", "increments", 400 },
        { "POST", "/cms/keep", "{\"increments\":[{\"by\":1}]}", "increments", 400 },
        { "POST", "/cms/keep", "{\"increments\":[{\"item\":\"a\",\"size\":1}]}", "increments", 400 },
        { "POST", "/cms/keep", "{\"increments\":[\"a\"]}", "increments", 400 },
        { "GET", "/cms/keep/count", NULL, "item", 400 },
        { "GET", "/cms/keep/count?item=a&x=1", NULL, "x", 400 },
        { "GET", "/cms/keep?item=a", NULL, "item", 400 },
    };
    http_expect(&T, "PUT", "/cms/keep", "{\"width\":10,\"depth\":2}", 201, NULL);
    http_expect(&T, "POST", "/cms/keep", "{\"items\":[\"a\"]}", 200, NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_resp_t r = http(&T, cases[i].method, cases[i].path, cases[i].body, NULL);
        if (r.status != cases[i].status)
            fail_msg("case %zu (%s %s %s): expected %ld, got %ld %s", i, cases[i].method, cases[i].path,
                     cases[i].body ? cases[i].body : "", cases[i].status, r.status, r.body);
        assert_error(&r, cases[i].status, cases[i].status == 404 ? "NOT_FOUND" : "BAD_REQUEST");
        if (cases[i].field) {
            const char *f = json_string_value(json_object_get(json_object_get(r.json, "error"), "field"));
            if (!f || strcmp(f, cases[i].field) != 0)
                fail_msg("case %zu: expected field %s in %s", i, cases[i].field, r.body);
        }
        http_free(&r);
    }
    /* more than 10 000 items */
    size_t cap = 10001 * 8 + 64;
    char *body = malloc(cap), *path = malloc(cap);
    size_t n = (size_t)snprintf(body, cap, "{\"items\":[");
    size_t m = (size_t)snprintf(path, cap, "/cms/keep/count?");
    for (int i = 0; i < 10001; i++) {
        n += (size_t)snprintf(body + n, cap - n, "%s\"a\"", i ? "," : "");
        m += (size_t)snprintf(path + m, cap - m, "%sitem=a", i ? "&" : "");
    }
    snprintf(body + n, cap - n, "]}");
    http_resp_t r = http(&T, "POST", "/cms/keep", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", path, NULL, NULL);
    assert_true(r.status == 400 || r.status == 414);
    http_free(&r);
    free(body);
    free(path);
    /* nothing changed */
    http_expect(&T, "GET", "/cms/keep", NULL, 200,
                "{\"width\":10,\"depth\":2,\"count\":1,\"conservative\":false,\"size_bytes\":192}");
    http_expect(&T, "GET", "/keys/bad", NULL, 404, NULL);
}

static void test_wrongtype(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/throttle", "{\"key\":\"lim\",\"max_burst\":5,\"count_per_period\":1,\"period\":60}",
                         NULL);
    assert_status(&r, 200);
    http_free(&r);
    const char *calls[][3] = {
        { "PUT", "/cms/lim", "{\"width\":10,\"depth\":2}" },
        { "POST", "/cms/lim", "{\"items\":[\"a\"]}" },
        { "GET", "/cms/lim/count?item=a", NULL },
        { "GET", "/cms/lim", NULL },
        { "POST", "/cms/lim/merge", "{\"sources\":[\"keep\"]}" },
        { "POST", "/cms/keep/merge", "{\"sources\":[\"lim\"]}" },
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        r = http(&T, calls[i][0], calls[i][1], calls[i][2], NULL);
        assert_error(&r, 409, "WRONGTYPE");
        http_free(&r);
    }
    r = http(&T, "GET", "/keys/lim", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "throttle");
    http_free(&r);
}

/* SIGTERM (snapshot) and kill -9 (journal replay) both restore every counter. */
static void test_persistence(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    http_expect(&p, "PUT", "/cms/p", "{\"width\":64,\"depth\":4,\"conservative\":true}", 201, NULL);
    http_expect(&p, "POST", "/cms/p", "{\"increments\":[{\"item\":\"a\",\"by\":5},{\"item\":\"b\",\"by\":2}]}", 200, NULL);
    http_expect(&p, "PUT", "/cms/q", "{\"width\":64,\"depth\":4}", 201, NULL);
    http_expect(&p, "POST", "/cms/q/merge", "{\"sources\":[\"p\",\"p\"],\"weights\":[2,1]}", 200, NULL);
    http_expect(&p, "POST", "/cms/q/merge", "{\"sources\":[\"q\",\"p\"],\"weights\":[1,-1]}", 200, NULL);
    const char *probe = "/cms/q/count?item=a&item=b&item=c";
    json_t *before = http_get_json(&p, probe), *info = http_get_json(&p, "/cms/q");
    assert_int_equal(tally_stop(&p), 0);
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    json_t *after = http_get_json(&p, probe), *info2 = http_get_json(&p, "/cms/q");
    assert_true(json_equal(before, after));
    assert_true(json_equal(info, info2));
    json_decref(after);
    json_decref(info2);
    http_expect(&p, "POST", "/cms/q", "{\"items\":[\"c\"]}", 200, NULL);
    after = http_get_json(&p, probe);
    tally_kill(&p);
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    json_t *replayed = http_get_json(&p, probe);
    assert_true(json_equal(after, replayed));
    http_expect(&p, "GET", "/cms/p", NULL, 200,
                "{\"width\":64,\"depth\":4,\"count\":7,\"conservative\":true,\"size_bytes\":2080}");
    json_decref(before);
    json_decref(info);
    json_decref(after);
    json_decref(replayed);
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_incr_count),
        cmocka_unit_test(test_never_undercounts),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_negative),
        cmocka_unit_test(test_overflow_atomic),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wrongtype),
        cmocka_unit_test(test_persistence),
    };
    return cmocka_run_group_tests_name("cms (integration)", tests, setup, teardown);
}
