/* keyrec.c - the records of DEL and RESTORE: see keyrec.h. */
#include "cmd/keyrec.h"

#include "cmd/record.h"

void cmd_keyrec_del_encode(const void *args, wbuf_t *out)
{
    const cmd_del_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, a->has_digest);
    wbuf_put_u64(out, a->has_digest ? a->digest : 0);
}

bool cmd_keyrec_del_decode(rbuf_t *in, void *args, const char **why)
{
    cmd_del_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    uint8_t has = rbuf_u8(in);
    a->digest = rbuf_u64(in);
    a->has_digest = has == 1;
    if (has > 1 || (!a->has_digest && a->digest != 0)) {
        *why = "bad digest";
        return false;
    }
    return true;
}

void cmd_keyrec_restore_head(const cmd_restore_args_t *a, wbuf_t *out)
{
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, (uint8_t)((a->replace ? 1 : 0) | (a->has_ttl ? 2 : 0)));
    wbuf_put_i64(out, a->has_ttl ? a->ttl_ms : 0);
    wbuf_put_u32(out, (uint32_t)a->len);
}

void cmd_keyrec_restore_encode(const void *args, wbuf_t *out)
{
    const cmd_restore_args_t *a = args;
    cmd_keyrec_restore_head(a, out);
    wbuf_put_bytes(out, a->dump, a->len);
}

bool cmd_keyrec_restore_decode(rbuf_t *in, void *args, const char **why)
{
    cmd_restore_args_t *a = args;
    if (rbuf_u8(in) != 1) {
        *why = "unknown version";
        return false;
    }
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    uint8_t flags = rbuf_u8(in);
    a->ttl_ms = rbuf_i64(in);
    a->dump = rbuf_blob(in, &a->len);
    a->replace = flags & 1;
    a->has_ttl = flags & 2;
    if (in->err || flags > 3 || a->ttl_ms < 0 || a->ttl_ms > INT64_MAX / 2 || (!a->has_ttl && a->ttl_ms)) {
        *why = "bad options";
        return false;
    }
    return true;
}
