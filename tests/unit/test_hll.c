/*
 * test_hll.c - the HyperLogLog against theory (Redis's own test style):
 * seeded items, the relative error at checkpoints x10 within 5 standard
 * errors (5 x 1.04/sqrt(16384) = 4.06%); the sparse and dense encodings of
 * the same registers give the same estimate; PFADD's "updated"; the cached
 * cardinality; encode/decode round trips and refusal of damaged bytes; a
 * merge of two opcodes in a string at the sparse size limit; the registers
 * against an exact model through adds, merges and reloads.
 * (Byte-for-byte agreement with a real Redis is in
 * tests/integration/it_hll_redis.c.)
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/hll.h"
#include "core/rng.h"

static void test_error_within_theory(void **state)
{
    (void)state;
    char k[48];
    for (uint64_t seed = 1; seed <= 3; seed++) {
        hll_t *h = hll_create();
        uint64_t have = 0;
        for (uint64_t cp = 10; cp <= 1000000; cp *= 10) {
            while (have < cp) {
                int n = snprintf(k, sizeof(k), "%llu:%llu", (unsigned long long)seed, (unsigned long long)have);
                hll_add(h, k, (size_t)n);
                have++;
            }
            /* sparse and dense agree: the raw registers give the same estimate */
            uint8_t regs[HLL_REGISTERS] = { 0 };
            hll_max_into(h, regs);
            uint64_t est = hll_estimate(h);
            assert_int_equal(est, hll_count_registers(regs));
            double err = fabs((double)est - (double)cp) / (double)cp;
            if (err > 5 * 1.04 / sqrt(HLL_REGISTERS))
                fail_msg("seed %llu: %llu items estimated %llu (error %.4f)", (unsigned long long)seed,
                         (unsigned long long)cp, (unsigned long long)est, err);
        }
        assert_false(hll_is_sparse(h));
        hll_free(h);
    }
}

static void test_updated_and_cache(void **state)
{
    (void)state;
    hll_t *h = hll_create();
    assert_true(hll_cache_valid(h));
    assert_int_equal(hll_count(h, true, NULL), 0);
    assert_int_equal(hll_add(h, "a", 1), 1);
    assert_false(hll_cache_valid(h));
    assert_int_equal(hll_add(h, "a", 1), 0);   /* same register value: no change */
    bool wrote;
    assert_int_equal(hll_count(h, true, &wrote), 1);
    assert_true(wrote);
    assert_true(hll_cache_valid(h));
    assert_int_equal(hll_count(h, true, &wrote), 1);
    assert_false(wrote);
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    assert_memory_equal(b, "HYLL\x01\0\0\0\x01\0\0\0\0\0\0\0", 16);
    hll_free(h);
}

static void test_encoding(void **state)
{
    (void)state;
    char k[32];
    for (int n = 0; n <= 3000; n = n ? n * 3 : 1) {
        hll_t *h = hll_create();
        for (int i = 0; i < n; i++) {
            int l = snprintf(k, sizeof(k), "e%d", i);
            hll_add(h, k, (size_t)l);
        }
        wbuf_t a = WBUF_INIT, b = WBUF_INIT;
        hll_type.encode(h, &a);
        const char *why;
        hll_t *c = hll_type.decode(a.data, a.len, &why);
        if (!c)
            fail_msg("decode of %d items: %s", n, why);
        hll_type.encode(c, &b);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.data, b.data, a.len);
        assert_int_equal(hll_estimate(h), hll_estimate(c));
        for (size_t cut = 0; cut < a.len; cut += a.len > 400 ? 101 : 1) {
            hll_t *d = hll_type.decode(a.data, cut, &why);
            if (d) {   /* only a shorter sparse string can still be whole: it must work */
                hll_add(d, "x", 1);
                hll_free(d);
            }
        }
        rng_t g;
        rng_seed(&g, (uint64_t)n);
        uint8_t *m = malloc(a.len);
        for (int t = 0; t < 200; t++) {
            memcpy(m, a.data, a.len);
            m[rng_below(&g, a.len)] ^= (uint8_t)(1 + rng_below(&g, 255));
            hll_t *d = hll_type.decode(m, a.len, &why);
            if (d) {
                hll_add(d, "y", 1);
                (void)hll_estimate(d);
                hll_free(d);
            }
        }
        free(m);
        wbuf_free(&a);
        wbuf_free(&b);
        hll_free(h);
        hll_free(c);
    }
}

/* A register change that merges two VAL opcodes in a sparse string whose
 * buffer ends exactly at its last byte: a string of Redis's size limit
 * (3000 bytes), as one reaches by growth or arrives from a snapshot or a
 * RESTORE.  The merge shifts the opcodes after it down by one byte and must
 * read nothing past the string (ASan's build checks that). */
