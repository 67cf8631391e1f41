/* window.c - see window.h for both algorithms. */
#include "core/window.h"

#include <stddef.h>

__extension__ typedef __int128 i128;

const char *window_validate(const window_params_t *p, const char **field)
{
    if (p->max_count < 1 || p->max_count > WINDOW_MAX_COUNT) {
        *field = "max_count";
        return "must be an integer between 1 and 10^15";
    }
    if (p->period_ns < 1 || p->period_ns > WINDOW_MAX_PERIOD_NS) {
        *field = "period";
        return "must be between 1 second and 73 years";
    }
    return NULL;
}

const char *window_validate_cal(const window_params_t *p, const cal_spec_t *cal, const char **field)
{
    const char *why = window_validate(p, field);
    if (why || !cal || cal->kind == CAL_NONE)
        return why;
    if ((why = cal_validate(cal, field)))
        return why;
    if (p->period_ns != cal_nominal_s((cal_kind_t)cal->kind) * NS_PER_SEC) {
        *field = "period";
        return "cannot be given with a calendar (the calendar sets the window)";
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Fixed window                                                             */
/* ------------------------------------------------------------------------ */

/* The calendar period holding the instant t_ns: [*start, *end) in ns. */
static void cal_window(const cal_spec_t *cal, int64_t t_ns, int64_t *start, int64_t *end)
{
    int64_t s, e;
    cal_period(cal, t_ns / NS_PER_SEC, &s, &e);
    *start = s * NS_PER_SEC;
    *end = e * NS_PER_SEC;
}

bool fixed_window_update(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t quantity,
                         rl_result_t *r, int64_t *expire_ns)
{
    return fixed_window_update_cal(p, NULL, s, now_ns, quantity, r, expire_ns);
}

bool fixed_window_update_cal(const window_params_t *p, const cal_spec_t *cal, window_state_t *s, int64_t now_ns,
                             int64_t quantity, rl_result_t *r, int64_t *expire_ns)
{
    int64_t aligned, end;
    if (cal && cal->kind == CAL_NONE)
        cal = NULL;
    if (cal)
        cal_window(cal, now_ns, &aligned, &end);
    else
        aligned = now_ns - now_ns % p->period_ns, end = aligned + p->period_ns;
    int64_t start = aligned, count = 0;
    if (s->start >= aligned && s->curr > 0) {
        /* the current window, or (clock stepped back) a later one: keep it */
        start = s->start;
        count = s->curr;
        if (start != aligned) {
            if (cal)
                cal_window(cal, start, &aligned, &end);
            else
                end = start + p->period_ns;
        }
    }

    r->limit = p->max_count;
    r->retry_after_ns = RL_NEVER;
    if (quantity > p->max_count) {
        r->allowed = false;
    } else if (count > p->max_count - quantity) {
        r->allowed = false;
        r->retry_after_ns = end - now_ns;
    } else {
        r->allowed = true;
        count += quantity;
    }
    r->remaining = count < p->max_count ? p->max_count - count : 0;
    r->reset_after_ns = count > 0 ? end - now_ns : 0;
    if (!r->allowed || quantity == 0)
        return false;
    s->start = start;
    s->curr = count;
    s->prev = 0;
    *expire_ns = end;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Sliding window                                                           */
/* ------------------------------------------------------------------------ */

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Smallest e in [0, period] with weight·(period - e) <= room·period, for
 * weight > 0 and room >= 0. */
static int64_t first_fit(int64_t weight, int64_t room, int64_t period)
{
    i128 q = (i128)room * period / weight;   /* floor: period - e <= q */
    if (q >= period)
        return 0;
    return period - (int64_t)q;
}

bool sliding_window_update(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t quantity,
                           rl_result_t *r, int64_t *expire_ns)
{
    const int64_t period = p->period_ns, max = p->max_count;
    int64_t aligned = now_ns - now_ns % period;
    int64_t start = aligned, prev = 0, curr = 0;
    if (s->curr > 0 || s->prev > 0) {
        if (s->start >= aligned) {
            /* the current window, or (clock stepped back) a later one */
            start = s->start;
            prev = s->prev;
            curr = s->curr;
        } else if (s->start + period == aligned) {
            prev = s->curr;   /* the stored window is now the previous one */
        }
    }
    int64_t elapsed = max64(now_ns - start, 0);
    int64_t weight_span = period - elapsed;   /* (0, period] */
    i128 budget = (i128)max * period;
    i128 prev_part = (i128)prev * weight_span;

    r->limit = max;
    r->retry_after_ns = RL_NEVER;
    if (quantity > max) {
        r->allowed = false;
    } else if (prev_part + (i128)(curr + quantity) * period > budget) {
        r->allowed = false;
        int64_t room = max - curr - quantity;
        int64_t at = -1;
        if (room >= 0 && prev > 0) {
            int64_t e = first_fit(prev, room, period);
            if (e < period)
                at = start + e;
        }
        if (at < 0) {
            /* next window: curr becomes the weighted previous count */
            int64_t e = curr > 0 ? first_fit(curr, max - quantity, period) : 0;
            at = start + period + e;
        }
        r->retry_after_ns = at - now_ns;
    } else {
        r->allowed = true;
        curr += quantity;
    }
    i128 left = budget - prev_part - (i128)curr * period;
    if (left <= 0)
        r->remaining = 0;
    else if (left <= (i128)UINT64_MAX)   /* 64-bit division: a 128-bit one is a slow library call */
        r->remaining = (int64_t)((uint64_t)left / (uint64_t)period);
    else
        r->remaining = (int64_t)(left / period);
    int64_t forget_at = curr > 0 ? start + 2 * period : prev > 0 ? start + period : now_ns;
    r->reset_after_ns = max64(forget_at - now_ns, 0);
    if (!r->allowed || quantity == 0)
        return false;
    s->start = start;
    s->curr = curr;
    s->prev = prev;
    *expire_ns = forget_at;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Reserve, settle, refund (window.h)                                       */
/* ------------------------------------------------------------------------ */

/* The state rolled to now as fixed_window_update sees it: the window of now
 * (or, a clock stepped back, the later stored one) and its count. */
static void fixed_roll(const window_params_t *p, const cal_spec_t *cal, window_state_t *s, int64_t now_ns)
{
    int64_t aligned, end;
    if (cal && cal->kind != CAL_NONE)
        cal_window(cal, now_ns, &aligned, &end);
    else
        aligned = now_ns - now_ns % p->period_ns;
    if (!(s->start >= aligned && s->curr > 0)) {
        s->start = aligned;
        s->curr = 0;
    }
    s->prev = 0;
}

/* As sliding_window_update sees it: start, prev and curr at now. */
static void sliding_roll(const window_params_t *p, window_state_t *s, int64_t now_ns)
{
    int64_t aligned = now_ns - now_ns % p->period_ns;
    if (s->curr > 0 || s->prev > 0) {
        if (s->start >= aligned)
            return;
        s->prev = s->start + p->period_ns == aligned ? s->curr : 0;
    } else {
        s->prev = 0;
    }
    s->start = aligned;
    s->curr = 0;
}

static int64_t over_cap(const window_params_t *p, int64_t curr, int64_t n)
{
    int64_t cap = 2 * p->max_count;
    return n >= cap - curr ? cap : curr + n;
}

int64_t fixed_window_start_of(const window_params_t *p, const cal_spec_t *cal, const window_state_t *s,
                              int64_t now_ns)
{
    window_state_t w = *s;
    fixed_roll(p, cal, &w, now_ns);
    return w.start;
}

int64_t sliding_window_start_of(const window_params_t *p, const window_state_t *s, int64_t now_ns)
{
    window_state_t w = *s;
    sliding_roll(p, &w, now_ns);
    return w.start;
}

/* The end of the window a fixed window's state counts in: its calendar
 * period's (a local boundary) or start + period. */
static int64_t fixed_expire(const window_params_t *p, const cal_spec_t *cal, const window_state_t *s, int64_t now_ns)
{
    if (s->curr <= 0)
        return now_ns;
    if (cal && cal->kind != CAL_NONE) {
        int64_t start, end;
        cal_window(cal, s->start, &start, &end);
        return end;
    }
    return s->start + p->period_ns;
}

static int64_t sliding_expire(const window_params_t *p, const window_state_t *s, int64_t now_ns)
{
    return s->curr > 0 ? s->start + 2 * p->period_ns : s->prev > 0 ? s->start + p->period_ns : now_ns;
}

void fixed_window_charge(const window_params_t *p, const cal_spec_t *cal, window_state_t *s, int64_t now_ns, int64_t n,
                         int64_t *expire_ns)
{
    fixed_roll(p, cal, s, now_ns);
    s->curr = over_cap(p, s->curr, n);
    *expire_ns = fixed_expire(p, cal, s, now_ns);
}

void fixed_window_refund(const window_params_t *p, const cal_spec_t *cal, window_state_t *s, int64_t now_ns, int64_t n,
                         int64_t window, int64_t *expire_ns)
{
    fixed_roll(p, cal, s, now_ns);
    if (window < 0 || window == s->start)
        s->curr -= n < s->curr ? n : s->curr;
    *expire_ns = fixed_expire(p, cal, s, now_ns);
}

void sliding_window_charge(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t n,
                           int64_t *expire_ns)
{
    sliding_roll(p, s, now_ns);
    s->curr = over_cap(p, s->curr, n);
    *expire_ns = sliding_expire(p, s, now_ns);
}

void sliding_window_refund(const window_params_t *p, window_state_t *s, int64_t now_ns, int64_t n, int64_t window,
                           int64_t *expire_ns)
{
    sliding_roll(p, s, now_ns);
    if (window < 0 || window == s->start)
        s->curr -= n < s->curr ? n : s->curr;
    else if (window == s->start - p->period_ns)
        s->prev -= n < s->prev ? n : s->prev;
    *expire_ns = sliding_expire(p, s, now_ns);
}
