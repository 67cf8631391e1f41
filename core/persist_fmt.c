/* persist_fmt.c - see persist_fmt.h for the layouts. */
#include "core/persist_fmt.h"

#include <inttypes.h>
#include <stdio.h>
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

/* The versioning scheme of core/persist_fmt.h, indexed by version; a
 * version without a layout is refused. */
static const struct {
    uint8_t layout, generation;
} journal_versions[JOURNAL_VERSION + 1] = {
    [1] = { JOURNAL_LAYOUT_1, TALLY_GEN_1 },
    [3] = { JOURNAL_LAYOUT_2, TALLY_GEN_2 },
    [4] = { JOURNAL_LAYOUT_2, TALLY_GEN_2 },
};

/* Layout 2's header check over the 24 header bytes at p: XXH64 of them
 * without the check itself, never 0 (where layout 1 holds its flags, 0). */
static uint32_t header_check(const uint8_t *p)
{
    uint8_t b[JOURNAL_HEADER_SIZE - 4];
    memcpy(b, p, 12);
    memcpy(b + 12, p + 16, 8);
    uint32_t c = (uint32_t)tally_xxh64(b, sizeof(b), 0);
    return c ? c : 1;
}

void journalfmt_put_header(wbuf_t *out, const journal_header_t *h)
{
    size_t start = out->len;
    wbuf_put_bytes(out, JOURNAL_MAGIC, 8);
    wbuf_put_u32(out, h->version);
    wbuf_put_u32(out, 0);
    wbuf_put_u64(out, h->seq);
    if (!out->oom && journalfmt_layout(h) == JOURNAL_LAYOUT_2)
        wbuf_patch_u32(out, start + 12, header_check(out->data + start));
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
    uint32_t word = rbuf_u32(&r);
    h->flags = 0;
    h->seq = rbuf_u64(&r);
    if (h->version == 0 || h->version > JOURNAL_VERSION || !journal_versions[h->version].layout) {
        *why = h->version > JOURNAL_VERSION ? "journal written by a newer tally (unknown version)"
               : h->version == 2 ? "journal version 2 was written only by unreleased development builds, with two "
                                   "meanings: this tally cannot tell which rules served its records"
                                 : "unknown journal version";
        return false;
    }
    if (journalfmt_layout(h) == JOURNAL_LAYOUT_2 && word != header_check(p)) {
        *why = "journal header check mismatch (damaged header)";
        return false;
    }
    if (journalfmt_layout(h) == JOURNAL_LAYOUT_1 && word != 0) {
        /* also a later journal whose version field was damaged into 1 */
        *why = "unknown journal flags (or a damaged header)";
        return false;
    }
    return true;
}

unsigned journalfmt_layout(const journal_header_t *h)
{
    return h->version <= JOURNAL_VERSION ? journal_versions[h->version].layout : 0;
}

unsigned journalfmt_generation(const journal_header_t *h)
{
    return h->version <= JOURNAL_VERSION ? journal_versions[h->version].generation : 0;
}

/* A string of a request record: its length as a little-endian field of
 * len_bytes (2 or 4; the field holds `n` cut to its width, as the reader
 * expects), then its n bytes. */
static uint8_t *put_field(uint8_t *p, const void *s, size_t n, int len_bytes)
{
    for (int i = 0; i < len_bytes; i++)
        *p++ = (uint8_t)(n >> (8 * i));
    if (n)
        memcpy(p, s, n);
    return p + n;
}

/* Every change writes one of these, so the record is laid out in place after
 * a single reservation rather than field by field (issue 20). */
void journalfmt_put_request(wbuf_t *out, const journal_req_t *q)
{
    size_t size = journalfmt_request_size(q);
    if (!wbuf_reserve(out, size))
        return;
    uint8_t *frame = out->data + out->len, *payload = frame + JOURNAL_FRAME_SIZE, *p = payload;
    if (q->kind == JOURNAL_REC_COMMAND) {
        *p++ = JOURNAL_REC_COMMAND;
        le64_store(p, (uint64_t)q->now_ns);
        p += 8;
        *p++ = (uint8_t)q->op;
        *p++ = (uint8_t)(q->op >> 8);
        le32_store(p, (uint32_t)(q->body_len + q->tail_len));
        p += 4;
        if (q->body_len)
            memcpy(p, q->body, q->body_len);
        p += q->body_len;
        if (q->tail_len)
            memcpy(p, q->tail, q->tail_len);
        p += q->tail_len;
    } else {
        *p++ = JOURNAL_REC_REQUEST;
        le64_store(p, (uint64_t)q->now_ns);
        p += 8;
        *p++ = (uint8_t)q->method;
        p = put_field(p, q->path, q->path_len, 2);
        p = put_field(p, q->query, q->query_len, 4);
        p = put_field(p, q->ctype, q->ctype_len, 2);
        p = put_field(p, q->body, q->body_len, 4);
    }
    uint32_t len = (uint32_t)(p - payload);
    le32_store(frame, len);
    le32_store(frame + 4, (uint32_t)tally_xxh64(payload, len, len));
    out->len += (size_t)(p - frame);
}

