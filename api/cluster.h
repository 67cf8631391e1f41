/*
 * cluster.h - this node's part of a cluster (deploy/cluster/README.md): the
 * map of who owns each of the 16384 slots (core/clustermap.h), and the
 * checks that make a node serve only the keys it owns.
 *
 * The checks (all skipped on journal replay, which re-runs what was served):
 *
 *   - A request's keys must all be in one slot (400 CROSSSLOT), and in the
 *     slot of its X-Tally-Key header when it sends one (the routing key a
 *     proxy read for a route whose keys are in the body or query).
 *   - The slot must be this node's: otherwise 421 MOVED naming the owner
 *     (X-Tally-Owner: its host:port, X-Tally-Owner-Node, X-Tally-Slot; the
 *     same in the error body), and nothing is read or changed.
 *   - A slot migrating away (the map's `migrate` line with this node as
 *     source) is served only for keys still here: when none of the
 *     request's keys is here it is 421 ASK naming the target, when only
 *     some are, 503 TRYAGAIN.  Checked under the keys' shard locks, so a
 *     key is either still here and served here, or gone (moved by the
 *     resharding tool under the same lock) and answered elsewhere.
 *   - A slot migrating to this node is served only to a request that says
 *     X-Tally-Asking: 1 (Redis's ASKING, after an ASK); otherwise MOVED to
 *     the owner.
 *
 * api_cluster_route_check runs in the router before the handler (the path's
 * key or X-Tally-Key), so a misdirected request is refused before a handler
 * evicts for room; api_keys_lock (api/key.c) runs api_cluster_keys_check on
 * every key it locks, with the locks held - the choke point every handler
 * passes through.
 *
 * The map is replaced whole (SIGHUP / POST /admin/reload re-read --cluster
 * FILE; PUT /admin/cluster installs a new map and writes the file): a map
 * whose epoch is older than the current one is refused, as is a different
 * map under the same epoch.  Readers hold a read lock only while checking.
 */
#ifndef TALLY_API_CLUSTER_H
#define TALLY_API_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "api/api.h"
#include "core/clustermap.h"

/* Writes an accepted map's text where the service keeps it (--cluster FILE),
 * before it is installed; false with a message refuses the map. */
typedef bool (*api_cluster_store_fn)(void *ud, const char *text, size_t len, char *err, size_t errlen);

api_cluster_t *api_cluster_create(const char *self, api_cluster_store_fn store, void *ud);
void api_cluster_free(api_cluster_t *c);

/* Installs the map in text (store: also write it with the store function).
 * False with a message when it does not parse, does not name this node,
 * has an older epoch, or another map has this epoch; the current map stays. */
bool api_cluster_set(api_cluster_t *c, const char *text, size_t len, bool store, char *err, size_t errlen);
uint64_t api_cluster_epoch(api_cluster_t *c);

/* The answers counted for /info and /metrics. */
typedef enum api_cluster_answer {
    API_CLUSTER_MOVED,       /* 421 MOVED */
    API_CLUSTER_ASK,         /* 421 ASK */
    API_CLUSTER_TRYAGAIN,    /* 503 TRYAGAIN */
    API_CLUSTER_CROSSSLOT,   /* 400 CROSSSLOT */
    API_CLUSTER_ANSWER_COUNT
} api_cluster_answer_t;

/* Adds "cluster" to /info's object: node, epoch, slots (ranges "lo-hi"),
 * slots_owned, migrating and importing ranges, and the answers counted. */
void api_cluster_info(api_cluster_t *c, json_t *info);
/* The cluster's lines of /metrics: tally_cluster_epoch,
 * tally_cluster_slots_owned/_migrating/_importing and
 * tally_cluster_redirects_total{kind="moved|ask|tryagain|crossslot"}. */
void api_cluster_metrics(api_cluster_t *c, wbuf_t *out);

/* The router's check of the path's {key} (or X-Tally-Key); true when this
 * node may go on (or there is no cluster, or no key). */
bool api_cluster_route_check(api_server_t *srv, const api_req_t *req, api_resp_t *resp);
/* The keys' check; `locked`: the caller holds their shard locks, so keys of
 * a migrating slot are looked up.  False with the answer set. */
bool api_cluster_keys_check(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const ks_key_t *keys,
                            size_t n, bool locked);

#endif
