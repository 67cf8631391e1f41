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
 * Nothing is kept per key but the 16-bit epoch, and nothing is listed: a
 * snapshot's memory is the records captured ahead of the walk.
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

void ks_snapshot_begin(ks_t *ks)
{
    uint16_t e = ++ks->epoch;
    if (e == 0) {
        /* 16 bits of epoch wrapped (once in 65 535 snapshots): an entry that
         * no snapshot reached since (snapshots ended before walking its
         * shard) could carry the new epoch.  Every entry is reset, under the
         * locks the caller holds: one pass over the keys. */
        for (unsigned i = 0; i < ks->nshards; i++)
            for (size_t j = 0; j < ks->shards[i].nslots; j++)
                if (ks->shards[i].slots[j])
                    slot_entry(ks->shards[i].slots[j])->snap_epoch = 0;
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

/* Calls fn(sh, e, ud) for each entry whose tag is in [v, v + w), w about
 * one home slot's share of the tags, and returns the cursor after them (0
 * when v's range was the last).  Their homes run from the first tag's to
 * the last's and each sits in the run from its home on, so the walk goes
 * from the first home to the first empty slot at or past the last home.
 * A cursor is a position in tag order, whatever the table's size, so an
 * entry present for a whole walk is visited even if the table is resized
 * in between.  fn must not add or delete. */
uint64_t ks_visit_range(ks_shard_t *sh, uint64_t v, void (*fn)(ks_shard_t *, ks_entry_t *, void *), void *ud)
{
    size_t n = sh->nslots;
    if (v >= TAG_SPACE)
        return 0;
    uint64_t end = v + (n >= TAG_SPACE ? 1 : TAG_SPACE / n);
    if (end > TAG_SPACE)
        end = TAG_SPACE;
    size_t i = tag_home_lo(v, n), span = tag_home_hi(end - 1, n) - i;
    for (size_t d = 0; d <= n; d++, i = slot_next(i, n)) {
        uint64_t s = sh->slots[i];
        if (!s) {
            if (d >= span)
                break;
            continue;
        }
        if (slot_tag(s) >= v && slot_tag(s) < end)
            fn(sh, slot_entry(s), ud);
    }
    return end == TAG_SPACE ? 0 : end;
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
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_shard_t *sh = &ks->shards[i];
        ks_shard_lock(sh);
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

