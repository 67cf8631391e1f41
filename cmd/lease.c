/* lease.c - concurrency leases as operations: see lease.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cmd/keys.h"
#include "cmd/lease.h"
#include "cmd/room.h"
#include "core/codec.h"
#include "core/lease.h"

void cmd_lease_id_format(uint64_t id, char out[17]) { snprintf(out, 17, "%016" PRIx64, id); }

bool cmd_lease_id_parse(const char *s, size_t len, uint64_t *id) { return codec_hex64_parse(s, len, id) && *id != 0; }

static bool check_limit(cmd_ctx_t *ctx, int64_t limit)
{
    if (limit < 1 || limit > LEASE_MAX_LIMIT)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "limit", "limit must be an integer from 1 to %d", LEASE_MAX_LIMIT);
    return true;
}

static bool check_ttl(cmd_ctx_t *ctx, int64_t ttl_ms)
{
    if (ttl_ms < 1 || ttl_ms > LEASE_MAX_TTL_MS)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "ttl_ms", "ttl_ms must be an integer from 1 to %lld",
                        (long long)LEASE_MAX_TTL_MS);
    return true;
}

/* The result's counts from the set at now_ms (l NULL: no key). */
static void fill(cmd_lease_res_t *r, const lease_t *l, int64_t now_ms)
{
    lease_info_t in = { 0, 0, -1, -1 };
    if (l)
        lease_info(l, now_ms, &in);
    r->limit = in.limit;
    r->active = in.active;
    r->remaining = in.limit > in.active ? (int64_t)in.limit - in.active : 0;
    r->next_expiry_ms = in.next_expiry_ms;
    r->reset_after_ms = in.last_expiry_ms >= 0 ? in.last_expiry_ms - now_ms : 0;
}

static void res_init(cmd_lease_res_t *r)
{
    memset(r, 0, sizeof(*r));
    r->expires_ms = r->ttl_ms = r->retry_after_ms = r->next_expiry_ms = -1;
}

/* After a change: the key expires LEASE_KEY_GRACE_MS after its latest
 * lease; a key left without leases is deleted.  The grace: a replica
 * expires keys by its own clock, a little ahead of the changes it has yet to
 * replay; were the key to go with its last lease, a change the primary made
 * on the key just before that instant could reach a replica that had
 * already dropped it, and recreate it there with another seed.  A minute of
 * grace leaves that to a key idle for a minute and a replica a minute
 * behind.  The leases themselves count for nothing once expired. */
static void settle_key(cmd_ctx_t *ctx, cmd_key_t *h, lease_t *l, int64_t now_ms)
{
    if (!h->e)
        return;
    if (lease_count(l) == 0) {
        cmd_key_delete(h);
        return;
    }
    lease_info_t in;
    lease_info(l, now_ms, &in);
    ks_entry_set_expire(ctx->srv->ks, &h->e, in.last_expiry_ms + LEASE_KEY_GRACE_MS);
}

static bool run_acquire(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_lease_acquire_args_t *a = args;
    cmd_lease_res_t *r = res;
    res_init(r);
    if (!check_limit(ctx, a->limit) || !check_ttl(ctx, a->ttl_ms) ||
        !cmd_value_fits(ctx, "limit", "the lease set", lease_max_bytes((uint32_t)a->limit)))
        return false;
    int64_t now_ms = cmd_now_ms(ctx);
    uint32_t limit = (uint32_t)a->limit;
    ks_key_t kk = ks_key(ctx->srv->ks, a->key, a->klen);
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        if (!cmd_key_open(ctx, a->key, a->klen, &lease_type, CMD_WRITE, &h))
            return false;
        lease_t *l = cmd_key_value(&h);
        bool created = !l;
        bool changed = l && lease_purge(l, now_ms);
        uint64_t extra = lease_grow_bytes(l, limit) + (created ? lease_base_bytes() + ks_entry_overhead(a->klen) : 0);
        if (extra > cmd_room_now(ctx)) {
            /* not journaled: a purge is redone by the next change, and a
             * stable one leaves the same set then (core/lease.h) */
            cmd_keep_t keep = { &kk, 1, l ? lease_type.size(l) : 0 };   /* not evicted for its own growth */
            cmd_key_close(&h, false);
            if (!cmd_room_retry(ctx, extra, &keep, &attempts))
                return false;
            continue;
        }
        if (created) {
            l = lease_new(lease_seed(a->key, a->klen, ctx->now_ns), limit);
            if (!l || !cmd_key_add(&h, &lease_type, l, KS_NO_EXPIRY)) {
                lease_free(l);
                cmd_key_close(&h, false);
                return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the lease set");
            }
        }
        uint32_t old_limit = lease_limit(l);
        int64_t expires = now_ms + a->ttl_ms;
        uint64_t id = 0;
        core_status_t st = lease_acquire(l, limit, expires, &id);
        if (st == CORE_NOMEM) {   /* nothing journaled: replay would grant it */
            if (created)
                cmd_key_delete(&h);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory growing the lease set");
        }
        changed = changed || created || st == CORE_OK || old_limit != limit;
        fill(r, l, now_ms);
        if (st == CORE_OK) {
            r->ok = true;
            r->id = id;
            r->expires_ms = expires;
            r->ttl_ms = a->ttl_ms;
        } else {
            r->retry_after_ms = r->next_expiry_ms >= 0 ? r->next_expiry_ms - now_ms : 0;
        }
        if (changed)
            settle_key(ctx, &h, l, now_ms);
        cmd_key_close(&h, changed);
        return true;
    }
}

