/*
 * keyspace_table.c - a shard's open-addressing table of tagged handles and
 * its vol array of the entries with an expiry: growing and shrinking both,
 * removing from both.  The layouts are described in keyspace.c's opening
 * comment and keyspace_int.h; lookups and insertion are inline there or in
 * keyspace.c, with their callers.
 */
#include "core/keyspace_int.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Tables from TABLE_MAP_MIN bytes on are mapped pages of their own rather
 * than allocations: jemalloc adds a page to each allocation from 16 KiB on
 * (to vary where it starts in its page), 4 KiB more a shard's table of
 * 20 KiB (1M keys over 256 shards: a byte a key), and keeps the pages of
 * the tables a growing shard frees until they decay; an unmapped table's
 * pages go back at once.  Both start zeroed. */
uint32_t *ks_table_alloc(size_t nslots)
{
    size_t bytes = nslots * sizeof(uint32_t);
    if (bytes < TABLE_MAP_MIN)
        return calloc(nslots, sizeof(uint32_t));
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ks_table_free(uint32_t *t, size_t nslots)
{
    size_t bytes = nslots * sizeof(uint32_t);
    if (bytes < TABLE_MAP_MIN)
        free(t);
    else if (t)
        munmap(t, bytes);
}

/* Moves the table to one of nslots slots whose slots keep tbits bits of
 * tag (at most the shard's current tbits: a tag loses its low bits). */
bool ks_table_rebuild(ks_shard_t *sh, size_t nslots, unsigned tbits)
{
    if (nslots > UINT32_MAX)
        return false;   /* homes come from 32 bits of hash */
    assert(tbits <= sh->tbits);
    uint32_t *t = ks_table_alloc(nslots);
    if (!t)
        return false;   /* keep the old table: fuller, still correct */
    unsigned hbits = 32 - tbits, drop = sh->tbits - tbits;
    bool tag_home = nslots <= ((uint64_t)1 << tbits);
    for (size_t i = 0; i < sh->nslots; i++) {
        uint32_t s = sh->slots[i];
        if (!s)
            continue;
        uint32_t h = slot_handle(sh, s), tag = tbits ? slot_tag(sh, s) >> drop : 0;
        size_t home = tag_home ? (size_t)(((uint64_t)tag * nslots) >> tbits)
                               : (size_t)(((entry_hash(sh->seed, cell_at(sh, h)) >> 32) * nslots) >> 32);
        slot_insert(t, nslots, slot_make(h, tag, hbits), home);
    }
    ks_table_free(sh->slots, sh->nslots);
    sh->slots = t;
    sh->nslots = nslots;
    sh->hbits = hbits;
    sh->tbits = tbits;
    return true;
}

bool ks_table_resize(ks_shard_t *sh, size_t nslots) { return ks_table_rebuild(sh, nslots, sh->tbits); }

/* Empties slot i, moving back the entries of its run that may move
 * (linear probing's deletion: no tombstones). */
void ks_slots_delete(ks_shard_t *sh, size_t i)
{
    uint32_t *slots = sh->slots;
    size_t n = sh->nslots, j = i;
    for (;;) {
        j = slot_next(j, n);
        if (!slots[j])
            break;
        size_t k = slot_home(sh, slots[j], n);
        /* the entry at j stays when its home is cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        slots[i] = slots[j];
        i = j;
    }
    slots[i] = 0;
}

/* Makes room for one more entry in the vol array. */
bool ks_vol_reserve(ks_shard_t *sh)
{
    if (sh->nvol < sh->vol_cap)
        return true;
    if (sh->nvol >= UINT32_MAX - 1)
        return false;   /* the entry's index is 32 bits (index + 1) */
    if (sh->nvblk == sh->vblk_cap && (sh->nvblk == 0 || sh->vol_cap >= VOL_BLOCK)) {
        size_t nc = sh->vblk_cap ? sh->vblk_cap * 2 : 1;
        vol_slot_t **d = realloc(sh->vblk, nc * sizeof(*d));
        if (!d)
            return false;
        sh->vblk = d;
        sh->vblk_cap = nc;
    }
    if (sh->vol_cap < VOL_BLOCK) {
        size_t nc = sh->vol_cap ? sh->vol_cap * 2 : VOL_MIN;
        vol_slot_t *p = realloc(sh->nvblk ? sh->vblk[0] : NULL, nc * sizeof(*p));
        if (!p)
            return false;
        sh->vblk[0] = p;
        sh->nvblk = 1;
        sh->vol_cap = nc;
        return true;
    }
    vol_slot_t *p = malloc(VOL_BLOCK * sizeof(*p));
    if (!p)
        return false;
    sh->vblk[sh->nvblk++] = p;
    sh->vol_cap += VOL_BLOCK;
    return true;
}


/* Gives back room the vol array no longer needs, with hysteresis: the last
 * block once half a block more is free before it, the first block (alone)
 * halved below a quarter full, so that keys coming and going around a
 * boundary do not allocate and free at every step. */
static void vol_trim(ks_shard_t *sh)
{
    if (sh->nvblk > 1) {
        if (sh->nvol + VOL_BLOCK / 2 < (sh->nvblk - 1) * VOL_BLOCK) {
            free(sh->vblk[--sh->nvblk]);
            sh->vol_cap -= VOL_BLOCK;
        }
        return;
    }
    if (sh->vol_cap > 4 * VOL_MIN && sh->nvol < sh->vol_cap / 4) {
        vol_slot_t *p = realloc(sh->vblk[0], sh->vol_cap / 2 * sizeof(*p));
        if (p) {
            sh->vblk[0] = p;
            sh->vol_cap /= 2;
        }
    }
}

void ks_vol_remove(ks_shard_t *sh, ks_entry_t *e)
{
    if (!is_vol(e))
        return;
    uint32_t *vi = vidx_of(e);
    vol_slot_t *slot = vol_at(sh, *vi - 1), *last = vol_at(sh, --sh->nvol);
    if (slot != last) {
        *slot = *last;
        *vidx_of(vol_entry(sh, slot)) = *vi;
    }
    *vi = 0;
    e->klen_f &= (uint16_t)~KF_VOL;
    vol_trim(sh);
}

