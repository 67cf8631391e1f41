/*
 * test_window.c - fixed_window and sliding_window against a fake clock:
 * epoch-aligned boundaries, reset and retry instants solved exactly,
 * Cloudflare's worked example, and the sliding window's approximation
 * measured against the exact sliding log on seeded random traffic.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "core/rng.h"
#include "core/sliding_log.h"
#include "core/window.h"

#define S(x) ((int64_t)((x) * 1e9))
#define MIN0 S(1700000040)   /* a multiple of 60 s: a window boundary */

typedef bool (*update_fn)(const window_params_t *, window_state_t *, int64_t, int64_t, rl_result_t *, int64_t *);

static bool go(update_fn f, const window_params_t *p, window_state_t *s, int64_t now, int64_t q, rl_result_t *r)
{
    int64_t exp;
    f(p, s, now, q, r, &exp);
    return r->allowed;
}

/* ------------------------------------------------------------------------ */
/* fixed_window                                                             */
/* ------------------------------------------------------------------------ */

static void test_fixed_boundaries(void **state)
{
    (void)state;
    const window_params_t p = { 3, S(60) };
    window_state_t s = { 0, 0, 0 };
    rl_result_t r;
    int64_t exp = 0;
    assert_true(fixed_window_update(&p, &s, MIN0, 1, &r, &exp));
    assert_int_equal(exp, MIN0 + S(60));          /* the key expires with its window */
    assert_int_equal(r.reset_after_ns, S(60));
    assert_int_equal(r.remaining, 2);
    assert_true(go(fixed_window_update, &p, &s, MIN0 + S(30), 1, &r));
    assert_int_equal(r.reset_after_ns, S(30));
    assert_true(go(fixed_window_update, &p, &s, MIN0 + S(60) - 1, 1, &r));
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_after_ns, 1);
    /* limited until the window ends; refused requests count nothing */
    assert_false(go(fixed_window_update, &p, &s, MIN0 + S(60) - 1, 1, &r));
    assert_int_equal(r.retry_after_ns, 1);
    assert_int_equal(s.curr, 3);
    /* the next window starts empty, exactly at the boundary */
    assert_true(go(fixed_window_update, &p, &s, MIN0 + S(60), 3, &r));
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_after_ns, S(60));
    /* more than the limit: never */
    assert_false(go(fixed_window_update, &p, &s, MIN0 + S(61), 4, &r));
    assert_int_equal(r.retry_after_ns, RL_NEVER);
    /* a peek changes nothing and reports the window */
    window_state_t before = s;
    assert_false(fixed_window_update(&p, &s, MIN0 + S(70), 0, &r, &exp));
    assert_true(r.allowed);                      /* a peek fits a full window */
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_after_ns, S(50));
    assert_memory_equal(&before, &s, sizeof(s));
    /* after the window, a peek on the stale state sees an empty window */
    assert_false(fixed_window_update(&p, &s, MIN0 + S(200), 0, &r, &exp));
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 3);
    assert_int_equal(r.reset_after_ns, 0);
}

/* Windows are epoch-aligned: a key first used mid-window resets at the
 * aligned boundary, not one period after its first request. */
static void test_fixed_alignment(void **state)
{
    (void)state;
    const window_params_t p = { 10, S(60) };
    window_state_t s = { 0, 0, 0 };
    rl_result_t r;
    int64_t exp;
    assert_true(fixed_window_update(&p, &s, MIN0 + S(45), 1, &r, &exp));
    assert_int_equal(exp, MIN0 + S(60));
    assert_int_equal(r.reset_after_ns, S(15));
    assert_int_equal(s.start, MIN0);
}

/* ------------------------------------------------------------------------ */
/* sliding_window                                                           */
/* ------------------------------------------------------------------------ */

/* Cloudflare's example: 42 requests in the previous minute, 18 in the current
 * one, 15 s into it: 42 · 45/60 + 18 = 49.5. */
