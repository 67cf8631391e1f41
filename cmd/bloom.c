/* bloom.c - Bloom filters as operations: see bloom.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/bloom.h"
#include "cmd/keycreate.h"
#include "cmd/keys.h"
#include "cmd/room.h"

/* What creating the filter takes (bloom_memory), before it is made. */
static uint64_t params_bytes(const cmd_bf_params_t *p)
{
    return bloom_bytes_for(p->error, p->capacity, p->expansion, p->scaling);
}

static bloom_t *params_create(const cmd_ctx_t *ctx, const cmd_bf_params_t *p)
{
    return bloom_create_gen(cmd_gen(ctx), p->error, p->capacity, p->expansion, p->scaling);
}

/* Each item looked up walks every sub-filter, newest first: n items over a
 * filter of many small sub-filters (expansion 1 from capacity 1 adds one
 * per item) may walk as far as a request may read, and no further. */
#define BLOOM_LINK_WALK 64   /* bytes of a sub-filter's record an item's lookup reads, at least */
static bool walk_fits(cmd_ctx_t *ctx, const bloom_t *b, size_t n)
{
    bloom_info_t in;
    bloom_get_info(b, &in);
    return cmd_work_fits(ctx, "items", (uint64_t)n * in.filters * BLOOM_LINK_WALK);
}

/* ------------------------------------------------------------------------ */
/* BF.RESERVE                                                               */
/* ------------------------------------------------------------------------ */

static bool run_reserve(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bf_reserve_args_t *a = args;
    (void)res;
    uint64_t bytes = params_bytes(&a->p);
    return cmd_grow(ctx, "capacity", "the filter", bytes, bytes + ks_entry_overhead(a->klen)) &&
           cmd_create_key(ctx, a->key, a->klen, &bloom_type, params_create(ctx, &a->p), NULL, NULL);
}

static void put_params(wbuf_t *out, const cmd_bf_params_t *p)
{
    wbuf_put_f64(out, p->error);
    wbuf_put_u64(out, p->capacity);
    wbuf_put_u32(out, p->expansion);
}

static bool get_params(rbuf_t *in, bool scaling, cmd_bf_params_t *p, const char **why)
{
    const char *field;
    p->error = rbuf_f64(in);
    p->capacity = rbuf_u64(in);
    p->expansion = rbuf_u32(in);
    p->scaling = scaling;
    if (in->err || bloom_validate(p->error, p->capacity, p->expansion, p->scaling, &field)) {
        *why = "bad filter parameters";
        return false;
    }
    return true;
}

/* Record: u8 version 1 | key | u8 scaling | f64 error | u64 capacity |
 * u32 expansion. */
static void encode_reserve(const void *args, wbuf_t *out)
{
    const cmd_bf_reserve_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, a->p.scaling);
    put_params(out, &a->p);
}

static bool decode_reserve(rbuf_t *in, void *args, const char **why)
{
    cmd_bf_reserve_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    uint8_t scaling = rbuf_u8(in);
    if (scaling > 1) {
        *why = "bad scaling";
        return false;
    }
    return get_params(in, scaling, &a->p, why);
}

/* ------------------------------------------------------------------------ */
/* BF.INSERT                                                                */
/* ------------------------------------------------------------------------ */

