/*
 * gcra.h - the Generic Cell Rate Algorithm exactly as redis-cell computes it.
 *
 * GCRA (from ATM networks, popularised for rate limiting by Brandur Leach's
 * redis-cell) keeps a single number per key: the theoretical arrival time
 * (TAT), the instant at which the limiter would be empty again.
 *
 *   T  (emission interval) = period / count          one request's cost
 *   L  (limit)             = max_burst + 1            the largest burst
 *   τ  (delay tolerance)   = T · L                    how far TAT may run ahead
 *
 *   tat      = stored TAT, or now when the key has none
 *   new_tat  = max(tat, now) + T · quantity
 *   allow_at = new_tat − τ
 *   limited  ⇔ now < allow_at          (then nothing is stored)
 *
 * Allowed: store new_tat, expire the key at new_tat, ttl = new_tat − now.
 * Limited: ttl = tat − now; retry_after = allow_at − now if T·quantity ≤ τ,
 *          else "never" (the request is larger than the whole limit).
 * remaining = trunc((τ − ttl) / T) when τ − ttl > −T, else 0; reset = ttl.
 *
 * Example (CL.THROTTLE user123 15 30 60): T = 2 s, L = 16, τ = 32 s; the first
 * call stores now + 2 s and answers remaining 15, reset 2 s; sixteen calls
 * later TAT = now + 32 s and the seventeenth is limited, retry after 2 s.
 *
 * Integers are nanoseconds, as in redis-cell.  Parameters are validated so
 * that no intermediate value can overflow: τ ≤ 2^61 ns (about 73 years).
 */
#ifndef TALLY_GCRA_H
#define TALLY_GCRA_H

#include <stdint.h>

#include "core/ratelimit.h"

#define GCRA_MAX_TAU_NS (INT64_C(1) << 61)   /* keeps now + 2τ below INT64_MAX */

typedef struct gcra_params {
    int64_t max_burst;     /* >= 0 */
    int64_t count;         /* requests per period, >= 1 */
    int64_t period_ns;     /* >= 1 */
} gcra_params_t;

/* Returns NULL when the parameters are usable, else a message, with *field
 * naming the offending parameter ("max_burst", "count_per_period", "period"). */
const char *gcra_validate(const gcra_params_t *p, const char **field);

/* One GCRA decision for `quantity` (>= 0; 0 peeks) at `now_ns` (>= 0) on a key
 * whose stored TAT is `tat_ns` (-1 when the key has none).  Fills *r.
 * *store_tat receives the TAT to store, or -1 when nothing must be stored
 * (limited, or a peek).  Parameters must have passed gcra_validate(). */
void gcra_update(const gcra_params_t *p, int64_t tat_ns, int64_t now_ns, int64_t quantity,
                 rl_result_t *r, int64_t *store_tat);

/* Reserve/settle/refund (throttle.h, "Reserve, settle, refund, probe" in
 * docs/rate-limiting.md), on a stored TAT (-1: none) at now_ns:
 *
 *   charge n   tat' = min(max(tat, now) + T·n, now + 2τ)   (taken even past
 *              the limit: an overdraft; the debt is capped at one whole τ
 *              beyond the burst, so the key is refused until now = tat' − τ)
 *   refund n   tat' = max(tat − T·n, now)                  (never below now:
 *              a full limiter cannot hold more than its burst)
 *
 * Both return the new TAT; n must be in 0..max_burst + 1. */
int64_t gcra_charge(const gcra_params_t *p, int64_t tat_ns, int64_t now_ns, int64_t n);
int64_t gcra_refund(const gcra_params_t *p, int64_t tat_ns, int64_t now_ns, int64_t n);

#endif
