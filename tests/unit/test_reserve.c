/*
 * test_reserve.c - reserve, settle, refund and probe on every algorithm that
 * takes them (GCRA, token bucket, sliding and fixed windows), against exact
 * models written here from the arithmetic of docs/rate-limiting.md:
 *
 *   - seeded random sequences of decisions, reservations (keep or refund on
 *     expiry), settles (more, less, unknown ids, settled twice, over the
 *     capacity), refunds and probes at increasing times;
 *   - the model applies an expired reservation's refund AT ITS DEADLINE, in
 *     deadline order, while the code applies it on the next change of the
 *     key: agreeing answers check that the two are the same (throttle.h);
 *   - a state whose expiry instant passed is dropped (what the keyspace
 *     does): the answers must not change;
 *   - every state survives encode/decode byte for byte; a refused operation
 *     changes nothing; a probe changes nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/codec.h"
#include "core/rng.h"
#include "core/throttle.h"

__extension__ typedef __int128 i128;

#define S(x) ((int64_t)((x) * 1e9))
#define BASE S(1700000000)
#define UNIT INT64_C(1000000000000000)

/* ------------------------------------------------------------------------ */
/* The model                                                                */
/* ------------------------------------------------------------------------ */

typedef struct mres {
    uint64_t id;
    int64_t cost, deadline, window;
    bool refund;
} mres_t;

typedef struct mwin {
    int64_t start, count;
} mwin_t;

typedef struct model {
    throttle_params_t p;
    int64_t tat;                 /* gcra (0: none) */
    i128 level;                  /* token bucket, in 10^-15 tokens, at `last` */
    int64_t last;
    mwin_t *w;                   /* windows: every window's count */
    size_t nw;
    mres_t pend[THROTTLE_MAX_PENDING];
    size_t np;
    uint64_t last_id;
} model_t;

static int64_t m_cap(const model_t *m)
{
    switch (m->p.algo) {
    case THROTTLE_GCRA: return m->p.u.gcra.max_burst + 1;
    case THROTTLE_TOKEN_BUCKET: return m->p.u.tb.capacity;
    default: return m->p.u.win.max_count;
    }
}

static int64_t *m_count(model_t *m, int64_t start)
{
    for (size_t i = 0; i < m->nw; i++)
        if (m->w[i].start == start)
            return &m->w[i].count;
    m->w = realloc(m->w, (m->nw + 1) * sizeof(*m->w));
    m->w[m->nw] = (mwin_t){ start, 0 };
    return &m->w[m->nw++].count;
}

static int64_t m_start(const model_t *m, int64_t now) { return now - now % m->p.u.win.period_ns; }

static void m_refill(model_t *m, int64_t now)
{
    i128 full = (i128)m->p.u.tb.capacity * UNIT;
    if (now > m->last) {
        m->level += (i128)(now - m->last) * m->p.u.tb.rate_micro;
        if (m->level > full)
            m->level = full;
        m->last = now;
    }
}

/* Gives n back at time `at` into `window` (-1: the window of at). */
static void m_refund(model_t *m, int64_t at, int64_t n, int64_t window)
{
    switch (m->p.algo) {
    case THROTTLE_GCRA: {
        int64_t t = m->p.u.gcra.period_ns / m->p.u.gcra.count;
        m->tat = m->tat - n * t > at ? m->tat - n * t : at;
        break;
    }
    case THROTTLE_TOKEN_BUCKET: {
        i128 full = (i128)m->p.u.tb.capacity * UNIT;
        m_refill(m, at);
        m->level += (i128)n * UNIT;
        if (m->level > full)
            m->level = full;
        break;
    }
    default: {
        int64_t *c = m_count(m, window < 0 ? m_start(m, at) : window);
        *c -= n < *c ? n : *c;
        break;
    }
    }
}

