/*
 * it_activity.c - /activity through a real tallyd: the DESIGN example, random
 * activity (JSON batches and portable-bitmap imports) checked against a
 * brute-force model for counts in both modes, paging and retention, the same
 * answers after a crash (journal) and after a snapshot reload, and every kind
 * of bad input leaving the key untouched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <roaring/roaring.h>

#include "core/activity.h"
#include "core/rng.h"
#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

static long long get_int(const char *path, const char *member)
{
    http_resp_t r = http(&T, "GET", path, NULL, NULL);
    if (r.status != 200)
        fail_msg("GET %s: %ld %s", path, r.status, r.body);
    long long v = json_int_of(&r, member);
    http_free(&r);
    return v;
}

static void day_name(int32_t day, char out[11]) { activity_format_day(day, out); }

static void test_design_example(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/activity/logins", "{\"day\":\"2026-11-21\",\"users\":[1,2,3]}", NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "added"), 3);
    assert_int_equal(json_int_of(&r, "day_users"), 3);
    http_free(&r);
    r = http(&T, "POST", "/activity/logins", "{\"day\":\"2026-11-22\",\"users\":[3,4,4294967295]}", NULL);
    assert_int_equal(json_int_of(&r, "added"), 3);
    http_free(&r);
    r = http(&T, "POST", "/activity/logins", "{\"day\":\"2026-11-22\",\"users\":[3,4]}", NULL);
    assert_int_equal(json_int_of(&r, "added"), 0);
    http_free(&r);
    assert_int_equal(get_int("/activity/logins/count?from=2026-01-01&to=2026-12-31", "users"), 5);
    assert_int_equal(get_int("/activity/logins/count?from=2026-01-01&to=2026-12-31&mode=any", "users"), 5);
    assert_int_equal(get_int("/activity/logins/count?from=2026-11-21&to=2026-11-22&mode=all", "users"), 1);
    assert_int_equal(get_int("/activity/logins/count?from=2026-11-20&to=2026-11-22&mode=all", "users"), 0);
    assert_int_equal(get_int("/activity/logins/count?from=2026-11-22&to=2026-11-22", "users"), 3);
    assert_int_equal(get_int("/activity/nobody/count?from=2026-11-22&to=2026-11-22", "users"), 0);

    r = http(&T, "GET", "/activity/logins/users?day=2026-11-22&limit=2", NULL, NULL);
    assert_status(&r, 200);
    json_t *u = json_object_get(r.json, "users");
    assert_int_equal(json_array_size(u), 2);
    assert_int_equal(json_integer_value(json_array_get(u, 0)), 3);
    assert_int_equal(json_integer_value(json_array_get(u, 1)), 4);
    assert_int_equal(json_int_of(&r, "cursor"), 4294967295LL);
    http_free(&r);
    r = http(&T, "GET", "/activity/logins/users?day=2026-11-22&cursor=4294967295", NULL, NULL);
    u = json_object_get(r.json, "users");
    assert_int_equal(json_array_size(u), 1);
    assert_true(json_is_null(json_object_get(r.json, "cursor")));
    http_free(&r);

    r = http(&T, "GET", "/activity/logins/retention?cohort=2026-11-21&days=2", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "cohort_users"), 3);
    json_t *ret = json_object_get(r.json, "retained");
    assert_int_equal(json_array_size(ret), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ret, 0), "day")), "2026-11-22");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ret, 0), "users")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ret, 1), "users")), 0);
    http_free(&r);

    r = http(&T, "GET", "/activity/logins", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "days"), 2);
    assert_int_equal(json_int_of(&r, "months"), 1);
    assert_string_equal(json_string_value(json_object_get(r.json, "first_day")), "2026-11-21");
    assert_int_equal(json_int_of(&r, "retain_days"), ACTIVITY_RETAIN_DAYS);
    http_free(&r);
    r = http(&T, "GET", "/keys/logins", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "activity");
    http_free(&r);
    r = http(&T, "GET", "/activity/nobody", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Random activity against a model                                          */
