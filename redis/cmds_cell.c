/* cmds_cell.c - redis-cell's command on the Redis protocol (redis_int.h):
 *
 *   CL.THROTTLE key max_burst count_per_period period [quantity]
 *                         CMD_CL_THROTTLE (POST /throttle's GCRA); redis-cell's
 *                         five integers and its "Cell error: ..." errors
 */
#include <string.h>

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

static const redis_cmd_t commands[] = {
    /* redis-cell checks its own arity (its usage error) */
    { "cl.throttle", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, cl_throttle_command, NULL },
};
REDIS_COMMANDS(cell);