static void test_sliding_cloudflare_example(void **state)
{
    (void)state;
    const window_params_t big = { 1000, S(60) };
    window_state_t s = { 0, 0, 0 };
    rl_result_t r;
    for (int i = 0; i < 42; i++)
        assert_true(go(sliding_window_update, &big, &s, MIN0 + S(i), 1, &r));
    for (int i = 0; i < 18; i++)
        assert_true(go(sliding_window_update, &big, &s, MIN0 + S(60) + S(i) / 2, 1, &r));
    assert_int_equal(s.prev, 42);
    assert_int_equal(s.curr, 18);

    const window_params_t p50 = { 50, S(60) };
    int64_t t = MIN0 + S(75);
    assert_false(go(sliding_window_update, &p50, &s, t, 1, &r));   /* 50.5 > 50 */
    assert_int_equal(r.remaining, 0);
    assert_false(go(sliding_window_update, &p50, &s, t, 0, &r) == false);   /* peek: 49.5 <= 50 */
    assert_int_equal(r.remaining, 0);
    /* 42·(60 - e)/60 + 19 <= 50  <=>  e >= 60 - 31·60/42 = 15.714285714 s */
    assert_false(go(sliding_window_update, &p50, &s, t, 1, &r));
    assert_int_equal(r.retry_after_ns, S(60) - (int64_t)((__int128)31 * S(60) / 42) - S(15));
    int64_t at = t + r.retry_after_ns;
    assert_false(go(sliding_window_update, &p50, &s, at - 1, 1, &r));
    assert_true(go(sliding_window_update, &p50, &s, at, 1, &r));
    assert_int_equal(s.curr, 19);

    const window_params_t p51 = { 51, S(60) };
    window_state_t s2 = { MIN0 + S(60), 18, 42 };
    assert_true(go(sliding_window_update, &p51, &s2, t, 1, &r));   /* 50.5 <= 51 */
    assert_int_equal(r.remaining, 0);
}

/* A full previous window blocks the start of the next one until its weight
 * has decayed: 10 per minute, all 10 used; at the boundary the estimate is
 * still 10; one more fits when 10·(60-e)/60 <= 9, e = 6 s. */
static void test_sliding_boundaries(void **state)
{
    (void)state;
    const window_params_t p = { 10, S(60) };
    window_state_t s = { 0, 0, 0 };
    rl_result_t r;
    int64_t exp = 0;
    for (int i = 0; i < 10; i++)
        assert_true(sliding_window_update(&p, &s, MIN0 + S(50), 1, &r, &exp));
    assert_int_equal(exp, MIN0 + S(120));        /* forgotten when both windows have passed */
    assert_int_equal(r.reset_after_ns, S(70));
    assert_false(go(sliding_window_update, &p, &s, MIN0 + S(59), 1, &r));
    assert_int_equal(r.retry_after_ns, S(7));    /* 60 + 6 - 59 */
    assert_false(go(sliding_window_update, &p, &s, MIN0 + S(60), 1, &r));
    assert_int_equal(r.retry_after_ns, S(6));
    assert_int_equal(r.reset_after_ns, S(60));   /* prev weight ends at the next boundary */
    assert_false(go(sliding_window_update, &p, &s, MIN0 + S(66) - 1, 1, &r));
    assert_int_equal(r.retry_after_ns, 1);
    assert_true(go(sliding_window_update, &p, &s, MIN0 + S(66), 1, &r));
    assert_int_equal(s.prev, 10);
    assert_int_equal(s.curr, 1);
    /* two windows later everything is forgotten */
    assert_true(go(sliding_window_update, &p, &s, MIN0 + S(180), 10, &r));
    assert_int_equal(s.prev, 0);
    assert_int_equal(s.curr, 10);
    /* quantity over the limit never fits; a peek changes nothing */
    assert_false(go(sliding_window_update, &p, &s, MIN0 + S(181), 11, &r));
    assert_int_equal(r.retry_after_ns, RL_NEVER);
    window_state_t before = s;
    assert_false(sliding_window_update(&p, &s, MIN0 + S(181), 0, &r, &exp));
    assert_memory_equal(&before, &s, sizeof(s));
    /* the next-window case: curr full, prev empty; 10 more fit when, in the next
     * window, 10·(60-e)/60 + 10 <= 10: e = 60 s, the window after it */
    assert_false(go(sliding_window_update, &p, &s, MIN0 + S(190), 10, &r));
    assert_int_equal(r.retry_after_ns, S(300) - S(190));
    /* one more fits 6 s into the next window */
    assert_false(go(sliding_window_update, &p, &s, MIN0 + S(190), 1, &r));
    assert_int_equal(r.retry_after_ns, S(246) - S(190));
}

