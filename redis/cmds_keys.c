/* cmds_keys.c - Redis's generic key commands on every type of tally's
 * (redis_int.h):
 *
 *   DEL, UNLINK, EXISTS, TYPE, TTL, PTTL, EXPIRE, PEXPIRE, EXPIREAT,
 *   PEXPIREAT, PERSIST    CMD_DEL, CMD_KEY_INFO, CMD_PEXPIRE, CMD_PERSIST
 */
#include <string.h>

#include "cmd/keys_ops.h"
#include "redis/redis_int.h"


static void del_command(redis_conn_t *c, const resp_cmd_t *cmd)
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
int redis_key_info(redis_conn_t *c, const resp_arg_t *k, cmd_key_info_res_t *info)
{
    cmd_key_args_t a = { .key = k->ptr, .klen = k->len };
    bool missing;
    if (redis_run(c, &CMD_KEY_INFO, &a, info, &missing))
        return 1;
    return missing ? 0 : -1;
}

static void exists_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long n = 0;
    for (size_t i = 1; i < cmd->argc; i++) {
        cmd_key_info_res_t info;
        int f = redis_key_info(c, &cmd->argv[i], &info);
        if (f < 0)
            return;
        n += f;
    }
    resp_reply_int(redis_conn_out(c), n);
}

static void ttl(redis_conn_t *c, const resp_cmd_t *cmd, bool ms)
{
    cmd_key_info_res_t info;
    int f = redis_key_info(c, &cmd->argv[1], &info);
    if (f < 0)
        return;
    long long t = f == 0 ? -2 : info.ttl_ms < 0 ? -1 : ms ? info.ttl_ms : (info.ttl_ms + 500) / 1000;
    resp_reply_int(redis_conn_out(c), t);
}

static void ttl_command(redis_conn_t *c, const resp_cmd_t *cmd) { ttl(c, cmd, false); }
static void pttl_command(redis_conn_t *c, const resp_cmd_t *cmd) { ttl(c, cmd, true); }

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
        redis_err(c, REDIS_ERR_NOT_INT);
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

static void expire_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, false, false); }
static void pexpire_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, true, false); }
static void expireat_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, false, true); }
static void pexpireat_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, true, true); }

static void persist_command(redis_conn_t *c, const resp_cmd_t *cmd)
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

static void type_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_key_info_res_t info;
    int f = redis_key_info(c, &cmd->argv[1], &info);
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

#define KS_W "@keyspace @write"
static const redis_cmd_t commands[] = {
    { "del", -2, REDIS_CF_WRITE, KS_W " @slow", 1, -1, 1, del_command, NULL },
    { "exists", -2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, -1, 1, exists_command, NULL },
    { "expire", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, expire_command, NULL },
    { "expireat", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, expireat_command, NULL },
    { "persist", 2, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, persist_command, NULL },
    { "pexpire", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, pexpire_command, NULL },
    { "pexpireat", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, pexpireat_command, NULL },
    { "pttl", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, 1, 1, pttl_command, NULL },
    { "ttl", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, 1, 1, ttl_command, NULL },
    { "type", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, 1, 1, type_command, NULL },
    { "unlink", -2, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, -1, 1, del_command, NULL },
};
REDIS_COMMANDS(keys);
