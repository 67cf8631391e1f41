/*
 * test_bits.c - Redis bit strings and BITFIELD in core/bits and core/bitfield.
 *
 * The seeds' examples (the `bitfield w get u4 0` transcript; SETBIT 0,2,5,9,12
 * giving "\xa4H" and BITOP NOT giving "[\xb7"), Redis's documented examples,
 * overflow corners checked against a real redis-server 7.0, and BITCOUNT /
 * BITPOS against a bit-by-bit model on seeded random strings and ranges.
 * (tests/integration/it_bits.c runs the differential test against Redis.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/bitfield.h"
#include "core/bits.h"
#include "core/codec.h"
#include "core/rng.h"

static bf_op_t op(bf_opcode_t code, const char *type, uint64_t offset, int64_t arg, bf_overflow_t ow)
{
    bf_op_t o;
    memset(&o, 0, sizeof(o));
    assert_true(bf_parse_type(type, strlen(type), &o.sign, &o.width));
    o.opcode = (uint8_t)code;
    o.offset = offset;
    o.arg = arg;
    o.overflow = (uint8_t)ow;
    return o;
}

static int64_t run1(bits_t *b, bf_op_t o, bool *nil)
{
    bf_result_t r;
    bool changed;
    uint64_t need = bf_needed_len(&o, 1);
    if (need)
        assert_true(bits_grow(b, (size_t)need));
    bf_exec(bits_mut(b), bits_len(b), &o, 1, &r, &changed);
    if (nil)
        *nil = r.nil;
    return r.value;
}

/* Seed 000: set w hello; bitfield w get u4 0 -> 6; get u3 2 -> 5;
 * get i3 2 -> -3; incrby u4 2 1 -> 11, 12, ..., 15, 0, 1, 2, 3. */
static void test_seed_bitfield_transcript(void **state)
{
    (void)state;
    bits_t *w = bits_from("hello", 5);
    assert_int_equal(run1(w, op(BF_GET, "u4", 0, 0, BF_WRAP), NULL), 6);
    assert_int_equal(run1(w, op(BF_GET, "u3", 2, 0, BF_WRAP), NULL), 5);
    assert_int_equal(run1(w, op(BF_GET, "i3", 2, 0, BF_WRAP), NULL), -3);
    const int64_t expect[] = { 11, 12, 13, 14, 15, 0, 1, 2, 3 };
    for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
        assert_int_equal(run1(w, op(BF_INCRBY, "u4", 2, 1, BF_WRAP), NULL), expect[i]);
    assert_int_equal(bits_len(w), 5);
    bits_free(w);

    /* DESIGN's example: get u4 0, overflow sat, incrby u4 #2 1, set i8 8 -3 -> 6, 7, 117 */
    w = bits_from("hello", 5);
    bf_op_t ops[3] = { op(BF_GET, "u4", 0, 0, BF_WRAP), op(BF_INCRBY, "u4", 8, 1, BF_SAT),
                       op(BF_SET, "i8", 8, -3, BF_SAT) };
    bf_result_t r[3];
    bool changed;
    bf_exec(bits_mut(w), bits_len(w), ops, 3, r, &changed);
    assert_int_equal(r[0].value, 6);
    assert_int_equal(r[1].value, 7);
    assert_int_equal(r[2].value, 117);
    assert_true(changed);
    assert_int_equal(bits_data(w)[1], 0xfd);
    bits_free(w);
}

