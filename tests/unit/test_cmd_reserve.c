/*
 * test_cmd_reserve.c - THROTTLE.RESERVE, .SETTLE, .REFUND and .PROBE
 * (cmd/throttle.h) linked with cmd and core only: seeded sequences over
 * every algorithm that takes them, each change journaling one command
 * record that replays to byte-identical keys (reservations included:
 * a reserve replays to the same id), refusals (unknown id, settled twice,
 * past the deadline, over the capacity, a sliding log, another algorithm's
 * key) answered with nothing changed and nothing journaled, a probe that
 * journals nothing, and records no tally wrote refused.
 */
#include <stdlib.h>

#include "cmd/throttle.h"
#include "core/rng.h"
#include "tests/unit/cmd_check.h"

#define T0 CMD_CHECK_NOW_NS
#define SEC NS_PER_SEC

static cmd_throttle_item_t item(throttle_algo_t algo, const char *key, int64_t q)
{
    cmd_throttle_item_t it = { .key = key, .klen = strlen(key), .quantity = q };
    it.p.algo = algo;
    switch (algo) {
    case THROTTLE_GCRA: it.p.u.gcra = (gcra_params_t){ 9, 10, 60 * SEC }; break;
    case THROTTLE_TOKEN_BUCKET: it.p.u.tb = (tbucket_params_t){ 10, 200000 }; break;
    case THROTTLE_SLIDING_LOG: it.p.u.log = (slog_params_t){ 10, 60 * SEC }; break;
    default: it.p.u.win = (window_params_t){ 10, 60 * SEC }; break;
    }
    return it;
}

static bool reserve(cmd_check_t *c, const cmd_throttle_item_t *it, int64_t ttl_s, throttle_expiry_t e, int64_t now,
                    cmd_throttle_reserve_res_t *r, cmd_err_t *err)
{
    cmd_throttle_reserve_args_t a = { .it = *it, .ttl_ns = ttl_s * SEC, .on_expiry = e };
    return cmd_check_run(c, &CMD_THROTTLE_RESERVE, &a, r, now, err);
}

static bool settle(cmd_check_t *c, const char *key, uint64_t id, int64_t actual, int64_t now,
                   cmd_throttle_settle_res_t *r, cmd_err_t *err)
{
    cmd_throttle_settle_args_t a = { key, strlen(key), id, actual };
    return cmd_check_run(c, &CMD_THROTTLE_SETTLE, &a, r, now, err);
}

static rl_result_t probe(cmd_check_t *c, const cmd_throttle_item_t *it, int64_t now)
{
    cmd_throttle_res_t r;
    size_t before = c->journal.len;
    assert_true(cmd_check_run(c, &CMD_THROTTLE_PROBE, it, &r, now, NULL));
    assert_int_equal(c->journal.len, before);   /* a probe journals nothing */
    return r.r;
}

