/*
 * it_topk.c - /topk through a real tallyd: RedisBloom's semantics (expelled
 * items, list with counts, query), the decay being reproduced exactly by
 * journal replay and by snapshots, bad input, WRONGTYPE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

static void test_semantics(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/topk/t", "{\"k\":2}", 201,
                "{\"k\":2,\"width\":8,\"depth\":7,\"decay\":0.9,\"size_bytes\":2888}");
    http_expect(&T, "PUT", "/topk/t", "{\"k\":3}", 409, NULL);
    http_expect(&T, "GET", "/topk/t/list", NULL, 200, "{\"items\":[]}");
    /* RedisBloom's rules on a sketch wide enough for no two items to share a
     * bucket: an estimate equal to the minimum enters in place of the root */
    http_expect(&T, "PUT", "/topk/w", "{\"k\":2,\"width\":1000}", 201, NULL);
    http_expect(&T, "POST", "/topk/w", "{\"items\":[\"a\",\"b\",\"c\"]}", 200, "{\"expelled\":[null,null,\"a\"]}");
    http_expect(&T, "POST", "/topk/w", "{\"items\":[\"c\"]}", 200, "{\"expelled\":[null]}");
    http_expect(&T, "POST", "/topk/w", "{\"increments\":[{\"item\":\"z\",\"by\":10},{\"item\":\"a\",\"by\":1}]}", 200,
                "{\"expelled\":[\"b\",\"c\"]}");
    http_expect(&T, "GET", "/topk/w/list", NULL, 200, "{\"items\":[{\"item\":\"z\",\"count\":10},{\"item\":\"a\",\"count\":2}]}");
    json_t *j = NULL;
    http_resp_t r = http(&T, "POST", "/topk/w/query", "{\"items\":[\"z\",\"a\",\"nope\"]}", NULL);
    assert_status(&r, 200);
    j = json_object_get(r.json, "in_topk");
    assert_true(json_is_true(json_array_get(j, 0)) && json_is_true(json_array_get(j, 1)) &&
                json_is_false(json_array_get(j, 2)));
    j = json_object_get(r.json, "counts");
    assert_int_equal(json_integer_value(json_array_get(j, 0)), 10);
    assert_int_equal(json_integer_value(json_array_get(j, 2)), 0);
    http_free(&r);
    http_expect(&T, "GET", "/topk/t", NULL, 200, NULL);
    /* integer items are their decimal text */
    http_expect(&T, "PUT", "/topk/nums", "{\"k\":2,\"width\":50}", 201, NULL);
    http_expect(&T, "POST", "/topk/nums", "{\"items\":[42,\"42\",42]}", 200, "{\"expelled\":[null,null,null]}");
    http_expect(&T, "GET", "/topk/nums/list", NULL, 200, "{\"items\":[{\"item\":\"42\",\"count\":3}]}");
    http_expect(&T, "POST", "/topk/nums/query", "{\"items\":[42]}", 200, "{\"in_topk\":[true],\"counts\":[3]}");
    /* all defaults but k; custom parameters */
    http_expect(&T, "PUT", "/topk/custom", "{\"k\":50,\"width\":2000,\"depth\":7,\"decay\":0.925}", 201, NULL);
    j = http_get_json(&T, "/topk/custom");
    assert_int_equal(json_integer_value(json_object_get(j, "width")), 2000);
    assert_true(json_real_value(json_object_get(j, "decay")) == 0.925);
    json_decref(j);
    http_expect(&T, "GET", "/keys/custom", NULL, 200, NULL);
}

