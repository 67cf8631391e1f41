/*
 * test_geo.c - the geo set and Redis's geohash arithmetic.
 *
 * The seeds' transcript (Redis GEO commands on four Beijing companies) is
 * checked digit for digit: scores, GEOPOS printed as Redis prints it
 * (%.17Lf, trailing zeros trimmed), GEODIST and WITHDIST at 4 decimals,
 * GEOHASH strings, and the GEORADIUSBYMEMBER / GEORADIUS answers.  The set
 * itself is checked through GEOADD's flags, snapshot round-trips and hostile
 * encodings (its order against a model: test_zindex.c).  Search results are
 * compared with a real Redis in tests/integration/it_geo.c.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/geo.h"
#include "core/geohash.h"
#include "core/rng.h"

/* Redis's GEOPOS text: %.17Lf with trailing zeros (and a bare '.') removed. */
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

static void dist4(double v, char *out, size_t n) { geo_format_distance(v, out, n); }

typedef struct company {
    const char *name;
    double lon, lat;
} company_t;

static const company_t seeds[] = {
    { "meituan", 116.489033, 40.007669 },
    { "jd", 116.562108, 39.787602 },
    { "xiaomi", 116.334255, 40.027400 },
    { "juejin", 116.48105, 39.996794 },
};

static geo_t *seed_set(void)
{
    geo_t *g = geo_create();
    assert_non_null(g);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(geo_set(g, seeds[i].name, strlen(seeds[i].name),
                                 geohash_score(seeds[i].lon, seeds[i].lat), GEO_ADD),
                         GEO_SET_ADDED);
    return g;
}

static void pos_of(const geo_t *g, const char *m, double *lon, double *lat)
{
    uint64_t s;
    assert_true(geo_score(g, m, strlen(m), &s));
    geohash_decode_score(s, lon, lat);
}

static void test_seed_transcript(void **state)
{
    (void)state;
    geo_t *g = seed_set();
    char buf[64];
    uint64_t s;
    assert_true(geo_score(g, "meituan", 7, &s));
    assert_int_equal(s, 4069887179083478ULL);

    /* geodist company a b km */
    static const struct {
        const char *a, *b, *km;
    } d[] = { { "meituan", "juejin", "1.3878" },
              { "jd", "meituan", "25.2590" },
              { "jd", "xiaomi", "33.0047" },
              { "meituan", "xiaomi", "13.3659" } };
    for (size_t i = 0; i < 4; i++) {
        double x1, y1, x2, y2;
        pos_of(g, d[i].a, &x1, &y1);
        pos_of(g, d[i].b, &x2, &y2);
        dist4(geo_distance(x1, y1, x2, y2) / GEO_UNIT_KM, buf, sizeof(buf));
        assert_string_equal(buf, d[i].km);
    }

    /* geopos company meituan */
    double lon, lat;
    pos_of(g, "meituan", &lon, &lat);
    redis_coord(lon, buf, sizeof(buf));
    assert_string_equal(buf, "116.48903220891952515");
    redis_coord(lat, buf, sizeof(buf));
    assert_string_equal(buf, "40.00766997707732031");

    /* geohash company jd / meituan */
    char h[12];
    assert_true(geo_score(g, "jd", 2, &s));
    geohash_string(s, h);
    assert_string_equal(h, "wx4fk7jgtf0");
    assert_true(geo_score(g, "meituan", 7, &s));
    geohash_string(s, h);
    assert_string_equal(h, "wx4gdg0tx40");

    /* georadiusbymember company meituan 20 km withcoord withdist withhash count 3 asc */
    geo_query_t q = { .shape = { .kind = GEO_SHAPE_RADIUS, .radius = 20, .to_m = GEO_UNIT_KM },
                      .count = 3,
                      .sort = GEO_SORT_ASC };
    pos_of(g, "meituan", &q.shape.lon, &q.shape.lat);
    geo_hit_t *hits;
    size_t n;
    assert_true(geo_search(g, &q, &hits, &n));
    static const struct {
        const char *m, *dist;
        uint64_t hash;
        const char *lon, *lat;
    } want[] = { { "meituan", "0.0000", 4069887179083478ULL, "116.48903220891952515", "40.00766997707732031" },
                 { "juejin", "1.3878", 4069887154388167ULL, "116.48104995489120483", "39.99679348858259686" },
                 { "xiaomi", "13.3659", 4069880904286516ULL, "116.33425265550613403", "40.02740024658161389" } };
    assert_int_equal(n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(hits[i].len, strlen(want[i].m));
        assert_memory_equal(hits[i].member, want[i].m, hits[i].len);
        dist4(hits[i].dist, buf, sizeof(buf));
        assert_string_equal(buf, want[i].dist);
        assert_int_equal(hits[i].score, want[i].hash);
        redis_coord(hits[i].lon, buf, sizeof(buf));
        assert_string_equal(buf, want[i].lon);
        redis_coord(hits[i].lat, buf, sizeof(buf));
        assert_string_equal(buf, want[i].lat);
    }
    free(hits);

    /* georadius company 116.514202 39.905409 20 km withdist count 3 asc */
    q.shape.lon = 116.514202;
    q.shape.lat = 39.905409;
    assert_true(geo_search(g, &q, &hits, &n));
    static const char *const want2[][2] = { { "juejin", "10.5501" }, { "meituan", "11.5748" }, { "jd", "13.7269" } };
    assert_int_equal(n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_memory_equal(hits[i].member, want2[i][0], hits[i].len);
        dist4(hits[i].dist, buf, sizeof(buf));
        assert_string_equal(buf, want2[i][1]);
    }
    free(hits);
    geo_free(g);
}