void journalfmt_epoch_request(uint64_t epoch, int64_t now_ns, uint8_t method, char *buf, journal_req_t *out)
{
    int n = snprintf(buf, JOURNAL_EPOCH_BUF, "%" PRIu64, epoch);
    *out = (journal_req_t){ .now_ns = now_ns, .method = method, .path = JOURNAL_EPOCH_PATH,
                            .path_len = sizeof(JOURNAL_EPOCH_PATH) - 1, .query = "", .ctype = "",
                            .body = (const uint8_t *)buf, .body_len = (size_t)n };
}

bool journalfmt_is_epoch(const journal_req_t *q)
{
    return q->path_len == sizeof(JOURNAL_EPOCH_PATH) - 1 && !memcmp(q->path, JOURNAL_EPOCH_PATH, q->path_len);
}

bool journalfmt_epoch_parse(const journal_req_t *q, uint64_t *epoch)
{
    if (!journalfmt_is_epoch(q) || q->body_len == 0 || q->body_len >= JOURNAL_EPOCH_BUF)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < q->body_len; i++) {
        uint8_t c = q->body[i];
        if (c < '0' || c > '9' || v > (TALLY_EPOCH_MAX - (c - '0')) / 10)
            return false;
        v = v * 10 + (c - '0');
    }
    *epoch = v;
    return true;
}

