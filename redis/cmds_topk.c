/* cmds_topk.c - RedisBloom's Top-K commands (redis_int.h), with its
 * replies and its "TopK: ..." errors, RESP2 and RESP3:
 *
 *   TOPK.RESERVE key k [width depth decay]  CMD_TOPK_RESERVE  +OK
 *   TOPK.ADD key item [item ...]            CMD_TOPK_ADD      the items pushed out (nil: none)
 *   TOPK.INCRBY key item incr [item incr ...]  CMD_TOPK_INCRBY  the same
 *   TOPK.QUERY key item [item ...]          CMD_TOPK_QUERY    listed or not (1/0; booleans in RESP3)
 *   TOPK.COUNT key item [item ...]          CMD_TOPK_QUERY    the estimated counts
 *   TOPK.LIST key [WITHCOUNT]               CMD_TOPK_LIST     the list, largest first
 *   TOPK.INFO key                           CMD_TOPK_INFO     k, width, depth, decay (a map in RESP3)
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/keys_ops.h"
#include "cmd/topk.h"
#include "core/topk.h"
#include "redis/redis_int.h"

#define E_MISSING "TopK: key does not exist"       /* RedisBloom's GetKey error */
#define E_EXISTS "TopK: key already exists"         /* RedisBloom's create error */

static const redis_mod_keys_t keys = { "topk", E_MISSING, E_EXISTS, false };

/* RedisBloom's text, with the spaces its source's line continuation leaves */
#define E_INCREMENT                                                                                  \
    "TopK: increment must be an integer greater or equal to 0                            and smaller " \
    "or equal to 100,000"

static void answer(redis_conn_t *c, const cmd_err_t *e, bool creating)
{
    if (e->code == CMD_E__COUNT)
        return;
    if (e->code == CMD_E_NOT_FOUND)
        redis_err(c, "%s", E_MISSING);
    else if (creating && (e->code == CMD_E_EXISTS || e->code == CMD_E_WRONGTYPE))
        redis_err(c, "%s", E_EXISTS);
    else
        redis_answer_err(c, e);
}

static bool u32_arg(const resp_arg_t *a, uint32_t *v)
{
    long long x;
    if (!redis_ll(a, &x) || x < 1 || x > UINT32_MAX)
        return false;
    *v = (uint32_t)x;
    return true;
}

static void reserve_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3 && cmd->argc != 6) {
        redis_mod_arity(c, "topk.reserve");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    cmd_topk_reserve_args_t a = { .key = k->ptr, .klen = k->len, .width = TOPK_DEFAULT_WIDTH,
                                  .depth = TOPK_DEFAULT_DEPTH, .decay = TOPK_DEFAULT_DECAY };
    /* k past tally's TOPK_MAX_K (one answer's batch) is refused as an invalid k */
    if (!u32_arg(&cmd->argv[2], &a.k) || a.k > TOPK_MAX_K) {
        redis_mod_arg_error(c, &keys, k, true, "TopK: invalid k");
        return;
    }
    if (cmd->argc == 6) {
        if (!u32_arg(&cmd->argv[3], &a.width)) {
            redis_mod_arg_error(c, &keys, k, true, "TopK: invalid width");
            return;
        }
        if (!u32_arg(&cmd->argv[4], &a.depth)) {
            redis_mod_arg_error(c, &keys, k, true, "TopK: invalid depth");
            return;
        }
        if (!redis_double(&cmd->argv[5], &a.decay) || a.decay <= 0 || a.decay > 1) {
            redis_mod_arg_error(c, &keys, k, true, "TopK: invalid decay value. must be '<= 1' & '> 0'");
            return;
        }
    }
    cmd_topk_info_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_TOPK_RESERVE, &a, &r, &e))
        redis_ok(c);
    else
        answer(c, &e, true);
}

/* TOPK.ADD (incr false) and TOPK.INCRBY.  An increment of 0 adds nothing
 * (its item answers nil) and is not handed to the operation. */