/* Edges as the real Redis 7.0 answers them (checked with redis-cli). */
static void test_edges(void **state)
{
    (void)state;
    assert_int_equal(geohash_score(-180, 0), 1125899906842624ULL);
    assert_int_equal(geohash_score(0, -85.05112878), 2251799813685248ULL);
    assert_int_equal(geohash_score(0, 85.05112878), 6755399441055744ULL);
    assert_int_equal(geohash_score(180, 0), 10133099161583616ULL);   /* above 2^53: rounded as a double */
    double lon, lat;
    char buf[64], h[12];
    geohash_decode_score(10133099161583616ULL, &lon, &lat);
    redis_coord(lon, buf, sizeof(buf));
    assert_string_equal(buf, "180");
    redis_coord(lat, buf, sizeof(buf));
    assert_string_equal(buf, "0.00000126736058093");
    geohash_decode_score(6755399441055744ULL, &lon, &lat);
    redis_coord(lat, buf, sizeof(buf));
    assert_string_equal(buf, "85.0511287799999991");
    geohash_string(10133099161583616ULL, h);
    assert_string_equal(h, "80000000000");
    geohash_string(1125899906842624ULL, h);
    assert_string_equal(h, "80000000000");
    geohash_string(2251799813685248ULL, h);
    assert_string_equal(h, "h0bh0hbj200");
    geohash_string(6755399441055744ULL, h);
    assert_string_equal(h, "up05b5048p0");
    assert_int_equal(geohash_score(179.99999999, 85.05112878), 7505999378950826ULL);
    geohash_string(7505999378950826ULL, h);
    assert_string_equal(h, "zzpgzgpfxz0");
    assert_false(geo_valid_lonlat(181, 0));
    assert_false(geo_valid_lonlat(0, 85.06));
    assert_true(geo_valid_lonlat(-180, -85.05112878));
    assert_int_equal(geohash_estimate_steps(0, 0), 26);
    assert_int_equal(geohash_estimate_steps(20000, 0), 9);
    assert_int_equal(geohash_estimate_steps(20000, 70), 8);
    assert_int_equal(geohash_estimate_steps(20000, -81), 7);
    assert_int_equal(geohash_estimate_steps(1e9, 0), 1);
}

/* Redis rounds d * 10^4 half-to-even: where that lands exactly on a half,
 * printf's "%.4f" (which rounds the exact binary value) says otherwise.
 * Pairs found by the differential test, with Redis 7.0's answers. */
static void test_distance_text(void **state)
{
    (void)state;
    char buf[40];
    geo_format_distance(0, buf, sizeof(buf));
    assert_string_equal(buf, "0.0000");
    geo_format_distance(1.38779, buf, sizeof(buf));
    assert_string_equal(buf, "1.3878");
    geo_format_distance(25.259, buf, sizeof(buf));
    assert_string_equal(buf, "25.2590");
    double x1, y1, x2, y2;
    geohash_decode_score(geohash_score(-75.125661342408023, 38.873834259906914), &x1, &y1);
    geohash_decode_score(geohash_score(44.55074876546859741, 18.84849450946530425), &x2, &y2);
    double d = geo_distance(x1, y1, x2, y2);
    snprintf(buf, sizeof(buf), "%.4f", d);
    assert_string_equal(buf, "11047474.5893");   /* printf */
    geo_format_distance(d, buf, sizeof(buf));
    assert_string_equal(buf, "11047474.5892");   /* Redis */
}

