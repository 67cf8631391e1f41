/* cmds_tdigest.c - RedisBloom's T-Digest commands (redis_int.h), with its
 * replies ("ERR T-Digest: ..." errors; doubles as bulk strings in RESP2 -
 * "inf", "nan" - and doubles in RESP3):
 *
 *   TDIGEST.CREATE key [COMPRESSION c]      CMD_TDIGEST_CREATE   +OK
 *   TDIGEST.ADD key value [value ...]       CMD_TDIGEST_ADD      +OK
 *   TDIGEST.RESET key                       CMD_TDIGEST_RESET    +OK
 *   TDIGEST.MERGE dest numkeys src... [COMPRESSION c] [OVERRIDE]  CMD_TDIGEST_MERGE  +OK
 *   TDIGEST.MIN / .MAX key                  CMD_TDIGEST_MIN/MAX  a double (nan when empty)
 *   TDIGEST.QUANTILE key q [q ...]          doubles
 *   TDIGEST.CDF key value [value ...]       doubles
 *   TDIGEST.RANK / .REVRANK key value...    integers
 *   TDIGEST.BYRANK / .BYREVRANK key rank... doubles
 *   TDIGEST.TRIMMED_MEAN key low high       a double
 *   TDIGEST.INFO key                        nine fields (a map in RESP3)
 *
 * RedisBloom 2.2's forms, which Debian's python3-redis 4.3.4 sends, where
 * today's would refuse them by arity: TDIGEST.CREATE key compression (no
 * COMPRESSION word) and TDIGEST.MERGE dest src (one source, no numkeys).
 * Its TDIGEST.ADD key value weight ... and single-value CDF/QUANTILE are
 * today's forms too, and are served as today's (docs/redis.md).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/keys_ops.h"
#include "cmd/tdigest.h"
#include "core/tdigest.h"
#include "redis/redis_int.h"

#define E_MISSING "ERR T-Digest: key does not exist"       /* RedisBloom's GetKey error */
#define E_EXISTS "ERR T-Digest: key already exists"         /* RedisBloom's create error */

static const redis_mod_keys_t keys = { "tdigest", E_MISSING, E_EXISTS, true };

static void answer(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code == CMD_E__COUNT)
        return;
    if (e->code == CMD_E_NOT_FOUND)
        redis_err(c, "%s", E_MISSING);
    else if (e->code == CMD_E_EXISTS)
        redis_err(c, "%s", E_EXISTS);
    else if (e->code == CMD_E_BAD_REQUEST && strstr(e->message, "overflow"))
        redis_err(c, "ERR T-Digest: overflow detected");
    else
        redis_answer_err(c, e);
}

/* A compression argument: RedisBloom's errors, and tally's bound. */
static const char *compression_arg(const resp_arg_t *a, uint32_t *v)
{
    long long x;
    if (!redis_ll(a, &x))
        return "ERR T-Digest: error parsing compression parameter";
    if (x <= 0)
        return "ERR T-Digest: compression parameter needs to be a positive integer";
    if (x > TDIGEST_MAX_COMPRESSION)
        return "ERR T-Digest: compression parameter must be at most 10000";
    *v = (uint32_t)x;
    return NULL;
}

static void create_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    /* argc 3: RedisBloom 2.2's TDIGEST.CREATE key compression */
    if (cmd->argc < 2 || cmd->argc > 4) {
        redis_mod_arity(c, "tdigest.create");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    cmd_tdigest_create_args_t a = { .key = k->ptr, .klen = k->len, .compression = TDIGEST_DEFAULT_COMPRESSION };
    if (cmd->argc == 4 && !redis_word_is(&cmd->argv[2], "COMPRESSION") &&
        !redis_word_is(&cmd->argv[3], "COMPRESSION")) {
        redis_mod_arg_error(c, &keys, k, true, "ERR T-Digest: wrong keyword");
        return;
    }
    if (cmd->argc > 2) {
        const char *why = compression_arg(&cmd->argv[cmd->argc - 1], &a.compression);
        if (why) {
            redis_mod_arg_error(c, &keys, k, true, why);
            return;
        }
    }
    cmd_tdigest_info_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_TDIGEST_CREATE, &a, &r, &e))
        redis_ok(c);
    else
        answer(c, &e);
}

static void reset_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, "tdigest.reset");
        return;
    }
    cmd_tdigest_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_tdigest_info_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_TDIGEST_RESET, &a, &r, &e))
        redis_ok(c);
    else
        answer(c, &e);
}

