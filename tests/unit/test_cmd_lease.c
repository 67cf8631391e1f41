/*
 * test_cmd_lease.c - the lease operations on the command layer: acquire up
 * to the limit, release, renew, self-expiry at the record's time; every
 * change replays from its records to identical dumps (ids and expiries
 * included); a refusal of bad input journals nothing; a key without leases
 * is gone.
 */
#include "cmd/lease.h"
#include "core/lease.h"
#include "core/rng.h"
#include "tests/unit/cmd_check.h"

#define T0 CMD_CHECK_NOW_NS
#define MS 1000000LL

static bool acquire(cmd_check_t *c, const char *key, int64_t limit, int64_t ttl_ms, int64_t now, cmd_lease_res_t *r)
{
    cmd_lease_acquire_args_t a = { key, strlen(key), limit, ttl_ms };
    cmd_err_t err;
    assert_true(cmd_check_run(c, &CMD_LEASE_ACQUIRE, &a, r, now, &err));
    return r->ok;
}

static bool release(cmd_check_t *c, const char *key, uint64_t id, int64_t now)
{
    cmd_lease_id_args_t a = { key, strlen(key), id, 0 };
    cmd_lease_res_t r;
    cmd_err_t err;
    assert_true(cmd_check_run(c, &CMD_LEASE_RELEASE, &a, &r, now, &err));
    return r.ok;
}

static void info(cmd_check_t *c, const char *key, int64_t now, cmd_lease_res_t *r)
{
    cmd_lease_key_args_t a = { key, strlen(key) };
    cmd_err_t err;
    assert_true(cmd_check_run(c, &CMD_LEASE_INFO, &a, r, now, &err));
}

static void test_acquire_release_expire(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_lease_res_t r1, r2, r3, in;
    assert_true(acquire(&c, "db", 2, 1000, T0, &r1));
    assert_int_equal(r1.active, 1);
    assert_int_equal(r1.remaining, 1);
    assert_int_equal(r1.expires_ms, T0 / MS + 1000);
    assert_true(acquire(&c, "db", 2, 5000, T0 + 10 * MS, &r2));
    assert_true(r1.id != r2.id);
    assert_false(acquire(&c, "db", 2, 1000, T0 + 20 * MS, &r3));
    assert_int_equal(r3.id, 0);
    assert_int_equal(r3.retry_after_ms, 980);   /* the first expires at T0 + 1000 ms */
    assert_int_equal(r3.remaining, 0);
    /* at T0 + 1000 ms the first lease has freed itself */
    info(&c, "db", T0 + 1000 * MS, &in);
    assert_int_equal(in.active, 1);
    assert_false(release(&c, "db", r1.id, T0 + 1000 * MS));
    assert_true(acquire(&c, "db", 2, 1000, T0 + 1000 * MS, &r3));
    /* renew */
    cmd_lease_id_args_t rn = { "db", 2, r2.id, 60000 };
    cmd_lease_res_t rr;
    assert_true(cmd_check_run(&c, &CMD_LEASE_RENEW, &rn, &rr, T0 + 2000 * MS, NULL));
    assert_true(rr.ok);
    assert_int_equal(rr.expires_ms, T0 / MS + 62000);
    rn.id = r1.id;   /* expired: not brought back */
    assert_true(cmd_check_run(&c, &CMD_LEASE_RENEW, &rn, &rr, T0 + 2000 * MS, NULL));
    assert_false(rr.ok);
    info(&c, "db", T0 + 2000 * MS, &in);
    assert_int_equal(in.active, 1);   /* r3 expired at T0 + 2000 */
    assert_true(release(&c, "db", r2.id, T0 + 3000 * MS));
    /* no lease left: the key is gone */
    info(&c, "db", T0 + 3000 * MS, &in);
    assert_false(in.ok);
    assert_int_equal(in.limit, 0);
    assert_int_equal(cmd_check_replays(&c), 6);   /* the refused acquire and the renew of an expired lease changed nothing */
    cmd_check_close(&c);
}

static void test_bad_input_changes_nothing(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_lease_res_t r;
    cmd_err_t err;
    cmd_lease_acquire_args_t bad[] = { { "k", 1, 0, 1000 },
                                       { "k", 1, LEASE_MAX_LIMIT + 1, 1000 },
                                       { "k", 1, 5, 0 },
                                       { "k", 1, 5, LEASE_MAX_TTL_MS + 1 } };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(cmd_check_run(&c, &CMD_LEASE_ACQUIRE, &bad[i], &r, T0, &err));
        assert_int_equal(err.code, CMD_E_BAD_REQUEST);
    }
    cmd_lease_id_args_t z = { "k", 1, 0, 1000 };
    assert_false(cmd_check_run(&c, &CMD_LEASE_RELEASE, &z, &r, T0, &err));
    z.id = 5;
    z.ttl_ms = 0;
    assert_false(cmd_check_run(&c, &CMD_LEASE_RENEW, &z, &r, T0, &err));
    assert_int_equal(c.journal.len, 0);
    /* releasing what is not there changes nothing either */
    assert_false(release(&c, "k", 77, T0));
    assert_int_equal(c.journal.len, 0);
    assert_int_equal(ks_total_keys(c.srv.ks), 0);
    cmd_check_close(&c);
}

static void test_ids(void **state)
{
    (void)state;
    uint64_t id;
    char s[17];
    cmd_lease_id_format(0x0123456789abcdefULL, s);
    assert_string_equal(s, "0123456789abcdef");
    assert_true(cmd_lease_id_parse(s, 16, &id));
    assert_true(id == 0x0123456789abcdefULL);
    assert_true(cmd_lease_id_parse("0123456789ABCDEF", 16, &id));
    assert_false(cmd_lease_id_parse("0000000000000000", 16, &id));
    assert_false(cmd_lease_id_parse("0123456789abcde", 15, &id));
    assert_false(cmd_lease_id_parse("0123456789abcdeg", 16, &id));
}

