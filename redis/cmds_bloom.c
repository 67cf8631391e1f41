/* cmds_bloom.c - RedisBloom's Bloom filter commands on the Redis protocol
 * (redis_int.h), with RedisBloom 2.6's replies and error texts, RESP2 and
 * RESP3 (its booleans and maps), over the operations of cmd/bloom.h:
 *
 *   BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]   CMD_BF_RESERVE
 *   BF.ADD key item / BF.MADD key item...                           CMD_BF_INSERT
 *   BF.INSERT key [CAPACITY n] [ERROR e] [EXPANSION n] [NOCREATE]
 *             [NONSCALING] ITEMS item...                            CMD_BF_INSERT
 *   BF.EXISTS key item / BF.MEXISTS key item...                     CMD_BF_EXISTS / CMD_BF_MEXISTS
 *   BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION]             CMD_BF_INFO
 *   BF.CARD key                                                     CMD_BF_CARD
 *   BF.SCANDUMP key iterator / BF.LOADCHUNK key iterator data       CMD_BF_SCANDUMP / CMD_BF_LOADCHUNK
 *
 * RedisBloom registers every command with arity -1 and checks its own
 * (RedisModule_WrongArity: Redis's words with the lowercase name); it
 * reads its options as RedisBloom does (BF.RESERVE finds EXPANSION and
 * NONSCALING anywhere in argv, BF.INSERT dispatches on the first letters
 * of a word) and its errors keep RedisBloom's texts, "ERR" or not.
 *
 * A batch that a non-scaling filter cannot take whole keeps the items
 * before the one that did not fit, as RedisBloom does (CMD_BF_INSERT's
 * partial batches; HTTP's are all or nothing).  SCANDUMP's chunks are
 * RedisBloom's bytes, cut at 512 KiB rather than 16 MiB
 * (cmd/filterdump.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/bloom.h"
#include "redis/redis_int.h"

/* ------------------------------------------------------------------------ */
/* Arguments                                                                */
/* ------------------------------------------------------------------------ */

/* The byte at i of a word as C's string reads it: NUL past its end. */
static char at(const resp_arg_t *a, size_t i)
{
    return i < a->len ? a->ptr[i] : '\0';
}

/* ------------------------------------------------------------------------ */
/* Replies                                                                  */
/* ------------------------------------------------------------------------ */

/* A RedisBloom boolean: 1/0 in RESP2, true/false in RESP3. */
static void reply_bool(redis_conn_t *c, bool b)
{
    resp_reply_bool(redis_conn_out(c), b);
}

static void simple(redis_conn_t *c, const char *s)
{
    resp_reply_simple(redis_conn_out(c), s, strlen(s));
}

