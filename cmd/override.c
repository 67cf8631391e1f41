/* override.c - live per-tenant overrides as operations: see override.h. */
#include <stdio.h>
#include <string.h>

#include "cmd/keys.h"
#include "cmd/override.h"
#include "cmd/room.h"
#include "core/keyspace.h"

#define RECORD_V1 1

size_t cmd_override_key(const char *policy, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s%s", OVERRIDE_KEY_PREFIX, policy);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static bool bounds_ok(cmd_ctx_t *ctx, size_t tlen, size_t llen, bool with_limits)
{
    if (tlen == 0 || tlen > OVERRIDE_TENANT_MAX)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "tenant", "a tenant is 1 to %d bytes", OVERRIDE_TENANT_MAX);
    if (with_limits && (llen == 0 || llen > OVERRIDE_LIMITS_MAX))
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "limits", "an override's limits take 1 to %d bytes",
                        OVERRIDE_LIMITS_MAX);
    return true;
}

static bool run_set(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_override_set_args_t *a = args;
    cmd_override_res_t *r = res;
    memset(r, 0, sizeof(*r));
    if (!bounds_ok(ctx, a->tlen, a->llen, true))
        return false;
    size_t extra = override_entry_bytes(a->tlen, a->llen) + ks_entry_overhead(a->klen) + 64;
    if (!cmd_make_room_for_key(ctx, extra, a->key, a->klen, 0))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &override_type, CMD_WRITE, &h))
        return false;
    override_map_t *m = cmd_key_value(&h);
    bool created = false;
    if (!m) {
        m = override_map_new();
        if (!m || !cmd_key_add(&h, &override_type, m, KS_NO_EXPIRY)) {
            override_map_free(m);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the override");
        }
        created = true;
    }
    size_t old;
    r->existed = override_map_get(m, a->tenant, a->tlen, &old) != NULL;
    int st = override_map_set(m, a->tenant, a->tlen, a->limits, a->llen);
    if (st != OVERRIDE_OK) {
        if (created)
            cmd_key_delete(&h);
        cmd_key_close(&h, false);
        if (st == OVERRIDE_FULL)
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, "tenant", "the policy has %d overrides, the most it may have",
                            OVERRIDE_MAX_ENTRIES);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the override");
    }
    r->count = override_map_count(m);
    cmd_key_close(&h, true);
    return true;
}

static bool run_del(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_override_key_args_t *a = args;
    cmd_override_res_t *r = res;
    memset(r, 0, sizeof(*r));
    if (!bounds_ok(ctx, a->tlen, 0, false))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &override_type, CMD_WRITE, &h))
        return false;
    override_map_t *m = cmd_key_value(&h);
    r->existed = m && override_map_del(m, a->tenant, a->tlen);
    r->count = m ? override_map_count(m) : 0;
    if (r->existed && r->count == 0)
        cmd_key_delete(&h);
    cmd_key_close(&h, r->existed);
    return true;
}

static bool run_get(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_override_key_args_t *a = args;
    cmd_override_res_t *r = res;
    memset(r, 0, sizeof(*r));
    if (!bounds_ok(ctx, a->tlen, 0, false))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &override_type, CMD_READ, &h))
        return false;
    const override_map_t *m = cmd_key_value(&h);
    const char *l = m ? override_map_get(m, a->tenant, a->tlen, &r->llen) : NULL;
    r->existed = l != NULL;
    if (l)
        memcpy(a->out, l, r->llen);
    r->count = m ? override_map_count(m) : 0;
    cmd_key_close(&h, false);
    return true;
}

static bool run_list(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_override_list_args_t *a = args;
    cmd_override_list_res_t *r = res;
    memset(r, 0, sizeof(*r));
    if (a->count == 0 || a->count > OVERRIDE_LIST_MAX)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "limit", "'limit' must be 1 to %d", OVERRIDE_LIST_MAX);
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &override_type, CMD_READ, &h))
        return false;
    const override_map_t *m = cmd_key_value(&h);
    if (m) {
        size_t n = override_map_count(m), i = override_map_after(m, a->after, a->alen), given = 0;
        for (; i < n && given < a->count; i++, given++) {
            const char *t, *l;
            size_t tl, ll;
            override_map_at(m, i, &t, &tl, &l, &ll);
            a->each(a->ud, t, tl, l, ll);
        }
        r->total = n;
        r->more = i < n;
    }
    cmd_key_close(&h, false);
    return true;
}

