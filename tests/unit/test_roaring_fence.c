/*
 * test_roaring_fence.c - core/roaring_fence.c's two paths agree: the union
 * cardinality read from CRoaring's containers (the library's copy, linked
 * from libtallycore.a under its own names) against the public-API fallback
 * (compiled here with TALLY_ROARING_PUBLIC_API and renamed) and against
 * roaring_bitmap_or_many, on seeded random bitmaps of every container kind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/rng.h"

/* the fallback, under other names, next to the library's internal path */
#define TALLY_ROARING_PUBLIC_API
#define rfence_measure public_measure
#define rfence_union_count public_union_count
#include "core/roaring_fence.c"
#undef rfence_measure
#undef rfence_union_count
#undef TALLY_ROARING_FENCE_H
#include "core/roaring_fence.h"

/* A bitmap mixing array, bitset and run containers over a few chunks. */
static roaring_bitmap_t *random_bitmap(rng_t *r)
{
    roaring_bitmap_t *b = roaring_bitmap_create();
    assert_non_null(b);
    for (int c = 0; c < 6; c++) {
        uint32_t base = (uint32_t)(rng_next(r) % 8) << 16;
        switch (rng_next(r) % 4) {
        case 0:   /* sparse: an array container */
            for (int i = 0; i < 200; i++)
                roaring_bitmap_add(b, base + (uint32_t)(rng_next(r) & 0xffff));
            break;
        case 1:   /* dense: a bitset container */
            for (int i = 0; i < 20000; i++)
                roaring_bitmap_add(b, base + (uint32_t)(rng_next(r) & 0xffff));
            break;
        case 2: {   /* runs */
            uint32_t s = base + (uint32_t)(rng_next(r) & 0x7fff);
            roaring_bitmap_add_range(b, s, s + 1 + rng_next(r) % 30000);
            break;
        }
        default:   /* a full chunk */
            roaring_bitmap_add_range(b, base, base + 65536);
            break;
        }
    }
    roaring_bitmap_run_optimize(b);
    return b;
}

static void test_union_paths_agree(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 2024);
    for (int round = 0; round < 60; round++) {
        size_t n = 1 + rng_next(&r) % 6;
        roaring_bitmap_t *v[6];
        for (size_t i = 0; i < n; i++)
            v[i] = random_bitmap(&r);
        roaring_bitmap_t *u = roaring_bitmap_or_many(n, (const roaring_bitmap_t **)v);
        uint64_t want = roaring_bitmap_get_cardinality(u), got, pub;
        assert_true(rfence_union_count((const roaring_bitmap_t *const *)v, n, &got));
        assert_true(public_union_count((const roaring_bitmap_t *const *)v, n, &pub));
        assert_int_equal(got, want);
        assert_int_equal(pub, want);
        size_t alloc, used;
        rfence_measure(u, &alloc, &used);
        assert_true(used <= alloc && used > 0);
        public_measure(u, &alloc, &used);
        assert_true(used == alloc && used > 0);
        roaring_bitmap_free(u);
        for (size_t i = 0; i < n; i++)
            roaring_bitmap_free(v[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_union_paths_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
