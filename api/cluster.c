/*
 * cluster.c - slot ownership (api/cluster.h has the rules), and the
 * cluster's routes:
 *
 *   GET /cluster                  -> {"self","epoch","nodes":[{"name","address"}],
 *                                     "slots":[{"from","to","node"[,"migrating_to"]}],"map":"<text>"}
 *   GET /cluster/slot?key=K       -> {"key","routing_key","slot"[,"node","address"]}
 *   PUT /admin/cluster {"map":"<text>"} -> installs the map (and writes --cluster FILE)
 *
 * /cluster/slot computes a key's slot with or without a cluster, so a
 * client (or the resharding tool) never needs its own CRC32.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api/cluster.h"

struct api_cluster {
    pthread_rwlock_t lock;
    cmap_t *map;                 /* NULL until the first map is installed */
    int self;                    /* this node's index in map */
    char self_name[CMAP_NAME_MAX + 1];
    api_cluster_store_fn store;
    void *ud;
    pthread_mutex_t set_mu;      /* one api_cluster_set at a time (store, then swap) */
    _Atomic uint64_t answered[API_CLUSTER_ANSWER_COUNT];   /* MOVED, ASK, TRYAGAIN, CROSSSLOT answers */
};

/* The label of each counted answer in /info and /metrics. */
static const char *const answer_names[API_CLUSTER_ANSWER_COUNT] = { "moved", "ask", "tryagain", "crossslot" };

static void count_answer(api_cluster_t *c, api_cluster_answer_t a)
{
    atomic_fetch_add_explicit(&c->answered[a], 1, memory_order_relaxed);
}

api_cluster_t *api_cluster_create(const char *self, api_cluster_store_fn store, void *ud)
{
    api_cluster_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_rwlock_init(&c->lock, NULL);
    pthread_mutex_init(&c->set_mu, NULL);
    snprintf(c->self_name, sizeof(c->self_name), "%s", self);
    c->store = store;
    c->ud = ud;
    return c;
}

void api_cluster_free(api_cluster_t *c)
{
    if (!c)
        return;
    cmap_free(c->map);
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->set_mu);
    free(c);
}

bool api_cluster_set(api_cluster_t *c, const char *text, size_t len, bool store, char *err, size_t errlen)
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

uint64_t api_cluster_epoch(api_cluster_t *c)
{
    pthread_rwlock_rdlock(&c->lock);
    uint64_t e = c->map ? c->map->epoch : 0;
    pthread_rwlock_unlock(&c->lock);
    return e;
}

/* ------------------------------------------------------------------------ */
/* The checks                                                               */
/* ------------------------------------------------------------------------ */

/* 421 naming the node to ask instead (MOVED: the owner; ASK: the target of
 * a migration), as headers and in the error body. */
static void answer_elsewhere(api_cluster_t *c, api_resp_t *resp, api_code_t code, const cmap_t *m, int node,
                             unsigned slot)
{
    count_answer(c, code == API_E_MOVED ? API_CLUSTER_MOVED : API_CLUSTER_ASK);
    const cmap_node_t *n = &m->nodes[node];
    char msg[512];
    snprintf(msg, sizeof(msg),
             code == API_E_MOVED ? "slot %u is served by node %s at %s: send the request there"
                                 : "slot %u is migrating to node %s at %s and this key has left: send the request "
                                   "there with X-Tally-Asking: 1",
             slot, n->name, n->addr);
    json_t *e = json_pack("{s:s,s:s,s:i,s:s,s:s,s:I}", "code", api_code_name(code), "message", msg, "slot", (int)slot,
                          "node", n->name, "address", n->addr, "epoch", (json_int_t)m->epoch);
    api_json(resp, api_code_status(code), json_pack("{s:o}", "error", e));
    api_add_header(resp, "X-Tally-Owner", "%s", n->addr);
    api_add_header(resp, "X-Tally-Owner-Node", "%s", n->name);
    api_add_header(resp, "X-Tally-Slot", "%u", slot);
}

static const char *header(const api_req_t *req, const char *name)
{
    return req->header ? req->header(req->hctx, name) : NULL;
}