/* The text after `prefix` in an operation's message, up to "; nothing". */
static const char *why_of(const cmd_err_t *e, const char *prefix, char *buf, size_t cap)
{
    size_t n = strlen(prefix);
    if (strncmp(e->message, prefix, n) != 0)
        return NULL;
    const char *s = e->message + n, *z = strstr(s, "; nothing");
    size_t len = z ? (size_t)(z - s) : strlen(s);
    if (len >= cap)
        len = cap - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

/* ------------------------------------------------------------------------ */
/* BF.RESERVE                                                               */
/* ------------------------------------------------------------------------ */

static void bf_reserve_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 4 || cmd->argc > 7) {
        redis_mod_arity(c, "bf.reserve");
        return;
    }
    double error;
    long long cap, exp = BLOOM_DEFAULT_EXPANSION;
    if (!redis_double(&cmd->argv[2], &error)) {
        redis_err(c, "ERR bad error rate");
        return;
    }
    if (error >= 1 || error <= 0) {
        redis_err(c, "ERR (0 < error rate range < 1) ");
        return;
    }
    if (!redis_ll(&cmd->argv[3], &cap)) {
        redis_err(c, "ERR bad capacity");
        return;
    }
    if (cap <= 0) {
        redis_err(c, "ERR (capacity should be larger than 0)");
        return;
    }
    bool nonscaling = redis_word_index(cmd, "NONSCALING") != -1;
    long ex = redis_word_index(cmd, "EXPANSION");
    if (ex + 1 == (long)cmd->argc) {
        redis_err(c, "ERR no expansion");
        return;
    }
    if (ex != -1) {
        if (nonscaling) {
            redis_err(c, "Nonscaling filters cannot expand");
            return;
        }
        if (!redis_ll(&cmd->argv[ex + 1], &exp)) {
            redis_err(c, "ERR bad expansion");
            return;
        }
        if (exp < 1) {
            redis_err(c, "ERR expansion should be greater or equal to 1");
            return;
        }
    }
    const char *field;
    cmd_bf_reserve_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len,
                                { error, (uint64_t)cap, exp > UINT32_MAX ? UINT32_MAX : (uint32_t)exp, !nonscaling } };
    bool bad = bloom_validate(a.p.error, a.p.capacity, a.p.expansion, a.p.scaling, &field) != NULL;
    cmd_bf_res_t r;
    cmd_err_t e;
    if (bad) {
        /* beyond what tally builds: RedisBloom's answer when it cannot
         * allocate the filter - after the key's own checks */
        cmd_bf_key_args_t k = { a.key, a.klen };
        cmd_bf_info_res_t in;
        if (redis_run_handled(c, &CMD_BF_INFO, &k, &in, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e))
            redis_err(c, "ERR item exists");
        else if (e.code == CMD_E_WRONGTYPE)
            redis_mod_status_err(c, &e);
        else if (e.code == CMD_E_NOT_FOUND)
            redis_err(c, "ERR could not create filter");
        return;
    }
    if (redis_run_handled(c, &CMD_BF_RESERVE, &a, &r, REDIS_H_EXISTS | REDIS_H_WRONGTYPE, &e))
        redis_ok(c);
    else if (e.code != CMD_E__COUNT)
        redis_mod_status_err(c, &e);
}

/* ------------------------------------------------------------------------ */
/* BF.ADD, BF.MADD, BF.INSERT                                               */
/* ------------------------------------------------------------------------ */

/* Adds argv[from..) with the options (bfInsertCommon): one boolean, or an
 * array of them when multi.  RedisBloom's rule for a full filter: the items
 * before the one that did not fit stay, and the reply ends with the error
 * (the operation's partial batch). */
static void bf_add_items(redis_conn_t *c, const resp_cmd_t *cmd, size_t from, bool multi, bool nocreate,
                         const cmd_bf_params_t *p)
{
    size_t n = cmd->argc - from;
    if (!redis_items(c, cmd, from))
        return;
    bool *added = calloc(n, sizeof(*added));
    if (!added) {
        redis_err(c, REDIS_ERR_OOM);
        return;
    }
    cmd_bf_insert_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, cmd_items_of(c->ptrs, c->lens, NULL, n),
                               nocreate, *p, added, true };
    cmd_bf_res_t r;
    cmd_err_t e;
    resp_out_t *o = redis_conn_out(c);
    if (!redis_run_handled(c, &CMD_BF_INSERT, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e)) {
        if (e.code != CMD_E__COUNT)
            redis_mod_status_err(c, &e);
        free(added);
        return;
    }
    const char *stop = r.stop == BLOOM_FULL    ? "ERR non scaling filter is full"
                       : r.stop == BLOOM_LIMIT ? "ERR problem inserting into filter"
                                               : NULL;
    if (multi)
        resp_reply_array(o, r.done);
    for (size_t i = 0; i < r.done - (stop != NULL); i++)
        reply_bool(c, added[i]);
    if (stop)
        redis_err(c, "%s", stop);
    free(added);
}

