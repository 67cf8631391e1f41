/*
 * test_activity.c - core/activity against a brute-force model (a hash set of
 * user ids per day) on seeded random data: counts over random windows in both
 * modes (month views included), day sizes, paging, retention, the retained
 * range; plus calendar parsing, the encoding round trip, and the portable
 * Roaring checker refusing damaged bitmaps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/activity.h"
#include "core/codec.h"
#include "core/rng.h"

/* ------------------------------------------------------------------------ */
/* Model: a hash set of uint32 per day                                      */
/* ------------------------------------------------------------------------ */

typedef struct hset {
    uint64_t *slot;   /* id + 1, 0 = empty */
    size_t cap, n;
} hset_t;

static void hset_init(hset_t *h) { memset(h, 0, sizeof(*h)); }
static void hset_free(hset_t *h) { free(h->slot); hset_init(h); }

static size_t hpos(uint32_t v, size_t cap) { return (size_t)((v * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1); }

static bool hset_has(const hset_t *h, uint32_t v)
{
    if (!h->cap)
        return false;
    for (size_t i = hpos(v, h->cap);; i = (i + 1) & (h->cap - 1)) {
        if (h->slot[i] == 0)
            return false;
        if (h->slot[i] == (uint64_t)v + 1)
            return true;
    }
}

static bool hset_add(hset_t *h, uint32_t v)
{
    if (hset_has(h, v))
        return false;
    if ((h->n + 1) * 2 > h->cap) {
        hset_t bigger = { calloc(h->cap ? h->cap * 2 : 64, sizeof(uint64_t)), h->cap ? h->cap * 2 : 64, 0 };
        for (size_t i = 0; i < h->cap; i++)
            if (h->slot[i])
                hset_add(&bigger, (uint32_t)(h->slot[i] - 1));
        free(h->slot);
        *h = bigger;
    }
    size_t i = hpos(v, h->cap);
    while (h->slot[i])
        i = (i + 1) & (h->cap - 1);
    h->slot[i] = (uint64_t)v + 1;
    h->n++;
    return true;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------------ */
/* Calendar                                                                 */
/* ------------------------------------------------------------------------ */

static int32_t day_of(const char *s)
{
    int32_t d;
    if (!activity_parse_day(s, strlen(s), &d))
        fail_msg("'%s' did not parse", s);
    return d;
}

static void test_calendar(void **state)
{
    (void)state;
    assert_int_equal(day_of("1970-01-01"), 0);
    assert_int_equal(day_of("2000-03-01"), 11017);
    assert_int_equal(day_of("2024-02-29"), 19782);
    assert_int_equal(day_of("9999-12-31"), ACTIVITY_MAX_DAY);
    /* every day from 1970 to 2200 formats and parses back, one apart */
    char buf[11];
    int32_t prev = -1;
    for (int32_t d = 0; d < 84000; d++) {
        activity_format_day(d, buf);
        int32_t back = day_of(buf);
        assert_int_equal(back, d);
        assert_true(back == prev + 1);
        prev = back;
    }
    activity_format_day(ACTIVITY_MAX_DAY, buf);
    assert_string_equal(buf, "9999-12-31");
    const char *bad[] = { "2026-02-29", "2023-02-29", "2100-02-29", "2026-13-01", "2026-00-10", "2026-01-00",
                          "2026-04-31", "2026-1-01",  "20260101",   "1969-12-31", "10000-01-01", " 2026-01-01",
                          "2026-01-01 ", "2026/01/01", "2026-01-0a", "", "yesterday" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int32_t d;
        if (activity_parse_day(bad[i], strlen(bad[i]), &d))
            fail_msg("'%s' parsed as day %d", bad[i], d);
    }
}

/* ------------------------------------------------------------------------ */
/* Against the model                                                        */
/* ------------------------------------------------------------------------ */

#define NDAYS 150     /* days spanned: about five months */

typedef struct world {
    activity_t *a;
    hset_t day[NDAYS];
    int32_t base;
} world_t;

/* A batch of users: uniform over a small range (so days overlap), a run of
 * consecutive ids (run containers), or ids near 2^32. */
static size_t make_users(rng_t *g, uint32_t *out, size_t max)
{
    size_t n = 1 + (size_t)rng_below(g, max);
    switch (rng_below(g, 4)) {
    case 0: {
        uint32_t start = (uint32_t)rng_below(g, 300000);
        for (size_t i = 0; i < n; i++)
            out[i] = start + (uint32_t)i;
        break;
    }
    case 1:
        for (size_t i = 0; i < n; i++)
            out[i] = UINT32_MAX - (uint32_t)rng_below(g, 5000);
        break;
    default:
        for (size_t i = 0; i < n; i++)
            out[i] = (uint32_t)rng_below(g, 200000);
        break;
    }
    return n;
}

static void world_fill(world_t *w, uint64_t seed, int batches)
{
    rng_t g;
    rng_seed(&g, seed);
    w->a = activity_create();
    w->base = day_of("2025-11-20");
    for (int d = 0; d < NDAYS; d++)
        hset_init(&w->day[d]);
    static uint32_t users[6000];
    for (int b = 0; b < batches; b++) {
        int d = (int)rng_below(&g, NDAYS);
        if (rng_below(&g, 5) == 0)
            continue;   /* leave some days empty */
        size_t n = make_users(&g, users, rng_below(&g, 8) ? 300 : 6000);
        uint64_t want = 0, added = 0;
        for (size_t i = 0; i < n; i++)
            want += hset_add(&w->day[d], users[i]);
        if (rng_below(&g, 3) == 0) {
            /* through the portable format, as POST /activity/{key}/import */
            roaring_bitmap_t *bm = roaring_bitmap_of_ptr(n, users);
            if (rng_below(&g, 2))
                roaring_bitmap_run_optimize(bm);
            size_t len = roaring_bitmap_portable_size_in_bytes(bm);
            char *buf = malloc(len);
            roaring_bitmap_portable_serialize(bm, buf);
            const char *why = NULL;
            roaring_bitmap_t *back = activity_bitmap_parse((const uint8_t *)buf, len, &why);
            if (!back)
                fail_msg("our own serialization refused: %s", why);
            assert_int_equal(activity_merge(w->a, w->base + d, back, &added), CORE_OK);
            roaring_bitmap_free(back);
            roaring_bitmap_free(bm);
            free(buf);
        } else {
            assert_int_equal(activity_add(w->a, w->base + d, users, n, &added), CORE_OK);
        }
        assert_int_equal(added, want);
    }
}

static void world_free(world_t *w)
{
    activity_free(w->a);
    for (int d = 0; d < NDAYS; d++)
        hset_free(&w->day[d]);
}

static uint64_t model_count(const world_t *w, int from, int to, activity_mode_t mode)
{
    hset_t u;
    hset_init(&u);
    uint64_t all = 0;
    if (mode == ACTIVITY_ANY) {
        for (int d = from; d <= to; d++)
            for (size_t i = 0; i < w->day[d].cap; i++)
                if (w->day[d].slot[i])
                    hset_add(&u, (uint32_t)(w->day[d].slot[i] - 1));
        all = u.n;
    } else {
        const hset_t *first = &w->day[from];
        for (size_t i = 0; i < first->cap; i++) {
            if (!first->slot[i])
                continue;
            uint32_t v = (uint32_t)(first->slot[i] - 1);
            bool every = true;
            for (int d = from + 1; d <= to && every; d++)
                every = hset_has(&w->day[d], v);
            all += every;
        }
    }
    hset_free(&u);
    return all;
}

static void test_against_model(void **state)
{
    (void)state;
    world_t w;
    world_fill(&w, 42, 1500);
    rng_t g;
    rng_seed(&g, 4242);
    for (int d = 0; d < NDAYS; d++)
        assert_int_equal(activity_day_users(w.a, w.base + d), w.day[d].n);
    for (int q = 0; q < 400; q++) {
        int from = (int)rng_below(&g, NDAYS), to = (int)rng_below(&g, NDAYS);
        if (from > to) {
            int t = from;
            from = to;
            to = t;
        }
        if (q % 4 == 0)
            to = from + (int)rng_below(&g, 3) < NDAYS ? from + (int)rng_below(&g, 3) : from;   /* short windows too */
        activity_mode_t mode = q % 3 == 0 ? ACTIVITY_ALL : ACTIVITY_ANY;
        uint64_t got;
        assert_int_equal(activity_count(w.a, w.base + from, w.base + to, mode, &got), CORE_OK);
        uint64_t want = model_count(&w, from, to, mode);
        if (got != want)
            fail_msg("count days %d..%d mode %d: got %llu want %llu", from, to, mode, (unsigned long long)got,
                     (unsigned long long)want);
    }
    /* windows over the whole span and beyond it */
    uint64_t got;
    assert_int_equal(activity_count(w.a, w.base - 100, w.base + NDAYS + 100, ACTIVITY_ANY, &got), CORE_OK);
    assert_int_equal(got, model_count(&w, 0, NDAYS - 1, ACTIVITY_ANY));
    assert_int_equal(activity_count(w.a, w.base - 400, w.base - 1, ACTIVITY_ANY, &got), CORE_OK);
    assert_int_equal(got, 0);

    /* paging through a day returns exactly its users, ascending */
    for (int d = 0; d < NDAYS; d += 7) {
        size_t n = w.day[d].n, seen = 0;
        uint32_t *want = malloc((n ? n : 1) * sizeof(*want));
        for (size_t i = 0, k = 0; i < w.day[d].cap; i++)
            if (w.day[d].slot[i])
                want[k++] = (uint32_t)(w.day[d].slot[i] - 1);
        qsort(want, n, sizeof(*want), cmp_u32);
        uint64_t cursor = 0, next;
        uint32_t page[97];
        for (;;) {
            size_t got_n = activity_users(w.a, w.base + d, cursor, page, 97, &next);
            for (size_t i = 0; i < got_n; i++)
                assert_int_equal(page[i], want[seen + i]);
            seen += got_n;
            if (next == UINT64_MAX)
                break;
            assert_int_equal(got_n, 97);
            cursor = next;
        }
        assert_int_equal(seen, n);
        free(want);
    }

    /* retention: of the cohort's users, how many on each following day */
    for (int c = 0; c < NDAYS - 30; c += 11) {
        uint64_t size, out[30];
        activity_retention(w.a, w.base + c, 30, &size, out);
        assert_int_equal(size, w.day[c].n);
        for (int i = 0; i < 30; i++) {
            uint64_t want = 0;
            for (size_t s = 0; s < w.day[c].cap; s++)
                if (w.day[c].slot[s])
                    want += hset_has(&w.day[c + 1 + i], (uint32_t)(w.day[c].slot[s] - 1));
            assert_int_equal(out[i], want);
        }
    }
    world_free(&w);
}

/* The retained range: a newer day drops the oldest ones and the months
 * they fed are rebuilt; an older day cannot be written. */
static void test_retained_range(void **state)
{
    (void)state;
    activity_t *a = activity_create();
    int32_t d0 = day_of("2024-01-15");
    uint64_t added, n;
    for (uint32_t i = 0; i < 40; i++) {
        uint32_t u[2] = { i, 1000 + i };
        assert_int_equal(activity_add(a, d0 + (int32_t)i, u, 2, &added), CORE_OK);
        assert_int_equal(added, 2);
    }
    assert_int_equal(activity_oldest_writable(a), d0 + 39 - (ACTIVITY_RETAIN_DAYS - 1));
    assert_int_equal(activity_count(a, day_of("2024-01-01"), day_of("2024-02-29"), ACTIVITY_ANY, &n), CORE_OK);
    assert_int_equal(n, 80);
    /* a day 740 days after the first: the first 10 days fall out */
    uint32_t late = 7;
    int32_t dl = d0 + ACTIVITY_RETAIN_DAYS + 9;
    assert_int_equal(activity_add(a, dl, &late, 1, &added), CORE_OK);
    assert_int_equal(activity_oldest_writable(a), d0 + 10);
    assert_int_equal(activity_ndays(a), 31);
    assert_int_equal(activity_first_day(a), d0 + 10);
    assert_int_equal(activity_count(a, day_of("2024-01-01"), day_of("2024-01-31"), ACTIVITY_ANY, &n), CORE_OK);
    assert_int_equal(n, 2 * (31 - 14 - 10));   /* Jan 25..31 survive: the month view was rebuilt */
    assert_int_equal(activity_count(a, day_of("2024-01-01"), day_of("2024-02-29"), ACTIVITY_ANY, &n), CORE_OK);
    assert_int_equal(n, 60);
    assert_int_equal(activity_day_users(a, d0), 0);
    /* everything before the new range goes */
    int32_t dl2 = dl + ACTIVITY_RETAIN_DAYS;
    assert_int_equal(activity_add(a, dl2, &late, 1, &added), CORE_OK);
    assert_int_equal(activity_ndays(a), 1);
    assert_int_equal(activity_nmonths(a), 1);
    activity_free(a);
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                 */
/* ------------------------------------------------------------------------ */

static void test_encoding_roundtrip(void **state)
{
    (void)state;
    world_t w;
    world_fill(&w, 7, 400);
    wbuf_t a = WBUF_INIT, b = WBUF_INIT;
    activity_type.encode(w.a, &a);
    assert_false(a.oom);
    const char *why = NULL;
    activity_t *back = activity_type.decode(a.data, a.len, &why);
    if (!back)
        fail_msg("decode: %s", why);
    activity_type.encode(back, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_int_equal(activity_ndays(back), activity_ndays(w.a));
    assert_int_equal(activity_nmonths(back), activity_nmonths(w.a));
    uint64_t x, y;
    assert_int_equal(activity_count(w.a, w.base, w.base + NDAYS - 1, ACTIVITY_ANY, &x), CORE_OK);
    assert_int_equal(activity_count(back, w.base, w.base + NDAYS - 1, ACTIVITY_ANY, &y), CORE_OK);
    assert_int_equal(x, y);
    /* any flipped byte is caught (checksum, or the structure checks) */
    for (size_t i = 0; i < a.len; i += 1 + a.len / 300) {
        a.data[i] ^= 0x20;
        activity_t *bad = activity_type.decode(a.data, a.len, &why);
        if (bad)
            fail_msg("a flipped byte at %zu decoded", i);
        a.data[i] ^= 0x20;
    }
    assert_null(activity_type.decode(a.data, a.len - 1, &why));
    activity_free(back);
    wbuf_free(&a);
    wbuf_free(&b);
    world_free(&w);
    /* an empty key round-trips too */
    activity_t *e = activity_create();
    activity_type.encode(e, &a);
    back = activity_type.decode(a.data, a.len, &why);
    assert_non_null(back);
    activity_free(back);
    activity_free(e);
    wbuf_free(&a);
}

static size_t serialize(const roaring_bitmap_t *bm, uint8_t **out)
{
    size_t len = roaring_bitmap_portable_size_in_bytes(bm);
    *out = malloc(len + 4);
    roaring_bitmap_portable_serialize(bm, (char *)*out);
    return len;
}

/* Hand-damaged bitmaps, each refused with a reason. */
static void test_bitmap_checker(void **state)
{
    (void)state;
    const char *why;
    uint8_t *p;
    /* array container (no runs): cookie 12346, size, {key, card-1}, offsets, values */
    uint32_t vals[] = { 3, 9, 200 };
    roaring_bitmap_t *bm = roaring_bitmap_of_ptr(3, vals);
    size_t len = serialize(bm, &p);
    roaring_bitmap_t *ok = activity_bitmap_parse(p, len, &why);
    assert_non_null(ok);
    roaring_bitmap_free(ok);
    size_t vat = 4 + 4 + 4 + 4;   /* cookie, size, one header, one offset */
    assert_int_equal(len, vat + 6);
    p[vat] = 10;   /* 10, 9, 200: not ascending */
    assert_null(activity_bitmap_parse(p, len, &why));
    p[vat] = 9;    /* 9, 9: a repeat */
    assert_null(activity_bitmap_parse(p, len, &why));
    p[vat] = 3;
    p[12] = 9;     /* offset pointing elsewhere */
    assert_null(activity_bitmap_parse(p, len, &why));
    p[12] = 16;
    assert_null(activity_bitmap_parse(p, len - 1, &why));   /* truncated */
    p[len] = 0;
    assert_null(activity_bitmap_parse(p, len + 1, &why));   /* trailing byte */
    p[0] = 0x99;   /* unknown cookie */
    assert_null(activity_bitmap_parse(p, len, &why));
    assert_null(activity_bitmap_parse(p, 0, &why));
    free(p);
    roaring_bitmap_free(bm);

    /* run container: a run past its chunk, overlapping runs, wrong cardinality */
    bm = roaring_bitmap_create();
    roaring_bitmap_add_range(bm, 10, 20);
    roaring_bitmap_add_range(bm, 30, 40);
    roaring_bitmap_run_optimize(bm);
    len = serialize(bm, &p);
    ok = activity_bitmap_parse(p, len, &why);
    assert_non_null(ok);
    roaring_bitmap_free(ok);
    /* layout: cookie(4) runflags(1) header(4) nruns(2) runs 2 x 4 */
    size_t runs = 4 + 1 + 4 + 2;
    assert_int_equal(len, runs + 8);
    p[runs + 4] = 15;   /* second run starts inside the first */
    assert_null(activity_bitmap_parse(p, len, &why));
    p[runs + 4] = 30;
    p[runs + 6] = 0xff;   /* length 255: cardinality no longer matches */
    assert_null(activity_bitmap_parse(p, len, &why));
    p[runs + 4] = 0xf0;
    p[runs + 5] = 0xff;
    p[runs + 6] = 0x20;   /* start 65520 + 32: past the chunk */
    assert_null(activity_bitmap_parse(p, len, &why));
    free(p);
    roaring_bitmap_free(bm);

    /* bitset container whose popcount differs from its declared cardinality */
    bm = roaring_bitmap_create();
    roaring_bitmap_add_range(bm, 0, 5000);
    roaring_bitmap_add(bm, 7000);
    roaring_bitmap_remove_run_compression(bm);
    len = serialize(bm, &p);
    ok = activity_bitmap_parse(p, len, &why);
    assert_non_null(ok);
    roaring_bitmap_free(ok);
    p[len - 1] ^= 0x80;   /* one more bit */
    assert_null(activity_bitmap_parse(p, len, &why));
    free(p);
    roaring_bitmap_free(bm);
}

static void test_memory_accounting(void **state)
{
    (void)state;
    activity_t *a = activity_create();
    size_t empty = activity_heap_bytes(a);
    uint32_t *u = malloc(100000 * sizeof(*u));
    for (uint32_t i = 0; i < 100000; i++)
        u[i] = i * 7;   /* ~9000 per chunk: bitsets */
    uint64_t added;
    assert_int_equal(activity_add(a, 20000, u, 100000, &added), CORE_OK);
    size_t dense = activity_heap_bytes(a);
    /* 11 chunks x 8 KiB, twice (the day and its month) */
    assert_true(dense - empty >= 2 * 11 * 8192);
    assert_true(dense - empty <= 2 * 11 * 8192 + 4096);
    for (uint32_t i = 0; i < 100000; i++)
        u[i] = 5000000 + i;   /* one run */
    assert_int_equal(activity_add(a, 20001, u, 100000, &added), CORE_OK);
    assert_true(activity_heap_bytes(a) - dense < 2048);
    free(u);
    activity_free(a);
}

/* What a merge or an add of ids asks room for bounds what it adds, whatever
 * the set already holds (seeded random layouts: arrays, bitsets, runs). */
static void test_growth_bounds(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 11);
    activity_t *a = activity_create();
    int32_t day = 20000;
    for (int round = 0; round < 60; round++) {
        roaring_bitmap_t *bm = roaring_bitmap_create();
        uint32_t base = (uint32_t)(rng_next(&r) % 8) << 16;
        switch (round % 3) {
        case 0:   /* scattered ids */
            for (int i = 0; i < 3000; i++)
                roaring_bitmap_add(bm, base + (uint32_t)(rng_next(&r) % (1u << 20)));
            break;
        case 1:   /* dense ranges */
            roaring_bitmap_add_range(bm, base + (uint32_t)(rng_next(&r) % 65536), base + 200000);
            break;
        default:  /* alternating ids: many runs */
            for (uint32_t i = 0; i < 20000; i += 2)
                roaring_bitmap_add(bm, base + i + (uint32_t)(rng_next(&r) % 2));
        }
        roaring_bitmap_run_optimize(bm);
        size_t before = activity_heap_bytes(a);
        uint64_t added;
        assert_int_equal(activity_merge(a, day + round % 40, bm, &added), CORE_OK);
        size_t after = activity_heap_bytes(a);
        assert_true(after <= before + activity_merge_bound(bm));
        roaring_bitmap_free(bm);
        uint32_t ids[500];
        for (int i = 0; i < 500; i++)
            ids[i] = (uint32_t)(rng_next(&r) % (1u << 24));
        before = activity_heap_bytes(a);
        assert_int_equal(activity_add(a, day + round % 40, ids, 500, &added), CORE_OK);
        assert_true(activity_heap_bytes(a) <= before + activity_add_bound(500));
    }
    activity_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calendar),         cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_retained_range),   cmocka_unit_test(test_encoding_roundtrip),
        cmocka_unit_test(test_bitmap_checker),   cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_growth_bounds),
    };
    return cmocka_run_group_tests_name("activity", tests, NULL, NULL);
}
