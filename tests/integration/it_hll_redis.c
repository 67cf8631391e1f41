/*
 * it_hll_redis.c - core/hll against a real redis-server, byte for byte.
 *
 * The same PFADD/PFMERGE/PFCOUNT sequences go to Redis and to hll_t; after
 * every step the Redis string (GET on the key) must equal hll_bytes() and
 * the counts must be equal: through the sparse encoding, the promotion to
 * dense, cached cardinalities, unions, merges, and sizes up to 1 000 000.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hll.h"
#include "core/rng.h"
#include "tests/integration/harness.h"
#include "tests/integration/redis_ref.h"

static redis_ref_t R;
static bool have_redis;

static int setup(void **state)
{
    (void)state;
    have_redis = redis_ref_start(&R);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (have_redis)
        redis_ref_stop(&R);
    return 0;
}

#define NEED_REDIS()        \
    do {                    \
        if (!have_redis)    \
            skip();         \
    } while (0)

static void item_name(char *out, size_t n, uint64_t seed, uint64_t i)
{
    snprintf(out, n, "item:%llu:%llu", (unsigned long long)seed, (unsigned long long)i);
}

/* PFADD key items... on Redis; returns its integer reply. */
static long long r_pfadd(const char *key, char **items, size_t n)
{
    const char **argv = malloc((n + 2) * sizeof(*argv));
    argv[0] = "PFADD";
    argv[1] = key;
    for (size_t i = 0; i < n; i++)
        argv[i + 2] = items[i];
    resp_t *v = redis_cmdv(&R, (int)(n + 2), argv, NULL);
    assert_int_equal(v->kind, RESP_INT);
    long long x = v->integer;
    resp_free(v);
    free(argv);
    return x;
}

static long long r_int(const char *cmd, const char *a, const char *b, const char *c)
{
    resp_t *v = redis_cmd(&R, cmd, a, b, c, NULL);
    if (v->kind != RESP_INT)
        fail_msg("%s %s: %s", cmd, a, v->str ? v->str : "?");
    long long x = v->integer;
    resp_free(v);
    return x;
}

static void assert_same_bytes(const char *key, const hll_t *h, const char *what)
{
    resp_t *v = redis_cmd(&R, "GET", key, NULL);
    assert_int_equal(v->kind, RESP_BULK);
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    if (v->len != len || memcmp(v->str, b, len) != 0) {
        size_t i = 0;
        while (i < len && i < v->len && (uint8_t)v->str[i] == b[i])
            i++;
        fail_msg("%s: key %s differs from Redis: redis %zu bytes, ours %zu, first difference at %zu", what, key,
                 v->len, len, i);
    }
    resp_free(v);
}

static int add_both(const char *key, hll_t *h, uint64_t seed, uint64_t from, size_t n)
{
    char **items = malloc(n * sizeof(*items));
    size_t *lens = malloc(n * sizeof(*lens));
    for (size_t i = 0; i < n; i++) {
        items[i] = malloc(48);
        item_name(items[i], 48, seed, from + i);
        lens[i] = strlen(items[i]);
    }
    long long rr = r_pfadd(key, items, n);
    int ours = hll_add_batch(h, (const char *const *)items, lens, n);
    assert_int_equal(ours, (int)rr);
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
    free(lens);
    return ours;
}

/* Random batches through sparse and the promotion to dense, bytes compared
 * after every batch, with PFCOUNT (which fills the cache) now and then. */