/* The slot the request's keys share, from its X-Tally-Key header and the
 * keys (-1: none given); false (400 CROSSSLOT set) when they differ. */
static bool request_slot(api_cluster_t *c, const api_req_t *req, api_resp_t *resp, const ks_key_t *keys, size_t n,
                         int *slot)
{
    const char *hk = header(req, "X-Tally-Key");
    int s = hk ? (int)slot_of(hk, strlen(hk)) : -1;
    for (size_t i = 0; i < n; i++) {
        int ks = (int)slot_of(keys[i].p, keys[i].len);
        if (s >= 0 && ks != s) {
            count_answer(c, API_CLUSTER_CROSSSLOT);
            if (hk)
                api_error(resp, API_E_CROSSSLOT, "key \"%.*s\" (slot %d) is not in the slot of X-Tally-Key (%d)%s",
                          (int)(keys[i].len > 100 ? 100 : keys[i].len), keys[i].p, ks, s,
                          ": a request's keys must share one slot (use a hash tag: {tag}...)");
            else
                api_error(resp, API_E_CROSSSLOT, "the request's keys are in different slots (%d and %d): in a "
                          "cluster a request's keys must share one slot (use a hash tag: {tag}...)", s, ks);
            return false;
        }
        s = ks;
    }
    *slot = s;
    return true;
}

/* The ownership rules for slot under map m (read-locked). */
static bool slot_check(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const cmap_t *m, int self,
                       unsigned slot, const ks_key_t *keys, size_t n, bool locked)
{
    int owner = m->owner[slot], to = m->migrating_to[slot];
    if (owner != self) {
        const char *asking = header(req, "X-Tally-Asking");
        if (to == self && asking && strcmp(asking, "1") == 0)
            return true;   /* importing, and the client was sent here by an ASK */
        answer_elsewhere(srv->cluster, resp, API_E_MOVED, m, owner, slot);
        return false;
    }
    if (to < 0 || !locked || n == 0)
        return true;
    /* migrating away: serve only keys still here */
    size_t here = 0;
    for (size_t i = 0; i < n; i++)
        if (ks_find(srv->ks, &keys[i], api_now_ms(req)))
            here++;
    if (here == n)
        return true;
    if (here == 0) {
        answer_elsewhere(srv->cluster, resp, API_E_ASK, m, to, slot);
        return false;
    }
    count_answer(srv->cluster, API_CLUSTER_TRYAGAIN);
    api_error(resp, API_E_TRYAGAIN, "slot %u is migrating and only some of the request's keys have moved: retry", slot);
    api_add_header(resp, "Retry-After", "1");
    return false;
}

bool api_cluster_keys_check(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const ks_key_t *keys,
                            size_t n, bool locked)
{
    api_cluster_t *c = srv->cluster;
    if (!c || req->replay)
        return true;
    int slot;
    if (!request_slot(c, req, resp, keys, n, &slot))
        return false;
    if (slot < 0)
        return true;
    pthread_rwlock_rdlock(&c->lock);
    bool ok = !c->map || slot_check(srv, req, resp, c->map, c->self, (unsigned)slot, keys, n, locked);
    pthread_rwlock_unlock(&c->lock);
    return ok;
}

bool api_cluster_route_check(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    if (!srv->cluster || req->replay)
        return true;
    ks_key_t k = { 0 };
    if (!(req->route->flags & API_ROUTE_KEY_TEMPLATE))
        k.p = api_path_param(req, "key", &k.len);
    return api_cluster_keys_check(srv, req, resp, &k, k.p ? 1 : 0, false);
}

/* ------------------------------------------------------------------------ */
/* /info and /metrics                                                       */
/* ------------------------------------------------------------------------ */

/* The ranges of slots s for which want(m, self, s) holds, as "lo-hi"
 * strings (a single slot as "s"); *count gets the number of slots. */
typedef bool (*slot_pred_fn)(const cmap_t *m, int self, unsigned s);

