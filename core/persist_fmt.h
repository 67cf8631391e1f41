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
 *   +----------+---------+--------+-----+
 *   | TALLYJNL | version | hcheck | seq |                          header, 24 bytes
 *   |  8 bytes |   u32   |  u32   | u64 |
 *   +----------+---------+--------+-----+
 *   | len | check | payload (len bytes) |                          record, repeated
 *   | u32 |  u32  |                     |
 *   +-----+-------+---------------------+
 *   request payload: u8 kind=1 | i64 now_ns | u8 method | u16 plen | path
 *            | u32 qlen | query | u16 ctlen | content type | u32 blen | body
 *   seal payload:    u8 kind=2 | u64 records | u64 offset | u64 next_seq
 *   command payload: u8 kind=3 | i64 now_ns | u16 op | u32 alen | arguments
 *                    (version 4 on: an operation of the command table,
 *                    cmd/def.h, named by its id, its arguments encoded by it)
 *
 *   A journal record is what the command layer re-executes: an operation
 *   with its typed arguments (a command record), or, in journals written
 *   before the command layer and for the families it does not type yet, a
 *   request as the HTTP adapter re-executes it (the "canonical request":
 *   parameters resolved, server time recorded).  Either way replay runs
 *   exactly the code that served it.  `check` is the low 32 bits
 *   of XXH64(payload, seed = len).  `hcheck` is 0 in layout 1 (it was a
 *   flags word there, always 0); in layout 2 it is the low 32 bits of XXH64
 *   of the other 20 header bytes (1 if that is 0), so a damaged header - a
 *   version flipped from 3 to 1 included - is refused, never replayed by the
 *   wrong rules.
 *
 * The header's version says two things: how the file is laid out, and which
 * algorithm generation (core/types.h) served its records - replay must run
 * a request by the rules that answered it, or a rebuilt value would differ
 * from the one acknowledged.  journalfmt_layout() and
 * journalfmt_generation() read them; this table is the whole scheme:
 *
 *   version  layout  generation  written by
 *   1        1       1           tally before issues 12 and 18 (releases)
 *   2        -       -           refused: only unreleased development builds
 *                                wrote it, with two meanings (layout 2 +
 *                                generation 1, layout 1 + generation 2), so
 *                                no reader can tell which rules served it
 *   3        2       2           tally before the command layer (issue 38)
 *   4        2       2           tally now: the same, and command records
 *
 * Layout 2 adds three rules that let a reader tell a crash from damage:
 *
 *   - A record's payload is stored first and its 8-byte frame (len, check)
 *     last, in one store, into space reserved in advance (zeros).  So after
 *     a crash every record with a non-zero frame is whole, and the only torn
 *     thing possible is a last record whose frame is still zero, followed by
 *     part of its payload and zeros.
 *   - A journal file is created with its first page reserved and grows by
 *     whole pages, so an unsealed journal whose size is not a multiple of
 *     4096 bytes and whose data runs to its end was cut.
 *   - A journal that is closed (rotation at a snapshot, shutdown, or
 *     start-up after a crash) ends with a seal record: how many records the
 *     file holds, the seal's own offset, and the next journal's seq.  A
 *     journal followed by a journal holding records must be sealed, so a
 *     missing tail of an older journal is detected.
 *
 * Layout 1 (no seal, frame written before the payload, the file cut to its
 * data on close) still loads; its torn tail is a whole frame, a payload
 * ending in zeros, then zeros; a missing tail of a layout-1 journal cut at a
 * record boundary cannot be detected.  A layout-1 journal is never appended
 * to: after it, tally starts a new journal of the current version.
 *
 * journalfmt_scan() and snapfmt_scan() are the only readers of these files:
 * start-up, `tallyd --check` and the fuzzers all call them, so they cannot
 * disagree about what is damaged.  They report damage as (offset, what).
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
#define JOURNAL_VERSION 4          /* what is written now: layout 2, generation 2, command records (table above) */
#define JOURNAL_VERSION_COMMANDS 4 /* the first version that may hold command records */
#define JOURNAL_LAYOUT_1 1         /* frame first, no seal */
#define JOURNAL_LAYOUT_2 2         /* payload first, seal records, whole pages */
#define JOURNAL_HEADER_SIZE 24
#define JOURNAL_REC_REQUEST 1
#define JOURNAL_REC_SEAL 2
#define JOURNAL_REC_COMMAND 3
#define JOURNAL_SEAL_SIZE 33       /* frame + kind + 3 x u64 */
#define JOURNAL_FRAME_SIZE 8
#define JOURNAL_PAGE 4096          /* journal space is reserved in whole pages */
/* The largest record's payload: above any record tally writes (a request
 * of at most --max-body, itself at most TALLY_MAX_BODY_MAX; a key's state of
 * at most this, which a change's pre-image is refused beyond), and within
 * the u32 length field.  A length beyond it is damage. */
