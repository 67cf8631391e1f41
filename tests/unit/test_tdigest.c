/*
 * test_tdigest.c - the merging t-digest against exact ranks (1M uniform and
 * 1M log-normal values), RedisBloom's documented answers and edge cases,
 * merge, and the decoder on hostile bytes.
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

#include "core/rng.h"
#include "core/tdigest.h"

static tdigest_t *digest_of(uint32_t c, const double *v, size_t n)
{
    tdigest_t *td = tdigest_create(c);
    assert_non_null(td);
    for (size_t i = 0; i < n; i++)
        assert_true(tdigest_add(td, v[i]));
    tdigest_flush(td);
    return td;
}

/* ------------------------------------------------------------------------ */
/* Accuracy                                                                 */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Exact rank fraction of v in sorted[0..n): below + half of equal, over n. */
static double exact_rank(const double *sorted, size_t n, double v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (sorted[m] < v)
            lo = m + 1;
        else
            hi = m;
    }
    size_t below = lo;
    hi = n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (sorted[m] <= v)
            lo = m + 1;
        else
            hi = m;
    }
    return (below + (lo - below) / 2.0) / n;
}

#define ACC_N 1000000
#define ACC_BATCH 1000   /* values per request, each request flushed: as the service adds them */

static void check_accuracy(const char *name, double (*draw)(rng_t *), uint64_t seed)
{
    double *v = malloc(ACC_N * sizeof(double));
    rng_t r;
    rng_seed(&r, seed);
    tdigest_t *td = tdigest_create(TDIGEST_DEFAULT_COMPRESSION);
    for (size_t i = 0; i < ACC_N; i++) {
        v[i] = draw(&r);
        assert_true(tdigest_add(td, v[i]));
        if ((i + 1) % ACC_BATCH == 0)
            tdigest_flush(td);
    }
    qsort(v, ACC_N, sizeof(double), cmp_double);
    static const struct {
        double q, bound;
    } checks[] = { { 0.5, 0.005 }, { 0.99, 0.0005 }, { 0.999, 0.0005 }, { 0.01, 0.0005 }, { 0.001, 0.0005 } };
    for (size_t j = 0; j < sizeof(checks) / sizeof(checks[0]); j++) {
        double est = tdigest_quantile(td, checks[j].q);
        double err = fabs(exact_rank(v, ACC_N, est) - checks[j].q);
        print_message("%s: q = %g rank error %.6f (bound %g)\n", name, checks[j].q, err, checks[j].bound);
        if (err > checks[j].bound)
            fail_msg("%s: q = %g: rank error %.6f > %g", name, checks[j].q, err, checks[j].bound);
        /* and the other way round: the CDF at the exact quantile */
        double x = v[(size_t)(checks[j].q * ACC_N)];
        double cerr = fabs(tdigest_cdf(td, x) - exact_rank(v, ACC_N, x));
        if (cerr > checks[j].bound)
            fail_msg("%s: cdf at q = %g off by %.6f", name, checks[j].q, cerr);
    }
    assert_true(tdigest_min(td) == v[0]);
    assert_true(tdigest_max(td) == v[ACC_N - 1]);
    tdigest_info_t in;
    tdigest_get_info(td, &in);
    assert_true(in.merged_nodes <= 2 * TDIGEST_DEFAULT_COMPRESSION + 1);
    print_message("%s: %u centroids\n", name, in.merged_nodes);
    tdigest_free(td);
    free(v);
}

static double draw_uniform(rng_t *r) { return rng_double(r); }

static double draw_lognormal(rng_t *r)
{
    double u1 = 1.0 - rng_double(r), u2 = rng_double(r);
    return exp(sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2));
}

static void test_accuracy_uniform(void **state)
{
    (void)state;
    check_accuracy("uniform", draw_uniform, 1);
}

static void test_accuracy_lognormal(void **state)
{
    (void)state;
    check_accuracy("log-normal", draw_lognormal, 2);
}

