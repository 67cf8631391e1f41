/*
 * override.h - a policy's live per-tenant overrides: a map from a tenant
 * (the value a policy's key template gives: what follows the policy's
 * prefix in its keys) to the limits that replace the policy's defaults for
 * that tenant, kept as the text of the policies file's form
 * ({"algorithm": "gcra", "max_burst": 5, ...}, canonical JSON written by the
 * API).  core neither parses nor judges that text: the front-end checked it
 * before storing it and reads it back at each decision that finds it.
 *
 * One value per policy, at the key OVERRIDE_KEY_PREFIX + the policy's name
 * (cmd/override.h): a value of the keyspace like any other, so snapshots,
 * the journal's replay and replication carry it.  Entries are kept sorted
 * by tenant (bytes, then length), so a lookup is a binary search, a listing
 * is in a stable order and a cursor is the last tenant returned.
 *
 * The decisions read an entry's limits as the algorithm parameters the
 * front-end makes of its text, once: override_map_limits keeps what the
 * front-end's parser gave in the entry (its room is counted in the value's
 * size from the start), a cache like HyperLogLog's count - filled by a read
 * under the key's lock, never encoded, dropped when the text changes.
 *
 * Bounds: a tenant is 1..OVERRIDE_TENANT_MAX bytes, the limits text
 * 1..OVERRIDE_LIMITS_MAX bytes, a map holds at most OVERRIDE_MAX_ENTRIES.
 */
#ifndef TALLY_OVERRIDE_H
#define TALLY_OVERRIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/throttle.h"
#include "core/types.h"

enum { TYPE_TAG_OVERRIDE = 20 };

#define OVERRIDE_TENANT_MAX 256
#define OVERRIDE_LIMITS_MAX 512
#define OVERRIDE_MAX_ENTRIES 10000

typedef struct override_map override_map_t;

extern const ks_type_t override_type;

override_map_t *override_map_new(void);
void override_map_free(override_map_t *m);
/* How many maps exist in the process (0: no decision need look). */
long override_maps_alive(void);
/* Entries held. */
size_t override_map_count(const override_map_t *m);
/* The limits text of `tenant`, or NULL (*llen set when found). */
const char *override_map_get(const override_map_t *m, const char *tenant, size_t tlen, size_t *llen);
/* Sets (inserts or replaces) tenant's limits; the caller checked the bounds
 * (a full map refuses a new tenant).  0 on success, else the reason:
 * OVERRIDE_FULL, OVERRIDE_NOMEM. */
enum { OVERRIDE_OK = 0, OVERRIDE_FULL = 1, OVERRIDE_NOMEM = 2 };
int override_map_set(override_map_t *m, const char *tenant, size_t tlen, const char *limits, size_t llen);
/* Removes tenant; false when it had no entry. */
bool override_map_del(override_map_t *m, const char *tenant, size_t tlen);
/* The i-th entry in tenant order (i < count). */
void override_map_at(const override_map_t *m, size_t i, const char **tenant, size_t *tlen, const char **limits,
                     size_t *llen);
/* The parameters of tenant's limits: parse(text, len, out, ud) the first
 * time (false: the text does not read, remembered too), its answer after.
 * 1 with *out, 0 when the tenant has no entry, -1 when its text does not
 * read.  Call under the key's lock (it writes the cache). */
typedef bool (*override_parse_fn)(const char *text, size_t len, throttle_params_t *out, void *ud);
int override_map_limits(override_map_t *m, const char *tenant, size_t tlen, override_parse_fn parse, void *ud,
                        throttle_params_t *out);
/* The index of the first entry after `tenant` in tenant order (0 for a NULL tenant). */
size_t override_map_after(const override_map_t *m, const char *tenant, size_t tlen);
/* The heap bytes one entry of these sizes adds (room to ask for before a set). */
size_t override_entry_bytes(size_t tlen, size_t llen);

#endif
