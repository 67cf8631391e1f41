/* cuckoo.c - Cuckoo filters as operations: see cuckoo.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/batch.h"
#include "cmd/cuckoo.h"
#include "cmd/keycreate.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "core/hash.h"

#define CUCKOO_SEED_SALT 0x6375636b6f6fULL   /* "cuckoo": seeds evictions from the key */

static uint64_t key_seed(const char *key, size_t klen) { return tally_xxh64(key, klen, CUCKOO_SEED_SALT); }

/* ------------------------------------------------------------------------ */
/* CF.RESERVE                                                               */
/* ------------------------------------------------------------------------ */

static bool run_reserve(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cf_reserve_args_t *a = args;
    (void)res;
    uint64_t bytes = cuckoo_bytes_for(&a->p);
    return cmd_grow(ctx, "capacity", "the filter", bytes, bytes + ks_entry_overhead(a->klen)) &&
           cmd_create_key(ctx, a->key, a->klen, &cuckoo_type,
                          cuckoo_create_gen(cmd_gen(ctx), &a->p, key_seed(a->key, a->klen)), NULL, NULL);
}

/* Record: u8 version 1 | key | u64 capacity | u32 bucket_size |
 * u32 max_iterations | u32 expansion | u32 fingerprint bits. */
static void encode_reserve(const void *args, wbuf_t *out)
{
    const cmd_cf_reserve_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u64(out, a->p.capacity);
    wbuf_put_u32(out, a->p.bucket_size);
    wbuf_put_u32(out, a->p.max_iterations);
    wbuf_put_u32(out, a->p.expansion);
    wbuf_put_u32(out, a->p.fp_bits);
}

