/*
 * test_cmd_filters.c - the options of BF.INSERT and CF.INSERT that the
 * Redis protocol's commands use (cmd + core, as cmd-pure links them):
 * RedisBloom's partial batches (a non-scaling Bloom filter keeps the items
 * before the one that did not fit; a Cuckoo filter skips the items that
 * find no room and refuses a batch once it has 32 sub-filters), and
 * CF.INSERT's nocreate and capacity.  Every change replays from its
 * records to the same dumps (cmd_check_replays); the version-2 records
 * read back what was written and refuse bytes no tally wrote; HTTP's
 * batches (no option) still write version-1 records.
 */
#include "cmd/bloom.h"
#include "cmd/cuckoo.h"
#include "tests/unit/cmd_check.h"

#define T0 CMD_CHECK_NOW_NS
#define MS 1000000LL

static void ok(cmd_check_t *c, const cmd_def_t *def, const void *args, void *res, int64_t now)
{
    cmd_err_t err;
    if (!cmd_check_run(c, def, args, res, now, &err))
        fail_msg("%s refused: %s", def->name, err.message);
}

static void refused(cmd_check_t *c, const cmd_def_t *def, const void *args, void *res, cmd_code_t code)
{
    size_t before = c->journal.len;
    cmd_err_t err;
    if (cmd_check_run(c, def, args, res, T0, &err))
        fail_msg("%s was not refused", def->name);
    assert_int_equal(err.code, code);
    assert_int_equal(c->journal.len, before);
}

/* n items "<prefix><i>" from `from`, in caller storage. */
typedef struct strs {
    char buf[256][16];
    const char *p[256];
    size_t len[256];
} strs_t;

static cmd_items_t make_items(strs_t *s, const char *prefix, size_t from, size_t n)
{
    assert_true(n <= 256);
    for (size_t i = 0; i < n; i++) {
        snprintf(s->buf[i], sizeof(s->buf[i]), "%s%zu", prefix, from + i);
        s->p[i] = s->buf[i];
        s->len[i] = strlen(s->buf[i]);
    }
    return cmd_items_of(s->p, s->len, NULL, n);
}

/* The record an operation's encoder writes for args. */
static wbuf_t record_of(const cmd_def_t *def, const void *args)
{
    wbuf_t w = WBUF_INIT;
    def->encode(args, &w);
    assert_false(w.oom);
    return w;
}

static void test_bloom_partial(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    strs_t s;
    bool added[256];
    cmd_bf_params_t ns = { 0.01, 3, 2, false };
    cmd_bf_insert_args_t a = { "ns", 2, make_items(&s, "a", 0, 2), false, ns, added, true };
    cmd_bf_res_t r;
    ok(&c, &CMD_BF_INSERT, &a, &r, T0);
    assert_int_equal(r.done, 2);
    assert_int_equal(r.stop, 0);
    assert_int_equal(r.n, 2);
    /* a1 is there, a2 fills it, a3 stops the batch: a4 is not run */
    a.items = make_items(&s, "a", 1, 4);
    ok(&c, &CMD_BF_INSERT, &a, &r, T0 + MS);
    assert_int_equal(r.done, 3);
    assert_int_equal(r.stop, BLOOM_FULL);
    assert_int_equal(r.n, 1);
    assert_false(added[0]);
    assert_true(added[1]);
    assert_false(added[2]);
    cmd_bf_key_args_t k = { "ns", 2 };
    cmd_bf_info_res_t in;
    ok(&c, &CMD_BF_CARD, &k, &in, T0);
    assert_int_equal(in.info.items, 3);
    /* nothing new fits: the first item stops it, nothing journaled */
    size_t before = c.journal.len;
    a.items = make_items(&s, "b", 0, 2);
    ok(&c, &CMD_BF_INSERT, &a, &r, T0 + 2 * MS);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.stop, BLOOM_FULL);
    assert_int_equal(c.journal.len, before);
    /* without partial (HTTP's batch) the same is refused whole */
    a.partial = false;
    refused(&c, &CMD_BF_INSERT, &a, &r, CMD_E_OUT_OF_MEMORY);
    /* a scaling filter never stops */
    cmd_bf_insert_args_t g = { "grow", 4, make_items(&s, "g", 0, 200), false, { 0.01, 10, 2, true }, NULL, true };
    ok(&c, &CMD_BF_INSERT, &g, &r, T0 + 3 * MS);
    assert_int_equal(r.done, 200);
    assert_int_equal(r.stop, 0);
    assert_true(cmd_check_replays(&c) >= 3);
    cmd_check_close(&c);
}

