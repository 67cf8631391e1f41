/* undo.c - pre-images of changes and taking a change back: see undo.h. */
#include "cmd/undo.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/journal.h"
#include "core/keydump.h"

/* The restoring record's size at most: PUT /keys/{key}/restore with its
 * query, media type and the dump as body (a deletion is smaller). */
static uint64_t record_bound(size_t klen, size_t dump_len)
{
    return JOURNAL_REQUEST_FIXED + 6 + 3 * (uint64_t)klen + 8 + 64 + 24 + dump_len;
}

static bool captured(const cmd_ctx_t *ctx, const ks_key_t *k)
{
    for (const cmd_undo_t *u = ctx->undo; u; u = u->next)
        if (u->klen == k->len && memcmp(u->key, k->p, k->len) == 0)
            return true;
    return false;
}

bool cmd_undo_capture(cmd_ctx_t *ctx, const void *owner, const ks_key_t *keys, size_t n)
{
    cmd_server_t *srv = ctx->srv;
    int64_t now = cmd_now_ms(ctx);
    for (size_t i = 0; i < n; i++) {
        if (captured(ctx, &keys[i]))
            continue;
        ks_entry_t *e = ks_find(srv->ks, &keys[i], now);
        wbuf_t d = WBUF_INIT;
        if (e)
            keydump_encode(ks_entry_type(e), ks_entry_value(e), KEYDUMP_NO_TTL, &d);
        cmd_undo_t *u = d.oom ? NULL : malloc(sizeof(*u) + keys[i].len);
        if (!u) {
            wbuf_free(&d);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL,
                            "out of memory keeping the key's state before the change (--min-replicas-ack); the "
                            "request was not applied");
        }
        *u = (cmd_undo_t){ .dump = e ? d.data : NULL, .dump_len = e ? d.len : 0,
                           .expire_ms = e ? ks_entry_expire(e) : KS_NO_EXPIRY, .owner = owner,
                           .klen = keys[i].len };
        memcpy(u->key, keys[i].p, keys[i].len);
        uint64_t bytes = record_bound(u->klen, u->dump_len);
        const char *err = "journal unavailable";
        if (srv->hooks.journal_reserve && !srv->hooks.journal_reserve(srv->hooks.ud, bytes, &err)) {
            free(u->dump);
            free(u);
            return cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL,
                            "the change cannot be made durable: no journal space (%s); the request was not "
                            "applied, retry later",
                            err);
        }
        u->held = srv->hooks.journal_reserve ? bytes : 0;
        u->next = ctx->undo;
        ctx->undo = u;
    }
    return true;
}

static void undo_free_one(cmd_server_t *srv, cmd_undo_t *u)
{
    if (u->held && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, u->held);
    free(u->dump);
    free(u);
}

void cmd_undo_drop(cmd_ctx_t *ctx, const void *owner)
{
    cmd_undo_t **pp = &ctx->undo;
    while (*pp) {
        cmd_undo_t *u = *pp;
        if (u->owner == owner) {
            *pp = u->next;
            undo_free_one(ctx->srv, u);
        } else {
            pp = &u->next;
        }
    }
}

void cmd_undo_free(cmd_server_t *srv, cmd_undo_t *list)
{
    while (list) {
        cmd_undo_t *next = list->next;
        undo_free_one(srv, list);
        list = next;
    }
}

bool cmd_undo_apply(cmd_server_t *srv, const cmd_undo_t *u, int64_t now_ns, uint64_t *lsn)
{
    int64_t now = now_ns / 1000000;
    /* a pre-image whose expiry has passed would be gone by now: absent */
    bool present = u->dump && (u->expire_ms == KS_NO_EXPIRY || u->expire_ms > now);
    const ks_type_t *type = NULL;
    void *value = NULL;
    int64_t dump_ttl;
    const char *why;
    if (present && !keydump_decode(u->dump, u->dump_len, &type, &value, &dump_ttl, &why))
        return false;   /* our own bytes: only memory can be missing */

    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, srv, now_ns, false, 0);
    ctx.journal_held = u->held;   /* what the restoring record may use (debug builds check) */

    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, u->key, u->klen);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(ks, &k, now);
    if (e)
        ks_entry_prepare_write(ks, e);   /* a snapshot in progress keeps what it saw */
    bool ok = true;
    if (present && e && ks_entry_type(e) == type) {
        ks_entry_replace_value(ks, e, value);
        ks_entry_set_expire(ks, e, u->expire_ms);
        ks_entry_changed(ks, e);
    } else {
        if (e)
            ks_entry_delete(ks, e);
        if (present && !ks_add(ks, &k, type, value, u->expire_ms, now)) {
            type->free(value);
            ok = false;
            present = false;   /* what did happen: the key is absent */
        }
    }
    cmd_journal_key_state(&ctx, u->key, u->klen, present ? u->dump : NULL, u->dump_len,
                          u->expire_ms == KS_NO_EXPIRY ? 0 : u->expire_ms - now);
    ks_shard_unlock(sh);
    *lsn = ctx.journal_lsn;
    ctx.journal_held = 0;   /* u's, given back when u is freed */
    return ok;
}
