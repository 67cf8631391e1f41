/* counter.c - counters as operations: see counter.h. */
#include <string.h>

#include "cmd/counter.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "core/counter.h"

static int64_t ttl_left(const ks_t *ks, const ks_entry_t *e, int64_t now_ms)
{
    int64_t x = ks_entry_expire(ks, e);
    if (x == KS_NO_EXPIRY)
        return -1;
    return x > now_ms ? x - now_ms : 0;
}

static bool run_incrby(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_incrby_args_t *a = args;
    cmd_counter_res_t *r = res;
    if (a->by == 0 && !a->has_ttl && !cmd_require_read(ctx, "a counter moved by 0"))
        return false;
    int64_t now_ms = cmd_now_ms(ctx);
    if (!cmd_make_room_for_key(ctx, counter_bytes() + ks_entry_overhead(a->klen), a->key, a->klen, 0))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &counter_type, CMD_WRITE, &h))
        return false;
    counter_t *c = cmd_key_value(&h);
    int64_t value;
    if (!counter_add_fits(c ? counter_value(c) : 0, a->by, &value)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "by", "increment or decrement would overflow");
    }
    bool changed = a->by != 0 || a->has_ttl;
    /* an existing key's TTL first: the one step that can still fail
     * (out of memory for the shard's array of keys with a TTL) */
    if (c && a->has_ttl && !ks_entry_set_expire(ctx->srv->ks, &h.e, now_ms + a->ttl_ms)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory setting the counter's TTL");
    }
    if (c) {
        c = cmd_key_value(&h);   /* the entry may have moved to make room for its TTL */
        counter_set(c, value);
    } else if (changed) {
        c = counter_new(value);
        if (!c || !cmd_key_add(&h, &counter_type, c, a->has_ttl ? now_ms + a->ttl_ms : KS_NO_EXPIRY)) {
            counter_free(c);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the counter");
        }
    }
    r->value = value;
    r->ttl_ms = h.e ? ttl_left(ctx->srv->ks, h.e, now_ms) : -2;
    cmd_key_close(&h, changed);
    return true;
}

/* Record: u8 version 1 | key | i64 by | u8 has_ttl | i64 ttl_ms. */
static void encode_incrby(const void *args, wbuf_t *out)
{
    const cmd_incrby_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u64(out, (uint64_t)a->by);
    wbuf_put_u8(out, a->has_ttl);
    wbuf_put_u64(out, (uint64_t)a->ttl_ms);
}

static bool decode_incrby(rbuf_t *in, void *args, const char **why)
{
    cmd_incrby_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    a->by = (int64_t)rbuf_u64(in);
    uint8_t t = rbuf_u8(in);
    a->ttl_ms = (int64_t)rbuf_u64(in);
    a->has_ttl = t == 1;
    if (t > 1 || (a->has_ttl && (a->ttl_ms < 1 || a->ttl_ms > CMD_COUNTER_MAX_TTL_MS))) {
        *why = "bad ttl";
        return false;
    }
    return true;
}

static bool run_counter_get(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_counter_get_args_t *a = args;
    cmd_counter_res_t *r = res;
    int64_t now_ms = cmd_now_ms(ctx);
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &counter_type, CMD_READ, &h))
        return false;
    r->value = h.e ? counter_value(cmd_key_value(&h)) : 0;
    r->ttl_ms = h.e ? ttl_left(ctx->srv->ks, h.e, now_ms) : -2;
    cmd_key_close(&h, false);
    return true;
}

const cmd_def_t CMD_INCRBY = { "INCRBY", CMD_ID_INCRBY, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_incrby,
                               encode_incrby, decode_incrby, sizeof(cmd_incrby_args_t),
                               sizeof(cmd_counter_res_t), cmd_keys_first };
const cmd_def_t CMD_COUNTER_GET = { "COUNTER.GET", CMD_ID_COUNTER_GET, 0, CMD_ACCESS_READ, run_counter_get, NULL, NULL,
                                    sizeof(cmd_counter_get_args_t), sizeof(cmd_counter_res_t), cmd_keys_first };
