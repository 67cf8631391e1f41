/*
 * test_cmd_keys.c - the operations of the keys group on their own (linked
 * with cmd and core only): keys (SCAN, KEY.INFO, DEL, PEXPIRE, PERSIST,
 * DUMP, RESTORE), HyperLogLog (PF*), Bloom (BF.*), Cuckoo (CF.*) and geo
 * (GEO*, ZREM).  Every write operation runs a sequence through cmd_call and
 * its records replay to the same dumps (cmd_check_replays); the decoders
 * refuse truncated and garbled records.
 */
#include <stdalign.h>
#include <stdlib.h>

#include "cmd/bloom.h"
#include "cmd/cuckoo.h"
#include "cmd/geo.h"
#include "cmd/itemlist.h"
#include "cmd/keys.h"
#include "cmd/keys_ops.h"
#include "cmd/uv.h"
#include "core/bloom.h"
#include "core/cuckoo.h"
#include "core/geohash.h"
#include "tests/unit/cmd_check.h"

#define T0 CMD_CHECK_NOW_NS
#define MS 1000000LL

/* Runs op and requires it to succeed. */
static void ok(cmd_check_t *c, const cmd_def_t *op, const void *args, void *res, int64_t now_ns)
{
    cmd_err_t err;
    if (!cmd_check_run(c, op, args, res, now_ns, &err))
        fail_msg("%s refused: %s", op->name, err.message);
}

/* Runs op and requires the refusal `code`; returns its message. */
static const char *refused(cmd_check_t *c, const cmd_def_t *op, const void *args, void *res, int64_t now_ns,
                           cmd_code_t code)
{
    static cmd_err_t err;
    if (cmd_check_run(c, op, args, res, now_ns, &err))
        fail_msg("%s was not refused", op->name);
    if (err.code != code)
        fail_msg("%s refused with code %d, not %d: %s", op->name, (int)err.code, (int)code, err.message);
    return err.message;
}

static size_t journal_len(const cmd_check_t *c) { return c->journal.len; }

/* The items of a list given as C strings. */
typedef struct strs {
    const char *p[64];
    size_t len[64];
    size_t n;
} strs_t;

static cmd_items_t items_of(strs_t *s, const char *const *v, size_t n)
{
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++) {
        s->p[i] = v[i];
        s->len[i] = strlen(v[i]);
    }
    s->n = n;
    return cmd_items_of(s->p, s->len, NULL, n);
}

/* Every truncation of a valid record is refused, and so are the garbles
 * given (offset, byte); then the record itself replays. */
static void check_decoder(const cmd_def_t *op, const void *args, const size_t *garble_at, const uint8_t *garble,
                          size_t ngarbles)
{
    wbuf_t b = WBUF_INIT;
    op->encode(args, &b);
    assert_false(b.oom);
    alignas(max_align_t) unsigned char out[CMD_ARGS_MAX];
    const char *why;
    for (size_t cut = 0; cut < b.len; cut++) {
        rbuf_t in = rbuf_make(b.data, cut);
        if (op->decode(&in, out, &why) && rbuf_done(&in))
            fail_msg("%s: a record cut at %zu of %zu bytes decodes", op->name, cut, b.len);
    }
    for (size_t g = 0; g < ngarbles; g++) {
        assert_true(garble_at[g] < b.len);
        uint8_t keep = b.data[garble_at[g]];
        b.data[garble_at[g]] = garble[g];
        rbuf_t in = rbuf_make(b.data, b.len);
        if (op->decode(&in, out, &why) && rbuf_done(&in))
            fail_msg("%s: byte %zu set to %u decodes", op->name, garble_at[g], garble[g]);
        b.data[garble_at[g]] = keep;
    }
    /* trailing bytes are refused too */
    wbuf_put_u8(&b, 0);
    rbuf_t in = rbuf_make(b.data, b.len);
    assert_false(op->decode(&in, out, &why) && rbuf_done(&in));
    in = rbuf_make(b.data, b.len - 1);
    assert_true(op->decode(&in, out, &why) && rbuf_done(&in));
    wbuf_free(&b);
}

/* The byte offset of what follows a record's version and key. */
static size_t after_key(size_t klen) { return 1 + 4 + klen; }

/* A Bloom filter at key: a value for the tests of other families. */
static void reserve_bloom(cmd_check_t *c, const char *key, int64_t now)
{
    cmd_bf_reserve_args_t a = { key, strlen(key), { 0.01, 100, 2, true } };
    cmd_bf_res_t r;
    ok(c, &CMD_BF_RESERVE, &a, &r, now);
}

/* ------------------------------------------------------------------------ */
/* keys                                                                     */
/* ------------------------------------------------------------------------ */

