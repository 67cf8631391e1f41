/*
 * it_ts_upstream.c - RedisTimeSeries's own tests (tests/flow of
 * github.com/RedisTimeSeries/RedisTimeSeries), case by case, through /ts:
 * the cases issue 37 found answered differently, each citing the upstream
 * file and test it comes from, with upstream's answers as the expected ones
 * (NaN printed "nan", numbers as tally prints them).  What stays different
 * on purpose is in the README's "What differs from Redis/RedisBloom" table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

/* Fails unless `method path body` answers `status` and, when given, exactly `want`. */
static void expect(const char *method, const char *path, const char *body, long status, const char *want)
{
    http_expect(&T, method, path, body, status, want);
}

static void get(const char *path, const char *want) { expect("GET", path, NULL, 200, want); }

/* One member of GET /ts/{key}, compacted (json_dumps). */
static char *info_field(const char *key, const char *field)
{
    char path[256];
    snprintf(path, sizeof(path), "/ts/%s", key);
    json_t *j = http_get_json(&T, path);
    char *s = json_dumps(json_object_get(j, field), JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(j);
    return s;
}

static void expect_info(const char *key, const char *field, const char *want)
{
    char *got = info_field(key, field);
    if (strcmp(got, want) != 0)
        fail_msg("GET /ts/%s: %s is %s, want %s", key, field, got, want);
    free(got);
}

/* TS.ADD key t t for each t, one request each (as the upstream tests add). */
static void add_each(const char *key, const int *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char path[256], body[64];
        snprintf(path, sizeof(path), "/ts/%s", key);
        snprintf(body, sizeof(body), "{\"samples\":[[%d,%d]]}", t[i], t[i]);
        expect("POST", path, body, 200, NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* Item 1: TS.DEL before the retention window of a series with rules        */
/* ------------------------------------------------------------------------ */

static void test_del_beyond_retention_with_rules(void **state)
{
    (void)state;
    /* test_ts_delete.py test_del_outside_retention_period */
    expect("PUT", "/ts/t1", "{\"retention_ms\":20}", 201, NULL);
    expect("PUT", "/ts/t2", "{\"retention_ms\":10}", 201, NULL);
    expect("POST", "/ts/t1/rules", "{\"dest\":\"t2\",\"agg\":\"sum\",\"bucket_ms\":10}", 201, NULL);
    add_each("t1", (const int[]){ 13, 17, 22, 31 }, 4);
    expect("DELETE", "/ts/t1/range?from=5&to=25", NULL, 400, NULL);
    expect("DELETE", "/ts/t1/range?from=5&to=25", NULL, 400, NULL);

    /* the data-loss case: bucket [10,20) of t4 holds 13 + 19; 13 is past
     * t3's retention (newest 30 - 15), so deleting 19..25 would rebuild the
     * bucket from nothing and lose it */
    expect("PUT", "/ts/t3", "{\"retention_ms\":15}", 201, NULL);
    expect("PUT", "/ts/t4", "{\"retention_ms\":10}", 201, NULL);
    expect("POST", "/ts/t3/rules", "{\"dest\":\"t4\",\"agg\":\"sum\",\"bucket_ms\":10}", 201, NULL);
    add_each("t3", (const int[]){ 13, 19, 22, 30 }, 4);
    get("/ts/t4/range", "{\"samples\":[[10,32.0],[20,22.0]]}");
    http_resp_t r = http(&T, "DELETE", "/ts/t3/range?from=19&to=25", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    if (!strstr(r.body, "retention"))
        fail_msg("the refusal does not say why: %s", r.body);
    http_free(&r);
    get("/ts/t4/range", "{\"samples\":[[10,32.0],[20,22.0]]}");
    get("/ts/t3/range", "{\"samples\":[[19,19.0],[22,22.0],[30,30.0]]}");

    /* without retention the same deletion goes, with its buckets */
    expect("PUT", "/ts/t5", NULL, 201, NULL);
    expect("PUT", "/ts/t6", NULL, 201, NULL);
    expect("POST", "/ts/t5/rules", "{\"dest\":\"t6\",\"agg\":\"sum\",\"bucket_ms\":10}", 201, NULL);
    add_each("t5", (const int[]){ 13, 19, 22, 30 }, 4);
    expect("DELETE", "/ts/t5/range?from=5&to=30", NULL, 200, "{\"deleted\":4}");
    get("/ts/t6/range?from=5&to=30", "{\"samples\":[]}");

    /* test_ts_delete.py test_del_retention_with_rules: the start inside the
     * window, its bucket's start outside */
    expect("PUT", "/ts/k4", "{\"retention_ms\":25}", 201, NULL);
    expect("PUT", "/ts/k5", NULL, 201, NULL);
    expect("POST", "/ts/k4/rules", "{\"dest\":\"k5\",\"agg\":\"avg\",\"bucket_ms\":10}", 201, NULL);
    char body[1024];
    size_t u = (size_t)snprintf(body, sizeof(body), "{\"samples\":[");
    for (int i = 0; i < 30; i++)
        u += (size_t)snprintf(body + u, sizeof(body) - u, "%s[%d,1]", i ? "," : "", i);
    snprintf(body + u, sizeof(body) - u, "]}");
    expect("POST", "/ts/k4", body, 200, NULL);
    expect("DELETE", "/ts/k4/range?from=9&to=10", NULL, 400, NULL);
    /* without a live rule the retention does not matter: the destination
     * deleted, the same deletion goes */
    expect("DELETE", "/keys/k5", NULL, 200, NULL);
    expect("DELETE", "/ts/k4/range?from=9&to=10", NULL, 200, "{\"deleted\":2}");

    /* refused before a restart, still refused after replay; the accepted
     * deletion replays as it was */
    tally_kill(&T);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", T.dir);
    tally_start(&T, dir, NULL);
    T.own_dir = true;
    get("/ts/t4/range", "{\"samples\":[[10,32.0],[20,22.0]]}");
    get("/ts/k4/range?from=8&to=11", "{\"samples\":[[8,1.0],[11,1.0]]}");
    expect("DELETE", "/ts/t3/range?from=19&to=25", NULL, 400, NULL);
}

/* ------------------------------------------------------------------------ */
/* Item 4: parsing                                                          */
/* ------------------------------------------------------------------------ */

static void test_parsing(void **state)
{
    (void)state;
    /* test_ts_add.py test_ts_add_nan: every spelling of NaN is stored */
    expect("POST", "/ts/nan_key",
           "{\"samples\":[[1,\"nan\"],[2,\"NaN\"],[3,\"NAN\"],[4,\"-nan\"],[5,\"-NaN\"],[6,\"-NAN\"],[7,\"+nan\"]]}", 200,
           NULL);
    get("/ts/nan_key/range",
        "{\"samples\":[[1,\"nan\"],[2,\"nan\"],[3,\"nan\"],[4,\"nan\"],[5,\"nan\"],[6,\"nan\"],[7,\"nan\"]]}");
    expect("POST", "/ts/nan_key", "{\"samples\":[[8,\"-nann\"]]}", 400, NULL);
    expect("POST", "/ts/nan_key", "{\"samples\":[[8,\"--nan\"]]}", 400, NULL);

    /* test_ts_delete.py test_bad_del: from after to deletes nothing */
    expect("POST", "/ts/test_key", "{\"samples\":[[120,1],[140,5]]}", 200, NULL);
    expect("DELETE", "/ts/test_key/range?from=200&to=100", NULL, 200, "{\"deleted\":0}");
    expect("DELETE", "/ts/test_key/range?from=100&to=300", NULL, 200, "{\"deleted\":2}");

    /* test_ts_queryindex.py test_label_index: class=() matches nothing */
    expect("PUT", "/ts/tester1", "{\"labels\":{\"name\":\"bob\",\"class\":\"middle\",\"generation\":\"x\"}}", 201, NULL);
    expect("PUT", "/ts/tester2", "{\"labels\":{\"name\":\"rudy\",\"class\":\"junior\",\"generation\":\"x\"}}", 201,
           NULL);
    get("/mts/index?filter=generation%3Dx&filter=class%3D()", "{\"keys\":[]}");
    get("/mts/index?filter=class%3D()", "{\"keys\":[]}");
    get("/mts/index?filter=generation%3Dx&filter=class!%3D()", "{\"keys\":[\"tester1\",\"tester2\"]}");
    get("/mts/index?filter=generation%3Dx&filter=class%3D(middle,junior)", "{\"keys\":[\"tester1\",\"tester2\"]}");
    expect("GET", "/mts/index?filter=generation%3Dx&filter=class%3D(", NULL, 400, NULL);
    expect("GET", "/mts/index?filter=generation%3Dx&filter=class%3D(ab", NULL, 400, NULL);
}

/* ------------------------------------------------------------------------ */
/* Item 5: a deleted destination drops its rule at once                     */
/* ------------------------------------------------------------------------ */

static void test_deleted_links(void **state)
{
    (void)state;
    /* test_ts_createrule.py test_delete_key */
    expect("PUT", "/ts/tester", NULL, 201, NULL);
    expect("PUT", "/ts/tester_agg", NULL, 201, NULL);
    expect("POST", "/ts/tester/rules", "{\"dest\":\"tester_agg\",\"agg\":\"avg\",\"bucket_ms\":10}", 201, NULL);
    expect("DELETE", "/keys/tester_agg", NULL, 200, NULL);
    expect_info("tester", "rules", "[]");
    expect("PUT", "/ts/tester_agg", NULL, 201, NULL);
    expect("POST", "/ts/tester/rules", "{\"dest\":\"tester_agg\",\"agg\":\"avg\",\"bucket_ms\":11}", 201, NULL);
    expect_info("tester", "rules", "[{\"dest\":\"tester_agg\",\"agg\":\"avg\",\"bucket_ms\":11,\"align\":0}]");
    expect("DELETE", "/keys/tester", NULL, 200, NULL);
    expect_info("tester_agg", "source", "null");
    expect("PUT", "/ts/tester", NULL, 201, NULL);
    expect("POST", "/ts/tester/rules", "{\"dest\":\"tester_agg\",\"agg\":\"avg\",\"bucket_ms\":12}", 201, NULL);
    expect_info("tester", "rules", "[{\"dest\":\"tester_agg\",\"agg\":\"avg\",\"bucket_ms\":12,\"align\":0}]");
    expect_info("tester_agg", "source", "\"tester\"");
    /* the rule works; TS.DELETERULE of a rule whose destination went is an
     * unknown rule (test_ts_deleterule.py) */
    expect("POST", "/ts/tester", "{\"samples\":[[1,1],[3,3],[12,0]]}", 200, NULL);
    get("/ts/tester_agg/range", "{\"samples\":[[0,2.0]]}");
    expect("DELETE", "/keys/tester_agg", NULL, 200, NULL);
    expect("DELETE", "/ts/tester/rules?dest=tester_agg", NULL, 404, NULL);
    /* a series whose only rule went stale can become a destination */
    expect("PUT", "/ts/other", NULL, 201, NULL);
    expect("POST", "/ts/other/rules", "{\"dest\":\"tester\",\"agg\":\"max\",\"bucket_ms\":5}", 201, NULL);
    expect_info("tester", "source", "\"other\"");
}

/* ------------------------------------------------------------------------ */
/* Item 3: GROUPBY ... REDUCE                                               */
/* ------------------------------------------------------------------------ */

static void test_groupby_reduce(void **state)
{
    (void)state;
    /* test_ts_mrange_groupby.py test_groupby_reduce */
    expect("POST", "/ts/s1", "{\"samples\":[[1,100]],\"labels\":{\"metric_family\":\"cpu\",\"metric_name\":\"user\"}}",
           200, NULL);
    expect("POST", "/ts/s2", "{\"samples\":[[2,55]],\"labels\":{\"metric_family\":\"cpu\",\"metric_name\":\"user\"}}",
           200, NULL);
    expect("POST", "/ts/s3", "{\"samples\":[[2,40]],\"labels\":{\"metric_family\":\"cpu\",\"metric_name\":\"system\"}}",
           200, NULL);
    expect("POST", "/ts/s1", "{\"samples\":[[2,95]]}", 200, NULL);
    get("/mts/range?withlabels=true&filter=metric_family%3Dcpu&groupby=metric_name&reduce=max",
        "{\"series\":[{\"key\":\"metric_name=system\",\"labels\":{\"metric_name\":\"system\",\"__reducer__\":"
        "\"max\",\"__source__\":\"s3\"},\"samples\":[[2,40.0]]},{\"key\":\"metric_name=user\",\"labels\":{"
        "\"metric_name\":\"user\",\"__reducer__\":\"max\",\"__source__\":\"s1,s2\"},\"samples\":[[1,100.0],[2,95.0]]}]}");
    /* COUNT 1 is the group's first value, not each series' */
    get("/mts/range?count=1&filter=metric_family%3Dcpu&groupby=metric_name&reduce=min",
        "{\"series\":[{\"key\":\"metric_name=system\",\"samples\":[[2,40.0]]},{\"key\":\"metric_name=user\","
        "\"samples\":[[1,100.0]]}]}");
    get("/mts/revrange?count=1&filter=metric_family%3Dcpu&groupby=metric_name&reduce=min",
        "{\"series\":[{\"key\":\"metric_name=system\",\"samples\":[[2,40.0]]},{\"key\":\"metric_name=user\","
        "\"samples\":[[2,55.0]]}]}");
    get("/mts/range?filter=metric_family%3Dcpu&groupby=metric_name&reduce=count&selected_labels=__reducer__",
        "{\"series\":[{\"key\":\"metric_name=system\",\"labels\":{\"__reducer__\":\"count\"},\"samples\":[[2,1.0]]},"
        "{\"key\":\"metric_name=user\",\"labels\":{\"__reducer__\":\"count\"},\"samples\":[[1,1.0],[2,2.0]]}]}");
    /* test_groupby_reduce_empty: a label no series has, no groups */
    get("/mts/range?withlabels=true&filter=metric_family%3Dcpu&groupby=labelX&reduce=max", "{\"series\":[]}");

    /* test_ts_mrange_groupby.py test_groupby_reduce_count_with_nan: the count
     * family answers 0 where it counts nothing */
    expect("POST", "/ts/stock:A",
           "{\"samples\":[[1000,100],[1010,110],[1020,120],[1030,\"NaN\"]],\"labels\":{\"type\":\"stock\",\"name\":\"A\"}}",
           200, NULL);
    expect("POST", "/ts/stock:B",
           "{\"samples\":[[1000,120],[1010,110],[1020,\"NaN\"],[1030,\"NaN\"]],\"labels\":{\"type\":\"stock\",\"name\":"
           "\"B\"}}",
           200, NULL);
    get("/mts/range?filter=type%3Dstock&groupby=type&reduce=count",
        "{\"series\":[{\"key\":\"type=stock\",\"samples\":[[1000,2.0],[1010,2.0],[1020,1.0],[1030,0.0]]}]}");
    get("/mts/range?filter=type%3Dstock&groupby=type&reduce=countNaN",
        "{\"series\":[{\"key\":\"type=stock\",\"samples\":[[1000,0.0],[1010,0.0],[1020,1.0],[1030,2.0]]}]}");
    get("/mts/range?filter=type%3Dstock&groupby=type&reduce=countAll",
        "{\"series\":[{\"key\":\"type=stock\",\"samples\":[[1000,2.0],[1010,2.0],[1020,2.0],[1030,2.0]]}]}");
    get("/mts/range?filter=type%3Dstock&groupby=type&reduce=sum",
        "{\"series\":[{\"key\":\"type=stock\",\"samples\":[[1000,220.0],[1010,220.0],[1020,120.0],[1030,\"nan\"]]}]}");

    /* test_ts_mrange_groupby.py test_bucket_timestamp: no labels asked, none shown */
    expect("PUT", "/ts/g1", "{\"labels\":{\"metric_family\":\"gpu\",\"metric_name\":\"user\"}}", 201, NULL);
    expect("POST", "/ts/g1", "{\"samples\":[[15,1],[17,4],[51,3],[73,5],[75,3]]}", 200, NULL);
    expect("PUT", "/ts/g2", "{\"labels\":{\"metric_family\":\"gpu\",\"metric_name\":\"user\"}}", 201, NULL);
    expect("POST", "/ts/g2", "{\"samples\":[[3,1],[4,2],[51,3],[60,9]]}", 200, NULL);
    get("/mts/range?from=0&to=100&agg=max&bucket_ms=10&filter=metric_family%3Dgpu&groupby=metric_name&reduce=sum",
        "{\"series\":[{\"key\":\"metric_name=user\",\"samples\":[[0,2.0],[10,4.0],[50,6.0],[60,9.0],[70,5.0]]}]}");
    get("/mts/revrange?from=0&to=73&agg=max&bucket_ms=10&bucket_timestamp=mid&filter=metric_family%3Dgpu&groupby="
        "metric_name&reduce=sum",
        "{\"series\":[{\"key\":\"metric_name=user\",\"samples\":[[75,5.0],[65,9.0],[55,6.0],[15,4.0],[5,2.0]]}]}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_del_beyond_retention_with_rules),
        cmocka_unit_test(test_parsing),
        cmocka_unit_test(test_deleted_links),
        cmocka_unit_test(test_groupby_reduce),
    };
    return cmocka_run_group_tests_name("ts (RedisTimeSeries's tests)", tests, setup, teardown);
}
