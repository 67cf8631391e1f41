/*
 * gorilla.h - the Gorilla codec (Pelkonen et al., VLDB 2015) of one stream
 * of (timestamp, double) samples in strictly increasing time order:
 * delta-of-delta timestamps and XOR-compressed values, bit by bit (the
 * layout is drawn at the top of gorilla.c).  Pure: no allocation; the
 * caller owns the stream buffer.  core/ts.c keeps its chunks with it.
 */
#ifndef TALLY_GORILLA_H
#define TALLY_GORILLA_H

#include <stdbool.h>
#include <stdint.h>

#define GORILLA_SAMPLE_MAX_BITS 146   /* 5+64 timestamp + 2+5+6+64 value: the worst case of one sample */
#define GORILLA_NO_WINDOW 0xff        /* lead value before any '11' value record */

/* The encoder's state at the end of a stream (appending needs no decode). */
typedef struct gorilla_enc {
    int64_t first_ts;
    int64_t last_ts;
    int64_t prev_delta;     /* last_ts - the timestamp before it (0 with one sample) */
    uint64_t prev_bits;     /* the last value's bit pattern */
    uint32_t count;         /* samples in the stream */
    uint32_t nbits;         /* its length in bits; the bits after it are 0 */
    uint8_t lead, trail;    /* the XOR window; lead = GORILLA_NO_WINDOW before the first '11' */
} gorilla_enc_t;

/* An empty stream. */
static inline gorilla_enc_t gorilla_empty(void)
{
    return (gorilla_enc_t){ .lead = GORILLA_NO_WINDOW };
}

/* Appends (t, v) to the stream in data (t > e->last_ts unless the stream is
 * empty, t >= 0).  data must hold GORILLA_SAMPLE_MAX_BITS more bits after
 * e->nbits, all zero. */
void gorilla_put(gorilla_enc_t *e, uint8_t *data, int64_t t, double v);

/* Decodes the stream of `count` samples starting at first_ts into t[] and
 * v[] (either may be NULL) and, when end is not NULL, the encoder's state at
 * its end.  Validates everything, for untrusted bytes: the stream is exactly
 * nbits long, timestamps increase strictly and stay <= max_ts, values are
 * finite or NaN (RedisTimeSeries stores NaN; infinities never).  Returns
 * false on any inconsistency. */
bool gorilla_decode(const uint8_t *d, uint32_t nbits, uint32_t count, int64_t first_ts, int64_t max_ts,
                    int64_t *t, double *v, gorilla_enc_t *end);

#endif