/* Seed 004: SETBIT key 0,2,5,9,12 -> "\xa4H"; BITCOUNT; BITPOS; BITOP. */
static void test_seed_login_bitmap(void **state)
{
    (void)state;
    bits_t *k = bits_from(NULL, 0);
    const uint64_t offs[] = { 0, 2, 5, 9, 12 };
    for (size_t i = 0; i < 5; i++) {
        assert_true(bits_grow(k, (size_t)(offs[i] / 8 + 1)));
        assert_int_equal(bits_setbit(bits_mut(k), offs[i], 1), 0);
    }
    assert_int_equal(bits_len(k), 2);
    assert_memory_equal(bits_data(k), "\xa4H", 2);
    for (uint64_t o = 0; o < 24; o++)
        assert_int_equal(bits_getbit(bits_data(k), bits_len(k), o), o == 0 || o == 2 || o == 5 || o == 9 || o == 12);
    bits_range_t all = { 0 }, b0 = { true, true, 0, 0, BITS_UNIT_BYTE }, b1 = { true, true, 1, 1, BITS_UNIT_BYTE },
                 whole = { true, true, 0, -1, BITS_UNIT_BYTE };
    assert_int_equal(bits_count(bits_data(k), 2, &all), 5);
    assert_int_equal(bits_count(bits_data(k), 2, &b0), 3);
    assert_int_equal(bits_count(bits_data(k), 2, &b1), 2);
    assert_int_equal(bits_count(bits_data(k), 2, &whole), 5);
    assert_int_equal(bits_pos(bits_data(k), 2, true, 0, &all), 1);
    assert_int_equal(bits_pos(bits_data(k), 2, true, 1, &b1), 9);

    const uint8_t *src[2] = { bits_data(k), NULL };
    size_t lens[2] = { 2, 0 };
    uint8_t *res;
    size_t rlen;
    assert_true(bits_bitop(BITS_OP_NOT, src, lens, 1, &res, &rlen));
    assert_int_equal(rlen, 2);
    assert_memory_equal(res, "[\xb7", 2);
    src[1] = res;
    lens[1] = rlen;
    uint8_t *and;
    assert_true(bits_bitop(BITS_OP_AND, src, lens, 2, &and, &rlen));
    assert_int_equal(rlen, 2);
    assert_memory_equal(and, "\0\0", 2);
    free(and);
    free(res);
    bits_free(k);
}

/* Examples from Redis's BITCOUNT and BITPOS documentation. */
static void test_redis_doc_examples(void **state)
{
    (void)state;
    bits_range_t none = { 0 };
    bits_range_t r = { true, true, 0, 0, BITS_UNIT_BYTE };
    assert_int_equal(bits_count((const uint8_t *)"foobar", 6, &none), 26);
    assert_int_equal(bits_count((const uint8_t *)"foobar", 6, &r), 4);
    r.start = r.end = 1;
    assert_int_equal(bits_count((const uint8_t *)"foobar", 6, &r), 6);
    r = (bits_range_t){ true, true, 5, 30, BITS_UNIT_BIT };
    assert_int_equal(bits_count((const uint8_t *)"foobar", 6, &r), 17);

    const uint8_t a[] = { 0xff, 0xf0, 0x00 }, b[] = { 0x00, 0xff, 0xf0 }, z[] = { 0, 0, 0 };
    assert_int_equal(bits_pos(a, 3, true, 0, &none), 12);
    r = (bits_range_t){ true, false, 0, 0, BITS_UNIT_BYTE };
    assert_int_equal(bits_pos(b, 3, true, 1, &r), 8);
    r.start = 2;
    assert_int_equal(bits_pos(b, 3, true, 1, &r), 16);
    r = (bits_range_t){ true, true, 2, -1, BITS_UNIT_BYTE };
    assert_int_equal(bits_pos(b, 3, true, 1, &r), 16);
    r = (bits_range_t){ true, true, 7, 15, BITS_UNIT_BIT };
    assert_int_equal(bits_pos(b, 3, true, 1, &r), 8);
    assert_int_equal(bits_pos(z, 3, true, 1, &none), -1);
}

