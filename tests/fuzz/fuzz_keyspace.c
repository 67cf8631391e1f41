/*
 * fuzz_keyspace.c - the keyspace driven by operations the fuzzer shapes,
 * against a model (tests/fuzz/ks_model.h says which operations and what
 * each checks): inline and separate values, expiry, eviction, snapshots
 * with writes between their slices, and the memory accounting.
 *
 * Input layout: one byte choosing the shard bits (0..3), then the
 * operations' bytes.
 */
#include <stddef.h>
#include <stdint.h>

#include "tests/fuzz/ks_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    ks_t *ks = ks_create(data[0] % 4, 0x5eed);
    if (!ks)
        return 0;
    km_run(ks, "k:", data + 1, size - 1, true, NULL);
    ks_free(ks);
    return 0;
}
