/*
 * it_tdigest.c - /tdigest through a real tallyd: RedisBloom's documented
 * examples for every command the seed article lists (create, add, reset,
 * merge, min, max, quantile, cdf, info, rank, revrank, byrank, byrevrank,
 * trimmed_mean), the edge-case answers and how NaN/inf are written, merge
 * options, bad input, WRONGTYPE and persistence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

#define RANKS_0_15 "rank=0&rank=1&rank=2&rank=3&rank=4&rank=5&rank=6&rank=7&rank=8&rank=9&rank=10&rank=11&rank=12" \
                   "&rank=13&rank=14&rank=15"

/* The examples of RedisBloom's command reference, answer for answer. */
static void test_redisbloom_examples(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/tdigest/t", "{\"compression\":1000}", 201, NULL);
    http_expect(&T, "POST", "/tdigest/t", "{\"values\":[1,2,2,3,3,3,4,4,4,4,5,5,5,5,5]}", 200, "{\"observations\":15}");
    http_expect(&T, "GET", "/tdigest/t/byrank?" RANKS_0_15, NULL, 200,
                "{\"values\":[1.0,2.0,2.0,3.0,3.0,3.0,4.0,4.0,4.0,4.0,5.0,5.0,5.0,5.0,5.0,\"inf\"]}");
    http_expect(&T, "GET", "/tdigest/t/byrevrank?" RANKS_0_15, NULL, 200,
                "{\"values\":[5.0,5.0,5.0,5.0,5.0,4.0,4.0,4.0,4.0,3.0,3.0,3.0,2.0,2.0,1.0,\"-inf\"]}");
    http_expect(&T, "GET", "/tdigest/t/quantile?q=0&q=0.1&q=0.2&q=0.3&q=0.4&q=0.5&q=0.6&q=0.7&q=0.8&q=0.9&q=1", NULL, 200,
                "{\"values\":[1.0,2.0,3.0,3.0,4.0,4.0,4.0,5.0,5.0,5.0,5.0]}");
    /* RedisBloom prints 0.29999999999999999 and 0.83333333333333337: the same doubles */
    http_expect(&T, "GET", "/tdigest/t/cdf?value=0&value=1&value=2&value=3&value=4&value=5&value=6", NULL, 200,
                "{\"cdf\":[0.0,0.03333333333333333,0.13333333333333333,0.3,0.5333333333333333,0.8333333333333334,1.0]}");
    http_expect(&T, "GET", "/tdigest/t/min", NULL, 200, "{\"min\":1.0}");
    http_expect(&T, "GET", "/tdigest/t/max", NULL, 200, "{\"max\":5.0}");

    http_expect(&T, "PUT", "/tdigest/s", "{\"compression\":1000}", 201, NULL);
    http_expect(&T, "POST", "/tdigest/s", "{\"values\":[10,20,30,40,50,60]}", 200, NULL);
    const char *v = "value=0&value=10&value=20&value=30&value=40&value=50&value=60&value=70";
    char path[256];
    snprintf(path, sizeof(path), "/tdigest/s/rank?%s", v);
    http_expect(&T, "GET", path, NULL, 200, "{\"ranks\":[-1,0,1,2,3,4,5,6]}");
    snprintf(path, sizeof(path), "/tdigest/s/revrank?%s", v);
    http_expect(&T, "GET", path, NULL, 200, "{\"ranks\":[6,5,4,3,2,1,0,-1]}");
    http_expect(&T, "PUT", "/tdigest/s2", "{\"compression\":1000}", 201, NULL);
    http_expect(&T, "POST", "/tdigest/s2", "{\"values\":[10,10,10,10,20,20]}", 200, NULL);
    http_expect(&T, "GET", "/tdigest/s2/rank?value=10&value=20", NULL, 200, "{\"ranks\":[2,5]}");
    http_expect(&T, "GET", "/tdigest/s2/revrank?value=10&value=20", NULL, 200, "{\"ranks\":[4,1]}");

    /* TDIGEST.CREATE t (default compression): capacity 610 */
    http_expect(&T, "PUT", "/tdigest/info", NULL, 201, NULL);
    http_expect(&T, "POST", "/tdigest/info", "{\"values\":[1,2,3,4,5]}", 200, NULL);
    json_t *j = http_get_json(&T, "/tdigest/info");
    assert_int_equal(json_integer_value(json_object_get(j, "compression")), 100);
    assert_int_equal(json_integer_value(json_object_get(j, "capacity")), 610);
    assert_int_equal(json_integer_value(json_object_get(j, "observations")), 5);
    assert_int_equal(json_integer_value(json_object_get(j, "merged_weight")) +
                         json_integer_value(json_object_get(j, "unmerged_weight")),
                     5);
    assert_true(json_real_value(json_object_get(j, "min")) == 1 && json_real_value(json_object_get(j, "max")) == 5);
    json_decref(j);
}

