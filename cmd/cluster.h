/*
 * cluster.h - this node's part of a cluster (deploy/cluster/README.md): the
 * map of who owns each of the 16384 slots (core/clustermap.h), and the
 * checks that make a node serve only the keys it owns.
 *
 * The checks (all skipped on journal replay, which re-runs what was served):
 *
 *   - A request's keys must all be in one slot (CROSSSLOT), and in the slot
 *     of its routing key when the front-end names one (HTTP: X-Tally-Key,
 *     the key a proxy read for a route whose keys are in the body or query).
 *   - The slot must be this node's: otherwise MOVED naming the owner (err:
 *     where = its host:port, node, slot, epoch), and nothing is read or
 *     changed.
 *   - A slot migrating away (the map's `migrate` line with this node as
 *     source) is served only for keys still here: when none of the
 *     request's keys is here it is ASK naming the target, when only some
 *     are, TRYAGAIN.  Checked under the keys' shard locks, so a key is
 *     either still here and served here, or gone (moved by the resharding
 *     tool under the same lock) and answered elsewhere.
 *   - A slot migrating to this node is served only to a request that says
 *     it was sent by an ASK (ctx->asking: Redis's ASKING, HTTP
 *     X-Tally-Asking: 1); otherwise MOVED to the owner.
 *
 * cmd_cluster_keys_check runs before a request is admitted for the key a
 * front-end knows first (the path's), so a misdirected request is refused
 * before anything evicts for room, and again on every key the key handle
 * locks (cmd/keys.h), with the locks held - the choke point every operation
 * passes through.
 *
 * The map is replaced whole: a map whose epoch is older than the current
 * one is refused, as is a different map under the same epoch.  Readers hold
 * a read lock only while checking.
 */
#ifndef TALLY_CMD_CLUSTER_H
#define TALLY_CMD_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "core/clustermap.h"

/* Writes an accepted map's text where the service keeps it (--cluster FILE),
 * before it is installed; false with a message refuses the map. */
typedef bool (*cmd_cluster_store_fn)(void *ud, const char *text, size_t len, char *err, size_t errlen);

cmd_cluster_t *cmd_cluster_create(const char *self, cmd_cluster_store_fn store, void *ud);
void cmd_cluster_free(cmd_cluster_t *c);

/* Installs the map in text (store: also write it with the store function).
 * False with a message when it does not parse, does not name this node,
 * has an older epoch, or another map has this epoch; the current map stays. */
bool cmd_cluster_set(cmd_cluster_t *c, const char *text, size_t len, bool store, char *err, size_t errlen);
uint64_t cmd_cluster_epoch(cmd_cluster_t *c);

/* The answers counted for /info and /metrics. */
typedef enum cmd_cluster_answer {
    CMD_CLUSTER_MOVED,       /* MOVED */
    CMD_CLUSTER_ASK,         /* ASK */
    CMD_CLUSTER_TRYAGAIN,    /* TRYAGAIN */
    CMD_CLUSTER_CROSSSLOT,   /* CROSSSLOT */
    CMD_CLUSTER_ANSWER_COUNT
} cmd_cluster_answer_t;

/* Reading the map (for /cluster, /info, /metrics): read-locks it and
 * returns it (NULL before the first map) with this node's index and name;
 * cmd_cluster_read_end unlocks. */
const cmap_t *cmd_cluster_read(cmd_cluster_t *c, int *self, const char **self_name);
void cmd_cluster_read_end(cmd_cluster_t *c);
/* How many requests got each answer since start. */
uint64_t cmd_cluster_answered(cmd_cluster_t *c, cmd_cluster_answer_t a);

/* Keys held here in slots this node neither owns nor imports under the
 * current map (0 without a map): keys placed by another slot function
 * (before CRC16, tally placed keys by CRC32) or left by a map changed
 * without moving them.  The first one found, its slot and owner's name in
 * *example, *slot, *owner.  Locks each shard in turn. */
uint64_t cmd_cluster_misplaced(cmd_cluster_t *c, ks_t *ks, int64_t now_ms, char *example, size_t n, unsigned *slot,
                               char *owner, size_t ownerlen);

/* The keys' check; `locked`: the caller holds their shard locks, so keys of
 * a migrating slot are looked up.  False with ctx->err set. */
bool cmd_cluster_keys_check(cmd_ctx_t *ctx, const ks_key_t *keys, size_t n, bool locked);

#endif
