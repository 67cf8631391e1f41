/*
 * test_keyspace.c - the keyspace against a simple model: entries, expiry
 * (lazy and active), memory accounting, many threads at once, SCAN cursors
 * across resizes, eviction, and snapshot consistency under concurrent writes.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/keyspace.h"
#include "core/persist_fmt.h"
#include "core/rng.h"

/* A test value type: one int64 counter. */
static void cnt_free(void *v) { free(v); }
static size_t cnt_size(const void *v)
{
    (void)v;
    return sizeof(int64_t);
}
static void cnt_encode(const void *v, wbuf_t *out) { wbuf_put_i64(out, *(const int64_t *)v); }
static void *cnt_decode(const uint8_t *p, size_t len, const char **why)
{
    if (len != 8) {
        *why = "len";
        return NULL;
    }
    int64_t *v = malloc(8);
    *v = (int64_t)le64_load(p);
    return v;
}
static const ks_type_t cnt_type = {
    .tag = 60, .name = "cnt", .free = cnt_free, .size = cnt_size, .encode = cnt_encode, .decode = cnt_decode
};

static int64_t *new_cnt(int64_t x)
{
    int64_t *v = malloc(sizeof(*v));
    *v = x;
    return v;
}

static ks_entry_t *put(ks_t *ks, const char *key, int64_t val, int64_t expire_ms, int64_t now)
{
    ks_key_t k = ks_key(ks, key, strlen(key));
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find_write(ks, &k, now);
    if (e) {
        *(int64_t *)ks_entry_value(e) = val;
        ks_entry_set_expire(ks, &e, expire_ms);
    } else {
        e = ks_add(ks, &k, &cnt_type, new_cnt(val), expire_ms, now);
    }
    ks_shard_unlock(sh);
    return e;
}

static bool get(ks_t *ks, const char *key, int64_t now, int64_t *out)
{
    ks_key_t k = ks_key(ks, key, strlen(key));
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(ks, &k, now);
    if (e && out)
        *out = *(int64_t *)ks_entry_value(e);
    ks_shard_unlock(sh);
    return e != NULL;
}

static bool del(ks_t *ks, const char *key, int64_t now)
{
    ks_key_t k = ks_key(ks, key, strlen(key));
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find_write(ks, &k, now);
    if (e)
        ks_entry_delete(ks, e);
    ks_shard_unlock(sh);
    return e != NULL;
}

static void test_basic_and_memory(void **state)
{
    (void)state;
    ks_t *ks = ks_create(3, 1);
    uint64_t base = ks_total_memory(ks);
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "key:%d", i);
        assert_non_null(put(ks, key, i, KS_NO_EXPIRY, 0));
    }
    assert_int_equal(ks_total_keys(ks), 5000);
    assert_true(ks_total_memory(ks) > base + 5000 * 8);
    for (int i = 0; i < 5000; i++) {
        int64_t v;
        snprintf(key, sizeof(key), "key:%d", i);
        assert_true(get(ks, key, 0, &v));
        assert_int_equal(v, i);
    }
    assert_false(get(ks, "key:5000", 0, NULL));
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "key:%d", i);
        assert_true(del(ks, key, 0));
    }
    assert_int_equal(ks_total_keys(ks), 0);
    assert_int_equal(ks_total_memory(ks), base);
    ks_free(ks);
}