static void test_bytes_through_promotion(void **state)
{
    (void)state;
    NEED_REDIS();
    for (uint64_t seed = 1; seed <= 6; seed++) {
        char key[32];
        snprintf(key, sizeof(key), "promo%llu", (unsigned long long)seed);
        hll_t *h = hll_create();
        rng_t g;
        rng_seed(&g, seed);
        uint64_t next = 0;
        bool was_sparse = true;
        int steps = 0;
        while (next < 4000) {
            size_t n = 1 + rng_below(&g, seed < 3 ? 3 : 40);
            /* sometimes re-add old items (no change expected) */
            uint64_t from = (next > 10 && rng_below(&g, 5) == 0) ? rng_below(&g, next - 5) : next;
            if (from == next)
                next += n;
            add_both(key, h, seed, from, n);
            assert_same_bytes(key, h, "after PFADD");
            if (rng_below(&g, 4) == 0) {
                long long rc = r_int("PFCOUNT", key, NULL, NULL);
                bool wrote;
                assert_int_equal(hll_count(h, true, &wrote), (uint64_t)rc);
                assert_same_bytes(key, h, "after PFCOUNT");
            }
            if (was_sparse && !hll_is_sparse(h))
                was_sparse = false;
            steps++;
        }
        assert_false(was_sparse);   /* the promotion happened and matched */
        hll_free(h);
    }
}

/* A value above 32 forces promotion even when the string is short.  No
 * practical item hashes to one (p = 2^-32), so the value comes from a
 * crafted dense HLL merged into a small sparse one. */
static void test_promotion_by_value(void **state)
{
    (void)state;
    NEED_REDIS();
    uint8_t dense[HLL_DENSE_SIZE];
    memset(dense, 0, sizeof(dense));
    memcpy(dense, "HYLL", 4);
    dense[15] = 0x80;                           /* cache invalid */
    /* register 5 (bits 30..35) = 40 */
    dense[HLL_HDR_SIZE + 3] = (uint8_t)((40 & 3) << 6);
    dense[HLL_HDR_SIZE + 4] = (uint8_t)(40 >> 2);
    const char *why;
    hll_t *src = hll_from_redis(dense, sizeof(dense), &why);
    assert_non_null(src);
    const char *setv[3] = { "SET", "crafted", (const char *)dense };
    size_t setl[3] = { 3, 7, sizeof(dense) };
    resp_free(redis_cmdv(&R, 3, setv, setl));

    hll_t *h = hll_create();
    add_both("bigval", h, 9, 0, 20);
    assert_true(hll_is_sparse(h));
    /* PFMERGE from a dense source promotes anyway; so do it through a sparse
     * copy of the crafted registers: Redis keeps the destination sparse
     * until the value 40 arrives. */
    uint8_t max[HLL_REGISTERS] = { 0 };
    hll_max_into(h, max);
    hll_max_into(src, max);
    assert_int_equal(max[5], 40);
    assert_int_equal(hll_merge_registers(h, max, true), 0);
    resp_free(redis_cmd(&R, "PFMERGE", "bigval", "crafted", NULL));
    assert_false(hll_is_sparse(h));
    assert_same_bytes("bigval", h, "value > 32");
    assert_int_equal(hll_count(h, true, NULL), (uint64_t)r_int("PFCOUNT", "bigval", NULL, NULL));
    assert_same_bytes("bigval", h, "value > 32 after PFCOUNT");
    hll_free(h);

    /* the sparse path: a sparse destination, a sparse "source" of raw
     * registers with 40 in them -- the core's hll_merge_registers without
     * to_dense takes the value > 32 branch of the sparse edit */
    hll_t *s = hll_create();
    uint8_t regs[HLL_REGISTERS] = { 0 };
    regs[100] = 3;
    regs[200] = 40;
    assert_int_equal(hll_merge_registers(s, regs, false), 0);
    assert_false(hll_is_sparse(s));
    assert_int_equal(hll_estimate(s), hll_count_registers(regs));
    hll_free(s);
    hll_free(src);
}

