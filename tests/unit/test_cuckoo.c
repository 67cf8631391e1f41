/*
 * test_cuckoo.c - the cuckoo filter against a brute-force model and theory.
 *
 * No false negatives while items are added and removed (a multiset model
 * says what must be present); deleting an added item never removes another
 * item's presence; ADD keeps duplicates, ADDNX does not; COUNT; a filter
 * that cannot grow answers FULL instead of looping, and a failed batch is
 * rolled back byte for byte; measured false-positive rate per fingerprint
 * size against 2b/(2^f - 1); determinism (same seed, same bytes);
 * encode/decode round trips and refusal of damaged encodings.
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

#include "core/codec.h"
#include "core/cuckoo.h"
#include "core/rng.h"
#include "tests/unit/same_encoding.h"

static cuckoo_params_t params(uint64_t cap, uint32_t bs, uint32_t exp, uint32_t fp)
{
    cuckoo_params_t p = { cap, bs, CUCKOO_DEFAULT_MAX_ITERATIONS, exp, fp };
    return p;
}

static void name(char *out, size_t n, const char *pfx, uint64_t i)
{
    snprintf(out, n, "%s%llu", pfx, (unsigned long long)i);
}

static void test_validate(void **state)
{
    (void)state;
    const char *f;
    cuckoo_params_t p = params(1024, 2, 1, 8);
    assert_null(cuckoo_validate(&p, 0, &f));
    p.fp_bits = 10;
    assert_non_null(cuckoo_validate(&p, 0, &f));
    assert_string_equal(f, "fingerprint_bits");
    p = params(3, 2, 1, 8);
    assert_non_null(cuckoo_validate(&p, 0, &f));   /* capacity < 2 * bucket_size */
    assert_string_equal(f, "capacity");
    p = params(1024, 0, 1, 8);
    assert_non_null(cuckoo_validate(&p, 0, &f));
    p = params(1024, 256, 1, 8);
    assert_non_null(cuckoo_validate(&p, 0, &f));
    p = params(1024, 2, 40000, 8);
    assert_non_null(cuckoo_validate(&p, 0, &f));
    p = params(1024, 2, 1, 8);
    p.max_iterations = 0;
    assert_non_null(cuckoo_validate(&p, 0, &f));
    /* capacity up to 2^32 (openapi.yaml), the first sub-filter within the
     * memory limit: 2^32 buckets of 16-bit slots are 8 GiB */
    p = params(1ULL << 32, 1, 1, 16);
    assert_null(cuckoo_validate(&p, 0, &f));
    assert_non_null(cuckoo_validate(&p, 1ULL << 30, &f));
    assert_string_equal(f, "capacity");
    assert_null(cuckoo_validate(&p, 1ULL << 33, &f));
    p = params((1ULL << 32) + 1, 1, 1, 8);
    assert_non_null(cuckoo_validate(&p, 0, &f));
}

/* Random adds/removes against a multiset: every item added more times than
 * removed must be present, and COUNT >= its multiplicity. */
