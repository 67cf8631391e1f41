/*
 * test_topk.c - HeavyKeeper against exact counts: precision on Zipf(1.0)
 * streams with the recommended dimensions, RedisBloom's add/expel/list
 * semantics and hashing (the seed article's examples), determinism of the
 * decay through encode/decode, increments, and the decoder on hostile bytes.
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

#include "core/hash.h"
#include "core/rng.h"
#include "core/topk.h"

static uint8_t *encode(const topk_t *t, size_t *len)
{
    wbuf_t b = WBUF_INIT;
    topk_type.encode(t, &b);
    assert_false(b.oom);
    return wbuf_steal(&b, len);
}

static void add1(topk_t *t, const char *item, const char *want_expelled)
{
    char *out;
    size_t olen;
    topk_add(t, item, strlen(item), 1, &out, &olen);
    if (want_expelled) {
        assert_non_null(out);
        assert_int_equal(olen, strlen(want_expelled));
        assert_memory_equal(out, want_expelled, olen);
    } else {
        assert_null(out);
    }
    free(out);
}

/* ------------------------------------------------------------------------ */
/* Precision on Zipf streams                                                */
/* ------------------------------------------------------------------------ */

#define ZIPF_ITEMS 100000
#define ZIPF_EVENTS 1000000
#define ZIPF_STREAMS 8

static int cmp_desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

/* Share of the listed items whose exact count is among the k largest (ties
 * at the k-th count included).  Items are "<stream>:<rank>". */
static double precision(const topk_t *t, const uint32_t *exact)
{
    uint32_t k = topk_k(t);
    uint32_t *sorted = malloc(ZIPF_ITEMS * sizeof(uint32_t));
    memcpy(sorted, exact, ZIPF_ITEMS * sizeof(uint32_t));
    qsort(sorted, ZIPF_ITEMS, sizeof(uint32_t), cmp_desc);
    uint32_t threshold = sorted[k - 1];
    free(sorted);
    topk_entry_t *v = malloc(k * sizeof(*v));
    size_t n = topk_list(t, v), hits = 0;
    for (size_t i = 0; i < n; i++) {
        const char *colon = memchr(v[i].item, ':', v[i].len);
        assert_non_null(colon);
        char id[16] = { 0 };   /* items are not NUL-terminated */
        size_t idlen = v[i].len - (size_t)(colon + 1 - v[i].item);
        assert_true(idlen > 0 && idlen < sizeof(id));
        memcpy(id, colon + 1, idlen);
        if (exact[atoi(id)] >= threshold)
            hits++;
        if (i > 0)
            assert_true(v[i - 1].count >= v[i].count);   /* descending */
    }
    free(v);
    return (double)hits / k;
}

/* The recommended dimensions, with log base 2: width = ceil(k·log2 k),
 * depth = max(5, ceil(log2 k)). */
static topk_t *recommended(uint32_t k, uint64_t seed)
{
    double lk = log2((double)k);
    return topk_create(k, (uint32_t)ceil(k * lk), (uint32_t)fmax(5, ceil(lk)), 0.9, seed);
}

/* One Zipf(1.0) stream - item of rank r (0-based) with probability
 * (1/(r+1)) / H(100000) - fed to a k = 10 and a k = 100 Top-K.  The stream
 * number is part of every item's name, so each stream also lays the items
 * out differently in the buckets. */
static void run_zipf(uint64_t stream, const double *cdf, double *p10, double *p100)
{
    uint32_t *exact = calloc(ZIPF_ITEMS, sizeof(uint32_t));
    topk_t *t10 = recommended(10, stream), *t100 = recommended(100, stream + 1000);
    assert_int_equal(topk_width(t10), 34);
    assert_int_equal(topk_depth(t10), 5);
    assert_int_equal(topk_width(t100), 665);
    assert_int_equal(topk_depth(t100), 7);
    rng_t r;
    rng_seed(&r, stream);
    char buf[32];
    for (int e = 0; e < ZIPF_EVENTS; e++) {
        double u = rng_double(&r);
        int lo = 0, hi = ZIPF_ITEMS - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        exact[lo]++;
        int n = snprintf(buf, sizeof(buf), "%llu:%d", (unsigned long long)stream, lo);
        char *out;
        size_t olen;
        topk_add(t10, buf, (size_t)n, 1, &out, &olen);
        free(out);
        topk_add(t100, buf, (size_t)n, 1, &out, &olen);
        free(out);
    }
    *p10 = precision(t10, exact);
    *p100 = precision(t100, exact);
    print_message("Zipf(1.0) stream %llu: k = 10 (34 x 5) precision %.2f, k = 100 (665 x 7) precision %.2f\n",
                  (unsigned long long)stream, *p10, *p100);
    topk_free(t10);
    topk_free(t100);
    free(exact);
}