static json_t *ranges_where(const cmap_t *m, int self, slot_pred_fn want, unsigned *count)
{
    json_t *a = json_array();
    *count = 0;
    for (unsigned s = 0; s < SLOT_COUNT; s++) {
        if (!want(m, self, s))
            continue;
        unsigned e = s;
        while (e + 1 < SLOT_COUNT && want(m, self, e + 1))
            e++;
        json_array_append_new(a, e == s ? json_sprintf("%u", s) : json_sprintf("%u-%u", s, e));
        *count += e - s + 1;
        s = e;
    }
    return a;
}

static bool slot_owned(const cmap_t *m, int self, unsigned s) { return m->owner[s] == self; }
static bool slot_migrating(const cmap_t *m, int self, unsigned s)
{
    return m->owner[s] == self && m->migrating_to[s] >= 0;
}
static bool slot_importing(const cmap_t *m, int self, unsigned s) { return m->migrating_to[s] == self; }

void api_cluster_info(api_cluster_t *c, json_t *info)
{
    unsigned owned = 0, migrating = 0, importing = 0;
    json_t *answers = json_object();
    for (int a = 0; a < API_CLUSTER_ANSWER_COUNT; a++)
        json_object_set_new(answers, answer_names[a],
                            json_integer((json_int_t)atomic_load_explicit(&c->answered[a], memory_order_relaxed)));
    pthread_rwlock_rdlock(&c->lock);
    const cmap_t *m = c->map;
    json_t *o = json_pack("{s:s,s:I,s:o,s:o,s:o,s:o}", "node", c->self_name, "epoch", (json_int_t)(m ? m->epoch : 0),
                          "slots", m ? ranges_where(m, c->self, slot_owned, &owned) : json_array(), "migrating",
                          m ? ranges_where(m, c->self, slot_migrating, &migrating) : json_array(), "importing",
                          m ? ranges_where(m, c->self, slot_importing, &importing) : json_array(), "answers", answers);
    json_object_set_new(o, "slots_owned", json_integer(m ? (json_int_t)owned : 0));
    pthread_rwlock_unlock(&c->lock);
    json_object_set_new(info, "cluster", o);
}

void api_cluster_metrics(api_cluster_t *c, wbuf_t *out)
{
    uint64_t epoch = 0;
    unsigned owned = 0, migrating = 0, importing = 0;
    pthread_rwlock_rdlock(&c->lock);
    const cmap_t *m = c->map;
    for (unsigned s = 0; m && s < SLOT_COUNT; s++) {
        owned += slot_owned(m, c->self, s);
        migrating += slot_migrating(m, c->self, s);
        importing += slot_importing(m, c->self, s);
    }
    epoch = m ? m->epoch : 0;
    pthread_rwlock_unlock(&c->lock);
    char buf[1536];
    int n = snprintf(buf, sizeof(buf),
                     "# HELP tally_cluster_epoch The epoch of the cluster map this node holds.\n"
                     "# TYPE tally_cluster_epoch gauge\n"
                     "tally_cluster_epoch %" PRIu64 "\n"
                     "# HELP tally_cluster_slots_owned Slots this node owns (of 16384).\n"
                     "# TYPE tally_cluster_slots_owned gauge\n"
                     "tally_cluster_slots_owned %u\n"
                     "# HELP tally_cluster_slots_migrating Slots this node owns that are moving to another node.\n"
                     "# TYPE tally_cluster_slots_migrating gauge\n"
                     "tally_cluster_slots_migrating %u\n"
                     "# HELP tally_cluster_slots_importing Slots moving to this node from their owner.\n"
                     "# TYPE tally_cluster_slots_importing gauge\n"
                     "tally_cluster_slots_importing %u\n"
                     "# HELP tally_cluster_redirects_total Requests answered 421 MOVED or ASK, 503 TRYAGAIN, or 400 "
                     "CROSSSLOT by the cluster's checks.\n"
                     "# TYPE tally_cluster_redirects_total counter\n",
                     epoch, owned, migrating, importing);
    wbuf_put_bytes(out, buf, (size_t)n);
    for (int a = 0; a < API_CLUSTER_ANSWER_COUNT; a++) {
        n = snprintf(buf, sizeof(buf), "tally_cluster_redirects_total{kind=\"%s\"} %llu\n", answer_names[a],
                     (unsigned long long)atomic_load_explicit(&c->answered[a], memory_order_relaxed));
        wbuf_put_bytes(out, buf, (size_t)n);
    }
}

