/* throttle.c - rate limiting as operations: see throttle.h. */
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/cluster.h"
#include "cmd/journal.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "cmd/throttle.h"
#include "cmd/zone.h"

#define RECORD_V1 1              /* the records' version byte */
#define ITEM_SHADOW 1u           /* an item's flags */
#define ITEM_CALENDAR 2u         /* a fixed_window item's calendar follows its parameters */

/* ------------------------------------------------------------------------ */
/* Records                                                                  */
/* ------------------------------------------------------------------------ */

/* The bytes write_item writes. */
static bool has_calendar(const cmd_throttle_item_t *it)
{
    return it->p.algo == THROTTLE_FIXED_WINDOW && it->p.cal.kind != CAL_NONE;
}

static size_t item_size(const cmd_throttle_item_t *it)
{
    size_t cal = has_calendar(it) ? 4 + it->p.cal.zone->name_len : 0;
    return 4 + it->klen + 1 + 8 + (it->p.algo == THROTTLE_GCRA ? 24 : 16) + cal;
}

/* Writes an item at p, which has room for item_size(it) bytes; returns the
 * end.  Stores, not wbuf_put_* calls: this is every decision's record (the
 * key is laid out as cmd_put_key lays it out, and read with cmd_get_key). */
static uint8_t *write_item(uint8_t *p, const cmd_throttle_item_t *it)
{
    le32_store(p, (uint32_t)it->klen);
    memcpy(p + 4, it->key, it->klen);
    p += 4 + it->klen;
    *p++ = (uint8_t)((it->shadow ? ITEM_SHADOW : 0) | (has_calendar(it) ? ITEM_CALENDAR : 0));
    le64_store(p, (uint64_t)it->quantity);
    p += 8;
    const throttle_params_t *tp = &it->p;
    int64_t v[3];
    int nv = 2;
    switch (tp->algo) {
    case THROTTLE_GCRA:
        v[0] = tp->u.gcra.max_burst;
        v[1] = tp->u.gcra.count;
        v[2] = tp->u.gcra.period_ns;
        nv = 3;
        break;
    case THROTTLE_SLIDING_LOG:
        v[0] = tp->u.log.max_count;
        v[1] = tp->u.log.period_ns;
        break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW:
        v[0] = tp->u.win.max_count;
        v[1] = tp->u.win.period_ns;
        break;
    case THROTTLE_TOKEN_BUCKET:
    default:
        v[0] = tp->u.tb.capacity;
        v[1] = tp->u.tb.rate_micro;
        break;
    }
    for (int i = 0; i < nv; i++, p += 8)
        le64_store(p, (uint64_t)v[i]);
    if (has_calendar(it)) {
        const cal_spec_t *c = &tp->cal;
        *p++ = c->kind;
        *p++ = c->week_start;
        *p++ = c->anchor_day;
        *p++ = (uint8_t)c->zone->name_len;
        memcpy(p, c->zone->name, c->zone->name_len);
        p += c->zone->name_len;
    }
    return p;
}

/* Reads a calendar (kind, week_start, anchor_day, zone name) into p. */
static bool get_calendar(rbuf_t *in, cal_spec_t *c, const char **why)
{
    c->kind = rbuf_u8(in);
    c->week_start = rbuf_u8(in);
    c->anchor_day = rbuf_u8(in);
    uint8_t n = rbuf_u8(in);
    const uint8_t *name = rbuf_bytes(in, n);
    if (in->err) {
        *why = "truncated";
        return false;
    }
    if (c->kind == CAL_NONE || c->kind > CAL_KIND_MAX) {
        *why = "bad calendar";
        return false;
    }
    if (!(c->zone = cmd_zone_get((const char *)name, n, why)))
        return false;
    return true;
}

/* A period as the front-ends give it: whole seconds, 1 .. CMD_THROTTLE_MAX_PERIOD_S. */
static bool period_ok(int64_t ns)
{
    return ns >= NS_PER_SEC && ns % NS_PER_SEC == 0 && ns / NS_PER_SEC <= CMD_THROTTLE_MAX_PERIOD_S;
}

/* Reads an item of algorithm `algo`; false with *why for bytes no tally
 * wrote. */
