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

#include "core/keydump.h"
#include "core/keyspace.h"
#include "core/persist_fmt.h"
#include "core/rng.h"
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
    assert_ptr_equal(key, (const char *)e + 6);   /* after the 6-byte header */
    assert_ptr_equal(v, (const char *)e + 16);    /* 24 bytes: a 24-byte cell */
    assert_int_equal(throttle_gcra_tat(ks_entry_value(e)), tat);
    assert_int_equal(ks_entry_memory(e), 24 + 4);
    assert_true(ks_entry_set_expire(ks, &e, 1000));   /* moved to a cell with room for the vol index */
    assert_int_equal(ks_entry_memory(e), 32 + 4 + 12);
    v = ks_entry_value(e);
    assert_int_equal(throttle_gcra_tat((const throttle_t *)(const void *)v), tat);
    assert_memory_equal(ks_entry_key(e, NULL), "user:12345", 10);
    assert_int_equal(ks_total_memory(ks), ks_entry_memory(e));
    assert_true(ks_entry_memory(e) <= ks_entry_overhead(10) + throttle_type.size(v));

    /* a decision in place keeps the 8 bytes, the key untouched */
    throttle_t *in = ks_entry_value(e);
    assert_true(throttle_commit(&in, &p, BASE + S(0.1), 1, &exp));
    assert_ptr_equal(in, v);
    assert_true(throttle_gcra_tat(in) > tat);
    assert_memory_equal(ks_entry_key(e, NULL), "user:12345", 10);
    ks_entry_changed(ks, e);
    assert_int_equal(ks_total_memory(ks), 32 + 4 + 12);

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
    assert_int_equal(ks_total_memory(ks), 32 + 4 + 12);
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

/* The state of one algorithm kept apart, by its own module (gcra.h,
 * window.h, token_bucket.h), and its version 2 encoding as type_encode
 * writes it: what the keyspace's value must answer and encode to. */
typedef struct ref_state {
    bool present;
    int64_t tat;
    window_state_t win;
    tbucket_state_t tb;
} ref_state_t;

static bool ref_decide(ref_state_t *s, const throttle_params_t *p, int64_t now, int64_t q, rl_result_t *r)
{
    int64_t exp, store;
    if (!s->present && p->algo == THROTTLE_TOKEN_BUCKET)
        s->tb = tbucket_full(&p->u.tb, now);
    bool commit = false;
    switch (p->algo) {
    case THROTTLE_GCRA:
        gcra_update(&p->u.gcra, s->present ? s->tat : -1, now, q, r, &store);
        if ((commit = store >= 0))
            s->tat = store;
        break;
    case THROTTLE_SLIDING_WINDOW: commit = sliding_window_update(&p->u.win, &s->win, now, q, r, &exp); break;
    case THROTTLE_FIXED_WINDOW: commit = fixed_window_update_cal(&p->u.win, &p->cal, &s->win, now, q, r, &exp); break;
    case THROTTLE_TOKEN_BUCKET: commit = tbucket_update(&p->u.tb, &s->tb, now, q, r, &exp); break;
    case THROTTLE_SLIDING_LOG: break;
    }
    s->present |= commit;
    return commit;
}

static void ref_encode(const ref_state_t *s, throttle_algo_t a, wbuf_t *out)
{
    wbuf_put_u8(out, 2);
    wbuf_put_u8(out, (uint8_t)a);
    switch (a) {
    case THROTTLE_GCRA: wbuf_put_i64(out, s->tat); break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW:
        wbuf_put_i64(out, s->win.start);
        wbuf_put_i64(out, s->win.curr);
        if (a == THROTTLE_SLIDING_WINDOW)
            wbuf_put_i64(out, s->win.prev);
        break;
    case THROTTLE_TOKEN_BUCKET:
        wbuf_put_u64(out, (uint64_t)s->tb.level);
        wbuf_put_u64(out, (uint64_t)((unsigned __int128)s->tb.level >> 64));
        wbuf_put_i64(out, s->tb.last_ns);
        break;
    case THROTTLE_SLIDING_LOG: break;
    }
}

static void assert_encodes_as(const void *v, const wbuf_t *want)
{
    wbuf_t b = WBUF_INIT;
    throttle_type.encode(v, &b);
    assert_int_equal(b.len, want->len);
    assert_memory_equal(b.data, want->data, want->len);
    wbuf_free(&b);
}

/* Every record of a whole snapshot of ks (one key here), each value decoded
 * into ks2 (a load) and its bytes appended to *bytes. */
