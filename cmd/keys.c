/* keys.c - the key handle: see keys.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/cluster.h"
#include "cmd/def.h"
#include "cmd/journal.h"
#include "cmd/keys.h"
#include "cmd/names.h"
#include "cmd/undo.h"

static bool answer_missing(cmd_ctx_t *ctx, const ks_type_t *type)
{
    char msg[160];
    cmd_type_missing(type, msg, sizeof(msg));
    return cmd_fail(ctx, CMD_E_NOT_FOUND, NULL, "%s", msg);
}

/* WRONGTYPE naming both types ("key holds a counter (counter), not a geo
 * set (geo)"); `role` (may be NULL) names the key of a multi-key request
 * ("sources[1]"). */
static bool answer_wrongtype(cmd_ctx_t *ctx, const ks_type_t *held, const ks_type_t *wanted, const char *role)
{
    return cmd_fail(ctx, CMD_E_WRONGTYPE, NULL, "%s%skey holds %s (%s), not %s (%s)", role ? role : "",
                    role ? ": " : "", cmd_type_noun(held), held->name, cmd_type_noun(wanted), wanted->name);
}

#ifdef TALLY_DEBUG_LOCKS
/* Every key an operation opens is one its table row says it names (cmd/def.h,
 * keys), unless it reaches keys its state names (CMD_F_STATE_KEYS). */
static void check_named(const cmd_ctx_t *ctx, const ks_key_t *keys, size_t n)
{
    const cmd_def_t *def = ctx->def;
    if (!def || (def->flags & CMD_F_STATE_KEYS))
        return;
    for (size_t i = 0; i < n; i++)
        if (!cmd_def_names_key(def, ctx->args, keys[i].p, keys[i].len)) {
            fprintf(stderr, "tally: %s opened key \"%.*s\", which its arguments do not name (cmd/def.h, keys)\n",
                    def->name, (int)(keys[i].len > 100 ? 100 : keys[i].len), keys[i].p);
            abort();
        }
}
#endif

bool cmd_keys_lock(cmd_ctx_t *ctx, ks_key_t *keys, size_t n, cmd_key_t *h)
{
#ifdef TALLY_DEBUG_LOCKS
    check_named(ctx, keys, n);
#endif
    h->locked = false;
    h->held = false;
    if (!cmd_keys_allowed(ctx, keys, n))
        return false;
    cmd_server_t *srv = ctx->srv;
    if (ctx->hold) {
        for (size_t i = 0; i < n; i++)
            if (!cmd_hold_has(ctx, keys[i].shard))
                return cmd_fail(ctx, CMD_E_INTERNAL, NULL,
                                "%s reached a key its transaction did not lock; nothing was changed by it",
                                ctx->def ? ctx->def->name : "the operation");
        h->held = true;
    }
    h->ctx = ctx;
    h->keys = keys;
    h->n = n;
    h->e = NULL;
    h->locked = true;
    if (h->held)
        ;   /* the transaction's locks */
    else if (n == 1)
        ks_shard_lock(ks_shard_at(srv->ks, keys[0].shard));
    else
        ks_lock_keys(srv->ks, keys, n);
    if (!cmd_cluster_keys_check(ctx, keys, n, true)) {
        cmd_key_close(h, false);   /* another node's slot, or keys that have left it */
        return false;
    }
    if (ctx->undo_on && !cmd_undo_capture(ctx, h, keys, n)) {
        cmd_key_close(h, false);   /* nothing changed yet: refused */
        return false;
    }
    return true;
}

bool cmd_keys_allowed_here(cmd_ctx_t *ctx, const ks_key_t *keys, size_t n)
{
    return cmd_keys_allowed(ctx, keys, n) && cmd_cluster_keys_check(ctx, keys, n, false);
}

bool cmd_keys_find(cmd_key_t *h, size_t i, const ks_type_t *type, unsigned flags, const char *role, ks_entry_t **out)
{
    cmd_ctx_t *ctx = h->ctx;
    ks_entry_t *e = ks_find(ctx->srv->ks, &h->keys[i], cmd_now_ms(ctx));
    if (!e && (flags & CMD_MUST_EXIST)) {
        cmd_key_close(h, false);
        return answer_missing(ctx, type);
    }
    const ks_type_t *held = e ? ks_entry_type(e) : NULL;
    if (held && type && held != type) {
        cmd_key_close(h, false);   /* (the entry is not read once unlocked: another thread may free it) */
        return answer_wrongtype(ctx, held, type, role);
    }
    if (e && (flags & CMD_WRITE))
        ks_entry_prepare_write(ctx->srv->ks, e);
    if (flags & CMD_WRITE || h->n == 1)
        h->e = e;
    if (out)
        *out = e;
    return true;
}

