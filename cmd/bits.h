/*
 * bits.h - Redis string bitmaps as operations, with Redis's exact answers
 * (the bytes and the bit arithmetic are core/bits.h and core/bitfield.h).
 * Reads of a missing key answer as Redis does (GETBIT 0, BITCOUNT 0, ...).
 *
 *   SET           the key's value becomes these bytes (at most BITS_MAX_LEN;
 *                 PAYLOAD_TOO_LARGE beyond).  The Redis front-end's SET
 *                 (CMD_SET_REDIS) adds Redis's options: NX/XX (a refusal
 *                 changes nothing: `skipped`), an absolute expiry or
 *                 KEEPTTL (otherwise the key's expiry is cleared, as SET
 *                 does), GET (the value replaced handed to `old` under the
 *                 lock), replacing a counter as well as a bit string, and
 *                 with CMD_SET_COUNTER storing the value - a decimal
 *                 integer in Redis's canonical form - as a counter, so that
 *                 INCR works after SET as it does in Redis.  An expiry not
 *                 after now deletes the key (Redis sets, then expires it).
 *   GET           the bytes (NOT_FOUND for a missing key);
 *   GETRANGE      bytes start..end inclusive, negative offsets counted from
 *                 the end, clamped to the string as Redis does.  Both hand
 *                 the bytes to a callback under the key's lock, and refuse
 *                 an answer over --max-answer-size (except `length_only`:
 *                 STRLEN, handed no bytes and the length).
 *   SETRANGE      writes bytes at a byte offset, growing the string with
 *                 zeros; with `append` at its end (APPEND).  Redis's rules:
 *                 an empty value changes nothing and answers the length (0
 *                 for a missing key, which is not created); a result over
 *                 512 MiB is refused ("string exceeds maximum allowed size").
 *   SETBIT        sets one bit, growing the string with zeros to reach it,
 *                 and answers the bit it replaced.
 *   GETBIT        one bit (0 past the end).
 *   BITCOUNT      the bits set in a range of bytes or bits (Redis 7).
 *   BITPOS        the first bit of a value in a range (Redis 7's corners).
 *   BITOP         the destination becomes AND, OR, XOR of the sources, or
 *                 NOT of one; an empty result deletes it.  A source named
 *                 several times is read once (twice, as zeros, for an even
 *                 count under XOR); the sources read may total
 *                 CMD_WORK_VALUES x --max-value-size.
 *   BITFIELD      Redis's GET / SET / INCRBY of integer fields with the
 *                 OVERFLOW in force; the string grows to the highest bit a
 *                 SET or INCRBY may write, as Redis does.  A GET is a read:
 *                 the caller must be allowed to read.
 *   BITFIELD_RO   GETs only (any other operation is refused).
 *                 BITFIELD takes at most CMD_BATCH_MAX operations and BITOP
 *                 as many sources: what their records hold.
 *
 * Reads with `strings` (the Redis front-end) read a counter as Redis holds
 * it: its decimal digits (GETRANGE, STRLEN, GETBIT, BITCOUNT, BITPOS, a
 * BITFIELD of GETs).  SETRANGE and APPEND with `strings` change a
 * counter's digits: a result still an integer in Redis's form stays a
 * counter, another makes the key a bit string (its expiry kept).  The
 * other writes (SETBIT, BITFIELD's SET/INCRBY, BITOP) on a counter are
 * WRONGTYPE.
 *
 * Deviation from Redis, on purpose: Redis's SET and BITOP overwrite a key of
 * any type; here a destination holding another type is WRONGTYPE (an HLL
 * or a Bloom filter is not silently replaced by a bit string).
 *
 * Memory: a write that grows a string first checks the length it reaches
 * against --max-value-size and makes room for the growth under --maxmemory,
 * so SETBIT at offset 2^32-1 under a 100 MB limit is refused, not a 512 MiB
 * allocation.
 *
 * Records (after the version byte 1; lists as cmd/batch.h lays them out):
 *   SET        key | u32 length | bytes
 *              version 2 (written only with flags or an expiry): the same,
 *              then u8 flags (CMD_SET_*) | i64 expiry (absolute ms, 0 none)
 *   SETRANGE   key | u8 flags (1 append, 2 strings) | u64 offset | u32 length | bytes
 *   SETBIT     key | u64 offset | u8 value
 *   BITOP      key | u8 op | sources (keys)
 *   BITFIELD   key | u32 n | n x (u8 opcode | u8 overflow | u8 width | u8 signed | u64 offset | i64 arg)
 */
#ifndef TALLY_CMD_BITS_H
#define TALLY_CMD_BITS_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/batch.h"
#include "cmd/def.h"
#include "core/bitfield.h"
#include "core/bits.h"

