/* fuzz_snapshot.c - the snapshot reader (snapfmt_scan, shared with start-up
 * and `tallyd --check`), and every type's
 * _decode on whatever bytes a record claims to hold.  Decoded values are
 * re-encoded and decoded again, which must give identical bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/persist_fmt.h"
#include "core/types.h"

static void roundtrip(const ks_type_t *t, void *v)
{
    wbuf_t a = WBUF_INIT, b = WBUF_INIT;
    t->encode(v, &a);
    const char *why;
    void *v2 = a.oom ? NULL : t->decode(a.data, a.len, &why);
    if (v2) {
        t->encode(v2, &b);
        if (!b.oom && (a.len != b.len || memcmp(a.data, b.data, a.len) != 0))
            abort();   /* encode(decode(encode(x))) must be stable */
        t->free(v2);
    } else if (!a.oom) {
        abort();       /* our own encoding must decode */
    }
    wbuf_free(&a);
    wbuf_free(&b);
}

static const char *decode_record(void *ud, size_t off, const snap_record_t *r)
{
    (void)ud;
    (void)off;
    const ks_type_t *t = ks_type_by_tag(r->tag);
    if (!t)
        return "unknown type tag";
    const char *why = NULL;
    void *v = t->decode(r->value, r->vlen, &why);
    if (!v)
        return why ? why : "value does not decode";
    t->free(v);
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Every type's decoder directly: first byte picks the tag. */
    if (size > 0) {
        const ks_type_t *t = ks_type_by_tag(data[0] % (TYPE_TAG_MAX + 1));
        if (t) {
            const char *why;
            void *v = t->decode(data + 1, size - 1, &why);
            if (v) {
                roundtrip(t, v);
                t->free(v);
            }
        }
    }
    /* The file layout, through the reader start-up and --check use. */
    snap_scan_t sc;
    if (!snapfmt_scan(data, size, decode_record, NULL, &sc) && (sc.bad_off > size || !sc.why))
        abort();   /* damage is always located inside the file and named */
    return 0;
}
