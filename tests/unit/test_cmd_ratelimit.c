/*
 * test_cmd_ratelimit.c - the rate-limiting operations (cmd/throttle.h) on
 * their own, linked with cmd and core only: redis-cell's CL.THROTTLE
 * answers, every algorithm's decision, batches (all or nothing), resets;
 * every change journals one command record that replays to the same keys
 * (cmd_check_replays), a refusal journals nothing, and the decoders refuse
 * records no tally wrote.
 */
#include <stdlib.h>

#include "cmd/counter.h"
#include "cmd/throttle.h"
#include "cmd/zone.h"
#include "core/rng.h"
#include "tests/unit/cmd_check.h"

#define T0 CMD_CHECK_NOW_NS
#define SEC NS_PER_SEC

static cmd_throttle_item_t gcra(const char *key, int64_t burst, int64_t count, int64_t period_s, int64_t q)
{
    cmd_throttle_item_t it = { .key = key, .klen = strlen(key), .quantity = q };
    it.p.algo = THROTTLE_GCRA;
    it.p.u.gcra = (gcra_params_t){ burst, count, period_s * SEC };
    return it;
}

static cmd_throttle_item_t counted(throttle_algo_t algo, const char *key, int64_t max, int64_t period_s, int64_t q)
{
    cmd_throttle_item_t it = { .key = key, .klen = strlen(key), .quantity = q };
    it.p.algo = algo;
    if (algo == THROTTLE_SLIDING_LOG)
        it.p.u.log = (slog_params_t){ max, period_s * SEC };
    else
        it.p.u.win = (window_params_t){ max, period_s * SEC };
    return it;
}

static cmd_throttle_item_t bucket(const char *key, int64_t capacity, int64_t rate_micro, int64_t q)
{
    cmd_throttle_item_t it = { .key = key, .klen = strlen(key), .quantity = q };
    it.p.algo = THROTTLE_TOKEN_BUCKET;
    it.p.u.tb = (tbucket_params_t){ capacity, rate_micro };
    return it;
}

/* One decision through its algorithm's operation. */
static bool decide(cmd_check_t *c, const cmd_throttle_item_t *it, int64_t now_ns, rl_result_t *r, cmd_err_t *err)
{
    cmd_throttle_res_t res;
    bool ok = cmd_check_run(c, cmd_throttle_def(it->p.algo), it, &res, now_ns, err);
    if (ok && r)
        *r = res.r;
    return ok;
}

static int64_t secs_up(int64_t ns) { return rl_ceil_div(ns, SEC); }

/* redis-cell's answers: its README's CL.THROTTLE user123 15 30 60 and its
 * unit test's sequence (max_burst 4, one per second), durations rounded up
 * to whole seconds as on the wire. */
static void test_cl_throttle_redis_cell(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    rl_result_t r = { 0 };
    cmd_throttle_item_t it = gcra("user123", 15, 30, 60, 1);
    assert_true(decide(&c, &it, T0, &r, NULL));
    assert_true(r.allowed);
    assert_int_equal(r.limit, 16);
    assert_int_equal(r.remaining, 15);
    assert_int_equal(r.retry_after_ns, RL_NEVER);
    assert_int_equal(secs_up(r.reset_after_ns), 2);

    /* quantity 6 over a limit of 5 never fits: limited, nothing recorded */
    it = gcra("cell", 4, 1, 1, 6);
    size_t before = c.journal.len;
    assert_true(decide(&c, &it, T0, &r, NULL));
    assert_false(r.allowed);
    assert_int_equal(r.limit, 5);
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.retry_after_ns, RL_NEVER);
    assert_int_equal(c.journal.len, before);
    it.quantity = 1;
    for (int i = 0; i < 5; i++) {
        assert_true(decide(&c, &it, T0, &r, NULL));
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 4 - i);
        assert_int_equal(secs_up(r.reset_after_ns), i + 1);
    }
    assert_true(decide(&c, &it, T0, &r, NULL));
    assert_false(r.allowed);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(secs_up(r.retry_after_ns), 1);
    assert_int_equal(secs_up(r.reset_after_ns), 5);
    assert_true(decide(&c, &it, T0 + 3 * SEC, &r, NULL));
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(secs_up(r.reset_after_ns), 3);
    /* a peek (quantity 0) reports and records nothing */
    before = c.journal.len;
    it.quantity = 0;
    assert_true(decide(&c, &it, T0 + 3 * SEC, &r, NULL));
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(c.journal.len, before);
    assert_int_equal(cmd_check_replays(&c), 7);
    cmd_check_close(&c);
}

