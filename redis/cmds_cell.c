/* cmds_cell.c - redis-cell's command on the Redis protocol (redis_int.h):
 *
 *   CL.THROTTLE key max_burst count_per_period period [quantity]
 *                         CMD_CL_THROTTLE (POST /throttle's GCRA); redis-cell's
 *                         five integers and its "Cell error: ..." errors
 *
 * Reserve, settle, refund, probe (cmd/throttle.h) in the same style - GCRA
 * with CL.THROTTLE's parameters, its errors' words, durations in seconds:
 *
 *   CL.RESERVE key max_burst count_per_period period quantity [TTL seconds] [ONEXPIRY KEEP|REFUND]
 *                         THROTTLE.RESERVE: CL.THROTTLE's five integers and, sixth,
 *                         the reservation id (a bulk string; nil when limited)
 *   CL.SETTLE key id actual
 *                         THROTTLE.SETTLE: reserved, actual, limit, remaining, reset_after
 *   CL.REFUND key max_burst count_per_period period quantity
 *                         THROTTLE.REFUND: limit, remaining, reset_after
 *   CL.PROBE key max_burst count_per_period period [quantity]
 *                         THROTTLE.PROBE: CL.THROTTLE's five integers, nothing counted
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cmd/throttle.h"
#include "redis/redis_int.h"

#define NS_PER_SEC 1000000000LL

/* ------------------------------------------------------------------------ */

/* redis-cell reads its numbers with Rust's i64 parse: an optional sign,
 * decimal digits (leading zeros allowed), nothing else. */
static bool cell_i64(const resp_arg_t *a, int64_t *v)
{
    size_t i = 0, n = a->len;
    bool neg = false;
    if (n && (a->ptr[0] == '+' || a->ptr[0] == '-'))
        neg = a->ptr[i++] == '-';
    if (i == n)
        return false;
    unsigned long long x = 0, lim = neg ? (unsigned long long)INT64_MAX + 1 : (unsigned long long)INT64_MAX;
    for (; i < n; i++) {
        char ch = a->ptr[i];
        if (ch < '0' || ch > '9')
            return false;
        unsigned d = (unsigned)(ch - '0');
        if (x > (lim - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *v = neg ? (x == (unsigned long long)INT64_MAX + 1 ? INT64_MIN : -(int64_t)x) : (int64_t)x;
    return true;
}

static void cl_throttle_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 5 && cmd->argc != 6) {
        redis_err(c, "Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]");
        return;
    }
    int64_t v[4] = { 0, 0, 0, 1 };
    for (size_t i = 2; i < cmd->argc; i++)
        if (!cell_i64(&cmd->argv[i], &v[i - 2])) {
            const resp_arg_t *a = &cmd->argv[i];
            const char *z = memchr(a->ptr, '\0', a->len);
            redis_err(c, "Cell error: Couldn't parse as integer: %.*s", (int)(z ? (size_t)(z - a->ptr) : a->len),
                      a->ptr);
            return;
        }
    int64_t max_burst = v[0], count = v[1], period = v[2], quantity = v[3];
    if (count == 0 || period == 0) {
        redis_err(c, "Cell error: Zero rates are not supported");
        return;
    }
    const char *bad = max_burst < 0 ? "max_burst must be >= 0"
                      : count < 0   ? "count per period must be > 0"
                      : period < 0 || period > CMD_THROTTLE_MAX_PERIOD_S
                          ? "period must be between 1 and 2305843009 seconds"
                      : quantity < 0 ? "quantity must be >= 0"
                                     : NULL;
    if (bad) {
        redis_err(c, "Cell error: %s", bad);
        return;
    }
    cmd_throttle_item_t it = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .quantity = quantity };
    it.p.algo = THROTTLE_GCRA;
    it.p.u.gcra.max_burst = max_burst;
    it.p.u.gcra.count = count;
    it.p.u.gcra.period_ns = period * NS_PER_SEC;
    cmd_throttle_res_t r;
    if (!redis_run(c, &CMD_CL_THROTTLE, &it, &r, NULL))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, 5);
    resp_reply_int(o, r.r.allowed ? 0 : 1);
    resp_reply_int(o, r.r.limit);
    resp_reply_int(o, r.r.remaining);
    resp_reply_int(o, r.r.allowed ? -1 : rl_ceil_div(r.r.retry_after_ns, NS_PER_SEC));
    resp_reply_int(o, rl_ceil_div(r.r.reset_after_ns, NS_PER_SEC));
}

