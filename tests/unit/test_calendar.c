/*
 * test_calendar.c - core/calendar.h's arithmetic with zones made up here
 * (core links no tzdata): civil dates, every kind's periods in UTC through
 * leap years and clamped anchor days, local midnights that happen twice,
 * never, or on a date that never happens, and, on seeded random zones and
 * specs, periods that tile time.  The real zones are test_cmd_zone.c's,
 * against Python's zoneinfo.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/calendar.h"
#include "core/rng.h"
#include "core/window.h"

#define H 3600
#define D 86400

/* A zone of up to 8 offset changes: off[0] before at[1], off[i] from at[i]. */
typedef struct fake_zone {
    cal_zone_t base;
    int n;
    int64_t at[8];
    int32_t off[8];
} fake_zone_t;

static int32_t fake_offset(const cal_zone_t *z, int64_t t)
{
    const fake_zone_t *f = (const fake_zone_t *)z;
    int32_t o = f->off[0];
    for (int i = 1; i < f->n; i++)
        if (t >= f->at[i])
            o = f->off[i];
    return o;
}

static int64_t fake_next(const cal_zone_t *z, int64_t t)
{
    const fake_zone_t *f = (const fake_zone_t *)z;
    for (int i = 1; i < f->n; i++)
        if (f->at[i] > t && f->off[i] != fake_offset(z, t))
            return f->at[i];
    return INT64_MAX;
}

static fake_zone_t fixed(int32_t off)
{
    fake_zone_t z = { { fake_offset, fake_next, "Fake/Fixed", 10 }, 1, { 0 }, { off } };
    return z;
}

/* off0 until the local wall time `wall` (as if UTC) under off0, then off1. */
static fake_zone_t change_at(int32_t off0, int64_t wall, int32_t off1)
{
    fake_zone_t z = { { fake_offset, fake_next, "Fake/Change", 11 }, 2, { 0, wall - off0 }, { off0, off1 } };
    return z;
}

static int64_t day_no(int64_t y, int m, int d) { return cal_days_from_civil(y, m, d); }

/* ------------------------------------------------------------------------ */

static void test_civil(void **state)
{
    (void)state;
    assert_int_equal(day_no(1970, 1, 1), 0);
    assert_int_equal(day_no(2000, 3, 1), 11017);
    assert_int_equal(day_no(2024, 2, 29), 19782);
    assert_int_equal(day_no(1900, 1, 1), -25567);
    for (int64_t days = -800000; days <= 800000; days += 7) {
        int64_t y;
        int m, d;
        cal_civil_from_days(days, &y, &m, &d);
        assert_int_equal(day_no(y, m, d), days);
    }
}

