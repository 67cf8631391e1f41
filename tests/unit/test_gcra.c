/*
 * test_gcra.c - GCRA against redis-cell's own published expectations.
 *
 * redis-cell's `it_rate_limits` test: max_burst 4 (limit 5), 1 request per
 * second, a fake clock, and for each step the expected remaining, reset and
 * retry durations.  Every field must match exactly (durations in ns here).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/gcra.h"

#define S(x) ((int64_t)((x) * 1e9))   /* seconds -> ns */

typedef struct step {
    double now_s;
    int64_t quantity;
    bool limited;
    int64_t remaining;
    double reset_s;
    double retry_s;      /* -1 = none */
} step_t;

static void test_redis_cell_sequence(void **state)
{
    (void)state;
    const gcra_params_t p = { .max_burst = 4, .count = 1, .period_ns = S(1) };
    const step_t steps[] = {
        { 0, 6, true, 5, 0, -1 },      /* larger than the whole limit: never fits */
        { 0, 1, false, 4, 1, -1 },
        { 0, 1, false, 3, 2, -1 },
        { 0, 1, false, 2, 3, -1 },
        { 0, 1, false, 1, 4, -1 },
        { 0, 1, false, 0, 5, -1 },
        { 0, 1, true, 0, 5, 1 },
        { 3.0, 1, false, 2, 3, -1 },
        { 3.1, 1, false, 1, 3.9, -1 },
        { 4.0, 1, false, 1, 4, -1 },
        { 8.0, 1, false, 4, 1, -1 },
        { 9.5, 1, false, 4, 1, -1 },
        { 9.5, 0, false, 4, 1, -1 },   /* peek */
        { 9.5, 2, false, 2, 3, -1 },
        { 9.5, 5, true, 2, 3, 3 },
    };
    int64_t tat = -1;
    const int64_t base = S(1700000000);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        const step_t *s = &steps[i];
        rl_result_t r;
        int64_t store;
        gcra_update(&p, tat, base + S(s->now_s), s->quantity, &r, &store);
        if (r.allowed == s->limited || r.remaining != s->remaining || r.reset_after_ns != S(s->reset_s) ||
            r.retry_after_ns != (s->retry_s < 0 ? RL_NEVER : S(s->retry_s)) || r.limit != 5)
            fail_msg("step %zu (t=%.1f q=%lld): got limited=%d remaining=%lld reset=%lld retry=%lld", i, s->now_s,
                     (long long)s->quantity, !r.allowed, (long long)r.remaining, (long long)r.reset_after_ns,
                     (long long)r.retry_after_ns);
        if (store >= 0)
            tat = store;
        if (s->limited || s->quantity == 0)
            assert_int_equal(store, -1);   /* nothing stored when limited or peeking */
    }
}

/* CL.THROTTLE user123 15 30 60, the README example: 16 allowed, then limited. */
static void test_readme_example(void **state)
{
    (void)state;
    const gcra_params_t p = { .max_burst = 15, .count = 30, .period_ns = S(60) };
    int64_t tat = -1, now = S(1700000000);
    for (int i = 0; i < 16; i++) {
        rl_result_t r;
        int64_t store;
        gcra_update(&p, tat, now, 1, &r, &store);
        assert_true(r.allowed);
        assert_int_equal(r.limit, 16);
        assert_int_equal(r.remaining, 15 - i);
        assert_int_equal(rl_ceil_div(r.reset_after_ns, NS_PER_SEC), 2 * (i + 1));
        tat = store;
    }
    rl_result_t r;
    int64_t store;
    gcra_update(&p, tat, now, 1, &r, &store);
    assert_false(r.allowed);
    assert_int_equal(rl_ceil_div(r.retry_after_ns, NS_PER_SEC), 2);
    assert_int_equal(rl_ceil_div(r.reset_after_ns, NS_PER_SEC), 32);
    assert_int_equal(store, -1);
}

/* Boundary instants: exactly at allow_at the request is allowed. */
static void test_boundary_instant(void **state)
{
    (void)state;
    const gcra_params_t p = { .max_burst = 0, .count = 1, .period_ns = S(10) };
    int64_t now = S(100), store;
    rl_result_t r;
    gcra_update(&p, -1, now, 1, &r, &store);
    assert_true(r.allowed);
    int64_t tat = store;                       /* now + 10 s */
    gcra_update(&p, tat, now + S(10) - 1, 1, &r, &store);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ns, 1);
    assert_int_equal(rl_ceil_div(r.retry_after_ns, NS_PER_SEC), 1);   /* rounded up, never 0 */
    gcra_update(&p, tat, now + S(10), 1, &r, &store);
    assert_true(r.allowed);
}

static void test_validation(void **state)
{
    (void)state;
    const char *field;
    gcra_params_t p = { 0, 0, S(1) };
    assert_non_null(gcra_validate(&p, &field));
    assert_string_equal(field, "count_per_period");
    p = (gcra_params_t){ -1, 1, S(1) };
    assert_non_null(gcra_validate(&p, &field));
    assert_string_equal(field, "max_burst");
    p = (gcra_params_t){ 0, 1, 0 };
    assert_non_null(gcra_validate(&p, &field));
    assert_string_equal(field, "period");
    p = (gcra_params_t){ INT64_MAX - 1, 1, S(1) };
    assert_non_null(gcra_validate(&p, &field));   /* τ would overflow */
    assert_string_equal(field, "max_burst");
    p = (gcra_params_t){ 1000, 1, S(3600) };
    assert_null(gcra_validate(&p, &field));
}

/* A huge quantity must not overflow and can never fit. */
static void test_huge_quantity(void **state)
{
    (void)state;
    const gcra_params_t p = { .max_burst = 5, .count = 1, .period_ns = S(1000000) };
    rl_result_t r;
    int64_t store;
    gcra_update(&p, -1, S(1), INT64_MAX, &r, &store);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ns, RL_NEVER);
    assert_int_equal(store, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_cell_sequence),
        cmocka_unit_test(test_readme_example),
        cmocka_unit_test(test_boundary_instant),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_huge_quantity),
    };
    return cmocka_run_group_tests_name("gcra", tests, NULL, NULL);
}