/* ------------------------------------------------------------------------ */

#define MDAYS 100          /* days of activity, starting 2025-12-10 */
#define MUSERS 3000        /* ids 0..MUSERS-1, plus a few near 2^32 */

static uint8_t model[MDAYS][MUSERS + 8];   /* model[d][u]: active; the last 8 stand for 2^32-8.. */
static int32_t mbase;

static uint32_t id_of(int u) { return u < MUSERS ? (uint32_t)u : UINT32_MAX - (uint32_t)(u - MUSERS); }

static void fill_random(uint64_t seed)
{
    rng_t g;
    rng_seed(&g, seed);
    mbase = 0;
    assert_true(activity_parse_day("2025-12-10", 10, &mbase));
    memset(model, 0, sizeof(model));
    static char body[200000];
    static uint32_t ids[MUSERS + 8];
    for (int batch = 0; batch < 260; batch++) {
        int d = (int)rng_below(&g, MDAYS);
        int n = 1 + (int)rng_below(&g, batch % 5 == 0 ? 2500 : 200);
        int style = (int)rng_below(&g, 3);
        int start = (int)rng_below(&g, MUSERS);
        for (int i = 0; i < n; i++) {
            int u = style == 0 ? (int)rng_below(&g, MUSERS + 8) : style == 1 ? (start + i) % MUSERS : (int)rng_below(&g, 400);
            ids[i] = id_of(u);
            model[d][u] = 1;
        }
        char dn[11];
        day_name(mbase + d, dn);
        http_resp_t r;
        if (batch % 3 == 0) {
            roaring_bitmap_t *bm = roaring_bitmap_of_ptr((size_t)n, ids);
            roaring_bitmap_run_optimize(bm);
            size_t len = roaring_bitmap_portable_size_in_bytes(bm);
            char *buf = malloc(len);
            roaring_bitmap_portable_serialize(bm, buf);
            char path[128];
            snprintf(path, sizeof(path), "/activity/rnd/import?day=%s", dn);
            r = http_bin(&T, "POST", path, buf, len, "application/octet-stream");
            free(buf);
            roaring_bitmap_free(bm);
        } else {
            int k = snprintf(body, sizeof(body), "{\"day\":\"%s\",\"users\":[", dn);
            for (int i = 0; i < n; i++)
                k += snprintf(body + k, sizeof(body) - (size_t)k, "%s%u", i ? "," : "", ids[i]);
            snprintf(body + k, sizeof(body) - (size_t)k, "]}");
            r = http(&T, "POST", "/activity/rnd", body, NULL);
        }
        assert_status(&r, 200);
        long long du = json_int_of(&r, "day_users"), want = 0;
        for (int u = 0; u < MUSERS + 8; u++)
            want += model[d][u];
        assert_int_equal(du, want);
        http_free(&r);
    }
}

static long long model_count(int from, int to, bool all)
{
    long long n = 0;
    for (int u = 0; u < MUSERS + 8; u++) {
        int days = 0;
        for (int d = from; d <= to; d++)
            days += d >= 0 && d < MDAYS && model[d][u];
        n += all ? days == to - from + 1 : days > 0;
    }
    return n;
}