static void test_model(void **state)
{
    (void)state;
    static const uint32_t fps[] = { 8, 12, 16 };
    for (size_t fi = 0; fi < 3; fi++) {
        cuckoo_params_t p = params(4096, 4, 1, fps[fi]);
        cuckoo_t *c = cuckoo_create(&p, 42 + fi);
        enum { N = 3000 };
        static int mult[N];
        memset(mult, 0, sizeof(mult));
        rng_t g;
        rng_seed(&g, 7 + fi);
        char k[32];
        for (int step = 0; step < 20000; step++) {
            uint64_t i = rng_below(&g, N);
            name(k, sizeof(k), "m", i);
            uint64_t op = rng_below(&g, 10);
            if (op < 6) {
                int rc = cuckoo_add(c, k, strlen(k), false, NULL);
                assert_int_equal(rc, CUCKOO_ADDED);
                mult[i]++;
            } else if (op < 9 && mult[i] > 0) {
                assert_true(cuckoo_delete(c, k, strlen(k), NULL));
                mult[i]--;
            } else {
                int rc = cuckoo_add(c, k, strlen(k), true, NULL);
                if (mult[i] > 0)
                    assert_int_equal(rc, CUCKOO_EXISTS);
                else if (rc == CUCKOO_ADDED)
                    mult[i]++;
            }
            if (step % 1000 == 999)
                for (int j = 0; j < N; j++)
                    if (mult[j] > 0) {
                        name(k, sizeof(k), "m", (uint64_t)j);
                        assert_true(cuckoo_check(c, k, strlen(k)));
                        assert_true(cuckoo_count(c, k, strlen(k)) >= (uint64_t)mult[j]);
                    }
        }
        uint64_t total = 0;
        for (int j = 0; j < N; j++)
            total += (uint64_t)mult[j];
        cuckoo_info_t info;
        cuckoo_get_info(c, &info);
        assert_int_equal(info.items, total);
        cuckoo_free(c);
    }
}

/* Two items with the same fingerprint and bucket (found by search): adding
 * both and deleting one leaves the other present. */
static void test_delete_keeps_colliding_item(void **state)
{
    (void)state;
    cuckoo_params_t p = params(64, 2, 0, 8);   /* 32 buckets: collisions are easy */
    cuckoo_t *probe = cuckoo_create(&p, 1);
    char a[32], b[32];
    name(a, sizeof(a), "c", 0);
    uint64_t j = 1;
    for (;; j++) {
        /* a colliding item is one whose presence a lone `a` fakes */
        cuckoo_t *one = cuckoo_create(&p, 1);
        cuckoo_add(one, a, strlen(a), false, NULL);
        name(b, sizeof(b), "c", j);
        bool fake = cuckoo_check(one, b, strlen(b)) && cuckoo_count(one, b, strlen(b)) == 1;
        cuckoo_free(one);
        if (fake)
            break;
    }
    cuckoo_free(probe);
    cuckoo_t *c = cuckoo_create(&p, 9);
    assert_int_equal(cuckoo_add(c, a, strlen(a), false, NULL), CUCKOO_ADDED);
    assert_int_equal(cuckoo_add(c, b, strlen(b), false, NULL), CUCKOO_ADDED);
    assert_int_equal(cuckoo_count(c, a, strlen(a)), 2);
    assert_true(cuckoo_delete(c, a, strlen(a), NULL));
    assert_true(cuckoo_check(c, b, strlen(b)));
    assert_true(cuckoo_delete(c, b, strlen(b), NULL));
    assert_false(cuckoo_check(c, b, strlen(b)));
    assert_false(cuckoo_delete(c, b, strlen(b), NULL));
    cuckoo_free(c);
}

static void test_duplicates_and_nx(void **state)
{
    (void)state;
    cuckoo_params_t p = params(1024, 2, 1, 8);
    cuckoo_t *c = cuckoo_create(&p, 5);
    assert_int_equal(cuckoo_add(c, "x", 1, false, NULL), CUCKOO_ADDED);
    assert_int_equal(cuckoo_add(c, "x", 1, false, NULL), CUCKOO_ADDED);
    assert_int_equal(cuckoo_count(c, "x", 1), 2);
    assert_int_equal(cuckoo_add(c, "x", 1, true, NULL), CUCKOO_EXISTS);
    assert_true(cuckoo_delete(c, "x", 1, NULL));
    assert_true(cuckoo_check(c, "x", 1));
    assert_true(cuckoo_delete(c, "x", 1, NULL));
    assert_false(cuckoo_check(c, "x", 1));
    assert_int_equal(cuckoo_count(c, "x", 1), 0);
    assert_int_equal(cuckoo_add(c, "y", 1, true, NULL), CUCKOO_ADDED);
    cuckoo_info_t info;
    cuckoo_get_info(c, &info);
    assert_int_equal(info.items, 1);
    assert_int_equal(info.deletes, 2);
    cuckoo_free(c);
}