static void add_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, "tdigest.add");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    size_t n = cmd->argc - 2;
    double *v = malloc(n * sizeof(*v));
    if (!v) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!redis_double(&cmd->argv[2 + i], &v[i])) {
            redis_mod_arg_error(c, &keys, k, false, "ERR T-Digest: error parsing val parameter");
            goto done;
        }
        if (!isfinite(v[i])) {
            redis_mod_arg_error(c, &keys, k, false, "ERR T-Digest: val parameter needs to be a finite number");
            goto done;
        }
    }
    if (n > CMD_BATCH_MAX) {   /* a record holds at most CMD_BATCH_MAX values */
        redis_mod_arg_error(c, &keys, k, false, "ERR T-Digest: at most 10000 values in one TDIGEST.ADD");
        goto done;
    }
    cmd_tdigest_add_args_t a = { .key = k->ptr, .klen = k->len, .values = { .n = n, .v = v } };
    cmd_tdigest_add_res_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_TDIGEST_ADD, &a, &r, &e))
        redis_ok(c);
    else
        answer(c, &e);
done:
    free(v);
}

/* TDIGEST.MERGE dest numkeys src... [COMPRESSION c] [OVERRIDE], and
 * RedisBloom 2.2's TDIGEST.MERGE dest src (argc 3: numkeys 1). */
static void merge_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, "tdigest.merge");
        return;
    }
    const resp_arg_t *dest = &cmd->argv[1];
    int ds = redis_mod_key_state(c, dest, keys.type);
    if (ds < 0)
        return;
    if (ds == 2) {
        redis_err(c, "%s", REDIS_ERR_WRONGTYPE);
        return;
    }
    cmd_tdigest_merge_args_t a = { .key = dest->ptr, .klen = dest->len };
    size_t first = 3, n = 1;
    if (cmd->argc == 3) {
        first = 2;
    } else {
        long long nk;
        if (!redis_ll(&cmd->argv[2], &nk)) {
            redis_err(c, "ERR T-Digest: error parsing numkeys");
            return;
        }
        if (nk <= 0) {
            redis_err(c, "ERR T-Digest: numkeys needs to be a positive integer");
            return;
        }
        if ((unsigned long long)nk > cmd->argc - 3) {
            redis_mod_arity(c, "tdigest.merge");
            return;
        }
        n = (size_t)nk;
        size_t opt = 3 + n;
        if (opt < cmd->argc) {
            size_t comp = 0, over = 0;   /* the words' positions (0: absent), the first of each */
            for (size_t i = opt; i < cmd->argc; i++) {
                if (!comp && redis_word_is(&cmd->argv[i], "COMPRESSION"))
                    comp = i;
                if (!over && redis_word_is(&cmd->argv[i], "OVERRIDE"))
                    over = i;
            }
            if (comp) {
                if (comp + 1 >= cmd->argc) {
                    redis_mod_arity(c, "tdigest.merge");
                    return;
                }
                const char *why = compression_arg(&cmd->argv[comp + 1], &a.compression);
                if (why) {
                    redis_err(c, "%s", why);
                    return;
                }
            }
            a.override = over != 0;
            if (!comp && !over) {
                redis_err(c, "ERR T-Digest: wrong keyword");
                return;
            }
        }
    }
    if (n > CMD_BATCH_MAX) {   /* a record holds at most CMD_BATCH_MAX sources */
        redis_err(c, "ERR T-Digest: at most 10000 keys in one TDIGEST.MERGE");
        return;
    }
    /* each source must exist (the destination only where it exists) */
    for (size_t i = 0; i < n; i++) {
        const resp_arg_t *s = &cmd->argv[first + i];
        bool is_dest = s->len == dest->len && memcmp(s->ptr, dest->ptr, s->len) == 0;
        int st = is_dest ? ds : redis_mod_key_state(c, s, keys.type);
        if (st != 1) {
            if (st >= 0)
                redis_err(c, "%s", st == 0 ? E_MISSING : REDIS_ERR_WRONGTYPE);
            return;
        }
    }
    if (!redis_items(c, cmd, first))
        return;
    a.sources = (cmd_batch_t){ .n = n, .p = c->ptrs, .len = c->lens };
    cmd_tdigest_info_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_TDIGEST_MERGE, &a, &r, &e))
        redis_ok(c);
    else
        answer(c, &e);
}

static void reply_doubles(redis_conn_t *c, const double *v, size_t n)
{
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, n);
    for (size_t i = 0; i < n; i++)
        resp_reply_double(o, v[i]);
}