static bool decode_reserve(rbuf_t *in, void *args, const char **why)
{
    cmd_cf_reserve_args_t *a = args;
    const char *field;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    a->p.capacity = rbuf_u64(in);
    a->p.bucket_size = rbuf_u32(in);
    a->p.max_iterations = rbuf_u32(in);
    a->p.expansion = rbuf_u32(in);
    a->p.fp_bits = rbuf_u32(in);
    if (in->err || cuckoo_validate(&a->p, 0, &field)) {
        *why = "bad filter parameters";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* CF.INSERT                                                                */
/* ------------------------------------------------------------------------ */

static bool insert(cmd_ctx_t *ctx, const cmd_cf_items_args_t *a, const cmd_items_view_t *it, cmd_cf_res_t *r)
{
    size_t n = a->items.n;
    /* Room is asked for what the batch adds, as for BF.INSERT: a sub-filter
     * is added only while the filter stays within what the limits allow
     * now; one that would pass it stops the batch, which is rolled back, and
     * the request is refused (--max-value-size) or makes room and starts
     * again. */
    cuckoo_params_t dp = { a->capacity ? a->capacity : CUCKOO_DEFAULT_CAPACITY, CUCKOO_DEFAULT_BUCKET_SIZE,
                           CUCKOO_DEFAULT_MAX_ITERATIONS, CUCKOO_DEFAULT_EXPANSION, CUCKOO_DEFAULT_FP_BITS };
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        if (!cmd_key_open(ctx, a->key, a->klen, &cuckoo_type, CMD_WRITE | (a->nocreate ? CMD_MUST_EXIST : 0), &h))
            return false;
        cuckoo_t *c = cmd_key_value(&h);
        bool created = !c;
        if (c && a->partial) {   /* RedisBloom's check, once before the items */
            cuckoo_info_t in;
            cuckoo_get_info(c, &in);
            if (in.filters >= CUCKOO_MAX_FILTERS) {
                cmd_key_close(&h, false);
                return cmd_fail(ctx, cmd_status_code(CORE_LIMIT), NULL,
                                "maximum expansions reached: the filter has %d sub-filters; nothing was added",
                                CUCKOO_MAX_FILTERS);
            }
        }
        uint64_t extra = created ? cuckoo_bytes_for(&dp) + ks_entry_overhead(a->klen) : 0;
        ks_key_t kk = ks_key(ctx->srv->ks, a->key, a->klen);
        cmd_keep_t keep = { &kk, 1, c ? cuckoo_memory(c) : 0 };   /* not evicted for its own growth */
        if (extra > cmd_room_now(ctx)) {
            cmd_key_close(&h, false);
            if (!cmd_room_retry(ctx, extra, &keep, &attempts))
                return false;
            continue;
        }
        if (created)
            c = cuckoo_create_gen(cmd_gen(ctx), &dp, key_seed(a->key, a->klen));
        uint64_t base = c ? cuckoo_memory(c) : 0, room = cmd_room_now(ctx), limit = cmd_value_limit(ctx);
        if (room != UINT64_MAX && base + room - extra < limit)
            limit = base + room - extra;
        cuckoo_undo_t *u = c ? cuckoo_undo_begin(c) : NULL;
        int rc = u ? CUCKOO_ADDED : CUCKOO_NOMEM;
        bool changed = created;
        size_t i = 0, added = 0;
        for (; i < n && rc >= 0; i++) {
            rc = cuckoo_add_within(c, it->p[i], it->len[i], a->nx, limit == UINT64_MAX ? 0 : limit, u);
            if (a->noroom)
                a->noroom[i] = false;
            if (a->partial && (rc == CUCKOO_FULL || rc == CUCKOO_MAXEXP)) {
                if (a->noroom)   /* skipped, unchanged by it (RedisBloom's -1) */
                    a->noroom[i] = true;
                rc = CUCKOO_EXISTS;
            }
            bool fresh = rc == CUCKOO_ADDED;
            if (a->out)
                a->out[i] = fresh;
            changed |= fresh;
            added += fresh;
        }
        if (rc == CUCKOO_BUDGET) {
            /* the next sub-filter is needed; room is made for the sub-filters
             * that hold twice the rest of the batch (an estimate: a full
             * sub-filter is rare before then, and is asked for again) */
            uint64_t reach = cuckoo_memory(c) + cuckoo_next_filter_bytes(c);
            uint64_t more = cuckoo_memory(c) - base + extra + cuckoo_growth_estimate(c, 2 * (n - (i - 1)));
            cuckoo_undo_rollback(c, u);
            if (created)
                cuckoo_free(c);
            cmd_key_close(&h, false);
            if (!cmd_value_fits(ctx, "items", "the filter's next sub-filter", reach) ||
                !cmd_room_retry(ctx, more, &keep, &attempts))
                return false;
            continue;
        }
        if (rc < 0) {
            cuckoo_undo_rollback(c, u);
            if (created)
                cuckoo_free(c);
            cmd_key_close(&h, false);
            if (rc == CUCKOO_FULL)
                return cmd_fail(ctx, cmd_status_code(rc), NULL,
                                "the filter is full (no free slot after max_iterations evictions, and it cannot "
                                "grow); nothing was added");
            if (rc == CUCKOO_MAXEXP)
                return cmd_fail(ctx, cmd_status_code(rc), NULL,
                                "maximum expansions reached: the filter has %d sub-filters; nothing was added",
                                CUCKOO_MAX_FILTERS);
            return cmd_fail(ctx, cmd_status_code(rc), NULL, "out of memory adding to the filter; nothing was added");
        }
        cuckoo_undo_commit(u);
        if (created && !cmd_key_add(&h, &cuckoo_type, c, KS_NO_EXPIRY)) {
            cuckoo_free(c);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory creating the filter");
        }
        cmd_key_close(&h, changed);
        r->n = added;
        return true;
    }
}

static bool run_insert(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cf_items_args_t *a = args;
    cmd_items_view_t it;
    if (!cmd_items_view(&a->items, &it))
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    bool ok = insert(ctx, a, &it, res);
    cmd_items_view_free(&it);
    return ok;
}

/* Record: u8 version 1 | key | u8 nx | items; with the Redis protocol's
 * options, version 2: u8 2 | key | u8 flags (1 nx, 2 nocreate, 4 partial)
 * | u64 capacity (0: the default) | items. */
static void encode_insert(const void *args, wbuf_t *out)
{
    const cmd_cf_items_args_t *a = args;
    bool v2 = a->nocreate || a->capacity || a->partial;
    wbuf_put_u8(out, v2 ? 2 : 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, (uint8_t)(a->nx | (a->nocreate ? 2 : 0) | (a->partial ? 4 : 0)));
    if (v2)
        wbuf_put_u64(out, a->capacity);
    cmd_items_put(out, &a->items);
}

static bool decode_insert(rbuf_t *in, void *args, const char **why)
{
    cmd_cf_items_args_t *a = args;
    memset(a, 0, sizeof(*a));
    uint8_t version = rbuf_u8(in);
    if (version != 1 && version != 2) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    uint8_t flags = rbuf_u8(in);
    if (version == 2) {
        a->capacity = rbuf_u64(in);
        cuckoo_params_t p = { a->capacity, CUCKOO_DEFAULT_BUCKET_SIZE, CUCKOO_DEFAULT_MAX_ITERATIONS,
                              CUCKOO_DEFAULT_EXPANSION, CUCKOO_DEFAULT_FP_BITS };
        const char *field;
        if (in->err || (a->capacity && cuckoo_validate(&p, 0, &field))) {
            *why = "bad filter parameters";
            return false;
        }
    }
    if (in->err || flags > (version == 2 ? 7 : 1) || !cmd_items_get(in, 0, 1, CMD_ITEMS_MAX, &a->items)) {
        *why = "bad items";
        return false;
    }
    a->nx = flags & 1;
    a->nocreate = flags & 2;
    a->partial = flags & 4;
    return true;
}

/* ------------------------------------------------------------------------ */
/* CF.DEL, CF.COMPACT                                                       */
/* ------------------------------------------------------------------------ */

static bool run_del(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cf_items_args_t *a = args;
    cmd_cf_res_t *r = res;
    cmd_items_view_t it;
    if (!cmd_items_view(&a->items, &it))
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cuckoo_type, CMD_WRITE | CMD_MUST_EXIST, &h)) {
        cmd_items_view_free(&it);
        return false;
    }
    cuckoo_t *c = cmd_key_value(&h);
    r->n = 0;
    for (size_t i = 0; i < a->items.n; i++) {
        bool removed = cuckoo_delete(c, it.p[i], it.len[i], NULL);
        if (a->out)
            a->out[i] = removed;
        r->n += removed;
    }
    cmd_key_close(&h, r->n > 0);
    cmd_items_view_free(&it);
    return true;
}