/* The integer fast path prints coordinates exactly as the JSON writer. */
static void test_coord_text(void **state)
{
    (void)state;
    /* the fast path against the general JSON number writer: tests/unit/test_api.c */
    char b[32];
    assert_true(geo_format_coord(180, b));
    assert_string_equal(b, "180.0");
    assert_true(geo_format_coord(116.48903220891952515, b));
    assert_string_equal(b, "116.48903220891953");
    assert_false(geo_format_coord(0.00000126736058093, b));   /* tiny: the general routine */
}

static void test_neighbors_wrap(void **state)
{
    (void)state;
    /* at step 1 the world is 2x2: every neighbour is one of the 4 cells */
    geohash_t h = { 0, 1 }, nb[8];
    geohash_neighbors(h, nb);
    for (int i = 0; i < 8; i++)
        assert_true(nb[i].bits < 4);
    /* east of the last column wraps to the first one */
    geohash_t e;
    assert_true(geohash_encode(179.9, 10, 10, &e));
    geohash_neighbors(e, nb);
    geo_area_t a;
    geohash_area(nb[2], &a);
    assert_true(a.lon_min == -180.0);
}

/* ------------------------------------------------------------------------ */
/* The set over its index (the order itself: tests/unit/test_zindex.c)      */
/* ------------------------------------------------------------------------ */

static geo_t *roundtrip(const geo_t *g)
{
    wbuf_t b = WBUF_INIT;
    geo_type.encode(g, &b);
    assert_false(b.oom);
    const char *why = NULL;
    geo_t *d = geo_type.decode(b.data, b.len, &why);
    if (!d)
        fail_msg("decode: %s", why);
    wbuf_t b2 = WBUF_INIT;
    geo_type.encode(d, &b2);
    assert_int_equal(b.len, b2.len);
    assert_memory_equal(b.data, b2.data, b.len);
    wbuf_free(&b);
    wbuf_free(&b2);
    return d;
}

/* GEOADD's flags and results, a member too long to add, and a snapshot
 * round trip of a big set with long runs of equal scores. */
static void test_set_and_snapshot(void **state)
{
    (void)state;
    enum { N = 100000 };
    geo_t *g = geo_create();
    char m[GEO_MEMBER_MAX + 2];
    memset(m, 'x', sizeof(m));
    assert_int_equal(geo_set(g, m, GEO_MEMBER_MAX + 1, 1, GEO_ADD), CORE_NOMEM);
    assert_int_equal(geo_set(g, m, GEO_MEMBER_MAX + 1, 1, GEO_ADD_XX), GEO_SET_SKIPPED);
    assert_int_equal(geo_set(g, "a", 1, 5, GEO_ADD_XX), GEO_SET_SKIPPED);
    assert_int_equal(geo_set(g, "a", 1, 5, GEO_ADD), GEO_SET_ADDED);
    assert_int_equal(geo_set(g, "a", 1, 6, GEO_ADD_NX), GEO_SET_SKIPPED);
    assert_int_equal(geo_set(g, "a", 1, 5, GEO_ADD), GEO_SET_UNCHANGED);
    assert_int_equal(geo_set(g, "a", 1, 6, GEO_ADD_XX), GEO_SET_UPDATED);
    assert_true(geo_remove(g, "a", 1));
    assert_false(geo_remove(g, "a", 1));
    for (int i = 0; i < N; i++) {
        int len = snprintf(m, sizeof(m), "member:%07d", i);
        assert_int_equal(geo_set(g, m, (size_t)len, (uint64_t)(i % 300) << 20, GEO_ADD), GEO_SET_ADDED);
    }
    size_t mem = geo_memory(g);
    print_message("geo: %d members, %.1f B/member\n", N, (double)mem / N);
    assert_true(mem / N < 110);
    geo_t *d = roundtrip(g);
    print_message("geo: %.1f B/member after a snapshot reload\n", (double)geo_memory(d) / N);
    assert_true(geo_memory(d) < mem);
    assert_int_equal(geo_count(d), N);
    uint64_t s;
    assert_true(geo_score(d, "member:0000301", 14, &s));
    assert_int_equal(s, (uint64_t)1 << 20);
    geo_free(g);
    geo_free(d);
}

