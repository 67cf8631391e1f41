/* cmds_cuckoo.c - RedisBloom's Cuckoo filter commands on the Redis
 * protocol (redis_int.h), with RedisBloom 2.6's replies and error texts,
 * RESP2 and RESP3, over the operations of cmd/cuckoo.h:
 *
 *   CF.RESERVE key capacity [BUCKETSIZE n] [MAXITERATIONS n] [EXPANSION n]   CMD_CF_RESERVE
 *   CF.ADD key item / CF.ADDNX key item                                        CMD_CF_INSERT
 *   CF.INSERT / CF.INSERTNX key [CAPACITY n] [NOCREATE] ITEMS item...          CMD_CF_INSERT
 *   CF.EXISTS key item / CF.MEXISTS key item...                                CMD_CF_EXISTS / CMD_CF_MEXISTS
 *   CF.DEL key item                                                            CMD_CF_DEL
 *   CF.COUNT key item                                                          CMD_CF_COUNT
 *   CF.INFO key                                                                CMD_CF_INFO
 *   CF.COMPACT key                                                             CMD_CF_COMPACT
 *   CF.SCANDUMP key iterator / CF.LOADCHUNK key iterator data                  CMD_CF_SCANDUMP / CMD_CF_LOADCHUNK
 *
 * As RedisBloom: arity -1 and the module's own arity errors; RESP3 answers
 * booleans for CF.ADD, CF.ADDNX, CF.INSERT, CF.EXISTS, CF.MEXISTS and
 * CF.DEL, integers for CF.INSERTNX and CF.COUNT; CF.INFO a map.
 *
 * CF.INSERT's CAPACITY, NOCREATE and its partial batches (-1 for an item
 * that finds no room, the others kept) are CMD_CF_INSERT's options; HTTP's
 * batches are all or nothing.  RedisBloom checks the 32 sub-filters limit
 * once per command ("Maximum expansions reached") and may then grow past
 * it; tally also checks each item: one that would need a 33rd answers -1.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/cuckoo.h"
#include "redis/redis_int.h"

#define CF_HEADER_LEN 38   /* RedisBloom's CFHeader */

/* The filter's info: 1 with *in, 0 when the key is missing, -1 when an
 * error was answered (WRONGTYPE, admission). */