static const cmd_bf_params_t bf_defaults = { BLOOM_DEFAULT_ERROR, BLOOM_DEFAULT_CAPACITY, BLOOM_DEFAULT_EXPANSION,
                                             true };

static void bf_add_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "bf.add");
        return;
    }
    bf_add_items(c, cmd, 2, false, false, &bf_defaults);
}

static void bf_madd_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, "bf.madd");
        return;
    }
    bf_add_items(c, cmd, 2, true, false, &bf_defaults);
}

static void bf_insert_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    double error = BLOOM_DEFAULT_ERROR;
    long long cap = BLOOM_DEFAULT_CAPACITY, exp = BLOOM_DEFAULT_EXPANSION;
    bool nocreate = false, nonscaling = false;
    if (cmd->argc < 4) {
        redis_mod_arity(c, "bf.insert");
        return;
    }
    size_t pos = 2, items = 0;
    while (pos < cmd->argc && !items) {
        const resp_arg_t *w = &cmd->argv[pos];
        switch (at(w, 0) | 0x20) {
        case 'i':
            items = ++pos;
            break;
        case 'e':
            if (++pos == cmd->argc) {
                redis_mod_arity(c, "bf.insert");
                return;
            }
            if ((at(w, 1) | 0x20) == 'r') {
                if (!redis_double(&cmd->argv[pos++], &error)) {
                    redis_err(c, "Bad error rate");
                    return;
                }
            } else if (!redis_ll(&cmd->argv[pos++], &exp)) {
                redis_err(c, "Bad expansion");
                return;
            }
            break;
        case 'c':
            if (++pos == cmd->argc) {
                redis_mod_arity(c, "bf.insert");
                return;
            }
            if (!redis_ll(&cmd->argv[pos++], &cap)) {
                redis_err(c, "Bad capacity");
                return;
            }
            break;
        case 'n':
            if ((at(w, 2) | 0x20) == 'c')
                nocreate = true;
            else
                nonscaling = true;
            pos++;
            break;
        default:
            redis_err(c, "Unknown argument received");
            return;
        }
    }
    if (!items || items == cmd->argc) {
        redis_mod_arity(c, "bf.insert");
        return;
    }
    if (error <= 0 || error >= 1 || cap < 1 || exp < 1) {
        redis_err(c, "Bad argument received");
        return;
    }
    cmd_bf_params_t p = { error, (uint64_t)cap, exp > UINT32_MAX ? UINT32_MAX : (uint32_t)exp, !nonscaling };
    const char *field;
    if (bloom_validate(p.error, p.capacity, p.expansion, p.scaling, &field)) {
        /* parameters tally cannot build: refused if the insert would create */
        cmd_bf_key_args_t k = { cmd->argv[1].ptr, cmd->argv[1].len };
        cmd_bf_info_res_t in;
        cmd_err_t e;
        if (!redis_run_handled(c, &CMD_BF_INFO, &k, &in, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e)) {
            if (e.code == CMD_E_WRONGTYPE || (e.code == CMD_E_NOT_FOUND && nocreate))
                redis_mod_status_err(c, &e);
            else if (e.code == CMD_E_NOT_FOUND)
                redis_err(c, "ERR could not create filter");
            return;
        }
        p = bf_defaults;   /* unused: the filter exists */
    }
    bf_add_items(c, cmd, items, true, nocreate, &p);
}

/* ------------------------------------------------------------------------ */
/* BF.EXISTS, BF.MEXISTS                                                    */
/* ------------------------------------------------------------------------ */

/* A key that holds no filter (missing, or another type) answers false for
 * every item, as RedisBloom's BFCheck does. */
static void bf_check(redis_conn_t *c, const resp_cmd_t *cmd, bool multi)
{
    size_t n = cmd->argc - 2;
    if (!redis_items(c, cmd, 2))
        return;
    bool *found = calloc(n, sizeof(*found));
    if (!found) {
        redis_err(c, REDIS_ERR_OOM);
        return;
    }
    cmd_bf_exists_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len, cmd_items_of(c->ptrs, c->lens, NULL, n), found };
    cmd_bf_res_t r;
    redis_mod_exists(c, multi ? &CMD_BF_MEXISTS : &CMD_BF_EXISTS, &a, &r, found, n, multi);
    free(found);
}