static void test_keys_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int64_t t = T0;
    reserve_bloom(&c, "a", t);
    reserve_bloom(&c, "b", t);
    reserve_bloom(&c, "gone", t);

    cmd_keys_res_t kr;
    cmd_pexpire_args_t pe = { "a", 1, 60000, 0 };
    ok(&c, &CMD_PEXPIRE, &pe, &kr, t += MS);
    assert_int_equal(kr.ttl_ms, 60000);
    cmd_pexpire_args_t pe_missing = { "nope", 4, 1000, 0 };
    refused(&c, &CMD_PEXPIRE, &pe_missing, &kr, t, CMD_E_NOT_FOUND);
    cmd_pexpire_args_t pe_bad = { "a", 1, 0, 0 };
    refused(&c, &CMD_PEXPIRE, &pe_bad, &kr, t, CMD_E_BAD_REQUEST);

    cmd_key_info_res_t in;
    cmd_key_args_t ka = { "a", 1 };
    ok(&c, &CMD_KEY_INFO, &ka, &in, t += MS);
    assert_string_equal(in.type, "bloom");
    assert_int_equal(in.ttl_ms, 60000 - 1);   /* set at T0 + 1 ms, read at T0 + 2 ms */
    assert_true(in.memory_bytes > 0);

    /* PERSIST: journaled only when an expiry was removed */
    size_t before = journal_len(&c);
    cmd_key_args_t kb = { "b", 1 };
    ok(&c, &CMD_PERSIST, &kb, &kr, t);
    assert_false(kr.done);
    assert_int_equal(journal_len(&c), before);
    pe.key = "b";
    ok(&c, &CMD_PEXPIRE, &pe, &kr, t);
    ok(&c, &CMD_PERSIST, &kb, &kr, t += MS);
    assert_true(kr.done);

    /* DUMP, then RESTORE elsewhere with and without a TTL of its own */
    cmd_dump_res_t d;
    ok(&c, &CMD_DUMP, &ka, &d, t += MS);
    assert_non_null(d.data);
    cmd_restore_args_t ra = { "copy", 4, false, false, 0, d.data, d.len };
    cmd_restore_res_t rr;
    ok(&c, &CMD_RESTORE, &ra, &rr, t += MS);
    assert_string_equal(rr.type, "bloom");
    assert_int_equal(rr.ttl_ms, 60000 - 3);   /* the dump's remaining TTL, dumped at T0 + 4 ms */
    assert_false(rr.replaced);
    refused(&c, &CMD_RESTORE, &ra, &rr, t, CMD_E_EXISTS);
    ra.replace = true;
    ra.has_ttl = true;
    ra.ttl_ms = 0;
    ok(&c, &CMD_RESTORE, &ra, &rr, t += MS);
    assert_int_equal(rr.ttl_ms, -1);
    assert_true(rr.replaced);
    ra.key = "b";   /* over a key of the same type, with a TTL */
    ra.klen = 1;
    ra.ttl_ms = 5000;
    ok(&c, &CMD_RESTORE, &ra, &rr, t += MS);
    assert_int_equal(rr.ttl_ms, 5000);
    /* a damaged dump restores nothing and journals nothing */
    before = journal_len(&c);
    d.data[d.len / 2] ^= 1;
    ra.key = "fresh";
    ra.klen = 5;
    assert_non_null(strstr(refused(&c, &CMD_RESTORE, &ra, &rr, t, CMD_E_BAD_REQUEST), "not a valid dump"));
    assert_int_equal(journal_len(&c), before);
    free(d.data);

    /* DEL with a digest: refused once the key changed, done while it holds */
    ok(&c, &CMD_DUMP, &kb, &d, t += MS);
    uint64_t digest = d.digest;
    free(d.data);
    cmd_del_args_t del = { "b", 1, true, digest ^ 1 };
    refused(&c, &CMD_DEL, &del, &kr, t, CMD_E_PRECONDITION_FAILED);
    del.digest = digest;
    ok(&c, &CMD_DEL, &del, &kr, t += MS);
    assert_true(kr.done);
    cmd_del_args_t plain = { "gone", 4, false, 0 };
    ok(&c, &CMD_DEL, &plain, &kr, t += MS);
    assert_true(kr.done);
    before = journal_len(&c);
    ok(&c, &CMD_DEL, &plain, &kr, t += MS);   /* nothing to delete: no record */
    assert_false(kr.done);
    assert_int_equal(journal_len(&c), before);

    assert_int_equal(cmd_check_replays(&c), 11);
    cmd_check_close(&c);
}

static void test_scan_pages(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    enum { N = 300 };
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof(key), "%s%d", i % 3 ? "k:" : "other:", i);
        reserve_bloom(&c, key, T0);
    }
    bool seen[N] = { false };
    cmd_scan_args_t a = { .prefix = "k:", .plen = 2, .limit = 7, .slot_lo = -1, .slot_hi = -1 };
    int pages = 0;
    for (;;) {
        cmd_scan_res_t r;
        ok(&c, &CMD_SCAN, &a, &r, T0);
        assert_true(r.n <= a.limit);
        for (size_t i = 0; i < r.n; i++) {
            assert_true(r.keys[i].klen > 2 && memcmp(r.keys[i].key, "k:", 2) == 0);
            assert_string_equal(r.keys[i].type, "bloom");
            assert_int_equal(r.keys[i].ttl_ms, -1);
            char num[16];
            snprintf(num, sizeof(num), "%.*s", (int)r.keys[i].klen - 2, r.keys[i].key + 2);
            seen[atoi(num)] = true;
        }
        bool done = r.done;
        a.shard = r.shard;
        a.pos = r.pos;
        cmd_scan_res_free(&r);
        pages++;
        if (done)
            break;
    }
    assert_true(pages > N / 3 / 7);
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], i % 3 != 0);
    cmd_scan_args_t bad = { .prefix = "", .shard = 99, .limit = 1, .slot_lo = -1, .slot_hi = -1 };
    cmd_scan_res_t r;
    refused(&c, &CMD_SCAN, &bad, &r, T0, CMD_E_BAD_REQUEST);
    cmd_check_close(&c);
}

/* PEXPIRE's conditions (Redis 7's EXPIRE NX XX GT LT): checked under the
 * key's lock, journaled only when they hold, replayed alike; with
 * CMD_EXPIRE_PAST a time not after now deletes the key. */
static void test_expire_conditions(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int64_t t = T0;
    reserve_bloom(&c, "e", t);
    cmd_keys_res_t kr;
    cmd_pexpire_args_t xx = { "e", 1, 5000, CMD_EXPIRE_XX };
    size_t before = journal_len(&c);
    ok(&c, &CMD_PEXPIRE, &xx, &kr, t += MS);   /* no expiry yet */
    assert_false(kr.done);
    assert_int_equal(journal_len(&c), before);
    cmd_pexpire_args_t gt = { "e", 1, 5000, CMD_EXPIRE_GT };
    ok(&c, &CMD_PEXPIRE, &gt, &kr, t += MS);   /* none counts as never: not later */
    assert_false(kr.done);
    cmd_pexpire_args_t nx = { "e", 1, 5000, CMD_EXPIRE_NX };
    ok(&c, &CMD_PEXPIRE, &nx, &kr, t += MS);
    assert_true(kr.done);
    ok(&c, &CMD_PEXPIRE, &nx, &kr, t += MS);
    assert_false(kr.done);
    gt.ttl_ms = 9000;
    ok(&c, &CMD_PEXPIRE, &gt, &kr, t += MS);
    assert_true(kr.done);
    cmd_pexpire_args_t lt = { "e", 1, 20000, CMD_EXPIRE_LT | CMD_EXPIRE_XX };
    ok(&c, &CMD_PEXPIRE, &lt, &kr, t += MS);   /* later than the current one */
    assert_false(kr.done);
    lt.ttl_ms = 100;
    ok(&c, &CMD_PEXPIRE, &lt, &kr, t += MS);
    assert_true(kr.done);
    cmd_key_info_res_t in;
    cmd_key_args_t ka = { "e", 1 };
    ok(&c, &CMD_KEY_INFO, &ka, &in, t += MS);
    assert_int_equal(in.ttl_ms, 99);
    assert_int_equal(in.expire_ms, t / MS - 1 + 100);
    cmd_pexpire_args_t past = { "e", 1, -1, CMD_EXPIRE_GT | CMD_EXPIRE_PAST };
    ok(&c, &CMD_PEXPIRE, &past, &kr, t += MS);   /* not later: kept */
    assert_false(kr.done);
    past.cond = CMD_EXPIRE_LT | CMD_EXPIRE_PAST;
    ok(&c, &CMD_PEXPIRE, &past, &kr, t += MS);   /* earlier, and past: deleted */
    assert_true(kr.done);
    refused(&c, &CMD_KEY_INFO, &ka, &in, t += MS, CMD_E_NOT_FOUND);
    cmd_pexpire_args_t both = { "e", 1, 100, CMD_EXPIRE_NX | CMD_EXPIRE_GT };
    refused(&c, &CMD_PEXPIRE, &both, &kr, t, CMD_E_BAD_REQUEST);
    cmd_pexpire_args_t neg = { "e", 1, -1, CMD_EXPIRE_LT };   /* a past time without PAST */
    refused(&c, &CMD_PEXPIRE, &neg, &kr, t, CMD_E_BAD_REQUEST);
    assert_int_equal(cmd_check_replays(&c), 5);   /* the reserve and the four changes */
    cmd_check_close(&c);
}

