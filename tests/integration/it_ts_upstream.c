/*
 * it_ts_upstream.c - RedisTimeSeries's own tests (tests/flow of
 * github.com/RedisTimeSeries/RedisTimeSeries), case by case, through /ts:
 * the cases issue 37 found answered differently, each citing the upstream
 * file and test it comes from, with upstream's answers as the expected ones
 * (NaN printed "nan", numbers as tally prints them).  What stays different
 * on purpose is in docs/differences.md ("What differs, and why").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/it_ts_upstream_cases.h"

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
/* Item 6: a rule created on a non-empty source                             */
/* ------------------------------------------------------------------------ */

static void test_rule_on_non_empty_source(void **state)
{
    (void)state;
    /* test_ts_createrule.py test_create_rule_non_empty_src_series */
    expect("PUT", "/ts/n1", NULL, 201, NULL);
    expect("PUT", "/ts/n2", NULL, 201, NULL);
    expect("PUT", "/ts/n3", NULL, 201, NULL);
    add_each("n1", (const int[]){ 1, 2, 3, 11 }, 4);
    expect("POST", "/ts/n1/rules", "{\"dest\":\"n2\",\"agg\":\"avg\",\"bucket_ms\":10}", 201, NULL);
    get("/ts/n2/range?from=-&to=%2B&latest=true", "{\"samples\":[]}");
    expect("POST", "/ts/n1/rules", "{\"dest\":\"n3\",\"agg\":\"avg\",\"bucket_ms\":10,\"align\":5}", 201, NULL);
    get("/ts/n3/range?from=-&to=%2B&latest=true", "{\"samples\":[]}");
    /* what comes after the rule is the rule's: the open bucket, then closed */
    add_each("n1", (const int[]){ 12 }, 1);
    get("/ts/n2/range?latest=true", "{\"samples\":[[10,12.0]]}");
    get("/ts/n3/range?latest=true", "{\"samples\":[[5,12.0]]}");
    /* replayed from the journal (the record carries the rule's generation) */
    tally_kill(&T);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", T.dir);
    tally_start(&T, dir, NULL);
    T.own_dir = true;
    get("/ts/n2/range?latest=true", "{\"samples\":[[10,12.0]]}");
    add_each("n1", (const int[]){ 25 }, 1);
    get("/ts/n2/range", "{\"samples\":[[10,12.0]]}");
    get("/ts/n3/range", "{\"samples\":[[5,12.0]]}");
    /* the generation cannot be sent by a client */
    expect("POST", "/ts/n2/rules", "{\"dest\":\"n3\",\"agg\":\"avg\",\"bucket_ms\":10,\"generation\":1}", 400, NULL);
}

/* ------------------------------------------------------------------------ */
/* Journals and snapshots written before issue 37                           */
/* ------------------------------------------------------------------------ */

#define FIXTURE_37 "tests/fixtures/ts_before_37"   /* tests run from the repository root */

/* A data directory of the tally before issue 37 (make-fixture.sh there says
 * how it was made and what that tally answered) loads to what it answered:
 * its rules keep the first generation's rules for life (twa's arithmetic,
 * the samples before a rule), the deletion it accepted stays applied; new
 * requests follow the new rules (the same deletion is refused now). */
