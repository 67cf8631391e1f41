/*
 * ts_rules.c - compaction rules as operations: TS.CREATERULE and
 * TS.DELETERULE (cmd/ts.h), and their journal records:
 *
 *   TS.CREATERULE   u8 1 | key | key dest | u8 agg | f64 quantile
 *                   | i64 bucket_ms | i64 align | u8 generation
 *   TS.DELETERULE   u8 1 | key | key dest
 *
 * A rule computes its buckets by the rules of the generation that created
 * it (core/ts.h, TS_RULE_GEN_*), for life: the record holds the generation
 * the rule was created with (2 for a rule created now; what a replayed
 * request of an older journal carried, 1 when it carried none), so replay
 * creates the same rule whatever the release that replays it.
 */
#include <stdlib.h>
#include <string.h>

#include "cmd/keys.h"
#include "cmd/room.h"
#include "cmd/ts.h"
#include "cmd/ts_group.h"

/* The source of the series at key (a copy in *buf), read under its lock. */
static bool peek_source(cmd_ctx_t *ctx, const char *key, size_t klen, char **buf, size_t *len)
{
    cmd_key_t h;
    *buf = NULL;
    *len = 0;
    if (!cmd_key_open(ctx, key, klen, NULL, CMD_READ, &h))
        return false;
    if (h.e && ks_entry_type(h.e) == &ts_type)
        ts_copy_source(cmd_key_value(&h), buf, len);
    cmd_key_close(&h, false);
    return true;
}

static int clip(size_t len) { return (int)(len > 200 ? 200 : len); }

/* One attempt, with the source's source b (NULL: none) as looked at before
 * locking: 1 done (created, or refused with ctx->err), 0 when the source's
 * source changed in between (try again), -1 refused before anything was
 * locked. */
static int create_rule(cmd_ctx_t *ctx, const cmd_ts_createrule_args_t *a, const char *b, size_t blen)
{
    ks_t *ks = ctx->srv->ks;
    const char *key = a->key, *dest = a->dest;
    size_t klen = a->klen, dlen = a->dlen;
    /* the destination with its links, the series and the source it names,
     * all locked: their rules decide what is live */
    ks_key_t extra[2] = { ks_key(ks, key, klen), b ? ks_key(ks, b, blen) : ks_key(ks, key, klen) };
    ts_group_t g;
    ks_entry_t *se, *be = NULL, *de;
    if (!ts_group_open_with(ctx, dest, dlen, CMD_WRITE | CMD_MUST_EXIST | TS_GROUP_SOURCE, extra, b ? 2 : 1, &g))
        return -1;
    de = g.h.e;
    if ((b && !cmd_keys_find(&g.h, g.extra_at + 1, NULL, CMD_READ, NULL, &be)) ||
        !cmd_keys_find(&g.h, g.extra_at, &ts_type, CMD_WRITE | CMD_MUST_EXIST, NULL, &se)) {
        free(g.names);
        return -1;
    }
    ts_t *src = ks_entry_value(se), *dst = ks_entry_value(de);
    char *b2 = NULL;
    size_t b2len = 0;
    ts_copy_source(src, &b2, &b2len);
    bool same = !b == !b2 && (!b || (blen == b2len && memcmp(b, b2, blen) == 0));
    free(b2);
    if (!same) {   /* changed between the look and the lock: again */
        ts_group_close(&g, false);
        return 0;
    }
    size_t alen = 0;
    const char *s = ts_source(dst, &alen);
    /* a rule from the series to dest, live when dest names the series; a
     * live source of dest other than the series; a live source of the
     * series (it is a destination); live rules of dest */
    long stale = ts_rule_find(src, dest, dlen);
    bool exists = stale >= 0 && ts_dst_live(de, key, klen);
    bool dst_taken = !exists && g.src_live && !(alen == klen && memcmp(s, key, klen) == 0);
    bool src_is_dst = b && ts_has_rule_to(be, key, klen);
    bool dst_rules = false;
    for (size_t i = 0; i < ts_rule_count(dst); i++)
        dst_rules |= g.dst[i] != NULL;
    if (exists || dst_taken) {
        ts_group_close(&g, false);
        cmd_fail(ctx, CMD_E_EXISTS, "dest", "'%.*s' is already the destination of a rule (from '%.*s')", clip(dlen),
                 dest, dst_taken ? clip(alen) : clip(klen), dst_taken ? s : key);
        return 1;
    }
    if (src_is_dst || dst_rules) {
        ts_group_close(&g, false);
        cmd_fail(ctx, CMD_E_BAD_REQUEST, src_is_dst ? "key" : "dest", "%s",
                 src_is_dst ? "the source is itself the destination of a rule: compactions do not chain"
                            : "the destination has rules of its own: compactions do not chain");
        return 1;
    }
    if (ts_rule_count(src) - (stale >= 0) >= TS_MAX_RULES) {
        ts_group_close(&g, false);
        cmd_fail(ctx, CMD_E_BAD_REQUEST, "dest", "a series has at most %d rules", TS_MAX_RULES);
        return 1;
    }
    /* a stale rule to dest (dest deleted and created again) goes:
     * RedisTimeSeries dropped it with the old dest */
    ts_sample_t newest;
    ts_rule_t r = { dest, dlen, a->agg, a->bucket_ms, a->align, a->quantile, (uint8_t)a->gen, -1 };
    if (a->gen == TS_RULE_GEN_2 && ts_last(src, &newest))
        r.since = newest.ts;   /* the samples before it are not the rule's (RedisTimeSeries) */
    bool added = ts_rule_add(src, &r);
    if (!added || !ts_set_source(dst, key, klen)) {
        if (added)
            ts_rule_remove(src, ts_rule_count(src) - 1);
        ts_group_close(&g, false);
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory adding the rule");
        return 1;
    }
    if (stale >= 0)
        ts_rule_remove(src, (size_t)stale);
    ks_entry_changed(ks, de);
    ks_entry_changed(ks, se);
    ts_group_close(&g, true);
    return 2;
}

