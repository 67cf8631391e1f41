/*
 * ratelimit.h - what every rate-limiting algorithm answers.
 *
 * All algorithms (GCRA, and the others that build on this header) report the
 * same fields so that the HTTP layer, the gateway hook and the RateLimit
 * headers never care which one decided.  Durations are nanoseconds here; the
 * API rounds them up to whole seconds and milliseconds.
 */
#ifndef TALLY_RATELIMIT_H
#define TALLY_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#define RL_NEVER (-1)              /* retry_after when a request can never fit, or when allowed */
#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1000000LL

typedef struct rl_result {
    bool allowed;
    int64_t limit;                 /* the most a burst can take */
    int64_t remaining;             /* how many more the limit would take now */
    int64_t retry_after_ns;        /* RL_NEVER, or when the same request would be allowed */
    int64_t reset_after_ns;        /* when the limiter is back to full */
} rl_result_t;

/* Rounds a non-negative duration up to whole units; RL_NEVER stays RL_NEVER. */
static inline int64_t rl_ceil_div(int64_t ns, int64_t unit)
{
    if (ns < 0)
        return RL_NEVER;
    return ns / unit + (ns % unit != 0);
}

#endif