static void test_names_and_validation(void **state)
{
    (void)state;
    assert_int_equal(cal_kind_parse("quarter", 7), CAL_QUARTER);
    assert_int_equal(cal_kind_parse("Day", 3), CAL_NONE);
    assert_int_equal(cal_weekday_parse("sunday", 6), 7);
    assert_int_equal(cal_weekday_parse("sun", 3), 0);
    assert_string_equal(cal_weekday_name(1), "monday");
    fake_zone_t utc = fixed(0);
    const char *field = NULL;
    static const struct {
        cal_spec_t c;
        const char *field;
    } bad[] = {
        { { 0, 0, 0, NULL }, "calendar" },
        { { 6, 0, 0, NULL }, "calendar" },
        { { CAL_DAY, 0, 0, NULL }, "time_zone" },
        { { CAL_WEEK, 0, 0, (const cal_zone_t *)1 }, "week_start" },
        { { CAL_WEEK, 8, 0, (const cal_zone_t *)1 }, "week_start" },
        { { CAL_DAY, 1, 0, (const cal_zone_t *)1 }, "week_start" },
        { { CAL_MONTH, 0, 0, (const cal_zone_t *)1 }, "anchor_day" },
        { { CAL_MONTH, 0, 32, (const cal_zone_t *)1 }, "anchor_day" },
        { { CAL_WEEK, 1, 5, (const cal_zone_t *)1 }, "anchor_day" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cal_spec_t c = bad[i].c;
        if (c.zone)
            c.zone = &utc.base;
        assert_non_null(cal_validate(&c, &field));
        assert_string_equal(field, bad[i].field);
    }
    cal_spec_t ok = { CAL_YEAR, 0, 31, &utc.base };
    assert_null(cal_validate(&ok, &field));
}

/* Every kind in UTC, leap years and clamped anchors. */
static void test_utc_periods(void **state)
{
    (void)state;
    fake_zone_t utc = fixed(0);
    int64_t s, e;
    cal_spec_t c = { CAL_MONTH, 0, 31, &utc.base };
    /* billing on the 31st: Jan 31, Feb 29 (2024) / Feb 28 (2023), Mar 31, Apr 30 */
    static const int64_t y2024[][3] = { { 2024, 1, 31 }, { 2024, 2, 29 }, { 2024, 3, 31 }, { 2024, 4, 30 },
                                        { 2024, 5, 31 }, { 2024, 6, 30 } };
    for (size_t i = 0; i + 1 < sizeof(y2024) / sizeof(y2024[0]); i++) {
        int64_t from = day_no(y2024[i][0], (int)y2024[i][1], (int)y2024[i][2]) * D;
        int64_t to = day_no(y2024[i + 1][0], (int)y2024[i + 1][1], (int)y2024[i + 1][2]) * D;
        cal_period(&c, from, &s, &e);
        assert_int_equal(s, from);
        assert_int_equal(e, to);
        cal_period(&c, to - 1, &s, &e);
        assert_int_equal(s, from);
    }
    cal_period(&c, day_no(2023, 3, 15) * D, &s, &e);
    assert_int_equal(s, day_no(2023, 2, 28) * D);
    assert_int_equal(e, day_no(2023, 3, 31) * D);
    /* anchor 30 and 29 in February */
    c.anchor_day = 30;
    cal_period(&c, day_no(2023, 3, 1) * D, &s, &e);
    assert_int_equal(s, day_no(2023, 2, 28) * D);
    assert_int_equal(e, day_no(2023, 3, 30) * D);
    c.anchor_day = 29;
    cal_period(&c, day_no(2024, 2, 29) * D, &s, &e);
    assert_int_equal(s, day_no(2024, 2, 29) * D);
    assert_int_equal(e, day_no(2024, 3, 29) * D);
    /* a quarter anchored on the 31st: Jan 31, Apr 30, Jul 31, Oct 31 */
    c = (cal_spec_t){ CAL_QUARTER, 0, 31, &utc.base };
    cal_period(&c, day_no(2024, 4, 29) * D, &s, &e);
    assert_int_equal(s, day_no(2024, 1, 31) * D);
    assert_int_equal(e, day_no(2024, 4, 30) * D);
    cal_period(&c, day_no(2024, 1, 1) * D, &s, &e);   /* before Jan 31: last year's fourth quarter */
    assert_int_equal(s, day_no(2023, 10, 31) * D);
    /* the year: 366 days in 2024, from the anchor day of January */
    c = (cal_spec_t){ CAL_YEAR, 0, 1, &utc.base };
    cal_period(&c, day_no(2024, 7, 1) * D, &s, &e);
    assert_int_equal(e - s, 366 * D);
    c.anchor_day = 15;
    cal_period(&c, day_no(2025, 1, 14) * D, &s, &e);
    assert_int_equal(s, day_no(2024, 1, 15) * D);
    /* weeks from each weekday: 2024-01-03 was a Wednesday */
    for (uint8_t ws = 1; ws <= 7; ws++) {
        c = (cal_spec_t){ CAL_WEEK, ws, 0, &utc.base };
        cal_period(&c, day_no(2024, 1, 3) * D + 5, &s, &e);
        int64_t back = (3 - ws + 7) % 7;
        assert_int_equal(s, (day_no(2024, 1, 3) - back) * D);
        assert_int_equal(e - s, 7 * D);
    }
    /* before 1970 too */
    c = (cal_spec_t){ CAL_DAY, 0, 0, &utc.base };
    cal_period(&c, -1, &s, &e);
    assert_int_equal(s, -D);
    assert_int_equal(e, 0);
}

/* A quarter-hour offset: days start at 18:15 UTC. */
static void test_fixed_offset(void **state)
{
    (void)state;
    fake_zone_t npt = fixed(5 * H + 45 * 60);
    cal_spec_t c = { CAL_DAY, 0, 0, &npt.base };
    int64_t s, e;
    cal_period(&c, day_no(2024, 1, 1) * D, &s, &e);   /* 05:45 local */
    assert_int_equal(s, day_no(2024, 1, 1) * D - (5 * H + 45 * 60));
    assert_int_equal(e - s, D);
}

/* DST changes: at 02:00 (23 and 25 hour days), at midnight forward (the
 * day starts at 01:00), at midnight backward (23:00 again), and a skipped
 * date. */
static void test_changes(void **state)
{
    (void)state;
    int64_t day = day_no(2024, 3, 31) * D, s, e;
    /* spring at 02:00: +1 -> +2 */
    fake_zone_t spring = change_at(H, day + 2 * H, 2 * H);
    cal_spec_t c = { CAL_DAY, 0, 0, &spring.base };
    cal_period(&c, day + 12 * H - 2 * H, &s, &e);
    assert_int_equal(s, day - H);
    assert_int_equal(e - s, 23 * H);
    /* autumn at 03:00: +2 -> +1 */
    fake_zone_t autumn = change_at(2 * H, day + 3 * H, H);
    c.zone = &autumn.base;
    cal_period(&c, day + 12 * H, &s, &e);
    assert_int_equal(s, day - 2 * H);
    assert_int_equal(e - s, 25 * H);
    /* forward at midnight, -3 -> -2: the date starts at the change, 01:00 */
    fake_zone_t gap = change_at(-3 * H, day, -2 * H);
    c.zone = &gap.base;
    assert_int_equal(cal_date_start(&gap.base, 2024, 3, 31), day + 3 * H);
    cal_period(&c, day + 3 * H, &s, &e);
    assert_int_equal(s, day + 3 * H);
    assert_int_equal(e - s, 23 * H);
    cal_period(&c, day + 3 * H - 1, &s, &e);   /* the last second of the 30th */
    assert_int_equal(e, day + 3 * H);
    /* backward at midnight, -2 -> -3: 23:00 of the 30th again, the 31st
     * starts at its one midnight and the 30th lasts 25 hours */
    fake_zone_t back = change_at(-2 * H, day, -3 * H);
    c.zone = &back.base;
    assert_int_equal(cal_date_start(&back.base, 2024, 3, 31), day + 3 * H);
    cal_period(&c, day + 2 * H + 30 * 60, &s, &e);   /* 23:30 of the 30th, the second time */
    assert_int_equal(e, day + 3 * H);
    assert_int_equal(e - s, 25 * H);
    /* a date skipped: -10 -> +14 at the end of the 30th; the 31st never happens */
    fake_zone_t skip = change_at(-10 * H, day, 14 * H);
    c.zone = &skip.base;
    assert_int_equal(cal_date_start(&skip.base, 2024, 3, 31), cal_date_start(&skip.base, 2024, 4, 1));
    cal_period(&c, day + 10 * H - 1, &s, &e);   /* 23:59:59 on the 30th */
    assert_int_equal(e, day + 10 * H);
    cal_period(&c, e, &s, &e);
    assert_int_equal(s, day + 10 * H);            /* April 1st, 00:00 +14 */
    assert_int_equal(e - s, D);
    /* a week and a month across the change still start at local midnight */
    c = (cal_spec_t){ CAL_MONTH, 0, 1, &spring.base };
    cal_period(&c, day, &s, &e);
    assert_int_equal(s, day_no(2024, 3, 1) * D - H);
    assert_int_equal(e, day_no(2024, 4, 1) * D - 2 * H);
}

/* Seeded random zones (offsets within +-14 h, up to 7 changes within a few
 * days) and specs: the periods of consecutive instants tile time, each
 * holds its instant and starts at a local midnight or a change. */
static void test_tiling(void **state)
{
    (void)state;
    rng_t rng;
    rng_seed(&rng, 2026);
    int64_t base = day_no(2024, 2, 20) * D;
    for (int round = 0; round < 300; round++) {
        fake_zone_t z = { { fake_offset, fake_next, "Fake/Random", 11 }, 1 + (int)rng_below(&rng, 7), { 0 }, { 0 } };
        z.off[0] = (int32_t)((int64_t)rng_below(&rng, 57) * 900 - 14 * H);
        for (int i = 1; i < z.n; i++) {
            z.at[i] = base + (int64_t)rng_below(&rng, 60 * D) + (i > 1 ? z.at[i - 1] - base : 0);
            z.off[i] = (int32_t)((int64_t)rng_below(&rng, 9) * 900 - 2 * H) + z.off[i - 1];
            if (z.off[i] < -14 * H || z.off[i] > 14 * H)
                z.off[i] = z.off[i - 1];
        }
        cal_spec_t c = { (uint8_t)(1 + rng_below(&rng, 5)), 0, 0, &z.base };
        if (c.kind == CAL_WEEK)
            c.week_start = (uint8_t)(1 + rng_below(&rng, 7));
        if (c.kind >= CAL_MONTH)
            c.anchor_day = (uint8_t)(1 + rng_below(&rng, 31));
        int64_t t = base - 40 * D, s, e, prev_end = INT64_MIN;
        for (int i = 0; i < 120; i++) {
            cal_period(&c, t, &s, &e);
            assert_true(s <= t && t < e);
            if (prev_end != INT64_MIN)
                assert_int_equal(s, prev_end);
            int64_t s2, e2;
            cal_period(&c, e - 1, &s2, &e2);
            assert_true(s2 == s && e2 == e);
            /* the local time at the start is a midnight, unless a change jumped over it */
            int64_t local = s + z.base.offset_at(&z.base, s);
            bool midnight = local % D == 0;
            bool change = false;
            for (int k = 1; k < z.n; k++)
                change = change || z.at[k] == s;
            assert_true(midnight || change);
            prev_end = e;
            t = e + (int64_t)rng_below(&rng, 3 * D);
            if (t >= e + D)
                prev_end = INT64_MIN;   /* skipped ahead: no longer adjacent */
        }
    }
}

/* fixed_window with a calendar: reset counts to the local midnight of a
 * 23-hour day; the next day starts afresh; the same inputs give the same
 * state (what replay relies on). */
static void test_fixed_window_calendar(void **state)
{
    (void)state;
    int64_t day = day_no(2024, 3, 31) * D;
    fake_zone_t spring = change_at(H, day + 2 * H, 2 * H);
    window_params_t p = { 2, cal_nominal_s(CAL_DAY) * 1000000000LL };
    const cal_spec_t cal = { CAL_DAY, 0, 0, &spring.base };
    const char *field = NULL;
    assert_null(window_validate_cal(&p, &cal, &field));
    int64_t now = (day + H) * 1000000000LL;   /* 03:00 local, after the change */
    window_state_t s = { 0, 0, 0 }, s2 = { 0, 0, 0 };
    rl_result_t r;
    int64_t exp;
    assert_true(fixed_window_update_cal(&p, &cal, &s, now, 1, &r, &exp));
    assert_true(r.allowed);
    int64_t end = (day - H + 23 * H) * 1000000000LL;   /* next local midnight: 22:00 UTC */
    assert_int_equal(r.reset_after_ns, end - now);
    assert_int_equal(exp, end);
    assert_true(fixed_window_update_cal(&p, &cal, &s, now + 1, 1, &r, &exp));
    assert_false(fixed_window_update_cal(&p, &cal, &s, now + 2, 1, &r, &exp));
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ns, end - now - 2);
    assert_true(fixed_window_update_cal(&p, &cal, &s, end, 1, &r, &exp));   /* the 1st of April */
    assert_int_equal(r.remaining, 1);
    assert_int_equal(r.reset_after_ns, 24 * H * 1000000000LL);
    /* replay: the same decisions on a fresh state give the same state */
    fixed_window_update_cal(&p, &cal, &s2, now, 1, &r, &exp);
    fixed_window_update_cal(&p, &cal, &s2, now + 1, 1, &r, &exp);
    fixed_window_update_cal(&p, &cal, &s2, now + 2, 1, &r, &exp);
    fixed_window_update_cal(&p, &cal, &s2, end, 1, &r, &exp);
    assert_memory_equal(&s, &s2, sizeof(s));
    /* a period given with a calendar is refused */
    p.period_ns = 60 * 1000000000LL;
    assert_non_null(window_validate_cal(&p, &cal, &field));
    assert_string_equal(field, "period");
}

