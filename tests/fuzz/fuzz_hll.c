/*
 * fuzz_hll.c - the HyperLogLog's sparse edits (Redis's hllSparseSet, ported)
 * on strings the fuzzer shapes, against a model of the registers.
 *
 * Input layout: u16 (little-endian): OLEN in its low 15 bits and, in its
 * top bit, FILL; then OLEN bytes taken as sparse opcodes (ZERO 00xxxxxx,
 * XZERO 01xxxxxx xxxxxxxx, VAL 1vvvvvll), the last run cut and the rest
 * padded with zeros so that they cover the 16384 registers exactly - with
 * FILL, registers of value 5 and 6 before the last zeros make the string
 * exactly HLL_SPARSE_MAX_BYTES long where the registers left allow it; then
 * changes of 3 bytes each: u16 register (mod 16384) and its new value
 * (mod 52; 0 changes nothing).
 *
 * The string is loaded with hll_from_redis, which keeps it in a buffer
 * exactly as long as it is (as after a restart or a RESTORE), so the edits
 * also run at a full buffer, and at Redis's 3000-byte sparse limit when the
 * input is that long.  Each change goes through hll_merge_registers (one
 * register: PFMERGE's path to sparse_set, and dense_set after a promotion).
 * Afterwards the registers must equal the model, the estimate the model's,
 * and the bytes must load again.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hll.h"

#define MAX_CHANGES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Appends an XZERO opcode of `run` zeros (1..16384). */
static size_t put_xzero(uint8_t *out, size_t at, size_t run)
{
    out[at++] = (uint8_t)(0x40 | (run - 1) >> 8);
    out[at++] = (uint8_t)((run - 1) & 0xff);
    return at;
}

/* Appends the opcode(s) of a run of `len` zeros (len >= 1). */
static size_t put_zeros(uint8_t *out, size_t at, size_t len)
{
    while (len > 0) {
        size_t run = len > HLL_REGISTERS ? HLL_REGISTERS : len;
        if (run <= 64)
            out[at++] = (uint8_t)(run - 1);
        else
            at = put_xzero(out, at, run);
        len -= run;
    }
    return at;
}

/* Builds a valid sparse string from raw opcode bytes into out (header
 * included; room for HLL_SPARSE_MAX_BYTES with fill); returns its length. */
static size_t build(const uint8_t *op, size_t n, bool fill, uint8_t *out)
{
    memset(out, 0, HLL_HDR_SIZE);
    memcpy(out, "HYLL\x01", 5);
    out[15] = 0x80;   /* no cached cardinality */
    size_t at = HLL_HDR_SIZE, covered = 0, i = 0;
    while (i < n && covered < HLL_REGISTERS) {
        size_t left = HLL_REGISTERS - covered;
        uint8_t b = op[i];
        if ((b & 0xc0) == 0x00) {
            size_t run = (size_t)(b & 0x3f) + 1;
            at = put_zeros(out, at, run < left ? run : left);
            covered += run < left ? run : left;
            i++;
        } else if ((b & 0xc0) == 0x40) {
            if (i + 1 >= n)
                break;
            size_t run = ((size_t)(b & 0x3f) << 8 | op[i + 1]) + 1;
            if (run > left)
                run = left;
            at = put_xzero(out, at, run);
            covered += run;
            i += 2;
        } else {
            size_t run = (size_t)(b & 3) + 1;
            if (run > left)
                run = left;
            out[at++] = (uint8_t)((b & 0xfc) | (run - 1));
            covered += run;
            i++;
        }
    }
    if (fill && at + 2 < HLL_SPARSE_MAX_BYTES && covered < HLL_REGISTERS) {
        /* one register per byte, then one XZERO (of any length, as the
         * format allows) for the rest */
        size_t left = HLL_REGISTERS - covered, k = HLL_SPARSE_MAX_BYTES - 2 - at;
        if (k > left - 1)
            k = left - 1;
        for (size_t j = 0; j < k; j++)
            out[at++] = (uint8_t)(0x80 | (j % 2 ? 5 : 4) << 2);
        at = put_xzero(out, at, left - k);
        covered = HLL_REGISTERS;
    }
    if (covered < HLL_REGISTERS)
        at = put_zeros(out, at, HLL_REGISTERS - covered);
    return at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t olen = (size_t)data[0] | (size_t)(data[1] & 0x7f) << 8;
    bool fill = data[1] & 0x80;
    if (olen > size - 2)
        olen = size - 2;
    /* each raw byte yields at most 2 bytes, and the padding at most 4 (or
     * up to HLL_SPARSE_MAX_BYTES with fill) */
    uint8_t *s = malloc(HLL_HDR_SIZE + 2 * olen + 4 + HLL_SPARSE_MAX_BYTES);
    uint8_t *model = calloc(1, HLL_REGISTERS), *got = calloc(1, HLL_REGISTERS), *one = calloc(1, HLL_REGISTERS);
    if (!s || !model || !got || !one)
        abort();
    size_t len = build(data + 2, olen, fill, s);
    const char *why = NULL;
    hll_t *h = hll_from_redis(s, len, &why);
    if (!h)
        abort();   /* build() makes valid strings only */
    hll_max_into(h, model);
    const uint8_t *c = data + 2 + olen;
    size_t nc = (size - 2 - olen) / 3;
    for (size_t k = 0; k < nc && k < MAX_CHANGES; k++, c += 3) {
        unsigned idx = ((unsigned)c[0] | (unsigned)c[1] << 8) % HLL_REGISTERS;
        uint8_t v = (uint8_t)(c[2] % 52);
        if (v == 0)
            continue;
        one[idx] = v;
        if (hll_merge_registers(h, one, false) != CORE_OK)
            abort();
        one[idx] = 0;
        if (v > model[idx])
            model[idx] = v;
    }
    hll_max_into(h, got);
    if (memcmp(got, model, HLL_REGISTERS) != 0)
        abort();
    if (hll_estimate(h) != hll_count_registers(model))
        abort();
    size_t blen;
    const uint8_t *b = hll_bytes(h, &blen);
    hll_t *again = hll_from_redis(b, blen, &why);
    if (!again)
        abort();   /* its own bytes must load */
    hll_free(again);
    hll_free(h);
    free(s);
    free(model);
    free(got);
    free(one);
    return 0;
}
