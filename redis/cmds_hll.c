/* cmds_hll.c - Redis's HyperLogLog commands on tally's uv sketches
 * (redis_int.h): PFADD, PFCOUNT, PFMERGE (CMD_PFADD, CMD_PFCOUNT,
 * CMD_PFMERGE).
 */
#include "cmd/uv.h"
#include "redis/redis_int.h"


static void not_hll(redis_conn_t *c)
{
    c->string_types = "counter bits throttle";
    c->string_err = "WRONGTYPE Key is not a valid HyperLogLog string value.";
}

static void pfadd_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    not_hll(c);
    if (!redis_items(c, cmd, 2))
        return;
    /* Redis takes any number of elements; a change (a journal record)
     * holds at most CMD_ITEMS_MAX: a longer PFADD is several, in order, each
     * durable on its own (adding an element twice changes nothing) */
    size_t n = cmd->argc - 2, updated = 0;
    for (size_t at = 0; at < n || at == 0; at += CMD_ITEMS_MAX) {
        size_t part = n - at < CMD_ITEMS_MAX ? n - at : CMD_ITEMS_MAX;
        cmd_pfadd_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
        a.items = cmd_items_of(c->ptrs + at, c->lens + at, NULL, part);
        cmd_uv_res_t r;
        if (!redis_run(c, &CMD_PFADD, &a, &r, NULL))
            return;
        updated |= r.updated;
        if (n == 0)
            break;
    }
    resp_reply_int(redis_conn_out(c), updated ? 1 : 0);
}

static void pfcount_command(redis_conn_t *c, const resp_cmd_t *cmd)
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

static void pfmerge_command(redis_conn_t *c, const resp_cmd_t *cmd)
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

static const redis_cmd_t commands[] = {
    { "pfadd", -2, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_FAST, "@write @hyperloglog @fast", 1, 1, 1, pfadd_command, NULL },
    { "pfcount", -2, REDIS_CF_READONLY, "@read @hyperloglog @slow", 1, -1, 1, pfcount_command, NULL },
    { "pfmerge", -2, REDIS_CF_WRITE | REDIS_CF_DENYOOM, "@write @hyperloglog @slow", 1, -1, 1, pfmerge_command, NULL },
};
REDIS_COMMANDS(hll);