/* Record: u8 version 1 | key | items. */
static void encode_del(const void *args, wbuf_t *out)
{
    const cmd_cf_items_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    cmd_items_put(out, &a->items);
}

static bool decode_del(rbuf_t *in, void *args, const char **why)
{
    cmd_cf_items_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    if (!cmd_items_get(in, 0, 1, CMD_ITEMS_MAX, &a->items)) {
        *why = "bad items";
        return false;
    }
    a->nx = false;
    a->out = NULL;
    return true;
}

static bool run_compact(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cf_key_args_t *a = args;
    cmd_cf_info_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cuckoo_type, CMD_WRITE | CMD_MUST_EXIST, &h))
        return false;
    cuckoo_t *c = cmd_key_value(&h);
    cuckoo_compact(c);
    cuckoo_get_info(c, &r->info);
    cmd_key_close(&h, true);
    return true;
}

/* Record: u8 version 1 | key. */
static void encode_key(const void *args, wbuf_t *out)
{
    const cmd_cf_key_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
}

static bool decode_key(rbuf_t *in, void *args, const char **why)
{
    cmd_cf_key_args_t *a = args;
    return cmd_get_head(in, 1, false, &a->key, &a->klen, why);
}

/* ------------------------------------------------------------------------ */
/* Reads: CF.MEXISTS, CF.EXISTS, CF.COUNT, CF.INFO                          */
/* ------------------------------------------------------------------------ */

static bool run_exists(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cf_items_args_t *a = args;
    cmd_cf_res_t *r = res;
    cmd_items_view_t it;
    if (!cmd_items_view(&a->items, &it))
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cuckoo_type, CMD_READ, &h)) {
        cmd_items_view_free(&it);
        return false;
    }
    const cuckoo_t *c = cmd_key_value(&h);
    r->n = 0;
    for (size_t i = 0; i < a->items.n; i++) {
        a->out[i] = c && cuckoo_check(c, it.p[i], it.len[i]);
        r->n += a->out[i];
    }
    cmd_key_close(&h, false);
    cmd_items_view_free(&it);
    return true;
}