static void m_charge(model_t *m, int64_t now, int64_t n)
{
    switch (m->p.algo) {
    case THROTTLE_GCRA: {
        int64_t t = m->p.u.gcra.period_ns / m->p.u.gcra.count, tau = t * (m->p.u.gcra.max_burst + 1);
        int64_t tat = m->tat > now ? m->tat : now;
        m->tat = tat + n * t < now + 2 * tau ? tat + n * t : now + 2 * tau;
        if (tat > now + 2 * tau)
            m->tat = tat;
        break;
    }
    case THROTTLE_TOKEN_BUCKET: {
        i128 full = (i128)m->p.u.tb.capacity * UNIT;
        m_refill(m, now);
        m->level -= (i128)n * UNIT;
        if (m->level < -full)
            m->level = -full;
        break;
    }
    default: {
        int64_t *c = m_count(m, m_start(m, now));
        *c = *c + n < 2 * m_cap(m) ? *c + n : 2 * m_cap(m);
        break;
    }
    }
}

/* The expired reservations, at their deadlines, in deadline order. */
static void m_expire(model_t *m, int64_t now)
{
    for (;;) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < m->np; i++)
            if (m->pend[i].deadline <= now && (best == SIZE_MAX || m->pend[i].deadline < m->pend[best].deadline))
                best = i;
        if (best == SIZE_MAX)
            return;
        mres_t r = m->pend[best];
        if (r.refund)
            m_refund(m, r.deadline, r.cost, r.window);
        m->pend[best] = m->pend[--m->np];
    }
}

/* A decision of q at now: allowed and remaining (and for GCRA and the
 * bucket the reset and retry), consuming when `take`. */
