/*
 * ts_group.h - a series locked with the series it links to (the time
 * series operations' own helper, cmd/ts_*.c; calls the layer and core only).
 *
 * A source's compactions are written in the same operation, under the locks
 * of every key involved: the source is looked up, the names of its rules'
 * destinations copied, and then all of them locked at once (in shard order,
 * cmd_keys_lock) and looked up again; if the rules changed in between,
 * again.  So the destinations a write touches are found under the source's
 * lock, in the state replay will find them in.
 *
 * A link between two series is live when both halves agree: the rule's
 * destination names the series as its source, and the source has the rule.
 * A destination deleted (or expired, evicted, replaced) leaves a stale rule
 * behind, a deleted source a stale source name: RedisTimeSeries drops those
 * at once (tests/flow/test_ts_createrule.py test_delete_key), so here they
 * are never shown nor counted, and a write drops the stale rules.
 */
#ifndef TALLY_CMD_TS_GROUP_H
#define TALLY_CMD_TS_GROUP_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd/keys.h"
#include "core/ts.h"

typedef struct ts_group {
    cmd_key_t h;                        /* h.e: the series (the open entry) */
    ks_key_t keys[4 + TS_MAX_RULES];
    char *names;                        /* the destinations' (and source's) names, back to back */
    size_t n;                           /* keys locked */
    size_t extra_at;                    /* where the caller's extra keys are in keys[] */
    ks_entry_t *dst[TS_MAX_RULES];      /* per rule: its live destination, or NULL (stale, or not seen) */
    bool seen[TS_MAX_RULES];            /* per rule: its destination was looked at */
    bool src_named, src_seen, src_live; /* the series names a source; looked at (TS_GROUP_SOURCE); has the rule */
} ts_group_t;

#define TS_GROUP_SOURCE 0x100u          /* also look at the source the series names */
#define TS_GROUP_VISIBLE 0x200u         /* only the keys the token sees (a read): the rest stay unseen */

/* Opens the series at key with `flags` (CMD_* and TS_GROUP_*) and, when it
 * has rules, their destinations (and with TS_GROUP_SOURCE the source it
 * names), and the caller's extra[0..nextra) (at most 2, found by the caller
 * at keys[extra_at + j]).  False with ctx->err set and nothing locked. */
bool ts_group_open_with(cmd_ctx_t *ctx, const char *key, size_t klen, unsigned flags, const ks_key_t *extra,
                        size_t nextra, ts_group_t *g);
bool ts_group_open(cmd_ctx_t *ctx, const char *key, size_t klen, unsigned flags, ts_group_t *g);
/* Whether rule i may be live: live, or not looked at (nothing is dropped or
 * hidden on a guess). */
static inline bool ts_group_rule_live(const ts_group_t *g, size_t i) { return g->dst[i] || !g->seen[i]; }
/* Applies the rules after samples t[0..n) went into the series (old_newest:
 * its newest timestamp before, -1 if none), or after a deletion of
 * [from, to] (t NULL); drops the stale rules. */
void ts_group_compact(ts_group_t *g, int64_t old_newest, const int64_t *t, size_t n, int64_t from, int64_t to);
/* cmd_key_close, and what the group holds. */
void ts_group_close(ts_group_t *g, bool changed);

/* Whether `e` names src_key as its source (the other half of a live rule). */
bool ts_dst_live(ks_entry_t *e, const char *src_key, size_t src_len);
/* Whether e is a series with a rule writing to name. */
bool ts_has_rule_to(ks_entry_t *e, const char *name, size_t len);
/* The source named by a series (copied into *buf, freed by the caller), or
 * NULL. */
const char *ts_copy_source(const ts_t *ts, char **buf, size_t *len);

/* Room for a write of `bytes` to the series at key, made before its keys
 * are locked (evicting takes locks of its own).  The keys a series' rules
 * write to are known only once it is open, and a write the token or the
 * cluster refuses for a destination would be refused after evicting keys
 * for it; so, when room has to be made, the series and its destinations
 * are opened first, as the write will open them, and a refusal returned
 * before anything is evicted.  (A rule another request adds in between can
 * still be refused after; that changes nothing this request asked for.) */
bool ts_make_room(cmd_ctx_t *ctx, const char *key, size_t klen, uint64_t bytes);

/* Opens the series at key for reading (NOT_FOUND when missing).  With
 * `latest` and a series that is the destination of a live rule, also locks
 * the source and hands the source's open bucket to the query as one more
 * sample (LATEST): h then holds both locks (of keys[], which must outlive
 * h), h->e the series. */
bool ts_open_latest(cmd_ctx_t *ctx, const char *key, size_t klen, bool latest, cmd_key_t *h, ks_key_t keys[2],
                    ts_query_t *q);

/* Adds a series's labels to the label index (a failure leaves it
 * unindexed: the queries then scan).  Shard locked. */
void ts_index_note(cmd_ctx_t *ctx, const char *key, size_t klen, ts_t *ts);

#endif