/* The approximation against the exact log, same seeded traffic (uniform
 * arrivals at 1.5x the limit, so the limiter is busy all the time): both must
 * let through nearly the same number of requests, the windowed guarantees must
 * hold, and the estimate must be close to the true count of the last period. */
static void test_sliding_approximation(void **state)
{
    (void)state;
    const int64_t max = 100, period = S(60);
    const window_params_t wp = { max, period };
    const slog_params_t lp = { max, period };
    rng_t g;
    rng_seed(&g, 2017);
    window_state_t s = { 0, 0, 0 };
    slog_t *log = NULL;
    int64_t *allowed_at = malloc(sizeof(int64_t) * 200000);
    size_t na = 0;
    long sw_allowed = 0, log_allowed = 0, checks = 0;
    double max_err = 0, sum_err = 0;
    int64_t now = MIN0;
    const int64_t mean_gap = period / (max * 3 / 2);
    for (int i = 0; i < 150000; i++) {
        now += (int64_t)rng_below(&g, (uint64_t)(2 * mean_gap));
        rl_result_t r;
        int64_t exp;
        if (sliding_window_update(&wp, &s, now, 1, &r, &exp)) {
            sw_allowed++;
            allowed_at[na++] = now;
        }
        if (slog_check(log, &lp, now, 1, &r)) {
            assert_true(slog_commit(&log, &lp, now, 1));
            log_allowed++;
        }
        if (i % 97 == 0 && na > 0) {
            /* the estimate (with a peek) against the true count of the window's own admissions */
            sliding_window_update(&wp, &s, now, 0, &r, &exp);
            double estimate = (double)(max - r.remaining);
            long exact = 0;
            for (size_t k = na; k > 0 && allowed_at[k - 1] > now - period; k--)
                exact++;
            double err = fabs(estimate - (double)exact) / (double)max;
            sum_err += err;
            if (err > max_err)
                max_err = err;
            checks++;
            /* never more than max_count in any sliding period: at most 2x */
            assert_true(exact <= 2 * max);
        }
        /* never more than max_count inside one aligned window */
        assert_true(s.curr <= max);
    }
    double ratio = (double)sw_allowed / (double)log_allowed;
    printf("sliding_window vs sliding_log: %ld vs %ld allowed (ratio %.4f); estimate error mean %.2f%%, max %.2f%% "
           "of the limit\n",
           sw_allowed, log_allowed, ratio, 100 * sum_err / (double)checks, 100 * max_err);
    assert_true(fabs(ratio - 1) < 0.03);
    assert_true(sum_err / (double)checks < 0.05);
    assert_true(max_err < 0.25);
    free(allowed_at);
    slog_free(log);
}

static void test_validation(void **state)
{
    (void)state;
    const char *field;
    window_params_t p = { 0, S(1) };
    assert_non_null(window_validate(&p, &field));
    assert_string_equal(field, "max_count");
    p = (window_params_t){ WINDOW_MAX_COUNT + 1, S(1) };
    assert_non_null(window_validate(&p, &field));
    p = (window_params_t){ 1, 0 };
    assert_non_null(window_validate(&p, &field));
    assert_string_equal(field, "period");
    p = (window_params_t){ WINDOW_MAX_COUNT, WINDOW_MAX_PERIOD_NS };
    assert_null(window_validate(&p, &field));
    /* the largest parameters do not overflow */
    window_state_t s = { 0, 0, 0 };
    rl_result_t r;
    int64_t exp;
    assert_true(sliding_window_update(&p, &s, S(1700000000), WINDOW_MAX_COUNT, &r, &exp));
    assert_false(sliding_window_update(&p, &s, S(1700000001), 1, &r, &exp));
    assert_true(r.retry_after_ns > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_boundaries),
        cmocka_unit_test(test_fixed_alignment),
        cmocka_unit_test(test_sliding_cloudflare_example),
        cmocka_unit_test(test_sliding_boundaries),
        cmocka_unit_test(test_sliding_approximation),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests_name("window", tests, NULL, NULL);
}
