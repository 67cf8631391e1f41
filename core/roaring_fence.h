/*
 * roaring_fence.h - what core needs from CRoaring beyond its public API,
 * behind one small file (core/roaring_fence.c) with a public-API fallback.
 */
#ifndef TALLY_ROARING_FENCE_H
#define TALLY_ROARING_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roaring/roaring.h>

/* Heap bytes of r: as allocated (*alloc) and as it would be with no spare
 * capacity (*used). */
void rfence_measure(const roaring_bitmap_t *r, size_t *alloc, size_t *used);
/* The cardinality of the union of v[0..n) without building it; false on
 * allocation failure. */
bool rfence_union_count(const roaring_bitmap_t *const *v, size_t n, uint64_t *out);

#endif