static void test_directory_before_37(void **state)
{
    (void)state;
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    static const char *const files[] = { "snapshot.tly", "journal.0000000002.tlj" };
    for (size_t i = 0; i < 2; i++) {
        char src[256], dst[512];
        snprintf(src, sizeof(src), FIXTURE_37 "/%s", files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
        size_t len;
        char *data = file_read(src, &len);
        file_write(dst, data, len);
        free(data);
    }
    tally_proc_t p;
    tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", NULL });
    p.own_dir = true;
    static const char *const d1_before = "{\"samples\":[[0,6.499999999999999],[10,14.999999999999998]]}";
    static const char *const d1_after =
        "{\"samples\":[[0,6.499999999999999],[10,14.999999999999998],[20,26.749999999999996]]}";
    http_expect(&p, "GET", "/ts/d1/range", NULL, 200, d1_before);
    http_expect(&p, "GET", "/ts/d2/range", NULL, 200, "{\"samples\":[[10,11.5]]}");
    http_expect(&p, "GET", "/ts/t4/range", NULL, 200, "{\"samples\":[]}");
    /* the deletion the old tally accepted is refused now */
    http_expect(&p, "DELETE", "/ts/t3/range?from=14&to=14", NULL, 400, NULL);
    /* part 3 of make-fixture.sh, answered as the old tally answered it */
    http_expect(&p, "POST", "/ts/s1", "{\"samples\":[[25,27.5]]}", 200, NULL);
    http_expect(&p, "POST", "/ts/s1", "{\"samples\":[[28,30.8]]}", 200, NULL);
    http_expect(&p, "POST", "/ts/s1", "{\"samples\":[[34,37.4]]}", 200, NULL);
    http_expect(&p, "POST", "/ts/s2", "{\"samples\":[[27,27]]}", 200, NULL);
    http_expect(&p, "POST", "/ts/s2", "{\"samples\":[[35,35]]}", 200, NULL);
    http_expect(&p, "GET", "/ts/d1/range", NULL, 200, d1_after);
    http_expect(&p, "GET", "/ts/d2/range", NULL, 200, "{\"samples\":[[10,11.5],[20,26.0]]}");
    /* through a replay of both journals, then a snapshot of version 3 */
    for (int round = 0; round < 2; round++) {
        if (round == 0)
            tally_kill(&p);
        else
            assert_int_equal(tally_stop(&p), 0);
        tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", NULL });
        p.own_dir = true;
        http_expect(&p, "GET", "/ts/d1/range", NULL, 200, d1_after);
        http_expect(&p, "GET", "/ts/d2/range", NULL, 200, "{\"samples\":[[10,11.5],[20,26.0]]}");
        http_expect(&p, "GET", "/ts/t4/range", NULL, 200, "{\"samples\":[]}");
    }
    /* a rule created now, over the same samples, computes generation 2's */
    http_expect(&p, "PUT", "/ts/d1b", NULL, 201, NULL);
    http_expect(&p, "PUT", "/ts/s1b", NULL, 201, NULL);
    http_expect(&p, "POST", "/ts/s1b/rules", "{\"dest\":\"d1b\",\"agg\":\"twa\",\"bucket_ms\":10}", 201, NULL);
    static const char *const s1[] = { "[3,3]", "[9,9]", "[13,13]", "[22,22]", "[25,27.5]", "[28,30.8]", "[34,37.4]" };
    for (size_t i = 0; i < 7; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"samples\":[%s]}", s1[i]);
        http_expect(&p, "POST", "/ts/s1b", body, 200, NULL);
    }
    http_expect(&p, "GET", "/ts/d1b/range", NULL, 200, "{\"samples\":[[0,6.5],[10,15.0],[20,26.75]]}");
    tally_cleanup(&p);
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

/* ------------------------------------------------------------------------ */
/* Items 2 and 8: EMPTY and twa, test_ts_range.py case by case              */
/* ------------------------------------------------------------------------ */

/* Whether a JSON value (a number, or "nan"/"inf" as tally prints them) is
 * the expected text's double, exactly. */
static bool same_value(json_t *got, const char *want, size_t len)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*s", (int)len, want);
    double w = strtod(buf, NULL);
    if (json_is_string(got))
        return strcmp(json_string_value(got), "nan") == 0 ? isnan(w) : strtod(json_string_value(got), NULL) == w;
    return json_is_number(got) && json_number_value(got) == w && !isnan(w);
}

/* Fails unless the answer's samples are the rows of `want` (see
 * it_ts_upstream_cases.h). */
static void expect_rows(const char *path, const char *want)
{
    json_t *j = http_get_json(&T, path);
    json_t *rows = json_object_get(j, "samples");
    bool first_only = want[0] == '^';
    const char *p = want + first_only;
    size_t n = 0;
    bool ok = json_is_array(rows);
    while (ok && *p) {
        const char *end = strchr(p, ';');
        size_t rl = end ? (size_t)(end - p) : strlen(p);
        json_t *row = json_array_get(rows, n++);
        size_t col = 0;
        for (const char *f = p; ok && f < p + rl; col++) {
            const char *c = memchr(f, ',', (size_t)(p + rl - f));
            size_t fl = c ? (size_t)(c - f) : (size_t)(p + rl - f);
            json_t *got = json_array_get(row, col);
            if (col == 0)
                ok = json_is_integer(got) && json_integer_value(got) == strtoll(f, NULL, 10);
            else
                ok = same_value(got, f, fl);
            f += fl + 1;
        }
        ok = ok && json_array_size(row) == col;
        p += rl + (end != NULL);
    }
    if (ok && !first_only)
        ok = json_array_size(rows) == n;
    if (!ok) {
        char *text = json_dumps(j, JSON_COMPACT);
        fail_msg("GET %s: %s, want %s", path, text, want);
    }
    json_decref(j);
}

