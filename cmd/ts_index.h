/*
 * ts_index.h - the label index of the time series: (label, value) -> keys.
 *
 * TS.MGET / TS.MRANGE / TS.QUERYINDEX select series by label filters; the
 * index answers which keys may hold a label pair so that a filter does not
 * look at every key.  It is a superset of the truth, never a subset:
 *
 *   - every series is added, with all its labels, by the operation that
 *     creates it or changes its labels, under the key's shard lock
 *     (ts_index_add), and then marked indexed (ts_mark_indexed);
 *   - a series that arrives any other way (a snapshot loaded, a dump
 *     restored) stays unindexed, and while one exists in the process the
 *     index is not trusted: queries scan every shard, adding what they see
 *     (which ends the state);
 *   - entries are never removed when a key goes (deleted, expired, evicted,
 *     overwritten) or its labels change: every candidate is verified under
 *     its own lock by the query, and a stale entry found so is dropped; when
 *     stale entries pile up past twice the live label pairs the index is
 *     rebuilt by the next query's scan.
 *
 * Locking: the index has its own mutex, always taken after a shard lock
 * (operations) or alone (queries), never the other way round.  One index per
 * keyspace, found by ts_index_of.
 */
#ifndef TALLY_CMD_TS_INDEX_H
#define TALLY_CMD_TS_INDEX_H

#include <stdbool.h>
#include <stddef.h>

#include "core/keyspace.h"
#include "core/ts.h"

typedef struct ts_index ts_index_t;

/* The index of a keyspace (created on first use; lives as long as the
 * process: a keyspace's address reused later finds stale entries, which
 * verification drops). NULL when out of memory. */
ts_index_t *ts_index_of(ks_t *ks);

/* Adds every label pair of the series at key (shard locked by the caller)
 * and marks it indexed; false when out of memory (the series stays
 * unindexed, so queries scan). */
bool ts_index_add(ts_index_t *ix, const char *key, size_t klen, ts_t *ts);

/* Whether queries may trust the index (no unindexed series, not bloated, not
 * being rebuilt). */
bool ts_index_usable(ts_index_t *ix);

/* The keys that may match the positive matcher m (l=v or l=(a,b)): a
 * malloc'd array of malloc'd NUL-terminated keys in *keys, their count in
 * *n.  False when out of memory. */
bool ts_index_candidates(ts_index_t *ix, const ts_matcher_t *m, char ***keys, size_t *n);
/* How many keys m's pairs list (to pick the most selective matcher). */
size_t ts_index_count(ts_index_t *ix, const ts_matcher_t *m);

/* The longest run of occupied slots in the table of label pairs (a
 * lookup's worst probe): for tests and diagnostics, O(table size). */
size_t ts_index_probe_max(ts_index_t *ix);

/* Drops key from the entries of m's pairs (found stale by a query). */
void ts_index_forget(ts_index_t *ix, const ts_matcher_t *m, const char *key, size_t klen);

/* A full scan that re-adds every series: begin (clears the index when it is
 * bloated; serialises scans), then ts_index_add for each series, then end. */
void ts_index_scan_begin(ts_index_t *ix);
void ts_index_scan_end(ts_index_t *ix, bool ok);

#endif