/* Empty digest: nan/-2 answers; single value; trimmed mean. */
static void test_edge_cases(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/tdigest/e", "{}", 201, NULL);
    http_expect(&T, "GET", "/tdigest/e/quantile?q=0.5&q=0", NULL, 200, "{\"values\":[\"nan\",\"nan\"]}");
    http_expect(&T, "GET", "/tdigest/e/cdf?value=1", NULL, 200, "{\"cdf\":[\"nan\"]}");
    http_expect(&T, "GET", "/tdigest/e/rank?value=1", NULL, 200, "{\"ranks\":[-2]}");
    http_expect(&T, "GET", "/tdigest/e/revrank?value=1", NULL, 200, "{\"ranks\":[-2]}");
    http_expect(&T, "GET", "/tdigest/e/byrank?rank=0", NULL, 200, "{\"values\":[\"nan\"]}");
    http_expect(&T, "GET", "/tdigest/e/byrevrank?rank=3", NULL, 200, "{\"values\":[\"nan\"]}");
    http_expect(&T, "GET", "/tdigest/e/min", NULL, 200, "{\"min\":\"nan\"}");
    http_expect(&T, "GET", "/tdigest/e/max", NULL, 200, "{\"max\":\"nan\"}");
    http_expect(&T, "GET", "/tdigest/e/trimmed_mean?low=0.1&high=0.9", NULL, 200, "{\"mean\":\"nan\"}");
    json_t *j = http_get_json(&T, "/tdigest/e");
    assert_string_equal(json_string_value(json_object_get(j, "min")), "nan");
    json_decref(j);

    http_expect(&T, "POST", "/tdigest/e", "{\"values\":[-3.5]}", 200, "{\"observations\":1}");
    http_expect(&T, "GET", "/tdigest/e/quantile?q=0&q=0.5&q=1", NULL, 200, "{\"values\":[-3.5,-3.5,-3.5]}");
    http_expect(&T, "GET", "/tdigest/e/rank?value=-4&value=-3.5&value=0", NULL, 200, "{\"ranks\":[-1,0,1]}");
    http_expect(&T, "GET", "/tdigest/e/revrank?value=-4&value=-3.5&value=0", NULL, 200, "{\"ranks\":[1,0,-1]}");
    http_expect(&T, "GET", "/tdigest/e/byrank?rank=0&rank=1&rank=99", NULL, 200, "{\"values\":[-3.5,\"inf\",\"inf\"]}");
    http_expect(&T, "GET", "/tdigest/e/trimmed_mean?low=0&high=1", NULL, 200, "{\"mean\":-3.5}");

    http_expect(&T, "PUT", "/tdigest/tm", "{\"compression\":1000}", 201, NULL);
    http_expect(&T, "POST", "/tdigest/tm", "{\"values\":[1,2,3,4,5,6,7,8,9,10]}", 200, NULL);
    http_expect(&T, "GET", "/tdigest/tm/trimmed_mean?low=0.1&high=0.9", NULL, 200, "{\"mean\":5.5}");
    http_expect(&T, "GET", "/tdigest/tm/trimmed_mean?low=0&high=0.5", NULL, 200, "{\"mean\":3.0}");

    /* reset: empty again, same compression; the key stays */
    http_expect(&T, "POST", "/tdigest/tm/reset", NULL, 200, NULL);
    http_expect(&T, "GET", "/tdigest/tm/min", NULL, 200, "{\"min\":\"nan\"}");
    j = http_get_json(&T, "/tdigest/tm");
    assert_int_equal(json_integer_value(json_object_get(j, "compression")), 1000);
    assert_int_equal(json_integer_value(json_object_get(j, "observations")), 0);
    json_decref(j);
}

