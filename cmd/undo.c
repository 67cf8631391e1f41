/* undo.c - pre-images of changes and taking a change back: see undo.h. */
#include "cmd/undo.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/journal.h"
#include "core/keydump.h"

/* The restoring record's size at most: a RESTORE record with the dump (a
 * deletion is smaller). */
static uint64_t record_bound(size_t klen, size_t dump_len)
{
    return CMD_KEYREC_RESTORE_SIZE(klen, dump_len);
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
                           .expire_ms = e ? ks_entry_expire(srv->ks, e) : KS_NO_EXPIRY, .owner = owner,
                           .klen = keys[i].len };
        memcpy(u->key, keys[i].p, keys[i].len);
        uint64_t bytes = record_bound(u->klen, u->dump_len);
        if (bytes - JOURNAL_FRAME_SIZE > JOURNAL_MAX_RECORD) {
            size_t len = u->dump_len;
            free(u->dump);
            free(u);
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL,
                            "the key's value is too large to keep its state before the change (%zu bytes; a journal "
                            "record holds at most %u) so that it could be taken back (--min-replicas-ack); the "
                            "request was not applied",
                            len, (unsigned)JOURNAL_MAX_RECORD);
        }
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
