/* tdigest.c - T-Digest's operations: see tdigest.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/keycreate.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "cmd/tdigest.h"
#include "core/tdigest.h"

#define REC_VERSION 1

static void fill_info(const void *value, void *res)
{
    const tdigest_t *td = value;
    cmd_tdigest_info_t *r = res;
    tdigest_info_t in;
    tdigest_get_info(td, &in);
    r->compression = in.compression;
    r->capacity = in.capacity;
    r->merged_nodes = in.merged_nodes;
    r->unmerged_nodes = in.unmerged_nodes;
    r->merged_weight = in.merged_weight;
    r->unmerged_weight = in.unmerged_weight;
    r->total_compressions = in.total_compressions;
    r->observations = tdigest_count(td);
    r->size_bytes = tdigest_type.size(td);
    r->min = tdigest_min(td);
    r->max = tdigest_max(td);
}

static bool bad(const char **why, const char *what)
{
    *why = what;
    return false;
}

static void put_head(wbuf_t *out, const char *key, size_t klen)
{
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, key, klen);
}

/* ------------------------------------------------------------------------ */
/* TDIGEST.CREATE and TDIGEST.ADD                                           */
/* ------------------------------------------------------------------------ */

static bool run_create(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_tdigest_create_args_t *a = args;
    uint64_t bytes = tdigest_bytes_for(a->compression);
    if (!cmd_grow(ctx, "compression", "the digest", bytes, bytes + ks_entry_overhead(a->klen)))
        return false;
    return cmd_create_key(ctx, a->key, a->klen, &tdigest_type, tdigest_create(a->compression), fill_info, res);
}

static void encode_create(const void *args, wbuf_t *out)
{
    const cmd_tdigest_create_args_t *a = args;
    put_head(out, a->key, a->klen);
    wbuf_put_u32(out, a->compression);
}

static bool decode_create(rbuf_t *in, void *args, const char **why)
{
    cmd_tdigest_create_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    a->compression = rbuf_u32(in);
    if (a->compression < 1 || a->compression > TDIGEST_MAX_COMPRESSION)
        return bad(why, "bad compression");
    return true;
}

static bool run_add(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_tdigest_add_args_t *a = args;
    cmd_tdigest_add_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &tdigest_type, CMD_MUST_EXIST, &h))
        return false;
    tdigest_t *td = cmd_key_value(&h);
    if (!tdigest_can_add(td, a->values.n)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "values", "overflow: the digest would hold more than 2^53 values");
    }
    ks_entry_prepare_write(ctx->srv->ks, h.e);
    for (size_t i = 0; i < a->values.n; i++)
        tdigest_add(td, cmd_array_f64(&a->values, i));
    tdigest_flush(td);
    r->observations = tdigest_count(td);
    cmd_key_close(&h, true);
    return true;
}

static void encode_add(const void *args, wbuf_t *out)
{
    const cmd_tdigest_add_args_t *a = args;
    put_head(out, a->key, a->klen);
    cmd_array_put_f64(out, &a->values);
}

static bool decode_add(rbuf_t *in, void *args, const char **why)
{
    cmd_tdigest_add_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    if (!cmd_array_get(in, &a->values, 8, 1, CMD_BATCH_MAX))
        return bad(why, "bad values");
    for (size_t i = 0; i < a->values.n; i++)
        if (!isfinite(cmd_array_f64(&a->values, i)))
            return bad(why, "a value is not finite");
    return true;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum query_kind { Q_QUANTILE, Q_CDF, Q_RANK, Q_REVRANK, Q_BYRANK, Q_BYREVRANK } query_kind_t;

static bool query(cmd_ctx_t *ctx, const cmd_tdigest_query_args_t *a, query_kind_t kind)
{
    static const char *const param_of[] = { "q", "value", "value", "value", "rank", "rank" };
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &tdigest_type, CMD_MUST_EXIST, &h))
        return false;
    const tdigest_t *td = cmd_key_value(&h);
    /* each value walks the digest: n of them may walk it at most as far as
     * a request may read */
    if (!cmd_work_fits(ctx, param_of[kind], (uint64_t)a->n * tdigest_type.size(td))) {
        cmd_key_close(&h, false);
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        switch (kind) {
        case Q_QUANTILE: a->out[i] = tdigest_quantile(td, a->values[i]); break;
        case Q_CDF: a->out[i] = tdigest_cdf(td, a->values[i]); break;
        case Q_RANK: a->out_ranks[i] = tdigest_rank(td, a->values[i], false); break;
        case Q_REVRANK: a->out_ranks[i] = tdigest_rank(td, a->values[i], true); break;
        case Q_BYRANK: a->out[i] = tdigest_by_rank(td, a->ranks[i], false); break;
        case Q_BYREVRANK: a->out[i] = tdigest_by_rank(td, a->ranks[i], true); break;
        }
    }
    cmd_key_close(&h, false);
    return true;
}