/* Runs def under a transaction's hold (cmd/keys.h): true, or false with
 * *code the refusal. */
static bool run_held(cmd_check_t *c, const cmd_hold_t *hold, const cmd_def_t *def, const void *args, void *res,
                     int64_t now, cmd_code_t *code)
{
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, &c->srv, now, false, 0);
    ctx.hold = hold;
    bool ok = cmd_call(&ctx, def, args, res);
    if (!ok)
        *code = ctx.err.code;
    cmd_ctx_end(&ctx);
    return ok;
}

/* A hold (MULTI/EXEC's): the operations on its keys run without locking
 * again, each journaled as it runs; a key in a shard it does not hold is
 * refused (nothing locked out of order); with every shard held, SCAN walks
 * them all; the shards are free again after cmd_hold_end. */
static void test_hold(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int64_t t = T0;
    /* two keys in different shards */
    char in[16] = "h0", out[16] = "h1";
    unsigned s_in = ks_key(c.srv.ks, in, 2).shard;
    for (int i = 1; i < 100 && ks_key(c.srv.ks, out, strlen(out)).shard == s_in; i++)
        snprintf(out, sizeof(out), "h%d", i);
    assert_int_not_equal(ks_key(c.srv.ks, out, strlen(out)).shard, s_in);
    reserve_bloom(&c, in, t);
    reserve_bloom(&c, out, t);
    ks_key_t k = ks_key(c.srv.ks, in, 2);
    cmd_hold_t hold;
    assert_true(cmd_hold_begin(&hold, &c.srv, &k, 1, false));
    cmd_keys_res_t kr;
    cmd_code_t code = CMD_E_INTERNAL;
    size_t before = journal_len(&c);
    cmd_pexpire_args_t pe = { in, 2, 60000, CMD_EXPIRE_NX };
    assert_true(run_held(&c, &hold, &CMD_PEXPIRE, &pe, &kr, t += MS, &code));
    assert_true(kr.done);
    assert_true(journal_len(&c) > before);   /* journaled as it ran, the hold still on */
    cmd_key_info_res_t info;
    cmd_key_args_t ka = { in, 2 };
    assert_true(run_held(&c, &hold, &CMD_KEY_INFO, &ka, &info, t += MS, &code));
    assert_int_equal(info.ttl_ms, 60000 - 1);
    cmd_key_args_t ko = { out, strlen(out) };
    assert_false(run_held(&c, &hold, &CMD_KEY_INFO, &ko, &info, t, &code));
    assert_int_equal(code, CMD_E_INTERNAL);
    cmd_hold_end(&hold);
    ok(&c, &CMD_KEY_INFO, &ko, &info, t);   /* unlocked again */
    /* every shard: SCAN walks them under the hold */
    assert_true(cmd_hold_begin(&hold, &c.srv, NULL, 0, true));
    cmd_scan_args_t sa = { .prefix = "h", .plen = 1, .limit = 100, .slot_lo = -1, .slot_hi = -1 };
    cmd_scan_res_t sr;
    size_t n = 0;
    do {
        assert_true(run_held(&c, &hold, &CMD_SCAN, &sa, &sr, t, &code));
        n += sr.n;
        sa.shard = sr.shard;
        sa.pos = sr.pos;
        cmd_scan_res_free(&sr);
    } while (!sr.done);
    assert_int_equal(n, 2);
    assert_true(run_held(&c, &hold, &CMD_KEY_INFO, &ko, &info, t, &code));
    cmd_hold_end(&hold);
    assert_int_equal(cmd_check_replays(&c), 3);
    cmd_check_close(&c);
}

static void test_keys_decoders(void **state)
{
    (void)state;
    cmd_del_args_t del = { "key", 3, true, 42 };
    check_decoder(&CMD_DEL, &del, (size_t[]){ 0, 1, after_key(3) }, (uint8_t[]){ 2, 0, 2 }, 3);
    cmd_del_args_t del0 = { "key", 3, false, 0 };
    check_decoder(&CMD_DEL, &del0, (size_t[]){ after_key(3) + 1 }, (uint8_t[]){ 7 }, 1);   /* a digest without its flag */
    cmd_pexpire_args_t pe = { "key", 3, 1000, 0 };
    check_decoder(&CMD_PEXPIRE, &pe, (size_t[]){ 0, after_key(3) + 7 }, (uint8_t[]){ 0, 0x80 }, 2);
    cmd_pexpire_args_t pc = { "key", 3, -5, CMD_EXPIRE_LT | CMD_EXPIRE_PAST };   /* version 2: conditions */
    check_decoder(&CMD_PEXPIRE, &pc, (size_t[]){ 0, after_key(3) + 8, after_key(3) + 8, after_key(3) + 8 },
                  (uint8_t[]){ 3, 0, CMD_EXPIRE_NX | CMD_EXPIRE_GT, CMD_EXPIRE_LT }, 4);
    cmd_key_args_t k = { "key", 3 };
    check_decoder(&CMD_PERSIST, &k, (size_t[]){ 0 }, (uint8_t[]){ 3 }, 1);
    static const uint8_t dump[] = "not a dump but bytes";
    cmd_restore_args_t ra = { "key", 3, true, true, 5000, dump, sizeof dump };
    check_decoder(&CMD_RESTORE, &ra, (size_t[]){ 0, after_key(3), after_key(3) + 8 }, (uint8_t[]){ 2, 4, 0x80 }, 3);
    cmd_restore_args_t rb = { "key", 3, false, false, 0, dump, sizeof dump };
    check_decoder(&CMD_RESTORE, &rb, (size_t[]){ after_key(3) + 1 }, (uint8_t[]){ 1 }, 1);   /* a TTL without its flag */
}