/* GCRA 10 a minute: a reservation of 8 settled at 3 gives 5 back. */
static void test_reserve_settle(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_throttle_item_t it = item(THROTTLE_GCRA, "llm:a", 8);
    cmd_throttle_reserve_res_t rr;
    assert_true(reserve(&c, &it, 30, THROTTLE_EXPIRY_KEEP, T0, &rr, NULL));
    assert_true(rr.r.allowed);
    assert_int_equal(rr.r.remaining, 2);
    assert_int_equal(rr.id, (uint64_t)T0);
    assert_int_equal(rr.deadline_ns, T0 + 30 * SEC);
    it.quantity = 3;
    assert_false(probe(&c, &it, T0).allowed);
    cmd_throttle_settle_res_t sr;
    cmd_err_t err;
    assert_true(settle(&c, "llm:a", rr.id, 3, T0 + SEC, &sr, NULL));
    assert_int_equal(sr.reserved, 8);
    assert_int_equal(sr.r.remaining, 7);
    assert_true(probe(&c, &it, T0 + SEC).allowed);
    size_t len = c.journal.len;
    assert_false(settle(&c, "llm:a", rr.id, 3, T0 + SEC, &sr, &err));   /* twice */
    assert_int_equal(err.code, CMD_E_NOT_FOUND);
    assert_false(settle(&c, "nokey", 1, 3, T0 + SEC, &sr, &err));
    assert_int_equal(err.code, CMD_E_NOT_FOUND);
    /* over the capacity, and a reservation past its deadline */
    assert_true(reserve(&c, &it, 5, THROTTLE_EXPIRY_KEEP, T0 + SEC, &rr, NULL));
    len = c.journal.len;
    assert_false(settle(&c, "llm:a", rr.id, 11, T0 + SEC, &sr, &err));
    assert_int_equal(err.code, CMD_E_BAD_REQUEST);
    assert_string_equal(err.field, "actual");
    assert_false(settle(&c, "llm:a", rr.id, 1, T0 + 6 * SEC, &sr, &err));
    assert_int_equal(err.code, CMD_E_NOT_FOUND);
    it.quantity = 11;
    assert_false(reserve(&c, &it, 5, THROTTLE_EXPIRY_KEEP, T0 + SEC, &rr, &err));
    assert_string_equal(err.field, "quantity");
    assert_false(cmd_check_run(&c, &CMD_THROTTLE_REFUND, &it, &(cmd_throttle_res_t){ 0 }, T0 + SEC, &err));
    cmd_throttle_item_t log = item(THROTTLE_SLIDING_LOG, "log", 1);
    assert_false(reserve(&c, &log, 5, THROTTLE_EXPIRY_KEEP, T0, &rr, &err));
    assert_string_equal(err.field, "algorithm");
    cmd_throttle_item_t other = item(THROTTLE_TOKEN_BUCKET, "llm:a", 1);
    assert_false(reserve(&c, &other, 5, THROTTLE_EXPIRY_KEEP, T0, &rr, &err));
    assert_int_equal(err.code, CMD_E_WRONGTYPE);
    assert_false(cmd_check_run(&c, &CMD_THROTTLE_REFUND, &other, &(cmd_throttle_res_t){ 0 }, T0, &err));
    assert_int_equal(err.code, CMD_E_WRONGTYPE);
    assert_int_equal(c.journal.len, len);   /* refusals journal nothing */
    assert_int_equal(cmd_check_replays(&c), 3);
    cmd_check_close(&c);
}

/* The charge of a key is what its entry costs, whatever the form of its
 * state: a GCRA key made by a decision is a compact 8-byte state in a
 * 32-byte cell (6-byte header, 10-byte key, a vol index for its TTL); a reservation needs the full state and a new
 * entry, and a settle keeps the full state (its reservation set stays,
 * possibly empty).  Replay reaches the same bytes. */
