/*
 * test_gorilla.c - the Gorilla codec alone: seeded series of every shape
 * (regular, jittered, huge gaps, constant, slowly changing, random and
 * extreme doubles) survive a round trip exactly and leave the encoder's
 * state as the decoder rebuilds it; every sample stays within the
 * worst-case bound; and the decoder refuses what it must (a stream one bit
 * short or long, a non-finite value, time going backwards or past max_ts).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "core/gorilla.h"
#include "core/rng.h"

#define N 2000
#define MAX_TS (((int64_t)1 << 62) - 1)

static uint8_t buf[(N * GORILLA_SAMPLE_MAX_BITS + 7) / 8 + 16];
static int64_t t[N], t2[N];
static double v[N], v2[N];

/* Encodes t/v[0..n) into buf; returns the state. */
static gorilla_enc_t encode(size_t n)
{
    memset(buf, 0, sizeof(buf));
    gorilla_enc_t e = gorilla_empty();
    for (size_t i = 0; i < n; i++) {
        uint32_t before = e.nbits;
        gorilla_put(&e, buf, t[i], v[i]);
        assert_true(e.nbits - before <= GORILLA_SAMPLE_MAX_BITS);
    }
    return e;
}

/* The decoder's end state is the encoder's, member by member (the struct
 * has padding after trail, which neither side defines). */
static void assert_enc_equal(const gorilla_enc_t *a, const gorilla_enc_t *b)
{
    assert_int_equal(a->first_ts, b->first_ts);
    assert_int_equal(a->last_ts, b->last_ts);
    assert_int_equal(a->prev_delta, b->prev_delta);
    assert_int_equal(a->prev_bits, b->prev_bits);
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->nbits, b->nbits);
    assert_int_equal(a->lead, b->lead);
    assert_int_equal(a->trail, b->trail);
}

static void round_trip(size_t n)
{
    gorilla_enc_t e = encode(n), d;
    assert_int_equal(e.count, n);
    assert_true(gorilla_decode(buf, e.nbits, e.count, e.first_ts, MAX_TS, t2, v2, &d));
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(t2[i], t[i]);
        assert_memory_equal(&v2[i], &v[i], sizeof(double));   /* bit for bit: -0.0 too */
    }
    assert_enc_equal(&d, &e);
}

static void test_round_trips(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 1234);
    for (int shape = 0; shape < 7; shape++) {
        int64_t ts = (int64_t)(rng_next(&r) % 1000000);
        double x = 20.0;
        for (size_t i = 0; i < N; i++) {
            switch (shape) {
            case 0: ts += 1000; x = 1.5; break;                                        /* regular, constant */
            case 1: ts += 1000 + (int64_t)(rng_next(&r) % 41) - 20; x += 0.1; break;  /* jitter, slow drift */
            case 2: ts += 1 + (int64_t)(rng_next(&r) % ((uint64_t)1 << 40)); break;   /* huge gaps */
            case 3: ts += 1; x = rng_double(&r) * 1000; break;                        /* incompressible */
            case 4: ts += 7; x = i % 2 ? -0.0 : 0.0; break;                           /* signed zeros */
            case 5: ts += 60000; x = i % 3 ? 1e308 : -4.9e-324; break;                /* extremes */
            default: ts += 1 + (int64_t)(rng_next(&r) % 3); x = (double)(rng_next(&r) % 4); break;
            }
            t[i] = ts;
            v[i] = x;
        }
        round_trip(N);
        round_trip(1);
        round_trip(2);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    for (size_t i = 0; i < 100; i++) {
        t[i] = 1000 + (int64_t)i * 10;
        v[i] = (double)i;
    }
    gorilla_enc_t e = encode(100);
    assert_true(gorilla_decode(buf, e.nbits, 100, 1000, MAX_TS, NULL, NULL, NULL));
    /* the length must be exact */
    assert_false(gorilla_decode(buf, e.nbits - 1, 100, 1000, MAX_TS, NULL, NULL, NULL));
    assert_false(gorilla_decode(buf, e.nbits + 1, 100, 1000, MAX_TS, NULL, NULL, NULL));
    /* more samples than the stream holds, or none */
    assert_false(gorilla_decode(buf, e.nbits, 101, 1000, MAX_TS, NULL, NULL, NULL));
    assert_false(gorilla_decode(buf, e.nbits, 0, 1000, MAX_TS, NULL, NULL, NULL));
    /* timestamps: negative start, past the maximum */
    assert_false(gorilla_decode(buf, e.nbits, 100, -1, MAX_TS, NULL, NULL, NULL));
    assert_false(gorilla_decode(buf, e.nbits, 100, 1000, 1500, NULL, NULL, NULL));
    /* a first value that is infinite (a NaN is a stored missing reading) */
    uint8_t inf[8] = { 0x7f, 0xf0, 0, 0, 0, 0, 0, 0 };
    assert_false(gorilla_decode(inf, 64, 1, 0, MAX_TS, NULL, NULL, NULL));
    uint8_t nan[8] = { 0x7f, 0xf8, 0, 0, 0, 0, 0, 0 };
    double nv;
    assert_true(gorilla_decode(nan, 64, 1, 0, MAX_TS, NULL, &nv, NULL) && isnan(nv));
    /* a second sample with a zero interval: '10' + Z = 1 (dod -1 from 0) */
    t[0] = 5;
    t[1] = 6;
    v[0] = v[1] = 1;
    e = encode(2);
    uint8_t copy[32];
    memcpy(copy, buf, sizeof(copy));
    assert_true(gorilla_decode(copy, e.nbits, 2, 5, MAX_TS, NULL, NULL, NULL));
    assert_int_equal(copy[8], 0x81);   /* '10' + Z = 0000010 (D = 1) ... */
    copy[8] = 0x80;                    /* ... made Z = 0000001: D = -1, a negative interval */
    copy[9] = 0x80;
    assert_false(gorilla_decode(copy, e.nbits, 2, 5, MAX_TS, NULL, NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
