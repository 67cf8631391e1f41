/*
 * test_zindex.c - the ordered (score, member) index under a model.
 *
 * Seeded random adds (plain, NX, XX), moves and removals with few distinct
 * scores (long runs of equal scores ordered by member bytes) are checked
 * after every step against a brute-force model, and the whole order and a
 * sub-range walk periodically; a bulk load of the walked order must give
 * the same index and keep working.  The bulk loader refuses members out of
 * order, repeated members and more members than announced, and leaves an
 * index that frees cleanly.  Memory per member is reported and bounded.
 */
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
#include "core/zindex.h"

typedef struct mitem {
    char m[16];
    size_t len;
    uint64_t score;
    bool live;
} mitem_t;

static int mitem_cmp(const void *a, const void *b)
{
    const mitem_t *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    size_t l = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->m, y->m, l);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

typedef struct collect {
    mitem_t *a;
    size_t n, cap;
} collect_t;

static bool collect_fn(void *ud, uint64_t score, const char *m, size_t len)
{
    collect_t *c = ud;
    assert_true(c->n < c->cap);
    assert_true(len < sizeof(c->a[0].m));
    memcpy(c->a[c->n].m, m, len);
    c->a[c->n].len = len;
    c->a[c->n].score = score;
    c->n++;
    return true;
}

/* The index's order, walked with zindex_each (caller frees c->a). */
static collect_t walk(const zindex_t *z)
{
    collect_t c = { malloc((zindex_count(z) + 1) * sizeof(mitem_t)), 0, zindex_count(z) + 1 };
    zindex_each(z, collect_fn, &c);
    assert_int_equal(c.n, zindex_count(z));
    return c;
}

static void check_against_model(const zindex_t *z, const mitem_t *model, size_t nmodel)
{
    mitem_t *live = malloc((nmodel + 1) * sizeof(*live));
    size_t nl = 0;
    for (size_t i = 0; i < nmodel; i++)
        if (model[i].live)
            live[nl++] = model[i];
    qsort(live, nl, sizeof(*live), mitem_cmp);
    assert_int_equal(zindex_count(z), nl);
    collect_t c = walk(z);
    for (size_t i = 0; i < nl; i++) {
        assert_int_equal(c.a[i].score, live[i].score);
        assert_int_equal(c.a[i].len, live[i].len);
        assert_memory_equal(c.a[i].m, live[i].m, live[i].len);
    }
    /* a sub-range walk starts and stops at the right places, in order */
    if (nl > 2) {
        uint64_t lo = live[nl / 3].score, hi = live[2 * nl / 3].score;
        c.n = 0;
        zindex_range(z, lo, hi, collect_fn, &c);
        size_t first = 0;
        while (live[first].score < lo)
            first++;
        size_t want = 0;
        for (size_t i = 0; i < nl; i++)
            want += live[i].score >= lo && live[i].score < hi;
        assert_int_equal(c.n, want);
        for (size_t i = 0; i < c.n; i++)
            assert_int_equal(mitem_cmp(&c.a[i], &live[first + i]), 0);
    }
    free(c.a);
    free(live);
}

/* A bulk load of z's order: the same index. */
static zindex_t *reload(const zindex_t *z)
{
    collect_t c = walk(z);
    zindex_t *d = zindex_load_begin(c.n);
    assert_non_null(d);
    for (size_t i = 0; i < c.n; i++)
        assert_int_equal(zindex_load_add(d, c.a[i].score, c.a[i].m, c.a[i].len), CORE_OK);
    assert_int_equal(zindex_load_end(d), CORE_OK);
    collect_t c2 = walk(d);
    assert_int_equal(c2.n, c.n);
    for (size_t i = 0; i < c.n; i++)
        assert_int_equal(mitem_cmp(&c.a[i], &c2.a[i]), 0);
    free(c.a);
    free(c2.a);
    return d;
}

