/*
 * test_keyspace_model.c - the keyspace against a model (tests/fuzz/
 * ks_model.h): seeded random operations - insert, overwrite in place and by
 * replacement (values moving into and out of their entries), delete,
 * expire lazily and actively, evict, grow the tables and shrink them, and
 * snapshot while writing - each answer checked against the model, and the
 * memory charged checked entry by entry.  The same driver runs the fuzz
 * target tests/fuzz/fuzz_keyspace.c; here also from several threads at once
 * on one keyspace (ASan, TSan).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define KM_FAIL(...) fail_msg(__VA_ARGS__)
#include "tests/fuzz/ks_model.h"
#include "core/rng.h"

static uint8_t *random_ops(uint64_t seed, size_t n)
{
    uint8_t *p = malloc(n);
    assert_non_null(p);
    rng_t r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_below(&r, 256);
    return p;
}

/* Many seeds, each on a fresh keyspace of 1 to 8 shards. */
static void test_model_random(void **state)
{
    (void)state;
    uint64_t ops = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        size_t n = 2000 + (size_t)(seed % 7) * 1000;
        uint8_t *p = random_ops(seed, n);
        ks_t *ks = ks_create((unsigned)(seed % 4), seed * 0x9e3779b97f4a7c15ULL);
        assert_non_null(ks);
        km_run(ks, "k:", p, n, true, &ops);
        ks_free(ks);
        free(p);
    }
    assert_true(ops > 100000);
}

/* Tables grown past many resizes and shrunk back: 20 000 keys of both
 * kinds in one shard, every one found with its value, then deleted. */
static void test_model_resize(void **state)
{
    (void)state;
    enum { N = 20000 };
    ks_t *ks = ks_create(0, 3);
    char key[32];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof(key), "r:%d", i);
            ks_key_t k = ks_key(ks, key, strlen(key));
            ks_shard_t *sh = ks_shard_at(ks, k.shard);
            ks_shard_lock(sh);
            int t = i % KM_NTYPES;
            void *v = km_new_value(t, i, t == KM_HEAP ? i % 50 : t == KM_MAYBE ? i % 5 == 0 : 0);
            assert_non_null(ks_add(ks, &k, &km_types[t], v, i % 3 ? KS_NO_EXPIRY : 5000, 1000));
            ks_shard_unlock(sh);
        }
        assert_int_equal(ks_total_keys(ks), N);
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof(key), "r:%d", i);
            ks_key_t k = ks_key(ks, key, strlen(key));
            ks_shard_t *sh = ks_shard_at(ks, k.shard);
            ks_shard_lock(sh);
            ks_entry_t *e = ks_find_write(ks, &k, 1000);
            assert_non_null(e);
            assert_int_equal(*(const int64_t *)ks_entry_value(e), i);   /* every type's first field */
            if (i % 2)
                ks_entry_delete(ks, e);
            ks_shard_unlock(sh);
        }
        assert_int_equal(ks_total_keys(ks), N / 2);
        /* the rest expire by active expiry (a third) and deletion */
        while (ks_expire_step(ks, 6000, 20, 1) > 0)
            ;
        for (int i = 0; i < N; i += 2) {
            snprintf(key, sizeof(key), "r:%d", i);
            ks_key_t k = ks_key(ks, key, strlen(key));
            ks_shard_t *sh = ks_shard_at(ks, k.shard);
            ks_shard_lock(sh);
            ks_entry_t *e = ks_find_write(ks, &k, 6000);
            assert_int_equal(e != NULL, i % 3 != 0);
            if (e)
                ks_entry_delete(ks, e);
            ks_shard_unlock(sh);
        }
        assert_int_equal(ks_total_keys(ks), 0);
        assert_int_equal(ks_total_memory(ks), 0);
    }
    ks_free(ks);
}

/* Several drivers at once on one keyspace, each on its own keys, while
 * another thread takes snapshots: the locks keep each model right (TSan
 * checks the rest). */
typedef struct worker {
    ks_t *ks;
    char prefix[8];
    uint64_t seed;
    uint64_t ops;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    for (int r = 0; r < 4; r++) {
        size_t n = 4000;
        uint8_t *p = random_ops(w->seed * 131 + (uint64_t)r, n);
        km_run(w->ks, w->prefix, p, n, false, &w->ops);
        free(p);
    }
    return NULL;
}