/* A skewed stream: the heaviest items are listed, largest first. */
static void test_heavy_hitters(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/topk/hh", "{\"k\":5,\"width\":50,\"depth\":5}", 201, NULL);
    char *body = malloc(1 << 20);
    rng_t r;
    rng_seed(&r, 8);
    for (int round = 0; round < 10; round++) {
        size_t n = (size_t)snprintf(body, 32, "{\"items\":[");
        for (int i = 0; i < 1000; i++) {
            double u = rng_double(&r);
            int id = (int)(u * u * u * 200);   /* 0 is by far the most frequent */
            n += (size_t)snprintf(body + n, 32, "%s\"h%d\"", i ? "," : "", id);
        }
        snprintf(body + n, 8, "]}");
        http_resp_t resp = http(&T, "POST", "/topk/hh", body, NULL);
        assert_status(&resp, 200);
        assert_int_equal(json_array_size(json_object_get(resp.json, "expelled")), 1000);
        http_free(&resp);
    }
    free(body);
    json_t *j = http_get_json(&T, "/topk/hh/list");
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "item")), "h0");
    for (size_t i = 1; i < 5; i++)
        assert_true(json_integer_value(json_object_get(json_array_get(items, i - 1), "count")) >=
                    json_integer_value(json_object_get(json_array_get(items, i), "count")));
    json_decref(j);
}

/* Sends the same pseudo-random stream (seed, from, to) to a Top-K. */
static void stream(const tally_proc_t *p, const char *key, uint64_t seed, int batches)
{
    char path[64], *body = malloc(1 << 16);
    snprintf(path, sizeof(path), "/topk/%s", key);
    rng_t r;
    rng_seed(&r, seed);
    for (int b = 0; b < batches; b++) {
        size_t n = (size_t)snprintf(body, 32, "{\"increments\":[");
        for (int i = 0; i < 200; i++)
            n += (size_t)snprintf(body + n, 64, "%s{\"item\":\"s%d\",\"by\":%d}", i ? "," : "",
                                  (int)rng_below(&r, 60), 1 + (int)rng_below(&r, 3));
        snprintf(body + n, 8, "]}");
        http_resp_t resp = http(p, "POST", path, body, NULL);
        assert_status(&resp, 200);
        http_free(&resp);
    }
    free(body);
}

/* The decay is random, yet a restarted server - from the journal (kill -9)
 * or from a snapshot (SIGTERM) - holds exactly the structure a server that
 * never stopped holds, and continues identically. */
static void test_replay_reproduces_decay(void **state)
{
    (void)state;
    tally_proc_t ref, p;
    tally_start(&ref, NULL, NULL);
    tally_start(&p, NULL, NULL);
    /* small sketch: constant collisions, so decay decisions shape the result */
    http_expect(&ref, "PUT", "/topk/d", "{\"k\":8,\"width\":6,\"depth\":3}", 201, NULL);
    http_expect(&p, "PUT", "/topk/d", "{\"k\":8,\"width\":6,\"depth\":3}", 201, NULL);
    stream(&ref, "d", 1, 10);
    stream(&p, "d", 1, 10);
    tally_kill(&p);
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    json_t *a = http_get_json(&ref, "/topk/d/list"), *b = http_get_json(&p, "/topk/d/list");
    if (!json_equal(a, b))
        fail_msg("after journal replay: %s vs %s", json_dumps(a, 0), json_dumps(b, 0));
    json_decref(a);
    json_decref(b);
    stream(&ref, "d", 2, 10);
    stream(&p, "d", 2, 10);
    assert_int_equal(tally_stop(&p), 0);
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    stream(&ref, "d", 3, 10);
    stream(&p, "d", 3, 10);
    a = http_get_json(&ref, "/topk/d/list");
    b = http_get_json(&p, "/topk/d/list");
    if (!json_equal(a, b))
        fail_msg("after snapshot and more adds: %s vs %s", json_dumps(a, 0), json_dumps(b, 0));
    json_decref(a);
    json_decref(b);
    tally_cleanup(&p);
    tally_cleanup(&ref);
}

