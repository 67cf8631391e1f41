/*
 * test_sliding_log.c - the exact sliding log against a fake clock, its
 * boundary instants, and a brute-force model (a plain array of every allowed
 * action, counted over (now - period, now]) on seeded random traffic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/rng.h"
#include "core/sliding_log.h"

#define S(x) ((int64_t)((x) * 1e9))
#define BASE S(1700000000)

static bool step(slog_t **l, const slog_params_t *p, int64_t now, int64_t q, rl_result_t *r)
{
    if (slog_check(*l, p, now, q, r))
        assert_true(slog_commit(l, p, now, q));
    return r->allowed;
}

/* 3 actions per 10 s: the 4th waits for the 1st to leave the window, which it
 * does exactly at t1 + period (Redis: ZREMRANGEBYSCORE 0 now-period). */
static void test_basic_and_boundaries(void **state)
{
    (void)state;
    const slog_params_t p = { 3, S(10) };
    slog_t *l = NULL;
    rl_result_t r;
    for (int i = 0; i < 3; i++) {
        assert_true(step(&l, &p, BASE + S(i), 1, &r));
        assert_int_equal(r.limit, 3);
        assert_int_equal(r.remaining, 2 - i);
        assert_int_equal(r.retry_after_ns, RL_NEVER);
        assert_int_equal(r.reset_after_ns, S(10));   /* newest + period - now */
    }
    /* limited at t=3: the oldest (t=0) leaves at t=10 */
    assert_false(step(&l, &p, BASE + S(3), 1, &r));
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.retry_after_ns, S(7));
    assert_int_equal(r.reset_after_ns, S(9));
    assert_int_equal(slog_len(l), 3);                 /* refused: not recorded */
    /* one nanosecond before the boundary: still limited, retry 1 ns */
    assert_false(step(&l, &p, BASE + S(10) - 1, 1, &r));
    assert_int_equal(r.retry_after_ns, 1);
    /* at the boundary: allowed, and the expired action is dropped */
    assert_true(step(&l, &p, BASE + S(10), 1, &r));
    assert_int_equal(r.remaining, 0);
    assert_int_equal(slog_len(l), 3);
    assert_int_equal(slog_expire_ns(l, &p), BASE + S(20));
    /* two at once need the two oldest (t=1, t=2) gone: at t=12 */
    assert_false(step(&l, &p, BASE + S(10), 2, &r));
    assert_int_equal(r.retry_after_ns, S(2));
    /* more than the limit can never fit */
    assert_false(step(&l, &p, BASE + S(10), 4, &r));
    assert_int_equal(r.retry_after_ns, RL_NEVER);
    slog_free(l);
}

static void test_peek_and_empty(void **state)
{
    (void)state;
    const slog_params_t p = { 5, S(60) };
    slog_t *l = NULL;
    rl_result_t r;
    assert_false(slog_check(NULL, &p, BASE, 0, &r));   /* a peek never records */
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.reset_after_ns, 0);
    assert_true(step(&l, &p, BASE, 2, &r));
    assert_int_equal(r.remaining, 3);
    assert_false(slog_check(l, &p, BASE + S(1), 0, &r));
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 3);
    assert_int_equal(r.reset_after_ns, S(59));
    assert_int_equal(slog_len(l), 2);
    /* after the period everything is gone */
    assert_false(slog_check(l, &p, BASE + S(60), 0, &r));
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.reset_after_ns, 0);
    slog_free(l);
}

/* A clock stepping back stamps actions with the newest time: still exact. */
static void test_clock_step_back(void **state)
{
    (void)state;
    const slog_params_t p = { 2, S(10) };
    slog_t *l = NULL;
    rl_result_t r;
    assert_true(step(&l, &p, BASE + S(5), 1, &r));
    assert_true(step(&l, &p, BASE + S(3), 1, &r));     /* stamped t=5 */
    assert_false(step(&l, &p, BASE + S(4), 1, &r));
    assert_int_equal(r.retry_after_ns, S(11));          /* 5 + 10 - 4 */
    assert_true(step(&l, &p, BASE + S(15), 1, &r));
    slog_free(l);
}

/* Random traffic against a brute-force model: every decision and every field
 * must agree. */
static void test_against_model(void **state)
{
    (void)state;
    rng_t g;
    rng_seed(&g, 7);
    for (int round = 0; round < 20; round++) {
        slog_params_t p = { (int64_t)rng_below(&g, 50) + 1, (int64_t)rng_below(&g, S(5)) + 1 };
        slog_t *l = NULL;
        int64_t *model = malloc(sizeof(int64_t) * 200000);
        size_t nm = 0;
        int64_t now = BASE;
        for (int i = 0; i < 5000; i++) {
            now += (int64_t)rng_below(&g, (uint64_t)p.period_ns / (uint64_t)p.max_count * 2 + 1);
            int64_t q = (int64_t)rng_below(&g, 4);
            if (rng_below(&g, 50) == 0)
                q = p.max_count + 1;
            /* the model */
            int64_t live = 0, newest = 0;
            size_t first = nm;
            for (size_t k = 0; k < nm; k++)
                if (model[k] > now - p.period_ns) {
                    if (first == nm)
                        first = k;
                    live++;
                }
            if (nm)
                newest = model[nm - 1];
            bool allow = q <= p.max_count && live + q <= p.max_count;
            int64_t retry = RL_NEVER;
            if (!allow && q <= p.max_count)
                retry = model[first + (size_t)(live + q - p.max_count - 1)] + p.period_ns - now;
            rl_result_t r;
            step(&l, &p, now, q, &r);
            if (allow) {
                for (int64_t k = 0; k < q; k++)
                    model[nm++] = now;
                live += q;
                if (q)
                    newest = now;
            }
            int64_t reset = live ? newest + p.period_ns - now : 0;
            if (r.allowed != allow || r.retry_after_ns != retry || r.remaining != p.max_count - live ||
                r.reset_after_ns != reset)
                fail_msg("round %d step %d: allow %d/%d retry %lld/%lld remaining %lld/%lld reset %lld/%lld",
                         round, i, r.allowed, allow, (long long)r.retry_after_ns, (long long)retry,
                         (long long)r.remaining, (long long)(p.max_count - live), (long long)r.reset_after_ns,
                         (long long)reset);
            assert_true(slog_len(l) <= (size_t)p.max_count);
            assert_true(slog_bytes(l) <= 16 + 8 * (size_t)(p.max_count < 4 ? 4 : 2 * p.max_count));
        }
        slog_free(l);
        free(model);
    }
}