static int cf_lookup(redis_conn_t *c, const resp_arg_t *key, cuckoo_info_t *in)
{
    cmd_cf_key_args_t a = { key->ptr, key->len };
    cmd_cf_info_res_t r;
    cmd_err_t e;
    if (redis_run_handled(c, &CMD_CF_INFO, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e)) {
        *in = r.info;
        return 1;
    }
    if (e.code == CMD_E_NOT_FOUND)
        return 0;
    redis_mod_status_err(c, &e);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* CF.RESERVE                                                               */
/* ------------------------------------------------------------------------ */

/* An option's value (RedisBloom reads the word after it). */
static bool option(redis_conn_t *c, const resp_cmd_t *cmd, const char *name, long long lo, long long hi,
                   long long *v)
{
    long at = redis_word_index(cmd, name);
    if (at == -1)
        return true;
    if (at + 1 >= (long)cmd->argc || !redis_ll(&cmd->argv[at + 1], v)) {
        redis_err(c, "Couldn't parse %s", name);
        return false;
    }
    if (*v < lo || *v > hi) {
        redis_err(c, "%s: value must be an integer between %lld and %lld, inclusive.", name, lo, hi);
        return false;
    }
    return true;
}

/* Creates the filter; false when an error was answered. */
static bool cf_create(redis_conn_t *c, const resp_arg_t *key, long long cap, long long bs, long long mi, long long ex)
{
    cmd_cf_reserve_args_t a = { key->ptr, key->len,
                                { (uint64_t)cap, (uint32_t)bs, (uint32_t)mi, (uint32_t)ex, CUCKOO_DEFAULT_FP_BITS } };
    const char *field;
    cmd_cf_res_t r;
    cmd_err_t e;
    if (cuckoo_validate(&a.p, 0, &field)) {
        /* larger than tally builds: RedisBloom's answer when the allocation
         * fails - after the key's own checks */
        cuckoo_info_t in;
        int st = cf_lookup(c, key, &in);
        if (st == 1)
            redis_err(c, "ERR item exists");
        else if (st == 0)
            redis_err(c, "ERR Insufficient memory to create filter");
        return false;
    }
    if (redis_run_handled(c, &CMD_CF_RESERVE, &a, &r, REDIS_H_EXISTS | REDIS_H_WRONGTYPE, &e))
        return true;
    redis_mod_status_err(c, &e);
    return false;
}

static void cf_reserve_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3 || cmd->argc % 2 == 0) {
        redis_mod_arity(c, "cf.reserve");
        return;
    }
    long long cap, mi = CUCKOO_DEFAULT_MAX_ITERATIONS, bs = CUCKOO_DEFAULT_BUCKET_SIZE, ex = CUCKOO_DEFAULT_EXPANSION;
    if (!redis_ll(&cmd->argv[2], &cap)) {
        redis_err(c, "Bad capacity");
        return;
    }
    if (!option(c, cmd, "MAXITERATIONS", 1, CUCKOO_MAX_ITERATIONS, &mi) ||
        !option(c, cmd, "BUCKETSIZE", 1, CUCKOO_MAX_BUCKET_SIZE, &bs) ||
        !option(c, cmd, "EXPANSION", 0, CUCKOO_MAX_EXPANSION, &ex))
        return;
    if (bs * 2 > cap) {
        redis_err(c, "Capacity must be at least (BucketSize * 2)");
        return;
    }
    if (cf_create(c, &cmd->argv[1], cap, bs, mi, ex))
        redis_ok(c);
}

/* ------------------------------------------------------------------------ */
/* CF.ADD, CF.ADDNX, CF.INSERT, CF.INSERTNX                                 */
/* ------------------------------------------------------------------------ */

/* One item's answer: RESP3 booleans except for CF.INSERTNX; -1 (RESP3
 * CF.INSERT: false) for an item that found no room. */
static void add_answer(redis_conn_t *c, bool nx, bool multi, int v)
{
    resp_out_t *o = redis_conn_out(c);
    if (o->proto == 3 && !(nx && multi) && v >= 0)
        resp_reply_bool(o, v == 1);
    else if (o->proto == 3 && !nx && v < 0)
        resp_reply_bool(o, false);
    else
        resp_reply_int(o, v);
}

/* cfInsertCommon on argv[from..): RedisBloom's rules are the operation's
 * partial batch (an item without room is skipped and answered -1; a
 * filter that has its 32 sub-filters refuses the command). */
static void cf_add_items(redis_conn_t *c, const resp_cmd_t *cmd, size_t from, bool nx, bool multi, bool nocreate,
                         uint64_t capacity)
{
    size_t n = cmd->argc - from;
    if (!redis_items(c, cmd, from))
        return;
    bool *added = calloc(2 * n, sizeof(*added));
    if (!added) {
        redis_err(c, REDIS_ERR_OOM);
        return;
    }
    cmd_cf_items_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, cmd_items_of(c->ptrs, c->lens, NULL, n), nx, added,
                              nocreate, capacity, true, added + n };
    cmd_cf_res_t r;
    cmd_err_t e;
    resp_out_t *o = redis_conn_out(c);
    if (redis_run_handled(c, &CMD_CF_INSERT, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE | REDIS_H_OOM, &e)) {
        if (!multi && added[n]) {
            redis_err(c, "Filter is full");
        } else {
            if (multi)
                resp_reply_array(o, n);
            for (size_t i = 0; i < n; i++)
                add_answer(c, nx, multi, added[n + i] ? -1 : added[i]);
        }
    } else if (e.code == CMD_E_OUT_OF_MEMORY && strncmp(e.message, "maximum expansions reached", 26) == 0) {
        redis_err(c, "Maximum expansions reached");
    } else if (e.code == CMD_E_OUT_OF_MEMORY) {
        redis_err(c, REDIS_ERR_OOM);
    } else {
        redis_mod_status_err(c, &e);
    }
    free(added);
}