static bool get_item(rbuf_t *in, throttle_algo_t algo, cmd_throttle_item_t *it, const char **why)
{
    memset(it, 0, sizeof(*it));
    if (!cmd_get_key(in, &it->key, &it->klen)) {
        *why = "bad key";
        return false;
    }
    uint8_t flags = rbuf_u8(in);
    it->shadow = flags & ITEM_SHADOW;
    it->quantity = rbuf_i64(in);
    throttle_params_t *p = &it->p;
    p->algo = algo;
    int64_t period_ns = NS_PER_SEC;
    switch (algo) {
    case THROTTLE_GCRA:
        p->u.gcra.max_burst = rbuf_i64(in);
        p->u.gcra.count = rbuf_i64(in);
        period_ns = p->u.gcra.period_ns = rbuf_i64(in);
        break;
    case THROTTLE_SLIDING_LOG:
        p->u.log.max_count = rbuf_i64(in);
        period_ns = p->u.log.period_ns = rbuf_i64(in);
        break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW:
        p->u.win.max_count = rbuf_i64(in);
        period_ns = p->u.win.period_ns = rbuf_i64(in);
        if (flags & ITEM_CALENDAR && algo == THROTTLE_FIXED_WINDOW && !in->err && !get_calendar(in, &p->cal, why))
            return false;
        break;
    case THROTTLE_TOKEN_BUCKET:
        p->u.tb.capacity = rbuf_i64(in);
        p->u.tb.rate_micro = rbuf_i64(in);
        break;
    default:
        *why = "unknown algorithm";
        return false;
    }
    const char *field;
    if (in->err) {
        *why = "truncated";
        return false;
    }
    if (flags & ~(ITEM_SHADOW | (algo == THROTTLE_FIXED_WINDOW ? ITEM_CALENDAR : 0)) || it->quantity < 0) {
        *why = "bad flags or quantity";
        return false;
    }
    if (!period_ok(period_ns) || throttle_validate(p, &field)) {
        *why = "bad parameters";
        return false;
    }
    return true;
}

static bool get_version(rbuf_t *in, const char **why)
{
    if (rbuf_u8(in) == RECORD_V1)
        return true;
    *why = "unknown version";
    return false;
}

static void encode_decision(const void *args, wbuf_t *out)
{
    const cmd_throttle_item_t *it = args;
    size_t n = 1 + item_size(it);
    if (n > out->cap - out->len && !wbuf_reserve(out, n))   /* the caller's stack storage usually holds it */
        return;
    uint8_t *p = out->data + out->len;
    *p = RECORD_V1;
    write_item(p + 1, it);
    out->len += n;
}

static void encode_batch(const void *args, wbuf_t *out)
{
    const cmd_throttle_batch_args_t *a = args;
    size_t bytes = 1 + 4;
    for (size_t i = 0; i < a->n; i++)
        bytes += 1 + item_size(&a->items[i]);
    if (!wbuf_reserve(out, bytes))   /* one allocation for a record past the caller's storage */
        return;
    uint8_t *p = out->data + out->len;
    *p++ = RECORD_V1;
    le32_store(p, (uint32_t)a->n);
    p += 4;
    for (size_t i = 0; i < a->n; i++) {
        *p++ = (uint8_t)a->items[i].p.algo;
        p = write_item(p, &a->items[i]);
    }
    out->len += bytes;
}

/* Reads the next item of a batch's items. */
static bool get_batch_item(rbuf_t *in, cmd_throttle_item_t *it, const char **why)
{
    uint8_t algo = rbuf_u8(in);
    return get_item(in, (throttle_algo_t)algo, it, why);
}

static bool decode_batch(rbuf_t *in, void *args, const char **why)
{
    cmd_throttle_batch_args_t *a = args;
    if (!get_version(in, why))
        return false;
    uint32_t n = rbuf_u32(in);
    if (in->err || n == 0 || n > CMD_THROTTLE_BATCH_MAX) {
        *why = "bad item count";
        return false;
    }
    memset(a, 0, sizeof(*a));
    a->n = n;
    a->packed = in->p + in->off;
    size_t start = in->off;
    for (uint32_t i = 0; i < n; i++) {
        cmd_throttle_item_t it;
        if (!get_batch_item(in, &it, why))
            return false;
    }
    a->packed_len = in->off - start;
    return true;
}

static void encode_reset(const void *args, wbuf_t *out)
{
    const cmd_throttle_reset_args_t *a = args;
    wbuf_put_u8(out, RECORD_V1);
    cmd_put_key(out, a->key, a->klen);
}

