/* codec.c - see codec.h. */
#include "core/codec.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Writer                                                                   */
/* ------------------------------------------------------------------------ */

bool wbuf_reserve(wbuf_t *b, size_t extra)
{
    if (b->oom)
        return false;
    if (extra <= b->cap - b->len)
        return true;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    size_t want = b->len + extra;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < want)
        cap *= 2;
    uint8_t *p = b->borrowed ? malloc(cap) : realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    if (b->borrowed && b->len)
        memcpy(p, b->data, b->len);
    b->data = p;
    b->cap = cap;
    b->borrowed = false;
    return true;
}

void wbuf_put_bytes(wbuf_t *b, const void *p, size_t n)
{
    if (n == 0 || !wbuf_reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void wbuf_put_u8(wbuf_t *b, uint8_t v) { wbuf_put_bytes(b, &v, 1); }

void wbuf_put_u16(wbuf_t *b, uint16_t v)
{
    uint8_t t[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    wbuf_put_bytes(b, t, 2);
}

void wbuf_put_u32(wbuf_t *b, uint32_t v)
{
    uint8_t t[4];
    le32_store(t, v);
    wbuf_put_bytes(b, t, 4);
}

void wbuf_put_u64(wbuf_t *b, uint64_t v)
{
    uint8_t t[8];
    le64_store(t, v);
    wbuf_put_bytes(b, t, 8);
}

void wbuf_put_i64(wbuf_t *b, int64_t v) { wbuf_put_u64(b, (uint64_t)v); }

void wbuf_put_f64(wbuf_t *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    wbuf_put_u64(b, u);
}

void wbuf_put_blob(wbuf_t *b, const void *p, size_t n)
{
    if (n > UINT32_MAX) {
        b->oom = true;
        return;
    }
    wbuf_put_u32(b, (uint32_t)n);
    wbuf_put_bytes(b, p, n);
}

void wbuf_patch_u32(wbuf_t *b, size_t at, uint32_t v)
{
    if (!b->oom && at + 4 <= b->len)
        le32_store(b->data + at, v);
}

void wbuf_patch_u64(wbuf_t *b, size_t at, uint64_t v)
{
    if (!b->oom && at + 8 <= b->len)
        le64_store(b->data + at, v);
}

void wbuf_free(wbuf_t *b)
{
    if (b->data && !b->borrowed)   /* jemalloc's free(NULL) is not free: every GET has an empty body */
        free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = false;
    b->borrowed = false;
}

uint8_t *wbuf_steal(wbuf_t *b, size_t *len)
{
    uint8_t *p = b->data;
    if (b->borrowed) {   /* the caller's storage: hand over a heap copy */
        p = b->len ? malloc(b->len) : NULL;
        if (p)
            memcpy(p, b->data, b->len);
        b->borrowed = false;
    }
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = false;
    return p;
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                   */
/* ------------------------------------------------------------------------ */

const uint8_t *rbuf_bytes(rbuf_t *r, size_t n)
{
    if (r->err || n > r->len - r->off) {
        r->err = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

uint8_t rbuf_u8(rbuf_t *r)
{
    const uint8_t *p = rbuf_bytes(r, 1);
    return p ? p[0] : 0;
}

uint16_t rbuf_u16(rbuf_t *r)
{
    const uint8_t *p = rbuf_bytes(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t rbuf_u32(rbuf_t *r)
{
    const uint8_t *p = rbuf_bytes(r, 4);
    return p ? le32_load(p) : 0;
}

uint64_t rbuf_u64(rbuf_t *r)
{
    const uint8_t *p = rbuf_bytes(r, 8);
    return p ? le64_load(p) : 0;
}

int64_t rbuf_i64(rbuf_t *r) { return (int64_t)rbuf_u64(r); }

double rbuf_f64(rbuf_t *r)
{
    uint64_t u = rbuf_u64(r);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

const uint8_t *rbuf_blob(rbuf_t *r, size_t *n)
{
    uint32_t len = rbuf_u32(r);
    const uint8_t *p = rbuf_bytes(r, len);
    *n = p ? len : 0;
    return p;
}

static bool utf8_scan(const unsigned char *s, size_t n, bool nul_ok)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII eight bytes at a time: no high bit, and no zero byte unless
         * NUL is allowed (exact once no high bit is set) */
        while (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ULL) ||
                (!nul_ok && ((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL)))
                break;
            i += 8;
        }
        if (i == n)
            break;
        unsigned c = s[i];
        if (c == 0 && !nul_ok)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned cp;
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= need)
            return false;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += need + 1;
    }
    return true;
}

bool codec_text_ok(const void *p, size_t n) { return utf8_scan(p, n, false); }

bool codec_utf8_ok(const void *p, size_t n) { return utf8_scan(p, n, true); }

bool codec_hex64_parse(const char *s, size_t len, uint64_t *out)
{
    if (len != 16)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return false;
        v = v << 4 | d;
    }
    *out = v;
    return true;
}