/* ------------------------------------------------------------------------ */
/* Sorting and search                                                       */
/* ------------------------------------------------------------------------ */

static void test_pqsort_prefix(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 7);
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + rng_next(&r) % 300;
        geo_hit_t *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
        for (size_t i = 0; i < n; i++)
            a[i].dist = b[i].dist = (double)(rng_next(&r) % (round % 2 ? 5 : 1000));
        size_t hi = rng_next(&r) % n;
        bool desc = round % 3 == 0;
        geo_pqsort(a, n, desc, 0, hi);
        /* the first hi+1 are the smallest (largest) in order */
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (desc ? b[i].dist < b[j].dist : b[i].dist > b[j].dist) {
                    double t = b[i].dist;
                    b[i].dist = b[j].dist;
                    b[j].dist = t;
                }
        for (size_t i = 0; i <= hi; i++)
            assert_true(a[i].dist == b[i].dist);
        free(a);
        free(b);
    }
}

/* Every hit is inside the shape, and with a small shape far from the poles
 * the 9 cells see every member a brute force finds. */
static void test_search_vs_brute_force(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 99);
    geo_t *g = geo_create();
    enum { N = 20000 };
    char m[16];
    for (int i = 0; i < N; i++) {
        double lon = 10 + rng_double(&r) * 2, lat = 45 + rng_double(&r) * 2;
        int len = snprintf(m, sizeof(m), "p%d", i);
        geo_set(g, m, (size_t)len, geohash_score(lon, lat), GEO_ADD);
    }
    for (int k = 0; k < 50; k++) {
        geo_query_t q = { .shape = { .kind = k % 2 ? GEO_SHAPE_BOX : GEO_SHAPE_RADIUS,
                                     .lon = 10.5 + rng_double(&r),
                                     .lat = 45.5 + rng_double(&r),
                                     .radius = 1 + rng_double(&r) * 20,
                                     .width = 1 + rng_double(&r) * 30,
                                     .height = 1 + rng_double(&r) * 30,
                                     .to_m = GEO_UNIT_KM },
                          .sort = GEO_SORT_ASC };
        geo_hit_t *hits;
        size_t n;
        assert_true(geo_search(g, &q, &hits, &n));
        size_t brute = 0;
        for (int i = 0; i < N; i++) {
            int len = snprintf(m, sizeof(m), "p%d", i);
            uint64_t s;
            assert_true(geo_score(g, m, (size_t)len, &s));
            double lon, lat, d;
            geohash_decode_score(s, &lon, &lat);
            brute += geo_in_shape(&q.shape, lon, lat, &d);
        }
        assert_int_equal(n, brute);
        for (size_t i = 1; i < n; i++)
            assert_true(hits[i - 1].dist <= hits[i].dist);
        free(hits);
    }
    geo_free(g);
}

/* The prepared shape answers exactly as geo_in_shape, distances bit for
 * bit, including points exactly on the radius and around poles and the
 * antimeridian, where its latitude/longitude shortcuts must not cut. */