/* ------------------------------------------------------------------------ */
/* Routes                                                                   */
/* ------------------------------------------------------------------------ */

static void h_cluster(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    if (!api_no_query(req, resp))
        return;
    api_cluster_t *c = srv->cluster;
    if (!c) {
        api_error(resp, API_E_NOT_FOUND, "this node is not in a cluster (start it with --cluster FILE)");
        return;
    }
    pthread_rwlock_rdlock(&c->lock);
    const cmap_t *m = c->map;
    json_t *nodes = json_array(), *slots = json_array();
    for (size_t i = 0; i < m->nnodes; i++)
        json_array_append_new(nodes, json_pack("{s:s,s:s}", "name", m->nodes[i].name, "address", m->nodes[i].addr));
    for (unsigned s = 0; s < SLOT_COUNT;) {
        unsigned e = cmap_run_end(m, s, true);
        json_t *r = json_pack("{s:i,s:i,s:s}", "from", (int)s, "to", (int)e, "node", m->nodes[m->owner[s]].name);
        if (m->migrating_to[s] >= 0)
            json_object_set_new(r, "migrating_to", json_string(m->nodes[m->migrating_to[s]].name));
        json_array_append_new(slots, r);
        s = e + 1;
    }
    json_t *o = json_pack("{s:s,s:I,s:o,s:o,s:s%}", "self", c->self_name, "epoch", (json_int_t)m->epoch, "nodes", nodes,
                          "slots", slots, "map", m->text, m->text_len);
    pthread_rwlock_unlock(&c->lock);
    api_json(resp, 200, o);
}

static void h_cluster_slot(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "key", NULL };
    const char *key;
    size_t klen;
    if (!api_query_allow(req, resp, params) || !api_query_string(req, resp, "key", true, &key, &klen))
        return;
    size_t rlen;
    const char *rk = slot_routing_key(key, klen, &rlen);
    unsigned slot = slot_of(key, klen);
    json_t *o = json_pack("{s:s%,s:s%,s:i}", "key", key, klen, "routing_key", rk, rlen, "slot", (int)slot);
    api_cluster_t *c = srv->cluster;
    if (c) {
        pthread_rwlock_rdlock(&c->lock);
        const cmap_node_t *n = &c->map->nodes[c->map->owner[slot]];
        json_object_set_new(o, "node", json_string(n->name));
        json_object_set_new(o, "address", json_string(n->addr));
        if (c->map->migrating_to[slot] >= 0)
            json_object_set_new(o, "migrating_to", json_string(c->map->nodes[c->map->migrating_to[slot]].name));
        pthread_rwlock_unlock(&c->lock);
    }
    api_json(resp, 200, o);
}

static void h_admin_cluster(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "map", NULL };
    if (req->replay)
        return;
    json_t *body = api_body_object(req, resp, fields);
    const char *text;
    size_t len;
    if (!body || !api_no_query(req, resp) || !api_obj_string(resp, body, "map", true, &text, &len))
        return;
    if (!srv->cluster) {
        api_error(resp, API_E_BAD_REQUEST, "this node is not in a cluster (start it with --cluster FILE)");
        return;
    }
    char err[512];
    if (!api_cluster_set(srv->cluster, text, len, true, err, sizeof(err))) {
        api_error_field(resp, API_E_BAD_REQUEST, "map", "%s", err);
        return;
    }
    api_json(resp, 200, json_pack("{s:I}", "epoch", (json_int_t)api_cluster_epoch(srv->cluster)));
}

static const api_route_t routes[] = {
    { API_GET, "/cluster",       h_cluster, 0, API_ACCESS_TOKEN },
    { API_GET, "/cluster/slot",  h_cluster_slot, 0, API_ACCESS_TOKEN },
    { API_PUT, "/admin/cluster", h_admin_cluster, API_ROUTE_READS, API_ACCESS_ADMIN },
};

API_FAMILY(cluster, NULL, NULL, NULL);