/* Every algorithm, seeded sequences of keys, times and quantities, shadow
 * items: each allowed decision journals one record, and the records replay
 * to the same limiters.  A decision with another algorithm than the key's
 * is refused (WRONGTYPE) and changes nothing. */
static void test_decisions_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    rng_t g;
    rng_seed(&g, 38);
    static const char *const keys[] = { "a", "b", "c", "d", "e", "f" };
    int64_t now = T0;
    int records = 0;
    for (int i = 0; i < 600; i++) {
        now += (int64_t)rng_below(&g, 400) * 1000000;
        size_t k = rng_below(&g, 6);
        char key[32];
        snprintf(key, sizeof(key), "%s.%s", keys[k],
                 (const char *[]){ "gcra", "log", "sw", "fw", "tb" }[k % 5]);
        int64_t q = (int64_t)rng_below(&g, 4);
        cmd_throttle_item_t it;
        switch (k % 5) {
        case 0: it = gcra(key, 3, 10, 2, q); break;
        case 1: it = counted(THROTTLE_SLIDING_LOG, key, 5, 3, q); break;
        case 2: it = counted(THROTTLE_SLIDING_WINDOW, key, 7, 2, q); break;
        case 3: it = counted(THROTTLE_FIXED_WINDOW, key, 6, 1, q); break;
        default: it = bucket(key, 4, 2500000, q); break;
        }
        it.shadow = rng_below(&g, 5) == 0;
        size_t before = c.journal.len;
        rl_result_t r = { 0 };
        cmd_err_t err;
        assert_true(decide(&c, &it, now, &r, &err));
        bool recorded = c.journal.len != before;
        assert_int_equal(recorded, r.allowed && q > 0);
        records += recorded;
    }
    assert_true(records > 100);
    /* another algorithm on a GCRA key (taken just now: it has not expired) */
    cmd_throttle_item_t taken = gcra("a.gcra", 3, 10, 2, 1);
    assert_true(decide(&c, &taken, now, NULL, NULL));
    records++;
    cmd_throttle_item_t other = counted(THROTTLE_FIXED_WINDOW, "a.gcra", 5, 60, 1);
    size_t before = c.journal.len;
    cmd_err_t err;
    assert_false(decide(&c, &other, now, NULL, &err));
    assert_int_equal(err.code, CMD_E_WRONGTYPE);
    assert_string_equal(err.message, "key 'a.gcra' holds gcra limiter state; this request uses fixed_window "
                                     "(DELETE /throttle/{key} resets it)");
    assert_int_equal(c.journal.len, before);
    /* an operation given another algorithm's parameters is an internal error */
    cmd_throttle_res_t res;
    assert_false(cmd_check_run(&c, &CMD_CL_THROTTLE, &other, &res, now, &err));
    assert_int_equal(err.code, CMD_E_INTERNAL);
    assert_int_equal(cmd_check_replays(&c), records);
    cmd_check_close(&c);
}

static bool batch(cmd_check_t *c, const cmd_throttle_item_t *items, size_t n, rl_result_t *rs, int64_t now_ns,
                  bool *all, cmd_err_t *err)
{
    cmd_throttle_batch_args_t a = { .items = items, .n = n, .results = rs };
    cmd_throttle_batch_res_t r;
    bool ok = cmd_check_run(c, &CMD_THROTTLE_BATCH, &a, &r, now_ns, err);
    if (ok)
        *all = r.all;
    return ok;
}

