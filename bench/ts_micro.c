/*
 * ts_micro.c - core/ts costs in ns, without HTTP: appends one at a time and
 * in batches, out-of-order inserts (a chunk decode + re-encode each), a full
 * decode, and an aggregation over one day of 1-second samples.  Prints
 * "name<TAB>value<TAB>unit" lines for bench/suite_60_ts.sh to record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/rng.h"
#include "core/ts.h"

#define DAY 86400

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static bool sink(void *ud, int64_t t, double v)
{
    double *acc = ud;
    *acc += v + (double)t;
    return true;
}

/* One day of a slowly changing value, 1 s apart. */
static ts_sample_t *day(void)
{
    rng_t r;
    rng_seed(&r, 1);
    ts_sample_t *s = malloc(DAY * sizeof(*s));
    double v = 21;
    for (int i = 0; i < DAY; i++) {
        if (rng_below(&r, 10) == 0)
            v += rng_below(&r, 2) ? 0.1 : -0.1;
        s[i] = (ts_sample_t){ 1686697976000LL + i * 1000LL, v };
    }
    return s;
}

int main(void)
{
    ts_sample_t *s = day();
    const int rounds = 5;

    double t0 = now_ns();
    ts_t *ts = NULL;
    for (int k = 0; k < rounds; k++) {
        ts_free(ts);
        ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
        for (int i = 0; i < DAY; i++)
            ts_add(ts, &s[i], 1, TS_DUP_BLOCK, NULL);
    }
    printf("core ts_add one sample in order\t%.1f\tns/sample\n", (now_ns() - t0) / rounds / DAY);

    t0 = now_ns();
    for (int k = 0; k < rounds; k++) {
        ts_free(ts);
        ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
        for (int i = 0; i < DAY; i += 1000)
            ts_add(ts, &s[i], DAY - i < 1000 ? (size_t)(DAY - i) : 1000, TS_DUP_BLOCK, NULL);
    }
    printf("core ts_add batches of 1000 in order\t%.1f\tns/sample\n", (now_ns() - t0) / rounds / DAY);

    /* compaction: the same ingest, one sample at a time, into a source with
     * rules, each applied after every add as the handler does */
    static const ts_rule_t rules[] = { { "avg1m", 5, TS_AGG_AVG, 60000, 0, 0, TS_RULE_GEN_2, -1 },
                                       { "max1h", 5, TS_AGG_MAX, 3600000, 0, 0, TS_RULE_GEN_2, -1 },
                                       { "twa5m", 5, TS_AGG_TWA, 300000, 0, 0, TS_RULE_GEN_2, -1 } };
    for (size_t nr = 1; nr <= 3; nr += 2) {
        ts_t *dst[3];
        t0 = now_ns();
        for (int k = 0; k < rounds; k++) {
            ts_free(ts);
            ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
            for (size_t j = 0; j < nr; j++) {
                ts_rule_add(ts, &rules[j]);
                dst[j] = ts_create(0, TS_DUP_BLOCK, NULL, 0);
            }
            for (int i = 0; i < DAY; i++) {
                ts_sample_t last;
                int64_t old = ts_last(ts, &last) ? last.ts : -1;
                ts_add(ts, &s[i], 1, TS_DUP_BLOCK, NULL);
                for (size_t j = 0; j < nr; j++)
                    ts_rule_added(ts, &rules[j], old, &s[i].ts, 1, dst[j]);
            }
            for (size_t j = 0; j < nr; j++)
                ts_free(dst[j]);
        }
        printf("core ts_add one sample in order + %zu compaction rule%s\t%.1f\tns/sample\n", nr, nr > 1 ? "s" : "",
               (now_ns() - t0) / rounds / DAY);
    }

    /* out of order: a sample between two existing ones, anywhere in the day */
    rng_t r;
    rng_seed(&r, 2);
    const int ooo = 20000;
    t0 = now_ns();
    for (int i = 0; i < ooo; i++) {
        ts_sample_t x = { s[rng_below(&r, DAY)].ts + 1 + (int64_t)rng_below(&r, 998), 1.5 };
        ts_add(ts, &x, 1, TS_DUP_LAST, NULL);
    }
    printf("core ts_add one sample out of order\t%.0f\tns/sample\n", (now_ns() - t0) / ooo);
    ts_free(ts);
    ts = ts_create(0, TS_DUP_BLOCK, NULL, 0);
    ts_add(ts, s, DAY, TS_DUP_BLOCK, NULL);

    double acc = 0;
    ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP };
    t0 = now_ns();
    for (int k = 0; k < rounds; k++)
        ts_range(ts, &q, sink, &acc);
    printf("core ts_range raw decode, one day\t%.2f\tns/sample\n", (now_ns() - t0) / rounds / DAY);

    q.agg = TS_AGG_AVG;
    q.bucket_ms = 3600000;
    t0 = now_ns();
    for (int k = 0; k < rounds; k++)
        ts_range(ts, &q, sink, &acc);
    printf("core ts_range avg hourly buckets, one day\t%.0f\tus/query\n", (now_ns() - t0) / rounds / 1000);

    ts_info_t info;
    ts_get_info(ts, &info);
    printf("core memory, one day of 1-s samples\t%.3f\tbytes/sample\n", (double)info.memory_bytes / DAY);
    if (acc == 42)
        puts("");   /* keep the sink alive */
    ts_free(ts);
    free(s);
    return 0;
}