static bool decode_reset(rbuf_t *in, void *args, const char **why)
{
    cmd_throttle_reset_args_t *a = args;
    if (!get_version(in, why))
        return false;
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Decisions                                                                */
/* ------------------------------------------------------------------------ */

/* WRONGTYPE when the key's state is another algorithm's. */
static bool algo_conflict(cmd_ctx_t *ctx, const cmd_throttle_item_t *it, const throttle_t *t)
{
    if (!t || throttle_algo(t) == it->p.algo)
        return false;
    cmd_fail(ctx, CMD_E_WRONGTYPE, NULL,
             "key '%.*s' holds %s limiter state; this request uses %s (DELETE /throttle/{key} resets it)",
             (int)(it->klen > 200 ? 200 : it->klen), it->key, throttle_algo_name(throttle_algo(t)),
             throttle_algo_name(it->p.algo));
    return true;
}

static int64_t expire_ms_of(int64_t expire_ns) { return rl_ceil_div(expire_ns, NS_PER_MS); }

/* The bytes committing the item on `t` (NULL: a new key) adds to the
 * keyspace, and the size the state reaches. */
static uint64_t commit_growth(const throttle_t *t, const cmd_throttle_item_t *it, int64_t now_ns, size_t *after)
{
    *after = throttle_bytes_after(t, &it->p, now_ns, it->quantity);
    size_t before = t ? throttle_type.size(t) : 0;
    uint64_t add = *after > before ? *after - before : 0;
    return t ? add : add + ks_entry_overhead(it->klen);
}

/* The checks of the keys before anything is evicted for them: the token's
 * prefixes, item by item, then (in a cluster) one slot this node serves. */
static bool items_allowed(cmd_ctx_t *ctx, const cmd_throttle_item_t *items, size_t n, ks_key_t *keys)
{
    for (size_t i = 0; i < n; i++)
        if (!cmd_key_allowed(ctx, items[i].key, items[i].klen))
            return false;
    return !ctx->srv->cluster || cmd_cluster_keys_check(ctx, keys, n, false);
}

static bool run_decision(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_throttle_item_t *it = args;
    rl_result_t *r = &((cmd_throttle_res_t *)res)->r;
    ks_key_t one = { .p = it->key, .len = it->klen };
    if (!items_allowed(ctx, it, 1, &one))
        return false;
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        if (!cmd_key_open(ctx, it->key, it->klen, &throttle_type, CMD_WRITE, &h))
            return false;
        throttle_t *t = cmd_key_value(&h);
        if (algo_conflict(ctx, it, t)) {
            cmd_key_close(&h, false);
            return false;
        }
        if (!throttle_check(t, &it->p, ctx->now_ns, it->quantity, r)) {
            cmd_key_close(&h, false);   /* limited, or a peek: nothing recorded */
            return true;
        }
        size_t after;
        uint64_t add = commit_growth(t, it, ctx->now_ns, &after);
        if (after > cmd_value_limit(ctx) || add > cmd_room_now(ctx)) {
            /* refused, or room to make without the lock (keeping this
             * key): then decide again */
            ks_key_t kk = h.key;
            cmd_keep_t keep = { &kk, 1, t ? throttle_type.size(t) : 0 };
            cmd_key_close(&h, false);
            if (!cmd_value_fits(ctx, NULL, "the limiter's state", after) ||
                !cmd_room_retry(ctx, add, &keep, &attempts))
                return false;
            continue;
        }
        int64_t expire_ns;
        if (h.e) {
            if (!throttle_commit(&t, &it->p, ctx->now_ns, it->quantity, &expire_ns)) {
                cmd_key_close(&h, false);
                return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory recording the request");
            }
            ks_entry_changed(ctx->srv->ks, h.e);
        } else if (!throttle_commit(&t, &it->p, ctx->now_ns, it->quantity, &expire_ns) ||
                   !cmd_key_add(&h, &throttle_type, t, expire_ms_of(expire_ns))) {
            throttle_free(t);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the limiter");
        }
        ks_entry_set_expire(ctx->srv->ks, &h.e, expire_ms_of(expire_ns));
        /* what cmd_key_close(&h, true) does, less a second measurement of
         * a key cmd_key_add just measured (every new key of a gateway's) */
        cmd_journal_change(ctx);
        cmd_key_close(&h, false);
        return true;
    }
}

/* ------------------------------------------------------------------------ */
/* Batches                                                                  */
/* ------------------------------------------------------------------------ */

/* Per distinct key of a batch. */
typedef struct slot {
    ks_entry_t *e;               /* stored entry, or NULL */
    throttle_t *work;            /* working copy once the batch changes the key */
    int64_t expire_ns;
    bool added;
} slot_t;

/* What a batch works with: its items and their decisions, their keys, the
 * first item of each distinct key (slot_of) and a slot per distinct key. */
typedef struct batch {
    const cmd_throttle_item_t *items;
    rl_result_t *rs;
    size_t n;
    ks_key_t *keys;
    size_t *slot_of;
    slot_t *slots;
} batch_t;

/* What the whole batch may add at most, once what it held so far did not
 * fit: each distinct key's working copy and its state at the most its
 * parameters allow (throttle_bytes_max), so that a batch that can never fit
 * is refused before anything is evicted for it. */
static uint64_t batch_bound(const batch_t *b, uint64_t held)
{
    uint64_t *most = calloc(b->n, sizeof(*most)), bound = 0;
    if (!most)
        return held;
    for (size_t i = 0; i < b->n; i++) {
        uint64_t m = throttle_bytes_max(&b->items[i].p);
        if (m > most[b->slot_of[i]])
            most[b->slot_of[i]] = m;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (b->slot_of[i] != i)
            continue;
        const throttle_t *cur = b->slots[i].e ? ks_entry_value(b->slots[i].e) : NULL;
        uint64_t size = cur ? throttle_type.size(cur) : 0;
        bound += cur ? size + (most[i] > size ? most[i] - size : 0) : most[i] + ks_entry_overhead(b->items[i].klen);
    }
    free(most);
    return bound > held ? bound : held;
}

/* One attempt at the batch, all or nothing.  The working copies and what
 * the commits add are counted as they are made: when they would pass the
 * room there is (cmd_room_now), nothing is kept and *more says how many
 * bytes to evict for before trying again (false with no error set). */
