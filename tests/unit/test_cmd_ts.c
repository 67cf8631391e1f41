/*
 * test_cmd_ts.c - the time series operations on their own (linked with cmd
 * and core only): every write's records replay to the same dumps (the
 * compactions of rules of both generations included), a refused write
 * journals nothing, a rule's record holds its generation, the decoders
 * refuse what no tally wrote, and the reads answer from copies with the
 * answer's bounds.
 */
#include <math.h>
#include <stdalign.h>

#include "cmd/ts.h"
#include "core/rng.h"
#include "tests/unit/cmd_check.h"

#define MS 1000000LL   /* ns in a ms */

static void ok(cmd_check_t *c, const cmd_def_t *def, const void *args, void *res)
{
    cmd_err_t err;
    if (!cmd_check_run(c, def, args, res, CMD_CHECK_NOW_NS, &err))
        fail_msg("%s refused: %s", def->name, err.message);
}

static cmd_err_t refused(cmd_check_t *c, const cmd_def_t *def, const void *args, void *res)
{
    cmd_err_t err;
    size_t before = c->journal.len;
    assert_false(cmd_check_run(c, def, args, res, CMD_CHECK_NOW_NS, &err));
    assert_int_equal(c->journal.len, before);   /* a refused write journals nothing */
    return err;
}

static void create(cmd_check_t *c, const char *key, int64_t retention, const ts_label_t *labels, size_t n)
{
    cmd_ts_create_args_t a = { key, strlen(key), { retention, TS_DUP_BLOCK, { labels, NULL, n } } };
    cmd_ts_created_res_t r;
    ok(c, &CMD_TS_CREATE, &a, &r);
}

static bool add(cmd_check_t *c, const char *key, const ts_sample_t *s, size_t n, bool has_over, ts_policy_t over,
                cmd_err_t *err)
{
    cmd_ts_add_args_t a = { .key = key, .klen = strlen(key), .has_on_duplicate = has_over, .on_duplicate = over,
                            .samples = { s, NULL, n } };
    cmd_ts_created_res_t r;
    return cmd_check_run(c, &CMD_TS_ADD, &a, &r, CMD_CHECK_NOW_NS, err);
}

static void rule(cmd_check_t *c, const char *key, const char *dest, ts_agg_t agg, double q, int64_t bucket,
                 int64_t align, unsigned gen)
{
    cmd_ts_createrule_args_t a = { key, dest, strlen(key), strlen(dest), agg, q, bucket, align, gen };
    cmd_ts_created_res_t r;
    ok(c, &CMD_TS_CREATERULE, &a, &r);
}

static size_t records(const cmd_check_t *c, uint16_t op, journal_req_t *last)
{
    size_t off = 0, n = 0;
    while (off < c->journal.len) {
        journal_req_t q;
        size_t used;
        const char *why;
        assert_int_equal(journalfmt_parse_record(c->journal.data + off, c->journal.len - off, &q, &used, &why),
                         PARSE_OK);
        if (q.op == op) {
            n++;
            if (last)
                *last = q;
        }
        off += used;
    }
    return n;
}

/* Every write, rules of both generations writing their destinations,
 * refusals in between: the records replay to the same dumps. */
