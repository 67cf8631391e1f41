/*
 * cluster.c - the cluster over HTTP (slot ownership itself and its checks
 * are the command layer's: cmd/cluster.h): the routes
 *
 *   GET /cluster                  -> {"self","epoch","nodes":[{"name","address"}],
 *                                     "slots":[{"from","to","node"[,"migrating_to"]}],"map":"<text>"}
 *   GET /cluster/slot?key=K       -> {"key","routing_key","slot"[,"node","address"]}
 *   PUT /admin/cluster {"map":"<text>"} -> installs the map (and writes --cluster FILE)
 *
 * /cluster/slot computes a key's slot with or without a cluster, so a
 * client (or the resharding tool) never needs its own CRC16.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/cluster.h"
#include "core/slot.h"

/* The label of each counted answer in /info and /metrics. */
static const char *const answer_names[CMD_CLUSTER_ANSWER_COUNT] = { "moved", "ask", "tryagain", "crossslot" };

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

void api_cluster_info(cmd_cluster_t *c, json_t *info)
{
    unsigned owned = 0, migrating = 0, importing = 0;
    json_t *answers = json_object();
    for (int a = 0; a < CMD_CLUSTER_ANSWER_COUNT; a++)
        json_object_set_new(answers, answer_names[a], json_integer((json_int_t)cmd_cluster_answered(c, a)));
    int self;
    const char *self_name;
    const cmap_t *m = cmd_cluster_read(c, &self, &self_name);
    json_t *o = json_pack("{s:s,s:I,s:o,s:o,s:o,s:o}", "node", self_name, "epoch", (json_int_t)(m ? m->epoch : 0),
                          "slots", m ? ranges_where(m, self, slot_owned, &owned) : json_array(), "migrating",
                          m ? ranges_where(m, self, slot_migrating, &migrating) : json_array(), "importing",
                          m ? ranges_where(m, self, slot_importing, &importing) : json_array(), "answers", answers);
    json_object_set_new(o, "slots_owned", json_integer(m ? (json_int_t)owned : 0));
    cmd_cluster_read_end(c);
    json_object_set_new(info, "cluster", o);
}

void api_cluster_metrics(cmd_cluster_t *c, wbuf_t *out)
{
    uint64_t epoch = 0;
    unsigned owned = 0, migrating = 0, importing = 0;
    int self;
    const cmap_t *m = cmd_cluster_read(c, &self, NULL);
    for (unsigned s = 0; m && s < SLOT_COUNT; s++) {
        owned += slot_owned(m, self, s);
        migrating += slot_migrating(m, self, s);
        importing += slot_importing(m, self, s);
    }
    epoch = m ? m->epoch : 0;
    cmd_cluster_read_end(c);
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
    for (int a = 0; a < CMD_CLUSTER_ANSWER_COUNT; a++) {
        n = snprintf(buf, sizeof(buf), "tally_cluster_redirects_total{kind=\"%s\"} %llu\n", answer_names[a],
                     (unsigned long long)cmd_cluster_answered(c, a));
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
    cmd_cluster_t *c = srv->cluster;
    if (!c) {
        api_error(resp, API_E_NOT_FOUND, "this node is not in a cluster (start it with --cluster FILE)");
        return;
    }
    const char *self_name;
    const cmap_t *m = cmd_cluster_read(c, NULL, &self_name);
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
    json_t *o = json_pack("{s:s,s:I,s:o,s:o,s:s%}", "self", self_name, "epoch", (json_int_t)m->epoch, "nodes", nodes,
                          "slots", slots, "map", m->text, m->text_len);
    cmd_cluster_read_end(c);
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
    cmd_cluster_t *c = srv->cluster;
    if (c) {
        const cmap_t *m = cmd_cluster_read(c, NULL, NULL);
        const cmap_node_t *n = &m->nodes[m->owner[slot]];
        json_object_set_new(o, "node", json_string(n->name));
        json_object_set_new(o, "address", json_string(n->addr));
        if (m->migrating_to[slot] >= 0)
            json_object_set_new(o, "migrating_to", json_string(m->nodes[m->migrating_to[slot]].name));
        cmd_cluster_read_end(c);
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
    if (!cmd_cluster_set(srv->cluster, text, len, true, err, sizeof(err))) {
        api_error_field(resp, API_E_BAD_REQUEST, "map", "%s", err);
        return;
    }
    api_json(resp, 200, json_pack("{s:I}", "epoch", (json_int_t)cmd_cluster_epoch(srv->cluster)));
}

static const api_route_t routes[] = {
    { API_GET, "/cluster",       h_cluster, 0, API_ACCESS_TOKEN, NULL },
    { API_GET, "/cluster/slot",  h_cluster_slot, 0, API_ACCESS_TOKEN, NULL },
    { API_PUT, "/admin/cluster", h_admin_cluster, API_ROUTE_READS, API_ACCESS_ADMIN, NULL },
};

API_FAMILY(cluster);
