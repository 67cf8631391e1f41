/*
 * token_bucket.h - the seeds' "funnel" (漏斗限流, Redis 深度历险) done right.
 *
 * A bucket holds up to `capacity` tokens and refills continuously at
 * `refill_rate` tokens per second; a request takes `quantity` tokens or is
 * refused and takes none.  An absent key is a full bucket.
 *
 * The seeds' Java funnel had three flaws this module removes:
 *   - truncation drift: it added (int)(elapsed·rate) tokens and moved its
 *     clock to now, throwing away the fraction every time; a bucket drained
 *     often refilled slower than its rate;
 *   - overflow: after a long idle time elapsed·rate overflowed int (its fix
 *     assigned the time to the rate field by mistake);
 *   - floating-point rates (float leakingRate) made results depend on rounding.
 *
 * Here the level is an exact fixed-point number: 1 token = 10^15 units, and
 * the rate is held in micro-tokens per second, so one nanosecond refills
 * exactly rate_micro units and no fraction is ever lost:
 *
 *   level(now) = min(capacity·10^15, level + (now - last)·rate_micro)
 *   allowed   <=> quantity·10^15 <= level(now)      (then level -= quantity·10^15)
 *   remaining = floor(level / 10^15)
 *   retry     = ceil((quantity·10^15 - level) / rate_micro) ns;
 *               "never" when quantity > capacity
 *   reset     = ceil((capacity·10^15 - level) / rate_micro) ns (time to full)
 *
 * 128-bit arithmetic: capacity <= 10^15 and rate_micro <= 10^18 keep every
 * product below 2^127 even after 292 years idle; the refill is clamped at
 * capacity, so no idle time can overflow it.  refill_rate resolution is 10^-6
 * token per second (0.1 per second is exactly 100000 micro-tokens).
 *
 * Memory: 32 bytes per key (level, last refill instant).
 */
#ifndef TALLY_TOKEN_BUCKET_H
#define TALLY_TOKEN_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ratelimit.h"

__extension__ typedef __int128 tb_level_t;

#define TB_UNIT INT64_C(1000000000000000)          /* fixed-point units per token: 10^9 ns x 10^6 micro */
#define TB_MAX_CAPACITY INT64_C(1000000000000000)  /* 10^15 tokens */
#define TB_MAX_RATE_MICRO INT64_C(1000000000000000000) /* 10^12 tokens per second */

typedef struct tbucket_params {
    int64_t capacity;     /* 1..TB_MAX_CAPACITY tokens */
    int64_t rate_micro;   /* refill, micro-tokens per second: 1..TB_MAX_RATE_MICRO */
} tbucket_params_t;

typedef struct tbucket_state {
    tb_level_t level;     /* tokens x TB_UNIT at `last` */
    int64_t last_ns;      /* instant of the last refill */
} tbucket_state_t;

const char *tbucket_validate(const tbucket_params_t *p, const char **field);

/* The state of an absent key: full at now_ns. */
tbucket_state_t tbucket_full(const tbucket_params_t *p, int64_t now_ns);

/* One decision for `quantity` (>= 0) at now_ns.  Fills *r.  When allowed and
 * quantity > 0, writes the new state and the instant the bucket is full again
 * (*expire_ns) and returns true; otherwise *s is untouched. */
bool tbucket_update(const tbucket_params_t *p, tbucket_state_t *s, int64_t now_ns, int64_t quantity,
                    rl_result_t *r, int64_t *expire_ns);

/* Reserve/settle/refund (throttle.h), on a stored state at now_ns: refill
 * as a decision does, then
 *
 *   charge n   level' = max(level − n·10^15, −capacity·10^15)   (an
 *              overdraft: the level goes negative, the debt capped at one
 *              whole bucket; requests are refused until the refill has paid
 *              it back and brought the level up to their quantity)
 *   refund n   level' = min(level + n·10^15, capacity·10^15)    (never above
 *              the capacity)
 *
 * n must be in 0..capacity.  *expire_ns receives the instant the bucket is
 * full again (the state is then equivalent to an absent key). */
void tbucket_charge(const tbucket_params_t *p, tbucket_state_t *s, int64_t now_ns, int64_t n, int64_t *expire_ns);
void tbucket_refund(const tbucket_params_t *p, tbucket_state_t *s, int64_t now_ns, int64_t n, int64_t *expire_ns);

#endif
