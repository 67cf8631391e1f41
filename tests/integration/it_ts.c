/*
 * it_ts.c - /ts through a real tallyd: the seed's temperatures (which a Redis
 * sorted set loses and we keep), duplicate policies, retention, "*" as the
 * server's time (the same after journal replay), range and reverse range
 * with every option, persistence, every kind of bad input leaving the state
 * untouched, and a seeded random comparison of the HTTP answers with the
 * core library fed the same batches in-process.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/rng.h"
#include "core/ts.h"
#include "tests/integration/harness.h"
#include "tests/integration/redis_ref.h"
#include "tests/ts_filter_model.h"

TALLY_ONE_SERVER_SUITE(T)

static json_t *samples_of(const http_resp_t *r)
{
    json_t *s = json_object_get(r->json, "samples");
    if (!json_is_array(s))
        fail_msg("no samples in %s", r->body);
    return s;
}

static int64_t ts_at(json_t *samples, size_t i) { return json_integer_value(json_array_get(json_array_get(samples, i), 0)); }
static double val_at(json_t *samples, size_t i) { return json_number_value(json_array_get(json_array_get(samples, i), 1)); }

/* GET /ts/{key}: samples and last_timestamp, to prove a request changed nothing. */
static void info_of(const char *key, long long *samples, long long *last)
{
    http_resp_t r = httpf(&T, "GET", NULL, "/ts/%s", key);
    assert_status(&r, 200);
    *samples = json_int_of(&r, "samples");
    json_t *l = json_object_get(r.json, "last_timestamp");
    *last = json_is_integer(l) ? json_integer_value(l) : -1;
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* The seed                                                                 */
/* ------------------------------------------------------------------------ */

/* The lecture's temperatures: ZADD keeps 2 of 3 (the third has the same
 * member "21" as the first), a time series keeps all three. */
static void test_seed_temperatures(void **state)
{
    (void)state;
    redis_ref_t rr;
    bool have_redis = redis_ref_start(&rr);
    if (have_redis) {
        resp_t *v = redis_cmd(&rr, "ZADD", "temp", "1686697976001", "21", NULL);
        assert_int_equal(v->integer, 1);
        resp_free(v);
        v = redis_cmd(&rr, "ZADD", "temp", "1686697977001", "22", NULL);
        assert_int_equal(v->integer, 1);
        resp_free(v);
        v = redis_cmd(&rr, "ZADD", "temp", "1686697978001", "21", NULL);
        assert_int_equal(v->integer, 0);   /* the anti-pattern: the first 21 is overwritten */
        resp_free(v);
        v = redis_cmd(&rr, "ZRANGEBYSCORE", "temp", "-inf", "+inf", NULL);
        assert_int_equal(v->n, 2);
        resp_free(v);
        redis_ref_stop(&rr);
    }
    http_resp_t r = http(&T, "POST", "/ts/temp",
                         "{\"samples\":[[1686697976001,21],[1686697977001,22],[1686697978001,21]]}", NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "created"));
    http_free(&r);
    r = http(&T, "GET", "/ts/temp/range?from=-&to=%2B", NULL, NULL);
    assert_status(&r, 200);
    json_t *s = samples_of(&r);
    assert_int_equal(json_array_size(s), 3);
    assert_int_equal(ts_at(s, 0), 1686697976001LL);
    assert_true(val_at(s, 0) == 21 && val_at(s, 1) == 22 && val_at(s, 2) == 21);
    assert_non_null(strstr(r.body, "[1686697976001,21.0]"));
    http_free(&r);
    /* the default policy is BLOCK: a duplicate timestamp is refused loudly */
    r = http(&T, "POST", "/ts/temp", "{\"samples\":[[1686697977001,23]]}", NULL);
    assert_error(&r, 409, "EXISTS");
    assert_non_null(strstr(r.body, "1686697977001"));
    http_free(&r);
    long long n, last;
    info_of("temp", &n, &last);
    assert_int_equal(n, 3);
}

/* ------------------------------------------------------------------------ */
/* Duplicate policies and retention                                         */
/* ------------------------------------------------------------------------ */

static void test_duplicate_policies(void **state)
{
    (void)state;
    static const struct {
        const char *policy;
        double want;
    } cases[] = { { "first", 10 }, { "last", 7 }, { "min", 5 }, { "max", 12 }, { "sum", 34 } };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_resp_t r = httpf(&T, "PUT", "{\"duplicate_policy\":\"x\"}", "/ts/dup-%s", cases[i].policy);
        assert_error(&r, 400, "BAD_REQUEST");
        http_free(&r);
        char body[128];
        snprintf(body, sizeof(body), "{\"duplicate_policy\":\"%s\"}", cases[i].policy);
        r = httpf(&T, "PUT", body, "/ts/dup-%s", cases[i].policy);
        assert_status(&r, 201);
        http_free(&r);
        /* duplicates within one batch and against the stored sample */
        r = httpf(&T, "POST", "{\"samples\":[[100,10],[100,12],[200,1]]}", "/ts/dup-%s", cases[i].policy);
        assert_status(&r, 200);
        http_free(&r);
        r = httpf(&T, "POST", "{\"samples\":[[100,5],[100,7]]}", "/ts/dup-%s", cases[i].policy);
        assert_status(&r, 200);
        http_free(&r);
        r = httpf(&T, "GET", NULL, "/ts/dup-%s/range?from=100&to=100", cases[i].policy);
        json_t *s = samples_of(&r);
        assert_int_equal(json_array_size(s), 1);
        if (val_at(s, 0) != cases[i].want)
            fail_msg("policy %s: %g, want %g", cases[i].policy, val_at(s, 0), cases[i].want);
        http_free(&r);
        r = httpf(&T, "GET", NULL, "/ts/dup-%s", cases[i].policy);
        assert_string_equal(json_string_value(json_object_get(r.json, "duplicate_policy")), cases[i].policy);
        assert_int_equal(json_int_of(&r, "samples"), 2);
        http_free(&r);
    }
    /* ON_DUPLICATE overrides a BLOCK series per request */
    http_resp_t r = http(&T, "POST", "/ts/dup-override", "{\"samples\":[[1,1]]}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "POST", "/ts/dup-override", "{\"samples\":[[1,2]]}", NULL);
    assert_error(&r, 409, "EXISTS");
    http_free(&r);
    r = http(&T, "POST", "/ts/dup-override", "{\"samples\":[[1,2]],\"on_duplicate\":\"LAST\"}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/ts/dup-override/range", NULL, NULL);
    assert_true(val_at(samples_of(&r), 0) == 2);
    http_free(&r);
    /* a batch where the third sample is blocked stores none of them */
    r = http(&T, "POST", "/ts/dup-override", "{\"samples\":[[2,1],[3,1],[1,9],[4,1]]}", NULL);
    assert_error(&r, 409, "EXISTS");
    assert_non_null(strstr(r.body, "samples[2]"));
    http_free(&r);
    long long n, last;
    info_of("dup-override", &n, &last);
    assert_int_equal(n, 1);
    assert_int_equal(last, 1);
}

