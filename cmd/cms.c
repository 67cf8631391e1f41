/* cms.c - the Count-Min sketch's operations: see cms.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/cms.h"
#include "cmd/keycreate.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "core/cms.h"

#define REC_VERSION 1

static void fill_info(const void *value, void *res)
{
    const cms_t *c = value;
    cmd_cms_info_t *r = res;
    r->width = cms_width(c);
    r->depth = cms_depth(c);
    r->count = cms_total(c);
    r->conservative = cms_conservative(c);
    r->size_bytes = cms_type.size(c);
}

static bool bad(const char **why, const char *what)
{
    *why = what;
    return false;
}


/* ------------------------------------------------------------------------ */
/* CMS.INITBYDIM                                                            */
/* ------------------------------------------------------------------------ */

static bool run_initbydim(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cms_initbydim_args_t *a = args;
    const char *size_field = a->by_prob ? "error" : "width";
    if (a->width > UINT32_MAX || a->depth > CMS_MAX_CELLS || a->width * a->depth > CMS_MAX_CELLS)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, size_field, "a %llu × %llu sketch is too large: at most %llu counters",
                        (unsigned long long)a->width, (unsigned long long)a->depth,
                        (unsigned long long)CMS_MAX_CELLS);
    uint64_t bytes = cms_bytes_for(a->width, a->depth);
    if (!cmd_grow(ctx, size_field, "the sketch", bytes, bytes + ks_entry_overhead(a->klen)))
        return false;
    return cmd_create_key(ctx, a->key, a->klen, &cms_type,
                          cms_create((uint32_t)a->width, (uint32_t)a->depth, a->conservative), fill_info, res);
}

static void encode_initbydim(const void *args, wbuf_t *out)
{
    const cmd_cms_initbydim_args_t *a = args;
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u64(out, a->width);
    wbuf_put_u64(out, a->depth);
    wbuf_put_u8(out, a->conservative);
    wbuf_put_u8(out, a->by_prob);
}

static bool decode_initbydim(rbuf_t *in, void *args, const char **why)
{
    cmd_cms_initbydim_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    a->width = rbuf_u64(in);
    a->depth = rbuf_u64(in);
    if (!cmd_get_bool(in, &a->conservative) || !cmd_get_bool(in, &a->by_prob))
        return bad(why, "bad flag");
    /* a record is only written for a sketch that was made */
    if (a->width < 1 || a->depth < 1 || a->width > UINT32_MAX || a->depth > CMS_MAX_CELLS ||
        a->width * a->depth > CMS_MAX_CELLS)
        return bad(why, "bad dimensions");
    return true;
}

/* ------------------------------------------------------------------------ */
/* CMS.INCRBY and CMS.QUERY                                                 */
/* ------------------------------------------------------------------------ */

static bool run_incrby(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    const cmd_cms_incrby_args_t *a = args;
    const char *p;
    size_t len;
    uint64_t by, sum = 0;
    cmd_batch_iter_t x = cmd_batch_begin(&a->items);
    while (cmd_batch_next(&x, &p, &len, &by)) {
        sum += by;   /* each <= 2^63 - 1: checking every step keeps the sum exact */
        if (sum > CMS_MAX_COUNT)
            break;
    }
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cms_type, CMD_WRITE | CMD_MUST_EXIST, &h))
        return false;
    cms_t *c = cmd_key_value(&h);
    if (sum > CMS_MAX_COUNT || !cms_can_add(c, sum)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, a->as_increments ? "increments" : "items",
                        "overflow: the increments would take the sketch's total count past %llu; nothing was added",
                        (unsigned long long)CMS_MAX_COUNT);
    }
    x = cmd_batch_begin(&a->items);
    for (size_t i = 0; cmd_batch_next(&x, &p, &len, &by); i++) {
        uint64_t v = by ? cms_incr(c, p, len, by) : cms_query(c, p, len);
        if (a->counts)
            a->counts[i] = v;
    }
    cmd_key_close(&h, sum > 0);
    return true;
}

static void encode_incrby(const void *args, wbuf_t *out)
{
    const cmd_cms_incrby_args_t *a = args;
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, a->as_increments);
    cmd_batch_put(out, &a->items, CMD_BATCH_BY);
}