/* BITPOS's odd cases. */
static void test_bitpos_odd_cases(void **state)
{
    (void)state;
    const uint8_t ones[] = { 0xff, 0xff, 0xff };
    bits_range_t none = { 0 }, from0 = { true, false, 0, 0, BITS_UNIT_BYTE },
                 ended = { true, true, 0, -1, BITS_UNIT_BYTE }, bit3 = { true, false, 3, 0, BITS_UNIT_BYTE };
    /* searching 0 in all ones: first bit after the string without an end, -1 with one */
    assert_int_equal(bits_pos(ones, 3, true, 0, &none), 24);
    assert_int_equal(bits_pos(ones, 3, true, 0, &from0), 24);
    assert_int_equal(bits_pos(ones, 3, true, 0, &ended), -1);
    /* a start past the end is an empty range */
    assert_int_equal(bits_pos(ones, 3, true, 0, &bit3), -1);
    /* missing key: 0 for a 0 bit, -1 for a 1 bit; an existing empty string: -1 */
    assert_int_equal(bits_pos(NULL, 0, false, 0, &none), 0);
    assert_int_equal(bits_pos(NULL, 0, false, 1, &none), -1);
    assert_int_equal(bits_pos(NULL, 0, true, 0, &none), -1);
    /* BITCOUNT with both ends negative and start > end */
    bits_range_t neg = { true, true, -1, -5, BITS_UNIT_BYTE };
    assert_int_equal(bits_count(ones, 3, &neg), 0);
    neg = (bits_range_t){ true, true, -100, -200, BITS_UNIT_BYTE };
    assert_int_equal(bits_count(ones, 3, &neg), 0);
    neg = (bits_range_t){ true, true, -100, -3, BITS_UNIT_BYTE };
    assert_int_equal(bits_count(ones, 3, &neg), 8);
}

/* Overflow corners, each checked against redis-server 7.0.15. */
static void test_overflow_corners(void **state)
{
    (void)state;
    bits_t *c = bits_from(NULL, 0);
    bool nil;
    /* SAT of i8 with -2^63 saturates *up* (Redis computes max - value with wrapping) */
    run1(c, op(BF_SET, "i8", 0, INT64_MIN, BF_SAT), NULL);
    assert_int_equal(run1(c, op(BF_GET, "i8", 0, 0, BF_WRAP), NULL), 127);
    run1(c, op(BF_SET, "i8", 0, INT64_MIN + 108, BF_SAT), NULL);
    assert_int_equal(run1(c, op(BF_GET, "i8", 0, 0, BF_WRAP), NULL), 127);
    run1(c, op(BF_SET, "i8", 0, -200, BF_SAT), NULL);
    assert_int_equal(run1(c, op(BF_GET, "i8", 0, 0, BF_WRAP), NULL), -128);
    /* SAT of u8 with -1 is 255; WRAP keeps the low bits */
    run1(c, op(BF_SET, "u8", 0, -1, BF_SAT), NULL);
    assert_int_equal(run1(c, op(BF_GET, "u8", 0, 0, BF_WRAP), NULL), 255);
    assert_int_equal(run1(c, op(BF_SET, "i8", 0, INT64_MIN, BF_WRAP), NULL), -1);
    assert_int_equal(run1(c, op(BF_GET, "i8", 0, 0, BF_WRAP), NULL), 0);
    /* i64 at the edges */
    assert_int_equal(run1(c, op(BF_INCRBY, "i64", 64, INT64_MAX, BF_WRAP), NULL), INT64_MAX);
    assert_int_equal(run1(c, op(BF_INCRBY, "i64", 64, 1, BF_WRAP), NULL), INT64_MIN);
    assert_int_equal(run1(c, op(BF_INCRBY, "i64", 64, -1, BF_SAT), NULL), INT64_MIN);
    assert_int_equal(run1(c, op(BF_INCRBY, "i64", 64, -1, BF_FAIL), &nil), 0);
    assert_true(nil);
    assert_int_equal(run1(c, op(BF_GET, "i64", 64, 0, BF_WRAP), NULL), INT64_MIN);
    /* u63 maximum */
    assert_int_equal(run1(c, op(BF_SET, "u63", 200, INT64_MAX, BF_FAIL), &nil), 0);
    assert_false(nil);
    assert_int_equal(run1(c, op(BF_GET, "u63", 200, 0, BF_WRAP), NULL), INT64_MAX);
    assert_int_equal(run1(c, op(BF_INCRBY, "u63", 200, 1, BF_WRAP), NULL), 0);
    /* u2 through the three modes */
    assert_int_equal(run1(c, op(BF_INCRBY, "u2", 300, 5, BF_WRAP), NULL), 1);
    assert_int_equal(run1(c, op(BF_INCRBY, "u2", 300, 5, BF_SAT), NULL), 3);
    assert_int_equal(run1(c, op(BF_INCRBY, "u2", 300, -4, BF_SAT), NULL), 0);
    run1(c, op(BF_INCRBY, "u2", 300, 1, BF_FAIL), &nil);
    assert_false(nil);
    run1(c, op(BF_INCRBY, "u2", 300, 3, BF_FAIL), &nil);
    assert_true(nil);
    assert_int_equal(run1(c, op(BF_GET, "u2", 300, 0, BF_WRAP), NULL), 1);
    /* i1 holds -1 and 0 */
    assert_int_equal(run1(c, op(BF_INCRBY, "i1", 400, 1, BF_WRAP), NULL), -1);
    assert_int_equal(run1(c, op(BF_INCRBY, "i1", 400, 1, BF_SAT), NULL), 0);
    assert_int_equal(run1(c, op(BF_INCRBY, "i1", 400, 5, BF_SAT), NULL), 0);
    bits_free(c);

    /* FAIL still grows the string to the field (Redis: strlen 14 after a failed SET u8 at 100) */
    bits_t *g = bits_from(NULL, 0);
    run1(g, op(BF_SET, "u8", 100, 300, BF_FAIL), &nil);
    assert_true(nil);
    assert_int_equal(bits_len(g), 14);
    bits_free(g);
}

