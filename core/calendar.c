/* calendar.c - see calendar.h. */
#include "core/calendar.h"

#include <string.h>

#define DAY_S INT64_C(86400)
#define HOUR_S INT64_C(3600)
/* Every UTC offset tzdata has held since 1900 lies within +-15 hours, so a
 * local midnight happens within 16 hours of the same wall time in UTC. */
#define SPAN_S (16 * HOUR_S)

/* ------------------------------------------------------------------------ */
/* Civil dates (proleptic Gregorian; H. Hinnant's days-from-civil method)    */
/* ------------------------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

int64_t cal_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;                                       /* [0, 399] */
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;       /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;               /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

void cal_civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
    days += 719468;
    int64_t era = floor_div(days, 146097);
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int month_days(int64_t y, int m)
{
    static const int n[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    return m == 2 && leap(y) ? 29 : n[m - 1];
}

/* ------------------------------------------------------------------------ */
/* Names and validation                                                     */
/* ------------------------------------------------------------------------ */

static const char *const kind_names[] = { [CAL_DAY] = "day", [CAL_WEEK] = "week", [CAL_MONTH] = "month",
                                          [CAL_QUARTER] = "quarter", [CAL_YEAR] = "year" };
static const char *const day_names[] = { NULL, "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                                         "sunday" };

static bool name_is(const char *want, const char *s, size_t n) { return strlen(want) == n && !memcmp(want, s, n); }

const char *cal_kind_name(cal_kind_t k) { return k >= CAL_DAY && k <= CAL_KIND_MAX ? kind_names[k] : NULL; }

cal_kind_t cal_kind_parse(const char *name, size_t n)
{
    for (int k = CAL_DAY; k <= CAL_KIND_MAX; k++)
        if (name_is(kind_names[k], name, n))
            return (cal_kind_t)k;
    return CAL_NONE;
}

int cal_weekday_parse(const char *name, size_t n)
{
    for (int d = 1; d <= 7; d++)
        if (name_is(day_names[d], name, n))
            return d;
    return 0;
}

const char *cal_weekday_name(int d) { return d >= 1 && d <= 7 ? day_names[d] : NULL; }

const char *cal_validate(const cal_spec_t *c, const char **field)
{
    if (c->kind < CAL_DAY || c->kind > CAL_KIND_MAX) {
        *field = "calendar";
        return "must be day, week, month, quarter or year";
    }
    if (!c->zone || !c->zone->offset_at) {
        *field = "time_zone";
        return "must name a time zone";
    }
    if (c->kind == CAL_WEEK ? c->week_start < 1 || c->week_start > 7 : c->week_start != 0) {
        *field = "week_start";
        return c->kind == CAL_WEEK ? "must be monday .. sunday" : "applies to the week calendar only";
    }
    bool anchored = c->kind == CAL_MONTH || c->kind == CAL_QUARTER || c->kind == CAL_YEAR;
    if (anchored ? c->anchor_day < 1 || c->anchor_day > 31 : c->anchor_day != 0) {
        *field = "anchor_day";
        return anchored ? "must be an integer between 1 and 31" : "applies to the month, quarter and year calendars only";
    }
    return NULL;
}

int64_t cal_nominal_s(cal_kind_t k)
{
    switch (k) {
    case CAL_DAY: return DAY_S;
    case CAL_WEEK: return 7 * DAY_S;
    case CAL_MONTH: return 31 * DAY_S;
    case CAL_QUARTER: return 92 * DAY_S;
    case CAL_YEAR: return 366 * DAY_S;
    case CAL_NONE: break;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The start of a local date                                                */
/* ------------------------------------------------------------------------ */

/* The first instant whose local time is at or after `local` (a wall time
 * counted in seconds as if it were UTC).  Walks the intervals of constant
 * offset from SPAN_S before `local` (where the clock is surely behind it):
 * in an interval [a, b) of offset o the clock reads t + o, so its first
 * instant at or after `local` is max(a, local - o) when that is before b -
 * local - o itself (the clock reads midnight), or a when a change made the
 * clock jump over midnight. */
static int64_t wall_start(const cal_zone_t *z, int64_t local)
{
    int64_t a = local - SPAN_S;
    for (int i = 0; i < 64; i++) {   /* a few changes within 32 hours at most */
        int32_t o = z->offset_at(z, a);
        int64_t b = z->next_change(z, a);
        int64_t t = local - o > a ? local - o : a;
        if (t < b)
            return t;
        a = b;
    }
    return local - z->offset_at(z, local);   /* no zone changes 64 times in a day */
}

int64_t cal_date_start(const cal_zone_t *z, int64_t year, int month, int day)
{
    return wall_start(z, cal_days_from_civil(year, month, day) * DAY_S);
}

/* ------------------------------------------------------------------------ */
/* Periods                                                                  */
/* ------------------------------------------------------------------------ */

/* A period is named by an index: its first date's day number (day, week) or
 * its first month's number y·12 + m - 1 (month, quarter, year). */

static int64_t step_of(const cal_spec_t *c)
{
    switch (c->kind) {
    case CAL_WEEK: return 7;
    case CAL_QUARTER: return 3;
    case CAL_YEAR: return 12;
    default: return 1;   /* day, month */
    }
}

static bool by_month(const cal_spec_t *c) { return c->kind >= CAL_MONTH; }

/* The day number of the period's first date. */
static int64_t first_day(const cal_spec_t *c, int64_t idx)
{
    if (!by_month(c))
        return idx;
    int64_t y = floor_div(idx, 12);
    int m = (int)(idx - y * 12) + 1;
    int d = month_days(y, m);
    return cal_days_from_civil(y, m, c->anchor_day < d ? c->anchor_day : d);
}

/* The index of the period that contains the local date `days`. */
static int64_t index_of(const cal_spec_t *c, int64_t days)
{
    if (c->kind == CAL_DAY)
        return days;
    if (c->kind == CAL_WEEK) {
        int64_t wd = floor_div(days + 3, 7);            /* 1970-01-01 was a Thursday */
        wd = days + 3 - wd * 7 + 1;                     /* 1 monday .. 7 sunday */
        return days - (wd - c->week_start + 7) % 7;
    }
    int64_t y;
    int m, d;
    cal_civil_from_days(days, &y, &m, &d);
    int64_t step = step_of(c);
    int64_t idx = floor_div(y * 12 + m - 1, step) * step;
    if (days < first_day(c, idx))
        idx -= step;
    return idx;
}

static int64_t period_start(const cal_spec_t *c, int64_t idx) { return wall_start(c->zone, first_day(c, idx) * DAY_S); }

void cal_period(const cal_spec_t *c, int64_t t, int64_t *start_s, int64_t *end_s)
{
    if (t < CAL_MIN_S)
        t = CAL_MIN_S;
    if (t >= CAL_MAX_S)
        t = CAL_MAX_S - 1;
    const cal_zone_t *z = c->zone;
    int64_t step = step_of(c);
    int64_t idx = index_of(c, floor_div(t + z->offset_at(z, t), DAY_S));
    int64_t start = period_start(c, idx), end = period_start(c, idx + step);
    /* the local date can run back across midnight (a clock turned back) or
     * a period can be empty (a skipped date): step to the one holding t */
    for (int i = 0; i < 4 && t >= end; i++) {
        idx += step;
        start = end;
        end = period_start(c, idx + step);
    }
    for (int i = 0; i < 4 && t < start; i++) {
        idx -= step;
        end = start;
        start = period_start(c, idx);
    }
    *start_s = start;
    *end_s = end;
}