static rl_result_t m_decide(model_t *m, int64_t now, int64_t q, bool take)
{
    rl_result_t r = { .retry_after_ns = RL_NEVER };
    r.limit = m_cap(m);
    switch (m->p.algo) {
    case THROTTLE_GCRA: {
        int64_t t = m->p.u.gcra.period_ns / m->p.u.gcra.count, tau = t * (m->p.u.gcra.max_burst + 1);
        int64_t tat = m->tat > now ? m->tat : now;
        int64_t ttl = tat - now;
        if (q <= r.limit && tat + q * t - tau <= now) {
            r.allowed = true;
            ttl = tat + q * t - now;
            if (take && q > 0)
                m->tat = tat + q * t;
        } else if (q <= r.limit) {
            r.retry_after_ns = tat + q * t - tau - now;
        }
        r.remaining = tau - ttl > -t ? (tau - ttl) / t : 0;
        r.reset_after_ns = ttl;
        break;
    }
    case THROTTLE_TOKEN_BUCKET: {
        i128 full = (i128)m->p.u.tb.capacity * UNIT;
        m_refill(m, now);
        i128 lv = m->level;
        if (q <= r.limit && (i128)q * UNIT <= lv) {
            r.allowed = true;
            lv -= (i128)q * UNIT;
            if (take && q > 0)
                m->level = lv;
        } else if (q <= r.limit) {
            i128 d = (i128)q * UNIT - lv;
            r.retry_after_ns = (int64_t)((d + m->p.u.tb.rate_micro - 1) / m->p.u.tb.rate_micro);
        }
        r.remaining = lv > 0 ? (int64_t)(lv / UNIT) : 0;
        r.reset_after_ns = (int64_t)((full - lv + m->p.u.tb.rate_micro - 1) / m->p.u.tb.rate_micro);
        break;
    }
    case THROTTLE_FIXED_WINDOW: {
        int64_t *c = m_count(m, m_start(m, now));
        int64_t cnt = *c;
        if (q <= r.limit && cnt + q <= r.limit) {
            r.allowed = true;
            cnt += q;
            if (take)
                *c = cnt;
        }
        r.remaining = cnt < r.limit ? r.limit - cnt : 0;
        break;
    }
    default: {   /* sliding window */
        int64_t period = m->p.u.win.period_ns, start = m_start(m, now);
        int64_t prev = *m_count(m, start - period), *c = m_count(m, start), cnt = *c;
        i128 prev_part = (i128)prev * (period - (now - start)), budget = (i128)r.limit * period;
        if (q <= r.limit && prev_part + (i128)(cnt + q) * period <= budget) {
            r.allowed = true;
            cnt += q;
            if (take)
                *c = cnt;
        }
        i128 left = budget - prev_part - (i128)cnt * period;
        r.remaining = left > 0 ? (int64_t)(left / period) : 0;
        break;
    }
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* The sequences                                                            */
/* ------------------------------------------------------------------------ */

static void same_result(const model_t *m, const rl_result_t *want, const rl_result_t *got, int step)
{
    if (want->allowed != got->allowed || want->remaining != got->remaining || want->limit != got->limit)
        fail_msg("step %d: allowed %d/%d remaining %lld/%lld", step, want->allowed, got->allowed,
                 (long long)want->remaining, (long long)got->remaining);
    if (m->p.algo == THROTTLE_GCRA || m->p.algo == THROTTLE_TOKEN_BUCKET) {
        if (want->reset_after_ns != got->reset_after_ns || want->retry_after_ns != got->retry_after_ns)
            fail_msg("step %d: reset %lld/%lld retry %lld/%lld", step, (long long)want->reset_after_ns,
                     (long long)got->reset_after_ns, (long long)want->retry_after_ns, (long long)got->retry_after_ns);
    }
}

static size_t encode(const throttle_t *t, uint8_t *buf, size_t cap)
{
    if (!t)
        return 0;
    wbuf_t w = WBUF_INIT;
    throttle_type.encode(t, &w);
    assert_false(w.oom);
    assert_true(w.len <= cap);
    memcpy(buf, w.data, w.len);
    size_t n = w.len;
    const char *why = NULL;
    throttle_t *back = throttle_type.decode(w.data, w.len, &why);
    assert_non_null(back);
    wbuf_t w2 = WBUF_INIT;
    throttle_type.encode(back, &w2);
    assert_int_equal(w2.len, n);
    assert_memory_equal(w2.data, buf, n);
    assert_int_equal(throttle_type.size(back), throttle_type.size(t));
    throttle_free(back);
    wbuf_free(&w);
    wbuf_free(&w2);
    return n;
}

static void run_sequence(throttle_params_t p, uint64_t seed, int steps, int64_t max_step_ns)
{
    rng_t rng;
    rng_seed(&rng, seed);
    model_t *m = calloc(1, sizeof(*m));
    m->p = p;
    if (p.algo == THROTTLE_TOKEN_BUCKET) {
        m->level = (i128)p.u.tb.capacity * UNIT;
        m->last = 0;
    }
    int64_t cap = m_cap(m);
    throttle_t *t = NULL;
    int64_t now = BASE, expire = 0;
    static uint8_t before[1 << 17], after[1 << 17];
    int counts[6] = { 0 };
    for (int step = 0; step < steps; step++) {
        now += (int64_t)(rng_next(&rng) % (uint64_t)max_step_ns);
        if (t && now >= expire) {   /* the keyspace forgets an expired key */
            assert_int_equal(throttle_pending(t, now), 0);
            throttle_free(t);
            t = NULL;
        }
        m_expire(m, now);
        int op = (int)(rng_next(&rng) % 100);
        int64_t q = (int64_t)(rng_next(&rng) % (uint64_t)(cap + 1));
        if (rng_next(&rng) % 8 == 0)
            q = cap + 1 + (int64_t)(rng_next(&rng) % 3);   /* over the capacity */
        size_t nb = encode(t, before, sizeof(before));
        rl_result_t got, want;
        if (op < 30) {   /* a plain decision */
            counts[0]++;
            want = m_decide(m, now, q, true);
            bool commit = throttle_check(t, &p, now, q, &got);
            same_result(m, &want, &got, step);
            if (commit)
                assert_true(throttle_commit(&t, &p, now, q, &expire));
        } else if (op < 55) {   /* reserve */
            counts[1]++;
            int64_t ttl = 1 + (int64_t)(rng_next(&rng) % (uint64_t)(max_step_ns * 6));
            bool refund = rng_next(&rng) & 1;
            throttle_t *out;
            uint64_t id;
            int64_t ex;
            int rc = throttle_reserve(t, &p, now, q, ttl, refund ? THROTTLE_EXPIRY_REFUND : THROTTLE_EXPIRY_KEEP,
                                      &got, &out, &id, &ex);
            if (q > cap || m->np >= THROTTLE_MAX_PENDING) {
                assert_int_equal(rc, q > cap ? THROTTLE_RSV_TOO_LARGE : CORE_FULL);
                assert_null(out);
            } else {
                assert_int_equal(rc, CORE_OK);
                want = m_decide(m, now, q, true);
                same_result(m, &want, &got, step);
                assert_int_equal(out != NULL, want.allowed);
                if (out) {
                    uint64_t expect_id = m->last_id + 1 > (uint64_t)now ? m->last_id + 1 : (uint64_t)now;
                    assert_int_equal(id, expect_id);
                    m->last_id = id;
                    int64_t window = p.algo == THROTTLE_FIXED_WINDOW || p.algo == THROTTLE_SLIDING_WINDOW
                                         ? m_start(m, now)
                                         : -1;
                    m->pend[m->np++] = (mres_t){ id, q, now + ttl, window, refund };
                    throttle_free(t);
                    t = out;
                    expire = ex;
                }
            }
        } else if (op < 78) {   /* settle: a pending one, or one that is not */
            counts[2]++;
            uint64_t id;
            size_t k = SIZE_MAX;
            if (m->np && rng_next(&rng) % 5) {
                k = (size_t)(rng_next(&rng) % m->np);
                id = m->pend[k].id;
            } else {
                id = m->last_id + 1 + rng_next(&rng) % 3;   /* never given (or given and gone) */
                if (rng_next(&rng) & 1)
                    id = m->last_id;
                for (size_t i = 0; i < m->np; i++)
                    if (m->pend[i].id == id)
                        k = i;
            }
            int64_t actual = (int64_t)(rng_next(&rng) % (uint64_t)(cap + 1));
            if (rng_next(&rng) % 10 == 0)
                actual = cap + 1;
            throttle_t *out;
            throttle_reservation_t was;
            int64_t ex;
            int rc = throttle_settle(t, id, actual, now, &out, &was, &ex);
            if (k == SIZE_MAX) {
                assert_int_equal(rc, THROTTLE_RSV_UNKNOWN);
            } else if (actual > cap) {
                assert_int_equal(rc, THROTTLE_RSV_TOO_LARGE);
            } else {
                assert_int_equal(rc, CORE_OK);
                mres_t r = m->pend[k];
                assert_int_equal(was.cost, r.cost);
                if (actual > r.cost)
                    m_charge(m, now, actual - r.cost);
                else
                    m_refund(m, now, r.cost - actual, r.window);
                m->pend[k] = m->pend[--m->np];
                throttle_free(t);
                t = out;
                expire = ex;
                counts[5]++;
            }
            if (rc != CORE_OK)
                assert_null(out);
        } else if (op < 88) {   /* refund */
            counts[3]++;
            throttle_t *out;
            int64_t ex;
            int rc = throttle_refund(t, &p, now, q, &out, &ex);
            if (q > cap) {
                assert_int_equal(rc, THROTTLE_RSV_TOO_LARGE);
                assert_null(out);
            } else {
                assert_int_equal(rc, CORE_OK);
                m_refund(m, now, q, -1);
                throttle_free(t);
                t = out;
                expire = ex;
            }
        } else {   /* probe: what q would get, nothing changed */
            counts[4]++;
            want = m_decide(m, now, q, false);
            throttle_check(t, &p, now, q, &got);
            same_result(m, &want, &got, step);
        }
        if (op >= 88) {   /* a probe changes nothing */
            size_t na = encode(t, after, sizeof(after));
            assert_int_equal(na, nb);
            assert_memory_equal(after, before, nb);
        }
        (void)encode(t, after, sizeof(after));
        /* the state agrees with the model through a probe of every size */
        for (int64_t k = 0; k <= cap && k <= 4; k++) {
            rl_result_t a, b = m_decide(m, now, k, false);
            throttle_check(t, &p, now, k, &a);
            same_result(m, &b, &a, step);
        }
    }
    for (int i = 0; i < 6; i++)
        assert_true(counts[i] > steps / 50);
    throttle_free(t);
    free(m->w);
    free(m);
}

static throttle_params_t gcra(int64_t burst, int64_t count, int64_t period_s)
{
    throttle_params_t p = { .algo = THROTTLE_GCRA };
    p.u.gcra = (gcra_params_t){ burst, count, S(period_s) };
    return p;
}

static throttle_params_t tbucket(int64_t capacity, int64_t rate_micro)
{
    throttle_params_t p = { .algo = THROTTLE_TOKEN_BUCKET };
    p.u.tb = (tbucket_params_t){ capacity, rate_micro };
    return p;
}

static throttle_params_t window(throttle_algo_t a, int64_t max, int64_t period_s)
{
    throttle_params_t p = { .algo = a };
    p.u.win = (window_params_t){ max, S(period_s) };
    return p;
}

static void test_gcra_model(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        run_sequence(gcra(9, 10, 1), seed, 3000, S(0.15));
        run_sequence(gcra(0, 3, 60), seed + 100, 2000, S(9));
        run_sequence(gcra(99, 1000, 1), seed + 200, 2000, S(0.01));
    }
}

static void test_token_bucket_model(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        run_sequence(tbucket(10, 2500000), seed, 3000, S(0.9));
        run_sequence(tbucket(1000, 333333), seed + 100, 2000, S(30));
        run_sequence(tbucket(1, 1), seed + 200, 1000, S(200000));
    }
}