enum query_kind { Q_QUANTILE, Q_CDF, Q_RANK, Q_REVRANK, Q_BYRANK, Q_BYREVRANK };

static const struct {
    const char *name;
    const cmd_def_t *def;
    const char *parse_err;
} queries[] = {
    [Q_QUANTILE] = { "tdigest.quantile", &CMD_TDIGEST_QUANTILE, "ERR T-Digest: error parsing quantile" },
    [Q_CDF] = { "tdigest.cdf", &CMD_TDIGEST_CDF, "ERR T-Digest: error parsing cdf" },
    [Q_RANK] = { "tdigest.rank", &CMD_TDIGEST_RANK, "ERR T-Digest: error parsing value" },
    [Q_REVRANK] = { "tdigest.revrank", &CMD_TDIGEST_REVRANK, "ERR T-Digest: error parsing value" },
    [Q_BYRANK] = { "tdigest.byrank", &CMD_TDIGEST_BYRANK, "ERR T-Digest: error parsing rank" },
    [Q_BYREVRANK] = { "tdigest.byrevrank", &CMD_TDIGEST_BYREVRANK, "ERR T-Digest: error parsing rank" },
};

static void query(redis_conn_t *c, const resp_cmd_t *cmd, enum query_kind kind)
{
    if (cmd->argc < 3) {
        redis_mod_arity(c, queries[kind].name);
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    size_t n = cmd->argc - 2;
    bool by_rank = kind == Q_BYRANK || kind == Q_BYREVRANK, ranks_out = kind == Q_RANK || kind == Q_REVRANK;
    double *x = malloc(n * sizeof(*x)), *out = malloc(n * sizeof(*out));
    uint64_t *ranks = malloc(n * sizeof(*ranks));
    int64_t *out_ranks = malloc(n * sizeof(*out_ranks));
    if (!x || !out || !ranks || !out_ranks) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const resp_arg_t *v = &cmd->argv[2 + i];
        if (by_rank) {
            long long r;
            if (!redis_ll(v, &r)) {
                redis_mod_arg_error(c, &keys, k, false, queries[kind].parse_err);
                goto done;
            }
            if (r < 0) {
                redis_mod_arg_error(c, &keys, k, false, "ERR T-Digest: rank needs to be non negative");
                goto done;
            }
            ranks[i] = (uint64_t)r;
        } else {
            if (!redis_double(v, &x[i])) {
                redis_mod_arg_error(c, &keys, k, false, queries[kind].parse_err);
                goto done;
            }
            if (kind == Q_QUANTILE && (x[i] < 0 || x[i] > 1)) {
                redis_mod_arg_error(c, &keys, k, false, "ERR T-Digest: quantile should be in [0,1]");
                goto done;
            }
        }
    }
    cmd_tdigest_query_args_t a = { .key = k->ptr, .klen = k->len, .n = n };
    if (by_rank)
        a.ranks = ranks;
    else
        a.values = x;
    if (ranks_out)
        a.out_ranks = out_ranks;
    else
        a.out = out;
    cmd_err_t e;
    if (!redis_run_keep(c, queries[kind].def, &a, NULL, &e)) {
        answer(c, &e);
    } else if (ranks_out) {
        resp_out_t *o = redis_conn_out(c);
        resp_reply_array(o, n);
        for (size_t i = 0; i < n; i++)
            resp_reply_int(o, out_ranks[i]);
    } else {
        reply_doubles(c, out, n);
    }
done:
    free(x);
    free(out);
    free(ranks);
    free(out_ranks);
}

static void quantile_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, Q_QUANTILE); }
static void cdf_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, Q_CDF); }
static void rank_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, Q_RANK); }
static void revrank_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, Q_REVRANK); }
static void byrank_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, Q_BYRANK); }
static void byrevrank_command(redis_conn_t *c, const resp_cmd_t *cmd) { query(c, cmd, Q_BYREVRANK); }

static void scalar(redis_conn_t *c, const resp_cmd_t *cmd, const cmd_def_t *def, const char *name)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, name);
        return;
    }
    cmd_tdigest_scalar_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    cmd_tdigest_scalar_res_t r;
    cmd_err_t e;
    if (redis_run_keep(c, def, &a, &r, &e))
        resp_reply_double(redis_conn_out(c), r.v);
    else
        answer(c, &e);
}

static void min_command(redis_conn_t *c, const resp_cmd_t *cmd) { scalar(c, cmd, &CMD_TDIGEST_MIN, "tdigest.min"); }
static void max_command(redis_conn_t *c, const resp_cmd_t *cmd) { scalar(c, cmd, &CMD_TDIGEST_MAX, "tdigest.max"); }