static void test_writes_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_err_t err;
    int changes = 0;
    ts_label_t lab[] = { { "room", 4, "kitchen", 7 }, { "kind", 4, "temp", 4 } };
    create(&c, "s", 0, lab, 2);
    create(&c, "d", 0, NULL, 0);
    create(&c, "d2", 0, NULL, 0);
    create(&c, "old", 0, NULL, 0);
    create(&c, "old:twa", 0, NULL, 0);
    changes += 5;
    cmd_ts_create_args_t again = { "s", 1, { 0, TS_DUP_BLOCK, { NULL, NULL, 0 } } };
    cmd_ts_created_res_t cr;
    assert_int_equal(refused(&c, &CMD_TS_CREATE, &again, &cr).code, CMD_E_EXISTS);

    rule(&c, "s", "d", TS_AGG_AVG, 0, 1000, 0, TS_RULE_GEN_2);
    rule(&c, "s", "d2", TS_AGG_QUANTILE, 0.9, 500, 7, TS_RULE_GEN_2);
    rule(&c, "old", "old:twa", TS_AGG_TWA, 0, 300, 0, TS_RULE_GEN_1);
    changes += 3;

    /* batches in and out of order, duplicates summed, NaN readings */
    rng_t rng;
    rng_seed(&rng, 38);
    for (int b = 0; b < 20; b++) {
        ts_sample_t s[50];
        for (int i = 0; i < 50; i++) {
            s[i].ts = (int64_t)(rng_next(&rng) % 20000);
            s[i].value = (rng_next(&rng) % 7 == 0) ? NAN : (double)(rng_next(&rng) % 1000) / 10;
        }
        if (add(&c, "s", s, 50, true, TS_DUP_LAST, &err))
            changes++;
        for (int i = 0; i < 50; i++)
            s[i].value = isnan(s[i].value) ? 1 : s[i].value;
        if (add(&c, "old", s, 50, true, TS_DUP_SUM, &err))
            changes++;
    }
    assert_true(changes > 30);
    /* a duplicate under BLOCK: refused, nothing journaled */
    ts_sample_t dup = { 5, 1 };
    ts_sample_t one = { 100, 1 };
    assert_true(add(&c, "blocky", &one, 1, false, TS_DUP_BLOCK, &err));
    changes++;
    cmd_ts_add_args_t blocked = { .key = "blocky", .klen = 6, .samples = { &dup, NULL, 1 } };
    ok(&c, &CMD_TS_ADD, &blocked, &cr);
    changes++;
    assert_int_equal(refused(&c, &CMD_TS_ADD, &blocked, &cr).code, CMD_E_EXISTS);
    /* a new series created with options by its first samples */
    ts_label_t nl[] = { { "a", 1, "b", 1 } };
    cmd_ts_add_args_t fresh = { .key = "n", .klen = 1, .opts = { 10, TS_DUP_MAX, { nl, NULL, 1 } },
                                .samples = { &one, NULL, 1 } };
    ok(&c, &CMD_TS_ADD, &fresh, &cr);
    assert_true(cr.created);
    changes++;

    cmd_ts_incrby_args_t inc = { .key = "s", .klen = 1, .by = 2.5, .timestamp = 30000 };
    cmd_ts_incrby_res_t ir;
    ok(&c, &CMD_TS_INCRBY, &inc, &ir);
    inc.timestamp = 30500;
    ok(&c, &CMD_TS_DECRBY, &inc, &ir);
    assert_true(ir.timestamp == 30500);
    inc.timestamp = 10;   /* before the newest */
    cmd_err_t e = refused(&c, &CMD_TS_INCRBY, &inc, &ir);
    assert_string_equal(e.field, "timestamp");
    changes += 2;

    ts_label_t al[] = { { "room", 4, "hall", 4 } };
    cmd_ts_alter_args_t alt = { .key = "s", .klen = 1, .has_retention = true, .retention_ms = 25000,
                                .has_labels = true, .labels = { al, NULL, 1 } };
    ok(&c, &CMD_TS_ALTER, &alt, &cr);
    changes++;

    cmd_ts_del_args_t del = { "s", 1, 12000, 16000 };
    cmd_ts_del_res_t dr;
    ok(&c, &CMD_TS_DEL, &del, &dr);
    assert_true(dr.deleted > 0);
    changes++;
    del.from = 40000;   /* nothing there: no change, no record */
    del.to = 50000;
    ok(&c, &CMD_TS_DEL, &del, &dr);
    assert_int_equal(dr.deleted, 0);

    cmd_ts_deleterule_args_t dru = { "s", "d2", 1, 2 };
    ok(&c, &CMD_TS_DELETERULE, &dru, &cr);
    changes++;
    assert_int_equal(refused(&c, &CMD_TS_DELETERULE, &dru, &cr).code, CMD_E_NOT_FOUND);

    /* the source writes its destination after the rule went too */
    ts_sample_t late = { 31000, 4 };
    assert_true(add(&c, "s", &late, 1, false, TS_DUP_BLOCK, &err));
    changes++;

    /* the destinations were written (so their records' replay is checked too) */
    const char *dests[] = { "d", "d2", "old:twa" };
    for (int i = 0; i < 3; i++) {
        cmd_ts_key_args_t k = { dests[i], strlen(dests[i]) };
        cmd_ts_info_res_t info;
        ok(&c, &CMD_TS_INFO, &k, &info);
        assert_true(info.info.samples > 5);
        cmd_ts_info_free(&info);
    }
    assert_int_equal(cmd_check_replays(&c), changes);
    cmd_check_close(&c);
}