/* Precision >= 99% on Zipf(1.0) streams of 1M events over 100k items, for
 * k = 10 and k = 100 with the recommended dimensions: the mean over the
 * streams (one k = 10 miss costs a stream 10 points). */
static void test_zipf_precision(void **state)
{
    (void)state;
    double *cdf = malloc(ZIPF_ITEMS * sizeof(double));
    double s = 0;
    for (int i = 0; i < ZIPF_ITEMS; i++)
        cdf[i] = s += 1.0 / (i + 1);
    for (int i = 0; i < ZIPF_ITEMS; i++)
        cdf[i] /= s;
    double sum10 = 0, sum100 = 0, min100 = 1;
    for (uint64_t stream = 1; stream <= ZIPF_STREAMS; stream++) {
        double p10, p100;
        run_zipf(stream, cdf, &p10, &p100);
        sum10 += p10;
        sum100 += p100;
        if (p100 < min100)
            min100 = p100;
    }
    free(cdf);
    print_message("mean precision over %d streams: k = 10 %.4f, k = 100 %.4f\n", ZIPF_STREAMS,
                  sum10 / ZIPF_STREAMS, sum100 / ZIPF_STREAMS);
    if (sum10 / ZIPF_STREAMS < 0.99 || sum100 / ZIPF_STREAMS < 0.99)
        fail_msg("mean precision below 0.99: k = 10 %.4f, k = 100 %.4f", sum10 / ZIPF_STREAMS,
                 sum100 / ZIPF_STREAMS);
    assert_true(min100 >= 0.98);
}

/* ------------------------------------------------------------------------ */
/* Semantics                                                                */
/* ------------------------------------------------------------------------ */

/* Adds each of a NULL-terminated list of items once, whatever it expels. */
static void add_all(topk_t *t, const char *const *items)
{
    for (; *items; items++) {
        char *out;
        size_t olen;
        topk_add(t, *items, strlen(*items), 1, &out, &olen);
        free(out);
    }
}

static void list_is(const topk_t *t, const char *const *items, const uint64_t *counts, size_t n)
{
    topk_entry_t v[8];
    assert_int_equal(topk_list(t, v), n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(v[i].len, strlen(items[i]));
        assert_memory_equal(v[i].item, items[i], v[i].len);
        assert_int_equal(v[i].count, counts[i]);
    }
}

/* RedisBloom's rules: an estimate at the heap minimum enters, in place of
 * the root; equal counts sink past each other on the first step only; LIST
 * keeps heap order among equal counts. */
static void test_add_expel_list(void **state)
{
    (void)state;
    topk_t *t = topk_create(2, 50, 5, 0.9, 7);
    add1(t, "a", NULL);          /* [-, a1]: a enters at the root and sinks past the free slot */
    add1(t, "b", NULL);          /* [a1, b1]: b sinks past the equal a */
    add1(t, "c", "a");           /* 1 >= the minimum 1: c replaces the root, a */
    add1(t, "c", NULL);          /* [b1, c2] */
    add1(t, "a", "b");           /* a's buckets kept its 1: 2 >= 1 */
    static const char *const l1[] = { "c", "a" };
    static const uint64_t c1[] = { 2, 2 };
    list_is(t, l1, c1, 2);       /* equal counts in heap order: [c2, a2] */
    assert_false(topk_query(t, "b", 1));
    assert_int_equal(topk_count(t, "b", 1), 1);   /* its bucket still holds 1 */
    assert_int_equal(topk_count(t, "c", 1), 2);
    assert_int_equal(topk_count(t, "zzz", 3), 0);
    topk_free(t);

    /* a wide sketch (no collisions) counts exactly; w's 1 reaches the
     * minimum 1 and takes z's place */
    t = topk_create(3, 1000, 4, 0.9, 1);
    static const char *const stream[] = { "x", "y", "x", "z", "x", "y", "w", "x", NULL };
    add_all(t, stream);
    static const char *const l2[] = { "x", "y", "w" };
    static const uint64_t c2[] = { 4, 2, 1 };
    list_is(t, l2, c2, 3);
    topk_free(t);
}