static void test_matcher_equals_in_shape(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 31337);
    long agree_in = 0;
    for (int k = 0; k < 200000; k++) {
        double clon = -180 + 360 * rng_double(&r), clat = GEO_LAT_MIN + 2 * GEO_LAT_MAX * rng_double(&r);
        if (k % 5 == 0)
            clat = (k % 2 ? 1 : -1) * (80 + 5.05 * rng_double(&r));
        if (k % 7 == 0)
            clon = (k % 2 ? 1 : -1) * (179 + rng_double(&r));
        /* a point nearby (sometimes across the antimeridian), sometimes anywhere */
        double plon = clon + (rng_double(&r) - 0.5) * (k % 3 ? 2 : 400);
        double plat = clat + (rng_double(&r) - 0.5) * (k % 3 ? 2 : 200);
        if (plon > 180) plon -= 360;
        if (plon < -180) plon += 360;
        if (plat > GEO_LAT_MAX) plat = GEO_LAT_MAX;
        if (plat < GEO_LAT_MIN) plat = GEO_LAT_MIN;
        uint64_t score = geohash_score(plon, plat);
        double lon, lat;
        geohash_decode_score(score, &lon, &lat);
        geo_shape_t s = { .kind = k % 4 == 0 ? GEO_SHAPE_BOX : GEO_SHAPE_RADIUS, .lon = clon, .lat = clat, .to_m = 1 };
        double exact = geo_distance(clon, clat, lon, lat);
        if (s.kind == GEO_SHAPE_RADIUS) {
            /* on the boundary, just inside it, or anywhere */
            s.radius = k % 8 == 1 ? exact : k % 8 == 3 ? nextafter(exact, 0) : 1e6 * rng_double(&r);
        } else {
            s.width = 4e5 * rng_double(&r);
            s.height = 4e5 * rng_double(&r);
        }
        geo_matcher_t m;
        geo_matcher_init(&m, &s);
        double d1 = -1, d2 = -1, mlon = 0, mlat = 0;
        bool a = geo_in_shape(&s, lon, lat, &d1);
        bool b = geo_matcher_score(&m, score, &mlon, &mlat, &d2);
        if (a != b || (a && (d1 != d2 || mlon != lon || mlat != lat)))
            fail_msg("case %d: in_shape %d (%.17g) matcher %d (%.17g) centre %.17g,%.17g point %.17g,%.17g", k, a,
                     d1, b, d2, clon, clat, lon, lat);
        agree_in += a;
    }
    assert_true(agree_in > 20000);
}

/* ------------------------------------------------------------------------ */
/* Hostile encodings                                                        */
/* ------------------------------------------------------------------------ */

static void enc_member(wbuf_t *b, uint64_t score, const char *m)
{
    wbuf_put_u64(b, score);
    wbuf_put_u16(b, (uint16_t)strlen(m));
    wbuf_put_bytes(b, m, strlen(m));
}

static void expect_reject(wbuf_t *b, const char *why_part)
{
    const char *why = NULL;
    void *v = geo_type.decode(b->data, b->len, &why);
    assert_null(v);
    assert_non_null(why);
    if (!strstr(why, why_part))
        fail_msg("decode said '%s', expected '%s'", why, why_part);
    wbuf_free(b);
}

static void test_decode_rejects(void **state)
{
    (void)state;
    wbuf_t b = WBUF_INIT;
    wbuf_put_u8(&b, 2);
    wbuf_put_u64(&b, 0);
    expect_reject(&b, "version");

    wbuf_put_u8(&b, 1);
    wbuf_put_u64(&b, 1000);
    enc_member(&b, 1, "a");
    expect_reject(&b, "count");

    wbuf_put_u8(&b, 1);
    wbuf_put_u64(&b, 2);
    enc_member(&b, 5, "a");
    enc_member(&b, 4, "b");
    expect_reject(&b, "order");

    wbuf_put_u8(&b, 1);
    wbuf_put_u64(&b, 2);
    enc_member(&b, 5, "a");
    enc_member(&b, 6, "a");
    expect_reject(&b, "duplicate");

    wbuf_put_u8(&b, 1);
    wbuf_put_u64(&b, 1);
    enc_member(&b, (1ULL << 53) + 1, "a");
    expect_reject(&b, "geohash");

    wbuf_put_u8(&b, 1);
    wbuf_put_u64(&b, 1);
    enc_member(&b, 5, "a\xff");
    expect_reject(&b, "member");

    wbuf_put_u8(&b, 1);
    wbuf_put_u64(&b, 1);
    enc_member(&b, 5, "a");
    wbuf_put_u8(&b, 0);
    expect_reject(&b, "trailing");

    /* a valid empty set and a valid one-member set load */
    wbuf_put_u8(&b, 1);
    wbuf_put_u64(&b, 1);
    enc_member(&b, 4069887179083478ULL, "meituan");
    const char *why;
    geo_t *g = geo_type.decode(b.data, b.len, &why);
    assert_non_null(g);
    assert_int_equal(geo_count(g), 1);
    geo_free(g);
    wbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_transcript),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_distance_text),
        cmocka_unit_test(test_coord_text),
        cmocka_unit_test(test_neighbors_wrap),
        cmocka_unit_test(test_set_and_snapshot),
        cmocka_unit_test(test_pqsort_prefix),
        cmocka_unit_test(test_search_vs_brute_force),
        cmocka_unit_test(test_matcher_equals_in_shape),
        cmocka_unit_test(test_decode_rejects),
    };
    return cmocka_run_group_tests_name("geo", tests, NULL, NULL);
}