static void test_expiry(void **state)
{
    (void)state;
    ks_t *ks = ks_create(2, 2);
    put(ks, "short", 1, 1000, 0);
    put(ks, "long", 2, 5000, 0);
    put(ks, "never", 3, KS_NO_EXPIRY, 0);
    assert_true(get(ks, "short", 999, NULL));
    assert_false(get(ks, "short", 1000, NULL));   /* expires exactly at its time */
    assert_int_equal(ks_total_keys(ks), 2);       /* removed lazily */
    /* active expiry: many volatile keys, then a cycle past their time */
    char key[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "v:%d", i);
        put(ks, key, i, 2000 + i % 10, 0);
    }
    /* one step is bounded: one shard, at most 4 x 20 samples, however
     * many of its keys are expired */
    size_t removed = ks_expire_step(ks, 3000, 20, 1);
    assert_in_range(removed, 1, 80);
    /* steps of one shard go round all of them */
    for (int round = 0; round < 800 && ks_total_keys(ks) > 2; round++)
        removed += ks_expire_step(ks, 3000, 20, 1);
    assert_int_equal(removed, 2000);
    assert_int_equal(ks_total_keys(ks), 2);
    assert_true(get(ks, "long", 3000, NULL));
    assert_true(get(ks, "never", 1LL << 50, NULL));
    /* clearing the expiry */
    ks_key_t k = ks_key(ks, "long", 4);
    ks_shard_lock(ks_shard_at(ks, k.shard));
    ks_entry_t *e = ks_find_write(ks, &k, 3000);
    ks_entry_set_expire(ks, &e, KS_NO_EXPIRY);
    ks_shard_unlock(ks_shard_at(ks, k.shard));
    assert_true(get(ks, "long", 1LL << 50, NULL));
    ks_free(ks);
}

/* The key's expiry as kept (KS_NO_EXPIRY: none); -1 when it is missing. */
static int64_t expire_of(ks_t *ks, const char *key, int64_t now)
{
    ks_key_t k = ks_key(ks, key, strlen(key));
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(ks, &k, now);
    int64_t x = e ? ks_entry_expire(ks, e) : -1;
    ks_shard_unlock(sh);
    return x;
}

/* Expiries are kept exactly from 1 ms to KS_EXPIRE_MAX (53 bits, packed
 * with the entry's address in a 12-byte slot); one before is 1, one after
 * is KS_EXPIRE_MAX, whether set by ks_add or ks_entry_set_expire. */
static void test_expiry_bounds(void **state)
{
    (void)state;
    ks_t *ks = ks_create(2, 12);
    const int64_t exact[] = { 2, (1LL << 21) - 1, 1LL << 21, (1LL << 21) + 1, 1764633600123LL,
                              0x123456789abcLL, (1LL << 52) + 12345, KS_EXPIRE_MAX - 1, KS_EXPIRE_MAX };
    char key[32];
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
        snprintf(key, sizeof(key), "x:%zu", i);
        put(ks, key, (int64_t)i, exact[i], 1);
        assert_true(expire_of(ks, key, 1) == exact[i]);
    }
    put(ks, "past", 1, -5, 0);
    assert_true(expire_of(ks, "past", 0) == 1);
    assert_true(expire_of(ks, "past", 1) == -1);   /* expired at 1 ms */
    put(ks, "far", 1, KS_EXPIRE_MAX + 1, 0);
    assert_true(expire_of(ks, "far", 0) == KS_EXPIRE_MAX);
    put(ks, "farthest", 1, INT64_MAX, 0);
    assert_true(expire_of(ks, "farthest", 0) == KS_EXPIRE_MAX);
    assert_true(expire_of(ks, "farthest", KS_EXPIRE_MAX - 1) == KS_EXPIRE_MAX);
    /* ks_entry_set_expire: clamped too; a clamped time equal to the kept one changes nothing */
    put(ks, "later", 1, 5000, 0);
    put(ks, "later", 1, INT64_MAX / 2, 0);
    assert_true(expire_of(ks, "later", 0) == KS_EXPIRE_MAX);
    put(ks, "later", 1, INT64_MAX, 0);
    assert_true(expire_of(ks, "later", 0) == KS_EXPIRE_MAX);
    put(ks, "later", 1, 7000, 0);
    assert_true(expire_of(ks, "later", 0) == 7000);
    put(ks, "later", 1, KS_NO_EXPIRY, 0);
    assert_true(expire_of(ks, "later", 0) == KS_NO_EXPIRY);
    ks_free(ks);
}

/* The volatile keys of a shard across the vol array's blocks (1024 slots
 * each, the first grown from 16): every key keeps its own expiry through
 * swap-with-last removals, growth and trimming back and forth across block
 * boundaries; active expiry takes exactly the expired ones; the memory
 * charged returns to its start. */
