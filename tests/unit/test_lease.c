/*
 * test_lease.c - concurrency lease sets against a model: a plain list of
 * (id, expiry) where a lease is live while now < expiry, on seeded random
 * acquire / release / renew / time steps; ids unique and non-zero; the
 * encoding round-trips and the decoder refuses what tally never writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/lease.h"
#include "core/rng.h"
#include "tests/unit/same_encoding.h"

#define T0 1700000000000LL

static void test_basic(void **state)
{
    (void)state;
    lease_t *l = lease_new(lease_seed("k", 1, T0 * 1000000), 2);
    assert_non_null(l);
    uint64_t a, b, c;
    assert_int_equal(lease_acquire(l, 2, T0 + 1000, &a), CORE_OK);
    assert_int_equal(lease_acquire(l, 2, T0 + 2000, &b), CORE_OK);
    assert_true(a != 0 && b != 0 && a != b);
    assert_int_equal(lease_acquire(l, 2, T0 + 3000, &c), CORE_FULL);
    lease_info_t in;
    lease_info(l, T0, &in);
    assert_int_equal(in.active, 2);
    assert_int_equal(in.limit, 2);
    assert_int_equal(in.next_expiry_ms, T0 + 1000);
    assert_int_equal(in.last_expiry_ms, T0 + 2000);
    /* the first expires at exactly T0 + 1000: no longer live then */
    lease_info(l, T0 + 1000, &in);
    assert_int_equal(in.active, 1);
    assert_int_equal(lease_expiry(l, a, T0 + 1000), -1);
    assert_int_equal(lease_expiry(l, a, T0 + 999), T0 + 1000);
    assert_true(lease_purge(l, T0 + 1000));
    assert_false(lease_purge(l, T0 + 1000));
    assert_false(lease_release(l, a));   /* expired: gone */
    assert_int_equal(lease_acquire(l, 2, T0 + 5000, &c), CORE_OK);
    assert_true(c != a && c != b);
    assert_true(lease_renew(l, b, T0 + 9000));
    assert_int_equal(lease_expiry(l, b, T0 + 1500), T0 + 9000);
    assert_true(lease_release(l, b));
    assert_false(lease_release(l, b));
    assert_false(lease_release(l, 0));
    assert_false(lease_renew(l, 12345, T0 + 9000));
    assert_int_equal(lease_count(l), 1);
    /* a lower limit refuses until the set drains below it, and is kept */
    assert_int_equal(lease_acquire(l, 1, T0 + 9000, &a), CORE_FULL);
    assert_int_equal(lease_limit(l), 1);
    lease_free(l);
}

typedef struct m_lease {
    uint64_t id;
    int64_t exp;
} m_lease_t;

static int m_live(const m_lease_t *m, int n, int64_t now)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += m[i].exp > now;
    return k;
}

static void test_against_model(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 42);
    enum { LIMIT = 37, N = 200000, IDS = 4096 };
    lease_t *l = lease_new(7, LIMIT);
    m_lease_t *m = calloc(IDS * 64, sizeof(*m));
    uint64_t *given = calloc(N, sizeof(*given));
    int mn = 0, ngiven = 0;
    int64_t now = T0;
    for (int step = 0; step < N; step++) {
        uint64_t op = rng_below(&r, 10);
        if (op < 2) {
            now += (int64_t)rng_below(&r, 300);
        } else if (op < 6) {
            lease_purge(l, now);
            uint64_t id;
            int64_t exp = now + 1 + (int64_t)rng_below(&r, 2000);
            core_status_t st = lease_acquire(l, LIMIT, exp, &id);
            if (m_live(m, mn, now) < LIMIT) {
                assert_int_equal(st, CORE_OK);
                assert_true(id != 0);
                for (int i = 0; i < ngiven; i++)
                    assert_true(given[i] != id);
                given[ngiven++] = id;
                m[mn].id = id;
                m[mn].exp = exp;
                mn++;
            } else {
                assert_int_equal(st, CORE_FULL);
            }
        } else if (op < 8 && ngiven) {
            uint64_t id = given[rng_below(&r, (uint64_t)ngiven)];
            lease_purge(l, now);
            bool want = false;
            for (int i = 0; i < mn; i++)
                if (m[i].id == id && m[i].exp > now) {
                    want = true;
                    m[i] = m[--mn];
                    break;
                }
            assert_int_equal(lease_release(l, id), want);
        } else if (ngiven) {
            uint64_t id = given[rng_below(&r, (uint64_t)ngiven)];
            int64_t exp = now + 1 + (int64_t)rng_below(&r, 2000);
            lease_purge(l, now);
            bool want = false;
            for (int i = 0; i < mn; i++)
                if (m[i].id == id && m[i].exp > now) {
                    want = true;
                    m[i].exp = exp;
                }
            assert_int_equal(lease_renew(l, id, exp), want);
        }
        /* the model drops expired leases too (memory of the test only) */
        for (int i = 0; i < mn;)
            if (m[i].exp <= now)
                m[i] = m[--mn];
            else
                i++;
        lease_info_t in;
        lease_info(l, now, &in);
        assert_int_equal(in.active, m_live(m, mn, now));
        assert_true(in.active <= LIMIT);
        assert_true(lease_count(l) <= LIMIT);
        assert_true(lease_type.size(l) <= lease_max_bytes(LIMIT));
        if (ngiven == N)
            break;
    }
    lease_free(l);
    free(m);
    free(given);
}