/* test_topk.py test_list_info (k 2, 50 x 5): the fifth add of bar brings
 * it to 6, equal to the minimum, and expels foo (the root); ties list in
 * heap order.  test_incrby (decay 1, no randomness): xyzzy's 4 reaches past
 * the minimum 3 and expels bar; COUNT of each.  test_lookup_table. */
static void test_redisbloom_cases(void **state)
{
    (void)state;
    topk_t *t = topk_create(2, 50, 5, 0.9, 5);
    static const char *const adds[][8] = {
        { "foo", "bar", "baz", "42", "foo", "bar", "baz", NULL },
        { "foo", "baz", "42", "foo", "baz", NULL },
        { "foo", "bar", "baz", "foo", "baz", NULL },
    };
    for (int i = 0; i < 3; i++)
        add_all(t, adds[i]);
    static const char *const l1[] = { "foo", "baz" };
    static const uint64_t c1[] = { 6, 6 };
    list_is(t, l1, c1, 2);
    add1(t, "bar", NULL);
    add1(t, "bar", NULL);
    add1(t, "bar", "foo");
    add1(t, "bar", NULL);
    add1(t, "bar", NULL);
    static const char *const l2[] = { "bar", "baz" };
    static const uint64_t c2[] = { 8, 6 };
    list_is(t, l2, c2, 2);
    topk_free(t);

    t = topk_create(3, 10, 3, 1, 5);
    static const char *const in1[] = { "bar", "baz", "42" }, *const in2[] = { "42", "xyzzy" };
    static const uint32_t by1[] = { 3, 6, 2 }, by2[] = { 8, 4 };
    static const char *const exp2[] = { NULL, "bar" };
    for (int i = 0; i < 3; i++) {
        char *out;
        size_t olen;
        topk_add(t, in1[i], strlen(in1[i]), by1[i], &out, &olen);
        assert_null(out);
    }
    for (int i = 0; i < 2; i++) {
        char *out;
        size_t olen;
        topk_add(t, in2[i], strlen(in2[i]), by2[i], &out, &olen);
        if (exp2[i]) {
            assert_non_null(out);
            assert_int_equal(olen, strlen(exp2[i]));
            assert_memory_equal(out, exp2[i], olen);
        } else {
            assert_null(out);
        }
        free(out);
    }
    static const char *const q[] = { "bar", "baz", "42", "xyzzy", "4" };
    static const uint64_t qc[] = { 3, 6, 10, 4, 0 };
    for (int i = 0; i < 5; i++)
        assert_int_equal(topk_count(t, q[i], strlen(q[i])), qc[i]);
    topk_free(t);

    t = topk_create(1, 3, 3, 0.9, 5);
    static const char *const in3[] = { "bar", "baz", "42", "42", "xyzzy" };
    static const uint32_t by3[] = { 300, 600, 200, 80, 400 };
    for (int i = 0; i < 5; i++) {
        char *out;
        size_t olen;
        topk_add(t, in3[i], strlen(in3[i]), by3[i], &out, &olen);
        free(out);
    }
    topk_entry_t v[1];
    assert_int_equal(topk_list(t, v), 1);
    assert_int_equal(v[0].len, 3);
    assert_memory_equal(v[0].item, "baz", 3);
    topk_free(t);
}

