/* keys_ops.c - operations on keys whatever they hold: see keys_ops.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/journal.h"
#include "cmd/keys.h"
#include "cmd/keyrec.h"
#include "cmd/keys_ops.h"
#include "cmd/room.h"
#include "core/keydump.h"
#include "core/slot.h"

#define KEYDUMP_OVERHEAD 64   /* a dump's header, TTL and checksum, besides the value's encoding */

static int64_t ttl_left(const ks_t *ks, const ks_entry_t *e, int64_t now_ms)
{
    int64_t exp = ks_entry_expire(ks, e);
    if (exp == KS_NO_EXPIRY)
        return -1;
    return exp > now_ms ? exp - now_ms : 0;
}

/* ------------------------------------------------------------------------ */
/* SCAN                                                                     */
/* ------------------------------------------------------------------------ */

/* The page while it is walked: entries hold their key's offset into
 * `text` until the walk ends (text moves as it grows). */
struct page {
    cmd_ctx_t *ctx;              /* whose token's prefixes bound the listing */
    const cmd_scan_args_t *a;
    int64_t now_ms;
    cmd_scan_key_t *keys;
    size_t n, cap;
    wbuf_t text;
    uint64_t bucket_bytes;       /* the bucket's answer, at most */
    bool oom;
};

/* What a key takes in the answer at most: its JSON text escaped, the type
 * and ttl_ms, the member names. */
static uint64_t answer_bytes(size_t klen) { return 6 * (uint64_t)klen + 2 + 64; }

static void visit(void *ud, ks_entry_t *e)
{
    struct page *pg = ud;
    const cmd_scan_args_t *a = pg->a;
    size_t klen;
    const char *key = ks_entry_key(e, &klen);
    if (klen < a->plen || memcmp(key, a->prefix, a->plen) != 0 || !cmd_key_visible(pg->ctx, key, klen))
        return;
    if (a->slot_lo >= 0) {
        int64_t slot = slot_of(key, klen);
        if (slot < a->slot_lo || slot > a->slot_hi)
            return;
    }
    if (pg->n == pg->cap) {
        size_t cap = pg->cap ? 2 * pg->cap : 64;
        cmd_scan_key_t *k = realloc(pg->keys, cap * sizeof(*k));
        if (!k) {
            pg->oom = true;
            return;
        }
        pg->keys = k;
        pg->cap = cap;
    }
    pg->bucket_bytes += answer_bytes(klen);
    pg->keys[pg->n++] = (cmd_scan_key_t){ (const char *)(uintptr_t)pg->text.len, klen, ks_entry_type(e)->name,
                                          ttl_left(pg->ctx->srv->ks, e, pg->now_ms) };
    wbuf_put_bytes(&pg->text, key, klen);
}

static bool run_scan(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_scan_args_t *a = args;
    cmd_scan_res_t *r = res;
    ks_t *ks = ctx->srv->ks;
    memset(r, 0, sizeof(*r));
    if (a->shard >= ks_shard_count(ks))
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "cursor", "'cursor' is not a cursor this server returned");
    struct page pg = { .ctx = ctx, .a = a, .now_ms = cmd_now_ms(ctx), .text = WBUF_INIT };
    unsigned shard = a->shard;
    uint64_t v = a->pos, bytes = 0;
    /* Buckets are taken whole (the cursor cannot point inside one): a bucket
     * whose keys would overflow the page (`limit` keys, or --max-answer-size
     * bytes) is left for the next page. */
    uint64_t max_bytes = ctx->srv->limits.max_answer ? ctx->srv->limits.max_answer : UINT64_MAX;
    size_t budget = CMD_SCAN_BUCKETS_PER_PAGE;
    bool full = false;
    while (shard < ks_shard_count(ks) && !full && budget > 0) {
        ks_shard_t *sh = ks_shard_at(ks, shard);
        bool shard_done = false;   /* v == 0 also means "not started" */
        cmd_shard_lock(ctx, shard);   /* a transaction's own already held */
        do {
            uint64_t next = v;
            size_t have = pg.n, text = pg.text.len;
            pg.bucket_bytes = 0;
            ks_shard_scan(ks, sh, &next, 1, pg.now_ms, visit, &pg);
            size_t more = pg.n - have;
            if (have > 0 && (have + more > a->limit || bytes + pg.bucket_bytes > max_bytes)) {
                pg.n = have;   /* the bucket waits for the next page */
                pg.text.len = text;
                full = true;
                break;
            }
            bytes += pg.bucket_bytes;
            v = next;
            shard_done = v == 0;
            budget--;
            if (have + more >= a->limit)
                full = true;
        } while (!shard_done && !full && budget > 0);
        cmd_shard_unlock(ctx, shard);
        if (shard_done)
            shard++;
    }
    if (pg.oom || pg.text.oom) {
        free(pg.keys);
        wbuf_free(&pg.text);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    /* one block: the entries, then their keys */
    size_t n = pg.n, len = pg.text.len;
    cmd_scan_key_t *keys = realloc(pg.keys, (n ? n : 1) * sizeof(*keys) + len);
    if (!keys) {
        free(pg.keys);
        wbuf_free(&pg.text);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    char *text = (char *)(keys + (n ? n : 1));
    if (len)
        memcpy(text, pg.text.data, len);
    wbuf_free(&pg.text);
    for (size_t i = 0; i < n; i++)
        keys[i].key = text + (uintptr_t)keys[i].key;
    r->keys = keys;
    r->n = n;
    r->done = shard >= ks_shard_count(ks);
    r->shard = shard;
    r->pos = v;
    return true;
}

void cmd_scan_res_free(cmd_scan_res_t *r)
{
    free(r->keys);
    r->keys = NULL;
    r->n = 0;
}

/* ------------------------------------------------------------------------ */
/* KEY.INFO, DEL, PEXPIRE, PERSIST                                          */
/* ------------------------------------------------------------------------ */

static bool run_key_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_key_args_t *a = args;
    cmd_key_info_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, NULL, CMD_MUST_EXIST, &h))
        return false;
    r->type = ks_entry_type(h.e)->name;
    r->ttl_ms = ttl_left(ctx->srv->ks, h.e, cmd_now_ms(ctx));
    r->expire_ms = ks_entry_expire(ctx->srv->ks, h.e) == KS_NO_EXPIRY ? -1 : ks_entry_expire(ctx->srv->ks, h.e);
    r->memory_bytes = ks_entry_memory(h.e);
    cmd_key_close(&h, false);
    return true;
}

