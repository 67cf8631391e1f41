/* persist_fmt.c - see persist_fmt.h for the layouts. */
#include "core/persist_fmt.h"

#include <string.h>

#include "core/hash.h"
#include "core/types.h"

/* ------------------------------------------------------------------------ */
/* Snapshot                                                                 */
/* ------------------------------------------------------------------------ */

void snapfmt_put_header(wbuf_t *out, const snap_header_t *h)
{
    wbuf_put_bytes(out, SNAP_MAGIC, 8);
    wbuf_put_u32(out, h->version);
    wbuf_put_u32(out, h->flags);
    wbuf_put_i64(out, h->created_ms);
    wbuf_put_u64(out, h->journal_seq);
}

bool snapfmt_parse_header(const uint8_t *p, size_t len, snap_header_t *h, const char **why)
{
    if (len < SNAP_HEADER_SIZE) {
        *why = len == 0 ? "empty file" : "file shorter than the snapshot header";
        return false;
    }
    if (memcmp(p, SNAP_MAGIC, 8) != 0) {
        *why = "not a tally snapshot (bad magic)";
        return false;
    }
    rbuf_t r = rbuf_make(p + 8, SNAP_HEADER_SIZE - 8);
    h->version = rbuf_u32(&r);
    h->flags = rbuf_u32(&r);
    h->created_ms = rbuf_i64(&r);
    h->journal_seq = rbuf_u64(&r);
    if (h->version != SNAP_VERSION) {
        *why = h->version > SNAP_VERSION ? "snapshot written by a newer tally (unknown version)"
                                         : "unknown snapshot version";
        return false;
    }
    if (h->flags != 0) {
        *why = "unknown snapshot flags";
        return false;
    }
    return true;
}

void snapfmt_put_record(wbuf_t *out, unsigned tag, const char *key, size_t klen, int64_t expire_ms,
                        void (*encode)(const void *value, wbuf_t *out), const void *value)
{
    size_t start = out->len;
    wbuf_put_u8(out, SNAP_REC_KEY);
    wbuf_put_u8(out, (uint8_t)tag);
    wbuf_put_u16(out, 0);
    wbuf_put_blob(out, key, klen);
    wbuf_put_i64(out, expire_ms);
    size_t vlen_at = out->len;
    wbuf_put_u64(out, 0);
    size_t vstart = out->len;
    encode(value, out);
    if (out->oom)
        return;
    wbuf_patch_u64(out, vlen_at, out->len - vstart);
    uint32_t check = (uint32_t)tally_xxh64(out->data + start, out->len - start, 0);
    wbuf_put_u32(out, check);
}

persist_parse_t snapfmt_parse_record(const uint8_t *p, size_t len, snap_record_t *rec, size_t *used,
                                     uint64_t *count, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t kind = rbuf_u8(&r);
    if (r.err)
        return PARSE_TRUNCATED;
    if (kind == SNAP_REC_EOF) {
        uint64_t n = rbuf_u64(&r);
        rbuf_u64(&r);   /* the checksum, verified by the caller */
        if (r.err)
            return PARSE_TRUNCATED;
        *count = n;
        *used = r.off;
        return PARSE_END;
    }
    if (kind != SNAP_REC_KEY) {
        *why = "unknown record kind";
        return PARSE_CORRUPT;
    }
    rec->tag = rbuf_u8(&r);
    uint16_t reserved = rbuf_u16(&r);
    size_t klen;
    const uint8_t *key = rbuf_blob(&r, &klen);
    rec->expire_ms = rbuf_i64(&r);
    uint64_t vlen = rbuf_u64(&r);
    if (r.err)
        return PARSE_TRUNCATED;
    if (reserved != 0) {
        *why = "reserved field is not zero";
        return PARSE_CORRUPT;
    }
    if (vlen > rbuf_left(&r))
        return PARSE_TRUNCATED;
    const uint8_t *val = rbuf_bytes(&r, (size_t)vlen);
    size_t body = r.off;
    uint32_t check = rbuf_u32(&r);
    if (r.err)
        return PARSE_TRUNCATED;
    if ((uint32_t)tally_xxh64(p, body, 0) != check) {
        *why = "record checksum mismatch";
        return PARSE_CORRUPT;
    }
    if (klen == 0 || klen > 1024) {
        *why = "key length out of range";
        return PARSE_CORRUPT;
    }
    if (rec->expire_ms < 0) {
        *why = "negative expiry";
        return PARSE_CORRUPT;
    }
    rec->key = (const char *)key;
    rec->klen = klen;
    rec->value = val;
    rec->vlen = (size_t)vlen;
    *used = r.off;
    return PARSE_OK;
}