static bool insert(cmd_ctx_t *ctx, const cmd_bf_insert_args_t *a, const cmd_items_view_t *it, cmd_bf_res_t *r)
{
    size_t n = a->items.n;
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        if (!cmd_key_open(ctx, a->key, a->klen, &bloom_type, CMD_WRITE | (a->nocreate ? CMD_MUST_EXIST : 0), &h))
            return false;
        bloom_t *b = cmd_key_value(&h);
        bool created = !b;
        uint64_t base = created ? 0 : bloom_memory(b), room = cmd_room_now(ctx), cap = cmd_value_limit(ctx),
                 first = created ? params_bytes(&a->p) : 0;
        uint64_t extra = created ? first + ks_entry_overhead(a->klen) : 0;
        ks_key_t kk = ks_key(ctx->srv->ks, a->key, a->klen);
        cmd_keep_t keep = { &kk, 1, base };   /* the filter itself is not evicted for its own growth */
        if (created && (first > cap || extra > room)) {
            cmd_key_close(&h, false);
            if (!cmd_value_fits(ctx, "capacity", "the filter", first) || !cmd_room_retry(ctx, extra, &keep, &attempts))
                return false;
            continue;
        }
        if (!created && !walk_fits(ctx, b, n)) {
            cmd_key_close(&h, false);
            return false;
        }
        if (created)
            b = params_create(ctx, &a->p);
        uint64_t limit = cap;   /* what the filter may reach in this attempt */
        if (room != UINT64_MAX && (created ? first : base) + room - extra < limit)
            limit = (created ? first : base) + room - extra;
        bloom_undo_t *u = b ? bloom_undo_begin(b) : NULL;
        int rc = u ? BLOOM_ADDED : BLOOM_NOMEM;
        bool changed = created;
        size_t i = 0, added = 0;
        for (; i < n && rc >= 0; i++) {
            rc = bloom_add(b, it->p[i], it->len[i], limit == UINT64_MAX ? 0 : limit, u);
            bool fresh = rc == BLOOM_ADDED;
            if (a->added)
                a->added[i] = fresh;
            changed |= fresh;
            added += fresh;
        }
        if (rc == BLOOM_BUDGET) {
            /* the next link is needed; the rest of the batch may need more:
             * room is made for the most it may take, or refused at once */
            uint64_t reach = bloom_memory(b) + bloom_next_link_bytes(b), rest = bloom_growth_bound(b, n - (i - 1));
            uint64_t more = bloom_memory(b) - base + (created ? ks_entry_overhead(a->klen) : 0);
            more = rest > UINT64_MAX - more ? UINT64_MAX : more + rest;
            bloom_undo_rollback(b, u);
            if (created)
                bloom_free(b);
            cmd_key_close(&h, false);
            if (!cmd_value_fits(ctx, "items", "the filter's next sub-filter", reach) ||
                !cmd_room_retry(ctx, more, &keep, &attempts))
                return false;
            continue;
        }
        int stop = 0;
        if (a->partial && (rc == BLOOM_FULL || rc == BLOOM_LIMIT)) {
            stop = rc;   /* RedisBloom's rule: the earlier items stay */
            rc = BLOOM_PRESENT;
        }
        if (rc < 0) {
            bloom_undo_rollback(b, u);
            if (created)
                bloom_free(b);
            cmd_key_close(&h, false);
            if (rc == BLOOM_FULL)
                return cmd_fail(ctx, cmd_status_code(rc), NULL, "non scaling filter is full; nothing was added");
            if (rc == BLOOM_LIMIT)
                return cmd_fail(ctx, cmd_status_code(rc), NULL,
                                "the filter cannot grow: its next sub-filter cannot be built (its error rate "
                                "underflows, or its size overflows); nothing was added");
            return cmd_fail(ctx, cmd_status_code(rc), NULL, "out of memory adding to the filter; nothing was added");
        }
        bloom_undo_commit(u);
        if (created && !cmd_key_add(&h, &bloom_type, b, KS_NO_EXPIRY)) {
            bloom_free(b);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory creating the filter");
        }
        cmd_key_close(&h, changed);
        r->n = added;
        r->done = i;
        r->stop = stop;
        return true;
    }
}

static bool run_insert(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bf_insert_args_t *a = args;
    cmd_items_view_t it;
    if (!cmd_items_view(&a->items, &it))
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    bool ok = insert(ctx, a, &it, res);
    cmd_items_view_free(&it);
    return ok;
}

/* Record: u8 version 1 | key | u8 flags (1 nocreate, 2 scaling) | f64 error
 * | u64 capacity | u32 expansion | items; version 2 (a partial batch) has
 * the same layout and flag 4 (partial). */
static void encode_insert(const void *args, wbuf_t *out)
{
    const cmd_bf_insert_args_t *a = args;
    wbuf_put_u8(out, a->partial ? 2 : 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, (uint8_t)((a->nocreate ? 1 : 0) | (a->p.scaling ? 2 : 0) | (a->partial ? 4 : 0)));
    put_params(out, &a->p);
    cmd_items_put(out, &a->items);
}

static bool decode_insert(rbuf_t *in, void *args, const char **why)
{
    cmd_bf_insert_args_t *a = args;
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
    if (flags > (version == 2 ? 7 : 3) || (version == 2 && !(flags & 4))) {
        *why = "bad flags";
        return false;
    }
    a->nocreate = flags & 1;
    a->partial = flags & 4;
    if (!get_params(in, flags & 2, &a->p, why))
        return false;
    if (!cmd_items_get(in, 0, 1, CMD_ITEMS_MAX, &a->items)) {
        *why = "bad items";
        return false;
    }
    a->added = NULL;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Reads: BF.MEXISTS, BF.EXISTS, BF.INFO, BF.CARD                           */
/* ------------------------------------------------------------------------ */

static bool run_exists(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bf_exists_args_t *a = args;
    cmd_bf_res_t *r = res;
    cmd_items_view_t it;
    if (!cmd_items_view(&a->items, &it))
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &bloom_type, CMD_READ, &h)) {
        cmd_items_view_free(&it);
        return false;
    }
    const bloom_t *b = cmd_key_value(&h);
    if (b && !walk_fits(ctx, b, a->items.n)) {
        cmd_key_close(&h, false);
        cmd_items_view_free(&it);
        return false;
    }
    r->n = 0;
    for (size_t i = 0; i < a->items.n; i++) {
        a->found[i] = b && bloom_check(b, it.p[i], it.len[i]);
        r->n += a->found[i];
    }
    cmd_key_close(&h, false);
    cmd_items_view_free(&it);
    return true;
}

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bf_key_args_t *a = args;
    cmd_bf_info_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &bloom_type, CMD_MUST_EXIST, &h))
        return false;
    bloom_get_info(cmd_key_value(&h), &r->info);
    cmd_key_close(&h, false);
    return true;
}