static void add(redis_conn_t *c, const resp_cmd_t *cmd, bool incr)
{
    if (incr ? cmd->argc < 4 || cmd->argc % 2 == 1 : cmd->argc < 3) {
        redis_mod_arity(c, incr ? "topk.incrby" : "topk.add");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    size_t n = incr ? (cmd->argc - 2) / 2 : cmd->argc - 2, step = incr ? 2 : 1;
    const char **p = malloc(n * sizeof(*p));
    size_t *len = malloc(n * sizeof(*len)), *at = malloc(n * sizeof(*at));
    uint64_t *by = malloc(n * sizeof(*by));
    cmd_topk_item_t *out = calloc(n, sizeof(*out));
    if (!p || !len || !at || !by || !out) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        goto done;
    }
    size_t m = 0;   /* the items handed to the operation */
    for (size_t i = 0; i < n; i++) {
        long long v = 1;
        if (incr && (!redis_ll(&cmd->argv[3 + 2 * i], &v) || v < 0 || v > TOPK_MAX_INCREMENT)) {
            redis_mod_arg_error(c, &keys, k, false, E_INCREMENT);
            goto done;
        }
        at[i] = SIZE_MAX;
        if (v == 0)
            continue;
        at[i] = m;
        p[m] = cmd->argv[2 + step * i].ptr;
        len[m] = cmd->argv[2 + step * i].len;
        by[m++] = (uint64_t)v;
    }
    if (m > CMD_BATCH_MAX) {   /* a record holds at most CMD_BATCH_MAX items */
        redis_mod_arg_error(c, &keys, k, false,
                  incr ? "TopK: at most 10000 items in one TOPK.INCRBY" : "TopK: at most 10000 items in one TOPK.ADD");
        goto done;
    }
    cmd_err_t e;
    bool ok;
    if (m == 0) {
        /* nothing to add: the key is only looked at */
        int s = redis_mod_key_state(c, k, keys.type);
        if (s != 1) {
            if (s >= 0)
                redis_err(c, "%s", s == 0 ? E_MISSING : REDIS_ERR_WRONGTYPE);
            goto done;
        }
        ok = true;
    } else {
        cmd_topk_add_args_t a = { .key = k->ptr, .klen = k->len, .expelled = out };
        a.items = (cmd_batch_t){ .n = m, .p = p, .len = len, .by = incr ? by : NULL };
        ok = redis_run_keep(c, incr ? &CMD_TOPK_INCRBY : &CMD_TOPK_ADD, &a, NULL, &e);
        if (!ok)
            answer(c, &e, false);
    }
    if (ok) {
        resp_out_t *o = redis_conn_out(c);
        resp_reply_array(o, n);
        for (size_t i = 0; i < n; i++) {
            const cmd_topk_item_t *x = at[i] == SIZE_MAX ? NULL : &out[at[i]];
            if (x && x->p)
                resp_reply_bulk(o, x->p, x->len);
            else
                resp_reply_null(o);
        }
    }
done:
    for (size_t i = 0; out && i < n; i++)
        free(out[i].p);
    free(out);
    free(p);
    free(len);
    free(at);
    free(by);
}

static void add_command(redis_conn_t *c, const resp_cmd_t *cmd) { add(c, cmd, false); }
static void incrby_command(redis_conn_t *c, const resp_cmd_t *cmd) { add(c, cmd, true); }

/* TOPK.QUERY (counts false) and TOPK.COUNT. */
static void query(redis_conn_t *c, const resp_cmd_t *cmd, bool counts)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, counts ? "topk.count" : "topk.query");
        return;
    }
    if (!redis_items(c, cmd, 2))
        return;
    size_t n = cmd->argc - 2;
    cmd_topk_query_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    a.items = (cmd_batch_t){ .n = n, .p = c->ptrs, .len = c->lens };
    a.listed = malloc(n * sizeof(*a.listed));
    a.counts = malloc(n * sizeof(*a.counts));
    cmd_err_t e;
    if (!a.listed || !a.counts) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
    } else if (redis_run_keep(c, &CMD_TOPK_QUERY, &a, NULL, &e)) {
        resp_out_t *o = redis_conn_out(c);
        resp_reply_array(o, n);
        for (size_t i = 0; i < n; i++)
            if (counts)
                resp_reply_int(o, (long long)a.counts[i]);
            else
                resp_reply_bool(o, a.listed[i]);
    } else {
        answer(c, &e, false);
    }
    free(a.listed);
    free(a.counts);
}

static void query_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, false); }
static void count_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, true); }

static void list_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2 && cmd->argc != 3) {
        redis_mod_arity(c, "topk.list");
        return;
    }
    bool withcount = false;
    if (cmd->argc == 3) {
        /* RedisBloom compares the argument's length of "WITHCOUNT": any
         * prefix of it, the empty word included, is taken */
        const resp_arg_t *w = &cmd->argv[2];
        if (w->len > 9 || strncasecmp(w->ptr, "WITHCOUNT", w->len) != 0) {
            redis_err(c, "WITHCOUNT keyword expected");
            return;
        }
        withcount = true;
    }
    cmd_topk_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_topk_list_res_t r = { 0 };
    cmd_err_t e;
    if (!redis_run_keep(c, &CMD_TOPK_LIST, &a, &r, &e)) {
        answer(c, &e, false);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, r.n * (withcount ? 2 : 1));
    for (size_t i = 0; i < r.n; i++) {
        resp_reply_bulk(o, r.v[i].item, r.v[i].len);
        if (withcount)
            resp_reply_int(o, (long long)r.v[i].count);
    }
    cmd_topk_list_free(&r);
}

static void info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, "topk.info");
        return;
    }
    cmd_topk_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_topk_info_t r;
    cmd_err_t e;
    if (!redis_run_keep(c, &CMD_TOPK_INFO, &a, &r, &e)) {
        answer(c, &e, false);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    resp_reply_map(o, 4);
    redis_reply_field(o, "k", r.k);
    redis_reply_field(o, "width", r.width);
    redis_reply_field(o, "depth", r.depth);
    resp_reply_simple(o, "decay", 5);
    resp_reply_double(o, r.decay);
}

/* RedisBloom registers each with arity -1 (it checks its own), keys 1 1 1,
 * and ACL categories "<its> topk". */
static const redis_cmd_t commands[] = {
    { "topk.add", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @topk", 1, 1, 1, add_command, NULL },
    { "topk.count", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @topk", 1, 1, 1, count_command, NULL },
    { "topk.incrby", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @topk", 1, 1, 1, incrby_command, NULL },
    { "topk.info", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @fast @topk", 1, 1, 1, info_command, NULL },
    { "topk.list", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @topk", 1, 1, 1, list_command, NULL },
    { "topk.query", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @topk", 1, 1, 1, query_command, NULL },
    { "topk.reserve", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @fast @topk", 1, 1, 1, reserve_command, NULL },
};
REDIS_COMMANDS(topk);
