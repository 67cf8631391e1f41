/* cmds_cms.c - RedisBloom's Count-Min sketch commands (redis_int.h), with
 * its replies and its "CMS: ..." errors, RESP2 and RESP3:
 *
 *   CMS.INITBYDIM key width depth        CMD_CMS_INITBYDIM  +OK
 *   CMS.INITBYPROB key error probability CMD_CMS_INITBYDIM (by_prob; RedisBloom's dimensions)
 *   CMS.INCRBY key item incr [item incr ...]  CMD_CMS_INCRBY  the items' estimates
 *   CMS.QUERY key item [item ...]        CMD_CMS_QUERY      the items' estimates
 *   CMS.MERGE dest numkeys src... [WEIGHTS w...]  CMD_CMS_MERGE  +OK
 *   CMS.INFO key                         CMD_CMS_INFO       width, depth, count (a map in RESP3)
 *
 * RedisBloom looks at the key before it reads the arguments: where an
 * argument is refused, the key's state is looked at first so the error is
 * the one RedisBloom gives.
 */
#include <stdlib.h>
#include <strings.h>

#include "cmd/cms.h"
#include "cmd/keys_ops.h"
#include "core/cms.h"
#include "redis/redis_int.h"

#define E_MISSING "CMS: key does not exist"       /* RedisBloom's GetKey error */
#define E_EXISTS "CMS: key already exists"         /* RedisBloom's create error */

static const redis_mod_keys_t keys = { "cms", E_MISSING, E_EXISTS, false };

/* An operation's refusal in RedisBloom's words where it has them. */
static void answer(redis_conn_t *c, const cmd_err_t *e, bool creating)
{
    const char *f = cmd_err_field(e);
    if (e->code == CMD_E__COUNT)
        return;
    if (e->code == CMD_E_NOT_FOUND)
        redis_err(c, "%s", E_MISSING);
    else if (creating && (e->code == CMD_E_EXISTS || e->code == CMD_E_WRONGTYPE))
        redis_err(c, "%s", E_EXISTS);
    else if (creating && e->code == CMD_E_BAD_REQUEST)
        redis_err(c, "CMS: invalid init arguments");   /* past tally's size limit (CMS_MAX_CELLS) */
    else if (e->code == CMD_E_BAD_REQUEST && f && strcmp(f, "weights") == 0)
        redis_err(c, "CMS: MERGE overflow");
    else if (e->code == CMD_E_BAD_REQUEST && f && strcmp(f, "sources") == 0 && strstr(e->message, "width and depth"))
        redis_err(c, "CMS: width/depth is not equal");
    else if (e->code == CMD_E_BAD_REQUEST && f && (strcmp(f, "increments") == 0 || strcmp(f, "items") == 0) &&
             strstr(e->message, "overflow"))
        redis_err(c, "CMS: INCRBY overflow");
    else
        redis_answer_err(c, e);
}

static void init_command(redis_conn_t *c, const resp_cmd_t *cmd, bool by_prob)
{
    if (cmd->argc != 4) {
        redis_mod_arity(c, by_prob ? "cms.initbyprob" : "cms.initbydim");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    cmd_cms_initbydim_args_t a = { .key = k->ptr, .klen = k->len, .by_prob = by_prob };
    if (!by_prob) {
        long long w, d;
        if (!redis_ll(&cmd->argv[2], &w) || w < 1) {
            redis_mod_arg_error(c, &keys, k, true, "CMS: invalid width");
            return;
        }
        if (!redis_ll(&cmd->argv[3], &d) || d < 1) {
            redis_mod_arg_error(c, &keys, k, true, "CMS: invalid depth");
            return;
        }
        a.width = (uint64_t)w;
        a.depth = (uint64_t)d;
    } else {
        double err, prob;
        if (!redis_double(&cmd->argv[2], &err) || err <= 0 || err >= 1) {
            redis_mod_arg_error(c, &keys, k, true, "CMS: invalid overestimation value");
            return;
        }
        if (!redis_double(&cmd->argv[3], &prob) || prob <= 0 || prob >= 1) {
            redis_mod_arg_error(c, &keys, k, true, "CMS: invalid prob value");
            return;
        }
        cms_dims_from_prob(err, prob, &a.width, &a.depth);
    }
    if (a.width < 1 || a.depth < 1 || a.width > (uint64_t)INT64_MAX / a.depth) {
        redis_mod_arg_error(c, &keys, k, true, "CMS: invalid init arguments");
        return;
    }
    cmd_cms_info_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_CMS_INITBYDIM, &a, &r, &e))
        redis_ok(c);
    else
        answer(c, &e, true);
}

