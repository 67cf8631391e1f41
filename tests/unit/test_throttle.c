/*
 * test_throttle.c - the keyspace value every algorithm shares: check/commit
 * through one entry point, expiry instants, clones, and the encodings
 * (version 1 from the first release still loads; version 2 round-trips every
 * algorithm; hostile bytes are refused).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/keyspace.h"
#include "core/throttle.h"

#define S(x) ((int64_t)((x) * 1e9))
#define BASE S(1700000040)

static throttle_params_t params_of(throttle_algo_t a)
{
    throttle_params_t p;
    memset(&p, 0, sizeof(p));
    p.algo = a;
    switch (a) {
    case THROTTLE_GCRA: p.u.gcra = (gcra_params_t){ 2, 1, S(1) }; break;
    case THROTTLE_SLIDING_LOG: p.u.log = (slog_params_t){ 3, S(10) }; break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW: p.u.win = (window_params_t){ 3, S(60) }; break;
    case THROTTLE_TOKEN_BUCKET: p.u.tb = (tbucket_params_t){ 3, 500000 }; break;
    }
    return p;
}

/* Every algorithm: three allowed, the fourth limited, and the key's expiry is
 * the instant its state equals an absent key's. */
static void test_every_algorithm(void **state)
{
    (void)state;
    static const int64_t expect_expire[] = {
        [THROTTLE_GCRA] = BASE + S(3),
        [THROTTLE_SLIDING_LOG] = BASE + S(10),
        [THROTTLE_SLIDING_WINDOW] = BASE + S(120),
        [THROTTLE_FIXED_WINDOW] = BASE + S(60),
        [THROTTLE_TOKEN_BUCKET] = BASE + S(6),
    };
    for (int a = THROTTLE_GCRA; a <= THROTTLE_ALGO_MAX; a++) {
        throttle_params_t p = params_of((throttle_algo_t)a);
        const char *field;
        assert_null(throttle_validate(&p, &field));
        assert_string_equal(throttle_algo_name((throttle_algo_t)a),
                            throttle_algo_name(throttle_algo_parse(throttle_algo_name((throttle_algo_t)a))));
        throttle_t *t = NULL;
        rl_result_t r;
        int64_t exp = 0;
        for (int i = 0; i < 3; i++) {
            assert_true(throttle_check(t, &p, BASE, 1, &r));
            assert_true(r.allowed);
            assert_int_equal(r.limit, 3);
            assert_int_equal(r.remaining, 2 - i);
            assert_true(throttle_commit(&t, &p, BASE, 1, &exp));
            assert_int_equal(throttle_algo(t), a);
        }
        assert_int_equal(exp, expect_expire[a]);
        assert_false(throttle_check(t, &p, BASE, 1, &r));
        assert_false(r.allowed);
        assert_true(r.retry_after_ns > 0);
        assert_false(throttle_check(t, &p, BASE, 0, &r));   /* peeks never record */
        assert_false(throttle_check(t, &p, BASE, 4, &r));
        assert_int_equal(r.retry_after_ns, RL_NEVER);

        /* a clone is independent */
        throttle_t *c = throttle_clone(t);
        assert_non_null(c);
        assert_true(throttle_check(c, &p, BASE + S(200), 1, &r));
        assert_true(throttle_commit(&c, &p, BASE + S(200), 1, &exp));
        assert_false(throttle_check(t, &p, BASE, 1, &r));

        /* v2 round trip: same decisions afterwards */
        wbuf_t b = WBUF_INIT;
        throttle_type.encode(t, &b);
        assert_int_equal(b.data[0], 2);
        assert_int_equal(b.data[1], a);
        const char *why;
        throttle_t *d = throttle_type.decode(b.data, b.len, &why);
        assert_non_null(d);
        rl_result_t r1, r2;
        for (int k = 0; k < 5; k++) {
            throttle_check(t, &p, BASE + S(k), 1, &r1);
            throttle_check(d, &p, BASE + S(k), 1, &r2);
            assert_int_equal(r1.allowed, r2.allowed);
            assert_int_equal(r1.remaining, r2.remaining);
            assert_int_equal(r1.retry_after_ns, r2.retry_after_ns);
            assert_int_equal(r1.reset_after_ns, r2.reset_after_ns);
        }
        /* every truncation is refused */
        for (size_t n = 0; n < b.len; n++)
            assert_null(throttle_type.decode(b.data, n, &why));
        throttle_type.free(d);
        wbuf_free(&b);
        throttle_free(c);
        throttle_free(t);
    }
}

