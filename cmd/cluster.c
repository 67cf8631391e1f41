/* cluster.c - slot ownership: see cluster.h. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cluster.h"
#include "core/slot.h"

struct cmd_cluster {
    pthread_rwlock_t lock;
    cmap_t *map;                 /* NULL until the first map is installed */
    int self;                    /* this node's index in map */
    char self_name[CMAP_NAME_MAX + 1];
    cmd_cluster_store_fn store;
    void *ud;
    pthread_mutex_t set_mu;      /* one cmd_cluster_set at a time (store, then swap) */
    _Atomic uint64_t answered[CMD_CLUSTER_ANSWER_COUNT];   /* MOVED, ASK, TRYAGAIN, CROSSSLOT answers */
};

static void count_answer(cmd_cluster_t *c, cmd_cluster_answer_t a)
{
    atomic_fetch_add_explicit(&c->answered[a], 1, memory_order_relaxed);
}

cmd_cluster_t *cmd_cluster_create(const char *self, cmd_cluster_store_fn store, void *ud)
{
    cmd_cluster_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_rwlock_init(&c->lock, NULL);
    pthread_mutex_init(&c->set_mu, NULL);
    snprintf(c->self_name, sizeof(c->self_name), "%s", self);
    c->store = store;
    c->ud = ud;
    return c;
}

void cmd_cluster_free(cmd_cluster_t *c)
{
    if (!c)
        return;
    cmap_free(c->map);
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->set_mu);
    free(c);
}

bool cmd_cluster_set(cmd_cluster_t *c, const char *text, size_t len, bool store, char *err, size_t errlen)
{
    cmap_t *m = cmap_parse(text, len, err, errlen);
    if (!m)
        return false;
    int self = cmap_node_index(m, c->self_name);
    if (self < 0) {
        snprintf(err, errlen, "the map has no node '%s' (this node's --cluster-node)", c->self_name);
        cmap_free(m);
        return false;
    }
    pthread_mutex_lock(&c->set_mu);
    pthread_rwlock_rdlock(&c->lock);
    const cmap_t *old = c->map;
    bool same = old && old->epoch == m->epoch && old->text_len == len && memcmp(old->text, text, len) == 0;
    bool ok = !old || m->epoch > old->epoch || same;
    if (!ok)
        snprintf(err, errlen, "the map's epoch %" PRIu64 " is %s the current epoch %" PRIu64
                 "%s: refused, the current map stays", m->epoch, m->epoch < old->epoch ? "older than" : "the same as",
                 old->epoch, m->epoch < old->epoch ? "" : " with different contents (bump the epoch)");
    pthread_rwlock_unlock(&c->lock);
    if (ok && !same && store && c->store && !c->store(c->ud, text, len, err, errlen))
        ok = false;
    if (ok && !same) {
        pthread_rwlock_wrlock(&c->lock);
        old = c->map;
        c->map = m;
        c->self = self;
        pthread_rwlock_unlock(&c->lock);
        cmap_free((cmap_t *)old);
    } else {
        cmap_free(m);
    }
    pthread_mutex_unlock(&c->set_mu);
    return ok;
}

uint64_t cmd_cluster_epoch(cmd_cluster_t *c)
{
    pthread_rwlock_rdlock(&c->lock);
    uint64_t e = c->map ? c->map->epoch : 0;
    pthread_rwlock_unlock(&c->lock);
    return e;
}

const cmap_t *cmd_cluster_read(cmd_cluster_t *c, int *self, const char **self_name)
{
    pthread_rwlock_rdlock(&c->lock);
    if (self)
        *self = c->self;
    if (self_name)
        *self_name = c->self_name;
    return c->map;
}

void cmd_cluster_read_end(cmd_cluster_t *c) { pthread_rwlock_unlock(&c->lock); }

