/*
 * throttle.h - rate limiting as operations: one decision on one key with
 * any of tally's algorithms, several decisions at once, and the reset of a
 * limiter.  The algorithms and their state are core's (core/throttle.h);
 * where the parameters come from - a request's fields, a policy of the
 * --config file, a gateway's headers through a key template - is the
 * front-end's: an operation takes them resolved, so that its journal record
 * replays without any configuration.
 *
 *   CL.THROTTLE             redis-cell's CL.THROTTLE key max_burst
 *                           count_per_period period [quantity]: GCRA with
 *                           emission interval T = period / count, limit
 *                           L = max_burst + 1, tolerance tau = T x L.  The
 *                           request of `quantity` (default 1) is allowed
 *                           when the key's theoretical arrival time pushed
 *                           by T x quantity stays within tau of now; an
 *                           allowed request is recorded, a limited one
 *                           changes nothing; quantity 0 peeks (nothing
 *                           recorded); a quantity above the limit can
 *                           never fit (retry_after -1).
 *   THROTTLE.SLIDING_LOG    the same decision by an exact log of the
 *                           actions of the last `period`: at most
 *                           max_count of them.
 *   THROTTLE.SLIDING_WINDOW the two-window weighted counter (Cloudflare's
 *                           approximation: previous x (period - elapsed) /
 *                           period + current <= max_count).
 *   THROTTLE.FIXED_WINDOW   a counter of max_count per aligned period, or
 *                           per local calendar day, week, month, quarter
 *                           or year of a time zone (core/calendar.h).
 *   THROTTLE.TOKEN_BUCKET   a bucket of `capacity` tokens refilled at
 *                           refill_rate per second (the seeds' funnel).
 *   THROTTLE.BATCH          several of the decisions above atomically, under
 *                           the locks of all their keys: when every item is
 *                           allowed (a shadow item always is) every item is
 *                           recorded, in order (later items on a key see
 *                           what earlier ones recorded); otherwise none is,
 *                           and each allowed item reports what the stored
 *                           state allows now.
 *   THROTTLE.RESET          deletes a key's limiter state (a key holding
 *                           another type is refused, WRONGTYPE).
 *   THROTTLE.RESERVE        a decision of an estimated cost that, when
 *                           allowed, is recorded and remembered as a
 *                           reservation (id, deadline, keep or refund on
 *                           expiry: core/throttle.h); GCRA, the token
 *                           bucket and both windows.
 *   THROTTLE.SETTLE         settles a pending reservation with the actual
 *                           cost: charges the extra (past the limit) or
 *                           gives back the difference.  An unknown, settled
 *                           or expired id is NOT_FOUND; an actual cost above
 *                           the capacity is refused; nothing changes.
 *   THROTTLE.REFUND         gives a cost back to a key, bounded by the
 *                           limiter's capacity (a missing key: nothing).
 *   THROTTLE.PROBE          what a decision of the cost would answer now,
 *                           changing nothing and journaling nothing.
 *
 * The five decisions answer the same result (core/ratelimit.h): allowed,
 * the limit, what remains, when to retry and when the limiter is full
 * again.  A key keeps the algorithm that created it: a decision with
 * another algorithm is refused (WRONGTYPE) until the key is reset or
 * expires.  Every state expires when it becomes equivalent to an absent
 * key.  The decisions share their access class (ratelimit) and flags: a
 * front-end route that may run any of them names CL.THROTTLE.
 *
 * Records (little-endian; key = u32 length + bytes):
 *   decision   u8 version 1 | item
 *   batch      u8 version 1 | u32 n (1..CMD_THROTTLE_BATCH_MAX) | n x (u8 algorithm | item)
 *   reset      u8 version 1 | key
 *   item       key | u8 flags (1: shadow, 2: calendar) | i64 quantity | parameters:
 *                gcra            i64 max_burst | i64 count_per_period | i64 period_ns
 *                sliding_log,
 *                sliding_window,
 *                fixed_window    i64 max_count | i64 period_ns
 *                token_bucket    i64 capacity | i64 refill rate in micro-tokens per second
 *              and, with flag 2 (fixed_window only; core/calendar.h):
 *                calendar        u8 kind | u8 week_start | u8 anchor_day | u8 n | n bytes time zone name
 *              (period_ns is then the calendar's nominal length).  A
 *              calendar decision replays from its record alone: the window
 *              is a pure function of the record's time and this spec, given
 *              the same tzdata (cmd/zone.h loads the zone by its name).
 *   reserve    u8 version 1 | u8 algorithm | item | i64 ttl_ns | u8 on_expiry
 *   settle     u8 version 1 | key | u64 id | i64 actual
 *   refund     u8 version 1 | u8 algorithm | item   (item's quantity: what is given back)
 * The parameters are those the decision ran with, a policy's resolved;
 * periods are whole seconds up to CMD_THROTTLE_MAX_PERIOD_S, and every
 * value passes core's throttle_validate: a decoder refuses anything else.
 */
