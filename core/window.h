/*
 * window.h - counters over epoch-aligned windows: fixed_window and the
 * two-window weighted approximation, sliding_window.
 *
 * Both cut time into windows [k·period, (k+1)·period) counted from the Unix
 * epoch, so every key and every tallyd agrees on where a window starts.
 *
 * fixed_window - the seeds' INCR + EXPIRE pattern (a counter per window whose
 * key expires with the window):
 *
 *   count     = actions in the current window
 *   allowed  <=> count + quantity <= max_count
 *   reset     = end of the window - now (0 while the window is empty)
 *   retry     = end of the window - now; "never" when quantity > max_count
 *
 * It allows bursts of up to 2·max_count across a window boundary (max_count at
 * the end of one window, max_count at the start of the next).
 *
 * A calendar fixed_window (fixed_window_update_cal, core/calendar.h) counts per
 * local day, week, month, quarter or year of a time zone instead: its
 * windows are the periods [start, end) cal_period gives for now, so they
 * last 23 or 25 hours across a DST change and a month its own length, and
 * reset and retry count to the real local midnight.  The state is the same
 * (the start of the window counted, its count); the period is a pure
 * function of the instant and the spec, so a replayed decision finds the
 * same window.
 *
 * sliding_window - Cloudflare's approximation of a sliding log with two
 * counters ("How we built rate limiting capable of scaling to millions of
 * domains", 2017): the previous window's count is assumed spread evenly over
 * it, so the part of it still inside the sliding period is weighted by the
 * fraction of the previous window that the period still covers:
 *
 *   elapsed   = now - start of the current window
 *   estimate  = prev · (period - elapsed) / period + curr
 *   allowed  <=> estimate + quantity <= max_count
 *
 * The comparison is done exactly, in 128-bit integers:
 *   prev·(period - elapsed) + (curr + quantity)·period <= max_count·period.
 * remaining = floor(max_count - estimate) after this request; retry is the
 * first instant at which the estimate has fallen enough (solved exactly, in
 * this window or the next); reset = when both counters have aged out.
 *
 * Error: the estimate equals the true count of the last `period` when the
 * previous window's actions were evenly spread; it is wrong by at most
 * prev·(fraction of the misplaced actions), and the limit is never exceeded
 * within one aligned window (curr <= max_count) nor by more than max_count
 * over any sliding period.  Cloudflare measured 0.003% of requests wrongly
 * allowed or refused over 400 million requests.  tests/unit/test_window.c
 * measures it against the exact sliding log on seeded uniform traffic at
 * 1.5x the limit: 0.4% fewer admissions than the log, an estimate off by
 * 0.6% of the limit on average and 11% at worst.
 *
 * Memory: three integers per key (24 bytes), whatever max_count is.
 *
 * Refused requests count nothing (unlike INCR-then-compare), so a client that
 * keeps retrying is not locked out beyond the window.
 */
#ifndef TALLY_WINDOW_H
#define TALLY_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "core/calendar.h"
#include "core/ratelimit.h"

#define WINDOW_MAX_COUNT INT64_C(1000000000000000)  /* 10^15: keeps every product inside 128 bits */
#define WINDOW_MAX_PERIOD_NS (INT64_C(1) << 61)      /* keeps start + 2·period below INT64_MAX */

typedef struct window_params {
    int64_t max_count;   /* 1..WINDOW_MAX_COUNT */
    int64_t period_ns;   /* 1..WINDOW_MAX_PERIOD_NS; with a calendar, cal_nominal_s(kind) in ns */
} window_params_t;

/* A key's counters; the zero value is the state of an absent key. */
typedef struct window_state {
    int64_t start;       /* start of the window `curr` counts (ns since the epoch) */
    int64_t curr;        /* actions in that window */
    int64_t prev;        /* actions in the window before it (sliding_window only) */
} window_state_t;

const char *window_validate(const window_params_t *p, const char **field);
/* window_validate, and a calendar's (cal_validate; period_ns must be its
 * nominal length).  cal NULL or CAL_NONE: no calendar. */
const char *window_validate_cal(const window_params_t *p, const cal_spec_t *cal, const char **field);

/* One decision for `quantity` (>= 0) at now_ns (>= 0).  Fills *r.  When the
 * request is allowed and quantity > 0, writes the new state to *s and the
 * instant the key can be forgotten to *expire_ns, and returns true; otherwise
 * *s is untouched and it returns false. */
bool fixed_window_update(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t quantity,
                         rl_result_t *r, int64_t *expire_ns);
/* fixed_window_update over the periods of a calendar (cal NULL or CAL_NONE:
 * the epoch-aligned periods of p->period_ns). */
bool fixed_window_update_cal(const window_params_t *p, const cal_spec_t *cal, window_state_t *s, int64_t now_ns,
                             int64_t quantity, rl_result_t *r, int64_t *expire_ns);
bool sliding_window_update(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t quantity,
                           rl_result_t *r, int64_t *expire_ns);

/* Reserve/settle/refund (throttle.h).  Both windows roll the state to now
 * as a decision does (the window of now; for sliding_window the stored
 * window becomes the previous one, or both age out), then
 *
 *   charge n        curr' = min(curr + n, 2·max_count)       into the window
 *                   of now (a settle's extra is charged when it becomes
 *                   known, even past max_count: requests are refused until
 *                   the overdraft has aged out of the window(s))
 *   refund n at w   the counter of window w (its start, as a reservation
 *                   recorded it; -1: the window of now) loses min(n, count):
 *                   curr when w is the window of now, prev (sliding only)
 *                   when w is the window before; a window that has already
 *                   aged out is not refunded (its count no longer matters)
 *
 * cal: a fixed window's calendar (NULL or CAL_NONE: periods from the epoch).
 * n >= 0.  *expire_ns receives the instant the state is equivalent to an
 * absent key.  window_start_of gives the start of the window a decision at
 * now_ns counts in, after rolling `s` (the window a reservation charged). */
void fixed_window_charge(const window_params_t *p, const cal_spec_t *cal, window_state_t *s, int64_t now_ns, int64_t n,
                         int64_t *expire_ns);
void fixed_window_refund(const window_params_t *p, const cal_spec_t *cal, window_state_t *s, int64_t now_ns, int64_t n,
                         int64_t window, int64_t *expire_ns);
void sliding_window_charge(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t n,
                           int64_t *expire_ns);
void sliding_window_refund(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t n, int64_t window,
                           int64_t *expire_ns);
int64_t fixed_window_start_of(const window_params_t *p, const cal_spec_t *cal, const window_state_t *s,
                              int64_t now_ns);
int64_t sliding_window_start_of(const window_params_t *p, const window_state_t *s, int64_t now_ns);

#endif
