/*
 * test_cmd_sketch.c - the operations of Count-Min, Top-K, T-Digest, bit
 * strings and activity on their own (cmd + core, as cmd-pure links them):
 * seeded sequences of every change run through cmd_call and their records
 * replayed on a fresh server to the same dumps (cmd_check_replays); refusals
 * change nothing and journal nothing; every decoder reads back exactly what
 * its encoder wrote and refuses records cut short, of another version, with
 * trailing bytes, or with a field out of its range.
 */
#include <math.h>
#include <stdalign.h>

#include <roaring/roaring.h>

#include "cmd/activity.h"
#include "cmd/bits.h"
#include "cmd/cms.h"
#include "cmd/tdigest.h"
#include "cmd/topk.h"
#include "core/cms.h"
#include "core/rng.h"
#include "core/tdigest.h"
#include "core/topk.h"
#include "tests/unit/cmd_check.h"

#define T0 CMD_CHECK_NOW_NS
#define MS 1000000LL
#define TODAY ((int32_t)(T0 / 1000000 / 86400000))

/* Runs def and requires it to succeed. */
static void ok(cmd_check_t *c, const cmd_def_t *def, const void *args, void *res, int64_t now)
{
    cmd_err_t err;
    if (!cmd_check_run(c, def, args, res, now, &err))
        fail_msg("%s refused: %s", def->name, err.message);
}

/* Runs def and requires it to be refused with `code` (and `field` unless
 * NULL), journaling nothing. */
static void refused(cmd_check_t *c, const cmd_def_t *def, const void *args, void *res, cmd_code_t code,
                    const char *field)
{
    size_t before = c->journal.len;
    cmd_err_t err;
    if (cmd_check_run(c, def, args, res, T0, &err))
        fail_msg("%s was not refused", def->name);
    assert_int_equal(err.code, code);
    if (field)
        assert_string_equal(err.field, field);
    assert_int_equal(c->journal.len, before);
}

/* The parsed-list form a front-end gives. */
static cmd_batch_t items(const char *const *p, const size_t *len, const uint64_t *by, size_t n)
{
    cmd_batch_t it = { .n = n, .p = p, .len = len, .by = by };
    return it;
}

/* ------------------------------------------------------------------------ */
/* Decoders                                                                 */
/* ------------------------------------------------------------------------ */

/* What replay requires of a record's bytes: decoded, every byte read. */
static bool decodes(const cmd_def_t *def, const uint8_t *p, size_t n, void *args)
{
    rbuf_t in = rbuf_make(p, n);
    const char *why = "malformed";
    memset(args, 0, def->args_size);
    return def->decode(&in, args, &why) && rbuf_done(&in);
}

/* args' record reads back into arguments that encode to the same bytes;
 * every shorter cut, another version byte and a trailing byte are refused
 * (by the decoder, and by cmd_replay on a server). */