static void test_retention(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "PUT", "/ts/ret", "{\"retention_ms\":1000,\"duplicate_policy\":\"last\"}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    r = http(&T, "POST", "/ts/ret", "{\"samples\":[[5000,1],[4000,2]]}", NULL);   /* 4000 = newest - retention */
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "POST", "/ts/ret", "{\"samples\":[[3999,3]]}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "older than retention"));
    http_free(&r);
    /* measured from the newest sample, including one earlier in the same batch */
    r = http(&T, "POST", "/ts/ret", "{\"samples\":[[7000,4],[5500,5]]}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "samples[1]"));
    http_free(&r);
    long long n, last;
    info_of("ret", &n, &last);
    assert_int_equal(n, 2);
    assert_int_equal(last, 5000);
    /* a newer sample trims what falls out of the window */
    r = http(&T, "POST", "/ts/ret", "{\"samples\":[[5500,6]]}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/ts/ret/range", NULL, NULL);
    json_t *s = samples_of(&r);
    assert_int_equal(json_array_size(s), 2);
    assert_int_equal(ts_at(s, 0), 5000);
    http_free(&r);
    r = http(&T, "GET", "/ts/ret", NULL, NULL);
    assert_int_equal(json_int_of(&r, "first_timestamp"), 5000);
    assert_int_equal(json_int_of(&r, "retention_ms"), 1000);
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* "*", auto-creation, info, persistence                                    */
/* ------------------------------------------------------------------------ */

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void test_star_and_persistence(void **state)
{
    (void)state;
    int64_t before = wall_ms();
    http_resp_t r = http(&T, "POST", "/ts/star",
                         "{\"samples\":[[\"*\",1.25]],\"retention_ms\":86400000,\"duplicate_policy\":\"sum\","
                         "\"labels\":{\"sensor\":\"s1\",\"room\":\"hall\"}}",
                         NULL);
    int64_t after = wall_ms();
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "created"));
    int64_t t = json_integer_value(json_array_get(json_object_get(r.json, "timestamps"), 0));
    assert_true(t >= before && t <= after);
    http_free(&r);
    /* creation options are ignored when the key exists (as TS.ADD does) */
    r = http(&T, "POST", "/ts/star", "{\"samples\":[[\"*\",1],[\"*\",2]],\"retention_ms\":5}", NULL);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "created"));
    http_free(&r);
    r = http(&T, "GET", "/ts/star", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "retention_ms"), 86400000);
    assert_string_equal(json_string_value(json_object_get(r.json, "duplicate_policy")), "sum");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r.json, "labels"), "room")), "hall");
    assert_true(json_int_of(&r, "memory_bytes") > 0);
    assert_true(json_is_number(json_object_get(r.json, "bytes_per_sample")));
    http_free(&r);
    /* a regular series to persist */
    char *body = malloc(64 * 1000 + 32);
    size_t o = (size_t)sprintf(body, "{\"samples\":[");
    for (int i = 0; i < 1000; i++)
        o += (size_t)sprintf(body + o, "%s[%d,%d.5]", i ? "," : "", 1000000 + i * 1000, 20 + i % 3);
    strcpy(body + o, "]}");
    r = http(&T, "POST", "/ts/persist", body, NULL);
    assert_status(&r, 200);
    http_free(&r);
    free(body);
    http_resp_t before_range = http(&T, "GET", "/ts/persist/range?agg=avg&bucket_ms=7000&align=333", NULL, NULL);
    http_resp_t before_star = http(&T, "GET", "/ts/star/range", NULL, NULL);

    /* kill -9: the journal replays with the recorded times */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", T.dir);
    tally_kill(&T);
    unlink(T.log);   /* the harness reads the port from the log: start it afresh */
    tally_start(&T, dir, NULL);
    T.own_dir = true;
    http_resp_t a = http(&T, "GET", "/ts/star/range", NULL, NULL);
    assert_string_equal(a.body, before_star.body);
    http_free(&a);
    a = http(&T, "GET", "/ts/persist/range?agg=avg&bucket_ms=7000&align=333", NULL, NULL);
    assert_string_equal(a.body, before_range.body);
    http_free(&a);
    /* SIGTERM: snapshot, then load it */
    assert_int_equal(tally_stop(&T), 0);
    unlink(T.log);
    tally_start(&T, dir, NULL);
    T.own_dir = true;
    a = http(&T, "GET", "/ts/star/range", NULL, NULL);
    assert_string_equal(a.body, before_star.body);
    http_free(&a);
    a = http(&T, "GET", "/ts/persist/range?agg=avg&bucket_ms=7000&align=333", NULL, NULL);
    assert_string_equal(a.body, before_range.body);
    http_free(&a);
    a = http(&T, "GET", "/keys/persist", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(a.json, "type")), "ts");
    http_free(&a);
    http_free(&before_range);
    http_free(&before_star);
}

/* ------------------------------------------------------------------------ */
/* Range options                                                            */
/* ------------------------------------------------------------------------ */