static bool run_quantile(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return query(ctx, args, Q_QUANTILE);
}
static bool run_cdf(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return query(ctx, args, Q_CDF);
}
static bool run_rank(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return query(ctx, args, Q_RANK);
}
static bool run_revrank(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return query(ctx, args, Q_REVRANK);
}
static bool run_byrank(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return query(ctx, args, Q_BYRANK);
}
static bool run_byrevrank(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return query(ctx, args, Q_BYREVRANK);
}

/* One number computed from the digest: trimmed mean, min or max. */
typedef enum scalar_kind { S_TRIMMED, S_MIN, S_MAX } scalar_kind_t;

static bool scalar(cmd_ctx_t *ctx, const cmd_tdigest_scalar_args_t *a, cmd_tdigest_scalar_res_t *r,
                   scalar_kind_t kind)
{
    if (kind == S_TRIMMED && !(a->low < a->high))
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "low", "'low' must be lower than 'high'");
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &tdigest_type, CMD_MUST_EXIST, &h))
        return false;
    const tdigest_t *td = cmd_key_value(&h);
    r->v = kind == S_TRIMMED ? tdigest_trimmed_mean(td, a->low, a->high) : kind == S_MIN ? tdigest_min(td)
                                                                                      : tdigest_max(td);
    cmd_key_close(&h, false);
    return true;
}

static bool run_trimmed_mean(cmd_ctx_t *ctx, const void *args, void *res) { return scalar(ctx, args, res, S_TRIMMED); }
static bool run_min(cmd_ctx_t *ctx, const void *args, void *res) { return scalar(ctx, args, res, S_MIN); }
static bool run_max(cmd_ctx_t *ctx, const void *args, void *res) { return scalar(ctx, args, res, S_MAX); }

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_tdigest_key_args_t *a = args;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &tdigest_type, CMD_MUST_EXIST, &h))
        return false;
    fill_info(cmd_key_value(&h), res);
    cmd_key_close(&h, false);
    return true;
}

/* ------------------------------------------------------------------------ */
/* TDIGEST.MERGE and TDIGEST.RESET                                          */
/* ------------------------------------------------------------------------ */

/* One attempt of the merge with the keys locked: 1 done, 0 refused (error
 * set, unlocked), -1 to try again once room was made (unlocked). */
