/*
 * test_cms.c - Count-Min against exact counts: never under-counts (seeded
 * streams, plain and conservative), the error bound, RedisBloom's dimensions
 * and hashing (the seed article's examples), atomic overflow refusal, merge
 * with weights, and the decoder on hostile bytes.
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

#include "core/cms.h"
#include "core/hash.h"
#include "core/rng.h"

static int name(char *buf, size_t n, uint64_t id) { return snprintf(buf, n, "user:%llu", (unsigned long long)id); }

static uint8_t *encode(const cms_t *c, size_t *len)
{
    wbuf_t b = WBUF_INIT;
    cms_type.encode(c, &b);
    assert_false(b.oom);
    return wbuf_steal(&b, len);
}

/* CMS.INITBYPROB: width = ceil(2/error), depth = ceil(log10f(p)/log10f(0.5)). */
static void test_dims_from_prob(void **state)
{
    (void)state;
    uint64_t w, d;
    cms_dims_from_prob(0.001, 0.002, &w, &d);   /* REFERENCE.md: 2000 x 9 */
    assert_int_equal(w, 2000);
    assert_int_equal(d, 9);
    cms_dims_from_prob(0.01, 0.01, &w, &d);
    assert_int_equal(w, 200);
    assert_int_equal(d, 7);
    cms_dims_from_prob(0.5, 0.5, &w, &d);
    assert_int_equal(w, 4);
    assert_int_equal(d, 1);
    for (int i = 1; i < 1000; i++) {
        double e = i / 1000.0, p = (1000 - i) / 1000.0;
        cms_dims_from_prob(e, p, &w, &d);
        assert_int_equal(w, (uint64_t)ceil(2 / e));
        float f = log10f((float)p) / log10f(0.5f);
        assert_int_equal(d, (uint64_t)ceil(f));
    }
    cms_dims_from_prob(0.9, 0.9999999999999999, &w, &d);   /* 1.0f: RedisBloom's "invalid init arguments" */
    assert_int_equal(w, 3);
    assert_int_equal(d, 0);
}

/* The seed article (RedisBloom internals, section 4.3): row i puts an item in
 * counter MurmurHash2(item, seed i) % width + i * width. */
static void test_seed_article_hashing(void **state)
{
    (void)state;
    const uint32_t W = 97, D = 5;
    cms_t *c = cms_create(W, D, false);
    assert_non_null(c);
    assert_int_equal(cms_incr(c, "foo", 3, 7), 7);
    size_t len;
    uint8_t *enc = encode(c, &len);
    const size_t hdr = 1 + 4 + 4 + 1 + 8;
    assert_int_equal(len, hdr + (size_t)W * D * 8);
    for (uint32_t i = 0; i < D; i++)
        for (uint32_t j = 0; j < W; j++) {
            uint64_t v = le64_load(enc + hdr + ((size_t)i * W + j) * 8);
            assert_int_equal(v, j == murmur2("foo", 3, i) % W ? 7 : 0);
        }
    free(enc);
    assert_int_equal(cms_total(c), 7);
    assert_int_equal(cms_query(c, "foo", 3), 7);
    cms_free(c);
}

/* Streams with skewed items and random increments: every estimate is >= the
 * exact count; plain estimates exceed it by more than (2/width)·N for at most
 * a δ share of items; conservative estimates are never above plain ones. */