/* A batch is all or nothing: one limited item and nothing is recorded (the
 * allowed items report what the stored state allows), a limited shadow item
 * refuses nothing, later items on a key see what earlier ones recorded;
 * mixed algorithms; the records replay (through their packed items). */
static void test_batch_all_or_nothing(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    rl_result_t rs[4];
    bool all;
    cmd_err_t err;
    cmd_throttle_item_t two[2] = { gcra("u", 1, 1, 60, 1), counted(THROTTLE_FIXED_WINDOW, "v", 1, 60, 1) };
    assert_true(batch(&c, two, 2, rs, T0, &all, &err));
    assert_true(all);
    assert_int_equal(rs[0].remaining, 1);
    assert_int_equal(rs[1].remaining, 0);
    size_t before = c.journal.len;
    assert_true(before > 0);
    /* v is used up: nothing of u is taken either */
    assert_true(batch(&c, two, 2, rs, T0, &all, &err));
    assert_false(all);
    assert_true(rs[0].allowed);
    assert_int_equal(rs[0].remaining, 1);   /* what the stored state allows now, not after the refused batch */
    assert_false(rs[1].allowed);
    assert_int_equal(c.journal.len, before);
    /* the same with v in shadow mode: recorded */
    two[1].shadow = true;
    assert_true(batch(&c, two, 2, rs, T0, &all, &err));
    assert_true(all);
    assert_int_equal(rs[0].remaining, 0);
    assert_true(c.journal.len > before);
    /* one key twice: the second item sees the first's */
    cmd_throttle_item_t same[3] = { bucket("w", 3, 1000000, 2), bucket("w", 3, 1000000, 1),
                                    counted(THROTTLE_SLIDING_LOG, "x", 4, 10, 3) };
    assert_true(batch(&c, same, 3, rs, T0 + SEC / 2, &all, &err));
    assert_true(all);
    assert_int_equal(rs[0].remaining, 1);
    assert_int_equal(rs[1].remaining, 0);
    assert_int_equal(rs[2].remaining, 1);
    assert_true(batch(&c, same, 3, rs, T0 + SEC, &all, &err));
    assert_false(all);
    /* a batch without decisions wanted (as replay runs it) */
    cmd_throttle_item_t later[1] = { counted(THROTTLE_SLIDING_LOG, "x", 4, 10, 1) };
    assert_true(batch(&c, later, 1, NULL, T0 + 2 * SEC, &all, &err));
    assert_true(all);
    /* a key of another algorithm refuses the whole batch */
    cmd_throttle_item_t wrong[2] = { gcra("y", 5, 5, 5, 1), gcra("w", 5, 5, 5, 1) };
    before = c.journal.len;
    assert_false(batch(&c, wrong, 2, rs, T0 + 2 * SEC, &all, &err));
    assert_int_equal(err.code, CMD_E_WRONGTYPE);
    assert_int_equal(c.journal.len, before);
    /* many keys at once, replayed */
    enum { N = 300 };
    cmd_throttle_item_t *many = calloc(N, sizeof(*many));
    rl_result_t *mrs = calloc(N, sizeof(*mrs));
    char (*names)[16] = calloc(N, 16);
    assert_true(many && mrs && names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], 16, "m%d", i % 120);
        many[i] = i % 2 ? gcra(names[i], 10, 10, 10, 1) : gcra(names[i], 10, 10, 10, 2);
    }
    assert_true(batch(&c, many, N, mrs, T0 + 3 * SEC, &all, &err));
    assert_true(all);
    assert_int_equal(cmd_check_replays(&c), 5);
    free(many);
    free(mrs);
    free(names);
    cmd_check_close(&c);
}

/* One batch adds at most CMD_WORK_VALUES x --max-value-size of limiter
 * state: past it the batch is refused (naming the bound) and nothing is
 * taken; a state past --max-value-size is refused too. */
