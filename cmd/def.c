/* def.c - running and replaying the table's operations: see def.h. */
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "cmd/batch.h"
#include "cmd/def.h"
#include "cmd/journal.h"
#include "cmd/table.h"

/* Records larger than this are read back before they are journaled (cmd_call). */
#define CMD_REC_CHECK_BYTES 8192

/* Runs def on args with the context saying so (ctx->def, ctx->args: an
 * operation may run another's). */
static bool run(cmd_ctx_t *ctx, const cmd_def_t *def, const void *args, void *res)
{
    const cmd_def_t *outer = ctx->def;
    const void *outer_args = ctx->args;
    ctx->def = def;
    ctx->args = args;
    bool ok = def->run(ctx, args, res);
    ctx->def = outer;
    ctx->args = outer_args;
    return ok;
}

bool cmd_call(cmd_ctx_t *ctx, const cmd_def_t *def, const void *args, void *res)
{
    if (!(def->flags & CMD_F_WRITE) || ctx->replay || !ctx->srv->hooks.journal || !def->encode)
        return run(ctx, def, args, res);
    uint8_t small[256];
    wbuf_t rec = wbuf_on(small, sizeof small);
    def->encode(args, &rec);
    if (rec.oom) {
        wbuf_free(&rec);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    /* What is journaled must replay: a large record (a long list: what a
     * front-end that did not cap its lists would pass on) is read back as
     * replay reads it and refused before it runs when replay would refuse
     * it.  A small one cannot pass a list's limit; its values are checked
     * by the operation, with its own error. */
    if (rec.len > CMD_REC_CHECK_BYTES) {
        alignas(max_align_t) unsigned char back[CMD_ARGS_MAX];
        memset(back, 0, def->args_size);
        rbuf_t in = rbuf_make(rec.data, rec.len);
        const char *why = "malformed";
        if (!def->decode(&in, back, &why) || !rbuf_done(&in)) {
            wbuf_free(&rec);
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "%s: too large for one change (%s: a change holds at most %d items, keys or operations)", def->name,
                            in.err ? "truncated" : why, CMD_BATCH_MAX);
        }
    }
    if (!cmd_journal_reserve_more(ctx, JOURNAL_COMMAND_FIXED + rec.len)) {
        wbuf_free(&rec);
        return false;
    }
    ctx->rec = rec.data;
    ctx->rec_len = rec.len;
    ctx->rec_op = def->id;
    bool ok = run(ctx, def, args, res);
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
    bool ok = run(&ctx, def, args, res);
    if (!ok)
        *err = ctx.err;
    cmd_ctx_end(&ctx);
    return ok;
}

struct named {
    const char *key;
    size_t len;
    bool found;
};

static bool find_key(void *ud, const char *key, size_t len)
{
    struct named *n = ud;
    n->found = len == n->len && memcmp(key, n->key, len) == 0;
    return !n->found;   /* stop at it */
}

bool cmd_def_names_key(const cmd_def_t *def, const void *args, const char *key, size_t len)
{
    struct named n = { key, len, false };
    if (def->keys)
        def->keys(args, find_key, &n);
    return n.found;
}

bool cmd_keys_first(const void *args, cmd_key_visit_t visit, void *ud)
{
    /* the arguments begin with `const char *key; size_t klen;` (copied out:
     * they are another struct) */
    struct first {
        const char *key;
        size_t klen;
    } f;
    memcpy(&f, args, sizeof(f));
    return visit(ud, f.key, f.klen);
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