static void run_property(uint64_t seed, uint32_t width, uint32_t depth)
{
    enum { ITEMS = 5000, EVENTS = 100000 };
    cms_t *plain = cms_create(width, depth, false), *cons = cms_create(width, depth, true);
    assert_non_null(plain);
    assert_non_null(cons);
    uint64_t *exact = calloc(ITEMS, sizeof(uint64_t));
    rng_t r;
    rng_seed(&r, seed);
    char buf[32];
    uint64_t total = 0;
    for (int e = 0; e < EVENTS; e++) {
        /* skewed: squaring a uniform favours small ids */
        double u = rng_double(&r);
        uint64_t id = (uint64_t)(u * u * ITEMS);
        uint64_t by = 1 + rng_below(&r, 4);
        int n = name(buf, sizeof(buf), id);
        uint64_t ep = cms_incr(plain, buf, (size_t)n, by);
        uint64_t ec = cms_incr(cons, buf, (size_t)n, by);
        exact[id] += by;
        total += by;
        assert_true(ep >= exact[id]);
        assert_true(ec >= exact[id]);
    }
    assert_int_equal(cms_total(plain), total);
    assert_int_equal(cms_total(cons), total);
    size_t beyond = 0;
    double bound = 2.0 / width * (double)total;
    for (uint64_t id = 0; id < ITEMS; id++) {
        int n = name(buf, sizeof(buf), id);
        uint64_t qp = cms_query(plain, buf, (size_t)n), qc = cms_query(cons, buf, (size_t)n);
        if (qp < exact[id] || qc < exact[id])
            fail_msg("seed %llu item %llu under-counted: exact %llu plain %llu conservative %llu",
                     (unsigned long long)seed, (unsigned long long)id, (unsigned long long)exact[id],
                     (unsigned long long)qp, (unsigned long long)qc);
        assert_true(qc <= qp);
        if ((double)(qp - exact[id]) > bound)
            beyond++;
    }
    /* δ = 2^-depth; allow slack for a finite sample */
    double delta = pow(0.5, depth);
    if ((double)beyond > 2 * delta * ITEMS + 5)
        fail_msg("seed %llu: %zu of %d items beyond the error bound (δ = %g)", (unsigned long long)seed, beyond,
                 ITEMS, delta);
    free(exact);
    cms_free(plain);
    cms_free(cons);
}

static void test_never_undercounts(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        run_property(seed, 2000, 9);   /* error 0.001, probability 0.002 */
        run_property(seed * 77, 50, 3); /* tiny: lots of collisions */
    }
}

/* Overflow is refused before anything changes: the total bounds every counter. */
static void test_overflow(void **state)
{
    (void)state;
    cms_t *c = cms_create(10, 3, false);
    assert_true(cms_can_add(c, CMS_MAX_COUNT));
    cms_incr(c, "a", 1, CMS_MAX_COUNT - 5);
    assert_true(cms_can_add(c, 5));
    assert_false(cms_can_add(c, 6));
    assert_false(cms_can_add(c, UINT64_MAX));
    cms_incr(c, "b", 1, 5);
    assert_false(cms_can_add(c, 1));
    assert_true(cms_can_add(c, 0));
    assert_true(cms_query(c, "a", 1) >= CMS_MAX_COUNT - 5);
    assert_int_equal(cms_total(c), CMS_MAX_COUNT);
    /* the sketch still encodes and decodes at the limit */
    size_t len;
    uint8_t *enc = encode(c, &len);
    const char *why;
    cms_t *d = cms_type.decode(enc, len, &why);
    assert_non_null(d);
    cms_free(d);
    free(enc);
    cms_free(c);
}

/* MERGE: dest := Σ w·src, cell by cell; equal to building from the streams. */
static void test_merge(void **state)
{
    (void)state;
    cms_t *a = cms_create(64, 4, false), *b = cms_create(64, 4, false), *both = cms_create(64, 4, false);
    cms_t *dst = cms_create(64, 4, true), *odd = cms_create(65, 4, false);
    rng_t r;
    rng_seed(&r, 99);
    char buf[32];
    for (int i = 0; i < 2000; i++) {
        int n = name(buf, sizeof(buf), rng_below(&r, 300));
        bool to_a = rng_below(&r, 2);
        cms_incr(to_a ? a : b, buf, (size_t)n, 1);
        cms_incr(both, buf, (size_t)n, to_a ? 2 : 3);
    }
    const cms_t *srcs[] = { a, b };
    const int64_t w[] = { 2, 3 };
    assert_int_equal(cms_merge(dst, srcs, w, 2), CMS_MERGE_OK);
    size_t l1, l2;
    uint8_t *e1 = encode(dst, &l1), *e2 = encode(both, &l2);
    assert_int_equal(l1, l2);
    /* identical counters and total; only the conservative flag byte differs */
    assert_memory_equal(e1 + 10, e2 + 10, l1 - 10);
    free(e1);
    free(e2);
    assert_int_equal(cms_total(dst), 2 * cms_total(a) + 3 * cms_total(b));

    /* the destination as a source: doubling itself */
    uint64_t before = cms_query(a, "user:7", 6);
    const cms_t *self[] = { a, a };
    const int64_t ones[] = { 1, 1 };
    assert_int_equal(cms_merge(a, self, ones, 2), CMS_MERGE_OK);
    assert_int_equal(cms_query(a, "user:7", 6), 2 * before);

    /* refusals change nothing */
    uint64_t t = cms_total(dst);
    const cms_t *mixed[] = { a, odd };
    assert_int_equal(cms_merge(dst, mixed, ones, 2), CMS_MERGE_DIMENSIONS);
    const int64_t huge[] = { INT64_MAX / 2, 1 };
    assert_int_equal(cms_merge(dst, srcs, huge, 2), CMS_MERGE_OVERFLOW);
    const int64_t big[] = { (int64_t)(CMS_MAX_COUNT / cms_total(a) + 1), 0 };
    assert_int_equal(cms_merge(dst, srcs, big, 2), CMS_MERGE_OVERFLOW);
    assert_int_equal(cms_total(dst), t);
    /* weight 0 drops a source */
    const int64_t zero[] = { 0, 1 };
    assert_int_equal(cms_merge(dst, srcs, zero, 2), CMS_MERGE_OK);
    assert_int_equal(cms_total(dst), cms_total(b));

    cms_free(a);
    cms_free(b);
    cms_free(both);
    cms_free(dst);
    cms_free(odd);
}

