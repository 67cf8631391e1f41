/* uv.c - HyperLogLog as operations: see uv.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/batch.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "cmd/uv.h"
#include "core/hll.h"

/* ------------------------------------------------------------------------ */
/* PFADD                                                                    */
/* ------------------------------------------------------------------------ */

static bool run_pfadd(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_pfadd_args_t *a = args;
    cmd_uv_res_t *r = res;
    cmd_items_view_t it;
    if (!cmd_items_view(&a->items, &it))
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    /* an HLL is small: room for the largest one a PFADD can leave */
    if (!cmd_make_room_for_key(ctx, hll_memory_max() + ks_entry_overhead(a->klen), a->key, a->klen, 0)) {
        cmd_items_view_free(&it);
        return false;
    }
    int updated;
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &hll_type, CMD_WRITE, &hk)) {
        cmd_items_view_free(&it);
        return false;
    }
    if (hk.e) {
        updated = hll_add_batch(cmd_key_value(&hk), it.p, it.len, a->items.n);
    } else {
        hll_t *h = hll_create();
        updated = h ? hll_add_batch(h, it.p, it.len, a->items.n) : CORE_NOMEM;
        if (updated >= 0) {
            hll_invalidate_cache(h);   /* PFADD creating the key is an update */
            updated = 1;
            if (!cmd_key_add(&hk, &hll_type, h, KS_NO_EXPIRY))
                updated = CORE_NOMEM;
        }
        if (updated < 0)
            hll_free(h);
    }
    cmd_key_close(&hk, updated > 0);
    cmd_items_view_free(&it);
    if (updated < 0)
        return cmd_fail(ctx, cmd_status_code(updated), NULL, "out of memory adding to the HyperLogLog");
    memset(r, 0, sizeof(*r));
    r->updated = updated > 0;
    return true;
}

/* Record: u8 version 1 | key | items. */
static void encode_pfadd(const void *args, wbuf_t *out)
{
    const cmd_pfadd_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    cmd_items_put(out, &a->items);
}

