/* cmds_lease.c - concurrency leases on the Redis protocol (redis_int.h;
 * cmd/lease.h has the operations, docs/redis.md the replies):
 *
 *   LEASE.ACQUIRE key limit ttl_ms  CMD_LEASE_ACQUIRE: [1, id, remaining, ttl_ms] granted,
 *                                   [0, nil, remaining, retry_after_ms] refused
 *   LEASE.RELEASE key id            CMD_LEASE_RELEASE: 1 released, 0 no live lease
 *   LEASE.RENEW key id ttl_ms       CMD_LEASE_RENEW: 1 renewed, 0 no live lease
 *   LEASE.INFO key                  CMD_LEASE_INFO: limit, active, remaining,
 *                                   next_expiry_ms, reset_after_ms (a map)
 *
 * The id is the 16 hexadecimal digits of POST /lease/{key}: a lease taken
 * over one protocol is released over the other.
 */
#include <string.h>

#include "cmd/lease.h"
#include "core/lease.h"
#include "redis/redis_int.h"

static bool arg_range(redis_conn_t *c, const resp_arg_t *a, const char *name, long long max, int64_t *v)
{
    long long x;
    if (!redis_ll(a, &x)) {
        redis_err(c, "ERR value is not an integer or out of range");
        return false;
    }
    if (x < 1 || x > max) {
        redis_err(c, "ERR %s must be between 1 and %lld", name, max);
        return false;
    }
    *v = x;
    return true;
}

static bool arg_id(redis_conn_t *c, const resp_arg_t *a, uint64_t *id)
{
    if (!cmd_lease_id_parse(a->ptr, a->len, id)) {
        redis_err(c, "ERR invalid lease id: 16 hexadecimal digits, as LEASE.ACQUIRE answered");
        return false;
    }
    return true;
}

static void acquire_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_lease_acquire_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, 0, 0 };
    if (!arg_range(c, &cmd->argv[2], "limit", LEASE_MAX_LIMIT, &a.limit) ||
        !arg_range(c, &cmd->argv[3], "ttl_ms", LEASE_MAX_TTL_MS, &a.ttl_ms))
        return;
    cmd_lease_res_t r;
    if (!redis_run(c, &CMD_LEASE_ACQUIRE, &a, &r, NULL))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, 4);
    resp_reply_int(o, r.ok);
    if (r.ok) {
        char id[17];
        cmd_lease_id_format(r.id, id);
        resp_reply_bulk(o, id, 16);
    } else {
        resp_reply_null(o);
    }
    resp_reply_int(o, r.remaining);
    resp_reply_int(o, r.ok ? r.ttl_ms : r.retry_after_ms);
}

static void release_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_lease_id_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, 0, 0 };
    if (!arg_id(c, &cmd->argv[2], &a.id))
        return;
    cmd_lease_res_t r;
    if (redis_run(c, &CMD_LEASE_RELEASE, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.ok);
}

static void renew_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_lease_id_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, 0, 0 };
    if (!arg_id(c, &cmd->argv[2], &a.id) || !arg_range(c, &cmd->argv[3], "ttl_ms", LEASE_MAX_TTL_MS, &a.ttl_ms))
        return;
    cmd_lease_res_t r;
    if (redis_run(c, &CMD_LEASE_RENEW, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.ok);
}

static void info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_lease_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_lease_res_t r;
    if (!redis_run(c, &CMD_LEASE_INFO, &a, &r, NULL))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_map(o, 5);
    redis_reply_field(o, "limit", r.limit);
    redis_reply_field(o, "active", r.active);
    redis_reply_field(o, "remaining", r.remaining);
    redis_reply_field(o, "next_expiry_ms", r.next_expiry_ms);
    redis_reply_field(o, "reset_after_ms", r.reset_after_ms);
}

static const redis_cmd_t commands[] = {
    { "lease.acquire", 4, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_FAST, "@write @fast", 1, 1, 1, acquire_command, NULL },
    { "lease.info", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@read @fast", 1, 1, 1, info_command, NULL },
    { "lease.release", 3, REDIS_CF_WRITE | REDIS_CF_FAST, "@write @fast", 1, 1, 1, release_command, NULL },
    { "lease.renew", 4, REDIS_CF_WRITE | REDIS_CF_FAST, "@write @fast", 1, 1, 1, renew_command, NULL },
};
REDIS_COMMANDS(lease);