/* Generation 1's rules stay with the Top-Ks it made (topk.h). */
static void test_gen1_rules(void **state)
{
    (void)state;
    topk_t *t = topk_create_gen(TALLY_GEN_1, 2, 50, 5, 0.9, 7);
    add1(t, "a", NULL);
    add1(t, "b", NULL);          /* the heap has room: nothing expelled */
    add1(t, "c", NULL);          /* c's 1 does not beat the minimum 1 */
    add1(t, "c", "b");           /* 2 > 1: c pushes out the heap's root, b */
    add1(t, "a", NULL);          /* a is listed: its count grows to 2 */
    topk_entry_t v[2];
    size_t n = topk_list(t, v);
    assert_int_equal(n, 2);
    assert_memory_equal(v[0].item, "a", 1);   /* equal counts: by item bytes */
    assert_int_equal(v[0].count, 2);
    assert_memory_equal(v[1].item, "c", 1);
    assert_int_equal(v[1].count, 2);
    assert_false(topk_query(t, "b", 1));
    assert_true(topk_query(t, "c", 1));
    assert_int_equal(topk_count(t, "c", 1), 2);
    assert_false(topk_query(t, "zzz", 3));
    assert_int_equal(topk_count(t, "zzz", 3), 0);
    topk_free(t);

    /* a wide sketch (no collisions) counts exactly */
    t = topk_create_gen(TALLY_GEN_1, 3, 1000, 4, 0.9, 1);
    static const char *const stream[] = { "x", "y", "x", "z", "x", "y", "w", "x", NULL };
    add_all(t, stream);
    topk_entry_t all[3];
    n = topk_list(t, all);
    assert_int_equal(n, 3);
    assert_memory_equal(all[0].item, "x", 1);
    assert_int_equal(all[0].count, 4);
    assert_memory_equal(all[1].item, "y", 1);
    assert_int_equal(all[1].count, 2);
    assert_memory_equal(all[2].item, "z", 1);   /* w's 1 did not beat the minimum */
    assert_int_equal(all[2].count, 1);
    /* it keeps its encoding version, and its rules through a reload */
    size_t len;
    uint8_t *e = encode(t, &len);
    assert_int_equal(e[0], 1);
    const char *why;
    topk_t *r = topk_type.decode(e, len, &why);
    assert_non_null(r);
    add1(r, "w", "z");           /* 2 > 1: w enters in place of z */
    add1(r, "q", NULL);
    add1(r, "q", NULL);          /* 2 does not beat the minimum 2 (generation 2's >= would) */
    free(e);
    topk_free(r);
    topk_free(t);
}

/* TOPK.INCRBY: an increment counts like that many adds on a free bucket. */
static void test_increments(void **state)
{
    (void)state;
    topk_t *t = topk_create(5, 100, 4, 0.9, 3);
    char *out;
    size_t olen;
    topk_add(t, "big", 3, TOPK_MAX_INCREMENT, &out, &olen);
    assert_null(out);
    topk_add(t, "small", 5, 3, &out, &olen);
    free(out);
    assert_int_equal(topk_count(t, "big", 3), TOPK_MAX_INCREMENT);
    topk_entry_t v[5];
    size_t n = topk_list(t, v);
    assert_int_equal(n, 2);
    assert_memory_equal(v[0].item, "big", 3);
    assert_int_equal(v[0].count, TOPK_MAX_INCREMENT);
    /* a big increment against a big holder: decay of 0.9^count is nil, so
     * the holder keeps every bucket (geometric skipping of the trials) */
    topk_t *one = topk_create(1, 1, 1, 0.9, 3);
    topk_add(one, "holder", 6, 1000, &out, &olen);
    for (int i = 0; i < 100; i++) {
        topk_add(one, "intruder", 8, TOPK_MAX_INCREMENT, &out, &olen);
        assert_null(out);
    }
    assert_int_equal(topk_count(one, "holder", 6), 1000);
    assert_true(topk_query(one, "holder", 6));
    /* against a small holder the intruder takes the bucket over with the
     * units left, and enters the heap */
    topk_t *two = topk_create(1, 1, 1, 0.9, 3);
    topk_add(two, "holder", 6, 2, &out, &olen);
    topk_add(two, "intruder", 8, 1000, &out, &olen);
    assert_non_null(out);
    assert_memory_equal(out, "holder", 6);
    free(out);
    uint64_t c = topk_count(two, "intruder", 8);
    assert_true(c > 900 && c <= 1000);
    topk_free(one);
    topk_free(two);
    topk_free(t);
}

/* The seed article (RedisBloom internals, section 6.3): the fingerprint is
 * MurmurHash2(item, 1919) and row i's bucket MurmurHash2(item, i) % width. */
static void test_seed_article_hashing(void **state)
{
    (void)state;
    const uint32_t W = 31, D = 6;
    topk_t *t = topk_create(4, W, D, 0.9, 11);
    char *out;
    size_t olen;
    topk_add(t, "foo", 3, 5, &out, &olen);
    size_t len;
    uint8_t *enc = encode(t, &len);
    const size_t hdr = 1 + 4 * 3 + 8 + 32;
    uint32_t fp = murmur2("foo", 3, 1919);
    for (uint32_t i = 0; i < D; i++)
        for (uint32_t j = 0; j < W; j++) {
            const uint8_t *b = enc + hdr + ((size_t)i * W + j) * 12;
            bool mine = j == murmur2("foo", 3, i) % W;
            assert_int_equal(le32_load(b), mine ? fp : 0);
            assert_int_equal(le64_load(b + 4), mine ? 5 : 0);
        }
    free(enc);
    topk_free(t);
}