/* The ring grows to max_count and shrinks back once idle. */
static void test_memory(void **state)
{
    (void)state;
    const slog_params_t p = { 1000, S(1) };
    slog_t *l = NULL;
    rl_result_t r;
    for (int i = 0; i < 1000; i++)
        assert_true(step(&l, &p, BASE + i, 1, &r));
    assert_false(step(&l, &p, BASE + 1000, 1, &r));
    assert_int_equal(slog_bytes(l), 16 + 8 * 1000);    /* capped at max_count, not 1024 */
    for (int i = 0; i < 12; i++)
        assert_true(step(&l, &p, BASE + S(2 + i), 1, &r));
    assert_true(slog_bytes(l) <= 16 + 8 * 8);
    slog_free(l);
}

static void test_encoding(void **state)
{
    (void)state;
    const slog_params_t p = { 10, S(10) };
    slog_t *l = NULL;
    rl_result_t r;
    for (int i = 0; i < 7; i++)
        step(&l, &p, BASE + S(i), 1, &r);
    for (int i = 0; i < 4; i++)
        step(&l, &p, BASE + S(12 + i), 1, &r);   /* wraps the ring */
    wbuf_t b = WBUF_INIT;
    slog_encode(l, &b);
    rbuf_t rb = rbuf_make(b.data, b.len);
    const char *why;
    slog_t *d = slog_decode(&rb, &why);
    assert_non_null(d);
    assert_true(rbuf_done(&rb));
    assert_int_equal(slog_len(d), slog_len(l));
    rl_result_t r1, r2;
    slog_check(l, &p, BASE + S(16), 3, &r1);
    slog_check(d, &p, BASE + S(16), 3, &r2);
    assert_int_equal(r1.allowed, r2.allowed);
            assert_int_equal(r1.remaining, r2.remaining);
            assert_int_equal(r1.retry_after_ns, r2.retry_after_ns);
            assert_int_equal(r1.reset_after_ns, r2.reset_after_ns);
    slog_free(d);

    /* out of order */
    uint8_t bad[4 + 16];
    le32_store(bad, 2);
    le64_store(bad + 4, 100);
    le64_store(bad + 12, 99);
    rb = rbuf_make(bad, sizeof(bad));
    assert_null(slog_decode(&rb, &why));
    assert_non_null(why);
    /* over the bound */
    le32_store(bad, SLOG_MAX_COUNT + 1);
    rb = rbuf_make(bad, sizeof(bad));
    assert_null(slog_decode(&rb, &why));
    assert_non_null(why);
    /* truncated */
    le32_store(bad, 3);
    rb = rbuf_make(bad, sizeof(bad));
    assert_null(slog_decode(&rb, &why));
    assert_non_null(why);
    wbuf_free(&b);
    slog_free(l);
}

static void test_validation(void **state)
{
    (void)state;
    const char *field, *why;
    slog_params_t p = { SLOG_MAX_COUNT + 1, S(1) };
    why = slog_validate(&p, &field);
    assert_non_null(why);
    assert_string_equal(field, "max_count");
    assert_non_null(strstr(why, "sliding_window"));
    p = (slog_params_t){ 0, S(1) };
    assert_non_null(slog_validate(&p, &field));
    p = (slog_params_t){ 1, 0 };
    assert_non_null(slog_validate(&p, &field));
    assert_string_equal(field, "period");
    p = (slog_params_t){ SLOG_MAX_COUNT, S(3600) };
    assert_null(slog_validate(&p, &field));
}

/* slog_bytes_after tells, before a commit, the size the commit leaves (what
 * a request asks room for), and slog_bytes_max bounds it. */
static void test_bytes_after(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 7);
    slog_params_t p = { 1000, 10 * 1000000000LL };
    slog_t *log = NULL;
    int64_t now = 1000000000LL;
    for (int i = 0; i < 20000; i++) {
        now += (int64_t)(rng_next(&r) % 50000000);
        int64_t q = (int64_t)(rng_next(&r) % 40);
        rl_result_t res;
        if (!slog_check(log, &p, now, q, &res))
            continue;
        size_t want = slog_bytes_after(log, &p, now, q);
        assert_true(slog_commit(&log, &p, now, q));
        assert_int_equal(slog_bytes(log), want);
        assert_true(slog_bytes(log) <= slog_bytes_max(&p));
    }
    slog_free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_and_boundaries),
        cmocka_unit_test(test_peek_and_empty),
        cmocka_unit_test(test_clock_step_back),
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_encoding),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_bytes_after),
    };
    return cmocka_run_group_tests_name("sliding_log", tests, NULL, NULL);
}
