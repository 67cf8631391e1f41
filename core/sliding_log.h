/*
 * sliding_log.h - exact sliding-window limiting: at most max_count actions in
 * any interval of `period`.
 *
 * The seeds' Redis design keeps one sorted-set member per action (ZADD now,
 * ZREMRANGEBYSCORE 0 now-period, ZCARD, EXPIRE period): exact, but each
 * action costs a skiplist node and a dict entry (~100 bytes).  Here the log is
 * a ring buffer of timestamps in one allocation, 8 bytes per action:
 *
 *   slog_t:  cap | head | len | ts[cap]          (one malloc)
 *            ts[(head + i) % cap], i = 0..len-1, ascending (oldest first)
 *
 * An action stamped t counts while t > now - period (Redis's
 * ZREMRANGEBYSCORE 0 now-period removes scores <= now - period).  Decisions:
 *
 *   live      = actions with t > now - period      (binary search: O(log n))
 *   allowed  <=> live + quantity <= max_count
 *   remaining = max_count - live (after this request), never below 0
 *   retry     = when enough of the oldest live actions have aged out:
 *               ts[first_live + live + quantity - max_count - 1] + period - now;
 *               "never" when quantity > max_count
 *   reset     = newest + period - now (0 when the log is empty)
 *
 * Unlike the seeds' script, a refused action is not recorded (a client that
 * keeps retrying is not locked out forever) and a peek (quantity 0) records
 * nothing.  Timestamps never go backwards: an action stamped before the newest
 * one (a clock step back) is stamped with the newest instead, so the ring stays
 * sorted and the limit stays exact (conservative by at most the step).
 *
 * Memory: 8 bytes per action in the window plus 16 bytes of header; the ring
 * grows by doubling up to max_count and shrinks when a quarter full.
 *   max_count    100      10 000     100 000 (the bound)
 *   bytes        ~816     ~80 KB     ~800 KB
 * max_count is bounded by SLOG_MAX_COUNT; beyond it, use the sliding_window
 * algorithm (constant memory, approximate).
 */
#ifndef TALLY_SLIDING_LOG_H
#define TALLY_SLIDING_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"
#include "core/ratelimit.h"

#define SLOG_MAX_COUNT 100000                 /* 800 KB of timestamps per key at most */
#define SLOG_MAX_PERIOD_NS (INT64_C(1) << 61) /* keeps now + period below INT64_MAX */

typedef struct slog_params {
    int64_t max_count;   /* 1..SLOG_MAX_COUNT */
    int64_t period_ns;   /* 1..SLOG_MAX_PERIOD_NS */
} slog_params_t;

typedef struct slog slog_t;

/* NULL when usable, else a message with *field naming the parameter. */
const char *slog_validate(const slog_params_t *p, const char **field);

/* Decides `quantity` (>= 0) at now_ns on `log` (NULL = empty) without changing
 * it.  Returns true when the decision must be recorded (allowed and
 * quantity > 0): call slog_commit with the same arguments. */
bool slog_check(const slog_t *log, const slog_params_t *p, int64_t now_ns, int64_t quantity, rl_result_t *r);

/* Records `quantity` actions at now_ns (after a slog_check that allowed
 * them), dropping actions that left the window; *log may be NULL (a new log is
 * made) and may be moved.  Returns false on allocation failure, leaving *log
 * unchanged. */
bool slog_commit(slog_t **log, const slog_params_t *p, int64_t now_ns, int64_t quantity);

/* The instant (ns) after which the log holds no live action: newest + period;
 * 0 when empty. */
int64_t slog_expire_ns(const slog_t *log, const slog_params_t *p);

size_t slog_len(const slog_t *log);
/* Heap bytes of the log (O(1)). */
size_t slog_bytes(const slog_t *log);
/* Heap bytes of the log once slog_commit(log, p, now_ns, quantity) ran (the
 * same arithmetic), without changing it: what a request asks room for. */
size_t slog_bytes_after(const slog_t *log, const slog_params_t *p, int64_t now_ns, int64_t quantity);
/* The most heap bytes commits under p can give a log (its ring at
 * max_count slots), unless it was already larger. */
size_t slog_bytes_max(const slog_params_t *p);
slog_t *slog_clone(const slog_t *log);
void slog_free(slog_t *log);

/* Encoding: u32 len | len x i64 timestamps, ascending, >= 0. */
void slog_encode(const slog_t *log, wbuf_t *out);
/* Reads an encoding from r (validating order and bounds); NULL with *why on
 * bad input or allocation failure.  A zero-length log decodes to NULL with
 * *why NULL. */
slog_t *slog_decode(rbuf_t *r, const char **why);

#endif
