/*
 * calendar.h - calendar periods in a time zone: where the day, week, month,
 * quarter or year that contains an instant starts and ends.
 *
 * A fixed_window limit with `calendar` counts per local calendar period
 * instead of per epoch-aligned `period`.  Its windows are the periods'
 * instants [start, end), where a period's start is the start of its first
 * local date and its end the start of the next period's first date:
 *
 *   day       the local date
 *   week      seven dates from the last week_start day (monday .. sunday)
 *   month     from day anchor_day of a month to day anchor_day of the next,
 *             anchor_day clamped to each month's last day (31 -> Feb 28/29,
 *             Apr 30; a billing date)
 *   quarter   from day anchor_day of January, April, July or October to the
 *             same of the next quarter's first month (clamped in that month)
 *   year      from January anchor_day to the next January anchor_day
 *
 * The start of a local date D is the first instant whose local time is at
 * or after D 00:00:
 *
 *   - usually the one instant at which the clock reads D 00:00;
 *   - when midnight happens twice (a zone that turns its clock back across
 *     midnight, as Brazil did from 00:00 to 23:00), the first of them: the
 *     repeated hour of the day before belongs to D's period, so periods
 *     never overlap and never leave a gap;
 *   - when midnight never happens (a zone that moves its clock forward at
 *     midnight, 00:00 -> 01:00), the instant of the change;
 *   - when the whole date never happens (Pacific/Apia skipped 2011-12-30),
 *     its period is empty: the instant no time of it is ever shown.
 *
 * So a day lasts 23 or 25 hours (or 23.5, 24.5 on Lord Howe) across a DST
 * change, a year 365 or 366 days, and the windows of one zone tile time
 * without overlap.
 *
 * The zone is an interface (cal_zone_t): the UTC offset in force at an
 * instant, and the next instant it changes.  core/ reads no tzdata; the command layer
 * (cmd/zone.h) implements the interface with GLib's GTimeZone over the
 * system's tzdata.  The arithmetic here is pure: the same instant, spec and
 * zone rules give the same period on every machine, which is what a journal
 * replayed on a replica or after a restart needs.
 *
 * Cost: a period's two boundaries take two offset lookups and two
 * next-change lookups each, more only across a change.
 */
#ifndef TALLY_CALENDAR_H
#define TALLY_CALENDAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cal_kind {
    CAL_NONE = 0,        /* not a calendar window */
    CAL_DAY = 1,
    CAL_WEEK = 2,
    CAL_MONTH = 3,
    CAL_QUARTER = 4,
    CAL_YEAR = 5,
} cal_kind_t;

#define CAL_KIND_MAX CAL_YEAR
#define CAL_ZONE_NAME_MAX 64          /* IANA names are at most 30 bytes long today */
/* The instants periods are computed for: 1900-01-01 .. 2200-01-01 UTC, far
 * beyond any clock a limiter sees and inside every zone's tables. */
#define CAL_MIN_S INT64_C(-2208988800)
#define CAL_MAX_S INT64_C(7258118400)

typedef struct cal_zone cal_zone_t;

/* A time zone: its name, the UTC offset (seconds east of UTC) in force at
 * the instant utc_s (seconds since the epoch), and the first instant after
 * utc_s at which the offset changes (INT64_MAX: never).  Implementations
 * embed it as their first member; it must be safe to call from any thread. */
struct cal_zone {
    int32_t (*offset_at)(const cal_zone_t *z, int64_t utc_s);
    int64_t (*next_change)(const cal_zone_t *z, int64_t utc_s);
    const char *name;
    size_t name_len;
};

/* A calendar: its kind, its anchors and its zone (NULL only with CAL_NONE). */
typedef struct cal_spec {
    uint8_t kind;            /* cal_kind_t */
    uint8_t week_start;      /* week: 1 monday .. 7 sunday; 0 for other kinds */
    uint8_t anchor_day;      /* month, quarter, year: 1..31; 0 for day and week */
    const cal_zone_t *zone;
} cal_spec_t;

/* "day", "week", ...; NULL for CAL_NONE or an unknown value. */
const char *cal_kind_name(cal_kind_t k);
/* The kind named `name` (n bytes), or CAL_NONE. */
cal_kind_t cal_kind_parse(const char *name, size_t n);
/* "monday" .. "sunday" -> 1..7; 0 for anything else. */
int cal_weekday_parse(const char *name, size_t n);
const char *cal_weekday_name(int d);

/* NULL when the spec is usable, else a message with *field naming the
 * offending member ("calendar", "week_start", "anchor_day", "time_zone"). */
const char *cal_validate(const cal_spec_t *c, const char **field);

/* A period's nominal length in seconds (day 86400, week 604800, month 31
 * days, quarter 92 days, year 366 days): the longest it can be but for a
 * DST change, for RateLimit-Policy's w and records. */
int64_t cal_nominal_s(cal_kind_t k);

/* The period of a valid spec that contains the instant t_s (clamped to
 * [CAL_MIN_S, CAL_MAX_S)): *start_s <= t_s < *end_s, in seconds since the
 * epoch. */
void cal_period(const cal_spec_t *c, int64_t t_s, int64_t *start_s, int64_t *end_s);

/* The first instant whose local time in z is at or after the local date
 * (year, month 1..12, day 1..31) at 00:00 (see the top of this file). */
int64_t cal_date_start(const cal_zone_t *z, int64_t year, int month, int day);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t cal_days_from_civil(int64_t y, int m, int d);
void cal_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

#endif