/* ------------------------------------------------------------------------ */
/* RedisBloom's documented answers                                          */
/* ------------------------------------------------------------------------ */

static void test_redisbloom_examples(void **state)
{
    (void)state;
    /* TDIGEST.CREATE t COMPRESSION 1000; TDIGEST.ADD t 1 2 2 3 3 3 4 4 4 4 5 5 5 5 5 */
    const double v[] = { 1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5 };
    tdigest_t *t = digest_of(1000, v, 15);
    const double byrank[] = { 1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5, INFINITY };
    const double byrevrank[] = { 5, 5, 5, 5, 5, 4, 4, 4, 4, 3, 3, 3, 2, 2, 1, -INFINITY };
    for (uint64_t r = 0; r < 16; r++) {
        assert_true(tdigest_by_rank(t, r, false) == byrank[r]);
        assert_true(tdigest_by_rank(t, r, true) == byrevrank[r]);
    }
    const double quantile[] = { 1, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5 };
    for (int i = 0; i <= 10; i++)
        assert_true(tdigest_quantile(t, i / 10.0) == quantile[i]);
    const double cdf[] = { 0, 0.033333333333333333, 0.13333333333333333, 0.29999999999999999, 0.53333333333333333,
                           0.83333333333333337, 1 };
    for (int i = 0; i <= 6; i++)
        assert_true(fabs(tdigest_cdf(t, i) - cdf[i]) < 1e-15);
    tdigest_free(t);

    /* TDIGEST.ADD s 10 20 30 40 50 60; RANK / REVRANK s 0 10 ... 70 */
    const double s[] = { 10, 20, 30, 40, 50, 60 };
    t = digest_of(1000, s, 6);
    const int64_t rank[] = { -1, 0, 1, 2, 3, 4, 5, 6 }, revrank[] = { 6, 5, 4, 3, 2, 1, 0, -1 };
    for (int i = 0; i < 8; i++) {
        assert_int_equal(tdigest_rank(t, i * 10, false), rank[i]);
        assert_int_equal(tdigest_rank(t, i * 10, true), revrank[i]);
    }
    tdigest_free(t);

    /* TDIGEST.ADD s 10 10 10 10 20 20: RANK 10 20 -> 2 5, REVRANK -> 4 1 */
    const double d[] = { 10, 10, 10, 10, 20, 20 };
    t = digest_of(1000, d, 6);
    assert_int_equal(tdigest_rank(t, 10, false), 2);
    assert_int_equal(tdigest_rank(t, 20, false), 5);
    assert_int_equal(tdigest_rank(t, 10, true), 4);
    assert_int_equal(tdigest_rank(t, 20, true), 1);
    tdigest_free(t);

    /* TDIGEST.INFO after CREATE t: compression 100, capacity 610 (6c + 10) */
    t = tdigest_create(TDIGEST_DEFAULT_COMPRESSION);
    tdigest_info_t in;
    tdigest_get_info(t, &in);
    assert_int_equal(in.compression, 100);
    assert_int_equal(in.capacity, 610);
    tdigest_free(t);
}

