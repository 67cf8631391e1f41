/* metrics.c - see metrics.h. */
#include "service/metrics.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/router.h"

/* Statuses the API produces; anything else is counted as "other". */
static const int statuses[] = { 200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 414, 415, 429, 500, 503, 507 };
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]) + 1)

/* Latency bucket upper bounds in seconds (Prometheus "le"), and the same in
 * nanoseconds for recording: ns > ns_bound exactly when ns / 1e9 > bound,
 * both sides being the correctly rounded value of the same decimal. */
static const double bounds[] = { 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1, 0.25, 1.0 };
static const int64_t bounds_ns[] = { 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
                                     25000000, 50000000, 100000000, 250000000, 1000000000 };
#define NBOUNDS (sizeof(bounds) / sizeof(bounds[0]))
_Static_assert(sizeof(bounds_ns) / sizeof(bounds_ns[0]) == NBOUNDS, "one ns bound per bound");

typedef struct route_stats {
    _Atomic uint64_t by_status[NSTATUS];
    _Atomic uint64_t buckets[NBOUNDS + 1];
    _Atomic uint64_t sum_ns;
} route_stats_t;

/* Counters are sharded by thread so that recording a request touches no
 * cache line another thread writes and needs no locked instruction: the
 * first METRICS_SHARDS - 1 threads that record get a shard each and are its
 * only writer (a relaxed load and store); any later thread shares the last
 * shard, where increments are atomic additions.  Readers sum the shards. */
#define METRICS_SHARDS 8

static route_stats_t *stats;   /* [shard * nstats + 0] = unmatched, [... + i+1] = route i */
static size_t nstats;
static _Atomic unsigned next_shard;
static _Thread_local int my_shard = -1;

void metrics_init(void)
{
    nstats = api_route_count() + 1;
    stats = calloc(METRICS_SHARDS * nstats, sizeof(*stats));
}

static size_t status_index(int status)
{
    for (size_t i = 0; i < NSTATUS - 1; i++)
        if (statuses[i] == status)
            return i;
    return NSTATUS - 1;
}

static void bump(_Atomic uint64_t *c, uint64_t by, bool own)
{
    if (own)
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, by, memory_order_relaxed);
}

void metrics_record(int route, int status, int64_t duration_ns)
{
    if (!stats)
        return;
    if (my_shard < 0) {
        unsigned n = atomic_fetch_add(&next_shard, 1);
        my_shard = n < METRICS_SHARDS - 1 ? (int)n : METRICS_SHARDS - 1;
    }
    bool own = my_shard < METRICS_SHARDS - 1;
    route_stats_t *s = &stats[(size_t)my_shard * nstats + (size_t)(route + 1)];
    bump(&s->by_status[status_index(status)], 1, own);
    size_t b = 0;
    while (b < NBOUNDS && duration_ns > bounds_ns[b])
        b++;
    bump(&s->buckets[b], 1, own);
    bump(&s->sum_ns, (uint64_t)(duration_ns > 0 ? duration_ns : 0), own);
}

/* The sum over the shards of one counter of route slot r, the counter named
 * by its offset in route_stats_t. */
static uint64_t counter_sum(size_t r, size_t offset)
{
    uint64_t sum = 0;
    for (size_t sh = 0; sh < METRICS_SHARDS; sh++)
        sum += atomic_load_explicit((_Atomic uint64_t *)((char *)&stats[sh * nstats + r] + offset),
                                    memory_order_relaxed);
    return sum;
}
#define METRICS_SUM(r, field) counter_sum((r), offsetof(route_stats_t, field))

uint64_t metrics_total_requests(void)
{
    uint64_t n = 0;
    for (size_t r = 0; stats && r < nstats; r++)
        for (size_t i = 0; i < NSTATUS; i++)
            n += METRICS_SUM(r, by_status[i]);
    return n;
}

static void label(char *out, size_t n, size_t r)
{
    if (r == 0) {
        snprintf(out, n, "route=\"unmatched\",method=\"\"");
    } else {
        api_route_meta_t m = api_route_meta(r - 1);
        snprintf(out, n, "route=\"%s\",method=\"%s\"", m.pattern, m.method);
    }
}

void metrics_render(wbuf_t *out)
{
    char line[512], lab[256];
    int len;
    if (!stats)
        return;
    static const char h1[] = "# HELP tally_http_requests_total HTTP requests by route, method and status.\n"
                             "# TYPE tally_http_requests_total counter\n";
    wbuf_put_bytes(out, h1, sizeof(h1) - 1);
    for (size_t r = 0; r < nstats; r++) {
        label(lab, sizeof(lab), r);
        for (size_t i = 0; i < NSTATUS; i++) {
            uint64_t v = METRICS_SUM(r, by_status[i]);
            if (!v)
                continue;
            char st[8];
            if (i < NSTATUS - 1)
                snprintf(st, sizeof(st), "%d", statuses[i]);
            else
                strcpy(st, "other");
            len = snprintf(line, sizeof(line), "tally_http_requests_total{%s,status=\"%s\"} %llu\n", lab, st,
                           (unsigned long long)v);
            wbuf_put_bytes(out, line, (size_t)len);
        }
    }
    static const char h2[] = "# HELP tally_http_request_duration_seconds Time from request start to response, by route.\n"
                             "# TYPE tally_http_request_duration_seconds histogram\n";
    wbuf_put_bytes(out, h2, sizeof(h2) - 1);
    for (size_t r = 0; r < nstats; r++) {
        uint64_t cum = 0, counts[NBOUNDS + 1];
        for (size_t b = 0; b <= NBOUNDS; b++) {
            counts[b] = METRICS_SUM(r, buckets[b]);
            cum += counts[b];
        }
        if (!cum)
            continue;
        label(lab, sizeof(lab), r);
        uint64_t run = 0;
        for (size_t b = 0; b < NBOUNDS; b++) {
            run += counts[b];
            len = snprintf(line, sizeof(line), "tally_http_request_duration_seconds_bucket{%s,le=\"%g\"} %llu\n",
                           lab, bounds[b], (unsigned long long)run);
            wbuf_put_bytes(out, line, (size_t)len);
        }
        len = snprintf(line, sizeof(line),
                       "tally_http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %llu\n"
                       "tally_http_request_duration_seconds_sum{%s} %.9f\n"
                       "tally_http_request_duration_seconds_count{%s} %llu\n",
                       lab, (unsigned long long)cum, lab,
                       (double)METRICS_SUM(r, sum_ns) / 1e9, lab,
                       (unsigned long long)cum);
        wbuf_put_bytes(out, line, (size_t)len);
    }
}