/* expansion 0: the filter fills and then says FULL (quickly, unchanged);
 * a batch that hits FULL is rolled back byte for byte. */
static void test_full_and_undo(void **state)
{
    (void)state;
    cuckoo_params_t p = params(256, 2, 0, 8);
    cuckoo_t *c = cuckoo_create(&p, 3);
    char k[32];
    uint64_t i = 0;
    int rc;
    while ((rc = cuckoo_add(c, k, (size_t)snprintf(k, sizeof(k), "f%llu", (unsigned long long)i), false, NULL)) ==
           CUCKOO_ADDED)
        i++;
    assert_int_equal(rc, CUCKOO_FULL);
    print_message("cuckoo b=2 filled to %llu of 256 slots before FULL\n", (unsigned long long)i);
    assert_true(i > 150);
    /* every added item is still present */
    for (uint64_t j = 0; j < i; j++) {
        name(k, sizeof(k), "f", j);
        assert_true(cuckoo_check(c, k, strlen(k)));
    }
    wbuf_t before = WBUF_INIT, after = WBUF_INIT;
    cuckoo_type.encode(c, &before);
    name(k, sizeof(k), "f", i);
    assert_int_equal(cuckoo_add(c, k, strlen(k), false, NULL), CUCKOO_FULL);   /* the refused item again */
    cuckoo_type.encode(c, &after);
    assert_memory_equal(before.data, after.data, before.len);   /* a failed add changes nothing */
    wbuf_free(&after);
    cuckoo_free(c);

    /* batch rollback: half-full filter, a batch that overflows it */
    c = cuckoo_create(&p, 4);
    for (i = 0; i < 100; i++) {
        name(k, sizeof(k), "h", i);
        cuckoo_add(c, k, strlen(k), false, NULL);
    }
    wbuf_free(&before);
    cuckoo_type.encode(c, &before);
    cuckoo_undo_t *u = cuckoo_undo_begin(c);
    for (i = 0;; i++) {
        name(k, sizeof(k), "b", i);
        if (cuckoo_add(c, k, strlen(k), false, u) == CUCKOO_FULL)
            break;
    }
    cuckoo_undo_rollback(c, u);
    assert_encodes_as(&cuckoo_type, c, &before);
    wbuf_free(&before);
    cuckoo_free(c);

    /* growth: 32 sub-filters at most, then "Maximum expansions reached"
     * (generation 1: FULL) */
    p = params(4, 2, 1, 8);
    for (unsigned gen = TALLY_GEN_1; gen <= TALLY_GEN_2; gen++) {
        c = cuckoo_create_gen(gen, &p, 6);
        for (i = 0; i < 100000; i++) {
            name(k, sizeof(k), "g", i);
            rc = cuckoo_add(c, k, strlen(k), false, NULL);
            if (rc != CUCKOO_ADDED)
                break;
        }
        assert_int_equal(rc, gen == TALLY_GEN_1 ? CUCKOO_FULL : CUCKOO_MAXEXP);
        cuckoo_info_t info;
        cuckoo_get_info(c, &info);
        assert_int_equal(info.filters, CUCKOO_MAX_FILTERS);
        cuckoo_free(c);
    }
}

/* FPR per fingerprint size, one sub-filter filled until its first failed
 * insert.  RedisBloom's eviction walk is deterministic (slot 0, 1, ... from
 * the first bucket) and ends there at ~65% load with b = 2 and 500
 * iterations, where random walks (generation 1, Fan et al.) reach ~88%. */
