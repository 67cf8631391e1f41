/*
 * persist_fmt.h - byte layout of snapshot and journal files (no file I/O).
 *
 * Snapshot file (all integers little-endian):
 *
 *   +----------+---------+-------+------------+-------------+
 *   | TALLYSNP | version | flags | created_ms | journal_seq |   header, 32 bytes
 *   |  8 bytes |   u32   |  u32  |    i64     |     u64     |
 *   +----------+---------+-------+------------+-------------+
 *   | 0x01 | tag | 0 | klen | key | expire_ms | vlen | value | check |  record,
 *   |  u8  | u8  |u16| u32  |     |   i64     | u64  |       |  u32  |  repeated
 *   +------+-----+---+------+-----+-----------+------+-------+-------+
 *   | 0xFF | records | xxh64 |                                         end marker
 *   |  u8  |   u64   |  u64  |                                         + trailer
 *   +------+---------+-------+
 *
 *   `check` is the low 32 bits of XXH64 over the record's bytes before it,
 *   so damage is located to a record; the trailer's XXH64 covers every byte
 *   of the file before it.  `journal_seq` names the first journal file whose
 *   records come after this snapshot's instant.  expire_ms 0 = no expiry.
 *
 * Journal file:
 *
 *   +----------+---------+-------+-----+
 *   | TALLYJNL | version | flags | seq |                           header, 24 bytes
 *   +----------+---------+-------+-----+
 *   | len | check | payload (len bytes) |                          record, repeated
 *   | u32 |  u32  |                     |
 *   +-----+-------+---------------------+
 *   payload: u8 kind=1 | i64 now_ns | u8 method | u16 plen | path | u32 qlen | query
 *            | u16 ctlen | content type | u32 blen | body
 *
 *   A journal record is a request as the API layer re-executes it (the
 *   "canonical request": parameters resolved, server time recorded), so
 *   replay runs exactly the code that served it.  `check` is the low 32 bits
 *   of XXH64(payload, seed = len).  The header's version names the algorithm
 *   generation that served the records (core/types.h): version 1 files are
 *   replayed with generation 1's rules, version 2 with generation 2's.
 */
#ifndef TALLY_PERSIST_FMT_H
#define TALLY_PERSIST_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"

#define SNAP_MAGIC "TALLYSNP"
#define SNAP_VERSION 1           /* bump when the outer layout changes */
#define SNAP_HEADER_SIZE 32
#define SNAP_REC_KEY 0x01
#define SNAP_REC_EOF 0xFF
#define SNAP_TRAILER_SIZE 17     /* EOF byte + record count + checksum */

#define JOURNAL_MAGIC "TALLYJNL"
#define JOURNAL_VERSION 2        /* version 2: records served by generation-2 algorithms */
#define JOURNAL_VERSION_MIN 1    /* version 1 (generation 1) is still replayed */
#define JOURNAL_HEADER_SIZE 24
#define JOURNAL_REC_REQUEST 1
#define JOURNAL_MAX_RECORD (64u << 20)  /* no request is larger than the body cap; 64 MiB is a sanity bound */

typedef struct snap_header {
    uint32_t version;
    uint32_t flags;
    int64_t created_ms;
    uint64_t journal_seq;
} snap_header_t;

typedef struct snap_record {
    uint8_t tag;
    const char *key;
    size_t klen;
    int64_t expire_ms;
    const uint8_t *value;
    size_t vlen;
} snap_record_t;

typedef enum persist_parse {
    PARSE_OK = 0,        /* a record was parsed */
    PARSE_END,           /* snapshot: the end marker was parsed */
    PARSE_TRUNCATED,     /* the bytes stop inside a record */
    PARSE_CORRUPT        /* the bytes are not a valid record */
} persist_parse_t;

void snapfmt_put_header(wbuf_t *out, const snap_header_t *h);
/* Checks magic and version; *why explains a failure. */
bool snapfmt_parse_header(const uint8_t *p, size_t len, snap_header_t *h, const char **why);
/* Appends one record: the value is encoded by `encode(value, out)`. */
void snapfmt_put_record(wbuf_t *out, unsigned tag, const char *key, size_t klen, int64_t expire_ms,
                        void (*encode)(const void *value, wbuf_t *out), const void *value);
/* Parses the record or end marker at p.  On PARSE_OK/PARSE_END *used is the
 * number of bytes consumed; for PARSE_END, *count receives the record count
 * and the trailer checksum is *not* verified here (the caller hashes the
 * file). */
persist_parse_t snapfmt_parse_record(const uint8_t *p, size_t len, snap_record_t *rec, size_t *used,
                                     uint64_t *count, const char **why);

typedef struct journal_header {
    uint32_t version;
    uint32_t flags;
    uint64_t seq;
} journal_header_t;

typedef struct journal_req {
    int64_t now_ns;
    uint8_t method;
    const char *path;
    size_t path_len;
    const char *query;
    size_t query_len;
    const char *ctype;
    size_t ctype_len;
    const uint8_t *body;
    size_t body_len;
} journal_req_t;

void journalfmt_put_header(wbuf_t *out, const journal_header_t *h);
bool journalfmt_parse_header(const uint8_t *p, size_t len, journal_header_t *h, const char **why);
/* The algorithm generation (TALLY_GEN_*) whose rules replay the records of a
 * journal with this (valid) header. */
unsigned journalfmt_generation(const journal_header_t *h);
/* Appends a framed record holding `req`. */
void journalfmt_put_request(wbuf_t *out, const journal_req_t *req);
/* Parses the framed record at p. PARSE_TRUNCATED means the record runs past
 * `len` (a torn tail when it is the last thing in the file). */
persist_parse_t journalfmt_parse_record(const uint8_t *p, size_t len, journal_req_t *req, size_t *used,
                                        const char **why);

#endif
