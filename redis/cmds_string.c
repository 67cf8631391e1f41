/* cmds_string.c - Redis's string commands on tally's counters and bit
 * strings (redis_int.h):
 *
 *   INCR, INCRBY, DECR, DECRBY    CMD_INCRBY on tally's counters
 *   GET                   CMD_KEY_INFO, then CMD_COUNTER_GET on a counter
 *                         or CMD_GET on a bit string
 */
#include <stdio.h>
#include <string.h>

#include "cmd/bits.h"
#include "cmd/counter.h"
#include "cmd/keys_ops.h"
#include "redis/redis_int.h"


static void incrby(redis_conn_t *c, const resp_cmd_t *cmd, int64_t by)
{
    cmd_incrby_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .by = by };
    c->string_types = "uv bits";
    c->string_err = REDIS_ERR_NOT_INT;
    cmd_counter_res_t r;
    if (redis_run(c, &CMD_INCRBY, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.value);
}

static void incr_command(redis_conn_t *c, const resp_cmd_t *cmd) { incrby(c, cmd, 1); }
static void decr_command(redis_conn_t *c, const resp_cmd_t *cmd) { incrby(c, cmd, -1); }

static void incrby_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long by;
    if (!redis_ll(&cmd->argv[2], &by))
        redis_err(c, REDIS_ERR_NOT_INT);
    else
        incrby(c, cmd, by);
}

static void decrby_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long by;
    if (!redis_ll(&cmd->argv[2], &by))
        redis_err(c, REDIS_ERR_NOT_INT);
    else if (by == INT64_MIN)
        redis_err(c, "ERR decrement would overflow");
    else
        incrby(c, cmd, -by);
}


/* ------------------------------------------------------------------------ */
/* GET                                                                      */
/* ------------------------------------------------------------------------ */

/* CMD_GET's bytes, answered as a bulk string under the key's lock. */
static void get_bytes(void *ud, const uint8_t *p, size_t n)
{
    resp_reply_bulk(redis_conn_out(ud), n ? (const void *)p : "", n);
}

static void get_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const resp_arg_t *k = &cmd->argv[1];
    cmd_key_info_res_t info;
    int f = redis_key_info(c, k, &info);
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
        cmd_bits_get_args_t a = { .key = k->ptr, .klen = k->len, .start = 0, .end = -1, .bytes = get_bytes, .ud = c,
                                  .strings = true };
        if (!redis_run(c, &CMD_GET, &a, NULL, &missing) && missing)
            resp_reply_null(o);
    } else {
        redis_err(c, "WRONGTYPE Operation against a key holding the wrong kind of value");
    }
}

#define W_STR REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_FAST, "@write @string @fast"
static const redis_cmd_t commands[] = {
    { "decr", 2, W_STR, 1, 1, 1, decr_command, NULL },
    { "decrby", 3, W_STR, 1, 1, 1, decrby_command, NULL },
    { "get", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@read @string @fast", 1, 1, 1, get_command, NULL },
    { "incr", 2, W_STR, 1, 1, 1, incr_command, NULL },
    { "incrby", 3, W_STR, 1, 1, 1, incrby_command, NULL },
};
REDIS_COMMANDS(string);