static void snapshot_into(ks_t *ks, ks_t *ks2, wbuf_t *bytes, void (*between)(ks_t *, void *), void *arg)
{
    wbuf_t out = WBUF_INIT;
    uint64_t records = 0;
    ks_lock_all(ks);
    ks_snapshot_begin(ks);
    if (between)
        between(ks, arg);   /* a write after the barrier: the snapshot keeps what it saw */
    ks_unlock_all(ks);
    for (unsigned i = 0; i < ks_shard_count(ks); i++) {
        ks_shard_t *sh = ks_shard_at(ks, i);
        ks_shard_lock(sh);
        while (!ks_snapshot_drain(ks, sh, &out, 1 << 16, &records))
            ;
        ks_shard_unlock(sh);
    }
    assert_false(ks_snapshot_failed(ks));
    ks_snapshot_end(ks);
    assert_int_equal(records, 1);
    snap_record_t rec;
    size_t used;
    uint64_t cnt;
    const char *why = NULL;
    assert_int_equal(snapfmt_parse_record(out.data, out.len, &rec, &used, &cnt, &why), PARSE_OK);
    assert_int_equal(rec.tag, throttle_type.tag);
    wbuf_put_bytes(bytes, rec.value, rec.vlen);
    void *v = throttle_type.decode(rec.value, rec.vlen, &why);
    assert_non_null(v);
    ks_key_t k = ks_key(ks2, rec.key, rec.klen);
    ks_shard_t *sh = ks_shard_at(ks2, k.shard);
    ks_shard_lock(sh);
    assert_non_null(ks_add(ks2, &k, &throttle_type, v, rec.expire_ms, 0));
    ks_shard_unlock(sh);
    wbuf_free(&out);
}

typedef struct later {
    ks_key_t k;
    const throttle_params_t *p;
    int64_t now;
} later_t;

/* A decision in place on the key, as cmd/throttle.c makes one. */
static void decide_later(ks_t *ks, void *arg)
{
    later_t *l = arg;
    ks_entry_t *e = ks_find_write(ks, &l->k, 0);
    assert_non_null(e);
    throttle_t *in = ks_entry_value(e);
    rl_result_t r;
    int64_t exp;
    assert_true(throttle_check(in, l->p, l->now, 1, &r));
    assert_true(throttle_commit(&in, l->p, l->now, 1, &exp));
    assert_ptr_equal(in, ks_entry_value(e));
    ks_entry_changed(ks, e);
}

/* The windows and the token bucket without reservations are 16 or 24 bytes
 * of their own inside the entry, as GCRA's 8: with a 10-byte key a sliding
 * window or a token bucket is 6 (header) + 10 (key) + 24 = a 40-byte cell,
 * 48 with a vol index, a fixed window 32 and 40 (the 48-byte state made
 * 80).  Hundreds of decisions in place answer and encode as the
 * algorithm's own module computes them; a snapshot (with a decision made
 * after its barrier), a load and a DUMP/RESTORE keep the bytes, and a
 * reservation takes the full form and a new entry. */