static void test_upstream_range_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(upstream_range_cases) / sizeof(upstream_range_cases[0]); i++) {
        const upstream_case_t *c = &upstream_range_cases[i];
        if (c->want) {
            expect_rows(c->path, c->want);
            continue;
        }
        http_resp_t r = http(&T, c->method, c->path, c->body, NULL);
        if (r.status >= 300 && !(r.status == 404 && strcmp(c->method, "DELETE") == 0))
            fail_msg("%s %s %s: %ld %s", c->method, c->path, c->body ? c->body : "", r.status, r.body);
        http_free(&r);
    }
}

/* test_ts_range.py test_ts_range_NaN_values, test_ts_range_countNaN,
 * test_ts_range_countAll, test_ts_range_aggregator_empty_no_preceding_sample;
 * test_ts_mrange.py test_mrange_empty_fill_*: buckets holding only samples an
 * aggregation does not count */
static void test_nan_buckets(void **state)
{
    (void)state;
    expect("POST", "/ts/nanb",
           "{\"samples\":[[10,10],[20,\"nan\"],[30,20],[40,\"nan\"],[50,30],[110,\"nan\"],[120,\"nan\"],[130,\"nan\"],"
           "[210,40],[220,50]],\"labels\":{\"nanb\":\"1\"}}",
           200, NULL);
    static const struct {
        const char *agg, *want;
    } first[] = { { "sum", "0,60" },  { "count", "0,3" }, { "min", "0,10" }, { "max", "0,30" },
                  { "avg", "0,20" },  { "first", "0,10" }, { "last", "0,30" }, { "range", "0,20" } };
    char path[256];
    for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
        snprintf(path, sizeof(path), "/ts/nanb/range?from=0&to=99&agg=%s&bucket_ms=100", first[i].agg);
        expect_rows(path, first[i].want);
    }
    expect_rows("/ts/nanb/range?from=0&to=299&agg=sum&bucket_ms=100", "0,60;200,90");
    expect_rows("/ts/nanb/range?from=0&to=299&agg=sum&bucket_ms=100&empty=true", "0,60;100,0;200,90");
    expect_rows("/ts/nanb/revrange?from=0&to=299&agg=sum&bucket_ms=100", "200,90;0,60");
    expect_rows("/ts/nanb/range?from=0&to=299&agg=count&bucket_ms=100&empty=true", "0,3;100,0;200,2");
    /* the NaN-only bucket with EMPTY: 0 for sum and count, the last value
     * before it for last, twa from the line around it, NaN for the rest */
    static const struct {
        const char *agg, *want;
    } empty[] = { { "sum", "0" },   { "count", "0" }, { "min", "nan" },   { "max", "nan" },   { "avg", "nan" },
                  { "first", "nan" }, { "last", "30" }, { "range", "nan" }, { "std.p", "nan" }, { "std.s", "nan" },
                  { "var.p", "nan" }, { "var.s", "nan" }, { "twa", "36.21875" } };
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        char want[64];
        snprintf(path, sizeof(path), "/ts/nanb/range?from=0&to=199&agg=%s&bucket_ms=100&empty=true", empty[i].agg);
        json_t *j = http_get_json(&T, path);
        json_t *rows = json_object_get(j, "samples");
        json_t *v = json_array_get(json_array_get(rows, 1), 1);
        snprintf(want, sizeof(want), "%s", empty[i].want);
        if (json_array_size(rows) != 2 || !same_value(v, want, strlen(want)))
            fail_msg("GET %s: bucket 100 is not %s", path, want);
        json_decref(j);
    }
    expect_rows("/ts/nanb/range?from=100&to=199&agg=sum&bucket_ms=100", "");
    /* the case: the one bucket holds only a NaN, no sample before it */
    expect("POST", "/ts/nanc", "{\"samples\":[[100,\"nan\"],[200,50]]}", 200, NULL);
    expect_rows("/ts/nanc/range?from=100&to=199&agg=last&bucket_ms=100&empty=true", "100,nan");
    expect_rows("/ts/nanc/range?from=100&to=199&agg=twa&bucket_ms=100&empty=true", "100,nan");
    expect_rows("/ts/nanc/range?from=100&to=199&agg=count&bucket_ms=100&empty=true", "100,0");

    /* countNaN / countAll: buckets holding only values they do not count are
     * buckets all the same (5 here, 3 before issue 37) */
    expect("POST", "/ts/cnan", "{\"samples\":[[10,10],[20,\"nan\"],[30,20],[40,\"nan\"],[50,30]],\"labels\":{\"cnan\":\"1\"}}",
           200, NULL);
    expect_rows("/ts/cnan/range?from=0&to=99&agg=countNaN&bucket_ms=100", "0,2");
    expect_rows("/ts/cnan/revrange?from=0&to=99&agg=countNaN&bucket_ms=10&empty=true", "50,0;40,1;30,0;20,1;10,0");
    expect_rows("/ts/cnan/range?from=0&to=99&agg=countNaN&bucket_ms=50", "0,2");
    expect_rows("/ts/cnan/range?from=0&to=99&agg=countAll&bucket_ms=100", "0,5");
    expect_rows("/ts/cnan/revrange?from=0&to=99&agg=countAll&bucket_ms=10&empty=true", "50,1;40,1;30,1;20,1;10,1");
    /* the same through /mts/range */
    http_resp_t r = http(&T, "GET", "/mts/revrange?from=0&to=99&agg=countNaN&bucket_ms=10&empty=true&filter=cnan%3D1",
                         NULL, NULL);
    assert_status(&r, 200);
    json_t *one = json_array_get(json_object_get(r.json, "series"), 0);
    char *got = json_dumps(json_object_get(one, "samples"), JSON_COMPACT);
    assert_string_equal(got, "[[50,0.0],[40,1.0],[30,0.0],[20,1.0],[10,0.0]]");
    free(got);
    http_free(&r);
}

