/* batch.c - the lists of operations, in a front-end's form or a record's: see batch.h. */
#include "cmd/batch.h"
#include "cmd/def.h"
#include "core/keyspace.h"

bool cmd_batch_next(cmd_batch_iter_t *x, const char **p, size_t *len, uint64_t *by)
{
    const cmd_batch_t *it = x->it;
    if (x->i >= it->n)
        return false;
    if (it->rec) {
        size_t n = le32_load(x->at);
        *p = (const char *)x->at + 4;
        *len = n;
        x->at += 4 + n;
        if (it->rec_by) {
            *by = le64_load(x->at);
            x->at += 8;
        } else {
            *by = 1;
        }
    } else {
        *p = it->p[x->i];
        *len = it->len[x->i];
        *by = it->by ? it->by[x->i] : 1;
    }
    x->i++;
    return true;
}

void cmd_batch_put(wbuf_t *out, const cmd_batch_t *it, unsigned flags)
{
    wbuf_put_u32(out, (uint32_t)it->n);
    cmd_batch_iter_t x = cmd_batch_begin(it);
    const char *p;
    size_t len;
    uint64_t by;
    while (cmd_batch_next(&x, &p, &len, &by)) {
        wbuf_put_u32(out, (uint32_t)len);
        wbuf_put_bytes(out, p, len);
        if (flags & CMD_BATCH_BY)
            wbuf_put_u64(out, by);
    }
}

bool cmd_batch_get(rbuf_t *in, cmd_batch_t *it, unsigned flags, uint64_t min_by, uint64_t max_by)
{
    memset(it, 0, sizeof(*it));
    uint32_t n = rbuf_u32(in);
    if (in->err || n == 0 || n > CMD_BATCH_MAX)
        return false;
    it->rec = in->p + in->off;
    it->rec_by = (flags & CMD_BATCH_BY) != 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = rbuf_u32(in);
        const uint8_t *p = rbuf_bytes(in, len);
        if (!p)
            return false;
        if (flags & CMD_BATCH_KEYS ? !cmd_key_text_ok((const char *)p, len) : !codec_utf8_ok(p, len))
            return false;
        if (flags & CMD_BATCH_BY) {
            uint64_t by = rbuf_u64(in);
            if (in->err || by < min_by || by > max_by)
                return false;
        }
    }
    it->n = n;
    return true;
}

bool cmd_key_text_ok(const char *p, size_t len) { return len >= 1 && len <= KS_KEY_MAX && codec_text_ok(p, len); }

bool cmd_get_text_key(rbuf_t *in, const char **key, size_t *len)
{
    return cmd_get_key(in, key, len) && codec_text_ok(*key, *len);
}

void cmd_array_put_u32(wbuf_t *out, const cmd_array_t *a)
{
    wbuf_put_u32(out, (uint32_t)a->n);
    for (size_t i = 0; i < a->n; i++)
        wbuf_put_u32(out, cmd_array_u32(a, i));
}

void cmd_array_put_i64(wbuf_t *out, const cmd_array_t *a)
{
    wbuf_put_u32(out, (uint32_t)a->n);
    for (size_t i = 0; i < a->n; i++)
        wbuf_put_i64(out, cmd_array_i64(a, i));
}

void cmd_array_put_f64(wbuf_t *out, const cmd_array_t *a)
{
    wbuf_put_u32(out, (uint32_t)a->n);
    for (size_t i = 0; i < a->n; i++)
        wbuf_put_f64(out, cmd_array_f64(a, i));
}

bool cmd_array_get(rbuf_t *in, cmd_array_t *a, unsigned width, size_t min_n, size_t max_n)
{
    memset(a, 0, sizeof(*a));
    uint32_t n = rbuf_u32(in);
    if (in->err || n < min_n || n > max_n)
        return false;
    if (n == 0)
        return true;
    const uint8_t *p = rbuf_bytes(in, (size_t)n * width);
    if (!p)
        return false;
    a->n = n;
    a->rec = p;
    return true;
}

bool cmd_get_bool(rbuf_t *in, bool *out)
{
    uint8_t b = rbuf_u8(in);
    *out = b == 1;
    return !in->err && b <= 1;
}

bool cmd_get_head(rbuf_t *in, unsigned version, bool text, const char **key, size_t *klen, const char **why)
{
    if (rbuf_u8(in) != version) {
        *why = "unknown version";
        return false;
    }
    if (!(text ? cmd_get_text_key(in, key, klen) : cmd_get_key(in, key, klen))) {
        *why = "bad key";
        return false;
    }
    return true;
}

bool cmd_batch_keys(const char *key, size_t klen, const cmd_batch_t *sources,
                    bool (*visit)(void *ud, const char *key, size_t len), void *ud)
{
    if (!visit(ud, key, klen))
        return false;
    cmd_batch_iter_t it = cmd_batch_begin(sources);
    const char *p;
    size_t len;
    uint64_t by;
    while (cmd_batch_next(&it, &p, &len, &by))
        if (!visit(ud, p, len))
            return false;
    return true;
}