static int merge_locked(cmd_ctx_t *ctx, const cmd_tdigest_merge_args_t *a, ks_key_t *keys, const tdigest_t **srcs,
                        unsigned *attempts, cmd_tdigest_info_t *r)
{
    size_t n = a->sources.n;
    cmd_key_t h;
    if (!cmd_keys_lock(ctx, keys, n + 1, &h))
        return 0;
    ks_entry_t *dst;
    if (!cmd_keys_find(&h, 0, &tdigest_type, CMD_WRITE, NULL, &dst))
        return 0;
    for (size_t i = 0; i < n; i++) {
        ks_entry_t *e;
        if (!cmd_keys_find(&h, i + 1, &tdigest_type, CMD_READ, NULL, &e))
            return 0;
        if (!e) {
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_NOT_FOUND, "sources", "source '%.*s' does not exist", (int)keys[i + 1].len,
                            (const char *)keys[i + 1].p);
        }
        srcs[i] = ks_entry_value(e);
    }
    /* TDIGEST.MERGE: without OVERRIDE an existing destination is merged too
     * and lends its compression; otherwise the largest of the sources' */
    size_t m = n;
    if (dst && !a->override)
        srcs[m++] = ks_entry_value(dst);
    int64_t comp = a->compression;
    if (!a->compression) {
        if (dst && !a->override) {
            comp = tdigest_compression(ks_entry_value(dst));
        } else {
            for (size_t i = 0; i < n; i++)
                if ((int64_t)tdigest_compression(srcs[i]) > comp)
                    comp = tdigest_compression(srcs[i]);
        }
    }
    uint64_t work = 0, after = tdigest_bytes_for((uint32_t)comp),
             before = dst ? tdigest_type.size(ks_entry_value(dst)) : 0;
    for (size_t i = 0; i < m; i++)
        work += tdigest_type.size(srcs[i]);
    if (!cmd_work_fits(ctx, "sources", work) || !cmd_value_fits(ctx, "compression", "the digest", after)) {
        cmd_key_close(&h, false);
        return 0;
    }
    /* the merge is built while the destination's old digest exists */
    uint64_t add = after + (dst ? 0 : ks_entry_overhead(a->klen));
    if (add > cmd_room_now(ctx)) {
        uint64_t pinned = dst ? before : 0;   /* the keys it reads, each once */
        for (size_t i = 0; i < n; i++) {
            bool again = keys[i + 1].len == a->klen && memcmp(keys[i + 1].p, a->key, a->klen) == 0;
            for (size_t k = 0; k < i && !again; k++)
                again = keys[k + 1].len == keys[i + 1].len && !memcmp(keys[k + 1].p, keys[i + 1].p, keys[i + 1].len);
            pinned += again ? 0 : tdigest_type.size(srcs[i]);
        }
        cmd_keep_t keep = { keys, n + 1, pinned };
        cmd_key_close(&h, false);
        return cmd_room_retry(ctx, add, &keep, attempts) ? -1 : 0;
    }
    bool overflow;
    tdigest_t *td = tdigest_merge((uint32_t)comp, srcs, m, &overflow);
    if (!td) {
        cmd_key_close(&h, false);
        if (overflow)
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, "sources", "overflow: the merge would hold more than 2^53 values");
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory merging");
    }
    if (dst) {
        cmd_key_replace(&h, td);
    } else if (!cmd_key_add(&h, &tdigest_type, td, KS_NO_EXPIRY)) {
        tdigest_free(td);
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the merge");
    }
    fill_info(td, r);
    cmd_key_close(&h, true);
    return 1;
}

static bool run_merge(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_tdigest_merge_args_t *a = args;
    size_t n = a->sources.n;
    ks_key_t *keys = malloc((n + 1) * sizeof(*keys));
    const tdigest_t **srcs = malloc((n + 1) * sizeof(*srcs));
    int done = 0;
    if (!keys || !srcs) {
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        goto out;
    }
    keys[0] = ks_key(ctx->srv->ks, a->key, a->klen);
    const char *p;
    size_t len;
    uint64_t by;
    cmd_batch_iter_t x = cmd_batch_begin(&a->sources);
    for (size_t i = 0; cmd_batch_next(&x, &p, &len, &by); i++)
        keys[i + 1] = ks_key(ctx->srv->ks, p, len);
    /* the token's prefixes before any eviction: a refusal changes nothing */
    if (!cmd_keys_allowed_here(ctx, keys, n + 1) || !cmd_make_room(ctx))
        goto out;
    /* A source named twice counts twice, as in TDIGEST.MERGE (its weight is
     * in the result twice): the sources are read as named, and what they
     * total is bounded like any request's reading. */
    unsigned attempts = 0;
    while ((done = merge_locked(ctx, a, keys, srcs, &attempts, res)) < 0)
        ;
out:
    free(keys);
    free(srcs);
    return done > 0;
}

static void encode_merge(const void *args, wbuf_t *out)
{
    const cmd_tdigest_merge_args_t *a = args;
    put_head(out, a->key, a->klen);
    cmd_batch_put(out, &a->sources, CMD_BATCH_KEYS);
    wbuf_put_u32(out, a->compression);
    wbuf_put_u8(out, a->override);
}

static bool decode_merge(rbuf_t *in, void *args, const char **why)
{
    cmd_tdigest_merge_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    if (!cmd_batch_get(in, &a->sources, CMD_BATCH_KEYS, 0, 0))
        return bad(why, "bad sources");
    a->compression = rbuf_u32(in);
    if (a->compression > TDIGEST_MAX_COMPRESSION)
        return bad(why, "bad compression");
    if (!cmd_get_bool(in, &a->override))
        return bad(why, "bad flag");
    return true;
}

static bool run_reset(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_tdigest_key_args_t *a = args;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &tdigest_type, CMD_WRITE | CMD_MUST_EXIST, &h))
        return false;
    tdigest_t *td = cmd_key_value(&h);
    tdigest_reset(td);
    fill_info(td, res);
    cmd_key_close(&h, true);
    return true;
}