static void test_fixed_window_model(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        run_sequence(window(THROTTLE_FIXED_WINDOW, 10, 1), seed, 3000, S(0.1));
        run_sequence(window(THROTTLE_FIXED_WINDOW, 100, 60), seed + 100, 2000, S(4));
    }
}

static void test_sliding_window_model(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        run_sequence(window(THROTTLE_SLIDING_WINDOW, 10, 1), seed, 3000, S(0.1));
        run_sequence(window(THROTTLE_SLIDING_WINDOW, 100, 60), seed + 100, 2000, S(4));
    }
}

/* The worked examples of docs/rate-limiting.md, by hand. */
static void test_worked_examples(void **state)
{
    (void)state;
    /* GCRA 10 per second, burst 9 (limit 10, T = 100 ms, tau = 1 s) */
    throttle_params_t p = gcra(9, 10, 1);
    rl_result_t r;
    throttle_t *t = NULL, *out;
    uint64_t id;
    int64_t ex;
    assert_int_equal(throttle_reserve(NULL, &p, BASE, 8, S(30), THROTTLE_EXPIRY_KEEP, &r, &t, &id, &ex), CORE_OK);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(id, (uint64_t)BASE);
    assert_int_equal(throttle_gcra_tat(t), BASE + S(0.8));
    assert_int_equal(ex, BASE + S(30));   /* the key lives until the deadline */
    throttle_reservation_t was;
    /* actual 3: 5 given back, TAT = BASE + 0.3 s */
    assert_int_equal(throttle_settle(t, id, 3, BASE, &out, &was, &ex), CORE_OK);
    assert_int_equal(throttle_gcra_tat(out), BASE + S(0.3));
    assert_int_equal(ex, BASE + S(0.3));
    throttle_free(t);
    t = out;
    assert_int_equal(throttle_settle(t, id, 3, BASE, &out, &was, &ex), THROTTLE_RSV_UNKNOWN);   /* twice */
    /* refund 10 when 3 are charged: TAT back to now, never below */
    assert_int_equal(throttle_refund(t, &p, BASE, 10, &out, &ex), CORE_OK);
    assert_int_equal(throttle_gcra_tat(out), BASE);
    throttle_free(out);
    assert_int_equal(throttle_refund(t, &p, BASE, 11, &out, &ex), THROTTLE_RSV_TOO_LARGE);
    /* overdraft: reserve 2, settle 10: TAT = BASE + 0.3 + 0.2 + 0.8 = BASE + 1.3 s */
    throttle_t *u;
    assert_int_equal(throttle_reserve(t, &p, BASE, 2, S(30), THROTTLE_EXPIRY_KEEP, &r, &u, &id, &ex), CORE_OK);
    assert_int_equal(id, (uint64_t)BASE + 1);
    assert_int_equal(throttle_settle(u, id, 10, BASE, &out, &was, &ex), CORE_OK);
    assert_int_equal(throttle_gcra_tat(out), BASE + S(1.3));
    throttle_check(out, &p, BASE, 1, &r);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ns, S(0.4));   /* 1.3 + 0.1 - 1.0 */
    throttle_free(t);
    throttle_free(u);
    throttle_free(out);

    /* expiry with refund: applied by the next change, seen by reads (10 a minute) */
    p = gcra(9, 10, 60);
    assert_int_equal(throttle_reserve(NULL, &p, BASE, 10, S(5), THROTTLE_EXPIRY_REFUND, &r, &t, &id, &ex), CORE_OK);
    throttle_check(t, &p, BASE + S(4.9), 1, &r);
    assert_false(r.allowed);
    throttle_check(t, &p, BASE + S(5), 10, &r);
    assert_true(r.allowed);
    assert_int_equal(throttle_pending(t, BASE + S(5)), 0);
    assert_int_equal(throttle_reservations(t), 1);   /* stored until a change prunes it */
    assert_true(throttle_commit(&t, &p, BASE + S(5), 1, &ex));
    assert_int_equal(throttle_reservations(t), 0);
    assert_int_equal(throttle_gcra_tat(t), BASE + S(11));
    throttle_free(t);

    /* sliding logs take none */
    throttle_params_t lp = { .algo = THROTTLE_SLIDING_LOG };
    lp.u.log = (slog_params_t){ 3, S(10) };
    assert_int_equal(throttle_reserve(NULL, &lp, BASE, 1, S(5), THROTTLE_EXPIRY_KEEP, &r, &t, &id, &ex),
                     THROTTLE_RSV_ALGO);
    assert_int_equal(throttle_refund(NULL, &lp, BASE, 1, &t, &ex), THROTTLE_RSV_ALGO);
}

