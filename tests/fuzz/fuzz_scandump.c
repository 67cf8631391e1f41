/* fuzz_scandump.c - the SCANDUMP / LOADCHUNK importers of Bloom and Cuckoo
 * (BF.LOADCHUNK's and CF.LOADCHUNK's bytes are untrusted: they come from a
 * client, or from another server's dump).
 *
 * Input layout:
 *
 *   u16 header length (top bit set: Cuckoo) | header chunk |
 *   { u32 cursor | u16 length | bytes }...
 *
 * The header goes to the type's load_header (the value capped at 16 MiB),
 * each following piece to its load_chunk.  The size header_bytes announces
 * before anything is built must be the loaded value's (0 for a header that
 * is refused, over the cap for one refused for its size).  Whatever loads
 * must then answer lookups and adds without fault, never grow past the cap
 * by adds, and dump itself back into a value with identical bytes: header,
 * then every data chunk at the cursor SCANDUMP names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bloom.h"
#include "core/codec.h"
#include "core/cuckoo.h"

#define FUZZ_MAX_BYTES (16u << 20)
#define FUZZ_CUCKOO 0x8000u

/* One structure's dump interface (core's), with its add and lookup. */
typedef struct dump_ops {
    const ks_dump_ops_t *dump;
    bool (*add)(void *v, const void *item, size_t len);   /* true: added */
    bool (*check)(const void *v, const void *item, size_t len);
} dump_ops_t;

static bool bf_add(void *v, const void *item, size_t len)
{
    return bloom_add(v, item, len, FUZZ_MAX_BYTES, NULL) == BLOOM_ADDED;
}
static bool bf_check(const void *v, const void *item, size_t len) { return bloom_check(v, item, len); }

/* Adds unless the next sub-filter would pass FUZZ_MAX_BYTES. */
static bool cf_add(void *v, const void *item, size_t len)
{
    return cuckoo_add_within(v, item, len, false, FUZZ_MAX_BYTES, NULL) == CUCKOO_ADDED;
}
static bool cf_check(const void *v, const void *item, size_t len) { return cuckoo_check(v, item, len); }

static const dump_ops_t bloom_ops = { &bloom_dump_ops, bf_add, bf_check };
static const dump_ops_t cuckoo_ops = { &cuckoo_dump_ops, cf_add, cf_check };

/* Dumps v through SCANDUMP's cursors and loads the pieces into a new value,
 * whose encoding must equal v's. */
static void roundtrip(const dump_ops_t *o, const void *v)
{
    wbuf_t hdr = WBUF_INIT, a = WBUF_INIT, c = WBUF_INIT;
    bool nomem = false;
    const char *why;
    void *copy =
        o->dump->header(v, &hdr) && !hdr.oom ? o->dump->load_header(hdr.data, hdr.len, 0, &nomem, &why) : NULL;
    if (!copy) {
        if (!hdr.oom && !nomem)
            abort();   /* our own header must load */
        wbuf_free(&hdr);
        return;
    }
    int64_t cursor = 1;
    for (;;) {
        size_t len;
        const uint8_t *p = o->dump->chunk(v, &cursor, 4096, &len);
        if (!p)
            break;
        if (!o->dump->load_chunk(copy, cursor, p, len, &why))
            abort();   /* our own chunks must load where they came from */
    }
    o->dump->type->encode(v, &a);
    o->dump->type->encode(copy, &c);
    if (!a.oom && !c.oom && (a.len != c.len || memcmp(a.data, c.data, a.len) != 0))
        abort();
    wbuf_free(&hdr);
    wbuf_free(&a);
    wbuf_free(&c);
    o->dump->type->free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rbuf_t r = rbuf_make(data, size);
    uint16_t hlen = rbuf_u16(&r);
    const dump_ops_t *o = hlen & FUZZ_CUCKOO ? &cuckoo_ops : &bloom_ops;
    hlen &= (uint16_t)~FUZZ_CUCKOO;
    const uint8_t *hdr = rbuf_bytes(&r, hlen);
    if (!hdr)
        return 0;
    bool nomem;
    const char *why;
    uint64_t announced = o->dump->header_bytes(hdr, hlen);
    void *v = o->dump->load_header(hdr, hlen, FUZZ_MAX_BYTES, &nomem, &why);
    if (!v) {
        if (!nomem && announced && announced <= FUZZ_MAX_BYTES)
            abort();   /* refused, though its size was announced within the cap */
        return 0;
    }
    if (announced != o->dump->type->size(v))
        abort();   /* the size asked for before building must be the size built */
    for (;;) {
        uint32_t cursor = rbuf_u32(&r);
        uint16_t len = rbuf_u16(&r);
        const uint8_t *p = rbuf_bytes(&r, len);
        if (r.err)
            break;
        o->dump->load_chunk(v, cursor, p, len, &why);
    }
    roundtrip(o, v);
    char item[2] = { 0, 0 };
    for (int i = 0; i < 64; i++) {
        item[0] = (char)i;
        o->check(v, item, 2);
        size_t before = o->dump->type->size(v);
        if (o->add(v, item, 2) && !o->check(v, item, 2))
            abort();   /* no false negatives */
        size_t after = o->dump->type->size(v);
        if (after > before && after > FUZZ_MAX_BYTES)
            abort();   /* grown past the cap it was given */
    }
    roundtrip(o, v);
    o->dump->type->free(v);
    return 0;
}