static bool batch_once(cmd_ctx_t *ctx, batch_t *b, bool *all, uint64_t *more, uint64_t *pinned)
{
    ks_t *ks = ctx->srv->ks;
    size_t n = b->n;
    slot_t *slots = b->slots;
    memset(slots, 0, n * sizeof(*slots));
    bool ok = false;
    cmd_key_t h;
    if (!cmd_keys_lock(ctx, b->keys, n, &h))
        return false;
    for (size_t i = 0; i < n; i++)
        if (b->slot_of[i] == i && !cmd_keys_find(&h, i, &throttle_type, CMD_READ, NULL, &slots[i].e))
            return false;   /* closed by cmd_keys_find */
    /* decide in order; later items on a key see what earlier ones recorded */
    *all = true;
    bool changed = false;
    uint64_t room = cmd_room_now(ctx), held = 0;   /* held: copies and growth so far */
    for (size_t i = 0; i < n; i++) {
        const cmd_throttle_item_t *it = &b->items[i];
        rl_result_t *r = &b->rs[i];
        slot_t *s = &slots[b->slot_of[i]];
        const throttle_t *cur = s->work ? s->work : s->e ? ks_entry_value(s->e) : NULL;
        if (algo_conflict(ctx, it, cur))
            goto unlock;
        if (!throttle_check(cur, &it->p, ctx->now_ns, it->quantity, r)) {
            if (!r->allowed && !it->shadow)
                *all = false;
            continue;
        }
        size_t after;
        uint64_t add = commit_growth(cur, it, ctx->now_ns, &after);
        if (!s->work && s->e)
            add += throttle_type.size(cur);   /* the working copy */
        if (!cmd_value_fits(ctx, NULL, "the limiter's state", after))
            goto unlock;
        held += add;
        /* with or without --maxmemory, one batch adds at most what one
         * request may read (10 000 sliding logs would take 8 GB) */
        if (!ctx->replay && held > cmd_work_limit(ctx->srv)) {
            cmd_fail(ctx, CMD_E_BAD_REQUEST, "requests",
                     "the batch would add more than %d x --max-value-size (%llu bytes) of limiter state; "
                     "split it into smaller requests",
                     CMD_WORK_VALUES, (unsigned long long)cmd_work_limit(ctx->srv));
            goto unlock;
        }
        if (held > room) {
            *more = batch_bound(b, held);
            for (size_t k = 0; k < n; k++)   /* the states it holds, kept while room is made */
                if (b->slot_of[k] == k && slots[k].e)
                    *pinned += throttle_type.size(ks_entry_value(slots[k].e));
            goto unlock;
        }
        if (!s->work && s->e && !(s->work = throttle_clone(ks_entry_value(s->e)))) {
            cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
            goto unlock;
        }
        if (!throttle_commit(&s->work, &it->p, ctx->now_ns, it->quantity, &s->expire_ns)) {
            cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
            goto unlock;
        }
        changed = true;
    }
    if (!*all) {
        /* nothing is recorded: report what the stored state allows now */
        for (size_t i = 0; i < n; i++) {
            const cmd_throttle_item_t *it = &b->items[i];
            rl_result_t *r = &b->rs[i];
            if (!r->allowed || it->quantity == 0)
                continue;
            const slot_t *s = &slots[b->slot_of[i]];
            rl_result_t peek;
            throttle_check(s->e ? ks_entry_value(s->e) : NULL, &it->p, ctx->now_ns, 0, &peek);
            r->remaining = peek.remaining;
            r->reset_after_ns = peek.reset_after_ns;
        }
    } else if (changed) {
        /* new keys first: the only step that can fail, undone on failure */
        int64_t now_ms = cmd_now_ms(ctx);
        for (size_t i = 0; i < n; i++) {
            slot_t *s = &slots[i];
            if (!s->work || s->e)
                continue;
            s->e = ks_add(ks, &b->keys[i], &throttle_type, s->work, expire_ms_of(s->expire_ns), now_ms);
            if (!s->e) {
                for (size_t k = 0; k < i; k++)
                    if (slots[k].added) {
                        ks_entry_delete(ks, slots[k].e);   /* frees the working copy */
                        slots[k].work = NULL;
                        slots[k].e = NULL;
                    }
                cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the limiters");
                goto unlock;
            }
            s->added = true;
        }
        for (size_t i = 0; i < n; i++) {
            slot_t *s = &slots[i];
            if (!s->work)
                continue;
            if (!s->added) {
                ks_entry_prepare_write(ks, s->e);
                ks_entry_replace_value(ks, s->e, s->work);
            }
            s->work = NULL;   /* owned by the keyspace now */
            ks_entry_set_expire(ks, &s->e, expire_ms_of(s->expire_ns));
        }
        cmd_journal_change(ctx);   /* the batch's record, under every key's lock */
    }
    ok = true;
unlock:
    cmd_key_close(&h, false);   /* journaled above (each entry was measured as it was replaced or added) */
    for (size_t i = 0; i < n; i++)
        if (slots[i].work && !slots[i].added)
            throttle_free(slots[i].work);
    return ok;
}

/* The batch's working storage in one block: keys, slot_of, slots, and on
 * replay (own: true) the items and decisions the record's bytes decode
 * into, at *items and b->rs.  NULL when out of memory. */