static void test_range_options(void **state)
{
    (void)state;
    /* 1..10 at t = 10, 20, ..., 100 */
    http_resp_t r = http(&T, "POST", "/ts/rng",
                         "{\"samples\":[[10,1],[20,2],[30,3],[40,4],[50,5],[60,6],[70,7],[80,8],[90,9],[100,10]]}",
                         NULL);
    assert_status(&r, 200);
    http_free(&r);
    static const struct {
        const char *query;
        const char *want;
    } cases[] = {
        { "/ts/rng/range?from=30&to=50", "{\"samples\":[[30,3.0],[40,4.0],[50,5.0]]}" },
        { "/ts/rng/revrange?from=30&to=50", "{\"samples\":[[50,5.0],[40,4.0],[30,3.0]]}" },
        { "/ts/rng/range?count=2", "{\"samples\":[[10,1.0],[20,2.0]]}" },
        { "/ts/rng/revrange?count=2&to=+", "{\"samples\":[[100,10.0],[90,9.0]]}" },
        { "/ts/rng/range?from=-&to=%2B&agg=sum&bucket_ms=30",
          "{\"samples\":[[0,3.0],[30,12.0],[60,21.0],[90,19.0]]}" },
        { "/ts/rng/range?agg=sum&bucket_ms=30&align=10", "{\"samples\":[[10,6.0],[40,15.0],[70,24.0],[100,10.0]]}" },
        { "/ts/rng/range?from=20&to=100&agg=count&bucket_ms=30&align=start",
          "{\"samples\":[[20,3.0],[50,3.0],[80,3.0]]}" },
        { "/ts/rng/range?from=0&to=95&agg=count&bucket_ms=30&align=end",
          "{\"samples\":[[5,3.0],[35,3.0],[65,3.0]]}" },
        { "/ts/rng/revrange?agg=max&bucket_ms=30&count=2", "{\"samples\":[[90,10.0],[60,8.0]]}" },
        { "/ts/rng/range?agg=first&bucket_ms=50&bucket_timestamp=end", "{\"samples\":[[50,1.0],[100,5.0],[150,10.0]]}" },
        { "/ts/rng/range?agg=last&bucket_ms=50&bucket_timestamp=mid", "{\"samples\":[[25,4.0],[75,9.0],[125,10.0]]}" },
        { "/ts/rng/revrange?agg=first&bucket_ms=50", "{\"samples\":[[100,10.0],[50,5.0],[0,1.0]]}" },
        { "/ts/rng/range?agg=range&bucket_ms=1000", "{\"samples\":[[0,9.0]]}" },
        { "/ts/rng/range?agg=avg&bucket_ms=1000", "{\"samples\":[[0,5.5]]}" },
        { "/ts/rng/range?agg=var.p&bucket_ms=1000", "{\"samples\":[[0,8.25]]}" },
        { "/ts/rng/range?agg=var.s&bucket_ms=1000", "{\"samples\":[[0,9.166666666666666]]}" },
        { "/ts/rng/range?agg=std.p&bucket_ms=1000", "{\"samples\":[[0,2.8722813232690143]]}" },
        { "/ts/rng/range?agg=min&bucket_ms=40&filter_by_value_min=3&filter_by_value_max=7",
          "{\"samples\":[[0,3.0],[40,4.0]]}" },
        { "/ts/rng/range?filter_by_ts=90&filter_by_ts=20&filter_by_ts=25",
          "{\"samples\":[[20,2.0],[90,9.0]]}" },
        { "/ts/rng/range?from=101", "{\"samples\":[]}" },
        { "/ts/rng/range?from=5&to=5", "{\"samples\":[]}" },
        { "/ts/rng/range?agg=sum&bucket_ms=9223372036854775807", "{\"samples\":[[0,55.0]]}" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r = http(&T, "GET", cases[i].query, NULL, NULL);
        if (r.status != 200 || strcmp(r.body, cases[i].want) != 0)
            fail_msg("%s: %ld %s, want %s", cases[i].query, r.status, r.body, cases[i].want);
        http_free(&r);
    }
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                */
/* ------------------------------------------------------------------------ */

static void test_bad_input(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "PUT", "/ts/bad", "{\"retention_ms\":100000,\"labels\":{\"a\":\"b\"}}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    r = http(&T, "POST", "/ts/bad", "{\"samples\":[[1000,1],[2000,2]]}", NULL);
    assert_status(&r, 200);
    http_free(&r);

    static const struct {
        const char *method, *path, *body;
        long status;
        const char *code, *field;
    } cases[] = {
        /* adds */
        { "POST", "/ts/bad", "{\"samples\":[[3000,\"21\"]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[3000,null]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[3000,\"inf\"]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[3000,NaN]]}", 400, "BAD_REQUEST", NULL },
        { "POST", "/ts/bad", "{\"samples\":[[3000,Infinity]]}", 400, "BAD_REQUEST", NULL },
        { "POST", "/ts/bad", "{\"samples\":[[3000,1e999]]}", 400, "BAD_REQUEST", NULL },
        { "POST", "/ts/bad", "{\"samples\":[[-1,1]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[3000.5,1]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[\"now\",1]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[99999999999999999999,1]]}", 400, "BAD_REQUEST", NULL },
        { "POST", "/ts/bad", "{\"samples\":[[3000]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[3000,1,2]]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[3000,1]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[]}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":{}}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{}", 400, "BAD_REQUEST", "samples" },
        { "POST", "/ts/bad", "{\"samples\":[[3000,1]],\"on_duplicate\":\"ignore\"}", 400, "BAD_REQUEST", "on_duplicate" },
        { "POST", "/ts/bad", "{\"samples\":[[3000,1]],\"colour\":1}", 400, "BAD_REQUEST", "colour" },
        { "POST", "/ts/bad", "{\"samples\":[[3000,1],[1000,5]]}", 409, "EXISTS", "samples" },
        { "POST", "/ts/bad", "not json", 400, "BAD_REQUEST", NULL },
        /* creation */
        { "PUT", "/ts/bad", "{}", 409, "EXISTS", NULL },
        { "PUT", "/ts/bad2", "{\"retention_ms\":-1}", 400, "BAD_REQUEST", "retention_ms" },
        { "PUT", "/ts/bad2", "{\"retention_ms\":1.5}", 400, "BAD_REQUEST", "retention_ms" },
        { "PUT", "/ts/bad2", "{\"duplicate_policy\":\"keep\"}", 400, "BAD_REQUEST", "duplicate_policy" },
        { "PUT", "/ts/bad2", "{\"labels\":[\"a\"]}", 400, "BAD_REQUEST", "labels" },
        { "PUT", "/ts/bad2", "{\"labels\":{\"a\":1}}", 400, "BAD_REQUEST", "labels" },
        { "PUT", "/ts/bad2", "{\"labels\":{\"a\":\"\"}}", 400, "BAD_REQUEST", "labels" },
        { "PUT", "/ts/bad2", "{\"chunk_size\":100}", 400, "BAD_REQUEST", "chunk_size" },
        { "PUT", "/ts/bad2", "{\"chunk_size\":40}", 400, "BAD_REQUEST", "chunk_size" },
        { "PUT", "/ts/bad2", "{\"encoding\":\"zip\"}", 400, "BAD_REQUEST", "encoding" },
        { "PUT", "/ts/bad2", "{\"labels\":{\"a=b\":\"c\"}}", 400, "BAD_REQUEST", "labels" },
        { "PUT", "/ts/bad2", "{\"labels\":{\"a\":\"(x,y)\"}}", 400, "BAD_REQUEST", "labels" },
        { "PATCH", "/ts/missing", "{\"retention_ms\":5}", 404, "NOT_FOUND", NULL },
        { "PATCH", "/ts/bad", "{\"retention_ms\":-5}", 400, "BAD_REQUEST", "retention_ms" },
        { "PATCH", "/ts/bad", "{\"labels\":{\"a\":\"x=y\"}}", 400, "BAD_REQUEST", "labels" },
        { "POST", "/ts/bad/incrby", "{}", 400, "BAD_REQUEST", "by" },
        { "POST", "/ts/bad/incrby", "{\"by\":1,\"timestamp\":1500}", 400, "BAD_REQUEST", "timestamp" },
        { "POST", "/ts/bad/incrby", "{\"by\":1,\"timestamp\":-1}", 400, "BAD_REQUEST", "timestamp" },
        { "POST", "/ts/bad/decrby", "{\"by\":\"x\"}", 400, "BAD_REQUEST", "by" },
        { "POST", "/ts/bad/rules", "{\"dest\":\"bad\",\"agg\":\"avg\",\"bucket_ms\":10}", 400, "BAD_REQUEST", "dest" },
        { "POST", "/ts/bad/rules", "{\"dest\":\"nope\",\"agg\":\"avg\",\"bucket_ms\":10}", 404, "NOT_FOUND", NULL },
        { "POST", "/ts/missing/rules", "{\"dest\":\"bad\",\"agg\":\"avg\",\"bucket_ms\":10}", 404, "NOT_FOUND", NULL },
        { "POST", "/ts/bad/rules", "{\"dest\":\"x\",\"agg\":\"median\",\"bucket_ms\":10}", 400, "BAD_REQUEST", "agg" },
        { "POST", "/ts/bad/rules", "{\"dest\":\"x\",\"agg\":\"avg\",\"bucket_ms\":0}", 400, "BAD_REQUEST", "bucket_ms" },
        { "POST", "/ts/bad/rules", "{\"dest\":\"x\",\"agg\":\"avg\"}", 400, "BAD_REQUEST", "bucket_ms" },
        { "DELETE", "/ts/bad/rules?dest=x", NULL, 404, "NOT_FOUND", "dest" },
        { "DELETE", "/ts/bad/rules", NULL, 400, "BAD_REQUEST", "dest" },
        { "POST", "/ts/bad2", "{\"samples\":[[1,1]],\"retention_ms\":-5}", 400, "BAD_REQUEST", "retention_ms" },
        { "POST", "/ts/bad2", "{\"samples\":[[1,1],[1,2]]}", 409, "EXISTS", "samples" },
        /* queries */
        { "GET", "/ts/bad/range?from=-5", NULL, 400, "BAD_REQUEST", "from" },
        { "GET", "/ts/bad/range?to=abc", NULL, 400, "BAD_REQUEST", "to" },
        { "GET", "/ts/bad/range?to=99999999999999999999", NULL, 400, "BAD_REQUEST", "to" },
        { "GET", "/ts/bad/range?agg=avg", NULL, 400, "BAD_REQUEST", "bucket_ms" },
        { "GET", "/ts/bad/range?bucket_ms=10", NULL, 400, "BAD_REQUEST", "bucket_ms" },
        { "GET", "/ts/bad/range?agg=avg&bucket_ms=0", NULL, 400, "BAD_REQUEST", "bucket_ms" },
        { "GET", "/ts/bad/range?agg=avg&bucket_ms=-10", NULL, 400, "BAD_REQUEST", "bucket_ms" },
        { "GET", "/ts/bad/range?agg=median&bucket_ms=10", NULL, 400, "BAD_REQUEST", "agg" },
        { "GET", "/ts/bad/range?empty=true", NULL, 400, "BAD_REQUEST", "empty" },
        { "GET", "/ts/bad/range?agg=sum&bucket_ms=10&empty=maybe", NULL, 400, "BAD_REQUEST", "empty" },
        { "GET", "/ts/bad/range?latest=yes", NULL, 400, "BAD_REQUEST", "latest" },
        { "GET", "/ts/bad/range?align=start", NULL, 400, "BAD_REQUEST", "align" },
        { "GET", "/ts/bad/range?agg=sum&bucket_ms=10&align=start", NULL, 400, "BAD_REQUEST", "align" },
        { "GET", "/ts/bad/range?agg=sum&bucket_ms=10&align=end", NULL, 400, "BAD_REQUEST", "align" },
        { "GET", "/ts/bad/range?agg=sum&bucket_ms=10&align=-3", NULL, 400, "BAD_REQUEST", "align" },
        { "GET", "/ts/bad/range?agg=sum&bucket_ms=10&bucket_timestamp=late", NULL, 400, "BAD_REQUEST", "bucket_timestamp" },
        { "GET", "/ts/bad/range?count=0", NULL, 400, "BAD_REQUEST", "count" },
        { "GET", "/ts/bad/range?filter_by_value_min=x", NULL, 400, "BAD_REQUEST", "filter_by_value_min" },
        { "GET", "/ts/bad/range?filter_by_ts=-1", NULL, 400, "BAD_REQUEST", "filter_by_ts" },
        { "GET", "/ts/bad/range?reverse=true", NULL, 400, "BAD_REQUEST", "reverse" },
        { "GET", "/ts/missing/range", NULL, 404, "NOT_FOUND", NULL },
        { "GET", "/ts/missing", NULL, 404, "NOT_FOUND", NULL },
        { "DELETE", "/ts/bad/range?from=10", NULL, 400, "BAD_REQUEST", "to" },
        { "DELETE", "/ts/missing/range?from=-&to=%2B", NULL, 404, "NOT_FOUND", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r = http(&T, cases[i].method, cases[i].path, cases[i].body, NULL);
        if (r.status != cases[i].status)
            fail_msg("case %zu (%s %s %s): expected %ld, got %ld %s", i, cases[i].method, cases[i].path,
                     cases[i].body ? cases[i].body : "", cases[i].status, r.status, r.body);
        assert_error(&r, cases[i].status, cases[i].code);
        if (cases[i].field) {
            const char *f = json_string_value(json_object_get(json_object_get(r.json, "error"), "field"));
            if (!f || strcmp(f, cases[i].field) != 0)
                fail_msg("case %zu (%s): expected field %s in %s", i, cases[i].path, cases[i].field, r.body);
        }
        http_free(&r);
    }
    /* over the batch limit */
    char *big = malloc(10001 * 12 + 32);
    size_t o = (size_t)sprintf(big, "{\"samples\":[");
    for (int i = 0; i < 10001; i++)
        o += (size_t)sprintf(big + o, "%s[%d,1]", i ? "," : "", 5000 + i);
    strcpy(big + o, "]}");
    r = http(&T, "POST", "/ts/bad", big, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    free(big);
    /* older than retention (newest 2000, retention 100000: nothing is; make one) */
    r = http(&T, "POST", "/ts/bad", "{\"samples\":[[500000,1],[1,1]]}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);

    /* none of that changed anything */
    long long n, last;
    info_of("bad", &n, &last);
    assert_int_equal(n, 2);
    assert_int_equal(last, 2000);
    r = http(&T, "GET", "/ts/bad/range", NULL, NULL);
    assert_string_equal(r.body, "{\"samples\":[[1000,1.0],[2000,2.0]]}");
    http_free(&r);
    r = http(&T, "GET", "/keys/bad2", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);

    /* wrong key type both ways */
    r = http(&T, "GET", "/throttle/other?max_burst=1&count_per_period=1&period=60", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    static const char *const wrong[][3] = {
        { "POST", "/ts/other", "{\"samples\":[[1,1]]}" },
        { "GET", "/ts/other", NULL },
        { "GET", "/ts/other/range", NULL },
        { "GET", "/ts/other/revrange", NULL },
        { "DELETE", "/ts/other/range?from=-&to=%2B", NULL },
    };
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        r = http(&T, wrong[i][0], wrong[i][1], wrong[i][2], NULL);
        assert_error(&r, 409, "WRONGTYPE");
        http_free(&r);
    }
    r = http(&T, "PUT", "/ts/other", NULL, NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
    r = http(&T, "POST", "/throttle", "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}", NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
}

static void test_delete_range(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/ts/del", "{\"samples\":[[1,1],[2,2],[3,3],[4,4],[5,5]]}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "DELETE", "/ts/del/range?from=2&to=4", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "deleted"), 3);
    http_free(&r);
    r = http(&T, "DELETE", "/ts/del/range?from=2&to=4", NULL, NULL);
    assert_int_equal(json_int_of(&r, "deleted"), 0);
    http_free(&r);
    r = http(&T, "GET", "/ts/del/range", NULL, NULL);
    assert_string_equal(r.body, "{\"samples\":[[1,1.0],[5,5.0]]}");
    http_free(&r);
    r = http(&T, "DELETE", "/ts/del/range?from=-&to=+", NULL, NULL);   /* '+' arrives as a space */
    assert_int_equal(json_int_of(&r, "deleted"), 2);
    http_free(&r);
    long long n, last;
    info_of("del", &n, &last);
    assert_int_equal(n, 0);
    assert_int_equal(last, -1);
}

/* ------------------------------------------------------------------------ */
/* HTTP against the core library, seeded random                             */
/* ------------------------------------------------------------------------ */

typedef struct got {
    int64_t t[4096];
    double v[4096];
    size_t n;
} got_t;

static bool got_push(void *ud, int64_t t, double v)
{
    got_t *g = ud;
    if (g->n == 4096)
        return false;
    g->t[g->n] = t;
    g->v[g->n++] = v;
    return true;
}

static void test_random_vs_core(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 6);
    ts_t *ref = ts_create(30000, TS_DUP_BLOCK, NULL, 0);
    http_resp_t h = http(&T, "PUT", "/ts/rand", "{\"retention_ms\":30000}", NULL);
    assert_status(&h, 201);
    http_free(&h);
    static got_t got;
    char *body = malloc(200 * 64 + 64);
    int64_t clock = 1700000000000LL;
    ts_sample_t batch[200];
    static const char *const aggs[] = { "avg", "sum", "min", "max", "range", "count", "first", "last",
                                        "std.p", "std.s", "var.p", "var.s" };
    for (int round = 0; round < 150; round++) {
        size_t n = 1 + rng_below(&r, 200);
        size_t o = (size_t)sprintf(body, "{\"samples\":[");
        for (size_t i = 0; i < n; i++) {
            if (rng_below(&r, 5) == 0)
                batch[i].ts = clock - (int64_t)rng_below(&r, 40000);
            else
                batch[i].ts = (clock += 100 + (int64_t)rng_below(&r, 900));
            batch[i].value = rng_below(&r, 3) ? (double)rng_below(&r, 100) / 4 : (rng_double(&r) - 0.5) * 1e9;
            o += (size_t)sprintf(body + o, "%s[%lld,%.17g]", i ? "," : "", (long long)batch[i].ts, batch[i].value);
        }
        const char *pol = rng_below(&r, 3) ? NULL : (const char *[]){ "first", "last", "min", "max", "sum" }[rng_below(&r, 5)];
        ts_policy_t p = TS_DUP_BLOCK;
        if (pol)
            ts_policy_parse(pol, &p);
        o += (size_t)sprintf(body + o, "]%s%s%s}", pol ? ",\"on_duplicate\":\"" : "", pol ? pol : "", pol ? "\"" : "");
        size_t failed;
        core_status_t st = ts_add(ref, batch, n, p, &failed);
        h = http(&T, "POST", "/ts/rand", body, NULL);
        long want = st == CORE_OK ? 200 : st == CORE_DUPLICATE ? 409 : 400;
        if (h.status != want)
            fail_msg("round %d: %ld (%s), core says %d", round, h.status, h.body, st);
        http_free(&h);

        /* a random query */
        ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP };
        char path[512];
        q.reverse = rng_below(&r, 2);
        int pl = snprintf(path, sizeof(path), "/ts/rand/%s?", q.reverse ? "revrange" : "range");
        if (rng_below(&r, 2)) {
            q.from = clock - (int64_t)rng_below(&r, 60000);
            pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "from=%lld&", (long long)q.from);
        } else {
            pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "from=-&");
        }
        unsigned tk = (unsigned)rng_below(&r, 3);
        if (tk == 0) {
            q.to = q.from + (int64_t)rng_below(&r, 60000);
            pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "to=%lld&", (long long)q.to);
        } else {
            pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "to=%s&", tk == 1 ? "%2B" : "+");
        }
        if (rng_below(&r, 3)) {
            size_t a = rng_below(&r, 12);
            ts_agg_parse(aggs[a], &q.agg);
            q.bucket_ms = 1 + (int64_t)rng_below(&r, 20000);
            pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "agg=%s&bucket_ms=%lld&", aggs[a], (long long)q.bucket_ms);
            if (rng_below(&r, 2)) {
                q.align = (int64_t)rng_below(&r, 100000);
                pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "align=%lld&", (long long)q.align);
            } else if (tk == 0 && rng_below(&r, 2)) {
                q.align = q.to;
                pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "align=end&");
            }
            if (rng_below(&r, 3) == 0) {
                q.bucket_ts = (ts_bucket_ts_t)rng_below(&r, 3);
                pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "bucket_timestamp=%s&",
                               (const char *[]){ "start", "end", "mid" }[q.bucket_ts]);
            }
        }
        if (rng_below(&r, 3) == 0) {
            q.count = 1 + rng_below(&r, 30);
            pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "count=%llu&", (unsigned long long)q.count);
        }
        if (rng_below(&r, 4) == 0) {
            q.has_min = true;
            q.min = (double)rng_below(&r, 20);
            pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "filter_by_value_min=%g&", q.min);
        }
        path[pl - 1] = '\0';
        got.n = 0;
        assert_int_equal(ts_range(ref, &q, got_push, &got), CORE_OK);
        h = http(&T, "GET", path, NULL, NULL);
        assert_status(&h, 200);
        json_t *s = samples_of(&h);
        if (json_array_size(s) != got.n)
            fail_msg("round %d %s: %zu results, core %zu", round, path, json_array_size(s), got.n);
        for (size_t i = 0; i < got.n; i++) {
            json_t *v = json_array_get(json_array_get(s, i), 1);
            double hv = json_is_string(v) ? (strcmp(json_string_value(v), "inf") == 0 ? INFINITY : -INFINITY)
                                          : json_number_value(v);
            if (ts_at(s, i) != got.t[i] || (hv != got.v[i] && !(isnan(hv) && isnan(got.v[i]))))
                fail_msg("round %d %s: result %zu [%lld,%.17g], core [%lld,%.17g]", round, path, i,
                         (long long)ts_at(s, i), hv, (long long)got.t[i], got.v[i]);
        }
        http_free(&h);
    }
    free(body);
    ts_free(ref);
}