/* ------------------------------------------------------------------------ */
/* HyperLogLog                                                              */
/* ------------------------------------------------------------------------ */

static void test_uv_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int64_t t = T0;
    strs_t s;
    cmd_uv_res_t r;
    static const char *const v[] = { "a", "b", "c", "d", "e" };
    cmd_pfadd_args_t add = { "u1", 2, items_of(&s, v, 3) };
    ok(&c, &CMD_PFADD, &add, &r, t += MS);
    assert_true(r.updated);
    size_t before = journal_len(&c);
    ok(&c, &CMD_PFADD, &add, &r, t += MS);   /* nothing new: no change, no record */
    assert_false(r.updated);
    assert_int_equal(journal_len(&c), before);
    cmd_pfadd_args_t add2 = { "u2", 2, items_of(&s, v + 2, 3) };
    ok(&c, &CMD_PFADD, &add2, &r, t += MS);
    cmd_pfadd_args_t empty = { "e", 1, items_of(&s, v, 0) };
    ok(&c, &CMD_PFADD, &empty, &r, t += MS);   /* PFADD key: an empty HyperLogLog */
    assert_true(r.updated);
    reserve_bloom(&c, "bf", t);
    cmd_pfadd_args_t wrong = { "bf", 2, items_of(&s, v, 1) };
    refused(&c, &CMD_PFADD, &wrong, &r, t, CMD_E_WRONGTYPE);

    /* PFMERGE with a source named twice and a missing one */
    cmd_pfmerge_args_t m = { "m", 1, items_of(&s, (const char *const[]){ "u1", "u2", "u1", "none" }, 4) };
    ok(&c, &CMD_PFMERGE, &m, &r, t += MS);
    assert_int_equal(r.count, 5);
    ok(&c, &CMD_PFMERGE, &m, &r, t += MS);   /* into the existing key */
    assert_int_equal(r.count, 5);
    cmd_pfmerge_args_t mw = { "m", 1, items_of(&s, (const char *const[]){ "bf" }, 1) };
    assert_non_null(strstr(refused(&c, &CMD_PFMERGE, &mw, &r, t, CMD_E_WRONGTYPE), "bloom"));

    /* HLL.EXPORT's bytes imported at a new key and over another */
    cmd_hll_key_args_t ek = { "u1", 2 };
    ok(&c, &CMD_HLL_EXPORT, &ek, &r, t);
    assert_non_null(r.data);
    cmd_hll_import_args_t im = { "imp", 3, r.data, r.len };
    cmd_uv_res_t ir;
    ok(&c, &CMD_HLL_IMPORT, &im, &ir, t += MS);
    assert_int_equal(ir.count, 3);
    assert_true(ir.sparse);
    assert_false(ir.replaced);
    im.key = "u2";
    im.klen = 2;
    ok(&c, &CMD_HLL_IMPORT, &im, &ir, t += MS);
    assert_true(ir.replaced);
    before = journal_len(&c);
    r.data[0] ^= 0xff;
    assert_non_null(strstr(refused(&c, &CMD_HLL_IMPORT, &im, &ir, t, CMD_E_BAD_REQUEST), "not a valid Redis"));
    assert_int_equal(journal_len(&c), before);
    free(r.data);
    ek.key = "none";
    ek.klen = 4;
    refused(&c, &CMD_HLL_EXPORT, &ek, &r, t, CMD_E_NOT_FOUND);
    assert_int_equal(cmd_check_replays(&c), 8);

    /* counts (after the replay check: a count caches the cardinality in the
     * value, which is not journaled) */
    cmd_pfcount_args_t cnt = { "u1", 2, items_of(&s, v, 0) };
    ok(&c, &CMD_PFCOUNT, &cnt, &r, t);
    assert_int_equal(r.count, 3);
    cnt.unions = items_of(&s, (const char *const[]){ "u1", "e", "none", "imp" }, 4);
    ok(&c, &CMD_PFCOUNT, &cnt, &r, t);
    assert_int_equal(r.count, 3);
    cnt.key = "m";
    cnt.klen = 1;
    ok(&c, &CMD_PFCOUNT, &cnt, &r, t);
    assert_int_equal(r.count, 5);
    cnt.unions = items_of(&s, (const char *const[]){ "bf" }, 1);
    refused(&c, &CMD_PFCOUNT, &cnt, &r, t, CMD_E_WRONGTYPE);
    cnt.key = "none";
    cnt.klen = 4;
    cnt.unions.n = 0;
    ok(&c, &CMD_PFCOUNT, &cnt, &r, t);
    assert_int_equal(r.count, 0);
    cmd_check_close(&c);
}

static void test_uv_decoders(void **state)
{
    (void)state;
    strs_t s;
    size_t p = after_key(3);
    cmd_pfadd_args_t add = { "key", 3, items_of(&s, (const char *const[]){ "x", "yz" }, 2) };
    /* a count past the items; an item's length past the record */
    check_decoder(&CMD_PFADD, &add, (size_t[]){ 0, p, p + 4 }, (uint8_t[]){ 2, 3, 7 }, 3);
    cmd_pfadd_args_t none = { "key", 3, items_of(&s, (const char *const[]){ "x" }, 0) };
    check_decoder(&CMD_PFADD, &none, (size_t[]){ 1 }, (uint8_t[]){ 0 }, 1);
    cmd_pfmerge_args_t m = { "key", 3, items_of(&s, (const char *const[]){ "k1", "k2" }, 2) };
    /* no sources; an empty source key; a source key that is not UTF-8 */
    check_decoder(&CMD_PFMERGE, &m, (size_t[]){ p, p + 4, p + 5 }, (uint8_t[]){ 0, 0, 0xff }, 3);
    static const uint8_t bytes[] = "HYLL and more";
    cmd_hll_import_args_t im = { "key", 3, bytes, sizeof bytes };
    check_decoder(&CMD_HLL_IMPORT, &im, (size_t[]){ 0, p }, (uint8_t[]){ 9, 0xff }, 2);
}

/* ------------------------------------------------------------------------ */
/* Bloom                                                                    */
/* ------------------------------------------------------------------------ */