#ifndef TALLY_CMD_THROTTLE_H
#define TALLY_CMD_THROTTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "core/throttle.h"

/* The journal ids of the rate limiting operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_CL_THROTTLE = 200,
    CMD_ID_THROTTLE_SLIDING_LOG = 201,
    CMD_ID_THROTTLE_SLIDING_WINDOW = 202,
    CMD_ID_THROTTLE_FIXED_WINDOW = 203,
    CMD_ID_THROTTLE_TOKEN_BUCKET = 204,
    CMD_ID_THROTTLE_BATCH = 205,
    CMD_ID_THROTTLE_RESET = 206,
    CMD_ID_THROTTLE_RESERVE = 230,
    CMD_ID_THROTTLE_SETTLE = 231,
    CMD_ID_THROTTLE_REFUND = 232,
    CMD_ID_THROTTLE_PROBE = 233,
};

#define CMD_THROTTLE_MAX_PERIOD_S 2305843009LL   /* 2^61 ns in whole seconds: see GCRA_MAX_TAU_NS */
#define CMD_THROTTLE_BATCH_MAX 10000             /* decisions in one batch (DESIGN: batches of 10 000) */

/* One decision: its key, algorithm and parameters, how much it asks for. */
typedef struct cmd_throttle_item {
    const char *key;
    size_t klen;
    throttle_params_t p;         /* p.algo: the operation's algorithm */
    int64_t quantity;            /* >= 0; 0 peeks */
    bool shadow;                 /* decided and reported, but never refuses a batch's other items */
} cmd_throttle_item_t;

typedef struct cmd_throttle_res {
    rl_result_t r;               /* the decision (r.allowed as decided: a shadow item's answer is the front-end's) */
} cmd_throttle_res_t;

/* THROTTLE.BATCH.  A front-end gives `items` and `results` (n of each);
 * a record decodes into `packed` (the items' bytes, validated) with items
 * and results NULL, which the operation then reads on its own. */
typedef struct cmd_throttle_batch_args {
    const cmd_throttle_item_t *items;
    size_t n;
    rl_result_t *results;        /* filled with each item's decision; NULL: not wanted */
    const uint8_t *packed;       /* a decoded record's items (when items is NULL) */
    size_t packed_len;
} cmd_throttle_batch_args_t;

typedef struct cmd_throttle_batch_res {
    bool all;                    /* every item allowed (or shadow): the batch was recorded */
} cmd_throttle_batch_res_t;

typedef struct cmd_throttle_reset_args {
    const char *key;
    size_t klen;
} cmd_throttle_reset_args_t;

typedef struct cmd_throttle_reset_res {
    bool deleted;                /* the key held a limiter */
} cmd_throttle_reset_res_t;

/* THROTTLE.RESERVE: the item (quantity: the estimate) with its deadline. */
typedef struct cmd_throttle_reserve_args {
    cmd_throttle_item_t it;      /* first: the key leads (cmd_keys_first) */
    int64_t ttl_ns;              /* 1 .. THROTTLE_MAX_RESERVE_TTL_NS */
    throttle_expiry_t on_expiry;
} cmd_throttle_reserve_args_t;

typedef struct cmd_throttle_reserve_res {
    rl_result_t r;               /* the decision */
    uint64_t id;                 /* the reservation (when allowed) */
    int64_t deadline_ns;
} cmd_throttle_reserve_res_t;

typedef struct cmd_throttle_settle_args {
    const char *key;
    size_t klen;
    uint64_t id;
    int64_t actual;              /* >= 0 */
} cmd_throttle_settle_args_t;

typedef struct cmd_throttle_settle_res {
    int64_t reserved;            /* the estimate that was charged */
    throttle_algo_t algo;
    rl_result_t r;               /* the limiter after the settle (a probe of 0 with the reservation's parameters) */
} cmd_throttle_settle_res_t;

extern const cmd_def_t CMD_THROTTLE_RESERVE, CMD_THROTTLE_SETTLE, CMD_THROTTLE_REFUND, CMD_THROTTLE_PROBE;

extern const cmd_def_t CMD_CL_THROTTLE, CMD_THROTTLE_SLIDING_LOG, CMD_THROTTLE_SLIDING_WINDOW,
    CMD_THROTTLE_FIXED_WINDOW, CMD_THROTTLE_TOKEN_BUCKET, CMD_THROTTLE_BATCH, CMD_THROTTLE_RESET;

/* The decision operation of an algorithm (args cmd_throttle_item_t, result
 * cmd_throttle_res_t); NULL for an unknown one. */
const cmd_def_t *cmd_throttle_def(throttle_algo_t algo);

#endif