static void test_batch_bounds(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    c.srv.limits.max_value = 4096;
    enum { N = 64 };
    cmd_throttle_item_t items[N];
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "s%d", i);
        items[i] = counted(THROTTLE_SLIDING_LOG, names[i], 1000, 60, 100);
    }
    rl_result_t rs[N];
    bool all;
    cmd_err_t err;
    assert_false(batch(&c, items, N, rs, T0, &all, &err));
    assert_int_equal(err.code, CMD_E_BAD_REQUEST);
    assert_string_equal(err.field, "requests");
    assert_non_null(strstr(err.message, "the batch would add more than 4 x --max-value-size (16384 bytes)"));
    assert_int_equal(c.journal.len, 0);
    cmd_throttle_item_t big = counted(THROTTLE_SLIDING_LOG, "big", 100000, 60, 1000);
    assert_false(decide(&c, &big, T0, NULL, &err));
    assert_int_equal(err.code, CMD_E_BAD_REQUEST);
    assert_non_null(strstr(err.message, "the limiter's state"));
    assert_int_equal(c.journal.len, 0);
    cmd_check_close(&c);
}

/* THROTTLE.RESET deletes a limiter (journaled), reports a missing one
 * (nothing journaled), refuses a key of another type. */
static void test_reset(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    cmd_throttle_item_t it = gcra("r", 2, 1, 60, 1);
    assert_true(decide(&c, &it, T0, NULL, NULL));
    it.key = "r2";
    it.klen = 2;
    assert_true(decide(&c, &it, T0, NULL, NULL));
    cmd_throttle_reset_args_t a = { "r", 1 };
    cmd_throttle_reset_res_t r;
    cmd_err_t err;
    assert_true(cmd_check_run(&c, &CMD_THROTTLE_RESET, &a, &r, T0 + SEC, &err));
    assert_true(r.deleted);
    size_t before = c.journal.len;
    assert_true(cmd_check_run(&c, &CMD_THROTTLE_RESET, &a, &r, T0 + SEC, &err));
    assert_false(r.deleted);
    assert_int_equal(c.journal.len, before);
    cmd_incrby_args_t inc = { .key = "n", .klen = 1, .by = 1 };
    cmd_counter_res_t cr;
    assert_true(cmd_check_run(&c, &CMD_INCRBY, &inc, &cr, T0, &err));
    cmd_throttle_reset_args_t n = { "n", 1 };
    assert_false(cmd_check_run(&c, &CMD_THROTTLE_RESET, &n, &r, T0 + SEC, &err));
    assert_int_equal(err.code, CMD_E_WRONGTYPE);
    /* a decision on a key of another type is refused the same way */
    cmd_throttle_item_t on_counter = gcra("n", 2, 1, 60, 1);
    assert_false(decide(&c, &on_counter, T0, NULL, &err));
    assert_int_equal(err.code, CMD_E_WRONGTYPE);
    assert_int_equal(cmd_check_replays(&c), 4);
    cmd_check_close(&c);
}

/* Keys of the longest length: records past the caller's stack storage
 * (cmd_call's 256 bytes) are written whole on the heap and replay. */
static void test_long_keys(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    static char k1[KS_KEY_MAX + 1], k2[KS_KEY_MAX + 1];
    memset(k1, 'a', KS_KEY_MAX);
    memset(k2, 'b', KS_KEY_MAX);
    cmd_throttle_item_t one = gcra(k1, 3, 10, 60, 2);
    assert_true(decide(&c, &one, T0, NULL, NULL));
    cmd_throttle_item_t two[2] = { bucket(k2, 4, 1000000, 1), gcra(k1, 3, 10, 60, 1) };
    rl_result_t rs[2];
    bool all;
    cmd_err_t err;
    assert_true(batch(&c, two, 2, rs, T0 + SEC, &all, &err));
    assert_true(all);
    assert_int_equal(rs[1].remaining, 1);   /* 4 less the 3 taken (one emission interval is 6 s) */
    cmd_throttle_reset_args_t r = { k2, KS_KEY_MAX };
    cmd_throttle_reset_res_t rr;
    assert_true(cmd_check_run(&c, &CMD_THROTTLE_RESET, &r, &rr, T0 + SEC, &err));
    assert_true(rr.deleted);
    assert_int_equal(cmd_check_replays(&c), 3);
    cmd_check_close(&c);
}

