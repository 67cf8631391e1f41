/*
 * throttle.h - the keyspace value of a rate-limited key.
 *
 * A throttle key holds the state of one limiter: which algorithm owns it and
 * that algorithm's state.  For GCRA the state is one TAT (see gcra.h).  The
 * algorithm's parameters are not stored: like redis-cell, every request
 * carries them, so changing a limit takes effect on the next request.
 *
 * Encoding (version 1): u8 version | u8 algorithm | algorithm state
 *   GCRA: i64 tat_ns
 */
#ifndef TALLY_THROTTLE_H
#define TALLY_THROTTLE_H

#include <stdint.h>

#include "core/types.h"

typedef enum throttle_algo {
    THROTTLE_GCRA = 1
} throttle_algo_t;

typedef struct throttle throttle_t;

extern const ks_type_t throttle_type;

/* A new GCRA state with the given TAT; NULL on allocation failure. */
throttle_t *throttle_new_gcra(int64_t tat_ns);
void throttle_free(throttle_t *t);
throttle_algo_t throttle_algo(const throttle_t *t);
int64_t throttle_gcra_tat(const throttle_t *t);
void throttle_gcra_set_tat(throttle_t *t, int64_t tat_ns);

#endif
