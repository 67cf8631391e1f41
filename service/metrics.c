/* metrics.c - see metrics.h. */
#include "service/metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* Statuses the API produces; anything else is counted as "other". */
static const int statuses[] = { 200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 414, 415, 429, 500, 503, 507 };
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]) + 1)

/* Latency bucket upper bounds in seconds (Prometheus "le"). */
static const double bounds[] = { 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1, 0.25, 1.0 };
#define NBOUNDS (sizeof(bounds) / sizeof(bounds[0]))

typedef struct route_stats {
    _Atomic uint64_t by_status[NSTATUS];
    _Atomic uint64_t buckets[NBOUNDS + 1];
    _Atomic uint64_t sum_ns;
} route_stats_t;

static route_stats_t *stats;   /* [0] = unmatched, [i+1] = route i */
static size_t nstats;

void metrics_init(void)
{
    nstats = api_route_count() + 1;
    stats = calloc(nstats, sizeof(*stats));
}

static size_t status_index(int status)
{
    for (size_t i = 0; i < NSTATUS - 1; i++)
        if (statuses[i] == status)
            return i;
    return NSTATUS - 1;
}

void metrics_record(int route, int status, int64_t duration_ns)
{
    if (!stats)
        return;
    route_stats_t *s = &stats[route + 1];
    atomic_fetch_add_explicit(&s->by_status[status_index(status)], 1, memory_order_relaxed);
    double sec = (double)duration_ns / 1e9;
    size_t b = 0;
    while (b < NBOUNDS && sec > bounds[b])
        b++;
    atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->sum_ns, (uint64_t)(duration_ns > 0 ? duration_ns : 0), memory_order_relaxed);
}

uint64_t metrics_total_requests(void)
{
    uint64_t n = 0;
    for (size_t r = 0; stats && r < nstats; r++)
        for (size_t i = 0; i < NSTATUS; i++)
            n += atomic_load_explicit(&stats[r].by_status[i], memory_order_relaxed);
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
            uint64_t v = atomic_load_explicit(&stats[r].by_status[i], memory_order_relaxed);
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
            counts[b] = atomic_load_explicit(&stats[r].buckets[b], memory_order_relaxed);
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
                       (double)atomic_load_explicit(&stats[r].sum_ns, memory_order_relaxed) / 1e9, lab,
                       (unsigned long long)cum);
        wbuf_put_bytes(out, line, (size_t)len);
    }
}