/* A record's bytes through cmd_replay on a fresh server. */
static bool replays(const cmd_def_t *def, const uint8_t *p, size_t n, cmd_err_t *err)
{
    cmd_check_t r;
    cmd_check_open(&r);
    journal_req_t q = { .kind = JOURNAL_REC_COMMAND, .op = def->id, .now_ns = T0, .path = "", .query = "",
                        .ctype = "", .body = p, .body_len = n };
    bool ok = cmd_replay(&r.srv, &q, 0, err);
    cmd_check_close(&r);
    return ok;
}

/* Every cut of a valid record is refused, and so is every record with one
 * of its bytes garbled into a value no tally writes. */
static void check_refused(const cmd_def_t *def, const void *args, const size_t *garble, const uint8_t *bad, size_t nbad)
{
    wbuf_t b = WBUF_INIT;
    def->encode(args, &b);
    assert_false(b.oom);
    cmd_err_t err;
    if (!replays(def, b.data, b.len, &err))
        fail_msg("%s: a valid record refused: %s", def->name, err.message);
    for (size_t cut = 0; cut < b.len; cut++)
        if (replays(def, b.data, cut, &err))
            fail_msg("%s: a record cut at %zu of %zu bytes replayed", def->name, cut, b.len);
    uint8_t *longer = malloc(b.len + 1);
    assert_non_null(longer);
    memcpy(longer, b.data, b.len);
    longer[b.len] = 0;
    assert_false(replays(def, longer, b.len + 1, &err));   /* trailing garbage */
    free(longer);
    for (size_t i = 0; i < nbad; i++) {
        uint8_t keep = b.data[garble[i]];
        b.data[garble[i]] = bad[i];
        if (replays(def, b.data, b.len, &err))
            fail_msg("%s: byte %zu set to %u replayed", def->name, garble[i], bad[i]);
        b.data[garble[i]] = keep;
    }
    wbuf_free(&b);
}