/* test_ts_mrange.py test_excludeempty_*: series with nothing to answer left out */
static void test_exclude_empty(void **state)
{
    (void)state;
    expect("POST", "/ts/xeb1", "{\"samples\":[[10,1],[20,2]],\"labels\":{\"g\":\"xeb\"}}", 200, NULL);
    expect("POST", "/ts/xeb2", "{\"samples\":[[1000,99]],\"labels\":{\"g\":\"xeb\"}}", 200, NULL);
    expect("POST", "/ts/xeb3", "{\"samples\":[[15,3]],\"labels\":{\"g\":\"xeb\"}}", 200, NULL);
    get("/mts/range?from=1&to=100&exclude_empty=true&filter=g%3Dxeb",
        "{\"series\":[{\"key\":\"xeb1\",\"samples\":[[10,1.0],[20,2.0]]},{\"key\":\"xeb3\",\"samples\":[[15,3.0]]}]}");
    get("/mts/range?from=1&to=100&filter=g%3Dxeb",
        "{\"series\":[{\"key\":\"xeb1\",\"samples\":[[10,1.0],[20,2.0]]},{\"key\":\"xeb2\",\"samples\":[]},"
        "{\"key\":\"xeb3\",\"samples\":[[15,3.0]]}]}");
    get("/mts/range?from=2&to=9&exclude_empty=true&filter=g%3Dxeb", "{\"series\":[]}");
    get("/mts/revrange?from=1&to=100&count=1&exclude_empty=true&filter=g%3Dxeb",
        "{\"series\":[{\"key\":\"xeb1\",\"samples\":[[20,2.0]]},{\"key\":\"xeb3\",\"samples\":[[15,3.0]]}]}");
    get("/mts/range?from=1&to=100&filter_by_value_min=2&filter_by_value_max=3&exclude_empty=true&filter=g%3Dxeb",
        "{\"series\":[{\"key\":\"xeb1\",\"samples\":[[20,2.0]]},{\"key\":\"xeb3\",\"samples\":[[15,3.0]]}]}");
    /* test_excludeempty_agg_empty_flag_both_sides / one_side: EMPTY's buckets count */
    expect("POST", "/ts/xebs", "{\"samples\":[[10,1],[9999,2]],\"labels\":{\"g\":\"xebs\"}}", 200, NULL);
    get("/mts/range?from=1000&to=5000&agg=avg&bucket_ms=1000&empty=true&exclude_empty=true&filter=g%3Dxebs",
        "{\"series\":[{\"key\":\"xebs\",\"samples\":[[1000,\"nan\"],[2000,\"nan\"],[3000,\"nan\"],[4000,\"nan\"],"
        "[5000,\"nan\"]]}]}");
    expect("POST", "/ts/xeos", "{\"samples\":[[9999,2]],\"labels\":{\"g\":\"xeos\"}}", 200, NULL);
    get("/mts/range?from=1000&to=5000&agg=avg&bucket_ms=1000&empty=true&exclude_empty=true&filter=g%3Dxeos",
        "{\"series\":[]}");
    /* test_excludeempty_error_with_groupby */
    expect("GET", "/mts/range?from=1&to=100&exclude_empty=true&filter=g%3Dxeb&groupby=g&reduce=sum", NULL, 400, NULL);
}

