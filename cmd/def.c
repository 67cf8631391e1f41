/* def.c - running and replaying the table's operations: see def.h. */
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "cmd/def.h"
#include "cmd/journal.h"
#include "cmd/table.h"

bool cmd_call(cmd_ctx_t *ctx, const cmd_def_t *def, const void *args, void *res)
{
    if (!(def->flags & CMD_F_WRITE) || ctx->replay || !ctx->srv->hooks.journal || !def->encode)
        return def->run(ctx, args, res);
    uint8_t small[256];
    wbuf_t rec = wbuf_on(small, sizeof small);
    def->encode(args, &rec);
    if (rec.oom) {
        wbuf_free(&rec);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    if (!cmd_journal_reserve_more(ctx, JOURNAL_COMMAND_FIXED + rec.len)) {
        wbuf_free(&rec);
        return false;
    }
    ctx->rec = rec.data;
    ctx->rec_len = rec.len;
    ctx->rec_op = def->id;
    bool ok = def->run(ctx, args, res);
    ctx->rec = NULL;
    ctx->rec_len = 0;
    wbuf_free(&rec);
    return ok;
}

bool cmd_replay(cmd_server_t *srv, const journal_req_t *q, unsigned gen, cmd_err_t *err)
{
    const cmd_def_t *def = cmd_def_by_id(q->op);
    if (!def || !def->decode) {
        cmd_err_set(err, CMD_E_BAD_REQUEST, NULL, "unknown operation %u (a record of a newer tally)", (unsigned)q->op);
        return false;
    }
    alignas(max_align_t) unsigned char args[CMD_ARGS_MAX], res[CMD_RES_MAX];
    memset(args, 0, def->args_size);
    rbuf_t in = rbuf_make(q->body, q->body_len);
    const char *why = "malformed";
    if (!def->decode(&in, args, &why) || !rbuf_done(&in)) {
        cmd_err_set(err, CMD_E_BAD_REQUEST, NULL, "%s record: %s", def->name, in.err ? "truncated" : why);
        return false;
    }
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, srv, q->now_ns, true, gen);
    bool ok = def->run(&ctx, args, res);
    if (!ok)
        *err = ctx.err;
    cmd_ctx_end(&ctx);
    return ok;
}

const cmd_def_t *cmd_def_by_id(uint16_t id)
{
    for (size_t i = 0; i < cmd_ndefs; i++)
        if (cmd_defs[i]->id == id)
            return cmd_defs[i];
    return NULL;
}

const cmd_def_t *cmd_def_by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < cmd_ndefs; i++) {
        const char *n = cmd_defs[i]->name;
        if (strlen(n) == len && strncasecmp(n, name, len) == 0)
            return cmd_defs[i];
    }
    return NULL;
}

size_t cmd_def_count(void) { return cmd_ndefs; }
const cmd_def_t *cmd_def_at(size_t i) { return i < cmd_ndefs ? cmd_defs[i] : NULL; }
