/*
 * roaring_fence.c - the one file that reads CRoaring's internals.
 *
 * Two things are much cheaper with the containers in view: the heap bytes
 * of a bitmap (memory accounting after every change) and the cardinality
 * of a union of many bitmaps (GET /activity/{key}/count over a window),
 * which is counted chunk by chunk without building the union.  The layout
 * read here is CRoaring 0.2.x's (Debian 12's libroaring-dev), whose
 * roaring.h still exposes the container structs.  A CRoaring whose public
 * header does not define the container type codes gets the fallback below,
 * written with the public API only (same answers; slower, and the memory
 * figure is the serialized size), so a library upgrade cannot break the
 * build.  Defining TALLY_ROARING_PUBLIC_API selects the fallback anyway
 * (tests/unit/test_roaring_fence.c checks it against the internal path).
 */
#include "core/roaring_fence.h"

#include <stdlib.h>
#include <string.h>

#include "core/bits.h"

#if defined(BITSET_CONTAINER_TYPE_CODE) && !defined(TALLY_ROARING_PUBLIC_API)

#define ROARING_CHUNK_IDS 65536    /* ids per Roaring container */
#define ROARING_BITSET_BYTES 8192  /* a bitset container: 65536 bits */

/* ------------------------------------------------------------------------ */
/* Bitmap memory                                                            */
/* ------------------------------------------------------------------------ */

/* Heap bytes of a bitmap from its containers' capacities (CRoaring 0.2.x
 * layout, whose headers we compile against), and the bytes it would need
 * with no spare capacity. */
void rfence_measure(const roaring_bitmap_t *r, size_t *alloc, size_t *used)
{
    const roaring_array_t *ra = &r->high_low_container;
    size_t per = sizeof(void *) + sizeof(uint16_t) + sizeof(uint8_t);
    size_t a = sizeof(*r) + (size_t)ra->allocation_size * per;
    size_t u = sizeof(*r) + (size_t)ra->size * per;
    for (int32_t i = 0; i < ra->size; i++) {
        const void *c = ra->containers[i];
        switch (ra->typecodes[i]) {
        case BITSET_CONTAINER_TYPE_CODE:
            a += sizeof(bitset_container_t) + ROARING_BITSET_BYTES;
            u += sizeof(bitset_container_t) + ROARING_BITSET_BYTES;
            break;
        case ARRAY_CONTAINER_TYPE_CODE: {
            const array_container_t *ac = c;
            a += sizeof(*ac) + (size_t)ac->capacity * sizeof(uint16_t);
            u += sizeof(*ac) + (size_t)ac->cardinality * sizeof(uint16_t);
            break;
        }
        case RUN_CONTAINER_TYPE_CODE: {
            const run_container_t *rc = c;
            a += sizeof(*rc) + (size_t)rc->capacity * sizeof(rle16_t);
            u += sizeof(*rc) + (size_t)rc->n_runs * sizeof(rle16_t);
            break;
        }
        default:   /* shared containers exist only with copy-on-write, never enabled here */
            break;
        }
    }
    *alloc = a;
    *used = u;
}

/* ------------------------------------------------------------------------ */
/* Union cardinality                                                        */
/* ------------------------------------------------------------------------ */

/* Cardinality of one container. */
static uint64_t container_card(const void *c, uint8_t type)
{
    switch (type) {
    case BITSET_CONTAINER_TYPE_CODE: {
        const bitset_container_t *b = c;
        return b->cardinality >= 0 ? (uint64_t)b->cardinality
                                   : bits_popcount((const uint8_t *)b->array, ROARING_BITSET_BYTES);
    }
    case ARRAY_CONTAINER_TYPE_CODE:
        return (uint64_t)((const array_container_t *)c)->cardinality;
    case RUN_CONTAINER_TYPE_CODE: {
        const run_container_t *r = c;
        uint64_t n = 0;
        for (int32_t i = 0; i < r->n_runs; i++)
            n += (uint64_t)r->runs[i].length + 1;
        return n;
    }
    default:
        return 0;
    }
}

/* Sets bits [a, b] of a 65536-bit scratch bitset. */
static void scratch_set_range(uint64_t *w, uint32_t a, uint32_t b)
{
    uint32_t wa = a >> 6, wb = b >> 6;
    uint64_t first = UINT64_MAX << (a & 63), last = UINT64_MAX >> (63 - (b & 63));
    if (wa == wb) {
        w[wa] |= first & last;
        return;
    }
    w[wa] |= first;
    for (uint32_t i = wa + 1; i < wb; i++)
        w[i] = UINT64_MAX;
    w[wb] |= last;
}