static void cf_add_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "cf.add");
        return;
    }
    cf_add_items(c, cmd, 2, false, false, false, 0);
}

static void cf_addnx_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "cf.addnx");
        return;
    }
    cf_add_items(c, cmd, 2, true, false, false, 0);
}

static void cf_insert(redis_conn_t *c, const resp_cmd_t *cmd, bool nx)
{
    const char *name = nx ? "cf.insertnx" : "cf.insert";
    if (cmd->argc < 4) {
        redis_mod_arity(c, name);
        return;
    }
    long long cap = CUCKOO_DEFAULT_CAPACITY;
    bool nocreate = false;
    size_t pos = 2, items = 0;
    while (pos < cmd->argc && !items) {
        const resp_arg_t *w = &cmd->argv[pos];
        switch ((w->len ? w->ptr[0] : '\0') | 0x20) {
        case 'c':
            if (++pos == cmd->argc) {
                redis_mod_arity(c, name);
                return;
            }
            if (!redis_ll(&cmd->argv[pos++], &cap)) {
                redis_err(c, "Bad capacity");
                return;
            }
            if (2 * CUCKOO_DEFAULT_BUCKET_SIZE > cap) {
                redis_err(c, "Capacity must be at least (BucketSize * 2)");
                return;
            }
            break;
        case 'i':
            items = ++pos;
            break;
        case 'n':
            nocreate = true;
            pos++;
            break;
        default:
            redis_err(c, "Unknown argument received");
            return;
        }
    }
    if (!items || items == cmd->argc) {
        redis_mod_arity(c, name);
        return;
    }
    cuckoo_params_t p = { (uint64_t)cap, CUCKOO_DEFAULT_BUCKET_SIZE, CUCKOO_DEFAULT_MAX_ITERATIONS,
                          CUCKOO_DEFAULT_EXPANSION, CUCKOO_DEFAULT_FP_BITS };
    const char *field;
    if (cuckoo_validate(&p, 0, &field)) {
        /* larger than tally builds: refused when the insert would create */
        cuckoo_info_t in;
        int st = cf_lookup(c, &cmd->argv[1], &in);
        if (st == 0)
            redis_err(c, nocreate ? "ERR not found" : "ERR Insufficient memory to create filter");
        if (st != 1)
            return;
        cap = 0;   /* unused: the filter exists */
    }
    cf_add_items(c, cmd, items, nx, true, nocreate, cap == CUCKOO_DEFAULT_CAPACITY ? 0 : (uint64_t)cap);
}

static void cf_insert_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cf_insert(c, cmd, false);
}

static void cf_insertnx_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cf_insert(c, cmd, true);
}

/* ------------------------------------------------------------------------ */
/* CF.EXISTS, CF.MEXISTS, CF.COUNT, CF.DEL                                  */
/* ------------------------------------------------------------------------ */

/* A key holding no filter (missing, or another type) answers 0 / false
 * for every item, as RedisBloom's CFCheck does. */
static void cf_check(redis_conn_t *c, const resp_cmd_t *cmd, bool multi)
{
    size_t n = cmd->argc - 2;
    if (!redis_items(c, cmd, 2))
        return;
    bool *found = calloc(n, sizeof(*found));
    if (!found) {
        redis_err(c, REDIS_ERR_OOM);
        return;
    }
    cmd_cf_items_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, cmd_items_of(c->ptrs, c->lens, NULL, n), false,
                              found, false, 0, false, NULL };
    cmd_cf_res_t r;
    redis_mod_exists(c, multi ? &CMD_CF_MEXISTS : &CMD_CF_EXISTS, &a, &r, found, n, multi);
    free(found);
}