static void test_vol_blocks(void **state)
{
    (void)state;
    enum { N = 5000 };
    ks_t *ks = ks_create(0, 13);
    uint64_t base = ks_total_memory(ks);
    char key[32];
    bool live[N] = { false };
    rng_t r;
    rng_seed(&r, 99);
    /* up and down across the boundaries several times */
    const int targets[] = { 1030, 990, 2100, 1500, 3100, 200, N, 1023, 1025, 0, 4097, 100 };
    int n = 0;
    for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
        while (n < targets[t]) {
            int i;
            do
                i = (int)rng_below(&r, N);
            while (live[i]);
            snprintf(key, sizeof(key), "v:%d", i);
            put(ks, key, i, 1000000 + (int64_t)i * 7919, 0);
            live[i] = true;
            n++;
        }
        while (n > targets[t]) {
            int i;
            do
                i = (int)rng_below(&r, N);
            while (!live[i]);
            snprintf(key, sizeof(key), "v:%d", i);
            assert_true(i % 3 ? del(ks, key, 0) : (put(ks, key, i, KS_NO_EXPIRY, 0), del(ks, key, 0)));
            live[i] = false;
            n--;
        }
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof(key), "v:%d", i);
            assert_true(expire_of(ks, key, 0) == (live[i] ? 1000000 + (int64_t)i * 7919 : -1));
        }
    }
    assert_int_equal(ks_total_keys(ks), 100);
    /* active expiry past half of them: the rest stay */
    int64_t now = 1000000 + (int64_t)(N / 2) * 7919;
    for (int round = 0; round < 10000; round++)
        ks_expire_step(ks, now, 20, 1);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "v:%d", i);
        int64_t want = live[i] ? 1000000 + (int64_t)i * 7919 : -1;
        assert_true(expire_of(ks, key, 0) == (want > now ? want : -1));
    }
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "v:%d", i);
        del(ks, key, 0);
    }
    assert_int_equal(ks_total_keys(ks), 0);
    assert_int_equal(ks_total_memory(ks), base);
    ks_free(ks);
}

/* Many threads increment random counters; totals must add up. */
#define THREADS 4
#define OPS 100000
#define KEYS 1000

struct worker {
    ks_t *ks;
    uint64_t seed;
    int64_t added[KEYS];
};

static void *work(void *arg)
{
    struct worker *w = arg;
    rng_t r;
    rng_seed(&r, w->seed);
    char key[32];
    for (int i = 0; i < OPS; i++) {
        int idx = (int)rng_below(&r, KEYS);
        snprintf(key, sizeof(key), "counter:%d", idx);
        ks_key_t k = ks_key(w->ks, key, strlen(key));
        ks_shard_t *sh = ks_shard_at(w->ks, k.shard);
        ks_shard_lock(sh);
        ks_entry_t *e = ks_find_write(w->ks, &k, 0);
        if (e)
            (*(int64_t *)ks_entry_value(e))++;
        else
            ks_add(w->ks, &k, &cnt_type, new_cnt(1), KS_NO_EXPIRY, 0);
        ks_shard_unlock(sh);
        w->added[idx]++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    ks_t *ks = ks_create(4, 3);
    static struct worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].ks = ks;
        w[i].seed = 100 + (uint64_t)i;
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    char key[32];
    for (int idx = 0; idx < KEYS; idx++) {
        int64_t want = 0, got = 0;
        for (int i = 0; i < THREADS; i++)
            want += w[i].added[idx];
        snprintf(key, sizeof(key), "counter:%d", idx);
        if (want) {
            assert_true(get(ks, key, 0, &got));
            assert_int_equal(got, want);
        }
    }
    ks_free(ks);
}

/* SCAN: keys present throughout are seen at least once although the tables
 * grow and shrink between calls. */
struct seen {
    uint8_t *hits;
};

static void on_visit(void *ud, ks_entry_t *e)
{
    struct seen *s = ud;
    size_t len;
    const char *k = ks_entry_key(e, &len);
    if (len > 7 && len < 20 && memcmp(k, "stable:", 7) == 0) {
        char num[16];   /* a key is not NUL-terminated */
        memcpy(num, k + 7, len - 7);
        num[len - 7] = '\0';
        s->hits[atoi(num)] = 1;
    }
}