/* Counts equal PFCOUNT from 1 to 1 000 000 items (checkpoints 1, 2, 5, ...). */
static void test_counts_to_a_million(void **state)
{
    (void)state;
    NEED_REDIS();
    hll_t *h = hll_create();
    static const uint64_t checkpoints[] = { 1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000,
                                            10000, 20000, 50000, 100000, 200000, 500000, 1000000 };
    uint64_t have = 0;
    for (size_t c = 0; c < sizeof(checkpoints) / sizeof(checkpoints[0]); c++) {
        while (have < checkpoints[c]) {
            uint64_t n = checkpoints[c] - have;
            if (n > 1000)
                n = 1000;
            add_both("million", h, 77, have, n);
            have += n;
        }
        long long rc = r_int("PFCOUNT", "million", NULL, NULL);
        uint64_t ours = hll_count(h, true, NULL);
        assert_int_equal(ours, (uint64_t)rc);
        double err = ((double)ours - (double)have) / (double)have;
        if (have >= 1000 && (err > 0.0243 || err < -0.0243))   /* 3 sigma */
            fail_msg("estimate %llu for %llu items: error %.4f", (unsigned long long)ours,
                     (unsigned long long)have, err);
        if (checkpoints[c] <= 5000 || checkpoints[c] == 1000000)
            assert_same_bytes("million", h, "checkpoint");
    }
    hll_free(h);
}

/* PFCOUNT of several keys = the union; PFMERGE with the destination's own
 * registers, sparse and dense sources, bytes compared. */
static void test_union_and_merge(void **state)
{
    (void)state;
    NEED_REDIS();
    static const size_t sizes[] = { 0, 3, 150, 900, 5000 };
    enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
    hll_t *h[NS];
    char keys[NS][16];
    for (size_t i = 0; i < NS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "u%zu", i);
        h[i] = hll_create();
        if (sizes[i])
            for (size_t done = 0; done < sizes[i]; done += 500)
                add_both(keys[i], h[i], 1000 + i % 3, done, sizes[i] - done < 500 ? sizes[i] - done : 500);
        else
            r_pfadd(keys[i], NULL, 0);   /* an empty HLL exists */
    }
    for (size_t a = 0; a < NS; a++)
        for (size_t b = 0; b < NS; b++) {
            uint8_t max[HLL_REGISTERS] = { 0 };
            hll_max_into(h[a], max);
            hll_max_into(h[b], max);
            long long rc = r_int("PFCOUNT", keys[a], keys[b], NULL);
            assert_int_equal(hll_count_registers(max), (uint64_t)rc);
        }
    /* PFMERGE dst src for every pair, the destination starting as a copy */
    for (size_t a = 0; a < NS; a++)
        for (size_t b = 0; b < NS; b++) {
            char dst[32];
            snprintf(dst, sizeof(dst), "m%zu_%zu", a, b);
            size_t blen;
            const uint8_t *bytes = hll_bytes(h[a], &blen);
            const char *why;
            hll_t *d = hll_from_redis(bytes, blen, &why);
            assert_non_null(d);
            const char *setv[3] = { "SET", dst, (const char *)bytes };
            size_t setl[3] = { 3, strlen(dst), blen };
            resp_free(redis_cmdv(&R, 3, setv, setl));
            resp_t *v = redis_cmd(&R, "PFMERGE", dst, keys[b], NULL);
            assert_int_equal(v->kind, RESP_STRING);
            resp_free(v);
            uint8_t max[HLL_REGISTERS] = { 0 };
            hll_max_into(d, max);
            hll_max_into(h[b], max);
            assert_int_equal(hll_merge_registers(d, max, !hll_is_sparse(d) || !hll_is_sparse(h[b])), 0);
            assert_same_bytes(dst, d, "PFMERGE");
            assert_int_equal(hll_count(d, true, NULL), (uint64_t)r_int("PFCOUNT", dst, NULL, NULL));
            hll_free(d);
        }
    /* PFMERGE into a missing destination */
    resp_free(redis_cmd(&R, "PFMERGE", "fresh", keys[2], keys[3], NULL));
    hll_t *f = hll_create();
    uint8_t max[HLL_REGISTERS] = { 0 };
    hll_max_into(h[2], max);
    hll_max_into(h[3], max);
    hll_merge_registers(f, max, false);
    assert_same_bytes("fresh", f, "PFMERGE into a new key");
    hll_free(f);
    for (size_t i = 0; i < NS; i++)
        hll_free(h[i]);
}

/* Bytes read from Redis import, re-export identically and count the same;
 * damaged bytes are refused, never crash. */