static void *batch_alloc(batch_t *b, bool own, cmd_throttle_item_t **items)
{
    size_t n = b->n;
    size_t at_keys = own ? n * (sizeof(cmd_throttle_item_t) + sizeof(rl_result_t)) : 0;
    size_t at_slot_of = at_keys + n * sizeof(ks_key_t);
    size_t at_slots = at_slot_of + n * sizeof(size_t);
    at_slots = (at_slots + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t);
    char *block = malloc(at_slots + n * sizeof(slot_t));
    if (!block)
        return NULL;
    if (own) {
        *items = (cmd_throttle_item_t *)block;
        b->items = *items;
        b->rs = (rl_result_t *)(block + n * sizeof(cmd_throttle_item_t));
    }
    b->keys = (ks_key_t *)(block + at_keys);
    b->slot_of = (size_t *)(block + at_slot_of);
    b->slots = (slot_t *)(block + at_slots);
    return block;
}

static bool run_batch(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_throttle_batch_args_t *a = args;
    cmd_throttle_batch_res_t *out = res;
    /* a front-end's items and decisions, or a record's (decisions not wanted) */
    bool own = !a->items || !a->results;
    batch_t b = { .items = a->items, .rs = a->results, .n = a->n };
    cmd_throttle_item_t *items = NULL;
    void *block = batch_alloc(&b, own, &items);
    if (!block)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    if (own && a->items) {
        memcpy(items, a->items, b.n * sizeof(*items));
    } else if (own) {   /* a record's items: validated when it was decoded */
        rbuf_t in = rbuf_make(a->packed, a->packed_len);
        const char *why = "truncated";
        for (size_t i = 0; i < b.n; i++)
            if (!get_batch_item(&in, &items[i], &why)) {
                free(block);
                return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "THROTTLE.BATCH record: %s", why);
            }
    }
    bool ok = false;
    for (size_t i = 0; i < b.n; i++)
        b.keys[i] = ks_key(ctx->srv->ks, b.items[i].key, b.items[i].klen);
    if (!items_allowed(ctx, b.items, b.n, b.keys))
        goto done;
    if (!cmd_keys_distinct(b.keys, b.n, b.slot_of)) {
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        goto done;
    }
    for (unsigned attempts = 0;;) {
        uint64_t more = 0, pinned = 0;
        ok = batch_once(ctx, &b, &out->all, &more, &pinned);
        cmd_keep_t keep = { b.keys, b.n, pinned };
        if (ok || !more || !cmd_room_retry(ctx, more, &keep, &attempts))
            break;
    }
done:
    free(block);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Reset                                                                    */
/* ------------------------------------------------------------------------ */

static bool run_reset(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_throttle_reset_args_t *a = args;
    cmd_throttle_reset_res_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &throttle_type, CMD_WRITE, &h))
        return false;
    r->deleted = h.e != NULL;
    if (r->deleted)
        cmd_key_delete(&h);
    cmd_key_close(&h, r->deleted);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Reservations, settles, refunds, probes                                   */
/* ------------------------------------------------------------------------ */

static void encode_reserve(const void *args, wbuf_t *out)
{
    const cmd_throttle_reserve_args_t *a = args;
    size_t n = 2 + item_size(&a->it) + 9;
    if (!wbuf_reserve(out, n))
        return;
    uint8_t *p = out->data + out->len;
    *p++ = RECORD_V1;
    *p++ = (uint8_t)a->it.p.algo;
    p = write_item(p, &a->it);
    le64_store(p, (uint64_t)a->ttl_ns);
    p[8] = (uint8_t)a->on_expiry;
    out->len += n;
}

static bool reservable(throttle_algo_t a) { return a != THROTTLE_SLIDING_LOG; }

static bool decode_reserve(rbuf_t *in, void *args, const char **why)
{
    cmd_throttle_reserve_args_t *a = args;
    if (!get_version(in, why) || !get_batch_item(in, &a->it, why))
        return false;
    a->ttl_ns = rbuf_i64(in);
    uint8_t e = rbuf_u8(in);
    if (in->err || a->ttl_ns < 1 || a->ttl_ns > THROTTLE_MAX_RESERVE_TTL_NS || e > THROTTLE_EXPIRY_REFUND ||
        a->it.shadow || !reservable(a->it.p.algo) || a->it.quantity > throttle_capacity(&a->it.p)) {
        *why = "bad reservation";
        return false;
    }
    a->on_expiry = (throttle_expiry_t)e;
    return true;
}

