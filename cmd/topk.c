/* topk.c - Top-K's operations: see topk.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/keycreate.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "cmd/topk.h"
#include "core/hash.h"
#include "core/topk.h"

#define REC_VERSION 1
#define TOPK_SEED_SALT 0x746f706b2d726e67ULL   /* "topk-rng": seeds decay from the key's bytes */

static void fill_info(const void *value, void *res)
{
    const topk_t *t = value;
    cmd_topk_info_t *r = res;
    r->k = topk_k(t);
    r->width = topk_width(t);
    r->depth = topk_depth(t);
    r->decay = topk_decay(t);
    r->size_bytes = topk_type.size(t);
}

static bool bad(const char **why, const char *what)
{
    *why = what;
    return false;
}

/* ------------------------------------------------------------------------ */
/* TOPK.RESERVE                                                             */
/* ------------------------------------------------------------------------ */

static bool run_reserve(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_topk_reserve_args_t *a = args;
    if (a->decay <= 0)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "decay", "'decay' must be > 0 and <= 1");
    if ((uint64_t)a->width * (uint64_t)a->depth > TOPK_MAX_BUCKETS)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "width", "a %lld × %lld sketch is too large: at most %llu buckets",
                        (long long)a->width, (long long)a->depth, (unsigned long long)TOPK_MAX_BUCKETS);
    uint64_t bytes = topk_bytes_for(a->k, a->width, a->depth);
    if (!cmd_grow(ctx, "width", "the Top-K", bytes, bytes + ks_entry_overhead(a->klen)))
        return false;
    return cmd_create_key(ctx, a->key, a->klen, &topk_type,
                          topk_create_gen(cmd_gen(ctx), a->k, a->width, a->depth, a->decay,
                                          tally_xxh64(a->key, a->klen, TOPK_SEED_SALT)),
                          fill_info, res);
}

static void encode_reserve(const void *args, wbuf_t *out)
{
    const cmd_topk_reserve_args_t *a = args;
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u32(out, a->k);
    wbuf_put_u32(out, a->width);
    wbuf_put_u32(out, a->depth);
    wbuf_put_f64(out, a->decay);
}

static bool decode_reserve(rbuf_t *in, void *args, const char **why)
{
    cmd_topk_reserve_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    a->k = rbuf_u32(in);
    a->width = rbuf_u32(in);
    a->depth = rbuf_u32(in);
    a->decay = rbuf_f64(in);
    if (a->k < 1 || a->k > TOPK_MAX_K || a->width < 1 || a->depth < 1 ||
        (uint64_t)a->width * a->depth > TOPK_MAX_BUCKETS || !(a->decay > 0 && a->decay <= 1))
        return bad(why, "bad parameters");
    return true;
}

/* ------------------------------------------------------------------------ */
/* TOPK.ADD and TOPK.INCRBY                                                 */
/* ------------------------------------------------------------------------ */

static bool run_add(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    const cmd_topk_add_args_t *a = args;
    const char *p;
    size_t len;
    uint64_t by;
    /* the heap keeps a copy of an item it takes in: at most their bytes */
    uint64_t grow = 0;
    cmd_batch_iter_t x = cmd_batch_begin(&a->items);
    while (cmd_batch_next(&x, &p, &len, &by))
        grow += len ? len : 1;
    if (!cmd_make_room_for_key(ctx, grow, a->key, a->klen, 0))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &topk_type, CMD_WRITE | CMD_MUST_EXIST, &h))
        return false;
    topk_t *t = cmd_key_value(&h);
    if (!cmd_value_fits(ctx, "items", "the Top-K", topk_type.size(t) + grow)) {
        cmd_key_close(&h, false);
        return false;
    }
    x = cmd_batch_begin(&a->items);
    for (size_t i = 0; cmd_batch_next(&x, &p, &len, &by); i++) {
        char *out;
        size_t olen;
        topk_add(t, p, len, (uint32_t)by, &out, &olen);
        if (a->expelled) {
            a->expelled[i].p = out;
            a->expelled[i].len = out ? olen : 0;
        } else {
            free(out);
        }
    }
    cmd_key_close(&h, true);
    return true;
}

static void encode_add(const void *args, wbuf_t *out)
{
    const cmd_topk_add_args_t *a = args;
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, a->key, a->klen);
    cmd_batch_put(out, &a->items, 0);
}

static bool decode_add(rbuf_t *in, void *args, const char **why)
{
    cmd_topk_add_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    if (!cmd_batch_get(in, &a->items, 0, 0, 0))
        return bad(why, "bad items");
    a->expelled = NULL;
    return true;
}

static void encode_incrby(const void *args, wbuf_t *out)
{
    const cmd_topk_add_args_t *a = args;
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, a->key, a->klen);
    cmd_batch_put(out, &a->items, CMD_BATCH_BY);
}

