/*
 * gorilla.c - the Gorilla codec of time series chunks (see gorilla.h).
 *
 * Compression: Pelkonen et al., "Gorilla: A Fast, Scalable, In-Memory Time
 * Series Database", VLDB 2015, as RedisTimeSeries does.  A stream holds samples
 * in time order, one bit stream (most significant bit first):
 *
 *   sample 0:  64 bits  the value's IEEE-754 pattern   (its timestamp is in the header)
 *   sample k:  timestamp as delta-of-delta D = (t_k - t_k-1) - (t_k-1 - t_k-2),
 *              zigzag-coded Z = (D << 1) ^ (D >> 63), with the first delta
 *              taken against a previous delta of 0:
 *                '0'                      Z = 0        (regular interval: 1 bit)
 *                '10'    +  7 bits        Z < 2^7      (jitter up to +-64 ms)
 *                '110'   + 12 bits        Z < 2^12
 *                '1110'  + 20 bits        Z < 2^20
 *                '11110' + 32 bits        Z < 2^32
 *                '11111' + 64 bits        anything
 *              then the value as X = bits(v_k) XOR bits(v_k-1):
 *                '0'                      X = 0        (same value: 1 bit)
 *                '10' + meaningful bits   X fits the previous window
 *                                         (>= its leading and trailing zeros)
 *                '11' + 5 bits leading zeros (capped at 31)
 *                     + 6 bits (length - 1) + `length` meaningful bits,
 *                                         which sets the window
 *
 * At worst a sample takes 5+64 + 2+5+6+64 = 146 bits.  A regular series of
 * slowly changing values costs about 1 bit of timestamp and a few bits of
 * value per sample (Gorilla reports 1.37 bytes/sample on Facebook's data).
 *
 */
#include "core/gorilla.h"

#include <math.h>
#include <string.h>

/* ======================================================================== */
/* Bit streams                                                              */
/* ======================================================================== */

/* Appends the low n bits of v (1 <= n <= 64; higher bits of v must be 0)
 * at bit position *pos; the bytes from *pos on must be zero. */
static inline void bits_put(uint8_t *d, uint32_t *pos, uint64_t v, unsigned n)
{
    uint32_t p = *pos;
    unsigned room = 8 - (p & 7);
    *pos = p + n;
    if (n <= room) {               /* fits in the current byte: most codes */
        d[p >> 3] |= (uint8_t)(v << (room - n));
        return;
    }
    n -= room;
    d[p >> 3] |= (uint8_t)(v >> n);
    p += room;
    while (n >= 8) {
        n -= 8;
        d[p >> 3] = (uint8_t)(v >> n);
        p += 8;
    }
    if (n)
        d[p >> 3] = (uint8_t)(v << (8 - n));
}

typedef struct bitr {
    const uint8_t *d;
    uint32_t pos, end;      /* in bits; the buffer holds (end + 7) / 8 bytes */
    bool err;
} bitr_t;

/* The 64 bits starting at bit `pos` (zeros past the end of the buffer). */
static inline uint64_t bits_peek(const bitr_t *r)
{
    uint32_t b = r->pos >> 3, sh = r->pos & 7, nbytes = (r->end + 7) >> 3;
    uint64_t hi;
    unsigned lo;
    if (b + 9 <= nbytes) {          /* the common case: one unaligned load */
        memcpy(&hi, r->d + b, 8);
        hi = __builtin_bswap64(hi);
        lo = r->d[b + 8];
    } else {
        hi = 0;
        for (unsigned i = 0; i < 8; i++)
            hi = hi << 8 | (b + i < nbytes ? r->d[b + i] : 0);
        lo = b + 8 < nbytes ? r->d[b + 8] : 0;
    }
    return sh ? hi << sh | lo >> (8 - sh) : hi;
}

/* Reads n bits (1..64); past the end sets err and returns 0. */
static inline uint64_t bits_get(bitr_t *r, unsigned n)
{
    if (n > r->end - r->pos) {
        r->err = true;
        r->pos = r->end;
        return 0;
    }
    uint64_t v = bits_peek(r) >> (64 - n);
    r->pos += n;
    return v;
}

/* Counts 1 bits up to `max` (< 64), consuming them and the 0 that ends them
 * (when there are fewer than max). */
static inline unsigned bits_ones(bitr_t *r, unsigned max)
{
    uint64_t w = bits_peek(r);
    unsigned k = w == UINT64_MAX ? 64 : (unsigned)__builtin_clzll(~w);
    if (k > max)
        k = max;
    unsigned used = k < max ? k + 1 : k;
    if (used > r->end - r->pos) {
        r->err = true;
        r->pos = r->end;
        return 0;
    }
    r->pos += used;
    return k;
}

static uint64_t dbl_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
}

static double bits_dbl(uint64_t b)
{
    double v;
    memcpy(&v, &b, 8);
    return v;
}

/* ======================================================================== */
/* Encoding and decoding                                                    */
/* ======================================================================== */