static void encode_settle(const void *args, wbuf_t *out)
{
    const cmd_throttle_settle_args_t *a = args;
    wbuf_put_u8(out, RECORD_V1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u64(out, a->id);
    wbuf_put_i64(out, a->actual);
}

static bool decode_settle(rbuf_t *in, void *args, const char **why)
{
    cmd_throttle_settle_args_t *a = args;
    if (!get_version(in, why))
        return false;
    if (!cmd_get_key(in, &a->key, &a->klen)) {
        *why = "bad key";
        return false;
    }
    a->id = rbuf_u64(in);
    a->actual = rbuf_i64(in);
    if (in->err || a->actual < 0) {
        *why = "bad settle";
        return false;
    }
    return true;
}

static void encode_refund(const void *args, wbuf_t *out)
{
    const cmd_throttle_item_t *it = args;
    size_t n = 2 + item_size(it);
    if (!wbuf_reserve(out, n))
        return;
    uint8_t *p = out->data + out->len;
    *p++ = RECORD_V1;
    *p++ = (uint8_t)it->p.algo;
    write_item(p, it);
    out->len += n;
}

static bool decode_refund(rbuf_t *in, void *args, const char **why)
{
    cmd_throttle_item_t *it = args;
    if (!get_version(in, why) || !get_batch_item(in, it, why))
        return false;
    if (it->shadow || !reservable(it->p.algo) || it->quantity > throttle_capacity(&it->p)) {
        *why = "bad refund";
        return false;
    }
    return true;
}

static int key_shown(size_t klen) { return (int)(klen > 200 ? 200 : klen); }

/* Stores `out` (a new state built from the open entry's, or for a missing
 * key) in place of the open entry's value with its expiry, journaled, and
 * closes the handle; or, when it does not fit in the room there is, frees
 * it, closes the handle and makes room (true with *again: run once more).
 * False with the error set. */
static bool store_state(cmd_ctx_t *ctx, cmd_key_t *h, throttle_t *out, int64_t expire_ns, unsigned *attempts,
                        bool *again)
{
    *again = false;
    const throttle_t *t = cmd_key_value(h);
    size_t before = t ? throttle_type.size(t) : 0, after = throttle_type.size(out);
    uint64_t add = after > before ? after - before : 0;
    /* a new key, or one whose entry has no room for the new state (a
     * compact GCRA state's, for one with reservations): a new entry */
    bool fits = h->e && ks_entry_value_fits(h->e, out);
    if (!fits)
        add += ks_entry_overhead(h->key.len);
    if (after > cmd_value_limit(ctx) || add > cmd_room_now(ctx)) {
        ks_key_t kk = h->key;
        cmd_keep_t keep = { &kk, 1, before };
        throttle_free(out);
        cmd_key_close(h, false);
        if (!cmd_value_fits(ctx, NULL, "the limiter's state", after) || !cmd_room_retry(ctx, add, &keep, attempts))
            return false;
        *again = true;
        return true;
    }
    if (fits) {
        cmd_key_replace(h, out);
    } else if (h->e) {
        /* the old entry goes, the new one comes; should the new one fail,
         * the old state is put back (or, failing that too, the key's
         * deletion journaled: replay and replicas lose it too) */
        throttle_t *old = throttle_clone(t);
        int64_t old_expire = ks_entry_expire(ctx->srv->ks, h->e);
        if (!old) {
            throttle_free(out);
            cmd_key_close(h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the limiter");
        }
        cmd_key_delete(h);
        if (!cmd_key_add(h, &throttle_type, out, expire_ms_of(expire_ns))) {
            throttle_free(out);
            if (!cmd_key_add(h, &throttle_type, old, old_expire)) {
                throttle_free(old);
                cmd_journal_key_state(ctx, h->key.p, h->key.len, NULL, 0, 0);
            }
            cmd_key_close(h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the limiter");
        }
        throttle_free(old);
    } else if (!cmd_key_add(h, &throttle_type, out, expire_ms_of(expire_ns))) {
        throttle_free(out);
        cmd_key_close(h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the limiter");
    }
    ks_entry_set_expire(ctx->srv->ks, &h->e, expire_ms_of(expire_ns));
    cmd_key_close(h, true);
    return true;
}

/* The failures of core's reservation functions. */
static bool rsv_fail(cmd_ctx_t *ctx, int rc, const char *field, const cmd_throttle_item_t *it, int64_t cost,
                     int64_t capacity)
{
    switch (rc) {
    case CORE_FULL:
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL,
                        "key '%.*s' has %d pending reservations, the most a key may hold; settle some or wait for "
                        "their deadlines", key_shown(it->klen), it->key, THROTTLE_MAX_PENDING);
    case THROTTLE_RSV_TOO_LARGE:
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, field, "'%s' %lld is more than the limiter's capacity (%lld)", field,
                        (long long)cost, (long long)capacity);
    case THROTTLE_RSV_ALGO:
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "algorithm",
                        "%s takes no reservations or refunds (gcra, token_bucket, sliding_window and fixed_window do)",
                        throttle_algo_name(it->p.algo));
    default:
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
}

static bool run_reserve(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_throttle_reserve_args_t *a = args;
    cmd_throttle_reserve_res_t *out = res;
    memset(out, 0, sizeof(*out));
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        if (!cmd_key_open(ctx, a->it.key, a->it.klen, &throttle_type, CMD_WRITE, &h))
            return false;
        const throttle_t *t = cmd_key_value(&h);
        if (algo_conflict(ctx, &a->it, t)) {
            cmd_key_close(&h, false);
            return false;
        }
        throttle_t *next;
        int64_t expire;
        int rc = throttle_reserve(t, &a->it.p, ctx->now_ns, a->it.quantity, a->ttl_ns, a->on_expiry, &out->r, &next,
                                  &out->id, &expire);
        if (rc != CORE_OK) {
            cmd_key_close(&h, false);
            return rsv_fail(ctx, rc, "quantity", &a->it, a->it.quantity, throttle_capacity(&a->it.p));
        }
        if (!next) {   /* limited: nothing recorded */
            cmd_key_close(&h, false);
            return true;
        }
        out->deadline_ns = ctx->now_ns + a->ttl_ns;
        bool again;
        if (!store_state(ctx, &h, next, expire, &attempts, &again))
            return false;
        if (!again)
            return true;
    }
}

static bool run_settle(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_throttle_settle_args_t *a = args;
    cmd_throttle_settle_res_t *out = res;
    memset(out, 0, sizeof(*out));
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        if (!cmd_key_open(ctx, a->key, a->klen, &throttle_type, CMD_WRITE, &h))
            return false;
        const throttle_t *t = cmd_key_value(&h);
        throttle_t *next;
        throttle_reservation_t was;
        int64_t expire;
        int rc = throttle_settle(t, a->id, a->actual, ctx->now_ns, &next, &was, &expire);
        if (rc == THROTTLE_RSV_UNKNOWN) {
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_NOT_FOUND, "reservation",
                            "key '%.*s' has no pending reservation %llu (never made, settled already, or past its "
                            "deadline)", key_shown(a->klen), a->key, (unsigned long long)a->id);
        }
        if (rc != CORE_OK) {
            cmd_key_close(&h, false);
            cmd_throttle_item_t it = { .key = a->key, .klen = a->klen, .p = was.p };
            return rsv_fail(ctx, rc, "actual", &it, a->actual, throttle_capacity(&was.p));
        }
        out->reserved = was.cost;
        out->algo = was.p.algo;
        throttle_check(next, &was.p, ctx->now_ns, 0, &out->r);
        bool again;
        if (!store_state(ctx, &h, next, expire, &attempts, &again))
            return false;
        if (!again)
            return true;
    }
}