/* Records: u8 version 1 | key | blob tenant [| blob limits] */
static void encode_set(const void *args, wbuf_t *out)
{
    const cmd_override_set_args_t *a = args;
    wbuf_put_u8(out, RECORD_V1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_blob(out, a->tenant, a->tlen);
    wbuf_put_blob(out, a->limits, a->llen);
}

static bool decode_head(rbuf_t *in, const char **key, size_t *klen, const char **tenant, size_t *tlen,
                        const char **why)
{
    if (rbuf_u8(in) != RECORD_V1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, key, klen)) {
        *why = "bad key";
        return false;
    }
    *tenant = (const char *)rbuf_blob(in, tlen);
    if (!*tenant || *tlen == 0 || *tlen > OVERRIDE_TENANT_MAX) {
        *why = "bad tenant";
        return false;
    }
    return true;
}

static bool decode_set(rbuf_t *in, void *args, const char **why)
{
    cmd_override_set_args_t *a = args;
    memset(a, 0, sizeof(*a));
    if (!decode_head(in, &a->key, &a->klen, &a->tenant, &a->tlen, why))
        return false;
    a->limits = (const char *)rbuf_blob(in, &a->llen);
    if (!a->limits || a->llen == 0 || a->llen > OVERRIDE_LIMITS_MAX) {
        *why = "bad limits";
        return false;
    }
    return true;
}

static void encode_del(const void *args, wbuf_t *out)
{
    const cmd_override_key_args_t *a = args;
    wbuf_put_u8(out, RECORD_V1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_blob(out, a->tenant, a->tlen);
}

static bool decode_del(rbuf_t *in, void *args, const char **why)
{
    cmd_override_key_args_t *a = args;
    memset(a, 0, sizeof(*a));
    return decode_head(in, &a->key, &a->klen, &a->tenant, &a->tlen, why);
}

int cmd_override_lookup(cmd_server_t *srv, const char *policy, const char *tenant, size_t tlen,
                        override_parse_fn parse, void *ud, throttle_params_t *out, int64_t now_ms)
{
    if (override_maps_alive() == 0 || tlen == 0 || tlen > OVERRIDE_TENANT_MAX)
        return 0;
    char kb[sizeof(OVERRIDE_KEY_PREFIX) + 128];
    size_t klen = cmd_override_key(policy, kb, sizeof(kb));
    ks_key_t k = ks_key(srv->ks, kb, klen);
    ks_shard_t *sh = ks_shard_at(srv->ks, k.shard);
    ks_shard_lock(sh);
    int found = 0;
    ks_entry_t *e = ks_find(srv->ks, &k, now_ms);
    if (e && ks_entry_type(e) == &override_type)
        found = override_map_limits(ks_entry_value(e), tenant, tlen, parse, ud, out);
    ks_shard_unlock(sh);
    return found;
}

const cmd_def_t CMD_OVERRIDE_SET = { "OVERRIDE.SET", CMD_ID_OVERRIDE_SET, CMD_F_WRITE | CMD_F_DENYOOM,
                                     CMD_ACCESS_ADMIN, run_set, encode_set, decode_set,
                                     sizeof(cmd_override_set_args_t), sizeof(cmd_override_res_t), cmd_keys_first };
const cmd_def_t CMD_OVERRIDE_DEL = { "OVERRIDE.DEL", CMD_ID_OVERRIDE_DEL, CMD_F_WRITE, CMD_ACCESS_ADMIN, run_del,
                                     encode_del, decode_del, sizeof(cmd_override_key_args_t),
                                     sizeof(cmd_override_res_t), cmd_keys_first };
const cmd_def_t CMD_OVERRIDE_GET = { "OVERRIDE.GET", CMD_ID_OVERRIDE_GET, 0, CMD_ACCESS_ADMIN, run_get, NULL, NULL,
                                     sizeof(cmd_override_key_args_t), sizeof(cmd_override_res_t), cmd_keys_first };
const cmd_def_t CMD_OVERRIDE_LIST = { "OVERRIDE.LIST", CMD_ID_OVERRIDE_LIST, 0, CMD_ACCESS_ADMIN, run_list, NULL,
                                      NULL, sizeof(cmd_override_list_args_t), sizeof(cmd_override_list_res_t),
                                      cmd_keys_first };