/* Empty, single value, out-of-range arguments. */
static void test_edge_cases(void **state)
{
    (void)state;
    tdigest_t *t = tdigest_create(100);
    assert_true(isnan(tdigest_quantile(t, 0.5)));
    assert_true(isnan(tdigest_cdf(t, 1)));
    assert_true(isnan(tdigest_min(t)));
    assert_true(isnan(tdigest_max(t)));
    assert_true(isnan(tdigest_by_rank(t, 0, false)));
    assert_true(isnan(tdigest_by_rank(t, 5, true)));
    assert_true(isnan(tdigest_trimmed_mean(t, 0.1, 0.9)));
    assert_int_equal(tdigest_rank(t, 1, false), -2);
    assert_int_equal(tdigest_rank(t, 1, true), -2);
    assert_int_equal(tdigest_count(t), 0);

    assert_true(tdigest_add(t, 42));
    tdigest_flush(t);
    assert_true(tdigest_quantile(t, 0) == 42 && tdigest_quantile(t, 0.5) == 42 && tdigest_quantile(t, 1) == 42);
    assert_true(tdigest_cdf(t, 42) == 0.5);
    assert_true(tdigest_cdf(t, 41) == 0 && tdigest_cdf(t, 43) == 1);
    assert_int_equal(tdigest_rank(t, 41, false), -1);
    assert_int_equal(tdigest_rank(t, 41, true), 1);
    assert_int_equal(tdigest_rank(t, 43, false), 1);
    assert_int_equal(tdigest_rank(t, 43, true), -1);
    assert_int_equal(tdigest_rank(t, 42, false), 0);
    assert_true(tdigest_by_rank(t, 0, false) == 42);
    assert_true(tdigest_by_rank(t, 1, false) == INFINITY);
    assert_true(tdigest_by_rank(t, 1, true) == -INFINITY);
    assert_true(tdigest_trimmed_mean(t, 0, 1) == 42);
    assert_true(tdigest_min(t) == 42 && tdigest_max(t) == 42);

    /* arguments outside the domain answer NaN in core (the API refuses them) */
    assert_true(isnan(tdigest_quantile(t, -0.1)));
    assert_true(isnan(tdigest_quantile(t, 1.1)));
    assert_true(isnan(tdigest_trimmed_mean(t, 0.5, 0.5)));
    assert_true(isnan(tdigest_trimmed_mean(t, 0.6, 0.5)));
    assert_false(tdigest_add(t, NAN));
    assert_false(tdigest_add(t, INFINITY));
    assert_int_equal(tdigest_count(t), 1);

    /* reset keeps the compression */
    tdigest_reset(t);
    assert_int_equal(tdigest_count(t), 0);
    assert_int_equal(tdigest_compression(t), 100);
    assert_true(isnan(tdigest_min(t)));
    tdigest_free(t);

    assert_null(tdigest_create(0));
    assert_null(tdigest_create(TDIGEST_MAX_COMPRESSION + 1));
    t = tdigest_create(1);   /* the smallest: everything in a few centroids */
    for (int i = 0; i < 1000; i++)
        assert_true(tdigest_add(t, i));
    tdigest_flush(t);
    tdigest_info_t in;
    tdigest_get_info(t, &in);
    assert_true(in.merged_nodes <= 3);
    assert_true(tdigest_min(t) == 0 && tdigest_max(t) == 999);
    assert_true(tdigest_quantile(t, 0) == 0 && tdigest_quantile(t, 1) == 999);
    tdigest_free(t);
}

/* Trimmed mean: exact on singletons (compression 1000 keeps 100 values apart). */
static void test_trimmed_mean(void **state)
{
    (void)state;
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = i + 1;
    tdigest_t *t = digest_of(1000, v, 100);
    assert_true(fabs(tdigest_trimmed_mean(t, 0, 1) - 50.5) < 1e-12);
    assert_true(fabs(tdigest_trimmed_mean(t, 0.1, 0.9) - 50.5) < 1e-12);   /* 11..90 */
    assert_true(fabs(tdigest_trimmed_mean(t, 0, 0.5) - 25.5) < 1e-12);     /* 1..50 */
    assert_true(fabs(tdigest_trimmed_mean(t, 0.5, 1) - 75.5) < 1e-12);     /* 51..100 */
    tdigest_free(t);
}