static bool run_refund(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_throttle_item_t *it = args;
    rl_result_t *r = &((cmd_throttle_res_t *)res)->r;
    if (!reservable(it->p.algo) || it->quantity > throttle_capacity(&it->p))
        return rsv_fail(ctx, reservable(it->p.algo) ? THROTTLE_RSV_TOO_LARGE : THROTTLE_RSV_ALGO, "quantity", it,
                        it->quantity, throttle_capacity(&it->p));
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        if (!cmd_key_open(ctx, it->key, it->klen, &throttle_type, CMD_WRITE, &h))
            return false;
        const throttle_t *t = cmd_key_value(&h);
        if (algo_conflict(ctx, it, t)) {
            cmd_key_close(&h, false);
            return false;
        }
        if (!t) {   /* an absent key is full: nothing to give back */
            throttle_check(NULL, &it->p, ctx->now_ns, 0, r);
            cmd_key_close(&h, false);
            return true;
        }
        throttle_t *next;
        int64_t expire;
        int rc = throttle_refund(t, &it->p, ctx->now_ns, it->quantity, &next, &expire);
        if (rc != CORE_OK) {
            cmd_key_close(&h, false);
            return rsv_fail(ctx, rc, "quantity", it, it->quantity, throttle_capacity(&it->p));
        }
        throttle_check(next, &it->p, ctx->now_ns, 0, r);
        bool again;
        if (!store_state(ctx, &h, next, expire, &attempts, &again))
            return false;
        if (!again)
            return true;
    }
}

static bool run_probe(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_throttle_item_t *it = args;
    rl_result_t *r = &((cmd_throttle_res_t *)res)->r;
    cmd_key_t h;
    if (!cmd_key_open(ctx, it->key, it->klen, &throttle_type, CMD_READ, &h))
        return false;
    const throttle_t *t = cmd_key_value(&h);
    if (algo_conflict(ctx, it, t)) {
        cmd_key_close(&h, false);
        return false;
    }
    throttle_check(t, &it->p, ctx->now_ns, it->quantity, r);
    cmd_key_close(&h, false);
    return true;
}

const cmd_def_t CMD_THROTTLE_RESERVE = { "THROTTLE.RESERVE", CMD_ID_THROTTLE_RESERVE, CMD_F_WRITE | CMD_F_DENYOOM,
                                         CMD_ACCESS_RATELIMIT, run_reserve, encode_reserve, decode_reserve,
                                         sizeof(cmd_throttle_reserve_args_t), sizeof(cmd_throttle_reserve_res_t),
                                         cmd_keys_first };
const cmd_def_t CMD_THROTTLE_SETTLE = { "THROTTLE.SETTLE", CMD_ID_THROTTLE_SETTLE, CMD_F_WRITE | CMD_F_DENYOOM,
                                        CMD_ACCESS_RATELIMIT, run_settle, encode_settle, decode_settle,
                                        sizeof(cmd_throttle_settle_args_t), sizeof(cmd_throttle_settle_res_t),
                                        cmd_keys_first };
const cmd_def_t CMD_THROTTLE_REFUND = { "THROTTLE.REFUND", CMD_ID_THROTTLE_REFUND, CMD_F_WRITE | CMD_F_DENYOOM,
                                        CMD_ACCESS_RATELIMIT, run_refund, encode_refund, decode_refund,
                                        sizeof(cmd_throttle_item_t), sizeof(cmd_throttle_res_t), cmd_keys_first };