static void bf_exists_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "bf.exists");
        return;
    }
    bf_check(c, cmd, false);
}

static void bf_mexists_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, "bf.mexists");
        return;
    }
    bf_check(c, cmd, true);
}

/* ------------------------------------------------------------------------ */
/* BF.INFO, BF.CARD                                                         */
/* ------------------------------------------------------------------------ */

/* One member of BF.INFO's answer: its name (a status string) and value
 * (the expansion of a non-scaling filter is a null). */
static void info_member(redis_conn_t *c, const bloom_info_t *in, int which, bool name)
{
    static const char *const names[] = { "Capacity", "Size", "Number of filters", "Number of items inserted",
                                         "Expansion rate" };
    resp_out_t *o = redis_conn_out(c);
    if (name)
        simple(c, names[which]);
    switch (which) {
    case 0: resp_reply_int(o, (long long)in->capacity); break;
    case 1: resp_reply_int(o, (long long)in->size_bytes); break;
    case 2: resp_reply_int(o, (long long)in->filters); break;
    case 3: resp_reply_int(o, (long long)in->items); break;
    default:
        if (in->scaling)
            resp_reply_int(o, in->expansion);
        else
            resp_reply_null(o);
        break;
    }
}

static void bf_info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2 && cmd->argc != 3) {
        redis_mod_arity(c, "bf.info");
        return;
    }
    cmd_bf_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_bf_info_res_t r;
    cmd_err_t e;
    if (!redis_run_handled(c, &CMD_BF_INFO, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e)) {
        if (e.code != CMD_E__COUNT)
            redis_mod_status_err(c, &e);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    if (cmd->argc == 3) {
        static const char *const fields[] = { "capacity", "size", "filters", "items", "expansion" };
        for (int i = 0; i < 5; i++)
            if (redis_word_is(&cmd->argv[2], fields[i])) {
                /* RESP2: a one-element array; RESP3: a map of one */
                if (o->proto == 3)
                    resp_reply_map(o, 1);
                else
                    resp_reply_array(o, 1);
                info_member(c, &r.info, i, o->proto == 3);
                return;
            }
        redis_err(c, "Invalid information value");
        return;
    }
    resp_reply_map(o, 5);
    for (int i = 0; i < 5; i++)
        info_member(c, &r.info, i, true);
}

static void bf_card_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, "bf.card");
        return;
    }
    cmd_bf_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_bf_info_res_t r;
    cmd_err_t e;
    if (redis_run_handled(c, &CMD_BF_CARD, &a, &r, REDIS_H_WRONGTYPE, &e))
        resp_reply_int(redis_conn_out(c), (long long)r.info.items);
    else if (e.code != CMD_E__COUNT)
        redis_mod_status_err(c, &e);
}

/* ------------------------------------------------------------------------ */
/* BF.SCANDUMP, BF.LOADCHUNK                                                */
/* ------------------------------------------------------------------------ */

static void bf_scandump_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        redis_mod_arity(c, "bf.scandump");
        return;
    }
    /* the key first (RedisBloom looks it up before the iterator) */
    cmd_bf_key_args_t k = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_bf_info_res_t in;
    cmd_err_t e;
    if (!redis_run_handled(c, &CMD_BF_INFO, &k, &in, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e)) {
        if (e.code != CMD_E__COUNT)
            redis_mod_status_err(c, &e);
        return;
    }
    long long iter;
    if (!redis_ll(&cmd->argv[2], &iter)) {
        redis_err(c, "Second argument must be numeric");
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    if (iter < 0) {   /* no chunk there: the end */
        resp_reply_array(o, 2);
        resp_reply_int(o, 0);
        resp_reply_bulk(o, "", 0);
        return;
    }
    cmd_scandump_args_t a = { k.key, k.klen, iter };
    cmd_scandump_res_t r;
    if (!redis_run_handled(c, &CMD_BF_SCANDUMP, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e)) {
        if (e.code != CMD_E__COUNT)
            redis_mod_status_err(c, &e);
        return;
    }
    resp_reply_array(o, 2);
    resp_reply_int(o, r.cursor);
    resp_reply_bulk(o, r.data ? (const char *)r.data : "", r.len);
    free(r.data);
}