static void test_parse_type(void **state)
{
    (void)state;
    bool s;
    uint8_t w;
    const char *good[] = { "i1", "i64", "u1", "u63", "i8", "u16" };
    const char *bad[] = { "u64", "i65", "x8", "i0", "u0", "i08", "i", "", "i-1", "I8", "i 8", "u100", "i+8" };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_true(bf_parse_type(good[i], strlen(good[i]), &s, &w));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (bf_parse_type(bad[i], strlen(bad[i]), &s, &w))
            fail_msg("type '%s' accepted", bad[i]);
}

/* ------------------------------------------------------------------------ */
/* Model: ranges resolved bit by bit                                        */
/* ------------------------------------------------------------------------ */

static int bit_at(const uint8_t *p, int64_t i) { return (p[i >> 3] >> (7 - (i & 7))) & 1; }

/* The range as an inclusive bit range [*s, *e] (empty when *s > *e). */
static void model_range(size_t len, const bits_range_t *r, bool is_pos, int64_t *s, int64_t *e)
{
    int64_t tot = r->unit == BITS_UNIT_BIT ? (int64_t)len * 8 : (int64_t)len;
    int64_t a = r->start, b = r->has_end ? r->end : tot - 1;
    if (!r->has_start) {
        a = 0;
        b = (int64_t)len - 1;
        tot = (int64_t)len;
    }
    (void)is_pos;
    if (a < 0)
        a += tot;
    if (b < 0)
        b += tot;
    if (a < 0)
        a = 0;
    if (b < 0)
        b = 0;
    if (b >= tot)
        b = tot - 1;
    if (r->has_start && r->unit == BITS_UNIT_BIT) {
        *s = a;
        *e = b;
    } else {
        *s = a * 8;
        *e = b * 8 + 7;
    }
}

static int64_t model_count(const uint8_t *p, size_t len, const bits_range_t *r)
{
    if (r->has_start && r->start < 0 && r->end < 0 && r->start > r->end)
        return 0;
    int64_t s, e, n = 0;
    model_range(len, r, false, &s, &e);
    for (int64_t i = s; i <= e; i++)
        n += bit_at(p, i);
    return n;
}

static int64_t model_pos(const uint8_t *p, size_t len, int bit, const bits_range_t *r)
{
    int64_t s, e;
    model_range(len, r, true, &s, &e);
    if (s > e)
        return -1;
    for (int64_t i = s; i <= e; i++)
        if (bit_at(p, i) == bit)
            return i;
    if (bit == 1 || r->has_end)
        return -1;
    return (int64_t)len * 8;
}