static void test_compact_gcra_entry(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_throttle_item_t it = item(THROTTLE_GCRA, "user:12345", 1);
    cmd_throttle_res_t dr;
    assert_true(cmd_check_run(&c, cmd_throttle_def(THROTTLE_GCRA), &it, &dr, T0, NULL));
    assert_true(dr.r.allowed);
    ks_key_t k = ks_key(c.srv.ks, it.key, it.klen);
    ks_shard_t *sh = ks_shard_at(c.srv.ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(c.srv.ks, &k, T0 / 1000000);
    assert_non_null(e);
    assert_int_equal(throttle_type.size(ks_entry_value(e)), 8);
    assert_int_equal(ks_entry_memory(e), ks_entry_expire(c.srv.ks, e) == KS_NO_EXPIRY ? 24 + 4 : 32 + 4 + 12);
    assert_int_equal(ks_total_memory(c.srv.ks), ks_entry_memory(e));
    ks_shard_unlock(sh);

    cmd_throttle_reserve_res_t rr;
    it.quantity = 3;
    assert_true(reserve(&c, &it, 30, THROTTLE_EXPIRY_REFUND, T0 + SEC, &rr, NULL));
    assert_true(rr.r.allowed);
    ks_shard_lock(sh);
    e = ks_find(c.srv.ks, &k, T0 / 1000000 + 1000);
    assert_non_null(e);
    assert_true(throttle_type.size(ks_entry_value(e)) > 8);
    assert_int_equal(throttle_pending(ks_entry_value(e), T0 + SEC), 1);
    assert_int_equal(ks_total_memory(c.srv.ks), ks_entry_memory(e));
    ks_shard_unlock(sh);
    it.quantity = 1;
    assert_true(cmd_check_run(&c, cmd_throttle_def(THROTTLE_GCRA), &it, &dr, T0 + 2 * SEC, NULL));
    cmd_throttle_settle_res_t sr;
    assert_true(settle(&c, "user:12345", rr.id, 2, T0 + 3 * SEC, &sr, NULL));
    assert_int_equal(sr.reserved, 3);
    ks_shard_lock(sh);
    e = ks_find(c.srv.ks, &k, T0 / 1000000 + 3000);
    assert_non_null(e);
    assert_int_equal(ks_total_memory(c.srv.ks), ks_entry_memory(e));
    ks_shard_unlock(sh);
    assert_int_equal(cmd_check_replays(&c), 4);
    cmd_check_close(&c);
}

/* Seeded sequences of every operation on a few keys of each algorithm;
 * replay reaches the same bytes. */
static void test_sequences_replay(void **state)
{
    (void)state;
    static const throttle_algo_t algos[] = { THROTTLE_GCRA, THROTTLE_TOKEN_BUCKET, THROTTLE_FIXED_WINDOW,
                                             THROTTLE_SLIDING_WINDOW };
    static const char *const keys[] = { "g", "t", "f", "s" };
    for (uint64_t seed = 1; seed <= 4; seed++) {
        cmd_check_t c;
        cmd_check_open(&c);
        rng_t rng;
        rng_seed(&rng, seed);
        uint64_t ids[4][64];
        size_t nids[4] = { 0 };
        int64_t now = T0;
        int changes = 0, settled = 0;
        for (int step = 0; step < 1500; step++) {
            now += (int64_t)(rng_next(&rng) % (uint64_t)(3 * SEC));
            size_t k = (size_t)(rng_next(&rng) % 4);
            cmd_throttle_item_t it = item(algos[k], keys[k], (int64_t)(rng_next(&rng) % 11));
            int op = (int)(rng_next(&rng) % 10);
            size_t before = c.journal.len;
            cmd_err_t err;
            if (op < 4) {
                cmd_throttle_reserve_res_t r;
                assert_true(reserve(&c, &it, 1 + (int64_t)(rng_next(&rng) % 20),
                                    rng_next(&rng) & 1 ? THROTTLE_EXPIRY_REFUND : THROTTLE_EXPIRY_KEEP, now, &r,
                                    NULL));
                if (r.r.allowed && nids[k] < 64)
                    ids[k][nids[k]++] = r.id;
            } else if (op < 7 && nids[k]) {
                size_t i = (size_t)(rng_next(&rng) % nids[k]);
                cmd_throttle_settle_res_t r;
                if (settle(&c, keys[k], ids[k][i], (int64_t)(rng_next(&rng) % 11), now, &r, &err))
                    settled++;
                else
                    assert_int_equal(err.code, CMD_E_NOT_FOUND);
                ids[k][i] = ids[k][--nids[k]];
            } else if (op < 8) {
                cmd_throttle_res_t r;
                assert_true(cmd_check_run(&c, &CMD_THROTTLE_REFUND, &it, &r, now, NULL));
            } else if (op < 9) {
                probe(&c, &it, now);
            } else {
                cmd_throttle_res_t r;
                assert_true(cmd_check_run(&c, cmd_throttle_def(it.p.algo), &it, &r, now, NULL));
            }
            changes += c.journal.len != before;
        }
        /* a last change of every key: the live server forgot the keys
         * that expired when a read found them, the replay at this change */
        for (size_t k = 0; k < 4; k++) {
            cmd_throttle_item_t it = item(algos[k], keys[k], 0);
            cmd_throttle_reserve_res_t r;
            assert_true(reserve(&c, &it, 1, THROTTLE_EXPIRY_KEEP, now, &r, NULL));
            changes++;
        }
        assert_true(settled > 50);
        assert_int_equal(cmd_check_replays(&c), changes);
        cmd_check_close(&c);
    }
}

/* A record's bytes through the operation's decoder, to the last byte. */
static bool replays(const cmd_def_t *def, const uint8_t *p, size_t n)
{
    union {
        cmd_throttle_reserve_args_t r;
        cmd_throttle_settle_args_t s;
        cmd_throttle_item_t i;
    } args;
    rbuf_t in = rbuf_make(p, n);
    const char *why = NULL;
    return def->decode(&in, &args, &why) && rbuf_done(&in);
}

static void check_refused(const cmd_def_t *def, const void *args, const size_t *at, const uint8_t *bad, size_t nbad)
{
    wbuf_t b = WBUF_INIT;
    def->encode(args, &b);
    assert_true(replays(def, b.data, b.len));
    for (size_t cut = 0; cut < b.len; cut++)
        assert_false(replays(def, b.data, cut));
    for (size_t i = 0; i < nbad; i++) {
        uint8_t keep = b.data[at[i]];
        b.data[at[i]] = bad[i];
        if (replays(def, b.data, b.len))
            fail_msg("%s: byte %zu set to %u replayed", def->name, at[i], bad[i]);
        b.data[at[i]] = keep;
    }
    wbuf_free(&b);
}

static void test_bad_records_refused(void **state)
{
    (void)state;
    /* reserve: u8 version | u8 algorithm | u32 klen | "k" | u8 flags | i64 quantity | 3 x i64 | i64 ttl | u8 */
    cmd_throttle_reserve_args_t ra = { .it = item(THROTTLE_GCRA, "k", 1), .ttl_ns = 5 * SEC };
    ra.it.klen = 1;
    enum { ALGO = 1, FLAGS = 2 + 4 + 1, QTY = FLAGS + 1, TTL = QTY + 8 + 24, EXP = TTL + 8 };
    const size_t ri[] = { 0, ALGO, ALGO, FLAGS, QTY, TTL + 7, TTL + 7, EXP };
    const uint8_t rb[] = { 2, 2, 9, 1, 11, 0x80, 0x7f, 2 };
    /* version 2; a sliding log; algorithm 9; shadow; quantity over the capacity; ttl < 0, past 7 days; expiry 2 */
    check_refused(&CMD_THROTTLE_RESERVE, &ra, ri, rb, sizeof(ri) / sizeof(ri[0]));
    cmd_throttle_settle_args_t sa = { "k", 1, 7, 3 };
    const size_t si[] = { 0, 4 + 1 + 1 + 8 + 7 };
    const uint8_t sb[] = { 0, 0x80 };   /* version 0; actual < 0 */
    check_refused(&CMD_THROTTLE_SETTLE, &sa, si, sb, sizeof(si) / sizeof(si[0]));
    cmd_throttle_item_t fa = item(THROTTLE_FIXED_WINDOW, "k", 2);
    const size_t fi[] = { 0, ALGO, FLAGS, QTY };
    const uint8_t fb[] = { 3, 2, 1, 11 };
    check_refused(&CMD_THROTTLE_REFUND, &fa, fi, fb, sizeof(fi) / sizeof(fi[0]));
}

static void test_table_rows(void **state)
{
    (void)state;
    const cmd_def_t *defs[] = { &CMD_THROTTLE_RESERVE, &CMD_THROTTLE_SETTLE, &CMD_THROTTLE_REFUND,
                                &CMD_THROTTLE_PROBE };
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(defs[i]->access, CMD_ACCESS_RATELIMIT);
        assert_ptr_equal(cmd_def_by_id(defs[i]->id), defs[i]);
    }
    assert_int_equal(CMD_THROTTLE_PROBE.flags & CMD_F_WRITE, 0);
    assert_null(CMD_THROTTLE_PROBE.encode);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_settle),
        cmocka_unit_test(test_compact_gcra_entry),
        cmocka_unit_test(test_sequences_replay),
        cmocka_unit_test(test_bad_records_refused),
        cmocka_unit_test(test_table_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