/* TDIGEST.MERGE: destination created if missing; existing destination merged
 * in unless override; compression rules. */
static void test_merge(void **state)
{
    (void)state;
    http_expect(&T, "PUT", "/tdigest/m1", "{\"compression\":50}", 201, NULL);
    http_expect(&T, "PUT", "/tdigest/m2", "{\"compression\":200}", 201, NULL);
    http_expect(&T, "POST", "/tdigest/m1", "{\"values\":[1,2,3]}", 200, NULL);
    http_expect(&T, "POST", "/tdigest/m2", "{\"values\":[10,20]}", 200, NULL);
    /* new destination: the largest compression of the sources */
    http_expect(&T, "POST", "/tdigest/mnew/merge", "{\"sources\":[\"m1\",\"m2\"]}", 200, NULL);
    json_t *j = http_get_json(&T, "/tdigest/mnew");
    assert_int_equal(json_integer_value(json_object_get(j, "compression")), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "observations")), 5);
    assert_true(json_real_value(json_object_get(j, "min")) == 1 && json_real_value(json_object_get(j, "max")) == 20);
    json_decref(j);
    /* existing destination without override: its values count, its compression stays */
    http_expect(&T, "POST", "/tdigest/m1/merge", "{\"sources\":[\"m2\"]}", 200, NULL);
    j = http_get_json(&T, "/tdigest/m1");
    assert_int_equal(json_integer_value(json_object_get(j, "compression")), 50);
    assert_int_equal(json_integer_value(json_object_get(j, "observations")), 5);
    json_decref(j);
    /* override: only the sources; compression given */
    http_expect(&T, "POST", "/tdigest/m1/merge", "{\"sources\":[\"m2\"],\"override\":true,\"compression\":300}", 200, NULL);
    j = http_get_json(&T, "/tdigest/m1");
    assert_int_equal(json_integer_value(json_object_get(j, "compression")), 300);
    assert_int_equal(json_integer_value(json_object_get(j, "observations")), 2);
    assert_true(json_real_value(json_object_get(j, "min")) == 10);
    json_decref(j);
    /* the destination as its own source, twice */
    http_expect(&T, "POST", "/tdigest/m1/merge", "{\"sources\":[\"m1\",\"m1\"],\"override\":true}", 200, NULL);
    j = http_get_json(&T, "/tdigest/m1");
    assert_int_equal(json_integer_value(json_object_get(j, "observations")), 4);
    json_decref(j);
    /* refusals */
    http_expect(&T, "POST", "/tdigest/m1/merge", "{\"sources\":[\"nope\"]}", 404, NULL);
    http_expect(&T, "POST", "/tdigest/fresh/merge", "{\"sources\":[\"fresh\"]}", 404, NULL);
    http_expect(&T, "POST", "/tdigest/m1/merge", "{\"sources\":[]}", 400, NULL);
    http_expect(&T, "POST", "/tdigest/m1/merge", "{\"sources\":[\"m2\"],\"compression\":0}", 400, NULL);
    http_expect(&T, "POST", "/tdigest/m1/merge", "{\"sources\":[\"m2\"],\"override\":\"yes\"}", 400, NULL);
    http_expect(&T, "GET", "/keys/fresh", NULL, 404, NULL);
    j = http_get_json(&T, "/tdigest/m1");
    assert_int_equal(json_integer_value(json_object_get(j, "observations")), 4);
    json_decref(j);
}