static void encode_key(const void *args, wbuf_t *out)
{
    const cmd_tdigest_key_args_t *a = args;
    put_head(out, a->key, a->klen);
}

static bool decode_key(rbuf_t *in, void *args, const char **why)
{
    cmd_tdigest_key_args_t *a = args;
    return cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why);
}

#define QUERY(NAME, ID, RUN)                                                                                        \
    { NAME, ID, 0, CMD_ACCESS_READ, RUN, NULL, NULL, sizeof(cmd_tdigest_query_args_t), 0, cmd_keys_first }
#define SCALAR(NAME, ID, RUN)                                                                                       \
    { NAME, ID, 0, CMD_ACCESS_READ, RUN, NULL, NULL, sizeof(cmd_tdigest_scalar_args_t),                            \
      sizeof(cmd_tdigest_scalar_res_t), cmd_keys_first }


static bool keys_merge(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_tdigest_merge_args_t *a = args;
    return cmd_batch_keys(a->key, a->klen, &a->sources, visit, ud);
}

const cmd_def_t CMD_TDIGEST_CREATE = { "TDIGEST.CREATE", CMD_ID_TDIGEST_CREATE, CMD_F_WRITE | CMD_F_DENYOOM,
                                       CMD_ACCESS_WRITE, run_create, encode_create, decode_create,
                                       sizeof(cmd_tdigest_create_args_t), sizeof(cmd_tdigest_info_t), cmd_keys_first };
const cmd_def_t CMD_TDIGEST_ADD = { "TDIGEST.ADD", CMD_ID_TDIGEST_ADD, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                    run_add, encode_add, decode_add, sizeof(cmd_tdigest_add_args_t),
                                    sizeof(cmd_tdigest_add_res_t), cmd_keys_first };
const cmd_def_t CMD_TDIGEST_QUANTILE = QUERY("TDIGEST.QUANTILE", CMD_ID_TDIGEST_QUANTILE, run_quantile);
const cmd_def_t CMD_TDIGEST_CDF = QUERY("TDIGEST.CDF", CMD_ID_TDIGEST_CDF, run_cdf);
const cmd_def_t CMD_TDIGEST_RANK = QUERY("TDIGEST.RANK", CMD_ID_TDIGEST_RANK, run_rank);
const cmd_def_t CMD_TDIGEST_REVRANK = QUERY("TDIGEST.REVRANK", CMD_ID_TDIGEST_REVRANK, run_revrank);
const cmd_def_t CMD_TDIGEST_BYRANK = QUERY("TDIGEST.BYRANK", CMD_ID_TDIGEST_BYRANK, run_byrank);
const cmd_def_t CMD_TDIGEST_BYREVRANK = QUERY("TDIGEST.BYREVRANK", CMD_ID_TDIGEST_BYREVRANK, run_byrevrank);
const cmd_def_t CMD_TDIGEST_TRIMMED_MEAN = SCALAR("TDIGEST.TRIMMED_MEAN", CMD_ID_TDIGEST_TRIMMED_MEAN,
                                                  run_trimmed_mean);
const cmd_def_t CMD_TDIGEST_MIN = SCALAR("TDIGEST.MIN", CMD_ID_TDIGEST_MIN, run_min);
const cmd_def_t CMD_TDIGEST_MAX = SCALAR("TDIGEST.MAX", CMD_ID_TDIGEST_MAX, run_max);
const cmd_def_t CMD_TDIGEST_MERGE = { "TDIGEST.MERGE", CMD_ID_TDIGEST_MERGE, CMD_F_WRITE | CMD_F_DENYOOM,
                                      CMD_ACCESS_WRITE, run_merge, encode_merge, decode_merge,
                                      sizeof(cmd_tdigest_merge_args_t), sizeof(cmd_tdigest_info_t), keys_merge };
const cmd_def_t CMD_TDIGEST_RESET = { "TDIGEST.RESET", CMD_ID_TDIGEST_RESET, CMD_F_WRITE, CMD_ACCESS_WRITE, run_reset,
                                      encode_key, decode_key, sizeof(cmd_tdigest_key_args_t),
                                      sizeof(cmd_tdigest_info_t), cmd_keys_first };
const cmd_def_t CMD_TDIGEST_INFO = { "TDIGEST.INFO", CMD_ID_TDIGEST_INFO, 0, CMD_ACCESS_READ, run_info, NULL, NULL,
                                     sizeof(cmd_tdigest_key_args_t), sizeof(cmd_tdigest_info_t), cmd_keys_first };