uint64_t cmd_cluster_answered(cmd_cluster_t *c, cmd_cluster_answer_t a)
{
    return atomic_load_explicit(&c->answered[a], memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* The checks                                                               */
/* ------------------------------------------------------------------------ */

/* The node to ask instead (MOVED: the owner; ASK: the target of a
 * migration), in the message and in err's where, node, slot and epoch. */
static bool answer_elsewhere(cmd_ctx_t *ctx, cmd_code_t code, const cmap_t *m, int node, unsigned slot)
{
    count_answer(ctx->srv->cluster, code == CMD_E_MOVED ? CMD_CLUSTER_MOVED : CMD_CLUSTER_ASK);
    const cmap_node_t *n = &m->nodes[node];
    if (code == CMD_E_MOVED)
        cmd_fail(ctx, code, NULL, "slot %u is served by node %s at %s: send the request there", slot, n->name,
                 n->addr);
    else
        cmd_fail(ctx, code, NULL,
                 "slot %u is migrating to node %s at %s and this key has left: send the request there with "
                 "X-Tally-Asking: 1",
                 slot, n->name, n->addr);
    snprintf(ctx->err.where, sizeof(ctx->err.where), "%s", n->addr);
    snprintf(ctx->err.node, sizeof(ctx->err.node), "%s", n->name);
    ctx->err.slot = (int)slot;
    ctx->err.epoch = m->epoch;
    return false;
}

/* The slot the request's keys share, from its routing key and the keys
 * (-1: none given); false (CROSSSLOT set) when they differ. */
static bool request_slot(cmd_ctx_t *ctx, const ks_key_t *keys, size_t n, int *slot)
{
    const char *hk = ctx->routing_key;
    int s = hk ? (int)slot_of(hk, strlen(hk)) : -1;
    for (size_t i = 0; i < n; i++) {
        int ks = (int)slot_of(keys[i].p, keys[i].len);
        if (s >= 0 && ks != s) {
            count_answer(ctx->srv->cluster, CMD_CLUSTER_CROSSSLOT);
            if (hk)
                return cmd_fail(ctx, CMD_E_CROSSSLOT, NULL,
                                "key \"%.*s\" (slot %d) is not in the slot of X-Tally-Key (%d)%s",
                                (int)(keys[i].len > 100 ? 100 : keys[i].len), keys[i].p, ks, s,
                                ": a request's keys must share one slot (use a hash tag: {tag}...)");
            return cmd_fail(ctx, CMD_E_CROSSSLOT, NULL,
                            "the request's keys are in different slots (%d and %d): in a cluster a request's keys "
                            "must share one slot (use a hash tag: {tag}...)",
                            s, ks);
        }
        s = ks;
    }
    *slot = s;
    return true;
}

/* The ownership rules for slot under map m (read-locked). */
static bool slot_check(cmd_ctx_t *ctx, const cmap_t *m, int self, unsigned slot, const ks_key_t *keys, size_t n,
                       bool locked)
{
    int owner = m->owner[slot], to = m->migrating_to[slot];
    if (owner != self) {
        if (to == self && ctx->asking)
            return true;   /* importing, and the client was sent here by an ASK */
        return answer_elsewhere(ctx, CMD_E_MOVED, m, owner, slot);
    }
    if (to < 0 || !locked || n == 0)
        return true;
    /* migrating away: serve only keys still here */
    size_t here = 0;
    for (size_t i = 0; i < n; i++)
        if (ks_find(ctx->srv->ks, &keys[i], cmd_now_ms(ctx)))
            here++;
    if (here == n)
        return true;
    if (here == 0)
        return answer_elsewhere(ctx, CMD_E_ASK, m, to, slot);
    count_answer(ctx->srv->cluster, CMD_CLUSTER_TRYAGAIN);
    cmd_fail(ctx, CMD_E_TRYAGAIN, NULL, "slot %u is migrating and only some of the request's keys have moved: retry",
             slot);
    ctx->err.retry_after = 1;
    return false;
}

bool cmd_cluster_keys_check(cmd_ctx_t *ctx, const ks_key_t *keys, size_t n, bool locked)
{
    cmd_cluster_t *c = ctx->srv->cluster;
    if (!c || ctx->replay)
        return true;
    int slot = -1;
    if (!request_slot(ctx, keys, n, &slot))
        return false;
    if (slot < 0)
        return true;
    pthread_rwlock_rdlock(&c->lock);
    bool ok = !c->map || slot_check(ctx, c->map, c->self, (unsigned)slot, keys, n, locked);
    pthread_rwlock_unlock(&c->lock);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Keys outside this node's slots                                           */
/* ------------------------------------------------------------------------ */

struct misplaced {
    const cmap_t *m;
    int self;
    uint64_t count;
    char *example;
    size_t n;
    unsigned slot;
    int owner;
};

static void visit_misplaced(void *ud, ks_entry_t *e)
{
    struct misplaced *mp = ud;
    size_t klen;
    const char *key = ks_entry_key(e, &klen);
    unsigned s = slot_of(key, klen);
    if (mp->m->owner[s] == mp->self || mp->m->migrating_to[s] == mp->self)
        return;
    if (mp->count++ == 0) {
        snprintf(mp->example, mp->n, "%.*s", (int)(klen > 200 ? 200 : klen), key);
        mp->slot = s;
        mp->owner = mp->m->owner[s];
    }
}

uint64_t cmd_cluster_misplaced(cmd_cluster_t *c, ks_t *ks, int64_t now_ms, char *example, size_t n, unsigned *slot,
                               char *owner, size_t ownerlen)
{
    /* a shard's lock before the map's, the order requests take them in
     * (cmd_keys_lock, then cmd_cluster_keys_check) */
    struct misplaced mp = { .example = example, .n = n };
    for (unsigned i = 0; i < ks_shard_count(ks); i++) {
        ks_shard_t *sh = ks_shard_at(ks, i);
        ks_shard_lock(sh);
        pthread_rwlock_rdlock(&c->lock);
        mp.m = c->map;
        mp.self = c->self;
        uint64_t cursor = 0;
        if (mp.m)
            do
                ks_shard_scan(ks, sh, &cursor, 1024, now_ms, visit_misplaced, &mp);
            while (cursor != 0);
        pthread_rwlock_unlock(&c->lock);
        ks_shard_unlock(sh);
    }
    if (mp.count) {
        pthread_rwlock_rdlock(&c->lock);
        *slot = mp.slot;
        bool known = c->map && mp.owner >= 0 && (size_t)mp.owner < c->map->nnodes;
        snprintf(owner, ownerlen, "%s", known ? c->map->nodes[mp.owner].name : "?");
        pthread_rwlock_unlock(&c->lock);
    }
    return mp.count;
}
