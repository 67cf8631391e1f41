/*
 * counter.h - an integer counter: the seeds' INCR + EXPIRE pattern.
 *
 * The value is a signed 64-bit integer, like a Redis string holding an
 * integer; an increment that would leave the range is refused (Redis:
 * "increment or decrement would overflow") and changes nothing.  The key's
 * expiry lives in the keyspace, not here.
 *
 * Encoding: u8 version (1) | i64 value.  Memory: 8 bytes per key plus the
 * keyspace entry.
 */
#ifndef TALLY_COUNTER_H
#define TALLY_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/types.h"

/* The on-disk tag of integer counter with TTL values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_COUNTER = 2 };

typedef struct counter counter_t;

extern const ks_type_t counter_type;

counter_t *counter_new(int64_t value);
void counter_free(counter_t *c);
int64_t counter_value(const counter_t *c);
/* True when value + by fits in 64 bits; *out receives the sum. */
bool counter_add_fits(int64_t value, int64_t by, int64_t *out);
void counter_set(counter_t *c, int64_t value);

/* The heap bytes (counter_type.size) of a counter: what creating one adds. */
size_t counter_bytes(void);

#endif
