/*
 * test_api_ts_index.c - the time series' label index against hash flooding:
 * label pairs chosen to share a slot under the seed tally once used for
 * every process (what a client could precompute) fill one probe run as long
 * as their number when the index is seeded so; under the keyspace's secret
 * seed, as tallyd starts, they spread out and each is still found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cmd/ts_index.h"
#include "core/hash.h"

#define OLD_SEED 0x5453494458ULL   /* the fixed seed of the index before it took the keyspace's */
enum { N = 600, MASK = 1023 };     /* 600 pairs: a table of 1024 slots */

static char value[N][16];

/* Indexes N series labelled grp=value[i] in a new keyspace seeded ks_seed
 * (left to the caller to free: an index is found by its keyspace's address,
 * which a later keyspace could reuse); returns the longest probe run and
 * checks every pair is found. */
static size_t flood(uint64_t ks_seed, ks_t **out)
{
    ks_t *ks = *out = ks_create(0, ks_seed);
    assert_non_null(ks);
    ts_index_t *ix = ts_index_of(ks);
    assert_non_null(ix);
    ts_t *series[N];
    for (int i = 0; i < N; i++) {
        ts_label_t l = { "grp", 3, value[i], strlen(value[i]) };
        series[i] = ts_create(0, TS_DUP_BLOCK, &l, 1);
        assert_non_null(series[i]);
        char key[32];
        int klen = snprintf(key, sizeof(key), "k%d", i);
        assert_true(ts_index_add(ix, key, (size_t)klen, series[i]));
    }
    size_t longest = ts_index_probe_max(ix);
    for (int i = 0; i < N; i += 37) {
        ts_matcher_t m = { .name = "grp", .name_len = 3, .nvalues = 1 };
        m.value[0] = value[i];
        m.value_len[0] = strlen(value[i]);
        assert_int_equal(ts_index_count(ix, &m), 1);
    }
    for (int i = 0; i < N; i++)
        ts_type.free(series[i]);
    return longest;
}

static void test_seeded_against_flooding(void **state)
{
    (void)state;
    char pair[32];
    int found = 0;
    for (uint64_t i = 0; found < N; i++) {
        int len = snprintf(pair, sizeof(pair), "grp%cv%llu", '\0', (unsigned long long)i);
        if ((tally_xxh64(pair, (size_t)len, OLD_SEED) & MASK) == 0)
            snprintf(value[found++], sizeof(value[0]), "v%llu", (unsigned long long)i);
    }
    /* a keyspace seed of 0 gives the index the old fixed seed */
    ks_t *a, *b;
    assert_true(flood(0, &a) >= N);
    size_t longest = flood(0x9e3779b97f4a7c15ULL, &b);
    if (longest > 40)
        fail_msg("a secret seed still leaves a probe run of %zu slots for %d label pairs", longest, N);
    ks_free(a);
    ks_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seeded_against_flooding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