/* Copies the filter at `from` to `to` by SCANDUMP / LOADCHUNK. */
static void copy_filter(cmd_check_t *c, const cmd_def_t *dump, const cmd_def_t *load, const char *from,
                        const char *to, int64_t now)
{
    cmd_scandump_args_t d = { from, strlen(from), 0 };
    for (;;) {
        cmd_scandump_res_t r;
        ok(c, dump, &d, &r, now);
        if (r.cursor == 0) {
            assert_int_equal(r.len, 0);
            free(r.data);
            return;
        }
        cmd_loadchunk_args_t l = { to, strlen(to), r.cursor, r.data, r.len };
        cmd_loadchunk_res_t lr;
        ok(c, load, &l, &lr, now);
        assert_int_equal(lr.loaded, r.len);
        free(r.data);
        d.cursor = r.cursor;
    }
}

static void test_bloom_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int64_t t = T0;
    strs_t s;
    bool out[64];
    cmd_bf_res_t r;
    reserve_bloom(&c, "bf", t);
    cmd_bf_reserve_args_t again = { "bf", 2, { 0.01, 100, 2, true } };
    refused(&c, &CMD_BF_RESERVE, &again, &r, t, CMD_E_EXISTS);

    static const char *const v[] = { "a", "b", "c", "a" };
    cmd_bf_insert_args_t ins = { "bf", 2, items_of(&s, v, 4), false, { 0.01, 100, 2, true }, out, false };
    ok(&c, &CMD_BF_INSERT, &ins, &r, t += MS);
    assert_int_equal(r.n, 3);
    assert_true(out[0] && out[1] && out[2] && !out[3]);
    /* an insert that creates, with options; nocreate on a missing key */
    cmd_bf_insert_args_t made = { "small", 5, items_of(&s, v, 3), false, { 0.001, 2, 1, true }, NULL, false };
    ok(&c, &CMD_BF_INSERT, &made, &r, t += MS);
    cmd_bf_insert_args_t nocreate = { "none", 4, items_of(&s, v, 1), true, { 0.01, 100, 2, true }, NULL, false };
    refused(&c, &CMD_BF_INSERT, &nocreate, &r, t, CMD_E_NOT_FOUND);
    /* a non-scaling filter that fills part-way: all or nothing */
    cmd_bf_reserve_args_t tiny = { "tiny", 4, { 0.01, 2, 0, false } };
    ok(&c, &CMD_BF_RESERVE, &tiny, &r, t += MS);
    static const char *const many[] = { "1", "2", "3", "4", "5", "6", "7", "8" };
    size_t before = journal_len(&c);
    cmd_bf_insert_args_t full = { "tiny", 4, items_of(&s, many, 8), false, { 0.01, 100, 2, true }, out, false };
    assert_non_null(strstr(refused(&c, &CMD_BF_INSERT, &full, &r, t, CMD_E_OUT_OF_MEMORY), "non scaling"));
    assert_int_equal(journal_len(&c), before);

    cmd_bf_exists_args_t ex = { "bf", 2, items_of(&s, (const char *const[]){ "a", "zz" }, 2), out };
    ok(&c, &CMD_BF_MEXISTS, &ex, &r, t);
    assert_true(out[0] && !out[1]);
    ex.key = "missing";
    ex.klen = 7;
    ok(&c, &CMD_BF_EXISTS, &ex, &r, t);
    assert_false(out[0] || out[1]);
    cmd_bf_key_args_t k = { "bf", 2 };
    cmd_bf_info_res_t info;
    ok(&c, &CMD_BF_INFO, &k, &info, t);
    assert_int_equal(info.info.items, 3);
    ok(&c, &CMD_BF_CARD, &k, &info, t);
    assert_int_equal(info.info.items, 3);
    k.key = "missing";
    k.klen = 7;
    refused(&c, &CMD_BF_INFO, &k, &info, t, CMD_E_NOT_FOUND);
    ok(&c, &CMD_BF_CARD, &k, &info, t);
    assert_int_equal(info.info.items, 0);

    copy_filter(&c, &CMD_BF_SCANDUMP, &CMD_BF_LOADCHUNK, "small", "copy", t += MS);
    cmd_loadchunk_args_t orphan = { "orphan", 6, 5, (const uint8_t *)"xx", 2 };
    cmd_loadchunk_res_t lr;
    refused(&c, &CMD_BF_LOADCHUNK, &orphan, &lr, t, CMD_E_NOT_FOUND);
    orphan.cursor = 1;
    refused(&c, &CMD_BF_LOADCHUNK, &orphan, &lr, t, CMD_E_BAD_REQUEST);
    cmd_check_replays(&c);
    cmd_check_close(&c);
}

static void test_bloom_decoders(void **state)
{
    (void)state;
    strs_t s;
    cmd_bf_reserve_args_t res = { "key", 3, { 0.01, 100, 2, true } };
    size_t p = after_key(3);
    /* version 0; scaling 2; an error rate of NaN, then of 1e300 or so (the double's top byte); capacity 2^56 */
    check_decoder(&CMD_BF_RESERVE, &res, (size_t[]){ 0, p, p + 8, p + 8, p + 16 }, (uint8_t[]){ 0, 2, 0xff, 0x7f, 1 },
                  5);
    cmd_bf_insert_args_t ins = { "key", 3, items_of(&s, (const char *const[]){ "a", "bc" }, 2), true,
                                 { 0.01, 100, 2, true }, NULL, false };
    /* flags 4; the item count 0; an item's length past the record */
    size_t items = p + 1 + 8 + 8 + 4;
    check_decoder(&CMD_BF_INSERT, &ins, (size_t[]){ p, items, items + 4 }, (uint8_t[]){ 4, 0, 9 }, 3);
    cmd_loadchunk_args_t l = { "key", 3, 7, (const uint8_t *)"chunk", 5 };
    /* a cursor of 0, then a negative one */
    check_decoder(&CMD_BF_LOADCHUNK, &l, (size_t[]){ p, p + 7 }, (uint8_t[]){ 0, 0x80 }, 2);
}

/* ------------------------------------------------------------------------ */
/* Cuckoo                                                                   */
/* ------------------------------------------------------------------------ */