/* Buffered values are answered as if flushed, without modifying the digest. */
static void test_buffered_queries(void **state)
{
    (void)state;
    tdigest_t *a = tdigest_create(50), *b = tdigest_create(50);
    rng_t r;
    rng_seed(&r, 3);
    for (int i = 0; i < 250; i++) {   /* fewer than the capacity: all buffered in a */
        double x = rng_double(&r) * 100;
        tdigest_add(a, x);
        tdigest_add(b, x);
    }
    tdigest_flush(b);
    tdigest_info_t ia;
    tdigest_get_info(a, &ia);
    assert_int_equal(ia.unmerged_nodes, 250);
    for (int i = 0; i <= 20; i++) {
        assert_true(tdigest_quantile(a, i / 20.0) == tdigest_quantile(b, i / 20.0));
        assert_true(tdigest_cdf(a, i * 5) == tdigest_cdf(b, i * 5));
        assert_int_equal(tdigest_rank(a, i * 5, false), tdigest_rank(b, i * 5, false));
    }
    assert_true(tdigest_trimmed_mean(a, 0.2, 0.7) == tdigest_trimmed_mean(b, 0.2, 0.7));
    tdigest_get_info(a, &ia);
    assert_int_equal(ia.unmerged_nodes, 250);   /* untouched */
    tdigest_free(a);
    tdigest_free(b);
}

static void test_merge(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 4);
    tdigest_t *a = tdigest_create(100), *b = tdigest_create(200), *all = tdigest_create(100);
    for (int i = 0; i < 20000; i++) {
        double x = rng_double(&r);
        tdigest_add(i % 3 ? a : b, x * (i % 3 ? 1 : 10));
        tdigest_add(all, x * (i % 3 ? 1 : 10));
    }
    tdigest_flush(a);
    tdigest_flush(b);
    tdigest_flush(all);
    const tdigest_t *srcs[] = { a, NULL, b };
    bool overflow;
    tdigest_t *m = tdigest_merge(100, srcs, 3, &overflow);
    assert_non_null(m);
    assert_false(overflow);
    assert_int_equal(tdigest_count(m), 20000);
    assert_int_equal(tdigest_compression(m), 100);
    assert_true(tdigest_min(m) == tdigest_min(all));   /* the sources' own extremes */
    assert_true(tdigest_max(m) == tdigest_max(all));
    for (int i = 1; i < 20; i++) {
        double q = i / 20.0;
        double d = fabs(tdigest_cdf(all, tdigest_quantile(m, q)) - q);
        assert_true(d < 0.01);
    }
    tdigest_info_t in;
    tdigest_get_info(m, &in);
    assert_int_equal(in.unmerged_nodes, 0);
    tdigest_free(m);

    /* merging empties gives an empty digest */
    tdigest_t *e = tdigest_create(10);
    const tdigest_t *empties[] = { e, e };
    m = tdigest_merge(10, empties, 2, &overflow);
    assert_non_null(m);
    assert_int_equal(tdigest_count(m), 0);
    assert_true(isnan(tdigest_min(m)));
    tdigest_free(m);
    tdigest_free(e);
    tdigest_free(a);
    tdigest_free(b);
    tdigest_free(all);
}

static uint8_t *encode(const tdigest_t *td, size_t *len)
{
    wbuf_t b = WBUF_INIT;
    tdigest_type.encode(td, &b);
    assert_false(b.oom);
    return wbuf_steal(&b, len);
}