/* test_ts_multi_agg.py: several aggregations in one query */
static void test_multi_agg(void **state)
{
    (void)state;
    char body[2048];
    size_t u = (size_t)snprintf(body, sizeof(body), "{\"samples\":[");
    for (int i = 0; i < 10; i++)
        u += (size_t)snprintf(body + u, sizeof(body) - u, "%s[%d,%d],[%d,%d]", i ? "," : "", 1000 + i, 100 + i, 2000 + i,
                              200 + i);
    snprintf(body + u, sizeof(body) - u, "],\"labels\":{\"type\":\"maggstock\"}}");
    expect("POST", "/ts/magg", body, 200, NULL);
    /* test_multi_agg_basic_range, _revrange, _three_aggregators, _duplicate_types */
    expect_rows("/ts/magg/range?agg=min,max&bucket_ms=1000", "1000,100,109;2000,200,209");
    expect_rows("/ts/magg/revrange?agg=min,max&bucket_ms=1000", "2000,200,209;1000,100,109");
    expect_rows("/ts/magg/range?to=1999&agg=min,max,avg&bucket_ms=1000", "1000,100,109,104.5");
    expect_rows("/ts/magg/range?to=1999&agg=min,min&bucket_ms=1000", "1000,100,100");
    /* test_multi_agg_mrevrange: sum,count per series */
    get("/mts/revrange?agg=sum,count&bucket_ms=1000&filter=type%3Dmaggstock",
        "{\"series\":[{\"key\":\"magg\",\"samples\":[[2000,2045.0,10.0],[1000,1045.0,10.0]]}]}");
    /* test_multi_agg_with_count */
    expect_rows("/ts/magg/range?agg=min,max&bucket_ms=1000&count=1", "1000,100,109");
    /* test_multi_agg_candlestick */
    expect("POST", "/ts/magg_cs", "{\"samples\":[[1000,50],[1001,30],[1002,80],[1003,60]]}", 200, NULL);
    expect_rows("/ts/magg_cs/range?agg=min,max,first,last&bucket_ms=1000", "1000,30,80,50,60");
    /* test_multi_agg_with_twa: twa equal to its single-agg value */
    expect("POST", "/ts/magg_twa", "{\"samples\":[[8,8],[9,9],[10,10],[13,13],[14,14],[23,23]]}", 200, NULL);
    expect_rows("/ts/magg_twa/range?from=10&to=20&agg=min,max,twa&bucket_ms=10", "10,10,14,15");
    /* test_multi_agg_invalid_type_error, _empty_type_error, _groupby_error,
     * test_createrule_multi_agg_error */
    expect("GET", "/ts/magg/range?agg=min,invalid&bucket_ms=1000", NULL, 400, NULL);
    expect("GET", "/ts/magg/range?agg=min,&bucket_ms=1000", NULL, 400, NULL);
    expect("GET", "/mts/range?agg=min,max&bucket_ms=1000&filter=type%3Dmaggstock&groupby=type&reduce=max", NULL, 400,
           NULL);
    expect("PUT", "/ts/magg_dst", NULL, 201, NULL);
    expect("POST", "/ts/magg/rules", "{\"dest\":\"magg_dst\",\"agg\":\"min,max\",\"bucket_ms\":1000}", 400, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_del_beyond_retention_with_rules),
        cmocka_unit_test(test_parsing),
        cmocka_unit_test(test_deleted_links),
        cmocka_unit_test(test_rule_on_non_empty_source),
        cmocka_unit_test(test_directory_before_37),
        cmocka_unit_test(test_groupby_reduce),
        cmocka_unit_test(test_upstream_range_cases),
        cmocka_unit_test(test_nan_buckets),
        cmocka_unit_test(test_exclude_empty),
        cmocka_unit_test(test_multi_agg),
    };
    return cmocka_run_group_tests_name("ts (RedisTimeSeries's tests)", tests, setup, teardown);
}
