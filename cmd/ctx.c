/*
 * ctx.c - a request's execution state (cmd/cmd.h), and the check of
 * whether this node takes changes at all.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/journal.h"
#include "cmd/undo.h"

void cmd_ctx_init(cmd_ctx_t *ctx, cmd_server_t *srv, int64_t now_ns, bool replay, unsigned gen)
{
    ctx->srv = srv;
    ctx->token = NULL;
    ctx->what_verb = "";
    ctx->what_name = "";
    ctx->now_ns = now_ns;
    ctx->replay = replay;
    ctx->gen = gen;
    ctx->err.code = CMD_E_INTERNAL;
    ctx->err.field[0] = ctx->err.message[0] = ctx->err.where[0] = ctx->err.node[0] = '\0';
    ctx->err.long_field = NULL;
    ctx->err.slot = -1;
    ctx->err.epoch = 0;
    ctx->err.retry_after = 0;
    ctx->err.scope = NULL;
    ctx->routing_key = NULL;
    ctx->asking = false;
    ctx->journal_held = ctx->journal_used = ctx->journal_lsn = 0;
    ctx->def = NULL;
    ctx->args = NULL;
    ctx->rec = NULL;
    ctx->rec_len = 0;
    ctx->rec_op = 0;
    ctx->undo_on = false;
    ctx->undo = NULL;
    ctx->repl_pos = 0;
    ctx->front = NULL;
    ctx->hold = NULL;
}

void cmd_ctx_end(cmd_ctx_t *ctx)
{
    cmd_journal_unreserve(ctx);
    if (ctx->undo_on) {
        cmd_undo_free(ctx->srv, ctx->undo);   /* none when every lock was released */
        ctx->undo = NULL;
        ctx->undo_on = false;
        if (!ctx->hold)   /* a transaction's gate is the hold's (cmd_hold_end) */
            ctx->srv->hooks.undo_end(ctx->srv->hooks.ud);
    }
}

bool cmd_writable(cmd_ctx_t *ctx)
{
    const cmd_hooks_t *h = &ctx->srv->hooks;
    char primary[sizeof(ctx->err.where)];
    if (ctx->replay || !h->writable || h->writable(h->ud, primary, sizeof(primary)))
        return true;
    if (primary[0]) {
        cmd_fail(ctx, CMD_E_READONLY, NULL, "this node is a read-only replica: send changes to the primary %s",
                 primary);
        snprintf(ctx->err.where, sizeof(ctx->err.where), "%s", primary);
    } else if (!strcmp(h->role(h->ud), "probing")) {
        cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL,
                 "this node takes no changes until the coordinator (etcd) names the primary of its replication "
                 "group; the request was not applied");
    } else {
        cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL,
                 "this node takes no changes: it is a replica whose primary is unknown, or a primary whose lease in "
                 "the coordinator lapsed (another node may be the primary now); the request was not applied");
    }
    return false;
}