/* Random traffic on a few keys against a model of live leases: never more
 * than the limit, counts exact, and the journal replays to the same dumps. */
static void test_model_replays(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    rng_t g;
    rng_seed(&g, 7);
    enum { KEYS = 3, MAXL = 64 };
    static const char *const names[KEYS] = { "a", "b", "c" };
    struct { uint64_t id; int64_t exp; } m[KEYS][MAXL];
    int mn[KEYS] = { 0 };
    int64_t now = T0;
    for (int step = 0; step < 5000; step++) {
        int k = (int)rng_below(&g, KEYS);
        int64_t limit = 1 + (int64_t)k * 3;
        now += (int64_t)rng_below(&g, 50) * MS;
        int64_t now_ms = now / MS;
        for (int i = 0; i < mn[k];)   /* the model's expiry */
            if (m[k][i].exp <= now_ms)
                m[k][i] = m[k][--mn[k]];
            else
                i++;
        uint64_t op = rng_below(&g, 3);
        cmd_lease_res_t r;
        if (op == 0 || mn[k] == 0) {
            int64_t ttl = 1 + (int64_t)rng_below(&g, 500);
            bool ok = acquire(&c, names[k], limit, ttl, now, &r);
            assert_int_equal(ok, mn[k] < limit);
            if (ok) {
                m[k][mn[k]].id = r.id;
                m[k][mn[k]].exp = now_ms + ttl;
                mn[k]++;
            }
        } else if (op == 1) {
            int i = (int)rng_below(&g, (uint64_t)mn[k]);
            assert_true(release(&c, names[k], m[k][i].id, now));
            m[k][i] = m[k][--mn[k]];
        } else {
            int i = (int)rng_below(&g, (uint64_t)mn[k]);
            int64_t ttl = 1 + (int64_t)rng_below(&g, 500);
            cmd_lease_id_args_t rn = { names[k], 1, m[k][i].id, ttl };
            assert_true(cmd_check_run(&c, &CMD_LEASE_RENEW, &rn, &r, now, NULL));
            assert_true(r.ok);
            m[k][i].exp = now_ms + ttl;
        }
        info(&c, names[k], now, &r);
        assert_int_equal(r.active, mn[k]);
        assert_true(r.active <= limit);
    }
    assert_true(cmd_check_replays(&c) > 1000);
    cmd_check_close(&c);
}

/* The records: decoders refuse what no tally wrote. */
static void test_records(void **state)
{
    (void)state;
    cmd_lease_acquire_args_t a = { "k", 1, 3, 1000 }, b;
    wbuf_t w = WBUF_INIT;
    CMD_LEASE_ACQUIRE.encode(&a, &w);
    const char *why = NULL;
    rbuf_t in = rbuf_make(w.data, w.len);
    assert_true(CMD_LEASE_ACQUIRE.decode(&in, &b, &why));
    assert_int_equal(b.limit, 3);
    assert_int_equal(b.ttl_ms, 1000);
    for (size_t len = 0; len < w.len; len++) {
        in = rbuf_make(w.data, len);
        bool ok = CMD_LEASE_ACQUIRE.decode(&in, &b, &why) && rbuf_done(&in);
        assert_false(ok);
    }
    wbuf_free(&w);
    cmd_lease_id_args_t z = { "k", 1, 0, 0 }, y;
    CMD_LEASE_RELEASE.encode(&z, &w);
    in = rbuf_make(w.data, w.len);
    assert_false(CMD_LEASE_RELEASE.decode(&in, &y, &why));
    wbuf_free(&w);
}

/* Memory is asked for before anything is allocated: a limit whose set could
 * pass --max-value-size is refused, and an acquire that must grow the array
 * past --maxmemory (nothing evictable) is refused with nothing changed. */
static void test_memory_bounds(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_lease_res_t r;
    cmd_err_t err;
    c.srv.limits.max_value = 1000;
    cmd_lease_acquire_args_t big = { "m", 1, 1000, 1000 };   /* 16 000 bytes at most */
    assert_false(cmd_check_run(&c, &CMD_LEASE_ACQUIRE, &big, &r, T0, &err));
    assert_int_equal(err.code, CMD_E_BAD_REQUEST);
    assert_string_equal(err.field, "limit");
    c.srv.limits.max_value = 0;
    for (int i = 0; i < 4; i++)   /* the first array: 4 leases */
        assert_true(acquire(&c, "m", 100, 60000, T0, &r));
    size_t records = c.journal.len;
    ks_set_maxmemory(c.srv.ks, ks_total_memory(c.srv.ks) + 16, KS_NOEVICTION);
    cmd_lease_acquire_args_t a = { "m", 1, 100, 60000 };
    assert_false(cmd_check_run(&c, &CMD_LEASE_ACQUIRE, &a, &r, T0, &err));
    assert_int_equal(err.code, CMD_E_OUT_OF_MEMORY);
    assert_int_equal(c.journal.len, records);
    info(&c, "m", T0, &r);
    assert_int_equal(r.active, 4);
    ks_set_maxmemory(c.srv.ks, 0, KS_NOEVICTION);
    assert_true(acquire(&c, "m", 100, 60000, T0, &r));
    assert_int_equal(r.active, 5);
    assert_int_equal(cmd_check_replays(&c), 5);
    cmd_check_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_release_expire),
        cmocka_unit_test(test_bad_input_changes_nothing),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_model_replays),
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_memory_bounds),
    };
    return cmocka_run_group_tests_name("cmd_lease", tests, NULL, NULL);
}