/* A snapshot written by the first release (version 1, GCRA) still loads. */
static void test_version1(void **state)
{
    (void)state;
    uint8_t v1[10] = { 1, 1 };
    le64_store(v1 + 2, (uint64_t)(BASE + S(2)));
    const char *why;
    throttle_t *t = throttle_type.decode(v1, sizeof(v1), &why);
    assert_non_null(t);
    assert_int_equal(throttle_algo(t), THROTTLE_GCRA);
    assert_int_equal(throttle_gcra_tat(t), BASE + S(2));
    throttle_free(t);
    v1[1] = 2;   /* version 1 knew only GCRA */
    assert_null(throttle_type.decode(v1, sizeof(v1), &why));
}

static void test_hostile(void **state)
{
    (void)state;
    const char *why;
    uint8_t b[40];
    memset(b, 0, sizeof(b));
    b[0] = 4;   /* unknown version */
    b[1] = 1;
    assert_null(throttle_type.decode(b, 10, &why));
    b[0] = 2;
    b[1] = 9;   /* unknown algorithm */
    assert_null(throttle_type.decode(b, 10, &why));
    b[1] = THROTTLE_FIXED_WINDOW;
    le64_store(b + 2, 5);
    le64_store(b + 10, (uint64_t)-1);   /* negative count */
    assert_null(throttle_type.decode(b, 18, &why));
    b[1] = THROTTLE_TOKEN_BUCKET;
    memset(b + 2, 0, 16);               /* a debt of more than the largest bucket */
    b[17] = 0x80;
    le64_store(b + 18, 5);
    assert_null(throttle_type.decode(b, 26, &why));
    b[1] = THROTTLE_GCRA;
    le64_store(b + 2, 5);
    assert_null(throttle_type.decode(b, 11, &why));   /* trailing byte */
}

/* throttle_bytes_after is the size a commit leaves, for every algorithm. */
static void test_bytes_after(void **state)
{
    (void)state;
    throttle_params_t ps[2] = { { .algo = THROTTLE_GCRA }, { .algo = THROTTLE_SLIDING_LOG } };
    ps[0].u.gcra = (gcra_params_t){ 0 };
    const char *field;
    ps[1].u.log = (slog_params_t){ 100, 60 * 1000000000LL };
    assert_null(throttle_validate(&ps[1], &field));
    throttle_t *t = NULL;
    int64_t now = 5 * 1000000000LL, exp;
    for (int q = 1; q <= 30; q += 7) {
        size_t want = throttle_bytes_after(t, &ps[1], now, q);
        assert_true(throttle_commit(&t, &ps[1], now, q, &exp));
        assert_int_equal(throttle_type.size(t), want);
        assert_true(want <= throttle_bytes_max(&ps[1]));
        now += 1000000;
    }
    throttle_free(t);
    assert_true(throttle_bytes_after(NULL, &ps[0], now, 1) == throttle_bytes_max(&ps[0]));
}

/* A GCRA key's state is its 8-byte TAT inside the entry: with a 10-byte key
 * the entry is 8 (header) + 8 (TAT) + 4 (vol index) + 11 (key, NUL) = 31
 * bytes, the 32-byte class, and its charge is that allocation and its table
 * slot (and a vol slot with a TTL).  A reservation needs more than 8 bytes:
 * the state is no longer compact and ks_entry_value_fits says so (the
 * caller makes a new entry); the encoding is version 2's either way. */