/* ------------------------------------------------------------------------ */
/* Journal                                                                  */
/* ------------------------------------------------------------------------ */

void journalfmt_put_header(wbuf_t *out, const journal_header_t *h)
{
    wbuf_put_bytes(out, JOURNAL_MAGIC, 8);
    wbuf_put_u32(out, h->version);
    wbuf_put_u32(out, h->flags);
    wbuf_put_u64(out, h->seq);
}

bool journalfmt_parse_header(const uint8_t *p, size_t len, journal_header_t *h, const char **why)
{
    if (len < JOURNAL_HEADER_SIZE) {
        *why = len == 0 ? "empty file" : "file shorter than the journal header";
        return false;
    }
    if (memcmp(p, JOURNAL_MAGIC, 8) != 0) {
        *why = "not a tally journal (bad magic)";
        return false;
    }
    rbuf_t r = rbuf_make(p + 8, JOURNAL_HEADER_SIZE - 8);
    h->version = rbuf_u32(&r);
    h->flags = rbuf_u32(&r);
    h->seq = rbuf_u64(&r);
    if (h->version < JOURNAL_VERSION_MIN || h->version > JOURNAL_VERSION) {
        *why = h->version > JOURNAL_VERSION ? "journal written by a newer tally (unknown version)"
                                            : "unknown journal version";
        return false;
    }
    if (h->flags != 0) {
        *why = "unknown journal flags";
        return false;
    }
    return true;
}

unsigned journalfmt_generation(const journal_header_t *h)
{
    return h->version == 1 ? TALLY_GEN_1 : TALLY_GEN_2;
}

void journalfmt_put_request(wbuf_t *out, const journal_req_t *q)
{
    size_t start = out->len;
    wbuf_put_u32(out, 0);
    wbuf_put_u32(out, 0);
    size_t pstart = out->len;
    wbuf_put_u8(out, JOURNAL_REC_REQUEST);
    wbuf_put_i64(out, q->now_ns);
    wbuf_put_u8(out, q->method);
    wbuf_put_u16(out, (uint16_t)q->path_len);
    wbuf_put_bytes(out, q->path, q->path_len);
    wbuf_put_u32(out, (uint32_t)q->query_len);
    wbuf_put_bytes(out, q->query, q->query_len);
    wbuf_put_u16(out, (uint16_t)q->ctype_len);
    wbuf_put_bytes(out, q->ctype, q->ctype_len);
    wbuf_put_u32(out, (uint32_t)q->body_len);
    wbuf_put_bytes(out, q->body, q->body_len);
    if (out->oom)
        return;
    uint32_t len = (uint32_t)(out->len - pstart);
    wbuf_patch_u32(out, start, len);
    wbuf_patch_u32(out, start + 4, (uint32_t)tally_xxh64(out->data + pstart, len, len));
}

persist_parse_t journalfmt_parse_record(const uint8_t *p, size_t len, journal_req_t *q, size_t *used,
                                        const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint32_t plen = rbuf_u32(&r);
    uint32_t check = rbuf_u32(&r);
    if (r.err)
        return PARSE_TRUNCATED;
    if (plen == 0 || plen > JOURNAL_MAX_RECORD) {
        *why = plen == 0 ? "zero-length record" : "record length out of range";
        return PARSE_CORRUPT;
    }
    const uint8_t *payload = rbuf_bytes(&r, plen);
    if (!payload)
        return PARSE_TRUNCATED;
    if ((uint32_t)tally_xxh64(payload, plen, plen) != check) {
        *why = "record checksum mismatch";
        return PARSE_CORRUPT;
    }
    rbuf_t b = rbuf_make(payload, plen);
    uint8_t kind = rbuf_u8(&b);
    q->now_ns = rbuf_i64(&b);
    q->method = rbuf_u8(&b);
    q->path_len = rbuf_u16(&b);
    q->path = (const char *)rbuf_bytes(&b, q->path_len);
    q->query_len = rbuf_u32(&b);
    q->query = (const char *)rbuf_bytes(&b, q->query_len);
    q->ctype_len = rbuf_u16(&b);
    q->ctype = (const char *)rbuf_bytes(&b, q->ctype_len);
    q->body_len = rbuf_u32(&b);
    q->body = rbuf_bytes(&b, q->body_len);
    if (kind != JOURNAL_REC_REQUEST) {
        *why = "unknown journal record kind";
        return PARSE_CORRUPT;
    }
    if (!rbuf_done(&b) || q->path_len == 0) {
        *why = "malformed journal record";
        return PARSE_CORRUPT;
    }
    if (q->path == NULL)
        q->path = "";
    if (q->query == NULL)
        q->query = "";
    if (q->ctype == NULL)
        q->ctype = "";
    *used = r.off;
    return PARSE_OK;
}