static void trimmed_mean_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 4) {
        redis_mod_arity(c, "tdigest.trimmed_mean");
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    cmd_tdigest_scalar_args_t a = { .key = k->ptr, .klen = k->len };
    if (!redis_double(&cmd->argv[2], &a.low)) {
        redis_mod_arg_error(c, &keys, k, false, "ERR T-Digest: error parsing low_cut_percentile");
        return;
    }
    if (!redis_double(&cmd->argv[3], &a.high)) {
        redis_mod_arg_error(c, &keys, k, false, "ERR T-Digest: error parsing high_cut_percentile");
        return;
    }
    if (a.low < 0 || a.low > 1 || a.high < 0 || a.high > 1) {
        redis_mod_arg_error(c, &keys, k, false,
                            "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]");
        return;
    }
    if (a.low >= a.high) {
        redis_mod_arg_error(c, &keys, k, false,
                            "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile");
        return;
    }
    cmd_tdigest_scalar_res_t r;
    cmd_err_t e;
    if (redis_run_keep(c, &CMD_TDIGEST_TRIMMED_MEAN, &a, &r, &e))
        resp_reply_double(redis_conn_out(c), r.v);
    else
        answer(c, &e);
}

static void info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 2) {
        redis_mod_arity(c, "tdigest.info");
        return;
    }
    cmd_tdigest_key_args_t a = { cmd->argv[1].ptr, cmd->argv[1].len };
    cmd_tdigest_info_t r;
    cmd_err_t e;
    if (!redis_run_keep(c, &CMD_TDIGEST_INFO, &a, &r, &e)) {
        answer(c, &e);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    resp_reply_map(o, 9);
    redis_reply_field(o, "Compression", r.compression);
    redis_reply_field(o, "Capacity", r.capacity);
    redis_reply_field(o, "Merged nodes", r.merged_nodes);
    redis_reply_field(o, "Unmerged nodes", r.unmerged_nodes);
    redis_reply_field(o, "Merged weight", (long long)r.merged_weight);
    redis_reply_field(o, "Unmerged weight", (long long)r.unmerged_weight);
    redis_reply_field(o, "Observations", (long long)r.observations);
    redis_reply_field(o, "Total compressions",
                      r.total_compressions > INT64_MAX ? INT64_MAX : (long long)r.total_compressions);
    redis_reply_field(o, "Memory usage", (long long)r.size_bytes);
}

/* RedisBloom registers each with arity -1 (it checks its own), keys 1 1 1,
 * and ACL categories "<its> tdigest". */
#define W (REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE)   /* "write deny-oom", a module's */
#define R (REDIS_CF_READONLY | REDIS_CF_MODULE)                      /* "readonly", a module's */
static const redis_cmd_t commands[] = {
    { "tdigest.add", -1, W, "@write @tdigest", 1, 1, 1, add_command, NULL },
    { "tdigest.byrank", -1, R, "@read @fast @tdigest", 1, 1, 1, byrank_command, NULL },
    { "tdigest.byrevrank", -1, R, "@read @fast @tdigest", 1, 1, 1, byrevrank_command, NULL },
    { "tdigest.cdf", -1, R, "@read @fast @tdigest", 1, 1, 1, cdf_command, NULL },
    { "tdigest.create", -1, W, "@write @fast @tdigest", 1, 1, 1, create_command, NULL },
    { "tdigest.info", -1, R, "@read @fast @tdigest", 1, 1, 1, info_command, NULL },
    { "tdigest.max", -1, R, "@read @fast @tdigest", 1, 1, 1, max_command, NULL },
    { "tdigest.merge", -1, W, "@write @tdigest", 1, 1, 1, merge_command, NULL },
    { "tdigest.min", -1, R, "@read @fast @tdigest", 1, 1, 1, min_command, NULL },
    { "tdigest.quantile", -1, R, "@read @fast @tdigest", 1, 1, 1, quantile_command, NULL },
    { "tdigest.rank", -1, R, "@read @fast @tdigest", 1, 1, 1, rank_command, NULL },
    { "tdigest.reset", -1, W, "@write @fast @tdigest", 1, 1, 1, reset_command, NULL },
    { "tdigest.revrank", -1, R, "@read @fast @tdigest", 1, 1, 1, revrank_command, NULL },
    { "tdigest.trimmed_mean", -1, R, "@read @tdigest", 1, 1, 1, trimmed_mean_command, NULL },
};
REDIS_COMMANDS(tdigest);