#define JOURNAL_MAX_RECORD (2u << 30)

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
    uint32_t flags;      /* none are defined: 0 (layout 2 stores hcheck in its place) */
    uint64_t seq;
} journal_header_t;

/* A record of a change: a request (kind JOURNAL_REC_REQUEST: method, path,
 * query, content type, body) or a command (JOURNAL_REC_COMMAND: op and its
 * encoded arguments in body; method 0, the strings empty). */
typedef struct journal_req {
    uint8_t kind;                /* 0 is read as JOURNAL_REC_REQUEST */
    uint16_t op;                 /* a command's operation id (cmd/def.h) */
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
    /* A command record's arguments may continue with these bytes (a large
     * value written without copying it next to its header): the record
     * holds body then tail as one field.  Writers only; a parsed record has
     * its whole arguments in body. */
    const uint8_t *tail;
    size_t tail_len;
} journal_req_t;

void journalfmt_put_header(wbuf_t *out, const journal_header_t *h);
bool journalfmt_parse_header(const uint8_t *p, size_t len, journal_header_t *h, const char **why);
/* The layout (JOURNAL_LAYOUT_*) of a journal with this (valid) header. */
unsigned journalfmt_layout(const journal_header_t *h);
/* The algorithm generation (TALLY_GEN_*) whose rules replay the records of a
 * journal with this (valid) header. */
unsigned journalfmt_generation(const journal_header_t *h);
/* Appends a framed record holding `req`. */
void journalfmt_put_request(wbuf_t *out, const journal_req_t *req);
/* The epoch record: a request record whose path is JOURNAL_EPOCH_PATH (no
 * route starts without '/', so it can never be a client's request) and whose
 * body is the epoch in decimal.  A promotion writes it into the journal and
 * the replication stream: replay restores the epoch with the data, replicas
 * learn it from the stream.  Journals written before it hold none and replay
 * as before.  `buf` (JOURNAL_EPOCH_BUF bytes) holds the body. */
#define JOURNAL_EPOCH_PATH "tally:epoch"
#define JOURNAL_EPOCH_BUF 24
/* The largest epoch anywhere - the EPOCH file, this record, the replication
 * routes' `epoch=`, a peer's answer, a primary's headers: 2^53 - 1, so that
 * every epoch is an exact JSON number for any client, and a promotion can
 * never wrap.  A larger value is refused wherever it is read. */
#define TALLY_EPOCH_MAX UINT64_C(9007199254740991)
/* `method` is the API's POST (core does not know the API's numbers). */
void journalfmt_epoch_request(uint64_t epoch, int64_t now_ns, uint8_t method, char *buf, journal_req_t *out);
/* True when `q` is an epoch record; *epoch its value (false for a damaged
 * one - not a decimal number, or above TALLY_EPOCH_MAX - and for any other
 * request).  journalfmt_scan refuses a file holding a damaged one. */
