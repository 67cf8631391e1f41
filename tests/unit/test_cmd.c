/*
 * test_cmd.c - the command layer on its own (linked with core only, as
 * cmd-pure is): an operation run through cmd_call writes one command record,
 * that record replays to the same state on another server, records no tally
 * wrote are refused, and the table finds every operation by id and name.
 */
#include <stdlib.h>

#include "cmd/counter.h"
#include "cmd/def.h"
#include "core/counter.h"
#include "tests/unit/cmd_check.h"

#define NOW_NS 1700000000000000000LL

static wbuf_t journal;   /* the records journaled, framed */

static uint64_t keep_record(void *ud, const journal_req_t *rec)
{
    (void)ud;
    journalfmt_put_request(&journal, rec);
    return journal.len;
}

static void server(cmd_server_t *srv, bool journaled)
{
    memset(srv, 0, sizeof(*srv));
    srv->ks = ks_create(0, 42);
    assert_non_null(srv->ks);
    if (journaled)
        srv->hooks.journal = keep_record;
}

static int64_t counter_at(cmd_server_t *srv, const char *key, int64_t *expire)
{
    ks_key_t k = ks_key(srv->ks, key, strlen(key));
    ks_shard_t *sh = ks_shard_at(srv->ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(srv->ks, &k, NOW_NS / 1000000);
    int64_t v = e ? counter_value(ks_entry_value(e)) : -999;
    *expire = e ? ks_entry_expire(srv->ks, e) : 0;
    ks_shard_unlock(sh);
    return v;
}

static void test_record_replays(void **state)
{
    (void)state;
    cmd_server_t a, b;
    server(&a, true);
    server(&b, false);
    journal = (wbuf_t)WBUF_INIT;
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, &a, NOW_NS, false, 0);
    cmd_incrby_args_t args = { .key = "hits", .klen = 4, .by = 5, .has_ttl = true, .ttl_ms = 60000 };
    cmd_counter_res_t r;
    assert_true(cmd_call(&ctx, &CMD_INCRBY, &args, &r));
    assert_int_equal(r.value, 5);
    assert_int_equal(r.ttl_ms, 60000);
    args.by = -2;
    args.has_ttl = false;
    assert_true(cmd_call(&ctx, &CMD_INCRBY, &args, &r));
    assert_int_equal(r.value, 3);
    cmd_ctx_end(&ctx);

    /* an overflow changes nothing and journals nothing */
    size_t before = journal.len;
    cmd_ctx_init(&ctx, &a, NOW_NS, false, 0);
    args.by = INT64_MAX;
    assert_false(cmd_call(&ctx, &CMD_INCRBY, &args, &r));
    assert_int_equal(ctx.err.code, CMD_E_BAD_REQUEST);
    assert_string_equal(ctx.err.field, "by");
    cmd_ctx_end(&ctx);
    assert_int_equal(journal.len, before);

    /* two command records, replayed on b: the same value and expiry */
    size_t off = 0;
    int n = 0;
    while (off < journal.len) {
        journal_req_t q;
        size_t used;
        const char *why;
        assert_int_equal(journalfmt_parse_record(journal.data + off, journal.len - off, &q, &used, &why), PARSE_OK);
        assert_int_equal(q.kind, JOURNAL_REC_COMMAND);
        assert_int_equal(q.op, CMD_INCRBY.id);
        cmd_err_t err;
        assert_true(cmd_replay(&b, &q, 0, &err));
        off += used;
        n++;
    }
    assert_int_equal(n, 2);
    int64_t ea, eb;
    assert_int_equal(counter_at(&a, "hits", &ea), 3);
    assert_int_equal(counter_at(&b, "hits", &eb), 3);
    assert_int_equal(ea, eb);

    /* a read through the table */
    cmd_ctx_init(&ctx, &b, NOW_NS, false, 0);
    cmd_counter_get_args_t g = { "hits", 4 };
    assert_true(cmd_call(&ctx, &CMD_COUNTER_GET, &g, &r));
    assert_int_equal(r.value, 3);
    cmd_ctx_end(&ctx);
    wbuf_free(&journal);
    ks_free(a.ks);
    ks_free(b.ks);
}

/* The shared harness (cmd_check.h) on counters: many changes, a TTL, a
 * read, an overflow refused; replayed to the same dumps. */
