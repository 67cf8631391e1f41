/*
 * keyspace_snap.c - the keyspace's copy-on-write snapshot, and the walk of
 * a shard's table in tag order that it shares with SCAN (keyspace_walk.c).
 */
#include "core/keyspace_int.h"

#include <stdlib.h>

#include "core/persist_fmt.h"

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                */
/* ------------------------------------------------------------------------ */

/*
 * How a consistent snapshot is taken without stopping the world:
 *
 * ks_snapshot_begin() runs with every shard locked and stamps each shard
 * with a new epoch E.  From then on an entry is "handled" for E once its
 * state as of the barrier is safe: either written to the file, or copied.
 *
 *  - The snapshot walks each shard's table home slot by home slot, in
 *    ks_shard_scan's cursor order, and writes every entry not yet handled
 *    (marking it handled).  That order visits every entry present for the
 *    whole walk at least once, across any resizes in between (Redis's
 *    dictScan guarantee); the epoch keeps an entry from being written twice.
 *  - A writer about to change an unhandled entry calls ks_capture(), which
 *    encodes the entry's current record into `items` and marks it handled.
 *    Entries created after the barrier are born handled.
 *  - An entry unhandled when the walk reaches it is therefore unchanged since
 *    the barrier; one deleted in between was captured before.
 *
 * The encoded records therefore show each key exactly as it was at the
 * barrier, while the journal after the barrier holds every later change.
 * Nothing is kept per key but the 8-bit epoch, and nothing is listed: a
 * snapshot's memory is the records captured ahead of the walk.  The epoch
 * wraps every 255 snapshots: the snapshot ending before it does resets
 * every entry's, shard by shard (ks_snapshot_end).
 */

static void record_encode(wbuf_t *out, const ks_shard_t *sh, const ks_entry_t *e)
{
    const ks_type_t *t = type_of(e);
    snapfmt_put_record(out, t->tag, key_of(e), entry_klen(e), entry_expire(sh, e), t->encode, value_of(e));
}

static bool items_push(ks_shard_t *sh, snap_item_t it)
{
    if (sh->nitems == sh->items_cap) {
        size_t nc = sh->items_cap ? sh->items_cap * 2 : 64;
        snap_item_t *p = realloc(sh->items, nc * sizeof(*p));
        if (!p)
            return false;
        sh->items = p;
        sh->items_cap = nc;
    }
    sh->items[sh->nitems++] = it;
    return true;
}

void ks_capture(ks_shard_t *sh, ks_entry_t *e)
{
    if (!sh->snap_active || e->snap_epoch == sh->snap_active)
        return;
    e->snap_epoch = sh->snap_active;
    wbuf_t b = WBUF_INIT;
    record_encode(&b, sh, e);
    if (b.oom) {
        wbuf_free(&b);
        sh->snap_failed = true;
        return;
    }
    snap_item_t it = { b.data, b.len };
    if (!items_push(sh, it)) {
        free(it.buf);
        sh->snap_failed = true;
    }
}

/* Sets every entry's epoch of sh to 0 (sh locked, no snapshot active). */
static void epochs_reset(ks_shard_t *sh)
{
    for (size_t j = 0; j < sh->nslots; j++)
        if (sh->slots[j])
            slot_entry(sh, sh->slots[j])->snap_epoch = 0;
}

void ks_snapshot_begin(ks_t *ks)
{
    uint8_t e = ++ks->epoch;
    if (e == 0) {
        /* ks_snapshot_end resets the epochs before they wrap; this is
         * only reached if it was not called.  Every entry is reset, under
         * the locks the caller holds. */
        for (unsigned i = 0; i < ks->nshards; i++)
            epochs_reset(&ks->shards[i]);
        e = ++ks->epoch;   /* 0 means "no snapshot" */
    }
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_shard_t *sh = &ks->shards[i];
        sh->snap_active = e;
        sh->snap_walked = false;
        sh->snap_cursor = 0;
        sh->snap_failed = false;
        sh->nitems = sh->items_next = 0;
    }
}

#define POS_SPACE ((uint64_t)1 << 32)   /* positions: a hash's top 32 bits */

/* Calls fn(sh, e, ud) for each entry whose position (its hash's top 32
 * bits) is in [v, v + w), w about one home slot's share of the positions
 * and a whole number of tags while homes come from tags, and returns the
 * cursor after them (0 when v's range was the last).  Their homes run from
 * the first position's to the last's and each sits in the run from its
 * home on, so the walk goes from the first home to the first empty slot at
 * or past the last home.  A cursor is a position in hash order, whatever
 * the table's size, so an entry present for a whole walk is visited even
 * if the table is resized in between (a cursor inside a tag, made before
 * the tags lost bits, starts at the tag's first position: some entries
 * are visited again).  fn must not add or delete. */