static void test_model(void **state)
{
    (void)state;
    enum { NAMES = 6000, OPS = 60000 };
    rng_t r;
    rng_seed(&r, 20240601);
    mitem_t *model = calloc(NAMES, sizeof(*model));
    for (size_t i = 0; i < NAMES; i++)
        model[i].len = (size_t)snprintf(model[i].m, sizeof(model[i].m), "m%zu", (i * 7919) % 100003);
    zindex_t *z = zindex_create();
    for (int op = 0; op < OPS; op++) {
        size_t i = rng_next(&r) % NAMES;
        mitem_t *it = &model[i];
        unsigned kind = (unsigned)(rng_next(&r) % 10);
        /* few distinct scores: long runs of equal scores ordered by member */
        uint64_t score = (rng_next(&r) % 300) << 20;
        if (kind < 6) {
            zindex_mode_t mode = kind == 4 ? ZINDEX_SET_NX : kind == 5 ? ZINDEX_SET_XX : ZINDEX_SET;
            int res = zindex_set(z, it->m, it->len, score, mode);
            if (!it->live) {
                assert_int_equal(res, mode == ZINDEX_SET_XX ? ZINDEX_SKIPPED : ZINDEX_ADDED);
                if (mode != ZINDEX_SET_XX) {
                    it->live = true;
                    it->score = score;
                }
            } else if (mode == ZINDEX_SET_NX) {
                assert_int_equal(res, ZINDEX_SKIPPED);
            } else {
                assert_int_equal(res, it->score == score ? ZINDEX_UNCHANGED : ZINDEX_UPDATED);
                it->score = score;
            }
        } else {
            assert_int_equal(zindex_remove(z, it->m, it->len), it->live);
            it->live = false;
        }
        uint64_t s;
        bool found = zindex_score(z, it->m, it->len, &s);
        assert_int_equal(found, it->live);
        if (found)
            assert_int_equal(s, it->score);
        if (op % 5000 == 4999) {
            check_against_model(z, model, NAMES);
            zindex_t *d = reload(z);
            check_against_model(d, model, NAMES);
            /* the bulk-loaded (bottom-up built) tree keeps working */
            for (int k = 0; k < 500; k++) {
                size_t j = rng_next(&r) % NAMES;
                zindex_remove(d, model[j].m, model[j].len);
                zindex_set(d, model[j].m, model[j].len, (rng_next(&r) % 300) << 20, ZINDEX_SET);
            }
            zindex_free(d);
        }
    }
    /* drain completely: memory goes back to the empty index's */
    for (size_t i = 0; i < NAMES; i++)
        if (model[i].live) {
            assert_true(zindex_remove(z, model[i].m, model[i].len));
            model[i].live = false;
        }
    check_against_model(z, model, NAMES);
    assert_true(zindex_memory(z) < 1024);
    zindex_free(z);
    free(model);
}

/* Ascending inserts (the worst case for half splits) and a big reload. */
static void test_sequential_and_memory(void **state)
{
    (void)state;
    enum { N = 200000 };
    zindex_t *z = zindex_create();
    char m[32];
    for (int i = 0; i < N; i++) {
        int len = snprintf(m, sizeof(m), "member:%07d", i);
        assert_int_equal(zindex_set(z, m, (size_t)len, (uint64_t)i * 1000, ZINDEX_SET), ZINDEX_ADDED);
    }
    size_t mem = zindex_memory(z);
    print_message("zindex: %d members, %zu bytes (%.1f B/member) after ascending inserts\n", N, mem,
                  (double)mem / N);
    assert_true(mem / N < 110);
    zindex_t *d = reload(z);
    size_t mem2 = zindex_memory(d);
    print_message("zindex: %.1f B/member after a bulk load\n", (double)mem2 / N);
    assert_true(mem2 < mem);
    for (int i = 0; i < N; i += 2) {
        int len = snprintf(m, sizeof(m), "member:%07d", i);
        assert_true(zindex_remove(d, m, (size_t)len));
    }
    assert_int_equal(zindex_count(d), N / 2);
    uint64_t s;
    assert_true(zindex_score(d, "member:0000001", 14, &s));
    assert_int_equal(s, 1000);
    zindex_free(z);
    zindex_free(d);
}

/* The extremes of the score range are ordinary scores. */
static void test_score_extremes(void **state)
{
    (void)state;
    zindex_t *z = zindex_create();
    assert_int_equal(zindex_set(z, "top", 3, UINT64_MAX, ZINDEX_SET), ZINDEX_ADDED);
    assert_int_equal(zindex_set(z, "bottom", 6, 0, ZINDEX_SET), ZINDEX_ADDED);
    collect_t c = walk(z);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.a[0].score, 0);
    assert_int_equal(c.a[1].score, UINT64_MAX);
    c.n = 0;
    zindex_range(z, 0, UINT64_MAX, collect_fn, &c);   /* [min, max): the top is excluded */
    assert_int_equal(c.n, 1);
    free(c.a);
    zindex_free(z);
}

