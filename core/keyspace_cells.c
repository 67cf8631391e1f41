/*
 * keyspace_cells.c - where a shard's entries live: cells of 4 KiB chunks,
 * one size class a chunk, named by 32-bit handles (keyspace_int.h).
 *
 * Why not one malloc an entry: the allocator's classes are 16 bytes apart
 * (a 10-byte counter key's 24 bytes of header, key and value took its
 * 32-byte class) and an entry's address is 8 bytes a table slot, where a
 * handle is 4.  Classes here are 8 bytes apart up to 256 bytes, then sized
 * so that a chunk holds 15 down to 3 cells with little left over; the
 * largest (1360) holds the largest entry (a 1024-byte key, a 48-byte
 * area, a vol index).  Every class above 256 and every other one up to it
 * is a multiple of 16, so a cell of those is 16-aligned (chunks are
 * 4096-aligned, their header 16 bytes): an area that needs it asks for a
 * 16-byte multiple.
 *
 * A chunk's free cells are listed through their first byte; the chunks of
 * a class with a free cell are listed (doubly, by directory index) from
 * the shard's room[class]; a chunk whose last cell is freed is given back.
 * Cells never move, so an entry's address stays valid until it is freed.
 * The directory grows by doubling; each doubling takes one more bit of a
 * table slot for the handle, one fewer for the tag, and rebuilds the
 * table (keyspace_table.c): a shard of 1M keys or fewer keeps at least
 * 16 bits of tag.
 *
 * Sanitizer builds poison free cells, so that a use of an entry after it
 * is freed or moved (ks_entry_set_expire) is caught as it would be with
 * one allocation an entry.
 */
#include "core/keyspace_int.h"

#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define CELLS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CELLS_ASAN 1
#endif
#endif
#ifdef CELLS_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define SMALL_MAX 256u
#define NSMALL ((SMALL_MAX - 16u) / 8u + 1u)   /* 16, 24, ..., 256 */

static const uint16_t big_sizes[] = { 272, 288, 304, 336, 368, 400, 448, 496, 576, 672, 816, 1008, 1360 };
_Static_assert(NSMALL + sizeof(big_sizes) / sizeof(big_sizes[0]) == NCLASS, "NCLASS counts the classes");
_Static_assert(CHUNK_SIZE - CHUNK_HDR <= 255u * 16u, "a chunk's cells are counted in a byte");
_Static_assert(sizeof(chunk_hdr_t) <= CHUNK_HDR, "a chunk's header fits before its first cell");
_Static_assert(((KS_KEY_MAX + sizeof(struct ks_entry) + 15u) & ~15u) + KS_INLINE_MAX + sizeof(uint32_t) <= 1360,
               "the largest class holds the largest entry");

static size_t class_size(unsigned cls) { return cls < NSMALL ? 16u + 8u * cls : big_sizes[cls - NSMALL]; }

/* The class of a cell of `need` bytes aligned to `align` (8 or 16); -1:
 * none that large. */
static int class_of(size_t need, size_t align)
{
    if (need < 16)
        need = 16;
    if (align == 16)
        need = (need + 15u) & ~(size_t)15u;
    if (need <= SMALL_MAX)
        return (int)((need + 7u) / 8u - 2u);
    for (unsigned i = 0; i < sizeof(big_sizes) / sizeof(big_sizes[0]); i++)
        if (need <= big_sizes[i])
            return (int)(NSMALL + i);
    return -1;
}

size_t ks_cell_class_size(size_t need, size_t align)
{
    int cls = class_of(need, align);
    return cls < 0 ? 0 : class_size((unsigned)cls);
}

static void room_link(ks_shard_t *sh, uint32_t ci)
{
    chunk_t *c = &sh->chunks[ci - 1];
    c->prev = 0;
    c->next = sh->room[c->cls];
    if (c->next)
        sh->chunks[c->next - 1].prev = ci;
    sh->room[c->cls] = ci;
}

static void room_unlink(ks_shard_t *sh, uint32_t ci)
{
    chunk_t *c = &sh->chunks[ci - 1];
    if (c->prev)
        sh->chunks[c->prev - 1].next = c->next;
    else
        sh->room[c->cls] = c->next;
    if (c->next)
        sh->chunks[c->next - 1].prev = c->prev;
    c->prev = c->next = 0;
}