static void test_scan_across_resizes(void **state)
{
    (void)state;
    ks_t *ks = ks_create(1, 4);
    char key[32];
    enum { STABLE = 3000 };
    for (int i = 0; i < STABLE; i++) {
        snprintf(key, sizeof(key), "stable:%d", i);
        put(ks, key, i, KS_NO_EXPIRY, 0);
    }
    struct seen s = { calloc(STABLE, 1) };
    int churn = 0;
    for (unsigned sh = 0; sh < ks_shard_count(ks); sh++) {
        uint64_t cur = 0;
        do {
            ks_shard_t *shard = ks_shard_at(ks, sh);
            ks_shard_lock(shard);
            ks_shard_scan(ks, shard, &cur, 3, 0, on_visit, &s);
            ks_shard_unlock(shard);
            /* grow, then shrink, the tables between calls */
            for (int j = 0; j < 200; j++) {
                snprintf(key, sizeof(key), "churn:%d", churn++);
                put(ks, key, 0, KS_NO_EXPIRY, 0);
            }
            if (churn % 4000 == 0)
                for (int j = churn - 4000; j < churn; j++) {
                    snprintf(key, sizeof(key), "churn:%d", j);
                    del(ks, key, 0);
                }
        } while (cur != 0);
    }
    for (int i = 0; i < STABLE; i++)
        if (!s.hits[i])
            fail_msg("stable:%d was never visited", i);
    free(s.hits);
    ks_free(ks);
}

/* A shard of 1.9M keys, whose table (2.5M slots) is larger than its slots'
 * bits of hash can place (10 bits beside 22 bits of handle), so that they
 * no longer give an entry's home and the keyspace hashes keys again:
 * lookups, expiry, a SCAN across the growth and shrinks back below 2^10
 * slots, deletion. */
static void test_large_table(void **state)
{
    (void)state;
    ks_t *ks = ks_create(0, 9);
    uint64_t base = ks_total_memory(ks);
    char key[32];
    enum { N = 1900000, STABLE = 1000 };
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "big:%d", i);
        assert_non_null(put(ks, key, i, i % 5 ? KS_NO_EXPIRY : 5000, 0));
    }
    assert_int_equal(ks_total_keys(ks), N);
    for (int i = 0; i < N; i += 997) {
        int64_t v;
        snprintf(key, sizeof(key), "big:%d", i);
        assert_true(get(ks, key, 0, &v));
        assert_int_equal(v, i);
    }
    /* a scan while the table shrinks (its slots keep their 10 bits of tag) */
    for (int i = 0; i < STABLE; i++) {
        snprintf(key, sizeof(key), "stable:%d", i);
        put(ks, key, i, KS_NO_EXPIRY, 0);
    }
    struct seen s = { calloc(STABLE, 1) };
    ks_shard_t *shard = ks_shard_at(ks, 0);
    uint64_t cur = 0;
    int next_del = 0;
    do {
        ks_shard_lock(shard);
        ks_shard_scan(ks, shard, &cur, 4096, 0, on_visit, &s);
        ks_shard_unlock(shard);
        for (int j = 0; j < 20000 && next_del < N; j++, next_del++) {
            snprintf(key, sizeof(key), "big:%d", next_del);
            assert_true(del(ks, key, 0));
        }
    } while (cur != 0);
    for (int i = 0; i < STABLE; i++)
        if (!s.hits[i])
            fail_msg("stable:%d was never visited", i);
    free(s.hits);
    /* the rest expire (every fifth) or are deleted */
    for (int i = next_del; i < N; i++) {
        snprintf(key, sizeof(key), "big:%d", i);
        assert_true(get(ks, key, 4999, NULL));
        assert_true(i % 5 ? del(ks, key, 6000) : !get(ks, key, 6000, NULL));
    }
    for (int i = 0; i < STABLE; i++) {
        snprintf(key, sizeof(key), "stable:%d", i);
        assert_true(del(ks, key, 0));
    }
    assert_int_equal(ks_total_keys(ks), 0);
    assert_int_equal(ks_total_memory(ks), base);
    ks_free(ks);
}

