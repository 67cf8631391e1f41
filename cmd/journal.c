/* journal.c - see journal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/journal.h"
#include "cmd/keys_ops.h"
#include "cmd/keyrec.h"

bool cmd_journal_reserve(cmd_ctx_t *ctx, uint64_t bytes)
{
    cmd_server_t *srv = ctx->srv;
    if (ctx->replay || !srv->hooks.journal_reserve || bytes == 0)
        return true;
    const char *err = "journal unavailable";
    if (!srv->hooks.journal_reserve(srv->hooks.ud, bytes, &err))
        return cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL,
                        "the change cannot be made durable: no journal space (%s); the request was not applied, "
                        "retry later",
                        err);
    ctx->journal_held += bytes;
    return true;
}

bool cmd_journal_reserve_more(cmd_ctx_t *ctx, uint64_t bytes)
{
    if (ctx->replay || !ctx->srv->hooks.journal_reserve || bytes == 0)
        return true;
    /* a gateway's canonical record usually fits in what the request
     * already holds, which it replaces: no second round trip then */
    uint64_t spare = ctx->journal_held > ctx->journal_used ? ctx->journal_held - ctx->journal_used : 0;
    if (bytes <= spare)
        return true;
    return cmd_journal_reserve(ctx, bytes - spare);
}

void cmd_journal_unreserve(cmd_ctx_t *ctx)
{
    cmd_server_t *srv = ctx->srv;
    if (ctx->journal_held && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, ctx->journal_held);
    ctx->journal_held = 0;
}

static void journal_put(cmd_ctx_t *ctx, const journal_req_t *jr)
{
    cmd_server_t *srv = ctx->srv;
    uint64_t lsn = srv->hooks.journal(srv->hooks.ud, jr);
    if (lsn > ctx->journal_lsn)
        ctx->journal_lsn = lsn;
    if (ctx->undo_on) {
        /* the pre-images of the keys locked now go with the record (cmd/undo.h) */
        uint64_t pos = srv->hooks.undo_register(srv->hooks.ud, ctx->undo);
        ctx->undo = NULL;
        if (pos > ctx->repl_pos)
            ctx->repl_pos = pos;
    }
}

void cmd_journal_record(cmd_ctx_t *ctx, const journal_req_t *jr)
{
    if (ctx->replay || !ctx->srv->hooks.journal)
        return;
    ctx->journal_used += journalfmt_request_size(jr);
#ifdef TALLY_DEBUG_LOCKS
    if (ctx->srv->hooks.journal_reserve && ctx->journal_used > ctx->journal_held) {
        fprintf(stderr, "tally: journal record of %.*s (op %u) exceeds the space secured for it (%llu > %llu bytes)\n",
                (int)jr->path_len, jr->path, (unsigned)jr->op, (unsigned long long)ctx->journal_used,
                (unsigned long long)ctx->journal_held);
        abort();
    }
#endif
    journal_put(ctx, jr);
}

void cmd_journal_change(cmd_ctx_t *ctx)
{
    if (ctx->rec) {
        journal_req_t jr = { .kind = JOURNAL_REC_COMMAND, .op = ctx->rec_op, .now_ns = ctx->now_ns, .path = "",
                             .query = "", .ctype = "", .body = ctx->rec, .body_len = ctx->rec_len };
        cmd_journal_record(ctx, &jr);
        return;
    }
    /* every change is an operation of the table run by cmd_call, which
     * encoded its record: a change without one is a bug that replay could not
     * repeat, so debug builds stop on it */
#ifdef TALLY_DEBUG_LOCKS
    if (!ctx->replay && ctx->srv->hooks.journal) {
        fprintf(stderr, "tally: a change of %s %s has no command record: run it through cmd_call\n",
                ctx->what_verb ? ctx->what_verb : "", ctx->what_name ? ctx->what_name : "an operation");
        abort();
    }
#endif
}

size_t cmd_escape_segment(const char *key, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)key[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '_' || c == '.' || c == '~') {
            out[j++] = (char)c;
        } else {
            out[j++] = '%';
            out[j++] = hex[c >> 4];
            out[j++] = hex[c & 15];
        }
    }
    out[j] = '\0';
    return j;
}

/* A command record of operation `op` whose arguments are `args`. */
static journal_req_t command_record(const cmd_ctx_t *ctx, uint16_t op, const wbuf_t *args)
{
    journal_req_t jr = { .kind = JOURNAL_REC_COMMAND, .op = op, .now_ns = ctx->now_ns, .path = "", .query = "",
                         .ctype = "", .body = args->data, .body_len = args->len };
    return jr;
}

void cmd_journal_key_state(cmd_ctx_t *ctx, const char *key, size_t klen, const void *dump, size_t dump_len,
                           int64_t ttl_ms)
{
    if (ctx->replay || !ctx->srv->hooks.journal)
        return;
    uint8_t small[64 + KS_KEY_MAX];   /* the record but a dump's bytes: no allocation */
    wbuf_t args = wbuf_on(small, sizeof small);
    journal_req_t jr;
    if (!dump) {
        cmd_del_args_t a = { .key = key, .klen = klen };
        cmd_keyrec_del_encode(&a, &args);
        jr = command_record(ctx, CMD_ID_DEL, &args);
    } else {
        cmd_restore_args_t a = { .key = key, .klen = klen, .replace = true, .has_ttl = true, .ttl_ms = ttl_ms,
                                 .dump = dump, .len = dump_len };
        cmd_keyrec_restore_head(&a, &args);
        jr = command_record(ctx, CMD_ID_RESTORE, &args);
        jr.tail = dump;
        jr.tail_len = dump_len;
    }
    cmd_journal_record(ctx, &jr);
    wbuf_free(&args);
}

void cmd_journal_eviction(cmd_ctx_t *ctx, const char *key, size_t len)
{
    if (!ctx->srv->hooks.journal)
        return;
    uint8_t small[64 + KS_KEY_MAX];   /* a deletion always fits: no allocation */
    wbuf_t args = wbuf_on(small, sizeof small);
    cmd_del_args_t a = { .key = key, .klen = len };
    cmd_keyrec_del_encode(&a, &args);
    journal_req_t jr = command_record(ctx, CMD_ID_DEL, &args);
    journal_put(ctx, &jr);   /* in space the eviction secured: not the request's */
    wbuf_free(&args);
}