static bool run_del(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_del_args_t *a = args;
    cmd_keys_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, NULL, CMD_WRITE, &h))
        return false;
    bool found = h.e != NULL;
    if (found && a->has_digest) {
        bool oom;
        uint64_t now = keydump_digest(ks_entry_type(h.e), ks_entry_value(h.e), ks_entry_expire(ctx->srv->ks, h.e), &oom);
        if (oom || now != a->digest) {
            cmd_key_close(&h, false);
            if (oom)
                return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
            return cmd_fail(ctx, CMD_E_PRECONDITION_FAILED, NULL,
                            "the key changed since it was dumped; nothing deleted");
        }
    }
    if (found)
        cmd_key_delete(&h);
    cmd_key_close(&h, found);
    r->done = found;
    return true;
}



/* The bound of a TTL set at now_ms: now + ttl stays far from overflow. */
static int64_t ttl_max(int64_t now_ms) { return INT64_MAX / 2 - now_ms; }

/* Whether the conditions of Redis's EXPIRE options hold for an entry whose
 * expiry is `cur` (KS_NO_EXPIRY: never) and a new one at `when`. */
static bool expire_cond_holds(unsigned cond, int64_t cur, int64_t when)
{
    bool none = cur == KS_NO_EXPIRY;
    if ((cond & CMD_EXPIRE_NX) && !none)
        return false;
    if ((cond & CMD_EXPIRE_XX) && none)
        return false;
    if ((cond & CMD_EXPIRE_GT) && (none || when <= cur))
        return false;
    if ((cond & CMD_EXPIRE_LT) && !none && when >= cur)
        return false;
    return true;
}

/* NX alone; GT and LT not together. */
static bool expire_cond_valid(unsigned cond)
{
    if (cond & ~(CMD_EXPIRE_NX | CMD_EXPIRE_XX | CMD_EXPIRE_GT | CMD_EXPIRE_LT | CMD_EXPIRE_PAST))
        return false;
    if ((cond & CMD_EXPIRE_NX) && (cond & (CMD_EXPIRE_XX | CMD_EXPIRE_GT | CMD_EXPIRE_LT)))
        return false;
    return !((cond & CMD_EXPIRE_GT) && (cond & CMD_EXPIRE_LT));
}

