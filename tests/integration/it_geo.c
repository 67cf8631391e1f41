/*
 * it_geo.c - /geo through a real tallyd, and against a real redis-server.
 *
 *   - the seeds' transcript, digit for digit (raw response text);
 *   - every kind of bad input answers its envelope and changes nothing;
 *   - wrong key types, missing keys and members, NX/XX, removal;
 *   - state survives a restart (snapshot) and a crash (journal replay);
 *   - differential: thousands of seeded random points (world, poles at
 *     +-85.05112878, the antimeridian, the equator, identical points, dense
 *     clusters, shared meridians) loaded into both servers, then thousands
 *     of random GEOSEARCH-style queries (member or lon/lat centre, radius or
 *     box, every unit, COUNT, ANY, ASC/DESC) plus GEOPOS, GEODIST, GEOHASH
 *     and updates, every answer compared exactly: members and their order,
 *     distances (Redis's 4-decimal text), hashes, and coordinates (our double
 *     printed as Redis prints it must give Redis's text).
 *
 * GEO_SEED=n runs the differential test on another random dataset;
 * GEO_DEBUG_DUMP=file writes its points, to replay a failure by hand.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/request.h"
#include "core/geohash.h"
#include "core/rng.h"
#include "tests/integration/harness.h"
#include "tests/integration/redis_ref.h"

TALLY_ONE_SERVER_SUITE(T)

#define COMPANY                                                                                          \
    "{\"members\":[{\"member\":\"meituan\",\"lon\":116.489033,\"lat\":40.007669},"                      \
    "{\"member\":\"jd\",\"lon\":116.562108,\"lat\":39.787602},"                                          \
    "{\"member\":\"xiaomi\",\"lon\":116.334255,\"lat\":40.027400}]}"

static void expect_body(const char *method, const char *path, const char *body, long status, const char *want)
{
    http_resp_t r = http(&T, method, path, body, NULL);
    if (r.status != status || strcmp(r.body, want) != 0)
        fail_msg("%s %s: got %ld %s\nwant %ld %s", method, path, r.status, r.body, status, want);
    http_free(&r);
}

/* The seeds' Redis transcript, through our API. */
static void test_seed_transcript(void **state)
{
    (void)state;
    expect_body("POST", "/geo/company", "{\"members\":[{\"member\":\"meituan\",\"lon\":116.489033,\"lat\":40.007669}]}",
                200, "{\"added\":1}");
    expect_body("POST", "/geo/company",
                "{\"members\":[{\"member\":\"jd\",\"lon\":116.562108,\"lat\":39.787602},"
                "{\"member\":\"xiaomi\",\"lon\":116.334255,\"lat\":40.027400}]}",
                200, "{\"added\":2}");
    expect_body("POST", "/geo/company", "{\"members\":[{\"member\":\"juejin\",\"lon\":116.48105,\"lat\":39.996794}]}",
                200, "{\"added\":1}");
    expect_body("GET", "/geo/company/dist?from=meituan&to=juejin&unit=km", NULL, 200, "{\"distance\":1.3878}");
    expect_body("GET", "/geo/company/dist?from=jd&to=meituan&unit=km", NULL, 200, "{\"distance\":25.2590}");
    expect_body("GET", "/geo/company/dist?from=jd&to=xiaomi&unit=km", NULL, 200, "{\"distance\":33.0047}");
    expect_body("GET", "/geo/company/dist?from=meituan&to=xiaomi&unit=km", NULL, 200, "{\"distance\":13.3659}");
    /* GEOPOS: 116.48903220891952515 40.00766997707732031 as shortest doubles */
    expect_body("GET", "/geo/company/pos?member=meituan", NULL, 200,
                "{\"positions\":[{\"lon\":116.48903220891953,\"lat\":40.00766997707732}]}");
    expect_body("GET", "/geo/company/hash?member=jd&member=meituan", NULL, 200,
                "{\"hashes\":[\"wx4fk7jgtf0\",\"wx4gdg0tx40\"]}");
    expect_body("GET", "/geo/nearby?key=company&member=meituan&radius=20&unit=km&count=3&sort=asc", NULL, 200,
                "{\"results\":[{\"member\":\"meituan\"},{\"member\":\"juejin\"},{\"member\":\"xiaomi\"}]}");
    expect_body("GET",
                "/geo/nearby?key=company&member=meituan&radius=20&unit=km&withcoord=true&withdist=true"
                "&withhash=true&count=3&sort=asc",
                NULL, 200,
                "{\"results\":[{\"member\":\"meituan\",\"distance\":0.0000,\"hash\":4069887179083478,"
                "\"lon\":116.48903220891953,\"lat\":40.00766997707732},"
                "{\"member\":\"juejin\",\"distance\":1.3878,\"hash\":4069887154388167,"
                "\"lon\":116.4810499548912,\"lat\":39.9967934885826},"
                "{\"member\":\"xiaomi\",\"distance\":13.3659,\"hash\":4069880904286516,"
                "\"lon\":116.33425265550613,\"lat\":40.027400246581614}]}");
    expect_body("GET", "/geo/nearby?key=company&lon=116.514202&lat=39.905409&radius=20&unit=km&withdist=1&count=3&sort=asc",
                NULL, 200,
                "{\"results\":[{\"member\":\"juejin\",\"distance\":10.5501},{\"member\":\"meituan\",\"distance\":11.5748},"
                "{\"member\":\"jd\",\"distance\":13.7269}]}");
    /* the parsed numbers are Redis's values */
    http_resp_t r = http(&T, "GET", "/geo/company/pos?member=meituan", NULL, NULL);
    json_t *p = json_array_get(json_object_get(r.json, "positions"), 0);
    assert_true(json_real_value(json_object_get(p, "lon")) == strtod("116.48903220891952515", NULL));
    assert_true(json_real_value(json_object_get(p, "lat")) == strtod("40.00766997707732031", NULL));
    http_free(&r);
}