static void test_lock_keys_order(void **state)
{
    (void)state;
    ks_t *ks = ks_create(4, 5);
    ks_key_t keys[6] = { ks_key(ks, "a", 1), ks_key(ks, "b", 1), ks_key(ks, "a", 1),
                         ks_key(ks, "zz", 2), ks_key(ks, "q", 1), ks_key(ks, "b", 1) };
    ks_lock_keys(ks, keys, 6);   /* duplicates and any order: no self-deadlock */
    ks_unlock_keys(ks, keys, 6);
    ks_lock_all(ks);
    ks_unlock_all(ks);
    ks_free(ks);
}

static void test_eviction(void **state)
{
    (void)state;
    ks_t *ks = ks_create(2, 6);
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "k:%d", i);
        put(ks, key, i, i % 2 ? 100000 : KS_NO_EXPIRY, (int64_t)i * 1000);
    }
    uint64_t mem = ks_total_memory(ks);
    ks_set_maxmemory(ks, mem / 2, KS_NOEVICTION);
    assert_true(ks_over_limit(ks));
    assert_int_equal(ks_evict(ks, 2000000, NULL, NULL), 0);   /* noeviction evicts nothing */
    ks_set_maxmemory(ks, mem * 6 / 10, KS_VOLATILE_LRU);   /* reachable by evicting only volatile keys */
    while (ks_over_limit(ks))
        assert_true(ks_evict(ks, 2000000, NULL, NULL) > 0);
    /* only volatile (odd) keys went */
    for (int i = 0; i < 1000; i += 2) {
        snprintf(key, sizeof(key), "k:%d", i);
        assert_true(get(ks, key, 0, NULL));
    }
    ks_set_maxmemory(ks, mem / 8, KS_ALLKEYS_LRU);
    while (ks_over_limit(ks))
        assert_true(ks_evict(ks, 2000000, NULL, NULL) > 0);
    assert_true(ks_total_memory(ks) < mem / 8);
    ks_free(ks);
}

/* Snapshot consistency: the records written show every key exactly as it
 * was at the barrier, whatever writes, deletes and inserts happen while the
 * snapshot is being drained. */
static void decode_all(const wbuf_t *b, int64_t *vals, int n, int *count)
{
    size_t off = 0;
    *count = 0;
    for (int i = 0; i < n; i++)
        vals[i] = -1;
    while (off < b->len) {
        snap_record_t r;
        size_t used;
        uint64_t cnt;
        const char *why;
        assert_int_equal(snapfmt_parse_record(b->data + off, b->len - off, &r, &used, &cnt, &why), PARSE_OK);
        assert_int_equal(r.tag, 60);
        assert_true(r.klen > 2 && r.klen < 16 && memcmp(r.key, "s:", 2) == 0);
        char num[16];   /* the record's key is not NUL-terminated */
        memcpy(num, r.key + 2, r.klen - 2);
        num[r.klen - 2] = '\0';
        int idx = atoi(num);
        assert_true(idx >= 0 && idx < n);
        assert_int_equal(vals[idx], -1);   /* each key once */
        vals[idx] = (int64_t)le64_load(r.value);
        (*count)++;
        off += used;
    }
}

