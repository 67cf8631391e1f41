/* fuzz_keydump.c - PUT /keys/{key}/restore's decoder (keydump_decode: the
 * bytes come from a client).  Each input is decoded twice: as given (the
 * checksum must refuse almost all damage) and with its trailer replaced by
 * the right checksum, so that the fuzzer reaches the frame checks and every
 * type's value decoder.  Whatever decodes must dump again into bytes that
 * decode to the same dump. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/keydump.h"

static void check(const uint8_t *p, size_t len)
{
    const ks_type_t *t;
    void *v;
    int64_t ttl;
    const char *why;
    if (!keydump_decode(p, len, &t, &v, &ttl, &why))
        return;
    wbuf_t a = WBUF_INIT, b = WBUF_INIT;
    keydump_encode(t, v, ttl, &a);
    const ks_type_t *t2;
    void *v2 = NULL;
    int64_t ttl2;
    if (!a.oom) {
        if (!keydump_decode(a.data, a.len, &t2, &v2, &ttl2, &why) || t2 != t || ttl2 != ttl)
            abort();   /* our own dump must decode to the same thing */
        keydump_encode(t2, v2, ttl2, &b);
        if (!b.oom && (a.len != b.len || memcmp(a.data, b.data, a.len) != 0))
            abort();
        t2->free(v2);
    }
    t->free(v);
    wbuf_free(&a);
    wbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size);
    if (size < KEYDUMP_TRAILER_SIZE)
        return 0;
    uint8_t *copy = malloc(size);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    le64_store(copy + size - KEYDUMP_TRAILER_SIZE, XXH64(copy, size - KEYDUMP_TRAILER_SIZE, 0));
    check(copy, size);
    free(copy);
    return 0;
}