static void test_bad_records_refused(void **state)
{
    (void)state;
    /* decision: u8 version | u32 klen | key "k" | u8 flags | i64 quantity | params */
    enum { KEYLEN = 1, FLAGS = 1 + 4 + KEYLEN, QUANTITY = FLAGS + 1, PARAMS = QUANTITY + 8 };
    cmd_throttle_item_t g = gcra("k", 5, 10, 60, 1);
    const size_t gi[] = { 0, 1, 1, 4, FLAGS, QUANTITY + 7, PARAMS + 7, PARAMS + 8, PARAMS + 16, PARAMS + 23 };
    const uint8_t gb[] = { 2, 0, 0xff, 0x80, 2, 0x80, 0x80, 0, 1, 0x7f };
    /* version 2; key length 0, past the record and past 2^31; flags 2; quantity < 0; max_burst < 0; count 0;
     * a period of whole seconds and 1 ns; a period past the largest */
    check_refused(&CMD_CL_THROTTLE, &g, gi, gb, sizeof(gi) / sizeof(gi[0]));
    cmd_throttle_item_t l = counted(THROTTLE_SLIDING_LOG, "k", 5, 60, 1);
    const size_t li[] = { 0, PARAMS + 7, PARAMS + 6, PARAMS + 8 };
    const uint8_t lb[] = { 0, 0x80, 0xff, 7 };   /* version 0; max_count < 0, past 10^15; a period of 60 s and 7 ns */
    check_refused(&CMD_THROTTLE_SLIDING_LOG, &l, li, lb, sizeof(li) / sizeof(li[0]));
    cmd_throttle_item_t w = counted(THROTTLE_SLIDING_WINDOW, "k", 5, 60, 1);
    check_refused(&CMD_THROTTLE_SLIDING_WINDOW, &w, li, lb, sizeof(li) / sizeof(li[0]));
    cmd_throttle_item_t f = counted(THROTTLE_FIXED_WINDOW, "k", 5, 60, 1);
    check_refused(&CMD_THROTTLE_FIXED_WINDOW, &f, li, lb, sizeof(li) / sizeof(li[0]));
    cmd_throttle_item_t t = bucket("k", 5, 1000000, 1);
    const size_t ti[] = { 0, PARAMS, PARAMS + 7, PARAMS + 15 };
    const uint8_t tb[] = { 3, 0, 0x80, 0x80 };
    /* version 3; capacity 0 (5 -> 0); capacity < 0; refill rate < 0 */
    check_refused(&CMD_THROTTLE_TOKEN_BUCKET, &t, ti, tb, sizeof(ti) / sizeof(ti[0]));

    /* batch: u8 version | u32 n | (u8 algorithm | item)... */
    cmd_throttle_item_t items[2] = { gcra("k", 5, 10, 60, 1), bucket("j", 5, 1000000, 1) };
    cmd_throttle_batch_args_t ba = { .items = items, .n = 2 };
    const size_t bi[] = { 0, 1, 1, 4, 5, 5, 5 + PARAMS + 24, 5 + PARAMS + 24 };   /* the second item's algorithm */
    const uint8_t bb[] = { 9, 0, 3, 0x80, 0, 6, 0, 6 };
    /* version 9; n 0 or more items than there are; n past the maximum; algorithm 0 or 6 for either item */
    check_refused(&CMD_THROTTLE_BATCH, &ba, bi, bb, sizeof(bi) / sizeof(bi[0]));

    /* reset: u8 version | key */
    cmd_throttle_reset_args_t ra = { "k", 1 };
    const size_t ri[] = { 0, 1, 2 };
    const uint8_t rb[] = { 0, 0, 1 };
    check_refused(&CMD_THROTTLE_RESET, &ra, ri, rb, sizeof(ri) / sizeof(ri[0]));
}

/* A calendar fixed_window (kind, zone name, anchors). */
static cmd_throttle_item_t calendar(const char *key, int64_t max, cal_kind_t kind, const char *zone, uint8_t ws,
                                    uint8_t anchor, int64_t q)
{
    cmd_throttle_item_t it = counted(THROTTLE_FIXED_WINDOW, key, max, cal_nominal_s(kind), q);
    const char *why = NULL;
    it.p.cal = (cal_spec_t){ (uint8_t)kind, ws, anchor, cmd_zone_get(zone, strlen(zone), &why) };
    assert_non_null(it.p.cal.zone);
    return it;
}

/* Calendar decisions journal their calendar and zone: the records replay
 * alone to the same keys, across a local midnight, alone and in a batch;
 * records with a bad calendar are refused. */
