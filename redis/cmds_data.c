/* cmds_data.c - the data commands of the Redis protocol (redis_int.h):
 * each reads argv into the typed arguments the HTTP adapter builds for the
 * same operation, runs it (redis_run) and answers as Redis does.
 *
 *   CL.THROTTLE key max_burst count_per_period period [quantity]
 *                         CMD_CL_THROTTLE (POST /throttle's GCRA); redis-cell's
 *                         five integers and its "Cell error: ..." errors
 *   INCR, INCRBY, DECR, DECRBY    CMD_INCRBY on tally's counters
 *   PFADD, PFCOUNT, PFMERGE       CMD_PFADD, CMD_PFCOUNT, CMD_PFMERGE
 *   DEL, UNLINK, EXISTS, TYPE, TTL, PTTL, EXPIRE, PEXPIRE, EXPIREAT,
 *   PEXPIREAT, PERSIST    CMD_DEL, CMD_KEY_INFO, CMD_PEXPIRE, CMD_PERSIST
 *   GET                   CMD_KEY_INFO, then CMD_COUNTER_GET on a counter
 *                         or CMD_GET on a bit string
 */
#include <stdio.h>
#include <string.h>

#include "cmd/bits.h"
#include "cmd/counter.h"
#include "cmd/keys_ops.h"
#include "cmd/throttle.h"
#include "cmd/uv.h"
#include "redis/redis_int.h"

#define NS_PER_SEC 1000000000LL
#define ERR_NOT_INT "ERR value is not an integer or out of range"

/* ------------------------------------------------------------------------ */
/* CL.THROTTLE                                                              */
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

void redis_cl_throttle(redis_conn_t *c, const resp_cmd_t *cmd)
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
/* Counters                                                                 */
/* ------------------------------------------------------------------------ */

static void incrby(redis_conn_t *c, const resp_cmd_t *cmd, int64_t by)
{
    cmd_incrby_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .by = by };
    c->string_types = "uv bits";
    c->string_err = ERR_NOT_INT;
    cmd_counter_res_t r;
    if (redis_run(c, &CMD_INCRBY, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.value);
}

void redis_incr(redis_conn_t *c, const resp_cmd_t *cmd) { incrby(c, cmd, 1); }
void redis_decr(redis_conn_t *c, const resp_cmd_t *cmd) { incrby(c, cmd, -1); }

void redis_incrby(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long by;
    if (!redis_ll(&cmd->argv[2], &by))
        redis_err(c, ERR_NOT_INT);
    else
        incrby(c, cmd, by);
}

void redis_decrby(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long by;
    if (!redis_ll(&cmd->argv[2], &by))
        redis_err(c, ERR_NOT_INT);
    else if (by == INT64_MIN)
        redis_err(c, "ERR decrement would overflow");
    else
        incrby(c, cmd, -by);
}

/* ------------------------------------------------------------------------ */
/* HyperLogLog                                                              */
/* ------------------------------------------------------------------------ */

static void not_hll(redis_conn_t *c)
{
    c->string_types = "counter bits throttle";
    c->string_err = "WRONGTYPE Key is not a valid HyperLogLog string value.";
}

