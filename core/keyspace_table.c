/*
 * keyspace_table.c - a shard's open-addressing table of tagged slots and
 * its vol array of the entries with an expiry: growing and shrinking both,
 * removing from both.  The layouts are described in keyspace.c's opening
 * comment and keyspace_int.h; lookups and insertion are inline there or in
 * keyspace.c, with their callers.
 */
#include "core/keyspace_int.h"

#include <stdlib.h>

bool ks_table_resize(ks_shard_t *sh, size_t nslots)
{
    if (nslots > UINT32_MAX)
        return false;   /* homes come from 32 bits of hash */
    uint64_t *t = calloc(nslots, sizeof(*t));
    if (!t)
        return false;   /* keep the old table: fuller, still correct */
    for (size_t i = 0; i < sh->nslots; i++)
        if (sh->slots[i])
            slot_insert(t, nslots, sh->slots[i], slot_home(sh->seed, sh->slots[i], nslots));
    free(sh->slots);
    sh->slots = t;
    sh->nslots = nslots;
    return true;
}

/* Empties slot i, moving back the entries of its run that may move
 * (linear probing's deletion: no tombstones). */
void ks_slots_delete(uint64_t seed, uint64_t *slots, size_t n, size_t i)
{
    size_t j = i;
    for (;;) {
        j = slot_next(j, n);
        if (!slots[j])
            break;
        size_t k = slot_home(seed, slots[j], n);
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
        *vidx_of(vol_entry(slot)) = *vi;
    }
    *vi = 0;
    e->klen_f &= (uint16_t)~KF_VOL;
    vol_trim(sh);
}