static void cf_exists_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "cf.exists");
        return;
    }
    cf_check(c, cmd, false);
}

static void cf_mexists_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, "cf.mexists");
        return;
    }
    cf_check(c, cmd, true);
}

static void cf_count_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "cf.count");
        return;
    }
    cmd_cf_count_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, cmd->argv[2].ptr, cmd->argv[2].len };
    cmd_cf_res_t r;
    cmd_err_t e;
    if (redis_run_handled(c, &CMD_CF_COUNT, &a, &r, REDIS_H_WRONGTYPE, &e))
        resp_reply_int(redis_conn_out(c), (long long)r.n);
    else if (e.code == CMD_E_WRONGTYPE)
        resp_reply_int(redis_conn_out(c), 0);
}

static void cf_del_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "cf.del");
        return;
    }
    bool removed = false;
    const char *item = cmd->argv[2].ptr;
    size_t ilen = cmd->argv[2].len;
    cmd_cf_items_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, cmd_items_of(&item, &ilen, NULL, 1), false,
                              &removed, false, 0, false, NULL };
    cmd_cf_res_t r;
    cmd_err_t e;
    if (redis_run_handled(c, &CMD_CF_DEL, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e))
        resp_reply_bool(redis_conn_out(c), removed);
    else if (e.code != CMD_E__COUNT)
        redis_err(c, "Not found");
}

/* ------------------------------------------------------------------------ */
/* CF.INFO                                                                  */
/* ------------------------------------------------------------------------ */

static void cf_info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, "cf.info");
        return;
    }
    cuckoo_info_t in;
    int st = cf_lookup(c, &cmd->argv[1], &in);
    if (st == 0)
        redis_err(c, "ERR not found");
    if (st != 1)
        return;
    resp_out_t *o = redis_conn_out(c);
    const struct { const char *name; uint64_t v; } m[] = {
        { "Size", in.size_bytes },
        { "Number of buckets", in.buckets0 },
        { "Number of filters", in.filters },
        { "Number of items inserted", in.items },
        { "Number of items deleted", in.deletes },
        { "Bucket size", in.bucket_size },
        { "Expansion rate", in.expansion },
        { "Max iterations", in.max_iterations },
    };
    resp_reply_map(o, 8);
    for (size_t i = 0; i < 8; i++)
        redis_reply_field(o, m[i].name, (long long)m[i].v);
}

/* CF.COMPACT: RedisBloom registers it "readonly fast" although it moves
 * fingerprints; here it is the operation it is, a journaled change. */
static void cf_compact_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, "cf.compact");
        return;
    }
    cmd_cf_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_cf_info_res_t r;
    cmd_err_t e;
    if (redis_run_handled(c, &CMD_CF_COMPACT, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e))
        redis_ok(c);
    else if (e.code != CMD_E__COUNT)
        redis_err(c, "Cuckoo filter was not found");
}

/* ------------------------------------------------------------------------ */
/* CF.SCANDUMP, CF.LOADCHUNK                                                */
/* ------------------------------------------------------------------------ */

/* [0, nil]: an empty filter, or past the end. */
static void dump_end(redis_conn_t *c)
{
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, 2);
    resp_reply_int(o, 0);
    resp_reply_null(o);
}

static void cf_scandump_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "cf.scandump");
        return;
    }
    long long pos;
    if (!redis_ll(&cmd->argv[2], &pos) || pos < 0) {
        redis_err(c, "Invalid position");
        return;
    }
    cuckoo_info_t in;
    int st = cf_lookup(c, &cmd->argv[1], &in);
    if (st == 0)
        redis_err(c, "ERR not found");
    if (st != 1)
        return;
    if (!in.items) {
        dump_end(c);
        return;
    }
    cmd_scandump_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, pos };
    cmd_scandump_res_t r;
    cmd_err_t e;
    if (!redis_run_handled(c, &CMD_CF_SCANDUMP, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e)) {
        redis_mod_status_err(c, &e);
        return;
    }
    if (!r.len) {
        dump_end(c);
    } else {
        resp_out_t *o = redis_conn_out(c);
        resp_reply_array(o, 2);
        resp_reply_int(o, r.cursor);
        resp_reply_bulk(o, r.data, r.len);
    }
    free(r.data);
}