static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *method, *path, *body, *field;
        long status;
    } cases[] = {
        { "PUT", "/topk/bad", "{}", "k", 400 },
        { "PUT", "/topk/bad", "{\"k\":0}", "k", 400 },
        { "PUT", "/topk/bad", "{\"k\":-3}", "k", 400 },
        { "PUT", "/topk/bad", "{\"k\":10001}", "k", 400 },
        { "PUT", "/topk/bad", "{\"k\":\"10\"}", "k", 400 },
        { "PUT", "/topk/bad", "{\"k\":10,\"width\":0}", "width", 400 },
        { "PUT", "/topk/bad", "{\"k\":10,\"depth\":0}", "depth", 400 },
        { "PUT", "/topk/bad", "{\"k\":10,\"decay\":0}", "decay", 400 },
        { "PUT", "/topk/bad", "{\"k\":10,\"decay\":1.5}", "decay", 400 },
        { "PUT", "/topk/bad", "{\"k\":10,\"decay\":-0.5}", "decay", 400 },
        { "PUT", "/topk/bad", "{\"k\":10,\"width\":100000,\"depth\":1000}", "width", 400 },
        { "PUT", "/topk/bad", "{\"k\":10,\"colour\":1}", "colour", 400 },
        { "POST", "/topk/bad", "{\"items\":[\"a\"]}", NULL, 404 },
        { "GET", "/topk/bad/list", NULL, NULL, 404 },
        { "GET", "/topk/bad", NULL, NULL, 404 },
        { "POST", "/topk/bad/query", "{\"items\":[\"a\"]}", NULL, 404 },
        { "POST", "/topk/keep", "{}", "items", 400 },
        { "POST", "/topk/keep", "{\"items\":[]}", "items", 400 },
        { "POST", "/topk/keep", "{\"items\":[null]}", "items", 400 },
        { "POST", "/topk/keep", "{\"increments\":[{\"item\":\"a\",\"by\":0}]}", "increments", 400 },
        { "POST", "/topk/keep", "{\"increments\":[{\"item\":\"a\",\"by\":100001}]}", "increments", 400 },
        { "POST", "/topk/keep", "{\"increments\":[{\"item\":5.5}]}", "increments", 400 },
        { "POST", "/topk/keep/query", "{}", "items", 400 },
        { "POST", "/topk/keep/query", "{\"increments\":[]}", "increments", 400 },
        { "POST", "/topk/keep/query", "{\"items\":[]}", "items", 400 },
        { "GET", "/topk/keep/list?withcount=1", NULL, "withcount", 400 },
    };
    http_expect(&T, "PUT", "/topk/keep", "{\"k\":3}", 201, NULL);
    http_expect(&T, "POST", "/topk/keep", "{\"items\":[\"a\",\"a\"]}", 200, NULL);
    json_t *before = http_get_json(&T, "/topk/keep/list");
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
    char *body = malloc(10001 * 4 + 64);
    size_t n = (size_t)snprintf(body, 32, "{\"items\":[");
    for (int i = 0; i < 10001; i++)
        n += (size_t)snprintf(body + n, 8, "%s\"b\"", i ? "," : "");
    snprintf(body + n, 8, "]}");
    http_resp_t r = http(&T, "POST", "/topk/keep", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    free(body);
    json_t *after = http_get_json(&T, "/topk/keep/list");
    assert_true(json_equal(before, after));
    json_decref(before);
    json_decref(after);
    http_expect(&T, "GET", "/keys/bad", NULL, 404, NULL);

    /* another type's key */
    http_expect(&T, "PUT", "/cms/acms", "{\"width\":10,\"depth\":2}", 201, NULL);
    http_expect(&T, "PUT", "/topk/acms", "{\"k\":3}", 409, NULL);
    r = http(&T, "POST", "/topk/acms", "{\"items\":[\"a\"]}", NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
    r = http(&T, "GET", "/topk/acms/list", NULL, NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
    r = http(&T, "POST", "/topk/acms/query", "{\"items\":[\"a\"]}", NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
    r = http(&T, "GET", "/cms/keep", NULL, NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_heavy_hitters),
        cmocka_unit_test(test_replay_reproduces_decay),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests_name("topk (integration)", tests, setup, teardown);
}