static bool decode_pfadd(rbuf_t *in, void *args, const char **why)
{
    cmd_pfadd_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    if (!cmd_items_get(in, 0, 0, CMD_ITEMS_MAX, &a->items)) {
        *why = "bad items";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* PFCOUNT, PFMERGE                                                         */
/* ------------------------------------------------------------------------ */

/* The key and the other keys of a list as keyspace keys (malloc'd), the
 * first of each key kept in order: a register's maximum over a key taken
 * twice is its maximum over it once.  NULL when out of memory. */
static ks_key_t *distinct_keys(cmd_ctx_t *ctx, const char *key, size_t klen, const cmd_items_t *others, size_t *n)
{
    cmd_items_view_t v;
    size_t total = 1 + others->n, m = 0;
    ks_key_t *keys = malloc(total * sizeof(*keys));
    size_t *first = malloc(total * sizeof(*first));
    if (!keys || !first || !cmd_items_view(others, &v)) {
        free(keys);
        free(first);
        return NULL;
    }
    keys[0] = ks_key(ctx->srv->ks, key, klen);
    for (size_t i = 0; i < others->n; i++)
        keys[i + 1] = ks_key(ctx->srv->ks, v.p[i], v.len[i]);
    cmd_items_view_free(&v);
    if (!cmd_keys_distinct(keys, total, first)) {
        free(keys);
        free(first);
        return NULL;
    }
    for (size_t i = 0; i < total; i++)
        if (first[i] == i)
            keys[m++] = keys[i];
    free(first);
    *n = m;
    return keys;
}

/* PFCOUNT key k2 k3...: the union, computed under all the shards' locks. */
static bool count_union(cmd_ctx_t *ctx, const cmd_pfcount_args_t *a, uint64_t *count)
{
    size_t n;
    uint8_t *max = calloc(HLL_REGISTERS, 1);
    ks_key_t *keys = max ? distinct_keys(ctx, a->key, a->klen, &a->unions, &n) : NULL;
    if (!keys) {
        free(max);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    cmd_key_t h;
    bool ok = cmd_keys_lock(ctx, keys, n, &h);
    for (size_t i = 0; i < n && ok; i++) {
        ks_entry_t *e;
        ok = cmd_keys_find(&h, i, &hll_type, CMD_READ, NULL, &e);
        if (ok && e)
            hll_max_into(ks_entry_value(e), max);
    }
    cmd_key_close(&h, false);
    if (ok)
        *count = hll_count_registers(max);
    free(keys);
    free(max);
    return ok;
}

static bool run_pfcount(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_pfcount_args_t *a = args;
    cmd_uv_res_t *r = res;
    memset(r, 0, sizeof(*r));
    if (a->unions.n)
        return count_union(ctx, a, &r->count);
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &hll_type, CMD_READ, &hk))
        return false;
    hll_t *h = cmd_key_value(&hk);
    if (h) {
        if (hll_cache_valid(h)) {
            r->count = hll_count(h, false, NULL);
        } else {
            /* Redis's PFCOUNT stores the fresh count in the header.  The
             * cache is derived data: not journaled, so a read never needs
             * the journal (a restart recomputes it on the next count). */
            ks_entry_prepare_write(ctx->srv->ks, hk.e);
            r->count = hll_count(h, true, NULL);
        }
    }
    cmd_key_close(&hk, false);
    return true;
}

static bool merge(cmd_ctx_t *ctx, const cmd_pfmerge_args_t *a, ks_key_t *keys, size_t n, uint8_t *max, hll_t **fresh,
                  uint64_t *count)
{
    /* the token's prefixes before any eviction: a refusal changes nothing */
    if (!cmd_keys_allowed_here(ctx, keys, n) ||
        !cmd_make_room_for(ctx, hll_memory_max() + ks_entry_overhead(a->klen)))
        return false;
    cmd_key_t hk;
    if (!cmd_keys_lock(ctx, keys, n, &hk))
        return false;
    /* registers of every HLL involved, the destination's included */
    bool to_dense = false;
    for (size_t i = 0; i < n; i++) {
        ks_entry_t *e;
        if (!cmd_keys_find(&hk, i, &hll_type, i == 0 ? CMD_WRITE : CMD_READ, NULL, &e))
            return false;
        if (e) {
            hll_max_into(ks_entry_value(e), max);
            to_dense |= !hll_is_sparse(ks_entry_value(e));
        }
    }
    bool created = !hk.e;
    hll_t *h = created ? *fresh : cmd_key_value(&hk);
    if (hll_merge_registers(h, max, to_dense) != CORE_OK ||
        (created && !cmd_key_add(&hk, &hll_type, *fresh, KS_NO_EXPIRY))) {
        cmd_key_close(&hk, false);
        return cmd_fail(ctx, cmd_status_code(CORE_NOMEM), NULL, "out of memory merging HyperLogLogs");
    }
    if (created)
        *fresh = NULL;   /* owned by the keyspace */
    *count = hll_count(h, true, NULL);   /* PFMERGE then PFCOUNT */
    cmd_key_close(&hk, true);
    return true;
}

static bool run_pfmerge(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_pfmerge_args_t *a = args;
    cmd_uv_res_t *r = res;
    memset(r, 0, sizeof(*r));
    size_t n = 0;
    uint8_t *max = calloc(HLL_REGISTERS, 1);
    hll_t *fresh = hll_create();
    /* PFMERGE reads a key named twice once: the maxima are the same */
    ks_key_t *keys = max && fresh ? distinct_keys(ctx, a->key, a->klen, &a->sources, &n) : NULL;
    bool ok = keys ? merge(ctx, a, keys, n, max, &fresh, &r->count)
                   : cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    free(keys);
    free(max);
    hll_free(fresh);
    return ok;
}

/* Record: u8 version 1 | key | sources (keys). */
static void encode_pfmerge(const void *args, wbuf_t *out)
{
    const cmd_pfmerge_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    cmd_items_put(out, &a->sources);
}

static bool decode_pfmerge(rbuf_t *in, void *args, const char **why)
{
    cmd_pfmerge_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    if (!cmd_items_get(in, CMD_ITEMS_KEYS | CMD_ITEMS_TEXT, 1, CMD_UV_MAX_KEYS - 1, &a->sources)) {
        *why = "bad sources";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* HLL.EXPORT, HLL.IMPORT                                                   */
/* ------------------------------------------------------------------------ */

static bool run_export(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_hll_key_args_t *a = args;
    cmd_uv_res_t *r = res;
    memset(r, 0, sizeof(*r));
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &hll_type, CMD_READ, &hk))
        return false;
    hll_t *h = cmd_key_value(&hk);
    if (h) {   /* copied under the lock */
        size_t len;
        const uint8_t *b = hll_bytes(h, &len);
        r->data = malloc(len ? len : 1);
        if (r->data) {
            memcpy(r->data, b, len);
            r->len = len;
        }
    }
    cmd_key_close(&hk, false);
    if (!h)
        return cmd_fail(ctx, CMD_E_NOT_FOUND, NULL, "no HyperLogLog at this key");
    if (!r->data)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    return true;
}

static bool run_import(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_hll_import_args_t *a = args;
    cmd_uv_res_t *r = res;
    memset(r, 0, sizeof(*r));
    const char *why;
    hll_t *h = hll_from_redis(a->bytes, a->len, &why);
    if (!h)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "not a valid Redis HyperLogLog: %s", why);
    if (!cmd_grow(ctx, NULL, "the HyperLogLog", hll_memory(h), hll_memory(h) + ks_entry_overhead(a->klen))) {
        hll_free(h);
        return false;
    }
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &hll_type, CMD_WRITE, &hk)) {
        hll_free(h);
        return false;
    }
    r->count = hll_count(h, false, NULL);
    r->sparse = hll_is_sparse(h);
    r->replaced = hk.e != NULL;
    if (r->replaced) {
        cmd_key_replace(&hk, h);
    } else if (!cmd_key_add(&hk, &hll_type, h, KS_NO_EXPIRY)) {
        cmd_key_close(&hk, false);
        hll_free(h);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the HyperLogLog");
    }
    cmd_key_close(&hk, true);
    return true;
}