static void initbydim_command(redis_conn_t *c, const resp_cmd_t *cmd) { init_command(c, cmd, false); }
static void initbyprob_command(redis_conn_t *c, const resp_cmd_t *cmd) { init_command(c, cmd, true); }

static void reply_counts(redis_conn_t *c, const uint64_t *v, size_t n)
{
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, n);
    for (size_t i = 0; i < n; i++)
        resp_reply_int(o, (long long)v[i]);
}

static void incrby_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 4 || cmd->argc % 2 == 1) {
        redis_mod_arity(c, "cms.incrby");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    size_t n = (cmd->argc - 2) / 2;
    uint64_t *by = malloc(n * sizeof(*by)), *counts = malloc(n * sizeof(*counts));
    const char **p = malloc(n * sizeof(*p));
    size_t *len = malloc(n * sizeof(*len));
    if (!by || !counts || !p || !len) {
        redis_err(c, REDIS_ERR_OOM);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        long long v;
        const resp_arg_t *x = &cmd->argv[3 + 2 * i];
        if (!redis_ll(x, &v)) {
            redis_mod_arg_error(c, &keys, k, false, "CMS: Cannot parse number");
            goto done;
        }
        if (v < 0) {
            redis_mod_arg_error(c, &keys, k, false, "CMS: Number cannot be negative");
            goto done;
        }
        p[i] = cmd->argv[2 + 2 * i].ptr;
        len[i] = cmd->argv[2 + 2 * i].len;
        by[i] = (uint64_t)v;
    }
    if (n > CMD_BATCH_MAX) {   /* a record holds at most CMD_BATCH_MAX items */
        redis_mod_arg_error(c, &keys, k, false, "CMS: at most 10000 items in one CMS.INCRBY");
        goto done;
    }
    cmd_cms_incrby_args_t a = { .key = k->ptr, .klen = k->len, .as_increments = true, .counts = counts };
    a.items = (cmd_batch_t){ .n = n, .p = p, .len = len, .by = by };
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_CMS_INCRBY, &a, NULL, &e))
        reply_counts(c, counts, n);
    else
        answer(c, &e, false);
done:
    free(by);
    free(counts);
    free(p);
    free(len);
}

static void query_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, "cms.query");
        return;
    }
    if (!redis_items(c, cmd, 2))
        return;
    size_t n = cmd->argc - 2;
    uint64_t *counts = malloc(n * sizeof(*counts));
    if (!counts) {
        redis_err(c, REDIS_ERR_OOM);
        return;
    }
    cmd_cms_query_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .counts = counts };
    a.items = (cmd_batch_t){ .n = n, .p = c->ptrs, .len = c->lens };
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_CMS_QUERY, &a, NULL, &e))
        reply_counts(c, counts, n);
    else
        answer(c, &e, false);
    free(counts);
}

/* CMS.MERGE dest numkeys src [src ...] [WEIGHTS w [w ...]]: RedisBloom's
 * checks in its order (the destination, numkeys, the counts, then each
 * source with its weight). */
