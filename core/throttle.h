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
 *   version 3:             version 2's bytes | reservations (below)
 * In memory, a state that never held a reservation has a size of its
 * algorithm's, kept so in its entry: GCRA its TAT alone (8 bytes), a sliding
 * window and a token bucket 24 bytes, a fixed window 16; a sliding log and
 * a state with reservations are a 48-byte structure (core/throttle.c).  The
 * encodings do not depend on the form.
 *
 * Version 1 is still read; version 2 is written for a state that never held
 * a reservation, version 3 for one that did:
 *   u64 last_id | u32 n | n x (u64 id | i64 cost | i64 deadline_ns |
 *                              i64 window | u8 on_expiry | parameters)
 * where the parameters are the algorithm's as in a decision's record
 * (cmd/throttle.h): gcra i64 max_burst | i64 count | i64 period_ns; windows
 * i64 max_count | i64 period_ns; token_bucket i64 capacity | i64 rate_micro.
 *
 * Reservations (reserve, then settle; refund; probe).  A reservation is a
 * decision of an estimated cost N that is recorded like any other (the
 * limiter is charged N) and remembered in the key's state with an id, a
 * deadline, the parameters it ran with, the window it was charged to (the
 * windows) and what its expiry does (keep or refund).  Settling it with the
 * actual cost A charges A - N more when A > N - taken even past the limit,
 * an overdraft, each algorithm's debt capped (gcra.h, token_bucket.h,
 * window.h) - or gives back N - A when A < N, and forgets it.  A reservation
 * not settled by its deadline expires: "keep" leaves the charge, "refund"
 * gives N back.  Expiry is applied by the first change of the key at or
 * after the deadline (and seen by every read before it, on a copy), so it
 * depends only on the stored state and the time: a replay, or a replica
 * applying the same records, computes the same bytes.  The results do not
 * depend on when after the deadline a refund is applied (each algorithm's
 * refund commutes with the passing of time: a max/min against the refill,
 * or a window that has aged out and no longer counts).
 *
 * Ids: max(now_ns, last id of the key + 1): unique for the key, the same on
 * replay (it depends on the time and the state only).  At most
 * THROTTLE_MAX_PENDING reservations are pending per key, so a key's state is
 * bounded (72 bytes each); the key lives until its last deadline.  The
 * sliding log takes no reservations (a refund would have to pick which
 * timestamps to forget); probes work with every algorithm.
 */
#ifndef TALLY_THROTTLE_H
#define TALLY_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/gcra.h"
#include "core/ratelimit.h"
#include "core/sliding_log.h"
#include "core/status.h"
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

/* ------------------------------------------------------------------------ */
/* Reservations, refunds, probes                                            */
/* ------------------------------------------------------------------------ */

#define THROTTLE_MAX_PENDING 1000                      /* pending reservations per key */
#define THROTTLE_MAX_RESERVE_TTL_NS (INT64_C(604800) * 1000000000)   /* a reservation's deadline: 7 days at most */

typedef enum throttle_expiry {
    THROTTLE_EXPIRY_KEEP = 0,     /* the estimate stays charged */
    THROTTLE_EXPIRY_REFUND = 1,   /* the estimate is given back */
} throttle_expiry_t;

/* Results of the reservation functions besides core_status_t's. */
enum {
    THROTTLE_RSV_UNKNOWN = 1,     /* no pending reservation has that id (settled, expired, never made) */
    THROTTLE_RSV_TOO_LARGE = 2,   /* the cost is more than the limiter's capacity */
    THROTTLE_RSV_ALGO = 3,        /* the algorithm takes no reservations or refunds (sliding_log) */
};

typedef struct throttle_reservation {
    uint64_t id;
    int64_t cost;                 /* the estimate charged */
    int64_t deadline_ns;
    int64_t window;               /* windows: the start of the window charged; else -1 */
    throttle_params_t p;          /* the parameters it was decided with */
    uint8_t on_expiry;            /* throttle_expiry_t */
} throttle_reservation_t;

/* The most one request can take: GCRA's max_burst + 1, a window's or log's
 * max_count, a bucket's capacity. */
int64_t throttle_capacity(const throttle_params_t *p);

/* A reservation of `quantity` (0..capacity) at now_ns on `t` (NULL:
 * absent), pending until now_ns + ttl_ns: decides as throttle_check does
 * (*r) and, when allowed, builds in *out a new state (t is not changed)
 * with the charge and the reservation recorded, *id its id and *expire_ns
 * the instant the key can go.  When limited: CORE_OK with *out NULL.
 * CORE_FULL when THROTTLE_MAX_PENDING are pending, THROTTLE_RSV_ALGO for a
 * sliding log, CORE_NOMEM. */
int throttle_reserve(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t quantity,
                     int64_t ttl_ns, throttle_expiry_t on_expiry, rl_result_t *r, throttle_t **out, uint64_t *id,
                     int64_t *expire_ns);
/* Settles the pending reservation `id` of `t` with the actual cost
 * (>= 0): a new state in *out, *was the reservation.  THROTTLE_RSV_UNKNOWN,
 * THROTTLE_RSV_TOO_LARGE (actual above the capacity of the reservation's
 * parameters), CORE_NOMEM. */
int throttle_settle(const throttle_t *t, uint64_t id, int64_t actual, int64_t now_ns, throttle_t **out,
                    throttle_reservation_t *was, int64_t *expire_ns);
/* Gives `n` (0..capacity) back to `t` under p (bounded: see each
 * algorithm's refund; the windows' goes to the window of now): a new state
 * in *out.  THROTTLE_RSV_TOO_LARGE, THROTTLE_RSV_ALGO, CORE_NOMEM. */
int throttle_refund(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t n, throttle_t **out,
                    int64_t *expire_ns);
/* The reservations of `t` still pending at now_ns. */
size_t throttle_pending(const throttle_t *t, int64_t now_ns);
/* The i-th stored reservation (i < throttle_reservations(t)), pending or not. */
size_t throttle_reservations(const throttle_t *t);
const throttle_reservation_t *throttle_reservation_at(const throttle_t *t, size_t i);

/* GCRA state (kept for callers of the first version). */
throttle_t *throttle_new_gcra(int64_t tat_ns);
int64_t throttle_gcra_tat(const throttle_t *t);
void throttle_gcra_set_tat(throttle_t *t, int64_t tat_ns);

#endif