static void cf_loadchunk_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 4) {
        redis_mod_arity(c, "cf.loadchunk");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1], *d = &cmd->argv[3];
    cuckoo_info_t in;
    long long pos;
    if (!redis_ll(&cmd->argv[2], &pos) || pos == 0) {   /* before the key's type, as RedisBloom answers */
        redis_err(c, "Invalid position");
        return;
    }
    int st = cf_lookup(c, k, &in);
    if (st < 0)
        return;
    if (pos == 1 && st == 1) {
        redis_err(c, "ERR item exists");
        return;
    }
    if (pos == 1 && d->len != CF_HEADER_LEN) {
        redis_err(c, "Invalid header");
        return;
    }
    if (pos != 1 && st == 0) {
        redis_err(c, "ERR not found");
        return;
    }
    if (pos < 0) {
        redis_err(c, "Couldn't load chunk!");
        return;
    }
    cmd_loadchunk_args_t a = { k->ptr, k->len, pos, (const uint8_t *)d->ptr, d->len };
    cmd_loadchunk_res_t r;
    cmd_err_t e;
    if (redis_run_handled(c, &CMD_CF_LOADCHUNK, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE | REDIS_H_BAD, &e))
        redis_ok(c);
    else if (e.code == CMD_E_BAD_REQUEST)
        redis_err(c, "%s", pos == 1 ? "Couldn't create filter!" : "Couldn't load chunk!");
    else
        redis_mod_status_err(c, &e);
}

/* RedisBloom's registration: arity -1, keys 1 1 1, "write deny-oom",
 * "readonly fast" (CF.COMPACT too), CF.DEL "write fast"; no ACL
 * categories in Redis 7.0. */
#define CF_WRITE REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE
#define CF_READ REDIS_CF_READONLY | REDIS_CF_FAST | REDIS_CF_MODULE
static const redis_cmd_t commands[] = {
    { "cf.add", -1, CF_WRITE, "", 1, 1, 1, cf_add_command, NULL },
    { "cf.addnx", -1, CF_WRITE, "", 1, 1, 1, cf_addnx_command, NULL },
    { "cf.compact", -1, CF_READ, "", 1, 1, 1, cf_compact_command, NULL },
    { "cf.count", -1, CF_READ, "", 1, 1, 1, cf_count_command, NULL },
    { "cf.del", -1, REDIS_CF_WRITE | REDIS_CF_FAST | REDIS_CF_MODULE, "", 1, 1, 1, cf_del_command, NULL },
    { "cf.exists", -1, CF_READ, "", 1, 1, 1, cf_exists_command, NULL },
    { "cf.info", -1, CF_READ, "", 1, 1, 1, cf_info_command, NULL },
    { "cf.insert", -1, CF_WRITE, "", 1, 1, 1, cf_insert_command, NULL },
    { "cf.insertnx", -1, CF_WRITE, "", 1, 1, 1, cf_insertnx_command, NULL },
    { "cf.loadchunk", -1, CF_WRITE, "", 1, 1, 1, cf_loadchunk_command, NULL },
    { "cf.mexists", -1, CF_READ, "", 1, 1, 1, cf_mexists_command, NULL },
    { "cf.reserve", -1, CF_WRITE, "", 1, 1, 1, cf_reserve_command, NULL },
    { "cf.scandump", -1, CF_READ, "", 1, 1, 1, cf_scandump_command, NULL },
};
REDIS_COMMANDS(cuckoo);