static void merge_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 4) {
        redis_mod_arity(c, "cms.merge");
        return;
    }
    const resp_arg_t *dest = &cmd->argv[1];
    int s = redis_mod_key_state(c, dest, keys.type);
    if (s <= 0 || s == 2) {
        if (s >= 0)
            redis_err(c, "%s", s == 0 ? E_MISSING : REDIS_ERR_WRONGTYPE);
        return;
    }
    long long nk;
    if (!redis_ll(&cmd->argv[2], &nk)) {
        redis_err(c, "CMS: invalid numkeys");
        return;
    }
    if (nk <= 0) {
        redis_err(c, "CMS: Number of keys must be positive");
        return;
    }
    size_t rest = cmd->argc - 3;   /* the sources, WEIGHTS and the weights */
    long long pos = -1;
    for (size_t i = 0; i < rest; i++)
        if (cmd->argv[3 + i].len == 7 && strncasecmp(cmd->argv[3 + i].ptr, "WEIGHTS", 7) == 0) {
            pos = (long long)i;
            break;
        }
    if (pos < 0 && (size_t)nk != rest) {
        redis_err(c, "CMS: wrong number of keys");
        return;
    }
    if (pos >= 0 && (pos != nk || rest != 1 + 2 * (size_t)nk)) {
        redis_err(c, "CMS: wrong number of keys/weights");
        return;
    }
    size_t n = (size_t)nk;
    if (n > CMD_BATCH_MAX) {   /* a record holds at most CMD_BATCH_MAX sources */
        redis_err(c, "CMS: at most 10000 keys in one CMS.MERGE");
        return;
    }
    int64_t *w = pos >= 0 ? malloc(n * sizeof(*w)) : NULL;
    if (pos >= 0 && !w) {
        redis_err(c, REDIS_ERR_OOM);
        return;
    }
    if (!redis_items(c, cmd, 3)) {
        free(w);
        return;
    }
    /* each source in turn: its weight, then the key (missing, type); the
     * dimensions are the operation's, which checks them after */
    for (size_t i = 0; i < n; i++) {
        long long v;
        if (w && !redis_ll(&cmd->argv[4 + n + i], &v)) {
            redis_err(c, "CMS: invalid weight value");
            free(w);
            return;
        }
        if (w)
            w[i] = v;
        int st = redis_mod_key_state(c, &cmd->argv[3 + i], keys.type);
        if (st != 1) {
            if (st >= 0)
                redis_err(c, "%s", st == 0 ? E_MISSING : REDIS_ERR_WRONGTYPE);
            free(w);
            return;
        }
    }
    cmd_cms_merge_args_t a = { .key = dest->ptr, .klen = dest->len };
    a.sources = (cmd_batch_t){ .n = n, .p = c->ptrs, .len = c->lens };
    a.weights = (cmd_array_t){ .n = w ? n : 0, .v = w };
    cmd_cms_info_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_CMS_MERGE, &a, &r, &e))
        redis_ok(c);
    else
        answer(c, &e, false);
    free(w);
}

static void info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, "cms.info");
        return;
    }
    cmd_cms_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_cms_info_t r;
    cmd_err_t e;
    if (!redis_run_keep(c, &CMD_CMS_INFO, &a, &r, &e)) {
        answer(c, &e, false);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    resp_reply_map(o, 3);
    redis_reply_field(o, "width", r.width);
    redis_reply_field(o, "depth", r.depth);
    redis_reply_field(o, "count", (long long)r.count);
}

/* RedisBloom registers each with arity -1 (it checks its own), keys 1 1 1,
 * and ACL categories "<its> cms". */
static const redis_cmd_t commands[] = {
    { "cms.incrby", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @cms", 1, 1, 1, incrby_command, NULL },
    { "cms.info", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @fast @cms", 1, 1, 1, info_command, NULL },
    { "cms.initbydim", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @fast @cms", 1, 1, 1, initbydim_command, NULL },
    { "cms.initbyprob", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @fast @cms", 1, 1, 1, initbyprob_command, NULL },
    { "cms.merge", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @cms", 1, 1, 1, merge_command, NULL },
    { "cms.query", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @cms", 1, 1, 1, query_command, NULL },
};
REDIS_COMMANDS(cms);
