/*
 * sketch_micro.c - ns per operation of the core HyperLogLog, Bloom and Cuckoo
 * structures, without HTTP.  Prints "name value" lines (value in ns/op) for
 * bench/suite_30_uv_bloom.sh; run by hand it is docs/benchmarks.md's table.
 *
 * Items are "item:<n>" strings prepared up front; each figure is the best of
 * 3 runs so a noisy neighbour on the shared machine skews it less.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bloom.h"
#include "core/cuckoo.h"
#include "core/hll.h"

#define N 1000000          /* operations per measurement */
#define ITEM_LEN 24

static char *items;        /* N items of ITEM_LEN bytes (NUL-padded) */
static size_t lens[N];

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static const char *it(size_t i) { return items + (i % N) * ITEM_LEN; }

typedef void (*op_fn)(void *ctx, size_t i);

static volatile uint64_t sink;

static double measure(op_fn fn, void *ctx, size_t n, size_t offset)
{
    double best = 1e30;
    for (int run = 0; run < 3; run++) {
        double t0 = now_ns();
        for (size_t i = 0; i < n; i++)
            fn(ctx, i + offset + (size_t)run * n);
        double t = (now_ns() - t0) / (double)n;
        if (t < best)
            best = t;
    }
    return best;
}

static void hll_add_op(void *c, size_t i) { sink += (uint64_t)hll_add(c, it(i), lens[i % N]); }
static void hll_count_op(void *c, size_t i)
{
    (void)i;
    hll_invalidate_cache(c);
    sink += hll_count(c, true, NULL);
}
static void hll_sparse_op(void *c, size_t i)
{
    (void)c;
    /* a fresh HLL filled with 100 items: the sparse path, per add */
    hll_t *h = hll_create();
    for (size_t k = 0; k < 100; k++)
        sink += (uint64_t)hll_add(h, it(i * 100 + k), lens[(i * 100 + k) % N]);
    hll_free(h);
}
static void bloom_add_op(void *c, size_t i) { sink += (uint64_t)bloom_add(c, it(i), lens[i % N], 0, NULL); }
static void bloom_check_op(void *c, size_t i) { sink += bloom_check(c, it(i), lens[i % N]); }
static void cuckoo_add_op(void *c, size_t i) { sink += (uint64_t)cuckoo_add(c, it(i), lens[i % N], false, NULL); }
static void cuckoo_check_op(void *c, size_t i) { sink += cuckoo_check(c, it(i), lens[i % N]); }
static void cuckoo_del_op(void *c, size_t i) { sink += cuckoo_delete(c, it(i), lens[i % N], NULL); }

int main(void)
{
    items = calloc(N, ITEM_LEN);
    for (size_t i = 0; i < N; i++)
        lens[i] = (size_t)snprintf(items + i * ITEM_LEN, ITEM_LEN, "item:%zu", i * 2654435761u % 100000007u);

    hll_t *h = hll_create();
    printf("hll.add(dense) %.1f\n", measure(hll_add_op, h, N / 4, 0));
    printf("hll.count(dense,uncached) %.1f\n", measure(hll_count_op, h, 2000, 0));
    hll_free(h);
    printf("hll.add(sparse,100-item-sets) %.1f\n", measure(hll_sparse_op, NULL, 2000, 0) / 100);

    bloom_t *b = bloom_create(0.01, N, 2, true);
    printf("bloom.add(1%%,1M) %.1f\n", measure(bloom_add_op, b, N / 3, 0));
    printf("bloom.check(1%%,1M) %.1f\n", measure(bloom_check_op, b, N / 3, 0));
    bloom_free(b);

    static const uint32_t fps[] = { 8, 16 };
    for (int f = 0; f < 2; f++) {
        cuckoo_params_t p = { 2 * N, 4, 500, 1, fps[f] };
        cuckoo_t *c = cuckoo_create(&p, 1);
        /* adds up to ~55% load, then lookups and deletes of those items */
        printf("cuckoo.add(f=%u,b=4) %.1f\n", fps[f], measure(cuckoo_add_op, c, N / 3, 0));
        printf("cuckoo.check(f=%u,b=4) %.1f\n", fps[f], measure(cuckoo_check_op, c, N / 3, 0));
        printf("cuckoo.delete(f=%u,b=4) %.1f\n", fps[f], measure(cuckoo_del_op, c, N / 3, 0));
        cuckoo_free(c);
    }
    free(items);
    return (int)(sink & 0);
}