static void test_small_entries(void **state)
{
    (void)state;
    static const struct {
        throttle_algo_t a;
        size_t bytes, entry, entry_vol;   /* the cell without and with room for a vol index */
    } cases[] = {
        { THROTTLE_GCRA, 8, 24, 32 },
        { THROTTLE_FIXED_WINDOW, 16, 32, 40 },
        { THROTTLE_SLIDING_WINDOW, 24, 40, 48 },
        { THROTTLE_TOKEN_BUCKET, 24, 40, 48 },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        throttle_params_t p = params_of(cases[c].a);
        ks_t *ks = ks_create(0, 7), *ks2 = ks_create(0, 7);
        ks_key_t k = ks_key(ks, "user:12345", 10);
        ks_shard_t *sh = ks_shard_at(ks, k.shard);
        ref_state_t ref = { 0 };
        rng_t rng;
        rng_seed(&rng, 44 + c);
        int64_t now = BASE;
        ks_entry_t *e = NULL;
        wbuf_t want = WBUF_INIT;
        for (int i = 0; i < 400; i++) {
            now += (int64_t)rng_below(&rng, 2) * S(rng_below(&rng, 40)) + (int64_t)rng_below(&rng, 1000000);
            int64_t q = (int64_t)rng_below(&rng, 3);
            rl_result_t r, rr;
            ks_shard_lock(sh);
            throttle_t *t = e ? ks_entry_value(e) : NULL;
            bool commit = throttle_check(t, &p, now, q, &r);
            assert_int_equal(commit, ref_decide(&ref, &p, now, q, &rr));
            assert_memory_equal(&r.limit, &rr.limit, sizeof(r) - offsetof(rl_result_t, limit));
            assert_int_equal(r.allowed, rr.allowed);
            int64_t exp;
            if (commit && e) {
                assert_true(throttle_commit(&t, &p, now, q, &exp));
                assert_ptr_equal(t, ks_entry_value(e));   /* in place */
                ks_entry_changed(ks, e);
            } else if (commit) {
                assert_true(throttle_commit(&t, &p, now, q, &exp));
                assert_int_equal(throttle_type.size(t), cases[c].bytes);
                assert_int_equal(throttle_type.inline_len(t), cases[c].bytes);
                e = ks_add(ks, &k, &throttle_type, t, KS_NO_EXPIRY, 0);
                assert_non_null(e);
            }
            if (e) {
                want.len = 0;
                ref_encode(&ref, p.algo, &want);
                assert_encodes_as(ks_entry_value(e), &want);
            }
            ks_shard_unlock(sh);
        }
        assert_non_null(e);

        /* the entry: the key at 6, the value after it, the cell's charge */
        ks_shard_lock(sh);
        const char *v = ks_entry_value(e), *key = ks_entry_key(e, NULL);
        assert_ptr_equal(key, (const char *)e + 6);
        assert_ptr_equal(v, (const char *)e + 16);
        assert_int_equal(throttle_type.size(v), cases[c].bytes);
        assert_int_equal(ks_entry_memory(e), cases[c].entry + 4);
        assert_true(ks_entry_set_expire(ks, &e, 1000));
        v = ks_entry_value(e);
        assert_int_equal(ks_entry_memory(e), cases[c].entry_vol + 4 + 12);   /* and a 12-byte volatile slot */
        assert_int_equal(ks_total_memory(ks), ks_entry_memory(e));
        assert_true(ks_entry_memory(e) <= ks_entry_overhead(10) + throttle_type.size(v));
        assert_true(ks_entry_set_expire(ks, &e, KS_NO_EXPIRY));
        ks_shard_unlock(sh);

        /* a snapshot with a decision after its barrier, loaded elsewhere */
        wbuf_t snap = WBUF_INIT;
        later_t l = { k, &p, now + S(61) };
        snapshot_into(ks, ks2, &snap, decide_later, &l);
        assert_int_equal(snap.len, want.len);
        assert_memory_equal(snap.data, want.data, want.len);   /* as at the barrier */
        ks_shard_lock(sh);
        wbuf_t now_bytes = WBUF_INIT;
        throttle_type.encode(ks_entry_value(e), &now_bytes);
        assert_true(now_bytes.len != want.len || memcmp(now_bytes.data, want.data, want.len) != 0);
        assert_int_equal(ks_entry_memory(e), cases[c].entry_vol + 4);   /* still small, in place */
        wbuf_free(&now_bytes);
        ks_shard_unlock(sh);
        ks_shard_t *sh2 = ks_shard_at(ks2, k.shard);
        ks_shard_lock(sh2);
        ks_entry_t *e2 = ks_find(ks2, &k, 0);
        assert_non_null(e2);
        assert_encodes_as(ks_entry_value(e2), &want);
        assert_int_equal(ks_entry_memory(e2), cases[c].entry + 4);
        assert_int_equal(ks_total_memory(ks2), ks_entry_memory(e2));

        /* DUMP and RESTORE: the same payload, the same small state */
        wbuf_t d1 = WBUF_INIT, d2 = WBUF_INIT;
        keydump_encode(&throttle_type, ks_entry_value(e2), KEYDUMP_NO_TTL, &d1);
        const ks_type_t *ty;
        void *back;
        int64_t ttl;
        const char *why = NULL;
        assert_true(keydump_decode(d1.data, d1.len, &ty, &back, &ttl, &why));
        assert_ptr_equal(ty, &throttle_type);
        assert_int_equal(throttle_type.size(back), cases[c].bytes);
        assert_encodes_as(back, &want);
        keydump_encode(&throttle_type, back, KEYDUMP_NO_TTL, &d2);
        assert_int_equal(d1.len, d2.len);
        assert_memory_equal(d1.data, d2.data, d1.len);
        throttle_free(back);
        ks_shard_unlock(sh2);

        /* a reservation (but on a GCRA key: test_gcra_entry) takes the full
         * form, which the small entry has no room for; a refund goes back */
        ks_shard_lock(sh);
        throttle_t *in = ks_entry_value(e), *out = NULL, *refunded = NULL;
        rl_result_t r;
        uint64_t id;
        int64_t exp;
        int64_t at = now + S(200);
        assert_int_equal(throttle_reserve(in, &p, at, 1, S(10), THROTTLE_EXPIRY_REFUND, &r, &out, &id, &exp), CORE_OK);
        assert_non_null(out);
        assert_true(throttle_type.size(out) > 24);
        assert_false(ks_entry_value_fits(e, out));
        assert_int_equal(throttle_refund(in, &p, at, 1, &refunded, &exp), CORE_OK);
        assert_int_equal(throttle_type.size(refunded), cases[c].bytes);
        assert_true(ks_entry_value_fits(e, refunded));
        ks_entry_replace_value(ks, e, refunded);
        assert_int_equal(ks_total_memory(ks), cases[c].entry_vol + 4);
        ks_entry_delete(ks, e);
        e = ks_add(ks, &k, &throttle_type, out, KS_NO_EXPIRY, 0);
        assert_non_null(e);
        assert_int_equal(throttle_pending(ks_entry_value(e), at), 1);
        assert_int_equal(ks_total_memory(ks), ks_entry_memory(e));
        assert_true(ks_entry_memory(e) >= 80 + 8);
        ks_shard_unlock(sh);

        wbuf_free(&want);
        wbuf_free(&snap);
        wbuf_free(&d1);
        wbuf_free(&d2);
        ks_free(ks);
        ks_free(ks2);
    }
}