bool cmd_key_open(cmd_ctx_t *ctx, const char *key, size_t len, const ks_type_t *type, unsigned flags, cmd_key_t *h)
{
    h->key = ks_key(ctx->srv->ks, key, len);
    return cmd_keys_lock(ctx, &h->key, 1, h) && cmd_keys_find(h, 0, type, flags, NULL, NULL);
}

bool cmd_key_add(cmd_key_t *h, const ks_type_t *type, void *value, int64_t expire_ms)
{
    ks_entry_t *e = ks_add(h->ctx->srv->ks, &h->keys[0], type, value, expire_ms, cmd_now_ms(h->ctx));
    if (!e)
        return false;
    h->e = e;
    return true;
}

void cmd_key_replace(cmd_key_t *h, void *value) { ks_entry_replace_value(h->ctx->srv->ks, h->e, value); }

void cmd_key_delete(cmd_key_t *h)
{
    ks_entry_delete(h->ctx->srv->ks, h->e);
    h->e = NULL;
}

void cmd_key_close(cmd_key_t *h, bool changed)
{
    if (!h->locked)
        return;
    cmd_ctx_t *ctx = h->ctx;
    if (changed) {
        if (h->e)
            ks_entry_changed(ctx->srv->ks, h->e);
        cmd_journal_change(ctx);
    }
    h->locked = false;
    if (h->held)
        ;   /* the transaction keeps its locks (cmd_hold_end) */
    else if (h->n == 1)
        ks_shard_unlock(ks_shard_at(ctx->srv->ks, h->keys[0].shard));
    else
        ks_unlock_keys(ctx->srv->ks, h->keys, h->n);
    if (ctx->undo)
        cmd_undo_drop(ctx, h);   /* pre-images of a lock that journaled nothing */
}

/* ------------------------------------------------------------------------ */
/* Transactions                                                             */
/* ------------------------------------------------------------------------ */

bool cmd_hold_begin(cmd_hold_t *hold, cmd_server_t *srv, const ks_key_t *keys, size_t n, bool all)
{
    unsigned count = ks_shard_count(srv->ks);
    hold->srv = srv;
    hold->all = all;
    hold->shard = calloc(count, 1);
    if (!hold->shard)
        return false;
    if (all)
        memset(hold->shard, 1, count);
    for (size_t i = 0; i < n; i++)
        hold->shard[keys[i].shard] = 1;
    const cmd_hooks_t *hk = &srv->hooks;
    /* the gate before the locks: a change being taken back holds the gate
     * while it locks keys */
    hold->undo = hk->undo_begin && hk->undo_begin(hk->ud);
    for (unsigned i = 0; i < count; i++)   /* ascending: never deadlocks */
        if (hold->shard[i])
            ks_shard_lock(ks_shard_at(srv->ks, i));
    return true;
}

void cmd_hold_end(cmd_hold_t *hold)
{
    if (!hold->shard)
        return;
    unsigned count = ks_shard_count(hold->srv->ks);
    for (unsigned i = count; i-- > 0;)
        if (hold->shard[i])
            ks_shard_unlock(ks_shard_at(hold->srv->ks, i));
    free(hold->shard);
    hold->shard = NULL;
    const cmd_hooks_t *hk = &hold->srv->hooks;
    if (hold->undo)
        hk->undo_end(hk->ud);
    hold->undo = false;
}

bool cmd_hold_has(const cmd_ctx_t *ctx, unsigned i)
{
    return ctx->hold && ctx->hold->shard && ctx->hold->shard[i];
}

void cmd_shard_lock(cmd_ctx_t *ctx, unsigned i)
{
#ifdef TALLY_DEBUG_LOCKS
    if (ctx->hold && !cmd_hold_has(ctx, i)) {   /* another lock than the hold's, out of order */
        fprintf(stderr, "tally: %s walks shards under a transaction that does not hold them all (cmd/keys.h)\n",
                ctx->def ? ctx->def->name : "an operation");
        abort();
    }
#endif
    if (!cmd_hold_has(ctx, i))
        ks_shard_lock(ks_shard_at(ctx->srv->ks, i));
}

void cmd_shard_unlock(cmd_ctx_t *ctx, unsigned i)
{
    if (!cmd_hold_has(ctx, i))
        ks_shard_unlock(ks_shard_at(ctx->srv->ks, i));
}
