/* clock.h - the service's clocks (core/ never reads one). */
#ifndef TALLY_CLOCK_H
#define TALLY_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Clock `id` in ns. */
static inline int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Wall-clock time in ns since the epoch: limiter state survives restarts. */
static inline int64_t clock_now_ns(void) { return clock_ns(CLOCK_REALTIME); }

/* Monotonic ns, for durations. */
static inline int64_t clock_mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* The calling thread's CPU time in ns: what the micro-benchmarks measure,
 * so that other load on the machine does not count. */
static inline int64_t clock_thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

/* Monotonic ns as of the last timer tick (a few ms coarse, and cheaper):
 * for deadlines counted in seconds, such as a connection's. */
static inline int64_t clock_mono_coarse_ns(void) { return clock_ns(CLOCK_MONOTONIC_COARSE); }

#endif
