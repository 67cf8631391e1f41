/* cmds_throttle.c - the fixed window on the Redis protocol (redis_int.h),
 * with its calendar periods (core/calendar.h):
 *
 *   THROTTLE.FIXED_WINDOW key max_count period [QUANTITY n]
 *   THROTTLE.FIXED_WINDOW key max_count CALENDAR day|week|month|quarter|year
 *                         [TIME_ZONE zone] [WEEK_START monday..sunday] [ANCHOR_DAY 1..31] [QUANTITY n]
 *                         CMD_THROTTLE_FIXED_WINDOW (POST /throttle's fixed_window);
 *                         CL.THROTTLE's five integers: limited (0/1), limit,
 *                         remaining, retry_after (-1 when allowed), reset_after,
 *                         in seconds rounded up
 */
#include <string.h>
#include <strings.h>

#include "cmd/throttle.h"
#include "cmd/zone.h"
#include "redis/redis_int.h"

static bool word_is(const resp_arg_t *a, const char *w) { return a->len == strlen(w) && !strncasecmp(a->ptr, w, a->len); }

/* An argument for an error message: at most 64 bytes, up to a NUL. */
static int shown(const resp_arg_t *a)
{
    const char *z = memchr(a->ptr, '\0', a->len);
    size_t n = z ? (size_t)(z - a->ptr) : a->len;
    return (int)(n > 64 ? 64 : n);
}

static void fixed_window_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_throttle_item_t it = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .quantity = 1 };
    it.p.algo = THROTTLE_FIXED_WINDOW;
    long long max = 0, period = 0, v = 0;
    if (!redis_ll(&cmd->argv[2], &max) || max < 1) {
        redis_err(c, "ERR max_count must be an integer >= 1");
        return;
    }
    it.p.u.win.max_count = max;
    size_t i = 4;
    cal_spec_t *cal = &it.p.cal;
    const resp_arg_t *tz = NULL, *ws = NULL;
    bool anchor_given = false;
    if (word_is(&cmd->argv[3], "CALENDAR")) {
        if (cmd->argc < 5) {
            redis_err(c, "ERR syntax error: CALENDAR needs day, week, month, quarter or year");
            return;
        }
        cal->kind = (uint8_t)cal_kind_parse(cmd->argv[4].ptr, cmd->argv[4].len);
        if (!cal->kind) {
            redis_err(c, "ERR calendar must be day, week, month, quarter or year, not '%.*s'", shown(&cmd->argv[4]),
                      cmd->argv[4].ptr);
            return;
        }
        i = 5;
    } else if (!redis_ll(&cmd->argv[3], &period) || period < 1 || period > CMD_THROTTLE_MAX_PERIOD_S) {
        redis_err(c, "ERR period must be an integer between 1 and %lld seconds, or CALENDAR kind",
                  (long long)CMD_THROTTLE_MAX_PERIOD_S);
        return;
    }
    for (; i < cmd->argc; i += 2) {
        const resp_arg_t *opt = &cmd->argv[i];
        if (i + 1 >= cmd->argc) {
            redis_err(c, "ERR syntax error: '%.*s' needs a value", shown(opt), opt->ptr);
            return;
        }
        const resp_arg_t *val = &cmd->argv[i + 1];
        if (word_is(opt, "QUANTITY")) {
            if (!redis_ll(val, &v) || v < 0) {
                redis_err(c, "ERR quantity must be an integer >= 0");
                return;
            }
            it.quantity = v;
        } else if (cal->kind && word_is(opt, "TIME_ZONE")) {
            tz = val;
        } else if (cal->kind && word_is(opt, "WEEK_START")) {
            ws = val;
        } else if (cal->kind && word_is(opt, "ANCHOR_DAY")) {
            if (!redis_ll(val, &v) || v < 1 || v > 31) {
                redis_err(c, "ERR anchor_day must be an integer between 1 and 31");
                return;
            }
            cal->anchor_day = (uint8_t)v;
            anchor_given = true;
        } else {
            redis_err(c, "ERR syntax error: unknown option '%.*s'%s", shown(opt), opt->ptr,
                      cal->kind ? "" : " (TIME_ZONE, WEEK_START and ANCHOR_DAY go with CALENDAR)");
            return;
        }
    }
    if (!cal->kind) {
        it.p.u.win.period_ns = period * NS_PER_SEC;
    } else {
        bool anchored = cal->kind >= CAL_MONTH;
        if (ws && cal->kind != CAL_WEEK) {
            redis_err(c, "ERR week_start applies to the week calendar only");
            return;
        }
        if (anchor_given && !anchored) {
            redis_err(c, "ERR anchor_day applies to the month, quarter and year calendars only");
            return;
        }
        if (cal->kind == CAL_WEEK && !(cal->week_start = ws ? (uint8_t)cal_weekday_parse(ws->ptr, ws->len) : 1)) {
            redis_err(c, "ERR week_start must be monday .. sunday, not '%.*s'", shown(ws), ws->ptr);
            return;
        }
        if (anchored && !anchor_given)
            cal->anchor_day = 1;
        const char *why = NULL;
        if (!(cal->zone = cmd_zone_get(tz ? tz->ptr : "UTC", tz ? tz->len : 3, &why))) {
            redis_err(c, "ERR time_zone '%.*s' %s", tz ? shown(tz) : 3, tz ? tz->ptr : "UTC", why);
            return;
        }
        it.p.u.win.period_ns = cal_nominal_s((cal_kind_t)cal->kind) * NS_PER_SEC;
    }
    const char *field = NULL, *why = throttle_validate(&it.p, &field);
    if (why) {
        redis_err(c, "ERR %s %s", field, why);
        return;
    }
    cmd_throttle_res_t r;
    if (!redis_run(c, &CMD_THROTTLE_FIXED_WINDOW, &it, &r, NULL))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, 5);
    resp_reply_int(o, r.r.allowed ? 0 : 1);
    resp_reply_int(o, r.r.limit);
    resp_reply_int(o, r.r.remaining);
    resp_reply_int(o, r.r.allowed ? -1 : rl_ceil_div(r.r.retry_after_ns, NS_PER_SEC));
    resp_reply_int(o, rl_ceil_div(r.r.reset_after_ns, NS_PER_SEC));
}

static const redis_cmd_t commands[] = {
    { "throttle.fixed_window", -4, REDIS_CF_WRITE | REDIS_CF_DENYOOM, "@write", 1, 1, 1, fixed_window_command, NULL },
};
REDIS_COMMANDS(throttle);