static void check_decoder(const cmd_def_t *def, const void *args)
{
    wbuf_t a = WBUF_INIT, b = WBUF_INIT;
    def->encode(args, &a);
    assert_false(a.oom);
    alignas(max_align_t) unsigned char back[CMD_ARGS_MAX];
    assert_true(decodes(def, a.data, a.len, back));
    def->encode(back, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    for (size_t cut = 0; cut < a.len; cut++)
        if (decodes(def, a.data, cut, back))
            fail_msg("%s: a record cut to %zu of %zu bytes decodes", def->name, cut, a.len);
    cmd_check_t s;
    cmd_check_open(&s);
    cmd_err_t err;
    journal_req_t q = { .kind = JOURNAL_REC_COMMAND, .op = def->id, .now_ns = T0, .path = "", .query = "",
                        .ctype = "", .body = a.data, .body_len = a.len / 2 };
    assert_false(cmd_replay(&s.srv, &q, 0, &err));
    assert_non_null(strstr(err.message, def->name));
    cmd_check_close(&s);
    a.data[0] = 2;
    assert_false(decodes(def, a.data, a.len, back));
    a.data[0] = 1;
    wbuf_put_u8(&a, 0);
    assert_false(decodes(def, a.data, a.len, back));
    wbuf_free(&a);
    wbuf_free(&b);
}

/* A record written field by field, for the garbled ones. */
static void head(wbuf_t *w, const char *key)
{
    wbuf_put_u8(w, 1);
    cmd_put_key(w, key, strlen(key));
}

static void refuse(const cmd_def_t *def, wbuf_t *w)
{
    alignas(max_align_t) unsigned char back[CMD_ARGS_MAX];
    assert_false(w->oom);
    if (decodes(def, w->data, w->len, back))
        fail_msg("%s: a garbled record decodes", def->name);
    wbuf_free(w);
    *w = (wbuf_t)WBUF_INIT;
}

static void put_item(wbuf_t *w, const char *s, size_t len, bool with_by, uint64_t by)
{
    wbuf_put_u32(w, (uint32_t)len);
    wbuf_put_bytes(w, s, len);
    if (with_by)
        wbuf_put_u64(w, by);
}

/* ------------------------------------------------------------------------ */
/* Count-Min                                                                */
/* ------------------------------------------------------------------------ */

static void test_cms_replays(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_cms_info_t info;
    cmd_cms_initbydim_args_t m1 = { "m1", 2, 100, 4, false, false }, m2 = m1, m3 = { "m3", 2, 200, 4, true, false };
    m2.key = "m2";
    cms_dims_from_prob(0.05, 0.1, &m2.width, &m2.depth);   /* CMS.INITBYPROB's dimensions: 40 x 4 */
    m2.width = 100;
    m2.by_prob = true;
    ok(&c, &CMD_CMS_INITBYDIM, &m1, &info, T0);
    assert_int_equal(info.width, 100);
    assert_int_equal(info.depth, 4);
    ok(&c, &CMD_CMS_INITBYDIM, &m2, &info, T0 + MS);
    ok(&c, &CMD_CMS_INITBYDIM, &m3, &info, T0 + 2 * MS);
    assert_true(info.conservative);
    refused(&c, &CMD_CMS_INITBYDIM, &m1, &info, CMD_E_EXISTS, NULL);
    cmd_cms_initbydim_args_t huge = { "h", 1, 1u << 20, 1u << 7, false, true };
    refused(&c, &CMD_CMS_INITBYDIM, &huge, &info, CMD_E_BAD_REQUEST, "error");

    /* seeded increments against exact counts: never under-counted */
    static const char *const words[] = { "a", "b", "c", "d", "e", "", "\xc3\xa9t\xc3\xa9", "7" };
    size_t lens[8];
    for (int i = 0; i < 8; i++)
        lens[i] = strlen(words[i]);
    uint64_t exact[8] = { 0 };
    rng_t r;
    rng_seed(&r, 38);
    for (int round = 0; round < 30; round++) {
        const char *p[5];
        size_t l[5];
        uint64_t by[5], counts[5];
        size_t w[5];
        for (int i = 0; i < 5; i++) {
            w[i] = rng_below(&r, 8);
            p[i] = words[w[i]];
            l[i] = lens[w[i]];
            by[i] = rng_below(&r, 4);   /* 0 reads */
        }
        cmd_cms_incrby_args_t a = { round % 2 ? "m1" : "m3", 2, items(p, l, by, 5), round % 3 == 0,
                                    round % 4 ? counts : NULL };
        ok(&c, &CMD_CMS_INCRBY, &a, NULL, T0 + (10 + round) * MS);
        for (int i = 0; i < 5 && round % 2; i++) {
            exact[w[i]] += by[i];
            if (a.counts)
                assert_true(counts[i] >= exact[w[i]]);
        }
    }
    uint64_t q[8];
    cmd_cms_query_args_t qa = { "m1", 2, items(words, lens, NULL, 8), q };
    ok(&c, &CMD_CMS_QUERY, &qa, NULL, T0);
    for (int i = 0; i < 8; i++)
        assert_true(q[i] >= exact[i]);

    /* refusals: a missing sketch, another type, an overflowing batch */
    uint64_t big[2] = { CMS_MAX_COUNT, 1 }, out[2];
    cmd_cms_incrby_args_t over = { "m1", 2, items(words, lens, big, 2), true, out };
    refused(&c, &CMD_CMS_INCRBY, &over, NULL, CMD_E_BAD_REQUEST, "increments");
    over.as_increments = false;
    refused(&c, &CMD_CMS_INCRBY, &over, NULL, CMD_E_BAD_REQUEST, "items");
    over.key = "nope";
    over.klen = 4;
    refused(&c, &CMD_CMS_INCRBY, &over, NULL, CMD_E_NOT_FOUND, NULL);

    /* merges: weighted, a source named twice (its weights summed), the
     * destination among its sources; refusals change nothing */
    const char *src[3] = { "m1", "m1", "m2" };
    size_t slen[3] = { 2, 2, 2 };
    int64_t w[3] = { 2, -1, 3 };
    cmd_cms_merge_args_t mg = { "m2", 2, items(src, slen, NULL, 3), { .n = 3, .v = w } };
    ok(&c, &CMD_CMS_MERGE, &mg, &info, T0 + 100 * MS);
    mg.weights.n = 0;   /* 1 each */
    mg.sources.n = 2;
    ok(&c, &CMD_CMS_MERGE, &mg, &info, T0 + 101 * MS);
    mg.key = "m3";
    refused(&c, &CMD_CMS_MERGE, &mg, &info, CMD_E_BAD_REQUEST, "sources");   /* 200 x 4 from 100 x 4 */
    const char *missing[1] = { "zz" };
    size_t mlen[1] = { 2 };
    cmd_cms_merge_args_t mm = { "m2", 2, items(missing, mlen, NULL, 1), { 0 } };
    refused(&c, &CMD_CMS_MERGE, &mm, &info, CMD_E_NOT_FOUND, "sources");
    int64_t neg[1] = { -1000 };
    cmd_cms_merge_args_t under = { "m2", 2, items(src, slen, NULL, 1), { .n = 1, .v = neg } };
    refused(&c, &CMD_CMS_MERGE, &under, &info, CMD_E_BAD_REQUEST, "weights");

    cmd_cms_key_args_t ia = { "m2", 2 };
    ok(&c, &CMD_CMS_INFO, &ia, &info, T0);
    assert_int_equal(info.width, 100);
    assert_true(cmd_check_replays(&c) > 30);
    cmd_check_close(&c);
}

static void test_cms_records(void **state)
{
    (void)state;
    const char *p[3] = { "x", "", "\xe2\x82\xac" };
    size_t l[3] = { 1, 0, 3 };
    uint64_t by[3] = { 0, 5, CMS_MAX_COUNT };
    int64_t w[3] = { INT64_MIN, 0, 9 };
    cmd_cms_initbydim_args_t d = { "k", 1, 7, 3, true, true };
    cmd_cms_incrby_args_t i = { "k", 1, items(p, l, by, 3), true, NULL };
    cmd_cms_merge_args_t m = { "dst", 3, items(p, l, NULL, 1), { .n = 1, .v = w } }, m0 = m;
    m0.weights.n = 0;
    check_decoder(&CMD_CMS_INITBYDIM, &d);
    check_decoder(&CMD_CMS_INCRBY, &i);
    check_decoder(&CMD_CMS_MERGE, &m);
    check_decoder(&CMD_CMS_MERGE, &m0);

    wbuf_t g = WBUF_INIT;
    head(&g, "k");   /* a sketch that cannot exist */
    wbuf_put_u64(&g, 1u << 14);
    wbuf_put_u64(&g, 1u << 13);
    wbuf_put_u8(&g, 0);
    wbuf_put_u8(&g, 0);
    refuse(&CMD_CMS_INITBYDIM, &g);
    head(&g, "k");   /* a flag that is not 0 or 1 */
    wbuf_put_u64(&g, 7);
    wbuf_put_u64(&g, 3);
    wbuf_put_u8(&g, 2);
    wbuf_put_u8(&g, 0);
    refuse(&CMD_CMS_INITBYDIM, &g);
    head(&g, "");    /* an empty key */
    wbuf_put_u64(&g, 7);
    wbuf_put_u64(&g, 3);
    wbuf_put_u8(&g, 0);
    wbuf_put_u8(&g, 0);
    refuse(&CMD_CMS_INITBYDIM, &g);
    head(&g, "k");   /* an increment past the total's limit */
    wbuf_put_u8(&g, 1);
    wbuf_put_u32(&g, 1);
    put_item(&g, "a", 1, true, CMS_MAX_COUNT + 1);
    refuse(&CMD_CMS_INCRBY, &g);
    head(&g, "k");   /* an item that is not UTF-8 */
    wbuf_put_u8(&g, 0);
    wbuf_put_u32(&g, 1);
    put_item(&g, "\xff", 1, true, 1);
    refuse(&CMD_CMS_INCRBY, &g);
    head(&g, "k");   /* no items */
    wbuf_put_u8(&g, 0);
    wbuf_put_u32(&g, 0);
    refuse(&CMD_CMS_INCRBY, &g);
    head(&g, "k");   /* more weights than sources */
    wbuf_put_u32(&g, 1);
    put_item(&g, "s", 1, false, 0);
    wbuf_put_u32(&g, 2);
    wbuf_put_u64(&g, 1);
    wbuf_put_u64(&g, 1);
    refuse(&CMD_CMS_MERGE, &g);
    head(&g, "k");   /* a source key with a NUL */
    wbuf_put_u32(&g, 1);
    put_item(&g, "a\0b", 3, false, 0);
    wbuf_put_u32(&g, 0);
    refuse(&CMD_CMS_MERGE, &g);
}

/* ------------------------------------------------------------------------ */
/* Top-K                                                                    */
/* ------------------------------------------------------------------------ */

static void test_topk_replays(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_topk_info_t info;
    cmd_topk_reserve_args_t t1 = { "t1", 2, 5, 8, 7, 0.9 }, t2 = { "t2", 2, 3, 50, 4, 1.0 };
    ok(&c, &CMD_TOPK_RESERVE, &t1, &info, T0);
    assert_int_equal(info.k, 5);
    ok(&c, &CMD_TOPK_RESERVE, &t2, &info, T0 + MS);
    refused(&c, &CMD_TOPK_RESERVE, &t1, &info, CMD_E_EXISTS, NULL);
    cmd_topk_reserve_args_t z = { "z", 1, 3, 8, 7, 0 };
    refused(&c, &CMD_TOPK_RESERVE, &z, &info, CMD_E_BAD_REQUEST, "decay");
    z.decay = 0.5;
    z.width = 1u << 13;
    z.depth = 1u << 12;
    refused(&c, &CMD_TOPK_RESERVE, &z, &info, CMD_E_BAD_REQUEST, "width");

    /* a skewed stream: item i about 1/(i+1) of the time */
    char names[40][8];
    const char *p[40];
    size_t l[40];
    for (int i = 0; i < 40; i++) {
        l[i] = (size_t)snprintf(names[i], sizeof(names[i]), "it%d", i);
        p[i] = names[i];
    }
    rng_t r;
    rng_seed(&r, 7);
    uint64_t exact[40] = { 0 };
    size_t expelled_seen = 0;
    for (int round = 0; round < 40; round++) {
        const char *bp[20];
        size_t bl[20];
        uint64_t by[20];
        for (int i = 0; i < 20; i++) {
            size_t k = (size_t)(40.0 / (1.0 + 39.0 * rng_double(&r))) - 1;
            bp[i] = p[k];
            bl[i] = l[k];
            by[i] = 1 + rng_below(&r, 3);
            exact[k] += round % 2 ? by[i] : 1;
        }
        cmd_topk_item_t ex[20];
        cmd_topk_add_args_t a = { round % 3 ? "t1" : "t2", 2, items(bp, bl, round % 2 ? by : NULL, 20),
                                  round % 5 ? ex : NULL };
        if (round % 3 == 0)
            continue;
        ok(&c, round % 2 ? &CMD_TOPK_INCRBY : &CMD_TOPK_ADD, &a, NULL, T0 + (10 + round) * MS);
        for (int i = 0; i < 20 && a.expelled; i++) {
            expelled_seen += ex[i].p != NULL;
            free(ex[i].p);
        }
    }
    assert_true(expelled_seen > 0);
    cmd_topk_key_args_t ka = { "t1", 2 };
    cmd_topk_list_res_t list;
    ok(&c, &CMD_TOPK_LIST, &ka, &list, T0);
    assert_true(list.n >= 1 && list.n <= 5);
    for (size_t i = 1; i < list.n; i++)
        assert_true(list.v[i - 1].count >= list.v[i].count);
    bool listed[40];
    uint64_t counts[40];
    cmd_topk_query_args_t qa = { "t1", 2, items(p, l, NULL, 40), listed, counts };
    ok(&c, &CMD_TOPK_QUERY, &qa, NULL, T0);
    for (size_t i = 0; i < list.n; i++) {
        char name[8] = { 0 };   /* "itN": the item's bytes are not NUL-terminated */
        assert_true(list.v[i].len < sizeof(name));
        memcpy(name, list.v[i].item, list.v[i].len);
        size_t k = (size_t)atoi(name + 2);
        assert_true(listed[k]);
        assert_int_equal(counts[k], list.v[i].count);
    }
    cmd_topk_list_free(&list);
    cmd_topk_add_args_t none = { "nope", 4, items(p, l, NULL, 1), NULL };
    refused(&c, &CMD_TOPK_ADD, &none, NULL, CMD_E_NOT_FOUND, NULL);
    ok(&c, &CMD_TOPK_INFO, &ka, &info, T0);
    assert_true(info.size_bytes > 0);
    assert_true(cmd_check_replays(&c) > 20);
    cmd_check_close(&c);
}

static void test_topk_records(void **state)
{
    (void)state;
    const char *p[2] = { "a", "bb" };
    size_t l[2] = { 1, 2 };
    uint64_t by[2] = { 1, TOPK_MAX_INCREMENT };
    cmd_topk_reserve_args_t rs = { "k", 1, TOPK_MAX_K, 1, 1u << 24, 0.25 };
    cmd_topk_add_args_t a = { "k", 1, items(p, l, NULL, 2), NULL }, i = { "k", 1, items(p, l, by, 2), NULL };
    check_decoder(&CMD_TOPK_RESERVE, &rs);
    check_decoder(&CMD_TOPK_ADD, &a);
    check_decoder(&CMD_TOPK_INCRBY, &i);

    wbuf_t g = WBUF_INIT;
    double bad_decay[] = { 0, -1, 1.5, NAN };
    for (size_t d = 0; d < sizeof(bad_decay) / sizeof(bad_decay[0]); d++) {
        head(&g, "k");
        wbuf_put_u32(&g, 3);
        wbuf_put_u32(&g, 8);
        wbuf_put_u32(&g, 7);
        wbuf_put_f64(&g, bad_decay[d]);
        refuse(&CMD_TOPK_RESERVE, &g);
    }
    head(&g, "k");   /* k 0 */
    wbuf_put_u32(&g, 0);
    wbuf_put_u32(&g, 8);
    wbuf_put_u32(&g, 7);
    wbuf_put_f64(&g, 0.9);
    refuse(&CMD_TOPK_RESERVE, &g);
    head(&g, "k");   /* an increment of 0 */
    wbuf_put_u32(&g, 1);
    put_item(&g, "a", 1, true, 0);
    refuse(&CMD_TOPK_INCRBY, &g);
    head(&g, "k");   /* past RedisBloom's limit */
    wbuf_put_u32(&g, 1);
    put_item(&g, "a", 1, true, TOPK_MAX_INCREMENT + 1);
    refuse(&CMD_TOPK_INCRBY, &g);
    head(&g, "k");   /* an item longer than the record */
    wbuf_put_u32(&g, 1);
    wbuf_put_u32(&g, 100);
    wbuf_put_bytes(&g, "abc", 3);
    refuse(&CMD_TOPK_ADD, &g);
}

/* ------------------------------------------------------------------------ */
/* T-Digest                                                                 */
/* ------------------------------------------------------------------------ */

static void test_tdigest_replays(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_tdigest_info_t info;
    cmd_tdigest_create_args_t d1 = { "d1", 2, 100 }, d2 = { "d2", 2, 50 };
    ok(&c, &CMD_TDIGEST_CREATE, &d1, &info, T0);
    assert_int_equal(info.compression, 100);
    assert_true(isnan(info.min));
    ok(&c, &CMD_TDIGEST_CREATE, &d2, &info, T0 + MS);
    refused(&c, &CMD_TDIGEST_CREATE, &d2, &info, CMD_E_EXISTS, NULL);
    rng_t r;
    rng_seed(&r, 99);
    cmd_tdigest_add_res_t ar;
    for (int round = 0; round < 20; round++) {
        double v[50];
        for (int i = 0; i < 50; i++)
            v[i] = round % 2 ? rng_double(&r) * 1000 - 500 : (double)(int64_t)rng_below(&r, 100);
        cmd_tdigest_add_args_t a = { round % 3 ? "d1" : "d2", 2, { .n = 50, .v = v } };
        ok(&c, &CMD_TDIGEST_ADD, &a, &ar, T0 + (10 + round) * MS);
    }
    assert_true(ar.observations > 0);
    /* a merge into a new key takes the largest compression; with override
     * an existing destination is replaced, without it merged in */
    const char *src[3] = { "d1", "d2", "d1" };
    size_t sl[3] = { 2, 2, 2 };
    cmd_tdigest_merge_args_t m = { "d3", 2, items(src, sl, NULL, 3), 0, false };
    ok(&c, &CMD_TDIGEST_MERGE, &m, &info, T0 + 100 * MS);
    assert_int_equal(info.compression, 100);
    uint64_t merged = info.observations;
    m.key = "d2";
    m.sources.n = 1;
    m.override = true;
    m.compression = 70;
    ok(&c, &CMD_TDIGEST_MERGE, &m, &info, T0 + 101 * MS);
    assert_int_equal(info.compression, 70);
    m.override = false;
    m.compression = 0;
    ok(&c, &CMD_TDIGEST_MERGE, &m, &info, T0 + 102 * MS);
    assert_int_equal(info.compression, 70);
    const char *gone[1] = { "gone" };
    size_t gl[1] = { 4 };
    cmd_tdigest_merge_args_t bad = { "d4", 2, items(gone, gl, NULL, 1), 0, false };
    refused(&c, &CMD_TDIGEST_MERGE, &bad, &info, CMD_E_NOT_FOUND, "sources");

    /* the reads */
    double qs[3] = { 0, 0.5, 1 }, out[3];
    int64_t ranks_out[3];
    uint64_t ranks[3] = { 0, 10, 1u << 30 };
    cmd_tdigest_query_args_t q = { "d3", 2, 3, qs, NULL, out, NULL };
    ok(&c, &CMD_TDIGEST_QUANTILE, &q, NULL, T0);
    assert_true(out[0] <= out[1] && out[1] <= out[2]);
    ok(&c, &CMD_TDIGEST_CDF, &q, NULL, T0);
    q.out = NULL;
    q.out_ranks = ranks_out;
    ok(&c, &CMD_TDIGEST_RANK, &q, NULL, T0);
    ok(&c, &CMD_TDIGEST_REVRANK, &q, NULL, T0);
    q.values = NULL;
    q.ranks = ranks;
    q.out = out;
    q.out_ranks = NULL;
    ok(&c, &CMD_TDIGEST_BYRANK, &q, NULL, T0);
    assert_true(isinf(out[2]));
    ok(&c, &CMD_TDIGEST_BYREVRANK, &q, NULL, T0);
    cmd_tdigest_scalar_args_t sa = { "d3", 2, 0.1, 0.9 };
    cmd_tdigest_scalar_res_t sr;
    ok(&c, &CMD_TDIGEST_TRIMMED_MEAN, &sa, &sr, T0);
    ok(&c, &CMD_TDIGEST_MIN, &sa, &sr, T0);
    ok(&c, &CMD_TDIGEST_MAX, &sa, &sr, T0);
    sa.low = 0.9;
    refused(&c, &CMD_TDIGEST_TRIMMED_MEAN, &sa, &sr, CMD_E_BAD_REQUEST, "low");

    cmd_tdigest_key_args_t k = { "d1", 2 };
    ok(&c, &CMD_TDIGEST_RESET, &k, &info, T0 + 200 * MS);
    assert_int_equal(info.observations, 0);
    ok(&c, &CMD_TDIGEST_INFO, &k, &info, T0);
    k.key = "d3";
    ok(&c, &CMD_TDIGEST_INFO, &k, &info, T0);
    assert_int_equal(info.observations, merged);
    assert_int_equal(cmd_check_replays(&c), 2 + 20 + 3 + 1);
    cmd_check_close(&c);
}

static void test_tdigest_records(void **state)
{
    (void)state;
    double v[3] = { -1.5, 0, 1e300 };
    const char *s[2] = { "a", "b" };
    size_t sl[2] = { 1, 1 };
    cmd_tdigest_create_args_t cr = { "k", 1, TDIGEST_MAX_COMPRESSION };
    cmd_tdigest_add_args_t ad = { "k", 1, { .n = 3, .v = v } };
    cmd_tdigest_merge_args_t mg = { "k", 1, items(s, sl, NULL, 2), 0, true };
    cmd_tdigest_key_args_t rs = { "k", 1 };
    check_decoder(&CMD_TDIGEST_CREATE, &cr);
    check_decoder(&CMD_TDIGEST_ADD, &ad);
    check_decoder(&CMD_TDIGEST_MERGE, &mg);
    check_decoder(&CMD_TDIGEST_RESET, &rs);

    wbuf_t g = WBUF_INIT;
    head(&g, "k");
    wbuf_put_u32(&g, 0);
    refuse(&CMD_TDIGEST_CREATE, &g);
    head(&g, "k");
    wbuf_put_u32(&g, TDIGEST_MAX_COMPRESSION + 1);
    refuse(&CMD_TDIGEST_CREATE, &g);
    head(&g, "k");   /* NaN is no value */
    wbuf_put_u32(&g, 1);
    wbuf_put_f64(&g, NAN);
    refuse(&CMD_TDIGEST_ADD, &g);
    head(&g, "k");
    wbuf_put_u32(&g, 1);
    wbuf_put_f64(&g, -INFINITY);
    refuse(&CMD_TDIGEST_ADD, &g);
    head(&g, "k");   /* override 2 */
    wbuf_put_u32(&g, 1);
    put_item(&g, "a", 1, false, 0);
    wbuf_put_u32(&g, 0);
    wbuf_put_u8(&g, 2);
    refuse(&CMD_TDIGEST_MERGE, &g);
}

/* ------------------------------------------------------------------------ */
/* Bit strings                                                              */
/* ------------------------------------------------------------------------ */

static uint8_t got[64];
static size_t got_len;
static void keep_bytes(void *ud, const uint8_t *p, size_t n)
{
    (void)ud;
    got_len = n < sizeof(got) ? n : sizeof(got);
    if (got_len)
        memcpy(got, p, got_len);
}

static void test_bits_replays(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_bits_len_res_t lr;
    cmd_bits_set_args_t set = { .key = "s1", .klen = 2, .data = (const uint8_t *)"hello", .len = 5 };
    ok(&c, &CMD_SET, &set, &lr, T0);
    assert_int_equal(lr.length, 5);
    cmd_bits_bit_res_t br;
    rng_t r;
    rng_seed(&r, 5);
    for (int i = 0; i < 40; i++) {
        cmd_bits_setbit_args_t sb = { i % 2 ? "s1" : "s2", 2, rng_below(&r, 300), (int)rng_below(&r, 2) };
        ok(&c, &CMD_SETBIT, &sb, &br, T0 + (1 + i) * MS);
    }
    cmd_bits_setbit_args_t last = { "s2", 2, 7, 1 };
    ok(&c, &CMD_SETBIT, &last, &br, T0 + 50 * MS);
    ok(&c, &CMD_SETBIT, &last, &br, T0 + 51 * MS);   /* no change: no record */
    assert_int_equal(br.bit, 1);
    cmd_bits_getbit_args_t gb = { .key = "s2", .klen = 2, .offset = 7 };
    ok(&c, &CMD_GETBIT, &gb, &br, T0);
    assert_int_equal(br.bit, 1);

    /* BITFIELD on "hello": the seeds' example, then a FAIL overflow */
    cmd_bits_set_args_t h = { .key = "f", .klen = 1, .data = (const uint8_t *)"hello", .len = 5 };
    ok(&c, &CMD_SET, &h, &lr, T0 + 60 * MS);
    bf_op_t ops[4] = {
        { .opcode = BF_GET, .width = 4, .offset = 0 },
        { .opcode = BF_INCRBY, .width = 4, .offset = 8, .arg = 1 },
        { .opcode = BF_SET, .width = 8, .sign = true, .offset = 8, .arg = -3 },
        { .opcode = BF_INCRBY, .overflow = BF_FAIL, .width = 2, .offset = 200, .arg = 9 },
    };
    bf_result_t res[4];
    cmd_bits_field_args_t fa = { .key = "f", .klen = 1, .n = 4, .ops = ops, .results = res };
    ok(&c, &CMD_BITFIELD, &fa, NULL, T0 + 61 * MS);
    assert_int_equal(res[0].value, 6);
    assert_true(res[3].nil);
    cmd_bits_field_args_t ro = { .key = "f", .klen = 1, .n = 1, .ops = ops, .results = res };
    ok(&c, &CMD_BITFIELD_RO, &ro, NULL, T0);
    ro.n = 2;
    refused(&c, &CMD_BITFIELD_RO, &ro, NULL, CMD_E_BAD_REQUEST, "ops");
    cmd_bits_field_args_t grow = { .key = "g", .klen = 1, .n = 1, .ops = ops + 1 };   /* no answer wanted */
    ok(&c, &CMD_BITFIELD, &grow, NULL, T0 + 62 * MS);

    /* BITOP: a source twice under XOR cancels out; NOT; an empty result
     * deletes the destination */
    const char *src[3] = { "s1", "s1", "s2" };
    size_t sl[3] = { 2, 2, 2 };
    cmd_bits_bitop_args_t op = { "x", 1, BITS_OP_XOR, items(src, sl, NULL, 3) };
    ok(&c, &CMD_BITOP, &op, &lr, T0 + 70 * MS);
    op.key = "n";
    op.op = BITS_OP_NOT;
    op.sources.n = 1;
    ok(&c, &CMD_BITOP, &op, &lr, T0 + 71 * MS);
    op.sources.n = 2;
    refused(&c, &CMD_BITOP, &op, &lr, CMD_E_BAD_REQUEST, "sources");
    const char *none[1] = { "missing" };
    size_t nl[1] = { 7 };
    cmd_bits_bitop_args_t del = { "n", 1, BITS_OP_AND, items(none, nl, NULL, 1) };
    ok(&c, &CMD_BITOP, &del, &lr, T0 + 72 * MS);
    assert_int_equal(lr.length, 0);

    cmd_bits_get_args_t get = { .key = "f", .klen = 1, .start = 0, .end = -1, .bytes = keep_bytes };
    ok(&c, &CMD_GET, &get, NULL, T0);
    assert_int_equal(got_len, 26);   /* grown to bit 201 */
    get.start = -26;
    get.end = 1;
    ok(&c, &CMD_GETRANGE, &get, NULL, T0);
    assert_int_equal(got_len, 2);
    get.key = "n";
    refused(&c, &CMD_GET, &get, NULL, CMD_E_NOT_FOUND, NULL);
    cmd_bits_range_args_t ra = { .key = "s1", .klen = 2, .bit = 1 };
    cmd_bits_num_res_t nr;
    ok(&c, &CMD_BITCOUNT, &ra, &nr, T0);
    assert_true(nr.v > 0);
    ok(&c, &CMD_BITPOS, &ra, &nr, T0);

    /* Redis's SET: a counter, its expiry, NX refused, replaced by bytes
     * with KEEPTTL, then expired at once; SETRANGE and APPEND */
    cmd_bits_set_args_t rs = { .key = "r", .klen = 1, .data = (const uint8_t *)"42", .len = 2,
                               .flags = CMD_SET_REDIS | CMD_SET_COUNTER, .expire_ms = T0 / MS + 100000 };
    ok(&c, &CMD_SET, &rs, &lr, T0 + 80 * MS);
    assert_false(lr.skipped);
    rs.flags |= CMD_SET_NX;
    rs.expire_ms = 0;
    ok(&c, &CMD_SET, &rs, &lr, T0 + 81 * MS);
    assert_true(lr.skipped);
    cmd_bits_set_args_t rb = { .key = "r", .klen = 1, .data = (const uint8_t *)"xy", .len = 2,
                               .flags = CMD_SET_REDIS | CMD_SET_XX | CMD_SET_KEEPTTL };
    ok(&c, &CMD_SET, &rb, &lr, T0 + 82 * MS);
    cmd_bits_get_args_t rg = { .key = "r", .klen = 1, .start = 0, .end = -1, .bytes = keep_bytes, .strings = true };
    ok(&c, &CMD_GET, &rg, NULL, T0);
    assert_int_equal(got_len, 2);
    cmd_bits_setrange_args_t sr = { .key = "r", .klen = 1, .offset = 5, .data = (const uint8_t *)"z", .len = 1 };
    ok(&c, &CMD_SETRANGE, &sr, &lr, T0 + 83 * MS);
    assert_int_equal(lr.length, 6);
    sr.append = true;
    ok(&c, &CMD_SETRANGE, &sr, &lr, T0 + 84 * MS);
    assert_int_equal(lr.length, 7);
    sr.offset = CMD_BITS_MAX_STRING;
    sr.append = false;
    refused(&c, &CMD_SETRANGE, &sr, &lr, CMD_E_BAD_REQUEST, "offset");
    rs.flags = CMD_SET_REDIS | CMD_SET_COUNTER;
    rs.key = "r2";
    rs.klen = 2;
    ok(&c, &CMD_SET, &rs, &lr, T0 + 85 * MS);
    rg.key = "r2";
    rg.klen = 2;
    ok(&c, &CMD_GET, &rg, NULL, T0);   /* a counter read as its digits */
    assert_int_equal(got_len, 2);
    /* APPEND on a counter: still an integer, then not: a bit string */
    cmd_bits_setrange_args_t ca = { .key = "r2", .klen = 2, .append = true, .data = (const uint8_t *)"7", .len = 1,
                                    .strings = true };
    ok(&c, &CMD_SETRANGE, &ca, &lr, T0 + 85 * MS);
    assert_int_equal(lr.length, 3);
    ok(&c, &CMD_GET, &rg, NULL, T0);
    assert_memory_equal(got, "427", 3);
    ca.data = (const uint8_t *)"x";
    ok(&c, &CMD_SETRANGE, &ca, &lr, T0 + 85 * MS);
    ok(&c, &CMD_GET, &rg, NULL, T0);
    assert_memory_equal(got, "427x", 4);
    ca.strings = false;   /* HTTP's form: a counter is not a bit string */
    ca.key = "r3";
    ca.klen = 2;
    rs.key = "r3";
    ok(&c, &CMD_SET, &rs, &lr, T0 + 85 * MS);
    refused(&c, &CMD_SETRANGE, &ca, &lr, CMD_E_WRONGTYPE, NULL);
    rs.key = "r2";
    rs.expire_ms = T0 / MS;   /* not after now: the key is gone */
    ok(&c, &CMD_SET, &rs, &lr, T0 + 86 * MS);
    refused(&c, &CMD_GET, &rg, NULL, CMD_E_NOT_FOUND, NULL);
    assert_true(cmd_check_replays(&c) >= 1 + 20 + 1 + 1 + 1 + 1 + 3);   /* a SETBIT of the bit there writes nothing */
    cmd_check_close(&c);
}

static void test_bits_records(void **state)
{
    (void)state;
    const char *s[2] = { "a", "b" };
    size_t sl[2] = { 1, 1 };
    bf_op_t ops[2] = { { .opcode = BF_SET, .overflow = BF_SAT, .width = 63, .offset = BITS_MAX_OFFSET, .arg = -1 },
                       { .opcode = BF_GET, .width = 64, .sign = true, .offset = 3 } };
    cmd_bits_set_args_t st = { .key = "k", .klen = 1, .data = (const uint8_t *)"\0\1\2", .len = 3 },
                        empty = { .key = "k", .klen = 1, .data = (const uint8_t *)"", .len = 0 },
                        redis = { .key = "k", .klen = 1, .data = (const uint8_t *)"-12", .len = 3,
                                  .flags = CMD_SET_REDIS | CMD_SET_XX | CMD_SET_COUNTER, .expire_ms = T0 / 1000000 + 5000 };
    cmd_bits_setrange_args_t sr = { .key = "k", .klen = 1, .offset = 7, .data = (const uint8_t *)"ab", .len = 2 },
                             ap = { .key = "k", .klen = 1, .append = true, .data = (const uint8_t *)"c", .len = 1,
                                    .strings = true };
    cmd_bits_setbit_args_t sb = { "k", 1, BITS_MAX_OFFSET, 1 };
    cmd_bits_bitop_args_t bo = { "k", 1, BITS_OP_OR, items(s, sl, NULL, 2) };
    cmd_bits_field_args_t bf = { .key = "k", .klen = 1, .n = 2, .ops = ops }, bf0 = { .key = "k", .klen = 1, .n = 0, .ops = ops };
    check_decoder(&CMD_SET, &st);
    check_decoder(&CMD_SET, &empty);
    {   /* SET's version 2 (Redis's options): read back, cuts and version 3 refused */
        wbuf_t v2 = WBUF_INIT, again = WBUF_INIT;
        CMD_SET.encode(&redis, &v2);
        assert_int_equal(v2.data[0], 2);
        alignas(max_align_t) unsigned char back[CMD_ARGS_MAX];
        assert_true(decodes(&CMD_SET, v2.data, v2.len, back));
        CMD_SET.encode(back, &again);
        assert_int_equal(v2.len, again.len);
        assert_memory_equal(v2.data, again.data, v2.len);
        for (size_t cut = 0; cut < v2.len; cut++)
            assert_false(decodes(&CMD_SET, v2.data, cut, back));
        v2.data[0] = 3;
        assert_false(decodes(&CMD_SET, v2.data, v2.len, back));
        v2.data[0] = 2;
        v2.data[v2.len - 9] = CMD_SET_NX | CMD_SET_XX | CMD_SET_REDIS;   /* both: never written */
        assert_false(decodes(&CMD_SET, v2.data, v2.len, back));
        wbuf_free(&v2);
        wbuf_free(&again);
    }
    check_decoder(&CMD_SETRANGE, &sr);
    check_decoder(&CMD_SETRANGE, &ap);
    check_decoder(&CMD_SETBIT, &sb);
    check_decoder(&CMD_BITOP, &bo);
    check_decoder(&CMD_BITFIELD, &bf);
    check_decoder(&CMD_BITFIELD, &bf0);

    wbuf_t g = WBUF_INIT;
    head(&g, "k");
    wbuf_put_u64(&g, BITS_MAX_OFFSET + 1);
    wbuf_put_u8(&g, 1);
    refuse(&CMD_SETBIT, &g);
    head(&g, "k");
    wbuf_put_u64(&g, 0);
    wbuf_put_u8(&g, 2);
    refuse(&CMD_SETBIT, &g);
    head(&g, "k");   /* no such op */
    wbuf_put_u8(&g, 4);
    wbuf_put_u32(&g, 1);
    put_item(&g, "a", 1, false, 0);
    refuse(&CMD_BITOP, &g);
    head(&g, "k");   /* NOT of two */
    wbuf_put_u8(&g, BITS_OP_NOT);
    wbuf_put_u32(&g, 2);
    put_item(&g, "a", 1, false, 0);
    put_item(&g, "b", 1, false, 0);
    refuse(&CMD_BITOP, &g);
    static const uint8_t bad_ops[][4] = { { 3, 0, 8, 0 }, { 0, 3, 8, 0 }, { 0, 0, 64, 0 }, { 0, 0, 0, 1 },
                                          { 0, 0, 8, 2 } };
    for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
        head(&g, "k");
        wbuf_put_u32(&g, 1);
        wbuf_put_bytes(&g, bad_ops[i], 4);
        wbuf_put_u64(&g, 0);
        wbuf_put_u64(&g, 0);
        refuse(&CMD_BITFIELD, &g);
    }
    head(&g, "k");   /* a GET carries no argument */
    wbuf_put_u32(&g, 1);
    wbuf_put_bytes(&g, (const uint8_t[]){ 0, 0, 8, 0 }, 4);
    wbuf_put_u64(&g, 0);
    wbuf_put_u64(&g, 5);
    refuse(&CMD_BITFIELD, &g);
    head(&g, "k");   /* an offset past 2^32 - 1 */
    wbuf_put_u32(&g, 1);
    wbuf_put_bytes(&g, (const uint8_t[]){ 1, 0, 8, 0 }, 4);
    wbuf_put_u64(&g, BITS_MAX_OFFSET + 1);
    wbuf_put_u64(&g, 0);
    refuse(&CMD_BITFIELD, &g);
}