void redis_pfadd(redis_conn_t *c, const resp_cmd_t *cmd)
{
    not_hll(c);
    if (!redis_items(c, cmd, 2))
        return;
    cmd_pfadd_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    a.items = cmd_items_of(c->ptrs, c->lens, NULL, cmd->argc - 2);
    cmd_uv_res_t r;
    if (redis_run(c, &CMD_PFADD, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.updated ? 1 : 0);
}

void redis_pfcount(redis_conn_t *c, const resp_cmd_t *cmd)
{
    not_hll(c);
    if (!redis_items(c, cmd, 2))
        return;
    cmd_pfcount_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    a.unions = cmd_items_of(c->ptrs, c->lens, NULL, cmd->argc - 2);
    cmd_uv_res_t r;
    if (redis_run(c, &CMD_PFCOUNT, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), (long long)r.count);
}

void redis_pfmerge(redis_conn_t *c, const resp_cmd_t *cmd)
{
    not_hll(c);
    cmd_uv_res_t r;
    if (cmd->argc == 2) {
        /* PFMERGE dest alone: dest merged with itself, created empty when
         * missing - what PFADD dest does */
        cmd_pfadd_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
        a.items = cmd_items_of(NULL, NULL, NULL, 0);
        if (redis_run(c, &CMD_PFADD, &a, &r, NULL))
            redis_ok(c);
        return;
    }
    if (!redis_items(c, cmd, 2))
        return;
    cmd_pfmerge_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    a.sources = cmd_items_of(c->ptrs, c->lens, NULL, cmd->argc - 2);
    if (redis_run(c, &CMD_PFMERGE, &a, &r, NULL))
        redis_ok(c);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

void redis_del(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long n = 0;
    for (size_t i = 1; i < cmd->argc; i++) {
        cmd_del_args_t a = { .key = cmd->argv[i].ptr, .klen = cmd->argv[i].len };
        cmd_keys_res_t r;
        bool missing;
        if (redis_run(c, &CMD_DEL, &a, &r, &missing))
            n += r.done;
        else if (!missing)
            return;
    }
    resp_reply_int(redis_conn_out(c), n);
}

/* KEY.INFO of argv[i]: 1 with *info, 0 missing, -1 answered an error. */
static int key_info(redis_conn_t *c, const resp_arg_t *k, cmd_key_info_res_t *info)
{
    cmd_key_args_t a = { .key = k->ptr, .klen = k->len };
    bool missing;
    if (redis_run(c, &CMD_KEY_INFO, &a, info, &missing))
        return 1;
    return missing ? 0 : -1;
}

void redis_exists(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long n = 0;
    for (size_t i = 1; i < cmd->argc; i++) {
        cmd_key_info_res_t info;
        int f = key_info(c, &cmd->argv[i], &info);
        if (f < 0)
            return;
        n += f;
    }
    resp_reply_int(redis_conn_out(c), n);
}

static void ttl(redis_conn_t *c, const resp_cmd_t *cmd, bool ms)
{
    cmd_key_info_res_t info;
    int f = key_info(c, &cmd->argv[1], &info);
    if (f < 0)
        return;
    long long t = f == 0 ? -2 : info.ttl_ms < 0 ? -1 : ms ? info.ttl_ms : (info.ttl_ms + 500) / 1000;
    resp_reply_int(redis_conn_out(c), t);
}

void redis_ttl(redis_conn_t *c, const resp_cmd_t *cmd) { ttl(c, cmd, false); }
void redis_pttl(redis_conn_t *c, const resp_cmd_t *cmd) { ttl(c, cmd, true); }

/* EXPIRE, PEXPIRE (at: false, a TTL) and EXPIREAT, PEXPIREAT (at: true, a
 * Unix time): Redis's checks in its order, then PEXPIRE's operation with
 * the TTL left, or DEL for a time not after now. */
static void expire(redis_conn_t *c, const resp_cmd_t *cmd, bool ms, bool at)
{
    static const char *const names[2][2] = { { "expire", "pexpire" }, { "expireat", "pexpireat" } };
    static const char *const upper[2][2] = { { "EXPIRE", "PEXPIRE" }, { "EXPIREAT", "PEXPIREAT" } };
    const char *name = names[at][ms];
    if (cmd->argc > 3) {
        redis_err(c, "ERR tally does not take %s's options (NX, XX, GT, LT) yet", upper[at][ms]);
        return;
    }
    long long v;
    if (!redis_ll(&cmd->argv[2], &v)) {
        redis_err(c, ERR_NOT_INT);
        return;
    }
    if (!ms && (v > INT64_MAX / 1000 || v < INT64_MIN / 1000)) {
        redis_err(c, "ERR invalid expire time in '%s' command", name);
        return;
    }
    int64_t when_ms = ms ? v : v * 1000;
    int64_t now_ms = c->cfg->hooks.now_ns() / 1000000;
    /* the TTL from now (an absolute time before the epoch's start - now
     * counts as in the past) */
    int64_t ttl_ms = !at ? when_ms : when_ms < INT64_MIN + now_ms ? -1 : when_ms - now_ms;
    const resp_arg_t *k = &cmd->argv[1];
    bool missing;
    cmd_keys_res_t r;
    if (ttl_ms <= 0) {   /* a time in the past deletes the key, as Redis does */
        cmd_del_args_t a = { .key = k->ptr, .klen = k->len };
        if (redis_run(c, &CMD_DEL, &a, &r, &missing) || missing)
            resp_reply_int(redis_conn_out(c), !missing && r.done);
        return;
    }
    if (ttl_ms > INT64_MAX / 2 - now_ms - 1000) {   /* cmd/keys_ops.h's bound, with room for the clock */
        redis_err(c, "ERR invalid expire time in '%s' command", name);
        return;
    }
    cmd_pexpire_args_t a = { .key = k->ptr, .klen = k->len, .ttl_ms = ttl_ms };
    if (redis_run(c, &CMD_PEXPIRE, &a, &r, &missing) || missing)
        resp_reply_int(redis_conn_out(c), missing ? 0 : 1);
}

void redis_expire(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, false, false); }
void redis_pexpire(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, true, false); }
void redis_expireat(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, false, true); }
void redis_pexpireat(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, true, true); }