static void test_count_pos_vs_model(void **state)
{
    (void)state;
    rng_t g;
    rng_seed(&g, 20240501);
    uint8_t buf[40];
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = (size_t)rng_below(&g, sizeof(buf) + 1);
        int style = (int)rng_below(&g, 4);   /* random, all ones, all zeros, sparse */
        for (size_t i = 0; i < len; i++)
            buf[i] = style == 0 ? (uint8_t)rng_next(&g)
                     : style == 1 ? 0xff
                     : style == 2 ? 0
                                  : (rng_below(&g, 8) ? (style == 3 ? 0 : 0xff) : (uint8_t)(1u << rng_below(&g, 8)));
        bits_range_t r;
        memset(&r, 0, sizeof(r));
        int form = (int)rng_below(&g, 3);   /* none, start only, start and end */
        int64_t span = (int64_t)len * 10 + 20;
        r.unit = rng_below(&g, 2) ? BITS_UNIT_BIT : BITS_UNIT_BYTE;
        if (form >= 1) {
            r.has_start = true;
            r.start = (int64_t)rng_below(&g, (uint64_t)span * 2) - span;
        }
        if (form == 2) {
            r.has_end = true;
            r.end = (int64_t)rng_below(&g, (uint64_t)span * 2) - span;
        }
        if (form == 0 || form == 1)
            r.unit = form == 1 ? BITS_UNIT_BYTE : r.unit;
        int bit = (int)rng_below(&g, 2);
        int64_t got = bits_pos(buf, len, true, bit, &r), want = model_pos(buf, len, bit, &r);
        if (got != want)
            fail_msg("iter %d: BITPOS len %zu bit %d start %lld end %lld (has %d/%d) unit %d: got %lld want %lld", iter,
                     len, bit, (long long)r.start, (long long)r.end, r.has_start, r.has_end, r.unit, (long long)got,
                     (long long)want);
        if (form != 1) {
            got = bits_count(buf, len, &r);
            want = model_count(buf, len, &r);
            if (got != want)
                fail_msg("iter %d: BITCOUNT len %zu start %lld end %lld unit %d: got %lld want %lld", iter, len,
                         (long long)r.start, (long long)r.end, r.unit, (long long)got, (long long)want);
        }
    }
}

/* BITOP against a byte-by-byte model, and popcount on long unaligned runs. */
static void test_bitop_vs_model(void **state)
{
    (void)state;
    rng_t g;
    rng_seed(&g, 7);
    for (int iter = 0; iter < 2000; iter++) {
        size_t n = 1 + (size_t)rng_below(&g, 4);
        bits_op_t o = (bits_op_t)rng_below(&g, 4);
        if (o == BITS_OP_NOT)
            n = 1;
        uint8_t bufs[4][70];
        const uint8_t *src[4];
        size_t lens[4], maxlen = 0;
        for (size_t i = 0; i < n; i++) {
            lens[i] = rng_below(&g, 3) ? (size_t)rng_below(&g, 71) : 0;
            for (size_t j = 0; j < lens[i]; j++)
                bufs[i][j] = (uint8_t)rng_next(&g);
            src[i] = lens[i] ? bufs[i] : NULL;
            if (lens[i] > maxlen)
                maxlen = lens[i];
        }
        uint8_t *res;
        size_t rlen;
        assert_true(bits_bitop(o, src, lens, n, &res, &rlen));
        assert_int_equal(rlen, maxlen);
        for (size_t j = 0; j < maxlen; j++) {
            uint8_t want = j < lens[0] ? src[0][j] : 0;
            if (o == BITS_OP_NOT)
                want = (uint8_t)~want;
            for (size_t i = 1; i < n; i++) {
                uint8_t b = j < lens[i] ? src[i][j] : 0;
                want = o == BITS_OP_AND ? (uint8_t)(want & b) : o == BITS_OP_OR ? (uint8_t)(want | b) : (uint8_t)(want ^ b);
            }
            assert_int_equal(res[j], want);
        }
        free(res);
    }
    uint8_t big[1000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)rng_next(&g);
    for (size_t off = 0; off < 9; off++) {
        uint64_t want = 0;
        for (size_t i = off; i < sizeof(big); i++)
            want += (uint64_t)__builtin_popcount(big[i]);
        assert_int_equal(bits_popcount(big + off, sizeof(big) - off), want);
    }
}