static bool run_pexpire(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_pexpire_args_t *a = args;
    cmd_keys_res_t *r = res;
    int64_t now_ms = cmd_now_ms(ctx);
    int64_t lo = (a->cond & CMD_EXPIRE_PAST) ? -ttl_max(now_ms) : 1;
    if (!expire_cond_valid(a->cond))
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "cond", "NX cannot go with XX, GT or LT, nor GT with LT");
    if (a->ttl_ms < lo || a->ttl_ms > ttl_max(now_ms))
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "ttl_ms", "'ttl_ms' must be between %lld and %lld", (long long)lo,
                        (long long)ttl_max(now_ms));
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, NULL, CMD_MUST_EXIST | (a->ttl_ms <= 0 ? CMD_WRITE : 0), &h))
        return false;
    int64_t when = now_ms + a->ttl_ms;
    if (!expire_cond_holds(a->cond, ks_entry_expire(ctx->srv->ks, h.e), when)) {
        r->done = false;
        r->ttl_ms = ttl_left(ctx->srv->ks, h.e, now_ms);
        cmd_key_close(&h, false);
        return true;
    }
    if (a->ttl_ms <= 0) {
        cmd_key_delete(&h);   /* a time not after now: gone, as Redis does */
    } else if (!ks_entry_set_expire(ctx->srv->ks, &h.e, when)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory setting the key's expiry");
    }
    cmd_key_close(&h, true);
    r->done = true;
    r->ttl_ms = a->ttl_ms;
    return true;
}

/* Record: u8 version 1 | key | i64 ttl_ms, or with conditions u8 version 2
 * | key | i64 ttl_ms | u8 cond (replay checks them on the same state). */
static void encode_pexpire(const void *args, wbuf_t *out)
{
    const cmd_pexpire_args_t *a = args;
    wbuf_put_u8(out, a->cond ? 2 : 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_i64(out, a->ttl_ms);
    if (a->cond)
        wbuf_put_u8(out, (uint8_t)a->cond);
}

static bool decode_pexpire(rbuf_t *in, void *args, const char **why)
{
    cmd_pexpire_args_t *a = args;
    uint8_t v = rbuf_u8(in);
    if (v != 1 && v != 2) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    a->ttl_ms = rbuf_i64(in);
    a->cond = v == 2 ? rbuf_u8(in) : 0;
    int64_t lo = (a->cond & CMD_EXPIRE_PAST) ? -(INT64_MAX / 2) : 1;
    if (a->ttl_ms < lo || a->ttl_ms > INT64_MAX / 2) {
        *why = "bad ttl";
        return false;
    }
    if ((v == 2 && !a->cond) || !expire_cond_valid(a->cond)) {
        *why = "bad conditions";
        return false;
    }
    return true;
}

static bool run_persist(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_key_args_t *a = args;
    cmd_keys_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, NULL, CMD_MUST_EXIST, &h))
        return false;
    bool had = ks_entry_expire(ctx->srv->ks, h.e) != KS_NO_EXPIRY;
    if (had)
        ks_entry_set_expire(ctx->srv->ks, &h.e, KS_NO_EXPIRY);
    cmd_key_close(&h, had);
    r->done = had;
    return true;
}

/* Record: u8 version 1 | key (also KEY.INFO's and DUMP's arguments). */
static void encode_key(const void *args, wbuf_t *out)
{
    const cmd_key_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
}

static bool decode_key(rbuf_t *in, void *args, const char **why)
{
    cmd_key_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* DUMP, RESTORE                                                            */
/* ------------------------------------------------------------------------ */

static bool run_dump(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_key_args_t *a = args;
    cmd_dump_res_t *r = res;
    static const char too_large[] = "this value is too large to dump in one answer (raise --max-answer-size)";
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, NULL, CMD_MUST_EXIST, &h))
        return false;
    const ks_type_t *type = ks_entry_type(h.e);
    const void *v = ks_entry_value(h.e);
    int64_t exp = ks_entry_expire(ctx->srv->ks, h.e), now = cmd_now_ms(ctx);
    /* an encoding takes about what the value takes in memory */
    if (!cmd_answer_fits(ctx, KEYDUMP_OVERHEAD + type->size(v), too_large)) {
        cmd_key_close(&h, false);
        return false;
    }
    wbuf_t out = WBUF_INIT;
    keydump_encode(type, v, exp == KS_NO_EXPIRY ? KEYDUMP_NO_TTL : exp - now, &out);
    bool oom = out.oom;
    uint64_t digest = oom ? 0 : keydump_digest(type, v, exp, &oom);
    cmd_key_close(&h, false);
    if (oom) {
        wbuf_free(&out);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory dumping the key");
    }
    if (!cmd_answer_fits(ctx, out.len, too_large)) {   /* the estimate above was short: refused all the same */
        wbuf_free(&out);
        return false;
    }
    r->data = wbuf_steal(&out, &r->len);
    r->digest = digest;
    return true;
}