void redis_persist(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_key_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    cmd_keys_res_t r;
    bool missing;
    if (redis_run(c, &CMD_PERSIST, &a, &r, &missing) || missing)
        resp_reply_int(redis_conn_out(c), !missing && r.done);
}

/* What Redis's TYPE names each of tally's types: Redis keeps counters, bit
 * strings, HyperLogLogs and redis-cell's state in strings, geo sets in
 * sorted sets; the probabilistic types and time series are the names
 * RedisBloom's and RedisTimeSeries' module types register. */
static const struct {
    const char *tally, *redis;
} redis_types[] = {
    { "counter", "string" },    { "bits", "string" },       { "uv", "string" },
    { "throttle", "string" },   { "geo", "zset" },          { "bloom", "MBbloom--" },
    { "cuckoo", "MBbloomCF" },  { "cms", "CMSk-TYPE" },     { "topk", "TopK-TYPE" },
    { "tdigest", "TDIS-TYPE" }, { "ts", "TSDB-TYPE" },
};

void redis_type(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_key_info_res_t info;
    int f = key_info(c, &cmd->argv[1], &info);
    if (f < 0)
        return;
    const char *t = "none";
    if (f) {
        t = info.type;   /* a type of tally's own (activity): its name */
        for (size_t i = 0; i < sizeof(redis_types) / sizeof(redis_types[0]); i++)
            if (strcmp(redis_types[i].tally, info.type) == 0)
                t = redis_types[i].redis;
    }
    resp_reply_simple(redis_conn_out(c), t, strlen(t));
}

/* CMD_GET's bytes, answered as a bulk string under the key's lock. */
static void get_bytes(void *ud, const uint8_t *p, size_t n)
{
    resp_reply_bulk(redis_conn_out(ud), n ? (const void *)p : "", n);
}

void redis_get(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const resp_arg_t *k = &cmd->argv[1];
    cmd_key_info_res_t info;
    int f = key_info(c, k, &info);
    if (f < 0)
        return;
    resp_out_t *o = redis_conn_out(c);
    if (f == 0) {
        resp_reply_null(o);
        return;
    }
    bool missing;
    if (strcmp(info.type, "counter") == 0) {
        cmd_counter_get_args_t a = { .key = k->ptr, .klen = k->len };
        cmd_counter_res_t r;
        if (!redis_run(c, &CMD_COUNTER_GET, &a, &r, NULL))
            return;
        if (r.ttl_ms == -2) {   /* deleted since KEY.INFO */
            resp_reply_null(o);
            return;
        }
        char num[24];
        int n = snprintf(num, sizeof(num), "%lld", (long long)r.value);
        resp_reply_bulk(o, num, (size_t)n);
    } else if (strcmp(info.type, "bits") == 0) {
        cmd_bits_get_args_t a = { .key = k->ptr, .klen = k->len, .start = 0, .end = -1, .bytes = get_bytes, .ud = c };
        if (!redis_run(c, &CMD_GET, &a, NULL, &missing) && missing)
            resp_reply_null(o);
    } else {
        redis_err(c, "WRONGTYPE Operation against a key holding the wrong kind of value");
    }
}
