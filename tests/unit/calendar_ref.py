#!/usr/bin/python3
"""calendar_ref.py - the reference for tests/unit/test_cmd_zone.c: calendar
periods computed with Python's zoneinfo (the system's tzdata), by code that
shares nothing with core/calendar.c.

Reads lines "ZONE KIND WEEK_START ANCHOR_DAY FROM_S TO_S" from the file named
by argv[1] (WEEK_START 1 monday .. 7 sunday, 0 when unused; ANCHOR_DAY 1..31,
0 when unused); prints for each the periods [start, end) that meet the
instants [FROM_S, TO_S), in order, one "start end" line each, and a line
"." after each spec's periods.  Empty periods (a date a zone skipped) are
left out.

The start of a local date: the first instant at which the local clock reads
that date at 00:00 or later (calendar.h) - the earlier of the two readings
when midnight is ambiguous, the instant of the jump when it does not exist.
"""
import calendar
import sys
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo


def date_start(z, d):
    """The first instant whose local wall time is >= d 00:00."""
    wall = datetime(d.year, d.month, d.day)
    stamps = []
    for fold in (0, 1):
        ts = int(wall.replace(tzinfo=z, fold=fold).timestamp())
        stamps.append(ts)
    valid = [ts for ts in stamps
             if datetime.fromtimestamp(ts, z).replace(tzinfo=None) == wall]
    if valid:
        return min(valid)
    # a gap: the clock jumps over midnight between the two readings
    lo, hi = min(stamps) - 1, max(stamps)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, z).replace(tzinfo=None) >= wall:
            hi = mid
        else:
            lo = mid
    return hi


def first_date(kind, ws, anchor, d):
    """The first date of the period containing the local date d."""
    if kind == "day":
        return d
    if kind == "week":
        return d - timedelta(days=(d.isoweekday() - ws) % 7)
    step = {"month": 1, "quarter": 3, "year": 12}[kind]
    base = (d.year * 12 + d.month - 1) // step * step
    f = month_start(base, anchor)
    if d < f:
        f = month_start(base - step, anchor)
    return f


def month_start(index, anchor):
    y, m = divmod(index, 12)
    return date(y, m + 1, min(anchor, calendar.monthrange(y, m + 1)[1]))


def next_date(kind, anchor, f):
    if kind == "day":
        return f + timedelta(days=1)
    if kind == "week":
        return f + timedelta(days=7)
    step = {"month": 1, "quarter": 3, "year": 12}[kind]
    return month_start(f.year * 12 + f.month - 1 + step, anchor)


def main():
    out = []
    with open(sys.argv[1]) as specs:
        for line in specs:
            name, kind, ws, anchor, t0, t1 = line.split()
            ws, anchor, t0, t1 = int(ws), int(anchor), int(t0), int(t1)
            z = ZoneInfo(name)
            f = first_date(kind, ws, anchor, datetime.fromtimestamp(t0, z).date())
            start = date_start(z, f)
            while start < t1:
                nf = next_date(kind, anchor, f)
                end = date_start(z, nf)
                if end > start:
                    out.append("%d %d" % (start, end))
                f, start = nf, end
            out.append(".")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