/* The benchmark's reference (bench/lua/ts_zset_avg.lua on a sorted set, the
 * seed's pattern) gives the same buckets and averages as /ts: the two sides
 * of bench/suite_60_ts.sh compute the same answer. */
static void test_same_answer_as_zset_script(void **state)
{
    (void)state;
    redis_ref_t rr;
    if (!redis_ref_start(&rr))
        skip();
    FILE *f = fopen("bench/lua/ts_zset_avg.lua", "r");
    if (!f) {
        redis_ref_stop(&rr);
        skip();
    }
    static char script[4096];
    size_t sl = fread(script, 1, sizeof(script) - 1, f);
    script[sl] = '\0';
    fclose(f);
    rng_t r;
    rng_seed(&r, 11);
    char *body = malloc(1000 * 48 + 32);
    const char **argv = malloc((2 + 2 * 1000) * sizeof(*argv));
    char(*args)[2][48] = malloc(1000 * sizeof(*args));
    int64_t t0 = 1686697976000LL;
    double v = 21;
    for (int b = 0; b < 5; b++) {
        size_t o = (size_t)sprintf(body, "{\"samples\":[");
        argv[0] = "ZADD";
        argv[1] = "zday";
        for (int i = 0; i < 1000; i++) {
            if (rng_below(&r, 5) == 0)
                v = round((v + (rng_below(&r, 2) ? 0.1 : -0.1)) * 10) / 10;
            long long t = (long long)(t0 + (b * 1000 + i) * 1000LL);
            o += (size_t)sprintf(body + o, "%s[%lld,%.1f]", i ? "," : "", t, v);
            snprintf(args[i][0], 48, "%lld", t);
            snprintf(args[i][1], 48, "%lld:%.1f", t, v);
            argv[2 + 2 * i] = args[i][0];
            argv[3 + 2 * i] = args[i][1];
        }
        strcpy(body + o, "]}");
        http_resp_t h = http(&T, "POST", "/ts/zday", body, NULL);
        assert_status(&h, 200);
        http_free(&h);
        resp_t *x = redis_cmdv(&rr, 2 + 2 * 1000, argv, NULL);
        assert_int_equal(x->integer, 1000);
        resp_free(x);
    }
    static const long long buckets[] = { 60000, 3600000, 7000 };
    for (size_t k = 0; k < 3; k++) {
        char from[24], to[24], bucket[24], path[160];
        snprintf(from, sizeof(from), "%lld", (long long)t0 + 1234);
        snprintf(to, sizeof(to), "%lld", (long long)t0 + 4321000);
        snprintf(bucket, sizeof(bucket), "%lld", buckets[k]);
        resp_t *x = redis_cmd(&rr, "EVAL", script, "1", "zday", from, to, bucket, NULL);
        assert_int_equal(x->kind, RESP_ARRAY);
        snprintf(path, sizeof(path), "/ts/zday/range?from=%s&to=%s&agg=avg&bucket_ms=%s", from, to, bucket);
        http_resp_t h = http(&T, "GET", path, NULL, NULL);
        json_t *s = samples_of(&h);
        assert_int_equal(json_array_size(s), x->n);
        for (size_t i = 0; i < x->n; i++) {
            assert_int_equal(ts_at(s, i), x->elems[i]->elems[0]->integer);
            double want = strtod(x->elems[i]->elems[1]->str, NULL);   /* Lua prints 14 digits */
            assert_true(fabs(val_at(s, i) - want) <= 1e-12 * fabs(want));
        }
        http_free(&h);
        resp_free(x);
    }
    free(body);
    free(argv);
    free(args);
    redis_ref_stop(&rr);
}