static bool decode_incrby(rbuf_t *in, void *args, const char **why)
{
    cmd_topk_add_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    if (!cmd_batch_get(in, &a->items, CMD_BATCH_BY, 1, TOPK_MAX_INCREMENT))
        return bad(why, "bad items");
    a->expelled = NULL;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                    */
/* ------------------------------------------------------------------------ */

void cmd_topk_list_free(cmd_topk_list_res_t *r)
{
    free(r->v);
    free(r->text);
    r->v = NULL;
    r->text = NULL;
    r->n = 0;
}

static bool run_list(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_topk_key_args_t *a = args;
    cmd_topk_list_res_t *r = res;
    memset(r, 0, sizeof(*r));
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &topk_type, CMD_MUST_EXIST, &h))
        return false;
    const topk_t *t = cmd_key_value(&h);
    /* each listed item: its text escaped at worst (6 bytes a byte, and the
     * quotes, as JSON writes it), and its count */
    size_t bytes = topk_item_bytes(t);
    uint64_t estimate = 16 + (6 * (uint64_t)bytes + 2) + (uint64_t)topk_k(t) * 48;
    if (!cmd_answer_fits(ctx, estimate, "the items held are too long to list at once")) {
        cmd_key_close(&h, false);
        return false;
    }
    topk_entry_t *v = malloc(topk_k(t) * sizeof(*v));
    r->v = malloc(topk_k(t) * sizeof(*r->v));
    r->text = malloc(bytes ? bytes : 1);
    if (!v || !r->v || !r->text) {
        cmd_key_close(&h, false);
        free(v);
        cmd_topk_list_free(r);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    size_t m = topk_list(t, v), used = 0;
    for (size_t i = 0; i < m; i++) {
        memcpy(r->text + used, v[i].item, v[i].len);
        r->v[i] = (cmd_topk_entry_t){ r->text + used, v[i].len, v[i].count };
        used += v[i].len;
    }
    r->n = m;
    cmd_key_close(&h, false);
    free(v);
    return true;
}

static bool run_query(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    const cmd_topk_query_args_t *a = args;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &topk_type, CMD_MUST_EXIST, &h))
        return false;
    const topk_t *t = cmd_key_value(&h);
    const char *p;
    size_t len;
    uint64_t by;
    cmd_batch_iter_t x = cmd_batch_begin(&a->items);
    for (size_t i = 0; cmd_batch_next(&x, &p, &len, &by); i++) {
        a->listed[i] = topk_query(t, p, len);
        a->counts[i] = topk_count(t, p, len);
    }
    cmd_key_close(&h, false);
    return true;
}

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_topk_key_args_t *a = args;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &topk_type, CMD_MUST_EXIST, &h))
        return false;
    fill_info(cmd_key_value(&h), res);
    cmd_key_close(&h, false);
    return true;
}

const cmd_def_t CMD_TOPK_RESERVE = { "TOPK.RESERVE", CMD_ID_TOPK_RESERVE, CMD_F_WRITE | CMD_F_DENYOOM,
                                     CMD_ACCESS_WRITE, run_reserve, encode_reserve, decode_reserve,
                                     sizeof(cmd_topk_reserve_args_t), sizeof(cmd_topk_info_t), cmd_keys_first };
const cmd_def_t CMD_TOPK_ADD = { "TOPK.ADD", CMD_ID_TOPK_ADD, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_add,
                                 encode_add, decode_add, sizeof(cmd_topk_add_args_t), 0, cmd_keys_first };
const cmd_def_t CMD_TOPK_INCRBY = { "TOPK.INCRBY", CMD_ID_TOPK_INCRBY, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                    run_add, encode_incrby, decode_incrby, sizeof(cmd_topk_add_args_t), 0,
                                    cmd_keys_first };
const cmd_def_t CMD_TOPK_LIST = { "TOPK.LIST", CMD_ID_TOPK_LIST, 0, CMD_ACCESS_READ, run_list, NULL, NULL,
                                  sizeof(cmd_topk_key_args_t), sizeof(cmd_topk_list_res_t), cmd_keys_first };
const cmd_def_t CMD_TOPK_QUERY = { "TOPK.QUERY", CMD_ID_TOPK_QUERY, 0, CMD_ACCESS_READ, run_query, NULL, NULL,
                                   sizeof(cmd_topk_query_args_t), 0, cmd_keys_first };
const cmd_def_t CMD_TOPK_INFO = { "TOPK.INFO", CMD_ID_TOPK_INFO, 0, CMD_ACCESS_READ, run_info, NULL, NULL,
                                  sizeof(cmd_topk_key_args_t), sizeof(cmd_topk_info_t), cmd_keys_first };