static bool run_card(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bf_key_args_t *a = args;
    cmd_bf_info_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &bloom_type, CMD_READ, &h))
        return false;
    memset(&r->info, 0, sizeof(r->info));
    if (cmd_key_value(&h))
        bloom_get_info(cmd_key_value(&h), &r->info);
    cmd_key_close(&h, false);
    return true;
}

/* ------------------------------------------------------------------------ */
/* BF.SCANDUMP, BF.LOADCHUNK                                                */
/* ------------------------------------------------------------------------ */

/* BF.SCANDUMP's header: one entry per sub-filter. */
static uint64_t header_len(const void *v)
{
    bloom_info_t in;
    bloom_get_info(v, &in);
    return BLOOM_DUMP_HEADER_FIXED + (uint64_t)BLOOM_DUMP_LINK * in.filters;
}

static const cmd_filterdump_t bloom_dump = { &bloom_dump_ops, NULL, header_len };

static bool run_scandump(cmd_ctx_t *ctx, const void *args, void *res)
{
    return cmd_filter_scandump(ctx, &bloom_dump, args, res);
}

static bool run_loadchunk(cmd_ctx_t *ctx, const void *args, void *res)
{
    return cmd_filter_loadchunk(ctx, &bloom_dump, args, res);
}

const cmd_def_t CMD_BF_RESERVE = { "BF.RESERVE", CMD_ID_BF_RESERVE, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                   run_reserve, encode_reserve, decode_reserve, sizeof(cmd_bf_reserve_args_t),
                                   sizeof(cmd_bf_res_t), cmd_keys_first };
const cmd_def_t CMD_BF_INSERT = { "BF.INSERT", CMD_ID_BF_INSERT, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                  run_insert, encode_insert, decode_insert, sizeof(cmd_bf_insert_args_t),
                                  sizeof(cmd_bf_res_t), cmd_keys_first };
const cmd_def_t CMD_BF_MEXISTS = { "BF.MEXISTS", CMD_ID_BF_MEXISTS, 0, CMD_ACCESS_READ, run_exists, NULL, NULL,
                                   sizeof(cmd_bf_exists_args_t), sizeof(cmd_bf_res_t), cmd_keys_first };
const cmd_def_t CMD_BF_EXISTS = { "BF.EXISTS", CMD_ID_BF_EXISTS, 0, CMD_ACCESS_READ, run_exists, NULL, NULL,
                                  sizeof(cmd_bf_exists_args_t), sizeof(cmd_bf_res_t), cmd_keys_first };
const cmd_def_t CMD_BF_INFO = { "BF.INFO", CMD_ID_BF_INFO, 0, CMD_ACCESS_READ, run_info, NULL, NULL,
                                sizeof(cmd_bf_key_args_t), sizeof(cmd_bf_info_res_t), cmd_keys_first };
const cmd_def_t CMD_BF_CARD = { "BF.CARD", CMD_ID_BF_CARD, 0, CMD_ACCESS_READ, run_card, NULL, NULL,
                                sizeof(cmd_bf_key_args_t), sizeof(cmd_bf_info_res_t), cmd_keys_first };
const cmd_def_t CMD_BF_SCANDUMP = { "BF.SCANDUMP", CMD_ID_BF_SCANDUMP, 0, CMD_ACCESS_READ, run_scandump, NULL, NULL,
                                    sizeof(cmd_scandump_args_t), sizeof(cmd_scandump_res_t), cmd_keys_first };
const cmd_def_t CMD_BF_LOADCHUNK = { "BF.LOADCHUNK", CMD_ID_BF_LOADCHUNK, CMD_F_WRITE | CMD_F_DENYOOM,
                                     CMD_ACCESS_WRITE, run_loadchunk, cmd_loadchunk_encode, cmd_loadchunk_decode,
                                     sizeof(cmd_loadchunk_args_t), sizeof(cmd_loadchunk_res_t), cmd_keys_first };
