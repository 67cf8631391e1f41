/*
 * bits.h - Redis string bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP and
 * the raw bytes (SET/GET), with Redis's exact answers.
 *
 * A bit string is a plain byte array.  Bit 0 is the most significant bit of
 * byte 0, bit 8 the most significant bit of byte 1, and so on:
 *
 *     offset:   0 1 2 3 4 5 6 7   8 9 10 ...
 *             +-----------------+-----------------+
 *             | 1 0 1 0 0 1 0 0 | 0 1 0 0 1 0 0 0 |  SETBIT 0,2,5,9,12 -> "\xa4H"
 *             +-----------------+-----------------+
 *                   byte 0            byte 1
 *
 * Writes grow the string with zero bytes up to the byte they touch; reads
 * past the end see zeros.  Offsets go up to 2^32 - 1 (Redis's 512 MiB
 * proto-max-bulk-len); a BITFIELD field may start at the last offset and run
 * 63 bits further, so the longest string is 2^29 + 8 bytes.
 *
 * Ranges (BITCOUNT, BITPOS) follow Redis 7: `start`/`end` count bytes, or
 * bits with BITS_UNIT_BIT; negative values count from the end (-1 = last);
 * after adding the length they are clamped into the string.  BITPOS has two
 * odd cases kept on purpose: searching for 0 in an all-ones string with no
 * `end` answers the first bit after the string (the right is zero-padded),
 * with an explicit `end` it answers -1; and on a missing key it answers 0
 * when looking for 0 and -1 when looking for 1 (but -1 on an existing empty
 * string).
 *
 * Memory: the value owns one allocation of `cap` >= `len` bytes.  A new
 * string is allocated exactly; growing one doubles while small and adds 1 MiB
 * at a time beyond 1 MiB (as Redis's sdsMakeRoomFor), never past the longest
 * string.
 */
#ifndef TALLY_BITS_H
#define TALLY_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/types.h"

/* The on-disk tag of Redis-style bit string values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_BITS = 9 };

#define BITS_MAX_OFFSET 4294967295ULL               /* 2^32 - 1: SETBIT's limit, as Redis */
#define BITS_MAX_LEN ((BITS_MAX_OFFSET + 64) / 8)    /* 2^29 + 8: a 64-bit field at the last offset */

typedef struct bits bits_t;

typedef enum bits_unit { BITS_UNIT_BYTE = 0, BITS_UNIT_BIT = 1 } bits_unit_t;

typedef enum bits_op {
    BITS_OP_AND = 0,
    BITS_OP_OR,
    BITS_OP_XOR,
    BITS_OP_NOT
} bits_op_t;

/* A BITCOUNT/BITPOS range as given by the client (before normalising). */
typedef struct bits_range {
    bool has_start;
    bool has_end;
    int64_t start;
    int64_t end;
    bits_unit_t unit;
} bits_range_t;

/* ------------------------------------------------------------------------ */
/* The value                                                                */
/* ------------------------------------------------------------------------ */

/* A string holding a copy of p[0..len) (len <= BITS_MAX_LEN); NULL on
 * allocation failure. */
bits_t *bits_from(const void *p, size_t len);
/* Takes ownership of a malloc'd buffer of len bytes (cap == len). */
bits_t *bits_adopt(uint8_t *p, size_t len);
void bits_free(bits_t *b);

const uint8_t *bits_data(const bits_t *b);
size_t bits_len(const bits_t *b);
/* Heap bytes owned (the struct and its buffer capacity). */
size_t bits_heap_bytes(const bits_t *b);
/* Heap bytes the value would own after growing to `len` bytes, or for a new
 * value of exactly `len` bytes when b is NULL: what a write must make room
 * for. */
size_t bits_heap_bytes_after(const bits_t *b, size_t len);

/* Grows to at least len bytes (zero-filled); false on allocation failure
 * (unchanged) or len > BITS_MAX_LEN. */
bool bits_grow(bits_t *b, size_t len);
/* Mutable bytes, valid until the next grow. */
uint8_t *bits_mut(bits_t *b);

/* ------------------------------------------------------------------------ */
/* Operations on bytes (NULL/0 is a missing or empty string)                */
/* ------------------------------------------------------------------------ */

/* SETBIT: the string must already hold byte offset/8 (bits_grow first).
 * Returns the previous bit. */
int bits_setbit(uint8_t *p, uint64_t offset, int value);
/* GETBIT: 0 past the end. */
int bits_getbit(const uint8_t *p, size_t len, uint64_t offset);
/* BITCOUNT.  The range must have both ends or neither (Redis 7.0). */
int64_t bits_count(const uint8_t *p, size_t len, const bits_range_t *r);
/* BITPOS for `bit` (0/1).  `exists` is false for a missing key.  The range
 * may have start only, start and end, or neither. */
int64_t bits_pos(const uint8_t *p, size_t len, bool exists, int bit, const bits_range_t *r);
/* BITOP over n >= 1 sources (NULL/0 = missing).  The result is as long as
 * the longest source; *out is malloc'd (NULL when *out_len is 0).  Returns
 * false on allocation failure. */
bool bits_bitop(bits_op_t op, const uint8_t *const *src, const size_t *lens, size_t n, uint8_t **out,
                size_t *out_len);
/* Set bits in p[0..n). */
uint64_t bits_popcount(const uint8_t *p, size_t n);

extern const ks_type_t bits_type;

#endif
