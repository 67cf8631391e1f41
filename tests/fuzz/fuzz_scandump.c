/* fuzz_scandump.c - the SCANDUMP / LOADCHUNK importer (BF.LOADCHUNK's bytes
 * are untrusted: they come from a client, or from another server's dump).
 *
 * Input layout:
 *
 *   u16 header length | header chunk | { u32 cursor | u16 length | bytes }...
 *
 * The header goes to bloom_load_header (bit arrays capped at 16 MiB), each
 * following piece to bloom_load_chunk.  Whatever loads must then answer
 * lookups and adds without fault, and dump itself back into a filter with
 * identical bytes: header, then every data chunk at the cursor SCANDUMP
 * names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bloom.h"
#include "core/codec.h"

#define FUZZ_MAX_BYTES (16u << 20)

/* Dumps b through SCANDUMP's cursors and loads the pieces into a new filter,
 * whose encoding must equal b's. */
static void roundtrip(const bloom_t *b)
{
    wbuf_t hdr = WBUF_INIT, a = WBUF_INIT, c = WBUF_INIT;
    bloom_dump_header(b, &hdr);
    bool nomem;
    const char *why;
    bloom_t *copy = hdr.oom ? NULL : bloom_load_header(hdr.data, hdr.len, 0, &nomem, &why);
    if (!copy) {
        if (!hdr.oom && !nomem)
            abort();   /* our own header must load */
        wbuf_free(&hdr);
        return;
    }
    int64_t cursor = 1;
    for (;;) {
        size_t len;
        const uint8_t *p = bloom_dump_chunk(b, &cursor, 4096, &len);
        if (!p)
            break;
        if (!bloom_load_chunk(copy, cursor, p, len, &why))
            abort();   /* our own chunks must load where they came from */
    }
    bloom_type.encode(b, &a);
    bloom_type.encode(copy, &c);
    if (!a.oom && !c.oom && (a.len != c.len || memcmp(a.data, c.data, a.len) != 0))
        abort();
    wbuf_free(&hdr);
    wbuf_free(&a);
    wbuf_free(&c);
    bloom_free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rbuf_t r = rbuf_make(data, size);
    uint16_t hlen = rbuf_u16(&r);
    const uint8_t *hdr = rbuf_bytes(&r, hlen);
    if (!hdr)
        return 0;
    bool nomem;
    const char *why;
    bloom_t *b = bloom_load_header(hdr, hlen, FUZZ_MAX_BYTES, &nomem, &why);
    if (!b)
        return 0;
    for (;;) {
        uint32_t cursor = rbuf_u32(&r);
        uint16_t len = rbuf_u16(&r);
        const uint8_t *p = rbuf_bytes(&r, len);
        if (r.err)
            break;
        bloom_load_chunk(b, cursor, p, len, &why);
    }
    roundtrip(b);
    char item[2] = { 0, 0 };
    for (int i = 0; i < 64; i++) {
        item[0] = (char)i;
        bloom_check(b, item, 2);
        if (bloom_add(b, item, 2, FUZZ_MAX_BYTES, NULL) == BLOOM_ADDED && !bloom_check(b, item, 2))
            abort();   /* no false negatives */
    }
    roundtrip(b);
    bloom_free(b);
    return 0;
}