/* ------------------------------------------------------------------------ */
/* Activity                                                                 */
/* ------------------------------------------------------------------------ */

/* A portable Roaring bitmap of ids (malloc'd). */
static uint8_t *portable(const uint32_t *ids, size_t n, size_t *len)
{
    roaring_bitmap_t *bm = roaring_bitmap_of_ptr(n, ids);
    *len = roaring_bitmap_portable_size_in_bytes(bm);
    uint8_t *p = malloc(*len);
    assert_non_null(p);
    roaring_bitmap_portable_serialize(bm, (char *)p);
    roaring_bitmap_free(bm);
    return p;
}

static void test_activity_replays(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_activity_add_res_t ar;
    rng_t r;
    rng_seed(&r, 21);
    for (int d = 0; d < 10; d++) {
        uint32_t users[30];
        for (int i = 0; i < 30; i++)
            users[i] = (uint32_t)rng_below(&r, 100);
        cmd_activity_add_args_t a = { "a1", 2, TODAY - 9 + d, { .n = 30, .v = users } };
        ok(&c, &CMD_ACTIVITY_ADD, &a, &ar, T0 + d * MS);
        assert_true(ar.day_users >= ar.added);
    }
    uint32_t again[2] = { 1, 1 };
    cmd_activity_add_args_t dup = { "a2", 2, TODAY, { .n = 2, .v = again } };
    ok(&c, &CMD_ACTIVITY_ADD, &dup, &ar, T0 + 20 * MS);
    assert_int_equal(ar.added, 1);
    ok(&c, &CMD_ACTIVITY_ADD, &dup, &ar, T0 + 21 * MS);   /* nobody new: no record */
    assert_int_equal(ar.added, 0);
    uint32_t ids[5] = { 3, 70000, 70001, 4000000000u, 1 };
    size_t blen;
    uint8_t *bm = portable(ids, 5, &blen);
    cmd_activity_import_args_t im = { "a2", 2, TODAY - 1, bm, blen };
    ok(&c, &CMD_ACTIVITY_IMPORT, &im, &ar, T0 + 22 * MS);
    assert_int_equal(ar.added, 5);
    /* refusals: the future, a garbled bitmap, a day before the retained range */
    cmd_activity_add_args_t future = { "a2", 2, TODAY + ACTIVITY_AHEAD_DAYS + 1, { .n = 2, .v = again } };
    refused(&c, &CMD_ACTIVITY_ADD, &future, &ar, CMD_E_BAD_REQUEST, "day");
    im.len = blen - 1;
    refused(&c, &CMD_ACTIVITY_IMPORT, &im, &ar, CMD_E_BAD_REQUEST, NULL);
    im.len = 0;
    refused(&c, &CMD_ACTIVITY_IMPORT, &im, &ar, CMD_E_BAD_REQUEST, NULL);
    cmd_activity_add_args_t old = { "a2", 2, TODAY - ACTIVITY_RETAIN_DAYS, { .n = 2, .v = again } };
    refused(&c, &CMD_ACTIVITY_ADD, &old, &ar, CMD_E_BAD_REQUEST, "day");

    cmd_activity_count_args_t ca = { "a1", 2, TODAY - 9, TODAY, ACTIVITY_ANY };
    cmd_activity_count_res_t cr;
    ok(&c, &CMD_ACTIVITY_COUNT, &ca, &cr, T0);
    assert_true(cr.users > 30 && cr.users <= 100);
    ca.from = TODAY - ACTIVITY_RETAIN_DAYS;
    refused(&c, &CMD_ACTIVITY_COUNT, &ca, &cr, CMD_E_BAD_REQUEST, "to");
    cmd_activity_users_args_t ua = { "a2", 2, TODAY - 1, 2, 3 };
    cmd_activity_users_res_t ur;
    ok(&c, &CMD_ACTIVITY_USERS, &ua, &ur, T0);
    assert_int_equal(ur.n, 3);
    assert_int_equal(ur.ids[0], 3);
    assert_int_equal(ur.next, 4000000000u);   /* the next page starts at the next id */
    free(ur.ids);
    cmd_activity_retention_args_t rt = { "a1", 2, TODAY - 9, 9 };
    cmd_activity_retention_res_t rr;
    ok(&c, &CMD_ACTIVITY_RETENTION, &rt, &rr, T0);
    assert_true(rr.cohort_users > 0);
    free(rr.counts);
    rt.days = ACTIVITY_RETAIN_DAYS;
    refused(&c, &CMD_ACTIVITY_RETENTION, &rt, &rr, CMD_E_BAD_REQUEST, "days");
    cmd_activity_key_args_t ia = { "a1", 2 };
    cmd_activity_info_t info;
    ok(&c, &CMD_ACTIVITY_INFO, &ia, &info, T0);
    assert_int_equal(info.days, 10);
    assert_int_equal(info.last_day, TODAY);
    assert_int_equal(cmd_check_replays(&c), 10 + 1 + 1);
    cmd_check_close(&c);

    /* the records */
    im.len = blen;
    check_decoder(&CMD_ACTIVITY_ADD, &dup);
    check_decoder(&CMD_ACTIVITY_IMPORT, &im);
    wbuf_t g = WBUF_INIT;
    head(&g, "k");   /* past 9999-12-31 */
    wbuf_put_u32(&g, ACTIVITY_MAX_DAY + 1);
    wbuf_put_u32(&g, 1);
    wbuf_put_u32(&g, 1);
    refuse(&CMD_ACTIVITY_ADD, &g);
    head(&g, "k");   /* nobody */
    wbuf_put_u32(&g, 0);
    wbuf_put_u32(&g, 0);
    refuse(&CMD_ACTIVITY_ADD, &g);
    head(&g, "k");   /* a bitmap whose cookie is wrong */
    wbuf_put_u32(&g, 0);
    bm[0] ^= 0x55;
    wbuf_put_blob(&g, bm, blen);
    refuse(&CMD_ACTIVITY_IMPORT, &g);
    free(bm);
}