const cmd_def_t CMD_THROTTLE_PROBE = { "THROTTLE.PROBE", CMD_ID_THROTTLE_PROBE, 0, CMD_ACCESS_RATELIMIT,
                                       run_probe, NULL, NULL, sizeof(cmd_throttle_item_t), sizeof(cmd_throttle_res_t),
                                       cmd_keys_first };

/* ------------------------------------------------------------------------ */
/* The table's rows                                                         */
/* ------------------------------------------------------------------------ */

/* The decisions share run_decision; each checks that it was given its own
 * algorithm's parameters (its record holds no algorithm: the operation
 * names it). */
#define DECISION_DEF(var, name, id, alg, suffix)                                                                      \
    static bool run_##suffix(cmd_ctx_t *ctx, const void *args, void *res)                                         \
    {                                                                                                            \
        if (((const cmd_throttle_item_t *)args)->p.algo != (alg))                                                \
            return cmd_fail(ctx, CMD_E_INTERNAL, NULL, "%s given another algorithm's parameters", name);          \
        return run_decision(ctx, args, res);                                                                     \
    }                                                                                                            \
    static bool decode_##suffix(rbuf_t *in, void *args, const char **why)                                        \
    {                                                                                                            \
        return get_version(in, why) && get_item(in, (alg), args, why);                                           \
    }                                                                                                            \
    const cmd_def_t var = { name,                                                                                \
                            id,                                                                                  \
                            CMD_F_WRITE | CMD_F_DENYOOM,                                                         \
                            CMD_ACCESS_RATELIMIT,                                                                \
                            run_##suffix,                                                                        \
                            encode_decision,                                                                     \
                            decode_##suffix,                                                                     \
                            sizeof(cmd_throttle_item_t),                                                         \
                            sizeof(cmd_throttle_res_t),                                                          \
                            cmd_keys_first }

DECISION_DEF(CMD_CL_THROTTLE, "CL.THROTTLE", CMD_ID_CL_THROTTLE, THROTTLE_GCRA, gcra);
DECISION_DEF(CMD_THROTTLE_SLIDING_LOG, "THROTTLE.SLIDING_LOG", CMD_ID_THROTTLE_SLIDING_LOG, THROTTLE_SLIDING_LOG,
             sliding_log);
DECISION_DEF(CMD_THROTTLE_SLIDING_WINDOW, "THROTTLE.SLIDING_WINDOW", CMD_ID_THROTTLE_SLIDING_WINDOW,
             THROTTLE_SLIDING_WINDOW, sliding_window);
DECISION_DEF(CMD_THROTTLE_FIXED_WINDOW, "THROTTLE.FIXED_WINDOW", CMD_ID_THROTTLE_FIXED_WINDOW, THROTTLE_FIXED_WINDOW,
             fixed_window);
DECISION_DEF(CMD_THROTTLE_TOKEN_BUCKET, "THROTTLE.TOKEN_BUCKET", CMD_ID_THROTTLE_TOKEN_BUCKET, THROTTLE_TOKEN_BUCKET,
             token_bucket);

/* Each item's key, a front-end's or a record's. */
static bool keys_batch(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_throttle_batch_args_t *a = args;
    if (a->items) {
        for (size_t i = 0; i < a->n; i++)
            if (!visit(ud, a->items[i].key, a->items[i].klen))
                return false;
        return true;
    }
    rbuf_t in = rbuf_make(a->packed, a->packed_len);
    const char *why;
    for (size_t i = 0; i < a->n; i++) {
        cmd_throttle_item_t it;
        if (!get_batch_item(&in, &it, &why) || !visit(ud, it.key, it.klen))
            return false;
    }
    return true;
}

const cmd_def_t CMD_THROTTLE_BATCH = { "THROTTLE.BATCH", CMD_ID_THROTTLE_BATCH, CMD_F_WRITE | CMD_F_DENYOOM,
                                       CMD_ACCESS_RATELIMIT, run_batch, encode_batch, decode_batch,
                                       sizeof(cmd_throttle_batch_args_t), sizeof(cmd_throttle_batch_res_t),
                                       keys_batch };
const cmd_def_t CMD_THROTTLE_RESET = { "THROTTLE.RESET", CMD_ID_THROTTLE_RESET, CMD_F_WRITE, CMD_ACCESS_WRITE,
                                       run_reset, encode_reset, decode_reset, sizeof(cmd_throttle_reset_args_t),
                                       sizeof(cmd_throttle_reset_res_t), cmd_keys_first };

const cmd_def_t *cmd_throttle_def(throttle_algo_t algo)
{
    static const cmd_def_t *const by_algo[THROTTLE_ALGO_MAX + 1] = {
        [THROTTLE_GCRA] = &CMD_CL_THROTTLE,
        [THROTTLE_SLIDING_LOG] = &CMD_THROTTLE_SLIDING_LOG,
        [THROTTLE_SLIDING_WINDOW] = &CMD_THROTTLE_SLIDING_WINDOW,
        [THROTTLE_FIXED_WINDOW] = &CMD_THROTTLE_FIXED_WINDOW,
        [THROTTLE_TOKEN_BUCKET] = &CMD_THROTTLE_TOKEN_BUCKET,
    };
    return (unsigned)algo <= THROTTLE_ALGO_MAX ? by_algo[algo] : NULL;
}