/* Reservations on a calendar window (window.h's charge, refund and
 * start_of) use the same local periods as its decisions: the window a
 * reservation charged is the local day, a settle's extra or a refund ends
 * at the next local midnight of a 23-hour day, and a refund names the
 * window it gives back to. */
static void test_fixed_window_calendar_reserve(void **state)
{
    (void)state;
    int64_t day = day_no(2024, 3, 31) * D;
    fake_zone_t spring = change_at(H, day + 2 * H, 2 * H);
    window_params_t p = { 10, cal_nominal_s(CAL_DAY) * 1000000000LL };
    const cal_spec_t cal = { CAL_DAY, 0, 0, &spring.base };
    int64_t now = (day + H) * 1000000000LL;
    int64_t start = (day - H) * 1000000000LL;          /* local midnight: 23:00 UTC the day before */
    int64_t end = (day - H + 23 * H) * 1000000000LL;   /* the next one, 23 hours later */
    window_state_t s = { 0, 0, 0 };
    rl_result_t r;
    int64_t exp;
    assert_true(fixed_window_update_cal(&p, &cal, &s, now, 4, &r, &exp));
    assert_int_equal(fixed_window_start_of(&p, &cal, &s, now), start);
    fixed_window_charge(&p, &cal, &s, now + 1, 3, &exp);
    assert_int_equal(s.curr, 7);
    assert_int_equal(exp, end);
    fixed_window_refund(&p, &cal, &s, now + 2, 5, start, &exp);
    assert_int_equal(s.curr, 2);
    assert_int_equal(exp, end);
    /* after the local midnight the old window's refund gives nothing back */
    assert_true(fixed_window_update_cal(&p, &cal, &s, end, 1, &r, &exp));
    assert_int_equal(fixed_window_start_of(&p, &cal, &s, end), end);
    fixed_window_refund(&p, &cal, &s, end + 1, 1, start, &exp);
    assert_int_equal(s.curr, 1);
    assert_int_equal(exp, end + 24 * H * 1000000000LL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_civil),       cmocka_unit_test(test_names_and_validation),
        cmocka_unit_test(test_utc_periods), cmocka_unit_test(test_fixed_offset),
        cmocka_unit_test(test_changes),     cmocka_unit_test(test_tiling),
        cmocka_unit_test(test_fixed_window_calendar),
        cmocka_unit_test(test_fixed_window_calendar_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
