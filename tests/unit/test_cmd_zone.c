/*
 * test_cmd_zone.c - calendar periods in real time zones (cmd/zone.h over
 * GLib, core/calendar.h) against Python's zoneinfo (tests/unit/
 * calendar_ref.py, which shares no code with core/calendar.c): every period
 * boundary over 21 years (2010-2030) for every calendar kind, every
 * week_start and the anchor days 1, 15, 28, 29, 30, 31, in zones with DST
 * on both hemispheres, half- and quarter-hour offsets, a 30-minute DST
 * (Lord Howe), midnight DST changes (Sao Paulo, until it abolished DST in
 * 2019), a skipped date (Apia, 2011-12-30) and changed rules (Moscow 2011
 * and 2014).  Also: the zone's transition table answers what GLib answers,
 * names are checked, and zones are shared and thread-safe.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <glib.h>

#include "cmd/zone.h"
#include "core/rng.h"

#define T0 INT64_C(1262304000)   /* 2010-01-01T00:00:00Z */
#define T1 INT64_C(1924992000)   /* 2031-01-01T00:00:00Z */

static const char *const zones[] = {
    "UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe",
    "America/Sao_Paulo", "Pacific/Apia", "Europe/Moscow",
};
#define NZONES (sizeof(zones) / sizeof(zones[0]))

static const cal_zone_t *zone(const char *name)
{
    const char *why = NULL;
    const cal_zone_t *z = cmd_zone_get(name, strlen(name), &why);
    if (!z)
        fail_msg("zone %s: %s", name, why);
    return z;
}

typedef struct spec_row {
    const char *zone;
    cal_spec_t c;
} spec_row_t;

/* Every spec the comparison covers: day; week x 7 starts; month, quarter
 * and year x anchors. */
static size_t all_specs(spec_row_t *rows)
{
    static const uint8_t anchors[] = { 1, 15, 28, 29, 30, 31 };
    size_t n = 0;
    for (size_t zi = 0; zi < NZONES; zi++) {
        const cal_zone_t *z = zone(zones[zi]);
        rows[n++] = (spec_row_t){ zones[zi], { CAL_DAY, 0, 0, z } };
        for (uint8_t ws = 1; ws <= 7; ws++)
            rows[n++] = (spec_row_t){ zones[zi], { CAL_WEEK, ws, 0, z } };
        for (uint8_t k = CAL_MONTH; k <= CAL_YEAR; k++)
            for (size_t a = 0; a < sizeof(anchors); a++)
                rows[n++] = (spec_row_t){ zones[zi], { k, 0, anchors[a], z } };
    }
    return n;
}

static void test_against_zoneinfo(void **state)
{
    (void)state;
    spec_row_t *rows = calloc(NZONES * 32, sizeof(*rows));
    assert_non_null(rows);
    size_t n = all_specs(rows);
    char path[] = "/tmp/tally_calendar_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s %s %d %d %lld %lld\n", rows[i].zone, cal_kind_name(rows[i].c.kind), rows[i].c.week_start,
                rows[i].c.anchor_day, (long long)T0, (long long)T1);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 tests/unit/calendar_ref.py %s", path);
    FILE *py = popen(cmd, "r");
    assert_non_null(py);
    char line[128];
    size_t periods = 0, dst_days = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_spec_t *c = &rows[i].c;
        int64_t t = T0;
        for (;;) {
            assert_non_null(fgets(line, sizeof(line), py));
            if (line[0] == '.')
                break;
            long long want_s, want_e;
            assert_int_equal(sscanf(line, "%lld %lld", &want_s, &want_e), 2);
            int64_t s, e;
            cal_period(c, t, &s, &e);
            if (s != want_s || e != want_e)
                fail_msg("%s %s week_start %d anchor_day %d at %lld: [%lld, %lld), zoneinfo [%lld, %lld)",
                         rows[i].zone, cal_kind_name(c->kind), c->week_start, c->anchor_day, (long long)t,
                         (long long)s, (long long)e, want_s, want_e);
            /* every instant of the period maps to it: its first, last and middle */
            int64_t s2, e2;
            cal_period(c, e - 1, &s2, &e2);
            assert_true(s2 == s && e2 == e);
            cal_period(c, s + (e - s) / 2, &s2, &e2);
            assert_true(s2 == s && e2 == e);
            if (c->kind == CAL_DAY && e - s != 86400)
                dst_days++;
            periods++;
            t = e;
        }
        assert_true(t >= T1);
    }
    assert_null(fgets(line, sizeof(line), py));
    assert_int_equal(pclose(py), 0);
    unlink(path);
    free(rows);
    print_message("%zu periods of %zu specs agree with zoneinfo (%zu days not 24 h long)\n", periods, n, dst_days);
    assert_true(periods > 150000);
    assert_true(dst_days > 150);
}

