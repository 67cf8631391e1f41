/*
 * fuzz_gorilla.c - the Gorilla decoder on hostile streams.  Input layout:
 * u32 count (little-endian, taken mod 4096 + 1), i64 first_ts, then the
 * stream (its length in bits is the rest's, minus the low 3 bits of the
 * first byte of it).  Whatever decodes must re-encode into a stream that
 * decodes to the very same samples and encoder state.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/gorilla.h"

#define MAX_COUNT 4096
#define MAX_TS (((int64_t)1 << 62) - 1)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 13 || size > 1 << 16)
        return 0;
    uint32_t count;
    int64_t first;
    memcpy(&count, data, 4);
    memcpy(&first, data + 4, 8);
    count = count % MAX_COUNT + 1;
    const uint8_t *d = data + 12;
    size_t n = size - 12;
    uint32_t nbits = (uint32_t)(n * 8 - (d[0] & 7));
    int64_t *t = malloc(count * sizeof(*t)), *t2 = malloc(count * sizeof(*t2));
    double *v = malloc(count * sizeof(*v)), *v2 = malloc(count * sizeof(*v2));
    uint8_t *out = calloc(1, ((size_t)count * GORILLA_SAMPLE_MAX_BITS + 7) / 8 + 8);
    if (!t || !t2 || !v || !v2 || !out)
        abort();
    gorilla_enc_t end;
    if (gorilla_decode(d, nbits, count, first, MAX_TS, t, v, &end)) {
        gorilla_enc_t e = gorilla_empty(), back;
        for (uint32_t i = 0; i < count; i++)
            gorilla_put(&e, out, t[i], v[i]);
        if (!gorilla_decode(out, e.nbits, count, first, MAX_TS, t2, v2, &back))
            abort();
        if (memcmp(t, t2, count * sizeof(*t)) != 0 || memcmp(v, v2, count * sizeof(*v)) != 0)
            abort();
        if (back.last_ts != end.last_ts || back.prev_bits != end.prev_bits || back.prev_delta != end.prev_delta)
            abort();
    }
    free(t);
    free(t2);
    free(v);
    free(v2);
    free(out);
    return 0;
}