/* The same seed and stream give the same structure, and a structure that
 * went through encode/decode continues exactly like the original: decay
 * decisions are part of the state. */
static void test_determinism(void **state)
{
    (void)state;
    topk_t *a = topk_create(10, 8, 7, 0.9, 42), *b = topk_create(10, 8, 7, 0.9, 42);
    topk_t *other = topk_create(10, 8, 7, 0.9, 43);
    rng_t r;
    rng_seed(&r, 5);
    char buf[32];
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(buf, sizeof(buf), "i%llu", (unsigned long long)rng_below(&r, 500));
        uint32_t by = 1 + (uint32_t)rng_below(&r, 3);
        char *o1, *o2, *o3;
        size_t l1, l2, l3;
        topk_add(a, buf, (size_t)n, by, &o1, &l1);
        topk_add(b, buf, (size_t)n, by, &o2, &l2);
        topk_add(other, buf, (size_t)n, by, &o3, &l3);
        assert_true((o1 == NULL) == (o2 == NULL));
        if (o1)
            assert_memory_equal(o1, o2, l1);
        free(o1);
        free(o2);
        free(o3);
        if (i == 10000) {   /* b restarts from its own encoding */
            size_t len;
            uint8_t *enc = encode(b, &len);
            const char *why;
            topk_t *c = topk_type.decode(enc, len, &why);
            assert_non_null(c);
            free(enc);
            topk_free(b);
            b = c;
        }
    }
    size_t la, lb, lo;
    uint8_t *ea = encode(a, &la), *eb = encode(b, &lb), *eo = encode(other, &lo);
    assert_int_equal(la, lb);
    assert_memory_equal(ea, eb, la);
    assert_true(la != lo || memcmp(ea, eo, la) != 0);   /* another seed decays differently */
    assert_int_equal(topk_type.size(a), topk_type.size(b));
    free(ea);
    free(eb);
    free(eo);
    topk_free(a);
    topk_free(b);
    topk_free(other);
}

/* Items are bytes: empty, with NUL, long. */
static void test_binary_items(void **state)
{
    (void)state;
    topk_t *t = topk_create(3, 64, 4, 0.9, 9);
    char *out;
    size_t olen;
    topk_add(t, "", 0, 2, &out, &olen);
    topk_add(t, "a\0b", 3, 3, &out, &olen);
    char *longitem = malloc(100000);
    memset(longitem, 'x', 100000);
    topk_add(t, longitem, 100000, 1, &out, &olen);
    assert_true(topk_query(t, "", 0));
    assert_true(topk_query(t, "a\0b", 3));
    assert_false(topk_query(t, "a", 1));
    assert_true(topk_query(t, longitem, 100000));
    assert_true(topk_type.size(t) > 100000);
    size_t len;
    uint8_t *enc = encode(t, &len);
    const char *why;
    topk_t *d = topk_type.decode(enc, len, &why);
    assert_non_null(d);
    assert_true(topk_query(d, longitem, 100000));
    assert_int_equal(topk_count(d, "a\0b", 3), 3);
    topk_free(d);
    free(enc);
    free(longitem);
    topk_free(t);
}