static void test_encoding(void **state)
{
    (void)state;
    tdigest_t *t = tdigest_create(20);
    for (int i = 0; i < 300; i++)
        tdigest_add(t, (i * 37) % 101);   /* leaves some buffered */
    size_t len;
    uint8_t *enc = encode(t, &len);
    const char *why;
    tdigest_t *d = tdigest_type.decode(enc, len, &why);
    assert_non_null(d);
    size_t len2;
    uint8_t *enc2 = encode(d, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(enc, enc2, len);
    assert_true(tdigest_quantile(d, 0.3) == tdigest_quantile(t, 0.3));
    free(enc2);
    tdigest_free(d);

    for (size_t cut = 0; cut < len; cut++)
        assert_null(tdigest_type.decode(enc, cut, &why));
    uint8_t *bad = malloc(len + 1);
    const size_t nodes_at = 1 + 4 + 8 + 8 + 8 + 4 + 4;
    tdigest_info_t in;
    tdigest_get_info(t, &in);
    assert_true(in.merged_nodes >= 2);
#define CORRUPT(stmt)                                       \
    do {                                                    \
        memcpy(bad, enc, len);                              \
        stmt;                                               \
        assert_null(tdigest_type.decode(bad, len, &why));   \
    } while (0)
    CORRUPT(bad[0] = 9);                                                  /* version */
    CORRUPT(le32_store(bad + 1, 0));                                      /* compression */
    CORRUPT(le32_store(bad + 29, 100000));                                /* nodes > capacity */
    CORRUPT(le32_store(bad + 33, in.merged_nodes + in.unmerged_nodes + 1)); /* merged > nodes */
    CORRUPT(le64_store(bad + 13, 0x7ff8000000000000ULL));                /* min NaN */
    CORRUPT(le64_store(bad + nodes_at + 8, 0));                           /* weight 0 */
    CORRUPT(le64_store(bad + nodes_at, 0x7ff0000000000000ULL));           /* mean inf */
    /* centroids out of order */
    CORRUPT(memcpy(bad + nodes_at, enc + nodes_at + 16, 8); memcpy(bad + nodes_at + 16, enc + nodes_at, 8));
    /* mean below min */
    CORRUPT(le64_store(bad + 13, 0x4059000000000000ULL));                /* min = 100 */
#undef CORRUPT
    memcpy(bad, enc, len);
    bad[len] = 0;
    assert_null(tdigest_type.decode(bad, len + 1, &why));
    free(bad);
    free(enc);

    /* an empty digest encodes min +inf, max -inf */
    tdigest_reset(t);
    enc = encode(t, &len);
    d = tdigest_type.decode(enc, len, &why);
    assert_non_null(d);
    assert_true(isnan(tdigest_min(d)));
    tdigest_free(d);
    free(enc);
    tdigest_free(t);
}

/* The total weight is capped at 2^53 so it stays exact in a double. */
static void test_weight_limit(void **state)
{
    (void)state;
    wbuf_t w = WBUF_INIT;
    wbuf_put_u8(&w, 1);
    wbuf_put_u32(&w, 100);
    wbuf_put_u64(&w, 1);
    wbuf_put_f64(&w, 1.0);
    wbuf_put_f64(&w, 2.0);
    wbuf_put_u32(&w, 2);
    wbuf_put_u32(&w, 2);
    wbuf_put_f64(&w, 1.0);
    wbuf_put_u64(&w, TDIGEST_MAX_WEIGHT / 2);
    wbuf_put_f64(&w, 2.0);
    wbuf_put_u64(&w, TDIGEST_MAX_WEIGHT / 2 - 1);
    const char *why;
    tdigest_t *t = tdigest_type.decode(w.data, w.len, &why);
    assert_non_null(t);
    assert_true(tdigest_can_add(t, 1));
    assert_true(tdigest_add(t, 1.5));
    assert_false(tdigest_add(t, 1.5));
    assert_false(tdigest_can_add(t, 1));
    const tdigest_t *srcs[] = { t, t };
    bool overflow;
    assert_null(tdigest_merge(100, srcs, 2, &overflow));
    assert_true(overflow);
    tdigest_free(t);
    /* one more unit in the encoding is refused */
    le64_store(w.data + w.len - 8, TDIGEST_MAX_WEIGHT / 2 + 1);
    assert_null(tdigest_type.decode(w.data, w.len, &why));
    wbuf_free(&w);
}

/* The size asked for before a digest is made is its size. */
static void test_bytes_for(void **state)
{
    (void)state;
    tdigest_t *td = tdigest_create(250);
    assert_int_equal(tdigest_bytes_for(250), tdigest_type.size(td));
    tdigest_free(td);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redisbloom_examples),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_trimmed_mean),
        cmocka_unit_test(test_buffered_queries),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_encoding),
        cmocka_unit_test(test_weight_limit),
        cmocka_unit_test(test_accuracy_uniform),
        cmocka_unit_test(test_accuracy_lognormal),
        cmocka_unit_test(test_bytes_for),
    };
    return cmocka_run_group_tests_name("tdigest", tests, NULL, NULL);
}