static void test_bloom_records(void **state)
{
    (void)state;
    strs_t s;
    cmd_bf_insert_args_t a = { "key", 3, make_items(&s, "x", 0, 2), true, { 0.01, 100, 2, true }, NULL, true };
    wbuf_t w = record_of(&CMD_BF_INSERT, &a);
    assert_int_equal(w.data[0], 2);
    assert_int_equal(w.data[1 + 4 + 3], 1 | 2 | 4);   /* after the key (u32 length + bytes) */
    cmd_bf_insert_args_t back;
    rbuf_t in = rbuf_make(w.data, w.len);
    const char *why = NULL;
    assert_true(CMD_BF_INSERT.decode(&in, &back, &why));
    assert_true(back.partial && back.nocreate && back.p.scaling);
    assert_int_equal(back.items.n, 2);
    /* version 2 without the partial flag, or with an unknown one: refused */
    for (int bad = 0; bad < 2; bad++) {
        w.data[1 + 4 + 3] = bad ? 8 | 4 : 1 | 2;
        rbuf_t in2 = rbuf_make(w.data, w.len);
        assert_false(CMD_BF_INSERT.decode(&in2, &back, &why));
    }
    wbuf_free(&w);
    a.partial = false;   /* HTTP's: version 1, as before */
    w = record_of(&CMD_BF_INSERT, &a);
    assert_int_equal(w.data[0], 1);
    w.data[1 + 4 + 3] = 4;   /* version 1 has no partial flag */
    rbuf_t in3 = rbuf_make(w.data, w.len);
    assert_false(CMD_BF_INSERT.decode(&in3, &back, &why));
    wbuf_free(&w);
}