static void check_against_model(uint64_t seed, int queries)
{
    rng_t g;
    rng_seed(&g, seed);
    char path[256], f[11], t[11];
    for (int q = 0; q < queries; q++) {
        int from = (int)rng_below(&g, MDAYS + 20) - 10, len = (int)rng_below(&g, q % 3 ? 80 : 4);
        int to = from + len;
        bool all = q % 4 == 0;
        day_name(mbase + from, f);
        day_name(mbase + to, t);
        snprintf(path, sizeof(path), "/activity/rnd/count?from=%s&to=%s&mode=%s", f, t, all ? "all" : "any");
        long long got = get_int(path, "users"), want = model_count(from, to, all);
        if (got != want)
            fail_msg("%s: tally %lld, model %lld", path, got, want);
    }
    /* paging through a few days: ids ascending, the 8 near 2^32 last */
    static long long want[MUSERS + 8];
    for (int d = 0; d < MDAYS; d += 13) {
        int nw = 0;
        for (int u = 0; u < MUSERS; u++)
            if (model[d][u])
                want[nw++] = u;
        for (int u = MUSERS + 7; u >= MUSERS; u--)
            if (model[d][u])
                want[nw++] = id_of(u);
        day_name(mbase + d, f);
        long long cursor = 0;
        int seen = 0;
        for (;;) {
            snprintf(path, sizeof(path), "/activity/rnd/users?day=%s&cursor=%lld&limit=333", f, cursor);
            http_resp_t r = http(&T, "GET", path, NULL, NULL);
            assert_status(&r, 200);
            json_t *list = json_object_get(r.json, "users");
            for (size_t i = 0; i < json_array_size(list); i++) {
                assert_true(seen < nw);
                assert_int_equal(json_integer_value(json_array_get(list, i)), want[seen++]);
            }
            json_t *c = json_object_get(r.json, "cursor");
            bool done = json_is_null(c);
            cursor = done ? 0 : json_integer_value(c);
            http_free(&r);
            if (done)
                break;
        }
        assert_int_equal(seen, nw);
    }
    /* retention */
    for (int c = 0; c < MDAYS; c += 17) {
        day_name(mbase + c, f);
        snprintf(path, sizeof(path), "/activity/rnd/retention?cohort=%s&days=30", f);
        http_resp_t r = http(&T, "GET", path, NULL, NULL);
        assert_status(&r, 200);
        long long size = 0;
        for (int u = 0; u < MUSERS + 8; u++)
            size += model[c][u];
        assert_int_equal(json_int_of(&r, "cohort_users"), size);
        json_t *ret = json_object_get(r.json, "retained");
        for (int i = 0; i < 30; i++) {
            long long kept = 0;
            for (int u = 0; u < MUSERS + 8; u++)
                kept += model[c][u] && c + 1 + i < MDAYS && model[c + 1 + i][u];
            assert_int_equal(json_integer_value(json_object_get(json_array_get(ret, (size_t)i), "users")), kept);
        }
        http_free(&r);
    }
}