static void test_fpr_per_fingerprint(void **state)
{
    (void)state;
    static const uint32_t fps[] = { 8, 12, 16 };
    for (size_t fi = 0; fi < 3; fi++) {
        cuckoo_params_t p = params(1 << 16, 2, 0, fps[fi]);
        p.max_iterations = 500;   /* Fan et al.'s setting: ~84% load at b=2 */
        cuckoo_t *c = cuckoo_create(&p, 11);
        char k[32];
        uint64_t n = 0;
        while (n < 58000) {   /* ~88% of 65536 slots */
            name(k, sizeof(k), "a", n);
            if (cuckoo_add(c, k, strlen(k), false, NULL) != CUCKOO_ADDED)
                break;
            n++;
        }
        uint64_t probes = 2000000, fp = 0;
        for (uint64_t i = 0; i < probes; i++) {
            name(k, sizeof(k), "z", i);
            fp += cuckoo_check(c, k, strlen(k));
        }
        double fpr = (double)fp / (double)probes;
        double bound = 2.0 * 2 / (double)((1u << fps[fi]) - 1);   /* 2b / (2^f - 1) */
        cuckoo_info_t info;
        cuckoo_get_info(c, &info);
        print_message("cuckoo f=%u b=2: %llu items (load %.1f%%), fpr %.6f (bound %.6f), %.2f bits/item\n", fps[fi],
                      (unsigned long long)n, 100.0 * (double)n / 65536.0, fpr, bound,
                      8.0 * (double)info.size_bytes / (double)n);
        assert_true(n >= 40000);
        assert_true(fpr <= bound);
        cuckoo_free(c);
    }
}

static void test_deterministic_and_encoding(void **state)
{
    (void)state;
    static const uint32_t fps[] = { 8, 12, 16 };
    for (size_t fi = 0; fi < 3; fi++) {
        cuckoo_params_t p = params(101, 3, 2, fps[fi]);   /* odd slot count for 12-bit padding */
        cuckoo_t *a = cuckoo_create(&p, 99), *b = cuckoo_create(&p, 99);
        char k[32];
        for (int i = 0; i < 500; i++) {
            name(k, sizeof(k), "d", (uint64_t)i);
            cuckoo_add(a, k, strlen(k), false, NULL);
            cuckoo_add(b, k, strlen(k), false, NULL);
            if (i % 7 == 0) {
                name(k, sizeof(k), "d", (uint64_t)i / 2);
                cuckoo_delete(a, k, strlen(k), NULL);
                cuckoo_delete(b, k, strlen(k), NULL);
            }
        }
        wbuf_t ea = WBUF_INIT, eb = WBUF_INIT, ec = WBUF_INIT;
        cuckoo_type.encode(a, &ea);
        cuckoo_type.encode(b, &eb);
        assert_int_equal(ea.len, eb.len);
        assert_memory_equal(ea.data, eb.data, ea.len);   /* replay makes the same choices */
        const char *why;
        cuckoo_t *c = cuckoo_type.decode(ea.data, ea.len, &why);
        if (!c)
            fail_msg("decode: %s", why);
        cuckoo_type.encode(c, &ec);
        assert_memory_equal(ea.data, ec.data, ea.len);
        /* continuing after the reload makes the same choices too */
        for (int i = 500; i < 700; i++) {
            name(k, sizeof(k), "d", (uint64_t)i);
            cuckoo_add(a, k, strlen(k), false, NULL);
            cuckoo_add(c, k, strlen(k), false, NULL);
        }
        wbuf_free(&ea);
        wbuf_free(&ec);
        cuckoo_type.encode(a, &ea);
        cuckoo_type.encode(c, &ec);
        assert_memory_equal(ea.data, ec.data, ea.len);
        for (size_t cut = 0; cut < ea.len; cut += (cut < 100 ? 1 : 37))
            assert_null(cuckoo_type.decode(ea.data, cut, &why));
        uint8_t *m = malloc(ea.len);
        for (size_t i = 0; i < ea.len; i += (i < 80 ? 1 : 13)) {
            memcpy(m, ea.data, ea.len);
            m[i] ^= 0x41;
            cuckoo_t *d = cuckoo_type.decode(m, ea.len, &why);
            if (d) {
                cuckoo_add(d, "q", 1, false, NULL);
                cuckoo_delete(d, "q", 1, NULL);
            }
            cuckoo_free(d);
        }
        free(m);
        wbuf_free(&ea);
        wbuf_free(&eb);
        wbuf_free(&ec);
        cuckoo_free(a);
        cuckoo_free(b);
        cuckoo_free(c);
    }
}