static void test_encoding(void **state)
{
    (void)state;
    cms_t *c = cms_create(33, 4, true);
    for (int i = 0; i < 500; i++) {
        char buf[16];
        int n = snprintf(buf, sizeof(buf), "k%d", i % 37);
        cms_incr(c, buf, (size_t)n, (uint64_t)i % 5);
    }
    size_t len;
    uint8_t *enc = encode(c, &len);
    const char *why = NULL;
    cms_t *d = cms_type.decode(enc, len, &why);
    assert_non_null(d);
    assert_int_equal(cms_width(d), 33);
    assert_int_equal(cms_depth(d), 4);
    assert_true(cms_conservative(d));
    assert_int_equal(cms_total(d), cms_total(c));
    assert_int_equal(cms_query(d, "k3", 2), cms_query(c, "k3", 2));
    assert_int_equal(cms_type.size(d), cms_type.size(c));
    cms_free(d);

    /* every truncation is refused */
    for (size_t cut = 0; cut < len; cut += (cut < 40 ? 1 : 97))
        assert_null(cms_type.decode(enc, cut, &why));
    uint8_t *bad = malloc(len + 1);
    /* version, flags, dimensions, trailing byte */
    memcpy(bad, enc, len);
    bad[0] = 2;
    assert_null(cms_type.decode(bad, len, &why));
    memcpy(bad, enc, len);
    bad[9] = 3;
    assert_null(cms_type.decode(bad, len, &why));
    memcpy(bad, enc, len);
    le32_store(bad + 1, 0);
    assert_null(cms_type.decode(bad, len, &why));
    memcpy(bad, enc, len);
    bad[len] = 0;
    assert_null(cms_type.decode(bad, len + 1, &why));
    /* a counter above the total */
    memcpy(bad, enc, len);
    le64_store(bad + 18, cms_total(c) + 1);
    assert_null(cms_type.decode(bad, len, &why));
    assert_non_null(why);
    /* a total above INT64_MAX */
    memcpy(bad, enc, len);
    le64_store(bad + 10, (uint64_t)INT64_MAX + 1);
    assert_null(cms_type.decode(bad, len, &why));
    /* a huge claimed size with a short body does not allocate it */
    memcpy(bad, enc, len);
    le32_store(bad + 1, 1u << 20);
    le32_store(bad + 5, 64);
    assert_null(cms_type.decode(bad, len, &why));
    free(bad);
    free(enc);
    cms_free(c);
}

static void test_limits(void **state)
{
    (void)state;
    assert_null(cms_create(0, 1, false));
    assert_null(cms_create(1, 0, false));
    assert_null(cms_create(1u << 20, 1u << 7, false));   /* 2^27 counters */
    cms_t *c = cms_create(1, 1, false);
    assert_non_null(c);
    cms_incr(c, "", 0, 3);   /* the empty item is an item */
    assert_int_equal(cms_query(c, "x", 1), 3);   /* width 1: everything collides */
    cms_free(c);
}

/* Negative weights subtract a sketch (RedisBloom's test_merge_success):
 * three sketches of 100 distinct items each, merged and then one removed
 * again; removing it twice, in either order of the sources, is refused as a
 * whole ("MERGE overflow" there). */