uint64_t ks_visit_range(ks_shard_t *sh, uint64_t v, void (*fn)(ks_shard_t *, ks_entry_t *, void *), void *ud)
{
    size_t n = sh->nslots;
    if (v >= POS_SPACE)
        return 0;
    bool tags = tag_homes(sh, n);
    unsigned shift = 32 - sh->tbits;   /* a tag's positions: 2^shift */
    uint64_t w = POS_SPACE / n;
    if (tags) {
        uint64_t g = (uint64_t)1 << shift;
        v &= ~(g - 1);
        w = w < g ? g : w & ~(g - 1);
    } else if (w == 0) {
        w = 1;
    }
    uint64_t end = v + w > POS_SPACE ? POS_SPACE : v + w;
    size_t i = home_of_pos(sh, v, n), span = home_of_pos(sh, end - 1, n) - i;
    for (size_t d = 0; d <= n; d++, i = slot_next(i, n)) {
        uint32_t s = sh->slots[i];
        if (!s) {
            if (d >= span)
                break;
            continue;
        }
        uint64_t lo = (uint64_t)slot_tag(sh, s) << shift, hi = lo + ((uint64_t)1 << shift);
        if (hi <= v || lo >= end)
            continue;   /* none of the tag's positions is in the range */
        ks_entry_t *e = slot_entry(sh, s);
        if (lo < v || hi > end) {   /* the tag straddles the range: the key's own position */
            uint64_t pos = entry_hash(sh->seed, e) >> 32;
            if (pos < v || pos >= end)
                continue;
        }
        fn(sh, e, ud);
    }
    return end == POS_SPACE ? 0 : end;
}

struct drain_ctx {
    wbuf_t *out;
    uint64_t *records;
};

static void drain_visit(ks_shard_t *sh, ks_entry_t *e, void *ud)
{
    struct drain_ctx *d = ud;
    if (e->snap_epoch == sh->snap_active)
        return;
    e->snap_epoch = sh->snap_active;
    record_encode(d->out, sh, e);
    (*d->records)++;
}

bool ks_snapshot_drain(ks_t *ks, ks_shard_t *sh, wbuf_t *out, size_t budget, uint64_t *records)
{
    assert(SHARD_HELD(sh));
    (void)ks;
    if (!sh->snap_active)
        return true;
    size_t start = out->len;
    struct drain_ctx d = { out, records };
    for (;;) {
        /* records captured ahead of the walk first */
        while (sh->items_next < sh->nitems && out->len - start < budget) {
            snap_item_t *it = &sh->items[sh->items_next++];
            wbuf_put_bytes(out, it->buf, it->len);
            free(it->buf);
            it->buf = NULL;
            (*records)++;
        }
        if (out->oom)
            return true;
        if (sh->snap_walked || out->len - start >= budget)
            break;
        uint64_t next = ks_visit_range(sh, sh->snap_cursor, drain_visit, &d);
        if (out->oom)
            return true;
        sh->snap_cursor = next;
        if (sh->snap_cursor == 0)
            sh->snap_walked = true;
    }
    if (sh->snap_failed)
        out->oom = true;
    /* once walked, every entry is handled: no capture adds an item */
    return sh->snap_walked && sh->items_next == sh->nitems;
}

bool ks_snapshot_failed(ks_t *ks)
{
    for (unsigned i = 0; i < ks->nshards; i++)
        if (ks->shards[i].snap_failed)
            return true;
    return false;
}

void ks_snapshot_end(ks_t *ks)
{
    /* The next snapshot's epoch would wrap to 0 and be 1 again: an entry
     * this or an earlier snapshot did not reach (one ended before walking
     * its shard) could carry it.  Every entry's epoch is set to 0 now,
     * one shard at a time, while no snapshot is active (epochs are read
     * only then). */
    bool wrap = ks->epoch == UINT8_MAX;
    if (wrap)
        ks->epoch = 0;
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_shard_t *sh = &ks->shards[i];
        ks_shard_lock(sh);
        sh->snap_active = 0;
        if (wrap)
            epochs_reset(sh);
        for (size_t j = sh->items_next; j < sh->nitems; j++)
            free(sh->items[j].buf);
        sh->nitems = sh->items_next = 0;
        sh->snap_active = 0;
        sh->snap_walked = false;
        sh->snap_cursor = 0;
        if (sh->items_cap > 1024) {
            free(sh->items);
            sh->items = NULL;
            sh->items_cap = 0;
        }
        ks_shard_unlock(sh);
    }
}