static bool run_createrule(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_createrule_args_t *a = args;
    cmd_ts_created_res_t *r = res;
    if (a->dlen == a->klen && memcmp(a->dest, a->key, a->klen) == 0)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "dest", "the source and the destination must be different series");
    /* both keys allowed before room is made for them (the sources their
     * rules name are checked when locked) */
    ks_key_t named[2] = { ks_key(ctx->srv->ks, a->key, a->klen), ks_key(ctx->srv->ks, a->dest, a->dlen) };
    if (!cmd_keys_allowed_here(ctx, named, 2) || !cmd_make_room(ctx))
        return false;
    for (int attempt = 0; attempt < 8; attempt++) {
        char *b = NULL;
        size_t blen;
        if (!peek_source(ctx, a->key, a->klen, &b, &blen))
            return false;
        int done = create_rule(ctx, a, b, blen);
        free(b);
        if (done) {
            r->created = done == 2;
            return done == 2;
        }
    }
    return cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL, "the series kept changing; try again");
}

static void encode_createrule(const void *args, wbuf_t *out)
{
    const cmd_ts_createrule_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    cmd_put_key(out, a->dest, a->dlen);
    wbuf_put_u8(out, (uint8_t)a->agg);
    wbuf_put_f64(out, a->quantile);
    wbuf_put_i64(out, a->bucket_ms);
    wbuf_put_i64(out, a->align);
    wbuf_put_u8(out, (uint8_t)a->gen);
}

static bool decode_createrule(rbuf_t *in, void *args, const char **why)
{
    cmd_ts_createrule_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen) || !cmd_get_key(in, &a->dest, &a->dlen)) {
        *why = "bad key";
        return false;
    }
    uint8_t agg = rbuf_u8(in);
    a->agg = (ts_agg_t)agg;
    a->quantile = rbuf_f64(in);
    a->bucket_ms = rbuf_i64(in);
    a->align = rbuf_i64(in);
    a->gen = rbuf_u8(in);
    if (in->err || agg == TS_AGG_NONE || agg >= TS_AGG__COUNT || !(a->quantile >= 0 && a->quantile <= 1) ||
        (agg != TS_AGG_QUANTILE && a->quantile != 0) || a->bucket_ms < 1 || a->align < 0 ||
        (a->gen != TS_RULE_GEN_1 && a->gen != TS_RULE_GEN_2)) {
        *why = "bad rule";
        return false;
    }
    return true;
}

static bool run_deleterule(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_deleterule_args_t *a = args;
    cmd_ts_created_res_t *r = res;
    ks_key_t keys[2] = { ks_key(ctx->srv->ks, a->key, a->klen), ks_key(ctx->srv->ks, a->dest, a->dlen) };
    cmd_key_t h;
    ks_entry_t *de, *se;
    if (!cmd_keys_lock(ctx, keys, 2, &h) || !cmd_keys_find(&h, 1, NULL, CMD_WRITE, NULL, &de) ||
        !cmd_keys_find(&h, 0, &ts_type, CMD_WRITE | CMD_MUST_EXIST, NULL, &se))
        return false;
    ts_t *src = ks_entry_value(se);
    long i = ts_rule_find(src, a->dest, a->dlen);
    if (i < 0 || !ts_dst_live(de, a->key, a->klen)) {   /* a stale rule is already gone for RedisTimeSeries */
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_NOT_FOUND, "dest", "no rule writes from this series to '%.*s'", clip(a->dlen),
                        a->dest);
    }
    ts_rule_remove(src, (size_t)i);
    ts_set_source(ks_entry_value(de), NULL, 0);
    ks_entry_changed(ctx->srv->ks, de);
    cmd_key_close(&h, true);
    r->created = false;
    return true;
}

static void encode_deleterule(const void *args, wbuf_t *out)
{
    const cmd_ts_deleterule_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    cmd_put_key(out, a->dest, a->dlen);
}

static bool decode_deleterule(rbuf_t *in, void *args, const char **why)
{
    cmd_ts_deleterule_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen) || !cmd_get_key(in, &a->dest, &a->dlen)) {
        *why = "bad key";
        return false;
    }
    return true;
}

/* A rule's source, then its destination. */
static bool keys_createrule(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_ts_createrule_args_t *a = args;
    return visit(ud, a->key, a->klen) && visit(ud, a->dest, a->dlen);
}

static bool keys_deleterule(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_ts_deleterule_args_t *a = args;
    return visit(ud, a->key, a->klen) && visit(ud, a->dest, a->dlen);
}

const cmd_def_t CMD_TS_CREATERULE = { "TS.CREATERULE", CMD_ID_TS_CREATERULE,
                                      CMD_F_WRITE | CMD_F_DENYOOM | CMD_F_STATE_KEYS, CMD_ACCESS_WRITE,
                                      run_createrule, encode_createrule, decode_createrule,
                                      sizeof(cmd_ts_createrule_args_t), sizeof(cmd_ts_created_res_t), keys_createrule };
const cmd_def_t CMD_TS_DELETERULE = { "TS.DELETERULE", CMD_ID_TS_DELETERULE, CMD_F_WRITE | CMD_F_STATE_KEYS,
                                      CMD_ACCESS_WRITE, run_deleterule, encode_deleterule, decode_deleterule,
                                      sizeof(cmd_ts_deleterule_args_t), sizeof(cmd_ts_created_res_t), keys_deleterule };
