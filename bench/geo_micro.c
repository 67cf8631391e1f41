/*
 * geo_micro.c - the geo set's own costs, without HTTP: ns per add (random
 * and ascending), per lookup, per remove, and per search on the benchmark's
 * 1M points (the /geo/nearby query of suite_50_geo.sh), plus bytes/member.
 *
 *   build/release/bench/geo_micro [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/geo.h"
#include "core/rng.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    char (*names)[16] = malloc((size_t)n * sizeof(*names));
    int *lens = malloc((size_t)n * sizeof(*lens));
    uint64_t *scores = malloc((size_t)n * sizeof(*scores));
    rng_t r;
    rng_seed(&r, 50);
    for (long i = 0; i < n; i++) {
        lens[i] = snprintf(names[i], sizeof(names[i]), "m%ld", i);
        scores[i] = geohash_score(115.5 + 2 * rng_double(&r), 39 + 2 * rng_double(&r));
    }
    geo_t *g = geo_create();
    double t0 = now_s();
    for (long i = 0; i < n; i++)
        geo_set(g, names[i], (size_t)lens[i], scores[i], GEO_ADD);
    double t1 = now_s();
    printf("geo_set (random positions)   %8.0f ns/op   %5.1f B/member\n", (t1 - t0) * 1e9 / (double)n,
           (double)geo_memory(g) / (double)n);

    uint64_t s, sum = 0;
    t0 = now_s();
    for (long i = 0; i < n; i++)
        sum += geo_score(g, names[(i * 7919) % n], (size_t)lens[(i * 7919) % n], &s) ? s : 0;
    t1 = now_s();
    printf("geo_score                    %8.0f ns/op   (%llu)\n", (t1 - t0) * 1e9 / (double)n,
           (unsigned long long)(sum & 1));

    geo_query_t q = { .shape = { .kind = GEO_SHAPE_RADIUS, .lon = 116.5, .lat = 40.0, .radius = 1.1,
                                 .to_m = GEO_UNIT_KM } };
    long iters = 20000;
    size_t found = 0;
    t0 = now_s();
    for (long i = 0; i < iters; i++) {
        geo_hit_t *hits;
        size_t k;
        geo_search(g, &q, &hits, &k);
        found = k;
        free(hits);
    }
    t1 = now_s();
    printf("geo_search radius 1.1 km     %8.0f ns/op   (%zu results)\n", (t1 - t0) * 1e9 / (double)iters, found);
    q.sort = GEO_SORT_ASC;
    t0 = now_s();
    for (long i = 0; i < iters; i++) {
        geo_hit_t *hits;
        size_t k;
        geo_search(g, &q, &hits, &k);
        free(hits);
    }
    t1 = now_s();
    printf("geo_search sorted            %8.0f ns/op\n", (t1 - t0) * 1e9 / (double)iters);

    t0 = now_s();
    for (long i = 0; i < n; i++)
        geo_remove(g, names[i], (size_t)lens[i]);
    t1 = now_s();
    printf("geo_remove                   %8.0f ns/op\n", (t1 - t0) * 1e9 / (double)n);

    t0 = now_s();
    for (long i = 0; i < n; i++)
        geo_set(g, names[i], (size_t)lens[i], (uint64_t)i << 20, GEO_ADD);
    t1 = now_s();
    printf("geo_set (ascending scores)   %8.0f ns/op   %5.1f B/member\n", (t1 - t0) * 1e9 / (double)n,
           (double)geo_memory(g) / (double)n);
    geo_free(g);
    free(names);
    free(lens);
    free(scores);
    return 0;
}