static void test_missing_things(void **state)
{
    (void)state;
    expect_body("POST", "/geo/m1", COMPANY, 200, "{\"added\":3}");
    expect_body("GET", "/geo/m1/pos?member=jd&member=nope&member=xiaomi", NULL, 200,
                "{\"positions\":[{\"lon\":116.56210631132126,\"lat\":39.787602951302354},null,"
                "{\"lon\":116.33425265550613,\"lat\":40.027400246581614}]}");
    expect_body("GET", "/geo/m1/hash?member=nope", NULL, 200, "{\"hashes\":[null]}");
    expect_body("GET", "/geo/m1/dist?from=jd&to=nope", NULL, 200, "{\"distance\":null}");
    expect_body("GET", "/geo/nokey/dist?from=jd&to=xiaomi", NULL, 200, "{\"distance\":null}");
    expect_body("GET", "/geo/nokey/pos?member=jd", NULL, 200, "{\"positions\":[null]}");
    expect_body("GET", "/geo/nokey/hash?member=jd", NULL, 200, "{\"hashes\":[null]}");
    /* GEOPOS / GEOHASH with only a key: an empty list, for a missing key too */
    expect_body("GET", "/geo/m1/pos", NULL, 200, "{\"positions\":[]}");
    expect_body("GET", "/geo/m1/hash", NULL, 200, "{\"hashes\":[]}");
    expect_body("GET", "/geo/nokey/pos", NULL, 200, "{\"positions\":[]}");
    expect_body("GET", "/geo/nokey/hash", NULL, 200, "{\"hashes\":[]}");
    expect_body("GET", "/geo/nearby?key=nokey&member=jd&radius=1&unit=m", NULL, 200, "{\"results\":[]}");
    expect_body("GET", "/geo/nearby?key=m1&lon=0&lat=0&radius=1&unit=km", NULL, 200, "{\"results\":[]}");
    /* GEOSEARCHSTORE with no result (a missing source, or nothing in range) deletes the destination */
    expect_body("POST", "/geo/m2", COMPANY, 200, "{\"added\":3}");
    expect_body("POST", "/geo/m2/store?source=nokey&member=jd&radius=1&unit=m", NULL, 200, "{\"stored\":0}");
    http_expect(&T, "GET", "/keys/m2", NULL, 404, NULL);
    expect_body("POST", "/geo/m2/store?source=m1&member=jd&radius=1&unit=km", NULL, 200, "{\"stored\":1}");
    expect_body("POST", "/geo/m2/store?source=m1&lon=0&lat=0&radius=1&unit=km", NULL, 200, "{\"stored\":0}");
    http_expect(&T, "GET", "/keys/m2", NULL, 404, NULL);
    /* the stored set is a new value: the destination's TTL goes, as Redis's store drops it */
    expect_body("POST", "/geo/m3/store?source=m1&member=jd&radius=1&unit=km", NULL, 200, "{\"stored\":1}");
    http_expect(&T, "PUT", "/keys/m3/ttl", "{\"ttl_ms\":100000}", 200, NULL);
    expect_body("POST", "/geo/m3/store?source=m1&member=jd&radius=50&unit=km", NULL, 200, "{\"stored\":3}");
    http_resp_t r = http(&T, "GET", "/keys/m3", NULL, NULL);
    assert_int_equal(json_int_of(&r, "ttl_ms"), -1);
    http_free(&r);
    expect_body("GET", "/geo/m1/dist?from=jd&to=xiaomi", NULL, 200, "{\"distance\":33004.6915}");
    expect_body("GET", "/geo/m1/dist?from=jd&to=xiaomi&unit=MI", NULL, 200, "{\"distance\":20.5082}");
    expect_body("GET", "/geo/m1/dist?from=jd&to=xiaomi&unit=ft", NULL, 200, "{\"distance\":108283.1085}");
    expect_body("GET", "/geo/m1/dist?from=jd&to=jd", NULL, 200, "{\"distance\":0.0000}");

    /* NX, XX and updates: added counts only new members, as GEOADD */
    expect_body("POST", "/geo/m1", "{\"members\":[{\"member\":\"jd\",\"lon\":1,\"lat\":2}],\"nx\":true}", 200,
                "{\"added\":0}");
    expect_body("GET", "/geo/m1/hash?member=jd", NULL, 200, "{\"hashes\":[\"wx4fk7jgtf0\"]}");
    expect_body("POST", "/geo/m1",
                "{\"members\":[{\"member\":\"jd\",\"lon\":1,\"lat\":2},{\"member\":\"new\",\"lon\":1,\"lat\":2}],"
                "\"xx\":true}",
                200, "{\"added\":0}");
    expect_body("GET", "/geo/m1/hash?member=jd&member=new", NULL, 200, "{\"hashes\":[\"s02equ04ve0\",null]}");
    expect_body("POST", "/geo/m1", "{\"members\":[{\"member\":\"jd\",\"lon\":3,\"lat\":4},{\"member\":\"new\",\"lon\":1,\"lat\":2}]}",
                200, "{\"added\":1}");
    /* CH: added or moved; the same position again is no change */
    expect_body("POST", "/geo/m1",
                "{\"members\":[{\"member\":\"jd\",\"lon\":3,\"lat\":4},{\"member\":\"new\",\"lon\":5,\"lat\":6},"
                "{\"member\":\"ch1\",\"lon\":1,\"lat\":1}],\"ch\":true}",
                200, "{\"added\":2}");
    expect_body("POST", "/geo/m1",
                "{\"members\":[{\"member\":\"jd\",\"lon\":3,\"lat\":4.5},{\"member\":\"ch2\",\"lon\":1,\"lat\":1}],"
                "\"xx\":true,\"ch\":true}",
                200, "{\"added\":1}");
    expect_body("POST", "/geo/m1",
                "{\"members\":[{\"member\":\"jd\",\"lon\":9,\"lat\":9},{\"member\":\"ch2\",\"lon\":1,\"lat\":1}],"
                "\"nx\":true,\"ch\":true}",
                200, "{\"added\":1}");
    expect_body("POST", "/geo/m1", "{\"members\":[{\"member\":\"ch1\",\"lon\":1,\"lat\":1}],\"ch\":false}", 200,
                "{\"added\":0}");
    expect_body("GET", "/geo/m1/pos?member=jd", NULL, 200,
                "{\"positions\":[{\"lon\":2.9999998211860657,\"lat\":4.5000007345448765}]}");
    expect_body("POST", "/geo/m1/remove", "{\"members\":[\"ch1\",\"ch2\"]}", 200, "{\"removed\":2}");
    expect_body("POST", "/geo/m2", "{\"members\":[{\"member\":\"a\",\"lon\":1,\"lat\":2}],\"xx\":true}", 200,
                "{\"added\":0}");
    expect_body("GET", "/keys/m2", NULL, 404, "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"no such key\"}}");

    /* remove: counts what was there; the last removal deletes the key */
    expect_body("POST", "/geo/m1/remove", "{\"members\":[\"jd\",\"jd\",\"nope\"]}", 200, "{\"removed\":1}");
    expect_body("POST", "/geo/m1/remove", "{\"members\":[\"xiaomi\",\"meituan\",\"new\"]}", 200, "{\"removed\":3}");
    expect_body("GET", "/keys/m1", NULL, 404, "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"no such key\"}}");
    expect_body("POST", "/geo/m1/remove", "{\"members\":[\"x\"]}", 200, "{\"removed\":0}");

    /* JSON escaping of members */
    expect_body("POST", "/geo/esc", "{\"members\":[{\"member\":\"a \\\"q\\\" \\\\ \\n \\u00e9\",\"lon\":0,\"lat\":0}]}", 200,
                "{\"added\":1}");
    expect_body("GET", "/geo/nearby?key=esc&lon=0&lat=0&radius=1&unit=m", NULL, 200,
                "{\"results\":[{\"member\":\"a \\\"q\\\" \\\\ \\n \xc3\xa9\"}]}");
    /* a key called "nearby" is an ordinary key */
    expect_body("POST", "/geo/nearby", COMPANY, 200, "{\"added\":3}");
    expect_body("GET", "/geo/nearby?key=nearby&member=jd&radius=1&count=1&unit=m", NULL, 200,
                "{\"results\":[{\"member\":\"jd\"}]}");
}