static void test_cuckoo_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int64_t t = T0;
    strs_t s;
    bool out[64];
    cmd_cf_res_t r;
    cmd_cf_reserve_args_t res = { "cf", 2, { 64, 2, 20, 1, 8 } };
    ok(&c, &CMD_CF_RESERVE, &res, &r, t);
    refused(&c, &CMD_CF_RESERVE, &res, &r, t, CMD_E_EXISTS);
    static const char *const v[] = { "a", "b", "a", "c" };
    cmd_cf_items_args_t ins = { "cf", 2, items_of(&s, v, 4), false, out, false, 0, false, NULL };
    ok(&c, &CMD_CF_INSERT, &ins, &r, t += MS);
    assert_int_equal(r.n, 4);   /* duplicates allowed */
    ins.nx = true;
    ok(&c, &CMD_CF_INSERT, &ins, &r, t += MS);
    assert_int_equal(r.n, 0);
    /* an insert that creates with the defaults; many items grow it */
    static const char *const many[] = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13",
                                        "14", "15", "16", "17", "18", "19", "20", "21", "22", "23", "24", "25",
                                        "26", "27", "28", "29", "30", "31", "32", "33", "34", "35", "36", "37",
                                        "38", "39" };
    cmd_cf_items_args_t made = { "made", 4, items_of(&s, many, 40), false, NULL, false, 0, false, NULL };
    ok(&c, &CMD_CF_INSERT, &made, &r, t += MS);
    for (int i = 0; i < 5; i++) {
        made.key = "cf";
        made.klen = 2;
        ok(&c, &CMD_CF_INSERT, &made, &r, t += MS);
    }
    cmd_cf_count_args_t cnt = { "cf", 2, "a", 1 };
    ok(&c, &CMD_CF_COUNT, &cnt, &r, t);
    assert_true(r.n >= 2);
    cmd_cf_items_args_t del = { "cf", 2, items_of(&s, (const char *const[]){ "a", "zz" }, 2), false, out, false, 0, false, NULL };
    ok(&c, &CMD_CF_DEL, &del, &r, t += MS);
    assert_true(out[0] && !out[1]);
    del.key = "missing";
    del.klen = 7;
    refused(&c, &CMD_CF_DEL, &del, &r, t, CMD_E_NOT_FOUND);
    cmd_cf_items_args_t ex = { "cf", 2, items_of(&s, (const char *const[]){ "a", "b", "zz" }, 3), false, out, false, 0, false, NULL };
    ok(&c, &CMD_CF_MEXISTS, &ex, &r, t);
    assert_true(out[0] && out[1] && !out[2]);
    cmd_cf_key_args_t k = { "cf", 2 };
    cmd_cf_info_res_t before, after;
    ok(&c, &CMD_CF_INFO, &k, &before, t);
    assert_true(before.info.filters > 1);
    /* remove most of what grew it, then compact */
    cmd_cf_items_args_t drop = { "cf", 2, items_of(&s, many, 40), false, NULL, false, 0, false, NULL };
    for (int i = 0; i < 5; i++)
        ok(&c, &CMD_CF_DEL, &drop, &r, t += MS);
    ok(&c, &CMD_CF_COMPACT, &k, &after, t += MS);
    assert_true(after.info.items < before.info.items);
    copy_filter(&c, &CMD_CF_SCANDUMP, &CMD_CF_LOADCHUNK, "cf", "copy", t += MS);
    cmd_check_replays(&c);
    cmd_check_close(&c);
}

static void test_cuckoo_decoders(void **state)
{
    (void)state;
    strs_t s;
    size_t p = after_key(3);
    cmd_cf_reserve_args_t res = { "key", 3, { 64, 2, 20, 1, 8 } };
    /* a capacity under 2 x bucket_size; bucket_size 0; fingerprint bits 9 */
    check_decoder(&CMD_CF_RESERVE, &res, (size_t[]){ p, p + 8, p + 20 }, (uint8_t[]){ 1, 0, 9 }, 3);
    cmd_cf_items_args_t ins = { "key", 3, items_of(&s, (const char *const[]){ "a", "" }, 2), true, NULL, false, 0, false, NULL };
    check_decoder(&CMD_CF_INSERT, &ins, (size_t[]){ p, p + 1 }, (uint8_t[]){ 2, 0 }, 2);
    check_decoder(&CMD_CF_DEL, &ins, (size_t[]){ p + 4, p + 6 }, (uint8_t[]){ 0x80, 5 }, 2);
    cmd_cf_key_args_t k = { "key", 3 };
    check_decoder(&CMD_CF_COMPACT, &k, (size_t[]){ 1 }, (uint8_t[]){ 0 }, 1);   /* an empty key */
}

/* ------------------------------------------------------------------------ */
/* geo                                                                      */
/* ------------------------------------------------------------------------ */

/* GEOADD of members at positions (lon, lat pairs). */
static bool geoadd(cmd_check_t *c, const char *key, const char *const *m, const double *pos, size_t n, unsigned flags,
                   int64_t now, cmd_geo_res_t *r, cmd_err_t *err)
{
    size_t len[16];
    uint64_t score[16];
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++) {
        len[i] = strlen(m[i]);
        score[i] = geohash_score(pos[2 * i], pos[2 * i + 1]);
    }
    cmd_geoadd_args_t a = { key, strlen(key), cmd_items_of(m, len, score, n), flags & 1, flags & 2, flags & 4 };
    return cmd_check_run(c, &CMD_GEOADD, &a, r, now, err);
}