/* The journal ids of the bit strings operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_SET = 140,
    CMD_ID_GET = 141,
    CMD_ID_GETRANGE = 142,
    CMD_ID_SETBIT = 143,
    CMD_ID_GETBIT = 144,
    CMD_ID_BITCOUNT = 145,
    CMD_ID_BITPOS = 146,
    CMD_ID_BITOP = 147,
    CMD_ID_BITFIELD = 148,
    CMD_ID_BITFIELD_RO = 149,
    CMD_ID_SETRANGE = 150,
};

/* SET's flags (journaled: never renumbered). */
enum {
    CMD_SET_REDIS = 1u << 0,     /* Redis's SET: replaces a counter too */
    CMD_SET_NX = 1u << 1,        /* only when the key is missing */
    CMD_SET_XX = 1u << 2,        /* only when it exists */
    CMD_SET_KEEPTTL = 1u << 3,   /* keep the key's expiry */
    CMD_SET_COUNTER = 1u << 4,   /* store the value (a decimal integer) as a counter */
};
#define CMD_SET_FLAGS 0x1fu

/* The longest string SETRANGE and APPEND may leave (Redis's
 * proto-max-bulk-len, 512 MiB). */
#define CMD_BITS_MAX_STRING (512ULL * 1024 * 1024)

typedef struct cmd_bits_set_args {
    const char *key;
    size_t klen;
    const uint8_t *data;
    size_t len;
    unsigned flags;              /* CMD_SET_* (0: the HTTP PUT) */
    int64_t expire_ms;           /* absolute; 0 none (needs CMD_SET_REDIS) */
    /* not journaled: SET's GET option, called under the lock with the
     * value replaced (a counter's digits; exists false when missing) */
    void (*old)(void *ud, bool exists, const uint8_t *p, size_t n);
    void *ud;
} cmd_bits_set_args_t;

/* SET, SETRANGE and BITOP: the length of the string stored. */
typedef struct cmd_bits_len_res {
    uint64_t length;
    bool skipped;                /* SET: NX or XX refused it */
} cmd_bits_len_res_t;

typedef struct cmd_bits_setrange_args {
    const char *key;
    size_t klen;
    bool append;                 /* APPEND: at the string's end (offset unused) */
    uint64_t offset;             /* SETRANGE's byte offset */
    const uint8_t *data;
    size_t len;
    bool strings;                /* a counter is changed as its digits (journaled) */
} cmd_bits_setrange_args_t;

/* GET and GETRANGE. */
typedef struct cmd_bits_get_args {
    const char *key;
    size_t klen;
    int64_t start, end;          /* GETRANGE's; GET reads 0..-1 */
    /* called once under the key's lock with the bytes answered (p may be
     * NULL when n is 0) */
    void (*bytes)(void *ud, const uint8_t *p, size_t n);
    void *ud;
    bool strings;                /* a counter reads as its digits */
    bool length_only;            /* STRLEN: bytes(ud, NULL, length) */
} cmd_bits_get_args_t;

typedef struct cmd_bits_setbit_args {
    const char *key;
    size_t klen;
    uint64_t offset;             /* <= BITS_MAX_OFFSET */
    int value;                   /* 0 or 1 */
} cmd_bits_setbit_args_t;

typedef struct cmd_bits_getbit_args {
    const char *key;
    size_t klen;
    uint64_t offset;             /* <= BITS_MAX_OFFSET */
    bool strings;                /* a counter reads as its digits */
} cmd_bits_getbit_args_t;

/* SETBIT's previous bit, GETBIT's bit. */
typedef struct cmd_bits_bit_res {
    int bit;
} cmd_bits_bit_res_t;

/* BITCOUNT and BITPOS. */
typedef struct cmd_bits_range_args {
    const char *key;
    size_t klen;
    bits_range_t range;          /* BITCOUNT: both ends or neither; BITPOS: end needs start */
    int bit;                     /* BITPOS: the bit looked for (0 or 1) */
    bool strings;                /* a counter reads as its digits */
} cmd_bits_range_args_t;

typedef struct cmd_bits_num_res {
    int64_t v;                   /* BITCOUNT's count, BITPOS's position */
} cmd_bits_num_res_t;

typedef struct cmd_bits_bitop_args {
    const char *key;             /* the destination */
    size_t klen;
    bits_op_t op;
    cmd_batch_t sources;         /* keys; NOT takes exactly one */
} cmd_bits_bitop_args_t;

/* BITFIELD and BITFIELD_RO. */
typedef struct cmd_bits_field_args {
    const char *key;
    size_t klen;
    size_t n;                    /* 0..CMD_BATCH_MAX operations */
    const bf_op_t *ops;          /* the front-end's form, or NULL */
    const uint8_t *rec;          /* the record's form, or NULL */
    bf_result_t *results;        /* out, not journaled: n results, or NULL */
    bool strings;                /* not journaled: GETs alone read a counter as its digits */
} cmd_bits_field_args_t;

extern const cmd_def_t CMD_SET, CMD_GET, CMD_GETRANGE, CMD_SETBIT, CMD_GETBIT, CMD_BITCOUNT, CMD_BITPOS, CMD_BITOP,
    CMD_BITFIELD, CMD_BITFIELD_RO, CMD_SETRANGE;

#endif