/* Record: u8 version 1 | key | blob bytes. */
static void encode_import(const void *args, wbuf_t *out)
{
    const cmd_hll_import_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_blob(out, a->bytes, a->len);
}

static bool decode_import(rbuf_t *in, void *args, const char **why)
{
    cmd_hll_import_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    a->bytes = rbuf_blob(in, &a->len);
    if (in->err) {
        *why = "bad bytes";
        return false;
    }
    return true;
}

/* The key, then each of a list of others. */
static bool keys_and_list(const char *key, size_t klen, const cmd_items_t *l, cmd_key_visit_t visit, void *ud)
{
    if (!visit(ud, key, klen))
        return false;
    cmd_items_iter_t it = { 0 };
    const char *p;
    size_t len;
    while (cmd_items_next(l, &it, &p, &len, NULL))
        if (!visit(ud, p, len))
            return false;
    return true;
}

static bool keys_pfcount(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_pfcount_args_t *a = args;
    return keys_and_list(a->key, a->klen, &a->unions, visit, ud);
}

static bool keys_pfmerge(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_pfmerge_args_t *a = args;
    return keys_and_list(a->key, a->klen, &a->sources, visit, ud);
}

const cmd_def_t CMD_PFADD = { "PFADD", CMD_ID_PFADD, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_pfadd,
                              encode_pfadd, decode_pfadd, sizeof(cmd_pfadd_args_t), sizeof(cmd_uv_res_t),
                              cmd_keys_first };
const cmd_def_t CMD_PFCOUNT = { "PFCOUNT", CMD_ID_PFCOUNT, 0, CMD_ACCESS_READ, run_pfcount, NULL, NULL,
                                sizeof(cmd_pfcount_args_t), sizeof(cmd_uv_res_t), keys_pfcount };
const cmd_def_t CMD_PFMERGE = { "PFMERGE", CMD_ID_PFMERGE, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                run_pfmerge, encode_pfmerge, decode_pfmerge, sizeof(cmd_pfmerge_args_t),
                                sizeof(cmd_uv_res_t), keys_pfmerge };
const cmd_def_t CMD_HLL_EXPORT = { "HLL.EXPORT", CMD_ID_HLL_EXPORT, 0, CMD_ACCESS_READ, run_export, NULL, NULL,
                                   sizeof(cmd_hll_key_args_t), sizeof(cmd_uv_res_t), cmd_keys_first };
const cmd_def_t CMD_HLL_IMPORT = { "HLL.IMPORT", CMD_ID_HLL_IMPORT, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                   run_import, encode_import, decode_import, sizeof(cmd_hll_import_args_t),
                                   sizeof(cmd_uv_res_t), cmd_keys_first };