/* BITFIELD GET/SET against a bit-by-bit model at random offsets and widths. */
static void test_bitfield_vs_model(void **state)
{
    (void)state;
    rng_t g;
    rng_seed(&g, 99);
    uint8_t model[64];
    bits_t *b = bits_from(NULL, 0);
    assert_true(bits_grow(b, sizeof(model)));
    memset(model, 0, sizeof(model));
    for (int iter = 0; iter < 20000; iter++) {
        bool sign = rng_below(&g, 2);
        unsigned w = 1 + (unsigned)rng_below(&g, sign ? 64 : 63);
        uint64_t off = rng_below(&g, sizeof(model) * 8 - w + 1);
        uint64_t v = rng_next(&g);
        char type[8];
        type[0] = sign ? 'i' : 'u';
        snprintf(type + 1, sizeof(type) - 1, "%u", w);
        run1(b, op(BF_SET, type, off, (int64_t)v, BF_WRAP), NULL);
        for (unsigned j = 0; j < w; j++) {
            uint64_t bitpos = off + j;
            int bit = (int)((v >> (w - 1 - j)) & 1);
            model[bitpos >> 3] = (uint8_t)((model[bitpos >> 3] & ~(0x80u >> (bitpos & 7))) | (unsigned)bit << (7 - (bitpos & 7)));
        }
        assert_memory_equal(bits_data(b), model, sizeof(model));
        uint64_t mask = w == 64 ? UINT64_MAX : ((uint64_t)1 << w) - 1;
        int64_t want = sign ? (int64_t)((v & mask) | ((v >> (w - 1) & 1) && w < 64 ? ~mask : 0)) : (int64_t)(v & mask);
        assert_int_equal(run1(b, op(BF_GET, type, off, 0, BF_WRAP), NULL), want);
    }
    bits_free(b);
}

static void test_encoding_roundtrip(void **state)
{
    (void)state;
    bits_t *b = bits_from("\x00\xffhello", 7);
    wbuf_t w = WBUF_INIT;
    bits_type.encode(b, &w);
    const char *why = NULL;
    bits_t *c = bits_type.decode(w.data, w.len, &why);
    assert_non_null(c);
    assert_int_equal(bits_len(c), 7);
    assert_memory_equal(bits_data(c), "\x00\xffhello", 7);
    /* truncated, trailing bytes, bad version: refused */
    assert_null(bits_type.decode(w.data, w.len - 1, &why));
    uint8_t *longer = malloc(w.len + 1);
    memcpy(longer, w.data, w.len);
    longer[w.len] = 0;
    assert_null(bits_type.decode(longer, w.len + 1, &why));
    longer[0] = 9;
    assert_null(bits_type.decode(longer, w.len, &why));
    free(longer);
    wbuf_free(&w);
    bits_free(b);
    bits_free(c);
    /* growth stops at the longest string */
    assert_true(bits_heap_bytes_after(NULL, BITS_MAX_LEN) >= BITS_MAX_LEN);
    assert_true(bits_heap_bytes_after(NULL, BITS_MAX_LEN) <= BITS_MAX_LEN + 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_bitfield_transcript), cmocka_unit_test(test_seed_login_bitmap),
        cmocka_unit_test(test_redis_doc_examples),       cmocka_unit_test(test_bitpos_odd_cases),
        cmocka_unit_test(test_overflow_corners),         cmocka_unit_test(test_parse_type),
        cmocka_unit_test(test_count_pos_vs_model),       cmocka_unit_test(test_bitop_vs_model),
        cmocka_unit_test(test_bitfield_vs_model),        cmocka_unit_test(test_encoding_roundtrip),
    };
    return cmocka_run_group_tests_name("bits", tests, NULL, NULL);
}