static void test_counter_replays(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_counter_res_t r;
    cmd_err_t err;
    for (int i = 0; i < 50; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i % 7);
        cmd_incrby_args_t a = { .key = key, .klen = strlen(key), .by = i - 20, .has_ttl = i % 3 == 0,
                                .ttl_ms = 1000 + i };
        assert_true(cmd_check_run(&c, &CMD_INCRBY, &a, &r, CMD_CHECK_NOW_NS + i * 1000000LL, &err));
    }
    cmd_incrby_args_t big = { .key = "k1", .klen = 2, .by = INT64_MAX };
    assert_false(cmd_check_run(&c, &CMD_INCRBY, &big, &r, CMD_CHECK_NOW_NS, &err));
    assert_int_equal(err.code, CMD_E_BAD_REQUEST);
    assert_int_equal(cmd_check_replays(&c), 49);   /* i = 20 moves by 0 without a TTL: no change, no record */
    cmd_check_close(&c);
}

static void test_bad_records_refused(void **state)
{
    (void)state;
    cmd_server_t s;
    server(&s, false);
    cmd_err_t err;
    journal_req_t q = { .kind = JOURNAL_REC_COMMAND, .op = 0xfffe, .now_ns = NOW_NS, .path = "", .query = "",
                        .ctype = "" };
    assert_false(cmd_replay(&s, &q, 0, &err));
    assert_non_null(strstr(err.message, "unknown operation"));
    /* INCRBY's bytes cut short, of an unknown version, with a bad TTL flag */
    wbuf_t b = WBUF_INIT;
    cmd_incrby_args_t args = { .key = "k", .klen = 1, .by = 1 };
    CMD_INCRBY.encode(&args, &b);
    q.op = CMD_INCRBY.id;
    for (size_t cut = 0; cut < b.len; cut++) {
        q.body = b.data;
        q.body_len = cut;
        assert_false(cmd_replay(&s, &q, 0, &err));
    }
    b.data[0] = 9;
    q.body_len = b.len;
    assert_false(cmd_replay(&s, &q, 0, &err));
    b.data[0] = 1;
    b.data[1 + 4 + 1 + 8] = 2;   /* has_ttl */
    assert_false(cmd_replay(&s, &q, 0, &err));
    b.data[1 + 4 + 1 + 8] = 0;
    assert_true(cmd_replay(&s, &q, 0, &err));
    wbuf_free(&b);
    ks_free(s.ks);
}

/* A record encodes into the caller's stack storage and moves to the heap
 * only when it outgrows it, bytes intact. */
static void test_wbuf_on_spills(void **state)
{
    (void)state;
    uint8_t small[8];
    wbuf_t b = wbuf_on(small, sizeof small);
    wbuf_put_u32(&b, 0x01020304u);
    assert_ptr_equal(b.data, small);
    wbuf_put_u64(&b, 0x1122334455667788ull);
    assert_false(b.oom);
    assert_ptr_not_equal(b.data, small);
    assert_int_equal(b.len, 12);
    rbuf_t r = rbuf_make(b.data, b.len);
    assert_int_equal(rbuf_u32(&r), 0x01020304u);
    assert_true(rbuf_u64(&r) == 0x1122334455667788ull);
    wbuf_free(&b);

    wbuf_t c = wbuf_on(small, sizeof small);
    wbuf_put_u16(&c, 7);
    size_t n = 0;
    uint8_t *owned = wbuf_steal(&c, &n);
    assert_non_null(owned);
    assert_ptr_not_equal(owned, small);
    assert_int_equal(n, 2);
    assert_int_equal(owned[0], 7);
    free(owned);
    wbuf_free(&c);
}

static void test_table(void **state)
{
    (void)state;
    assert_true(cmd_def_count() >= 2);
    for (size_t i = 0; i < cmd_def_count(); i++) {
        const cmd_def_t *d = cmd_def_at(i);
        assert_ptr_equal(cmd_def_by_id(d->id), d);
        assert_ptr_equal(cmd_def_by_name(d->name, strlen(d->name)), d);
        assert_true(d->access != CMD_ACCESS_UNSET);
        assert_true(d->args_size <= CMD_ARGS_MAX && d->res_size <= CMD_RES_MAX);
        assert_true(!(d->flags & CMD_F_WRITE) || (d->encode && d->decode));
        for (size_t j = 0; j < i; j++)
            assert_int_not_equal(cmd_def_at(j)->id, d->id);
    }
    assert_ptr_equal(cmd_def_by_name("incrby", 6), &CMD_INCRBY);   /* names as Redis reads them: any case */
    assert_null(cmd_def_by_name("NOPE", 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_replays),
        cmocka_unit_test(test_counter_replays),
        cmocka_unit_test(test_bad_records_refused),
        cmocka_unit_test(test_wbuf_on_spills),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