static bool run_restore(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_restore_args_t *a = args;
    cmd_restore_res_t *r = res;
    const char *why;
    int64_t now = cmd_now_ms(ctx), ttl = a->ttl_ms;
    if (a->has_ttl && (ttl < 0 || ttl > ttl_max(now)))
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "ttl_ms", "'ttl_ms' must be between 0 and %lld",
                        (long long)ttl_max(now));
    const ks_type_t *type;
    void *value;
    int64_t dump_ttl;
    if (!keydump_decode(a->dump, a->len, &type, &value, &dump_ttl, &why))
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "not a valid dump: %s; nothing was restored", why);
    if (!a->has_ttl)
        ttl = dump_ttl < 0 ? 0 : dump_ttl;
    /* the deletion a failure may journal besides the record (journal_deleted) */
    uint64_t records = ctx->rec ? JOURNAL_COMMAND_FIXED + ctx->rec_len + CMD_KEYREC_DEL_SIZE(a->klen) : 0;
    if (!cmd_grow(ctx, NULL, "the restored value", type->size(value),
                  type->size(value) + ks_entry_overhead(a->klen) + a->len) ||
        !cmd_journal_reserve_more(ctx, records)) {
        type->free(value);
        return false;
    }
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, NULL, CMD_WRITE, &h)) {
        type->free(value);
        return false;
    }
    bool existed = h.e != NULL;
    if (existed && !a->replace) {
        cmd_key_close(&h, false);
        type->free(value);
        return cmd_fail(ctx, CMD_E_EXISTS, NULL, "the key exists: send ?replace=true to replace it");
    }
    int64_t expire = ttl ? now + ttl : KS_NO_EXPIRY;
    if (existed && ks_entry_type(h.e) == type) {
        cmd_key_replace(&h, value);
        ks_entry_set_expire(ctx->srv->ks, &h.e, expire);
    } else {
        if (existed)
            cmd_key_delete(&h);
        if (!cmd_key_add(&h, type, value, expire)) {
            type->free(value);
            if (existed)
                cmd_journal_key_state(ctx, a->key, a->klen, NULL, 0, 0);   /* what did happen: a DEL record */
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory restoring the key");
        }
    }
    cmd_key_close(&h, true);
    r->type = type->name;
    r->ttl_ms = ttl ? ttl : -1;
    r->replaced = existed;
    return true;
}



static bool run_dbsize(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)args;
    cmd_dbsize_res_t *r = res;
    r->keys = ks_total_keys(ctx->srv->ks);
    return true;
}

const cmd_def_t CMD_DBSIZE = { "DBSIZE", CMD_ID_DBSIZE, 0, CMD_ACCESS_READ, run_dbsize, NULL, NULL, 1,
                               sizeof(cmd_dbsize_res_t), NULL };
const cmd_def_t CMD_SCAN = { "SCAN", CMD_ID_SCAN, 0, CMD_ACCESS_READ, run_scan, NULL, NULL, sizeof(cmd_scan_args_t),
                             sizeof(cmd_scan_res_t), NULL };
const cmd_def_t CMD_KEY_INFO = { "KEY.INFO", CMD_ID_KEY_INFO, 0, CMD_ACCESS_READ, run_key_info, NULL, NULL,
                                 sizeof(cmd_key_args_t), sizeof(cmd_key_info_res_t), cmd_keys_first };
const cmd_def_t CMD_DEL = { "DEL", CMD_ID_DEL, CMD_F_WRITE, CMD_ACCESS_ADMIN, run_del, cmd_keyrec_del_encode,
                            cmd_keyrec_del_decode, sizeof(cmd_del_args_t), sizeof(cmd_keys_res_t), cmd_keys_first };
const cmd_def_t CMD_PEXPIRE = { "PEXPIRE", CMD_ID_PEXPIRE, CMD_F_WRITE, CMD_ACCESS_WRITE, run_pexpire, encode_pexpire,
                                decode_pexpire, sizeof(cmd_pexpire_args_t), sizeof(cmd_keys_res_t), cmd_keys_first };
const cmd_def_t CMD_PERSIST = { "PERSIST", CMD_ID_PERSIST, CMD_F_WRITE, CMD_ACCESS_WRITE, run_persist, encode_key,
                                decode_key, sizeof(cmd_key_args_t), sizeof(cmd_keys_res_t), cmd_keys_first };
const cmd_def_t CMD_DUMP = { "DUMP", CMD_ID_DUMP, 0, CMD_ACCESS_READ, run_dump, NULL, NULL, sizeof(cmd_key_args_t),
                             sizeof(cmd_dump_res_t), cmd_keys_first };
const cmd_def_t CMD_RESTORE = { "RESTORE", CMD_ID_RESTORE, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_restore,
                                cmd_keyrec_restore_encode, cmd_keyrec_restore_decode, sizeof(cmd_restore_args_t),
                                sizeof(cmd_restore_res_t), cmd_keys_first };