static void test_geo_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int64_t t = T0;
    strs_t s;
    cmd_geo_res_t r;
    cmd_err_t err;
    static const char *const m[] = { "Palermo", "Catania", "Paris", "Rome" };
    static const double pos[] = { 13.361389, 38.115556, 15.087269, 37.502669, 2.3522, 48.8566, 12.4964, 41.9028 };
    assert_true(geoadd(&c, "g", m, pos, 4, 0, t += MS, &r, &err));
    assert_int_equal(r.n, 4);
    size_t before = journal_len(&c);
    assert_true(geoadd(&c, "none", m, pos, 2, 2, t, &r, &err));   /* XX on a missing key: no key, no record */
    assert_int_equal(r.n, 0);
    assert_int_equal(journal_len(&c), before);
    static const double moved[] = { 13.5, 38.2, 15.087269, 37.502669 };
    assert_true(geoadd(&c, "g", m, moved, 2, 4, t += MS, &r, &err));   /* CH: one moved */
    assert_int_equal(r.n, 1);
    assert_true(geoadd(&c, "g", (const char *const[]){ "Palermo", "Nice" }, (const double[]){ 1, 1, 7.26, 43.7 }, 2,
                       1, t += MS, &r, &err));   /* NX: only the new one */
    assert_int_equal(r.n, 1);
    reserve_bloom(&c, "bf", t);
    assert_false(geoadd(&c, "bf", m, pos, 1, 0, t, &r, &err));
    assert_int_equal(err.code, CMD_E_WRONGTYPE);

    /* reads */
    uint64_t scores[3];
    bool found[3];
    cmd_geo_members_args_t pm = { "g", 1, items_of(&s, (const char *const[]){ "Paris", "nope", "Nice" }, 3), scores,
                                  found };
    ok(&c, &CMD_GEOPOS, &pm, &r, t);
    assert_true(found[0] && !found[1] && found[2]);
    assert_true(scores[0] == geohash_score(2.3522, 48.8566));
    ok(&c, &CMD_GEOHASH, &pm, &r, t);
    assert_int_equal(r.n, 2);
    cmd_geodist_args_t d = { "g", 1, "Catania", "Rome", 7, 4, GEO_UNIT_KM };
    ok(&c, &CMD_GEODIST, &d, &r, t);
    assert_true(r.found && r.distance > 500 && r.distance < 600);
    d.to = "nope";
    d.tlen = 4;
    ok(&c, &CMD_GEODIST, &d, &r, t);
    assert_false(r.found);

    /* GEOSEARCH around a member, nearest first, then around a position */
    cmd_geosearch_args_t q = { .key = "g", .klen = 1, .member = "Rome", .mlen = 4,
                               .q = { .shape = { .kind = GEO_SHAPE_RADIUS, .radius = 700, .to_m = GEO_UNIT_KM },
                                      .sort = GEO_SORT_ASC },
                               .withdist = true };
    ok(&c, &CMD_GEOSEARCH, &q, &r, t);
    assert_int_equal(r.n, 4);   /* Rome, Palermo (moved north), Nice, Catania */
    assert_memory_equal(r.hits[0].member, "Rome", 4);
    assert_memory_equal(r.hits[1].member, "Palermo", 7);
    assert_true(r.hits[1].dist < r.hits[2].dist && r.hits[2].dist < r.hits[3].dist);
    cmd_geo_res_free(&r);
    q.member = "Atlantis";
    q.mlen = 8;
    assert_non_null(strstr(refused(&c, &CMD_GEOSEARCH, &q, &r, t, CMD_E_NOT_FOUND), "Atlantis"));
    q.key = "none";
    q.klen = 4;
    ok(&c, &CMD_GEOSEARCH, &q, &r, t);   /* a missing key has no members, even around one */
    assert_int_equal(r.n, 0);
    cmd_geo_res_free(&r);

    /* GEOSEARCHSTORE: a box around a position, a member's radius into the
     * source itself, then nothing found deletes the key */
    cmd_geosearch_args_t st = { .key = "dst", .klen = 3, .source = "g", .slen = 1,
                                .q = { .shape = { .kind = GEO_SHAPE_BOX, .lon = 13, .lat = 39, .width = 800,
                                                  .height = 800, .to_m = GEO_UNIT_KM },
                                       .count = 2, .sort = GEO_SORT_ASC } };   /* Palermo, Catania */
    ok(&c, &CMD_GEOSEARCHSTORE, &st, &r, t += MS);
    assert_int_equal(r.n, 2);
    cmd_pexpire_args_t pe = { "dst", 3, 100000, 0 };
    cmd_keys_res_t kr;
    ok(&c, &CMD_PEXPIRE, &pe, &kr, t += MS);
    cmd_geosearch_args_t self = { .key = "dst", .klen = 3, .source = "dst", .slen = 3, .member = "Palermo", .mlen = 7,
                                  .q = { .shape = { .kind = GEO_SHAPE_RADIUS, .radius = 10, .to_m = GEO_UNIT_KM } } };
    ok(&c, &CMD_GEOSEARCHSTORE, &self, &r, t += MS);   /* drops the TTL too */
    assert_int_equal(r.n, 1);
    cmd_geosearch_args_t empty = { .key = "dst", .klen = 3, .source = "g", .slen = 1,
                                   .q = { .shape = { .kind = GEO_SHAPE_RADIUS, .lon = -70, .lat = -40, .radius = 1,
                                                     .to_m = GEO_UNIT_M } } };
    ok(&c, &CMD_GEOSEARCHSTORE, &empty, &r, t += MS);
    assert_int_equal(r.n, 0);
    cmd_key_args_t ka = { "dst", 3 };
    cmd_key_info_res_t info;
    refused(&c, &CMD_KEY_INFO, &ka, &info, t, CMD_E_NOT_FOUND);
    st.key = "bf";
    st.klen = 2;
    assert_non_null(strstr(refused(&c, &CMD_GEOSEARCHSTORE, &st, &r, t, CMD_E_WRONGTYPE), "destination"));

    /* ZREM: some, then the rest deletes the key */
    cmd_geo_members_args_t zr = { "g", 1, items_of(&s, (const char *const[]){ "Paris", "nope" }, 2), NULL, NULL };
    ok(&c, &CMD_ZREM, &zr, &r, t += MS);
    assert_int_equal(r.n, 1);
    before = journal_len(&c);
    ok(&c, &CMD_ZREM, &zr, &r, t += MS);   /* nothing removed: no record */
    assert_int_equal(r.n, 0);
    assert_int_equal(journal_len(&c), before);
    assert_true(geoadd(&c, "small", m, pos, 2, 0, t += MS, &r, &err));
    cmd_geo_members_args_t all = { "small", 5, items_of(&s, m, 2), NULL, NULL };
    ok(&c, &CMD_ZREM, &all, &r, t += MS);
    assert_int_equal(r.n, 2);
    ka.key = "small";
    ka.klen = 5;
    refused(&c, &CMD_KEY_INFO, &ka, &info, t, CMD_E_NOT_FOUND);
    assert_int_equal(cmd_check_replays(&c), 11);
    cmd_check_close(&c);
}