static void test_merge_at_sparse_limit(void **state)
{
    (void)state;
    /* an item whose register is followed by another, and whose value fits VAL */
    char item[32];
    unsigned index = 0;
    uint8_t count = 0;
    for (int n = 0;; n++) {
        snprintf(item, sizeof(item), "m%d", n);
        hll_hash_item(item, strlen(item), &index, &count);
        if (count >= 2 && count <= 32 && index >= 100 && index <= 13000)
            break;
    }
    /* registers [0, index): one XZERO; index: VAL(count - 1); index + 1:
     * VAL(count); then an XZERO and VALs of one register each, alternately
     * 5 and 6, to fill the string to HLL_SPARSE_MAX_BYTES exactly */
    uint8_t b[HLL_SPARSE_MAX_BYTES];
    memset(b, 0, HLL_HDR_SIZE);
    memcpy(b, "HYLL\x01", 5);
    b[15] = 0x80;   /* no cached cardinality */
    size_t at = HLL_HDR_SIZE;
    b[at++] = (uint8_t)(0x40 | (index - 1) >> 8);
    b[at++] = (uint8_t)((index - 1) & 0xff);
    size_t mid = at;
    b[at++] = (uint8_t)(0x80 | (count - 2) << 2);
    b[at++] = (uint8_t)(0x80 | (count - 1) << 2);
    size_t fill = HLL_SPARSE_MAX_BYTES - at - 2, rest = HLL_REGISTERS - index - 2 - fill;
    b[at++] = (uint8_t)(0x40 | (rest - 1) >> 8);
    b[at++] = (uint8_t)((rest - 1) & 0xff);
    for (size_t i = 0; i < fill; i++)
        b[at++] = (uint8_t)(0x80 | (i % 2 ? 5 : 4) << 2);
    assert_int_equal(at, HLL_SPARSE_MAX_BYTES);
    const char *why = NULL;
    hll_t *h = hll_from_redis(b, sizeof(b), &why);
    if (!h)
        fail_msg("hll_from_redis: %s", why);
    assert_int_equal(hll_add(h, item, strlen(item)), 1);
    /* the two registers are now one VAL(count) of length 2 */
    size_t len;
    const uint8_t *after = hll_bytes(h, &len);
    assert_true(hll_is_sparse(h));
    assert_int_equal(len, HLL_SPARSE_MAX_BYTES - 1);
    assert_int_equal(after[mid], 0x80 | (count - 1) << 2 | 1);
    assert_memory_equal(after + mid + 1, b + mid + 2, HLL_SPARSE_MAX_BYTES - mid - 2);
    hll_free(h);
}

/* The registers against a model (an array of 16384 maxima): seeded streams
 * of PFADD batches and PFMERGEs into one HLL, from empty through the sparse
 * encoding to dense; every few steps the HLL is replaced by a copy loaded
 * from its bytes (as after a restart or a RESTORE: a buffer exactly as long
 * as the string), so edits also run at a full buffer.  ASan's build checks
 * every edit's reads and writes. */
static void test_registers_against_model(void **state)
{
    (void)state;
    uint8_t *model = malloc(HLL_REGISTERS), *got = malloc(HLL_REGISTERS), *other = malloc(HLL_REGISTERS);
    for (uint64_t seed = 1; seed <= 40; seed++) {
        rng_t g;
        rng_seed(&g, seed);
        memset(model, 0, HLL_REGISTERS);
        hll_t *h = hll_create();
        int reloads = 0;
        for (int step = 0; step < 4000 && hll_is_sparse(h); step++) {
            if (rng_below(&g, 50) == 0) {
                /* PFMERGE of a few registers, some of them large */
                memset(other, 0, HLL_REGISTERS);
                for (int j = (int)rng_below(&g, 4); j >= 0; j--) {
                    unsigned i = (unsigned)rng_below(&g, HLL_REGISTERS);
                    other[i] = (uint8_t)(1 + rng_below(&g, rng_below(&g, 8) ? 6 : 51));
                    if (other[i] > model[i])
                        model[i] = other[i];
                }
                assert_int_equal(hll_merge_registers(h, other, false), CORE_OK);
            } else {
                const char *items[5];
                size_t lens[5];
                char buf[5][32];
                size_t n = 1 + rng_below(&g, 5);
                for (size_t j = 0; j < n; j++) {
                    int l = snprintf(buf[j], sizeof(buf[j]), "s%llu-%llu", (unsigned long long)seed,
                                     (unsigned long long)rng_below(&g, 1000000));
                    items[j] = buf[j];
                    lens[j] = (size_t)l;
                    unsigned index;
                    uint8_t count;
                    hll_hash_item(items[j], lens[j], &index, &count);
                    if (count > model[index])
                        model[index] = count;
                }
                assert_true(hll_add_batch(h, items, lens, n) >= 0);
            }
            if (rng_below(&g, 25) == 0) {
                size_t len;
                const uint8_t *b = hll_bytes(h, &len);
                const char *why = NULL;
                hll_t *c = hll_from_redis(b, len, &why);
                if (!c)
                    fail_msg("seed %llu step %d: its own bytes refused: %s", (unsigned long long)seed, step, why);
                hll_free(h);
                h = c;
                reloads++;
            }
        }
        memset(got, 0, HLL_REGISTERS);
        hll_max_into(h, got);
        for (unsigned i = 0; i < HLL_REGISTERS; i++)
            if (got[i] != model[i])
                fail_msg("seed %llu: register %u is %u, the model says %u", (unsigned long long)seed, i, got[i],
                         model[i]);
        assert_true(reloads > 0);
        hll_free(h);
    }
    free(model);
    free(got);
    free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_updated_and_cache),
        cmocka_unit_test(test_encoding),
        cmocka_unit_test(test_merge_at_sparse_limit),
        cmocka_unit_test(test_registers_against_model),
        cmocka_unit_test(test_error_within_theory),
    };
    return cmocka_run_group_tests_name("hll", tests, NULL, NULL);
}