/* Known instants, written out by hand. */
static void test_known_boundaries(void **state)
{
    (void)state;
    int64_t s, e;
    /* Paris, 2024-03-31 (23 h) and 2024-10-27 (25 h) */
    cal_spec_t day = { CAL_DAY, 0, 0, zone("Europe/Paris") };
    cal_period(&day, 1711846800, &s, &e);   /* 2024-03-31T01:00Z */
    assert_int_equal(s, 1711839600);        /* 2024-03-30T23:00Z = 00:00 CET */
    assert_int_equal(e - s, 23 * 3600);
    cal_period(&day, 1729990800, &s, &e);   /* 2024-10-27T01:00Z */
    assert_int_equal(e - s, 25 * 3600);
    /* Apia skipped 2011-12-30: the 29th ends where the 31st starts */
    cal_spec_t apia = { CAL_DAY, 0, 0, zone("Pacific/Apia") };
    assert_int_equal(cal_date_start(apia.zone, 2011, 12, 30), cal_date_start(apia.zone, 2011, 12, 31));
    cal_period(&apia, 1325152800 - 1, &s, &e);   /* 2011-12-29T23:59:59-10 */
    assert_int_equal(e, 1325239200 - 86400);     /* 2011-12-31T00:00+14 = 2011-12-30T10:00Z */
    /* Sao Paulo's 2018-11-04 started at 01:00 (no midnight) */
    assert_int_equal(cal_date_start(zone("America/Sao_Paulo"), 2018, 11, 4), 1541300400);   /* 03:00Z */
    /* Kathmandu, +05:45: 2024-01-01 starts 2023-12-31T18:15Z */
    assert_int_equal(cal_date_start(zone("Asia/Kathmandu"), 2024, 1, 1), 1704046500);
    /* a billing month anchored on the 31st in a leap February */
    cal_spec_t month = { CAL_MONTH, 0, 31, zone("UTC") };
    cal_period(&month, 1709251200, &s, &e);   /* 2024-03-01 */
    assert_int_equal(s, 1709164800);          /* 2024-02-29 */
    assert_int_equal(e, 1711843200);          /* 2024-03-31 */
}

/* The transition table answers what GLib itself answers. */
static void test_table_matches_glib(void **state)
{
    (void)state;
    rng_t rng;
    rng_seed(&rng, 42);
    for (size_t zi = 0; zi < NZONES; zi++) {
        const cal_zone_t *z = zone(zones[zi]);
        GTimeZone *tz = g_time_zone_new_identifier(zones[zi]);
        assert_non_null(tz);
        for (int i = 0; i < 20000; i++) {
            int64_t t = CAL_MIN_S + (int64_t)(rng_next(&rng) % (uint64_t)(CAL_MAX_S - CAL_MIN_S));
            if (i % 2)   /* half of them within a second of a change of the years 2010-2030 */
                t = T0 + (int64_t)(rng_next(&rng) % (uint64_t)(T1 - T0));
            int k = g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, t);
            assert_int_equal(z->offset_at(z, t), g_time_zone_get_offset(tz, k));
            /* the next change: the offset holds until it and differs at it */
            int64_t next = z->next_change(z, t);
            assert_true(next > t);
            if (next != INT64_MAX) {
                assert_int_equal(z->offset_at(z, next - 1), z->offset_at(z, t));
                assert_int_not_equal(z->offset_at(z, next), z->offset_at(z, t));
            }
        }
        for (int64_t t = T0; t < T1; t += 3600) {   /* every hour of 21 years, and the second before it */
            assert_int_equal(z->offset_at(z, t),
                             g_time_zone_get_offset(tz, g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, t)));
            assert_int_equal(z->offset_at(z, t - 1),
                             g_time_zone_get_offset(tz, g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, t - 1)));
        }
        g_time_zone_unref(tz);
    }
    /* every offset change of 2010-2030 is where zoneinfo's reference puts it:
     * covered by test_against_zoneinfo; here the values on both sides */
    const cal_zone_t *lh = zone("Australia/Lord_Howe");
    assert_int_equal(lh->offset_at(lh, 1719792000), 10 * 3600 + 1800);   /* July: +10:30 */
    assert_int_equal(lh->offset_at(lh, 1704067200), 11 * 3600);           /* January: +11 */
    const cal_zone_t *msk = zone("Europe/Moscow");
    assert_int_equal(msk->offset_at(msk, 1356998400), 4 * 3600);          /* 2013: +4 all year */
    assert_int_equal(msk->offset_at(msk, 1420070400), 3 * 3600);          /* 2015: +3 */
}

static void test_names(void **state)
{
    (void)state;
    static const char *const bad[] = { "", "Mars/Olympus", "../etc/passwd", "/etc/localtime", "Europe//Paris",
                                       "Europe/", "+05:30", "EST5EDT,M3.2.0,M11.1.0", "zone.tab", "Europe/Paris ",
                                       "leapseconds", "europe/paris" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *why = NULL;
        assert_null(cmd_zone_get(bad[i], strlen(bad[i]), &why));
        assert_non_null(why);
    }
    char longname[100];
    memset(longname, 'A', sizeof(longname));
    const char *why = NULL;
    assert_null(cmd_zone_get(longname, sizeof(longname), &why));
    /* one zone per name, shared */
    assert_ptr_equal(zone("Europe/Paris"), zone("Europe/Paris"));
    const cal_zone_t *z = zone("Etc/GMT+3");
    assert_int_equal(z->offset_at(z, T0), -3 * 3600);
    assert_int_equal((int)z->name_len, 9);
}

static void *load_many(void *arg)
{
    const cal_zone_t **out = arg;
    for (size_t i = 0; i < NZONES; i++)
        out[i] = zone(zones[NZONES - 1 - i]);
    return NULL;
}

static void test_threads_share(void **state)
{
    (void)state;
    const cal_zone_t *got[4][NZONES];
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, load_many, got[i]), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 1; i < 4; i++)
        assert_memory_equal(got[0], got[i], sizeof(got[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_share),   /* first: the loads race */
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_known_boundaries),
        cmocka_unit_test(test_table_matches_glib),
        cmocka_unit_test(test_against_zoneinfo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