typedef struct snapper {
    ks_t *ks;
    _Atomic int *stop;
    int taken;
} snapper_t;

static void *snapper_main(void *arg)
{
    snapper_t *s = arg;
    while (!atomic_load(s->stop) || s->taken == 0) {
        ks_lock_all(s->ks);
        ks_snapshot_begin(s->ks);
        ks_unlock_all(s->ks);
        wbuf_t out = WBUF_INIT;
        uint64_t records = 0;
        for (unsigned i = 0; i < ks_shard_count(s->ks); i++) {
            ks_shard_t *sh = ks_shard_at(s->ks, i);
            bool done;
            do {
                ks_shard_lock(sh);
                done = ks_snapshot_drain(s->ks, sh, &out, 64, &records);
                ks_shard_unlock(sh);
            } while (!done);
        }
        ks_snapshot_end(s->ks);
        size_t off = 0;
        uint64_t n = 0;
        while (off < out.len) {
            snap_record_t r;
            size_t used;
            uint64_t cnt;
            const char *why;
            if (snapfmt_parse_record(out.data + off, out.len - off, &r, &used, &cnt, &why) != PARSE_OK)
                abort();
            off += used;
            n++;
        }
        if (n != records || out.oom)
            abort();
        wbuf_free(&out);
        s->taken++;
    }
    return NULL;
}

static void test_model_threads(void **state)
{
    (void)state;
    enum { W = 4 };
    ks_t *ks = ks_create(2, 11);
    worker_t w[W];
    pthread_t t[W], st;
    _Atomic int stop = 0;
    snapper_t sn = { ks, &stop, 0 };
    assert_int_equal(pthread_create(&st, NULL, snapper_main, &sn), 0);
    for (int i = 0; i < W; i++) {
        w[i] = (worker_t){ ks, "", (uint64_t)i + 1, 0 };
        snprintf(w[i].prefix, sizeof(w[i].prefix), "%c:", 'a' + i);
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < W; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop, 1);
    pthread_join(st, NULL);
    assert_true(sn.taken > 0);
    assert_int_equal(ks_total_keys(ks), 0);
    assert_int_equal(ks_total_memory(ks), 0);
    ks_free(ks);
}

/* A value kept inside its entry is not a second allocation: its address is
 * inside the entry, next to the key. */
static void test_inline_in_entry(void **state)
{
    (void)state;
    ks_t *ks = ks_create(0, 5);
    ks_key_t k = ks_key(ks, "inline", 6);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_add(ks, &k, &km_types[KM_INL], km_new_value(KM_INL, 42, 0), KS_NO_EXPIRY, 0);
    assert_non_null(e);
    const char *v = ks_entry_value(e);
    size_t klen;
    const char *key = ks_entry_key(e, &klen);
    assert_true(v > key && v < (const char *)e + 32);   /* in the cell, after the key */
    assert_int_equal(*(const int64_t *)(const void *)v, 42);
    assert_int_equal(ks_entry_memory(e), km_charge(KM_INL, 6, false, false, 0));
    /* a value that may not be inline is stored apart, and back again */
    ks_entry_delete(ks, e);
    e = ks_add(ks, &k, &km_types[KM_MAYBE], km_new_value(KM_MAYBE, 1, 1), KS_NO_EXPIRY, 0);
    assert_non_null(e);
    v = ks_entry_value(e);
    key = ks_entry_key(e, &klen);
    assert_false(v > (const char *)e && v < (const char *)e + 32);
    assert_int_equal(ks_entry_memory(e), km_charge(KM_MAYBE, 6, false, false, sizeof(km_maybe_t)));
    ks_entry_replace_value(ks, e, km_new_value(KM_MAYBE, 2, 0));
    v = ks_entry_value(e);
    assert_true(v > key && v < (const char *)e + 32);   /* in the cell, after the key */
    assert_int_equal(ks_entry_memory(e), km_charge(KM_MAYBE, 6, false, false, 0));
    assert_int_equal(ks_total_memory(ks), km_charge(KM_MAYBE, 6, false, false, 0));
    ks_shard_unlock(sh);
    ks_free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inline_in_entry),
        cmocka_unit_test(test_model_random),
        cmocka_unit_test(test_model_resize),
        cmocka_unit_test(test_model_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