static void bf_loadchunk_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 4) {
        redis_mod_arity(c, "bf.loadchunk");
        return;
    }
    long long iter;
    if (!redis_ll(&cmd->argv[2], &iter)) {
        redis_err(c, "ERR Second argument must be numeric");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1], *d = &cmd->argv[3];
    cmd_err_t e;
    if (iter < 1) {
        /* refused by the chunk's own check, once the key holds a filter */
        cmd_bf_key_args_t ka = { k->ptr, k->len };
        cmd_bf_info_res_t in;
        if (redis_run_handled(c, &CMD_BF_INFO, &ka, &in, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE, &e))
            redis_err(c, "ERR received bad data");
        else if (e.code != CMD_E__COUNT)
            redis_mod_status_err(c, &e);
        return;
    }
    cmd_loadchunk_args_t a = { k->ptr, k->len, iter, (const uint8_t *)d->ptr, d->len };
    cmd_loadchunk_res_t r;
    if (redis_run_handled(c, &CMD_BF_LOADCHUNK, &a, &r, REDIS_H_NOT_FOUND | REDIS_H_WRONGTYPE | REDIS_H_BAD, &e)) {
        redis_ok(c);
        return;
    }
    char why[160];
    if (e.code == CMD_E_BAD_REQUEST && why_of(&e, "chunk refused: ", why, sizeof(why)) &&
        (strcmp(why, "invalid offset - no link found") == 0 ||
         strcmp(why, "invalid chunk - Too big for current filter") == 0))
        redis_err(c, "ERR %s", why);
    else if (e.code == CMD_E_BAD_REQUEST)
        redis_err(c, "ERR received bad data");
    else if (e.code != CMD_E__COUNT)
        redis_mod_status_err(c, &e);
}

/* RedisBloom's registration: arity -1, keys 1 1 1, "write deny-oom" or
 * "readonly fast"; Redis 7.0 gives module commands no ACL categories. */
#define BF_WRITE REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE
#define BF_READ REDIS_CF_READONLY | REDIS_CF_FAST | REDIS_CF_MODULE
static const redis_cmd_t commands[] = {
    { "bf.add", -1, BF_WRITE, "", 1, 1, 1, bf_add_command, NULL },
    { "bf.card", -1, BF_READ, "", 1, 1, 1, bf_card_command, NULL },
    { "bf.exists", -1, BF_READ, "", 1, 1, 1, bf_exists_command, NULL },
    { "bf.info", -1, BF_READ, "", 1, 1, 1, bf_info_command, NULL },
    { "bf.insert", -1, BF_WRITE, "", 1, 1, 1, bf_insert_command, NULL },
    { "bf.loadchunk", -1, BF_WRITE, "", 1, 1, 1, bf_loadchunk_command, NULL },
    { "bf.madd", -1, BF_WRITE, "", 1, 1, 1, bf_madd_command, NULL },
    { "bf.mexists", -1, BF_READ, "", 1, 1, 1, bf_mexists_command, NULL },
    { "bf.reserve", -1, BF_WRITE, "", 1, 1, 1, bf_reserve_command, NULL },
    { "bf.scandump", -1, BF_READ, "", 1, 1, 1, bf_scandump_command, NULL },
};
REDIS_COMMANDS(bloom);
