/*
 * test_token_bucket.c - the seeds' funnel done right, against a fake clock:
 * the seeds' own parameters, exact refill instants, no drift over a million
 * refills, no overflow after centuries idle, fractional rates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/token_bucket.h"

#define S(x) ((int64_t)((x) * 1e9))
#define MS(x) ((int64_t)(x) * 1000000)
#define BASE S(1700000000)

static bool take(const tbucket_params_t *p, tbucket_state_t *s, int64_t now, int64_t q, rl_result_t *r)
{
    int64_t exp;
    tbucket_update(p, s, now, q, r, &exp);
    return r->allowed;
}

/* The seeds' main(): capacity 5, leaking 0.1 per millisecond (100 per
 * second), 100 attempts in a burst: 5 pass, then one every 10 ms exactly. */
static void test_seed_funnel(void **state)
{
    (void)state;
    const tbucket_params_t p = { 5, 100 * 1000000LL };
    tbucket_state_t s = tbucket_full(&p, BASE);
    rl_result_t r;
    for (int i = 0; i < 5; i++) {
        assert_true(take(&p, &s, BASE, 1, &r));
        assert_int_equal(r.limit, 5);
        assert_int_equal(r.remaining, 4 - i);
        assert_int_equal(r.reset_after_ns, MS(10) * (i + 1));
    }
    assert_false(take(&p, &s, BASE, 1, &r));
    assert_int_equal(r.retry_after_ns, MS(10));
    assert_false(take(&p, &s, BASE + MS(10) - 1, 1, &r));
    assert_int_equal(r.retry_after_ns, 1);
    assert_true(take(&p, &s, BASE + MS(10), 1, &r));
    assert_int_equal(r.remaining, 0);
    /* refused requests take nothing: 2 tokens 20 ms later */
    assert_false(take(&p, &s, BASE + MS(15), 1, &r));
    assert_true(take(&p, &s, BASE + MS(30), 2, &r));
    /* larger than the funnel: never */
    assert_false(take(&p, &s, BASE + S(100), 6, &r));
    assert_int_equal(r.retry_after_ns, RL_NEVER);
    /* a peek refills but records nothing */
    tbucket_state_t before = s;
    int64_t exp;
    assert_false(tbucket_update(&p, &s, BASE + S(100), 0, &r, &exp));
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.reset_after_ns, 0);
    assert_memory_equal(&before, &s, sizeof(s));
}

/* The seeds' funnel truncated (int)(elapsed·rate) and moved its clock,
 * losing the fraction each time.  Draining 3 tokens per second, one token at
 * a time, each at the first instant it is allowed: after a million tokens
 * the elapsed time must be ceil(10^6 / 3 s) to the nanosecond. */
static void test_no_drift(void **state)
{
    (void)state;
    const tbucket_params_t p = { 2, 3 * 1000000LL };   /* never full again: no token overflows */
    tbucket_state_t s = tbucket_full(&p, BASE);
    rl_result_t r;
    int64_t now = BASE;
    assert_true(take(&p, &s, now, 2, &r));
    for (int i = 0; i < 1000000; i++) {
        if (!take(&p, &s, now, 1, &r)) {
            now += r.retry_after_ns;
            assert_true(take(&p, &s, now, 1, &r));
        }
    }
    /* 10^6 tokens at 3/s: 333333.333333333... s, the first instant at or after it */
    assert_int_equal(now - BASE, 333333333333334LL);
}

/* Centuries idle: no overflow, simply full. */
static void test_long_idle(void **state)
{
    (void)state;
    const tbucket_params_t p = { TB_MAX_CAPACITY, TB_MAX_RATE_MICRO };
    tbucket_state_t s = tbucket_full(&p, 0);
    rl_result_t r;
    assert_true(take(&p, &s, 0, TB_MAX_CAPACITY, &r));
    assert_int_equal(r.remaining, 0);
    assert_true(take(&p, &s, INT64_MAX / 2, TB_MAX_CAPACITY, &r));
    const tbucket_params_t slow = { 7, 1 };   /* one token every 11.6 days */
    tbucket_state_t s2 = tbucket_full(&slow, 0);
    assert_true(take(&slow, &s2, 0, 7, &r));
    assert_int_equal(r.reset_after_ns, S(7000000));
    assert_true(take(&slow, &s2, INT64_MAX / 2, 7, &r));
}

/* 0.1 token per second: exactly 10 s per token. */
static void test_fractional_rate(void **state)
{
    (void)state;
    const tbucket_params_t p = { 2, 100000 };
    tbucket_state_t s = tbucket_full(&p, BASE);
    rl_result_t r;
    assert_true(take(&p, &s, BASE, 2, &r));
    assert_false(take(&p, &s, BASE + S(5), 1, &r));
    assert_int_equal(r.retry_after_ns, S(5));
    assert_int_equal(r.reset_after_ns, S(15));
    assert_false(take(&p, &s, BASE + S(10) - 1, 1, &r));
    assert_true(take(&p, &s, BASE + S(10), 1, &r));
    assert_false(take(&p, &s, BASE + S(19), 1, &r));
    assert_true(take(&p, &s, BASE + S(20), 1, &r));
}

/* A clock stepping back does not refill and does not move `last` back. */
static void test_clock_step_back(void **state)
{
    (void)state;
    const tbucket_params_t p = { 1, 1000000 };
    tbucket_state_t s = tbucket_full(&p, BASE);
    rl_result_t r;
    assert_true(take(&p, &s, BASE + S(10), 1, &r));
    assert_false(take(&p, &s, BASE + S(5), 1, &r));
    assert_int_equal(r.retry_after_ns, S(6));   /* 5 s back to `last`, then 1 s */
    assert_true(take(&p, &s, BASE + S(11), 1, &r));
}

static void test_validation(void **state)
{
    (void)state;
    const char *field;
    tbucket_params_t p = { 0, 1 };
    assert_non_null(tbucket_validate(&p, &field));
    assert_string_equal(field, "capacity");
    p = (tbucket_params_t){ 1, 0 };
    assert_non_null(tbucket_validate(&p, &field));
    assert_string_equal(field, "refill_rate");
    p = (tbucket_params_t){ TB_MAX_CAPACITY + 1, 1 };
    assert_non_null(tbucket_validate(&p, &field));
    p = (tbucket_params_t){ TB_MAX_CAPACITY, TB_MAX_RATE_MICRO };
    assert_null(tbucket_validate(&p, &field));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_funnel),
        cmocka_unit_test(test_no_drift),
        cmocka_unit_test(test_long_idle),
        cmocka_unit_test(test_fractional_rate),
        cmocka_unit_test(test_clock_step_back),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests_name("token_bucket", tests, NULL, NULL);
}