static bool decode_incrby(rbuf_t *in, void *args, const char **why)
{
    cmd_cms_incrby_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    if (!cmd_get_bool(in, &a->as_increments))
        return bad(why, "bad flag");
    if (!cmd_batch_get(in, &a->items, CMD_BATCH_BY, 0, CMS_MAX_COUNT))
        return bad(why, "bad items");
    a->counts = NULL;
    return true;
}

static bool run_query(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    const cmd_cms_query_args_t *a = args;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cms_type, CMD_MUST_EXIST, &h))
        return false;
    const cms_t *c = cmd_key_value(&h);
    const char *p;
    size_t len;
    uint64_t by;
    cmd_batch_iter_t x = cmd_batch_begin(&a->items);
    for (size_t i = 0; cmd_batch_next(&x, &p, &len, &by); i++)
        a->counts[i] = cms_query(c, p, len);
    cmd_key_close(&h, false);
    return true;
}

/* ------------------------------------------------------------------------ */
/* CMS.MERGE                                                                */
/* ------------------------------------------------------------------------ */

static bool merge_locked(cmd_ctx_t *ctx, const cmd_cms_merge_args_t *a, cmd_key_t *h, const ks_key_t *keys,
                         const size_t *first, const size_t *at, int64_t *w, const __int128 *wsum, const cms_t **srcs,
                         size_t nd, cmd_cms_info_t *r)
{
    size_t n = a->sources.n;
    if (!cmd_keys_find(h, 0, &cms_type, CMD_WRITE | CMD_MUST_EXIST, NULL, NULL))
        return false;
    uint64_t work = 0;
    bool overflow = false;
    for (size_t i = 0; i < n; i++) {
        if (first[i] != i)
            continue;
        ks_entry_t *e;
        if (!cmd_keys_find(h, at[i] + 1, &cms_type, CMD_READ, NULL, &e))
            return false;
        if (!e) {
            const ks_key_t *k = &keys[at[i] + 1];
            cmd_key_close(h, false);
            return cmd_fail(ctx, CMD_E_NOT_FOUND, "sources", "source '%.*s' does not exist", (int)k->len,
                            (const char *)k->p);
        }
        const cms_t *src = ks_entry_value(e);
        srcs[at[i]] = src;
        work += cms_type.size(src);
        __int128 ws = wsum[at[i]];
        if (ws > INT64_MAX || ws < INT64_MIN) {
            overflow |= cms_total(src) > 0;
            ws = 0;
        }
        w[at[i]] = (int64_t)ws;
    }
    cms_t *c = cmd_key_value(h);
    if (!cmd_work_fits(ctx, "sources", work)) {
        cmd_key_close(h, false);
        return false;
    }
    cms_merge_status_t st = CMS_MERGE_OVERFLOW;
    for (size_t i = 0; overflow && i < nd; i++)   /* the dimensions are reported first, as cms_merge does */
        if (cms_width(srcs[i]) != cms_width(c) || cms_depth(srcs[i]) != cms_depth(c))
            st = CMS_MERGE_DIMENSIONS;
    switch (overflow ? st : cms_merge(c, srcs, w, nd)) {
    case CMS_MERGE_OK:
        fill_info(c, r);
        cmd_key_close(h, true);
        return true;
    case CMS_MERGE_DIMENSIONS:
        cmd_fail(ctx, CMD_E_BAD_REQUEST, "sources",
                 "every source must have the destination's width and depth (%u × %u)", cms_width(c), cms_depth(c));
        break;
    case CMS_MERGE_OVERFLOW:
        cmd_fail(ctx, CMD_E_BAD_REQUEST, "weights",
                 "merge overflow: a counter or the total would fall below 0 or exceed %llu (or a row "
                 "exceed the total); nothing was merged",
                 (unsigned long long)CMS_MAX_COUNT);
        break;
    }
    cmd_key_close(h, false);
    return false;
}