static void test_decoder(void **state)
{
    (void)state;
    topk_t *t = topk_create(2, 5, 2, 0.5, 1);   /* heap: [bb 2, aa 3] */
    char *out;
    size_t olen;
    topk_add(t, "aa", 2, 3, &out, &olen);
    topk_add(t, "bb", 2, 2, &out, &olen);
    free(out);
    size_t len;
    uint8_t *enc = encode(t, &len);
    const char *why;
    for (size_t cut = 0; cut < len; cut++)
        assert_null(topk_type.decode(enc, cut, &why));
    uint8_t *bad = malloc(len + 1);
    const size_t rng_at = 1 + 12 + 8, buckets_at = rng_at + 32, heap_at = buckets_at + 10 * 12;
    memcpy(bad, enc, len);
    bad[len] = 0;
    assert_null(topk_type.decode(bad, len + 1, &why));                 /* trailing byte */
    memcpy(bad, enc, len);
    memset(bad + rng_at, 0, 32);
    assert_null(topk_type.decode(bad, len, &why));                     /* all-zero generator */
    memcpy(bad, enc, len);
    le64_store(bad + 13, 0);                                           /* decay 0 */
    assert_null(topk_type.decode(bad, len, &why));
    memcpy(bad, enc, len);
    le32_store(bad + 1, 0);                                            /* k = 0 */
    assert_null(topk_type.decode(bad, len, &why));
    memcpy(bad, enc, len);
    le32_store(bad + 5, 1u << 30);                                     /* a huge width: no allocation */
    assert_null(topk_type.decode(bad, len, &why));
    /* an empty bucket that claims a fingerprint: find one */
    for (size_t b = 0; b < 10; b++) {
        if (le64_load(enc + buckets_at + b * 12 + 4) == 0) {
            memcpy(bad, enc, len);
            le32_store(bad + buckets_at + b * 12, 77);
            assert_null(topk_type.decode(bad, len, &why));
            break;
        }
    }
    /* heap order: the root's count above a child's */
    memcpy(bad, enc, len);
    assert_int_equal(bad[heap_at], 1);
    le64_store(bad + heap_at + 1, 1000);
    assert_null(topk_type.decode(bad, len, &why));
    assert_non_null(why);
    free(bad);
    free(enc);

    /* the same item twice in the heap */
    wbuf_t w = WBUF_INIT;
    wbuf_put_u8(&w, 1);
    wbuf_put_u32(&w, 2);
    wbuf_put_u32(&w, 1);
    wbuf_put_u32(&w, 1);
    wbuf_put_f64(&w, 0.9);
    for (int i = 0; i < 4; i++)
        wbuf_put_u64(&w, 1);
    wbuf_put_u32(&w, 0);
    wbuf_put_u64(&w, 0);
    for (int i = 0; i < 2; i++) {
        wbuf_put_u8(&w, 1);
        wbuf_put_u64(&w, 5);
        wbuf_put_blob(&w, "dup", 3);
    }
    assert_null(topk_type.decode(w.data, w.len, &why));
    assert_string_equal(why, "topk: an item is in the heap twice");
    /* and the same bytes with distinct items decode */
    w.data[w.len - 1] = 'q';
    topk_t *ok = topk_type.decode(w.data, w.len, &why);
    assert_non_null(ok);
    assert_true(topk_query(ok, "duq", 3));
    topk_free(ok);
    wbuf_free(&w);
    topk_free(t);
}

static void test_limits(void **state)
{
    (void)state;
    assert_null(topk_create(0, 8, 7, 0.9, 1));
    assert_null(topk_create(TOPK_MAX_K + 1, 8, 7, 0.9, 1));
    assert_null(topk_create(10, 0, 7, 0.9, 1));
    assert_null(topk_create(10, 8, 0, 0.9, 1));
    assert_null(topk_create(10, 8, 7, 0, 1));
    assert_null(topk_create(10, 8, 7, 1.5, 1));
    assert_null(topk_create(10, 1u << 20, 1u << 5, 0.9, 1));
    topk_t *t = topk_create(10, 8, 7, 1.0, 1);   /* decay 1: every collision decrements */
    assert_non_null(t);
    char *out;
    size_t olen;
    for (int i = 0; i < 1000; i++) {
        char buf[16];
        int n = snprintf(buf, sizeof(buf), "%d", i % 50);
        topk_add(t, buf, (size_t)n, 1 + (uint32_t)(i % 7), &out, &olen);
        free(out);
    }
    topk_free(t);
}

/* The size asked for before a Top-K is made is its size; items add theirs. */
static void test_bytes_for(void **state)
{
    (void)state;
    topk_t *t = topk_create(50, 400, 5, 0.9, 1);
    assert_int_equal(topk_bytes_for(50, 400, 5), topk_type.size(t));
    char *out;
    size_t olen;
    topk_add(t, "hello", 5, 1, &out, &olen);
    free(out);
    assert_int_equal(topk_item_bytes(t), 5);
    assert_int_equal(topk_type.size(t), topk_bytes_for(50, 400, 5) + 5);
    topk_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_expel_list),
        cmocka_unit_test(test_redisbloom_cases),
        cmocka_unit_test(test_gen1_rules),
        cmocka_unit_test(test_increments),
        cmocka_unit_test(test_seed_article_hashing),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_binary_items),
        cmocka_unit_test(test_decoder),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_zipf_precision),
        cmocka_unit_test(test_bytes_for),
    };
    return cmocka_run_group_tests_name("topk", tests, NULL, NULL);
}
