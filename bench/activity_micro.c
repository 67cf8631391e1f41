/*
 * activity_micro.c - in-process timings of core/activity (no HTTP): the time
 * of activity_count over the last 7, 30 and 365 days of USERS x DAYS random
 * activity, next to CRoaring's own many-way union (roaring_bitmap_or_many +
 * cardinality over the same day bitmaps, no month views) as a reference.
 *
 *   activity_micro [USERS=10000000] [P=0.1] [DAYS=365]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <roaring/roaring.h>

#include "core/activity.h"
#include "core/rng.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    uint32_t users = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 10000000;
    double p = argc > 2 ? atof(argv[2]) : 0.1;
    int days = argc > 3 ? atoi(argv[3]) : 365;
    uint64_t thr = (uint64_t)(p * 4294967296.0);
    uint32_t *ids = malloc((size_t)users * sizeof(*ids));
    roaring_bitmap_t **day_bm = malloc((size_t)days * sizeof(*day_bm));
    activity_t *a = activity_create();
    int32_t d0;
    activity_parse_day("2025-01-01", 10, &d0);
    rng_t g;
    rng_seed(&g, 1);
    for (int d = 0; d < days; d++) {
        size_t n = 0;
        for (uint32_t u = 0; u < users; u++)
            if ((rng_next(&g) >> 32) < thr)
                ids[n++] = u;
        day_bm[d] = roaring_bitmap_of_ptr(n, ids);
        roaring_bitmap_run_optimize(day_bm[d]);
        uint64_t added;
        activity_merge(a, d0 + d, day_bm[d], &added);
    }
    printf("%u users, p = %g, %d days: %zu bytes held (%zu months)\n", users, p, days, activity_heap_bytes(a),
           activity_nmonths(a));
    /* the same month unions the key keeps, built outside it, for a like-for-like
     * reference on whole-month windows */
    roaring_bitmap_t *months[12];
    int nmonths = 0;
    for (int d = 0; d < days && nmonths < 12;) {
        char name[11];
        activity_format_day(d0 + d, name);
        int e = d;
        char other[11];
        do {
            e++;
            if (e < days)
                activity_format_day(d0 + e, other);
        } while (e < days && other[5] == name[5] && other[6] == name[6]);
        months[nmonths++] = roaring_bitmap_or_many((size_t)(e - d), (const roaring_bitmap_t **)day_bm + d);
        d = e;
    }
    static const int windows[] = { 7, 30, 365 };
    for (size_t w = 0; w < 3; w++) {
        int W = windows[w];
        if (W > days)
            continue;
        int reps = 20;
        uint64_t n = 0, m = 0;
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            activity_count(a, d0 + days - W, d0 + days - 1, ACTIVITY_ANY, &n);
        double t1 = now_s();
        for (int r = 0; r < reps; r++) {
            roaring_bitmap_t *u = roaring_bitmap_or_many((size_t)W, (const roaring_bitmap_t **)day_bm + days - W);
            m = roaring_bitmap_get_cardinality(u);
            roaring_bitmap_free(u);
        }
        double t2 = now_s();
        printf("  %3d-day window: %9llu users  activity_count %8.3f ms   or_many over days %8.3f ms%s\n", W,
               (unsigned long long)n, (t1 - t0) / reps * 1e3, (t2 - t1) / reps * 1e3, n == m ? "" : "  MISMATCH");
    }
    if (days == 365 && nmonths == 12) {
        int reps = 20;
        uint64_t n = 0;
        double t0 = now_s();
        for (int r = 0; r < reps; r++) {
            roaring_bitmap_t *u = roaring_bitmap_or_many(12, (const roaring_bitmap_t **)months);
            n = roaring_bitmap_get_cardinality(u);
            roaring_bitmap_free(u);
        }
        printf("  365-day window: %9llu users  or_many over the 12 month unions %8.3f ms\n", (unsigned long long)n,
               (now_s() - t0) / reps * 1e3);
    }
    for (int m = 0; m < nmonths; m++)
        roaring_bitmap_free(months[m]);
    for (int d = 0; d < days; d++)
        roaring_bitmap_free(day_bm[d]);
    free(day_bm);
    free(ids);
    activity_free(a);
    return 0;
}