/* ------------------------------------------------------------------------ */
/* The table                                                                */
/* ------------------------------------------------------------------------ */

static void test_table_rows(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool write;
    } ops[] = {
        { "CMS.INITBYDIM", true },   { "CMS.INCRBY", true },        { "CMS.QUERY", false },
        { "CMS.MERGE", true },       { "CMS.INFO", false },         { "TOPK.RESERVE", true },
        { "TOPK.ADD", true },        { "TOPK.INCRBY", true },       { "TOPK.LIST", false },
        { "TOPK.QUERY", false },     { "TOPK.INFO", false },        { "TDIGEST.CREATE", true },
        { "TDIGEST.ADD", true },     { "TDIGEST.QUANTILE", false }, { "TDIGEST.CDF", false },
        { "TDIGEST.RANK", false },   { "TDIGEST.REVRANK", false },  { "TDIGEST.BYRANK", false },
        { "TDIGEST.BYREVRANK", false }, { "TDIGEST.TRIMMED_MEAN", false }, { "TDIGEST.MIN", false },
        { "TDIGEST.MAX", false },    { "TDIGEST.MERGE", true },     { "TDIGEST.RESET", true },
        { "TDIGEST.INFO", false },   { "SET", true },               { "GET", false },
        { "GETRANGE", false },       { "SETBIT", true },            { "GETBIT", false },
        { "BITCOUNT", false },       { "BITPOS", false },           { "BITOP", true },
        { "BITFIELD", true },        { "BITFIELD_RO", false },      { "ACTIVITY.ADD", true },
        { "ACTIVITY.IMPORT", true }, { "ACTIVITY.COUNT", false },   { "ACTIVITY.USERS", false },
        { "ACTIVITY.RETENTION", false }, { "ACTIVITY.INFO", false },
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        const cmd_def_t *d = cmd_def_by_name(ops[i].name, strlen(ops[i].name));
        if (!d)
            fail_msg("%s is not in the table", ops[i].name);
        assert_true(d->id >= 100 && d->id <= 199);
        assert_ptr_equal(cmd_def_by_id(d->id), d);
        assert_int_equal((d->flags & CMD_F_WRITE) != 0, ops[i].write);
        assert_int_equal(d->access, ops[i].write ? CMD_ACCESS_WRITE : CMD_ACCESS_READ);
        assert_true(d->args_size <= CMD_ARGS_MAX && d->res_size <= CMD_RES_MAX);
        assert_true(ops[i].write == (d->encode != NULL && d->decode != NULL));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cms_replays),      cmocka_unit_test(test_cms_records),
        cmocka_unit_test(test_topk_replays),     cmocka_unit_test(test_topk_records),
        cmocka_unit_test(test_tdigest_replays),  cmocka_unit_test(test_tdigest_records),
        cmocka_unit_test(test_bits_replays),     cmocka_unit_test(test_bits_records),
        cmocka_unit_test(test_activity_replays), cmocka_unit_test(test_table_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
