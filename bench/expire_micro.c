/*
 * expire_micro.c - what active expiry costs under a stream of short-lived
 * keys, without the network: nanoseconds of this thread's CPU time per key
 * that ks_expire_step deletes.
 *
 * The load is the throttle benchmark's (bench/lua/throttle_*.lua): requests
 * over 100 000 keys at 100 000 per second of simulated time, each setting
 * its key to expire 2 s later (a GCRA key of 30 per 60 s after one request).
 * A key that goes 2 s without a request expires: the housekeeping thread's
 * step (service/main.c: every 10 ms, 20 samples in each of 26 of the 256
 * shards) deletes it, or the next request finds it expired.  Each sample is
 * a random entry of a keyspace larger than the caches hold, so this
 * measures cache misses as much as instructions.
 *
 * Prints "expire ns_per_deleted_key" and "request ns_per_request" for
 * bench/suite_20_ratelimit.sh.
 */
#include <stdio.h>

#include "core/keyspace.h"
#include "core/throttle.h"
#include "service/clock.h"

#define KEYS 100000
#define PER_STEP 1000       /* requests per 10 ms step: 100 000/s */
#define STEPS 3000          /* 30 s of simulated time */
#define TTL_MS 2000
#define SAMPLES 20          /* service/main.c's EXPIRE_SAMPLES */
#define STEP_SHARDS 26      /* 256 shards over 10 steps, as tallyd's default */

int main(void)
{
    ks_t *ks = ks_create(8, 7);
    if (!ks)
        return 1;
    uint64_t x = 88172645463325252ULL;   /* xorshift64: the same keys every run */
    double request_ns = 0, expire_ns = 0;
    size_t deleted = 0;
    char key[32];
    for (int step = 0; step < STEPS; step++) {
        int64_t now = 100000 + (int64_t)step * 10;
        double a = (double)clock_thread_cpu_ns();
        for (int r = 0; r < PER_STEP; r++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            int n = snprintf(key, sizeof(key), "user:%d", (int)(x % KEYS));
            ks_key_t k = ks_key(ks, key, (size_t)n);
            ks_shard_t *sh = ks_shard_at(ks, k.shard);
            ks_shard_lock(sh);
            ks_entry_t *e = ks_find_write(ks, &k, now);
            if (e) {
                ks_entry_set_expire(ks, &e, now + TTL_MS);
            } else {   /* a GCRA state, as a first request makes */
                throttle_t *t = throttle_new_gcra((now + TTL_MS) * 1000000);
                if (!t || !ks_add(ks, &k, &throttle_type, t, now + TTL_MS, now)) {
                    fprintf(stderr, "expire_micro: out of memory\n");
                    return 1;
                }
            }
            ks_shard_unlock(sh);
        }
        double b = (double)clock_thread_cpu_ns();
        deleted += ks_expire_step(ks, now, SAMPLES, STEP_SHARDS);
        expire_ns += (double)clock_thread_cpu_ns() - b;
        request_ns += b - a;
    }
    if (deleted == 0) {
        fprintf(stderr, "expire_micro: nothing expired\n");
        return 1;
    }
    printf("expire %.0f\n", expire_ns / (double)deleted);
    printf("request %.0f\n", request_ns / ((double)STEPS * PER_STEP));
    ks_free(ks);
    return 0;
}