/* w |= b over one bitset container's 1024 words (restrict and a fixed
 * count let the compiler vectorise it; an AVX2 copy is chosen at run time). */
static void or_words_generic(uint64_t *restrict w, const uint64_t *restrict b)
{
    for (size_t i = 0; i < ROARING_BITSET_BYTES / 8; i++)
        w[i] |= b[i];
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void or_words_avx2(uint64_t *restrict w, const uint64_t *restrict b)
{
    for (size_t i = 0; i < ROARING_BITSET_BYTES / 8; i++)
        w[i] |= b[i];
}
#endif

static void or_words(uint64_t *restrict w, const uint64_t *restrict b)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) {
        or_words_avx2(w, b);
        return;
    }
#endif
    or_words_generic(w, b);
}

/* ORs a container into the scratch bitset; true when it is full (all 65536
 * ids), which settles the chunk. */
static bool scratch_or(uint64_t *w, const void *c, uint8_t type)
{
    switch (type) {
    case BITSET_CONTAINER_TYPE_CODE: {
        const bitset_container_t *b = c;
        if (b->cardinality == ROARING_CHUNK_IDS)
            return true;
        or_words(w, b->array);
        return false;
    }
    case ARRAY_CONTAINER_TYPE_CODE: {
        const array_container_t *a = c;
        for (int32_t i = 0; i < a->cardinality; i++)
            w[a->array[i] >> 6] |= (uint64_t)1 << (a->array[i] & 63);
        return false;
    }
    case RUN_CONTAINER_TYPE_CODE: {
        const run_container_t *r = c;
        for (int32_t i = 0; i < r->n_runs; i++) {
            if (r->runs[i].length == ROARING_CHUNK_IDS - 1)
                return true;
            scratch_set_range(w, r->runs[i].value, (uint32_t)r->runs[i].value + r->runs[i].length);
        }
        return false;
    }
    default:
        return false;
    }
}

/* Distinct ids over n bitmaps without building their union: chunk by chunk
 * (16-bit key), a chunk held by one bitmap counts its container's cached
 * cardinality; otherwise the containers are OR'd into one 8 KiB scratch
 * bitset, counted with the POPCNT instruction (a full container settles the
 * chunk at once). */
bool rfence_union_count(const roaring_bitmap_t *const *v, size_t n, uint64_t *out)
{
    *out = 0;
    int32_t *pos = calloc(n, sizeof(*pos));
    const void **cs = malloc(n * sizeof(*cs));
    uint8_t *ts = malloc(n);
    uint64_t *w = malloc(ROARING_BITSET_BYTES);
    bool ok = pos && cs && ts && w;
    uint64_t total = 0;
    while (ok) {
        int32_t key = -1;
        for (size_t i = 0; i < n; i++) {
            const roaring_array_t *ra = &v[i]->high_low_container;
            if (pos[i] < ra->size && (key < 0 || ra->keys[pos[i]] < key))
                key = ra->keys[pos[i]];
        }
        if (key < 0)
            break;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            const roaring_array_t *ra = &v[i]->high_low_container;
            if (pos[i] < ra->size && ra->keys[pos[i]] == key) {
                cs[m] = ra->containers[pos[i]];
                ts[m++] = ra->typecodes[pos[i]];
                pos[i]++;
            }
        }
        if (m == 1) {
            total += container_card(cs[0], ts[0]);
            continue;
        }
        memset(w, 0, ROARING_BITSET_BYTES);
        bool full = false;
        for (size_t i = 0; i < m && !full; i++)
            full = scratch_or(w, cs[i], ts[i]);
        total += full ? ROARING_CHUNK_IDS : bits_popcount((const uint8_t *)w, ROARING_BITSET_BYTES);
    }
    free(pos);
    free(cs);
    free(ts);
    free(w);
    *out = total;
    return ok;
}

#else /* the public API only */

void rfence_measure(const roaring_bitmap_t *r, size_t *alloc, size_t *used)
{
    *alloc = *used = sizeof(*r) + roaring_bitmap_size_in_bytes(r);
}

bool rfence_union_count(const roaring_bitmap_t *const *v, size_t n, uint64_t *out)
{
    *out = 0;
    if (n == 0)
        return true;
    roaring_bitmap_t *u = roaring_bitmap_or_many(n, (const roaring_bitmap_t **)v);
    if (!u)
        return false;
    *out = roaring_bitmap_get_cardinality(u);
    roaring_bitmap_free(u);
    return true;
}

#endif
