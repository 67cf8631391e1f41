/*
 * freq_micro.c - core micro-benchmark of the frequency and quantile sketches:
 * nanoseconds per add and per query for Count-Min, Top-K and T-Digest, with
 * no HTTP, no JSON and no locks (what the structures themselves cost).
 *
 * Usage: freq_micro [SECONDS_PER_ROW]      (default 0.5)
 * Prints a table, then one "name ns_per_op" line per row for bench scripts
 * (after a line "--").
 *
 * Items are "user:<n>" strings drawn from a Zipf(1.0) law over 100 000 names
 * (T-Digest: log-normal values), pre-generated so the timing is the sketch's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cms.h"
#include "core/rng.h"
#include "core/tdigest.h"
#include "core/topk.h"

#define NAMES 100000
#define STREAM (1 << 20)         /* pre-generated operations, cycled */

static char *names[NAMES];
static size_t name_len[NAMES];
static uint32_t stream[STREAM];  /* name indices */
static double values[STREAM];
static double budget_s = 0.5;
static volatile uint64_t sink;   /* keeps results alive */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct row {
    const char *name;
    const char *what;
    double ns;
} row_t;

static row_t rows[32];
static int nrows;

/* Runs op(i) for i = 0, 1, ... in chunks until the budget is spent. */
#define TIME_ROW(label, descr, body)                                        \
    do {                                                                    \
        uint64_t ops = 0;                                                   \
        double t0 = now_s(), t_;                                             \
        do {                                                                \
            for (uint32_t k = 0; k < 65536; k++, ops++) {                   \
                uint32_t i = (uint32_t)(ops & (STREAM - 1));                \
                body;                                                       \
            }                                                               \
        } while ((t_ = now_s()) - t0 < budget_s);                          \
        rows[nrows++] = (row_t){ label, descr, (t_ - t0) * 1e9 / (double)ops }; \
    } while (0)

static void bench_cms(void)
{
    cms_t *c = cms_create(2000, 9, false), *cc = cms_create(2000, 9, true);
    TIME_ROW("cms_incr", "Count-Min 2000x9: increment one item", {
        uint32_t n = stream[i];
        sink += cms_incr(c, names[n], name_len[n], 1);
    });
    TIME_ROW("cms_incr_conservative", "Count-Min 2000x9 conservative: increment", {
        uint32_t n = stream[i];
        sink += cms_incr(cc, names[n], name_len[n], 1);
    });
    TIME_ROW("cms_query", "Count-Min 2000x9: count one item", {
        uint32_t n = stream[i];
        sink += cms_query(c, names[n], name_len[n]);
    });
    cms_free(c);
    cms_free(cc);
}

static void bench_topk(void)
{
    static const struct {
        uint32_t k, w, d;
        const char *add, *add_descr, *query, *query_descr;
    } cfg[] = {
        { 10, 8, 7, "topk10_add", "Top-K k=10 8x7 (defaults): add one item", "topk10_query",
          "Top-K k=10: query one item" },
        { 100, 461, 5, "topk100_add", "Top-K k=100 461x5: add one item", "topk100_query",
          "Top-K k=100: query one item" },
    };
    for (size_t j = 0; j < sizeof(cfg) / sizeof(cfg[0]); j++) {
        topk_t *t = topk_create(cfg[j].k, cfg[j].w, cfg[j].d, 0.9, 1);
        TIME_ROW(cfg[j].add, cfg[j].add_descr, {
            uint32_t n = stream[i];
            char *out;
            size_t olen;
            topk_add(t, names[n], name_len[n], 1, &out, &olen);
            free(out);
        });
        TIME_ROW(cfg[j].query, cfg[j].query_descr, {
            uint32_t n = stream[i];
            sink += topk_query(t, names[n], name_len[n]);
        });
        topk_free(t);
    }
}

static void bench_tdigest(void)
{
    tdigest_t *td = tdigest_create(TDIGEST_DEFAULT_COMPRESSION);
    TIME_ROW("tdigest_add", "T-Digest c=100: add one value (flushed per 1000)", {
        tdigest_add(td, values[i]);
        if ((ops & 1023) == 1023)
            tdigest_flush(td);
    });
    tdigest_flush(td);
    TIME_ROW("tdigest_quantile", "T-Digest c=100: one quantile", {
        sink += (uint64_t)tdigest_quantile(td, (double)(i & 1023) / 1024.0);
    });
    TIME_ROW("tdigest_cdf", "T-Digest c=100: one CDF", { sink += (uint64_t)(tdigest_cdf(td, values[i]) * 1e6); });
    TIME_ROW("tdigest_rank", "T-Digest c=100: one rank", { sink += (uint64_t)tdigest_rank(td, values[i], false); });
    tdigest_free(td);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        budget_s = atof(argv[1]);
    if (!(budget_s > 0))
        budget_s = 0.5;
    char buf[32];
    for (int i = 0; i < NAMES; i++) {
        int n = snprintf(buf, sizeof(buf), "user:%d", i);
        names[i] = strdup(buf);
        name_len[i] = (size_t)n;
    }
    double *cdf = malloc(NAMES * sizeof(double)), s = 0;
    for (int i = 0; i < NAMES; i++)
        cdf[i] = s += 1.0 / (i + 1);
    rng_t r;
    rng_seed(&r, 2024);
    for (int e = 0; e < STREAM; e++) {
        double u = rng_double(&r) * s;
        int lo = 0, hi = NAMES - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        stream[e] = (uint32_t)lo;
        double u1 = 1.0 - rng_double(&r), u2 = rng_double(&r);
        values[e] = exp(sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2));
    }
    free(cdf);

    bench_cms();
    bench_topk();
    bench_tdigest();

    printf("%-24s %-52s %10s %14s\n", "operation", "what", "ns/op", "ops/s");
    for (int i = 0; i < nrows; i++)
        printf("%-24s %-52s %10.1f %14.0f\n", rows[i].name, rows[i].what, rows[i].ns, 1e9 / rows[i].ns);
    printf("--\n");
    for (int i = 0; i < nrows; i++)
        printf("%s %.1f\n", rows[i].name, rows[i].ns);
    for (int i = 0; i < NAMES; i++)
        free(names[i]);
    return (int)(sink & 0);
}
