/*
 * keyspace_walk.c - what goes over a shard's entries rather than to one
 * key: SCAN (in the snapshot's walk order, keyspace_snap.c), active expiry
 * sampling the vol array, eviction sampling it or the table.
 */
#include "core/keyspace_int.h"

#define KS_EVICT_SAMPLES 5        /* keys sampled per eviction, as Redis's maxmemory-samples */
#define KS_EVICT_SCAN 64          /* entries looked at when every sample was a key to keep */
#define KS_EXPIRE_REPEAT_PCT 25   /* resample a shard while > 25% of samples were expired */
#define KS_EXPIRE_STEP_BUDGET 4   /* a step samples at most 4x its shards' first rounds */

/* ------------------------------------------------------------------------ */
/* Iteration, expiry, eviction                                              */
/* ------------------------------------------------------------------------ */

struct scan_ctx {
    int64_t now_ms;
    ks_visit_fn fn;
    void *ud;
};

static void scan_visit(ks_shard_t *sh, ks_entry_t *e, void *ud)
{
    struct scan_ctx *c = ud;
    if (!expired(sh, e, c->now_ms))
        c->fn(c->ud, e);
}

void ks_shard_scan(ks_t *ks, ks_shard_t *sh, uint64_t *cursor, size_t max_buckets,
                   int64_t now_ms, ks_visit_fn fn, void *ud)
{
    assert(SHARD_HELD(sh));
    (void)ks;
    struct scan_ctx c = { now_ms, fn, ud };
    uint64_t v = *cursor;
    if (max_buckets == 0)
        max_buckets = 1;
    do {
        v = ks_visit_range(sh, v, scan_visit, &c);
    } while (v != 0 && --max_buckets > 0);
    *cursor = v;
}

/* Samples n volatile entries of sh at random and deletes the expired ones;
 * returns how many it deleted.  The expiry is in the vol array beside the
 * entry's address, so only an expired key's entry is touched. */
static size_t expire_sample(ks_t *ks, ks_shard_t *sh, int64_t now_ms, size_t n)
{
    size_t hit = 0;
    for (; n > 0 && sh->nvol > 0; n--) {
        const vol_slot_t *v = vol_at(sh, (size_t)rng_below(&sh->rng, sh->nvol));
        if (vol_expire(v) <= now_ms) {
            ks_shard_delete(ks, sh, vol_entry(sh, v));
            hit++;
        }
    }
    return hit;
}

size_t ks_expire_step(ks_t *ks, int64_t now_ms, size_t samples, unsigned shards)
{
    size_t deleted = 0;
    size_t budget = (size_t)shards * samples * KS_EXPIRE_STEP_BUDGET;
    for (unsigned visited = 0; visited < shards && budget > 0; visited++) {
        ks_shard_t *sh = &ks->shards[ks->expire_next];
        ks->expire_next = (ks->expire_next + 1) & (ks->nshards - 1);
        ks_shard_lock(sh);
        for (int round = 0; round < 16 && sh->nvol > 0 && budget > 0; round++) {
            size_t n = samples < sh->nvol ? samples : sh->nvol;
            if (n > budget)
                n = budget;
            budget -= n;
            size_t hit = expire_sample(ks, sh, now_ms, n);
            deleted += hit;
            if (hit * 100 <= n * KS_EXPIRE_REPEAT_PCT)
                break;
        }
        ks_shard_unlock(sh);
    }
    return deleted;
}

/* An entry of a non-empty shard at random: from a random slot, the first
 * full one on.  Entries after runs of empty slots are a little likelier;
 * with the load between 1/8 and 7/8 the runs are short. */
static ks_entry_t *table_sample(ks_shard_t *sh)
{
    size_t i = (size_t)rng_below(&sh->rng, sh->nslots);
    while (!sh->slots[i])
        i = slot_next(i, sh->nslots);
    return slot_entry(sh, sh->slots[i]);
}

/* Whether e is one of keep[0..nkeep). */
static bool kept(const ks_entry_t *e, const ks_key_t *keep, size_t nkeep)
{
    for (size_t i = 0; i < nkeep; i++)
        if (keep[i].len == entry_klen(e) && memcmp(keep[i].p, key_of(e), keep[i].len) == 0)
            return true;
    return false;
}

size_t ks_evict_keep(ks_t *ks, int64_t now_ms, const ks_key_t *keep, size_t nkeep, ks_evict_fn on_evict, void *ud)
{
    if (ks->policy == KS_NOEVICTION)
        return 0;
    uint16_t now_s = lru_now(now_ms);
    for (unsigned tries = 0; tries < ks->nshards; tries++) {
        unsigned i = atomic_fetch_add_explicit(&ks->evict_rr, 1, memory_order_relaxed) & (ks->nshards - 1);
        ks_shard_t *sh = &ks->shards[i];
        ks_shard_lock(sh);
        bool vol = ks->policy == KS_VOLATILE_LRU;
        size_t n = vol ? sh->nvol : sh->n;
        ks_entry_t *best = NULL;
        uint32_t best_idle = 0;
        for (int s = 0; n && s < KS_EVICT_SAMPLES; s++) {
            ks_entry_t *e = vol ? vol_entry(sh, vol_at(sh, (size_t)rng_below(&sh->rng, n))) : table_sample(sh);
            uint32_t idle = lru_idle(e, now_s);
            if ((!best || idle > best_idle) && !kept(e, keep, nkeep)) {
                best = e;
                best_idle = idle;
            }
        }
        /* the samples were all kept: another, in order */
        size_t looked = 0;
        for (size_t k = 0; vol && !best && k < n && k < KS_EVICT_SCAN; k++)
            if (!kept(vol_entry(sh, vol_at(sh, k)), keep, nkeep))
                best = vol_entry(sh, vol_at(sh, k));
        for (size_t k = 0; !vol && !best && k < sh->nslots && looked < KS_EVICT_SCAN; k++)
            if (sh->slots[k] && (looked++, !kept(slot_entry(sh, sh->slots[k]), keep, nkeep)))
                best = slot_entry(sh, sh->slots[k]);
        if (!best) {
            ks_shard_unlock(sh);
            continue;
        }
        size_t freed = ks_entry_mem(best);
        if (on_evict)
            on_evict(ud, key_of(best), entry_klen(best));
        ks_shard_delete(ks, sh, best);
        ks_shard_unlock(sh);
        return freed;
    }
    return 0;
}

size_t ks_evict(ks_t *ks, int64_t now_ms, ks_evict_fn on_evict, void *ud)
{
    return ks_evict_keep(ks, now_ms, NULL, 0, on_evict, ud);
}