static void test_geo_decoders(void **state)
{
    (void)state;
    size_t p = after_key(3);
    const char *m[] = { "a", "bc" };
    size_t len[] = { 1, 2 };
    uint64_t score[] = { geohash_score(1, 2), geohash_score(3, 4) };
    cmd_geoadd_args_t add = { "key", 3, cmd_items_of(m, len, score, 2), false, true, true };
    /* NX and XX; a flag past ch; no members; an empty member; a score past 52 bits */
    check_decoder(&CMD_GEOADD, &add, (size_t[]){ p, p, p + 1, p + 5, p + 5 + 1 + 1 + 7 },
                  (uint8_t[]){ 3, 8, 0, 0, 0x10 }, 5);
    strs_t s;
    cmd_geo_members_args_t zr = { "key", 3, items_of(&s, (const char *const[]){ "a", "bc" }, 2), NULL, NULL };
    /* no members; a member that is not UTF-8 */
    check_decoder(&CMD_ZREM, &zr, (size_t[]){ p, p + 5 }, (uint8_t[]){ 0, 0xc3 }, 2);
    cmd_geosearch_args_t st = { .key = "key", .klen = 3, .source = "src", .slen = 3, .member = "mm", .mlen = 2,
                                .q = { .shape = { .kind = GEO_SHAPE_RADIUS, .radius = 10, .to_m = GEO_UNIT_KM },
                                       .count = 5, .any = true, .sort = GEO_SORT_ASC } };
    size_t q = p + 4 + 3 + 1 + 1 + 2;   /* after the source, the member flag and the member */
    /* member flag 2; an empty member; kind 2; lon set with a member centre; a negative radius; a width with a
     * radius; an unknown unit; count 0 with any; any 2; sort 3 */
    check_decoder(&CMD_GEOSEARCHSTORE, &st,
                  (size_t[]){ p + 7, p + 8, q, q + 8, q + 1 + 16 + 7, q + 1 + 24 + 7, q + 1 + 40, q + 1 + 48,
                              q + 1 + 56, q + 1 + 57 },
                  (uint8_t[]){ 2, 0, 2, 0x40, 0x80, 0x40, 1, 0, 2, 3 }, 10);
    cmd_geosearch_args_t box = { .key = "key", .klen = 3, .source = "src", .slen = 3,
                                 .q = { .shape = { .kind = GEO_SHAPE_BOX, .lon = 10, .lat = 20, .width = 5,
                                                   .height = 6, .to_m = GEO_UNIT_MI } } };
    q = p + 4 + 3 + 1;
    /* a latitude past the poles' limit; a height of NaN */
    check_decoder(&CMD_GEOSEARCHSTORE, &box, (size_t[]){ q + 1 + 8 + 7, q + 1 + 32 + 7 }, (uint8_t[]){ 0x41, 0xff },
                  2);
}

/* ------------------------------------------------------------------------ */
/* The item lists of records                                                */
/* ------------------------------------------------------------------------ */

static void test_itemlist(void **state)
{
    (void)state;
    /* lengths around the varint's steps, a number per item */
    static const size_t lens[] = { 0, 1, 127, 128, 16383, 16384, 70000 };
    enum { N = sizeof(lens) / sizeof(lens[0]) };
    char *bufs[N];
    const char *p[N];
    uint64_t num[N];
    for (size_t i = 0; i < N; i++) {
        bufs[i] = malloc(lens[i] + 1);
        memset(bufs[i], 'a' + (int)i, lens[i]);
        p[i] = bufs[i];
        num[i] = 0x0102030405060708ull * i;
    }
    cmd_items_t l = cmd_items_of(p, lens, num, N);
    wbuf_t b = WBUF_INIT;
    cmd_items_put(&b, &l);
    assert_int_equal(b.len, cmd_items_record_bytes(&l));
    rbuf_t in = rbuf_make(b.data, b.len);
    cmd_items_t back;
    assert_true(cmd_items_get(&in, CMD_ITEMS_NUM, 0, 100, &back));
    assert_true(rbuf_done(&in));
    assert_int_equal(back.n, N);
    assert_int_equal(cmd_items_record_bytes(&back), b.len);
    cmd_items_view_t v;
    assert_true(cmd_items_view(&back, &v));
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(v.len[i], lens[i]);
        assert_memory_equal(v.p[i], bufs[i], lens[i]);
        assert_true(v.num[i] == num[i]);
    }
    cmd_items_view_free(&v);
    /* re-encoding a record's list gives the same bytes */
    wbuf_t again = WBUF_INIT;
    cmd_items_put(&again, &back);
    assert_int_equal(again.len, b.len);
    assert_memory_equal(again.data, b.data, b.len);
    wbuf_free(&again);
    /* keys must be 1..KS_KEY_MAX bytes; more entries than allowed */
    in = rbuf_make(b.data, b.len);
    assert_false(cmd_items_get(&in, CMD_ITEMS_NUM | CMD_ITEMS_KEYS, 0, 100, &back));
    in = rbuf_make(b.data, b.len);
    assert_false(cmd_items_get(&in, CMD_ITEMS_NUM, 0, N - 1, &back));
    wbuf_free(&b);
    for (size_t i = 0; i < N; i++)
        free(bufs[i]);

    /* varints: minimal forms only, 32 bits at most */
    static const uint8_t overlong[] = { 0x80, 0x00 }, big[] = { 0xff, 0xff, 0xff, 0xff, 0x1f },
                         max[] = { 0xff, 0xff, 0xff, 0xff, 0x0f }, endless[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 };
    uint32_t x;
    in = rbuf_make(overlong, sizeof overlong);
    assert_false(cmd_get_varint(&in, &x));
    in = rbuf_make(big, sizeof big);
    assert_false(cmd_get_varint(&in, &x));
    in = rbuf_make(endless, sizeof endless);
    assert_false(cmd_get_varint(&in, &x));
    in = rbuf_make(max, sizeof max);
    assert_true(cmd_get_varint(&in, &x));
    assert_true(x == UINT32_MAX);
    /* text lists refuse bytes that are not UTF-8 */
    static const uint8_t bad_text[] = { 1, 0, 0, 0, 2, 0xc3, 0x28 };
    in = rbuf_make(bad_text, sizeof bad_text);
    assert_false(cmd_items_get(&in, CMD_ITEMS_TEXT, 0, 10, &back));
    in = rbuf_make(bad_text, sizeof bad_text);
    assert_true(cmd_items_get(&in, 0, 0, 10, &back));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_replay),
        cmocka_unit_test(test_scan_pages),
        cmocka_unit_test(test_expire_conditions),
        cmocka_unit_test(test_hold),
        cmocka_unit_test(test_keys_decoders),
        cmocka_unit_test(test_uv_replay),
        cmocka_unit_test(test_uv_decoders),
        cmocka_unit_test(test_bloom_replay),
        cmocka_unit_test(test_bloom_decoders),
        cmocka_unit_test(test_cuckoo_replay),
        cmocka_unit_test(test_cuckoo_decoders),
        cmocka_unit_test(test_geo_replay),
        cmocka_unit_test(test_geo_decoders),
        cmocka_unit_test(test_itemlist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