static void test_against_model(void **state)
{
    (void)state;
    fill_random(99);
    check_against_model(1, 250);
    /* crash: replay the journal */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", T.dir);
    bool own = T.own_dir;
    tally_kill(&T);
    tally_start(&T, dir, NULL);
    T.own_dir = own;
    check_against_model(2, 60);
    /* clean stop: snapshot, reload */
    assert_int_equal(tally_stop(&T), 0);
    tally_start(&T, dir, NULL);
    T.own_dir = own;
    check_against_model(3, 60);
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                */
/* ------------------------------------------------------------------------ */

static void test_bad_input(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/activity/b", "{\"day\":\"2026-03-01\",\"users\":[10,20]}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "PUT", "/bits/notact", "x", "application/octet-stream");
    assert_status(&r, 200);
    http_free(&r);
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *code, *field;
    } cases[] = {
        /* dates that do not parse */
        { "POST", "/activity/b", "{\"day\":\"2026-02-30\",\"users\":[1]}", 400, "BAD_REQUEST", "day" },
        { "POST", "/activity/b", "{\"day\":\"2026-3-1\",\"users\":[1]}", 400, "BAD_REQUEST", "day" },
        { "POST", "/activity/b", "{\"day\":\"1969-12-31\",\"users\":[1]}", 400, "BAD_REQUEST", "day" },
        { "POST", "/activity/b", "{\"day\":20260301,\"users\":[1]}", 400, "BAD_REQUEST", "day" },
        { "POST", "/activity/b", "{\"users\":[1]}", 400, "BAD_REQUEST", "day" },
        { "GET", "/activity/b/count?from=2026-13-01&to=2026-12-31", NULL, 400, "BAD_REQUEST", "from" },
        { "GET", "/activity/b/count?from=2026-01-01&to=tomorrow", NULL, 400, "BAD_REQUEST", "to" },
        { "GET", "/activity/b/count?to=2026-12-31", NULL, 400, "BAD_REQUEST", "from" },
        { "GET", "/activity/b/users?day=2026-02-29", NULL, 400, "BAD_REQUEST", "day" },
        { "GET", "/activity/b/retention?cohort=2026-00-01&days=3", NULL, 400, "BAD_REQUEST", "cohort" },
        { "POST", "/activity/b/import?day=2026-02-30", "x", 400, "BAD_REQUEST", "day" },
        /* from after to; windows longer than the retained data */
        { "GET", "/activity/b/count?from=2026-12-31&to=2026-01-01", NULL, 400, "BAD_REQUEST", "from" },
        { "GET", "/activity/b/count?from=2024-01-01&to=2026-01-01", NULL, 400, "BAD_REQUEST", "to" },
        { "GET", "/activity/b/retention?cohort=2026-03-01&days=731", NULL, 400, "BAD_REQUEST", "days" },
        { "GET", "/activity/b/retention?cohort=2026-03-01&days=0", NULL, 400, "BAD_REQUEST", "days" },
        { "GET", "/activity/b/count?from=2026-01-01&to=2026-12-31&mode=some", NULL, 400, "BAD_REQUEST", "mode" },
        /* user ids outside 32 bits, and other bad users */
        { "POST", "/activity/b", "{\"day\":\"2026-03-02\",\"users\":[1,4294967296]}", 400, "BAD_REQUEST", "users[1]" },
        { "POST", "/activity/b", "{\"day\":\"2026-03-02\",\"users\":[-1]}", 400, "BAD_REQUEST", "users[0]" },
        { "POST", "/activity/b", "{\"day\":\"2026-03-02\",\"users\":[1.5]}", 400, "BAD_REQUEST", "users[0]" },
        { "POST", "/activity/b", "{\"day\":\"2026-03-02\",\"users\":[\"7\"]}", 400, "BAD_REQUEST", "users[0]" },
        { "POST", "/activity/b", "{\"day\":\"2026-03-02\",\"users\":[]}", 400, "BAD_REQUEST", "users" },
        { "POST", "/activity/b", "{\"day\":\"2026-03-02\",\"users\":7}", 400, "BAD_REQUEST", "users" },
        { "POST", "/activity/b", "{\"day\":\"2026-03-02\",\"users\":[1],\"ttl\":5}", 400, "BAD_REQUEST", "ttl" },
        { "GET", "/activity/b/users?day=2026-03-01&cursor=4294967296", NULL, 400, "BAD_REQUEST", "cursor" },
        { "GET", "/activity/b/users?day=2026-03-01&limit=10001", NULL, 400, "BAD_REQUEST", "limit" },
        /* a day older than the retained range */
        { "POST", "/activity/b", "{\"day\":\"2024-02-29\",\"users\":[1]}", 400, "BAD_REQUEST", "day" },
        /* import bodies that are not portable Roaring bitmaps */
        { "POST", "/activity/b/import?day=2026-03-02", "{\"users\":[1]}", 400, "BAD_REQUEST", NULL },
        { "POST", "/activity/b/import?day=2026-03-02", "\x3a\x30\x00\x00\x01\x00\x00\x00", 400, "BAD_REQUEST", NULL },
        { "POST", "/activity/b/import", "", 400, "BAD_REQUEST", "day" },
        /* wrong key type */
        { "POST", "/activity/notact", "{\"day\":\"2026-03-02\",\"users\":[1]}", 409, "WRONGTYPE", NULL },
        { "GET", "/activity/notact/count?from=2026-03-01&to=2026-03-02", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/activity/notact/users?day=2026-03-01", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/activity/notact/retention?cohort=2026-03-01&days=1", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/activity/notact", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/bits/b/count", NULL, 409, "WRONGTYPE", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool raw = strstr(cases[i].path, "/import") != NULL;
        http_resp_t h = raw ? http_bin(&T, cases[i].method, cases[i].path, cases[i].body,
                                       cases[i].body ? (cases[i].body[0] == '\x3a' ? 8 : strlen(cases[i].body)) : 0,
                                       "application/octet-stream")
                            : http(&T, cases[i].method, cases[i].path, cases[i].body, NULL);
        if (h.status != cases[i].status)
            fail_msg("case %zu (%s %s): expected %d, got %ld %s", i, cases[i].method, cases[i].path, cases[i].status,
                     h.status, h.body);
        assert_error(&h, cases[i].status, cases[i].code);
        const char *f = json_string_value(json_object_get(json_object_get(h.json, "error"), "field"));
        if (cases[i].field && (!f || strcmp(f, cases[i].field) != 0))
            fail_msg("case %zu: expected field %s in %s", i, cases[i].field, h.body);
        http_free(&h);
        /* nothing changed */
        h = http(&T, "GET", "/activity/b", NULL, NULL);
        assert_int_equal(json_int_of(&h, "days"), 1);
        http_free(&h);
        assert_int_equal(get_int("/activity/b/count?from=2026-01-01&to=2026-12-31", "users"), 2);
        h = http(&T, "GET", "/bits/notact", NULL, NULL);
        assert_int_equal(h.len, 1);
        http_free(&h);
    }
    /* the newest day moves the range: a day is kept with the day 730 days
     * later, dropped with the one after (days relative to today: days more
     * than one ahead of the server's UTC date are refused) */
    int32_t today = (int32_t)(time(NULL) / 86400);
    char d_old[11], d_now[11], d_next[11], d_far[11], body[128], path[160], count[160];
    day_name(today - 730, d_old);
    day_name(today, d_now);
    day_name(today + 1, d_next);
    day_name(today + 2, d_far);
    snprintf(count, sizeof(count), "/activity/mv/count?from=%s&to=%s", d_old, d_old);
    snprintf(body, sizeof(body), "{\"day\":\"%s\",\"users\":[1,2]}", d_old);
    r = http(&T, "POST", "/activity/mv", body, NULL);
    assert_status(&r, 200);
    http_free(&r);
    snprintf(body, sizeof(body), "{\"day\":\"%s\",\"users\":[99]}", d_now);
    r = http(&T, "POST", "/activity/mv", body, NULL);
    assert_status(&r, 200);
    http_free(&r);
    assert_int_equal(get_int(count, "users"), 2);
    /* a day too far ahead (9999-12-31 used to wipe the key's whole range) is
     * refused and changes nothing */
    for (int i = 0; i < 2; i++) {
        const char *far = i ? "9999-12-31" : d_far;
        snprintf(body, sizeof(body), "{\"day\":\"%s\",\"users\":[99]}", far);
        r = http(&T, "POST", "/activity/mv", body, NULL);
        assert_error(&r, 400, "BAD_REQUEST");
        assert_non_null(strstr(r.body, "future"));
        http_free(&r);
        snprintf(path, sizeof(path), "/activity/mv/import?day=%s", far);
        r = http_bin(&T, "POST", path, "\x3a\x30\0\0\0\0\0\0", 8, "application/octet-stream");
        assert_error(&r, 400, "BAD_REQUEST");
        http_free(&r);
        assert_int_equal(get_int(count, "users"), 2);
    }
    snprintf(body, sizeof(body), "{\"day\":\"%s\",\"users\":[99]}", d_next);
    r = http(&T, "POST", "/activity/mv", body, NULL);
    assert_status(&r, 200);
    http_free(&r);
    assert_int_equal(get_int(count, "users"), 0);
    snprintf(body, sizeof(body), "{\"day\":\"%s\",\"users\":[1]}", d_old);
    r = http(&T, "POST", "/activity/mv", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_example),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_against_model),
    };
    return cmocka_run_group_tests_name("activity", tests, setup, teardown);
}
