/* admit.c - see admit.h. */
#include "cmd/admit.h"

#include "cmd/cluster.h"
#include "cmd/journal.h"
#include "cmd/keys.h"

bool cmd_admit(cmd_ctx_t *ctx, const cmd_admission_t *a)
{
    if (!cmd_access_check(ctx, a->access) || (a->key && !cmd_key_allowed(ctx, a->key, a->klen)))
        return false;
    ks_key_t k = { .p = a->key, .len = a->klen };
    if (!cmd_cluster_keys_check(ctx, &k, a->key ? 1 : 0, false))
        return false;
    if (a->loading) {
        /* nothing is read or changed while the keyspace is replaced, but a
         * change still gets the replica's READONLY naming its primary (Redis
         * answers READONLY before LOADING) */
        if (!a->writes || cmd_writable(ctx))
            cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL,
                     "loading a snapshot from the primary (a full resynchronisation): retry in a moment");
        return false;
    }
    if (!a->writes)
        return true;
    const cmd_hooks_t *h = &ctx->srv->hooks;
    if (ctx->hold)   /* the transaction entered the gate once, before its locks (cmd/keys.h) */
        ctx->undo_on = !ctx->replay && ctx->hold->undo;
    else
        ctx->undo_on = !ctx->replay && h->undo_begin && h->undo_begin(h->ud);
    return cmd_writable(ctx) && cmd_journal_reserve(ctx, a->journal_bytes);
}