static void test_cuckoo_options(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    strs_t s;
    bool out[256], noroom[256];
    cmd_cf_res_t r;
    /* nocreate on a missing filter */
    cmd_cf_items_args_t a = { "cf", 2, make_items(&s, "i", 0, 2), false, out, true, 0, true, noroom };
    refused(&c, &CMD_CF_INSERT, &a, &r, CMD_E_NOT_FOUND);
    /* capacity: the filter it creates (RedisBloom's 10000 -> 8192 buckets) */
    a.nocreate = false;
    a.capacity = 10000;
    ok(&c, &CMD_CF_INSERT, &a, &r, T0);
    cmd_cf_key_args_t k = { "cf", 2 };
    cmd_cf_info_res_t in;
    ok(&c, &CMD_CF_INFO, &k, &in, T0);
    assert_int_equal(in.info.buckets0, 8192);
    assert_int_equal(in.info.capacity, 10000);
    /* a filter that cannot grow: the items without room are skipped */
    cmd_cf_reserve_args_t rs = { "small", 5, { 4, 2, 20, 0, 8 } };
    ok(&c, &CMD_CF_RESERVE, &rs, &r, T0);
    cmd_cf_items_args_t f = { "small", 5, make_items(&s, "s", 0, 12), false, out, false, 0, true, noroom };
    ok(&c, &CMD_CF_INSERT, &f, &r, T0 + MS);
    size_t kept = 0, skipped = 0;
    for (size_t i = 0; i < 12; i++) {
        assert_true(out[i] != noroom[i]);
        kept += out[i];
        skipped += noroom[i];
    }
    assert_int_equal(kept, 4);   /* 2 buckets of 2 */
    assert_int_equal(skipped, 8);
    assert_int_equal(r.n, 4);
    f.partial = false;   /* HTTP's: refused whole */
    refused(&c, &CMD_CF_INSERT, &f, &r, CMD_E_OUT_OF_MEMORY);
    /* 32 sub-filters: a partial batch is refused before its items */
    cmd_cf_reserve_args_t rm = { "max", 3, { 4, 2, 20, 1, 8 } };
    ok(&c, &CMD_CF_RESERVE, &rm, &r, T0);
    cmd_cf_items_args_t m = { "max", 3, make_items(&s, "m", 0, 1), false, out, false, 0, true, noroom };
    for (size_t i = 0; i < 1000 && in.info.filters < 32; i++) {
        m.items = make_items(&s, "m", i, 1);
        ok(&c, &CMD_CF_INSERT, &m, &r, T0 + 2 * MS);
        assert_int_equal(r.n, 1);
        ok(&c, &CMD_CF_INFO, &(cmd_cf_key_args_t){ "max", 3 }, &in, T0);
    }
    assert_int_equal(in.info.filters, 32);
    m.items = make_items(&s, "z", 0, 1);
    refused(&c, &CMD_CF_INSERT, &m, &r, CMD_E_OUT_OF_MEMORY);
    assert_true(cmd_check_replays(&c) >= 4);
    cmd_check_close(&c);
}

static void test_cuckoo_records(void **state)
{
    (void)state;
    strs_t s;
    cmd_cf_items_args_t a = { "key", 3, make_items(&s, "x", 0, 2), true, NULL, true, 5000, true, NULL };
    wbuf_t w = record_of(&CMD_CF_INSERT, &a);
    assert_int_equal(w.data[0], 2);
    cmd_cf_items_args_t back;
    rbuf_t in = rbuf_make(w.data, w.len);
    const char *why = NULL;
    assert_true(CMD_CF_INSERT.decode(&in, &back, &why));
    assert_true(back.nx && back.nocreate && back.partial);
    assert_int_equal(back.capacity, 5000);
    assert_int_equal(back.items.n, 2);
    size_t flags = 1 + 4 + 3, cap = flags + 1;
    /* an unknown flag; a capacity RedisBloom refuses (below 2 buckets) */
    w.data[flags] = 8;
    rbuf_t in2 = rbuf_make(w.data, w.len);
    assert_false(CMD_CF_INSERT.decode(&in2, &back, &why));
    w.data[flags] = 7;
    memset(w.data + cap, 0, 8);
    w.data[cap] = 3;
    rbuf_t in3 = rbuf_make(w.data, w.len);
    assert_false(CMD_CF_INSERT.decode(&in3, &back, &why));
    w.data[cap] = 0x88;
    w.data[cap + 1] = 0x13;   /* 5000 again */
    for (size_t cut = 0; cut < w.len; cut++) {   /* every truncation */
        rbuf_t t = rbuf_make(w.data, cut);
        assert_false(CMD_CF_INSERT.decode(&t, &back, &why));
    }
    rbuf_t whole = rbuf_make(w.data, w.len);
    assert_true(CMD_CF_INSERT.decode(&whole, &back, &why));
    wbuf_free(&w);
    cmd_cf_items_args_t h = { "key", 3, make_items(&s, "x", 0, 2), true, NULL, false, 0, false, NULL };
    w = record_of(&CMD_CF_INSERT, &h);   /* HTTP's: version 1, as before */
    assert_int_equal(w.data[0], 1);
    wbuf_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bloom_partial),
        cmocka_unit_test(test_bloom_records),
        cmocka_unit_test(test_cuckoo_options),
        cmocka_unit_test(test_cuckoo_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