/* A rule's record holds the generation it was created with. */
static void test_rule_generation_recorded(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    create(&c, "a", 0, NULL, 0);
    create(&c, "b", 0, NULL, 0);
    rule(&c, "a", "b", TS_AGG_TWA, 0, 100, 0, TS_RULE_GEN_1);
    journal_req_t q = { 0 };
    assert_int_equal(records(&c, CMD_TS_CREATERULE.id, &q), 1);
    cmd_ts_createrule_args_t back;
    rbuf_t in = rbuf_make(q.body, q.body_len);
    const char *why;
    assert_true(CMD_TS_CREATERULE.decode(&in, &back, &why) && rbuf_done(&in));
    assert_int_equal(back.gen, TS_RULE_GEN_1);
    assert_int_equal(back.agg, TS_AGG_TWA);
    assert_true(back.bucket_ms == 100);
    ts_sample_t s[] = { { 10, 1 }, { 150, 3 }, { 260, 7 }, { 420, 2 } };
    cmd_err_t err;
    assert_true(add(&c, "a", s, 4, false, TS_DUP_BLOCK, &err));
    assert_int_equal(cmd_check_replays(&c), 4);
    cmd_check_close(&c);
}

/* A deletion before the retention window of a series with rules: refused
 * live, applied on replay (what was served is applied as it was). */
static void test_replayed_deletion_applied(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    create(&c, "r", 100, NULL, 0);
    create(&c, "r:d", 0, NULL, 0);
    rule(&c, "r", "r:d", TS_AGG_SUM, 0, 10, 0, TS_RULE_GEN_2);
    ts_sample_t s[] = { { 1000, 1 }, { 1050, 2 }, { 1099, 3 } };
    cmd_err_t err;
    assert_true(add(&c, "r", s, 3, false, TS_DUP_BLOCK, &err));
    cmd_ts_del_args_t del = { "r", 1, 0, 1060 };
    cmd_ts_del_res_t dr;
    cmd_err_t e = refused(&c, &CMD_TS_DEL, &del, &dr);
    assert_string_equal(e.field, "from");
    assert_non_null(strstr(e.message, "beyond its retention period"));

    wbuf_t rec = WBUF_INIT;
    CMD_TS_DEL.encode(&del, &rec);
    journal_req_t q = { .kind = JOURNAL_REC_COMMAND, .op = CMD_TS_DEL.id, .now_ns = CMD_CHECK_NOW_NS, .path = "",
                        .query = "", .ctype = "", .body = rec.data, .body_len = rec.len };
    assert_true(cmd_replay(&c.srv, &q, 0, &err));
    wbuf_free(&rec);
    cmd_check_close(&c);
}

/* decode && nothing left over: what replay accepts. */
static bool decodes(const cmd_def_t *def, const uint8_t *p, size_t n)
{
    alignas(max_align_t) unsigned char args[CMD_ARGS_MAX];
    rbuf_t in = rbuf_make(p, n);
    const char *why = NULL;
    return def->decode(&in, args, &why) && rbuf_done(&in);
}