/* The bulk loader refuses what would break the order and frees cleanly. */
static void test_load_rejects(void **state)
{
    (void)state;
    zindex_t *z = zindex_load_begin(4);
    assert_int_equal(zindex_load_add(z, 10, "b", 1), CORE_OK);
    assert_int_equal(zindex_load_add(z, 10, "a", 1), CORE_UNORDERED);   /* same score, smaller member */
    assert_int_equal(zindex_load_add(z, 10, "b", 1), CORE_UNORDERED);   /* not strictly after */
    assert_int_equal(zindex_load_add(z, 9, "c", 1), CORE_UNORDERED);
    assert_int_equal(zindex_load_add(z, 11, "b", 1), CORE_DUPLICATE);   /* in order, but present */
    zindex_free(z);

    z = zindex_load_begin(2);
    assert_int_equal(zindex_load_add(z, 1, "a", 1), CORE_OK);
    assert_int_equal(zindex_load_add(z, 2, "ab", 2), CORE_OK);
    assert_int_equal(zindex_load_add(z, 3, "c", 1), CORE_NOMEM);        /* more than announced */
    assert_int_equal(zindex_load_end(z), CORE_OK);
    assert_int_equal(zindex_count(z), 2);
    uint64_t s;
    assert_true(zindex_score(z, "ab", 2, &s));
    assert_int_equal(s, 2);
    assert_false(zindex_score(z, "c", 1, &s));
    zindex_free(z);

    z = zindex_load_begin(0);
    assert_int_equal(zindex_load_end(z), CORE_OK);
    assert_int_equal(zindex_count(z), 0);
    assert_int_equal(zindex_set(z, "x", 1, 5, ZINDEX_SET), ZINDEX_ADDED);
    zindex_free(z);
}

/* Hash flooding: members chosen to share their table slot under a known
 * seed (what a client could precompute against a fixed seed) fill one probe
 * run as long as their number; under a secret seed, set as tallyd does at
 * start-up, the same members spread out. */
static void test_seeded_against_flooding(void **state)
{
    (void)state;
    enum { N = 600, MASK = 1023 };   /* 600 members: a table of 1024 slots */
    static char m[N][16];
    int found = 0;
    zindex_set_seed(0x67656f7365747331ULL);   /* the fixed seed tally used before */
    for (uint64_t i = 0; found < N; i++) {
        char c[16];
        int len = snprintf(c, sizeof(c), "m%llu", (unsigned long long)i);
        if (((uint32_t)tally_xxh64(c, (size_t)len, 0x67656f7365747331ULL) & MASK) == 0)
            memcpy(m[found++], c, (size_t)len + 1);
    }
    zindex_t *z = zindex_create();
    for (int i = 0; i < N; i++)
        assert_int_equal(zindex_set(z, m[i], strlen(m[i]), (uint64_t)i, ZINDEX_SET), ZINDEX_ADDED);
    assert_true(zindex_probe_max(z) >= N);
    zindex_free(z);

    zindex_set_seed(0x9e3779b97f4a7c15ULL ^ 20261201);
    z = zindex_create();
    for (int i = 0; i < N; i++)
        assert_int_equal(zindex_set(z, m[i], strlen(m[i]), (uint64_t)i, ZINDEX_SET), ZINDEX_ADDED);
    size_t longest = zindex_probe_max(z);
    if (longest > 40)
        fail_msg("a secret seed still leaves a probe run of %zu slots for %d members", longest, N);
    for (int i = 0; i < N; i++) {
        uint64_t sc;
        assert_true(zindex_score(z, m[i], strlen(m[i]), &sc));
        assert_int_equal(sc, (uint64_t)i);
    }
    zindex_free(z);
    zindex_set_seed(0x67656f7365747331ULL);
}

/* zindex_add_bound bounds what inserting members adds, from an empty index
 * and from a bulk-loaded one (every leaf full: each insert splits one). */
static void test_add_bound(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 5);
    zindex_t *z = zindex_create();
    char m[64];
    for (int round = 0; round < 20; round++) {
        size_t n = 1 + (size_t)(rng_next(&r) % 3000), bytes = 0;
        size_t before = zindex_memory(z);
        uint64_t bound = zindex_add_bound(z, n, 0);
        for (size_t i = 0; i < n; i++) {
            size_t len = (size_t)snprintf(m, sizeof(m), "m%llu", (unsigned long long)(rng_next(&r) % 1000000));
            bytes += len;
            zindex_set(z, m, len, rng_next(&r) >> 12, ZINDEX_SET);
        }
        assert_true(zindex_memory(z) <= before + bound + bytes);
    }
    zindex_free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_sequential_and_memory),
        cmocka_unit_test(test_score_extremes),
        cmocka_unit_test(test_load_rejects),
        cmocka_unit_test(test_seeded_against_flooding),
        cmocka_unit_test(test_add_bound),
    };
    return cmocka_run_group_tests_name("zindex", tests, NULL, NULL);
}