/* ------------------------------------------------------------------------ */
/* RedisBloom's numbers (tests/flow/test_cuckoo.py)                         */
/* ------------------------------------------------------------------------ */

/* Adds the decimal strings 0..n-1 with CF.ADD; false at the first refusal. */
static int add_decimal(cuckoo_t *c, int n)
{
    char k[16];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof(k), "%d", i);
        int rc = cuckoo_add(c, k, strlen(k), false, NULL);
        if (rc != CUCKOO_ADDED)
            return rc;
    }
    return CUCKOO_ADDED;
}

/* The CF.DEBUG line. */
static void assert_debug(const cuckoo_t *c, const char *want)
{
    cuckoo_info_t in;
    cuckoo_get_info(c, &in);
    char line[160];
    snprintf(line, sizeof(line), "bktsize:%u buckets:%llu items:%llu deletes:%llu filters:%u max_iterations:%u expansion:%u",
             in.bucket_size, (unsigned long long)in.buckets0, (unsigned long long)in.items,
             (unsigned long long)in.deletes, in.filters, in.max_iterations, in.expansion);
    assert_string_equal(line, want);
}

static cuckoo_t *reserve(uint64_t cap, uint32_t bs, uint32_t mi, uint32_t exp)
{
    cuckoo_params_t p = params(cap, bs, exp, 8);
    p.max_iterations = mi;
    cuckoo_t *c = cuckoo_create(&p, 1);
    assert_non_null(c);
    return c;
}

/* test_bucket_size, test_expansion, test_max_expansions, test_expansion_0,
 * test_info, test_params: the filters after 1000 adds, and the limits. */
static void test_rb_geometry(void **state)
{
    (void)state;
    static const struct {
        uint64_t cap;
        uint32_t bs, mi, exp;
        const char *debug;
    } cases[] = {
        { 64, 1, 20, 1, "bktsize:1 buckets:64 items:1000 deletes:0 filters:18 max_iterations:20 expansion:1" },
        { 64, 2, 20, 1, "bktsize:2 buckets:32 items:1000 deletes:0 filters:17 max_iterations:20 expansion:1" },
        { 256, 4, 500, 1, "bktsize:4 buckets:64 items:1000 deletes:0 filters:4 max_iterations:500 expansion:1" },
        { 64, 2, 20, 2, "bktsize:2 buckets:32 items:1000 deletes:0 filters:5 max_iterations:20 expansion:2" },
        { 64, 2, 500, 4, "bktsize:2 buckets:32 items:1000 deletes:0 filters:3 max_iterations:500 expansion:4" },
    };
    char k[16];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cuckoo_t *c = reserve(cases[i].cap, cases[i].bs, cases[i].mi, cases[i].exp);
        assert_int_equal(add_decimal(c, 1000), CUCKOO_ADDED);
        for (int j = 0; j < 1000; j++) {
            snprintf(k, sizeof(k), "%d", j);
            assert_true(cuckoo_check(c, k, strlen(k)));
        }
        assert_debug(c, cases[i].debug);
        cuckoo_free(c);
    }

    cuckoo_t *c = reserve(4, 2, 20, 1);   /* 124 adds fill 32 sub-filters of 4 slots */
    assert_int_equal(add_decimal(c, 124), CUCKOO_ADDED);
    assert_int_equal(cuckoo_add(c, "2048", 4, false, NULL), CUCKOO_MAXEXP);
    cuckoo_free(c);

    c = reserve(4, 2, 20, 0);
    assert_int_equal(add_decimal(c, 4), CUCKOO_ADDED);
    assert_int_equal(cuckoo_add(c, "5", 1, false, NULL), CUCKOO_FULL);
    assert_int_equal(cuckoo_add(c, "6", 1, false, NULL), CUCKOO_FULL);
    cuckoo_free(c);

    c = reserve(1000, 2, 20, 1);
    cuckoo_info_t in;
    cuckoo_get_info(c, &in);
    assert_int_equal(in.size_bytes, 1080);
    assert_int_equal(in.buckets0, 512);
    cuckoo_free(c);
    c = reserve(10, 2, 10, 1);
    assert_debug(c, "bktsize:2 buckets:8 items:0 deletes:0 filters:1 max_iterations:10 expansion:1");
    cuckoo_free(c);
}