static void test_import_from_redis(void **state)
{
    (void)state;
    NEED_REDIS();
    for (size_t n = 0; n <= 20000; n = n ? n * 4 : 1) {
        char key[32];
        snprintf(key, sizeof(key), "imp%zu", n);
        hll_t *h = hll_create();
        for (size_t done = 0; done < n; done += 1000)
            add_both(key, h, 5, done, n - done < 1000 ? n - done : 1000);
        if (n == 0)
            r_pfadd(key, NULL, 0);
        for (int pass = 0; pass < 2; pass++) {   /* cache invalid, then valid */
            resp_t *v = redis_cmd(&R, "GET", key, NULL);
            const char *why = NULL;
            hll_t *imp = hll_from_redis((const uint8_t *)v->str, v->len, &why);
            if (!imp)
                fail_msg("import of %zu items refused: %s", n, why);
            size_t len;
            const uint8_t *b = hll_bytes(imp, &len);
            assert_int_equal(len, v->len);
            assert_memory_equal(b, v->str, len);
            assert_int_equal(hll_estimate(imp), (uint64_t)r_int("PFCOUNT", key, NULL, NULL));
            /* every single-byte corruption: refused or still a valid HLL */
            uint8_t *copy = malloc(v->len);
            for (size_t i = 0; i < v->len; i += (v->len > 200 ? 97 : 1)) {
                memcpy(copy, v->str, v->len);
                copy[i] ^= 0x5a;
                hll_t *bad = hll_from_redis(copy, v->len, &why);
                if (bad) {
                    hll_add(bad, "x", 1);
                    (void)hll_estimate(bad);
                    hll_free(bad);
                }
                hll_t *cut = hll_from_redis(copy, i, &why);
                hll_free(cut);
            }
            free(copy);
            hll_free(imp);
            resp_free(v);
        }
        hll_free(h);
    }
}

/* The seeds' transcript on the core: counts 1, 4; merge into uv holding two
 * earlier items -> 6, userview still 4. */
static void test_seed_transcript(void **state)
{
    (void)state;
    NEED_REDIS();
    hll_t *uv = hll_create(), *userview = hll_create();
    char *u1[1] = { "user1" };
    char *u234[3] = { "user2", "user3", "user4" };
    char *early[2] = { "user5", "user6" };
    size_t l1[1] = { 5 }, l3[3] = { 5, 5, 5 }, l2[2] = { 5, 5 };
    assert_int_equal(hll_add_batch(userview, (const char *const *)u1, l1, 1), r_pfadd("userview", u1, 1));
    assert_int_equal(hll_count(userview, true, NULL), 1);
    assert_int_equal(hll_add_batch(userview, (const char *const *)u234, l3, 3), r_pfadd("userview", u234, 3));
    assert_int_equal(hll_count(userview, true, NULL), 4);
    assert_int_equal(r_int("PFCOUNT", "userview", NULL, NULL), 4);
    hll_add_batch(uv, (const char *const *)early, l2, 2);
    r_pfadd("uv", early, 2);
    uint8_t max[HLL_REGISTERS] = { 0 };
    hll_max_into(uv, max);
    hll_max_into(userview, max);
    hll_merge_registers(uv, max, false);
    resp_free(redis_cmd(&R, "PFMERGE", "uv", "userview", NULL));
    assert_int_equal(hll_count(uv, true, NULL), 6);
    assert_int_equal(r_int("PFCOUNT", "uv", NULL, NULL), 6);
    assert_int_equal(hll_count(userview, true, NULL), 4);
    assert_same_bytes("uv", uv, "seed uv");
    assert_same_bytes("userview", userview, "seed userview");
    hll_free(uv);
    hll_free(userview);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_transcript),
        cmocka_unit_test(test_bytes_through_promotion),
        cmocka_unit_test(test_promotion_by_value),
        cmocka_unit_test(test_union_and_merge),
        cmocka_unit_test(test_import_from_redis),
        cmocka_unit_test(test_counts_to_a_million),
    };
    return cmocka_run_group_tests_name("hll vs redis-server", tests, setup, teardown);
}