/* Every cut of a record is refused, and so is a byte too many. */
static void refuse_cuts(const cmd_def_t *def, const void *args)
{
    wbuf_t b = WBUF_INIT;
    def->encode(args, &b);
    assert_false(b.oom);
    assert_true(decodes(def, b.data, b.len));
    for (size_t cut = 0; cut < b.len; cut++)
        if (decodes(def, b.data, cut))
            fail_msg("%s: a record cut at %zu of %zu bytes decodes", def->name, cut, b.len);
    wbuf_put_u8(&b, 0);
    assert_false(decodes(def, b.data, b.len));
    wbuf_free(&b);
}

/* Byte `at` of def's record of args set to v: refused. */
static void refuse_byte(const cmd_def_t *def, const void *args, size_t at, uint8_t v)
{
    wbuf_t b = WBUF_INIT;
    def->encode(args, &b);
    assert_true(at < b.len);
    b.data[at] = v;
    if (decodes(def, b.data, b.len))
        fail_msg("%s: byte %zu set to %u decodes", def->name, at, v);
    wbuf_free(&b);
}

static void test_records_refused(void **state)
{
    (void)state;
    ts_label_t lab[] = { { "room", 4, "k", 1 }, { "kind", 4, "t", 1 } };
    ts_sample_t s[] = { { 1, 2 }, { 3, NAN } };
    cmd_ts_create_args_t cre = { "key", 3, { 5, TS_DUP_SUM, { lab, NULL, 2 } } };
    cmd_ts_add_args_t add_a = { .key = "key", .klen = 3, .opts = cre.opts, .has_on_duplicate = true,
                                .on_duplicate = TS_DUP_MIN, .samples = { s, NULL, 2 } };
    cmd_ts_incrby_args_t inc = { .key = "key", .klen = 3, .opts = cre.opts, .by = -2, .timestamp = 9 };
    cmd_ts_alter_args_t alt = { .key = "key", .klen = 3, .has_policy = true, .policy = TS_DUP_MAX, .has_labels = true,
                                .labels = { lab, NULL, 2 } };
    cmd_ts_del_args_t del = { "key", 3, 1, 2 };
    cmd_ts_createrule_args_t cru = { "key", "dst", 3, 3, TS_AGG_QUANTILE, 0.5, 10, 2, TS_RULE_GEN_2 };
    cmd_ts_deleterule_args_t dru = { "key", "dst", 3, 3 };
    refuse_cuts(&CMD_TS_CREATE, &cre);
    refuse_cuts(&CMD_TS_ADD, &add_a);
    refuse_cuts(&CMD_TS_INCRBY, &inc);
    refuse_cuts(&CMD_TS_DECRBY, &inc);
    refuse_cuts(&CMD_TS_ALTER, &alt);
    refuse_cuts(&CMD_TS_DEL, &del);
    refuse_cuts(&CMD_TS_CREATERULE, &cru);
    refuse_cuts(&CMD_TS_DELETERULE, &dru);

    /* the layout: u8 version | u32 klen "key" | i64 retention | u8 policy |
     * u32 nlabels | u32 4 "room" | u32 1 "k" | u32 4 "kind" | u32 1 "t" */
    const size_t policy = 1 + 4 + 3 + 8, nlabels = policy + 1, label0 = nlabels + 4;
    const size_t after_opts = label0 + (4 + 4 + 4 + 1) * 2;
    refuse_byte(&CMD_TS_CREATE, &cre, 0, 2);                    /* a version no tally wrote */
    refuse_byte(&CMD_TS_CREATE, &cre, 1, 0);                    /* key length 3 -> 0 */
    refuse_byte(&CMD_TS_CREATE, &cre, policy - 1, 0x80);       /* a negative retention */
    refuse_byte(&CMD_TS_CREATE, &cre, policy, TS_DUP__COUNT);   /* no such policy */
    refuse_byte(&CMD_TS_CREATE, &cre, nlabels, TS_MAX_LABELS + 1);
    refuse_byte(&CMD_TS_CREATE, &cre, label0 + 4 + 1, 0);       /* a NUL in a label name */
    refuse_byte(&CMD_TS_CREATE, &cre, label0 + 4 + 4 + 4, 0xff); /* a label value that is not UTF-8 */
    refuse_byte(&CMD_TS_CREATE, &cre, label0, 0);               /* an empty label name */
    ts_label_t twice[] = { { "room", 4, "k", 1 }, { "room", 4, "t", 1 } };
    cmd_ts_create_args_t dup = { "key", 3, { 5, TS_DUP_SUM, { twice, NULL, 2 } } };
    assert_true(decodes(&CMD_TS_CREATE, NULL, 0) == false);
    wbuf_t b = WBUF_INIT;
    CMD_TS_CREATE.encode(&dup, &b);
    assert_false(decodes(&CMD_TS_CREATE, b.data, b.len));   /* one name twice */
    wbuf_free(&b);

    /* TS.ADD: | u8 has_on_duplicate | u8 on_duplicate | u32 n | n x (i64 t | f64 v) */
    refuse_byte(&CMD_TS_ADD, &add_a, after_opts, 2);
    refuse_byte(&CMD_TS_ADD, &add_a, after_opts + 1, TS_DUP__COUNT);
    refuse_byte(&CMD_TS_ADD, &add_a, after_opts + 2, 0);        /* no samples (with the bytes of two left) */
    refuse_byte(&CMD_TS_ADD, &add_a, after_opts + 2 + 4 + 7, 0x80);   /* a negative timestamp */
    ts_sample_t inf[] = { { 1, INFINITY } };
    cmd_ts_add_args_t add_inf = add_a;
    add_inf.samples = (cmd_ts_samples_t){ inf, NULL, 1 };
    b = (wbuf_t)WBUF_INIT;
    CMD_TS_ADD.encode(&add_inf, &b);
    assert_false(decodes(&CMD_TS_ADD, b.data, b.len));   /* values are finite or NaN */
    wbuf_free(&b);

    /* TS.INCRBY: | f64 by | i64 timestamp */
    cmd_ts_incrby_args_t inc_inf = inc;
    inc_inf.by = INFINITY;
    b = (wbuf_t)WBUF_INIT;
    CMD_TS_INCRBY.encode(&inc_inf, &b);
    assert_false(decodes(&CMD_TS_INCRBY, b.data, b.len));
    wbuf_free(&b);
    refuse_byte(&CMD_TS_INCRBY, &inc, after_opts + 8 + 7, 0xff);   /* a negative timestamp */

    /* TS.ALTER: u8 version | key | u8 what | i64 retention | u8 policy | labels */
    refuse_byte(&CMD_TS_ALTER, &alt, 8, 8);         /* what: an unknown flag */
    refuse_byte(&CMD_TS_ALTER, &alt, 8, 2);         /* labels given without being asked for */
    refuse_byte(&CMD_TS_ALTER, &alt, 9, 1);         /* a retention without being asked for */
    refuse_byte(&CMD_TS_ALTER, &alt, 17, TS_DUP__COUNT);

    /* TS.DEL: | i64 from | i64 to */
    refuse_byte(&CMD_TS_DEL, &del, 8 + 7, 0x80);
    refuse_byte(&CMD_TS_DEL, &del, 16 + 7, 0x80);

    /* TS.CREATERULE: u8 1 | key | key dest | u8 agg | f64 q | i64 bucket | i64 align | u8 gen */
    const size_t agg = 1 + 7 + 7;
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg, TS_AGG_NONE);
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg, TS_AGG__COUNT);
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg, TS_AGG_AVG);           /* a quantile on avg */
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg + 1 + 7, 0x7f);         /* a quantile above 1 */
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg + 1 + 8, 0);            /* a bucket of 0 ms */
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg + 1 + 8 + 8 + 7, 0x80); /* a negative alignment */
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg + 1 + 8 + 8 + 8, 3);    /* no generation 3 */
    refuse_byte(&CMD_TS_CREATERULE, &cru, agg + 1 + 8 + 8 + 8, 0);
    refuse_byte(&CMD_TS_DELETERULE, &dru, 1 + 7, 0);                  /* an empty destination */

    /* the same through replay: refused with the operation's name */
    cmd_check_t c;
    cmd_check_open(&c);
    b = (wbuf_t)WBUF_INIT;
    CMD_TS_DEL.encode(&del, &b);
    journal_req_t q = { .kind = JOURNAL_REC_COMMAND, .op = CMD_TS_DEL.id, .now_ns = CMD_CHECK_NOW_NS, .path = "",
                        .query = "", .ctype = "", .body = b.data, .body_len = b.len - 1 };
    cmd_err_t err;
    assert_false(cmd_replay(&c.srv, &q, 0, &err));
    assert_non_null(strstr(err.message, "TS.DEL record"));
    wbuf_free(&b);
    cmd_check_close(&c);
}