static void test_snapshot_consistency(void **state)
{
    (void)state;
    enum { N = 4000 };
    ks_t *ks = ks_create(3, 7);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "s:%d", i);
        put(ks, key, i, KS_NO_EXPIRY, 0);
    }
    ks_lock_all(ks);
    ks_snapshot_begin(ks);
    ks_unlock_all(ks);

    wbuf_t out = WBUF_INIT;
    uint64_t records = 0;
    rng_t r;
    rng_seed(&r, 9);
    int extra = N;
    for (unsigned s = 0; s < ks_shard_count(ks); s++) {
        bool done;
        do {
            /* writes between every slice: modify, delete, insert */
            for (int j = 0; j < 50; j++) {
                int idx = (int)rng_below(&r, N);
                snprintf(key, sizeof(key), "s:%d", idx);
                switch (rng_below(&r, 3)) {
                case 0: put(ks, key, 1000000 + idx, KS_NO_EXPIRY, 0); break;
                case 1: del(ks, key, 0); break;
                default:
                    snprintf(key, sizeof(key), "s:%d", extra < 2 * N - 1 ? extra++ : extra);
                    put(ks, key, 7, KS_NO_EXPIRY, 0);
                }
            }
            ks_shard_t *sh = ks_shard_at(ks, s);
            ks_shard_lock(sh);
            done = ks_snapshot_drain(ks, sh, &out, 512, &records);
            ks_shard_unlock(sh);
        } while (!done);
    }
    assert_false(out.oom);
    assert_false(ks_snapshot_failed(ks));
    ks_snapshot_end(ks);

    static int64_t vals[2 * N];
    int count;
    decode_all(&out, vals, 2 * N, &count);
    assert_int_equal(count, N);
    assert_int_equal(records, N);
    for (int i = 0; i < N; i++)
        if (vals[i] != i)
            fail_msg("s:%d snapshotted as %lld, expected its barrier value %d", i, (long long)vals[i], i);
    wbuf_free(&out);

    /* a second snapshot sees the current state */
    ks_lock_all(ks);
    ks_snapshot_begin(ks);
    ks_unlock_all(ks);
    records = 0;
    for (unsigned s = 0; s < ks_shard_count(ks); s++) {
        ks_shard_t *sh = ks_shard_at(ks, s);
        ks_shard_lock(sh);
        while (!ks_snapshot_drain(ks, sh, &out, 1 << 20, &records))
            ;
        ks_shard_unlock(sh);
    }
    ks_snapshot_end(ks);
    assert_int_equal(records, ks_total_keys(ks));
    wbuf_free(&out);
    ks_free(ks);
}

/* Snapshot epochs are 8 bits: an entry a snapshot did not reach (it ended
 * before walking the shard, or wrote part of it) keeps an older epoch, which
 * comes round again 255 snapshots later.  Whole snapshots 255 apart, with
 * abandoned and partial ones between them over three wraps: each whole one
 * still writes every key exactly once. */
static void test_snapshot_epoch_wrap(void **state)
{
    (void)state;
    enum { N = 300 };
    ks_t *ks = ks_create(2, 21);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "s:%d", i);
        put(ks, key, i, KS_NO_EXPIRY, 0);
    }
    for (int round = 0; round < 3 * 255 + 1; round++) {
        ks_lock_all(ks);
        ks_snapshot_begin(ks);
        ks_unlock_all(ks);
        wbuf_t out = WBUF_INIT;
        uint64_t records = 0;
        if (round % 255 == 0 || round == 400) {
            for (unsigned s = 0; s < ks_shard_count(ks); s++) {
                ks_shard_t *sh = ks_shard_at(ks, s);
                bool done;
                do {
                    ks_shard_lock(sh);
                    done = ks_snapshot_drain(ks, sh, &out, 1024, &records);
                    ks_shard_unlock(sh);
                } while (!done);
            }
            assert_false(out.oom);
            int64_t vals[N];
            int count;
            decode_all(&out, vals, N, &count);
            assert_int_equal(count, N);
            assert_int_equal(records, N);
            for (int i = 0; i < N; i++)
                assert_int_equal(vals[i], i);
        } else if (round % 7 == 0) {   /* part of one shard */
            ks_shard_t *sh = ks_shard_at(ks, (unsigned)round % ks_shard_count(ks));
            ks_shard_lock(sh);
            ks_snapshot_drain(ks, sh, &out, 64, &records);
            ks_shard_unlock(sh);
        }
        wbuf_free(&out);
        ks_snapshot_end(ks);
    }
    ks_free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_and_memory),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_expiry_bounds),
        cmocka_unit_test(test_vol_blocks),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_scan_across_resizes),
        cmocka_unit_test(test_large_table),
        cmocka_unit_test(test_lock_keys_order),
        cmocka_unit_test(test_eviction),
        cmocka_unit_test(test_snapshot_consistency),
        cmocka_unit_test(test_snapshot_epoch_wrap),
    };
    return cmocka_run_group_tests_name("keyspace", tests, NULL, NULL);
}