bool journalfmt_epoch_parse(const journal_req_t *q, uint64_t *epoch);
/* True when `q` is an epoch record, well-formed or not: never dispatched. */
bool journalfmt_is_epoch(const journal_req_t *q);
/* The bytes journalfmt_put_request appends for `req`: the frame, the fixed
 * fields (JOURNAL_REQUEST_FIXED with the frame) and the four strings. */
#define JOURNAL_REQUEST_FIXED (JOURNAL_FRAME_SIZE + 22)
/* A command record's: the frame, kind, time, op and the arguments' length. */
#define JOURNAL_COMMAND_FIXED (JOURNAL_FRAME_SIZE + 15)
size_t journalfmt_request_size(const journal_req_t *req);
/* Parses the framed record at p. PARSE_TRUNCATED means the record runs past
 * `len` (a torn tail when it is the last thing in the file). */
persist_parse_t journalfmt_parse_record(const uint8_t *p, size_t len, journal_req_t *req, size_t *used,
                                        const char **why);

/* Appends a seal record (see above). */
void journalfmt_put_seal(wbuf_t *out, uint64_t records, uint64_t offset, uint64_t next_seq);

/* ------------------------------------------------------------------------ */
/* The readers                                                              */
/* ------------------------------------------------------------------------ */

/* Called for each record; returns NULL, or what is wrong with it (the scan
 * then stops and reports damage at the record's offset). */
typedef const char *(*snapfmt_record_fn)(void *ud, size_t off, const snap_record_t *rec);

typedef struct snap_scan {
    snap_header_t h;
    uint64_t records;
    bool ok;                /* false: damaged at bad_off, because of why */
    size_t bad_off;
    const char *why;
} snap_scan_t;

/* Walks a whole snapshot file: header, every record (passed to fn, which may
 * be NULL), the record count and the file checksum. */
bool snapfmt_scan(const uint8_t *p, size_t len, snapfmt_record_fn fn, void *ud, snap_scan_t *out);

/* How the data of a journal file ends. */
typedef enum journal_end {
    JEND_EOF = 0,           /* the last record ends at the end of the file */
    JEND_RESERVE,           /* followed only by zeros: reserved space never used */
    JEND_TORN,              /* a last record whose frame was never stored (a write
                             * interrupted by a crash: never acknowledged), then zeros */
    JEND_SEALED             /* a seal record ends the file */
} journal_end_t;

typedef const char *(*journalfmt_record_fn)(void *ud, size_t off, const journal_req_t *req);

typedef struct journal_scan {
    journal_header_t h;
    uint64_t records;
    size_t data_end;        /* just past the last request record (where a seal goes) */
    journal_end_t end;
    size_t tail_bytes;      /* bytes after data_end that are not records (torn or reserve) */
    uint64_t next_seq;      /* JEND_SEALED: the seq the seal names */
    int64_t first_ns, last_ns;
    bool ok;                /* false: damaged at bad_off, because of why */
    size_t bad_off;
    const char *why;        /* static text, or why_buf (a message naming a value) */
    char why_buf[120];
} journal_scan_t;

/* Walks a whole journal file, passing each request record to fn (may be
 * NULL); out->h holds the parsed header before fn is first called (replay
 * takes the generation from it).  Damage (anything but the ends above)
 * stops the walk.  The rules
 * that depend on other files - an older journal must be sealed, a torn
 * record is only allowed in the newest journal - are the caller's, with
 * journalfmt_check_place(). */
bool journalfmt_scan(const uint8_t *p, size_t len, journalfmt_record_fn fn, void *ud, journal_scan_t *out);

/* The rules for where a scanned journal sits: `newest` says no later journal
 * holds records.  Returns false with s->bad_off/why set when the file cannot
 * be accepted in that place (for example an older journal that is not
 * sealed: its tail is missing). `len` is the file's size. */
bool journalfmt_check_place(journal_scan_t *s, size_t len, bool newest);

#endif