/* CF.COMPACT (test_compact) and the compaction CF.DEL starts; under an undo
 * log a batch of deletes that compacted is rolled back byte for byte. */
static void test_compaction(void **state)
{
    (void)state;
    cuckoo_t *c = reserve(8, 2, 50, 1);
    assert_int_equal(add_decimal(c, 100), CUCKOO_ADDED);
    cuckoo_info_t a, b;
    cuckoo_get_info(c, &a);
    char k[16];
    cuckoo_compact(c);
    cuckoo_get_info(c, &b);
    assert_true(b.filters <= a.filters);
    assert_int_equal(b.items, 100);
    assert_int_equal(b.deletes, 0);
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "%d", i);
        assert_true(cuckoo_check(c, k, strlen(k)));
    }
    cuckoo_free(c);

    /* deleting the newest items lets compaction free sub-filters */
    c = reserve(8, 2, 20, 1);
    assert_int_equal(add_decimal(c, 200), CUCKOO_ADDED);
    cuckoo_get_info(c, &a);
    wbuf_t before = WBUF_INIT;
    cuckoo_type.encode(c, &before);
    cuckoo_undo_t *u = cuckoo_undo_begin(c);
    for (int i = 199; i >= 100; i--) {
        snprintf(k, sizeof(k), "%d", i);
        assert_true(cuckoo_delete(c, k, strlen(k), u));
    }
    cuckoo_get_info(c, &b);
    print_message("cuckoo: 200 items in %u sub-filters; 100 deleted -> %u sub-filters\n", a.filters, b.filters);
    assert_true(b.filters < a.filters);
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "%d", i);
        assert_true(cuckoo_check(c, k, strlen(k)));
    }
    cuckoo_undo_rollback(c, u);
    assert_encodes_as(&cuckoo_type, c, &before);
    wbuf_free(&before);
    /* the same deletes committed, and without a log, end alike */
    cuckoo_t *d = reserve(8, 2, 20, 1);
    assert_int_equal(add_decimal(d, 200), CUCKOO_ADDED);
    u = cuckoo_undo_begin(c);
    for (int i = 199; i >= 100; i--) {
        snprintf(k, sizeof(k), "%d", i);
        assert_true(cuckoo_delete(c, k, strlen(k), u));
        assert_true(cuckoo_delete(d, k, strlen(k), NULL));
    }
    cuckoo_undo_commit(u);
    assert_same_encoding(&cuckoo_type, c, d);
    cuckoo_free(c);
    cuckoo_free(d);
}

static void le_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* CF.SCANDUMP / CF.LOADCHUNK: the header's bytes as the format describes
 * them, a round trip through small chunks, and refusals. */