/* The edges of the small forms: the decoder's largest times and counts,
 * a fixed window with a short key in the 32-byte class, a token bucket
 * whose level is negative; each loads small and encodes as it was. */
static void test_small_edges(void **state)
{
    (void)state;
    const char *why = NULL;
    wbuf_t b = WBUF_INIT;
    static const int64_t times[] = { 0, 1, INT64_MAX / 2 };
    for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
        for (int a = THROTTLE_SLIDING_WINDOW; a <= THROTTLE_TOKEN_BUCKET; a++) {
            ref_state_t s = { .present = true };
            s.win = (window_state_t){ times[i], 2 * WINDOW_MAX_COUNT, a == THROTTLE_SLIDING_WINDOW ? 2 * WINDOW_MAX_COUNT : 0 };
            s.tb = (tbucket_state_t){ (i % 2 ? -1 : 1) * (tb_level_t)TB_MAX_CAPACITY * TB_UNIT, times[i] };
            b.len = 0;
            ref_encode(&s, (throttle_algo_t)a, &b);
            throttle_t *t = throttle_type.decode(b.data, b.len, &why);
            assert_non_null(t);
            assert_int_equal(throttle_algo(t), a);
            assert_int_equal(throttle_type.size(t), a == THROTTLE_FIXED_WINDOW ? 16 : 24);
            assert_encodes_as(t, &b);
            throttle_t *c = throttle_clone(t);
            assert_encodes_as(c, &b);
            throttle_free(c);
            throttle_free(t);
        }
    }
    ref_state_t s = { .present = true, .tb = { -5, 7 } };
    b.len = 0;
    ref_encode(&s, THROTTLE_TOKEN_BUCKET, &b);
    throttle_t *t = throttle_type.decode(b.data, b.len, &why);
    assert_non_null(t);
    assert_int_equal(throttle_type.size(t), 24);
    assert_encodes_as(t, &b);
    throttle_free(t);

    throttle_params_t p = params_of(THROTTLE_FIXED_WINDOW);
    int64_t exp;
    t = NULL;
    assert_true(throttle_commit(&t, &p, BASE, 1, &exp));
    ks_t *ks = ks_create(0, 7);
    ks_key_t k = ks_key(ks, "ip", 2);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_add(ks, &k, &throttle_type, t, KS_NO_EXPIRY, 0);
    assert_non_null(e);
    assert_int_equal(ks_entry_memory(e), 24 + 4);   /* a cell of 6 + 2 + 16, a slot */
    ks_shard_unlock(sh);
    ks_free(ks);
    wbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_algorithm),
        cmocka_unit_test(test_version1),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_bytes_after),
        cmocka_unit_test(test_gcra_entry),
        cmocka_unit_test(test_small_entries),
        cmocka_unit_test(test_small_edges),
    };
    return cmocka_run_group_tests_name("throttle", tests, NULL, NULL);
}