/* A directory index for a new chunk (index + 1), 0 when the directory
 * cannot grow: reused, or the next one, which may take a bit of tag. */
static uint32_t index_take(ks_shard_t *sh)
{
    if (sh->free_index) {
        uint32_t ci = sh->free_index;
        sh->free_index = sh->chunks[ci - 1].next;
        return ci;
    }
    if (sh->nchunks == sh->chunks_cap) {
        if (sh->chunks_cap >= (1u << (32 - CELL_BITS)))
            return 0;
        uint32_t nc = sh->chunks_cap ? sh->chunks_cap * 2 : 1;
        chunk_t *d = realloc(sh->chunks, (size_t)nc * sizeof(*d));
        if (!d)
            return 0;
        sh->chunks = d;
        sh->chunks_cap = nc;
    }
    if ((uint64_t)sh->nchunks >= (uint64_t)1 << (sh->hbits - CELL_BITS) && !ks_table_rebuild(sh, sh->nslots, sh->tbits - 1))
        return 0;   /* the handles need one more bit: the tags give one up */
    return ++sh->nchunks;
}

static void index_give(ks_shard_t *sh, uint32_t ci)
{
    sh->chunks[ci - 1].mem = NULL;
    sh->chunks[ci - 1].next = sh->free_index;
    sh->free_index = ci;
}

static uint32_t chunk_new(ks_shard_t *sh, unsigned cls)
{
    uint32_t ci = index_take(sh);
    if (!ci)
        return 0;
    unsigned char *mem = aligned_alloc(CHUNK_SIZE, CHUNK_SIZE);
    if (!mem) {
        index_give(sh, ci);
        return 0;
    }
    size_t size = class_size(cls);
    chunk_hdr_t *h = (chunk_hdr_t *)(void *)mem;
    memset(h, 0, CHUNK_HDR);
    h->index = ci - 1;
    h->size = (uint16_t)size;
    h->cls = (uint8_t)cls;
    POISON(mem + CHUNK_HDR, CHUNK_SIZE - CHUNK_HDR);
    chunk_t *c = &sh->chunks[ci - 1];
    *c = (chunk_t){ .mem = mem, .size = (uint16_t)size, .cls = (uint8_t)cls,
                    .ncells = (uint8_t)((CHUNK_SIZE - CHUNK_HDR) / size) };
    room_link(sh, ci);
    return ci;
}

ks_entry_t *ks_cell_alloc(ks_shard_t *sh, size_t need, size_t align)
{
    int cls = class_of(need, align);
    if (cls < 0)
        return NULL;
    uint32_t ci = sh->room[cls];
    if (!ci && !(ci = chunk_new(sh, (unsigned)cls)))
        return NULL;
    chunk_t *c = &sh->chunks[ci - 1];
    unsigned i;
    unsigned char *cell;
    if (c->free) {
        i = c->free - 1u;
        cell = c->mem + CHUNK_HDR + (size_t)i * c->size;
        c->free = cell[0];   /* the first byte of a free cell is left readable */
    } else {
        i = c->bump++;
        cell = c->mem + CHUNK_HDR + (size_t)i * c->size;
    }
    UNPOISON(cell, c->size);
    if (++c->nlive == c->ncells)
        room_unlink(sh, ci);
    return (ks_entry_t *)(void *)cell;
}

void ks_cell_free(ks_shard_t *sh, ks_entry_t *e)
{
    uint32_t ci = chunk_of(e)->index + 1;
    chunk_t *c = &sh->chunks[ci - 1];
    unsigned char *cell = (unsigned char *)e;
    bool was_full = c->nlive == c->ncells;
    cell[0] = c->free;
    c->free = (uint8_t)((size_t)(cell - c->mem - CHUNK_HDR) / c->size + 1);
    POISON(cell + 1, c->size - 1u);
    if (--c->nlive == 0) {
        if (!was_full)
            room_unlink(sh, ci);
        free(c->mem);
        index_give(sh, ci);
    } else if (was_full) {
        room_link(sh, ci);
    }
}

void ks_cells_destroy(ks_shard_t *sh)
{
    for (uint32_t i = 0; i < sh->nchunks; i++)
        free(sh->chunks[i].mem);
    free(sh->chunks);
    sh->chunks = NULL;
    sh->nchunks = sh->chunks_cap = sh->free_index = 0;
    memset(sh->room, 0, sizeof(sh->room));
}
