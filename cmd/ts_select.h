/*
 * ts_select.h - the series matching label filters (TS.QUERYINDEX, TS.MGET,
 * TS.MRANGE): from the label index when it can be trusted (cmd/ts_index.h),
 * each candidate checked under its own lock, else by a scan of every shard
 * under its lock (which indexes what it sees).  A series is matched as it
 * is when it is looked at; one outside the caller's token prefixes is not
 * there for it (as in a key scan).
 */
#ifndef TALLY_CMD_TS_SELECT_H
#define TALLY_CMD_TS_SELECT_H

#include <stdbool.h>

#include "cmd/ts.h"

/* The keys of the series matching f, sorted, distinct: true with *out
 * filled (cmd_ts_keys_free), false with ctx->err set (BAD_REQUEST when no
 * matcher selects series, OUT_OF_MEMORY). */
bool ts_select(cmd_ctx_t *ctx, const cmd_ts_filter_t *f, cmd_ts_keys_res_t *out);

/* The bytes of an answer listing the keys, each with `each` more: what
 * --max-answer-size is checked against before it is built. */
uint64_t ts_keys_answer_bytes(const cmd_ts_keys_res_t *l, uint64_t each);

#endif