/* ------------------------------------------------------------------------ */
/* Reserve, settle, refund, probe                                           */
/* ------------------------------------------------------------------------ */

/* An argument as redis-cell reads its integers; "Cell error" naming it when not. */
static bool cell_arg(redis_conn_t *c, const resp_arg_t *a, int64_t *v)
{
    if (cell_i64(a, v))
        return true;
    const char *z = memchr(a->ptr, '\0', a->len);
    redis_err(c, "Cell error: Couldn't parse as integer: %.*s", (int)(z ? (size_t)(z - a->ptr) : a->len), a->ptr);
    return false;
}

/* argv[1..4] (+ argv[5], the quantity, when given) as a GCRA item. */
static bool cell_item(redis_conn_t *c, const resp_cmd_t *cmd, bool with_quantity, cmd_throttle_item_t *it)
{
    int64_t v[4] = { 0, 0, 0, 1 };
    for (size_t i = 2; i < (with_quantity ? 6u : 5u); i++)
        if (!cell_arg(c, &cmd->argv[i], &v[i - 2]))
            return false;
    if (v[1] == 0 || v[2] == 0) {
        redis_err(c, "Cell error: Zero rates are not supported");
        return false;
    }
    const char *bad = v[0] < 0 ? "max_burst must be >= 0"
                      : v[1] < 0 ? "count per period must be > 0"
                      : v[2] < 0 || v[2] > CMD_THROTTLE_MAX_PERIOD_S ? "period must be between 1 and 2305843009 seconds"
                      : v[3] < 0 ? "quantity must be >= 0"
                                 : NULL;
    if (bad) {
        redis_err(c, "Cell error: %s", bad);
        return false;
    }
    memset(it, 0, sizeof(*it));
    it->key = cmd->argv[1].ptr;
    it->klen = cmd->argv[1].len;
    it->quantity = v[3];
    it->p.algo = THROTTLE_GCRA;
    it->p.u.gcra = (gcra_params_t){ v[0], v[1], v[2] * NS_PER_SEC };
    const char *field, *why = throttle_validate(&it->p, &field);
    if (why) {
        redis_err(c, "Cell error: %s %s", field, why);
        return false;
    }
    return true;
}

static bool arg_is(const resp_arg_t *a, const char *word)
{
    return a->len == strlen(word) && strncasecmp(a->ptr, word, a->len) == 0;
}

static void reply_decision(redis_conn_t *c, const rl_result_t *r, bool with_id, uint64_t id)
{
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, with_id ? 6 : 5);
    resp_reply_int(o, r->allowed ? 0 : 1);
    resp_reply_int(o, r->limit);
    resp_reply_int(o, r->remaining);
    resp_reply_int(o, r->allowed ? -1 : rl_ceil_div(r->retry_after_ns, NS_PER_SEC));
    resp_reply_int(o, rl_ceil_div(r->reset_after_ns, NS_PER_SEC));
    if (!with_id)
        return;
    if (!r->allowed) {
        resp_reply_null(o);
        return;
    }
    char s[24];
    int n = snprintf(s, sizeof(s), "%llu", (unsigned long long)id);
    resp_reply_bulk(o, s, (size_t)n);
}

