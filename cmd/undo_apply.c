/*
 * undo_apply.c - taking a change back (cmd_undo_apply, undo.h): a key
 * restored to its pre-image, and the restoring record journaled.  Apart
 * from undo.c, which keeps the pre-images, because this runs a request of
 * its own (a context, the key's lock, the journal) above them.
 */
#include "cmd/undo.h"

#include "cmd/journal.h"
#include "core/keydump.h"

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
    if (present && e && ks_entry_type(e) == type && ks_entry_value_fits(e, value)) {
        ks_entry_replace_value(ks, e, value);
        ks_entry_set_expire(ks, &e, u->expire_ms);
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