static bool run_merge(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cms_merge_args_t *a = args;
    size_t n = a->sources.n;
    ks_t *ks = ctx->srv->ks;
    ks_key_t *keys = malloc((n + 1) * sizeof(*keys));
    int64_t *w = malloc(n * sizeof(*w));
    __int128 *wsum = calloc(n, sizeof(*wsum));
    size_t *first = malloc(n * sizeof(*first)), *at = malloc(n * sizeof(*at));
    const cms_t **srcs = malloc(n * sizeof(*srcs));
    bool ok = false;
    if (!keys || !w || !wsum || !first || !at || !srcs) {
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        goto done;
    }
    keys[0] = ks_key(ks, a->key, a->klen);
    const char *p;
    size_t len;
    uint64_t by;
    cmd_batch_iter_t x = cmd_batch_begin(&a->sources);
    for (size_t i = 0; cmd_batch_next(&x, &p, &len, &by); i++) {
        keys[i + 1] = ks_key(ks, p, len);
        w[i] = a->weights.n ? cmd_array_i64(&a->weights, i) : 1;
    }
    /* A source named more than once is read once, with the sum of its
     * weights: the weighted sum is linear, so the counters are the same
     * (CMS.MERGE of 10 000 copies of one sketch costs what one does).  The
     * sum is taken exactly; one that leaves the int64 range overflows the
     * merge unless the sketch is empty (then it adds nothing). */
    if (!cmd_keys_distinct(keys + 1, n, first)) {
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        goto done;
    }
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        if (first[i] == i) {
            at[i] = nd++;
            keys[nd] = keys[i + 1];
        }
        wsum[at[first[i]]] += w[i];
    }
    cmd_key_t h;
    if (cmd_keys_lock(ctx, keys, nd + 1, &h))
        ok = merge_locked(ctx, a, &h, keys, first, at, w, wsum, srcs, nd, res);
done:
    free(keys);
    free(w);
    free(wsum);
    free(first);
    free(at);
    free(srcs);
    return ok;
}

static void encode_merge(const void *args, wbuf_t *out)
{
    const cmd_cms_merge_args_t *a = args;
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, a->key, a->klen);
    cmd_batch_put(out, &a->sources, CMD_BATCH_KEYS);
    cmd_array_put_i64(out, &a->weights);
}

static bool decode_merge(rbuf_t *in, void *args, const char **why)
{
    cmd_cms_merge_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    if (!cmd_batch_get(in, &a->sources, CMD_BATCH_KEYS, 0, 0))
        return bad(why, "bad sources");
    if (!cmd_array_get(in, &a->weights, 8, 0, CMD_BATCH_MAX) || (a->weights.n && a->weights.n != a->sources.n))
        return bad(why, "bad weights");
    return true;
}

/* ------------------------------------------------------------------------ */
/* CMS.INFO                                                                 */
/* ------------------------------------------------------------------------ */

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cms_key_args_t *a = args;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cms_type, CMD_MUST_EXIST, &h))
        return false;
    fill_info(cmd_key_value(&h), res);
    cmd_key_close(&h, false);
    return true;
}


static bool keys_merge(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_cms_merge_args_t *a = args;
    return cmd_batch_keys(a->key, a->klen, &a->sources, visit, ud);
}

const cmd_def_t CMD_CMS_INITBYDIM = { "CMS.INITBYDIM", CMD_ID_CMS_INITBYDIM, CMD_F_WRITE | CMD_F_DENYOOM,
                                      CMD_ACCESS_WRITE, run_initbydim, encode_initbydim, decode_initbydim,
                                      sizeof(cmd_cms_initbydim_args_t), sizeof(cmd_cms_info_t), cmd_keys_first };
const cmd_def_t CMD_CMS_INCRBY = { "CMS.INCRBY", CMD_ID_CMS_INCRBY, CMD_F_WRITE, CMD_ACCESS_WRITE, run_incrby,
                                   encode_incrby, decode_incrby, sizeof(cmd_cms_incrby_args_t), 0, cmd_keys_first };
const cmd_def_t CMD_CMS_QUERY = { "CMS.QUERY", CMD_ID_CMS_QUERY, 0, CMD_ACCESS_READ, run_query, NULL, NULL,
                                  sizeof(cmd_cms_query_args_t), 0, cmd_keys_first };
const cmd_def_t CMD_CMS_MERGE = { "CMS.MERGE", CMD_ID_CMS_MERGE, CMD_F_WRITE, CMD_ACCESS_WRITE, run_merge,
                                  encode_merge, decode_merge, sizeof(cmd_cms_merge_args_t),
                                  sizeof(cmd_cms_info_t), keys_merge };
const cmd_def_t CMD_CMS_INFO = { "CMS.INFO", CMD_ID_CMS_INFO, 0, CMD_ACCESS_READ, run_info, NULL, NULL,
                                 sizeof(cmd_cms_key_args_t), sizeof(cmd_cms_info_t), cmd_keys_first };