/* See gorilla.h.  c is the stream's encoder state. */
void gorilla_put(gorilla_enc_t *c, uint8_t *data, int64_t t, double v)
{
    uint64_t bits = dbl_bits(v);
    if (c->count == 0) {
        c->first_ts = t;
        c->prev_delta = 0;
        bits_put(data, &c->nbits, bits, 64);
        c->lead = GORILLA_NO_WINDOW;
        c->trail = 0;
    } else {
        int64_t delta = t - c->last_ts;              /* in [1, INT64_MAX] */
        int64_t dod = delta - c->prev_delta;         /* prev_delta >= 0: no overflow */
        uint64_t z = ((uint64_t)dod << 1) ^ (dod < 0 ? UINT64_MAX : 0);
        if (z == 0) {
            bits_put(data, &c->nbits, 0, 1);
        } else if (z < (1ULL << 7)) {
            bits_put(data, &c->nbits, 2, 2);
            bits_put(data, &c->nbits, z, 7);
        } else if (z < (1ULL << 12)) {
            bits_put(data, &c->nbits, 6, 3);
            bits_put(data, &c->nbits, z, 12);
        } else if (z < (1ULL << 20)) {
            bits_put(data, &c->nbits, 14, 4);
            bits_put(data, &c->nbits, z, 20);
        } else if (z < (1ULL << 32)) {
            bits_put(data, &c->nbits, 30, 5);
            bits_put(data, &c->nbits, z, 32);
        } else {
            bits_put(data, &c->nbits, 31, 5);
            bits_put(data, &c->nbits, z, 64);
        }
        uint64_t x = bits ^ c->prev_bits;
        if (x == 0) {
            bits_put(data, &c->nbits, 0, 1);
        } else {
            unsigned lz = (unsigned)__builtin_clzll(x), tz = (unsigned)__builtin_ctzll(x);
            if (lz > 31)
                lz = 31;
            if (c->lead != GORILLA_NO_WINDOW && lz >= c->lead && tz >= c->trail) {
                bits_put(data, &c->nbits, 2, 2);
                bits_put(data, &c->nbits, x >> c->trail, 64u - c->lead - c->trail);
            } else {
                unsigned len = 64 - lz - tz;
                bits_put(data, &c->nbits, 3, 2);
                bits_put(data, &c->nbits, lz, 5);
                bits_put(data, &c->nbits, len - 1, 6);
                bits_put(data, &c->nbits, x >> tz, len);
                c->lead = (uint8_t)lz;
                c->trail = (uint8_t)tz;
            }
        }
        c->prev_delta = delta;
    }
    c->last_ts = t;
    c->prev_bits = bits;
    c->count++;
}

/* See gorilla.h: the decoder mirrors gorilla_put, with every length and
 * range checked, since snapshots are untrusted bytes. */
bool gorilla_decode(const uint8_t *d, uint32_t nbits, uint32_t count, int64_t first_ts, int64_t max_ts,
                    int64_t *t, double *v, gorilla_enc_t *end)
{
    if (count == 0 || first_ts < 0 || first_ts > max_ts || max_ts < 0)
        return false;
    bitr_t r = { d, 0, nbits, false };
    uint64_t bits = bits_get(&r, 64);
    double val = bits_dbl(bits);
    if (r.err || isinf(val))
        return false;
    int64_t ts = first_ts, delta = 0;
    uint8_t lead = GORILLA_NO_WINDOW, trail = 0;
    if (t)
        t[0] = ts;
    if (v)
        v[0] = val;
    for (uint32_t i = 1; i < count; i++) {
        static const unsigned zbits[6] = { 0, 7, 12, 20, 32, 64 };
        if (r.end - r.pos >= 2 && (bits_peek(&r) >> 62) == 0) {
            /* '0' '0': the same interval and the same value, the usual case of a
             * regular series (no overflow possible: delta was checked) */
            if (delta == 0 || (uint64_t)delta > (uint64_t)(max_ts - ts))   /* ts <= max_ts: no overflow */
                return false;
            r.pos += 2;
            ts += delta;
            if (t)
                t[i] = ts;
            if (v)
                v[i] = val;
            continue;
        }
        unsigned cls = bits_ones(&r, 5);
        uint64_t z = cls ? bits_get(&r, zbits[cls]) : 0;
        int64_t dod = (int64_t)((z >> 1) ^ (0 - (z & 1)));
        uint64_t nd = (uint64_t)delta + (uint64_t)dod;     /* wraps on hostile input: checked below */
        if (nd == 0 || nd > (uint64_t)(max_ts - ts))
            return false;
        delta = (int64_t)nd;
        ts += delta;
        unsigned vcls = bits_ones(&r, 2);     /* '0' same, '10' window, '11' new window */
        if (vcls) {
            uint64_t x;
            if (vcls == 1) {                       /* '10': the previous window */
                if (lead == GORILLA_NO_WINDOW)
                    return false;
                x = bits_get(&r, 64u - lead - trail) << trail;
            } else {                               /* '11': a new window */
                unsigned lz = (unsigned)bits_get(&r, 5);
                unsigned len = (unsigned)bits_get(&r, 6) + 1;
                if (lz + len > 64)
                    return false;
                unsigned tz = 64 - lz - len;
                x = bits_get(&r, len) << tz;
                lead = (uint8_t)lz;
                trail = (uint8_t)tz;
            }
            bits ^= x;
            val = bits_dbl(bits);
            if (isinf(val))
                return false;
        }
        if (r.err)
            return false;
        if (t)
            t[i] = ts;
        if (v)
            v[i] = val;
    }
    if (r.err || r.pos != nbits)
        return false;
    if (end) {
        end->first_ts = first_ts;
        end->count = count;
        end->nbits = nbits;
        end->last_ts = ts;
        end->prev_delta = delta;
        end->prev_bits = bits;
        end->lead = lead;
        end->trail = trail;
    }
    return true;
}

