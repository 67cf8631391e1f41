/*
 * ts_rows.h - the rows of a range answer, collected under a series' lock and
 * bounded by --max-answer-size (the time series operations' own helper).
 *
 * Each row counts TS_ROW_BOUND bytes of the answer, a row of k values
 * (agg=min,max) k times; a collection that would pass the bound stops with
 * `over` set and the operation is refused (BAD_REQUEST naming the limit)
 * rather than answering part of what was asked.
 */
#ifndef TALLY_CMD_TS_ROWS_H
#define TALLY_CMD_TS_ROWS_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd/ts.h"

/* ts_emit_fn and ts_emit_row_fn collecting into a cmd_ts_rows_t (ud). */
bool ts_rows_collect(void *ud, int64_t t, double v);
bool ts_rows_collect_row(void *ud, int64_t t, const double *v, size_t n);
/* Runs a query into c: ts_range, or ts_range_rows for several aggregations. */
core_status_t ts_rows_range(const ts_t *ts, const ts_query_t *q, cmd_ts_rows_t *c);

/* The rows an answer may hold under --max-answer-size: capped (false: no
 * limit) to *rows. */
bool ts_answer_rows(const cmd_ctx_t *ctx, size_t *rows);
/* The refusal of an answer that would pass --max-answer-size: more than
 * `rows` (returns false). */
bool ts_too_many_rows(cmd_ctx_t *ctx, size_t rows);
/* The most bytes a key takes in an answer (a JSON string of it, every
 * byte escaped). */
static inline uint64_t ts_key_text_max(uint64_t len) { return 6 * len + 2; }

#endif