static bool run_count(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cf_count_args_t *a = args;
    cmd_cf_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cuckoo_type, CMD_READ, &h))
        return false;
    const cuckoo_t *c = cmd_key_value(&h);
    r->n = c ? cuckoo_count(c, a->item, a->ilen) : 0;
    cmd_key_close(&h, false);
    return true;
}

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_cf_key_args_t *a = args;
    cmd_cf_info_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &cuckoo_type, CMD_MUST_EXIST, &h))
        return false;
    cuckoo_get_info(cmd_key_value(&h), &r->info);
    cmd_key_close(&h, false);
    return true;
}

/* ------------------------------------------------------------------------ */
/* CF.SCANDUMP, CF.LOADCHUNK                                                */
/* ------------------------------------------------------------------------ */

static const cmd_filterdump_t cuckoo_dump = {
    &cuckoo_dump_ops, "only a filter with 8-bit fingerprints can be dumped: RedisBloom's format has no other size",
    NULL   /* its header is 38 bytes */
};

static bool run_scandump(cmd_ctx_t *ctx, const void *args, void *res)
{
    return cmd_filter_scandump(ctx, &cuckoo_dump, args, res);
}

static bool run_loadchunk(cmd_ctx_t *ctx, const void *args, void *res)
{
    return cmd_filter_loadchunk(ctx, &cuckoo_dump, args, res);
}

const cmd_def_t CMD_CF_RESERVE = { "CF.RESERVE", CMD_ID_CF_RESERVE, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                   run_reserve, encode_reserve, decode_reserve, sizeof(cmd_cf_reserve_args_t),
                                   sizeof(cmd_cf_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_INSERT = { "CF.INSERT", CMD_ID_CF_INSERT, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                  run_insert, encode_insert, decode_insert, sizeof(cmd_cf_items_args_t),
                                  sizeof(cmd_cf_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_MEXISTS = { "CF.MEXISTS", CMD_ID_CF_MEXISTS, 0, CMD_ACCESS_READ, run_exists, NULL, NULL,
                                   sizeof(cmd_cf_items_args_t), sizeof(cmd_cf_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_EXISTS = { "CF.EXISTS", CMD_ID_CF_EXISTS, 0, CMD_ACCESS_READ, run_exists, NULL, NULL,
                                  sizeof(cmd_cf_items_args_t), sizeof(cmd_cf_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_DEL = { "CF.DEL", CMD_ID_CF_DEL, CMD_F_WRITE, CMD_ACCESS_WRITE, run_del, encode_del,
                               decode_del, sizeof(cmd_cf_items_args_t), sizeof(cmd_cf_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_COUNT = { "CF.COUNT", CMD_ID_CF_COUNT, 0, CMD_ACCESS_READ, run_count, NULL, NULL,
                                 sizeof(cmd_cf_count_args_t), sizeof(cmd_cf_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_INFO = { "CF.INFO", CMD_ID_CF_INFO, 0, CMD_ACCESS_READ, run_info, NULL, NULL,
                                sizeof(cmd_cf_key_args_t), sizeof(cmd_cf_info_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_COMPACT = { "CF.COMPACT", CMD_ID_CF_COMPACT, CMD_F_WRITE, CMD_ACCESS_WRITE, run_compact,
                                   encode_key, decode_key, sizeof(cmd_cf_key_args_t), sizeof(cmd_cf_info_res_t),
                                   cmd_keys_first };
const cmd_def_t CMD_CF_SCANDUMP = { "CF.SCANDUMP", CMD_ID_CF_SCANDUMP, 0, CMD_ACCESS_READ, run_scandump, NULL, NULL,
                                    sizeof(cmd_scandump_args_t), sizeof(cmd_scandump_res_t), cmd_keys_first };
const cmd_def_t CMD_CF_LOADCHUNK = { "CF.LOADCHUNK", CMD_ID_CF_LOADCHUNK, CMD_F_WRITE | CMD_F_DENYOOM,
                                     CMD_ACCESS_WRITE, run_loadchunk, cmd_loadchunk_encode, cmd_loadchunk_decode,
                                     sizeof(cmd_loadchunk_args_t), sizeof(cmd_loadchunk_res_t), cmd_keys_first };
