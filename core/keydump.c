/*
 * keydump.c - one key's portable dump (core/keydump.h has the layout).
 */
#include <string.h>
#include <xxhash.h>

#include "core/keydump.h"

void keydump_encode(const ks_type_t *type, const void *value, int64_t ttl_ms, wbuf_t *out)
{
    size_t start = out->len;
    wbuf_put_bytes(out, KEYDUMP_MAGIC, 8);
    wbuf_put_u16(out, KEYDUMP_VERSION);
    wbuf_put_u8(out, type->tag);
    wbuf_put_u8(out, 0);
    wbuf_put_i64(out, ttl_ms < 0 ? KEYDUMP_NO_TTL : ttl_ms > 0 ? ttl_ms : 1);
    size_t vlen_at = out->len;
    wbuf_put_u64(out, 0);
    size_t vstart = out->len;
    type->encode(value, out);
    if (out->oom)
        return;
    wbuf_patch_u64(out, vlen_at, (uint64_t)(out->len - vstart));
    wbuf_put_u64(out, XXH64(out->data + start, out->len - start, 0));
}

bool keydump_verify(const uint8_t *p, size_t len)
{
    return len >= KEYDUMP_HEADER_SIZE + KEYDUMP_TRAILER_SIZE && memcmp(p, KEYDUMP_MAGIC, 8) == 0 &&
           (unsigned)(p[8] | p[9] << 8) == KEYDUMP_VERSION &&
           le64_load(p + len - KEYDUMP_TRAILER_SIZE) == XXH64(p, len - KEYDUMP_TRAILER_SIZE, 0);
}

bool keydump_decode(const uint8_t *p, size_t len, const ks_type_t **type, void **value, int64_t *ttl_ms,
                    const char **why)
{
    *value = NULL;
    if (len < KEYDUMP_HEADER_SIZE + KEYDUMP_TRAILER_SIZE) {
        *why = "too short to be a dump";
        return false;
    }
    rbuf_t r = rbuf_make(p, len);
    const uint8_t *magic = rbuf_bytes(&r, 8);
    if (memcmp(magic, KEYDUMP_MAGIC, 8) != 0) {
        *why = "not a tally dump (bad magic)";
        return false;
    }
    if (rbuf_u16(&r) != KEYDUMP_VERSION) {
        *why = "unsupported dump version";
        return false;
    }
    if (le64_load(p + len - KEYDUMP_TRAILER_SIZE) != XXH64(p, len - KEYDUMP_TRAILER_SIZE, 0)) {
        *why = "checksum mismatch: the dump is damaged";
        return false;
    }
    unsigned tag = rbuf_u8(&r);
    unsigned pad = rbuf_u8(&r);
    int64_t ttl = rbuf_i64(&r);
    uint64_t vlen = rbuf_u64(&r);
    const ks_type_t *t = ks_type_by_tag(tag);
    if (!t) {
        *why = "unknown type tag";
        return false;
    }
    if (pad != 0 || (ttl < 1 && ttl != KEYDUMP_NO_TTL)) {
        *why = "invalid dump header";
        return false;
    }
    if (vlen != len - KEYDUMP_HEADER_SIZE - KEYDUMP_TRAILER_SIZE) {
        *why = "value length does not match the dump's size";
        return false;
    }
    void *v = t->decode(p + KEYDUMP_HEADER_SIZE, (size_t)vlen, why);
    if (!v)
        return false;
    *type = t;
    *value = v;
    *ttl_ms = ttl;
    return true;
}

uint64_t keydump_digest(const ks_type_t *type, const void *value, int64_t expire_ms, bool *oom)
{
    wbuf_t b = WBUF_INIT;
    wbuf_put_u8(&b, type->tag);
    wbuf_put_i64(&b, expire_ms);
    type->encode(value, &b);
    *oom = b.oom;
    uint64_t d = b.oom ? 0 : XXH64(b.data, b.len, 0);
    wbuf_free(&b);
    return d;
}

bool keydump_digest_parse(const char *s, size_t len, uint64_t *out) { return codec_hex64_parse(s, len, out); }
