/*
 * clusterwatch.h - the cluster map kept in etcd (--cluster etcd[:PREFIX]
 * with --coordinator; deploy/cluster/README.md, "The map in etcd").
 *
 * Layout under PREFIX (default CLUSTERWATCH_PREFIX_DEFAULT), the same for
 * every node of a cluster and for tally-reshard:
 *
 *   PREFIX/map       the map's text, exactly the --cluster FILE form (with
 *                    its epoch line): what every node serves
 *   PREFIX/reshard   the record of the reshard in progress, if any (JSON:
 *                    slots, source, target, step; tools/reshard has its
 *                    steps), written by tally-reshard only
 *
 * A node reads PREFIX/map at start (refusing to start without one), then
 * watches it on etcd's watch stream (/v3/watch, one long-lived HTTP
 * response under libcurl) from the revision it read, and installs each new
 * value as a --cluster reload does: epoch-fenced by cmd_cluster_set (an
 * older epoch, or another map under the same epoch, is refused and logged,
 * the current map stays).  When the stream breaks (a member lost, a
 * compaction) it reads the key again and watches from there, trying the
 * members in turn, so a change made while it was away is never missed.
 */
#ifndef TALLY_CLUSTERWATCH_H
#define TALLY_CLUSTERWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cluster.h"
#include "service/etcd.h"

#define CLUSTERWATCH_PREFIX_DEFAULT "/tally/cluster"
#define CLUSTERWATCH_PREFIX_MAX 256

typedef struct cluster_watch cluster_watch_t;

/* Whether a --cluster value is the etcd form ("etcd" or "etcd:/PREFIX");
 * *prefix gets the prefix (no trailing '/').  false: it names a file. */
bool clusterwatch_spec(const char *arg, char *prefix, size_t n);

/* Reads PREFIX/map (retrying for up to wait_ms while etcd does not answer)
 * and installs it in c, then watches it in a thread of its own.  NULL with
 * a message when no map could be read or c refuses it. */
cluster_watch_t *clusterwatch_start(etcd_client_t *etcd, const char *prefix, cmd_cluster_t *c, long wait_ms,
                                    char *err, size_t errlen);
void clusterwatch_stop(cluster_watch_t *w);

#endif