static void test_gcra_entry(void **state)
{
    (void)state;
    throttle_params_t p = params_of(THROTTLE_GCRA);
    throttle_t *t = NULL;
    int64_t exp;
    assert_true(throttle_commit(&t, &p, BASE, 1, &exp));
    assert_int_equal(throttle_type.size(t), 8);
    assert_int_equal(throttle_type.inline_len(t), 8);
    int64_t tat = throttle_gcra_tat(t);

    /* the bytes: version 2 of a GCRA state, as before */
    wbuf_t b = WBUF_INIT;
    throttle_type.encode(t, &b);
    assert_int_equal(b.len, 10);
    assert_int_equal(b.data[0], 2);
    assert_int_equal(b.data[1], THROTTLE_GCRA);
    const char *why = NULL;
    throttle_t *d = throttle_type.decode(b.data, b.len, &why);
    assert_non_null(d);
    assert_int_equal(throttle_type.size(d), 8);
    assert_int_equal(throttle_gcra_tat(d), tat);
    throttle_free(d);
    wbuf_free(&b);

    ks_t *ks = ks_create(0, 7);
    ks_key_t k = ks_key(ks, "user:12345", 10);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_add(ks, &k, &throttle_type, t, KS_NO_EXPIRY, 0);
    assert_non_null(e);
    const char *v = ks_entry_value(e), *key = ks_entry_key(e, NULL);
    assert_ptr_equal(v, (const char *)e + 8);
    assert_ptr_equal(key, (const char *)e + 20);
    assert_true(key + 10 + 1 <= (const char *)e + 32);   /* 31 bytes: the 32-byte class */
    assert_int_equal(throttle_gcra_tat(ks_entry_value(e)), tat);
    assert_int_equal(ks_entry_memory(e), 32 + 8);
    assert_true(ks_entry_set_expire(ks, e, 1000));
    assert_int_equal(ks_entry_memory(e), 32 + 8 + 12);
    assert_int_equal(ks_total_memory(ks), ks_entry_memory(e));
    assert_true(ks_entry_memory(e) <= ks_entry_overhead(10) + throttle_type.size(v));

    /* a decision in place keeps the 8 bytes, the key untouched */
    throttle_t *in = ks_entry_value(e);
    assert_true(throttle_commit(&in, &p, BASE + S(0.1), 1, &exp));
    assert_ptr_equal(in, v);
    assert_true(throttle_gcra_tat(in) > tat);
    assert_memory_equal(ks_entry_key(e, NULL), "user:12345", 11);
    ks_entry_changed(ks, e);
    assert_int_equal(ks_total_memory(ks), 32 + 8 + 12);

    /* a reservation: the state is full and needs another entry */
    rl_result_t r;
    throttle_t *out = NULL;
    uint64_t id;
    assert_int_equal(throttle_reserve(in, &p, BASE + S(0.2), 1, S(10), THROTTLE_EXPIRY_REFUND, &r, &out, &id, &exp),
                     CORE_OK);
    assert_non_null(out);
    assert_true(throttle_type.size(out) > 8);
    assert_false(ks_entry_value_fits(e, out));
    throttle_t *back = NULL;
    assert_int_equal(throttle_refund(in, &p, BASE + S(0.2), 1, &back, &exp), CORE_OK);
    assert_int_equal(throttle_type.size(back), 8);   /* no reservation: compact again */
    assert_true(ks_entry_value_fits(e, back));
    ks_entry_replace_value(ks, e, back);
    assert_int_equal(ks_total_memory(ks), 32 + 8 + 12);
    ks_entry_delete(ks, e);
    assert_int_equal(ks_total_memory(ks), 0);
    e = ks_add(ks, &k, &throttle_type, out, KS_NO_EXPIRY, 0);
    assert_non_null(e);
    assert_int_equal(throttle_pending(ks_entry_value(e), BASE + S(0.3)), 1);
    assert_int_equal(ks_total_memory(ks), ks_entry_memory(e));
    assert_true(ks_entry_memory(e) > 32 + 8 + throttle_type.size(ks_entry_value(e)) - 1);
    ks_shard_unlock(sh);
    ks_free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_algorithm),
        cmocka_unit_test(test_version1),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_bytes_after),
        cmocka_unit_test(test_gcra_entry),
    };
    return cmocka_run_group_tests_name("throttle", tests, NULL, NULL);
}