/* ------------------------------------------------------------------------ */
/* Compaction rules, NaN, EMPTY, twa, INCRBY, ALTER, through a restart      */
/* ------------------------------------------------------------------------ */

static void expect_body(const char *path, const char *want)
{
    http_resp_t r = http(&T, "GET", path, NULL, NULL);
    assert_status(&r, 200);
    if (strcmp(r.body, want) != 0)
        fail_msg("GET %s: %s, want %s", path, r.body, want);
    http_free(&r);
}

static void post_ok(const char *method, const char *path, const char *body, long status)
{
    http_resp_t r = http(&T, method, path, body, NULL);
    if (r.status != status)
        fail_msg("%s %s %s: %ld %s", method, path, body ? body : "", r.status, r.body);
    http_free(&r);
}

static void test_rules_and_aggregation_details(void **state)
{
    (void)state;
    post_ok("PUT", "/ts/cpu", "{\"labels\":{\"host\":\"a\"}}", 201);
    post_ok("PUT", "/ts/cpu:avg", "{}", 201);
    post_ok("PUT", "/ts/cpu:max", "{\"retention_ms\":100000}", 201);
    post_ok("POST", "/ts/cpu/rules", "{\"dest\":\"cpu:avg\",\"agg\":\"avg\",\"bucket_ms\":10}", 201);
    post_ok("POST", "/ts/cpu/rules", "{\"dest\":\"cpu:max\",\"agg\":\"max\",\"bucket_ms\":10,\"align\":5}", 201);
    /* a second rule into the same destination, a chain, or a loop: refused */
    post_ok("POST", "/ts/cpu/rules", "{\"dest\":\"cpu:avg\",\"agg\":\"sum\",\"bucket_ms\":10}", 409);
    post_ok("PUT", "/ts/cpuB", "{}", 201);
    post_ok("POST", "/ts/cpuB/rules", "{\"dest\":\"cpu:avg\",\"agg\":\"sum\",\"bucket_ms\":10}", 409);
    post_ok("POST", "/ts/cpu:avg/rules", "{\"dest\":\"cpuB\",\"agg\":\"sum\",\"bucket_ms\":10}", 400);
    post_ok("POST", "/ts/cpuB/rules", "{\"dest\":\"cpu\",\"agg\":\"sum\",\"bucket_ms\":10}", 400);

    post_ok("POST", "/ts/cpu", "{\"samples\":[[1,1],[5,3],[12,10],[25,7],[3,2]]}", 200);
    expect_body("/ts/cpu:avg/range", "{\"samples\":[[0,2.0],[10,10.0]]}");
    expect_body("/ts/cpu:avg/range?latest=true", "{\"samples\":[[0,2.0],[10,10.0],[20,7.0]]}");
    expect_body("/ts/cpu:avg/revrange?latest=true&count=1", "{\"samples\":[[20,7.0]]}");
    expect_body("/ts/cpu:max/range", "{\"samples\":[[0,2.0],[5,10.0]]}");
    /* out of order into a closed bucket: recomputed; into the open bucket: seen by latest */
    post_ok("POST", "/ts/cpu", "{\"samples\":[[14,20],[27,\"nan\"],[21,1]]}", 200);
    expect_body("/ts/cpu:avg/range?latest=true", "{\"samples\":[[0,2.0],[10,15.0],[20,4.0]]}");
    /* the NaN is kept, skipped by aggregations but countNaN/countAll */
    expect_body("/ts/cpu/range?from=20", "{\"samples\":[[21,1.0],[25,7.0],[27,\"nan\"]]}");
    expect_body("/ts/cpu/range?agg=countNaN&bucket_ms=100", "{\"samples\":[[0,1.0]]}");
    expect_body("/ts/cpu/range?agg=countAll&bucket_ms=100", "{\"samples\":[[0,8.0]]}");
    expect_body("/ts/cpu/range?agg=count&bucket_ms=100", "{\"samples\":[[0,7.0]]}");
    /* INCRBY refuses a NaN newest value; a later sample closes buckets 20 */
    post_ok("POST", "/ts/cpu/incrby", "{\"by\":1,\"timestamp\":40}", 400);
    post_ok("POST", "/ts/cpu", "{\"samples\":[[40,5]]}", 200);
    post_ok("POST", "/ts/cpu/incrby", "{\"by\":2.5,\"timestamp\":41}", 200);
    post_ok("POST", "/ts/cpu/decrby", "{\"by\":0.5,\"timestamp\":41}", 200);
    expect_body("/ts/cpu/range?from=40", "{\"samples\":[[40,5.0],[41,7.0]]}");
    expect_body("/ts/cpu:avg/range?latest=true", "{\"samples\":[[0,2.0],[10,15.0],[20,4.0],[40,6.0]]}");
    /* EMPTY and twa */
    expect_body("/ts/cpu/range?from=10&to=39&agg=sum&bucket_ms=10&empty=true",
                "{\"samples\":[[10,30.0],[20,8.0],[30,0.0]]}");
    expect_body("/ts/cpu/range?from=30&to=39&agg=last&bucket_ms=5&empty=true",
                "{\"samples\":[[30,7.0],[35,7.0]]}");
    expect_body("/ts/cpu/range?from=30&to=40&agg=twa&bucket_ms=10&empty=true", "{\"samples\":[[30,5.666666666666666],[40,5.0]]}");
    /* from after to: nothing, not an error */
    expect_body("/ts/cpu/range?from=30&to=20", "{\"samples\":[]}");
    /* too many empty buckets */
    post_ok("POST", "/ts/far", "{\"samples\":[[0,1],[5000000,2]]}", 200);
    post_ok("GET", "/ts/far/range?agg=sum&bucket_ms=1&empty=true", NULL, 400);
    expect_body("/ts/far/range?agg=sum&bucket_ms=1&empty=true&count=2", "{\"samples\":[[0,1.0],[1,0.0]]}");
    /* ALTER */
    post_ok("PATCH", "/ts/cpu", "{\"labels\":{\"host\":\"b\",\"dc\":\"x\"},\"duplicate_policy\":\"last\"}", 200);
    post_ok("POST", "/ts/cpu", "{\"samples\":[[41,9]]}", 200);
    http_resp_t r = http(&T, "GET", "/ts/cpu", NULL, NULL);
    assert_status(&r, 200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r.json, "labels"), "dc")), "x");
    assert_string_equal(json_string_value(json_object_get(r.json, "duplicate_policy")), "last");
    assert_int_equal(json_array_size(json_object_get(r.json, "rules")), 2);
    http_free(&r);
    r = http(&T, "GET", "/ts/cpu:avg", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "source")), "cpu");
    http_free(&r);

    /* kill -9 (journal replay), then SIGTERM (snapshot): the same answers */
    static const char *const paths[] = { "/ts/cpu/range", "/ts/cpu:avg/range?latest=true", "/ts/cpu:max/range",
                                         "/ts/cpu:max/range?latest=true" };
    enum { NP = sizeof(paths) / sizeof(paths[0]) };
    char *want[NP];
    for (size_t i = 0; i < NP; i++) {
        r = http(&T, "GET", paths[i], NULL, NULL);
        want[i] = strdup(r.body);
        http_free(&r);
    }
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", T.dir);
    for (int round = 0; round < 2; round++) {
        if (round == 0)
            tally_kill(&T);
        else
            assert_int_equal(tally_stop(&T), 0);
        unlink(T.log);
        tally_start(&T, dir, NULL);
        T.own_dir = true;
        for (size_t i = 0; i < NP; i++)
            expect_body(paths[i], want[i]);
        r = http(&T, "GET", "/ts/cpu", NULL, NULL);
        assert_int_equal(json_array_size(json_object_get(r.json, "rules")), 2);
        assert_string_equal(json_string_value(json_object_get(json_object_get(r.json, "labels"), "dc")), "x");
        http_free(&r);
        r = http(&T, "GET", "/ts/cpu:max", NULL, NULL);
        assert_string_equal(json_string_value(json_object_get(r.json, "source")), "cpu");
        http_free(&r);
    }
    /* the rules keep working after the restart, and go with DELETE */
    post_ok("POST", "/ts/cpu", "{\"samples\":[[55,1]]}", 200);
    expect_body("/ts/cpu:avg/range?from=40", "{\"samples\":[[40,7.0]]}");
    post_ok("DELETE", "/ts/cpu/rules?dest=cpu:avg", NULL, 200);
    post_ok("POST", "/ts/cpu", "{\"samples\":[[65,1]]}", 200);
    expect_body("/ts/cpu:avg/range?from=40", "{\"samples\":[[40,7.0]]}");
    expect_body("/ts/cpu:max/range?from=30", "{\"samples\":[[35,9.0],[55,1.0]]}");
    /* a deleted destination drops its rule at the next write */
    post_ok("DELETE", "/keys/cpu:max", NULL, 200);
    post_ok("POST", "/ts/cpu", "{\"samples\":[[75,1]]}", 200);
    r = http(&T, "GET", "/ts/cpu", NULL, NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "rules")), 0);
    http_free(&r);
    for (size_t i = 0; i < NP; i++)
        free(want[i]);
}