static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *method, *path, *body, *field;
        long status;
    } cases[] = {
        { "PUT", "/tdigest/bad", "{\"compression\":0}", "compression", 400 },
        { "PUT", "/tdigest/bad", "{\"compression\":-5}", "compression", 400 },
        { "PUT", "/tdigest/bad", "{\"compression\":10001}", "compression", 400 },
        { "PUT", "/tdigest/bad", "{\"compression\":1.5}", "compression", 400 },
        { "PUT", "/tdigest/bad", "{\"compresion\":100}", "compresion", 400 },
        { "PUT", "/tdigest/bad", "[1]", NULL, 400 },
        { "POST", "/tdigest/bad", "{\"values\":[1]}", NULL, 404 },
        { "GET", "/tdigest/bad/quantile?q=0.5", NULL, NULL, 404 },
        { "POST", "/tdigest/bad/reset", NULL, NULL, 404 },
        { "GET", "/tdigest/bad", NULL, NULL, 404 },
        { "POST", "/tdigest/k", "{}", "values", 400 },
        { "POST", "/tdigest/k", "{\"values\":[]}", "values", 400 },
        { "POST", "/tdigest/k", "{\"values\":3}", "values", 400 },
        { "POST", "/tdigest/k", "{\"values\":[1,\"2\"]}", "values", 400 },
        { "POST", "/tdigest/k", "{\"values\":[1,\"nan\"]}", "values", 400 },
        { "POST", "/tdigest/k", "{\"values\":[1,\"inf\"]}", "values", 400 },
        { "POST", "/tdigest/k", "{\"values\":[1,null]}", "values", 400 },
        { "POST", "/tdigest/k", "{\"values\":[1e999]}", NULL, 400 },
        { "POST", "/tdigest/k", "{\"values\":[NaN]}", NULL, 400 },
        { "GET", "/tdigest/k/quantile", NULL, "q", 400 },
        { "GET", "/tdigest/k/quantile?q=1.5", NULL, "q", 400 },
        { "GET", "/tdigest/k/quantile?q=-0.1", NULL, "q", 400 },
        { "GET", "/tdigest/k/quantile?q=0.5&q=2", NULL, "q", 400 },
        { "GET", "/tdigest/k/quantile?q=nan", NULL, "q", 400 },
        { "GET", "/tdigest/k/quantile?q=abc", NULL, "q", 400 },
        { "GET", "/tdigest/k/quantile?value=0.5", NULL, "value", 400 },
        { "GET", "/tdigest/k/cdf?value=inf", NULL, "value", 400 },
        { "GET", "/tdigest/k/cdf?value=", NULL, "value", 400 },
        { "GET", "/tdigest/k/rank?value=1e999", NULL, "value", 400 },
        { "GET", "/tdigest/k/byrank?rank=-1", NULL, "rank", 400 },
        { "GET", "/tdigest/k/byrank?rank=1.5", NULL, "rank", 400 },
        { "GET", "/tdigest/k/byrevrank", NULL, "rank", 400 },
        { "GET", "/tdigest/k/trimmed_mean?low=0.5&high=0.5", NULL, "low", 400 },
        { "GET", "/tdigest/k/trimmed_mean?low=0.6&high=0.5", NULL, "low", 400 },
        { "GET", "/tdigest/k/trimmed_mean?low=-0.1&high=0.5", NULL, "low", 400 },
        { "GET", "/tdigest/k/trimmed_mean?low=0.1&high=1.1", NULL, "high", 400 },
        { "GET", "/tdigest/k/trimmed_mean?low=0.1", NULL, "high", 400 },
        { "GET", "/tdigest/k/min?x=1", NULL, "x", 400 },
        { "POST", "/tdigest/k/reset", "{\"now\":1}", "now", 400 },
    };
    http_expect(&T, "PUT", "/tdigest/k", NULL, 201, NULL);
    http_expect(&T, "POST", "/tdigest/k", "{\"values\":[1,2,3]}", 200, NULL);
    json_t *before = http_get_json(&T, "/tdigest/k");
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
    /* more than 10 000 values */
    char *body = malloc(10001 * 3 + 64);
    size_t n = (size_t)snprintf(body, 32, "{\"values\":[");
    for (int i = 0; i < 10001; i++)
        n += (size_t)snprintf(body + n, 8, "%s7", i ? "," : "");
    snprintf(body + n, 8, "]}");
    http_resp_t r = http(&T, "POST", "/tdigest/k", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    free(body);
    json_t *after = http_get_json(&T, "/tdigest/k");
    assert_true(json_equal(before, after));
    json_decref(before);
    json_decref(after);
    http_expect(&T, "GET", "/keys/bad", NULL, 404, NULL);

    /* another type's key */
    http_expect(&T, "PUT", "/topk/atopk", "{\"k\":3}", 201, NULL);
    const char *calls[][3] = {
        { "PUT", "/tdigest/atopk", NULL },
        { "POST", "/tdigest/atopk", "{\"values\":[1]}" },
        { "GET", "/tdigest/atopk/quantile?q=0.5", NULL },
        { "GET", "/tdigest/atopk/trimmed_mean?low=0&high=1", NULL },
        { "GET", "/tdigest/atopk", NULL },
        { "POST", "/tdigest/atopk/reset", NULL },
        { "POST", "/tdigest/atopk/merge", "{\"sources\":[\"k\"]}" },
        { "POST", "/tdigest/k/merge", "{\"sources\":[\"atopk\"]}" },
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        r = http(&T, calls[i][0], calls[i][1], calls[i][2], NULL);
        if (r.status != 409 || strstr(r.body, "WRONGTYPE") == NULL)
            fail_msg("%s %s: %ld %s", calls[i][0], calls[i][1], r.status, r.body);
        http_free(&r);
    }
    http_expect(&T, "PUT", "/tdigest/k", NULL, 409, NULL);   /* EXISTS */
     }
     
     static void test_persistence(void **state)
     {
         (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    http_expect(&p, "PUT", "/tdigest/p", "{\"compression\":50}", 201, NULL);
    char *body = malloc(200000);
    for (int b = 0; b < 5; b++) {
        size_t n = (size_t)snprintf(body, 32, "{\"values\":[");
        for (int i = 0; i < 5000; i++)
            n += (size_t)snprintf(body + n, 32, "%s%d.25", i ? "," : "", (i * 7919 + b * 13) % 10007);
        snprintf(body + n, 8, "]}");
        http_resp_t r = http(&p, "POST", "/tdigest/p", body, NULL);
        assert_status(&r, 200);
        http_free(&r);
    }
    free(body);
    const char *probe = "/tdigest/p/quantile?q=0&q=0.01&q=0.5&q=0.99&q=1";
    json_t *q1 = http_get_json(&p, probe), *i1 = http_get_json(&p, "/tdigest/p");
    tally_kill(&p);   /* replayed from the journal */
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    json_t *q2 = http_get_json(&p, probe), *i2 = http_get_json(&p, "/tdigest/p");
    assert_true(json_equal(q1, q2));
    assert_true(json_equal(i1, i2));
    assert_int_equal(tally_stop(&p), 0);   /* from the snapshot */
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    json_t *q3 = http_get_json(&p, probe), *i3 = http_get_json(&p, "/tdigest/p");
    assert_true(json_equal(q1, q3));
    assert_true(json_equal(i1, i3));
    json_decref(q1);
    json_decref(q2);
    json_decref(q3);
    json_decref(i1);
    json_decref(i2);
    json_decref(i3);
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redisbloom_examples),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_persistence),
    };
    return cmocka_run_group_tests_name("tdigest (integration)", tests, setup, teardown);
}