size_t journalfmt_request_size(const journal_req_t *q)
{
    if (q->kind == JOURNAL_REC_COMMAND)
        return JOURNAL_COMMAND_FIXED + q->body_len + q->tail_len;
    return JOURNAL_REQUEST_FIXED + q->path_len + q->query_len + q->ctype_len + q->body_len;
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
    if (kind == JOURNAL_REC_COMMAND) {
        *q = (journal_req_t){ .kind = JOURNAL_REC_COMMAND, .path = "", .query = "", .ctype = "" };
        q->now_ns = rbuf_i64(&b);
        q->op = rbuf_u16(&b);
        q->body_len = rbuf_u32(&b);
        q->body = rbuf_bytes(&b, q->body_len);
        if (!rbuf_done(&b) || q->op == 0) {
            *why = "malformed command record";
            return PARSE_CORRUPT;
        }
        *used = r.off;
        return PARSE_OK;
    }
    q->kind = JOURNAL_REC_REQUEST;
    q->op = 0;
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

void journalfmt_put_seal(wbuf_t *out, uint64_t records, uint64_t offset, uint64_t next_seq)
{
    size_t start = out->len;
    wbuf_put_u32(out, 0);
    wbuf_put_u32(out, 0);
    size_t pstart = out->len;
    wbuf_put_u8(out, JOURNAL_REC_SEAL);
    wbuf_put_u64(out, records);
    wbuf_put_u64(out, offset);
    wbuf_put_u64(out, next_seq);
    if (out->oom)
        return;
    uint32_t len = (uint32_t)(out->len - pstart);
    wbuf_patch_u32(out, start, len);
    wbuf_patch_u32(out, start + 4, (uint32_t)tally_xxh64(out->data + pstart, len, len));
}

/* ------------------------------------------------------------------------ */
/* The readers                                                              */
/* ------------------------------------------------------------------------ */

static bool scan_fail(size_t *bad_off, const char **why_out, size_t off, const char *why)
{
    *bad_off = off;
    *why_out = why;
    return false;
}

bool snapfmt_scan(const uint8_t *p, size_t len, snapfmt_record_fn fn, void *ud, snap_scan_t *s)
{
    memset(s, 0, sizeof(*s));
    const char *why = NULL;
    if (!snapfmt_parse_header(p, len, &s->h, &why))
        return scan_fail(&s->bad_off, &s->why, 0, why);
    size_t off = SNAP_HEADER_SIZE;
    for (;;) {
        snap_record_t r;
        size_t used = 0;
        uint64_t count = 0;
        persist_parse_t pr = snapfmt_parse_record(p + off, len - off, &r, &used, &count, &why);
        if (pr == PARSE_TRUNCATED)
            return scan_fail(&s->bad_off, &s->why, off, "file ends inside a record (truncated)");
        if (pr == PARSE_CORRUPT)
            return scan_fail(&s->bad_off, &s->why, off, why);
        if (pr == PARSE_END) {
            if (count != s->records)
                return scan_fail(&s->bad_off, &s->why, off, "record count in the trailer does not match");
            if (off + used != len)
                return scan_fail(&s->bad_off, &s->why, off + used, "unexpected bytes after the trailer");
            if (tally_xxh64(p, len - 8, 0) != le64_load(p + len - 8))
                return scan_fail(&s->bad_off, &s->why, len - 8, "file checksum mismatch");
            break;
        }
        if (fn && (why = fn(ud, off, &r)) != NULL)
            return scan_fail(&s->bad_off, &s->why, off, why);
        s->records++;
        off += used;
    }
    s->ok = true;
    return true;
}

/* Index just past the last non-zero byte of [p, p+n), 0 when all zero. */
static size_t nonzero_end(const uint8_t *p, size_t n)
{
    while (n > 0 && p[n - 1] == 0)
        n--;
    return n;
}

/* Does a whole, valid record (any kind) start anywhere in [from, to)? */
static bool record_starts_in(const uint8_t *p, size_t len, size_t from, size_t to)
{
    for (size_t q = from; q < to && q + JOURNAL_FRAME_SIZE <= len; q++) {
        uint32_t l = le32_load(p + q);
        if (l == 0 || l > JOURNAL_MAX_RECORD || l > len - q - JOURNAL_FRAME_SIZE)
            continue;
        if ((uint32_t)tally_xxh64(p + q + JOURNAL_FRAME_SIZE, l, l) == le32_load(p + q + 4))
            return true;
    }
    return false;
}

/* The bad thing at `off` is the end of the data if it is reserved space
 * (zeros), or a torn last record: a frame never stored (zeros), part of a
 * payload, then zeros - and no whole record hides in that stretch. */
static bool scan_tail(const uint8_t *p, size_t len, size_t off, journal_scan_t *s)
{
    size_t z = off + nonzero_end(p + off, len - off);
    if (z == off) {
        s->end = JEND_RESERVE;
        s->tail_bytes = len - off;
        return true;
    }
    if (journalfmt_layout(&s->h) == JOURNAL_LAYOUT_1 || len - off < JOURNAL_FRAME_SIZE || le64_load(p + off) != 0)
        return false;
    if (z - off - JOURNAL_FRAME_SIZE > JOURNAL_MAX_RECORD || record_starts_in(p, len, off + 1, z))
        return false;
    s->end = JEND_TORN;
    s->tail_bytes = len - off;
    return true;
}

/* Layout 1 wrote the frame before the payload: a record cut by a crash has a
 * whole frame and a payload ending in zeros, then zeros. */
static bool scan_tail_layout1(const uint8_t *p, size_t len, size_t off, journal_scan_t *s)
{
    uint64_t claimed = JOURNAL_FRAME_SIZE + (uint64_t)le32_load(p + off);
    if (claimed > len - off)
        return false;
    if (nonzero_end(p + off + claimed, len - off - (size_t)claimed) != 0 || p[off + claimed - 1] != 0)
        return false;
    s->end = JEND_TORN;
    s->tail_bytes = len - off;
    return true;
}

bool journalfmt_scan(const uint8_t *p, size_t len, journalfmt_record_fn fn, void *ud, journal_scan_t *s)
{
    memset(s, 0, sizeof(*s));
    const char *why = NULL;
    if (!journalfmt_parse_header(p, len, &s->h, &why))
        return scan_fail(&s->bad_off, &s->why, 0, why);
    size_t off = JOURNAL_HEADER_SIZE;
    s->data_end = off;
    while (off < len) {
        if (len - off < JOURNAL_FRAME_SIZE || le64_load(p + off) == 0) {
            if (scan_tail(p, len, off, s))
                break;
            return scan_fail(&s->bad_off, &s->why, off,
                             len - off < JOURNAL_FRAME_SIZE
                                 ? "file ends inside a record frame (truncated)"
                                 : "a record frame is zero but records or data follow it");
        }
        uint32_t plen = le32_load(p + off);
        if (plen == 0 || plen > JOURNAL_MAX_RECORD)
            return scan_fail(&s->bad_off, &s->why, off, "record length out of range");
        if (plen > len - off - JOURNAL_FRAME_SIZE)
            return scan_fail(&s->bad_off, &s->why, off,
                             "file ends inside a record (truncated: a crash leaves whole records and "
                             "reserved space, never a record cut short)");
        const uint8_t *payload = p + off + JOURNAL_FRAME_SIZE;
        if ((uint32_t)tally_xxh64(payload, plen, plen) != le32_load(p + off + 4)) {
            if (journalfmt_layout(&s->h) == JOURNAL_LAYOUT_1 && scan_tail_layout1(p, len, off, s))
                break;
            return scan_fail(&s->bad_off, &s->why, off, "record checksum mismatch");
        }
        if (payload[0] == JOURNAL_REC_SEAL && journalfmt_layout(&s->h) == JOURNAL_LAYOUT_2) {
            rbuf_t r = rbuf_make(payload + 1, plen - 1);
            uint64_t records = rbuf_u64(&r), at = rbuf_u64(&r), next = rbuf_u64(&r);
            if (!rbuf_done(&r))
                return scan_fail(&s->bad_off, &s->why, off, "malformed seal record");
            if (records != s->records || at != off)
                return scan_fail(&s->bad_off, &s->why, off,
                                 "the seal record does not match the records before it (some are missing)");
            if (next != s->h.seq + 1)
                return scan_fail(&s->bad_off, &s->why, off, "the seal record names the wrong next journal");
            if (off + JOURNAL_FRAME_SIZE + plen != len)
                return scan_fail(&s->bad_off, &s->why, off + JOURNAL_FRAME_SIZE + plen,
                                 "unexpected bytes after the seal record");
            s->end = JEND_SEALED;
            s->next_seq = next;
            break;
        }
        journal_req_t q;
        size_t used = 0;
        if (journalfmt_parse_record(p + off, len - off, &q, &used, &why) != PARSE_OK)
            return scan_fail(&s->bad_off, &s->why, off, why);
        if (q.kind == JOURNAL_REC_COMMAND && s->h.version < JOURNAL_VERSION_COMMANDS)
            return scan_fail(&s->bad_off, &s->why, off, "a command record in a journal of a version without them");
        uint64_t epoch;
        if (journalfmt_is_epoch(&q) && !journalfmt_epoch_parse(&q, &epoch)) {
            int n = q.body_len > 24 ? 24 : (int)q.body_len;
            snprintf(s->why_buf, sizeof(s->why_buf), "epoch record \"%.*s%s\" is not an epoch (0 to %" PRIu64 ")", n,
                     (const char *)q.body, q.body_len > 24 ? "..." : "", TALLY_EPOCH_MAX);
            return scan_fail(&s->bad_off, &s->why, off, s->why_buf);
        }
        if (fn && (why = fn(ud, off, &q)) != NULL)
            return scan_fail(&s->bad_off, &s->why, off, why);
        if (!s->records)
            s->first_ns = q.now_ns;
        s->last_ns = q.now_ns;
        s->records++;
        off += used;
        s->data_end = off;
    }
    s->ok = true;
    return true;
}

bool journalfmt_check_place(journal_scan_t *s, size_t len, bool newest)
{
    if (!s->ok)
        return false;
    if (journalfmt_layout(&s->h) == JOURNAL_LAYOUT_1) {
        if (!newest && s->end == JEND_TORN)
            return scan_fail(&s->bad_off, &s->why, s->data_end,
                             "record cut short, and later journals hold records");
        return true;
    }
    if (!newest && s->end != JEND_SEALED)
        return scan_fail(&s->bad_off, &s->why, s->data_end,
                         "the journal has no seal record although later journals hold records: its end is "
                         "missing (the file was cut)");
    /* the newest, unsealed, without reserved space: a journal is created
     * with a page reserved and grows by whole pages, so a crash leaves it
     * at a whole number of pages (a header alone, or records ending where
     * the file ends elsewhere, means it was cut) */
    if (s->end == JEND_EOF && len % JOURNAL_PAGE != 0)
        return scan_fail(&s->bad_off, &s->why, s->data_end,
                         "the journal ends without a seal record or reserved space: the file was cut "
                         "(truncated)");
    return true;
}
