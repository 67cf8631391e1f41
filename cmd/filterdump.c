/* filterdump.c - see filterdump.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/filterdump.h"
#include "cmd/keys.h"
#include "cmd/room.h"

bool cmd_filter_scandump(cmd_ctx_t *ctx, const cmd_filterdump_t *d, const cmd_scandump_args_t *a,
                         cmd_scandump_res_t *r)
{
    const ks_dump_ops_t *ops = d->ops;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, ops->type, CMD_MUST_EXIST, &h))
        return false;
    const void *v = cmd_key_value(&h);
    r->data = NULL;
    r->len = 0;
    if (a->cursor == 0) {
        if (d->header_len && !cmd_answer_fits(ctx, d->header_len(v),
                                              "this filter's header (one entry per sub-filter) cannot be dumped")) {
            cmd_key_close(&h, false);
            return false;
        }
        wbuf_t out = WBUF_INIT;
        bool ok = ops->header(v, &out);
        cmd_key_close(&h, false);
        if (!ok || out.oom) {
            wbuf_free(&out);
            return !ok ? cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "%s", d->why_not)
                       : cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        }
        r->data = wbuf_steal(&out, &r->len);
        r->cursor = 1;
        return true;
    }
    int64_t cursor = a->cursor;
    size_t len;
    const uint8_t *p = ops->chunk(v, &cursor, CMD_DUMP_CHUNK, &len);
    if (len) {   /* copied under the lock: p points into the filter */
        r->data = malloc(len);
        if (r->data)
            memcpy(r->data, p, len);
    }
    cmd_key_close(&h, false);
    if (len && !r->data)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    r->len = len;
    r->cursor = cursor;
    return true;
}

bool cmd_filter_loadchunk(cmd_ctx_t *ctx, const cmd_filterdump_t *d, const cmd_loadchunk_args_t *a,
                          cmd_loadchunk_res_t *r)
{
    const ks_dump_ops_t *ops = d->ops;
    const char *why;
    /* a header creates the filter: its size is known before it is built */
    uint64_t bytes = a->cursor == 1 ? ops->header_bytes(a->data, a->len) : 0;
    if (!cmd_grow(ctx, NULL, "the filter", bytes, bytes ? bytes + ks_entry_overhead(a->klen) : 0) ||
        !cmd_make_room(ctx))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, ops->type, CMD_WRITE, &h))
        return false;
    void *v = cmd_key_value(&h);
    if (!v && a->cursor != 1) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_NOT_FOUND, NULL, "no filter at this key: load its header chunk (cursor 1) first");
    }
    if (!v) {
        bool nomem = false;
        uint64_t cap = cmd_value_limit(ctx);
        v = ops->load_header(a->data, a->len, cap == UINT64_MAX ? 0 : cap, &nomem, &why);
        if (!v || !cmd_key_add(&h, ops->type, v, KS_NO_EXPIRY)) {
            if (v)
                ops->type->free(v);
            cmd_key_close(&h, false);
            if (!v && !nomem)
                return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "not a valid header chunk: %s; nothing was loaded", why);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory loading the filter");
        }
    } else if (!ops->load_chunk(v, a->cursor, a->data, a->len, &why)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "chunk refused: %s; nothing was loaded", why);
    }
    cmd_key_close(&h, true);
    r->loaded = a->len;
    return true;
}

void cmd_loadchunk_encode(const void *args, wbuf_t *out)
{
    const cmd_loadchunk_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_i64(out, a->cursor);
    wbuf_put_blob(out, a->data, a->len);
}

bool cmd_loadchunk_decode(rbuf_t *in, void *args, const char **why)
{
    cmd_loadchunk_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    a->cursor = rbuf_i64(in);
    a->data = rbuf_blob(in, &a->len);
    if (in->err || a->cursor < 1) {
        *why = "bad cursor";
        return false;
    }
    return true;
}