/* Release (renew false) or renew one lease by its id: the key's expired
 * leases are dropped first, and the key is written back when either
 * changed it. */
static bool by_id(cmd_ctx_t *ctx, const cmd_lease_id_args_t *a, cmd_lease_res_t *r, bool renew)
{
    res_init(r);
    if (a->id == 0)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "lease", "a lease id is 16 hexadecimal digits, not 0");
    if (renew && !check_ttl(ctx, a->ttl_ms))
        return false;
    int64_t now_ms = cmd_now_ms(ctx);
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &lease_type, CMD_WRITE, &h))
        return false;
    lease_t *l = cmd_key_value(&h);
    bool changed = false;
    if (l) {
        changed = lease_purge(l, now_ms);
        if (renew) {
            int64_t expires = now_ms + a->ttl_ms;
            r->ok = lease_renew(l, a->id, expires);
            if (r->ok) {
                r->expires_ms = expires;
                r->ttl_ms = a->ttl_ms;
            }
        } else {
            r->ok = lease_release(l, a->id);
        }
        changed = changed || r->ok;
        fill(r, l, now_ms);
        if (changed)
            settle_key(ctx, &h, l, now_ms);
    } else {
        fill(r, NULL, now_ms);
    }
    cmd_key_close(&h, changed);
    return true;
}

static bool run_release(cmd_ctx_t *ctx, const void *args, void *res) { return by_id(ctx, args, res, false); }
static bool run_renew(cmd_ctx_t *ctx, const void *args, void *res) { return by_id(ctx, args, res, true); }

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_lease_key_args_t *a = args;
    cmd_lease_res_t *r = res;
    res_init(r);
    int64_t now_ms = cmd_now_ms(ctx);
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &lease_type, CMD_READ, &h))
        return false;
    const lease_t *l = cmd_key_value(&h);
    r->ok = l != NULL;
    fill(r, l, now_ms);
    cmd_key_close(&h, false);
    return true;
}

/* Records: u8 version 1 | key | ... */
static void encode_acquire(const void *args, wbuf_t *out)
{
    const cmd_lease_acquire_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u32(out, (uint32_t)a->limit);
    wbuf_put_u64(out, (uint64_t)a->ttl_ms);
}

static bool decode_acquire(rbuf_t *in, void *args, const char **why)
{
    cmd_lease_acquire_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    a->limit = rbuf_u32(in);
    a->ttl_ms = (int64_t)rbuf_u64(in);
    if (a->limit < 1 || a->limit > LEASE_MAX_LIMIT || a->ttl_ms < 1 || a->ttl_ms > LEASE_MAX_TTL_MS) {
        *why = "bad limit or ttl";
        return false;
    }
    return true;
}

/* | u64 id (| i64 ttl_ms for RENEW) */
static void encode_id(const void *args, wbuf_t *out, bool ttl)
{
    const cmd_lease_id_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u64(out, a->id);
    if (ttl)
        wbuf_put_u64(out, (uint64_t)a->ttl_ms);
}

static bool decode_id(rbuf_t *in, void *args, const char **why, bool ttl)
{
    cmd_lease_id_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    a->id = rbuf_u64(in);
    a->ttl_ms = ttl ? (int64_t)rbuf_u64(in) : 0;
    if (a->id == 0 || (ttl && (a->ttl_ms < 1 || a->ttl_ms > LEASE_MAX_TTL_MS))) {
        *why = "bad lease id or ttl";
        return false;
    }
    return true;
}

static void encode_release(const void *args, wbuf_t *out) { encode_id(args, out, false); }
static bool decode_release(rbuf_t *in, void *args, const char **why) { return decode_id(in, args, why, false); }
static void encode_renew(const void *args, wbuf_t *out) { encode_id(args, out, true); }
static bool decode_renew(rbuf_t *in, void *args, const char **why) { return decode_id(in, args, why, true); }

const cmd_def_t CMD_LEASE_ACQUIRE = { "LEASE.ACQUIRE", CMD_ID_LEASE_ACQUIRE, CMD_F_WRITE | CMD_F_DENYOOM,
                                      CMD_ACCESS_RATELIMIT, run_acquire, encode_acquire, decode_acquire,
                                      sizeof(cmd_lease_acquire_args_t), sizeof(cmd_lease_res_t), cmd_keys_first };
const cmd_def_t CMD_LEASE_RELEASE = { "LEASE.RELEASE", CMD_ID_LEASE_RELEASE, CMD_F_WRITE, CMD_ACCESS_RATELIMIT,
                                      run_release, encode_release, decode_release, sizeof(cmd_lease_id_args_t),
                                      sizeof(cmd_lease_res_t), cmd_keys_first };
const cmd_def_t CMD_LEASE_RENEW = { "LEASE.RENEW", CMD_ID_LEASE_RENEW, CMD_F_WRITE, CMD_ACCESS_RATELIMIT, run_renew,
                                    encode_renew, decode_renew, sizeof(cmd_lease_id_args_t),
                                    sizeof(cmd_lease_res_t), cmd_keys_first };
const cmd_def_t CMD_LEASE_INFO = { "LEASE.INFO", CMD_ID_LEASE_INFO, 0, CMD_ACCESS_READ, run_info, NULL, NULL,
                                   sizeof(cmd_lease_key_args_t), sizeof(cmd_lease_res_t), cmd_keys_first };
