/*
 * bitfield.h - Redis BITFIELD: signed and unsigned integers of any width at
 * any bit offset of a bit string.
 *
 * A field of `w` bits at bit offset `o` is bits o .. o+w-1 of the string
 * (bit 0 = most significant bit of byte 0), read as a big-endian integer:
 * the first bit is the most significant.  "hello" = 01101000 01100101 ...:
 *
 *     GET u4 0  -> 0110          = 6
 *     GET u3 2  -> 101           = 5
 *     GET i3 2  -> 101 (signed)  = -3     (two's complement, sign-extended)
 *
 * Types are i1..i64 and u1..u63 (u64 cannot be answered as a signed 64-bit
 * integer, so Redis refuses it).  An offset `#N` means N * width.
 *
 * GET reads zeros past the end.  SET stores a value and answers the old one;
 * INCRBY adds and answers the new one.  What happens when the value does not
 * fit the width is chosen by the last OVERFLOW before the operation:
 *
 *     WRAP (default)  modular arithmetic; signed values wrap around to the
 *                     most negative number (sign-extended two's complement)
 *     SAT             clamp to the type's minimum or maximum
 *     FAIL            write nothing and answer nil
 *
 * The overflow test is Redis's own, including its corners (computed with
 * wrapping 64-bit arithmetic: e.g. SET i8 with -2^63 counts as an overflow
 * upwards, so SAT stores 127; SET u8 with -1 saturates to 255).
 *
 * Before any operation runs, the string is grown to cover the highest bit any
 * SET or INCRBY may write — even when FAIL then refuses the write — exactly
 * as Redis does.
 */
#ifndef TALLY_BITFIELD_H
#define TALLY_BITFIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum bf_opcode { BF_GET = 0, BF_SET, BF_INCRBY } bf_opcode_t;
typedef enum bf_overflow { BF_WRAP = 0, BF_SAT, BF_FAIL } bf_overflow_t;

typedef struct bf_op {
    uint8_t opcode;       /* bf_opcode_t */
    uint8_t overflow;     /* bf_overflow_t in force for this operation */
    uint8_t width;        /* 1..64 signed, 1..63 unsigned */
    bool sign;
    uint64_t offset;      /* in bits, <= BITS_MAX_OFFSET */
    int64_t arg;          /* SET value or INCRBY increment */
} bf_op_t;

typedef struct bf_result {
    bool nil;             /* FAIL refused the write */
    int64_t value;        /* u63 values fit too */
} bf_result_t;

/* Parses a type "i1".."i64" / "u1".."u63" (no sign, no leading zeros, no
 * spaces).  Returns false if it is not one. */
bool bf_parse_type(const char *s, size_t len, bool *sign, uint8_t *width);

/* The string length (bytes) the operations need: 0 when none writes. */
uint64_t bf_needed_len(const bf_op_t *ops, size_t n);

/* Runs the operations in order on p[0..len) (len >= bf_needed_len; p may
 * be NULL with len 0 when only GETs run), filling out[i] for each.
 * *changed tells whether any byte changed. */
void bf_exec(uint8_t *p, size_t len, const bf_op_t *ops, size_t n, bf_result_t *out, bool *changed);

/* The overflow rule, exposed for tests.  Returns 0 when value + incr fits,
 * 1 on overflow, -1 on underflow; *limit receives the wrapped or saturated
 * value to store. */
int bf_check_unsigned(uint64_t value, int64_t incr, unsigned width, bf_overflow_t ow, uint64_t *limit);
int bf_check_signed(int64_t value, int64_t incr, unsigned width, bf_overflow_t ow, int64_t *limit);

#endif