/* The reads: copies of what the answers show, bounded. */
static void test_reads(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    ts_label_t la[] = { { "room", 4, "k", 1 }, { "kind", 4, "temp", 4 } };
    ts_label_t lb[] = { { "room", 4, "h", 1 }, { "kind", 4, "temp", 4 } };
    create(&c, "a", 0, la, 2);
    create(&c, "b", 0, lb, 2);
    create(&c, "a:s", 0, NULL, 0);
    rule(&c, "a", "a:s", TS_AGG_SUM, 0, 100, 0, TS_RULE_GEN_2);
    ts_sample_t s[40];
    for (int i = 0; i < 40; i++)
        s[i] = (ts_sample_t){ i * 10, i };
    cmd_err_t err;
    assert_true(add(&c, "a", s, 40, false, TS_DUP_BLOCK, &err));
    assert_true(add(&c, "b", s, 20, false, TS_DUP_BLOCK, &err));

    cmd_ts_key_args_t k = { "a", 1 };
    cmd_ts_info_res_t info;
    ok(&c, &CMD_TS_INFO, &k, &info);
    assert_int_equal(info.info.samples, 40);
    /* its chunks (TS.INFO DEBUG), oldest first, hold the 40 samples */
    uint64_t in_chunks = 0;
    for (size_t i = 0; i < info.info.chunks; i++) {
        in_chunks += info.chunks[i].samples;
        assert_true(info.chunks[i].first_ts <= info.chunks[i].last_ts);
        if (i)
            assert_true(info.chunks[i - 1].last_ts < info.chunks[i].first_ts);
    }
    assert_int_equal(in_chunks, 40);
    assert_int_equal(info.chunks[0].first_ts, info.info.first_ts);
    assert_int_equal(info.chunks[info.info.chunks - 1].last_ts, info.info.last_ts);
    assert_int_equal(info.nlabels, 2);
    assert_string_equal(info.labels[1].name, "kind");
    assert_int_equal(info.nrules, 1);
    assert_memory_equal(info.rules[0].dest, "a:s", 3);
    assert_null(info.source);
    cmd_ts_info_free(&info);
    cmd_ts_key_args_t kd = { "a:s", 3 };
    ok(&c, &CMD_TS_INFO, &kd, &info);
    assert_memory_equal(info.source, "a", 1);
    cmd_ts_info_free(&info);

    cmd_ts_range_args_t ra = { "a", 1, { .from = 0, .to = TS_MAX_TIMESTAMP, .count = 3 }, false };
    cmd_ts_range_res_t rr;
    ok(&c, &CMD_TS_REVRANGE, &ra, &rr);
    assert_int_equal(rr.rows.n, 3);
    assert_true(rr.rows.s[0].ts == 390);
    cmd_ts_rows_free(&rr.rows);
    cmd_ts_range_args_t latest = { "a:s", 3, { .from = 0, .to = TS_MAX_TIMESTAMP }, true };
    ok(&c, &CMD_TS_RANGE, &latest, &rr);
    assert_int_equal(rr.rows.n, 4);   /* three closed buckets and the open one */
    assert_true(rr.rows.s[3].ts == 300 && rr.rows.s[3].value == 30 + 31 + 32 + 33 + 34 + 35 + 36 + 37 + 38 + 39);
    cmd_ts_rows_free(&rr.rows);

    /* --max-answer-size: 10 rows fit, 40 do not; EMPTY is bounded too */
    c.srv.limits.max_answer = 10 * TS_ROW_BOUND + 5;
    ra.query.count = 0;
    assert_false(cmd_check_run(&c, &CMD_TS_RANGE, &ra, &rr, CMD_CHECK_NOW_NS, &err));
    assert_non_null(strstr(err.message, "--max-answer-size"));
    ra.query.count = 10;
    ok(&c, &CMD_TS_RANGE, &ra, &rr);
    cmd_ts_rows_free(&rr.rows);
    c.srv.limits.max_answer = 0;
    ts_sample_t far[] = { { 0, 1 }, { 2000000, 2 } };
    assert_true(add(&c, "e", far, 2, false, TS_DUP_BLOCK, &err));
    ts_agg_t cnt = TS_AGG_COUNT;
    cmd_ts_range_args_t empty = { "e", 1, { .from = 0, .to = 2000000000, .agg = cnt, .bucket_ms = 1, .empty = true,
                                            .naggs = 1, .aggs = &cnt }, false };
    assert_false(cmd_check_run(&c, &CMD_TS_RANGE, &empty, &rr, CMD_CHECK_NOW_NS, &err));
    assert_string_equal(err.field, "empty");

    /* by labels */
    ts_matcher_t m;
    const char *why;
    assert_true(ts_matcher_parse("kind=temp", 9, &m, &why));
    cmd_ts_filter_t f = { &m, 1 };
    cmd_ts_keys_res_t keys;
    ok(&c, &CMD_TS_QUERYINDEX, &f, &keys);
    assert_int_equal(keys.n, 2);
    assert_string_equal(keys.k[0], "a");
    cmd_ts_keys_free(&keys);
    ts_matcher_t neg;
    assert_true(ts_matcher_parse("kind!=temp", 10, &neg, &why));
    cmd_ts_filter_t fneg = { &neg, 1 };
    assert_false(cmd_check_run(&c, &CMD_TS_QUERYINDEX, &fneg, &keys, CMD_CHECK_NOW_NS, &err));
    assert_string_equal(err.field, "filter");

    cmd_ts_name_t names[] = { { "room", 4 }, { "nope", 4 } };
    cmd_ts_mget_args_t mg = { f, { false, names, 2 }, false };
    cmd_ts_multi_res_t mr;
    ok(&c, &CMD_TS_MGET, &mg, &mr);
    assert_int_equal(mr.n, 2);
    assert_true(mr.v[1].has_sample && mr.v[1].sample.ts == 190);
    assert_int_equal(mr.v[1].nlabels, 2);
    assert_string_equal(mr.v[1].labels[0].value, "h");
    assert_null(mr.v[1].labels[1].value);
    cmd_ts_multi_free(&mr);

    ts_agg_t avg = TS_AGG_AVG;
    cmd_ts_mrange_args_t mra = { .filter = f, .sel = { true, NULL, 0 },
                                 .query = { .from = 0, .to = TS_MAX_TIMESTAMP, .agg = avg, .bucket_ms = 100,
                                            .naggs = 1, .aggs = &avg },
                                 .groupby = "kind", .reduce = TS_AGG_MAX };
    ok(&c, &CMD_TS_MREVRANGE, &mra, &mr);
    assert_int_equal(mr.n, 1);
    assert_string_equal(mr.v[0].key, "kind=temp");
    assert_int_equal(mr.v[0].rows.n, 4);
    assert_true(mr.v[0].rows.s[0].ts == 300 && mr.v[0].rows.s[0].value == 34.5);
    assert_string_equal(mr.v[0].labels[2].name, "__source__");
    assert_string_equal(mr.v[0].labels[2].value, "a,b");
    cmd_ts_multi_free(&mr);
    assert_int_equal(c.journal.len > 0, 1);
    cmd_check_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_replay),
        cmocka_unit_test(test_rule_generation_recorded),
        cmocka_unit_test(test_replayed_deletion_applied),
        cmocka_unit_test(test_records_refused),
        cmocka_unit_test(test_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