/* At most THROTTLE_MAX_PENDING pending per key; hostile encodings refused. */
static void test_bounds_and_decoding(void **state)
{
    (void)state;
    throttle_params_t p = tbucket(1000000, 1);
    throttle_t *t = NULL, *out;
    rl_result_t r;
    uint64_t id;
    int64_t ex;
    for (int i = 0; i < THROTTLE_MAX_PENDING; i++) {
        assert_int_equal(throttle_reserve(t, &p, BASE, 1, S(60), THROTTLE_EXPIRY_KEEP, &r, &out, &id, &ex), CORE_OK);
        throttle_free(t);
        t = out;
    }
    assert_int_equal(throttle_reserve(t, &p, BASE, 1, S(60), THROTTLE_EXPIRY_KEEP, &r, &out, &id, &ex), CORE_FULL);
    /* after the deadline they are gone, and room is back */
    assert_int_equal(throttle_reserve(t, &p, BASE + S(60), 1, S(60), THROTTLE_EXPIRY_KEEP, &r, &out, &id, &ex),
                     CORE_OK);
    assert_int_equal(throttle_reservations(out), 1);
    throttle_free(t);
    wbuf_t w = WBUF_INIT;
    throttle_type.encode(out, &w);
    assert_int_equal(w.data[0], 3);
    const char *why;
    for (size_t cut = 0; cut < w.len; cut++)
        assert_null(throttle_type.decode(w.data, cut, &why));
    /* a reservation's cost above its capacity, an unknown expiry outcome */
    size_t at = w.len - (8 + 8) - 1 - 8 - 8 - 8;   /* cost of the only reservation */
    uint8_t *b = malloc(w.len);
    memcpy(b, w.data, w.len);
    le64_store(b + at, 2000000);
    assert_null(throttle_type.decode(b, w.len, &why));
    memcpy(b, w.data, w.len);
    b[w.len - 17] = 2;
    assert_null(throttle_type.decode(b, w.len, &why));
    memcpy(b, w.data, w.len);
    throttle_t *back = throttle_type.decode(b, w.len, &why);
    assert_non_null(back);
    throttle_free(back);
    free(b);
    wbuf_free(&w);
    throttle_free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_examples),      cmocka_unit_test(test_gcra_model),
        cmocka_unit_test(test_token_bucket_model),   cmocka_unit_test(test_fixed_window_model),
        cmocka_unit_test(test_sliding_window_model), cmocka_unit_test(test_bounds_and_decoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
