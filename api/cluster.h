/*
 * cluster.h - the cluster over HTTP (deploy/cluster/README.md).  Slot
 * ownership, the map and the checks are the command layer's
 * (cmd/cluster.h, which has the rules); here are the cluster's routes and
 * its parts of /info and /metrics:
 *
 *   GET /cluster            the map this node holds
 *   GET /cluster/slot?key=  a key's slot (and owner in a cluster)
 *   PUT /admin/cluster      installs a map (and writes --cluster FILE)
 *
 * Over HTTP a request names its keys in the path, or, where the key is in
 * the body or query, in X-Tally-Key (the routing key a proxy reads), and
 * says X-Tally-Asking: 1 after an ASK; a refusal is 421 MOVED / ASK with
 * X-Tally-Owner (host:port), X-Tally-Owner-Node and X-Tally-Slot and the
 * same in the error body, 503 TRYAGAIN with Retry-After, 400 CROSSSLOT.
 */
#ifndef TALLY_API_CLUSTER_H
#define TALLY_API_CLUSTER_H

#include <jansson.h>

#include "cmd/cluster.h"
#include "core/codec.h"

/* Adds "cluster" to /info's object: node, epoch, slots (ranges "lo-hi"),
 * slots_owned, migrating and importing ranges, and the answers counted. */
void api_cluster_info(cmd_cluster_t *c, json_t *info);
/* The cluster's lines of /metrics: tally_cluster_epoch,
 * tally_cluster_slots_owned/_migrating/_importing and
 * tally_cluster_redirects_total{kind="moved|ask|tryagain|crossslot"}. */
void api_cluster_metrics(cmd_cluster_t *c, wbuf_t *out);

#endif