static void test_dump_load(void **state)
{
    (void)state;
    cuckoo_t *c = reserve(1000, 2, 20, 1);
    uint8_t want[38];
    le_put(want, 0, 8);
    le_put(want + 8, 512, 8);
    le_put(want + 16, 0, 8);
    le_put(want + 24, 1, 8);
    le_put(want + 32, 2, 2);
    le_put(want + 34, 20, 2);
    le_put(want + 36, 1, 2);
    wbuf_t h = WBUF_INIT;
    assert_true(cuckoo_dump_header(c, &h));
    assert_int_equal(h.len, 38);
    assert_memory_equal(h.data, want, 38);
    wbuf_free(&h);
    cuckoo_free(c);

    c = reserve(64, 2, 20, 2);
    assert_int_equal(add_decimal(c, 300), CUCKOO_ADDED);
    char k[16];
    snprintf(k, sizeof(k), "%d", 7);
    assert_true(cuckoo_delete(c, k, strlen(k), NULL));
    assert_true(cuckoo_dump_header(c, &h));
    bool nomem;
    const char *why;
    cuckoo_t *d = cuckoo_load_header(h.data, h.len, 0, &nomem, &why);
    assert_non_null(d);
    assert_null(cuckoo_load_header(h.data, h.len, 16, &nomem, &why));   /* over the memory limit */
    int64_t cur = 1;
    size_t len;
    const uint8_t *p;
    while ((p = cuckoo_dump_chunk(c, &cur, 50, &len)))
        assert_true(cuckoo_load_chunk(d, cur, p, len, &why));
    assert_int_equal(cur, 0);
    assert_same_encoding(&cuckoo_type, c, d);
    assert_false(cuckoo_load_chunk(d, 0, (const uint8_t *)"a", 1, &why));
    assert_false(cuckoo_load_chunk(d, 1, (const uint8_t *)"a", 1, &why));   /* before the data */
    assert_false(cuckoo_load_chunk(d, 1000000, (const uint8_t *)"a", 1, &why));
    assert_false(cuckoo_load_chunk(d, 2, (const uint8_t *)"", 0, &why));
    cuckoo_free(d);

    /* every header field RedisBloom could not have produced is refused */
    static const struct {
        int off, n;
        uint64_t v;
    } bad[] = {
        { 8, 8, 0 }, { 8, 8, 3 }, { 8, 8, 1 }, { 24, 8, 0 }, { 24, 8, 33 }, { 32, 2, 0 },
        { 32, 2, 256 }, { 34, 2, 0 }, { 36, 2, 3 }, { 36, 2, 65535 },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t m[38];
        memcpy(m, h.data, 38);
        le_put(m + bad[i].off, bad[i].v, bad[i].n);
        assert_null(cuckoo_load_header(m, 38, 0, &nomem, &why));
    }
    /* the largest first sub-filter: 2^32 buckets (a capacity of 2^32 at
     * bucket size 1, or RedisBloom's 2^30 grown), loaded within the memory
     * limit; 2^33 is refused as a geometry */
    uint8_t big[38];
    memcpy(big, h.data, 38);
    le_put(big + 8, 1ULL << 32, 8);
    le_put(big + 24, 1, 8);
    assert_null(cuckoo_load_header(big, 38, 1ULL << 30, &nomem, &why));
    assert_false(nomem);
    assert_string_equal(why, "cuckoo: the filter is larger than the limit on a value's size");
    le_put(big + 8, 1ULL << 33, 8);
    assert_null(cuckoo_load_header(big, 38, 1ULL << 30, &nomem, &why));
    assert_string_equal(why, "cuckoo: invalid geometry in the header");
    uint8_t m[39];
    memcpy(m, h.data, 38);
    le_put(m + 36, 0, 2);   /* expansion 0 with 3 sub-filters */
    assert_null(cuckoo_load_header(m, 38, 0, &nomem, &why));
    for (size_t cut = 0; cut < 38; cut++)
        assert_null(cuckoo_load_header(h.data, cut, 0, &nomem, &why));
    memcpy(m, h.data, 38);
    m[38] = 0;
    assert_null(cuckoo_load_header(m, 39, 0, &nomem, &why));
    wbuf_free(&h);
    /* 12-bit fingerprints have no RedisBloom format */
    cuckoo_params_t q = params(64, 2, 1, 12);
    d = cuckoo_create(&q, 1);
    assert_false(cuckoo_dump_header(d, &h));
    cur = 1;
    assert_null(cuckoo_dump_chunk(d, &cur, 50, &len));
    cuckoo_free(d);
    cuckoo_free(c);
}