static void cl_reserve_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_throttle_reserve_args_t a = { .ttl_ns = 60 * NS_PER_SEC, .on_expiry = THROTTLE_EXPIRY_KEEP };
    if (cmd->argc < 6 || cmd->argc > 10 || cmd->argc % 2) {
        redis_err(c, "Cell error: Usage: cl.reserve <key> <max_burst> <count per period> <period> <quantity> "
                     "[TTL <seconds>] [ONEXPIRY KEEP|REFUND]");
        return;
    }
    if (!cell_item(c, cmd, true, &a.it))
        return;
    for (size_t i = 6; i + 1 < cmd->argc; i += 2) {
        const resp_arg_t *v = &cmd->argv[i + 1];
        int64_t ttl;
        if (arg_is(&cmd->argv[i], "TTL")) {
            if (!cell_arg(c, v, &ttl))
                return;
            if (ttl < 1 || ttl > THROTTLE_MAX_RESERVE_TTL_NS / NS_PER_SEC) {
                redis_err(c, "Cell error: TTL must be between 1 and 604800 seconds");
                return;
            }
            a.ttl_ns = ttl * NS_PER_SEC;
        } else if (arg_is(&cmd->argv[i], "ONEXPIRY") && (arg_is(v, "KEEP") || arg_is(v, "REFUND"))) {
            a.on_expiry = arg_is(v, "REFUND") ? THROTTLE_EXPIRY_REFUND : THROTTLE_EXPIRY_KEEP;
        } else {
            redis_err(c, "Cell error: unknown option %.*s (TTL <seconds> or ONEXPIRY KEEP|REFUND)",
                      (int)(cmd->argv[i].len > 64 ? 64 : cmd->argv[i].len), cmd->argv[i].ptr);
            return;
        }
    }
    cmd_throttle_reserve_res_t r;
    if (redis_run(c, &CMD_THROTTLE_RESERVE, &a, &r, NULL))
        reply_decision(c, &r.r, true, r.id);
}

static void cl_settle_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 4) {
        redis_err(c, "Cell error: Usage: cl.settle <key> <reservation id> <actual>");
        return;
    }
    int64_t id, actual;
    if (!cell_arg(c, &cmd->argv[2], &id) || !cell_arg(c, &cmd->argv[3], &actual))
        return;
    if (id <= 0 || actual < 0) {
        redis_err(c, "Cell error: %s", id <= 0 ? "reservation id must be > 0" : "actual must be >= 0");
        return;
    }
    cmd_throttle_settle_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, (uint64_t)id, actual };
    cmd_throttle_settle_res_t r;
    if (!redis_run(c, &CMD_THROTTLE_SETTLE, &a, &r, NULL))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, 5);
    resp_reply_int(o, r.reserved);
    resp_reply_int(o, actual);
    resp_reply_int(o, r.r.limit);
    resp_reply_int(o, r.r.remaining);
    resp_reply_int(o, rl_ceil_div(r.r.reset_after_ns, NS_PER_SEC));
}

static void cl_refund_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 6) {
        redis_err(c, "Cell error: Usage: cl.refund <key> <max_burst> <count per period> <period> <quantity>");
        return;
    }
    cmd_throttle_item_t it;
    cmd_throttle_res_t r;
    if (!cell_item(c, cmd, true, &it) || !redis_run(c, &CMD_THROTTLE_REFUND, &it, &r, NULL))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, 3);
    resp_reply_int(o, r.r.limit);
    resp_reply_int(o, r.r.remaining);
    resp_reply_int(o, rl_ceil_div(r.r.reset_after_ns, NS_PER_SEC));
}

static void cl_probe_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 5 && cmd->argc != 6) {
        redis_err(c, "Cell error: Usage: cl.probe <key> <max_burst> <count per period> <period> [<quantity>]");
        return;
    }
    cmd_throttle_item_t it;
    cmd_throttle_res_t r;
    if (cell_item(c, cmd, cmd->argc == 6, &it) && redis_run(c, &CMD_THROTTLE_PROBE, &it, &r, NULL))
        reply_decision(c, &r.r, false, 0);
}

static const redis_cmd_t commands[] = {
    /* redis-cell checks its own arity (its usage error) */
    { "cl.throttle", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, cl_throttle_command, NULL },
    { "cl.reserve", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, cl_reserve_command, NULL },
    { "cl.settle", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, cl_settle_command, NULL },
    { "cl.refund", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, cl_refund_command, NULL },
    { "cl.probe", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 1, 1, 1, cl_probe_command, NULL },
};
REDIS_COMMANDS(cell);