static void test_calendar_records(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    int records = 0;
    /* 2023-11-14T22:13:20Z + steps of 7 minutes: past midnight in Paris (23:00Z) */
    int64_t now = 1700000000LL * SEC;
    for (int i = 0; i < 20; i++, now += 7 * 60 * SEC) {
        cmd_throttle_item_t it = calendar("paris", 5, CAL_DAY, "Europe/Paris", 0, 0, 1);
        rl_result_t r = { 0 };
        size_t before = c.journal.len;
        assert_true(decide(&c, &it, now, &r, NULL));
        records += c.journal.len != before;
        int64_t midnight = 1700002800LL * SEC;   /* 2023-11-15T00:00+01:00 */
        assert_int_equal(r.allowed, now < midnight ? i < 5 : i - 7 < 5);
        if (r.allowed)
            assert_int_equal(r.reset_after_ns, (now < midnight ? midnight : midnight + 86400 * SEC) - now);
        cmd_throttle_item_t two[2] = { calendar("bill", 100, CAL_MONTH, "America/New_York", 0, 31, 1),
                                       calendar("week", 100, CAL_WEEK, "Asia/Kathmandu", 7, 0, 1) };
        rl_result_t rs[2];
        bool all;
        cmd_throttle_batch_args_t a = { .items = two, .n = 2, .results = rs };
        cmd_throttle_batch_res_t br;
        assert_true(cmd_check_run(&c, &CMD_THROTTLE_BATCH, &a, &br, now, NULL));
        all = br.all;
        assert_true(all);
        records++;
        assert_int_equal(rs[0].reset_after_ns, 1701320400LL * SEC - now);   /* 2023-11-30T00:00-05:00 */
    }
    assert_int_equal(cmd_check_replays(&c), records);
    cmd_check_close(&c);

    enum { KEYLEN = 1, FLAGS = 1 + 4 + KEYLEN, QUANTITY = FLAGS + 1, PARAMS = QUANTITY + 8, CAL = PARAMS + 16 };
    cmd_throttle_item_t f = calendar("k", 5, CAL_MONTH, "Europe/Paris", 0, 31, 1);
    const size_t fi[] = { FLAGS, CAL, CAL, CAL, CAL + 1, CAL + 2, CAL + 2, CAL + 3, CAL + 3, CAL + 4, CAL + 10,
                          PARAMS + 10 };
    const uint8_t fb[] = { 0, 0, 6, CAL_DAY, 1, 0, 32, 0, 40, '.', '+', 0 };
    /* no calendar flag (the calendar's bytes then trail); kind 0, 6, day (with an anchor); a week_start for a
     * month; anchor 0, 32; an empty zone name, one past the record; a dot in it; another name
     * (Europe+Paris); a period that is not the calendar's */
    check_refused(&CMD_THROTTLE_FIXED_WINDOW, &f, fi, fb, sizeof(fi) / sizeof(fi[0]));
    cmd_throttle_item_t sw = counted(THROTTLE_SLIDING_WINDOW, "k", 5, 60, 1);
    const size_t si[] = { FLAGS };
    const uint8_t sb[] = { 2 };   /* the calendar flag on a sliding window */
    check_refused(&CMD_THROTTLE_SLIDING_WINDOW, &sw, si, sb, 1);
}

/* The decisions share their access class and flags (routes name
 * CL.THROTTLE for them all); each algorithm has its operation. */
static void test_table_rows(void **state)
{
    (void)state;
    for (int a = THROTTLE_GCRA; a <= THROTTLE_ALGO_MAX; a++) {
        const cmd_def_t *d = cmd_throttle_def((throttle_algo_t)a);
        assert_non_null(d);
        assert_int_equal(d->access, CMD_CL_THROTTLE.access);
        assert_int_equal(d->flags, CMD_CL_THROTTLE.flags);
        assert_ptr_equal(cmd_def_by_id(d->id), d);
        assert_ptr_equal(cmd_def_by_name(d->name, strlen(d->name)), d);
        assert_true(d->id >= 200 && d->id <= 299);
    }
    assert_null(cmd_throttle_def((throttle_algo_t)0));
    assert_int_equal(CMD_CL_THROTTLE.access, CMD_ACCESS_RATELIMIT);
    assert_true(CMD_CL_THROTTLE.flags & CMD_F_WRITE);
    assert_int_equal(CMD_THROTTLE_BATCH.access, CMD_ACCESS_RATELIMIT);
    assert_int_equal(CMD_THROTTLE_RESET.access, CMD_ACCESS_WRITE);
    assert_ptr_equal(cmd_def_by_name("cl.throttle", 11), &CMD_CL_THROTTLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cl_throttle_redis_cell),
        cmocka_unit_test(test_decisions_replay),
        cmocka_unit_test(test_batch_all_or_nothing),
        cmocka_unit_test(test_batch_bounds),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_long_keys),
        cmocka_unit_test(test_bad_records_refused),
        cmocka_unit_test(test_calendar_records),
        cmocka_unit_test(test_table_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