/* Every bad request: its envelope, and no change. */
static void test_bad_input(void **state)
{
    (void)state;
    expect_body("POST", "/geo/bad", COMPANY, 200, "{\"added\":3}");
    http_resp_t before = http(&T, "GET", "/keys/bad", NULL, NULL);
    static const struct {
        const char *method, *path, *body;
        long status;
        const char *code, *needle;
    } cases[] = {
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"x\",\"lon\":181,\"lat\":0}]}", 400, "BAD_REQUEST",
          "invalid longitude,latitude pair 181.000000,0.000000" },
        { "POST", "/geo/bad",
          "{\"members\":[{\"member\":\"ok\",\"lon\":1,\"lat\":1},{\"member\":\"x\",\"lon\":0,\"lat\":85.06}]}", 400,
          "BAD_REQUEST", "invalid longitude,latitude pair 0.000000,85.060000" },
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"x\",\"lon\":0,\"lat\":-86}]}", 400, "BAD_REQUEST",
          "members[0]" },
        { "POST", "/geo/bad", "{\"members\":[]}", 400, "BAD_REQUEST", "non-empty" },
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"x\",\"lon\":\"1\",\"lat\":0}]}", 400, "BAD_REQUEST",
          "numbers" },
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"\",\"lon\":1,\"lat\":0}]}", 400, "BAD_REQUEST", "empty" },
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"x\",\"lon\":1,\"lat\":0,\"z\":1}]}", 400, "BAD_REQUEST",
          "unknown field 'z'" },
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"x\",\"lon\":1,\"lat\":0}],\"nx\":true,\"xx\":true}", 400,
          "BAD_REQUEST", "both" },
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"x\",\"lon\":1,\"lat\":0}],\"ch\":1}", 400,
          "BAD_REQUEST", "ch" },
        { "POST", "/geo/bad", "{\"members\":[{\"member\":\"x\",\"lon\":1,\"lat\":0}],\"cx\":true}", 400,
          "BAD_REQUEST", "unknown field 'cx'" },
        { "POST", "/geo/bad", "[1]", 400, "BAD_REQUEST", "object" },
        { "POST", "/geo/bad/remove", "{\"members\":[1]}", 400, "BAD_REQUEST", "members[0]" },
        { "POST", "/geo/bad/remove", "{\"members\":\"jd\"}", 400, "BAD_REQUEST", "array" },
        { "GET", "/geo/bad/dist?from=jd&to=xiaomi&unit=kmm", NULL, 400, "BAD_REQUEST",
          "unsupported unit provided. please use M, KM, FT, MI" },
        { "GET", "/geo/bad/dist?from=jd", NULL, 400, "BAD_REQUEST", "'to'" },
        { "GET", "/geo/bad/dist?from=jd&to=x&nope=1", NULL, 400, "BAD_REQUEST", "unknown query parameter 'nope'" },
        { "GET", "/geo/bad/pos?nope=1", NULL, 400, "BAD_REQUEST", "unknown query parameter 'nope'" },
        { "GET", "/geo/nearby?key=bad&lon=200&lat=0&radius=1&unit=m", NULL, 400, "BAD_REQUEST",
          "invalid longitude,latitude pair 200.000000,0.000000" },
        { "GET", "/geo/nearby?key=bad&lon=1&radius=1&unit=m", NULL, 400, "BAD_REQUEST", "together" },
        { "GET", "/geo/nearby?key=bad&lon=1&lat=1&member=jd&radius=1&unit=m", NULL, 400, "BAD_REQUEST", "exactly one" },
        { "GET", "/geo/nearby?key=bad&radius=1&unit=m", NULL, 400, "BAD_REQUEST", "exactly one" },
        { "GET", "/geo/nearby?key=bad&member=jd&unit=m", NULL, 400, "BAD_REQUEST", "exactly one" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1&width=1&height=1&unit=m", NULL, 400, "BAD_REQUEST", "exactly one" },
        { "GET", "/geo/nearby?key=bad&member=jd&width=1&unit=m", NULL, 400, "BAD_REQUEST", "together" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=-1&unit=m", NULL, 400, "BAD_REQUEST", "radius cannot be negative" },
        { "GET", "/geo/nearby?key=bad&member=jd&width=-1&height=1&unit=m", NULL, 400, "BAD_REQUEST",
          "height or width cannot be negative" },
        { "GET", "/geo/nearby?key=bad&member=jd&width=1&height=-1&unit=m", NULL, 400, "BAD_REQUEST",
          "height or width cannot be negative" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1&unit=yd", NULL, 400, "BAD_REQUEST", "unsupported unit" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1&count=0&unit=m", NULL, 400, "BAD_REQUEST", "COUNT must be > 0" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1&count=-3&unit=m", NULL, 400, "BAD_REQUEST", "COUNT must be > 0" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1&any=true&unit=m", NULL, 400, "BAD_REQUEST",
          "the ANY argument requires COUNT argument" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1&sort=up&unit=m", NULL, 400, "BAD_REQUEST", "asc or desc" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=abc&unit=m", NULL, 400, "BAD_REQUEST", "radius" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=nan&unit=m", NULL, 400, "BAD_REQUEST", "radius" },
        { "GET", "/geo/nearby?member=jd&radius=1&unit=m", NULL, 400, "BAD_REQUEST", "'key'" },
        { "GET", "/geo/nearby?key=bad&member=zz&radius=1&unit=m", NULL, 404, "NOT_FOUND",
          "could not decode requested zset member" },
        { "GET", "/geo/bad", NULL, 405, "METHOD_NOT_ALLOWED", "POST" },
        /* a search names its unit, as Redis's BYRADIUS and BYBOX do */
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1", NULL, 400, "BAD_REQUEST", "missing query parameter 'unit'" },
        { "GET", "/geo/nearby?key=bad&member=jd&radius=1&unit=m&unit=km", NULL, 400, "BAD_REQUEST", "'unit'" },
        /* GEOSEARCHSTORE: the same query, failures change nothing (bad is the source and the destination) */
        { "POST", "/geo/bad/store?source=bad&member=jd&radius=1", NULL, 400, "BAD_REQUEST", "'unit'" },
        { "POST", "/geo/bad/store?member=jd&radius=1&unit=m", NULL, 400, "BAD_REQUEST", "'source'" },
        { "POST", "/geo/bad/store?source=bad&member=jd&radius=1&unit=m&withdist=true", NULL, 400, "BAD_REQUEST",
          "unknown query parameter 'withdist'" },
        { "POST", "/geo/bad/store?source=bad&member=jd&radius=1&unit=m&storedist=true", NULL, 400, "BAD_REQUEST",
          "no sorted sets" },
        { "POST", "/geo/bad/store?source=bad&member=zz&radius=1&unit=m", NULL, 404, "NOT_FOUND",
          "could not decode requested zset member" },
        { "POST", "/geo/bad/store?source=bad&member=jd&radius=-1&unit=m", NULL, 400, "BAD_REQUEST",
          "radius cannot be negative" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_resp_t r = http(&T, cases[i].method, cases[i].path, cases[i].body, NULL);
        if (r.status != cases[i].status || !strstr(r.body, cases[i].code) || !strstr(r.body, cases[i].needle))
            fail_msg("case %zu %s %s: got %ld %s; want %ld %s ~ '%s'", i, cases[i].method, cases[i].path, r.status,
                     r.body, cases[i].status, cases[i].code, cases[i].needle);
        http_free(&r);
    }
    /* nothing changed: same members, same positions, same memory */
    http_resp_t after = http(&T, "GET", "/keys/bad", NULL, NULL);
    assert_string_equal(before.body, after.body);
    expect_body("GET", "/geo/bad/hash?member=jd&member=meituan&member=xiaomi&member=ok&member=x", NULL, 200,
                "{\"hashes\":[\"wx4fk7jgtf0\",\"wx4gdg0tx40\",\"wx4exqb0880\",null,null]}");
    http_free(&before);
    http_free(&after);

    /* batch limit */
    size_t cap = 10001 * 48 + 64;
    char *big = malloc(cap);
    size_t n = (size_t)snprintf(big, cap, "{\"members\":[");
    for (int i = 0; i < 10001; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s{\"member\":\"m%d\",\"lon\":1,\"lat\":1}", i ? "," : "", i);
    snprintf(big + n, cap - n, "]}");
    http_resp_t r = http(&T, "POST", "/geo/bad", big, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    free(big);
}

static void test_wrongtype(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/throttle",
                         "{\"key\":\"tkey\",\"max_burst\":5,\"count_per_period\":1,\"period\":60}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    static const char *const reqs[][3] = {
        { "POST", "/geo/tkey", COMPANY },
        { "POST", "/geo/tkey/remove", "{\"members\":[\"jd\"]}" },
        { "GET", "/geo/tkey/pos?member=jd", NULL },
        { "GET", "/geo/tkey/hash?member=jd", NULL },
        { "GET", "/geo/tkey/dist?from=jd&to=xiaomi", NULL },
        { "GET", "/geo/nearby?key=tkey&lon=0&lat=0&radius=1&unit=m", NULL },
        { "GET", "/geo/nearby?key=tkey&member=jd&radius=1&unit=m", NULL },
        { "POST", "/geo/gnew/store?source=tkey&lon=0&lat=0&radius=1&unit=m", NULL },
        { "POST", "/geo/tkey/store?source=gnew&lon=0&lat=0&radius=1&unit=m", NULL },
    };
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        r = http(&T, reqs[i][0], reqs[i][1], reqs[i][2], NULL);
        assert_error(&r, 409, "WRONGTYPE");
        assert_non_null(strstr(r.body, "key holds a rate limiter (throttle), not a geo set (geo)"));
        http_free(&r);
    }
    /* and the other way round */
    expect_body("POST", "/geo/gkey", COMPANY, 200, "{\"added\":3}");
    r = http(&T, "POST", "/throttle", "{\"key\":\"gkey\",\"max_burst\":5,\"count_per_period\":1,\"period\":60}",
             NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
}

/* Snapshot on SIGTERM, journal replay after SIGKILL. */
static void test_persistence(void **state)
{
    (void)state;
    tally_proc_t P;
    tally_start(&P, NULL, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", P.dir);
    const char *check = "/geo/nearby?key=p&lon=116.5&lat=39.9&radius=50&unit=km&withdist=1&withhash=1&withcoord=1";
    http_resp_t r = http(&P, "POST", "/geo/p", COMPANY, NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&P, "POST", "/geo/p", "{\"members\":[{\"member\":\"jd\",\"lon\":116.6,\"lat\":39.8},{\"member\":\"x\",\"lon\":116.5,\"lat\":39.9}]}", NULL);
    http_free(&r);
    r = http(&P, "POST", "/geo/p/remove", "{\"members\":[\"xiaomi\"]}", NULL);
    http_free(&r);
    http_resp_t want = http(&P, "GET", check, NULL, NULL);
    assert_status(&want, 200);

    char log[300];
    snprintf(log, sizeof(log), "%s", P.log);
    assert_int_equal(tally_stop(&P), 0);   /* snapshot */
    unlink(log);                             /* the harness reads the port from a fresh log */
    tally_start(&P, dir, NULL);
    r = http(&P, "GET", check, NULL, NULL);
    assert_string_equal(r.body, want.body);
    http_free(&r);

    r = http(&P, "POST", "/geo/p", "{\"members\":[{\"member\":\"y\",\"lon\":116.51,\"lat\":39.91}]}", NULL);
    http_free(&r);
    /* GEOSEARCHSTORE into a new key and into the source itself: journaled */
    const char *check_q = "/geo/nearby?key=q&lon=116.5&lat=39.9&radius=50&unit=km&withdist=1&withhash=1&withcoord=1";
    r = http(&P, "POST", "/geo/q/store?source=p&lon=116.5&lat=39.9&radius=20&unit=km", NULL, NULL);
    assert_status(&r, 200);
    assert_true(json_int_of(&r, "stored") >= 2);
    http_free(&r);
    r = http(&P, "POST", "/geo/p/store?source=p&member=x&radius=5&unit=km&count=2&sort=asc", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    http_free(&want);
    want = http(&P, "GET", check, NULL, NULL);
    http_resp_t want_q = http(&P, "GET", check_q, NULL, NULL);
    tally_kill(&P);                          /* journal replay */
    unlink(log);
    tally_start(&P, dir, NULL);
    r = http(&P, "GET", check, NULL, NULL);
    assert_string_equal(r.body, want.body);
    http_free(&r);
    r = http(&P, "GET", check_q, NULL, NULL);
    assert_string_equal(r.body, want_q.body);
    http_free(&r);
    http_free(&want);
    http_free(&want_q);
    tally_stop(&P);
    tmpdir_remove(dir);
    unlink(log);
}

/* ------------------------------------------------------------------------ */
/* Differential against Redis                                               */
/* ------------------------------------------------------------------------ */

#define NPOINTS 6000
#define NQUERIES 3000

typedef struct pt {
    char name[40];
    double lon, lat;
} pt_t;

static const char *const unit_names[] = { "m", "km", "mi", "ft" };

static double urand(rng_t *r, double lo, double hi) { return lo + (hi - lo) * rng_double(r); }

/* A point from one of the interesting regions. */
static void random_point(rng_t *r, const pt_t *pts, int npts, double *lon, double *lat)
{
    switch (rng_next(r) % 9) {
    case 0: /* anywhere */
        *lon = urand(r, -180, 180);
        *lat = urand(r, GEO_LAT_MIN, GEO_LAT_MAX);
        break;
    case 1: /* near the poles, including the limits */
        *lon = urand(r, -180, 180);
        *lat = rng_next(r) % 8 == 0 ? (rng_next(r) % 2 ? 85.05112878 : -85.05112878)
                                    : (rng_next(r) % 2 ? 1 : -1) * urand(r, 78, 85.05112878);
        break;
    case 2: /* along the antimeridian, including +-180 */
        *lon = rng_next(r) % 8 == 0 ? (rng_next(r) % 2 ? 180.0 : -180.0) : (rng_next(r) % 2 ? 1 : -1) * urand(r, 179, 180);
        *lat = urand(r, -60, 60);
        break;
    case 3: /* along the equator, including 0 */
        *lon = urand(r, -180, 180);
        *lat = rng_next(r) % 8 == 0 ? 0.0 : urand(r, -0.5, 0.5);
        break;
    case 4: /* a dense cluster (Beijing) */
        *lon = 116.4 + urand(r, -0.05, 0.05);
        *lat = 39.9 + urand(r, -0.05, 0.05);
        break;
    case 5: /* a very dense cluster: metres apart */
        *lon = 2.3522 + urand(r, -0.0002, 0.0002);
        *lat = 48.8566 + urand(r, -0.0002, 0.0002);
        break;
    case 6: /* exactly an existing point (identical positions) */
        if (npts > 0) {
            const pt_t *p = &pts[rng_next(r) % (uint64_t)npts];
            *lon = p->lon;
            *lat = p->lat;
            break;
        }
        /* fall through */
    case 7: /* a shared meridian (equal longitudes) */
        *lon = (double)(int)urand(r, -180, 180);
        *lat = urand(r, -80, 80);
        break;
    default: /* mid latitudes near a few cities */
        *lon = -74.006 + urand(r, -3, 3);
        *lat = 40.7128 + urand(r, -3, 3);
        break;
    }
}

static char *http_query_escape(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1);
    api_escape_segment(s, n, out);
    return out;
}

/* Redis's GEOPOS/WITHCOORD text of a double. */
static void redis_coord(double v, char *out, size_t n)
{
    snprintf(out, n, "%.17Lf", (long double)v);
    char *dot = strchr(out, '.');
    if (dot) {
        char *e = out + strlen(out) - 1;
        while (e > dot && *e == '0')
            *e-- = '\0';
        if (e == dot)
            *e = '\0';
    }
}

static void check_coord(json_t *v, const resp_t *want, const char *what, const char *ctx)
{
    char buf[64];
    if (!json_is_real(v))
        fail_msg("%s: %s is not a real (%s)", ctx, what, want->str);
    redis_coord(json_real_value(v), buf, sizeof(buf));
    if (strcmp(buf, want->str) != 0)
        fail_msg("%s: %s %s, Redis %s", ctx, what, buf, want->str);
}

static void check_dist(json_t *v, const resp_t *want, const char *ctx)
{
    if (!json_is_real(v) || json_real_value(v) != strtod(want->str, NULL))
        fail_msg("%s: distance %.17g, Redis %s", ctx, json_is_real(v) ? json_real_value(v) : -1.0, want->str);
}

/* Both answers side by side, for a failure message. */
static void dump_both(const resp_t *rv, json_t *res, bool opts)
{
    size_t n = rv->n > json_array_size(res) ? rv->n : json_array_size(res);
    for (size_t i = 0; i < n; i++) {
        const char *rm = "-", *rd = "", *tm = "-";
        if (i < rv->n) {
            const resp_t *it = rv->elems[i];
            rm = opts ? it->elems[0]->str : it->str;
            rd = opts && it->n > 1 && it->elems[1]->kind == RESP_BULK ? it->elems[1]->str : "";
        }
        json_t *o = json_array_get(res, i);
        if (o)
            tm = json_string_value(json_object_get(o, "member"));
        json_t *d = o ? json_object_get(o, "distance") : NULL;
        long long rh = i < rv->n && opts && rv->elems[i]->n > 2 && rv->elems[i]->elems[2]->kind == RESP_INT
                           ? rv->elems[i]->elems[2]->integer : -1;
        json_t *th = o ? json_object_get(o, "hash") : NULL;
        print_message("  %3zu redis %-10s %-14s %lld tally %-10s %.4f %lld\n", i, rm, rd, rh, tm,
                      d ? json_real_value(d) : -1.0, th ? (long long)json_integer_value(th) : -1LL);
    }
}

/* Compares a GEOSEARCH reply (WITHDIST WITHHASH WITHCOORD as flagged) with our results. */
static void compare_search(const resp_t *rv, const http_resp_t *hr, bool wd, bool wh, bool wc, const char *ctx)
{
    if (rv->kind == RESP_ERROR)
        fail_msg("%s: Redis error %s", ctx, rv->str);
    if (hr->status != 200 || !hr->json)
        fail_msg("%s: tally %ld %s", ctx, hr->status, hr->body);
    json_t *res = json_object_get(hr->json, "results");
    assert_int_equal(rv->kind, RESP_ARRAY);
    if (json_array_size(res) != rv->n) {
        dump_both(rv, res, wd || wh || wc);
        fail_msg("%s: %zu results, Redis %zu", ctx, json_array_size(res), rv->n);
    }
    bool opts = wd || wh || wc;
    for (size_t i = 0; i < rv->n; i++) {
        const resp_t *it = rv->elems[i];
        const resp_t *name = opts ? it->elems[0] : it;
        json_t *o = json_array_get(res, i);
        const char *m = json_string_value(json_object_get(o, "member"));
        if (!m || strcmp(m, name->str) != 0) {
            dump_both(rv, res, opts);
            fail_msg("%s: result %zu is %s, Redis %s", ctx, i, m ? m : "?", name->str);
        }
        size_t k = 1;
        if (wd)
            check_dist(json_object_get(o, "distance"), it->elems[k++], ctx);
        if (wh) {
            json_t *h = json_object_get(o, "hash");
            if (!json_is_integer(h) || json_integer_value(h) != it->elems[k]->integer)
                fail_msg("%s: hash of %s differs (Redis %lld)", ctx, m, it->elems[k]->integer);
            k++;
        }
        if (wc) {
            check_coord(json_object_get(o, "lon"), it->elems[k]->elems[0], "lon", ctx);
            check_coord(json_object_get(o, "lat"), it->elems[k]->elems[1], "lat", ctx);
        }
    }
}

static void num_arg(char *out, size_t n, double v) { snprintf(out, n, "%.17g", v); }

/* Loads pts[from, to) into both servers with GEOADD / POST /geo/{key}. */
static void load_points(redis_ref_t *rr, const char *key, const pt_t *pts, int from, int to)
{
    enum { BATCH = 500 };
    for (int b = from; b < to; b += BATCH) {
        int e = b + BATCH < to ? b + BATCH : to;
        const char **argv = malloc((size_t)(2 + 3 * (e - b)) * sizeof(*argv));
        char(*nums)[2][32] = malloc((size_t)(e - b) * sizeof(*nums));
        size_t cap = (size_t)(e - b) * 128 + 32, len = 0;
        char *body = malloc(cap);
        int argc = 0;
        argv[argc++] = "GEOADD";
        argv[argc++] = key;
        len += (size_t)snprintf(body + len, cap - len, "{\"members\":[");
        for (int i = b; i < e; i++) {
            num_arg(nums[i - b][0], 32, pts[i].lon);
            num_arg(nums[i - b][1], 32, pts[i].lat);
            argv[argc++] = nums[i - b][0];
            argv[argc++] = nums[i - b][1];
            argv[argc++] = pts[i].name;
            json_t *js = json_string(pts[i].name);
            char *jm = json_dumps(js, JSON_ENCODE_ANY);
            len += (size_t)snprintf(body + len, cap - len, "%s{\"member\":%s,\"lon\":%s,\"lat\":%s}", i > b ? "," : "",
                                    jm, nums[i - b][0], nums[i - b][1]);
            free(jm);
            json_decref(js);
        }
        snprintf(body + len, cap - len, "]}");
        resp_t *rv = redis_cmdv(rr, argc, argv, NULL);
        char path[64];
        snprintf(path, sizeof(path), "/geo/%s", key);
        http_resp_t hr = http(&T, "POST", path, body, NULL);
        assert_status(&hr, 200);
        if (rv->kind != RESP_INT || json_int_of(&hr, "added") != rv->integer)
            fail_msg("GEOADD batch at %d: tally added %lld, Redis %lld", b, json_int_of(&hr, "added"), rv->integer);
        resp_free(rv);
        http_free(&hr);
        free(body);
        free(nums);
        free(argv);
    }
}

/* Geo set `key` in both servers, compared through two searches that
 * together cover the globe (from 0,0 and from 180,0, 30 000 km, with
 * hashes: every member and its score), answered identically. */
static void compare_set(redis_ref_t *rr, const char *key, const char *ctx)
{
    static const char *const lons[] = { "0", "180" };
    for (int i = 0; i < 2; i++) {
        const char *gv[] = { "GEOSEARCH", key, "FROMLONLAT", lons[i], "0", "BYRADIUS", "30000", "km", "ASC",
                             "WITHHASH" };
        resp_t *rv = redis_cmdv(rr, 10, gv, NULL);
        char path[160], c[1400];
        snprintf(path, sizeof(path), "/geo/nearby?key=%s&lon=%s&lat=0&radius=30000&unit=km&sort=asc&withhash=true",
                 key, lons[i]);
        snprintf(c, sizeof(c), "%s, then %s", ctx, path);
        http_resp_t hr = http(&T, "GET", path, NULL, NULL);
        compare_search(rv, &hr, false, true, false, c);
        resp_free(rv);
        http_free(&hr);
    }
}

/* GEOSEARCHSTORE "stored" <the search argv[2..argc)> against POST
 * /geo/stored/store?source=<the search's query>: the same count, the same
 * set (none: the destination deleted in both). */
static void compare_store(redis_ref_t *rr, const char *key, const char *const *argv, int argc, const char *path,
                          size_t pl)
{
    const char *sv[24] = { "GEOSEARCHSTORE", "stored", key };
    int sc = 3;
    for (int i = 2; i < argc; i++)
        sv[sc++] = argv[i];
    resp_t *rv = redis_cmdv(rr, sc, sv, NULL);
    if (rv->kind != RESP_INT)
        fail_msg("GEOSEARCHSTORE: %s", rv->kind == RESP_ERROR ? rv->str : "not an integer");
    const char *q = strchr(path, '&');   /* after key=<key> */
    char spath[1100];
    snprintf(spath, sizeof(spath), "/geo/stored/store?source=%s%.*s", key, (int)(pl - (size_t)(q - path)), q);
    http_resp_t hr = http(&T, "POST", spath, NULL, NULL);
    assert_status(&hr, 200);
    if (json_int_of(&hr, "stored") != rv->integer)
        fail_msg("%s: stored %lld, Redis %lld", spath, json_int_of(&hr, "stored"), rv->integer);
    http_free(&hr);
    if (rv->integer == 0) {
        hr = http(&T, "GET", "/keys/stored", NULL, NULL);
        assert_error(&hr, 404, "NOT_FOUND");
        http_free(&hr);
    } else {
        compare_set(rr, "stored", spath);
    }
    resp_free(rv);
}

static void test_differential(void **state)
{
    (void)state;
    redis_ref_t rr;
    if (!redis_ref_start(&rr))
        skip();
    rng_t r;
    /* GEO_SEED=n explores other datasets; the default is the one CI runs */
    rng_seed(&r, getenv("GEO_SEED") ? strtoull(getenv("GEO_SEED"), NULL, 10) : 0x67656f);
    const char *key = "world";
    pt_t *pts = calloc(NPOINTS, sizeof(*pts));
    for (int i = 0; i < NPOINTS; i++) {
        random_point(&r, pts, i, &pts[i].lon, &pts[i].lat);
        /* mostly plain names; some that need escaping in JSON and URLs */
        static const char *const odd[] = { "caf\xc3\xa9", "a b", "q\"uote", "sl/ash", "plus+sign", "pct%25", "\xe6\x9d\xb1" };
        if (i % 97 == 0)
            snprintf(pts[i].name, sizeof(pts[i].name), "%s-%d", odd[(i / 97) % 7], i);
        else
            snprintf(pts[i].name, sizeof(pts[i].name), "p%d", i);
    }
    load_points(&rr, key, pts, 0, NPOINTS);

    /* updates with NX/XX and a few removals, compared too */
    for (int i = 0; i < 300; i++) {
        int j = (int)(rng_next(&r) % NPOINTS);
        double lon, lat;
        random_point(&r, pts, NPOINTS, &lon, &lat);
        const char *flag = i % 3 == 0 ? "NX" : i % 3 == 1 ? "XX" : NULL;
        char a[32], b[32];
        num_arg(a, sizeof(a), lon);
        num_arg(b, sizeof(b), lat);
        bool ch = i % 4 < 2;   /* CH with every flag, and without */
        const char *argv[7] = { "GEOADD", key };
        int argc = 2;
        if (flag)
            argv[argc++] = flag;
        if (ch)
            argv[argc++] = "CH";
        argv[argc++] = a;
        argv[argc++] = b;
        argv[argc++] = pts[j].name;
        resp_t *rv = redis_cmdv(&rr, argc, argv, NULL);
        json_t *js = json_string(pts[j].name);
        char *jm = json_dumps(js, JSON_ENCODE_ANY);
        char body[256];
        snprintf(body, sizeof(body), "{\"members\":[{\"member\":%s,\"lon\":%s,\"lat\":%s}]%s%s}", jm, a, b,
                 flag ? (i % 3 == 0 ? ",\"nx\":true" : ",\"xx\":true") : "", ch ? ",\"ch\":true" : "");
        http_resp_t hr = http(&T, "POST", "/geo/world", body, NULL);
        assert_int_equal(json_int_of(&hr, "added"), rv->integer);
        if (!flag || i % 3 == 1) {
            pts[j].lon = lon;
            pts[j].lat = lat;
        }
        free(jm);
        json_decref(js);
        resp_free(rv);
        http_free(&hr);
    }

    if (getenv("GEO_DEBUG_DUMP")) {   /* the final positions, for replaying a failure by hand */
        FILE *f = fopen(getenv("GEO_DEBUG_DUMP"), "w");
        for (int i = 0; i < NPOINTS; i++)
            fprintf(f, "%.17g %.17g %s\n", pts[i].lon, pts[i].lat, pts[i].name);
        fclose(f);
    }
    char path[1024], a1[32], a2[32], a3[32];
    int nonempty = 0, cut = 0;
    for (int q = 0; q < NQUERIES; q++) {
        /* centre */
        bool by_member = rng_next(&r) % 2;
        const pt_t *cm = &pts[rng_next(&r) % NPOINTS];
        double lon, lat;
        random_point(&r, pts, NPOINTS, &lon, &lat);
        /* shape: sizes log-uniform from metres to thousands of km */
        bool box = rng_next(&r) % 3 == 0;
        const char *unit = unit_names[rng_next(&r) % 4];
        double to_m = strcmp(unit, "m") == 0 ? 1 : strcmp(unit, "km") == 0 ? 1000 : strcmp(unit, "mi") == 0 ? 1609.34 : 0.3048;
        double size_m = pow(10, urand(&r, 0.5, rng_next(&r) % 4 == 0 ? 7.3 : 5.5));
        if (rng_next(&r) % 50 == 0)
            size_m = 0;
        double size = size_m / to_m, size2 = pow(10, urand(&r, 0.5, 6)) / to_m;
        uint64_t count = rng_next(&r) % 3 == 0 ? 0 : 1 + rng_next(&r) % 40;
        bool any = count && rng_next(&r) % 4 == 0;
        int sort = (int)(rng_next(&r) % 3);   /* none, asc, desc */
        bool wd = rng_next(&r) % 8 != 0, wh = rng_next(&r) % 8 != 0, wc = rng_next(&r) % 8 != 0;

        const char *argv[24];
        int argc = 0;
        argv[argc++] = "GEOSEARCH";
        argv[argc++] = key;
        size_t pl = (size_t)snprintf(path, sizeof(path), "/geo/nearby?key=%s", key);
        if (by_member) {
            argv[argc++] = "FROMMEMBER";
            argv[argc++] = cm->name;
            char *esc = http_query_escape(cm->name);
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&member=%s", esc);
            free(esc);
        } else {
            num_arg(a1, sizeof(a1), lon);
            num_arg(a2, sizeof(a2), lat);
            argv[argc++] = "FROMLONLAT";
            argv[argc++] = a1;
            argv[argc++] = a2;
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&lon=%s&lat=%s", a1, a2);
        }
        char s1[32], s2[32];
        num_arg(s1, sizeof(s1), size);
        num_arg(s2, sizeof(s2), size2);
        if (box) {
            argv[argc++] = "BYBOX";
            argv[argc++] = s1;
            argv[argc++] = s2;
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&width=%s&height=%s", s1, s2);
        } else {
            argv[argc++] = "BYRADIUS";
            argv[argc++] = s1;
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&radius=%s", s1);
        }
        argv[argc++] = unit;
        pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&unit=%s", unit);
        if (sort) {
            argv[argc++] = sort == 1 ? "ASC" : "DESC";
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&sort=%s", sort == 1 ? "asc" : "desc");
        }
        if (count) {
            snprintf(a3, sizeof(a3), "%llu", (unsigned long long)count);
            argv[argc++] = "COUNT";
            argv[argc++] = a3;
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&count=%s", a3);
            if (any) {
                argv[argc++] = "ANY";
                pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&any=true");
            }
        }
        if (q % 4 == 0)
            compare_store(&rr, key, argv, argc, path, pl);
        if (wd) {
            argv[argc++] = "WITHDIST";
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&withdist=true");
        }
        if (wh) {
            argv[argc++] = "WITHHASH";
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&withhash=true");
        }
        if (wc) {
            argv[argc++] = "WITHCOORD";
            pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "&withcoord=true");
        }
        resp_t *rv = redis_cmdv(&rr, argc, argv, NULL);
        http_resp_t hr = http(&T, "GET", path, NULL, NULL);
        char ctx[1100];
        snprintf(ctx, sizeof(ctx), "query %d %s", q, path);
        compare_search(rv, &hr, wd, wh, wc, ctx);
        nonempty += rv->n > 0;
        cut += count && rv->n == count;
        resp_free(rv);
        http_free(&hr);
    }
    print_message("geo differential: %d points, %d queries (%d non-empty, %d cut by COUNT) equal to Redis\n",
                  NPOINTS, NQUERIES, nonempty, cut);
    assert_true(nonempty > NQUERIES / 3);

    /* GEORADIUS and GEORADIUSBYMEMBER are the same search */
    for (int q = 0; q < 100; q++) {
        const pt_t *cm = &pts[rng_next(&r) % NPOINTS];
        num_arg(a1, sizeof(a1), pow(10, urand(&r, 1, 6)));
        const char *argv[] = { "GEORADIUSBYMEMBER", key, cm->name, a1, "m", "WITHDIST", "WITHHASH", "WITHCOORD" };
        resp_t *rv = redis_cmdv(&rr, 8, argv, NULL);
        char *esc = http_query_escape(cm->name);
        snprintf(path, sizeof(path), "/geo/nearby?key=%s&member=%s&radius=%s&unit=m&withdist=1&withhash=1&withcoord=1",
                 key, esc, a1);
        free(esc);
        http_resp_t hr = http(&T, "GET", path, NULL, NULL);
        compare_search(rv, &hr, true, true, true, path);
        resp_free(rv);
        http_free(&hr);
    }

    /* GEOPOS, GEOHASH and GEODIST in every unit */
    for (int q = 0; q < 1000; q++) {
        const pt_t *x = &pts[rng_next(&r) % NPOINTS], *y = &pts[rng_next(&r) % NPOINTS];
        const char *unit = unit_names[q % 4];
        char *ex = http_query_escape(x->name), *ey = http_query_escape(y->name);
        const char *dv[] = { "GEODIST", key, x->name, y->name, unit };
        resp_t *rv = redis_cmdv(&rr, 5, dv, NULL);
        snprintf(path, sizeof(path), "/geo/%s/dist?from=%s&to=%s&unit=%s", key, ex, ey, unit);
        http_resp_t hr = http(&T, "GET", path, NULL, NULL);
        check_dist(json_object_get(hr.json, "distance"), rv, path);
        resp_free(rv);
        http_free(&hr);

        const char *pv[] = { "GEOPOS", key, x->name, "nosuchmember" };
        rv = redis_cmdv(&rr, 4, pv, NULL);
        snprintf(path, sizeof(path), "/geo/%s/pos?member=%s&member=nosuchmember", key, ex);
        hr = http(&T, "GET", path, NULL, NULL);
        json_t *ps = json_object_get(hr.json, "positions");
        check_coord(json_object_get(json_array_get(ps, 0), "lon"), rv->elems[0]->elems[0], "lon", path);
        check_coord(json_object_get(json_array_get(ps, 0), "lat"), rv->elems[0]->elems[1], "lat", path);
        assert_true(json_is_null(json_array_get(ps, 1)));
        resp_free(rv);
        http_free(&hr);

        const char *hv[] = { "GEOHASH", key, y->name };
        rv = redis_cmdv(&rr, 3, hv, NULL);
        snprintf(path, sizeof(path), "/geo/%s/hash?member=%s", key, ey);
        hr = http(&T, "GET", path, NULL, NULL);
        assert_string_equal(json_string_value(json_array_get(json_object_get(hr.json, "hashes"), 0)), rv->elems[0]->str);
        resp_free(rv);
        http_free(&hr);
        free(ex);
        free(ey);
    }

    /* GEOPOS and GEOHASH with only a key (present or missing): empty in both */
    static const char *const key_only[][2] = { { "GEOPOS", "pos" }, { "GEOHASH", "hash" } };
    for (int k = 0; k < 2; k++) {
        for (int missing = 0; missing < 2; missing++) {
            const char *kv[] = { key_only[k][0], missing ? "nosuchkey" : key };
            resp_t *rv = redis_cmdv(&rr, 2, kv, NULL);
            assert_int_equal(rv->kind, RESP_ARRAY);
            assert_int_equal(rv->n, 0);
            snprintf(path, sizeof(path), "/geo/%s/%s", kv[1], key_only[k][1]);
            http_resp_t hr = http(&T, "GET", path, NULL, NULL);
            assert_status(&hr, 200);
            json_t *list = json_object_get(hr.json, k ? "hashes" : "positions");
            assert_true(json_is_array(list));
            assert_int_equal(json_array_size(list), rv->n);
            resp_free(rv);
            http_free(&hr);
        }
    }

    /* removals, then a missing centre member errors in both */
    for (int i = 0; i < NPOINTS; i += 7) {
        const char *zv[] = { "ZREM", key, pts[i].name };
        resp_t *rv = redis_cmdv(&rr, 3, zv, NULL);
        json_t *js = json_pack("{s:[s]}", "members", pts[i].name);
        char *body = json_dumps(js, 0);
        http_resp_t hr = http(&T, "POST", "/geo/world/remove", body, NULL);
        assert_int_equal(json_int_of(&hr, "removed"), rv->integer);
        free(body);
        json_decref(js);
        resp_free(rv);
        http_free(&hr);
    }
    const char *mv[] = { "GEOSEARCH", key, "FROMMEMBER", pts[0].name, "BYRADIUS", "10", "km" };
    resp_t *rv = redis_cmdv(&rr, 7, mv, NULL);
    assert_int_equal(rv->kind, RESP_ERROR);
    assert_non_null(strstr(rv->str, "could not decode requested zset member"));
    resp_free(rv);
    char *esc = http_query_escape(pts[0].name);
    snprintf(path, sizeof(path), "/geo/nearby?key=%s&member=%s&radius=10&unit=km", key, esc);
    free(esc);
    http_resp_t hr = http(&T, "GET", path, NULL, NULL);
    assert_error(&hr, 404, "NOT_FOUND");
    http_free(&hr);
    /* after removals the answers still agree */
    for (int q = 0; q < 200; q++) {
        double lon, lat;
        random_point(&r, pts, NPOINTS, &lon, &lat);
        num_arg(a1, sizeof(a1), lon);
        num_arg(a2, sizeof(a2), lat);
        num_arg(a3, sizeof(a3), pow(10, urand(&r, 1, 6.5)));
        const char *argv[] = { "GEOSEARCH", key, "FROMLONLAT", a1, a2, "BYRADIUS", a3, "m", "COUNT", "25", "DESC",
                               "WITHDIST", "WITHHASH", "WITHCOORD" };
        rv = redis_cmdv(&rr, 14, argv, NULL);
        snprintf(path, sizeof(path),
                 "/geo/nearby?key=%s&lon=%s&lat=%s&radius=%s&unit=m&count=25&sort=desc&withdist=1&withhash=1&withcoord=1",
                 key, a1, a2, a3);
        hr = http(&T, "GET", path, NULL, NULL);
        compare_search(rv, &hr, true, true, true, path);
        resp_free(rv);
        http_free(&hr);
    }
    free(pts);
    redis_ref_stop(&rr);
}

/* Many equal distances cut by COUNT: Redis's partial quicksort decides which
 * members come first, and so must ours.  Small sets (where the quicksort's
 * insertion-sort and median choices all come into play) of a few distinct
 * positions each, many counts, both directions. */
static void test_differential_ties(void **state)
{
    (void)state;
    redis_ref_t rr;
    if (!redis_ref_start(&rr))
        skip();
    rng_t r;
    rng_seed(&r, 4242);
    pt_t *pts = calloc(200, sizeof(*pts));
    char path[512], a3[32], key[32];
    for (int t = 0; t < 400; t++) {
        snprintf(key, sizeof(key), "ties%d", t);
        int n = 2 + (int)(rng_next(&r) % 150), ngroups = 1 + (int)(rng_next(&r) % 12);
        double gl[12][2];
        for (int g = 0; g < ngroups; g++) {
            gl[g][0] = 10 + (double)(rng_next(&r) % 300) * 0.001;
            gl[g][1] = 20 + (double)(rng_next(&r) % 300) * 0.001;
        }
        for (int i = 0; i < n; i++) {
            int g = (int)(rng_next(&r) % (uint64_t)ngroups);
            pts[i].lon = gl[g][0];
            pts[i].lat = gl[g][1];
            snprintf(pts[i].name, sizeof(pts[i].name), "t%d", (int)(rng_next(&r) % 100000));
        }
        load_points(&rr, key, pts, 0, n);
        for (int q = 0; q < 4; q++) {
            bool desc = rng_next(&r) % 2;
            snprintf(a3, sizeof(a3), "%d", 1 + (int)(rng_next(&r) % (uint64_t)n));
            const char *argv[] = { "GEOSEARCH", key, "FROMLONLAT", "10.15", "20.15", "BYRADIUS", "1000", "km", "COUNT", a3,
                                   desc ? "DESC" : "ASC", "WITHDIST" };
            resp_t *rv = redis_cmdv(&rr, 12, argv, NULL);
            snprintf(path, sizeof(path),
                     "/geo/nearby?key=%s&lon=10.15&lat=20.15&radius=1000&unit=km&count=%s&sort=%s&withdist=1", key, a3,
                     desc ? "desc" : "asc");
            http_resp_t hr = http(&T, "GET", path, NULL, NULL);
            compare_search(rv, &hr, true, false, false, path);
            resp_free(rv);
            http_free(&hr);
        }
    }
    free(pts);
    redis_ref_stop(&rr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_transcript),
        cmocka_unit_test(test_missing_things),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wrongtype),
        cmocka_unit_test(test_persistence),
        cmocka_unit_test(test_differential),
        cmocka_unit_test(test_differential_ties),
    };
    return cmocka_run_group_tests_name("geo", tests, setup, teardown);
}
