/*
 * throttle.h - the keyspace value of a rate-limited key, and one entry point
 * for every algorithm.
 *
 * A throttle key holds the state of one limiter: which algorithm owns it and
 * that algorithm's state.  The parameters are not stored: like redis-cell,
 * every request carries them (or names a policy that does), so changing a
 * limit takes effect on the next request.
 *
 *   algorithm        state                                   bytes
 *   gcra             TAT (gcra.h)                            8
 *   sliding_log      ring of action timestamps (sliding_log.h) 8 per action
 *   sliding_window   window start, current and previous count 24
 *   fixed_window     window start, count                     16
 *   token_bucket     level (fixed point), last refill         24
 *
 * A key keeps the algorithm that created it: a request naming another
 * algorithm is refused (throttle_algo() tells the caller; the API answers 409)
 * until the key is deleted or expires.  Every state expires when it becomes
 * equivalent to an absent key, so idle keys disappear.
 *
 * Encoding:
 *   version 1 (GCRA only): u8 1 | u8 algorithm=1 | i64 tat_ns
 *   version 2:             u8 2 | u8 algorithm | payload
 *     gcra             i64 tat_ns
 *     sliding_log      u32 n | n x i64 timestamp (ascending)
 *     sliding_window   i64 start | i64 curr | i64 prev
 *     fixed_window     i64 start | i64 count
 *     token_bucket     u64 level low | u64 level high | i64 last_ns
 * Version 1 is still read; version 2 is written.
 */
#ifndef TALLY_THROTTLE_H
#define TALLY_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/gcra.h"
#include "core/ratelimit.h"
#include "core/sliding_log.h"
#include "core/token_bucket.h"
#include "core/types.h"
#include "core/window.h"

/* The on-disk tag of rate-limiter state (GCRA and friends) values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_THROTTLE = 1 };

typedef enum throttle_algo {
    THROTTLE_GCRA = 1,
    THROTTLE_SLIDING_LOG = 2,
    THROTTLE_SLIDING_WINDOW = 3,
    THROTTLE_FIXED_WINDOW = 4,
    THROTTLE_TOKEN_BUCKET = 5,
} throttle_algo_t;

#define THROTTLE_ALGO_MAX THROTTLE_TOKEN_BUCKET

/* An algorithm and its parameters. */
typedef struct throttle_params {
    throttle_algo_t algo;
    union {
        gcra_params_t gcra;
        slog_params_t log;
        window_params_t win;
        tbucket_params_t tb;
    } u;
    cal_spec_t cal;      /* fixed_window: kind CAL_NONE (periods from the epoch) or a calendar (core/calendar.h) */
} throttle_params_t;

typedef struct throttle throttle_t;

extern const ks_type_t throttle_type;

/* "gcra", "sliding_log", ... ; NULL for an unknown value. */
const char *throttle_algo_name(throttle_algo_t a);
/* The algorithm named `name`, or 0. */
throttle_algo_t throttle_algo_parse(const char *name);
/* NULL when the parameters are usable, else a message with *field naming the
 * offending parameter. */
const char *throttle_validate(const throttle_params_t *p, const char **field);
/* The window the limit applies to, in ns (for RateLimit-Policy's w): τ for
 * GCRA, the period for the log and windows, the time to fill an empty bucket. */
int64_t throttle_window_ns(const throttle_params_t *p);

/* Decides `quantity` (>= 0; 0 peeks) at now_ns (>= 0) against `t` (NULL =
 * absent key; otherwise its algorithm must be p->algo).  Changes nothing.
 * Returns true when the decision must be recorded with throttle_commit
 * (allowed and quantity > 0). */
bool throttle_check(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t quantity,
                    rl_result_t *r);

/* Records an allowed decision: the same arguments as the throttle_check that
 * returned true.  *t may be NULL (a new state is made).  *expire_ns receives the
 * instant the state becomes equivalent to an absent key.  Returns false on
 * allocation failure, leaving *t unchanged. */
bool throttle_commit(throttle_t **t, const throttle_params_t *p, int64_t now_ns, int64_t quantity,
                     int64_t *expire_ns);

/* The heap bytes (throttle_type.size) of the state once throttle_commit
 * with the same arguments ran on `t` (NULL: absent), without changing it:
 * what a request asks room for before it commits. */
size_t throttle_bytes_after(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t quantity);
/* The most heap bytes commits under p can give a state, whatever the
 * requests (unless it already took more): a batch's bound. */
size_t throttle_bytes_max(const throttle_params_t *p);

throttle_algo_t throttle_algo(const throttle_t *t);
/* A deep copy (NULL on allocation failure). */
throttle_t *throttle_clone(const throttle_t *t);
void throttle_free(throttle_t *t);

/* GCRA state (kept for callers of the first version). */
throttle_t *throttle_new_gcra(int64_t tat_ns);
int64_t throttle_gcra_tat(const throttle_t *t);
void throttle_gcra_set_tat(throttle_t *t, int64_t tat_ns);

#endif