static void test_merge_negative(void **state)
{
    (void)state;
    cms_t *s[6];
    for (int i = 0; i < 6; i++)
        s[i] = cms_create(1000, 5, false);
    char k[16];
    static const char *const pfx[] = { "foo", "bar", "baz" };
    for (int i = 0; i < 100; i++)
        for (int j = 0; j < 3; j++) {
            snprintf(k, sizeof(k), "%s%d", pfx[j], i);
            cms_incr(s[j], k, strlen(k), 1);
        }
    const cms_t *ab[] = { s[0], s[1] }, *abc[] = { s[0], s[1], s[2] };
    const int64_t one2[] = { 1, 1 }, one3[] = { 1, 1, 1 };
    assert_int_equal(cms_merge(s[3], ab, one2, 2), CMS_MERGE_OK);
    assert_int_equal(cms_merge(s[4], abc, one3, 3), CMS_MERGE_OK);
    assert_int_equal(cms_total(s[4]), 300);
    /* s5 = s4 - s2, and again with the negative weight first */
    const cms_t *sub[] = { s[4], s[2] }, *subr[] = { s[2], s[4] };
    const int64_t pm[] = { 1, -1 }, mp[] = { -1, 1 };
    assert_int_equal(cms_merge(s[5], sub, pm, 2), CMS_MERGE_OK);
    assert_int_equal(cms_merge(s[5], subr, mp, 2), CMS_MERGE_OK);
    assert_int_equal(cms_total(s[5]), 200);
    size_t l1, l2;
    uint8_t *e1 = encode(s[5], &l1), *e2 = encode(s[3], &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(e1, e2, l1);   /* exactly the merge of the other two */
    free(e2);
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "baz%d", i);
        assert_int_equal(cms_query(s[5], k, strlen(k)), 0);
    }
    /* removing s2 again underflows: refused, nothing changes */
    const cms_t *again[] = { s[5], s[2] }, *againr[] = { s[2], s[5] };
    assert_int_equal(cms_merge(s[5], again, pm, 2), CMS_MERGE_OVERFLOW);
    assert_int_equal(cms_merge(s[5], againr, mp, 2), CMS_MERGE_OVERFLOW);
    e2 = encode(s[5], &l2);
    assert_memory_equal(e1, e2, l1);
    free(e1);
    free(e2);
    /* a negative total is refused even when every counter stays >= 0 */
    cms_t *z = cms_create(1000, 5, false);
    const cms_t *zs[] = { z, s[0] };
    assert_int_equal(cms_merge(s[5], zs, pm, 2), CMS_MERGE_OVERFLOW);
    /* s - s is the empty sketch */
    const cms_t *self[] = { s[0], s[0] };
    assert_int_equal(cms_merge(s[0], self, pm, 2), CMS_MERGE_OK);
    e1 = encode(s[0], &l1);
    e2 = encode(z, &l2);
    assert_memory_equal(e1, e2, l1);
    free(e1);
    free(e2);

    /* conservative update leaves rows summing below the total: lin - c
     * (the same 40 items, linear minus conservative) has every counter >= 0
     * and total 0, but rows summing above 0 - refused, nothing changes */
    cms_t *c = cms_create(4, 2, true), *lin = cms_create(4, 2, false), *d = cms_create(4, 2, false);
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof(k), "c%d", i);
        cms_incr(c, k, strlen(k), 1);
        cms_incr(lin, k, strlen(k), 1);
    }
    const cms_t *cs[] = { lin, c };
    assert_int_equal(cms_merge(d, cs, pm, 2), CMS_MERGE_OVERFLOW);
    assert_int_equal(cms_total(d), 0);
    const cms_t *cs2[] = { c, c };
    assert_int_equal(cms_merge(d, cs2, pm, 2), CMS_MERGE_OK);   /* c - c is fine */
    for (int i = 0; i < 6; i++)
        cms_free(s[i]);
    cms_free(z);
    cms_free(c);
    cms_free(lin);
    cms_free(d);
}

/* The size asked for before a sketch is made is its size. */
static void test_bytes_for(void **state)
{
    (void)state;
    cms_t *c = cms_create(2000, 9, false);
    assert_int_equal(cms_bytes_for(2000, 9), cms_type.size(c));
    cms_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dims_from_prob),
        cmocka_unit_test(test_seed_article_hashing),
        cmocka_unit_test(test_never_undercounts),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_negative),
        cmocka_unit_test(test_encoding),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_bytes_for),
    };
    return cmocka_run_group_tests_name("cms", tests, NULL, NULL);
}
