/*
 * counter.h - counters: the seeds' counter pattern (MULTI; INCR key; EXPIRE
 * key ttl; EXEC) as one atomic operation.
 *
 *   INCRBY        adds `by` (negative subtracts; 0 reads and may set the TTL)
 *                 to the counter, creating it at 0, and with a TTL sets the
 *                 key's expiry to now + ttl_ms (every call, like EXPIRE after
 *                 each INCR); without one the key's expiry is kept (INCRBY
 *                 keeps it) and a new key never expires.  An increment that
 *                 would leave the signed 64-bit range is refused and changes
 *                 nothing (Redis: "increment or decrement would overflow").
 *   COUNTER.GET   the value (0 for a missing key: what INCRBY would start
 *                 from) and the TTL left.
 *
 * ttl_ms in results: the milliseconds left, -1 without an expiry, -2 for a
 * missing key (PTTL's numbers).
 */
#ifndef TALLY_CMD_COUNTER_H
#define TALLY_CMD_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/def.h"

/* The journal ids of the counters operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_INCRBY = 1,
    CMD_ID_COUNTER_GET = 2,
};

#define CMD_COUNTER_MAX_TTL_MS 315360000000000LL   /* 10 000 years: keeps now + ttl far from overflow */

typedef struct cmd_incrby_args {
    const char *key;
    size_t klen;
    int64_t by;
    bool has_ttl;
    int64_t ttl_ms;              /* 1 .. CMD_COUNTER_MAX_TTL_MS, with has_ttl */
} cmd_incrby_args_t;

typedef struct cmd_counter_get_args {
    const char *key;
    size_t klen;
} cmd_counter_get_args_t;

typedef struct cmd_counter_res {
    int64_t value;
    int64_t ttl_ms;              /* left; -1 no expiry; -2 no such key */
} cmd_counter_res_t;

extern const cmd_def_t CMD_INCRBY, CMD_COUNTER_GET;

#endif