/* ------------------------------------------------------------------------ */
/* Percentiles per bucket                                                   */
/* ------------------------------------------------------------------------ */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* agg=pNN against the exact quantile of seeded data (interpolated between
 * closest ranks), per bucket, forward and reverse, and as a rule. */
static void test_percentiles(void **state)
{
    (void)state;
    enum { N = 3000, B = 1000 };   /* 3 buckets of 1000 samples */
    rng_t r;
    rng_seed(&r, 1919);
    static double v[N];
    char *body = malloc(N * 40 + 64);
    size_t o = (size_t)sprintf(body, "{\"samples\":[");
    for (int i = 0; i < N; i++) {
        v[i] = round(rng_double(&r) * rng_double(&r) * 1e6) / 100;   /* skewed */
        o += (size_t)sprintf(body + o, "%s[%d,%.17g]", i ? "," : "", i, v[i]);
    }
    strcpy(body + o, "]}");
    post_ok("PUT", "/ts/lat", "{}", 201);
    post_ok("PUT", "/ts/lat:p99", "{}", 201);
    post_ok("POST", "/ts/lat/rules", "{\"dest\":\"lat:p99\",\"agg\":\"p99\",\"bucket_ms\":1000}", 201);
    post_ok("POST", "/ts/lat", body, 200);
    free(body);
    static const double qs[] = { 0, 50, 90, 99, 99.9, 100 };
    for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
        for (int rev = 0; rev < 2; rev++) {
            http_resp_t x = httpf(&T, "GET", NULL, "/ts/lat/%s?agg=p%g&bucket_ms=%d", rev ? "revrange" : "range", qs[k], B);
            assert_status(&x, 200);
            json_t *smp = samples_of(&x);
            assert_int_equal(json_array_size(smp), N / B);
            for (int b = 0; b < N / B; b++) {
                double sorted[B];
                memcpy(sorted, v + b * B, sizeof(sorted));
                qsort(sorted, B, sizeof(double), cmp_dbl);
                double h = (B - 1) * (qs[k] / 100);
                size_t lo = (size_t)floor(h);
                double want = lo + 1 >= B ? sorted[B - 1] : sorted[lo] + (h - floor(h)) * (sorted[lo + 1] - sorted[lo]);
                size_t at = rev ? (size_t)(N / B - 1 - b) : (size_t)b;
                assert_int_equal(ts_at(smp, at), b * B);
                if (fabs(val_at(smp, at) - want) > 1e-9 * fmax(1, fabs(want)))
                    fail_msg("p%g bucket %d: %.17g, exact %.17g", qs[k], b, val_at(smp, at), want);
            }
            http_free(&x);
        }
    }
    /* the rule wrote the closed buckets' p99; the open one is latest */
    http_resp_t x = http(&T, "GET", "/ts/lat:p99/range?latest=true", NULL, NULL);
    http_resp_t y = http(&T, "GET", "/ts/lat/range?agg=p99&bucket_ms=1000", NULL, NULL);
    assert_string_equal(x.body, y.body);
    http_free(&x);
    http_free(&y);
    x = http(&T, "GET", "/ts/lat", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(x.json, "rules"), 0), "agg")),
                        "p99");
    http_free(&x);
    x = http(&T, "GET", "/ts/lat/range?agg=p101&bucket_ms=10", NULL, NULL);
    assert_error(&x, 400, "BAD_REQUEST");
    http_free(&x);
}

