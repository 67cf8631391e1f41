/* itemlist.c - see itemlist.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/itemlist.h"
#include "core/keyspace.h"

void cmd_put_varint(wbuf_t *out, uint32_t v)
{
    uint8_t b[5];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    wbuf_put_bytes(out, b, n);
}

bool cmd_get_varint(rbuf_t *in, uint32_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 5; i++) {
        uint8_t b = rbuf_u8(in);
        if (in->err)
            return false;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (i > 0 && b == 0)
                return false;   /* a longer form than needed: not written here */
            if (x > UINT32_MAX)
                return false;
            *v = (uint32_t)x;
            return true;
        }
    }
    return false;
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

uint64_t cmd_items_record_bytes(const cmd_items_t *l)
{
    if (!l->p)
        return 4 + (uint64_t)l->packed_len;
    uint64_t bytes = 4;
    for (size_t i = 0; i < l->n; i++)
        bytes += varint_size(l->len[i]) + l->len[i] + (l->num ? 8 : 0);
    return bytes;
}

void cmd_items_put(wbuf_t *out, const cmd_items_t *l)
{
    wbuf_put_u32(out, (uint32_t)l->n);
    if (!l->p) {
        wbuf_put_bytes(out, l->packed, l->packed_len);
        return;
    }
    for (size_t i = 0; i < l->n; i++) {
        if (l->len[i] > UINT32_MAX) {
            out->oom = true;   /* no request carries such an item */
            return;
        }
        cmd_put_varint(out, (uint32_t)l->len[i]);
        wbuf_put_bytes(out, l->p[i], l->len[i]);
        if (l->num)
            wbuf_put_u64(out, l->num[i]);
    }
}

bool cmd_items_get(rbuf_t *in, unsigned flags, size_t min, size_t max, cmd_items_t *l)
{
    uint32_t n = rbuf_u32(in);
    if (in->err || n < min || n > max)
        return false;
    size_t start = in->off;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        if (!cmd_get_varint(in, &len))
            return false;
        const uint8_t *p = rbuf_bytes(in, len);
        if (!p)
            return false;
        if ((flags & CMD_ITEMS_KEYS) && (len == 0 || len > KS_KEY_MAX))
            return false;
        if ((flags & CMD_ITEMS_TEXT) && !codec_text_ok(p, len))
            return false;
        if (flags & CMD_ITEMS_NUM)
            (void)rbuf_u64(in);
        if (in->err)
            return false;
    }
    memset(l, 0, sizeof(*l));
    l->n = n;
    l->packed = in->p + start;
    l->packed_len = in->off - start;
    l->has_num = (flags & CMD_ITEMS_NUM) != 0;
    return true;
}

bool cmd_items_next(const cmd_items_t *l, cmd_items_iter_t *it, const char **p, size_t *len, uint64_t *num)
{
    if (it->i >= l->n)
        return false;
    if (l->p) {
        *p = l->p[it->i];
        *len = l->len[it->i];
        if (num)
            *num = l->num ? l->num[it->i] : 0;
    } else {
        if (it->i == 0)
            it->in = rbuf_make(l->packed, l->packed_len);
        uint32_t k = 0;
        cmd_get_varint(&it->in, &k);   /* validated when the record was decoded */
        *len = k;
        *p = (const char *)rbuf_bytes(&it->in, k);
        uint64_t x = l->has_num ? rbuf_u64(&it->in) : 0;
        if (num)
            *num = x;
    }
    it->i++;
    return true;
}

bool cmd_items_view(const cmd_items_t *l, cmd_items_view_t *v)
{
    memset(v, 0, sizeof(*v));
    if (l->p) {
        v->p = l->p;
        v->len = l->len;
        v->num = l->num;
        return true;
    }
    /* one block: the pointers, the lengths, the numbers */
    size_t n = l->n ? l->n : 1;
    size_t bytes = n * (sizeof(char *) + sizeof(size_t) + (l->has_num ? sizeof(uint64_t) : 0));
    void *block = malloc(bytes);
    if (!block)
        return false;
    const char **p = block;
    size_t *len = (size_t *)(p + n);
    uint64_t *num = l->has_num ? (uint64_t *)(len + n) : NULL;
    rbuf_t in = rbuf_make(l->packed, l->packed_len);
    for (size_t i = 0; i < l->n; i++) {
        uint32_t k = 0;
        cmd_get_varint(&in, &k);   /* validated when the record was decoded */
        len[i] = k;
        p[i] = (const char *)rbuf_bytes(&in, k);
        if (num)
            num[i] = rbuf_u64(&in);
    }
    v->p = p;
    v->len = len;
    v->num = num;
    v->owned = block;
    return true;
}

void cmd_items_view_free(cmd_items_view_t *v)
{
    free(v->owned);
    v->owned = NULL;
}