static lease_t *roundtrip(const lease_t *l)
{
    wbuf_t w = WBUF_INIT;
    lease_type.encode(l, &w);
    const char *why = NULL;
    lease_t *c = lease_type.decode(w.data, w.len, &why);
    assert_non_null(c);
    wbuf_free(&w);
    return c;
}

/* A decoded set evolves exactly as the original: same ids, same order. */
static void test_encoding(void **state)
{
    (void)state;
    lease_t *a = lease_new(99, 10);
    uint64_t id;
    for (int i = 0; i < 7; i++)
        assert_int_equal(lease_acquire(a, 10, T0 + 100 * (i + 1), &id), CORE_OK);
    lease_t *b = roundtrip(a);
    assert_same_encoding(&lease_type, a, b);
    for (int k = 0; k < 5; k++) {
        lease_purge(a, T0 + 250);
        lease_purge(b, T0 + 250);
        uint64_t x, y;
        assert_int_equal(lease_acquire(a, 10, T0 + 9000, &x), lease_acquire(b, 10, T0 + 9000, &y));
        assert_true(x == y);
    }
    assert_same_encoding(&lease_type, a, b);
    lease_free(a);
    lease_free(b);
    lease_t *e = lease_new(1, 1);
    lease_t *f = roundtrip(e);
    assert_same_encoding(&lease_type, e, f);
    lease_free(e);
    lease_free(f);
}

static void expect_refused(const wbuf_t *w)
{
    const char *why = NULL;
    assert_null(lease_type.decode(w->data, w->len, &why));
    assert_non_null(why);
}

static void test_validation(void **state)
{
    (void)state;
    lease_t *a = lease_new(5, 4);
    uint64_t id1, id2;
    lease_acquire(a, 4, T0 + 10, &id1);
    lease_acquire(a, 4, T0 + 20, &id2);
    wbuf_t w = WBUF_INIT;
    lease_type.encode(a, &w);
    /* every truncation is refused */
    for (size_t len = 0; len < w.len; len++) {
        const char *why = NULL;
        assert_null(lease_type.decode(w.data, len, &why));
    }
    wbuf_t bad = WBUF_INIT;
    wbuf_put_bytes(&bad, w.data, w.len);
    bad.data[0] = 2;                           /* version */
    expect_refused(&bad);
    memcpy(bad.data, w.data, w.len);
    bad.data[17] = bad.data[18] = bad.data[19] = bad.data[20] = 0;   /* limit 0 */
    expect_refused(&bad);
    memcpy(bad.data, w.data, w.len);
    memcpy(bad.data + 41, bad.data + 25, 8);   /* second id = first */
    expect_refused(&bad);
    memcpy(bad.data, w.data, w.len);
    memset(bad.data + 25, 0, 8);               /* id 0 */
    expect_refused(&bad);
    wbuf_put_u8(&bad, 0);                      /* trailing byte */
    memcpy(bad.data, w.data, w.len);
    expect_refused(&bad);
    wbuf_free(&bad);
    wbuf_free(&w);
    lease_free(a);
}

/* The array grows by doubling up to the limit and says so beforehand. */
static void test_memory(void **state)
{
    (void)state;
    assert_int_equal(lease_grow_bytes(NULL, 10), 4 * 16);
    lease_t *l = lease_new(1, 10);
    uint64_t id;
    size_t before = lease_type.size(l);
    assert_int_equal(before, lease_base_bytes());
    for (int i = 0; i < 10; i++) {
        size_t g = lease_grow_bytes(l, 10);
        assert_int_equal(lease_acquire(l, 10, T0 + 1000, &id), CORE_OK);
        assert_int_equal(lease_type.size(l), before + g);
        before = lease_type.size(l);
    }
    assert_int_equal(lease_type.size(l), lease_max_bytes(10));
    assert_int_equal(lease_grow_bytes(l, 10), 0);
    assert_int_equal(lease_acquire(l, 10, T0 + 1000, &id), CORE_FULL);
    lease_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_encoding),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests_name("lease", tests, NULL, NULL);
}