/* ------------------------------------------------------------------------ */
/* Queries by labels                                                        */
/* ------------------------------------------------------------------------ */

/* Whether labels (room, kind: NULL = absent) pass one filter, by brute force. */
static bool lq_model(const char *f, const char *room, const char *kind)
{
    const char *const names[] = { "room", "kind" }, *const values[] = { room, kind };
    return ts_filter_model(f, names, values, 2);
}

/* Random filter sets over the series lq:00.. (those with present[i]):
 * /mts/index against the brute force, /mts/range against /range. */
static void lq_check(rng_t *rr, const char *const *room, const char *const *kind, const bool *present, int N)
{
    rng_t r = *rr;
    static const char *const filters[] = { "room=hall",        "room=(hall,attic)", "kind=temp",  "kind!=temp",
                                           "room!=(hall,kitchen)", "kind=",          "room!=",     "kind=(hum)",
                                           "room=kitchen" };
    enum { NF = sizeof(filters) / sizeof(filters[0]) };
    for (int round = 0; round < 30; round++) {
        const char *f[3];
        size_t nf = 1 + rng_below(&r, 3);
        char q[512];
        int o = 0;
        bool positive = false;
        for (size_t k = 0; k < nf; k++) {
            f[k] = filters[rng_below(&r, NF)];
            positive |= strchr(f[k], '=')[1] != '\0' && !strstr(f[k], "!=");
            char enc[64];
            size_t e = 0;
            for (const char *c = f[k]; *c; c++)
                e += (size_t)snprintf(enc + e, sizeof(enc) - e, *c == '=' ? "%%3D" : *c == '!' ? "%%21" : "%c", *c);
            o += snprintf(q + o, sizeof(q) - (size_t)o, "%sfilter=%s", k ? "&" : "", enc);
        }
        http_resp_t x = httpf(&T, "GET", NULL, "/mts/index?%s", q);
        if (!positive) {
            assert_error(&x, 400, "BAD_REQUEST");
            http_free(&x);
            continue;
        }
        assert_status(&x, 200);
        json_t *keys = json_object_get(x.json, "keys");
        size_t at = 0;
        for (int i = 0; i < N; i++) {
            bool want = present[i];
            for (size_t k = 0; k < nf; k++)
                want &= lq_model(f[k], room[i], kind[i]);
            if (!want)
                continue;
            char name[16];
            snprintf(name, sizeof(name), "lq:%02d", i);
            const char *got = json_string_value(json_array_get(keys, at++));
            if (!got || strcmp(got, name) != 0)
                fail_msg("filters %s: key %zu is %s, model %s (%s)", q, at - 1, got ? got : "none", name, x.body);
        }
        /* other keys of the test may match as well: only lq:* are modelled */
        for (size_t k = at; k < json_array_size(keys); k++)
            assert_true(strncmp(json_string_value(json_array_get(keys, k)), "lq:", 3) != 0);
        /* MRANGE answers each selected series as /range does */
        http_resp_t mr = httpf(&T, "GET", NULL, "/mts/range?%s&agg=sum&bucket_ms=100&withlabels=true", q);
        assert_status(&mr, 200);
        json_t *series = json_object_get(mr.json, "series");
        assert_int_equal(json_array_size(series), json_array_size(keys));
        for (size_t k = 0; k < json_array_size(series); k++) {
            json_t *one = json_array_get(series, k);
            const char *key = json_string_value(json_object_get(one, "key"));
            assert_string_equal(key, json_string_value(json_array_get(keys, k)));
            http_resp_t single = httpf(&T, "GET", NULL, "/ts/%s/range?agg=sum&bucket_ms=100", key);
            char *mine = json_dumps(json_object_get(one, "samples"), JSON_COMPACT);
            char *theirs = json_dumps(json_object_get(single.json, "samples"), JSON_COMPACT);
            assert_string_equal(mine, theirs);
            free(mine);
            free(theirs);
            http_free(&single);
            assert_true(json_is_object(json_object_get(one, "labels")));
        }
        http_free(&mr);
        http_free(&x);
    }
    *rr = r;
}