/* A generation-1 filter keeps its encoding version and its rules. */
static void test_gen1(void **state)
{
    (void)state;
    cuckoo_params_t p = params(64, 2, 1, 8);
    cuckoo_t *a = cuckoo_create_gen(TALLY_GEN_1, &p, 5), *b = cuckoo_create(&p, 5);
    assert_int_equal(add_decimal(a, 1000), CUCKOO_ADDED);
    assert_int_equal(add_decimal(b, 1000), CUCKOO_ADDED);
    cuckoo_info_t ia, ib;
    cuckoo_get_info(a, &ia);
    cuckoo_get_info(b, &ib);
    assert_int_equal(ib.filters, 17);
    print_message("1000 adds into capacity 64: generation 1 %u sub-filters, RedisBloom's rules %u\n", ia.filters,
                  ib.filters);
    wbuf_t w = WBUF_INIT;
    cuckoo_type.encode(a, &w);
    assert_int_equal(w.data[0], 1);
    const char *why;
    cuckoo_t *r = cuckoo_type.decode(w.data, w.len, &why);
    assert_non_null(r);
    assert_int_equal(add_decimal(a, 300), CUCKOO_ADDED);   /* copies: random evictions, replayed alike */
    assert_int_equal(add_decimal(r, 300), CUCKOO_ADDED);
    wbuf_free(&w);
    assert_same_encoding(&cuckoo_type, a, r);
    cuckoo_free(a);
    cuckoo_free(b);
    cuckoo_free(r);
}

/* Sizes asked for before allocating: a new filter's, and a batch's next
 * sub-filter, which cuckoo_add_within refuses (CUCKOO_BUDGET, nothing
 * changed) unless max_bytes leaves room for it. */
static void test_bytes_for(void **state)
{
    (void)state;
    cuckoo_params_t p = { 64, 2, 20, 2, 8 };
    cuckoo_t *c = cuckoo_create(&p, 1);
    assert_int_equal(cuckoo_bytes_for(&p), cuckoo_memory(c));
    char k[32];
    int rc = CUCKOO_ADDED, i = 0;
    uint64_t mem = cuckoo_memory(c);
    while (rc == CUCKOO_ADDED)
        rc = cuckoo_add_within(c, k, (size_t)snprintf(k, sizeof(k), "b%d", i++), false, mem, NULL);
    assert_int_equal(rc, CUCKOO_BUDGET);
    assert_int_equal(cuckoo_memory(c), mem);
    uint64_t next = cuckoo_next_filter_bytes(c);
    assert_int_equal(next, 128);   /* 32 buckets x 2 slots of 8 bits, expanded x2 */
    assert_true(cuckoo_growth_estimate(c, 1) == next);
    assert_true(cuckoo_growth_estimate(c, 10000) > next);
    assert_int_equal(cuckoo_add_within(c, k, strlen(k), false, mem + next, NULL), CUCKOO_ADDED);
    assert_int_equal(cuckoo_memory(c), mem + next);
    cuckoo_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_duplicates_and_nx),
        cmocka_unit_test(test_delete_keeps_colliding_item),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_full_and_undo),
        cmocka_unit_test(test_deterministic_and_encoding),
        cmocka_unit_test(test_fpr_per_fingerprint),
        cmocka_unit_test(test_rb_geometry),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_dump_load),
        cmocka_unit_test(test_gen1),
        cmocka_unit_test(test_bytes_for),
    };
    return cmocka_run_group_tests_name("cuckoo", tests, NULL, NULL);
}