static void test_label_queries(void **state)
{
    (void)state;
    static const char *const rooms[] = { "hall", "kitchen", "attic", NULL };
    static const char *const kinds[] = { "temp", "hum", NULL };
    enum { N = 40 };
    const char *room[N], *kind[N];
    rng_t r;
    rng_seed(&r, 19);
    for (int i = 0; i < N; i++) {
        room[i] = rooms[rng_below(&r, 4)];
        kind[i] = kinds[rng_below(&r, 3)];
        char body[256];
        int o = snprintf(body, sizeof(body), "{\"labels\":{");
        if (room[i])
            o += snprintf(body + o, sizeof(body) - (size_t)o, "\"room\":\"%s\"%s", room[i], kind[i] ? "," : "");
        if (kind[i])
            o += snprintf(body + o, sizeof(body) - (size_t)o, "\"kind\":\"%s\"", kind[i]);
        snprintf(body + o, sizeof(body) - (size_t)o, "},\"samples\":[[%d,%d],[%d,%d],[1000,%d]]}", 10 + i % 3, i,
                 500 + i % 7, i * 2, i % 5);
        http_resp_t a = httpf(&T, "POST", body, "/ts/lq:%02d", i);
        assert_status(&a, 200);
        http_free(&a);
    }
    /* a key of another type never matches */
    http_resp_t a = http(&T, "POST", "/counter/lq:counter", "{\"by\":1}", NULL);
    http_free(&a);
    bool present[N];
    for (int i = 0; i < N; i++)
        present[i] = true;
    lq_check(&r, room, kind, present, N);
    /* the index under deletion, expiry, a key taken by another type, labels
     * changed, and a restart from the snapshot (then a scan rebuilds it) */
    http_resp_t d = http(&T, "DELETE", "/keys/lq:00", NULL, NULL);
    assert_status(&d, 200);
    http_free(&d);
    present[0] = false;
    d = http(&T, "PUT", "/keys/lq:01/ttl", "{\"ttl_ms\":1}", NULL);
    assert_status(&d, 200);
    http_free(&d);
    present[1] = false;
    d = http(&T, "DELETE", "/keys/lq:03", NULL, NULL);
    http_free(&d);
    d = http(&T, "POST", "/counter/lq:03", "{\"by\":1}", NULL);
    http_free(&d);
    present[3] = false;
    d = http(&T, "PATCH", "/ts/lq:02", "{\"labels\":{\"room\":\"attic\",\"kind\":\"temp\"}}", NULL);
    assert_status(&d, 200);
    http_free(&d);
    room[2] = "attic";
    kind[2] = "temp";
    usleep(20000);
    lq_check(&r, room, kind, present, N);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", T.dir);
    assert_int_equal(tally_stop(&T), 0);
    unlink(T.log);
    tally_start(&T, dir, NULL);
    T.own_dir = true;
    lq_check(&r, room, kind, present, N);   /* scans (the loaded series are not indexed yet) */
    lq_check(&r, room, kind, present, N);   /* from the index */
    /* GROUPBY room REDUCE sum over kind=temp, against the sums by hand */
    http_resp_t g = http(&T, "GET", "/mts/range?filter=kind%3Dtemp&groupby=room&reduce=sum&withlabels=true", NULL, NULL);
    assert_status(&g, 200);
    json_t *groups = json_object_get(g.json, "series");
    for (size_t k = 0; k < json_array_size(groups); k++) {
        json_t *one = json_array_get(groups, k);
        const char *rm = json_string_value(json_object_get(json_object_get(one, "labels"), "room"));
        json_t *smp = json_object_get(one, "samples");
        for (size_t j = 0; j < json_array_size(smp); j++) {
            int64_t t = ts_at(smp, j);
            double sum = 0;
            for (int i = 0; i < N; i++)
                if (kind[i] && strcmp(kind[i], "temp") == 0 && room[i] && strcmp(room[i], rm) == 0) {
                    if (t == 10 + i % 3)
                        sum += i;
                    if (t == 500 + i % 7)
                        sum += i * 2;
                    if (t == 1000)
                        sum += i % 5;
                }
            if (val_at(smp, j) != sum)
                fail_msg("group %s at %lld: %g, by hand %g", rm, (long long)t, val_at(smp, j), sum);
        }
    }
    http_free(&g);
    /* MGET: the newest sample of each, selected labels (null when absent) */
    g = http(&T, "GET", "/mts/get?filter=kind%3Dhum&selected_labels=room", NULL, NULL);
    assert_status(&g, 200);
    json_t *ss = json_object_get(g.json, "series");
    assert_true(json_array_size(ss) > 0);
    for (size_t k = 0; k < json_array_size(ss); k++) {
        json_t *one = json_array_get(ss, k);
        int i = atoi(json_string_value(json_object_get(one, "key")) + 3);
        json_t *rv = json_object_get(json_object_get(one, "labels"), "room");
        assert_true(room[i] ? strcmp(json_string_value(rv), room[i]) == 0 : json_is_null(rv));
        json_t *sample = json_object_get(one, "sample");
        assert_int_equal(json_integer_value(json_array_get(sample, 0)), 1000);
        assert_true(json_number_value(json_array_get(sample, 1)) == i % 5);
    }
    http_free(&g);
    /* refused: no filter, a bad filter, groupby without reduce */
    static const char *const bad[] = { "/mts/index", "/mts/index?filter=room", "/mts/range?filter=room%3Dhall&groupby=room",
                                       "/mts/range?filter=room%3Dhall&groupby=room&reduce=first",
                                       "/mts/get?filter=room%3Dhall&withlabels=true&selected_labels=a",
                                       "/mts/range?filter=room%3Dhall&colour=red" };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        g = http(&T, "GET", bad[k], NULL, NULL);
        if (g.status != 400)
            fail_msg("%s: %ld %s", bad[k], g.status, g.body);
        http_free(&g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_temperatures),
        cmocka_unit_test(test_duplicate_policies),
        cmocka_unit_test(test_retention),
        cmocka_unit_test(test_range_options),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_delete_range),
        cmocka_unit_test(test_random_vs_core),
        cmocka_unit_test(test_same_answer_as_zset_script),
        cmocka_unit_test(test_star_and_persistence),
        cmocka_unit_test(test_rules_and_aggregation_details),
        cmocka_unit_test(test_percentiles),
        cmocka_unit_test(test_label_queries),
    };
    return cmocka_run_group_tests_name("ts (integration)", tests, setup, teardown);
}
